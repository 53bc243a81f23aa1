/*
 * cudnn_graph.c - DESIGN: the FLOPs of cudnnBackendExecute (the cuDNN
 * backend/graph API that PyTorch uses), by following the
 * descriptors the program builds, without Finalize (which needs a handle).
 *
 * The hand-written wrappers of cudnnBackendCreateDescriptor, SetAttribute,
 * GetAttribute and DestroyDescriptor (preload/cudnn_backend.c) report here,
 * always (plans are built before the window), and a fixed table keeps the
 * descriptors of the types that matter (tensor, convolution, the three
 * convolution ops, matmul op, SDPA forward and backward ops, operation
 * graph, engine, engine config, engine heuristics, execution plan) with
 * the attributes that matter: tensor dims and data type, convolution
 * compute type, the op's tensors (and an SDPA op's page tables) and
 * convolution, the graph's ops that carry FLOPs, the engine's graph, the
 * config's engine, the plan's config, the heuristics' graph.
 * The heuristics fill configs the program created (GetAttribute
 * ENGINEHEUR_RESULTS), so each config returned gets the heuristics' graph
 * directly; an engine read back from a config (GetAttribute
 * ENGINECFG_ENGINE) gets the config's graph.  Other types (variant packs,
 * built and destroyed on every step) and other attributes are not kept,
 * and cost one switch (SetAttribute) or one lock-free probe (Create,
 * Destroy).  Bookkeeping never changes a result or errno, never prints and
 * never calls CUDA; it runs after the real call, only when it succeeded.
 *
 * The table: TP_BD_SLOTS slots, open addressing on the pointer within a
 * window of TP_BD_PROBE slots; a new descriptor takes the first free slot
 * of its window, or the oldest one.  Writers hold tp_bd_lock and first bump
 * tp_bd_epoch (seqlock style: bump, release fence, then write).
 *
 * cudnnBackendExecute's record (TP_R_BEXEC in cudnn.c, recording only):
 * plan -> config -> engine -> graph (or config -> graph from the
 * heuristics) -> ops, the sum of the ops' FLOPs (conv.h, gemm.h: convolution
 * 2 numel(y or dy) prod(w[1:]); matmul 2 numel(C) A[-1]); m/n/k/batch,
 * dtype and precision of the first op with FLOPs.  The result is cached in
 * the plan's slot with the epoch it was computed at: a later Execute of the
 * plan finds it by a lock-free probe and takes no lock while no tracked
 * descriptor changed.  An unknown plan gives flops 0 (cached too).
 * A graph keeps only its convolution, matmul and SDPA ops, the first
 * TP_BD_MAXOPS of them: pointwise, reduction, reshape, RNG and norm ops
 * count nothing, so however many a fused graph holds (conv + bias +
 * activation, matmul + bias, a composite attention of 35 ops) each
 * FLOP-carrying op counts once, and torch.utils.flop_counter agrees (it
 * has no formula for a bias add, an activation or a norm).
 *
 * Attention (PyTorch's cuDNN SDPA, through cudnn-frontend): one
 * SDPA_FWD op (its UnifiedSDPANode, cuDNN >= 9.13.1 when the features
 * allow) or the matmul + pointwise graph of its CompositeSDPANode (bmm1 =
 * Q K^T, bmm2 = P V); the backward is CompositeSDPABackwardNode's graph
 * (Q K^T recomputed, P^T dO, dO V^T, dS^T Q, dS K) or an SDPA_BWD op.
 * Both ways give torch.utils.flop_counter's numbers (sdpa_flop_count,
 * sdpa_backward_flop_count), so the totals give the MFU torch gives:
 *  - causal: NOT discounted, the full s_q x s_kv is counted, as torch
 *    does ("We aren't accounting for causal attention"); the mask is
 *    pointwise ops or an SDPA subgraph, the shapes stay whole;
 *  - GQA/MQA: the query heads count (h_q of Q; torch broadcasts K/V
 *    heads; the composite backward's dK/dV matmuls are per query head,
 *    then summed by a reduction);
 *  - dropout: no FLOPs (an RNG op and multiplies);
 *  - padding masks (sequence lengths), ragged offsets and GEMM/variant
 *    pack shape overrides: the padded maximum of the descriptors.  The
 *    real lengths are device data; it is flop_counter's own rule when
 *    lengths are unknown (_offsets_to_lengths), though for PyTorch's
 *    varlen op (aten._cudnn_attention_forward) torch has no formula and
 *    counts 0;
 *  - paged K/V (SDPA_FWD page tables, K/V being [blocks, h, block, d]
 *    containers): S_kv of the unpaged one, else pages x block size of the
 *    shorter, as cudnn-frontend infers it (a multiple of the block size).
 * tests/preload/test_backend.py holds these against FlopCounterMode over
 * the aten ops, with plans built from the real cuDNN's descriptors.
 */
