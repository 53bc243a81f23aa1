/*
 * conv.h - pure helpers of the cuDNN wrappers: a convolution's FLOPs and
 * implicit-GEMM shape from its dimensions, cuDNN types to ours.  No cuDNN
 * call, no state: unit-testable on their own.
 */
#ifndef TRAINPROF_COLLECTOR_FLOPS_CONV_H
#define TRAINPROF_COLLECTOR_FLOPS_CONV_H

#include <stdint.h>

#include "collector/contract/record.h"

/*
 * tp_conv_fill - fills r->u.lib (flops, m, n, k, batch) of a convolution
 * from the dims of its output-side tensor "out" (y for forward, dy for both
 * backward passes: N, K, output spatial...) and of its filter "w" (K,
 * C/groups, filter spatial...), in logical order.  Every pass does
 * 2 * numel(out) * prod(w[1:]) FLOPs (torch.utils.flop_counter's count); as an implicit GEMM
 * m = N, n = K, k = prod(w[1:]), batch = prod(out[2:]).  Sizes saturate at
 * UINT32_MAX, FLOPs at UINT64_MAX.  Returns 0, or -1 (fields left 0) when
 * the dims cannot be a convolution (fewer than 3, non-positive, K differs).
 */
int tp_conv_fill(struct tp_record *r, const int64_t *out, int nout, const int64_t *w, int nw);

/* tp_cudnn_dtype - enum tp_dtype of a cudnnDataType_t value. */
unsigned tp_cudnn_dtype(int cudnn_type);

/*
 * tp_cudnn_precision - enum tp_precision of a convolution whose data
 * (filter) type is "cudnn_type" and whose math type (cudnnMathType_t) is
 * "math" (TP_PREC_UNKNOWN if unknown).  Float data: FMA math -> fp32; default and tensor-op
 * math allow TF32 (what cuDNN 8+ does on Ampere and later) -> tf32;
 * ALLOW_CONVERSION allows FP16 tensor cores -> fp16.  16-bit, FP8 and 8-bit
 * integer data give their own class, double fp64.  "Allowed", as for GEMMs.
 */
unsigned tp_cudnn_precision(int cudnn_type, int math);

#endif
