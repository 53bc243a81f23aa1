/*
 * clock.c - DESIGN: on x86-64 the TSC is used only when CPUID says it is
 * invariant (leaf 0x80000007, EDX bit 8).  On aarch64 the virtual counter
 * cntvct_el0 is used when cntfrq_el0 states a plausible rate (1 MHz to
 * 10 GHz; 0 or nonsense is firmware that never set it): Linux lets EL0 read
 * the virtual counter on every arm64 system, and where an erratum makes the
 * register unreliable it traps the read and emulates it (slower, still
 * right), so no probe beyond the rate is needed.  The rate is measured
 * against CLOCK_MONOTONIC as on x86; when the measure agrees with cntfrq_el0
 * within 1 % the nominal rate is kept (exact, where 10 ms of sleep measure
 * it to a few parts per million), else the measure (the kernel may have
 * taken the true rate from the device tree over a wrong cntfrq_el0).
 * Elsewhere, and without such a counter, ticks are CLOCK_MONOTONIC ns.
 * Anchors pair a tick with CLOCK_REALTIME read between two tick reads, and
 * the pair with the narrowest bracket of a few tries is kept.  The rate is
 * the slope between the first anchor and a fresh one; before 10 ms have
 * passed it falls back to a 10 ms calibration against CLOCK_MONOTONIC.
 * A triple (tick, CLOCK_REALTIME, CLOCK_MONOTONIC) is read the same way, at
 * window start and end, for the trace metadata that `trainprof merge`
 * aligns ranks on; the boot id names the kernel whose clocks they are.
 */
#include "clock.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

int tp_clock_use_tsc;

#if defined(__aarch64__)
static uint64_t tp_cntfrq;      /* cntfrq_el0 when the counter is used */

static uint64_t tp_read_cntfrq(void)
{
    uint64_t f;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
    return f;
}
#endif

static struct { uint64_t tick; int64_t unix_ns; } tp_anchor0;
static double tp_ns_per_tick_cal = 1.0;
static pthread_once_t tp_clock_once = PTHREAD_ONCE_INIT;

static int64_t tp_ts_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void tp_anchor(uint64_t *tick, int64_t *unix_ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = tp_clock_now();
        int64_t t = tp_ts_ns(CLOCK_REALTIME);
        uint64_t b = tp_clock_now();
        if (b - a < best) {
            best = b - a;
            *tick = a + (b - a) / 2;
            *unix_ns = t;
        }
    }
}

static pthread_once_t tp_select_once = PTHREAD_ONCE_INIT;

static void tp_clock_pick(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000007) {
        __get_cpuid(0x80000007, &a, &b, &c, &d);
        tp_clock_use_tsc = (d >> 8) & 1;
    }
#elif defined(__aarch64__)
    uint64_t f = tp_read_cntfrq() & 0xffffffffu;    /* the rate is the low 32 bits */
    if (f >= 1000000u && f <= 10000000000ull) {
        tp_cntfrq = f;
        tp_clock_use_tsc = 1;
    }
#endif
}

void tp_clock_select(void)
{
    pthread_once(&tp_select_once, tp_clock_pick);
}

static void tp_clock_setup(void)
{
    tp_clock_select();
    if (tp_clock_use_tsc) {
        int64_t m0 = tp_ts_ns(CLOCK_MONOTONIC);
        uint64_t t0 = tp_clock_now();
        struct timespec sl = { 0, 10 * 1000 * 1000 };
        nanosleep(&sl, NULL);
        int64_t m1 = tp_ts_ns(CLOCK_MONOTONIC);
        uint64_t t1 = tp_clock_now();
        if (t1 > t0 && m1 > m0)
            tp_ns_per_tick_cal = (double)(m1 - m0) / (double)(t1 - t0);
        else
            tp_clock_use_tsc = 0;
#if defined(__aarch64__)
        double nominal = 1e9 / (double)tp_cntfrq;
        if (tp_clock_use_tsc && tp_ns_per_tick_cal > nominal * 0.99 && tp_ns_per_tick_cal < nominal * 1.01)
            tp_ns_per_tick_cal = nominal;
#endif
    }
    tp_anchor(&tp_anchor0.tick, &tp_anchor0.unix_ns);
}

