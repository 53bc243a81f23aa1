/*
 * test_gemm.c - the pure GEMM decoding of collector/record/flops/gemm.c: FLOPs, sizes,
 * types and precision classes, with no library.  The Makefile links unit
 * tests against collector/ and handlers/ only, so the file is included.
 */
#include "collector/record/flops/gemm.c"

#include "tp_test.h"

static struct tp_record fill(int64_t m, int64_t n, int64_t k, int64_t b, int atype)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    tp_gemm_fill(&r, m, n, k, b, atype, TP_PREC_FP32);
    return r;
}

START_TEST(test_real_and_complex_flops)
{
    struct tp_record r = fill(10, 20, 30, 1, CUDA_R_32F);
    ck_assert_uint_eq(r.u.lib.flops, 2ull * 10 * 20 * 30);
    ck_assert_uint_eq(r.u.lib.m, 10);
    ck_assert_uint_eq(r.u.lib.n, 20);
    ck_assert_uint_eq(r.u.lib.k, 30);
    ck_assert_uint_eq(r.u.lib.batch, 1);
    ck_assert_uint_eq(r.u.lib.dtype, TP_DT_F32);
    ck_assert_uint_eq(r.u.lib.flags, 0);
    r = fill(7, 5, 3, 4, CUDA_C_64F);
    ck_assert_uint_eq(r.u.lib.flops, 8ull * 7 * 5 * 3 * 4);
    ck_assert_uint_eq(r.u.lib.flags, TP_LIB_COMPLEX);
    ck_assert_uint_eq(r.u.lib.dtype, TP_DT_C64);
}
END_TEST

START_TEST(test_saturation_and_negative)
{
    struct tp_record r = fill(5000000000ll, 2, 3, 1, CUDA_R_16F);
    ck_assert_uint_eq(r.u.lib.m, UINT32_MAX);
    ck_assert_uint_eq(r.u.lib.flops, 2ull * 5000000000ull * 2 * 3);
    r = fill(INT64_MAX, INT64_MAX, 2, 1, CUDA_R_32F);
    ck_assert_uint_eq(r.u.lib.flops, UINT64_MAX);
    r = fill(-1, 4, 4, 1, CUDA_R_32F);
    ck_assert_uint_eq(r.u.lib.flops, 0);
    ck_assert_uint_eq(r.u.lib.m, 0);
    r = fill(4, 4, 4, 0, CUDA_R_32F);
    ck_assert_uint_eq(r.u.lib.flops, 0);
}
END_TEST

START_TEST(test_grouped)
{
    int m[2] = { 10, 11 }, n[2] = { 20, 21 }, k[2] = { 30, 31 }, s[2] = { 2, 3 };
    struct tp_record r;
    memset(&r, 0, sizeof r);
    tp_gemm_fill_grouped32(&r, m, n, k, s, 2, CUDA_R_32F, TP_PREC_FP32);
    ck_assert_uint_eq(r.u.lib.flops, 2ull * 10 * 20 * 30 * 2 + 2ull * 11 * 21 * 31 * 3);
    ck_assert_uint_eq(r.u.lib.m, 10);
    ck_assert_uint_eq(r.u.lib.batch, 5);
    int64_t m6[1] = { 4 }, n6[1] = { 5 }, k6[1] = { 6 }, s6[1] = { 7 };
    tp_gemm_fill_grouped64(&r, m6, n6, k6, s6, 1, CUDA_C_32F, TP_PREC_FP32);
    ck_assert_uint_eq(r.u.lib.flops, 8ull * 4 * 5 * 6 * 7);
    tp_gemm_fill_grouped64(&r, NULL, n6, k6, s6, 1, CUDA_R_32F, TP_PREC_FP32);
    ck_assert_uint_eq(r.u.lib.flops, 0);
    ck_assert_uint_eq(r.u.lib.m, 0);
    tp_gemm_fill_grouped32(&r, m, n, k, s, 0, CUDA_R_32F, TP_PREC_FP32);
    ck_assert_uint_eq(r.u.lib.flops, 0);
}
END_TEST

