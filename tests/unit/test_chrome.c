/*
 * test_chrome.c - the chrome handler, fed synthetic windows through its
 * callbacks, its output gunzipped and parsed with jansson and checked
 * for what the readers need (README "What is in a trace"): key order, "rank": with a
 * space, name+ph on every event, cat+dur on every X, at most 3 decimals,
 * integer pid/tid, no "stream" key on CPU events, ProfilerStep#N,
 * metadata rows per thread, hostile names as valid UTF-8; the memory
 * ledger's Owner and Site args and its counter tracks by owner.  Also the
 * handler table, overwrite suffixes, failures, and the throughput of the
 * whole handler (printed, not asserted).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <zlib.h>

#include "collector/config/config.h"
#include "collector/device/cupti.h"
#include "collector/device/props.h"
#include "handlers/handler.h"
#include "tests/unit/tp_test.h"

#define BASE 1719853884000000000LL
#define START (BASE + 1000000123LL)
#define PID 4242

static char root[64];
static struct tp_window win;
static struct tp_saved saved;     /* what the handlers saved */

static void cleanup(void)
{
    tp_test_rmtree(root);
}

static char folder[128];

static void setup_window(int gzip)
{
    if (!root[0]) {
        tp_test_mkdtemp(root, sizeof root, "chrome");
    }
    snprintf(folder, sizeof folder, "%s/run/traces", root);
    memset(&win, 0, sizeof win);
    memset(&saved, 0, sizeof saved);
    win.run_name = "run";
    win.hostname = "host";
    win.program = "train";
    win.pid = PID;
    win.rank = 3;
    win.world_size = 8;
    win.launched = 1;             /* rank 3 of 8 by its launcher's variables */
    win.batch = 5;
    win.first_step = 1;
    win.last_step = 4;
    /* feed_window's steps 1..4 start at START and last 10 ms each */
    static struct tp_window_step steps[4];
    for (int i = 0; i < 4; i++)
        steps[i] = (struct tp_window_step){ .index = (uint64_t)i + 1, .start_ns = START + i * 10000000LL,
                                            .end_ns = START + (i + 1) * 10000000LL,
                                            .flops = (uint64_t)(i + 1) * 1000000000ull,
                                            .tid = PID, .thread_name = "main" };
    win.steps = steps;
    win.steps_recorded = 4;
    win.flops = 10000000000ull;
    win.step_signal = "api";
    win.base_time_ns = BASE;
    win.start_ns = START;
    win.end_ns = START + 50000000;
    win.records = 1000;
    win.dropped = 2;
    win.late = 1;
    win.config_json = "{\"schedule\": \"wait=0\", \"gzip\": true, \"sys_interval\": 0.5}";
    win.user_metadata = "{\"job\":\"j\\u0001\\\"\",\"traceEvents\":1,\"team\":{\"a\":[1,2.5,null,false]}}";
    win.trace_folder = folder;
    win.trace_filename = "rank3.5.pt.trace.json";
    win.reports_folder = "unused";
    win.gzip = gzip;
    win.overwrite = 0;
}

/* One event and its record; the test keeps them alive across the call. */
struct item {
    struct tp_record rec;
    struct tp_event ev;
};

static struct tp_event *mk(struct item *it, int kind, int tid, int64_t ts, int64_t dur)
{
    memset(it, 0, sizeof *it);
    it->rec.kind = (uint8_t)kind;
    it->ev.rec = &it->rec;
    it->ev.pid = PID;
    it->ev.tid = tid;
    it->ev.ts_ns = ts;
    it->ev.dur_ns = dur;
    it->ev.cbid = -1;
    it->ev.thread_name = tid == PID ? "main" : "w\"k\x01\xff";
    return &it->ev;
}

static const char hostile_kernel[] = "void k<\"q\\b\">(\x01\x1f\x7f\xff\xc3(\xf0\x9f\x98\x80)";
static const char hostile_kernel_decoded[] =
    "void k<\"q\\b\">(\x01\x1f\x7f\xef\xbf\xbd\xef\xbf\xbd(\xf0\x9f\x98\x80)";

static void feed_sample(const struct tp_handler *h, void *st)
{
    struct item it;
    struct tp_event *ev;
    int64_t t = START;
    for (int step = 1; step <= 4; step++) {
        int64_t s0 = t;
        ev = mk(&it, TP_REC_LAUNCH, PID, t + 1000, 2345);
        ev->name = "cudaLaunchKernel";
        ev->form = TP_FORM_LAUNCH;
        ev->kernel = step == 2 ? hostile_kernel : "gemm_kernel";
        ev->layer = TP_LAYER_RUNTIME;
        ev->cbid = 211;
        ev->correlation = (uint64_t)step;
        it.rec.u.launch.grid_x = 1024;
        it.rec.u.launch.grid_y = 2;
        it.rec.u.launch.grid_z = 3;
        it.rec.u.launch.block_x = 256;
        it.rec.u.launch.block_y = 1;
        it.rec.u.launch.block_z = 1;
        it.rec.u.launch.smem = 4096;
        it.rec.u.launch.stream = 0x7f0012345678ull;
        it.rec.u.launch.func_kind = TP_FUNC_STUB;
        h->event(st, ev);

        ev = mk(&it, TP_REC_API, PID, t + 5000, 7001);
        ev->name = "cudaMemcpyAsync";
        ev->form = TP_FORM_COPY;
        ev->layer = TP_LAYER_RUNTIME;
        ev->cbid = 41;
        ev->correlation = 100 + (uint64_t)step;
        it.rec.u.api.bytes = 1 << 20;
        it.rec.u.api.copy_kind = 1;
        it.rec.u.api.stream = 77;
        h->event(st, ev);

        ev = mk(&it, TP_REC_STEP, PID, s0, 10000000);
        it.rec.u.step.index = (uint64_t)step;
        h->event(st, ev);
        t += 10000000;
    }
    ev = mk(&it, TP_REC_API, PID, t + 100, 50);
    ev->name = "cudaMemsetAsync";
    ev->form = TP_FORM_SET;
    ev->layer = TP_LAYER_RUNTIME;
    it.rec.u.api.bytes = 64;
    it.rec.u.api.stream = 9;
    h->event(st, ev);

    ev = mk(&it, TP_REC_API, PID, t + 200, 50);
    ev->name = "cudaStreamSynchronize";
    ev->form = TP_FORM_SYNC_STREAM;
    ev->layer = TP_LAYER_RUNTIME;
    it.rec.u.api.stream = 9;
    it.rec.status = 700;
    h->event(st, ev);

    ev = mk(&it, TP_REC_API, PID, t + 300, 50);
    ev->name = "cudaEventSynchronize";
    ev->form = TP_FORM_SYNC_EVENT;
    ev->layer = TP_LAYER_RUNTIME;
    it.rec.u.api.stream = 0xabc;
    h->event(st, ev);

    ev = mk(&it, TP_REC_API, PID, t + 400, 50);
    ev->name = "cuMemcpyHtoD_v2";
    ev->form = TP_FORM_COPY;
    ev->layer = TP_LAYER_DRIVER;
    it.rec.u.api.bytes = 8;
    it.rec.u.api.copy_kind = 1;
    h->event(st, ev);

    ev = mk(&it, TP_REC_LAUNCH, PID, t + 500, 50);
    ev->name = "cudaGraphLaunch";
    ev->form = TP_FORM_LAUNCH;
    ev->kernel = "";
    ev->layer = TP_LAYER_RUNTIME;
    it.rec.u.launch.func_kind = TP_FUNC_GRAPH;
    it.rec.u.launch.stream = 5;
    h->event(st, ev);

    ev = mk(&it, TP_REC_API, PID, t + 600, 50);
    ev->name = "cublasSgemm_v2";
    ev->layer = TP_LAYER_LIBRARY;
    h->event(st, ev);

    int w = PID + 1;
    ev = mk(&it, TP_REC_RANGE, w, START + 2000, 3000);
    ev->name = "range \"x\"\n\xfe";
    ev->domain = "dom";
    h->event(st, ev);
    ev = mk(&it, TP_REC_MARK, w, START + 2500, 0);
    ev->name = "mark";
    h->event(st, ev);
    ev = mk(&it, TP_REC_COUNTER, w, START + 2600, 0);
    ev->name = "loss";
    it.rec.u.mark.value = NAN;
    h->event(st, ev);
    ev = mk(&it, TP_REC_COUNTER, w, START + 2700, 0);
    ev->name = "loss";
    it.rec.u.mark.value = 2.5;
    h->event(st, ev);
    ev = mk(&it, TP_REC_RANGE, w, BASE - 5000, 10);
    ev->name = "before the base";
    h->event(st, ev);
}



