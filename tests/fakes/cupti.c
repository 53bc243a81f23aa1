/*
 * cupti.c - a fake libcupti (soname libcupti.so.13) for tests without a GPU.
 *
 * DESIGN
 * Implements, with the prototypes of the CUDA 13.0 CUPTI headers, the calls
 * collector/device/cupti*.c make: version, subscribe (v2) / unsubscribe, activity
 * enable/disable (whole kinds and per runtime/driver cbid), buffer and
 * timestamp callbacks, attributes, flush, record iteration, dropped counts,
 * external correlation push/pop (per-thread stacks), finalize, and of the
 * callback API what finalizing from an exit callback needs: the subscriber's
 * function, cuptiEnableDomain for the runtime and driver API domains, and a
 * call of it (CUPTI_API_EXIT, outside our lock) when each call returns.
 * After cuptiFinalize the first push, pop, enable, flush or subscribe is
 * logged as "reinit <call>" (the real CUPTI re-initializes itself lazily on
 * any call: cupti_activity.h), and a finalize made from inside an exit
 * callback is logged as "finalize in-exit-callback".
 *
 * Work comes from the fake runtime (cudart.c) and, if loaded, the fake
 * driver: while any kind or cbid is enabled, this library registers itself
 * with them through fakegpu_set_observer() (tests/fakes/fakegpu.h).  begin()
 * takes a timestamp from the client's timestamp callback (CLOCK_REALTIME ns
 * without one) and hands out the correlation id; end() queues, as the REAL
 * record structs of CUDA 13.0: one CUpti_ActivityExternalCorrelation per
 * external kind pushed on the calling thread, then a CUpti_ActivityAPI (kind
 * RUNTIME or DRIVER, only if that kind or that cbid is enabled), and for work
 * a CUpti_ActivityKernel10 (CONCURRENT_KERNEL) / Memcpy6 / Memset4 /
 * Synchronization2 on device 0, context 1, stream 7 for the default stream
 * (handles 0 and 1) and 13, 14, ... for other handles in order of first use,
 * and for cudaEventRecord a CUpti_ActivityCudaEvent2 (CUDA_EVENT: the
 * record version CUPTI >= 12.8 delivers) naming the event (eventId 1001,
 * 1002, ... per handle in order of first use), its stream and correlation,
 * with a fresh cudaEventSyncId.  Synchronization2 records of event syncs
 * (cudaEventSynchronize, cudaStreamWaitEvent) carry the event's eventId and
 * its last cudaEventSyncId, other syncs CUPTI_SYNCHRONIZATION_INVALID_VALUE.
 * The stream of cudaStreamWaitEvent's record is the waiting stream.
 * Nested calls: a call that begins while another call of the same thread
 * is open (a runtime reaching the driver inside its own call: the fake
 * runtime with FAKE_CUDART_LOOKUP=1, a runtime linked into the program as
 * tests/programs/static_rt.c has) gets no record of its own, as with the
 * real CUPTI 13.0 on an H100: the outermost call's end queues its API record
 * and, under its correlation id, the device work the nested calls reported
 * (its own work if they reported none).  Observers are the fake runtime,
 * the fake driver and, if it exports fakegpu_set_observer, the program.
 * Device work starts 2 us after the API call returns and is serialized per
 * stream: kernels last 5 us (NCCL's, whose names hold "nccl",
 * FAKE_CUPTI_COMM_US when set: in a data-parallel step the collective is
 * the long kernel), copies 1 us + 100 ps per byte, sets 1 us + 10 ps per
 * byte, in callback units: ticks per microsecond are calibrated once by
 * sampling the timestamp callback across a 2 ms sleep.  A synchronization
 * record spans the API call itself.
 *
 * Buffer layout: records back to back at 8-byte aligned offsets, each as
 * large as its struct (the kind says which); cuptiActivityGetNextRecord walks
 * that.  Queued records move into client buffers (obtained from the client's
 * "requested" callback) and buffers go back through "completed": from the
 * thread "fake-cupti" every ~20 ms, and synchronously in
 * cuptiActivityFlushAll (both flags).
 *
 * Versions: FAKE_CUPTI_VERSION (default 130001) is what cuptiGetVersion
 * reports, and it picks the record structs and the entry points of that
 * CUPTI release (collector/device/cupti_layouts.h has the facts): below 26
 * (12.4-12.6) Kernel9, Memcpy5, Synchronization, CudaEvent; below 130000
 * (12.8-12.9) Kernel9, Memcpy6, Synchronization2, CudaEvent2; below 130100
 * (13.0) Kernel10; from 130100 (13.1+) Kernel11, written as Kernel10's
 * fields in Kernel11's 224 bytes (the 13.0 headers we build with lack it).
 * Each record is written through its own struct type (the older ones from
 * cupti_activity_deprecated.h) and is as long as that struct, so a reader
 * that assumes another version reads wrong fields or past the record.
 * Entry points a release lacks are absent to dlsym (GNU ifunc resolvers
 * returning NULL): cuptiSubscribe_v2 and
 * cuptiActivityEnableCudaEventDeviceTimestamps before 130000,
 * cuptiActivityEnableRuntimeApi/DriverApi before 24 (12.6).
 *
 * Environment: FAKE_CUPTI_VERSION (above); FAKE_CUPTI_BUSY=1 (the
 * subscribe fails with MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, naming "Nsight
 * Systems"); FAKE_CUPTI_SUBSCRIBE_ERROR=N (the subscribe fails with
 * CUptiResult N and names nobody, as the real one answers 999, UNKNOWN,
 * where the driver cannot serve it); FAKE_CUPTI_TS_REFUSED=1 (the timestamp
 * callback is refused with NOT_INITIALIZED, the header's other answer, and
 * records keep CUPTI's default CLOCK_REALTIME; =2 refuses cuptiGetTimestamp
 * too); FAKE_CUPTI_CLOCK_STEP_MS=N (that clock as if NTP had stepped
 * CLOCK_REALTIME by N ms after our activation); FAKE_CUPTI_DELAY_MS=N (device records become visible N ms after
 * their API call unless flushed with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
 * FAKE_CUPTI_FAIL_KIND=K (cuptiActivityEnable(K) fails); FAKE_CUPTI_LOG=path
 * (one line per subscribe, enable KIND, disable KIND, flush, unsubscribe,
 * finalize, and "cuda_event EVENTID STREAMID CORRELATION" per CUDA_EVENT
 * record); FAKE_CUPTI_COMM_US=N (NCCL's kernels last N us, default 5);
 * FAKE_CUPTI_DISABLE_MS=N (cuptiActivityDisable takes N ms: see need_runtime);
 * FAKE_CUPTI_STALL_AT=N with FAKE_CUPTI_STALL_MS=M (the Nth API call
 * recorded stalls M ms in this library's callback from the runtime, with
 * its lock held, after writing "fake-cupti: stalling in a callback" on
 * stderr: a thread interrupted by a signal there holds CUPTI's lock, as a
 * real CUPTI's lock is held while it records a call).
 * Never writes to stdout.
 */