#include "cudnn_graph.h"
#include "conv.h"

#include <cudnn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define TP_BD_SLOTS  4096
#define TP_BD_PROBE  32
#define TP_BD_MAXOPS 32
#define TP_BD_DEAD   ((void *)1)

enum { TP_BD_OUT = 0, TP_BD_FILT = 1, TP_BD_IN = 2, TP_BD_CONV = 3 }; /* op refs */
enum { TP_BD_MM_C = 0, TP_BD_MM_A = 1, TP_BD_MM_B = 2 };
enum { TP_BD_SD_Q = 0, TP_BD_SD_K = 1, TP_BD_SD_V = 2, TP_BD_SD_PTK = 3, TP_BD_SD_PTV = 4 };
enum { TP_BD_LINK = 0, TP_BD_HEUR_GRAPH = 1 }; /* engine/cfg/plan/heur refs */

struct tp_bd {
    void *desc;          /* lock-free reads: NULL never used, TP_BD_DEAD freed */
    uint64_t age;        /* insertion order */
    int type;            /* cudnnBackendDescriptorType_t */
    int n;               /* tensor: dims; graph: ops */
    int dtype;           /* tensor: data type; convolution: compute type; -1 */
    void *ref[5];
    union {
        int64_t dims[CUDNN_DIM_MAX];
        void *ops[TP_BD_MAXOPS];
    } u;
    /* plan cache, read lock-free */
    uint64_t c_epoch, c_flops, c_mn, c_kb;
    uint32_t c_tp;       /* dtype | precision << 8 */
};

static struct tp_bd tp_bd_tab[TP_BD_SLOTS];
static pthread_mutex_t tp_bd_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tp_bd_epoch = 1;
static uint64_t tp_bd_age;

/* The op types that carry FLOPs (the rest of a graph counts nothing). */
static int tp_bd_flop_op(int type)
{
    switch (type) {
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR:
        return 1;
    default:
        return 0;
    }
}

/* The descriptor types whose attributes are kept: the ops above and what
 * leads from a plan to them. */
static int tp_bd_kept(int type)
{
    switch (type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        return 1;
    default:
        return tp_bd_flop_op(type);
    }
}

/*
 * tp_bd_attr - the descriptor type an attribute belongs to and the ref
 * slot it sets (-1: dims/dtype/ops handled apart), or 0 if not tracked.
 */
int tp_bd_attr(int attr, int *ref)
{
    *ref = -1;
    switch (attr) {
    case CUDNN_ATTR_TENSOR_DIMENSIONS: case CUDNN_ATTR_TENSOR_DATA_TYPE:
        return CUDNN_BACKEND_TENSOR_DESCRIPTOR;
    case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: return CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y: *ref = TP_BD_OUT; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W: *ref = TP_BD_FILT; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X: *ref = TP_BD_IN; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC: *ref = TP_BD_CONV; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY: *ref = TP_BD_OUT; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W: *ref = TP_BD_FILT; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX: *ref = TP_BD_IN; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC: *ref = TP_BD_CONV; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY: *ref = TP_BD_OUT; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW: *ref = TP_BD_FILT; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X: *ref = TP_BD_IN; break;
    case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC: *ref = TP_BD_CONV; break;
    case CUDNN_ATTR_OPERATION_MATMUL_CDESC: *ref = TP_BD_MM_C; break;
    case CUDNN_ATTR_OPERATION_MATMUL_ADESC: *ref = TP_BD_MM_A; break;
    case CUDNN_ATTR_OPERATION_MATMUL_BDESC: *ref = TP_BD_MM_B; break;
    case CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC: *ref = TP_BD_SD_Q; return CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR;
    case CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC: *ref = TP_BD_SD_K; return CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR;
    case CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC: *ref = TP_BD_SD_V; return CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR;
    case CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_KDESC:
        *ref = TP_BD_SD_PTK;
        return CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR;
    case CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_VDESC:
        *ref = TP_BD_SD_PTV;
        return CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR;
    case CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC: *ref = TP_BD_SD_Q; return CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR;
    case CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC: *ref = TP_BD_SD_K; return CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR;
    case CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC: *ref = TP_BD_SD_V; return CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR;
    case CUDNN_ATTR_OPERATIONGRAPH_OPS: return CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR;
    case CUDNN_ATTR_ENGINE_OPERATION_GRAPH: *ref = TP_BD_LINK; break;
    case CUDNN_ATTR_ENGINECFG_ENGINE: *ref = TP_BD_LINK; break;
    case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: *ref = TP_BD_LINK; break;
    case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: *ref = TP_BD_LINK; break;
    default:
        return 0;
    }
    switch (attr / 100) {   /* attribute ranges of cudnn_graph.h */
    case 2: return CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR;
    case 3: return CUDNN_BACKEND_ENGINECFG_DESCRIPTOR;
    case 4: return CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR;
    case 13: return CUDNN_BACKEND_ENGINE_DESCRIPTOR;
    case 15: return CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR;
    default:
        if (attr <= CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y)
            return CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
        if (attr <= CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY)
            return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
        return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
    }
}

