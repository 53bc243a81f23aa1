/*
 * join.c - DESIGN: the host/device join (join.h), done once per
 * window on the flush thread over sorted arrays (no hashing): CUPTI's API records sorted
 * by start are searched from each host record's start; the correlations
 * that have device work, the ones joined to host records and the external
 * correlations are sorted id arrays searched by bisection.  Device records
 * become events after the host records, with Kineto's args (occupancy from
 * the driver's device properties).
 */
#include "join.h"
#include "collector/common/grow.h"
#include "collector/common/log.h"
#include "collector/device/props.h"
#include "collector/record/apis.h"
#include "collector/record/intern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tp_libid {
    uint64_t t0;                   /* the pushed external id: the call's start tick */
    uint64_t id;
    struct tp_record rec;          /* the call, for the work it issued (ev->issuer) */
};

struct tp_join {
    const struct tp_device_batch *dev;
    uint8_t *claimed;              /* parallel to dev->api */
    uint32_t *work;                /* correlations with device records, sorted, unique */
    size_t n_work;
    uint32_t *joined;              /* correlations claimed by host records */
    size_t n_joined, cap_joined;
    struct tp_libid *libs;         /* library calls, in peek order (sorted at finish) */
    size_t n_libs, cap_libs;
    uint64_t *next_own;
    uint64_t own0;
    const struct tp_device_prop *props;
    int n_props;
    unsigned n_missed;             /* debug lines written */
};

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int u32_has(const uint32_t *v, size_t n, uint32_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == x;
}

static size_t sort_unique(uint32_t *v, size_t n)
{
    if (n < 2)
        return n;
    qsort(v, n, sizeof *v, u32_cmp);
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[k - 1])
            v[k++] = v[i];
    return k;
}

struct tp_join *tp_join_new(const struct tp_device_batch *dev, uint64_t *next_own)
{
    struct tp_join *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->dev = dev;
    j->claimed = calloc(dev->n_api ? dev->n_api : 1, 1);
    j->work = malloc((dev->n_rec ? dev->n_rec : 1) * sizeof *j->work);
    if (!j->claimed || !j->work) {
        tp_join_free(j);
        return NULL;
    }
    for (size_t i = 0; i < dev->n_rec; i++)
        if (dev->rec[i].correlation)
            j->work[j->n_work++] = dev->rec[i].correlation;
    j->n_work = sort_unique(j->work, j->n_work);
    /* our own ids never collide with CUPTI's 32-bit ones */
    if (*next_own < (1ull << 32))
        *next_own = 1ull << 32;
    j->next_own = next_own;
    j->own0 = *next_own;
    j->n_props = tp_device_props_get(&j->props);
    TP_DEBUG("join: %zu API records, %zu device records, %zu external", dev->n_api, dev->n_rec, dev->n_ext);
    return j;
}

void tp_join_free(struct tp_join *j)
{
    if (!j)
        return;
    free(j->claimed);
    free(j->work);
    free(j->joined);
    free(j->libs);
    free(j);
}

static int thread_is(const struct tp_tbuf *t, uint32_t cupti_tid)
{
    return cupti_tid == (uint32_t)t->tid || cupti_tid == t->pthread_id;
}

/* How far outside a host call its CUPTI API record may lie, in ticks.  Both
 * times come from one clock (ours is CUPTI's timestamp callback), but a
 * thread moved to another core between our reading and CUPTI's can see a
 * TSC a few ticks behind: a record starting one tick before the call was
 * seen under load on this machine's virtual CPUs.  A call's own record
 * comes first anyway (earlier calls of the thread claimed theirs).  Where
 * CUPTI timed its records by its own clock (it refused our callback), the
 * measured offset's uncertainty is added (tp_device_batch.time_slack). */
#define TP_JOIN_SLACK 64

/* How many API records before a host call's start are looked at for one
 * that encloses it (find_api). */
#define TP_JOIN_ENCLOSING 32

/* Whether API record "i" may be taken by a call of another thread: only
 * where CUPTI's thread id is none of ours (then time alone tells), and
 * with device work.  A record on one of our other threads is that
 * thread's: a driver call of thread A that lasted while thread B made a
 * whole runtime call took B's record, and B's kernel was linked to A's call
 * (tests/preload/test_static_runtime.py). */
