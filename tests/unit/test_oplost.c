/*
 * test_oplost.c - spans in which torch's operators were lost to the
 * program's own profiler (collector/record/oplost.h): a window sees the part of a
 * span inside it, clipped to its ticks; an open span reaches the window's
 * end; a second reason while one is open keeps the first; a closed span
 * leaves later windows alone; past the table's capacity the last span is
 * reopened, so later losses are still reported; reasons are cut, not run over.
 */
#include "collector/record/oplost.h"
#include "collector/common/clock.h"

#include <check.h>
#include <string.h>
#include "tests/unit/tp_test.h"

static uint64_t now(void)
{
    return tp_clock_now();
}

START_TEST(test_window_sees_its_part)
{
    tp_oplost_reset();
    uint64_t before = now();
    tp_oplost_set("theirs");
    uint64_t inside = now();
    tp_oplost_set("another");              /* already lost: the first reason stays */
    uint64_t from, to;
    char why[TP_OPLOST_WHY];
    ck_assert_int_eq(tp_oplost_in(before, inside + 1000000, &from, &to, why, sizeof why), 1);
    ck_assert_str_eq(why, "theirs");
    ck_assert_uint_ge(from, before);
    ck_assert_uint_le(from, inside);
    ck_assert_uint_eq(to, inside + 1000000); /* still open: up to the window's end */
    tp_oplost_set(NULL);
    uint64_t after = now();
    ck_assert_int_eq(tp_oplost_in(before, after + 1000000, &from, &to, why, sizeof why), 1);
    ck_assert_uint_le(to, after);
    /* a window that began after the span closed sees nothing */
    ck_assert_int_eq(tp_oplost_in(after + 1, after + 1000000, &from, &to, why, sizeof why), 0);
    /* nor one that ended before it began */
    ck_assert_int_eq(tp_oplost_in(before - 1000, before, &from, &to, why, sizeof why), 0);
}
END_TEST

START_TEST(test_past_capacity_still_reported)
{
    tp_oplost_reset();
    for (int i = 0; i < 100; i++) {
        tp_oplost_set(i % 2 ? "odd" : "even");
        tp_oplost_set(NULL);
    }
    uint64_t start = now();
    tp_oplost_set("late");
    uint64_t from, to;
    char why[TP_OPLOST_WHY];
    ck_assert_int_eq(tp_oplost_in(start, now() + 1000, &from, &to, why, sizeof why), 1);
    tp_oplost_set(NULL);
    uint64_t end = now();
    ck_assert_int_eq(tp_oplost_in(end + 1, end + 1000, &from, &to, why, sizeof why), 0);
}
END_TEST

START_TEST(test_long_reason_cut)
{
    tp_oplost_reset();
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    uint64_t start = now();
    tp_oplost_set(big);
    uint64_t from, to;
    char why[TP_OPLOST_WHY], small[8];
    ck_assert_int_eq(tp_oplost_in(start, now() + 1000, &from, &to, why, sizeof why), 1);
    ck_assert_uint_eq(strlen(why), TP_OPLOST_WHY - 1);
    ck_assert_int_eq(tp_oplost_in(start, now() + 1000, &from, &to, small, sizeof small), 1);
    ck_assert_str_eq(small, "xxxxxxx");
    tp_oplost_set(NULL);
}
END_TEST

static Suite *oplost_suite(void)
{
    Suite *s = suite_create("oplost");
    TCase *t = tcase_create("oplost");
    tcase_add_test(t, test_window_sees_its_part);
    tcase_add_test(t, test_past_capacity_still_reported);
    tcase_add_test(t, test_long_reason_cut);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(oplost_suite());
}
