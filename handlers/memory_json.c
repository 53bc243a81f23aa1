/*
 * memory_json.c - DESIGN: "<trace base>.memory.json": the window, and per
 * (device, class) its start, end and peak levels and every point (thinned
 * beyond TP_MEMORY_JSON_POINTS), times in ms since the window start
 * rounded to the microsecond as the summary does, with the memory
 * ledger's owners of each series (their levels and points, thinned
 * alike), and the failed allocations.  Written through jsonw, which escapes every string.
 */
#include "memory_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "ns" (>= 0) as milliseconds with three decimals, rounded to the microsecond as the summary does. */
static void put_ms(struct tp_jsonw *j, int64_t ns)
{
    tp_jsonw_us(j, (ns + 500) / 1000);
}

/* "points": [[ms, bytes], ...], thinned beyond TP_MEMORY_JSON_POINTS (and
 * "thinned" says so, before it). */
static void put_points(struct tp_jsonw *j, const struct mem_point *p, size_t n, int64_t len)
{
    struct mem_point *t = NULL;
    if (n > TP_MEMORY_JSON_POINTS && (t = malloc(n * sizeof *t)) != NULL) {
        n = tp_memrep_thin(p, n, len, TP_MEMORY_JSON_COLUMNS, t);
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
    tp_jsonw_char(j, ']');
    free(t);
}

/* "owners": the memory ledger's owners of a series, most held at the end first. */
static void put_owners(struct tp_jsonw *j, const struct mem_owner_set *own, int64_t len)
{
    TP_JSONW_LIT(j, ",\n     \"owners\": [");
    for (int k = 0; own && k < own->n; k++) {
        const struct mem_owner_line *o = &own->o[k];
        tp_jsonw_lit(j, k ? ",\n      {\"owner\": " : "\n      {\"owner\": ");
        tp_jsonw_str(j, o->name);
        TP_JSONW_LIT(j, ", \"start_bytes\": ");
        tp_jsonw_u64(j, o->u->start_bytes);
        TP_JSONW_LIT(j, ", \"end_bytes\": ");
        tp_jsonw_u64(j, o->u->end_bytes);
        TP_JSONW_LIT(j, ", \"peak_bytes\": ");
        tp_jsonw_u64(j, o->u->peak_bytes);
        put_points(j, o->p, o->n, len);
        tp_jsonw_char(j, '}');
    }
    tp_jsonw_char(j, ']');
}

void tp_memrep_put_json(struct tp_jsonw *j, struct mem_state *m, const struct tp_window *w,
                        int64_t len, struct mem_point **pts, const size_t *npts,
                        const struct mem_owner_set *own)
{
    TP_JSONW_LIT(j, "{\n  \"trace\": ");
    tp_jsonw_str(j, tp_memrep_trace_name(m->trace));
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
        put_ms(j, tp_memrep_peak_rel(w, u, len, pts[i], npts[i]));
        TP_JSONW_LIT(j, ", \"peak_process_bytes\": ");
        tp_jsonw_u64(j, u->peak_process);
        TP_JSONW_LIT(j, ", \"allocs\": ");
        tp_jsonw_u64(j, u->allocs);
        TP_JSONW_LIT(j, ", \"frees\": ");
        tp_jsonw_u64(j, u->frees);
        TP_JSONW_LIT(j, ", \"failed\": ");
        tp_jsonw_u64(j, u->failed);
        put_points(j, pts[i], npts[i], len);
        put_owners(j, own ? &own[i] : NULL, len);
        tp_jsonw_char(j, '}');
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
