/*
 * window.c - DESIGN: turns one closed window of raw records into events for
 * the handlers, on the tp-flush thread (window.h).  tp_window_write
 *   1. describes the window (tp_window_describe): its batch, its file
 *      names and what the configuration and the hand-off (handoff.h) say
 *      of it, into the struct tp_window the handlers read;
 *   2. peeks at its records once (tp_buf_drain counting, tp_window_peek),
 *      before the handlers open, so that a trace can state its counts
 *      before its events; the one peek collects what the handlers need:
 *      the records and the stale ones (late), the steps with their
 *      boundaries, the launches and the names lost, the library FLOPs
 *      (summed per step once the steps are sorted), torch's operators
 *      (tp_oplink_add, oplink.c) and, with CUPTI's records, the host side
 *      of the host/device join (tp_join_host, join.c), which writes
 *      the joined correlation into the record and so comes last;
 *   3. converts and dispatches each record to every handler, giving the
 *      chunks back to the pool as it goes, so peak memory stays near the
 *      records already held.
 * The records are walked twice.  They were walked six times, a peek per
 * need (count, steps, FLOPs, operators, join, then the dispatch): on the
 * fake runtime the peeks of one window of 200,002 records took 40.8 M
 * instructions before its dispatch, the one peek 30.2 M
 * (tests/bench/RESULTS.md).
 * Names are resolved here: API names from the tables, kernel
 * names from the registration table (demangled once per kernel), then
 * cudaFuncGetName, then the stub's symbol, then its address.  Handlers
 * are reached through the sink (sink.h) only: the window they see is
 * read-only, what they saved comes back in a struct tp_saved, and the
 * sink's post-save stage (TRAINPROF_EXEC, TRAINPROF_KEEP) runs after them.
 * What the window lost (events to a full buffer, device records, names to
 * a full name table, ranges, pops with nothing to pop) is counted before
 * the handlers open, for the trace's trainprof object and the summary, and
 * said in one stderr line per window.
 * The folders are expanded per window (they may hold {batch}) and a
 * relative one is made absolute under the working directory at activation
 * (tp_cfg.start_dir): a program's chdir between two windows split one run
 * over two folders before, and the saved lines gave relative paths.
 * A partial window (closed at exit) whose {batch} is the one of the window
 * written before it holds no step: only the calls made between the last
 * save and exit.  It is discarded, rather than saved as an empty trace
 * under the previous window's name.  Not so with profiler-API windows,
 * opened by the program's cudaProfilerStart: there a {batch} that repeats
 * (two windows in one step) takes output.c's "-1" suffix.
 * The flight recorder's window (handoff.h "flight") is a window too: with
 * a reason it is dumped as one, first trimmed to its oldest kept step
 * (tp_buf_trim), named with {batch} as "flight-REASON.STEP" (so the
 * default name is rank0.flight-slow-step.41.pt.trace.json), its reason in
 * the trace's and summary's "flight" object and one warning line; without
 * one it is drained unsaved, consumed (the window after it must not find
 * its records stale).  It has no device side: CUPTI is off outside windows.
 */
#include "collector/record/apis.h"
#include "collector/record/buffer.h"
#include "collector/common/clock.h"
#include "collector/record/comms.h"
#include "collector/config/config.h"
#include "collector/device/cupti.h"
#include "join.h"
#include "collector/device/props.h"
#include "collector/common/loader.h"
#include "collector/common/format.h"
#include "collector/common/grow.h"
#include "collector/record/graphs.h"
#include "collector/record/intern.h"
#include "collector/record/kernels.h"
#include "collector/common/log.h"
#include "collector/modules/memtrack.h"
#include "memview.h"
#include "oplink.h"
#include "collector/record/oplost.h"
#include "collector/record/pgroup.h"
#include "collector/modules/stack.h"
#include "collector/modules/sysstat.h"
#include "collector/record/torchop.h"
#include "collector/contract/sink.h"
#include "window.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Kineto's time base: floor(unix_s / 7889238) * 7889238 s (a quarter of a year). */
#define TP_TRIMONTH_S 7889238ll

static uint64_t tp_next_corr = 1;          /* correlation ids of our own, flush thread only */
static _Atomic uint64_t tp_saved_windows;  /* traces saved (tp_window_saved) */
static int64_t tp_last_batch = -1;         /* {batch} of the last window handled, flush thread only */

struct tp_dispatch {
    const struct tp_handler *h[TP_MAX_HANDLERS];
    void *st[TP_MAX_HANDLERS];
    int n;
    struct tp_clock_map map;
    int32_t pid;
    struct tp_join *join;       /* device side, NULL without CUPTI */
    struct tp_stack_scratch stk;   /* TRAINPROF_WITH_STACK: frames of the next record */
    struct tp_stack_corr *cf;      /* correlation -> frames of host calls, for
                                      the device events they caused */
    struct tp_oplink *ops;         /* torch's operators, NULL if out of memory */
    const struct tp_steps *steps;  /* the window's steps, for their External ids */
    const struct tp_memview *mv;   /* owners of allocations, NULL if memory is not tracked */
};

