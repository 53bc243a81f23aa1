/*
 * sdpa_calls.c - cuDNN backend attention and fused plans, built with the
 * real cuDNN's descriptors, for tests/preload/test_backend.py, which holds
 * what each plan executes against torch.utils.flop_counter.
 *
 * DESIGN
 * As backend_calls.c: every descriptor function is the toolkit's
 * libcudnn.so.9 (tensors and operations finalize without a GPU; graphs,
 * engines, configs and plans may fail to, which is ignored), and
 * cudnnBackendExecute is the fake of tests/fakes/cudnn_exec.c.  Each
 * argument is one plan, "KIND:n,n,...[:FLAGS]":
 *   fwd:b,hq,hk,sq,sk,dq,dv   one CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR
 *                             (Q [b,hq,sq,dq], K [b,hk,sk,dq], V [b,hk,sk,dv],
 *                             O, softmax stats, a by-value scale); FLAGS p:
 *                             sequence lengths (padding mask), g: K and V
 *                             paged in blocks of PAGE, r: ragged offsets
 *   bwd:(same)                one CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR
 *                             (Q, K, V, O, stats, dO, dQ, dK, dV); FLAGS p
 *   cfwd:(same)               the matmul + pointwise graph cudnn-frontend's
 *                             CompositeSDPANode builds instead (bmm1 = Q K^T,
 *                             scale, masks, softmax, dropout, bmm2 = P V), its
 *                             ops in the frontend's order; FLAGS c: causal, d:
 *                             dropout (an RNG op), p: padding mask, r: ragged
 *   cbwd:(same)               CompositeSDPABackwardNode's graph: Q K^T
 *                             recomputed, dV = P^T dO, dP = dO V^T, dK = dS^T
 *                             Q, dQ = dS K, the GQA head reductions; FLAGS c,
 *                             d, p, r
 *   convbiasrelu:n,c,h,w,k,r,s   conv fwd (pad 1) + bias add + ReLU
 *   matmulbias:b,m,n,k        matmul + bias add
 *   layernorm:n,d             a NORM_FORWARD op (layer norm, training)
 * Data is bf16, intermediates float.  Step 0 (warm-up) and step 1 each
 * execute every plan once, in argument order.  stdout: one line per
 * execute (plan, op count, status), the same with and without the library.
 */
#include <cudnn.h>
#include <stdbool.h>
#include <stdint.h>

#include "prog.h"

typedef cudnnBackendDescriptor_t bd_t;

#define PAGE    64
#define MAXOPS  64
#define MAXDESC 512

/* one plan: every descriptor it made, its ops */
struct plan {
    bd_t d[MAXDESC];
    int nd;
    bd_t ops[MAXOPS];
    int nops;
    bd_t exec;
};

enum { T_VIRT = 1, T_VALUE = 2 };

static int64_t next_uid = 1;

static bd_t create(struct plan *p, cudnnBackendDescriptorType_t t)
{
    bd_t d;
    if (p->nd == MAXDESC) {
        fprintf(stderr, "sdpa_calls: too many descriptors\n");
        exit(1);
    }
    PROG_STATUS_CHECK(cudnnBackendCreateDescriptor(t, &d));
    p->d[p->nd++] = d;
    return d;
}

static void set_desc(bd_t d, cudnnBackendAttributeName_t a, bd_t v)
{
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v));
}

static void set_i64(bd_t d, cudnnBackendAttributeName_t a, int64_t n, const int64_t *v)
{
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(d, a, CUDNN_TYPE_INT64, n, v));
}

static void set_dt(bd_t d, cudnnBackendAttributeName_t a, cudnnDataType_t v)
{
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(d, a, CUDNN_TYPE_DATA_TYPE, 1, &v));
}

