/*
 * blas.c - DESIGN: the arithmetic of the cuBLAS wrappers for the routines
 * that are not matrix products (preload/cublas.c), kept apart from them as
 * gemm.c is, so that a unit test checks every count without a library.
 *
 * Every routine is counted as multiplications M and additions A, the way
 * LAPACK Working Note 41 (Anderson, Dongarra, Ostrouchov: "Installation
 * Guide for LAPACK", appendix "Operation counts") states them, alpha and
 * beta scaling ignored as for the GEMMs (gemm.c).  FLOPs = M + A on real
 * data and 6 M + 2 A on complex data (LAWN 41: a complex multiplication is
 * 6 real operations, a complex addition 2), so a multiply-add routine on
 * complex data counts 4x its real count, a multiply-only one (scal) 6x.
 * Routines that mix a real scalar with complex data, or read complex data
 * into a real result, are counted in real operations directly ("mixed").
 *
 *   routine              M                      A                     real total
 *   dot, dotc/u, DotEx   n                      n                     2n
 *   axpy                 n                      n                     2n
 *   scal                 n                      0                     n  (complex 6n)
 *   Csscal, Zdscal       2n (mixed)             0                     2n
 *   nrm2                 n                      n                     2n (Scnrm2: 4n, mixed)
 *   asum                 0                      n                     n  (Scasum: 2n, mixed)
 *   amax, amin           0                      0                     0  (compares only)
 *   rot                  4n                     2n                    6n (Crot: 20n, mixed)
 *   Csrot, Zdrot         8n (mixed)             4n                    12n
 *   rotm                 4n                     2n                    6n (full H: upper bound)
 *   rotg, rotmg, copy, swap                                           0
 *   gemv, ger            mn                     mn                    2mn
 *   symv, hemv           n^2                    n^2                   2n^2
 *   syr, her             n(n+1)/2               n(n+1)/2              n(n+1)
 *   syr2, her2           n(n+1)                 n(n+1)                2n(n+1)
 *   trmv, trsv           n(n+1)/2               n(n-1)/2              n^2
 *   symm, hemm  left     m^2 n                  m^2 n                 2m^2 n
 *               right    m n^2                  m n^2                 2mn^2
 *   syrk, herk           kn(n+1)/2              kn(n+1)/2             kn(n+1)
 *   syr2k, her2k         kn^2                   kn^2 + n              2kn^2 + n
 *   trmm, trsm  left     nm(m+1)/2              nm(m-1)/2             nm^2
 *               right    mn(n+1)/2              mn(n-1)/2             mn^2
 *   getrf (n x n)        n^3/3 + 2n/3           n^3/3 - n^2/2 + n/6   ~(2/3)n^3
 *   getrs                nrhs n^2               nrhs n(n-1)           ~2 nrhs n^2
 *   geqrf (m >= n)       mn^2 - n^3/3 + n^2/2   mn^2 - n^3/3 + n^2/2  ~2mn^2 - (2/3)n^3
 *                        + mn + 23n/6           + 5n/6
 *         (m < n)        m^2 n - m^3/3 - m^2/2  m^2 n - m^3/3 - m^2/2
 *                        + 2mn + 23m/6          + mn + 5m/6
 *   gels (m >= n)        geqrf + nrhs n(2m - n/2 + 5/2)   geqrf + nrhs n(2m - n/2 + 1/2)
 *
 * The level 3 and LAPACK rows are LAWN 41's, as the PLASMA/MAGMA testing
 * headers (flops.h) transcribe them: getrf, geqrf and the geqrs term of
 * gels are its exact polynomials, not their leading terms.  gemv, ger,
 * symv and trmv/trsv count the same way: one multiplication and one
 * addition per element of the matrix applied (symv: all n^2), trmv's
 * diagonal without the addition.  Approximations, all in lower-order terms: the level 1 rows
 * are textbook counts (n additions for a sum of n terms rather than n - 1);
 * syr and syr2 count one (two) multiply-adds per stored element of the
 * triangle, n(n+1)/2 of them, the n multiplications by alpha ignored; rotm
 * counts the full 2x2 H (flag -1) whatever the flag, which cuBLAS may keep
 * in device memory: an upper bound.  cuBLAS serves gelsBatched for
 * overdetermined systems (m >= n) only: m < n counts 0.  Batched forms are
 * the count times the batch.
 *
 * Each count is kept as 6 M and 6 A so that the halves and sixths of the
 * polynomials stay exact integers, in unsigned 128-bit arithmetic that
 * saturates (a size is below 2^63: products of three can overflow even
 * 128 bits); the total saturates at UINT64_MAX, as gemm.c's do.
 */
