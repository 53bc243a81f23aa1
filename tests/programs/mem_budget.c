/*
 * mem_budget.c - the fakes' device memory budget (FAKE_CUDA_MEM_BUDGET),
 * checked without trainprof by tests/preload/test_fake_memory.py.
 *
 * DESIGN
 * Allocates blocks of S bytes (argv[1], a multiple of 1 MiB; default 3 MiB)
 * through the driver and the runtime in turn - cuMemAlloc_v2, cudaMalloc,
 * cuMemCreate, cudaMallocAsync, cuMemAllocPitch_v2 (1 MiB rows), cudaMallocPitch
 * (1 MiB rows), cuMemAllocAsync, cudaMalloc3D (1 MiB x S/1 MiB x 1), then
 * again from the first - until one fails or 64 were made, printing for each
 *   "alloc I API rc RC last LAST used USED rtused RTUSED"
 * (RC the call's status, LAST what cudaGetLastError then returns, USED
 * total - free from cuMemGetInfo_v2, RTUSED the same from cudaMemGetInfo).
 * Then: memory that is not the device's (cudaMallocManaged, cuMemAllocManaged,
 * cudaMallocHost, cuMemAllocHost_v2, S bytes each) and an address
 * reservation of S (cuMemAddressReserve), each "other API rc RC used
 * USED"; cuMemFree_v2 of the reservation and cuMemAddressFree of it at the
 * wrong size ("bad API rc RC": both must refuse), then the right one; the
 * first block freed and the failed API tried again ("retry API rc RC used
 * USED"); everything freed ("end used USED").  Before anything, "info total
 * T free F", "rtinfo total T free F" and "devtotal T" (cuDeviceTotalMem_v2).
 */
#include <cuda.h>

#include "prog.h"

#define MIB ((size_t)1 << 20)
#define MAX_BLOCKS 64

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
typedef CUresult (*async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*managed_fn)(CUdeviceptr *, size_t, unsigned);
typedef CUresult (*host_fn)(void **, size_t);
typedef CUresult (*free_host_fn)(void *);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*addr_free_fn)(CUdeviceptr, size_t);
typedef CUresult (*info_fn)(size_t *, size_t *);
typedef CUresult (*total_fn)(size_t *, CUdevice);

static info_fn cu_info;

static size_t used(void)
{
    size_t fr = 0, total = 0;
    PROG_CU_CHECK(cu_info(&fr, &total));
    return total - fr;
}

static size_t rt_used(void)
{
    size_t fr = 0, total = 0;
    PROG_CHECK(cudaMemGetInfo(&fr, &total));
    return total - fr;
}

enum api { A_CU, A_RT, A_CREATE, A_RT_ASYNC, A_CU_PITCH, A_RT_PITCH, A_CU_ASYNC, A_RT_3D, A_COUNT };
static const char *const api_names[A_COUNT] = {
    "cuMemAlloc_v2", "cudaMalloc", "cuMemCreate", "cudaMallocAsync",
    "cuMemAllocPitch_v2", "cudaMallocPitch", "cuMemAllocAsync", "cudaMalloc3D",
};

struct drv {
    alloc_fn alloc;
    free_fn free;
    pitch_fn pitch;
    async_fn async;
    create_fn create;
    release_fn release;
};

/* One allocation of "s" bytes through "a": its status (CUresult or
 * cudaError_t, both 2 for out of memory), the block in *p. */
static int alloc_one(const struct drv *d, enum api a, size_t s, uintptr_t *p)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUdeviceptr dp = 0;
    CUmemGenericAllocationHandle h = 0;
    void *rp = NULL;
    size_t pitch = 0;
    struct cudaPitchedPtr pp;
    struct cudaExtent ext = { MIB, s / MIB, 1 };
    int rc;
    switch (a) {
    case A_CU: rc = d->alloc(&dp, s); break;
    case A_RT: rc = cudaMalloc(&rp, s); break;
    case A_CREATE: rc = d->create(&h, s, &prop, 0); dp = (CUdeviceptr)h; break;
    case A_RT_ASYNC: rc = cudaMallocAsync(&rp, s, 0); break;
    case A_CU_PITCH: rc = d->pitch(&dp, &pitch, MIB, s / MIB, 4); break;
    case A_RT_PITCH: rc = cudaMallocPitch(&rp, &pitch, MIB, s / MIB); break;
    case A_CU_ASYNC: rc = d->async(&dp, s, 0); break;
    default: rc = cudaMalloc3D(&pp, ext); rp = pp.ptr; break;
    }
    *p = dp ? (uintptr_t)dp : (uintptr_t)rp;
    return rc;
}

static void free_one(const struct drv *d, enum api a, uintptr_t p)
{
    switch (a) {
    case A_CU: case A_CU_PITCH: PROG_CU_CHECK(d->free((CUdeviceptr)p)); break;
    case A_CU_ASYNC: PROG_CU_CHECK(d->free((CUdeviceptr)p)); break;
    case A_CREATE: PROG_CU_CHECK(d->release((CUmemGenericAllocationHandle)p)); break;
    case A_RT_ASYNC: PROG_CHECK(cudaFreeAsync((void *)p, 0)); break;
    default: PROG_CHECK(cudaFree((void *)p)); break;
    }
}

