/*
 * test_summary.c - the summary handler: a window of known events in, the
 * text report parsed back; every figure (steps, calls, totals, means,
 * maxima, shares, launches, dropped) must equal what was fed.  Also: no
 * trace, no summary; an existing summary is never replaced; the memory
 * table; collectives' bandwidths from host or device (kernel) time; the
 * one-line summary.  The summary.json beside the text, parsed
 * with jansson: the same figures, exact integers, top rows cut to 20.
 * The memory ledger's owner tables and JSON (copied to TP_TEST_SUMMARY_OUT
 * for tests/cli/test_summary_sources.py when set).
 * The operator tables: torch's operators, its record_function
 * annotations and the steps' row, each self time and share computed here
 * from the ranges fed (nesting by time on each thread), and the table by
 * input shapes.
 */
#include <check.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/device/cupti.h"
#include "collector/device/props.h"
#include "handlers/handler.h"
#include "tests/unit/tp_test.h"

#define PID 77

static char root[64];
static char reports[128];
static struct tp_window win;
static struct tp_saved saved;     /* what the handlers saved */

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
    memset(&saved, 0, sizeof saved);
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
    snprintf(saved.trace, sizeof saved.trace, "%s/run/traces/rank2.3.pt.trace.json.gz", root);
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
    ck_assert_int_eq(h->close(st, &win, &saved), 0);
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

