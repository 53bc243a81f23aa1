/*
 * clock.h - the hot-path clock.
 *
 * The hot path reads a hardware counter, never a system call:
 *  - x86-64 with an invariant TSC: rdtsc (~10 ns here, against ~24 ns for
 *    one clock_gettime);
 *  - aarch64 (Grace and the like): the generic timer's virtual counter
 *    cntvct_el0, which Linux lets user space read (its vDSO reads the same
 *    register for clock_gettime), after an isb: without it the read may be
 *    taken before earlier instructions retire, and a call's end could be
 *    stamped before its last work.  Its rate is cntfrq_el0 (1 GHz on Armv8.6
 *    and later, e.g. Neoverse V2).
 * Ticks are converted to Unix nanoseconds at flush time from two
 * (tick, CLOCK_REALTIME) anchors: one taken at activation, one at each
 * conversion, so drift is corrected per window.  Without such a counter
 * (an x86 TSC that is not invariant, another architecture), ticks are
 * CLOCK_MONOTONIC nanoseconds (through the vDSO: still no system call).
 */
#ifndef TRAINPROF_COLLECTOR_CLOCK_H
#define TRAINPROF_COLLECTOR_CLOCK_H

#include <stdint.h>
#include <time.h>

/* 1: ticks are the hardware counter's (TSC or cntvct_el0); 0: monotonic ns.
 * Set once by tp_clock_select, before the first tick is read. */
extern int tp_clock_use_tsc __attribute__((visibility("hidden")));

static inline uint64_t tp_clock_now(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(tp_clock_use_tsc, 1)) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#elif defined(__aarch64__)
    if (__builtin_expect(tp_clock_use_tsc, 1)) {
        uint64_t v;
        /* the memory clobber keeps the compiler, as the isb keeps the CPU,
         * from moving the read across the code it times */
        __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
        return v;
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

/* tp_clock_select - choose the clock source (CPUID on x86-64, cntfrq_el0 on
 * aarch64: no calibration, no sleep), so that ticks read before activation have the same unit as those
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

/* tp_clock_source - "tsc", "cntvct" (aarch64) or "monotonic", what ticks count. */
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

/* tp_clock_counter_hz - the counter's nominal rate as the architecture
 * states it (aarch64: cntfrq_el0, set by firmware), 0 where none is stated
 * (x86-64: the TSC's rate is measured) or ticks are not a counter's. */
uint64_t tp_clock_counter_hz(void);

#endif
