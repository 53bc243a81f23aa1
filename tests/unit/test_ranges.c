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

static void configure(void)
{
    setenv("TRAINPROF_SCHEDULE", "all", 1);
    setenv("TRAINPROF_ACTIVITIES", "cpu", 1);
    setenv("TRAINPROF_SYS", "none", 1);
    setenv("TRAINPROF_PROFILE_MEMORY", "0", 1);
    tp_config_init();
}

static void activate(void)
{
    configure();
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

int main(void)
{
    Suite *s = suite_create("ranges");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_pushes_past_int_max);
    tcase_add_test(tc, test_depth_saturates);
    tcase_add_test(tc, test_unmatched_pops);
    tcase_add_test(tc, test_past_the_stack);
    tcase_add_test(tc, test_pushed_before_activation);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
