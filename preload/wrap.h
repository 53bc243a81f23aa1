/*
 * wrap.h - the one shape of every generated wrapper: every wrapper has the
 * same short shape.  Each preload/<lib>.c defines its record
 * expressions (TP_R_*) and expands its .def list through TP_WRAP.
 */
#ifndef TRAINPROF_PRELOAD_WRAP_H
#define TRAINPROF_PRELOAD_WRAP_H

#include "resolve.h"
#include "collector/record/apis.h"
#include "collector/wrap/core.h"
#include "collector/wrap/graphs_api.h"
#include "collector/wrap/memtrack_api.h"
#include "collector/record/inflight.h"

/*
 * TP_WRAP - define the exported wrapper "name".
 *   missing     returned when no real function can be found
 *   on_resolve  run once, after the real function was found
 *   on_entry    run on every call, before the fast path (keep it trivial)
 *   begin       tp_call_begin (CUDA runtime/driver) or tp_lib_begin (libraries)
 *   rec         the record expression: fills tp_r when it is not NULL, and for
 *               launches sets tp_func/tp_fkind for step signals
 * Outside windows the wrapper is one load of tp_hot and a tail call of the
 * real function (the recording path is a separate function, so that the
 * wrapper's frame stays empty); errno and the return value pass through
 * unchanged.  During a
 * CUDA graph capture a call that records nothing still fills a scratch
 * record, so that the capture learns its FLOPs (collector/record/graphs.h).
 */
#define TP_WRAP(ret, name, params, args, missing, on_resolve, on_entry, begin, rec)   \
    TP_WRAP_GATED(TP_GATE_WIN, ret, name, params, args, missing, on_resolve, on_entry, begin, rec)

/*
 * The fast-path test of a wrapper.  "gate" is its .def line's gate column
 * (enum tp_gate, a constant: a wrapper file's TP_FN passes TP_GATE_##gate):
 * TP_GATE_MEM adds tp_mem_on, so that allocation calls reach
 * collector/modules/memtrack.c between windows too, TP_GATE_OWN the same
 * for a library's handle creation (its allocations are the library's), and TP_GATE_PAPI
 * TRAINPROF_SCHEDULE=profiler-api, so that the profiler API's Start reaches
 * the steps between windows, while every other wrapper keeps its one load.
 */
#define TP_PASS(gate) \
    (!tp_hot_load() && \
     !(((gate) == TP_GATE_MEM || (gate) == TP_GATE_OWN) && \
       atomic_load_explicit(&tp_mem_on, memory_order_relaxed)) && \
     !((gate) == TP_GATE_PAPI && tp_cfg.schedule.profiler_api))
#define TP_BEGIN(gate, begin) \
    ((gate) == TP_GATE_MEM ? tp_mem_begin : (gate) == TP_GATE_PAPI ? tp_papi_begin : \
     (gate) == TP_GATE_OWN ? tp_lib_own_begin : (begin))

/* TP_MEM_SITE(gate) - in an exported or lookup-time wrapper about to take
 * its slow path: an allocation's wrapper notes its caller for the memory
 * ledger (tp_mem_begin reads it before the real call). */
#define TP_MEM_SITE(gate) \
    do { if ((gate) == TP_GATE_MEM) tp_mem_site = (uint64_t)(uintptr_t)__builtin_return_address(0); } while (0)

/*
 * tp_papi_begin - tp_call_begin for cudaProfilerStart/Stop and
 * cuProfilerStart/Stop: the outermost call only (the runtime's reaches the
 * driver's inside it: one Start, one Stop), held also between windows.  A
 * Stop ends the window before the real call (collector/control/steps.h); a Start
 * opens one after it succeeded (TP_R_PROFILER), so that neither is an
 * event of the window it bounds.
 */
static inline int tp_papi_begin(struct tp_call *c, uint16_t api)
{
    if (tp_depth > 0)
        return 0;
    if (api == TP_API_cudaProfilerStop || api == TP_API_cuProfilerStop)
        tp_steps_profiler_api(0);
    if (tp_call_begin(c, api))
        return 1;
    c->depth = &tp_depth;   /* tp_hot is 0: no record, the re-entry still folded */
    c->hot = 0;
    c->api = api;
    c->t0 = 0;
    c->ext = 0;
    tp_depth++;
    return 1;
}

/* TP_R_PROFILER(start) - the record expression of the profiler API. */
#define TP_R_PROFILER(start) \
    (void)tp_r; if ((start) && tp_rc == 0) tp_steps_profiler_api(1)