#include "blas.h"
#include "gemm.h"

typedef unsigned __int128 tp_u128;

#define TP_U128_MAX (~(tp_u128)0)

static tp_u128 tp_mul(tp_u128 a, tp_u128 b)
{
    tp_u128 p;
    return __builtin_mul_overflow(a, b, &p) ? TP_U128_MAX : p;
}

static tp_u128 tp_add(tp_u128 a, tp_u128 b)
{
    tp_u128 s;
    return __builtin_add_overflow(a, b, &s) ? TP_U128_MAX : s;
}

/* a - b of a count known to be >= 0; a saturated a stays saturated */
static tp_u128 tp_sub(tp_u128 a, tp_u128 b)
{
    return a == TP_U128_MAX ? a : a > b ? a - b : 0;
}

static tp_u128 tp_mul3(tp_u128 a, tp_u128 b, tp_u128 c)
{
    return tp_mul(tp_mul(a, b), c);
}

static tp_u128 tp_size(int64_t v)
{
    return v > 0 ? (tp_u128)v : 0;
}

/* 6 M and 6 A of one call; "mixed" when they are already real operations
 * on complex data */
struct tp_count {
    tp_u128 m6, a6;
    int mixed;
};

static struct tp_count tp_geqrf(tp_u128 m, tp_u128 n)
{
    struct tp_count c = { 0, 0, 0 };
    if (m >= n) {
        /* 6M = 6mn^2 - 2n^3 + 3n^2 + 6mn + 23n, 6A = 6mn^2 - 2n^3 + 3n^2 + 5n */
        tp_u128 common = tp_sub(tp_add(tp_mul3(6, m, tp_mul(n, n)), tp_mul3(3, n, n)),
                                tp_mul3(2, n, tp_mul(n, n)));
        c.m6 = tp_add(common, tp_add(tp_mul3(6, m, n), tp_mul(23, n)));
        c.a6 = tp_add(common, tp_mul(5, n));
    } else {
        /* 6M = 6m^2n - 2m^3 - 3m^2 + 12mn + 23m, 6A = 6m^2n - 2m^3 - 3m^2 + 6mn + 5m */
        tp_u128 common = tp_sub(tp_mul3(6, tp_mul(m, m), n),
                                tp_add(tp_mul3(2, m, tp_mul(m, m)), tp_mul3(3, m, m)));
        c.m6 = tp_add(common, tp_add(tp_mul3(12, m, n), tp_mul(23, m)));
        c.a6 = tp_add(common, tp_add(tp_mul3(6, m, n), tp_mul(5, m)));
    }
    return c;
}

