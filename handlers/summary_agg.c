/*
 * summary_agg.c - DESIGN: the summary's figures, gathered while the window's
 * events stream (the handler's open and event side; summary.c lays out the
 * report at close).  One small hash table per key kind (host API calls,
 * library calls, kernels launched, device work, torch's operators), open
 * addressing, each distinct name copied once, and a one-entry cache of the
 * previous lookup because consecutive events mostly repeat the name.  Times
 * are kept in integer ns so that the report's figures add up exactly.
 * Operators end children first, so an operator's self time is its duration
 * less the operators on its thread that ended inside it and are not yet
 * claimed; torch's record_function annotations take part like operators
 * (rows of their own, marked as annotations), and each operator is also
 * counted under (name, input shapes), the by-shape table.  The ranges no
 * parent claimed are their thread's top-level ones: at close they give the
 * steps' row its self time (tp_sumagg_finish_ops).  Collectives are keyed
 * by (kind, group size); their kernels find them through the library call
 * that issued them (ev->issuer, from the host/device join).  The device work linked to torch's operators finds its
 * operator by External id in an array sorted at the first device event
 * (device events come after all host events of the window).  Device work is also
 * kept as spans, merged at close into disjoint ones (streams overlap) for
 * the GPU busy share.  The time of each memory peak comes from the
 * ALLOC/FREE events, by the memory page's rule.  Out of memory sets a flag;
 * the report says its tables are incomplete.  The sort orders and window
 * lookups that both reports use (summary.c, summary_json.c) live here too,
 * so that neither report file needs the other.
 */
#include "summary_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/contract/device.h"
#include "collector/common/grow.h"
#include "collector/common/log.h"

struct span {
    int64_t start, end;          /* Unix ns */
};

/* A torch operator that ended on a thread, not yet claimed by its parent
 * (operators end children first). */
struct op_done {
    int64_t start, end, dur;
};

struct op_thread {
    int32_t tid;
    struct op_done *v;
    size_t n, cap;
};

/* op_id -> the operator's name (its agg entry's copy, stable across rehash). */
struct op_ref {
    uint64_t op_id;
    const char *name;
    const char *shape_key;       /* its op_shapes entry's name, NULL if none */
};

/* FNV-1a over 8-byte words, then the tail bytes, and a final mix so that
 * the low bits used as the slot depend on every byte: the operator tables'
 * keys (a name and its input shapes) run to 40-100 bytes, and a byte at a
 * time made hashing them a fifth of the summary's time per operator. */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    size_t n = strlen(s), i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 32;
    }
    for (; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static struct agg *agg_slot(struct agg *slots, size_t cap, const char *key)
{
    size_t i = (size_t)hash_str(key) & (cap - 1);
    while (slots[i].name && strcmp(slots[i].name, key) != 0)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static struct agg *agg_find(struct summary *s, struct agg_table *t, const char *key)
{
    if (t->last && strcmp(t->last->name, key) == 0)
        return t->last;
    if ((t->n + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        struct agg *n = calloc(ncap, sizeof *n);
        if (!n) {
            s->oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].name)
                *agg_slot(n, ncap, t->slots[i].name) = t->slots[i];
        free(t->slots);
        t->slots = n;
        t->cap = ncap;
        t->last = NULL;
    }
    struct agg *a = agg_slot(t->slots, t->cap, key);
    if (!a->name) {
        a->name = strdup(key);
        if (!a->name) {
            s->oom = 1;
            return NULL;
        }
        t->n++;
    }
    t->last = a;
    return a;
}

static struct agg *agg_add(struct summary *s, struct agg_table *t, const char *key, int64_t dur)
{
    struct agg *a = agg_find(s, t, key);
    if (!a)
        return NULL;
    a->calls++;
    a->total_ns += dur;
    if (dur > a->max_ns)
        a->max_ns = dur;
    return a;
}

static void agg_free(struct agg_table *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].name);
    free(t->slots);
}

