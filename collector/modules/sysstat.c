/*
 * sysstat.c - the host statistics sampler.
 *
 * DESIGN
 * One helper thread, "tp-sys", created at the first tp_sys_start() with all
 * signals blocked and the reentrancy guard set, so that nothing it calls is
 * recorded.  Between windows it waits on a condvar; during a window it runs
 * one round per TRAINPROF_SYS_INTERVAL on an absolute CLOCK_MONOTONIC
 * schedule (no drift).  A round reads the /proc files of the enabled stats
 * with open/read into one static buffer (only this thread reads them) and
 * appends fixed-size samples to a ring under a mutex; a full ring drops the
 * oldest and counts.  Rates and percentages need the previous value of the
 * same counter: each counter keeps its last value and time, cleared at every
 * start, so the first round of a window is a baseline and a counter that
 * goes backwards re-baselines instead of giving a negative rate (psutil's
 * net_io_counters wraps to huge values there unless nowrap is handled).
 * Names are interned into a fixed table so a sample is 24 bytes; the names
 * of devices seen later are added by this thread only, published with a
 * release store of the count.  A missing or unreadable /proc file disables
 * that stat for the process, said once at debug level.
 */
#include "sysstat.h"
#include "module.h"

#include "collector/common/clock.h"
#include "collector/common/bgthread.h"
#include "collector/config/config.h"
#include "collector/record/call.h"
#include "collector/common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- names ------------------------------------------------------------- */

static char tp_sys_names[TP_SYS_MAX_NAMES][TP_SYS_NAME_MAX] = {
    [TP_SYS_N_CPU_PROCESS]   = "cpu_process_percent",
    [TP_SYS_N_CPU_SYSTEM]    = "cpu_system_percent",
    [TP_SYS_N_MEM_RSS]       = "memory_rss_bytes",
    [TP_SYS_N_MEM_USED]      = "memory_system_used_bytes",
    [TP_SYS_N_MEM_AVAILABLE] = "memory_system_available_bytes",
};
static unsigned tp_sys_n_names = TP_SYS_N_FIXED;   /* written by tp-sys only */

const char *tp_sys_name(unsigned name)
{
    unsigned n = __atomic_load_n(&tp_sys_n_names, __ATOMIC_ACQUIRE);
    return name < n ? tp_sys_names[name] : NULL;
}

/* The index of "name", added if new; -1 when the table is full. */
static int tp_sys_intern(const char *name)
{
    unsigned n = tp_sys_n_names;
    for (unsigned i = 0; i < n; i++)
        if (strcmp(tp_sys_names[i], name) == 0)
            return (int)i;
    if (n == TP_SYS_MAX_NAMES)
        return -1;
    snprintf(tp_sys_names[n], TP_SYS_NAME_MAX, "%s", name);
    __atomic_store_n(&tp_sys_n_names, n + 1, __ATOMIC_RELEASE);
    return (int)n;
}

/* ---- parsers ------------------------------------------------------------ */

static const char *tp_sys_skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Reads "n" unsigned fields separated by blanks; returns how many were read. */
static int tp_sys_fields(const char *p, uint64_t *v, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        p = tp_sys_skip_space(p);
        if (*p < '0' || *p > '9')
            break;
        char *end;
        v[i] = strtoull(p, &end, 10);
        p = end;
    }
    return i;
}

int tp_sys_parse_stat(const char *text, uint64_t *busy, uint64_t *total)
{
    if (strncmp(text, "cpu ", 4) != 0)
        return -1;
    /* user nice system idle iowait irq softirq steal guest guest_nice:
     * guest time is already inside user and nice, so it is not added. */
    uint64_t v[8] = { 0 };
    if (tp_sys_fields(text + 4, v, 8) < 4)
        return -1;
    uint64_t t = 0;
    for (int i = 0; i < 8; i++)
        t += v[i];
    *total = t;
    *busy = t - v[3] - v[4];
    return 0;
}

int tp_sys_parse_statm(const char *text, uint64_t *rss_pages)
{
    uint64_t v[2];
    if (tp_sys_fields(text, v, 2) != 2)
        return -1;
    *rss_pages = v[1];
    return 0;
}

int tp_sys_parse_meminfo(const char *text, uint64_t *total_kb, uint64_t *avail_kb)
{
    int got = 0;
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        uint64_t *dst = strncmp(p, "MemTotal:", 9) == 0 ? total_kb
                      : strncmp(p, "MemAvailable:", 13) == 0 ? avail_kb : NULL;
        if (dst && tp_sys_fields(strchr(p, ':') + 1, dst, 1) == 1)
            got |= dst == total_kb ? 1 : 2;
    }
    return got == 3 ? 0 : -1;
}

