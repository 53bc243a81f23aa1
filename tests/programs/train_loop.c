/*
 * train_loop.c - a training-loop stand-in for the preload tests.
 *
 * DESIGN
 * Each step does what one iteration of a GPU training job does, in the order
 * a real loop does it: H2D copy of the batch, an NVTX "forward" range around
 * several cudaLaunchKernel launches, one launch through __cudaGetKernel +
 * __cudaLaunchKernel (what nvcc 13 emits for <<<>>>) of the optimizer kernel,
 * an async memset, a stream synchronization, a D2H copy, a checksum on the
 * host from the copied data, then the step signal.  stdout is a pure function
 * of the options, so it can be compared with and without the library.
 *
 * Options (argv, or the environment variable in brackets):
 *   --steps=N        steps to run (TRAIN_STEPS, default 10)
 *   --launches=L     cudaLaunchKernel launches per step (TRAIN_LAUNCHES,
 *                    default 4); each step also makes 1 __cudaLaunchKernel
 *   --mode=M         step signal the program gives (TRAIN_MODE, default api):
 *                    api   trainprof_step() via dlsym after each step
 *                    nvtx  an NVTX range "step" around each step
 *                    both  both of the above (nvtx pop first, then api)
 *                    none  no step signal
 *   --sleep-us=U     sleep per step (TRAIN_SLEEP_US, default 0)
 *   TRAIN_STALL_US=U sleep U more in each of the last TRAIN_STALLS steps
 *                    (defaults 0 and 1): steps long enough for the hang
 *                    doctor (TRAINPROF_HANG_S)
 *   --activations=B  per step, cudaMalloc B bytes before the forward launches
 *                    and B/2 after them, free both after the step's sync, as
 *                    activations come and go (TRAIN_ACTIVATIONS, default 0)
 *   --notify=K       write "train_loop: step K done" to stderr after step K
 *                    (TRAIN_NOTIFY, default -1: never)
 *   --events         per step, CUDA events between the stream and a side
 *                    stream (TRAIN_EVENTS, default 0): the side stream first
 *                    waits on event "prev", recorded on the stream at the end
 *                    of the step before; after the optimizer launch, event
 *                    "ev" is recorded on the stream, waited on by the side
 *                    stream, recorded again on the side stream and
 *                    synchronized on; then "prev" is recorded on the stream
 *   --slow=K:F       step K sleeps F times --sleep-us (TRAIN_SLOW), a step
 *                    that suddenly takes longer
 *   --oom-at=K       in step K, after its launches, a cudaMalloc of 1 GiB
 *                    that the test makes fail (FAKE_CUDA_OOM_BYTES): the
 *                    program says "train_loop: oom: ERROR" on stderr and
 *                    exits with status 3, as a job out of memory dies
 *                    (with TRAIN_OOM_GOES_ON set it goes on, as a job that
 *                    skips a batch too large does)
 *   --raise-at=K     after step K's line, reset SIGINT to its default and
 *                    raise(SIGINT): the program dies of it, as CPython does
 *                    on an uncaught KeyboardInterrupt
 *   --bad-launch     first launch a NULL function and print what
 *                    cudaGetLastError, cudaPeekAtLastError and errno say
 *   --foreign=K:HOW  after step K, act as a second CUPTI client of the
 *                    process (TRAIN_FOREIGN): HOW is "kineto" (what
 *                    torch.profiler's Kineto does, calling libcupti by name:
 *                    its own buffer and timestamp callbacks, CONCURRENT_KERNEL
 *                    on; two steps later the kind off and a forced flush),
 *                    or "clock" (only a timestamp callback of its own, set
 *                    through dlsym on its own libcupti handle).  Its clock
 *                    is CLOCK_MONOTONIC, as Kineto's TSC-based one is not
 *                    Unix time.  At exit, "foreign: N records" on stderr.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "prog.h"

enum { K_MATMUL_FWD, K_RELU_FWD, K_MATMUL_BWD, K_SOFTMAX, K_ADAM, K_COUNT };

static const char *const kernel_names[K_COUNT] = {
    "_Z10matmul_fwdPfS_S_i",
    "_Z8relu_fwdPfi",
    "_ZN4mlir7kernels10matmul_bwdEPKfS2_Pfi",
    "_ZN6layers7softmaxIfEEvPT_i",
    "_ZN5torch5optim9adam_stepEPfi",
};

#define N_FLOATS 1024

/* ---- a second CUPTI client (--foreign) ---------------------------------- */

