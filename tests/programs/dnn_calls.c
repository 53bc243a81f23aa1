/*
 * dnn_calls.c - the cuDNN entry points beyond the convolutions, for
 * tests/preload/test_dnn.py: the handle, RNNs (forward, backward data,
 * backward weights), dropout state initialization, batch normalization,
 * pooling, spatial transformers, CTC loss and the convolution algorithm
 * searches of benchmark mode.
 *
 * DESIGN
 * Descriptors are real (the toolkit's libcudnn.so.9: create/set need no
 * GPU); the executing calls, cudnnCreate and cudnnSetDropoutDescriptor bind
 * to the fake tests/fakes/cudnn_exec.c, linked first.  Every executing call
 * runs once, in the order below, and prints "name -> status" on stdout
 * after the sizes of its case, so that the test can count the calls and
 * compute their FLOPs from what is printed; stdout is the same with and
 * without the library.  No step signal: the test records everything
 * (TRAINPROF_SCHEDULE=all).
 */
#include <cudnn.h>
#include <stdint.h>

#include "prog.h"

#define SHOW(name, call) printf("%s -> %d\n", name, (int)(call))

/* Buffers are never touched by the fake: any distinct addresses do. */
static double buf_a[8], buf_b[8], buf_c[8], buf_d[8], buf_e[8], buf_f[8], buf_ws[8];
static const float one = 1.0f, zero = 0.0f;

static cudnnTensorDescriptor_t tensor(cudnnDataType_t t, int nb, const int *dims)
{
    cudnnTensorDescriptor_t d;
    PROG_STATUS_CHECK(cudnnCreateTensorDescriptor(&d));
    prog_dnn_tensor(d, t, nb, dims);
    return d;
}

static void print_dims(const char *what, int nb, const int *d)
{
    printf(" %s=[", what);
    for (int i = 0; i < nb; i++)
        printf("%s%d", i ? "," : "", d[i]);
    printf("]");
}

/* ---- RNNs ---------------------------------------------------------------- */

struct rnn_case {
    const char *name;
    cudnnRNNMode_t cell;
    cudnnDirectionMode_t dir;
    cudnnRNNInputMode_t in_mode;
    cudnnDataType_t type, math_prec;
    cudnnMathType_t math;
    int input, hidden, proj, layers, seq, batch;
    int lens[4];
};

static const struct rnn_case rnn_cases[] = {
    { "lstm1", CUDNN_LSTM, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
      CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, 10, 20, 20, 1, 5, 3, { 5, 5, 5 } },
    { "gru_bi", CUDNN_GRU, CUDNN_BIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_HALF,
      CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, 8, 16, 16, 2, 6, 4, { 6, 5, 3, 1 } },
    { "lstm_proj", CUDNN_LSTM, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
      CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, 12, 32, 8, 2, 4, 2, { 4, 4 } },
    { "tanh_skip", CUDNN_RNN_TANH, CUDNN_UNIDIRECTIONAL, CUDNN_SKIP_INPUT, CUDNN_DATA_DOUBLE,
      CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH, 16, 16, 16, 2, 3, 2, { 3, 2 } },
};
#define NRNN ((int)(sizeof rnn_cases / sizeof rnn_cases[0]))