void *tp_sumagg_open(const struct tp_window *w)
{
    struct summary *s = calloc(1, sizeof *s);
    if (!s) {
        TP_ERROR("summary not written: %s", strerror(ENOMEM));
        return NULL;
    }
    if (w->n_mem > 0 && w->mem) {
        s->mem = w->mem;
        s->n_mem = w->n_mem;
        s->peak_at = calloc((size_t)w->n_mem, sizeof *s->peak_at);
        if (!s->peak_at)
            s->n_mem = 0;
    }
    return s;
}

/* An allocation that brought its (device, class) to the window's peak: the
 * end of the first such call is the peak's time, as the memory page plots it. */
static void summary_mem(struct summary *s, const struct tp_event *ev)
{
    const struct tp_record *r = ev->rec;
    if (r->u.mem.flags & (TP_MEM_FAILED | TP_MEM_NOOP))
        return;
    for (int i = 0; i < s->n_mem; i++) {
        const struct tp_mem_usage *u = &s->mem[i];
        if (u->device != r->u.mem.device || u->mclass != r->u.mem.mclass)
            continue;
        int64_t at = ev->ts_ns + (ev->dur_ns > 0 ? ev->dur_ns : 0);
        if (r->u.mem.total == u->peak_bytes && u->peak_bytes > u->start_bytes &&
            (!s->peak_at[i] || at < s->peak_at[i]))
            s->peak_at[i] = at;
        return;
    }
}

/* Device work: per-name GPU time, and its spans for the busy share. */
static void summary_device(struct summary *s, const struct tp_event *ev, int64_t dur)
{
    if (ev->dev->kind == TP_DEVICE_SYNC)
        return;
    agg_add(s, &s->gpu, ev->name && ev->name[0] ? ev->name : "unknown", dur);
    s->gpu_ns += dur;
    struct span *v = tp_grow(s->busy, &s->capbusy, s->nbusy + 1, sizeof *v, 1024);
    if (!v) {
        s->oom = 1;
        return;
    }
    s->busy = v;
    s->busy[s->nbusy++] = (struct span){ ev->ts_ns, ev->ts_ns + dur };
}

/* The row of collective "op" over "n" ranks, made if "create"; NULL if there
 * is none (or memory ran out). */
static struct coll_row *coll_row(struct summary *s, unsigned op, unsigned n, int create)
{
    for (size_t i = 0; i < s->ncoll; i++)
        if (s->coll[i].op == op && s->coll[i].ranks == n)
            return &s->coll[i];
    if (!create)
        return NULL;
    struct coll_row *v = tp_grow(s->coll, &s->capcoll, s->ncoll + 1, sizeof *v, 64);
    if (!v) {
        s->oom = 1;
        return NULL;
    }
    s->coll = v;
    s->coll[s->ncoll] = (struct coll_row){ .op = op, .ranks = n };
    return &s->coll[s->ncoll++];
}

/* A collective call: its row. */
static void summary_coll(struct summary *s, const struct tp_event *ev, int64_t dur)
{
    const struct tp_record *r = ev->rec;
    if (r->u.lib.flags & TP_LIB_CAPTURED) {
        s->coll_captured++;
        return;
    }
    unsigned op = r->u.lib.op, n = r->u.lib.m;
    struct coll_row *c = coll_row(s, op, n, 1);
    if (!c)
        return;
    /* nccl-tests' size: allgather and gather count what every rank ends
     * with, reduce_scatter and scatter what every rank starts with,
     * all_to_all everything a rank sends */
    uint64_t in, out;
    tp_coll_nelems(op, 1, n ? n : 1, &in, &out);
    double size = (double)r->u.lib.bytes * (double)(in > out ? in : out);
    c->calls++;
    c->size += size;
    c->bus += size * tp_coll_busbw_factor(op, n);
    c->host_ns += dur;
}

/* A collective's kernel (ev->issuer the call): device time of its row; a
 * call captured into a graph has none. */
static void summary_coll_kernel(struct summary *s, const struct tp_event *ev, int64_t dur)
{
    const struct tp_record *r = ev->issuer;
    if (r->u.lib.flags & TP_LIB_CAPTURED)
        return;
    struct coll_row *c = coll_row(s, r->u.lib.op, r->u.lib.m, 0);
    if (c)
        c->dev_ns += dur;
}

