/*
 * core.c - DESIGN: the life of a profiled process.
 *
 * The constructor (preload/init.c) only parses configuration.  The first
 * CUDA call that succeeds, or a trainprof_* call, activates (a call that
 * failed - no driver, no device - leaves the process inert; NVTX ranges never
 * activate): report configuration problems,
 * calibrate the clock, reserve the record pool, start the flush thread
 * (signals blocked, named tp-flush), register pthread_atfork and install
 * SIGTERM/SIGINT handlers over default dispositions only.  The exit flush is
 * registered with atexit() after the first real CUDA call has returned, so
 * that it runs before CUDA's own atexit teardown (LIFO order), and once at
 * activation, so that it runs before _dl_fini when no such call came (the
 * destructor is the last fallback).
 *
 * Steps are counted under one mutex: steps are rare next to calls, and the
 * step path is where windows open and close.  Closing a window costs the
 * training thread one queue insert and one write(2) to the flush thread's
 * pipe; everything else happens on tp-flush.
 *
 * Signals: the handler writes to the pipe and waits (bounded) for tp-flush to
 * save the open window, then restores the default disposition, re-raises and
 * returns, so the process dies of the same signal with the signal unblocked.
 * A forked child goes passive at once; handlers check the owner pid.
 */
#include "core.h"
#include "apis.h"
#include "cupti.h"
#include "kernels.h"
#include "log.h"
#include "memory.h"
#include "schedule.h"
#include "sysstat.h"
#include "window.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t tp_activate_once = PTHREAD_ONCE_INIT;
static _Atomic int tp_active;              /* activated and not passive */
static pid_t tp_owner;

/* steps and windows, under tp_step_lock */
static pthread_mutex_t tp_step_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tp_steps;                  /* steps completed */
static uint64_t tp_step_start;             /* tick at which the current step began */
static struct tp_win tp_cur;               /* the open window, if recording */
static uint8_t tp_gen;
static uint64_t tp_dropped_mark;
static _Atomic int tp_signal_kind = -1;    /* the signal that counts steps (decision 4) */
static uint32_t tp_sig_flags;              /* TP_HOT_LAUNCH_SIG | TP_HOT_CALL_SIG, while steps matter */

/* call:NAME and launch:GLOB counters */
static unsigned tp_call_api[TP_MAX_SIGNALS];
static _Atomic uint64_t tp_sig_count[TP_MAX_SIGNALS];

/* hand-over to the flush thread */
#define TP_QUEUE 16
static pthread_mutex_t tp_q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tp_q_done = PTHREAD_COND_INITIALIZER;
static struct tp_win tp_queue[TP_QUEUE];
static unsigned tp_q_head, tp_q_tail;      /* tail - head = pending */
static int tp_q_busy;                      /* tp-flush is writing a window */
static int tp_wake_fd[2] = { -1, -1 };
static pthread_t tp_flusher;

static volatile sig_atomic_t tp_sig_pending;
static volatile sig_atomic_t tp_sig_saved;
static int tp_sig_installed[2];            /* SIGTERM, SIGINT */
static const int tp_sig_nums[2] = { SIGTERM, SIGINT };
int tp_exit_hooked;
static _Atomic int tp_exiting;
/* CUPTI is loaded on tp-flush, by dlopen.  Once exit has begun no load may
 * start: from _dl_fini on, a dlopen runs the initialisers of objects already
 * finalised again (preload/dlsym.c).  tp_atexit sets tp_exiting under this
 * lock, so a load under way finishes first and none starts after. */
static pthread_mutex_t tp_load_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int tp_exit_done;
static uint64_t tp_activation_tick;
/* Step 0 begins when the call that activated the profiler began, so that
 * this call lies inside it (first writer wins; read in tp_activate). */
static _Atomic uint64_t tp_first_call_tick;
static int tp_warned_no_step;

static void tp_wake(void)
{
    char c = 1;
    if (tp_wake_fd[1] >= 0) {
        ssize_t w = write(tp_wake_fd[1], &c, 1);
        (void)w;
    }
}

static int tp_captures;                    /* open stream captures, under tp_step_lock */

/* The device side (CUPTI), driven by tp-flush: tp_dev_want says whether the
 * current step warms up or records (GPU activity wanted), tp_dev_on whether
 * CUPTI's kinds are enabled. */
