/*
 * test_exec.c - the exec handler: the command is expanded ({path}, the format-string
 * variables), runs with TRAINPROF_ENABLED=0 and its output in the reports
 * folder's rank{rank}.exec.log, never on our stderr, a
 * failure is one warning, tp_exec_busy() holds while it runs, and reaping
 * waits only for our own pids: a child of the host keeps its status.
 */
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/config/config.h"
#include "handlers/exec.h"
#include "handlers/handler.h"
#include "tests/unit/tp_test.h"

static char root[64];
static char trace[160];
static char cmd[512];
static struct tp_window win;
static struct tp_saved saved;     /* what the handlers saved */

static void cleanup(void)
{
    tp_test_rmtree(root);
}

static void setup_window(const char *exec)
{
    if (!root[0])
        tp_test_mkdtemp(root, sizeof root, "exec");
    if (win.exec_env) {          /* the copy run_handler took for the last window */
        char **env = (char **)win.exec_env;
        for (char **e = env; *e; e++)
            free(*e);
        free(env);
    }
    memset(&win, 0, sizeof win);
    memset(&saved, 0, sizeof saved);
    win.run_name = "myrun";
    win.hostname = "host";
    win.pid = 77;
    win.rank = 2;
    win.world_size = 4;
    win.batch = 7;
    win.exec = exec;
    win.keep = -1;
    win.reports_folder = root;
    snprintf(trace, sizeof trace, "%s/t.json", root);
    snprintf(saved.trace, sizeof saved.trace, "%s", trace);
}

/* TRAINPROF_EXEC on what the handlers saved: tp_exec_saved's result, or 1
 * when it is unset and the post-save stage (as the flush thread runs it)
 * has nothing to run. */
static int run_handler(void)
{
    if (!win.exec_env)
        win.exec_env = tp_config_exec_env();   /* as at activation: after the test's setenv */
    if (!win.exec || !win.exec[0]) {
        tp_handlers_sink.post_save(&win, &saved);
        return 1;
    }
    return tp_exec_saved(&win, &saved);
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Our stderr into "path" (each test runs in its own process: CK_FORK). */
static void stderr_to(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(dup2(fd, 2), 2);
    close(fd);
}

START_TEST(test_expands_and_disables)
{
    setup_window(NULL);
    setenv("TRAINPROF_ENABLED", "1", 1);
    snprintf(cmd, sizeof cmd, "echo {path} {rank} {world_size} {batch} {run_name} "
             "$TRAINPROF_ENABLED > %s/out; echo hello", root);
    win.exec = cmd;
    char err[200];
    snprintf(err, sizeof err, "%s/err", root);
    stderr_to(err);
    ck_assert_int_eq(run_handler(), 0);
    ck_assert_int_eq(tp_exec_reap(5000), 0);
    char out[200], want[300];
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(want, sizeof want, "%s 2 4 7 myrun 0\n", trace);
    ck_assert_str_eq(slurp(out), want);
    ck_assert_str_eq(slurp(err), "");          /* the job's stderr is the job's */
    char log[200];
    snprintf(log, sizeof log, "%s/rank2.exec.log", root);
    const char *text = slurp(log);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strncmp(text, "trainprof: ", 11) == 0, "%s", text);
    const char *nl = strchr(text, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_str_eq(nl + 1, "hello\n");
}
END_TEST

START_TEST(test_failure_warns_once)
{
    setup_window("exit 3");
    char err[200];
    snprintf(err, sizeof err, "%s/err", root);
    stderr_to(err);
    ck_assert_int_eq(run_handler(), 0);
    ck_assert_int_eq(tp_exec_reap(5000), 0);
    const char *text = slurp(err);
    ck_assert_ptr_nonnull(strstr(text, "trainprof: warning: TRAINPROF_EXEC command \"exit 3\""));
    ck_assert_ptr_nonnull(strstr(text, "status 3"));
    ck_assert_ptr_eq(strchr(text, '\n'), text + strlen(text) - 1);
}
END_TEST

START_TEST(test_no_trace_no_command)
{
    setup_window(NULL);
    snprintf(cmd, sizeof cmd, "touch %s/ran", root);
    win.exec = cmd;
    saved.trace[0] = '\0';
    ck_assert_int_eq(run_handler(), 0);
    ck_assert_int_eq(tp_exec_reap(0), 0);
    setup_window("");
    ck_assert_int_eq(run_handler(), 1);           /* sits the window out */
    char ran[200];
    snprintf(ran, sizeof ran, "%s/ran", root);
    ck_assert_int_ne(access(ran, F_OK), 0);
}
END_TEST

START_TEST(test_busy_while_running)
{
    setup_window("sleep 0.3");
    ck_assert_int_eq(run_handler(), 0);
    ck_assert_int_eq(tp_exec_busy(trace), 1);
    ck_assert_int_eq(tp_exec_busy("/elsewhere.json"), 0);
    ck_assert_int_eq(tp_exec_reap(5000), 0);
    ck_assert_int_eq(tp_exec_busy(trace), 0);
}
END_TEST

START_TEST(test_host_children_keep_their_status)
{
    pid_t mine = fork();
    ck_assert_int_ge(mine, 0);
    if (mine == 0)
        _exit(7);
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);                         /* the host's child is a zombie now */
    setup_window("exit 0");
    ck_assert_int_eq(run_handler(), 0);
    ck_assert_int_eq(tp_exec_reap(5000), 0);
    ck_assert_int_eq(tp_exec_busy(trace), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(mine, &status, 0), mine);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 7);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, test_expands_and_disables);
    tcase_add_test(tc, test_failure_warns_once);
    tcase_add_test(tc, test_no_trace_no_command);
    tcase_add_test(tc, test_busy_while_running);
    tcase_add_test(tc, test_host_children_keep_their_status);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
