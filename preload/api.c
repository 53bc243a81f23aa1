/*
 * api.c - DESIGN: the public trainprof_* functions (preload/trainprof.h).
 * Each activates the profiler and is a no-op when passive.
 */
#include "resolve.h"
#include "trainprof.h"
#include "collector/wrap/core.h"
#include "collector/config/config.h"
#include "collector/record/oplost.h"
#include "collector/record/pgroup.h"
#include "collector/wrap/ranges.h"

static int tp_api_ready(void)
{
    if (tp_hot_load() & TP_HOT_INACTIVE)
        tp_lifecycle_activate();
    return tp_steps_on();
}

TP_EXPORT void trainprof_step(void)
{
    if (tp_api_ready())
        tp_steps_signal(TP_SIGNAL_API);
}

TP_EXPORT void trainprof_range_push(const char *name)
{
    if (tp_api_ready())
        tp_range_push(TP_MSG_TEXT(name ? name : "", (size_t)-1), 0, TP_RANGE_API);
}

TP_EXPORT void trainprof_range_pop(void)
{
    if (tp_api_ready())
        tp_range_pop();
}

TP_EXPORT void trainprof_instant(const char *name)
{
    if (tp_api_ready())
        tp_mark(TP_MSG_TEXT(name ? name : "", (size_t)-1), 0);
}

TP_EXPORT void trainprof_counter(const char *name, double value)
{
    if (tp_api_ready())
        tp_counter(TP_MSG_TEXT(name ? name : "", (size_t)-1), value);
}

TP_EXPORT int trainprof_enabled(void)
{
    return tp_api_ready();
}

/* Not activating: the hook calls it only in a step that warms up or records. */
TP_EXPORT void trainprof_operators_lost(const char *why)
{
    if (tp_steps_on())
        tp_oplost_set(why);
}

TP_EXPORT int trainprof_phase(void)
{
    return tp_steps_on() ? tp_steps_phase() : -1;
}

/* Not activating, and kept before activation: a process group is often
 * made before the first CUDA call, and a CPU job's first trainprof_step
 * comes later still.  Nothing with TRAINPROF_ENABLED=0. */
TP_EXPORT void trainprof_process_group(const char *backend, int rank, int world_size)
{
    tp_config_init();
    if (tp_cfg.enabled)
        tp_pgroup_set(backend, rank, world_size);
}