/* The by-shape key of an operator: its name, TP_SUMMARY_SHAPE_SEP, its
 * input shapes as torch wrote them, "[]" when it wrote none (torch's
 * key_averages(group_by_input_shape=True) shows "[]" for an operator with no
 * tensor input and for a record_function annotation). */
static void shape_key(char *key, size_t cap, const char *name, size_t n, const struct tp_torch_op *op)
{
    const char *sz = op->sizes ? op->sizes : "[]";
    size_t zn = op->sizes ? op->sizes_len : 2;
    if (n > cap / 2 - 1)
        n = cap / 2 - 1;
    if (zn > cap - n - 2)
        zn = cap - n - 2;
    memcpy(key, name, n);
    key[n] = TP_SUMMARY_SHAPE_SEP;
    memcpy(key + n + 1, sz, zn);
    key[n + 1 + zn] = 0;
}

/* The first operator with input shapes: the by-shape table starts from the
 * rows so far, each (name, "[]") since none of their calls had shapes, and
 * the operators so far find their by-shape row for their device work.  A
 * window without shapes (the default, and every window through ITT) so
 * pays nothing for the table it does not print. */
static void shapes_start(struct summary *s)
{
    char key[TP_INTERN_LEN_MAX + 4];
    struct op_ref *r = s->op_refs;
    s->shapes_on = 1;
    for (size_t i = 0; i < s->ops.cap; i++) {
        const struct agg *a = &s->ops.slots[i];
        if (!a->name)
            continue;
        snprintf(key, sizeof key, "%s%c[]", a->name, TP_SUMMARY_SHAPE_SEP);
        struct agg *b = agg_find(s, &s->op_shapes, key);
        if (!b)
            return;
        char *name = b->name;
        *b = *a;
        b->name = name;
    }
    for (size_t i = 0; i < s->n_op_refs; i++) {
        snprintf(key, sizeof key, "%s%c[]", r[i].name, TP_SUMMARY_SHAPE_SEP);
        struct agg *b = agg_find(s, &s->op_shapes, key);
        r[i].shape_key = b ? b->name : NULL;
    }
}

/* One of torch's operators or record_function annotations: calls and host
 * time by name (and by name and input shapes), self time from the children
 * it ends after (operators and annotations alike: an annotation's self time
 * excludes the operators run inside it, as in torch's key_averages()), and
 * its id for the device work linked to it.  Those not claimed by a parent
 * when the window ends are its thread's top-level ranges, which the step
 * row's self time leaves out (tp_sumagg_finish_ops). */
static void summary_op(struct summary *s, const struct tp_event *ev, int64_t dur)
{
    char name[TP_INTERN_LEN_MAX + 1];
    char key[2 * TP_INTERN_LEN_MAX + 2];
    size_t n = ev->op->name_len < sizeof name - 1 ? ev->op->name_len : sizeof name - 1;
    memcpy(name, ev->name, n);
    name[n] = 0;
    if (ev->op->sizes && !s->shapes_on)
        shapes_start(s);
    struct agg *a = agg_add(s, &s->ops, name, dur);
    if (!a)
        return;
    if (a->calls == 1)
        a->kind = ev->op->cpu_op ? TP_SUMROW_OP : TP_SUMROW_ANNOTATION;
    struct agg *b = NULL;
    if (s->shapes_on) {
        shape_key(key, sizeof key, name, n, ev->op);
        b = agg_add(s, &s->op_shapes, key, dur);
        if (b && b->calls == 1)
            b->kind = a->kind;
    }
    s->ops_with_shapes += ev->op->sizes != NULL;
    struct op_thread *t = NULL;
    for (size_t i = 0; i < s->n_op_threads && !t; i++)
        if (s->op_threads[i].tid == ev->tid)
            t = &s->op_threads[i];
    if (!t) {
        struct op_thread *v = tp_grow(s->op_threads, &s->cap_op_threads, s->n_op_threads + 1,
                                      sizeof *v, 8);
        if (!v) {
            s->oom = 1;
            return;
        }
        s->op_threads = v;
        t = &v[s->n_op_threads++];
        *t = (struct op_thread){ .tid = ev->tid };
    }
    int64_t start = ev->ts_ns, end = ev->ts_ns + dur, children = 0;
    while (t->n && t->v[t->n - 1].start >= start && t->v[t->n - 1].end <= end)
        children += t->v[--t->n].dur;
    int64_t self = dur > children ? dur - children : 0;
    a->self_ns += self;
    if (b)
        b->self_ns += self;
    struct op_done *d = tp_grow(t->v, &t->cap, t->n + 1, sizeof *d, 64);
    struct op_ref *r = tp_grow(s->op_refs, &s->cap_op_refs, s->n_op_refs + 1, sizeof *r, 256);
    if (d)
        t->v = d;
    if (r)
        s->op_refs = r;
    if (!d || !r) {
        s->oom = 1;
        return;
    }
    t->v[t->n++] = (struct op_done){ start, end, dur };
    s->op_refs[s->n_op_refs++] = (struct op_ref){ ev->op->op_id, a->name, b ? b->name : NULL };
    s->op_refs_sorted = 0;
}

