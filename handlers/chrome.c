/*
 * chrome.c - DESIGN: the Kineto-compatible trace (README "What is in a
 * trace"), streamed.  open() writes the top-level keys up to "traceEvents": [
 * in the order of Kineto's ChromeTraceLogger, event() appends one event per line as it
 * arrives, close() appends the metadata events of every thread seen and
 * "traceName", then commits the file through output.c (temporary name,
 * rename).  Nothing is buffered per event besides the writer's 64 KiB and a
 * small (pid, tid) table for the metadata rows, so memory does not grow
 * with the window.  Launch details go under "cuda stream", never "stream":
 * HTA treats any event with a "stream" arg as a GPU event.  Configuration
 * and user metadata are parsed with jansson and re-emitted through our own
 * writer, so their strings get the same escaping as event names.  The
 * top level claims only what is known, as torch.profiler's does:
 * Kineto's trace_id, record_shapes (only when on) and host_name, and
 * distributedInfo only on a process group's, NCCL's or a launcher's word,
 * with a backend only where one is known; no FLOPs track of zeros.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "collector/common/log.h"
#include "handler.h"
#include "collector/record/comms.h"
#include "collector/config/config.h"
#include "collector/contract/device.h"
#include "collector/drain/oplink.h"
#include "collector/record/torchop.h"
#include "jsonw.h"
#include "output.h"

#ifndef TP_VERSION_STRING
#define TP_VERSION_STRING "0.1.0"
#endif

#define LIT TP_JSONW_LIT

struct chrome_thread {
    int32_t pid, tid;
    int used;
    int gpu;                       /* a device's stream track */
    char name[64];
};

struct chrome {
    struct tp_output out;
    struct tp_jsonw j;
    int64_t base;
    int64_t meta_ts;               /* ts of the metadata events, relative */
    uint64_t events;
    struct chrome_thread *threads; /* open addressing on (pid, tid) */
    size_t nthreads, cap;
    size_t last;                   /* slot of the previous event's thread */
    int record_shapes;
    const struct tp_window_step *steps;
    uint64_t n_steps;
    int flops_track;               /* some step has library FLOPs: the FLOPs and TFLOP/s tracks */
    int rank, world_size;          /* the process's, for its process groups */
};

static void put_value(struct tp_jsonw *j, json_t *v)
{
    const char *key;
    json_t *item;
    size_t i;
    int first = 1;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        tp_jsonw_char(j, '{');
        json_object_foreach(v, key, item) {
            if (!first)
                LIT(j, ", ");
            first = 0;
            tp_jsonw_str(j, key);
            LIT(j, ": ");
            put_value(j, item);
        }
        tp_jsonw_char(j, '}');
        break;
    case JSON_ARRAY:
        tp_jsonw_char(j, '[');
        json_array_foreach(v, i, item) {
            if (i)
                LIT(j, ", ");
            put_value(j, item);
        }
        tp_jsonw_char(j, ']');
        break;
    case JSON_STRING:
        tp_jsonw_strn(j, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        tp_jsonw_i64(j, (int64_t)json_integer_value(v));
        break;
    case JSON_REAL:
        tp_jsonw_double(j, json_real_value(v));
        break;
    case JSON_TRUE:
        LIT(j, "true");
        break;
    case JSON_FALSE:
        LIT(j, "false");
        break;
    default:
        LIT(j, "null");
    }
}

