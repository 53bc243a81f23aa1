/*
 * flight.c - DESIGN: the one writer of a window's "flight" object, so that
 * the trace's trainprof object (chrome_header.c) and summary.json
 * (summary_json.c) say the same of a flight recorder's dump: its reason,
 * the step it was asked at and, for a slow step, that step's time, the
 * running median it was measured against and the threshold, in ms.  A
 * window that is no dump writes null, so readers can test one key.
 */
#include "handler.h"
#include "jsonw.h"

void tp_flight_put(struct tp_jsonw *j, const struct tp_window *w)
{
    if (!w->flight_reason) {
        TP_JSONW_LIT(j, "null");
        return;
    }
    TP_JSONW_LIT(j, "{\"reason\": ");
    tp_jsonw_str(j, w->flight_reason);
    TP_JSONW_LIT(j, ", \"step\": ");
    tp_jsonw_u64(j, w->flight_step);
    int slow = w->flight_threshold_ns != 0;
    TP_JSONW_LIT(j, ", \"step_ms\": ");
    tp_jsonw_double_or_null(j, slow, (double)w->flight_step_ns / 1e6);
    TP_JSONW_LIT(j, ", \"median_ms\": ");
    tp_jsonw_double_or_null(j, slow, (double)w->flight_median_ns / 1e6);
    TP_JSONW_LIT(j, ", \"threshold_ms\": ");
    tp_jsonw_double_or_null(j, slow, (double)w->flight_threshold_ns / 1e6);
    tp_jsonw_char(j, '}');
}
