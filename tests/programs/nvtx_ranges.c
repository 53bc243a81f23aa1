/*
 * nvtx_ranges.c - DESIGN: a small "training loop" annotated only with the
 * NVTX3 header of the CUDA toolkit, the way PyTorch's torch.cuda.nvtx and
 * the CUDA libraries do it, so that the preload tests can check that every
 * NVTX form reaches the trace through injection: push/pop (A, Ex with an
 * ASCII and a registered message, W), domain push/pop, start/end across
 * threads, marks, nesting.  Each step is an NVTX range named "step" (the
 * default TRAINPROF_STEP_ON=api,nvtx:step counts it) holding a cudaMemcpy
 * and a cudaDeviceSynchronize, so the process activates.
 *
 * Usage: nvtx_ranges [--steps N] [--api-steps] [--print-env] [--torch-ops]
 *   --api-steps  also call trainprof_step() (found with dlsym) after each
 *                step range, to test that only one signal counts
 *   --torch-ops  also write, in each step, the ranges torch writes for its
 *                operators: "aten::linear, seq = S, op_id = 1000+10S"
 *                holding a cudaMemcpy and "aten::addmm, op_id = 1001+10S,
 *                sizes = [[4], [8, 16], [16, 4]]", which holds a kernel
 *                launch (op ids in the message, as torch's emit_nvtx)
 *   --sleep-us U sleep U microseconds in each step (time for tp-flush to
 *                start the device side between steps)
 *   --cuda-in-step  make the first CUDA call (cudaMalloc, which activates
 *                the library) inside the first step range, as a program
 *                whose `with nvtx.range("step"):` holds its whole iteration
 *                does; each step then also marks "iteration N"
 *   --start-end  the step range is nvtxRangeStartA/nvtxRangeEnd, not push/pop
 *   --print-env  print NVTX_INJECTION64_PATH to stderr ("(unset)" if unset)
 * Prints one deterministic line to stdout.  Exit status 0 unless a CUDA call
 * fails.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define NBYTES 4096

static int failures;

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "nvtx_ranges: %s failed: %d\n", what, (int)e);
        failures++;
    }
}

static void *end_range(void *arg)
{
    /* a range started on the main thread and ended here */
    nvtxRangeEnd(*(nvtxRangeId_t *)arg);
    return NULL;
}

static nvtxEventAttributes_t ascii_attr(const char *msg)
{
    nvtxEventAttributes_t a;

    memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF00AA00;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    return a;
}