static json_t *load_object(const char *text)
{
    if (!text || !text[0])
        return NULL;
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (v && !json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

static int is_reserved(const char *key)
{
    for (size_t i = 0; tp_metadata_reserved[i]; i++)   /* refused by config_values.c too */
        if (strcmp(key, tp_metadata_reserved[i]) == 0)
            return 1;
    return 0;
}

/* Kineto's deviceProperties entries, with its keys (ChromeTraceLogger's). */
static void put_devices(struct tp_jsonw *j, const struct tp_window *w)
{
    for (int i = 0; i < w->n_devices; i++) {
        const struct tp_devprop *d = &w->devices[i];
        tp_jsonw_lit(j, i ? ",\n    {\"id\": " : "\n    {\"id\": ");
        tp_jsonw_i64(j, d->id);
        LIT(j, ", \"name\": ");
        tp_jsonw_str(j, d->name);
        LIT(j, ", \"totalGlobalMem\": ");
        tp_jsonw_u64(j, d->total_global_mem);
        static const char *const keys[] = {
            "computeMajor", "computeMinor", "maxThreadsPerBlock", "maxThreadsPerMultiprocessor",
            "regsPerBlock", "warpSize", "sharedMemPerBlock", "numSms", "regsPerMultiprocessor",
            "sharedMemPerBlockOptin", "sharedMemPerMultiprocessor",
        };
        const int vals[] = {
            d->compute_major, d->compute_minor, d->max_threads_per_block, d->max_threads_per_sm,
            d->regs_per_block, d->warp_size, d->smem_per_block, d->num_sms, d->regs_per_sm,
            d->smem_per_block_optin, d->smem_per_sm,
        };
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            LIT(j, ", \"");
            tp_jsonw_lit(j, keys[k]);
            LIT(j, "\": ");
            tp_jsonw_i64(j, vals[k]);
        }
        tp_jsonw_char(j, '}');
    }
}

/* "coverage": what the wrappers saw against what CUPTI saw (README "What is in a trace"). */
static void put_coverage(struct tp_jsonw *j, const struct tp_window *w)
{
    static const struct tp_coverage_keys keys = {
        .launches = "launches_seen_by_wrappers",
        .kernels = "kernels_seen_by_cupti",
        .linked = "kernels_linked_to_launches",
        .records = "device_records",
        .dropped = "device_records_dropped",
    };
    LIT(j, ", \"gpu_activity\": ");
    tp_jsonw_str(j, w->gpu_status ? w->gpu_status : "off");
    LIT(j, ", \"coverage\": ");
    tp_coverage_put(j, w, &keys);
}

/* A process group is the world when it has every rank and this process is
 * its own global rank in it: then its ranks are 0..n-1 (NCCL does not tell
 * the global ranks of a smaller communicator's members). */
static int is_world(int size, int rank, int world_size, int my_rank)
{
    return world_size > 1 && size == world_size && rank == my_rank;
}

/* "[0, 1, ..., n-1]" as Kineto writes "Process Group Ranks" (a string). */
#define TP_PG_RANKS_LISTED 64

static void put_rank_list(struct tp_jsonw *j, int n, int as_string)
{
    if (as_string)
        tp_jsonw_char(j, '"');
    tp_jsonw_char(j, '[');
    for (int i = 0; i < n; i++) {
        if (i)
            LIT(j, ", ");
        tp_jsonw_u64(j, (uint64_t)i);
    }
    tp_jsonw_char(j, ']');
    if (as_string)
        tp_jsonw_char(j, '"');
}

/* This process's rank and world size for distributedInfo and the process
 * groups: the framework's process group's where it told us
 * (trainprof_process_group), else the launcher's. */
static void dist_rank(const struct tp_window *w, int *rank, int *world_size)
{
    *rank = w->pg_backend ? w->pg_rank : w->rank;
    *world_size = w->pg_backend ? w->pg_world_size : w->world_size;
}

/* Kineto's distributedInfo, as torch.profiler fills it
 * (_get_distributed_info): written only while torch.distributed has a
 * default group there, so here only where something says the process is
 * one rank of a job: the framework's process group, NCCL communicators,
 * or the launcher's variables; a program run by hand gets none, as under
 * torch.profiler.  "backend" is the group's, else "nccl" where NCCL
 * communicators were created, else left out: a gloo job under torchrun
 * leaves no trace of its backend in the calls we see, and "nccl" there
 * (what every trace said before) was false.  Then rank and world_size,
 * and once NCCL communicators exist pg_count, pg_config (one entry per
 * communicator, named by creation order) and nccl_version.
 * Returns 0 when nothing was written. */
static int put_distributed(struct tp_jsonw *j, const struct tp_window *w)
{
    if (!w->pg_backend && !w->comms_created && !w->launched)
        return 0;
    int rank, world_size;
    dist_rank(w, &rank, &world_size);
    LIT(j, "  \"distributedInfo\": {");
    if (w->pg_backend || w->comms_created) {
        LIT(j, "\"backend\": ");
        tp_jsonw_str(j, w->pg_backend ? w->pg_backend : "nccl");
        LIT(j, ", ");
    }
    /* "rank": N with a space: HTA finds the rank with "rank":\s+(\d+) */
    LIT(j, "\"rank\": ");
    tp_jsonw_i64(j, rank);
    LIT(j, ", \"world_size\": ");
    tp_jsonw_i64(j, world_size);
    if (w->comms_created) {
        LIT(j, ", \"pg_count\": ");
        tp_jsonw_u64(j, w->comms_created);
        LIT(j, ", \"pg_config\": [");
        for (int i = 0; i < w->n_comms; i++) {
            const struct tp_comm_info *p = &w->comms[i];
            int world = is_world((int)p->size, p->rank, world_size, rank);
            tp_jsonw_lit(j, i ? ", {\"pg_name\": \"" : "{\"pg_name\": \"");
            tp_jsonw_u64(j, p->serial);
            LIT(j, "\", \"pg_desc\": ");
            tp_jsonw_lit(j, world ? "\"default_pg\"" : "\"undefined\"");
            LIT(j, ", \"backend_config\": \"cuda:nccl\", \"pg_size\": ");
            tp_jsonw_u64(j, p->size);
            LIT(j, ", \"ranks\": ");
            if (world)
                put_rank_list(j, (int)p->size, 0);
            else
                LIT(j, "[]");
            tp_jsonw_char(j, '}');
        }
        tp_jsonw_char(j, ']');
    }
    if (w->nccl_version) {
        LIT(j, ", \"nccl_version\": ");
        tp_jsonw_str(j, w->nccl_version);
    }
    LIT(j, "},\n");
    return 1;
}

/* A trace's own id, as torch.profiler writes "trace_id" (uuid4().int as
 * 32 upper-case hex digits): 128 random bits from getrandom with the
 * version 4 and variant bits set, so that two windows, ranks or runs
 * never share one.  Without getrandom (seccomp, an old kernel) the clock,
 * pid and a counter stand in, mixed: unique, if not unguessable. */
static void trace_id(char out[33])
{
    static _Atomic uint64_t seq;
    uint8_t b[16];
    ssize_t n = getrandom(b, sizeof b, GRND_NONBLOCK);
    if (n != (ssize_t)sizeof b) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x[2] = { (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
                          ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&seq, 1) };
        for (int i = 0; i < 2; i++) {        /* splitmix64: spread the bits */
            uint64_t z = x[i] + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            z ^= z >> 31;
            memcpy(b + 8 * i, &z, 8);
        }
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);   /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);   /* RFC 4122 variant */
    static const char hex[] = "0123456789ABCDEF";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[32] = '\0';
}

