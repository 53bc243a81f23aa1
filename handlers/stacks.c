/*
 * stacks.c - DESIGN: folded call stacks per trace (TRAINPROF_WITH_STACK),
 * "<reports>/<trace base>.stacks.txt" (host time) and ".stacks.gpu.txt"
 * (device time), one "root;...;caller;call value" line per distinct stack,
 * the format flamegraph.pl, speedscope and inferno read.
 *
 * Host file: the leaf is the intercepted call's name and the weight its
 * host duration, less the recorded calls nested in it on the same thread
 * (a GEMM's launches), so that the widths of a flame graph add up.  Nesting
 * is found at close by sorting the calls of each thread by start and
 * sweeping with a stack of open intervals.  GPU file: kernels, copies and
 * memsets linked to a host call (its launch, else the library call that
 * issued it, through the External id) weigh their device duration under
 * that call's stack, a kernel's name as one more frame; the file exists only
 * when the window has such device time.  Values are summed in ns per stack
 * and rounded to integer us once, after summing; lines that round to 0
 * are left out; lines are sorted bytewise so that outputs compare.
 * Nothing is written when no event carries frames: frames are taken at
 * intercepted calls only (CUDA runtime, driver, libraries), so a window of
 * a CPU-only job has none, and TRAINPROF_WITH_STACK=0 takes none.  That is
 * said once per process at info level, naming the trace and why, so that
 * "stacks" in TRAINPROF_HANDLERS never ends in silence.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/common/log.h"
#include "handler.h"
#include "collector/common/grow.h"
#include "collector/contract/device.h"
#include "jsonw.h"
#include "output.h"

struct stk_call {                /* one host call, for self time */
    int64_t ts, end;
    int64_t self;
    int32_t tid;
    int32_t key;                 /* stack key index, -1 if no frames */
};

struct stk_key {
    char *text;                  /* "f1;f2;...;leaf" */
    uint64_t hash;
    int64_t host_ns, gpu_ns;
};

struct stk_corr {                /* correlation -> key, 0 = empty */
    uint64_t corr;
    int32_t key;
};

/* (frames array, count, call name) -> key: the collector hands out one
 * array per distinct stack (collector/modules/stack.h) and names from its tables,
 * so repeated calls skip building and hashing their text; a miss only costs
 * that work. */
struct stk_memo {
    const char *const *frames;   /* NULL = empty */
    const char *name;
    int n;
    int32_t key;
};

struct stacks {
    struct stk_memo *memo;
    size_t n_memo, cap_memo;
    struct stk_call *calls;
    size_t n_calls, cap_calls;
    struct stk_key *keys;
    size_t n_keys, cap_keys;
    int32_t *slots;              /* hash of keys: index + 1, 0 = empty */
    size_t cap_slots;
    struct stk_corr *corr;
    size_t n_corr, cap_corr;
    int want_gpu;                /* the window has device records (w->gpu) */
    int framed;                  /* some event had frames */
    int gpu;                     /* some device time was attributed */
    int oom;
    char *buf;                   /* key under construction */
    size_t buf_cap;
};

static uint64_t stk_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int stk_reserve(struct stacks *s, size_t n)
{
    char *b = tp_grow(s->buf, &s->buf_cap, n, 1, 1024);
    if (!b)
        return -1;
    s->buf = b;
    return 0;
}

/* Append one frame to s->buf at "*len": ';' and control characters replaced. */
static int stk_append(struct stacks *s, size_t *len, const char *frame)
{
    size_t n = strlen(frame ? frame : "");
    if (stk_reserve(s, *len + n + 2) != 0)
        return -1;
    if (*len)
        s->buf[(*len)++] = ';';
    for (size_t i = 0; i < n; i++) {
        char c = frame[i];
        s->buf[(*len)++] = c == ';' ? ':' : ((unsigned char)c < 0x20 || c == 0x7f) ? ' ' : c;
    }
    if (n == 0)
        s->buf[(*len)++] = '?';
    s->buf[*len] = 0;
    return 0;
}

