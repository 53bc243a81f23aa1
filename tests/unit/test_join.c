/*
 * test_join.c - the join of host records to CUPTI's records (join.h):
 * a launch takes the correlation of the CUPTI API record inside its interval
 * on its thread, preferring one with device work over a nested call without
 * any; another thread's record is never taken while one of ours fits; a
 * library call's own id reaches the kernels it issued through the external
 * correlation; coverage counts kernels linked to host launches, not those
 * launched before the window; device
 * records become events with Kineto's names; a sync on a CUDA event waits
 * on the last cudaEventRecord of that event (same context) before it.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "collector/record/apis.h"
#include "collector/drain/join.h"
#include "collector/record/intern.h"
#include "tests/unit/tp_test.h"

static struct tp_tbuf thread5 = { .tid = 5, .pthread_id = 0x5555 };

static struct tp_device_api apis[] = {
    { .start = 105, .end = 195, .correlation = 11, .thread_id = 5, .cbid = 211 },
    { .start = 120, .end = 130, .correlation = 12, .thread_id = 5, .cbid = 1 },   /* nested, no work */
    { .start = 150, .end = 160, .correlation = 13, .thread_id = 9, .cbid = 211 }, /* other thread */
    { .start = 305, .end = 310, .correlation = 14, .thread_id = 0x5555, .cbid = 41 },
};
static struct tp_device_ext exts[] = { { .correlation = 11, .external_id = 50 } };
static struct tp_device_record recs[4];

static struct tp_device_batch window(void)
{
    memset(recs, 0, sizeof recs);
    recs[0] = (struct tp_device_record){ .kind = TP_DEVICE_KERNEL, .correlation = 11, .start = 300, .end = 400,
                                      .stream = 7, .name = tp_intern("gemm", (size_t)-1) };
    recs[1] = (struct tp_device_record){ .kind = TP_DEVICE_KERNEL, .correlation = 13, .start = 410, .end = 420,
                                      .stream = 7, .name = tp_intern("other", (size_t)-1) };
    recs[2] = (struct tp_device_record){ .kind = TP_DEVICE_MEMCPY, .correlation = 14, .start = 430, .end = 440,
                                      .stream = 13, .copy_kind = 2, .src_kind = 3, .dst_kind = 1 };
    recs[3] = (struct tp_device_record){ .kind = TP_DEVICE_SYNC, .correlation = 0, .start = 450, .end = 460,
                                      .copy_kind = 3 };
    return (struct tp_device_batch){ .rec = recs, .n_rec = 4, .api = apis, .n_api = 4, .ext = exts, .n_ext = 1 };
}

static struct tp_event seen[8];
static char names[8][96];           /* event names live only during the call */
static int nseen;

static void collect(void *ctx, const struct tp_event *ev)
{
    (void)ctx;
    ck_assert_int_lt(nseen, 8);
    snprintf(names[nseen], sizeof names[nseen], "%s", ev->name);
    seen[nseen] = *ev;
    seen[nseen].name = names[nseen];
    nseen++;
}

