/*
 * steps.h - steps and windows: step signals counted into steps, the
 * schedule's action per step, windows opened and closed, and the hot
 * word's mode that follows them.
 */
#ifndef TRAINPROF_COLLECTOR_STEPS_H
#define TRAINPROF_COLLECTOR_STEPS_H

#include <stdatomic.h>
#include <stdint.h>

#include "collector/config/config.h"

struct tp_record;

/* tp_steps_begin - at activation: resolve the step signals and enter step
 * 0, which began at tick "start"; from then on tp_steps_on() is 1. */
void tp_steps_begin(uint64_t start);

/* tp_steps_on - 1 if activated and not passive.  One load: every range
 * push and pop asks it (ranges.c). */
extern _Atomic int tp_steps_active __attribute__((visibility("hidden")));

static inline int tp_steps_on(void)
{
    return atomic_load_explicit(&tp_steps_active, memory_order_acquire);
}

/* tp_steps_phase - the current step to the schedule: 2 records, 1 warms
 * up, 0 neither, -1 no window will open again (trainprof_phase). */
int tp_steps_phase(void);

/* tp_steps_nvtx_possible - 1 if the end of an NVTX range may still end a
 * step: an nvtx:GLOB signal is configured and no other signal has fired
 * first.  One load: it is asked at every range push. */
extern _Atomic int tp_steps_nvtx_live __attribute__((visibility("hidden")));

static inline int tp_steps_nvtx_possible(void)
{
    return atomic_load_explicit(&tp_steps_nvtx_live, memory_order_relaxed);
}

/* tp_steps_range_lost - ranges.c: a range a window did not keep (pushed
 * past the stack's TP_RANGE_DEPTH, or a start/end range whose slot a newer
 * one took before it ended).  tp_steps_pop_unmatched: a pop with no open
 * range (ignored).  Each window reports those made while it was open. */
void tp_steps_range_lost(void);
void tp_steps_pop_unmatched(void);

/* tp_steps_range_losses - their process totals (tests). */
void tp_steps_range_losses(uint64_t *lost, uint64_t *unmatched_pops);

/* tp_steps_signal - a step signal of kind "kind" fired on this thread. */
void tp_steps_signal(enum tp_signal_kind kind);

/* tp_steps_profiler_api - cudaProfilerStart ("start" 1) or Stop (0) was
 * called (the outermost of the runtime and driver calls; Start after it
 * succeeded, Stop before the real call): with TRAINPROF_SCHEDULE=profiler-api
 * opens or closes a window (a Start while recording or a Stop while not is
 * ignored, with a debug line); nothing otherwise. */
void tp_steps_profiler_api(int start);

/* tp_steps_capturing - a thread began (+1) or ended (-1) a stream capture:
 * keeps TP_HOT_CAPTURE set while any capture is open. */
void tp_steps_capturing(int delta);

/*
 * tp_steps_flight_status - recorded call "api" returned "status" (not 0)
 * with record "r" filled and not yet published.  With the flight recorder
 * on and a status that means trouble ("oom": an allocation out of memory;
 * "cuda-error": a sticky CUDA error such as an illegal address or a launch
 * failure; "nccl-error": ncclUnhandledCudaError, ncclSystemError,
 * ncclInternalError, ncclRemoteError), publish "r" and dump the flight
 * window, the failed call its last event (tp_steps_flight_fail).  Returns
 * the record the caller still has to publish: "r", or NULL when published.
 */
struct tp_record *tp_steps_flight_status(struct tp_record *r, unsigned api, int32_t status);

/* tp_steps_flight_fail - publish "r" (NULL: none) and dump the flight
 * window for "reason" (static); NULL, or "r" when the recorder is off. */
struct tp_record *tp_steps_flight_fail(struct tp_record *r, const char *reason);

/* tp_steps_flight_now - on tp-flush: dump the flight ring now for "reason"
 * (static), the step under way included, its index in "*step" (may be
 * NULL).  The step lock is only tried: a step may hold it while it waits
 * for tp-flush.  0: dumped; 1: nothing to dump (the recorder is off, or a
 * window records, which ends the ring); -1: the lock was busy, try later. */
int tp_steps_flight_now(const char *reason, uint64_t *step);

/* tp_steps_close_final - close the open window at exit (partial_reason
 * "exit"; not partial with TRAINPROF_SCHEDULE=all).  "wait_lock": 0 where
 * the interrupted thread may hold the step lock (then tried for 200 ms). */
void tp_steps_close_final(int wait_lock);

/* tp_steps_close_on_signal - close the open window on signal "signame"
 * ("SIGTERM", "SIGSEGV", ...: its partial_reason, whatever the schedule),
 * on tp-flush; the interrupted thread may hold the step lock (tried for
 * 200 ms). */
void tp_steps_close_on_signal(const char *signame);

/* tp_steps_warn_unseen - warn (at most twice) that no step signal was seen
 * "when" ("before exit"), unless steps were counted or the schedule is all. */
void tp_steps_warn_unseen(const char *when);

/* tp_steps_idle - tp-flush's idle tick: the 60 s no-step warning. */
void tp_steps_idle(void);

/* tp_steps_atfork_child - a forked child goes passive. */
void tp_steps_atfork_child(void);

/* tp_call_signal - the slow path of tp_call_finish (protocol.h): counts
 * launch:GLOB and call:NAME step signals for this call. */
struct tp_call;
void tp_call_signal(struct tp_call *c, uint64_t func, int func_kind);

/* Which launch:GLOB signals a kernel hits (one bit per signal index),
 * cached per thread: loops launch the same few hundred kernels over and
 * over.  Direct-mapped on the kernel's handle; a runtime launch and the
 * driver launch inside it take two entries. */
#define TP_LAUNCH_CACHE 64
struct tp_launch_hit {
    uint64_t func;
    uint32_t mask;
};
extern __thread struct tp_launch_hit tp_launch_cache[TP_LAUNCH_CACHE]
    __attribute__((tls_model("initial-exec")));

static inline struct tp_launch_hit *tp_launch_slot(uint64_t func)
{
    return &tp_launch_cache[((func >> 4) ^ (func >> 12)) & (TP_LAUNCH_CACHE - 1)];
}

/* tp_launch_quiet - 1 if a launch of kernel "func" is known to hit no
 * launch: signal: the count-only test of a launch wrapper (preload/wrap.h
 * TP_COUNTS), loads and compares only.  0 when it hits one, or is not
 * cached yet: the wrapper's recording path then counts it (and caches). */
static inline int tp_launch_quiet(uint64_t func)
{
    const struct tp_launch_hit *h = tp_launch_slot(func);
    return h->func == func && !h->mask;
}

#endif
