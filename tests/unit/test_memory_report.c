/*
 * test_memory_report.c - the memory handler: a window with a known sequence of
 * allocations and frees (out of time order across threads, failed and
 * no-op calls mixed in) -> the JSON's points, peaks and failures exactly;
 * the HTML's plots (vertices of each step path, axis ticks in GiB/MiB, the
 * peak label, escaping); the memory ledger's owners of a series (the
 * JSON's points, the page's stacked bands against the line, the legend).
 * Also: no memory data or no trace, no file; a huge window (and its
 * owners) is thinned and stays small.  With TP_TEST_MEMORY_OUT set, the
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

/* The memory ledger of the sequence's GPU0 (the host memory has no owner
 * rows): torch's caching allocator 768 MiB, +512 MiB at 10 ms, -512 MiB at
 * 30 ms; NCCL 256 MiB, +256 MiB at 20 ms, -256 MiB at 60 ms; together the
 * series' levels. */
static const char *const owner_names[] = { "NCCL", "PyTorch caching allocator", "unknown", "lib<x>&.so" };
static struct tp_mem_owner_usage owner_rows[4];
static struct tp_mem_owner_point owner_points[8];

static void setup_owners(void)
{
    owner_rows[0] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 1,
                                                 .start_bytes = 768 * MiB, .end_bytes = 768 * MiB,
                                                 .peak_bytes = 1280 * MiB, .allocs = 1, .frees = 1 };
    owner_rows[1] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 0,
                                                 .start_bytes = 256 * MiB, .end_bytes = 256 * MiB,
                                                 .peak_bytes = 512 * MiB, .allocs = 1, .frees = 1 };
    /* a row of nothing: no band, no legend */
    owner_rows[2] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 2 };
    static const struct { int64_t at; unsigned owner; uint64_t bytes; } p[4] = {
        { 10 * MS, 1, 1280 * MiB }, { 20 * MS, 0, 512 * MiB }, { 30 * MS, 1, 768 * MiB },
        { 60 * MS, 0, 256 * MiB },
    };
    for (int i = 0; i < 4; i++)
        owner_points[i] = (struct tp_mem_owner_point){ .ts_ns = win.start_ns + p[i].at, .device = 0,
                                                       .mclass = TP_MEM_DEVICE, .owner = (uint16_t)p[i].owner,
                                                       .bytes = p[i].bytes };
    win.mem_owner_names = owner_names;
    win.n_mem_owner_names = 4;
    win.mem_owners = owner_rows;
    win.n_mem_owners = 3;
    win.mem_owner_points = owner_points;
    win.n_mem_owner_points = 4;
    win.mem_owners_exact = 1;
    win.mem_coverage = 1;
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

/* The first owner band after "from", or NULL. */
static const char *owner_path_or_null(const char *from)
{
    return strstr(from, "<path class=\"owner\"");
}

static int count_str(const char *s, const char *what)
{
    int k = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        k++;
    return k;
}

static int count_char(const char *s, size_t n, char c)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == c;
    return k;
}

/* The "d" attribute of the k-th owner band of the page, and its title. */
static const char *owner_path(const char *html, int k, size_t *len, char *title, size_t tn)
{
    const char *p = html;
    for (int i = 0; i <= k; i++) {
        p = strstr(p, "<path class=\"owner\"");
        ck_assert_ptr_nonnull(p);
        p++;
    }
    const char *t = strstr(p, "<title>") + 7;
    snprintf(title, tn, "%.*s", (int)(strchr(t, '<') - t), t);
    p = strstr(p, " d=\"") + 4;
    *len = (size_t)(strchr(p, '"') - p);
    return p;
}

/* The vertices of path "d" (M, L and Z commands) into x[], y[]; how many. */
static int path_xy(const char *d, size_t n, double *x, double *y, int max)
{
    int k = 0;
    const char *e = d + n;
    while (d < e && k < max) {
        char *end;
        if (*d == 'M' || *d == 'L') {
            x[k] = strtod(d + 1, &end);
            y[k] = strtod(end, &end);
            k++;
            d = end;
        } else {
            d++;
        }
    }
    return k;
}

