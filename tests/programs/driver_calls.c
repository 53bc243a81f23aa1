/*
 * driver_calls.c - reaches the CUDA driver the way CUDA 13's runtime does
 * (preload/procaddr.c): dlopen("libcuda.so.1"), ONE
 * dlsym(h, "cuGetProcAddress_v2"), through it the probe ("", 0), cuInit and
 * the self-lookups ("cuGetProcAddress", 11030 / 12000), then every other
 * entry point through the 12000 pointer (some through the 11030 one), with
 * flags 0 and CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, the per-thread
 * ones at version 7000 as cudart 12.x and 13.x ask (and two below it, which
 * get the legacy function).  Then steps of
 * launches (CUkernels from cuLibraryGetKernel passed as CUfunctions, legacy
 * and per-thread pointers, cuLaunchKernelEx), allocations, copies, sets and
 * synchronizations, each step ended with trainprof_step().
 *
 * DRIVER_STEPS (default 3) sets the number of steps, DRIVER_SLEEP_US
 * (default 0) a sleep at the end of each step.  stdout is the same
 * with and without the preload; stderr lists the calls made per entry
 * point ("count NAME N", NAME the variant the lookup returned) and where
 * the launch pointer lives ("launch pointer in: FILE").
 */
#define _GNU_SOURCE   /* dladdr */
#include <cuda.h>
#undef cuGetProcAddress   /* cuda.h: cuGetProcAddress_v2 */

#include "prog.h"

#include <unistd.h>

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*libload_fn)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                               CUlibraryOption *, void **, unsigned);
typedef CUresult (*getkernel_fn)(CUkernel *, CUlibrary, const char *);
typedef CUresult (*kcount_fn)(unsigned *, CUlibrary);
typedef CUresult (*kenum_fn)(CUkernel *, unsigned, CUlibrary);
typedef CUresult (*kfunc_fn)(CUfunction *, CUkernel);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
typedef CUresult (*launchex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*graph_fn)(CUgraphExec, CUstream);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*htod_async_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*dtod_fn)(CUdeviceptr, CUdeviceptr, size_t);
typedef CUresult (*set_fn)(CUdeviceptr, unsigned char, size_t);
typedef CUresult (*ssync_fn)(CUstream);
typedef CUresult (*csync_fn)(CUcontext);
typedef CUresult (*void_fn)(void);

static const char image[] = "fakecubin _Z6matmulPfS_S_i _Z4reluPfi _Z7softmaxPfi";

/* CUDA 13.1's cuLaunchHostFunc_v2 (not in these headers): syncMode last */
typedef CUresult (*hostfunc_v2_fn)(CUstream, CUhostFn, void *, unsigned int);
typedef CUresult (*hostfunc_fn)(CUstream, CUhostFn, void *);

static void host_fn(void *ud)
{
    ++*(int *)ud;
}

static const char *file_of(void *p)
{
    Dl_info where;
    return dladdr(p, &where) && where.dli_fname ? where.dli_fname : "?";
}


static gpa2_fn gpa2;
static gpa1_fn gpa1;

/* Counts per recorded variant, printed on stderr for the tests. */
static struct { const char *name; long n; } counts[64];

static void count(const char *name)
{
    for (int i = 0; i < 64; i++) {
        if (!counts[i].name)
            counts[i].name = name;
        if (strcmp(counts[i].name, name) == 0) {
            counts[i].n++;
            return;
        }
    }
}

static void *need(const char *name, int version, cuuint64_t flags)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = -1;
    CUresult rc = gpa2(name, &p, version, flags, &st);
    if (rc != CUDA_SUCCESS || !p || st != CU_GET_PROC_ADDRESS_SUCCESS) {
        fprintf(stderr, "lookup %s@%d flags %llu failed: %d status %d\n", name, version,
                (unsigned long long)flags, rc, st);
        exit(3);
    }
    return p;
}

static void *need4(const char *name, int version, cuuint64_t flags)
{
    void *p = NULL;
    CUresult rc = gpa1(name, &p, version, flags);
    if (rc != CUDA_SUCCESS || !p) {
        fprintf(stderr, "4-arg lookup %s@%d failed: %d\n", name, version, rc);
        exit(3);
    }
    return p;
}

static void report_lookup(const char *what, const char *name, int version, cuuint64_t flags)
{
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = -1;
    CUresult rc = gpa2(name, &p, version, flags, &st);
    printf("%s: rc=%d status=%d null=%d\n", what, rc, st, p == NULL);
}