static _Atomic int tp_dev_want;
static _Atomic int tp_dev_on;
static _Atomic int tp_sys_want;            /* the host sampler runs (warmup and recording) */

static void tp_hot_set(uint32_t flags, uint8_t gen)
{
    if (tp_captures > 0)
        flags |= TP_HOT_CAPTURE;
    if ((flags & TP_HOT_RECORDING) && atomic_load_explicit(&tp_dev_on, memory_order_relaxed))
        flags |= TP_HOT_EXTCORR;
    if ((flags & TP_HOT_RECORDING) && tp_stack_on())
        flags |= TP_HOT_STACK;
    atomic_store_explicit(&tp_hot, flags | (uint32_t)gen << 8, memory_order_release);
}

void tp_core_capturing(int delta)
{
    if (!tp_core_active())
        return;
    pthread_mutex_lock(&tp_step_lock);
    tp_captures += delta;
    if (!atomic_load(&tp_exiting)) {
        uint32_t hot = atomic_load(&tp_hot);
        tp_hot_set(hot & (TP_HOT_FLAGS & ~(TP_HOT_CAPTURE | TP_HOT_EXTCORR)), TP_HOT_GEN(hot));
    }
    pthread_mutex_unlock(&tp_step_lock);
}

/* Recompute tp_hot after tp_dev_on changed (tp-flush). */
static void tp_hot_refresh(void)
{
    pthread_mutex_lock(&tp_step_lock);
    if (!atomic_load(&tp_exiting)) {
        uint32_t hot = atomic_load(&tp_hot);
        if (hot & ~TP_HOT_INACTIVE)
            tp_hot_set(hot & (TP_HOT_FLAGS & ~(TP_HOT_CAPTURE | TP_HOT_EXTCORR)), TP_HOT_GEN(hot));
    }
    pthread_mutex_unlock(&tp_step_lock);
}

int tp_core_active(void)
{
    return atomic_load_explicit(&tp_active, memory_order_acquire);
}

static const char *tp_core_signal_text(void)
{
    int k = atomic_load(&tp_signal_kind);
    for (int i = 0; k >= 0 && i < tp_cfg.n_signals; i++)
        if ((int)tp_cfg.signals[i].kind == k)
            return tp_cfg.signals[i].text;
    return "";
}

/* ---- windows (tp_step_lock held) ---------------------------------------- */

static void tp_window_open(uint64_t now)
{
    tp_gen++;
    memset(&tp_cur, 0, sizeof tp_cur);
    tp_cur.gen = tp_gen;
    tp_cur.first_step = tp_steps;
    tp_cur.start_tick = now;
    tp_dropped_mark = tp_buf_dropped();
    tp_mem_window_begin(tp_gen, now);
}

static void tp_window_close(uint64_t now, int partial)
{
    tp_cur.batch = tp_steps;
    tp_cur.end_tick = now;
    tp_cur.partial = partial;
    tp_cur.dropped = tp_buf_dropped() - tp_dropped_mark;
    tp_cur.step_signal = tp_core_signal_text();
    tp_mem_window_end(tp_cur.gen, now);
    pthread_mutex_lock(&tp_q_lock);
    if (tp_q_tail - tp_q_head < TP_QUEUE)
        tp_queue[tp_q_tail++ % TP_QUEUE] = tp_cur;
    else
        TP_ERROR("window of steps %llu-%llu not saved: %d windows already waiting to be written",
                 (unsigned long long)tp_cur.first_step, (unsigned long long)tp_steps, TP_QUEUE);
    pthread_mutex_unlock(&tp_q_lock);
    tp_wake();
}

