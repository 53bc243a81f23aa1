/*
 * flusher.h - the flush thread, tp-flush: the hand-over of closed windows
 * from the training side, their writing, and what runs beside the schedule
 * (the modules' follow hooks).  Below the steps: they call down into it,
 * and it calls back up only through the hooks given at start.
 */
#ifndef TRAINPROF_COLLECTOR_FLUSHER_H
#define TRAINPROF_COLLECTOR_FLUSHER_H

#include <stdint.h>

#include "handoff.h"

struct tp_flusher_hooks {
    /* On tp-flush when signal "sig" arrived (a termination or fatal one):
     * close the open window now (the interrupted thread may hold any lock). */
    void (*term)(int sig);
    /* On tp-flush after each wake-up. */
    void (*idle)(void);
    /* On tp-flush once, as it starts (NULL: none): lines that must not block
     * a program thread on a full stderr pipe, e.g. the start-up line. */
    void (*start)(void);
};

/* tp_flusher_start - start tp-flush (all signals blocked in it; it holds
 * no descriptor).  0, or -1 (no thread). */
int tp_flusher_start(const struct tp_flusher_hooks *hooks);

/* tp_flusher_queue - hand a closed window over (training thread, step lock
 * held) and wake tp-flush.  0, or -1 when the queue is full. */
int tp_flusher_queue(const struct tp_handoff *w);

/* tp_flusher_schedule - what the current step wants: "on" while it warms
 * up or records; wakes tp-flush when that changed. */
void tp_flusher_schedule(int on);

/* tp_flusher_await_on - wait up to "ms" until tp-flush has followed the
 * latest turn of tp_flusher_schedule to "on" (CUPTI and the sampler are
 * started); 0 if it has, -1 at the bound or once exit has begun. */
int tp_flusher_await_on(int ms);

/* tp_flusher_progress - steps completed so far, and whether no window will
 * open again with no capture open (CUPTI may then be finalized). */
void tp_flusher_progress(uint64_t steps, int final);

/* tp_flusher_exit_begin - exit has begun: waits (bounded) for a module
 * load under way on tp-flush, after which none starts. */
void tp_flusher_exit_begin(void);

/* tp_flusher_exiting - exit or a termination signal has begun. */
int tp_flusher_exiting(void);

/* tp_flusher_wait_written - wait until tp-flush has written every queued
 * window, at most "ms" milliseconds; 1 if it has. */
int tp_flusher_wait_written(int ms);

/* tp_flusher_term - from a handler of signal "sig" (async-signal-safe):
 * have tp-flush save the open window and the windows not yet written (its
 * waits for CUPTI bounded from now: tp_cupti_hurry), and wait for it, at
 * most "ms" milliseconds (less when an earlier handler already gave up).  1 if saved.  Only the first signal is saved; never
 * call it on tp-flush itself (tp_flusher_is_self). */
int tp_flusher_term(int sig, int ms);

/* tp_flusher_wake - wake tp-flush now (async-signal-safe: an atomic
 * exchange and at most one futex system call). */
void tp_flusher_wake(void);

/* tp_flusher_tick - tp-flush wakes at least every "ms" milliseconds
 * (default 1000; the shortest asked for wins). */
void tp_flusher_tick(int ms);

/* tp_flusher_flight_trim - the flight recorder's oldest kept step of
 * window generation "gen" now begins at "tick": tp-flush gives back the
 * records begun before it (buffer.h tp_buf_trim).  Wakes tp-flush only when
 * "tick" moved. */
void tp_flusher_flight_trim(uint8_t gen, uint64_t tick);

/* tp_flusher_running - tp-flush has started (in this process: a forked
 * child has none). */
int tp_flusher_running(void);

/* tp_flusher_is_self - 1 on tp-flush (async-signal-safe). */
int tp_flusher_is_self(void);

#endif
