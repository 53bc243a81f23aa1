/*
 * lifecycle.c - DESIGN: the life of a profiled process.
 *
 * The constructor (preload/init.c) only parses configuration.  The first
 * CUDA call that succeeds, or a trainprof_* call, activates (a call that
 * failed - no driver, no device - leaves the process inert; NVTX ranges never
 * activate): report configuration problems, calibrate the clock, reserve
 * the record pool, start the flush thread (flusher.c: signals blocked,
 * named tp-flush), initialise the modules (modules.def), register
 * pthread_atfork, install SIGTERM/SIGINT handlers over default
 * dispositions only and the fatal signals' handlers (below), set up
 * on-demand capture (trigger.c: its file, status and optional signal),
 * then enter step 0 (steps.c).  The exit flush is
 * registered with atexit() after the first real CUDA call has returned, so
 * that it runs before CUDA's own atexit teardown (LIFO order), and once at
 * activation, so that it runs before _dl_fini when no such call came (the
 * destructor is the last fallback).
 *
 * Termination signals: the handler has tp-flush save the open window and
 * waits (bounded), then restores the default disposition, re-raises and
 * returns, so the process dies of the same signal with the signal unblocked.
 * The save itself bounds its waits on the locks the interrupted code may
 * hold (flusher.c): a thread interrupted inside CUPTI held CUPTI's lock,
 * tp-flush waited for it in cuptiActivityFlushAll, and the handler gave
 * up after 20 s with nothing saved (tests/preload/test_signal_cupti.py).
 * A forked child goes passive at once; handlers check the owner pid.
 *
 * Fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): installed at
 * activation over the default disposition or a handler of the program's
 * (kept, and chained: never over SIG_IGN).  Ours takes the program's mask
 * and its SA_NODEFER, SA_RESETHAND, SA_RESTART and SA_ONSTACK flags, so the
 * kernel treats the signal as it would have (SA_ONSTACK always over
 * SIG_DFL).  The handler uses only async-signal-safe calls: it has tp-flush
 * save the open window as partial (partial_reason: the signal's name) and
 * waits at most 10 s (the faulting thread may hold a lock tp-flush needs:
 * then it gives up), then runs the original disposition: the program's
 * handler, called as the kernel would (siginfo and context, or the signal
 * alone), returning when it returns; or the default, restored, with a
 * re-raise for a signal that was sent (si_code <= 0, and abort()) or a
 * return for a fault, whose instruction faults again, so that the process
 * dies of the same fault with the same core dump.  No save on tp-flush
 * itself, nor in a nested fault of the same thread while it waits; a fault
 * on tp-flush (all signals blocked there) goes to the default disposition
 * at once (the kernel's rule for a blocked fault).  Stack overflow: the
 * activating thread gets an alternate signal stack of ours if it had none;
 * on another thread without one the kernel cannot run the handler and the
 * process dies as it would have, without a save.  A handler the program
 * installs after activation replaces ours (no save then).
 */
#include "lifecycle.h"
#include "collector/record/buffer.h"
#include "collector/record/call.h"
#include "collector/common/clock.h"
#include "collector/config/config.h"
#include "collector/contract/sink.h"
#include "collector/drain/flusher.h"
#include "collector/drain/window.h"
#include "collector/common/log.h"
#include "collector/modules/module.h"
#include "collector/common/sighandler.h"
#include "collector/modules/stack.h"
#include "hang.h"
#include "oom.h"
#include "steps.h"
#include "trigger.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_once_t tp_activate_once = PTHREAD_ONCE_INIT;
static pid_t tp_owner;
int tp_exit_hooked;
static _Atomic int tp_exit_done;
/* Step 0 begins when the call that activated the profiler began, so that
 * this call lies inside it (first writer wins; read in tp_activate). */
static _Atomic uint64_t tp_first_call_tick;
/* Start of this thread's outermost call made before activation (a library
 * call's launches re-enter here while it runs). */
static __thread uint64_t tp_outer_t0 __attribute__((tls_model("initial-exec")));

static int tp_term_installed[2];           /* SIGTERM, SIGINT */
static const int tp_term_nums[2] = { SIGTERM, SIGINT };

#define TP_N_FATAL 5
#define TP_FATAL_WAIT_MS 10000
#define TP_ALTSTACK_BYTES (64 * 1024)
static const int tp_fatal_nums[TP_N_FATAL] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
static const char *const tp_fatal_names[TP_N_FATAL] = { "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL",
                                                        "SIGABRT" };
