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
#include "protocol.h"

/*
 * tp_mem_begin - tp_call_begin for an allocation or free entry point: also
 * between windows (tp_hot 0) while tp_mem_on, the outermost intercepted call
 * only (runtime -> driver re-entries pass through, so a cudaMalloc counts
 * once).  Returns 1 if the wrapper must go through tp_call_end/finish.
 */
static inline int tp_mem_begin(struct tp_call *c, uint16_t api)
{
    if (tp_call_begin(c, api))
        return 1;
    if (tp_depth > 0 || !atomic_load_explicit(&tp_mem_on, memory_order_relaxed))
        return 0;
    c->depth = &tp_depth;
    c->hot = 0;             /* no window records: no record, only the table */
    c->api = api;
    c->t0 = 0;
    c->ext = 0;
    tp_depth++;
    return 1;
}

/* tp_mem_alloc_at - tp_mem_alloc for a call that returned "addr" ("ok"),
 * the device asked from the driver (none for host-pinned memory). */
static inline void tp_mem_alloc_at(struct tp_record *r, int mclass, uint64_t addr, uint64_t bytes, int ok)
{
    if (!atomic_load_explicit(&tp_mem_on, memory_order_relaxed)) {
        tp_mem_untracked(r, mclass, addr, bytes, ok);
        return;
    }
    int dev = mclass == TP_MEM_HOST ? -1 : ok && addr ? tp_mem_pointer_device(addr) : tp_mem_current_device();
    tp_mem_alloc(r, mclass, dev, addr, bytes, 0, ok);
}

#endif