static char *load_text(const char *path, int gzip)
{
    size_t n;
    char *raw = tp_test_slurp(path, &n);
    ck_assert_msg(raw != NULL, "%s: cannot read", path);
    if (!gzip)
        return raw;
    ck_assert_uint_eq((unsigned char)raw[0], 0x1f);
    char *text = tp_test_gunzip_one(raw, n, NULL);
    free(raw);
    return text;
}

static int run_window(int gzip, void (*feed)(const struct tp_handler *, void *))
{
    const struct tp_handler *h = tp_handler_find("chrome");
    ck_assert_ptr_nonnull(h);
    void *st = h->open(&win);
    if (!st)
        return -1;
    (void)gzip;
    feed(h, st);
    return h->close(st, &win, &saved);
}

/* Every "ts": and "dur": number in the raw text has at most 3 decimals. */
static void check_decimals(const char *text)
{
    static const char *const keys[] = { "\"ts\": ", "\"dur\": " };
    for (int k = 0; k < 2; k++) {
        int seen = 0;
        for (const char *p = strstr(text, keys[k]); p; p = strstr(p + 1, keys[k])) {
            const char *q = p + strlen(keys[k]);
            ck_assert_msg(*q == '-' || (*q >= '0' && *q <= '9'), "not a number at %.40s", p);
            while (*q >= '0' && *q <= '9')
                q++;
            if (*q == '.') {
                int d = 0;
                for (q++; *q >= '0' && *q <= '9'; q++)
                    d++;
                ck_assert_msg(d >= 1 && d <= 3, "%d decimals at %.40s", d, p);
            }
            ck_assert_msg(*q != 'e' && *q != 'E', "exponent at %.40s", p);
            seen++;
        }
        ck_assert_int_gt(seen, 0);
    }
}

static json_t *find_event(json_t *events, const char *ph, const char *name, json_int_t tid)
{
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        if (!strcmp(json_string_value(json_object_get(e, "ph")), ph) &&
            !strcmp(json_string_value(json_object_get(e, "name")), name) &&
            (tid < 0 || json_integer_value(json_object_get(e, "tid")) == tid))
            return e;
    }
    return NULL;
}

static json_t *args_of(json_t *e)
{
    json_t *a = json_object_get(e, "args");
    ck_assert_ptr_nonnull(a);
    return a;
}

static double num(json_t *v)
{
    ck_assert_msg(json_is_number(v), "not a number");
    return json_number_value(v);
}