typedef int (*cupti_fn)();   /* CUPTI's entry points, called with their real arguments */
static void *foreign_lib;
static long foreign_records;

static uint64_t foreign_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void foreign_requested(uint8_t **buf, size_t *size, size_t *max)
{
    *size = 1u << 20;
    *buf = aligned_alloc(8, *size);
    *max = 0;
}

static void foreign_completed(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    cupti_fn next = (cupti_fn)dlsym(foreign_lib, "cuptiActivityGetNextRecord");
    void *rec = NULL;
    while (next && next(buf, valid, &rec) == 0)
        __atomic_add_fetch(&foreign_records, 1, __ATOMIC_RELAXED);
    free(buf);
}

/* By name (RTLD_DEFAULT: what a program linked against libcupti calls) or
 * through the library's own handle. */
static cupti_fn foreign_sym(const char *name, int by_name)
{
    return (cupti_fn)dlsym(by_name ? RTLD_DEFAULT : foreign_lib, name);
}

static void foreign_step(long s, long at, const char *how)
{
    int kineto = !strcmp(how, "kineto");
    if (s == at) {
        foreign_lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
        if (!foreign_lib)
            return;
        if (kineto) {
            foreign_sym("cuptiActivityRegisterCallbacks", 1)(foreign_requested, foreign_completed);
            foreign_sym("cuptiActivityRegisterTimestampCallback", 1)(foreign_clock);
            foreign_sym("cuptiActivityEnable", 1)(10);      /* CONCURRENT_KERNEL */
        } else {
            foreign_sym("cuptiActivityRegisterTimestampCallback", 0)(foreign_clock);
        }
    } else if (s == at + 2 && foreign_lib && kineto) {
        foreign_sym("cuptiActivityDisable", 1)(10);
        foreign_sym("cuptiActivityFlushAll", 1)(1);         /* FLUSH_FORCED */
    }
}

static uint32_t fnv1a(const void *p, size_t n, uint32_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 16777619u;
    }
    return h;
}

