/*
 * trigger_cycle.h - on-demand cycles: a window that a trigger (trigger.c) asks
 * for, starting at a given step, outside the schedule
 * (TRAINPROF_TRIGGER).  tp-flush hands requests over; the steps take them
 * at a step boundary, under their lock, and ask the cycle's action where
 * the schedule says NONE.
 */
#ifndef TRAINPROF_COLLECTOR_TRIGGER_CYCLE_H
#define TRAINPROF_COLLECTOR_TRIGGER_CYCLE_H

#include <stdint.h>

#include "collector/config/schedule.h"
#include "collector/drain/handoff.h"

#define TP_TC_ID_MAX TP_HANDOFF_TRIGGER_MAX
#define TP_TC_MAX_WARMUP 100
#define TP_TC_MAX_ACTIVE 10000

/* A trigger's request: warm up "warmup" steps from step "start", then
 * record "active" steps. */
struct tp_tc_request {
    char id[TP_TC_ID_MAX];
    uint64_t start;
    uint32_t warmup, active;
};

enum tp_tc_state { TP_TC_NONE = 0, TP_TC_ARMED, TP_TC_IGNORED };

/* What the steps made of the latest request. */
struct tp_tc_outcome {
    uint64_t seq;               /* 0: no request taken yet */
    char id[TP_TC_ID_MAX];
    enum tp_tc_state state;
    uint64_t requested;         /* the request's start */
    uint64_t start;             /* ARMED: the step that warms up first */
    uint64_t first, last;       /* ARMED: the recorded steps, inclusive */
    uint64_t at_step;           /* the step that was beginning when it was taken */
    int late;                   /* ARMED: the requested start had passed */
    char reason[160];           /* IGNORED: why */
};

/* ---- tp-flush and the trigger module ---- */

/* tp_trigger_cycle_watch - triggers are watched (at activation, before step 0):
 * the schedule then never finishes (steps.c), so that a later trigger
 * still finds CUPTI and the memory totals. */
void tp_trigger_cycle_watch(int on);
int tp_trigger_cycle_watched(void);

/* tp_trigger_cycle_request - hand a request over; the next step to begin takes
 * it (replacing one not yet taken). */
void tp_trigger_cycle_request(const struct tp_tc_request *r);

/* tp_trigger_cycle_outcome - the latest outcome into "o"; returns its seq. */
uint64_t tp_trigger_cycle_outcome(struct tp_tc_outcome *o);

/* tp_trigger_cycle_current - the step now under way (= steps completed). */
uint64_t tp_trigger_cycle_current(void);

/* ---- the steps (steps.c), the step lock held ---- */

/* tp_trigger_cycle_window - if the armed cycle asked for the window "w" (its
 * first recorded step, at least one step recorded), fill w's trigger
 * fields.  The outcome is written only under the step lock
 * (tp_trigger_cycle_step), so it is read here without tp_tc_lock. */
void tp_trigger_cycle_window(struct tp_handoff *w);

/* tp_trigger_cycle_step - step "step" begins: take a pending request (one
 * atomic load when there is none) and retire a cycle that has ended. */
void tp_trigger_cycle_step(uint64_t step);

/* tp_trigger_cycle_action - the armed cycle's action for "step" (TP_NONE
 * outside it). */
enum tp_action tp_trigger_cycle_action(uint64_t step);

#endif
