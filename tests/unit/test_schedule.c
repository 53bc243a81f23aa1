/*
 * test_schedule.c - tp_schedule_action against an independent model of
 * torch.profiler.schedule: the phase is found by walking the cycle step by
 * step (no modulo, no division), over many parameter sets and 200 steps.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collector/config/schedule.h"
#include "tests/unit/tp_test.h"

static enum tp_action model(const struct tp_schedule *s, uint64_t step)
{
    if (s->all)
        return TP_RECORD;
    if (step < s->skip_first)
        return TP_NONE;
    uint64_t cycle = 0, pos = 0;
    uint64_t n = s->wait + s->warmup + s->active;
    for (uint64_t i = s->skip_first; i < step; i++)
        if (++pos == n) {
            pos = 0;
            cycle++;
        }
    if (s->repeat && cycle >= s->repeat)
        return TP_NONE;
    if (pos < s->wait)
        return TP_NONE;
    if (pos < s->wait + s->warmup)
        return TP_WARMUP;
    return pos == n - 1 ? TP_RECORD_AND_SAVE : TP_RECORD;
}

START_TEST(test_against_model)
{
    int cases = 0;
    for (uint64_t skip = 0; skip <= 3; skip++)
        for (uint64_t wait = 0; wait <= 3; wait++)
            for (uint64_t warm = 0; warm <= 2; warm++)
                for (uint64_t act = 1; act <= 4; act++)
                    for (uint64_t rep = 0; rep <= 3; rep++) {
                        struct tp_schedule s = { skip, wait, warm, act, rep, 0 };
                        for (uint64_t step = 0; step < 200; step++) {
                            enum tp_action want = model(&s, step), got = tp_schedule_action(&s, step);
                            ck_assert_msg(want == got, "skip=%d wait=%d warmup=%d active=%d repeat=%d step=%d: %s != %s",
                                          (int)skip, (int)wait, (int)warm, (int)act, (int)rep, (int)step,
                                          tp_action_name(got), tp_action_name(want));
                            /* finished means nothing later records or warms up */
                            if (tp_schedule_finished(&s, step))
                                ck_assert(want == TP_NONE);
                        }
                        cases++;
                    }
    ck_assert_int_eq(cases, 4 * 4 * 3 * 4 * 4);
}
END_TEST

