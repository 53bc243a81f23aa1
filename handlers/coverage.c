/*
 * coverage.c - DESIGN: the one writer of a window's coverage object, what
 * the wrappers saw against what CUPTI saw: launch records, kernels CUPTI
 * recorded, those linked to a launch and that share as "ratio" (null
 * without CUPTI), and, in the trace, the device records kept and dropped.
 * The trace (chrome_header.c: "launches_seen_by_wrappers", ...) and summary.json
 * (summary_json.c: "host_launches", ...) write the same figures under the
 * names README documents for each, which readers already parse (trainprof
 * summary reads both); so the names stay two sets, given by each caller,
 * and the figures and their order come from here.
 */
#include "handler.h"
#include "jsonw.h"

static void put_key(struct tp_jsonw *j, int *first, const char *name)
{
    if (!*first)
        TP_JSONW_LIT(j, ", ");
    *first = 0;
    tp_jsonw_char(j, '"');
    tp_jsonw_lit(j, name);
    TP_JSONW_LIT(j, "\": ");
}

void tp_coverage_put(struct tp_jsonw *j, const struct tp_window *w, const struct tp_coverage_keys *k)
{
    int first = 1;
    tp_jsonw_char(j, '{');
    put_key(j, &first, k->launches);
    tp_jsonw_u64(j, w->host_launches);
    put_key(j, &first, k->kernels);
    tp_jsonw_u64_or_null(j, w->gpu, w->gpu_kernels);
    put_key(j, &first, k->linked);
    tp_jsonw_u64_or_null(j, w->gpu, w->gpu_kernels_linked);
    put_key(j, &first, "ratio");
    tp_jsonw_double_or_null(j, w->gpu && w->coverage >= 0, w->coverage);
    if (k->records) {
        put_key(j, &first, k->records);
        tp_jsonw_u64(j, w->gpu_records);
        put_key(j, &first, k->dropped);
        tp_jsonw_u64(j, w->gpu_dropped);
    }
    tp_jsonw_char(j, '}');
}