static int foreign_ok(const struct tp_join *j, size_t i)
{
    const struct tp_device_api *a = &j->dev->api[i];
    return u32_has(j->work, j->n_work, a->correlation) && !tp_buf_thread_known(a->thread_id);
}

/* The CUPTI API record of host call [t0, t1] on thread "t", or -1.
 * Its own record lies inside the call.  Failing that, the call may be a
 * driver call made by a runtime call that we did not see (a library's
 * statically linked runtime: cuBLAS, cuDNN, nvcc's default): CUPTI then
 * gives one record, the runtime call's, around ours, and the nearest
 * unclaimed one of the same class (a launch for a launch) on the thread
 * is ours.  Records of the thread come first, inside, then around the
 * call; then those whose thread CUPTI named otherwise (foreign_ok). */
static long find_api(const struct tp_join *j, const struct tp_tbuf *t, uint64_t t0, uint64_t t1,
                     int launch)
{
    const struct tp_device_api *a = j->dev->api;
    size_t n = j->dev->n_api, lo = 0, hi = n;
    uint64_t slack = TP_JOIN_SLACK + j->dev->time_slack;
    uint64_t call0 = t0, call1 = t1;
    t0 = t0 > slack ? t0 - slack : 0;
    t1 += slack;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a[mid].start < t0)
            lo = mid + 1;
        else
            hi = mid;
    }
    long any = -1, mine = -1;
    for (size_t i = lo; i < n && a[i].start <= t1; i++) {
        if (j->claimed[i] || a[i].internal || a[i].end > t1)
            continue;
        if (thread_is(t, a[i].thread_id)) {
            if (u32_has(j->work, j->n_work, a[i].correlation))
                return (long)i;
            if (mine < 0)
                mine = (long)i;
        } else if (any < 0 && foreign_ok(j, i)) {
            any = (long)i;
        }
    }
    if (mine >= 0)
        return mine;
    /* around: from the last record that starts by the call's start (give
     * or take the slack: one that starts within it was passed over above
     * for ending after the call) */
    size_t top = lo;
    while (top < n && a[top].start <= call0 + slack)
        top++;
    long any_around = -1;
    for (size_t k = 0; k < TP_JOIN_ENCLOSING && k < top; k++) {
        size_t i = top - 1 - k;
        if (j->claimed[i] || a[i].internal || a[i].end + slack < call1 ||
            (tp_cupti_cb_class(a[i].driver, a[i].cbid) == TP_CB_LAUNCH) != launch)
            continue;
        if (thread_is(t, a[i].thread_id))
            return (long)i;
        if (any_around < 0 && foreign_ok(j, i))
            any_around = (long)i;
    }
    /* CUPTI's threadId is neither of our ids: fall back to time alone */
    return any >= 0 ? any : any_around;
}

/* TRAINPROF_LOG=debug: a host call no API record joined, with the API
 * records nearest its start, to tell a clock, thread or cbid mismatch. */
static void debug_missed(const struct tp_join *j, const struct tp_tbuf *t, const struct tp_record *r)
{
    const struct tp_device_api *a = j->dev->api;
    size_t n = j->dev->n_api, lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a[mid].start < r->t0)
            lo = mid + 1;
        else
            hi = mid;
    }
    TP_DEBUG("join: %s [%llu, %llu] tid %u/%u not joined (%zu API records, slack %llu)",
             tp_api_name(r->api), (unsigned long long)r->t0, (unsigned long long)r->t1,
             (unsigned)t->tid, t->pthread_id, n, (unsigned long long)j->dev->time_slack);
    for (size_t k = lo > 2 ? lo - 2 : 0; k < n && k < lo + 2; k++)
        TP_DEBUG("join:   api %s cbid %u corr %u [%lld, %lld] from the call's start, tid %u%s%s",
                 a[k].driver ? "drv" : "rt", a[k].cbid, a[k].correlation,
                 (long long)(a[k].start - r->t0), (long long)(a[k].end - r->t0), a[k].thread_id,
                 j->claimed[k] ? " claimed" : "", a[k].internal ? " internal" : "");
}

static void add_joined(struct tp_join *j, uint32_t corr)
{
    uint32_t *v = tp_grow(j->joined, &j->cap_joined, j->n_joined + 1, sizeof *v, 1024);
    if (!v)
        return;
    j->joined = v;
    j->joined[j->n_joined++] = corr;
}

