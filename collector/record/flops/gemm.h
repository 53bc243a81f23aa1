/*
 * gemm.h - pure helpers of the cuBLAS/cuBLASLt wrappers (preload/): FLOPs and sizes of
 * a matrix product, CUDA data and compute types to ours, the precision
 * class (the rules: tp_gemm_precision below).  No library call, no state: unit-testable alone.
 */
#ifndef TRAINPROF_COLLECTOR_FLOPS_GEMM_H
#define TRAINPROF_COLLECTOR_FLOPS_GEMM_H

#include <stdint.h>

#include "collector/contract/record.h"

/* "No compute type": the legacy entry points (Sgemm, Hgemm, SgemmEx, ...)
 * whose arithmetic follows the data type and the handle's math mode. */
#define TP_GEMM_CT_NONE (-1)

/*
 * tp_gemm_fill - fills r->u.lib of a GEMM of m x n x k repeated "batch"
 * times on data of cudaDataType "atype": flops = 2 m n k batch (8 m n k
 * batch and TP_LIB_COMPLEX for complex data), sizes saturated at UINT32_MAX,
 * FLOPs at UINT64_MAX; negative sizes count as 0.  "prec" is the enum
 * tp_precision to store.
 */
void tp_gemm_fill(struct tp_record *r, int64_t m, int64_t n, int64_t k, int64_t batch,
                  int atype, unsigned prec);

/*
 * tp_gemm_fill_grouped32 / 64 - a grouped batched GEMM: flops = sum over the
 * "count" groups of group_size[g] * 2 m[g] n[g] k[g] (x4 complex); m, n, k
 * are those of group 0 and batch the total number of products.  NULL arrays
 * or count <= 0 leave the sizes 0.
 */
void tp_gemm_fill_grouped32(struct tp_record *r, const int *m, const int *n, const int *k,
                            const int *size, int64_t count, int atype, unsigned prec);
void tp_gemm_fill_grouped64(struct tp_record *r, const int64_t *m, const int64_t *n,
                            const int64_t *k, const int64_t *size, int64_t count, int atype,
                            unsigned prec);

/* tp_gemm_dtype - enum tp_dtype of a cudaDataType value. */
unsigned tp_gemm_dtype(int atype);

/* tp_gemm_is_complex - 1 if cudaDataType "atype" is a complex type. */
int tp_gemm_is_complex(int atype);

/*
 * tp_gemm_needs_mode - 1 if the precision class of a GEMM on "atype" with
 * compute type "ct" (cublasComputeType_t or TP_GEMM_CT_NONE) depends on the
 * handle's math mode, so that the wrapper asks for it only then.
 */
int tp_gemm_needs_mode(int atype, int ct);

/*
 * tp_gemm_precision - enum tp_precision allowed for a GEMM on data "atype"
 * (cudaDataType of A) with compute type "ct" (cublasComputeType_t, or
 * TP_GEMM_CT_NONE) under cublasMath_t "mode" (0 when unknown, and for
 * cuBLASLt, which has no math mode): 8-bit float data -> fp8;
 * the FAST_16F/16BF/TF32 compute types -> fp16/bf16/tf32; 16-bit data ->
 * its own class; float data with CUBLAS_COMPUTE_32F or no compute type ->
 * tf32 iff (mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH, else fp32; the
 * pedantic types -> their exact class; double -> fp64; 8-bit integers and
 * CUBLAS_COMPUTE_32I -> int8.  Unknown combinations -> TP_PREC_UNKNOWN.
 * "Allowed", not "used": heuristics may still pick other kernels.
 */
unsigned tp_gemm_precision(int atype, int ct, int mode);

#endif
