/*
 * rnn.c - DESIGN: a cuDNN RNN call (cudnnRNNForward,
 * cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8) counted as the GEMMs
 * its cells are (record form TP_FORM_RNN).  Kept free of cuDNN calls (only
 * its enum values) so tests/unit/test_rnn.c can include it.
 *
 * Neither torch.utils.flop_counter (its formulas: mm, addmm, bmm, baddbmm,
 * _scaled_mm, convolution and its backward, the attention ops) nor the
 * profiler's computeFlops (seven ops: aten::conv2d, mm, addmm, bmm, baddbmm,
 * mul, add) has an RNN formula, so the count is ours, written as the GEMMs of
 * the cell equations of cudnn_adv.h's cudnnRNNMode_t, with 2 FLOPs per
 * multiply-add as for every other GEMM (gemm.c):
 *
 *   gates G = 1 (RNN_RELU, RNN_TANH), 4 (LSTM: i, f, g, o), 3 (GRU: r, z, h')
 *   D = 2 if bidirectional, else 1;  P = projSize (== hiddenSize H when the
 *   LSTM has no recurrent projection; cuDNN allows P < H for LSTM only)
 *   layer input size: I (inputSize) for layer 0, P * D for later layers
 *   (the layer below's outputs of both directions, concatenated)
 *
 *   per layer, direction and time step of one sequence:
 *     input GEMM      2 * G*H * in_l     (none for layer 0 with
 *                                         CUDNN_SKIP_INPUT: an identity)
 *     recurrent GEMM  2 * G*H * P        (h(t-1) is P wide)
 *     projection GEMM 2 * P * H          (LSTM with P < H: r = W_r h)
 *   forward = tokens * D * sum over layers, tokens = the time steps computed
 *   over the mini-batch: the sum of the per-sequence lengths of x's data
 *   descriptor (cuDNN computes no step past a sequence's end: the output
 *   there is its paddingFill), or T * B when they cannot be read.
 *
 * Backward data computes, for every forward GEMM, the one GEMM of the same
 * size that carries the gradient to its input (dgates x W^T: dh(t-1), dx or
 * the layer below's dy, and through the projection); backward weights
 * computes, for every forward GEMM, the one that forms its weight gradient
 * (dgates^T x its input).  So each backward pass counts the forward's FLOPs,
 * the same 2x-forward backward that flop_counter gives a Linear (its mm
 * backward is two mm).  Bias terms (cudnnRNNBiasMode_t) and the gate
 * nonlinearities are elementwise and, as everywhere in trainprof, not
 * counted; nor are the few extra elementwise ops of GRU's reset gate.
 */
#include "rnn.h"

#include <cudnn.h>

static uint64_t tp_mul_sat(uint64_t a, uint64_t b)
{
    uint64_t p;
    return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

static uint64_t tp_add_sat(uint64_t a, uint64_t b)
{
    uint64_t s;
    return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

static uint32_t tp_sat32(int64_t v)
{
    return v > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static int tp_rnn_gates(int cell)
{
    switch (cell) {
    case CUDNN_RNN_RELU: case CUDNN_RNN_TANH: return 1;
    case CUDNN_LSTM: return 4;
    case CUDNN_GRU: return 3;
    default: return 0;
    }
}

static int tp_rnn_valid(const struct tp_rnn_shape *s)
{
    return tp_rnn_gates(s->cell) && s->input > 0 && s->hidden > 0 && s->proj > 0 &&
           s->proj <= s->hidden && s->layers > 0;
}

uint64_t tp_rnn_flops(const struct tp_rnn_shape *s)
{
    if (!tp_rnn_valid(s))
        return 0;
    int g = tp_rnn_gates(s->cell);
    uint64_t d = s->bidirectional ? 2 : 1, h = (uint64_t)s->hidden, p = (uint64_t)s->proj;
    uint64_t gh = tp_mul_sat((uint64_t)g, h);
    /* per token and direction: every layer's recurrent (+ projection) GEMM */
    uint64_t per_layer = tp_mul_sat(gh, p);
    if (p < h)
        per_layer = tp_add_sat(per_layer, tp_mul_sat(p, h));
    uint64_t macs = tp_mul_sat(per_layer, (uint64_t)s->layers);
    /* the input GEMMs: layer 0 reads x, the others the layer below */
    if (!s->skip_input)
        macs = tp_add_sat(macs, tp_mul_sat(gh, (uint64_t)s->input));
    uint64_t upper = tp_mul_sat(gh, tp_mul_sat(p, d));
    macs = tp_add_sat(macs, tp_mul_sat(upper, (uint64_t)s->layers - 1));
    return tp_mul_sat(tp_mul_sat(2, d), tp_mul_sat(macs, s->tokens));
}

int tp_rnn_fill(struct tp_record *r, const struct tp_rnn_shape *s)
{
    if (!tp_rnn_valid(s))
        return -1;
    int64_t ld = s->layers * (s->bidirectional ? 2 : 1);
    r->u.lib.flops = tp_rnn_flops(s);
    r->u.lib.m = tp_sat32(s->seq > 0 ? s->seq : 0);
    r->u.lib.n = tp_sat32(s->batch > 0 ? s->batch : 0);
    r->u.lib.k = tp_sat32(s->input);
    r->u.lib.batch = tp_sat32(s->proj);
    r->u.lib.op = (uint8_t)(ld > 255 ? 255 : ld);
    return 0;
}
