/*
 * schedule.c - DESIGN: a transcription of torch.profiler.schedule's
 * schedule_fn, including its real division in the repeat test (step / n >=
 * repeat with step and n as reals), so that our windows fall on exactly the
 * steps a PyTorch user expects.  The division is done in integers as
 * step >= repeat * n, which is the same predicate without rounding.
 * With TRAINPROF_SCHEDULE=profiler-api no step records by itself and the
 * schedule never finishes: cudaProfilerStart/Stop open and close windows
 * (steps.c).
 * TRAINPROF_SCHEDULE=none records nothing by itself: its windows are the
 * triggered ones (trigger_cycle.c), which steps.c consults where this says
 * NONE.
 */
#include "schedule.h"

#include <stdio.h>

enum tp_action tp_schedule_action(const struct tp_schedule *s, uint64_t step)
{
    if (s->all)
        return TP_RECORD;
    if (s->profiler_api)
        return TP_NONE;         /* windows follow the profiler API (steps.c) */
    if (s->none)
        return TP_NONE;     /* windows come from triggers only (trigger_cycle.h) */
    if (step < s->skip_first)
        return TP_NONE;
    step -= s->skip_first;
    uint64_t n = s->wait + s->warmup + s->active;
    if (s->repeat > 0 && step >= s->repeat * n)
        return TP_NONE;
    uint64_t m = step % n;
    if (m < s->wait)
        return TP_NONE;
    if (m < s->wait + s->warmup)
        return TP_WARMUP;
    return m < n - 1 ? TP_RECORD : TP_RECORD_AND_SAVE;
}

int tp_schedule_finished(const struct tp_schedule *s, uint64_t step)
{
    if (s->none)
        return 1;
    if (s->all || s->profiler_api || s->repeat == 0)
        return 0;
    return step >= s->skip_first &&
           step - s->skip_first >= s->repeat * (s->wait + s->warmup + s->active);
}

const char *tp_schedule_show(const struct tp_schedule *s, char *b, size_t n)
{
    const char *word = s->all ? "all" : s->profiler_api ? "profiler-api" : s->none ? "none" : NULL;
    if (word) {
        snprintf(b, n, "%s", word);
        return b;
    }
    size_t len = 0;
    b[0] = '\0';
#define TP_SCHED_SHOW(key, def, min) \
    len += (size_t)snprintf(b + len, len < n ? n - len : 0, "%s" #key "=%llu", len ? "," : "", \
                            (unsigned long long)s->key);
    TP_SCHEDULE_KEYS(TP_SCHED_SHOW)
#undef TP_SCHED_SHOW
    return b;
}

const char *tp_schedule_describe(const struct tp_schedule *s, char *buf, size_t n)
{
    if (s->all)
        return "records every step, one window saved at exit";
    if (s->profiler_api)
        return "records from cudaProfilerStart to cudaProfilerStop";
    if (s->none)
        return "records only when triggered";
    unsigned long long first = s->skip_first + s->wait + s->warmup, last = first + s->active - 1,
                       period = s->wait + s->warmup + s->active;
    char steps[64];
    if (last == first)
        snprintf(steps, sizeof steps, "step %llu", first);
    else
        snprintf(steps, sizeof steps, "steps %llu-%llu", first, last);
    if (s->repeat == 1)
        snprintf(buf, n, "records %s, one window (repeat=0: every %llu steps until exit)", steps,
                 period);
    else if (s->repeat == 0)
        snprintf(buf, n, "records %s, then every %llu steps until exit", steps, period);
    else
        snprintf(buf, n, "records %s, then every %llu steps, %llu windows in all", steps, period,
                 (unsigned long long)s->repeat);
    return buf;
}

const char *tp_action_name(enum tp_action a)
{
    static const char *const names[] = { "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE" };
    return names[a];
}
