/*
 * driver_all.c - calls every entry point of collector/record/apis/cuda.def once,
 * each through the pointer a cuGetProcAddress_v2 lookup returns for it.
 *
 * DESIGN
 * The driver counterpart of all_apis.c.  It reaches libcuda.so.1 the way
 * cudart does (dlopen, one dlsym of cuGetProcAddress_v2, the self-lookup at
 * 12000) and asks for each variant by (request, version, flags) as NVIDIA's
 * cudaTypedefs.h names it: PFN_<request>_v<version>, per-thread variants
 * with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM at 7000 (or their own
 * version where it is higher).  Every call succeeds and prints one line,
 * "<variant> <CUresult>", the variant being the exported name NVIDIA's
 * driver answers that lookup with; a test checks that the trace holds
 * exactly one cuda_driver event of each name, with the record of its
 * form.  Then trainprof_step().  The output is the same with and without
 * the library.
 */
#define _GNU_SOURCE
#include <cuda.h>
#undef cuGetProcAddress   /* cuda.h: cuGetProcAddress_v2 */

#include "prog.h"

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static gpa2_fn gpa2;
static int bad;

static void *need(const char *name, int version, int per_thread)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = -1;
    CUresult rc = gpa2(name, &p, version, per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st);
    if (rc != CUDA_SUCCESS || !p || st != CU_GET_PROC_ADDRESS_SUCCESS) {
        fprintf(stderr, "lookup %s@%d pt %d failed: %d status %d\n", name, version, per_thread, rc, st);
        exit(3);
    }
    return p;
}

/* The function type of a lookup: __typeof of cuda.h's declaration. */
#define GET(fn, req, ver, pt) ((__typeof__(&fn))need(req, ver, pt))
#define CALL(variant, expr) do { CUresult rc_ = (expr); printf("%s %d\n", variant, (int)rc_); \
                                 if (rc_ != CUDA_SUCCESS) bad++; } while (0)

static const char image[] = "fakecubin _Z6matmulPfS_S_i";

static void host_fn(void *ud)
{
    ++*(int *)ud;
}

