/*
 * memview.c - DESIGN: a window's memory by owner (memview.h).
 *
 * The ledger (collector/modules/memtrack.c) keeps, per call site, the bytes
 * held now, and the bytes held when each of the last few windows began
 * (its "wstart"); every allocation and free record of the window carries
 * its call site (u.mem.origin).  Here, on the flush thread after the
 * window closed: the call sites are named (memowner.c), grouped by
 * (device, class, owner), and the window's allocation records, sorted by
 * the time each call returned, are replayed from the starting levels.
 * That gives each owner's level after every call (the per-owner series
 * the trace stacks), its peak in the window, its level at the end and the
 * bytes each call site holds then.  The replay is exact when the window
 * lost no record and its starting levels were still kept (the ledger keeps
 * those of the 4 latest windows); otherwise the rows are flagged as the
 * ledger's best account (tp_window.mem_owners_exact 0).  Records of
 * different threads that return at the same tick keep the order they
 * were drained in: the level between them may differ from the ledger's
 * by one call, never at the end.
 */
#include "memview.h"

#include "collector/config/config.h"
#include "collector/modules/memowner.h"
#include "collector/modules/memtrack.h"
#include "collector/record/apis.h"

#include <stdlib.h>
#include <string.h>

struct tp_mv_rec {
    uint64_t t1, seq;
    uint64_t bytes;
    uint32_t origin;
    int alloc;
};

struct tp_memview {
    struct tp_mem_origin_info *o;
    int n;
    int known;                      /* the window's starting levels were kept */
    const struct tp_memown **own;   /* per origin */
    uint16_t *owner_of;             /* per origin: index into names */
    const char **names;
    int n_names;
    struct tp_mv_rec *recs;
    size_t n_recs, cap_recs;
    int recs_lost;                  /* out of memory while collecting */
    uint64_t *end;                  /* per origin: held at the window's end (replay) */
    uint64_t *wallocs;              /* per origin: allocations in the window */
    struct tp_mem_owner_usage *rows;
    int n_rows;
    struct tp_mem_site_usage *sites;
    struct tp_mem_owner_point *pts;
    size_t n_pts;
    struct tp_mem_held *held;
    int n_held;
};

struct tp_memview *tp_memview_new(int gen)
{
    if (!tp_cfg.profile_memory)
        return NULL;
    struct tp_memview *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->n = tp_mem_origins(gen, &v->o, &v->known, NULL);
    if (gen < 0)
        v->known = 0;
    size_t n = (size_t)v->n + 1;
    v->own = calloc(n, sizeof *v->own);
    v->owner_of = calloc(n, sizeof *v->owner_of);
    v->names = calloc(n, sizeof *v->names);
    v->end = calloc(n, sizeof *v->end);
    v->wallocs = calloc(n, sizeof *v->wallocs);
    if (!v->own || !v->owner_of || !v->names || !v->end || !v->wallocs) {
        tp_memview_free(v);
        return NULL;
    }
    for (int i = 0; i < v->n; i++) {
        v->own[i] = tp_memown_of(&v->o[i], (uint32_t)i);
        int k = 0;
        while (k < v->n_names && strcmp(v->names[k], v->own[i]->owner) != 0)
            k++;
        if (k == v->n_names)
            v->names[v->n_names++] = v->own[i]->owner;
        v->owner_of[i] = (uint16_t)k;
        v->end[i] = v->o[i].wstart;
    }
    return v;
}

void tp_memview_add(struct tp_memview *v, const struct tp_record *r)
{
    if (!v || r->kind != TP_REC_API)
        return;
    int form = tp_api_form(r->api);
    if ((form != TP_FORM_ALLOC && form != TP_FORM_FREE) ||
        (r->u.mem.flags & (TP_MEM_FAILED | TP_MEM_NOOP | TP_MEM_UNKNOWN | TP_MEM_UNTRACKED)) ||
        r->u.mem.origin >= (uint32_t)v->n)
        return;
    if (v->n_recs == v->cap_recs) {
        size_t cap = v->cap_recs ? 2 * v->cap_recs : 256;
        struct tp_mv_rec *n = realloc(v->recs, cap * sizeof *n);
        if (!n) {
            v->recs_lost = 1;
            return;
        }
        v->recs = n;
        v->cap_recs = cap;
    }
    v->recs[v->n_recs] = (struct tp_mv_rec){ r->t1, v->n_recs, r->u.mem.bytes, r->u.mem.origin,
                                             form == TP_FORM_ALLOC };
    v->n_recs++;
}

