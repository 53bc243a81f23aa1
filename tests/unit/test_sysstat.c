/*
 * test_sysstat.c - the host statistics sampler: /proc parsers on fixed
 * text, and the tp-sys thread against this machine's /proc.
 *
 * DESIGN
 * Parser tests feed synthetic /proc text.  Thread tests set TRAINPROF_SYS*
 * in the environment before tp_config_init() (once per process, so each
 * runs in its own CK_FORK child), burn CPU in the test thread while the
 * sampler runs, and check units and ranges of what tp_sys_take() returns.
 * TP_SYS_COST_SECONDS=N makes test_cost run N seconds at the default
 * 0.5 s interval and print the sampler's CPU cost (the measurement quoted
 * in the report); without it, it runs 1 s at 0.02 s and only bounds it.
 */
#include "collector/common/clock.h"
#include "collector/config/config.h"
#include "collector/modules/sysstat.h"

#include "tp_test.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void burn(double seconds)
{
    volatile double x = 1;
    double end = mono_s() + seconds;
    while (mono_s() < end)
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
}

static void init_env(const char *sys, const char *interval)
{
    setenv("TRAINPROF_SYS", sys, 1);
    setenv("TRAINPROF_SYS_INTERVAL", interval, 1);
    tp_config_init();
    tp_clock_init();
}

/* Threads of this process named "name". */
static int count_threads(const char *name)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(comm, sizeof comm, f))
                comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        n += strcmp(comm, name) == 0;
    }
    closedir(d);
    return n;
}

/* Threads named "name" once joined ones are gone from /proc: a joined
 * thread's task entry can outlive pthread_join by a moment (the kernel
 * reaps it after clearing the tid join waits for; seen 2 runs in 8 under
 * load), so a count that should reach 0 is polled for up to 2 s. */
static int count_threads_settled(const char *name)
{
    int n = count_threads(name);
    for (int i = 0; n && i < 200; i++) {
        usleep(10000);
        n = count_threads(name);
    }
    return n;
}

/* ---- parsers -------------------------------------------------------------- */

START_TEST(test_parse_stat_meminfo_statm)
{
    uint64_t busy, total;
    ck_assert_int_eq(tp_sys_parse_stat("cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 1 2 3 4\n", &busy, &total), 0);
    ck_assert_uint_eq(total, 1000);           /* guest (7) is inside user already */
    ck_assert_uint_eq(busy, 160);             /* idle and iowait are not busy */
    ck_assert_int_eq(tp_sys_parse_stat("intr 1 2 3\n", &busy, &total), -1);
    ck_assert_int_eq(tp_sys_parse_stat("", &busy, &total), -1);

    uint64_t t, a;
    const char *mi = "MemTotal:       16303444 kB\nMemFree:  100 kB\nMemAvailable:   8000000 kB\n";
    ck_assert_int_eq(tp_sys_parse_meminfo(mi, &t, &a), 0);
    ck_assert_uint_eq(t, 16303444);
    ck_assert_uint_eq(a, 8000000);
    ck_assert_int_eq(tp_sys_parse_meminfo("MemTotal: 5 kB\n", &t, &a), -1);

    uint64_t pages;
    ck_assert_int_eq(tp_sys_parse_statm("12345 678 90 1 0 2 0\n", &pages), 0);
    ck_assert_uint_eq(pages, 678);
    ck_assert_int_eq(tp_sys_parse_statm("garbage", &pages), -1);
}
END_TEST

static int fake_is_disk(const char *name)
{
    return strcmp(name, "sda") == 0 || strcmp(name, "nvme0n1") == 0 || strcmp(name, "dm-0") == 0;
}

START_TEST(test_parse_diskstats)
{
    const char *ds =
        "   7       0 loop0 100 0 2000 10 0 0 0 0 0 10 10\n"
        "   1       0 ram0 1 0 8 0 0 0 0 0 0 0 0\n"
        "   8       0 sda 1000 10 4096 50 200 3 1024 30 0 80 80 0 0 0 0\n"
        "   8       1 sda1 900 10 4000 40 190 3 1000 20 0 60 60\n"
        " 259       0 nvme0n1 5 0 10 1 6 0 20 1 0 2 2\n"
        " 253       0 dm-0 1 2\n"                       /* too short: skipped */
        "garbage line\n";
    struct tp_sys_dev d[8];
    size_t n = tp_sys_parse_diskstats(ds, fake_is_disk, d, 8);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(d[0].name, "sda");
    ck_assert_uint_eq(d[0].a, 4096ull * 512);
    ck_assert_uint_eq(d[0].b, 1024ull * 512);
    ck_assert_str_eq(d[1].name, "nvme0n1");
    ck_assert_uint_eq(d[1].a, 10ull * 512);
    ck_assert_uint_eq(d[1].b, 20ull * 512);
    /* without the /sys/block rule, partitions come through but loop and ram never */
    n = tp_sys_parse_diskstats(ds, NULL, d, 8);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(d[1].name, "sda1");
    ck_assert_uint_eq(tp_sys_parse_diskstats(ds, NULL, d, 1), 1);
}
END_TEST

