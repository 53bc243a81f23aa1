/*
 * summary.c - DESIGN: a text report per trace, "<reports>/<trace base>.summary.txt"
 * (README "Outputs": the trace folder holds traces only), followed by its figures for machines,
 * "<trace base>.summary.json" (summary_json.c, same aggregates), in tables laid out like torch's
 * key_averages().table() (table.c writes them; this file decides what they
 * hold): the operator table has torch's operators, its record_function
 * annotations and the steps, with torch's two percentages, and with input
 * shapes a second table by (name, shapes), each cut to its 100 largest rows
 * as torch's row_limit.  The handler's open() and event() are
 * summary_agg.c's, which aggregates the events while they stream; this file is its close(): the
 * file is written then, after chrome has saved the trace, through
 * output.c.  No trace, no summary.  Times are kept in integer ns and
 * printed with integer arithmetic so that the figures add up exactly.
 * Memory comes from the window's tp_mem_usage rows, not from events, and
 * who holds it from the memory ledger's rows (tp_mem_owner_usage, a table
 * per device and class with each owner's call sites under it; what was
 * still held at exit, tp_mem_held).
 * Collectives are keyed by (kind, group size); their bandwidths use the
 * device time of the kernels they issued when CUPTI saw any of them, else the
 * host call durations, labelled host-enqueue based.  close()
 * also fills saved->line, the one line TRAINPROF_LOG=info prints.
 */
#include "summary_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"
#include "memory.h"
#include "output.h"
#include "table.h"

#define CELL TP_TABLE_CELL

/* GFLOP with three decimals, from FLOPs. */
static const char *fmt_gflop(char *buf, size_t n, uint64_t flops)
{
    snprintf(buf, n, "%.3f", (double)flops / 1e9);
    return buf;
}

/* TFLOP/s over "ns", three decimals. */
static const char *fmt_tflops(char *buf, size_t n, uint64_t flops, int64_t ns)
{
    snprintf(buf, n, "%.3f", ns > 0 ? (double)flops / (double)ns / 1e3 : 0.0);
    return buf;
}


static const char *fmt_pct(char *buf, size_t n, int64_t part, int64_t whole)
{
    snprintf(buf, n, "%.1f%%", whole > 0 ? 100.0 * (double)part / (double)whole : 0.0);
    return buf;
}

static void step_cells(const struct summary *s, const struct tp_window *w, const struct step_row *r,
                       char (*c)[CELL])
{
    uint64_t f = tp_summary_step_flops(w, r->index);
    snprintf(c[0], CELL, "%llu", (unsigned long long)r->index);
    tp_fmt3(c[1], CELL, r->dur_ns, 1000000);
    fmt_gflop(c[2], CELL, f);
    fmt_tflops(c[3], CELL, f, r->dur_ns);
    int64_t a, b;
    if (w->gpu && tp_summary_step_span(w, r->index, &a, &b))
        fmt_pct(c[4], CELL, tp_sumagg_busy_within(s, a, b), b - a);
    else
        snprintf(c[4], CELL, "--");
}

/* The per-step table's columns: step and wall time always, FLOPs only
 * where some step counted library FLOPs, GPU busy only with CUPTI. */
enum { STEP_COL_STEP, STEP_COL_WALL, STEP_COL_GFLOP, STEP_COL_TFLOPS, STEP_COL_BUSY, STEP_COLS };

struct step_rows {
    const struct summary *s;
    const struct tp_window *w;
    int col[STEP_COLS];            /* the step_cells column each shown column takes */
};

static void fill_step_row(void *ctx, size_t row, const char **cells, char (*buf)[CELL])
{
    const struct step_rows *x = ctx;
    char all[STEP_COLS][CELL];
    (void)cells;
    step_cells(x->s, x->w, &x->s->steps[row], all);
    for (int i = 0; i < STEP_COLS && x->col[i] >= 0; i++)
        memcpy(buf[i], all[x->col[i]], CELL);
}