/* A 4-d tensor of dims "dm" and strides "st" (NULL: packed). */
static bd_t tensor_s(struct plan *p, const int64_t dm[4], const int64_t *st, cudnnDataType_t dt,
                     int flags, bd_t ragged)
{
    bd_t t = create(p, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t packed[4] = { dm[1] * dm[2] * dm[3], dm[2] * dm[3], dm[3], 1 };
    int64_t uid = next_uid++, align = 16;
    bool yes = true;
    set_dt(t, CUDNN_ATTR_TENSOR_DATA_TYPE, dt);
    set_i64(t, CUDNN_ATTR_TENSOR_DIMENSIONS, 4, dm);
    set_i64(t, CUDNN_ATTR_TENSOR_STRIDES, 4, st ? st : packed);
    set_i64(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, 1, &uid);
    set_i64(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 1, &align);
    if (flags & T_VIRT)
        PROG_STATUS_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes));
    if (flags & T_VALUE)
        PROG_STATUS_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes));
    if (ragged)
        set_desc(t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, ragged);
    PROG_STATUS_CHECK(cudnnBackendFinalize(t));
    return t;
}

static bd_t tensor(struct plan *p, int64_t a, int64_t b, int64_t c, int64_t e, cudnnDataType_t dt,
                   int flags)
{
    int64_t dm[4] = { a, b, c, e };
    return tensor_s(p, dm, NULL, dt, flags, NULL);
}

static bd_t scalar(struct plan *p)
{
    return tensor(p, 1, 1, 1, 1, CUDNN_DATA_FLOAT, T_VALUE);
}

static void add_op(struct plan *p, bd_t op)
{
    PROG_STATUS_CHECK(cudnnBackendFinalize(op));
    if (p->nops == MAXOPS) {
        fprintf(stderr, "sdpa_calls: too many ops\n");
        exit(1);
    }
    p->ops[p->nops++] = op;
}

/* y = mode(x[, b[, t]]); y NULL: a virtual float tensor shaped as x */
static bd_t pw_axis(struct plan *p, cudnnPointwiseMode_t mode, int64_t axis, bd_t x, bd_t b, bd_t t,
                    bd_t y)
{
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    bd_t pw = create(p, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    set_dt(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, prec);
    if (axis >= 0)
        set_i64(pw, CUDNN_ATTR_POINTWISE_AXIS, 1, &axis);
    PROG_STATUS_CHECK(cudnnBackendFinalize(pw));
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b)
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t)
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    add_op(p, op);
    return y;
}

static bd_t pw(struct plan *p, cudnnPointwiseMode_t mode, bd_t x, bd_t b, bd_t y)
{
    return pw_axis(p, mode, -1, x, b, NULL, y);
}

static void reduce(struct plan *p, cudnnReduceTensorOp_t how, bd_t x, bd_t y)
{
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    bd_t r = create(p, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(r, CUDNN_ATTR_REDUCTION_OPERATOR,
                                       CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how));
    set_dt(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, comp);
    PROG_STATUS_CHECK(cudnnBackendFinalize(r));
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    add_op(p, op);
}

static void matmul(struct plan *p, bd_t a, bd_t b, bd_t c)
{
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    bd_t mm = create(p, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    set_dt(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, comp);
    PROG_STATUS_CHECK(cudnnBackendFinalize(mm));
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    add_op(p, op);
}

static void reshape(struct plan *p, bd_t x, bd_t y)
{
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    add_op(p, op);
}

/* the dropout mask, a Bernoulli RNG op as the frontend builds for a
 * dropout probability */
static bd_t rng(struct plan *p, const int64_t dm[4])
{
    cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    double keep = 0.9;
    bd_t r = create(p, CUDNN_BACKEND_RNG_DESCRIPTOR);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(r, CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &dist));
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(r, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1,
                                       &keep));
    PROG_STATUS_CHECK(cudnnBackendFinalize(r));
    bd_t seed = tensor(p, 1, 1, 1, 1, CUDNN_DATA_INT64, 0);
    bd_t off = tensor(p, 1, 1, 1, 1, CUDNN_DATA_INT64, 0);
    bd_t y = tensor_s(p, dm, NULL, CUDNN_DATA_FLOAT, T_VIRT, NULL);
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_RNG_DESC, r);
    set_desc(op, CUDNN_ATTR_OPERATION_RNG_YDESC, y);
    set_desc(op, CUDNN_ATTR_OPERATION_RNG_SEED, seed);
    set_desc(op, CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, off);
    add_op(p, op);
    return y;
}

