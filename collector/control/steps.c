/*
 * steps.c - DESIGN: steps and windows.  Steps are counted under one mutex:
 * steps are rare next to calls, and the step path is where windows open
 * and close.  The first step signal to fire becomes the one that counts, so
 * that api,nvtx:step never counts a step twice.  At each step the schedule
 * gives the next step's action; the hot word's mode follows it (call.c
 * composes the word), the flush thread learns whether the step warms up or
 * records (it starts the host sampler and CUPTI), and a window that ends is
 * handed to the flush thread (flusher.c): one queue insert and one write(2)
 * on the training thread.
 * The modules (modules.def) hear of each window's start and end.
 * launch:GLOB and call:NAME signals are counted here too, from the slow
 * path of tp_call_finish (protocol.h).  A recorded step's marker goes to
 * the buffer's reserve for step markers (buffer.h tp_buf_write_step), so
 * that a window keeps its structure however many records it dropped; the
 * window's losses (records dropped, ranges.c's ranges lost and pops
 * ignored) are the counters' differences between its open and close.
 *
 * Profiler-API windows (TRAINPROF_SCHEDULE=profiler-api, nsys's
 * --capture-range=cudaProfilerApi): cudaProfilerStart/cuProfilerStart opens
 * a window, cudaProfilerStop/cuProfilerStop closes it (tp_steps_profiler_api,
 * from preload/cudart.c and driver.c); steps are still counted by the step
 * signal.  As torch.profiler's start() and stop() do with ProfilerStep#N,
 * the steps that overlap the window are listed, each cut to the window: the
 * one under way at Start from Start, the one under way at Stop up to Stop.
 * {batch} is then one past the last step listed, as for the schedule's
 * windows (the steps begun at Stop); at exit, the steps completed.
 *
 * Triggered windows (TRAINPROF_TRIGGER): a step that begins takes a
 * trigger's request (one atomic load when none came, trigger_cycle.c), and
 * where the schedule says NONE the triggered cycle's action counts
 * (tp_action); while triggers are watched the schedule never finishes.
 */
#include "steps.h"
#include "collector/record/apis.h"
#include "collector/record/buffer.h"
#include "collector/record/call.h"
#include "collector/common/clock.h"
#include "collector/drain/flusher.h"
#include "collector/record/intern.h"
#include "collector/record/kernels.h"
#include "collector/common/log.h"
#include "collector/modules/module.h"
#include "hang.h"
#include "trigger_cycle.h"
#include "collector/config/schedule.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

_Atomic int tp_steps_active;               /* activated and not passive (steps.h) */

/* steps and windows, under tp_step_lock */
static pthread_mutex_t tp_step_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tp_steps;                  /* steps completed */
static uint64_t tp_step_start;             /* tick at which the current step began */
static struct tp_handoff tp_cur;           /* the open window, if recording */
static uint8_t tp_gen;
static uint64_t tp_dropped_mark, tp_lost_mark, tp_pops_mark;
static int tp_captures;                    /* open stream captures */
static int tp_recording;                   /* a window is open */
static int tp_warned_start;                /* the window-start wait timed out once */
#define TP_START_WAIT_MS 500
static int tp_finished;                    /* the schedule has finished */
static _Atomic int tp_signal_kind = -1;    /* the signal that counts steps: the first to fire */
static uint32_t tp_signal_flags;           /* TP_HOT_LAUNCH_SIG | TP_HOT_CALL_SIG, while steps matter */
static uint64_t tp_begin_tick;             /* when step 0 began */
static _Atomic int tp_phase = -1;          /* tp_steps_phase() */
static int tp_warned_unseen;

/* call:NAME and launch:GLOB counters */
static unsigned tp_call_api[TP_MAX_SIGNALS];
static _Atomic uint64_t tp_signal_count[TP_MAX_SIGNALS];

/* tp_steps_nvtx_possible(): an nvtx:GLOB signal is configured (set at
 * activation) and no other signal fired first (cleared then). */