static void run_rnn(cudnnHandle_t h, cudnnDropoutDescriptor_t dropout, const struct rnn_case *c)
{
    int dirs = c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
    cudnnRNNDescriptor_t rd;
    cudnnRNNDataDescriptor_t xd, yd;
    PROG_STATUS_CHECK(cudnnCreateRNNDescriptor(&rd));
    PROG_STATUS_CHECK(cudnnSetRNNDescriptor_v8(rd, CUDNN_RNN_ALGO_STANDARD, c->cell,
                                       CUDNN_RNN_DOUBLE_BIAS, c->dir, c->in_mode, c->type,
                                       c->math_prec, c->math, c->input, c->hidden, c->proj,
                                       c->layers, dropout, 0));
    double fill = 0;
    PROG_STATUS_CHECK(cudnnCreateRNNDataDescriptor(&xd));
    PROG_STATUS_CHECK(cudnnCreateRNNDataDescriptor(&yd));
    PROG_STATUS_CHECK(cudnnSetRNNDataDescriptor(xd, c->type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                        c->seq, c->batch, c->input, c->lens, &fill));
    PROG_STATUS_CHECK(cudnnSetRNNDataDescriptor(yd, c->type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                        c->seq, c->batch, c->proj * dirs, c->lens, &fill));
    int hdims[3] = { c->layers * dirs, c->batch, c->proj };
    int cdims[3] = { c->layers * dirs, c->batch, c->hidden };
    cudnnTensorDescriptor_t hd = tensor(c->type, 3, hdims), cd = tensor(c->type, 3, cdims);

    printf("rnn %s: cell=%d bidirectional=%d skip_input=%d input=%d hidden=%d proj=%d "
           "layers=%d seq=%d batch=%d lens=", c->name, (int)c->cell, dirs == 2,
           c->in_mode == CUDNN_SKIP_INPUT, c->input, c->hidden, c->proj, c->layers, c->seq,
           c->batch);
    for (int i = 0; i < c->batch; i++)
        printf("%s%d", i ? "," : "", c->lens[i]);
    printf("\n");
    SHOW("cudnnRNNForward",
         cudnnRNNForward(h, rd, CUDNN_FWD_MODE_TRAINING, c->lens, xd, buf_a, yd, buf_b, hd,
                         buf_c, buf_c, cd, buf_d, buf_d, sizeof buf_e, buf_e, sizeof buf_ws,
                         buf_ws, sizeof buf_f, buf_f));
    SHOW("cudnnRNNBackwardData_v8",
         cudnnRNNBackwardData_v8(h, rd, c->lens, yd, buf_b, buf_b, xd, buf_a, hd, buf_c, buf_c,
                                 buf_c, cd, buf_d, buf_d, buf_d, sizeof buf_e, buf_e,
                                 sizeof buf_ws, buf_ws, sizeof buf_f, buf_f));
    SHOW("cudnnRNNBackwardWeights_v8",
         cudnnRNNBackwardWeights_v8(h, rd, CUDNN_WGRAD_MODE_ADD, c->lens, xd, buf_a, hd, buf_c,
                                    yd, buf_b, sizeof buf_e, buf_e, sizeof buf_ws, buf_ws,
                                    sizeof buf_f, buf_f));
    cudnnDestroyTensorDescriptor(cd);
    cudnnDestroyTensorDescriptor(hd);
    cudnnDestroyRNNDataDescriptor(yd);
    cudnnDestroyRNNDataDescriptor(xd);
    cudnnDestroyRNNDescriptor(rd);
}

/* ---- batch normalization ----------------------------------------------- */

static void run_bn(cudnnHandle_t h, const char *name, cudnnDataType_t t, int nb, const int *dims)
{
    int sdims[CUDNN_DIM_MAX];
    for (int i = 0; i < nb; i++)
        sdims[i] = i == 1 ? dims[1] : 1;
    cudnnTensorDescriptor_t x = tensor(t, nb, dims);
    cudnnTensorDescriptor_t s = tensor(t == CUDNN_DATA_DOUBLE ? t : CUDNN_DATA_FLOAT, nb, sdims);
    printf("bn %s: type=%d", name, (int)t);
    print_dims("x", nb, dims);
    printf("\n");
    SHOW("cudnnBatchNormalizationForwardTrainingEx",
         cudnnBatchNormalizationForwardTrainingEx(
             h, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN, &one, &zero, x, buf_a, NULL,
             NULL, x, buf_b, s, buf_c, buf_c, 0.1, buf_d, buf_d, 1e-5, buf_e, buf_e, NULL, buf_ws,
             sizeof buf_ws, buf_f, sizeof buf_f));
    SHOW("cudnnBatchNormalizationForwardInference",
         cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x,
                                                 buf_a, x, buf_b, s, buf_c, buf_c, buf_d, buf_d,
                                                 1e-5));
    SHOW("cudnnBatchNormalizationBackwardEx",
         cudnnBatchNormalizationBackwardEx(
             h, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN, &one, &zero, &one, &zero, x,
             buf_a, NULL, NULL, x, buf_b, NULL, NULL, x, buf_a, s, buf_c, buf_c, buf_d, buf_d,
             1e-5, buf_e, buf_e, NULL, buf_ws, sizeof buf_ws, buf_f, sizeof buf_f));
    cudnnDestroyTensorDescriptor(s);
    cudnnDestroyTensorDescriptor(x);
}