/* Kineto's metadata keys that torch.profiler always sets: "trace_id",
 * "record_shapes" (1, and only when shapes are recorded) and "host_name"
 * (gethostname, unsanitised).  One that TRAINPROF_METADATA gives is the
 * user's: theirs is written in its place, as torch's
 * custom_trace_id_callback replaces the id. */
static void put_kineto_metadata(struct tp_jsonw *j, const struct tp_window *w, json_t *user)
{
    if (!json_object_get(user, "trace_id")) {
        char id[33];
        trace_id(id);
        LIT(j, "  \"trace_id\": \"");
        tp_jsonw_lit(j, id);
        LIT(j, "\",\n");
    }
    if (w->record_shapes && !json_object_get(user, "record_shapes"))
        LIT(j, "  \"record_shapes\": 1,\n");
    if (!json_object_get(user, "host_name")) {
        char host[256];
        if (gethostname(host, sizeof host - 1) != 0)
            snprintf(host, sizeof host, "%s", w->hostname ? w->hostname : "");
        host[sizeof host - 1] = '\0';
        LIT(j, "  \"host_name\": ");
        tp_jsonw_str(j, host);
        LIT(j, ",\n");
    }
}

static void put_clock_triple(struct tp_jsonw *j, const struct tp_clock_triple *t, int64_t trace_ns)
{
    if (!t->tick) {
        LIT(j, "null");
        return;
    }
    LIT(j, "{\"tick\": ");
    tp_jsonw_u64(j, t->tick);
    LIT(j, ", \"realtime_ns\": ");
    tp_jsonw_i64(j, t->realtime_ns);
    LIT(j, ", \"monotonic_ns\": ");
    tp_jsonw_i64(j, t->monotonic_ns);
    LIT(j, ", \"bracket_ns\": ");
    tp_jsonw_i64(j, t->bracket_ns);
    LIT(j, ", \"trace_ns\": ");
    tp_jsonw_i64(j, trace_ns);
    tp_jsonw_char(j, '}');
}

/* "clock": the clocks read at the window's start and end, and the Unix ns
 * the trace gives those instants (trace_ns = baseTimeNanoseconds + ts x
 * 1000): `trainprof merge` corrects each rank's calibration by
 * trace_ns - realtime_ns, and aligns ranks of one boot_id (one kernel,
 * shared clocks) through CLOCK_MONOTONIC. */
