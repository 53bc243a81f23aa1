/*
 * chrome.c - DESIGN: the Kineto-compatible trace (README "What is in a
 * trace"), streamed; the handler and its events.  open() writes the
 * top-level keys up to "traceEvents": [ (chrome_header.c), event() appends
 * one event per line as it arrives (a host call's arguments:
 * chrome_args.c), close() appends the metadata events of every thread seen
 * and "traceName", then commits the file through output.c (temporary name,
 * rename).  Nothing is buffered per event besides the writer's buffers, a
 * small (pid, tid) table for the metadata rows and a table of names'
 * texts (chrome_text.c: ph, cat and the quoted, escaped name, for names
 * up to CHROME_TEXT_MAX bytes: most events repeat a few names, and a copy
 * costs a tenth of escaping), so memory does not grow with the
 * window.  The window's steps come first (parents before their
 * children), with no FLOPs track of zeros.  The memory ledger's account
 * is in the window, not the events: each [memory] instant names its
 * owner and call site from its event, and close() writes one counter
 * track per (device, class) with every owner's bytes in each point's
 * args (chrome://tracing stacks them; Perfetto draws a track per owner).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/common/log.h"
#include "collector/contract/device.h"
#include "chrome_impl.h"

static size_t thread_hash(int32_t pid, int32_t tid, size_t cap)
{
    uint64_t k = ((uint64_t)(uint32_t)pid << 32) | (uint32_t)tid;
    k *= 0x9e3779b97f4a7c15ull;
    return (size_t)(k >> 32) & (cap - 1);
}

static struct chrome_thread *thread_slot(struct chrome_thread *t, size_t cap, int32_t pid, int32_t tid)
{
    size_t i = thread_hash(pid, tid, cap);
    while (t[i].used && (t[i].pid != pid || t[i].tid != tid))
        i = (i + 1) & (cap - 1);
    return &t[i];
}

static void note_thread(struct chrome *c, const struct tp_event *ev)
{
    struct chrome_thread *t = &c->threads[c->last];
    if (!(t->used && t->pid == ev->pid && t->tid == ev->tid)) {
        if ((c->nthreads + 1) * 2 > c->cap) {
            size_t ncap = c->cap * 2;
            struct chrome_thread *n = calloc(ncap, sizeof *n);
            if (!n)
                return;
            for (size_t i = 0; i < c->cap; i++)
                if (c->threads[i].used)
                    *thread_slot(n, ncap, c->threads[i].pid, c->threads[i].tid) = c->threads[i];
            free(c->threads);
            c->threads = n;
            c->cap = ncap;
        }
        t = thread_slot(c->threads, c->cap, ev->pid, ev->tid);
        if (!t->used) {
            t->used = 1;
            t->pid = ev->pid;
            t->tid = ev->tid;
            c->nthreads++;
        }
        c->last = (size_t)(t - c->threads);
    }
    if (!t->name[0] && ev->thread_name && ev->thread_name[0]) {
        size_t n = strlen(ev->thread_name);
        if (n >= sizeof t->name)
            n = sizeof t->name - 1;
        memcpy(t->name, ev->thread_name, n);
        t->name[n] = '\0';
    }
}

static void put_steps(struct chrome *c, const struct tp_window *w);
static void put_mem_levels(struct chrome *c, const struct tp_window *w, int end);

static void *chrome_open(const struct tp_window *w)
{
    if (!w->trace_filename || !w->trace_filename[0]) {
        TP_ERROR("no trace file name; trace not written");
        return NULL;
    }
    struct chrome *c = calloc(1, sizeof *c);
    if (!c) {
        TP_ERROR("trace not written: %s", strerror(ENOMEM));
        return NULL;
    }
    char path[TP_PATH_MAX];
    const char *dir = w->trace_folder && w->trace_folder[0] ? w->trace_folder : ".";
    size_t dl = strlen(dir);
    int n = snprintf(path, sizeof path, "%s%s%s%s", dir, dir[dl - 1] == '/' ? "" : "/",
                     w->trace_filename, w->gzip ? ".gz" : "");
    if (n < 0 || (size_t)n >= sizeof path) {
        TP_ERROR("cannot write %s/%s: %s", dir, w->trace_filename, strerror(ENAMETOOLONG));
        free(c);
        return NULL;
    }
    c->cap = 64;
    c->texts = calloc(CHROME_TEXTS, sizeof *c->texts);   /* NULL: names escaped per event */
    c->threads = calloc(c->cap, sizeof *c->threads);
    if (!c->threads) {
        TP_ERROR("cannot write %s: %s", path, strerror(ENOMEM));
        free(c->texts);
        free(c);
        return NULL;
    }
    if (tp_output_open(&c->out, path, 0, w->overwrite) != 0) {
        free(c->texts);
        free(c->threads);
        free(c);
        return NULL;
    }
    if (tp_jsonw_init(&c->j, c->out.fd, w->gzip, TP_JSONW_GZIP_LEVEL) != 0) {
        tp_output_abort(&c->out, c->j.err);
        tp_jsonw_finish(&c->j);
        free(c->texts);
        free(c->threads);
        free(c);
        return NULL;
    }
    c->base = w->base_time_ns;
    c->record_shapes = w->record_shapes;
    tp_chrome_dist_rank(w, &c->rank, &c->world_size);
    c->steps = w->steps;
    c->n_steps = w->steps ? w->steps_recorded : 0;
    for (uint64_t i = 0; i < c->n_steps; i++)
        c->flops_track |= c->steps[i].flops > 0;
    c->meta_ts = w->start_ns > c->base ? w->start_ns - c->base : 0;
    tp_chrome_put_header(c, w);
    put_steps(c, w);
    put_mem_levels(c, w, 0);
    return c;
}