static int tp_mv_rec_cmp(const void *pa, const void *pb)
{
    const struct tp_mv_rec *a = pa, *b = pb;
    if (a->t1 != b->t1)
        return a->t1 < b->t1 ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* The row of (device, class, owner), added if new; -1 if none fits. */
static int tp_mv_row(struct tp_memview *v, int device, int mclass, int owner)
{
    for (int i = 0; i < v->n_rows; i++)
        if (v->rows[i].device == device && v->rows[i].mclass == mclass && v->rows[i].owner == owner)
            return i;
    struct tp_mem_owner_usage *u = &v->rows[v->n_rows];
    memset(u, 0, sizeof *u);
    u->device = (int16_t)device;
    u->mclass = (uint8_t)mclass;
    u->owner = (uint16_t)owner;
    return v->n_rows++;
}

/* Rows in the order of tp_window.mem (class, then device), then by bytes
 * held at the end, most first. */
static int tp_mv_row_cmp(const void *pa, const void *pb)
{
    const struct tp_mem_owner_usage *a = pa, *b = pb;
    if (a->mclass != b->mclass)
        return a->mclass < b->mclass ? -1 : 1;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->end_bytes != b->end_bytes)
        return a->end_bytes > b->end_bytes ? -1 : 1;
    if (a->peak_bytes != b->peak_bytes)
        return a->peak_bytes > b->peak_bytes ? -1 : 1;
    return (a->owner > b->owner) - (a->owner < b->owner);
}

static int tp_mv_site_cmp(const void *pa, const void *pb)
{
    const struct tp_mem_site_usage *a = pa, *b = pb;
    if (a->live_bytes != b->live_bytes)
        return a->live_bytes > b->live_bytes ? -1 : 1;
    if (a->allocs != b->allocs)
        return a->allocs > b->allocs ? -1 : 1;
    return strcmp(a->site, b->site);
}

/* Each row's call sites, most held first, at most TP_MEM_TOP_SITES. */
static void tp_mv_sites(struct tp_memview *v)
{
    v->sites = calloc((size_t)v->n + 1, sizeof *v->sites);
    if (!v->sites)
        return;
    size_t used = 0;
    for (int r = 0; r < v->n_rows; r++) {
        struct tp_mem_owner_usage *u = &v->rows[r];
        struct tp_mem_site_usage *s = v->sites + used;
        int n = 0;
        for (int i = 0; i < v->n; i++)
            if (v->o[i].device == u->device && v->o[i].mclass == u->mclass &&
                v->owner_of[i] == u->owner && (v->end[i] || v->wallocs[i]))
                s[n++] = (struct tp_mem_site_usage){ v->own[i]->site[0] ? v->own[i]->site : "(unknown)",
                                                     v->end[i], v->wallocs[i] };
        qsort(s, (size_t)n, sizeof *s, tp_mv_site_cmp);
        if (n > TP_MEM_TOP_SITES)
            n = TP_MEM_TOP_SITES;
        u->sites = n ? s : NULL;
        u->n_sites = n;
        used += (size_t)n;
    }
}

/* What is still held, by (device, class, owner): the ledger's levels now. */
static void tp_mv_held(struct tp_memview *v)
{
    v->held = calloc((size_t)v->n + 1, sizeof *v->held);
    if (!v->held)
        return;
    for (int i = 0; i < v->n; i++) {
        if (!v->o[i].live)
            continue;
        int k = 0;
        while (k < v->n_held && !(v->held[k].device == v->o[i].device && v->held[k].mclass == v->o[i].mclass &&
                                  v->held[k].owner == v->owner_of[i]))
            k++;
        if (k == v->n_held)
            v->held[v->n_held++] = (struct tp_mem_held){ v->o[i].device, v->o[i].mclass, v->owner_of[i], 0, 0 };
        v->held[k].bytes += v->o[i].live;
        v->held[k].blocks += v->o[i].allocs > v->o[i].frees ? v->o[i].allocs - v->o[i].frees : 0;
    }
}