static void add_lib(struct tp_join *j, struct tp_record *r)
{
    struct tp_libid *v = tp_grow(j->libs, &j->cap_libs, j->n_libs + 1, sizeof *v, 1024);
    if (!v)
        return;
    j->libs = v;
    uint64_t id = (*j->next_own)++;
    r->u.lib.corr = (uint32_t)(id - j->own0 + 1);
    j->libs[j->n_libs++] = (struct tp_libid){ r->t0, id, *r };
}

void tp_join_host(struct tp_join *j, const struct tp_tbuf *t, struct tp_record *r)
{
    if (r->kind != TP_REC_API && r->kind != TP_REC_LAUNCH)
        return;
    int layer = tp_api_layer(r->api);
    if (layer == TP_LAYER_LIBRARY) {
        add_lib(j, r);
        return;
    }
    long i = find_api(j, t, r->t0, r->t1, r->kind == TP_REC_LAUNCH);
    if (i < 0) {
        if (tp_log_level >= TP_LOG_DEBUG && j->n_missed++ < 12)
            debug_missed(j, t, r);
        return;
    }
    j->claimed[i] = 1;
    uint32_t corr = j->dev->api[i].correlation;
    if (r->kind == TP_REC_LAUNCH)
        r->u.launch.corr = corr;
    else
        r->u.api.corr = corr;
    add_joined(j, corr);
}