static void check_sample(const char *text)
{
    json_error_t err;
    json_t *root_obj = json_loads(text, 0, &err);
    ck_assert_msg(root_obj != NULL, "trace is not valid JSON/UTF-8: %s (line %d)", err.text, err.line);

    static const char *const order[] = {
        "schemaVersion", "deviceProperties", "trace_id", "host_name", "distributedInfo", "trainprof",
        "job", "team", "displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "traceName",
    };
    size_t k = 0;
    for (void *it = json_object_iter(root_obj); it; it = json_object_iter_next(root_obj, it), k++) {
        ck_assert_uint_lt(k, sizeof order / sizeof order[0]);
        ck_assert_str_eq(json_object_iter_key(it), order[k]);
    }
    ck_assert_uint_eq(k, sizeof order / sizeof order[0]);

    ck_assert_int_eq(json_integer_value(json_object_get(root_obj, "schemaVersion")), 1);
    ck_assert(json_is_array(json_object_get(root_obj, "deviceProperties")));
    json_t *di = json_object_get(root_obj, "distributedInfo");
    /* the launcher says rank 3 of 8; nothing says which backend */
    ck_assert_ptr_null(json_object_get(di, "backend"));
    ck_assert_int_eq(json_integer_value(json_object_get(di, "rank")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(di, "world_size")), 8);
    ck_assert_ptr_nonnull(strstr(text, "\"rank\": 3"));
    ck_assert_ptr_null(strstr(text, "\"rank\":3"));

    json_t *tp = json_object_get(root_obj, "trainprof");
    ck_assert_str_eq(json_string_value(json_object_get(tp, "version")), "0.1.0");
    json_t *cfg = json_object_get(tp, "configuration");
    ck_assert_str_eq(json_string_value(json_object_get(cfg, "schedule")), "wait=0");
    ck_assert(json_is_true(json_object_get(cfg, "gzip")));
    ck_assert(num(json_object_get(cfg, "sys_interval")) == 0.5);
    ck_assert_str_eq(json_string_value(json_object_get(tp, "step_signal")), "api");
    ck_assert_int_eq(json_integer_value(json_object_get(tp, "steps_recorded")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(tp, "first_step")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(tp, "last_step")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(tp, "batch")), 5);
    ck_assert(json_is_false(json_object_get(tp, "partial")));
    ck_assert(json_is_null(json_object_get(tp, "partial_reason")));
    ck_assert_int_eq(json_integer_value(json_object_get(tp, "records")), 1000);
    ck_assert_int_eq(json_integer_value(json_object_get(tp, "dropped_events")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(tp, "late_events")), 1);
    ck_assert(json_integer_value(json_object_get(tp, "flops")) == 10000000000LL);
    json_t *st = json_object_get(tp, "steps");
    ck_assert_int_eq(json_array_size(st), 4);
    json_t *s2 = json_array_get(st, 1);
    ck_assert_int_eq(json_integer_value(json_object_get(s2, "step")), 2);
    ck_assert(json_integer_value(json_object_get(s2, "flops")) == 2000000000LL);
    ck_assert(fabs(num(json_object_get(s2, "tflops_per_s")) - 0.2) < 1e-9);
    ck_assert(fabs(num(json_object_get(s2, "wall_ms")) - 10.0) < 1e-9);
    /* FLOPs and TFLOP/s counters: one sample per step, back to 0 after the last */
    size_t nflops = 0, ci;
    json_t *ce;
    json_array_foreach(json_object_get(root_obj, "traceEvents"), ci, ce) {
        if (strcmp(json_string_value(json_object_get(ce, "ph")), "C") != 0 ||
            strcmp(json_string_value(json_object_get(ce, "name")), "TFLOP/s") != 0)
            continue;
        double v = num(json_object_get(json_object_get(ce, "args"), "TFLOP/s"));
        ck_assert(v == 0 || fabs(v - 0.1 * (double)(nflops + 1)) < 1e-9);
        nflops++;
    }
    ck_assert_uint_eq(nflops, 5);

    ck_assert_str_eq(json_string_value(json_object_get(root_obj, "job")), "j\x01\"");
    json_t *team = json_object_get(json_object_get(root_obj, "team"), "a");
    ck_assert_uint_eq(json_array_size(team), 4);
    ck_assert(num(json_array_get(team, 1)) == 2.5);
    ck_assert_str_eq(json_string_value(json_object_get(root_obj, "displayTimeUnit")), "ms");
    ck_assert(json_integer_value(json_object_get(root_obj, "baseTimeNanoseconds")) == BASE);

    json_t *events = json_object_get(root_obj, "traceEvents");
    ck_assert(json_is_array(events));
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        json_t *name = json_object_get(e, "name"), *ph = json_object_get(e, "ph");
        ck_assert_msg(json_is_string(name) && json_is_string(ph), "event %zu without name/ph", i);
        ck_assert_msg(json_is_integer(json_object_get(e, "pid")), "event %zu: pid not an integer", i);
        ck_assert_msg(json_is_integer(json_object_get(e, "tid")), "event %zu: tid not an integer", i);
        ck_assert_msg(json_is_number(json_object_get(e, "ts")), "event %zu without ts", i);
        ck_assert(num(json_object_get(e, "ts")) >= 0);
        if (!strcmp(json_string_value(ph), "X")) {
            ck_assert_msg(json_is_string(json_object_get(e, "cat")), "X event %zu without cat", i);
            ck_assert_msg(json_is_number(json_object_get(e, "dur")), "X event %zu without dur", i);
        }
        json_t *args = json_object_get(e, "args");
        ck_assert_msg(!args || !json_object_get(args, "stream"), "CPU event %zu has a stream arg", i);
        ck_assert_msg(!json_object_get(e, "stream"), "event %zu has a stream key", i);
    }
    check_decimals(text);

    double prev_end = 0;
    for (int s = 1; s <= 4; s++) {
        char name[32];
        snprintf(name, sizeof name, "ProfilerStep#%d", s);
        e = find_event(events, "X", name, PID);
        ck_assert_msg(e != NULL, "%s missing", name);
        ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "user_annotation");
        /* 10 ms steps back to back, each written 3 ns short: a reader adding
         * ts and dur as doubles never sees one overlap the next */
        ck_assert(fabs(num(json_object_get(e, "dur")) - 9999.997) < 1e-9);
        ck_assert(s == 1 || prev_end < num(json_object_get(e, "ts")));
        prev_end = num(json_object_get(e, "ts")) + num(json_object_get(e, "dur"));
        double ts = (double)(START - BASE + (int64_t)(s - 1) * 10000000) / 1000.0;
        ck_assert_msg(fabs(num(json_object_get(e, "ts")) - ts) < 1e-6, "step ts %f != %f",
                      num(json_object_get(e, "ts")), ts);
    }
    e = find_event(events, "X", "before the base", PID + 1);
    ck_assert_ptr_nonnull(e);
    ck_assert(num(json_object_get(e, "ts")) == 0);

    size_t launches = 0;
    int hostile_seen = 0;
    json_array_foreach(events, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (strcmp(name, "cudaLaunchKernel"))
            continue;
        launches++;
        ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "cuda_runtime");
        json_t *a = args_of(e);
        ck_assert(json_is_integer(json_object_get(a, "correlation")));
        ck_assert_int_eq(json_integer_value(json_object_get(a, "cbid")), 211);
        json_t *grid = json_object_get(a, "grid"), *block = json_object_get(a, "block");
        ck_assert_int_eq(json_integer_value(json_array_get(grid, 0)), 1024);
        ck_assert_int_eq(json_integer_value(json_array_get(grid, 1)), 2);
        ck_assert_int_eq(json_integer_value(json_array_get(grid, 2)), 3);
        ck_assert_int_eq(json_integer_value(json_array_get(block, 0)), 256);
        ck_assert_int_eq(json_integer_value(json_object_get(a, "shared memory")), 4096);
        ck_assert(json_integer_value(json_object_get(a, "cuda stream")) == 0x7f0012345678LL);
        ck_assert_ptr_null(json_object_get(a, "status"));
        ck_assert(fabs(num(json_object_get(e, "dur")) - 2.345) < 1e-9);
        const char *kernel = json_string_value(json_object_get(a, "kernel"));
        if (json_integer_value(json_object_get(a, "correlation")) == 2) {
            ck_assert_str_eq(kernel, hostile_kernel_decoded);
            hostile_seen = 1;
        } else {
            ck_assert_str_eq(kernel, "gemm_kernel");
        }
    }
    ck_assert_uint_eq(launches, 4);
    ck_assert(hostile_seen);

    e = find_event(events, "X", "cudaMemcpyAsync", PID);
    ck_assert_ptr_nonnull(e);
    json_t *a = args_of(e);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "bytes")), 1 << 20);
    ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), "HtoD");
    ck_assert_int_eq(json_integer_value(json_object_get(a, "cuda stream")), 77);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "cbid")), 41);

    a = args_of(find_event(events, "X", "cudaMemsetAsync", PID));
    ck_assert_int_eq(json_integer_value(json_object_get(a, "bytes")), 64);
    ck_assert_ptr_null(json_object_get(a, "kind"));
    ck_assert_ptr_null(json_object_get(a, "cbid"));
    ck_assert_int_eq(json_integer_value(json_object_get(a, "cuda stream")), 9);

    a = args_of(find_event(events, "X", "cudaStreamSynchronize", PID));
    ck_assert_int_eq(json_integer_value(json_object_get(a, "status")), 700);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "cuda stream")), 9);
    ck_assert_ptr_null(json_object_get(a, "bytes"));

    a = args_of(find_event(events, "X", "cudaEventSynchronize", PID));
    ck_assert_int_eq(json_integer_value(json_object_get(a, "cuda event")), 0xabc);
    ck_assert_ptr_null(json_object_get(a, "cuda stream"));

    e = find_event(events, "X", "cuMemcpyHtoD_v2", PID);
    ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "cuda_driver");
    ck_assert_int_eq(json_integer_value(json_object_get(args_of(e), "bytes")), 8);

    e = find_event(events, "X", "cudaGraphLaunch", PID);
    a = args_of(e);
    ck_assert_ptr_null(json_object_get(a, "grid"));
    ck_assert_ptr_null(json_object_get(a, "kernel"));
    ck_assert_int_eq(json_integer_value(json_object_get(a, "cuda stream")), 5);

    e = find_event(events, "X", "cublasSgemm_v2", PID);
    ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "cpu_op");

    e = find_event(events, "X", "range \"x\"\n\xef\xbf\xbd", PID + 1);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "user_annotation");
    ck_assert_str_eq(json_string_value(json_object_get(args_of(e), "domain")), "dom");
    e = find_event(events, "i", "mark", PID + 1);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(json_string_value(json_object_get(e, "s")), "t");
    ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "user_annotation");
    size_t counters = 0;
    json_array_foreach(events, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "ph")), "C") ||
            strcmp(json_string_value(json_object_get(e, "name")), "loss"))
            continue;
        json_t *v = json_object_get(args_of(e), "loss");
        ck_assert(json_is_number(v));
        ck_assert(counters == 0 ? num(v) == 0 : num(v) == 2.5);
        counters++;
    }
    ck_assert_uint_eq(counters, 2);

    e = find_event(events, "M", "process_name", -1);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "pid")), PID);
    ck_assert_str_eq(json_string_value(json_object_get(args_of(e), "name")), "train");
    e = find_event(events, "M", "process_labels", -1);
    ck_assert_str_eq(json_string_value(json_object_get(args_of(e), "labels")), "CPU");
    e = find_event(events, "M", "process_sort_index", -1);
    ck_assert_int_eq(json_integer_value(json_object_get(args_of(e), "sort_index")), PID);
    e = find_event(events, "M", "thread_name", PID);
    ck_assert_str_eq(json_string_value(json_object_get(args_of(e), "name")), "thread 4242 (main)");
    e = find_event(events, "M", "thread_name", PID + 1);
    ck_assert_str_eq(json_string_value(json_object_get(args_of(e), "name")),
                     "thread 4243 (w\"k\x01\xef\xbf\xbd)");
    for (int t = PID; t <= PID + 1; t++) {
        e = find_event(events, "M", "thread_sort_index", t);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(json_integer_value(json_object_get(args_of(e), "sort_index")), t);
    }
    size_t tn = 0;
    json_array_foreach(events, i, e)
        tn += !strcmp(json_string_value(json_object_get(e, "name")), "thread_name");
    ck_assert_uint_eq(tn, 2);

    const char *slash = strrchr(saved.trace, '/');
    ck_assert_str_eq(json_string_value(json_object_get(root_obj, "traceName")), slash + 1);
    json_decref(root_obj);
}

