/*
 * graph_calls.c - GEMMs captured into a CUDA graph and replayed, the way
 * torch.compile(mode="reduce-overhead") runs a model.
 *
 * Step 0 captures two cuBLAS GEMMs on a stream (they do not run), ends the
 * capture and instantiates the graph; steps 1..N launch it GRAPH_LAUNCHES
 * times each and make one direct GEMM.  Prints the sizes it used, so that
 * the test can compute the FLOPs it expects.
 */
#include <cublas_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "prog.h"

#define BLAS(call) do { if ((call) != CUBLAS_STATUS_SUCCESS) { \
        fprintf(stderr, "graph_calls: %s failed\n", #call); exit(1); } } while (0)

static void gemm(cublasHandle_t h, int m, int n, int k)
{
    static float a[1], b[1], c[1];
    const float one = 1, zero = 0;
    BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, m, b, k, &zero, c, m));
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 4;
    int launches = argc > 2 ? atoi(argv[2]) : 3;
    cublasHandle_t h;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t e;
    BLAS(cublasCreate_v2(&h));
    PROG_CHECK(cudaStreamCreate(&s));
    BLAS(cublasSetStream_v2(h, s));

    PROG_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    gemm(h, 64, 32, 16);
    gemm(h, 128, 8, 4);
    PROG_CHECK(cudaStreamEndCapture(s, &g));
    PROG_CHECK(cudaGraphInstantiate(&e, g, 0));
    printf("captured 64x32x16 128x8x4\n");
    tp_call_step();

    for (int i = 1; i <= steps; i++) {
        for (int l = 0; l < launches; l++)
            PROG_CHECK(cudaGraphLaunch(e, s));
        gemm(h, 10, 20, 30);
        PROG_CHECK(cudaStreamSynchronize(s));
        printf("step %d: %d graph launches, direct 10x20x30\n", i, launches);
        tp_call_step();
    }
    PROG_CHECK(cudaGraphExecDestroy(e));
    PROG_CHECK(cudaGraphDestroy(g));
    BLAS(cublasDestroy_v2(h));
    return 0;
}