static void put_ts(struct chrome *c, int64_t ts_ns)
{
    int64_t rel = ts_ns - c->base;
    tp_jsonw_us(&c->j, rel > 0 ? rel : 0);
}

/* The text `, "pid": P, "tid": T, "ts": ` of the last (pid, tid), kept:
 * most events come from a few threads, one after another.  At most 48
 * bytes (two int32s of 11), so that 64 may be copied. */
static const char *ids_text(struct chrome *c, const struct tp_event *ev)
{
    if (c->ids_len == 0 || ev->pid != c->ids_pid || ev->tid != c->ids_tid) {
        char *p = c->ids;
        p = TP_JSONW_PUT_LIT(p, ", \"pid\": ");
        p = tp_jsonw_put_i64(p, ev->pid);
        p = TP_JSONW_PUT_LIT(p, ", \"tid\": ");
        p = tp_jsonw_put_i64(p, ev->tid);
        p = TP_JSONW_PUT_LIT(p, ", \"ts\": ");
        c->ids_len = (size_t)(p - c->ids);
        c->ids_pid = ev->pid;
        c->ids_tid = ev->tid;
    }
    return c->ids;
}

/* Names up to this long go in one room with the rest of the head. */
#define HEAD_NAME_ONCE 4096

/* {"ph": PH, "cat": CAT, "name": NAME, "pid": P, "tid": T, "ts": TS
 * in one room of the writer (jsonw.h's cursor); "ph_cat" ends with
 * "name": . */
static void put_head_n(struct chrome *c, const char *ph_cat, size_t ph_cat_len,
                       const char *name, size_t name_len, const struct tp_event *ev)
{
    struct tp_jsonw *j = &c->j;
    int64_t rel = ev->ts_ns - c->base;
    if (name_len <= HEAD_NAME_ONCE && ph_cat_len <= 128) {
        char *p = tp_jsonw_room(j, 2 + ph_cat_len + TP_JSONW_STR_ROOM(name_len) + sizeof c->ids + 25);
        if (!p)
            return;
        if (c->events++)
            p = TP_JSONW_PUT_LIT(p, ",\n");
        else
            *p++ = '\n';
        memcpy(p, ph_cat, ph_cat_len);
        p = tp_jsonw_put_strn(p + ph_cat_len, name, name_len);
        const char *ids = ids_text(c, ev);
        memcpy(p, ids, c->ids_len);
        p = tp_jsonw_put_us(p + c->ids_len, rel > 0 ? rel : 0);
        tp_jsonw_done(j, p);
        return;
    }
    if (c->events++)
        LIT(j, ",\n");
    else
        tp_jsonw_char(j, '\n');
    tp_jsonw_raw(j, ph_cat, ph_cat_len);
    tp_jsonw_strn(j, name, name_len);
    LIT(j, ", \"pid\": ");
    tp_jsonw_i64(j, ev->pid);
    LIT(j, ", \"tid\": ");
    tp_jsonw_i64(j, ev->tid);
    LIT(j, ", \"ts\": ");
    put_ts(c, ev->ts_ns);
}

/* put_head_n for a NUL-terminated name: from the table of names' texts
 * (tp_chrome_text), two copies and the time stamp. */
static void put_head(struct chrome *c, const char *ph_cat, size_t ph_cat_len,
                     const char *name, const struct tp_event *ev)
{
    const struct chrome_text *t = tp_chrome_text(c, ph_cat, ph_cat_len, name);
    if (!t) {
        put_head_n(c, ph_cat, ph_cat_len, name, strlen(name), ev);
        return;
    }
    struct tp_jsonw *j = &c->j;
    int64_t rel = ev->ts_ns - c->base;
    /* the ids' copy (sizeof c->ids at most) takes the text's 15 spare bytes */
    char *p = tp_jsonw_room(j, 2 + t->len + sizeof c->ids + 25);
    if (!p)
        return;
    if (c->events++)
        p = TP_JSONW_PUT_LIT(p, ",\n");
    else
        *p++ = '\n';
    p = tp_chrome_copy16(p, t->text, t->len);
    const char *ids = ids_text(c, ev);
    p = tp_chrome_copy16(p, ids, c->ids_len);
    p = tp_jsonw_put_us(p, rel > 0 ? rel : 0);
    tp_jsonw_done(j, p);
}

#define HEAD(c, phcat, name, ev) \
    put_head((c), "" phcat "\"name\": ", sizeof(phcat "\"name\": ") - 1, (name), (ev))
#define HEADN(c, phcat, name, len, ev) \
    put_head_n((c), "" phcat "\"name\": ", sizeof(phcat "\"name\": ") - 1, (name), (len), (ev))