START_TEST(test_handler_table)
{
    ck_assert_str_eq(tp_config_handler_names(), "chrome,summary,memory,stacks,exec");
    const struct tp_handler *c = tp_handler_find("chrome"), *s = tp_handler_find("summary");
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(c->name, "chrome");
    ck_assert_str_eq(s->name, "summary");
    ck_assert(c->open && c->event && c->close && s->open && s->event && s->close);
    ck_assert_ptr_null(tp_handler_find("nope"));
    ck_assert_ptr_null(tp_handler_find(NULL));
}
END_TEST

START_TEST(test_trace_gzip)
{
    setup_window(1);
    ck_assert_int_eq(run_window(1, feed_sample), 0);
    char expect[256];
    snprintf(expect, sizeof expect, "%s/rank3.5.pt.trace.json.gz", folder);
    ck_assert_str_eq(saved.trace, expect);
    char *text = load_text(saved.trace, 1);
    check_sample(text);
    free(text);
}
END_TEST

START_TEST(test_trace_plain)
{
    setup_window(0);
    ck_assert_int_eq(run_window(0, feed_sample), 0);
    char expect[256];
    snprintf(expect, sizeof expect, "%s/rank3.5.pt.trace.json", folder);
    ck_assert_str_eq(saved.trace, expect);
    char *text = load_text(saved.trace, 0);
    ck_assert_int_eq(text[0], '{');
    check_sample(text);
    free(text);
}
END_TEST

static void feed_nothing(const struct tp_handler *h, void *st)
{
    (void)h;
    (void)st;
}

START_TEST(test_empty_window_and_no_steps)
{
    setup_window(1);
    win.first_step = 3;
    win.last_step = 3;
    win.steps_recorded = 0;
    win.steps = NULL;
    win.step_signal = "";
    win.user_metadata = NULL;
    win.config_json = "not json";
    ck_assert_int_eq(run_window(1, feed_nothing), 0);
    char *text = load_text(saved.trace, 1);
    json_t *r = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(r);
    json_t *tp = json_object_get(r, "trainprof");
    ck_assert(json_is_null(json_object_get(tp, "first_step")));
    ck_assert_int_eq(json_integer_value(json_object_get(tp, "steps_recorded")), 0);
    ck_assert_uint_eq(json_object_size(json_object_get(tp, "configuration")), 0);
    json_t *events = json_object_get(r, "traceEvents");
    ck_assert_uint_eq(json_array_size(events), 3);
    json_decref(r);
    free(text);
}
END_TEST

/* The trace of a window set up by "setup", parsed; the text in *text. */
static json_t *trace_of(void (*setup)(void), char **text)
{
    setup_window(1);
    win.user_metadata = NULL;
    setup();
    ck_assert_int_eq(run_window(1, feed_sample), 0);
    *text = load_text(saved.trace, 1);
    json_t *r = json_loads(*text, 0, NULL);
    ck_assert_ptr_nonnull(r);
    return r;
}

static void dist_nothing(void) { win.launched = 0; win.rank = 0; win.world_size = 1; }
static void dist_nccl(void) { win.launched = 0; win.comms_created = 1; }
static void dist_group(void) { win.pg_backend = "gloo"; win.pg_rank = 1; win.pg_world_size = 2; }

/* distributedInfo only where something says the process is part of a job,
 * with the backend only where it is known (a CPU job that never used
 * torch.distributed once said backend "nccl"). */
START_TEST(test_distributed_info_only_when_known)
{
    char *text;
    /* a program run by hand: none, as torch.profiler writes none */
    json_t *r = trace_of(dist_nothing, &text);
    ck_assert_ptr_null(json_object_get(r, "distributedInfo"));
    ck_assert_ptr_null(strstr(text, "\"backend\""));
    json_decref(r);
    free(text);
    /* NCCL communicators seen: nccl */
    r = trace_of(dist_nccl, &text);
    json_t *di = json_object_get(r, "distributedInfo");
    ck_assert_str_eq(json_string_value(json_object_get(di, "backend")), "nccl");
    ck_assert_int_eq(json_integer_value(json_object_get(di, "rank")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(di, "pg_count")), 1);
    json_decref(r);
    free(text);
    /* the framework's process group: its backend, rank and size win over
     * the launcher's (rank 3 of 8 here) */
    r = trace_of(dist_group, &text);
    di = json_object_get(r, "distributedInfo");
    ck_assert_str_eq(json_string_value(json_object_get(di, "backend")), "gloo");
    ck_assert_int_eq(json_integer_value(json_object_get(di, "rank")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(di, "world_size")), 2);
    ck_assert_ptr_nonnull(strstr(text, "\"rank\": 1"));    /* HTA's regex */
    json_decref(r);
    free(text);
}
END_TEST

static void meta_shapes(void) { win.record_shapes = 1; }
static void meta_user(void) { win.user_metadata = "{\"trace_id\":\"mine\",\"host_name\":\"h\"}"; }

static int is_trace_id(const char *id)
{
    if (!id || strlen(id) != 32)
        return 0;
    for (int i = 0; i < 32; i++)
        if (!strchr("0123456789ABCDEF", id[i]))
            return 0;
    return id[12] == '4' && strchr("89AB", id[16]) != NULL;     /* uuid4 */
}

/* Kineto's trace_id, record_shapes and host_name, as torch.profiler writes
 * them; a key TRAINPROF_METADATA gives is the user's. */
START_TEST(test_kineto_metadata)
{
    char *text, host[256] = "";
    ck_assert_int_eq(gethostname(host, sizeof host - 1), 0);
    json_t *r = trace_of(dist_nothing, &text);
    const char *id = json_string_value(json_object_get(r, "trace_id"));
    ck_assert_msg(is_trace_id(id), "trace_id %s", id ? id : "(none)");
    char first[33];
    snprintf(first, sizeof first, "%s", id);
    ck_assert_ptr_null(json_object_get(r, "record_shapes"));
    ck_assert_str_eq(json_string_value(json_object_get(r, "host_name")), host);
    json_decref(r);
    free(text);

    r = trace_of(meta_shapes, &text);
    id = json_string_value(json_object_get(r, "trace_id"));
    ck_assert(is_trace_id(id));
    ck_assert_str_ne(id, first);                        /* one per trace */
    ck_assert_int_eq(json_integer_value(json_object_get(r, "record_shapes")), 1);
    json_decref(r);
    free(text);

    r = trace_of(meta_user, &text);
    ck_assert_str_eq(json_string_value(json_object_get(r, "trace_id")), "mine");
    ck_assert_str_eq(json_string_value(json_object_get(r, "host_name")), "h");
    const char *k = strstr(text, "\"trace_id\"");
    ck_assert_ptr_null(strstr(k + 1, "\"trace_id\""));  /* written once */
    json_decref(r);
    free(text);
}
END_TEST

static void no_flops(void)
{
    static struct tp_window_step steps[4];
    for (uint64_t i = 0; i < 4; i++) {
        steps[i] = win.steps[i];
        steps[i].flops = 0;
    }
    win.steps = steps;
    win.flops = 0;
}

/* No FLOPs and TFLOP/s tracks in a window that counted no library FLOPs
 * (a CPU job's trace once had both, all zeros). */
START_TEST(test_no_flops_no_counter_tracks)
{
    char *text;
    json_t *r = trace_of(no_flops, &text);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(r, "traceEvents"), i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        ck_assert_msg(strcmp(name, "FLOPs") && strcmp(name, "TFLOP/s"), "counter %s", name);
    }
    ck_assert_ptr_nonnull(find_event(json_object_get(r, "traceEvents"), "C", "loss", -1));
    json_decref(r);
    free(text);
}
END_TEST

/* "trainprof"."clock": the triples read at window start and end, each with
 * the Unix ns the trace gives its tick, as `trainprof merge` reads them; a
 * triple not read (tick 0) is null. */
