/*
 * memory_impl.h - what the files of the memory report share (private):
 * the points of each (device, class) series, gathered by the handler
 * (memory.c) and prepared by memory_points.c with those of its owners
 * (the memory ledger's, from the window), written as JSON
 * (memory_json.c) and as an HTML page with SVG plots (memory_html.c).
 */
#ifndef TRAINPROF_HANDLERS_MEMORY_IMPL_H
#define TRAINPROF_HANDLERS_MEMORY_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "handler.h"
#include "jsonw.h"
#include "memory.h"

#define TP_MEMORY_JSON_POINTS 20000   /* more points than this are thinned */
#define TP_MEMORY_JSON_COLUMNS 5000   /* ... to at most 4 per column */

/* Plot geometry, in SVG user units (= CSS px). */
#define PLOT_W 880
#define PLOT_H 300
#define MARGIN_L 72
#define MARGIN_R 24
#define MARGIN_T 24
#define MARGIN_B 44
#define AREA_W (PLOT_W - MARGIN_L - MARGIN_R)
#define AREA_H (PLOT_H - MARGIN_T - MARGIN_B)

struct mem_point {
    int64_t ns;                  /* since window start */
    uint64_t bytes;
    uint64_t seq;                /* arrival order, breaks ties */
};

struct mem_series {
    const struct tp_mem_usage *u;
    struct mem_point *v;
    size_t n, cap;
};

/* One owner of a series (the memory ledger's row for its device and
 * class): its step points over [0, len], framed by its start and end
 * levels as the series' are. */
struct mem_owner_line {
    const struct tp_mem_owner_usage *u;
    const char *name;
    struct mem_point *p;
    size_t n;
};

struct mem_owner_set {
    struct mem_owner_line *o;    /* most held at the end first (the rows' order) */
    int n;
};

/* The owners' levels stacked: n states in time order, each "k + 1"
 * values: its time (ns since the window start) then every owner's bytes
 * from then on, owner 0 first. */
struct mem_stack {
    int k;
    size_t n, cap;
    uint64_t *s;
};

struct mem_fail {
    int device;
    unsigned mclass;
    int64_t ns;
    uint64_t bytes;
};

struct mem_state {
    struct mem_series *s;
    int n;
    int last;                    /* index of the previous event's series */
    struct mem_fail *f;
    size_t nf, capf;
    uint64_t seq;
    int oom;
    const char *trace;           /* the saved trace, at close */
};

/* ---- points (memory_points.c) ---- */

/* 1 if the series has anything to show. */
int tp_memrep_has_data(const struct mem_series *s);

/* The series of (device, class), NULL if the window has no such row. */
struct mem_series *tp_memrep_series_of(struct mem_state *m, int device, unsigned mclass);

/* The series' points sorted by time, framed by its start and end levels,
 * as a malloc'ed array of *n; NULL when out of memory. */
struct mem_point *tp_memrep_points(struct mem_series *s, int64_t t0, int64_t len, size_t *n);

/* At most 4 points per pixel column of "cols" over "len" ns into "out"
 * (first, lowest, highest, last); returns how many. */
size_t tp_memrep_thin(const struct mem_point *p, size_t n, int64_t len, int cols,
                      struct mem_point *out);

/* qsort order of failed allocations: by time. */
int tp_memrep_cmp_fail(const void *a, const void *b);

/* The trace's file name, without its folder. */
const char *tp_memrep_trace_name(const char *trace);

/* When the series first reached its peak, ns since the window start. */
int64_t tp_memrep_peak_rel(const struct tp_window *w, const struct tp_mem_usage *u, int64_t len,
                           const struct mem_point *p, size_t n);

/* The owners of the series of "u" from the window's ledger (rows that
 * show nothing left out) into *set; 0, or -1 when out of memory (*set
 * then empty).  tp_memrep_owners_free frees what it holds. */
int tp_memrep_owners(const struct tp_window *w, const struct tp_mem_usage *u, int64_t len,
                     struct mem_owner_set *set);
void tp_memrep_owners_free(struct mem_owner_set *set);

/* The owners of "set" stacked into *st: one state per time any of them
 * changed, or with more changes than 4 per column of "cols" over "len",
 * per column the first state, those of the lowest and highest sum, and
 * the last.  0, or -1 when out of memory.  tp_memrep_stack_free frees it. */
int tp_memrep_stack(const struct mem_owner_set *set, int64_t len, int cols, struct mem_stack *st);
void tp_memrep_stack_free(struct mem_stack *st);

/* ---- writers (memory_json.c, memory_html.c) ---- */

void tp_memrep_put_json(struct tp_jsonw *j, struct mem_state *m, const struct tp_window *w,
                        int64_t len, struct mem_point **pts, const size_t *npts,
                        const struct mem_owner_set *own);
void tp_memrep_put_html(struct tp_jsonw *j, struct mem_state *m, const struct tp_window *w,
                        int64_t len, struct mem_point **pts, const size_t *npts,
                        struct mem_point *scratch, const struct mem_owner_set *own);

#endif