#define _GNU_SOURCE
#include "fakegpu.h"

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_result.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define REC_MAX 256              /* bytes: larger than every record struct */
#define EXT_MAX 32
#define CALL_MAX 16

/* ---- configuration ------------------------------------------------------ */

static uint32_t version = 130001;
static int busy;
static long subscribe_error;
static long delay_ms;
static long comm_us = 5;
static int fail_kind = -1;
static char log_path[1024];

/* The release's record layouts: 0 12.4-12.6, 1 12.8-12.9, 2 13.0, 3 13.1+. */
enum { ERA_12_4, ERA_12_8, ERA_13_0, ERA_13_1 };
static int era_of(uint32_t v)
{
    return v < 26 ? ERA_12_4 : v < 130000 ? ERA_12_8 : v < 130100 ? ERA_13_0 : ERA_13_1;
}
static int era = ERA_13_0;


static int ts_refused;          /* FAKE_CUPTI_TS_REFUSED: 1 the callback, 2 also cuptiGetTimestamp */
static long clock_step_ns;      /* FAKE_CUPTI_CLOCK_STEP_MS: CLOCK_REALTIME as if stepped (NTP) */
static long stall_at, stall_ms; /* FAKE_CUPTI_STALL_AT, FAKE_CUPTI_STALL_MS */
static long n_recorded;         /* API calls recorded (under mu) */

static long env_long(const char *name, long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    return errno == 0 && *end == '\0' ? n : def;
}

__attribute__((constructor)) static void fake_init(void)
{
    version = (uint32_t)env_long("FAKE_CUPTI_VERSION", 130001);
    era = era_of(version);
    busy = env_long("FAKE_CUPTI_BUSY", 0) != 0;
    subscribe_error = env_long("FAKE_CUPTI_SUBSCRIBE_ERROR", 0);
    ts_refused = (int)env_long("FAKE_CUPTI_TS_REFUSED", 0);
    clock_step_ns = env_long("FAKE_CUPTI_CLOCK_STEP_MS", 0) * 1000000;
    delay_ms = env_long("FAKE_CUPTI_DELAY_MS", 0);
    comm_us = env_long("FAKE_CUPTI_COMM_US", 5);
    if (comm_us <= 0)
        comm_us = 5;
    fail_kind = (int)env_long("FAKE_CUPTI_FAIL_KIND", -1);
    stall_at = env_long("FAKE_CUPTI_STALL_AT", 0);
    stall_ms = env_long("FAKE_CUPTI_STALL_MS", 0);
    const char *l = getenv("FAKE_CUPTI_LOG");
    if (l)
        snprintf(log_path, sizeof log_path, "%s", l);
}

static void flog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void flog(const char *fmt, ...)
{
    if (!log_path[0])
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}

static const char *kind_name(int k)
{
    static __thread char buf[16];
    switch (k) {
    case CUPTI_ACTIVITY_KIND_KERNEL: return "KERNEL";
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return "MEMCPY2";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_MEMORY2: return "MEMORY2";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return "EXTERNAL_CORRELATION";
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return "OVERHEAD";
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: return "CUDA_EVENT";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "DRIVER";
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API: return "INTERNAL_LAUNCH_API";
    default:
        snprintf(buf, sizeof buf, "%d", k);
        return buf;
    }
}

#define KERNEL11_SIZE 224     /* sizeof(CUpti_ActivityKernel11), CUPTI 13.1/13.2 headers */
_Static_assert(KERNEL11_SIZE <= REC_MAX && sizeof(CUpti_ActivityKernel10) <= KERNEL11_SIZE,
               "Kernel11 appends to Kernel10");

static size_t rec_size(int kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        return era == ERA_13_1 ? KERNEL11_SIZE
               : era == ERA_13_0 ? sizeof(CUpti_ActivityKernel10) : sizeof(CUpti_ActivityKernel9);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return era == ERA_12_4 ? sizeof(CUpti_ActivityMemcpy5) : sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return era == ERA_12_4 ? sizeof(CUpti_ActivitySynchronization)
                               : sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT:
        return era == ERA_12_4 ? sizeof(CUpti_ActivityCudaEvent) : sizeof(CUpti_ActivityCudaEvent2);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
    default: return 0;
    }
}

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- state ---------------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;   /* everything below */
static CUpti_BuffersCallbackRequestFunc req_cb;
static CUpti_BuffersCallbackCompleteFunc done_cb;
static CUpti_TimestampCallbackFunc ts_cb;                /* __atomic access */
static int subscribed;
static uint64_t kinds;                                    /* bit per kind < 64 */
/* cbids turned off by cuptiActivityEnable{Runtime,Driver}Api(cbid, 0); as
 * the real CUPTI 13.0 does (seen on an H100), turning one on gives no record
 * while its kind is off, and enabling the kind clears these. */