_Atomic int tp_steps_nvtx_live;

/* ranges.c's losses, process totals; windows take the difference */
static _Atomic uint64_t tp_lost_ranges, tp_unmatched_pops;

void tp_steps_range_lost(void)
{
    atomic_fetch_add_explicit(&tp_lost_ranges, 1, memory_order_relaxed);
}

void tp_steps_pop_unmatched(void)
{
    atomic_fetch_add_explicit(&tp_unmatched_pops, 1, memory_order_relaxed);
}

void tp_steps_range_losses(uint64_t *lost, uint64_t *unmatched_pops)
{
    *lost = atomic_load_explicit(&tp_lost_ranges, memory_order_relaxed);
    *unmatched_pops = atomic_load_explicit(&tp_unmatched_pops, memory_order_relaxed);
}

static const char *tp_signal_text(void)
{
    int k = atomic_load(&tp_signal_kind);
    for (int i = 0; k >= 0 && i < tp_cfg.n_signals; i++)
        if ((int)tp_cfg.signals[i].kind == k)
            return tp_cfg.signals[i].text;
    return "";
}

/* The action of "step" (step lock held): with profiler-API windows, RECORD
 * while one is open; else the schedule's, or where it says NONE, a
 * triggered cycle's (trigger_cycle.c). */
static enum tp_action tp_action(uint64_t step)
{
    if (tp_cfg.schedule.profiler_api)
        return tp_recording ? TP_RECORD : TP_NONE;
    enum tp_action a = tp_schedule_action(&tp_cfg.schedule, step);
    return a != TP_NONE ? a : tp_trigger_cycle_action(step);
}

/* Tell the flush thread how far the steps are (step lock held). */
static void tp_publish(void)
{
    tp_flusher_progress(tp_steps, tp_finished && tp_captures == 0);
}

/* ---- windows (tp_step_lock held) ---------------------------------------- */

static void tp_steps_open_window(uint64_t now)
{
    tp_gen++;
    memset(&tp_cur, 0, sizeof tp_cur);
    tp_cur.gen = tp_gen;
    tp_cur.first_step = tp_steps;
    tp_cur.start_tick = now;
    tp_clock_read_triple(&tp_cur.start_clock);
    tp_dropped_mark = tp_buf_dropped();
    tp_steps_range_losses(&tp_lost_mark, &tp_pops_mark);
    tp_recording = 1;
    tp_modules_window_begin(tp_gen, now);
}

/* "partial_reason": why the window was cut short ("exit", "SIGSEGV", ...),
 * NULL when it ended as the schedule says. */
static void tp_steps_close_window(uint64_t now, const char *partial_reason, uint64_t batch)
{
    tp_recording = 0;
    tp_cur.batch = batch;
    tp_cur.end_tick = now;
    tp_clock_read_triple(&tp_cur.end_clock);
    tp_cur.partial = partial_reason != NULL;
    tp_cur.partial_reason = partial_reason;
    tp_cur.dropped = tp_buf_dropped() - tp_dropped_mark;
    tp_steps_range_losses(&tp_cur.ranges_lost, &tp_cur.unmatched_pops);
    tp_cur.ranges_lost -= tp_lost_mark;
    tp_cur.unmatched_pops -= tp_pops_mark;
    tp_cur.step_signal = tp_signal_text();
    tp_trigger_cycle_window(&tp_cur);
    tp_modules_window_end(tp_cur.gen, now);
    if (tp_flusher_queue(&tp_cur) != 0)
        TP_ERROR("window of steps %llu-%llu not saved: too many windows already waiting to be written",
                 (unsigned long long)tp_cur.first_step, (unsigned long long)tp_steps);
}

