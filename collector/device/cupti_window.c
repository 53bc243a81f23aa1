/*
 * cupti_window.c - DESIGN: the decoded records waiting for a window, and
 * the cut of a window out of them.  The pending arrays belong to the flush
 * thread (no locks) and are bounded: 1 M device records, 2 M API and 2 M
 * external-correlation records, fewer when TRAINPROF_BUFFER_MB is small
 * (half of it for device records, a quarter each for the others, at least
 * 4096 of each: tp_cupti_pending_budget); beyond that, and for device records
 * without timing, records are counted as dropped.  tp_cupti_take() moves a
 * window out and discards what is older than the window and was not taken;
 * the joins it needs (a window's launches to their device records, taken
 * or kept records to their external correlations) are sorted id arrays
 * searched by bisection, as in join.c.  No CUPTI call here: the records
 * come from cupti_decode.c, so a unit test feeds hand-made ones.
 *
 * CUDA event records (cudaEventRecord: event, stream, correlation) outlive
 * windows: a sync waits on the last record of its event before it, which
 * may lie in the warmup or an earlier window, so each take hands out a
 * copy of all of them (sorted by context, event, correlation).  Kept after
 * that: per event, the last record at or before the take's cut (the
 * highest correlation of what the take consumed; later syncs were called
 * after it and have higher ids, CUPTI numbering calls in order) and every
 * newer one.  Bounded at 1 M records (then dropped and counted), and
 * forgotten when the kinds come back on after a gap (cupti.c): an event
 * recorded again while they were off would leave a stale answer.
 *
 * A window's tail can miss its deadline: cuptiActivityFlushAll(0) does not
 * return a buffer that holds an incomplete record, so a kernel launched
 * late in a window may arrive after the window was written.  Each take
 * remembers the launches it handed out without their device record (the
 * awaited set, sorted correlations); a later take that has to discard one
 * of those records counts it as dropped, so that no record is lost silently.
 */
#include "cupti_impl.h"

#include "collector/common/grow.h"

#include <stdlib.h>
#include <string.h>

#define TP_MAX_REC (1u << 20)
#define TP_MAX_API (2u << 20)
#define TP_MAX_EXT (2u << 20)
#define TP_MAX_CEV (1u << 20)

static struct tp_device_record *tp_rec;
static size_t tp_n_rec, tp_cap_rec;
static struct tp_device_api *tp_api;
static size_t tp_n_api, tp_cap_api;
static struct tp_device_ext *tp_ext;
static uint32_t *tp_awaited;            /* launches of written windows without their device record */
static size_t tp_n_awaited;
static size_t tp_n_ext, tp_cap_ext;
static struct tp_device_cuda_event *tp_cev; /* CUDA event records, kept across takes */
static size_t tp_n_cev, tp_cap_cev;
static size_t tp_max_rec = TP_MAX_REC, tp_max_api = TP_MAX_API, tp_max_ext = TP_MAX_EXT;
static uint64_t tp_dropped;             /* since the last take */
static uint32_t tp_max_api_corr;        /* highest API correlation decoded */
static uint64_t tp_clock_lo, tp_clock_hi = UINT64_MAX;  /* where our records start */
static uint64_t tp_off_clock;           /* records refused: outside [lo, hi] */

/* "v" with room for element "n" (capacities double from 4096, so they stop
 * at "max", a power of two); NULL when "n" reaches "max" or memory runs out. */
static void *tp_room(void *v, size_t *cap, size_t n, size_t size, size_t max)
{
    return n < max ? tp_grow(v, cap, n + 1, size, 4096) : NULL;
}

/* The largest power of two <= bytes / size, within [4096, max]. */
static size_t tp_cap_for(size_t bytes, size_t size, size_t max)
{
    size_t n = 4096;
    while (n * 2 <= max && n * 2 * size <= bytes)
        n *= 2;
    return n;
}

