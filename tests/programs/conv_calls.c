/*
 * conv_calls.c - legacy cuDNN convolutions for the preload tests.
 *
 * DESIGN
 * Descriptors are real (the toolkit's libcudnn.so.9: create/set/get need no
 * GPU); the executing calls bind to the fake tests/fakes/cudnn_exec.c, linked
 * first.  Step 0 runs every case once (a warm-up step for the tests'
 * schedule); step 1 + i runs case i: cudnnConvolutionForward,
 * cudnnConvolutionBiasActivationForward, cudnnConvolutionBackwardData and
 * cudnnConvolutionBackwardFilter, in that order; after the last step signal
 * one more forward call of case 0 runs outside any step.  stdout (the cases,
 * their output dims from cudnnGetConvolutionNdForwardOutputDim, every
 * call's status) is the same with and without the library.
 *
 * CONV_BENCH=N: instead, time N forward calls of case 0 in each of 5 steps
 * and print the mean ns per call to stderr (stdout stays empty).
 */
#include <cudnn.h>
#include <stdint.h>
#include <time.h>

#include "prog.h"

struct conv_case {
    const char *name;
    cudnnDataType_t type, compute;
    cudnnMathType_t math;
    int nsp;                 /* spatial dims */
    int n, c, k, groups;
    int in[3], filt[3], pad[3], stride[3], dil[3];
};

