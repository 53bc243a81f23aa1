/*
 * test_clock.c - tick to trace-time conversion (collector/common/clock.h): a span
 * nested in another stays nested once converted.  A child op ending a few
 * ticks before its parent used to end 1 ns after it in the trace (start and
 * duration each truncated on their own); the TensorBoard plugin then left
 * the child out of its operator table (test_readers_ranks.py, under load).
 */
#include "collector/common/clock.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/unit/tp_test.h"

static uint64_t next(uint64_t *s)           /* xorshift64: repeatable */
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

START_TEST(test_nested_spans_stay_nested)
{
    /* a 2.8 GHz TSC, anchored as a window's map is */
    const double rates[] = {1.0 / 2.8, 1.0 / 3.0, 0.416666666, 1.0};
    int old_broke = 0, starts = 0, ends = 0, exact = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        struct tp_clock_map m = {.tick0 = 1000000000000ull, .unix0_ns = 1795769304557718476ll,
                                 .ns_per_tick = rates[r]};
        for (int i = 0; i < 50000; i++) {
            uint64_t p0 = m.tick0 + next(&seed) % 100000000000ull;
            uint64_t c0 = p0 + next(&seed) % 50;        /* the child starts a few ticks in */
            uint64_t c1 = c0 + next(&seed) % 5000;
            uint64_t p1 = c1 + next(&seed) % 4;         /* and ends 0-3 ticks before it */
            int64_t pts = tp_clock_to_unix_ns(&m, p0), cts = tp_clock_to_unix_ns(&m, c0);
            starts += cts < pts;
            ends += cts + tp_clock_span_ns(&m, c0, c1) > pts + tp_clock_span_ns(&m, p0, p1);
            exact += pts + tp_clock_span_ns(&m, p0, p1) != tp_clock_to_unix_ns(&m, p1);
            old_broke += cts + tp_clock_ticks_to_ns(&m, c0, c1) > pts + tp_clock_ticks_to_ns(&m, p0, p1);
        }
    }
    ck_assert_int_eq(starts, 0);
    ck_assert_int_eq(ends, 0);
    ck_assert_int_eq(exact, 0);
    /* the conversion the trace used before breaks the nesting in these
     * samples: the assertions above can fail */
    ck_assert_int_gt(old_broke, 0);
}
END_TEST

START_TEST(test_span_of_nothing_is_zero)
{
    struct tp_clock_map m = {.tick0 = 10, .unix0_ns = 1000, .ns_per_tick = 0.5};
    ck_assert_int_eq(tp_clock_span_ns(&m, 50, 50), 0);
    ck_assert_int_eq(tp_clock_span_ns(&m, 50, 40), 0);       /* an end before its start */
    ck_assert_int_eq(tp_clock_span_ns(&m, 50, 53), 1);       /* 1020 -> 1021.5, truncated */
}
END_TEST

static Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *t = tcase_create("clock");
    tcase_add_test(t, test_nested_spans_stay_nested);
    tcase_add_test(t, test_span_of_nothing_is_zero);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(clock_suite());
}