START_TEST(test_parse_netdev)
{
    const char *nd =
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
        "    lo: 5000 50 0 0 0 0 0 0 5000 50 0 0 0 0 0 0\n"
        "  eth0: 123456789 1000 0 0 0 0 0 0 987654 900 0 0 0 0 0 0\n"
        "wlan0:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
        "  weird@if: 10 0 0 0 0 0 0 0 20 0 0 0 0 0 0 0\n";
    struct tp_sys_dev d[8];
    size_t n = tp_sys_parse_netdev(nd, d, 8);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(d[0].name, "eth0");
    ck_assert_uint_eq(d[0].a, 123456789);
    ck_assert_uint_eq(d[0].b, 987654);
    ck_assert_str_eq(d[1].name, "wlan0");
    ck_assert_uint_eq(d[1].a, 1);
    ck_assert_uint_eq(d[1].b, 9);
    ck_assert_str_eq(d[2].name, "weird_if");   /* sanitised for the trace */
}
END_TEST

START_TEST(test_rate_never_negative)
{
    double r = -1;
    ck_assert_int_eq(tp_sys_rate(1000, 3000, 0.5, &r), 1);
    ck_assert(fabs(r - 4000.0) < 1e-9);
    r = -1;
    ck_assert_int_eq(tp_sys_rate(3000, 1000, 0.5, &r), 0);            /* decrease */
    ck_assert_int_eq(tp_sys_rate(UINT32_MAX - 5, 10, 0.5, &r), 0);    /* 32-bit wrap */
    ck_assert_int_eq(tp_sys_rate(10, 20, 0, &r), 0);
    ck_assert(r == -1);
    ck_assert_int_eq(tp_sys_rate(10, 10, 1, &r), 1);
    ck_assert(r == 0);
}
END_TEST

/* ---- the thread ----------------------------------------------------------- */

static uint64_t meminfo_total_kb(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    ck_assert_ptr_nonnull(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    uint64_t t, a;
    ck_assert_int_eq(tp_sys_parse_meminfo(buf, &t, &a), 0);
    return t;
}

static double statm_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    unsigned long size, rss;
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &rss), 2);
    fclose(f);
    return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

START_TEST(test_sampler)
{
    init_env("cpu,memory,disk,net", "0.02");
    ck_assert_uint_eq(tp_cfg.sys, TP_SYS_CPU | TP_SYS_MEMORY | TP_SYS_DISK | TP_SYS_NET);
    uint64_t t0 = tp_clock_now();
    ck_assert_int_eq(tp_sys_start(), 0);
    burn(0.2);
    tp_sys_stop();
    ck_assert_int_eq(count_threads("tp-sys"), 1);
    usleep(50000);                            /* stopped: no more rounds */
    uint64_t t1 = tp_clock_now();

    struct tp_sys_sample *s;
    size_t n = tp_sys_take(t0, t1, &s);
    ck_assert_uint_gt(n, 0);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double total_bytes = (double)meminfo_total_kb() * 1024.0;
    double rss_now = statm_rss_bytes();
    uint64_t first = s[0].tick;
    int n_proc = 0, n_sys = 0, n_rss = 0, n_avail = 0, n_rounds = 0;
    uint64_t last_tick = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = tp_sys_name(s[i].name);
        ck_assert_ptr_nonnull(name);
        ck_assert(s[i].tick >= t0 && s[i].tick <= t1);
        ck_assert(s[i].tick >= last_tick);
        n_rounds += s[i].tick != last_tick;
        last_tick = s[i].tick;
        ck_assert_msg(ends_with(name, "_percent") || ends_with(name, "_bytes") ||
                      ends_with(name, "_bytes_per_s"), "no unit in %s", name);
        int rate = ends_with(name, "_percent") || ends_with(name, "_per_s");
        if (rate) {
            ck_assert_msg(s[i].tick != first, "rate %s in the baseline round", name);
            ck_assert_msg(s[i].value >= 0, "%s = %g", name, s[i].value);
        }
        if (s[i].name == TP_SYS_N_CPU_PROCESS) {
            n_proc++;
            ck_assert_msg(s[i].value > 0 && s[i].value <= 100.0 * (double)ncpu + 5,
                          "cpu_process_percent = %g", s[i].value);
        } else if (s[i].name == TP_SYS_N_CPU_SYSTEM) {
            n_sys++;
            ck_assert_msg(s[i].value >= 0 && s[i].value <= 100, "cpu_system_percent = %g", s[i].value);
        } else if (s[i].name == TP_SYS_N_MEM_RSS) {
            n_rss++;
            ck_assert_msg(s[i].value > rss_now / 4 && s[i].value < rss_now * 4,
                          "rss %g against statm %g", s[i].value, rss_now);
        } else if (s[i].name == TP_SYS_N_MEM_AVAILABLE) {
            n_avail++;
            ck_assert(s[i].value > 0 && s[i].value <= total_bytes);
        } else if (s[i].name == TP_SYS_N_MEM_USED) {
            ck_assert(s[i].value >= 0 && s[i].value <= total_bytes);
        }
    }
    ck_assert_int_ge(n_rounds, 5);
    ck_assert_int_ge(n_proc, 3);
    ck_assert_int_ge(n_sys, 3);
    ck_assert_int_eq(n_rss, n_rounds);
    ck_assert_int_eq(n_avail, n_rounds);
    free(s);

    /* taken means gone; an empty window gives nothing and no array */
    ck_assert_uint_eq(tp_sys_take(t0, t1, &s), 0);
    ck_assert_ptr_null(s);

    /* restart: a new baseline round, then rates again */
    uint64_t t2 = tp_clock_now();
    ck_assert_int_eq(tp_sys_start(), 0);
    burn(0.1);
    tp_sys_stop();
    ck_assert_uint_eq(tp_sys_take(0, t2, &s), 0);   /* excludes everything */
    uint64_t t3 = tp_clock_now();
    n = tp_sys_take(t2, t3, &s);
    ck_assert_uint_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        const char *name = tp_sys_name(s[i].name);
        if (ends_with(name, "_percent") || ends_with(name, "_per_s"))
            ck_assert(s[i].tick != s[0].tick);
    }
    free(s);
    ck_assert_int_eq(count_threads("tp-sys"), 1);
    tp_sys_shutdown();
    ck_assert_int_eq(count_threads_settled("tp-sys"), 0);
    tp_sys_shutdown();
}
END_TEST

