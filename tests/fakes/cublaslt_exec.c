/*
 * cublaslt_exec.c - the executing half of a fake cuBLASLt.
 *
 * DESIGN
 * Only what needs a GPU: cublasLtCreate/cublasLtDestroy (a handle) and
 * cublasLtMatmul (succeeds without computing, counts its calls).  A program
 * links this library before CUDA's real libcublasLt.so.13, whose descriptor
 * functions (cublasLtMatmulDescCreate, cublasLtMatrixLayoutCreate, the
 * getters) work without a GPU: the wrapper under test then reads real
 * descriptors.  fake_cublaslt_matmul_calls() lets a program show that a
 * call nested in cuBLAS reached the library.
 */
#include <cublasLt.h>
#include <stdlib.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

static unsigned long fake_calls;

FAKE_EXPORT unsigned long fake_cublaslt_matmul_calls(void);

FAKE_EXPORT unsigned long fake_cublaslt_matmul_calls(void)
{
    return __atomic_load_n(&fake_calls, __ATOMIC_RELAXED);
}

FAKE_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    *h = calloc(1, 64);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

FAKE_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

FAKE_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc,
                                          const void *alpha, const void *A,
                                          cublasLtMatrixLayout_t ad, const void *B,
                                          cublasLtMatrixLayout_t bd, const void *beta,
                                          const void *C, cublasLtMatrixLayout_t cd, void *D,
                                          cublasLtMatrixLayout_t dd,
                                          const cublasLtMatmulAlgo_t *algo, void *ws,
                                          size_t wss, cudaStream_t s)
{
    (void)lt; (void)desc; (void)alpha; (void)A; (void)ad; (void)B; (void)bd; (void)beta;
    (void)C; (void)cd; (void)D; (void)dd; (void)algo; (void)ws; (void)wss; (void)s;
    __atomic_add_fetch(&fake_calls, 1, __ATOMIC_RELAXED);
    return CUBLAS_STATUS_SUCCESS;
}
