/*
 * handlers.c - DESIGN: the output side the collector sees (struct tp_sink,
 * handed down by the preload's constructor): the handler table, expanded
 * from collector/contract/handlers.def (Darshan's module list), so that adding a
 * handler is one line there and one file here, and the post-save stage:
 * TRAINPROF_EXEC on each saved file (exec.c), then TRAINPROF_KEEP
 * (keep.c), which defers deleting a trace while a command for it runs.
 * A handler may leave callbacks NULL; perf's approach of default stubs
 * keeps the caller free of NULL checks: the table holds filled copies
 * (open: a placeholder state, event: nothing, close: success), filled
 * once, under pthread_once.
 */
#include "handler.h"
#include "exec.h"
#include "keep.h"
#include "output.h"
#include "jsonw.h"
#include "collector/common/log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define TP_HANDLER(n) extern const struct tp_handler tp_handler_##n;
#define TP_STAGE(n)
#include "collector/contract/handlers.def"
#undef TP_HANDLER
#undef TP_STAGE

static const struct tp_handler *const tp_handler_list[] = {
#define TP_HANDLER(n) &tp_handler_##n,
#define TP_STAGE(n)
#include "collector/contract/handlers.def"
#undef TP_HANDLER
#undef TP_STAGE
};

#define TP_HANDLER_COUNT (sizeof tp_handler_list / sizeof tp_handler_list[0])

static struct tp_handler tp_handler_filled[TP_HANDLER_COUNT];
static pthread_once_t tp_handler_once = PTHREAD_ONCE_INIT;
static char tp_handler_placeholder;

static void *stub_open(const struct tp_window *w)
{
    (void)w;
    return &tp_handler_placeholder;
}

static void stub_event(void *state, const struct tp_event *ev)
{
    (void)state;
    (void)ev;
}

static int stub_close(void *state, const struct tp_window *w, struct tp_saved *saved)
{
    (void)state;
    (void)w;
    (void)saved;
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

/* ---- the post-save stage ------------------------------------------------ */

static void post_save(const struct tp_window *w, const struct tp_saved *saved)
{
    if (!saved->trace[0])
        return;
    if (w->exec && w->exec[0]) {
        tp_exec_reap(0);
        tp_exec_saved(w, saved);
    }
    tp_keep_saved(w, saved);
}

static void idle(void)
{
    tp_exec_reap(0);
    tp_keep_sweep();
}

static void finish(void)
{
    int running = tp_exec_reap(2000);
    size_t left = tp_keep_sweep();
    if (running)
        TP_INFO("%d TRAINPROF_EXEC command%s still running at exit%s", running,
                running == 1 ? "" : "s",
                left ? "; TRAINPROF_KEEP leaves their traces in place" : "");
}

static const struct tp_handler *handler_at(int i)
{
    pthread_once(&tp_handler_once, fill_defaults);
    return i >= 0 && (size_t)i < TP_HANDLER_COUNT ? &tp_handler_filled[i] : NULL;
}

/* ISA-L's deflate for gzip traces (jsonw.c), when they are gzipped. */
static void load(int gzip)
{
    if (gzip)
        tp_jsonw_load();
}

const struct tp_sink tp_handlers_sink = {
    .handler = handler_at,
    .post_save = post_save,
    .idle = idle,
    .finish = finish,
    .load = load,
};