START_TEST(test_window_excludes)
{
    init_env("memory", "0.01");
    ck_assert_int_eq(tp_sys_start(), 0);
    usleep(50000);
    tp_sys_stop();
    struct tp_sys_sample *s = (void *)1;
    uint64_t now = tp_clock_now();
    ck_assert_uint_eq(tp_sys_take(now + 1000000, now + 2000000, &s), 0);
    ck_assert_ptr_null(s);
    ck_assert_uint_eq(tp_sys_take(0, now, &s), 0);  /* the first take discarded them */
    tp_sys_shutdown();
}
END_TEST

START_TEST(test_none_starts_no_thread)
{
    init_env("none", "0.5");
    ck_assert_uint_eq(tp_cfg.sys, 0);
    ck_assert_int_eq(tp_sys_start(), 0);
    usleep(20000);
    ck_assert_int_eq(count_threads("tp-sys"), 0);
    struct tp_sys_sample *s;
    ck_assert_uint_eq(tp_sys_take(0, UINT64_MAX, &s), 0);
    tp_sys_stop();
    tp_sys_shutdown();
}
END_TEST

START_TEST(test_cost)
{
    const char *env = getenv("TP_SYS_COST_SECONDS");
    double seconds = env ? atof(env) : 1.0;
    init_env("cpu,memory,disk,net", env ? "0.5" : "0.02");
    ck_assert_int_eq(tp_sys_start(), 0);
    double end = mono_s() + seconds;
    while (mono_s() < end) {
        usleep(100000);
        struct tp_sys_sample *s;
        tp_sys_take(0, tp_clock_now(), &s);       /* as the flusher would */
        free(s);
    }
    tp_sys_stop();
    struct tp_sys_stats st;
    tp_sys_stats(&st);
    ck_assert_uint_gt(st.rounds, 0);
    double us_per_round = (double)st.thread_cpu_ns / 1e3 / (double)st.rounds;
    double pct = (double)st.thread_cpu_ns / 1e9 / seconds * 100.0;
    if (env)
        fprintf(stderr, "tp-sys cost: %llu rounds in %.1f s at %.2f s, %.1f us CPU per round, "
                "%.4f%% of one core, %llu samples, %llu dropped\n",
                (unsigned long long)st.rounds, seconds, tp_cfg.sys_interval, us_per_round, pct,
                (unsigned long long)st.samples, (unsigned long long)st.dropped);
    ck_assert_msg(us_per_round < 5000, "%g us per round", us_per_round);
    tp_sys_shutdown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sysstat");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_parse_stat_meminfo_statm);
    tcase_add_test(tc, test_parse_diskstats);
    tcase_add_test(tc, test_parse_netdev);
    tcase_add_test(tc, test_rate_never_negative);
    tcase_add_test(tc, test_sampler);
    tcase_add_test(tc, test_window_excludes);
    tcase_add_test(tc, test_none_starts_no_thread);
    tcase_add_test(tc, test_cost);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
