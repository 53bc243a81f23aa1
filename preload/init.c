/*
 * init.c - DESIGN: the constructor does the least it can (SPEC 3): parse
 * the configuration silently and make this library the NVTX injection
 * library.  No threads, files or output until activation (collector/core.c).
 */
#include "nvtx.h"
#include "../collector/config.h"

__attribute__((constructor)) static void tp_init(void)
{
    tp_config_init();
    tp_nvtx_setup_env();
}
