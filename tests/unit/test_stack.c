/*
 * test_stack.c - host call stacks: symbolisation of known addresses (an
 * exported zlib function, a static function of this binary from .symtab,
 * module+offset where no symbol exists),
 * the per-address cache, name sanitising, STACK records gathered back into
 * a stack (continuations, tags, drops), capture through libunwind; and the
 * stacks handler fed synthetic host and device events: exact folded lines,
 * values aggregated before rounding, self time of library calls, GPU time
 * under the launch's stack, no files without frames.
 */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "collector/common/elfsym.h"
#include "collector/modules/stack.h"
#include "collector/device/cupti.h"
#include "collector/device/props.h"
#include "handlers/handler.h"
#include "tests/unit/tp_test.h"

/* ---- symbols ------------------------------------------------------------- */

__attribute__((noinline)) static int local_function(int x)
{
    return x * 3 + 1;
}

START_TEST(symbol_exported)
{
    /* a return address inside inflateEnd: looked up at ip - 1 */
    uint64_t ip = (uint64_t)(uintptr_t)&inflateEnd + 1;
    ck_assert_str_eq(tp_stack_symbol(ip), "inflateEnd");
    tp_stack_reset();
}
END_TEST

/* A function without a dynamic symbol (this test is not linked with
 * -rdynamic) is named from the file's .symtab, at any address inside it. */
START_TEST(symbol_static)
{
    uintptr_t fn = (uintptr_t)&local_function;
    Dl_info info;
    ck_assert(dladdr((void *)fn, &info));
    ck_assert_str_eq(tp_stack_symbol(fn + 1), "local_function");
    ck_assert_str_eq(tp_stack_symbol(fn + 5), "local_function");
    uintptr_t start = 0;
    ck_assert_str_eq(tp_elfsym_lookup(info.dli_fname, (uintptr_t)info.dli_fbase, fn + 3, &start),
                     "local_function");
    ck_assert_uint_eq(start, fn);
    /* an unreadable file or an address in no function: no name */
    ck_assert_ptr_null(tp_elfsym_lookup("/nonexistent/lib.so", 0x1000, 0x1234, NULL));
    ck_assert_ptr_null(tp_elfsym_lookup(info.dli_fname, (uintptr_t)info.dli_fbase,
                                        (uintptr_t)info.dli_fbase + 1, NULL));
    ck_assert_int_eq(local_function(1), 4);
    tp_stack_reset();
}
END_TEST

/* Frames of objects without any symbol for them (a stripped libc's static
 * functions on Debian) are named "module+0xstart". */
START_TEST(symbol_function_start)
{
    ck_assert_int_eq(tp_stack_init(), 0);
    uint64_t ips[64];
    int n = tp_stack_capture(ips, 64);
    ck_assert_int_gt(n, 0);   /* frames outside this binary, which holds the collector */
    for (int i = 0; i < n; i++) {
        Dl_info info;
        const char *got = tp_stack_symbol(ips[i]);
        ck_assert(got && got[0]);
        if (!dladdr((void *)(uintptr_t)(ips[i] - 1), &info) || info.dli_sname ||
            tp_elfsym_lookup(info.dli_fname, (uintptr_t)info.dli_fbase, (uintptr_t)ips[i] - 1, NULL))
            continue;
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        ck_assert_msg(strncmp(got, base, strlen(base)) == 0 && strncmp(got + strlen(base), "+0x", 3) == 0,
                      "%s", got);
        unsigned long long off = strtoull(got + strlen(base) + 3, NULL, 16);
        ck_assert_uint_le(off, ips[i] - 1 - (uintptr_t)info.dli_fbase);
    }
    tp_stack_reset();
}
END_TEST