static uint8_t rt_off[CUPTI_RUNTIME_TRACE_CBID_SIZE];
static uint8_t drv_off[CUPTI_DRIVER_TRACE_CBID_SIZE];
static int observing;
static uint32_t next_corr;                                /* __atomic */
static uint64_t dropped;
static double ticks_per_us;

static uint8_t *cur;                                      /* client buffer being filled */
static size_t cur_size, cur_used;

struct qrec {
    uint64_t visible_ms;                                  /* 0: at once */
    uint64_t data[REC_MAX / 8];
};
static struct qrec *queue;
static size_t q_n, q_cap;

static struct { uint64_t handle; uint32_t id; uint64_t last_end; } streams[256];
static int n_streams;
static struct { uint64_t handle; uint32_t id; uint64_t sync_id; } events[256];
static int n_events;
static uint64_t next_sync_id;

static char *names[1024];
static int n_names;

static pthread_t thread;
static int thread_running;
static int *thread_stop;                  /* the running thread's stop word */

static __thread struct { uint64_t corr, t0; } calls[CALL_MAX];
static __thread int n_calls;
/* Work reported by calls nested in the thread's open call (NESTED below),
 * kept for the outermost call's end; the kernel name is copied, since the
 * reporter's string need not outlive its call. */
#define NESTED_MAX 4
static __thread struct { struct fakegpu_op op; char kernel[256]; } nested[NESTED_MAX];
static __thread int n_nested;
static __thread struct { CUpti_ExternalCorrelationKind kind; uint64_t id; } ext_stack[EXT_MAX];
static __thread int n_ext;

static uint64_t now_ts(void)
{
    CUpti_TimestampCallbackFunc f = __atomic_load_n(&ts_cb, __ATOMIC_ACQUIRE);
    if (f)
        return f();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + (uint64_t)clock_step_ns;
}

static void calibrate(void)
{
    uint64_t t0 = now_ts(), m0 = mono_ns();
    struct timespec d = { 0, 2000000 };
    while (nanosleep(&d, &d) != 0 && errno == EINTR) {
    }
    uint64_t t1 = now_ts(), m1 = mono_ns();
    double us = (double)(m1 - m0) / 1000.0;
    ticks_per_us = t1 > t0 && us > 0 ? (double)(t1 - t0) / us : 1000.0;
}

/* The callback API: the subscriber's function and the domains it enabled
 * (cuptiEnableDomain: runtime and driver API only). */
static CUpti_CallbackFunc sub_cb;
static void *sub_ud;
static int dom_on[2];                                     /* 0 runtime, 1 driver */
static __thread int in_exit_callback;                     /* inside sub_cb at API exit */
static int finalized;                                     /* __atomic: since the last finalize */

static int any_on_locked(void)
{
    return kinds != 0 || dom_on[0] || dom_on[1];
}

/* A call made after cuptiFinalize: the real CUPTI re-initializes itself
 * lazily on it (cupti_activity.h), attaching again to the process. */
static void after_finalize(const char *fn)
{
    if (__atomic_exchange_n(&finalized, 0, __ATOMIC_ACQ_REL))
        flog("reinit %s", fn);
}

/* The fake runtime's exit handler ran (tests/fakes/cudart.c): its contexts
 * are gone.  The real CUPTI 13.0 crashed in cuptiActivityDisable called
 * then (an H100, a program that exited a few ms after its last window);
 * this one says so and aborts, in that call and the others that reach the
 * driver.  FAKE_CUPTI_DISABLE_MS=N makes cuptiActivityDisable take N ms
 * first, so that a program's exit can overlap it. */
static void need_runtime(const char *fn)
{
    const int *gone = dlsym(RTLD_DEFAULT, "fakegpu_runtime_torn_down");
    if (gone && __atomic_load_n(gone, __ATOMIC_ACQUIRE)) {
        char msg[200];
        int n = snprintf(msg, sizeof msg, "fake-cupti: %s after the runtime's exit handler "
                         "destroyed its contexts (the real CUPTI crashes here)\n", fn);
        ssize_t w = write(2, msg, (size_t)n);
        (void)w;
        abort();
    }
}

/* ---- queue and delivery --------------------------------------------------- */

static void enqueue_locked(const void *rec, uint64_t visible_ms)
{
    if (q_n == q_cap) {
        size_t c = q_cap ? q_cap * 2 : 256;
        struct qrec *q = realloc(queue, c * sizeof *q);
        if (!q) {
            dropped++;
            return;
        }
        queue = q;
        q_cap = c;
    }
    struct qrec *e = &queue[q_n++];
    e->visible_ms = visible_ms;
    memset(e->data, 0, sizeof e->data);
    memcpy(e->data, rec, rec_size(((const CUpti_Activity *)rec)->kind));
}

/* Moves ripe records into client buffers; returns the buffers to complete. */
struct done { uint8_t *buf; size_t size, used; };

