/*
 * flusher.c - DESIGN: the flush thread, tp-flush.  Closing a window costs
 * the training thread one queue insert and one wake-up of tp-flush;
 * everything else happens here: waiting for the window's device
 * records (tp_device_wait), draining and handing it to the handlers (window.c),
 * running the modules' follow hooks (the host sampler, CUPTI) as the
 * schedule asks, and the output side's idle work.
 *
 * Loads: CUPTI is loaded here, by dlopen.  Once exit has begun no load may
 * start: from _dl_fini on, a dlopen runs the initialisers of objects already
 * finalised again (preload/dlsym.c).  tp_flusher_exit_begin sets exiting
 * under the load lock, so a load under way finishes first and none starts
 * after.
 *
 * Wake-ups: a futex word, not a descriptor.  tp-flush sleeps in
 * FUTEX_WAIT on it (the timeout is relative, CLOCK_MONOTONIC: a step of the
 * wall clock changes no tick) and a waker sets it and calls FUTEX_WAKE, a
 * system call and so async-signal-safe.  It was a pipe: a program that
 * closes its descriptors (close_range(3, ~0U, 0), as daemonizing code and
 * some launchers do) and then opens files gets the pipe's numbers, and
 * tp-flush read its input file and wrote wake bytes into its output file
 * (tests/programs/close_fds: of in.txt's 13 bytes the program read 0, and
 * out.txt held 2 wake bytes), and spun on the closed or reused descriptor
 * (650-690 ms of CPU per second of the program's sleep); at RLIMIT_NOFILE
 * 6 it took 2 of the program's 3 descriptors (test_descriptors.py).  A
 * memory word can be neither closed nor reused.
 *
 * Termination and fatal signals: the handler (lifecycle.c) records the
 * signal (the first one wins), wakes this thread (tp_wake: one atomic
 * exchange and at most one futex system call) and sleeps in steps of 10 ms
 * until this thread has closed the open window (through the steps' term
 * hook) and written it, or the bound has passed (then it gives up, and so
 * do later handlers: the interrupted thread may hold a lock this thread
 * needs).  The locks the interrupted code may hold are not waited on
 * without bound: the step lock (steps.c, 200 ms), CUPTI's (the calls run
 * on tp-cupti, abandoned 2 s after the signal: cupti_call.c; the window is
 * then saved with the device records decoded so far) and the completed
 * buffers' (cupti_buffers.c, 100 ms).  A handler running
 * on this thread itself (an abort() here) must not wait: tp_flusher_is_self.
 *
 * Warmup and windows must not begin before CUPTI is on: the kinds are
 * turned on here, and a step shorter than tp-flush's reaction (a loaded
 * machine, or no warmup at all) left the first calls of the window
 * without CUPTI records (unlinked launches, coverage below 1: the
 * "linking miss" test_cupti.py reproduces).  The step that turns the schedule on waits, bounded,
 * until this thread has followed it (tp_flusher_await_on); once followed,
 * the check is two atomic loads.
 *
 * The flight recorder's oldest steps are given back here, never on the
 * training thread: the steps publish the start of the oldest step kept
 * (tp_flusher_flight_trim, one wake-up when it moved) and tp-flush trims
 * after writing what was queued, so a dump queued before the trim still
 * holds its steps (window.c trims it to its own first step).
 *
 * This file knows nothing of steps: the steps call down into it, and it
 * reaches them only through the hooks given at start.
 */
#include "flusher.h"
#include "window.h"
#include "collector/record/buffer.h"
#include "collector/common/bgthread.h"
#include "collector/record/call.h"
#include "collector/common/clock.h"
#include "collector/device/cupti.h"
#include "collector/common/log.h"
#include "collector/modules/module.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define TP_QUEUE 16

static struct tp_flusher_hooks tp_hooks;
static pthread_mutex_t tp_q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tp_q_done = PTHREAD_COND_INITIALIZER;
static struct tp_handoff tp_queue[TP_QUEUE];
static unsigned tp_q_head, tp_q_tail;      /* tail - head = pending */
static int tp_q_busy;                      /* a window is being written */
static _Atomic uint32_t tp_wake_word;     /* 1: a wake-up is pending */
static pthread_t tp_flusher;
static _Atomic pid_t tp_flusher_started;    /* the process that started tp-flush */

static _Atomic int tp_sched_on = -1;       /* the current step warms up or records */
static _Atomic uint64_t tp_on_asked;       /* times tp_sched_on turned on */
static _Atomic uint64_t tp_on_followed;    /* of those, followed by tp-flush (set under tp_q_lock) */
static pthread_cond_t tp_f_done = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t tp_steps_done;
static _Atomic int tp_final;               /* no window will open again, no capture open */

