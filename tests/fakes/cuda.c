/*
 * cuda.c - a fake CUDA driver (libcuda.so.1) for tests, public entry points only.
 *
 * DESIGN
 * Built from the real cuda.h as build/fakes/libcuda.so with soname
 * libcuda.so.1, so that a program can dlopen("libcuda.so.1") and speak the
 * runtime's lookup protocol (preload/procaddr.c) to it: cuGetProcAddress
 * and cuGetProcAddress_v2 answer from one table of (name, ABI version,
 * per-thread stream, function), choosing the variant by version and flags
 * as the real driver does, with NOT_FOUND and the matching symbolStatus for
 * unknown names, the "" probe and too-old versions.  The versions are
 * cudaTypedefs.h's PFN_<name>_v<N>: per-thread variants from 7000, so that
 * a per-thread request below that gets the legacy function, as the flag's
 * documentation says ("if a per-thread version is not found, ... the legacy
 * version").  Two entries hand out internal, unexported functions, as a
 * real driver may: ("cuMemsetD8", 3020) and ("cuLaunchHostFunc", 13010),
 * CUDA 13.1's cuLaunchHostFunc_v2 with a fourth argument the headers here
 * do not know; interposers must cope with pointers they cannot name.
 * There is no device: device memory is host memory (an mmap'd arena of
 * the fake's own, never the malloc heap: the memory section says why),
 * copies and sets really
 * copy and set (2D/3D ones too, between host, device and array memory),
 * synchronizations return at once, host functions run at once on the
 * calling thread, launches validate their handle and dimensions, stream
 * capture keeps a thread's captures per stream and records nothing into
 * their graphs.  "Images" given to cuLibraryLoadData or
 * cuModuleLoadData are text: "fakecubin" followed by the mangled kernel
 * names, whitespace separated.  Everything but cuInit, cuDriverGetVersion,
 * the lookups and cuGetErrorString fails with CUDA_ERROR_NOT_INITIALIZED
 * before cuInit.  Bad input gets a CUresult, never a crash.
 * Memory: the driver keeps every block it hands out (the fake runtime's
 * device memory included) and the live device bytes, which cuMemGetInfo_v2
 * reports and FAKE_CUDA_MEM_BUDGET bounds (the memory section says how).
 * Work is reported to the fake CUPTI through fakegpu.h once it has called
 * fakegpu_set_observer().
 */
#include <cuda.h>
#include <cupti_driver_cbid.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fakegpu.h"

#undef cuMemAlloc        /* cuda.h maps these names to their newer variants; */
#undef cuGetProcAddress  /* the fake defines the old ABIs under the old names */

#define FAKE_EXPORT __attribute__((visibility("default")))

/* Every entry point trainprof wraps, declared from its list: a prototype
 * there that disagrees with cuda.h fails to compile here. */
#define TP_DRV_FN(ret, name, params, args, cbid, gate, rec, request, version) FAKE_EXPORT ret name params;
#include "../../collector/record/apis/cuda.def"
#undef TP_DRV_FN

/* ---- the observer (fakegpu.h) --------------------------------------------- */

static fakegpu_begin_fn fake_obs_begin;
static fakegpu_end_fn fake_obs_end;
static pthread_mutex_t fake_obs_lock = PTHREAD_MUTEX_INITIALIZER;

FAKE_EXPORT void fakegpu_set_observer(fakegpu_begin_fn begin, fakegpu_end_fn end)
{
    pthread_mutex_lock(&fake_obs_lock);
    __atomic_store_n(&fake_obs_begin, begin, __ATOMIC_RELEASE);
    __atomic_store_n(&fake_obs_end, end, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fake_obs_lock);
}

struct fake_rep {
    fakegpu_end_fn end;
    uint64_t token;
    struct fakegpu_op op;
};

static void fake_enter(struct fake_rep *r, int cbid, int kind)
{
    memset(r, 0, sizeof *r);
    r->op.domain = FAKEGPU_DRIVER;
    r->op.cbid = cbid;
    r->op.kind = kind;
    fakegpu_begin_fn b = __atomic_load_n(&fake_obs_begin, __ATOMIC_ACQUIRE);
    r->end = __atomic_load_n(&fake_obs_end, __ATOMIC_ACQUIRE);
    if (b && r->end)
        r->token = b();
    else
        r->end = NULL;
}

static CUresult fake_leave(struct fake_rep *r, CUresult rc)
{
    r->op.status = (int)rc;
    if (rc != CUDA_SUCCESS)
        r->op.kind = FAKEGPU_NONE;      /* a failed call runs nothing on the device */
    if (r->end)
        r->end(r->token, &r->op);
    return rc;
}

/* ---- state ------------------------------------------------------------- */

static int fake_initialized;

#define FAKE_KERNEL_MAGIC 0x6b65726eu
#define FAKE_FUNC_MAGIC   0x66756e63u
#define FAKE_LIB_MAGIC    0x6c696272u
#define FAKE_MAX_KERNELS  16
#define FAKE_NAME_MAX     128

struct fake_fn {
    uint32_t magic;                /* FAKE_KERNEL_MAGIC (CUkernel) or FAKE_FUNC_MAGIC */
    char name[FAKE_NAME_MAX];
    struct fake_fn *function;      /* kernels: their CUfunction, made on demand */
};

struct fake_lib {
    uint32_t magic;
    unsigned n;
    struct fake_fn *kernels[FAKE_MAX_KERNELS];
};

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

#define FAKE_READY() do { if (!__atomic_load_n(&fake_initialized, __ATOMIC_ACQUIRE)) return CUDA_ERROR_NOT_INITIALIZED; } while (0)

static struct fake_fn *fake_fn_of(const void *h)
{
    const struct fake_fn *f = h;
    return f && (f->magic == FAKE_KERNEL_MAGIC || f->magic == FAKE_FUNC_MAGIC) ? (struct fake_fn *)f : NULL;
}

static struct fake_lib *fake_lib_of(const void *h)
{
    const struct fake_lib *l = h;
    return l && l->magic == FAKE_LIB_MAGIC ? (struct fake_lib *)l : NULL;
}

/* Parse an image into a library of kernels (kind = magic of its handles). */
static CUresult fake_load(struct fake_lib **out, const void *image, uint32_t magic)
{
    static const char head[] = "fakecubin";
    if (!out || !image || strncmp(image, head, sizeof head - 1) != 0)
        return CUDA_ERROR_INVALID_IMAGE;
    struct fake_lib *lib = calloc(1, sizeof *lib);
    if (!lib)
        return CUDA_ERROR_OUT_OF_MEMORY;
    lib->magic = FAKE_LIB_MAGIC;
    const char *p = (const char *)image + sizeof head - 1;
    while (*p && lib->n < FAKE_MAX_KERNELS) {
        p += strspn(p, " \t\n");
        size_t len = strcspn(p, " \t\n");
        if (!len)
            break;
        struct fake_fn *k = calloc(1, sizeof *k);
        if (!k)
            break;
        k->magic = magic;
        memcpy(k->name, p, len < FAKE_NAME_MAX - 1 ? len : FAKE_NAME_MAX - 1);
        lib->kernels[lib->n++] = k;
        p += len;
    }
    *out = lib;
    return CUDA_SUCCESS;
}

static struct fake_fn *fake_find(struct fake_lib *lib, const char *name)
{
    for (unsigned i = 0; i < lib->n; i++)
        if (strcmp(lib->kernels[i]->name, name) == 0)
            return lib->kernels[i];
    return NULL;
}

/* ---- initialisation, devices, errors --------------------------------------- */

