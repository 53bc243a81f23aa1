/*
 * rnn.h - pure helpers of the cuDNN RNN wrappers: an RNN call's FLOPs and
 * record shape from the sizes its descriptors hold.  No cuDNN call, no
 * state: unit-testable on their own (tests/unit/test_rnn.c).
 */
#ifndef TRAINPROF_COLLECTOR_FLOPS_RNN_H
#define TRAINPROF_COLLECTOR_FLOPS_RNN_H

#include <stdint.h>

#include "collector/contract/record.h"

/* What an RNN descriptor (cudnnGetRNNDescriptor_v8) and its x data
 * descriptor (cudnnGetRNNDataDescriptor) say about the work of one call. */
struct tp_rnn_shape {
    int cell;           /* cudnnRNNMode_t: RNN_RELU, RNN_TANH, LSTM, GRU */
    int bidirectional;  /* dirMode == CUDNN_BIDIRECTIONAL */
    int skip_input;     /* inputMode == CUDNN_SKIP_INPUT: no layer-0 input GEMM */
    int64_t input;      /* inputSize: x's vector size */
    int64_t hidden;     /* hiddenSize */
    int64_t proj;       /* projSize: LSTM recurrent projection, == hidden if none */
    int64_t layers;     /* numLayers */
    int64_t seq;        /* maxSeqLength (T) */
    int64_t batch;      /* batchSize (B) */
    uint64_t tokens;    /* time steps computed over the mini-batch: the sum
                           of the sequence lengths, or seq * batch */
};

/*
 * tp_rnn_flops - the FLOPs of one RNN pass (cudnnRNNForward,
 * cudnnRNNBackwardData_v8 or cudnnRNNBackwardWeights_v8 all do as many, see
 * rnn.c) over s->tokens time steps, saturated at UINT64_MAX; 0 when the
 * sizes cannot describe an RNN (a non-positive size, an unknown cell, a
 * projection larger than the hidden size).
 */
uint64_t tp_rnn_flops(const struct tp_rnn_shape *s);

/*
 * tp_rnn_fill - fills r->u.lib of an RNN call (record form TP_FORM_RNN):
 * flops = tp_rnn_flops(s); m = seq, n = batch, k = input, batch = the
 * recurrent state size (proj), op = layers x directions (saturated at 255),
 * so that x is [m, n, k] and hx [op, n, batch] as torch shows them.
 * Returns 0, or -1 (fields left 0) when tp_rnn_flops rejects the sizes.
 */
int tp_rnn_fill(struct tp_record *r, const struct tp_rnn_shape *s);

#endif
