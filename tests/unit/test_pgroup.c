/*
 * test_pgroup.c - the default process group as the framework reports it
 * (collector/record/pgroup.h, trainprof_process_group): a group set is read
 * back whole; NULL forgets it; bad values are refused and leave the state
 * as it was; past the calls kept, later calls are refused and the last
 * state stands; a reader on another thread never sees a torn backend.
 */
#include "collector/config/config.h"
#include "collector/record/pgroup.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "tests/unit/tp_test.h"

START_TEST(test_set_get_forget)
{
    tp_pgroup_reset();
    struct tp_pgroup g;
    ck_assert_int_eq(tp_pgroup_get(&g), 0);
    ck_assert_int_eq(tp_pgroup_set("cpu:gloo,cuda:nccl", 3, 8), 0);
    ck_assert_int_eq(tp_pgroup_get(&g), 1);
    ck_assert_str_eq(g.backend, "cpu:gloo,cuda:nccl");
    ck_assert_int_eq(g.rank, 3);
    ck_assert_int_eq(g.world_size, 8);
    ck_assert_int_eq(tp_pgroup_set(NULL, 0, 0), 0);          /* destroyed */
    ck_assert_int_eq(tp_pgroup_get(&g), 0);
    ck_assert_int_eq(tp_pgroup_set("gloo", 0, 1), 0);        /* a new one */
    ck_assert_int_eq(tp_pgroup_get(&g), 1);
    ck_assert_str_eq(g.backend, "gloo");
}
END_TEST

START_TEST(test_bad_values_refused)
{
    tp_pgroup_reset();
    ck_assert_int_eq(tp_pgroup_set("nccl", 1, 2), 0);
    char big[TP_PGROUP_BACKEND + 1];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(tp_pgroup_set(big, 0, 1), -1);                  /* too long */
    big[TP_PGROUP_BACKEND - 1] = '\0';
    ck_assert_int_eq(tp_pgroup_set("", 0, 1), -1);
    ck_assert_int_eq(tp_pgroup_set("gl\noo", 0, 1), -1);             /* not printable */
    ck_assert_int_eq(tp_pgroup_set("gloo\"", 0, 1), 0);              /* printable: the writer escapes */
    ck_assert_int_eq(tp_pgroup_set("gloo", -1, 2), -1);
    ck_assert_int_eq(tp_pgroup_set("gloo", 2, 2), -1);               /* rank >= world size */
    ck_assert_int_eq(tp_pgroup_set("gloo", 0, 0), -1);
    struct tp_pgroup g;
    ck_assert_int_eq(tp_pgroup_get(&g), 1);
    ck_assert_str_eq(g.backend, "gloo\"");
    ck_assert_int_eq(tp_pgroup_set(big, 0, 1), 0);                   /* 63 bytes: kept */
    ck_assert_int_eq(tp_pgroup_get(&g), 1);
    ck_assert_uint_eq(strlen(g.backend), TP_PGROUP_BACKEND - 1);
}
END_TEST

START_TEST(test_past_capacity_last_stands)
{
    tp_pgroup_reset();
    int kept = 0;
    char name[16];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "b%d", i);
        kept += tp_pgroup_set(name, 0, 1) == 0;
    }
    ck_assert_int_gt(kept, 1);
    ck_assert_int_lt(kept, 100);
    struct tp_pgroup g;
    ck_assert_int_eq(tp_pgroup_get(&g), 1);
    snprintf(name, sizeof name, "b%d", kept - 1);
    ck_assert_str_eq(g.backend, name);
    ck_assert_int_eq(tp_pgroup_set(NULL, 0, 0), -1);                 /* refused too */
    ck_assert_int_eq(tp_pgroup_get(&g), 1);
}
END_TEST

static void *writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++)
        tp_pgroup_set(i % 2 ? "gloo" : "nccl", i % 4, 4);
    return NULL;
}

/* What a reader sees is always one whole call (TSan checks the rest). */
/* The rank now: the launcher's RANK first; else the process group; else
 * the largest NCCL communicator; else the launcher's other variables. */
START_TEST(test_rank_now_by_source)
{
    tp_pgroup_reset();
    tp_cfg.rank = 0;
    tp_cfg.world_size = 2;
    tp_cfg.rank_given = 0;
    int r, w;
    ck_assert_int_eq(tp_rank_now(&r, &w), TP_RANK_LAUNCHER);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(w, 2);
    tp_pgroup_nccl(1, 2);          /* a tensor-parallel pair */
    tp_pgroup_nccl(5, 8);          /* the job's */
    tp_pgroup_nccl(0, 4);          /* smaller: kept out */
    tp_pgroup_nccl(3, 3);          /* bad: rank >= size */
    ck_assert_int_eq(tp_rank_now(&r, &w), TP_RANK_NCCL);
    ck_assert_int_eq(r, 5);
    ck_assert_int_eq(w, 8);
    ck_assert_int_eq(tp_pgroup_set("gloo", 6, 8), 0);
    ck_assert_int_eq(tp_rank_now(&r, &w), TP_RANK_PGROUP);
    ck_assert_int_eq(r, 6);
    ck_assert_int_eq(w, 8);
    tp_cfg.rank = 7;
    tp_cfg.world_size = 8;
    tp_cfg.rank_given = 1;
    ck_assert_int_eq(tp_rank_now(&r, &w), TP_RANK_LAUNCHER);
    ck_assert_int_eq(r, 7);
    tp_cfg.rank_given = 0;
    tp_cfg.rank = 0;
    tp_cfg.world_size = 1;
    tp_pgroup_reset();
}
END_TEST

START_TEST(test_reader_sees_whole_calls)
{
    tp_pgroup_reset();
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, writer, NULL), 0);
    struct tp_pgroup g;
    for (int i = 0; i < 100000; i++) {
        if (!tp_pgroup_get(&g))
            continue;
        ck_assert(strcmp(g.backend, "gloo") == 0 || strcmp(g.backend, "nccl") == 0);
        ck_assert_int_eq(strcmp(g.backend, "gloo") == 0, g.rank % 2);
    }
    pthread_join(t, NULL);
}
END_TEST

static Suite *pgroup_suite(void)
{
    Suite *s = suite_create("pgroup");
    TCase *t = tcase_create("pgroup");
    tcase_add_test(t, test_set_get_forget);
    tcase_add_test(t, test_bad_values_refused);
    tcase_add_test(t, test_past_capacity_last_stands);
    tcase_add_test(t, test_reader_sees_whole_calls);
    tcase_add_test(t, test_rank_now_by_source);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(pgroup_suite());
}
