/*
 * test_blas.c - the counts of collector/record/flops/blas.c at their edges, with
 * no library: small cases counted by hand from the algorithms, sizes that
 * overflow 64 bits, negative sizes, the fields tp_blas_fill sets.  Every
 * routine's count against its formula for many sizes is
 * tests/preload/test_blas.py's.
 */
#include <check.h>
#include <string.h>

#include <library_types.h>

#include "collector/record/flops/blas.h"
#include "tests/unit/tp_test.h"

#define FL(op, right, m, n, k, b, c) tp_blas_flops(TP_BLAS_##op, right, m, n, k, b, c)

START_TEST(test_small_cases_by_hand)
{
    /* LU of 1 x 1: the pivot's reciprocal (LAWN 41 counts one per column, as a
     * multiplication) */
    ck_assert_uint_eq(FL(GETRF, 0, 0, 1, 0, 1, 0), 1);
    /* LU of 2 x 2: two reciprocals, the multiplier l21, the update a22 - l21 u12
     * (a product and a sum) */
    ck_assert_uint_eq(FL(GETRF, 0, 0, 2, 0, 1, 0), 2 + 1 + 1 + 1);
    /* trmv of 2 x 2: 3 products, 1 sum; complex 6*3 + 2*1 */
    ck_assert_uint_eq(FL(TRMV, 0, 0, 2, 0, 1, 0), 4);
    ck_assert_uint_eq(FL(TRSV, 0, 0, 2, 0, 1, 1), 20);
    /* the triangle of syr, 3 x 3: 6 elements, one multiply-add each */
    ck_assert_uint_eq(FL(SYR, 0, 0, 3, 0, 1, 0), 12);
    /* Crot 20n, Csrot 12n, Srot 6n; Csscal 2n, Cscal 6n; Scnrm2 4n, Scasum 2n */
    ck_assert_uint_eq(FL(ROT, 0, 0, 10, 0, 1, 1), 200);
    ck_assert_uint_eq(FL(RROT, 0, 0, 10, 0, 1, 1), 120);
    ck_assert_uint_eq(FL(ROT, 0, 0, 10, 0, 1, 0), 60);
    ck_assert_uint_eq(FL(RSCAL, 0, 0, 10, 0, 1, 1), 20);
    ck_assert_uint_eq(FL(SCAL, 0, 0, 10, 0, 1, 1), 60);
    ck_assert_uint_eq(FL(NRM2, 0, 0, 10, 0, 1, 1), 40);
    ck_assert_uint_eq(FL(ASUM, 0, 0, 10, 0, 1, 1), 20);
    /* side: symm 2 m^2 n left, 2 m n^2 right; trsm n m^2 left, m n^2 right */
    ck_assert_uint_eq(FL(SYMM, 0, 3, 5, 0, 1, 0), 2 * 9 * 5);
    ck_assert_uint_eq(FL(SYMM, 1, 3, 5, 0, 1, 0), 2 * 3 * 25);
    ck_assert_uint_eq(FL(TRSM, 0, 3, 5, 0, 2, 0), 5 * 9 * 2);
    ck_assert_uint_eq(FL(TRSM, 1, 3, 5, 0, 2, 0), 3 * 25 * 2);
    /* no FLOPs: compares, copies, scalar setup */
    ck_assert_uint_eq(FL(IAMAX, 0, 0, 100, 0, 1, 1), 0);
    ck_assert_uint_eq(FL(COPY, 0, 0, 100, 0, 1, 0), 0);
    ck_assert_uint_eq(FL(ROTG, 0, 0, 0, 0, 1, 0), 0);
}
END_TEST

START_TEST(test_qr_branches_and_gels)
{
    /* geqrf: LAWN 41's polynomials for m > n and m <= n, evaluated by hand */
    ck_assert_uint_eq(FL(GEQRF, 0, 3, 2, 0, 1, 0), 25 + 13);
    ck_assert_uint_eq(FL(GEQRF, 0, 2, 3, 0, 1, 0), 27 + 15);
    for (uint64_t n = 1; n < 40; n++) {
        /* m == n: 6M = 4n^3 + 9n^2 + 23n, 6A = 4n^3 + 3n^2 + 5n from either */
        uint64_t at = FL(GEQRF, 0, (int64_t)n, (int64_t)n, 0, 1, 0);
        ck_assert_uint_eq(at, (8 * n * n * n + 12 * n * n + 28 * n) / 6);
        ck_assert_uint_gt(FL(GEQRF, 0, (int64_t)n + 1, (int64_t)n, 0, 1, 0), at);
        ck_assert_uint_gt(FL(GEQRF, 0, (int64_t)n, (int64_t)n + 1, 0, 1, 0), at);
    }
    /* gels: geqrf plus the solve; cuBLAS serves m >= n only */
    ck_assert_uint_gt(FL(GELS, 0, 9, 4, 2, 1, 0), FL(GEQRF, 0, 9, 4, 0, 1, 0));
    ck_assert_uint_eq(FL(GELS, 0, 9, 4, 0, 1, 0), FL(GEQRF, 0, 9, 4, 0, 1, 0));
    ck_assert_uint_eq(FL(GELS, 0, 4, 9, 2, 1, 0), 0);
}
END_TEST

