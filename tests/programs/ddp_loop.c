/*
 * ddp_loop.c - one rank of a DistributedDataParallel training job, for the
 * preload tests of the trace readers on a multi-rank run.
 *
 * DESIGN
 * Rank $RANK of $WORLD_SIZE (defaults 0 of 1) creates its communicator once
 * (ncclGetUniqueId + ncclCommInitRank, the fake NCCL needs no peers), then
 * each step does what one DDP iteration of a one-layer model does, with the
 * NVTX ranges torch's emit_nvtx writes for the operators (op ids from one
 * running counter, as RecordFunction handles; forward ops and their
 * backward nodes share a sequence number):
 *   H2D cudaMemcpy of the batch;
 *   forward   aten::linear > aten::addmm (cudaMalloc of its output, as the
 *             caching allocator does inside the operator that asks, then
 *             cublasSgemm_v2), aten::relu (cudaMalloc of its output, one
 *             kernel) and aten::mse_loss (one kernel) on the compute stream;
 *   backward  MseLossBackward0 > aten::mse_loss_backward, ReluBackward0 >
 *             aten::threshold_backward, AddmmBackward0 > aten::mm
 *             (cublasSgemm_v2); then, as DDP's reducer does when the
 *             gradient bucket is ready, cudaEventRecord on the compute
 *             stream, cudaStreamWaitEvent of the comm stream and
 *             ncclAllReduce of the gradients on the comm stream, while the
 *             compute stream goes on with AccumulateGrad > aten::add_;
 *             the compute stream then waits for the comm stream's event;
 *   optimizer Optimizer.step#SGD.step > aten::_foreach_add_ (one kernel);
 *   cudaStreamSynchronize, cudaFree of the activations, a D2H cudaMemcpy
 *   (the batch back, standing in for loss.item(): the fake kernels compute
 *   nothing), a checksum on the host of what came back, then the step
 *   signal.
 * stdout is a pure function of the options, with or without the library.
 *
 * Options (argv, or the environment variable in brackets):
 *   --steps=N      steps to run (DDP_STEPS, default 6)
 *   --sleep-us=U   sleep at the end of every step (DDP_SLEEP_US, default 0)
 *   --warmup-us=U  sleep at the end of step 0 only (DDP_WARMUP_US, default
 *                  0): under the default schedule step 0 is the warmup
 *                  step, and tp-flush enables CUPTI during it, off the
 *                  training thread; the recorded steps stay short
 *   --mode=M       step signal (DDP_MODE, default api): api (trainprof_step()
 *                  via dlsym after each step) or nvtx (a "step" range)
 *   --rendezvous=D after ncclCommInitRank, create D/rank.$RANK and wait
 *                  until all ranks' files are there (DDP_RENDEZVOUS): the
 *                  real ncclCommInitRank returns only once every rank has
 *                  joined, the fake one at once, so ranks started together
 *                  begin their steps together, as in a real job
 *   --slow-rank=R  rank R sleeps --slow-us more at the end of every step
 *   --slow-us=U    (DDP_SLOW_RANK, default -1: none; DDP_SLOW_US, default
 *                  0): a straggler for `trainprof summary` to find
 *   --stall-rank=R  rank R never makes its --stall-at=K-th ncclAllReduce
 *   --stall-at=K    (1 for the first; DDP_STALL_RANK, default -1: none;
 *                  DDP_STALL_AT, default 1): it sleeps there until killed,
 *                  a hung rank for the hang doctor (with FAKE_NCCL_MEET the
 *                  others then wait inside that all-reduce)
 *   RANK, WORLD_SIZE  this process's rank and the job's size (else
 *                  SLURM_PROCID, SLURM_NTASKS, as srun sets them)
 */
#include <fcntl.h>
#include <getopt.h>
#include <nccl.h>
#include <cublas_api.h>

#include <nvtx3/nvToolsExt.h>

#include "prog.h"

enum { K_RELU, K_MSE, K_MSE_BWD, K_RELU_BWD, K_ADD, K_SGD, K_COUNT };

