/*
 * all_apis.c - calls every entry point of preload/cudart.def once.
 *
 * DESIGN
 * One step that makes each intercepted runtime call exactly once, in the
 * order of preload/cudart.def, all succeeding, then trainprof_step().  A test
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

#define CALL(x) do { cudaError_t e_ = (x); printf("%-36s %s\n", #x, cudaGetErrorName(e_)); \
                     if (e_ != cudaSuccess) bad++; } while (0)

static char symbol_storage[256];

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

    CALL(cudaMemset(d, 1, 4096));
    CALL(cudaMemset_ptds(d, 2, 2048));
    CALL(cudaMemsetAsync(d, 3, 1024, s));
    CALL(cudaMemsetAsync_ptsz(d, 4, 512, s));
    CALL(cudaMemset2D(d, 64, 5, 32, 8));
    CALL(cudaMemset2DAsync(d, 64, 6, 32, 8, s));

    CALL(cudaDeviceSynchronize());
    CALL(cudaStreamSynchronize(s));
    CALL(cudaStreamSynchronize_ptsz(s));
    CALL(cudaEventSynchronize(ev));
    CALL(cudaStreamWaitEvent(s, ev, 0));
    CALL(cudaStreamWaitEvent_ptsz(s, ev, 0));

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
    printf("host checksum %08x\n", sum);
    tp_call_step();

    PROG_CHECK(cudaGraphExecDestroy(ge));
    PROG_CHECK(cudaGraphDestroy(g));
    PROG_CHECK(cudaEventDestroy(ev));
    PROG_CHECK(cudaStreamDestroy(s));
    printf("failed calls %d\n", bad);
    return bad ? 1 : 0;
}