static void put_dur(struct chrome *c, const struct tp_event *ev)
{
    LIT(&c->j, ", \"dur\": ");
    tp_jsonw_us(&c->j, ev->dur_ns > 0 ? ev->dur_ns : 0);
}


/* A collective as torch's ProcessGroupNCCL leaves it in a Kineto trace:
 * the "nccl:all_reduce" record_function (a user_annotation) around the
 * record_param_comms op that holds the collective's args; our call itself
 * comes inside both, the three over the same span, parents first in the
 * file.  The annotation takes the call's External id, the one its launches
 * and kernels carry (TensorBoard's Distributed view joins a collective's
 * kernels to it by that id); the two inside get ids of their own, in
 * ranges above our correlation ids and below 2^53. */
#define TP_PARAM_COMMS_ID(id) ((UINT64_C(1) << 50) + (id))
#define TP_COLL_CALL_ID(id)   ((UINT64_C(1) << 51) + (id))

static void put_coll_layers(struct chrome *c, const struct tp_event *ev)
{
    struct tp_jsonw *j = &c->j;
    const struct tp_record *r = ev->rec;
    uint64_t in, out;
    tp_chrome_coll_nelems(r, &in, &out);
    HEAD(c, "{\"ph\": \"X\", \"cat\": \"user_annotation\", ", tp_coll_annotation(r->u.lib.op), ev);
    put_dur(c, ev);
    put_key_u64(j, ", \"args\": {\"External id\": ", ev->external_id);
    put_key_u64(j, ", \"Record function id\": ", ev->external_id);
    put_key_u64(j, ", \"Input Dims\": [[", in);
    put_key_str(j, "]], \"Input type\": [", tp_dtype_cpp_name(r->u.lib.dtype));
    LIT(j, "]}}");
    HEAD(c, "{\"ph\": \"X\", \"cat\": \"cpu_op\", ", "record_param_comms", ev);
    put_dur(c, ev);
    put_key_u64(j, ", \"args\": {\"External id\": ", TP_PARAM_COMMS_ID(ev->external_id));
    put_key_u64(j, ", \"Record function id\": ", TP_PARAM_COMMS_ID(ev->external_id));
    tp_chrome_put_coll(c, r);
    LIT(j, "}}");
}

/* One end of an ac2g flow, at the event's own pid, tid and ts (Perfetto
 * binds the start to the launch, the end with "bp": "e" to the kernel). */
static void put_flow(struct chrome *c, const struct tp_event *ev, char ph)
{
    if (ph == 'f')
        HEAD(c, "{\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"ac2g\", ", "ac2g", ev);
    else
        HEAD(c, "{\"ph\": \"s\", \"cat\": \"ac2g\", ", "ac2g", ev);
    put_key_u64(&c->j, ", \"id\": ", ev->correlation);
    tp_jsonw_char(&c->j, '}');
}

/* One end of a fwdbwd flow (Kineto's forward-to-backward link, oplink.c):
 * the start at the forward operator, the end ("bp": "e") at the backward
 * node; "id" is the node's op id, unique in the trace. */
static void put_fwdbwd(struct chrome *c, const struct tp_event *ev, char ph, uint64_t id)
{
    if (ph == 'f')
        HEAD(c, "{\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"fwdbwd\", ", "fwdbwd", ev);
    else
        HEAD(c, "{\"ph\": \"s\", \"cat\": \"fwdbwd\", ", "fwdbwd", ev);
    put_key_u64(&c->j, ", \"id\": ", id);
    tp_jsonw_char(&c->j, '}');
}

/* The counter track of (device, class): Perfetto draws one memory track
 * per name, "<name> bytes". */
static void mem_track_name(char *buf, size_t n, int device, int mclass)
{
    if (mclass == TP_MEM_HOST)
        snprintf(buf, n, "Host pinned memory");
    else if (mclass == TP_MEM_MANAGED)
        snprintf(buf, n, "GPU %d managed memory", device);
    else
        snprintf(buf, n, "GPU %d memory reserved", device);
}

static void put_mem_counter(struct chrome *c, const struct tp_event *at, int64_t ts_ns, int device,
                            int mclass, uint64_t bytes)
{
    char name[64];
    mem_track_name(name, sizeof name, device, mclass);
    struct tp_event e = *at;
    e.ts_ns = ts_ns;
    e.tid = e.pid;
    HEAD(c, "{\"ph\": \"C\", ", name, &e);
    put_key_u64(&c->j, ", \"args\": {\"bytes\": ", bytes);
    LIT(&c->j, "}}");
}

/* Kineto's [memory] instant at the end of an allocation or free that
 * changed what the process holds, and the (device, class) counter.  Both
 * totals are the process's bytes from CUDA: a caching allocator's own
 * "allocated" share is invisible from here. */
