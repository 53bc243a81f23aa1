/*
 * memory.c - DESIGN: the memory handler (SPEC 8): "<reports>/<trace
 * base>.memory.html", one self-contained page (inline CSS and SVG, no
 * script, no external font) with one step plot per (device, class) of the
 * bytes the process held over the window, and "<trace base>.memory.json"
 * with the same points.  The window's tp_mem_usage rows give each series'
 * start, end and peak (the collector saw every call, also those of threads
 * whose records were dropped); the ALLOC/FREE events give the steps in
 * between: one point per call that changed memory, at the end of the call
 * (its "total" is what was held after it), failed calls listed apart and
 * marked on the time axis.  The peak is marked where the steps first reach
 * peak_bytes (the collector notes its time a little after the call returns;
 * the summary uses the same rule, so all three reports agree).
 * Threads are interleaved in the event stream, so points are sorted by time
 * at close.  A window of 10^6 allocations must not make a 100 MB page:
 * points are thinned per pixel column, keeping the first, lowest, highest
 * and last point of each column, which keeps every visible step and every
 * extreme; the JSON keeps all points up to TP_MEMORY_JSON_POINTS and is
 * thinned the same way beyond.  The page is also well-formed XML (XHTML
 * syntax, UTF-8 characters instead of named entities) so that tests parse it
 * with any XML reader.  No trace or no memory data: no file.
 */
#include "memory.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../collector/log.h"
#include "handler.h"
#include "jsonw.h"
#include "output.h"

#define TP_MEMORY_JSON_POINTS 20000   /* more points than this are thinned */
#define TP_MEMORY_JSON_COLUMNS 5000   /* ... to at most 4 per column */

/* Plot geometry, in SVG user units (= CSS px). */
#define PLOT_W 880
#define PLOT_H 300
#define MARGIN_L 72
#define MARGIN_R 24
#define MARGIN_T 24
#define MARGIN_B 44
#define AREA_W (PLOT_W - MARGIN_L - MARGIN_R)
#define AREA_H (PLOT_H - MARGIN_T - MARGIN_B)

struct mem_point {
    int64_t ns;                  /* since window start */
    uint64_t bytes;
    uint64_t seq;                /* arrival order, breaks ties */
};

struct mem_series {
    const struct tp_mem_usage *u;
    struct mem_point *v;
    size_t n, cap;
};

struct mem_fail {
    int device;
    unsigned mclass;
    int64_t ns;
    uint64_t bytes;
};

struct mem_state {
    struct mem_series *s;
    int n;
    int last;                    /* index of the previous event's series */
    struct mem_fail *f;
    size_t nf, capf;
    uint64_t seq;
    int oom;
    const char *trace;           /* the saved trace, at close */
};

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

static int series_has_data(const struct mem_series *s)
{
    const struct tp_mem_usage *u = s->u;
    return s->n || u->start_bytes || u->end_bytes || u->peak_bytes || u->allocs || u->frees ||
           u->failed;
}

static void *memory_open(const struct tp_window *w)
{
    if (w->n_mem <= 0 || !w->mem)
        return NULL;
    struct mem_state *m = calloc(1, sizeof *m);
    if (m)
        m->s = calloc((size_t)w->n_mem, sizeof *m->s);
    if (!m || !m->s) {
        free(m);
        TP_ERROR("memory report not written: %s", strerror(ENOMEM));
        return NULL;
    }
    m->n = w->n_mem;
    for (int i = 0; i < m->n; i++)
        m->s[i].u = &w->mem[i];
    return m;
}

static struct mem_series *series_of(struct mem_state *m, int device, unsigned mclass)
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

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 256;
    void *p = realloc(*v, ncap * size);
    if (!p)
        return -1;
    *v = p;
    *cap = ncap;
    return 0;
}