int main(int argc, char **argv)
{
    long steps = prog_env_long("TRAIN_STEPS", 10);
    long launches = prog_env_long("TRAIN_LAUNCHES", 4);
    long sleep_us = prog_env_long("TRAIN_SLEEP_US", 0);
    long stall_us = prog_env_long("TRAIN_STALL_US", 0);
    long stalls = prog_env_long("TRAIN_STALLS", 1);
    long notify = prog_env_long("TRAIN_NOTIFY", -1);
    long act_bytes = prog_env_long("TRAIN_ACTIVATIONS", 0);
    long events = prog_env_long("TRAIN_EVENTS", 0);
    const char *mode = getenv("TRAIN_MODE") ? getenv("TRAIN_MODE") : "api";
    const char *foreign = getenv("TRAIN_FOREIGN");
    int bad_launch = 0;
    const char *slow = getenv("TRAIN_SLOW");
    long oom_at = -1, raise_at = -1;

    static const struct option opts[] = {
        { "steps", required_argument, 0, 's' },
        { "launches", required_argument, 0, 'l' },
        { "mode", required_argument, 0, 'm' },
        { "sleep-us", required_argument, 0, 'u' },
        { "notify", required_argument, 0, 'n' },
        { "activations", required_argument, 0, 'a' },
        { "bad-launch", no_argument, 0, 'b' },
        { "events", no_argument, 0, 'e' },
        { "foreign", required_argument, 0, 'f' },
        { "slow", required_argument, 0, 'w' },
        { "oom-at", required_argument, 0, 'o' },
        { "raise-at", required_argument, 0, 'R' },
        { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': steps = atol(optarg); break;
        case 'l': launches = atol(optarg); break;
        case 'm': mode = optarg; break;
        case 'u': sleep_us = atol(optarg); break;
        case 'n': notify = atol(optarg); break;
        case 'a': act_bytes = atol(optarg); break;
        case 'b': bad_launch = 1; break;
        case 'e': events = 1; break;
        case 'f': foreign = optarg; break;
        case 'w': slow = optarg; break;
        case 'o': oom_at = atol(optarg); break;
        case 'R': raise_at = atol(optarg); break;
        default:
            fprintf(stderr, "usage: %s [--steps=N] [--launches=L] [--mode=api|nvtx|both|none] "
                    "[--sleep-us=U] [--notify=K] [--activations=B] [--bad-launch] [--events] "
                    "[--foreign=K:kineto|clock] [--slow=K:F] [--oom-at=K]\n",
                    argv[0]);
            return 64;
        }
    }
    long foreign_at = -1;
    const char *foreign_how = "";
    if (foreign) {
        char *colon = strchr(foreign, ':');
        foreign_at = atol(foreign);
        foreign_how = colon ? colon + 1 : "";
        if (!colon || (strcmp(foreign_how, "kineto") && strcmp(foreign_how, "clock"))) {
            fprintf(stderr, "bad --foreign %s\n", foreign);
            return 64;
        }
    }
    int use_api = !strcmp(mode, "api") || !strcmp(mode, "both");
    int use_nvtx = !strcmp(mode, "nvtx") || !strcmp(mode, "both");
    if (!use_api && !use_nvtx && strcmp(mode, "none")) {
        fprintf(stderr, "bad mode %s\n", mode);
        return 64;
    }

    void **module = prog_register_module();
    for (int k = 0; k < K_COUNT; k++)
        prog_register(module, PROG_STUB(k), kernel_names[k]);
    __cudaRegisterFatBinaryEnd(module);

    float *host = malloc(N_FLOATS * sizeof(float));
    float *back = malloc(N_FLOATS * sizeof(float));
    float *d_a = NULL, *d_b = NULL;
    cudaStream_t stream;
    PROG_CHECK(cudaMalloc((void **)&d_a, N_FLOATS * sizeof(float)));
    PROG_CHECK(cudaMalloc((void **)&d_b, N_FLOATS * sizeof(float)));
    PROG_CHECK(cudaStreamCreate(&stream));
    cudaStream_t side = NULL;
    cudaEvent_t ev = NULL, prev = NULL;
    if (events) {
        PROG_CHECK(cudaStreamCreate(&side));
        PROG_CHECK(cudaEventCreate(&ev));
        PROG_CHECK(cudaEventCreate(&prev));
    }

    if (bad_launch) {
        errno = 1234;
        cudaError_t e = cudaLaunchKernel(NULL, prog_dim3(1, 1, 1), prog_dim3(1, 1, 1), NULL, 0,
                                         stream);
        int saved = errno;
        cudaError_t peek = cudaPeekAtLastError();
        cudaError_t last = cudaGetLastError();
        cudaError_t after = cudaGetLastError();
        printf("bad launch: %s peek %s last %s after %s errno %d\n", cudaGetErrorName(e),
               cudaGetErrorName(peek), cudaGetErrorName(last), cudaGetErrorName(after), saved);
    }

    uint32_t total = 2166136261u;
    long total_launches = 0;
    for (long s = 0; s < steps; s++) {
        if (use_nvtx)
            nvtxRangePushA("step");
        for (int i = 0; i < N_FLOATS; i++)
            host[i] = (float)((s * 31 + i) % 97) * 0.5f;
        PROG_CHECK(cudaMemcpy(d_a, host, N_FLOATS * sizeof(float), cudaMemcpyHostToDevice));
        if (events && s > 0)
            PROG_CHECK(cudaStreamWaitEvent(side, prev, 0));

        void *act = NULL, *act2 = NULL;
        if (act_bytes > 0)
            PROG_CHECK(cudaMalloc(&act, (size_t)act_bytes));
        nvtxRangePushA("forward");
        int n = N_FLOATS;
        void *args[] = { &d_a, &d_b, &n };
        for (long l = 0; l < launches; l++) {
            int k = (int)(l % K_ADAM);
            PROG_CHECK(cudaLaunchKernel(PROG_STUB(k), prog_dim3(16 + (unsigned)k, 1, 1),
                                        prog_dim3(128, 1, 1), args, (size_t)k * 256, stream));
        }
        nvtxRangePop();
        if (act_bytes > 0)
            PROG_CHECK(cudaMalloc(&act2, (size_t)act_bytes / 2));

        cudaKernel_t adam;
        PROG_CHECK(__cudaGetKernel(&adam, PROG_STUB(K_ADAM)));
        PROG_CHECK(__cudaLaunchKernel(adam, prog_dim3(8, 2, 1), prog_dim3(256, 1, 1), args, 0,
                                      stream));
        if (events) {
            PROG_CHECK(cudaEventRecord(ev, stream));
            PROG_CHECK(cudaStreamWaitEvent(side, ev, 0));
            PROG_CHECK(cudaEventRecord(ev, side));
            PROG_CHECK(cudaEventSynchronize(ev));
            PROG_CHECK(cudaEventRecord(prev, stream));
        }
        PROG_CHECK(cudaMemsetAsync(d_a, (int)(s & 0xff), 16, stream));
        PROG_CHECK(cudaStreamSynchronize(stream));
        if (act_bytes > 0) {
            PROG_CHECK(cudaFree(act2));
            PROG_CHECK(cudaFree(act));
        }
        PROG_CHECK(cudaMemcpy(back, d_a, N_FLOATS * sizeof(float), cudaMemcpyDeviceToHost));
        uint32_t sum = fnv1a(back, N_FLOATS * sizeof(float), 2166136261u);
        total = fnv1a(&sum, sizeof(sum), total);
        total_launches += launches + 1;
        printf("step %ld launches %ld checksum %08x\n", s, launches + 1, sum);
        fflush(stdout);

        if (s == raise_at) {
            signal(SIGINT, SIG_DFL);
            raise(SIGINT);
        }
        if (s == oom_at) {
            void *big = NULL;
            cudaError_t e = cudaMalloc(&big, (size_t)1 << 30);
            fprintf(stderr, "train_loop: oom: %s\n", cudaGetErrorString(e));
            if (!getenv("TRAIN_OOM_GOES_ON"))
                exit(3);
        }
        long us = sleep_us;
        if (slow && s == atol(slow) && strchr(slow, ':'))
            us = sleep_us * atol(strchr(slow, ':') + 1);
        if (us > 0) {
            struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
            nanosleep(&ts, NULL);
        }
        if (stall_us > 0 && s >= steps - stalls) {
            struct timespec ts = { stall_us / 1000000, (stall_us % 1000000) * 1000 };
            while (nanosleep(&ts, &ts) != 0)
                ;       /* the whole stall, a signal of the hang doctor's included */
        }
        if (use_nvtx)
            nvtxRangePop();
        if (use_api)
            tp_call_step();
        if (s == notify)
            fprintf(stderr, "train_loop: step %ld done\n", s);
        if (foreign_at >= 0)
            foreign_step(s, foreign_at, foreign_how);
    }
    if (foreign_lib)
        fprintf(stderr, "foreign: %ld records\n", __atomic_load_n(&foreign_records, __ATOMIC_RELAXED));

    PROG_CHECK(cudaStreamDestroy(stream));
    if (events) {
        PROG_CHECK(cudaEventDestroy(ev));
        PROG_CHECK(cudaEventDestroy(prev));
        PROG_CHECK(cudaStreamDestroy(side));
    }
    PROG_CHECK(cudaFree(d_a));
    PROG_CHECK(cudaFree(d_b));
    free(host);
    free(back);
    printf("total launches %ld checksum %08x\n", total_launches, total);
    return 0;
}
