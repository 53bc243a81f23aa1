/*
 * memtrack_api.h - the allocation wrappers' side of the memory timeline
 * (collector/modules/memtrack.h): the inline entry and record fill that run
 * on the training thread inside an intercepted call.  Apart from
 * memtrack.h because they need the call protocol (protocol.h), which the
 * flush thread, a reader of memtrack.h, must not include.
 */
#ifndef TRAINPROF_COLLECTOR_MEMTRACK_API_H
#define TRAINPROF_COLLECTOR_MEMTRACK_API_H

#include <stdatomic.h>
#include <stdint.h>

#include "collector/modules/memtrack.h"
#include "collector/record/apis.h"
#include "protocol.h"

/* tp_mem_begin's answer for an allocation between windows: the wrapper
 * takes its lean path (preload/wrap.h TP_WRAP_SLOW), the real call and the
 * ledger only. */
#define TP_MEM_LEAN 2

/*
 * tp_mem_begin - tp_call_begin for an allocation or free entry point: also
 * between windows (tp_hot's flags 0) while tp_mem_on, the outermost
 * intercepted call only (runtime -> driver re-entries pass through, so a
 * cudaMalloc counts once).  Returns 1 if the wrapper must go through tp_call_end/finish,
 * TP_MEM_LEAN between windows: then "c" holds only site, outer and api (what
 * the ledger reads), tp_depth is raised, and the wrapper lowers it after
 * the ledger's update, with no record and no step signal (tp_hot 0 asks for
 * neither: tp_call_end would return NULL and tp_call_finish count nothing).
 */
static inline int tp_mem_begin(struct tp_call *c, uint16_t api)
{
    /* the ledger's owner: the library call around this one, or the
     * library whose own entry point this is (ncclMemAlloc) */
    c->site = tp_mem_site;
    tp_mem_site = 0;        /* a path that sets none reads no stale site */
    c->outer = tp_lib_depth > 0 ? tp_lib_outer
             : api == TP_API_ncclMemAlloc || api == TP_API_ncclMemFree ? api : 0;
    /* tp_hot's flags 0 first (tp_call_begin would answer 0 there, after
     * saving registers it never uses; with no flag the word is 0 as a
     * whole, call.h); a hot word that changes between this load and
     * tp_call_begin's makes either path right */
    if (__builtin_expect(tp_hot_load() & TP_HOT_FLAGS, 0))
        return tp_call_begin(c, api);
    if (tp_depth > 0 || !atomic_load_explicit(&tp_mem_on, memory_order_relaxed))
        return 0;
    c->api = api;           /* no window records: no record, only the table */
    tp_depth++;
    return TP_MEM_LEAN;
}

/*
 * tp_mem_lean_begin - tp_mem_begin for an exported allocation wrapper's
 * lean path (preload/wrap.h TP_WRAP_LEANFN), entered with tp_hot's flags
 * seen 0: 1 if they are not 0 now (the recording path then makes the whole
 * decision, tp_mem_site still set), 0 to pass through (a nested call, or
 * tracking off), TP_MEM_LEAN with "c" and tp_depth as tp_mem_begin leaves
 * them.
 */
static inline int tp_mem_lean_begin(struct tp_call *c, uint16_t api)
{
    if (__builtin_expect(tp_hot_load() & TP_HOT_FLAGS, 0))
        return 1;
    c->site = tp_mem_site;
    tp_mem_site = 0;
    if (tp_depth > 0 || !atomic_load_explicit(&tp_mem_on, memory_order_relaxed))
        return 0;
    c->outer = tp_lib_depth > 0 ? tp_lib_outer
             : api == TP_API_ncclMemAlloc || api == TP_API_ncclMemFree ? api : 0;
    c->api = api;
    tp_depth++;
    return TP_MEM_LEAN;
}

/* Whether library calls mark their thread for the ledger: while
 * allocations are tracked, and before activation (the call may be the one
 * that activates: a job's first CUDA call is often ncclCommInitRank's or
 * cublasCreate's own allocation). */
static inline int tp_lib_marks(void)
{
    return atomic_load_explicit(&tp_mem_on, memory_order_relaxed) || (tp_hot_load() & TP_HOT_INACTIVE);
}

/*
 * tp_lib_own_begin - tp_lib_begin for a library call that allocates the
 * library's own device memory (a handle's creation: the .def lists' gate
 * OWN): also between windows while allocations are tracked, the outermost
 * library call only, so that the ledger names the library as the owner of
 * what the call allocates.  No record outside windows.
 */
static inline int tp_lib_own_begin(struct tp_call *c, uint16_t api)
{
    if (tp_lib_begin(c, api))
        return 1;
    if (tp_lib_depth > 0 || tp_depth > 0 || !tp_lib_marks())
        return 0;
    c->depth = &tp_lib_depth;
    c->hot = 0;
    c->api = api;
    c->t0 = 0;
    c->ext = 0;
    tp_lib_outer = api;
    tp_lib_depth++;
    return 1;
}

/* tp_lib_mark - around a library call wrapped by hand (preload/nccl.c's
 * communicator creation), "outer" a TP_OUTER_* id: marks the thread as
 * inside it while allocations are tracked; returns what tp_lib_unmark takes. */
static inline int tp_lib_mark(uint16_t outer)
{
    if (tp_lib_depth > 0 || !tp_lib_marks())
        return 0;
    tp_lib_outer = outer;
    tp_lib_depth++;
    return 1;
}

static inline void tp_lib_unmark(int marked)
{
    if (marked)
        tp_lib_depth--;
}

/* tp_mem_from_call - what the ledger keeps of where call "c" came from. */
static inline struct tp_mem_from tp_mem_from_call(const struct tp_call *c, int oom)
{
    struct tp_mem_from f = { c->site, c->outer, c->api, (uint8_t)(oom != 0) };
    return f;
}

/* tp_mem_alloc_at - tp_mem_alloc for call "c" that returned "addr" ("ok";
 * "oom": it failed for want of memory), the device asked from the driver
 * (none for host-pinned memory). */
static inline void tp_mem_alloc_at(struct tp_record *r, const struct tp_call *c, int mclass, uint64_t addr,
                                   uint64_t bytes, int ok, int oom)
{
    if (!atomic_load_explicit(&tp_mem_on, memory_order_relaxed)) {
        tp_mem_untracked(r, mclass, addr, bytes, ok);
        return;
    }
    /* no record (the lean path's is a constant NULL, folded there): the
     * entry whose arguments all travel in registers */
    if (!r)
        tp_mem_alloc_lean(mclass, addr, bytes, ok, tp_mem_from_call(c, oom));
    else
        tp_mem_alloc_here(r, mclass, addr, bytes, ok, tp_mem_from_call(c, oom));
}

#endif
