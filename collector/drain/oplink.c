/*
 * oplink.c - DESIGN: a window's torch operator ranges (torchop.h) as
 * intervals per thread, read in the window's one peek before the handlers
 * run (window.c: tp_oplink_add per record, then tp_oplink_finish).  Ranges
 * are written when they end, so a call made inside an operator comes
 * before that operator in its thread's buffer: hence the peek.  Sorted by
 * (thread, start, longest first), each interval gets its parent (the
 * nearest one enclosing it) from a stack, so that finding the innermost
 * operator open at a tick is one binary search and a walk up at most the
 * nesting depth.  Host calls linked to an operator note their correlation,
 * and the device records of that correlation (kernels, copies) inherit the
 * operator's id after a sort.
 *
 * The same tree gives Kineto's forward-to-backward links.  torch's
 * autograd engine wraps each backward node it runs in a range named
 * "autograd::engine::evaluate_function: NODE" whose first child is the
 * node (AddmmBackward0) itself: the node carries the sequence number of
 * the forward operator that created it, the wrapper none, and Kineto's
 * trace gives the wrapper its node's number, as here.  A flow ("fwdbwd")
 * then joins each such node to the forward operator of its number: of the
 * operators that are neither wrappers nor nodes and carry that number, the
 * one that started last before the node (torch numbers the forward
 * operators of one node alike, aten::linear and its aten::t: the
 * innermost, latest is the one that made the node, as Kineto picks it).
 * Sequence numbers count per thread; a backward pass runs on another
 * thread than its forward on the GPU, so the number alone is the key, and
 * forward operators of two threads with one number (rare: each thread
 * counts from 0) link to the later one.  Only NVTX's messages carry
 * sequence numbers: through ITT there are neither numbers nor flows.
 * Flush thread only.
 */
#include "oplink.h"
#include "collector/record/buffer.h"
#include "collector/common/grow.h"
#include "collector/record/intern.h"
#include "collector/record/torchop.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { TP_SPAN_OP, TP_SPAN_WRAPPER, TP_SPAN_NODE };

struct tp_op_span {
    int32_t tid;
    uint64_t t0, t1;
    uint64_t op_id;
    int64_t parent;              /* index of the enclosing span, -1 if none */
    int64_t seq;                 /* autograd sequence number, -1 if none */
    uint32_t name;               /* interned name (its first name_len bytes) */
    uint32_t name_len;
    uint8_t role;                /* TP_SPAN_*: an evaluate_function wrapper or its node */
    uint8_t flow_end;            /* a node a fwdbwd flow reaches */
};

/* The notes of one operator the trace needs: by op_id. */
struct tp_op_note {
    uint64_t op_id;
    int64_t seq;                 /* the sequence number to write (a wrapper's: its node's) */
    uint8_t flow_end;
};

struct tp_op_flow {
    uint64_t fwd, bwd;           /* op_ids: forward operator, backward node */
};

struct tp_op_corr {
    uint64_t corr, ext;
};

/* lower_bound() reads each array's key where its elements begin */
_Static_assert(offsetof(struct tp_op_corr, corr) == 0 && offsetof(struct tp_op_note, op_id) == 0 &&
               offsetof(struct tp_op_flow, fwd) == 0, "sort keys first");

struct tp_oplink {
    struct tp_op_span *v;
    size_t n, cap;
    struct tp_op_corr *c;
    size_t nc, capc;
    int sorted;
    struct tp_op_note *notes;    /* wrappers and linked nodes, by op_id */
    size_t nnotes;
    struct tp_op_flow *flows;    /* by fwd */
    size_t nflows;
    uint64_t *flow_bwd;          /* flows[i].bwd, contiguous for the event */
};

struct tp_oplink *tp_oplink_new(void)
{
    return calloc(1, sizeof(struct tp_oplink));
}

void tp_oplink_add(struct tp_oplink *l, const struct tp_tbuf *t, const struct tp_record *r)
{
    struct tp_torch_op op;
    if (r->kind != TP_REC_RANGE || !tp_torch_op_of(r, tp_intern_str(r->u.range.name), &op))
        return;
    struct tp_op_span *v = tp_grow(l->v, &l->cap, l->n + 1, sizeof *v, 1024);
    if (!v)
        return;
    l->v = v;
    l->v[l->n++] = (struct tp_op_span){
        .tid = r->u.range.tid ? r->u.range.tid : t->tid, .t0 = r->t0, .t1 = r->t1,
        .op_id = op.op_id, .parent = -1, .seq = op.seq, .name = r->u.range.name,
        .name_len = (uint32_t)op.name_len,
    };
}

