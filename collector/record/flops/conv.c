/*
 * conv.c - DESIGN: a convolution as its implicit GEMM (record form
 * TP_FORM_CONV), for the legacy cuDNN wrappers (preload/cudnn.c) and the
 * backend graphs (cudnn_graph.c).  Kept free of cuDNN calls (only its enum
 * values) so tests/unit/test_conv.c can include it.
 */
#include "conv.h"

#include <cudnn.h>

static uint32_t tp_sat32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* a * b, saturated */
static uint64_t tp_mul_sat(uint64_t a, uint64_t b)
{
    uint64_t p;
    return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

int tp_conv_fill(struct tp_record *r, const int64_t *out, int nout, const int64_t *w, int nw)
{
    if (nout < 3 || nw < 3 || nout > CUDNN_DIM_MAX || nw > CUDNN_DIM_MAX || out[1] != w[0])
        return -1;
    uint64_t spatial = 1, k = 1;
    for (int i = 0; i < nout; i++)
        if (out[i] <= 0)
            return -1;
    for (int i = 0; i < nw; i++)
        if (w[i] <= 0)
            return -1;
    for (int i = 2; i < nout; i++)
        spatial = tp_mul_sat(spatial, (uint64_t)out[i]);
    for (int i = 1; i < nw; i++)
        k = tp_mul_sat(k, (uint64_t)w[i]);
    uint64_t f = tp_mul_sat(2, (uint64_t)out[0]);
    f = tp_mul_sat(f, (uint64_t)out[1]);
    f = tp_mul_sat(f, spatial);
    r->u.lib.flops = tp_mul_sat(f, k);
    r->u.lib.m = tp_sat32((uint64_t)out[0]);
    r->u.lib.n = tp_sat32((uint64_t)out[1]);
    r->u.lib.k = tp_sat32(k);
    r->u.lib.batch = tp_sat32(spatial);
    return 0;
}

unsigned tp_cudnn_dtype(int t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: return TP_DT_F32;
    case CUDNN_DATA_DOUBLE: return TP_DT_F64;
    case CUDNN_DATA_HALF: return TP_DT_F16;
    case CUDNN_DATA_BFLOAT16: return TP_DT_BF16;
    case CUDNN_DATA_FP8_E4M3: return TP_DT_F8E4M3;
    case CUDNN_DATA_FP8_E5M2: return TP_DT_F8E5M2;
    case CUDNN_DATA_INT8: case 5 /* INT8x4 */: case 8 /* INT8x32 */: return TP_DT_I8;
    case CUDNN_DATA_UINT8: case 7 /* UINT8x4 */: return TP_DT_U8;
    case CUDNN_DATA_INT32: return TP_DT_I32;
    case CUDNN_DATA_INT64: return TP_DT_I64;
    case CUDNN_DATA_UINT32: return TP_DT_U32;
    case CUDNN_DATA_COMPLEX_FP32: return TP_DT_C32;
    case CUDNN_DATA_COMPLEX_FP64: return TP_DT_C64;
    default: return TP_DT_UNKNOWN;
    }
}

unsigned tp_cudnn_precision(int t, int math)
{
    switch (t) {
    case CUDNN_DATA_FLOAT:
        if (math == CUDNN_FMA_MATH)
            return TP_PREC_FP32;
        return math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? TP_PREC_FP16 : TP_PREC_TF32;
    case CUDNN_DATA_DOUBLE: return TP_PREC_FP64;
    case CUDNN_DATA_HALF: return TP_PREC_FP16;
    case CUDNN_DATA_BFLOAT16: return TP_PREC_BF16;
    case CUDNN_DATA_FP8_E4M3: case CUDNN_DATA_FP8_E5M2: return TP_PREC_FP8;
    case CUDNN_DATA_INT8: case 5: case 8: case CUDNN_DATA_UINT8: case 7: return TP_PREC_INT8;
    default: return TP_PREC_UNKNOWN;
    }
}
