/*
 * window.h - one closed window drained into events for the handlers, on
 * the flush thread (window.c), and the output side's work between and after
 * windows.  The hand-off it reads is handoff.h's; the thread that calls it
 * is flusher.c's.
 */
#ifndef TRAINPROF_COLLECTOR_WINDOW_H
#define TRAINPROF_COLLECTOR_WINDOW_H

#include <stdint.h>

#include "collector/device/cupti.h"
#include "handoff.h"

/* tp_window_write - drain window "w" and run the handlers (flush thread);
 * "dev" is its device side, NULL when CUPTI did not collect. */
void tp_window_write(const struct tp_handoff *w, const struct tp_device_batch *dev);

/* tp_window_idle - between windows (flush thread): the output side's idle
 * work (reaping exec children, deferred TRAINPROF_KEEP deletions). */
void tp_window_idle(void);

/* tp_window_saved - traces saved so far (any thread). */
uint64_t tp_window_saved(void);

/* tp_window_finish - at exit, after the last window was written: the
 * output side's last work (a bounded wait for exec children). */
void tp_window_finish(void);

#endif