START_TEST(test_clock_metadata)
{
    setup_window(1);
    tp_clock_init();
    tp_clock_read_triple(&win.clock_start);
    ck_assert_uint_ne(win.clock_start.tick, 0);
    ck_assert_int_gt(win.clock_start.realtime_ns, 1500000000LL * 1000000000LL);
    ck_assert_int_gt(win.clock_start.monotonic_ns, 0);
    ck_assert_int_gt(win.clock_start.bracket_ns, 0);
    ck_assert_int_lt(win.clock_start.bracket_ns, 1000000000LL);
    win.clock_start_trace_ns = win.clock_start.realtime_ns + 1234;
    win.clock_end = (struct tp_clock_triple){ .tick = 0 };
    win.ns_per_tick = 0.37;
    win.clock_source = "tsc";
    win.boot_id = "0b1d-2c";
    ck_assert_int_eq(run_window(1, feed_nothing), 0);
    char *text = load_text(saved.trace, 1);
    json_t *r = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(r);
    json_t *clock = json_object_get(json_object_get(r, "trainprof"), "clock");
    ck_assert_ptr_nonnull(clock);
    ck_assert_str_eq(json_string_value(json_object_get(clock, "source")), "tsc");
    ck_assert_str_eq(json_string_value(json_object_get(clock, "host")), "host");
    ck_assert_str_eq(json_string_value(json_object_get(clock, "boot_id")), "0b1d-2c");
    ck_assert(json_real_value(json_object_get(clock, "ns_per_tick")) == 0.37);
    json_t *st = json_object_get(clock, "start");
    ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(st, "tick")), win.clock_start.tick);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "realtime_ns")), win.clock_start.realtime_ns);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "monotonic_ns")), win.clock_start.monotonic_ns);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "bracket_ns")), win.clock_start.bracket_ns);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "trace_ns")), win.clock_start.realtime_ns + 1234);
    ck_assert(json_is_null(json_object_get(clock, "end")));
    json_decref(r);
    free(text);
    /* a real boot id is a UUID, or "" where /proc does not say */
    const char *id = tp_clock_boot_id();
    ck_assert(strlen(id) == 0 || strlen(id) == 36);
}
END_TEST

/* feed_memory: the ledger names the owner and site of the two changes */
static int memory_owned;

/* Memory: two changes give [memory] instants and counter points; a failed
 * allocation, a free of NULL and an untracked call give only their X
 * events; the window's levels start and end each track. */
static void feed_memory(const struct tp_handler *h, void *st)
{
    static struct item it[5];
    static const struct { int form; uint64_t addr, bytes, total; int dev, cls, flags; } m[5] = {
        { TP_FORM_ALLOC, 0x7000, 4096, 12288, 1, TP_MEM_DEVICE, 0 },
        { TP_FORM_ALLOC, 0, 1ull << 40, 12288, 1, TP_MEM_DEVICE, TP_MEM_FAILED },
        { TP_FORM_FREE, 0x8000, 512, 0, -1, TP_MEM_HOST, 0 },
        { TP_FORM_FREE, 0, 0, 12288, 1, TP_MEM_DEVICE, TP_MEM_NOOP },
        { TP_FORM_ALLOC, 0x9000, 64, 0, 0, TP_MEM_DEVICE, TP_MEM_UNTRACKED },
    };
    for (int i = 0; i < 5; i++) {
        struct tp_event *ev = mk(&it[i], TP_REC_API, PID, START + 1000000 * (i + 1), 1000);
        ev->name = m[i].form == TP_FORM_ALLOC ? "cudaMalloc" : "cudaFree";
        ev->layer = TP_LAYER_RUNTIME;
        ev->form = (uint8_t)m[i].form;
        ev->correlation = (uint64_t)i + 1;
        it[i].rec.status = m[i].flags & TP_MEM_FAILED ? 2 : 0;
        it[i].rec.u.mem.addr = m[i].addr;
        it[i].rec.u.mem.bytes = m[i].bytes;
        it[i].rec.u.mem.total = m[i].total;
        it[i].rec.u.mem.device = (int16_t)m[i].dev;
        it[i].rec.u.mem.mclass = (uint8_t)m[i].cls;
        it[i].rec.u.mem.flags = (uint8_t)m[i].flags;
        if (memory_owned && i == 0) {
            ev->mem_owner = "PyTorch caching allocator";
            ev->mem_site = "c10::cuda::CUDACachingAllocator::malloc+0x10 (libc10_cuda.so)";
        } else if (memory_owned && i == 2) {
            ev->mem_owner = "train";        /* no site: "" */
        }
        h->event(st, ev);
    }
}

START_TEST(test_memory_events)
{
    setup_window(0);
    static struct tp_mem_usage usage[2] = {
        { .device = 1, .mclass = TP_MEM_DEVICE, .start_bytes = 8192, .end_bytes = 12288 },
        { .device = -1, .mclass = TP_MEM_HOST, .start_bytes = 512, .end_bytes = 0 },
    };
    win.mem = usage;
    win.n_mem = 2;
    ck_assert_int_eq(run_window(0, feed_memory), 0);
    char *text = load_text(saved.trace, 0);
    json_t *r = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(r);
    json_t *events = json_object_get(r, "traceEvents");
    size_t i;
    json_t *e;
    int instants = 0, x = 0;
    json_t *gpu[4], *hostc[4];
    int ngpu = 0, nhost = 0;
    json_array_foreach(events, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *a = json_object_get(e, "args");
        if (!strcmp(ph, "i") && !strcmp(name, "[memory]")) {
            ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "cpu_instant_event");
            ck_assert_str_eq(json_string_value(json_object_get(e, "s")), "t");
            ck_assert_ptr_null(json_object_get(a, "Owner"));     /* no ledger: no owner */
            ck_assert_ptr_null(json_object_get(a, "Site"));
            if (instants == 0) {
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Device Type")), 1);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Device Id")), 1);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Addr")), 0x7000);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Bytes")), 4096);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Total Allocated")), 12288);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Total Reserved")), 12288);
                /* at the end of the call */
                ck_assert(fabs(num(json_object_get(e, "ts")) - (START + 1000000 + 1000 - BASE) / 1e3) < 1e-3);
            } else {
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Device Type")), 0);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Device Id")), -1);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Bytes")), -512);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "Total Reserved")), 0);
            }
            instants++;
        } else if (!strcmp(ph, "X") && a && json_object_get(a, "addr")) {
            if (x == 1) {
                ck_assert_int_eq(json_integer_value(json_object_get(a, "failed")), 1);
                ck_assert_int_eq(json_integer_value(json_object_get(a, "bytes")), 1ll << 40);
            } else {
                ck_assert_ptr_null(json_object_get(a, "failed"));
            }
            x++;
        } else if (!strcmp(ph, "C") && !strcmp(name, "GPU 1 memory reserved") && ngpu < 4) {
            gpu[ngpu++] = a;
        } else if (!strcmp(ph, "C") && !strcmp(name, "Host pinned memory") && nhost < 4) {
            hostc[nhost++] = a;
        }
    }
    ck_assert_int_eq(instants, 2);
    ck_assert_int_eq(x, 5);
    ck_assert_int_eq(ngpu, 3);      /* window start, the allocation, window end */
    ck_assert_int_eq(json_integer_value(json_object_get(gpu[0], "bytes")), 8192);
    ck_assert_int_eq(json_integer_value(json_object_get(gpu[1], "bytes")), 12288);
    ck_assert_int_eq(json_integer_value(json_object_get(gpu[2], "bytes")), 12288);
    ck_assert_int_eq(nhost, 3);
    ck_assert_int_eq(json_integer_value(json_object_get(hostc[0], "bytes")), 512);
    ck_assert_int_eq(json_integer_value(json_object_get(hostc[1], "bytes")), 0);
    ck_assert(find_event(events, "C", "GPU 0 memory reserved", -1) == NULL);   /* untracked */
    json_decref(r);
    free(text);
}
END_TEST

