/*
 * mem_calls.c - a known sequence of allocations and frees over five steps,
 * for the memory timeline (tests/preload/test_memory.py).
 *
 * Steps end with trainprof_step().  With TRAINPROF_SCHEDULE=wait=1,warmup=1,
 * active=2 steps 2 and 3 record:
 *   step 0: cudaMalloc A 1 MiB, cudaMallocHost H 4096        (before the window)
 *   step 1: cudaMalloc B 2 MiB                                (warmup)
 *   step 2: cudaMalloc C 4096; cudaMalloc 1 GiB (fails with
 *           FAKE_CUDA_OOM_BYTES below it); cudaFree(NULL); cudaFree(A);
 *           cudaMallocManaged M 8192; cudaHostAlloc H2 16384;
 *           cudaMallocPitch P 100 x 4 (pitch 512: 2048 bytes);
 *           cudaMalloc3D Q 100 x 4 x 2 (4096 bytes); cudaMallocAsync S 65536,
 *           cudaFreeAsync S
 *   step 3: driver cuMemAlloc_v2 D 131072, cuMemFree_v2 D; VMM cuMemCreate
 *           2 MiB on device 0, cuMemMap, cuMemUnmap, cuMemRelease;
 *           cudaFree(C), cudaFreeHost(H2)
 *   step 4: everything else freed                             (after it)
 * The driver is reached as the runtime does (dlopen libcuda.so.1, dlsym on
 * its handle).  stdout is the same with and without the preload; stderr
 * names the addresses ("addr NAME 0x...") for the test to compare.
 */
#include <cuda.h>

#include "prog.h"

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);

static void show(const char *name, const void *p)
{
    fprintf(stderr, "addr %s 0x%llx\n", name, (unsigned long long)(uintptr_t)p);
}

int main(void)
{
    void *drv = prog_open_driver();
    if (!drv)
        return 2;
    init_fn cu_init = (init_fn)prog_sym(drv, "cuInit");
    alloc_fn cu_alloc = (alloc_fn)prog_sym(drv, "cuMemAlloc_v2");
    free_fn cu_free = (free_fn)prog_sym(drv, "cuMemFree_v2");
    create_fn cu_create = (create_fn)prog_sym(drv, "cuMemCreate");
    release_fn cu_release = (release_fn)prog_sym(drv, "cuMemRelease");
    map_fn cu_map = (map_fn)prog_sym(drv, "cuMemMap");
    unmap_fn cu_unmap = (unmap_fn)prog_sym(drv, "cuMemUnmap");
    PROG_CU_CHECK(cu_init(0));

    /* step 0 */
    void *a, *h, *b, *c, *big = NULL, *m, *h2, *p, *s;
    PROG_CHECK(cudaMalloc(&a, 1 << 20));
    PROG_CHECK(cudaMallocHost(&h, 4096));
    show("A", a);
    show("H", h);
    tp_call_step();

    /* step 1 */
    PROG_CHECK(cudaMalloc(&b, 2 << 20));
    show("B", b);
    tp_call_step();

    /* step 2 */
    PROG_CHECK(cudaMalloc(&c, 4096));
    show("C", c);
    cudaError_t oom = cudaMalloc(&big, (size_t)1 << 30);
    printf("1 GiB cudaMalloc: %s\n", oom == cudaErrorMemoryAllocation ? "out of memory" : "succeeded");
    if (oom == cudaSuccess)
        PROG_CHECK(cudaFree(big));
    cudaGetLastError();
    PROG_CHECK(cudaFree(NULL));
    PROG_CHECK(cudaFree(a));
    PROG_CHECK(cudaMallocManaged(&m, 8192, cudaMemAttachGlobal));
    show("M", m);
    PROG_CHECK(cudaHostAlloc(&h2, 16384, cudaHostAllocDefault));
    show("H2", h2);
    size_t pitch = 0;
    PROG_CHECK(cudaMallocPitch(&p, &pitch, 100, 4));
    show("P", p);
    struct cudaPitchedPtr q;
    struct cudaExtent ext = { 100, 4, 2 };
    PROG_CHECK(cudaMalloc3D(&q, ext));
    show("Q", q.ptr);
    PROG_CHECK(cudaMallocAsync(&s, 65536, 0));
    show("S", s);
    PROG_CHECK(cudaFreeAsync(s, 0));
    printf("pitch %zu, 3D pitch %zu\n", pitch, q.pitch);
    tp_call_step();

    /* step 3 */
    CUdeviceptr d = 0;
    PROG_CU_CHECK(cu_alloc(&d, 131072));
    show("D", (void *)(uintptr_t)d);
    PROG_CU_CHECK(cu_free(d));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle vh = 0;
    PROG_CU_CHECK(cu_create(&vh, 2 << 20, &prop, 0));
    show("V", (void *)(uintptr_t)vh);
    PROG_CU_CHECK(cu_map((CUdeviceptr)vh, 2 << 20, 0, vh, 0));
    PROG_CU_CHECK(cu_unmap((CUdeviceptr)vh, 2 << 20));
    PROG_CU_CHECK(cu_release(vh));
    PROG_CHECK(cudaFree(c));
    PROG_CHECK(cudaFreeHost(h2));
    tp_call_step();

    /* step 4 */
    PROG_CHECK(cudaFree(b));
    PROG_CHECK(cudaFree(m));
    PROG_CHECK(cudaFree(p));
    PROG_CHECK(cudaFree(q.ptr));
    PROG_CHECK(cudaFreeHost(h));
    tp_call_step();
    printf("done\n");
    return 0;
}
