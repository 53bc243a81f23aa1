/*
 * memview.h - a window's memory by owner, for the handlers (sink.h's
 * mem_owner* fields): the ledger's call sites (collector/modules/memtrack.h)
 * named (memowner.h) and the window's allocation records replayed in time
 * order.  Flush thread only.
 */
#ifndef TRAINPROF_COLLECTOR_MEMVIEW_H
#define TRAINPROF_COLLECTOR_MEMVIEW_H

#include <stdint.h>

#include "collector/common/clock.h"
#include "collector/contract/record.h"
#include "collector/contract/sink.h"

struct tp_memview;

/* tp_memview_new - the ledger as window "gen" found it ("gen" -1: no window
 * start, a flight dump).  NULL when memory is not tracked or out of memory. */
struct tp_memview *tp_memview_new(int gen);

/* tp_memview_add - peek: record "r" of the window (allocations and frees kept). */
void tp_memview_add(struct tp_memview *v, const struct tp_record *r);

/*
 * tp_memview_finish - fill win's mem_owner* fields (and mem_held when
 * "at_exit") from what was added; "dropped": the window lost records.
 * The arrays live until tp_memview_free.
 */
void tp_memview_finish(struct tp_memview *v, struct tp_window *win, const struct tp_clock_map *map,
                       int at_exit);

/* tp_memview_event - the owner and site of an allocation or free event. */
void tp_memview_event(const struct tp_memview *v, struct tp_event *ev);

void tp_memview_free(struct tp_memview *v);

#endif