/* Copies a device name, replacing characters a trace name should not carry. */
static void tp_sys_dev_name(char *dst, const char *src, size_t len)
{
    if (len >= TP_SYS_DEV_MAX)
        len = TP_SYS_DEV_MAX - 1;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
        dst[i] = ok ? c : '_';
    }
    dst[len] = '\0';
}

size_t tp_sys_parse_diskstats(const char *text, int (*is_disk)(const char *name),
                              struct tp_sys_dev *out, size_t max)
{
    size_t n = 0;
    for (const char *p = text; p && *p && n < max; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        uint64_t mm[2];
        const char *q = p;
        if (tp_sys_fields(q, mm, 2) != 2)
            continue;
        /* past major and minor */
        for (int k = 0; k < 2; k++) {
            q = tp_sys_skip_space(q);
            while (*q >= '0' && *q <= '9')
                q++;
        }
        q = tp_sys_skip_space(q);
        const char *name = q;
        while (*q && *q != ' ' && *q != '\t' && *q != '\n')
            q++;
        size_t len = (size_t)(q - name);
        if (len == 0 || len >= TP_SYS_DEV_MAX)
            continue;
        char raw[TP_SYS_DEV_MAX];
        memcpy(raw, name, len);
        raw[len] = '\0';
        if (strncmp(raw, "loop", 4) == 0 || strncmp(raw, "ram", 3) == 0 ||
            strncmp(raw, "zram", 4) == 0)
            continue;
        if (is_disk && !is_disk(raw))
            continue;
        /* reads merged sectors_read ms writes merged sectors_written: the
         * kernel counts in 512-byte sectors whatever the device's block
         * size (Documentation/admin-guide/iostats.rst). */
        uint64_t v[7];
        if (tp_sys_fields(q, v, 7) != 7)
            continue;
        tp_sys_dev_name(out[n].name, raw, len);
        out[n].a = v[2] * 512;
        out[n].b = v[6] * 512;
        n++;
    }
    return n;
}

size_t tp_sys_parse_netdev(const char *text, struct tp_sys_dev *out, size_t max)
{
    size_t n = 0;
    for (const char *p = text; p && *p && n < max; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *name = tp_sys_skip_space(p);
        const char *colon = strchr(name, ':');
        const char *eol = strchr(name, '\n');
        if (!colon || (eol && colon > eol))
            continue;                                  /* the two header lines */
        size_t len = (size_t)(colon - name);
        if (len == 0 || len >= TP_SYS_DEV_MAX || (len == 2 && strncmp(name, "lo", 2) == 0))
            continue;
        /* receive: bytes packets errs drop fifo frame compressed multicast;
         * transmit: bytes ... */
        uint64_t v[9];
        if (tp_sys_fields(colon + 1, v, 9) != 9)
            continue;
        tp_sys_dev_name(out[n].name, name, len);
        out[n].a = v[0];
        out[n].b = v[8];
        n++;
    }
    return n;
}

int tp_sys_rate(uint64_t prev, uint64_t cur, double dt_s, double *rate)
{
    if (cur < prev || !(dt_s > 0))
        return 0;
    *rate = (double)(cur - prev) / dt_s;
    return 1;
}

/* ---- the ring ----------------------------------------------------------- */

static pthread_mutex_t tp_sys_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tp_sys_cv;                 /* CLOCK_MONOTONIC, set at first start */
static pthread_cond_t tp_sys_idle_cv = PTHREAD_COND_INITIALIZER; /* a round ended */
static int tp_sys_busy;                          /* a round is being taken */
static struct tp_sys_sample tp_sys_ring[TP_SYS_RING];
static size_t tp_sys_head, tp_sys_len;           /* oldest at head */
static struct tp_sys_stats tp_sys_st;

/* Under tp_sys_mu. */
static void tp_sys_push(uint64_t tick, unsigned name, double value)
{
    if (tp_sys_len == TP_SYS_RING) {
        tp_sys_head = (tp_sys_head + 1) % TP_SYS_RING;
        tp_sys_len--;
        tp_sys_st.dropped++;
    }
    struct tp_sys_sample *s = &tp_sys_ring[(tp_sys_head + tp_sys_len) % TP_SYS_RING];
    s->tick = tick;
    s->name = (uint16_t)name;
    s->value = value;
    tp_sys_len++;
    tp_sys_st.samples++;
}

