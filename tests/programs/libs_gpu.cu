// libs_gpu.cu - math-library calls on a real GPU, for scripts/dev/gpu-validate:
// the FLOPs trainprof records for them are compared with what this program
// computes from its own sizes.
//
// DESIGN
// Each step, inside an NVTX "step" range (the default step signal), makes one
// call of each kind trainprof counts FLOPs for:
//   cublasSgemm                 fp32                          2*m*n*k
//   cublasGemmEx                bf16 in/out, fp32 compute     2*m*n*k
//   cublasGemmStridedBatchedEx  fp16 in/out, fp32 compute     2*m*n*k*batch
//   cublasLtMatmul              bf16 in/out, fp32 compute     2*m*n*k
//   cudnnConvolutionForward     fp32 NCHW, 3x3, pad 1         2*N*K*P*Q*C*R*S
// and prints, before the loop, one `call NAME flops F` line per call and
// `expected_flops_per_step F`, which gpu-validate parses.  Sizes differ per
// call so that a FLOP mix-up between calls shows.  Needs a GPU; CI only
// compiles it (make cuda-programs).  Built with -DNO_CUDNN it leaves the
// convolution out (for a machine without cuDNN headers).  Any failing call
// exits with status 1 and says which on stderr.
//
// Usage: libs_gpu [STEPS]   (default 10)
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#ifndef NO_CUDNN
#include <cudnn.h>
#endif
#include <nvtx3/nvToolsExt.h>

static void die(const char *what, long code)
{
    fprintf(stderr, "libs_gpu: %s failed (status %ld)\n", what, code);
    exit(1);
}

#define CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) die(#x, (long)e_); } while (0)
#define CUBLAS(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) die(#x, (long)s_); } while (0)
#define CUDNN(x) do { long s_ = (long)(x); if (s_ != 0) die(#x, s_); } while (0)

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA(cudaMalloc(&p, bytes));
    CUDA(cudaMemset(p, 0, bytes));
    return p;
}

static unsigned long long gemm_flops(long m, long n, long k, long batch)
{
    return 2ULL * (unsigned long long)m * n * k * batch;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    if (steps < 1)
        steps = 1;

    // sizes: (m, n, k[, batch]) per GEMM, column-major, no transposes
    const int s_m = 2048, s_n = 1024, s_k = 512;             // cublasSgemm
    const int e_m = 4096, e_n = 2048, e_k = 1024;            // cublasGemmEx
    const int b_m = 512, b_n = 256, b_k = 128, b_b = 16;     // strided batched
    const int l_m = 3072, l_n = 1024, l_k = 2048;            // cublasLtMatmul
#ifndef NO_CUDNN
    const int cN = 16, cC = 64, cH = 56, cW = 56, cK = 128, cR = 3, cS = 3;  // conv
    const int cP = cH, cQ = cW;                              // pad 1, stride 1
#endif

    unsigned long long f_s = gemm_flops(s_m, s_n, s_k, 1);
    unsigned long long f_e = gemm_flops(e_m, e_n, e_k, 1);
    unsigned long long f_b = gemm_flops(b_m, b_n, b_k, b_b);
    unsigned long long f_l = gemm_flops(l_m, l_n, l_k, 1);
#ifndef NO_CUDNN
    unsigned long long f_c = 2ULL * cN * cK * cP * cQ * cC * cR * cS;
#else
    unsigned long long f_c = 0;
#endif

    cublasHandle_t blas;
    CUBLAS(cublasCreate(&blas));
    cublasLtHandle_t lt;
    CUBLAS(cublasLtCreate(&lt));

    float *sA = (float *)dev_alloc(sizeof(float) * s_m * s_k);
    float *sB = (float *)dev_alloc(sizeof(float) * s_k * s_n);
    float *sC = (float *)dev_alloc(sizeof(float) * s_m * s_n);
    void *eA = dev_alloc(2ull * e_m * e_k), *eB = dev_alloc(2ull * e_k * e_n), *eC = dev_alloc(2ull * e_m * e_n);
    void *bA = dev_alloc(2ull * b_m * b_k * b_b), *bB = dev_alloc(2ull * b_k * b_n * b_b),
         *bC = dev_alloc(2ull * b_m * b_n * b_b);
    void *lA = dev_alloc(2ull * l_m * l_k), *lB = dev_alloc(2ull * l_k * l_n), *lD = dev_alloc(2ull * l_m * l_n);

    // cuBLASLt: bf16 A, B, C=D, fp32 compute and scale, heuristic's first algorithm
    cublasLtMatmulDesc_t op;
    CUBLAS(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t la, lb, ld;
    CUBLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, l_m, l_k, l_m));
    CUBLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, l_k, l_n, l_k));
    CUBLAS(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, l_m, l_n, l_m));
    size_t lt_ws_bytes = 32u << 20;
    void *lt_ws = dev_alloc(lt_ws_bytes);
    cublasLtMatmulPreference_t pref;
    CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &lt_ws_bytes, sizeof lt_ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int nheur = 0;
    CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heur, &nheur));
    if (nheur < 1)
        die("cublasLtMatmulAlgoGetHeuristic (no algorithm)", 0);

