/*
 * handler.h - the output-module interface.
 *
 * DESIGN
 * A handler turns one drained window into files.  The flush thread calls
 * open() once per window, event() for every event of the window in buffer
 * order (per thread in time order; threads interleaved), then close().
 * Handlers run in the order of handlers/handlers.def; chrome comes first and
 * fills w->trace_path so that reports can be named after the trace.
 * A handler never touches live collector state: only its arguments.
 * NULL callbacks are allowed: tp_handler_find() returns the handler with
 * default stubs filled in (perf's perf_tool__fill_defaults).
 */
#ifndef TRAINPROF_HANDLERS_HANDLER_H
#define TRAINPROF_HANDLERS_HANDLER_H

#include "../collector/record.h"

struct tp_handler {
    const char *name;
    /* Returns the handler's state for this window, or NULL to sit it out. */
    void *(*open)(struct tp_window *w);
    void (*event)(void *state, const struct tp_event *ev);
    /* Writes the outputs and frees "state".  Returns 0, or -1 after having
     * reported the failure on stderr once. */
    int (*close)(void *state, struct tp_window *w);
};

struct tp_output;

/*
 * tp_handler_report_done - finish a report file: abort it if "err" (an
 * errno, reported) else commit it, and list the committed file in
 * w->reports_saved, where the exec handler finds it.  0 or -1.
 */
int tp_handler_report_done(struct tp_output *o, int err, struct tp_window *w);

/* tp_handler_find - the handler named "name", or NULL. */
const struct tp_handler *tp_handler_find(const char *name);

/* tp_handler_names - comma-separated list of known handler names. */
const char *tp_handler_names(void);

#endif
