/*
 * test_control.c - the control core driven directly, without LD_PRELOAD:
 * activation (collector/control/lifecycle.c), step signals counted into
 * steps and windows (steps.c) through the schedule, on-demand cycles
 * (trigger_cycle.c) asked for in the trigger file (trigger.c) or handed over
 * directly, and the drain (collector/drain/flusher.c, window.c) that hands
 * each closed window to the handlers.  The output side is a stub sink
 * whose one handler records what it was given: per window, its batch and
 * steps as tp_window says them, the step events dispatched to it, and how
 * often it was opened and closed.
 *
 * Each test runs in a child of its own (CK_FORK=yes, as make check-unit
 * runs them): activation happens once per process.
 */
#include <check.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/config/config.h"
#include "collector/contract/record.h"
#include "collector/contract/sink.h"
#include "collector/control/lifecycle.h"
#include "collector/control/trigger_cycle.h"
#include "collector/control/steps.h"
#include "collector/drain/flusher.h"
#include "tests/unit/tp_test.h"

/* ---- the stub handler: what each window gave it ---------------------------- */

#define MAX_WINDOWS 16
#define MAX_STEPS 32

struct seen {
    uint64_t batch, first_step, last_step, steps_recorded;
    uint64_t win_steps[MAX_STEPS];     /* tp_window.steps[].index */
    int n_win_steps;
    uint64_t ev_steps[MAX_STEPS];      /* TP_REC_STEP events dispatched */
    int n_ev_steps;
    char trigger_id[64];
    uint64_t trigger_requested;
    int closed;
};

static struct seen seen[MAX_WINDOWS];
static _Atomic int n_open, n_close, n_post;

static int stub_implied(const struct tp_window *w)
{
    (void)w;
    return 1;       /* on whatever TRAINPROF_HANDLERS lists */
}

static void *stub_open(const struct tp_window *w)
{
    int i = atomic_fetch_add(&n_open, 1);
    if (i >= MAX_WINDOWS)
        return NULL;
    struct seen *s = &seen[i];
    s->batch = w->batch;
    s->first_step = w->first_step;
    s->last_step = w->last_step;
    s->steps_recorded = w->steps_recorded;
    for (uint64_t k = 0; w->steps && k < w->steps_recorded && k < MAX_STEPS; k++)
        s->win_steps[s->n_win_steps++] = w->steps[k].index;
    if (w->trigger_id)
        snprintf(s->trigger_id, sizeof s->trigger_id, "%s", w->trigger_id);
    s->trigger_requested = w->trigger_requested;
    return s;
}

static void stub_event(void *state, const struct tp_event *ev)
{
    struct seen *s = state;
    if (ev->rec && ev->rec->kind == TP_REC_STEP && s->n_ev_steps < MAX_STEPS)
        s->ev_steps[s->n_ev_steps++] = ev->rec->u.step.index;
}

static int stub_close(void *state, const struct tp_window *w, struct tp_saved *saved)
{
    (void)w;
    struct seen *s = state;
    s->closed++;
    atomic_fetch_add(&n_close, 1);
    snprintf(saved->trace, sizeof saved->trace, "stub-%llu", (unsigned long long)s->batch);
    return 0;
}

static const struct tp_handler stub = {
    .name = "stub", .implied = stub_implied, .open = stub_open, .event = stub_event,
    .close = stub_close,
};

static const struct tp_handler *stub_at(int i)
{
    return i == 0 ? &stub : NULL;
}

static void stub_post_save(const struct tp_window *w, const struct tp_saved *saved)
{
    (void)w;
    (void)saved;
    atomic_fetch_add(&n_post, 1);
}

static void stub_nothing(void) {}

static const struct tp_sink stub_sink = {
    .handler = stub_at, .post_save = stub_post_save, .idle = stub_nothing, .finish = stub_nothing,
};

/* ---- driving the core ------------------------------------------------------- */

static char dir[256];

/* Registered before activation, so it runs after the exit flush (LIFO). */
static void cleanup(void)
{
    tp_test_rmtree(dir);
}

