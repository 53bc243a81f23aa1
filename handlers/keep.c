/*
 * keep.c - DESIGN: TRAINPROF_KEEP, the second half of the post-save stage
 * (handlers/handlers.c).  The traces this process saved are filed oldest
 * first with the reports of their window; past the limit the oldest are
 * deleted, trace and reports together, unless a TRAINPROF_EXEC command for
 * them still runs (tp_exec_busy: the command must be able to read
 * its file): then the deletion waits for the next window, an idle tick of
 * tp-flush, or exit.  Locked because exit runs on the thread that calls
 * exit(), not on tp-flush.
 */
#include "keep.h"
#include "exec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tp_kept {
    char *trace;
    char *reports;               /* NUL-terminated paths, ended by an empty one */
};

static struct tp_kept *tp_kept, *tp_doomed;
static size_t tp_n_kept, tp_n_doomed;
static pthread_mutex_t tp_keep_lock = PTHREAD_MUTEX_INITIALIZER;

static void keep_delete(const struct tp_kept *t)
{
    unlink(t->trace);
    for (const char *r = t->reports; *r; r += strlen(r) + 1)
        unlink(r);
}

/* Deletes the deferred traces whose exec command has finished; lock held. */
static void keep_sweep_locked(void)
{
    size_t j = 0;
    for (size_t i = 0; i < tp_n_doomed; i++) {
        struct tp_kept *t = &tp_doomed[i];
        if (tp_exec_busy(t->trace)) {
            tp_doomed[j++] = *t;
            continue;
        }
        keep_delete(t);
        free(t->trace);
        free(t->reports);
    }
    tp_n_doomed = j;
}

/* The window's report files as one block of NUL-terminated paths, ended by
 * an empty one; NULL when out of memory. */
static char *reports_list(const struct tp_saved *saved)
{
    size_t n = 1;
    for (int i = 0; i < saved->n_reports; i++)
        n += strlen(saved->reports[i]) + 1;
    char *list = malloc(n), *p = list;
    if (!list)
        return NULL;
    for (int i = 0; i < saved->n_reports; i++)
        p = stpcpy(p, saved->reports[i]) + 1;
    *p = 0;
    return list;
}

void tp_keep_saved(const struct tp_window *w, const struct tp_saved *saved)
{
    if (w->keep < 0 || !saved->trace[0])
        return;
    pthread_mutex_lock(&tp_keep_lock);
    struct tp_kept *s = realloc(tp_kept, (tp_n_kept + 1) * sizeof *s);
    struct tp_kept *d = s ? realloc(tp_doomed, (tp_n_doomed + tp_n_kept + 1) * sizeof *d) : NULL;
    if (s)
        tp_kept = s;
    if (d)
        tp_doomed = d;
    char *t = d ? strdup(saved->trace) : NULL, *r = t ? reports_list(saved) : NULL;
    if (r) {
        tp_kept[tp_n_kept++] = (struct tp_kept){ t, r };
        while (tp_n_kept > (size_t)w->keep) {
            tp_doomed[tp_n_doomed++] = tp_kept[0];
            memmove(tp_kept, tp_kept + 1, --tp_n_kept * sizeof *tp_kept);
        }
        keep_sweep_locked();
    } else {
        free(t);
    }
    pthread_mutex_unlock(&tp_keep_lock);
}

size_t tp_keep_sweep(void)
{
    pthread_mutex_lock(&tp_keep_lock);
    if (tp_n_doomed)
        keep_sweep_locked();
    size_t left = tp_n_doomed;
    pthread_mutex_unlock(&tp_keep_lock);
    return left;
}