static int cmp_span(const void *a, const void *b)
{
    const struct tp_op_span *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    return x->t1 > y->t1 ? -1 : x->t1 < y->t1;
}

/* The first of "n" elements of "size" bytes, sorted by the uint64_t each
 * begins with (struct tp_op_corr, tp_op_note, tp_op_flow), whose key is
 * not below "key"; n if none. */
static size_t lower_bound(const void *base, size_t n, size_t size, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t k;
        memcpy(&k, (const char *)base + mid * size, sizeof k);
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

static int cmp_note(const void *a, const void *b)
{
    return cmp_u64(((const struct tp_op_note *)a)->op_id, ((const struct tp_op_note *)b)->op_id);
}

static int cmp_flow(const void *a, const void *b)
{
    const struct tp_op_flow *x = a, *y = b;
    return x->fwd != y->fwd ? cmp_u64(x->fwd, y->fwd) : cmp_u64(x->bwd, y->bwd);
}

/* Forward operators by (seq, t0), as indexes into the spans. */
static const struct tp_op_span *tp_sort_spans;

static int cmp_fwd(const void *a, const void *b)
{
    const struct tp_op_span *x = &tp_sort_spans[*(const size_t *)a];
    const struct tp_op_span *y = &tp_sort_spans[*(const size_t *)b];
    return x->seq != y->seq ? (x->seq < y->seq ? -1 : 1) : cmp_u64(x->t0, y->t0);
}

static const char tp_wrapper[] = "autograd::engine::evaluate_function: ";

/* Span i's node, if it is an evaluate_function wrapper: its first child
 * (the next span of its thread, whose parent it is), named as its suffix. */
static int64_t tp_wrapped_node(const struct tp_oplink *l, size_t i)
{
    const struct tp_op_span *w = &l->v[i];
    size_t k = sizeof tp_wrapper - 1;
    if (w->name_len <= k || i + 1 >= l->n || l->v[i + 1].parent != (int64_t)i)
        return -1;
    const char *name = tp_intern_str(w->name);
    if (memcmp(name, tp_wrapper, k) != 0)
        return -1;
    const struct tp_op_span *n = &l->v[i + 1];
    if (n->name_len != w->name_len - k || memcmp(tp_intern_str(n->name), name + k, n->name_len) != 0)
        return -1;
    return (int64_t)i + 1;
}

/* The forward operator (index) of sequence number "seq" that started last
 * before tick "t", among "nf" sorted by (seq, t0); -1 if none. */
static int64_t tp_forward_of(const struct tp_oplink *l, const size_t *fwd, size_t nf, int64_t seq,
                             uint64_t t)
{
    size_t lo = 0, hi = nf;
    while (lo < hi) {       /* the first past (seq, t) */
        size_t mid = (lo + hi) / 2;
        const struct tp_op_span *s = &l->v[fwd[mid]];
        if (s->seq < seq || (s->seq == seq && s->t0 < t))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || l->v[fwd[lo - 1]].seq != seq)
        return -1;
    return (int64_t)fwd[lo - 1];
}

/* Wrappers take their node's number; nodes link to their forward
 * operators (the DESIGN above).  Out of memory: no notes, no flows. */
static void tp_oplink_autograd(struct tp_oplink *l)
{
    size_t nw = 0, nn = 0, nf = 0;
    for (size_t i = 0; i < l->n; i++) {
        int64_t k = tp_wrapped_node(l, i);
        if (k < 0)
            continue;
        l->v[i].role = TP_SPAN_WRAPPER;
        l->v[k].role = TP_SPAN_NODE;
        if (l->v[i].seq < 0 && l->v[k].seq >= 0)
            l->v[i].seq = l->v[k].seq;
        nw++;
    }
    if (!nw)
        return;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].seq >= 0 && l->v[i].role == TP_SPAN_OP)
            nf++;
        else if (l->v[i].seq >= 0 && l->v[i].role == TP_SPAN_NODE)
            nn++;
    size_t *fwd = malloc((nf ? nf : 1) * sizeof *fwd);
    l->notes = malloc(2 * nw * sizeof *l->notes);
    l->flows = malloc((nn ? nn : 1) * sizeof *l->flows);
    l->flow_bwd = malloc((nn ? nn : 1) * sizeof *l->flow_bwd);
    if (!fwd || !l->notes || !l->flows || !l->flow_bwd) {
        free(fwd);
        free(l->notes);
        free(l->flows);
        free(l->flow_bwd);
        l->notes = NULL, l->flows = NULL, l->flow_bwd = NULL;
        return;
    }
    nf = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].seq >= 0 && l->v[i].role == TP_SPAN_OP)
            fwd[nf++] = i;
    tp_sort_spans = l->v;
    qsort(fwd, nf, sizeof *fwd, cmp_fwd);
    for (size_t i = 0; i < l->n; i++) {
        struct tp_op_span *s = &l->v[i];
        if (s->role != TP_SPAN_NODE || s->seq < 0)
            continue;
        int64_t f = tp_forward_of(l, fwd, nf, s->seq, s->t0);
        if (f < 0)
            continue;
        s->flow_end = 1;
        l->flows[l->nflows++] = (struct tp_op_flow){ l->v[f].op_id, s->op_id };
    }
    free(fwd);
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].role != TP_SPAN_OP)
            l->notes[l->nnotes++] = (struct tp_op_note){
                l->v[i].op_id, l->v[i].seq, l->v[i].flow_end,
            };
    qsort(l->notes, l->nnotes, sizeof *l->notes, cmp_note);
    qsort(l->flows, l->nflows, sizeof *l->flows, cmp_flow);
    for (size_t i = 0; i < l->nflows; i++)
        l->flow_bwd[i] = l->flows[i].bwd;
}

