/*
 * test_intern.c - the name table's bounds (collector/record/intern.c): what it
 * takes stays within its budget (TP_INTERN_EARLY_BYTES before activation,
 * what tp_intern_set_budget allows after) and its TP_INTERN_MAX names;
 * past either a name is refused, counted, and reads "<name table full>",
 * while the names it holds stay.  Lookups never add.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/record/intern.h"
#include "tests/unit/tp_test.h"

/* Intern "n" distinct 100-byte names from "first"; returns how many were
 * refused. */
static uint64_t fill(long first, long n)
{
    char buf[128];
    memset(buf, 'x', 100);
    buf[100] = 0;
    uint64_t refused = 0;
    for (long i = first; i < first + n; i++) {
        int k = snprintf(buf, 32, "name %ld ", i);
        buf[k] = 'x';
        refused += tp_intern(buf, (size_t)-1) == TP_INTERN_OVERFLOW;
    }
    return refused;
}

START_TEST(test_budget_bounds_the_table)
{
    uint32_t kept = tp_intern("kept", (size_t)-1);
    ck_assert_uint_gt(kept, TP_INTERN_OVERFLOW);
    ck_assert_uint_eq(tp_intern_find("absent", (size_t)-1), 0);
    ck_assert_uint_eq(tp_intern_find("absent", (size_t)-1), 0);   /* a lookup adds nothing */

    /* before activation: 256 KiB, about 2,000 names of 100 bytes */
    uint64_t r0 = tp_intern_refused();
    uint64_t refused = fill(0, 10000);
    ck_assert_uint_gt(refused, 7000);
    ck_assert_uint_eq(tp_intern_refused() - r0, refused);
    ck_assert_uint_le(tp_intern_bytes(), TP_INTERN_EARLY_BYTES);
    ck_assert_str_eq(tp_intern_str(TP_INTERN_OVERFLOW), "<name table full>");
    ck_assert_uint_eq(tp_intern("kept", (size_t)-1), kept);
    ck_assert_uint_eq(tp_intern_find("kept", (size_t)-1), kept);
    ck_assert_str_eq(tp_intern_str(kept), "kept");

    /* a larger budget (activation): more names fit, still within it */
    tp_intern_set_budget(4u << 20);
    ck_assert_uint_lt(fill(10000, 20000), 1);
    ck_assert_uint_gt(fill(30000, 40000), 10000);
    ck_assert_uint_le(tp_intern_bytes(), 4u << 20);
    tp_intern_set_budget(1u << 20);         /* never lowered */
    ck_assert_uint_gt(tp_intern_bytes(), 1u << 20);
}
END_TEST

/* The other bound: TP_INTERN_MAX names, however short. */
START_TEST(test_count_bound)
{
    tp_intern_set_budget((size_t)1 << 30);
    char buf[32];
    uint64_t refused = 0, r0 = tp_intern_refused();
    for (uint32_t i = 0; i < TP_INTERN_MAX + 100; i++) {
        snprintf(buf, sizeof buf, "%u", i);
        refused += tp_intern(buf, (size_t)-1) == TP_INTERN_OVERFLOW;
    }
    ck_assert_uint_eq(refused, 102);        /* ids 0 and 1 are "" and the overflow */
    ck_assert_uint_eq(tp_intern_refused() - r0, 102);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("intern");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_budget_bounds_the_table);
    tcase_add_test(tc, test_count_bound);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
