/*
 * setenv_loop.c - a program thread that changes the environment while
 * windows are saved (the exec handler must not read environ on tp-flush
 * while setenv reallocates it).
 *
 * DESIGN
 * One thread calls setenv and unsetenv in a loop on 64 variables of its
 * own (SETENV_LOOP_0..63), so that glibc grows and shrinks environ again
 * and again, as a Python host's os.environ does; the main thread launches
 * a kernel and signals a step (trainprof_step) every 10 ms, so that
 * with a one-step schedule every step is a window that is saved and runs
 * TRAINPROF_EXEC.  After the last step the thread is stopped and joined.
 * Prints one line that does not depend on timing.
 *
 * Usage: setenv_loop [steps]   (default 40)
 */
#include <pthread.h>
#include <time.h>

#include "prog.h"

static int stop;

static void *churn(void *arg)
{
    (void)arg;
    char name[32];
    for (unsigned long i = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); i++) {
        snprintf(name, sizeof name, "SETENV_LOOP_%lu", i % 64);
        if ((i / 64) % 2 == 0)
            setenv(name, "a value long enough to need memory of its own", 1);
        else
            unsetenv(name);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 40;
    void **module = prog_register_module();
    prog_register(module, PROG_STUB(0), "_Z11env_kernelPfi");
    __cudaRegisterFatBinaryEnd(module);

    pthread_t th;
    if (pthread_create(&th, NULL, churn, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    for (long s = 0; s < steps; s++) {
        int n = (int)s;
        void *args[] = { &n };
        PROG_CHECK(cudaLaunchKernel(PROG_STUB(0), prog_dim3(1, 1, 1), prog_dim3(32, 1, 1),
                                    args, 0, 0));
        PROG_CHECK(cudaDeviceSynchronize());
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        tp_call_step();
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    printf("setenv_loop %ld steps\n", steps);
    return 0;
}
