/*
 * all_apis.c - calls every entry point of collector/record/apis/cudart.def once.
 *
 * DESIGN
 * One step that makes each intercepted runtime call exactly once, in the
 * order of collector/record/apis/cudart.def, all succeeding, then trainprof_step().  A test
 * checks that the trace holds exactly one cuda_runtime event per entry point
 * with the name called, and the launch details of every launch form
 * (stub, cudaKernel_t, launch config).  Prints one line per call with its
 * result so stdout can be compared with and without the library.
 */
#include <cuda_profiler_api.h>

#include "prog.h"

/* Forms the C headers declare only in per-thread-default-stream mode. */
cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sm,
                                  cudaStream_t s);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **a, size_t sm,
                                    cudaStream_t s);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **a);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *f, dim3 g, dim3 b, void **a,
                                             size_t sm, cudaStream_t s);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t s);
cudaError_t cudaMemcpy_ptds(void *d, const void *src, size_t n, enum cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync_ptsz(void *d, const void *src, size_t n, enum cudaMemcpyKind k,
                                 cudaStream_t s);
cudaError_t cudaMemset_ptds(void *d, int v, size_t n);
cudaError_t cudaMemsetAsync_ptsz(void *d, int v, size_t n, cudaStream_t s);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int fl);
cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s);
cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p);
cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t s);
cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms *p);
cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms *p, cudaStream_t s);
cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *d, const void *const *s, const size_t *n, size_t count,
                                      struct cudaMemcpyAttributes *a, size_t *ai, size_t na, cudaStream_t st);
cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t n, struct cudaMemcpy3DBatchOp *ops, unsigned long long flags,
                                        cudaStream_t st);
cudaError_t cudaMemset3D_ptds(struct cudaPitchedPtr p, int v, struct cudaExtent e);
cudaError_t cudaMemset3DAsync_ptsz(struct cudaPitchedPtr p, int v, struct cudaExtent e, cudaStream_t st);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int fl);
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *ud);
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void *ud, unsigned int fl);

#define CALL(x) do { cudaError_t e_ = (x); printf("%-36s %s\n", #x, cudaGetErrorName(e_)); \
                     if (e_ != cudaSuccess) bad++; } while (0)

static char symbol_storage[256];
static char registered[8192];
static int host_calls;

static void host_fn(void *ud)
{
    ++*(int *)ud;
}

static void stream_cb(cudaStream_t s, cudaError_t status, void *ud)
{
    (void)s;
    if (status == cudaSuccess)
        ++*(int *)ud;
}

static struct cudaExtent ext(size_t w, size_t h, size_t d)
{
    struct cudaExtent e = { w, h, d };
    return e;
}

/* A pitched pointer of w x h bytes rows, "pitch" apart. */
static struct cudaPitchedPtr pitched(void *p, size_t pitch, size_t w, size_t h)
{
    struct cudaPitchedPtr pp = { p, pitch, w, h };
    return pp;
}