static void put_steps(struct tp_jsonw *j, struct summary *s, const struct tp_window *w)
{
    static const char *const all_titles[STEP_COLS] = { "Step", "Wall (ms)", "GFLOP", "TFLOP/s",
                                                       "GPU busy" };
    tp_jsonw_lit(j, "\nPer-step wall time\n");
    if (!s->nsteps) {
        tp_jsonw_lit(j, "(no step recorded)\n");
        return;
    }
    qsort(s->steps, s->nsteps, sizeof *s->steps, tp_summary_cmp_step);
    char a[CELL], b[CELL];
    int64_t sum = 0, busy = 0;
    uint64_t flops = 0;
    tp_sumagg_merge_busy(s);
    for (size_t i = 0; i < s->nsteps; i++) {
        sum += s->steps[i].dur_ns;
        flops += tp_summary_step_flops(w, s->steps[i].index);
        int64_t lo, hi;
        if (w->gpu && tp_summary_step_span(w, s->steps[i].index, &lo, &hi))
            busy += tp_sumagg_busy_within(s, lo, hi);
    }
    /* no column of zeros: a step without library FLOPs has no FLOPs to show
     * (a CPU job, or GPU work without cuBLAS/cuDNN), not 0.000 TFLOP/s */
    struct step_rows x = { s, w, { 0 } };
    const char *titles[STEP_COLS];
    int n = 0;
    for (int c = 0; c < STEP_COLS; c++) {
        if (((c == STEP_COL_GFLOP || c == STEP_COL_TFLOPS) && !flops) || (c == STEP_COL_BUSY && !w->gpu))
            continue;
        titles[n] = all_titles[c];
        x.col[n++] = c;
    }
    for (int c = n; c < STEP_COLS; c++)
        x.col[c] = -1;
    tp_table_write(j, titles, n, s->nsteps, fill_step_row, &x);
    if (w->gpu)
        tp_jsonw_printf(j, "GPU busy share of the steps: %s (kernels, copies and sets on any stream)\n",
                        fmt_pct(a, sizeof a, busy, sum));
    tp_jsonw_printf(j, "Mean step wall time (ms): %s over %zu steps\n",
                    tp_fmt3(a, sizeof a, sum / (int64_t)s->nsteps, 1000000), s->nsteps);
    if (!flops) {
        tp_jsonw_lit(j, "Library FLOPs: none in these steps (counted from cuBLAS, cuBLASLt and cuDNN"
                        " calls only)\n");
        return;
    }
    tp_jsonw_printf(j, "Library FLOPs in these steps: %s GFLOP, achieved %s TFLOP/s\n",
                    fmt_gflop(a, sizeof a, flops), fmt_tflops(b, sizeof b, flops, sum));
    if (w->peak_tflops > 0) {
        double tf = sum > 0 ? (double)flops / (double)sum / 1e3 : 0;
        tp_jsonw_printf(j, "Library FLOP utilisation (MFU-like): %.2f%% of %.1f TFLOP/s (TRAINPROF_PEAK_TFLOPS);"
                           " counts cuBLAS/cuDNN work only, recompute included\n",
                        100.0 * tf / w->peak_tflops, w->peak_tflops);
    } else {
        tp_jsonw_lit(j, "Library FLOP utilisation (MFU-like): set TRAINPROF_PEAK_TFLOPS to the GPU's dense peak\n");
    }
}

/* Fills the cells of aggregate row "a" after the name (cells[1..]). */
typedef void (*row_fn)(const struct summary *s, const struct agg *a, char (*cells)[CELL]);

struct agg_rows {
    const struct summary *s;
    struct agg **v;
    row_fn fill;
};

static void fill_agg_row(void *ctx, size_t row, const char **cells, char (*buf)[CELL])
{
    const struct agg_rows *x = ctx;
    x->fill(x->s, x->v[row], buf);
    cells[0] = x->v[row]->name;
}

/*
 * put_agg_table - "heading", then the rows of "at" tp_summary_sorted by "cmp" in columns
 * aligned like key_averages().table().  Returns 0, or -1 after writing
 * "empty" when there is no row.
 */
static int put_agg_table(struct tp_jsonw *j, const struct summary *s, const char *heading,
                         const char *empty, const struct agg_table *at,
                         int (*cmp)(const void *, const void *), const char *const *titles,
                         int ncols, row_fn fill)
{
    tp_jsonw_lit(j, heading);
    struct agg **v = tp_summary_sorted(at, cmp);
    if (!v) {
        tp_jsonw_lit(j, empty);
        return -1;
    }
    struct agg_rows x = { s, v, fill };
    tp_table_write(j, titles, ncols, at->n, fill_agg_row, &x);
    free(v);
    return 0;
}

static void api_row(const struct summary *s, const struct agg *a, char (*c)[CELL])
{
    snprintf(c[1], CELL, "%llu", (unsigned long long)a->calls);
    tp_fmt3(c[2], CELL, a->total_ns, 1000000);
    tp_fmt3(c[3], CELL, a->total_ns / (int64_t)a->calls, 1000);
    tp_fmt3(c[4], CELL, a->max_ns, 1000);
    int64_t pct = s->host_ns > 0 ? (a->total_ns * 10000 + s->host_ns / 2) / s->host_ns : 0;
    snprintf(c[5], CELL, "%lld.%02lld%%", (long long)(pct / 100), (long long)(pct % 100));
}

/* Sections with no row are left out (a CPU job has no API call or launch),
 * as the operator and library tables are. */
static void put_apis(struct tp_jsonw *j, struct summary *s)
{
    static const char *const titles[] = { "Name", "Calls", "Total (ms)", "Mean (us)", "Max (us)", "% Host" };
    char buf[CELL];
    if (!s->apis.n)
        return;
    if (put_agg_table(j, s, "\nHost API calls\n", "", &s->apis, tp_summary_cmp_total,
                      titles, 6, api_row) == 0)
        tp_jsonw_printf(j, "Host API time total (ms): %s\n", tp_fmt3(buf, sizeof buf, s->host_ns, 1000000));
}