int main(void)
{
    void *h = prog_open_driver();
    if (!h || !(gpa2 = (gpa2_fn)dlsym(h, "cuGetProcAddress_v2")))
        return 2;
    gpa2 = (gpa2_fn)need("cuGetProcAddress", 12000, 0);
    PROG_CU_CHECK(GET(cuInit, "cuInit", 2000, 0)(0));
    CUcontext ctx;
    PROG_CU_CHECK(GET(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0)(&ctx, 0));
    CUlibrary lib;
    CUkernel k;
    PROG_CU_CHECK(GET(cuLibraryLoadData, "cuLibraryLoadData", 12000, 0)(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    PROG_CU_CHECK(GET(cuLibraryGetKernel, "cuLibraryGetKernel", 12000, 0)(&k, lib, "_Z6matmulPfS_S_i"));
    CUfunction f = (CUfunction)k;
    CUgraph g;
    CUgraphExec ge;
    PROG_CU_CHECK(GET(cuGraphCreate, "cuGraphCreate", 10000, 0)(&g, 0));
    PROG_CU_CHECK(GET(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040, 0)(&ge, g, 0));
    CUstream s = (CUstream)(uintptr_t)0x5a;      /* the fake takes any handle */
    CUstream pts = CU_STREAM_PER_THREAD;

    /* launches */
    CALL("cuLaunchKernel", GET(cuLaunchKernel, "cuLaunchKernel", 4000, 0)(f, 4, 2, 1, 64, 2, 1, 128, s, NULL, NULL));
    CALL("cuLaunchKernel_ptsz", GET(cuLaunchKernel, "cuLaunchKernel", 7000, 1)(f, 4, 2, 1, 64, 2, 1, 128, pts, NULL, NULL));
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 5, cfg.gridDimY = 1, cfg.gridDimZ = 1;
    cfg.blockDimX = 96, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.sharedMemBytes = 1024;
    cfg.hStream = s;
    CALL("cuLaunchKernelEx", GET(cuLaunchKernelEx, "cuLaunchKernelEx", 11060, 0)(&cfg, f, NULL, NULL));
    cfg.hStream = pts;
    CALL("cuLaunchKernelEx_ptsz", GET(cuLaunchKernelEx, "cuLaunchKernelEx", 11060, 1)(&cfg, f, NULL, NULL));
    CALL("cuLaunchCooperativeKernel",
         GET(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 9000, 0)(f, 4, 2, 1, 64, 2, 1, 0, s, NULL));
    CALL("cuLaunchCooperativeKernel_ptsz",
         GET(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 9000, 1)(f, 4, 2, 1, 64, 2, 1, 0, pts, NULL));
    CALL("cuGraphLaunch", GET(cuGraphLaunch, "cuGraphLaunch", 10000, 0)(ge, s));
    CALL("cuGraphLaunch_ptsz", GET(cuGraphLaunch, "cuGraphLaunch", 10000, 1)(ge, pts));

    /* allocation */
    CUdeviceptr d, d2, a;
    size_t pitch = 0;
    void *hp = NULL;
    CALL("cuMemAlloc_v2", GET(cuMemAlloc_v2, "cuMemAlloc", 3020, 0)(&d, 4096));
    CALL("cuMemAllocPitch_v2", GET(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0)(&d2, &pitch, 100, 16, 4));
    CALL("cuMemAllocAsync", GET(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0)(&a, 512, s));
    CALL("cuMemFreeAsync", GET(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0)(a, s));
    CALL("cuMemAllocAsync_ptsz", GET(cuMemAllocAsync, "cuMemAllocAsync", 11020, 1)(&a, 512, pts));
    CALL("cuMemFreeAsync_ptsz", GET(cuMemFreeAsync, "cuMemFreeAsync", 11020, 1)(a, pts));
    CALL("cuMemAllocFromPoolAsync",
         GET(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0)(&a, 256, (CUmemoryPool)0, s));
    CALL("cuMemFree_v2", GET(cuMemFree_v2, "cuMemFree", 3020, 0)(a));
    CALL("cuMemAllocFromPoolAsync_ptsz",
         GET(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 1)(&a, 256, (CUmemoryPool)0, pts));
    CALL("cuMemFree_v2", GET(cuMemFree_v2, "cuMemFree", 3020, 0)(a));
    CALL("cuMemAllocManaged", GET(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0)(&a, 256, CU_MEM_ATTACH_GLOBAL));
    CALL("cuMemFree_v2", GET(cuMemFree_v2, "cuMemFree", 3020, 0)(a));
    CALL("cuMemHostAlloc", GET(cuMemHostAlloc, "cuMemHostAlloc", 2020, 0)(&hp, 256, 0));
    CALL("cuMemFreeHost", GET(cuMemFreeHost, "cuMemFreeHost", 2000, 0)(hp));
    CALL("cuMemAllocHost_v2", GET(cuMemAllocHost_v2, "cuMemAllocHost", 3020, 0)(&hp, 4096));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle vh;
    CALL("cuMemCreate", GET(cuMemCreate, "cuMemCreate", 10020, 0)(&vh, 2048, &prop, 0));
    CALL("cuMemMap", GET(cuMemMap, "cuMemMap", 10020, 0)((CUdeviceptr)vh, 2048, 0, vh, 0));
    CALL("cuMemUnmap", GET(cuMemUnmap, "cuMemUnmap", 10020, 0)((CUdeviceptr)vh, 2048));
    CALL("cuMemRelease", GET(cuMemRelease, "cuMemRelease", 10020, 0)(vh));

    /* copies: d and d2 are device memory, hp host memory */
    unsigned char *host = hp;
    for (int i = 0; i < 4096; i++)
        host[i] = (unsigned char)(i * 13);
    CALL("cuMemcpy", GET(cuMemcpy, "cuMemcpy", 4000, 0)(d2, d, 4096));
    CALL("cuMemcpy_ptds", GET(cuMemcpy, "cuMemcpy", 7000, 1)(d2, d, 2048));
    CALL("cuMemcpyAsync", GET(cuMemcpyAsync, "cuMemcpyAsync", 4000, 0)(d2, d, 1024, s));
    CALL("cuMemcpyAsync_ptsz", GET(cuMemcpyAsync, "cuMemcpyAsync", 7000, 1)(d2, d, 512, pts));
    CALL("cuMemcpyHtoD_v2", GET(cuMemcpyHtoD_v2, "cuMemcpyHtoD", 3020, 0)(d, host, 4096));
    CALL("cuMemcpyHtoD_v2_ptds", GET(cuMemcpyHtoD_v2, "cuMemcpyHtoD", 7000, 1)(d, host, 2048));
    CALL("cuMemcpyDtoH_v2", GET(cuMemcpyDtoH_v2, "cuMemcpyDtoH", 3020, 0)(host, d, 4096));
    CALL("cuMemcpyDtoH_v2_ptds", GET(cuMemcpyDtoH_v2, "cuMemcpyDtoH", 7000, 1)(host, d, 2048));
    CALL("cuMemcpyDtoD_v2", GET(cuMemcpyDtoD_v2, "cuMemcpyDtoD", 3020, 0)(d2, d, 1024));
    CALL("cuMemcpyDtoD_v2_ptds", GET(cuMemcpyDtoD_v2, "cuMemcpyDtoD", 7000, 1)(d2, d, 512));
    CALL("cuMemcpyHtoDAsync_v2", GET(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync", 3020, 0)(d, host, 256, s));
    CALL("cuMemcpyHtoDAsync_v2_ptsz", GET(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync", 7000, 1)(d, host, 128, pts));
    CALL("cuMemcpyDtoHAsync_v2", GET(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", 3020, 0)(host, d, 256, s));
    CALL("cuMemcpyDtoHAsync_v2_ptsz", GET(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", 7000, 1)(host, d, 128, pts));
    CALL("cuMemcpyDtoDAsync_v2", GET(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync", 3020, 0)(d2, d, 256, s));
    CALL("cuMemcpyDtoDAsync_v2_ptsz", GET(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync", 7000, 1)(d2, d, 128, pts));
    CALL("cuMemcpyPeer", GET(cuMemcpyPeer, "cuMemcpyPeer", 4000, 0)(d2, ctx, d, ctx, 1024));
    CALL("cuMemcpyPeer_ptds", GET(cuMemcpyPeer, "cuMemcpyPeer", 7000, 1)(d2, ctx, d, ctx, 512));
    CALL("cuMemcpyPeerAsync", GET(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", 4000, 0)(d2, ctx, d, ctx, 256, s));
    CALL("cuMemcpyPeerAsync_ptsz", GET(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", 7000, 1)(d2, ctx, d, ctx, 128, pts));
    CUDA_MEMCPY2D c2;     /* 32 x 8 bytes, host (pitch 64) to device (pitch 128) */
    memset(&c2, 0, sizeof c2);
    c2.srcMemoryType = CU_MEMORYTYPE_HOST, c2.srcHost = host, c2.srcPitch = 64;
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE, c2.dstDevice = d2, c2.dstPitch = 128;
    c2.WidthInBytes = 32, c2.Height = 8;
    CALL("cuMemcpy2D_v2", GET(cuMemcpy2D_v2, "cuMemcpy2D", 3020, 0)(&c2));
    CALL("cuMemcpy2D_v2_ptds", GET(cuMemcpy2D_v2, "cuMemcpy2D", 7000, 1)(&c2));
    CALL("cuMemcpy2DUnaligned_v2", GET(cuMemcpy2DUnaligned_v2, "cuMemcpy2DUnaligned", 3020, 0)(&c2));
    CALL("cuMemcpy2DUnaligned_v2_ptds", GET(cuMemcpy2DUnaligned_v2, "cuMemcpy2DUnaligned", 7000, 1)(&c2));
    CALL("cuMemcpy2DAsync_v2", GET(cuMemcpy2DAsync_v2, "cuMemcpy2DAsync", 3020, 0)(&c2, s));
    CALL("cuMemcpy2DAsync_v2_ptsz", GET(cuMemcpy2DAsync_v2, "cuMemcpy2DAsync", 7000, 1)(&c2, pts));
    CUDA_MEMCPY3D c3;     /* 16 x 4 x 2 bytes, device to host */
    memset(&c3, 0, sizeof c3);
    c3.srcMemoryType = CU_MEMORYTYPE_DEVICE, c3.srcDevice = d, c3.srcPitch = 64, c3.srcHeight = 8;
    c3.dstMemoryType = CU_MEMORYTYPE_HOST, c3.dstHost = host, c3.dstPitch = 32, c3.dstHeight = 4;
    c3.WidthInBytes = 16, c3.Height = 4, c3.Depth = 2;
    CALL("cuMemcpy3D_v2", GET(cuMemcpy3D_v2, "cuMemcpy3D", 3020, 0)(&c3));
    CALL("cuMemcpy3D_v2_ptds", GET(cuMemcpy3D_v2, "cuMemcpy3D", 7000, 1)(&c3));
    CALL("cuMemcpy3DAsync_v2", GET(cuMemcpy3DAsync_v2, "cuMemcpy3DAsync", 3020, 0)(&c3, s));
    CALL("cuMemcpy3DAsync_v2_ptsz", GET(cuMemcpy3DAsync_v2, "cuMemcpy3DAsync", 7000, 1)(&c3, pts));
    CUDA_MEMCPY3D_PEER cp;   /* 16 x 4 x 2 bytes, device to device */
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = CU_MEMORYTYPE_DEVICE, cp.srcDevice = d, cp.srcContext = ctx, cp.srcPitch = 64, cp.srcHeight = 8;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE, cp.dstDevice = d2, cp.dstContext = ctx, cp.dstPitch = 64, cp.dstHeight = 8;
    cp.WidthInBytes = 16, cp.Height = 4, cp.Depth = 2;
    CALL("cuMemcpy3DPeer", GET(cuMemcpy3DPeer, "cuMemcpy3DPeer", 4000, 0)(&cp));
    CALL("cuMemcpy3DPeer_ptds", GET(cuMemcpy3DPeer, "cuMemcpy3DPeer", 7000, 1)(&cp));
    CALL("cuMemcpy3DPeerAsync", GET(cuMemcpy3DPeerAsync, "cuMemcpy3DPeerAsync", 4000, 0)(&cp, s));
    CALL("cuMemcpy3DPeerAsync_ptsz", GET(cuMemcpy3DPeerAsync, "cuMemcpy3DPeerAsync", 7000, 1)(&cp, pts));

    /* sets: "n" elements, or w x h elements in rows 256 bytes apart */
    CALL("cuMemsetD8_v2", GET(cuMemsetD8_v2, "cuMemsetD8", 3020, 0)(d, 1, 64));
    CALL("cuMemsetD8_v2_ptds", GET(cuMemsetD8_v2, "cuMemsetD8", 7000, 1)(d, 2, 64));
    CALL("cuMemsetD16_v2", GET(cuMemsetD16_v2, "cuMemsetD16", 3020, 0)(d, 3, 64));
    CALL("cuMemsetD16_v2_ptds", GET(cuMemsetD16_v2, "cuMemsetD16", 7000, 1)(d, 4, 64));
    CALL("cuMemsetD32_v2", GET(cuMemsetD32_v2, "cuMemsetD32", 3020, 0)(d, 5, 64));
    CALL("cuMemsetD32_v2_ptds", GET(cuMemsetD32_v2, "cuMemsetD32", 7000, 1)(d, 6, 64));
    CALL("cuMemsetD8Async", GET(cuMemsetD8Async, "cuMemsetD8Async", 3020, 0)(d, 7, 64, s));
    CALL("cuMemsetD8Async_ptsz", GET(cuMemsetD8Async, "cuMemsetD8Async", 7000, 1)(d, 8, 64, pts));
    CALL("cuMemsetD16Async", GET(cuMemsetD16Async, "cuMemsetD16Async", 3020, 0)(d, 9, 64, s));
    CALL("cuMemsetD16Async_ptsz", GET(cuMemsetD16Async, "cuMemsetD16Async", 7000, 1)(d, 10, 64, pts));
    CALL("cuMemsetD32Async", GET(cuMemsetD32Async, "cuMemsetD32Async", 3020, 0)(d, 11, 64, s));
    CALL("cuMemsetD32Async_ptsz", GET(cuMemsetD32Async, "cuMemsetD32Async", 7000, 1)(d, 12, 64, pts));
    CALL("cuMemsetD2D8_v2", GET(cuMemsetD2D8_v2, "cuMemsetD2D8", 3020, 0)(d, 256, 13, 16, 4));
    CALL("cuMemsetD2D8_v2_ptds", GET(cuMemsetD2D8_v2, "cuMemsetD2D8", 7000, 1)(d, 256, 14, 16, 4));
    CALL("cuMemsetD2D16_v2", GET(cuMemsetD2D16_v2, "cuMemsetD2D16", 3020, 0)(d, 256, 15, 16, 4));
    CALL("cuMemsetD2D16_v2_ptds", GET(cuMemsetD2D16_v2, "cuMemsetD2D16", 7000, 1)(d, 256, 16, 16, 4));
    CALL("cuMemsetD2D32_v2", GET(cuMemsetD2D32_v2, "cuMemsetD2D32", 3020, 0)(d, 256, 17, 16, 4));
    CALL("cuMemsetD2D32_v2_ptds", GET(cuMemsetD2D32_v2, "cuMemsetD2D32", 7000, 1)(d, 256, 18, 16, 4));
    CALL("cuMemsetD2D8Async", GET(cuMemsetD2D8Async, "cuMemsetD2D8Async", 3020, 0)(d, 256, 19, 16, 4, s));
    CALL("cuMemsetD2D8Async_ptsz", GET(cuMemsetD2D8Async, "cuMemsetD2D8Async", 7000, 1)(d, 256, 20, 16, 4, pts));
    CALL("cuMemsetD2D16Async", GET(cuMemsetD2D16Async, "cuMemsetD2D16Async", 3020, 0)(d, 256, 21, 16, 4, s));
    CALL("cuMemsetD2D16Async_ptsz",
         GET(cuMemsetD2D16Async, "cuMemsetD2D16Async", 7000, 1)(d, 256, 22, 16, 4, pts));
    CALL("cuMemsetD2D32Async", GET(cuMemsetD2D32Async, "cuMemsetD2D32Async", 3020, 0)(d, 256, 23, 16, 4, s));
    CALL("cuMemsetD2D32Async_ptsz",
         GET(cuMemsetD2D32Async, "cuMemsetD2D32Async", 7000, 1)(d, 256, 24, 16, 4, pts));

    /* host functions, synchronization, profiler control */
    int ran = 0;
    CALL("cuLaunchHostFunc", GET(cuLaunchHostFunc, "cuLaunchHostFunc", 10000, 0)(s, host_fn, &ran));
    CALL("cuLaunchHostFunc_ptsz", GET(cuLaunchHostFunc, "cuLaunchHostFunc", 10000, 1)(pts, host_fn, &ran));
    CALL("cuStreamSynchronize", GET(cuStreamSynchronize, "cuStreamSynchronize", 2000, 0)(s));
    CALL("cuStreamSynchronize_ptsz", GET(cuStreamSynchronize, "cuStreamSynchronize", 7000, 1)(pts));
    CALL("cuEventSynchronize", GET(cuEventSynchronize, "cuEventSynchronize", 2000, 0)((CUevent)(uintptr_t)0xe7));
    CALL("cuCtxSynchronize", ((CUresult (*)(void))need("cuCtxSynchronize", 2000, 0))());
    CALL("cuCtxSynchronize_v2", GET(cuCtxSynchronize_v2, "cuCtxSynchronize", 13000, 0)(ctx));
    CALL("cuProfilerStart", ((CUresult (*)(void))need("cuProfilerStart", 4000, 0))());
    CALL("cuProfilerStop", ((CUresult (*)(void))need("cuProfilerStop", 4000, 0))());

    CALL("cuMemFree_v2", GET(cuMemFree_v2, "cuMemFree", 3020, 0)(d2));
    CALL("cuMemFree_v2", GET(cuMemFree_v2, "cuMemFree", 3020, 0)(d));
    unsigned sum = 0;
    for (int i = 0; i < 4096; i++)
        sum = sum * 31 + host[i];
    CALL("cuMemFreeHost", GET(cuMemFreeHost, "cuMemFreeHost", 2000, 0)(hp));
    printf("host functions run %d, checksum %08x\n", ran, sum);
    tp_call_step();
    printf("failed calls %d\n", bad);
    return bad ? 1 : 0;
}
