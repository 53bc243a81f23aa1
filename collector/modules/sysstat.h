/*
 * sysstat.h - the host statistics sampler (TRAINPROF_SYS).
 *
 * A helper thread "tp-sys" reads /proc every TRAINPROF_SYS_INTERVAL seconds
 * while a warmup or recording window is open, and keeps the values in a
 * bounded ring that the flusher drains per window with tp_sys_take().
 * Every counter's name carries its unit: "_percent", "_bytes",
 * "_bytes_per_s".
 */
#ifndef TRAINPROF_COLLECTOR_SYSSTAT_H
#define TRAINPROF_COLLECTOR_SYSSTAT_H

#include <stddef.h>
#include <stdint.h>

#define TP_SYS_MAX_NAMES 64        /* interned counter names, fixed for the process */
#define TP_SYS_NAME_MAX  64        /* bytes per name, with the NUL */
#define TP_SYS_DEV_MAX   32        /* bytes of a device or interface name, with the NUL */
#define TP_SYS_RING      8192      /* samples kept between two tp_sys_take() */

/* One counter value. */
struct tp_sys_sample {
    uint64_t tick;                 /* tp_clock ticks when its round was sampled */
    uint16_t name;                 /* index for tp_sys_name() */
    double value;
};

/* The fixed names, always present at these indices. */
enum tp_sys_fixed_name {
    TP_SYS_N_CPU_PROCESS = 0,      /* "cpu_process_percent": 100 = one core */
    TP_SYS_N_CPU_SYSTEM,           /* "cpu_system_percent": 0..100 of all cores */
    TP_SYS_N_MEM_RSS,              /* "memory_rss_bytes" */
    TP_SYS_N_MEM_USED,             /* "memory_system_used_bytes" */
    TP_SYS_N_MEM_AVAILABLE,        /* "memory_system_available_bytes" */
    TP_SYS_N_FIXED
};

/*
 * tp_sys_name - the counter name of index "name", e.g. "cpu_process_percent",
 * "disk_sda_read_bytes_per_s", "net_eth0_sent_bytes_per_s"; valid for the
 * process lifetime.  NULL for an index never handed out.
 */
const char *tp_sys_name(unsigned name);

/*
 * tp_sys_start - start sampling (at the start of a warmup or recording
 * step): creates the thread on first use, otherwise wakes it.  The first
 * round after each start is a baseline: it yields no rates or percentages.
 * No-op returning 0 when tp_cfg.sys is 0.  Returns -1 if the thread cannot
 * be created (said once; the sampler stays off).  tp_config_init() and
 * tp_clock_init() must have run.
 */
int tp_sys_start(void);

/* tp_sys_stop - pause sampling between windows; the thread parks on a condvar.
 * Waits for a round under way, so that no sample is taken after it returns. */
void tp_sys_stop(void);

/*
 * tp_sys_take - the samples with t0 <= tick <= t1, oldest first, in a
 * malloc'ed array "*out" (caller frees; NULL when none).  Every sample with
 * tick <= t1 is removed from the ring.  Returns the count; 0 also when the
 * array cannot be allocated (the samples are then dropped and counted).
 */
size_t tp_sys_take(uint64_t t0, uint64_t t1, struct tp_sys_sample **out);

/* tp_sys_shutdown - stop and join the thread (at exit).  Idempotent. */
void tp_sys_shutdown(void);

/* tp_sys_atfork_child - in a forked child the thread is gone: forget it. */
void tp_sys_atfork_child(void);

/* Counters for the trace metadata and for measuring the sampler's own cost. */
struct tp_sys_stats {
    uint64_t rounds;               /* sampling rounds done */
    uint64_t samples;              /* samples stored */
    uint64_t dropped;              /* samples lost: ring overflow, name table full, no memory */
    uint64_t thread_cpu_ns;        /* CPU time of the tp-sys thread */
};
void tp_sys_stats(struct tp_sys_stats *st);

/* ---- /proc parsers, on text, so that tests can feed fixed input ------- */

/* One device or interface and its two byte counters. */
struct tp_sys_dev {
    char name[TP_SYS_DEV_MAX];
    uint64_t a, b;                 /* disk: read, written; net: received, sent (bytes) */
};

/* /proc/stat: the aggregate "cpu" line; busy and total jiffies.  0 or -1. */
int tp_sys_parse_stat(const char *text, uint64_t *busy, uint64_t *total);

/* /proc/self/statm: resident pages.  0 or -1. */
int tp_sys_parse_statm(const char *text, uint64_t *rss_pages);

/* /proc/meminfo: MemTotal and MemAvailable in kB.  0 or -1 if either is missing. */
int tp_sys_parse_meminfo(const char *text, uint64_t *total_kb, uint64_t *avail_kb);

/*
 * /proc/diskstats: whole disks with bytes read and written (sectors x 512).
 * Skips loop*, ram*, zram* and every name for which "is_disk" (when not
 * NULL) returns 0.  Returns the number stored in "out" (at most "max").
 */
size_t tp_sys_parse_diskstats(const char *text, int (*is_disk)(const char *name),
                              struct tp_sys_dev *out, size_t max);

/* /proc/net/dev: interfaces except "lo", bytes received and sent. */
size_t tp_sys_parse_netdev(const char *text, struct tp_sys_dev *out, size_t max);

/*
 * tp_sys_rate - per-second rate of a counter from "prev" to "cur" over
 * "dt_s" seconds, in "*rate".  Returns 0 (no rate) when the counter went
 * backwards (reset, wrap, device replaced) or dt_s <= 0: never negative.
 */
int tp_sys_rate(uint64_t prev, uint64_t cur, double dt_s, double *rate);

#endif