/* The index of key s->buf[0..len), added if new; -1 if memory ran out. */
static int32_t stk_key(struct stacks *s, size_t len)
{
    uint64_t h = stk_hash(s->buf, len);
    if ((s->n_keys + 1) * 2 > s->cap_slots) {
        size_t cap = s->cap_slots ? 2 * s->cap_slots : 256;
        int32_t *v = calloc(cap, sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < s->n_keys; i++) {
            size_t j = s->keys[i].hash & (cap - 1);
            while (v[j])
                j = (j + 1) & (cap - 1);
            v[j] = (int32_t)i + 1;
        }
        free(s->slots);
        s->slots = v;
        s->cap_slots = cap;
    }
    size_t j = h & (s->cap_slots - 1);
    for (; s->slots[j]; j = (j + 1) & (s->cap_slots - 1)) {
        struct stk_key *k = &s->keys[s->slots[j] - 1];
        if (k->hash == h && strlen(k->text) == len && memcmp(k->text, s->buf, len) == 0)
            return s->slots[j] - 1;
    }
    struct stk_key *v = tp_grow(s->keys, &s->cap_keys, s->n_keys + 1, sizeof *v, 256);
    if (!v)
        return -1;
    s->keys = v;
    char *text = malloc(len + 1);
    if (!text)
        return -1;
    memcpy(text, s->buf, len + 1);
    s->keys[s->n_keys] = (struct stk_key){ text, h, 0, 0 };
    s->slots[j] = (int32_t)s->n_keys + 1;
    return (int32_t)s->n_keys++;
}

static size_t stk_corr_slot(uint64_t corr, size_t cap)
{
    return (corr * 0x9e3779b97f4a7c15ull >> 17) & (cap - 1);
}

static void stk_corr_put(struct stacks *s, uint64_t corr, int32_t key)
{
    if (!corr || !s->want_gpu)
        return;
    if ((s->n_corr + 1) * 2 > s->cap_corr) {
        size_t cap = s->cap_corr ? 2 * s->cap_corr : 256;
        struct stk_corr *v = calloc(cap, sizeof *v);
        if (!v) {
            s->oom = 1;
            return;
        }
        for (size_t i = 0; i < s->cap_corr; i++) {
            if (!s->corr[i].corr)
                continue;
            size_t j = stk_corr_slot(s->corr[i].corr, cap);
            while (v[j].corr)
                j = (j + 1) & (cap - 1);
            v[j] = s->corr[i];
        }
        free(s->corr);
        s->corr = v;
        s->cap_corr = cap;
    }
    size_t j = stk_corr_slot(corr, s->cap_corr);
    while (s->corr[j].corr && s->corr[j].corr != corr)
        j = (j + 1) & (s->cap_corr - 1);
    s->n_corr += !s->corr[j].corr;
    s->corr[j] = (struct stk_corr){ corr, key };
}

static int32_t stk_corr_get(const struct stacks *s, uint64_t corr)
{
    if (!corr || !s->cap_corr)
        return -1;
    for (size_t j = stk_corr_slot(corr, s->cap_corr); s->corr[j].corr; j = (j + 1) & (s->cap_corr - 1))
        if (s->corr[j].corr == corr)
            return s->corr[j].key;
    return -1;
}

/* TRAINPROF_WITH_STACK=1 implies the folded stacks, whether or not
 * TRAINPROF_HANDLERS lists "stacks". */
static int stacks_implied(const struct tp_window *w)
{
    return w->with_stack;
}

static void *stacks_open(const struct tp_window *w)
{
    struct stacks *s = calloc(1, sizeof *s);
    if (s)
        s->want_gpu = w->gpu;
    return s;
}

static size_t stk_memo_slot(const struct tp_event *ev, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)ev->frames * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)(uintptr_t)ev->name * 0xc2b2ae3d27d4eb4full ^ (uint64_t)ev->n_frames;
    return (h ^ h >> 29) & (cap - 1);
}

static int32_t stk_memo_get(const struct stacks *s, const struct tp_event *ev)
{
    if (!s->cap_memo)
        return -1;
    for (size_t j = stk_memo_slot(ev, s->cap_memo); s->memo[j].frames; j = (j + 1) & (s->cap_memo - 1))
        if (s->memo[j].frames == ev->frames && s->memo[j].name == ev->name && s->memo[j].n == ev->n_frames)
            return s->memo[j].key;
    return -1;
}

