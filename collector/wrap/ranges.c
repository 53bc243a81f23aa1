/*
 * ranges.c - DESIGN: a push/pop range is remembered on a per-thread stack
 * (name, domain, start tick, whether a window was recording at the push and
 * its generation, whether its name matches an nvtx step pattern) and written
 * as one complete record when it is popped, so a range costs one record and
 * no pairing at flush time.  The stack keeps TP_RANGE_DEPTH ranges; its
 * count of open ranges goes on past that (so that pops still match their
 * pushes) in an unsigned 32-bit counter that stops at UINT32_MAX: any
 * number of unbalanced pushes is safe (a signed int wrapped after 2^31 of
 * them, and the next push wrote at tp_stack[INT_MIN]), and a pop with no
 * open range is ignored.  Both are counted (steps.h tp_steps_range_lost,
 * tp_steps_pop_unmatched: each window reports its own): ranges pushed past
 * the stack while a window records, and pops with nothing to pop.  Start/end ranges can end on another thread: they sit in a fixed
 * table indexed by id; a slot reused before its range ended loses that
 * range, counted with the ranges past the stack.
 *
 * Messages come as text (struct tp_msg) and are interned only when a
 * window records them: the name table (intern.h, bounded) then holds the
 * names of the traces, not every distinct message a program sends (one
 * per call, for some).  Outside windows a message needs no name, only
 * whether it ends a step: that is the flag cached on its interned string
 * when it has one, else its text is matched against the nvtx:GLOB patterns
 * there and then, and only while an NVTX signal may still count steps.
 * Whether an interned name matches is decided once per string.
 *
 * Before activation (and in a passive process) ranges are still kept on
 * the stack, with no name, no time and no record: only their place, so
 * that pops match their pushes across activation, and whether they end a
 * step.  NVTX ranges never activate, but a program's
 * `with nvtx.range("step"):` around its whole iteration pushes its first
 * range before the first CUDA call: that range's pop, after activation,
 * ends step 0, so that ProfilerStep#N is the program's iteration N (it
 * ended no step, and was counted as a pop with no open range, when such
 * pushes were not kept).  A pop before activation ends nothing.  The
 * match there is refused by the message's first byte first (config.h
 * tp_config.nvtx_lead), so that a CPU-only process with torch's NVTX
 * ranges on, which never activates, pays a bit test per push.  A range that
 * is never recorded has the same place on the stack
 * (tp_range_push_hidden): torch's own ProfilerStep#N ranges (torchop.h).
 *
 * Outside windows most ranges need less still: what a range must carry
 * from its push to its pop is whether a window records it (then its name,
 * time and domain) and whether it ends a step (an nvtx:GLOB signal live,
 * or before activation one configured, and its name can match); its depth
 * must be kept always, so that a window opening or closing mid-range sees
 * pops match pushes.  Torch's operator ids need nothing: NVTX's come in
 * the message, parsed only when recorded, and ITT's from a counter taken
 * only then.  A range that needs neither is a bare push (ranges.h, inline
 * in preload/nvtx.c and itt.c): the thread's count goes up and no slot is
 * written.  That is sound because every slot at or above the count is
 * clean (tp_range_t.busy 0), so its pop finds nothing to do, and the pop
 * is the count going down; a push that writes a slot marks it busy if its
 * pop has work, and the pop that finds a busy slot clears it.  So a range
 * pushed bare and popped inside a window is not recorded (it has no name
 * or start), as a range pushed before activation, and one pushed inside
 * and popped outside is written at its pop, with its window's generation,
 * as before.  Outside windows a torch-shaped NVTX push and pop cost 38
 * instructions more than NVTX's no-op, where they cost 131
 * (tests/bench/RESULTS.md).
 */
#include "ranges.h"
#include "core.h"
#include "collector/record/intern.h"
#include "collector/record/torchop.h"

#include <fnmatch.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct tp_open_range {
    uint32_t name, domain;
    uint64_t t0;
    uint8_t gen;
    uint8_t recording;
    uint8_t step;
    uint8_t torch;               /* one of torch's operators: the fields below */
    uint32_t sizes;
    int64_t seq;
    uint64_t op_id;
};

/* initial-exec, as the range clock's below: the library's TLS is static
 * already (other initial-exec variables mark it STATIC_TLS), and the
 * default model of a shared object calls __tls_get_addr at every push and
 * pop (11 instructions a call, tests/bench/RESULTS.md) */
static __thread struct tp_open_range tp_stack[TP_RANGE_DEPTH] __attribute__((tls_model("initial-exec")));
__thread struct tp_range_thread tp_range_t __attribute__((tls_model("initial-exec")));   /* ranges.h */
static __thread int32_t tp_my_tid __attribute__((tls_model("initial-exec")));


