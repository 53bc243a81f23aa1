/*
 * memory.c - DESIGN: the memory handler (README "Outputs"): "<reports>/<trace
 * base>.memory.html", one self-contained page (inline CSS and SVG, no
 * script, no external font) with one step plot per (device, class) of the
 * bytes the process held over the window, and "<trace base>.memory.json"
 * with the same points.  The window's tp_mem_usage rows give each series'
 * start, end and peak (the collector saw every call, also those of threads
 * whose records were dropped); the ALLOC/FREE events give the steps in
 * between: one point per call that changed memory, at the end of the call
 * (its "total" is what was held after it), failed calls listed apart and
 * marked on the time axis.  The peak is marked where the steps first reach
 * peak_bytes (the collector notes its time a little after the call returns;
 * the summary uses the same rule, so all three reports agree).
 * Threads are interleaved in the event stream, so points are sorted by time
 * at close.  A window of 10^6 allocations must not make a 100 MB page:
 * points are thinned per pixel column, keeping the first, lowest, highest
 * and last point of each column, which keeps every visible step and every
 * extreme; the JSON keeps all points up to TP_MEMORY_JSON_POINTS and is
 * thinned the same way beyond.  The page is also well-formed XML (XHTML
 * syntax, UTF-8 characters instead of named entities) so that tests parse it
 * with any XML reader.  Who held the bytes is the memory ledger's account,
 * read from the window (its rows and series of changes per owner), not
 * from the events: the page stacks the owners of each series under its
 * line, the JSON lists each owner's points.  No trace or no memory data: no file; no memory
 * data (a CPU-only window, or TRAINPROF_PROFILE_MEMORY=0) is said once per
 * process at info level, naming the trace, so that "memory" in
 * TRAINPROF_HANDLERS never ends in silence.
 * The parts: memory_points.c (series, sorting, thinning), memory_json.c,
 * memory_html.c (the page and its SVG plots); this file gathers the
 * events and writes the two files.
 */
#include "memory_impl.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/common/grow.h"
#include "collector/common/log.h"
#include "output.h"

/* The first window of this process whose trace got no memory report says
 * why (atomic: a flight dump's window may be written apart). */
static _Atomic int memory_told_none;

static void memory_tell_none(const char *trace)
{
    if (!atomic_exchange(&memory_told_none, 1))
        TP_INFO("memory: no memory report for %s: the window holds no device allocation "
                "or free (none made, or TRAINPROF_PROFILE_MEMORY=0)", trace);
}

static void *memory_open(const struct tp_window *w)
{
    struct mem_state *m = calloc(1, sizeof *m);
    if (m && w->n_mem > 0 && w->mem)
        m->s = calloc((size_t)w->n_mem, sizeof *m->s);
    if (!m || (w->n_mem > 0 && w->mem && !m->s)) {
        free(m);
        TP_ERROR("memory report not written: %s", strerror(ENOMEM));
        return NULL;
    }
    m->n = w->n_mem > 0 && w->mem ? w->n_mem : 0;
    for (int i = 0; i < m->n; i++)
        m->s[i].u = &w->mem[i];
    return m;
}

static void memory_event(void *state, const struct tp_event *ev)
{
    struct mem_state *m = state;
    const struct tp_record *r = ev->rec;
    if (ev->dev || !r || (ev->form != TP_FORM_ALLOC && ev->form != TP_FORM_FREE))
        return;
    if (r->u.mem.flags & TP_MEM_NOOP)
        return;
    int64_t at = ev->ts_ns + (ev->dur_ns > 0 ? ev->dur_ns : 0);
    if (r->u.mem.flags & TP_MEM_FAILED) {
        if (ev->form != TP_FORM_ALLOC)
            return;
        struct mem_fail *f = tp_grow(m->f, &m->capf, m->nf + 1, sizeof *f, 256);
        if (!f) {
            m->oom = 1;
            return;
        }
        m->f = f;
        m->f[m->nf++] = (struct mem_fail){ r->u.mem.device, r->u.mem.mclass, at, r->u.mem.bytes };
        return;
    }
    struct mem_series *s = tp_memrep_series_of(m, r->u.mem.device, r->u.mem.mclass);
    if (!s)
        return;
    struct mem_point *v = tp_grow(s->v, &s->cap, s->n + 1, sizeof *v, 256);
    if (!v) {
        m->oom = 1;
        return;
    }
    s->v = v;
    s->v[s->n++] = (struct mem_point){ at, r->u.mem.total, m->seq++ };
}