static void send_dev(const struct tp_handler *h, void *st, struct tp_device_record *d, int kind,
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
    static struct tp_device_record d[5];
    send_dev(h, st, &d[0], TP_DEVICE_KERNEL, "gemm", t + 1000000, 2000000, 7);
    send_dev(h, st, &d[1], TP_DEVICE_KERNEL, "relu", t + 2000000, 3000000, 13);
    send_dev(h, st, &d[2], TP_DEVICE_KERNEL, "gemm", t + 10000000, 4000000, 7);
    send_dev(h, st, &d[3], TP_DEVICE_MEMCPY, "Memcpy DtoH (Device -> Pageable)", t + 15000000, 1000000, 7);
    send_dev(h, st, &d[4], TP_DEVICE_SYNC, "Stream Sync", t + 16000000, 3000000, 7);
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
    /* steps without library FLOPs: no GFLOP and TFLOP/s columns of zeros */
    const char *r = row(text, "Per-step wall time", "0");
    ck_assert_int_eq(sscanf(r, "%31s %31s", ms, busy), 2);
    ck_assert_str_eq(busy, "40.0%");
    r = row(text, "Per-step wall time", "1");
    ck_assert_int_eq(sscanf(r, "%31s %31s", ms, busy), 2);
    ck_assert_str_eq(busy, "50.0%");
    ck_assert_ptr_null(strstr(text, "GFLOP"));
    ck_assert_ptr_null(strstr(text, "TFLOP/s"));
    ck_assert_ptr_null(strstr(text, "MFU-like"));
    ck_assert_ptr_nonnull(strstr(text, "Library FLOPs: none in these steps"));
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
    saved.trace[0] = '\0';
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
    /* no section without a row in it (a CPU job's summary once showed
     * "Host API calls" and "Kernels launched" with nothing under them) */
    ck_assert_ptr_null(strstr(text, "Host API calls"));
    ck_assert_ptr_null(strstr(text, "Kernels launched"));
    ck_assert_ptr_null(strstr(text, "(no API call recorded)"));
    ck_assert_ptr_null(strstr(text, "(no launch recorded)"));
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


/* ---- memory, collectives, the one-line summary ---------------------------- */

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define MS 1000000LL

static struct tp_mem_usage mem_rows[3];
static struct tp_window_step coll_steps[2];

/* GPU0 1 GiB -> peak 1.75 GiB at 20 ms -> 1 GiB, one failed 8 GiB ask;
 * GPU1 nothing in the window; 64 MiB pinned host memory. */
static void setup_memory(void)
{
    memset(mem_rows, 0, sizeof mem_rows);
    mem_rows[0] = (struct tp_mem_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .start_bytes = GiB,
                                         .end_bytes = GiB, .peak_bytes = GiB + 768 * MiB,
                                         .peak_ns = win.start_ns + 20 * MS, .peak_process = 2 * GiB,
                                         .allocs = 2, .frees = 2, .failed = 1, .failed_bytes = 8 * GiB };
    mem_rows[1] = (struct tp_mem_usage){ .device = 1, .mclass = TP_MEM_DEVICE, .peak_process = 4096 };
    mem_rows[2] = (struct tp_mem_usage){ .device = -1, .mclass = TP_MEM_HOST, .end_bytes = 64 * MiB,
                                         .peak_bytes = 64 * MiB, .peak_ns = win.start_ns + 5 * MS,
                                         .peak_process = 64 * MiB, .allocs = 1 };
    win.mem = mem_rows;
    win.n_mem = 3;
}

static int coll_device;   /* feed_colls: also send the collectives' kernels */

static void send_coll(const struct tp_handler *h, void *st, const char *name, unsigned op, unsigned ranks,
                      uint64_t bytes, int64_t dur, uint64_t ext, unsigned flags)
{
    prep(TP_REC_API, name, NULL, dur);
    ev.layer = TP_LAYER_LIBRARY;
    ev.form = TP_FORM_COLL;
    ev.external_id = ext;
    ev.correlation = ext;
    rec.u.lib.op = (uint8_t)op;
    rec.u.lib.m = ranks;
    rec.u.lib.bytes = bytes;
    rec.u.lib.flags = (uint8_t)flags;
    h->event(st, &ev);
}

/* A kernel as the host/device join hands it over: the External id and the
 * record of the library call that issued it ("issuer", NULL for none). */
static void send_kernel(const struct tp_handler *h, void *st, struct tp_device_record *d, const char *name,
                        int64_t start, int64_t dur, uint64_t ext, const struct tp_record *issuer)
{
    memset(d, 0, sizeof *d);
    d->kind = TP_DEVICE_KERNEL;
    d->stream = 7;
    struct tp_event e = { .dev = d, .name = name, .tid = 7, .cbid = -1, .ts_ns = start, .dur_ns = dur,
                          .occupancy = -1, .external_id = ext, .flow = 1, .issuer = issuer,
                          .form = issuer ? TP_FORM_COLL : 0 };
    h->event(st, &e);
}

/* The library-call record of a collective, as send_coll() sends it. */
static struct tp_record coll_rec(unsigned op, unsigned ranks, uint64_t bytes, unsigned flags)
{
    struct tp_record r = { .kind = TP_REC_API };
    r.u.lib.op = (uint8_t)op;
    r.u.lib.m = ranks;
    r.u.lib.bytes = bytes;
    r.u.lib.flags = (uint8_t)flags;
    return r;
}

/* 3 allreduce of 100 MB over 8 ranks (2 ms each on the host, 1 ms of kernel),
 * 1 allgather of 10 MB per rank over 4 ranks (1 ms host, 2 x 0.25 ms kernels),
 * one allreduce captured into a graph, one GEMM kernel (1.5 ms, not a collective). */
static void feed_colls(const struct tp_handler *h, void *st)
{
    int64_t t = win.start_ns;
    for (int i = 1; i >= 0; i--) {
        prep(TP_REC_STEP, NULL, NULL, 10 * MS);
        rec.u.step.index = (uint64_t)i;
        ev.ts_ns = t + i * 10 * MS;
        h->event(st, &ev);
    }
    for (int i = 0; i < 3; i++)
        send_coll(h, st, "ncclAllReduce", TP_COLL_ALLREDUCE, 8, 100000000, 2 * MS, 100 + (uint64_t)i, 0);
    send_coll(h, st, "ncclAllGather", TP_COLL_ALLGATHER, 4, 10000000, 1 * MS, 200, 0);
    send_coll(h, st, "ncclAllReduce", TP_COLL_ALLREDUCE, 8, 100000000, 1 * MS, 300, TP_LIB_CAPTURED);
    if (!coll_device)
        return;
    static struct tp_device_record d[6];
    struct tp_record allreduce = coll_rec(TP_COLL_ALLREDUCE, 8, 100000000, 0);
    struct tp_record allgather = coll_rec(TP_COLL_ALLGATHER, 4, 10000000, 0);
    for (int i = 0; i < 3; i++)
        send_kernel(h, st, &d[i], "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + (1 + 2 * i) * MS, MS,
                    100 + (uint64_t)i, &allreduce);
    send_kernel(h, st, &d[3], "ncclDevKernel_AllGather_RING_LL", t + 12 * MS, MS / 4, 200, &allgather);
    send_kernel(h, st, &d[4], "ncclDevKernel_AllGather_RING_LL", t + 13 * MS, MS / 4, 200, &allgather);
    send_kernel(h, st, &d[5], "gemm", t + 15 * MS, 3 * MS / 2, 999, NULL);
}

static void setup_colls(int device)
{
    setup_window();
    setup_memory();
    coll_device = device;
    win.first_step = 0;
    win.last_step = 1;
    for (int i = 0; i < 2; i++)
        coll_steps[i] = (struct tp_window_step){ .index = (uint64_t)i, .flops = 1000000000000ull,
                                                 .start_ns = win.start_ns + i * 10 * MS,
                                                 .end_ns = win.start_ns + (i + 1) * 10 * MS };
    win.steps = coll_steps;
    win.steps_recorded = 2;
    win.peak_tflops = 400;
    if (device) {
        win.gpu = 1;
        win.gpu_status = "active (CUPTI 130001)";
    }
}

/* The collectives row "name": algbw and busbw as printed, and the time. */
static void coll_row(const char *text, const char *name, unsigned ranks, unsigned long long calls,
                     const char *size, const char *time, const char *algbw, const char *busbw,
                     const char *basis)
{
    unsigned r;
    unsigned long long c;
    char sz[32], tm[32], mean[32], a[32], b[32], how[32];
    const char *l = row(text, "Collectives (NCCL)", name);
    ck_assert_int_eq(sscanf(l, "%u %llu %31s %31s %31s %31s %31s %31s", &r, &c, sz, tm, mean, a, b, how), 8);
    ck_assert_str_eq(how, basis);
    ck_assert_uint_eq(r, ranks);
    ck_assert_uint_eq(c, calls);
    ck_assert_str_eq(sz, size);
    ck_assert_str_eq(tm, time);
    ck_assert_str_eq(a, algbw);
    ck_assert_str_eq(b, busbw);
}

/* GPU0 allocations: to 1.5 GiB ending at 10 ms, to the 1.75 GiB peak ending
 * at 19.95 ms, a failed one; a free. */
static void feed_mem_calls(const struct tp_handler *h, void *st)
{
    static const struct { int form; int64_t end; uint64_t total; unsigned flags; } calls[] = {
        { TP_FORM_ALLOC, 10 * MS, GiB + 512 * MiB, 0 },
        { TP_FORM_ALLOC, 19950000, GiB + 768 * MiB, 0 },
        { TP_FORM_ALLOC, 25 * MS, GiB + 768 * MiB, TP_MEM_FAILED },
        { TP_FORM_FREE, 30 * MS, GiB + 256 * MiB, 0 },
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        prep(TP_REC_API, calls[i].form == TP_FORM_ALLOC ? "cudaMalloc" : "cudaFree", NULL, 2000);
        ev.form = (uint8_t)calls[i].form;
        ev.ts_ns = win.start_ns + calls[i].end - 2000;
        rec.u.mem.device = 0;
        rec.u.mem.mclass = TP_MEM_DEVICE;
        rec.u.mem.total = calls[i].total;
        rec.u.mem.flags = (uint8_t)calls[i].flags;
        h->event(st, &ev);
    }
}

START_TEST(test_memory_section)
{
    setup_colls(0);
    char path[256];
    char *text = run_and_read(feed_colls, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "\nMemory held (reserved from CUDA)\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nBytes the process reserved from CUDA (cudaMalloc/VMM level),"
                                       " not a caching allocator's allocated bytes"));
    char v[10][32];
    const char *r = row(text, "Memory held", "GPU0");
    ck_assert_int_eq(sscanf(r, "%31s %31s %31s %31s %31s %31s %31s %31s %31s",
                            v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]), 9);
    /* start, peak, at, end, process peak, allocs, frees, failed, largest failed */
    ck_assert_str_eq(v[0], "1.00");
    ck_assert_str_eq(v[1], "GiB");
    ck_assert_str_eq(v[2], "1.75");
    ck_assert_str_eq(v[4], "20.000");
    ck_assert_str_eq(v[5], "1.00");
    ck_assert_str_eq(v[7], "2.00");
    r = row(text, "Memory held", "GPU0");
    unsigned long long allocs, frees, failed;
    char big[32];
    ck_assert_int_eq(sscanf(r, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu %llu %31s %31s",
                            &allocs, &frees, &failed, big, v[9]), 5);
    ck_assert_uint_eq(allocs, 2);
    ck_assert_uint_eq(frees, 2);
    ck_assert_uint_eq(failed, 1);
    ck_assert_str_eq(big, "8.00");
    ck_assert_str_eq(v[9], "GiB");
    r = row(text, "Memory held", "host pinned");
    ck_assert_int_eq(sscanf(r, "%31s %31s %31s %31s %31s", v[0], v[1], v[2], v[3], v[4]), 5);
    ck_assert_str_eq(v[0], "0");
    ck_assert_str_eq(v[1], "B");
    ck_assert_str_eq(v[2], "64.00");
    ck_assert_str_eq(v[3], "MiB");
    ck_assert_str_eq(v[4], "5.000");
    ck_assert_ptr_null(strstr(text, "\nGPU1"));

    /* the peak's time is the end of the allocation that reached it (the
     * collector noted it later, at 20 ms); the calls are host API calls too */
    cleanup();
    setup_colls(0);
    text = run_and_read(feed_mem_calls, path, sizeof path);
    r = row(text, "Memory held", "GPU0");
    ck_assert_int_eq(sscanf(r, "%*s %*s %*s %*s %31s", v[4]), 1);
    ck_assert_str_eq(v[4], "19.950");
    r = row(text, "Host API calls", "cudaMalloc");
    unsigned long long calls;
    ck_assert_int_eq(sscanf(r, "%llu", &calls), 1);
    ck_assert_uint_eq(calls, 3);

    /* no memory data: no section */
    cleanup();
    setup_colls(0);
    win.n_mem = 0;
    text = run_and_read(feed_colls, path, sizeof path);
    ck_assert_ptr_null(strstr(text, "Memory held"));
}
END_TEST

/* The memory ledger of setup_colls' window: GPU0 held by torch's caching
 * allocator (768 MiB, one call site with a name past a table cell) and
 * NCCL (256 MiB, a named site and one without a name), a row with nothing
 * in it; pinned host memory held by the program; two owners still held
 * memory at exit. */
static const char *const owner_names[] = { "NCCL", "PyTorch caching allocator", "train", "unknown" };
#define LONG_SITE "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc+0x10 (libc10_cuda.so)"
static const struct tp_mem_site_usage torch_sites[] = { { LONG_SITE, 768 * MiB, 3 } };
static const struct tp_mem_site_usage nccl_sites[] = {
    { "ncclCommInitRank > fake_init+0x1c (libnccl.so.2)", 256 * MiB, 1 },
    { "", 0, 1 },
};
static struct tp_mem_owner_usage owner_rows[4];
static struct tp_mem_held held_rows[2];

