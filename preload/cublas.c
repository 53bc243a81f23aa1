/*
 * cublas.c - DESIGN: the cuBLAS wrappers, expanded from cublas.def: the
 * GEMMs, the other level 1/2/3 routines and batched solvers, the
 * asynchronous host/device copies and the handle's creation/destruction.
 *
 * Same shape as the runtime wrappers (preload/cudart.c) with library
 * nesting: tp_lib_begin counts depth in tp_lib_depth, so the cublasLtMatmul
 * that cuBLAS may make while serving a GEMM (libcublas.so.13 imports it
 * from libcublasLt) passes through as part of the outer record, while the CUDA
 * runtime launches it makes are recorded on their own, inside its span.  A
 * missing real function returns CUBLAS_STATUS_NOT_INITIALIZED, what cuBLAS
 * returns for a call it cannot serve.
 *
 * Decoding happens only when a record is written, after the real call:
 * sizes and types are arguments, and the handle's math mode (which decides
 * TF32 for float data: collector/record/flops/gemm.h) is read with cublasGetMathMode, a getter
 * of the real library that neither allocates nor launches, and only for
 * float data with no or the default compute type.  The routines that are
 * not products (collector/record/flops/blas.h) cost a switch and a few multiplies;
 * the level 3 ones read the math mode as a GEMM does (cuBLAS may serve them
 * with GEMM kernels), level 1/2 and the solvers get their data's class
 * (fp32 for float).  cublasDotEx's class is that of its executionType.  The
 * copies (cublasSet/GetMatrixAsync, ...Vector...) are copy records as the
 * runtime's: rows x cols x elemSize bytes, the direction, the stream; the
 * copy they make underneath (through the runtime linked statically into
 * cuBLAS, so never through our runtime wrappers) is, like a GEMM's launches,
 * recorded on its own where it reaches a wrapper (the driver's), inside the
 * library call's span.
 */
#include "collector/record/flops/blas.h"
#include "collector/record/flops/gemm.h"
#include "wrap.h"
#include "collector/record/apis.h"
#include "collector/wrap/core.h"

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

static inline void tp_blas_blas(struct tp_record *r, cublasHandle_t h, unsigned op, int64_t m,
                                int64_t n, int64_t k, int64_t batch, int atype)
{
    unsigned prec = tp_blas_level3(op) ? tp_blas_precision(h, atype, TP_GEMM_CT_NONE)
                                       : tp_gemm_precision(atype, TP_GEMM_CT_NONE, 0);
    tp_blas_fill(r, op, 0, m, n, k, batch, atype, prec);
}

static inline void tp_blas_sided(struct tp_record *r, cublasHandle_t h, unsigned op,
                                 cublasSideMode_t side, int64_t m, int64_t n, int64_t batch,
                                 int atype)
{
    tp_blas_fill(r, op, side == CUBLAS_SIDE_RIGHT, m, n, 0, batch, atype,
                 tp_blas_precision(h, atype, TP_GEMM_CT_NONE));
}

static inline void tp_blas_dotex(struct tp_record *r, cublasHandle_t h, int64_t n, int xtype,
                                 int exectype)
{
    (void)h;
    tp_blas_fill(r, TP_BLAS_DOT, 0, 0, n, 0, 1, xtype,
                 tp_gemm_precision(exectype, TP_GEMM_CT_NONE, 0));
}

static inline void tp_blas_copy(struct tp_record *r, const void *dst, const void *src,
                                int64_t rows, int64_t cols, int64_t elem_size, int kind,
                                cudaStream_t stream)
{
    r->u.api.dst = (uint64_t)(uintptr_t)dst;
    r->u.api.src = (uint64_t)(uintptr_t)src;
    r->u.api.bytes = tp_blas_copy_bytes(rows, cols, elem_size);
    r->u.api.copy_kind = (uint32_t)kind;
    r->u.api.stream = (uint64_t)(uintptr_t)stream;
}

/* The record expressions of cublas.def: "form" picks the filler above. */
#define TP_R_GEMM(form, ...) if (tp_r) tp_blas_##form(tp_r, __VA_ARGS__)
#define TP_R_COPY(...)       if (tp_r) tp_blas_copy(tp_r, __VA_ARGS__)
#define TP_R_NONE            (void)tp_r

#define TP_LIB_FN(ret, name, params, args, gate, rec) \
    TP_WRAP_GATED(TP_GATE_##gate, ret, name, params, args, TP_MISSING, (void)0, (void)0, \
                  tp_lib_begin, rec)
#include "collector/record/apis/cublas.def"
#undef TP_LIB_FN
