/*
 * cudart.c - a fake of the GPU-executing part of the CUDA runtime, for tests.
 *
 * DESIGN
 * Built from the real headers as build/fakes/libcudart.so.13 (soname
 * libcudart.so.13), so that test programs link and call exactly what a program
 * built by nvcc against CUDA 13 links and calls, and the preloaded library
 * interposes the same symbols it would in production.  There is no device:
 * device memory is host memory (malloc), copies and sets really copy and set,
 * synchronizations return at once, and launches do nothing but validate their
 * function (NULL gives cudaErrorInvalidDeviceFunction and sets the calling
 * thread's last error, as the real runtime does) and, when FAKE_CUDA_LAUNCH_NS
 * is set, spend that many nanoseconds so that benchmarks can model a launch's
 * host cost.  A non-NULL stub that was never registered is accepted by
 * cudaLaunchKernel (the real runtime would refuse it), so that benchmarks need
 * not register stubs; __cudaLaunchKernel does check its cudaKernel_t.
 *
 * Registration (__cudaRegisterFatBinary / __cudaRegisterFunction) keeps a
 * table stub -> device name; __cudaGetKernel hands out a pointer to the table
 * entry as the cudaKernel_t and cudaFuncGetName answers from the table.
 * Thread safety: the table has a lock (registration and lookups only); the
 * last error and the call-configuration stack are per thread; launches take
 * no lock.
 *
 * Observer (tests/fakes/fakegpu.h): the fake CUPTI registers begin/end
 * callbacks with fakegpu_set_observer(); launches, graph launches, copies,
 * sets, synchronizations (cudaStreamWaitEvent included) and cudaEventRecord
 * then report each call (runtime domain, CUPTI runtime cbid, kernel name
 * from the registration table, sizes, stream, event handle) so
 * that it can produce activity records.  Unset, an entry point pays one
 * relaxed load; set, a launch by stub also takes the table lock to find the
 * kernel's name.  A call that fails reports kind NONE (an API record, no
 * device work), as CUPTI would.
 */
#define _GNU_SOURCE   /* dladdr */
#include "fakegpu.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

/* ---- declarations the C headers do not give us ---------------------------
 * crt/host_runtime.h and crt/device_functions.h are C++-only; these match
 * their prototypes.  The _ptsz/_ptds forms are declared by cuda_runtime_api.h
 * only in per-thread-default-stream mode, which would rename the plain forms
 * we also define. */
FAKE_EXPORT void **__cudaRegisterFatBinary(void *fatCubin);
FAKE_EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
FAKE_EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle);
FAKE_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                        const char *deviceName, int thread_limit, uint3 *tid,
                                        uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
FAKE_EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                   const char *deviceName, int ext, size_t size, int constant,
                                   int global);
FAKE_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                 struct CUstream_st *stream);
FAKE_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                                   size_t *sharedMem, void *stream);
FAKE_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
FAKE_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **a, size_t sm,
                                           cudaStream_t s);
FAKE_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **a,
                                                size_t sm, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                              cudaStream_t s);
FAKE_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f,
                                                 void **a);
FAKE_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *f, dim3 g, dim3 b, void **a,
                                                         size_t sm, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMemcpy_ptds(void *d, const void *src, size_t n, enum cudaMemcpyKind k);
FAKE_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *d, const void *src, size_t n,
                                             enum cudaMemcpyKind k, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMemset_ptds(void *d, int v, size_t n);
FAKE_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *d, int v, size_t n, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
FAKE_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int fl);

/* ---- per-thread error state, launch cost -------------------------------- */

static __thread cudaError_t last_error = cudaSuccess;

static long launch_ns;   /* FAKE_CUDA_LAUNCH_NS, read once */

/* The real runtime loads the driver (dlopen "libcuda.so.1"), calls cuInit
 * and retains the device's primary context before its first call does
 * anything; the fake does the same once, at load time, finding the fake
 * driver beside itself.  Without a driver the
 * real runtime's calls fail with cudaErrorInsufficientDriver; the tests of
 * that use the real runtime (tests/preload/test_real_clients.py). */
typedef int (*fake_cuinit_fn)(unsigned int);
typedef int (*fake_retain_fn)(void **, int);

static void fake_load_driver(void)
{
    /* by full path, beside this library (a bare name searches the caller's
     * run path, and under ASan the caller is the dlopen interceptor) */
    char path[4096] = "libcuda.so.1";
    Dl_info me;
    if (dladdr((void *)fake_load_driver, &me) && me.dli_fname && strrchr(me.dli_fname, '/'))
        snprintf(path, sizeof path, "%.*s/libcuda.so.1",
                 (int)(strrchr(me.dli_fname, '/') - me.dli_fname), me.dli_fname);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    fake_cuinit_fn init = h ? (fake_cuinit_fn)dlsym(h, "cuInit") : NULL;
    fake_retain_fn retain = h ? (fake_retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain") : NULL;
    void *ctx = NULL;
    if (init && init(0) == 0 && retain)
        retain(&ctx, 0);
}

__attribute__((constructor)) static void fake_init(void)
{
    fake_load_driver();
    const char *v = getenv("FAKE_CUDA_LAUNCH_NS");
    if (v && *v) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno == 0 && *end == '\0' && n > 0)
            launch_ns = n;
    }
}