/*
 * Blocking calls (collector/record/inflight.h): a preload file marks one by
 * defining TP_BLOCK_<name> as "~, 1, EXPR" before it expands its .def
 * list, EXPR filling the thread's in-flight slot from the wrapper's
 * parameters (tp_api is the call's id) and giving it back.  A name without
 * that line is not blocking: TP_BLOCKING(name) is then the constant 0 and
 * the wrapper is what it was (the probe idiom: the second and third items
 * of a list that only a defined TP_BLOCK_<name> makes longer).
 */
#define TP_PROBE_2(a, b, ...) b
#define TP_PROBE_3(a, b, c, ...) c
#define TP_PROBE_2_(...) TP_PROBE_2(__VA_ARGS__)
#define TP_PROBE_3_(...) TP_PROBE_3(__VA_ARGS__)
#define TP_BLOCKING(name) TP_PROBE_2_(TP_BLOCK_##name, 0, NULL, ~)
#define TP_BLOCK_EXPR(name) TP_PROBE_3_(TP_BLOCK_##name, 0, NULL, ~)

/* TP_IN_CALL(bytes, handle) - the EXPR of a blocking call that is not a
 * collective: the bytes it moves, its stream, event or pointer. */
#define TP_IN_CALL(bytes, handle) \
    tp_inflight_begin(tp_api, 0, 0, (uint64_t)(bytes), -1, (uint64_t)(uintptr_t)(handle), 0)

/*
 * TP_WRAP_INFLIGHT - "fn", the path of a blocking wrapper of "name" while
 * the hang doctor watches: the slot filled, the wrapper's usual path, the
 * slot cleared.  Never emitted for a call that is not blocking.
 */
#define TP_WRAP_INFLIGHT(fn, ret, name, params, args, gate)                         \
    static __attribute__((noinline, unused)) ret fn params                           \
    {                                                                                \
        const uint16_t tp_api = TP_API_##name;                                       \
        (void)tp_api;                                                                \
        struct tp_inflight *tp_in = TP_BLOCK_EXPR(name);                             \
        tp_fn_##name real = __atomic_load_n(&tp_real_##name, __ATOMIC_ACQUIRE);     \
        ret tp_rc = TP_PASS(gate) ? real args : tp_slow_##name args;                 \
        tp_inflight_end(tp_in);                                                      \
        return tp_rc;                                                                \
    }

