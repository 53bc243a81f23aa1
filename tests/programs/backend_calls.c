/*
 * backend_calls.c - cuDNN backend (graph) API plans for the preload tests.
 *
 * DESIGN
 * Every descriptor function is the real one (the toolkit's libcudnn.so.9:
 * create/set/finalize of tensors, convolutions and ops need no GPU);
 * cudnnBackendExecute binds to the fake tests/fakes/cudnn_exec.c, linked
 * first.  Operation graphs, engines, configs and plans cannot be finalized
 * without a real handle (their finalize failures are ignored) and the
 * graph's HANDLE attribute is never set.  Plans:
 *   conv:   one graph of a forward, a backward-data and a backward-filter
 *           convolution of CONV below (X [N,C,H,W], W [K,C/g,R,S], Y
 *           [N,K,P,Q], float, compute type float)
 *   matmul: one graph of a batched matmul A [B,M,K] x B [B,K,N] = C [B,M,N]
 *   conv2:  built after step 2, after the conv plan's whole chain was
 *           destroyed (so its addresses are likely reused): CONV2, forward only
 * Steps: 0 (warm-up): conv, matmul; 1: conv; 2: matmul, conv; then conv's
 * chain is destroyed and conv2 built; 3: conv2, matmul; 4: conv2.  After the
 * last step signal one more conv2 execute runs outside any step.  stdout
 * (every execute's status) is the same with and without the library;
 * stderr says how many of conv2's descriptors reused an address of conv's.
 *
 * BACKEND_BENCH=N: instead, time N executes of the conv plan in each of 5
 * steps and print the mean ns per call to stderr (stdout stays empty).
 */
#include <cudnn.h>
#include <stdint.h>
#include <time.h>

#include "prog.h"

typedef cudnnBackendDescriptor_t bd_t;

struct conv_shape { int64_t n, c, k, g, h, w, r, s, pad, stride; };
static const struct conv_shape CONV = { 2, 8, 16, 2, 16, 16, 3, 3, 1, 1 };
static const struct conv_shape CONV2 = { 4, 4, 8, 1, 12, 12, 5, 5, 0, 1 };
static const int64_t MM_B = 3, MM_M = 32, MM_N = 40, MM_K = 64;

#define MAXD 64
struct chain { bd_t d[MAXD]; int n; bd_t plan; };

static bd_t create(struct chain *ch, cudnnBackendDescriptorType_t t)
{
    bd_t d;
    PROG_STATUS_CHECK(cudnnBackendCreateDescriptor(t, &d));
    ch->d[ch->n++] = d;
    return d;
}

static void set_i64(bd_t d, cudnnBackendAttributeName_t a, int64_t n, const int64_t *v)
{
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(d, a, CUDNN_TYPE_INT64, n, v));
}

static void set_desc(bd_t d, cudnnBackendAttributeName_t a, int64_t n, bd_t *v)
{
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, v));
}

static int64_t next_uid = 1;

