/*
 * writer_bench.c - events per second of the trace writer: the chrome
 * handler (handlers/chrome.c) fed N call events shaped like a training
 * loop's (three launches of four kernels, 14 to 190 bytes, then a
 * cudaMemcpyAsync; 8 threads), through the writer to a gzip trace, as
 * tp-flush writes a window.  Usage: writer_bench [EVENTS] (default
 * 2,000,000).  BENCH_GZIP=0 writes plain text; BENCH_ZLIB=1 keeps zlib
 * even where ISA-L loads.  Prints the compressor, events per second of
 * wall time, events per CPU second of the whole process (the formatting
 * thread and tp-gzip together: what one core would take), bytes per
 * event and the file's size.  Run under `taskset -c 0` for one core's
 * wall time: there the writer compresses on the formatting thread (it
 * starts no tp-gzip where the process may run on one CPU only); on two
 * CPUs or more tp-gzip compresses while the next buffer is formatted.
 *
 * DESIGN: the window and events are built here as the drain hands them
 * over (collector/contract/sink.h), with no recording before: the figure is
 * the writer's alone.  The trace goes to a fresh folder under /tmp,
 * removed at the end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/contract/vocab.h"
#include "handlers/handler.h"
#include "handlers/jsonw.h"

#define BASE 1719853884000000000LL
#define PID 4242

static const char *const kernels[] = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "ampere_sgemm_128x64_tn",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
    "elementwise_add_kernel",
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    const char *gz_env = getenv("BENCH_GZIP"), *zlib_env = getenv("BENCH_ZLIB");
    int gzip = !(gz_env && !strcmp(gz_env, "0"));
    if (gzip && !(zlib_env && !strcmp(zlib_env, "1")))
        tp_jsonw_load();

    char root[] = "/tmp/tp-writer-bench-XXXXXX";
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    struct tp_window win;
    memset(&win, 0, sizeof win);
    win.run_name = "bench";
    win.hostname = "host";
    win.program = "writer_bench";
    win.pid = PID;
    win.world_size = 1;
    win.batch = 1;
    win.step_signal = "api";
    win.base_time_ns = BASE;
    win.start_ns = BASE + 1000;
    win.end_ns = BASE + 1000 + (int64_t)n * 3000;
    win.records = (uint64_t)n;
    win.config_json = "{}";
    win.trace_folder = root;
    win.trace_filename = "bench.pt.trace.json";
    win.reports_folder = root;
    win.gzip = gzip;
    win.overwrite = 1;

    const struct tp_handler *h = tp_handler_find("chrome");
    if (!h) {
        fprintf(stderr, "writer_bench: no chrome handler\n");
        return 1;
    }
    double t0 = now_s(), c0 = cpu_s();
    void *st = h->open(&win);
    if (!st) {
        fprintf(stderr, "writer_bench: cannot open the trace in %s\n", root);
        return 1;
    }
    struct tp_record rec;
    struct tp_event ev;
    int64_t t = BASE + 2000;
    for (long i = 0; i < n; i++) {
        memset(&rec, 0, sizeof rec);
        memset(&ev, 0, sizeof ev);
        ev.rec = &rec;
        ev.pid = PID;
        ev.tid = PID + (int32_t)((i >> 6) & 7);   /* runs of 64 from one thread */
        ev.ts_ns = t;
        ev.thread_name = "main";
        ev.layer = TP_LAYER_RUNTIME;
        ev.cbid = 211;
        ev.correlation = (uint64_t)i + 1;
        ev.external_id = (UINT64_C(1) << 48) + (uint64_t)(i / 1000);
        if (i % 4 == 3) {
            rec.kind = TP_REC_API;
            ev.name = "cudaMemcpyAsync";
            ev.form = TP_FORM_COPY;
            ev.dur_ns = 1200 + i % 531;
            rec.u.api.bytes = 4096;
            rec.u.api.copy_kind = 1;
            rec.u.api.stream = 7;
        } else {
            rec.kind = TP_REC_LAUNCH;
            ev.name = "cudaLaunchKernel";
            ev.kernel = kernels[i % 4];
            ev.dur_ns = 2100 + i % 977;
            rec.u.launch.grid_x = (uint32_t)(1 + i % 4096);
            rec.u.launch.grid_y = rec.u.launch.grid_z = 1;
            rec.u.launch.block_x = 256;
            rec.u.launch.block_y = rec.u.launch.block_z = 1;
            rec.u.launch.stream = 7;
        }
        h->event(st, &ev);
        t += 2500 + i % 1013;
    }
    struct tp_saved saved;
    memset(&saved, 0, sizeof saved);
    int rc = h->close(st, &win, &saved);
    double dt = now_s() - t0, dc = cpu_s() - c0;
    struct stat sb;
    long long size = rc == 0 && saved.trace[0] && stat(saved.trace, &sb) == 0 ? (long long)sb.st_size : -1;
    printf("compressor=%s events=%ld wall_s=%.3f cpu_s=%.3f events_per_s=%.0f events_per_cpu_s=%.0f "
           "file_bytes=%lld\n",
           gzip ? tp_jsonw_gzip_name() : "none", n, dt, dc, n / dt, n / dc, size);
    if (saved.trace[0])
        unlink(saved.trace);
    rmdir(root);
    return rc == 0 ? 0 : 1;
}