/* Graph, engine, config and plan over p->ops; finalize failures ignored. */
static void finish(struct plan *p)
{
    int64_t zero = 0;
    bd_t g = create(p, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                       p->nops, p->ops));
    (void)cudnnBackendFinalize(g);
    bd_t e = create(p, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    set_desc(e, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, g);
    set_i64(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 1, &zero);
    (void)cudnnBackendFinalize(e);
    bd_t c = create(p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    set_desc(c, CUDNN_ATTR_ENGINECFG_ENGINE, e);
    (void)cudnnBackendFinalize(c);
    p->exec = create(p, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set_desc(p->exec, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, c);
    (void)cudnnBackendFinalize(p->exec);
}

/* ---- attention ---------------------------------------------------------- */

struct attn {
    int64_t b, hq, hk, sq, sk, dq, dv;
    int causal, dropout, padding, ragged, paged;
    bd_t q, k, v, o, stats, scale, seq_q, seq_kv;
    bd_t kt, vt;   /* composite: K and V seen as [b, h, d, s] */
};

#define BF16 CUDNN_DATA_BFLOAT16
#define F32  CUDNN_DATA_FLOAT

/* Q, K, V, O, stats, scale, and the padding/ragged inputs */
static void attn_inputs(struct plan *p, struct attn *a)
{
    int64_t qd[4] = { a->b, a->hq, a->sq, a->dq }, od[4] = { a->b, a->hq, a->sq, a->dv };
    int64_t kd[4] = { a->b, a->hk, a->sk, a->dq }, vd[4] = { a->b, a->hk, a->sk, a->dv };
    bd_t rq = NULL, rk = NULL;
    if (a->ragged) {   /* offsets of each sequence, [b + 1, 1, 1, 1] */
        rq = tensor(p, a->b + 1, 1, 1, 1, CUDNN_DATA_INT32, 0);
        rk = tensor(p, a->b + 1, 1, 1, 1, CUDNN_DATA_INT32, 0);
    }
    if (a->paged) {    /* page containers [blocks, h, PAGE, d] */
        int64_t pages = (a->sk + PAGE - 1) / PAGE;
        kd[0] = vd[0] = a->b * pages;
        kd[2] = vd[2] = PAGE;
    }
    a->q = tensor_s(p, qd, NULL, BF16, 0, rq);
    a->k = tensor_s(p, kd, NULL, BF16, 0, rk);
    a->v = tensor_s(p, vd, NULL, BF16, 0, rk);
    a->o = tensor_s(p, od, NULL, BF16, 0, rq);
    a->stats = tensor(p, a->b, a->hq, a->sq, 1, F32, 0);
    a->scale = scalar(p);
    if (a->padding) {
        a->seq_q = tensor(p, a->b, 1, 1, 1, CUDNN_DATA_INT32, 0);
        a->seq_kv = tensor(p, a->b, 1, 1, 1, CUDNN_DATA_INT32, 0);
    }
    /* the composite graphs read K and V transposed (frontend: "cuDNN
     * backend API attention requires Q, KT, VT") */
    int64_t ktd[4] = { a->b, a->hk, a->dq, a->sk }, kts[4] = { a->hk * a->sk * a->dq, a->sk * a->dq, 1, a->dq };
    int64_t vtd[4] = { a->b, a->hk, a->dv, a->sk }, vts[4] = { a->hk * a->sk * a->dv, a->sk * a->dv, 1, a->dv };
    a->kt = tensor_s(p, ktd, kts, BF16, 0, NULL);
    a->vt = tensor_s(p, vtd, vts, BF16, 0, NULL);
}

static void fused_fwd(struct plan *p, struct attn *a)
{
    attn_inputs(p, a);
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, a->q);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, a->k);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, a->v);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, a->o);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, a->stats);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, a->scale);
    if (a->paged) {    /* page tables [b, 1, pages, 1] */
        bd_t ptk = tensor(p, a->b, 1, (a->sk + PAGE - 1) / PAGE, 1, CUDNN_DATA_INT32, 0);
        bd_t ptv = tensor(p, a->b, 1, (a->sk + PAGE - 1) / PAGE, 1, CUDNN_DATA_INT32, 0);
        set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_KDESC, ptk);
        set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_VDESC, ptv);
        if (!a->padding) {
            a->seq_q = tensor(p, a->b, 1, 1, 1, CUDNN_DATA_INT32, 0);
            a->seq_kv = tensor(p, a->b, 1, 1, 1, CUDNN_DATA_INT32, 0);
        }
    }
    if (a->seq_q) {
        set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC, a->seq_q);
        set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC, a->seq_kv);
    }
    add_op(p, op);
}

