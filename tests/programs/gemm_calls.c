/*
 * gemm_calls.c - calls every cuBLAS GEMM entry point of collector/record/apis/cublas.def
 * and cublasLtMatmul, with known and distinct shapes, once per step.
 *
 * DESIGN
 * Runs GEMM_STEPS steps (default 2), each ended by trainprof_step().  Every
 * call gets its own shape from a running index i: m = 10+i, n = 20+i,
 * k = 30+i, batch = 2 + i%3 for the batched forms; grouped calls use two
 * groups.  Each call prints one line "name m n k batch status" (grouped:
 * "name G m,n,k,size m,n,k,size status"), so a test can compute the
 * expected FLOPs on its own and stdout is the same with or without the
 * library.  Argument "tf32" sets CUBLAS_TF32_TENSOR_OP_MATH on the handle;
 * "lt" makes only cublasLtMatmul calls, on several descriptor layouts.
 * Descriptors are real (CUDA's libcublasLt.so.13); the matmul itself is the
 * fake in tests/fakes/cublaslt_exec.c.  The buffers are never read.
 */
#include <cublas_api.h>
#include <cublasLt.h>

#include "prog.h"

#include <unistd.h>

/* C++-only in cublas_api.h */
cublasStatus_t cublasHgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const __half_raw *, const __half_raw *, int, const __half_raw *, int,
                           const __half_raw *, __half_raw *, int);
cublasStatus_t cublasHgemm_64(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t,
                              int64_t, int64_t, const __half_raw *, const __half_raw *, int64_t,
                              const __half_raw *, int64_t, const __half_raw *, __half_raw *,
                              int64_t);
cublasStatus_t cublasHgemmBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const __half_raw *, const __half_raw *const[], int,
                                  const __half_raw *const[], int, const __half_raw *,
                                  __half_raw *const[], int, int);
cublasStatus_t cublasHgemmBatched_64(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                     int64_t, int64_t, int64_t, const __half_raw *,
                                     const __half_raw *const[], int64_t,
                                     const __half_raw *const[], int64_t, const __half_raw *,
                                     __half_raw *const[], int64_t, int64_t);
cublasStatus_t cublasHgemmStridedBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                         int, int, int, const __half_raw *, const __half_raw *,
                                         int, long long, const __half_raw *, int, long long,
                                         const __half_raw *, __half_raw *, int, long long, int);
cublasStatus_t cublasHgemmStridedBatched_64(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int64_t, int64_t, int64_t, const __half_raw *,
                                            const __half_raw *, int64_t, long long,
                                            const __half_raw *, int64_t, long long,
                                            const __half_raw *, __half_raw *, int64_t,
                                            long long, int64_t);
unsigned long fake_cublaslt_matmul_calls(void);

static int bad, idx;
static double buf[64];           /* alpha, beta and "matrices": never read */
static void *ptrs[8];            /* pointer arrays */

static void report(const char *name, long m, long n, long k, long batch, cublasStatus_t st)
{
    printf("%s %ld %ld %ld %ld %s\n", name, m, n, k, batch,
           st == CUBLAS_STATUS_SUCCESS ? "ok" : "FAILED");
    if (st != CUBLAS_STATUS_SUCCESS)
        bad++;
}

#define T CUBLAS_OP_T
#define N CUBLAS_OP_N
#define P(type) ((type *)(void *)buf)
#define PA(type) ((type *const *)(void *)ptrs)
#define SHAPE int m = 10 + idx, n = 20 + idx, k = 30 + idx, b = 2 + idx % 3; (void)b; idx++

