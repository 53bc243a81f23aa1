/*
 * static_rt.c - a program with its own CUDA runtime linked in, as nvcc's
 * default (-cudart static), cuBLAS and cuDNN are built: the "runtime" calls
 * here are static functions nobody can interpose, and they reach the driver
 * through pointers from cuGetProcAddress (which trainprof's lookup wrappers
 * do interpose).
 *
 * DESIGN
 * rt_launch and rt_memset_async stand for the runtime's cudaLaunchKernel
 * and cudaMemsetAsync: each reports itself to the fake CUPTI as a RUNTIME
 * call (fakegpu.h: this program exports fakegpu_set_observer, which the
 * fake CUPTI finds in the global scope) and, inside that call, spends some
 * microseconds of its own before and after the driver call
 * (cuLaunchKernel, cuMemsetD8Async), as the real runtime spends 1-3 us
 * before it.  The fake CUPTI then does what the real CUPTI 13.0 did on an
 * H100: one API record, the runtime call's, around the driver call, and
 * the device work under that record's correlation id.
 *
 * STATIC_STEPS (default 5) steps, each ended with trainprof_step(), and
 * STATIC_SLEEP_US (default 0) of sleep per step; STATIC_THREADS (default
 * 1, at most 8) threads each make STATIC_LAUNCHES (default 3) launches of
 * their own kernel (thread t: grid 1 + i + 10 t for its launch i) and one
 * memset per step on the default stream, the steps kept in lockstep by a
 * barrier.  STATIC_HOSTFN=1 (2 threads or more): thread 1 first makes a
 * cudaLaunchHostFunc whose host function, which the fake driver runs
 * inside cuLaunchHostFunc, waits for thread 0's calls of the step.  stdout is the same with and without the
 * preload: a checksum per step of what the memsets wrote.
 */
#define _GNU_SOURCE
#include <cuda.h>
#undef cuGetProcAddress   /* cuda.h: cuGetProcAddress_v2 */
#include <cupti_runtime_cbid.h>

#include "prog.h"
#include "tests/fakes/fakegpu.h"

#include <pthread.h>

#define MAX_THREADS 8
#define RT_BEFORE_NS 3000   /* the runtime's own work before its driver call */
#define RT_AFTER_NS 1500    /* and after it */

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*libload_fn)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                               CUlibraryOption *, void **, unsigned);
typedef CUresult (*getkernel_fn)(CUkernel *, CUlibrary, const char *);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*setasync_fn)(CUdeviceptr, unsigned char, size_t, CUstream);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*ssync_fn)(CUstream);
typedef CUresult (*hostfunc_fn)(CUstream, CUhostFn, void *);

static const char image[] = "fakecubin _Z6matmulPfS_S_i _Z4reluPfi _Z7softmaxPfi";
static const char *const kernel_names[3] = { "_Z6matmulPfS_S_i", "_Z4reluPfi", "_Z7softmaxPfi" };

/* ---- the linked-in "runtime" ---------------------------------------------- */

static fakegpu_begin_fn obs_begin;
static fakegpu_end_fn obs_end;

__attribute__((visibility("default"))) void fakegpu_set_observer(fakegpu_begin_fn begin, fakegpu_end_fn end);
__attribute__((visibility("default"))) void fakegpu_set_observer(fakegpu_begin_fn begin, fakegpu_end_fn end)
{
    if (begin && end) {
        __atomic_store_n(&obs_end, end, __ATOMIC_RELAXED);
        __atomic_store_n(&obs_begin, begin, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&obs_begin, NULL, __ATOMIC_RELEASE);
        __atomic_store_n(&obs_end, NULL, __ATOMIC_RELEASE);
    }
}

static struct {
    launch_fn launch;
    setasync_fn set_async;
    hostfunc_fn host_func;
} drv;

static void rt_spin(uint64_t ns)
{
    uint64_t end = prog_now_ns() + ns;
    while (prog_now_ns() < end) {
    }
}

struct rt_call {
    fakegpu_end_fn end;
    uint64_t token;
};

