/*
 * test_memory_report.c - the memory handler: a window with a known sequence of
 * allocations and frees (out of time order across threads, failed and
 * no-op calls mixed in) -> the JSON's points, peaks and failures exactly;
 * the HTML's plots (vertices of each step path, axis ticks in GiB/MiB, the
 * peak label, escaping).  Also: no memory data or no trace, no file; a
 * huge window is thinned and stays small.  With TP_TEST_MEMORY_OUT set, the
 * files of test_sequence are copied there (tests/preload/test_memory_report.py
 * parses them as XML and renders them in a browser).
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "handlers/handler.h"
#include "handlers/memory.h"
#include "tests/unit/tp_test.h"

#define MS 1000000LL
#define MiB (1ull << 20)
#define GiB (1ull << 30)

static char root[64];
static char reports[128];
static struct tp_window win;
static struct tp_saved saved;     /* what the handlers saved */
static struct tp_mem_usage usage[3];

static void cleanup(void)
{
    tp_test_rmtree(root);
}

static void setup_window(void)
{
    if (!root[0])
        tp_test_mkdtemp(root, sizeof root, "memory");
    snprintf(reports, sizeof reports, "%s/run/reports", root);
    memset(&win, 0, sizeof win);
    memset(&saved, 0, sizeof saved);
    win.run_name = "myrun";
    win.program = "train<&>";
    win.pid = 42;
    win.first_step = 3;
    win.last_step = 6;
    win.start_ns = 1700000000000000000LL;
    win.end_ns = win.start_ns + 100 * MS;
    win.reports_folder = reports;
    snprintf(saved.trace, sizeof saved.trace, "%s/run/traces/rank0.7.pt.trace.json.gz", root);
    memset(usage, 0, sizeof usage);
    /* GPU0: 1 GiB held, +512 MiB at 10 ms, +256 MiB at 20 ms (peak; the
     * collector noted it 40 us after the call returned), -512 MiB at 30 ms,
     * -256 MiB at 60 ms */
    usage[0] = (struct tp_mem_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .start_bytes = GiB,
                                      .end_bytes = GiB, .peak_bytes = GiB + 768 * MiB,
                                      .peak_ns = win.start_ns + 20 * MS + 40000, .peak_process = 2 * GiB,
                                      .allocs = 2, .frees = 2, .failed = 1, .failed_bytes = 8 * GiB };
    /* GPU1: used before the window, nothing in it: no series */
    usage[1] = (struct tp_mem_usage){ .device = 1, .mclass = TP_MEM_DEVICE, .peak_process = 4096,
                                      .peak_ns = win.start_ns };
    /* pinned host memory: 64 MiB at 5 ms */
    usage[2] = (struct tp_mem_usage){ .device = -1, .mclass = TP_MEM_HOST, .end_bytes = 64 * MiB,
                                      .peak_bytes = 64 * MiB, .peak_ns = win.start_ns + 5 * MS,
                                      .peak_process = 64 * MiB, .allocs = 1 };
    win.mem = usage;
    win.n_mem = 3;
}

/* One allocation or free that ends at "ms" into the window. */
static void send_mem(const struct tp_handler *h, void *st, int form, int device, unsigned mclass,
                     int64_t at_ns, uint64_t bytes, uint64_t total, unsigned flags)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    r.kind = TP_REC_API;
    r.u.mem.bytes = bytes;
    r.u.mem.total = total;
    r.u.mem.device = (int16_t)device;
    r.u.mem.mclass = (uint8_t)mclass;
    r.u.mem.flags = (uint8_t)flags;
    struct tp_event e = { .rec = &r, .name = form == TP_FORM_ALLOC ? "cudaMalloc" : "cudaFree",
                          .cbid = -1, .layer = TP_LAYER_RUNTIME, .form = (uint8_t)form,
                          .ts_ns = win.start_ns + at_ns - 1000, .dur_ns = 1000 };
    h->event(st, &e);
}

