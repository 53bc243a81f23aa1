/*
 * cudnn.c - DESIGN: the cuDNN wrappers, expanded from cudnn.def with the
 * shape of the runtime wrappers (preload/cudart.c), nesting as library calls
 * (tp_lib_begin: launches made inside are still recorded, decision 1).
 *
 * A legacy convolution's FLOPs and implicit-GEMM shape come from its
 * descriptors, read with the real library's getters only while recording,
 * after the clock stopped (the reads are not part of the call's duration):
 * the output-side tensor (y or dy) gives N, K and the output spatial dims
 * (strides and padding are already in it), the filter gives C/groups and
 * the filter spatial dims (its second dim is C/groups, so the group count
 * need not be read) and the data type; the convolution's math type splits
 * FP32 data into fp32 (FMA) and tf32.  The getters are resolved once, next
 * to the first real entry point, never on the recording path; they only
 * copy fields out of host structs (no allocation, lock, print or CUDA call).
 * Missing getters or a failing read leave flops 0 and the precision unknown.
 */
#include "../collector/flops/conv.h"
#include "../collector/flops/cudnn_graph.h"
#include "wrap.h"
#include "../collector/apis.h"
#include "../collector/core.h"

#include <cudnn.h>

#define TP_MISSING CUDNN_STATUS_NOT_INITIALIZED

typedef cudnnStatus_t (*tp_get_tensor_fn)(cudnnTensorDescriptor_t, int, cudnnDataType_t *, int *,
                                          int *, int *);
typedef cudnnStatus_t (*tp_get_filter_fn)(cudnnFilterDescriptor_t, int, cudnnDataType_t *,
                                          cudnnTensorFormat_t *, int *, int *);
typedef cudnnStatus_t (*tp_get_math_fn)(cudnnConvolutionDescriptor_t, cudnnMathType_t *);

static tp_get_tensor_fn tp_get_tensor;
static tp_get_filter_fn tp_get_filter;
static tp_get_math_fn tp_get_math;

/* Resolves the descriptor getters (idempotent; called from the slow path of
 * a wrapper's first call, when the real library is loaded). */
static void tp_cudnn_getters(void)
{
    if (!__atomic_load_n(&tp_get_tensor, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&tp_get_filter, (tp_get_filter_fn)tp_resolve("cudnnGetFilterNdDescriptor"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&tp_get_math, (tp_get_math_fn)tp_resolve("cudnnGetConvolutionMathType"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&tp_get_tensor, (tp_get_tensor_fn)tp_resolve("cudnnGetTensorNdDescriptor"),
                         __ATOMIC_RELEASE);
    }
}

/* Fills r->u.lib of a legacy convolution from its descriptors. */
static void tp_conv_record(struct tp_record *r, cudnnTensorDescriptor_t out,
                           cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv)
{
    tp_get_tensor_fn gt = __atomic_load_n(&tp_get_tensor, __ATOMIC_ACQUIRE);
    tp_get_filter_fn gf = __atomic_load_n(&tp_get_filter, __ATOMIC_ACQUIRE);
    tp_get_math_fn gm = __atomic_load_n(&tp_get_math, __ATOMIC_ACQUIRE);
    int od[CUDNN_DIM_MAX], os[CUDNN_DIM_MAX], wd[CUDNN_DIM_MAX], no = 0, nw = 0;
    cudnnDataType_t ot, wt;
    cudnnTensorFormat_t fmt;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    if (!gt || !gf || !out || !w)
        return;
    if (gt(out, CUDNN_DIM_MAX, &ot, &no, od, os) != CUDNN_STATUS_SUCCESS ||
        gf(w, CUDNN_DIM_MAX, &wt, &fmt, &nw, wd) != CUDNN_STATUS_SUCCESS ||
        no > CUDNN_DIM_MAX || nw > CUDNN_DIM_MAX)
        return;
    int64_t o64[CUDNN_DIM_MAX], w64[CUDNN_DIM_MAX];
    for (int i = 0; i < no; i++)
        o64[i] = od[i];
    for (int i = 0; i < nw; i++)
        w64[i] = wd[i];
    if (tp_conv_fill(r, o64, no, w64, nw) != 0)
        return;
    if (wt == CUDNN_DATA_FLOAT && gm && conv && gm(conv, &math) != CUDNN_STATUS_SUCCESS)
        math = CUDNN_DEFAULT_MATH;
    r->u.lib.dtype = (uint8_t)tp_cudnn_dtype(wt);
    r->u.lib.precision = (uint8_t)tp_cudnn_precision(wt, math);
}

#define TP_R_CONV(out, w, conv) if (tp_r) tp_conv_record(tp_r, out, w, conv)
#define TP_R_NONE               (void)tp_r

/* cudnnBackendExecute: the plan's FLOPs (collector/flops/cudnn_graph.c) */
#define TP_R_BEXEC(plan) if (tp_r) tp_backend_record(tp_r, plan)

#define TP_LIB_FN(ret, name, params, args, rec) \
    TP_WRAP(ret, name, params, args, TP_MISSING, tp_cudnn_getters(), (void)0, tp_lib_begin, rec)
#include "../collector/apis/cudnn.def"
#undef TP_LIB_FN