static cudaError_t fail(cudaError_t e)
{
    last_error = e;
    return e;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spend launch_ns: spin below 200 us (a launch is CPU work, and nanosleep's
 * granularity is ~50 us), sleep above. */
static void launch_cost(void)
{
    long ns = launch_ns;
    if (ns <= 0)
        return;
    if (ns > 200000) {
        struct timespec ts = { ns / 1000000000L, ns % 1000000000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        return;
    }
    uint64_t end = mono_ns() + (uint64_t)ns;
    while (mono_ns() < end) {
    }
}

/* ---- observer (the fake CUPTI) -------------------------------------------- */

FAKE_EXPORT void fakegpu_set_observer(fakegpu_begin_fn begin, fakegpu_end_fn end);

static fakegpu_begin_fn obs_begin_fn;
static fakegpu_end_fn obs_end_fn;

/* Setting stores end before begin (release); clearing clears begin first. */
FAKE_EXPORT void fakegpu_set_observer(fakegpu_begin_fn begin, fakegpu_end_fn end)
{
    if (begin && end) {
        __atomic_store_n(&obs_end_fn, end, __ATOMIC_RELAXED);
        __atomic_store_n(&obs_begin_fn, begin, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&obs_begin_fn, NULL, __ATOMIC_RELEASE);
        __atomic_store_n(&obs_end_fn, NULL, __ATOMIC_RELEASE);
    }
}

struct obs {
    fakegpu_end_fn end;        /* NULL: no observer at entry */
    uint64_t token;
};

static inline struct obs obs_enter(void)
{
    struct obs o = { NULL, 0 };
    fakegpu_begin_fn b = __atomic_load_n(&obs_begin_fn, __ATOMIC_RELAXED);
    if (__builtin_expect(b != NULL, 0)) {
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        o.end = __atomic_load_n(&obs_end_fn, __ATOMIC_RELAXED);
        if (o.end)
            o.token = b();
    }
    return o;
}

static void obs_report(const struct obs *o, int cbid, int kind, cudaStream_t s)
{
    struct fakegpu_op op;
    memset(&op, 0, sizeof op);
    op.domain = FAKEGPU_RUNTIME;
    op.cbid = cbid;
    op.kind = kind;
    op.stream = (uint64_t)(uintptr_t)s;
    o->end(o->token, &op);
}

/* A call on event "e": its record (cudaEventRecord) or a sync on it. */
static void obs_event(const struct obs *o, int cbid, cudaError_t r, int kind, cudaStream_t s,
                      cudaEvent_t e)
{
    struct fakegpu_op op;
    memset(&op, 0, sizeof op);
    op.domain = FAKEGPU_RUNTIME;
    op.cbid = cbid;
    op.kind = r == cudaSuccess ? kind : FAKEGPU_NONE;
    op.status = (int)r;
    op.stream = (uint64_t)(uintptr_t)s;
    op.event = (uint64_t)(uintptr_t)e;
    o->end(o->token, &op);
}

static void obs_launch(const struct obs *o, int cbid, cudaError_t r, const char *name, dim3 g,
                       dim3 b, size_t sm, cudaStream_t s)
{
    struct fakegpu_op op;
    memset(&op, 0, sizeof op);
    op.domain = FAKEGPU_RUNTIME;
    op.cbid = cbid;
    op.kind = r == cudaSuccess ? FAKEGPU_KERNEL : FAKEGPU_NONE;
    op.status = (int)r;
    op.kernel = name;
    op.grid[0] = g.x, op.grid[1] = g.y, op.grid[2] = g.z;
    op.block[0] = b.x, op.block[1] = b.y, op.block[2] = b.z;
    op.smem = (unsigned)sm;
    op.stream = (uint64_t)(uintptr_t)s;
    o->end(o->token, &op);
}

static void obs_bytes(const struct obs *o, int cbid, cudaError_t r, int kind, size_t n,
                      enum cudaMemcpyKind k, cudaStream_t s)
{
    struct fakegpu_op op;
    memset(&op, 0, sizeof op);
    op.domain = FAKEGPU_RUNTIME;
    op.cbid = cbid;
    op.kind = r == cudaSuccess ? kind : FAKEGPU_NONE;
    op.status = (int)r;
    op.bytes = n;
    op.copy_kind = (int)k;
    op.stream = (uint64_t)(uintptr_t)s;
    o->end(o->token, &op);
}

#define OBS_COPY(cbid, call, n, k, s) do { \
        struct obs o_ = obs_enter(); \
        cudaError_t r_ = (call); \
        if (o_.end) \
            obs_bytes(&o_, CUPTI_RUNTIME_TRACE_CBID_##cbid, r_, FAKEGPU_MEMCPY, (n), (k), (s)); \
        return r_; \
    } while (0)

#define OBS_SET(cbid, call, n, s) do { \
        struct obs o_ = obs_enter(); \
        cudaError_t r_ = (call); \
        if (o_.end) \
            obs_bytes(&o_, CUPTI_RUNTIME_TRACE_CBID_##cbid, r_, FAKEGPU_MEMSET, (n), \
                      cudaMemcpyHostToHost, (s)); \
        return r_; \
    } while (0)

#define OBS_SYNC(cbid, call, s) do { \
        struct obs o_ = obs_enter(); \
        cudaError_t r_ = (call); \
        if (o_.end) \
            obs_report(&o_, CUPTI_RUNTIME_TRACE_CBID_##cbid, \
                       r_ == cudaSuccess ? FAKEGPU_SYNC : FAKEGPU_NONE, (s)); \
        return r_; \
    } while (0)

