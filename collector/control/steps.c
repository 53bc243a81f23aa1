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
 *
 * The flight recorder (TRAINPROF_FLIGHT=N) is a window that is never saved
 * unless a dump is asked for: outside windows the hot word records (the
 * recording path itself, so a call costs what it costs in a window, and
 * the records are a window's, drained by window.c) under a generation of
 * its own, with no CUPTI, sampler or torch operator ranges (tp_phase stays
 * 0).  Its steps get markers as a window's do.  Oldest steps are
 * overwritten by tp-flush (tp_flusher_flight_trim -> buffer.c tp_buf_trim:
 * records begun before the oldest kept step's start are given back), when
 * more than N steps ended, or when the kept steps' chunks (tp_buf_chunks_taken
 * per step) and room for one more step like the last pass TRAINPROF_FLIGHT_MB;
 * a step larger than the cap alone loses its tail to tp_buf_limit, counted
 * as the window's dropped records are.  A dump closes the flight window
 * with a reason and hands it to tp-flush as any window, and a fresh one
 * opens at once: at a step TRAINPROF_FLIGHT_SLOW times slower than the
 * running median of the 50 steps before it and 5 ms slower (at least 10
 * known, one dump per 100 steps; not for the step that waits for a
 * window's GPU side), at
 * a failed allocation (tp_steps_flight_fail, after the call's record is
 * published, so that it is the dump's last event) and at a termination or
 * fatal signal (tp_close_final).  A window of the schedule, a trigger or
 * the profiler API supersedes it: the flight window is handed over to be
 * drained unsaved (before the window, in queue order), and a new one opens
 * at the first step outside windows.  At a clean exit it is left unsaved.
 */
#include "steps.h"
#include "collector/modules/memtrack.h"
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

/* the flight recorder (TRAINPROF_FLIGHT), under tp_step_lock */
#define TP_FL_MEDIAN 50            /* the running median's steps */
#define TP_FL_MEDIAN_MIN 10        /* steps known before a step can be slow */
#define TP_FL_SLOW_EVERY 100       /* at most one slow-step dump per this many steps */
/* A slow step must also pass the median by this much: steps of tens of µs
 * (the fake runtime's loops) passed 3x the median by a scheduler's
 * hiccup alone, a dump of nothing worth a file */
#define TP_FL_SLOW_MIN_NS 5000000ll
struct tp_fl_step {
    uint64_t index, start, chunks;
    uint64_t dropped;                      /* tp_buf_dropped() when it began */
};
static struct tp_handoff tp_fl;            /* the flight window, while tp_fl_open */
static int tp_fl_open;
static uint64_t tp_fl_dropped_mark, tp_fl_lost_mark, tp_fl_pops_mark;
static struct tp_fl_step tp_fl_ring[TP_FLIGHT_MAX]; /* the kept steps that ended, oldest at tp_fl_head */
static unsigned tp_fl_head, tp_fl_n;
static uint64_t tp_fl_chunks_kept;         /* their chunks */
static uint64_t tp_fl_chunk_mark;          /* tp_buf_chunks_taken() when the step under way began */
static uint64_t tp_fl_drop_mark;           /* tp_buf_dropped() then */
/* The hard limit's slack over TRAINPROF_FLIGHT_MB, chunks: each thread's
 * chunk under way and the step tp-flush has not given back yet (a limit
 * at the cap alone dropped 13,394 of a 1 MiB ring's records while the
 * kept steps were within it) */
#define TP_FL_SLACK_CHUNKS 8
static uint64_t tp_fl_dur[TP_FL_MEDIAN];   /* the last steps' durations, ticks */
static uint64_t tp_fl_sorted[TP_FL_MEDIAN]; /* the same, sorted: the median is one load (it
                                               was an insertion sort per step, 6,400
                                               instructions of the training thread's) */
static unsigned tp_fl_ndur, tp_fl_idur;
static int64_t tp_fl_last_slow = -1;       /* the step of the last slow-step dump */
static uint32_t tp_mode_flags;             /* the hot word's flags last set by tp_enter_step */

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

static void tp_flight_close(uint64_t now, const char *reason, uint64_t step, int queue);

static void tp_steps_open_window(uint64_t now)
{
    if (tp_fl_open)
        tp_flight_close(now, NULL, tp_steps, 1);   /* drained unsaved, before this window */
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

/* ---- the flight recorder (tp_step_lock held) ------------------------------- */

static uint32_t tp_flight_cap_chunks(void)
{
    uint64_t c = ((uint64_t)tp_cfg.flight_mb << 20) / TP_CHUNK_BYTES;
    return c ? (uint32_t)(c < UINT32_MAX ? c : UINT32_MAX - 1) : 1;
}

static void tp_flight_open(uint64_t now)
{
    tp_gen++;
    memset(&tp_fl, 0, sizeof tp_fl);
    tp_fl.flight = 1;
    tp_fl.gen = tp_gen;
    tp_fl.first_step = tp_steps;
    tp_fl.start_tick = now;
    tp_clock_read_triple(&tp_fl.start_clock);
    tp_fl_dropped_mark = tp_buf_dropped();
    tp_steps_range_losses(&tp_fl_lost_mark, &tp_fl_pops_mark);
    tp_fl_head = tp_fl_n = 0;
    tp_fl_chunks_kept = 0;
    tp_fl_chunk_mark = tp_buf_chunks_taken();
    tp_fl_drop_mark = tp_fl_dropped_mark;
    /* a backstop for one step larger than the cap; chunks still held by a
     * window being written count on top (they go back as it drains) */
    uint64_t lim = (uint64_t)tp_buf_chunks_in_use() + tp_flight_cap_chunks() + TP_FL_SLACK_CHUNKS;
    tp_buf_limit(lim < UINT32_MAX ? (uint32_t)lim : UINT32_MAX - 1);
    tp_fl_open = 1;
}

/* Close the flight window: dump it for "reason" (asked at "step"), or with
 * reason NULL drain it unsaved ("queue": hand it over; at exit it is left). */
static void tp_flight_close(uint64_t now, const char *reason, uint64_t step, int queue)
{
    tp_fl_open = 0;
    tp_buf_limit(UINT32_MAX);
    tp_fl.batch = tp_steps;
    tp_fl.end_tick = now;
    tp_clock_read_triple(&tp_fl.end_clock);
    /* the records the kept steps lost (and the step under way) */
    tp_fl.dropped = tp_buf_dropped() - (tp_fl_n ? tp_fl_ring[tp_fl_head].dropped : tp_fl_drop_mark);
    tp_steps_range_losses(&tp_fl.ranges_lost, &tp_fl.unmatched_pops);
    tp_fl.ranges_lost -= tp_fl_lost_mark;
    tp_fl.unmatched_pops -= tp_fl_pops_mark;
    tp_fl.step_signal = tp_signal_text();
    tp_fl.flight_reason = reason;
    tp_fl.flight_step = step;
    tp_fl.steps = tp_fl_n;
    if (tp_fl_n) {          /* from the oldest step kept */
        tp_fl.first_step = tp_fl_ring[tp_fl_head].index;
        tp_fl.start_tick = tp_fl_ring[tp_fl_head].start;
    } else {
        tp_fl.first_step = tp_steps;
    }
    tp_fl.flight_trim_tick = tp_fl.start_tick;
    if (!reason && !queue)
        return;
    if (reason)
        tp_modules_window_end(tp_fl.gen, now);  /* the memory totals now: the dump's end
                                                   (window.c finds its start in its records) */
    if (tp_flusher_queue(&tp_fl) != 0 && reason)
        TP_ERROR("flight recorder dump (%s, step %llu) not saved: too many windows already "
                 "waiting to be written", reason, (unsigned long long)step);
}

/* The median of the last steps' durations (ticks), 0 with too few known. */
static uint64_t tp_flight_median(void)
{
    if (tp_fl_ndur < TP_FL_MEDIAN_MIN)
        return 0;
    const uint64_t *v = tp_fl_sorted;
    unsigned n = tp_fl_ndur;
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The first place in tp_fl_sorted[0, n) holding "x" or more. */
static unsigned tp_flight_lower(uint64_t x, unsigned n)
{
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (tp_fl_sorted[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Step "index", begun at "start", ended at "now" outside windows: its
 * marker, its place in the ring (the oldest overwritten), and the slow-step
 * test ("may_dump": the step did not wait for a window's GPU side). */
static void tp_flight_step_end(uint64_t index, uint64_t start, uint64_t now, uint32_t signal,
                               uint64_t median, int may_dump)
{
    uint64_t t0 = start > tp_fl.start_tick ? start : tp_fl.start_tick;
    struct tp_record r;
    memset(&r, 0, sizeof r);
    r.kind = TP_REC_STEP;
    r.gen = tp_fl.gen;
    r.t0 = t0;
    r.t1 = now;
    r.u.step.index = index;
    r.u.step.signal = signal;
    tp_buf_write_step(&r);

    uint64_t taken = tp_buf_chunks_taken(), dropped = tp_buf_dropped();
    uint64_t mine = taken - tp_fl_chunk_mark;
    tp_fl_chunk_mark = taken;
    unsigned cap = (unsigned)tp_cfg.flight;
    if (tp_fl_n == cap) {           /* full: the oldest goes */
        tp_fl_chunks_kept -= tp_fl_ring[tp_fl_head].chunks;
        tp_fl_head = (tp_fl_head + 1) % cap;
        tp_fl_n--;
    }
    tp_fl_ring[(tp_fl_head + tp_fl_n) % cap] = (struct tp_fl_step){ index, t0, mine, tp_fl_drop_mark };
    tp_fl_drop_mark = dropped;
    tp_fl_n++;
    tp_fl_chunks_kept += mine;
    /* room within TRAINPROF_FLIGHT_MB for the step now beginning and for
     * the oldest step tp-flush has yet to give back, each like this one */
    uint64_t limit = tp_flight_cap_chunks();
    while (tp_fl_n > 1 && tp_fl_chunks_kept + 2 * mine > limit) {
        tp_fl_chunks_kept -= tp_fl_ring[tp_fl_head].chunks;
        tp_fl_head = (tp_fl_head + 1) % cap;
        tp_fl_n--;
    }
    if (tp_fl_ring[tp_fl_head].start > tp_fl.start_tick)
        tp_flusher_flight_trim(tp_fl.gen, tp_fl_ring[tp_fl_head].start);

    uint64_t dur = now - start;
    if (!may_dump || !median || (double)dur <= tp_cfg.flight_slow * (double)median ||
        (tp_fl_last_slow >= 0 && index < (uint64_t)tp_fl_last_slow + TP_FL_SLOW_EVERY))
        return;
    struct tp_clock_map m = tp_clock_map_now();
    if (tp_clock_ticks_to_ns(&m, median, dur) < TP_FL_SLOW_MIN_NS)
        return;
    tp_fl_last_slow = (int64_t)index;
    tp_fl.flight_step_ns = (uint64_t)tp_clock_ticks_to_ns(&m, start, now);
    tp_fl.flight_median_ns = (uint64_t)tp_clock_ticks_to_ns(&m, 0, median);
    tp_fl.flight_threshold_ns = (uint64_t)((double)tp_fl.flight_median_ns * tp_cfg.flight_slow);
    tp_steps++;             /* the dump's {batch}: the slow step is done */
    tp_flight_close(now, "slow-step", index, 1);
    tp_steps--;
}

/* Note a step's duration for the running median (every step). */
static void tp_flight_note(uint64_t dur)
{
    unsigned n = tp_fl_ndur;
    if (n == TP_FL_MEDIAN) {            /* the oldest, about to be overwritten, leaves */
        unsigned i = tp_flight_lower(tp_fl_dur[tp_fl_idur], n);
        memmove(&tp_fl_sorted[i], &tp_fl_sorted[i + 1], (n - i - 1) * sizeof *tp_fl_sorted);
        n--;
    }
    unsigned j = tp_flight_lower(dur, n);
    memmove(&tp_fl_sorted[j + 1], &tp_fl_sorted[j], (n - j) * sizeof *tp_fl_sorted);
    tp_fl_sorted[j] = dur;
    tp_fl_ndur = n + 1;
    tp_fl_dur[tp_fl_idur] = dur;
    tp_fl_idur = (tp_fl_idur + 1) % TP_FL_MEDIAN;
}

/* The dump's reason for a call of "api" that returned "status", NULL if
 * none.  Runtime and driver share these codes: 2 out of memory
 * (cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY); 214 and 700-719
 * the errors that leave the context unusable (ECC uncorrectable, illegal
 * address, launch timeout, hardware stack error, illegal instruction,
 * misaligned address, invalid address space, invalid PC, launch failure;
 * not 701, 703-713: launch out of resources, peer access and the like,
 * which the program can recover from).  NCCL's 1, 2, 3 and 6 (unhandled
 * CUDA error, system, internal, remote); 4 and 5 (invalid argument or
 * usage) are the caller's mistakes, returned before any communication. */
static const char *tp_flight_reason_of(unsigned api, int32_t status)
{
    int layer = tp_api_layer(api);
    if (layer == TP_LAYER_RUNTIME || layer == TP_LAYER_DRIVER) {
        if (status == 2)
            return "oom";
        if (status == 214 || status == 700 || status == 702 || (status >= 714 && status <= 719))
            return "cuda-error";
        return NULL;
    }
    if (layer == TP_LAYER_LIBRARY && strncmp(tp_api_name(api), "nccl", 4) == 0 &&
        (status == 1 || status == 2 || status == 3 || status == 6))
        return "nccl-error";
    return NULL;
}

struct tp_record *tp_steps_flight_status(struct tp_record *r, unsigned api, int32_t status)
{
    if (!tp_cfg.flight)
        return r;
    const char *reason = tp_flight_reason_of(api, status);
    return reason ? tp_steps_flight_fail(r, reason) : r;
}

struct tp_record *tp_steps_flight_fail(struct tp_record *r, const char *reason)
{
    if (!tp_cfg.flight || !tp_steps_on())
        return r;
    if (r)
        tp_buf_commit();        /* the failed call, published: the dump's last event */
    pthread_mutex_lock(&tp_step_lock);
    if (tp_fl_open && !tp_flusher_exiting()) {
        uint64_t now = tp_clock_now();
        tp_flight_close(now, reason, tp_steps, 1);
        tp_flight_open(now);
        tp_hot_mode(tp_mode_flags, tp_gen);
    }
    pthread_mutex_unlock(&tp_step_lock);
    return NULL;
}

int tp_steps_flight_now(const char *reason, uint64_t *step)
{
    if (!tp_cfg.flight || !tp_steps_on())
        return 1;
    if (pthread_mutex_trylock(&tp_step_lock) != 0)
        return -1;
    int rc = 1;
    if (tp_fl_open && !tp_flusher_exiting()) {
        uint64_t now = tp_clock_now();
        if (step)
            *step = tp_steps;
        tp_flight_close(now, reason, tp_steps, 1);
        tp_flight_open(now);
        tp_hot_mode(tp_mode_flags, tp_gen);
        rc = 0;
    }
    pthread_mutex_unlock(&tp_step_lock);
    return rc;
}

/* The hang doctor's dump (hang.h, tp_hang_set_flight). */
static int tp_steps_flight_hang(void)
{
    return tp_steps_flight_now("hang", NULL) < 0 ? -1 : 0;
}

/* Set the hot word for the action of the step now beginning. */
static void tp_enter_step(uint64_t now)
{
    tp_trigger_cycle_step(tp_steps);         /* a trigger's request, if one came */
    enum tp_action a = tp_action(tp_steps);
    int record = a == TP_RECORD || a == TP_RECORD_AND_SAVE;
    if (record && !tp_recording)
        tp_steps_open_window(now);
    if (!record && !tp_recording && tp_cfg.flight > 0 && !tp_fl_open)
        tp_flight_open(now);
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
    if (record || tp_fl_open)
        flags |= TP_HOT_RECORDING;
    tp_mode_flags = flags;
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

/* Whether TRAINPROF_STEP_ON lists a signal of "kind": the others check
 * their own lists as they match (a range's glob, a launch's, a call's). */
static int tp_signal_listed(enum tp_signal_kind kind)
{
    for (int i = 0; i < tp_cfg.n_signals; i++)
        if (tp_cfg.signals[i].kind == kind)
            return 1;
    return 0;
}

void tp_steps_signal(enum tp_signal_kind kind)
{
    if (!tp_steps_on() || tp_depth > 0)
        return;
    /* trainprof_step() ends a step only where "api" is listed: a program
     * (or `trainprof run`'s hook) calling it must not take the place of
     * the signal the user chose */
    if (kind == TP_SIGNAL_API && !tp_signal_listed(TP_SIGNAL_API))
        return;
    int want = -1;
    if (!atomic_compare_exchange_strong(&tp_signal_kind, &want, (int)kind) && want != (int)kind)
        return;
    if (want < 0 && kind != TP_SIGNAL_NVTX)
        atomic_store_explicit(&tp_steps_nvtx_live, 0, memory_order_relaxed);
    tp_depth++;
    pthread_mutex_lock(&tp_step_lock);
    if (!tp_flusher_exiting()) {
        int waits = tp_fl_open && tp_action(tp_steps + 1) != TP_NONE;
        tp_await_on();
        uint64_t now = tp_clock_now();
        enum tp_action a = tp_action(tp_steps);
        uint64_t median = tp_cfg.flight > 0 ? tp_flight_median() : 0;
        if (tp_cfg.flight > 0)
            tp_flight_note(now - tp_step_start);
        if (a == TP_RECORD || a == TP_RECORD_AND_SAVE)
            tp_step_record(tp_steps, tp_step_start, now, (uint32_t)kind);
        else if (tp_fl_open)
            tp_flight_step_end(tp_steps, tp_step_start, now, (uint32_t)kind, median, !waits);
        tp_steps++;
        tp_step_start = now;
        tp_hang_step(tp_steps, now);
        tp_mem_step(tp_steps);
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

/* "reason": the window's partial_reason; "flight_reason": the flight
 * window's dump reason (NULL: left unsaved). */
static void tp_close_final(int wait_lock, const char *reason, const char *flight_reason)
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
    tp_cur.at_exit = 1;     /* its summary lists the memory still held */
    if ((hot & TP_HOT_RECORDING) && tp_recording)
        tp_steps_close_window(tp_clock_now(), reason, tp_steps);
    else if ((hot & TP_HOT_RECORDING) && tp_fl_open)
        tp_flight_close(tp_clock_now(), flight_reason, tp_steps, 0);
    if (locked)
        pthread_mutex_unlock(&tp_step_lock);
}

void tp_steps_close_final(int wait_lock)
{
    /* TRAINPROF_SCHEDULE=all: the one window ends at exit by design */
    tp_close_final(wait_lock, tp_cfg.schedule.all ? NULL : "exit", NULL);
}

void tp_steps_close_on_signal(const char *signame)
{
    tp_close_final(0, signame, signame);
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
    tp_hang_set_flight(tp_steps_flight_hang);
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

__thread struct tp_launch_hit tp_launch_cache[TP_LAUNCH_CACHE] __attribute__((tls_model("initial-exec")));

/* Which signals a launch of "func" hits, one bit per signal index. */
static uint32_t tp_launch_hits(uint64_t func, int func_kind)
{
    struct tp_launch_hit *h = tp_launch_slot(func);
    if (h->func == func)
        return h->mask;
    uint32_t mask = 0;
    for (int i = 0; i < tp_cfg.n_signals; i++)
        if (tp_cfg.signals[i].kind == TP_SIGNAL_LAUNCH &&
            tp_kernels_match(func, func_kind, tp_cfg.signals[i].pattern))
            mask |= 1u << i;
    h->func = func;
    h->mask = mask;
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

