/*
 * memory_points.c - DESIGN: the memory report's points.  Events arrive
 * with threads interleaved, so each series is sorted by time (arrival
 * order breaking ties) and framed by the window's start and end levels;
 * a series of more points than a plot has pixel columns is thinned to the
 * first, lowest, highest and last point of each column, which keeps every
 * visible step and every extreme.  The peak is marked where the steps
 * first reach the collector's peak, so that page, JSON and summary agree.
 * The memory ledger's owners of a series come from the window (its rows
 * and its series of changes, already in time order), each framed like the
 * series; stacked for the page, they merge into one state per time any of
 * them changed, thinned per pixel column like the series (the first
 * state, those of the lowest and highest sum, the last).
 */
#include "memory_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/common/grow.h"

int tp_memrep_has_data(const struct mem_series *s)
{
    const struct tp_mem_usage *u = s->u;
    return s->n || u->start_bytes || u->end_bytes || u->peak_bytes || u->allocs || u->frees ||
           u->failed;
}

struct mem_series *tp_memrep_series_of(struct mem_state *m, int device, unsigned mclass)
{
    if (m->last < m->n && m->s[m->last].u->device == device && m->s[m->last].u->mclass == mclass)
        return &m->s[m->last];
    for (int i = 0; i < m->n; i++)
        if (m->s[i].u->device == device && m->s[i].u->mclass == mclass) {
            m->last = i;
            return &m->s[i];
        }
    return NULL;
}

static int cmp_point(const void *a, const void *b)
{
    const struct mem_point *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns < y->ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int tp_memrep_cmp_fail(const void *a, const void *b)
{
    const struct mem_fail *x = a, *y = b;
    return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/*
 * The series' step points over [0, len]: (0, start), the calls that changed
 * what was held (times made relative and clamped), (len, end).  Returns a
 * malloc'ed array and its length in *n, or NULL when out of memory.
 */
struct mem_point *tp_memrep_points(struct mem_series *s, int64_t t0, int64_t len, size_t *n)
{
    struct mem_point *p = malloc((s->n + 2) * sizeof *p);
    if (!p)
        return NULL;
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, cmp_point);
    size_t k = 0;
    p[k++] = (struct mem_point){ 0, s->u->start_bytes, 0 };
    for (size_t i = 0; i < s->n; i++) {
        int64_t ns = s->v[i].ns - t0;
        ns = ns < 0 ? 0 : ns > len ? len : ns;
        if (s->v[i].bytes == p[k - 1].bytes)
            continue;
        p[k++] = (struct mem_point){ ns, s->v[i].bytes, 0 };
    }
    p[k++] = (struct mem_point){ len, s->u->end_bytes, 0 };
    *n = k;
    return p;
}

/*
 * tp_memrep_thin - keep, per column of "cols" over [0, len], the first, lowest,
 * highest and last point, in time order, into "out" (room for n points).
 * Returns the number kept.
 */
size_t tp_memrep_thin(const struct mem_point *p, size_t n, int64_t len, int cols,
                      struct mem_point *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int64_t col = len > 0 ? (int64_t)((double)p[i].ns * cols / (double)len) : 0;
        size_t first = i, lo = i, hi = i, last = i;
        for (i++; i < n; i++) {
            int64_t c = len > 0 ? (int64_t)((double)p[i].ns * cols / (double)len) : 0;
            if (c != col)
                break;
            if (p[i].bytes < p[lo].bytes)
                lo = i;
            if (p[i].bytes > p[hi].bytes)
                hi = i;
            last = i;
        }
        size_t idx[4] = { first, lo < hi ? lo : hi, lo < hi ? hi : lo, last };
        for (int j = 0; j < 4; j++)
            if (j == 0 || idx[j] != idx[j - 1])
                out[k++] = p[idx[j]];
    }
    return k;
}

const char *tp_memrep_trace_name(const char *trace)
{
    const char *slash = strrchr(trace, '/');
    return slash ? slash + 1 : trace;
}

/*
 * When the series first reached its peak: the first point that holds
 * peak_bytes, so that the mark sits on the step (the collector takes its
 * peak time a little after the call returns); else the collector's time.
 */
int64_t tp_memrep_peak_rel(const struct tp_window *w, const struct tp_mem_usage *u, int64_t len,
                           const struct mem_point *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].bytes == u->peak_bytes)
            return p[i].ns;
    int64_t ns = u->peak_ns - w->start_ns;
    return ns < 0 ? 0 : ns > len ? len : ns;
}