static int cmp_op_ref(const void *a, const void *b)
{
    const struct op_ref *x = a, *y = b;
    return x->op_id < y->op_id ? -1 : x->op_id > y->op_id;
}

/* Device work linked to one of torch's operators (its External id). */
static void summary_op_device(struct summary *s, const struct tp_event *ev, int64_t dur)
{
    if (!s->op_refs_sorted) {
        qsort(s->op_refs, s->n_op_refs, sizeof *s->op_refs, cmp_op_ref);
        s->op_refs_sorted = 1;
    }
    struct op_ref key = { ev->external_id, NULL, NULL };
    const struct op_ref *r = bsearch(&key, s->op_refs, s->n_op_refs, sizeof *s->op_refs, cmp_op_ref);
    struct agg *a = r ? agg_find(s, &s->ops, r->name) : NULL;
    if (a)
        a->gpu_ns += dur;
    struct agg *b = r && r->shape_key ? agg_find(s, &s->op_shapes, r->shape_key) : NULL;
    if (b)
        b->gpu_ns += dur;
}

void tp_sumagg_event(void *state, const struct tp_event *ev)
{
    struct summary *s = state;
    const struct tp_record *r = ev->rec;
    int64_t dur = ev->dur_ns > 0 ? ev->dur_ns : 0;
    if (ev->dev) {
        summary_device(s, ev, dur);
        if (ev->issuer && ev->form == TP_FORM_COLL && ev->dev->kind == TP_DEVICE_KERNEL)
            summary_coll_kernel(s, ev, dur);
        if (ev->external_id && s->n_op_refs && ev->dev->kind != TP_DEVICE_SYNC)
            summary_op_device(s, ev, dur);
        return;
    }
    if (ev->op) {
        summary_op(s, ev, dur);
        return;
    }
    if (!r)
        return;
    if ((ev->form == TP_FORM_ALLOC || ev->form == TP_FORM_FREE) && s->n_mem)
        summary_mem(s, ev);     /* and an API call like any other, below */
    switch (r->kind) {
    case TP_REC_LAUNCH:
        s->launches++;
        s->graph_flops += ev->flops;
        if (ev->kernel && ev->kernel[0])
            agg_add(s, &s->kernels, ev->kernel, dur);
        else
            agg_add(s, &s->kernels, r->u.launch.func_kind == TP_FUNC_GRAPH ? "(graph)" : "(unknown)", dur);
        /* fall through */
    case TP_REC_API:
        if (ev->layer == TP_LAYER_LIBRARY) {
            /* library calls contain runtime calls: a table of their own,
             * so that host API shares do not count time twice */
            struct agg *a = agg_add(s, &s->libs, ev->name && ev->name[0] ? ev->name : "unknown", dur);
            if (ev->form == TP_FORM_COLL)
                summary_coll(s, ev, dur);
            if (a && tp_form_counts_flops(ev->form) &&
                !(r->u.lib.flags & TP_LIB_CAPTURED)) {
                a->flops += r->u.lib.flops;
                s->lib_flops += r->u.lib.flops;
            }
            break;
        }
        s->host_ns += dur;
        agg_add(s, &s->apis, ev->name && ev->name[0] ? ev->name : "unknown", dur);
        break;
    case TP_REC_STEP: {
        struct step_row *v = tp_grow(s->steps, &s->capsteps, s->nsteps + 1, sizeof *v, 64);
        if (!v) {
            s->oom = 1;
            return;
        }
        s->steps = v;
        s->steps[s->nsteps] = (struct step_row){ r->u.step.index, dur, ev->ts_ns, ev->tid };
        s->nsteps++;
        break;
    }
    default:
        break;
    }
}

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Merge the device spans (streams overlap) into disjoint ones, in place. */
void tp_sumagg_merge_busy(struct summary *s)
{
    if (s->nbusy < 2)
        return;
    qsort(s->busy, s->nbusy, sizeof *s->busy, cmp_span);
    size_t k = 0;
    for (size_t i = 1; i < s->nbusy; i++) {
        if (s->busy[i].start <= s->busy[k].end) {
            if (s->busy[i].end > s->busy[k].end)
                s->busy[k].end = s->busy[i].end;
        } else {
            s->busy[++k] = s->busy[i];
        }
    }
    s->nbusy = k + 1;
}