static void fused_bwd(struct plan *p, struct attn *a)
{
    attn_inputs(p, a);
    bd_t dq = tensor(p, a->b, a->hq, a->sq, a->dq, BF16, 0);
    bd_t dk = tensor(p, a->b, a->hk, a->sk, a->dq, BF16, 0);
    bd_t dv = tensor(p, a->b, a->hk, a->sk, a->dv, BF16, 0);
    bd_t dO = tensor(p, a->b, a->hq, a->sq, a->dv, BF16, 0);
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, a->q);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, a->k);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, a->v);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, a->o);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, a->stats);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, a->scale);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, dq);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, dk);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, dv);
    set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, dO);
    if (a->padding) {
        set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_SEQ_LEN_QDESC, a->seq_q);
        set_desc(op, CUDNN_ATTR_OPERATION_SDPA_BWD_SEQ_LEN_KVDESC, a->seq_kv);
    }
    add_op(p, op);
}

/* a virtual [b, hq, sq, sk] score-shaped tensor */
static bd_t scores(struct plan *p, const struct attn *a, cudnnDataType_t dt)
{
    return tensor(p, a->b, a->hq, a->sq, a->sk, dt, T_VIRT);
}

/* the score masks the frontend applies: padding (row < seq_q and col <
 * seq_kv) and causal (row >= col), each as GEN_INDEX + compare + select */
static bd_t masks(struct plan *p, const struct attn *a, bd_t s)
{
    if (a->padding) {
        bd_t row = pw_axis(p, CUDNN_POINTWISE_GEN_INDEX, 2, s, NULL, NULL, scores(p, a, CUDNN_DATA_INT32));
        bd_t col = pw_axis(p, CUDNN_POINTWISE_GEN_INDEX, 3, s, NULL, NULL, scores(p, a, CUDNN_DATA_INT32));
        bd_t rm = pw(p, CUDNN_POINTWISE_CMP_LT, row, a->seq_q, scores(p, a, CUDNN_DATA_BOOLEAN));
        bd_t cm = pw(p, CUDNN_POINTWISE_CMP_LT, col, a->seq_kv, scores(p, a, CUDNN_DATA_BOOLEAN));
        bd_t m = pw(p, CUDNN_POINTWISE_LOGICAL_AND, rm, cm, scores(p, a, CUDNN_DATA_BOOLEAN));
        s = pw_axis(p, CUDNN_POINTWISE_BINARY_SELECT, -1, s, scalar(p), m, scores(p, a, F32));
    }
    if (a->causal) {
        bd_t row = pw_axis(p, CUDNN_POINTWISE_GEN_INDEX, 2, s, NULL, NULL, scores(p, a, CUDNN_DATA_INT32));
        bd_t col = pw_axis(p, CUDNN_POINTWISE_GEN_INDEX, 3, s, NULL, NULL, scores(p, a, CUDNN_DATA_INT32));
        bd_t m = pw(p, CUDNN_POINTWISE_CMP_GE, row, col, scores(p, a, CUDNN_DATA_BOOLEAN));
        s = pw_axis(p, CUDNN_POINTWISE_BINARY_SELECT, -1, s, scalar(p), m, scores(p, a, F32));
    }
    return s;
}