#define OBS_EVENT(cbid, call, kind, s, e) do { \
        struct obs o_ = obs_enter(); \
        cudaError_t r_ = (call); \
        if (o_.end) \
            obs_event(&o_, CUPTI_RUNTIME_TRACE_CBID_##cbid, r_, (kind), (s), (e)); \
        return r_; \
    } while (0)

#define OBS_NONE(cbid, call, s) do { \
        struct obs o_ = obs_enter(); \
        cudaError_t r_ = (call); \
        if (o_.end) \
            obs_report(&o_, CUPTI_RUNTIME_TRACE_CBID_##cbid, FAKEGPU_NONE, (s)); \
        return r_; \
    } while (0)

/* ---- registration table ------------------------------------------------- */

#define FUNC_MAGIC 0x46554e43u

struct fake_func {
    unsigned magic;            /* FUNC_MAGIC: lets a launch check a cudaKernel_t lock-free */
    const void *stub;          /* host stub address */
    char *device_name;         /* mangled device name (copied) */
    void **module;             /* fat binary handle it came from */
    struct fake_func *next;
};

struct fake_module {
    void *fatbin;
    int ended;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_func *funcs;   /* newest first; never freed while the process lives */

static struct fake_func *find_func_locked(const void *stub)
{
    for (struct fake_func *f = funcs; f; f = f->next)
        if (f->stub == stub)
            return f;
    return NULL;
}

/* Entries are never freed, so a handle from __cudaGetKernel stays readable. */
static int is_registered_kernel(cudaKernel_t k)
{
    return ((const struct fake_func *)(const void *)k)->magic == FUNC_MAGIC;
}

FAKE_EXPORT void **__cudaRegisterFatBinary(void *fatCubin)
{
    /* nvcc's generated code only passes the handle back to us. */
    void **h = calloc(2, sizeof(void *));
    struct fake_module *m = calloc(1, sizeof(*m));
    if (!h || !m) {
        free(h);
        free(m);
        return NULL;
    }
    m->fatbin = fatCubin;
    h[0] = m;
    return h;
}

FAKE_EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    if (fatCubinHandle && fatCubinHandle[0])
        ((struct fake_module *)fatCubinHandle[0])->ended = 1;
}

FAKE_EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    if (!fatCubinHandle)
        return;
    /* Entries stay in the table (a profiler may still hold their names); they
     * only forget their module. */
    pthread_mutex_lock(&reg_lock);
    for (struct fake_func *f = funcs; f; f = f->next)
        if (f->module == fatCubinHandle)
            f->module = NULL;
    pthread_mutex_unlock(&reg_lock);
    free(fatCubinHandle[0]);
    free(fatCubinHandle);
}

FAKE_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                        const char *deviceName, int thread_limit, uint3 *tid,
                                        uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)thread_limit; (void)tid; (void)bid; (void)bDim; (void)gDim; (void)wSize;
    const char *name = deviceFun ? deviceFun : deviceName;
    if (!hostFun || !name)
        return;
    char *copy = strdup(name);
    if (!copy)
        return;
    pthread_mutex_lock(&reg_lock);
    struct fake_func *f = find_func_locked(hostFun);
    if (f) {
        /* Re-registration replaces the name; the old one may still be held
         * by a caller of cudaFuncGetName, so it is not freed. */
        f->device_name = copy;
        f->module = fatCubinHandle;
        pthread_mutex_unlock(&reg_lock);
        return;
    }
    f = calloc(1, sizeof(*f));
    if (!f) {
        pthread_mutex_unlock(&reg_lock);
        free(copy);
        return;
    }
    f->magic = FUNC_MAGIC;
    f->stub = hostFun;
    f->device_name = copy;
    f->module = fatCubinHandle;
    f->next = funcs;
    funcs = f;
    pthread_mutex_unlock(&reg_lock);
}