int main(void)
{
    long steps = prog_env_long("DRIVER_STEPS", 3);
    long sleep_us = prog_env_long("DRIVER_SLEEP_US", 0);
    void *h = prog_open_driver();
    if (!h)
        return 2;
    gpa2_fn boot = (gpa2_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!boot)
        return 2;
    gpa2 = boot;

    /* the runtime's first four lookups, in its order */
    report_lookup("probe", "", 0, 0);
    init_fn cuInit_ = (init_fn)need("cuInit", 2000, 0);
    gpa1 = (gpa1_fn)need("cuGetProcAddress", 11030, 0);
    gpa2 = (gpa2_fn)need("cuGetProcAddress", 12000, 0);
    printf("self lookup 12000 is the dlsym pointer: %s\n", (void *)gpa2 == (void *)boot ? "yes" : "no");
    gpa2 = (gpa2_fn)need("cuGetProcAddress", 12000, 0);   /* recursively, through itself */

    report_lookup("unknown", "cuNoSuchFunction", 12000, 0);
    report_lookup("too old", "cuLaunchKernelEx", 11000, 0);
    void *legacy = need("cuMemAlloc", 2000, 0);
    printf("cuMemAlloc@2000 is the exported cuMemAlloc: %s\n", legacy == dlsym(h, "cuMemAlloc") ? "yes" : "no");

    libload_fn libload = (libload_fn)need("cuLibraryLoadData", 12000, 0);
    getkernel_fn getkernel = (getkernel_fn)need("cuLibraryGetKernel", 12000, 0);
    kcount_fn kcount = (kcount_fn)need("cuLibraryGetKernelCount", 12040, 0);
    kenum_fn kenum = (kenum_fn)need("cuLibraryEnumerateKernels", 12040, 0);
    kfunc_fn kfunc = (kfunc_fn)need("cuKernelGetFunction", 12000, 0);
    launch_fn launch = (launch_fn)need("cuLaunchKernel", 4000, 0);
    launch_fn launch_pt = (launch_fn)need("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    launch_fn launch4 = (launch_fn)need4("cuLaunchKernel", 4000, 0);
    launchex_fn launchex = (launchex_fn)need("cuLaunchKernelEx", 11060, 0);
    launchex_fn launchex_pt = (launchex_fn)need("cuLaunchKernelEx", 11060, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    graph_fn graph = (graph_fn)need("cuGraphLaunch", 10000, 0);
    alloc_fn alloc = (alloc_fn)need4("cuMemAlloc", 3020, 0);
    free_fn dfree = (free_fn)need("cuMemFree", 3020, 0);
    htod_fn htod = (htod_fn)need("cuMemcpyHtoD", 3020, 0);
    htod_fn htod_pt = (htod_fn)need("cuMemcpyHtoD", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    htod_async_fn htod_async = (htod_async_fn)need("cuMemcpyHtoDAsync", 3020, 0);
    dtoh_fn dtoh = (dtoh_fn)need("cuMemcpyDtoH", 3020, 0);
    dtod_fn dtod = (dtod_fn)need("cuMemcpyDtoD", 3020, 0);
    dtod_fn copy = (dtod_fn)need("cuMemcpy", 4000, 0);
    set_fn set = (set_fn)need("cuMemsetD8", 3020, 0);
    set_fn set_pt = (set_fn)need("cuMemsetD8", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    /* per-thread asked below 7000: the legacy function (an internal one here) */
    set_fn set_pt_old = (set_fn)need("cuMemsetD8", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    launch_fn launch_pt_old = (launch_fn)need("cuLaunchKernel", 4000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    ssync_fn ssync = (ssync_fn)need("cuStreamSynchronize", 2000, 0);
    ssync_fn ssync_pt = (ssync_fn)need("cuStreamSynchronize", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    csync_fn csync = (csync_fn)need("cuCtxSynchronize", 13000, 0);
    void_fn pstart = (void_fn)need("cuProfilerStart", 4000, 0);
    void_fn pstop = (void_fn)need("cuProfilerStop", 4000, 0);

    /* the same request at 10000 and at 13010 (a newer ABI) */
    hostfunc_fn hostfunc = (hostfunc_fn)need("cuLaunchHostFunc", 10000, 0);
    hostfunc_v2_fn hostfunc_v2 = (hostfunc_v2_fn)need("cuLaunchHostFunc", 13010, 0);

    fprintf(stderr, "launch pointer in: %s\n", file_of((void *)launch));
    fprintf(stderr, "cuLaunchHostFunc@10000 pointer in: %s\n", file_of((void *)hostfunc));
    fprintf(stderr, "cuLaunchHostFunc@13010 pointer in: %s\n", file_of((void *)hostfunc_v2));
    int host_runs = 0;
    CUresult host_rc = CUDA_SUCCESS;

    PROG_CU_CHECK(cuInit_(0));
    CUlibrary lib;
    PROG_CU_CHECK(libload(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel matmul, relu, all[3];
    PROG_CU_CHECK(getkernel(&matmul, lib, "_Z6matmulPfS_S_i"));
    PROG_CU_CHECK(getkernel(&relu, lib, "_Z4reluPfi"));
    unsigned nk = 0;
    PROG_CU_CHECK(kcount(&nk, lib));
    PROG_CU_CHECK(kenum(all, 3, lib));       /* all[2]: softmax, named only by the driver */
    CUfunction matmul_fn;
    PROG_CU_CHECK(kfunc(&matmul_fn, matmul));
    printf("kernels in library: %u\n", nk);

    PROG_CU_CHECK(pstart());
    count("cuProfilerStart");
    static unsigned char host[4096], back[4096];
    for (size_t i = 0; i < sizeof host; i++)
        host[i] = (unsigned char)(i * 7);
    CUstream pts = CU_STREAM_PER_THREAD;
    for (long s = 0; s < steps; s++) {
        PROG_CU_CHECK(launch((CUfunction)matmul, 4, 2, 1, 128, 1, 1, 0, NULL, NULL, NULL));
        count("cuLaunchKernel");
        PROG_CU_CHECK(launch_pt((CUfunction)relu, 8, 1, 1, 256, 1, 1, 64, pts, NULL, NULL));
        count("cuLaunchKernel_ptsz");
        PROG_CU_CHECK(launch4((CUfunction)matmul, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        count("cuLaunchKernel");
        PROG_CU_CHECK(launch_pt_old((CUfunction)matmul, 1, 1, 1, 16, 1, 1, 0, NULL, NULL, NULL));
        count("cuLaunchKernel");
        PROG_CU_CHECK(launch(matmul_fn, 2, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL));
        count("cuLaunchKernel");
        PROG_CU_CHECK(launch((CUfunction)all[2], 3, 1, 1, 96, 1, 1, 0, NULL, NULL, NULL));
        count("cuLaunchKernel");
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = 2, cfg.gridDimY = 2, cfg.gridDimZ = 1;
        cfg.blockDimX = 64, cfg.blockDimY = 1, cfg.blockDimZ = 1;
        cfg.sharedMemBytes = 128;
        PROG_CU_CHECK(launchex(&cfg, (CUfunction)matmul, NULL, NULL));
        count("cuLaunchKernelEx");
        cfg.hStream = pts;
        PROG_CU_CHECK(launchex_pt(&cfg, (CUfunction)relu, NULL, NULL));
        count("cuLaunchKernelEx_ptsz");
        CUresult bad = launch(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        count("cuLaunchKernel");
        if (s == 0)
            printf("launch of NULL: %d\n", bad);
        PROG_CU_CHECK(graph((CUgraphExec)(uintptr_t)0x1234, NULL));
        count("cuGraphLaunch");

        CUdeviceptr d, d2;
        PROG_CU_CHECK(alloc(&d, 4096));
        count("cuMemAlloc_v2");
        PROG_CU_CHECK(alloc(&d2, 4096));
        count("cuMemAlloc_v2");
        PROG_CU_CHECK(htod(d, host, 4096));
        count("cuMemcpyHtoD_v2");
        PROG_CU_CHECK(htod_pt(d, host, 1024));
        count("cuMemcpyHtoD_v2_ptds");
        PROG_CU_CHECK(htod_async(d, host, 256, NULL));
        count("cuMemcpyHtoDAsync_v2");
        PROG_CU_CHECK(dtod(d2, d, 2048));
        count("cuMemcpyDtoD_v2");
        PROG_CU_CHECK(copy(d2 + 2048, d + 2048, 2048));
        count("cuMemcpy");
        PROG_CU_CHECK(set(d2, 0x5a, 16));
        count("cuMemsetD8_v2");
        PROG_CU_CHECK(set_pt(d2 + 16, 0x5a, 16));
        count("cuMemsetD8_v2_ptds");
        PROG_CU_CHECK(set_pt_old(d2 + 32, 0x5b, 8));
        count("cuMemsetD8_v2");
        PROG_CU_CHECK(dtoh(back, d2, 4096));
        count("cuMemcpyDtoH_v2");
        PROG_CU_CHECK(dfree(d));
        count("cuMemFree_v2");
        PROG_CU_CHECK(dfree(d2));
        count("cuMemFree_v2");

        PROG_CU_CHECK(ssync(NULL));
        count("cuStreamSynchronize");
        PROG_CU_CHECK(ssync_pt(pts));
        count("cuStreamSynchronize_ptsz");
        PROG_CU_CHECK(csync(NULL));
        count("cuCtxSynchronize_v2");
        PROG_CHECK(cudaDeviceSynchronize());
        count("cudaDeviceSynchronize");
        PROG_CU_CHECK(hostfunc(NULL, host_fn, &host_runs));
        count("cuLaunchHostFunc");
        CUresult rc2 = hostfunc_v2(NULL, host_fn, &host_runs, 1);   /* CU_HOST_TASK_SPINWAIT */
        if (rc2 != CUDA_SUCCESS)
            host_rc = rc2;
        unsigned sum = 0;
        for (size_t i = 0; i < sizeof back; i++)
            sum = sum * 31 + back[i];
        printf("step %ld checksum %08x\n", s, sum);
        if (sleep_us > 0)
            usleep((useconds_t)sleep_us);
        tp_call_step();
    }
    PROG_CU_CHECK(pstop());
    count("cuProfilerStop");
    printf("host functions v2 rc=%d run=%d\n", (int)host_rc, host_runs);
    for (int i = 0; i < 64 && counts[i].name; i++)
        fprintf(stderr, "count %s %ld\n", counts[i].name, counts[i].n);
    return 0;
}