static void put_clock(struct tp_jsonw *j, const struct tp_window *w)
{
    LIT(j, ", \"clock\": {\"source\": ");
    tp_jsonw_str(j, w->clock_source ? w->clock_source : "");
    LIT(j, ", \"ns_per_tick\": ");
    tp_jsonw_double(j, w->ns_per_tick);
    LIT(j, ", \"host\": ");
    tp_jsonw_str(j, w->hostname ? w->hostname : "");
    LIT(j, ", \"boot_id\": ");
    tp_jsonw_str(j, w->boot_id ? w->boot_id : "");
    LIT(j, ", \"start\": ");
    put_clock_triple(j, &w->clock_start, w->clock_start_trace_ns);
    LIT(j, ", \"end\": ");
    put_clock_triple(j, &w->clock_end, w->clock_end_trace_ns);
    tp_jsonw_char(j, '}');
}

static void put_header(struct chrome *c, const struct tp_window *w)
{
    struct tp_jsonw *j = &c->j;
    LIT(j, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
    put_devices(j, w);
    LIT(j, "],\n");
    json_t *user = load_object(w->user_metadata);
    put_kineto_metadata(j, w, user);
    put_distributed(j, w);
    LIT(j, "  \"trainprof\": {\"version\": \"" TP_VERSION_STRING "\", \"configuration\": ");
    json_t *cfg = load_object(w->config_json);
    if (cfg)
        put_value(j, cfg);
    else
        LIT(j, "{}");
    json_decref(cfg);
    LIT(j, ", \"step_signal\": ");
    tp_jsonw_str(j, w->step_signal);
    int have_steps = w->steps_recorded > 0;
    LIT(j, ", \"steps_recorded\": ");
    tp_jsonw_u64(j, w->steps_recorded);
    LIT(j, ", \"first_step\": ");
    tp_jsonw_u64_or_null(j, have_steps, w->first_step);
    LIT(j, ", \"last_step\": ");
    tp_jsonw_u64_or_null(j, have_steps, w->last_step);
    LIT(j, ", \"batch\": ");
    tp_jsonw_u64(j, w->batch);
    if (w->partial)
        LIT(j, ", \"partial\": true");
    else
        LIT(j, ", \"partial\": false");
    LIT(j, ", \"partial_reason\": ");
    if (w->partial && w->partial_reason)
        tp_jsonw_str(j, w->partial_reason);
    else
        LIT(j, "null");
    LIT(j, ", \"operators_lost\": ");   /* to the program's own profiler */
    if (w->ops_lost_why) {
        LIT(j, "{\"why\": ");
        tp_jsonw_str(j, w->ops_lost_why);
        LIT(j, ", \"first_step\": ");
        tp_jsonw_u64_or_null(j, w->ops_lost_steps, w->ops_lost_first);
        LIT(j, ", \"last_step\": ");
        tp_jsonw_u64_or_null(j, w->ops_lost_steps, w->ops_lost_last);
        tp_jsonw_char(j, '}');
    } else {
        LIT(j, "null");
    }
    if (w->trigger_id) {         /* a window `trainprof trigger` asked for */
        LIT(j, ", \"trigger\": {\"id\": ");
        tp_jsonw_str(j, w->trigger_id);
        LIT(j, ", \"requested_step\": ");
        tp_jsonw_u64(j, w->trigger_requested);
        if (w->trigger_late)
            LIT(j, ", \"late\": true}");
        else
            LIT(j, ", \"late\": false}");
    }
    LIT(j, ", \"records\": ");
    tp_jsonw_u64(j, w->records);
    LIT(j, ", \"dropped_events\": ");
    tp_jsonw_u64(j, w->dropped);
    LIT(j, ", \"late_events\": ");
    tp_jsonw_u64(j, w->late);
    LIT(j, ", \"names_lost\": ");
    tp_jsonw_u64(j, w->names_lost);
    LIT(j, ", \"ranges_lost\": ");
    tp_jsonw_u64(j, w->ranges_lost);
    LIT(j, ", \"unmatched_range_pops\": ");
    tp_jsonw_u64(j, w->unmatched_pops);
    LIT(j, ", \"flops\": ");
    tp_jsonw_u64(j, w->flops);
    put_coverage(j, w);
    put_clock(j, w);
    LIT(j, ", \"steps\": [");
    for (uint64_t i = 0; i < w->steps_recorded && w->steps; i++) {
        const struct tp_window_step *s = &w->steps[i];
        tp_jsonw_lit(j, i ? ", {\"step\": " : "{\"step\": ");
        tp_jsonw_u64(j, s->index);
        LIT(j, ", \"wall_ms\": ");
        tp_jsonw_double(j, (double)(s->end_ns - s->start_ns) / 1e6);
        LIT(j, ", \"flops\": ");
        tp_jsonw_u64(j, s->flops);
        LIT(j, ", \"tflops_per_s\": ");
        tp_jsonw_double(j, s->end_ns > s->start_ns ? (double)s->flops / (double)(s->end_ns - s->start_ns) / 1e3 : 0);
        tp_jsonw_char(j, '}');
    }
    LIT(j, "]},\n");

    if (!user && w->user_metadata && w->user_metadata[0])
        TP_WARN("TRAINPROF_METADATA is not a JSON object; not written to the trace");
    const char *key;
    json_t *item;
    json_object_foreach(user, key, item) {
        if (is_reserved(key)) {
            TP_WARN("TRAINPROF_METADATA key \"%s\" is reserved by the trace format; skipped", key);
            continue;
        }
        LIT(j, "  ");
        tp_jsonw_str(j, key);
        LIT(j, ": ");
        put_value(j, item);
        LIT(j, ",\n");
    }
    json_decref(user);

    LIT(j, "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ");
    tp_jsonw_i64(j, w->base_time_ns);
    LIT(j, ",\n  \"traceEvents\": [");
}

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
    c->threads = calloc(c->cap, sizeof *c->threads);
    if (!c->threads) {
        TP_ERROR("cannot write %s: %s", path, strerror(ENOMEM));
        free(c);
        return NULL;
    }
    if (tp_output_open(&c->out, path, 0, w->overwrite) != 0) {
        free(c->threads);
        free(c);
        return NULL;
    }
    if (tp_jsonw_init(&c->j, c->out.fd, w->gzip, TP_JSONW_GZIP_LEVEL) != 0) {
        tp_output_abort(&c->out, c->j.err);
        tp_jsonw_finish(&c->j);
        free(c->threads);
        free(c);
        return NULL;
    }
    c->base = w->base_time_ns;
    c->record_shapes = w->record_shapes;
    dist_rank(w, &c->rank, &c->world_size);
    c->steps = w->steps;
    c->n_steps = w->steps ? w->steps_recorded : 0;
    for (uint64_t i = 0; i < c->n_steps; i++)
        c->flops_track |= c->steps[i].flops > 0;
    c->meta_ts = w->start_ns > c->base ? w->start_ns - c->base : 0;
    put_header(c, w);
    put_steps(c, w);
    put_mem_levels(c, w, 0);
    return c;
}

