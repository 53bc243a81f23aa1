/*
 * sink.c - DESIGN: holds the output side the preload hands down (sink.h),
 * so that the collector - configuration and the flush thread - reaches the
 * handlers through one pointer and never by name.
 */
#include "sink.h"

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