FAKE_EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                   const char *deviceName, int ext, size_t size, int constant,
                                   int global)
{
    (void)fatCubinHandle; (void)hostVar; (void)deviceAddress; (void)deviceName;
    (void)ext; (void)size; (void)constant; (void)global;
}

/* Referenced by every nvcc host stub built without optimisation
 * (crt/host_runtime.h, for __managed__ variables): defined so that such
 * programs also load with eager binding (LD_BIND_NOW). */
FAKE_EXPORT char __cudaInitModule(void **fatCubinHandle)
{
    (void)fatCubinHandle;
    return 1;
}

FAKE_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    if (!kernel)
        return fail(cudaErrorInvalidValue);
    pthread_mutex_lock(&reg_lock);
    struct fake_func *f = find_func_locked(func);
    pthread_mutex_unlock(&reg_lock);
    if (!f)
        return fail(cudaErrorInvalidDeviceFunction);
    *kernel = (cudaKernel_t)(void *)f;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    if (!name || !func)
        return fail(cudaErrorInvalidValue);
    pthread_mutex_lock(&reg_lock);
    struct fake_func *f = find_func_locked(func);
    const char *n = f ? f->device_name : NULL;
    pthread_mutex_unlock(&reg_lock);
    if (!n)
        return fail(cudaErrorInvalidDeviceFunction);
    *name = n;
    return cudaSuccess;
}

/* ---- <<<>>> call configuration (what nvcc's stubs use) ------------------ */

struct call_config {
    dim3 grid, block;
    size_t shmem;
    void *stream;
};

#define CALL_STACK_MAX 32
static __thread struct call_config call_stack[CALL_STACK_MAX];
static __thread int call_depth;

FAKE_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                 struct CUstream_st *stream)
{
    if (call_depth >= CALL_STACK_MAX)
        return 1;
    call_stack[call_depth++] = (struct call_config){ gridDim, blockDim, sharedMem, stream };
    return 0;
}

FAKE_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                                   size_t *sharedMem, void *stream)
{
    if (call_depth <= 0)
        return fail(cudaErrorMissingConfiguration);
    struct call_config c = call_stack[--call_depth];
    if (gridDim) *gridDim = c.grid;
    if (blockDim) *blockDim = c.block;
    if (sharedMem) *sharedMem = c.shmem;
    if (stream) *(void **)stream = c.stream;
    return cudaSuccess;
}

/* ---- launches ----------------------------------------------------------- */

static cudaError_t launch_stub(const void *f, dim3 g, dim3 b)
{
    if (!f)
        return fail(cudaErrorInvalidDeviceFunction);
    if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0)
        return fail(cudaErrorInvalidConfiguration);
    launch_cost();
    return cudaSuccess;
}

static cudaError_t launch_kernel(cudaKernel_t k, dim3 g, dim3 b)
{
    if (!k || !is_registered_kernel(k))
        return fail(cudaErrorInvalidDeviceFunction);
    return launch_stub((const void *)k, g, b);
}

/* Names for the observer only (registration entries are never freed). */
static const char *stub_name(const void *f)
{
    if (!f)
        return NULL;
    pthread_mutex_lock(&reg_lock);
    struct fake_func *e = find_func_locked(f);
    const char *n = e ? e->device_name : NULL;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

static const char *kernel_name(cudaKernel_t k)
{
    return k && is_registered_kernel(k) ? ((const struct fake_func *)(const void *)k)->device_name
                                        : NULL;
}

#define OBS_LAUNCH(cbid, call, name, g, b, sm, s) do { \
        struct obs o_ = obs_enter(); \
        cudaError_t r_ = (call); \
        if (o_.end) \
            obs_launch(&o_, CUPTI_RUNTIME_TRACE_CBID_##cbid, r_, (name), (g), (b), (sm), (s)); \
        return r_; \
    } while (0)

FAKE_EXPORT cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                         cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchKernel_v7000, launch_stub(f, g, b), stub_name(f), g, b, sm, s);
}

FAKE_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                              cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchKernel_ptsz_v7000, launch_stub(f, g, b), stub_name(f), g, b, sm, s);
}

FAKE_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **a, size_t sm,
                                           cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(__cudaLaunchKernel_v13000, launch_kernel(k, g, b), kernel_name(k), g, b, sm, s);
}

FAKE_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **a,
                                                size_t sm, cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(__cudaLaunchKernel_ptsz_v13000, launch_kernel(k, g, b), kernel_name(k), g, b, sm,
               s);
}

