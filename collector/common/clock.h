/*
 * clock.h - the hot-path clock.
 *
 * On x86-64 with an invariant TSC the hot path reads rdtsc (~10 ns here,
 * against ~24 ns for one clock_gettime).  Ticks are converted to Unix
 * nanoseconds at flush time from two (tsc, CLOCK_REALTIME) anchors: one taken
 * at activation, one at each conversion, so drift is corrected per window.
 * Without an invariant TSC, ticks are CLOCK_MONOTONIC nanoseconds.
 */
#ifndef TRAINPROF_COLLECTOR_CLOCK_H
#define TRAINPROF_COLLECTOR_CLOCK_H

#include <stdint.h>
#include <time.h>

extern int tp_clock_use_tsc;

static inline uint64_t tp_clock_now(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(tp_clock_use_tsc, 1)) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A linear map from ticks to Unix ns, valid around the anchors it was made from. */
struct tp_clock_map {
    uint64_t tick0;
    int64_t  unix0_ns;
    double   ns_per_tick;
};

/* tp_clock_ns - the hot clock as nanoseconds on a fixed linear scale (the
 * first anchor's): CUPTI's timestamp callback, whose contract is ns.
 * tp_clock_ns_to_ticks maps such a value back to ticks. */
uint64_t tp_clock_ns(void);
uint64_t tp_clock_ns_to_ticks(uint64_t ns);

/* tp_clock_select - choose the clock source (CPUID only: no calibration, no
 * sleep), so that ticks read before activation have the same unit as those
 * after it.  Idempotent; called from our constructor. */
void tp_clock_select(void);

/* tp_clock_init - choose the clock source and take the first anchor. Idempotent. */
void tp_clock_init(void);

/* tp_clock_map_now - a map from the first anchor to a fresh one. */
struct tp_clock_map tp_clock_map_now(void);

/* A reading of the three clocks at one instant: a window's start and end
 * (trace metadata "clock", which `trainprof merge` aligns ranks on).
 * bracket_ns is how far apart the first and last of the reads were (an
 * upper bound on the pairing error); tick 0: not taken. */
struct tp_clock_triple {
    uint64_t tick;
    int64_t  realtime_ns;
    int64_t  monotonic_ns;
    int64_t  bracket_ns;
};

/* tp_clock_read_triple - read tick, CLOCK_REALTIME and CLOCK_MONOTONIC
 * together (the narrowest of a few tries; a few hundred ns, no lock, no
 * allocation; async-signal-safe). */
void tp_clock_read_triple(struct tp_clock_triple *t);

/* tp_clock_source - "tsc" or "monotonic", what ticks count. */
const char *tp_clock_source(void);

/* tp_clock_boot_id - the kernel's boot id (/proc/sys/kernel/random/boot_id):
 * processes that share it share CLOCK_REALTIME and CLOCK_MONOTONIC (one
 * kernel, containers included); "" if unknown.  Read once, not on the hot
 * path (flush thread). */
const char *tp_clock_boot_id(void);

/* tp_clock_to_unix_ns - convert ticks with "m". */
static inline int64_t tp_clock_to_unix_ns(const struct tp_clock_map *m, uint64_t tick)
{
    return m->unix0_ns + (int64_t)((double)(int64_t)(tick - m->tick0) * m->ns_per_tick);
}

/* tp_clock_span_ns - the duration of the span [a, b] of an event, in ns
 * (>= 0): the difference of its two ends' conversions, so that ts + dur is
 * the converted end exactly.  A span nested in another (a child op ending a
 * few ticks before its parent) then ends no later than the parent in the
 * trace too; each end rounded on its own could put the child 1 ns past it
 * (the TensorBoard plugin then leaves the child out of its operator table). */
static inline int64_t tp_clock_span_ns(const struct tp_clock_map *m, uint64_t a, uint64_t b)
{
    return b > a ? tp_clock_to_unix_ns(m, b) - tp_clock_to_unix_ns(m, a) : 0;
}

/* tp_clock_ticks_to_ns - a duration in ticks, in ns (>= 0). */
static inline int64_t tp_clock_ticks_to_ns(const struct tp_clock_map *m, uint64_t a, uint64_t b)
{
    return b > a ? (int64_t)((double)(b - a) * m->ns_per_tick) : 0;
}

#endif
