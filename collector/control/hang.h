/*
 * hang.h - the hang doctor (hang.c): when no step has ended for
 * TRAINPROF_HANG_S seconds, tp-flush writes each process's hang report.
 */
#ifndef TRAINPROF_COLLECTOR_HANG_H
#define TRAINPROF_COLLECTOR_HANG_H

#include <stdint.h>

/* tp_hang_seconds - the effective TRAINPROF_HANG_S: 0 when off. */
double tp_hang_seconds(void);

/* tp_hang_init - at activation, after the flush thread started (tick
 * "now"): turns the in-flight slots on when the hang doctor is. */
void tp_hang_init(uint64_t now);

/* tp_hang_on - 1 once tp_hang_init turned the hang doctor on: the steps
 * are then counted to the end (steps.c keeps the step signals on). */
int tp_hang_on(void);

/* tp_hang_step - step "steps" (steps completed) ended at tick "now"
 * (steps.c, step lock held). */
void tp_hang_step(uint64_t steps, uint64_t now);

/* tp_hang_idle - tp-flush's idle tick: looks at the time since the last
 * step ended and writes a report once per hang. */
void tp_hang_idle(void);

/* tp_hang_set_flight - the flight recorder's dump at a hang (steps.c's
 * tp_steps_flight_hang): 0 when dumped or nothing to dump, -1 when the
 * step lock was busy (tried again at the next idle tick of the hang). */
void tp_hang_set_flight(int (*dump)(void));

/* tp_hang_reports - reports written by this process (tests). */
unsigned tp_hang_reports(void);

#endif
