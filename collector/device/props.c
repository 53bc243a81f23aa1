/*
 * props.c - DESIGN: device properties from the driver the process has
 * already loaded (loader.c: we never load libcuda, never call
 * cuInit, never touch the runtime: README "Never harming the job"), queried once on the flush
 * thread and kept for the life of the process.  Occupancy uses the
 * toolkit's header-only calculator (cuda_occupancy.h) the way Kineto's
 * DeviceProperties.cpp does: the kernel's registers and static shared
 * memory, no block-size limit, default cache configuration, and the
 * achieved blocks per SM capped by the calculator's maximum.
 */
#include "props.h"
#include "collector/common/loader.h"

#include <cuda.h>
#include <cuda_occupancy.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP_MAX_DEVICES 64

typedef CUresult (*tp_count_fn)(int *);
typedef CUresult (*tp_get_fn)(CUdevice *, int);
typedef CUresult (*tp_name_fn)(char *, int, CUdevice);
typedef CUresult (*tp_mem_fn)(size_t *, CUdevice);
typedef CUresult (*tp_attr_fn)(int *, CUdevice_attribute, CUdevice);

struct tp_driver_api {
    tp_count_fn count;
    tp_get_fn get;
    tp_name_fn name;
    tp_mem_fn mem;
    tp_attr_fn attr;
};

static struct tp_device_prop tp_devs[TP_MAX_DEVICES];
static int tp_ndevs;              /* > 0 once loaded: then never changes */
static pthread_mutex_t tp_device_props_lock = PTHREAD_MUTEX_INITIALIZER;

static int tp_attr(const struct tp_driver_api *api, CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    return api->attr(&v, a, dev) == CUDA_SUCCESS ? v : 0;
}