static void stk_memo_put(struct stacks *s, const struct tp_event *ev, int32_t key)
{
    if ((s->n_memo + 1) * 2 > s->cap_memo) {
        size_t cap = s->cap_memo ? 2 * s->cap_memo : 256;
        struct stk_memo *v = calloc(cap, sizeof *v);
        if (!v)
            return;
        struct stk_memo *old = s->memo;
        size_t old_cap = s->cap_memo;
        s->memo = v;
        s->cap_memo = cap;
        for (size_t i = 0; i < old_cap; i++) {
            if (!old[i].frames)
                continue;
            struct tp_event e = { .frames = old[i].frames, .name = old[i].name, .n_frames = old[i].n };
            size_t j = stk_memo_slot(&e, cap);
            while (v[j].frames)
                j = (j + 1) & (cap - 1);
            v[j] = old[i];
        }
        free(old);
    }
    size_t j = stk_memo_slot(ev, s->cap_memo);
    while (s->memo[j].frames)
        j = (j + 1) & (s->cap_memo - 1);
    s->memo[j] = (struct stk_memo){ ev->frames, ev->name, ev->n_frames, key };
    s->n_memo++;
}

/* A host call: its stack key (frames, then the call's name). */
static void stacks_host(struct stacks *s, const struct tp_event *ev)
{
    int32_t key = -1;
    if (ev->frames && ev->n_frames > 0 && (key = stk_memo_get(s, ev)) >= 0) {
        stk_corr_put(s, ev->correlation, key);
        if (ev->external_id && ev->external_id != ev->correlation)
            stk_corr_put(s, ev->external_id, key);
    } else if (ev->frames && ev->n_frames > 0) {
        size_t len = 0;
        int bad = 0;
        for (int i = 0; i < ev->n_frames && !bad; i++)
            bad = stk_append(s, &len, ev->frames[i]) != 0;
        if (!bad)
            bad = stk_append(s, &len, ev->name) != 0;
        key = bad ? -1 : stk_key(s, len);
        if (key < 0)
            s->oom = 1;
        else
            s->framed = 1;
        if (key >= 0) {
            stk_memo_put(s, ev, key);
            stk_corr_put(s, ev->correlation, key);
            if (ev->external_id && ev->external_id != ev->correlation)
                stk_corr_put(s, ev->external_id, key);
        }
    }
    struct stk_call *v = tp_grow(s->calls, &s->cap_calls, s->n_calls + 1, sizeof *v, 1024);
    if (!v) {
        s->oom = 1;
        return;
    }
    s->calls = v;
    s->calls[s->n_calls++] = (struct stk_call){
        ev->ts_ns, ev->ts_ns + ev->dur_ns, ev->dur_ns, ev->tid, key,
    };
}

/* A device record: device time under its host call's stack. */
static void stacks_device(struct stacks *s, const struct tp_event *ev)
{
    int kind = ev->dev->kind;
    if (kind != TP_DEVICE_KERNEL && kind != TP_DEVICE_MEMCPY && kind != TP_DEVICE_MEMSET)
        return;
    int32_t host = ev->flow ? stk_corr_get(s, ev->correlation) : -1;
    if (host < 0)
        host = stk_corr_get(s, ev->external_id);
    if (host < 0)
        return;
    size_t len = strlen(s->keys[host].text);
    if (stk_reserve(s, len + 1) != 0) {
        s->oom = 1;
        return;
    }
    memcpy(s->buf, s->keys[host].text, len + 1);
    if (kind == TP_DEVICE_KERNEL && stk_append(s, &len, ev->name && ev->name[0] ? ev->name : "unknown kernel") != 0) {
        s->oom = 1;
        return;
    }
    int32_t key = stk_key(s, len);
    if (key < 0) {
        s->oom = 1;
        return;
    }
    s->keys[key].gpu_ns += ev->dur_ns;
    s->gpu = 1;
}

static void stacks_event(void *state, const struct tp_event *ev)
{
    struct stacks *s = state;
    if (ev->dev) {
        if (s->framed)
            stacks_device(s, ev);
        return;
    }
    if (ev->rec && (ev->rec->kind == TP_REC_API || ev->rec->kind == TP_REC_LAUNCH))
        stacks_host(s, ev);
}

static int call_cmp(const void *a, const void *b)
{
    const struct stk_call *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end;   /* the enclosing call first */
}

/* Self time: each call's duration less that of the calls directly nested in
 * it on its thread; then host time per key. */