static bd_t tensor(struct chain *ch, int nd, const int64_t *dims)
{
    bd_t t = create(ch, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t strides[8], uid = next_uid++, align = 16;
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    strides[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--)
        strides[i] = strides[i + 1] * dims[i + 1];
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    set_i64(t, CUDNN_ATTR_TENSOR_DIMENSIONS, nd, dims);
    set_i64(t, CUDNN_ATTR_TENSOR_STRIDES, nd, strides);
    set_i64(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, 1, &uid);
    set_i64(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 1, &align);
    PROG_STATUS_CHECK(cudnnBackendFinalize(t));
    return t;
}

/* Graph, engine, config, plan over "ops"; finalize failures are ignored. */
static void finish(struct chain *ch, int nops, bd_t *ops)
{
    int64_t zero = 0;
    bd_t g = create(ch, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, nops, ops);
    (void)cudnnBackendFinalize(g);
    bd_t e = create(ch, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    set_desc(e, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, 1, &g);
    set_i64(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 1, &zero);
    (void)cudnnBackendFinalize(e);
    bd_t c = create(ch, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    set_desc(c, CUDNN_ATTR_ENGINECFG_ENGINE, 1, &e);
    (void)cudnnBackendFinalize(c);
    bd_t p = create(ch, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set_desc(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 1, &c);
    (void)cudnnBackendFinalize(p);
    ch->plan = p;
}

static void build_conv(struct chain *ch, const struct conv_shape *cs, int all)
{
    int64_t p = (cs->h + 2 * cs->pad - cs->r) / cs->stride + 1;
    int64_t q = (cs->w + 2 * cs->pad - cs->s) / cs->stride + 1;
    int64_t xd[4] = { cs->n, cs->c, cs->h, cs->w }, wd[4] = { cs->k, cs->c / cs->g, cs->r, cs->s };
    int64_t yd[4] = { cs->n, cs->k, p, q };
    int64_t sp = 2, pads[2] = { cs->pad, cs->pad }, str[2] = { cs->stride, cs->stride };
    int64_t dil[2] = { 1, 1 };
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    float alpha = 1.0f, beta = 0.0f;
    bd_t ops[3];
    int nops = 0;

    bd_t cv = create(ch, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(cv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(cv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 1, &sp);
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_DILATIONS, 2, dil);
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 2, str);
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 2, pads);
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, 2, pads);
    PROG_STATUS_CHECK(cudnnBackendFinalize(cv));

    static const cudnnBackendDescriptorType_t types[3] = {
        CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
    };
    /* x/dx, w/dw, y/dy, conv, alpha, beta */
    static const cudnnBackendAttributeName_t attrs[3][6] = {
        { CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA },
        { CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA },
        { CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA },
    };
    for (int i = 0; i < (all ? 3 : 1); i++) {
        bd_t x = tensor(ch, 4, xd), w = tensor(ch, 4, wd), y = tensor(ch, 4, yd);
        bd_t op = create(ch, types[i]);
        set_desc(op, attrs[i][0], 1, &x);
        set_desc(op, attrs[i][1], 1, &w);
        set_desc(op, attrs[i][2], 1, &y);
        set_desc(op, attrs[i][3], 1, &cv);
        PROG_STATUS_CHECK(cudnnBackendSetAttribute(op, attrs[i][4], CUDNN_TYPE_FLOAT, 1, &alpha));
        PROG_STATUS_CHECK(cudnnBackendSetAttribute(op, attrs[i][5], CUDNN_TYPE_FLOAT, 1, &beta));
        PROG_STATUS_CHECK(cudnnBackendFinalize(op));
        ops[nops++] = op;
    }
    finish(ch, nops, ops);
}

static void build_matmul(struct chain *ch)
{
    int64_t ad[3] = { MM_B, MM_M, MM_K }, bdm[3] = { MM_B, MM_K, MM_N }, cd[3] = { MM_B, MM_M, MM_N };
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    bd_t a = tensor(ch, 3, ad), b = tensor(ch, 3, bdm), c = tensor(ch, 3, cd);
    bd_t mm = create(ch, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    PROG_STATUS_CHECK(cudnnBackendFinalize(mm));
    bd_t op = create(ch, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, 1, &a);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, 1, &b);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, 1, &c);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, 1, &mm);
    PROG_STATUS_CHECK(cudnnBackendFinalize(op));
    finish(ch, 1, &op);
}

static void destroy(struct chain *ch)
{
    for (int i = ch->n - 1; i >= 0; i--)
        PROG_STATUS_CHECK(cudnnBackendDestroyDescriptor(ch->d[i]));
    ch->n = 0;
}

static void execute(cudnnHandle_t h, const char *name, bd_t plan, bd_t vp)
{
    cudnnStatus_t s = cudnnBackendExecute(h, plan, vp);
    printf("%s cudnnBackendExecute -> %d\n", name, (int)s);
}

int main(void)
{
    long bench = prog_env_long("BACKEND_BENCH", 0);
    cudnnHandle_t h;
    cudaStream_t stream;
    static struct chain conv, mm, conv2;
    bd_t vp;
    PROG_CHECK(cudaStreamCreate(&stream));
    PROG_STATUS_CHECK(cudnnCreate(&h));
    PROG_STATUS_CHECK(cudnnSetStream(h, stream));
    PROG_STATUS_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    build_conv(&conv, &CONV, 1);
    build_matmul(&mm);

    if (bench > 0) {
        for (int step = 0; step < 6; step++) {
            uint64_t t0 = prog_now_ns();
            for (long j = 0; j < bench; j++)
                cudnnBackendExecute(h, conv.plan, vp);
            uint64_t t1 = prog_now_ns();
            if (step > 0)
                fprintf(stderr, "backend_calls: step %d: %.1f ns per cudnnBackendExecute\n",
                        step, (double)(t1 - t0) / (double)bench);
            tp_call_step();
        }
    } else {
        execute(h, "conv", conv.plan, vp);
        execute(h, "matmul", mm.plan, vp);
        tp_call_step();
        execute(h, "conv", conv.plan, vp);
        tp_call_step();
        execute(h, "matmul", mm.plan, vp);
        execute(h, "conv", conv.plan, vp);
        struct chain old = conv;
        destroy(&conv);
        build_conv(&conv2, &CONV2, 0);
        int reused = 0;
        for (int i = 0; i < conv2.n; i++)
            for (int j = 0; j < old.n; j++)
                reused += conv2.d[i] == old.d[j];
        fprintf(stderr, "backend_calls: conv2 reused %d of conv's descriptor addresses%s\n",
                reused, conv2.plan == old.plan ? " (the plan's too)" : "");
        tp_call_step();
        execute(h, "conv2", conv2.plan, vp);
        execute(h, "matmul", mm.plan, vp);
        tp_call_step();
        execute(h, "conv2", conv2.plan, vp);
        tp_call_step();
        execute(h, "conv2", conv2.plan, vp);
    }

    destroy(&conv);
    destroy(&conv2);
    destroy(&mm);
    PROG_STATUS_CHECK(cudnnBackendDestroyDescriptor(vp));
    PROG_STATUS_CHECK(cudnnDestroy(h));
    PROG_CHECK(cudaStreamDestroy(stream));
    return 0;
}
