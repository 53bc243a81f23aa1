/*
 * cupti_impl.h - what the files of the CUPTI collector share, for them
 * only; the rest of trainprof includes cupti.h.  Like every collector
 * symbol these are hidden (-fvisibility=hidden, absent from
 * preload/trainprof.map), so nothing here leaves libtrainprof.so.
 *
 * One concern per file, used one way (scripts/dev/modgraph shows no cycle):
 *
 *     cupti.c          lifecycle: subscribe, enable kinds, collect, stop,
 *         |            external correlation push/pop, status
 *         +-> cupti_call.c     tp-cupti, where cupti.c's CUPTI calls run
 *         +-> cupti_window.c   pending lists, windows (take, unfinished)
 *         +-> cupti_buffers.c  the activity buffer pool and its callbacks
 *         +-> cupti_load.c     finding and loading libcupti, entry points
 *         +-> cupti_cbid.c     (which cbids to enable)
 *     cupti_window.c  -> cupti_decode.c, cupti_buffers.c, cupti_cbid.c
 *     cupti_buffers.c -> cupti_decode.c, cupti_load.c
 *     cupti_decode.c  -> cupti_cbid.c    (one record -> our structs)
 *     cupti_cbid.c                       (cbid classes, cupti_cbid.def)
 */
#ifndef TRAINPROF_COLLECTOR_CUPTI_IMPL_H
#define TRAINPROF_COLLECTOR_CUPTI_IMPL_H

#include "cupti.h"
#include "cupti_layouts.h"

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include <stddef.h>
#include <stdint.h>

/* The external correlation kind tp_cupti_ext_push() uses (cupti.c); the
 * decoder keeps the records of this kind only.  CUSTOM2: Kineto pushes
 * CUSTOM0 for torch's operators and CUSTOM1 for user annotations
 * (CuptiActivityProfiler.cpp, handleCorrelationActivity), and CUPTI keeps
 * one stack per kind: with torch.profiler in the process, a kind shared
 * with it would give each profiler's kernels the other's ids. */
#define TP_CUPTI_EXT_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2

/* ---- cupti_call.c: tp-cupti --------------------------------------------- */

/* Seconds from a termination or fatal signal until CUPTI is abandoned. */
#define TP_CUPTI_GRACE_S 2

/* tp_cupti_call - run fn(arg) on tp-cupti and wait (tp-flush only; one at
 * a time).  0 when it ran (on tp-flush itself if tp-cupti cannot start),
 * -1 when CUPTI is abandoned, now or before: fn may still be running or
 * never run, so it must keep its inputs and results in static storage. */
int tp_cupti_call(void (*fn)(void *), void *arg);

/* tp_cupti_hurried - a termination or fatal signal came (tp_cupti_hurry):
 * waits on locks a CUPTI callback may hold are to be bounded. */
int tp_cupti_hurried(void);

/* tp_cupti_exit_close - the program's exit has begun, before the CUDA
 * runtime's own exit handler tears its contexts down (any thread): no
 * CUPTI call that reaches the driver (disabling a kind, finalizing) starts
 * from now on, and the one under way on tp-cupti is waited for, at most
 * "wait_ms".  cuptiActivityDisable while the runtime's handler destroyed
 * the context crashed inside CUPTI 13.0 (an H100, a program that exited
 * a few milliseconds after its last window). */
void tp_cupti_exit_close(int wait_ms);
int tp_cupti_exit_closed(void);

/* ---- cupti_load.c: the loaded library ------------------------------------ */

/* The entry points we use, X(name, required): a missing required one makes
 * CUPTI unavailable, a missing optional one leaves its slot NULL.  Every
 * required one is in every CUPTI from 12.4 (headers of 12.4 to 13.2);
 * cuptiSubscribe_v2 is new in 13.0 (one of the two subscribes must be
 * there), cuptiActivityEnable{Runtime,Driver}Api new in 12.6. */
#define TP_CUPTI_FNS(X) \
    X(cuptiGetVersion, 1) \
    X(cuptiSubscribe, 0) \
    X(cuptiSubscribe_v2, 0) \
    X(cuptiUnsubscribe, 1) \
    X(cuptiActivityRegisterCallbacks, 1) \
    X(cuptiActivityRegisterTimestampCallback, 1) \
    X(cuptiActivitySetAttribute, 1) \
    X(cuptiActivityEnable, 1) \
    X(cuptiActivityDisable, 1) \
    X(cuptiActivityFlushAll, 1) \
    X(cuptiActivityGetNextRecord, 1) \
    X(cuptiActivityGetNumDroppedRecords, 1) \
    X(cuptiActivityPushExternalCorrelationId, 1) \
    X(cuptiActivityPopExternalCorrelationId, 1) \
    X(cuptiFinalize, 1) \
    X(cuptiEnableDomain, 0) \
    X(cuptiActivityEnableRuntimeApi, 0) \
    X(cuptiActivityEnableDriverApi, 0) \
    X(cuptiGetResultString, 0) \
    X(cuptiGetTimestamp, 0)

/* One slot per entry point, typed from the real prototype (__typeof__), so
 * that a signature cannot drift from the CUPTI headers. */
struct tp_cupti_fns {
#define X(name, req) __typeof__(name) *name;
    TP_CUPTI_FNS(X)
#undef X
};

/* The slots; all NULL until tp_cupti_load() succeeds, and after it fails. */
extern struct tp_cupti_fns tp_cupti_fn;

