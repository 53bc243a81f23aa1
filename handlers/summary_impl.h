/*
 * summary_impl.h - what the two files of the summary share (private): the
 * figures gathered while the window streams (summary_agg.c, the handler's
 * open and event) and read at close to lay out the report (summary.c).
 */
#ifndef TRAINPROF_HANDLERS_SUMMARY_IMPL_H
#define TRAINPROF_HANDLERS_SUMMARY_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "handler.h"

/* What a row of the operator tables stands for (struct agg's kind). */
enum { TP_SUMROW_OP, TP_SUMROW_ANNOTATION, TP_SUMROW_STEP };

struct agg {
    char *name;
    uint64_t calls;
    int64_t total_ns, max_ns;
    uint64_t flops;
    int64_t self_ns, gpu_ns;     /* torch's operators: host time less their
                                    children's; device work linked to them */
    int kind;                    /* operator tables: TP_SUMROW_* */
};

/* The row "ProfilerStep*" of the operator tables: every recorded step of
 * the window in one row (tp_sumagg_finish_ops says why). */
#define TP_SUMMARY_STEP_ROW "ProfilerStep*"

/* The by-shape table's keys: the name, this byte, the input shapes as
 * torch wrote them ("[]" when it wrote none). */
#define TP_SUMMARY_SHAPE_SEP '\x1f'

struct agg_table {
    struct agg *slots;           /* open addressing, name NULL = empty */
    size_t n, cap;
    struct agg *last;            /* the previous lookup's entry */
};

struct step_row {
    uint64_t index;
    int64_t dur_ns;
    int64_t start_ns;            /* Unix ns */
    int32_t tid;                 /* the thread that signalled it */
};

/* Collectives per (kind, group size). */
struct coll_row {
    unsigned op, ranks;
    uint64_t calls;
    double size;                 /* bytes moved as nccl-tests counts them */
    double bus;                  /* size x bus bandwidth factor */
    int64_t host_ns, dev_ns;     /* call durations; kernels they issued */
};

/* summary_agg.c's own: only it looks inside. */
struct span;
struct op_thread;
struct op_ref;

struct summary {
    struct agg_table apis, kernels, libs, gpu, ops;
    struct agg_table op_shapes;  /* ops' rows by (name, input shapes), from
                                    the first operator with shapes on */
    int shapes_on;
    uint64_t ops_with_shapes;    /* operators that carried input shapes */
    int64_t ops_self_ns;         /* the self time of every row of ops (tp_sumagg_finish_ops) */
    int ops_finished;
    struct op_thread *op_threads;
    size_t n_op_threads, cap_op_threads;
    struct op_ref *op_refs;      /* sorted at the first device event */
    size_t n_op_refs, cap_op_refs;
    int op_refs_sorted;
    struct coll_row *coll;
    size_t ncoll, capcoll;
    uint64_t coll_captured;      /* calls made during a graph capture: not counted */
    const struct tp_mem_usage *mem; /* w->mem, for peak times */
    int n_mem;
    int64_t *peak_at;            /* per w->mem row: end of the call that reached the peak, 0 unseen */
    uint64_t lib_flops;
    uint64_t graph_flops;        /* library FLOPs run by CUDA graph launches */
    struct step_row *steps;
    size_t nsteps, capsteps;
    int64_t host_ns;             /* sum of API and launch durations */
    uint64_t launches;
    struct span *busy;           /* device work (kernels, copies, sets) */
    size_t nbusy, capbusy;
    int64_t gpu_ns;              /* sum of device work durations */
    int oom;
};

/* tp_sumagg_open - the handler's open(): a zeroed struct summary for window
 * "w", with a peak time slot per w->mem row (none if that allocation fails:
 * the report then uses the collector's peak times).  Returns it, or NULL
 * after logging an error when out of memory (no summary for this window). */
void *tp_sumagg_open(const struct tp_window *w);

/* tp_sumagg_event - the handler's event(): adds event "ev" to the struct
 * summary "state".  Out of memory sets its oom flag and drops the event. */
void tp_sumagg_event(void *state, const struct tp_event *ev);

/* tp_sumagg_finish_ops - completes the operator tables once every event
 * is in: the row TP_SUMMARY_STEP_ROW (the steps' time, their self time the
 * part not inside any top-level operator or annotation of the step's
 * thread) when the window has operators, and ops_self_ns, the sum of all
 * rows' self time that the percentages divide by.  Calling it again
 * changes nothing. */
void tp_sumagg_finish_ops(struct summary *s);

/* tp_summary_shape_split - the input shapes part of by-shape key "key"
 * (after TP_SUMMARY_SHAPE_SEP), and in *name_len the length of its name. */
const char *tp_summary_shape_split(const char *key, size_t *name_len);

/* tp_sumagg_merge_busy - merges the device spans of "s" (streams overlap)
 * into disjoint ones sorted by start, in place; merging again changes
 * nothing. */
void tp_sumagg_merge_busy(struct summary *s);

/* tp_sumagg_busy_within - ns of [a, b) during which the GPU ran some work;
 * the spans must have been merged (tp_sumagg_merge_busy). */
int64_t tp_sumagg_busy_within(const struct summary *s, int64_t a, int64_t b);

/* tp_sumagg_free - frees "s" and everything it holds, names included. */
void tp_sumagg_free(struct summary *s);

/* The helpers summary.c and summary_json.c share (summary_agg.c). */

/* tp_summary_cmp_total, tp_summary_cmp_calls - qsort order of struct agg
 * pointers: by total time (or calls) descending, then by name. */
int tp_summary_cmp_total(const void *a, const void *b);
int tp_summary_cmp_calls(const void *a, const void *b);

/* tp_summary_cmp_step, tp_summary_cmp_coll - qsort order of step rows (by
 * index) and of collective rows (by kind, then group size). */
int tp_summary_cmp_step(const void *a, const void *b);
int tp_summary_cmp_coll(const void *a, const void *b);

/* tp_summary_sorted - the entries of "t" sorted by "cmp", a malloc'd array
 * of t->n pointers into the table (the caller frees it); NULL if the table
 * is empty or memory ran out. */
struct agg **tp_summary_sorted(const struct agg_table *t, int (*cmp)(const void *, const void *));

/* tp_summary_step_flops - the library FLOPs of recorded step "index" (the
 * window's step list), 0 if unknown. */
uint64_t tp_summary_step_flops(const struct tp_window *w, uint64_t index);

/* tp_summary_step_span - the Unix ns span [*a, *b) of recorded step
 * "index"; 1, or 0 if the window's step list does not have it. */
int tp_summary_step_span(const struct tp_window *w, uint64_t index, int64_t *a, int64_t *b);

/* tp_summary_mem_has_data - 1 if the (device, class) row saw any memory. */
int tp_summary_mem_has_data(const struct tp_mem_usage *u);

/* tp_summary_coll_device - 1 when CUPTI saw kernels of the window's
 * collectives, so that their time is device time (else host-enqueue). */
int tp_summary_coll_device(const struct summary *s, const struct tp_window *w);

/*
 * tp_summary_json_write - "<reports>/<trace base>.summary.json" (summary_json.c):
 * the window's figures for machines, schema TP_SUMMARY_SCHEMA (README,
 * "summary.json"), written atomically through output.c and listed in
 * "saved".  Sorts the steps and collectives and merges the busy spans of
 * "s" (as the text report does).  Returns 0, or -1 after one error line.
 */
#define TP_SUMMARY_SCHEMA "trainprof.summary/1.1"
int tp_summary_json_write(struct summary *s, const struct tp_window *w, struct tp_saved *saved);

#endif
