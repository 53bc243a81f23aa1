/*
 * stack_calls.c - distinct, named call paths to CUDA calls, for the stack
 * tests (TRAINPROF_WITH_STACK).
 *
 * DESIGN
 * Each step runs main -> train_step -> forward -> launch_matmul
 * (cudaLaunchKernel of matmul_fwd) and main -> train_step -> backward ->
 * copy_grads (cudaMemcpy), then a stream synchronization directly in
 * train_step.  The callers are external, never inlined and built with
 * -rdynamic (stack_calls.mk), so dladdr names them; the calls after each
 * CUDA call keep the compiler from turning them into tail calls, which
 * would drop the caller's frame.  stdout depends only on the step count.
 *   STACK_STEPS     steps (default 6); trainprof_step() after each
 *   STACK_SLEEP_US  sleep per step (default 0)
 */
#include "prog.h"

#define N_FLOATS 256
#define NOINLINE __attribute__((noinline, noclone))

static float *d_a, *d_b;
static cudaStream_t stream;
volatile int stack_calls_sink;

NOINLINE void launch_matmul(int i)
{
    int n = N_FLOATS;
    void *args[] = { &d_a, &d_b, &n };
    PROG_CHECK(cudaLaunchKernel(PROG_STUB(0), prog_dim3(8 + (unsigned)i, 1, 1), prog_dim3(128, 1, 1),
                                args, 0, stream));
    stack_calls_sink++;
}

NOINLINE void forward(void)
{
    for (int i = 0; i < 2; i++)
        launch_matmul(i);
    stack_calls_sink++;
}

NOINLINE void copy_grads(float *host)
{
    PROG_CHECK(cudaMemcpy(host, d_b, N_FLOATS * sizeof(float), cudaMemcpyDeviceToHost));
    stack_calls_sink++;
}

NOINLINE void backward(float *host)
{
    copy_grads(host);
    stack_calls_sink++;
}

NOINLINE void train_step(float *host)
{
    forward();
    backward(host);
    PROG_CHECK(cudaStreamSynchronize(stream));
    stack_calls_sink++;
}

int main(void)
{
    long steps = prog_env_long("STACK_STEPS", 6);
    long sleep_us = prog_env_long("STACK_SLEEP_US", 0);
    void **module = prog_register_module();
    prog_register(module, PROG_STUB(0), "_Z10matmul_fwdPfS_S_i");
    __cudaRegisterFatBinaryEnd(module);
    float *host = calloc(N_FLOATS, sizeof(float));
    PROG_CHECK(cudaMalloc((void **)&d_a, N_FLOATS * sizeof(float)));
    PROG_CHECK(cudaMalloc((void **)&d_b, N_FLOATS * sizeof(float)));
    PROG_CHECK(cudaStreamCreate(&stream));
    for (long s = 0; s < steps; s++) {
        train_step(host);
        printf("step %ld\n", s);
        fflush(stdout);
        if (sleep_us > 0) {
            struct timespec ts = { sleep_us / 1000000, (sleep_us % 1000000) * 1000 };
            nanosleep(&ts, NULL);
        }
        tp_call_step();
    }
    PROG_CHECK(cudaStreamDestroy(stream));
    PROG_CHECK(cudaFree(d_a));
    PROG_CHECK(cudaFree(d_b));
    free(host);
    printf("done %ld\n", steps);
    return 0;
}