/* The memory ledger: each [memory] instant names its owner and call site;
 * a counter track per (device, class) with every owner's bytes in each
 * point, from the window's start levels through each change of the series
 * to the end levels, in the rows' order; an owner that only the series
 * names (no row) joins its track from its first point; a point of an
 * owner index without a name is left out. */
static const char *const owner_names[] = { "NCCL", "PyTorch caching allocator", "train", "unknown" };
static struct tp_mem_owner_usage owner_rows[4];
static struct tp_mem_owner_point owner_points[6];

static void setup_owners(void)
{
    owner_rows[0] = (struct tp_mem_owner_usage){ .device = 1, .mclass = TP_MEM_DEVICE, .owner = 1,
                                                 .start_bytes = 4096, .end_bytes = 8192, .peak_bytes = 8192,
                                                 .allocs = 1 };
    owner_rows[1] = (struct tp_mem_owner_usage){ .device = 1, .mclass = TP_MEM_DEVICE, .owner = 0,
                                                 .start_bytes = 4096, .end_bytes = 4096, .peak_bytes = 8192,
                                                 .allocs = 1, .frees = 1 };
    owner_rows[2] = (struct tp_mem_owner_usage){ .device = -1, .mclass = TP_MEM_HOST, .owner = 2,
                                                 .start_bytes = 512, .peak_bytes = 512, .frees = 1 };
    owner_rows[3] = (struct tp_mem_owner_usage){ .device = 0, .mclass = TP_MEM_MANAGED, .owner = 3,
                                                 .end_bytes = 64, .peak_bytes = 64, .allocs = 1 };
    static const struct { int64_t at; int dev, cls; unsigned owner; uint64_t bytes; } p[6] = {
        { 1000000, 0, TP_MEM_MANAGED, 3, 64 },
        { 2000000, 1, TP_MEM_DEVICE, 1, 8192 },
        { 3000000, 1, TP_MEM_DEVICE, 0, 8192 },
        { 3500000, -1, TP_MEM_HOST, 2, 0 },
        { 4000000, 1, TP_MEM_DEVICE, 0, 4096 },
        { 4500000, 1, TP_MEM_DEVICE, 99, 1 },     /* no such owner */
    };
    for (int i = 0; i < 6; i++)
        owner_points[i] = (struct tp_mem_owner_point){ .ts_ns = START + p[i].at, .device = (int16_t)p[i].dev,
                                                       .mclass = (uint8_t)p[i].cls,
                                                       .owner = (uint16_t)p[i].owner, .bytes = p[i].bytes };
    win.mem_owner_names = owner_names;
    win.n_mem_owner_names = 4;
    win.mem_owners = owner_rows;
    win.n_mem_owners = 4;
    win.mem_owner_points = owner_points;
    win.n_mem_owner_points = 6;
    win.mem_owners_exact = 1;
    win.mem_coverage = 1.0;
}

/* Checks the next event of "track" after index *from: at "at_ns" (window
 * time), args exactly "keys" = "vals" in this order. */
static void check_owner_point(json_t *events, size_t *from, const char *track, int64_t at_ns,
                              const char *const *keys, const uint64_t *vals, int n)
{
    size_t i = *from;
    json_t *e = NULL;
    for (; i < json_array_size(events); i++) {
        e = json_array_get(events, i);
        if (!strcmp(json_string_value(json_object_get(e, "name")), track))
            break;
    }
    ck_assert_msg(i < json_array_size(events), "%s: no point for %lld ns", track, (long long)at_ns);
    *from = i + 1;
    ck_assert_str_eq(json_string_value(json_object_get(e, "ph")), "C");
    ck_assert_int_eq(json_integer_value(json_object_get(e, "pid")), PID);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "tid")), PID);
    ck_assert_msg(fabs(num(json_object_get(e, "ts")) - (START + at_ns - BASE) / 1e3) < 1e-3,
                  "%s: ts %f, wanted %lld ns", track, num(json_object_get(e, "ts")), (long long)at_ns);
    json_t *a = args_of(e);
    ck_assert_int_eq((int)json_object_size(a), n);
    const char *k;
    json_t *v;
    int x = 0;
    json_object_foreach(a, k, v) {      /* jansson keeps the file's order */
        ck_assert_str_eq(k, keys[x]);
        ck_assert_int_eq(json_integer_value(v), (json_int_t)vals[x]);
        x++;
    }
}

START_TEST(test_memory_owners)
{
    setup_window(0);
    static struct tp_mem_usage usage[3] = {
        { .device = 1, .mclass = TP_MEM_DEVICE, .start_bytes = 8192, .end_bytes = 12288 },
        { .device = -1, .mclass = TP_MEM_HOST, .start_bytes = 512, .end_bytes = 0 },
        { .device = 0, .mclass = TP_MEM_MANAGED, .start_bytes = 0, .end_bytes = 64 },
    };
    win.mem = usage;
    win.n_mem = 3;
    setup_owners();
    /* an owner of no row: "train" in GPU1 from 5 ms */
    owner_points[5] = (struct tp_mem_owner_point){ .ts_ns = START + 5000000, .device = 1,
                                                   .mclass = TP_MEM_DEVICE, .owner = 2, .bytes = 1024 };
    memory_owned = 1;
    int rc = run_window(0, feed_memory);
    memory_owned = 0;
    ck_assert_int_eq(rc, 0);
    char *text = load_text(saved.trace, 0);
    json_t *r = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(r);
    json_t *events = json_object_get(r, "traceEvents");
    size_t i;
    json_t *e;
    int instants = 0;
    json_array_foreach(events, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), "[memory]"))
            continue;
        json_t *a = args_of(e);
        if (instants++ == 0) {
            ck_assert_str_eq(json_string_value(json_object_get(a, "Owner")), "PyTorch caching allocator");
            ck_assert_str_eq(json_string_value(json_object_get(a, "Site")),
                             "c10::cuda::CUDACachingAllocator::malloc+0x10 (libc10_cuda.so)");
        } else {
            ck_assert_str_eq(json_string_value(json_object_get(a, "Owner")), "train");
            ck_assert_str_eq(json_string_value(json_object_get(a, "Site")), "");
        }
        /* Kineto's args unchanged */
        ck_assert_ptr_nonnull(json_object_get(a, "Total Reserved"));
    }
    ck_assert_int_eq(instants, 2);

    const char *const gpu_keys[] = { "PyTorch caching allocator", "NCCL", "train" };
    size_t at = 0;
    const char *g = "GPU 1 memory by owner";
    check_owner_point(events, &at, g, 0, gpu_keys, (const uint64_t[]){ 4096, 4096 }, 2);
    check_owner_point(events, &at, g, 2000000, gpu_keys, (const uint64_t[]){ 8192, 4096 }, 2);
    check_owner_point(events, &at, g, 3000000, gpu_keys, (const uint64_t[]){ 8192, 8192 }, 2);
    check_owner_point(events, &at, g, 4000000, gpu_keys, (const uint64_t[]){ 8192, 4096 }, 2);
    check_owner_point(events, &at, g, 5000000, gpu_keys, (const uint64_t[]){ 8192, 4096, 1024 }, 3);
    check_owner_point(events, &at, g, 50000000, gpu_keys, (const uint64_t[]){ 8192, 4096, 1024 }, 3);
    size_t n = 0;
    json_array_foreach(events, i, e)
        n += !strcmp(json_string_value(json_object_get(e, "name")), g);
    ck_assert_uint_eq(n, 6);     /* the point of owner 99 is left out */

    const char *const host_keys[] = { "train" };
    at = 0;
    const char *hname = "Host pinned memory by owner";
    check_owner_point(events, &at, hname, 0, host_keys, (const uint64_t[]){ 512 }, 1);
    check_owner_point(events, &at, hname, 3500000, host_keys, (const uint64_t[]){ 0 }, 1);
    check_owner_point(events, &at, hname, 50000000, host_keys, (const uint64_t[]){ 0 }, 1);
    const char *const man_keys[] = { "unknown" };
    at = 0;
    const char *mname = "GPU 0 managed memory by owner";
    check_owner_point(events, &at, mname, 0, man_keys, (const uint64_t[]){ 0 }, 1);
    check_owner_point(events, &at, mname, 1000000, man_keys, (const uint64_t[]){ 64 }, 1);
    check_owner_point(events, &at, mname, 50000000, man_keys, (const uint64_t[]){ 64 }, 1);
    /* the reserved-memory tracks as before */
    ck_assert_ptr_nonnull(find_event(events, "C", "GPU 1 memory reserved", -1));
    json_decref(r);
    free(text);

    /* names but no rows: no owner track */
    cleanup();
    setup_window(0);
    win.mem = usage;
    win.n_mem = 3;
    setup_owners();
    win.n_mem_owners = 0;
    ck_assert_int_eq(run_window(0, feed_memory), 0);
    text = load_text(saved.trace, 0);
    ck_assert_ptr_null(strstr(text, "by owner"));
    free(text);
}
END_TEST