void tp_clock_init(void)
{
    pthread_once(&tp_clock_once, tp_clock_setup);
}

uint64_t tp_clock_ns(void)
{
    int64_t d = (int64_t)(tp_clock_now() - tp_anchor0.tick);
    return (uint64_t)(tp_anchor0.unix_ns + (int64_t)((double)d * tp_ns_per_tick_cal));
}

uint64_t tp_clock_ns_to_ticks(uint64_t ns)
{
    if (!ns)
        return 0;
    double d = (double)((int64_t)ns - tp_anchor0.unix_ns) / tp_ns_per_tick_cal;
    return tp_anchor0.tick + (uint64_t)(int64_t)(d < 0 ? d - 0.5 : d + 0.5);
}

struct tp_clock_map tp_clock_map_now(void)
{
    tp_clock_init();
    struct tp_clock_map m = { tp_anchor0.tick, tp_anchor0.unix_ns, 1.0 };
    if (!tp_clock_use_tsc) {
        /* ticks are monotonic ns: the map is an offset */
        m.tick0 = (uint64_t)tp_ts_ns(CLOCK_MONOTONIC);
        m.unix0_ns = tp_ts_ns(CLOCK_REALTIME);
        return m;
    }
    uint64_t tick;
    int64_t unix_ns;
    tp_anchor(&tick, &unix_ns);
    if (unix_ns - tp_anchor0.unix_ns > 10 * 1000 * 1000 && tick > tp_anchor0.tick)
        m.ns_per_tick = (double)(unix_ns - tp_anchor0.unix_ns) / (double)(tick - tp_anchor0.tick);
    else
        m.ns_per_tick = tp_ns_per_tick_cal;
    /* anchor at the fresh point so that recent records convert most exactly */
    m.tick0 = tick;
    m.unix0_ns = unix_ns;
    return m;
}

void tp_clock_read_triple(struct tp_clock_triple *t)
{
    uint64_t best = UINT64_MAX;
    memset(t, 0, sizeof *t);
    for (int i = 0; i < 3; i++) {
        uint64_t a = tp_clock_now();
        int64_t r = tp_ts_ns(CLOCK_REALTIME);
        int64_t m = tp_ts_ns(CLOCK_MONOTONIC);
        uint64_t b = tp_clock_now();
        if (b - a < best) {
            best = b - a;
            t->tick = a + (b - a) / 2;
            t->realtime_ns = r;
            t->monotonic_ns = m;
        }
    }
    /* ns per tick: the calibration if there is one (ticks are ns otherwise) */
    t->bracket_ns = (int64_t)((double)best * (tp_clock_use_tsc ? tp_ns_per_tick_cal : 1.0)) + 1;
}

const char *tp_clock_source(void)
{
#if defined(__aarch64__)
    return tp_clock_use_tsc ? "cntvct" : "monotonic";
#else
    return tp_clock_use_tsc ? "tsc" : "monotonic";
#endif
}

uint64_t tp_clock_counter_hz(void)
{
    tp_clock_select();
#if defined(__aarch64__)
    return tp_clock_use_tsc ? tp_cntfrq : 0;
#else
    return 0;
#endif
}

static char tp_boot_id[40];
static pthread_once_t tp_boot_once = PTHREAD_ONCE_INIT;

static void tp_boot_read(void)
{
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, tp_boot_id, sizeof tp_boot_id - 1);
    close(fd);
    if (n <= 0)
        n = 0;
    tp_boot_id[n] = '\0';
    for (ssize_t i = 0; i < n; i++)           /* keep [0-9a-f-] only */
        if (!((tp_boot_id[i] >= '0' && tp_boot_id[i] <= '9') ||
              (tp_boot_id[i] >= 'a' && tp_boot_id[i] <= 'f') || tp_boot_id[i] == '-')) {
            tp_boot_id[i] = '\0';
            break;
        }
}

const char *tp_clock_boot_id(void)
{
    pthread_once(&tp_boot_once, tp_boot_read);
    return tp_boot_id;
}
