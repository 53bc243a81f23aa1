/*
 * handoff.h - a closed window handed from the training side to the flush
 * thread (collector-internal), and the flush's entry points.
 */
#ifndef TRAINPROF_COLLECTOR_HANDOFF_H
#define TRAINPROF_COLLECTOR_HANDOFF_H

#include <stdint.h>

#include "collector/common/clock.h"
#include "collector/device/cupti.h"

/* Longest trigger id with its NUL (control/ondemand.h's TP_OD_ID_MAX is it). */
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
    const char *step_signal;    /* the step signal that counted its steps ("" if none) */
    /* the trigger that asked for this window (control/ondemand.c), set by
     * the steps when it closes, so that the flush does not ask the control
     * side: "triggered" 0 when the schedule asked for it */
    int triggered;
    int trigger_late;           /* the request was read after its step had begun */
    uint64_t trigger_requested; /* the request's warmup step */
    char trigger_id[TP_HANDOFF_TRIGGER_MAX];
};

/* tp_flush_write - drain window "w" and run the handlers (flush thread);
 * "dev" is its device side, NULL when CUPTI did not collect. */
void tp_flush_write(const struct tp_handoff *w, const struct tp_dev_batch *dev);

/* tp_flush_idle - between windows (flush thread): the output side's idle
 * work (reaping exec children, deferred TRAINPROF_KEEP deletions). */
void tp_flush_idle(void);

/* tp_flush_saved - traces saved so far (any thread). */
uint64_t tp_flush_saved(void);

/* tp_flush_finish - at exit, after the last window was written: the output
 * side's last work (a bounded wait for exec children). */
void tp_flush_finish(void);

#endif