START_TEST(symbol_cache)
{
    uint64_t a = (uint64_t)(uintptr_t)&inflateEnd + 1, b = (uint64_t)(uintptr_t)&deflateEnd + 1;
    uint64_t lookups, misses;
    const char *x = tp_stack_symbol(a);
    const char *y = tp_stack_symbol(b);
    for (int i = 0; i < 100; i++) {
        ck_assert_ptr_eq(tp_stack_symbol(a), x);
        ck_assert_ptr_eq(tp_stack_symbol(b), y);
    }
    tp_stack_cache_stats(&lookups, &misses);
    ck_assert_uint_eq(lookups, 202);
    ck_assert_uint_eq(misses, 2);
    /* enough addresses to grow the table several times: all found again */
    for (uint64_t i = 0; i < 5000; i++)
        ck_assert_ptr_nonnull(tp_stack_symbol(0x1000 + 16 * i));
    ck_assert_ptr_eq(tp_stack_symbol(a), x);
    ck_assert_str_eq(tp_stack_symbol(0x1000 + 16 * 77), "0x14cf");
    tp_stack_cache_stats(&lookups, &misses);
    ck_assert_uint_eq(misses, 5002);
    tp_stack_reset();
}
END_TEST

START_TEST(sanitize)
{
    char s[] = "a;b\nc\td;;e\x7f";
    tp_stack_sanitize(s);
    ck_assert_str_eq(s, "a:b c d::e ");
}
END_TEST

/* ---- records -> stack ------------------------------------------------------ */

static void stack_records(struct tp_record *r, const uint64_t *ips, int n, uint32_t tag, int *nrec)
{
    *nrec = 0;
    for (int i = 0; i < n; i += TP_STACK_PER_REC) {
        int k = n - i < TP_STACK_PER_REC ? n - i : TP_STACK_PER_REC;
        memset(&r[*nrec], 0, sizeof *r);
        r[*nrec].kind = TP_REC_STACK;
        r[*nrec].api = (uint16_t)(k | (i == 0 ? TP_STACK_FIRST : 0));
        r[*nrec].status = (int32_t)tag;
        memcpy(&r[*nrec].t0, &ips[i], (size_t)k * 8);
        (*nrec)++;
    }
}

START_TEST(gather_take)
{
    static struct tp_stack_scratch s;
    uint64_t ips[10];
    for (int i = 0; i < 10; i++)
        ips[i] = 0x5000 + 0x10 * (uint64_t)i;
    struct tp_record r[4], call;
    int nrec;
    stack_records(r, ips, 10, 1234, &nrec);
    ck_assert_int_eq(nrec, 2);
    int owner, other;
    memset(&call, 0, sizeof call);
    call.kind = TP_REC_API;
    call.t0 = (1ull << 40) + 1234;
    for (int i = 0; i < nrec; i++)
        tp_stack_gather(&s, &owner, &r[i]);
    int n = -1;
    const char *const *f = tp_stack_take(&s, &owner, &call, &n);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(n, 10);
    ck_assert_str_eq(f[0], "0x508f");      /* root first: the outermost, ips[9] - 1 */
    ck_assert_str_eq(f[9], "0x4fff");
    /* the same stack again: the same array */
    for (int i = 0; i < nrec; i++)
        tp_stack_gather(&s, &owner, &r[i]);
    ck_assert_ptr_eq(tp_stack_take(&s, &owner, &call, &n), f);
    /* taken once: the next record has none */
    ck_assert_ptr_null(tp_stack_take(&s, &owner, &call, &n));
    ck_assert_int_eq(n, 0);
    /* another thread's record, or a different tag (the call was dropped) */
    for (int i = 0; i < nrec; i++)
        tp_stack_gather(&s, &owner, &r[i]);
    ck_assert_ptr_null(tp_stack_take(&s, &other, &call, &n));
    for (int i = 0; i < nrec; i++)
        tp_stack_gather(&s, &owner, &r[i]);
    call.t0 = 1235;
    ck_assert_ptr_null(tp_stack_take(&s, &owner, &call, &n));
    /* a continuation whose first record was lost is dropped */
    call.t0 = 1234;
    tp_stack_gather(&s, &owner, &r[1]);
    ck_assert_ptr_null(tp_stack_take(&s, &owner, &call, &n));
    /* a new stack replaces one never taken */
    stack_records(r, ips + 3, 4, 1234, &nrec);
    tp_stack_gather(&s, &owner, &r[0]);
    stack_records(r, ips, 2, 1234, &nrec);
    tp_stack_gather(&s, &owner, &r[0]);
    f = tp_stack_take(&s, &owner, &call, &n);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(f[0], "0x500f");
    tp_stack_reset();
}
END_TEST

