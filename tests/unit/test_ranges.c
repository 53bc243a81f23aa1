/*
 * test_ranges.c - push/pop ranges at the bounds of the per-thread stack
 * (collector/wrap/ranges.c): any number of unbalanced pushes or pops is safe,
 * the ranges that cannot be kept are counted.  The library is activated in
 * the test process itself (TRAINPROF_SCHEDULE=all: step 0 records), with
 * no CUDA and no flush: records are read back from the buffers.
 */
#include <check.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "collector/record/buffer.h"
#include "collector/record/call.h"
#include "collector/common/clock.h"
#include "collector/config/config.h"
#include "collector/record/intern.h"
#include "collector/wrap/ranges.h"
#include "collector/control/steps.h"
#include "tests/unit/tp_test.h"

static void configure_schedule(const char *schedule)
{
    setenv("TRAINPROF_SCHEDULE", schedule, 1);
    setenv("TRAINPROF_ACTIVITIES", "cpu", 1);
    setenv("TRAINPROF_SYS", "none", 1);
    setenv("TRAINPROF_PROFILE_MEMORY", "0", 1);
    tp_config_init();
}

static void configure(void)
{
    configure_schedule("all");
}

static void activate(void)
{
    configure();
    tp_clock_init();
    ck_assert_int_eq(tp_buf_init(4), 0);
    tp_steps_begin(tp_clock_now());
    ck_assert_int_eq(tp_steps_on(), 1);
}

static void activate_schedule(const char *schedule)
{
    configure_schedule(schedule);
    tp_clock_init();
    ck_assert_int_eq(tp_buf_init(4), 0);
    tp_steps_begin(tp_clock_now());
    ck_assert_int_eq(tp_steps_on(), 1);
}

/* The depth counter at the edge of a signed int: a push there wrapped it
 * to INT_MIN, and the next push wrote the range at tp_stack[INT_MIN]. */
START_TEST(test_pushes_past_int_max)
{
    activate();
    uint32_t name = tp_intern("deep", (size_t)-1);
    tp_range_test_set_depth((uint32_t)INT_MAX - 2);
    for (int i = 0; i < 8; i++)
        ck_assert_int_ge(tp_range_push(TP_MSG_ID(name), 0, TP_RANGE_API), 0);
    for (int i = 0; i < 8; i++)
        ck_assert_int_ge(tp_range_pop(), 0);
}
END_TEST

/* Past UINT32_MAX open ranges the count stops; NVTX's depths stop at
 * INT_MAX; pops still work from there. */
START_TEST(test_depth_saturates)
{
    activate();
    uint32_t name = tp_intern("deep", (size_t)-1);
    tp_range_test_set_depth(UINT32_MAX - 2);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(tp_range_push(TP_MSG_ID(name), 0, TP_RANGE_API), INT_MAX);
    ck_assert_uint_eq(tp_range_test_depth(), UINT32_MAX);
    ck_assert_int_eq(tp_range_pop(), INT_MAX);
    ck_assert_uint_eq(tp_range_test_depth(), UINT32_MAX - 1);
    /* and back down to the stack: a pop there closes nothing it did not open */
    tp_range_test_set_depth(TP_RANGE_DEPTH + 1);
    ck_assert_int_eq(tp_range_pop(), TP_RANGE_DEPTH);
}
END_TEST

struct seen {
    uint64_t ranges;
    uint32_t name;
};

static void count_ranges(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    (void)t;
    struct seen *s = ctx;
    if (r->kind == TP_REC_RANGE && r->u.range.name == s->name)
        s->ranges++;
}

static uint64_t recorded(uint32_t name)
{
    struct seen s = { 0, name };
    tp_buf_drain(TP_HOT_GEN(tp_hot_load()), count_ranges, &s, NULL, 1);
    return s.ranges;
}

/* Pops with no open range are ignored (counted); the stack stays whole:
 * the next push and pop make a range at depth 0. */
START_TEST(test_unmatched_pops)
{
    activate();
    uint32_t name = tp_intern("after", (size_t)-1);
    uint64_t lost0, pops0, lost, pops;
    tp_steps_range_losses(&lost0, &pops0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tp_range_pop(), -1);
    ck_assert_uint_eq(tp_range_test_depth(), 0);
    ck_assert_int_eq(tp_range_push(TP_MSG_ID(name), 0, TP_RANGE_API), 0);
    ck_assert_int_eq(tp_range_pop(), 0);
    tp_steps_range_losses(&lost, &pops);
    ck_assert_uint_eq(pops - pops0, 3);
    ck_assert_uint_eq(lost - lost0, 0);
    ck_assert_uint_eq(recorded(name), 1);
}
END_TEST