static void put_memory(struct chrome *c, const struct tp_event *ev)
{
    struct tp_jsonw *j = &c->j;
    const struct tp_record *r = ev->rec;
    struct tp_event e = *ev;
    e.ts_ns = ev->ts_ns + (ev->dur_ns > 0 ? ev->dur_ns : 0);
    int host = r->u.mem.mclass == TP_MEM_HOST;
    HEAD(c, "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", ", "[memory]", &e);
    LIT(j, ", \"args\": {\"Device Type\": ");
    tp_jsonw_i64(j, host ? 0 : 1);
    LIT(j, ", \"Device Id\": ");
    tp_jsonw_i64(j, host ? -1 : r->u.mem.device);
    put_key_u64(j, ", \"Addr\": ", r->u.mem.addr);
    LIT(j, ", \"Bytes\": ");
    uint64_t b = r->u.mem.bytes > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : r->u.mem.bytes;
    tp_jsonw_i64(j, ev->form == TP_FORM_FREE ? -(int64_t)b : (int64_t)b);
    put_key_u64(j, ", \"Total Allocated\": ", r->u.mem.total);
    put_key_u64(j, ", \"Total Reserved\": ", r->u.mem.total);
    if (ev->mem_owner) {        /* the memory ledger's account of the call */
        put_key_str(j, ", \"Owner\": ", ev->mem_owner);
        put_key_str(j, ", \"Site\": ", ev->mem_site ? ev->mem_site : "");
    }
    LIT(j, "}}");
    put_mem_counter(c, &e, e.ts_ns, host ? -1 : r->u.mem.device, r->u.mem.mclass, r->u.mem.total);
}

/* The level of every memory track when the window began or ended. */
static void put_mem_levels(struct chrome *c, const struct tp_window *w, int end)
{
    struct tp_event at = { .pid = w->pid, .tid = w->pid, .thread_name = "" };
    for (int i = 0; w->mem && i < w->n_mem; i++) {
        const struct tp_mem_usage *u = &w->mem[i];
        put_mem_counter(c, &at, end ? w->end_ns : w->start_ns, u->device, u->mclass,
                        end ? u->end_bytes : u->start_bytes);
    }
}

/* The owner track of (device, class): one counter per name, its args
 * every owner's bytes, which chrome://tracing stacks and Perfetto splits
 * into one track per owner. */
static void owner_track_name(char *buf, size_t n, int device, int mclass)
{
    if (mclass == TP_MEM_HOST)
        snprintf(buf, n, "Host pinned memory by owner");
    else if (mclass == TP_MEM_MANAGED)
        snprintf(buf, n, "GPU %d managed memory by owner", device);
    else
        snprintf(buf, n, "GPU %d memory by owner", device);
}

/* An owner of one track: its name (unique in the track: two owner indices
 * of one name would write one key twice), the bytes it holds now and at
 * the window's end; "rowless": no row of w->mem_owners names it (the
 * ledger's rows and series disagree), its end is its last point. */
struct owner_col {
    const char *name;
    uint64_t bytes, end;
    int rowless;
};

static void put_owner_counter(struct chrome *c, const struct tp_window *w, const char *track,
                              int64_t ts_ns, const struct owner_col *col, int ncol)
{
    struct tp_event e = { .pid = w->pid, .tid = w->pid, .ts_ns = ts_ns };
    HEAD(c, "{\"ph\": \"C\", ", track, &e);
    LIT(&c->j, ", \"args\": {");
    for (int k = 0; k < ncol; k++) {
        if (k)
            LIT(&c->j, ", ");
        tp_jsonw_str(&c->j, col[k].name);
        LIT(&c->j, ": ");
        tp_jsonw_u64(&c->j, col[k].bytes);
    }
    LIT(&c->j, "}}");
}

/* The column of owner index "o" in a track of *ncol columns, added if new
 * ("slot": per owner index, its column or -1); -1 for an index with no name. */
static int owner_col_of(const struct tp_window *w, struct owner_col *col, int *ncol, int *slot,
                        unsigned o, int rowless)
{
    if (o >= (unsigned)w->n_mem_owner_names || !w->mem_owner_names[o])
        return -1;
    if (slot[o] >= 0)
        return slot[o];
    for (int k = 0; k < *ncol; k++)
        if (!strcmp(col[k].name, w->mem_owner_names[o]))
            return slot[o] = k;
    col[*ncol] = (struct owner_col){ .name = w->mem_owner_names[o], .rowless = rowless };
    return slot[o] = (*ncol)++;
}

/* The memory ledger's owners as counter tracks, one per (device, class)
 * of w->mem_owners: a point at the window's start with every owner's
 * start level, one per change of the series, one at the end with every
 * owner's end level (as the reserved-memory tracks begin and end). */
static void put_owner_tracks(struct chrome *c, const struct tp_window *w)
{
    if (!w->mem_owners || w->n_mem_owners <= 0 || !w->mem_owner_names || w->n_mem_owner_names <= 0)
        return;
    size_t names = (size_t)w->n_mem_owner_names;
    struct owner_col *col = malloc(names * sizeof *col);
    int *slot = malloc(names * sizeof *slot);
    if (!col || !slot)
        goto out;
    for (int i = 0; i < w->n_mem_owners; i++) {
        const struct tp_mem_owner_usage *first = &w->mem_owners[i];
        int seen = 0;       /* the track of an earlier row: written then */
        for (int k = 0; k < i && !seen; k++)
            seen = w->mem_owners[k].device == first->device && w->mem_owners[k].mclass == first->mclass;
        if (seen)
            continue;
        int ncol = 0;
        for (size_t o = 0; o < names; o++)
            slot[o] = -1;
        for (int k = i; k < w->n_mem_owners; k++) {
            const struct tp_mem_owner_usage *u = &w->mem_owners[k];
            if (u->device != first->device || u->mclass != first->mclass)
                continue;
            int x = owner_col_of(w, col, &ncol, slot, u->owner, 0);
            if (x >= 0) {
                col[x].bytes += u->start_bytes;
                col[x].end += u->end_bytes;
            }
        }
        if (!ncol)
            continue;
        char track[64];
        owner_track_name(track, sizeof track, first->device, first->mclass);
        put_owner_counter(c, w, track, w->start_ns, col, ncol);
        for (size_t p = 0; w->mem_owner_points && p < w->n_mem_owner_points; p++) {
            const struct tp_mem_owner_point *pt = &w->mem_owner_points[p];
            if (pt->device != first->device || pt->mclass != first->mclass)
                continue;
            int x = owner_col_of(w, col, &ncol, slot, pt->owner, 1);
            if (x < 0)
                continue;
            col[x].bytes = pt->bytes;
            if (col[x].rowless)
                col[x].end = pt->bytes;
            int64_t ts = pt->ts_ns < w->start_ns ? w->start_ns : pt->ts_ns > w->end_ns ? w->end_ns : pt->ts_ns;
            put_owner_counter(c, w, track, ts, col, ncol);
        }
        for (int x = 0; x < ncol; x++)
            col[x].bytes = col[x].end;
        put_owner_counter(c, w, track, w->end_ns, col, ncol);
    }
out:
    free(col);
    free(slot);
}

static void put_call(struct chrome *c, const struct tp_event *ev)
{
    struct tp_jsonw *j = &c->j;
    const struct tp_record *r = ev->rec;
    const char *name = ev->name && ev->name[0] ? ev->name : "unknown";
    if (ev->layer == TP_LAYER_LIBRARY && ev->form == TP_FORM_COLL)
        put_coll_layers(c, ev);
    switch (ev->layer) {
    case TP_LAYER_DRIVER:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"cuda_driver\", ", name, ev);
        break;
    case TP_LAYER_LIBRARY:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"cpu_op\", ", name, ev);
        break;
    default:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", ", name, ev);
    }
    /* dur, the ids and cbid: at most 9 + 25 + 23 + 20 + 18 + 20 + 10 + 21
     * bytes, and 12 that the External id's copy may write past its end */
    char *p = tp_jsonw_room(j, 176);
    if (!p)
        return;
    p = TP_JSONW_PUT_LIT(p, ", \"dur\": ");
    p = tp_jsonw_put_us(p, ev->dur_ns > 0 ? ev->dur_ns : 0);
    if (ev->layer == TP_LAYER_LIBRARY) {
        /* a cpu_op: its own External id, no correlation (Kineto's have none) */
        uint64_t id = ev->form == TP_FORM_COLL ? TP_COLL_CALL_ID(ev->external_id) : ev->external_id;
        p = TP_JSONW_PUT_LIT(p, ", \"args\": {\"External id\": ");
        p = tp_jsonw_put_u64(p, id);
    } else {
        p = TP_JSONW_PUT_LIT(p, ", \"args\": {\"correlation\": ");
        p = tp_jsonw_put_u64(p, ev->correlation);
        if (ev->external_id) {
            /* an operator's id, on each of its calls one after another */
            if (ev->external_id != c->xid || !c->xid_len) {
                c->xid = ev->external_id;
                c->xid_len = (uint32_t)(tp_jsonw_put_u64(c->xid_text, c->xid) - c->xid_text);
            }
            p = TP_JSONW_PUT_LIT(p, ", \"External id\": ");
            p = tp_chrome_copy16(p, c->xid_text, c->xid_len);
        }
    }
    if (ev->cbid >= 0) {
        p = TP_JSONW_PUT_LIT(p, ", \"cbid\": ");
        p = tp_jsonw_put_i64(p, ev->cbid);
    }
    tp_jsonw_done(j, p);
    tp_chrome_put_call_args(c, ev);
    if (r->status != 0) {
        LIT(j, ", \"status\": ");
        tp_jsonw_i64(j, r->status);
    }
    LIT(j, "}}");
    if (ev->flow)
        put_flow(c, ev, 's');
    if ((ev->form == TP_FORM_ALLOC || ev->form == TP_FORM_FREE) && r->kind == TP_REC_API &&
        !(r->u.mem.flags & (TP_MEM_FAILED | TP_MEM_UNKNOWN | TP_MEM_NOOP | TP_MEM_UNTRACKED)))
        put_memory(c, ev);
}