static void feed_sequence(const struct tp_handler *h, void *st)
{
    /* thread 1 */
    send_mem(h, st, TP_FORM_ALLOC, 0, TP_MEM_DEVICE, 10 * MS, 512 * MiB, GiB + 512 * MiB, 0);
    send_mem(h, st, TP_FORM_FREE, 0, TP_MEM_DEVICE, 30 * MS, 512 * MiB, GiB + 256 * MiB, 0);
    send_mem(h, st, TP_FORM_ALLOC, 0, TP_MEM_DEVICE, 40 * MS, 8 * GiB, GiB + 256 * MiB, TP_MEM_FAILED);
    send_mem(h, st, TP_FORM_FREE, 0, TP_MEM_DEVICE, 50 * MS, 0, GiB + 256 * MiB, TP_MEM_NOOP);
    send_mem(h, st, TP_FORM_FREE, 0, TP_MEM_DEVICE, 55 * MS, 0, GiB + 256 * MiB, TP_MEM_UNKNOWN);
    send_mem(h, st, TP_FORM_FREE, 0, TP_MEM_DEVICE, 60 * MS, 256 * MiB, GiB, 0);
    /* thread 2, drained after thread 1 */
    send_mem(h, st, TP_FORM_ALLOC, -1, TP_MEM_HOST, 5 * MS, 64 * MiB, 64 * MiB, 0);
    send_mem(h, st, TP_FORM_ALLOC, 0, TP_MEM_DEVICE, 20 * MS, 256 * MiB, GiB + 768 * MiB, 0);
    /* not memory: ignored */
    struct tp_record r;
    memset(&r, 0, sizeof r);
    r.kind = TP_REC_API;
    struct tp_event e = { .rec = &r, .name = "cudaMemcpy", .form = TP_FORM_COPY, .ts_ns = win.start_ns };
    h->event(st, &e);
}

static void run(void (*fn)(const struct tp_handler *, void *), int expect_state)
{
    const struct tp_handler *h = tp_handler_find("memory");
    ck_assert_ptr_nonnull(h);
    void *st = h->open(&win);
    if (!expect_state) {
        ck_assert_ptr_null(st);
        return;
    }
    ck_assert_ptr_nonnull(st);
    fn(h, st);
    ck_assert_int_eq(h->close(st, &win, &saved), 0);
}

static void report_path(char *out, size_t n, const char *ext)
{
    snprintf(out, n, "%s/rank0.7.pt.trace.memory.%s", reports, ext);
}

/* Checks point k of "pts" is [ms, bytes]. */
static void check_point(json_t *pts, size_t k, double ms, uint64_t bytes)
{
    json_t *p = json_array_get(pts, k);
    ck_assert_msg(json_is_array(p) && json_array_size(p) == 2, "point %zu", k);
    ck_assert_msg(json_real_value(json_array_get(p, 0)) == ms || json_integer_value(json_array_get(p, 0)) == (json_int_t)ms,
                  "point %zu at %f, wanted %f", k, json_number_value(json_array_get(p, 0)), ms);
    ck_assert_uint_eq((uint64_t)json_integer_value(json_array_get(p, 1)), bytes);
}

/* The "d" attribute of the k-th step path of the page. */
static const char *step_path(const char *html, int k, size_t *len)
{
    const char *p = html;
    for (int i = 0; i <= k; i++) {
        p = strstr(p, "<path class=\"step\"");
        ck_assert_ptr_nonnull(p);
        p++;
    }
    p = strstr(p, " d=\"") + 4;
    *len = (size_t)(strchr(p, '"') - p);
    return p;
}

static int count_char(const char *s, size_t n, char c)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == c;
    return k;
}