void tp_memview_finish(struct tp_memview *v, struct tp_window *win, const struct tp_clock_map *map,
                       int at_exit)
{
    if (!v)
        return;
    v->rows = calloc((size_t)v->n + 1, sizeof *v->rows);
    v->pts = calloc(v->n_recs + 1, sizeof *v->pts);
    if (!v->rows || !v->pts)
        return;
    /* the starting level of every row */
    uint64_t named = 0, all = 0;
    for (int i = 0; i < v->n; i++) {
        int r = tp_mv_row(v, v->o[i].device, v->o[i].mclass, v->owner_of[i]);
        v->rows[r].start_bytes += v->o[i].wstart;
        all += v->o[i].allocated;
        if (v->own[i]->named)
            named += v->o[i].allocated;
    }
    uint64_t *level = calloc((size_t)v->n_rows + 1, sizeof *level);
    int *row_of = calloc((size_t)v->n + 1, sizeof *row_of);
    if (!level || !row_of) {
        free(level);
        free(row_of);
        v->n_rows = 0;
        return;
    }
    for (int i = 0; i < v->n; i++)
        row_of[i] = tp_mv_row(v, v->o[i].device, v->o[i].mclass, v->owner_of[i]);
    for (int r = 0; r < v->n_rows; r++)
        level[r] = v->rows[r].peak_bytes = v->rows[r].start_bytes;
    if (v->n_recs > 1)      /* recs is NULL when the window allocated nothing */
        qsort(v->recs, v->n_recs, sizeof *v->recs, tp_mv_rec_cmp);
    for (size_t k = 0; k < v->n_recs; k++) {
        const struct tp_mv_rec *m = &v->recs[k];
        int r = row_of[m->origin];
        struct tp_mem_owner_usage *u = &v->rows[r];
        if (m->alloc) {
            level[r] += m->bytes;
            v->end[m->origin] += m->bytes;
            v->wallocs[m->origin]++;
            u->allocs++;
        } else {
            level[r] -= level[r] >= m->bytes ? m->bytes : level[r];
            v->end[m->origin] -= v->end[m->origin] >= m->bytes ? m->bytes : v->end[m->origin];
            u->frees++;
        }
        if (level[r] > u->peak_bytes)
            u->peak_bytes = level[r];
        v->pts[v->n_pts++] = (struct tp_mem_owner_point){ tp_clock_to_unix_ns(map, m->t1), u->device,
                                                          u->mclass, u->owner, level[r] };
    }
    for (int r = 0; r < v->n_rows; r++)
        v->rows[r].end_bytes = level[r];
    free(level);
    free(row_of);
    /* rows with nothing in the window are left out */
    int kept = 0;
    for (int r = 0; r < v->n_rows; r++) {
        const struct tp_mem_owner_usage *u = &v->rows[r];
        if (u->start_bytes || u->end_bytes || u->allocs || u->frees)
            v->rows[kept++] = *u;
    }
    v->n_rows = kept;
    qsort(v->rows, (size_t)v->n_rows, sizeof *v->rows, tp_mv_row_cmp);
    tp_mv_sites(v);
    if (at_exit)
        tp_mv_held(v);

    win->mem_owner_names = v->names;
    win->n_mem_owner_names = v->n_names;
    win->mem_owners = v->n_rows ? v->rows : NULL;
    win->n_mem_owners = v->n_rows;
    win->mem_owner_points = v->n_pts ? v->pts : NULL;
    win->n_mem_owner_points = v->n_pts;
    win->mem_owners_exact = v->known && !v->recs_lost && !win->dropped;
    win->mem_coverage = all ? (double)named / (double)all : -1;
    win->mem_held = v->n_held ? v->held : NULL;
    win->n_mem_held = v->n_held;
}

void tp_memview_event(const struct tp_memview *v, struct tp_event *ev)
{
    const struct tp_record *r = ev->rec;
    if (!v || !r || r->kind != TP_REC_API)
        return;
    int form = tp_api_form(r->api);
    if ((form != TP_FORM_ALLOC && form != TP_FORM_FREE) || r->u.mem.origin >= (uint32_t)v->n)
        return;
    ev->mem_owner = v->own[r->u.mem.origin]->owner;
    ev->mem_site = v->own[r->u.mem.origin]->site;
}

void tp_memview_free(struct tp_memview *v)
{
    if (!v)
        return;
    free(v->o);
    free(v->own);
    free(v->owner_of);
    free(v->names);
    free(v->recs);
    free(v->end);
    free(v->wallocs);
    free(v->rows);
    free(v->sites);
    free(v->pts);
    free(v->held);
    free(v);
}