/* tp_cupti_load - find and dlopen libcupti, fill tp_cupti_fn, check the
 * version (CUPTI 12.4 to 13.x) and select its record layouts.  Returns 0 with *version set; or -1 after one
 * warning line on stderr, with the reason (for the status line) in "why"
 * ("why_size" bytes).  Flush thread, once per process. */
int tp_cupti_load(uint32_t *version, char *why, size_t why_size);

/* tp_cupti_cudart_major - N of the libcudart.so.N loaded in the process,
 * 0 if none (static cudart).  Any thread. */
int tp_cupti_cudart_major(void);

/* tp_cupti_sonames - the libcupti names to try, best first, for a process
 * whose runtime has major "cudart_major" (0: unknown): its own major, the
 * other one, then the unversioned name.  Fills "names" (at least 3 slots,
 * "max") and returns the count; 0 if max < 3. */
size_t tp_cupti_sonames(int cudart_major, const char **names, size_t max);

/* tp_cupti_result_str - text of "r" from the loaded CUPTI, or "CUPTI error". */
const char *tp_cupti_result_str(CUptiResult r);

/* ---- cupti_buffers.c: the activity buffer pool -------------------------- */

/* tp_cupti_buf_register - map the first buffers, tell CUPTI they come
 * zeroed and register the buffer-requested/completed callbacks.  Returns 0,
 * or -1 if the mapping fails or CUPTI refuses the callbacks. */
int tp_cupti_buf_register(void);

/* tp_cupti_buf_drain - call "each" on every record of every completed
 * buffer, oldest buffer first, then zero the buffer and put it back in the
 * pool.  Flush thread, with no lock of ours held by the caller. */
void tp_cupti_buf_drain(int (*each)(const void *record));

/* tp_cupti_buf_lost - records lost (buffers recycled undecoded when the
 * pool ran short) since the last call; resets the count.  Any thread. */
uint64_t tp_cupti_buf_lost(void);

/* ---- cupti_decode.c: one activity record -> our structs ----------------- */

/* What a record decodes to (tp_cupti_record_decode's return). */
enum tp_cupti_got {
    TP_CUPTI_GOT_UNKNOWN = -2,  /* a kind we do not decode */
    TP_CUPTI_GOT_UNTIMED = -1,  /* a device record without timestamps */
    TP_CUPTI_GOT_NOTHING = 0,   /* filtered (cbid or external kind not ours,
                                   MEMORY2) or only counted (OVERHEAD) */
    TP_CUPTI_GOT_REC,           /* out->u.rec */
    TP_CUPTI_GOT_API,           /* out->u.api */
    TP_CUPTI_GOT_EXT,           /* out->u.ext */
    TP_CUPTI_GOT_CUDA_EVENT,    /* out->u.cuda_event */
};

/* The decoded record; which member holds it is the decoder's return. */
struct tp_cupti_item {
    union {
        struct tp_device_record rec;
        struct tp_device_api api;
        struct tp_device_ext ext;
        struct tp_device_cuda_event cuda_event;
    } u;
};

/* tp_cupti_record_decode - translate activity record "a" into "out"
 * (zeroed first; times in tp_clock ticks, a zero or early end becomes the
 * start; kernel names demangled and interned).  Stores nothing: keeping the
 * item is the caller's.  Returns an enum tp_cupti_got.  Flush thread (the
 * kernel-name cache is not locked). */
int tp_cupti_record_decode(const CUpti_Activity *a, struct tp_cupti_item *out);

/* tp_cupti_record_discard - release what record "a" owns (an OVERHEAD
 * record's overheadData) without decoding it.  Any thread. */
void tp_cupti_record_discard(const CUpti_Activity *a);

/* tp_cupti_layouts - the layout table (cupti_layouts.h), "*n" rows, oldest
 * first; for the tests. */
const struct tp_cupti_layout *tp_cupti_layouts(size_t *n);

/* tp_cupti_layout_for - the row for CUPTI API version "version"
 * (cuptiGetVersion), a later 13.x read as the newest row; NULL for a
 * version older than 12.4's (22) or of a major we do not know. */
const struct tp_cupti_layout *tp_cupti_layout_for(uint32_t version);

/* tp_cupti_layout_use - decode records as row "l" delivers them from now
 * on (the CUDA 13.0 row until called).  Flush thread, before any record. */
void tp_cupti_layout_use(const struct tp_cupti_layout *l);

/* ---- cupti_window.c: the pending lists ----------------------------------- */

/* tp_cupti_pending_budget - bound the pending records to about "bytes"
 * (TRAINPROF_BUFFER_MB): over it they are dropped and counted. */
void tp_cupti_pending_budget(size_t bytes);

/* tp_cupti_pending_drop - count "n" more records as dropped; the next
 * tp_cupti_take() reports them.  Flush thread. */
void tp_cupti_pending_drop(uint64_t n);

/* tp_cupti_pending_clock - from now on, decoded device and API records
 * that start outside [lo, hi] (ticks) are counted, not stored: timed by
 * another client's clock.  Unset (the default): no check.  Flush thread. */
void tp_cupti_pending_clock(uint64_t lo, uint64_t hi);

/* tp_cupti_pending_off_clock - records refused by that check since the last
 * call; resets the count.  Flush thread. */
uint64_t tp_cupti_pending_off_clock(void);

/* tp_cupti_pending_forget_events - forget the CUDA event records kept for
 * later windows: the kinds were off, so an event may have been recorded
 * again unseen, and the last record we hold would then name the wrong
 * stream.  Flush thread. */
void tp_cupti_pending_forget_events(void);

#endif
