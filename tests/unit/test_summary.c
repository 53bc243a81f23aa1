/*
 * test_summary.c - the summary handler: a window of known events in, the
 * text report parsed back; every figure (steps, calls, totals, means,
 * maxima, shares, launches, dropped) must equal what was fed.  Also: no
 * trace, no summary; an existing summary is never replaced.
 */
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handlers/handler.h"
#include "tests/unit/tp_test.h"

#define PID 77

static char root[64];
static char reports[128];
static struct tp_window win;

static void cleanup(void)
{
    tp_test_rmtree(root);
}

static void setup_window(void)
{
    if (!root[0]) {
        tp_test_mkdtemp(root, sizeof root, "summary");
    }
    snprintf(reports, sizeof reports, "%s/run/reports", root);
    memset(&win, 0, sizeof win);
    win.run_name = "myrun";
    win.hostname = "host";
    win.program = "train";
    win.pid = PID;
    win.rank = 2;
    win.world_size = 4;
    win.batch = 3;
    win.first_step = 0;
    win.last_step = 2;
    win.step_signal = "api";
    win.base_time_ns = 1000000000000LL;
    win.start_ns = 1000500000000LL;
    win.end_ns = win.start_ns + 29750000;
    win.records = 21;
    win.dropped = 5;
    win.late = 1;
    win.reports_folder = reports;
    snprintf(win.trace_path, sizeof win.trace_path, "%s/run/traces/rank2.3.pt.trace.json.gz", root);
}

static struct tp_record rec;
static struct tp_event ev;

static void prep(int kind, const char *name, const char *kernel, int64_t dur)
{
    memset(&rec, 0, sizeof rec);
    memset(&ev, 0, sizeof ev);
    rec.kind = (uint8_t)kind;
    ev.rec = &rec;
    ev.name = name;
    ev.kernel = kernel;
    ev.pid = PID;
    ev.tid = PID;
    ev.ts_ns = win.start_ns + 1000;
    ev.dur_ns = dur;
    ev.cbid = -1;
    ev.layer = TP_LAYER_RUNTIME;
}

static void send(const struct tp_handler *h, void *st, int kind, const char *name,
                 const char *kernel, int64_t dur)
{
    prep(kind, name, kernel, dur);
    h->event(st, &ev);
}

static char long_kernel[160];

static void feed(const struct tp_handler *h, void *st)
{
    static const int64_t steps[] = { 10000000, 12500000, 7250000 };
    for (int i = 2; i >= 0; i--) {
        prep(TP_REC_STEP, NULL, NULL, steps[i]);
        rec.u.step.index = (uint64_t)i;
        h->event(st, &ev);
    }
    for (int i = 0; i < 5; i++)
        send(h, st, TP_REC_LAUNCH, "cudaLaunchKernel", "kernel_a", 3000);
    for (int i = 0; i < 2; i++)
        send(h, st, TP_REC_LAUNCH, "cudaLaunchKernel", "kernel_b", 1500);
    memset(long_kernel, 'x', sizeof long_kernel - 1);
    memcpy(long_kernel, "void long_kernel<", 17);
    send(h, st, TP_REC_LAUNCH, "cudaLaunchKernel", long_kernel, 1000);
    send(h, st, TP_REC_API, "cudaMemcpyAsync", NULL, 10000);
    send(h, st, TP_REC_API, "cudaMemcpyAsync", NULL, 20000);
    send(h, st, TP_REC_API, "cudaMemcpyAsync", NULL, 30001);
    prep(TP_REC_LAUNCH, "cudaGraphLaunch", "", 500);
    rec.u.launch.func_kind = TP_FUNC_GRAPH;
    h->event(st, &ev);
    send(h, st, TP_REC_RANGE, "ignored range", NULL, 99999999);
    send(h, st, TP_REC_MARK, "ignored mark", NULL, 0);
}