static cudaError_t launch_ex(const cudaLaunchConfig_t *c, const void *f)
{
    if (!c)
        return fail(cudaErrorInvalidValue);
    return launch_stub(f, c->gridDim, c->blockDim);
}

static const dim3 dim_zero = { 0, 0, 0 };

FAKE_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *f, void **a)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchKernelExC_v11060, launch_ex(c, f), stub_name(f),
               c ? c->gridDim : dim_zero, c ? c->blockDim : dim_zero,
               c ? c->dynamicSmemBytes : 0, c ? c->stream : NULL);
}

FAKE_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f,
                                                 void **a)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchKernelExC_ptsz_v11060, launch_ex(c, f), stub_name(f),
               c ? c->gridDim : dim_zero, c ? c->blockDim : dim_zero,
               c ? c->dynamicSmemBytes : 0, c ? c->stream : NULL);
}

FAKE_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *f, dim3 g, dim3 b, void **a,
                                                    size_t sm, cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchCooperativeKernel_v9000, launch_stub(f, g, b), stub_name(f), g, b, sm,
               s);
}

FAKE_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *f, dim3 g, dim3 b, void **a,
                                                         size_t sm, cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchCooperativeKernel_ptsz_v9000, launch_stub(f, g, b), stub_name(f), g, b,
               sm, s);
}

/* ---- graphs (dummy handles) --------------------------------------------- */

struct fake_graph { int magic; };
struct fake_graph_exec { int magic; };
#define GRAPH_MAGIC 0x47524150
#define EXEC_MAGIC  0x45584543

FAKE_EXPORT cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    (void)flags;
    if (!pGraph)
        return fail(cudaErrorInvalidValue);
    struct fake_graph *g = malloc(sizeof(*g));
    if (!g)
        return fail(cudaErrorMemoryAllocation);
    g->magic = GRAPH_MAGIC;
    *pGraph = (cudaGraph_t)(void *)g;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                             unsigned long long flags)
{
    (void)flags;
    if (!pGraphExec || !graph)
        return fail(cudaErrorInvalidValue);
    struct fake_graph_exec *e = malloc(sizeof(*e));
    if (!e)
        return fail(cudaErrorMemoryAllocation);
    e->magic = EXEC_MAGIC;
    *pGraphExec = (cudaGraphExec_t)(void *)e;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                      unsigned long long flags)
{
    return cudaGraphInstantiate(pGraphExec, graph, flags);
}

/* Stream capture: the captured work is not kept (nothing runs anyway); the
 * graph ending the capture is a fresh one.  One capture per thread. */
static __thread cudaStream_t capturing;
static __thread int capture_open;

static cudaError_t begin_capture(cudaStream_t s)
{
    if (capture_open)
        return fail(cudaErrorIllegalState);
    capture_open = 1;
    capturing = s;
    return cudaSuccess;
}

static cudaError_t end_capture(cudaStream_t s, cudaGraph_t *g)
{
    if (!capture_open || s != capturing || !g)
        return fail(cudaErrorStreamCaptureInvalidated);
    capture_open = 0;
    return cudaGraphCreate(g, 0);
}

FAKE_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    (void)mode;
    return begin_capture(s);
}

FAKE_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    (void)mode;
    return begin_capture(s);
}

FAKE_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    return end_capture(s, g);
}

FAKE_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
    return end_capture(s, g);
}

FAKE_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    if (!e)
        return fail(cudaErrorInvalidValue);
    free((void *)e);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    if (!g)
        return fail(cudaErrorInvalidValue);
    free((void *)g);
    return cudaSuccess;
}

static cudaError_t graph_launch(cudaGraphExec_t e)
{
    if (!e)
        return fail(cudaErrorInvalidValue);
    launch_cost();
    return cudaSuccess;
}

/* Reported without device work (the fake keeps no graph nodes). */
FAKE_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
    OBS_NONE(cudaGraphLaunch_v10000, graph_launch(e), s);
}

FAKE_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t s)
{
    OBS_NONE(cudaGraphLaunch_ptsz_v10000, graph_launch(e), s);
}

/* ---- copies and sets ---------------------------------------------------- */

static cudaError_t do_copy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    if ((unsigned)k > (unsigned)cudaMemcpyDefault)
        return fail(cudaErrorInvalidMemcpyDirection);
    if (n == 0)
        return cudaSuccess;
    if (!d || !s)
        return fail(cudaErrorInvalidValue);
    memmove(d, s, n);
    return cudaSuccess;
}

static cudaError_t do_copy2d(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                             enum cudaMemcpyKind k)
{
    if ((unsigned)k > (unsigned)cudaMemcpyDefault)
        return fail(cudaErrorInvalidMemcpyDirection);
    if (w == 0 || h == 0)
        return cudaSuccess;
    if (!d || !s || w > dp || w > sp)
        return fail(cudaErrorInvalidValue);
    for (size_t r = 0; r < h; r++)
        memmove((char *)d + r * dp, (const char *)s + r * sp, w);
    return cudaSuccess;
}