static struct rt_call rt_enter(void)
{
    struct rt_call c = { NULL, 0 };
    fakegpu_begin_fn b = __atomic_load_n(&obs_begin, __ATOMIC_ACQUIRE);
    if (b) {
        c.end = __atomic_load_n(&obs_end, __ATOMIC_RELAXED);
        if (c.end)
            c.token = b();
    }
    return c;
}

static int rt_launch(CUfunction f, const char *name, unsigned grid, unsigned block, CUstream s)
{
    struct rt_call c = rt_enter();
    rt_spin(RT_BEFORE_NS);
    CUresult rc = drv.launch(f, grid, 1, 1, block, 1, 1, 0, s, NULL, NULL);
    rt_spin(RT_AFTER_NS);
    if (c.end) {
        struct fakegpu_op op;
        memset(&op, 0, sizeof op);
        op.domain = FAKEGPU_RUNTIME;
        op.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        op.kind = rc == CUDA_SUCCESS ? FAKEGPU_KERNEL : FAKEGPU_NONE;
        op.kernel = name;
        op.grid[0] = grid, op.grid[1] = op.grid[2] = 1;
        op.block[0] = block, op.block[1] = op.block[2] = 1;
        op.stream = (uint64_t)(uintptr_t)s;
        op.status = (int)rc;
        c.end(c.token, &op);
    }
    return (int)rc;
}

static int rt_memset_async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    struct rt_call c = rt_enter();
    rt_spin(RT_BEFORE_NS);
    CUresult rc = drv.set_async(d, v, n, s);
    rt_spin(RT_AFTER_NS);
    if (c.end) {
        struct fakegpu_op op;
        memset(&op, 0, sizeof op);
        op.domain = FAKEGPU_RUNTIME;
        op.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020;
        op.kind = rc == CUDA_SUCCESS ? FAKEGPU_MEMSET : FAKEGPU_NONE;
        op.bytes = n;
        op.stream = (uint64_t)(uintptr_t)s;
        op.status = (int)rc;
        c.end(c.token, &op);
    }
    return (int)rc;
}

/* cudaLaunchHostFunc: the fake driver runs "fn" at once, inside its call. */
static int rt_host_func(CUhostFn fn, void *ud, CUstream s)
{
    struct rt_call c = rt_enter();
    rt_spin(RT_BEFORE_NS);
    CUresult rc = drv.host_func(s, fn, ud);
    rt_spin(RT_AFTER_NS);
    if (c.end) {
        struct fakegpu_op op;
        memset(&op, 0, sizeof op);
        op.domain = FAKEGPU_RUNTIME;
        op.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000;
        op.kind = FAKEGPU_NONE;
        op.stream = (uint64_t)(uintptr_t)s;
        op.status = (int)rc;
        c.end(c.token, &op);
    }
    return (int)rc;
}

/* ---- the program ------------------------------------------------------------ */

static gpa2_fn gpa2;

static void *need(const char *name, int version)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = -1;
    if (gpa2(name, &p, version, 0, &st) != CUDA_SUCCESS || !p) {
        fprintf(stderr, "lookup %s@%d failed\n", name, version);
        exit(3);
    }
    return p;
}

static long steps, sleep_us, launches;
static int n_threads;
static pthread_barrier_t barrier;
static CUkernel kernels[3];
static alloc_fn dalloc;
static free_fn dfree;
static dtoh_fn dtoh;
static ssync_fn ssync;
static unsigned sums[MAX_THREADS];

/* STATIC_HOSTFN=1: each step, thread 1's host function (run inside its
 * driver call cuLaunchHostFunc) waits until thread 0 has made its calls of
 * the step, so that thread 0's runtime records lie inside thread 1's
 * driver call. */
static int hostfn_mode;
static pthread_mutex_t hf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hf_cond = PTHREAD_COND_INITIALIZER;
static long hf_go = -1, hf_done = -1;    /* steps signalled */

static void hf_wait_for(long *what, long step)
{
    pthread_mutex_lock(&hf_lock);
    while (*what < step)
        pthread_cond_wait(&hf_cond, &hf_lock);
    pthread_mutex_unlock(&hf_lock);
}

static void hf_signal(long *what, long step)
{
    pthread_mutex_lock(&hf_lock);
    *what = step;
    pthread_cond_broadcast(&hf_cond);
    pthread_mutex_unlock(&hf_lock);
}