static void setup_owners(void)
{
    owner_rows[0] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 1,
                                                 .start_bytes = 768 * MiB, .end_bytes = 768 * MiB,
                                                 .peak_bytes = GiB + 256 * MiB, .allocs = 1, .frees = 1,
                                                 .sites = torch_sites, .n_sites = 1 };
    owner_rows[1] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 0,
                                                 .start_bytes = 256 * MiB, .end_bytes = 256 * MiB,
                                                 .peak_bytes = 512 * MiB, .allocs = 2, .frees = 1,
                                                 .sites = nccl_sites, .n_sites = 2 };
    owner_rows[2] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 3 };
    owner_rows[3] = (struct tp_mem_owner_usage){ .device = -1, .mclass = TP_MEM_HOST, .owner = 2,
                                                 .end_bytes = 64 * MiB, .peak_bytes = 64 * MiB, .allocs = 1 };
    held_rows[0] = (struct tp_mem_held){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 0,
                                         .bytes = 256 * MiB, .blocks = 2 };
    held_rows[1] = (struct tp_mem_held){ .device = -1, .mclass = TP_MEM_HOST, .owner = 2,
                                         .bytes = 64 * MiB, .blocks = 1 };
    win.mem_owner_names = owner_names;
    win.n_mem_owner_names = 4;
    win.mem_owners = owner_rows;
    win.n_mem_owners = 4;
    win.mem_owners_exact = 0;
    win.mem_coverage = 0.987;
    win.mem_held = held_rows;
    win.n_mem_held = 2;
}

/* The cells of row "name" of section "title", split on runs of 2+ spaces. */
static int cells_of(const char *text, const char *title, const char *name, char (*v)[64], int max)
{
    const char *r = row(text, title, name);
    const char *eol = strchr(r, '\n');
    int n = 0;
    while (r < eol && n < max) {
        while (r < eol && *r == ' ')
            r++;
        if (r >= eol)
            break;
        const char *e = strstr(r, "  ");
        if (!e || e > eol)
            e = eol;
        snprintf(v[n++], 64, "%.*s", (int)(e - r), r);
        r = e;
    }
    return n;
}

START_TEST(test_memory_owners_section)
{
    setup_colls(0);
    setup_owners();
    char path[256];
    char *text = run_and_read(feed_colls, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    const char *mem = strstr(text, "\nMemory held (reserved from CUDA)\n");
    const char *gpu = strstr(text, "\nMemory by owner (GPU 0)\n");
    const char *host = strstr(text, "\nMemory by owner (host pinned)\n");
    const char *colls = strstr(text, "\nCollectives (NCCL)");
    ck_assert(mem && gpu && host && colls);
    ck_assert(mem < gpu && gpu < host && host < colls);     /* after the memory table */
    char v[6][64];
    ck_assert_int_eq(cells_of(text, "Memory by owner (GPU 0)", "PyTorch caching allocator", v, 6), 4);
    ck_assert_str_eq(v[0], "768.00 MiB");
    ck_assert_str_eq(v[1], "1.25 GiB");
    ck_assert_str_eq(v[2], "1");
    ck_assert_str_eq(v[3], "1");
    ck_assert_int_eq(cells_of(text, "Memory by owner (GPU 0)", "NCCL", v, 6), 4);
    ck_assert_str_eq(v[0], "256.00 MiB");
    ck_assert_str_eq(v[1], "512.00 MiB");
    ck_assert_str_eq(v[2], "2");
    ck_assert_str_eq(v[3], "1");
    /* each owner's call sites under it, indented: bytes held at the end and
     * allocations; a site name past a cell's 48 bytes whole (100 bytes, then cut) */
    const char *site = strstr(gpu, "\n  " LONG_SITE "  ");
    ck_assert_ptr_nonnull(site);
    ck_assert(site > strstr(gpu, "\nPyTorch caching allocator ") && site < strstr(gpu, "\nNCCL "));
    ck_assert_int_eq(cells_of(text, "Memory by owner (GPU 0)", "  " LONG_SITE, v, 6), 2);
    ck_assert_str_eq(v[0], "768.00 MiB");
    ck_assert_str_eq(v[1], "3");
    site = strstr(gpu, "\n  ncclCommInitRank > fake_init+0x1c (libnccl.so.2)  ");
    ck_assert(site && site > strstr(gpu, "\nNCCL ") && site < host);
    ck_assert_int_eq(cells_of(text, "Memory by owner (GPU 0)", "  (call site unknown)", v, 6), 2);
    ck_assert_str_eq(v[0], "0 B");
    ck_assert_str_eq(v[1], "1");
    /* a row of nothing is left out, and no line ends in spaces */
    ck_assert_ptr_null(strstr(gpu, "\nunknown"));
    ck_assert_ptr_null(strstr(text, " \n"));
    ck_assert_int_eq(cells_of(text, "Memory by owner (host pinned)", "train", v, 6), 4);
    ck_assert_str_eq(v[0], "64.00 MiB");
    ck_assert_ptr_nonnull(strstr(host, "\nOwner named for 98.7 % of the bytes allocated through intercepted"
                                       " calls since activation\n"));
    ck_assert_ptr_nonnull(strstr(host, "\nThese owner tables are the ledger's best account: records were"
                                       " lost, or the window's starting levels were no longer kept\n"));
    const char *held = strstr(text, "\nMemory held at exit\n");
    ck_assert(held && held > host && held < colls);
    ck_assert_int_eq(cells_of(text, "Memory held at exit", "NCCL", v, 6), 3);
    ck_assert_str_eq(v[0], "GPU0");
    ck_assert_str_eq(v[1], "256.00 MiB");
    ck_assert_str_eq(v[2], "2");
    ck_assert_int_eq(cells_of(text, "Memory held at exit", "train", v, 6), 3);
    ck_assert_str_eq(v[0], "host pinned");
    ck_assert_str_eq(v[2], "1");
    /* tests/cli/test_summary_sources.py prints this summary.json with
     * `trainprof summary` and compares it with this text */
    const char *out = getenv("TP_TEST_SUMMARY_OUT");
    if (out && out[0]) {
        static const char *const ext[] = { "txt", "json" };
        for (int i = 0; i < 2; i++) {
            char src[256], dst[4096];
            snprintf(src, sizeof src, "%s/rank2.3.pt.trace.summary.%s", reports, ext[i]);
            snprintf(dst, sizeof dst, "%s/rank2.3.pt.trace.summary.%s", out, ext[i]);
            size_t n;
            char *body = tp_test_slurp(src, &n);
            ck_assert_ptr_nonnull(body);
            FILE *o = fopen(dst, "wb");
            ck_assert_ptr_nonnull(o);
            ck_assert_uint_eq(fwrite(body, 1, n, o), n);
            fclose(o);
            free(body);
        }
    }

    /* an exact account with no coverage figure: neither line; nothing held at exit */
    cleanup();
    setup_colls(0);
    setup_owners();
    win.mem_owners_exact = 1;
    win.mem_coverage = -1;
    win.n_mem_held = 0;
    text = run_and_read(feed_colls, path, sizeof path);
    ck_assert_ptr_nonnull(strstr(text, "\nMemory by owner (GPU 0)\n"));
    ck_assert_ptr_null(strstr(text, "Owner named for"));
    ck_assert_ptr_null(strstr(text, "best account"));
    ck_assert_ptr_null(strstr(text, "held at exit"));

    /* no ledger rows: no owner section at all */
    cleanup();
    setup_colls(0);
    setup_owners();
    win.n_mem_owners = 0;
    win.n_mem_held = 0;
    text = run_and_read(feed_colls, path, sizeof path);
    ck_assert_ptr_nonnull(strstr(text, "\nMemory held (reserved from CUDA)\n"));
    ck_assert_ptr_null(strstr(text, "by owner"));
    ck_assert_ptr_null(strstr(text, "Owner named for"));
    ck_assert_ptr_null(strstr(text, "best account"));
}
END_TEST

START_TEST(test_collectives_host)
{
    setup_colls(0);
    char path[256];
    char *text = run_and_read(feed_colls, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "host-enqueue based"));
    ck_assert_ptr_null(strstr(text, "device (kernel) time"));
    /* allreduce: 300 MB in 6 ms = 50 GB/s; busbw x 2(8-1)/8 = 87.5 */
    coll_row(text, "allreduce", 8, 3, "300.000", "6.000", "50.00", "87.50", "host-enqueue");
    /* allgather: 10 MB x 4 ranks in 1 ms = 40 GB/s; busbw x (4-1)/4 = 30 */
    coll_row(text, "allgather", 4, 1, "40.000", "1.000", "40.00", "30.00", "host-enqueue");
    ck_assert_ptr_nonnull(strstr(text, "captured into CUDA graphs (not counted above): 1\n"));
    ck_assert_double_eq_tol(tp_coll_busbw_factor(TP_COLL_ALLREDUCE, 8), 1.75, 1e-12);
    ck_assert_str_eq(saved.line,
                     "steps 0-1: 10.000 ms/step, 100.0 TFLOP/s, MFU-like 25% (peak 400), mem peak GPU0 1.75 GiB");
}
END_TEST