static int fill_locked(int force, struct done *out, int max)
{
    int n_out = 0;
    uint64_t now = mono_ms();
    size_t kept = 0;
    for (size_t i = 0; i < q_n; i++) {
        struct qrec *e = &queue[i];
        if (!force && e->visible_ms > now) {
            if (kept != i)
                queue[kept] = *e;
            kept++;
            continue;
        }
        const CUpti_Activity *a = (const CUpti_Activity *)(const void *)e->data;
        size_t sz = align8(rec_size(a->kind));
        if (cur && cur_used + sz > cur_size) {
            if (n_out == max) {            /* caller delivers these first, then calls again */
                if (kept != i)
                    memmove(&queue[kept], &queue[i], (q_n - i) * sizeof *queue);
                q_n = kept + (q_n - i);
                return n_out;
            }
            out[n_out++] = (struct done){ cur, cur_size, cur_used };
            cur = NULL;
        }
        if (!cur && req_cb) {
            uint8_t *b = NULL;
            size_t bs = 0, maxr = 0;
            req_cb(&b, &bs, &maxr);
            if (b && bs >= sz) {
                cur = b;
                cur_size = bs;
                cur_used = 0;
            }
        }
        if (!cur) {
            dropped++;
            continue;
        }
        memcpy(cur + cur_used, e->data, rec_size(a->kind));
        cur_used += sz;
    }
    q_n = kept;
    if (cur && cur_used && n_out < max) {
        out[n_out++] = (struct done){ cur, cur_size, cur_used };
        cur = NULL;
    }
    return n_out;
}

static void deliver(int force)
{
    for (;;) {
        struct done d[8];
        pthread_mutex_lock(&mu);
        CUpti_BuffersCallbackCompleteFunc cb = done_cb;
        int n = fill_locked(force, d, 8);
        pthread_mutex_unlock(&mu);
        for (int i = 0; i < n; i++)
            if (cb)
                cb(NULL, 0, d[i].buf, d[i].size, d[i].used);
        if (n < 8)
            return;
    }
}

/* Each delivery thread has its own stop word ("arg"): a finalize that
 * stops one while another call starts the next (its lock is let go before
 * the join) must not have the new thread's start clear the old one's stop
 * (the join then waited for ever: test_cupti's lifecycle, now and then). */
static void *thread_main(void *arg)
{
    int *stop = arg;
    for (;;) {
        struct timespec d = { 0, 20000000 };
        nanosleep(&d, NULL);
        if (__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
            free(stop);
            return NULL;
        }
        deliver(0);
    }
}

static void thread_start_locked(void)
{
    if (thread_running)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int *stop = calloc(1, sizeof *stop);
    if (stop && pthread_create(&thread, NULL, thread_main, stop) == 0) {
        pthread_setname_np(thread, "fake-cupti");
        thread_stop = stop;
        thread_running = 1;
    } else {
        free(stop);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- the observer (called by the fake runtime and driver) ----------------- */

static uint32_t stream_id_locked(uint64_t handle)
{
    if (handle == 0 || handle == 1)
        handle = 0;
    for (int i = 0; i < n_streams; i++)
        if (streams[i].handle == handle)
            return (uint32_t)i;
    if (n_streams == (int)(sizeof streams / sizeof streams[0]))
        return 0;
    streams[n_streams].handle = handle;
    streams[n_streams].id = handle == 0 ? 7 : (uint32_t)(13 + n_streams);
    streams[n_streams].last_end = 0;
    return (uint32_t)n_streams++;
}

/* Index of event "handle" in events[], added on first use (0 when full). */
static int event_locked(uint64_t handle)
{
    for (int i = 0; i < n_events; i++)
        if (events[i].handle == handle)
            return i;
    if (n_events == (int)(sizeof events / sizeof events[0]))
        return 0;
    events[n_events].handle = handle;
    events[n_events].id = (uint32_t)(1001 + n_events);
    events[n_events].sync_id = 0;
    return n_events++;
}

static const char *name_copy_locked(const char *s)
{
    if (!s)
        return NULL;
    for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], s) == 0)
            return names[i];
    if (n_names == (int)(sizeof names / sizeof names[0]))
        return "fake_kernel_names_full";
    char *c = strdup(s);
    if (!c)
        return NULL;
    names[n_names++] = c;
    return c;
}

static CUpti_ActivitySynchronizationType sync_type(int domain, int cbid)
{
    if (domain == FAKEGPU_RUNTIME) {
        switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
        case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
        default:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
        }
    }
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
        return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
        return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz:
        return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
        return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    default:
        return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
    }
}

static void copy_kinds(int k, uint8_t *copy, uint8_t *src, uint8_t *dst)
{
    switch (k) {
    case 0: *copy = CUPTI_ACTIVITY_MEMCPY_KIND_HTOH; *src = *dst = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE; break;
    case 1: *copy = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD; *src = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
            *dst = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE; break;
    case 2: *copy = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH; *src = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
            *dst = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE; break;
    case 3: *copy = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD; *src = *dst = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE; break;
    default: *copy = CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN; *src = *dst = CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
    }
}

static uint64_t fake_begin(void)
{
    uint32_t corr = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
    if (n_calls < CALL_MAX) {
        calls[n_calls].corr = corr;
        calls[n_calls].t0 = now_ts();
        n_calls++;
    }
    return corr;
}

/* The subscriber's API exit callback, if its domain is on: outside our
 * lock, as the real one runs (the client may unsubscribe and finalize in it). */
static void exit_callback(const struct fakegpu_op *op, uint32_t corr)
{
    int drv = op->domain == FAKEGPU_DRIVER;
    pthread_mutex_lock(&mu);
    CUpti_CallbackFunc cb = dom_on[drv] ? sub_cb : NULL;
    void *ud = sub_ud;
    pthread_mutex_unlock(&mu);
    if (!cb || op->cbid < 0)
        return;
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.callbackSite = CUPTI_API_EXIT;
    d.functionName = "fake";
    d.correlationId = corr;
    in_exit_callback = 1;
    cb(ud, drv ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
       (CUpti_CallbackId)op->cbid, &d);
    in_exit_callback = 0;
}

/* NESTED: a call that began while another call of its thread was open (a
 * runtime reaching the driver inside its own call: the fake runtime with
 * FAKE_CUDART_LOOKUP=1, a program's statically linked runtime) gets no
 * record of its own, as with the real CUPTI 13.0 on an H100: one API
 * record, the outer runtime call's, spanning the driver call, and the
 * kernel carrying that record's correlation.  Its work is kept here, on
 * the thread, without a lock, for the outer call's end. */