struct tp_steps;
static uint64_t tp_step_external(const struct tp_steps *s, uint64_t t);

static void tp_dispatch_event(void *ctx, const struct tp_event *ev)
{
    struct tp_dispatch *d = ctx;
    for (int i = 0; i < d->n; i++)
        if (d->st[i] && d->h[i]->event)
            d->h[i]->event(d->st[i], ev);
}

static const char *tp_kernel_name(uint64_t func, int kind, char *buf, size_t bufsz)
{
    if (kind == TP_FUNC_GRAPH)
        return "";
    uint32_t id = tp_kernels_name_id(func, kind);
    if (id)
        return tp_intern_str(id);
    if (kind == TP_FUNC_STUB) {
        typedef int (*getname_fn)(const char **, const void *);
        getname_fn getname = (getname_fn)tp_dlsym_real(RTLD_DEFAULT, "cudaFuncGetName");
        const char *n = NULL;
        if (getname && getname(&n, (const void *)(uintptr_t)func) == 0 && n) {
            tp_demangle(n, buf, bufsz);
            return buf;
        }
        Dl_info info;
        if (dladdr((const void *)(uintptr_t)func, &info) && info.dli_sname &&
            info.dli_saddr == (void *)(uintptr_t)func) {
            tp_demangle(info.dli_sname, buf, bufsz);
            return buf;
        }
    }
    snprintf(buf, bufsz, "kernel@0x%llx", (unsigned long long)func);
    return buf;
}

static void tp_dispatch_record(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    struct tp_dispatch *d = ctx;
    if (r->kind == TP_REC_STACK) {
        tp_stack_gather(&d->stk, t, r);
        return;
    }
    char kbuf[TP_INTERN_LEN_MAX + 1];
    struct tp_torch_op op;
    struct tp_op_autograd ag;
    struct tp_event ev;
    memset(&ev, 0, sizeof ev);
    ev.rec = r;
    ev.pid = d->pid;
    ev.tid = t->tid;
    ev.thread_name = t->name;
    ev.cbid = -1;
    ev.ts_ns = tp_clock_to_unix_ns(&d->map, r->t0);
    ev.dur_ns = tp_clock_span_ns(&d->map, r->t0, r->t1);
    ev.frames = tp_stack_take(&d->stk, t, r, &ev.n_frames);
    if (d->mv)
        tp_memview_event(d->mv, &ev);
    switch (r->kind) {
    case TP_REC_API:
    case TP_REC_LAUNCH: {
        ev.name = tp_api_name(r->api);
        ev.cbid = tp_api_cbid(r->api);
        ev.layer = (uint8_t)tp_api_layer(r->api);
        ev.form = (uint8_t)tp_api_form(r->api);
        uint32_t corr = r->kind == TP_REC_LAUNCH ? r->u.launch.corr : r->u.api.corr;
        if (d->join)
            tp_join_event(d->join, &ev);
        if (!ev.correlation)
            ev.correlation = corr ? corr : tp_next_corr++;
        if (ev.layer == TP_LAYER_LIBRARY)
            ev.external_id = ev.correlation;    /* Kineto: a cpu_op's External id is its own id */
        if (!ev.external_id) {
            /* a runtime or driver call: the innermost of torch's operators
             * around it, else its step (Kineto's ProfilerStep id) */
            ev.external_id = tp_oplink_find(d->ops, t->tid, r->t0);
            if (!ev.external_id)
                ev.external_id = tp_step_external(d->steps, r->t0);
            if (ev.external_id)
                tp_oplink_note(d->ops, ev.correlation, ev.external_id);
        }
        if (ev.frames && d->join)
            tp_stack_corr_put(&d->cf, ev.correlation, ev.frames, ev.n_frames);
        if (r->kind == TP_REC_LAUNCH)
            ev.kernel = tp_kernel_name(r->u.launch.func, r->u.launch.func_kind, kbuf, sizeof kbuf);
        if (r->kind == TP_REC_LAUNCH && r->u.launch.func_kind == TP_FUNC_GRAPH)
            ev.flops = tp_graphs_exec_flops(r->u.launch.func);
        break;
    }
    case TP_REC_RANGE:
        ev.name = tp_intern_str(r->u.range.name);
        ev.domain = r->u.range.domain ? tp_intern_str(r->u.range.domain) : NULL;
        if (r->u.range.tid)
            ev.tid = r->u.range.tid;
        if (d->ops && tp_torch_op_of(r, ev.name, &op)) {
            ev.op = &op;
            ev.external_id = op.op_id;
            ag = (struct tp_op_autograd){ .seq = op.seq };
            tp_oplink_autograd_of(d->ops, op.op_id, &ag);
            ev.autograd = &ag;
        }
        break;
    case TP_REC_MARK:
    case TP_REC_COUNTER:
        ev.name = tp_intern_str(r->u.mark.name);
        ev.domain = r->u.mark.domain ? tp_intern_str(r->u.mark.domain) : NULL;
        ev.dur_ns = 0;
        break;
    case TP_REC_STEP:
        if (r->u.step.tid) {        /* from the step markers' buffer: its thread */
            memcpy(kbuf, r->u.step.thread, sizeof r->u.step.thread);
            kbuf[sizeof r->u.step.thread - 1] = 0;
            ev.tid = r->u.step.tid;
            ev.thread_name = kbuf;
        }
        break;
    default:
        return;
    }
    tp_dispatch_event(d, &ev);
}

