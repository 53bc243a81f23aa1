/*
 * chdir_loop.c - a program that changes its working directory between two
 * windows, as a Python job's os.chdir does (tests/preload/test_outputs_folder.py).
 *
 * DESIGN
 * The main thread launches a kernel and signals a step (trainprof_step)
 * per step; after step K it calls chdir(DIR).  With a one-step schedule
 * repeated, the windows before and after the chdir must land in the same
 * folders: relative output folders are resolved against the working
 * directory at activation, once.  Prints one line that does not depend on
 * timing.  CHDIR_LOOP_STALL_US=U sleeps U microseconds right after the
 * chdir, a step long enough for the hang doctor (TRAINPROF_HANG_S), whose
 * report must land beside the windows' reports too.
 *
 * Usage: chdir_loop STEPS K DIR
 */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "prog.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: chdir_loop STEPS K DIR\n");
        return 2;
    }
    long steps = atol(argv[1]), at = atol(argv[2]);
    void **module = prog_register_module();
    prog_register(module, PROG_STUB(0), "_Z11cwd_kernelPfi");
    __cudaRegisterFatBinaryEnd(module);
    for (long s = 0; s < steps; s++) {
        int n = (int)s;
        void *args[] = { &n };
        PROG_CHECK(cudaLaunchKernel(PROG_STUB(0), prog_dim3(1, 1, 1), prog_dim3(32, 1, 1),
                                    args, 0, 0));
        PROG_CHECK(cudaDeviceSynchronize());
        tp_call_step();
        if (s + 1 == at && chdir(argv[3]) != 0) {
            perror("chdir");
            return 1;
        }
        const char *stall = getenv("CHDIR_LOOP_STALL_US");
        if (s + 1 == at && stall) {
            long us = atol(stall);
            struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;           /* the hang doctor's signal asks for this thread's stack */
        }
    }
    printf("chdir_loop %ld steps\n", steps);
    return 0;
}