static unsigned tp_bd_hash(const void *d)
{
    uint64_t h = ((uint64_t)(uintptr_t)d >> 4) * 0x9e3779b97f4a7c15ull;
    return (unsigned)(h >> 52) & (TP_BD_SLOTS - 1);
}

/* tp_bd_probe - the slot of "d", lock-free (writers may race: callers recheck). */
static struct tp_bd *tp_bd_probe(const void *d)
{
    unsigned h = tp_bd_hash(d);
    for (unsigned i = 0; i < TP_BD_PROBE; i++) {
        struct tp_bd *s = &tp_bd_tab[(h + i) & (TP_BD_SLOTS - 1)];
        void *v = __atomic_load_n(&s->desc, __ATOMIC_RELAXED);
        if (v == d)
            return s;
        if (!v)
            return NULL;
    }
    return NULL;
}

/* Writers (tp_bd_lock held): bump the epoch before any change.  The
 * acquire half of the increment keeps the writes that follow after it (a
 * fence would do the same, but ThreadSanitizer does not model fences). */
static void tp_bd_changing(void)
{
    __atomic_fetch_add(&tp_bd_epoch, 1, __ATOMIC_ACQ_REL);
}

static struct tp_bd *tp_bd_find(const void *d, int type)
{
    struct tp_bd *s = d ? tp_bd_probe(d) : NULL;
    return s && (type < 0 || s->type == type) ? s : NULL;
}

static void tp_bd_forget(struct tp_bd *s)
{
    __atomic_store_n(&s->desc, TP_BD_DEAD, __ATOMIC_RELAXED);
    __atomic_store_n(&s->c_epoch, 0, __ATOMIC_RELAXED);
}