static const struct { int atype, ct, mode; unsigned want; } prec_cases[] = {
    { CUDA_R_32F, TP_GEMM_CT_NONE, CUBLAS_DEFAULT_MATH, TP_PREC_FP32 },
    { CUDA_R_32F, TP_GEMM_CT_NONE, CUBLAS_TF32_TENSOR_OP_MATH, TP_PREC_TF32 },
    /* flags above the low nibble do not hide TF32 */
    { CUDA_R_32F, TP_GEMM_CT_NONE, CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, TP_PREC_TF32 },
    { CUDA_R_32F, TP_GEMM_CT_NONE, CUBLAS_PEDANTIC_MATH, TP_PREC_FP32 },
    { CUDA_C_32F, TP_GEMM_CT_NONE, CUBLAS_TF32_TENSOR_OP_MATH, TP_PREC_TF32 },
    { CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_TF32_TENSOR_OP_MATH, TP_PREC_TF32 },
    { CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_DEFAULT_MATH, TP_PREC_FP32 },
    { CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_TF32_TENSOR_OP_MATH, TP_PREC_FP32 },
    { CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 0, TP_PREC_TF32 },
    { CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16F, 0, TP_PREC_FP16 },
    { CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16BF, 0, TP_PREC_BF16 },
    { CUDA_R_32F, CUBLAS_COMPUTE_32F_EMULATED_16BFX9, 0, TP_PREC_FP32 },
    { CUDA_R_16F, CUBLAS_COMPUTE_32F, CUBLAS_TF32_TENSOR_OP_MATH, TP_PREC_FP16 },
    { CUDA_R_16F, CUBLAS_COMPUTE_16F, 0, TP_PREC_FP16 },
    { CUDA_R_16F, TP_GEMM_CT_NONE, 0, TP_PREC_FP16 },
    { CUDA_R_16BF, CUBLAS_COMPUTE_32F, 0, TP_PREC_BF16 },
    { CUDA_R_8F_E4M3, CUBLAS_COMPUTE_32F, 0, TP_PREC_FP8 },
    { CUDA_R_8F_E5M2, CUBLAS_COMPUTE_32F, 0, TP_PREC_FP8 },
    { CUDA_R_8I, CUBLAS_COMPUTE_32I, 0, TP_PREC_INT8 },
    { CUDA_R_8I, TP_GEMM_CT_NONE, 0, TP_PREC_INT8 },
    { CUDA_R_64F, CUBLAS_COMPUTE_64F, 0, TP_PREC_FP64 },
    { CUDA_C_64F, TP_GEMM_CT_NONE, CUBLAS_TF32_TENSOR_OP_MATH, TP_PREC_FP64 },
    { CUDA_R_32I, TP_GEMM_CT_NONE, 0, TP_PREC_UNKNOWN },
    { CUDA_R_32F, 12345, 0, TP_PREC_UNKNOWN },
    /* compute types as cudaDataType (CUDA 10 code, C callers of cublasGemmEx),
     * read as cublasMigrateComputeType maps them */
    { CUDA_R_32F, CUDA_R_32F, CUBLAS_DEFAULT_MATH, TP_PREC_FP32 },
    { CUDA_R_32F, CUDA_R_32F, CUBLAS_TF32_TENSOR_OP_MATH, TP_PREC_TF32 },
    { CUDA_C_32F, CUDA_C_32F, CUBLAS_PEDANTIC_MATH, TP_PREC_FP32 },
    { CUDA_R_32F, CUDA_R_64F, 0, TP_PREC_FP64 },
    { CUDA_R_16F, CUDA_R_16F, 0, TP_PREC_FP16 },
    { CUDA_R_16F, CUDA_R_32F, 0, TP_PREC_FP16 },
    { CUDA_R_8I, CUDA_R_32I, 0, TP_PREC_INT8 },
};

START_TEST(test_precision_table)
{
    ck_assert_msg(tp_gemm_precision(prec_cases[_i].atype, prec_cases[_i].ct, prec_cases[_i].mode) ==
                      prec_cases[_i].want,
                  "case %d: atype %d ct %d mode %d", _i, prec_cases[_i].atype, prec_cases[_i].ct,
                  prec_cases[_i].mode);
}
END_TEST

START_TEST(test_needs_mode_and_types)
{
    ck_assert_int_eq(tp_gemm_needs_mode(CUDA_R_32F, TP_GEMM_CT_NONE), 1);
    ck_assert_int_eq(tp_gemm_needs_mode(CUDA_R_32F, CUBLAS_COMPUTE_32F), 1);
    ck_assert_int_eq(tp_gemm_needs_mode(CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32), 0);
    ck_assert_int_eq(tp_gemm_needs_mode(CUDA_R_16F, CUBLAS_COMPUTE_32F), 0);
    ck_assert_int_eq(tp_gemm_needs_mode(CUDA_R_64F, TP_GEMM_CT_NONE), 0);
    ck_assert_int_eq(tp_gemm_needs_mode(CUDA_R_32F, CUDA_R_32F), 1);   /* a cudaDataType compute type */
    ck_assert_int_eq(tp_gemm_needs_mode(CUDA_R_32F, CUDA_R_64F), 0);
    ck_assert_uint_eq(tp_gemm_dtype(CUDA_R_16BF), TP_DT_BF16);
    ck_assert_uint_eq(tp_gemm_dtype(CUDA_R_8F_E4M3), TP_DT_F8E4M3);
    ck_assert_uint_eq(tp_gemm_dtype(CUDA_C_32F), TP_DT_C32);
    ck_assert_uint_eq(tp_gemm_dtype(CUDA_R_4F_E2M1), TP_DT_UNKNOWN);
    ck_assert_int_eq(tp_gemm_is_complex(CUDA_C_16BF), 1);
    ck_assert_int_eq(tp_gemm_is_complex(CUDA_R_64F), 0);
}
END_TEST

static Suite *gemm_suite(void)
{
    Suite *s = suite_create("gemm");
    TCase *t = tcase_create("gemm");
    tcase_add_test(t, test_real_and_complex_flops);
    tcase_add_test(t, test_saturation_and_negative);
    tcase_add_test(t, test_grouped);
    tcase_add_loop_test(t, test_precision_table, 0, (int)(sizeof prec_cases / sizeof prec_cases[0]));
    tcase_add_test(t, test_needs_mode_and_types);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(gemm_suite());
}
