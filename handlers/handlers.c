/*
 * handlers.c - DESIGN: the handler table is expanded from handlers.def
 * (Darshan's module list), so adding a handler is one line there and one
 * file here.  A handler may leave callbacks NULL; perf's approach of
 * default stubs keeps the caller free of NULL checks: tp_handler_find()
 * returns a filled copy (open: a placeholder state, event: nothing,
 * close: success).  The copies are filled once, under pthread_once.
 */
#include "handler.h"
#include "output.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define TP_HANDLER(n) extern const struct tp_handler tp_handler_##n;
#include "handlers.def"
#undef TP_HANDLER

static const struct tp_handler *const tp_handler_list[] = {
#define TP_HANDLER(n) &tp_handler_##n,
#include "handlers.def"
#undef TP_HANDLER
};

#define TP_HANDLER_COUNT (sizeof tp_handler_list / sizeof tp_handler_list[0])

static struct tp_handler tp_handler_filled[TP_HANDLER_COUNT];
static pthread_once_t tp_handler_once = PTHREAD_ONCE_INIT;
static char tp_handler_placeholder;

static void *stub_open(struct tp_window *w)
{
    (void)w;
    return &tp_handler_placeholder;
}

static void stub_event(void *state, const struct tp_event *ev)
{
    (void)state;
    (void)ev;
}

static int stub_close(void *state, struct tp_window *w)
{
    (void)state;
    (void)w;
    return 0;
}

static void fill_defaults(void)
{
    for (size_t i = 0; i < TP_HANDLER_COUNT; i++) {
        struct tp_handler h = *tp_handler_list[i];
        if (!h.open)
            h.open = stub_open;
        if (!h.event)
            h.event = stub_event;
        if (!h.close)
            h.close = stub_close;
        tp_handler_filled[i] = h;
    }
}

const struct tp_handler *tp_handler_find(const char *name)
{
    if (!name)
        return NULL;
    pthread_once(&tp_handler_once, fill_defaults);
    for (size_t i = 0; i < TP_HANDLER_COUNT; i++)
        if (strcmp(tp_handler_filled[i].name, name) == 0)
            return &tp_handler_filled[i];
    return NULL;
}

const char *tp_handler_names(void)
{
#define TP_HANDLER(n) "," #n
    static const char names[] =
#include "handlers.def"
        ;
#undef TP_HANDLER
    return names + 1;
}

int tp_handler_report_done(struct tp_output *o, int err, struct tp_window *w)
{
    int rc = err ? tp_output_abort(o, err) : tp_output_commit(o);
    if (rc == 0 && w->n_reports_saved < TP_WINDOW_REPORTS) {
        snprintf(w->reports_saved[w->n_reports_saved], sizeof w->reports_saved[0], "%s", o->final);
        w->n_reports_saved++;
    }
    return rc;
}
