/*
 * triton_like.c - launches the way Triton's generated launcher does
 * (triton third_party/nvidia/backend/driver.py): dlopen("libcuda.so.1") and
 * dlsym(handle, ...) for each driver entry point, cuModuleLoadData +
 * cuModuleGetFunction for the kernel, cuLaunchKernelEx (and cuLaunchKernel)
 * per launch, then trainprof_step() per step.  TRITON_STEPS (default 4)
 * steps of TRITON_LAUNCHES (default 3) cuLaunchKernelEx (the first a
 * cooperative grid, the others clusters of 2) and one cuLaunchKernel each,
 * then TRITON_SLEEP_US (default 0) of host time.  stdout is the same with and without the preload.
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
    long sleep_us = prog_env_long("TRITON_SLEEP_US", 0);
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
            /* num_ctas=2 (a cluster of 2) as Triton launches on Hopper; the
             * first of each step a cooperative grid (launch_cooperative_grid) */
            CUlaunchAttribute attr;
            memset(&attr, 0, sizeof attr);
            if (i == 0) {
                attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
                attr.value.cooperative = 1;
            } else {
                attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
                attr.value.clusterDim.x = 2, attr.value.clusterDim.y = 1, attr.value.clusterDim.z = 1;
            }
            cfg.attrs = &attr;
            cfg.numAttrs = 1;
            if (launchex(&cfg, fn, NULL, NULL) != CUDA_SUCCESS)
                return 1;
        }
        if (launch(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS || sync() != CUDA_SUCCESS)
            return 1;
        printf("step %ld\n", s);
        if (sleep_us > 0)
            usleep((useconds_t)sleep_us);
        tp_call_step();
    }
    return 0;
}
