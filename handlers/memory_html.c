/*
 * memory_html.c - DESIGN: "<trace base>.memory.html": one self-contained
 * page (inline CSS and SVG, no script, no external font), one step plot per
 * (device, class) with "nice" axis ticks, the peak and the failed
 * allocations marked, and a table of the levels.  Where the memory ledger
 * names owners, a plot stacks them under its line, one band each in a
 * colour of its own ("unknown" grey), with a legend under the plot (the
 * name, its bytes at the end and its peak) and the name as each band's
 * tooltip; the line's own tint is left out there, so that the colours read
 * as the legend says.  Well-formed XML (XHTML syntax, UTF-8 characters
 * instead of named entities), every text escaped.
 */
#include "memory_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

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

/* The owners' colours, in the rows' order (most held at the end first),
 * none of them the series' blue, purple or green; "unknown" always grey. */
static const char *const owner_colors[] = { "#f28e2b", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                                            "#ff9da7", "#9c755f", "#4e79a7", "#59a14f" };
#define OWNER_GREY "#bab0ac"
#define OWNER_OPACITY "0.55"

static const char *owner_color(const struct mem_owner_set *own, int k)
{
    if (!strcmp(own->o[k].name, "unknown"))
        return OWNER_GREY;
    int x = 0;          /* the k-th named owner */
    for (int i = 0; i < k; i++)
        x += strcmp(own->o[i].name, "unknown") != 0;
    return owner_colors[x % (int)(sizeof owner_colors / sizeof owner_colors[0])];
}

static const char *fmt_ms(char *buf, size_t n, double ms)
{
    snprintf(buf, n, ms >= 1 || ms == 0 ? "%.1f ms" : "%.3f ms", ms);
    return buf;
}

/* The sum of owners [0, upto) in state "i" of "st". */
static uint64_t stack_sum(const struct mem_stack *st, size_t i, int upto)
{
    const uint64_t *v = st->s + i * ((size_t)st->k + 1) + 1;
    uint64_t sum = 0;
    for (int k = 0; k < upto; k++)
        sum += v[k];
    return sum;
}

/* Owner "k"'s band of the stack: a closed path along its top (the sum of
 * owners 0..k) from the window's start to its end, and back along its
 * bottom (the sum of the owners under it), both as steps. */
static void put_owner_area(struct tp_jsonw *j, const struct mem_stack *st, int k, const char *color,
                           const char *name, double xscale, double yscale)
{
    tp_jsonw_lit(j, "<path class=\"owner\" fill=\"");
    tp_jsonw_lit(j, color);
    TP_JSONW_LIT(j, "\" fill-opacity=\"" OWNER_OPACITY "\" stroke=\"none\" d=\"");
    size_t w = (size_t)st->k + 1;
#define SX(i) (MARGIN_L + (double)(int64_t)st->s[(i) * w] * xscale)
#define SY(v) (MARGIN_T + AREA_H - (double)(v) * yscale)
    /* a state that leaves an edge where it was adds no vertex: a band that
     * does not move is a rectangle, whatever the other owners do */
    size_t last = st->n - 1;
    uint64_t prev = stack_sum(st, 0, k + 1);
    tp_jsonw_printf(j, "M%.1f %.1f", SX(0), SY(prev));
    for (size_t i = 1; i < st->n; i++) {
        uint64_t v = stack_sum(st, i, k + 1);
        if (v != prev)
            tp_jsonw_printf(j, " L%.1f %.1f L%.1f %.1f", SX(i), SY(prev), SX(i), SY(v));
        prev = v;
    }
    prev = stack_sum(st, last, k);
    tp_jsonw_printf(j, " L%.1f %.1f L%.1f %.1f", SX(last), SY(stack_sum(st, last, k + 1)), SX(last), SY(prev));
    for (size_t i = last; i > 0; i--) {
        uint64_t b = stack_sum(st, i - 1, k);
        if (b != prev)
            tp_jsonw_printf(j, " L%.1f %.1f L%.1f %.1f", SX(i), SY(prev), SX(i), SY(b));
        prev = b;
    }
    tp_jsonw_printf(j, " L%.1f %.1f Z\"><title>", SX(0), SY(prev));
    put_text(j, name);
    TP_JSONW_LIT(j, "</title></path>\n");
#undef SX
#undef SY
}