static void memory_event(void *state, const struct tp_event *ev)
{
    struct mem_state *m = state;
    const struct tp_record *r = ev->rec;
    if (ev->dev || !r || (ev->form != TP_FORM_ALLOC && ev->form != TP_FORM_FREE))
        return;
    if (r->u.mem.flags & TP_MEM_NOOP)
        return;
    int64_t at = ev->ts_ns + (ev->dur_ns > 0 ? ev->dur_ns : 0);
    if (r->u.mem.flags & TP_MEM_FAILED) {
        if (ev->form != TP_FORM_ALLOC)
            return;
        if (grow((void **)&m->f, &m->capf, m->nf, sizeof *m->f)) {
            m->oom = 1;
            return;
        }
        m->f[m->nf++] = (struct mem_fail){ r->u.mem.device, r->u.mem.mclass, at, r->u.mem.bytes };
        return;
    }
    struct mem_series *s = series_of(m, r->u.mem.device, r->u.mem.mclass);
    if (!s)
        return;
    if (grow((void **)&s->v, &s->cap, s->n, sizeof *s->v)) {
        m->oom = 1;
        return;
    }
    s->v[s->n++] = (struct mem_point){ at, r->u.mem.total, m->seq++ };
}

static int cmp_point(const void *a, const void *b)
{
    const struct mem_point *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns < y->ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_fail(const void *a, const void *b)
{
    const struct mem_fail *x = a, *y = b;
    return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/*
 * The series' step points over [0, len]: (0, start), the calls that changed
 * what was held (times made relative and clamped), (len, end).  Returns a
 * malloc'ed array and its length in *n, or NULL when out of memory.
 */
static struct mem_point *series_points(struct mem_series *s, int64_t t0, int64_t len, size_t *n)
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
 * thin - keep, per column of "cols" over [0, len], the first, lowest,
 * highest and last point, in time order, into "out" (room for n points).
 * Returns the number kept.
 */
static size_t thin(const struct mem_point *p, size_t n, int64_t len, int cols, struct mem_point *out)
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

/* ---- JSON ---------------------------------------------------------------- */

/* "ns" (>= 0) as milliseconds with three decimals, rounded to the microsecond as the summary does. */
static void put_ms(struct tp_jsonw *j, int64_t ns)
{
    tp_jsonw_us(j, (ns + 500) / 1000);
}

static const char *trace_name(const char *trace)
{
    const char *slash = strrchr(trace, '/');
    return slash ? slash + 1 : trace;
}

/*
 * When the series first reached its peak: the first point that holds
 * peak_bytes, so that the mark sits on the step (the collector takes its
 * peak time a little after the call returns); else the collector's time.
 */
static int64_t peak_rel(const struct tp_window *w, const struct tp_mem_usage *u, int64_t len,
                        const struct mem_point *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].bytes == u->peak_bytes)
            return p[i].ns;
    int64_t ns = u->peak_ns - w->start_ns;
    return ns < 0 ? 0 : ns > len ? len : ns;
}