static const struct conv_case cases[] = {
    { "basic", CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, 2, 2, 8, 16, 1,
      { 16, 16 }, { 3, 3 }, { 1, 1 }, { 1, 1 }, { 1, 1 } },
    { "grouped", CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, 2, 2, 8, 16, 4,
      { 16, 16 }, { 3, 3 }, { 1, 1 }, { 1, 1 }, { 1, 1 } },
    { "strided", CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, 2, 2, 8, 16, 1,
      { 16, 16 }, { 3, 3 }, { 1, 1 }, { 2, 2 }, { 1, 1 } },
    { "conv3d", CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, 3, 1, 4, 8, 2,
      { 8, 8, 8 }, { 3, 3, 3 }, { 0, 0, 0 }, { 2, 2, 2 }, { 1, 1, 1 } },
    { "depthwise", CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH, 2, 1, 6, 6, 6,
      { 12, 10 }, { 3, 3 }, { 2, 2 }, { 1, 1 }, { 2, 2 } },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

struct conv_descs {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};

static void print_dims(const char *what, int nb, const int *d)
{
    printf(" %s=[", what);
    for (int i = 0; i < nb; i++)
        printf("%s%d", i ? "," : "", d[i]);
    printf("]");
}

static void make_case(const struct conv_case *cc, struct conv_descs *d, int print)
{
    int nb = cc->nsp + 2, xd[CUDNN_DIM_MAX], wd[CUDNN_DIM_MAX], yd[CUDNN_DIM_MAX];
    xd[0] = cc->n;
    xd[1] = cc->c;
    wd[0] = cc->k;
    wd[1] = cc->c / cc->groups;
    for (int i = 0; i < cc->nsp; i++) {
        xd[2 + i] = cc->in[i];
        wd[2 + i] = cc->filt[i];
    }
    PROG_STATUS_CHECK(cudnnCreateTensorDescriptor(&d->x));
    PROG_STATUS_CHECK(cudnnCreateTensorDescriptor(&d->y));
    PROG_STATUS_CHECK(cudnnCreateFilterDescriptor(&d->w));
    PROG_STATUS_CHECK(cudnnCreateConvolutionDescriptor(&d->conv));
    prog_dnn_tensor(d->x, cc->type, nb, xd);
    PROG_STATUS_CHECK(cudnnSetFilterNdDescriptor(d->w, cc->type, CUDNN_TENSOR_NCHW, nb, wd));
    PROG_STATUS_CHECK(cudnnSetConvolutionNdDescriptor(d->conv, cc->nsp, cc->pad, cc->stride, cc->dil,
                                              CUDNN_CROSS_CORRELATION, cc->compute));
    PROG_STATUS_CHECK(cudnnSetConvolutionGroupCount(d->conv, cc->groups));
    PROG_STATUS_CHECK(cudnnSetConvolutionMathType(d->conv, cc->math));
    PROG_STATUS_CHECK(cudnnGetConvolutionNdForwardOutputDim(d->conv, d->x, d->w, nb, yd));
    prog_dnn_tensor(d->y, cc->type, nb, yd);
    if (print) {
        printf("case %s:", cc->name);
        print_dims("x", nb, xd);
        print_dims("w", nb, wd);
        print_dims("y", nb, yd);
        printf(" groups=%d\n", cc->groups);
    }
}

static void free_case(struct conv_descs *d)
{
    cudnnDestroyConvolutionDescriptor(d->conv);
    cudnnDestroyFilterDescriptor(d->w);
    cudnnDestroyTensorDescriptor(d->y);
    cudnnDestroyTensorDescriptor(d->x);
}

/* Buffers are never touched by the fake: any distinct addresses do. */
static float buf_x[4], buf_w[4], buf_y[4], buf_ws[4];
static const float one = 1.0f, zero = 0.0f;

static void run_case(cudnnHandle_t h, const struct conv_case *cc, const struct conv_descs *d)
{
    cudnnStatus_t s;
    s = cudnnConvolutionForward(h, &one, d->x, buf_x, d->w, buf_w, d->conv,
                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, buf_ws, sizeof buf_ws,
                                &zero, d->y, buf_y);
    printf("%s cudnnConvolutionForward -> %d\n", cc->name, (int)s);
    s = cudnnConvolutionBiasActivationForward(h, &one, d->x, buf_x, d->w, buf_w, d->conv,
                                              CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                              buf_ws, sizeof buf_ws, &zero, d->y, buf_y, NULL,
                                              NULL, NULL, d->y, buf_y);
    printf("%s cudnnConvolutionBiasActivationForward -> %d\n", cc->name, (int)s);
    s = cudnnConvolutionBackwardData(h, &one, d->w, buf_w, d->y, buf_y, d->conv,
                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, buf_ws, sizeof buf_ws,
                                     &zero, d->x, buf_x);
    printf("%s cudnnConvolutionBackwardData -> %d\n", cc->name, (int)s);
    s = cudnnConvolutionBackwardFilter(h, &one, d->x, buf_x, d->y, buf_y, d->conv,
                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, buf_ws, sizeof buf_ws,
                                       &zero, d->w, buf_w);
    printf("%s cudnnConvolutionBackwardFilter -> %d\n", cc->name, (int)s);
}

int main(void)
{
    long bench = prog_env_long("CONV_BENCH", 0);
    cudnnHandle_t h;
    cudaStream_t stream;
    struct conv_descs d[NCASES];
    PROG_CHECK(cudaStreamCreate(&stream));
    PROG_STATUS_CHECK(cudnnCreate(&h));
    PROG_STATUS_CHECK(cudnnSetStream(h, stream));
    for (int i = 0; i < NCASES; i++)
        make_case(&cases[i], &d[i], !bench);

    if (bench > 0) {
        for (int step = 0; step < 6; step++) {
            uint64_t t0 = prog_now_ns();
            for (long j = 0; j < bench; j++)
                cudnnConvolutionForward(h, &one, d[0].x, buf_x, d[0].w, buf_w, d[0].conv,
                                        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, buf_ws,
                                        sizeof buf_ws, &zero, d[0].y, buf_y);
            uint64_t t1 = prog_now_ns();
            if (step > 0)
                fprintf(stderr, "conv_calls: step %d: %.1f ns per cudnnConvolutionForward\n",
                        step, (double)(t1 - t0) / (double)bench);
            tp_call_step();
        }
    } else {
        for (int i = 0; i < NCASES; i++)
            run_case(h, &cases[i], &d[i]);
        tp_call_step();
        for (int i = 0; i < NCASES; i++) {
            run_case(h, &cases[i], &d[i]);
            tp_call_step();
        }
        run_case(h, &cases[0], &d[0]);
    }

    for (int i = 0; i < NCASES; i++)
        free_case(&d[i]);
    PROG_STATUS_CHECK(cudnnDestroy(h));
    PROG_CHECK(cudaStreamDestroy(stream));
    return 0;
}