START_TEST(test_collectives_device)
{
    setup_colls(1);
    char path[256];
    char *text = run_and_read(feed_colls, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "time: device (kernel) time"));
    ck_assert_ptr_null(strstr(text, "host-enqueue based"));
    /* allreduce: 300 MB in 3 ms of kernels = 100 GB/s, busbw 175 */
    coll_row(text, "allreduce", 8, 3, "300.000", "3.000", "100.00", "175.00", "device");
    /* allgather: 40 MB in 0.5 ms = 80 GB/s, busbw 60 */
    coll_row(text, "allgather", 4, 1, "40.000", "0.500", "80.00", "60.00", "device");
    ck_assert_ptr_null(strstr(text, "where no kernel was seen"));
    /* busy: 3 + 0.5 + 1.5 ms of 20 ms */
    ck_assert_str_eq(saved.line, "steps 0-1: 10.000 ms/step, 100.0 TFLOP/s, MFU-like 25% (peak 400),"
                                       " GPU busy 25%, mem peak GPU0 1.75 GiB");
    ck_assert_uint_le(strlen(saved.line), 255);
}
END_TEST

/* Device time for the allreduces only: the allgather falls back to its host time. */
static void feed_colls_mixed(const struct tp_handler *h, void *st)
{
    send_coll(h, st, "ncclAllReduce", TP_COLL_ALLREDUCE, 8, 100000000, 2 * MS, 100, 0);
    send_coll(h, st, "ncclAllGather", TP_COLL_ALLGATHER, 4, 10000000, 1 * MS, 200, TP_LIB_GROUPED);
    static struct tp_device_record d;
    struct tp_record allreduce = coll_rec(TP_COLL_ALLREDUCE, 8, 100000000, 0);
    send_kernel(h, st, &d, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", win.start_ns + MS, MS / 2, 100,
                &allreduce);
}

START_TEST(test_collectives_mixed)
{
    setup_colls(1);
    char path[256];
    char *text = run_and_read(feed_colls_mixed, path, sizeof path);
    ck_assert_ptr_nonnull(strstr(text, "host-enqueue based where no kernel was seen (Basis)"));
    coll_row(text, "allreduce", 8, 1, "100.000", "0.500", "200.00", "350.00", "device");
    coll_row(text, "allgather", 4, 1, "40.000", "1.000", "40.00", "30.00", "host-enqueue");
}
END_TEST

START_TEST(test_no_colls_no_section)
{
    setup_window();
    char path[256];
    char *text = run_and_read(feed, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_null(strstr(text, "Collectives"));
    ck_assert_ptr_null(strstr(text, "Memory held"));
    ck_assert_str_eq(saved.line, "steps 0-2: 9.917 ms/step");
}
END_TEST

/* The summary.json of the last run_and_read, parsed. */
static json_t *load_json(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/rank2.3.pt.trace.summary.json", reports);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    ck_assert_msg(j != NULL, "%s: %s (line %d)", path, e.text, e.line);
    return j;
}

static json_int_t jint(json_t *o, const char *path)
{
    json_t *v = json_object_get(o, path);
    ck_assert_msg(json_is_integer(v), "%s is not an integer", path);
    return json_integer_value(v);
}

/* The row of "table"'s top list named "name". */
static json_t *top_row(json_t *doc, const char *table, const char *name)
{
    json_t *top = json_object_get(json_object_get(doc, table), "top");
    size_t i;
    json_t *r;
    json_array_foreach(top, i, r) {
        if (!strcmp(json_string_value(json_object_get(r, "name")), name))
            return r;
    }
    ck_abort_msg("%s: no row %s", table, name);
    return NULL;
}

START_TEST(test_json_numbers)
{
    setup_window();
    win.steps_recorded = 3;
    char path[256];
    ck_assert_ptr_nonnull(run_and_read(feed, path, sizeof path));
    json_t *d = load_json();
    ck_assert_str_eq(json_string_value(json_object_get(d, "schema")), "trainprof.summary/1.1");
    ck_assert_str_eq(json_string_value(json_object_get(d, "trace")), "rank2.3.pt.trace.json.gz");
    ck_assert_str_eq(json_string_value(json_object_get(d, "run")), "myrun");
    ck_assert_str_eq(json_string_value(json_object_get(d, "host")), "host");
    ck_assert_int_eq(jint(d, "rank"), 2);
    ck_assert_int_eq(jint(d, "world_size"), 4);
    ck_assert_int_eq(jint(d, "pid"), PID);
    json_t *w = json_object_get(d, "window");
    ck_assert_int_eq(jint(w, "batch"), 3);
    ck_assert_int_eq(jint(w, "first_step"), 0);
    ck_assert_int_eq(jint(w, "last_step"), 2);
    ck_assert(json_is_false(json_object_get(w, "partial")));
    ck_assert(json_is_null(json_object_get(w, "partial_reason")));
    ck_assert_int_eq(jint(w, "start_ns"), win.start_ns);
    ck_assert_int_eq(jint(w, "end_ns"), win.end_ns);
    /* steps in index order, exact ns; no CUPTI: busy is null, not 0 */
    static const json_int_t wall[] = { 10000000, 12500000, 7250000 };
    json_t *steps = json_object_get(d, "steps");
    ck_assert_uint_eq(json_array_size(steps), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_array_get(steps, i);
        ck_assert_int_eq(jint(r, "step"), (json_int_t)i);
        ck_assert_int_eq(jint(r, "wall_ns"), wall[i]);
        ck_assert(json_is_null(json_object_get(r, "gpu_busy_ns")));
    }
    json_t *t = json_object_get(d, "totals");
    ck_assert_int_eq(jint(t, "wall_ns"), 29750000);
    ck_assert_int_eq(jint(t, "mean_step_ns"), 29750000 / 3);
    ck_assert(json_is_null(json_object_get(t, "mfu_like")));
    ck_assert(json_is_null(json_object_get(t, "gpu_busy_share")));
    json_t *r = top_row(d, "api_calls", "cudaMemcpyAsync");
    ck_assert_int_eq(jint(r, "calls"), 3);
    ck_assert_int_eq(jint(r, "total_ns"), 60001);
    ck_assert_int_eq(jint(r, "max_ns"), 30001);
    ck_assert_int_eq(jint(json_object_get(d, "api_calls"), "total_ns"), 60001 + 19000 + 500);
    ck_assert_int_eq(jint(json_object_get(d, "launches"), "calls"), 9);
    ck_assert_int_eq(jint(json_object_get(d, "launches"), "distinct"), 4);
    ck_assert_int_eq(jint(top_row(d, "launches", "kernel_a"), "calls"), 5);
    /* launches sorted by count, as the text table */
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(json_object_get(d, "launches"), "top"), 0),
                         "name")), "kernel_a");
    json_t *ev_ = json_object_get(d, "events");
    ck_assert_int_eq(jint(ev_, "records"), 21);
    ck_assert_int_eq(jint(ev_, "dropped"), 5);
    ck_assert_int_eq(jint(ev_, "late"), 1);
    ck_assert(json_is_false(json_object_get(d, "gpu")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(d, "collectives"), "basis")),
                     "none");
    ck_assert_int_eq(saved.n_reports, 2);
    ck_assert_ptr_nonnull(strstr(saved.reports[1], ".summary.json"));
    json_decref(d);
}
END_TEST

