/*
 * fork_child.c - a process that forks after it has started using CUDA.
 *
 * DESIGN
 * The parent launches and signals steps, then forks; the child launches and
 * signals steps of its own and exits normally (through exit(), so atexit
 * handlers run, as in a DataLoader worker that returns); the parent waits
 * for it and goes on.  A forked child must go passive: only the parent may
 * write traces.  Prints "parent PID" and "child PID" so a test can tell the
 * two apart in the trace.
 *
 * With a third argument HOW other than "fork", the child runs the program
 * PATH (the fourth argument, with no arguments) instead of launching: HOW
 * is "exec" (fork then execv), "vfork" (vfork then execv) or "spawn"
 * (posix_spawn); the parent then prints "child exit N" for it.
 *
 * Usage: fork_child [steps before fork] [steps after fork] [HOW PATH]
 *        (default 2 2 fork)
 */
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "prog.h"

static void do_steps(long n, const void *stub)
{
    for (long s = 0; s < n; s++) {
        for (int i = 0; i < 3; i++)
            PROG_CHECK(cudaLaunchKernel(stub, prog_dim3(1, 1, 1), prog_dim3(32, 1, 1), NULL, 0,
                                        0));
        PROG_CHECK(cudaDeviceSynchronize());
        tp_call_step();
    }
}

int main(int argc, char **argv)
{
    long before = argc > 1 ? atol(argv[1]) : 2;
    long after = argc > 2 ? atol(argv[2]) : 2;

    void **module = prog_register_module();
    prog_register(module, PROG_STUB(0), "_Z13parent_kernelv");
    prog_register(module, PROG_STUB(1), "_Z12child_kernelv");
    __cudaRegisterFatBinaryEnd(module);

    const char *how = argc > 3 ? argv[3] : "fork";
    char *const child_argv[] = { argc > 4 ? argv[4] : "/bin/true", NULL };

    do_steps(before, PROG_STUB(0));
    fflush(stdout);
    pid_t pid;
    if (strcmp(how, "spawn") == 0) {
        int e = posix_spawn(&pid, child_argv[0], NULL, NULL, child_argv, environ);
        if (e != 0) {
            fprintf(stderr, "posix_spawn: %s\n", strerror(e));
            return 1;
        }
    } else if (strcmp(how, "vfork") == 0) {
        pid = vfork();
        if (pid == 0) {
            execv(child_argv[0], child_argv);
            _exit(127);
        }
    } else {
        pid = fork();
        if (pid == 0 && strcmp(how, "exec") == 0) {
            execv(child_argv[0], child_argv);
            _exit(127);
        }
    }
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        do_steps(before + after + 2, PROG_STUB(1));
        printf("child %d\n", (int)getpid());
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    do_steps(after, PROG_STUB(0));
    printf("parent %d child exit %d\n", (int)getpid(),
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
