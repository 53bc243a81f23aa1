/*
 * init.c - DESIGN: the constructor does the least it can (a process
 * that never uses CUDA must stay inert: README "Never harming the job"): hand
 * the output side (handlers/handlers.c) down to the collector, which never
 * names a handler itself, parse the configuration silently, make this
 * library the NVTX injection library and the ITT collector (preload/nvtx.c,
 * preload/itt.c), choose the clock source (CPUID) and take the real dlsym
 * and its own dlopen handle (preload/dlsym.c says why).  No threads, files
 * or output until activation (collector/control/lifecycle.c).
 */
#include "driver.h"
#include "itt.h"
#include "collector/common/clock.h"
#include "collector/config/config.h"
#include "collector/contract/sink.h"
#include "../handlers/handler.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* This library's absolute path into "path" (PATH_MAX bytes): absolute so
 * that a chdir() before the first NVTX or ITT call, or a child started
 * elsewhere, still finds it (LD_PRELOAD may be relative).  0, or -1. */
static int tp_self_path(char *path)
{
    Dl_info info;
    if (!dladdr((void *)tp_self_path, &info) || !info.dli_fname || !info.dli_fname[0])
        return -1;
    return realpath(info.dli_fname, path) ? 0 : -1;
}

/* Points the variable "var" (a tool-library path: NVTX_INJECTION64_PATH,
 * INTEL_LIBITTNOTIFY64) at this library, "self" (tp_self_path).  Only when
 * the variable was unset at startup ("found" empty: another tool's, or a
 * parent's, is kept); the caller checks that profiling is enabled and this
 * rank selected (a disabled process leaves the variable unset).  Silent: a failure leaves that API
 * uninstrumented.  Returns 1 if the variable names this library now (set
 * here, or found naming it). */
static int tp_point_at_self(const char *var, const char *found, const char *self)
{
    char other[PATH_MAX];
    if (found[0] != 0)
        return realpath(found, other) && strcmp(other, self) == 0;
    return setenv(var, self, 0) == 0;
}

__attribute__((constructor)) static void tp_init(void)
{
    tp_sink_set(&tp_handlers_sink);
    tp_config_init();
    tp_clock_select();
    char self[PATH_MAX];
    if (tp_cfg.enabled && tp_cfg.rank_selected && tp_self_path(self) == 0) {
        tp_point_at_self("NVTX_INJECTION64_PATH", tp_cfg.nvtx_injection_path, self);
        tp_itt_named(tp_point_at_self("INTEL_LIBITTNOTIFY64", tp_cfg.itt_collector_path, self));
    }
    tp_dlsym_init();
}