START_TEST(test_json_gpu)
{
    setup_window();
    win.first_step = 0;
    win.last_step = 1;
    for (int i = 0; i < 2; i++)
        gpu_steps[i] = (struct tp_window_step){ .index = (uint64_t)i, .flops = 1000000000ull * (uint64_t)(i + 1),
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
    win.peak_tflops = 0.5;
    win.partial = 1;
    win.partial_reason = "SIGTERM";
    char path[256];
    char *text = run_and_read(feed_gpu, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    /* with library FLOPs the step table has its FLOPs columns */
    char ms[32], gflop[32], tflops[32], busy[32];
    const char *r = row(text, "Per-step wall time", "1");
    ck_assert_int_eq(sscanf(r, "%31s %31s %31s %31s", ms, gflop, tflops, busy), 4);
    ck_assert_str_eq(gflop, "2.000");
    ck_assert_str_eq(tflops, "0.200");
    ck_assert_str_eq(busy, "50.0%");
    ck_assert_ptr_nonnull(strstr(text, "Library FLOPs in these steps: 3.000 GFLOP"));
    json_t *d = load_json();
    json_t *steps = json_object_get(d, "steps");
    ck_assert_int_eq(jint(json_array_get(steps, 0), "gpu_busy_ns"), 4000000);
    ck_assert_int_eq(jint(json_array_get(steps, 1), "gpu_busy_ns"), 5000000);
    ck_assert_int_eq(jint(json_array_get(steps, 1), "flops"), 2000000000);
    json_t *t = json_object_get(d, "totals");
    ck_assert_int_eq(jint(t, "gpu_busy_ns"), 9000000);
    ck_assert_double_eq_tol(json_real_value(json_object_get(t, "gpu_busy_share")), 0.45, 1e-12);
    ck_assert_int_eq(jint(t, "flops"), 3000000000);
    /* 3 GFLOP in 20 ms = 0.15 TFLOP/s, of 0.5 */
    ck_assert_double_eq_tol(json_number_value(json_object_get(t, "tflops_per_s")), 0.15, 1e-12);
    ck_assert_double_eq_tol(json_number_value(json_object_get(t, "mfu_like")), 0.3, 1e-12);
    json_t *g = top_row(d, "gpu_work", "gemm");
    ck_assert_int_eq(jint(g, "calls"), 2);
    ck_assert_int_eq(jint(g, "total_ns"), 6000000);
    ck_assert_int_eq(jint(g, "max_ns"), 4000000);
    ck_assert_int_eq(jint(json_object_get(d, "gpu_work"), "total_ns"), 10000000);
    ck_assert_int_eq(jint(d, "gpu_ns"), 10000000);
    json_t *c = json_object_get(d, "coverage");
    ck_assert_int_eq(jint(c, "gpu_kernels"), 3);
    ck_assert_int_eq(jint(c, "gpu_kernels_linked"), 2);
    json_t *w = json_object_get(d, "window");
    ck_assert(json_is_true(json_object_get(w, "partial")));
    ck_assert_str_eq(json_string_value(json_object_get(w, "partial_reason")), "SIGTERM");
    json_decref(d);
}
END_TEST

START_TEST(test_json_collectives_and_memory)
{
    setup_colls(1);
    char path[256];
    ck_assert_ptr_nonnull(run_and_read(feed_colls, path, sizeof path));
    json_t *d = load_json();
    json_t *c = json_object_get(d, "collectives");
    ck_assert_str_eq(json_string_value(json_object_get(c, "basis")), "device");
    ck_assert_int_eq(jint(c, "captured_calls"), 1);
    json_t *rows = json_object_get(c, "rows");
    ck_assert_uint_eq(json_array_size(rows), 2);
    json_t *ar = json_array_get(rows, 0);
    ck_assert_str_eq(json_string_value(json_object_get(ar, "kind")), "allreduce");
    ck_assert_int_eq(jint(ar, "ranks"), 8);
    ck_assert_int_eq(jint(ar, "calls"), 3);
    ck_assert_int_eq(jint(ar, "time_ns"), 3 * MS);
    ck_assert_double_eq_tol(json_number_value(json_object_get(ar, "bytes")), 300e6, 1e-3);
    ck_assert_double_eq_tol(json_number_value(json_object_get(ar, "busbw_gbps")), 175.0, 1e-9);
    ck_assert_int_eq(jint(c, "time_ns"), 3 * MS + MS / 2);
    json_t *mem = json_object_get(d, "memory");
    ck_assert_uint_eq(json_array_size(mem), 2);
    json_t *g = json_array_get(mem, 0);
    ck_assert_str_eq(json_string_value(json_object_get(g, "where")), "GPU0");
    ck_assert_int_eq(jint(g, "peak_bytes"), (json_int_t)(1.75 * 1024 * 1024 * 1024));
    ck_assert_int_eq(jint(g, "failed"), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(mem, 1), "class")), "host_pinned");
    json_decref(d);
}
END_TEST

/* The memory ledger in summary.json: every owner row with its sites (the
 * empty row too: the file holds the ledger's rows, the text leaves out
 * what shows nothing), the coverage as a fraction, exactness, what was
 * held at exit; null and [] without the ledger. */