static int lib_cmp(const void *a, const void *b)
{
    const struct tp_libid *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

void tp_join_finish(struct tp_join *j, struct tp_window *w)
{
    j->n_joined = sort_unique(j->joined, j->n_joined);
    if (j->n_libs > 1)
        qsort(j->libs, j->n_libs, sizeof *j->libs, lib_cmp);
    const struct tp_device_batch *d = j->dev;
    uint64_t kernels = 0, linked = 0;
    for (size_t i = 0; i < d->n_rec; i++) {
        if (d->rec[i].kind != TP_DEVICE_KERNEL)
            continue;
        /* launched before the window (CUPTI numbers calls in order) and still
         * running in it: shown, but no launch of this window can claim it */
        if (d->rec[i].correlation && d->first_corr && d->rec[i].correlation < d->first_corr)
            continue;
        kernels++;
        linked += u32_has(j->joined, j->n_joined, d->rec[i].correlation);
    }
    w->gpu = 1;
    w->devices = j->props;
    w->n_devices = j->n_props;
    w->gpu_kernels = kernels;
    w->gpu_kernels_linked = linked;
    w->gpu_records = d->n_rec;
    w->gpu_dropped = d->dropped;
    w->coverage = kernels ? (double)linked / (double)kernels : -1;
}

/* The library call that issued CUPTI correlation "corr", NULL if none. */
static const struct tp_libid *issuer_of(const struct tp_join *j, uint32_t corr)
{
    const struct tp_device_ext *e = j->dev->ext;
    size_t lo = 0, hi = j->dev->n_ext;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e[mid].correlation < corr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == j->dev->n_ext || e[lo].correlation != corr)
        return NULL;
    uint64_t t0 = e[lo].external_id;
    lo = 0;
    hi = j->n_libs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (j->libs[mid].t0 < t0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < j->n_libs && j->libs[lo].t0 == t0 ? &j->libs[lo] : NULL;
}

void tp_join_event(const struct tp_join *j, struct tp_event *ev)
{
    const struct tp_record *r = ev->rec;
    if (!r || (r->kind != TP_REC_API && r->kind != TP_REC_LAUNCH))
        return;
    if (ev->layer == TP_LAYER_LIBRARY) {
        if (r->u.lib.corr) {
            ev->correlation = j->own0 + r->u.lib.corr - 1;
            ev->external_id = ev->correlation;
        }
        return;
    }
    uint32_t corr = r->kind == TP_REC_LAUNCH ? r->u.launch.corr : r->u.api.corr;
    if (!corr)
        return;
    ev->flow = (uint8_t)u32_has(j->work, j->n_work, corr);
    const struct tp_libid *l = issuer_of(j, corr);
    ev->external_id = l ? l->id : 0;
}

static const char *const memcpy_kinds[] = {
    "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP",
};
static const char *const memory_kinds[] = {
    "Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static",
};
static const char *const sync_kinds[] = {
    "Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync",
};

#define PICK(table, i) ((i) < sizeof table / sizeof table[0] ? table[i] : table[0])

const char *tp_device_name(const struct tp_device_record *d, char *buf, size_t bufsz)
{
    switch (d->kind) {
    case TP_DEVICE_KERNEL:
        return d->name ? tp_intern_str(d->name) : "unknown kernel";
    case TP_DEVICE_MEMCPY:
        snprintf(buf, bufsz, "Memcpy %s (%s -> %s)", PICK(memcpy_kinds, d->copy_kind),
                 PICK(memory_kinds, d->src_kind), PICK(memory_kinds, d->dst_kind));
        return buf;
    case TP_DEVICE_MEMSET:
        snprintf(buf, bufsz, "Memset (%s)", PICK(memory_kinds, d->dst_kind));
        return buf;
    case TP_DEVICE_SYNC:
        return PICK(sync_kinds, d->copy_kind);
    default:
        return "unknown";
    }
}

static void kernel_shape(const struct tp_join *j, const struct tp_device_record *d, struct tp_event *ev)
{
    ev->occupancy = -1;
    const struct tp_device_prop *p = NULL;
    for (int i = 0; i < j->n_props && !p; i++)
        if (j->props[i].id == (int)d->device)
            p = &j->props[i];
    if (!p || p->num_sms <= 0 || p->warp_size <= 0)
        return;
    double blocks = (double)d->grid[0] * d->grid[1] * d->grid[2];
    int threads = d->block[0] * d->block[1] * d->block[2];
    ev->blocks_per_sm = blocks / p->num_sms;
    ev->warps_per_sm = blocks * ((threads + p->warp_size - 1) / p->warp_size) / p->num_sms;
    ev->occupancy = tp_device_props_occupancy(p, d->registers, d->static_smem, d->dynamic_smem,
                                          threads, ev->blocks_per_sm);
}

/* Kineto's getWaitEventInfo: for sync "d" on a CUDA event, the last record
 * of that event (same context) whose correlation is below the sync's: the
 * cudaEventRecord the sync waits on.  -1s when no such record was seen. */
static void wait_on(const struct tp_device_batch *b, const struct tp_device_record *d, struct tp_event *ev)
{
    ev->wait_on_stream = ev->wait_on_corr = -1;
    const struct tp_device_cuda_event *v = b->cuda_event;
    size_t lo = 0, hi = b->n_cuda_event;
    while (lo < hi) {                   /* first record not below (context, event, correlation) */
        size_t mid = (lo + hi) / 2;
        const struct tp_device_cuda_event *m = &v[mid];
        int below = m->context != d->context   ? m->context < d->context
                    : m->event_id != d->event_id ? m->event_id < d->event_id
                                                 : m->correlation < d->correlation;
        if (below)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || v[lo - 1].context != d->context || v[lo - 1].event_id != d->event_id)
        return;
    ev->wait_on_stream = (int32_t)v[lo - 1].stream;   /* Kineto's int32: no stream is -1 */
    ev->wait_on_corr = v[lo - 1].correlation;
}

void tp_join_dispatch(const struct tp_join *j, const struct tp_clock_map *map,
                         void (*fn)(void *ctx, const struct tp_event *ev), void *ctx)
{
    char buf[96];
    for (size_t i = 0; i < j->dev->n_rec; i++) {
        const struct tp_device_record *d = &j->dev->rec[i];
        struct tp_event ev;
        memset(&ev, 0, sizeof ev);
        ev.dev = d;
        ev.cbid = -1;
        ev.name = tp_device_name(d, buf, sizeof buf);
        ev.thread_name = "";
        ev.pid = (int32_t)d->device;
        ev.tid = (int32_t)d->stream;
        ev.ts_ns = tp_clock_to_unix_ns(map, d->start);
        ev.dur_ns = tp_clock_span_ns(map, d->start, d->end);
        ev.correlation = d->correlation;
        ev.flow = (uint8_t)u32_has(j->joined, j->n_joined, d->correlation);
        const struct tp_libid *l = d->correlation ? issuer_of(j, d->correlation) : NULL;
        if (l) {
            ev.external_id = l->id;
            ev.issuer = &l->rec;
            ev.form = (uint8_t)tp_api_form(l->rec.api);
        }
        ev.occupancy = -1;
        if (d->kind == TP_DEVICE_KERNEL)
            kernel_shape(j, d, &ev);
        ev.wait_on_stream = ev.wait_on_corr = -1;
        if (tp_device_waits_on_event(d))
            wait_on(j->dev, d, &ev);
        fn(ctx, &ev);
    }
}