FAKE_EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_store_n(&fake_initialized, 1, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int *n)
{
    FAKE_READY();
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    FAKE_READY();
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    FAKE_READY();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (d != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    strncpy(name, "Fake H100", (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}

static size_t fake_mem_total(void);   /* FAKE_CUDA_MEM_BUDGET, below */

FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    FAKE_READY();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (d != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = fake_mem_total();
    return CUDA_SUCCESS;
}

/* H100 SXM values (CUDA's deviceQuery on an H100). */
FAKE_EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    FAKE_READY();
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    if (d != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *v = 32; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

/* One device, one primary context: active from the first retain (the real
 * runtime retains it at its first call that needs a context). */
static int fake_primary_refs;
static int fake_primary_ctx;    /* its address is the CUcontext */

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
    FAKE_READY();
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (d != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    __atomic_add_fetch(&fake_primary_refs, 1, __ATOMIC_ACQ_REL);
    *ctx = (CUcontext)(void *)&fake_primary_ctx;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    FAKE_READY();
    if (d != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (__atomic_load_n(&fake_primary_refs, __ATOMIC_ACQUIRE) <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    __atomic_sub_fetch(&fake_primary_refs, 1, __ATOMIC_ACQ_REL);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active)
{
    FAKE_READY();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (d != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = __atomic_load_n(&fake_primary_refs, __ATOMIC_ACQUIRE) > 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
    FAKE_READY();
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    *d = 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult e, const char **s)
{
    if (!s)
        return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "initialization error"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "device kernel image is invalid"; break;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* ---- libraries, modules, kernel names -------------------------------------- */

FAKE_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jo, void **jv,
                                       unsigned int nj, CUlibraryOption *lo, void **lv, unsigned int nl)
{
    (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
    FAKE_READY();
    return fake_load((struct fake_lib **)library, code, FAKE_KERNEL_MAGIC);
}

FAKE_EXPORT CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary library, const char *name)
{
    FAKE_READY();
    struct fake_lib *lib = fake_lib_of(library);
    if (!k || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    struct fake_fn *f = fake_find(lib, name);
    if (!f)
        return CUDA_ERROR_NOT_FOUND;
    *k = (CUkernel)f;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLibraryGetKernelCount(unsigned int *n, CUlibrary library)
{
    FAKE_READY();
    struct fake_lib *lib = fake_lib_of(library);
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    *n = lib->n;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *ks, unsigned int n, CUlibrary library)
{
    FAKE_READY();
    struct fake_lib *lib = fake_lib_of(library);
    if (!ks)
        return CUDA_ERROR_INVALID_VALUE;
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < n && i < lib->n; i++)
        ks[i] = (CUkernel)lib->kernels[i];
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuKernelGetName(const char **name, CUkernel k)
{
    FAKE_READY();
    struct fake_fn *f = fake_fn_of(k);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f || f->magic != FAKE_KERNEL_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuKernelGetFunction(CUfunction *out, CUkernel k)
{
    FAKE_READY();
    struct fake_fn *f = fake_fn_of(k);
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f || f->magic != FAKE_KERNEL_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fake_lock);
    if (!f->function && (f->function = calloc(1, sizeof *f->function))) {
        f->function->magic = FAKE_FUNC_MAGIC;
        memcpy(f->function->name, f->name, sizeof f->name);
    }
    pthread_mutex_unlock(&fake_lock);
    if (!f->function)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUfunction)f->function;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    FAKE_READY();
    return fake_load((struct fake_lib **)module, image, FAKE_FUNC_MAGIC);
}

FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction *out, CUmodule module, const char *name)
{
    FAKE_READY();
    struct fake_lib *lib = fake_lib_of(module);
    if (!out || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    struct fake_fn *f = fake_find(lib, name);
    if (!f)
        return CUDA_ERROR_NOT_FOUND;
    *out = (CUfunction)f;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuFuncGetName(const char **name, CUfunction fn)
{
    FAKE_READY();
    struct fake_fn *f = fake_fn_of(fn);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f || f->magic != FAKE_FUNC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name;
    return CUDA_SUCCESS;
}

/* ---- launches ---------------------------------------------------------- */

static __thread const CUlaunchConfig *fake_launch_attrs;

static void fake_take_attrs(struct fakegpu_op *op, int cbid)
{
    const CUlaunchConfig *c = fake_launch_attrs;
    op->cooperative = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ||
                      cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
    for (unsigned i = 0; c && c->attrs && i < c->numAttrs; i++) {
        const CUlaunchAttribute *a = &c->attrs[i];
        if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            op->cluster[0] = a->value.clusterDim.x, op->cluster[1] = a->value.clusterDim.y;
            op->cluster[2] = a->value.clusterDim.z;
        } else if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && a->value.cooperative) {
            op->cooperative = 1;
        }
    }
}

static CUresult fake_launch(int cbid, CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream s)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, FAKEGPU_KERNEL);
    struct fake_fn *f = fake_fn_of(fn);
    if (!f)
        return fake_leave(&r, CUDA_ERROR_INVALID_HANDLE);
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    r.op.kernel = f->name;
    r.op.grid[0] = gx, r.op.grid[1] = gy, r.op.grid[2] = gz;
    r.op.block[0] = bx, r.op.block[1] = by, r.op.block[2] = bz;
    r.op.smem = smem;
    r.op.stream = (uint64_t)(uintptr_t)s;
    fake_take_attrs(&r.op, cbid);
    return fake_leave(&r, CUDA_SUCCESS);
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned sm, CUstream s, void **p, void **x)
{
    (void)p, (void)x;
    return fake_launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, f, gx, gy, gz, bx, by, bz, sm, s);
}

FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                         unsigned by, unsigned bz, unsigned sm, CUstream s, void **p, void **x)
{
    (void)p, (void)x;
    return fake_launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, sm, s);
}

static CUresult fake_launch_ex(int cbid, const CUlaunchConfig *c, CUfunction f)
{
    if (!c) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The attributes the real CUPTI shows in the kernel record (clusterX/Y/Z,
     * launchType): kept by fake_launch_attrs for fake_launch to copy. */
    fake_launch_attrs = c;
    CUresult rc = fake_launch(cbid, f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
                              c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream);
    fake_launch_attrs = NULL;
    return rc;
}

FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **p, void **x)
{
    (void)p, (void)x;
    return fake_launch_ex(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, c, f);
}

FAKE_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **p, void **x)
{
    (void)p, (void)x;
    return fake_launch_ex(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, c, f);
}

static CUresult fake_plain(int cbid, int kind, int bad, CUresult bad_rc, uint64_t stream)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, kind);
    r.op.stream = stream;
    return fake_leave(&r, bad ? bad_rc : CUDA_SUCCESS);
}

FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, FAKEGPU_NONE, !e, CUDA_ERROR_INVALID_VALUE,
                      (uint64_t)(uintptr_t)s);
}

FAKE_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, FAKEGPU_NONE, !e,
                      CUDA_ERROR_INVALID_VALUE, (uint64_t)(uintptr_t)s);
}

/* ---- memory --------------------------------------------------------------- */

/* FAKE_CUDA_OOM_BYTES=N: allocations over N bytes fail with
 * CUDA_ERROR_OUT_OF_MEMORY, as on a full device. */
static size_t fake_oom_limit;
static pthread_once_t fake_oom_once = PTHREAD_ONCE_INIT;

/* The FAKE_* variables are read once, not per call: a getenv per
 * allocation would make the benchmarks' instruction counts depend on the
 * size of the environment. */
static void fake_oom_read(void)
{
    const char *v = getenv("FAKE_CUDA_OOM_BYTES");
    fake_oom_limit = v && *v ? (size_t)strtoull(v, NULL, 10) : 0;
}

static size_t fake_oom_bytes(void)
{
    pthread_once(&fake_oom_once, fake_oom_read);
    return fake_oom_limit;
}

/* FAKE_CUDA_MEM_BUDGET=N: the device has N bytes.  An allocation of device
 * memory fails with CUDA_ERROR_OUT_OF_MEMORY when the live device bytes
 * would exceed N, as the real driver's does when the device is full; a
 * free gives its bytes back; cuMemGetInfo_v2 answers free = N - live,
 * total = N, and cuDeviceTotalMem_v2 N.  Unset (or 0): 80 GiB, as an H100
 * has, and no allocation fails for want of it.  Device memory is what
 * cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocAsync, cuMemAllocFromPoolAsync
 * and cuMemCreate hand out, counted at the exact size asked (the real
 * driver rounds to its page, 2 MiB for large allocations: the fake's
 * numbers are the sizes the program asked for).  Managed memory
 * (cuMemAllocManaged) is not charged: the real driver populates it on the
 * device only when a kernel touches it, and may evict it again (Linux,
 * Pascal and newer), so cuMemGetInfo does not see it at allocation either.
 * Host memory (cuMemAllocHost_v2, cuMemHostAlloc) is not device memory.
 * One budget per process: the fake runtime's device allocations come from
 * this driver (fakegpu_mem_alloc below), as the real runtime's do. */
static size_t fake_budget;
static pthread_once_t fake_budget_once = PTHREAD_ONCE_INIT;

static void fake_budget_read(void)
{
    const char *v = getenv("FAKE_CUDA_MEM_BUDGET");
    fake_budget = v && *v ? (size_t)strtoull(v, NULL, 10) : 0;
}

static size_t fake_mem_total(void)
{
    pthread_once(&fake_budget_once, fake_budget_read);
    return fake_budget ? fake_budget : (size_t)80 << 30;
}

/* Every block the fake handed out, by address, with its size and kind, so
 * that a free knows how many bytes it gives back.  A pointer the table does
 * not know (host memory the fake runtime allocated itself with
 * posix_memalign, freed through the driver) is handed to free(), as the
 * fake always did.
 *
 * Where the memory comes from: not the host heap.  The real driver's
 * memory is the device's, in an address range of its own; it never touches
 * the process's malloc heap, so a program's (or an interposer's) heap use
 * does not change what an allocation costs, and an allocation does not
 * change the heap.  The fake models that with an arena of its own: blocks
 * of up to FAKE_CLASS_MAX_SIZE (2 MiB, the real driver's large page) are
 * rounded up to a power of two from 256 bytes and carved from 64 MiB
 * chunks mmap'd as needed; a freed block goes on its size class's free
 * list and the next allocation of that class takes it (the memory is not
 * cleared, as cuMemAlloc documents: "The memory is not cleared"); larger
 * blocks are a mapping of their own, unmapped at their free.  Every block
 * is 256-byte aligned at least (cuMemAlloc: "suitably aligned for any kind
 * of variable"; the runtime's cudaMalloc promises 256 bytes or more, and
 * callers such as PyTorch's caching allocator rely on 512).  The block
 * records themselves come from mmap'd slabs too, recycled through a free
 * list.  Device memory stays host-readable and writable (copies and sets
 * really copy and set).  A mapping that fails is CUDA_ERROR_OUT_OF_MEMORY,
 * as the real driver answers when the device is full. */
enum fake_mem_kind {
    FAKE_MEM_OTHER,     /* host or managed memory: not charged */
    FAKE_MEM_DEVICE,    /* charged against the budget */
    FAKE_MEM_VA,        /* an address reservation (cuMemAddressReserve) */
};

struct fake_block {
    uintptr_t addr;
    size_t size;        /* the size asked for (a free list's record: its class's size) */
    int kind;
    struct fake_block *next;    /* in its bucket, or on a free list */
};

#define FAKE_BLOCK_BUCKETS 1024
#define FAKE_CLASS_MIN 8                    /* 256 bytes */
#define FAKE_CLASS_MAX 21                   /* 2 MiB */
#define FAKE_CLASS_MAX_SIZE ((size_t)1 << FAKE_CLASS_MAX)
#define FAKE_CHUNK ((size_t)64 << 20)
#define FAKE_SLAB 4096                      /* block records per slab */
static struct fake_block *fake_blocks[FAKE_BLOCK_BUCKETS];
static struct fake_block *fake_spare[FAKE_CLASS_MAX + 1];  /* freed blocks by class (records keep addr) */
static struct fake_block *fake_recs;        /* unused records */
static char *fake_chunk_at, *fake_chunk_end;
static size_t fake_live;     /* device bytes handed out and not freed */
static pthread_mutex_t fake_mem_lock = PTHREAD_MUTEX_INITIALIZER;

static struct fake_block **fake_bucket(uintptr_t a)
{
    return &fake_blocks[(a >> 8) % FAKE_BLOCK_BUCKETS];
}

/* The size class of "n" bytes (lock not needed): log2 of the block's size,
 * or 0 for a block with a mapping of its own. */
static int fake_class(size_t n)
{
    if (n > FAKE_CLASS_MAX_SIZE)
        return 0;
    int c = n > 1 ? 64 - __builtin_clzll((unsigned long long)(n - 1)) : 0;
    return c > FAKE_CLASS_MIN ? c : FAKE_CLASS_MIN;
}

static void *fake_map(size_t n)
{
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

static size_t fake_page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return n > SIZE_MAX - page ? 0 : (n + page - 1) / page * page;
}