static cudaError_t do_set(void *d, int v, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    if (!d)
        return fail(cudaErrorInvalidValue);
    memset(d, v, n);
    return cudaSuccess;
}

static cudaError_t do_set2d(void *d, size_t p, int v, size_t w, size_t h)
{
    if (w == 0 || h == 0)
        return cudaSuccess;
    if (!d || w > p)
        return fail(cudaErrorInvalidValue);
    for (size_t r = 0; r < h; r++)
        memset((char *)d + r * p, v, w);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    OBS_COPY(cudaMemcpy_v3020, do_copy(d, s, n, k), n, k, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpy_ptds(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    OBS_COPY(cudaMemcpy_ptds_v7000, do_copy(d, s, n, k), n, k, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                                        cudaStream_t st)
{
    OBS_COPY(cudaMemcpyAsync_v3020, do_copy(d, s, n, k), n, k, st);
}

FAKE_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *d, const void *s, size_t n,
                                             enum cudaMemcpyKind k, cudaStream_t st)
{
    OBS_COPY(cudaMemcpyAsync_ptsz_v7000, do_copy(d, s, n, k), n, k, st);
}

FAKE_EXPORT cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w,
                                     size_t h, enum cudaMemcpyKind k)
{
    OBS_COPY(cudaMemcpy2D_v3020, do_copy2d(d, dp, s, sp, w, h, k), w * h, k, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w,
                                          size_t h, enum cudaMemcpyKind k, cudaStream_t st)
{
    OBS_COPY(cudaMemcpy2DAsync_v3020, do_copy2d(d, dp, s, sp, w, h, k), w * h, k, st);
}

static cudaError_t do_peer(void *d, int dd, const void *s, int sd, size_t n)
{
    if (dd != 0 || sd != 0)
        return fail(cudaErrorInvalidDevice);
    return do_copy(d, s, n, cudaMemcpyDeviceToDevice);
}

FAKE_EXPORT cudaError_t cudaMemcpyPeer(void *d, int dd, const void *s, int sd, size_t n)
{
    OBS_COPY(cudaMemcpyPeer_v4000, do_peer(d, dd, s, sd, n), n, cudaMemcpyDeviceToDevice, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n,
                                            cudaStream_t st)
{
    OBS_COPY(cudaMemcpyPeerAsync_v4000, do_peer(d, dd, s, sd, n), n, cudaMemcpyDeviceToDevice,
             st);
}

/* A "symbol" is the host shadow variable's address; in the fake it is the
 * storage itself.  The helpers keep the Async forms from calling the
 * interposable sync forms (the profiler would see two calls). */
static cudaError_t to_symbol(const void *sym, const void *s, size_t n, size_t off,
                             enum cudaMemcpyKind k)
{
    if (!sym)
        return fail(cudaErrorInvalidSymbol);
    return do_copy((char *)(uintptr_t)sym + off, s, n, k);
}

static cudaError_t from_symbol(void *d, const void *sym, size_t n, size_t off,
                               enum cudaMemcpyKind k)
{
    if (!sym)
        return fail(cudaErrorInvalidSymbol);
    return do_copy(d, (const char *)sym + off, n, k);
}

FAKE_EXPORT cudaError_t cudaMemcpyToSymbol(const void *sym, const void *s, size_t n, size_t off,
                                           enum cudaMemcpyKind k)
{
    OBS_COPY(cudaMemcpyToSymbol_v3020, to_symbol(sym, s, n, off, k), n, k, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpyFromSymbol(void *d, const void *sym, size_t n, size_t off,
                                             enum cudaMemcpyKind k)
{
    OBS_COPY(cudaMemcpyFromSymbol_v3020, from_symbol(d, sym, n, off, k), n, k, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void *sym, const void *s, size_t n,
                                                size_t off, enum cudaMemcpyKind k, cudaStream_t st)
{
    OBS_COPY(cudaMemcpyToSymbolAsync_v3020, to_symbol(sym, s, n, off, k), n, k, st);
}

FAKE_EXPORT cudaError_t cudaMemcpyFromSymbolAsync(void *d, const void *sym, size_t n, size_t off,
                                                  enum cudaMemcpyKind k, cudaStream_t st)
{
    OBS_COPY(cudaMemcpyFromSymbolAsync_v3020, from_symbol(d, sym, n, off, k), n, k, st);
}

FAKE_EXPORT cudaError_t cudaMemset(void *d, int v, size_t n)
{
    OBS_SET(cudaMemset_v3020, do_set(d, v, n), n, NULL);
}

FAKE_EXPORT cudaError_t cudaMemset_ptds(void *d, int v, size_t n)
{
    OBS_SET(cudaMemset_ptds_v7000, do_set(d, v, n), n, NULL);
}

FAKE_EXPORT cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st)
{
    OBS_SET(cudaMemsetAsync_v3020, do_set(d, v, n), n, st);
}

FAKE_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *d, int v, size_t n, cudaStream_t st)
{
    OBS_SET(cudaMemsetAsync_ptsz_v7000, do_set(d, v, n), n, st);
}

FAKE_EXPORT cudaError_t cudaMemset2D(void *d, size_t p, int v, size_t w, size_t h)
{
    OBS_SET(cudaMemset2D_v3020, do_set2d(d, p, v, w, h), w * h, NULL);
}

FAKE_EXPORT cudaError_t cudaMemset2DAsync(void *d, size_t p, int v, size_t w, size_t h,
                                          cudaStream_t st)
{
    OBS_SET(cudaMemset2DAsync_v3020, do_set2d(d, p, v, w, h), w * h, st);
}

/* ---- synchronization ---------------------------------------------------- */

FAKE_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    OBS_SYNC(cudaDeviceSynchronize_v3020, cudaSuccess, NULL);
}

FAKE_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    OBS_SYNC(cudaStreamSynchronize_v3020, cudaSuccess, s);
}

FAKE_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
    OBS_SYNC(cudaStreamSynchronize_ptsz_v7000, cudaSuccess, s);
}

static cudaError_t event_sync(cudaEvent_t e)
{
    if (!e)
        return fail(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    OBS_EVENT(cudaEventSynchronize_v3020, event_sync(e), FAKEGPU_SYNC, NULL, e);
}

FAKE_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int fl)
{
    (void)fl;
    OBS_EVENT(cudaStreamWaitEvent_v3020, event_sync(e), FAKEGPU_SYNC, s, e);
}

FAKE_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int fl)
{
    (void)fl;
    OBS_EVENT(cudaStreamWaitEvent_ptsz_v7000, event_sync(e), FAKEGPU_SYNC, s, e);
}

