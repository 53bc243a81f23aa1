/*
 * ranges.h - named ranges, instants and counters from NVTX and from the
 * trainprof_* API.
 *
 * Push/pop ranges live on a per-thread stack (depth TP_RANGE_DEPTH; deeper
 * pushes are not kept, and counted while a window records; any number of
 * pushes and pops, balanced or not, is safe); start/end ranges may end on
 * another thread.  A range is written as one TP_REC_RANGE record when it ends, if a
 * window was recording when it began.  Ends of ranges whose message matches
 * an nvtx:GLOB step signal end a step (even outside windows).
 * All functions are safe before activation and with the profiler passive,
 * and record nothing then (ranges never activate: nothing is interned);
 * push/pop ranges keep their place on the stack then, and whether they end
 * a step, so that a range pushed before activation and popped after it
 * ends a step as any other.
 */
#ifndef TRAINPROF_COLLECTOR_RANGES_H
#define TRAINPROF_COLLECTOR_RANGES_H

#include <stddef.h>
#include <stdint.h>
#include "collector/contract/record.h"
#include "collector/control/steps.h"
#include "collector/record/call.h"

#define TP_RANGE_DEPTH 128

/* The name of a range, mark or counter: "len" bytes of "text" ((size_t)-1:
 * up to its NUL), which is interned only if a window records it; or, with
 * "text" NULL, the interned id "id" (an NVTX registered string). */
struct tp_msg {
    const char *text;
    size_t len;
    uint32_t id;
};
#define TP_MSG_TEXT(s, n) ((struct tp_msg){ (s), (n), 0 })
#define TP_MSG_ID(i)      ((struct tp_msg){ NULL, 0, (i) })

/* Push a range named "m" in interned "domain" (0: none).  Returns the
 * depth before the push, 0 for an outermost range (NVTX's return value), or
 * -1. */
int tp_range_push(struct tp_msg m, uint32_t domain, enum tp_range_source src);

/* Push a range that no window records (its place on the stack only, so that
 * pops match): what tp_range_push does before activation, and torch's own
 * ProfilerStep#N ranges (torchop.h).  With "may_step" it ends a step if its
 * name "m" matches an nvtx:GLOB signal.  As tp_range_push. */
int tp_range_push_hidden(struct tp_msg m, int may_step);

/* tp_ranges_taken - 1 if ranges are recorded or counted now (activated,
 * not inside the profiler): callers skip building a name otherwise. */
int tp_ranges_taken(void);

/*
 * The bare push and pop: outside windows, with no NVTX step signal that
 * could count a range's end, a range needs nothing but its place on the
 * stack (its depth, so that pops match pushes across a window's start or
 * end), and a push is a per-thread counter's increment, inline in the
 * caller: no name is parsed, interned or matched, no slot written.  This
 * holds because every slot above the count is clean (busy 0:
 * its pop writes no record and ends no step): a push that needs its pop to
 * do something (a window records it, or it may end a step) marks its slot
 * busy, and the pop that finds it busy clears it.  So a pop is the
 * decrement too, unless its slot is busy.  tp_range_t is ranges.c's;
 * callers use the functions below.
 */
struct tp_range_thread {
    uint32_t n;                     /* open ranges: may exceed TP_RANGE_DEPTH,
                                       stops at UINT32_MAX */
    uint8_t busy[TP_RANGE_DEPTH];   /* 1 if the slot's pop has work (a record,
                                       a step); 0 at and above n */
};
/* one variable: one GOT load finds both (initial-exec in a shared object) */
extern __thread struct tp_range_thread tp_range_t __attribute__((tls_model("initial-exec")));

/* tp_range_bare - 1 if a range pushed now, whatever its name, needs only
 * its place: activated, no window records, and no nvtx:GLOB signal may
 * count steps (steps.h tp_steps_nvtx_possible; the default "api,nvtx:step"
 * has none once trainprof_step() fired first).  Two loads. */
static inline int tp_range_bare(void)
{
    return !(tp_hot_load() & (TP_HOT_RECORDING | TP_HOT_INACTIVE)) && !tp_steps_nvtx_possible();
}