static int write_report(const struct tp_window *w, struct tp_saved *saved, const char *ext,
                        int json, struct mem_state *m, int64_t len, struct mem_point **pts,
                        const size_t *npts, struct mem_point *scratch, const struct mem_owner_set *own)
{
    struct tp_output out;
    if (tp_output_open_report(&out, w->reports_folder, saved->trace, ext, w->overwrite, "memory report") != 0)
        return -1;
    struct tp_jsonw j;
    if (tp_jsonw_init(&j, out.fd, 0, 0) == 0) {
        if (json)
            tp_memrep_put_json(&j, m, w, len, pts, npts, own);
        else
            tp_memrep_put_html(&j, m, w, len, pts, npts, scratch, own);
    }
    int err = tp_jsonw_finish(&j);
    return tp_output_report_done(&out, err, saved);
}

static void memory_free(struct mem_state *m)
{
    for (int i = 0; i < m->n; i++)
        free(m->s[i].v);
    free(m->s);
    free(m->f);
    free(m);
}

static int memory_close(void *state, const struct tp_window *w, struct tp_saved *saved)
{
    struct mem_state *m = state;
    m->trace = saved->trace;
    int rc = 0;
    if (m->n == 0) {            /* no memory series: not an allocation failure */
        if (saved->trace[0])
            memory_tell_none(saved->trace);
        memory_free(m);
        return 0;
    }
    struct mem_point **pts = calloc((size_t)m->n, sizeof *pts);
    size_t *npts = calloc((size_t)m->n, sizeof *npts);
    struct mem_owner_set *own = calloc((size_t)m->n, sizeof *own);
    struct mem_point *scratch = NULL;
    if (!saved->trace[0])
        goto out;
    if (!pts || !npts || !own) {
        TP_ERROR("memory report of %s not written: %s", saved->trace, strerror(ENOMEM));
        rc = -1;
        goto out;
    }
    int64_t len = w->end_ns > w->start_ns ? w->end_ns - w->start_ns : 0;
    size_t most = 0;
    int any = 0;
    for (int i = 0; i < m->n; i++) {
        if (!tp_memrep_has_data(&m->s[i]))
            continue;
        pts[i] = tp_memrep_points(&m->s[i], w->start_ns, len, &npts[i]);
        if (!pts[i]) {
            m->oom = 1;
            continue;
        }
        any = 1;
        if (npts[i] > most)
            most = npts[i];
        if (tp_memrep_owners(w, m->s[i].u, len, &own[i]) != 0)
            m->oom = 1;
        for (int k = 0; k < own[i].n; k++)
            if (own[i].o[k].n > most)
                most = own[i].o[k].n;
    }
    if (!any) {
        if (!m->oom)
            memory_tell_none(saved->trace);
        goto out;
    }
    if (m->nf)
        qsort(m->f, m->nf, sizeof *m->f, tp_memrep_cmp_fail);
    if (most > 4 * (size_t)AREA_W)
        scratch = malloc(most * sizeof *scratch);
    if (write_report(w, saved, "memory.json", 1, m, len, pts, npts, scratch, own) != 0)
        rc = -1;
    if (write_report(w, saved, "memory.html", 0, m, len, pts, npts, scratch, own) != 0)
        rc = -1;
out:
    for (int i = 0; pts && i < m->n; i++)
        free(pts[i]);
    for (int i = 0; own && i < m->n; i++)
        tp_memrep_owners_free(&own[i]);
    free(own);
    free(pts);
    free(npts);
    free(scratch);
    memory_free(m);
    return rc;
}

const struct tp_handler tp_handler_memory = {
    .name = "memory",
    .open = memory_open,
    .event = memory_event,
    .close = memory_close,
};
