/*
 * cudart.c - a fake of the GPU-executing part of the CUDA runtime, for tests.
 *
 * DESIGN
 * Built from the real headers as build/fakes/libcudart.so.13 (soname
 * libcudart.so.13), so that test programs link and call exactly what a program
 * built by nvcc against CUDA 13 links and calls, and the preloaded library
 * interposes the same symbols it would in production.  There is no device:
 * device memory is host memory (the fake driver's arena, never the malloc
 * heap: tests/fakes/cuda.c), copies and sets really copy and set,
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
 * The driver: like the real runtime, the fake dlopens libcuda.so.1 at load,
 * takes cuGetProcAddress_v2 with one dlsym of that handle and keeps the
 * pointer its self-lookup ("cuGetProcAddress", 12000) returns;
 * cudaGetDriverEntryPoint* answer through it (FAKE_CUDART_ENTRY=private:
 * through the fake driver's fakegpu_get_proc_address, a channel no
 * interposer sees, as a runtime answering from a private table would).
 * FAKE_CUDART_LOOKUP=1 makes launches (by stub through a CUkernel of the
 * driver), graph creation, capture, instantiation and launches, and peer
 * copies go on to the driver functions those lookups returned, inside the
 * runtime call, as the real runtime's do.  3D copies work on pitched
 * pointers and on the fake driver's arrays (fakegpu.h); host functions and
 * stream callbacks run at once on the calling thread.
 * Device and managed memory come from the fake driver's blocks (the
 * allocation section says how), so that its cuMemGetInfo_v2 and its
 * FAKE_CUDA_MEM_BUDGET count the runtime's allocations with its own.
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

#include <cuda.h>
#include <cudaProfiler.h>
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
FAKE_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
FAKE_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int fl);
FAKE_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *ud);
FAKE_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void *ud,
                                                   unsigned int fl);
FAKE_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode);
FAKE_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t g,
                                                           const cudaGraphNode_t *deps,
                                                           const cudaGraphEdgeData *data, size_t n,
                                                           enum cudaStreamCaptureMode mode);
FAKE_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g);
FAKE_EXPORT cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *e, cudaGraph_t g,
                                                            cudaGraphInstantiateParams *p);
FAKE_EXPORT cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p);
FAKE_EXPORT cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms *p);
FAKE_EXPORT cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms *p, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *d, const void *const *s, const size_t *n,
                                                  size_t count, struct cudaMemcpyAttributes *a,
                                                  size_t *ai, size_t na, cudaStream_t st);
FAKE_EXPORT cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t n, struct cudaMemcpy3DBatchOp *ops,
                                                    unsigned long long flags, cudaStream_t st);
FAKE_EXPORT cudaError_t cudaMemset3D_ptds(struct cudaPitchedPtr p, int v, struct cudaExtent e);
FAKE_EXPORT cudaError_t cudaMemset3DAsync_ptsz(struct cudaPitchedPtr p, int v, struct cudaExtent e,
                                               cudaStream_t st);
FAKE_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *sym, void **fn, unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *st);
FAKE_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *sym, void **fn, unsigned int version,
                                                              unsigned long long flags,
                                                              enum cudaDriverEntryPointQueryResult *st);

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
typedef CUresult (*fake_gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* The driver as the real runtime holds it: its cuGetProcAddress_v2 from one
 * dlsym of the handle, then the pointer its self-lookup at 12000 returned;
 * "private" is the fake driver's fakegpu_get_proc_address, a channel no
 * interposer sees (cudaGetDriverEntryPoint with FAKE_CUDART_ENTRY=private). */
static fake_gpa2_fn drv_gpa2, drv_private;
/* The fake driver's fakegpu_mem_alloc/fakegpu_mem_free (allocation below). */
static void *drv_mem_alloc, *drv_mem_free;
static CUcontext drv_ctx;

/* FAKE_CUDART_LOOKUP=1: launches, graph calls and peer copies go on to the
 * driver functions these lookups return, inside the runtime call, as the
 * real runtime's do (an interposer then sees both layers of one call). */
static int lookup_mode;
static struct {
    __typeof__(&cuLibraryLoadData) lib_load;
    __typeof__(&cuLibraryGetKernel) lib_kernel;
    __typeof__(&cuLaunchKernel) launch, launch_pt;
    __typeof__(&cuLaunchKernelEx) launch_ex, launch_ex_pt;
    __typeof__(&cuLaunchCooperativeKernel) coop, coop_pt;
    __typeof__(&cuGraphLaunch) graph_launch, graph_launch_pt;
    __typeof__(&cuGraphCreate) graph_create;
    __typeof__(&cuStreamBeginCapture_v2) begin, begin_pt;
    __typeof__(&cuStreamBeginCaptureToGraph) begin_to, begin_to_pt;
    __typeof__(&cuStreamEndCapture) end, end_pt;
    __typeof__(&cuGraphInstantiateWithFlags) inst;
    __typeof__(&cuGraphInstantiateWithParams) inst_params, inst_params_pt;
    __typeof__(&cuMemcpyPeer) peer;
    __typeof__(&cuMemcpyPeerAsync) peer_async;
    __typeof__(&cuProfilerStart) prof_start, prof_stop;
    __typeof__(&cuMemGetInfo_v2) mem_info;
} drv;

static void *drv_lookup(const char *name, int version, int per_thread)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (!drv_gpa2 || drv_gpa2(name, &p, version, per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0,
                              &st) != CUDA_SUCCESS)
        return NULL;
    return p;
}

static void fake_lookup_driver(void)
{
    drv.lib_load = drv_lookup("cuLibraryLoadData", 12000, 0);
    drv.lib_kernel = drv_lookup("cuLibraryGetKernel", 12000, 0);
    drv.launch = drv_lookup("cuLaunchKernel", 4000, 0);
    drv.launch_pt = drv_lookup("cuLaunchKernel", 7000, 1);
    drv.launch_ex = drv_lookup("cuLaunchKernelEx", 11060, 0);
    drv.launch_ex_pt = drv_lookup("cuLaunchKernelEx", 11060, 1);
    drv.coop = drv_lookup("cuLaunchCooperativeKernel", 9000, 0);
    drv.coop_pt = drv_lookup("cuLaunchCooperativeKernel", 9000, 1);
    drv.graph_launch = drv_lookup("cuGraphLaunch", 10000, 0);
    drv.graph_launch_pt = drv_lookup("cuGraphLaunch", 10000, 1);
    drv.graph_create = drv_lookup("cuGraphCreate", 10000, 0);
    drv.begin = drv_lookup("cuStreamBeginCapture", 10010, 0);
    drv.begin_pt = drv_lookup("cuStreamBeginCapture", 10010, 1);
    drv.begin_to = drv_lookup("cuStreamBeginCaptureToGraph", 12030, 0);
    drv.begin_to_pt = drv_lookup("cuStreamBeginCaptureToGraph", 12030, 1);
    drv.end = drv_lookup("cuStreamEndCapture", 10000, 0);
    drv.end_pt = drv_lookup("cuStreamEndCapture", 10000, 1);
    drv.inst = drv_lookup("cuGraphInstantiateWithFlags", 11040, 0);
    drv.inst_params = drv_lookup("cuGraphInstantiateWithParams", 12000, 0);
    drv.inst_params_pt = drv_lookup("cuGraphInstantiateWithParams", 12000, 1);
    drv.peer = drv_lookup("cuMemcpyPeer", 4000, 0);
    drv.peer_async = drv_lookup("cuMemcpyPeerAsync", 4000, 0);
    drv.prof_start = drv_lookup("cuProfilerStart", 4000, 0);
    drv.prof_stop = drv_lookup("cuProfilerStop", 4000, 0);
    drv.mem_info = drv_lookup("cuMemGetInfo", 3020, 0);
    const char *v = getenv("FAKE_CUDART_LOOKUP");
    lookup_mode = v && strcmp(v, "1") == 0;
}

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
    if (init && init(0) == 0 && retain && retain(&ctx, 0) == 0)
        drv_ctx = ctx;
    drv_gpa2 = h ? (fake_gpa2_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    drv_private = h ? (fake_gpa2_fn)dlsym(h, "fakegpu_get_proc_address") : NULL;
    drv_mem_alloc = h ? dlsym(h, "fakegpu_mem_alloc") : NULL;
    drv_mem_free = h ? dlsym(h, "fakegpu_mem_free") : NULL;
    if (!drv_mem_alloc || !drv_mem_free)
        drv_mem_alloc = drv_mem_free = NULL;
    fake_gpa2_fn self = drv_lookup("cuGetProcAddress", 12000, 0);
    if (self)
        drv_gpa2 = self;
    fake_lookup_driver();
}