#define TP_XRANGES 4096
static struct {
    _Atomic uint64_t id;                        /* 0 = free */
    struct tp_open_range r;
    int32_t tid;
} tp_xranges[TP_XRANGES];
static _Atomic uint64_t tp_xrange_next = 1;

/* 1 if NUL-terminated "s" matches an nvtx:GLOB signal's pattern. */
static int tp_text_matches(const char *s)
{
    for (int i = 0; i < tp_cfg.n_signals; i++)
        if (tp_cfg.signals[i].kind == TP_SIGNAL_NVTX && fnmatch(tp_cfg.signals[i].pattern, s, 0) == 0)
            return 1;
    return 0;
}

/* The first time "name" is asked: match it, cache the answer. */
static __attribute__((noinline)) int tp_step_flag_set(uint32_t name)
{
    uint8_t f = tp_text_matches(tp_intern_str(name)) ? 1 : 2;
    tp_intern_set_flag(name, f);
    return f == 1;
}

/* 1 if "name" ends a step under an nvtx:GLOB signal. */
static inline int tp_is_step_range(uint32_t name)
{
    uint8_t f = tp_intern_flag(name);
    return f ? f == 1 : tp_step_flag_set(name);
}

/* 1 if the text "s" ("len" bytes, (size_t)-1: to its NUL) ends a step:
 * from its interned string's flag if it has one, else matched as text,
 * cut as tp_intern would cut it. */
static int tp_text_is_step(const char *s, size_t len)
{
    uint32_t id = tp_intern_find(s, len);
    if (id)
        return tp_is_step_range(id);
    len = tp_intern_len(s, len);
    char buf[TP_INTERN_LEN_MAX + 1];
    if (s[len]) {
        memcpy(buf, s, len);
        buf[len] = 0;
        s = buf;
    }
    return tp_text_matches(s);
}

/* 0 if the text "s" ("len" bytes, (size_t)-1: to its NUL) cannot match an
 * nvtx:GLOB pattern: by its first byte (config.h tp_config.nvtx_lead). */
static inline int tp_text_may_match(const char *s, size_t len)
{
    unsigned char c = len ? (unsigned char)s[0] : 0;
    return (int)((tp_cfg.nvtx_lead[c >> 6] >> (c & 63)) & 1);
}

/* Whether a range named "m" that no window records ends a step: before
 * activation, if an nvtx:GLOB signal is configured (no signal has fired
 * yet); after, while one may still count steps. */
static uint8_t tp_hidden_step(struct tp_msg m)
{
    if (tp_steps_on() && !tp_steps_nvtx_possible())
        return 0;
    if (!m.text)
        return m.id ? (uint8_t)tp_is_step_range(m.id) : 0;
    if (!tp_text_may_match(m.text, m.len))
        return 0;
    return (uint8_t)tp_text_is_step(m.text, m.len);
}

/* The interned name of message "m" for a range or mark, which a window
 * records if "recording", and in "*step" whether it ends a step.  Text is
 * interned only when recorded (0 otherwise); a name the full table refused
 * is matched as text, so that steps go on. */
static uint32_t tp_msg_name(struct tp_msg m, int recording, uint8_t *step)
{
    uint32_t id = m.text ? (recording ? tp_intern(m.text, m.len) : 0) : m.id;
    if (!tp_steps_nvtx_possible())          /* e.g. trainprof_step() counts the steps */
        *step = 0;
    else if (!m.text || id > TP_INTERN_OVERFLOW)
        *step = (uint8_t)tp_is_step_range(id);
    else
        *step = (uint8_t)tp_text_is_step(m.text, m.len);
    return id;
}

/* NVTX ranges never activate the profiler: a CPU-only process
 * with NVTX ranges on (torch's emit_nvtx) stays inert. */
static int tp_ranges_on(void)
{
    return tp_steps_on() && tp_depth == 0;
}

/* The clock of a range's ends: never behind the last one this thread took,
 * so that ranges nested by push and pop stay nested in time when the thread
 * moves to a core whose TSC reads a few ticks behind (seen on this VM's
 * vCPUs under load).  And a range ends at least TP_END_GAP ticks after the
 * last range this thread ended: readers add ts and dur in floating point,
 * whose error at Kineto's time base (ts up to 7.9e12 us) is about 1 ns, and
 * the TensorBoard plugin leaves an operator out of its table when it seems
 * to end after its parent (test_readers_ranks.py, 3 runs in 16 under load).
 * Two pops are tens of ns apart: only a TSC read behind meets the gap. */
