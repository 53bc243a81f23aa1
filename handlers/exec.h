/*
 * exec.h - TRAINPROF_EXEC: a command run after each saved file
 * (trace and reports); TRAINPROF_KEEP asks here before deleting a trace and
 * its reports.
 */
#ifndef TRAINPROF_HANDLERS_EXEC_H
#define TRAINPROF_HANDLERS_EXEC_H

#include "collector/contract/sink.h"

/*
 * tp_exec_saved - start w->exec once per file in "saved", the trace first,
 * then the reports in the order they were written.  0, or -1 if some
 * command could not be started (each reported).
 */
int tp_exec_saved(const struct tp_window *w, const struct tp_saved *saved);

/*
 * tp_exec_reap - collect the exec children that have finished, reporting a
 * non-zero exit or a signal as one warning each; waits up to "wait_ms"
 * milliseconds (0: not at all) for those still running.  Only our own pids
 * are waited for, never waitpid(-1).  Returns the number still running.
 */
int tp_exec_reap(int wait_ms);

/*
 * tp_exec_busy - 1 if an exec child started for a file of the window whose
 * trace is "path" still runs
 * (after a reap that does not wait), else 0.
 */
int tp_exec_busy(const char *path);

#endif