static void put_ts(struct chrome *c, int64_t ts_ns)
{
    int64_t rel = ts_ns - c->base;
    tp_jsonw_us(&c->j, rel > 0 ? rel : 0);
}

/* {"ph": PH, "cat": CAT, "name": NAME, "pid": P, "tid": T, "ts": TS */
static void put_head_n(struct chrome *c, const char *ph_cat, size_t ph_cat_len,
                       const char *name, size_t name_len, const struct tp_event *ev)
{
    struct tp_jsonw *j = &c->j;
    if (c->events++)
        LIT(j, ",\n");
    else
        tp_jsonw_char(j, '\n');
    tp_jsonw_raw(j, ph_cat, ph_cat_len);
    LIT(j, "\"name\": ");
    tp_jsonw_strn(j, name, name_len);
    LIT(j, ", \"pid\": ");
    tp_jsonw_i64(j, ev->pid);
    LIT(j, ", \"tid\": ");
    tp_jsonw_i64(j, ev->tid);
    LIT(j, ", \"ts\": ");
    put_ts(c, ev->ts_ns);
}

static void put_head(struct chrome *c, const char *ph_cat, size_t ph_cat_len,
                     const char *name, const struct tp_event *ev)
{
    put_head_n(c, ph_cat, ph_cat_len, name, strlen(name), ev);
}

#define HEAD(c, phcat, name, ev) put_head((c), "" phcat, sizeof(phcat) - 1, (name), (ev))
#define HEADN(c, phcat, name, len, ev) put_head_n((c), "" phcat, sizeof(phcat) - 1, (name), (len), (ev))

static void put_dur(struct chrome *c, const struct tp_event *ev)
{
    LIT(&c->j, ", \"dur\": ");
    tp_jsonw_us(&c->j, ev->dur_ns > 0 ? ev->dur_ns : 0);
}

static void put_triple(struct tp_jsonw *j, uint64_t x, uint64_t y, uint64_t z)
{
    tp_jsonw_char(j, '[');
    tp_jsonw_u64(j, x);
    LIT(j, ", ");
    tp_jsonw_u64(j, y);
    LIT(j, ", ");
    tp_jsonw_u64(j, z);
    tp_jsonw_char(j, ']');
}

static const char *const copy_kinds[] = { "HtoH", "HtoD", "DtoH", "DtoD", "Default" };

static void put_key_str(struct tp_jsonw *j, const char *key, const char *v)
{
    tp_jsonw_lit(j, key);
    tp_jsonw_str(j, v);
}