static void lib_row(const struct summary *s, const struct agg *a, char (*c)[CELL])
{
    snprintf(c[1], CELL, "%llu", (unsigned long long)a->calls);
    tp_fmt3(c[2], CELL, a->total_ns, 1000000);
    tp_fmt3(c[3], CELL, a->total_ns / (int64_t)a->calls, 1000);
    if (a->flops) {
        fmt_gflop(c[4], CELL, a->flops);
        snprintf(c[5], CELL, "%.2f%%", s->lib_flops ? 100.0 * (double)a->flops / (double)s->lib_flops : 0.0);
    } else {
        snprintf(c[4], CELL, "--");
        snprintf(c[5], CELL, "--");
    }
}

/* "part" as a percentage of "whole" with two decimals, rounded, integer
 * arithmetic (torch's table prints its percentages with two). */
static const char *fmt_pct2(char *buf, size_t n, int64_t part, int64_t whole)
{
    int64_t p = whole > 0 ? (part * 10000 + whole / 2) / whole : 0;
    snprintf(buf, n, "%lld.%02lld%%", (long long)(p / 100), (long long)(p % 100));
    return buf;
}

/* Rows of the operator tables shown at most, as key_averages().table()'s
 * row_limit (100): the rest are counted under the table. */
enum { OPS_TEXT_ROWS = 100 };

struct op_rows {
    const struct summary *s;
    struct agg **v;
    int gpu, by_shape;
    char name[TP_TABLE_NAME_MAX + 8];   /* a by-shape row's name: enough to be cut as a name */
};

static void fill_op_row(void *ctx, size_t row, const char **cells, char (*c)[CELL])
{
    struct op_rows *x = ctx;
    const struct agg *a = x->v[row];
    int64_t all = x->s->ops_self_ns;
    int k = 1;
    snprintf(c[k++], CELL, "%llu", (unsigned long long)a->calls);
    tp_fmt3(c[k++], CELL, a->total_ns, 1000000);
    fmt_pct2(c[k++], CELL, a->total_ns, all);
    tp_fmt3(c[k++], CELL, a->self_ns, 1000000);
    fmt_pct2(c[k++], CELL, a->self_ns, all);
    tp_fmt3(c[k++], CELL, a->calls ? a->total_ns / (int64_t)a->calls : 0, 1000);
    if (x->gpu)
        tp_fmt3(c[k++], CELL, a->gpu_ns, 1000000);
    cells[0] = a->name;
    if (x->by_shape) {
        size_t n;
        cells[k] = tp_summary_shape_split(a->name, &n);
        if (n > sizeof x->name - 1)
            n = sizeof x->name - 1;
        memcpy(x->name, a->name, n);
        x->name[n] = 0;
        cells[0] = x->name;
    }
}

/* One operator table: the OPS_TEXT_ROWS largest rows of "t" by host total. */
static void put_op_table(struct tp_jsonw *j, struct summary *s, const struct tp_window *w,
                         const char *heading, const struct agg_table *t, int by_shape)
{
    const char *titles[TP_TABLE_COLS] = { "Name", "Calls", "Host total (ms)", "Host total %",
                                          "Self host (ms)", "Self host %", "Mean (us)" };
    int n = 7;
    if (w->gpu)
        titles[n++] = "GPU (ms)";
    if (by_shape)
        titles[n++] = "Input Shapes";
    struct agg **v = tp_summary_sorted(t, tp_summary_cmp_total);
    if (!v)
        return;
    struct op_rows *x = calloc(1, sizeof *x);
    if (!x) {
        free(v);
        return;
    }
    *x = (struct op_rows){ .s = s, .v = v, .gpu = w->gpu, .by_shape = by_shape };
    size_t rows = t->n < OPS_TEXT_ROWS ? t->n : OPS_TEXT_ROWS;
    tp_jsonw_lit(j, heading);
    tp_table_write_left(j, titles, n, by_shape ? 1u | 1u << (n - 1) : 1u, rows, fill_op_row, x);
    if (t->n > rows)
        tp_jsonw_printf(j, "%zu more rows left out (the %d with the most host total time are shown)\n",
                        t->n - rows, OPS_TEXT_ROWS);
    free(x);
    free(v);
}

/* torch's operators (cpu_op), its record_function annotations
 * (Optimizer.step#AdamW.step, a user's record_function) and the steps, like
 * key_averages().table(): host time with and without the operators they
 * called, each as a share of the self host time of all rows (which adds up
 * to the host time of the threads that ran them, steps included), and the
 * device time of the work they launched when CUPTI ran.  With input shapes
 * (TRAINPROF_RECORD_SHAPES=1), again by (name, input shapes), as
 * key_averages(group_by_input_shape=True). */