static _Atomic int tp_exiting;
static pthread_mutex_t tp_load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Shared by a signal handler and tp-flush: lock-free atomics (the handler
 * runs on another thread; volatile alone orders nothing between threads,
 * and ThreadSanitizer reported the handler's read of tp_term_saved racing
 * with tp-flush's write). */
static volatile sig_atomic_t tp_term_pending;   /* the signal number, first one wins */
static volatile sig_atomic_t tp_term_saved;
static volatile sig_atomic_t tp_term_given_up;
static volatile pid_t tp_flush_tid;             /* tp-flush's thread id */
#define TP_LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define TP_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)
static _Atomic int tp_tick_ms = 1000;           /* longest sleep between wake-ups */
static pthread_mutex_t tp_trim_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tp_trim_tick, tp_trim_done;     /* under tp_trim_lock */
static uint8_t tp_trim_gen;

/* Async-signal-safe: an atomic exchange, then FUTEX_WAKE only when no
 * wake-up was pending already (the sleeper then has one to take). */
static void tp_wake(void)
{
    if (atomic_exchange(&tp_wake_word, 1) == 0)
        syscall(SYS_futex, &tp_wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* tp-flush: sleep until woken or "ms" have passed, and take the wake-up
 * (the exchange orders what the waker wrote before tp_wake before what
 * follows here). */
static void tp_sleep(int ms)
{
    if (atomic_exchange(&tp_wake_word, 0))
        return;
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    syscall(SYS_futex, &tp_wake_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    atomic_exchange(&tp_wake_word, 0);
}

void tp_flusher_wake(void)
{
    tp_wake();
}

void tp_flusher_tick(int ms)
{
    if (ms > 0 && ms < atomic_load(&tp_tick_ms))
        atomic_store(&tp_tick_ms, ms);
}

int tp_flusher_queue(const struct tp_handoff *w)
{
    int rc = -1;
    pthread_mutex_lock(&tp_q_lock);
    if (tp_q_tail - tp_q_head < TP_QUEUE) {
        tp_queue[tp_q_tail++ % TP_QUEUE] = *w;
        rc = 0;
    }
    pthread_mutex_unlock(&tp_q_lock);
    tp_wake();
    return rc;
}

void tp_flusher_schedule(int on)
{
    if (atomic_exchange(&tp_sched_on, on) != on) {
        if (on > 0)
            atomic_fetch_add(&tp_on_asked, 1);
        tp_wake();      /* tp-flush, not this thread, starts or stops CUPTI and the sampler */
    }
}

/* CLOCK_REALTIME "ms" from now, for pthread_cond_timedwait. */
static struct timespec tp_deadline(int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    return dl;
}

int tp_flusher_await_on(int ms)
{
    uint64_t asked = atomic_load(&tp_on_asked);
    if (atomic_load(&tp_on_followed) >= asked)
        return 0;
    struct timespec dl = tp_deadline(ms);
    int rc = 0;
    pthread_mutex_lock(&tp_q_lock);
    while (atomic_load(&tp_on_followed) < asked && !atomic_load(&tp_exiting) && rc == 0)
        rc = pthread_cond_timedwait(&tp_f_done, &tp_q_lock, &dl);
    int done = atomic_load(&tp_on_followed) >= asked;
    pthread_mutex_unlock(&tp_q_lock);
    return done ? 0 : -1;
}

void tp_flusher_progress(uint64_t steps, int final)
{
    atomic_store(&tp_steps_done, steps);
    atomic_store(&tp_final, final);
}

int tp_flusher_exiting(void)
{
    return atomic_load(&tp_exiting);
}

void tp_flusher_exit_begin(void)
{
    /* bounded, should a CUPTI load hang: then exit goes on as before */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    int locked = pthread_mutex_timedlock(&tp_load_lock, &dl) == 0;
    atomic_store(&tp_exiting, 1);
    if (locked)
        pthread_mutex_unlock(&tp_load_lock);
}

int tp_flusher_wait_written(int ms)
{
    struct timespec dl = tp_deadline(ms);
    int rc = 0;
    pthread_mutex_lock(&tp_q_lock);
    while ((tp_q_head != tp_q_tail || tp_q_busy) && rc == 0)
        rc = pthread_cond_timedwait(&tp_q_done, &tp_q_lock, &dl);
    int done = tp_q_head == tp_q_tail && !tp_q_busy;
    pthread_mutex_unlock(&tp_q_lock);
    return done;
}

int tp_flusher_term(int sig, int ms)
{
    int none = 0;
    __atomic_compare_exchange_n(&tp_term_pending, &none, sig, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    tp_cupti_hurry();
    tp_wake();
    for (int i = 0; i < ms / 10 && !TP_LOAD(tp_term_saved) && !TP_LOAD(tp_term_given_up); i++) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    if (!TP_LOAD(tp_term_saved))
        TP_STORE(tp_term_given_up, 1);
    return TP_LOAD(tp_term_saved);
}

void tp_flusher_flight_trim(uint8_t gen, uint64_t tick)
{
    pthread_mutex_lock(&tp_trim_lock);
    int moved = tick != tp_trim_tick || gen != tp_trim_gen;
    tp_trim_tick = tick;
    tp_trim_gen = gen;
    pthread_mutex_unlock(&tp_trim_lock);
    if (moved)
        tp_wake();
}

/* tp-flush: give back the flight recorder's records older than its oldest step. */
static void tp_flight_trim(void)
{
    pthread_mutex_lock(&tp_trim_lock);
    uint64_t tick = tp_trim_tick;
    uint8_t gen = tp_trim_gen;
    int todo = tick != tp_trim_done;
    tp_trim_done = tick;
    pthread_mutex_unlock(&tp_trim_lock);
    if (todo)
        tp_buf_trim(gen, tick);
}

int tp_flusher_running(void)
{
    return atomic_load(&tp_flusher_started) == getpid();
}

int tp_flusher_is_self(void)
{
    pid_t t = TP_LOAD(tp_flush_tid);
    return t != 0 && gettid() == t;
}

/* Run the modules' follow hooks (no lock of the steps held).  The sampler
 * and CUPTI keep running while windows wait to be written. */
static void tp_follow(int queued)
{
    uint64_t asked = atomic_load(&tp_on_asked);
    pthread_mutex_lock(&tp_load_lock);
    if (!atomic_load(&tp_exiting)) {
        struct tp_follow f = {
            .on = atomic_load(&tp_sched_on) > 0,
            .queued = queued,
            .final = atomic_load(&tp_final),
        };
        tp_modules_follow(&f);
    }
    pthread_mutex_unlock(&tp_load_lock);
    pthread_mutex_lock(&tp_q_lock);
    if (asked > atomic_load(&tp_on_followed)) {
        atomic_store(&tp_on_followed, asked);
        pthread_cond_broadcast(&tp_f_done);
    }
    pthread_mutex_unlock(&tp_q_lock);
}

/* Wait until the device side of "w" is complete: every launch
 * has its device record, or 2 more steps or 10 s have passed, or the process
 * is exiting (then CUPTI is flushed forcibly). */
static void tp_device_wait(const struct tp_handoff *w)
{
    struct tp_clock_map m = tp_clock_map_now();
    uint64_t t_begin = tp_clock_now();
    for (;;) {
        int exiting = atomic_load(&tp_exiting) || TP_LOAD(tp_term_pending);
        tp_cupti_collect(exiting);
        if (exiting || tp_cupti_unfinished(w->start_tick, w->end_tick) == 0)
            return;
        if (atomic_load(&tp_steps_done) >= w->batch + 2 ||
            tp_clock_ticks_to_ns(&m, t_begin, tp_clock_now()) > 10ll * 1000000000ll)
            return;
        tp_sleep(20);
    }
}

static void tp_write_window(const struct tp_handoff *w)
{
    struct tp_device_batch dev;
    memset(&dev, 0, sizeof dev);
    /* abandoned (a signal came while CUPTI did not answer): what was
     * decoded before is still the window's */
    int gpu = !w->flight && (tp_cupti_enabled() || tp_cupti_abandoned());   /* none outside windows */
    if (gpu) {
        tp_device_wait(w);
        tp_cupti_take(w->start_tick, w->end_tick, &dev);
    }
    if (tp_cupti_lost_at())
        tp_cupti_window_free(&dev);     /* another client took CUPTI: not all, maybe not ours */
    tp_window_write(w, gpu || dev.n_rec ? &dev : NULL);
    tp_cupti_window_free(&dev);
}

static void *tp_flush_main(void *arg)
{
    (void)arg;
    int term_closed = 0;        /* the term hook ran */
    tp_depth = 1;
    TP_STORE(tp_flush_tid, gettid());
    tp_bgthread_start("tp-flush");
    if (tp_hooks.start)
        tp_hooks.start();
    for (;;) {
        tp_sleep(atomic_load(&tp_tick_ms));
        int sig = TP_LOAD(tp_term_pending);
        if (sig && !term_closed) {
            tp_hooks.term(sig);
            atomic_store(&tp_exiting, 1);
            term_closed = 1;
        }
        for (;;) {
            struct tp_handoff w;
            pthread_mutex_lock(&tp_q_lock);
            int have = tp_q_head != tp_q_tail;
            if (have) {
                w = tp_queue[tp_q_head % TP_QUEUE];
                tp_q_head++;
                tp_q_busy = 1;
            }
            pthread_mutex_unlock(&tp_q_lock);
            if (!have)
                break;
            tp_write_window(&w);
            pthread_mutex_lock(&tp_q_lock);
            tp_q_busy = 0;
            pthread_cond_broadcast(&tp_q_done);
            pthread_mutex_unlock(&tp_q_lock);
        }
        tp_flight_trim();
        if (term_closed)
            TP_STORE(tp_term_saved, 1);     /* not before: a signal may come while a window is written */
        pthread_mutex_lock(&tp_q_lock);
        int queued = tp_q_head != tp_q_tail;
        pthread_mutex_unlock(&tp_q_lock);
        tp_follow(queued);
        tp_window_idle();
        tp_hooks.idle();
    }
    return NULL;
}

int tp_flusher_start(const struct tp_flusher_hooks *hooks)
{
    tp_hooks = *hooks;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&tp_flusher, NULL, tp_flush_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    atomic_store(&tp_flusher_started, getpid());
    pthread_detach(tp_flusher);
    return 0;
}