static void rt_exit(void);

__attribute__((constructor)) static void fake_init(void)
{
    atexit(rt_exit);
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

/* The runtime's exit handler, registered when the library is loaded, as
 * the real runtime's is by the first __cudaRegisterFatBinary (a program's
 * or a library's constructors, before main): from then on its contexts are
 * gone (tests/fakes/cupti.c need_runtime checks this word). */
FAKE_EXPORT int fakegpu_runtime_torn_down;

static void rt_exit(void)
{
    __atomic_store_n(&fakegpu_runtime_torn_down, 1, __ATOMIC_RELEASE);
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
    CUkernel kernel;           /* lookup mode: its driver handle, made at its first launch */
    int library;               /* from cudaLibraryGetKernel: not named by cudaFuncGetName */
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

/* Libraries loaded at run time: "fakecubin" and mangled names (the fake
 * driver's image format); each kernel is a registration entry of its own
 * (stub = the entry), so that cudaLaunchKernel and __cudaLaunchKernel take
 * the cudaKernel_t.  cudaFuncGetName does not name it: whether the real one
 * names a cudaKernel_t is not documented, and a profiler must not rely on it. */
FAKE_EXPORT cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code, enum cudaJitOption *jo,
                                            void **jv, unsigned int nj, enum cudaLibraryOption *lo, void **lv,
                                            unsigned int nl)
{
    (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
    static const char head[] = "fakecubin";
    if (!library || !code || strncmp(code, head, sizeof head - 1) != 0)
        return fail(cudaErrorInvalidKernelImage);
    char *copy = strdup((const char *)code + sizeof head - 1);
    if (!copy)
        return fail(cudaErrorMemoryAllocation);
    *library = (cudaLibrary_t)(void *)copy;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaLibraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t library, const char *name)
{
    if (!kernel || !library || !name || !*name)
        return fail(cudaErrorInvalidValue);
    const char *names = (const char *)(void *)library;
    size_t len = strlen(name);
    int found = 0;
    for (const char *p = names; (p = strstr(p, name)) != NULL; p += len)
        if ((p == names || p[-1] == ' ') && (p[len] == ' ' || p[len] == 0)) {
            found = 1;
            break;
        }
    if (!found)
        return fail(cudaErrorSymbolNotFound);
    struct fake_func *f = calloc(1, sizeof *f);
    char *copy = strdup(name);
    if (!f || !copy) {
        free(f);
        free(copy);
        return fail(cudaErrorMemoryAllocation);
    }
    f->magic = FUNC_MAGIC;
    f->stub = f;
    f->device_name = copy;
    f->library = 1;
    pthread_mutex_lock(&reg_lock);
    f->next = funcs;
    funcs = f;
    pthread_mutex_unlock(&reg_lock);
    *kernel = (cudaKernel_t)(void *)f;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    if (!name || !func)
        return fail(cudaErrorInvalidValue);
    pthread_mutex_lock(&reg_lock);
    struct fake_func *f = find_func_locked(func);
    const char *n = f && !f->library ? f->device_name : NULL;
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

/* Lookup mode: the CUkernel of a registered stub, from a one-kernel
 * library (cuLibraryLoadData + cuLibraryGetKernel, as nvcc 13 programs
 * reach the driver at a kernel's first launch); NULL if none. */
static CUkernel drv_kernel_of(const void *stub)
{
    pthread_mutex_lock(&reg_lock);
    struct fake_func *f = find_func_locked(stub);
    if (f && !f->kernel && drv.lib_load && drv.lib_kernel) {
        char image[512];
        snprintf(image, sizeof image, "fakecubin %s", f->device_name);
        CUlibrary lib;
        if (drv.lib_load(&lib, image, NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS)
            drv.lib_kernel(&f->kernel, lib, f->device_name);
    }
    CUkernel k = f ? f->kernel : NULL;
    pthread_mutex_unlock(&reg_lock);
    return k;
}

static cudaError_t from_driver(CUresult rc)
{
    return rc == CUDA_SUCCESS ? cudaSuccess : fail(rc == CUDA_ERROR_INVALID_HANDLE ? cudaErrorInvalidResourceHandle
                                                                                  : cudaErrorInvalidValue);
}

/* Lookup mode: the launch goes on to the driver (cooperative: 1, 2 = Ex). */
static cudaError_t drv_launch(const void *stub, dim3 g, dim3 b, size_t sm, cudaStream_t s, int pt, int how)
{
    CUkernel k = drv_kernel_of(stub);
    if (!k)
        return fail(cudaErrorInvalidDeviceFunction);
    CUfunction f = (CUfunction)(void *)k;
    if (how == 1) {
        __typeof__(&cuLaunchCooperativeKernel) c = pt ? drv.coop_pt : drv.coop;
        return c ? from_driver(c(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)sm, (CUstream)s, NULL))
                 : fail(cudaErrorNotSupported);
    }
    if (how == 2) {
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = g.x, cfg.gridDimY = g.y, cfg.gridDimZ = g.z;
        cfg.blockDimX = b.x, cfg.blockDimY = b.y, cfg.blockDimZ = b.z;
        cfg.sharedMemBytes = (unsigned)sm;
        cfg.hStream = (CUstream)s;
        __typeof__(&cuLaunchKernelEx) e = pt ? drv.launch_ex_pt : drv.launch_ex;
        return e ? from_driver(e(&cfg, f, NULL, NULL)) : fail(cudaErrorNotSupported);
    }
    __typeof__(&cuLaunchKernel) l = pt ? drv.launch_pt : drv.launch;
    return l ? from_driver(l(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)sm, (CUstream)s, NULL, NULL))
             : fail(cudaErrorNotSupported);
}

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

/* A launch by stub (how: 0 plain, 1 cooperative, 2 Ex), on to the driver
 * in lookup mode. */
static cudaError_t launch_rt(const void *f, dim3 g, dim3 b, size_t sm, cudaStream_t s, int pt, int how)
{
    cudaError_t r = launch_stub(f, g, b);
    if (r != cudaSuccess || !lookup_mode)
        return r;
    return drv_launch(f, g, b, sm, s, pt, how);
}

static cudaError_t launch_kernel_rt(cudaKernel_t k, dim3 g, dim3 b, size_t sm, cudaStream_t s, int pt)
{
    cudaError_t r = launch_kernel(k, g, b);
    if (r != cudaSuccess || !lookup_mode)
        return r;
    return drv_launch(((const struct fake_func *)(const void *)k)->stub, g, b, sm, s, pt, 0);
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
    OBS_LAUNCH(cudaLaunchKernel_v7000, launch_rt(f, g, b, sm, s, 0, 0), stub_name(f), g, b, sm, s);
}

FAKE_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                              cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchKernel_ptsz_v7000, launch_rt(f, g, b, sm, s, 1, 0), stub_name(f), g, b, sm, s);
}