START_TEST(test_sequence)
{
    setup_window();
    run(feed_sequence, 1);
    char path[256];
    report_path(path, sizeof path, "json");
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    ck_assert_msg(doc != NULL, "%s: %s line %d", path, err.text, err.line);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "trace")), "rank0.7.pt.trace.json.gz");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "unit")), "bytes");
    json_t *wj = json_object_get(doc, "window");
    ck_assert_int_eq(json_integer_value(json_object_get(wj, "start_ns")), win.start_ns);
    ck_assert_int_eq(json_integer_value(json_object_get(wj, "end_ns")), win.end_ns);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(wj, "steps"), 0)), 3);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(wj, "steps"), 1)), 6);

    json_t *series = json_object_get(doc, "series");
    ck_assert_uint_eq(json_array_size(series), 2);
    json_t *g = json_array_get(series, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(g, "device")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(g, "class")), "device");
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(g, "start_bytes")), GiB);
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(g, "end_bytes")), GiB);
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(g, "peak_bytes")), GiB + 768 * MiB);
    ck_assert(json_number_value(json_object_get(g, "peak_ms")) == 20.0);
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(g, "peak_process_bytes")), 2 * GiB);
    json_t *pts = json_object_get(g, "points");
    ck_assert_uint_eq(json_array_size(pts), 6);
    check_point(pts, 0, 0, GiB);
    check_point(pts, 1, 10, GiB + 512 * MiB);
    check_point(pts, 2, 20, GiB + 768 * MiB);
    check_point(pts, 3, 30, GiB + 256 * MiB);
    check_point(pts, 4, 60, GiB);
    check_point(pts, 5, 100, GiB);

    json_t *hs = json_array_get(series, 1);
    ck_assert_int_eq(json_integer_value(json_object_get(hs, "device")), -1);
    ck_assert_str_eq(json_string_value(json_object_get(hs, "class")), "host");
    ck_assert(json_number_value(json_object_get(hs, "peak_ms")) == 5.0);
    pts = json_object_get(hs, "points");
    ck_assert_uint_eq(json_array_size(pts), 3);
    check_point(pts, 0, 0, 0);
    check_point(pts, 1, 5, 64 * MiB);
    check_point(pts, 2, 100, 64 * MiB);

    json_t *failed = json_object_get(doc, "failed");
    ck_assert_uint_eq(json_array_size(failed), 1);
    json_t *f = json_array_get(failed, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(f, "device")), 0);
    ck_assert(json_number_value(json_object_get(f, "ms")) == 40.0);
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(f, "bytes")), 8 * GiB);
    json_decref(doc);

    char hpath[256];
    report_path(hpath, sizeof hpath, "html");
    char *html = tp_test_slurp(hpath, NULL);
    ck_assert_ptr_nonnull(html);
    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert_ptr_null(strstr(html, "src="));
    ck_assert_ptr_null(strstr(html, "href="));
    ck_assert_ptr_null(strstr(html, "url("));
    ck_assert_ptr_null(strstr(html, "@import"));
    ck_assert_ptr_null(strstr(html, "train<&>"));
    ck_assert_ptr_nonnull(strstr(html, "train&lt;&amp;&gt;"));
    ck_assert_ptr_nonnull(strstr(html, "steps 3–6"));
    ck_assert_ptr_nonnull(strstr(html, "rank0.7.pt.trace.json.gz"));
    ck_assert_ptr_nonnull(strstr(html, "reserved from CUDA"));
    ck_assert_ptr_nonnull(strstr(html, "caching allocator"));
    /* two plots, in series order: GPU0 then pinned host memory */
    ck_assert_ptr_nonnull(strstr(html, "<h2>GPU0 device memory</h2>"));
    ck_assert_ptr_nonnull(strstr(html, "<h2>host pinned memory</h2>"));
    ck_assert_ptr_null(strstr(html, "GPU1"));
    size_t n;
    const char *d = step_path(html, 0, &n);
    ck_assert_int_eq(count_char(d, n, 'M'), 1);
    ck_assert_int_eq(count_char(d, n, 'L'), 2 * (6 - 1));
    d = step_path(html, 1, &n);
    ck_assert_int_eq(count_char(d, n, 'L'), 2 * (3 - 1));
    ck_assert_ptr_null(strstr(d + n, "<path class=\"step\""));
    /* y ticks: 0.5 GiB steps up to 2.0 GiB for GPU0; 20 MiB steps to 80 for the host */
    const char *host = strstr(html, "<h2>host pinned memory</h2>");
    const char *t = strstr(html, ">1.5 GiB</text>");
    ck_assert(t != NULL && t < host);
    t = strstr(html, ">2.0 GiB</text>");
    ck_assert(t != NULL && t < host);
    ck_assert_ptr_null(strstr(html, ">2.5 GiB</text>"));
    ck_assert_ptr_nonnull(strstr(host, ">80 MiB</text>"));
    ck_assert_ptr_null(strstr(host, ">100 MiB</text>"));
    ck_assert_ptr_nonnull(strstr(html, ">100</text>"));   /* x axis ends at the window's 100 ms */
    ck_assert_ptr_nonnull(strstr(html, "time since window start (ms)"));
    ck_assert_ptr_nonnull(strstr(html, ">peak 1.75 GiB at 20.0 ms</text>"));
    ck_assert_ptr_nonnull(strstr(html, ">peak 64.00 MiB at 5.0 ms</text>"));
    ck_assert_ptr_nonnull(strstr(html, "<h2>Failed allocations</h2>"));
    ck_assert_ptr_nonnull(strstr(html, "<td>8.00 GiB</td>"));
    t = strstr(html, "<title>failed allocation of 8.00 GiB at 40.0 ms</title>");
    ck_assert(t != NULL && t < host);
    ck_assert_ptr_nonnull(strstr(html, ">× 1 failed allocation</text>"));

    const char *out = getenv("TP_TEST_MEMORY_OUT");
    if (out && out[0]) {
        char dst[4096];
        snprintf(dst, sizeof dst, "%s/sequence.memory.html", out);
        FILE *o = fopen(dst, "wb");
        ck_assert_ptr_nonnull(o);
        fputs(html, o);
        fclose(o);
        char *js = tp_test_slurp(path, NULL);
        snprintf(dst, sizeof dst, "%s/sequence.memory.json", out);
        o = fopen(dst, "wb");
        ck_assert_ptr_nonnull(o);
        fputs(js, o);
        fclose(o);
        free(js);
    }
    free(html);
}
END_TEST

