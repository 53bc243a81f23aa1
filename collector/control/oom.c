/*
 * oom.c - DESIGN: the out-of-memory report.  PyTorch's memory snapshot
 * cannot see memory allocated directly through CUDA (NCCL's buffers, a
 * library's workspace), and an out-of-memory error usually ends the job
 * before anyone looks; the ledger (collector/modules/memtrack.c) sees every
 * allocation of every library.  When an allocation fails for want of
 * memory (cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY, NCCL's
 * failed ncclMemAlloc), the failing thread keeps, under the ledger's lock,
 * what each call site held at that moment and at the last 10 step ends,
 * and the driver's free and total bytes (cuMemGetInfo, a query of the
 * context the failing thread holds).  Nothing else happens on that
 * thread: the program gets the failure exactly as before.
 *
 * tp-flush writes {reports}/rank{rank}.oom.txt and .json on its idle
 * tick (once a second, through lifecycle.c's idle hook) once the burst's
 * first failure is TP_OOM_SETTLE_MS old: within about 1.3 s, and after the
 * retry that PyTorch's caching allocator makes (it frees its cached blocks
 * and tries again once before it raises), which the report counts.
 * Failures closer than 5 s to the previous one are one burst, one report;
 * a later burst gets rank{rank}.oom.{n}.txt (n >= 2), up to 100.  Files are
 * written the library's one way (safefile.c: a temporary name, then a
 * rename, never through a planted link), the text first and the JSON last.
 * One stderr line says where the report went.
 *
 * What it says, and how sure it is: the request (entry point, bytes,
 * device, its owner and call site); the device's total and free bytes and
 * the bytes the ledger saw allocated on it (the rest of the used bytes are
 * the CUDA context and other processes, said as such); the ledger's
 * coverage (bytes allocated whose owner is named, over all it saw); the
 * bytes held by owner and by call site; and per step end, what grew since.
 */
#include "oom.h"

#include "collector/common/clock.h"
#include "collector/common/format.h"
#include "collector/common/log.h"
#include "collector/common/safefile.h"
#include "collector/config/config.h"
#include "collector/drain/flusher.h"
#include "collector/contract/vocab.h"
#include "collector/modules/memowner.h"
#include "collector/modules/memtrack.h"
#include "collector/modules/stack.h"
#include "collector/record/apis.h"
#include "collector/record/pgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TP_OOM_MAX_REPORTS 100
#define TP_OOM_TOP_SITES 20

static _Atomic unsigned tp_oom_written;
static _Atomic int tp_oom_busy;     /* tp-flush is taking or writing a report */

unsigned tp_oom_reports(void)
{
    return tp_oom_written;
}

static const char *tp_class_name(int mclass)
{
    return mclass == TP_MEM_HOST ? "host-pinned" : mclass == TP_MEM_MANAGED ? "managed" : "device";
}

/* "1.50 GiB", "512 B" */
static const char *tp_human(char *out, size_t n, uint64_t b)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%llu B", (unsigned long long)b);
    else
        snprintf(out, n, "%.2f %s", v, unit[u]);
    return out;
}

static const char *tp_where(char *out, size_t n, int device, int mclass)
{
    if (mclass == TP_MEM_HOST)
        snprintf(out, n, "host-pinned memory");
    else
        snprintf(out, n, "GPU %d%s", device, mclass == TP_MEM_MANAGED ? " (managed)" : "");
    return out;
}

struct tp_oom_owner {
    const char *owner;
    uint64_t held;
    uint64_t at_step[TP_MEM_GROWTH];
};

static int tp_oom_owner_cmp(const void *pa, const void *pb)
{
    const struct tp_oom_owner *a = pa, *b = pb;
    if (a->held != b->held)
        return a->held > b->held ? -1 : 1;
    return strcmp(a->owner, b->owner);
}

struct tp_oom_site {
    const char *owner, *site;
    uint64_t held;
};

static int tp_oom_site_cmp(const void *pa, const void *pb)
{
    const struct tp_oom_site *a = pa, *b = pb;
    if (a->held != b->held)
        return a->held > b->held ? -1 : 1;
    return strcmp(a->site, b->site);
}

/* A growable text buffer (tp-flush). */
struct tp_txt {
    char *s;
    size_t n, cap;
    int oom;
};

