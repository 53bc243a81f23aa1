/*
 * test_conv.c - the pure convolution helpers of collector/record/flops/conv.c: FLOPs and
 * implicit-GEMM shape from dims (plain, grouped, strided, 3-D, saturation,
 * rejects), cuDNN data and math types to dtype and precision class.
 */
#include <check.h>
#include <string.h>

#include "collector/record/flops/conv.c"
#include "tests/unit/tp_test.h"

static struct tp_record fill(const int64_t *out, int no, const int64_t *w, int nw, int *rc)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    *rc = tp_conv_fill(&r, out, no, w, nw);
    return r;
}

START_TEST(test_shapes)
{
    int rc;
    /* N=2, C=8, 16x16, K=16, 3x3, stride 1 pad 1 */
    int64_t y[4] = { 2, 16, 16, 16 }, w[4] = { 16, 8, 3, 3 };
    struct tp_record r = fill(y, 4, w, 4, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(r.u.lib.flops, 2ull * (2 * 16 * 16 * 16) * 8 * 9);
    ck_assert_uint_eq(r.u.lib.m, 2);
    ck_assert_uint_eq(r.u.lib.n, 16);
    ck_assert_uint_eq(r.u.lib.k, 72);
    ck_assert_uint_eq(r.u.lib.batch, 256);
    /* groups 4: the filter holds C/groups = 2 */
    int64_t wg[4] = { 16, 2, 3, 3 };
    r = fill(y, 4, wg, 4, &rc);
    ck_assert_uint_eq(r.u.lib.flops, 2ull * (2 * 16 * 16 * 16) * 2 * 9);
    /* stride 2: 8x8 output */
    int64_t ys[4] = { 2, 16, 8, 8 };
    r = fill(ys, 4, w, 4, &rc);
    ck_assert_uint_eq(r.u.lib.flops, 2ull * (2 * 16 * 8 * 8) * 8 * 9);
    ck_assert_uint_eq(r.u.lib.batch, 64);
    /* 3-D */
    int64_t y3[5] = { 1, 8, 3, 3, 3 }, w3[5] = { 8, 2, 3, 3, 3 };
    r = fill(y3, 5, w3, 5, &rc);
    ck_assert_uint_eq(r.u.lib.flops, 2ull * 8 * 27 * 2 * 27);
    ck_assert_uint_eq(r.u.lib.k, 54);
}
END_TEST

START_TEST(test_saturation_and_rejects)
{
    int rc;
    int64_t big[4] = { 1 << 20, 1 << 20, 1 << 20, 1 << 20 }, w[4] = { 1 << 20, 1 << 20, 1 << 20, 1 };
    struct tp_record r = fill(big, 4, w, 4, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(r.u.lib.flops, UINT64_MAX);
    ck_assert_uint_eq(r.u.lib.k, UINT32_MAX);
    ck_assert_uint_eq(r.u.lib.batch, UINT32_MAX);
    int64_t y[4] = { 2, 16, 16, 16 }, wk[4] = { 8, 8, 3, 3 }, wz[4] = { 16, 0, 3, 3 };
    r = fill(y, 4, wk, 4, &rc);
    ck_assert_int_eq(rc, -1);
    ck_assert_uint_eq(r.u.lib.flops, 0);
    r = fill(y, 4, wz, 4, &rc);
    ck_assert_int_eq(rc, -1);
    r = fill(y, 2, wk, 2, &rc);
    ck_assert_int_eq(rc, -1);
}
END_TEST

START_TEST(test_types)
{
    ck_assert_uint_eq(tp_cudnn_dtype(CUDNN_DATA_FLOAT), TP_DT_F32);
    ck_assert_uint_eq(tp_cudnn_dtype(CUDNN_DATA_HALF), TP_DT_F16);
    ck_assert_uint_eq(tp_cudnn_dtype(CUDNN_DATA_BFLOAT16), TP_DT_BF16);
    ck_assert_uint_eq(tp_cudnn_dtype(CUDNN_DATA_FP8_E4M3), TP_DT_F8E4M3);
    ck_assert_uint_eq(tp_cudnn_dtype(CUDNN_DATA_INT8), TP_DT_I8);
    ck_assert_uint_eq(tp_cudnn_dtype(999), TP_DT_UNKNOWN);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH), TP_PREC_TF32);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH), TP_PREC_TF32);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_FLOAT, CUDNN_FMA_MATH), TP_PREC_FP32);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION),
                      TP_PREC_FP16);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_HALF, CUDNN_FMA_MATH), TP_PREC_FP16);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_BFLOAT16, CUDNN_DEFAULT_MATH), TP_PREC_BF16);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH), TP_PREC_FP64);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_FP8_E5M2, CUDNN_DEFAULT_MATH), TP_PREC_FP8);
    ck_assert_uint_eq(tp_cudnn_precision(CUDNN_DATA_INT8, CUDNN_DEFAULT_MATH), TP_PREC_INT8);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_shapes);
    tcase_add_test(tc, test_saturation_and_rejects);
    tcase_add_test(tc, test_types);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