void tp_oplink_finish(struct tp_oplink *l)
{
    if (!l || !l->n)
        return;
    qsort(l->v, l->n, sizeof *l->v, cmp_span);
    /* parents: the open spans of the current thread on a stack (indexes) */
    int64_t *stack = malloc(l->n * sizeof *stack);
    size_t depth = 0;
    for (size_t i = 0; stack && i < l->n; i++) {
        if (i && l->v[i].tid != l->v[i - 1].tid)
            depth = 0;
        while (depth && l->v[stack[depth - 1]].t1 < l->v[i].t1)
            depth--;
        l->v[i].parent = depth ? stack[depth - 1] : -1;
        stack[depth++] = (int64_t)i;
    }
    free(stack);
    tp_oplink_autograd(l);
}

uint64_t tp_oplink_find(const struct tp_oplink *l, int32_t tid, uint64_t t)
{
    if (!l)
        return 0;
    /* the last span of "tid" that starts at or before t */
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct tp_op_span *s = &l->v[mid];
        if (s->tid < tid || (s->tid == tid && s->t0 <= t))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || l->v[lo - 1].tid != tid)
        return 0;
    for (int64_t i = (int64_t)lo - 1; i >= 0; i = l->v[i].parent)
        if (l->v[i].t1 >= t)
            return l->v[i].op_id;
    return 0;
}

void tp_oplink_note(struct tp_oplink *l, uint64_t corr, uint64_t ext)
{
    if (!l || !corr)
        return;
    struct tp_op_corr *c = tp_grow(l->c, &l->capc, l->nc + 1, sizeof *c, 1024);
    if (!c)
        return;
    l->c = c;
    l->c[l->nc++] = (struct tp_op_corr){ corr, ext };
    l->sorted = 0;
}

static int cmp_corr(const void *a, const void *b)
{
    const struct tp_op_corr *x = a, *y = b;
    return x->corr < y->corr ? -1 : x->corr > y->corr;
}

uint64_t tp_oplink_corr(struct tp_oplink *l, uint64_t corr)
{
    if (!l || !l->nc || !corr)
        return 0;
    if (!l->sorted) {
        qsort(l->c, l->nc, sizeof *l->c, cmp_corr);
        l->sorted = 1;
    }
    size_t lo = lower_bound(l->c, l->nc, sizeof *l->c, corr);
    return lo < l->nc && l->c[lo].corr == corr ? l->c[lo].ext : 0;
}

void tp_oplink_autograd_of(const struct tp_oplink *l, uint64_t op_id, struct tp_op_autograd *a)
{
    if (!l || !l->nnotes)
        return;
    size_t lo = lower_bound(l->notes, l->nnotes, sizeof *l->notes, op_id);
    if (lo < l->nnotes && l->notes[lo].op_id == op_id) {
        a->seq = l->notes[lo].seq;
        a->flow_end = l->notes[lo].flow_end;
    }
    lo = lower_bound(l->flows, l->nflows, sizeof *l->flows, op_id);
    size_t end = lo;
    while (end < l->nflows && l->flows[end].fwd == op_id)
        end++;
    if (end > lo) {
        a->flows_out = &l->flow_bwd[lo];
        a->n_flows_out = end - lo;
    }
}

void tp_oplink_free(struct tp_oplink *l)
{
    if (!l)
        return;
    free(l->v);
    free(l->c);
    free(l->notes);
    free(l->flows);
    free(l->flow_bwd);
    free(l);
}