START_TEST(test_join)
{
    struct tp_device_batch dev = window();
    uint64_t next_own = 1;
    struct tp_join *j = tp_join_new(&dev, &next_own);
    ck_assert_ptr_nonnull(j);
    ck_assert_uint_ge(next_own, 1ull << 32);

    struct tp_record lib = { .kind = TP_REC_API, .api = TP_API_cublasSgemm_v2, .t0 = 50, .t1 = 500 };
    struct tp_record launch = { .kind = TP_REC_LAUNCH, .api = TP_API_cudaLaunchKernel, .t0 = 100, .t1 = 200 };
    struct tp_record copy = { .kind = TP_REC_API, .api = TP_API_cudaMemcpy, .t0 = 300, .t1 = 320 };
    struct tp_record lone = { .kind = TP_REC_API, .api = TP_API_cudaMemcpy, .t0 = 600, .t1 = 620 };
    tp_join_host(j, &thread5, &lib);
    tp_join_host(j, &thread5, &launch);
    tp_join_host(j, &thread5, &copy);
    tp_join_host(j, &thread5, &lone);
    ck_assert_uint_eq(launch.u.launch.corr, 11);   /* not 12 (no work), not 13 (thread 9) */
    ck_assert_uint_eq(copy.u.api.corr, 14);        /* CUPTI's thread id = pthread_self's low bits */
    ck_assert_uint_eq(lone.u.api.corr, 0);
    ck_assert_uint_ne(lib.u.lib.corr, 0);

    struct tp_window w;
    memset(&w, 0, sizeof w);
    tp_join_finish(j, &w);
    ck_assert_int_eq(w.gpu, 1);
    ck_assert_uint_eq(w.gpu_kernels, 2);
    ck_assert_uint_eq(w.gpu_kernels_linked, 1);
    ck_assert(w.coverage == 0.5);
    ck_assert_uint_eq(w.gpu_records, 4);

    struct tp_event le = { .rec = &lib, .layer = TP_LAYER_LIBRARY };
    tp_join_event(j, &le);
    ck_assert_uint_ge(le.correlation, 1ull << 32);
    ck_assert_uint_eq(le.external_id, le.correlation);
    struct tp_event ke = { .rec = &launch, .layer = TP_LAYER_RUNTIME };
    tp_join_event(j, &ke);
    ck_assert_int_eq(ke.flow, 1);
    ck_assert_uint_eq(ke.external_id, le.external_id);

    struct tp_clock_map map = { .tick0 = 0, .unix0_ns = 1000, .ns_per_tick = 1.0 };
    nseen = 0;
    tp_join_dispatch(j, &map, collect, NULL);
    ck_assert_int_eq(nseen, 4);
    ck_assert_str_eq(seen[0].name, "gemm");
    ck_assert_int_eq(seen[0].flow, 1);
    ck_assert_uint_eq(seen[0].external_id, le.external_id);
    ck_assert_int_eq(seen[0].tid, 7);
    ck_assert_int_eq(seen[0].ts_ns, 1300);
    ck_assert_int_eq(seen[0].dur_ns, 100);
    ck_assert_str_eq(seen[1].name, "other");
    ck_assert_int_eq(seen[1].flow, 0);
    ck_assert_uint_eq(seen[1].external_id, 0);
    ck_assert_str_eq(seen[2].name, "Memcpy DtoH (Device -> Pageable)");
    ck_assert_int_eq(seen[2].flow, 1);
    ck_assert_str_eq(seen[3].name, "Stream Sync");
    tp_join_free(j);
}
END_TEST

/* A kernel launched before the window (its correlation below every API
 * record of the window) that runs into it is not counted: no launch of the
 * window could claim it, and the coverage would read a miss. */
START_TEST(test_kernel_from_before_the_window_not_counted)
{
    struct tp_device_batch dev = window();
    recs[3] = (struct tp_device_record){ .kind = TP_DEVICE_KERNEL, .correlation = 7, .start = 90, .end = 110,
                                      .stream = 7, .name = tp_intern("carried", (size_t)-1) };
    dev.first_corr = 11;
    uint64_t next_own = 1;
    struct tp_join *j = tp_join_new(&dev, &next_own);
    struct tp_record launch = { .kind = TP_REC_LAUNCH, .api = TP_API_cudaLaunchKernel, .t0 = 100, .t1 = 200 };
    tp_join_host(j, &thread5, &launch);
    struct tp_window w;
    memset(&w, 0, sizeof w);
    tp_join_finish(j, &w);
    ck_assert_uint_eq(w.gpu_kernels, 2);            /* gemm (11) and other (13), not 7 */
    ck_assert_uint_eq(w.gpu_kernels_linked, 1);
    dev.first_corr = 0;                             /* no API record in the window: all count */
    tp_join_free(j);
    j = tp_join_new(&dev, &next_own);
    memset(&w, 0, sizeof w);
    tp_join_finish(j, &w);
    ck_assert_uint_eq(w.gpu_kernels, 3);
    tp_join_free(j);
}
END_TEST

/* A thread moved between cores can read CUPTI's start a tick before ours
 * (TSCs a few ticks apart): a record just outside the call is still its
 * own, one far outside is not. */
