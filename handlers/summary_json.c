/*
 * summary_json.c - DESIGN: the summary for machines,
 * "<reports>/<trace base>.summary.json": the figures of the text
 * report (summary.c) from the same aggregates, in a versioned schema
 * (TP_SUMMARY_SCHEMA, documented in README.md "summary.json") that
 * `trainprof summary` reads to analyse a whole job without opening its
 * traces.  A few KiB per window whatever the window's size: the name tables
 * are cut to their TOP largest rows (with the count and total of all rows
 * beside them) and names to NAME_KEEP bytes, so that 4,096 ranks' files read
 * in seconds.  Streamed through jsonw.c like the trace, one
 * key or row per line; times are integer ns (exact, like the text report's
 * sums), Unix ns for instants; a figure that does not apply is null, never
 * a made-up 0.
 */
#include "summary_impl.h"

#include <stdlib.h>
#include <string.h>

#include "collector/contract/vocab.h"
#include "jsonw.h"
#include "memory.h"
#include "output.h"

#define LIT TP_JSONW_LIT

enum {
    TOP = 20,            /* rows kept of the kernel and operator tables */
    TOP_SMALL = 10,      /* of the library and host API tables */
    NAME_KEEP = 256,      /* bytes of a name kept ("..." appended when cut) */
};

static void key(struct tp_jsonw *j, int *first, const char *k)
{
    tp_jsonw_lit(j, *first ? "" : ", ");
    *first = 0;
    tp_jsonw_char(j, '"');
    tp_jsonw_lit(j, k);
    LIT(j, "\": ");
}

/* A name, cut to NAME_KEEP bytes (the writer replaces a split UTF-8 sequence). */
static void put_name(struct tp_jsonw *j, const char *s)
{
    size_t n = strlen(s);
    if (n <= NAME_KEEP) {
        tp_jsonw_str(j, s);
        return;
    }
    tp_jsonw_char(j, '"');
    tp_jsonw_strbody(j, s, NAME_KEEP);
    LIT(j, "...\"");
}

static void put_ratio(struct tp_jsonw *j, int64_t part, int64_t whole)
{
    if (whole > 0)
        tp_jsonw_double(j, (double)part / (double)whole);
    else
        LIT(j, "null");
}

static void put_bool(struct tp_jsonw *j, int v)
{
    tp_jsonw_lit(j, v ? "true" : "false");
}

static void put_str_or_null(struct tp_jsonw *j, const char *s)
{
    if (s)
        tp_jsonw_str(j, s);
    else
        LIT(j, "null");
}

static void put_identity(struct tp_jsonw *j, const struct tp_window *w, const char *trace)
{
    const char *slash = strrchr(trace, '/');
    LIT(j, "{\n  \"schema\": \"" TP_SUMMARY_SCHEMA "\",\n  \"trace\": ");
    tp_jsonw_str(j, slash ? slash + 1 : trace);
    LIT(j, ",\n  \"run\": ");
    tp_jsonw_str(j, w->run_name ? w->run_name : "");
    LIT(j, ", \"rank\": ");
    tp_jsonw_i64(j, w->rank);
    LIT(j, ", \"local_rank\": ");
    tp_jsonw_i64(j, w->local_rank);
    LIT(j, ", \"world_size\": ");
    tp_jsonw_i64(j, w->world_size);
    LIT(j, ", \"local_world_size\": ");
    tp_jsonw_i64(j, w->local_world_size);
    LIT(j, ", \"node_rank\": ");
    tp_jsonw_i64(j, w->node_rank);
    LIT(j, ",\n  \"host\": ");
    tp_jsonw_str(j, w->hostname ? w->hostname : "");
    LIT(j, ", \"pid\": ");
    tp_jsonw_i64(j, w->pid);
    LIT(j, ", \"program\": ");
    tp_jsonw_str(j, w->program ? w->program : "");
    LIT(j, ",\n  \"window\": {\"batch\": ");
    tp_jsonw_u64(j, w->batch);
    int have = w->steps_recorded > 0 && w->last_step >= w->first_step;
    LIT(j, ", \"first_step\": ");
    tp_jsonw_u64_or_null(j, have, w->first_step);
    LIT(j, ", \"last_step\": ");
    tp_jsonw_u64_or_null(j, have, w->last_step);
    LIT(j, ", \"steps_recorded\": ");
    tp_jsonw_u64(j, w->steps_recorded);
    LIT(j, ", \"step_signal\": ");
    tp_jsonw_str(j, w->step_signal ? w->step_signal : "");
    LIT(j, ", \"partial\": ");
    put_bool(j, w->partial);
    LIT(j, ", \"partial_reason\": ");
    put_str_or_null(j, w->partial ? (w->partial_reason ? w->partial_reason : "exit") : NULL);
    LIT(j, ", \"flight\": ");
    tp_flight_put(j, w);
    LIT(j, ", \"operators_lost\": ");
    put_str_or_null(j, w->ops_lost_why);
    LIT(j, ", \"operators_lost_steps\": ");
    if (w->ops_lost_why && w->ops_lost_steps) {
        tp_jsonw_printf(j, "[%llu, %llu]", (unsigned long long)w->ops_lost_first,
                        (unsigned long long)w->ops_lost_last);
    } else {
        LIT(j, "null");
    }
    LIT(j, ", \"start_ns\": ");
    tp_jsonw_i64(j, w->start_ns);
    LIT(j, ", \"end_ns\": ");
    tp_jsonw_i64(j, w->end_ns);
    LIT(j, "},\n");
}

