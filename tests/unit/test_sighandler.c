/*
 * test_sighandler.c - collector/common/sighandler.c, the rule lifecycle.c
 * (SIGTERM, SIGINT) and trigger.c (TRAINPROF_TRIGGER_SIGNAL) share: ours
 * only over SIG_DFL, never over the program's handler, SA_SIGINFO handler
 * or SIG_IGN; the default put back.  Each test runs in its own forked
 * process (CK_FORK=yes, as make check-unit runs them).
 */
#include "collector/common/sighandler.h"
#include "tp_test.h"

#include <signal.h>

static volatile sig_atomic_t ours_got, theirs_got;

static void ours(int sig)
{
    ours_got = sig;
}

static void theirs(int sig)
{
    theirs_got = sig;
}

static void theirs_info(int sig, siginfo_t *si, void *ctx)
{
    (void)si;
    (void)ctx;
    theirs_got = sig;
}

static struct sigaction now(int sig)
{
    struct sigaction cur;
    ck_assert_int_eq(sigaction(sig, NULL, &cur), 0);
    return cur;
}

START_TEST(test_installed_over_the_default)
{
    signal(SIGUSR1, SIG_DFL);
    ck_assert_int_eq(tp_sighandler_install_over_default(SIGUSR1, ours), 1);
    struct sigaction cur = now(SIGUSR1);
    ck_assert(cur.sa_handler == ours);
    ck_assert_int_eq(cur.sa_flags & (SA_RESTART | SA_SIGINFO), SA_RESTART);
    raise(SIGUSR1);
    ck_assert_int_eq(ours_got, SIGUSR1);
}
END_TEST

START_TEST(test_never_over_the_programs)
{
    signal(SIGUSR1, theirs);
    ck_assert_int_eq(tp_sighandler_install_over_default(SIGUSR1, ours), 0);
    ck_assert(now(SIGUSR1).sa_handler == theirs);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = theirs_info;
    sa.sa_flags = SA_SIGINFO;
    ck_assert_int_eq(sigaction(SIGUSR2, &sa, NULL), 0);
    ck_assert_int_eq(tp_sighandler_install_over_default(SIGUSR2, ours), 0);
    ck_assert(now(SIGUSR2).sa_sigaction == theirs_info);

    signal(SIGRTMIN, SIG_IGN);
    ck_assert_int_eq(tp_sighandler_install_over_default(SIGRTMIN, ours), 0);
    ck_assert(now(SIGRTMIN).sa_handler == SIG_IGN);

    raise(SIGUSR1);
    raise(SIGRTMIN);
    ck_assert_int_eq(theirs_got, SIGUSR1);
    ck_assert_int_eq(ours_got, 0);
}
END_TEST

START_TEST(test_refused_and_unreadable)
{
    /* SIGKILL's disposition reads as SIG_DFL, but no handler may take it */
    ck_assert_int_eq(tp_sighandler_install_over_default(SIGKILL, ours), -1);
    ck_assert_int_eq(tp_sighandler_install_over_default(0, ours), 0); /* not a signal */
}
END_TEST

START_TEST(test_default_put_back)
{
    signal(SIGUSR1, SIG_DFL);
    ck_assert_int_eq(tp_sighandler_install_over_default(SIGUSR1, ours), 1);
    tp_sighandler_default(SIGUSR1);
    struct sigaction cur = now(SIGUSR1);
    ck_assert(cur.sa_handler == SIG_DFL);
    ck_assert_int_eq(cur.sa_flags & SA_SIGINFO, 0);
    /* and ours can go in again */
    ck_assert_int_eq(tp_sighandler_install_over_default(SIGUSR1, ours), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sighandler");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_installed_over_the_default);
    tcase_add_test(tc, test_never_over_the_programs);
    tcase_add_test(tc, test_refused_and_unreadable);
    tcase_add_test(tc, test_default_put_back);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