/* Set the hot word for the action of the step now beginning. */
static void tp_enter_step(uint64_t now)
{
    enum tp_action a = tp_schedule_action(&tp_cfg.schedule, tp_steps);
    int recording = atomic_load(&tp_hot) & TP_HOT_RECORDING;
    if ((a == TP_RECORD || a == TP_RECORD_AND_SAVE) && !recording)
        tp_window_open(now);
    uint32_t flags = tp_sig_flags;
    if (tp_schedule_finished(&tp_cfg.schedule, tp_steps)) {
        flags = 0;      /* nothing left to count: calls go back to one load */
        tp_mem_enable(0);   /* and no window will need memory totals */
    }
    int want = a != TP_NONE && (tp_cfg.activities & TP_ACT_CUDA);
    int changed = atomic_exchange(&tp_dev_want, want) != want;
    changed |= atomic_exchange(&tp_sys_want, a != TP_NONE) != (a != TP_NONE);
    if (changed)
        tp_wake();      /* tp-flush starts or stops CUPTI (decision 6) and the sampler */
    if (a == TP_RECORD || a == TP_RECORD_AND_SAVE)
        flags |= TP_HOT_RECORDING;
    tp_hot_set(flags, tp_gen);
}

void tp_core_step(enum tp_signal_kind kind)
{
    if (!tp_core_active() || tp_depth > 0)
        return;
    int want = -1;
    if (!atomic_compare_exchange_strong(&tp_signal_kind, &want, (int)kind) && want != (int)kind)
        return;
    tp_depth++;
    pthread_mutex_lock(&tp_step_lock);
    if (!atomic_load(&tp_exiting)) {
        uint64_t now = tp_clock_now();
        enum tp_action a = tp_schedule_action(&tp_cfg.schedule, tp_steps);
        if (a == TP_RECORD || a == TP_RECORD_AND_SAVE) {
            struct tp_record *r = tp_buf_reserve();
            if (r) {
                memset(r, 0, sizeof *r);
                r->kind = TP_REC_STEP;
                r->gen = tp_gen;
                r->t0 = tp_step_start;
                r->t1 = now;
                r->u.step.index = tp_steps;
                r->u.step.signal = (uint32_t)kind;
                tp_buf_commit();
            }
            tp_cur.steps++;
        }
        tp_steps++;
        tp_step_start = now;
        if (a == TP_RECORD_AND_SAVE) {
            tp_hot_set(tp_sig_flags, tp_gen);
            tp_window_close(now, 0);
        }
        tp_enter_step(now);
    }
    pthread_mutex_unlock(&tp_step_lock);
    tp_depth--;
}

/* Close the open window at exit or on a signal.  "wait_lock": 0 from a
 * signal path, where the interrupted thread may hold the lock. */
static void tp_window_close_final(int wait_lock)
{
    int locked = 0;
    if (wait_lock) {
        pthread_mutex_lock(&tp_step_lock);
        locked = 1;
    } else {
        for (int i = 0; i < 200 && !locked; i++) {
            locked = pthread_mutex_trylock(&tp_step_lock) == 0;
            if (!locked) {
                struct timespec ts = { 0, 1000 * 1000 };
                nanosleep(&ts, NULL);
            }
        }
    }
    uint32_t hot = atomic_exchange(&tp_hot, 0);
    if (hot & TP_HOT_RECORDING)
        tp_window_close(tp_clock_now(), !tp_cfg.schedule.all);
    if (locked)
        pthread_mutex_unlock(&tp_step_lock);
}

/* Wait until tp-flush has written everything queued, at most "ms". */
static int tp_wait_written(int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    pthread_mutex_lock(&tp_q_lock);
    while ((tp_q_head != tp_q_tail || tp_q_busy) && rc == 0)
        rc = pthread_cond_timedwait(&tp_q_done, &tp_q_lock, &dl);
    int done = tp_q_head == tp_q_tail && !tp_q_busy;
    pthread_mutex_unlock(&tp_q_lock);
    return done;
}

static void tp_warn_no_step(const char *when)
{
    if (tp_warned_no_step >= 2 || tp_cfg.schedule.all || atomic_load(&tp_signal_kind) >= 0)
        return;
    tp_warned_no_step++;
    char list[512] = "";
    size_t n = 0;
    for (int i = 0; i < tp_cfg.n_signals && n < sizeof list - 1; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? "," : "", tp_cfg.signals[i].text);
    TP_WARN("no step signal seen %s (TRAINPROF_STEP_ON=%s), so nothing was recorded; "
            "call trainprof_step(), set TRAINPROF_STEP_ON (e.g. nvtx:GLOB, launch:GLOB, "
            "call:cudaGraphLaunch), or use TRAINPROF_SCHEDULE=all", when, list);
}

/* ---- the flush thread ---------------------------------------------------- */