/* "steps" (one row per recorded step) and "totals" over them, as the text
 * report's per-step table and the lines under it. */
static void put_steps(struct tp_jsonw *j, struct summary *s, const struct tp_window *w)
{
    if (s->nsteps > 1)
        qsort(s->steps, s->nsteps, sizeof *s->steps, tp_summary_cmp_step);
    tp_sumagg_merge_busy(s);
    int64_t sum = 0, busy = 0;
    uint64_t flops = 0;
    LIT(j, "  \"steps\": [");
    for (size_t i = 0; i < s->nsteps; i++) {
        const struct step_row *r = &s->steps[i];
        uint64_t f = tp_summary_step_flops(w, r->index);
        int64_t a, b;
        int span = w->gpu && tp_summary_step_span(w, r->index, &a, &b);
        int64_t bz = span ? tp_sumagg_busy_within(s, a, b) : 0;
        sum += r->dur_ns;
        flops += f;
        busy += bz;
        tp_jsonw_lit(j, i ? ",\n    {\"step\": " : "\n    {\"step\": ");
        tp_jsonw_u64(j, r->index);
        LIT(j, ", \"wall_ns\": ");
        tp_jsonw_i64(j, r->dur_ns);
        LIT(j, ", \"flops\": ");
        tp_jsonw_u64(j, f);
        LIT(j, ", \"tflops_per_s\": ");
        tp_jsonw_double(j, r->dur_ns > 0 ? (double)f / (double)r->dur_ns / 1e3 : 0);
        LIT(j, ", \"gpu_busy_ns\": ");
        tp_jsonw_i64_or_null(j, span, bz);
        tp_jsonw_char(j, '}');
    }
    LIT(j, "],\n  \"totals\": {\"steps\": ");
    tp_jsonw_u64(j, s->nsteps);
    LIT(j, ", \"wall_ns\": ");
    tp_jsonw_i64(j, sum);
    LIT(j, ", \"mean_step_ns\": ");
    if (s->nsteps)
        tp_jsonw_i64(j, sum / (int64_t)s->nsteps);
    else
        LIT(j, "null");
    LIT(j, ", \"flops\": ");
    tp_jsonw_u64(j, flops);
    double tf = sum > 0 ? (double)flops / (double)sum / 1e3 : 0;
    LIT(j, ", \"tflops_per_s\": ");
    tp_jsonw_double(j, tf);
    LIT(j, ", \"peak_tflops\": ");
    tp_jsonw_double_or_null(j, w->peak_tflops > 0, w->peak_tflops);
    LIT(j, ", \"mfu_like\": ");
    if (w->peak_tflops > 0)
        tp_jsonw_double(j, tf / w->peak_tflops);
    else
        LIT(j, "null");
    LIT(j, ",\n    \"gpu_busy_ns\": ");
    tp_jsonw_i64_or_null(j, w->gpu, busy);
    LIT(j, ", \"gpu_busy_share\": ");
    if (w->gpu)
        put_ratio(j, busy, sum);
    else
        LIT(j, "null");
    LIT(j, ", \"window_flops\": ");
    tp_jsonw_u64(j, w->flops);
    LIT(j, ", \"library_flops\": ");
    tp_jsonw_u64(j, s->lib_flops);
    LIT(j, ", \"graph_flops\": ");
    tp_jsonw_u64(j, s->graph_flops);
    LIT(j, "},\n");
}