/* ---- pooling, spatial transformer, CTC loss ------------------------------ */

static void run_pool(cudnnHandle_t h)
{
    static const int xdims[4] = { 2, 3, 8, 8 }, ydims[4] = { 2, 3, 4, 4 };
    cudnnPoolingDescriptor_t p;
    PROG_STATUS_CHECK(cudnnCreatePoolingDescriptor(&p));
    PROG_STATUS_CHECK(cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0,
                                          0, 2, 2));
    cudnnTensorDescriptor_t x = tensor(CUDNN_DATA_FLOAT, 4, xdims);
    cudnnTensorDescriptor_t y = tensor(CUDNN_DATA_FLOAT, 4, ydims);
    printf("pool:");
    print_dims("x", 4, xdims);
    printf("\n");
    SHOW("cudnnPoolingForward", cudnnPoolingForward(h, p, &one, x, buf_a, &zero, y, buf_b));
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyPoolingDescriptor(p);
}

static void run_spatial(cudnnHandle_t h)
{
    static const int out[4] = { 2, 3, 6, 6 }, xdims[4] = { 2, 3, 10, 10 };
    cudnnSpatialTransformerDescriptor_t st;
    PROG_STATUS_CHECK(cudnnCreateSpatialTransformerDescriptor(&st));
    PROG_STATUS_CHECK(cudnnSetSpatialTransformerNdDescriptor(st, CUDNN_SAMPLER_BILINEAR, CUDNN_DATA_FLOAT,
                                                     4, out));
    cudnnTensorDescriptor_t x = tensor(CUDNN_DATA_FLOAT, 4, xdims);
    cudnnTensorDescriptor_t y = tensor(CUDNN_DATA_FLOAT, 4, out);
    printf("spatial:");
    print_dims("x", 4, xdims);
    printf("\n");
    SHOW("cudnnSpatialTfGridGeneratorForward",
         cudnnSpatialTfGridGeneratorForward(h, st, buf_a, buf_b));
    SHOW("cudnnSpatialTfSamplerForward",
         cudnnSpatialTfSamplerForward(h, st, &one, x, buf_c, buf_b, &zero, y, buf_d));
    SHOW("cudnnSpatialTfSamplerBackward",
         cudnnSpatialTfSamplerBackward(h, st, &one, x, buf_c, &zero, x, buf_e, &one, y, buf_d,
                                       buf_b, &zero, buf_f));
    SHOW("cudnnSpatialTfGridGeneratorBackward",
         cudnnSpatialTfGridGeneratorBackward(h, st, buf_f, buf_a));
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroySpatialTransformerDescriptor(st);
}

static void run_ctc(cudnnHandle_t h)
{
    static const int pdims[3] = { 10, 2, 5 };   /* T, N, A */
    static const int labels[4] = { 1, 2, 3, 1 }, label_lens[2] = { 2, 2 }, input_lens[2] = { 10, 8 };
    cudnnCTCLossDescriptor_t cd;
    PROG_STATUS_CHECK(cudnnCreateCTCLossDescriptor(&cd));
    PROG_STATUS_CHECK(cudnnSetCTCLossDescriptor_v9(cd, CUDNN_DATA_FLOAT, CUDNN_LOSS_NORMALIZATION_SOFTMAX,
                                           CUDNN_CTC_ZERO_OOB_GRADIENTS, 2));
    cudnnTensorDescriptor_t p = tensor(CUDNN_DATA_FLOAT, 3, pdims);
    printf("ctc:");
    print_dims("probs", 3, pdims);
    printf("\n");
    SHOW("cudnnCTCLoss", cudnnCTCLoss(h, p, buf_a, labels, label_lens, input_lens, buf_b, p, buf_c,
                                      CUDNN_CTC_LOSS_ALGO_DETERMINISTIC, cd, buf_ws,
                                      sizeof buf_ws));
    SHOW("cudnnCTCLoss_v8", cudnnCTCLoss_v8(h, CUDNN_CTC_LOSS_ALGO_DETERMINISTIC, cd, p, buf_a,
                                            labels, label_lens, input_lens, buf_b, p, buf_c,
                                            sizeof buf_ws, buf_ws));
    cudnnDestroyTensorDescriptor(p);
    cudnnDestroyCTCLossDescriptor(cd);
}