__attribute__((format(printf, 2, 3))) static void tp_txt(struct tp_txt *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = t->cap - t->n;
        va_start(ap, fmt);
        int k = t->s ? vsnprintf(t->s + t->n, room, fmt, ap) : -1;
        va_end(ap);
        if (k >= 0 && (size_t)k < room) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (k >= 0 && cap < t->n + (size_t)k + 1)
            cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->oom = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

/* The report of burst "o" with the call sites "v" (n of them), as text and JSON. */
static void tp_oom_report(const struct tp_mem_oom *o, const struct tp_mem_origin_info *v, int n)
{
    int rank, world_size;
    tp_rank_now(&rank, &world_size);
    const struct tp_memown *req = NULL;
    if (o->origin < (uint32_t)n)
        req = tp_memown_of(&v[o->origin], o->origin);
    const char *api = tp_api_name(o->from.api);
    char b1[64], b2[64], b3[64], where[64];
    tp_where(where, sizeof where, o->device, o->mclass);

    /* owners and sites on the failing (device, class) */
    struct tp_oom_owner *own = calloc((size_t)n + 1, sizeof *own);
    struct tp_oom_site *sites = calloc((size_t)n + 1, sizeof *sites);
    int n_own = 0, n_sites = 0;
    uint64_t held = 0, named = 0, all = 0;
    for (int i = 0; own && sites && i < n; i++) {
        const struct tp_memown *m = tp_memown_of(&v[i], (uint32_t)i);
        all += v[i].allocated;
        if (m->named)
            named += v[i].allocated;
        if (v[i].device != o->device || v[i].mclass != o->mclass)
            continue;
        held += v[i].live;
        int k = 0;
        while (k < n_own && strcmp(own[k].owner, m->owner) != 0)
            k++;
        if (k == n_own)
            own[n_own++].owner = m->owner;
        own[k].held += v[i].live;
        for (int s = 0; s < TP_MEM_GROWTH; s++)
            own[k].at_step[s] += v[i].at_step[s];
        if (v[i].live)
            sites[n_sites++] = (struct tp_oom_site){ m->owner, m->site[0] ? m->site : "(unknown)", v[i].live };
    }
    if (own)
        qsort(own, (size_t)n_own, sizeof *own, tp_oom_owner_cmp);
    if (sites)
        qsort(sites, (size_t)n_sites, sizeof *sites, tp_oom_site_cmp);

    json_t *j = json_object();
    json_t *jr = json_object();
    json_t *jo = json_array(), *js = json_array(), *jg = json_array();
    struct tp_txt t = { 0 };
    if (!j || !jr || !jo || !js || !jg || !own || !sites)
        goto out;
    time_t now = time(NULL);
    struct tm tm;
    char when[64];
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);

    json_object_set_new(j, "schema", json_integer(1));
    json_object_set_new(j, "kind", json_string("trainprof-oom"));
    json_object_set_new(j, "rank", json_integer(rank));
    json_object_set_new(j, "world_size", json_integer(world_size));
    json_object_set_new(j, "pid", json_integer(getpid()));
    json_object_set_new(j, "host", json_string(tp_cfg.hostname));
    json_object_set_new(j, "program", json_string(tp_cfg.program));
    json_object_set_new(j, "written", json_real((double)now));
    json_object_set_new(j, "burst", json_integer((json_int_t)o->burst));
    json_object_set_new(j, "steps_completed", json_integer((json_int_t)o->steps));
    json_object_set_new(jr, "api", json_string(api));
    json_object_set_new(jr, "bytes", json_integer((json_int_t)o->bytes));
    json_object_set_new(jr, "device", json_integer(o->device));
    json_object_set_new(jr, "class", json_string(tp_class_name(o->mclass)));
    json_object_set_new(jr, "owner", json_string(req ? req->owner : TP_MEMOWN_UNKNOWN));
    json_object_set_new(jr, "site", json_string(req ? req->site : ""));
    json_object_set_new(jr, "thread", json_integer(o->tid));
    /* TRAINPROF_MEMORY_STACKS: the request's native stack, outermost first */
    uint64_t ips[TP_STACK_MAX];
    int nips = o->origin < (uint32_t)n && v[o->origin].stack ? tp_mem_stack(v[o->origin].stack, ips, TP_STACK_MAX) : 0;
    const char *const *frames = nips ? tp_stack_resolve(ips, nips) : NULL;
    if (frames) {
        json_t *jf = json_array();
        for (int k = 0; jf && k < nips; k++)
            json_array_append_new(jf, json_string(frames[k]));
        json_object_set_new(jr, "stack", jf);
    }
    json_object_set_new(j, "request", jr);
    jr = NULL;
    if (o->meminfo)
        json_object_set_new(j, "device_memory", json_pack("{s:I, s:I, s:I}", "free_bytes",
                                                          (json_int_t)o->dev_free, "total_bytes",
                                                          (json_int_t)o->dev_total, "used_bytes",
                                                          (json_int_t)(o->dev_total - o->dev_free)));
    else
        json_object_set_new(j, "device_memory", json_null());
    json_object_set_new(j, "ledger_bytes", json_integer((json_int_t)held));
    json_object_set_new(j, "coverage", all ? json_real((double)named / (double)all) : json_null());
    json_object_set_new(j, "failures", json_pack("{s:I, s:I, s:I}", "failed_calls", (json_int_t)o->failures,
                                                 "frees_after_first", (json_int_t)o->frees_after,
                                                 "allocations_after_first", (json_int_t)o->allocs_after));

    tp_txt(&t, "trainprof: out of memory on rank %d (pid %d, %s, %s), %s\n\n", rank, (int)getpid(),
           tp_cfg.hostname, tp_cfg.program, when);
    if (o->steps)
        tp_txt(&t, "%s of %s on %s failed for want of memory, with %llu steps completed.\n", api,
               tp_human(b1, sizeof b1, o->bytes), where, (unsigned long long)o->steps);
    else
        tp_txt(&t, "%s of %s on %s failed for want of memory, before the first step ended.\n", api,
               tp_human(b1, sizeof b1, o->bytes), where);
    tp_txt(&t, "  asked by: %s, at %s (thread %d)\n", req ? req->owner : TP_MEMOWN_UNKNOWN,
           req && req->site[0] ? req->site : "an unknown call site", (int)o->tid);
    if (frames) {
        tp_txt(&t, "  its stack, outermost first:\n");
        for (int k = 0; k < nips; k++)
            tp_txt(&t, "    %s\n", frames[k]);
    }
    if (o->meminfo) {
        uint64_t used = o->dev_total - o->dev_free;
        tp_txt(&t, "  the device: %s total, %s free, %s used (cuMemGetInfo at the failure)\n",
               tp_human(b1, sizeof b1, o->dev_total), tp_human(b2, sizeof b2, o->dev_free),
               tp_human(b3, sizeof b3, used));
        tp_txt(&t, "  intercepted allocations hold %s of it (%.1f %% of the used bytes); the rest is "
               "the CUDA context, memory allocated before trainprof started, and other processes\n",
               tp_human(b1, sizeof b1, held), used ? 100.0 * (double)held / (double)used : 0.0);
    } else {
        tp_txt(&t, "  the device's free and total bytes: unknown (the driver did not answer cuMemGetInfo)\n"
               "  intercepted allocations hold %s on %s\n", tp_human(b1, sizeof b1, held), where);
    }
    if (all)
        tp_txt(&t, "  coverage: the owner is named for %.1f %% of the bytes allocated through intercepted "
               "calls (\"unknown\": no return address could be read)\n", 100.0 * (double)named / (double)all);
    tp_txt(&t, "  the burst: %llu failed call%s (failures less than 5 s apart are one burst, one report); "
           "after the first, the program freed %llu block%s and allocated %llu before this report was "
           "written (PyTorch's caching allocator frees its cached blocks and retries once before it "
           "raises: its retry is a second failed call)\n",
           (unsigned long long)o->failures, o->failures == 1 ? "" : "s", (unsigned long long)o->frees_after,
           o->frees_after == 1 ? "" : "s", (unsigned long long)o->allocs_after);

    tp_txt(&t, "\nHeld by owner on %s at the failure:\n", where);
    for (int k = 0; k < n_own; k++) {
        if (!own[k].held)
            continue;
        tp_txt(&t, "  %-32s %12s  %5.1f %%\n", own[k].owner, tp_human(b1, sizeof b1, own[k].held),
               held ? 100.0 * (double)own[k].held / (double)held : 0.0);
        json_array_append_new(jo, json_pack("{s:i, s:s, s:s, s:I}", "device", o->device, "class",
                                            tp_class_name(o->mclass), "owner", own[k].owner, "bytes",
                                            (json_int_t)own[k].held));
    }
    tp_txt(&t, "\nHeld by call site on %s (the %d largest):\n", where,
           n_sites < TP_OOM_TOP_SITES ? n_sites : TP_OOM_TOP_SITES);
    for (int k = 0; k < n_sites && k < TP_OOM_TOP_SITES; k++) {
        tp_txt(&t, "  %12s  %-28s %s\n", tp_human(b1, sizeof b1, sites[k].held), sites[k].owner, sites[k].site);
        json_array_append_new(js, json_pack("{s:s, s:s, s:I}", "owner", sites[k].owner, "site", sites[k].site,
                                            "bytes", (json_int_t)sites[k].held));
    }
    int rows = o->steps < TP_MEM_GROWTH ? (int)o->steps : TP_MEM_GROWTH;
    if (rows)
        tp_txt(&t, "\nWhat grew on %s since the end of each of the last %d steps:\n", where, rows);
    else
        tp_txt(&t, "\nWhat grew since a step ended: no step had ended.\n");
    for (int s = 0; s < rows; s++) {
        uint64_t step = o->steps - (uint64_t)s - 1;    /* steps - s completed: step index steps-s-1 ended */
        int64_t total = 0;
        for (int k = 0; k < n_own; k++)
            total += (int64_t)own[k].held - (int64_t)own[k].at_step[s];
        json_t *g = json_object(), *go = json_object();
        tp_txt(&t, "  since step %llu: %s%s", (unsigned long long)step, total < 0 ? "-" : "+",
               tp_human(b1, sizeof b1, (uint64_t)(total < 0 ? -total : total)));
        int first = 1;
        for (int k = 0; k < n_own; k++) {
            int64_t d = (int64_t)own[k].held - (int64_t)own[k].at_step[s];
            if (go)
                json_object_set_new(go, own[k].owner, json_integer(d));
            if (!d)
                continue;
            tp_txt(&t, "%s%s %s%s", first ? " (" : ", ", own[k].owner, d < 0 ? "-" : "+",
                   tp_human(b1, sizeof b1, (uint64_t)(d < 0 ? -d : d)));
            first = 0;
        }
        tp_txt(&t, "%s\n", first ? "" : ")");
        if (g && go) {
            json_object_set_new(g, "step", json_integer((json_int_t)step));
            json_object_set_new(g, "grew_bytes", json_integer(total));
            json_object_set_new(g, "owners", go);
            json_array_append_new(jg, g);
        } else {
            json_decref(g);
            json_decref(go);
        }
    }
    json_object_set_new(j, "owners", jo);
    json_object_set_new(j, "sites", js);
    json_object_set_new(j, "growth", jg);
    jo = js = jg = NULL;

    char *jtext = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    struct tp_format_vars fv = {
        .run_name = tp_cfg.run_name, .hostname = tp_cfg.hostname, .rank = rank,
        .local_rank = tp_cfg.local_rank, .world_size = world_size,
        .local_world_size = tp_cfg.local_world_size, .node_rank = tp_cfg.node_rank,
        .pid = (int)getpid(), .batch = -1, .path = NULL,
    };
    char dir[4096], err[256], jname[96], tname[96];
    const char *why = NULL;
    if (tp_format_expand_at(tp_cfg.reports, &fv, tp_cfg.start_dir, dir, sizeof dir, err, sizeof err) != 0)
        why = err;
    if (tp_oom_written == 0) {
        snprintf(jname, sizeof jname, "rank%d.oom.json", rank);
        snprintf(tname, sizeof tname, "rank%d.oom.txt", rank);
    } else {
        snprintf(jname, sizeof jname, "rank%d.oom.%u.json", rank, tp_oom_written + 1);
        snprintf(tname, sizeof tname, "rank%d.oom.%u.txt", rank, tp_oom_written + 1);
    }
    if (!why && (!jtext || t.oom))
        why = "out of memory";
    if (!why && (tp_safefile_put(dir, tname, t.s, t.n) != 0 || tp_safefile_put(dir, jname, jtext, strlen(jtext)) != 0))
        why = strerror(errno);
    if (why)
        TP_ERROR("out of memory on %s: report not written to %s: %s", where,
                 why == err ? tp_cfg.reports : dir, why);
    else
        TP_WARN("out of memory on %s (%s of %s failed): who held it: %s/%s", where, api,
                tp_human(b1, sizeof b1, o->bytes), dir, tname);
    tp_oom_written++;
    free(jtext);
out:
    json_decref(j);
    json_decref(jr);
    json_decref(jo);
    json_decref(js);
    json_decref(jg);
    free(t.s);
    free(own);
    free(sites);
}