static void activate(const char *schedule)
{
    tp_test_mkdtemp(dir, sizeof dir, "control");
    atexit(cleanup);
    setenv("TRAINPROF_SCHEDULE", schedule, 1);
    setenv("TRAINPROF_ACTIVITIES", "cpu", 1);
    setenv("TRAINPROF_SYS", "none", 1);
    setenv("TRAINPROF_PROFILE_MEMORY", "0", 1);
    setenv("TRAINPROF_LOG", getenv("CTL_LOG") ? getenv("CTL_LOG") : "error", 1);
    setenv("TRAINPROF_RUN_NAME", "ctl", 1);
    ck_assert_int_eq(chdir(dir), 0);            /* the run folder: dir/ctl */
    char run[512];
    snprintf(run, sizeof run, "%s/ctl", dir);
    ck_assert_int_eq(mkdir(run, 0700), 0);
    tp_sink_set(&stub_sink);
    tp_lifecycle_activate();
    ck_assert_int_eq(tp_steps_on(), 1);
}

/* "n" step signals, as trainprof_step() gives them. */
static void steps(int n)
{
    for (int i = 0; i < n; i++)
        tp_steps_signal(TP_SIGNAL_API);
}

static void written(void)
{
    ck_assert_int_eq(tp_flusher_wait_written(10000), 1);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Window "i" recorded steps first..last (tp_window's and the step events). */
static void check_window(int i, uint64_t first, uint64_t last)
{
    const struct seen *s = &seen[i];
    uint64_t n = last - first + 1;
    ck_assert_uint_eq(s->first_step, first);
    ck_assert_uint_eq(s->last_step, last);
    ck_assert_uint_eq(s->steps_recorded, n);
    ck_assert_uint_eq(s->batch, last + 1);          /* steps completed when it closed */
    ck_assert_int_eq(s->n_win_steps, (int)n);
    ck_assert_int_eq(s->n_ev_steps, (int)n);
    for (uint64_t k = 0; k < n; k++) {
        ck_assert_uint_eq(s->win_steps[k], first + k);
        ck_assert_uint_eq(s->ev_steps[k], first + k);
    }
    ck_assert_int_eq(s->closed, 1);
}

/* torch.profiler.schedule(skip_first=1, wait=1, warmup=1, active=2,
 * repeat=2): step 0 skipped, then per cycle one step waits, one warms up
 * and two record; the window of a cycle closes when its last recorded
 * step ends.  Cycle c (0, 1) therefore records steps 1 + 4c + 2 and
 * 1 + 4c + 3, and nothing after the second cycle is recorded. */
START_TEST(test_schedule_windows)
{
    activate("skip_first=1,wait=1,warmup=1,active=2,repeat=2");
    steps(5);                       /* steps 0-4 end: the first cycle's window closes */
    written();
    ck_assert_int_eq(atomic_load(&n_open), 1);
    check_window(0, 3, 4);
    steps(7);                       /* steps 5-11: the second cycle, then nothing */
    written();
    ck_assert_int_eq(atomic_load(&n_open), 2);
    check_window(1, 7, 8);
    steps(8);                       /* the schedule is done: no window opens again */
    written();
    ck_assert_int_eq(atomic_load(&n_open), 2);
    ck_assert_int_eq(atomic_load(&n_close), 2);
    ck_assert_int_eq(atomic_load(&n_post), 2);
    ck_assert_int_eq(tp_steps_phase(), -1);
}
END_TEST

/* A window is flushed once: with one recorded step per cycle each step is
 * a window of its own, and every one reaches the handler once, in order. */
START_TEST(test_each_window_once)
{
    activate("wait=0,warmup=0,active=1,repeat=0");
    ck_assert_int_eq(tp_steps_phase(), 2);
    steps(6);
    written();
    ck_assert_int_eq(atomic_load(&n_open), 6);
    for (int i = 0; i < 6; i++)
        check_window(i, (uint64_t)i, (uint64_t)i);
    ck_assert_int_eq(atomic_load(&n_close), 6);
    ck_assert_int_eq(atomic_load(&n_post), 6);
}
END_TEST

/* "all": one window from activation to exit, closed by the exit flush
 * (which exit's handlers and our destructor both run) and flushed once. */
START_TEST(test_all_at_exit)
{
    activate("all");
    steps(4);
    written();
    ck_assert_int_eq(atomic_load(&n_open), 0);  /* still open */
    tp_steps_close_final(1);
    tp_steps_close_final(1);
    written();
    ck_assert_int_eq(atomic_load(&n_open), 1);
    check_window(0, 0, 3);
    ck_assert_int_eq(atomic_load(&n_close), 1);
}
END_TEST

/* A request handed over directly (as tp-flush does for a trigger file):
 * taken when the next step begins, it warms up at its start step and
 * records "active" steps into one window that carries its id. */
START_TEST(test_trigger_cycle_request)
{
    activate("none");
    steps(3);                                   /* step 3 is under way */
    ck_assert_uint_eq(tp_trigger_cycle_current(), 3);
    struct tp_tc_request r = { .id = "req-1", .start = 5, .warmup = 1, .active = 3 };
    tp_trigger_cycle_request(&r);
    steps(1);                                   /* step 4 begins: taken */
    struct tp_tc_outcome o;
    ck_assert_uint_ne(tp_trigger_cycle_outcome(&o), 0);
    ck_assert_int_eq(o.state, TP_TC_ARMED);
    ck_assert_uint_eq(o.first, 6);
    ck_assert_uint_eq(o.last, 8);
    ck_assert_int_eq(o.late, 0);
    steps(12);
    written();
    ck_assert_int_eq(atomic_load(&n_open), 1);
    check_window(0, 6, 8);
    ck_assert_str_eq(seen[0].trigger_id, "req-1");
    ck_assert_uint_eq(seen[0].trigger_requested, 5);
}
END_TEST

/* The trigger file (trigger.c), polled by tp-flush: the request it holds
 * produces one window, named by its id. */
START_TEST(test_trigger_file)
{
    char trig[512];
    activate("none");
    /* A file's times come from the kernel's coarse clock, which lags the
     * precise one by up to a tick (1-10 ms): a trigger written within a
     * tick of activation is dated before the precise activation time, and
     * was taken for a stale file ("predates this process": 2 runs in 18
     * under ASan on a loaded machine).  The file below is dated by the
     * coarse clock just after activation, as such a file would be. */
    struct timespec coarse;
    clock_gettime(CLOCK_REALTIME_COARSE, &coarse);
    snprintf(trig, sizeof trig, "%s/ctl/trigger", dir);  /* {run_name}/trigger by default */
    steps(2);
    FILE *f = fopen(trig, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "id=file-1 start=400 warmup=1 active=2\n");
    fclose(f);
    struct timespec times[2] = {coarse, coarse};
    ck_assert_int_eq(utimensat(AT_FDCWD, trig, times, 0), 0);
    /* step on until tp-flush has read it and a step has taken it (it polls
     * at most every 0.5 s); the start lies far enough ahead */
    struct tp_tc_outcome o;
    for (int i = 0; i < 300 && !tp_trigger_cycle_outcome(&o); i++) {
        steps(1);
        sleep_ms(10);
    }
    ck_assert_uint_ne(o.seq, 0);
    ck_assert_str_eq(o.id, "file-1");
    ck_assert_int_eq(o.state, TP_TC_ARMED);
    ck_assert_uint_lt(tp_trigger_cycle_current(), 400);
    steps((int)(410 - tp_trigger_cycle_current()));
    written();
    ck_assert_int_eq(atomic_load(&n_open), 1);
    check_window(0, 401, 402);
    ck_assert_str_eq(seen[0].trigger_id, "file-1");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("control");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_schedule_windows);
    tcase_add_test(tc, test_each_window_once);
    tcase_add_test(tc, test_all_at_exit);
    tcase_add_test(tc, test_trigger_cycle_request);
    tcase_add_test(tc, test_trigger_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
