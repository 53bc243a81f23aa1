/*
 * chrome_header.c - DESIGN: the chrome trace's top-level keys, written by
 * the handler's open() before "traceEvents": [ (chrome.c), in the order of
 * Kineto's ChromeTraceLogger.  Configuration and user metadata are parsed
 * with jansson and re-emitted through our own writer, so their strings get
 * the same escaping as event names.  The top level claims only what is
 * known, as torch.profiler's does: Kineto's trace_id, record_shapes (only
 * when on) and host_name, and distributedInfo only on a process group's,
 * NCCL's or a launcher's word, with a backend only where one is known.
 * The process-group helpers (tp_chrome_is_world, tp_chrome_put_rank_list)
 * serve a collective's arguments too (chrome_args.c).
 */
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
#include "collector/contract/device.h"
#include "chrome_impl.h"

#ifndef TP_VERSION_STRING
#define TP_VERSION_STRING "0.1.0"
#endif

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
        const struct tp_device_prop *d = &w->devices[i];
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
int tp_chrome_is_world(int size, int rank, int world_size, int my_rank)
{
    return world_size > 1 && size == world_size && rank == my_rank;
}

/* "[0, 1, ..., n-1]" as Kineto writes "Process Group Ranks" ("as_string":
 * in a string), at most TP_PG_RANKS_LISTED. */
void tp_chrome_put_rank_list(struct tp_jsonw *j, int n, int as_string)
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
void tp_chrome_dist_rank(const struct tp_window *w, int *rank, int *world_size)
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
    tp_chrome_dist_rank(w, &rank, &world_size);
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
            int world = tp_chrome_is_world((int)p->size, p->rank, world_size, rank);
            tp_jsonw_lit(j, i ? ", {\"pg_name\": \"" : "{\"pg_name\": \"");
            tp_jsonw_u64(j, p->serial);
            LIT(j, "\", \"pg_desc\": ");
            tp_jsonw_lit(j, world ? "\"default_pg\"" : "\"undefined\"");
            LIT(j, ", \"backend_config\": \"cuda:nccl\", \"pg_size\": ");
            tp_jsonw_u64(j, p->size);
            LIT(j, ", \"ranks\": ");
            if (world)
                tp_chrome_put_rank_list(j, (int)p->size, 0);
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

void tp_chrome_put_header(struct chrome *c, const struct tp_window *w)
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
    LIT(j, ", \"flight\": ");
    tp_flight_put(j, w);
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