/* Time in [a, b) during which the GPU ran some work (merged spans). */
int64_t tp_sumagg_busy_within(const struct summary *s, int64_t a, int64_t b)
{
    int64_t t = 0;
    for (size_t i = 0; i < s->nbusy && s->busy[i].start < b; i++) {
        int64_t lo = s->busy[i].start > a ? s->busy[i].start : a;
        int64_t hi = s->busy[i].end < b ? s->busy[i].end : b;
        if (hi > lo)
            t += hi - lo;
    }
    return t;
}

static int cmp_done_start(const void *a, const void *b)
{
    const struct op_done *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* ns of [a, b) inside the ranges "v" (sorted by start; disjoint, as a
 * thread's top-level ranges are: nested ones were claimed by their parent). */
static int64_t covered_within(const struct op_done *v, size_t n, int64_t a, int64_t b)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].start < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0)
        lo--;               /* the one range that began before a may reach into it */
    int64_t t = 0;
    for (size_t i = lo; i < n && v[i].start < b; i++) {
        int64_t x = v[i].start > a ? v[i].start : a;
        int64_t y = v[i].end < b ? v[i].end : b;
        if (y > x)
            t += y - x;
    }
    return t;
}

/*
 * The steps are one row, "ProfilerStep*", over the window's steps: torch's
 * table has a row per ProfilerStep#N, each different name its own key, which
 * in a window of many steps pushes the operators out of a bounded table with
 * rows that differ only in their index; the per-step table above already
 * gives each step's wall time.  What the row adds is the steps' self time,
 * the host time of the step's thread spent in no top-level operator or
 * annotation (Python, the data loader, the profiler's own step signal):
 * torch's ProfilerStep#N is a record_function around the step, so its self
 * time is that too.  Steps are recorded on their own buffer, so their events
 * may come before the operators inside them: the step rows are made here,
 * once every event is in, from the ranges no parent claimed.
 */
void tp_sumagg_finish_ops(struct summary *s)
{
    if (s->ops_finished)
        return;
    s->ops_finished = 1;
    if (!s->ops.n)
        return;                 /* no operator: no operator table, nor step row */
    /* a thread's top-level ranges are in the order they ended, which for
     * disjoint ranges is their start order: sorted only if they are not
     * (ranges pushed and popped from other threads) */
    for (size_t i = 0; s->nsteps && i < s->n_op_threads; i++) {
        struct op_thread *t = &s->op_threads[i];
        size_t k = 1;
        while (k < t->n && t->v[k - 1].start <= t->v[k].start)
            k++;
        if (k < t->n)
            qsort(t->v, t->n, sizeof *t->v, cmp_done_start);
    }
    char key[sizeof TP_SUMMARY_STEP_ROW + 3];
    snprintf(key, sizeof key, "%s%c[]", TP_SUMMARY_STEP_ROW, TP_SUMMARY_SHAPE_SEP);
    for (size_t k = 0; k < s->nsteps; k++) {
        const struct step_row *st = &s->steps[k];
        const struct op_thread *t = NULL;
        for (size_t i = 0; i < s->n_op_threads && !t; i++)
            if (s->op_threads[i].tid == st->tid)
                t = &s->op_threads[i];
        int64_t cov = t ? covered_within(t->v, t->n, st->start_ns, st->start_ns + st->dur_ns) : 0;
        int64_t self = st->dur_ns > cov ? st->dur_ns - cov : 0;
        struct agg *a = agg_add(s, &s->ops, TP_SUMMARY_STEP_ROW, st->dur_ns);
        if (a) {
            a->kind = TP_SUMROW_STEP;
            a->self_ns += self;
        }
        struct agg *b = s->ops_with_shapes ? agg_add(s, &s->op_shapes, key, st->dur_ns) : NULL;
        if (b) {
            b->kind = TP_SUMROW_STEP;
            b->self_ns += self;
        }
    }
    for (size_t i = 0; i < s->ops.cap; i++)
        if (s->ops.slots[i].name)
            s->ops_self_ns += s->ops.slots[i].self_ns;
}