static void composite_fwd(struct plan *p, struct attn *a)
{
    int64_t sd[4] = { a->b, a->hq, a->sq, a->sk };
    attn_inputs(p, a);
    bd_t s = scores(p, a, F32);
    matmul(p, a->q, a->kt, s);                                     /* bmm1 */
    s = pw(p, CUDNN_POINTWISE_MUL, s, a->scale, scores(p, a, F32));
    s = masks(p, a, s);
    /* softmax, with the stats the backward reads */
    bd_t mx = tensor(p, a->b, a->hq, a->sq, 1, F32, T_VIRT);
    reduce(p, CUDNN_REDUCE_TENSOR_MAX, s, mx);
    bd_t e = pw(p, CUDNN_POINTWISE_SUB, s, mx, scores(p, a, F32));
    e = pw(p, CUDNN_POINTWISE_EXP, e, NULL, scores(p, a, F32));
    bd_t sum = tensor(p, a->b, a->hq, a->sq, 1, F32, T_VIRT);
    reduce(p, CUDNN_REDUCE_TENSOR_ADD, e, sum);
    bd_t lg = pw(p, CUDNN_POINTWISE_LOG, sum, NULL, tensor(p, a->b, a->hq, a->sq, 1, F32, T_VIRT));
    pw(p, CUDNN_POINTWISE_ADD, mx, lg, a->stats);
    bd_t pr = pw(p, CUDNN_POINTWISE_DIV, e, sum, scores(p, a, F32));
    if (a->dropout) {
        bd_t mask = rng(p, sd);
        pr = pw(p, CUDNN_POINTWISE_MUL, pr, mask, scores(p, a, F32));
        pr = pw(p, CUDNN_POINTWISE_MUL, pr, scalar(p), scores(p, a, F32));
    }
    bd_t pb = pw(p, CUDNN_POINTWISE_IDENTITY, pr, NULL, scores(p, a, BF16));
    matmul(p, pb, a->v, a->o);                                     /* bmm2 */
}

static void composite_bwd(struct plan *p, struct attn *a)
{
    int64_t sd[4] = { a->b, a->hq, a->sq, a->sk };
    attn_inputs(p, a);
    bd_t dO = tensor(p, a->b, a->hq, a->sq, a->dv, BF16, 0);
    bd_t dQ = tensor(p, a->b, a->hq, a->sq, a->dq, BF16, 0);
    bd_t dK = tensor(p, a->b, a->hk, a->sk, a->dq, BF16, 0);
    bd_t dV = tensor(p, a->b, a->hk, a->sk, a->dv, BF16, 0);
    bd_t mask = a->dropout ? rng(p, sd) : NULL;
    /* softmax_sum = sum(dO * O) (* 1 - p) */
    bd_t t = pw(p, CUDNN_POINTWISE_MUL, dO, a->o, tensor(p, a->b, a->hq, a->sq, a->dv, F32, T_VIRT));
    bd_t red = tensor(p, a->b, a->hq, a->sq, 1, F32, T_VIRT);
    reduce(p, CUDNN_REDUCE_TENSOR_ADD, t, red);
    bd_t ssum = pw(p, CUDNN_POINTWISE_MUL, red, scalar(p), tensor(p, a->b, a->hq, a->sq, 1, F32, 0));
    /* P recomputed */
    bd_t s = scores(p, a, F32);
    matmul(p, a->q, a->kt, s);
    s = pw(p, CUDNN_POINTWISE_MUL, s, a->scale, scores(p, a, F32));
    s = masks(p, a, s);
    s = pw(p, CUDNN_POINTWISE_SUB, s, a->stats, scores(p, a, F32));
    bd_t e = pw(p, CUDNN_POINTWISE_EXP, s, NULL, scores(p, a, F32));
    bd_t pr = e;
    if (mask) {
        pr = pw(p, CUDNN_POINTWISE_MUL, pr, mask, scores(p, a, F32));
        pr = pw(p, CUDNN_POINTWISE_MUL, pr, scalar(p), scores(p, a, F32));
    }
    /* dV = P^T dO (per query head, then summed over each K/V head's group) */
    int64_t td[4] = { a->b, a->hq, a->sk, a->sq }, ts[4] = { a->hq * a->sq * a->sk, a->sq * a->sk, 1, a->sk };
    bd_t pt = tensor_s(p, td, ts, BF16, T_VIRT, NULL);
    reshape(p, pr, pt);
    if (a->hq == a->hk) {
        matmul(p, pt, dO, dV);
    } else {
        bd_t full = tensor(p, a->b, a->hq, a->sk, a->dv, F32, T_VIRT);
        matmul(p, pt, dO, full);
        reduce(p, CUDNN_REDUCE_TENSOR_ADD, full, dV);
    }
    /* dS = (dO V^T (* mask) - softmax_sum) * exp(S) (* 1/(1-p)) * scale */
    bd_t dp = scores(p, a, F32);
    matmul(p, dO, a->vt, dp);
    if (mask)
        dp = pw(p, CUDNN_POINTWISE_MUL, dp, mask, scores(p, a, F32));
    dp = pw(p, CUDNN_POINTWISE_SUB, dp, ssum, scores(p, a, F32));
    bd_t ds = pw(p, CUDNN_POINTWISE_MUL, dp, e, scores(p, a, F32));
    if (mask)
        ds = pw(p, CUDNN_POINTWISE_MUL, ds, scalar(p), scores(p, a, F32));
    ds = pw(p, CUDNN_POINTWISE_MUL, ds, a->scale, scores(p, a, BF16));
    /* dK = dS^T Q */
    bd_t dst = tensor_s(p, td, ts, BF16, T_VIRT, NULL);
    reshape(p, ds, dst);
    if (a->hq == a->hk) {
        matmul(p, dst, a->q, dK);
    } else {
        bd_t full = tensor(p, a->b, a->hq, a->sk, a->dq, F32, T_VIRT);
        matmul(p, dst, a->q, full);
        reduce(p, CUDNN_REDUCE_TENSOR_ADD, full, dK);
    }
    /* dQ = dS K, accumulated in float */
    int64_t kd[4] = { a->b, a->hk, a->sk, a->dq };
    bd_t k = tensor_s(p, kd, NULL, BF16, T_VIRT, NULL);
    reshape(p, a->kt, k);
    bd_t acc = tensor(p, a->b, a->hq, a->sq, a->dq, F32, 0);
    matmul(p, ds, k, acc);
    pw(p, CUDNN_POINTWISE_IDENTITY, acc, NULL, dQ);
}