/* At exit: the memory still held, by owner, in one line (tp-flush, which
 * names the owners); nothing when everything was freed.  A job that ends
 * with memory held is normal (PyTorch keeps its cache; the driver frees
 * everything with the context): the line is for a leak's owner. */
static _Atomic int tp_held_due;

static void tp_held_line(void)
{
    struct tp_mem_origin_info *v = NULL;
    int n = tp_mem_origins(-1, &v, NULL, NULL);
    struct row {
        int16_t device;
        uint8_t mclass;
        const char *owner;
        uint64_t bytes, blocks;
    } *rows = n ? calloc((size_t)n, sizeof *rows) : NULL;
    int nr = 0;
    for (int i = 0; rows && i < n; i++) {
        if (!v[i].live)
            continue;
        const struct tp_memown *m = tp_memown_of(&v[i], (uint32_t)i);
        int k = 0;
        while (k < nr && !(rows[k].device == v[i].device && rows[k].mclass == v[i].mclass &&
                           strcmp(rows[k].owner, m->owner) == 0))
            k++;
        if (k == nr)
            rows[nr++] = (struct row){ v[i].device, v[i].mclass, m->owner, 0, 0 };
        rows[k].bytes += v[i].live;
        rows[k].blocks += v[i].allocs > v[i].frees ? v[i].allocs - v[i].frees : 0;
    }
    struct tp_txt t = { 0 };
    for (int k = 0; k < nr; k++) {
        char where[64], b[64];
        int seen = 0;   /* rows of one (device, class) are not always adjacent: group them */
        for (int j = 0; j < k && !seen; j++)
            seen = rows[j].device == rows[k].device && rows[j].mclass == rows[k].mclass;
        if (seen)
            continue;
        tp_txt(&t, "%s%s:", t.n ? "; " : "", tp_where(where, sizeof where, rows[k].device, rows[k].mclass));
        for (int j = k; j < nr; j++)
            if (rows[j].device == rows[k].device && rows[j].mclass == rows[k].mclass)
                tp_txt(&t, "%s %s %s (%llu block%s)", j == k ? "" : ",", rows[j].owner,
                       tp_human(b, sizeof b, rows[j].bytes), (unsigned long long)rows[j].blocks,
                       rows[j].blocks == 1 ? "" : "s");
    }
    if (t.n && !t.oom) {
        int rank, world_size;
        tp_rank_now(&rank, &world_size);
        TP_INFO("rank %d: memory held at exit (the driver frees it with the context): %s", rank, t.s);
    }
    free(t.s);
    free(rows);
    free(v);
}