/* Work on the device: pid = device, tid = stream, Kineto's args; "stream"
 * only here (HTA's CPU/GPU test). */
static void put_device(struct chrome *c, const struct tp_event *ev)
{
    struct tp_jsonw *j = &c->j;
    const struct tp_device_record *d = ev->dev;
    switch (d->kind) {
    case TP_DEVICE_KERNEL:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"kernel\", ", ev->name, ev);
        break;
    case TP_DEVICE_MEMCPY:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", ", ev->name, ev);
        break;
    case TP_DEVICE_MEMSET:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"gpu_memset\", ", ev->name, ev);
        break;
    default:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"cuda_sync\", ", ev->name, ev);
    }
    put_dur(c, ev);
    LIT(j, ", \"args\": {");
    if (ev->external_id) {
        put_key_u64(j, "\"External id\": ", ev->external_id);
        LIT(j, ", ");
    }
    if (d->kind == TP_DEVICE_KERNEL)
        LIT(j, "\"queued\": 0, ");
    put_key_u64(j, "\"device\": ", d->device);
    put_key_u64(j, ", \"context\": ", d->context);
    put_key_u64(j, ", \"stream\": ", d->stream);
    put_key_u64(j, ", \"correlation\": ", d->correlation);
    if (d->kind == TP_DEVICE_KERNEL) {
        put_key_u64(j, ", \"registers per thread\": ", d->registers);
        put_key_u64(j, ", \"shared memory\": ",
                    (uint64_t)(d->static_smem > 0 ? d->static_smem : 0) +
                    (uint64_t)(d->dynamic_smem > 0 ? d->dynamic_smem : 0));
        LIT(j, ", \"blocks per SM\": ");
        tp_jsonw_double(j, ev->blocks_per_sm);
        LIT(j, ", \"warps per SM\": ");
        tp_jsonw_double(j, ev->warps_per_sm);
        LIT(j, ", \"grid\": ");
        put_triple(j, (uint64_t)d->grid[0], (uint64_t)d->grid[1], (uint64_t)d->grid[2]);
        LIT(j, ", \"block\": ");
        put_triple(j, (uint64_t)d->block[0], (uint64_t)d->block[1], (uint64_t)d->block[2]);
        LIT(j, ", \"est. achieved occupancy %\": ");
        tp_jsonw_i64(j, ev->occupancy >= 0 ? (int64_t)(ev->occupancy + 0.5) : 0);
        if (d->graph_id) {
            put_key_u64(j, ", \"graph id\": ", d->graph_id);
            put_key_u64(j, ", \"graph node id\": ", d->graph_node_id);
        }
        if ((uint64_t)d->cluster[0] * d->cluster[1] * d->cluster[2] > 1) {
            LIT(j, ", \"cluster\": ");  /* cuLaunchKernelEx's cluster dimension attribute */
            put_triple(j, d->cluster[0], d->cluster[1], d->cluster[2]);
        }
        if (d->launch_type == 1 || d->launch_type == 2)   /* CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_* */
            put_key_str(j, ", \"launch type\": ", d->launch_type == 1 ? "cooperative" : "cooperative multi-device");
        if (ev->issuer && ev->form == TP_FORM_COLL)
            tp_chrome_put_coll(c, ev->issuer);     /* as Kineto copies record_param_comms' */
    } else if (d->kind == TP_DEVICE_MEMCPY || d->kind == TP_DEVICE_MEMSET) {
        put_key_u64(j, ", \"bytes\": ", d->bytes);
        LIT(j, ", \"memory bandwidth (GB/s)\": ");
        tp_jsonw_double(j, ev->dur_ns > 0 ? (double)d->bytes / (double)ev->dur_ns : 0);
    } else if (d->kind == TP_DEVICE_SYNC) {
        LIT(j, ", \"cuda_sync_kind\": ");       /* HTA's critical path reads it */
        tp_jsonw_str(j, ev->name);
        if (tp_device_waits_on_event(d)) {         /* and these, as Kineto writes them */
            LIT(j, ", \"wait_on_stream\": ");
            tp_jsonw_i64(j, ev->wait_on_stream);
            LIT(j, ", \"wait_on_cuda_event_record_corr_id\": ");
            tp_jsonw_i64(j, ev->wait_on_corr);
            put_key_u64(j, ", \"wait_on_cuda_event_id\": ", d->event_id);
        }
    }
    LIT(j, "}}");
    if (ev->flow)
        put_flow(c, ev, 'f');
}

