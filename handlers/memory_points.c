/*
 * memory_points.c - DESIGN: the memory report's points.  Events arrive
 * with threads interleaved, so each series is sorted by time (arrival
 * order breaking ties) and framed by the window's start and end levels;
 * a series of more points than a plot has pixel columns is thinned to the
 * first, lowest, highest and last point of each column, which keeps every
 * visible step and every extreme.  The peak is marked where the steps
 * first reach the collector's peak, so that page, JSON and summary agree.
 */
#include "memory_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