FAKE_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **a, size_t sm,
                                           cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(__cudaLaunchKernel_v13000, launch_kernel_rt(k, g, b, sm, s, 0), kernel_name(k), g, b, sm, s);
}

FAKE_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **a,
                                                size_t sm, cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(__cudaLaunchKernel_ptsz_v13000, launch_kernel_rt(k, g, b, sm, s, 1), kernel_name(k), g, b,
               sm, s);
}

static cudaError_t launch_ex(const cudaLaunchConfig_t *c, const void *f, int pt)
{
    if (!c)
        return fail(cudaErrorInvalidValue);
    return launch_rt(f, c->gridDim, c->blockDim, c->dynamicSmemBytes, c->stream, pt, 2);
}

static const dim3 dim_zero = { 0, 0, 0 };

FAKE_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *f, void **a)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchKernelExC_v11060, launch_ex(c, f, 0), stub_name(f),
               c ? c->gridDim : dim_zero, c ? c->blockDim : dim_zero,
               c ? c->dynamicSmemBytes : 0, c ? c->stream : NULL);
}

FAKE_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f,
                                                 void **a)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchKernelExC_ptsz_v11060, launch_ex(c, f, 1), stub_name(f),
               c ? c->gridDim : dim_zero, c ? c->blockDim : dim_zero,
               c ? c->dynamicSmemBytes : 0, c ? c->stream : NULL);
}

FAKE_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *f, dim3 g, dim3 b, void **a,
                                                    size_t sm, cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchCooperativeKernel_v9000, launch_rt(f, g, b, sm, s, 0, 1), stub_name(f), g, b,
               sm, s);
}

FAKE_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *f, dim3 g, dim3 b, void **a,
                                                         size_t sm, cudaStream_t s)
{
    (void)a;
    OBS_LAUNCH(cudaLaunchCooperativeKernel_ptsz_v9000, launch_rt(f, g, b, sm, s, 1, 1), stub_name(f), g,
               b, sm, s);
}

/* ---- graphs (dummy handles) --------------------------------------------- */

struct fake_graph { int magic; };
struct fake_graph_exec { int magic; };
#define GRAPH_MAGIC 0x47524150
#define EXEC_MAGIC  0x45584543

/* In lookup mode graphs are the driver's (cudaGraph_t is a CUgraph): made,
 * captured, instantiated and launched by it.  Both are malloc'ed, so
 * cudaGraphDestroy and cudaGraphExecDestroy free either. */
FAKE_EXPORT cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    if (!pGraph)
        return fail(cudaErrorInvalidValue);
    if (lookup_mode && drv.graph_create)
        return from_driver(drv.graph_create((CUgraph *)pGraph, flags));
    struct fake_graph *g = malloc(sizeof(*g));
    if (!g)
        return fail(cudaErrorMemoryAllocation);
    g->magic = GRAPH_MAGIC;
    *pGraph = (cudaGraph_t)(void *)g;
    return cudaSuccess;
}

static cudaError_t instantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    if (!pGraphExec || !graph)
        return fail(cudaErrorInvalidValue);
    if (lookup_mode && drv.inst)
        return from_driver(drv.inst((CUgraphExec *)pGraphExec, (CUgraph)graph, flags));
    struct fake_graph_exec *e = malloc(sizeof(*e));
    if (!e)
        return fail(cudaErrorMemoryAllocation);
    e->magic = EXEC_MAGIC;
    *pGraphExec = (cudaGraphExec_t)(void *)e;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                             unsigned long long flags)
{
    return instantiate(pGraphExec, graph, flags);
}

FAKE_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                      unsigned long long flags)
{
    return instantiate(pGraphExec, graph, flags);
}

static cudaError_t instantiate_params(cudaGraphExec_t *e, cudaGraph_t g, cudaGraphInstantiateParams *p, int pt)
{
    if (!p)
        return fail(cudaErrorInvalidValue);
    __typeof__(&cuGraphInstantiateWithParams) ip = pt ? drv.inst_params_pt : drv.inst_params;
    cudaError_t r = lookup_mode && ip && e && g
                        ? from_driver(ip((CUgraphExec *)e, (CUgraph)g, (CUDA_GRAPH_INSTANTIATE_PARAMS *)(void *)p))
                        : instantiate(e, g, p->flags);
    p->result_out = r == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
    return r;
}

FAKE_EXPORT cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *e, cudaGraph_t g,
                                                       cudaGraphInstantiateParams *p)
{
    return instantiate_params(e, g, p, 0);
}

FAKE_EXPORT cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *e, cudaGraph_t g,
                                                            cudaGraphInstantiateParams *p)
{
    return instantiate_params(e, g, p, 1);
}

/* Nodes are not kept: a node is a distinct handle, nothing more. */
FAKE_EXPORT cudaError_t cudaGraphAddNode(cudaGraphNode_t *node, cudaGraph_t g, const cudaGraphNode_t *deps,
                                         const cudaGraphEdgeData *data, size_t n,
                                         struct cudaGraphNodeParams *params)
{
    (void)data;
    static unsigned long nodes;
    if (!node || !g || !params || (n && !deps))
        return fail(cudaErrorInvalidValue);
    *node = (cudaGraphNode_t)(uintptr_t)(0x1000 + 16 * __atomic_add_fetch(&nodes, 1, __ATOMIC_RELAXED));
    return cudaSuccess;
}

/* Stream capture: the captured work is not kept (nothing runs anyway); the
 * graph ending the capture is a fresh one, or the one given to
 * cudaStreamBeginCaptureToGraph.  A thread's captures are kept per stream
 * (PyTorch captures a conditional node's body on a second stream while the
 * first is captured). */
#define CAPTURES 4
static __thread struct { cudaStream_t stream; cudaGraph_t into; int open; } captures[CAPTURES];

static int capture_of(cudaStream_t s, int open)
{
    for (int i = 0; i < CAPTURES; i++)
        if (captures[i].open == open && (!open || captures[i].stream == s))
            return i;
    return -1;
}