START_TEST(corr_map)
{
    static const char *const a[] = { "main", "f" }, *const b[] = { "main", "g", "h" };
    struct tp_stack_corr *m = NULL;
    int n = -1;
    ck_assert_ptr_null(tp_stack_corr_get(m, 5, &n));
    ck_assert_int_eq(n, 0);
    tp_stack_corr_put(&m, 0, a, 2);                  /* id 0 is "none" */
    ck_assert_ptr_null(m);
    /* enough ids to grow the table several times */
    for (uint64_t c = 1; c <= 3000; c++)
        tp_stack_corr_put(&m, c * 7919, c % 2 ? a : b, c % 2 ? 2 : 3);
    for (uint64_t c = 1; c <= 3000; c++) {
        ck_assert_ptr_eq(tp_stack_corr_get(m, c * 7919, &n), c % 2 ? a : b);
        ck_assert_int_eq(n, c % 2 ? 2 : 3);
    }
    ck_assert_ptr_null(tp_stack_corr_get(m, 7920, &n));
    ck_assert_ptr_null(tp_stack_corr_get(m, 0, &n));
    tp_stack_corr_put(&m, 7919, b, 3);               /* the last put wins */
    ck_assert_ptr_eq(tp_stack_corr_get(m, 7919, &n), b);
    ck_assert_int_eq(n, 3);
    tp_stack_corr_free(m);
}
END_TEST

__attribute__((noinline)) static int capture_here(uint64_t *ips, int max)
{
    int n = tp_stack_capture(ips, max);
    __asm__ volatile("" ::: "memory");
    return n;
}

START_TEST(capture)
{
    uint64_t ips[TP_STACK_MAX];
    ck_assert_int_eq(tp_stack_capture(ips, 8), 0);    /* before init: nothing */
    ck_assert_int_eq(tp_stack_init(), 0);
    ck_assert(tp_stack_on());
    /* frames of this binary (ours here) are skipped up to the first outside
     * it: libc's, which called main */
    int n = capture_here(ips, TP_STACK_MAX);
    ck_assert_int_ge(n, 1);
    Dl_info info;
    ck_assert(dladdr((void *)(uintptr_t)(ips[0] - 1), &info));
    ck_assert_msg(strstr(info.dli_fname, "libc.so") != NULL, "%s", info.dli_fname);
    ck_assert_int_eq(capture_here(ips, 1), 1);
}
END_TEST

/* ---- the stacks handler ------------------------------------------------------ */

static char root[64], reports[128];
static struct tp_window win;
static struct tp_saved saved;     /* what the handlers saved */

static void setup_window(void)
{
    tp_test_mkdtemp(root, sizeof root, "stacks");
    snprintf(reports, sizeof reports, "%s/run/reports", root);
    memset(&win, 0, sizeof win);
    memset(&saved, 0, sizeof saved);
    win.reports_folder = reports;
    win.start_ns = 1000000000000LL;
    snprintf(saved.trace, sizeof saved.trace, "%s/run/traces/rank0.4.pt.trace.json.gz", root);
}

static void teardown_window(void)
{
    tp_test_rmtree(root);
}

static struct tp_record hrec[64];
static int n_hrec;