static void put_ops(struct tp_jsonw *j, struct summary *s, const struct tp_window *w)
{
    char buf[CELL];
    tp_sumagg_finish_ops(s);
    if (!s->ops.n)
        return;
    put_op_table(j, s, w, "\nOperators (PyTorch)\n", &s->ops, 0);
    tp_jsonw_printf(j, "Host total %% and Self host %%: shares of the self host time of all rows, %s ms"
                       " (torch's CPU total %% and Self CPU %%)",
                    tp_fmt3(buf, sizeof buf, s->ops_self_ns, 1000000));
    if (s->nsteps)
        tp_jsonw_printf(j, "; %s: the %zu steps, self the time outside any top-level operator or"
                           " annotation", TP_SUMMARY_STEP_ROW, s->nsteps);
    tp_jsonw_lit(j, "\n");
    if (s->ops_with_shapes)
        put_op_table(j, s, w, "\nOperators by input shape\n", &s->op_shapes, 1);
}

static void put_libs(struct tp_jsonw *j, struct summary *s)
{
    static const char *const titles[] = { "Name", "Calls", "Total (ms)", "Mean (us)", "GFLOP", "% FLOPs" };
    char buf[CELL];
    if (!s->libs.n && !s->graph_flops)
        return;
    if (put_agg_table(j, s, "\nLibrary calls (cuBLAS, cuBLASLt, cuDNN, NCCL)\n", "", &s->libs, tp_summary_cmp_total,
                      titles, 6, lib_row) == 0)
        tp_jsonw_printf(j, "Library FLOPs total: %s GFLOP\n", fmt_gflop(buf, sizeof buf, s->lib_flops));
    if (s->graph_flops)
        tp_jsonw_printf(j, "Library FLOPs run by CUDA graph launches: %s GFLOP"
                           " (captured calls count at each launch)\n",
                        fmt_gflop(buf, sizeof buf, s->graph_flops));
}

static void kernel_row(const struct summary *s, const struct agg *a, char (*c)[CELL])
{
    (void)s;
    snprintf(c[1], CELL, "%llu", (unsigned long long)a->calls);
}

static void put_kernels(struct tp_jsonw *j, struct summary *s)
{
    static const char *const titles[] = { "Kernel", "Launches" };
    if (!s->kernels.n)
        return;
    if (put_agg_table(j, s, "\nKernels launched\n", "", &s->kernels, tp_summary_cmp_calls,
                      titles, 2, kernel_row) == 0)
        tp_jsonw_printf(j, "Launches total: %llu\n", (unsigned long long)s->launches);
}

static void gpu_row(const struct summary *s, const struct agg *a, char (*c)[CELL])
{
    snprintf(c[1], CELL, "%llu", (unsigned long long)a->calls);
    tp_fmt3(c[2], CELL, a->total_ns, 1000000);
    tp_fmt3(c[3], CELL, a->total_ns / (int64_t)a->calls, 1000);
    tp_fmt3(c[4], CELL, a->max_ns, 1000);
    fmt_pct(c[5], CELL, a->total_ns, s->gpu_ns);
}

/* GPU time per kernel (and copy/set), then what the wrappers saw of it. */
static void put_gpu(struct tp_jsonw *j, struct summary *s, const struct tp_window *w)
{
    static const char *const titles[] = { "Device work", "Count", "GPU total (ms)", "Mean (us)",
                                          "Max (us)", "% GPU" };
    char buf[CELL];
    tp_jsonw_printf(j, "\nGPU activity: %s\n", w->gpu_status ? w->gpu_status : "off");
    if (!w->gpu)
        return;
    if (put_agg_table(j, s, "", "(no device work recorded)\n", &s->gpu, tp_summary_cmp_total, titles, 6, gpu_row) == 0)
        tp_jsonw_printf(j, "GPU time total (ms): %s\n", tp_fmt3(buf, sizeof buf, s->gpu_ns, 1000000));
    tp_jsonw_printf(j, "Coverage: %llu kernels seen by CUPTI, %llu linked to a launch seen by the wrappers (%s);"
                       " %llu launches seen by the wrappers\n",
                    (unsigned long long)w->gpu_kernels, (unsigned long long)w->gpu_kernels_linked,
                    w->coverage >= 0 ? fmt_pct(buf, sizeof buf, (int64_t)w->gpu_kernels_linked,
                                               (int64_t)w->gpu_kernels) : "n/a",
                    (unsigned long long)w->host_launches);
    if (w->gpu_dropped)
        tp_jsonw_printf(j, "Device records dropped: %llu (CUPTI buffers full)\n",
                        (unsigned long long)w->gpu_dropped);
}