static void put_json(struct tp_jsonw *j, struct mem_state *m, const struct tp_window *w, int64_t len,
                     struct mem_point **pts, const size_t *npts)
{
    TP_JSONW_LIT(j, "{\n  \"trace\": ");
    tp_jsonw_str(j, trace_name(m->trace));
    TP_JSONW_LIT(j, ",\n  \"window\": {\"start_ns\": ");
    tp_jsonw_i64(j, w->start_ns);
    TP_JSONW_LIT(j, ", \"end_ns\": ");
    tp_jsonw_i64(j, w->end_ns);
    TP_JSONW_LIT(j, ", \"steps\": ");
    if (w->last_step >= w->first_step) {
        tp_jsonw_char(j, '[');
        tp_jsonw_u64(j, w->first_step);
        TP_JSONW_LIT(j, ", ");
        tp_jsonw_u64(j, w->last_step);
        tp_jsonw_char(j, ']');
    } else {
        TP_JSONW_LIT(j, "[]");
    }
    TP_JSONW_LIT(j, "},\n  \"unit\": \"bytes\",\n  \"series\": [");
    int first = 1;
    for (int i = 0; i < m->n; i++) {
        if (!pts[i])
            continue;
        const struct tp_mem_usage *u = m->s[i].u;
        tp_jsonw_lit(j, first ? "\n    {\"device\": " : ",\n    {\"device\": ");
        first = 0;
        tp_jsonw_i64(j, u->device);
        TP_JSONW_LIT(j, ", \"class\": ");
        tp_jsonw_str(j, tp_memory_class_name(u->mclass));
        TP_JSONW_LIT(j, ", \"start_bytes\": ");
        tp_jsonw_u64(j, u->start_bytes);
        TP_JSONW_LIT(j, ", \"end_bytes\": ");
        tp_jsonw_u64(j, u->end_bytes);
        TP_JSONW_LIT(j, ", \"peak_bytes\": ");
        tp_jsonw_u64(j, u->peak_bytes);
        TP_JSONW_LIT(j, ", \"peak_ms\": ");
        put_ms(j, peak_rel(w, u, len, pts[i], npts[i]));
        TP_JSONW_LIT(j, ", \"peak_process_bytes\": ");
        tp_jsonw_u64(j, u->peak_process);
        TP_JSONW_LIT(j, ", \"allocs\": ");
        tp_jsonw_u64(j, u->allocs);
        TP_JSONW_LIT(j, ", \"frees\": ");
        tp_jsonw_u64(j, u->frees);
        TP_JSONW_LIT(j, ", \"failed\": ");
        tp_jsonw_u64(j, u->failed);
        const struct mem_point *p = pts[i];
        size_t n = npts[i];
        struct mem_point *t = NULL;
        if (n > TP_MEMORY_JSON_POINTS && (t = malloc(n * sizeof *t)) != NULL) {
            n = thin(p, n, len, TP_MEMORY_JSON_COLUMNS, t);
            p = t;
        }
        TP_JSONW_LIT(j, ", \"thinned\": ");
        tp_jsonw_lit(j, t ? "true" : "false");
        TP_JSONW_LIT(j, ",\n     \"points\": [");
        for (size_t k = 0; k < n; k++) {
            tp_jsonw_lit(j, k ? ", [" : "[");
            put_ms(j, p[k].ns);
            TP_JSONW_LIT(j, ", ");
            tp_jsonw_u64(j, p[k].bytes);
            tp_jsonw_char(j, ']');
        }
        TP_JSONW_LIT(j, "]}");
        free(t);
    }
    TP_JSONW_LIT(j, "\n  ],\n  \"failed\": [");
    for (size_t k = 0; k < m->nf; k++) {
        tp_jsonw_lit(j, k ? ",\n    {\"device\": " : "\n    {\"device\": ");
        tp_jsonw_i64(j, m->f[k].device);
        TP_JSONW_LIT(j, ", \"class\": ");
        tp_jsonw_str(j, tp_memory_class_name(m->f[k].mclass));
        TP_JSONW_LIT(j, ", \"ms\": ");
        int64_t ns = m->f[k].ns - w->start_ns;
        put_ms(j, ns < 0 ? 0 : ns);
        TP_JSONW_LIT(j, ", \"bytes\": ");
        tp_jsonw_u64(j, m->f[k].bytes);
        tp_jsonw_char(j, '}');
    }
    tp_jsonw_lit(j, m->nf ? "\n  ]\n}\n" : "]\n}\n");
}

/* ---- HTML ---------------------------------------------------------------- */

/* Text escaped for HTML/XML content and attribute values; bytes < 0x20 dropped. */
static void put_text(struct tp_jsonw *j, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': TP_JSONW_LIT(j, "&amp;"); break;
        case '<': TP_JSONW_LIT(j, "&lt;"); break;
        case '>': TP_JSONW_LIT(j, "&gt;"); break;
        case '"': TP_JSONW_LIT(j, "&quot;"); break;
        case '\'': TP_JSONW_LIT(j, "&#39;"); break;
        default:
            if ((unsigned char)*s >= 0x20 && *s != 0x7f)
                tp_jsonw_char(j, *s);
        }
    }
}

/* A round tick step (1, 2, 2.5 or 5 x 10^k) giving about "target" ticks over "range". */
static double nice_step(double range, int target)
{
    double raw = range > 0 ? range / target : 1;
    double p = 1;
    while (p * 10 <= raw)
        p *= 10;
    while (p > raw)
        p /= 10;
    double f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
}

/* Decimals needed to print multiples of "step" exactly (at most 6). */
static int step_decimals(double step)
{
    int d = 0;
    double s = step;
    while (d < 6) {
        double r = s - (double)(long long)(s + 0.5);
        if (r < 1e-9 && r > -1e-9)
            break;
        s *= 10;
        d++;
    }
    return d;
}