static void keep_nested(const struct fakegpu_op *op)
{
    if (op->kind == FAKEGPU_NONE || n_nested == NESTED_MAX)
        return;
    nested[n_nested].op = *op;
    if (op->kernel) {
        snprintf(nested[n_nested].kernel, sizeof nested[n_nested].kernel, "%s", op->kernel);
        nested[n_nested].op.kernel = nested[n_nested].kernel;
    }
    n_nested++;
}

static void emit_work_locked(const struct fakegpu_op *op, uint32_t corr, uint64_t t0, uint64_t t1,
                             uint64_t vis);

static void fake_end(uint64_t token, const struct fakegpu_op *op)
{
    exit_callback(op, (uint32_t)token);
    uint64_t t1 = now_ts(), t0 = t1;
    int depth = n_calls - 1;
    while (depth >= 0 && calls[depth].corr != token)
        depth--;
    if (depth >= 0) {
        t0 = calls[depth].t0;
        n_calls = depth;
    }
    if (n_calls > 0) {
        keep_nested(op);
        return;
    }
    uint32_t corr = (uint32_t)token;
    uint64_t vis = delay_ms > 0 ? mono_ms() + (uint64_t)delay_ms : 0;
    int n_inner = n_nested;
    n_nested = 0;
    pthread_mutex_lock(&mu);
    if (!any_on_locked()) {
        pthread_mutex_unlock(&mu);
        return;
    }
    if (++n_recorded == stall_at && stall_ms > 0) {
        static const char msg[] = "fake-cupti: stalling in a callback\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        uint64_t until = mono_ms() + (uint64_t)stall_ms;
        for (uint64_t now = mono_ms(); now < until; now = mono_ms()) {
            struct timespec d = { 0, 10000000 };
            nanosleep(&d, NULL);
        }
    }
    int drv = op->domain == FAKEGPU_DRIVER;
    int cb_off = op->cbid >= 0 &&
                 (drv ? (op->cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && drv_off[op->cbid])
                      : (op->cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE && rt_off[op->cbid]));
    CUpti_ActivityKind api_kind = drv ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    if ((kinds & (1ull << api_kind)) && !cb_off) {
        if (kinds & (1ull << CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
            /* One record per external kind: the innermost id of that kind. */
            for (int i = n_ext - 1; i >= 0; i--) {
                int seen = 0;
                for (int j = i + 1; j < n_ext; j++)
                    seen |= ext_stack[j].kind == ext_stack[i].kind;
                if (seen)
                    continue;
                CUpti_ActivityExternalCorrelation e;
                memset(&e, 0, sizeof e);
                e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
                e.externalKind = ext_stack[i].kind;
                e.externalId = ext_stack[i].id;
                e.correlationId = corr;
                enqueue_locked(&e, 0);
            }
        }
        CUpti_ActivityAPI a;
        memset(&a, 0, sizeof a);
        a.kind = api_kind;
        a.cbid = (CUpti_CallbackId)op->cbid;
        a.start = t0;
        a.end = t1;
        a.processId = (uint32_t)getpid();
        a.threadId = (uint32_t)syscall(SYS_gettid);
        a.correlationId = corr;
        a.returnValue = (uint32_t)op->status;
        enqueue_locked(&a, 0);
    }
    /* The device work is what the nested driver calls enqueued, if any
     * (the real runtime's work is its driver calls'), else the call's own. */
    if (n_inner == 0)
        emit_work_locked(op, corr, t0, t1, vis);
    for (int i = 0; i < n_inner; i++)
        emit_work_locked(&nested[i].op, corr, t0, t1, vis);
    pthread_mutex_unlock(&mu);
}

/* The device record of "op" (none for kind NONE), correlation "corr", for
 * a call that ran [t0, t1]. */
static void emit_work_locked(const struct fakegpu_op *op, uint32_t corr, uint64_t t0, uint64_t t1,
                             uint64_t vis)
{
    uint32_t si = op->kind != FAKEGPU_NONE ? stream_id_locked(op->stream) : 0;
    uint32_t sid = streams[si].id;
    uint64_t gap = (uint64_t)(2 * ticks_per_us);
    uint64_t start = t1 + gap > streams[si].last_end ? t1 + gap : streams[si].last_end;
    switch (op->kind) {
    case FAKEGPU_KERNEL:
        if (kinds & ((1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) |
                     (1ull << CUPTI_ACTIVITY_KIND_KERNEL))) {
            uint64_t buf[REC_MAX / 8];
            memset(buf, 0, sizeof buf);
            int comm = op->kernel && strstr(op->kernel, "nccl") != NULL;
            uint64_t end = start + (uint64_t)((double)(comm ? comm_us : 5) * ticks_per_us);
            CUpti_ActivityKind kk = (kinds & (1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
                                        ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                        : CUPTI_ACTIVITY_KIND_KERNEL;
            const char *kname = name_copy_locked(op->kernel);
#define FILL_KERNEL(T) do {                                                                     \
                T *k = (T *)(void *)buf;                                                        \
                k->kind = kk;                                                                   \
                k->registersPerThread = 32;                                                     \
                k->start = start;                                                               \
                k->end = end;                                                                   \
                k->completed = end;                                                             \
                k->deviceId = 0;                                                                \
                k->contextId = 1;                                                               \
                k->streamId = sid;                                                              \
                k->gridX = (int32_t)op->grid[0], k->gridY = (int32_t)op->grid[1];               \
                k->gridZ = (int32_t)op->grid[2];                                                \
                k->blockX = (int32_t)op->block[0], k->blockY = (int32_t)op->block[1];           \
                k->blockZ = (int32_t)op->block[2];                                              \
                k->staticSharedMemory = 0;                                                      \
                k->dynamicSharedMemory = (int32_t)op->smem;                                     \
                k->correlationId = corr;                                                        \
                k->gridId = corr;                                                               \
                k->name = kname;                                                                \
                k->launchType = (uint8_t)op->cooperative;                                       \
                k->clusterX = op->cluster[0], k->clusterY = op->cluster[1];                     \
                k->clusterZ = op->cluster[2];                                                   \
            } while (0)
            if (era >= ERA_13_0)
                FILL_KERNEL(CUpti_ActivityKernel10);
            else
                FILL_KERNEL(CUpti_ActivityKernel9);
#undef FILL_KERNEL
            streams[si].last_end = end;
            enqueue_locked(buf, vis);
        }
        break;
    case FAKEGPU_MEMCPY:
        if (kinds & (1ull << CUPTI_ACTIVITY_KIND_MEMCPY)) {
            uint64_t buf[REC_MAX / 8];
            memset(buf, 0, sizeof buf);
            uint64_t end = start + (uint64_t)(ticks_per_us * (1.0 + (double)op->bytes / 10000.0));
#define FILL_MEMCPY(T) do {                                                         \
                T *m = (T *)(void *)buf;                                            \
                m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;                               \
                copy_kinds(op->copy_kind, &m->copyKind, &m->srcKind, &m->dstKind);  \
                m->bytes = op->bytes;                                               \
                m->start = start;                                                   \
                m->end = end;                                                       \
                m->deviceId = 0;                                                    \
                m->contextId = 1;                                                   \
                m->streamId = sid;                                                  \
                m->correlationId = corr;                                            \
                m->runtimeCorrelationId = corr;                                     \
            } while (0)
            if (era == ERA_12_4)
                FILL_MEMCPY(CUpti_ActivityMemcpy5);
            else
                FILL_MEMCPY(CUpti_ActivityMemcpy6);
#undef FILL_MEMCPY
            streams[si].last_end = end;
            enqueue_locked(buf, vis);
        }
        break;
    case FAKEGPU_MEMSET:
        if (kinds & (1ull << CUPTI_ACTIVITY_KIND_MEMSET)) {
            CUpti_ActivityMemset4 m;
            memset(&m, 0, sizeof m);
            m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
            m.bytes = op->bytes;
            m.start = start;
            m.end = start + (uint64_t)(ticks_per_us * (1.0 + (double)op->bytes / 100000.0));
            m.deviceId = 0;
            m.contextId = 1;
            m.streamId = sid;
            m.correlationId = corr;
            m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
            streams[si].last_end = m.end;
            enqueue_locked(&m, vis);
        }
        break;
    case FAKEGPU_SYNC:
        if (kinds & (1ull << CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
            uint64_t buf[REC_MAX / 8];
            memset(buf, 0, sizeof buf);
            CUpti_ActivitySynchronizationType type = sync_type(op->domain, op->cbid);
            uint32_t ev = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
            uint32_t ev_sync = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
            if (type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE ||
                type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) {
                int ei = event_locked(op->event);
                ev = events[ei].id;
                if (events[ei].sync_id)
                    ev_sync = (uint32_t)events[ei].sync_id;
            }
#define FILL_SYNC(T) do {                                                           \
                T *s = (T *)(void *)buf;                                            \
                s->kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;                      \
                s->type = type;                                                     \
                s->start = t0;                                                      \
                s->end = t1;                                                        \
                s->correlationId = corr;                                            \
                s->contextId = 1;                                                   \
                s->streamId = sid;                                                  \
                s->cudaEventId = ev;                                                \
            } while (0)
            if (era == ERA_12_4) {
                FILL_SYNC(CUpti_ActivitySynchronization);
            } else {
                FILL_SYNC(CUpti_ActivitySynchronization2);
                ((CUpti_ActivitySynchronization2 *)(void *)buf)->cudaEventSyncId = ev_sync;
            }
#undef FILL_SYNC
            enqueue_locked(buf, 0);
        }
        break;
    case FAKEGPU_EVENT: {
        int ei = event_locked(op->event);
        events[ei].sync_id = ++next_sync_id;
        if (kinds & (1ull << CUPTI_ACTIVITY_KIND_CUDA_EVENT)) {
            uint64_t buf[REC_MAX / 8];
            memset(buf, 0, sizeof buf);
            if (era == ERA_12_4) {
                CUpti_ActivityCudaEvent *e1 = (CUpti_ActivityCudaEvent *)(void *)buf;
                e1->kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
                e1->correlationId = corr;
                e1->contextId = 1;
                e1->streamId = sid;
                e1->eventId = events[ei].id;
            } else {
                CUpti_ActivityCudaEvent2 *e2 = (CUpti_ActivityCudaEvent2 *)(void *)buf;
                e2->kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
                e2->correlationId = corr;
                e2->contextId = 1;
                e2->streamId = sid;
                e2->eventId = events[ei].id;
                e2->deviceId = 0;
                e2->cudaEventSyncId = events[ei].sync_id;
            }
            enqueue_locked(buf, vis);
            const CUpti_ActivityCudaEvent *e = (const CUpti_ActivityCudaEvent *)(const void *)buf;
            flog("cuda_event %u %u %u", e->eventId, e->streamId, e->correlationId);
        }
        break;
    }
    default:
        break;
    }
}

/* Tell the fake runtime and driver (those already loaded) to report, or
 * stop; and the program itself, if it exports fakegpu_set_observer (a
 * runtime linked into it: tests/programs/static_rt.c). */
static void set_observers(int on)
{
    static const char *const libs[] = { "libcudart.so.13", "libcuda.so.1" };
    fakegpu_set_observer_fn seen[2] = { NULL, NULL };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        void *h = dlopen(libs[i], RTLD_NOLOAD | RTLD_LAZY);
        if (!h)
            continue;
        fakegpu_set_observer_fn set = (fakegpu_set_observer_fn)dlsym(h, "fakegpu_set_observer");
        if (set)
            set(on ? fake_begin : NULL, on ? fake_end : NULL);
        seen[i] = set;
        dlclose(h);
    }
    /* the global scope's first definition: the program's, else one of the
     * libraries' above (told already) */
    void *self = dlopen(NULL, RTLD_LAZY);
    fakegpu_set_observer_fn set = self ? (fakegpu_set_observer_fn)dlsym(self, "fakegpu_set_observer") : NULL;
    if (set && set != seen[0] && set != seen[1])
        set(on ? fake_begin : NULL, on ? fake_end : NULL);
    if (self)
        dlclose(self);
}