/* Owner "name"'s JSON row in series "s": its points as (ms, bytes) pairs. */
static json_t *json_owner(json_t *s, size_t k, const char *name)
{
    json_t *o = json_array_get(json_object_get(s, "owners"), k);
    ck_assert_ptr_nonnull(o);
    ck_assert_str_eq(json_string_value(json_object_get(o, "owner")), name);
    return o;
}

START_TEST(test_sequence)
{
    setup_window();
    setup_owners();
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

    /* GPU0's owners, most held at the end first, the empty row left out */
    ck_assert_uint_eq(json_array_size(json_object_get(g, "owners")), 2);
    json_t *ow = json_owner(g, 0, "PyTorch caching allocator");
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(ow, "start_bytes")), 768 * MiB);
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(ow, "end_bytes")), 768 * MiB);
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(ow, "peak_bytes")), 1280 * MiB);
    ck_assert(json_is_false(json_object_get(ow, "thinned")));
    pts = json_object_get(ow, "points");
    ck_assert_uint_eq(json_array_size(pts), 4);
    check_point(pts, 0, 0, 768 * MiB);
    check_point(pts, 1, 10, 1280 * MiB);
    check_point(pts, 2, 30, 768 * MiB);
    check_point(pts, 3, 100, 768 * MiB);
    ow = json_owner(g, 1, "NCCL");
    pts = json_object_get(ow, "points");
    ck_assert_uint_eq(json_array_size(pts), 4);
    check_point(pts, 0, 0, 256 * MiB);
    check_point(pts, 1, 20, 512 * MiB);
    check_point(pts, 2, 60, 256 * MiB);
    check_point(pts, 3, 100, 256 * MiB);

    json_t *hs = json_array_get(series, 1);
    ck_assert(json_is_array(json_object_get(hs, "owners")));
    ck_assert_uint_eq(json_array_size(json_object_get(hs, "owners")), 0);
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

    /* GPU0's owners as bands under its line: torch's at the bottom, NCCL
     * over it, their legend in that order under the plot; no tint under
     * that line, the host's line keeps its own */
    ck_assert_ptr_nonnull(strstr(html, "coloured bands"));
    char title[64];
    d = owner_path(html, 0, &n, title, sizeof title);
    ck_assert(d < host);
    ck_assert_str_eq(title, "PyTorch caching allocator");
    ck_assert_ptr_nonnull(strstr(d - 80, "fill=\"#f28e2b\""));
    double bx[32], by[32], sx[16], sy[16];
    int nb = path_xy(d, n, bx, by, 32);
    /* its top: 768 MiB, 1.25 GiB from 10 ms, 768 MiB from 30 ms (a vertex
     * pair per change), to the end; down to 0 bytes and back along it */
    ck_assert_int_eq(nb, 1 + 2 * 2 + 2 + 1);
    const double base = 24 + 232;           /* MARGIN_T + AREA_H: 0 bytes */
    ck_assert(by[0] < base && by[1] == by[0] && by[2] < by[1] && by[3] == by[2] && by[4] == by[0]);
    ck_assert(by[6] == base && by[7] == base && bx[7] == bx[0] && bx[6] == bx[5]);
    size_t sn;
    const char *sd = step_path(html, 0, &sn);
    int ns = path_xy(sd, sn, sx, sy, 16);
    ck_assert_int_eq(ns, 11);
    const char *d1 = owner_path(html, 1, &n, title, sizeof title);
    ck_assert(d1 < host);
    ck_assert_str_eq(title, "NCCL");
    ck_assert_ptr_nonnull(strstr(d1 - 80, "fill=\"#e15759\""));
    double tx[32], ty[32];
    int nt = path_xy(d1, n, tx, ty, 32);
    ck_assert_int_eq(nt, 1 + 2 * 4 + 2 + 2 * 2 + 1);
    /* the top band's top is the line (the owners add up to the series)... */
    for (int i = 0; i < 9; i++)
        ck_assert(tx[i] == sx[i] && ty[i] == sy[i]);
    ck_assert(tx[9] == sx[10] && ty[9] == sy[10]);
    /* ... and its bottom the top of the band under it, walked back */
    for (int m = 0; m <= 5; m++)
        ck_assert(tx[10 + m] == bx[5 - m] && ty[10 + m] == by[5 - m]);
    ck_assert_ptr_null(owner_path_or_null(host));
    const char *area = strstr(html, "<path class=\"area\"");
    ck_assert(area != NULL && area > host);                 /* the host's tint only */
    const char *leg = strstr(html, "<ul class=\"legend\">");
    ck_assert(leg != NULL && leg > d1 && leg < host);
    const char *l0 = strstr(leg, "<span class=\"name\">PyTorch caching allocator</span> 768.00 MiB at the end,"
                                 " peak 1.25 GiB</li>");
    const char *l1 = strstr(leg, "<span class=\"name\">NCCL</span> 256.00 MiB at the end, peak 512.00 MiB</li>");
    ck_assert(l0 && l1 && l0 < l1 && l1 < host);
    ck_assert_ptr_null(strstr(html, ">unknown<"));
    ck_assert_int_eq(count_str(html, "<ul class=\"legend\">"), 1);

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
    /* the ledger: 1 GiB of an unknown owner all along, the rest a library's
     * (each of the 200,000 changes, the spike too) */
    static struct tp_mem_owner_point many[200000];
    for (int i = 0; i < 200000; i++) {
        int64_t at = 1 + (int64_t)i * 500;
        many[i] = (struct tp_mem_owner_point){ .ts_ns = win.start_ns + at, .device = 0,
                                               .mclass = TP_MEM_DEVICE, .owner = 3,
                                               .bytes = at == 77 * MS + 1 ? 2 * GiB : i & 1 ? 0 : 2 * MiB };
    }
    owner_rows[0] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 2,
                                                 .start_bytes = GiB, .end_bytes = GiB, .peak_bytes = GiB };
    owner_rows[1] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_DEVICE, .owner = 3,
                                                 .peak_bytes = 2 * GiB, .allocs = 100000, .frees = 100000 };
    win.mem_owner_names = owner_names;
    win.n_mem_owner_names = 4;
    win.mem_owners = owner_rows;
    win.n_mem_owners = 2;
    win.mem_owner_points = many;
    win.n_mem_owner_points = 200000;
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
    /* the library's points thinned as the series', its spike kept */
    json_t *lib = json_array_get(json_object_get(g, "owners"), 1);
    ck_assert_str_eq(json_string_value(json_object_get(lib, "owner")), "lib<x>&.so");
    ck_assert(json_is_true(json_object_get(lib, "thinned")));
    pts = json_object_get(lib, "points");
    ck_assert_uint_le(json_array_size(pts), 20000);
    ck_assert_uint_ge(json_array_size(pts), 4000);
    max = 0;
    for (size_t k = 0; k < json_array_size(pts); k++) {
        uint64_t b = (uint64_t)json_integer_value(json_array_get(json_array_get(pts, k), 1));
        max = b > max ? b : max;
    }
    ck_assert_uint_eq(max, 2 * GiB);
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
    /* two bands, each thinned to at most 4 states per pixel column (and
     * back along its bottom); the spike reaches the line's peak */
    char title[64];
    d = owner_path(html, 0, &n, title, sizeof title);
    ck_assert_str_eq(title, "unknown");
    ck_assert_ptr_nonnull(strstr(d - 80, "fill=\"#bab0ac\""));     /* unknown: grey */
    d = owner_path(html, 1, &n, title, sizeof title);
    ck_assert_str_eq(title, "lib&lt;x&gt;&amp;.so");
    ck_assert_ptr_nonnull(strstr(d - 80, "fill=\"#f28e2b\""));     /* the first named owner's */
    ck_assert_int_le(count_char(d, n, 'L'), 2 * 2 * 4 * 808 + 1);
    ck_assert_int_ge(count_char(d, n, 'L'), 2 * 2 * 808);
    static double x[20000], y[20000];
    int nv = path_xy(d, n, x, y, 20000);
    double top = 1e9;
    for (int i = 0; i < nv; i++)
        top = y[i] < top ? y[i] : top;
    size_t sn;
    const char *sd = step_path(html, 0, &sn);
    int ns = path_xy(sd, sn, x, y, 20000);
    double line_top = 1e9;
    for (int i = 0; i < ns; i++)
        line_top = y[i] < line_top ? y[i] : line_top;
    ck_assert(top == line_top);
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"name\">lib&lt;x&gt;&amp;.so</span>"));
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
