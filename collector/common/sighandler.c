/*
 * sighandler.c - DESIGN: a handler of ours must never take a signal from
 * the program.  SIGTERM/SIGINT (lifecycle.c) and the trigger signal
 * (trigger.c) are installed only over the default disposition: a program
 * that handles or ignores the signal keeps its own, and a handler with
 * SA_SIGINFO counts as its own whatever its address (sa_handler and
 * sa_sigaction share storage).  Both handlers end the same way where they
 * do not keep the signal (a termination, a child that missed the atfork
 * handler): the default back, then a re-raise.  The fatal signals are
 * lifecycle.c's own affair: they are chained over the program's handlers.
 */
#include "sighandler.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int tp_sighandler_install_over_default(int sig, void (*fn)(int))
{
    struct sigaction old;
    if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(sig, &sa, NULL) == 0 ? 1 : -1;
}

void tp_sighandler_default(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
}

int tp_sighandler_raise(int sig)
{
    return syscall(SYS_tgkill, getpid(), gettid(), sig) == 0 ? 0 : -1;
}

int tp_sighandler_alive(int pid)
{
    return syscall(SYS_kill, (pid_t)pid, 0) == 0 || errno != ESRCH;
}
