/*
 * device.c - DESIGN: the device side as a module (modules.def): CUPTI is
 * loaded, started and stopped on tp-flush as the schedule asks, never on
 * a training thread (enabling kinds can stall it).  While a step warms up or records and
 * TRAINPROF_ACTIVITIES has cuda, CUPTI's kinds are on and, while
 * recording, library calls push their external correlation id
 * (TP_HOT_EXTCORR).  Outside, the kinds go off once the queued windows are
 * written; CUPTI is finalized only when no window will open again and no
 * capture is open.  The flush thread calls the follow hook with its load
 * lock held and never once exit has begun, so no dlopen starts late.
 * Reading a window's records stays with the flush thread (flusher.c).
 */
#include "collector/record/call.h"
#include "collector/common/clock.h"
#include "collector/config/config.h"
#include "cupti.h"
#include "collector/modules/module.h"

#include <stdatomic.h>

static int tp_device_wanted;       /* TRAINPROF_ACTIVITIES has cuda */
static int tp_device_on;           /* CUPTI's kinds on (tp-flush only) */

static void gpu_init(const struct tp_config *cfg)
{
    tp_device_wanted = (cfg->activities & TP_ACT_CUDA) != 0;
}

static void gpu_follow(const struct tp_follow *f)
{
    if (f->on && tp_device_wanted) {
        if (!tp_cupti_enabled() && tp_cupti_start(tp_cuda_ok()) != 0)
            return;
        if (!tp_device_on) {
            tp_device_on = 1;
            tp_hot_extcorr(1);
        }
        return;
    }
    if (f->queued || !tp_cupti_enabled())
        return;
    if (tp_device_on) {
        tp_device_on = 0;
        tp_hot_extcorr(0);
    }
    tp_cupti_stop(f->final);
    if (tp_cupti_enabled()) {
        /* CUPTI 13.0 GA keeps its kinds on between windows (cupti.c):
         * drop what they record there */
        struct tp_device_batch junk;
        uint64_t now = tp_clock_now();
        tp_cupti_collect(0);
        tp_cupti_take(now, now, &junk);
        tp_cupti_window_free(&junk);
    }
}

const struct tp_module tp_module_device = {
    .name = "device",
    .init = gpu_init,
    .follow = gpu_follow,
};