static cudaError_t begin_capture(cudaStream_t s, cudaGraph_t into, enum cudaStreamCaptureMode mode, int pt)
{
    if (lookup_mode) {
        __typeof__(&cuStreamBeginCapture_v2) b = pt ? drv.begin_pt : drv.begin;
        __typeof__(&cuStreamBeginCaptureToGraph) bt = pt ? drv.begin_to_pt : drv.begin_to;
        if (into && bt)
            return from_driver(bt((CUstream)s, (CUgraph)into, NULL, NULL, 0, (CUstreamCaptureMode)mode));
        if (!into && b)
            return from_driver(b((CUstream)s, (CUstreamCaptureMode)mode));
    }
    int i = capture_of(s, 1) < 0 ? capture_of(s, 0) : -1;
    if (i < 0)
        return fail(cudaErrorIllegalState);
    captures[i].open = 1;
    captures[i].stream = s;
    captures[i].into = into;
    return cudaSuccess;
}

static cudaError_t end_capture(cudaStream_t s, cudaGraph_t *g, int pt)
{
    __typeof__(&cuStreamEndCapture) e = pt ? drv.end_pt : drv.end;
    if (lookup_mode && e)
        return from_driver(e((CUstream)s, (CUgraph *)g));
    int i = capture_of(s, 1);
    if (i < 0 || !g)
        return fail(cudaErrorStreamCaptureInvalidated);
    captures[i].open = 0;
    if (captures[i].into) {
        *g = captures[i].into;
        return cudaSuccess;
    }
    return cudaGraphCreate(g, 0);
}

FAKE_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    return begin_capture(s, NULL, mode, 0);
}

FAKE_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    return begin_capture(s, NULL, mode, 1);
}

static cudaError_t begin_capture_to(cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *deps, size_t n,
                                    enum cudaStreamCaptureMode mode, int pt)
{
    if (!g || (n && !deps))
        return fail(cudaErrorInvalidValue);
    return begin_capture(s, g, mode, pt);
}

FAKE_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *deps,
                                                      const cudaGraphEdgeData *data, size_t n,
                                                      enum cudaStreamCaptureMode mode)
{
    (void)data;
    return begin_capture_to(s, g, deps, n, mode, 0);
}

FAKE_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t g,
                                                           const cudaGraphNode_t *deps,
                                                           const cudaGraphEdgeData *data, size_t n,
                                                           enum cudaStreamCaptureMode mode)
{
    (void)data;
    return begin_capture_to(s, g, deps, n, mode, 1);
}

FAKE_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    return end_capture(s, g, 0);
}

FAKE_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
    return end_capture(s, g, 1);
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

static cudaError_t graph_launch(cudaGraphExec_t e, cudaStream_t s, int pt)
{
    if (!e)
        return fail(cudaErrorInvalidValue);
    launch_cost();
    __typeof__(&cuGraphLaunch) l = pt ? drv.graph_launch_pt : drv.graph_launch;
    return lookup_mode && l ? from_driver(l((CUgraphExec)e, (CUstream)s)) : cudaSuccess;
}

/* Reported without device work (the fake keeps no graph nodes). */
FAKE_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
    OBS_NONE(cudaGraphLaunch_v10000, graph_launch(e, s, 0), s);
}

FAKE_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t s)
{
    OBS_NONE(cudaGraphLaunch_ptsz_v10000, graph_launch(e, s, 1), s);
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

/* Lookup mode: on to cuMemcpyPeer(Async), between the primary context and
 * itself (one device). */
static cudaError_t do_peer(void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st, int async)
{
    if (dd != 0 || sd != 0)
        return fail(cudaErrorInvalidDevice);
    if (lookup_mode && drv.peer && drv.peer_async)
        return from_driver(async ? drv.peer_async((CUdeviceptr)(uintptr_t)d, drv_ctx, (CUdeviceptr)(uintptr_t)s,
                                                  drv_ctx, n, (CUstream)st)
                                 : drv.peer((CUdeviceptr)(uintptr_t)d, drv_ctx, (CUdeviceptr)(uintptr_t)s,
                                            drv_ctx, n));
    return do_copy(d, s, n, cudaMemcpyDeviceToDevice);
}

FAKE_EXPORT cudaError_t cudaMemcpyPeer(void *d, int dd, const void *s, int sd, size_t n)
{
    OBS_COPY(cudaMemcpyPeer_v4000, do_peer(d, dd, s, sd, n, NULL, 0), n, cudaMemcpyDeviceToDevice, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n,
                                            cudaStream_t st)
{
    OBS_COPY(cudaMemcpyPeerAsync_v4000, do_peer(d, dd, s, sd, n, st, 1), n, cudaMemcpyDeviceToDevice,
             st);
}

/* ---- 3D copies and sets, batches ------------------------------------------
 * Arrays are the fake driver's (fakegpu.h): cudaMalloc3DArray makes one
 * itself, as cuArray3DCreate_v2 would.  Extents are in bytes between
 * pointers, in elements of the array when one side is an array; positions
 * likewise. */

static struct fakegpu_array *array_of(const void *a)
{
    struct fakegpu_array *f = (struct fakegpu_array *)(uintptr_t)a;
    return f && f->magic == FAKEGPU_ARRAY_MAGIC ? f : NULL;
}

/* One side of a 3D copy: base, row pitch and rows per layer, in bytes. */
struct side {
    unsigned char *base;
    size_t pitch, rows, x, y, z;
};

static int side_of(struct side *sd, const void *array, struct cudaPos pos, struct cudaPitchedPtr p, size_t elem)
{
    struct fakegpu_array *a = array ? array_of(array) : NULL;
    if (array && !a)
        return -1;
    if (a) {
        sd->base = a->data, sd->pitch = a->width * a->elem, sd->rows = a->height;
        sd->x = pos.x * a->elem;
    } else {
        if (!p.ptr)
            return -1;
        sd->base = p.ptr, sd->pitch = p.pitch, sd->rows = p.ysize ? p.ysize : 1;
        sd->x = pos.x * elem;
    }
    sd->y = pos.y, sd->z = pos.z;
    return 0;
}

static cudaError_t copy_sides(struct side *src, struct side *dst, size_t w, size_t h, size_t d)
{
    if (src->pitch < src->x + w || dst->pitch < dst->x + w)
        return fail(cudaErrorInvalidPitchValue);
    for (size_t z = 0; z < d; z++)
        for (size_t y = 0; y < h; y++)
            memmove(dst->base + ((dst->z + z) * dst->rows + dst->y + y) * dst->pitch + dst->x,
                    src->base + ((src->z + z) * src->rows + src->y + y) * src->pitch + src->x, w);
    return cudaSuccess;
}

static size_t elem_of(const void *src_array, const void *dst_array)
{
    struct fakegpu_array *a = array_of(src_array ? src_array : dst_array);
    return a ? a->elem : 1;
}

static cudaError_t do_copy3d(const void *sa, struct cudaPos sp, struct cudaPitchedPtr spp, const void *da,
                             struct cudaPos dp, struct cudaPitchedPtr dpp, struct cudaExtent e)
{
    size_t elem = elem_of(sa, da);
    struct side src, dst;
    if (side_of(&src, sa, sp, spp, elem) || side_of(&dst, da, dp, dpp, elem))
        return fail(cudaErrorInvalidValue);
    if (!e.width || !e.height || !e.depth)
        return cudaSuccess;
    return copy_sides(&src, &dst, e.width * (sa || da ? elem : 1), e.height, e.depth);
}

static size_t bytes3d(const void *sa, const void *da, struct cudaExtent e)
{
    return e.width * e.height * e.depth * (sa || da ? elem_of(sa, da) : 1);
}

static cudaError_t copy3d(const struct cudaMemcpy3DParms *p)
{
    if (!p)
        return fail(cudaErrorInvalidValue);
    if ((unsigned)p->kind > (unsigned)cudaMemcpyDefault)
        return fail(cudaErrorInvalidMemcpyDirection);
    return do_copy3d(p->srcArray, p->srcPos, p->srcPtr, p->dstArray, p->dstPos, p->dstPtr, p->extent);
}

static cudaError_t copy3d_peer(const struct cudaMemcpy3DPeerParms *p)
{
    if (!p)
        return fail(cudaErrorInvalidValue);
    if (p->srcDevice != 0 || p->dstDevice != 0)
        return fail(cudaErrorInvalidDevice);
    return do_copy3d(p->srcArray, p->srcPos, p->srcPtr, p->dstArray, p->dstPos, p->dstPtr, p->extent);
}

#define P3_BYTES(p) ((p) ? bytes3d((p)->srcArray, (p)->dstArray, (p)->extent) : 0)

FAKE_EXPORT cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    OBS_COPY(cudaMemcpy3D_v3020, copy3d(p), P3_BYTES(p), p ? p->kind : cudaMemcpyDefault, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p)
{
    OBS_COPY(cudaMemcpy3D_ptds_v7000, copy3d(p), P3_BYTES(p), p ? p->kind : cudaMemcpyDefault, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t st)
{
    OBS_COPY(cudaMemcpy3DAsync_v3020, copy3d(p), P3_BYTES(p), p ? p->kind : cudaMemcpyDefault, st);
}

FAKE_EXPORT cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t st)
{
    OBS_COPY(cudaMemcpy3DAsync_ptsz_v7000, copy3d(p), P3_BYTES(p), p ? p->kind : cudaMemcpyDefault, st);
}

FAKE_EXPORT cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p)
{
    OBS_COPY(cudaMemcpy3DPeer_v4000, copy3d_peer(p), P3_BYTES(p), cudaMemcpyDeviceToDevice, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms *p)
{
    OBS_COPY(cudaMemcpy3DPeer_ptds_v7000, copy3d_peer(p), P3_BYTES(p), cudaMemcpyDeviceToDevice, NULL);
}

FAKE_EXPORT cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p, cudaStream_t st)
{
    OBS_COPY(cudaMemcpy3DPeerAsync_v4000, copy3d_peer(p), P3_BYTES(p), cudaMemcpyDeviceToDevice, st);
}

FAKE_EXPORT cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms *p, cudaStream_t st)
{
    OBS_COPY(cudaMemcpy3DPeerAsync_ptsz_v7000, copy3d_peer(p), P3_BYTES(p), cudaMemcpyDeviceToDevice, st);
}