/* Device side: a launch linked to its kernel (ac2g pair), a library call
 * whose kernel inherits its External id, a memcpy, deviceProperties and the
 * coverage metadata. */
static struct tp_device_prop dev_props[1];

static void feed_device(const struct tp_handler *h, void *st)
{
    struct item lib, launch;
    struct tp_event *ev = mk(&lib, TP_REC_API, PID, START + 1000, 50000);
    ev->name = "cublasSgemm_v2";
    ev->layer = TP_LAYER_LIBRARY;
    ev->form = TP_FORM_GEMM;
    ev->correlation = (1ull << 32) + 5;
    ev->external_id = ev->correlation;
    lib.rec.u.lib.flops = 1000;
    h->event(st, ev);
    ev = mk(&launch, TP_REC_LAUNCH, PID, START + 2000, 3000);
    ev->name = "cuLaunchKernel";
    ev->layer = TP_LAYER_DRIVER;
    ev->form = TP_FORM_LAUNCH;
    ev->kernel = "sgemm_kernel";
    ev->correlation = 77;
    ev->external_id = (1ull << 32) + 5;
    ev->flow = 1;
    launch.rec.u.launch.func_kind = TP_FUNC_DRIVER;
    h->event(st, ev);

    static struct tp_device_record k, m;
    memset(&k, 0, sizeof k);
    k.kind = TP_DEVICE_KERNEL;
    k.device = 0;
    k.context = 1;
    k.stream = 7;
    k.correlation = 77;
    k.grid[0] = 264; k.grid[1] = 1; k.grid[2] = 1;
    k.block[0] = 128; k.block[1] = 1; k.block[2] = 1;
    k.registers = 96;
    k.static_smem = 1024;
    k.dynamic_smem = 48000;
    struct tp_event d = { .dev = &k, .name = "sgemm_kernel", .pid = 0, .tid = 7, .cbid = -1,
                          .ts_ns = START + 9000, .dur_ns = 12345, .correlation = 77,
                          .external_id = (1ull << 32) + 5, .flow = 1,
                          .blocks_per_sm = 2.0, .warps_per_sm = 8.0, .occupancy = 25.4 };
    h->event(st, &d);
    memset(&m, 0, sizeof m);
    m.kind = TP_DEVICE_MEMCPY;
    m.stream = 7;
    m.correlation = 78;
    m.bytes = 4096;
    struct tp_event e = { .dev = &m, .name = "Memcpy HtoD (Pageable -> Device)", .pid = 0, .tid = 7,
                          .cbid = -1, .ts_ns = START + 30000, .dur_ns = 1024, .correlation = 78,
                          .occupancy = -1 };
    h->event(st, &e);
}

START_TEST(test_device_side)
{
    setup_window(1);
    memset(dev_props, 0, sizeof dev_props);
    snprintf(dev_props[0].name, sizeof dev_props[0].name, "NVIDIA H100 80GB HBM3");
    dev_props[0].num_sms = 132;
    dev_props[0].compute_major = 9;
    dev_props[0].warp_size = 32;
    win.devices = dev_props;
    win.n_devices = 1;
    win.gpu = 1;
    win.gpu_status = "active (CUPTI 130001)";
    win.host_launches = 1;
    win.gpu_kernels = 1;
    win.gpu_kernels_linked = 1;
    win.coverage = 1.0;
    ck_assert_int_eq(run_window(1, feed_device), 0);
    char *text = load_text(saved.trace, 1);
    json_t *r = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(r);
    json_t *props = json_object_get(r, "deviceProperties");
    ck_assert_uint_eq(json_array_size(props), 1);
    json_t *p0 = json_array_get(props, 0);
    ck_assert_str_eq(json_string_value(json_object_get(p0, "name")), "NVIDIA H100 80GB HBM3");
    ck_assert_int_eq(json_integer_value(json_object_get(p0, "numSms")), 132);
    json_t *cov = json_object_get(json_object_get(r, "trainprof"), "coverage");
    ck_assert_int_eq(json_integer_value(json_object_get(cov, "kernels_seen_by_cupti")), 1);
    ck_assert(num(json_object_get(cov, "ratio")) == 1.0);

    json_t *events = json_object_get(r, "traceEvents");
    json_t *k = find_event(events, "X", "sgemm_kernel", 7);
    ck_assert_ptr_nonnull(k);
    ck_assert_str_eq(json_string_value(json_object_get(k, "cat")), "kernel");
    ck_assert_int_eq(json_integer_value(json_object_get(k, "pid")), 0);
    json_t *ka = args_of(k);
    ck_assert_int_eq(json_integer_value(json_object_get(ka, "stream")), 7);
    ck_assert_int_eq(json_integer_value(json_object_get(ka, "correlation")), 77);
    ck_assert_int_eq(json_integer_value(json_object_get(ka, "External id")), (1ll << 32) + 5);
    ck_assert_int_eq(json_integer_value(json_object_get(ka, "shared memory")), 49024);
    ck_assert_int_eq(json_integer_value(json_object_get(ka, "est. achieved occupancy %")), 25);
    ck_assert(num(json_object_get(ka, "blocks per SM")) == 2.0);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(ka, "grid"), 0)), 264);
    /* the launch: no "stream" key, an ac2g start at its ts; the kernel's end */
    json_t *l = find_event(events, "X", "cuLaunchKernel", PID);
    ck_assert_ptr_nonnull(l);
    ck_assert_ptr_null(json_object_get(args_of(l), "stream"));
    ck_assert_int_eq(json_integer_value(json_object_get(args_of(l), "External id")), (1ll << 32) + 5);
    json_t *s = find_event(events, "s", "ac2g", PID), *f = find_event(events, "f", "ac2g", 7);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "id")), 77);
    ck_assert_int_eq(json_integer_value(json_object_get(f, "id")), 77);
    ck_assert(num(json_object_get(s, "ts")) == num(json_object_get(l, "ts")));
    ck_assert(num(json_object_get(f, "ts")) == num(json_object_get(k, "ts")));
    ck_assert_str_eq(json_string_value(json_object_get(f, "bp")), "e");
    json_t *m = find_event(events, "X", "Memcpy HtoD (Pageable -> Device)", 7);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(json_string_value(json_object_get(m, "cat")), "gpu_memcpy");
    ck_assert(num(json_object_get(args_of(m), "memory bandwidth (GB/s)")) == 4.0);
    /* the device's process is labelled GPU 0, its stream named */
    json_t *lab = NULL, *tn = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        if (json_integer_value(json_object_get(e, "pid")) != 0)
            continue;
        const char *n = json_string_value(json_object_get(e, "name"));
        if (!strcmp(n, "process_labels"))
            lab = e;
        if (!strcmp(n, "thread_name"))
            tn = e;
    }
    ck_assert_ptr_nonnull(lab);
    ck_assert_str_eq(json_string_value(json_object_get(args_of(lab), "labels")), "GPU 0");
    ck_assert_ptr_nonnull(tn);
    ck_assert_str_eq(json_string_value(json_object_get(args_of(tn), "name")), "stream 7 ");
    json_decref(r);
    free(text);
}
END_TEST