const char *tp_summary_shape_split(const char *key, size_t *name_len)
{
    const char *sep = strrchr(key, TP_SUMMARY_SHAPE_SEP);
    *name_len = sep ? (size_t)(sep - key) : strlen(key);
    return sep ? sep + 1 : "[]";
}

void tp_sumagg_free(struct summary *s)
{
    agg_free(&s->libs);
    agg_free(&s->apis);
    agg_free(&s->kernels);
    agg_free(&s->gpu);
    agg_free(&s->ops);
    agg_free(&s->op_shapes);
    for (size_t i = 0; i < s->n_op_threads; i++)
        free(s->op_threads[i].v);
    free(s->op_threads);
    free(s->op_refs);
    free(s->busy);
    free(s->steps);
    free(s->coll);
    free(s->peak_at);
    free(s);
}

/* The helpers summary.c and summary_json.c share (summary_impl.h). */

int tp_summary_cmp_total(const void *a, const void *b)
{
    const struct agg *x = *(const struct agg *const *)a, *y = *(const struct agg *const *)b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

int tp_summary_cmp_calls(const void *a, const void *b)
{
    const struct agg *x = *(const struct agg *const *)a, *y = *(const struct agg *const *)b;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    return strcmp(x->name, y->name);
}

int tp_summary_cmp_step(const void *a, const void *b)
{
    const struct step_row *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The table's entries, tp_summary_sorted; NULL if empty or out of memory. */
struct agg **tp_summary_sorted(const struct agg_table *t, int (*cmp)(const void *, const void *))
{
    if (!t->n)
        return NULL;
    struct agg **v = malloc(t->n * sizeof *v);
    if (!v)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].name)
            v[k++] = &t->slots[i];
    qsort(v, k, sizeof *v, cmp);
    return v;
}

/* The FLOPs of step "index" from the window's step list, 0 if unknown. */
uint64_t tp_summary_step_flops(const struct tp_window *w, uint64_t index)
{
    for (uint64_t i = 0; w->steps && i < w->steps_recorded; i++)
        if (w->steps[i].index == index)
            return w->steps[i].flops;
    return 0;
}

/* The span of recorded step "index", from the window's step list. */
int tp_summary_step_span(const struct tp_window *w, uint64_t index, int64_t *a, int64_t *b)
{
    for (uint64_t i = 0; w->steps && i < w->steps_recorded; i++)
        if (w->steps[i].index == index) {
            *a = w->steps[i].start_ns;
            *b = w->steps[i].end_ns;
            return 1;
        }
    return 0;
}

int tp_summary_mem_has_data(const struct tp_mem_usage *u)
{
    return u->start_bytes || u->end_bytes || u->peak_bytes || u->allocs || u->frees || u->failed;
}

int tp_summary_cmp_coll(const void *a, const void *b)
{
    const struct coll_row *x = a, *y = b;
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    return x->ranks < y->ranks ? -1 : x->ranks > y->ranks;
}

/* 1 when the collectives' kernels were seen on the device: their bandwidth
 * then uses device time, else host-enqueue time. */
int tp_summary_coll_device(const struct summary *s, const struct tp_window *w)
{
    for (size_t i = 0; w->gpu && i < s->ncoll; i++)
        if (s->coll[i].dev_ns > 0)
            return 1;
    return 0;
}
