/*
 * trigger_cycle.c - DESIGN: on-demand cycles (TRAINPROF_TRIGGER; README
 * "Capturing a running job").
 *
 * tp-flush reads the trigger file (trigger.c) and hands the request over
 * here under a lock of its own that only ever guards a copy; it never
 * takes the step lock (a step may hold that while it waits for tp-flush,
 * steps.c's tp_await_on).  The training thread looks at one atomic
 * sequence number when a step begins; only when it changed does it take
 * the request, under the step lock, and decide:
 *  - a start that has passed (the step under way or an earlier one: its
 *    action was fixed when it began) moves to the step beginning now, and
 *    the outcome says "late";
 *  - a cycle that would share a step with the schedule's own warmup or
 *    recording, or come while a triggered one is under way, is ignored
 *    (two windows never overlap: steps.c closes a window at the schedule's
 *    RECORD_AND_SAVE only);
 *  - else it is armed, replacing an armed cycle that has not begun.
 * The outcome goes back to tp-flush (copied under the same small lock),
 * which says it on stderr and in the status file.  steps.c asks the armed
 * cycle's action wherever the schedule says NONE.
 */
#include "trigger_cycle.h"
#include "collector/config/config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static _Atomic int tp_tc_watch;
static _Atomic uint64_t tp_tc_step;        /* the step under way */

/* tp-flush -> steps, under tp_tc_lock (a copy, nothing else) */
static pthread_mutex_t tp_tc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_tc_request tp_tc_req;
static _Atomic uint64_t tp_tc_req_seq;
static struct tp_tc_outcome tp_tc_out;     /* steps -> tp-flush */

/* the armed cycle, under the step lock */
static uint64_t tp_tc_taken;               /* seq of the last request taken */
static int tp_tc_armed;
static uint64_t tp_tc_start, tp_tc_end;    /* [start, end): warmup then recording */
static uint32_t tp_tc_warmup;

void tp_trigger_cycle_watch(int on)
{
    atomic_store(&tp_tc_watch, on);
}

int tp_trigger_cycle_watched(void)
{
    return atomic_load(&tp_tc_watch);
}

void tp_trigger_cycle_request(const struct tp_tc_request *r)
{
    pthread_mutex_lock(&tp_tc_lock);
    tp_tc_req = *r;
    atomic_fetch_add(&tp_tc_req_seq, 1);
    pthread_mutex_unlock(&tp_tc_lock);
}

uint64_t tp_trigger_cycle_outcome(struct tp_tc_outcome *o)
{
    pthread_mutex_lock(&tp_tc_lock);
    *o = tp_tc_out;
    pthread_mutex_unlock(&tp_tc_lock);
    return o->seq;
}

void tp_trigger_cycle_window(struct tp_handoff *w)
{
    const struct tp_tc_outcome *o = &tp_tc_out;
    if (o->seq && o->state == TP_TC_ARMED && w->steps && w->first_step == o->first) {
        w->triggered = 1;
        memcpy(w->trigger_id, o->id, sizeof w->trigger_id);
        w->trigger_requested = o->requested;
        w->trigger_late = o->late;
    }
}

uint64_t tp_trigger_cycle_current(void)
{
    return atomic_load_explicit(&tp_tc_step, memory_order_relaxed);
}

/* Why steps [start, end) cannot be a triggered cycle, or NULL. */
static const char *tp_tc_conflict(uint64_t start, uint64_t end, uint64_t *at)
{
    if (tp_tc_armed && tp_tc_start <= atomic_load(&tp_tc_step)) {
        *at = tp_tc_start;
        return "a triggered window is under way";
    }
    for (uint64_t s = start; s < end; s++)
        if (tp_schedule_action(&tp_cfg.schedule, s) != TP_NONE) {
            *at = s;
            return "the schedule warms up or records at step";
        }
    return NULL;
}

static void tp_tc_take(uint64_t step, uint64_t seq)
{
    struct tp_tc_request r;
    pthread_mutex_lock(&tp_tc_lock);
    r = tp_tc_req;
    pthread_mutex_unlock(&tp_tc_lock);
    tp_tc_taken = seq;

    struct tp_tc_outcome o;
    memset(&o, 0, sizeof o);
    o.seq = seq;
    memcpy(o.id, r.id, sizeof o.id);
    o.requested = r.start;
    o.at_step = step;
    uint64_t start = r.start;
    if (start < step) {         /* its action would have been fixed already */
        start = step;
        o.late = 1;
    }
    uint64_t end = start + r.warmup + r.active, at = 0;
    const char *why = tp_tc_conflict(start, end, &at);
    if (why) {
        o.state = TP_TC_IGNORED;
        snprintf(o.reason, sizeof o.reason, "%s %llu", why, (unsigned long long)at);
    } else {
        tp_tc_armed = 1;
        tp_tc_start = start;
        tp_tc_end = end;
        tp_tc_warmup = r.warmup;
        o.state = TP_TC_ARMED;
        o.start = start;
        o.first = start + r.warmup;
        o.last = end - 1;
    }
    pthread_mutex_lock(&tp_tc_lock);
    tp_tc_out = o;
    pthread_mutex_unlock(&tp_tc_lock);
}

void tp_trigger_cycle_step(uint64_t step)
{
    atomic_store_explicit(&tp_tc_step, step, memory_order_relaxed);
    if (tp_tc_armed && step >= tp_tc_end)
        tp_tc_armed = 0;
    uint64_t seq = atomic_load_explicit(&tp_tc_req_seq, memory_order_acquire);
    if (seq != tp_tc_taken)
        tp_tc_take(step, seq);
}

enum tp_action tp_trigger_cycle_action(uint64_t step)
{
    if (!tp_tc_armed || step < tp_tc_start || step >= tp_tc_end)
        return TP_NONE;
    if (step < tp_tc_start + tp_tc_warmup)
        return TP_WARMUP;
    return step + 1 < tp_tc_end ? TP_RECORD : TP_RECORD_AND_SAVE;
}