/* After a change of the enabled set: start or stop observing. */
static void update_observing(void)
{
    pthread_mutex_lock(&mu);
    int want = any_on_locked();
    int change = want != observing;
    observing = want;
    if (want) {
        if (ticks_per_us <= 0) {
            pthread_mutex_unlock(&mu);
            calibrate();
            pthread_mutex_lock(&mu);
        }
        thread_start_locked();
    }
    pthread_mutex_unlock(&mu);
    if (change)
        set_observers(want);
}

/* ---- the CUPTI API ------------------------------------------------------------ */

FAKE_EXPORT CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *v)
{
    if (!v)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *v = version;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult r, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (r) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_INVALID_KIND: *str = "CUPTI_ERROR_INVALID_KIND"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}

static CUptiResult subscribe(CUpti_SubscriberHandle *s, const char *name, CUpti_SubscriberParams *p)
{
    if (!s)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (subscribe_error) {
        flog("subscribe failed");
        return (CUptiResult)subscribe_error;
    }
    pthread_mutex_lock(&mu);
    int taken = subscribed || busy;
    if (!taken)
        subscribed = 1;
    pthread_mutex_unlock(&mu);
    if (taken) {
        if (p && p->oldSubscriberName && p->oldSubscriberSize)
            snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s",
                     busy ? "Nsight Systems" : "CUPTI for another client");
        flog("subscribe refused");
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    *s = (CUpti_SubscriberHandle)(void *)&subscribed;
    flog("subscribe %s", name ? name : "");
    return CUPTI_SUCCESS;
}

