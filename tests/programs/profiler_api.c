/*
 * profiler_api.c - a training loop that brackets parts of itself with the
 * CUDA profiler API, as a job run under nsys --capture-range=cudaProfilerApi
 * does (tests/preload/test_profiler_api.py).
 *
 * DESIGN
 * Each step launches L kernels with cudaLaunchKernel, synchronizes its
 * stream, then gives the step signal (trainprof_step() through dlsym).  The
 * profiler calls named on the command line are made in the middle of their
 * step, after the first L/2 launches, so that windows begin and end inside
 * steps.  Launch i of step s has grid (1000 * (s + 1) + i, 1, 1): a trace names
 * which launches it holds.  stdout (one line per step, one per profiler
 * call with its status) is a pure function of the arguments.
 *
 * Usage: profiler_api [--steps=N] [--launches=L] [--driver] CALL...
 *   CALL is start@K or stop@K: cudaProfilerStart/Stop in step K, in the
 *   order given when several fall in one step.
 *   --driver   call the driver's cuProfilerStart/Stop instead, through the
 *              pointers cudaGetDriverEntryPointByVersion hands out (as
 *              PyTorch and Triton reach the driver)
 */
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <getopt.h>

#include "prog.h"

#define MAX_CALLS 32

struct call {
    long step;
    int start;
};

typedef CUresult (*drv_fn)(void);

static drv_fn driver_entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 4000, cudaEnableDefault, &st) != cudaSuccess ||
        !fn || st != cudaDriverEntryPointSuccess) {
        fprintf(stderr, "profiler_api: no driver entry point %s\n", name);
        exit(3);
    }
    return (drv_fn)fn;
}

int main(int argc, char **argv)
{
    long steps = 10, launches = 4;
    int driver = 0;
    static const struct option opts[] = {
        { "steps", required_argument, 0, 's' },
        { "launches", required_argument, 0, 'l' },
        { "driver", no_argument, 0, 'd' },
        { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': steps = atol(optarg); break;
        case 'l': launches = atol(optarg); break;
        case 'd': driver = 1; break;
        default:
            fprintf(stderr, "usage: %s [--steps=N] [--launches=L] [--driver] start@K|stop@K...\n",
                    argv[0]);
            return 64;
        }
    }
    struct call calls[MAX_CALLS];
    int n_calls = 0;
    for (int i = optind; i < argc && n_calls < MAX_CALLS; i++) {
        const char *at = strchr(argv[i], '@');
        if (!at || (strncmp(argv[i], "start@", 6) && strncmp(argv[i], "stop@", 5))) {
            fprintf(stderr, "bad call %s: expected start@K or stop@K\n", argv[i]);
            return 64;
        }
        calls[n_calls].step = atol(at + 1);
        calls[n_calls].start = argv[i][2] == 'a';
        n_calls++;
    }

    void **module = prog_register_module();
    prog_register(module, PROG_STUB(0), "_Z6kernelPfi");
    __cudaRegisterFatBinaryEnd(module);
    float *d_a = NULL;
    cudaStream_t stream;
    PROG_CHECK(cudaMalloc((void **)&d_a, 1024 * sizeof(float)));
    PROG_CHECK(cudaStreamCreate(&stream));
    drv_fn drv_start = driver ? driver_entry("cuProfilerStart") : NULL;
    drv_fn drv_stop = driver ? driver_entry("cuProfilerStop") : NULL;

    int n = 1024;
    void *args[] = { &d_a, &n };
    for (long s = 0; s < steps; s++) {
        for (long i = 0; i < launches; i++) {
            if (i == launches / 2) {
                for (int k = 0; k < n_calls; k++) {
                    if (calls[k].step != s)
                        continue;
                    int rc = driver ? (int)(calls[k].start ? drv_start() : drv_stop())
                                    : (int)(calls[k].start ? cudaProfilerStart() : cudaProfilerStop());
                    printf("step %ld %s %d\n", s, calls[k].start ? "start" : "stop", rc);
                }
            }
            PROG_CHECK(cudaLaunchKernel(PROG_STUB(0), prog_dim3((unsigned)(1000 * (s + 1) + i), 1, 1),
                                        prog_dim3(128, 1, 1), args, 0, stream));
        }
        PROG_CHECK(cudaStreamSynchronize(stream));
        printf("step %ld launches %ld\n", s, launches);
        fflush(stdout);
        tp_call_step();
    }
    PROG_CHECK(cudaStreamDestroy(stream));
    PROG_CHECK(cudaFree(d_a));
    return 0;
}
