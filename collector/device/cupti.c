/*
 * cupti.c - DESIGN: the device side through CUPTI's Activity API, loaded
 * at run time; this file is its lifecycle and the public entry points of
 * cupti.h.  The rest lives beside it, one concern per file (the map and
 * the one-way uses are in cupti_impl.h): finding and loading libcupti
 * (cupti_load.c), the activity buffer pool (cupti_buffers.c), decoding a
 * record (cupti_decode.c), the API cbids we keep (cupti_cbid.c), the
 * pending records and windows (cupti_window.c).
 *
 * Start: a missing or too old libcupti, a missing entry point or a failed
 * subscription (cuptiSubscribe_v2: another tool holds CUPTI) make CUPTI
 * "unavailable": one line, never retried.  The timestamp callback is
 * registered before any kind is enabled, so that every record uses our
 * clock.  Collect (tp-flush only): FlushAll with no lock of ours held, then
 * decode every completed buffer into the pending lists.
 *
 * Lifecycle (README "What is in a trace", on CUPTI): kinds are toggled per window only on CUPTI >=
 * 130001 (13.0 GA could deadlock disabling CONCURRENT_KERNEL); the last
 * stop flushes, disables and, when the driver (libcuda already loaded:
 * never loaded by us) is >= 12.6 and no stream capture may be open, has
 * the next CUDA API call's exit callback unsubscribe and cuptiFinalize, as
 * Kineto does (tp_finalize; without a call within 200 ms, or otherwise, it
 * only unsubscribes); then CUPTI is "finished" for the process.
 *
 * Another client (preload/cupti.c, tp_cupti_foreign) can take CUPTI from
 * us at any time; from then on CUPTI is "lost" and never called again.
 *
 * Threads: the entry points below run on tp-flush, but their CUPTI and
 * driver calls run on tp-cupti (cupti_call.c), so that a termination
 * signal's save never waits on CUPTI's lock, which the interrupted thread
 * may hold: the *_run functions, with static inputs and results.  If
 * tp-cupti does not answer within its grace after such a signal, CUPTI is
 * "abandoned": no call again, and the status says so.  Decoding and the
 * pending lists stay on tp-flush.
 */
#include "cupti_impl.h"

#include "collector/common/clock.h"
#include "collector/config/config.h"
#include "props.h"
#include "collector/common/loader.h"
#include "collector/common/log.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define TP_CUPTI_TOGGLE_VERSION 130001u  /* 13.0 Update 1: disabling kinds is safe */
#define TP_CUPTI_FINALIZE_CUDA  12060    /* cuptiFinalize with CUDA graphs: fixed in 12.6 */
#define TP_CUPTI_STR(x) #x
#define TP_CUPTI_XSTR(x) TP_CUPTI_STR(x)
#define TP_TEARDOWN_WAIT_MS 200           /* for a CUDA call to finalize from */
/* Slack around [start, now] for our records' times: drift, and work queued
 * ahead (the fake CUPTI's device timeline runs seconds ahead under a flood
 * of launches).  Another client's clock is off by far more: Kineto's is a
 * TSC count, CLOCK_MONOTONIC is time since boot, both decades from Unix ns. */
#define TP_CLOCK_SLACK_NS (60ull * 1000000000ull)

enum { ST_UNTRIED = 0, ST_ACTIVE, ST_UNAVAILABLE, ST_FINISHED, ST_OFF, ST_LOST };

static int tp_state;                   /* flush thread */
static uint32_t tp_version;
static char tp_status_text[160] = "not started";
static CUpti_SubscriberHandle tp_subscriber;
static atomic_int tp_kinds_on;          /* read by application threads (ext push/pop) */
static _Atomic uint64_t tp_kinds_enabled; /* bit per CUpti_ActivityKind that Enable accepted
                                           (written by tp-flush, read by tp_cupti_foreign) */