/* A block record (lock held), or NULL when out of memory. */
static struct fake_block *fake_rec_get(void)
{
    if (!fake_recs) {
        struct fake_block *slab = fake_map(FAKE_SLAB * sizeof *slab);
        if (!slab)
            return NULL;
        for (int i = 0; i < FAKE_SLAB - 1; i++)
            slab[i].next = &slab[i + 1];
        slab[FAKE_SLAB - 1].next = NULL;
        fake_recs = slab;
    }
    struct fake_block *b = fake_recs;
    fake_recs = b->next;
    return b;
}

static void fake_rec_put(struct fake_block *b)
{
    b->next = fake_recs;
    fake_recs = b;
}

/* A block of "n" bytes and its record (lock held; addr set), or NULL: a
 * freed block of its class, a new one carved from the current chunk (a new
 * chunk when it is full: the old one's rest is left unused), or its own
 * mapping. */
static struct fake_block *fake_take(size_t n)
{
    int c = fake_class(n);
    if (c && fake_spare[c]) {
        struct fake_block *b = fake_spare[c];
        fake_spare[c] = b->next;
        return b;
    }
    struct fake_block *b = fake_rec_get();
    if (!b)
        return NULL;
    if (!c) {
        size_t len = fake_page_round(n);
        void *m = len ? fake_map(len) : NULL;
        if (!m) {
            fake_rec_put(b);
            return NULL;
        }
        b->addr = (uintptr_t)m;
        return b;
    }
    size_t sz = (size_t)1 << c;
    if (!fake_chunk_at || (size_t)(fake_chunk_end - fake_chunk_at) < sz) {
        char *m = fake_map(FAKE_CHUNK);
        if (!m) {
            fake_rec_put(b);
            return NULL;
        }
        fake_chunk_at = m;
        fake_chunk_end = m + FAKE_CHUNK;
    }
    b->addr = (uintptr_t)fake_chunk_at;
    fake_chunk_at += sz;
    return b;
}

/* Block "b" (out of the table) is free again (lock held): to its class's
 * free list, or unmapped. */
static void fake_give(struct fake_block *b)
{
    int c = fake_class(b->size);
    if (c) {
        b->next = fake_spare[c];
        fake_spare[c] = b;
        return;
    }
    munmap((void *)b->addr, fake_page_round(b->size));
    fake_rec_put(b);
}

/* Whether "n" more device bytes fit the budget (lock held). */
static int fake_fits(size_t n)
{
    size_t total = fake_mem_total();
    /* without a budget nothing fails for want of it */
    return !fake_budget || (fake_live <= total && n <= total - fake_live);
}

/* Put record "b" of "n" bytes of "kind" into the table (lock held). */
static void fake_insert(struct fake_block *b, size_t n, int kind)
{
    b->size = n;
    b->kind = kind;
    struct fake_block **head = fake_bucket(b->addr);
    b->next = *head;
    *head = b;
    if (kind == FAKE_MEM_DEVICE)
        fake_live += n;
}

/* Remember reservation "a" of "n" bytes: 0 when out of memory. */
static int fake_remember(uintptr_t a, size_t n, int kind)
{
    pthread_mutex_lock(&fake_mem_lock);
    struct fake_block *b = fake_rec_get();
    if (b) {
        b->addr = a;
        fake_insert(b, n, kind);
    }
    pthread_mutex_unlock(&fake_mem_lock);
    return b != NULL;
}

/* Forget block "a" if the table has it (its size in *size, its device
 * bytes given back, its memory to the arena unless it is a reservation,
 * which the caller unmaps): 1 found, 0 unknown, -1 known but not what the
 * caller frees (va: a reservation, else memory; "want", if not 0, the size
 * the block must have), left as it is: the real driver answers
 * CUDA_ERROR_INVALID_VALUE to cuMemFree of a reservation, to
 * cuMemAddressFree of memory and to a reservation freed at another size. */
static int fake_forget(uintptr_t a, int va, size_t want, size_t *size)
{
    int found = 0;
    pthread_mutex_lock(&fake_mem_lock);
    for (struct fake_block **pp = fake_bucket(a); *pp; pp = &(*pp)->next) {
        struct fake_block *b = *pp;
        if (b->addr != a)
            continue;
        if ((b->kind == FAKE_MEM_VA) != va || (want && b->size != want)) {
            found = -1;
            break;
        }
        *pp = b->next;
        *size = b->size;
        if (b->kind == FAKE_MEM_DEVICE)
            fake_live -= b->size < fake_live ? b->size : fake_live;
        if (va) {
            fake_rec_put(b);
        } else {
            int c = fake_class(b->size);
            if (c)
                b->size = (size_t)1 << c;   /* a spare's size is its class's */
            fake_give(b);
        }
        found = 1;
        break;
    }
    pthread_mutex_unlock(&fake_mem_lock);
    return found;
}

/* The allocation itself, without the call's report (fake_alloc and the
 * private fakegpu_mem_alloc): one lock for the budget, the block and the
 * table. */
static CUresult fake_alloc_block(CUdeviceptr *p, size_t n, int kind)
{
    if (!p || !n)
        return CUDA_ERROR_INVALID_VALUE;
    size_t limit = fake_oom_bytes();
    if (limit && n > limit)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (kind == FAKE_MEM_DEVICE)
        fake_mem_total();           /* the budget read, outside the lock */
    uintptr_t a = 0;
    pthread_mutex_lock(&fake_mem_lock);
    struct fake_block *b = kind != FAKE_MEM_DEVICE || fake_fits(n) ? fake_take(n) : NULL;
    if (b) {
        a = b->addr;
        fake_insert(b, n, kind);
    }
    pthread_mutex_unlock(&fake_mem_lock);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)a;
    return CUDA_SUCCESS;
}

static CUresult fake_free_block(CUdeviceptr p)
{
    size_t size;
    int found;
    if (!p || (found = fake_forget((uintptr_t)p, 0, 0, &size)) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!found)
        free((void *)(uintptr_t)p);
    return CUDA_SUCCESS;
}

static CUresult fake_alloc(int cbid, CUdeviceptr *p, size_t n, int kind)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, FAKEGPU_NONE);
    return fake_leave(&r, fake_alloc_block(p, n, kind));
}

static CUresult fake_free(int cbid, CUdeviceptr p)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, FAKEGPU_NONE);
    return fake_leave(&r, fake_free_block(p));
}

/* The fake runtime's way to this memory (tests/fakes/cudart.c): the same
 * blocks, budget and counter as cuMemAlloc_v2/cuMemFree_v2 (managed != 0:
 * managed memory, not charged), under names no interposer knows and with no
 * report to the fake CUPTI, so that the runtime's allocations count in
 * cuMemGetInfo_v2 and against FAKE_CUDA_MEM_BUDGET while an interposer (and
 * CUPTI) sees only the runtime call, as before; FAKE_CUDART_VIA_DRIVER=1
 * gives the real runtime's nested cuMemAlloc_v2 instead. */
FAKE_EXPORT CUresult fakegpu_mem_alloc(CUdeviceptr *p, size_t n, int managed);
FAKE_EXPORT CUresult fakegpu_mem_alloc(CUdeviceptr *p, size_t n, int managed)
{
    FAKE_READY();
    return fake_alloc_block(p, n, managed ? FAKE_MEM_OTHER : FAKE_MEM_DEVICE);
}

FAKE_EXPORT CUresult fakegpu_mem_free(CUdeviceptr p);
FAKE_EXPORT CUresult fakegpu_mem_free(CUdeviceptr p)
{
    FAKE_READY();
    return fake_free_block(p);
}

/* cuMemGetInfo_v2: free and total device memory (see FAKE_CUDA_MEM_BUDGET).
 * The real driver also wants a current context; the fake has one device
 * and answers for it whatever the thread's context. */
FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2, FAKEGPU_NONE);
    if (!free_bytes || !total_bytes)
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    size_t total = fake_mem_total();
    pthread_mutex_lock(&fake_mem_lock);
    size_t live = fake_live;
    pthread_mutex_unlock(&fake_mem_lock);
    *total_bytes = total;
    *free_bytes = live < total ? total - live : 0;
    return fake_leave(&r, CUDA_SUCCESS);
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, p, n, FAKE_MEM_DEVICE);
}

/* The pre-3020 ABI (32-bit pointer and size): answers lookups below 3020. */
FAKE_EXPORT CUresult cuMemAlloc(unsigned int *p, unsigned int n)
{
    FAKE_READY();
    (void)n;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    return fake_free(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, p);
}

FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
    (void)s;
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, p, n, FAKE_MEM_DEVICE);
}

FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s)
{
    (void)s;
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, p, n, FAKE_MEM_DEVICE);
}

FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    (void)s;
    return fake_free(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, p);
}

FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
    (void)s;
    return fake_free(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, p);
}

FAKE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int elem)
{
    if (!pitch || (elem != 4 && elem != 8 && elem != 16)) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t pw = (w + 511) / 512 * 512;
    CUresult rc = fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, p, pw * h, FAKE_MEM_DEVICE);
    *pitch = rc == CUDA_SUCCESS ? pw : 0;
    return rc;
}

FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    (void)pool; (void)s;
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, p, n, FAKE_MEM_DEVICE);
}

FAKE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    (void)pool; (void)s;
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, p, n, FAKE_MEM_DEVICE);
}

FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int fl)
{
    (void)fl;
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, p, n, FAKE_MEM_OTHER);
}

FAKE_EXPORT CUresult cuMemAllocHost_v2(void **p, size_t n)
{
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, (CUdeviceptr *)p, n, FAKE_MEM_OTHER);
}

FAKE_EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned int fl)
{
    (void)fl;
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, (CUdeviceptr *)p, n, FAKE_MEM_OTHER);
}

FAKE_EXPORT CUresult cuMemFreeHost(void *p)
{
    return fake_free(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, (CUdeviceptr)(uintptr_t)p);
}

/* Every pointer lives on device 0 (FAKE_CUDA_POINTER_DEVICE=N: on device N).
 * Read once, with an atomic flag rather than pthread_once: the real query
 * is a table lookup in the driver, and the memory ledger makes it on every
 * allocation, so that its cost shows in the allocation benchmarks. */
static int fake_pointer_device = -1;