START_TEST(test_composer_defaults)
{
    struct tp_schedule s = { 0, 0, 1, 4, 1, 0 };
    enum tp_action want[] = { TP_WARMUP, TP_RECORD, TP_RECORD, TP_RECORD, TP_RECORD_AND_SAVE, TP_NONE, TP_NONE };
    for (unsigned i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_int_eq(tp_schedule_action(&s, i), want[i]);
    ck_assert(tp_schedule_finished(&s, 5));
    ck_assert(!tp_schedule_finished(&s, 4));
}
END_TEST

START_TEST(test_all_and_repeat_zero)
{
    struct tp_schedule all = { 0, 0, 0, 1, 0, 1 };
    struct tp_schedule cyc = { 0, 1, 1, 1, 0, 0 };
    for (uint64_t i = 0; i < 1000; i++) {
        ck_assert_int_eq(tp_schedule_action(&all, i), TP_RECORD);
        ck_assert_int_eq(tp_schedule_action(&cyc, i), (enum tp_action)(i % 3 == 0 ? TP_NONE : i % 3 == 1 ? TP_WARMUP : TP_RECORD_AND_SAVE));
        ck_assert(!tp_schedule_finished(&cyc, i));
    }
}
END_TEST

/* TRAINPROF_SCHEDULE=profiler-api, as parsed (the keys keep their
 * defaults): no step records or warms up by itself, and the schedule never
 * finishes (a cudaProfilerStart may come at any step: steps.c). */
START_TEST(test_profiler_api)
{
    struct tp_schedule p = { 0, 0, 1, 4, 1, 0, 1 };
    for (uint64_t i = 0; i < 1000; i++) {
        ck_assert_int_eq(tp_schedule_action(&p, i), TP_NONE);
        ck_assert(!tp_schedule_finished(&p, i));
    }
}
END_TEST

/* TRAINPROF_SCHEDULE=none: nothing by itself, whatever keys were zeroed or
 * not (windows come from triggers, steps.c), and finished from step 0. */
START_TEST(test_none)
{
    struct tp_schedule s = { .warmup = 1, .active = 4, .repeat = 0, .none = 1 };
    for (uint64_t step = 0; step < 100; step++)
        ck_assert_int_eq(tp_schedule_action(&s, step), TP_NONE);
    ck_assert_int_eq(tp_schedule_finished(&s, 0), 1);
}
END_TEST

/* The start-up line's words agree with the schedule: the first window's
 * recorded steps, the period, and one window where repeat is 1 (torch's
 * schedule without repeat repeats; ours records once). */
START_TEST(test_describe)
{
    static const struct {
        struct tp_schedule s;
        const char *want;
    } cases[] = {
        { { .warmup = 1, .active = 4, .repeat = 1 },
          "records steps 1-4, one window (repeat=0: every 5 steps until exit)" },
        { { .skip_first = 2, .wait = 5, .warmup = 1, .active = 3, .repeat = 1 },
          "records steps 8-10, one window (repeat=0: every 9 steps until exit)" },
        { { .warmup = 1, .active = 1, .repeat = 0 }, "records step 1, then every 2 steps until exit" },
        { { .wait = 1, .warmup = 1, .active = 2, .repeat = 3 },
          "records steps 2-3, then every 4 steps, 3 windows in all" },
        { { .all = 1 }, "records every step, one window saved at exit" },
        { { .none = 1 }, "records only when triggered" },
        { { .profiler_api = 1, .warmup = 1, .active = 4, .repeat = 1 },
          "records from cudaProfilerStart to cudaProfilerStop" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[160];
        ck_assert_str_eq(tp_schedule_describe(&cases[i].s, buf, sizeof buf), cases[i].want);
        if (cases[i].s.all || cases[i].s.none || cases[i].s.profiler_api)
            continue;
        /* the steps named are the first window's recorded ones */
        unsigned long long a, b;
        int n = sscanf(buf, "records steps %llu-%llu", &a, &b);
        if (n != 2 && sscanf(buf, "records step %llu", &a) == 1)
            b = a;
        for (uint64_t st = 0; st <= b + 1; st++) {
            enum tp_action x = tp_schedule_action(&cases[i].s, st);
            ck_assert_int_eq(x == TP_RECORD || x == TP_RECORD_AND_SAVE, st >= a && st <= b);
        }
    }
}
END_TEST

/* The one printer: each form as TRAINPROF_SCHEDULE says it (profiler-api's
 * keys keep their defaults, unused: its word is printed, not them), and a
 * buffer too small is cut, never overrun. */
START_TEST(test_show)
{
    static const struct {
        struct tp_schedule s;
        const char *want;
    } cases[] = {
        { { .warmup = 1, .active = 4, .repeat = 1 },
          "skip_first=0,wait=0,warmup=1,active=4,repeat=1" },
        { { .skip_first = 2, .wait = 5, .warmup = 0, .active = 3, .repeat = 0 },
          "skip_first=2,wait=5,warmup=0,active=3,repeat=0" },
        { { .all = 1 }, "all" },
        { { .none = 1 }, "none" },
        { { .profiler_api = 1, .warmup = 1, .active = 4, .repeat = 1 }, "profiler-api" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256];
        ck_assert_ptr_eq(tp_schedule_show(&cases[i].s, buf, sizeof buf), buf);
        ck_assert_str_eq(buf, cases[i].want);
        char small[12];
        memset(small, 'x', sizeof small);
        tp_schedule_show(&cases[i].s, small, 8);
        ck_assert_int_eq(strncmp(small, cases[i].want, 7), 0);
        ck_assert_int_eq(small[strlen(cases[i].want) < 7 ? strlen(cases[i].want) : 7], '\0');
        ck_assert_int_eq(small[8], 'x');
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_against_model);
    tcase_add_test(tc, test_composer_defaults);
    tcase_add_test(tc, test_all_and_repeat_zero);
    tcase_add_test(tc, test_profiler_api);
    tcase_add_test(tc, test_none);
    tcase_add_test(tc, test_describe);
    tcase_add_test(tc, test_show);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