int main(void)
{
    int bad = 0;
    void **module = prog_register_module();
    prog_register(module, PROG_STUB(0), "_Z7k_plainPf");
    prog_register(module, PROG_STUB(1), "_ZN2ns8k_kernelEPfi");
    prog_register(module, PROG_STUB(2), "_Z5k_cfgv");
    __cudaRegisterFatBinaryEnd(module);

    char *d = NULL, *d2 = NULL, *h = NULL;
    void *m = NULL, *ma = NULL, *mm = NULL, *ha = NULL;
    char host[4096];
    memset(host, 7, sizeof host);
    cudaStream_t s;
    cudaEvent_t ev;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    PROG_CHECK(cudaStreamCreate(&s));
    PROG_CHECK(cudaEventCreate(&ev));
    PROG_CHECK(cudaGraphCreate(&g, 0));
    PROG_CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaKernel_t k;
    PROG_CHECK(__cudaGetKernel(&k, PROG_STUB(1)));

    /* allocations first: the buffers the rest uses */
    CALL(cudaMalloc((void **)&d, 4096));
    CALL(cudaMalloc((void **)&d2, 4096));
    CALL(cudaMallocHost((void **)&h, 4096));

    dim3 g1 = prog_dim3(4, 2, 1), b1 = prog_dim3(64, 2, 1);
    int n = 3;
    void *args[] = { &d, &n };
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = prog_dim3(5, 1, 1);
    cfg.blockDim = prog_dim3(96, 1, 1);
    cfg.dynamicSmemBytes = 1024;
    cfg.stream = s;

    CALL(cudaLaunchKernel(PROG_STUB(0), g1, b1, args, 128, s));
    CALL(cudaLaunchKernel_ptsz(PROG_STUB(0), g1, b1, args, 128, s));
    CALL(__cudaLaunchKernel(k, g1, b1, args, 0, s));
    CALL(__cudaLaunchKernel_ptsz(k, g1, b1, args, 0, s));
    CALL(cudaLaunchKernelExC(&cfg, PROG_STUB(2), args));
    CALL(cudaLaunchKernelExC_ptsz(&cfg, PROG_STUB(2), args));
    CALL(cudaLaunchCooperativeKernel(PROG_STUB(0), g1, b1, args, 0, s));
    CALL(cudaLaunchCooperativeKernel_ptsz(PROG_STUB(0), g1, b1, args, 0, s));
    CALL(cudaGraphLaunch(ge, s));
    CALL(cudaGraphLaunch_ptsz(ge, s));

    CALL(cudaMemcpy(d, host, 4096, cudaMemcpyHostToDevice));
    CALL(cudaMemcpy_ptds(d2, d, 4096, cudaMemcpyDeviceToDevice));
    CALL(cudaMemcpyAsync(h, d, 4096, cudaMemcpyDeviceToHost, s));
    CALL(cudaMemcpyAsync_ptsz(h, d, 2048, cudaMemcpyDeviceToHost, s));
    CALL(cudaMemcpy2D(d2, 64, d, 64, 32, 8, cudaMemcpyDeviceToDevice));
    CALL(cudaMemcpy2DAsync(d2, 64, d, 64, 32, 8, cudaMemcpyDeviceToDevice, s));
    CALL(cudaMemcpyPeer(d2, 0, d, 0, 1024));
    CALL(cudaMemcpyPeerAsync(d2, 0, d, 0, 1024, s));
    CALL(cudaMemcpyToSymbol(symbol_storage, host, 64, 0, cudaMemcpyHostToDevice));
    CALL(cudaMemcpyFromSymbol(host, symbol_storage, 64, 0, cudaMemcpyDeviceToHost));
    CALL(cudaMemcpyToSymbolAsync(symbol_storage, host, 32, 8, cudaMemcpyHostToDevice, s));
    CALL(cudaMemcpyFromSymbolAsync(host, symbol_storage, 32, 8, cudaMemcpyDeviceToHost, s));
    {
        /* 16 x 4 x 2 bytes between pitched pointers (pitch 64, 8 rows a
         * layer); 8 x 2 floats into a CUDA array (64 bytes) */
        struct cudaMemcpy3DParms p3;
        memset(&p3, 0, sizeof p3);
        p3.srcPtr = pitched(d, 64, 64, 8);
        p3.dstPtr = pitched(d2, 64, 64, 8);
        p3.extent = ext(16, 4, 2);
        p3.kind = cudaMemcpyDeviceToDevice;
        CALL(cudaMemcpy3D(&p3));
        CALL(cudaMemcpy3DAsync(&p3, s));
        CALL(cudaMemcpy3DAsync_ptsz(&p3, s));
        struct cudaChannelFormatDesc fd = { 32, 0, 0, 0, cudaChannelFormatKindFloat };
        cudaArray_t arr;
        PROG_CHECK(cudaMalloc3DArray(&arr, &fd, ext(8, 2, 0), 0));
        struct cudaMemcpy3DParms pa;
        memset(&pa, 0, sizeof pa);
        pa.srcPtr = pitched(host, 32, 32, 2);
        pa.dstArray = arr;
        pa.extent = ext(8, 2, 1);
        pa.kind = cudaMemcpyHostToDevice;
        CALL(cudaMemcpy3D_ptds(&pa));
        struct cudaMemcpy3DPeerParms pp;
        memset(&pp, 0, sizeof pp);
        pp.srcPtr = p3.srcPtr, pp.dstPtr = p3.dstPtr, pp.extent = p3.extent;
        CALL(cudaMemcpy3DPeer(&pp));
        CALL(cudaMemcpy3DPeer_ptds(&pp));
        CALL(cudaMemcpy3DPeerAsync(&pp, s));
        CALL(cudaMemcpy3DPeerAsync_ptsz(&pp, s));
        /* a batch of two copies (1024 + 512 bytes), one set of attributes */
        void *dsts[2] = { d2, d2 + 2048 };
        const void *srcs[2] = { d, host };
        size_t sizes[2] = { 1024, 512 }, idx[1] = { 0 };
        struct cudaMemcpyAttributes attr;
        memset(&attr, 0, sizeof attr);
        attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        CALL(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, idx, 1, s));
        CALL(cudaMemcpyBatchAsync_ptsz(dsts, srcs, sizes, 1, &attr, idx, 1, s));
        /* a 3D batch: 32 x 2 bytes between pointers, 4 floats into the array */
        struct cudaMemcpy3DBatchOp ops[2];
        memset(ops, 0, sizeof ops);
        ops[0].src.type = ops[0].dst.type = cudaMemcpyOperandTypePointer;
        ops[0].src.op.ptr.ptr = d, ops[0].dst.op.ptr.ptr = d2;
        ops[0].extent = ext(32, 2, 1);
        ops[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        ops[1].src.type = cudaMemcpyOperandTypePointer, ops[1].src.op.ptr.ptr = host;
        ops[1].dst.type = cudaMemcpyOperandTypeArray, ops[1].dst.op.array.array = arr;
        ops[1].extent = ext(4, 1, 1);
        ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        CALL(cudaMemcpy3DBatchAsync(2, ops, 0, s));
        CALL(cudaMemcpy3DBatchAsync_ptsz(1, ops, 0, s));
        PROG_CHECK(cudaFreeArray(arr));
    }

    CALL(cudaMemset(d, 1, 4096));
    CALL(cudaMemset_ptds(d, 2, 2048));
    CALL(cudaMemsetAsync(d, 3, 1024, s));
    CALL(cudaMemsetAsync_ptsz(d, 4, 512, s));
    CALL(cudaMemset2D(d, 64, 5, 32, 8));
    CALL(cudaMemset2DAsync(d, 64, 6, 32, 8, s));
    CALL(cudaMemset3D(pitched(d, 64, 64, 8), 7, ext(16, 4, 2)));
    CALL(cudaMemset3D_ptds(pitched(d, 64, 64, 8), 8, ext(16, 4, 2)));
    CALL(cudaMemset3DAsync(pitched(d, 64, 64, 8), 9, ext(16, 4, 2), s));
    CALL(cudaMemset3DAsync_ptsz(pitched(d, 64, 64, 8), 10, ext(16, 4, 2), s));

    CALL(cudaDeviceSynchronize());
    CALL(cudaStreamSynchronize(s));
    CALL(cudaStreamSynchronize_ptsz(s));
    CALL(cudaEventSynchronize(ev));
    CALL(cudaStreamWaitEvent(s, ev, 0));
    CALL(cudaStreamWaitEvent_ptsz(s, ev, 0));

    CALL(cudaStreamQuery(s));
    CALL(cudaStreamQuery_ptsz(s));
    CALL(cudaEventRecord(ev, s));
    CALL(cudaEventRecord_ptsz(ev, s));
    CALL(cudaEventRecordWithFlags(ev, s, cudaEventRecordDefault));
    CALL(cudaEventRecordWithFlags_ptsz(ev, s, cudaEventRecordDefault));
    CALL(cudaEventQuery(ev));
    CALL(cudaLaunchHostFunc(s, host_fn, &host_calls));
    CALL(cudaLaunchHostFunc_ptsz(s, host_fn, &host_calls));
    CALL(cudaStreamAddCallback(s, stream_cb, &host_calls, 0));
    CALL(cudaStreamAddCallback_ptsz(s, stream_cb, &host_calls, 0));

    CALL(cudaFree(d2));
    CALL(cudaMallocAsync(&ma, 512, s));
    CALL(cudaFreeAsync(ma, s));
    CALL(cudaMallocAsync_ptsz(&ma, 512, s));
    CALL(cudaFreeAsync_ptsz(ma, s));
    CALL(cudaMallocFromPoolAsync(&ma, 512, (cudaMemPool_t)0, s));
    CALL(cudaFreeAsync(ma, s));
    CALL(cudaMallocFromPoolAsync_ptsz(&ma, 512, (cudaMemPool_t)0, s));
    CALL(cudaFreeAsync(ma, s));
    {
        size_t pitch = 0;
        struct cudaPitchedPtr pp;
        struct cudaExtent ext = { 100, 4, 2 };
        CALL(cudaMallocPitch(&ma, &pitch, 100, 4));
        CALL(cudaFree(ma));
        CALL(cudaMalloc3D(&pp, ext));
        CALL(cudaFree(pp.ptr));
    }
    CALL(cudaMallocManaged(&mm, 512, cudaMemAttachGlobal));
    CALL(cudaHostAlloc(&ha, 512, cudaHostAllocDefault));
    CALL(cudaFreeHost(ha));
    CALL(cudaHostRegister(registered, sizeof registered, cudaHostRegisterDefault));
    CALL(cudaHostUnregister(registered));
    {
        cudaIpcMemHandle_t ih;
        void *mapped = NULL;
        PROG_CHECK(cudaIpcGetMemHandle(&ih, d));
        CALL(cudaIpcOpenMemHandle(&mapped, ih, cudaIpcMemLazyEnablePeerAccess));
        CALL(cudaIpcCloseMemHandle(mapped));
        cudaMemPool_t pool;
        PROG_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
        CALL(cudaMemPoolTrimTo(pool, 0));
        cudaGraphNode_t node;
        struct cudaGraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = cudaGraphNodeTypeEmpty;
        CALL(cudaGraphAddNode(&node, g, NULL, NULL, 0, &np));
    }
    CALL(cudaMalloc(&m, 256));
    CALL(cudaFree(m));
    CALL(cudaFree(mm));
    CALL(cudaFreeHost(h));
    CALL(cudaFree(d));

    CALL(cudaProfilerStart());
    CALL(cudaProfilerStop());

    unsigned sum = 0;
    for (size_t i = 0; i < sizeof host; i++)
        sum = sum * 31 + (unsigned char)host[i];
    printf("host checksum %08x, host functions run %d\n", sum, host_calls);
    tp_call_step();

    PROG_CHECK(cudaGraphExecDestroy(ge));
    PROG_CHECK(cudaGraphDestroy(g));
    PROG_CHECK(cudaEventDestroy(ev));
    PROG_CHECK(cudaStreamDestroy(s));
    printf("failed calls %d\n", bad);
    return bad ? 1 : 0;
}