static int fake_pointer_dev(void)
{
    int d = __atomic_load_n(&fake_pointer_device, __ATOMIC_ACQUIRE);
    if (__builtin_expect(d < 0, 0)) {
        const char *v = getenv("FAKE_CUDA_POINTER_DEVICE");
        d = v && *v ? atoi(v) : 0;
        d = d < 0 ? 0 : d;
        __atomic_store_n(&fake_pointer_device, d, __ATOMIC_RELEASE);
    }
    return d;
}

/* The real driver reads its environment once, as it initializes, never
 * from whichever thread makes a query later: glibc's getenv is not safe
 * against a setenv of another thread, and a program may change its
 * environment while a profiler's thread queries the device (tp-flush
 * reads the device's properties at a save).  The fake reads its own
 * FAKE_CUDA_* variables as it loads (the fake runtime loads it at its own
 * load, before the program's threads), the calls' once-guards then find
 * them read. */
__attribute__((constructor)) static void fake_env_at_load(void)
{
    pthread_once(&fake_oom_once, fake_oom_read);
    pthread_once(&fake_budget_once, fake_budget_read);
    (void)fake_pointer_dev();
}

FAKE_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
    FAKE_READY();
    if (!data || !p)
        return CUDA_ERROR_INVALID_VALUE;
    if (attr != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        return CUDA_ERROR_NOT_SUPPORTED;
    *(int *)data = fake_pointer_dev();
    return CUDA_SUCCESS;
}

/* Physical allocations: the handle is the block's address in the arena; a mapping only
 * checks its arguments (a range need not be reserved: tests/programs/
 * mem_calls.c maps a block at its own address).  The memory is charged at
 * cuMemCreate and given back at cuMemRelease, as the real driver's
 * cuMemGetInfo counts it; mapping and reserving change nothing. */
FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                                 unsigned long long flags)
{
    if (!prop || flags) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    return fake_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, (CUdeviceptr *)h, n, FAKE_MEM_DEVICE);
}

FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    return fake_free(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, (CUdeviceptr)h);
}

FAKE_EXPORT CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h,
                              unsigned long long flags)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuMemMap, FAKEGPU_NONE, !p || !n || !h || off || flags,
                      CUDA_ERROR_INVALID_VALUE, 0);
}

FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, FAKEGPU_NONE, !p || !n, CUDA_ERROR_INVALID_VALUE, 0);
}

/* Reservations: an inaccessible range of the process's address space
 * (mmap PROT_NONE), aligned as asked (0: the 2 MiB granularity), so that
 * addresses are unique and never overlap memory; no device bytes.  Flags
 * must be 0 and the alignment a power of two, as cuda.h documents; the
 * address hint is ignored, as the real driver may. */
#define FAKE_GRANULARITY ((size_t)2 << 20)

FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr,
                                         unsigned long long flags)
{
    (void)addr;
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, FAKEGPU_NONE);
    if (!p || !n || flags || (align & (align - 1)))
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    if (!align)
        align = FAKE_GRANULARITY;
    if (n > SIZE_MAX - align)
        return fake_leave(&r, CUDA_ERROR_OUT_OF_MEMORY);
    size_t span = n + align;
    char *m = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return fake_leave(&r, CUDA_ERROR_OUT_OF_MEMORY);
    uintptr_t start = ((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t end_used = ((start - (uintptr_t)m) + n + page - 1) / page * page;   /* page-rounded */
    if (start > (uintptr_t)m)
        munmap(m, start - (uintptr_t)m);
    if (end_used < span)
        munmap(m + end_used, span - end_used);
    if (!fake_remember(start, n, FAKE_MEM_VA)) {
        munmap((void *)start, end_used - (start - (uintptr_t)m));
        return fake_leave(&r, CUDA_ERROR_OUT_OF_MEMORY);
    }
    *p = (CUdeviceptr)start;
    return fake_leave(&r, CUDA_SUCCESS);
}

FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, FAKEGPU_NONE);
    size_t size;
    if (!p || !n || fake_forget((uintptr_t)p, 1, n, &size) != 1)
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    munmap((void *)(uintptr_t)p, n);
    return fake_leave(&r, CUDA_SUCCESS);
}

/* 2 MiB, minimum and recommended: what an H100 answers. */
FAKE_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                   CUmemAllocationGranularity_flags option)
{
    FAKE_READY();
    if (!g || !prop || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                        option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *g = FAKE_GRANULARITY;
    return CUDA_SUCCESS;
}

/* ---- copies and sets -------------------------------------------------------- */

static CUresult fake_copy(int cbid, void *d, const void *s, size_t n, int kind, CUstream st)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, FAKEGPU_MEMCPY);
    r.op.bytes = n;
    r.op.copy_kind = kind;
    r.op.stream = (uint64_t)(uintptr_t)st;
    if (n && (!d || !s))
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    if (n)
        memmove(d, s, n);
    return fake_leave(&r, CUDA_SUCCESS);
}

#define FAKE_DPTR(p) ((void *)(uintptr_t)(p))

FAKE_EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpy, FAKE_DPTR(d), FAKE_DPTR(s), n, 4, NULL);
}

FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, FAKE_DPTR(d), s, n, 1, NULL);
}

FAKE_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds, FAKE_DPTR(d), s, n, 1, NULL);
}

FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, d, FAKE_DPTR(s), n, 2, NULL);
}

FAKE_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds, d, FAKE_DPTR(s), n, 2, NULL);
}

FAKE_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, FAKE_DPTR(d), FAKE_DPTR(s), n, 3, NULL);
}

FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, FAKE_DPTR(d), s, n, 1, st);
}

FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz, FAKE_DPTR(d), s, n, 1, st);
}

FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, d, FAKE_DPTR(s), n, 2, st);
}

FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream st)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz, d, FAKE_DPTR(s), n, 2, st);
}

static CUresult fake_set(int cbid, CUdeviceptr d, unsigned char v, size_t n, CUstream st)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, FAKEGPU_MEMSET);
    r.op.bytes = n;
    r.op.stream = (uint64_t)(uintptr_t)st;
    if (n && !d)
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    if (n)
        memset(FAKE_DPTR(d), v, n);
    return fake_leave(&r, CUDA_SUCCESS);
}

FAKE_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
    return fake_set(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, d, v, n, NULL);
}

/* What the lookup table hands out for ("cuMemsetD8", 3020): not exported. */
static CUresult fake_memsetD8_internal(CUdeviceptr d, unsigned char v, size_t n)
{
    return fake_set(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, d, v, n, NULL);
}

FAKE_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n)
{
    return fake_set(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds, d, v, n, NULL);
}

/* ---- synchronization, profiler control ---------------------------------------- */

FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, FAKEGPU_SYNC, 0, 0, (uint64_t)(uintptr_t)s);
}

FAKE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, FAKEGPU_SYNC, 0, 0,
                      (uint64_t)(uintptr_t)s);
}

FAKE_EXPORT CUresult cuCtxSynchronize(void)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, FAKEGPU_SYNC, 0, 0, 0);
}

FAKE_EXPORT CUresult cuCtxSynchronize_v2(CUcontext c)
{
    (void)c;
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, FAKEGPU_SYNC, 0, 0, 0);
}

FAKE_EXPORT CUresult cuEventSynchronize(CUevent e)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, FAKEGPU_SYNC, !e, CUDA_ERROR_INVALID_HANDLE, 0);
}

FAKE_EXPORT CUresult cuProfilerStart(void)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, FAKEGPU_NONE, 0, 0, 0);
}

FAKE_EXPORT CUresult cuProfilerStop(void)
{
    return fake_plain(CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, FAKEGPU_NONE, 0, 0, 0);
}

/* ---- more copies and sets: peers, 2D/3D, 16-bit and 2D sets ------------------ */

FAKE_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds, FAKE_DPTR(d), FAKE_DPTR(s), n, 4, NULL);
}

FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, FAKE_DPTR(d), FAKE_DPTR(s), n, 4, st);
}

FAKE_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz, FAKE_DPTR(d), FAKE_DPTR(s), n, 4, st);
}

FAKE_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds, FAKE_DPTR(d), FAKE_DPTR(s), n, 3, NULL);
}

FAKE_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2, FAKE_DPTR(d), FAKE_DPTR(s), n, 3, st);
}

FAKE_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
    return fake_copy(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz, FAKE_DPTR(d), FAKE_DPTR(s), n, 3, st);
}

/* Peer copies: the one context there is (the primary), else
 * CUDA_ERROR_INVALID_CONTEXT. */
static CUresult fake_peer(int cbid, CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                          CUstream st)
{
    if (dc != (CUcontext)(void *)&fake_primary_ctx || sc != (CUcontext)(void *)&fake_primary_ctx) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return fake_copy(cbid, FAKE_DPTR(d), FAKE_DPTR(s), n, 3, st);
}

FAKE_EXPORT CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{
    return fake_peer(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer, d, dc, s, sc, n, NULL);
}

FAKE_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{
    return fake_peer(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds, d, dc, s, sc, n, NULL);
}

FAKE_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                                       CUstream st)
{
    return fake_peer(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, d, dc, s, sc, n, st);
}

FAKE_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                            size_t n, CUstream st)
{
    return fake_peer(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz, d, dc, s, sc, n, st);
}

static struct fakegpu_array *fake_array_of(CUarray a)
{
    struct fakegpu_array *f = (struct fakegpu_array *)(void *)a;
    return f && f->magic == FAKEGPU_ARRAY_MAGIC ? f : NULL;
}

/* One side of a 2D/3D copy: the byte at (x bytes, y, z) of host, device,
 * unified or array memory, rows "pitch" apart and layers "height" rows. */
struct fake_operand {
    CUmemorytype type;
    const void *host;
    CUdeviceptr dev;
    CUarray array;
    size_t x, y, z, pitch, height;
};

static unsigned char *fake_operand_base(struct fake_operand *o, size_t w, size_t h, size_t d)
{
    switch (o->type) {
    case CU_MEMORYTYPE_HOST:
        return (unsigned char *)(uintptr_t)o->host;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        return FAKE_DPTR(o->dev);
    case CU_MEMORYTYPE_ARRAY: {
        struct fakegpu_array *a = fake_array_of(o->array);
        if (!a || o->x + w > a->width * a->elem || o->y + h > a->height || o->z + d > a->depth)
            return NULL;
        o->pitch = a->width * a->elem;
        o->height = a->height;
        return a->data;
    }
    default:
        return NULL;
    }
}