/* ---- allocation ---------------------------------------------------------
 * FAKE_CUDA_OOM_BYTES=N: an allocation of more than N bytes fails with
 * cudaErrorMemoryAllocation (and sets the last error), as a full device does.
 * FAKE_CUDART_VIA_DRIVER=1: device allocations and frees go through the
 * driver's cuMemAlloc_v2/cuMemFree_v2 (looked up with dlsym(RTLD_DEFAULT),
 * so an interposer sees the nested call) when libcuda is already loaded, as
 * the real runtime's do; the others stay host memory. */

typedef int (*fake_drv_alloc_fn)(unsigned long long *, size_t);
typedef int (*fake_drv_free_fn)(unsigned long long);

static size_t oom_bytes(void)
{
    static size_t limit;
    static int read;
    if (!__atomic_load_n(&read, __ATOMIC_ACQUIRE)) {
        const char *v = getenv("FAKE_CUDA_OOM_BYTES");
        size_t l = v && *v ? (size_t)strtoull(v, NULL, 10) : 0;
        __atomic_store_n(&limit, l, __ATOMIC_RELAXED);
        __atomic_store_n(&read, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&limit, __ATOMIC_RELAXED);
}

static int via_driver(void **alloc, void **release)
{
    const char *v = getenv("FAKE_CUDART_VIA_DRIVER");
    if (!v || strcmp(v, "1") != 0)
        return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return 0;
    dlclose(h);
    *alloc = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    *release = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
    return *alloc && *release;
}

static cudaError_t do_alloc_dev(void **p, size_t n, int device)
{
    if (!p)
        return fail(cudaErrorInvalidValue);
    if (n == 0) {
        *p = NULL;
        return cudaSuccess;
    }
    size_t limit = oom_bytes();
    if (limit && n > limit) {
        *p = NULL;
        return fail(cudaErrorMemoryAllocation);
    }
    void *fa, *ff;
    if (device && via_driver(&fa, &ff)) {
        unsigned long long d = 0;
        if (((fake_drv_alloc_fn)fa)(&d, n) != 0) {
            *p = NULL;
            return fail(cudaErrorMemoryAllocation);
        }
        *p = (void *)(uintptr_t)d;
        return cudaSuccess;
    }
    void *m = NULL;
    if (posix_memalign(&m, 256, n) != 0) {
        *p = NULL;
        return fail(cudaErrorMemoryAllocation);
    }
    *p = m;
    return cudaSuccess;
}

static cudaError_t do_alloc(void **p, size_t n)
{
    return do_alloc_dev(p, n, 0);
}

static cudaError_t do_free_dev(void *p)
{
    void *fa, *ff;
    if (p && via_driver(&fa, &ff)) {
        ((fake_drv_free_fn)ff)((unsigned long long)(uintptr_t)p);
        return cudaSuccess;
    }
    free(p);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
    return do_alloc_dev(p, n, 1);
}

FAKE_EXPORT cudaError_t cudaFree(void *p)
{
    return do_free_dev(p);
}

FAKE_EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h)
{
    if (!pitch)
        return fail(cudaErrorInvalidValue);
    size_t pw = (w + 511) / 512 * 512;     /* rows padded to 512 bytes */
    cudaError_t e = do_alloc(p, pw * h);
    *pitch = e == cudaSuccess ? pw : 0;
    return e;
}