static void put_counter(struct chrome *c, const char *name, const struct tp_event *at, int64_t ts_ns,
                        double v)
{
    struct tp_event e = *at;
    e.ts_ns = ts_ns;
    HEAD(c, "{\"ph\": \"C\", ", name, &e);
    LIT(&c->j, ", \"args\": {");
    tp_jsonw_str(&c->j, name);
    LIT(&c->j, ": ");
    tp_jsonw_double(&c->j, v);
    LIT(&c->j, "}}");
}

/* Per-step FLOPs and achieved TFLOP/s as counters over the step's span,
 * back to 0 after the window's last step; no track at all in a window
 * whose steps counted no library FLOPs (a CPU job, a GPU job without
 * cuBLAS/cuDNN): a track of zeros says nothing and reads as a measurement. */
static void put_step_counters(struct chrome *c, const struct tp_event *ev)
{
    if (!c->flops_track)
        return;
    uint64_t idx = ev->rec->u.step.index;
    for (uint64_t i = 0; i < c->n_steps; i++) {
        const struct tp_window_step *s = &c->steps[i];
        if (s->index != idx)
            continue;
        int64_t dur = s->end_ns - s->start_ns;
        put_counter(c, "FLOPs", ev, ev->ts_ns, (double)s->flops);
        put_counter(c, "TFLOP/s", ev, ev->ts_ns, dur > 0 ? (double)s->flops / (double)dur / 1e3 : 0);
        if (i == c->n_steps - 1) {
            put_counter(c, "FLOPs", ev, ev->ts_ns + ev->dur_ns, 0);
            put_counter(c, "TFLOP/s", ev, ev->ts_ns + ev->dur_ns, 0);
        }
        return;
    }
}