/* ---- owners (the memory ledger's rows and series, from the window) ---- */

static int owner_row_empty(const struct tp_mem_owner_usage *o)
{
    return !o->start_bytes && !o->end_bytes && !o->peak_bytes && !o->allocs && !o->frees;
}

/* Owner row "o"'s step points: (0, start), its changes (times relative,
 * clamped, never going back), (len, end); NULL when out of memory. */
static struct mem_point *owner_points(const struct tp_window *w, const struct tp_mem_owner_usage *o,
                                      int64_t len, size_t *n)
{
    size_t count = 2;
    for (size_t i = 0; w->mem_owner_points && i < w->n_mem_owner_points; i++) {
        const struct tp_mem_owner_point *q = &w->mem_owner_points[i];
        count += q->device == o->device && q->mclass == o->mclass && q->owner == o->owner;
    }
    struct mem_point *p = malloc(count * sizeof *p);
    if (!p)
        return NULL;
    size_t k = 0;
    p[k++] = (struct mem_point){ 0, o->start_bytes, 0 };
    for (size_t i = 0; w->mem_owner_points && i < w->n_mem_owner_points; i++) {
        const struct tp_mem_owner_point *q = &w->mem_owner_points[i];
        if (q->device != o->device || q->mclass != o->mclass || q->owner != o->owner)
            continue;
        int64_t ns = q->ts_ns - w->start_ns;
        ns = ns < p[k - 1].ns ? p[k - 1].ns : ns > len ? len : ns;
        if (q->bytes == p[k - 1].bytes)
            continue;
        p[k++] = (struct mem_point){ ns, q->bytes, 0 };
    }
    p[k++] = (struct mem_point){ len, o->end_bytes, 0 };
    *n = k;
    return p;
}

void tp_memrep_owners_free(struct mem_owner_set *set)
{
    for (int i = 0; set->o && i < set->n; i++)
        free(set->o[i].p);
    free(set->o);
    set->o = NULL;
    set->n = 0;
}

int tp_memrep_owners(const struct tp_window *w, const struct tp_mem_usage *u, int64_t len,
                     struct mem_owner_set *set)
{
    set->o = NULL;
    set->n = 0;
    if (!w->mem_owners || w->n_mem_owners <= 0)
        return 0;
    int rows = 0;
    for (int i = 0; i < w->n_mem_owners; i++)
        rows += w->mem_owners[i].device == u->device && w->mem_owners[i].mclass == u->mclass;
    if (!rows)
        return 0;
    set->o = calloc((size_t)rows, sizeof *set->o);
    if (!set->o)
        return -1;
    for (int i = 0; i < w->n_mem_owners; i++) {
        const struct tp_mem_owner_usage *o = &w->mem_owners[i];
        if (o->device != u->device || o->mclass != u->mclass || owner_row_empty(o))
            continue;
        struct mem_owner_line *l = &set->o[set->n];
        l->u = o;
        l->name = o->owner < (unsigned)w->n_mem_owner_names && w->mem_owner_names &&
                  w->mem_owner_names[o->owner] ? w->mem_owner_names[o->owner] : "unknown";
        l->p = owner_points(w, o, len, &l->n);
        if (!l->p) {
            tp_memrep_owners_free(set);
            return -1;
        }
        set->n++;
    }
    return 0;
}

void tp_memrep_stack_free(struct mem_stack *st)
{
    free(st->s);
    st->s = NULL;
    st->n = st->cap = 0;
}

static int stack_push(struct mem_stack *st, const uint64_t *state)
{
    size_t w = (size_t)st->k + 1;
    uint64_t *s = tp_grow(st->s, &st->cap, st->n + 1, w * sizeof *s, 256);
    if (!s)
        return -1;
    st->s = s;
    memcpy(s + st->n * w, state, w * sizeof *s);
    st->n++;
    return 0;
}

/* The states kept of one pixel column, in time order: its first, those of
 * the lowest and highest sum, its last (each once). */
struct stack_col {
    uint64_t *c[4];              /* k + 1 values each */
    uint64_t total[4];
    size_t seq[4];
    int have;
    int64_t col;
};