static uint64_t tp_kinds_reported;      /* kinds whose failure was said */
static int (*tp_capture_check)(void);
static __thread int tp_ext_depth __attribute__((tls_model("initial-exec")));
static uint64_t tp_started_ns;          /* tp_clock_ns() when the kinds first went on */

/* Other clients (tp_cupti_foreign, any thread). */
static atomic_int tp_foreign_buffers;           /* one registered its buffer callbacks */
static const void *_Atomic tp_foreign_buffers_by; /* a code address of the first that did */
static _Atomic uint64_t tp_lost_tick;           /* when CUPTI stopped being ours; 0: it is */
static _Atomic unsigned tp_lost_what;
static const void *_Atomic tp_lost_caller;

/* Enabled at start: CONCURRENT_KERNEL, never KERNEL (it serialises kernels).
 * INTERNAL_LAUNCH_API, as Kineto does: launches made outside any public API
 * call (inside libraries) get an API record and so an external correlation.
 * Not MEMORY2: the memory timeline comes from the allocation wrappers, and
 * its records would cost CUPTI's buffers for nothing (another tool may
 * enable it: the decoder skips its records).
 * CUDA_EVENT (what event syncs wait on: Kineto's wait_on_*) comes first, so
 * that it does not widen the gap between the kernel kind and the API
 * records, where a launch would get a kernel record its call cannot claim. */
static const CUpti_ActivityKind tp_kinds[] = {
    CUPTI_ACTIVITY_KIND_CUDA_EVENT,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API,
};

static const char *tp_kind_name(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return "MEMCPY2";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return "EXTERNAL_CORRELATION";
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return "OVERHEAD";
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: return "CUDA_EVENT";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "DRIVER";
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API: return "INTERNAL_LAUNCH_API";
    default: return "?";
    }
}

/* ---- other clients ---------------------------------------------------------- */

void tp_cupti_foreign(unsigned what, int kind, const void *caller)
{
    uint64_t bit = kind >= 0 && kind < 64 ? 1ull << kind : 0;
    if ((what & TP_FOREIGN_DISABLE) && !(atomic_load(&tp_kinds_enabled) & bit))
        return;                         /* a kind we do not use */
    if ((what & TP_FOREIGN_BUFFERS) && !atomic_exchange(&tp_foreign_buffers, 1))
        atomic_store(&tp_foreign_buffers_by, caller);
    if (__atomic_load_n(&tp_state, __ATOMIC_RELAXED) != ST_ACTIVE)
        return;
    uint64_t zero = 0;
    if (atomic_compare_exchange_strong(&tp_lost_tick, &zero, tp_clock_now() | 1)) {
        atomic_store(&tp_lost_caller, caller);
        atomic_store(&tp_lost_what, what);
    }
    atomic_store(&tp_kinds_on, 0);      /* no more external ids from the hot path */
}

uint64_t tp_cupti_lost_at(void)
{
    return atomic_load(&tp_lost_tick);
}