static char *run_and_read(void (*fn)(const struct tp_handler *, void *), char *path, size_t n)
{
    const struct tp_handler *h = tp_handler_find("summary");
    ck_assert_ptr_nonnull(h);
    void *st = h->open(&win);
    ck_assert_ptr_nonnull(st);
    fn(h, st);
    ck_assert_int_eq(h->close(st, &win), 0);
    snprintf(path, n, "%s/rank2.3.pt.trace.summary.txt", reports);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char text[1 << 16];
    size_t k = fread(text, 1, sizeof text - 1, f);
    text[k] = '\0';
    fclose(f);
    return text;
}

/* The line of section "title" whose first column is "name". */
static const char *row(const char *text, const char *title, const char *name)
{
    const char *s = strstr(text, title);
    ck_assert_msg(s != NULL, "section %s missing", title);
    const char *end = strstr(s + 1, "\n\n");
    size_t n = strlen(name);
    for (const char *l = strchr(s, '\n'); l && (!end || l < end); l = strchr(l + 1, '\n')) {
        if (!strncmp(l + 1, name, n) && (l[1 + n] == ' ' || l[1 + n] == '\n'))
            return l + 1 + n;
    }
    ck_abort_msg("row %s missing in %s", name, title);
    return NULL;
}

START_TEST(test_numbers)
{
    setup_window();
    char path[256];
    char *text = run_and_read(feed, path, sizeof path);
    ck_assert_msg(text != NULL, "no summary at %s", path);

    ck_assert_ptr_nonnull(strstr(text, "trainprof summary of rank2.3.pt.trace.json.gz"));
    ck_assert_ptr_nonnull(strstr(text, "Run:          myrun\n"));
    ck_assert_ptr_nonnull(strstr(text, "Rank:         2 of 4"));
    ck_assert_ptr_nonnull(strstr(text, "Steps:        0..2 (3 recorded), batch 3\n"));
    ck_assert_ptr_nonnull(strstr(text, "Step signal:  api\n"));
    ck_assert_ptr_nonnull(strstr(text, "Window (ms):  29.750 wall time\n"));

    static const char *const step_ms[] = { "10.000", "12.500", "7.250" };
    const char *prev = NULL;
    for (int i = 0; i < 3; i++) {
        char idx[8], ms[16];
        snprintf(idx, sizeof idx, "%d", i);
        const char *r = row(text, "Per-step wall time", idx);
        ck_assert_int_eq(sscanf(r, "%15s", ms), 1);
        ck_assert_str_eq(ms, step_ms[i]);
        ck_assert(r > prev);
        prev = r;
    }
    ck_assert_ptr_nonnull(strstr(text, "Mean step wall time (ms): 9.917 over 3 steps\n"));

    unsigned long long calls;
    char total[32], mean[32], max[32], pct[32];
    const char *r = row(text, "Host API calls", "cudaMemcpyAsync");
    ck_assert_int_eq(sscanf(r, "%llu %31s %31s %31s %31s", &calls, total, mean, max, pct), 5);
    ck_assert_uint_eq(calls, 3);
    ck_assert_str_eq(total, "0.060");
    ck_assert_str_eq(mean, "20.000");
    ck_assert_str_eq(max, "30.001");
    ck_assert_str_eq(pct, "75.47%");
    r = row(text, "Host API calls", "cudaLaunchKernel");
    ck_assert_int_eq(sscanf(r, "%llu %31s %31s %31s %31s", &calls, total, mean, max, pct), 5);
    ck_assert_uint_eq(calls, 8);
    ck_assert_str_eq(total, "0.019");
    ck_assert_str_eq(mean, "2.375");
    ck_assert_str_eq(max, "3.000");
    ck_assert_str_eq(pct, "23.90%");
    r = row(text, "Host API calls", "cudaGraphLaunch");
    ck_assert_int_eq(sscanf(r, "%llu %31s %31s %31s %31s", &calls, total, mean, max, pct), 5);
    ck_assert_uint_eq(calls, 1);
    ck_assert_str_eq(mean, "0.500");
    ck_assert_str_eq(pct, "0.63%");
    ck_assert(strstr(text, "\ncudaMemcpyAsync") < strstr(text, "\ncudaLaunchKernel"));
    ck_assert(strstr(text, "\ncudaLaunchKernel") < strstr(text, "\ncudaGraphLaunch"));
    ck_assert_ptr_nonnull(strstr(text, "Host API time total (ms): 0.080\n"));
    ck_assert_ptr_null(strstr(text, "ignored"));

    r = row(text, "Kernels launched", "kernel_a");
    ck_assert_int_eq(sscanf(r, "%llu", &calls), 1);
    ck_assert_uint_eq(calls, 5);
    r = row(text, "Kernels launched", "kernel_b");
    ck_assert_int_eq(sscanf(r, "%llu", &calls), 1);
    ck_assert_uint_eq(calls, 2);
    r = row(text, "Kernels launched", "(graph)");
    ck_assert_int_eq(sscanf(r, "%llu", &calls), 1);
    ck_assert_uint_eq(calls, 1);
    char cut[120];
    snprintf(cut, sizeof cut, "%.100s...", long_kernel);
    r = row(text, "Kernels launched", cut);
    ck_assert_int_eq(sscanf(r, "%llu", &calls), 1);
    ck_assert_uint_eq(calls, 1);
    ck_assert_ptr_nonnull(strstr(text, "Launches total: 9\n"));
    ck_assert_ptr_nonnull(strstr(text, "Events: 21 records, 5 dropped, 1 late\n"));
    ck_assert_ptr_nonnull(strstr(text, "TRAINPROF_BUFFER_MB"));

    /* Columns line up: every line of the API table is as wide as its rules. */
    const char *api = strstr(text, "Host API calls\n") + strlen("Host API calls\n");
    size_t width = (size_t)(strchr(api, '\n') - api);
    for (int i = 0; i < 7; i++) {
        const char *nl = strchr(api, '\n');
        ck_assert_uint_eq((size_t)(nl - api), width);
        api = nl + 1;
    }
}
END_TEST