/* The legend of the owners' bands: a swatch, the name, its levels. */
static void put_owner_legend(struct tp_jsonw *j, const struct mem_owner_set *own)
{
    char a[64], b[64];
    TP_JSONW_LIT(j, "<ul class=\"legend\">\n");
    for (int k = 0; k < own->n; k++) {
        const struct mem_owner_line *o = &own->o[k];
        TP_JSONW_LIT(j, "<li class=\"owner\"><span class=\"swatch\" style=\"background:");
        tp_jsonw_lit(j, owner_color(own, k));
        TP_JSONW_LIT(j, "\"></span><span class=\"name\">");
        put_text(j, o->name);
        tp_jsonw_printf(j, "</span> %s at the end, peak %s</li>\n",
                        tp_memory_human(a, sizeof a, o->u->end_bytes), tp_memory_human(b, sizeof b, o->u->peak_bytes));
    }
    TP_JSONW_LIT(j, "</ul>\n");
}

static void put_plot(struct tp_jsonw *j, const struct tp_window *w, const struct mem_state *m,
                     const struct mem_series *s, const struct mem_point *p, size_t n, int64_t len,
                     const struct mem_owner_set *own)
{
    const struct tp_mem_usage *u = s->u;
    uint64_t max = u->peak_bytes;
    for (size_t i = 0; i < n; i++)
        if (p[i].bytes > max)
            max = p[i].bytes;
    /* the owners' bands, when the ledger has them: under the line, in place
     * of its tint (the stack reaches the line when the ledger saw every byte) */
    struct mem_stack st = { 0 };
    if (own && own->n > 0 && tp_memrep_stack(own, len, AREA_W, &st) != 0)
        st.n = 0;
    for (size_t i = 0; i < st.n; i++) {
        uint64_t sum = stack_sum(&st, i, st.k);
        max = sum > max ? sum : max;
    }
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
    for (int k = 0; k < st.k && st.n; k++)
        put_owner_area(j, &st, k, owner_color(own, k), own->o[k].name, xscale, yscale);
    /* the step line, and the area under it (without owners) */
    for (int pass = st.n ? 1 : 0; pass < 2; pass++) {
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
    int64_t pk = tp_memrep_peak_rel(w, u, len, p, n);
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
    if (st.n)
        put_owner_legend(j, own);
    tp_memrep_stack_free(&st);
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
    "svg .axis,svg .tick{stroke:#8c959f;stroke-width:1}\n"
    "ul.legend{list-style:none;padding:0;margin:4px 0 0 72px;font-size:13px}\n"
    "ul.legend li{display:inline-block;margin:0 18px 4px 0;color:#59636e;white-space:nowrap}\n"
    "ul.legend .name{color:#1f2328;font-weight:600}\n"
    ".swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-1px;"
    "opacity:" OWNER_OPACITY "}\n";

static void put_cell(struct tp_jsonw *j, const char *text)
{
    TP_JSONW_LIT(j, "<td>");
    put_text(j, text);
    TP_JSONW_LIT(j, "</td>");
}

void tp_memrep_put_html(struct tp_jsonw *j, struct mem_state *m, const struct tp_window *w,
                        int64_t len, struct mem_point **pts, const size_t *npts,
                        struct mem_point *scratch, const struct mem_owner_set *own)
{
    char buf[64];
    TP_JSONW_LIT(j, "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
                    "<meta charset=\"utf-8\"/>\n<title>Memory · ");
    put_text(j, tp_memrep_trace_name(m->trace));
    TP_JSONW_LIT(j, "</title>\n<style>\n");
    tp_jsonw_lit(j, page_style);
    TP_JSONW_LIT(j, "</style>\n</head>\n<body>\n<h1>Memory held · ");
    put_text(j, tp_memrep_trace_name(m->trace));
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
    int owners = 0;
    for (int i = 0; own && i < m->n; i++)
        owners |= pts[i] && own[i].n > 0;
    if (owners)
        TP_JSONW_LIT(j, "<p class=\"note\">The coloured bands under a line are who held those bytes (the"
                        " memory ledger's owners: a library, the framework's caching allocator, the program),"
                        " stacked, the owner holding the most at the end at the bottom.</p>\n");

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
        put_cell(j, fmt_ms(buf, sizeof buf, (double)tp_memrep_peak_rel(w, u, len, pts[i], npts[i]) / 1e6));
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
            n = tp_memrep_thin(p, n, len, AREA_W, scratch);
            p = scratch;
        }
        put_plot(j, w, m, &m->s[i], p, n, len, own ? &own[i] : NULL);
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