static int fake_kind_of(CUmemorytype src, CUmemorytype dst)
{
    int sh = src == CU_MEMORYTYPE_HOST, dh = dst == CU_MEMORYTYPE_HOST;
    int sd = src == CU_MEMORYTYPE_DEVICE || src == CU_MEMORYTYPE_ARRAY;
    int dd = dst == CU_MEMORYTYPE_DEVICE || dst == CU_MEMORYTYPE_ARRAY;
    return sh && dh ? 0 : sh && dd ? 1 : sd && dh ? 2 : sd && dd ? 3 : 4;
}

/* Rows of "w" bytes, "h" rows a layer, "d" layers; height 0 with d == 1 is
 * allowed, as cuMemcpy3D documents. */
static CUresult fake_copy3d(int cbid, struct fake_operand *src, struct fake_operand *dst, size_t w, size_t h,
                            size_t d, CUstream st)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, FAKEGPU_MEMCPY);
    r.op.bytes = (uint64_t)w * h * d;
    r.op.copy_kind = fake_kind_of(src->type, dst->type);
    r.op.stream = (uint64_t)(uintptr_t)st;
    if (!w || !h || !d)
        return fake_leave(&r, CUDA_SUCCESS);
    unsigned char *s = fake_operand_base(src, w, h, d), *t = fake_operand_base(dst, w, h, d);
    if (!s || !t || src->pitch < src->x + w || dst->pitch < dst->x + w ||
        (d > 1 && (src->height < src->y + h || dst->height < dst->y + h)))
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    for (size_t z = 0; z < d; z++)
        for (size_t y = 0; y < h; y++)
            memmove(t + ((dst->z + z) * dst->height + dst->y + y) * dst->pitch + dst->x,
                    s + ((src->z + z) * src->height + src->y + y) * src->pitch + src->x, w);
    return fake_leave(&r, CUDA_SUCCESS);
}

#define FAKE_SIDE(p, side, zz, hh) { (p)->side##MemoryType, (p)->side##Host, (p)->side##Device, \
                                     (p)->side##Array, (p)->side##XInBytes, (p)->side##Y, zz, \
                                     (p)->side##Pitch, hh }

static CUresult fake_copy2d(int cbid, const CUDA_MEMCPY2D *p, CUstream st)
{
    if (!p) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fake_operand s = FAKE_SIDE(p, src, 0, p->Height), d = FAKE_SIDE(p, dst, 0, p->Height);
    return fake_copy3d(cbid, &s, &d, p->WidthInBytes, p->Height, 1, st);
}

static CUresult fake_copy3d_of(int cbid, const CUDA_MEMCPY3D *p, CUstream st)
{
    if (!p) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fake_operand s = FAKE_SIDE(p, src, p->srcZ, p->srcHeight), d = FAKE_SIDE(p, dst, p->dstZ, p->dstHeight);
    return fake_copy3d(cbid, &s, &d, p->WidthInBytes, p->Height, p->Depth, st);
}

static CUresult fake_copy3d_peer(int cbid, const CUDA_MEMCPY3D_PEER *p, CUstream st)
{
    if (!p) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fake_operand s = FAKE_SIDE(p, src, p->srcZ, p->srcHeight), d = FAKE_SIDE(p, dst, p->dstZ, p->dstHeight);
    return fake_copy3d(cbid, &s, &d, p->WidthInBytes, p->Height, p->Depth, st);
}

FAKE_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
    return fake_copy2d(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2, p, NULL);
}

FAKE_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p)
{
    return fake_copy2d(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds, p, NULL);
}

FAKE_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{
    return fake_copy2d(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2, p, NULL);
}

FAKE_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p)
{
    return fake_copy2d(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds, p, NULL);
}

FAKE_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream st)
{
    return fake_copy2d(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2, p, st);
}

FAKE_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream st)
{
    return fake_copy2d(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz, p, st);
}

FAKE_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p)
{
    return fake_copy3d_of(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2, p, NULL);
}

FAKE_EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p)
{
    return fake_copy3d_of(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds, p, NULL);
}

FAKE_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream st)
{
    return fake_copy3d_of(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2, p, st);
}

FAKE_EXPORT CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream st)
{
    return fake_copy3d_of(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz, p, st);
}

FAKE_EXPORT CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p)
{
    return fake_copy3d_peer(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer, p, NULL);
}

FAKE_EXPORT CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *p)
{
    return fake_copy3d_peer(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds, p, NULL);
}

FAKE_EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream st)
{
    return fake_copy3d_peer(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync, p, st);
}

FAKE_EXPORT CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream st)
{
    return fake_copy3d_peer(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz, p, st);
}

/* Sets of "w" elements of "size" bytes in each of "h" rows "pitch" apart;
 * the address (and pitch) must be aligned to the element, as cuMemsetD16/32
 * require (CUDA_ERROR_INVALID_VALUE). */
static CUresult fake_set2d(int cbid, CUdeviceptr d, size_t pitch, unsigned v, unsigned size, size_t w, size_t h,
                           CUstream st)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, FAKEGPU_MEMSET);
    r.op.bytes = (uint64_t)w * h * size;
    r.op.stream = (uint64_t)(uintptr_t)st;
    if (!w || !h)
        return fake_leave(&r, CUDA_SUCCESS);
    if (!d || d % size || (h > 1 && (pitch % size || pitch < w * size)))
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w; x++) {
            unsigned char *e = FAKE_DPTR(d + y * pitch + x * size);
            if (size == 1)
                *e = (unsigned char)v;
            else if (size == 2)
                memcpy(e, &(uint16_t){ (uint16_t)v }, 2);
            else
                memcpy(e, &(uint32_t){ v }, 4);
        }
    return fake_leave(&r, CUDA_SUCCESS);
}

#define FAKE_SET(name, size, d, v, n, st) \
    fake_set2d(CUPTI_DRIVER_TRACE_CBID_##name, d, (n) * (size), v, size, n, 1, st)
#define FAKE_SET2D(name, size, d, p, v, w, h, st) \
    fake_set2d(CUPTI_DRIVER_TRACE_CBID_##name, d, p, v, size, w, h, st)

FAKE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    return FAKE_SET(cuMemsetD8Async, 1, d, v, n, s);
}

FAKE_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    return FAKE_SET(cuMemsetD8Async_ptsz, 1, d, v, n, s);
}

FAKE_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n)
{
    return FAKE_SET(cuMemsetD16_v2, 2, d, v, n, NULL);
}

FAKE_EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n)
{
    return FAKE_SET(cuMemsetD16_v2_ptds, 2, d, v, n, NULL);
}

FAKE_EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{
    return FAKE_SET(cuMemsetD16Async, 2, d, v, n, s);
}

FAKE_EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{
    return FAKE_SET(cuMemsetD16Async_ptsz, 2, d, v, n, s);
}

FAKE_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n)
{
    return FAKE_SET(cuMemsetD32_v2, 4, d, v, n, NULL);
}

FAKE_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n)
{
    return FAKE_SET(cuMemsetD32_v2_ptds, 4, d, v, n, NULL);
}

FAKE_EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{
    return FAKE_SET(cuMemsetD32Async, 4, d, v, n, s);
}

FAKE_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{
    return FAKE_SET(cuMemsetD32Async_ptsz, 4, d, v, n, s);
}

#define FAKE_D2D(bits, ty, size)                                                                     \
    FAKE_EXPORT CUresult cuMemsetD2D##bits##_v2(CUdeviceptr d, size_t p, ty v, size_t w, size_t h)  \
    {                                                                                                \
        return FAKE_SET2D(cuMemsetD2D##bits##_v2, size, d, p, v, w, h, NULL);                       \
    }                                                                                                \
    FAKE_EXPORT CUresult cuMemsetD2D##bits##_v2_ptds(CUdeviceptr d, size_t p, ty v, size_t w, size_t h) \
    {                                                                                                \
        return FAKE_SET2D(cuMemsetD2D##bits##_v2_ptds, size, d, p, v, w, h, NULL);                  \
    }                                                                                                \
    FAKE_EXPORT CUresult cuMemsetD2D##bits##Async(CUdeviceptr d, size_t p, ty v, size_t w, size_t h, \
                                                  CUstream s)                                        \
    {                                                                                                \
        return FAKE_SET2D(cuMemsetD2D##bits##Async, size, d, p, v, w, h, s);                        \
    }                                                                                                \
    FAKE_EXPORT CUresult cuMemsetD2D##bits##Async_ptsz(CUdeviceptr d, size_t p, ty v, size_t w,      \
                                                       size_t h, CUstream s)                         \
    {                                                                                                \
        return FAKE_SET2D(cuMemsetD2D##bits##Async_ptsz, size, d, p, v, w, h, s);                   \
    }
FAKE_D2D(8, unsigned char, 1)
FAKE_D2D(16, unsigned short, 2)
FAKE_D2D(32, unsigned int, 4)

/* ---- arrays (only what 3D copies need) ------------------------------------------ */

static unsigned fake_format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

FAKE_EXPORT CUresult cuArray3DCreate_v2(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    FAKE_READY();
    unsigned fb = d ? fake_format_bytes(d->Format) : 0;
    if (!out || !d || !fb || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) ||
        !d->Width)
        return CUDA_ERROR_INVALID_VALUE;
    size_t h = d->Height ? d->Height : 1, z = d->Depth ? d->Depth : 1;
    struct fakegpu_array *a = calloc(1, sizeof *a + d->Width * h * z * fb * d->NumChannels);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a->magic = FAKEGPU_ARRAY_MAGIC;
    a->format = (unsigned)d->Format;
    a->channels = d->NumChannels;
    a->elem = fb * d->NumChannels;
    a->width = d->Width, a->height = h, a->depth = z;
    *out = (CUarray)(void *)a;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray array)
{
    FAKE_READY();
    struct fakegpu_array *a = fake_array_of(array);
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    memset(d, 0, sizeof *d);
    d->Width = a->width, d->Height = a->height, d->Depth = a->depth;
    d->Format = (CUarray_format)a->format;
    d->NumChannels = a->channels;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuArrayDestroy(CUarray array)
{
    FAKE_READY();
    struct fakegpu_array *a = fake_array_of(array);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    a->magic = 0;
    free(a);
    return CUDA_SUCCESS;
}

/* ---- host functions ------------------------------------------------------------- */

/* Run at once on the calling thread (nothing is queued: every stream is idle). */
static CUresult fake_host_func(int cbid, CUstream s, CUhostFn fn, void *ud)
{
    FAKE_READY();
    struct fake_rep r;
    fake_enter(&r, cbid, FAKEGPU_NONE);
    r.op.stream = (uint64_t)(uintptr_t)s;
    if (!fn)
        return fake_leave(&r, CUDA_ERROR_INVALID_VALUE);
    fn(ud);
    return fake_leave(&r, CUDA_SUCCESS);
}

FAKE_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *ud)
{
    return fake_host_func(CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc, s, fn, ud);
}

FAKE_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *ud)
{
    return fake_host_func(CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc_ptsz, s, fn, ud);
}

