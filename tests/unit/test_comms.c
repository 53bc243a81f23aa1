/*
 * test_comms.c - the communicator registry (collector/record/comms.c): serials in
 * creation order from any number of threads, the listing capped at
 * TP_COMMS_LISTED with the total still counted, sizes learnt late, and
 * NCCL's version codes in both of nccl.h's forms.  CK_FORK gives every
 * test a fresh registry.
 */
#include "collector/record/comms.h"

#include <check.h>
#include <pthread.h>
#include <string.h>
#include "tests/unit/tp_test.h"

START_TEST(test_version_forms)
{
    char buf[32];
    ck_assert_ptr_null(tp_comms_version(buf, sizeof buf));      /* never asked */
    tp_comms_set_version(22809);
    ck_assert_str_eq(tp_comms_version(buf, sizeof buf), "2.28.9");
    tp_comms_set_version(21805);
    ck_assert_str_eq(tp_comms_version(buf, sizeof buf), "2.18.5");
    tp_comms_set_version(2804);                 /* before 2.9: X*1000 + Y*100 + Z */
    ck_assert_str_eq(tp_comms_version(buf, sizeof buf), "2.8.4");
    tp_comms_set_version(0);                    /* a failed query keeps the last */
    ck_assert_str_eq(tp_comms_version(buf, sizeof buf), "2.8.4");
}
END_TEST

START_TEST(test_order_cap_and_update)
{
    struct tp_comm_info v[TP_COMMS_LISTED + 8];
    uint32_t total = 99;
    ck_assert_uint_eq(tp_comms_list(v, TP_COMMS_LISTED, &total), 0);
    ck_assert_uint_eq(total, 0);
    ck_assert_uint_eq(tp_comms_add(4, 1), 0);
    ck_assert_uint_eq(tp_comms_add(0, 0), 1);   /* size not known yet */
    ck_assert_uint_eq(tp_comms_add(8, 3), 2);
    tp_comms_update(1, 3, 2);
    size_t n = tp_comms_list(v, 8, &total);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(total, 3);
    uint32_t sizes[] = { 4, 3, 8 };
    int32_t ranks[] = { 1, 2, 3 };
    for (uint32_t i = 0; i < 3; i++) {
        ck_assert_uint_eq(v[i].serial, i);
        ck_assert_uint_eq(v[i].size, sizes[i]);
        ck_assert_int_eq(v[i].rank, ranks[i]);
    }
    for (int i = 3; i < TP_COMMS_LISTED + 5; i++)
        ck_assert_uint_eq(tp_comms_add(2, 0), (uint32_t)i);
    tp_comms_update(TP_COMMS_LISTED + 1, 5, 5);  /* not listed: ignored */
    n = tp_comms_list(v, TP_COMMS_LISTED + 8, &total);
    ck_assert_uint_eq(n, TP_COMMS_LISTED);
    ck_assert_uint_eq(total, TP_COMMS_LISTED + 5);
    ck_assert_uint_eq(tp_comms_list(v, 2, NULL), 2);
}
END_TEST

static void *add_many(void *arg)
{
    uint32_t *mine = arg;
    for (int i = 0; i < 8; i++)
        mine[i] = tp_comms_add(2, i);
    return NULL;
}

/* ncclCommInitAll's shape: several threads create at once; every serial is
 * handed out once. */
START_TEST(test_threads_get_distinct_serials)
{
    pthread_t th[4];
    uint32_t got[4][8];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, add_many, got[i]), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int seen[32];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 8; k++) {
            ck_assert_uint_lt(got[i][k], 32);
            seen[got[i][k]]++;
        }
    for (int i = 0; i < 32; i++)
        ck_assert_int_eq(seen[i], 1);
    struct tp_comm_info v[32];
    ck_assert_uint_eq(tp_comms_list(v, 32, NULL), 32);
}
END_TEST

static Suite *comms_suite(void)
{
    Suite *s = suite_create("comms");
    TCase *t = tcase_create("comms");
    tcase_add_test(t, test_version_forms);
    tcase_add_test(t, test_order_cap_and_update);
    tcase_add_test(t, test_threads_get_distinct_serials);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(comms_suite());
}