/* tp_bd_create - remember "d" of type "type" (any earlier entry of d goes). */
void tp_bd_create(void *d, int type)
{
    if (!d || d == TP_BD_DEAD)
        return;
    int kept = tp_bd_kept(type);
    if (!kept && !tp_bd_probe(d))
        return;
    pthread_mutex_lock(&tp_bd_lock);
    tp_bd_changing();
    struct tp_bd *old = tp_bd_probe(d);
    if (old)
        tp_bd_forget(old);
    if (kept) {
        unsigned h = tp_bd_hash(d);
        struct tp_bd *s = NULL;
        for (unsigned i = 0; i < TP_BD_PROBE; i++) {
            struct tp_bd *c = &tp_bd_tab[(h + i) & (TP_BD_SLOTS - 1)];
            if (!c->desc || c->desc == TP_BD_DEAD) {
                s = c;
                break;
            }
            if (!s || c->age < s->age)
                s = c;
        }
        __atomic_store_n(&s->desc, TP_BD_DEAD, __ATOMIC_RELAXED);
        __atomic_store_n(&s->c_epoch, 0, __ATOMIC_RELAXED);
        s->age = ++tp_bd_age;
        s->type = type;
        s->n = 0;
        s->dtype = -1;
        memset(s->ref, 0, sizeof s->ref);
        __atomic_store_n(&s->desc, d, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&tp_bd_lock);
}

void tp_bd_destroy(void *d)
{
    if (!d || !tp_bd_probe(d))
        return;
    pthread_mutex_lock(&tp_bd_lock);
    struct tp_bd *s = tp_bd_probe(d);
    if (s) {
        tp_bd_changing();
        tp_bd_forget(s);
    }
    pthread_mutex_unlock(&tp_bd_lock);
}

/* tp_bd_set - after a successful cudnnBackendSetAttribute. */
void tp_bd_set(void *d, int attr, int etype, int64_t count, const void *arr)
{
    int ref, type = tp_bd_attr(attr, &ref);
    if (!type || !d || !arr || count < 0)
        return;
    pthread_mutex_lock(&tp_bd_lock);
    struct tp_bd *s = tp_bd_find(d, type);
    if (s) {
        tp_bd_changing();
        if (ref >= 0) {
            if (etype == CUDNN_TYPE_BACKEND_DESCRIPTOR && count >= 1)
                s->ref[ref] = *(void *const *)arr;
        } else if (attr == CUDNN_ATTR_TENSOR_DIMENSIONS) {
            if (etype == CUDNN_TYPE_INT64 && count <= CUDNN_DIM_MAX) {
                memcpy(s->u.dims, arr, (size_t)count * sizeof(int64_t));
                s->n = (int)count;
            }
        } else if (attr == CUDNN_ATTR_OPERATIONGRAPH_OPS) {
            /* only the ops that carry FLOPs (cuDNN takes finalized ops
             * only, so each is known by now): a long graph's pointwise,
             * reduction and reshape ops do not crowd out its matmuls */
            if (etype == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
                int n = 0;
                for (int64_t i = 0; i < count && n < TP_BD_MAXOPS; i++) {
                    void *op = ((void *const *)arr)[i];
                    struct tp_bd *o = tp_bd_find(op, -1);
                    if (o && tp_bd_flop_op(o->type))
                        s->u.ops[n++] = op;
                }
                s->n = n;
            }
        } else if (etype == CUDNN_TYPE_DATA_TYPE && count >= 1) {
            s->dtype = *(const int *)arr;   /* tensor data / convolution compute type */
        }
    }
    pthread_mutex_unlock(&tp_bd_lock);
}

/* The graph a config leads to (tp_bd_lock held). */
static void *tp_bd_cfg_graph(struct tp_bd *cfg)
{
    struct tp_bd *eng = tp_bd_find(cfg->ref[TP_BD_LINK], CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    if (eng && eng->ref[TP_BD_LINK])
        return eng->ref[TP_BD_LINK];
    return cfg->ref[TP_BD_HEUR_GRAPH];
}

/* tp_bd_get - after a successful cudnnBackendGetAttribute. */
void tp_bd_get(void *d, int attr, int etype, int64_t req, const int64_t *count, void *arr)
{
    if ((attr != CUDNN_ATTR_ENGINEHEUR_RESULTS && attr != CUDNN_ATTR_ENGINECFG_ENGINE) ||
        etype != CUDNN_TYPE_BACKEND_DESCRIPTOR || !d || !arr || req < 1)
        return;
    int64_t n = count ? *count : 1;
    if (n > req)
        n = req;
    pthread_mutex_lock(&tp_bd_lock);
    if (attr == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
        struct tp_bd *h = tp_bd_find(d, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        if (h) {
            tp_bd_changing();
            for (int64_t i = 0; i < n; i++) {
                struct tp_bd *c = tp_bd_find(((void **)arr)[i], CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
                if (c)
                    c->ref[TP_BD_HEUR_GRAPH] = h->ref[TP_BD_LINK];
            }
        }
    } else {
        struct tp_bd *c = tp_bd_find(d, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        struct tp_bd *e = tp_bd_find(((void **)arr)[0], CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        if (c && e && e->desc != c->ref[TP_BD_LINK]) {
            tp_bd_changing();
            e->ref[TP_BD_LINK] = tp_bd_cfg_graph(c);
        }
    }
    pthread_mutex_unlock(&tp_bd_lock);
}

static uint64_t tp_bd_sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* The pages of a page table [b, 1, pages, 1] times the block size of its
 * container [blocks, h, block, d]; 0 if unknown. */
static uint64_t tp_bd_paged_len(void *table, const struct tp_bd *cont)
{
    struct tp_bd *t = tp_bd_find(table, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    uint64_t len;
    if (!t || t->n != 4 || t->u.dims[2] <= 0 ||
        __builtin_mul_overflow((uint64_t)t->u.dims[2], (uint64_t)cont->u.dims[2], &len))
        return 0;
    return len;
}

/*
 * One SDPA op as torch.utils.flop_counter counts attention (DESIGN):
 * forward QK^T and PV, 2 b h_q s_q s_kv (d_q + d_v); backward the
 * recomputed QK^T and four products, 2 b h_q s_q s_kv (3 d_q + 2 d_v).
 * Recorded as m = s_q, n = s_kv, k = d_q, batch = b h_q.
 */
static int tp_bd_sdpa(struct tp_bd *op, struct tp_record *r)
{
    struct tp_bd *q = tp_bd_find(op->ref[TP_BD_SD_Q], CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    struct tp_bd *k = tp_bd_find(op->ref[TP_BD_SD_K], CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    struct tp_bd *v = tp_bd_find(op->ref[TP_BD_SD_V], CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    if (!q || !k || !v || q->n != 4 || k->n != 4 || v->n != 4)
        return -1;
    for (int i = 0; i < 4; i++)
        if (q->u.dims[i] <= 0 || k->u.dims[i] <= 0 || v->u.dims[i] <= 0)
            return -1;
    uint64_t b = (uint64_t)q->u.dims[0], h = (uint64_t)q->u.dims[1];
    uint64_t sq = (uint64_t)q->u.dims[2], dq = (uint64_t)q->u.dims[3];
    uint64_t sk = (uint64_t)k->u.dims[2], dv = (uint64_t)v->u.dims[3];
    /* paged K/V (forward only): the literal one's S_kv, else pages x block
     * of the shorter, as cudnn-frontend infers it (infer_s_kv) */
    int pk = op->ref[TP_BD_SD_PTK] != NULL, pv = op->ref[TP_BD_SD_PTV] != NULL;
    if (pk && !pv) {
        sk = (uint64_t)v->u.dims[2];
    } else if (pk) {
        uint64_t lk = tp_bd_paged_len(op->ref[TP_BD_SD_PTK], k);
        uint64_t lv = tp_bd_paged_len(op->ref[TP_BD_SD_PTV], v);
        if (!lk || !lv)
            return -1;
        sk = lk < lv ? lk : lv;
    }
    uint64_t coef = op->type == CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR ? dq + dv : 3 * dq + 2 * dv;
    uint64_t f = 2;
    if (__builtin_mul_overflow(f, b, &f) || __builtin_mul_overflow(f, h, &f) ||
        __builtin_mul_overflow(f, sq, &f) || __builtin_mul_overflow(f, sk, &f) ||
        __builtin_mul_overflow(f, coef, &f))
        f = UINT64_MAX;
    r->u.lib.flops = f;
    r->u.lib.m = (uint32_t)sq;
    r->u.lib.n = (uint32_t)sk;
    r->u.lib.k = (uint32_t)dq;
    r->u.lib.batch = (uint32_t)(b * h);
    r->u.lib.dtype = (uint8_t)tp_cudnn_dtype(q->dtype);
    r->u.lib.precision = (uint8_t)tp_cudnn_precision(q->dtype, CUDNN_DEFAULT_MATH);
    return 0;
}

/* One op's FLOPs into "r" (tp_bd_lock held); 0 if unknown. */
static int tp_bd_op(struct tp_bd *op, struct tp_record *r)
{
    if (!op)
        return -1;
    if (op->type == CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR ||
        op->type == CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR)
        return tp_bd_sdpa(op, r);
    if (op->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) {
        struct tp_bd *c = tp_bd_find(op->ref[TP_BD_MM_C], CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        struct tp_bd *a = tp_bd_find(op->ref[TP_BD_MM_A], CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        if (!c || !a || c->n < 2 || a->n < 2)
            return -1;
        uint64_t batch = 1, k = (uint64_t)a->u.dims[a->n - 1];
        uint64_t m = (uint64_t)c->u.dims[c->n - 2], n = (uint64_t)c->u.dims[c->n - 1];
        for (int i = 0; i < c->n; i++)
            if (c->u.dims[i] <= 0)
                return -1;
        if (a->u.dims[a->n - 1] <= 0)
            return -1;
        for (int i = 0; i < c->n - 2; i++)
            batch *= (uint64_t)c->u.dims[i];
        uint64_t f = 2;
        if (__builtin_mul_overflow(f, m, &f) || __builtin_mul_overflow(f, n, &f) ||
            __builtin_mul_overflow(f, k, &f) || __builtin_mul_overflow(f, batch, &f))
            f = UINT64_MAX;
        r->u.lib.flops = f;
        r->u.lib.m = (uint32_t)m;
        r->u.lib.n = (uint32_t)n;
        r->u.lib.k = (uint32_t)k;
        r->u.lib.batch = (uint32_t)batch;
        r->u.lib.dtype = (uint8_t)tp_cudnn_dtype(a->dtype);
        r->u.lib.precision = (uint8_t)tp_cudnn_precision(a->dtype, CUDNN_DEFAULT_MATH);
        return 0;
    }
    struct tp_bd *out = tp_bd_find(op->ref[TP_BD_OUT], CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    struct tp_bd *w = tp_bd_find(op->ref[TP_BD_FILT], CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    struct tp_bd *cv = tp_bd_find(op->ref[TP_BD_CONV], CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    if (!out || !w || tp_conv_fill(r, out->u.dims, out->n, w->u.dims, w->n) != 0)
        return -1;
    int data = w->dtype >= 0 ? w->dtype : cv ? cv->dtype : -1;
    r->u.lib.dtype = (uint8_t)tp_cudnn_dtype(data);
    /* float data: TF32 allowed (as the legacy default math) unless the
     * compute type is double */
    r->u.lib.precision = (uint8_t)(cv && cv->dtype == CUDNN_DATA_DOUBLE
                                       ? TP_PREC_FP64
                                       : tp_cudnn_precision(data, CUDNN_DEFAULT_MATH));
    return 0;
}

/* The plan's FLOPs and first op's shape into r->u.lib (tp_bd_lock held). */
static void tp_bd_plan(void *plan, struct tp_record *r)
{
    struct tp_bd *p = tp_bd_find(plan, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    struct tp_bd *cfg = p ? tp_bd_find(p->ref[TP_BD_LINK], CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) : NULL;
    struct tp_bd *g = cfg ? tp_bd_find(tp_bd_cfg_graph(cfg), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
                          : NULL;
    uint64_t total = 0;
    int first = 1;
    for (int i = 0; g && i < g->n; i++) {
        struct tp_record one;
        memset(&one, 0, sizeof one);
        if (tp_bd_op(tp_bd_find(g->u.ops[i], -1), &one) != 0)
            continue;
        total = tp_bd_sat_add(total, one.u.lib.flops);
        if (first) {
            r->u.lib = one.u.lib;
            first = 0;
        }
    }
    r->u.lib.flops = total;
}

/* tp_backend_record - r->u.lib of cudnnBackendExecute(plan); see DESIGN. */
void tp_backend_record(struct tp_record *r, void *plan)
{
    if (!plan)
        return;
    uint64_t e0 = __atomic_load_n(&tp_bd_epoch, __ATOMIC_ACQUIRE);
    struct tp_bd *s = tp_bd_probe(plan);
    if (s && __atomic_load_n(&s->c_epoch, __ATOMIC_ACQUIRE) == e0) {
        /* acquire loads: the epoch re-read below cannot move before them */
        uint64_t f = __atomic_load_n(&s->c_flops, __ATOMIC_ACQUIRE);
        uint64_t mn = __atomic_load_n(&s->c_mn, __ATOMIC_ACQUIRE);
        uint64_t kb = __atomic_load_n(&s->c_kb, __ATOMIC_ACQUIRE);
        uint32_t tp = __atomic_load_n(&s->c_tp, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&tp_bd_epoch, __ATOMIC_RELAXED) == e0 &&
            __atomic_load_n(&s->desc, __ATOMIC_RELAXED) == plan) {
            r->u.lib.flops = f;
            r->u.lib.m = (uint32_t)mn;
            r->u.lib.n = (uint32_t)(mn >> 32);
            r->u.lib.k = (uint32_t)kb;
            r->u.lib.batch = (uint32_t)(kb >> 32);
            r->u.lib.dtype = (uint8_t)tp;
            r->u.lib.precision = (uint8_t)(tp >> 8);
            return;
        }
    }
    pthread_mutex_lock(&tp_bd_lock);
    tp_bd_plan(plan, r);
    s = tp_bd_find(plan, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    if (s) {
        __atomic_store_n(&s->c_flops, r->u.lib.flops, __ATOMIC_RELAXED);
        __atomic_store_n(&s->c_mn, r->u.lib.m | (uint64_t)r->u.lib.n << 32, __ATOMIC_RELAXED);
        __atomic_store_n(&s->c_kb, r->u.lib.k | (uint64_t)r->u.lib.batch << 32, __ATOMIC_RELAXED);
        __atomic_store_n(&s->c_tp, r->u.lib.dtype | (uint32_t)r->u.lib.precision << 8,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&s->c_epoch, tp_bd_epoch, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tp_bd_lock);
}