static void CUDA_CB host_fn(void *ud)
{
    long step = (long)(intptr_t)ud;
    hf_signal(&hf_go, step);
    hf_wait_for(&hf_done, step);
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    CUstream s = NULL;
    CUdeviceptr d;
    PROG_CU_CHECK(dalloc(&d, 256));
    unsigned char back[256];
    for (long step = 0; step < steps; step++) {
        pthread_barrier_wait(&barrier);
        if (hostfn_mode && me == 1)
            PROG_CU_CHECK(rt_host_func(host_fn, (void *)(intptr_t)step, s));
        if (hostfn_mode && me == 0)
            hf_wait_for(&hf_go, step);
        for (long i = 0; i < launches; i++)
            PROG_CU_CHECK(rt_launch((CUfunction)kernels[me % 3], kernel_names[me % 3],
                                    (unsigned)(1 + i + 10 * me), 64, s));
        PROG_CU_CHECK(rt_memset_async(d, (unsigned char)(step * 8 + me), sizeof back, s));
        PROG_CU_CHECK(ssync(s));
        PROG_CU_CHECK(dtoh(back, d, sizeof back));
        if (hostfn_mode && me == 0)
            hf_signal(&hf_done, step);
        unsigned sum = 0;
        for (size_t i = 0; i < sizeof back; i++)
            sum = sum * 31 + back[i];
        sums[me] = sum;
        pthread_barrier_wait(&barrier);
        if (me == 0) {
            unsigned all = 0;
            for (int t = 0; t < n_threads; t++)
                all = all * 131 + sums[t];
            printf("step %ld checksum %08x\n", step, all);
            if (sleep_us > 0)
                usleep((useconds_t)sleep_us);
            tp_call_step();
        }
    }
    PROG_CU_CHECK(dfree(d));
    return NULL;
}

int main(void)
{
    steps = prog_env_long("STATIC_STEPS", 5);
    sleep_us = prog_env_long("STATIC_SLEEP_US", 0);
    launches = prog_env_long("STATIC_LAUNCHES", 3);
    n_threads = (int)prog_env_long("STATIC_THREADS", 1);
    hostfn_mode = prog_env_long("STATIC_HOSTFN", 0) != 0 && n_threads >= 2;
    if (n_threads < 1 || n_threads > MAX_THREADS) {
        fprintf(stderr, "STATIC_THREADS: 1 to %d\n", MAX_THREADS);
        return 64;
    }
    void *h = prog_open_driver();
    if (!h)
        return 2;
    gpa2 = (gpa2_fn)prog_sym(h, "cuGetProcAddress_v2");
    gpa2 = (gpa2_fn)need("cuGetProcAddress", 12000);
    init_fn init = (init_fn)need("cuInit", 2000);
    libload_fn libload = (libload_fn)need("cuLibraryLoadData", 12000);
    getkernel_fn getkernel = (getkernel_fn)need("cuLibraryGetKernel", 12000);
    drv.launch = (launch_fn)need("cuLaunchKernel", 4000);
    drv.set_async = (setasync_fn)need("cuMemsetD8Async", 3020);
    dalloc = (alloc_fn)need("cuMemAlloc", 3020);
    dfree = (free_fn)need("cuMemFree", 3020);
    dtoh = (dtoh_fn)need("cuMemcpyDtoH", 3020);
    ssync = (ssync_fn)need("cuStreamSynchronize", 2000);
    drv.host_func = (hostfunc_fn)need("cuLaunchHostFunc", 10000);

    PROG_CU_CHECK(init(0));
    CUlibrary lib;
    PROG_CU_CHECK(libload(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    for (int i = 0; i < 3; i++)
        PROG_CU_CHECK(getkernel(&kernels[i], lib, kernel_names[i]));

    pthread_barrier_init(&barrier, NULL, (unsigned)n_threads);
    pthread_t th[MAX_THREADS];
    for (int t = 1; t < n_threads; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    worker((void *)(intptr_t)0);
    for (int t = 1; t < n_threads; t++)
        pthread_join(th[t], NULL);
    printf("%d threads, %ld steps of %ld launches and a memset\n", n_threads, steps, launches);
    return 0;
}