/* Plot unit: GiB from 1 GiB up, MiB from 1 MiB, else KiB. */
static void y_unit(uint64_t max, double *div, const char **name)
{
    if (max >= (1ull << 30)) {
        *div = (double)(1ull << 30);
        *name = "GiB";
    } else if (max >= (1ull << 20) || max == 0) {
        *div = (double)(1ull << 20);
        *name = "MiB";
    } else {
        *div = 1024.0;
        *name = "KiB";
    }
}

static const char *series_color(unsigned mclass)
{
    return mclass == TP_MEM_MANAGED ? "#8250df" : mclass == TP_MEM_HOST ? "#1a7f37" : "#0969da";
}

static const char *fmt_ms(char *buf, size_t n, double ms)
{
    snprintf(buf, n, ms >= 1 || ms == 0 ? "%.1f ms" : "%.3f ms", ms);
    return buf;
}

static void put_plot(struct tp_jsonw *j, const struct tp_window *w, const struct mem_state *m,
                     const struct mem_series *s, const struct mem_point *p, size_t n, int64_t len)
{
    const struct tp_mem_usage *u = s->u;
    uint64_t max = u->peak_bytes;
    for (size_t i = 0; i < n; i++)
        if (p[i].bytes > max)
            max = p[i].bytes;
    double div;
    const char *unit;
    y_unit(max, &div, &unit);
    double vmax = (double)max / div;
    double ystep = nice_step(vmax, 5);
    /* 10% headroom: the peak label goes above the peak, where no line is */
    double ytop = ystep;
    while (ytop < vmax * 1.1 - 1e-9 * ystep)
        ytop += ystep;
    double len_ms = (double)len / 1e6;
    double xstep = nice_step(len_ms, 8);
    double xscale = len > 0 ? (double)AREA_W / (double)len : 0;
    double yscale = (double)AREA_H / (ytop * div);
    char where[64], buf[64], buf2[64];
    tp_memory_where(where, sizeof where, u->device, u->mclass);
    const char *color = series_color(u->mclass);

    tp_jsonw_printf(j, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"%d\" height=\"%d\""
                       " viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
                    PLOT_W, PLOT_H, PLOT_W, PLOT_H);
    put_text(j, where);
    TP_JSONW_LIT(j, " memory held over the window\">\n");
    /* grid and y ticks */
    int yd = step_decimals(ystep);
    for (int k = 0; k * ystep <= ytop + 1e-9 * ystep; k++) {
        double y = MARGIN_T + AREA_H - (double)k * ystep * div * yscale;
        tp_jsonw_printf(j, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
                           "<text class=\"ytick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\" dy=\"0.32em\">%.*f %s</text>\n",
                        MARGIN_L, MARGIN_L + AREA_W, y, y, MARGIN_L - 8, y, k ? yd : 0, k * ystep, unit);
    }
    int xd = step_decimals(xstep);
    for (int k = 0; k * xstep <= len_ms + 1e-9 * xstep; k++) {
        double x = MARGIN_L + (double)k * xstep * 1e6 * xscale;
        tp_jsonw_printf(j, "<line class=\"tick\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
                           "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.*f</text>\n",
                        x, x, MARGIN_T + AREA_H, MARGIN_T + AREA_H + 5, x, MARGIN_T + AREA_H + 18, xd,
                        k * xstep);
    }
    tp_jsonw_printf(j, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n",
                    MARGIN_L, MARGIN_L + AREA_W, MARGIN_T + AREA_H, MARGIN_T + AREA_H);
    tp_jsonw_printf(j, "<text class=\"xlabel\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">"
                       "time since window start (ms)</text>\n",
                    MARGIN_L + AREA_W / 2, PLOT_H - 6);
    /* the step line, and the area under it */
    for (int pass = 0; pass < 2; pass++) {
        tp_jsonw_lit(j, pass ? "<path class=\"step\" fill=\"none\" stroke=\"" : "<path class=\"area\" fill=\"");
        tp_jsonw_lit(j, color);
        tp_jsonw_lit(j, pass ? "\" stroke-width=\"1.5\" stroke-linejoin=\"round\" d=\""
                             : "\" fill-opacity=\"0.10\" stroke=\"none\" d=\"");
        double py = 0;
        for (size_t i = 0; i < n; i++) {
            double x = MARGIN_L + (double)p[i].ns * xscale;
            double y = MARGIN_T + AREA_H - (double)p[i].bytes * yscale;
            if (i == 0 && pass)
                tp_jsonw_printf(j, "M%.1f %.1f", x, y);
            else if (i == 0)
                tp_jsonw_printf(j, "M%.1f %d L%.1f %.1f", x, MARGIN_T + AREA_H, x, y);
            else
                tp_jsonw_printf(j, " L%.1f %.1f L%.1f %.1f", x, py, x, y);
            py = y;
        }
        if (!pass)
            tp_jsonw_printf(j, " L%.1f %d Z", MARGIN_L + (double)len * xscale, MARGIN_T + AREA_H);
        TP_JSONW_LIT(j, "\"/>\n");
    }
    /* the peak */
    int64_t pk = peak_rel(w, u, len, p, n);
    double px = MARGIN_L + (double)pk * xscale;
    double py = MARGIN_T + AREA_H - (double)u->peak_bytes * yscale;
    int right = px < MARGIN_L + AREA_W * 0.7;
    double ly = py - 9 < MARGIN_T + 4 ? py + 18 : py - 9;
    tp_jsonw_printf(j, "<circle class=\"peak\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", px, py,
                    color);
    tp_jsonw_printf(j, "<text class=\"peaklabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">peak %s at %s</text>\n",
                    right ? px + 8 : px - 8, ly, right ? "start" : "end",
                    tp_memory_human(buf, sizeof buf, u->peak_bytes), fmt_ms(buf2, sizeof buf2, (double)pk / 1e6));
    /* failed allocations: a red cross on the time axis each, with a tooltip */
    int nfailed = 0;
    for (size_t k = 0; k < m->nf; k++) {
        const struct mem_fail *f = &m->f[k];
        if (f->device != u->device || f->mclass != u->mclass)
            continue;
        int64_t at = f->ns - w->start_ns;
        at = at < 0 ? 0 : at > len ? len : at;
        double fx = MARGIN_L + (double)at * xscale, fy = MARGIN_T + AREA_H;
        tp_jsonw_printf(j, "<path class=\"failed\" stroke=\"#cf222e\" stroke-width=\"2\""
                           " d=\"M%.1f %.1f L%.1f %.1f M%.1f %.1f L%.1f %.1f\"><title>failed allocation of %s at %s</title></path>\n",
                        fx - 4, fy - 4, fx + 4, fy + 4, fx + 4, fy - 4, fx - 4, fy + 4,
                        tp_memory_human(buf, sizeof buf, f->bytes), fmt_ms(buf2, sizeof buf2, (double)at / 1e6));
        nfailed++;
    }
    if (nfailed)
        tp_jsonw_printf(j, "<text class=\"failedlabel\" x=\"%d\" y=\"%d\" text-anchor=\"end\">"
                           "× %d failed allocation%s</text>\n",
                        MARGIN_L + AREA_W, MARGIN_T - 8, nfailed, nfailed > 1 ? "s" : "");
    TP_JSONW_LIT(j, "</svg>\n");
}