/* Two steps of 10 ms; kernels on two streams that overlap: step 0 busy
 * 2 ms + 3 ms with 1 ms overlap = 4 ms (40%), step 1 busy 5 ms (50%). */
static struct tp_window_step gpu_steps[2];

static void send_dev(const struct tp_handler *h, void *st, struct tp_dev_record *d, int kind,
                     const char *name, int64_t start, int64_t dur, int stream)
{
    memset(d, 0, sizeof *d);
    d->kind = (uint8_t)kind;
    d->stream = (uint32_t)stream;
    struct tp_event e = { .dev = d, .name = name, .pid = 0, .tid = stream, .cbid = -1,
                          .ts_ns = start, .dur_ns = dur, .occupancy = -1 };
    h->event(st, &e);
}

static void feed_gpu(const struct tp_handler *h, void *st)
{
    int64_t t = win.start_ns;
    for (int i = 1; i >= 0; i--) {
        prep(TP_REC_STEP, NULL, NULL, 10000000);
        rec.u.step.index = (uint64_t)i;
        ev.ts_ns = t + i * 10000000LL;
        h->event(st, &ev);
    }
    static struct tp_dev_record d[5];
    send_dev(h, st, &d[0], TP_DEV_KERNEL, "gemm", t + 1000000, 2000000, 7);
    send_dev(h, st, &d[1], TP_DEV_KERNEL, "relu", t + 2000000, 3000000, 13);
    send_dev(h, st, &d[2], TP_DEV_KERNEL, "gemm", t + 10000000, 4000000, 7);
    send_dev(h, st, &d[3], TP_DEV_MEMCPY, "Memcpy DtoH (Device -> Pageable)", t + 15000000, 1000000, 7);
    send_dev(h, st, &d[4], TP_DEV_SYNC, "Stream Sync", t + 16000000, 3000000, 7);
}