START_TEST(test_json_memory_owners)
{
    setup_colls(0);
    setup_owners();
    char path[256];
    ck_assert_ptr_nonnull(run_and_read(feed_colls, path, sizeof path));
    json_t *d = load_json();
    json_t *rows = json_object_get(d, "memory_owners");
    ck_assert_uint_eq(json_array_size(rows), 4);
    json_t *r = json_array_get(rows, 0);
    ck_assert_int_eq(jint(r, "device"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(r, "class")), "device");
    ck_assert_str_eq(json_string_value(json_object_get(r, "owner")), "PyTorch caching allocator");
    ck_assert_int_eq(jint(r, "start_bytes"), 768 * MiB);
    ck_assert_int_eq(jint(r, "end_bytes"), 768 * MiB);
    ck_assert_int_eq(jint(r, "peak_bytes"), GiB + 256 * MiB);
    ck_assert_int_eq(jint(r, "allocs"), 1);
    ck_assert_int_eq(jint(r, "frees"), 1);
    json_t *sites = json_object_get(r, "sites");
    ck_assert_uint_eq(json_array_size(sites), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(sites, 0), "site")), LONG_SITE);
    ck_assert_int_eq(jint(json_array_get(sites, 0), "bytes"), 768 * MiB);
    ck_assert_int_eq(jint(json_array_get(sites, 0), "allocs"), 3);
    r = json_array_get(rows, 1);
    ck_assert_str_eq(json_string_value(json_object_get(r, "owner")), "NCCL");
    ck_assert_int_eq(jint(r, "allocs"), 2);
    sites = json_object_get(r, "sites");
    ck_assert_uint_eq(json_array_size(sites), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(sites, 1), "site")), "");
    ck_assert_int_eq(jint(json_array_get(sites, 1), "bytes"), 0);
    r = json_array_get(rows, 2);
    ck_assert_str_eq(json_string_value(json_object_get(r, "owner")), "unknown");
    ck_assert_uint_eq(json_array_size(json_object_get(r, "sites")), 0);
    r = json_array_get(rows, 3);
    ck_assert_int_eq(jint(r, "device"), -1);
    ck_assert_str_eq(json_string_value(json_object_get(r, "class")), "host_pinned");
    ck_assert_str_eq(json_string_value(json_object_get(r, "owner")), "train");
    ck_assert_double_eq_tol(json_number_value(json_object_get(d, "memory_coverage")), 0.987, 1e-12);
    ck_assert(json_is_false(json_object_get(d, "memory_owners_exact")));
    json_t *held = json_object_get(d, "memory_held_at_exit");
    ck_assert_uint_eq(json_array_size(held), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(held, 0), "owner")), "NCCL");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(held, 0), "class")), "device");
    ck_assert_int_eq(jint(json_array_get(held, 0), "device"), 0);
    ck_assert_int_eq(jint(json_array_get(held, 0), "bytes"), 256 * MiB);
    ck_assert_int_eq(jint(json_array_get(held, 0), "blocks"), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(held, 1), "class")), "host_pinned");
    ck_assert_int_eq(jint(json_array_get(held, 1), "device"), -1);
    json_decref(d);

    cleanup();
    setup_colls(0);
    setup_owners();
    win.mem_owners_exact = 1;
    ck_assert_ptr_nonnull(run_and_read(feed_colls, path, sizeof path));
    d = load_json();
    ck_assert(json_is_true(json_object_get(d, "memory_owners_exact")));
    json_decref(d);

    /* no ledger: [] and null; no memory profiling: no coverage either */
    cleanup();
    setup_colls(0);
    setup_owners();
    win.n_mem_owners = 0;
    win.n_mem_held = 0;
    win.mem_coverage = -1;
    ck_assert_ptr_nonnull(run_and_read(feed_colls, path, sizeof path));
    d = load_json();
    ck_assert_uint_eq(json_array_size(json_object_get(d, "memory_owners")), 0);
    ck_assert(json_is_array(json_object_get(d, "memory_owners")));
    ck_assert(json_is_null(json_object_get(d, "memory_coverage")));
    ck_assert(json_is_null(json_object_get(d, "memory_owners_exact")));
    ck_assert(json_is_array(json_object_get(d, "memory_held_at_exit")));
    ck_assert_uint_eq(json_array_size(json_object_get(d, "memory_held_at_exit")), 0);
    json_decref(d);
    cleanup();
    setup_colls(0);
    win.n_mem = 0;
    ck_assert_ptr_nonnull(run_and_read(feed_colls, path, sizeof path));
    d = load_json();
    ck_assert(json_is_null(json_object_get(d, "memory_coverage")));
    json_decref(d);
}
END_TEST

/* 30 distinct kernels, one with a 1,000-byte name: 20 rows kept, the
 * largest first, names cut; the totals count every row. */
static void feed_many(const struct tp_handler *h, void *st)
{
    static char names[30][1100];
    for (int i = 0; i < 30; i++) {
        if (i == 29) {
            memset(names[i], 'k', 1000);
            names[i][1000] = 0;
        } else {
            snprintf(names[i], sizeof names[i], "kernel_%02d", i);
        }
        for (int k = 0; k <= i; k++)
            send(h, st, TP_REC_LAUNCH, "cudaLaunchKernel", names[i], 1000);
    }
}

START_TEST(test_json_top_rows)
{
    setup_window();
    char path[256];
    ck_assert_ptr_nonnull(run_and_read(feed_many, path, sizeof path));
    json_t *d = load_json();
    json_t *l = json_object_get(d, "launches");
    ck_assert_int_eq(jint(l, "distinct"), 30);
    ck_assert_int_eq(jint(l, "calls"), 30 * 31 / 2);
    json_t *top = json_object_get(l, "top");
    ck_assert_uint_eq(json_array_size(top), 20);
    const char *first = json_string_value(json_object_get(json_array_get(top, 0), "name"));
    ck_assert_uint_eq(strlen(first), 256 + 3);
    ck_assert_str_eq(first + 256, "...");
    ck_assert_int_eq(jint(json_array_get(top, 19), "calls"), 11);
    json_decref(d);
}
END_TEST

/* ---- the operator tables: annotations, steps, shares, shapes ---------------- */

#include "collector/record/torchop.h"

/* Ranges as torch announces them, in us from the first step's start: two
 * linears each around an addmm (one with a t), AdamW's step annotation
 * around two operators, an operator on a second thread, and an addmm in the
 * second step with the first addmm's shapes. */
struct op_in {
    int tid_off;             /* tid = PID + tid_off */
    const char *name;
    int64_t start_us, dur_us;
    const char *sizes;       /* input shapes, as torch writes them */
    int cpu_op;
};

static const struct op_in ops_in[] = {
    { 0, "aten::linear", 1000, 3000, "[[2, 4], [8, 4], [8]]", 1 },
    { 0, "aten::t", 1100, 200, "[[8, 4]]", 1 },
    { 0, "aten::addmm", 1500, 2000, "[[8], [2, 4], [4, 8], [], []]", 1 },
    { 0, "aten::linear", 4200, 800, "[[2, 8], [3, 8], [3]]", 1 },
    { 0, "aten::addmm", 4300, 600, "[[3], [2, 8], [8, 3], [], []]", 1 },
    { 0, "Optimizer.step#AdamW.step", 6000, 3000, NULL, 0 },
    { 0, "aten::add_", 6500, 1000, "[[4], [4], []]", 1 },
    { 0, "aten::mul_", 7500, 500, "[[4], []]", 1 },
    { 1, "aten::mm", 2000, 1000, "[[2, 4], [4, 8]]", 1 },
    { 0, "aten::addmm", 10500, 500, "[[8], [2, 4], [4, 8], [], []]", 1 },
};
#define N_OPS_IN (sizeof ops_in / sizeof ops_in[0])
static const int64_t op_steps_us[][2] = { { 0, 10000 }, { 10000, 2000 } };   /* start, duration */
#define N_OP_STEPS 2
#define OP_GPU_NS 250000          /* device work linked to ops_in[2] */
static size_t op_sizes_from;      /* feed_ops: the shapes of the ranges sent from this one on
                                     (in the order sent; N_OPS_IN: none) */
static const char *op_sent_sizes[N_OPS_IN];   /* what feed_ops sent of ops_in[i]'s shapes */
static struct tp_torch_op op_fields[N_OPS_IN];

static int64_t op_t0(void)
{
    return win.start_ns + MS;
}

/* Index of the innermost range of ops_in holding range i on its thread, -1 if none. */
static int op_parent(size_t i)
{
    const struct op_in *a = &ops_in[i];
    int best = -1;
    for (size_t j = 0; j < N_OPS_IN; j++) {
        const struct op_in *b = &ops_in[j];
        if (j == i || b->tid_off != a->tid_off || b->start_us > a->start_us ||
            b->start_us + b->dur_us < a->start_us + a->dur_us)
            continue;
        if (best < 0 || b->dur_us < ops_in[best].dur_us)
            best = (int)j;
    }
    return best;
}

/* Self time of range i: its duration less its direct children's (ns). */
static int64_t op_self_ns(size_t i)
{
    int64_t self = ops_in[i].dur_us;
    for (size_t k = 0; k < N_OPS_IN; k++)
        if (op_parent(k) == (int)i)
            self -= ops_in[k].dur_us;
    return self * 1000;
}

/* Self time of step k: its time on its thread (PID) in no top-level range (ns). */
static int64_t step_self_ns(int k)
{
    int64_t a = op_steps_us[k][0], b = a + op_steps_us[k][1], self = b - a;
    for (size_t i = 0; i < N_OPS_IN; i++)
        if (ops_in[i].tid_off == 0 && op_parent(i) < 0 && ops_in[i].start_us >= a &&
            ops_in[i].start_us + ops_in[i].dur_us <= b)
            self -= ops_in[i].dur_us;
    return self * 1000;
}