/* What ("cuLaunchHostFunc", 13010) gets: CUDA 13.1's cuLaunchHostFunc_v2,
 * a fourth argument (syncMode: 0 or CU_HOST_TASK_SPINWAIT, 1), newer than the
 * headers here; handed out as an internal pointer, as a driver may. */
static CUresult fake_launch_host_func_v2(CUstream s, CUhostFn fn, void *ud, unsigned int sync_mode)
{
    if (sync_mode > 1) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    return fake_host_func(CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc, s, fn, ud);
}

/* ---- graphs: capture and instantiation ---------------------------------------- */

#define FAKE_GRAPH_MAGIC 0x67726170u
#define FAKE_EXEC_MAGIC  0x65786563u

struct fake_graph { uint32_t magic; };

/* Captures of this thread, one per stream (PyTorch captures a conditional
 * node's body on a second stream while the first is captured); the graph is
 * a fresh one, or the one given to cuStreamBeginCaptureToGraph.  Captured
 * work is not kept (nothing runs anyway). */
#define FAKE_CAPTURES 4
static __thread struct { CUstream stream; CUgraph into; } fake_captures[FAKE_CAPTURES];

static int fake_capture_of(CUstream s)
{
    for (int i = 0; i < FAKE_CAPTURES; i++)
        if (fake_captures[i].stream == s)
            return i;
    return -1;
}

static CUgraph fake_new_graph(uint32_t magic)
{
    struct fake_graph *g = malloc(sizeof *g);
    if (g)
        g->magic = magic;
    return (CUgraph)(void *)g;
}

static int fake_is(const void *h, uint32_t magic)
{
    return h && ((const struct fake_graph *)h)->magic == magic;
}

FAKE_EXPORT CUresult cuGraphCreate(CUgraph *g, unsigned int flags)
{
    FAKE_READY();
    if (!g || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *g = fake_new_graph(FAKE_GRAPH_MAGIC);
    return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKE_EXPORT CUresult cuGraphDestroy(CUgraph g)
{
    FAKE_READY();
    if (!fake_is(g, FAKE_GRAPH_MAGIC))
        return CUDA_ERROR_INVALID_VALUE;
    free((void *)g);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec e)
{
    FAKE_READY();
    if (!fake_is(e, FAKE_EXEC_MAGIC))
        return CUDA_ERROR_INVALID_VALUE;
    free((void *)e);
    return CUDA_SUCCESS;
}

/* The legacy NULL stream cannot be captured; a stream captured already:
 * CUDA_ERROR_ILLEGAL_STATE. */
static CUresult fake_begin(CUstream s, CUgraph into)
{
    FAKE_READY();
    if (!s)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    int i = fake_capture_of(s) < 0 ? fake_capture_of(NULL) : -1;
    if (i < 0)
        return CUDA_ERROR_ILLEGAL_STATE;
    fake_captures[i].stream = s;
    fake_captures[i].into = into;
    return CUDA_SUCCESS;
}

#undef cuStreamBeginCapture
FAKE_EXPORT CUresult cuStreamBeginCapture(CUstream s)
{
    return fake_begin(s, NULL);
}

FAKE_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s)
{
    return fake_begin(s, NULL);
}

FAKE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    if (mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    return fake_begin(s, NULL);
}

FAKE_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    return cuStreamBeginCapture_v2(s, mode);
}

FAKE_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                 const CUgraphEdgeData *data, size_t n, CUstreamCaptureMode mode)
{
    (void)deps, (void)data;
    if (!fake_is(g, FAKE_GRAPH_MAGIC) || (n && !deps) || mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    return fake_begin(s, g);
}

FAKE_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                      const CUgraphEdgeData *data, size_t n,
                                                      CUstreamCaptureMode mode)
{
    return cuStreamBeginCaptureToGraph(s, g, deps, data, n, mode);
}

/* Not capturing (or another stream): CUDA_ERROR_ILLEGAL_STATE, the capture
 * left as it was. */
static CUresult fake_end(CUstream s, CUgraph *g)
{
    FAKE_READY();
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    int i = s ? fake_capture_of(s) : -1;
    if (i < 0)
        return CUDA_ERROR_ILLEGAL_STATE;
    fake_captures[i].stream = NULL;
    *g = fake_captures[i].into ? fake_captures[i].into : fake_new_graph(FAKE_GRAPH_MAGIC);
    return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKE_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    return fake_end(s, g);
}

FAKE_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g)
{
    return fake_end(s, g);
}

static CUresult fake_instantiate(CUgraphExec *e, CUgraph g)
{
    FAKE_READY();
    if (!e || !fake_is(g, FAKE_GRAPH_MAGIC))
        return CUDA_ERROR_INVALID_VALUE;
    *e = (CUgraphExec)fake_new_graph(FAKE_EXEC_MAGIC);
    return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

#undef cuGraphInstantiate
FAKE_EXPORT CUresult cuGraphInstantiate(CUgraphExec *e, CUgraph g, CUgraphNode *err, char *log, size_t n)
{
    (void)err, (void)log, (void)n;
    return fake_instantiate(e, g);
}

FAKE_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *e, CUgraph g, CUgraphNode *err, char *log, size_t n)
{
    (void)err, (void)log, (void)n;
    return fake_instantiate(e, g);
}

FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
    (void)flags;
    return fake_instantiate(e, g);
}

FAKE_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    if (!p) {
        FAKE_READY();
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = fake_instantiate(e, g);
    p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

FAKE_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    return cuGraphInstantiateWithParams(e, g, p);
}

/* ---- cooperative launches ---------------------------------------------------- */

FAKE_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                               unsigned by, unsigned bz, unsigned sm, CUstream s, void **p)
{
    (void)p;
    return fake_launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz, sm, s);
}

FAKE_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                    unsigned bx, unsigned by, unsigned bz, unsigned sm, CUstream s,
                                                    void **p)
{
    (void)p;
    return fake_launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by, bz, sm, s);
}

/* ---- entry-point lookup --------------------------------------------------------- */

FAKE_EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int version, cuuint64_t flags);
FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status);

struct fake_sym {
    const char *name;   /* the name lookups ask for */
    int version;        /* lowest ABI version of this variant */
    int per_thread;     /* the _ptsz/_ptds variant */
    void *fn;
};

/* The table holds the fake's own addresses, as a real driver's does: a
 * plain reference to an exported function would bind to an interposer's
 * definition (ours, preloaded) instead. */