#define TP_END_GAP 16
static __thread uint64_t tp_last_tick __attribute__((tls_model("initial-exec")));    /* the latest start or end taken */
static __thread uint64_t tp_last_end __attribute__((tls_model("initial-exec")));     /* the latest end taken */

static uint64_t tp_range_now(int end)
{
    uint64_t t = tp_clock_now();
    if (t < tp_last_tick)
        t = tp_last_tick;
    if (end) {
        if (t < tp_last_end + TP_END_GAP)
            t = tp_last_end + TP_END_GAP;
        tp_last_end = t;
    }
    tp_last_tick = t;
    return t;
}

static void tp_open(struct tp_open_range *o, struct tp_msg m, uint32_t domain)
{
    uint32_t hot = tp_hot_load();
    o->recording = (hot & TP_HOT_RECORDING) != 0;
    o->gen = TP_HOT_GEN(hot);
    o->name = tp_msg_name(m, o->recording, &o->step);
    o->domain = domain;
    o->torch = 0;
    o->t0 = o->recording ? tp_range_now(0) : 0;
}

static void tp_close(const struct tp_open_range *o, int32_t tid, uint64_t id, enum tp_range_source src)
{
    if (o->recording) {
        uint64_t t1 = tp_range_now(1);
        struct tp_record *r = tp_buf_reserve();
        if (r) {
            memset(r, 0, sizeof *r);
            r->kind = TP_REC_RANGE;
            r->gen = o->gen;
            r->t0 = o->t0;
            r->t1 = t1;
            r->u.range.name = o->name;
            r->u.range.domain = o->domain;
            r->u.range.tid = tid;
            r->u.range.source = (uint32_t)src;
            r->u.range.range_id = id;
            if (o->torch) {
                r->u.range.source = TP_RANGE_TORCH;
                r->u.range.range_id = o->op_id;
                r->u.range.seq = o->seq;
                r->u.range.sizes = o->sizes;
            }
            tp_buf_commit();
        }
    }
    if (o->step)
        tp_steps_signal(TP_SIGNAL_NVTX);
}

/* One more open range ("n" were open): the count stops at UINT32_MAX; NVTX's
 * return value, the depth before the push, stops at INT_MAX.  A slot that
 * was written is busy if its pop has work. */
