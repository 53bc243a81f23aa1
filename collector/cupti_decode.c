/*
 * cupti_decode.c - DESIGN: CUPTI's records turned into ours, and the
 * windows taken out of them (flush thread only, no locks).
 *
 * Pending arrays (flush thread only, no locks) are bounded: 1 M device
 * records, 2 M API and 2 M external-correlation records; beyond that records
 * are counted as dropped.  tp_cupti_take() moves a window out and discards
 * what is older than the window and was not taken.  Records with a zero start
 * (no timing: CUPTI ran out of device buffer, or a forced flush caught work
 * still running) are dropped and counted: the buffer that carried them is
 * gone, so the record never comes back complete; a zero or early end becomes
 * end = start.
 *
 * tp_cupti_decode() is the one place that reads CUPTI's record structs:
 * a layout for another CUPTI version is a change here only.
 */
#include "cupti_impl.h"
#include "clock.h"
#include "grow.h"
#include "intern.h"
#include "kernels.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TP_MAX_REC (1u << 20)
#define TP_MAX_API (2u << 20)
#define TP_MAX_EXT (2u << 20)

static struct tp_dev_record *tp_rec;
static size_t tp_n_rec, tp_cap_rec;
static struct tp_dev_api *tp_api;
static size_t tp_n_api, tp_cap_api;
static struct tp_dev_ext *tp_ext;
static size_t tp_n_ext, tp_cap_ext;
static uint64_t tp_dropped;             /* since the last take */
static uint64_t tp_overheads;           /* OVERHEAD records seen (counted only) */
static uint32_t tp_max_api_corr;        /* highest API correlation decoded */

/* "v" with room for element "n" of a pending array bounded by "max" (a
 * power of two, which doubling from 4096 lands on); NULL when full or out
 * of memory, "v" untouched. */
static void *tp_room(void *v, size_t *cap, size_t n, size_t elem, size_t max)
{
    return n < max ? tp_grow(v, cap, n + 1, elem, 4096) : NULL;
}

static struct tp_dev_record *tp_rec_new(void)
{
    struct tp_dev_record *v = tp_room(tp_rec, &tp_cap_rec, tp_n_rec, sizeof *v, TP_MAX_REC);
    if (!v)
        return NULL;
    tp_rec = v;
    struct tp_dev_record *r = &tp_rec[tp_n_rec];
    memset(r, 0, sizeof *r);
    return r;
}

/* Kernel names: CUPTI hands the same name pointer for every launch of a
 * function, so demangling and interning happen once per pointer; the length
 * check catches a pointer reused for another name after a module unload. */
#define TP_NAME_CACHE 4096
static struct { const char *p; size_t len; uint32_t id; } tp_names[TP_NAME_CACHE];