START_TEST(test_join_clock_slack)
{
    struct tp_device_api a[] = {
        { .start = 999, .end = 1101, .correlation = 21, .thread_id = 5, .cbid = 211 },
        { .start = 2000, .end = 2050, .correlation = 22, .thread_id = 5, .cbid = 211 },
    };
    struct tp_device_record k[] = {
        { .kind = TP_DEVICE_KERNEL, .correlation = 21, .start = 3000, .end = 3010 },
        { .kind = TP_DEVICE_KERNEL, .correlation = 22, .start = 3020, .end = 3030 },
    };
    struct tp_device_batch dev = { .rec = k, .n_rec = 2, .api = a, .n_api = 2 };
    uint64_t next_own = 1;
    struct tp_join *j = tp_join_new(&dev, &next_own);
    ck_assert_ptr_nonnull(j);
    struct tp_record near = { .kind = TP_REC_LAUNCH, .api = TP_API_cudaLaunchKernel, .t0 = 1000, .t1 = 1100 };
    struct tp_record far = { .kind = TP_REC_LAUNCH, .api = TP_API_cudaLaunchKernel, .t0 = 2500, .t1 = 2600 };
    tp_join_host(j, &thread5, &near);
    tp_join_host(j, &thread5, &far);
    ck_assert_uint_eq(near.u.launch.corr, 21);
    ck_assert_uint_eq(far.u.launch.corr, 0);      /* 22 lies 450 ticks before it */
    tp_join_free(j);
}
END_TEST

/* A driver launch made by a runtime we did not see (statically linked):
 * CUPTI's one record is the runtime call's, around it.  That record of the
 * thread is taken before a record of a thread CUPTI named otherwise inside
 * the call (thread 9, no thread of ours: before, 32 was taken and the
 * launch linked to thread 9's kernel); of two driver launches inside one
 * runtime call, the first takes it and the second nothing.  Record 33
 * starts 50 ticks before its call, within the join's slack (64): before,
 * the search for a record around the call began below it (l2 got 0). */
START_TEST(test_join_enclosing_record_of_the_thread_first)
{
    struct tp_device_api a[] = {
        { .start = 50, .end = 400, .correlation = 31, .thread_id = 5, .cbid = 211 },
        { .start = 160, .end = 170, .correlation = 32, .thread_id = 9, .cbid = 211 },
        { .start = 450, .end = 700, .correlation = 33, .thread_id = 5, .cbid = 211 },
    };
    struct tp_device_record k[] = {
        { .kind = TP_DEVICE_KERNEL, .correlation = 31, .start = 800, .end = 810 },
        { .kind = TP_DEVICE_KERNEL, .correlation = 32, .start = 820, .end = 830 },
        { .kind = TP_DEVICE_KERNEL, .correlation = 33, .start = 840, .end = 850 },
    };
    struct tp_device_batch dev = { .rec = k, .n_rec = 3, .api = a, .n_api = 3 };
    uint64_t next_own = 1;
    struct tp_join *j = tp_join_new(&dev, &next_own);
    ck_assert_ptr_nonnull(j);
    struct tp_record l1 = { .kind = TP_REC_LAUNCH, .api = TP_API_cuLaunchKernel, .t0 = 150, .t1 = 250 };
    struct tp_record l2 = { .kind = TP_REC_LAUNCH, .api = TP_API_cuLaunchKernel, .t0 = 500, .t1 = 530 };
    struct tp_record l3 = { .kind = TP_REC_LAUNCH, .api = TP_API_cuLaunchKernel, .t0 = 550, .t1 = 580 };
    tp_join_host(j, &thread5, &l1);
    tp_join_host(j, &thread5, &l2);
    tp_join_host(j, &thread5, &l3);
    ck_assert_uint_eq(l1.u.launch.corr, 31);
    ck_assert_uint_eq(l2.u.launch.corr, 33);
    ck_assert_uint_eq(l3.u.launch.corr, 0);
    tp_join_free(j);
}
END_TEST

/* Kineto's wait_on_*: event 5 of context 1 recorded on stream 13 (corr 10),
 * then on stream 14 (corr 40); the same event id in context 2 (corr 45);
 * event 7 recorded at corr 35. */