void tp_cupti_pending_budget(size_t bytes)
{
    tp_max_rec = tp_cap_for(bytes / 2, sizeof *tp_rec, TP_MAX_REC);
    tp_max_api = tp_cap_for(bytes / 4, sizeof *tp_api, TP_MAX_API);
    tp_max_ext = tp_cap_for(bytes / 4, sizeof *tp_ext, TP_MAX_EXT);
}

void tp_cupti_pending_drop(uint64_t n)
{
    tp_dropped += n;
}

void tp_cupti_pending_clock(uint64_t lo, uint64_t hi)
{
    tp_clock_lo = lo;
    tp_clock_hi = hi;
}

uint64_t tp_cupti_pending_off_clock(void)
{
    uint64_t n = tp_off_clock;
    tp_off_clock = 0;
    return n;
}

static int tp_off(uint64_t start)
{
    if (start >= tp_clock_lo && start <= tp_clock_hi)
        return 0;
    tp_off_clock++;
    return 1;
}

int tp_cupti_decode(const void *record)
{
    struct tp_cupti_item it;
    void *p;
    int got = tp_cupti_record_decode(record, &it);
    if ((got == TP_CUPTI_GOT_REC && tp_off(it.u.rec.start)) ||
        (got == TP_CUPTI_GOT_API && tp_off(it.u.api.start)))
        return 0;
    switch (got) {
    case TP_CUPTI_GOT_REC:
        if (!(p = tp_room(tp_rec, &tp_cap_rec, tp_n_rec, sizeof *tp_rec, tp_max_rec)))
            break;
        tp_rec = p;
        tp_rec[tp_n_rec++] = it.u.rec;
        return 1;
    case TP_CUPTI_GOT_API:
        if (!(p = tp_room(tp_api, &tp_cap_api, tp_n_api, sizeof *tp_api, tp_max_api)))
            break;
        tp_api = p;
        tp_api[tp_n_api++] = it.u.api;
        if (it.u.api.correlation > tp_max_api_corr)
            tp_max_api_corr = it.u.api.correlation;
        return 1;
    case TP_CUPTI_GOT_EXT:
        if (!(p = tp_room(tp_ext, &tp_cap_ext, tp_n_ext, sizeof *tp_ext, tp_max_ext)))
            break;
        tp_ext = p;
        tp_ext[tp_n_ext++] = it.u.ext;
        return 1;
    case TP_CUPTI_GOT_CUDA_EVENT:
        if (!(p = tp_room(tp_cev, &tp_cap_cev, tp_n_cev, sizeof *tp_cev, TP_MAX_CEV)))
            break;
        tp_cev = p;
        tp_cev[tp_n_cev++] = it.u.cuda_event;
        return 1;
    case TP_CUPTI_GOT_UNTIMED:
        break;
    case TP_CUPTI_GOT_NOTHING:
        return 0;
    default:
        return -2;
    }
    tp_dropped++;
    return -1;
}

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
            const struct tp_device_api *a = &tp_api[i];
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
    const struct tp_device_record *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int tp_cmp_api(const void *a, const void *b)
{
    const struct tp_device_api *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int tp_cmp_ext(const void *a, const void *b)
{
    const struct tp_device_ext *x = a, *y = b;
    return (x->correlation > y->correlation) - (x->correlation < y->correlation);
}

static int tp_cmp_cev(const void *a, const void *b)
{
    const struct tp_device_cuda_event *x = a, *y = b;
    if (x->context != y->context)
        return x->context < y->context ? -1 : 1;
    if (x->event_id != y->event_id)
        return x->event_id < y->event_id ? -1 : 1;
    return (x->correlation > y->correlation) - (x->correlation < y->correlation);
}

void tp_cupti_pending_forget_events(void)
{
    tp_n_cev = 0;
}

/* Every CUDA event record to "out"; then, per event, drop the records that
 * a newer one at or before "cut" supersedes for every later sync. */
static void tp_cev_take(uint32_t cut, struct tp_device_batch *out)
{
    if (!tp_n_cev)
        return;
    qsort(tp_cev, tp_n_cev, sizeof *tp_cev, tp_cmp_cev);
    out->cuda_event = malloc(tp_n_cev * sizeof *out->cuda_event);
    if (out->cuda_event) {
        memcpy(out->cuda_event, tp_cev, tp_n_cev * sizeof *tp_cev);
        out->n_cuda_event = tp_n_cev;
    }
    size_t kept = 0;
    for (size_t i = 0; i < tp_n_cev; i++) {
        const struct tp_device_cuda_event *e = &tp_cev[i], *next = &tp_cev[i + 1];
        int superseded = i + 1 < tp_n_cev && next->context == e->context &&
                         next->event_id == e->event_id && next->correlation <= cut;
        if (!superseded)
            tp_cev[kept++] = *e;
    }
    tp_n_cev = kept;
}

/* The launches of window "out" whose device record was not taken with it
 * ("taken", sorted) become the awaited set; the previous one is done with. */
static void tp_await(const struct tp_device_batch *out, const uint32_t *taken, size_t n_taken)
{
    free(tp_awaited);
    tp_awaited = NULL;
    tp_n_awaited = 0;
    uint32_t *v = malloc((out->n_api ? out->n_api : 1) * sizeof *v);
    if (!v)
        return;
    size_t n = 0;
    for (size_t i = 0; i < out->n_api; i++) {
        const struct tp_device_api *a = &out->api[i];
        if (a->correlation && !a->failed && tp_cupti_cb_class(a->driver, a->cbid) == TP_CB_LAUNCH &&
            !tp_has_u32(taken, n_taken, a->correlation))
            v[n++] = a->correlation;
    }
    tp_awaited = tp_sorted_set(v, n, &tp_n_awaited);
}

void tp_cupti_take(uint64_t t0, uint64_t t1, struct tp_device_batch *out)
{
    memset(out, 0, sizeof *out);
    out->dropped = tp_dropped + tp_cupti_buf_lost();
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
    uint32_t cut = 0;                   /* highest correlation consumed (CUDA events) */
    for (size_t i = 0; i < tp_n_api; i++) {
        struct tp_device_api a = tp_api[i];
        if (a.start <= t1 && a.correlation > cut)
            cut = a.correlation;
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
    out->first_corr = win && n_w ? win[0] : 0;
    out->time_slack = tp_cupti_clock_slack();

    /* Device records: of the window's launches or starting in it -> out. */
    out->rec = malloc((tp_n_rec ? tp_n_rec : 1) * sizeof *out->rec);
    uint32_t *taken_c = malloc((tp_n_rec ? tp_n_rec : 1) * sizeof *taken_c);
    size_t n_taken_c = 0;
    kept = 0;
    for (size_t i = 0; i < tp_n_rec; i++) {
        const struct tp_device_record *r = &tp_rec[i];
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
            continue;
        } else if (r->correlation && tp_has_u32(tp_awaited, tp_n_awaited, r->correlation)) {
            out->dropped++;             /* arrived after its window was written */
        }
        if (r->correlation > cut)
            cut = r->correlation;
    }
    tp_n_rec = kept;
    tp_cev_take(cut, out);

    /* External correlations: of what was taken -> out; of what is kept, or
     * newer than every API record seen (its API record is still in a buffer
     * CUPTI has not completed) -> kept. */
    size_t n_t, n_k;
    taken_c = tp_sorted_set(taken_c, n_taken_c, &n_t);
    keep_c = tp_sorted_set(keep_c, n_keep_c, &n_k);
    tp_await(out, taken_c, n_t);
    out->ext = malloc((tp_n_ext ? tp_n_ext : 1) * sizeof *out->ext);
    kept = 0;
    for (size_t i = 0; i < tp_n_ext; i++) {
        struct tp_device_ext e = tp_ext[i];
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

void tp_cupti_window_free(struct tp_device_batch *w)
{
    if (!w)
        return;
    free(w->rec);
    free(w->api);
    free(w->ext);
    free(w->cuda_event);
    memset(w, 0, sizeof *w);
}
