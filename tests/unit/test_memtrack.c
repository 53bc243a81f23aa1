/*
 * test_memtrack.c - the device-memory table (collector/modules/memtrack.c), called
 * directly: totals and peaks of a known call sequence, what each call writes
 * into a record, window snapshots, and threads allocating at once.
 *
 * DESIGN
 * Addresses are made-up numbers: the table never dereferences them, and no
 * libcuda is loaded in this process, so devices are what the test passes.
 */
#include "collector/common/clock.h"
#include "collector/modules/memtrack.h"
#include "collector/contract/sink.h"

#include "tp_test.h"

#include <pthread.h>
#include <stdint.h>

/* an allocation with no call site known */
#define TP_NO_FROM ((struct tp_mem_from){ 0, 0, 0, 0 })

/* allocations from three call sites: the program's, one inside a library
 * call (outer), and ncclMemAlloc's own */
#define SITE_A 0x401000u
#define SITE_B 0x402000u
static struct tp_mem_from from(uint64_t site, unsigned outer, unsigned api, int oom)
{
    return (struct tp_mem_from){ site, (uint16_t)outer, (uint16_t)api, (uint8_t)oom };
}

static const struct tp_mem_origin_info *origin_of(const struct tp_mem_origin_info *v, int n, uint64_t site,
                                                  unsigned outer, int device)
{
    for (int i = 0; i < n; i++)
        if (v[i].site == site && v[i].outer == outer && v[i].device == device)
            return &v[i];
    return NULL;
}

static void setup(void)
{
    tp_clock_init();
    tp_mem_reset();
}

static uint64_t total_of(int device, int mclass)
{
    uint64_t t, p;
    tp_mem_totals(device, mclass, &t, &p);
    return t;
}

static uint64_t peak_of(int device, int mclass)
{
    uint64_t t, p;
    tp_mem_totals(device, mclass, &t, &p);
    return p;
}