/* Calls, total and self ns of the rows of "name" (and "sizes" when
 * by_shape: NULL stands for "[]"); the step row for TP step name. */
struct op_expect {
    uint64_t calls;
    int64_t total, self;
};

static struct op_expect op_expected(const char *name, int by_shape, const char *sizes)
{
    struct op_expect e = { 0, 0, 0 };
    if (!strcmp(name, "ProfilerStep*")) {
        for (int k = 0; k < N_OP_STEPS; k++) {
            e.calls++;
            e.total += op_steps_us[k][1] * 1000;
            e.self += step_self_ns(k);
        }
        return e;
    }
    for (size_t i = 0; i < N_OPS_IN; i++) {
        const char *z = op_sent_sizes[i] ? op_sent_sizes[i] : "[]";
        if (strcmp(ops_in[i].name, name) || (by_shape && strcmp(z, sizes ? sizes : "[]")))
            continue;
        e.calls++;
        e.total += ops_in[i].dur_us * 1000;
        e.self += op_self_ns(i);
    }
    return e;
}

/* The self time of every row: the shares' denominator. */
static int64_t op_all_self(void)
{
    int64_t all = 0;
    for (size_t i = 0; i < N_OPS_IN; i++)
        all += op_self_ns(i);
    for (int k = 0; k < N_OP_STEPS; k++)
        all += step_self_ns(k);
    return all;
}

/* The steps first (they come from their own buffer), then each thread's
 * ranges in the order they end, then device work linked to ops_in[2]. */
static void feed_ops(const struct tp_handler *h, void *st)
{
    for (int k = N_OP_STEPS - 1; k >= 0; k--) {
        prep(TP_REC_STEP, NULL, NULL, op_steps_us[k][1] * 1000);
        rec.u.step.index = (uint64_t)k;
        ev.ts_ns = op_t0() + op_steps_us[k][0] * 1000;
        h->event(st, &ev);
    }
    int sent[N_OPS_IN] = { 0 };
    for (size_t n = 0; n < N_OPS_IN; n++) {
        size_t next = N_OPS_IN;
        for (size_t i = 0; i < N_OPS_IN; i++)
            if (!sent[i] && (next == N_OPS_IN || ops_in[i].start_us + ops_in[i].dur_us <
                                                     ops_in[next].start_us + ops_in[next].dur_us))
                next = i;
        sent[next] = 1;
        const struct op_in *o = &ops_in[next];
        const char *z = n >= op_sizes_from ? o->sizes : NULL;
        op_sent_sizes[next] = z;
        op_fields[next] = (struct tp_torch_op){ .name_len = strlen(o->name), .seq = -1,
                                                .op_id = 100 + next, .sizes = z,
                                                .sizes_len = z ? strlen(z) : 0, .cpu_op = o->cpu_op };
        prep(TP_REC_RANGE, o->name, NULL, o->dur_us * 1000);
        ev.tid = PID + o->tid_off;
        ev.ts_ns = op_t0() + o->start_us * 1000;
        ev.op = &op_fields[next];
        ev.external_id = op_fields[next].op_id;
        h->event(st, &ev);
    }
    static struct tp_device_record d;
    memset(&d, 0, sizeof d);
    d.kind = TP_DEVICE_KERNEL;
    struct tp_event e = { .dev = &d, .name = "gemm", .tid = 7, .cbid = -1, .ts_ns = op_t0() + 2 * MS,
                          .dur_ns = OP_GPU_NS, .occupancy = -1, .external_id = 102 };
    h->event(st, &e);
}

/* "part" of "whole" as the table prints a share: two decimals, rounded. */
static void pct2(char *buf, size_t n, int64_t part, int64_t whole)
{
    int64_t p = (part * 10000 + whole / 2) / whole;
    snprintf(buf, n, "%lld.%02lld%%", (long long)(p / 100), (long long)(p % 100));
}

static void ms3(char *buf, size_t n, int64_t ns)
{
    snprintf(buf, n, "%lld.%03lld", (long long)(ns / 1000000), (long long)(ns % 1000000 / 1000));
}

/* The cells of an operator row after its name: calls, total, total %,
 * self, self %, mean (us), GPU (ms) when "gpu". */
static void check_op_cells(const char *r, const char *what, struct op_expect e, int64_t all)
{
    unsigned long long calls;
    char total[32], tpct[32], self[32], spct[32], mean[32], want[32];
    ck_assert_msg(sscanf(r, "%llu %31s %31s %31s %31s %31s", &calls, total, tpct, self, spct, mean) == 6,
                  "%s: %s", what, r);
    ck_assert_msg(calls == e.calls, "%s: %llu calls", what, calls);
    ms3(want, sizeof want, e.total);
    ck_assert_msg(!strcmp(total, want), "%s: total %s, not %s", what, total, want);
    pct2(want, sizeof want, e.total, all);
    ck_assert_msg(!strcmp(tpct, want), "%s: total %s, not %s", what, tpct, want);
    ms3(want, sizeof want, e.self);
    ck_assert_msg(!strcmp(self, want), "%s: self %s, not %s", what, self, want);
    pct2(want, sizeof want, e.self, all);
    ck_assert_msg(!strcmp(spct, want), "%s: self %s, not %s", what, spct, want);
    snprintf(want, sizeof want, "%lld.%03lld", (long long)(e.total / (int64_t)e.calls / 1000),
             (long long)(e.total / (int64_t)e.calls % 1000));
    ck_assert_msg(!strcmp(mean, want), "%s: mean %s, not %s", what, mean, want);
}

/* The line of the by-shape table for (name, shapes): the cells after the name. */
static const char *shape_row(const char *text, const char *name, const char *shapes)
{
    const char *s = strstr(text, "\nOperators by input shape\n");
    ck_assert_msg(s != NULL, "no by-shape table");
    const char *end = strstr(s + 1, "\n\n");
    size_t n = strlen(name), z = strlen(shapes);
    for (const char *l = strchr(s + 1, '\n'); l && (!end || l < end); l = strchr(l + 1, '\n')) {
        const char *nl = strchr(l + 1, '\n');
        if (!strncmp(l + 1, name, n) && l[1 + n] == ' ' && nl && nl - l - 1 >= (ptrdiff_t)z &&
            !strncmp(nl - z, shapes, z) && nl[-(ptrdiff_t)z - 1] == ' ')
            return l + 1 + n;
    }
    ck_abort_msg("by-shape row %s %s missing", name, shapes);
    return NULL;
}

/* Every name of ops_in once, and the step row. */
static const char *const op_names[] = { "aten::linear", "aten::t", "aten::addmm", "Optimizer.step#AdamW.step",
                                        "aten::add_", "aten::mul_", "aten::mm", "ProfilerStep*" };

/* The ranges of ops_in, the shapes sent from the _i-th range on (in the
 * order sent): every row of both tables, in text and in summary.json, is
 * what the ranges add up to.  _i > 0: the by-shape table starts at the
 * first range with shapes, from the rows before it, each (name, "[]"). */