static struct sigaction tp_fatal_old[TP_N_FATAL];   /* the program's dispositions */
static int tp_fatal_installed[TP_N_FATAL];
/* This thread is in our fatal handler, waiting for the save. */
static __thread int tp_in_fatal __attribute__((tls_model("initial-exec")));

/* ---- exit, termination signals, fork ------------------------------------ */

static void tp_atexit(void)
{
    if (getpid() != tp_owner || !tp_steps_on() || atomic_exchange(&tp_exit_done, 1))
        return;
    tp_flusher_exit_begin();
    tp_depth++;
    tp_steps_close_final(1);
    tp_flusher_wait_written(30000);
    tp_oom_at_exit(2000);
    tp_modules_shutdown();
    tp_window_finish();
    tp_trigger_exit();
    tp_steps_warn_unseen("before exit");
    tp_depth--;
}

static void tp_term_handler(int sig)
{
    int saved = errno;
    /* bounded: torchrun sends SIGKILL 30 s after SIGTERM */
    if (getpid() == tp_owner && tp_steps_on())
        tp_flusher_term(sig, 20000);
    tp_sighandler_default(sig);
    tp_sighandler_raise(sig);   /* pending until this handler returns */
    errno = saved;
}

void tp_lifecycle_self_signal(int sig)
{
    if (sig != SIGINT && sig != SIGTERM)
        return;
    struct sigaction now;
    if (getpid() != tp_owner || !tp_steps_on() || tp_flusher_is_self() ||
        sigaction(sig, NULL, &now) != 0 || (now.sa_flags & SA_SIGINFO) ||
        now.sa_handler != SIG_DFL)
        return;     /* handled, ignored or ours (our handler resets to SIG_DFL first: its
                       own raise finds the save done and waits for nothing) */
    sigset_t blocked;
    if (pthread_sigmask(SIG_BLOCK, NULL, &blocked) == 0 && sigismember(&blocked, sig))
        return;     /* stays pending: whoever unblocks it decides */
    int saved = errno;
    tp_flusher_term(sig, 20000);
    errno = saved;
}

static void tp_term_install(void)
{
    for (int i = 0; i < 2; i++)
        tp_term_installed[i] =
            tp_sighandler_install_over_default(tp_term_nums[i], tp_term_handler) == 1;
}

static void tp_fatal_handler(int sig, siginfo_t *si, void *ctx)
{
    int saved = errno, i = 0;
    while (i < TP_N_FATAL - 1 && tp_fatal_nums[i] != sig)
        i++;
    if (!tp_in_fatal && getpid() == tp_owner && tp_steps_on() && !tp_flusher_is_self()) {
        tp_in_fatal = 1;
        tp_flusher_term(sig, TP_FATAL_WAIT_MS);
        tp_in_fatal = 0;
    }
    errno = saved;
    const struct sigaction *old = &tp_fatal_old[i];
    if (old->sa_handler != SIG_DFL) {     /* never SIG_IGN: not installed over it */
        if (old->sa_flags & SA_SIGINFO)
            old->sa_sigaction(sig, si, ctx);
        else
            old->sa_handler(sig);
        return;
    }
    tp_sighandler_default(sig);
    if (!si || si->si_code <= 0 || sig == SIGABRT)
        tp_sighandler_raise(sig);   /* sent, not a fault: pending until this handler returns */
    errno = saved;          /* a fault: its instruction runs again and faults again */
}

/* An alternate signal stack for this (the activating) thread if it has
 * none, so that a stack overflow here still reaches the fatal handler. */
