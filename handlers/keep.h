/*
 * keep.h - TRAINPROF_KEEP: only this process's K newest traces, and their
 * reports, stay on disk.
 */
#ifndef TRAINPROF_HANDLERS_KEEP_H
#define TRAINPROF_HANDLERS_KEEP_H

#include <stddef.h>

#include "collector/contract/sink.h"

/* tp_keep_saved - file the window's saved trace and reports; delete the
 * oldest past w->keep (nothing when it is negative), now or, while a
 * TRAINPROF_EXEC command for them still runs, later. */
void tp_keep_saved(const struct tp_window *w, const struct tp_saved *saved);

/* tp_keep_sweep - delete the deferred traces whose commands have finished;
 * returns how many are still deferred. */
size_t tp_keep_sweep(void);

#endif
