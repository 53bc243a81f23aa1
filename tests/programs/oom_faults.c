/*
 * oom_faults.c - failed allocations in the shapes that could hurt the
 * memory ledger (tests/preload/test_memory_owners.py).
 *
 * DESIGN
 * Modes (argv[1]):
 *   threads N   N threads wait at a barrier, then each asks cudaMalloc for
 *               1 GiB at once (made to fail with FAKE_CUDA_OOM_BYTES): one
 *               burst from several threads; each prints its status
 *   signal K    a SIGALRM handler that calls cudaMalloc and cudaFree
 *               (not async-signal-safe, but programs do it) fires every
 *               100 us while the main thread makes K pairs of its own: a
 *               handler may interrupt the ledger on its own thread
 * Steps end with trainprof_step() every 100 pairs (signal) or once
 * (threads).  stdout is the same with and without the preload.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include "prog.h"

static pthread_barrier_t start;

/* trainprof_step() when the library is there */
static void prog_step(void)
{
    void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");
    if (step)
        step();
}
static int statuses[64];

static void *asker(void *arg)
{
    int i = (int)(intptr_t)arg;
    void *p = NULL;
    pthread_barrier_wait(&start);
    statuses[i] = cudaMalloc(&p, (size_t)1 << 30);
    if (p)
        cudaFree(p);
    return NULL;
}

static volatile sig_atomic_t in_handler_allocs;

/* Zero bytes: the fake runtime answers those without malloc (which a
 * handler that interrupted malloc would deadlock in, profiler or not); the
 * wrappers and the ledger see an allocation and a free all the same. */
static void on_alarm(int sig)
{
    (void)sig;
    void *p = (void *)1;
    if (cudaMalloc(&p, 0) == cudaSuccess && cudaFree(p) == cudaSuccess)
        in_handler_allocs++;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "threads";
    long n = argc > 2 ? atol(argv[2]) : 4;
    void *warm = NULL;
    PROG_CHECK(cudaMalloc(&warm, 1 << 20));     /* activation, and 1 MiB held */
    if (strcmp(mode, "threads") == 0) {
        if (n < 1 || n > 64)
            n = 4;
        pthread_t t[64];
        pthread_barrier_init(&start, NULL, (unsigned)n);
        for (long i = 0; i < n; i++)
            pthread_create(&t[i], NULL, asker, (void *)(intptr_t)i);
        for (long i = 0; i < n; i++)
            pthread_join(t[i], NULL);
        for (long i = 0; i < n; i++)
            printf("thread %ld: %d\n", i, statuses[i]);
        prog_step();
    } else {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = { { 0, 100 }, { 0, 100 } };
        setitimer(ITIMER_REAL, &it, NULL);
        for (long i = 0; i < n; i++) {
            void *p = NULL;
            PROG_CHECK(cudaMalloc(&p, 8192));
            PROG_CHECK(cudaFree(p));
            if (i % 100 == 99)
                prog_step();
        }
        struct itimerval off = { { 0, 0 }, { 0, 0 } };
        setitimer(ITIMER_REAL, &off, NULL);
        printf("pairs %ld done\n", n);
        fprintf(stderr, "handler allocations %d\n", (int)in_handler_allocs);
    }
    PROG_CHECK(cudaFree(warm));
    return 0;
}