static struct tp_count tp_count(unsigned op, int right, tp_u128 m, tp_u128 n, tp_u128 k, int cplx)
{
    struct tp_count c = { 0, 0, 0 };
    switch (op) {
    case TP_BLAS_DOT: case TP_BLAS_AXPY:
        c.m6 = c.a6 = tp_mul(6, n);
        break;
    case TP_BLAS_SCAL:
        c.m6 = tp_mul(6, n);
        break;
    case TP_BLAS_RSCAL:
        c.m6 = tp_mul(12, n);
        c.mixed = 1;
        break;
    case TP_BLAS_NRM2:              /* the squares of the n (2n) real parts, summed */
        c.m6 = c.a6 = tp_mul(cplx ? 12 : 6, n);
        c.mixed = cplx;
        break;
    case TP_BLAS_ASUM:              /* sum of |x| (|Re| + |Im|) */
        c.a6 = tp_mul(cplx ? 12 : 6, n);
        c.mixed = cplx;
        break;
    case TP_BLAS_ROT:
        if (cplx) {                 /* c x + s y, -conj(s) x + c y: 2 real x complex
                                       (2 mults), 2 complex x complex (4 mults, 2 adds),
                                       2 complex adds */
            c.m6 = tp_mul(72, n);
            c.a6 = tp_mul(48, n);
            c.mixed = 1;
            break;
        }
        /* fall through */
    case TP_BLAS_ROTM:
        c.m6 = tp_mul(24, n);
        c.a6 = tp_mul(12, n);
        break;
    case TP_BLAS_RROT:              /* the real rot on 2n reals */
        c.m6 = tp_mul(48, n);
        c.a6 = tp_mul(24, n);
        c.mixed = 1;
        break;
    case TP_BLAS_GEMV: case TP_BLAS_GER:
        c.m6 = c.a6 = tp_mul3(6, m, n);
        break;
    case TP_BLAS_SYMV:
        c.m6 = c.a6 = tp_mul3(6, n, n);
        break;
    case TP_BLAS_SYR:
        c.m6 = c.a6 = tp_mul3(3, n, tp_add(n, 1));
        break;
    case TP_BLAS_SYR2:
        c.m6 = c.a6 = tp_mul3(6, n, tp_add(n, 1));
        break;
    case TP_BLAS_TRMV: case TP_BLAS_TRSV:
        c.m6 = tp_mul3(3, n, tp_add(n, 1));
        c.a6 = tp_mul3(3, n, tp_sub(n, 1));
        break;
    case TP_BLAS_SYMM:
        c.m6 = c.a6 = right ? tp_mul3(6, m, tp_mul(n, n)) : tp_mul3(6, tp_mul(m, m), n);
        break;
    case TP_BLAS_SYRK:
        c.m6 = c.a6 = tp_mul3(3, k, tp_mul(n, tp_add(n, 1)));
        break;
    case TP_BLAS_SYR2K:
        c.m6 = tp_mul3(6, k, tp_mul(n, n));
        c.a6 = tp_add(c.m6, tp_mul(6, n));
        break;
    case TP_BLAS_TRMM: case TP_BLAS_TRSM: {
        tp_u128 tri = right ? n : m, other = right ? m : n;
        c.m6 = tp_mul3(3, other, tp_mul(tri, tp_add(tri, 1)));
        c.a6 = tp_mul3(3, other, tp_mul(tri, tp_sub(tri, 1)));
        break;
    }
    case TP_BLAS_GETRF: {           /* 6M = 2n^3 + 4n, 6A = 2n^3 - 3n^2 + n */
        tp_u128 n3 = tp_mul3(2, n, tp_mul(n, n));
        c.m6 = tp_add(n3, tp_mul(4, n));
        c.a6 = tp_sub(tp_add(n3, n), tp_mul3(3, n, n));
        break;
    }
    case TP_BLAS_GETRS:             /* k is nrhs */
        c.m6 = tp_mul3(6, k, tp_mul(n, n));
        c.a6 = tp_mul3(6, k, tp_mul(n, tp_sub(n, 1)));
        break;
    case TP_BLAS_GEQRF:
        c = tp_geqrf(m, n);
        break;
    case TP_BLAS_GELS:              /* geqrf, then geqrs: 6M += 3 nrhs n (4m - n + 5),
                                       6A += 3 nrhs n (4m - n + 1) */
        if (m < n)
            break;
        c = tp_geqrf(m, n);
        c.m6 = tp_add(c.m6, tp_mul3(3, tp_mul(k, n), tp_sub(tp_add(tp_mul(4, m), 5), n)));
        c.a6 = tp_add(c.a6, tp_mul3(3, tp_mul(k, n), tp_sub(tp_add(tp_mul(4, m), 1), n)));
        break;
    default:                        /* iamax, copy, swap, rotg, rotmg */
        break;
    }
    return c;
}