/* A step ends where the next begins; at today's timestamps (about 4.7e12
 * us) a reader adding ts and dur as doubles can land a nanosecond past the
 * next ts, and TensorBoard then drops whole steps ("ranges should not
 * intersect").  Steps are written TP_STEP_GAP_NS short, as Kineto leaves
 * a gap between them. */
#define TP_STEP_GAP_NS 3

static void put_step(struct chrome *c, const struct tp_event *ev)
{
    char step[40] = "ProfilerStep#";
    step[13 + tp_jsonw_fmt_u64(step + 13, ev->rec->u.step.index)] = '\0';
    HEAD(c, "{\"ph\": \"X\", \"cat\": \"user_annotation\", ", step, ev);
    struct tp_event shorter = *ev;
    shorter.dur_ns = ev->dur_ns > TP_STEP_GAP_NS ? ev->dur_ns - TP_STEP_GAP_NS : 0;
    put_dur(c, &shorter);
    uint64_t ext = TP_STEP_EXTERNAL_ID(ev->rec->u.step.index);
    put_key_u64(&c->j, ", \"args\": {\"External id\": ", ext);
    put_key_u64(&c->j, ", \"Record function id\": ", ext);
    put_key_u64(&c->j, ", \"Ev Idx\": ", c->events - 1);   /* its place among the events */
    tp_jsonw_char(&c->j, '}');
    tp_jsonw_char(&c->j, '}');
    put_step_counters(c, ev);
}

/* The window's steps, before any other event: a step is recorded when it
 * ends, but catapult takes the first of two slices that start together as
 * the parent, so parents must come first in the file. */
static void put_steps(struct chrome *c, const struct tp_window *w)
{
    for (uint64_t i = 0; i < c->n_steps; i++) {
        const struct tp_window_step *s = &c->steps[i];
        struct tp_record r = { .kind = TP_REC_STEP };
        r.u.step.index = s->index;
        struct tp_event ev = {
            .rec = &r, .pid = w->pid, .tid = s->tid,
            .thread_name = s->thread_name ? s->thread_name : "",
            .ts_ns = s->start_ns, .dur_ns = s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0,
        };
        put_step(c, &ev);
    }
}

static void put_domain(struct chrome *c, const struct tp_event *ev)
{
    if (ev->domain && ev->domain[0]) {
        LIT(&c->j, ", \"args\": {\"domain\": ");
        tp_jsonw_str(&c->j, ev->domain);
        tp_jsonw_char(&c->j, '}');
    }
}

/* One of torch's operator ranges as Kineto writes the operator: a cpu_op
 * (a record_function annotation such as Optimizer.step#AdamW.step: a
 * user_annotation) named without torch's fields, which become its args. */
static void put_torch_op(struct chrome *c, const struct tp_event *ev)
{
    struct tp_jsonw *j = &c->j;
    const struct tp_torch_op *op = ev->op;
    if (op->cpu_op)
        HEADN(c, "{\"ph\": \"X\", \"cat\": \"cpu_op\", ", ev->name, op->name_len, ev);
    else
        HEADN(c, "{\"ph\": \"X\", \"cat\": \"user_annotation\", ", ev->name, op->name_len, ev);
    put_dur(c, ev);
    put_key_u64(j, ", \"args\": {\"External id\": ", op->op_id);
    put_key_u64(j, ", \"Record function id\": ", op->op_id);
    const struct tp_op_autograd *ag = ev->autograd;
    int64_t seq = ag ? ag->seq : op->seq;
    if (seq >= 0) {
        LIT(j, ", \"Sequence number\": ");
        tp_jsonw_i64(j, seq);
    }
    if (op->sizes) {
        LIT(j, ", \"Input Dims\": ");
        tp_jsonw_raw(j, op->sizes, op->sizes_len);
    }
    LIT(j, "}}");
    if (!ag)
        return;
    if (ag->flow_end)
        put_fwdbwd(c, ev, 'f', op->op_id);
    for (size_t i = 0; i < ag->n_flows_out; i++)
        put_fwdbwd(c, ev, 's', ag->flows_out[i]);
}

