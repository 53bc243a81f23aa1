/*
 * graph_calls.c - GEMMs captured into a CUDA graph and replayed, the way
 * torch.compile(mode="reduce-overhead") runs a model.
 *
 * Step 0 captures two cuBLAS GEMMs on a stream (they do not run), ends the
 * capture and instantiates the graph; steps 1..N launch it GRAPH_LAUNCHES
 * times each and make one direct GEMM.  Prints the sizes it used, so that
 * the test can compute the FLOPs it expects.
 *
 * graph_calls [steps [launches [how]]], how the graph is made and launched:
 *   runtime  cudaStreamBeginCapture, cudaStreamEndCapture,
 *            cudaGraphInstantiate, cudaGraphLaunch (the default)
 *   driver   the same through the driver alone: cuStreamBeginCapture_v2,
 *            cuStreamEndCapture, cuGraphInstantiateWithFlags, cuGraphLaunch,
 *            from cuGetProcAddress_v2 lookups (as cuda-python or a static
 *            cudart reach them)
 *   nested   as PyTorch captures a conditional node: the second GEMM is
 *            captured on a second stream into a graph of its own
 *            (cudaGraphAddNode, cudaStreamBeginCaptureToGraph) while the
 *            first stream is still captured
 */
#include <cublas_api.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "prog.h"

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *driver_fn(const char *name, int version)
{
    static gpa2_fn gpa2;
    if (!gpa2) {
        void *h = prog_open_driver();
        void *p = NULL;
        CUdriverProcAddressQueryResult st;
        gpa2 = h ? (gpa2_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
        if (!gpa2 || gpa2("cuGetProcAddress", &p, 12000, 0, &st) != CUDA_SUCCESS)
            exit(2);
        gpa2 = (gpa2_fn)p;
    }
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (gpa2(name, &p, version, 0, &st) != CUDA_SUCCESS || !p)
        exit(2);
    return p;
}

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
    const char *how = argc > 3 ? argv[3] : "runtime";
    int driver = strcmp(how, "driver") == 0, nested = strcmp(how, "nested") == 0;
    cublasHandle_t h;
    cudaStream_t s, s2;
    cudaGraph_t g;
    cudaGraphExec_t e;
    BLAS(cublasCreate_v2(&h));
    PROG_CHECK(cudaStreamCreate(&s));
    PROG_CHECK(cudaStreamCreate(&s2));
    BLAS(cublasSetStream_v2(h, s));
    __typeof__(&cuGraphLaunch) graph_launch = driver ? driver_fn("cuGraphLaunch", 10000) : NULL;

    if (driver) {
        __typeof__(&cuStreamBeginCapture_v2) begin = driver_fn("cuStreamBeginCapture", 10010);
        __typeof__(&cuStreamEndCapture) end = driver_fn("cuStreamEndCapture", 10000);
        __typeof__(&cuGraphInstantiateWithFlags) inst = driver_fn("cuGraphInstantiateWithFlags", 11040);
        PROG_CU_CHECK(begin((CUstream)s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        gemm(h, 64, 32, 16);
        gemm(h, 128, 8, 4);
        PROG_CU_CHECK(end((CUstream)s, (CUgraph *)&g));
        PROG_CU_CHECK(inst((CUgraphExec *)&e, (CUgraph)g, 0));
    } else {
        PROG_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        gemm(h, 64, 32, 16);
        if (nested) {
            cudaGraph_t body, got;
            cudaGraphNode_t node;
            struct cudaGraphNodeParams np;
            memset(&np, 0, sizeof np);
            np.type = cudaGraphNodeTypeEmpty;
            PROG_CHECK(cudaGraphCreate(&body, 0));
            PROG_CHECK(cudaGraphAddNode(&node, body, NULL, NULL, 0, &np));
            PROG_CHECK(cudaStreamBeginCaptureToGraph(s2, body, NULL, NULL, 0, cudaStreamCaptureModeThreadLocal));
            BLAS(cublasSetStream_v2(h, s2));
            gemm(h, 128, 8, 4);
            PROG_CHECK(cudaStreamEndCapture(s2, &got));
            if (got != body)
                fprintf(stderr, "graph_calls: the capture into a graph ended with another graph\n");
            BLAS(cublasSetStream_v2(h, s));
        } else {
            gemm(h, 128, 8, 4);
        }
        PROG_CHECK(cudaStreamEndCapture(s, &g));
        PROG_CHECK(cudaGraphInstantiate(&e, g, 0));
    }
    printf("captured 64x32x16 128x8x4\n");
    tp_call_step();

    for (int i = 1; i <= steps; i++) {
        for (int l = 0; l < launches; l++) {
            if (driver)
                PROG_CU_CHECK(graph_launch((CUgraphExec)e, (CUstream)s));
            else
                PROG_CHECK(cudaGraphLaunch(e, s));
        }
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