/* Ranges nested deeper than the stack are not recorded, and counted; those
 * within it are, and every pop matches its push. */
START_TEST(test_past_the_stack)
{
    activate();
    uint32_t name = tp_intern("nested", (size_t)-1);
    uint64_t lost0, pops0, lost, pops;
    tp_steps_range_losses(&lost0, &pops0);
    for (int i = 0; i < TP_RANGE_DEPTH + 5; i++)
        ck_assert_int_eq(tp_range_push(TP_MSG_ID(name), 0, TP_RANGE_API), i);
    for (int i = TP_RANGE_DEPTH + 5; i > 0; i--)
        ck_assert_int_eq(tp_range_pop(), i - 1);
    tp_steps_range_losses(&lost, &pops);
    ck_assert_uint_eq(lost - lost0, 5);
    ck_assert_uint_eq(pops - pops0, 0);
    ck_assert_uint_eq(recorded(name), TP_RANGE_DEPTH);
}
END_TEST

static void count_steps(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    (void)t;
    if (r->kind == TP_REC_STEP)
        ++*(uint64_t *)ctx;
}

static uint64_t steps_recorded(void)
{
    uint64_t n = 0;
    tp_buf_drain(TP_HOT_GEN(tp_hot_load()), count_steps, &n, NULL, 1);
    return n;
}

/* Ranges pushed before activation keep their place on the stack: popped
 * after it, they end a step if their name matches an nvtx:GLOB signal
 * ("step1" here: "st" is the pattern's literal prefix, "stop" shares it
 * but does not match, "xstep" and "st" do not), and no pop is unmatched.
 * A pop before activation ends nothing.  Before, such pushes were not
 * kept: their pops were unmatched, and the step range ended no step. */
START_TEST(test_pushed_before_activation)
{
    setenv("TRAINPROF_STEP_ON", "api,nvtx:st[a-e]p*", 1);
    configure();
    ck_assert_int_eq(tp_steps_on(), 0);
    ck_assert_int_eq(tp_range_push(TP_MSG_TEXT("step0", (size_t)-1), 0, TP_RANGE_NVTX), 0);
    ck_assert_int_eq(tp_range_pop(), 0);                /* before activation: no step */
    static const char *const names[] = { "step1", "stop", "xstep", "st" };
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(tp_range_push(TP_MSG_TEXT(names[i], (size_t)-1), 0, TP_RANGE_NVTX), i);
    ck_assert_uint_eq(tp_range_test_depth(), 4);
    activate();
    uint64_t lost0, pops0, lost, pops;
    tp_steps_range_losses(&lost0, &pops0);
    for (int i = 3; i >= 0; i--)
        ck_assert_int_eq(tp_range_pop(), i);
    ck_assert_uint_eq(tp_range_test_depth(), 0);
    tp_steps_range_losses(&lost, &pops);
    ck_assert_uint_eq(pops - pops0, 0);
    ck_assert_uint_eq(steps_recorded(), 1);
}
END_TEST

/* Records of window generation "gen" named "name" (0: step records),
 * left in the buffers. */
struct named {
    uint32_t name;
    uint64_t n;
};

static void count_named(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    (void)t;
    struct named *s = ctx;
    if (s->name ? r->kind == TP_REC_RANGE && r->u.range.name == s->name : r->kind == TP_REC_STEP)
        s->n++;
}

static uint64_t in_window(uint8_t gen, const char *name)
{
    struct named s = { name ? tp_intern_find(name, (size_t)-1) : 0, 0 };
    if (name && !s.name)
        return 0;                   /* never interned: never recorded */
    tp_buf_drain(gen, count_named, &s, NULL, 1);
    return s.n;
}

/* A push as preload/nvtx.c makes one of an ASCII message: the bare push
 * (ranges.h) when the range needs only its place, else the full one. */
static int push(const char *msg)
{
    if (tp_range_bare_text(msg))
        return tp_range_push_bare();
    return tp_range_push(TP_MSG_TEXT(msg, (size_t)-1), 0, TP_RANGE_NVTX);
}

/* A step counted by the end of an NVTX range "step" (nvtx:step live). */
static void nvtx_step(int depth)
{
    ck_assert_int_eq(push("step"), depth);
    ck_assert_int_eq(tp_range_pop(), depth);
}