/* CUDA 13's batches: not on the legacy NULL stream; every copy covered by
 * attributes whose first index is 0 (cudaErrorInvalidValue otherwise). */
static cudaError_t copy_batch(void *const *d, const void *const *src, const size_t *n, size_t count,
                              const struct cudaMemcpyAttributes *a, const size_t *ai, size_t na, cudaStream_t st)
{
    if (!st || !count || !d || !src || !n || !a || !ai || !na || na > count || ai[0] != 0)
        return fail(cudaErrorInvalidValue);
    for (size_t i = 0; i < count; i++)
        if (n[i] && (!d[i] || !src[i]))
            return fail(cudaErrorInvalidValue);
    for (size_t i = 0; i < count; i++)
        if (n[i])
            memmove(d[i], src[i], n[i]);
    return cudaSuccess;
}

static size_t batch_bytes(const size_t *n, size_t count)
{
    size_t sum = 0;
    for (size_t i = 0; n && i < count; i++)
        sum += n[i];
    return sum;
}

FAKE_EXPORT cudaError_t cudaMemcpyBatchAsync(void *const *d, const void *const *src, const size_t *n, size_t count,
                                             struct cudaMemcpyAttributes *a, size_t *ai, size_t na, cudaStream_t st)
{
    OBS_COPY(cudaMemcpyBatchAsync_v13000, copy_batch(d, src, n, count, a, ai, na, st), batch_bytes(n, count),
             cudaMemcpyDefault, st);
}

FAKE_EXPORT cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *d, const void *const *src, const size_t *n,
                                                  size_t count, struct cudaMemcpyAttributes *a, size_t *ai,
                                                  size_t na, cudaStream_t st)
{
    OBS_COPY(cudaMemcpyBatchAsync_ptsz_v13000, copy_batch(d, src, n, count, a, ai, na, st),
             batch_bytes(n, count), cudaMemcpyDefault, st);
}

/* An operand of a 3D batch: rowLength/layerHeight in elements, 0 for
 * tightly packed by the extent. */
static int operand_side(struct side *sd, const struct cudaMemcpy3DOperand *o, struct cudaExtent e, size_t elem)
{
    if (o->type == cudaMemcpyOperandTypeArray) {
        struct fakegpu_array *a = array_of(o->op.array.array);
        if (!a)
            return -1;
        sd->base = a->data, sd->pitch = a->width * a->elem, sd->rows = a->height;
        sd->x = o->op.array.offset.x * a->elem, sd->y = o->op.array.offset.y, sd->z = o->op.array.offset.z;
        return 0;
    }
    if (o->type != cudaMemcpyOperandTypePointer || !o->op.ptr.ptr)
        return -1;
    sd->base = o->op.ptr.ptr;
    sd->pitch = (o->op.ptr.rowLength ? o->op.ptr.rowLength : e.width) * elem;
    sd->rows = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e.height;
    sd->x = sd->y = sd->z = 0;
    return 0;
}

static size_t op_elem(const struct cudaMemcpy3DBatchOp *op)
{
    const void *sa = op->src.type == cudaMemcpyOperandTypeArray ? (const void *)op->src.op.array.array : NULL;
    const void *da = op->dst.type == cudaMemcpyOperandTypeArray ? (const void *)op->dst.op.array.array : NULL;
    return sa || da ? elem_of(sa, da) : 1;
}

static cudaError_t copy_batch3d(size_t n, const struct cudaMemcpy3DBatchOp *ops, unsigned long long flags,
                                cudaStream_t st)
{
    if (!st || !n || !ops || flags)
        return fail(cudaErrorInvalidValue);
    for (size_t i = 0; i < n; i++) {
        struct cudaExtent e = ops[i].extent;
        size_t elem = op_elem(&ops[i]);
        struct side src, dst;
        if (!e.width || !e.height || !e.depth || operand_side(&src, &ops[i].src, e, elem) ||
            operand_side(&dst, &ops[i].dst, e, elem))
            return fail(cudaErrorInvalidValue);
        cudaError_t r = copy_sides(&src, &dst, e.width * elem, e.height, e.depth);
        if (r != cudaSuccess)
            return r;
    }
    return cudaSuccess;
}