size_t tp_sys_take(uint64_t t0, uint64_t t1, struct tp_sys_sample **out)
{
    *out = NULL;
    pthread_mutex_lock(&tp_sys_mu);
    size_t n = 0, k = 0;
    for (size_t i = 0; i < tp_sys_len; i++) {
        uint64_t t = tp_sys_ring[(tp_sys_head + i) % TP_SYS_RING].tick;
        if (t > t1)
            break;          /* a round's samples are pushed in tick order */
        k++;
        if (t >= t0)
            n++;
    }
    struct tp_sys_sample *a = n ? malloc(n * sizeof *a) : NULL;
    if (n && !a) {
        tp_sys_st.dropped += n;
        n = 0;
    }
    size_t j = 0;
    for (size_t i = 0; i < k && a; i++) {
        const struct tp_sys_sample *s = &tp_sys_ring[(tp_sys_head + i) % TP_SYS_RING];
        if (s->tick >= t0)
            a[j++] = *s;
    }
    tp_sys_head = (tp_sys_head + k) % TP_SYS_RING;
    tp_sys_len -= k;
    pthread_mutex_unlock(&tp_sys_mu);
    *out = a;
    return n;
}

void tp_sys_stats(struct tp_sys_stats *st)
{
    pthread_mutex_lock(&tp_sys_mu);
    *st = tp_sys_st;
    pthread_mutex_unlock(&tp_sys_mu);
}

/* ---- the thread --------------------------------------------------------- */

static pthread_t tp_sys_thread;
static int tp_sys_started, tp_sys_failed;       /* under tp_sys_mu */
static int tp_sys_running, tp_sys_quit;
static uint64_t tp_sys_gen;                     /* bumped at each start: new baseline */

/* Thread-only state: the previous value of each counter, by name index. */
static struct { uint64_t v; int64_t ns; uint64_t gen; int have; } tp_sys_prev[TP_SYS_MAX_NAMES];
static unsigned tp_sys_off;                     /* enum tp_sys_stat bits found unreadable */
static char tp_sys_buf[1 << 16];

static int64_t tp_sys_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Reads "path" into tp_sys_buf; NULL if it cannot be read. */
static const char *tp_sys_read(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, tp_sys_buf + n, sizeof tp_sys_buf - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == sizeof tp_sys_buf - 1)
            break;          /* truncated: later devices are left out */
    }
    close(fd);
    if (n == 0)
        return NULL;
    tp_sys_buf[n] = '\0';
    return tp_sys_buf;
}

/* Turns stat "bit" off for the process, saying so once. */
static void tp_sys_disable(unsigned bit, const char *what)
{
    if (tp_sys_off & bit)
        return;
    tp_sys_off |= bit;
    TP_DEBUG("host statistics: %s unreadable; that statistic is off", what);
}

/* A round's samples, collected without the lock and pushed at its end. */
struct tp_sys_round {
    uint64_t tick;
    int64_t ns;
    uint64_t gen;
    size_t n;
    struct { unsigned name; double value; } s[TP_SYS_MAX_NAMES];
};

static void tp_sys_emit(struct tp_sys_round *r, unsigned name, double value)
{
    if (r->n < TP_SYS_MAX_NAMES) {
        r->s[r->n].name = name;
        r->s[r->n].value = value;
        r->n++;
    }
}

/* Emits the rate of counter "name" (baseline on its first value this window). */
static void tp_sys_counter(struct tp_sys_round *r, int name, uint64_t v)
{
    if (name < 0) {
        static int said;
        if (!said++)
            TP_DEBUG("host statistics: more than %d counter names; the rest are dropped",
                     TP_SYS_MAX_NAMES);
        pthread_mutex_lock(&tp_sys_mu);
        tp_sys_st.dropped++;
        pthread_mutex_unlock(&tp_sys_mu);
        return;
    }
    __typeof__(tp_sys_prev[0]) *p = &tp_sys_prev[name];
    double rate;
    if (p->have && p->gen == r->gen &&
        tp_sys_rate(p->v, v, (double)(r->ns - p->ns) * 1e-9, &rate))
        tp_sys_emit(r, (unsigned)name, rate);
    p->v = v;
    p->ns = r->ns;
    p->gen = r->gen;
    p->have = 1;
}

/* Percent of a pair of counters (busy over total), baseline as above. */
static void tp_sys_percent(struct tp_sys_round *r, unsigned name, uint64_t busy, uint64_t total,
                           uint64_t *prev_busy, double scale)
{
    __typeof__(tp_sys_prev[0]) *p = &tp_sys_prev[name];
    if (p->have && p->gen == r->gen && total > p->v && busy >= *prev_busy)
        tp_sys_emit(r, name, scale * (double)(busy - *prev_busy) / (double)(total - p->v));
    p->v = total;
    p->ns = r->ns;
    p->gen = r->gen;
    p->have = 1;
    *prev_busy = busy;
}