/* The file name of the object holding code address "addr", or "unknown". */
static const char *tp_client_name(const void *addr)
{
    Dl_info info;
    if (!addr || !dladdr(addr, &info) || !info.dli_fname || !info.dli_fname[0])
        return "unknown";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static const char *tp_foreign_call(unsigned what)
{
    if (what & TP_FOREIGN_BUFFERS)
        return "cuptiActivityRegisterCallbacks";
    if (what & TP_FOREIGN_CLOCK)
        return "cuptiActivityRegisterTimestampCallback";
    if (what & TP_FOREIGN_DISABLE)
        return "cuptiActivityDisable";
    if (what & TP_FOREIGN_FINALIZE)
        return "cuptiFinalize";
    return "?";
}

/* 1 while CUPTI is ours and active; the first call after another client
 * took it moves to ST_LOST, says so once and sets the status line.  No
 * CUPTI call is made after that: the other client owns the process's
 * activity API now, and a call could re-initialize a finalized CUPTI. */
static int tp_still_ours(void)
{
    if (tp_state != ST_ACTIVE || tp_cupti_abandoned())
        return 0;
    if (!atomic_load(&tp_lost_tick))
        return 1;
    __atomic_store_n(&tp_state, ST_LOST, __ATOMIC_RELAXED);
    atomic_store(&tp_kinds_on, 0);
    struct tp_device_batch gone;           /* what we hold may be incomplete: let it go */
    tp_cupti_take(0, UINT64_MAX, &gone);
    tp_cupti_window_free(&gone);
    unsigned what = atomic_load(&tp_lost_what);
    if (what & TP_FOREIGN_TIMES) {
        snprintf(tp_status_text, sizeof tp_status_text,
                 "lost: device records came timed outside this process's clock "
                 "(another client replaced CUPTI's timestamp callback)");
    } else {
        snprintf(tp_status_text, sizeof tp_status_text,
                 "lost: another CUPTI client (%s) took the activity API (%s) while trainprof "
                 "recorded", tp_client_name(atomic_load(&tp_lost_caller)), tp_foreign_call(what));
    }
    TP_WARN("CUPTI %s; no device records from then on (profile with torch.profiler or "
            "another CUPTI tool in a separate run)", tp_status_text + strlen("lost: "));
    return 0;
}

/* ---- subscription ----------------------------------------------------------- */

/* CUPTI's clock: ours, in ns as its contract asks; records are mapped back
 * to ticks when decoded, so that they compare with host records exactly. */
static uint64_t CUPTIAPI tp_timestamp(void)
{
    return tp_clock_ns();
}

/* Set when CUPTI refused tp_timestamp: its records then carry its own
 * clock (CLOCK_REALTIME on Linux, cupti_activity.h), which tp_measure_offset
 * relates to ours before each collection (records are decoded only there). */
static int tp_own_clock;

/* CUPTI's clock minus ours, from the tightest of three bracketed reads
 * (a read of each clock costs tens of ns; a preempted bracket is long).
 * Measured at load and before each collection: the uncertainty
 * given to the host/device join is the bracket, the change since the last
 * measure (CLOCK_REALTIME is slewed by NTP) and 1 us. */
static struct { int ok; int64_t off; uint64_t slack; } tp_offset_new;   /* tp-cupti's last measure */

static int tp_measure_offset(void)
{
    static int64_t last;
    static int measured;
    tp_offset_new.ok = 0;
    if (!tp_cupti_fn.cuptiGetTimestamp)
        return -1;
    uint64_t best = UINT64_MAX;
    int64_t off = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t c, a = tp_clock_ns();
        if (tp_cupti_fn.cuptiGetTimestamp(&c) != CUPTI_SUCCESS)
            return -1;
        uint64_t b = tp_clock_ns();
        if (b - a < best) {
            best = b - a;
            off = (int64_t)(c - (a + (b - a) / 2));
        }
    }
    uint64_t moved = measured ? (uint64_t)(off > last ? off - last : last - off) : 0;
    uint64_t slack_ns = 2 * best + moved + 1000, base = tp_clock_ns();
    tp_offset_new.off = off;
    tp_offset_new.slack = tp_clock_ns_to_ticks(base + slack_ns) - tp_clock_ns_to_ticks(base);
    tp_offset_new.ok = 1;
    last = off;
    measured = 1;
    return 0;
}

/* tp-flush, after the call that measured: the decoder's offset. */
static void tp_offset_apply(void)
{
    if (tp_offset_new.ok)
        tp_cupti_clock_offset(tp_offset_new.off, tp_offset_new.slack);
    tp_offset_new.ok = 0;
}

/* Run "fn" on tp-cupti; 0, or -1 when CUPTI was abandoned (then the hot
 * path pushes no more external ids). */
static int tp_run(void (*fn)(void *))
{
    if (tp_cupti_call(fn, NULL) == 0)
        return 0;
    atomic_store(&tp_kinds_on, 0);
    return -1;
}