static CUptiResult subscribe_cb(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud,
                                const char *name, CUpti_SubscriberParams *p)
{
    after_finalize("subscribe");
    CUptiResult rc = subscribe(s, name, p);
    if (rc == CUPTI_SUCCESS) {
        pthread_mutex_lock(&mu);
        sub_cb = cb;
        sub_ud = ud;
        pthread_mutex_unlock(&mu);
    }
    return rc;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb,
                                                void *ud)
{
    return subscribe_cb(s, cb, ud, NULL, NULL);
}

/* Runtime and driver API domains only: what a client finalizing from an
 * API exit callback enables. */
FAKE_EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle s,
                                                   CUpti_CallbackDomain domain)
{
    if (!s || s != (CUpti_SubscriberHandle)(void *)&subscribed)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API)
        return CUPTI_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&mu);
    dom_on[domain == CUPTI_CB_DOMAIN_DRIVER_API] = enable != 0;
    pthread_mutex_unlock(&mu);
    flog("domain %s %s", domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver" : "runtime",
         enable ? "on" : "off");
    update_observing();
    return CUPTI_SUCCESS;
}

/* Entry points that only some releases have: a GNU ifunc whose resolver
 * (run by dlsym, after this library's constructor) returns NULL when the
 * release FAKE_CUPTI_VERSION names lacks it, so dlsym finds nothing. */
#define FAKE_SINCE(name, impl, since) \
    static __typeof__(impl) *resolve_##name(void) \
    { \
        return (uint32_t)env_long("FAKE_CUPTI_VERSION", 130001) >= (since) ? impl : NULL; \
    } \
    FAKE_EXPORT __typeof__(impl) name __attribute__((ifunc("resolve_" #name)));

static CUptiResult CUPTIAPI subscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb,
                                         void *ud, CUpti_SubscriberParams *p)
{
    if (p && p->structSize < CUpti_SubscriberParams_STRUCT_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    return subscribe_cb(s, cb, ud, p ? p->subscriberName : NULL, p);
}
FAKE_SINCE(cuptiSubscribe_v2, subscribe_v2, 130000)

FAKE_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
    if (!s)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (in_exit_callback) {
        /* The real CUPTI 13.0 frees what it is still walking: the heap is
         * corrupt and a later free() aborts (an H100, torch 2.11). */
        static const char msg[] = "fake-cupti: cuptiUnsubscribe from inside the subscriber's "
                                  "own callback (the real CUPTI corrupts its heap)\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        abort();
    }
    pthread_mutex_lock(&mu);
    subscribed = 0;
    sub_cb = NULL;
    dom_on[0] = dom_on[1] = 0;
    pthread_mutex_unlock(&mu);
    flog("unsubscribe");
    update_observing();
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                                                CUpti_BuffersCallbackCompleteFunc c)
{
    if (!r || !c)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&mu);
    req_cb = r;
    done_cb = c;
    pthread_mutex_unlock(&mu);
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    if (!f)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (ts_refused)         /* the header's other answer; records keep CLOCK_REALTIME */
        return CUPTI_ERROR_NOT_INITIALIZED;
    __atomic_store_n(&ts_cb, f, __ATOMIC_RELEASE);
    return CUPTI_SUCCESS;
}

/* As cupti_activity.h says: normalized to the records' timestamps. */
FAKE_EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
    if (!timestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (ts_refused == 2)    /* a test of the fallback's own fallback */
        return CUPTI_ERROR_NOT_INITIALIZED;
    *timestamp = now_ts();
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size,
                                                           void *value)
{
    (void)attr;
    if (!size || !value)
        return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    after_finalize("cuptiActivityEnable");
    if ((unsigned)kind >= 64 || (int)kind == fail_kind)
        return CUPTI_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&mu);
    kinds |= 1ull << kind;
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME)
        memset(rt_off, 0, sizeof rt_off);
    if (kind == CUPTI_ACTIVITY_KIND_DRIVER)
        memset(drv_off, 0, sizeof drv_off);
    pthread_mutex_unlock(&mu);
    flog("enable %s", kind_name(kind));
    update_observing();
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    if ((unsigned)kind >= 64)
        return CUPTI_ERROR_INVALID_KIND;
    long slow = env_long("FAKE_CUPTI_DISABLE_MS", 0);
    if (slow > 0) {
        struct timespec d = { slow / 1000, (slow % 1000) * 1000000L };
        nanosleep(&d, NULL);
    }
    need_runtime("cuptiActivityDisable");
    pthread_mutex_lock(&mu);
    kinds &= ~(1ull << kind);
    pthread_mutex_unlock(&mu);
    flog("disable %s", kind_name(kind));
    update_observing();
    return CUPTI_SUCCESS;
}