/* cublasXgemm forms: (h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) */
#define PLAIN(fn, type) do { SHAPE; \
    report(#fn, m, n, k, 1, fn(h, N, T, m, n, k, P(type), P(type), m, P(type), n, P(type), P(type), m)); \
} while (0)
#define LEGACY_EX(fn, stype, at) do { SHAPE; \
    report(#fn, m, n, k, 1, fn(h, N, N, m, n, k, P(stype), buf, at, m, buf, at, k, P(stype), buf, at, m)); \
} while (0)
#define GEMM_EX(fn, at, ct) do { SHAPE; \
    report(#fn, m, n, k, 1, fn(h, T, N, m, n, k, buf, buf, at, k, buf, at, k, buf, buf, at, m, ct, CUBLAS_GEMM_DEFAULT)); \
} while (0)
#define BATCHED(fn, type) do { SHAPE; \
    report(#fn, m, n, k, b, fn(h, N, N, m, n, k, P(type), PA(const type), m, PA(const type), k, P(type), PA(type), m, b)); \
} while (0)
#define BATCHED_EX(fn, at, ct) do { SHAPE; \
    report(#fn, m, n, k, b, fn(h, N, N, m, n, k, buf, PA(const void), at, m, PA(const void), at, k, buf, PA(void), at, m, b, ct, CUBLAS_GEMM_DEFAULT)); \
} while (0)
#define STRIDED(fn, type) do { SHAPE; \
    report(#fn, m, n, k, b, fn(h, N, N, m, n, k, P(type), P(type), m, 0, P(type), k, 0, P(type), P(type), m, 0, b)); \
} while (0)
#define STRIDED_EX(fn, at, ct) do { SHAPE; \
    report(#fn, m, n, k, b, fn(h, N, N, m, n, k, buf, buf, at, m, 0, buf, at, k, 0, buf, buf, at, m, 0, b, ct, CUBLAS_GEMM_DEFAULT)); \
} while (0)

/* Grouped: two groups, sizes 2 and 3, shapes from two indices. */
#define GROUP_ARRAYS(I) \
    cublasOperation_t ta[2] = { N, T }, tb[2] = { N, N }; \
    I gm[2], gn[2], gk[2], gs[2] = { 2, 3 }, ld[2] = { 256, 256 }; \
    for (int g_ = 0; g_ < 2; g_++) { gm[g_] = 10 + idx; gn[g_] = 20 + idx; gk[g_] = 30 + idx; idx++; }
#define GROUP_REPORT(fn, st) do { \
    printf("%s G %ld,%ld,%ld,%ld %ld,%ld,%ld,%ld %s\n", #fn, (long)gm[0], (long)gn[0], (long)gk[0], \
           (long)gs[0], (long)gm[1], (long)gn[1], (long)gk[1], (long)gs[1], \
           (st) == CUBLAS_STATUS_SUCCESS ? "ok" : "FAILED"); \
    if ((st) != CUBLAS_STATUS_SUCCESS) bad++; \
} while (0)
#define GROUPED(fn, I, type) do { GROUP_ARRAYS(I) \
    cublasStatus_t st_ = fn(h, ta, tb, gm, gn, gk, P(type), PA(const type), ld, PA(const type), ld, P(type), PA(type), ld, 2, gs); \
    GROUP_REPORT(fn, st_); \
} while (0)
#define GROUPED_EX(fn, I, at, ct) do { GROUP_ARRAYS(I) \
    cublasStatus_t st_ = fn(h, ta, tb, gm, gn, gk, buf, PA(const void), at, ld, PA(const void), at, ld, buf, PA(void), at, ld, 2, gs, ct); \
    GROUP_REPORT(fn, st_); \
} while (0)

