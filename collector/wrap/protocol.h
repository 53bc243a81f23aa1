/*
 * protocol.h - the call protocol every wrapper follows (preload/wrap.h):
 * tp_call_begin before the real call, tp_call_end after it (a record slot
 * while recording), tp_call_finish to publish.  Its state, the hot word
 * and the per-thread guards, is in call.h; the slow paths are activation's
 * (lifecycle.h) and the step signals' (steps.h).
 */
#ifndef TRAINPROF_COLLECTOR_PROTOCOL_H
#define TRAINPROF_COLLECTOR_PROTOCOL_H

#include <errno.h>
#include <stdint.h>

#include "collector/record/buffer.h"
#include "collector/record/call.h"
#include "collector/common/clock.h"
#include "collector/control/lifecycle.h"
#include "collector/contract/record.h"
#include "collector/modules/stack.h"
#include "collector/control/steps.h"

/* External correlation around a library call (collector/device/cupti.c): the id is
 * the call's start tick, which the flush thread finds again in its record. */
void tp_cupti_ext_push(uint64_t id);
void tp_cupti_ext_pop(void);

/*
 * tp_call_begin - called when tp_hot is non-zero.  Returns 1 if the wrapper
 * must go through tp_call_end/tp_call_finish, 0 for a plain pass-through
 * (nested call, passive profiler).
 */
static inline int tp_call_begin_at(struct tp_call *c, uint16_t api, int *depth)
{
    uint32_t hot = tp_hot_load();
    if (__builtin_expect(*depth > 0 || tp_depth > 0 || !hot, 0))
        return 0;
    c->depth = depth;
    if (__builtin_expect(hot & TP_HOT_INACTIVE, 0))
        return tp_call_begin_slow(c, api, hot);
    c->hot = hot;
    c->api = api;
    c->t0 = (hot & TP_HOT_RECORDING) ? tp_clock_now() : 0;
    c->ext = depth == &tp_lib_depth && (hot & TP_HOT_EXTCORR);
    if (__builtin_expect(c->ext, 0))
        tp_cupti_ext_push(c->t0);
    if (depth == &tp_lib_depth)
        tp_lib_outer = api;         /* the memory ledger's owner of what it allocates */
    (*depth)++;
    return 1;
}

static inline int tp_call_begin(struct tp_call *c, uint16_t api)
{
    return tp_call_begin_at(c, api, &tp_depth);
}

/* tp_lib_begin - tp_call_begin for a math or communication library call. */
static inline int tp_lib_begin(struct tp_call *c, uint16_t api)
{
    return tp_call_begin_at(c, api, &tp_lib_depth);
}

/*
 * tp_call_end - after the real call: saves errno, and while recording returns
 * a record slot with the common fields filled (or NULL).
 */
static inline struct tp_record *tp_call_end(struct tp_call *c, int32_t status)
{
    c->saved_errno = errno;
    uint64_t t1 = 0;
    if (__builtin_expect(c->hot & TP_HOT_INACTIVE, 0)) {
        t1 = tp_clock_now();        /* the call's end, before activation's own cost */
        c->hot = tp_call_activated(status);
    }
    if (__builtin_expect(c->ext, 0))
        tp_cupti_ext_pop();
    if (!(c->hot & TP_HOT_RECORDING))
        return NULL;
    if (__builtin_expect(!t1, 1))
        t1 = tp_clock_now();
    if (__builtin_expect(c->hot & TP_HOT_STACK, 0))
        tp_stack_record(TP_HOT_GEN(c->hot), c->t0);   /* STACK records precede the call's */
    struct tp_record *r = tp_buf_reserve();
    if (r) {
        r->kind = TP_REC_API;
        r->gen = TP_HOT_GEN(c->hot);
        r->api = c->api;
        r->status = status;
        r->t0 = c->t0;
        r->t1 = t1;
        __builtin_memset(&r->u, 0, sizeof r->u);
    }
    return r;
}

/*
 * tp_call_finish - publishes "r" (if not NULL), counts step signals (for
 * launches "func" and "func_kind" name the kernel), restores errno.
 */
static inline void tp_call_finish(struct tp_call *c, struct tp_record *r, uint64_t func, int func_kind)
{
    if (r)
        tp_buf_commit();
    (*c->depth)--;
    tp_lifecycle_check();
    if (c->hot & (TP_HOT_LAUNCH_SIG | TP_HOT_CALL_SIG))
        tp_call_signal(c, func, func_kind);
    errno = c->saved_errno;
}

#endif
