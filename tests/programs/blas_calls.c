/*
 * blas_calls.c - calls every cuBLAS entry point of collector/record/apis/cublas.def
 * that is not a GEMM (gemm_calls.c has those) once per step, with known and
 * distinct sizes.
 *
 * DESIGN
 * cublasCreate_v2, then BLAS_STEPS steps (default 1) ended by
 * trainprof_step(), then cublasDestroy_v2.  Every call gets its own sizes from
 * a running index i: m = 5+i, n = 7+i, k = 3+i, batch = 2 + i%3, side right
 * when i is odd; the level 1 _64 forms get n = 5000000000+i (above 2^32, to
 * show exact FLOPs with a saturated size), geqrf swaps m and n on odd i (both
 * branches of its count), gels takes m = n+2+i (cuBLAS serves m >= n only).
 * Each call prints one line "name m n k batch side status", sizes the
 * routine lacks 0, k the nrhs of getrs/gels and the element size of the
 * copies (whose m x n is rows x cols), so that a test can compute the
 * expected FLOPs and bytes on its own, and stdout is the same with or
 * without the library.  Set* copies run on cudaStreamPerThread, Get* ones on
 * cudaStreamLegacy (handles with known values).  Argument "tf32" sets
 * CUBLAS_TF32_TENSOR_OP_MATH on the handle.  cublasDotEx takes CUDA_R_16F
 * data with CUDA_R_32F execution, cublasDotEx_64 CUDA_C_64F with CUDA_C_64F.
 * The fake cuBLAS computes nothing: every pointer is one never-read buffer.
 */
#include <cublas_api.h>

#include "prog.h"

static int bad, idx;
static double buf[64];

#define V ((void *)buf)
#define LO CUBLAS_FILL_MODE_LOWER
#define OPN CUBLAS_OP_N
#define DIAG CUBLAS_DIAG_NON_UNIT
#define SIDE (right ? CUBLAS_SIDE_RIGHT : CUBLAS_SIDE_LEFT)

static void report(const char *name, long m, long n, long k, long batch, int right,
                   cublasStatus_t st)
{
    printf("%s %ld %ld %ld %ld %s %s\n", name, m, n, k, batch, right ? "R" : "L",
           st == CUBLAS_STATUS_SUCCESS ? "ok" : "FAILED");
    if (st != CUBLAS_STATUS_SUCCESS)
        bad++;
}

#define SHAPE                                                                       \
    long m = 5 + idx, n = 7 + idx, k = 3 + idx, b = 2 + idx % 3;                    \
    int right = idx % 2;                                                            \
    (void)m; (void)k; (void)b; (void)right;                                         \
    idx++

