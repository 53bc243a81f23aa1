/*
 * handoff.h - a closed window handed from the training side (the steps,
 * collector/control/) to the flush thread (collector-internal).  What the
 * flush thread does with it is window.h's.
 */
#ifndef TRAINPROF_COLLECTOR_HANDOFF_H
#define TRAINPROF_COLLECTOR_HANDOFF_H

#include <stdint.h>

#include "collector/common/clock.h"

/* Longest trigger id with its NUL (control/trigger_cycle.h's TP_TC_ID_MAX is it). */
#define TP_HANDOFF_TRIGGER_MAX 64

struct tp_handoff {
    uint8_t  gen;
    uint64_t batch;             /* steps completed when saved */
    uint64_t first_step;        /* first recorded step */
    uint64_t steps;             /* recorded steps that ended inside the window */
    uint64_t start_tick, end_tick;
    struct tp_clock_triple start_clock, end_clock; /* the clocks read at start and end */
    uint64_t dropped;           /* records dropped during the window */
    uint64_t ranges_lost;       /* ranges it did not keep (collector/wrap/ranges.h tp_steps_range_losses) */
    uint64_t unmatched_pops;    /* pops with no open range during it */
    int partial;
    const char *partial_reason; /* "exit", "SIGTERM", "SIGSEGV", ... (static), NULL if not partial */
    int at_exit;                /* closed as the process ends (exit or a signal) */
    const char *step_signal;    /* the step signal that counted its steps ("" if none) */
    /* the trigger that asked for this window (control/trigger_cycle.c), set by
     * the steps when it closes, so that the flush does not ask the control
     * side: "triggered" 0 when the schedule asked for it */
    int triggered;
    int trigger_late;           /* the request was read after its step had begun */
    uint64_t trigger_requested; /* the request's warmup step */
    char trigger_id[TP_HANDOFF_TRIGGER_MAX];
    /* the flight recorder's window (collector/control/steps.c): "flight" 1;
     * "flight_reason" NULL: superseded by a window or exit, drained unsaved;
     * else why it is dumped ("slow-step", "oom", "SIGSEGV", ...: static) */
    int flight;
    const char *flight_reason;
    uint64_t flight_step;       /* the step under way (or slow) when it was asked for */
    uint64_t flight_step_ns;    /* slow-step: that step's duration and the threshold */
    uint64_t flight_threshold_ns;
    uint64_t flight_median_ns;  /* slow-step: the running median it was measured against */
    uint64_t flight_trim_tick;  /* records begun before it are older steps, not dumped */
};

#endif