static int tp_sys_is_disk(const char *name)
{
    /* /sys/block lists whole disks only; partitions live below their disk. */
    char path[64 + TP_SYS_DEV_MAX];
    snprintf(path, sizeof path, "/sys/block/%s", name);
    for (char *c = path + 11; *c; c++)
        if (*c == '/')
            *c = '!';
    return access(path, F_OK) == 0;
}

static void tp_sys_round(uint64_t gen)
{
    static struct tp_sys_round r;
    static uint64_t sys_busy, proc_unused;
    static long page_size;
    if (!page_size)
        page_size = sysconf(_SC_PAGESIZE);
    unsigned want = tp_cfg.sys & ~tp_sys_off;
    r.n = 0;
    r.gen = gen;
    r.ns = tp_sys_mono_ns();
    r.tick = tp_clock_now();

    if (want & TP_SYS_CPU) {
        /* Process CPU time of all threads (the utime+stime of
         * /proc/self/stat, in ns rather than 10 ms jiffies) over wall
         * time: 100 means one core busy, up to 100 x cores. */
        struct timespec ts;
        if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0) {
            uint64_t cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
            tp_sys_percent(&r, TP_SYS_N_CPU_PROCESS, cpu_ns, (uint64_t)r.ns, &proc_unused, 100.0);
        }
        const char *t = tp_sys_read("/proc/stat");
        uint64_t busy, total;
        if (t && tp_sys_parse_stat(t, &busy, &total) == 0)
            tp_sys_percent(&r, TP_SYS_N_CPU_SYSTEM, busy, total, &sys_busy, 100.0);
        else
            tp_sys_disable(TP_SYS_CPU, "/proc/stat");
    }
    if (want & TP_SYS_MEMORY) {
        const char *t = tp_sys_read("/proc/self/statm");
        uint64_t pages, total_kb, avail_kb;
        if (t && tp_sys_parse_statm(t, &pages) == 0)
            tp_sys_emit(&r, TP_SYS_N_MEM_RSS, (double)pages * (double)page_size);
        t = tp_sys_read("/proc/meminfo");
        if (t && tp_sys_parse_meminfo(t, &total_kb, &avail_kb) == 0) {
            tp_sys_emit(&r, TP_SYS_N_MEM_USED,
                        (double)(total_kb > avail_kb ? total_kb - avail_kb : 0) * 1024.0);
            tp_sys_emit(&r, TP_SYS_N_MEM_AVAILABLE, (double)avail_kb * 1024.0);
        } else {
            tp_sys_disable(TP_SYS_MEMORY, "/proc/meminfo");
        }
    }
    struct tp_sys_dev dev[16];
    char name[TP_SYS_NAME_MAX];
    if (want & TP_SYS_DISK) {
        const char *t = tp_sys_read("/proc/diskstats");
        size_t n = t ? tp_sys_parse_diskstats(t, tp_sys_is_disk, dev, 16) : 0;
        if (!t)
            tp_sys_disable(TP_SYS_DISK, "/proc/diskstats");
        for (size_t i = 0; i < n; i++) {
            snprintf(name, sizeof name, "disk_%.31s_read_bytes_per_s", dev[i].name);
            tp_sys_counter(&r, tp_sys_intern(name), dev[i].a);
            snprintf(name, sizeof name, "disk_%.31s_write_bytes_per_s", dev[i].name);
            tp_sys_counter(&r, tp_sys_intern(name), dev[i].b);
        }
    }
    if (want & TP_SYS_NET) {
        const char *t = tp_sys_read("/proc/net/dev");
        size_t n = t ? tp_sys_parse_netdev(t, dev, 16) : 0;
        if (!t)
            tp_sys_disable(TP_SYS_NET, "/proc/net/dev");
        for (size_t i = 0; i < n; i++) {
            snprintf(name, sizeof name, "net_%.31s_received_bytes_per_s", dev[i].name);
            tp_sys_counter(&r, tp_sys_intern(name), dev[i].a);
            snprintf(name, sizeof name, "net_%.31s_sent_bytes_per_s", dev[i].name);
            tp_sys_counter(&r, tp_sys_intern(name), dev[i].b);
        }
    }

    struct timespec cpu;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    pthread_mutex_lock(&tp_sys_mu);
    for (size_t i = 0; i < r.n; i++)
        tp_sys_push(r.tick, r.s[i].name, r.s[i].value);
    tp_sys_st.rounds++;
    tp_sys_st.thread_cpu_ns = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
    pthread_mutex_unlock(&tp_sys_mu);
}

