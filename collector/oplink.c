/*
 * oplink.c - DESIGN: a window's torch operator ranges (torchop.h) as
 * intervals per thread, read in one peek before the handlers run.  Ranges
 * are written when they end, so a call made inside an operator comes
 * before that operator in its thread's buffer: hence the peek.  Sorted by
 * (thread, start, longest first), each interval gets its parent (the
 * nearest one enclosing it) from a stack, so that finding the innermost
 * operator open at a tick is one binary search and a walk up at most the
 * nesting depth.  Host calls linked to an operator note their correlation,
 * and the device records of that correlation (kernels, copies) inherit the
 * operator's id after a sort.  Flush thread only.
 */
#include "oplink.h"
#include "buffer.h"
#include "grow.h"
#include "intern.h"
#include "torchop.h"

#include <stdlib.h>

struct tp_op_span {
    int32_t tid;
    uint64_t t0, t1;
    uint64_t op_id;
    int64_t parent;              /* index of the enclosing span, -1 if none */
};

struct tp_op_corr {
    uint64_t corr, ext;
};

struct tp_oplink {
    struct tp_op_span *v;
    size_t n, cap;
    struct tp_op_corr *c;
    size_t nc, capc;
    int sorted;
};

static void collect(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    struct tp_oplink *l = ctx;
    struct tp_torch_op op;
    if (r->kind != TP_REC_RANGE || !tp_torch_op_of(r, tp_intern_str(r->u.range.name), &op))
        return;
    struct tp_op_span *v = tp_grow(l->v, &l->cap, l->n + 1, sizeof *v, 1024);
    if (!v)
        return;
    l->v = v;
    l->v[l->n++] = (struct tp_op_span){
        .tid = r->u.range.tid ? r->u.range.tid : t->tid, .t0 = r->t0, .t1 = r->t1,
        .op_id = op.op_id, .parent = -1,
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

struct tp_oplink *tp_oplink_new(uint8_t gen)
{
    struct tp_oplink *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    tp_buf_drain(gen, collect, l, NULL, 1);
    if (!l->n)
        return l;
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
    return l;
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
    size_t lo = 0, hi = l->nc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->c[mid].corr < corr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->nc && l->c[lo].corr == corr ? l->c[lo].ext : 0;
}

void tp_oplink_free(struct tp_oplink *l)
{
    if (!l)
        return;
    free(l->v);
    free(l->c);
    free(l);
}
