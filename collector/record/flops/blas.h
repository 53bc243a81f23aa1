/*
 * blas.h - pure helpers of the cuBLAS wrappers (preload/cublas.c) for the
 * routines that are not matrix products: level 1 and 2, the level 3 besides
 * GEMM, the batched LAPACK-style solvers, and the host/device matrix copies.
 * FLOPs and sizes only: no library call, no state, unit-testable alone.
 */
#ifndef TRAINPROF_COLLECTOR_FLOPS_BLAS_H
#define TRAINPROF_COLLECTOR_FLOPS_BLAS_H

#include <stdint.h>

#include "collector/contract/record.h"

/*
 * The routines, by the count they share.  The Hermitian forms count as the
 * symmetric ones (hemv as SYMV, her/her2 as SYR/SYR2, hemm as SYMM, herk
 * and her2k as SYRK and SYR2K), dotc/dotu/DotEx as DOT, amin as IAMAX.
 */
enum tp_blas_op {
    /* level 1: n */
    TP_BLAS_DOT, TP_BLAS_AXPY,
    TP_BLAS_SCAL,           /* alpha of the data's type (Sscal, Cscal) */
    TP_BLAS_RSCAL,          /* real alpha on complex data (Csscal, Zdscal) */
    TP_BLAS_NRM2, TP_BLAS_ASUM, TP_BLAS_IAMAX,
    TP_BLAS_ROT,            /* Srot; on complex data Crot (real c, complex s) */
    TP_BLAS_RROT,           /* real c and s on complex data (Csrot, Zdrot) */
    TP_BLAS_ROTM,
    TP_BLAS_COPY, TP_BLAS_SWAP,
    /* level 1, scalars only: no size */
    TP_BLAS_ROTG, TP_BLAS_ROTMG,
    /* level 2: gemv, ger m x n; the others n */
    TP_BLAS_GEMV, TP_BLAS_GER, TP_BLAS_SYMV, TP_BLAS_SYR, TP_BLAS_SYR2, TP_BLAS_TRMV,
    TP_BLAS_TRSV,
    /* level 3: symm, trmm, trsm m x n with a side; syrk, syr2k n, k */
    TP_BLAS_SYMM, TP_BLAS_SYRK, TP_BLAS_SYR2K, TP_BLAS_TRMM, TP_BLAS_TRSM,
    /* batched solvers: getrf n; getrs n, nrhs; geqrf m, n; gels m, n, nrhs */
    TP_BLAS_GETRF, TP_BLAS_GETRS, TP_BLAS_GEQRF, TP_BLAS_GELS,
    TP_BLAS_OP_COUNT
};

/*
 * tp_blas_flops - FLOPs of one call of "op" repeated "batch" times, on
 * complex data if "cplx": the counts of LAPACK Working Note 41 (see
 * blas.c), saturated at UINT64_MAX.  "right" is 1 for side right
 * (symm/hemm, trmm, trsm), else ignored; m, n, k are the routine's sizes as
 * tp_blas_fill takes them (k is nrhs for getrs and gels).  Negative sizes
 * count as 0.
 */
uint64_t tp_blas_flops(unsigned op, int right, int64_t m, int64_t n, int64_t k, int64_t batch,
                       int cplx);

/*
 * tp_blas_fill - fills r->u.lib of a call of "op" on data of cudaDataType
 * "atype" (A's or x's) with precision class "prec" (enum tp_precision):
 * flops as tp_blas_flops, m, n, k (saturated at UINT32_MAX) with op set to
 * the TP_BLAS_HAS_* bits of the sizes the routine takes (sizes it lacks
 * are stored 0), batch, dtype, flags TP_LIB_BLAS (| TP_LIB_COMPLEX), and
 * for copy and swap bytes = n x the element size.
 */
void tp_blas_fill(struct tp_record *r, unsigned op, int right, int64_t m, int64_t n, int64_t k,
                  int64_t batch, int atype, unsigned prec);

/* tp_blas_level3 - 1 for the level 3 routines (their precision may follow
 * the handle's math mode, as a GEMM's does), 0 for the others. */
int tp_blas_level3(unsigned op);

/* tp_blas_copy_bytes - rows x cols x elem_size of a cublasSet/GetMatrix
 * (vectors: n, 1, elem_size), saturated at UINT64_MAX; 0 if any is
 * negative. */
uint64_t tp_blas_copy_bytes(int64_t rows, int64_t cols, int64_t elem_size);

#endif