static void host(const struct tp_handler *h, void *st, int tid, const char *name, int layer,
                 int64_t ts, int64_t dur, uint64_t corr, const char *const *frames, int nf)
{
    struct tp_record *r = &hrec[n_hrec++ % 64];
    memset(r, 0, sizeof *r);
    r->kind = strstr(name, "Launch") ? TP_REC_LAUNCH : TP_REC_API;
    struct tp_event ev;
    memset(&ev, 0, sizeof ev);
    ev.rec = r;
    ev.name = name;
    ev.pid = 1;
    ev.tid = tid;
    ev.layer = (uint8_t)layer;
    ev.ts_ns = win.start_ns + ts;
    ev.dur_ns = dur;
    ev.correlation = corr;
    ev.external_id = layer == TP_LAYER_LIBRARY ? corr : 0;
    ev.frames = frames;
    ev.n_frames = nf;
    h->event(st, &ev);
}

static void device(const struct tp_handler *h, void *st, int kind, const char *name, int64_t dur,
                   uint64_t corr, int flow, uint64_t ext)
{
    static struct tp_device_record d;
    memset(&d, 0, sizeof d);
    d.kind = (uint8_t)kind;
    struct tp_event ev;
    memset(&ev, 0, sizeof ev);
    ev.dev = &d;
    ev.name = name;
    ev.dur_ns = dur;
    ev.correlation = corr;
    ev.flow = (uint8_t)flow;
    ev.external_id = ext;
    h->event(st, &ev);
}

static char *slurp(const char *ext)
{
    char path[512];
    snprintf(path, sizeof path, "%s/rank0.4.pt.trace.%s", reports, ext);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char text[2][1 << 14];
    static int which;
    char *t = text[which++ & 1];
    size_t k = fread(t, 1, sizeof text[0] - 1, f);
    t[k] = 0;
    fclose(f);
    return t;
}

static const char *const f_fwd[] = { "main", "train_step", "forward" };
static const char *const f_gemm[] = { "main", "train_step", "linear" };
static const char *const f_inner[] = { "main", "train_step", "linear", "libcublas.so+0x10" };
static const char *const f_bad[] = { "main", "a;b\nc", "copy" };

static void feed(const struct tp_handler *h, void *st)
{
    /* three launches of 1.4 us: 4.2 us -> 4 (rounded each: 3) */
    for (int i = 0; i < 3; i++)
        host(h, st, 10, "cudaLaunchKernel", TP_LAYER_RUNTIME, 100000 + 10000 * i, 1400, 11 + (uint64_t)i, f_fwd, 3);
    /* a GEMM of 10 us with a nested launch of 3 us on its thread (written
     * first, as the buffer has it) and one on another thread, not nested */
    host(h, st, 10, "cudaLaunchKernel", TP_LAYER_RUNTIME, 2000, 3000, 21, f_inner, 4);
    host(h, st, 10, "cublasSgemm_v2", TP_LAYER_LIBRARY, 0, 10000, 30, f_gemm, 3);
    host(h, st, 11, "cudaLaunchKernel", TP_LAYER_RUNTIME, 1000, 2600, 22, f_inner, 4);
    /* 0.4 us: rounds to 0, omitted */
    host(h, st, 10, "cudaStreamSynchronize", TP_LAYER_RUNTIME, 200000, 400, 40, f_fwd, 3);
    /* sanitised frames; a call without frames is not a line */
    host(h, st, 10, "cudaMemcpy", TP_LAYER_RUNTIME, 300000, 2500, 50, f_bad, 3);
    host(h, st, 10, "cudaMemcpy", TP_LAYER_RUNTIME, 400000, 9000, 51, NULL, 0);
}

START_TEST(handler_host)
{
    setup_window();
    const struct tp_handler *h = tp_handler_find("stacks");
    ck_assert_ptr_nonnull(h);
    void *st = h->open(&win);
    ck_assert_ptr_nonnull(st);
    feed(h, st);
    ck_assert_int_eq(h->close(st, &win, &saved), 0);
    const char *t = slurp("stacks.txt");
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t,
        "main;a:b c;copy;cudaMemcpy 3\n"
        "main;train_step;forward;cudaLaunchKernel 4\n"
        "main;train_step;linear;cublasSgemm_v2 7\n"
        "main;train_step;linear;libcublas.so+0x10;cudaLaunchKernel 6\n");
    ck_assert_ptr_null(slurp("stacks.gpu.txt"));     /* no device time */
    teardown_window();
}
END_TEST