static const char page_style[] =
    "body{font:14px/1.45 system-ui,-apple-system,\"Segoe UI\",Roboto,\"Helvetica Neue\",Arial,sans-serif;"
    "color:#1f2328;background:#fff;margin:24px auto;max-width:920px;padding:0 16px}\n"
    "h1{font-size:20px;margin:0 0 4px}\n"
    "h2{font-size:16px;margin:28px 0 6px}\n"
    ".sub{color:#59636e;margin:0 0 12px}\n"
    ".note{color:#59636e;border-left:3px solid #d1d9e0;padding:2px 10px;margin:12px 0 16px}\n"
    "table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:8px 0}\n"
    "th,td{padding:3px 10px;text-align:right;border-bottom:1px solid #d1d9e0;white-space:nowrap}\n"
    "th{font-weight:600;border-bottom:2px solid #d1d9e0}\n"
    "th:first-child,td:first-child{text-align:left;padding-left:0}\n"
    "svg.plot{display:block;max-width:100%;height:auto}\n"
    "svg text{font:12px system-ui,-apple-system,\"Segoe UI\",Roboto,Arial,sans-serif;fill:#59636e}\n"
    "svg text.peaklabel{fill:#1f2328;font-weight:600}\n"
    "svg text.failedlabel{fill:#cf222e}\n"
    "svg .grid{stroke:#eaeef2;stroke-width:1}\n"
    "svg .axis,svg .tick{stroke:#8c959f;stroke-width:1}\n";