START_TEST(test_wait_on_event)
{
    static struct tp_device_cuda_event evs[] = {      /* sorted by context, event, correlation */
        { .context = 1, .event_id = 5, .correlation = 10, .stream = 13 },
        { .context = 1, .event_id = 5, .correlation = 40, .stream = 14 },
        { .context = 1, .event_id = 7, .correlation = 35, .stream = 15 },
        { .context = 2, .event_id = 5, .correlation = 45, .stream = 99 },
    };
    struct tp_device_record syncs[] = {
        { .kind = TP_DEVICE_SYNC, .copy_kind = TP_SYNC_STREAM_WAIT_EVENT, .context = 1, .event_id = 5,
          .correlation = 30, .stream = 20, .start = 100, .end = 110 },
        { .kind = TP_DEVICE_SYNC, .copy_kind = TP_SYNC_EVENT, .context = 1, .event_id = 5,
          .correlation = 50, .stream = 7, .start = 200, .end = 210 },    /* 40, not 45 (context 2) */
        { .kind = TP_DEVICE_SYNC, .copy_kind = TP_SYNC_EVENT, .context = 1, .event_id = 5,
          .correlation = 5, .stream = 7, .start = 300, .end = 310 },     /* before any record */
        { .kind = TP_DEVICE_SYNC, .copy_kind = TP_SYNC_STREAM_WAIT_EVENT, .context = 1, .event_id = 9,
          .correlation = 60, .stream = 20, .start = 400, .end = 410 },   /* never recorded */
        { .kind = TP_DEVICE_SYNC, .copy_kind = TP_SYNC_EVENT, .context = 1, .event_id = 7,
          .correlation = 35, .stream = 7, .start = 500, .end = 510 },    /* only below counts */
        { .kind = TP_DEVICE_SYNC, .copy_kind = TP_SYNC_EVENT, .context = 2, .event_id = 5,
          .correlation = 46, .stream = 7, .start = 600, .end = 610 },
        { .kind = TP_DEVICE_SYNC, .copy_kind = TP_SYNC_STREAM, .context = 1, .event_id = 5,
          .correlation = 70, .stream = 20, .start = 700, .end = 710 },   /* not an event sync */
    };
    struct tp_device_batch dev = { .rec = syncs, .n_rec = 7, .cuda_event = evs, .n_cuda_event = 4 };
    uint64_t next_own = 1;
    struct tp_join *j = tp_join_new(&dev, &next_own);
    ck_assert_ptr_nonnull(j);
    struct tp_window w;
    memset(&w, 0, sizeof w);
    tp_join_finish(j, &w);
    ck_assert_uint_eq(w.gpu_records, 7);           /* CUDA event records are no events */
    struct tp_clock_map map = { .tick0 = 0, .unix0_ns = 1000, .ns_per_tick = 1.0 };
    nseen = 0;
    tp_join_dispatch(j, &map, collect, NULL);
    ck_assert_int_eq(nseen, 7);
    static const struct { const char *name; int64_t stream, corr; } want[] = {
        { "Stream Wait Event", 13, 10 }, { "Event Sync", 14, 40 }, { "Event Sync", -1, -1 },
        { "Stream Wait Event", -1, -1 }, { "Event Sync", -1, -1 }, { "Event Sync", 99, 45 },
        { "Stream Sync", -1, -1 },
    };
    for (int i = 0; i < 7; i++) {
        ck_assert_str_eq(seen[i].name, want[i].name);
        ck_assert_int_eq(tp_device_waits_on_event(seen[i].dev), i < 6);
        ck_assert_msg(seen[i].wait_on_stream == want[i].stream, "%d: stream %lld", i,
                      (long long)seen[i].wait_on_stream);
        ck_assert_msg(seen[i].wait_on_corr == want[i].corr, "%d: corr %lld", i,
                      (long long)seen[i].wait_on_corr);
    }
    tp_join_free(j);

    /* No CUDA event records at all (the kind refused): every answer unknown. */
    dev.cuda_event = NULL;
    dev.n_cuda_event = 0;
    j = tp_join_new(&dev, &next_own);
    ck_assert_ptr_nonnull(j);
    nseen = 0;
    tp_join_dispatch(j, &map, collect, NULL);
    for (int i = 0; i < nseen; i++)
        ck_assert(seen[i].wait_on_stream == -1 && seen[i].wait_on_corr == -1);
    tp_join_free(j);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_join);
    tcase_add_test(tc, test_join_clock_slack);
    tcase_add_test(tc, test_join_enclosing_record_of_the_thread_first);
    tcase_add_test(tc, test_kernel_from_before_the_window_not_counted);
    tcase_add_test(tc, test_wait_on_event);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