#define FAKE_LOCAL(fn) extern __typeof(fn) local_##fn __attribute__((alias(#fn), visibility("hidden")))
FAKE_LOCAL(cuArray3DCreate_v2);
FAKE_LOCAL(cuArray3DGetDescriptor_v2);
FAKE_LOCAL(cuArrayDestroy);
FAKE_LOCAL(cuCtxGetDevice);
FAKE_LOCAL(cuCtxSynchronize);
FAKE_LOCAL(cuCtxSynchronize_v2);
FAKE_LOCAL(cuDeviceGet);
FAKE_LOCAL(cuDeviceGetAttribute);
FAKE_LOCAL(cuDeviceGetCount);
FAKE_LOCAL(cuDeviceGetName);
FAKE_LOCAL(cuDevicePrimaryCtxGetState);
FAKE_LOCAL(cuDevicePrimaryCtxRelease_v2);
FAKE_LOCAL(cuDevicePrimaryCtxRetain);
FAKE_LOCAL(cuDeviceTotalMem_v2);
FAKE_LOCAL(cuDriverGetVersion);
FAKE_LOCAL(cuEventSynchronize);
FAKE_LOCAL(cuFuncGetName);
FAKE_LOCAL(cuGetErrorString);
FAKE_LOCAL(cuGetProcAddress);
FAKE_LOCAL(cuGetProcAddress_v2);
FAKE_LOCAL(cuGraphCreate);
FAKE_LOCAL(cuGraphDestroy);
FAKE_LOCAL(cuGraphExecDestroy);
FAKE_LOCAL(cuGraphInstantiate);
FAKE_LOCAL(cuGraphInstantiateWithFlags);
FAKE_LOCAL(cuGraphInstantiateWithParams);
FAKE_LOCAL(cuGraphInstantiateWithParams_ptsz);
FAKE_LOCAL(cuGraphInstantiate_v2);
FAKE_LOCAL(cuGraphLaunch);
FAKE_LOCAL(cuGraphLaunch_ptsz);
FAKE_LOCAL(cuInit);
FAKE_LOCAL(cuKernelGetFunction);
FAKE_LOCAL(cuKernelGetName);
FAKE_LOCAL(cuLaunchCooperativeKernel);
FAKE_LOCAL(cuLaunchCooperativeKernel_ptsz);
FAKE_LOCAL(cuLaunchHostFunc);
FAKE_LOCAL(cuLaunchHostFunc_ptsz);
FAKE_LOCAL(cuLaunchKernel);
FAKE_LOCAL(cuLaunchKernelEx);
FAKE_LOCAL(cuLaunchKernelEx_ptsz);
FAKE_LOCAL(cuLaunchKernel_ptsz);
FAKE_LOCAL(cuLibraryEnumerateKernels);
FAKE_LOCAL(cuLibraryGetKernel);
FAKE_LOCAL(cuLibraryGetKernelCount);
FAKE_LOCAL(cuLibraryLoadData);
FAKE_LOCAL(cuMemAddressFree);
FAKE_LOCAL(cuMemAddressReserve);
FAKE_LOCAL(cuMemAlloc);
FAKE_LOCAL(cuMemAllocAsync);
FAKE_LOCAL(cuMemAllocAsync_ptsz);
FAKE_LOCAL(cuMemAllocFromPoolAsync);
FAKE_LOCAL(cuMemAllocFromPoolAsync_ptsz);
FAKE_LOCAL(cuMemAllocHost_v2);
FAKE_LOCAL(cuMemAllocManaged);
FAKE_LOCAL(cuMemAllocPitch_v2);
FAKE_LOCAL(cuMemAlloc_v2);
FAKE_LOCAL(cuMemCreate);
FAKE_LOCAL(cuMemFreeAsync);
FAKE_LOCAL(cuMemFreeAsync_ptsz);
FAKE_LOCAL(cuMemFreeHost);
FAKE_LOCAL(cuMemFree_v2);
FAKE_LOCAL(cuMemGetAllocationGranularity);
FAKE_LOCAL(cuMemGetInfo_v2);
FAKE_LOCAL(cuMemHostAlloc);
FAKE_LOCAL(cuMemMap);
FAKE_LOCAL(cuMemRelease);
FAKE_LOCAL(cuMemUnmap);
FAKE_LOCAL(cuMemcpy);
FAKE_LOCAL(cuMemcpy2DAsync_v2);
FAKE_LOCAL(cuMemcpy2DAsync_v2_ptsz);
FAKE_LOCAL(cuMemcpy2DUnaligned_v2);
FAKE_LOCAL(cuMemcpy2DUnaligned_v2_ptds);
FAKE_LOCAL(cuMemcpy2D_v2);
FAKE_LOCAL(cuMemcpy2D_v2_ptds);
FAKE_LOCAL(cuMemcpy3DAsync_v2);
FAKE_LOCAL(cuMemcpy3DAsync_v2_ptsz);
FAKE_LOCAL(cuMemcpy3DPeer);
FAKE_LOCAL(cuMemcpy3DPeerAsync);
FAKE_LOCAL(cuMemcpy3DPeerAsync_ptsz);
FAKE_LOCAL(cuMemcpy3DPeer_ptds);
FAKE_LOCAL(cuMemcpy3D_v2);
FAKE_LOCAL(cuMemcpy3D_v2_ptds);
FAKE_LOCAL(cuMemcpyAsync);
FAKE_LOCAL(cuMemcpyAsync_ptsz);
FAKE_LOCAL(cuMemcpyDtoDAsync_v2);
FAKE_LOCAL(cuMemcpyDtoDAsync_v2_ptsz);
FAKE_LOCAL(cuMemcpyDtoD_v2);
FAKE_LOCAL(cuMemcpyDtoD_v2_ptds);
FAKE_LOCAL(cuMemcpyDtoHAsync_v2);
FAKE_LOCAL(cuMemcpyDtoHAsync_v2_ptsz);
FAKE_LOCAL(cuMemcpyDtoH_v2);
FAKE_LOCAL(cuMemcpyDtoH_v2_ptds);
FAKE_LOCAL(cuMemcpyHtoDAsync_v2);
FAKE_LOCAL(cuMemcpyHtoDAsync_v2_ptsz);
FAKE_LOCAL(cuMemcpyHtoD_v2);
FAKE_LOCAL(cuMemcpyHtoD_v2_ptds);
FAKE_LOCAL(cuMemcpyPeer);
FAKE_LOCAL(cuMemcpyPeerAsync);
FAKE_LOCAL(cuMemcpyPeerAsync_ptsz);
FAKE_LOCAL(cuMemcpyPeer_ptds);
FAKE_LOCAL(cuMemcpy_ptds);
FAKE_LOCAL(cuMemsetD16Async);
FAKE_LOCAL(cuMemsetD16Async_ptsz);
FAKE_LOCAL(cuMemsetD16_v2);
FAKE_LOCAL(cuMemsetD16_v2_ptds);
FAKE_LOCAL(cuMemsetD2D16Async);
FAKE_LOCAL(cuMemsetD2D16Async_ptsz);
FAKE_LOCAL(cuMemsetD2D16_v2);
FAKE_LOCAL(cuMemsetD2D16_v2_ptds);
FAKE_LOCAL(cuMemsetD2D32Async);
FAKE_LOCAL(cuMemsetD2D32Async_ptsz);
FAKE_LOCAL(cuMemsetD2D32_v2);
FAKE_LOCAL(cuMemsetD2D32_v2_ptds);
FAKE_LOCAL(cuMemsetD2D8Async);
FAKE_LOCAL(cuMemsetD2D8Async_ptsz);
FAKE_LOCAL(cuMemsetD2D8_v2);
FAKE_LOCAL(cuMemsetD2D8_v2_ptds);
FAKE_LOCAL(cuMemsetD32Async);
FAKE_LOCAL(cuMemsetD32Async_ptsz);
FAKE_LOCAL(cuMemsetD32_v2);
FAKE_LOCAL(cuMemsetD32_v2_ptds);
FAKE_LOCAL(cuMemsetD8Async);
FAKE_LOCAL(cuMemsetD8Async_ptsz);
FAKE_LOCAL(cuMemsetD8_v2);
FAKE_LOCAL(cuMemsetD8_v2_ptds);
FAKE_LOCAL(cuModuleGetFunction);
FAKE_LOCAL(cuModuleLoadData);
FAKE_LOCAL(cuPointerGetAttribute);
FAKE_LOCAL(cuProfilerStart);
FAKE_LOCAL(cuProfilerStop);
FAKE_LOCAL(cuStreamBeginCapture);
FAKE_LOCAL(cuStreamBeginCaptureToGraph);
FAKE_LOCAL(cuStreamBeginCaptureToGraph_ptsz);
FAKE_LOCAL(cuStreamBeginCapture_ptsz);
FAKE_LOCAL(cuStreamBeginCapture_v2);
FAKE_LOCAL(cuStreamBeginCapture_v2_ptsz);
FAKE_LOCAL(cuStreamEndCapture);
FAKE_LOCAL(cuStreamEndCapture_ptsz);
FAKE_LOCAL(cuStreamSynchronize);
FAKE_LOCAL(cuStreamSynchronize_ptsz);

