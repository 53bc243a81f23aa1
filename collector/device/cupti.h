/*
 * cupti.h - the device side: CUPTI's Activity API, loaded at run time.
 *
 * libcupti is never linked: tp_cupti_start() reuses a copy already loaded in
 * the process or dlopen()s one (TRAINPROF_CUPTI_PATH, the directory of the
 * loaded libcuda/libcudart, $CUDA_HOME, the default search path), requires
 * CUPTI >= 13, subscribes with cuptiSubscribe_v2 and enables the activity
 * kinds.  CUPTI hands completed buffers to a callback on its own threads;
 * decoding happens on tp-flush, in tp_cupti_collect(), which turns every
 * record into a fixed struct below (times in tp_clock ticks: our clock, read
 * as ns by tp_clock_ns(), is CUPTI's timestamp callback, and decoding maps
 * the ns back to ticks).  Everything here runs on tp-flush except
 * tp_cupti_ext_push/pop, which library wrappers call around the real call
 * while a window records.
 */
#ifndef TRAINPROF_COLLECTOR_CUPTI_H
#define TRAINPROF_COLLECTOR_CUPTI_H

#include <stddef.h>
#include <stdint.h>

#include "collector/contract/device.h"

/* A cudaEventRecord as CUPTI saw it (CUDA_EVENT records): what an event
 * sync waits on.  Never an event of its own. */
struct tp_device_cuda_event {
    uint32_t context;           /* where the event was recorded */
    uint32_t event_id;          /* CUPTI's eventId */
    uint32_t correlation;       /* of the cudaEventRecord call */
    uint32_t stream;            /* CUPTI stream id it was recorded on */
};

/* A runtime or driver API record of a launch, copy, set or synchronization
 * (the only cbids enabled): what joins our host records to CUPTI's
 * correlation ids (join.h). */
struct tp_device_api {
    uint64_t start, end;        /* tp_clock ticks */
    uint32_t correlation;
    uint32_t thread_id;         /* CUPTI's threadId */
    uint32_t cbid;
    uint8_t  driver;            /* 1: driver API, 0: runtime API */
    uint8_t  failed;            /* the call returned an error: no device work follows */
    uint8_t  internal;          /* INTERNAL_LAUNCH_API: a launch outside any public
                                   API call (driver 1, cbid cuLaunchKernel's); no
                                   host call claims it */
};

/* An external correlation: CUPTI correlation id -> the id pushed by
 * tp_cupti_ext_push() around the library call that issued the work. */
struct tp_device_ext {
    uint32_t correlation;
    uint64_t external_id;
};

/* The device records of one window, a batch taken from CUPTI's; arrays
 * sorted by start (ext: by correlation). */
struct tp_device_batch {
    struct tp_device_record *rec;
    size_t n_rec;
    struct tp_device_api *api;
    size_t n_api;
    struct tp_device_ext *ext;
    size_t n_ext;
    struct tp_device_cuda_event *cuda_event; /* sorted by (context, event_id, correlation):
                                   every record that can still be the last
                                   before a sync of this window, windows and
                                   warmup before it included */
    size_t n_cuda_event;
    uint64_t dropped;           /* records CUPTI dropped (cuptiActivityGetNumDroppedRecords)
                                   plus records we could not store, since the last take */
    uint64_t time_slack;        /* ticks by which CUPTI's times may be off ours (0 with our
                                   timestamp callback: tp_cupti_clock_offset) */
    uint32_t first_corr;        /* lowest correlation of the window's API records, 0 if
                                   none: device work of an older one was launched
                                   before the window (it ran into it) */
};

/* tp_cupti_start - load and subscribe on first use, register the buffer and
 * timestamp callbacks, enable the activity kinds.  Returns 0, or -1 if CUPTI
 * cannot be had (missing, too old, another subscriber): said once on stderr,
 * and never tried again.  Before loading, the process must have a driver
 * and a context (props.h, tp_driver_ready; "had_context": a CUDA call
 * already succeeded); until then -1, silently, and asked again next time. */
int tp_cupti_start(int had_context);

/* tp_cupti_enabled - 1 while the activity kinds are enabled. */
int tp_cupti_enabled(void);

/* tp_cupti_collect - cuptiActivityFlushAll ("forced": also buffers still in
 * use, as at exit) and decode every completed buffer into the pending lists. */
void tp_cupti_collect(int forced);

/* tp_cupti_unfinished - launches whose API record starts in [t0, t1] and
 * whose kernel record has not arrived yet. */
size_t tp_cupti_unfinished(uint64_t t0, uint64_t t1);

/* tp_cupti_take - move the pending records of the window [t0, t1] into "out":
 * API records that start in it, device records whose correlation is one of
 * theirs or that start in it, and the external correlations of those.
 * Pending records older than t1 are then discarded (warmup, gaps).  CUDA
 * event records are copied, not moved: an event recorded before the window
 * may be waited on in it or later; only those no later sync can pick are
 * discarded (cupti_window.c). */
void tp_cupti_take(uint64_t t0, uint64_t t1, struct tp_device_batch *out);

/* tp_cupti_window_free - release what tp_cupti_take() gave. */
void tp_cupti_window_free(struct tp_device_batch *w);