/* ---- fused non-attention graphs ---------------------------------------- */

static void conv_bias_relu(struct plan *p, const int64_t *v)
{
    int64_t n = v[0], c = v[1], h = v[2], w = v[3], k = v[4], r = v[5], s = v[6];
    int64_t sp = 2, pads[2] = { r / 2, s / 2 }, str[2] = { 1, 1 }, dil[2] = { 1, 1 };
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    float alpha = 1.0f, beta = 0.0f;
    bd_t cv = create(p, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    set_dt(cv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, F32);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(cv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 1, &sp);
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_DILATIONS, 2, dil);
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 2, str);
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 2, pads);
    set_i64(cv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, 2, pads);
    PROG_STATUS_CHECK(cudnnBackendFinalize(cv));
    int64_t ho = h + 2 * (r / 2) - r + 1, wo = w + 2 * (s / 2) - s + 1;
    bd_t x = tensor(p, n, c, h, w, BF16, 0), f = tensor(p, k, c, r, s, BF16, 0);
    bd_t y = tensor(p, n, k, ho, wo, F32, T_VIRT);
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
    set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, f);
    set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
    set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, cv);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    add_op(p, op);
    bd_t yb = pw(p, CUDNN_POINTWISE_ADD, y, tensor(p, 1, k, 1, 1, BF16, 0), tensor(p, n, k, ho, wo, F32, T_VIRT));
    pw(p, CUDNN_POINTWISE_RELU_FWD, yb, NULL, tensor(p, n, k, ho, wo, BF16, 0));
}

static void matmul_bias(struct plan *p, const int64_t *v)
{
    int64_t b = v[0], m = v[1], n = v[2], k = v[3];
    bd_t c = tensor(p, 1, b, m, n, F32, T_VIRT);
    matmul(p, tensor(p, 1, b, m, k, BF16, 0), tensor(p, 1, b, k, n, BF16, 0), c);
    pw(p, CUDNN_POINTWISE_ADD, c, tensor(p, 1, 1, 1, n, BF16, 0), tensor(p, 1, b, m, n, BF16, 0));
}