static void stacks_self(struct stacks *s)
{
    qsort(s->calls, s->n_calls, sizeof *s->calls, call_cmp);
    size_t *open = malloc((s->n_calls ? s->n_calls : 1) * sizeof *open);
    if (!open) {
        s->oom = 1;
        return;
    }
    size_t depth = 0;
    for (size_t i = 0; i < s->n_calls; i++) {
        struct stk_call *c = &s->calls[i];
        while (depth && (s->calls[open[depth - 1]].tid != c->tid ||
                         s->calls[open[depth - 1]].end <= c->ts))
            depth--;
        if (depth && c->end <= s->calls[open[depth - 1]].end)
            s->calls[open[depth - 1]].self -= c->end - c->ts;
        open[depth++] = i;
    }
    free(open);
    for (size_t i = 0; i < s->n_calls; i++)
        if (s->calls[i].key >= 0)
            s->keys[s->calls[i].key].host_ns += s->calls[i].self > 0 ? s->calls[i].self : 0;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp((*(const struct stk_key *const *)a)->text, (*(const struct stk_key *const *)b)->text);
}

/* Write one folded file; "gpu" picks the weight. */
static int stacks_write(struct stacks *s, const struct tp_window *w, struct tp_saved *saved, const char *ext, int gpu,
                        struct stk_key **sorted)
{
    struct tp_output out;
    if (tp_output_open_report(&out, w->reports_folder, saved->trace, ext, w->overwrite, "stacks") != 0)
        return -1;
    struct tp_jsonw j;
    if (tp_jsonw_init(&j, out.fd, 0, 0) == 0) {
        for (size_t i = 0; i < s->n_keys; i++) {
            int64_t ns = gpu ? sorted[i]->gpu_ns : sorted[i]->host_ns;
            int64_t us = (ns + 500) / 1000;
            if (us <= 0)
                continue;
            tp_jsonw_lit(&j, sorted[i]->text);
            tp_jsonw_printf(&j, " %lld\n", (long long)us);
        }
    }
    int err = tp_jsonw_finish(&j);
    return tp_output_report_done(&out, err, saved);
}

static void stacks_free(struct stacks *s)
{
    for (size_t i = 0; i < s->n_keys; i++)
        free(s->keys[i].text);
    free(s->keys);
    free(s->slots);
    free(s->calls);
    free(s->corr);
    free(s->memo);
    free(s->buf);
    free(s);
}

/* The first window of this process whose trace got no stacks file says
 * why (tp-flush writes windows, a flight dump may come from a signal
 * handler's request: the flag is atomic all the same). */
static _Atomic int stacks_told_none;

static void stacks_tell_none(const struct tp_window *w, const char *trace)
{
    if (atomic_exchange(&stacks_told_none, 1))
        return;
    if (!w->with_stack)
        TP_INFO("stacks: no stacks file for %s: no call stack was taken, "
                "TRAINPROF_WITH_STACK is off (--with-stack)", trace);
    else
        TP_INFO("stacks: no stacks file for %s: no intercepted call (CUDA or a GPU library) "
                "in the window, where stacks are taken", trace);
}

static int stacks_close(void *state, const struct tp_window *w, struct tp_saved *saved)
{
    struct stacks *s = state;
    int rc = 0;
    if (!saved->trace[0] || !s->framed) {
        if (saved->trace[0])
            stacks_tell_none(w, saved->trace);
        stacks_free(s);
        return 0;
    }
    stacks_self(s);
    struct stk_key **sorted = malloc(s->n_keys * sizeof *sorted);
    if (!sorted) {
        TP_ERROR("stacks of %s not written: %s", saved->trace, strerror(ENOMEM));
        stacks_free(s);
        return -1;
    }
    for (size_t i = 0; i < s->n_keys; i++)
        sorted[i] = &s->keys[i];
    qsort(sorted, s->n_keys, sizeof *sorted, key_cmp);
    if (s->oom)
        TP_WARN("out of memory while folding stacks of %s: they are incomplete", saved->trace);
    rc |= stacks_write(s, w, saved, "stacks.txt", 0, sorted);
    if (s->gpu)
        rc |= stacks_write(s, w, saved, "stacks.gpu.txt", 1, sorted);
    free(sorted);
    stacks_free(s);
    return rc ? -1 : 0;
}

const struct tp_handler tp_handler_stacks = {
    .name = "stacks",
    .implied = stacks_implied,
    .open = stacks_open,
    .event = stacks_event,
    .close = stacks_close,
};
