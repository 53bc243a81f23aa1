/*
 * cudnn.c - DESIGN: the cuDNN wrappers, expanded from cudnn.def with the
 * shape of the runtime wrappers (preload/cudart.c), nesting as library calls
 * (tp_lib_begin: launches made inside are still recorded, on their own).
 *
 * A legacy convolution's FLOPs and implicit-GEMM shape come from its
 * descriptors, read with the real library's getters only while recording,
 * after the clock stopped (the reads are not part of the call's duration):
 * the output-side tensor (y or dy) gives N, K and the output spatial dims
 * (strides and padding are already in it), the filter gives C/groups and
 * the filter spatial dims (its second dim is C/groups, so the group count
 * need not be read) and the data type; the convolution's math type splits
 * FP32 data into fp32 (FMA) and tf32.  The getters are resolved once, next
 * to the first real entry point, never on the recording path; they only
 * copy fields out of host structs (no allocation, lock, print or CUDA call).
 * Missing getters or a failing read leave flops 0 and the precision unknown.
 *
 * The other families read their descriptors the same way, after the call:
 * an RNN pass (collector/record/flops/rnn.c) its RNN descriptor
 * (cudnnGetRNNDescriptor_v8: cell, direction, input mode, sizes, layers,
 * data and math types) and x's RNN data descriptor
 * (cudnnGetRNNDataDescriptor: T, B and the per-sequence lengths, summed
 * into the time steps computed when the batch fits TP_RNN_SEQ_READ, else
 * T * B); the ops counted for no FLOPs their main tensor
 * (cudnnGetTensorNdDescriptor).  An algorithm search
 * (cudnnFind*AlgorithmEx) keeps the shape of the convolution it times but
 * no FLOPs: the work it runs is every candidate, tuning, not training math.
 */
#include "collector/record/flops/conv.h"
#include "collector/record/flops/cudnn_graph.h"
#include "collector/record/flops/rnn.h"
#include "wrap.h"
#include "collector/record/apis.h"
#include "collector/wrap/core.h"

#include <cudnn.h>

#define TP_MISSING CUDNN_STATUS_NOT_INITIALIZED

typedef cudnnStatus_t (*tp_get_tensor_fn)(cudnnTensorDescriptor_t, int, cudnnDataType_t *, int *,
                                          int *, int *);
typedef cudnnStatus_t (*tp_get_filter_fn)(cudnnFilterDescriptor_t, int, cudnnDataType_t *,
                                          cudnnTensorFormat_t *, int *, int *);
typedef cudnnStatus_t (*tp_get_math_fn)(cudnnConvolutionDescriptor_t, cudnnMathType_t *);
typedef cudnnStatus_t (*tp_get_rnn_fn)(cudnnRNNDescriptor_t, cudnnRNNAlgo_t *, cudnnRNNMode_t *,
                                       cudnnRNNBiasMode_t *, cudnnDirectionMode_t *,
                                       cudnnRNNInputMode_t *, cudnnDataType_t *,
                                       cudnnDataType_t *, cudnnMathType_t *, int32_t *,
                                       int32_t *, int32_t *, int32_t *,
                                       cudnnDropoutDescriptor_t *, uint32_t *);
typedef cudnnStatus_t (*tp_get_rnn_data_fn)(cudnnRNNDataDescriptor_t, cudnnDataType_t *,
                                            cudnnRNNDataLayout_t *, int *, int *, int *, int,
                                            int[], void *);

static tp_get_tensor_fn tp_get_tensor;
static tp_get_filter_fn tp_get_filter;
static tp_get_math_fn tp_get_math;
static tp_get_rnn_fn tp_get_rnn;
static tp_get_rnn_data_fn tp_get_rnn_data;

/* Sequence lengths read from an RNN data descriptor (8 KiB of stack):
 * beyond this batch size the time steps are counted as T * B. */
#define TP_RNN_SEQ_READ 2048

/* Resolves the descriptor getters (idempotent; called from the slow path of
 * a wrapper's first call, when the real library is loaded). */