static void blas_calls(cublasHandle_t h)
{
    idx = 0;
    PLAIN(cublasSgemm_v2, float);
    PLAIN(cublasSgemm_v2_64, float);
    PLAIN(cublasDgemm_v2, double);
    PLAIN(cublasDgemm_v2_64, double);
    PLAIN(cublasCgemm_v2, cuComplex);
    PLAIN(cublasCgemm_v2_64, cuComplex);
    PLAIN(cublasZgemm_v2, cuDoubleComplex);
    PLAIN(cublasZgemm_v2_64, cuDoubleComplex);
    PLAIN(cublasHgemm, __half_raw);
    PLAIN(cublasHgemm_64, __half_raw);
    PLAIN(cublasCgemm3m, cuComplex);
    PLAIN(cublasCgemm3m_64, cuComplex);
    PLAIN(cublasZgemm3m, cuDoubleComplex);
    PLAIN(cublasZgemm3m_64, cuDoubleComplex);
    LEGACY_EX(cublasSgemmEx, float, CUDA_R_16F);
    LEGACY_EX(cublasSgemmEx_64, float, CUDA_R_32F);
    LEGACY_EX(cublasCgemmEx, cuComplex, CUDA_C_32F);
    LEGACY_EX(cublasCgemmEx_64, cuComplex, CUDA_C_32F);
    LEGACY_EX(cublasCgemm3mEx, cuComplex, CUDA_C_32F);
    LEGACY_EX(cublasCgemm3mEx_64, cuComplex, CUDA_C_32F);
    GEMM_EX(cublasGemmEx, CUDA_R_16BF, CUBLAS_COMPUTE_32F);
    GEMM_EX(cublasGemmEx_64, CUDA_C_32F, CUBLAS_COMPUTE_32F);
    BATCHED(cublasSgemmBatched, float);
    BATCHED(cublasSgemmBatched_64, float);
    BATCHED(cublasDgemmBatched, double);
    BATCHED(cublasDgemmBatched_64, double);
    BATCHED(cublasCgemmBatched, cuComplex);
    BATCHED(cublasCgemmBatched_64, cuComplex);
    BATCHED(cublasZgemmBatched, cuDoubleComplex);
    BATCHED(cublasZgemmBatched_64, cuDoubleComplex);
    BATCHED(cublasHgemmBatched, __half_raw);
    BATCHED(cublasHgemmBatched_64, __half_raw);
    BATCHED(cublasCgemm3mBatched, cuComplex);
    BATCHED(cublasCgemm3mBatched_64, cuComplex);
    BATCHED_EX(cublasGemmBatchedEx, CUDA_R_16F, CUBLAS_COMPUTE_32F);
    BATCHED_EX(cublasGemmBatchedEx_64, CUDA_R_64F, CUBLAS_COMPUTE_64F);
    STRIDED(cublasSgemmStridedBatched, float);
    STRIDED(cublasSgemmStridedBatched_64, float);
    STRIDED(cublasDgemmStridedBatched, double);
    STRIDED(cublasDgemmStridedBatched_64, double);
    STRIDED(cublasCgemmStridedBatched, cuComplex);
    STRIDED(cublasCgemmStridedBatched_64, cuComplex);
    STRIDED(cublasZgemmStridedBatched, cuDoubleComplex);
    STRIDED(cublasZgemmStridedBatched_64, cuDoubleComplex);
    STRIDED(cublasHgemmStridedBatched, __half_raw);
    STRIDED(cublasHgemmStridedBatched_64, __half_raw);
    STRIDED(cublasCgemm3mStridedBatched, cuComplex);
    STRIDED(cublasCgemm3mStridedBatched_64, cuComplex);
    STRIDED_EX(cublasGemmStridedBatchedEx, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32);
    STRIDED_EX(cublasGemmStridedBatchedEx_64, CUDA_R_16BF, CUBLAS_COMPUTE_32F_FAST_16BF);
    GROUPED(cublasSgemmGroupedBatched, int, float);
    GROUPED(cublasSgemmGroupedBatched_64, int64_t, float);
    GROUPED(cublasDgemmGroupedBatched, int, double);
    GROUPED(cublasDgemmGroupedBatched_64, int64_t, double);
    GROUPED_EX(cublasGemmGroupedBatchedEx, int, CUDA_R_16F, CUBLAS_COMPUTE_32F);
    GROUPED_EX(cublasGemmGroupedBatchedEx_64, int64_t, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC);
}

#define LT_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)s_); exit(1); } } while (0)