START_TEST(test_gpu)
{
    setup_window();
    win.first_step = 0;
    win.last_step = 1;
    for (int i = 0; i < 2; i++)
        gpu_steps[i] = (struct tp_window_step){ .index = (uint64_t)i,
                                                .start_ns = win.start_ns + i * 10000000LL,
                                                .end_ns = win.start_ns + (i + 1) * 10000000LL };
    win.steps = gpu_steps;
    win.steps_recorded = 2;
    win.gpu = 1;
    win.gpu_status = "active (CUPTI 130001)";
    win.gpu_kernels = 3;
    win.gpu_kernels_linked = 2;
    win.host_launches = 2;
    win.coverage = 2.0 / 3;
    char path[256];
    char *text = run_and_read(feed_gpu, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    char ms[32], busy[32];
    const char *r = row(text, "Per-step wall time", "0");
    ck_assert_int_eq(sscanf(r, "%31s %*s %*s %31s", ms, busy), 2);
    ck_assert_str_eq(busy, "40.0%");
    r = row(text, "Per-step wall time", "1");
    ck_assert_int_eq(sscanf(r, "%31s %*s %*s %31s", ms, busy), 2);
    ck_assert_str_eq(busy, "50.0%");
    ck_assert_ptr_nonnull(strstr(text, "GPU busy share of the steps: 45.0%"));
    ck_assert_ptr_nonnull(strstr(text, "GPU activity: active (CUPTI 130001)\n"));
    unsigned long long n;
    char total[32], pct[32];
    r = row(text, "GPU activity", "gemm");
    ck_assert_int_eq(sscanf(r, "%llu %31s %*s %*s %31s", &n, total, pct), 3);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(total, "6.000");
    ck_assert_str_eq(pct, "60.0%");
    ck_assert_ptr_null(strstr(text, "\nStream Sync"));
    ck_assert_ptr_nonnull(strstr(text, "GPU time total (ms): 10.000\n"));
    ck_assert_ptr_nonnull(strstr(text, "Coverage: 3 kernels seen by CUPTI, 2 linked to a launch seen by the wrappers (66.7%)"));
}
END_TEST

static void feed_nothing(const struct tp_handler *h, void *st)
{
    (void)h;
    (void)st;
}

START_TEST(test_no_trace_no_summary)
{
    setup_window();
    win.trace_path[0] = '\0';
    char path[256];
    ck_assert_ptr_null(run_and_read(feed, path, sizeof path));
    struct stat st;
    ck_assert_int_ne(stat(reports, &st), 0);
}
END_TEST

START_TEST(test_empty_and_no_replace)
{
    setup_window();
    win.last_step = 0;
    win.first_step = 1;
    win.step_signal = "";
    win.dropped = 0;
    char path[256];
    char *text = run_and_read(feed_nothing, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "Steps:        none recorded"));
    ck_assert_ptr_nonnull(strstr(text, "(no step recorded)"));
    ck_assert_ptr_nonnull(strstr(text, "(no API call recorded)"));
    ck_assert_ptr_nonnull(strstr(text, "(no launch recorded)"));
    ck_assert_ptr_null(strstr(text, "TRAINPROF_BUFFER_MB"));
    run_and_read(feed, path, sizeof path);
    char second[256];
    snprintf(second, sizeof second, "%s/rank2.3.pt.trace-1.summary.txt", reports);
    struct stat st;
    ck_assert_int_eq(stat(second, &st), 0);
    text = run_and_read(feed_nothing, path, sizeof path);
    ck_assert_ptr_nonnull(strstr(text, "(no step recorded)"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("summary");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_gpu);
    tcase_add_test(tc, test_no_trace_no_summary);
    tcase_add_test(tc, test_empty_and_no_replace);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