/* tp_cupti_start unless the process is exiting (tp_load_lock). */
static int tp_cupti_start_live(void)
{
    pthread_mutex_lock(&tp_load_lock);
    int rc = atomic_load(&tp_exiting) ? -1 : tp_cupti_start(tp_core_cuda_ok());
    pthread_mutex_unlock(&tp_load_lock);
    return rc;
}

/* Start or stop the host sampler and CUPTI as the schedule asks (tp-flush,
 * no lock held).  Both keep running while windows wait to be written. */
static void tp_follow_schedule(int queued)
{
    if (atomic_load(&tp_exiting))
        return;
    if (atomic_load(&tp_sys_want))
        tp_sys_start();
    else if (!queued)
        tp_sys_stop();
    int want = atomic_load(&tp_dev_want);
    if (want) {
        if (!tp_cupti_enabled() && tp_cupti_start_live() != 0)
            return;
        if (!atomic_exchange(&tp_dev_on, 1))
            tp_hot_refresh();
        return;
    }
    if (queued || !tp_cupti_enabled())
        return;
    pthread_mutex_lock(&tp_step_lock);
    int final = tp_schedule_finished(&tp_cfg.schedule, tp_steps);
    int capturing = tp_captures > 0;
    pthread_mutex_unlock(&tp_step_lock);
    if (atomic_exchange(&tp_dev_on, 0))
        tp_hot_refresh();
    tp_cupti_stop(final && !capturing);
    if (tp_cupti_enabled()) {
        /* CUPTI 13.0 GA keeps its kinds on between windows (notes 2.4):
         * drop what they record there */
        struct tp_dev_window junk;
        uint64_t now = tp_clock_now();
        tp_cupti_collect(0);
        tp_cupti_take(now, now, &junk);
        tp_cupti_window_free(&junk);
    }
}

/* Wait until the device side of "w" is complete (decision 5): every launch
 * has its device record, or 2 more steps or 10 s have passed, or the process
 * is exiting (then CUPTI is flushed forcibly). */
static void tp_device_wait(const struct tp_win *w)
{
    struct tp_clock_map m = tp_clock_map_now();
    uint64_t t_begin = tp_clock_now();
    for (;;) {
        int exiting = atomic_load(&tp_exiting) || tp_sig_pending;
        tp_cupti_collect(exiting);
        if (exiting || tp_cupti_unfinished(w->start_tick, w->end_tick) == 0)
            return;
        pthread_mutex_lock(&tp_step_lock);
        uint64_t steps = tp_steps;
        pthread_mutex_unlock(&tp_step_lock);
        if (steps >= w->batch + 2 || tp_clock_ticks_to_ns(&m, t_begin, tp_clock_now()) > 10ll * 1000000000ll)
            return;
        struct pollfd p = { tp_wake_fd[0], POLLIN, 0 };
        if (poll(&p, 1, 20) > 0) {
            char buf[64];
            ssize_t r = read(tp_wake_fd[0], buf, sizeof buf);
            (void)r;
        }
    }
}

static void tp_write_window(const struct tp_win *w)
{
    struct tp_dev_window dev;
    memset(&dev, 0, sizeof dev);
    if (tp_cupti_enabled()) {
        tp_device_wait(w);
        tp_cupti_take(w->start_tick, w->end_tick, &dev);
    }
    tp_flush_write(w, tp_cupti_enabled() || dev.n_rec ? &dev : NULL);
    tp_cupti_window_free(&dev);
}

