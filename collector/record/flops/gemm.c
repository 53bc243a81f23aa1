/*
 * gemm.c - DESIGN: the arithmetic of the cuBLAS/cuBLASLt wrappers
 * (preload/cublas.c, cublaslt.c), kept in the collector apart from them -
 * preload/ holds entry points only - so that a unit test checks it without
 * any library.
 * FLOPs follow torch.utils.flop_counter (one multiply-add = 2 FLOPs, alpha,
 * beta and epilogues ignored) and LAWN 41 for complex (8 per complex MAC);
 * products saturate instead of wrapping, so an absurd shape shows as
 * UINT64_MAX rather than as a small number.  The precision rules are
 * tp_gemm_precision's (gemm.h).
 */
#include "gemm.h"

#include <cublas_api.h>
#include <library_types.h>

static uint64_t tp_gemm_u64(int64_t v)
{
    return v > 0 ? (uint64_t)v : 0;
}

static uint32_t tp_gemm_u32(int64_t v)
{
    return v <= 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* a * b, saturated at UINT64_MAX */
static uint64_t tp_gemm_mul(uint64_t a, uint64_t b)
{
    uint64_t p;
    return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

static uint64_t tp_gemm_add(uint64_t a, uint64_t b)
{
    uint64_t s;
    return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

static uint64_t tp_gemm_flops(int64_t m, int64_t n, int64_t k, int64_t batch, int cplx)
{
    uint64_t f = tp_gemm_mul(cplx ? 8 : 2, tp_gemm_u64(m));
    f = tp_gemm_mul(f, tp_gemm_u64(n));
    f = tp_gemm_mul(f, tp_gemm_u64(k));
    return tp_gemm_mul(f, tp_gemm_u64(batch));
}

int tp_gemm_is_complex(int atype)
{
    switch (atype) {
    case CUDA_C_16F: case CUDA_C_16BF: case CUDA_C_32F: case CUDA_C_64F: case CUDA_C_4I:
    case CUDA_C_4U: case CUDA_C_8I: case CUDA_C_8U: case CUDA_C_16I: case CUDA_C_16U:
    case CUDA_C_32I: case CUDA_C_32U: case CUDA_C_64I: case CUDA_C_64U:
        return 1;
    default:
        return 0;
    }
}

unsigned tp_gemm_dtype(int atype)
{
    switch (atype) {
    case CUDA_R_32F: return TP_DT_F32;
    case CUDA_R_64F: return TP_DT_F64;
    case CUDA_R_16F: return TP_DT_F16;
    case CUDA_R_16BF: return TP_DT_BF16;
    case CUDA_R_8F_E4M3: return TP_DT_F8E4M3;
    case CUDA_R_8F_E5M2: return TP_DT_F8E5M2;
    case CUDA_R_8I: return TP_DT_I8;
    case CUDA_R_8U: return TP_DT_U8;
    case CUDA_R_32I: return TP_DT_I32;
    case CUDA_R_32U: return TP_DT_U32;
    case CUDA_R_64I: return TP_DT_I64;
    case CUDA_R_64U: return TP_DT_U64;
    case CUDA_C_32F: return TP_DT_C32;
    case CUDA_C_64F: return TP_DT_C64;
    default: return TP_DT_UNKNOWN;
    }
}

void tp_gemm_fill(struct tp_record *r, int64_t m, int64_t n, int64_t k, int64_t batch,
                  int atype, unsigned prec)
{
    int cplx = tp_gemm_is_complex(atype);
    r->u.lib.flops = tp_gemm_flops(m, n, k, batch, cplx);
    r->u.lib.m = tp_gemm_u32(m);
    r->u.lib.n = tp_gemm_u32(n);
    r->u.lib.k = tp_gemm_u32(k);
    r->u.lib.batch = tp_gemm_u32(batch);
    r->u.lib.dtype = (uint8_t)tp_gemm_dtype(atype);
    r->u.lib.precision = (uint8_t)prec;
    r->u.lib.flags = cplx ? TP_LIB_COMPLEX : 0;
}

/* One body for the int and int64_t array forms of the grouped calls. */
#define TP_GEMM_GROUPED(r, m, n, k, size, count, atype, prec)                          \
    do {                                                                               \
        int64_t total_ = 0;                                                            \
        uint64_t flops_ = 0;                                                           \
        int cplx_ = tp_gemm_is_complex(atype);                                         \
        if ((m) && (n) && (k) && (size))                                               \
            for (int64_t g_ = 0; g_ < (count); g_++) {                                 \
                flops_ = tp_gemm_add(flops_, tp_gemm_flops((m)[g_], (n)[g_], (k)[g_],  \
                                                           (size)[g_], cplx_));        \
                total_ += (size)[g_] > 0 ? (size)[g_] : 0;                             \
            }                                                                          \
        int some_ = (m) && (n) && (k) && (size) && (count) > 0;                        \
        tp_gemm_fill(r, some_ ? (m)[0] : 0, some_ ? (n)[0] : 0, some_ ? (k)[0] : 0,    \
                     total_, atype, prec);                                             \
        (r)->u.lib.flops = flops_;                                                     \
    } while (0)

void tp_gemm_fill_grouped32(struct tp_record *r, const int *m, const int *n, const int *k,
                            const int *size, int64_t count, int atype, unsigned prec)
{
    TP_GEMM_GROUPED(r, m, n, k, size, count, atype, prec);
}

void tp_gemm_fill_grouped64(struct tp_record *r, const int64_t *m, const int64_t *n,
                            const int64_t *k, const int64_t *size, int64_t count, int atype,
                            unsigned prec)
{
    TP_GEMM_GROUPED(r, m, n, k, size, count, atype, prec);
}

/* The class of 16-bit, 8-bit and double data, whatever the compute type;
 * TP_PREC_UNKNOWN for float data and the rest. */
static unsigned tp_gemm_data_class(int atype)
{
    switch (atype) {
    case CUDA_R_16F: case CUDA_C_16F: return TP_PREC_FP16;
    case CUDA_R_16BF: case CUDA_C_16BF: return TP_PREC_BF16;
    case CUDA_R_8F_E4M3: case CUDA_R_8F_E5M2: return TP_PREC_FP8;
    case CUDA_R_8I: case CUDA_C_8I: case CUDA_R_8U: case CUDA_C_8U: return TP_PREC_INT8;
    case CUDA_R_64F: case CUDA_C_64F: return TP_PREC_FP64;
    default: return TP_PREC_UNKNOWN;
    }
}

static int tp_gemm_is_float(int atype)
{
    return atype == CUDA_R_32F || atype == CUDA_C_32F;
}

/* A compute type given as a cudaDataType, as code built against CUDA 10
 * headers (and C callers, which the C++ inline wrapper of cublas_api.h does
 * not reach) pass it to cublasGemmEx, read as the cublasComputeType_t that
 * cublasMigrateComputeType maps it to; any other value is returned as it
 * is (the cudaDataType values, 0 to 31, are below CUBLAS_COMPUTE_16F, 64).
 * Pedantic math would pick the _PEDANTIC types: the same precision class. */
static int tp_gemm_compute(int ct)
{
    switch (ct) {
    case CUDA_R_32F: case CUDA_C_32F: return CUBLAS_COMPUTE_32F;
    case CUDA_R_64F: case CUDA_C_64F: return CUBLAS_COMPUTE_64F;
    case CUDA_R_16F: return CUBLAS_COMPUTE_16F;
    case CUDA_R_32I: return CUBLAS_COMPUTE_32I;
    default: return ct;
    }
}

int tp_gemm_needs_mode(int atype, int ct)
{
    ct = tp_gemm_compute(ct);
    return tp_gemm_is_float(atype) && (ct == TP_GEMM_CT_NONE || ct == CUBLAS_COMPUTE_32F);
}

unsigned tp_gemm_precision(int atype, int ct, int mode)
{
    ct = tp_gemm_compute(ct);
    switch (ct) {
    case CUBLAS_COMPUTE_32F_FAST_16F: return TP_PREC_FP16;
    case CUBLAS_COMPUTE_32F_FAST_16BF: return TP_PREC_BF16;
    case CUBLAS_COMPUTE_32F_FAST_TF32: return TP_PREC_TF32;
    case CUBLAS_COMPUTE_16F: case CUBLAS_COMPUTE_16F_PEDANTIC: return TP_PREC_FP16;
    case CUBLAS_COMPUTE_64F: case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: return TP_PREC_FP64;
    case CUBLAS_COMPUTE_32I: case CUBLAS_COMPUTE_32I_PEDANTIC: return TP_PREC_INT8;
    default: break;
    }
    unsigned data = tp_gemm_data_class(atype);
    if (data != TP_PREC_UNKNOWN)
        return data;
    if (!tp_gemm_is_float(atype))
        return TP_PREC_UNKNOWN;
    switch (ct) {
    case TP_GEMM_CT_NONE:
    case CUBLAS_COMPUTE_32F:
        return (mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH ? TP_PREC_TF32 : TP_PREC_FP32;
    /* BF16X9 emulation returns FP32 accuracy: counted against the FP32 peak */
    case CUBLAS_COMPUTE_32F_PEDANTIC: case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
        return TP_PREC_FP32;
    default:
        return TP_PREC_UNKNOWN;
    }
}
