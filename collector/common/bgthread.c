/*
 * bgthread.c - DESIGN: the library's threads (tp-flush, tp-sys, tp-cupti)
 * never preempt the program's threads when they wake up.
 *
 * A save wakes tp-flush from the training thread's trainprof_step().  A
 * thread woken after a long sleep has the smallest virtual runtime on its
 * CPU, so Linux's fair scheduler lets it preempt the thread that woke it:
 * on a busy machine the training thread then waited milliseconds inside
 * trainprof_step() for a CPU (scripts/dev/bench-stalls: the first save of
 * a run, one involuntary context switch, 1-8 ms of wall time for 20 us of
 * CPU).  SCHED_BATCH is the fair scheduler's policy for threads that are
 * not interactive: the same share of the CPU and the same nice value, but
 * a woken batch thread does not preempt the running one; it runs at the
 * next tick or on another CPU.  Setting it needs no privilege
 * (sched_setscheduler(2): SCHED_OTHER and SCHED_BATCH are open to any
 * thread).  The library's threads only write files and sample /proc:
 * nothing of theirs is latency-critical to a millisecond.
 */
#include "bgthread.h"

#include <sched.h>
#include <sys/prctl.h>

void tp_bgthread_start(const char *name)
{
    prctl(PR_SET_NAME, name, 0, 0, 0);
    struct sched_param sp = { 0 };
    sched_setscheduler(0, SCHED_BATCH, &sp);    /* 0: this thread (Linux: a tid) */
}