START_TEST(test_no_overwrite)
{
    char p0[4096], p1[256];
    setup_window(1);
    ck_assert_int_eq(run_window(1, feed_sample), 0);
    snprintf(p0, sizeof p0, "%s", saved.trace);
    setup_window(1);
    ck_assert_int_eq(run_window(1, feed_sample), 0);
    snprintf(p1, sizeof p1, "%s/rank3.5-1.pt.trace.json.gz", folder);
    ck_assert_str_eq(saved.trace, p1);
    char *text = load_text(p1, 1);
    check_sample(text);
    free(text);
    text = load_text(p0, 1);
    ck_assert_ptr_nonnull(strstr(text, "\"traceName\": \"rank3.5.pt.trace.json.gz\""));
    free(text);
}
END_TEST

START_TEST(test_unwritable_folder)
{
    setup_window(1);
    char file[128], bad[200];
    snprintf(file, sizeof file, "%s/file", root);
    FILE *f = fopen(file, "w");
    fclose(f);
    snprintf(bad, sizeof bad, "%s/traces", file);
    win.trace_folder = bad;
    const struct tp_handler *h = tp_handler_find("chrome");
    ck_assert_ptr_null(h->open(&win));
}
END_TEST

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *const bench_kernels[] = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "ampere_sgemm_128x64_tn",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
    "elementwise_add_kernel",
};

/* Names as the drain hands them over: interned ones (the same pointer,
 * the same text, again and again) and ones written into one buffer that
 * holds another name at the next event (a device copy's "Memcpy ..."); the
 * handler keeps names' texts by pointer (chrome.c tp_chrome_text), so each
 * event must still carry its own name, of every length (past the longest
 * kept, CHROME_TEXT_MAX), escaped. */
#define NAMES_EVENTS 600

static char names_buf[3000], kernels_buf[3000];

static const char *names_expect(int i, int kernel, char *out, size_t outsz)
{
    if (i % 5 == 4)                    /* interned: one pointer, one text */
        return kernel ? bench_kernels[i % 4] : "cudaLaunchKernel";
    size_t len = (size_t)(5 + (i * 37) % (kernel ? 2100 : 60));
    int k = snprintf(out, outsz, "%s%d\"\x01<", kernel ? "k" : "n", i);
    for (size_t x = (size_t)k; x < len && x + 1 < outsz; x++)
        out[x] = (char)('a' + (x + (size_t)i) % 26);
    out[len < outsz ? len : outsz - 1] = '\0';
    return out;
}

static void feed_names(const struct tp_handler *h, void *st)
{
    struct item it;
    int64_t t = START;
    for (int i = 0; i < NAMES_EVENTS; i++) {
        struct tp_event *ev = mk(&it, TP_REC_LAUNCH, PID, t, 1000);
        ev->name = names_expect(i, 0, names_buf, sizeof names_buf);
        ev->kernel = names_expect(i, 1, kernels_buf, sizeof kernels_buf);
        ev->layer = TP_LAYER_RUNTIME;
        ev->correlation = (uint64_t)i + 1;
        ev->external_id = (uint64_t)(i / 3) + 1;    /* runs of 3: the kept digits */
        h->event(st, ev);
        t += 5000;
    }
}

START_TEST(test_names_from_one_buffer)
{
    setup_window(1);
    win.steps = NULL;
    win.steps_recorded = 0;
    ck_assert_int_eq(run_window(1, feed_names), 0);
    char *text = load_text(saved.trace, 1);
    json_t *r = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(r);
    json_t *events = json_object_get(r, "traceEvents");
    int seen = 0;
    for (size_t k = 0; k < json_array_size(events); k++) {
        json_t *e = json_array_get(events, k);
        json_t *args = json_object_get(e, "args");
        json_t *corr = json_object_get(args, "correlation");
        if (!json_is_integer(corr))
            continue;
        int i = (int)json_integer_value(corr) - 1;
        ck_assert_int_eq(i, seen);
        char want[3000];
        ck_assert_str_eq(json_string_value(json_object_get(e, "name")), names_expect(i, 0, want, sizeof want));
        ck_assert_str_eq(json_string_value(json_object_get(args, "kernel")), names_expect(i, 1, want, sizeof want));
        ck_assert_int_eq(json_integer_value(json_object_get(args, "External id")), i / 3 + 1);
        seen++;
    }
    ck_assert_int_eq(seen, NAMES_EVENTS);
    json_decref(r);
    free(text);
}
END_TEST


/* Events of the throughput test: a million, or 50,000 with TP_TEST_QUICK
 * set (scripts/dev/check-arm64 under qemu, where a million take a minute). */
static int bench_events(void)
{
    return getenv("TP_TEST_QUICK") ? 50000 : 1000000;
}

static void feed_bench(const struct tp_handler *h, void *st)
{
    struct item it[2];
    int64_t t = START;
    for (int i = 0, n = bench_events(); i < n; i++) {
        struct item *x = &it[i & 1];
        struct tp_event *ev;
        if (i % 4 == 3) {
            ev = mk(x, TP_REC_API, PID + (i & 7), t, 1200 + i % 531);
            ev->name = "cudaMemcpyAsync";
        ev->form = TP_FORM_COPY;
            x->rec.u.api.bytes = 4096;
            x->rec.u.api.copy_kind = 1;
            x->rec.u.api.stream = 7;
        } else {
            ev = mk(x, TP_REC_LAUNCH, PID + (i & 7), t, 2100 + i % 977);
            ev->name = "cudaLaunchKernel";
            ev->kernel = bench_kernels[i % 4];
            x->rec.u.launch.grid_x = (uint32_t)(1 + i % 4096);
            x->rec.u.launch.grid_y = x->rec.u.launch.grid_z = 1;
            x->rec.u.launch.block_x = 256;
            x->rec.u.launch.block_y = x->rec.u.launch.block_z = 1;
            x->rec.u.launch.stream = 7;
        }
        ev->layer = TP_LAYER_RUNTIME;
        ev->cbid = 211;
        ev->correlation = (uint64_t)i + 1;
        h->event(st, ev);
        t += 2500 + i % 1013;
    }
}

START_TEST(test_throughput)
{
    for (int gz = 1; gz >= 0; gz--) {
        setup_window(gz);
        win.overwrite = 1;
        double t0 = now_s();
        ck_assert_int_eq(run_window(gz, feed_bench), 0);
        double dt = now_s() - t0;
        struct stat st;
        ck_assert_int_eq(stat(saved.trace, &st), 0);
        fprintf(stderr, "chrome handler throughput (%s): %.2f M events/s, %.1f MB file\n",
                gz ? "gzip level 1" : "plain", bench_events() / dt / 1e6, (double)st.st_size / 1e6);
        unlink(saved.trace);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("chrome");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, test_handler_table);
    tcase_add_test(tc, test_trace_gzip);
    tcase_add_test(tc, test_trace_plain);
    tcase_add_test(tc, test_empty_window_and_no_steps);
    tcase_add_test(tc, test_clock_metadata);
    tcase_add_test(tc, test_distributed_info_only_when_known);
    tcase_add_test(tc, test_kineto_metadata);
    tcase_add_test(tc, test_no_flops_no_counter_tracks);
    tcase_add_test(tc, test_memory_events);
    tcase_add_test(tc, test_memory_owners);
    tcase_add_test(tc, test_device_side);
    tcase_add_test(tc, test_no_overwrite);
    tcase_add_test(tc, test_unwritable_folder);
    tcase_add_test(tc, test_names_from_one_buffer);
    tcase_add_test(tc, test_throughput);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
