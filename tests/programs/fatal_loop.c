/*
 * fatal_loop.c - a training loop that dies of a fatal signal, for the tests
 * of the fatal-signal handling (tests/preload/test_fatal.py).
 *
 * DESIGN
 * Usage: fatal_loop STEPS K:HOW [HANDLER]
 * Each step: an H2D copy, L launches (FATAL_LAUNCHES, default 3), a stream
 * synchronization, "step N" on
 * stdout, then trainprof_step().  In step K, after its launches and before
 * its step signal, the program faults as HOW says, with a real fault where
 * there is one:
 *   segv   a write through a null pointer               (SIGSEGV)
 *   bus    a read of a page of a file truncated under it (SIGBUS)
 *   fpe    an integer division by zero                   (SIGFPE)
 *   ill    an illegal instruction, __builtin_trap        (SIGILL)
 *   abrt   abort()                                       (SIGABRT)
 *   stack  unbounded recursion on the main thread        (SIGSEGV)
 *   raise  raise(SIGSEGV): sent, not a fault             (SIGSEGV)
 * HANDLER installs a handler of the program's for the five signals before
 * the first CUDA call: ACTION[,plain][,resethand].  It writes
 * "fatal_loop: handler SIGNAME" to stderr with write(2), then, when ACTION
 * is a number, calls _exit(ACTION); when it is "return", returns; when it
 * is "fault", faults again inside the handler (a write through a null
 * pointer, the signal blocked there: the kernel then ends the process with
 * it).  "plain"
 * installs it as sa_handler (else sa_sigaction with SA_SIGINFO, which also
 * checks that si_signo reaches it); "resethand" adds SA_RESETHAND.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>

#include "prog.h"

static int handler_status = -1;    /* -1: return; -2: fault again */

static void say(int sig, const char *how)
{
    const char *name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" :
                       sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" :
                       sig == SIGABRT ? "SIGABRT" : "other";
    char line[80] = "fatal_loop: handler ";
    strcat(line, name);
    strcat(line, how);
    strcat(line, "\n");
    ssize_t w = write(2, line, strlen(line));
    (void)w;
    if (handler_status >= 0)
        _exit(handler_status);
    if (handler_status == -2)
        *(volatile int *)(uintptr_t)0 = 1;
}

static void plain_handler(int sig)
{
    say(sig, "");
}

static void info_handler(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    say(sig, si && si->si_signo == sig ? " (siginfo)" : " (bad siginfo)");
}

static void install(const char *spec)
{
    handler_status = strncmp(spec, "return", 6) == 0 ? -1 :
                     strncmp(spec, "fault", 5) == 0 ? -2 : atoi(spec);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (strstr(spec, ",plain")) {
        sa.sa_handler = plain_handler;
    } else {
        sa.sa_sigaction = info_handler;
        sa.sa_flags = SA_SIGINFO;
    }
    if (strstr(spec, ",resethand"))
        sa.sa_flags |= SA_RESETHAND;
    static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

static volatile int zero, seven = 7;   /* volatile: real loads, a real idiv */
static volatile long depth_limit = -1;     /* never reached: unbounded */

static long __attribute__((noinline)) recurse(long depth)
{
    volatile char frame[1024];
    frame[0] = (char)depth;
    if (depth == depth_limit)
        return frame[0];
    return recurse(depth + 1) + frame[0];
}

static void fault(const char *how)
{
    if (!strcmp(how, "segv")) {
        *(volatile int *)(uintptr_t)zero = 1;
    } else if (!strcmp(how, "bus")) {
        char path[] = "fatal_loop_bus_XXXXXX";
        int fd = mkstemp(path);
        long page = sysconf(_SC_PAGESIZE);
        if (fd < 0 || ftruncate(fd, page) != 0)
            return;
        volatile char *p = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
        unlink(path);
        if (p == MAP_FAILED || ftruncate(fd, 0) != 0)
            return;
        zero = p[0];
    } else if (!strcmp(how, "fpe")) {
        zero = seven / zero;
    } else if (!strcmp(how, "ill")) {
        __builtin_trap();
    } else if (!strcmp(how, "abrt")) {
        abort();
    } else if (!strcmp(how, "stack")) {
        zero = (int)recurse(0);
    } else if (!strcmp(how, "raise")) {
        raise(SIGSEGV);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3 || !strchr(argv[2], ':')) {
        fprintf(stderr, "usage: %s STEPS K:segv|bus|fpe|ill|abrt|stack|raise [STATUS|return[,plain][,resethand]]\n",
                argv[0]);
        return 64;
    }
    long steps = atol(argv[1]), crash_at = atol(argv[2]);
    const char *how = strchr(argv[2], ':') + 1;
    long launches = prog_env_long("FATAL_LAUNCHES", 3);
    if (argc > 3)
        install(argv[3]);

    void **module = prog_register_module();
    prog_register(module, PROG_STUB(0), "_Z6kernelPfi");
    __cudaRegisterFatBinaryEnd(module);
    float host[256] = { 0 };
    float *dev = NULL;
    PROG_CHECK(cudaMalloc((void **)&dev, sizeof host));
    int n = 256;
    void *args[] = { &dev, &n };
    for (long s = 0; s < steps; s++) {
        PROG_CHECK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
        for (long l = 0; l < launches; l++)
            PROG_CHECK(cudaLaunchKernel(PROG_STUB(0), prog_dim3(4, 1, 1), prog_dim3(64, 1, 1),
                                        args, 0, 0));
        PROG_CHECK(cudaStreamSynchronize(0));
        printf("step %ld\n", s);
        fflush(stdout);
        if (s == crash_at)
            fault(how);
        tp_call_step();
    }
    PROG_CHECK(cudaFree(dev));
    return 0;
}