START_TEST(test_sequence_totals_and_peaks)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0x1000, 100, 0, 1, TP_NO_FROM);
    ck_assert_uint_eq(r.u.mem.addr, 0x1000);
    ck_assert_uint_eq(r.u.mem.bytes, 100);
    ck_assert_uint_eq(r.u.mem.total, 100);
    ck_assert_int_eq(r.u.mem.device, 0);
    ck_assert_uint_eq(r.u.mem.flags, 0);
    tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0x2000, 300, 0, 1, TP_NO_FROM);
    ck_assert_uint_eq(r.u.mem.total, 400);
    tp_mem_alloc(&r, TP_MEM_DEVICE, 1, 0x9000, 50, 0, 1, TP_NO_FROM);     /* second device */
    ck_assert_uint_eq(r.u.mem.total, 50);
    ck_assert_int_eq(r.u.mem.device, 1);

    tp_mem_free(&r, TP_MEM_DEVICE, 0, 0x1000, 0, 1);
    ck_assert_uint_eq(r.u.mem.bytes, 100);     /* the size it was allocated with */
    ck_assert_uint_eq(r.u.mem.total, 300);
    ck_assert_uint_eq(r.u.mem.flags, 0);

    /* a free of an address never seen */
    tp_mem_free(&r, TP_MEM_DEVICE, 0, 0x5555, 0, 1);
    ck_assert_uint_eq(r.u.mem.flags, TP_MEM_UNKNOWN);
    ck_assert_uint_eq(r.u.mem.bytes, 0);
    ck_assert_uint_eq(r.u.mem.total, 300);
    /* cudaFree(NULL) */
    tp_mem_free(&r, TP_MEM_DEVICE, 0, 0, 0, 1);
    ck_assert_uint_eq(r.u.mem.flags, TP_MEM_NOOP);
    ck_assert_uint_eq(r.u.mem.total, 300);
    /* out of memory: the size asked, nothing changes */
    tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0, 1ull << 40, 0, 0, TP_NO_FROM);
    ck_assert_uint_eq(r.u.mem.flags, TP_MEM_FAILED);
    ck_assert_uint_eq(r.u.mem.bytes, 1ull << 40);
    ck_assert_uint_eq(r.u.mem.total, 300);
    /* a failed free keeps the memory */
    tp_mem_free(&r, TP_MEM_DEVICE, 0, 0x2000, 0, 0);
    ck_assert_uint_eq(r.u.mem.flags, TP_MEM_FAILED);
    ck_assert_uint_eq(r.u.mem.total, 300);

    /* VMM: physical memory counts at create/release, handles apart from
     * addresses even when the numbers collide */
    tp_mem_alloc(&r, TP_MEM_DEVICE, 1, 0x2000, 1000, 1, 1, TP_NO_FROM);
    ck_assert_uint_eq(r.u.mem.total, 1050);
    ck_assert_uint_eq(total_of(0, TP_MEM_DEVICE), 300);
    tp_mem_free(&r, TP_MEM_DEVICE, 0, 0x2000, 1, 1);
    ck_assert_int_eq(r.u.mem.device, 1);       /* from the table, not the caller */
    ck_assert_uint_eq(r.u.mem.bytes, 1000);
    ck_assert_uint_eq(total_of(1, TP_MEM_DEVICE), 50);
    ck_assert_uint_eq(peak_of(1, TP_MEM_DEVICE), 1050);
    ck_assert_uint_eq(total_of(0, TP_MEM_DEVICE), 300);

    /* host-pinned and managed are counted apart; host is device -1 */
    tp_mem_alloc(&r, TP_MEM_HOST, 0, 0x7000, 64, 0, 1, TP_NO_FROM);
    ck_assert_int_eq(r.u.mem.device, -1);
    ck_assert_uint_eq(r.u.mem.total, 64);
    tp_mem_alloc(&r, TP_MEM_MANAGED, 0, 0x8000, 128, 0, 1, TP_NO_FROM);
    ck_assert_uint_eq(r.u.mem.total, 128);
    ck_assert_uint_eq(total_of(0, TP_MEM_DEVICE), 300);
    tp_mem_free(&r, TP_MEM_HOST, -1, 0x7000, 0, 1);
    ck_assert_uint_eq(total_of(-1, TP_MEM_HOST), 0);
    ck_assert_uint_eq(peak_of(-1, TP_MEM_HOST), 64);

    tp_mem_free(NULL, TP_MEM_DEVICE, 0, 0x2000, 0, 1);
    tp_mem_free(NULL, TP_MEM_DEVICE, 0, 0x9000, 0, 1);
    tp_mem_free(NULL, TP_MEM_MANAGED, 0, 0x8000, 0, 1);
    ck_assert_uint_eq(total_of(0, TP_MEM_DEVICE), 0);
    ck_assert_uint_eq(total_of(1, TP_MEM_DEVICE), 0);
    ck_assert_uint_eq(total_of(0, TP_MEM_MANAGED), 0);
    ck_assert_uint_eq(peak_of(0, TP_MEM_DEVICE), 400);
}
END_TEST

/* Many live addresses: the table grows and deletion keeps every entry
 * reachable (backward shift). */
START_TEST(test_many_addresses)
{
    const uint64_t n = 20000;
    for (uint64_t i = 1; i <= n; i++)
        tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, i * 256, i, 0, 1, TP_NO_FROM);
    ck_assert_uint_eq(total_of(0, TP_MEM_DEVICE), n * (n + 1) / 2);
    uint64_t expect = n * (n + 1) / 2;
    for (uint64_t i = 1; i <= n; i += 2) {
        struct tp_record r;
        memset(&r, 0, sizeof r);
        tp_mem_free(&r, TP_MEM_DEVICE, 0, i * 256, 0, 1);
        ck_assert_uint_eq(r.u.mem.bytes, i);
        expect -= i;
    }
    ck_assert_uint_eq(total_of(0, TP_MEM_DEVICE), expect);
    for (uint64_t i = 2; i <= n; i += 2) {
        struct tp_record r;
        memset(&r, 0, sizeof r);
        tp_mem_free(&r, TP_MEM_DEVICE, 0, i * 256, 0, 1);
        ck_assert_uint_eq(r.u.mem.bytes, i);
        ck_assert_uint_eq(r.u.mem.flags, 0);
    }
    ck_assert_uint_eq(total_of(0, TP_MEM_DEVICE), 0);
}
END_TEST

