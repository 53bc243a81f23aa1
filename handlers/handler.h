/*
 * handler.h - what the output modules share: the handler contract
 * (collector/contract/sink.h) and the helpers and tables of this folder.
 *
 * DESIGN
 * A handler turns one drained window into files.  The flush thread calls
 * open() once per window, event() for every event of the window in buffer
 * order (per thread in time order; threads interleaved), then close(), which
 * lists what it saved in the window's struct tp_saved.  Handlers run in the
 * order of collector/contract/handlers.def; chrome comes first and sets the trace,
 * after which the reports are named.  A handler never touches live
 * collector state, and the window it sees is read-only.
 * NULL callbacks are allowed: tp_handler_find() returns the handler with
 * default stubs filled in (perf's perf_tool__fill_defaults).
 */
#ifndef TRAINPROF_HANDLERS_HANDLER_H
#define TRAINPROF_HANDLERS_HANDLER_H

#include "collector/contract/sink.h"

/* tp_handler_find - the handler named "name", or NULL. */
const struct tp_handler *tp_handler_find(const char *name);

/* The output side, handed to the collector by the preload's constructor. */
extern const struct tp_sink tp_handlers_sink;

struct tp_jsonw;

/* The names an output gives the coverage figures (coverage.c). */
struct tp_coverage_keys {
    const char *launches; /* launch records of the wrappers */
    const char *kernels;  /* kernels CUPTI recorded (null without CUPTI) */
    const char *linked;   /* ... of them linked to a launch (null without CUPTI) */
    const char *records;  /* device records kept; NULL: neither this nor "dropped" */
    const char *dropped;  /* device records dropped */
};

/* tp_flight_put - window "w"'s flight object (flight.c), or null when it
 * is no flight recorder's dump. */
void tp_flight_put(struct tp_jsonw *j, const struct tp_window *w);

/* tp_coverage_put - window "w"'s coverage object, {...}, under the names
 * "k" gives, "ratio" after the linked kernels (null without CUPTI). */
void tp_coverage_put(struct tp_jsonw *j, const struct tp_window *w,
                     const struct tp_coverage_keys *k);

#endif
