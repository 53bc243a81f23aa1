/*
 * threads.c - many threads launching at once, for the lose-nothing test.
 *
 * DESIGN
 * N threads (default 16) each launch K kernels (default 2000) through
 * cudaLaunchKernel, each thread its own registered kernel
 * (_Z16worker_kernel_NNPfi, NN = thread index), released together by a
 * barrier so that they really run concurrently; they exit before the main
 * thread does, so their per-thread buffers must outlive them.  The main
 * thread signals steps (trainprof_step) while they run, and once more after
 * joining them.  Prints the total number of successful launches.  With a
 * third argument "alloc", each thread also allocates and frees 256 bytes
 * with cudaMalloc/cudaFree every 8 launches.
 *
 * Usage: threads [N] [K] [alloc]
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "prog.h"

#define MAX_THREADS 256

static long per_thread = 2000;
static int alloc;
static pthread_barrier_t start;
static long done_count;

static void *worker(void *arg)
{
    long t = (long)arg;
    long ok = 0;
    cudaStream_t s;
    PROG_CHECK(cudaStreamCreate(&s));
    pthread_barrier_wait(&start);
    for (long i = 0; i < per_thread; i++) {
        int n = (int)i;
        void *args[] = { &n };
        if (cudaLaunchKernel(PROG_STUB(t), prog_dim3(1 + (unsigned)(i % 7), 1, 1),
                             prog_dim3(64, 1, 1), args, 0, s) == cudaSuccess)
            ok++;
        if (alloc && i % 8 == 0) {
            void *p = NULL;
            PROG_CHECK(cudaMalloc(&p, 256));
            PROG_CHECK(cudaFree(p));
        }
    }
    PROG_CHECK(cudaStreamSynchronize(s));
    PROG_CHECK(cudaStreamDestroy(s));
    __atomic_add_fetch(&done_count, 1, __ATOMIC_RELEASE);
    return (void *)ok;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 16;
    if (argc > 2)
        per_thread = atol(argv[2]);
    alloc = argc > 3 && strcmp(argv[3], "alloc") == 0;
    if (n < 1 || n > MAX_THREADS || per_thread < 0) {
        fprintf(stderr, "usage: %s [threads 1..%d] [launches per thread]\n", argv[0],
                MAX_THREADS);
        return 64;
    }

    void **module = prog_register_module();
    /* Registered names live as long as the program, as nvcc's literals do. */
    static char names[MAX_THREADS][48];
    for (long t = 0; t < n; t++) {
        snprintf(names[t], sizeof names[t], "_Z16worker_kernel_%02ldPfi", t);
        prog_register(module, PROG_STUB(t), names[t]);
    }
    __cudaRegisterFatBinaryEnd(module);

    pthread_t th[MAX_THREADS];
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (long t = 0; t < n; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)t) != 0) {
            perror("pthread_create");
            return 1;
        }
    pthread_barrier_wait(&start);
    tp_call_step();
    long steps = 1;
    while (__atomic_load_n(&done_count, __ATOMIC_ACQUIRE) < n) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
        tp_call_step();
        steps++;
    }
    long total = 0;
    for (long t = 0; t < n; t++) {
        void *r;
        pthread_join(th[t], &r);
        total += (long)r;
    }
    tp_call_step();
    PROG_CHECK(cudaDeviceSynchronize());
    printf("threads %ld launches per thread %ld total launches %ld\n", n, per_thread, total);
    (void)steps;
    return 0;
}