#define S(name, ver, fn) { name, ver, 0, (void *)(fn) }
#define PT(name, ver, fn) { name, ver, 1, (void *)(fn) }
/* (request, version) as cudaTypedefs.h's PFN_<request>_v<version>[_ptsz|_ptds] */
static const struct fake_sym fake_syms[] = {
    S("cuInit", 2000, local_cuInit),
    S("cuDriverGetVersion", 2020, local_cuDriverGetVersion),
    S("cuGetProcAddress", 11030, local_cuGetProcAddress),
    S("cuGetProcAddress", 12000, local_cuGetProcAddress_v2),
    S("cuGetErrorString", 6000, local_cuGetErrorString),
    S("cuDeviceGetCount", 2000, local_cuDeviceGetCount),
    S("cuDeviceGet", 2000, local_cuDeviceGet),
    S("cuDeviceGetName", 2000, local_cuDeviceGetName),
    S("cuDeviceTotalMem", 3020, local_cuDeviceTotalMem_v2),
    S("cuDeviceGetAttribute", 2000, local_cuDeviceGetAttribute),
    S("cuDevicePrimaryCtxRetain", 7000, local_cuDevicePrimaryCtxRetain),
    S("cuCtxGetDevice", 2000, local_cuCtxGetDevice),
    S("cuLibraryLoadData", 12000, local_cuLibraryLoadData),
    S("cuLibraryGetKernel", 12000, local_cuLibraryGetKernel),
    S("cuLibraryGetKernelCount", 12040, local_cuLibraryGetKernelCount),
    S("cuLibraryEnumerateKernels", 12040, local_cuLibraryEnumerateKernels),
    S("cuKernelGetName", 12030, local_cuKernelGetName),
    S("cuKernelGetFunction", 12000, local_cuKernelGetFunction),
    S("cuModuleLoadData", 2000, local_cuModuleLoadData),
    S("cuModuleGetFunction", 2000, local_cuModuleGetFunction),
    S("cuFuncGetName", 12030, local_cuFuncGetName),
    /* launches; per-thread variants from 7000, as cudaTypedefs.h's PFN_*_v7000_ptsz */
    S("cuLaunchKernel", 4000, local_cuLaunchKernel),
    PT("cuLaunchKernel", 7000, local_cuLaunchKernel_ptsz),
    S("cuLaunchKernelEx", 11060, local_cuLaunchKernelEx),
    PT("cuLaunchKernelEx", 11060, local_cuLaunchKernelEx_ptsz),
    S("cuLaunchCooperativeKernel", 9000, local_cuLaunchCooperativeKernel),
    PT("cuLaunchCooperativeKernel", 9000, local_cuLaunchCooperativeKernel_ptsz),
    S("cuGraphLaunch", 10000, local_cuGraphLaunch),
    PT("cuGraphLaunch", 10000, local_cuGraphLaunch_ptsz),
    S("cuLaunchHostFunc", 10000, local_cuLaunchHostFunc),
    PT("cuLaunchHostFunc", 10000, local_cuLaunchHostFunc_ptsz),
    S("cuLaunchHostFunc", 13010, fake_launch_host_func_v2),
    /* memory */
    S("cuMemAlloc", 2000, local_cuMemAlloc),
    S("cuMemAlloc", 3020, local_cuMemAlloc_v2),
    S("cuMemFree", 3020, local_cuMemFree_v2),
    S("cuMemAllocAsync", 11020, local_cuMemAllocAsync),
    PT("cuMemAllocAsync", 11020, local_cuMemAllocAsync_ptsz),
    S("cuMemFreeAsync", 11020, local_cuMemFreeAsync),
    PT("cuMemFreeAsync", 11020, local_cuMemFreeAsync_ptsz),
    S("cuMemAllocPitch", 3020, local_cuMemAllocPitch_v2),
    S("cuMemAllocFromPoolAsync", 11020, local_cuMemAllocFromPoolAsync),
    PT("cuMemAllocFromPoolAsync", 11020, local_cuMemAllocFromPoolAsync_ptsz),
    S("cuMemAllocManaged", 6000, local_cuMemAllocManaged),
    S("cuMemAllocHost", 3020, local_cuMemAllocHost_v2),
    S("cuMemHostAlloc", 2020, local_cuMemHostAlloc),
    S("cuMemFreeHost", 2000, local_cuMemFreeHost),
    S("cuPointerGetAttribute", 4000, local_cuPointerGetAttribute),
    S("cuMemCreate", 10020, local_cuMemCreate),
    S("cuMemRelease", 10020, local_cuMemRelease),
    S("cuMemMap", 10020, local_cuMemMap),
    S("cuMemAddressReserve", 10020, local_cuMemAddressReserve),
    S("cuMemAddressFree", 10020, local_cuMemAddressFree),
    S("cuMemGetAllocationGranularity", 10020, local_cuMemGetAllocationGranularity),
    S("cuMemGetInfo", 3020, local_cuMemGetInfo_v2),
    S("cuMemUnmap", 10020, local_cuMemUnmap),
    S("cuArray3DCreate", 3020, local_cuArray3DCreate_v2),
    S("cuArray3DGetDescriptor", 3020, local_cuArray3DGetDescriptor_v2),
    S("cuArrayDestroy", 2000, local_cuArrayDestroy),
    /* copies and sets */
    S("cuMemcpy", 4000, local_cuMemcpy),
    PT("cuMemcpy", 7000, local_cuMemcpy_ptds),
    S("cuMemcpyAsync", 4000, local_cuMemcpyAsync),
    PT("cuMemcpyAsync", 7000, local_cuMemcpyAsync_ptsz),
    S("cuMemcpyHtoD", 3020, local_cuMemcpyHtoD_v2),
    PT("cuMemcpyHtoD", 7000, local_cuMemcpyHtoD_v2_ptds),
    S("cuMemcpyDtoH", 3020, local_cuMemcpyDtoH_v2),
    PT("cuMemcpyDtoH", 7000, local_cuMemcpyDtoH_v2_ptds),
    S("cuMemcpyDtoD", 3020, local_cuMemcpyDtoD_v2),
    PT("cuMemcpyDtoD", 7000, local_cuMemcpyDtoD_v2_ptds),
    S("cuMemcpyHtoDAsync", 3020, local_cuMemcpyHtoDAsync_v2),
    PT("cuMemcpyHtoDAsync", 7000, local_cuMemcpyHtoDAsync_v2_ptsz),
    S("cuMemcpyDtoHAsync", 3020, local_cuMemcpyDtoHAsync_v2),
    PT("cuMemcpyDtoHAsync", 7000, local_cuMemcpyDtoHAsync_v2_ptsz),
    S("cuMemcpyDtoDAsync", 3020, local_cuMemcpyDtoDAsync_v2),
    PT("cuMemcpyDtoDAsync", 7000, local_cuMemcpyDtoDAsync_v2_ptsz),
    S("cuMemcpyPeer", 4000, local_cuMemcpyPeer),
    PT("cuMemcpyPeer", 7000, local_cuMemcpyPeer_ptds),
    S("cuMemcpyPeerAsync", 4000, local_cuMemcpyPeerAsync),
    PT("cuMemcpyPeerAsync", 7000, local_cuMemcpyPeerAsync_ptsz),
    S("cuMemcpy2D", 3020, local_cuMemcpy2D_v2),
    PT("cuMemcpy2D", 7000, local_cuMemcpy2D_v2_ptds),
    S("cuMemcpy2DUnaligned", 3020, local_cuMemcpy2DUnaligned_v2),
    PT("cuMemcpy2DUnaligned", 7000, local_cuMemcpy2DUnaligned_v2_ptds),
    S("cuMemcpy2DAsync", 3020, local_cuMemcpy2DAsync_v2),
    PT("cuMemcpy2DAsync", 7000, local_cuMemcpy2DAsync_v2_ptsz),
    S("cuMemcpy3D", 3020, local_cuMemcpy3D_v2),
    PT("cuMemcpy3D", 7000, local_cuMemcpy3D_v2_ptds),
    S("cuMemcpy3DAsync", 3020, local_cuMemcpy3DAsync_v2),
    PT("cuMemcpy3DAsync", 7000, local_cuMemcpy3DAsync_v2_ptsz),
    S("cuMemcpy3DPeer", 4000, local_cuMemcpy3DPeer),
    PT("cuMemcpy3DPeer", 7000, local_cuMemcpy3DPeer_ptds),
    S("cuMemcpy3DPeerAsync", 4000, local_cuMemcpy3DPeerAsync),
    PT("cuMemcpy3DPeerAsync", 7000, local_cuMemcpy3DPeerAsync_ptsz),
    S("cuMemsetD8", 3020, fake_memsetD8_internal),
    PT("cuMemsetD8", 7000, local_cuMemsetD8_v2_ptds),
    S("cuMemsetD16", 3020, local_cuMemsetD16_v2),
    PT("cuMemsetD16", 7000, local_cuMemsetD16_v2_ptds),
    S("cuMemsetD32", 3020, local_cuMemsetD32_v2),
    PT("cuMemsetD32", 7000, local_cuMemsetD32_v2_ptds),
    S("cuMemsetD8Async", 3020, local_cuMemsetD8Async),
    PT("cuMemsetD8Async", 7000, local_cuMemsetD8Async_ptsz),
    S("cuMemsetD16Async", 3020, local_cuMemsetD16Async),
    PT("cuMemsetD16Async", 7000, local_cuMemsetD16Async_ptsz),
    S("cuMemsetD32Async", 3020, local_cuMemsetD32Async),
    PT("cuMemsetD32Async", 7000, local_cuMemsetD32Async_ptsz),
    S("cuMemsetD2D8", 3020, local_cuMemsetD2D8_v2),
    PT("cuMemsetD2D8", 7000, local_cuMemsetD2D8_v2_ptds),
    S("cuMemsetD2D8Async", 3020, local_cuMemsetD2D8Async),
    PT("cuMemsetD2D8Async", 7000, local_cuMemsetD2D8Async_ptsz),
    S("cuMemsetD2D16", 3020, local_cuMemsetD2D16_v2),
    PT("cuMemsetD2D16", 7000, local_cuMemsetD2D16_v2_ptds),
    S("cuMemsetD2D16Async", 3020, local_cuMemsetD2D16Async),
    PT("cuMemsetD2D16Async", 7000, local_cuMemsetD2D16Async_ptsz),
    S("cuMemsetD2D32", 3020, local_cuMemsetD2D32_v2),
    PT("cuMemsetD2D32", 7000, local_cuMemsetD2D32_v2_ptds),
    S("cuMemsetD2D32Async", 3020, local_cuMemsetD2D32Async),
    PT("cuMemsetD2D32Async", 7000, local_cuMemsetD2D32Async_ptsz),
    /* synchronization, graphs, profiler control */
    S("cuStreamSynchronize", 2000, local_cuStreamSynchronize),
    PT("cuStreamSynchronize", 7000, local_cuStreamSynchronize_ptsz),
    S("cuCtxSynchronize", 2000, local_cuCtxSynchronize),
    S("cuCtxSynchronize", 13000, local_cuCtxSynchronize_v2),
    S("cuEventSynchronize", 2000, local_cuEventSynchronize),
    S("cuGraphCreate", 10000, local_cuGraphCreate),
    S("cuGraphDestroy", 10000, local_cuGraphDestroy),
    S("cuGraphExecDestroy", 10000, local_cuGraphExecDestroy),
    S("cuStreamBeginCapture", 10000, local_cuStreamBeginCapture),
    PT("cuStreamBeginCapture", 10000, local_cuStreamBeginCapture_ptsz),
    S("cuStreamBeginCapture", 10010, local_cuStreamBeginCapture_v2),
    PT("cuStreamBeginCapture", 10010, local_cuStreamBeginCapture_v2_ptsz),
    S("cuStreamBeginCaptureToGraph", 12030, local_cuStreamBeginCaptureToGraph),
    PT("cuStreamBeginCaptureToGraph", 12030, local_cuStreamBeginCaptureToGraph_ptsz),
    S("cuStreamEndCapture", 10000, local_cuStreamEndCapture),
    PT("cuStreamEndCapture", 10000, local_cuStreamEndCapture_ptsz),
    S("cuGraphInstantiate", 10000, local_cuGraphInstantiate),
    S("cuGraphInstantiate", 11000, local_cuGraphInstantiate_v2),
    S("cuGraphInstantiateWithFlags", 11040, local_cuGraphInstantiateWithFlags),
    S("cuGraphInstantiateWithParams", 12000, local_cuGraphInstantiateWithParams),
    PT("cuGraphInstantiateWithParams", 12000, local_cuGraphInstantiateWithParams_ptsz),
    S("cuProfilerStart", 4000, local_cuProfilerStart),
    S("cuProfilerStop", 4000, local_cuProfilerStop),
};
#undef S
#undef PT

/* The variant of "sym" with the highest version <= "version", of the stream
 * class "flags" asks for where the family has one. */
static CUresult fake_lookup(const char *sym, void **pfn, int version, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status)
{
    if (!sym || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    int want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct fake_sym *best = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof fake_syms / sizeof fake_syms[0]; i++) {
        const struct fake_sym *s = &fake_syms[i];
        if (strcmp(s->name, sym) != 0)
            continue;
        known = 1;
        if (s->version > version)
            continue;
        if (!best || (s->per_thread == want_pt && best->per_thread != want_pt) ||
            (s->per_thread == best->per_thread && s->version > best->version))
            best = s;
    }
    *pfn = best ? best->fn : NULL;
    if (status)
        *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                 : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int version, cuuint64_t flags)
{
    return fake_lookup(sym, pfn, version, flags, NULL);
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status)
{
    return fake_lookup(sym, pfn, version, flags, status);
}

/* The same table under a name no interposer knows: how the fake runtime
 * answers cudaGetDriverEntryPoint with FAKE_CUDART_ENTRY=private, as a
 * runtime that resolves through a private channel (cuGetExportTable) would. */
FAKE_EXPORT CUresult fakegpu_get_proc_address(const char *sym, void **pfn, int version, cuuint64_t flags,
                                              CUdriverProcAddressQueryResult *status);
FAKE_EXPORT CUresult fakegpu_get_proc_address(const char *sym, void **pfn, int version, cuuint64_t flags,
                                              CUdriverProcAddressQueryResult *status)
{
    return fake_lookup(sym, pfn, version, flags, status);
}
