/*
 * memtrack.h - the device-memory timeline: an address table per process that
 * keeps running totals and peaks per (device, class), updated on every
 * allocation and free while the profiler is active and
 * TRAINPROF_PROFILE_MEMORY=1, and per-window snapshots for the handlers.
 * What the flush thread and the module need; the allocation wrappers' inline
 * entry (tp_mem_begin, tp_mem_alloc_at) is in collector/wrap/memtrack_api.h,
 * beside the call protocol, so that the drain side never includes the hot path.
 */
#ifndef TRAINPROF_COLLECTOR_MEMTRACK_H
#define TRAINPROF_COLLECTOR_MEMTRACK_H

#include <stdatomic.h>
#include <stdint.h>

#include "collector/common/clock.h"
#include "collector/contract/record.h"

struct tp_mem_usage;   /* sink.h: what a window saw */

/* Most (device, class) pairs tracked; further pairs are not counted. */
#define TP_MEM_MAX_ACCT 96

/* 1 while allocation wrappers must take their slow path even between
 * windows (activated, TRAINPROF_PROFILE_MEMORY=1, not a forked child). */
extern _Atomic int tp_mem_on;

/* tp_mem_enable - set tp_mem_on ("on" 0 or 1); at activation and in a forked
 * child (0: the child's table describes the parent's memory). */
void tp_mem_enable(int on);

/* tp_mem_current_device - the calling thread's current device from the
 * driver (cuCtxGetDevice) when libcuda is already loaded, else 0. */
int tp_mem_current_device(void);

/* tp_mem_pointer_device - the device owning "addr" (cuPointerGetAttribute),
 * else the current device. */
int tp_mem_pointer_device(uint64_t addr);

/*
 * tp_mem_alloc - an allocation call returned.  "ok": it succeeded and "addr"
 * (key; a VMM handle when "handle" is 1) holds "bytes"; else "bytes" is what
 * was asked.  "device" is the owner (-1 for host-pinned memory).  Updates the
 * table and, when "r" is not NULL, fills r->u.mem (and r->kind stays API).
 */
void tp_mem_alloc(struct tp_record *r, int mclass, int device, uint64_t addr, uint64_t bytes,
                  int handle, int ok);

/*
 * tp_mem_free - a free call of "addr" (a VMM handle when "handle" is 1)
 * returned, "ok" when it succeeded.  "mclass" and "device" describe an
 * address the table does not know (TP_MEM_UNKNOWN); addr 0 is TP_MEM_NOOP.
 */
void tp_mem_free(struct tp_record *r, int mclass, int device, uint64_t addr, int handle, int ok);

/* tp_mem_untracked - with TRAINPROF_PROFILE_MEMORY=0 (or before
 * activation): fill "r" (if not NULL) with addr and bytes only. */
static inline void tp_mem_untracked(struct tp_record *r, int mclass, uint64_t addr, uint64_t bytes, int ok)
{
    if (!r)
        return;
    r->u.mem.addr = addr;
    r->u.mem.bytes = bytes;
    r->u.mem.device = mclass == TP_MEM_HOST ? -1 : 0;
    r->u.mem.mclass = (uint8_t)mclass;
    r->u.mem.flags = (uint8_t)(TP_MEM_UNTRACKED | (ok ? 0 : TP_MEM_FAILED));
}

/* tp_mem_free_at - tp_mem_free of "addr"; the device is looked up only for
 * an address the table does not know (from the table otherwise). */
void tp_mem_free_at(struct tp_record *r, int mclass, uint64_t addr, int handle, int ok);

/* tp_mem_window_begin - window "gen" starts recording at tick "now"
 * (training thread, step lock held): resets the in-window counters. */
void tp_mem_window_begin(uint8_t gen, uint64_t now);

/* tp_mem_window_end - window "gen" stops recording at tick "now": keeps its
 * snapshot until tp_mem_window_take. */
void tp_mem_window_end(uint8_t gen, uint64_t now);

/*
 * tp_mem_window_take - the snapshot of window "gen" (flush thread) as a
 * malloc'ed array in *out (device memory first, then managed, then host,
 * each by device), ticks turned into Unix ns with "map".  Returns the number
 * of entries (0 and *out NULL if none or out of memory); the caller frees.
 */
int tp_mem_window_take(uint8_t gen, const struct tp_clock_map *map, struct tp_mem_usage **out);

/* tp_mem_totals - bytes now held and the process peak of (device, class);
 * for tests and handlers of live state.  Returns 0 if never seen. */
int tp_mem_totals(int device, int mclass, uint64_t *total, uint64_t *peak);

/* tp_mem_reset - forget everything (unit tests). */
void tp_mem_reset(void);

#endif