static const struct tp_mem_usage *find(const struct tp_mem_usage *u, int n, int device, int mclass)
{
    for (int i = 0; i < n; i++)
        if (u[i].device == device && u[i].mclass == mclass)
            return &u[i];
    return NULL;
}

START_TEST(test_windows)
{
    struct tp_clock_map map = tp_clock_map_now();
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x100, 1000, 0, 1, TP_NO_FROM);     /* before window 1 */
    tp_mem_alloc(NULL, TP_MEM_HOST, 0, 0x200, 10, 0, 1, TP_NO_FROM);
    uint64_t t0 = tp_clock_now();
    tp_mem_window_begin(1, t0);
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x300, 500, 0, 1, TP_NO_FROM);      /* 1500: the peak */
    uint64_t t_peak = tp_clock_now();
    tp_mem_free(NULL, TP_MEM_DEVICE, 0, 0x100, 0, 1);            /* 500 */
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0, 7000, 0, 0, TP_NO_FROM);         /* failed */
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0, 9000, 0, 0, TP_NO_FROM);         /* failed, larger */
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 2, 0x400, 40, 0, 1, TP_NO_FROM);       /* new device in the window */
    tp_mem_window_end(1, tp_clock_now());
    /* between windows: still counted */
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x500, 2000, 0, 1, TP_NO_FROM);     /* 2500: process peak */
    tp_mem_free(NULL, TP_MEM_DEVICE, 0, 0x500, 0, 1);            /* 500 */
    tp_mem_window_begin(2, tp_clock_now());
    tp_mem_free(NULL, TP_MEM_DEVICE, 0, 0x300, 0, 1);            /* 0 */
    tp_mem_window_end(2, tp_clock_now());

    /* window 2 is taken before window 1, as a late flush would */
    struct tp_mem_usage *u = NULL;
    int n = tp_mem_window_take(2, &map, &u);
    ck_assert_int_eq(n, 3);
    const struct tp_mem_usage *d0 = find(u, n, 0, TP_MEM_DEVICE);
    ck_assert_ptr_nonnull(d0);
    ck_assert_uint_eq(d0->start_bytes, 500);
    ck_assert_uint_eq(d0->end_bytes, 0);
    ck_assert_uint_eq(d0->peak_bytes, 500);
    ck_assert_uint_eq(d0->peak_process, 2500);
    ck_assert_uint_eq(d0->allocs, 0);
    ck_assert_uint_eq(d0->frees, 1);
    free(u);

    n = tp_mem_window_take(1, &map, &u);
    ck_assert_int_eq(n, 3);
    /* order: device memory by device, then host */
    ck_assert_int_eq(u[0].device, 0);
    ck_assert_int_eq(u[0].mclass, TP_MEM_DEVICE);
    ck_assert_int_eq(u[1].device, 2);
    ck_assert_int_eq(u[2].mclass, TP_MEM_HOST);
    ck_assert_int_eq(u[2].device, -1);
    d0 = &u[0];
    ck_assert_uint_eq(d0->start_bytes, 1000);
    ck_assert_uint_eq(d0->end_bytes, 500);
    ck_assert_uint_eq(d0->peak_bytes, 1500);
    ck_assert_uint_eq(d0->peak_process, 1500);
    ck_assert_uint_eq(d0->allocs, 1);
    ck_assert_uint_eq(d0->frees, 1);
    ck_assert_uint_eq(d0->failed, 2);
    ck_assert_uint_eq(d0->failed_bytes, 9000);
    int64_t peak_ns = tp_clock_to_unix_ns(&map, t_peak);
    ck_assert(d0->peak_ns > tp_clock_to_unix_ns(&map, t0));
    ck_assert(d0->peak_ns <= peak_ns);
    ck_assert_uint_eq(u[1].start_bytes, 0);
    ck_assert_uint_eq(u[1].peak_bytes, 40);
    ck_assert_uint_eq(u[2].start_bytes, 10);
    ck_assert_uint_eq(u[2].peak_bytes, 10);
    ck_assert(u[2].peak_ns == tp_clock_to_unix_ns(&map, t0));   /* never above start */
    free(u);

    /* taken once */
    ck_assert_int_eq(tp_mem_window_take(1, &map, &u), 0);
    ck_assert_ptr_null(u);
}
END_TEST