static int tp_pushed(uint32_t n)
{
    if (n < TP_RANGE_DEPTH)
        tp_range_t.busy[n] = tp_stack[n].recording | tp_stack[n].step;
    if (n != UINT32_MAX)
        tp_range_t.n = n + 1;
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* A range pushed past the stack is not kept: lost if a window records. */
static void tp_push_past_stack(void)
{
    if (tp_hot_load() & TP_HOT_RECORDING)
        tp_steps_range_lost();
}

int tp_range_push_hidden(struct tp_msg m, int may_step)
{
    if (tp_depth > 0)
        return -1;
    uint32_t n = tp_range_t.n;
    if (n < TP_RANGE_DEPTH) {
        struct tp_open_range *o = &tp_stack[n];
        o->recording = 0;
        o->torch = 0;
        o->name = 0;
        o->step = may_step ? tp_hidden_step(m) : 0;
    }
    return tp_pushed(n);
}

int tp_range_push(struct tp_msg m, uint32_t domain, enum tp_range_source src)
{
    (void)src;
    if (!tp_ranges_on())
        return tp_range_push_hidden(m, 1);
    uint32_t n = tp_range_t.n;
    if (n < TP_RANGE_DEPTH)
        tp_open(&tp_stack[n], m, domain);
    else
        tp_push_past_stack();
    return tp_pushed(n);
}

int tp_ranges_taken(void)
{
    return tp_ranges_on();
}

/* The open range of an operator named "name", or NULL past the stack's
 * depth; the caller fills its sequence number and shapes. */
static struct tp_open_range *tp_open_op(struct tp_msg name, uint32_t domain, uint64_t op_id)
{
    if (tp_range_t.n >= TP_RANGE_DEPTH) {
        tp_push_past_stack();
        return NULL;
    }
    struct tp_open_range *o = &tp_stack[tp_range_t.n];
    tp_open(o, name, domain);
    o->torch = 1;
    o->op_id = op_id;
    o->seq = -1;
    o->sizes = 0;
    return o;
}

int tp_range_push_torch(const char *msg, const struct tp_torch_op *op, uint32_t domain)
{
    if (!tp_ranges_on())
        return tp_range_push_hidden(TP_MSG_TEXT(msg, op->name_len), 1);
    struct tp_open_range *o = tp_open_op(TP_MSG_TEXT(msg, op->name_len), domain, op->op_id);
    if (o) {
        o->seq = op->seq;
        o->sizes = o->recording && op->sizes ? tp_intern(op->sizes, op->sizes_len) : 0;
    }
    return tp_pushed(tp_range_t.n);
}

int tp_range_push_op(uint32_t name, uint64_t op_id)
{
    if (!tp_ranges_on())
        return tp_range_push_hidden(TP_MSG_ID(0), 0);
    tp_open_op(TP_MSG_ID(name), 0, op_id);
    return tp_pushed(tp_range_t.n);
}

/* The pop that ranges.h's inline tp_range_pop does not do itself: a busy
 * slot, past the stack, none open, or inside the profiler. */
int tp_range_pop_slow(void)
{
    if (tp_depth > 0)
        return -1;
    uint32_t n = tp_range_t.n;
    if (n == 0) {
        if (tp_steps_on())
            tp_steps_pop_unmatched();
        return -1;
    }
    tp_range_t.n = --n;
    /* before activation (or passive) a pop only leaves the stack */
    if (n < TP_RANGE_DEPTH && tp_range_t.busy[n]) {
        tp_range_t.busy[n] = 0;           /* clean above the count (ranges.h) */
        if (tp_steps_on())
            tp_close(&tp_stack[n], 0, 0, TP_RANGE_NVTX);
    }
    return n > INT_MAX ? INT_MAX : (int)n;
}

uint64_t tp_range_start(struct tp_msg m, uint32_t domain)
{
    uint8_t early = 0;      /* before activation: kept only if it ends a step */
    if (!tp_ranges_on() && (tp_depth > 0 || tp_steps_on() || !(early = tp_hidden_step(m))))
        return 0;
    uint64_t id = atomic_fetch_add(&tp_xrange_next, 1);
    unsigned slot = (unsigned)(id % TP_XRANGES);
    if (!tp_my_tid)
        tp_my_tid = (int32_t)syscall(SYS_gettid);
    /* a range still open in the slot, 4096 starts ago, is lost: its end
     * will find another id there */
    if (atomic_exchange_explicit(&tp_xranges[slot].id, 0, memory_order_relaxed) &&
        tp_xranges[slot].r.recording)
        tp_steps_range_lost();
    if (early)
        tp_xranges[slot].r = (struct tp_open_range){ .step = 1 };
    else
        tp_open(&tp_xranges[slot].r, m, domain);
    tp_xranges[slot].tid = tp_my_tid;
    atomic_store_explicit(&tp_xranges[slot].id, id, memory_order_release);
    return id;
}

void tp_range_end(uint64_t id)
{
    if (!id || tp_depth > 0)
        return;
    unsigned slot = (unsigned)(id % TP_XRANGES);
    uint64_t want = id;
    if (atomic_load_explicit(&tp_xranges[slot].id, memory_order_acquire) != id)
        return;
    struct tp_open_range o = tp_xranges[slot].r;
    int32_t tid = tp_xranges[slot].tid;
    if (!atomic_compare_exchange_strong(&tp_xranges[slot].id, &want, 0))
        return;
    if (tp_steps_on())   /* an end before activation only frees the slot */
        tp_close(&o, tid, id, TP_RANGE_NVTX);
}

static void tp_instant(int kind, struct tp_msg m, uint32_t domain, double value)
{
    if (!tp_ranges_on())
        return;
    uint32_t hot = tp_hot_load();
    if (!(hot & TP_HOT_RECORDING))
        return;
    uint32_t name = m.text ? tp_intern(m.text, m.len) : m.id;
    struct tp_record *r = tp_buf_reserve();
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->kind = (uint8_t)kind;
    r->gen = TP_HOT_GEN(hot);
    r->t0 = r->t1 = tp_clock_now();
    r->u.mark.name = name;
    r->u.mark.domain = domain;
    r->u.mark.value = value;
    tp_buf_commit();
}

void tp_mark(struct tp_msg m, uint32_t domain)
{
    tp_instant(TP_REC_MARK, m, domain, 0);
}

void tp_counter(struct tp_msg m, double value)
{
    tp_instant(TP_REC_COUNTER, m, 0, value);
}

void tp_range_test_set_depth(uint32_t depth)
{
    tp_range_t.n = depth;
    for (uint32_t i = depth; i < TP_RANGE_DEPTH; i++)
        tp_range_t.busy[i] = 0;       /* clean above the count (ranges.h) */
}

uint32_t tp_range_test_depth(void)
{
    return tp_range_t.n;
}