/* level 1: (name, call arguments) with n; the _64 forms get a large n */
#define L1(fn, args) do { SHAPE;                                                    \
    if (strstr(#fn, "_64"))                                                         \
        n = 5000000000L + idx;                                                      \
    report(#fn, 0, n, 0, 1, 0, fn args);                                            \
} while (0)
#define DOT(fn)  L1(fn, (h, n, V, 1, V, 1, V))          /* also rotm */
#define AXPY(fn) L1(fn, (h, n, V, V, 1, V, 1))
#define SCAL(fn) L1(fn, (h, n, V, V, 1))
#define RED(fn)  L1(fn, (h, n, V, 1, V))                /* nrm2, asum, amax, amin */
#define ROT(fn)  L1(fn, (h, n, V, 1, V, 1, V, V))
#define COPY(fn) L1(fn, (h, n, V, 1, V, 1))             /* also swap */
#define ROTG(fn)  do { idx++; report(#fn, 0, 0, 0, 1, 0, fn(h, V, V, V, V)); } while (0)
#define ROTMG(fn) do { idx++; report(#fn, 0, 0, 0, 1, 0, fn(h, V, V, V, V, V)); } while (0)
#define DOTEX(fn, xt, et) L1(fn, (h, n, V, xt, 1, V, xt, 1, V, et, et))

/* level 2 */
#define GEMV(fn) do { SHAPE; report(#fn, m, n, 0, 1, 0, fn(h, OPN, m, n, V, V, m, V, 1, V, V, 1)); } while (0)
#define GER(fn)  do { SHAPE; report(#fn, m, n, 0, 1, 0, fn(h, m, n, V, V, 1, V, 1, V, m)); } while (0)
#define SYMV(fn) do { SHAPE; report(#fn, 0, n, 0, 1, 0, fn(h, LO, n, V, V, n, V, 1, V, V, 1)); } while (0)
#define SYR(fn)  do { SHAPE; report(#fn, 0, n, 0, 1, 0, fn(h, LO, n, V, V, 1, V, n)); } while (0)
#define SYR2(fn) do { SHAPE; report(#fn, 0, n, 0, 1, 0, fn(h, LO, n, V, V, 1, V, 1, V, n)); } while (0)
#define TRMV(fn) do { SHAPE; report(#fn, 0, n, 0, 1, 0, fn(h, LO, OPN, DIAG, n, V, n, V, 1)); } while (0)

/* level 3 */
#define SYMM(fn)  do { SHAPE; report(#fn, m, n, 0, 1, right, fn(h, SIDE, LO, m, n, V, V, m, V, m, V, V, m)); } while (0)
#define SYRK(fn)  do { SHAPE; report(#fn, 0, n, k, 1, 0, fn(h, LO, OPN, n, k, V, V, n, V, V, n)); } while (0)
#define SYR2K(fn) do { SHAPE; report(#fn, 0, n, k, 1, 0, fn(h, LO, OPN, n, k, V, V, n, V, n, V, V, n)); } while (0)
#define TRMM(fn)  do { SHAPE; report(#fn, m, n, 0, 1, right, fn(h, SIDE, LO, OPN, DIAG, m, n, V, V, m, V, m, V, m)); } while (0)
#define TRSM(fn)  do { SHAPE; report(#fn, m, n, 0, 1, right, fn(h, SIDE, LO, OPN, DIAG, m, n, V, V, m, V, m)); } while (0)
#define TRSMB(fn) do { SHAPE; report(#fn, m, n, 0, b, right, fn(h, SIDE, LO, OPN, DIAG, m, n, V, V, m, V, m, b)); } while (0)

/* batched solvers */
#define GETRF(fn) do { SHAPE; report(#fn, 0, n, 0, b, 0, fn(h, n, V, n, V, V, b)); } while (0)
#define GETRS(fn) do { SHAPE; report(#fn, 0, n, k, b, 0, fn(h, OPN, n, k, V, n, V, V, n, V, b)); } while (0)
#define GEQRF(fn) do { SHAPE; if (right) { long t_ = m; m = n; n = t_; } \
    report(#fn, m, n, 0, b, 0, fn(h, m, n, V, m, V, V, b)); } while (0)
#define GELS(fn)  do { SHAPE; m = n + 2 + idx; \
    report(#fn, m, n, k, b, 0, fn(h, OPN, m, n, k, V, m, V, m, V, V, b)); } while (0)

/* copies: rows x cols of elem_size bytes, element sizes 4, 8, 16 in turn */
#define ESIZE (4L << (idx % 3))
#define MATRIX(fn, st) do { SHAPE; long e_ = ESIZE; \
    report(#fn, m, n, e_, 1, 0, fn(m, n, e_, V, m, V, m, st)); } while (0)
#define VECTOR(fn, st) do { SHAPE; long e_ = ESIZE; \
    report(#fn, n, 1, e_, 1, 0, fn(n, e_, V, 1, V, 1, st)); } while (0)

static void blas_calls(cublasHandle_t h)
{
    idx = 0;
    DOTEX(cublasDotEx, CUDA_R_16F, CUDA_R_32F);
    DOTEX(cublasDotEx_64, CUDA_C_64F, CUDA_C_64F);
    DOT(cublasSdot_v2); DOT(cublasSdot_v2_64); DOT(cublasDdot_v2); DOT(cublasDdot_v2_64);
    DOT(cublasCdotc_v2); DOT(cublasCdotc_v2_64); DOT(cublasZdotc_v2); DOT(cublasZdotc_v2_64);
    DOT(cublasCdotu_v2); DOT(cublasCdotu_v2_64); DOT(cublasZdotu_v2); DOT(cublasZdotu_v2_64);
    AXPY(cublasSaxpy_v2); AXPY(cublasSaxpy_v2_64); AXPY(cublasDaxpy_v2); AXPY(cublasDaxpy_v2_64);
    AXPY(cublasCaxpy_v2); AXPY(cublasCaxpy_v2_64); AXPY(cublasZaxpy_v2); AXPY(cublasZaxpy_v2_64);
    SCAL(cublasSscal_v2); SCAL(cublasSscal_v2_64); SCAL(cublasDscal_v2); SCAL(cublasDscal_v2_64);
    SCAL(cublasCscal_v2); SCAL(cublasCscal_v2_64); SCAL(cublasZscal_v2); SCAL(cublasZscal_v2_64);
    SCAL(cublasCsscal_v2); SCAL(cublasCsscal_v2_64); SCAL(cublasZdscal_v2); SCAL(cublasZdscal_v2_64);
    RED(cublasSnrm2_v2); RED(cublasSnrm2_v2_64); RED(cublasDnrm2_v2); RED(cublasDnrm2_v2_64);
    RED(cublasScnrm2_v2); RED(cublasScnrm2_v2_64); RED(cublasDznrm2_v2); RED(cublasDznrm2_v2_64);
    RED(cublasSasum_v2); RED(cublasSasum_v2_64); RED(cublasDasum_v2); RED(cublasDasum_v2_64);
    RED(cublasScasum_v2); RED(cublasScasum_v2_64); RED(cublasDzasum_v2); RED(cublasDzasum_v2_64);
    RED(cublasIsamax_v2); RED(cublasIsamax_v2_64); RED(cublasIdamax_v2); RED(cublasIdamax_v2_64);
    RED(cublasIcamax_v2); RED(cublasIcamax_v2_64); RED(cublasIzamax_v2); RED(cublasIzamax_v2_64);
    RED(cublasIsamin_v2); RED(cublasIsamin_v2_64); RED(cublasIdamin_v2); RED(cublasIdamin_v2_64);
    RED(cublasIcamin_v2); RED(cublasIcamin_v2_64); RED(cublasIzamin_v2); RED(cublasIzamin_v2_64);
    ROT(cublasSrot_v2); ROT(cublasSrot_v2_64); ROT(cublasDrot_v2); ROT(cublasDrot_v2_64);
    ROT(cublasCrot_v2); ROT(cublasCrot_v2_64); ROT(cublasZrot_v2); ROT(cublasZrot_v2_64);
    ROT(cublasCsrot_v2); ROT(cublasCsrot_v2_64); ROT(cublasZdrot_v2); ROT(cublasZdrot_v2_64);
    ROTG(cublasSrotg_v2); ROTG(cublasDrotg_v2); ROTG(cublasCrotg_v2); ROTG(cublasZrotg_v2);
    DOT(cublasSrotm_v2); DOT(cublasSrotm_v2_64); DOT(cublasDrotm_v2); DOT(cublasDrotm_v2_64);
    ROTMG(cublasSrotmg_v2); ROTMG(cublasDrotmg_v2);
    COPY(cublasScopy_v2); COPY(cublasScopy_v2_64); COPY(cublasDcopy_v2); COPY(cublasDcopy_v2_64);
    COPY(cublasCcopy_v2); COPY(cublasCcopy_v2_64); COPY(cublasZcopy_v2); COPY(cublasZcopy_v2_64);
    COPY(cublasSswap_v2); COPY(cublasSswap_v2_64); COPY(cublasDswap_v2); COPY(cublasDswap_v2_64);
    COPY(cublasCswap_v2); COPY(cublasCswap_v2_64); COPY(cublasZswap_v2); COPY(cublasZswap_v2_64);

    GEMV(cublasSgemv_v2); GEMV(cublasSgemv_v2_64); GEMV(cublasDgemv_v2); GEMV(cublasDgemv_v2_64);
    GEMV(cublasCgemv_v2); GEMV(cublasCgemv_v2_64); GEMV(cublasZgemv_v2); GEMV(cublasZgemv_v2_64);
    GER(cublasSger_v2); GER(cublasSger_v2_64); GER(cublasDger_v2); GER(cublasDger_v2_64);
    GER(cublasCgerc_v2); GER(cublasCgerc_v2_64); GER(cublasZgerc_v2); GER(cublasZgerc_v2_64);
    GER(cublasCgeru_v2); GER(cublasCgeru_v2_64); GER(cublasZgeru_v2); GER(cublasZgeru_v2_64);
    SYMV(cublasSsymv_v2); SYMV(cublasSsymv_v2_64); SYMV(cublasDsymv_v2); SYMV(cublasDsymv_v2_64);
    SYMV(cublasCsymv_v2); SYMV(cublasCsymv_v2_64); SYMV(cublasZsymv_v2); SYMV(cublasZsymv_v2_64);
    SYMV(cublasChemv_v2); SYMV(cublasChemv_v2_64); SYMV(cublasZhemv_v2); SYMV(cublasZhemv_v2_64);
    SYR(cublasSsyr_v2); SYR(cublasSsyr_v2_64); SYR(cublasDsyr_v2); SYR(cublasDsyr_v2_64);
    SYR(cublasCsyr_v2); SYR(cublasCsyr_v2_64); SYR(cublasZsyr_v2); SYR(cublasZsyr_v2_64);
    SYR(cublasCher_v2); SYR(cublasCher_v2_64); SYR(cublasZher_v2); SYR(cublasZher_v2_64);
    SYR2(cublasSsyr2_v2); SYR2(cublasSsyr2_v2_64); SYR2(cublasDsyr2_v2); SYR2(cublasDsyr2_v2_64);
    SYR2(cublasCsyr2_v2); SYR2(cublasCsyr2_v2_64); SYR2(cublasZsyr2_v2); SYR2(cublasZsyr2_v2_64);
    SYR2(cublasCher2_v2); SYR2(cublasCher2_v2_64); SYR2(cublasZher2_v2); SYR2(cublasZher2_v2_64);
    TRMV(cublasStrmv_v2); TRMV(cublasStrmv_v2_64); TRMV(cublasDtrmv_v2); TRMV(cublasDtrmv_v2_64);
    TRMV(cublasCtrmv_v2); TRMV(cublasCtrmv_v2_64); TRMV(cublasZtrmv_v2); TRMV(cublasZtrmv_v2_64);
    TRMV(cublasStrsv_v2); TRMV(cublasStrsv_v2_64); TRMV(cublasDtrsv_v2); TRMV(cublasDtrsv_v2_64);
    TRMV(cublasCtrsv_v2); TRMV(cublasCtrsv_v2_64); TRMV(cublasZtrsv_v2); TRMV(cublasZtrsv_v2_64);

    SYMM(cublasSsymm_v2); SYMM(cublasSsymm_v2_64); SYMM(cublasDsymm_v2); SYMM(cublasDsymm_v2_64);
    SYMM(cublasCsymm_v2); SYMM(cublasCsymm_v2_64); SYMM(cublasZsymm_v2); SYMM(cublasZsymm_v2_64);
    SYMM(cublasChemm_v2); SYMM(cublasChemm_v2_64); SYMM(cublasZhemm_v2); SYMM(cublasZhemm_v2_64);
    SYRK(cublasSsyrk_v2); SYRK(cublasSsyrk_v2_64); SYRK(cublasDsyrk_v2); SYRK(cublasDsyrk_v2_64);
    SYRK(cublasCsyrk_v2); SYRK(cublasCsyrk_v2_64); SYRK(cublasZsyrk_v2); SYRK(cublasZsyrk_v2_64);
    SYRK(cublasCherk_v2); SYRK(cublasCherk_v2_64); SYRK(cublasZherk_v2); SYRK(cublasZherk_v2_64);
    SYR2K(cublasSsyr2k_v2); SYR2K(cublasSsyr2k_v2_64); SYR2K(cublasDsyr2k_v2); SYR2K(cublasDsyr2k_v2_64);
    SYR2K(cublasCsyr2k_v2); SYR2K(cublasCsyr2k_v2_64); SYR2K(cublasZsyr2k_v2); SYR2K(cublasZsyr2k_v2_64);
    SYR2K(cublasCher2k_v2); SYR2K(cublasCher2k_v2_64); SYR2K(cublasZher2k_v2); SYR2K(cublasZher2k_v2_64);
    TRMM(cublasStrmm_v2); TRMM(cublasStrmm_v2_64); TRMM(cublasDtrmm_v2); TRMM(cublasDtrmm_v2_64);
    TRMM(cublasCtrmm_v2); TRMM(cublasCtrmm_v2_64); TRMM(cublasZtrmm_v2); TRMM(cublasZtrmm_v2_64);
    TRSM(cublasStrsm_v2); TRSM(cublasStrsm_v2_64); TRSM(cublasDtrsm_v2); TRSM(cublasDtrsm_v2_64);
    TRSM(cublasCtrsm_v2); TRSM(cublasCtrsm_v2_64); TRSM(cublasZtrsm_v2); TRSM(cublasZtrsm_v2_64);
    TRSMB(cublasStrsmBatched); TRSMB(cublasStrsmBatched_64); TRSMB(cublasDtrsmBatched);
    TRSMB(cublasDtrsmBatched_64); TRSMB(cublasCtrsmBatched); TRSMB(cublasCtrsmBatched_64);
    TRSMB(cublasZtrsmBatched); TRSMB(cublasZtrsmBatched_64);

    GETRF(cublasSgetrfBatched); GETRF(cublasDgetrfBatched);
    GETRF(cublasCgetrfBatched); GETRF(cublasZgetrfBatched);
    GETRS(cublasSgetrsBatched); GETRS(cublasDgetrsBatched);
    GETRS(cublasCgetrsBatched); GETRS(cublasZgetrsBatched);
    GEQRF(cublasSgeqrfBatched); GEQRF(cublasDgeqrfBatched);
    GEQRF(cublasCgeqrfBatched); GEQRF(cublasZgeqrfBatched);
    GELS(cublasSgelsBatched); GELS(cublasDgelsBatched);
    GELS(cublasCgelsBatched); GELS(cublasZgelsBatched);

    MATRIX(cublasSetMatrixAsync, cudaStreamPerThread);
    MATRIX(cublasSetMatrixAsync_64, cudaStreamPerThread);
    MATRIX(cublasGetMatrixAsync, cudaStreamLegacy);
    MATRIX(cublasGetMatrixAsync_64, cudaStreamLegacy);
    VECTOR(cublasSetVectorAsync, cudaStreamPerThread);
    VECTOR(cublasSetVectorAsync_64, cudaStreamPerThread);
    VECTOR(cublasGetVectorAsync, cudaStreamLegacy);
    VECTOR(cublasGetVectorAsync_64, cudaStreamLegacy);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long steps = prog_env_long("BLAS_STEPS", 1);
    cublasHandle_t h;
    report("cublasCreate_v2", 0, 0, 0, 1, 0, cublasCreate_v2(&h));
    if (bad)
        return 1;
    if (strcmp(mode, "tf32") == 0 &&
        cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH) != CUBLAS_STATUS_SUCCESS)
        return 1;
    for (long st = 0; st < steps; st++) {
        printf("step %ld\n", st);
        blas_calls(h);
        tp_call_step();
    }
    report("cublasDestroy_v2", 0, 0, 0, 1, 0, cublasDestroy_v2(h));
    return bad ? 1 : 0;
}