#define THREADS 8
#define ROUNDS 20000

static void *churn(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t live[16] = { 0 };
    for (uint64_t i = 0; i < ROUNDS; i++) {
        unsigned k = (unsigned)(i % 16);
        if (live[k])
            tp_mem_free(NULL, TP_MEM_DEVICE, (int)(id % 2), live[k], 0, 1);
        live[k] = ((uint64_t)id << 40) | ((i + 1) << 8);
        tp_mem_alloc(NULL, TP_MEM_DEVICE, (int)(id % 2), live[k], 256 + k, 0, 1, TP_NO_FROM);
    }
    for (unsigned k = 0; k < 16; k++)
        tp_mem_free(NULL, TP_MEM_DEVICE, 0, live[k], 0, 1);
    return NULL;
}

START_TEST(test_threads)
{
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
    for (int w = 0; w < 20; w++) {            /* windows open and close meanwhile */
        tp_mem_window_begin((uint8_t)w, tp_clock_now());
        tp_mem_window_end((uint8_t)w, tp_clock_now());
        struct tp_mem_usage *u = NULL;
        tp_mem_window_take((uint8_t)w, NULL, &u);
        free(u);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_eq(total_of(0, TP_MEM_DEVICE), 0);
    ck_assert_uint_eq(total_of(1, TP_MEM_DEVICE), 0);
    ck_assert_uint_ge(peak_of(0, TP_MEM_DEVICE), 16 * 256);
    ck_assert_uint_le(peak_of(0, TP_MEM_DEVICE), 4ull * 16 * (256 + 15));
}
END_TEST

/* Each (site, outer library call, device) is one call site; frees go back
 * to the allocation's site, wherever they are called from. */
START_TEST(test_ledger_sites)
{
    struct tp_record r;
    tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0x1000, 100, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    uint32_t a = r.u.mem.origin;
    tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0x2000, 300, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    ck_assert_uint_eq(r.u.mem.origin, a);
    tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0x3000, 50, 0, 1,
                 from(SITE_A, TP_OUTER_ncclCommInitRank, TP_API_cuMemAlloc_v2, 0));
    uint32_t b = r.u.mem.origin;
    ck_assert_uint_ne(a, b);
    tp_mem_alloc(&r, TP_MEM_DEVICE, 1, 0x4000, 70, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    ck_assert_uint_ne(r.u.mem.origin, a);      /* another device: another site */
    tp_mem_free(&r, TP_MEM_DEVICE, 0, 0x1000, 0, 1);
    ck_assert_uint_eq(r.u.mem.origin, a);
    ck_assert_uint_eq(r.u.mem.bytes, 100);
    tp_mem_free(&r, TP_MEM_DEVICE, 0, 0xdead, 0, 1);    /* never seen */
    ck_assert_uint_eq(r.u.mem.origin, TP_MEM_NO_ORIGIN);

    struct tp_mem_origin_info *v;
    int n = tp_mem_origins(-1, &v, NULL, NULL);
    ck_assert_int_eq(n, 3);
    const struct tp_mem_origin_info *oa = origin_of(v, n, SITE_A, 0, 0);
    const struct tp_mem_origin_info *ob = origin_of(v, n, SITE_A, TP_OUTER_ncclCommInitRank, 0);
    ck_assert_ptr_nonnull(oa);
    ck_assert_ptr_nonnull(ob);
    ck_assert_uint_eq(oa->live, 300);
    ck_assert_uint_eq(oa->peak, 400);
    ck_assert_uint_eq(oa->allocated, 400);
    ck_assert_uint_eq(oa->allocs, 2);
    ck_assert_uint_eq(oa->frees, 1);
    ck_assert_uint_eq(oa->api, TP_API_cudaMalloc);
    ck_assert_uint_eq(ob->live, 50);
    ck_assert_str_eq(tp_outer_name(ob->outer), "ncclCommInitRank");
    free(v);
}
END_TEST

/* Sites that take turns, and a reset between: each allocation goes to its
 * own site whatever the last one's was (tp_orig_of tries the last
 * allocation's site first). */
START_TEST(test_ledger_sites_alternate)
{
    struct tp_record r;
    uint32_t o[2] = { TP_MEM_NO_ORIGIN, TP_MEM_NO_ORIGIN };
    for (int i = 0; i < 6; i++) {
        int k = i % 2 == 0 || i == 5;   /* A B A B A A */
        tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0x1000 + 0x100 * (uint64_t)i, 10 + (uint64_t)i, 0, 1,
                     from(k ? SITE_A : SITE_B, 0, TP_API_cudaMalloc, 0));
        if (o[k] == TP_MEM_NO_ORIGIN)
            o[k] = r.u.mem.origin;
        ck_assert_uint_eq(r.u.mem.origin, o[k]);
    }
    ck_assert_uint_ne(o[0], o[1]);
    struct tp_mem_origin_info *v;
    int n = tp_mem_origins(-1, &v, NULL, NULL);
    ck_assert_int_eq(n, 2);
    ck_assert_uint_eq(origin_of(v, n, SITE_A, 0, 0)->live, 10 + 12 + 14 + 15);
    ck_assert_uint_eq(origin_of(v, n, SITE_B, 0, 0)->live, 11 + 13);
    free(v);
    /* after a reset the ledger starts empty: B is its first site */
    tp_mem_reset();
    tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0x9000, 5, 0, 1, from(SITE_B, 0, TP_API_cudaMalloc, 0));
    tp_mem_alloc(&r, TP_MEM_DEVICE, 0, 0xa000, 6, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    n = tp_mem_origins(-1, &v, NULL, NULL);
    ck_assert_int_eq(n, 2);
    ck_assert_uint_eq(origin_of(v, n, SITE_B, 0, 0)->live, 5);
    ck_assert_uint_eq(origin_of(v, n, SITE_A, 0, 0)->live, 6);
    free(v);
}
END_TEST

