/*
 * launch_bench.c - ns per cudaLaunchKernel on the fake runtime.
 * Usage: launch_bench LAUNCHES STEPS.  Prints "ns_per_launch=X" and the
 * longest trainprof_step() call, "max_step_us=Y" (the stall at a save), and the
 * most CPU time one took, "max_step_cpu_us=Z", on stdout.
 * Steps are signalled through trainprof_step() when the library is present.
 * BENCH_NEST=D makes the launches from D nested frames (default 0), so that
 * TRAINPROF_WITH_STACK has a stack as deep as TRAINPROF_STACK_DEPTH to walk.
 * BENCH_CALL=alloc times cudaMalloc(4 KiB) + cudaFree pairs instead of
 * launches ("ns_per_launch" is then ns per pair): the memory tracking cost.
 * BENCH_SLOW_STEP=K sleeps 20 ms at the end of step K (not timed as
 * launches): with TRAINPROF_FLIGHT its trainprof_step() hands a dump over,
 * and "slow_step_us"/"slow_step_cpu_us" are that step's trainprof_step().
 * BENCH_CALL=sync times cudaStreamSynchronize(0) instead (a blocking call:
 * the hang doctor's in-flight slot, TRAINPROF_HANG_S).
 * BENCH_STEP_SLEEP_US=U sleeps U microseconds at the end of every step (not
 * timed as launches): steps as long as a real job's, so that tp-flush
 * writes each window before the next one ends.
 * BENCH_STEP_LOG=FILE writes one line per trainprof_step() call: the step,
 * its wall and CPU microseconds, and the calling thread's minor and major
 * page faults and voluntary and involuntary context switches during it
 * (getrusage RUSAGE_THREAD): what scripts/dev/bench-stalls explains the
 * tail of the stalls at saves with.
 */
#define _GNU_SOURCE     /* RUSAGE_THREAD */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

extern void **__cudaRegisterFatBinary(void *);
extern void __cudaRegisterFunction(void **, const char *, char *, const char *, int, uint3 *, uint3 *,
                                   dim3 *, dim3 *, int *);

static void bench_kernel(void) {}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double total, max_step, max_step_cpu, slow_step = -1, slow_step_cpu = -1;

/* The calling thread's CPU time: a step's stall less the time it was
 * preempted (on a loaded 2-core machine tp-flush, woken by a save, took
 * the CPU from the training thread for milliseconds) */
static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static int bench_alloc, bench_sync;
static long bench_slow = -1;
static FILE *bench_log;
static long bench_sleep_us;

static void bench_loop(long per, long steps)
{
    void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");
    dim3 g = { 1, 1, 1 }, b = { 32, 1, 1 };
    for (long s = 0; s < steps; s++) {
        double t0 = now_ns();
        if (bench_sync) {
            for (long i = 0; i < per; i++)
                cudaStreamSynchronize(0);
        } else if (bench_alloc) {
            for (long i = 0; i < per; i++) {
                void *p = NULL;
                if (cudaMalloc(&p, 4096) == cudaSuccess)
                    cudaFree(p);
            }
        } else {
            for (long i = 0; i < per; i++)
                cudaLaunchKernel((const void *)bench_kernel, g, b, NULL, 0, 0);
        }
        total += now_ns() - t0;
        if (s == bench_slow) {
            struct timespec ts = { 0, 20 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
        if (bench_sleep_us > 0) {
            struct timespec ts = { bench_sleep_us / 1000000, bench_sleep_us % 1000000 * 1000 };
            nanosleep(&ts, NULL);
        }
        if (step) {
            struct rusage r0, r1;
            if (bench_log)
                getrusage(RUSAGE_THREAD, &r0);
            double s0 = now_ns(), c0 = cpu_ns();
            step();
            double d = now_ns() - s0, dc = cpu_ns() - c0;
            if (bench_log) {
                getrusage(RUSAGE_THREAD, &r1);
                fprintf(bench_log, "%ld %.1f %.1f %ld %ld %ld %ld\n", s, d / 1000, dc / 1000,
                        r1.ru_minflt - r0.ru_minflt, r1.ru_majflt - r0.ru_majflt,
                        r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_nivcsw - r0.ru_nivcsw);
            }
            max_step = d > max_step ? d : max_step;
            max_step_cpu = dc > max_step_cpu ? dc : max_step_cpu;
            if (s == bench_slow) {
                slow_step = d;
                slow_step_cpu = dc;
            }
        }
    }
}

/* D frames of its own above bench_loop; the volatile keeps them real frames */
static volatile int bench_sink;

__attribute__((noinline)) static void bench_nest(int d, long per, long steps)
{
    if (d <= 0)
        bench_loop(per, steps);
    else
        bench_nest(d - 1, per, steps);
    bench_sink++;
}

int main(int argc, char **argv)
{
    long launches = argc > 1 ? atol(argv[1]) : 1000000;
    long steps = argc > 2 ? atol(argv[2]) : 10;
    const char *nest = getenv("BENCH_NEST");
    const char *call = getenv("BENCH_CALL");
    bench_alloc = call && call[0] == 'a';
    if (getenv("BENCH_SLOW_STEP"))
        bench_slow = atol(getenv("BENCH_SLOW_STEP"));
    bench_sync = call && call[0] == 's';
    if (getenv("BENCH_STEP_SLEEP_US"))
        bench_sleep_us = atol(getenv("BENCH_STEP_SLEEP_US"));
    if (getenv("BENCH_STEP_LOG") && !(bench_log = fopen(getenv("BENCH_STEP_LOG"), "w")))
        perror("launch_bench: BENCH_STEP_LOG");
    static char fatbin[16];
    void **h = __cudaRegisterFatBinary(fatbin);
    __cudaRegisterFunction(h, (const char *)bench_kernel, (char *)"_Z12bench_kernelv", "_Z12bench_kernelv",
                           -1, NULL, NULL, NULL, NULL, NULL);
    cudaDeviceSynchronize();
    long per = launches / steps;
    bench_nest(nest ? atoi(nest) : 0, per, steps);
    printf("ns_per_launch=%.2f\nmax_step_us=%.1f\nmax_step_cpu_us=%.1f\n", total / (double)(per * steps),
           max_step / 1000, max_step_cpu / 1000);
    if (bench_slow >= 0)
        printf("slow_step_us=%.1f\nslow_step_cpu_us=%.1f\n", slow_step / 1000, slow_step_cpu / 1000);
    if (bench_log)
        fclose(bench_log);
    return 0;
}
