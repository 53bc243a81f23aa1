/*
 * cublaslt.c - DESIGN: the cuBLASLt wrapper, expanded from cublaslt.def.
 *
 * cublasLtMatmul carries no sizes: they live in opaque descriptors that
 * PyTorch destroys right after the call (ATen's CUDABlas.cpp), so they are read here,
 * after the real call and only when a record is written, with the real
 * library's getters (cublasLtMatmulDescGetAttribute,
 * cublasLtMatrixLayoutGetAttribute: plain reads, no allocation, no lock, no
 * launch).  Seven reads: TRANSA and COMPUTE_TYPE of the operation, ROWS,
 * COLS and BATCH_COUNT of D, TYPE and the k side of A.  m = ROWS(D),
 * n = COLS(D), k = COLS(A) if TRANSA is N else ROWS(A), batch =
 * BATCH_COUNT(D).  A getter that fails leaves its default (0 sizes, batch 1,
 * type float, no compute type); a missing getter leaves the record with no
 * FLOPs rather than guessed ones.  The wrapper nests like the cuBLAS ones
 * (tp_lib_depth): called from inside a cuBLAS GEMM it is a pass-through.
 */
#include "collector/record/flops/gemm.h"
#include "wrap.h"
#include "collector/record/apis.h"
#include "collector/wrap/core.h"

#include <cublasLt.h>

#define TP_MISSING CUBLAS_STATUS_NOT_INITIALIZED

typedef cublasStatus_t (*tp_descget_fn)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                        void *, size_t, size_t *);
typedef cublasStatus_t (*tp_layoutget_fn)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                                          void *, size_t, size_t *);
static tp_descget_fn tp_real_descget;
static tp_layoutget_fn tp_real_layoutget;

static int tp_lt_getters(tp_descget_fn *dg, tp_layoutget_fn *lg)
{
    *dg = __atomic_load_n(&tp_real_descget, __ATOMIC_ACQUIRE);
    *lg = __atomic_load_n(&tp_real_layoutget, __ATOMIC_ACQUIRE);
    if (__builtin_expect(*dg && *lg, 1))
        return 1;
    *dg = (tp_descget_fn)tp_resolve("cublasLtMatmulDescGetAttribute");
    *lg = (tp_layoutget_fn)tp_resolve("cublasLtMatrixLayoutGetAttribute");
    if (!*dg || !*lg)
        return 0;
    __atomic_store_n(&tp_real_descget, *dg, __ATOMIC_RELEASE);
    __atomic_store_n(&tp_real_layoutget, *lg, __ATOMIC_RELEASE);
    return 1;
}

static void tp_lt_fill(struct tp_record *r, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t ad,
                       cublasLtMatrixLayout_t cd, cublasLtMatrixLayout_t dd)
{
    tp_descget_fn dg;
    tp_layoutget_fn lg;
    if (!tp_lt_getters(&dg, &lg))
        return;
    size_t w;
    int32_t transa = CUBLAS_OP_N, ct = TP_GEMM_CT_NONE, batch = 1;
    uint32_t atype = CUDA_R_32F;
    uint64_t m = 0, n = 0, k = 0;
    if (!dd)
        dd = cd;
    if (!desc || !ad || !dd)
        return;
    dg(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa, &w);
    dg(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &ct, sizeof ct, &w);
    lg(dd, CUBLASLT_MATRIX_LAYOUT_ROWS, &m, sizeof m, &w);
    lg(dd, CUBLASLT_MATRIX_LAYOUT_COLS, &n, sizeof n, &w);
    lg(dd, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch, &w);
    lg(ad, CUBLASLT_MATRIX_LAYOUT_TYPE, &atype, sizeof atype, &w);
    lg(ad, transa == CUBLAS_OP_N ? CUBLASLT_MATRIX_LAYOUT_COLS : CUBLASLT_MATRIX_LAYOUT_ROWS,
       &k, sizeof k, &w);
    /* sizes above INT64_MAX are not matrices: treat them as 0 */
    tp_gemm_fill(r, (int64_t)(m >> 63 ? 0 : m), (int64_t)(n >> 63 ? 0 : n),
                 (int64_t)(k >> 63 ? 0 : k), batch, (int)atype,
                 tp_gemm_precision((int)atype, ct, 0));
}

#define TP_R_GEMM(desc, ad, cd, dd) if (tp_r) tp_lt_fill(tp_r, desc, ad, cd, dd)

#define TP_LIB_FN(ret, name, params, args, gate, rec) \
    TP_WRAP_GATED(TP_GATE_##gate, ret, name, params, args, TP_MISSING, (void)0, (void)0, \
                  tp_lib_begin, rec)
#include "collector/record/apis/cublaslt.def"
#undef TP_LIB_FN