/* What each site held at the last step ends: the ring fills lazily, a
 * site born later held nothing before. */
START_TEST(test_ledger_growth)
{
    tp_mem_step(0);
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x1000, 1000, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    tp_mem_step(1);
    tp_mem_step(2);     /* nothing changed in step 1 */
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x2000, 500, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    tp_mem_step(3);
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x3000, 7, 0, 1, from(SITE_B, 0, TP_API_cudaMalloc, 0));
    tp_mem_free(NULL, TP_MEM_DEVICE, 0, 0x1000, 0, 1);
    struct tp_mem_origin_info *v;
    uint64_t steps;
    int n = tp_mem_origins(-1, &v, NULL, &steps);
    ck_assert_uint_eq(steps, 3);
    const struct tp_mem_origin_info *a = origin_of(v, n, SITE_A, 0, 0), *b = origin_of(v, n, SITE_B, 0, 0);
    ck_assert_uint_eq(a->live, 500);
    ck_assert_uint_eq(a->at_step[0], 1500);    /* end of step 2 (3 completed) */
    ck_assert_uint_eq(a->at_step[1], 1000);    /* end of step 1 */
    ck_assert_uint_eq(a->at_step[2], 1000);    /* end of step 0 */
    ck_assert_uint_eq(a->at_step[3], 0);       /* no such step end */
    ck_assert_uint_eq(b->live, 7);
    ck_assert_uint_eq(b->at_step[0], 0);
    ck_assert_uint_eq(b->at_step[2], 0);
    free(v);
    /* more than 10 steps with no change: every remembered end holds the level */
    tp_mem_step(40);
    n = tp_mem_origins(-1, &v, NULL, &steps);
    a = origin_of(v, n, SITE_A, 0, 0);
    for (int i = 0; i < TP_MEM_GROWTH; i++)
        ck_assert_uint_eq(a->at_step[i], 500);
    free(v);
}
END_TEST