/* Memory held per (device, class) in the window, omitted without data. */
static void put_memory(struct tp_jsonw *j, const struct summary *s, const struct tp_window *w)
{
    static const char *const titles[] = { "Memory", "Start", "Peak", "Peak at (ms)", "End",
                                          "Process peak", "Allocs", "Frees", "Failed",
                                          "Largest failed" };
    enum { NC = 10 };
    size_t rows = 0;
    for (int i = 0; i < w->n_mem; i++)
        rows += (size_t)tp_summary_mem_has_data(&w->mem[i]);
    if (!w->mem || !rows)
        return;
    char (*c)[CELL] = calloc(rows * NC, CELL);
    if (!c)
        return;
    size_t k = 0;
    for (int i = 0; i < w->n_mem; i++) {
        const struct tp_mem_usage *u = &w->mem[i];
        if (!tp_summary_mem_has_data(u))
            continue;
        char (*r)[CELL] = c + k++ * NC;
        int64_t at = (s->n_mem == w->n_mem && s->peak_at[i] ? s->peak_at[i] : u->peak_ns) - w->start_ns;
        tp_memory_where(r[0], CELL, u->device, u->mclass);
        tp_memory_human(r[1], CELL, u->start_bytes);
        tp_memory_human(r[2], CELL, u->peak_bytes);
        tp_fmt3(r[3], CELL, at > 0 ? at : 0, 1000000);
        tp_memory_human(r[4], CELL, u->end_bytes);
        tp_memory_human(r[5], CELL, u->peak_process);
        snprintf(r[6], CELL, "%llu", (unsigned long long)u->allocs);
        snprintf(r[7], CELL, "%llu", (unsigned long long)u->frees);
        snprintf(r[8], CELL, "%llu", (unsigned long long)u->failed);
        if (u->failed)
            tp_memory_human(r[9], CELL, u->failed_bytes);
        else
            snprintf(r[9], CELL, "--");
    }
    tp_jsonw_lit(j, "\nMemory held (reserved from CUDA)\n");
    tp_table_cells(j, titles, NC, c, rows);
    tp_jsonw_lit(j, "Bytes the process reserved from CUDA (cudaMalloc/VMM level), not a caching allocator's"
                    " allocated bytes: compare with torch.cuda.memory_reserved(), not memory_allocated()\n");
    free(c);
}

/* "GPU 0", "GPU 0 managed", "host pinned": a (device, class) in the owner
 * tables' headings. */
static const char *owner_where(char *buf, size_t n, int device, unsigned mclass)
{
    if (mclass == TP_MEM_HOST || device < 0)
        snprintf(buf, n, "host pinned");
    else if (mclass == TP_MEM_MANAGED)
        snprintf(buf, n, "GPU %d managed", device);
    else
        snprintf(buf, n, "GPU %d", device);
    return buf;
}

/* An owner row with nothing to show: held nothing, did nothing. */
static int owner_row_empty(const struct tp_mem_owner_usage *o)
{
    return !o->start_bytes && !o->end_bytes && !o->peak_bytes && !o->allocs && !o->frees;
}

static const char *owner_name(const struct tp_window *w, unsigned owner)
{
    return owner < (unsigned)w->n_mem_owner_names && w->mem_owner_names[owner]
               ? w->mem_owner_names[owner] : "unknown";
}

/* A row of an owner table: row "owner" of w->mem_owners, or its call site
 * "site" (>= 0). */
struct owner_line {
    int owner, site;
};

struct owner_lines {
    const struct tp_window *w;
    const struct owner_line *v;
    char name[TP_TABLE_NAME_MAX + 8];  /* a call site indented (the table cuts it) */
};

static void fill_owner_row(void *ctx, size_t row, const char **cells, char (*buf)[CELL])
{
    struct owner_lines *x = ctx;
    const struct owner_line *l = &x->v[row];
    const struct tp_mem_owner_usage *o = &x->w->mem_owners[l->owner];
    if (l->site < 0) {
        cells[0] = owner_name(x->w, o->owner);
        tp_memory_human(buf[1], CELL, o->end_bytes);
        tp_memory_human(buf[2], CELL, o->peak_bytes);
        snprintf(buf[3], CELL, "%llu", (unsigned long long)o->allocs);
        snprintf(buf[4], CELL, "%llu", (unsigned long long)o->frees);
        return;
    }
    const struct tp_mem_site_usage *st = &o->sites[l->site];
    snprintf(x->name, sizeof x->name, "  %s", st->site && st->site[0] ? st->site : "(call site unknown)");
    cells[0] = x->name;
    tp_memory_human(buf[1], CELL, st->live_bytes);
    buf[2][0] = '\0';
    snprintf(buf[3], CELL, "%llu", (unsigned long long)st->allocs);
    buf[4][0] = '\0';
}

/* One table of the memory ledger's owners of (device, class), the rows of
 * w->mem_owners from "first" on that share it, in their order (most held
 * at the end first), each owner's call sites indented under it. */