/* One cublasLtMatmul of D (m x n) = op(A) op(B) on A type "at" with
 * compute type "ct": layouts stored as PyTorch builds them (a transposed
 * operand is stored k x m), BATCH_COUNT set on every layout when batch > 1. */
static void lt_call(cublasLtHandle_t lt, int transa, int transb, uint64_t m, uint64_t n,
                    uint64_t k, int32_t batch, cudaDataType at, cublasComputeType_t ct)
{
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t ad, bd, cd;
    LT_CHECK(cublasLtMatmulDescCreate(&desc, ct, CUDA_R_32F));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
    LT_CHECK(cublasLtMatrixLayoutCreate(&ad, at, transa == N ? m : k, transa == N ? k : m,
                                        transa == N ? (int64_t)m : (int64_t)k));
    LT_CHECK(cublasLtMatrixLayoutCreate(&bd, at, transb == N ? k : n, transb == N ? n : k,
                                        transb == N ? (int64_t)k : (int64_t)n));
    LT_CHECK(cublasLtMatrixLayoutCreate(&cd, CUDA_R_32F, m, n, (int64_t)m));
    if (batch > 1) {
        cublasLtMatrixLayout_t all[3] = { ad, bd, cd };
        for (int i = 0; i < 3; i++)
            LT_CHECK(cublasLtMatrixLayoutSetAttribute(all[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &batch, sizeof batch));
    }
    cublasStatus_t st = cublasLtMatmul(lt, desc, buf, buf, ad, buf, bd, buf, buf, cd, buf, cd,
                                       NULL, NULL, 0, 0);
    printf("cublasLtMatmul %lu %lu %lu %d %s\n", (unsigned long)m, (unsigned long)n,
           (unsigned long)k, batch, st == CUBLAS_STATUS_SUCCESS ? "ok" : "FAILED");
    if (st != CUBLAS_STATUS_SUCCESS)
        bad++;
    cublasLtMatrixLayoutDestroy(ad);
    cublasLtMatrixLayoutDestroy(bd);
    cublasLtMatrixLayoutDestroy(cd);
    cublasLtMatmulDescDestroy(desc);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long steps = prog_env_long("GEMM_STEPS", 2);
    long sleep_us = prog_env_long("GEMM_SLEEP_US", 0);   /* per step */
    cublasHandle_t h;
    cublasLtHandle_t lt;
    cudaStream_t s;
    PROG_CHECK(cudaStreamCreate(&s));
    LT_CHECK(cublasCreate_v2(&h));
    LT_CHECK(cublasSetStream_v2(h, s));
    LT_CHECK(cublasSetMathMode(h, strcmp(mode, "tf32") == 0 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                           : CUBLAS_DEFAULT_MATH));
    LT_CHECK(cublasLtCreate(&lt));
    for (long st = 0; st < steps; st++) {
        printf("step %ld\n", st);
        if (strcmp(mode, "lt") == 0) {
            lt_call(lt, N, N, 64, 48, 40, 1, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32);
            lt_call(lt, T, N, 96, 80, 72, 1, CUDA_R_16F, CUBLAS_COMPUTE_32F);
            lt_call(lt, N, T, 33, 17, 9, 6, CUDA_R_64F, CUBLAS_COMPUTE_64F);
            lt_call(lt, T, N, 128, 256, 512, 1, CUDA_R_8F_E4M3, CUBLAS_COMPUTE_32F);
            lt_call(lt, N, N, 5000000000ull, 2, 3, 1, CUDA_R_32F, CUBLAS_COMPUTE_32F);
        } else {
            blas_calls(h);
            lt_call(lt, T, T, 100, 200, 300, 4, CUDA_R_16BF, CUBLAS_COMPUTE_32F);
        }
        if (sleep_us > 0)
            usleep((useconds_t)sleep_us);
        tp_call_step();
    }
    printf("cublasLtMatmul reached the library %lu times\n", fake_cublaslt_matmul_calls());
    cublasLtDestroy(lt);
    cublasDestroy_v2(h);
    return bad ? 1 : 0;
}