static void put_cell(struct tp_jsonw *j, const char *text)
{
    TP_JSONW_LIT(j, "<td>");
    put_text(j, text);
    TP_JSONW_LIT(j, "</td>");
}

static void put_html(struct tp_jsonw *j, struct mem_state *m, const struct tp_window *w, int64_t len,
                     struct mem_point **pts, const size_t *npts, struct mem_point *scratch)
{
    char buf[64];
    TP_JSONW_LIT(j, "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
                    "<meta charset=\"utf-8\"/>\n<title>Memory · ");
    put_text(j, trace_name(m->trace));
    TP_JSONW_LIT(j, "</title>\n<style>\n");
    tp_jsonw_lit(j, page_style);
    TP_JSONW_LIT(j, "</style>\n</head>\n<body>\n<h1>Memory held · ");
    put_text(j, trace_name(m->trace));
    TP_JSONW_LIT(j, "</h1>\n<p class=\"sub\">");
    if (w->last_step > w->first_step)
        tp_jsonw_printf(j, "steps %llu–%llu", (unsigned long long)w->first_step,
                        (unsigned long long)w->last_step);
    else if (w->last_step == w->first_step)
        tp_jsonw_printf(j, "step %llu", (unsigned long long)w->first_step);
    else
        TP_JSONW_LIT(j, "no step recorded");
    tp_jsonw_printf(j, " · window %s · rank %d · pid %d", fmt_ms(buf, sizeof buf, (double)len / 1e6), w->rank,
                    (int)w->pid);
    if (w->program && w->program[0]) {
        TP_JSONW_LIT(j, " · ");
        put_text(j, w->program);
    }
    if (w->partial)
        TP_JSONW_LIT(j, " · partial window");
    TP_JSONW_LIT(j, "</p>\n<p class=\"note\">These are the bytes the process reserved from CUDA"
                    " (cudaMalloc, cudaMallocAsync, managed, pinned and VMM allocations), not the bytes"
                    " a framework's caching allocator handed out to tensors: compare with PyTorch's"
                    " torch.cuda.memory_reserved(), not memory_allocated().</p>\n");

    TP_JSONW_LIT(j, "<table>\n<tr><th>Memory</th><th>Start</th><th>Peak</th><th>Peak at</th><th>End</th>"
                    "<th>Process peak</th><th>Allocs</th><th>Frees</th><th>Failed</th></tr>\n");
    for (int i = 0; i < m->n; i++) {
        if (!pts[i])
            continue;
        const struct tp_mem_usage *u = m->s[i].u;
        TP_JSONW_LIT(j, "<tr>");
        put_cell(j, tp_memory_where(buf, sizeof buf, u->device, u->mclass));
        put_cell(j, tp_memory_human(buf, sizeof buf, u->start_bytes));
        put_cell(j, tp_memory_human(buf, sizeof buf, u->peak_bytes));
        put_cell(j, fmt_ms(buf, sizeof buf, (double)peak_rel(w, u, len, pts[i], npts[i]) / 1e6));
        put_cell(j, tp_memory_human(buf, sizeof buf, u->end_bytes));
        put_cell(j, tp_memory_human(buf, sizeof buf, u->peak_process));
        tp_jsonw_printf(j, "<td>%llu</td><td>%llu</td><td>%llu</td></tr>\n", (unsigned long long)u->allocs,
                        (unsigned long long)u->frees, (unsigned long long)u->failed);
    }
    TP_JSONW_LIT(j, "</table>\n");

    for (int i = 0; i < m->n; i++) {
        if (!pts[i])
            continue;
        const struct tp_mem_usage *u = m->s[i].u;
        TP_JSONW_LIT(j, "<h2>");
        put_text(j, tp_memory_where(buf, sizeof buf, u->device, u->mclass));
        tp_jsonw_lit(j, u->mclass == TP_MEM_DEVICE && u->device >= 0 ? " device memory</h2>\n" : " memory</h2>\n");
        const struct mem_point *p = pts[i];
        size_t n = npts[i];
        if (n > 4 * (size_t)AREA_W && scratch) {
            n = thin(p, n, len, AREA_W, scratch);
            p = scratch;
        }
        put_plot(j, w, m, &m->s[i], p, n, len);
    }

