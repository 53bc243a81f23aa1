/*
 * close_fds.c - a program that closes every descriptor above stderr after
 * the library activated, as daemonizing code, some launchers and test
 * harnesses do, then works with files of its own.
 *
 * DESIGN
 * A library that keeps a descriptor open across such a close, and goes on
 * using its number, reads and writes whatever the program opens next at
 * that number.  The program's files are plain, so a test can compare their
 * bytes exactly; its CPU time while idle shows a helper thread that spins
 * on a closed descriptor.
 *
 * Usage: close_fds files [DIR]  or  close_fds count
 *   files  activate (cudaMalloc, a launch, step 0), idle IDLE_MS, close
 *          descriptors 3 and up (close_range(3, ~0U, 0), or close() of each
 *          up to the limit when CLOSE_LOOP=1), open DIR at once if given
 *          (O_RDONLY | O_DIRECTORY, kept open: it gets the lowest number),
 *          idle IDLE_MS (with nothing else open), then open in.txt (read)
 *          and out.txt (write, created), run STEPS steps (a launch, a sync and
 *          STEP_MS of sleep, then trainprof_step), idle IDLE_MS, and copy
 *          what it reads from in.txt into out.txt.  Prints
 *          "fds dir D in I out O copied N idle_cpu_ms A B C": A, B, C the
 *          process's CPU time over each idle.
 *   count  activate (as above), idle IDLE_MS (the library opens what it
 *          keeps open), then open /dev/null until an open fails,
 *          print "opened N errno E" (under a low RLIMIT_NOFILE: the
 *          descriptors left to the program) and close them again.
 * Environment: IDLE_MS (default 1000), STEPS (8), STEP_MS (20), CLOSE_LOOP.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "prog.h"

static void **module;
static float *dev;

static long cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000L +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000L;
}

/* CPU milliseconds the process used while this thread slept "ms". */
static long idle(long ms)
{
    long c0 = cpu_ms();
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    return cpu_ms() - c0;
}

static void step(long sleep_ms)
{
    int n = 16;
    void *args[] = { &dev, &n };
    PROG_CHECK(cudaLaunchKernel(PROG_STUB(0), prog_dim3(1, 1, 1), prog_dim3(32, 1, 1), args, 0,
                                NULL));
    PROG_CHECK(cudaDeviceSynchronize());
    if (sleep_ms > 0) {
        struct timespec ts = { sleep_ms / 1000, (sleep_ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    tp_call_step();
}

static void activate(void)
{
    module = prog_register_module();
    prog_register(module, PROG_STUB(0), "_Z6scaleiPf");
    __cudaRegisterFatBinaryEnd(module);
    PROG_CHECK(cudaMalloc((void **)&dev, 64 * sizeof(float)));
    step(0);
}

static void close_all(void)
{
    if (getenv("CLOSE_LOOP")) {
        struct rlimit rl;
        long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                       ? (long)rl.rlim_cur : 65536;
        for (long fd = 3; fd < max; fd++)
            close((int)fd);
    } else if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
        perror("close_range");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    long idle_ms = prog_env_long("IDLE_MS", 1000);
    long steps = prog_env_long("STEPS", 8);
    long step_ms = prog_env_long("STEP_MS", 20);
    if (argc < 2 || (strcmp(argv[1], "files") && strcmp(argv[1], "count"))) {
        fprintf(stderr, "usage: %s files [DIR] | count\n", argv[0]);
        return 64;
    }
    activate();
    if (!strcmp(argv[1], "count")) {
        idle(idle_ms);
        int n = 0, e = 0, fds[4096];
        for (; n < 4096; n++) {
            if ((fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
                e = errno;
                break;
            }
        }
        printf("opened %d errno %d\n", n, e);
        while (n > 0)
            close(fds[--n]);
        PROG_CHECK(cudaFree(dev));
        return 0;
    }

    long cpu0 = idle(idle_ms);
    close_all();
    int fd_dir = -1;
    if (argc > 2 && (fd_dir = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        perror(argv[2]);
        return 1;
    }
    long cpu1 = idle(idle_ms);
    int in = open("in.txt", O_RDONLY | O_CLOEXEC);
    int out = open("out.txt", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (in < 0 || out < 0) {
        perror("in.txt/out.txt");
        return 1;
    }
    for (long s = 0; s < steps; s++)
        step(step_ms);
    long cpu2 = idle(idle_ms);
    char buf[4096];
    long copied = 0;
    ssize_t r;
    while ((r = read(in, buf, sizeof buf)) > 0) {
        if (write(out, buf, (size_t)r) != r) {
            perror("out.txt");
            return 1;
        }
        copied += r;
    }
    close(in);
    if (close(out) != 0) {
        perror("out.txt");
        return 1;
    }
    printf("fds dir %d in %d out %d copied %ld idle_cpu_ms %ld %ld %ld\n", fd_dir, in, out, copied,
           cpu0, cpu1, cpu2);
    PROG_CHECK(cudaFree(dev));
    return 0;
}
