/*
 * selfsig.c - DESIGN: a program that sends itself SIGINT or SIGTERM at its
 * default disposition dies of it without running C's exit handlers, so the
 * open window would be lost.  CPython does exactly that on an uncaught
 * KeyboardInterrupt (Ctrl-C): it installs its own SIGINT handler first (so
 * ours is never installed), and at the end resets SIGINT to the default
 * and kill()s itself, so that its parent sees death by SIGINT.  kill() and
 * raise() are interposed here: aimed at this process with such a signal,
 * they save the window first (collector/control/lifecycle.c,
 * tp_lifecycle_self_signal), then send it.  Everything else passes
 * through untouched, to the system calls the C library makes (kill(2);
 * raise as glibc does it: tgkill(2) to the calling thread, all signals
 * blocked around it so that the thread id cannot change under a fork).
 */
#include "wrap.h"
#include "collector/control/lifecycle.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

static int tp_aims_here(pid_t pid)
{
    return pid == getpid() || pid == 0 || (pid < 0 && -pid == getpgrp());
}

TP_EXPORT int kill(pid_t pid, int sig)
{
    if ((sig == SIGINT || sig == SIGTERM) && tp_aims_here(pid))
        tp_lifecycle_self_signal(sig);
    return (int)syscall(SYS_kill, pid, sig);
}

TP_EXPORT int raise(int sig)
{
    if (sig == SIGINT || sig == SIGTERM)
        tp_lifecycle_self_signal(sig);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    long rc = syscall(SYS_tgkill, getpid(), gettid(), sig);
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return rc == 0 ? 0 : -1;
}