static void put_owner_table(struct tp_jsonw *j, const struct tp_window *w, int first)
{
    static const char *const titles[] = { "Owner / call site", "Held at end", "Peak", "Allocs", "Frees" };
    const struct tp_mem_owner_usage *f = &w->mem_owners[first];
    size_t rows = 0;
    for (int i = first; i < w->n_mem_owners; i++) {
        const struct tp_mem_owner_usage *o = &w->mem_owners[i];
        if (o->device == f->device && o->mclass == f->mclass && !owner_row_empty(o))
            rows += 1 + (size_t)(o->sites && o->n_sites > 0 ? o->n_sites : 0);
    }
    if (!rows)
        return;
    struct owner_line *v = calloc(rows, sizeof *v);
    if (!v)
        return;
    size_t k = 0;
    for (int i = first; i < w->n_mem_owners; i++) {
        const struct tp_mem_owner_usage *o = &w->mem_owners[i];
        if (o->device != f->device || o->mclass != f->mclass || owner_row_empty(o))
            continue;
        v[k++] = (struct owner_line){ i, -1 };
        for (int x = 0; o->sites && x < o->n_sites; x++)
            v[k++] = (struct owner_line){ i, x };
    }
    char where[64];
    tp_jsonw_printf(j, "\nMemory by owner (%s)\n", owner_where(where, sizeof where, f->device, f->mclass));
    struct owner_lines x = { .w = w, .v = v };
    tp_table_write(j, titles, 5, rows, fill_owner_row, &x);
    free(v);
}

struct held_rows {
    const struct tp_window *w;
};

static void fill_held_row(void *ctx, size_t row, const char **cells, char (*buf)[CELL])
{
    const struct tp_window *w = ((const struct held_rows *)ctx)->w;
    const struct tp_mem_held *h = &w->mem_held[row];
    cells[0] = owner_name(w, h->owner);
    tp_memory_where(buf[1], CELL, h->device, h->mclass);
    tp_memory_human(buf[2], CELL, h->bytes);
    snprintf(buf[3], CELL, "%llu", (unsigned long long)h->blocks);
}

/* The memory ledger: who held the memory of each (device, class), how much
 * of it the ledger could name, and what was never freed (the window
 * written at exit).  Nothing without the ledger's rows. */
static void put_memory_owners(struct tp_jsonw *j, const struct tp_window *w)
{
    int tables = 0;
    for (int i = 0; w->mem_owners && i < w->n_mem_owners; i++) {
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = w->mem_owners[k].device == w->mem_owners[i].device &&
                   w->mem_owners[k].mclass == w->mem_owners[i].mclass;
        if (!seen) {
            put_owner_table(j, w, i);
            tables = 1;
        }
    }
    if (tables && w->mem_coverage >= 0)
        tp_jsonw_printf(j, "Owner named for %.1f %% of the bytes allocated through intercepted calls"
                           " since activation\n", 100.0 * w->mem_coverage);
    if (tables && !w->mem_owners_exact)
        tp_jsonw_lit(j, "These owner tables are the ledger's best account: records were lost, or the"
                        " window's starting levels were no longer kept\n");
    if (!w->mem_held || w->n_mem_held <= 0)
        return;
    static const char *const titles[] = { "Owner", "Memory", "Bytes", "Blocks" };
    struct held_rows x = { w };
    tp_jsonw_lit(j, "\nMemory held at exit\n");
    tp_table_write_left(j, titles, 4, 3u, (size_t)w->n_mem_held, fill_held_row, &x);
}

/* Collectives: calls, bytes, time, algorithm and bus bandwidth as nccl-tests.
 * With device time, a row whose calls issued no kernel that CUPTI saw (the
 * kernel ran in a graph, or the call only queued work in a group) falls back
 * to its host durations and says so in its Basis column. */