START_TEST(handler_gpu)
{
    setup_window();
    win.gpu = 1;
    const struct tp_handler *h = tp_handler_find("stacks");
    void *st = h->open(&win);
    feed(h, st);
    device(h, st, TP_DEVICE_KERNEL, "kern_a", 5500, 11, 1, 0);
    device(h, st, TP_DEVICE_KERNEL, "kern_a", 5500, 12, 1, 0);
    device(h, st, TP_DEVICE_KERNEL, "kern_b", 700, 13, 1, 0);          /* 0.7 us -> 1 */
    device(h, st, TP_DEVICE_KERNEL, "gemm_k", 8000, 21, 1, 30);        /* its launch wins */
    device(h, st, TP_DEVICE_KERNEL, "gemm_k2", 4000, 999, 0, 30);      /* only the External id */
    device(h, st, TP_DEVICE_MEMCPY, "Memcpy DtoH (Device -> Pageable)", 2000, 50, 1, 0);
    device(h, st, TP_DEVICE_KERNEL, "lost", 9000, 998, 0, 0);          /* unlinked */
    device(h, st, TP_DEVICE_SYNC, "Stream Sync", 9000, 40, 1, 0);      /* not device work */
    ck_assert_int_eq(h->close(st, &win, &saved), 0);
    const char *g = slurp("stacks.gpu.txt");
    ck_assert_ptr_nonnull(g);
    ck_assert_str_eq(g,
        "main;a:b c;copy;cudaMemcpy 2\n"
        "main;train_step;forward;cudaLaunchKernel;kern_a 11\n"
        "main;train_step;forward;cudaLaunchKernel;kern_b 1\n"
        "main;train_step;linear;cublasSgemm_v2;gemm_k2 4\n"
        "main;train_step;linear;libcublas.so+0x10;cudaLaunchKernel;gemm_k 8\n");
    /* the host file is unchanged by device events */
    ck_assert_ptr_nonnull(strstr(slurp("stacks.txt"), "main;train_step;linear;cublasSgemm_v2 7\n"));
    teardown_window();
}
END_TEST

START_TEST(handler_no_frames)
{
    setup_window();
    win.gpu = 1;
    const struct tp_handler *h = tp_handler_find("stacks");
    void *st = h->open(&win);
    host(h, st, 10, "cudaLaunchKernel", TP_LAYER_RUNTIME, 0, 5000, 1, NULL, 0);
    device(h, st, TP_DEVICE_KERNEL, "k", 5000, 1, 1, 0);
    ck_assert_int_eq(h->close(st, &win, &saved), 0);
    ck_assert_ptr_null(slurp("stacks.txt"));
    ck_assert_ptr_null(slurp("stacks.gpu.txt"));
    ck_assert_int_ne(access(reports, F_OK), 0);      /* not even the folder */
    teardown_window();
}
END_TEST

START_TEST(handler_no_trace)
{
    setup_window();
    saved.trace[0] = 0;
    const struct tp_handler *h = tp_handler_find("stacks");
    void *st = h->open(&win);
    feed(h, st);
    ck_assert_int_eq(h->close(st, &win, &saved), 0);
    ck_assert_int_ne(access(reports, F_OK), 0);
    teardown_window();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stack");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, symbol_exported);
    tcase_add_test(tc, symbol_static);
    tcase_add_test(tc, symbol_function_start);
    tcase_add_test(tc, symbol_cache);
    tcase_add_test(tc, sanitize);
    tcase_add_test(tc, gather_take);
    tcase_add_test(tc, corr_map);
    tcase_add_test(tc, capture);
    tcase_add_test(tc, handler_host);
    tcase_add_test(tc, handler_gpu);
    tcase_add_test(tc, handler_no_frames);
    tcase_add_test(tc, handler_no_trace);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tp_test_run(suite());
}
