/*
 * lifecycle.h - the life of a profiled process: activation by the first
 * CUDA call that succeeds, the exit flush, termination signals and fork.
 */
#ifndef TRAINPROF_COLLECTOR_LIFECYCLE_H
#define TRAINPROF_COLLECTOR_LIFECYCLE_H

#include <stdint.h>

struct tp_call;

extern int tp_exit_hooked;    /* the exit flush is registered */

/* tp_lifecycle_activate - activate the profiler if not yet done (README
 * "Never harming the job": what activates). */
void tp_lifecycle_activate(void);

/* tp_lifecycle_self_signal - the program is about to send itself "sig"
 * (preload/selfsig.c: kill or raise on its own process).  With SIGINT or
 * SIGTERM at their default disposition (the program will die of it, and
 * C's exit handlers will not run: CPython exits that way on an uncaught
 * KeyboardInterrupt, resetting SIGINT first), the open window is saved
 * as at a received SIGINT or SIGTERM, before the signal goes. */
void tp_lifecycle_self_signal(int sig);

/* tp_lifecycle_after_call - bookkeeping after the first real CUDA call returned
 * (registers the exit flush after CUDA's own atexit handlers). */
void tp_lifecycle_after_call(void);

/* tp_lifecycle_check - after a real CUDA call returned, on every path that
 * made one (collector/wrap/protocol.h tp_call_finish, preload/wrap.h
 * TP_WRAP_LEAN): one relaxed load once the exit flush is registered. */
static inline void tp_lifecycle_check(void)
{
    if (__builtin_expect(!__atomic_load_n(&tp_exit_hooked, __ATOMIC_RELAXED), 0))
        tp_lifecycle_after_call();
}

/* Slow path of tp_call_begin, before activation: the call is timed, and
 * tp_call_end activates the profiler if it succeeded (a failed call does not). */
int tp_call_begin_slow(struct tp_call *c, uint16_t api, uint32_t hot);

/* tp_call_activated - after a call made before activation returned
 * "status": activates the profiler if it is 0 (success; step 0 then begins
 * when this thread's outermost call began, so that the call lies inside it),
 * and returns the tp_hot word the call's record is to use (0: nothing to
 * record).  A call that failed (no driver, no device) leaves the process
 * inactive. */
uint32_t tp_call_activated(int32_t status);

#endif
