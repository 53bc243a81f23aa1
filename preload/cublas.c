/*
 * cublas.c - DESIGN: the cuBLAS GEMM wrappers, expanded from cublas.def.
 *
 * Same shape as the runtime wrappers (preload/cudart.c) with library
 * nesting: tp_lib_begin counts depth in tp_lib_depth, so the cublasLtMatmul
 * that cuBLAS may make while serving a GEMM (libcublas.so.13 imports it,
 * notes 1.1) passes through as part of the outer record, while the CUDA
 * runtime launches it makes are recorded on their own (decision 1).  A
 * missing real function returns CUBLAS_STATUS_NOT_INITIALIZED, what cuBLAS
 * returns for a call it cannot serve.
 *
 * Decoding happens only when a record is written, after the real call:
 * sizes and types are arguments, and the handle's math mode (which decides
 * TF32 for float data, notes 1.4) is read with cublasGetMathMode, a getter
 * of the real library that neither allocates nor launches, and only for
 * float data with no or the default compute type.
 */
#include "../collector/flops/gemm.h"
#include "wrap.h"
#include "../collector/apis.h"
#include "../collector/core.h"

#include <cublas_api.h>

#define TP_MISSING CUBLAS_STATUS_NOT_INITIALIZED

typedef cublasStatus_t (*tp_getmath_fn)(cublasHandle_t, cublasMath_t *);
static tp_getmath_fn tp_real_getmath;

/* The handle's math mode, 0 (CUBLAS_DEFAULT_MATH) if it cannot be read. */
static int tp_blas_mode(cublasHandle_t h)
{
    tp_getmath_fn get = __atomic_load_n(&tp_real_getmath, __ATOMIC_ACQUIRE);
    if (!get) {
        get = (tp_getmath_fn)tp_resolve("cublasGetMathMode");
        if (!get)
            return 0;
        __atomic_store_n(&tp_real_getmath, get, __ATOMIC_RELEASE);
    }
    cublasMath_t mode = CUBLAS_DEFAULT_MATH;
    return get(h, &mode) == CUBLAS_STATUS_SUCCESS ? (int)mode : 0;
}

static unsigned tp_blas_precision(cublasHandle_t h, int atype, int ct)
{
    return tp_gemm_precision(atype, ct, tp_gemm_needs_mode(atype, ct) ? tp_blas_mode(h) : 0);
}

static inline void tp_blas_one(struct tp_record *r, cublasHandle_t h, int64_t m, int64_t n,
                               int64_t k, int64_t batch, int atype, int ct)
{
    tp_gemm_fill(r, m, n, k, batch, atype, tp_blas_precision(h, atype, ct));
}

static inline void tp_blas_grouped32(struct tp_record *r, cublasHandle_t h, const int *m,
                                     const int *n, const int *k, const int *size, int count,
                                     int atype, int ct)
{
    tp_gemm_fill_grouped32(r, m, n, k, size, count, atype, tp_blas_precision(h, atype, ct));
}

static inline void tp_blas_grouped64(struct tp_record *r, cublasHandle_t h, const int64_t *m,
                                     const int64_t *n, const int64_t *k, const int64_t *size,
                                     int64_t count, int atype, int ct)
{
    tp_gemm_fill_grouped64(r, m, n, k, size, count, atype, tp_blas_precision(h, atype, ct));
}

/* The record expression of cublas.def: "form" picks the filler above. */
#define TP_R_GEMM(form, ...) if (tp_r) tp_blas_##form(tp_r, __VA_ARGS__)

#define TP_LIB_FN(ret, name, params, args, rec) \
    TP_WRAP(ret, name, params, args, TP_MISSING, (void)0, (void)0, tp_lib_begin, rec)
#include "../collector/apis/cublas.def"
#undef TP_LIB_FN