/* Set the hot word for the action of the step now beginning. */
static void tp_enter_step(uint64_t now)
{
    tp_trigger_cycle_step(tp_steps);         /* a trigger's request, if one came */
    enum tp_action a = tp_action(tp_steps);
    int record = a == TP_RECORD || a == TP_RECORD_AND_SAVE;
    if (record && !tp_recording)
        tp_steps_open_window(now);
    uint32_t flags = tp_signal_flags;
    /* watched triggers may still open a window: never finished then */
    if (!tp_finished && tp_schedule_finished(&tp_cfg.schedule, tp_steps) &&
        !tp_trigger_cycle_watched()) {
        tp_finished = 1;
        tp_modules_schedule_end();     /* e.g. no window will need memory totals */
    }
    if (tp_finished && !tp_hang_on())
        flags = 0;      /* nothing left to count: calls go back to one load */
    tp_publish();
    atomic_store(&tp_phase, tp_finished ? -1 : record ? 2 : a == TP_WARMUP ? 1 : 0);
    tp_flusher_schedule(a != TP_NONE);
    if (record)
        flags |= TP_HOT_RECORDING;
    tp_hot_mode(flags, tp_gen);
}

/* If the step about to begin warms up or records (a window's warmup, or a
 * window with no warmup) and the GPU side is wanted, let tp-flush start
 * CUPTI first,
 * bounded, so that the warmup runs with them on and the window's first
 * calls have their device records.  The wait falls in the step that ends
 * here, before its end tick; it is nothing once they are on. */
static void tp_await_on(void)
{
    enum tp_action next = tp_action(tp_steps + 1);
    if (next == TP_NONE || tp_finished || !(tp_cfg.activities & TP_ACT_CUDA))
        return;         /* the sampler's start is not worth a wait */
    /* the step ending here counts as done for a window still waiting for
     * its device records (2 steps, flusher.c), which would hold tp-flush */
    tp_flusher_progress(tp_steps + 1, 0);
    tp_flusher_schedule(1);
    if (tp_flusher_await_on(TP_START_WAIT_MS) != 0 && !tp_warned_start++)
        TP_WARN("the profiler's GPU side was not started within %d ms of step %llu, where "
                "recording starts: its first calls may lack GPU records",
                TP_START_WAIT_MS, (unsigned long long)tp_steps + 1);
}

/* Record step "index" of the open window, from "t0" (not before the
 * window's start) to "t1": into the buffer's reserve for step markers, so
 * that a window whose other records filled the pool keeps its steps. */
static void tp_step_record(uint64_t index, uint64_t t0, uint64_t t1, uint32_t signal)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    r.kind = TP_REC_STEP;
    r.gen = tp_gen;
    r.t0 = t0 > tp_cur.start_tick ? t0 : tp_cur.start_tick;
    r.t1 = t1;
    r.u.step.index = index;
    r.u.step.signal = signal;
    tp_buf_write_step(&r);
    tp_cur.steps++;
}

void tp_steps_signal(enum tp_signal_kind kind)
{
    if (!tp_steps_on() || tp_depth > 0)
        return;
    int want = -1;
    if (!atomic_compare_exchange_strong(&tp_signal_kind, &want, (int)kind) && want != (int)kind)
        return;
    if (want < 0 && kind != TP_SIGNAL_NVTX)
        atomic_store_explicit(&tp_steps_nvtx_live, 0, memory_order_relaxed);
    tp_depth++;
    pthread_mutex_lock(&tp_step_lock);
    if (!tp_flusher_exiting()) {
        tp_await_on();
        uint64_t now = tp_clock_now();
        enum tp_action a = tp_action(tp_steps);
        if (a == TP_RECORD || a == TP_RECORD_AND_SAVE)
            tp_step_record(tp_steps, tp_step_start, now, (uint32_t)kind);
        tp_steps++;
        tp_step_start = now;
        tp_hang_step(tp_steps, now);
        if (a == TP_RECORD_AND_SAVE) {
            tp_hot_mode(tp_signal_flags, tp_gen);
            tp_steps_close_window(now, NULL, tp_steps);
        }
        tp_enter_step(now);
    }
    pthread_mutex_unlock(&tp_step_lock);
    tp_depth--;
}