void tp_oom_at_exit(int ms)
{
    if (!tp_cfg.profile_memory || !tp_flusher_running() || tp_flusher_is_self())
        return;
    atomic_store(&tp_held_due, 1);
    /* pending before busy: busy is set before the report is taken (which
     * clears pending) and cleared once it is written */
    tp_flusher_wake();
    for (int i = 0; i < ms && (tp_mem_oom_pending() || atomic_load(&tp_oom_busy) || atomic_load(&tp_held_due));
         i++) {
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

void tp_oom_idle(void)
{
    if (tp_oom_written < TP_OOM_MAX_REPORTS) {
        struct tp_mem_oom o;
        struct tp_mem_origin_info *v = NULL;
        /* at exit no retry is coming: write at once (the job usually ends
         * right after its out-of-memory error) */
        uint64_t settle = tp_flusher_exiting() ? 0 : (uint64_t)TP_OOM_SETTLE_MS * 1000000u;
        atomic_store(&tp_oom_busy, 1);
        int n = tp_mem_oom_take(tp_clock_ns(), settle, &o, &v);
        if (n >= 0) {
            tp_oom_report(&o, v, n);
            free(v);
        }
        atomic_store(&tp_oom_busy, 0);
        if (n >= 0 && tp_oom_written == TP_OOM_MAX_REPORTS)
            TP_WARN("%d out-of-memory reports written: no more for this process", TP_OOM_MAX_REPORTS);
    }
    if (atomic_load(&tp_held_due) && (!tp_mem_oom_pending() || tp_oom_written >= TP_OOM_MAX_REPORTS)) {
        if (tp_cfg.profile_memory)
            tp_held_line();
        atomic_store(&tp_held_due, 0);
    }
}
