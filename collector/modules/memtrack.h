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

#include "collector/record/apis.h"

/* Where an allocation came from, as its wrapper saw it (tp_mem_begin,
 * collector/wrap/memtrack_api.h): raw values only, named on tp-flush. */
struct tp_mem_from {
    uint64_t site;      /* the return address into the caller of the allocation
                           wrapper entered first, 0 if unknown */
    uint16_t outer;     /* the outermost library call around it (enum
                           tp_api_id or TP_OUTER_*), or the allocation's own
                           library entry point (ncclMemAlloc); 0 if none */
    uint16_t api;       /* the allocation entry point */
    uint8_t  oom;       /* a failed call: it failed for want of memory */
};

/* Library calls wrapped by hand (preload/nccl.c's communicator creation),
 * as values of tp_lib_outer past the generated ids. */
enum tp_outer_hand {
    TP_OUTER_ncclCommInitRank = TP_API_COUNT,
    TP_OUTER_ncclCommInitRankConfig,
    TP_OUTER_ncclCommInitRankScalable,
    TP_OUTER_ncclCommInitAll,
    TP_OUTER_ncclCommSplit,
    TP_OUTER_ncclCommShrink,
    TP_OUTER_ncclCommGrow,
    TP_OUTER_END
};

/* tp_outer_name - the name of library call "id" (enum tp_api_id or
 * TP_OUTER_*), "" if none. */
const char *tp_outer_name(unsigned id);

/* A record's u.mem.origin when the ledger has no call site for it. */
#define TP_MEM_NO_ORIGIN UINT32_MAX
/* Most call sites the ledger keeps apart; later ones share one origin per
 * (device, class) whose site is unknown. */
#define TP_MEM_MAX_ORIGINS 16384
/* Step ends the ledger remembers per call site (what grew since each). */
#define TP_MEM_GROWTH 10

/* One call site of the ledger, as tp-flush reads it (tp_mem_origins). */
struct tp_mem_origin_info {
    uint64_t site;
    uint32_t stack;         /* its native stack (tp_mem_stack), 0 if none */
    uint16_t outer, api;
    int16_t  device;
    uint8_t  mclass;
    uint64_t live;          /* bytes held now (tp_mem_origins) or at the
                               failure (tp_mem_oom_take) */
    uint64_t peak;          /* the most it held at once */
    uint64_t allocated;     /* bytes of its successful allocations */
    uint64_t allocs, frees, failed;
    uint64_t wstart;        /* held when the window asked for began */
    uint64_t at_step[TP_MEM_GROWTH]; /* held at the end of step
                               steps - i (i = 0..9, steps: see the caller) */
};

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
                  int handle, int ok, struct tp_mem_from from);

/* tp_mem_alloc_here - tp_mem_alloc of an address (not a VMM handle) on the
 * device the driver gives: the pointer's (tp_mem_pointer_device) after a
 * successful call, else the calling thread's current one; none for
 * host-pinned memory. */
void tp_mem_alloc_here(struct tp_record *r, int mclass, uint64_t addr, uint64_t bytes, int ok,
                       struct tp_mem_from from);

/* tp_mem_alloc_lean - tp_mem_alloc_here with no record (an allocation
 * between windows: preload/wrap.h TP_WRAP_LEAN). */
void tp_mem_alloc_lean(int mclass, uint64_t addr, uint64_t bytes, int ok, struct tp_mem_from from);

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

/* tp_mem_step - "steps" steps have completed (the step path, at each step
 * end; one atomic store): the ledger's growth table counts from them. */
void tp_mem_step(uint64_t steps);

/*
 * tp_mem_origins - every call site the ledger knows (tp-flush), as a
 * malloc'ed array in *out (index = the records' u.mem.origin), with wstart
 * from the start of window "gen" when "gen" >= 0 (*wstart_known 1 if that
 * window's starts were still kept) and at_step[] at the last step ends
 * before now (*steps: steps completed).  Returns the count (0, *out NULL:
 * none or out of memory); the caller frees.
 */
int tp_mem_origins(int gen, struct tp_mem_origin_info **out, int *wstart_known, uint64_t *steps);

/* A failed allocation, the first of its burst (tp_mem_oom_take). */
struct tp_mem_oom {
    uint64_t ns;                /* when it returned (tp_clock_ns) */
    uint64_t bytes;             /* what it asked for */
    int16_t  device;
    uint8_t  mclass;
    struct tp_mem_from from;
    int32_t  tid;
    uint64_t steps;             /* steps completed then */
    int      meminfo;           /* the driver answered cuMemGetInfo: */
    uint64_t dev_free, dev_total;
    uint32_t origin;            /* its call site (live 0 if it never allocated) */
    /* the burst so far: failed calls, frees, and successful allocations after the first failure */
    uint64_t failures, frees_after, allocs_after;
    uint64_t last_ns;           /* the burst's latest failure */
    unsigned burst;             /* 1 for the process's first burst, ... */
};

/*
 * tp_mem_oom_take - tp-flush: when a burst of failed allocations began at
 * least "settle_ns" before "now" (both tp_clock_ns) and has no report yet, fills
 * *o and returns the call sites as the ledger held them at the burst's
 * first failure (at_step[] at the step ends before it) in *out, marks the
 * burst reported and returns their count (>= 0); -1 when none is due.
 */
int tp_mem_oom_take(uint64_t now, uint64_t settle_ns, struct tp_mem_oom *o,
                    struct tp_mem_origin_info **out);

/* tp_mem_stack - the frames of stack "id" (innermost first, the first the
 * caller of the allocation), at most "max"; their count (0: none). */
int tp_mem_stack(uint32_t id, uint64_t *ips, int max);

/* tp_mem_oom_pending - a burst of failed allocations awaits its report. */
int tp_mem_oom_pending(void);

/* tp_mem_reset - forget everything (unit tests). */
void tp_mem_reset(void);

#endif