/* cuptiFinalize as cupti_activity.h asks and Kineto does it: from the exit
 * callback of a CUDA API call, on the application thread that made it, once
 * the flush thread has flushed and disabled everything (tp_cupti_stop).
 * Before it, the state leaves ST_ACTIVE, so that no new external-id push or
 * pop starts, and the ones under way are waited for: a push or pop reaching
 * a finalized CUPTI would re-initialize it. */
enum { TD_NONE = 0, TD_ASKED, TD_RUNNING, TD_DONE };
static atomic_int tp_teardown;
static atomic_int tp_ext_inflight;      /* external-id pushes and pops inside CUPTI now */

static void tp_ext_drain(void)
{
    for (int spins = 0; atomic_load(&tp_ext_inflight) > 0 && spins < 100000; spins++)
        sched_yield();
}

static void CUPTIAPI tp_subscriber_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                      const void *data)
{
    (void)ud;
    (void)id;
    const CUpti_CallbackData *cb = data;
    if ((d != CUPTI_CB_DOMAIN_RUNTIME_API && d != CUPTI_CB_DOMAIN_DRIVER_API) || !cb ||
        cb->callbackSite != CUPTI_API_EXIT)
        return;
    int asked = TD_ASKED;
    if (tp_cupti_exit_closed() ||
        !atomic_compare_exchange_strong(&tp_teardown, &asked, TD_RUNNING))
        return;
    __atomic_store_n(&tp_state, ST_FINISHED, __ATOMIC_SEQ_CST);
    tp_ext_drain();
    /* cuptiFinalize alone: it drops every subscriber.  cuptiUnsubscribe
     * here, from inside our own subscriber's callback, freed what CUPTI
     * 13.0 was still walking (heap corruption, then a crash at a later
     * free, on an H100 with torch 2.11). */
    tp_cupti_fn.cuptiFinalize();
    atomic_store(&tp_teardown, TD_DONE);
}

static void tp_unavailable(const char *why)
{
    __atomic_store_n(&tp_state, ST_UNAVAILABLE, __ATOMIC_RELAXED);
    snprintf(tp_status_text, sizeof tp_status_text, "unavailable: %s", why);
}