int main(int argc, char **argv)
{
    int nsteps = 5, api_steps = 0, print_env = 0, torch_ops = 0, sleep_us = 0;
    int cuda_in_step = 0, start_end = 0;
    static char kernel_stub;
    void (*tp_step)(void) = NULL;
    unsigned char *host_in, *host_out;
    void *dev = NULL;
    unsigned long sum = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            nsteps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--api-steps"))
            api_steps = 1;
        else if (!strcmp(argv[i], "--print-env"))
            print_env = 1;
        else if (!strcmp(argv[i], "--torch-ops"))
            torch_ops = 1;
        else if (!strcmp(argv[i], "--sleep-us") && i + 1 < argc)
            sleep_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cuda-in-step"))
            cuda_in_step = 1;
        else if (!strcmp(argv[i], "--start-end"))
            start_end = 1;
        else {
            fprintf(stderr, "usage: nvtx_ranges [--steps N] [--api-steps] [--print-env] "
                    "[--torch-ops] [--sleep-us U] [--cuda-in-step] [--start-end]\n");
            return 2;
        }
    }
    if (print_env) {
        const char *v = getenv("NVTX_INJECTION64_PATH");
        fprintf(stderr, "NVTX_INJECTION64_PATH=%s\n", v ? v : "(unset)");
    }
    if (api_steps)
        tp_step = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");

    host_in = malloc(NBYTES);
    host_out = malloc(NBYTES);
    if (!host_in || !host_out)
        return 1;
    for (int i = 0; i < NBYTES; i++)
        host_in[i] = (unsigned char)(i * 7);
    if (!cuda_in_step)
        check(cudaMalloc(&dev, NBYTES), "cudaMalloc");

    nvtxDomainHandle_t domain = nvtxDomainCreateA("tp_test_domain");
    nvtxStringHandle_t reg = nvtxDomainRegisterStringA(domain, "registered_forward");

    for (int s = 0; s < nsteps; s++) {
        nvtxRangeId_t step_id = 0;
        if (start_end)
            step_id = nvtxRangeStartA("step");
        else
            nvtxRangePushA("step");
        if (cuda_in_step) {
            char it[32];
            if (s == 0)
                check(cudaMalloc(&dev, NBYTES), "cudaMalloc");
            snprintf(it, sizeof it, "iteration %d", s);
            nvtxMarkA(it);
        }

        nvtxRangePushA("outer");
        nvtxRangePushA("inner");
        check(cudaMemcpy(dev, host_in, NBYTES, cudaMemcpyHostToDevice), "cudaMemcpy");
        nvtxRangePop();
        nvtxRangePop();

        nvtxEventAttributes_t a = ascii_attr("ex_ascii");
        nvtxRangePushEx(&a);
        nvtxRangePop();

        nvtxEventAttributes_t r = ascii_attr(NULL);
        r.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        r.message.registered = reg;
        nvtxDomainRangePushEx(domain, &r);
        nvtxEventAttributes_t d = ascii_attr("domain_ascii");
        nvtxDomainRangePushEx(domain, &d);
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        nvtxDomainRangePop(domain);
        nvtxDomainRangePop(domain);

        nvtxRangePushW(L"wide_\u00e9t\u00e9");
        nvtxRangePop();

        nvtxRangeId_t id = nvtxRangeStartA("cross_thread");
        pthread_t t;
        if (pthread_create(&t, NULL, end_range, &id) == 0)
            pthread_join(t, NULL);
        else
            nvtxRangeEnd(id);

        nvtxEventAttributes_t ds = ascii_attr("domain_start_end");
        nvtxRangeId_t did = nvtxDomainRangeStartEx(domain, &ds);
        check(cudaMemcpy(host_out, dev, NBYTES, cudaMemcpyDeviceToHost), "cudaMemcpy");
        nvtxDomainRangeEnd(domain, did);

        if (torch_ops) {
            char msg[96];
            snprintf(msg, sizeof msg, "aten::linear, seq = %d, op_id = %d", s, 1000 + 10 * s);
            nvtxRangePushA(msg);
            check(cudaMemcpy(dev, host_in, NBYTES, cudaMemcpyHostToDevice), "cudaMemcpy");
            snprintf(msg, sizeof msg, "aten::addmm, op_id = %d, sizes = [[4], [8, 16], [16, 4]]",
                     1001 + 10 * s);
            nvtxRangePushA(msg);
            dim3 one = { 1, 1, 1 };
            check(cudaLaunchKernel(&kernel_stub, one, one, NULL, 0, 0), "cudaLaunchKernel");
            nvtxRangePop();
            nvtxRangePop();
        }

        if (sleep_us > 0)
            usleep((useconds_t)sleep_us);

        nvtxMarkA("mark_here");
        nvtxEventAttributes_t m = ascii_attr("domain_mark");
        nvtxDomainMarkEx(domain, &m);

        if (start_end)
            nvtxRangeEnd(step_id);
        else
            nvtxRangePop();   /* step */
        if (tp_step)
            tp_step();

        for (int i = 0; i < NBYTES; i++)
            sum += host_in[i];
    }

    nvtxDomainDestroy(domain);
    cudaFree(dev);
    free(host_in);
    free(host_out);
    printf("nvtx_ranges: %d steps, checksum %lu\n", nsteps, sum);
    return failures ? 1 : 0;
}