static void chrome_event(void *state, const struct tp_event *ev)
{
    struct chrome *c = state;
    struct tp_jsonw *j = &c->j;
    const struct tp_record *r = ev->rec;
    if (j->err)
        return;
    if (ev->dev) {
        put_device(c, ev);
        note_thread(c, ev);
        c->threads[c->last].gpu = 1;
        return;
    }
    if (!r)
        return;
    switch (r->kind) {
    case TP_REC_API:
    case TP_REC_LAUNCH:
        put_call(c, ev);
        break;
    case TP_REC_STEP:
        if (!c->n_steps)        /* no step list (out of memory): write as they come */
            put_step(c, ev);
        break;
    case TP_REC_RANGE:
        if (ev->op) {
            put_torch_op(c, ev);
            break;
        }
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"user_annotation\", ", ev->name ? ev->name : "", ev);
        put_dur(c, ev);
        put_domain(c, ev);
        tp_jsonw_char(j, '}');
        break;
    case TP_REC_MARK:
        HEAD(c, "{\"ph\": \"i\", \"s\": \"t\", \"cat\": \"user_annotation\", ",
             ev->name ? ev->name : "", ev);
        put_domain(c, ev);
        tp_jsonw_char(j, '}');
        break;
    case TP_REC_COUNTER:
        HEAD(c, "{\"ph\": \"C\", ", ev->name ? ev->name : "", ev);
        LIT(j, ", \"args\": {");
        tp_jsonw_str(j, ev->name ? ev->name : "");
        LIT(j, ": ");
        tp_jsonw_double(j, r->u.mark.value);
        LIT(j, "}}");
        break;
    default:
        return;
    }
    note_thread(c, ev);
}

static void put_meta(struct chrome *c, const char *what, int32_t pid, int32_t tid)
{
    struct tp_jsonw *j = &c->j;
    if (c->events++)
        LIT(j, ",\n");
    else
        tp_jsonw_char(j, '\n');
    LIT(j, "{\"ph\": \"M\", \"name\": \"");
    tp_jsonw_lit(j, what);
    LIT(j, "\", \"pid\": ");
    tp_jsonw_i64(j, pid);
    LIT(j, ", \"tid\": ");
    tp_jsonw_i64(j, tid);
    LIT(j, ", \"ts\": ");
    tp_jsonw_us(j, c->meta_ts);
    LIT(j, ", \"args\": {");
}

static void put_process(struct chrome *c, const struct tp_window *w, int32_t pid, int gpu)
{
    struct tp_jsonw *j = &c->j;
    put_meta(c, "process_name", pid, 0);
    LIT(j, "\"name\": ");
    tp_jsonw_str(j, w->program && w->program[0] ? w->program : "process");
    LIT(j, "}}");
    put_meta(c, "process_labels", pid, 0);
    if (gpu) {
        LIT(j, "\"labels\": \"GPU ");
        tp_jsonw_i64(j, pid);
        LIT(j, "\"}}");
    } else {
        LIT(j, "\"labels\": \"CPU\"}}");
    }
    put_meta(c, "process_sort_index", pid, 0);
    LIT(j, "\"sort_index\": ");
    tp_jsonw_i64(j, gpu ? 0x1000000 + (int64_t)pid : pid);   /* GPUs below the host */
    LIT(j, "}}");
}

static void put_threads(struct chrome *c, const struct tp_window *w)
{
    struct tp_jsonw *j = &c->j;
    put_process(c, w, w->pid, 0);
    for (size_t i = 0; i < c->cap; i++) {
        const struct chrome_thread *t = &c->threads[i];
        if (!t->used || t->pid == w->pid)
            continue;
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = c->threads[k].used && c->threads[k].pid == t->pid;
        if (!seen)
            put_process(c, w, t->pid, t->gpu);
    }
    for (size_t i = 0; i < c->cap; i++) {
        const struct chrome_thread *t = &c->threads[i];
        if (!t->used)
            continue;
        char tid[24];
        tid[tp_jsonw_fmt_u64(tid, (uint64_t)(t->tid < 0 ? -(int64_t)t->tid : t->tid))] = '\0';
        put_meta(c, "thread_name", t->pid, t->tid);
        LIT(j, "\"name\": \"");
        if (t->gpu)
            LIT(j, "stream ");
        else
            LIT(j, "thread ");
        tp_jsonw_lit(j, tid);
        if (t->gpu)
            tp_jsonw_char(j, ' ');      /* "stream 7 ", as Kineto names GPU tracks */
        else if (t->name[0]) {
            LIT(j, " (");
            tp_jsonw_strbody(j, t->name, strlen(t->name));
            tp_jsonw_char(j, ')');
        }
        LIT(j, "\"}}");
        put_meta(c, "thread_sort_index", t->pid, t->tid);
        LIT(j, "\"sort_index\": ");
        tp_jsonw_i64(j, t->tid);
        LIT(j, "}}");
    }
}

static int chrome_close(void *state, const struct tp_window *w, struct tp_saved *saved)
{
    struct chrome *c = state;
    struct tp_jsonw *j = &c->j;
    put_mem_levels(c, w, 1);
    put_owner_tracks(c, w);
    put_threads(c, w);
    const char *slash = strrchr(c->out.final, '/');
    LIT(j, "\n  ],\n  \"traceName\": ");
    tp_jsonw_str(j, slash ? slash + 1 : c->out.final);
    LIT(j, "\n}\n");
    int err = tp_jsonw_finish(j);
    int rc = err ? tp_output_abort(&c->out, err) : tp_output_commit(&c->out);
    if (rc == 0)
        snprintf(saved->trace, sizeof saved->trace, "%s", c->out.final);
    tp_chrome_free_texts(c);
    free(c->threads);
    free(c);
    return rc;
}

const struct tp_handler tp_handler_chrome = {
    .name = "chrome",
    .open = chrome_open,
    .event = chrome_event,
    .close = chrome_close,
};