static void tp_cudnn_getters(void)
{
    if (!__atomic_load_n(&tp_get_tensor, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&tp_get_filter, (tp_get_filter_fn)tp_resolve("cudnnGetFilterNdDescriptor"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&tp_get_math, (tp_get_math_fn)tp_resolve("cudnnGetConvolutionMathType"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&tp_get_rnn, (tp_get_rnn_fn)tp_resolve("cudnnGetRNNDescriptor_v8"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&tp_get_rnn_data,
                         (tp_get_rnn_data_fn)tp_resolve("cudnnGetRNNDataDescriptor"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&tp_get_tensor, (tp_get_tensor_fn)tp_resolve("cudnnGetTensorNdDescriptor"),
                         __ATOMIC_RELEASE);
    }
}

/* Fills r->u.lib of a legacy convolution from its descriptors. */
static void tp_conv_record(struct tp_record *r, cudnnTensorDescriptor_t out,
                           cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv)
{
    tp_get_tensor_fn gt = __atomic_load_n(&tp_get_tensor, __ATOMIC_ACQUIRE);
    tp_get_filter_fn gf = __atomic_load_n(&tp_get_filter, __ATOMIC_ACQUIRE);
    tp_get_math_fn gm = __atomic_load_n(&tp_get_math, __ATOMIC_ACQUIRE);
    int od[CUDNN_DIM_MAX], os[CUDNN_DIM_MAX], wd[CUDNN_DIM_MAX], no = 0, nw = 0;
    cudnnDataType_t ot, wt;
    cudnnTensorFormat_t fmt;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    if (!gt || !gf || !out || !w)
        return;
    if (gt(out, CUDNN_DIM_MAX, &ot, &no, od, os) != CUDNN_STATUS_SUCCESS ||
        gf(w, CUDNN_DIM_MAX, &wt, &fmt, &nw, wd) != CUDNN_STATUS_SUCCESS ||
        no > CUDNN_DIM_MAX || nw > CUDNN_DIM_MAX)
        return;
    int64_t o64[CUDNN_DIM_MAX], w64[CUDNN_DIM_MAX];
    for (int i = 0; i < no; i++)
        o64[i] = od[i];
    for (int i = 0; i < nw; i++)
        w64[i] = wd[i];
    if (tp_conv_fill(r, o64, no, w64, nw) != 0)
        return;
    if (wt == CUDNN_DATA_FLOAT && gm && conv && gm(conv, &math) != CUDNN_STATUS_SUCCESS)
        math = CUDNN_DEFAULT_MATH;
    r->u.lib.dtype = (uint8_t)tp_cudnn_dtype(wt);
    r->u.lib.precision = (uint8_t)tp_cudnn_precision(wt, math);
}

/* Fills r->u.lib of an RNN pass from its RNN descriptor and x's. */
static void tp_rnn_record(struct tp_record *r, cudnnRNNDescriptor_t rnn,
                          cudnnRNNDataDescriptor_t x)
{
    tp_get_rnn_fn gr = __atomic_load_n(&tp_get_rnn, __ATOMIC_ACQUIRE);
    tp_get_rnn_data_fn gd = __atomic_load_n(&tp_get_rnn_data, __ATOMIC_ACQUIRE);
    if (!gr || !gd || !rnn || !x)
        return;
    cudnnRNNAlgo_t algo;
    cudnnRNNMode_t cell;
    cudnnRNNBiasMode_t bias;
    cudnnDirectionMode_t dir;
    cudnnRNNInputMode_t in_mode;
    cudnnDataType_t dt, math_prec, xt;
    cudnnMathType_t math;
    cudnnDropoutDescriptor_t dropout;
    cudnnRNNDataLayout_t layout;
    int32_t in, hidden, proj, layers;
    uint32_t aux;
    int seq, batch, vec;
    double fill;    /* paddingFill: the getter copies one element of x's type */
    if (gr(rnn, &algo, &cell, &bias, &dir, &in_mode, &dt, &math_prec, &math, &in, &hidden, &proj,
           &layers, &dropout, &aux) != CUDNN_STATUS_SUCCESS ||
        gd(x, &xt, &layout, &seq, &batch, &vec, 0, NULL, &fill) != CUDNN_STATUS_SUCCESS ||
        seq <= 0 || batch <= 0)
        return;
    struct tp_rnn_shape s = {
        .cell = (int)cell, .bidirectional = dir == CUDNN_BIDIRECTIONAL,
        .skip_input = in_mode == CUDNN_SKIP_INPUT, .input = in, .hidden = hidden,
        .proj = proj, .layers = layers, .seq = seq, .batch = batch,
        .tokens = (uint64_t)seq * (uint64_t)batch,
    };
    if (batch <= TP_RNN_SEQ_READ) {
        int lens[TP_RNN_SEQ_READ];
        if (gd(x, &xt, &layout, &seq, &batch, &vec, batch, lens, &fill) == CUDNN_STATUS_SUCCESS) {
            s.tokens = 0;
            for (int i = 0; i < batch; i++)
                s.tokens += (uint64_t)(lens[i] < 0 ? 0 : lens[i] > seq ? seq : lens[i]);
        }
    }
    if (tp_rnn_fill(r, &s) != 0)
        return;
    r->u.lib.dtype = (uint8_t)tp_cudnn_dtype(dt);
    r->u.lib.precision = (uint8_t)tp_cudnn_precision(dt, math);
}

/* Fills r->u.tensor with the dims and type of tensor descriptor "t". */
static void tp_tensor_record(struct tp_record *r, cudnnTensorDescriptor_t t)
{
    tp_get_tensor_fn gt = __atomic_load_n(&tp_get_tensor, __ATOMIC_ACQUIRE);
    int d[CUDNN_DIM_MAX], st[CUDNN_DIM_MAX], n = 0;
    cudnnDataType_t dt;
    if (!gt || !t || gt(t, CUDNN_DIM_MAX, &dt, &n, d, st) != CUDNN_STATUS_SUCCESS || n <= 0 ||
        n > CUDNN_DIM_MAX)
        return;
    for (int i = 0; i < n; i++)
        r->u.tensor.dim[i] = d[i] < 0 ? 0 : (uint32_t)d[i];
    r->u.tensor.nd = (uint8_t)n;
    r->u.tensor.dtype = (uint8_t)tp_cudnn_dtype(dt);
}

#define TP_R_CONV(out, w, conv) if (tp_r) tp_conv_record(tp_r, out, w, conv)
#define TP_R_FIND(out, w, conv) \
    if (tp_r) { tp_conv_record(tp_r, out, w, conv); tp_r->u.lib.flops = 0; }
#define TP_R_RNN(rnn, x)        if (tp_r) tp_rnn_record(tp_r, rnn, x)
#define TP_R_TENSOR(t)          if (tp_r) tp_tensor_record(tp_r, t)
#define TP_R_NONE               (void)tp_r

/* cudnnBackendExecute: the plan's FLOPs (collector/record/flops/cudnn_graph.c) */
#define TP_R_BEXEC(plan) if (tp_r) tp_backend_record(tp_r, plan)

#define TP_LIB_FN(ret, name, params, args, gate, rec) \
    TP_WRAP_GATED(TP_GATE_##gate, ret, name, params, args, TP_MISSING, tp_cudnn_getters(), \
                  (void)0, tp_lib_begin, rec)
#include "collector/record/apis/cudnn.def"
#undef TP_LIB_FN