    if (m->nf) {
        TP_JSONW_LIT(j, "<h2>Failed allocations</h2>\n<table>\n<tr><th>Memory</th><th>At</th><th>Size asked</th></tr>\n");
        for (size_t k = 0; k < m->nf; k++) {
            int64_t ns = m->f[k].ns - w->start_ns;
            TP_JSONW_LIT(j, "<tr>");
            put_cell(j, tp_memory_where(buf, sizeof buf, m->f[k].device, m->f[k].mclass));
            put_cell(j, fmt_ms(buf, sizeof buf, (double)(ns < 0 ? 0 : ns) / 1e6));
            put_cell(j, tp_memory_human(buf, sizeof buf, m->f[k].bytes));
            TP_JSONW_LIT(j, "</tr>\n");
        }
        TP_JSONW_LIT(j, "</table>\n");
    }
    if (m->oom)
        TP_JSONW_LIT(j, "<p class=\"note\">Out of memory while building this page: some steps are missing.</p>\n");
    TP_JSONW_LIT(j, "</body>\n</html>\n");
}

/* Writes one report file; 0 or -1 (reported). */
static int write_report(const struct tp_window *w, struct tp_saved *saved, const char *ext, int json, struct mem_state *m, int64_t len,
                        struct mem_point **pts, const size_t *npts, struct mem_point *scratch)
{
    struct tp_output out;
    if (tp_output_open_report(&out, w->reports_folder, saved->trace, ext, w->overwrite, "memory report") != 0)
        return -1;
    struct tp_jsonw j;
    if (tp_jsonw_init(&j, out.fd, 0, 0) == 0) {
        if (json)
            put_json(&j, m, w, len, pts, npts);
        else
            put_html(&j, m, w, len, pts, npts, scratch);
    }
    int err = tp_jsonw_finish(&j);
    return tp_output_report_done(&out, err, saved);
}

static void memory_free(struct mem_state *m)
{
    for (int i = 0; i < m->n; i++)
        free(m->s[i].v);
    free(m->s);
    free(m->f);
    free(m);
}

static int memory_close(void *state, const struct tp_window *w, struct tp_saved *saved)
{
    struct mem_state *m = state;
    m->trace = saved->trace;
    int rc = 0;
    struct mem_point **pts = calloc((size_t)m->n, sizeof *pts);
    size_t *npts = calloc((size_t)m->n, sizeof *npts);
    struct mem_point *scratch = NULL;
    if (!saved->trace[0])
        goto out;
    if (!pts || !npts) {
        TP_ERROR("memory report of %s not written: %s", saved->trace, strerror(ENOMEM));
        rc = -1;
        goto out;
    }
    int64_t len = w->end_ns > w->start_ns ? w->end_ns - w->start_ns : 0;
    size_t most = 0;
    int any = 0;
    for (int i = 0; i < m->n; i++) {
        if (!series_has_data(&m->s[i]))
            continue;
        pts[i] = series_points(&m->s[i], w->start_ns, len, &npts[i]);
        if (!pts[i]) {
            m->oom = 1;
            continue;
        }
        any = 1;
        if (npts[i] > most)
            most = npts[i];
    }
    if (!any)
        goto out;
    if (m->nf)
        qsort(m->f, m->nf, sizeof *m->f, cmp_fail);
    if (most > 4 * (size_t)AREA_W)
        scratch = malloc(most * sizeof *scratch);
    if (write_report(w, saved, "memory.json", 1, m, len, pts, npts, scratch) != 0)
        rc = -1;
    if (write_report(w, saved, "memory.html", 0, m, len, pts, npts, scratch) != 0)
        rc = -1;
out:
    for (int i = 0; pts && i < m->n; i++)
        free(pts[i]);
    free(pts);
    free(npts);
    free(scratch);
    memory_free(m);
    return rc;
}

const struct tp_handler tp_handler_memory = {
    .name = "memory",
    .open = memory_open,
    .event = memory_event,
    .close = memory_close,
};