static uint32_t tp_kernel_name(const char *name)
{
    if (!name)
        return 0;
    size_t len = strlen(name);
    uintptr_t h = ((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull;
    unsigned i = (unsigned)(h >> 52) % TP_NAME_CACHE;
    if (tp_names[i].p == name && tp_names[i].len == len)
        return tp_names[i].id;
    char buf[TP_INTERN_LEN_MAX + 1];
    tp_demangle(name, buf, sizeof buf);
    uint32_t id = tp_intern(buf, (size_t)-1);
    tp_names[i].p = name;
    tp_names[i].len = len;
    tp_names[i].id = id;
    return id;
}

/* The fields Memcpy6 and MemcpyPtoP4 share by name. */
#define TP_COPY_FIELDS(r, m) do {                                                   \
        (r)->kind = TP_DEV_MEMCPY;                                                 \
        (r)->copy_kind = (m)->copyKind;                                            \
        (r)->src_kind = (m)->srcKind;                                              \
        (r)->dst_kind = (m)->dstKind;                                              \
        (r)->device = (m)->deviceId;                                               \
        (r)->context = (m)->contextId;                                             \
        (r)->stream = (m)->streamId;                                               \
        (r)->correlation = (m)->correlationId;                                     \
        (r)->bytes = (m)->bytes;                                                   \
        (r)->graph_id = (m)->graphId;                                              \
        (r)->graph_node_id = (m)->graphNodeId;                                     \
    } while (0)

/* Start and end of a device record; 0 if it carries no timing. */
static int tp_times(struct tp_dev_record *r, uint64_t start, uint64_t end)
{
    if (start == 0)
        return 0;
    r->start = tp_clock_ns_to_ticks(start);
    r->end = end >= start ? tp_clock_ns_to_ticks(end) : r->start;
    return 1;
}

int tp_cupti_decode(const void *record)
{
    const CUpti_Activity *a = record;
    struct tp_dev_record *r;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = record;
        if (!(r = tp_rec_new()) || !tp_times(r, k->start, k->end))
            break;
        r->kind = TP_DEV_KERNEL;
        r->device = k->deviceId;
        r->context = k->contextId;
        r->stream = k->streamId;
        r->correlation = k->correlationId;
        r->name = tp_kernel_name(k->name);
        r->grid[0] = k->gridX, r->grid[1] = k->gridY, r->grid[2] = k->gridZ;
        r->block[0] = k->blockX, r->block[1] = k->blockY, r->block[2] = k->blockZ;
        r->static_smem = k->staticSharedMemory;
        r->dynamic_smem = k->dynamicSharedMemory;
        r->registers = k->registersPerThread;
        r->graph_id = k->graphId;
        r->graph_node_id = k->graphNodeId;
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = record;
        if (!(r = tp_rec_new()) || !tp_times(r, m->start, m->end))
            break;
        TP_COPY_FIELDS(r, m);
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {   /* peer to peer: read as a copy */
        const CUpti_ActivityMemcpyPtoP4 *m = record;
        if (!(r = tp_rec_new()) || !tp_times(r, m->start, m->end))
            break;
        TP_COPY_FIELDS(r, m);
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = record;
        if (!(r = tp_rec_new()) || !tp_times(r, m->start, m->end))
            break;
        r->kind = TP_DEV_MEMSET;
        r->dst_kind = (uint8_t)m->memoryKind;
        r->device = m->deviceId;
        r->context = m->contextId;
        r->stream = m->streamId;
        r->correlation = m->correlationId;
        r->bytes = m->bytes;
        r->graph_id = m->graphId;
        r->graph_node_id = m->graphNodeId;
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        /* Synchronization2 has no deviceId: device stays 0. */
        const CUpti_ActivitySynchronization2 *s = record;
        if (!(r = tp_rec_new()) || !tp_times(r, s->start, s->end))
            break;
        r->kind = TP_DEV_SYNC;
        r->copy_kind = (uint8_t)s->type;
        r->context = s->contextId;
        r->stream = s->streamId;
        r->correlation = s->correlationId;
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *p = record;
        int driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
        if (tp_cupti_cb_class(driver, p->cbid) == TP_CB_OTHER)
            return 0;
        struct tp_dev_api *va = tp_room(tp_api, &tp_cap_api, tp_n_api, sizeof *va, TP_MAX_API);
        if (!va)
            break;
        tp_api = va;
        struct tp_dev_api *o = &tp_api[tp_n_api++];
        memset(o, 0, sizeof *o);
        o->start = tp_clock_ns_to_ticks(p->start);
        o->end = p->end >= p->start ? tp_clock_ns_to_ticks(p->end) : o->start;
        o->correlation = p->correlationId;
        o->thread_id = p->threadId;
        o->cbid = p->cbid;
        o->driver = (uint8_t)driver;
        o->failed = p->returnValue != 0;
        if (p->correlationId > tp_max_api_corr)
            tp_max_api_corr = p->correlationId;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *e = record;
        if (e->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
            return 0;
        struct tp_dev_ext *ve = tp_room(tp_ext, &tp_cap_ext, tp_n_ext, sizeof *ve, TP_MAX_EXT);
        if (!ve)
            break;
        tp_ext = ve;
        tp_ext[tp_n_ext].correlation = e->correlationId;
        tp_ext[tp_n_ext].external_id = e->externalId;
        tp_n_ext++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
        tp_cupti_free_overhead(a);
        tp_overheads++;
        return 0;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return 0;
    default:
        return -2;
    }
    tp_dropped++;
    return -1;
}

static void tp_decode_buffer(uint8_t *buf, size_t valid)
{
    CUpti_Activity *a = NULL;
    for (;;) {
        CUptiResult rc = tp_cupti_fn.cuptiActivityGetNextRecord(buf, valid, &a);
        if (rc != CUPTI_SUCCESS)
            break;                      /* MAX_LIMIT_REACHED: done; INVALID_KIND: incomplete */
        tp_cupti_decode(a);
    }
}

void tp_cupti_drain(void)
{
    size_t valid;
    int i;
    while ((i = tp_cupti_done_pop(&valid)) >= 0) {
        tp_decode_buffer(tp_cupti_buf_at(i), valid);
        tp_cupti_buf_release(i, 1);
    }
}

void tp_cupti_count_dropped(uint64_t n)
{
    tp_dropped += n;
}

/* ---- windows ---------------------------------------------------------------- */

static int tp_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int tp_has_u32(const uint32_t *v, size_t n, uint32_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == x;
}

/* Sorted, deduplicated copy; NULL (and *out_n 0) on allocation failure. */
static uint32_t *tp_sorted_set(uint32_t *v, size_t n, size_t *out_n)
{
    if (!v) {
        *out_n = 0;
        return NULL;
    }
    qsort(v, n, sizeof *v, tp_cmp_u32);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[m - 1] != v[i])
            v[m++] = v[i];
    *out_n = m;
    return v;
}

static uint32_t *tp_rec_corrs(size_t *out_n)
{
    uint32_t *v = malloc((tp_n_rec ? tp_n_rec : 1) * sizeof *v);
    size_t n = 0;
    if (v)
        for (size_t i = 0; i < tp_n_rec; i++)
            if (tp_rec[i].correlation)
                v[n++] = tp_rec[i].correlation;
    return tp_sorted_set(v, n, out_n);
}

/* Graph launches are not counted: a graph may hold no kernel node at all,
 * and the core's 2-step / 10 s limit covers late graph work. */
size_t tp_cupti_unfinished(uint64_t t0, uint64_t t1)
{
    if (!tp_n_api)
        return 0;
    size_t n_dev;
    uint32_t *dev = tp_rec_corrs(&n_dev);
    uint32_t *open = malloc(tp_n_api * sizeof *open);
    size_t n = 0;
    if (open)
        for (size_t i = 0; i < tp_n_api; i++) {
            const struct tp_dev_api *a = &tp_api[i];
            if (a->start < t0 || a->start > t1 || !a->correlation || a->failed ||
                tp_cupti_cb_class(a->driver, a->cbid) != TP_CB_LAUNCH)
                continue;
            if (!tp_has_u32(dev, n_dev, a->correlation))
                open[n++] = a->correlation;
        }
    size_t n_open;
    free(tp_sorted_set(open, n, &n_open));  /* a runtime and a driver record of one launch count once */
    free(dev);
    return n_open;
}

static int tp_cmp_rec(const void *a, const void *b)
{
    const struct tp_dev_record *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int tp_cmp_api(const void *a, const void *b)
{
    const struct tp_dev_api *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int tp_cmp_ext(const void *a, const void *b)
{
    const struct tp_dev_ext *x = a, *y = b;
    return (x->correlation > y->correlation) - (x->correlation < y->correlation);
}

void tp_cupti_take(uint64_t t0, uint64_t t1, struct tp_dev_batch *out)
{
    memset(out, 0, sizeof *out);
    out->dropped = tp_dropped + tp_cupti_take_recycled();
    tp_dropped = 0;

    /* API records: in the window -> out; later -> kept; earlier -> gone. */
    out->api = malloc((tp_n_api ? tp_n_api : 1) * sizeof *out->api);
    uint32_t *win = malloc((tp_n_api ? tp_n_api : 1) * sizeof *win);
    uint32_t *keep_c = malloc((tp_n_api + tp_n_rec + 1) * sizeof *keep_c);
    if (!out->api || !win || !keep_c) {
        /* Nothing can be handed out: drop everything rather than grow. */
        out->dropped += tp_n_api + tp_n_rec + tp_n_ext;
        tp_n_api = tp_n_rec = tp_n_ext = 0;
        free(out->api);
        out->api = NULL;
        free(win);
        free(keep_c);
        return;
    }
    size_t n_win = 0, n_keep_c = 0, kept = 0;
    for (size_t i = 0; i < tp_n_api; i++) {
        struct tp_dev_api a = tp_api[i];
        if (a.start >= t0 && a.start <= t1) {
            out->api[out->n_api++] = a;
            if (a.correlation)
                win[n_win++] = a.correlation;
        } else if (a.start > t1) {
            tp_api[kept++] = a;
            keep_c[n_keep_c++] = a.correlation;
        }
    }
    tp_n_api = kept;
    size_t n_w;
    win = tp_sorted_set(win, n_win, &n_w);

    /* Device records: of the window's launches or starting in it -> out. */
    out->rec = malloc((tp_n_rec ? tp_n_rec : 1) * sizeof *out->rec);
    uint32_t *taken_c = malloc((tp_n_rec ? tp_n_rec : 1) * sizeof *taken_c);
    size_t n_taken_c = 0;
    kept = 0;
    for (size_t i = 0; i < tp_n_rec; i++) {
        const struct tp_dev_record *r = &tp_rec[i];
        int mine = (r->correlation && tp_has_u32(win, n_w, r->correlation)) ||
                   (r->start >= t0 && r->start <= t1);
        if (mine && out->rec && taken_c) {
            out->rec[out->n_rec++] = *r;
            if (r->correlation)
                taken_c[n_taken_c++] = r->correlation;
        } else if (mine) {
            out->dropped++;
        } else if (r->start > t1) {
            tp_rec[kept++] = *r;
            keep_c[n_keep_c++] = r->correlation;
        }
    }
    tp_n_rec = kept;

    /* External correlations: of what was taken -> out; of what is kept, or
     * newer than every API record seen (its API record is still in a buffer
     * CUPTI has not completed) -> kept. */
    size_t n_t, n_k;
    taken_c = tp_sorted_set(taken_c, n_taken_c, &n_t);
    keep_c = tp_sorted_set(keep_c, n_keep_c, &n_k);
    out->ext = malloc((tp_n_ext ? tp_n_ext : 1) * sizeof *out->ext);
    kept = 0;
    for (size_t i = 0; i < tp_n_ext; i++) {
        struct tp_dev_ext e = tp_ext[i];
        if (tp_has_u32(win, n_w, e.correlation) || tp_has_u32(taken_c, n_t, e.correlation)) {
            if (out->ext)
                out->ext[out->n_ext++] = e;
        } else if (tp_has_u32(keep_c, n_k, e.correlation) || e.correlation > tp_max_api_corr) {
            tp_ext[kept++] = e;
        }
    }
    tp_n_ext = kept;
    free(win);
    free(taken_c);
    free(keep_c);

    qsort(out->api, out->n_api, sizeof *out->api, tp_cmp_api);
    if (out->rec)
        qsort(out->rec, out->n_rec, sizeof *out->rec, tp_cmp_rec);
    if (out->ext)
        qsort(out->ext, out->n_ext, sizeof *out->ext, tp_cmp_ext);
}

void tp_cupti_window_free(struct tp_dev_batch *w)
{
    if (!w)
        return;
    free(w->rec);
    free(w->api);
    free(w->ext);
    memset(w, 0, sizeof *w);
}
