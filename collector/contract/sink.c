/*
 * sink.c - DESIGN: holds the output side the preload hands down (sink.h),
 * so that the collector - configuration and the flush thread - reaches the
 * handlers through one pointer and never by name; and the one list of the
 * trace's reserved top-level keys (vocab.h), which the configuration
 * refuses in TRAINPROF_METADATA and the chrome handler skips.
 */
#include "sink.h"
#include "vocab.h"

#include <stddef.h>

#include <stdatomic.h>

static const struct tp_sink *_Atomic tp_the_sink;

void tp_sink_set(const struct tp_sink *s)
{
    atomic_store(&tp_the_sink, s);
}

const struct tp_sink *tp_sink_get(void)
{
    return atomic_load(&tp_the_sink);
}

const char *const tp_metadata_reserved[] = {
    "schemaVersion", "deviceProperties", "distributedInfo", "trainprof",
    "displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "traceName",
    /* catapult reads these top-level keys itself (trace_event_importer.html) */
    "systemTraceEvents", "samples", "stackFrames", "traceAnnotations", "powerTraceAsString",
    NULL,
};