/* TP_WRAP_GATED - TP_WRAP with "gate" (enum tp_gate, above). */
#define TP_WRAP_GATED(gate, ret, name, params, args, missing, on_resolve, on_entry, begin, rec) \
    typedef ret (*tp_fn_##name) params;                                              \
    static tp_fn_##name tp_real_##name;                                              \
    TP_WRAP_SLOW(tp_slow_##name, ret, name, params, args, tp_real_##name,            \
                 TP_BEGIN(gate, begin), rec)                                         \
    TP_WRAP_INFLIGHT(tp_inflight_##name, ret, name, params, args, gate)              \
    TP_EXPORT ret name params                                                        \
    {                                                                                \
        tp_fn_##name real = __atomic_load_n(&tp_real_##name, __ATOMIC_ACQUIRE);     \
        if (__builtin_expect(!real, 0)) {                                            \
            real = (tp_fn_##name)tp_resolve(#name);                                  \
            if (!real)                                                               \
                return missing;                                                      \
            on_resolve;                                                              \
            __atomic_store_n(&tp_real_##name, real, __ATOMIC_RELEASE);               \
        }                                                                            \
        on_entry;                                                                    \
        if (TP_BLOCKING(name) &&                                                     \
            __builtin_expect(atomic_load_explicit(&tp_inflight_on, memory_order_relaxed), 0)) \
            return tp_inflight_##name args;                                          \
        if (__builtin_expect(TP_PASS(gate), 1))                                      \
            return real args;                                                        \
        TP_MEM_SITE(gate);                                                           \
        return tp_slow_##name args;                                                  \
    }

/*
 * TP_WRAP_SLOW - define "fn", the recording path of a wrapper of "name"
 * (type tp_fn_##name) whose real function is loaded from "slot".  Shared by
 * TP_WRAP and the driver's lookup-time slot wrappers (preload/driver.c).
 * "begin" answers 0 (pass through), 1 (the call protocol), or, only
 * tp_mem_begin, TP_MEM_LEAN: an allocation between windows, the real call
 * and "rec" with tp_r NULL (the ledger's update) and nothing else
 * (TP_WRAP_LEAN); the test costs the recording path nothing (one test of
 * begin's answer, as before).
 */
#define TP_WRAP_SLOW(fn, ret, name, params, args, slot, begin, rec)                 \
    static __attribute__((noinline)) ret fn params                                   \
    {                                                                                \
        tp_fn_##name real = __atomic_load_n(&(slot), __ATOMIC_ACQUIRE);             \
        struct tp_call tp_c;                                                         \
        int tp_b = begin(&tp_c, TP_API_##name);                                      \
        if (__builtin_expect(tp_b != 1, 0)) {                                        \
            if (!tp_b)                                                               \
                return real args;                                                    \
            TP_WRAP_LEAN(ret, real, args, rec)                                       \
        }                                                                            \
        ret tp_rc = real args;                                                       \
        struct tp_record *tp_r = tp_call_end(&tp_c, (int32_t)tp_rc);                 \
        struct tp_record tp_scratch;                                                 \
        int tp_cap = tp_graphs_capturing(&tp_c);                                     \
        if (__builtin_expect(tp_cap && !tp_r, 0)) {                                  \
            __builtin_memset(&tp_scratch, 0, sizeof tp_scratch);                     \
            tp_scratch.kind = TP_REC_API;                                            \
            tp_scratch.api = TP_API_##name;                                          \
            tp_r = &tp_scratch;                                                      \
        }                                                                            \
        uint64_t tp_func = 0;                                                        \
        int tp_fkind = 0;                                                            \
        rec;                                                                         \
        if (__builtin_expect(tp_cap, 0))                                             \
            tp_graphs_captured(tp_r);                                                \
        if (__builtin_expect((int32_t)tp_rc != 0, 0) && tp_r && tp_r != &tp_scratch)  \
            tp_r = tp_steps_flight_status(tp_r, TP_API_##name, (int32_t)tp_rc);      \
        tp_call_finish(&tp_c, tp_r == &tp_scratch ? NULL : tp_r, tp_func, tp_fkind); \
        return tp_rc;                                                                \
    }

/*
 * TP_WRAP_LEAN - the rest of a wrapper after tp_mem_begin answered
 * TP_MEM_LEAN (tp_depth raised, tp_c's site, outer and api set): the real
 * call, "rec" with no record (the ledger's update, which may call the
 * driver or malloc: errno is the real call's again after it), tp_depth
 * lowered, and the first-call bookkeeping of tp_call_finish (the exit
 * flush's registration).  What tp_call_end and tp_call_finish do besides
 * is for a hot word that is not 0.
 */
#define TP_WRAP_LEAN(ret, real, args, rec)                                           \
    {                                                                                \
        ret tp_rc = real args;                                                       \
        int tp_errno = errno;                                                        \
        struct tp_record *const tp_r = NULL;                                         \
        uint64_t tp_func = 0;                                                        \
        int tp_fkind = 0;                                                            \
        rec;                                                                         \
        (void)tp_r;                                                                  \
        (void)tp_func;                                                               \
        (void)tp_fkind;                                                              \
        tp_depth--;                                                                  \
        if (__builtin_expect(!__atomic_load_n(&tp_exit_hooked, __ATOMIC_RELAXED), 0)) \
            tp_lifecycle_after_call();                                               \
        errno = tp_errno;                                                            \
        return tp_rc;                                                                \
    }

/*
 * TP_REAL_THEN - declare "real" as the real function "name" of type "type",
 * resolved on first use, then run "on_resolve" once; returns "missing" from
 * the caller if none exists.  For hand-written wrappers whose work is not a
 * record (registration, graph capture, communicator bookkeeping).
 */
#define TP_REAL_THEN(type, name, missing, on_resolve)                                \
    static type tp_slot_##name;                                                      \
    type real = __atomic_load_n(&tp_slot_##name, __ATOMIC_ACQUIRE);                  \
    if (__builtin_expect(!real, 0)) {                                                \
        if (!(real = (type)tp_resolve(#name)))                                       \
            return missing;                                                          \
        on_resolve;                                                                  \
        __atomic_store_n(&tp_slot_##name, real, __ATOMIC_RELEASE);                   \
    }

#define TP_REAL(type, name, missing) TP_REAL_THEN(type, name, missing, (void)0)

#endif
