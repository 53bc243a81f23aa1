/*
 * dlsym_spy.c - a second preloaded tool, listed after libtrainprof.so in
 * LD_PRELOAD, that wraps cudaDeviceSynchronize the way such tools do: the
 * real function from dlsym(RTLD_NEXT).  With our dlsym interposer in front,
 * that lookup must still be relative to this library (else it finds itself
 * and recurses).  DLSYM_SPY_DRIVER=1 makes the wrapper call cuCtxSynchronize
 * (found with dlsym(RTLD_DEFAULT)) inside, as the runtime reaches the driver
 * inside a runtime call.  DLSYM_SPY_REPORT=1 prints the call count on stderr
 * at exit.  Prints nothing on stdout.
 */
#define _GNU_SOURCE   /* dladdr */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef cudaError_t (*sync_fn)(void);
typedef int (*drv_sync_fn)(void);

static int spy_calls;
static int spy_launches;
static void spy_report(void);

cudaError_t cudaDeviceSynchronize(void)
{
    static sync_fn real;
    if (!real) {
        real = (sync_fn)dlsym(RTLD_NEXT, "cudaDeviceSynchronize");
        Dl_info them, me;
        if (real && dladdr((void *)real, &them) && dladdr((void *)spy_report, &me) &&
            them.dli_fbase == me.dli_fbase) {
            fprintf(stderr, "dlsym_spy: RTLD_NEXT found the spy itself\n");
            real = NULL;
        }
    }
    if (!real)
        return cudaErrorUnknown;
    __atomic_fetch_add(&spy_calls, 1, __ATOMIC_RELAXED);
    const char *drv = getenv("DLSYM_SPY_DRIVER");
    if (drv && drv[0] == '1') {
        drv_sync_fn ctx = (drv_sync_fn)dlsym(RTLD_DEFAULT, "cuCtxSynchronize");
        if (ctx)
            ctx();
    }
    return real();
}

typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                             cudaStream_t stream)
{
    static launch_fn real;
    if (!real)
        real = (launch_fn)dlsym(RTLD_NEXT, "cudaLaunchKernel");
    if (!real)
        return cudaErrorUnknown;
    __atomic_fetch_add(&spy_launches, 1, __ATOMIC_RELAXED);
    return real(func, grid, block, args, shmem, stream);
}

__attribute__((destructor)) static void spy_report(void)
{
    const char *r = getenv("DLSYM_SPY_REPORT");
    if (r && r[0] == '1')
        fprintf(stderr, "dlsym_spy: cudaDeviceSynchronize calls=%d cudaLaunchKernel calls=%d\n",
                spy_calls, spy_launches);
}
