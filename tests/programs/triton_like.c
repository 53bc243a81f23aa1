/*
 * triton_like.c - launches the way Triton's generated launcher does
 * (triton third_party/nvidia/backend/driver.py): dlopen("libcuda.so.1") and
 * dlsym(handle, ...) for each driver entry point, cuModuleLoadData +
 * cuModuleGetFunction for the kernel, cuLaunchKernelEx (and cuLaunchKernel)
 * per launch, then trainprof_step() per step.  TRITON_STEPS (default 4)
 * steps of TRITON_LAUNCHES (default 3) cuLaunchKernelEx and one
 * cuLaunchKernel each.  stdout is the same with and without the preload.
 */
#include <cuda.h>

#include "prog.h"

#include <unistd.h>

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*modload_fn)(CUmodule *, const void *);
typedef CUresult (*getfn_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
typedef CUresult (*launchex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*sync_fn)(void);


int main(void)
{
    long steps = prog_env_long("TRITON_STEPS", 4);
    long per = prog_env_long("TRITON_LAUNCHES", 3);
    void *h = prog_open_driver();
    if (!h)
        return 2;
    init_fn init = (init_fn)prog_sym(h, "cuInit");
    modload_fn modload = (modload_fn)prog_sym(h, "cuModuleLoadData");
    getfn_fn getfn = (getfn_fn)prog_sym(h, "cuModuleGetFunction");
    launchex_fn launchex = (launchex_fn)prog_sym(h, "cuLaunchKernelEx");
    launch_fn launch = (launch_fn)prog_sym(h, "cuLaunchKernel");
    sync_fn sync = (sync_fn)prog_sym(h, "cuCtxSynchronize");
    printf("unknown symbol: %s\n", dlsym(h, "cuNoSuchFunction") ? "found" : "NULL");

    if (init(0) != CUDA_SUCCESS)
        return 1;
    CUmodule mod;
    CUfunction fn;
    if (modload(&mod, "fakecubin triton_poi_fused_add_0") != CUDA_SUCCESS ||
        getfn(&fn, mod, "triton_poi_fused_add_0") != CUDA_SUCCESS)
        return 1;
    for (long s = 0; s < steps; s++) {
        for (long i = 0; i < per; i++) {
            CUlaunchConfig cfg;
            memset(&cfg, 0, sizeof cfg);
            cfg.gridDimX = 16, cfg.gridDimY = 1, cfg.gridDimZ = 1;
            cfg.blockDimX = 128, cfg.blockDimY = 1, cfg.blockDimZ = 1;
            cfg.sharedMemBytes = 0;
            if (launchex(&cfg, fn, NULL, NULL) != CUDA_SUCCESS)
                return 1;
        }
        if (launch(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS || sync() != CUDA_SUCCESS)
            return 1;
        printf("step %ld\n", s);
        tp_call_step();
    }
    return 0;
}