static void *tp_flush_main(void *arg)
{
    (void)arg;
    tp_depth = 1;
    prctl(PR_SET_NAME, "tp-flush", 0, 0, 0);
    for (;;) {
        struct pollfd p = { tp_wake_fd[0], POLLIN, 0 };
        int rc = poll(&p, 1, 1000);
        if (rc > 0) {
            char buf[64];
            ssize_t r = read(tp_wake_fd[0], buf, sizeof buf);
            (void)r;
        }
        if (tp_sig_pending && !tp_sig_saved) {
            tp_window_close_final(0);
            atomic_store(&tp_exiting, 1);
        }
        for (;;) {
            struct tp_win w;
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
        if (tp_sig_pending)
            tp_sig_saved = 1;
        pthread_mutex_lock(&tp_q_lock);
        int queued = tp_q_head != tp_q_tail;
        pthread_mutex_unlock(&tp_q_lock);
        tp_follow_schedule(queued);
        tp_flush_idle();
        if (!tp_warned_no_step && tp_activation_tick) {
            struct tp_clock_map m = tp_clock_map_now();
            if (tp_clock_ticks_to_ns(&m, tp_activation_tick, tp_clock_now()) > 60ll * 1000000000ll)
                tp_warn_no_step("in the 60 s since the first CUDA call");
        }
    }
    return NULL;
}

/* ---- exit, signals, fork ------------------------------------------------- */

static void tp_atexit(void)
{
    if (getpid() != tp_owner || !tp_core_active() || atomic_exchange(&tp_exit_done, 1))
        return;
    /* bounded, should a CUPTI load hang: then exit goes on as before */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    int locked = pthread_mutex_timedlock(&tp_load_lock, &dl) == 0;
    atomic_store(&tp_exiting, 1);
    if (locked)
        pthread_mutex_unlock(&tp_load_lock);
    tp_depth++;
    tp_window_close_final(1);
    tp_wait_written(30000);
    tp_sys_shutdown();
    tp_flush_finish();
    tp_warn_no_step("before exit");
    tp_depth--;
}

static void tp_signal_handler(int sig)
{
    int saved = errno;
    if (getpid() == tp_owner && tp_core_active()) {
        tp_sig_pending = 1;
        tp_wake();
        /* bounded: torchrun sends SIGKILL 30 s after SIGTERM */
        for (int i = 0; i < 2000 && !tp_sig_saved; i++) {
            struct timespec ts = { 0, 10 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    raise(sig);            /* pending until this handler returns */
    errno = saved;
}

static void tp_signals_install(void)
{
    for (int i = 0; i < 2; i++) {
        struct sigaction old;
        if (sigaction(tp_sig_nums[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
            (old.sa_flags & SA_SIGINFO))
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = tp_signal_handler;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        tp_sig_installed[i] = sigaction(tp_sig_nums[i], &sa, NULL) == 0;
    }
}

static void tp_atfork_child(void)
{
    atomic_store(&tp_hot, 0);
    tp_mem_enable(0);
    tp_sys_atfork_child();
    atomic_store(&tp_active, 0);
    for (int i = 0; i < 2; i++) {
        if (!tp_sig_installed[i])
            continue;
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(tp_sig_nums[i], &dfl, NULL);
    }
}

/* ---- activation ---------------------------------------------------------- */

static int tp_flusher_start(void)
{
    if (pipe2(tp_wake_fd, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&tp_flusher, NULL, tp_flush_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    pthread_detach(tp_flusher);
    return 0;
}

static void tp_activate(void)
{
    tp_depth++;
    tp_config_init();
    if (tp_config_report() || !tp_cfg.rank_selected) {
        atomic_store(&tp_hot, 0);
        tp_depth--;
        return;
    }
    tp_owner = getpid();
    tp_clock_init();
    if (tp_buf_init(tp_cfg.buffer_mb) != 0 || tp_flusher_start() != 0) {
        TP_ERROR("cannot start (out of memory or threads): profiling disabled for this process");
        atomic_store(&tp_hot, 0);
        tp_depth--;
        return;
    }
    for (int i = 0; i < tp_cfg.n_signals; i++) {
        const struct tp_signal *s = &tp_cfg.signals[i];
        if (s->kind == TP_SIGNAL_LAUNCH)
            tp_sig_flags |= TP_HOT_LAUNCH_SIG;
        if (s->kind == TP_SIGNAL_CALL) {
            tp_call_api[i] = tp_api_find(s->pattern);
            if (tp_call_api[i])
                tp_sig_flags |= TP_HOT_CALL_SIG;
            else
                TP_WARN("TRAINPROF_STEP_ON item \"%s\": %s is not an intercepted call; it never fires",
                        s->text, s->pattern);
        }
    }
    if (tp_cfg.with_stack)
        tp_stack_init();
    pthread_atfork(NULL, NULL, tp_atfork_child);
    /* The exit flush, for a process whose first launch never registers it
     * again later (tp_core_after_call; LIFO, that one runs first and this
     * one then does nothing).  From exit's handlers, not only from our
     * destructor: _dl_fini has by then marked objects uninitialised, and
     * tp-flush's dlopens during the flush would run their initialisers
     * again (preload/dlsym.c). */
    atexit(tp_atexit);
    tp_signals_install();
    tp_mem_enable(tp_cfg.profile_memory);
    atomic_store(&tp_active, 1);
    pthread_mutex_lock(&tp_step_lock);
    uint64_t now = tp_clock_now(), first = atomic_load(&tp_first_call_tick);
    tp_activation_tick = tp_step_start = first && first <= now ? first : now;
    tp_enter_step(tp_step_start);
    pthread_mutex_unlock(&tp_step_lock);
    tp_depth--;
}

void tp_core_activate(void)
{
    pthread_once(&tp_activate_once, tp_activate);
}

/* Start of this thread's outermost call made before activation (a library
 * call's launches re-enter here while it runs). */
static __thread uint64_t tp_outer_t0 __attribute__((tls_model("initial-exec")));

int tp_call_begin_slow(struct tp_call *c, uint16_t api, uint32_t hot)
{
    c->hot = hot & TP_HOT_INACTIVE;
    c->api = api;
    c->t0 = tp_clock_now();     /* ticks: the clock source was chosen in our constructor */
    c->ext = 0;
    if (tp_depth == 0 && tp_lib_depth == 0)
        tp_outer_t0 = c->t0;
    (*c->depth)++;
    return 1;
}

static _Atomic int tp_cuda_ok;

void tp_core_cuda_succeeded(void)
{
    atomic_store_explicit(&tp_cuda_ok, 1, memory_order_relaxed);
}

int tp_core_cuda_ok(void)
{
    return atomic_load_explicit(&tp_cuda_ok, memory_order_relaxed);
}

uint32_t tp_call_activated(int32_t status)
{
    if (status != 0)
        return 0;
    tp_core_cuda_succeeded();
    uint64_t none = 0;
    atomic_compare_exchange_strong(&tp_first_call_tick, &none, tp_outer_t0);
    tp_core_activate();
    return tp_hot_load() & ~TP_HOT_INACTIVE;
}

void tp_core_after_call(void)
{
    int want = 0;
    if (tp_core_active() && __atomic_compare_exchange_n(&tp_exit_hooked, &want, 1, 0,
                                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        atexit(tp_atexit);
}

/* Last fallback (the atexit registrations above normally ran first). */
__attribute__((destructor)) static void tp_fini(void)
{
    tp_atexit();
}

/* Which signals a launch of "func" hits, one bit per signal index; the last
 * kernel's answer is kept per thread because loops launch the same kernels
 * over and over. */
static uint32_t tp_launch_hits(uint64_t func, int func_kind)
{
    static __thread uint64_t last_func __attribute__((tls_model("initial-exec")));
    static __thread uint32_t last_mask __attribute__((tls_model("initial-exec")));
    if (func == last_func)
        return last_mask;
    uint32_t mask = 0;
    for (int i = 0; i < tp_cfg.n_signals; i++)
        if (tp_cfg.signals[i].kind == TP_SIGNAL_LAUNCH && tp_kernels_match(func, func_kind, tp_cfg.signals[i].pattern))
            mask |= 1u << i;
    last_func = func;
    last_mask = mask;
    return mask;
}

void tp_call_signal(struct tp_call *c, uint64_t func, int func_kind)
{
    if (!__atomic_load_n(&tp_exit_hooked, __ATOMIC_RELAXED))
        tp_core_after_call();
    uint32_t hits = (c->hot & TP_HOT_LAUNCH_SIG) && func ? tp_launch_hits(func, func_kind) : 0;
    if ((c->hot & TP_HOT_CALL_SIG)) {
        unsigned api = tp_api_logical(c->api);
        for (int i = 0; i < tp_cfg.n_signals; i++)
            if (tp_cfg.signals[i].kind == TP_SIGNAL_CALL && tp_call_api[i] == api)
                hits |= 1u << i;
    }
    for (int i = 0; hits; i++, hits >>= 1)
        if ((hits & 1) && (atomic_fetch_add(&tp_sig_count[i], 1) + 1) % tp_cfg.signals[i].every == 0)
            tp_core_step(tp_cfg.signals[i].kind);
}