static void put_key_u64(struct tp_jsonw *j, const char *key, uint64_t v)
{
    tp_jsonw_lit(j, key);
    tp_jsonw_u64(j, v);
}

/* A cuBLAS routine that is no product (TP_LIB_BLAS): its own sizes under
 * its own names (no "Input Dims": they would say A is m x k, B k x n), the
 * batch and the data type; bytes of copy and swap in put_gemm. */
static void put_blas_shapes(struct tp_jsonw *j, const struct tp_record *r)
{
    unsigned has = r->u.lib.op;
    if (has & TP_BLAS_HAS_M)
        put_key_u64(j, ", \"m\": ", r->u.lib.m);
    if (has & TP_BLAS_HAS_N)
        put_key_u64(j, ", \"n\": ", r->u.lib.n);
    if (has & TP_BLAS_HAS_K)
        put_key_u64(j, ", \"k\": ", r->u.lib.k);
    if (has & TP_BLAS_HAS_NRHS)
        put_key_u64(j, ", \"nrhs\": ", r->u.lib.k);
    put_key_u64(j, ", \"batch\": ", r->u.lib.batch);
    put_key_str(j, ", \"dtype\": ", tp_dtype_name(r->u.lib.dtype));
}

/* cuBLAS/cuBLASLt: FLOPs and precision always; sizes and types as torch's
 * record_shapes writes them (A is m x k, B is k x n; c10's C++ type names)
 * when asked. */
/* The FLOPs of a library call (tp_form_counts_flops) and their class. */
static void put_flops(struct tp_jsonw *j, const struct tp_record *r)
{
    put_key_u64(j, ", \"flops\": ", r->u.lib.flops);
    put_key_str(j, ", \"precision\": ", tp_precision_name(r->u.lib.precision));
    if (r->u.lib.flags & TP_LIB_CAPTURED)
        LIT(j, ", \"captured\": true");
}

/* "Input type": ["t", "t", ...], n times the record's dtype. */
static void put_input_types(struct tp_jsonw *j, unsigned dtype, int n)
{
    LIT(j, ", \"Input type\": [");
    for (int i = 0; i < n; i++) {
        if (i)
            LIT(j, ", ");
        tp_jsonw_str(j, tp_dtype_cpp_name(dtype));
    }
    tp_jsonw_char(j, ']');
}

/* One dims list "[a, b, ...]". */
static void put_dims(struct tp_jsonw *j, const uint32_t *d, int n)
{
    tp_jsonw_char(j, '[');
    for (int i = 0; i < n; i++) {
        if (i)
            LIT(j, ", ");
        tp_jsonw_u64(j, d[i]);
    }
    tp_jsonw_char(j, ']');
}

/* An RNN call (TP_FORM_RNN): its FLOPs; with shapes, x [T, B, I] and
 * hx [layers x directions, B, state], the first two inputs of torch's
 * aten::_cudnn_rnn. */
static void put_rnn(struct chrome *c, const struct tp_record *r)
{
    struct tp_jsonw *j = &c->j;
    put_flops(j, r);
    if (!c->record_shapes)
        return;
    const uint32_t x[3] = { r->u.lib.m, r->u.lib.n, r->u.lib.k };
    const uint32_t h[3] = { r->u.lib.op, r->u.lib.n, r->u.lib.batch };
    LIT(j, ", \"Input Dims\": [");
    put_dims(j, x, 3);
    LIT(j, ", ");
    put_dims(j, h, 3);
    tp_jsonw_char(j, ']');
    put_input_types(j, r->u.lib.dtype, 2);
}

/* A cuDNN op counted for no FLOPs (TP_FORM_TENSOR): with shapes, its main
 * tensor, when its descriptor could be read. */
static void put_tensor(struct chrome *c, const struct tp_record *r)
{
    struct tp_jsonw *j = &c->j;
    int nd = r->u.tensor.nd;
    if (!c->record_shapes || nd == 0 || nd > 8)
        return;
    LIT(j, ", \"Input Dims\": [");
    put_dims(j, r->u.tensor.dim, nd);
    tp_jsonw_char(j, ']');
    put_input_types(j, r->u.tensor.dtype, 1);
}