/* ---- profiler-API windows (TRAINPROF_SCHEDULE=profiler-api) -------------- */

/* cudaProfilerStart: open a window now, CUPTI on first (bounded, as at a
 * warmup boundary: tp_await_on), so that the window's first calls have
 * their device records. */
static void tp_papi_start(void)
{
    if (tp_cfg.activities & TP_ACT_CUDA) {
        tp_flusher_progress(tp_steps, 0);
        tp_flusher_schedule(1);
        if (tp_flusher_await_on(TP_START_WAIT_MS) != 0 && !tp_warned_start++)
            TP_WARN("the profiler's GPU side was not started within %d ms of cudaProfilerStart "
                    "(step %llu): the window's first calls may lack GPU records",
                    TP_START_WAIT_MS, (unsigned long long)tp_steps);
    }
    uint64_t now = tp_clock_now();
    tp_steps_open_window(now);
    tp_enter_step(now);
}

/* cudaProfilerStop: the step under way is listed up to now, and the window
 * is saved with {batch} one past it. */
static void tp_papi_stop(void)
{
    uint64_t now = tp_clock_now();
    int kind = atomic_load(&tp_signal_kind);
    tp_step_record(tp_steps, tp_step_start, now, kind < 0 ? 0u : (uint32_t)kind);
    tp_hot_mode(tp_signal_flags, tp_gen);
    tp_steps_close_window(now, NULL, tp_steps + 1);
    tp_enter_step(now);
}

void tp_steps_profiler_api(int start)
{
    if (!tp_cfg.schedule.profiler_api || !tp_steps_on())
        return;
    tp_depth++;
    pthread_mutex_lock(&tp_step_lock);
    if (tp_flusher_exiting())
        ;
    else if (start && tp_recording)
        TP_DEBUG("profiler API start in step %llu ignored: already recording",
                 (unsigned long long)tp_steps);
    else if (!start && !tp_recording)
        TP_DEBUG("profiler API stop in step %llu ignored: not recording",
                 (unsigned long long)tp_steps);
    else if (start)
        tp_papi_start();
    else
        tp_papi_stop();
    pthread_mutex_unlock(&tp_step_lock);
    tp_depth--;
}

int tp_steps_phase(void)
{
    return atomic_load(&tp_phase);
}

void tp_steps_capturing(int delta)
{
    if (!tp_steps_on())
        return;
    pthread_mutex_lock(&tp_step_lock);
    tp_captures += delta;
    if (!tp_flusher_exiting())
        tp_hot_capture(tp_captures > 0);
    tp_publish();
    pthread_mutex_unlock(&tp_step_lock);
}

static void tp_close_final(int wait_lock, const char *reason)
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
    atomic_store(&tp_phase, -1);
    uint32_t hot = tp_hot_off();
    if (hot & TP_HOT_RECORDING)
        tp_steps_close_window(tp_clock_now(), reason, tp_steps);
    if (locked)
        pthread_mutex_unlock(&tp_step_lock);
}

void tp_steps_close_final(int wait_lock)
{
    /* TRAINPROF_SCHEDULE=all: the one window ends at exit by design */
    tp_close_final(wait_lock, tp_cfg.schedule.all ? NULL : "exit");
}

void tp_steps_close_on_signal(const char *signame)
{
    tp_close_final(0, signame);
}