static void put_colls(struct tp_jsonw *j, struct summary *s, const struct tp_window *w)
{
    static const char *const titles[] = { "Collective", "Ranks", "Calls", "Size (MB)", "Time (ms)",
                                          "Mean (us)", "algbw (GB/s)", "busbw (GB/s)", "Basis" };
    enum { NC = 9 };
    if (!s->ncoll && !s->coll_captured)
        return;
    int dev = tp_summary_coll_device(s, w), mixed = 0;
    for (size_t i = 0; dev && i < s->ncoll; i++)
        mixed |= s->coll[i].dev_ns <= 0;
    tp_jsonw_printf(j, "\nCollectives (NCCL); time: %s\n",
                    !dev ? "host call durations, host-enqueue based (no device time: bandwidths"
                           " are upper bounds, not transfer rates)"
                    : mixed ? "device (kernel) time of the kernels each call issued; host-enqueue"
                              " based where no kernel was seen (Basis)"
                            : "device (kernel) time of the kernels each call issued");
    char (*c)[CELL] = s->ncoll ? calloc(s->ncoll * NC, CELL) : NULL;
    if (c) {
        qsort(s->coll, s->ncoll, sizeof *s->coll, tp_summary_cmp_coll);
        for (size_t i = 0; i < s->ncoll; i++) {
            const struct coll_row *x = &s->coll[i];
            char (*r)[CELL] = c + i * NC;
            int on_dev = dev && x->dev_ns > 0;
            int64_t t = on_dev ? x->dev_ns : x->host_ns;
            snprintf(r[0], CELL, "%s", tp_coll_name(x->op));
            snprintf(r[1], CELL, "%u", x->ranks);
            snprintf(r[2], CELL, "%llu", (unsigned long long)x->calls);
            snprintf(r[3], CELL, "%.3f", x->size / 1e6);
            tp_fmt3(r[4], CELL, t, 1000000);
            tp_fmt3(r[5], CELL, t / (int64_t)x->calls, 1000);
            if (t > 0) {
                snprintf(r[6], CELL, "%.2f", x->size / (double)t);
                snprintf(r[7], CELL, "%.2f", x->bus / (double)t);
            } else {
                snprintf(r[6], CELL, "--");
                snprintf(r[7], CELL, "--");
            }
            snprintf(r[8], CELL, "%s", on_dev ? "device" : "host-enqueue");
        }
        tp_table_cells(j, titles, NC, c, s->ncoll);
        free(c);
    }
    tp_jsonw_lit(j, "busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for allgather, reduce_scatter,"
                    " all_to_all, gather and scatter, 1 otherwise (nccl-tests)\n");
    if (s->coll_captured)
        tp_jsonw_printf(j, "Collective calls captured into CUDA graphs (not counted above): %llu\n",
                        (unsigned long long)s->coll_captured);
}

/* Appends ", part" (or "part" first) to the line if it fits whole. */
static void line_add(char *line, size_t n, const char *part)
{
    size_t len = strlen(line);
    size_t need = strlen(part) + (len ? 2 : 0);
    if (len + need + 1 > n)
        return;
    snprintf(line + len, n - len, "%s%s", len ? ", " : "", part);
}

/* saved->line: the figures of this report in one line (TRAINPROF_LOG=info). */
static void fill_line(struct summary *s, const struct tp_window *w, struct tp_saved *saved)
{
    char *line = saved->line;
    size_t n = sizeof saved->line;
    char part[128], h[CELL];
    line[0] = '\0';
    int64_t sum = 0, busy = 0;
    uint64_t flops = 0;
    tp_sumagg_merge_busy(s);
    for (size_t i = 0; i < s->nsteps; i++) {
        int64_t lo, hi;
        sum += s->steps[i].dur_ns;
        flops += tp_summary_step_flops(w, s->steps[i].index);
        if (w->gpu && tp_summary_step_span(w, s->steps[i].index, &lo, &hi))
            busy += tp_sumagg_busy_within(s, lo, hi);
    }
    if (s->nsteps) {
        char ms[CELL];
        tp_fmt3(ms, sizeof ms, sum / (int64_t)s->nsteps, 1000000);
        if (w->last_step > w->first_step)
            snprintf(part, sizeof part, "steps %llu-%llu: %s ms/step", (unsigned long long)w->first_step,
                     (unsigned long long)w->last_step, ms);
        else
            snprintf(part, sizeof part, "step %llu: %s ms/step", (unsigned long long)s->steps[0].index, ms);
        line_add(line, n, part);
        if (flops && sum > 0) {
            double tf = (double)flops / (double)sum / 1e3;
            snprintf(part, sizeof part, "%.1f TFLOP/s", tf);
            line_add(line, n, part);
            if (w->peak_tflops > 0) {
                snprintf(part, sizeof part, "MFU-like %.0f%% (peak %.0f)", 100.0 * tf / w->peak_tflops,
                         w->peak_tflops);
                line_add(line, n, part);
            }
        }
        if (w->gpu && sum > 0) {
            snprintf(part, sizeof part, "GPU busy %.0f%%", 100.0 * (double)busy / (double)sum);
            line_add(line, n, part);
        }
    }
    for (int i = 0; w->mem && i < w->n_mem; i++) {
        const struct tp_mem_usage *u = &w->mem[i];
        if (u->mclass != TP_MEM_DEVICE || u->device < 0 || !u->peak_bytes)
            continue;
        snprintf(part, sizeof part, "mem peak GPU%d %s", u->device, tp_memory_human(h, sizeof h, u->peak_bytes));
        line_add(line, n, part);
    }
}