static void put_gemm(struct chrome *c, const struct tp_record *r)
{
    struct tp_jsonw *j = &c->j;
    put_flops(j, r);
    int blas = (r->u.lib.flags & TP_LIB_BLAS) != 0;
    if (blas && r->u.lib.bytes)
        put_key_u64(j, ", \"bytes\": ", r->u.lib.bytes);
    if (!c->record_shapes)
        return;
    if (blas) {
        put_blas_shapes(j, r);
        return;
    }
    put_key_u64(j, ", \"m\": ", r->u.lib.m);
    put_key_u64(j, ", \"n\": ", r->u.lib.n);
    put_key_u64(j, ", \"k\": ", r->u.lib.k);
    put_key_u64(j, ", \"batch\": ", r->u.lib.batch);
    LIT(j, ", \"Input Dims\": [[");
    tp_jsonw_u64(j, r->u.lib.m);
    tp_jsonw_char(j, ',');
    tp_jsonw_char(j, ' ');
    tp_jsonw_u64(j, r->u.lib.k);
    LIT(j, "], [");
    tp_jsonw_u64(j, r->u.lib.k);
    tp_jsonw_char(j, ',');
    tp_jsonw_char(j, ' ');
    tp_jsonw_u64(j, r->u.lib.n);
    LIT(j, "]]");
    put_input_types(j, r->u.lib.dtype, 2);
}

/* A collective's elements in and out per rank, from its bytes. */
static void coll_nelems(const struct tp_record *r, uint64_t *in, uint64_t *out)
{
    unsigned size = tp_dtype_size(r->u.lib.dtype);
    tp_coll_nelems(r->u.lib.op, size ? r->u.lib.bytes / size : 0, r->u.lib.m, in, out);
}

/* NCCL: the args of torch's record_param_comms (Kineto copies them onto
 * the collective's kernel), plus bytes and the nccl-tests bus bandwidth
 * factor.  The process group is the communicator, named by its creation
 * order in this process. */