/* Load, check and subscribe; 0 or -1 (state set, line printed). */
static int tp_load(void)
{
    char why[128];
    if (atomic_load(&tp_foreign_buffers)) {
        /* Taking the buffer callbacks back would hand us its buffers in
         * flight and leave it none: the activity API stays its own. */
        const char *who = tp_client_name(atomic_load(&tp_foreign_buffers_by));
        snprintf(why, sizeof why, "in use by another CUPTI client in this process (%s)", who);
        TP_WARN("CUPTI's activity API is in use by another client in this process (%s called "
                "cuptiActivityRegisterCallbacks); recording host-side only", who);
        tp_unavailable(why);
        return -1;
    }
    if (tp_cupti_load(&tp_version, why, sizeof why) != 0) {
        tp_unavailable(why);
        return -1;
    }
    char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
    CUpti_SubscriberParams sp = {
        .structSize = CUpti_SubscriberParams_STRUCT_SIZE,
        .subscriberName = "trainprof",
        .oldSubscriberName = other,
        .oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN,
    };
    /* 12.x lacks cuptiSubscribe_v2 (13.0): the plain one names nobody. */
    CUptiResult rc = tp_cupti_fn.cuptiSubscribe_v2
                         ? tp_cupti_fn.cuptiSubscribe_v2(&tp_subscriber, tp_subscriber_cb, NULL, &sp)
                         : tp_cupti_fn.cuptiSubscribe(&tp_subscriber, tp_subscriber_cb, NULL);
    if (rc != CUPTI_SUCCESS) {
        /* Only CUPTI's own answer says another tool holds it; any other
         * error (999, UNKNOWN, where the driver cannot serve CUPTI) is
         * reported as what it is. */
        other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = 0;
        if (other[0] || rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
            const char *who = other[0] ? other : "not named by CUPTI";
            snprintf(why, sizeof why, "in use by another tool (%s)", who);
            TP_WARN("CUPTI is in use by another tool (%s); recording host-side only", who);
        } else {
            snprintf(why, sizeof why, "cuptiSubscribe failed (%s)", tp_cupti_result_str(rc));
            TP_WARN("CUPTI refused to subscribe (%s); recording host-side only",
                    tp_cupti_result_str(rc));
        }
        tp_unavailable(why);
        return -1;
    }
    /* Before any kind is enabled, so that every record uses our ticks. */
    CUptiResult ts = tp_cupti_fn.cuptiActivityRegisterTimestampCallback(tp_timestamp);
    if (ts != CUPTI_SUCCESS) {
        tp_own_clock = 1;
        if (tp_measure_offset() == 0)
            TP_WARN("CUPTI refused our timestamp callback (%s); device times are CUPTI's clock, "
                    "moved onto ours by an offset measured before each collection",
                    tp_cupti_result_str(ts));
        else
            TP_WARN("CUPTI refused our timestamp callback (%s) and gives no timestamp to "
                    "measure its clock against; device times may be off", tp_cupti_result_str(ts));
    }
    tp_cupti_pending_budget((size_t)tp_cfg.buffer_mb << 20);   /* TRAINPROF_BUFFER_MB bounds these too */
    if (tp_cupti_buf_register() != 0) {
        tp_cupti_fn.cuptiUnsubscribe(tp_subscriber);
        tp_unavailable("cannot register activity buffers");
        TP_WARN("CUPTI refused the activity buffers; recording host-side only");
        return -1;
    }
    return 0;
}

/* ---- enable / disable ----------------------------------------------------- */

static void tp_kind_set(CUpti_ActivityKind k, int on)
{
    uint64_t bit = 1ull << ((unsigned)k & 63);
    if (on) {
        CUptiResult rc = tp_cupti_fn.cuptiActivityEnable(k);
        if (rc == CUPTI_SUCCESS) {
            atomic_fetch_or(&tp_kinds_enabled, bit);
        } else if (!(tp_kinds_reported & bit)) {
            tp_kinds_reported |= bit;
            TP_WARN("CUPTI activity kind %s not enabled: %s", tp_kind_name(k),
                    tp_cupti_result_str(rc));
        }
    } else if ((atomic_load(&tp_kinds_enabled) & bit) && !tp_cupti_exit_closed()) {
        atomic_fetch_and(&tp_kinds_enabled, ~bit);
        tp_cupti_fn.cuptiActivityDisable(k);    /* each one checks: exit may begin between */
    }
}

/* Runtime or driver API records: the whole kind, then the cbids we do not
 * keep turned off one by one with cuptiActivityEnable{Runtime,Driver}Api
 * where CUPTI has it (the header's way to leave out a few; what is left
 * on is filtered while decoding anyway).  Those functions alone, on a
 * kind left off, were accepted by CUPTI 13.0 on an H100 and gave no
 * record at all. */
static void tp_api_set(int driver, int on)
{
    __typeof__(tp_cupti_fn.cuptiActivityEnableRuntimeApi) fn =
        driver ? tp_cupti_fn.cuptiActivityEnableDriverApi
               : tp_cupti_fn.cuptiActivityEnableRuntimeApi;
    unsigned n = driver ? CUPTI_DRIVER_TRACE_CBID_SIZE : CUPTI_RUNTIME_TRACE_CBID_SIZE;
    CUpti_ActivityKind kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    tp_kind_set(kind, on);
    if (on && fn && (atomic_load(&tp_kinds_enabled) & (1ull << kind)))
        for (unsigned c = 0; c < n; c++)
            if (tp_cupti_cb_class(driver, c) == TP_CB_OTHER)
                fn(c, 0);
}

