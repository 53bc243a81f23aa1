/*
 * init.c - DESIGN: the constructor does the least it can (SPEC 3): hand
 * the output side (handlers/handlers.c) down to the collector, which never
 * names a handler itself, parse the configuration silently, make this library the NVTX injection
 * library, choose the clock source (CPUID) and take the real dlsym and its
 * own dlopen handle (preload/dlsym.c says why).  No
 * threads, files or output until activation (collector/lifecycle.c).
 */
#include "driver.h"
#include "nvtx.h"
#include "../collector/clock.h"
#include "../collector/config.h"
#include "../collector/sink.h"
#include "../handlers/handler.h"

__attribute__((constructor)) static void tp_init(void)
{
    tp_sink_set(&tp_handlers_sink);
    tp_config_init();
    tp_clock_select();
    tp_nvtx_setup_env();
    tp_dlsym_init();
}