static void put_coll(struct chrome *c, const struct tp_record *r)
{
    struct tp_jsonw *j = &c->j;
    unsigned op = r->u.lib.op, n = r->u.lib.m;
    uint64_t in, out;
    coll_nelems(r, &in, &out);
    put_key_str(j, ", \"Collective name\": ", tp_coll_name(op));
    put_key_u64(j, ", \"In msg nelems\": ", in);
    put_key_u64(j, ", \"Out msg nelems\": ", out);
    put_key_u64(j, ", \"Group size\": ", n);
    put_key_u64(j, ", \"Rank\": ", r->u.lib.n);
    put_key_str(j, ", \"dtype\": ", tp_dtype_name(r->u.lib.dtype));
    LIT(j, ", \"In split size\": \"[]\", \"Out split size\": \"[]\"");
    if (r->u.lib.batch != TP_COLL_NO_COMM) {
        int world = is_world((int)n, (int)r->u.lib.n, c->world_size, c->rank);
        LIT(j, ", \"Process Group Name\": \"");
        tp_jsonw_u64(j, r->u.lib.batch);
        tp_jsonw_lit(j, world ? "\", \"Process Group Description\": \"default_pg\""
                     : "\", \"Process Group Description\": \"undefined\"");
        if (world) {
            if (n <= TP_PG_RANKS_LISTED) {
                LIT(j, ", \"Process Group Ranks\": ");
                put_rank_list(j, (int)n, 1);
            }
            LIT(j, ", \"Global rank start\": 0, \"Global rank stride\": 1");
        }
    }
    put_key_u64(j, ", \"bytes\": ", r->u.lib.bytes);
    LIT(j, ", \"busbw factor\": ");
    tp_jsonw_double(j, tp_coll_busbw_factor(op, n));
    if (tp_coll_peered(op) && r->u.lib.k != TP_COLL_PEERS)
        put_key_u64(j, ", \"peer\": ", r->u.lib.k);
    else if (tp_coll_rooted(op))
        put_key_u64(j, ", \"root\": ", r->u.lib.k);
    if (r->u.lib.flags & TP_LIB_GROUPED)
        LIT(j, ", \"grouped\": true");
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
    coll_nelems(r, &in, &out);
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
    put_coll(c, r);
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
    put_dur(c, ev);
    if (ev->layer == TP_LAYER_LIBRARY) {
        /* a cpu_op: its own External id, no correlation (Kineto's have none) */
        uint64_t id = ev->form == TP_FORM_COLL ? TP_COLL_CALL_ID(ev->external_id) : ev->external_id;
        put_key_u64(j, ", \"args\": {\"External id\": ", id);
    } else {
        put_key_u64(j, ", \"args\": {\"correlation\": ", ev->correlation);
        if (ev->external_id)
            put_key_u64(j, ", \"External id\": ", ev->external_id);
    }
    if (ev->cbid >= 0) {
        LIT(j, ", \"cbid\": ");
        tp_jsonw_i64(j, ev->cbid);
    }
    if (r->kind == TP_REC_LAUNCH) {
        if (ev->kernel && ev->kernel[0]) {
            LIT(j, ", \"kernel\": ");
            tp_jsonw_str(j, ev->kernel);
        }
        if (r->u.launch.func_kind != TP_FUNC_GRAPH) {
            LIT(j, ", \"grid\": ");
            put_triple(j, r->u.launch.grid_x, r->u.launch.grid_y, r->u.launch.grid_z);
            LIT(j, ", \"block\": ");
            put_triple(j, r->u.launch.block_x, r->u.launch.block_y, r->u.launch.block_z);
            LIT(j, ", \"shared memory\": ");
            tp_jsonw_u64(j, r->u.launch.smem);
        } else if (ev->flops) {
            put_key_u64(j, ", \"flops\": ", ev->flops);
        }
        LIT(j, ", \"cuda stream\": ");
        tp_jsonw_u64(j, r->u.launch.stream);
    } else if (ev->form == TP_FORM_GEMM || ev->form == TP_FORM_CONV) {
        put_gemm(c, r);
    } else if (ev->form == TP_FORM_RNN) {
        put_rnn(c, r);
    } else if (ev->form == TP_FORM_TENSOR) {
        put_tensor(c, r);
    } else if (ev->form == TP_FORM_COLL) {
        put_coll(c, r);
    } else {
        int copy = ev->form == TP_FORM_COPY;
        int set = ev->form == TP_FORM_SET;
        if (ev->form == TP_FORM_ALLOC || ev->form == TP_FORM_FREE) {
            put_key_u64(j, ", \"addr\": ", r->u.mem.addr);
            put_key_u64(j, ", \"bytes\": ", r->u.mem.bytes);
            if (r->u.mem.flags & TP_MEM_FAILED)
                LIT(j, ", \"failed\": 1");
        }
        if (copy || set) {
            LIT(j, ", \"bytes\": ");
            tp_jsonw_u64(j, r->u.api.bytes);
        }
        if (copy && r->u.api.copy_kind < sizeof copy_kinds / sizeof copy_kinds[0]) {
            LIT(j, ", \"kind\": \"");
            tp_jsonw_lit(j, copy_kinds[r->u.api.copy_kind]);
            tp_jsonw_char(j, '"');
        }
        if (copy || set || ev->form == TP_FORM_SYNC_STREAM) {
            LIT(j, ", \"cuda stream\": ");
            tp_jsonw_u64(j, r->u.api.stream);
        } else if (ev->form == TP_FORM_SYNC_EVENT) {
            LIT(j, ", \"cuda event\": ");
            tp_jsonw_u64(j, r->u.api.stream);
        }
    }
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
    const struct tp_dev_record *d = ev->dev;
    switch (d->kind) {
    case TP_DEV_KERNEL:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"kernel\", ", ev->name, ev);
        break;
    case TP_DEV_MEMCPY:
        HEAD(c, "{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", ", ev->name, ev);
        break;
    case TP_DEV_MEMSET:
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
    if (d->kind == TP_DEV_KERNEL)
        LIT(j, "\"queued\": 0, ");
    put_key_u64(j, "\"device\": ", d->device);
    put_key_u64(j, ", \"context\": ", d->context);
    put_key_u64(j, ", \"stream\": ", d->stream);
    put_key_u64(j, ", \"correlation\": ", d->correlation);
    if (d->kind == TP_DEV_KERNEL) {
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
            put_coll(c, ev->issuer);     /* as Kineto copies record_param_comms' */
    } else if (d->kind == TP_DEV_MEMCPY || d->kind == TP_DEV_MEMSET) {
        put_key_u64(j, ", \"bytes\": ", d->bytes);
        LIT(j, ", \"memory bandwidth (GB/s)\": ");
        tp_jsonw_double(j, ev->dur_ns > 0 ? (double)d->bytes / (double)ev->dur_ns : 0);
    } else if (d->kind == TP_DEV_SYNC) {
        LIT(j, ", \"cuda_sync_kind\": ");       /* HTA's critical path reads it */
        tp_jsonw_str(j, ev->name);
        if (tp_dev_waits_on_event(d)) {         /* and these, as Kineto writes them */
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
    put_threads(c, w);
    const char *slash = strrchr(c->out.final, '/');
    LIT(j, "\n  ],\n  \"traceName\": ");
    tp_jsonw_str(j, slash ? slash + 1 : c->out.final);
    LIT(j, "\n}\n");
    int err = tp_jsonw_finish(j);
    int rc = err ? tp_output_abort(&c->out, err) : tp_output_commit(&c->out);
    if (rc == 0)
        snprintf(saved->trace, sizeof saved->trace, "%s", c->out.final);
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