static void tp_fill(const struct tp_driver_api *api, int ordinal, CUdevice dev, struct tp_device_prop *d)
{
    memset(d, 0, sizeof *d);
    d->id = ordinal;
    if (api->name(d->name, (int)sizeof d->name, dev) != CUDA_SUCCESS)
        d->name[0] = 0;
    d->name[sizeof d->name - 1] = 0;
    size_t mem = 0;
    if (api->mem(&mem, dev) == CUDA_SUCCESS)
        d->total_global_mem = mem;
    d->compute_major = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    d->compute_minor = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    d->max_threads_per_block = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    d->max_threads_per_sm = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    d->regs_per_block = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    d->regs_per_sm = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    d->warp_size = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    d->smem_per_block = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    d->smem_per_sm = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    d->smem_per_block_optin = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    d->reserved_smem_per_block = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
    d->num_sms = tp_attr(api, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
}

typedef CUresult (*tp_pctx_fn)(CUdevice, unsigned int *, int *);

static const char tp_no_driver[] = "no CUDA driver in this process (libcuda not loaded)";

int tp_driver_loaded(char *why, size_t why_size)
{
    static const char *const names[] = { "cuDeviceGetCount" };
    void *fn = NULL;
    if (tp_driver_syms(names, &fn, 1) == 0 && fn)
        return 1;
    snprintf(why, why_size, "%s", tp_no_driver);
    return 0;
}

int tp_driver_ready(int had_context, const char *vis, char *why, size_t why_size)
{
    static const char *const names[] = { "cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxGetState" };
    void *fn[3];
    char dummy[8];
    if (!why || !why_size) {
        why = dummy;
        why_size = sizeof dummy;
    }
    if (tp_driver_syms(names, fn, 3) != 0 || !fn[0]) {
        snprintf(why, why_size, "%s", tp_no_driver);
        return 0;
    }
    int n = 0;
    CUresult rc = ((tp_count_fn)fn[0])(&n);
    int hidden = vis && (!vis[0] || !strncmp(vis, "-1", 2));   /* every device hidden */
    if (rc == CUDA_ERROR_NOT_INITIALIZED && !hidden) {
        snprintf(why, why_size, "CUDA driver not initialized (cuInit not called yet)");
        return 0;
    }
    if (hidden || rc == CUDA_ERROR_NO_DEVICE || (rc == CUDA_SUCCESS && n <= 0)) {
        if (vis)
            snprintf(why, why_size, "no CUDA device visible (CUDA_VISIBLE_DEVICES=\"%.40s\")", vis);
        else
            snprintf(why, why_size, "no CUDA device visible");
        return 0;
    }
    if (rc != CUDA_SUCCESS) {
        snprintf(why, why_size, "CUDA driver unusable (cuDeviceGetCount returned %d)", (int)rc);
        return 0;
    }
    if (had_context)
        return 1;
    for (int i = 0; i < n && fn[1] && fn[2]; i++) {
        CUdevice dev;
        unsigned int flags = 0;
        int active = 0;
        if (((tp_get_fn)fn[1])(&dev, i) == CUDA_SUCCESS &&
            ((tp_pctx_fn)fn[2])(dev, &flags, &active) == CUDA_SUCCESS && active)
            return 1;
    }
    snprintf(why, why_size, "no CUDA context yet (no CUDA call has succeeded)");
    return 0;
}

static void tp_device_props_load(void)
{
    static const char *const names[] = {
        "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceTotalMem_v2",
        "cuDeviceGetAttribute",
    };
    void *fn[5];
    if (tp_driver_syms(names, fn, 5) != 0)
        return;
    struct tp_driver_api api = {
        (tp_count_fn)fn[0], (tp_get_fn)fn[1], (tp_name_fn)fn[2], (tp_mem_fn)fn[3], (tp_attr_fn)fn[4],
    };
    int n = 0;
    tp_ndevs = 0;
    if (api.count && api.get && api.name && api.mem && api.attr && api.count(&n) == CUDA_SUCCESS) {
        for (int i = 0; i < n && tp_ndevs < TP_MAX_DEVICES; i++) {
            CUdevice dev;
            if (api.get(&dev, i) == CUDA_SUCCESS)
                tp_fill(&api, i, dev, &tp_devs[tp_ndevs++]);
        }
    }
}

/* Until a query succeeds (driver loaded, cuInit done) every call asks again;
 * while libcuda is absent that costs one loader callback (tp_driver_syms). */
int tp_device_props_get(const struct tp_device_prop **out)
{
    pthread_mutex_lock(&tp_device_props_lock);
    if (!tp_ndevs)
        tp_device_props_load();
    int n = tp_ndevs;
    pthread_mutex_unlock(&tp_device_props_lock);
    *out = n ? tp_devs : NULL;
    return n;
}

static void tp_occ_device(const struct tp_device_prop *d, cudaOccDeviceProp *p)
{
    memset(p, 0, sizeof *p);
    p->computeMajor = d->compute_major;
    p->computeMinor = d->compute_minor;
    p->maxThreadsPerBlock = d->max_threads_per_block;
    p->maxThreadsPerMultiprocessor = d->max_threads_per_sm;
    p->regsPerBlock = d->regs_per_block;
    p->regsPerMultiprocessor = d->regs_per_sm;
    p->warpSize = d->warp_size;
    p->sharedMemPerBlock = (size_t)d->smem_per_block;
    p->sharedMemPerMultiprocessor = (size_t)d->smem_per_sm;
    p->numSms = d->num_sms;
    p->sharedMemPerBlockOptin = (size_t)d->smem_per_block_optin;
    p->reservedSharedMemPerBlock = (size_t)d->reserved_smem_per_block;
}

double tp_device_props_occupancy(const struct tp_device_prop *d, int registers, int static_smem,
                             int dynamic_smem, int block_threads, double blocks_per_sm)
{
    if (!d || d->max_threads_per_sm <= 0 || block_threads <= 0 || registers < 0 ||
        static_smem < 0 || dynamic_smem < 0)
        return -1;
    cudaOccDeviceProp prop;
    tp_occ_device(d, &prop);
    cudaOccFuncAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.maxThreadsPerBlock = INT_MAX;
    attr.numRegs = registers;
    attr.sharedSizeBytes = (size_t)static_smem;
    attr.partitionedGCConfig = PARTITIONED_GC_OFF;
    attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_DEFAULT;
    attr.maxDynamicSharedSizeBytes = 0;
    cudaOccDeviceState state;   /* what C++'s constructor (Kineto's "{}") sets */
    state.cacheConfig = CACHE_PREFER_NONE;
    state.carveoutConfig = SHAREDMEM_CARVEOUT_DEFAULT;
    cudaOccResult res;
    memset(&res, 0, sizeof res);
    if (cudaOccMaxActiveBlocksPerMultiprocessor(&res, &prop, &attr, &state, block_threads,
                                                (size_t)dynamic_smem) != CUDA_OCC_SUCCESS)
        return -1;
    double blocks = blocks_per_sm;
    if (res.activeBlocksPerMultiprocessor < blocks)
        blocks = res.activeBlocksPerMultiprocessor;
    double pct = 100.0 * blocks * block_threads / d->max_threads_per_sm;
    return pct < 0 ? 0 : pct > 100 ? 100 : pct;
}
