/*
 * itt_bench.c - ns per ITT range as torch's ITT profiler state makes one
 * for every operator: __itt_string_handle_create(name), __itt_task_begin,
 * __itt_task_end (torch/csrc/itt_wrapper.cpp), over a handful of operator
 * names that repeat, as a training loop's do.
 * Usage: itt_bench RANGES STEPS.  Prints "ns_per_range=X" on stdout.  The
 * collector's functions are called directly, as the pointers ittnotify
 * fills from __itt_api_init are; without the library they are absent, and
 * the figure is ittnotify's own check of a null pointer.  Steps are
 * signalled through trainprof_step() when the library is present, which
 * also activates it.
 * With BENCH_NO_STEP=1 in the environment it never calls trainprof_step():
 * the library is never activated (no CUDA call either), and its ranges
 * take the path of a CPU-only process, where an nvtx:GLOB signal in
 * TRAINPROF_STEP_ON is still live (trainprof_step() would fire "api"
 * first, which ends the NVTX signal).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct itt_id {
    unsigned long long d1, d2, d3;
};

typedef void *(*create_fn)(const char *);
typedef void (*begin_fn)(void *, struct itt_id, struct itt_id, void *);
typedef void (*end_fn)(void *);

static const char *const names[] = {
    "aten::linear", "aten::addmm", "aten::relu", "aten::mm", "aten::t",
    "AddmmBackward0", "aten::add_", "Optimizer.step#AdamW.step",
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long per = argc > 1 ? atol(argv[1]) : 100000, steps = argc > 2 ? atol(argv[2]) : 10;
    void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");
    if (getenv("BENCH_NO_STEP"))
        step = NULL;
    create_fn domain_create = (create_fn)dlsym(RTLD_DEFAULT, "__itt_domain_create");
    create_fn handle_create = (create_fn)dlsym(RTLD_DEFAULT, "__itt_string_handle_create");
    begin_fn begin = (begin_fn)dlsym(RTLD_DEFAULT, "__itt_task_begin");
    end_fn end = (end_fn)dlsym(RTLD_DEFAULT, "__itt_task_end");
    if (per <= 0 || steps <= 0)
        return 2;
    struct itt_id null = { 0, 0, 0 };
    void *domain = domain_create ? domain_create("PyTorch") : NULL;
    if (step)
        step();                     /* activates */
    double total = 0;
    const size_t n_names = sizeof names / sizeof names[0];
    for (long s = 0; s < steps; s++) {
        double t0 = now_ns();
        for (long i = 0; i < per; i++) {
            if (!handle_create || !begin || !end)
                continue;           /* ittnotify's check when no collector filled it */
            void *h = handle_create(names[(size_t)i % n_names]);
            begin(domain, null, null, h);
            end(domain);
        }
        total += now_ns() - t0;
        if (step)
            step();
    }
    printf("ns_per_range=%.2f\n", total / ((double)per * (double)steps));
    return 0;
}