/* A device event, with the frames of the host call it is linked to: its
 * launch, else the library call that issued it (External id). */
static void tp_dispatch_dev_event(void *ctx, const struct tp_event *ev)
{
    struct tp_dispatch *d = ctx;
    struct tp_event e = *ev;
    if (!e.external_id && d->ops)
        e.external_id = tp_oplink_corr(d->ops, e.correlation);
    if (d->cf && ev->flow)
        e.frames = tp_stack_corr_get(d->cf, ev->correlation, &e.n_frames);
    if (d->cf && !e.frames)
        e.frames = tp_stack_corr_get(d->cf, ev->external_id, &e.n_frames);
    tp_dispatch_event(d, &e);
}

/* Host statistics of the window as counter events (units in the names). */
static void tp_dispatch_samples(struct tp_dispatch *d, const struct tp_handoff *w)
{
    struct tp_sys_sample *v = NULL;
    size_t n = tp_sys_take(w->start_tick, w->end_tick, &v);
    for (size_t i = 0; i < n; i++) {
        struct tp_record r = { .kind = TP_REC_COUNTER, .t0 = v[i].tick, .t1 = v[i].tick };
        r.u.mark.value = v[i].value;
        struct tp_event ev = {
            .rec = &r, .name = tp_sys_name(v[i].name), .thread_name = "", .cbid = -1,
            .pid = d->pid, .tid = d->pid, .ts_ns = tp_clock_to_unix_ns(&d->map, v[i].tick),
        };
        tp_dispatch_event(d, &ev);
    }
    free(v);
}

/* ---- the steps and their FLOPs, from the one peek ------------------------- */

struct tp_step_ticks {
    uint64_t t0, t1;
    uint64_t index;
    int32_t tid;
    char thread_name[16];
};

/* A record's FLOPs, kept until the steps are sorted: "t0" places it. */
struct tp_flops_at {
    uint64_t t0, flops;
};

struct tp_steps {
    struct tp_step_ticks *tick;    /* sorted by index, hence by time */
    struct tp_window_step *v;      /* what handlers see, parallel to tick */
    size_t n, cap;
    uint64_t flops;
    uint64_t launches;             /* launch records */
    uint64_t names_lost;           /* records named "<name table full>" */
    /* the peek's FLOPs, given to the steps once all are known (a step's
     * marker may come after the calls inside it, from another buffer) */
    uint64_t flops_seen;
    struct tp_flops_at *fl;
    size_t n_fl, cap_fl;
};

/* Whether record "r" names itself "<name table full>": a name the full
 * table refused (its kernel's name is resolved here, as the dispatch would,
 * so that the count precedes the events). */
static int tp_record_name_lost(const struct tp_record *r)
{
    switch (r->kind) {
    case TP_REC_RANGE:
        return r->u.range.name == TP_INTERN_OVERFLOW || r->u.range.domain == TP_INTERN_OVERFLOW ||
               (r->u.range.source == TP_RANGE_TORCH && r->u.range.sizes == TP_INTERN_OVERFLOW);
    case TP_REC_MARK:
    case TP_REC_COUNTER:
        return r->u.mark.name == TP_INTERN_OVERFLOW || r->u.mark.domain == TP_INTERN_OVERFLOW;
    case TP_REC_LAUNCH:
        return r->u.launch.func_kind != TP_FUNC_GRAPH &&
               tp_kernels_name_id(r->u.launch.func, r->u.launch.func_kind) == TP_INTERN_OVERFLOW;
    default:
        return 0;
    }
}

static void tp_collect_step(struct tp_steps *s, const struct tp_tbuf *t, const struct tp_record *r)
{
    s->launches += r->kind == TP_REC_LAUNCH;
    s->names_lost += tp_record_name_lost(r);
    if (r->kind != TP_REC_STEP)
        return;
    struct tp_step_ticks *v = tp_grow(s->tick, &s->cap, s->n + 1, sizeof *v, 64);
    if (!v)
        return;
    s->tick = v;
    v = &s->tick[s->n++];
    *v = (struct tp_step_ticks){ r->t0, r->t1, r->u.step.index, r->u.step.tid, "" };
    memcpy(v->thread_name, r->u.step.thread, sizeof v->thread_name);
    v->thread_name[sizeof v->thread_name - 1] = 0;
    if (!v->tid) {                  /* written into the thread's own buffer */
        v->tid = t->tid;
        memcpy(v->thread_name, t->name, sizeof v->thread_name);
    }
}