/* tp-cupti */
static void tp_enable_run(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < sizeof tp_kinds / sizeof tp_kinds[0]; i++)
        tp_kind_set(tp_kinds[i], 1);
    tp_api_set(0, 1);
    tp_api_set(1, 1);
    atomic_store(&tp_kinds_on, 1);
}

/* tp-cupti */
static void tp_disable_run(void *arg)
{
    (void)arg;
    atomic_store(&tp_kinds_on, 0);
    tp_api_set(0, 0);
    tp_api_set(1, 0);
    for (size_t i = 0; i < sizeof tp_kinds / sizeof tp_kinds[0]; i++)
        tp_kind_set(tp_kinds[i], 0);
}

static void tp_enable_all(void)
{
    tp_cupti_pending_forget_events();   /* events recorded while off went unseen */
    tp_run(tp_enable_run);
}

/* ---- lifecycle -------------------------------------------------------------- */

static struct { int had_context, rc; } tp_start_job;

/* tp-cupti: the first start, only with a driver and a context (CUPTI without
 * a driver crashes: props.h, tp_driver_ready).  Not a final state: a
 * process may create its context after a trainprof_* call activated us;
 * asking again costs a loader callback while libcuda is absent. */
static void tp_start_run(void *arg)
{
    (void)arg;
    char why[120];
    tp_start_job.rc = -1;
    if (!tp_driver_ready(tp_start_job.had_context, tp_cfg.cuda_visible, why, sizeof why)) {
        snprintf(tp_status_text, sizeof tp_status_text, "not started: %s", why);
        return;
    }
    if (tp_load() != 0)
        return;
    tp_started_ns = tp_clock_ns();
    __atomic_store_n(&tp_state, ST_ACTIVE, __ATOMIC_RELAXED);
    tp_enable_run(NULL);
    snprintf(tp_status_text, sizeof tp_status_text, "active (CUPTI %u)", tp_version);
    tp_start_job.rc = 0;
}

/* The program's exit began (exit() or a return from main), before the
 * CUDA runtime's exit handler: what tp-cupti is doing finishes first, and
 * nothing that reaches the driver starts after.  The device records are
 * still collected (flushing walks CUPTI's buffers: after the runtime's
 * teardown it was seen to work, and CUPTI flushes a context's records
 * when the context is destroyed). */
static void tp_cupti_at_exit(void)
{
    tp_cupti_exit_close(TP_CUPTI_GRACE_S * 1000);
}

int tp_cupti_start(int had_context)
{
    switch (tp_state) {
    case ST_UNAVAILABLE:
    case ST_FINISHED:
    case ST_OFF:
    case ST_LOST:
        return -1;
    case ST_ACTIVE:
        if (!tp_still_ours())
            return -1;
        if (!atomic_load(&tp_kinds_on))
            tp_enable_all();
        return tp_cupti_abandoned() ? -1 : 0;
    default:
        break;
    }
    if (!(tp_cfg.activities & TP_ACT_CUDA)) {
        __atomic_store_n(&tp_state, ST_OFF, __ATOMIC_RELAXED);
        snprintf(tp_status_text, sizeof tp_status_text, "off (TRAINPROF_ACTIVITIES)");
        return -1;
    }
    if (tp_cupti_abandoned())
        return -1;
    /* Without libcuda in the process CUPTI has nothing to trace: say so
     * here, a symbol lookup, rather than start tp-cupti for nothing (a CPU
     * job's every process would carry an idle thread). */
    char why[80];
    if (!tp_driver_loaded(why, sizeof why)) {
        snprintf(tp_status_text, sizeof tp_status_text, "not started: %s", why);
        return -1;
    }
    tp_start_job.had_context = had_context;
    tp_cupti_pending_forget_events();
    if (tp_run(tp_start_run) != 0)
        return -1;
    tp_offset_apply();
    if (tp_start_job.rc == 0) {
        /* Registered now, after the runtime registered its own exit handler
         * (it did at its initialization, which made the context CUPTI
         * needed), so that ours runs first (atexit's order is the reverse). */
        static int registered;
        if (!registered)
            registered = atexit(tp_cupti_at_exit) == 0;
    }
    return tp_start_job.rc;
}