static void *tp_sys_main(void *arg)
{
    (void)arg;
    tp_depth = 1;
    tp_bgthread_start("tp-sys");
    int64_t step = (int64_t)(tp_cfg.sys_interval * 1e9);
    if (step < 1000000)
        step = 1000000;
    uint64_t seen_gen = 0;
    int64_t next = 0;
    pthread_mutex_lock(&tp_sys_mu);
    for (;;) {
        while (!tp_sys_running && !tp_sys_quit)
            pthread_cond_wait(&tp_sys_cv, &tp_sys_mu);
        if (tp_sys_quit)
            break;
        int64_t now = tp_sys_mono_ns();
        if (tp_sys_gen != seen_gen || now >= next) {
            int fresh = tp_sys_gen != seen_gen;
            seen_gen = tp_sys_gen;
            tp_sys_busy = 1;
            pthread_mutex_unlock(&tp_sys_mu);
            tp_sys_round(seen_gen);
            pthread_mutex_lock(&tp_sys_mu);
            tp_sys_busy = 0;
            pthread_cond_broadcast(&tp_sys_idle_cv);
            next = fresh || next + step <= now ? now + step : next + step;
            continue;
        }
        struct timespec ts = { (time_t)(next / 1000000000), (long)(next % 1000000000) };
        pthread_cond_timedwait(&tp_sys_cv, &tp_sys_mu, &ts);
    }
    pthread_mutex_unlock(&tp_sys_mu);
    return NULL;
}

int tp_sys_start(void)
{
    if (tp_cfg.sys == 0)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&tp_sys_mu);
    if (tp_sys_failed) {
        rc = -1;
    } else if (!tp_sys_started) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&tp_sys_cv, &ca);
        pthread_condattr_destroy(&ca);
        tp_sys_quit = 0;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int e = pthread_create(&tp_sys_thread, NULL, tp_sys_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (e != 0) {
            tp_sys_failed = 1;
            rc = -1;
            TP_ERROR("host statistics: cannot start the sampler thread: %s", strerror(e));
        } else {
            tp_sys_started = 1;
        }
    }
    if (rc == 0) {
        tp_sys_running = 1;
        tp_sys_gen++;
        pthread_cond_signal(&tp_sys_cv);
    }
    pthread_mutex_unlock(&tp_sys_mu);
    return rc;
}

void tp_sys_stop(void)
{
    pthread_mutex_lock(&tp_sys_mu);
    tp_sys_running = 0;
    if (tp_sys_started)
        pthread_cond_signal(&tp_sys_cv);
    /* a round already under way finishes first: no sample is taken after
     * stop returns (the flush then takes the window's samples) */
    while (tp_sys_busy && tp_sys_started && !pthread_equal(pthread_self(), tp_sys_thread))
        pthread_cond_wait(&tp_sys_idle_cv, &tp_sys_mu);
    pthread_mutex_unlock(&tp_sys_mu);
}

void tp_sys_shutdown(void)
{
    pthread_mutex_lock(&tp_sys_mu);
    int joinable = tp_sys_started;
    tp_sys_started = 0;
    tp_sys_running = 0;
    tp_sys_quit = 1;
    if (joinable)
        pthread_cond_signal(&tp_sys_cv);
    pthread_mutex_unlock(&tp_sys_mu);
    if (joinable && !pthread_equal(pthread_self(), tp_sys_thread))
        pthread_join(tp_sys_thread, NULL);
}

void tp_sys_atfork_child(void)
{
    pthread_mutex_init(&tp_sys_mu, NULL);
    pthread_cond_init(&tp_sys_idle_cv, NULL);
    tp_sys_busy = 0;
    tp_sys_started = 0;
    tp_sys_running = 0;
    tp_sys_quit = 0;
    tp_sys_head = tp_sys_len = 0;
}

/* ---- the module (collector/modules/modules.def) ---------------------------------- */

/* The sampler runs while the schedule warms up or records, and keeps
 * running while windows wait to be written (their samples). */
static void sys_follow(const struct tp_follow *f)
{
    if (f->on)
        tp_sys_start();
    else if (!f->queued)
        tp_sys_stop();
}

const struct tp_module tp_module_sysstat = {
    .name = "sysstat",
    .follow = sys_follow,
    .atfork_child = tp_sys_atfork_child,
    .shutdown = tp_sys_shutdown,
};
