/*
 * cupti_call.c - DESIGN: the CUPTI calls made for tp-flush (load and
 * subscribe, enabling and disabling kinds, flushing, finalizing) run on a
 * thread of ours, tp-cupti, while tp-flush waits for them.
 *
 * Why: a termination or fatal signal can interrupt an application thread
 * inside CUPTI, holding CUPTI's lock (the fake's lock, held while its API
 * callback records the call that returns: train_loop --launches=50 and
 * SIGTERM, 3 of 6 runs; tests/fakes/cupti.c FAKE_CUPTI_STALL_MS makes it
 * certain).  The handler then waits for tp-flush to save, and tp-flush,
 * inside cuptiActivityFlushAll, waited for that lock: the handler's bound
 * (20 s) passed and the window was not saved.  No call into CUPTI can be
 * made safe from this: the lock is CUPTI's, and tp-flush may already be
 * waiting for it when the signal comes.  So tp-flush waits for tp-cupti
 * without bound only while no such signal is pending; once one is
 * (tp_cupti_hurry, from the handler), at most TP_CUPTI_GRACE_MS from the
 * signal.  Then CUPTI is abandoned: no call is made again (tp-cupti may
 * stay blocked until the process dies), and the window is saved with the
 * device records decoded so far; its gpu_activity says what was left out.
 *
 * Only CUPTI and driver calls, and cupti.c's state they set, run on
 * tp-cupti; the pending records (cupti_window.c) stay tp-flush's, since an
 * abandoned call may go on running while tp-flush saves.  A job's inputs
 * and results are static (never on tp-flush's stack) for the same reason.
 * The two threads hand over through two sequence words, with futex waits:
 * seq_cst atomics, so that what one wrote before its store is seen by the
 * other after its load (ThreadSanitizer sees that ordering too).
 */
#include "cupti_impl.h"

#include "collector/record/call.h"
#include "collector/common/bgthread.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* From the signal; SIGTERM's handler waits 20 s, a fault's 10 s. */
#define TP_CUPTI_GRACE_MS (TP_CUPTI_GRACE_S * 1000)
#define TP_CUPTI_SLICE_MS 20        /* tp-flush checks the grace this often */

static _Atomic uint32_t tp_job_seq;        /* bumped by tp-flush per job */
static _Atomic uint32_t tp_done_seq;       /* the last job tp-cupti finished */
static void (*tp_job_fn)(void *);
static void *tp_job_arg;
static int tp_worker;                      /* 1 running, -1 could not start (tp-flush only) */
static _Atomic int tp_abandoned;
static _Atomic int tp_exit_closed;         /* the program's exit began (tp_cupti_exit_close) */
static _Atomic int64_t tp_hurry_ns;        /* CLOCK_MONOTONIC of the signal, 0: none */

static int64_t tp_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void tp_futex_wait(_Atomic uint32_t *w, uint32_t val, int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, ms >= 0 ? &ts : NULL, NULL, 0);
}

static void tp_futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *tp_worker_main(void *arg)
{
    (void)arg;
    tp_depth = 1;       /* CUDA calls made inside CUPTI are not the program's */
    tp_bgthread_start("tp-cupti");
    uint32_t seen = atomic_load(&tp_done_seq);
    for (;;) {
        uint32_t s = atomic_load(&tp_job_seq);
        if (s == seen) {
            tp_futex_wait(&tp_job_seq, seen, -1);
            continue;
        }
        tp_job_fn(tp_job_arg);
        seen = s;
        atomic_store(&tp_done_seq, s);
        tp_futex_wake(&tp_done_seq);
    }
    return NULL;
}

/* tp-flush: start tp-cupti (signals blocked, as in tp-flush already). */
static int tp_worker_start(void)
{
    if (tp_worker)
        return tp_worker;
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    tp_worker = pthread_create(&t, NULL, tp_worker_main, NULL) == 0 ? 1 : -1;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (tp_worker > 0)
        pthread_detach(t);
    return tp_worker;
}

/* The grace after a signal has passed. */
static int tp_late(void)
{
    int64_t t = atomic_load(&tp_hurry_ns);
    return t && tp_mono_ns() - t > (int64_t)TP_CUPTI_GRACE_MS * 1000000ll;
}

int tp_cupti_call(void (*fn)(void *), void *arg)
{
    if (atomic_load(&tp_abandoned))
        return -1;
    if (tp_worker_start() < 0) {
        fn(arg);        /* no thread: on tp-flush, as before tp-cupti existed */
        return 0;
    }
    tp_job_fn = fn;
    tp_job_arg = arg;
    uint32_t s = atomic_fetch_add(&tp_job_seq, 1) + 1;
    tp_futex_wake(&tp_job_seq);
    for (;;) {
        uint32_t done = atomic_load(&tp_done_seq);
        if (done == s)
            return 0;
        if (tp_late()) {
            atomic_store(&tp_abandoned, 1);
            return -1;
        }
        tp_futex_wait(&tp_done_seq, done, TP_CUPTI_SLICE_MS);
    }
}

void tp_cupti_hurry(void)
{
    int64_t none = 0;
    atomic_compare_exchange_strong(&tp_hurry_ns, &none, tp_mono_ns());
}

int tp_cupti_hurried(void)
{
    return atomic_load(&tp_hurry_ns) != 0;
}

int tp_cupti_abandoned(void)
{
    return atomic_load(&tp_abandoned);
}

void tp_cupti_exit_close(int wait_ms)
{
    atomic_store(&tp_exit_closed, 1);
    int64_t until = tp_mono_ns() + (int64_t)wait_ms * 1000000ll;
    for (;;) {
        uint32_t done = atomic_load(&tp_done_seq);
        if (done == atomic_load(&tp_job_seq) || atomic_load(&tp_abandoned) ||
            tp_mono_ns() >= until)
            return;
        tp_futex_wait(&tp_done_seq, done, TP_CUPTI_SLICE_MS);
    }
}

int tp_cupti_exit_closed(void)
{
    return atomic_load(&tp_exit_closed);
}