#ifndef NO_CUDNN
    cudnnHandle_t dnn;
    CUDNN(cudnnCreate(&dnn));
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    CUDNN(cudnnCreateTensorDescriptor(&xd));
    CUDNN(cudnnCreateTensorDescriptor(&yd));
    CUDNN(cudnnCreateFilterDescriptor(&wd));
    CUDNN(cudnnCreateConvolutionDescriptor(&cd));
    CUDNN(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, cN, cC, cH, cW));
    CUDNN(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, cK, cC, cR, cS));
    CUDNN(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                          CUDNN_DATA_FLOAT));
    int on, oc, oh, ow;
    CUDNN(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &on, &oc, &oh, &ow));
    if (on != cN || oc != cK || oh != cP || ow != cQ)
        die("cudnnGetConvolution2dForwardOutputDim (unexpected output shape)", 0);
    CUDNN(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, cN, cK, cP, cQ));
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int nalgo = 0;
    CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(dnn, xd, wd, cd, yd, 8, &nalgo, perf));
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    for (int i = 0; i < nalgo; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS) {
            algo = perf[i].algo;
            break;
        }
    size_t conv_ws_bytes = 0;
    CUDNN(cudnnGetConvolutionForwardWorkspaceSize(dnn, xd, wd, cd, yd, algo, &conv_ws_bytes));
    void *conv_ws = conv_ws_bytes ? dev_alloc(conv_ws_bytes) : NULL;
    float *cx = (float *)dev_alloc(sizeof(float) * cN * cC * cH * cW);
    float *cw = (float *)dev_alloc(sizeof(float) * cK * cC * cR * cS);
    float *cy = (float *)dev_alloc(sizeof(float) * cN * cK * cP * cQ);
#endif

    printf("libs_gpu: call cublasSgemm flops %llu\n", f_s);
    printf("libs_gpu: call cublasGemmEx flops %llu\n", f_e);
    printf("libs_gpu: call cublasGemmStridedBatchedEx flops %llu\n", f_b);
    printf("libs_gpu: call cublasLtMatmul flops %llu\n", f_l);
#ifndef NO_CUDNN
    printf("libs_gpu: call cudnnConvolutionForward flops %llu\n", f_c);
#endif
    printf("libs_gpu: expected_flops_per_step %llu\n", f_s + f_e + f_b + f_l + f_c);
    fflush(stdout);

    const float one = 1.0f, zero = 0.0f;
    for (int s = 0; s < steps; s++) {
        nvtxRangePushA("step");
        CUBLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, s_m, s_n, s_k, &one, sA, s_m, sB, s_k,
                           &zero, sC, s_m));
        CUBLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, e_m, e_n, e_k, &one, eA, CUDA_R_16BF,
                            e_m, eB, CUDA_R_16BF, e_k, &zero, eC, CUDA_R_16BF, e_m,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUBLAS(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, b_m, b_n, b_k, &one,
                                          bA, CUDA_R_16F, b_m, (long long)b_m * b_k,
                                          bB, CUDA_R_16F, b_k, (long long)b_k * b_n, &zero,
                                          bC, CUDA_R_16F, b_m, (long long)b_m * b_n, b_b,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUBLAS(cublasLtMatmul(lt, op, &one, lA, la, lB, lb, &zero, lD, ld, lD, ld, &heur.algo,
                              lt_ws, lt_ws_bytes, 0));
#ifndef NO_CUDNN
        CUDNN(cudnnConvolutionForward(dnn, &one, xd, cx, wd, cw, cd, algo, conv_ws, conv_ws_bytes,
                                      &zero, yd, cy));
#endif
        CUDA(cudaDeviceSynchronize());
        nvtxRangePop();
    }
    printf("libs_gpu: %d steps done\n", steps);

#ifndef NO_CUDNN
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyConvolutionDescriptor(cd);
    cudnnDestroy(dnn);
#endif
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    cublasDestroy(blas);
    return 0;
}