/* A window's starting level per site is kept for the 4 latest windows. */
START_TEST(test_ledger_window_starts)
{
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x1000, 1000, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    tp_mem_window_begin(7, tp_clock_now());
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x2000, 500, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x3000, 9, 0, 1, from(SITE_B, 0, TP_API_cudaMalloc, 0));
    tp_mem_window_end(7, tp_clock_now());
    struct tp_mem_origin_info *v;
    int known;
    int n = tp_mem_origins(7, &v, &known, NULL);
    ck_assert_int_eq(known, 1);
    ck_assert_uint_eq(origin_of(v, n, SITE_A, 0, 0)->wstart, 1000);
    ck_assert_uint_eq(origin_of(v, n, SITE_B, 0, 0)->wstart, 0);
    free(v);
    for (int g = 8; g < 12; g++) {
        tp_mem_window_begin((uint8_t)g, tp_clock_now());
        tp_mem_window_end((uint8_t)g, tp_clock_now());
    }
    n = tp_mem_origins(7, &v, &known, NULL);
    ck_assert_int_eq(known, 0);                 /* window 11 took its slot */
    free(v);
}
END_TEST

/* A burst of failures is one report, taken once it settled, with the
 * levels at its first failure, not at the time it is taken. */
START_TEST(test_ledger_oom_burst)
{
    struct tp_mem_oom o;
    struct tp_mem_origin_info *v;
    tp_mem_step(4);
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0x1000, 1000, 0, 1, from(SITE_A, 0, TP_API_cudaMalloc, 0));
    ck_assert_int_eq(tp_mem_oom_pending(), 0);
    ck_assert_int_lt(tp_mem_oom_take(tp_clock_ns(), 0, &o, &v), 0);
    /* a failure that is not for want of memory is no burst */
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0, 1, 0, 0, from(SITE_B, 0, TP_API_cudaMalloc, 0));
    ck_assert_int_eq(tp_mem_oom_pending(), 0);
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0, 1 << 30, 0, 0, from(SITE_B, 0, TP_API_cudaMalloc, 1));
    ck_assert_int_eq(tp_mem_oom_pending(), 1);
    /* the program frees its cache and retries, which fails again */
    tp_mem_free(NULL, TP_MEM_DEVICE, 0, 0x1000, 0, 1);
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0, 1 << 30, 0, 0, from(SITE_B, 0, TP_API_cudaMalloc, 1));
    ck_assert_int_lt(tp_mem_oom_take(tp_clock_ns(), 60ull * 1000000000u, &o, &v), 0);   /* not settled */
    int n = tp_mem_oom_take(tp_clock_ns(), 0, &o, &v);
    ck_assert_int_ge(n, 2);
    ck_assert_uint_eq(o.bytes, 1u << 30);
    ck_assert_uint_eq(o.failures, 2);
    ck_assert_uint_eq(o.frees_after, 1);
    ck_assert_uint_eq(o.steps, 4);
    ck_assert_uint_eq(o.burst, 1);
    ck_assert_uint_eq(o.from.site, SITE_B);
    ck_assert_uint_eq(origin_of(v, n, SITE_A, 0, 0)->live, 1000);   /* before the free */
    free(v);
    ck_assert_int_eq(tp_mem_oom_pending(), 0);
    ck_assert_int_lt(tp_mem_oom_take(tp_clock_ns(), 0, &o, &v), 0);   /* reported once */
    /* within 5 s of the last failure: the same burst, no second report */
    tp_mem_alloc(NULL, TP_MEM_DEVICE, 0, 0, 1 << 30, 0, 0, from(SITE_B, 0, TP_API_cudaMalloc, 1));
    ck_assert_int_eq(tp_mem_oom_pending(), 0);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("memory");
    TCase *tl = tcase_create("ledger");
    tcase_add_checked_fixture(tl, setup, NULL);
    tcase_add_test(tl, test_ledger_sites);
    tcase_add_test(tl, test_ledger_growth);
    tcase_add_test(tl, test_ledger_window_starts);
    tcase_add_test(tl, test_ledger_oom_burst);
    tcase_add_test(tl, test_ledger_sites_alternate);
    suite_add_tcase(s, tl);
    TCase *tc = tcase_create("memory");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sequence_totals_and_peaks);
    tcase_add_test(tc, test_many_addresses);
    tcase_add_test(tc, test_windows);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