int tp_cupti_enabled(void)
{
    return atomic_load_explicit(&tp_kinds_on, memory_order_relaxed) && !tp_cupti_abandoned();
}

static struct { int forced, dropped_ok; size_t dropped; } tp_collect_job;

/* tp-cupti */
static void tp_collect_run(void *arg)
{
    (void)arg;
    if (tp_own_clock)
        tp_measure_offset();            /* CLOCK_REALTIME drifts against ours (NTP) */
    tp_cupti_fn.cuptiActivityFlushAll(tp_collect_job.forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    tp_collect_job.dropped = 0;
    tp_collect_job.dropped_ok =
        tp_cupti_fn.cuptiActivityGetNumDroppedRecords(NULL, 0, &tp_collect_job.dropped) ==
        CUPTI_SUCCESS;
}

void tp_cupti_collect(int forced)
{
    /* Abandoned: the buffers CUPTI completed before are still decoded
     * (cuptiActivityGetNextRecord only walks a buffer). */
    int flushed = 0, abandoned = tp_cupti_abandoned();
    if (!abandoned) {
        if (!tp_still_ours())
            return;
        tp_collect_job.forced = forced;
        flushed = tp_run(tp_collect_run) == 0;
        if (flushed)
            tp_offset_apply();
    } else if (!tp_started_ns) {
        return;
    }
    /* Our records lie between the start and now; one far outside was timed
     * by another client's timestamp callback. */
    uint64_t now = tp_clock_now();
    uint64_t lo = tp_clock_ns_to_ticks(tp_started_ns - TP_CLOCK_SLACK_NS);
    tp_cupti_pending_clock(lo < now ? lo : 0,   /* ticks since boot: less than the slack */
                           tp_clock_ns_to_ticks(tp_clock_ns() + TP_CLOCK_SLACK_NS));
    tp_cupti_buf_drain(tp_cupti_decode);
    if (flushed && tp_collect_job.dropped_ok)
        tp_cupti_pending_drop(tp_collect_job.dropped);
    if (tp_cupti_pending_off_clock())
        tp_cupti_foreign(TP_FOREIGN_TIMES, -1, NULL);
}

void tp_cupti_set_capture_check(int (*fn)(void))
{
    tp_capture_check = fn;
}

/* CUDA driver version from a libcuda already loaded, 0 if none (tp-cupti). */
static int tp_driver_version(void)
{
    static const char *const name = "cuDriverGetVersion";
    void *p;
    tp_driver_syms(&name, &p, 1);
    int v = 0;
    int (*fn)(int *) = (int (*)(int *))p;
    if (!fn || fn(&v) != 0)
        v = 0;
    return v;
}

/* Unsubscribe and, where "safe", finalize from the next API exit callback
 * (tp_subscriber_cb), waiting for one up to TP_TEARDOWN_WAIT_MS; a program
 * that makes no CUDA call by then keeps a detached-but-initialized CUPTI
 * (kinds off, unsubscribed: nothing of ours runs).  Returns what happened,
 * for the status line. */
static const char *tp_finalize(int safe)
{
    CUpti_SubscriberHandle sub = tp_subscriber;
    if (tp_cupti_exit_closed())
        return "left on: the program was exiting";
    if (!safe || !tp_cupti_fn.cuptiEnableDomain) {
        tp_cupti_fn.cuptiUnsubscribe(sub);
        return safe ? "not finalized: no cuptiEnableDomain" : "not finalized: unsafe here";
    }
    atomic_store(&tp_teardown, TD_ASKED);
    if (tp_cupti_fn.cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS &&
        tp_cupti_fn.cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS) {
        for (int ms = 0; ms < TP_TEARDOWN_WAIT_MS && atomic_load(&tp_teardown) != TD_DONE; ms++) {
            struct timespec d = { 0, 1000000 };
            nanosleep(&d, NULL);
        }
    }
    int asked = TD_ASKED;
    if (atomic_compare_exchange_strong(&tp_teardown, &asked, TD_NONE)) {
        if (tp_cupti_exit_closed())
            return "left on: the program was exiting";
        tp_cupti_fn.cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
        tp_cupti_fn.cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_DRIVER_API);
        tp_cupti_fn.cuptiUnsubscribe(sub);
        return "not finalized: no CUDA call to finalize from";
    }
    while (atomic_load(&tp_teardown) != TD_DONE)   /* running in a callback now */
        sched_yield();
    return "finalized";
}