/* tp_cupti_stop - between windows ("final" 0): disable the kinds where
 * CUPTI >= 13.0 Update 1 allows it, else keep them on (records are then
 * discarded).  After the last window ("final" 1): flush, disable,
 * unsubscribe and cuptiFinalize (CUDA >= 12.6, not during a stream capture). */
void tp_cupti_stop(int final);

/* tp_cupti_ext_push/pop - any thread, only while tp_cupti_enabled(): bracket
 * a library call with external correlation id "id" (never 0). */
void tp_cupti_ext_push(uint64_t id);
void tp_cupti_ext_pop(void);

/* tp_cupti_status - one line for the trace metadata and summary:
 * "active (CUPTI 130001)", "unavailable: <why>", "off (TRAINPROF_ACTIVITIES)". */
const char *tp_cupti_status(void);

/* ---- additions (after the interface above was fixed) --------------------- */

/* Classes of the runtime/driver API cbids kept in tp_device_api records. */
enum tp_cupti_cb_class {
    TP_CB_OTHER = 0,            /* not kept */
    TP_CB_LAUNCH,               /* kernel launches (what tp_cupti_unfinished counts) */
    TP_CB_GRAPH,                /* graph launches */
    TP_CB_COPY,
    TP_CB_SET,
    TP_CB_SYNC,
};

/* tp_cupti_cb_class - enum tp_cupti_cb_class of runtime ("driver" 0) or
 * driver ("driver" 1) API callback id "cbid". */
int tp_cupti_cb_class(int driver, uint32_t cbid);

/* tp_cupti_set_capture_check - "fn" returns non-zero while a stream capture
 * may be open; tp_cupti_stop(1) then skips cuptiFinalize.  NULL: no check. */
void tp_cupti_set_capture_check(int (*fn)(void));

/* tp_cupti_decode - decode one CUPTI activity record ("record" is a
 * const CUpti_Activity *, kept void here so that this header needs no CUPTI
 * headers) into the pending lists, as tp_cupti_collect() does for each record
 * of a completed buffer.  Flush thread (or a test).  Returns 1 if stored,
 * 0 if filtered or only counted (API cbids we do not keep, OVERHEAD, MEMORY2,
 * records timed outside our clock: cupti_impl.h, tp_cupti_pending_clock),
 * -1 if dropped (no timestamps, or the pending lists are full: counted in
 * tp_device_batch.dropped), -2 for a kind we do not decode. */
int tp_cupti_decode(const void *record);

/* tp_cupti_clock_offset - CUPTI's clock minus ours, in ns, for the records
 * decoded from now on, and how far off it may be, in ticks: 0 and 0 (the
 * default) while CUPTI calls our timestamp callback; measured by cupti.c
 * where CUPTI refused it.  tp_cupti_clock_slack returns the latter. */
void tp_cupti_clock_offset(int64_t ns, uint64_t slack_ticks);
uint64_t tp_cupti_clock_slack(void);

/* ---- other CUPTI clients in the process ------------------------------------ */

/* What another client did, as preload/cupti.c sees it (CUPTI's activity API
 * is one per process: its buffer and timestamp callbacks, its kinds and
 * cuptiFinalize are process-wide, whoever calls them), or what the records
 * show (TP_FOREIGN_TIMES). */
enum tp_cupti_foreign_what {
    TP_FOREIGN_BUFFERS = 1u << 0,   /* cuptiActivityRegisterCallbacks */
    TP_FOREIGN_CLOCK = 1u << 1,     /* cuptiActivityRegisterTimestampCallback */
    TP_FOREIGN_DISABLE = 1u << 2,   /* cuptiActivityDisable */
    TP_FOREIGN_FINALIZE = 1u << 3,  /* cuptiFinalize */
    TP_FOREIGN_TIMES = 1u << 4,     /* records timed outside our clock's range */
};

/* tp_cupti_foreign - another client made the CUPTI call "what" (one bit)
 * and it succeeded; "kind" is the activity kind of DISABLE, "caller"
 * a code address in the client (named with dladdr, for the message).  While
 * CUPTI is ours, a call that takes something we rely on (buffers, clock,
 * finalize, a kind we enabled) makes CUPTI lost from that moment: the hot
 * path stops pushing ids at once, and tp-flush writes no device records for
 * a window that lost ended in or before (the status says why).  Before we
 * start, a client that registered buffer callbacks keeps the activity API:
 * we stay host-side only.  Any thread; no lock, no allocation. */
void tp_cupti_foreign(unsigned what, int kind, const void *caller);

/* tp_cupti_lost_at - the tick at which CUPTI stopped being ours (another
 * client took it), 0 while it is ours or was never started. */
uint64_t tp_cupti_lost_at(void);

/* tp_cupti_hurry - a termination or fatal signal came: from now on
 * tp-flush waits for CUPTI (cupti_call.c) at most TP_CUPTI_GRACE_S from
 * now, after which CUPTI is abandoned.  Async-signal-safe (a handler calls
 * it through tp_flusher_term). */
void tp_cupti_hurry(void);

/* tp_cupti_abandoned - 1 once CUPTI was abandoned: it is never called
 * again; tp_cupti_collect still decodes the buffers already completed, and
 * tp_cupti_status says what was left out. */
int tp_cupti_abandoned(void);

#endif
