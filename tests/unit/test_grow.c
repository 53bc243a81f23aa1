/*
 * test_grow.c - the growable-array step (collector/common/grow.h): appends keep
 * their elements across moves, the capacity doubles from "first" and
 * jumps straight to a larger need, a block with room is returned as is,
 * and an overflowing size fails without touching the caller's array.
 */
#include "collector/common/grow.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/unit/tp_test.h"

START_TEST(test_appends)
{
    uint64_t *v = NULL;
    size_t n = 0, cap = 0;
    size_t caps[32];
    int changes = 0;
    for (uint64_t i = 0; i < 5000; i++) {
        size_t before = cap;
        uint64_t *g = tp_grow(v, &cap, n + 1, sizeof *v, 64);
        ck_assert_ptr_nonnull(g);
        v = g;
        v[n++] = i * 7;
        if (cap != before)
            caps[changes++] = cap;
    }
    ck_assert_uint_eq(caps[0], 64);
    for (int i = 1; i < changes; i++)
        ck_assert_uint_eq(caps[i], 2 * caps[i - 1]);
    ck_assert_uint_eq(cap, 8192);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(v[i], i * 7);
    free(v);
}
END_TEST

START_TEST(test_room_and_jumps)
{
    size_t cap = 0;
    char *b = tp_grow(NULL, &cap, 5000, 1, 1024);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(cap, 8192);          /* 1024 doubled until 5000 fits */
    ck_assert_ptr_eq(tp_grow(b, &cap, 8192, 1, 1024), b);
    ck_assert_uint_eq(cap, 8192);
    free(b);
}
END_TEST

START_TEST(test_overflow_leaves_array)
{
    size_t cap = 16;
    uint64_t *v = malloc(cap * sizeof *v);
    ck_assert_ptr_nonnull(v);
    v[3] = 42;
    ck_assert_ptr_null(tp_grow(v, &cap, SIZE_MAX / 4, sizeof *v, 16));
    ck_assert_uint_eq(cap, 16);
    ck_assert_ptr_null(tp_grow(v, &cap, SIZE_MAX, sizeof *v, 16));
    ck_assert_uint_eq(cap, 16);
    ck_assert_uint_eq(v[3], 42);           /* still ours, still intact */
    free(v);
}
END_TEST

static Suite *grow_suite(void)
{
    Suite *s = suite_create("grow");
    TCase *t = tcase_create("grow");
    tcase_add_test(t, test_appends);
    tcase_add_test(t, test_room_and_jumps);
    tcase_add_test(t, test_overflow_leaves_array);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(grow_suite());
}
