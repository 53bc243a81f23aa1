/*
 * schedule.h - torch.profiler.schedule, exactly (README "Steps" and
 * TRAINPROF_SCHEDULE: repeat defaults to 1).
 */
#ifndef TRAINPROF_COLLECTOR_SCHEDULE_H
#define TRAINPROF_COLLECTOR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

/* The schedule's keys in TRAINPROF_SCHEDULE's order, each with its
 * default and its least value: the struct, the parser, the printer and the
 * documented default all come from this one list. */
#define TP_SCHEDULE_KEYS(X) \
    X(skip_first, 0, 0) X(wait, 0, 0) X(warmup, 1, 0) X(active, 4, 1) X(repeat, 1, 0)

struct tp_schedule {
#define TP_SCHED_FIELD(key, def, min) uint64_t key;
    TP_SCHEDULE_KEYS(TP_SCHED_FIELD)
#undef TP_SCHED_FIELD
    int all;                       /* TRAINPROF_SCHEDULE=all */
    int profiler_api;              /* TRAINPROF_SCHEDULE=profiler-api: windows are
                                      cudaProfilerStart..Stop (steps.c) */
    int none;                      /* TRAINPROF_SCHEDULE=none: only triggered windows (trigger.h) */
};

enum tp_action { TP_NONE = 0, TP_WARMUP, TP_RECORD, TP_RECORD_AND_SAVE };

/* tp_schedule_action - the action for global step "step" (0-based).
 * With s->all every step records and none saves (the save happens at exit);
 * with s->profiler_api it is TP_NONE (the profiler API opens windows);
 * with s->none no step does anything (windows come from triggers). */
enum tp_action tp_schedule_action(const struct tp_schedule *s, uint64_t step);

/* tp_schedule_finished - 1 if no step >= "step" will ever record or warm up
 * by the schedule (always with s->none; triggers are steps.c's affair). */
int tp_schedule_finished(const struct tp_schedule *s, uint64_t step);

/* tp_schedule_describe - what schedule "s" records, in words, into "buf"
 * (size "n"): "records steps 1-4, one window (repeat=0: every 5 steps
 * until exit)", "... then every 5 steps until exit", "... then every 5
 * steps, 3 windows in all"; for all, none and profiler-api their own.
 * The start-up line says it: a schedule without repeat records one window
 * (repeat=1, our default) where torch.profiler.schedule's repeats. */
const char *tp_schedule_describe(const struct tp_schedule *s, char *buf, size_t n);

/* tp_schedule_show - schedule "s" as TRAINPROF_SCHEDULE would say it, into
 * "b" (size "n", cut to fit): "all", "profiler-api", "none", or every key
 * with its value in the keys' order ("skip_first=0,wait=5,warmup=1,
 * active=3,repeat=1").  Returns b.  The one printer of a schedule: the
 * configuration's dump, the start-up line and the status file's
 * "schedule" (trigger.c) say the same. */
const char *tp_schedule_show(const struct tp_schedule *s, char *b, size_t n);

/* tp_action_name - "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE". */
const char *tp_action_name(enum tp_action a);

#endif