static size_t batch3d_bytes(size_t n, const struct cudaMemcpy3DBatchOp *ops)
{
    size_t sum = 0;
    for (size_t i = 0; ops && i < n; i++)
        sum += ops[i].extent.width * ops[i].extent.height * ops[i].extent.depth * op_elem(&ops[i]);
    return sum;
}

FAKE_EXPORT cudaError_t cudaMemcpy3DBatchAsync(size_t n, struct cudaMemcpy3DBatchOp *ops, unsigned long long flags,
                                               cudaStream_t st)
{
    OBS_COPY(cudaMemcpy3DBatchAsync_v13000, copy_batch3d(n, ops, flags, st), batch3d_bytes(n, ops),
             cudaMemcpyDefault, st);
}

FAKE_EXPORT cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t n, struct cudaMemcpy3DBatchOp *ops,
                                                    unsigned long long flags, cudaStream_t st)
{
    OBS_COPY(cudaMemcpy3DBatchAsync_ptsz_v13000, copy_batch3d(n, ops, flags, st), batch3d_bytes(n, ops),
             cudaMemcpyDefault, st);
}

/* width bytes of height rows "pitch" apart, depth layers of ysize rows */
static cudaError_t set3d(struct cudaPitchedPtr p, int v, struct cudaExtent e)
{
    if (!e.width || !e.height || !e.depth)
        return cudaSuccess;
    if (!p.ptr || e.width > p.pitch || (e.depth > 1 && e.height > p.ysize))
        return fail(cudaErrorInvalidValue);
    for (size_t z = 0; z < e.depth; z++)
        for (size_t y = 0; y < e.height; y++)
            memset((char *)p.ptr + (z * p.ysize + y) * p.pitch, v, e.width);
    return cudaSuccess;
}

#define E_BYTES(e) ((e).width * (e).height * (e).depth)

FAKE_EXPORT cudaError_t cudaMemset3D(struct cudaPitchedPtr p, int v, struct cudaExtent e)
{
    OBS_SET(cudaMemset3D_v3020, set3d(p, v, e), E_BYTES(e), NULL);
}

FAKE_EXPORT cudaError_t cudaMemset3D_ptds(struct cudaPitchedPtr p, int v, struct cudaExtent e)
{
    OBS_SET(cudaMemset3D_ptds_v7000, set3d(p, v, e), E_BYTES(e), NULL);
}

FAKE_EXPORT cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr p, int v, struct cudaExtent e, cudaStream_t st)
{
    OBS_SET(cudaMemset3DAsync_v3020, set3d(p, v, e), E_BYTES(e), st);
}

FAKE_EXPORT cudaError_t cudaMemset3DAsync_ptsz(struct cudaPitchedPtr p, int v, struct cudaExtent e,
                                               cudaStream_t st)
{
    OBS_SET(cudaMemset3DAsync_ptsz_v7000, set3d(p, v, e), E_BYTES(e), st);
}

