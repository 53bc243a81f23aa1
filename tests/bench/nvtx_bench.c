/*
 * nvtx_bench.c - ns per NVTX push + pop of a message shaped like one of
 * torch's operator ranges, unique per call as torch's op_id makes it:
 * "aten::addmm, seq = S, op_id = N" (about 40 characters).
 * With a third argument "shapes", the messages carry what torch adds with
 * record_shapes: ", sizes = [[128], [32, 64], [64, 128], [], []],
 * input_op_ids = [(N,0), ...]" (about 150 characters).
 * Usage: nvtx_bench RANGES STEPS [shapes].  Prints "ns_per_range=X" on stdout.  The
 * messages are formatted outside the timed loop, so the figure is the
 * push/pop path alone (the injection library's, or NVTX's no-op without
 * one).  Steps are signalled through trainprof_step() when the library is
 * present, which also activates it.
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

#include <nvtx3/nvToolsExt.h>

#define MSG 256

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long per = argc > 1 ? atol(argv[1]) : 100000, steps = argc > 2 ? atol(argv[2]) : 10;
    int shapes = argc > 3 && argv[3][0] == 's';
    void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");
    if (getenv("BENCH_NO_STEP"))
        step = NULL;
    char *msgs = malloc((size_t)per * MSG);
    if (!msgs || per <= 0 || steps <= 0)
        return 2;
    if (step)
        step();                     /* activates */
    double total = 0;
    long id = 1;
    for (long s = 0; s < steps; s++) {
        for (long i = 0; i < per; i++, id++)
            if (shapes)
                snprintf(msgs + i * MSG, MSG,
                         "aten::addmm, seq = %ld, op_id = %ld, sizes = [[128], [32, 64], [64, 128], "
                         "[], []], input_op_ids = [(%ld,0), (%ld,0), (%ld,0), (0,-1), (0,-1)]",
                         id / 3, id, id - 3, id - 2, id - 1);
            else
                snprintf(msgs + i * MSG, MSG, "aten::addmm, seq = %ld, op_id = %ld", id / 3, id);
        double t0 = now_ns();
        for (long i = 0; i < per; i++) {
            nvtxRangePushA(msgs + i * MSG);
            nvtxRangePop();
        }
        total += now_ns() - t0;
        if (step)
            step();
    }
    printf("ns_per_range=%.2f\n", total / ((double)per * (double)steps));
    free(msgs);
    return 0;
}