static void feed_nothing(const struct tp_handler *h, void *st)
{
    (void)h;
    (void)st;
}

START_TEST(test_no_data_no_file)
{
    setup_window();
    win.n_mem = 0;     /* a state all the same: close says why there is no file */
    run(feed_nothing, 1);
    /* memory used before the window only: nothing to plot */
    setup_window();
    win.mem = &usage[1];
    win.n_mem = 1;
    run(feed_nothing, 1);
    /* no trace: no report */
    setup_window();
    saved.trace[0] = '\0';
    run(feed_sequence, 1);
    struct stat sb;
    ck_assert_int_ne(stat(reports, &sb), 0);
}
END_TEST

/* 200,000 alternating allocations and frees over the window with one spike
 * of 3 GiB at 77 ms: both files thinned, the spike kept. */
static void feed_huge(const struct tp_handler *h, void *st)
{
    for (int i = 0; i < 200000; i++) {
        int64_t at = 1 + (int64_t)i * 500;
        uint64_t total = GiB + (i & 1 ? 0 : 2 * MiB);
        if (at == 77 * MS + 1)
            total = 3 * GiB;
        send_mem(h, st, i & 1 ? TP_FORM_FREE : TP_FORM_ALLOC, 0, TP_MEM_DEVICE, at, 2 * MiB, total, 0);
    }
}

START_TEST(test_huge_window_thinned)
{
    setup_window();
    usage[0].peak_bytes = 3 * GiB;
    usage[0].peak_ns = win.start_ns + 77 * MS;
    win.n_mem = 1;
    run(feed_huge, 1);
    char path[256];
    report_path(path, sizeof path, "json");
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    ck_assert_ptr_nonnull(doc);
    json_t *g = json_array_get(json_object_get(doc, "series"), 0);
    ck_assert(json_is_true(json_object_get(g, "thinned")));
    json_t *pts = json_object_get(g, "points");
    ck_assert_uint_le(json_array_size(pts), 20000);
    ck_assert_uint_ge(json_array_size(pts), 4000);
    uint64_t max = 0;
    for (size_t k = 0; k < json_array_size(pts); k++) {
        uint64_t b = (uint64_t)json_integer_value(json_array_get(json_array_get(pts, k), 1));
        max = b > max ? b : max;
    }
    ck_assert_uint_eq(max, 3 * GiB);
    json_decref(doc);
    report_path(path, sizeof path, "html");
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_lt(sb.st_size, 200 * 1024);
    char *html = tp_test_slurp(path, NULL);
    size_t n;
    const char *d = step_path(html, 0, &n);
    ck_assert_int_le(count_char(d, n, 'L'), 2 * 4 * 808);
    ck_assert_ptr_nonnull(strstr(html, ">peak 3.00 GiB at 77.0 ms</text>"));
    free(html);
}
END_TEST

START_TEST(test_human)
{
    char b[32];
    ck_assert_str_eq(tp_memory_human(b, sizeof b, 17), "17 B");
    ck_assert_str_eq(tp_memory_human(b, sizeof b, 3072), "3.00 KiB");
    ck_assert_str_eq(tp_memory_human(b, sizeof b, 512 * MiB), "512.00 MiB");
    ck_assert_str_eq(tp_memory_human(b, sizeof b, GiB + GiB / 2), "1.50 GiB");
    ck_assert_str_eq(tp_memory_where(b, sizeof b, 1, TP_MEM_MANAGED), "GPU1 managed");
    ck_assert_str_eq(tp_memory_where(b, sizeof b, -1, TP_MEM_HOST), "host pinned");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory_report");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_sequence);
    tcase_add_test(tc, test_no_data_no_file);
    tcase_add_test(tc, test_huge_window_thinned);
    tcase_add_test(tc, test_human);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