static struct { int capture; const char *how; } tp_stop_job;

/* tp-cupti */
static void tp_finalize_run(void *arg)
{
    (void)arg;
    tp_stop_job.how = tp_finalize(!tp_stop_job.capture &&
                                  tp_driver_version() >= TP_CUPTI_FINALIZE_CUDA);
}

void tp_cupti_stop(int final)
{
    if (tp_cupti_abandoned() || !tp_still_ours())
        return;
    if (!final) {
        if (tp_version >= TP_CUPTI_TOGGLE_VERSION && atomic_load(&tp_kinds_on))
            tp_run(tp_disable_run);
        return;
    }
    tp_cupti_collect(1);
    if (tp_run(tp_disable_run) != 0)
        return;
    tp_cupti_collect(1);
    tp_stop_job.capture = tp_capture_check && tp_capture_check();
    if (tp_run(tp_finalize_run) != 0)
        return;
    __atomic_store_n(&tp_state, ST_FINISHED, __ATOMIC_SEQ_CST);
    snprintf(tp_status_text, sizeof tp_status_text, "finished (CUPTI %u; %s)", tp_version,
             tp_stop_job.how);
}

/* Push and pop count themselves in tp_ext_inflight around the CUPTI call
 * and check the state inside that bracket (sequentially consistent, as the
 * finalizer's store of the state and load of the count are), so that the
 * finalizer either sees them or they see it finished. */
void tp_cupti_ext_push(uint64_t id)
{
    if (!atomic_load_explicit(&tp_kinds_on, memory_order_relaxed))
        return;
    atomic_fetch_add(&tp_ext_inflight, 1);
    if (__atomic_load_n(&tp_state, __ATOMIC_SEQ_CST) == ST_ACTIVE &&
        tp_cupti_fn.cuptiActivityPushExternalCorrelationId(TP_CUPTI_EXT_KIND, id) == CUPTI_SUCCESS)
        tp_ext_depth++;
    atomic_fetch_sub(&tp_ext_inflight, 1);
}

/* Pops what this thread pushed even if the kinds went off in between, so
 * that a stale id never stays on CUPTI's per-thread stack. */
void tp_cupti_ext_pop(void)
{
    if (tp_ext_depth <= 0)
        return;
    tp_ext_depth--;
    atomic_fetch_add(&tp_ext_inflight, 1);
    if (__atomic_load_n(&tp_state, __ATOMIC_SEQ_CST) == ST_ACTIVE)
        tp_cupti_fn.cuptiActivityPopExternalCorrelationId(TP_CUPTI_EXT_KIND, NULL);
    atomic_fetch_sub(&tp_ext_inflight, 1);
}

const char *tp_cupti_status(void)
{
    if (tp_cupti_abandoned())
        return "abandoned: CUPTI did not answer within " TP_CUPTI_XSTR(TP_CUPTI_GRACE_S)
               " s of a termination or fatal signal (the interrupted thread may hold its "
               "lock); device records not delivered by then are left out";
    tp_still_ours();                    /* a loss not noticed yet names itself */
    return tp_status_text;
}