/*
 * Ranges across a window's edges, outside windows pushed by the bare push
 * (a depth counter): one pushed before activation and outside the window
 * and popped after it closed, one pushed outside and popped inside, one
 * pushed inside and popped outside, and one pushed and popped outside at a
 * depth where the window had recorded ranges.  Depths match throughout, no
 * pop is unmatched, the ranges the window saw pushed are recorded (the one
 * popped after it too) and no other, and the step ranges pushed outside
 * the window end their steps (nvtx:step is live: "step" takes the full
 * push, "aten::..." cannot match it and is bare).  Schedule: step 0 is
 * skipped, step 1 recorded, nothing after.
 */
START_TEST(test_across_window_edges)
{
    setenv("TRAINPROF_STEP_ON", "nvtx:step", 1);
    configure_schedule("skip_first=1,wait=0,warmup=0,active=1,repeat=1");
    ck_assert_int_eq(tp_range_bare_text("aten::outer"), 1);  /* before activation too */
    ck_assert_int_eq(push("aten::outer"), 0);
    activate_schedule("skip_first=1,wait=0,warmup=0,active=1,repeat=1");
    uint64_t lost0, pops0, lost, pops;
    tp_steps_range_losses(&lost0, &pops0);
    ck_assert_int_eq(tp_hot_load() & TP_HOT_RECORDING, 0);
    ck_assert_int_eq(tp_steps_nvtx_possible(), 1);
    ck_assert_int_eq(tp_range_bare_text("aten::outer"), 1);
    ck_assert_int_eq(tp_range_bare_text("step"), 0);
    ck_assert_int_eq(push("aten::pre"), 1);                 /* outside, popped inside */
    nvtx_step(2);                                           /* step 0 ends: step 1 records */
    ck_assert_int_ne(tp_hot_load() & TP_HOT_RECORDING, 0);
    uint8_t gen = TP_HOT_GEN(tp_hot_load());
    ck_assert_int_eq(push("aten::inner"), 2);
    ck_assert_int_eq(tp_range_pop(), 2);
    ck_assert_int_eq(tp_range_pop(), 1);                    /* aten::pre */
    ck_assert_int_eq(push("aten::span"), 1);                /* inside, popped outside */
    ck_assert_int_eq(push("aten::deep"), 2);
    ck_assert_int_eq(tp_range_pop(), 2);
    nvtx_step(2);                                           /* step 1 ends: the window closes */
    /* between windows the whole word is 0 (no generation kept): every
     * wrapper's pass-through test */
    ck_assert_uint_eq(tp_hot_load(), 0);
    ck_assert_int_eq(tp_range_pop(), 1);                    /* aten::span: recorded */
    /* at depths 1 and 2, where the window recorded ranges: bare, unrecorded */
    ck_assert_int_eq(tp_range_bare_text("aten::after"), 1);
    ck_assert_int_eq(push("aten::after"), 1);
    ck_assert_int_eq(push("aten::after"), 2);
    ck_assert_int_eq(tp_range_pop(), 2);
    ck_assert_int_eq(tp_range_pop(), 1);
    ck_assert_int_eq(tp_range_pop(), 0);                    /* aten::outer */
    ck_assert_uint_eq(tp_range_test_depth(), 0);
    ck_assert_int_eq(tp_range_pop(), -1);                   /* and no more */
    tp_steps_range_losses(&lost, &pops);
    ck_assert_uint_eq(pops - pops0, 1);
    ck_assert_uint_eq(lost - lost0, 0);
    ck_assert_uint_eq(in_window(gen, "aten::inner"), 1);
    ck_assert_uint_eq(in_window(gen, "aten::span"), 1);
    ck_assert_uint_eq(in_window(gen, "aten::deep"), 1);
    ck_assert_uint_eq(in_window(gen, "aten::pre"), 0);
    ck_assert_uint_eq(in_window(gen, "aten::outer"), 0);
    ck_assert_uint_eq(in_window(gen, "aten::after"), 0);
    ck_assert_uint_eq(in_window(gen, NULL), 1);             /* step 1, ended by "step" */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ranges");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_pushes_past_int_max);
    tcase_add_test(tc, test_depth_saturates);
    tcase_add_test(tc, test_unmatched_pops);
    tcase_add_test(tc, test_past_the_stack);
    tcase_add_test(tc, test_pushed_before_activation);
    tcase_add_test(tc, test_across_window_edges);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