int main(int argc, char **argv)
{
    size_t s = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 3 * MIB;
    if (!s || s % MIB) {
        fprintf(stderr, "size must be a multiple of 1 MiB\n");
        return 64;
    }
    void *h = prog_open_driver();
    if (!h)
        return 2;
    init_fn cu_init = (init_fn)prog_sym(h, "cuInit");
    struct drv d = {
        (alloc_fn)prog_sym(h, "cuMemAlloc_v2"), (free_fn)prog_sym(h, "cuMemFree_v2"),
        (pitch_fn)prog_sym(h, "cuMemAllocPitch_v2"), (async_fn)prog_sym(h, "cuMemAllocAsync"),
        (create_fn)prog_sym(h, "cuMemCreate"), (release_fn)prog_sym(h, "cuMemRelease"),
    };
    managed_fn cu_managed = (managed_fn)prog_sym(h, "cuMemAllocManaged");
    host_fn cu_host = (host_fn)prog_sym(h, "cuMemAllocHost_v2");
    free_host_fn cu_free_host = (free_host_fn)prog_sym(h, "cuMemFreeHost");
    reserve_fn cu_reserve = (reserve_fn)prog_sym(h, "cuMemAddressReserve");
    addr_free_fn cu_addr_free = (addr_free_fn)prog_sym(h, "cuMemAddressFree");
    total_fn cu_total = (total_fn)prog_sym(h, "cuDeviceTotalMem_v2");
    cu_info = (info_fn)prog_sym(h, "cuMemGetInfo_v2");
    PROG_CU_CHECK(cu_init(0));

    size_t fr, total;
    PROG_CU_CHECK(cu_info(&fr, &total));
    printf("info total %zu free %zu\n", total, fr);
    PROG_CHECK(cudaMemGetInfo(&fr, &total));
    printf("rtinfo total %zu free %zu\n", total, fr);
    PROG_CU_CHECK(cu_total(&total, 0));
    printf("devtotal %zu\n", total);

    uintptr_t blocks[MAX_BLOCKS];
    enum api apis[MAX_BLOCKS];
    int n = 0, failed = -1;
    for (int i = 0; i < MAX_BLOCKS; i++) {
        enum api a = (enum api)(i % A_COUNT);
        uintptr_t p = 0;
        int rc = alloc_one(&d, a, s, &p);
        int last = (int)cudaGetLastError();
        printf("alloc %d %s rc %d last %d used %zu rtused %zu\n", i, api_names[a], rc, last, used(), rt_used());
        if (rc != 0) {
            failed = (int)a;
            break;
        }
        blocks[n] = p;
        apis[n++] = a;
    }

    /* memory that is not the device's */
    void *rm = NULL, *rh = NULL, *ch = NULL;
    CUdeviceptr cm = 0, va = 0;
    int r[5];
    r[0] = (int)cudaMallocManaged(&rm, s, cudaMemAttachGlobal);
    printf("other cudaMallocManaged rc %d used %zu\n", r[0], used());
    r[1] = (int)cu_managed(&cm, s, CU_MEM_ATTACH_GLOBAL);
    printf("other cuMemAllocManaged rc %d used %zu\n", r[1], used());
    r[2] = (int)cudaMallocHost(&rh, s);
    printf("other cudaMallocHost rc %d used %zu\n", r[2], used());
    r[3] = (int)cu_host(&ch, s);
    printf("other cuMemAllocHost_v2 rc %d used %zu\n", r[3], used());
    r[4] = (int)cu_reserve(&va, s, 0, 0, 0);
    printf("other cuMemAddressReserve rc %d used %zu\n", r[4], used());
    cudaGetLastError();
    if (r[4] == 0) {
        printf("bad cuMemFree_v2 rc %d\n", (int)d.free(va));
        printf("bad cuMemAddressFree rc %d\n", (int)cu_addr_free(va, s + MIB));
        PROG_CU_CHECK(cu_addr_free(va, s));
    }
    if (r[0] == 0)
        PROG_CHECK(cudaFree(rm));
    if (r[1] == 0)
        PROG_CU_CHECK(d.free(cm));
    if (r[2] == 0)
        PROG_CHECK(cudaFreeHost(rh));
    if (r[3] == 0)
        PROG_CU_CHECK(cu_free_host(ch));

    if (failed >= 0 && n > 0) {
        free_one(&d, apis[0], blocks[0]);
        uintptr_t p = 0;
        int rc = alloc_one(&d, (enum api)failed, s, &p);
        printf("retry %s rc %d used %zu\n", api_names[failed], rc, used());
        if (rc == 0) {
            blocks[0] = p;
            apis[0] = (enum api)failed;
        } else {
            blocks[0] = 0;
        }
    }
    for (int i = 0; i < n; i++)
        if (blocks[i])
            free_one(&d, apis[i], blocks[i]);
    printf("end used %zu\n", used());
    return 0;
}