/* 8-, 16- or 32-bit channels of one kind; 1 to 4 of them (x, y, z, w). */
FAKE_EXPORT cudaError_t cudaMalloc3DArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                                          struct cudaExtent e, unsigned int flags)
{
    (void)flags;
    if (!array || !desc || !e.width)
        return fail(cudaErrorInvalidValue);
    int bits = desc->x, channels = !!desc->x + !!desc->y + !!desc->z + !!desc->w;
    if ((bits != 8 && bits != 16 && bits != 32) || (desc->y && desc->y != bits) ||
        (desc->z && desc->z != bits) || (desc->w && desc->w != bits) || channels == 3)
        return fail(cudaErrorInvalidChannelDescriptor);
    unsigned format;
    switch (desc->f) {
    case cudaChannelFormatKindUnsigned:
        format = bits == 8 ? CU_AD_FORMAT_UNSIGNED_INT8 : bits == 16 ? CU_AD_FORMAT_UNSIGNED_INT16
                                                                     : CU_AD_FORMAT_UNSIGNED_INT32;
        break;
    case cudaChannelFormatKindSigned:
        format = bits == 8 ? CU_AD_FORMAT_SIGNED_INT8 : bits == 16 ? CU_AD_FORMAT_SIGNED_INT16
                                                                   : CU_AD_FORMAT_SIGNED_INT32;
        break;
    case cudaChannelFormatKindFloat:
        if (bits == 8)
            return fail(cudaErrorInvalidChannelDescriptor);
        format = bits == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
        break;
    default:
        return fail(cudaErrorInvalidChannelDescriptor);
    }
    size_t h = e.height ? e.height : 1, d = e.depth ? e.depth : 1, elem = (size_t)bits / 8 * channels;
    struct fakegpu_array *a = calloc(1, sizeof *a + e.width * h * d * elem);
    if (!a)
        return fail(cudaErrorMemoryAllocation);
    a->magic = FAKEGPU_ARRAY_MAGIC;
    a->format = format, a->channels = (unsigned)channels, a->elem = (unsigned)elem;
    a->width = e.width, a->height = h, a->depth = d;
    *array = (cudaArray_t)(void *)a;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaFreeArray(cudaArray_t array)
{
    struct fakegpu_array *a = array_of(array);
    if (!array)
        return cudaSuccess;
    if (!a)
        return fail(cudaErrorInvalidResourceHandle);
    a->magic = 0;
    free(a);
    return cudaSuccess;
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

/* FAKE_CUDA_STICKY_AT=N: the Nth cudaStreamSynchronize (from 1) and every
 * one after it fail with cudaErrorIllegalAddress, a sticky error as a
 * kernel's bad access leaves it (the flight recorder's test). */
static cudaError_t sticky_sync(void)
{
    static long at = -2, seen;
    if (__atomic_load_n(&at, __ATOMIC_ACQUIRE) == -2) {
        const char *v = getenv("FAKE_CUDA_STICKY_AT");
        __atomic_store_n(&at, v && *v ? atol(v) : -1, __ATOMIC_RELEASE);
    }
    long n = __atomic_add_fetch(&seen, 1, __ATOMIC_RELAXED);
    long a = __atomic_load_n(&at, __ATOMIC_ACQUIRE);
    return a > 0 && n >= a ? fail(cudaErrorIllegalAddress) : cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    OBS_SYNC(cudaStreamSynchronize_v3020, sticky_sync(), s);
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
 * Device memory (cudaMalloc, cudaMallocPitch, cudaMalloc3D, cudaMallocAsync,
 * cudaMallocFromPoolAsync) and managed memory come from the fake driver,
 * through its private fakegpu_mem_alloc/fakegpu_mem_free (tests/fakes/cuda.c;
 * no interposer or CUPTI report sees them), so that they count in the
 * driver's cuMemGetInfo_v2 and against its FAKE_CUDA_MEM_BUDGET, one budget
 * per process as on a GPU: a device allocation that does not fit fails with
 * cudaErrorMemoryAllocation and sets the last error, as the real runtime's
 * does when the driver answers CUDA_ERROR_OUT_OF_MEMORY.  cudaFree and
 * cudaFreeAsync give them back the same way.  Host memory (cudaMallocHost,
 * cudaHostAlloc) is posix_memalign, freed with free(); so is everything when
 * no fake driver was found.  What the real runtime does, and the fake with
 * it: the memory is not cleared and is aligned for any variable (256 bytes
 * at least: the driver's blocks are); cudaMalloc of 0 bytes succeeds with
 * NULL; cudaFree(NULL) succeeds and does nothing ("If devPtr is 0, no
 * operation is performed", cuda_runtime_api.h); a failure for want of
 * memory is cudaErrorMemoryAllocation ("in case of failure") with *p NULL
 * and the thread's last error set.
 * FAKE_CUDA_OOM_BYTES=N: an allocation of more than N bytes fails with
 * cudaErrorMemoryAllocation (and sets the last error), as a full device does.
 * FAKE_CUDART_VIA_DRIVER=1: cudaMalloc and cudaFree go through the
 * driver's public cuMemAlloc_v2/cuMemFree_v2 instead (looked up with
 * dlsym(RTLD_DEFAULT), so an interposer sees the nested call, as it sees the
 * real runtime's) when libcuda is in the global scope. */

typedef int (*fake_drv_alloc_fn)(unsigned long long *, size_t);
typedef int (*fake_drv_free_fn)(unsigned long long);
typedef int (*fake_mem_alloc_fn)(unsigned long long *, size_t, int);

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
    /* the variable is read once, as the other FAKE_* switches: a getenv per
     * allocation would make the benchmarks' figures depend on the
     * environment's size */
    static int wanted = -1;
    int w = __atomic_load_n(&wanted, __ATOMIC_ACQUIRE);
    if (w < 0) {
        const char *v = getenv("FAKE_CUDART_VIA_DRIVER");
        w = v && strcmp(v, "1") == 0;
        __atomic_store_n(&wanted, w, __ATOMIC_RELEASE);
    }
    if (!w)
        return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return 0;
    dlclose(h);
    *alloc = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    *release = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
    return *alloc && *release;
}

/* What an allocation is: host memory, cudaMalloc's device memory (the one
 * FAKE_CUDART_VIA_DRIVER routes), other device memory, managed memory. */
enum rt_mem { RT_HOST, RT_MALLOC, RT_DEVICE, RT_MANAGED };

static cudaError_t do_alloc_kind(void **p, size_t n, enum rt_mem k)
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
    unsigned long long d = 0;
    int rc = -1;
    if (k == RT_MALLOC && via_driver(&fa, &ff))
        rc = ((fake_drv_alloc_fn)fa)(&d, n);
    else if (k != RT_HOST && drv_mem_alloc)
        rc = ((fake_mem_alloc_fn)drv_mem_alloc)(&d, n, k == RT_MANAGED);
    else {
        void *m = NULL;
        if (posix_memalign(&m, 256, n) == 0) {
            d = (unsigned long long)(uintptr_t)m;
            rc = 0;
        }
    }
    if (rc != 0) {
        *p = NULL;
        return fail(cudaErrorMemoryAllocation);
    }
    *p = (void *)(uintptr_t)d;
    return cudaSuccess;
}

static cudaError_t do_alloc(void **p, size_t n)
{
    return do_alloc_kind(p, n, RT_HOST);
}

static cudaError_t do_alloc_device(void **p, size_t n)
{
    return do_alloc_kind(p, n, RT_DEVICE);
}

/* cudaFree (k = RT_MALLOC) and cudaFreeAsync (RT_DEVICE): the driver knows
 * its blocks and hands others (host memory) to free(). */
static cudaError_t do_free_kind(void *p, enum rt_mem k)
{
    if (!p)
        return cudaSuccess;
    void *fa, *ff;
    int rc = 0;
    if (k == RT_MALLOC && via_driver(&fa, &ff))
        rc = ((fake_drv_free_fn)ff)((unsigned long long)(uintptr_t)p);
    else if (drv_mem_free)
        rc = ((fake_drv_free_fn)drv_mem_free)((unsigned long long)(uintptr_t)p);
    else
        free(p);
    return rc == 0 ? cudaSuccess : fail(cudaErrorInvalidValue);
}

FAKE_EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
    return do_alloc_kind(p, n, RT_MALLOC);
}

FAKE_EXPORT cudaError_t cudaFree(void *p)
{
    return do_free_kind(p, RT_MALLOC);
}

/* Free and total device memory: the driver's cuMemGetInfo_v2, reached as
 * the real runtime reaches the driver (80 GiB, all free, in a process whose
 * runtime found no driver: the fake does not model that). */
FAKE_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return fail(cudaErrorInvalidValue);
    if (!drv.mem_info) {
        *free_bytes = *total_bytes = (size_t)80 << 30;
        return cudaSuccess;
    }
    return drv.mem_info(free_bytes, total_bytes) == CUDA_SUCCESS ? cudaSuccess : fail(cudaErrorInvalidValue);
}

FAKE_EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h)
{
    if (!pitch)
        return fail(cudaErrorInvalidValue);
    size_t pw = (w + 511) / 512 * 512;     /* rows padded to 512 bytes */
    cudaError_t e = do_alloc_device(p, pw * h);
    *pitch = e == cudaSuccess ? pw : 0;
    return e;
}

FAKE_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pp, struct cudaExtent e)
{
    if (!pp)
        return fail(cudaErrorInvalidValue);
    size_t pw = (e.width + 511) / 512 * 512;
    void *m = NULL;
    cudaError_t rc = do_alloc_device(&m, pw * e.height * e.depth);
    pp->ptr = m;
    pp->pitch = rc == cudaSuccess ? pw : 0;
    pp->xsize = e.width;
    pp->ysize = e.height;
    return rc;
}

FAKE_EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    (void)s;
    return do_alloc_device(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s)
{
    (void)s;
    return do_alloc_device(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s)
{
    (void)pool; (void)s;
    return do_alloc_device(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s)
{
    (void)pool; (void)s;
    return do_alloc_device(p, n);
}

FAKE_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    (void)s;
    return do_free_kind(p, RT_DEVICE);
}

FAKE_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s)
{
    (void)s;
    return do_free_kind(p, RT_DEVICE);
}