static void tp_altstack(void)
{
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
        return;
    void *mem = mmap(NULL, TP_ALTSTACK_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (mem == MAP_FAILED)
        return;
    stack_t st = { .ss_sp = mem, .ss_flags = 0, .ss_size = TP_ALTSTACK_BYTES };
    if (sigaltstack(&st, NULL) != 0)
        munmap(mem, TP_ALTSTACK_BYTES);
}

static void tp_fatal_install(void)
{
    int any = 0;
    for (int i = 0; i < TP_N_FATAL; i++) {
        struct sigaction old;
        if (sigaction(tp_fatal_nums[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
            continue;
        int dfl = old.sa_handler == SIG_DFL;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = tp_fatal_handler;
        if (dfl) {
            sigemptyset(&sa.sa_mask);
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        } else {
            sa.sa_mask = old.sa_mask;
            sa.sa_flags = SA_SIGINFO |
                          (old.sa_flags & (SA_NODEFER | SA_RESETHAND | SA_RESTART | SA_ONSTACK));
        }
        tp_fatal_old[i] = old;
        tp_fatal_installed[i] = sigaction(tp_fatal_nums[i], &sa, NULL) == 0;
        any |= tp_fatal_installed[i];
    }
    if (any)
        tp_altstack();
}

static void tp_atfork_child(void)
{
    tp_hot_off();
    tp_modules_atfork_child();
    tp_steps_atfork_child();
    tp_trigger_atfork_child();
    for (int i = 0; i < 2; i++)
        if (tp_term_installed[i])
            tp_sighandler_default(tp_term_nums[i]);
    for (int i = 0; i < TP_N_FATAL; i++)
        if (tp_fatal_installed[i])
            sigaction(tp_fatal_nums[i], &tp_fatal_old[i], NULL);
}

/* ---- activation ---------------------------------------------------------- */

/* tp-flush's idle hook: the 60 s no-step warning, the trigger file, the
 * hang doctor, the out-of-memory report. */
static void tp_flush_idle_hook(void)
{
    tp_steps_idle();
    tp_trigger_idle();
    tp_hang_idle();
    tp_oom_idle();
}

/* tp-flush closes the open window when a termination or fatal signal
 * arrived (partial_reason: the signal's name). */
static void tp_term_close(int sig)
{
    const char *name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "signal";
    for (int i = 0; i < TP_N_FATAL; i++)
        if (tp_fatal_nums[i] == sig)
            name = tp_fatal_names[i];
    tp_steps_close_on_signal(name);
    tp_trigger_exit();      /* the last status: the window just closed is not written yet */
}

static void tp_activate(void)
{
    tp_depth++;
    tp_config_init();
    if (tp_config_report() || !tp_cfg.rank_selected) {
        tp_hot_off();
        tp_depth--;
        return;
    }
    tp_owner = getpid();
    tp_clock_init();
    static const struct tp_flusher_hooks hooks = { .term = tp_term_close, .idle = tp_flush_idle_hook,
                                                   .start = tp_config_announce };
    if (tp_buf_init(tp_cfg.buffer_mb) != 0 || tp_flusher_start(&hooks) != 0) {
        TP_ERROR("cannot start (out of memory or threads): profiling disabled for this process");
        tp_hot_off();
        tp_depth--;
        return;
    }
    tp_modules_init(&tp_cfg);
    /* The output side's own loads (ISA-L for gzip traces: 0.2 ms, once)
     * here, with the modules' (libunwind), and not on tp-flush: a program
     * that exits before tp-flush has run could load nothing once exit has
     * begun, and its trace would be written by whichever compressor the
     * race left. */
    const struct tp_sink *sink = tp_sink_get();
    if (sink && sink->load)
        sink->load(tp_cfg.gzip);
    tp_trigger_init();
    tp_hot_stack(tp_stack_on());
    pthread_atfork(NULL, NULL, tp_atfork_child);
    /* The exit flush, for a process whose first launch never registers it
     * again later (tp_lifecycle_after_call; LIFO, that one runs first and this
     * one then does nothing).  From exit's handlers, not only from our
     * destructor: _dl_fini has by then marked objects uninitialised, and
     * tp-flush's dlopens during the flush would run their initialisers
     * again (preload/dlsym.c). */
    atexit(tp_atexit);
    tp_term_install();
    tp_fatal_install();
    uint64_t now = tp_clock_now(), first = atomic_load(&tp_first_call_tick);
    tp_hang_init(now);
    tp_steps_begin(first && first <= now ? first : now);
    tp_depth--;
}

void tp_lifecycle_activate(void)
{
    pthread_once(&tp_activate_once, tp_activate);
}

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

uint32_t tp_call_activated(int32_t status)
{
    if (status != 0)
        return 0;
    tp_cuda_succeeded();
    uint64_t none = 0;
    atomic_compare_exchange_strong(&tp_first_call_tick, &none, tp_outer_t0);
    tp_lifecycle_activate();
    return tp_hot_load() & ~TP_HOT_INACTIVE;
}

void tp_lifecycle_after_call(void)
{
    int want = 0;
    if (tp_steps_on() && __atomic_compare_exchange_n(&tp_exit_hooked, &want, 1, 0,
                                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        atexit(tp_atexit);
}

/* Last fallback (the atexit registrations above normally ran first). */
__attribute__((destructor)) static void tp_fini(void)
{
    tp_atexit();
}