static CUptiResult enable_cbid(uint8_t *tab, unsigned n, CUpti_CallbackId cbid, uint8_t on)
{
    if (cbid >= n)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&mu);
    tab[cbid] = on == 0;
    pthread_mutex_unlock(&mu);
    update_observing();
    return CUPTI_SUCCESS;
}

static CUptiResult CUPTIAPI enable_runtime_api(CUpti_CallbackId cbid, uint8_t on)
{
    return enable_cbid(rt_off, CUPTI_RUNTIME_TRACE_CBID_SIZE, cbid, on);
}
FAKE_SINCE(cuptiActivityEnableRuntimeApi, enable_runtime_api, 24)

static CUptiResult CUPTIAPI enable_driver_api(CUpti_CallbackId cbid, uint8_t on)
{
    return enable_cbid(drv_off, CUPTI_DRIVER_TRACE_CBID_SIZE, cbid, on);
}
FAKE_SINCE(cuptiActivityEnableDriverApi, enable_driver_api, 24)

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    after_finalize("cuptiActivityFlushAll");
    flog(flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED ? "flush forced" : "flush");
    deliver((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
    return CUPTI_SUCCESS;
}

/* Lock-free: the client may call it from its buffer callbacks. */
FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                            CUpti_Activity **record)
{
    if (!buffer || !record)
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint8_t *p = buffer;
    if (*record)
        p = (uint8_t *)*record + align8(rec_size((*record)->kind));
    if (p + sizeof(CUpti_Activity) > buffer + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    size_t sz = rec_size(((CUpti_Activity *)(void *)p)->kind);
    if (!sz || p + sz > buffer + valid)
        return CUPTI_ERROR_INVALID_KIND;
    *record = (CUpti_Activity *)(void *)p;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
                                                                   size_t *n)
{
    (void)ctx;
    (void)stream;
    if (!n)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&mu);
    *n = dropped;
    dropped = 0;
    pthread_mutex_unlock(&mu);
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind k,
                                                                        uint64_t id)
{
    after_finalize("cuptiActivityPushExternalCorrelationId");
    if ((int)k <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || n_ext == EXT_MAX)
        return CUPTI_ERROR_INVALID_PARAMETER;
    ext_stack[n_ext].kind = k;
    ext_stack[n_ext].id = id;
    n_ext++;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind k,
                                                                       uint64_t *last)
{
    after_finalize("cuptiActivityPopExternalCorrelationId");
    for (int i = n_ext - 1; i >= 0; i--) {
        if (ext_stack[i].kind != k)
            continue;
        if (last)
            *last = ext_stack[i].id;
        memmove(&ext_stack[i], &ext_stack[i + 1], (size_t)(n_ext - i - 1) * sizeof ext_stack[0]);
        n_ext--;
        return CUPTI_SUCCESS;
    }
    return CUPTI_ERROR_QUEUE_EMPTY;
}

static CUptiResult CUPTIAPI enable_event_device_timestamps(uint8_t enable)
{
    (void)enable;
    return CUPTI_SUCCESS;
}
FAKE_SINCE(cuptiActivityEnableCudaEventDeviceTimestamps, enable_event_device_timestamps, 130000)

/* Forgets everything (real CUPTI re-initialises lazily after it). */
FAKE_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void)
{
    need_runtime("cuptiFinalize");
    flog(in_exit_callback ? "finalize in-exit-callback" : "finalize");
    pthread_mutex_lock(&mu);
    int was = observing, running = thread_running;
    pthread_t t = thread;
    kinds = 0;
    memset(rt_off, 0, sizeof rt_off);
    memset(drv_off, 0, sizeof drv_off);
    dom_on[0] = dom_on[1] = 0;          /* nothing on: no call starts a thread again */
    observing = 0;
    thread_running = 0;
    if (running)
        __atomic_store_n(thread_stop, 1, __ATOMIC_RELEASE);
    thread_stop = NULL;
    pthread_mutex_unlock(&mu);
    if (was)
        set_observers(0);
    if (running)
        pthread_join(t, NULL);
    pthread_mutex_lock(&mu);
    q_n = 0;
    cur = NULL;
    req_cb = NULL;
    done_cb = NULL;
    subscribed = 0;
    sub_cb = NULL;
    dom_on[0] = dom_on[1] = 0;
    pthread_mutex_unlock(&mu);
    __atomic_store_n(&ts_cb, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&finalized, 1, __ATOMIC_RELEASE);
    return CUPTI_SUCCESS;
}
