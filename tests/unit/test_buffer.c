/*
 * test_buffer.c - per-thread buffers: nothing lost across threads, drops
 * counted when the pool is full, generations kept apart, exited threads'
 * buffers drained and reused.  Run under ThreadSanitizer by make check-tsan.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "collector/buffer.h"
#include "tests/unit/tp_test.h"

#define THREADS 8
#define PER_THREAD 20000

struct counts {
    uint64_t n, sum;
    uint64_t per_thread[THREADS];
};

static void write_records(uint8_t gen, uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        struct tp_record *r = tp_buf_reserve();
        if (!r)
            continue;
        memset(r, 0, sizeof *r);
        r->kind = TP_REC_API;
        r->gen = gen;
        r->t0 = first + i;
        tp_buf_commit();
    }
}

static void *writer(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    write_records(1, id * 1000000, PER_THREAD);
    return NULL;
}

static void count(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    (void)t;
    struct counts *c = ctx;
    c->n++;
    c->sum += r->t0;
    c->per_thread[r->t0 / 1000000]++;
}

START_TEST(test_threads_lose_nothing)
{
    ck_assert_int_eq(tp_buf_init(64), 0);
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, writer, (void *)i);
    /* drain while they write: the reader must never see half a record */
    struct counts c;
    memset(&c, 0, sizeof c);
    uint64_t late = 0;
    for (int k = 0; k < 50; k++)
        tp_buf_drain(1, count, &c, &late, 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    tp_buf_drain(1, count, &c, &late, 0);
    ck_assert_uint_eq(c.n, (uint64_t)THREADS * PER_THREAD);
    uint64_t want = 0;
    for (uint64_t t = 0; t < THREADS; t++) {
        ck_assert_uint_eq(c.per_thread[t], PER_THREAD);
        want += t * 1000000 * PER_THREAD + (uint64_t)PER_THREAD * (PER_THREAD - 1) / 2;
    }
    ck_assert_uint_eq(c.sum, want);
    ck_assert_uint_eq(late, 0);
    ck_assert_uint_eq(tp_buf_dropped(), 0);
    /* exited threads' buffers were retired: only chunks of live writers remain */
    tp_buf_drain(1, count, &c, &late, 0);
    ck_assert_uint_le(tp_buf_chunks_in_use(), 0);
}
END_TEST

START_TEST(test_full_pool_drops_and_counts)
{
    ck_assert_int_eq(tp_buf_init(1), 0);          /* 16 chunks */
    uint64_t n = 16 * TP_CHUNK_RECORDS + 1000;
    write_records(1, 0, n);
    ck_assert_uint_eq(tp_buf_dropped(), 1000);
    struct counts c;
    memset(&c, 0, sizeof c);
    ck_assert_uint_eq(tp_buf_drain(1, NULL, NULL, NULL, 1), 16 * TP_CHUNK_RECORDS);
    tp_buf_drain(1, count, &c, NULL, 0);
    ck_assert_uint_eq(c.n, 16 * TP_CHUNK_RECORDS);
    /* drained chunks come back: the writer can record again */
    write_records(2, 0, 3 * TP_CHUNK_RECORDS);
    ck_assert_uint_eq(tp_buf_dropped(), 1000);
}
END_TEST

START_TEST(test_generations)
{
    ck_assert_int_eq(tp_buf_init(4), 0);
    write_records(1, 0, 10);
    write_records(2, 100, 7);
    struct counts c;
    memset(&c, 0, sizeof c);
    uint64_t late = 0;
    /* window 1 stops at the first record of window 2 */
    ck_assert_uint_eq(tp_buf_drain(1, count, &c, &late, 0), 10);
    memset(&c, 0, sizeof c);
    write_records(1, 50, 3);                      /* a record of window 1 arriving late */
    ck_assert_uint_eq(tp_buf_drain(2, count, &c, &late, 0), 7);
    ck_assert_uint_eq(late, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("buffer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_threads_lose_nothing);
    tcase_add_test(tc, test_full_pool_drops_and_counts);
    tcase_add_test(tc, test_generations);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