START_TEST(test_operator_table)
{
    setup_window();
    op_sizes_from = (size_t)_i;
    char path[256];
    char *text = run_and_read(feed_ops, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    int64_t all = op_all_self();
    /* every row, the annotation and the steps' included, with its shares */
    for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++)
        check_op_cells(row(text, "Operators (PyTorch)", op_names[i]), op_names[i],
                       op_expected(op_names[i], 0, NULL), all);
    /* the annotation's self time excludes the operators inside it, the
     * steps' the top-level ranges of their thread (not the second thread's) */
    ck_assert_int_eq(op_expected("Optimizer.step#AdamW.step", 0, NULL).self, (3000 - 1000 - 500) * 1000);
    ck_assert_int_eq(op_expected("ProfilerStep*", 0, NULL).self,
                     ((10000 - 3000 - 800 - 3000) + (2000 - 500)) * 1000);
    /* the self shares add up to 100% (to the rounding of each) */
    const char *sec = strstr(text, "Operators (PyTorch)\n");
    double sum = 0;
    int rows = 0;
    for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++) {
        const char *r = row(sec, "Operators (PyTorch)", op_names[i]);
        double p;
        ck_assert_int_eq(sscanf(r, "%*s %*s %*s %*s %lf%%", &p), 1);
        sum += p;
        rows++;
    }
    ck_assert_msg(sum > 100.0 - 0.005 * rows && sum < 100.0 + 0.005 * rows, "self shares add to %f", sum);
    char want[64];
    ms3(want, sizeof want, all);
    char line[160];
    snprintf(line, sizeof line, "shares of the self host time of all rows, %s ms", want);
    ck_assert_ptr_nonnull(strstr(text, line));
    /* by (name, input shapes), every row: with all the shapes sent, the
     * addmm with the first shapes twice, the other once; an annotation and
     * the steps have "[]" as in torch; with shapes only from the fourth
     * range on (_i 3), the three before have "[]" too */
    for (size_t i = 0; i < N_OPS_IN; i++) {
        const char *z = op_sent_sizes[i] ? op_sent_sizes[i] : "[]";
        check_op_cells(shape_row(text, ops_in[i].name, z), z, op_expected(ops_in[i].name, 1, z), all);
    }
    static const char *const addmm[] = { "[[8], [2, 4], [4, 8], [], []]", "[[3], [2, 8], [8, 3], [], []]" };
    if (_i == 0)
        for (int i = 0; i < 2; i++)
            ck_assert_uint_eq(op_expected("aten::addmm", 1, addmm[i]).calls, (uint64_t)(2 - i));
    check_op_cells(shape_row(text, "Optimizer.step#AdamW.step", "[]"), "AdamW by shape",
                   op_expected("Optimizer.step#AdamW.step", 1, NULL), all);
    check_op_cells(shape_row(text, "ProfilerStep*", "[]"), "steps by shape", op_expected("ProfilerStep*", 1, NULL),
                   all);

    /* summary.json: the same rows, kinds, exact ns and shares */
    json_t *d = load_json();
    json_t *o = json_object_get(d, "operators");
    ck_assert_int_eq(jint(o, "self_ns"), all);
    ck_assert_int_eq(jint(o, "distinct"), (json_int_t)(sizeof op_names / sizeof *op_names));
    for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++) {
        json_t *r = top_row(d, "operators", op_names[i]);
        struct op_expect e = op_expected(op_names[i], 0, NULL);
        ck_assert_int_eq(jint(r, "calls"), (json_int_t)e.calls);
        ck_assert_int_eq(jint(r, "total_ns"), e.total);
        ck_assert_int_eq(jint(r, "self_ns"), e.self);
        ck_assert_double_eq_tol(json_number_value(json_object_get(r, "self_share")), (double)e.self / (double)all,
                                1e-12);
        ck_assert_double_eq_tol(json_number_value(json_object_get(r, "total_share")),
                                (double)e.total / (double)all, 1e-12);
        const char *kind = i == 7 ? "step" : i == 3 ? "annotation" : "operator";
        ck_assert_str_eq(json_string_value(json_object_get(r, "kind")), kind);
    }
    ck_assert_int_eq(jint(top_row(d, "operators", "aten::addmm"), "gpu_ns"), OP_GPU_NS);
    json_t *bs = json_object_get(d, "operators_by_shape");
    ck_assert_msg(json_is_object(bs), "no operators_by_shape");
    ck_assert_int_eq(jint(bs, "self_ns"), all);
    size_t i, found = 0;
    json_t *r;
    const char *linked = op_sent_sizes[2] ? op_sent_sizes[2] : "[]";   /* the device work's operator */
    json_array_foreach(json_object_get(bs, "top"), i, r) {
        if (strcmp(json_string_value(json_object_get(r, "name")), "aten::addmm"))
            continue;
        const char *z = json_string_value(json_object_get(r, "input_shapes"));
        struct op_expect e = op_expected("aten::addmm", 1, z);
        ck_assert_uint_gt(e.calls, 0);
        ck_assert_int_eq(jint(r, "calls"), (json_int_t)e.calls);
        ck_assert_int_eq(jint(r, "total_ns"), e.total);
        ck_assert_int_eq(jint(r, "self_ns"), e.self);
        ck_assert_int_eq(jint(r, "gpu_ns"), strcmp(z, linked) ? 0 : OP_GPU_NS);
        found += e.calls;
    }
    ck_assert_uint_eq(found, 3);
    json_decref(d);
}
END_TEST

/* Without shapes: the operator table as above, no by-shape table. */
START_TEST(test_operator_table_no_shapes)
{
    setup_window();
    op_sizes_from = N_OPS_IN;
    char path[256];
    char *text = run_and_read(feed_ops, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    int64_t all = op_all_self();
    for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++)
        check_op_cells(row(text, "Operators (PyTorch)", op_names[i]), op_names[i],
                       op_expected(op_names[i], 0, NULL), all);
    ck_assert_ptr_null(strstr(text, "Operators by input shape"));
    json_t *d = load_json();
    ck_assert(json_is_null(json_object_get(d, "operators_by_shape")));
    json_decref(d);
}
END_TEST

/* 105 operators, no step: the text table shows the 100 with the most host
 * time and says how many it left out; summary.json keeps 20. */
static void feed_many_ops(const struct tp_handler *h, void *st)
{
    static char names[105][32];
    static struct tp_torch_op f[105];
    for (int i = 0; i < 105; i++) {
        snprintf(names[i], sizeof names[i], "aten::op_%03d", i);
        f[i] = (struct tp_torch_op){ .name_len = strlen(names[i]), .seq = -1, .op_id = 1 + (uint64_t)i,
                                     .sizes = "[[1]]", .sizes_len = 5, .cpu_op = 1 };
        prep(TP_REC_RANGE, names[i], NULL, 1000 * (i + 1));
        ev.ts_ns = win.start_ns + i * MS;
        ev.op = &f[i];
        h->event(st, &ev);
    }
}

START_TEST(test_operator_table_bounded)
{
    setup_window();
    char path[256];
    char *text = run_and_read(feed_many_ops, path, sizeof path);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "\naten::op_104 "));
    ck_assert_ptr_nonnull(strstr(text, "\naten::op_005 "));
    ck_assert_ptr_null(strstr(text, "\naten::op_004 "));
    const char *a = strstr(text, "Operators (PyTorch)\n"), *b = strstr(text, "Operators by input shape\n");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    const char *left = strstr(a, "5 more rows left out");
    ck_assert_msg(left && left < b, "no count of the rows left out");
    ck_assert_ptr_nonnull(strstr(b, "5 more rows left out"));
    json_t *d = load_json();
    ck_assert_int_eq(jint(json_object_get(d, "operators"), "distinct"), 105);
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(d, "operators"), "top")), 20);
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(d, "operators_by_shape"), "top")), 20);
    json_decref(d);
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
    tcase_add_test(tc, test_memory_section);
    tcase_add_test(tc, test_memory_owners_section);
    tcase_add_test(tc, test_collectives_host);
    tcase_add_test(tc, test_collectives_device);
    tcase_add_test(tc, test_collectives_mixed);
    tcase_add_test(tc, test_no_colls_no_section);
    tcase_add_test(tc, test_json_numbers);
    tcase_add_test(tc, test_json_gpu);
    tcase_add_test(tc, test_json_collectives_and_memory);
    tcase_add_test(tc, test_json_memory_owners);
    tcase_add_test(tc, test_json_top_rows);
    tcase_add_loop_test(tc, test_operator_table, 0, 4);
    tcase_add_test(tc, test_operator_table_no_shapes);
    tcase_add_test(tc, test_operator_table_bounded);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