FAKE_EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int fl)
{
    (void)fl;
    return do_alloc_kind(p, n, RT_MANAGED);
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

/* The real runtime's cudaProfilerStart/Stop are the driver's cuProfilerStart/
 * Stop, reached inside the call (always, whatever FAKE_CUDART_LOOKUP says:
 * the runtime has no profiler control of its own). */
FAKE_EXPORT cudaError_t cudaProfilerStart(void)
{
    if (drv.prof_start && drv.prof_start() != CUDA_SUCCESS)
        return fail(cudaErrorUnknown);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaProfilerStop(void)
{
    if (drv.prof_stop && drv.prof_stop() != CUDA_SUCCESS)
        return fail(cudaErrorUnknown);
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
    { cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument" },
    { cudaErrorInvalidChannelDescriptor, "cudaErrorInvalidChannelDescriptor",
      "invalid channel descriptor" },
    { cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
      "CUDA driver version is insufficient for CUDA runtime version" },
    { cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
      "part or all of the requested memory range is already mapped" },
    { cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
      "pointer does not correspond to a registered memory region" },
    { cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state" },
    { cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
      "operation failed due to a previous error during capture" },
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

FAKE_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s)
{
    OBS_EVENT(cudaEventRecord_ptsz_v7000, event_record(e), FAKEGPU_EVENT, s, e);
}

/* flags: cudaEventRecordDefault or cudaEventRecordExternal */
static cudaError_t event_record_flags(cudaEvent_t e, unsigned int fl)
{
    if (fl & ~(unsigned)cudaEventRecordExternal)
        return fail(cudaErrorInvalidValue);
    return event_record(e);
}

FAKE_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int fl)
{
    OBS_EVENT(cudaEventRecordWithFlags_v11010, event_record_flags(e, fl), FAKEGPU_EVENT, s, e);
}

FAKE_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int fl)
{
    OBS_EVENT(cudaEventRecordWithFlags_ptsz_v11010, event_record_flags(e, fl), FAKEGPU_EVENT, s, e);
}

/* All work is done at once: a recorded event, or one never recorded, has
 * completed (cudaSuccess, as the real runtime says of both). */
FAKE_EXPORT cudaError_t cudaEventQuery(cudaEvent_t e)
{
    return e ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

FAKE_EXPORT cudaError_t cudaStreamQuery(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

/* ---- host functions: run at once, on the calling thread ------------------ */

static cudaError_t host_func(cudaHostFn_t fn, void *ud)
{
    if (!fn)
        return fail(cudaErrorInvalidValue);
    fn(ud);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *ud)
{
    (void)s;
    return host_func(fn, ud);
}

FAKE_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *ud)
{
    (void)s;
    return host_func(fn, ud);
}

/* flags must be 0 */
static cudaError_t stream_callback(cudaStream_t s, cudaStreamCallback_t cb, void *ud, unsigned int fl)
{
    if (!cb || fl)
        return fail(cudaErrorInvalidValue);
    cb(s, cudaSuccess, ud);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *ud, unsigned int fl)
{
    return stream_callback(s, cb, ud, fl);
}

FAKE_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void *ud,
                                                   unsigned int fl)
{
    return stream_callback(s, cb, ud, fl);
}

/* ---- pinning host memory, IPC, pools ------------------------------------- */

/* Registered ranges by start address: registering one twice is
 * cudaErrorHostMemoryAlreadyRegistered, unregistering an unknown one
 * cudaErrorHostMemoryNotRegistered, as the real runtime says. */
#define HOST_REGS 64
static pthread_mutex_t host_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static void *host_regs[HOST_REGS];

FAKE_EXPORT cudaError_t cudaHostRegister(void *p, size_t n, unsigned int fl)
{
    (void)fl;
    if (!p || !n)
        return fail(cudaErrorInvalidValue);
    cudaError_t r = cudaErrorMemoryAllocation;
    pthread_mutex_lock(&host_reg_lock);
    int free_slot = -1;
    for (int i = 0; i < HOST_REGS; i++) {
        if (host_regs[i] == p) {
            r = cudaErrorHostMemoryAlreadyRegistered;
            free_slot = -2;
            break;
        }
        if (!host_regs[i] && free_slot == -1)
            free_slot = i;
    }
    if (free_slot >= 0) {
        host_regs[free_slot] = p;
        r = cudaSuccess;
    }
    pthread_mutex_unlock(&host_reg_lock);
    return r == cudaSuccess ? r : fail(r);
}

FAKE_EXPORT cudaError_t cudaHostUnregister(void *p)
{
    cudaError_t r = cudaErrorHostMemoryNotRegistered;
    pthread_mutex_lock(&host_reg_lock);
    for (int i = 0; p && i < HOST_REGS; i++)
        if (host_regs[i] == p) {
            host_regs[i] = NULL;
            r = cudaSuccess;
            break;
        }
    pthread_mutex_unlock(&host_reg_lock);
    return r == cudaSuccess ? r : fail(r);
}

/* The handle carries the address.  The real runtime opens only another
 * process's handles; the fake opens its own process's too, so that one
 * test program can make the whole round trip. */
FAKE_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
    if (!h || !p)
        return fail(cudaErrorInvalidValue);
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &p, sizeof p);
    return cudaSuccess;
}

/* flags: cudaIpcMemLazyEnablePeerAccess, the one the runtime accepts */
FAKE_EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int fl)
{
    void *addr = NULL;
    memcpy(&addr, h.reserved, sizeof addr);
    if (!p || fl != cudaIpcMemLazyEnablePeerAccess || !addr)
        return fail(cudaErrorInvalidValue);
    *p = addr;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaIpcCloseMemHandle(void *p)
{
    return p ? cudaSuccess : fail(cudaErrorInvalidValue);
}

static int default_pool;   /* its address is the device's default cudaMemPool_t */

FAKE_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    if (!pool)
        return fail(cudaErrorInvalidValue);
    if (device != 0)
        return fail(cudaErrorInvalidDevice);
    *pool = (cudaMemPool_t)(void *)&default_pool;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
    (void)keep;
    return pool == (cudaMemPool_t)(void *)&default_pool ? cudaSuccess : fail(cudaErrorInvalidValue);
}

/* ---- driver entry points --------------------------------------------------
 * Answered by the driver's cuGetProcAddress_v2 through the pointer the
 * runtime was given at load (FAKE_CUDART_ENTRY=private: through the fake
 * driver's own fakegpu_get_proc_address, which no interposer sees).  As the
 * real runtime documents: a symbol not found, or not at this version, is
 * cudaSuccess with *funcPtr NULL and the driver's status; cudaEnableDefault
 * is the per-thread search for the _ptsz entry points, the legacy one
 * otherwise; a version above the driver's is cudaErrorInvalidValue. */
static cudaError_t entry_point(const char *sym, void **fn, unsigned int version, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *st, int ptsz)
{
    const char *mode = getenv("FAKE_CUDART_ENTRY");
    fake_gpa2_fn look = mode && strcmp(mode, "private") == 0 ? drv_private : drv_gpa2;
    if (!sym || !fn || flags > cudaEnablePerThreadDefaultStream || version > CUDART_VERSION)
        return fail(cudaErrorInvalidValue);
    if (!look)
        return fail(cudaErrorInsufficientDriver);
    cuuint64_t cu = flags == cudaEnableDefault ? (ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                                       : CU_GET_PROC_ADDRESS_LEGACY_STREAM)
                                               : flags;
    CUdriverProcAddressQueryResult ds = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *p = NULL;
    CUresult rc = look(sym, &p, (int)version, cu, &ds);
    *fn = rc == CUDA_SUCCESS ? p : NULL;
    if (st)
        *st = rc == CUDA_SUCCESS ? cudaDriverEntryPointSuccess
              : ds == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? cudaDriverEntryPointVersionNotSufficent
                                                                : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *sym, void **fn, unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *st)
{
    return entry_point(sym, fn, CUDART_VERSION, flags, st, 0);
}

FAKE_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *sym, void **fn, unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *st)
{
    return entry_point(sym, fn, CUDART_VERSION, flags, st, 1);
}

FAKE_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *sym, void **fn, unsigned int version,
                                                         unsigned long long flags,
                                                         enum cudaDriverEntryPointQueryResult *st)
{
    return entry_point(sym, fn, version, flags, st, 0);
}

FAKE_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *sym, void **fn, unsigned int version,
                                                              unsigned long long flags,
                                                              enum cudaDriverEntryPointQueryResult *st)
{
    return entry_point(sym, fn, version, flags, st, 1);
}