uint64_t tp_blas_flops(unsigned op, int right, int64_t m, int64_t n, int64_t k, int64_t batch,
                       int cplx)
{
    struct tp_count c = tp_count(op, right, tp_size(m), tp_size(n), tp_size(k), cplx);
    tp_u128 f = cplx && !c.mixed ? tp_add(tp_mul(6, c.m6), tp_mul(2, c.a6))
                                 : tp_add(c.m6, c.a6);
    f = f == TP_U128_MAX ? f : f / 6;
    f = tp_mul(f, tp_size(batch));
    return f > UINT64_MAX ? UINT64_MAX : (uint64_t)f;
}

/* Which sizes each routine takes (TP_BLAS_HAS_*). */
static unsigned tp_blas_sizes(unsigned op)
{
    switch (op) {
    case TP_BLAS_ROTG: case TP_BLAS_ROTMG:
        return 0;
    case TP_BLAS_GEMV: case TP_BLAS_GER: case TP_BLAS_SYMM: case TP_BLAS_TRMM:
    case TP_BLAS_TRSM: case TP_BLAS_GEQRF:
        return TP_BLAS_HAS_M | TP_BLAS_HAS_N;
    case TP_BLAS_SYRK: case TP_BLAS_SYR2K:
        return TP_BLAS_HAS_N | TP_BLAS_HAS_K;
    case TP_BLAS_GETRS:
        return TP_BLAS_HAS_N | TP_BLAS_HAS_NRHS;
    case TP_BLAS_GELS:
        return TP_BLAS_HAS_M | TP_BLAS_HAS_N | TP_BLAS_HAS_NRHS;
    default:                        /* level 1, the square level 2, getrf */
        return TP_BLAS_HAS_N;
    }
}

static uint32_t tp_blas_u32(int64_t v)
{
    return v <= 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

void tp_blas_fill(struct tp_record *r, unsigned op, int right, int64_t m, int64_t n, int64_t k,
                  int64_t batch, int atype, unsigned prec)
{
    int cplx = tp_gemm_is_complex(atype);
    unsigned has = tp_blas_sizes(op);
    r->u.lib.flops = tp_blas_flops(op, right, m, n, k, batch, cplx);
    r->u.lib.dtype = (uint8_t)tp_gemm_dtype(atype);
    r->u.lib.bytes = op == TP_BLAS_COPY || op == TP_BLAS_SWAP
                         ? tp_blas_copy_bytes(n, 1, tp_dtype_size(r->u.lib.dtype)) : 0;
    r->u.lib.m = has & TP_BLAS_HAS_M ? tp_blas_u32(m) : 0;
    r->u.lib.n = has & TP_BLAS_HAS_N ? tp_blas_u32(n) : 0;
    r->u.lib.k = has & (TP_BLAS_HAS_K | TP_BLAS_HAS_NRHS) ? tp_blas_u32(k) : 0;
    r->u.lib.batch = tp_blas_u32(batch);
    r->u.lib.precision = (uint8_t)prec;
    r->u.lib.op = (uint8_t)has;
    r->u.lib.flags = TP_LIB_BLAS | (cplx ? TP_LIB_COMPLEX : 0);
}

int tp_blas_level3(unsigned op)
{
    switch (op) {
    case TP_BLAS_SYMM: case TP_BLAS_SYRK: case TP_BLAS_SYR2K: case TP_BLAS_TRMM:
    case TP_BLAS_TRSM:
        return 1;
    default:
        return 0;
    }
}

uint64_t tp_blas_copy_bytes(int64_t rows, int64_t cols, int64_t elem_size)
{
    if (rows < 0 || cols < 0 || elem_size < 0)
        return 0;
    tp_u128 b = tp_mul3((tp_u128)rows, (tp_u128)cols, (tp_u128)elem_size);
    return b > UINT64_MAX ? UINT64_MAX : (uint64_t)b;
}