/* Writes the fields of one row after its name (", \"calls\": ..."). */
typedef void (*row_fn)(struct tp_jsonw *j, const struct agg *a);

/* {"distinct": n, "calls": c, "total_ns": t of table "t" (its rows summed),
 * left open for the fields that follow. */
static void put_table_totals(struct tp_jsonw *j, const struct agg_table *t)
{
    uint64_t calls = 0;
    int64_t total = 0;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].name) {
            calls += t->slots[i].calls;
            total += t->slots[i].total_ns;
        }
    LIT(j, "{\"distinct\": ");
    tp_jsonw_u64(j, t->n);
    LIT(j, ", \"calls\": ");
    tp_jsonw_u64(j, calls);
    LIT(j, ", \"total_ns\": ");
    tp_jsonw_i64(j, total);
}

/* "k": {"distinct": n, <totals>, "top": [rows]}: the "top" largest rows of
 * "t" by "cmp"; "totals" writes the fields summed over every row. */
static void put_table(struct tp_jsonw *j, const char *k, const struct agg_table *t,
                      int (*cmp)(const void *, const void *), size_t top, row_fn row)
{
    LIT(j, "  \"");
    tp_jsonw_lit(j, k);
    LIT(j, "\": ");
    put_table_totals(j, t);
    LIT(j, ", \"top\": [");
    struct agg **v = tp_summary_sorted(t, cmp);
    size_t n = v ? (t->n < top ? t->n : top) : 0;
    for (size_t i = 0; i < n; i++) {
        tp_jsonw_lit(j, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        put_name(j, v[i]->name);
        LIT(j, ", \"calls\": ");
        tp_jsonw_u64(j, v[i]->calls);
        LIT(j, ", \"total_ns\": ");
        tp_jsonw_i64(j, v[i]->total_ns);
        row(j, v[i]);
        tp_jsonw_char(j, '}');
    }
    free(v);
    LIT(j, "]},\n");
}

static void row_max(struct tp_jsonw *j, const struct agg *a)
{
    LIT(j, ", \"max_ns\": ");
    tp_jsonw_i64(j, a->max_ns);
}

static void row_lib(struct tp_jsonw *j, const struct agg *a)
{
    LIT(j, ", \"flops\": ");
    tp_jsonw_u64(j, a->flops);
}

static void row_none(struct tp_jsonw *j, const struct agg *a)
{
    (void)j;
    (void)a;
}

static const char *const row_kind[] = { "operator", "annotation", "step" };

/* "k": the operator table "t" as put_table writes one, each row also with
 * its kind (an operator, a record_function annotation, or the steps'
 * TP_SUMMARY_STEP_ROW), self time, device time and its shares of the
 * self host time of all rows ("self_ns" beside "total_ns"); by-shape rows
 * name their "input_shapes" as torch wrote them.  The by-shape table is
 * null when no operator of the window carried input shapes. */
static void put_op_table(struct tp_jsonw *j, const struct summary *s, const char *k,
                         const struct agg_table *t, int by_shape)
{
    LIT(j, "  \"");
    tp_jsonw_lit(j, k);
    if (by_shape && !s->ops_with_shapes) {
        LIT(j, "\": null,\n");
        return;
    }
    LIT(j, "\": ");
    put_table_totals(j, t);
    LIT(j, ", \"self_ns\": ");
    tp_jsonw_i64(j, s->ops_self_ns);
    LIT(j, ", \"top\": [");
    struct agg **v = tp_summary_sorted(t, tp_summary_cmp_total);
    size_t n = v ? (t->n < TOP ? t->n : TOP) : 0;
    for (size_t i = 0; i < n; i++) {
        const struct agg *a = v[i];
        tp_jsonw_lit(j, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        if (by_shape) {
            size_t len;
            const char *shapes = tp_summary_shape_split(a->name, &len);
            char *name = strndup(a->name, len < NAME_KEEP + 1 ? len : NAME_KEEP + 1);
            put_name(j, name ? name : "");
            free(name);
            LIT(j, ", \"input_shapes\": ");
            put_name(j, shapes);
        } else {
            put_name(j, a->name);
        }
        LIT(j, ", \"kind\": ");
        tp_jsonw_str(j, row_kind[a->kind >= 0 && a->kind <= TP_SUMROW_STEP ? a->kind : 0]);
        LIT(j, ", \"calls\": ");
        tp_jsonw_u64(j, a->calls);
        LIT(j, ", \"total_ns\": ");
        tp_jsonw_i64(j, a->total_ns);
        LIT(j, ", \"self_ns\": ");
        tp_jsonw_i64(j, a->self_ns);
        LIT(j, ", \"gpu_ns\": ");
        tp_jsonw_i64(j, a->gpu_ns);
        LIT(j, ", \"total_share\": ");
        put_ratio(j, a->total_ns, s->ops_self_ns);
        LIT(j, ", \"self_share\": ");
        put_ratio(j, a->self_ns, s->ops_self_ns);
        tp_jsonw_char(j, '}');
    }
    free(v);
    LIT(j, "]},\n");
}

static const char *mem_class_name(unsigned c)
{
    static const char *const names[TP_MEM_CLASS_COUNT] = { "device", "managed", "host_pinned" };
    return c < TP_MEM_CLASS_COUNT ? names[c] : "unknown";
}

/* "memory": the rows of the text report's memory table (those with data). */
static void put_memory(struct tp_jsonw *j, const struct summary *s, const struct tp_window *w)
{
    LIT(j, "  \"memory\": [");
    int first = 1;
    for (int i = 0; w->mem && i < w->n_mem; i++) {
        const struct tp_mem_usage *u = &w->mem[i];
        if (!tp_summary_mem_has_data(u))
            continue;
        char where[64];
        tp_jsonw_lit(j, first ? "\n    {\"device\": " : ",\n    {\"device\": ");
        first = 0;
        tp_jsonw_i64(j, u->device);
        LIT(j, ", \"class\": ");
        tp_jsonw_str(j, mem_class_name(u->mclass));
        LIT(j, ", \"where\": ");
        tp_jsonw_str(j, tp_memory_where(where, sizeof where, u->device, u->mclass));
        LIT(j, ", \"start_bytes\": ");
        tp_jsonw_u64(j, u->start_bytes);
        LIT(j, ", \"peak_bytes\": ");
        tp_jsonw_u64(j, u->peak_bytes);
        LIT(j, ", \"peak_at_ns\": ");
        tp_jsonw_i64(j, s->n_mem == w->n_mem && s->peak_at[i] ? s->peak_at[i] : u->peak_ns);
        LIT(j, ", \"end_bytes\": ");
        tp_jsonw_u64(j, u->end_bytes);
        LIT(j, ", \"process_peak_bytes\": ");
        tp_jsonw_u64(j, u->peak_process);
        LIT(j, ", \"allocs\": ");
        tp_jsonw_u64(j, u->allocs);
        LIT(j, ", \"frees\": ");
        tp_jsonw_u64(j, u->frees);
        LIT(j, ", \"failed\": ");
        tp_jsonw_u64(j, u->failed);
        LIT(j, ", \"largest_failed_bytes\": ");
        tp_jsonw_u64(j, u->failed ? u->failed_bytes : 0);
        tp_jsonw_char(j, '}');
    }
    LIT(j, "],\n");
}

static const char *owner_name(const struct tp_window *w, unsigned owner)
{
    return owner < (unsigned)w->n_mem_owner_names && w->mem_owner_names[owner]
               ? w->mem_owner_names[owner] : "unknown";
}

/* The memory ledger (the text report's owner tables): "memory_owners",
 * every row of w->mem_owners with its call sites; "memory_coverage", the
 * share of the bytes allocated through intercepted calls whose owner is
 * named (null: none allocated, or no memory profiling); "memory_owners_exact"
 * (null without rows); "memory_held_at_exit", what the window written at
 * exit found never freed ([] otherwise). */
static void put_memory_owners(struct tp_jsonw *j, const struct tp_window *w)
{
    int n = w->mem_owners && w->n_mem_owners > 0 ? w->n_mem_owners : 0;
    LIT(j, "  \"memory_owners\": [");
    for (int i = 0; i < n; i++) {
        const struct tp_mem_owner_usage *o = &w->mem_owners[i];
        tp_jsonw_lit(j, i ? ",\n    {\"device\": " : "\n    {\"device\": ");
        tp_jsonw_i64(j, o->device);
        LIT(j, ", \"class\": ");
        tp_jsonw_str(j, mem_class_name(o->mclass));
        LIT(j, ", \"owner\": ");
        put_name(j, owner_name(w, o->owner));
        LIT(j, ", \"start_bytes\": ");
        tp_jsonw_u64(j, o->start_bytes);
        LIT(j, ", \"end_bytes\": ");
        tp_jsonw_u64(j, o->end_bytes);
        LIT(j, ", \"peak_bytes\": ");
        tp_jsonw_u64(j, o->peak_bytes);
        LIT(j, ", \"allocs\": ");
        tp_jsonw_u64(j, o->allocs);
        LIT(j, ", \"frees\": ");
        tp_jsonw_u64(j, o->frees);
        LIT(j, ",\n     \"sites\": [");
        for (int k = 0; o->sites && k < o->n_sites; k++) {
            tp_jsonw_lit(j, k ? ", {\"site\": " : "{\"site\": ");
            put_name(j, o->sites[k].site ? o->sites[k].site : "");
            LIT(j, ", \"bytes\": ");
            tp_jsonw_u64(j, o->sites[k].live_bytes);
            LIT(j, ", \"allocs\": ");
            tp_jsonw_u64(j, o->sites[k].allocs);
            tp_jsonw_char(j, '}');
        }
        LIT(j, "]}");
    }
    LIT(j, "],\n  \"memory_coverage\": ");
    tp_jsonw_double_or_null(j, w->mem && w->n_mem > 0 && w->mem_coverage >= 0, w->mem_coverage);
    LIT(j, ", \"memory_owners_exact\": ");
    if (n)
        put_bool(j, w->mem_owners_exact);
    else
        LIT(j, "null");
    LIT(j, ",\n  \"memory_held_at_exit\": [");
    for (int i = 0; w->mem_held && i < w->n_mem_held; i++) {
        const struct tp_mem_held *h = &w->mem_held[i];
        tp_jsonw_lit(j, i ? ",\n    {\"device\": " : "\n    {\"device\": ");
        tp_jsonw_i64(j, h->device);
        LIT(j, ", \"class\": ");
        tp_jsonw_str(j, mem_class_name(h->mclass));
        LIT(j, ", \"owner\": ");
        put_name(j, owner_name(w, h->owner));
        LIT(j, ", \"bytes\": ");
        tp_jsonw_u64(j, h->bytes);
        LIT(j, ", \"blocks\": ");
        tp_jsonw_u64(j, h->blocks);
        tp_jsonw_char(j, '}');
    }
    LIT(j, "],\n");
}

/* "collectives": per (kind, group size) as the text report's table; each
 * row's time on its basis (device kernel time, or host call durations). */
static void put_colls(struct tp_jsonw *j, struct summary *s, const struct tp_window *w)
{
    int dev = tp_summary_coll_device(s, w), mixed = 0;
    for (size_t i = 0; dev && i < s->ncoll; i++)
        mixed |= s->coll[i].dev_ns <= 0;
    if (s->ncoll > 1)
        qsort(s->coll, s->ncoll, sizeof *s->coll, tp_summary_cmp_coll);
    int64_t time = 0;
    double bytes = 0;
    uint64_t calls = 0;
    LIT(j, "  \"collectives\": {\"basis\": ");
    tp_jsonw_str(j, !s->ncoll ? "none" : !dev ? "host-enqueue" : mixed ? "mixed" : "device");
    LIT(j, ", \"captured_calls\": ");
    tp_jsonw_u64(j, s->coll_captured);
    LIT(j, ", \"rows\": [");
    for (size_t i = 0; i < s->ncoll; i++) {
        const struct coll_row *x = &s->coll[i];
        int on_dev = dev && x->dev_ns > 0;
        int64_t t = on_dev ? x->dev_ns : x->host_ns;
        time += t;
        bytes += x->size;
        calls += x->calls;
        tp_jsonw_lit(j, i ? ",\n    {\"kind\": " : "\n    {\"kind\": ");
        tp_jsonw_str(j, tp_coll_name(x->op));
        LIT(j, ", \"ranks\": ");
        tp_jsonw_u64(j, x->ranks);
        LIT(j, ", \"calls\": ");
        tp_jsonw_u64(j, x->calls);
        LIT(j, ", \"bytes\": ");
        tp_jsonw_double(j, x->size);
        LIT(j, ", \"time_ns\": ");
        tp_jsonw_i64(j, t);
        LIT(j, ", \"host_ns\": ");
        tp_jsonw_i64(j, x->host_ns);
        LIT(j, ", \"device_ns\": ");
        tp_jsonw_i64_or_null(j, w->gpu, x->dev_ns);
        LIT(j, ", \"basis\": ");
        tp_jsonw_str(j, on_dev ? "device" : "host-enqueue");
        LIT(j, ", \"algbw_gbps\": ");
        if (t > 0)
            tp_jsonw_double(j, x->size / (double)t);
        else
            LIT(j, "null");
        LIT(j, ", \"busbw_gbps\": ");
        if (t > 0)
            tp_jsonw_double(j, x->bus / (double)t);
        else
            LIT(j, "null");
        tp_jsonw_char(j, '}');
    }
    LIT(j, "],\n    \"calls\": ");
    tp_jsonw_u64(j, calls);
    LIT(j, ", \"bytes\": ");
    tp_jsonw_double(j, bytes);
    LIT(j, ", \"time_ns\": ");
    tp_jsonw_i64(j, time);
    LIT(j, "},\n");
}

/* README "summary.json": the trace's figures, under the short names */
static const struct tp_coverage_keys coverage_keys = {
    .launches = "host_launches",
    .kernels = "gpu_kernels",
    .linked = "gpu_kernels_linked",
};

static void put_tail(struct tp_jsonw *j, const struct summary *s, const struct tp_window *w)
{
    int first = 1;
    LIT(j, "  \"events\": {");
    key(j, &first, "records");
    tp_jsonw_u64(j, w->records);
    key(j, &first, "dropped");
    tp_jsonw_u64(j, w->dropped);
    key(j, &first, "late");
    tp_jsonw_u64(j, w->late);
    key(j, &first, "device_dropped");
    tp_jsonw_u64(j, w->gpu_dropped);
    key(j, &first, "names_lost");
    tp_jsonw_u64(j, w->names_lost);
    key(j, &first, "ranges_lost");
    tp_jsonw_u64(j, w->ranges_lost);
    key(j, &first, "unmatched_range_pops");
    tp_jsonw_u64(j, w->unmatched_pops);
    key(j, &first, "incomplete");
    put_bool(j, s->oom);
    LIT(j, "},\n  \"gpu\": ");
    put_bool(j, w->gpu);
    LIT(j, ", \"gpu_activity\": ");
    tp_jsonw_str(j, w->gpu_status ? w->gpu_status : "off");
    LIT(j, ",\n  \"coverage\": ");
    tp_coverage_put(j, w, &coverage_keys);
    LIT(j, "\n}\n");
}

int tp_summary_json_write(struct summary *s, const struct tp_window *w, struct tp_saved *saved)
{
    struct tp_output out;
    if (tp_output_open_report(&out, w->reports_folder, saved->trace, "summary.json", w->overwrite,
                              "summary") != 0)
        return -1;
    struct tp_jsonw j;
    if (tp_jsonw_init(&j, out.fd, 0, 0) == 0) {
        put_identity(&j, w, saved->trace);
        put_steps(&j, s, w);
        LIT(&j, "  \"host_launch_count\": ");
        tp_jsonw_u64(&j, s->launches);
        LIT(&j, ", \"host_api_ns\": ");
        tp_jsonw_i64(&j, s->host_ns);
        LIT(&j, ", \"gpu_ns\": ");
        if (w->gpu)
            tp_jsonw_i64(&j, s->gpu_ns);
        else
            LIT(&j, "null");
        LIT(&j, ",\n");
        /* device work by GPU time (kernels, copies, sets), when CUPTI ran */
        put_table(&j, "gpu_work", &s->gpu, tp_summary_cmp_total, TOP, row_max);
        put_table(&j, "launches", &s->kernels, tp_summary_cmp_calls, TOP, row_none);
        tp_sumagg_finish_ops(s);
        put_op_table(&j, s, "operators", &s->ops, 0);
        put_op_table(&j, s, "operators_by_shape", &s->op_shapes, 1);
        put_table(&j, "library_calls", &s->libs, tp_summary_cmp_total, TOP_SMALL, row_lib);
        put_table(&j, "api_calls", &s->apis, tp_summary_cmp_total, TOP_SMALL, row_max);
        put_memory(&j, s, w);
        put_memory_owners(&j, w);
        put_colls(&j, s, w);
        put_tail(&j, s, w);
    }
    int err = tp_jsonw_finish(&j);
    return tp_output_report_done(&out, err, saved);
}