START_TEST(test_saturation_and_negative)
{
    ck_assert_uint_eq(FL(TRMM, 0, INT64_MAX, INT64_MAX, 0, 1, 1), UINT64_MAX);
    ck_assert_uint_eq(FL(GEQRF, 0, INT64_MAX, INT64_MAX, 0, 1, 0), UINT64_MAX);
    ck_assert_uint_eq(FL(GETRF, 0, 0, 1 << 30, 0, INT64_MAX, 0), UINT64_MAX);
    ck_assert_uint_eq(FL(GELS, 0, INT64_MAX, 3, INT64_MAX, INT64_MAX, 1), UINT64_MAX);
    /* exact above 2^64 / 8 for one size: 8n complex axpy */
    ck_assert_uint_eq(FL(AXPY, 0, 0, 1ll << 60, 0, 1, 1), 1ull << 63);
    ck_assert_uint_eq(FL(AXPY, 0, 0, 1ll << 61, 0, 1, 1), UINT64_MAX);
    ck_assert_uint_eq(FL(GEMV, 0, -5, 10, 0, 1, 0), 0);
    ck_assert_uint_eq(FL(GETRF, 0, 0, -3, 0, 1, 0), 0);
    ck_assert_uint_eq(FL(SYR2K, 0, 0, 4, 3, -1, 0), 0);
    ck_assert_uint_eq(tp_blas_copy_bytes(3, 4, 16), 192);
    ck_assert_uint_eq(tp_blas_copy_bytes(INT64_MAX, INT64_MAX, 8), UINT64_MAX);
    ck_assert_uint_eq(tp_blas_copy_bytes(-1, 4, 8), 0);
}
END_TEST

START_TEST(test_fill)
{
    struct tp_record r;
    memset(&r, 0xff, sizeof r);
    tp_blas_fill(&r, TP_BLAS_GELS, 0, 12, 5, 3, 7, CUDA_C_64F, TP_PREC_FP64);
    ck_assert_uint_eq(r.u.lib.flops, FL(GELS, 0, 12, 5, 3, 7, 1));
    ck_assert_uint_eq(r.u.lib.m, 12);
    ck_assert_uint_eq(r.u.lib.n, 5);
    ck_assert_uint_eq(r.u.lib.k, 3);
    ck_assert_uint_eq(r.u.lib.batch, 7);
    ck_assert_uint_eq(r.u.lib.op, TP_BLAS_HAS_M | TP_BLAS_HAS_N | TP_BLAS_HAS_NRHS);
    ck_assert_uint_eq(r.u.lib.flags, TP_LIB_BLAS | TP_LIB_COMPLEX);
    ck_assert_uint_eq(r.u.lib.dtype, TP_DT_C64);
    ck_assert_uint_eq(r.u.lib.precision, TP_PREC_FP64);
    ck_assert_uint_eq(r.u.lib.bytes, 0);
    /* sizes a routine lacks are 0 whatever is passed; copy and swap have bytes */
    tp_blas_fill(&r, TP_BLAS_SWAP, 0, 9, 5000000000ll, 9, 1, CUDA_R_64F, TP_PREC_FP64);
    ck_assert_uint_eq(r.u.lib.m, 0);
    ck_assert_uint_eq(r.u.lib.n, UINT32_MAX);
    ck_assert_uint_eq(r.u.lib.k, 0);
    ck_assert_uint_eq(r.u.lib.op, TP_BLAS_HAS_N);
    ck_assert_uint_eq(r.u.lib.bytes, 5000000000ull * 8);
    ck_assert_uint_eq(r.u.lib.flags, TP_LIB_BLAS);
    tp_blas_fill(&r, TP_BLAS_ROTMG, 0, 1, 1, 1, 1, CUDA_R_32F, TP_PREC_FP32);
    ck_assert_uint_eq(r.u.lib.op, 0);
    ck_assert_uint_eq(r.u.lib.n, 0);
    ck_assert_int_eq(tp_blas_level3(TP_BLAS_TRSM), 1);
    ck_assert_int_eq(tp_blas_level3(TP_BLAS_GEMV), 0);
    ck_assert_int_eq(tp_blas_level3(TP_BLAS_GETRF), 0);
}
END_TEST

static Suite *blas_suite(void)
{
    Suite *s = suite_create("blas");
    TCase *t = tcase_create("blas");
    tcase_add_test(t, test_small_cases_by_hand);
    tcase_add_test(t, test_qr_branches_and_gels);
    tcase_add_test(t, test_saturation_and_negative);
    tcase_add_test(t, test_fill);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(blas_suite());
}