/* The FLOPs a record stands for: library calls that ran (not those captured
 * into a graph: they run at its launches), and graph launches. */
static uint64_t tp_record_flops(const struct tp_record *r)
{
    if (r->kind == TP_REC_LAUNCH)
        return r->u.launch.func_kind == TP_FUNC_GRAPH ? tp_graphs_exec_flops(r->u.launch.func) : 0;
    int form = tp_api_form(r->api);
    if (r->kind != TP_REC_API || !tp_form_counts_flops(form) || (r->u.lib.flags & TP_LIB_CAPTURED))
        return 0;
    return r->u.lib.flops;
}

/* Keep record "r"'s FLOPs for its step (tp_steps_finish).  Out of memory,
 * the window's total still counts them; its step does not. */
static void tp_collect_flops(struct tp_steps *s, const struct tp_record *r)
{
    uint64_t flops = tp_record_flops(r);
    if (!flops)
        return;
    s->flops_seen += flops;
    struct tp_flops_at *v = tp_grow(s->fl, &s->cap_fl, s->n_fl + 1, sizeof *v, 1024);
    if (!v)
        return;
    s->fl = v;
    s->fl[s->n_fl++] = (struct tp_flops_at){ r->t0, flops };
}

/* The index + 1 of the last step that began at or before tick "t", 0 if none. */
static size_t tp_step_before(const struct tp_steps *s, uint64_t t)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->tick[mid].t0 <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The External id of the recorded step that tick "t" lies in, 0 if none. */
static uint64_t tp_step_external(const struct tp_steps *s, uint64_t t)
{
    if (!s || !s->v)
        return 0;
    size_t lo = tp_step_before(s, t);
    return lo > 0 && t < s->tick[lo - 1].t1 ? TP_STEP_EXTERNAL_ID(s->tick[lo - 1].index) : 0;
}