void tp_steps_warn_unseen(const char *when)
{
    /* TRAINPROF_SCHEDULE=none needs steps only once triggered: the status
     * file and `trainprof trigger` say it when none were counted */
    if (tp_warned_unseen >= 2 || tp_cfg.schedule.all || tp_cfg.schedule.profiler_api ||
        tp_cfg.schedule.none ||
        atomic_load(&tp_signal_kind) >= 0)
        return;
    tp_warned_unseen++;
    char list[512] = "";
    size_t n = 0;
    for (int i = 0; i < tp_cfg.n_signals && n < sizeof list - 1; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? "," : "", tp_cfg.signals[i].text);
    TP_WARN("no step signal seen %s (TRAINPROF_STEP_ON=%s), so nothing was recorded; "
            "call trainprof_step(), set TRAINPROF_STEP_ON (e.g. nvtx:GLOB, launch:GLOB, "
            "call:cudaGraphLaunch), or use TRAINPROF_SCHEDULE=all", when, list);
}

void tp_steps_idle(void)
{
    if (tp_warned_unseen || !tp_begin_tick)
        return;
    struct tp_clock_map m = tp_clock_map_now();
    if (tp_clock_ticks_to_ns(&m, tp_begin_tick, tp_clock_now()) > 60ll * 1000000000ll)
        tp_steps_warn_unseen("in the 60 s since the first CUDA call");
}

void tp_steps_begin(uint64_t start)
{
    /* the name table may now hold what windows record: a quarter of
     * TRAINPROF_BUFFER_MB (intern.h; before activation it holds domain
     * names and NVTX registered strings only, in TP_INTERN_EARLY_BYTES) */
    size_t names = ((size_t)tp_cfg.buffer_mb << 20) / 4;
    tp_intern_set_budget(names > TP_INTERN_EARLY_BYTES ? names : TP_INTERN_EARLY_BYTES);
    for (int i = 0; i < tp_cfg.n_signals; i++) {
        const struct tp_signal *s = &tp_cfg.signals[i];
        if (s->kind == TP_SIGNAL_NVTX && atomic_load(&tp_signal_kind) < 0)
            atomic_store_explicit(&tp_steps_nvtx_live, 1, memory_order_relaxed);
        if (s->kind == TP_SIGNAL_LAUNCH)
            tp_signal_flags |= TP_HOT_LAUNCH_SIG;
        if (s->kind == TP_SIGNAL_CALL) {
            tp_call_api[i] = tp_api_find(s->pattern);
            if (tp_call_api[i])
                tp_signal_flags |= TP_HOT_CALL_SIG;
            else
                TP_WARN("TRAINPROF_STEP_ON item \"%s\": %s is not an intercepted call; it never fires",
                        s->text, s->pattern);
        }
    }
    atomic_store(&tp_steps_active, 1);
    pthread_mutex_lock(&tp_step_lock);
    tp_begin_tick = tp_step_start = start;
    tp_enter_step(tp_step_start);
    pthread_mutex_unlock(&tp_step_lock);
}

void tp_steps_atfork_child(void)
{
    atomic_store(&tp_steps_active, 0);
    atomic_store(&tp_phase, -1);
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
        if (tp_cfg.signals[i].kind == TP_SIGNAL_LAUNCH &&
            tp_kernels_match(func, func_kind, tp_cfg.signals[i].pattern))
            mask |= 1u << i;
    last_func = func;
    last_mask = mask;
    return mask;
}

void tp_call_signal(struct tp_call *c, uint64_t func, int func_kind)
{
    uint32_t hits = (c->hot & TP_HOT_LAUNCH_SIG) && func ? tp_launch_hits(func, func_kind) : 0;
    if ((c->hot & TP_HOT_CALL_SIG)) {
        unsigned api = tp_api_logical(c->api);
        for (int i = 0; i < tp_cfg.n_signals; i++)
            if (tp_cfg.signals[i].kind == TP_SIGNAL_CALL && tp_call_api[i] == api)
                hits |= 1u << i;
    }
    for (int i = 0; hits; i++, hits >>= 1)
        if ((hits & 1) && (atomic_fetch_add(&tp_signal_count[i], 1) + 1) % tp_cfg.signals[i].every == 0)
            tp_steps_signal(tp_cfg.signals[i].kind);
}