static const char *const kernel_names[K_COUNT] = {
    "_ZN2at6native4reluEPfi",
    "_ZN2at6native8mse_lossEPfi",
    "_ZN2at6native17mse_loss_backwardEPfi",
    "_ZN2at6native18threshold_backwardEPfi",
    "_ZN2at6native7add_outEPfi",
    "_ZN2at6native12sgd_foreach_EPfi",
};

#define BATCH 64
#define FEAT 256
#define N_IN (BATCH * FEAT)         /* floats in a batch and in an activation */
#define N_PARAM (FEAT * FEAT + FEAT) /* weight and bias: what DDP all-reduces */

#define NCCL_CHECK(call)                                                              \
    do {                                                                              \
        ncclResult_t r_ = (call);                                                     \
        if (r_ != ncclSuccess) {                                                      \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,      \
                    ncclGetErrorString(r_));                                          \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define BLAS_CHECK(call)                                                              \
    do {                                                                              \
        cublasStatus_t s_ = (call);                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call,      \
                    (int)s_);                                                         \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static long op_id = 1;              /* RecordFunction handles of the process */

/* op_push - an NVTX range as torch's getNvtxStr writes it: NAME[, seq = S],
 * op_id = N[, sizes = SIZES] (seq < 0 or sizes NULL: the field is left out). */
static void op_push(const char *name, long seq, const char *sizes)
{
    char msg[256];
    int n = snprintf(msg, sizeof msg, "%s", name);
    if (seq >= 0)
        n += snprintf(msg + n, sizeof msg - (size_t)n, ", seq = %ld", seq);
    n += snprintf(msg + n, sizeof msg - (size_t)n, ", op_id = %ld", op_id++);
    if (sizes)
        snprintf(msg + n, sizeof msg - (size_t)n, ", sizes = %s", sizes);
    nvtxRangePushA(msg);
}

/* rendezvous - announce this rank in "dir", wait for all "world" ranks
 * (polling every 50 us, at most 60 s). */
static void rendezvous(const char *dir, long rank, long world)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank.%ld", dir, rank);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    close(fd);
    uint64_t deadline = prog_now_ns() + 60ull * 1000000000ull;
    for (long r = 0; r < world; r++) {
        snprintf(path, sizeof path, "%s/rank.%ld", dir, r);
        while (access(path, F_OK) != 0) {
            if (prog_now_ns() > deadline) {
                fprintf(stderr, "ddp_loop: rank %ld: no rank %ld in %s after 60 s\n", rank, r,
                        dir);
                exit(1);
            }
            struct timespec ts = { 0, 50000 };
            nanosleep(&ts, NULL);
        }
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

static void launch(int k, void **args, cudaStream_t s)
{
    PROG_CHECK(cudaLaunchKernel(PROG_STUB(k), prog_dim3(BATCH, 1, 1), prog_dim3(FEAT, 1, 1),
                                args, 0, s));
}

static void gemm(cublasHandle_t h, const float *a, const float *b, float *c)
{
    static const float one = 1.0f, zero = 0.0f;
    BLAS_CHECK(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, FEAT, BATCH, FEAT, &one, a, FEAT, b,
                              FEAT, &zero, c, FEAT));
}

int main(int argc, char **argv)
{
    long steps = prog_env_long("DDP_STEPS", 6);
    long sleep_us = prog_env_long("DDP_SLEEP_US", 0);
    long warmup_us = prog_env_long("DDP_WARMUP_US", 0);
    long rank = prog_env_long("RANK", prog_env_long("SLURM_PROCID", 0));
    long world = prog_env_long("WORLD_SIZE", prog_env_long("SLURM_NTASKS", 1));
    long slow_rank = prog_env_long("DDP_SLOW_RANK", -1);
    long slow_us = prog_env_long("DDP_SLOW_US", 0);
    const char *mode = getenv("DDP_MODE") ? getenv("DDP_MODE") : "api";
    const char *meet = getenv("DDP_RENDEZVOUS");
    long stall_rank = prog_env_long("DDP_STALL_RANK", -1);
    long stall_at = prog_env_long("DDP_STALL_AT", 1);

    static const struct option opts[] = {
        { "steps", required_argument, 0, 's' },
        { "sleep-us", required_argument, 0, 'u' },
        { "warmup-us", required_argument, 0, 'w' },
        { "mode", required_argument, 0, 'm' },
        { "rendezvous", required_argument, 0, 'r' },
        { "slow-rank", required_argument, 0, 'R' },
        { "slow-us", required_argument, 0, 'U' },
        { "stall-rank", required_argument, 0, 'S' },
        { "stall-at", required_argument, 0, 'A' },
        { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': steps = atol(optarg); break;
        case 'u': sleep_us = atol(optarg); break;
        case 'w': warmup_us = atol(optarg); break;
        case 'm': mode = optarg; break;
        case 'r': meet = optarg; break;
        case 'R': slow_rank = atol(optarg); break;
        case 'U': slow_us = atol(optarg); break;
        case 'S': stall_rank = atol(optarg); break;
        case 'A': stall_at = atol(optarg); break;
        default:
            fprintf(stderr, "usage: %s [--steps=N] [--sleep-us=U] [--warmup-us=U] "
                    "[--mode=api|nvtx] [--rendezvous=DIR] [--slow-rank=R --slow-us=U] "
                    "[--stall-rank=R --stall-at=K]\n", argv[0]);
            return 64;
        }
    }
    int use_nvtx = !strcmp(mode, "nvtx");
    if (!use_nvtx && strcmp(mode, "api")) {
        fprintf(stderr, "bad mode %s\n", mode);
        return 64;
    }
    if (world < 1 || rank < 0 || rank >= world) {
        fprintf(stderr, "bad RANK=%ld WORLD_SIZE=%ld\n", rank, world);
        return 64;
    }

    void **module = prog_register_module();
    for (int k = 0; k < K_COUNT; k++)
        prog_register(module, PROG_STUB(k), kernel_names[k]);
    __cudaRegisterFatBinaryEnd(module);

    ncclUniqueId id;
    ncclComm_t comm;
    NCCL_CHECK(ncclGetUniqueId(&id));
    NCCL_CHECK(ncclCommInitRank(&comm, (int)world, id, (int)rank));
    if (meet && *meet)
        rendezvous(meet, rank, world);

    cudaStream_t compute, comm_stream;
    cudaEvent_t grads_ready, reduced;
    cublasHandle_t blas;
    PROG_CHECK(cudaStreamCreate(&compute));
    PROG_CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
    PROG_CHECK(cudaEventCreateWithFlags(&grads_ready, cudaEventDisableTiming));
    PROG_CHECK(cudaEventCreateWithFlags(&reduced, cudaEventDisableTiming));
    BLAS_CHECK(cublasCreate_v2(&blas));
    BLAS_CHECK(cublasSetStream_v2(blas, compute));

    float *host = malloc(N_IN * sizeof(float));
    float *back = malloc(N_IN * sizeof(float));
    float *d_x = NULL, *d_w = NULL, *d_grad = NULL;
    PROG_CHECK(cudaMalloc((void **)&d_x, N_IN * sizeof(float)));
    PROG_CHECK(cudaMalloc((void **)&d_w, N_PARAM * sizeof(float)));
    PROG_CHECK(cudaMalloc((void **)&d_grad, N_PARAM * sizeof(float)));
    PROG_CHECK(cudaMemset(d_w, 0, N_PARAM * sizeof(float)));

    uint32_t total = 2166136261u;
    long seq = 0;
    for (long s = 0; s < steps; s++) {
        if (use_nvtx)
            nvtxRangePushA("step");
        for (int i = 0; i < N_IN; i++)
            host[i] = (float)((s * 31 + rank * 7 + i) % 97) * 0.5f;
        PROG_CHECK(cudaMemcpy(d_x, host, N_IN * sizeof(float), cudaMemcpyHostToDevice));

        float *act = NULL, *act2 = NULL;
        int n = N_IN;
        void *args[] = { &act, &n };

        /* forward */
        op_push("aten::linear", seq, NULL);
        op_push("aten::addmm", seq, "[[256], [64, 256], [256, 256]]");
        PROG_CHECK(cudaMalloc((void **)&act, N_IN * sizeof(float)));
        gemm(blas, d_w, d_x, act);
        nvtxRangePop();
        nvtxRangePop();
        op_push("aten::relu", seq + 1, "[[64, 256]]");
        PROG_CHECK(cudaMalloc((void **)&act2, N_IN * sizeof(float)));
        launch(K_RELU, args, compute);
        nvtxRangePop();
        op_push("aten::mse_loss", seq + 2, "[[64, 256], [64, 256]]");
        launch(K_MSE, args, compute);
        nvtxRangePop();

        /* backward: autograd nodes with their forward op's sequence number */
        op_push("MseLossBackward0", seq + 2, NULL);
        op_push("aten::mse_loss_backward", -1, "[[], [64, 256], [64, 256]]");
        launch(K_MSE_BWD, args, compute);
        nvtxRangePop();
        nvtxRangePop();
        op_push("ReluBackward0", seq + 1, NULL);
        op_push("aten::threshold_backward", -1, "[[64, 256], [64, 256], []]");
        launch(K_RELU_BWD, args, compute);
        nvtxRangePop();
        nvtxRangePop();
        op_push("AddmmBackward0", seq, NULL);
        op_push("aten::mm", -1, "[[256, 64], [64, 256]]");
        gemm(blas, act2, d_x, d_grad);
        nvtxRangePop();
        nvtxRangePop();

        /* the bucket is ready: DDP's all-reduce on its own stream */
        PROG_CHECK(cudaEventRecord(grads_ready, compute));
        PROG_CHECK(cudaStreamWaitEvent(comm_stream, grads_ready, 0));
        if (rank == stall_rank && s + 1 == stall_at)
            for (;;)
                sleep(1);       /* never arrives at all-reduce #stall_at */
        NCCL_CHECK(ncclAllReduce(d_grad, d_grad, N_PARAM, ncclFloat32, ncclSum, comm,
                                 comm_stream));
        PROG_CHECK(cudaEventRecord(reduced, comm_stream));
        op_push("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", -1,
                NULL);
        op_push("aten::add_", -1, "[[256, 256], [256, 256], []]");
        launch(K_ADD, args, compute);
        nvtxRangePop();
        nvtxRangePop();
        PROG_CHECK(cudaStreamWaitEvent(compute, reduced, 0));

        /* optimizer */
        op_push("Optimizer.step#SGD.step", -1, NULL);
        op_push("aten::_foreach_add_", -1, "[[], []]");
        launch(K_SGD, args, compute);
        nvtxRangePop();
        nvtxRangePop();

        PROG_CHECK(cudaStreamSynchronize(compute));
        PROG_CHECK(cudaFree(act2));
        PROG_CHECK(cudaFree(act));
        PROG_CHECK(cudaMemcpy(back, d_x, N_IN * sizeof(float), cudaMemcpyDeviceToHost));
        uint32_t sum = fnv1a(back, N_IN * sizeof(float), 2166136261u);
        total = fnv1a(&sum, sizeof(sum), total);
        printf("rank %ld/%ld step %ld checksum %08x\n", rank, world, s, sum);
        fflush(stdout);
        seq += 3;

        long us = sleep_us + (s == 0 ? warmup_us : 0) + (rank == slow_rank ? slow_us : 0);
        if (us > 0) {
            struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
            nanosleep(&ts, NULL);
        }
        if (use_nvtx)
            nvtxRangePop();
        else
            tp_call_step();
    }

    BLAS_CHECK(cublasDestroy_v2(blas));
    NCCL_CHECK(ncclCommDestroy(comm));
    PROG_CHECK(cudaEventDestroy(reduced));
    PROG_CHECK(cudaEventDestroy(grads_ready));
    PROG_CHECK(cudaStreamDestroy(comm_stream));
    PROG_CHECK(cudaStreamDestroy(compute));
    PROG_CHECK(cudaFree(d_grad));
    PROG_CHECK(cudaFree(d_w));
    PROG_CHECK(cudaFree(d_x));
    free(host);
    free(back);
    printf("rank %ld/%ld steps %ld checksum %08x\n", rank, world, steps, total);
    return 0;
}
