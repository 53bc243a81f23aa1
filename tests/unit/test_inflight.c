/*
 * test_inflight.c - the in-flight slots (collector/record/inflight.c): a
 * thread's slot holds its outermost blocking call and is clear after it;
 * a reader racing a thread that enters and leaves calls without pause
 * sees only whole calls (every field from one call: the sequence-lock
 * read); slots come back when threads exit; sequence numbers count per
 * communicator.  Run under check-tsan too (the slots are read across
 * threads with no lock).
 */
#include "collector/record/inflight.h"
#include "collector/contract/sink.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "tests/unit/tp_test.h"

/* The slot of thread "tid", or -1. */
static int slot_of(int tid, struct tp_inflight_view *v)
{
    for (unsigned i = 0; i < TP_INFLIGHT_SLOTS; i++)
        if (tp_inflight_read(i, v) && v->tid == tid)
            return (int)i;
    return -1;
}

START_TEST(test_begin_end_and_nesting)
{
    tp_clock_init();
    tp_inflight_activate();
    int me = (int)syscall(SYS_gettid);
    struct tp_inflight_view v;
    struct tp_inflight *s = tp_inflight_begin(7, 3, 5, 4096, 2, 0xabc, 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_ge(slot_of(me, &v), 0);
    ck_assert_uint_ne(v.t0, 0);
    ck_assert_uint_eq(v.api, 7);
    ck_assert_uint_eq(v.comm, 3);
    ck_assert_uint_eq(v.seq, 5);
    ck_assert_uint_eq(v.bytes, 4096);
    ck_assert_int_eq(v.peer, 2);
    ck_assert_uint_eq(v.handle, 0xabc);
    ck_assert_uint_eq(v.op, 1);
    /* a blocking call inside it (a cudaFree inside a collective) keeps the outer one */
    ck_assert_ptr_null(tp_inflight_begin(9, 0, 0, 0, -1, 0, 0));
    slot_of(me, &v);
    ck_assert_uint_eq(v.api, 7);
    tp_inflight_end(s);
    ck_assert_int_ge(slot_of(me, &v), 0);
    ck_assert_uint_eq(v.t0, 0);
}
END_TEST

static _Atomic int stop;

static void *caller(void *arg)
{
    (void)arg;
    for (uint64_t k = 1; !atomic_load(&stop); k++) {
        struct tp_inflight *s = tp_inflight_begin((uint32_t)(k & 0xffff), (uint32_t)k, k, k * 3,
                                                  (int32_t)(k & 0x7fff), k * 5, (uint32_t)k);
        for (int j = 0; j < 200; j++)       /* inside the call a little while */
            atomic_signal_fence(memory_order_seq_cst);
        tp_inflight_end(s);
    }
    return NULL;
}

/* Every view the reader takes is one call's: the fields agree with each
 * other (all derived from the call's k). */
START_TEST(test_reader_sees_whole_calls)
{
    tp_clock_init();
    tp_inflight_activate();
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, caller, NULL), 0);
    long seen = 0;
    time_t end = time(NULL) + 20;       /* a loaded machine may run the caller late */
    while (seen < 20000 && time(NULL) < end) {
        struct tp_inflight_view v;
        for (unsigned i = 0; i < 4; i++) {
            if (!tp_inflight_read(i, &v) || !v.t0)
                continue;
            ck_assert_uint_eq(v.bytes, v.seq * 3);
            ck_assert_uint_eq(v.handle, v.seq * 5);
            ck_assert_uint_eq(v.comm, (uint32_t)v.seq);
            ck_assert_uint_eq(v.api, v.seq & 0xffff);
            seen++;
        }
    }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    ck_assert_int_gt(seen, 0);
}
END_TEST

static void *one_call(void *arg)
{
    struct tp_inflight *s = tp_inflight_begin(1, 0, 0, 0, -1, 0, 0);
    *(int *)arg = s != NULL;
    tp_inflight_end(s);
    return NULL;
}

/* More threads than slots over the process's life, never at once: each
 * gets one, since an exiting thread gives its slot back. */
START_TEST(test_slots_come_back)
{
    tp_clock_init();
    tp_inflight_activate();
    for (int i = 0; i < TP_INFLIGHT_SLOTS + 50; i++) {
        pthread_t th;
        int got = 0;
        ck_assert_int_eq(pthread_create(&th, NULL, one_call, &got), 0);
        pthread_join(th, NULL);
        ck_assert_int_eq(got, 1);
    }
    ck_assert_uint_eq(tp_inflight_unwatched(), 0);
}
END_TEST

START_TEST(test_sequence_numbers)
{
    ck_assert_uint_eq(tp_inflight_last_seq(0), 0);
    ck_assert_uint_eq(tp_inflight_next_seq(0), 1);
    ck_assert_uint_eq(tp_inflight_next_seq(0), 2);
    ck_assert_uint_eq(tp_inflight_next_seq(1), 1);
    ck_assert_uint_eq(tp_inflight_last_seq(0), 2);
    ck_assert_uint_eq(tp_inflight_next_seq(TP_COMMS_LISTED), 0);    /* past the list */
    ck_assert_uint_eq(tp_inflight_last_seq(TP_COMMS_LISTED), 0);
}
END_TEST

static Suite *inflight_suite(void)
{
    Suite *s = suite_create("inflight");
    TCase *t = tcase_create("inflight");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_begin_end_and_nesting);
    tcase_add_test(t, test_reader_sees_whole_calls);
    tcase_add_test(t, test_slots_come_back);
    tcase_add_test(t, test_sequence_numbers);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(inflight_suite());
}