static void layer_norm(struct plan *p, const int64_t *v)
{
    int64_t n = v[0], d = v[1];
    cudnnBackendNormMode_t mode = CUDNN_LAYER_NORM;
    cudnnBackendNormFwdPhase_t phase = CUDNN_NORM_FWD_TRAINING;
    bd_t op = create(p, CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR);
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, 1, &mode));
    PROG_STATUS_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, 1, &phase));
    set_desc(op, CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, tensor(p, n, d, 1, 1, BF16, 0));
    set_desc(op, CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, tensor(p, n, 1, 1, 1, F32, 0));
    set_desc(op, CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC, tensor(p, n, 1, 1, 1, F32, 0));
    set_desc(op, CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, tensor(p, 1, d, 1, 1, F32, 0));
    set_desc(op, CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, tensor(p, 1, d, 1, 1, F32, 0));
    set_desc(op, CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, scalar(p));
    set_desc(op, CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, tensor(p, n, d, 1, 1, BF16, 0));
    add_op(p, op);
}

/* ---- main ---------------------------------------------------------------- */

static void build(struct plan *p, const char *arg)
{
    char kind[16], flags[16] = "";
    int64_t v[8] = { 0 };
    int nv = 0;
    const char *colon = strchr(arg, ':');
    if (!colon || (size_t)(colon - arg) >= sizeof kind) {
        fprintf(stderr, "sdpa_calls: bad plan %s\n", arg);
        exit(64);
    }
    memcpy(kind, arg, (size_t)(colon - arg));
    kind[colon - arg] = 0;
    const char *s = colon + 1;
    while (nv < 8) {
        char *end;
        v[nv++] = strtoll(s, &end, 10);
        if (*end != ',') {
            if (*end == ':')
                snprintf(flags, sizeof flags, "%s", end + 1);
            break;
        }
        s = end + 1;
    }
    if (!strcmp(kind, "convbiasrelu") && nv == 7) {
        conv_bias_relu(p, v);
    } else if (!strcmp(kind, "matmulbias") && nv == 4) {
        matmul_bias(p, v);
    } else if (!strcmp(kind, "layernorm") && nv == 2) {
        layer_norm(p, v);
    } else if (nv == 7) {
        struct attn a = { v[0], v[1], v[2], v[3], v[4], v[5], v[6],
                          !!strchr(flags, 'c'), !!strchr(flags, 'd'), !!strchr(flags, 'p'),
                          !!strchr(flags, 'r'), !!strchr(flags, 'g'),
                          NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL };
        if (!strcmp(kind, "fwd"))
            fused_fwd(p, &a);
        else if (!strcmp(kind, "bwd"))
            fused_bwd(p, &a);
        else if (!strcmp(kind, "cfwd"))
            composite_fwd(p, &a);
        else if (!strcmp(kind, "cbwd"))
            composite_bwd(p, &a);
        else
            nv = 0;
    } else {
        nv = 0;
    }
    if (!nv) {
        fprintf(stderr, "sdpa_calls: bad plan %s\n", arg);
        exit(64);
    }
    finish(p);
}

int main(int argc, char **argv)
{
    static struct plan plans[32];
    int n = argc - 1;
    cudnnHandle_t h;
    cudaStream_t stream;
    bd_t vp;
    if (n < 1 || n > 32) {
        fprintf(stderr, "usage: sdpa_calls KIND:n,n,...[:FLAGS]... (at most 32)\n");
        return 64;
    }
    PROG_CHECK(cudaStreamCreate(&stream));
    PROG_STATUS_CHECK(cudnnCreate(&h));
    PROG_STATUS_CHECK(cudnnSetStream(h, stream));
    PROG_STATUS_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    for (int i = 0; i < n; i++)
        build(&plans[i], argv[i + 1]);
    for (int step = 0; step < 2; step++) {
        for (int i = 0; i < n; i++) {
            cudnnStatus_t st = cudnnBackendExecute(h, plans[i].exec, vp);
            printf("%s: %d ops, cudnnBackendExecute -> %d\n", argv[i + 1], plans[i].nops, (int)st);
        }
        tp_call_step();
    }
    for (int i = 0; i < n; i++)
        for (int j = plans[i].nd - 1; j >= 0; j--)
            PROG_STATUS_CHECK(cudnnBackendDestroyDescriptor(plans[i].d[j]));
    PROG_STATUS_CHECK(cudnnBackendDestroyDescriptor(vp));
    PROG_STATUS_CHECK(cudnnDestroy(h));
    PROG_CHECK(cudaStreamDestroy(stream));
    return 0;
}
