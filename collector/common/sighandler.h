/*
 * sighandler.h - the library's rule for a signal handler of its own:
 * installed only where the program left the default disposition, and the
 * default put back before a re-raise or in a forked child.  lifecycle.c
 * (SIGTERM, SIGINT) and trigger.c (TRAINPROF_TRIGGER_SIGNAL) go through it.
 */
#ifndef TRAINPROF_COLLECTOR_SIGHANDLER_H
#define TRAINPROF_COLLECTOR_SIGHANDLER_H

/*
 * tp_sighandler_install_over_default - install "fn" for "sig" (empty mask,
 * SA_RESTART) if the disposition in place is SIG_DFL, never over a handler
 * or SIG_IGN of the program's.  Returns 1 installed, 0 not (the program
 * handles or ignores "sig", or its disposition cannot be read), -1 if
 * sigaction refused the handler.
 */
int tp_sighandler_install_over_default(int sig, void (*fn)(int));

/*
 * tp_sighandler_default - put SIG_DFL back for "sig".  Async-signal-safe:
 * a handler calls it before re-raising its signal.
 */
void tp_sighandler_default(int sig);

/* tp_sighandler_raise - raise(sig) as a system call (tgkill to this
 * thread), not through the C library's raise(), which this library
 * interposes (preload/selfsig.c) for the program's own calls. */
int tp_sighandler_raise(int sig);

/* tp_sighandler_alive - kill(pid, 0) as a system call (same reason): 1 if
 * the process exists or may (any answer but ESRCH), 0 if not. */
int tp_sighandler_alive(int pid);

#endif