/* Steps end in index order (under the step lock), so index order is time order. */
static int tp_step_cmp(const void *a, const void *b)
{
    const struct tp_step_ticks *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* After the peek: sort the steps, describe them for the handlers and give
 * each the FLOPs of the calls it holds; s->v is NULL if memory ran out
 * (then no FLOPs are told, as no steps are). */
static void tp_steps_finish(struct tp_steps *s, const struct tp_clock_map *map)
{
    if (s->n > 1)
        qsort(s->tick, s->n, sizeof *s->tick, tp_step_cmp);
    s->v = calloc(s->n ? s->n : 1, sizeof *s->v);
    if (s->v) {
        for (size_t i = 0; i < s->n; i++)
            s->v[i] = (struct tp_window_step){
                .index = s->tick[i].index,
                .start_ns = tp_clock_to_unix_ns(map, s->tick[i].t0),
                .end_ns = tp_clock_to_unix_ns(map, s->tick[i].t1),
                .tid = s->tick[i].tid,
                .thread_name = s->tick[i].thread_name,
            };
        s->flops = s->flops_seen;
        for (size_t i = 0; i < s->n_fl; i++) {
            size_t lo = tp_step_before(s, s->fl[i].t0);
            if (lo > 0 && s->fl[i].t0 < s->tick[lo - 1].t1)
                s->v[lo - 1].flops += s->fl[i].flops;
        }
    }
    free(s->fl);
    s->fl = NULL;
    s->n_fl = s->cap_fl = 0;
}

/* ---- the one peek ---------------------------------------------------------- */

/* A flight dump's memory levels, from its own records: the ring keeps
 * the last steps only, so the totals at its first kept step were never
 * taken; each allocation or free record carries its (device, class)
 * total after the call, and the earliest one gives the level before it. */
struct tp_flmem {
    int16_t device;
    uint8_t mclass;
    uint64_t first_t1, start, peak, peak_tick;
    uint64_t allocs, frees, failed, failed_bytes;
};
#define TP_FLMEM_MAX 96             /* memtrack.h's TP_MEM_MAX_ACCT */

struct tp_peek {
    struct tp_steps *steps;
    struct tp_oplink *ops;         /* NULL if out of memory */
    struct tp_join *join;       /* NULL without CUPTI */
    struct tp_flmem *flmem;     /* a flight dump's (else NULL), TP_FLMEM_MAX */
    int n_flmem;
    struct tp_memview *mv;      /* NULL if memory is not tracked */
};

static void tp_flmem_add(struct tp_peek *p, const struct tp_record *r)
{
    int form = tp_api_form(r->api);
    if (r->kind != TP_REC_API || (form != TP_FORM_ALLOC && form != TP_FORM_FREE) ||
        (r->u.mem.flags & TP_MEM_UNTRACKED))
        return;
    struct tp_flmem *m = NULL;
    for (int i = 0; i < p->n_flmem && !m; i++)
        if (p->flmem[i].device == r->u.mem.device && p->flmem[i].mclass == r->u.mem.mclass)
            m = &p->flmem[i];
    if (!m) {
        if (p->n_flmem == TP_FLMEM_MAX)
            return;
        m = &p->flmem[p->n_flmem++];
        memset(m, 0, sizeof *m);
        m->device = r->u.mem.device;
        m->mclass = r->u.mem.mclass;
        m->first_t1 = UINT64_MAX;
    }
    uint64_t total = r->u.mem.total, b = r->u.mem.bytes;
    int changed = !(r->u.mem.flags & (TP_MEM_FAILED | TP_MEM_NOOP | TP_MEM_UNKNOWN));
    if (r->u.mem.flags & TP_MEM_FAILED) {
        m->failed++;
        if (b > m->failed_bytes)
            m->failed_bytes = b;
    } else if (changed) {
        if (form == TP_FORM_ALLOC)
            m->allocs++;
        else
            m->frees++;
    }
    if (r->t1 < m->first_t1) {      /* threads are drained one after another */
        m->first_t1 = r->t1;
        m->start = !changed ? total : form == TP_FORM_ALLOC ? (total >= b ? total - b : 0)
                                                            : total + b;
    }
    if (total > m->peak || !m->peak_tick) {
        m->peak = total;
        m->peak_tick = r->t1;
    }
}

/* A flight dump's rows (memtrack's end totals) completed from its records. */
static void tp_flmem_apply(const struct tp_peek *p, struct tp_mem_usage *mem, int n,
                           const struct tp_clock_map *map, int64_t start_ns)
{
    for (int i = 0; i < n; i++) {
        struct tp_mem_usage *u = &mem[i];
        const struct tp_flmem *m = NULL;
        for (int k = 0; k < p->n_flmem && !m; k++)
            if (p->flmem[k].device == u->device && p->flmem[k].mclass == u->mclass)
                m = &p->flmem[k];
        u->allocs = m ? m->allocs : 0;
        u->frees = m ? m->frees : 0;
        u->failed = m ? m->failed : 0;
        u->failed_bytes = m ? m->failed_bytes : 0;
        u->start_bytes = m ? m->start : u->end_bytes;
        u->peak_bytes = u->start_bytes > u->end_bytes ? u->start_bytes : u->end_bytes;
        u->peak_ns = start_ns;
        if (m && m->peak > u->peak_bytes) {
            u->peak_bytes = m->peak;
            u->peak_ns = tp_clock_to_unix_ns(map, m->peak_tick);
        }
    }
}

/* Everything the handlers need from record "r" before they open.  The join
 * comes last: it writes the joined correlation into the record (the
 * record is ours to annotate: its writer finished with it when the window
 * closed), which the others must read as written. */
static void tp_window_peek(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    struct tp_peek *p = ctx;
    tp_collect_step(p->steps, t, r);
    tp_collect_flops(p->steps, r);
    if (p->ops)
        tp_oplink_add(p->ops, t, r);
    if (p->join)
        tp_join_host(p->join, t, (struct tp_record *)r);
    if (p->flmem)
        tp_flmem_add(p, r);
    tp_memview_add(p->mv, r);
}

uint64_t tp_window_saved(void)
{
    return atomic_load(&tp_saved_windows);
}

void tp_window_idle(void)
{
    const struct tp_sink *sink = tp_sink_get();
    if (sink)
        sink->idle();
}

void tp_window_finish(void)
{
    const struct tp_sink *sink = tp_sink_get();
    if (sink)
        sink->finish();
}

/* Expands format string "fmt" of variable "what"; a folder ("base": the
 * working directory at activation) is made absolute under it: a chdir of
 * the program between two windows must not split a run over two folders,
 * and the paths printed and given to TRAINPROF_EXEC are absolute.  Still
 * expanded per window: a folder may hold {batch}. */
static int tp_expand(const char *what, const char *fmt, const struct tp_format_vars *v,
                     const char *base, char *out, size_t outsz)
{
    char err[512];
    if (tp_format_expand_at(fmt, v, base, out, outsz, err, sizeof err) == 0)
        return 0;
    TP_ERROR("%s=\"%s\": %s: window not saved", what, fmt, err);
    return -1;
}

/* Drop window "w" unsaved: its records and its memory accounting. */
static void tp_window_discard(const struct tp_handoff *w)
{
    uint64_t late = 0;
    tp_buf_drain(w->gen, NULL, NULL, &late, 1);
    struct tp_mem_usage *mem = NULL;
    tp_mem_window_take(w->gen, NULL, &mem);
    free(mem);
}

/* One stderr line per window that lost anything, whatever it was: the
 * figures of its trace's trainprof object and summary ("trace": NULL when
 * it was not saved). */
static void tp_window_warn_losses(const struct tp_window *w, const char *trace)
{
    char line[512];
    size_t n = 0;
#define TP_LOSS(count, what)                                                                  \
    if ((count) && n < sizeof line)                                                           \
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%llu " what, n ? ", " : "",       \
                              (unsigned long long)(count))
    TP_LOSS(w->dropped, "events (buffer full: raise TRAINPROF_BUFFER_MB)");
    TP_LOSS(w->gpu_dropped, "device records (CUPTI buffers full)");
    TP_LOSS(w->names_lost, "names (name table full: they read <name table full>)");
    TP_LOSS(w->ranges_lost, "ranges (nested deeper than 128, or start/end ranges not ended "
            "within 4096 starts)");
    TP_LOSS(w->unmatched_pops, "range pops with no open range (ignored)");
#undef TP_LOSS
    if (n)
        TP_WARN("rank %d: steps %llu-%llu lost %s%s%s", w->rank, (unsigned long long)w->first_step,
                (unsigned long long)w->last_step, line, trace ? "; trace " : "", trace ? trace : "");
}

/* What struct tp_window points into, beside it on tp_window_write's stack. */
struct tp_window_text {
    char folder[4096], filename[1024], reports[4096];
    struct tp_comm_info comms[TP_COMMS_LISTED];
    char nccl_version[32];
    struct tp_pgroup pg;        /* win->pg_backend points into it */
};

/*
 * tp_window_describe - fill "win" (and "txt", which it points into) from
 * the configuration and hand-off "w": its batch, its file names, who and
 * where it ran, its steps as the steps counted them, its clocks and what
 * the hand-off lost.  What the records say is the peek's.  -1 when the
 * window is not to be saved (the caller discards it).
 */
static int tp_window_describe(struct tp_window *win, struct tp_window_text *txt,
                              const struct tp_handoff *w, const struct tp_clock_map *map,
                              int32_t pid)
{
    static char *config_json;
    if (!config_json)
        config_json = tp_config_json(&tp_cfg);

    /* the rank now, not at activation: a process started by mp.spawn or
     * Lightning learns it from its process group (or NCCL) later */
    int rank, world_size;
    tp_rank_now(&rank, &world_size);
    struct tp_format_vars v = {
        .run_name = tp_cfg.run_name, .hostname = tp_cfg.hostname,
        .rank = rank, .local_rank = tp_cfg.local_rank, .world_size = world_size,
        .local_world_size = tp_cfg.local_world_size, .node_rank = tp_cfg.node_rank,
        .pid = (int)getpid(), .batch = (int64_t)w->batch,
    };
    /* A partial window with no step since the last save: at a normal exit
     * it holds the teardown's calls only (not saved: an empty trace under
     * "-1" before); cut by a signal it holds the step under way, the most
     * useful part of a crash, saved as batch + 1 (the step it reached). */
    uint64_t batch = w->batch;
    int repeat = w->partial && (int64_t)w->batch == tp_last_batch && !w->flight &&
                 !tp_cfg.schedule.profiler_api;     /* a window the program asked for */
    if (repeat && (!w->partial_reason || strcmp(w->partial_reason, "exit") == 0)) {
        TP_DEBUG("partial window at exit: no step since the window of batch %llu; not saved",
                 (unsigned long long)w->batch);
        return -1;
    }
    if (repeat)
        batch = w->batch + 1;
    char flight_name[64];
    if (w->flight) {
        snprintf(flight_name, sizeof flight_name, "flight-%s.%llu", w->flight_reason,
                 (unsigned long long)w->flight_step);
        v.batch_text = flight_name;
    } else {
        tp_last_batch = (int64_t)batch;
    }
    v.batch = (int64_t)batch;
    if (tp_expand("TRAINPROF_FOLDER", tp_cfg.folder, &v, tp_cfg.start_dir, txt->folder,
                  sizeof txt->folder) ||
        tp_expand("TRAINPROF_FILENAME", tp_cfg.filename, &v, NULL, txt->filename,
                  sizeof txt->filename) ||
        tp_expand("TRAINPROF_REPORTS", tp_cfg.reports, &v, tp_cfg.start_dir, txt->reports,
                  sizeof txt->reports))
        return -1;

    memset(win, 0, sizeof *win);
    win->run_name = tp_cfg.run_name;
    win->hostname = tp_cfg.hostname;
    win->program = tp_cfg.program;
    win->pid = pid;
    win->rank = rank;
    win->local_rank = tp_cfg.local_rank;
    win->world_size = world_size;
    win->local_world_size = tp_cfg.local_world_size;
    win->node_rank = tp_cfg.node_rank;
    win->batch = batch;
    win->first_step = w->first_step;
    win->steps_recorded = w->steps;
    win->last_step = w->steps ? w->first_step + w->steps - 1 : w->first_step;
    win->partial = w->partial;
    win->partial_reason = w->partial ? w->partial_reason : NULL;
    win->step_signal = w->step_signal ? w->step_signal : "";
    if (w->flight) {
        win->flight_reason = w->flight_reason;
        win->flight_step = w->flight_step;
        win->flight_step_ns = w->flight_step_ns;
        win->flight_median_ns = w->flight_median_ns;
        win->flight_threshold_ns = w->flight_threshold_ns;
    }
    if (w->triggered) {     /* the steps filled it at the window's close */
        win->trigger_id = w->trigger_id;
        win->trigger_requested = w->trigger_requested;
        win->trigger_late = w->trigger_late;
    }
    win->start_ns = tp_clock_to_unix_ns(map, w->start_tick);
    win->end_ns = tp_clock_to_unix_ns(map, w->end_tick);
    win->clock_start = w->start_clock;
    win->clock_end = w->end_clock;
    win->clock_start_trace_ns = tp_clock_to_unix_ns(map, w->start_clock.tick);
    win->clock_end_trace_ns = tp_clock_to_unix_ns(map, w->end_clock.tick);
    win->ns_per_tick = map->ns_per_tick;
    win->clock_source = tp_clock_source();
    win->boot_id = tp_clock_boot_id();
    win->base_time_ns = win->start_ns / (TP_TRIMONTH_S * 1000000000ll) * (TP_TRIMONTH_S * 1000000000ll);
    win->dropped = w->dropped;
    win->ranges_lost = w->ranges_lost;
    win->unmatched_pops = w->unmatched_pops;
    win->config_json = config_json ? config_json : "{}";
    win->user_metadata = tp_cfg.metadata;
    win->trace_folder = txt->folder;
    win->trace_filename = txt->filename;
    win->reports_folder = txt->reports;
    win->gzip = tp_cfg.gzip;
    win->overwrite = tp_cfg.overwrite;
    win->record_shapes = tp_cfg.record_shapes;
    win->exec = tp_cfg.exec;
    win->exec_env = tp_cfg.exec_env;
    win->with_stack = tp_cfg.with_stack;
    win->keep = tp_cfg.keep;
    win->n_comms = (int)tp_comms_list(txt->comms, TP_COMMS_LISTED, &win->comms_created);
    win->comms = txt->comms;
    win->nccl_version = tp_comms_version(txt->nccl_version, sizeof txt->nccl_version);
    win->launched = tp_cfg.launched;
    if (tp_pgroup_get(&txt->pg)) {
        win->pg_backend = txt->pg.backend;
        win->pg_rank = txt->pg.rank;
        win->pg_world_size = txt->pg.world_size;
    }
    win->peak_tflops = tp_cfg.peak_tflops;
    win->coverage = -1;
    win->n_devices = tp_device_props_get(&win->devices);
    win->gpu_status = tp_cupti_status();
    return 0;
}

/* What the peek found, into "win": the steps it holds (no more than the
 * steps counted), their FLOPs, the launches, the names lost, and the steps
 * torch's operators are missing from. */
static void tp_window_tally(struct tp_window *win, const struct tp_steps *steps,
                            const struct tp_handoff *w, const struct tp_device_batch *dev,
                            char *lost_why, size_t lost_why_sz)
{
    win->steps = steps->v;
    win->flops = steps->flops;
    win->host_launches = steps->launches;
    uint64_t lost_from, lost_to;
    if (tp_oplost_in(w->start_tick, w->end_tick, &lost_from, &lost_to, lost_why, lost_why_sz)) {
        win->ops_lost_why = lost_why;
        for (size_t i = 0; i < steps->n && steps->tick; i++) {
            if (steps->tick[i].t0 >= lost_to || steps->tick[i].t1 <= lost_from)
                continue;
            if (!win->ops_lost_steps)
                win->ops_lost_first = steps->tick[i].index;
            win->ops_lost_last = steps->tick[i].index;
            win->ops_lost_steps = 1;
        }
    }
    if (!steps->v)
        win->steps_recorded = 0;
    else if (steps->n < win->steps_recorded)
        win->steps_recorded = steps->n;
    win->names_lost = steps->names_lost;
    for (size_t i = 0; dev && i < dev->n_rec; i++)
        win->names_lost += dev->rec[i].kind == TP_DEVICE_KERNEL && dev->rec[i].name == TP_INTERN_OVERFLOW;
}

void tp_window_write(const struct tp_handoff *w, const struct tp_device_batch *dev)
{
    struct tp_dispatch d;
    memset(&d, 0, sizeof d);
    d.map = tp_clock_map_now();
    d.pid = (int32_t)getpid();
    struct tp_window win;
    struct tp_window_text txt;
    if (w->flight && !w->flight_reason) {      /* superseded or exit: never saved */
        uint64_t late = 0;
        tp_buf_drain(w->gen, NULL, NULL, &late, 0);
        return;
    }
    if (w->flight)
        tp_buf_trim(w->gen, w->flight_trim_tick);   /* the steps older than its first */
    if (tp_window_describe(&win, &txt, w, &d.map, d.pid) != 0) {
        tp_window_discard(w);
        return;
    }

    /* the one peek, then what it found */
    struct tp_steps steps;
    memset(&steps, 0, sizeof steps);
    d.ops = tp_oplink_new();
    if (dev)
        d.join = tp_join_new(dev, &tp_next_corr);
    struct tp_peek peek = { .steps = &steps, .ops = d.ops, .join = d.join,
                            .mv = tp_memview_new(w->flight ? -1 : w->gen) };
    d.mv = peek.mv;
    if (w->flight)
        peek.flmem = malloc(TP_FLMEM_MAX * sizeof *peek.flmem);
    uint64_t late = 0;
    win.records = tp_buf_drain(w->gen, tp_window_peek, &peek, &late, 1);
    win.late = late;
    tp_steps_finish(&steps, &d.map);
    tp_oplink_finish(d.ops);
    d.steps = &steps;
    struct tp_mem_usage *mem = NULL;
    win.n_mem = tp_mem_window_take(w->gen, &d.map, &mem);
    if (peek.flmem && mem)
        tp_flmem_apply(&peek, mem, win.n_mem, &d.map, win.start_ns);
    free(peek.flmem);
    win.mem = tp_cfg.profile_memory ? mem : NULL;
    if (!win.mem)
        win.n_mem = 0;
    win.mem_coverage = -1;
    if (!w->flight)     /* a dump has no starting levels: its events still name their owners */
        tp_memview_finish(peek.mv, &win, &d.map, w->at_exit);
    if (d.join)
        tp_join_finish(d.join, &win);
    char lost_why[TP_OPLOST_WHY];
    tp_window_tally(&win, &steps, w, dev, lost_why, sizeof lost_why);

    /* handlers run in the sink's order (chrome first, so that the others
     * can name their files after the trace), whatever the order of
     * TRAINPROF_HANDLERS; a handler may be implied by the window */
    const struct tp_sink *sink = tp_sink_get();
    for (int k = 0; sink && d.n < TP_MAX_HANDLERS; k++) {
        const struct tp_handler *h = sink->handler(k);
        if (!h)
            break;
        int on = h->implied && h->implied(&win);
        for (int i = 0; i < tp_cfg.n_handlers && !on; i++)
            on = strcmp(tp_cfg.handlers[i], h->name) == 0;
        if (!on)
            continue;
        d.h[d.n] = h;
        d.st[d.n] = h->open(&win);
        d.n++;
    }
    late = 0;
    tp_buf_drain(w->gen, tp_dispatch_record, &d, &late, 0);
    if (d.join)
        tp_join_dispatch(d.join, &d.map, tp_dispatch_dev_event, &d);
    tp_dispatch_samples(&d, w);
    struct tp_saved saved;
    memset(&saved, 0, sizeof saved);
    for (int i = 0; i < d.n; i++)
        if (d.st[i])
            d.h[i]->close(d.st[i], &win, &saved);

    free(steps.v);
    free(steps.tick);
    tp_oplink_free(d.ops);
    free(mem);
    tp_memview_free(peek.mv);
    tp_join_free(d.join);
    tp_stack_corr_free(d.cf);

    if (saved.trace[0])
        atomic_fetch_add(&tp_saved_windows, 1);
    tp_window_warn_losses(&win, saved.trace[0] ? saved.trace : NULL);
    if (saved.trace[0] && win.flight_reason && win.flight_threshold_ns)
        TP_WARN("rank %d: flight recorder: step %llu took %.1f ms, over %g x the median %.1f ms: "
                "saved steps %llu-%llu (%llu events) to %s", win.rank,
                (unsigned long long)win.flight_step, (double)win.flight_step_ns / 1e6,
                tp_cfg.flight_slow, (double)win.flight_median_ns / 1e6,
                (unsigned long long)win.first_step, (unsigned long long)win.last_step,
                (unsigned long long)win.records, saved.trace);
    else if (saved.trace[0] && win.flight_reason)
        TP_WARN("rank %d: flight recorder: %s in step %llu: saved steps %llu-%llu and the step "
                "under way (%llu events) to %s", win.rank, win.flight_reason,
                (unsigned long long)win.flight_step, (unsigned long long)win.first_step,
                (unsigned long long)win.last_step, (unsigned long long)win.records, saved.trace);
    else if (saved.trace[0])
        TP_INFO("rank %d: saved steps %llu-%llu%s (%llu events%s) to %s%s%s", win.rank,
                (unsigned long long)win.first_step, (unsigned long long)win.last_step,
                win.partial ? ", partial" : "", (unsigned long long)win.records,
                win.dropped ? ", some dropped: raise TRAINPROF_BUFFER_MB" : "", saved.trace,
                saved.line[0] ? "; " : "", saved.line);
    if (saved.trace[0] && win.ops_lost_why) {
        if (win.ops_lost_steps)
            TP_WARN("rank %d: steps %llu-%llu of %s lack torch's operators: %s", win.rank,
                    (unsigned long long)win.ops_lost_first, (unsigned long long)win.ops_lost_last,
                    saved.trace, win.ops_lost_why);
        else
            TP_WARN("rank %d: part of %s lacks torch's operators: %s", win.rank, saved.trace,
                    win.ops_lost_why);
    }
    if (sink)
        sink->post_save(&win, &saved);
}