FAKE_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pp, struct cudaExtent e)
{
    if (!pp)
        return fail(cudaErrorInvalidValue);
    size_t pw = (e.width + 511) / 512 * 512;
    void *m = NULL;
    cudaError_t rc = do_alloc(&m, pw * e.height * e.depth);
    pp->ptr = m;
    pp->pitch = rc == cudaSuccess ? pw : 0;
    pp->xsize = e.width;
    pp->ysize = e.height;
    return rc;
}

FAKE_EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    (void)s;
    return do_alloc(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s)
{
    (void)s;
    return do_alloc(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s)
{
    (void)pool; (void)s;
    return do_alloc(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s)
{
    (void)pool; (void)s;
    return do_alloc(p, n);
}

FAKE_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    (void)s;
    free(p);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s)
{
    (void)s;
    free(p);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int fl)
{
    (void)fl;
    return do_alloc(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocHost(void **p, size_t n)
{
    return do_alloc(p, n);
}

FAKE_EXPORT cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int fl)
{
    (void)fl;
    return do_alloc(p, n);
}

FAKE_EXPORT cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

/* ---- profiler control --------------------------------------------------- */

FAKE_EXPORT cudaError_t cudaProfilerStart(void)
{
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaProfilerStop(void)
{
    return cudaSuccess;
}

/* ---- errors ------------------------------------------------------------- */

FAKE_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

FAKE_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

static const struct { cudaError_t code; const char *name, *text; } error_table[] = {
    { cudaSuccess, "cudaSuccess", "no error" },
    { cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
    { cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
    { cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error" },
    { cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
      "invalid configuration argument" },
    { cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol" },
    { cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
      "invalid copy direction for memcpy" },
    { cudaErrorMissingConfiguration, "cudaErrorMissingConfiguration",
      "__global__ function call is not configured" },
    { cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
    { cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction",
      "invalid device function" },
    { cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
      "invalid resource handle" },
    { cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported" },
};

FAKE_EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
        if (error_table[i].code == e)
            return error_table[i].text;
    return "unrecognized error code";
}

FAKE_EXPORT const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
        if (error_table[i].code == e)
            return error_table[i].name;
    return "cudaErrorUnknown";
}

/* ---- devices, versions -------------------------------------------------- */

static __thread int current_device;

FAKE_EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return fail(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaSetDevice(int device)
{
    if (device != 0)
        return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return fail(cudaErrorInvalidValue);
    *device = current_device;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v)
        return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v)
        return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

/* ---- streams and events (dummy handles) --------------------------------- */

struct fake_stream { unsigned long long id; };
struct fake_event { int recorded; };

static unsigned long long next_stream_id;   /* 0 is the legacy stream */

static cudaError_t new_stream(cudaStream_t *p)
{
    if (!p)
        return fail(cudaErrorInvalidValue);
    struct fake_stream *s = malloc(sizeof(*s));
    if (!s)
        return fail(cudaErrorMemoryAllocation);
    s->id = __atomic_add_fetch(&next_stream_id, 1, __ATOMIC_RELAXED);
    *p = (cudaStream_t)(void *)s;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *p)
{
    return new_stream(p);
}

FAKE_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *p, unsigned int flags)
{
    (void)flags;
    return new_stream(p);
}

FAKE_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    free((void *)s);
    return cudaSuccess;
}

static cudaError_t new_event(cudaEvent_t *p)
{
    if (!p)
        return fail(cudaErrorInvalidValue);
    struct fake_event *e = calloc(1, sizeof(*e));
    if (!e)
        return fail(cudaErrorMemoryAllocation);
    *p = (cudaEvent_t)(void *)e;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *p)
{
    return new_event(p);
}

FAKE_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *p, unsigned int flags)
{
    (void)flags;
    return new_event(p);
}

static cudaError_t event_record(cudaEvent_t e)
{
    if (!e)
        return fail(cudaErrorInvalidResourceHandle);
    ((struct fake_event *)(void *)e)->recorded = 1;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    OBS_EVENT(cudaEventRecord_v3020, event_record(e), FAKEGPU_EVENT, s, e);
}

FAKE_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!e)
        return fail(cudaErrorInvalidResourceHandle);
    free((void *)e);
    return cudaSuccess;
}