/* tp_range_bare_text - as tp_range_bare for a range named by the text "s"
 * (NULL: unknown), which also needs only its place if an nvtx:GLOB signal
 * is live but no pattern can match its first byte (config.h
 * tp_config.nvtx_lead): torch's "aten::..." ranges under the default
 * nvtx:step, before activation too.  A range that fails here takes the
 * full push, which decides as before. */
static inline int tp_range_bare_text(const char *s)
{
    uint32_t hot = tp_hot_load();
    if (hot & TP_HOT_RECORDING)
        return 0;
    if (!(hot & TP_HOT_INACTIVE) && !tp_steps_nvtx_possible())
        return 1;
    if (!s)
        return 0;
    unsigned char c = (unsigned char)s[0];
    return !((tp_cfg.nvtx_lead[c >> 6] >> (c & 63)) & 1);
}

/* tp_range_push_bare - push a range that tp_range_bare(_text) said needs
 * only its place.  As tp_range_push. */
static inline int tp_range_push_bare(void)
{
    uint32_t n = tp_range_t.n;
    if (__builtin_expect(n >= TP_RANGE_DEPTH || tp_depth > 0, 0))
        return tp_range_push_hidden(TP_MSG_ID(0), 0);
    tp_range_t.n = n + 1;      /* slot n is clean: its pop does nothing */
    return (int)n;
}

/*
 * tp_ranges_placed_only - 1 if a range pushed now is only a place on the
 * stack: no window records (the hot word) and no NVTX step signal may
 * count its end (steps.h tp_steps_nvtx_possible).  Such a range needs no
 * name: tp_range_push_hidden(m, 0) does all that the full push would, so a
 * caller skips parsing and interning.  Two loads.
 */
static inline int tp_ranges_placed_only(void)
{
    return !(tp_hot_load() & TP_HOT_RECORDING) && !tp_steps_nvtx_possible();
}

/* Push one of torch's operator ranges (message "msg" parsed into "op"):
 * only its name is interned; op_id, seq and the shapes go into the record,
 * so that a message unique per call costs no new string.  As tp_range_push. */
struct tp_torch_op;
int tp_range_push_torch(const char *msg, const struct tp_torch_op *op, uint32_t domain);

/* Push an operator range that comes with no message to parse (torch's ITT
 * ranges, preload/itt.c): interned name "name", External id "op_id", no
 * sequence number or shapes.  As tp_range_push. */
int tp_range_push_op(uint32_t name, uint64_t op_id);

/* Pop the innermost range of this thread.  Returns the depth before the pop
 * minus one (NVTX's return value), or -1 if there was none (a pop with no
 * open range is ignored and counted).  Depths are capped at INT_MAX.
 * Inline: a clean slot's pop (the bare push's, above) is a decrement;
 * tp_range_pop_slow does the rest. */
int tp_range_pop_slow(void);

static inline int tp_range_pop(void)
{
    uint32_t n = tp_range_t.n - 1;         /* none open: UINT32_MAX, the slow path */
    if (__builtin_expect(n < TP_RANGE_DEPTH && !tp_range_t.busy[n] && tp_depth == 0, 1)) {
        tp_range_t.n = n;
        return (int)n;
    }
    return tp_range_pop_slow();
}

/* Start a range that may end on another thread; returns a non-zero id. */
uint64_t tp_range_start(struct tp_msg m, uint32_t domain);

/* End a range returned by tp_range_start (unknown ids are ignored). */
void tp_range_end(uint64_t id);

/* An instant named "m" (nothing is interned outside windows). */
void tp_mark(struct tp_msg m, uint32_t domain);

/* A counter sample. */
void tp_counter(struct tp_msg m, double value);

/* tp_range_test_set_depth, tp_range_test_depth - tests only: this thread's
 * count of open push/pop ranges, to reach the bounds of billions of
 * unbalanced pushes without making them (tests/unit/test_ranges.c). */
void tp_range_test_set_depth(uint32_t depth);
uint32_t tp_range_test_depth(void);

#endif