/* ---- benchmark mode: the algorithm searches ------------------------------ */

static void run_find(cudnnHandle_t h)
{
    static const int xdims[4] = { 2, 8, 16, 16 }, wdims[4] = { 16, 8, 3, 3 };
    static const int pad[2] = { 1, 1 }, stride[2] = { 1, 1 }, dil[2] = { 1, 1 };
    int ydims[4], ret = -1;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnTensorDescriptor_t x = tensor(CUDNN_DATA_FLOAT, 4, xdims);
    PROG_STATUS_CHECK(cudnnCreateFilterDescriptor(&w));
    PROG_STATUS_CHECK(cudnnSetFilterNdDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wdims));
    PROG_STATUS_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    PROG_STATUS_CHECK(cudnnSetConvolutionNdDescriptor(conv, 2, pad, stride, dil, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
    PROG_STATUS_CHECK(cudnnGetConvolutionNdForwardOutputDim(conv, x, w, 4, ydims));
    cudnnTensorDescriptor_t y = tensor(CUDNN_DATA_FLOAT, 4, ydims);
    printf("find:");
    print_dims("x", 4, xdims);
    print_dims("w", 4, wdims);
    print_dims("y", 4, ydims);
    printf("\n");
    cudnnConvolutionFwdAlgoPerf_t fwd[4];
    cudnnConvolutionBwdDataAlgoPerf_t bwd_data[4];
    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[4];
    SHOW("cudnnFindConvolutionForwardAlgorithmEx",
         cudnnFindConvolutionForwardAlgorithmEx(h, x, buf_a, w, buf_b, conv, y, buf_c, 4, &ret,
                                                fwd, buf_ws, sizeof buf_ws));
    SHOW("cudnnFindConvolutionBackwardDataAlgorithmEx",
         cudnnFindConvolutionBackwardDataAlgorithmEx(h, w, buf_b, y, buf_c, conv, x, buf_a, 4,
                                                     &ret, bwd_data, buf_ws, sizeof buf_ws));
    SHOW("cudnnFindConvolutionBackwardFilterAlgorithmEx",
         cudnnFindConvolutionBackwardFilterAlgorithmEx(h, x, buf_a, y, buf_c, conv, w, buf_b, 4,
                                                       &ret, bwd_filter, buf_ws, sizeof buf_ws));
    printf("find returned %d\n", ret);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(x);
}

int main(void)
{
    cudnnHandle_t h;
    cudaStream_t stream;
    cudnnDropoutDescriptor_t dropout;
    PROG_CHECK(cudaStreamCreate(&stream));
    SHOW("cudnnCreate", cudnnCreate(&h));
    PROG_STATUS_CHECK(cudnnSetStream(h, stream));

    PROG_STATUS_CHECK(cudnnCreateDropoutDescriptor(&dropout));
    SHOW("cudnnSetDropoutDescriptor",
         cudnnSetDropoutDescriptor(dropout, h, 0.25f, buf_ws, sizeof buf_ws, 42));
    for (int i = 0; i < NRNN; i++)
        run_rnn(h, dropout, &rnn_cases[i]);

    static const int bn4[4] = { 4, 8, 5, 6 }, bn5[5] = { 2, 4, 3, 5, 6 };
    run_bn(h, "bn2d", CUDNN_DATA_FLOAT, 4, bn4);
    run_bn(h, "bn3d", CUDNN_DATA_HALF, 5, bn5);
    run_pool(h);
    run_spatial(h);
    run_ctc(h);
    run_find(h);

    cudnnDestroyDropoutDescriptor(dropout);
    PROG_STATUS_CHECK(cudnnDestroy(h));
    PROG_CHECK(cudaStreamDestroy(stream));
    return 0;
}