static void put_header(struct tp_jsonw *j, const struct tp_window *w, const char *trace)
{
    const char *slash = strrchr(trace, '/');
    char buf[CELL];
    tp_jsonw_printf(j, "trainprof summary of %s\n\n", slash ? slash + 1 : trace);
    tp_jsonw_printf(j, "Run:          %s\n", w->run_name ? w->run_name : "");
    tp_jsonw_printf(j, "Program:      %s (pid %d) on %s\n", w->program ? w->program : "",
                    (int)w->pid, w->hostname ? w->hostname : "");
    tp_jsonw_printf(j, "Rank:         %d of %d (local rank %d)\n", w->rank, w->world_size,
                    w->local_rank);
    if (w->last_step >= w->first_step)
        tp_jsonw_printf(j, "Steps:        %llu..%llu (%llu recorded), batch %llu\n",
                        (unsigned long long)w->first_step, (unsigned long long)w->last_step,
                        (unsigned long long)(w->last_step - w->first_step + 1),
                        (unsigned long long)w->batch);
    else
        tp_jsonw_printf(j, "Steps:        none recorded, batch %llu\n", (unsigned long long)w->batch);
    tp_jsonw_printf(j, "Step signal:  %s\n",
                    w->step_signal && w->step_signal[0] ? w->step_signal : "(none fired)");
    tp_jsonw_printf(j, "Window (ms):  %s wall time%s%s%s\n",
                    tp_fmt3(buf, sizeof buf, w->end_ns > w->start_ns ? w->end_ns - w->start_ns : 0, 1000000),
                    w->partial ? ", partial (cut short by " : "",
                    w->partial ? (w->partial_reason ? w->partial_reason : "exit or a signal") : "",
                    w->partial ? ")" : "");
    if (w->flight_reason && w->flight_threshold_ns)
        tp_jsonw_printf(j, "Flight:       dumped for %s: step %llu took %.1f ms, the median %.1f ms, "
                        "threshold %.1f ms\n", w->flight_reason, (unsigned long long)w->flight_step,
                        (double)w->flight_step_ns / 1e6, (double)w->flight_median_ns / 1e6,
                        (double)w->flight_threshold_ns / 1e6);
    else if (w->flight_reason)
        tp_jsonw_printf(j, "Flight:       dumped for %s in step %llu (the step under way last)\n",
                        w->flight_reason, (unsigned long long)w->flight_step);
    if (w->ops_lost_why && w->ops_lost_steps)
        tp_jsonw_printf(j, "Operators:    none in steps %llu..%llu: %s\n",
                        (unsigned long long)w->ops_lost_first,
                        (unsigned long long)w->ops_lost_last, w->ops_lost_why);
    else if (w->ops_lost_why)
        tp_jsonw_printf(j, "Operators:    missing in part of the window: %s\n", w->ops_lost_why);
    tp_jsonw_printf(j, "Trace:        %s\n", trace);
}


static int summary_close(void *state, const struct tp_window *w, struct tp_saved *saved)
{
    struct summary *s = state;
    fill_line(s, w, saved);
    if (!saved->trace[0]) {
        tp_sumagg_free(s);
        return 0;
    }
    struct tp_output out;
    if (tp_output_open_report(&out, w->reports_folder, saved->trace, "summary.txt", w->overwrite,
                              "summary") != 0) {
        tp_sumagg_free(s);
        return -1;
    }
    struct tp_jsonw j;
    if (tp_jsonw_init(&j, out.fd, 0, 0) == 0) {
        put_header(&j, w, saved->trace);
        put_steps(&j, s, w);
        put_ops(&j, s, w);
        put_libs(&j, s);
        put_apis(&j, s);
        put_kernels(&j, s);
        put_gpu(&j, s, w);
        put_memory(&j, s, w);
        put_memory_owners(&j, w);
        put_colls(&j, s, w);
        tp_jsonw_printf(&j, "\nEvents: %llu records, %llu dropped, %llu late\n",
                        (unsigned long long)w->records, (unsigned long long)w->dropped,
                        (unsigned long long)w->late);
        if (w->dropped)
            tp_jsonw_lit(&j, "Some events were dropped (buffer full): raise TRAINPROF_BUFFER_MB.\n");
        if (w->names_lost)
            tp_jsonw_printf(&j, "Names lost: %llu events read <name table full> (the name table "
                            "holds 2^20 names and a quarter of TRAINPROF_BUFFER_MB).\n",
                            (unsigned long long)w->names_lost);
        if (w->ranges_lost)
            tp_jsonw_printf(&j, "Ranges lost: %llu (nested deeper than 128 on a thread, or "
                            "start/end ranges not ended within 4096 starts).\n",
                            (unsigned long long)w->ranges_lost);
        if (w->unmatched_pops)
            tp_jsonw_printf(&j, "Range pops with no open range: %llu (ignored).\n",
                            (unsigned long long)w->unmatched_pops);
        if (s->oom)
            tp_jsonw_lit(&j, "Out of memory while summarising: the tables above are incomplete.\n");
    }
    int err = tp_jsonw_finish(&j);
    int rc = tp_output_report_done(&out, err, saved);
    if (tp_summary_json_write(s, w, saved) != 0)
        rc = -1;
    tp_sumagg_free(s);
    return rc;
}

const struct tp_handler tp_handler_summary = {
    .name = "summary",
    .open = tp_sumagg_open,
    .event = tp_sumagg_event,
    .close = summary_close,
};