static int col_flush(struct mem_stack *st, struct stack_col *c)
{
    if (!c->have)
        return 0;
    int lo = c->seq[1] < c->seq[2] ? 1 : 2, hi = 3 - lo;
    int order[4] = { 0, lo, hi, 3 };
    size_t last = SIZE_MAX;
    for (int i = 0; i < 4; i++) {
        if (c->seq[order[i]] == last)
            continue;
        last = c->seq[order[i]];
        if (stack_push(st, c->c[order[i]]) != 0)
            return -1;
    }
    c->have = 0;
    return 0;
}

static void col_set(struct stack_col *c, int slot, const uint64_t *state, size_t w, uint64_t total,
                    size_t seq)
{
    memcpy(c->c[slot], state, w * sizeof *state);
    c->total[slot] = total;
    c->seq[slot] = seq;
}

int tp_memrep_stack(const struct mem_owner_set *set, int64_t len, int cols, struct mem_stack *st)
{
    memset(st, 0, sizeof *st);
    st->k = set->n;
    if (set->n <= 0)
        return 0;
    size_t k = (size_t)set->n, w = k + 1, changes = 0;
    for (size_t i = 0; i < k; i++)
        changes += set->o[i].n;
    int thin = changes > 4 * (size_t)cols && cols > 0 && len > 0;
    size_t *head = calloc(k, sizeof *head);
    uint64_t *cur = calloc(w * 5, sizeof *cur);     /* the state, and 4 column slots */
    int rc = -1;
    if (!head || !cur)
        goto out;
    struct stack_col c = { .have = 0 };
    for (int i = 0; i < 4; i++)
        c.c[i] = cur + w * (size_t)(i + 1);
    for (size_t seq = 0;; seq++) {
        /* the earliest change of any owner, every owner's changes at that time applied */
        int64_t ns = INT64_MAX;
        for (size_t i = 0; i < k; i++)
            if (head[i] < set->o[i].n && set->o[i].p[head[i]].ns < ns)
                ns = set->o[i].p[head[i]].ns;
        if (ns == INT64_MAX)
            break;
        uint64_t total = 0;
        for (size_t i = 0; i < k; i++) {
            const struct mem_owner_line *l = &set->o[i];
            while (head[i] < l->n && l->p[head[i]].ns == ns)
                cur[1 + i] = l->p[head[i]++].bytes;
            total += cur[1 + i];
        }
        cur[0] = (uint64_t)ns;
        if (!thin) {
            if (stack_push(st, cur) != 0)
                goto out;
            continue;
        }
        int64_t col = (int64_t)((double)ns * cols / (double)len);
        if (!c.have || col != c.col) {
            if (col_flush(st, &c) != 0)
                goto out;
            for (int s = 0; s < 4; s++)
                col_set(&c, s, cur, w, total, seq);
            c.have = 1;
            c.col = col;
            continue;
        }
        if (total < c.total[1])
            col_set(&c, 1, cur, w, total, seq);
        if (total > c.total[2])
            col_set(&c, 2, cur, w, total, seq);
        col_set(&c, 3, cur, w, total, seq);
    }
    if (thin && col_flush(st, &c) != 0)
        goto out;
    rc = 0;
out:
    free(head);
    free(cur);
    if (rc != 0)
        tp_memrep_stack_free(st);
    return rc;
}

/* ---- names and sizes (memory.h: also the summary's) ---- */

const char *tp_memory_class_name(unsigned mclass)
{
    switch (mclass) {
    case TP_MEM_DEVICE: return "device";
    case TP_MEM_MANAGED: return "managed";
    case TP_MEM_HOST: return "host";
    default: return "unknown";
    }
}

const char *tp_memory_where(char *out, size_t n, int device, unsigned mclass)
{
    if (mclass == TP_MEM_HOST || device < 0)
        snprintf(out, n, "host pinned");
    else if (mclass == TP_MEM_MANAGED)
        snprintf(out, n, "GPU%d managed", device);
    else
        snprintf(out, n, "GPU%d", device);
    return out;
}

const char *tp_memory_human(char *out, size_t n, uint64_t bytes)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
    if (bytes < 1024) {
        snprintf(out, n, "%llu B", (unsigned long long)bytes);
        return out;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (u < 3 && v >= 1024) {
        v /= 1024;
        u++;
    }
    snprintf(out, n, "%.2f %s", v, units[u]);
    return out;
}
