/*
 * nvtx.h - libtrainprof.so as the NVTX injection library (SPEC 3).
 *
 * NVTX3 is header-only: every DSO that uses it loads the library named by
 * NVTX_INJECTION64_PATH on its first NVTX call and calls its exported
 * InitializeInjectionNvtx2 (notes/injection.md 3.1).  preload/nvtx.c defines
 * that entry point and the callbacks; this header only declares the setup
 * step the library constructor runs.
 */
#ifndef TRAINPROF_PRELOAD_NVTX_H
#define TRAINPROF_PRELOAD_NVTX_H

/*
 * tp_nvtx_setup_env - point NVTX_INJECTION64_PATH at this library.
 *
 * Called once from the library constructor.  Runs tp_config_init() and sets
 * the variable (absolute path of the loaded libtrainprof.so, without
 * overwriting) only when it was unset at startup, profiling is enabled and
 * this rank is selected (SPEC decision 8).  Silent: a failure leaves NVTX
 * uninstrumented and prints nothing.
 */
void tp_nvtx_setup_env(void);

#endif
