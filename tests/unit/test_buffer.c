/*
 * test_buffer.c - per-thread buffers: nothing lost across threads, drops
 * counted when the pool is full, generations kept apart, exited threads'
 * buffers drained and reused.  Run under ThreadSanitizer by make check-tsan.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "collector/record/buffer.h"
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

/* 1 MiB: 16 chunks, of which the step markers keep TP_STEP_RESERVE(16) */
#define GENERAL_1MB (16 - TP_STEP_RESERVE(16))

START_TEST(test_full_pool_drops_and_counts)
{
    ck_assert_int_eq(tp_buf_init(1), 0);
    uint64_t n = GENERAL_1MB * TP_CHUNK_RECORDS + 1000;
    write_records(1, 0, n);
    ck_assert_uint_eq(tp_buf_dropped(), 1000);
    struct counts c;
    memset(&c, 0, sizeof c);
    ck_assert_uint_eq(tp_buf_drain(1, NULL, NULL, NULL, 1), GENERAL_1MB * TP_CHUNK_RECORDS);
    tp_buf_drain(1, count, &c, NULL, 0);
    ck_assert_uint_eq(c.n, GENERAL_1MB * TP_CHUNK_RECORDS);
    /* drained chunks come back: the writer can record again */
    write_records(2, 0, 3 * TP_CHUNK_RECORDS);
    ck_assert_uint_eq(tp_buf_dropped(), 1000);
}
END_TEST

struct steps_seen {
    uint64_t steps, others, index_sum;
    int32_t tid;
    char thread[16];
};

static void count_steps(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    (void)t;
    struct steps_seen *s = ctx;
    if (r->kind != TP_REC_STEP) {
        s->others++;
        return;
    }
    s->steps++;
    s->index_sum += r->u.step.index;
    s->tid = r->u.step.tid;
    memcpy(s->thread, r->u.step.thread, sizeof s->thread);
}

static int write_step(uint8_t gen, uint64_t index)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    r.kind = TP_REC_STEP;
    r.gen = gen;
    r.u.step.index = index;
    return tp_buf_write_step(&r);
}

/* A pool the other records filled still takes the step markers: the
 * reserve's 2 chunks (2,046 markers), each with its thread's id and name;
 * past those, a marker is dropped and counted.  Drained, the chunks go
 * back where they came from. */
START_TEST(test_step_markers_have_room)
{
    ck_assert_int_eq(tp_buf_init(1), 0);
    prctl(PR_SET_NAME, "stepper", 0, 0, 0);
    write_records(1, 0, GENERAL_1MB * TP_CHUNK_RECORDS + 10);
    ck_assert_uint_eq(tp_buf_dropped(), 10);
    uint64_t room = TP_STEP_RESERVE(16) * TP_CHUNK_RECORDS;
    for (uint64_t i = 0; i < room; i++)
        ck_assert_int_eq(write_step(1, i), 0);
    ck_assert_int_eq(write_step(1, room), -1);
    ck_assert_uint_eq(tp_buf_dropped(), 11);
    struct steps_seen s;
    memset(&s, 0, sizeof s);
    tp_buf_drain(1, count_steps, &s, NULL, 0);
    ck_assert_uint_eq(s.steps, room);
    ck_assert_uint_eq(s.index_sum, room * (room - 1) / 2);
    ck_assert_uint_eq(s.others, GENERAL_1MB * TP_CHUNK_RECORDS);
    ck_assert_int_eq(s.tid, (int32_t)syscall(SYS_gettid));
    ck_assert_str_eq(s.thread, "stepper");
    /* all back: the records fill the general chunks again, not the reserve */
    write_records(2, 0, GENERAL_1MB * TP_CHUNK_RECORDS + 5);
    ck_assert_uint_eq(tp_buf_dropped(), 11 + 5 + TP_CHUNK_RECORDS);  /* the writer's last
                                                                       chunk was kept */
    ck_assert_int_eq(write_step(2, 7), 0);
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

/* The flight recorder's ring: tp_buf_trim gives back the records begun
 * before a tick, chunks included, and keeps the rest for the dump;
 * tp_buf_limit drops and counts past its chunks. */
START_TEST(test_trim_and_limit)
{
    ck_assert_int_eq(tp_buf_init(16), 0);
    uint64_t n = 3 * TP_CHUNK_RECORDS + 10;       /* four chunks */
    write_records(5, 0, n);
    uint32_t held = tp_buf_chunks_in_use();
    ck_assert_uint_ge(held, 4);
    uint64_t taken = tp_buf_chunks_taken();
    tp_buf_trim(5, 2 * TP_CHUNK_RECORDS + 3);       /* the first two chunks and 3 records go */
    ck_assert_uint_eq(tp_buf_chunks_in_use(), held - 2);
    ck_assert_uint_eq(tp_buf_chunks_taken(), taken);
    struct counts c;
    memset(&c, 0, sizeof c);
    uint64_t late = 0;
    ck_assert_uint_eq(tp_buf_drain(5, count, &c, &late, 1), n - 2 * TP_CHUNK_RECORDS - 3);
    tp_buf_trim(5, 2 * TP_CHUNK_RECORDS + 3);       /* nothing more: idempotent */
    ck_assert_uint_eq(tp_buf_drain(5, NULL, NULL, &late, 1), n - 2 * TP_CHUNK_RECORDS - 3);
    ck_assert_uint_eq(late, 0);

    /* the limit: no new chunk while "held" are held */
    uint64_t dropped = tp_buf_dropped();
    tp_buf_limit(tp_buf_chunks_in_use());
    write_records(5, n, 2 * TP_CHUNK_RECORDS);     /* fills the current chunk, then drops */
    ck_assert_uint_gt(tp_buf_dropped(), dropped);
    tp_buf_limit(UINT32_MAX);
    uint64_t d2 = tp_buf_dropped();
    write_records(5, 10 * n, 10);
    ck_assert_uint_eq(tp_buf_dropped(), d2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("buffer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_threads_lose_nothing);
    tcase_add_test(tc, test_full_pool_drops_and_counts);
    tcase_add_test(tc, test_step_markers_have_room);
    tcase_add_test(tc, test_generations);
    tcase_add_test(tc, test_trim_and_limit);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
