/*
 * exec.c - DESIGN: TRAINPROF_EXEC, the first half of the post-save stage
 * (README "Outputs"; handlers/handlers.c).  After the handlers have saved the
 * window's trace and reports, TRAINPROF_EXEC is
 * expanded once per saved file ({path} = that file, the trace first, plus
 * the format-string variables), each value quoted for the shell so that it is
 * data, never code (collector/common/format.c, tp_format_expand_sh), and started as "/bin/sh -c CMD" with
 * posix_spawn from tp-flush: the training thread never waits for it.  The
 * child reads /dev/null and writes its standard output and error to a log
 * of its own, {reports}/rank{rank}.exec.log (the window's reports folder,
 * absolute), appended to, one "trainprof:" line before each command.  It
 * wrote to our stderr before, and so held the job's pipes open: a caller
 * reading the job's output (subprocess.run(capture_output=True), `| cat`)
 * waited for every command to end: with `sleep 8`, 8.0 s instead of 2.1 s
 * (a 0.05 s job, whose exit waits up to 2 s for running commands; medians
 * of 5, tests/preload/test_outputs_folder.py).  The log is
 * opened as the library opens files, never through a planted link
 * (O_NOFOLLOW), only a regular file of our uid with one link, O_NONBLOCK for
 * the open so that a planted FIFO cannot stall tp-flush; when it cannot be
 * used the commands write to /dev/null, said once.  It gets our
 * environment with TRAINPROF_ENABLED=0, so the preloaded library stays inert
 * in it: the copy config.c took at activation (w->exec_env),
 * never environ itself, which a program thread's setenv may reallocate
 * while tp-flush reads it.  tp-flush runs with every signal blocked and a
 * Python host ignores SIGPIPE; the child gets an empty mask and SIGPIPE's
 * default, as if started from a shell.
 * Children are reaped by pid with WNOHANG at the next window, on the flush
 * thread's idle ticks and at exit (a bounded wait): never waitpid(-1) and no
 * SIGCHLD handler, which would steal the statuses of the host's own
 * children.  A host that reaps with waitpid(-1) itself may take ours first:
 * ECHILD then just forgets the child.  The table is small and locked,
 * because exit runs on the thread that calls exit(), not on tp-flush.
 * TRAINPROF_KEEP (keep.c) asks tp_exec_busy() before deleting a
 * trace and its reports, and defers the deletion while any command of that
 * window runs.
 */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/common/format.h"
#include "collector/common/log.h"
#include "collector/common/safefile.h"
#include "handler.h"

#define TP_EXEC_MAX 32           /* running commands at once; more are skipped */
#define TP_EXEC_SHOWN 160        /* bytes of the command quoted in a message */

struct tp_exec_child {
    pid_t pid;                   /* 0: free slot */
    char path[4096];             /* the window's trace (TRAINPROF_KEEP asks by it) */
    char file[4096];             /* the saved file it runs for: {path} */
    char log[4096];              /* where its output goes ("/dev/null": no log) */
    char cmd[TP_EXEC_SHOWN + 4];
};

static struct tp_exec_child tp_exec_kids[TP_EXEC_MAX];
static pthread_mutex_t tp_exec_lock = PTHREAD_MUTEX_INITIALIZER;
static int tp_exec_log_warned;   /* tp-flush only */

static void tp_exec_report(const struct tp_exec_child *k, int status)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        TP_WARN("TRAINPROF_EXEC command \"%s\" for %s exited with status %d (its output: %s)",
                k->cmd, k->file, WEXITSTATUS(status), k->log);
    else if (WIFSIGNALED(status))
        TP_WARN("TRAINPROF_EXEC command \"%s\" for %s was killed by signal %d (its output: %s)",
                k->cmd, k->file, WTERMSIG(status), k->log);
}

/* One non-blocking pass over our own pids; the lock is held. */
static int tp_exec_poll(void)
{
    int running = 0;
    for (int i = 0; i < TP_EXEC_MAX; i++) {
        struct tp_exec_child *k = &tp_exec_kids[i];
        if (!k->pid)
            continue;
        int status = 0;
        pid_t r;
        do
            r = waitpid(k->pid, &status, WNOHANG);
        while (r < 0 && errno == EINTR);
        if (r == 0) {
            running++;
            continue;
        }
        if (r == k->pid)
            tp_exec_report(k, status);
        k->pid = 0;              /* reaped, or ECHILD: reaped by the host */
    }
    return running;
}

int tp_exec_reap(int wait_ms)
{
    pthread_mutex_lock(&tp_exec_lock);
    int running = tp_exec_poll();
    for (int waited = 0; running && waited < wait_ms; waited += 10) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        running = tp_exec_poll();
    }
    pthread_mutex_unlock(&tp_exec_lock);
    return running;
}

int tp_exec_busy(const char *path)
{
    int busy = 0;
    pthread_mutex_lock(&tp_exec_lock);
    tp_exec_poll();
    for (int i = 0; i < TP_EXEC_MAX && !busy; i++)
        busy = tp_exec_kids[i].pid && strcmp(tp_exec_kids[i].path, path) == 0;
    pthread_mutex_unlock(&tp_exec_lock);
    return busy;
}

/* Unix time "t" as UTC, "YYYY-mm-ddTHH:MM:SSZ", by arithmetic: gmtime_r
 * and strftime may read TZ from environ on their first call (glibc's
 * tzset_internal), which tp-flush must never do while a program thread's
 * setenv may reallocate it (test_exec.py's setenv_loop crashed in 9 of 40
 * runs under ASan with gmtime_r here).  Days to a civil date: the
 * proleptic Gregorian calendar in 400-year eras of 146097 days. */
static void tp_exec_utc(time_t t, char *out, size_t n)
{
    int64_t secs = (int64_t)t, days = secs / 86400, sod = secs % 86400;
    if (sod < 0) {
        sod += 86400;
        days--;
    }
    days += 719468;                             /* from 0000-03-01 */
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;          /* [0, 146096] */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;           /* March = 0 */
    int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);
    snprintf(out, n, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", (long long)year,
             (long long)month, (long long)day, (long long)(sod / 3600),
             (long long)(sod / 60 % 60), (long long)(sod % 60));
}

/* Opens the commands' log of window "w", {reports}/rank{rank}.exec.log,
 * for appending (its path into "path"): a descriptor >= 3 (so that the
 * child's dup2 onto 1 and 2 clears its close-on-exec), or -1, said once. */
static int tp_exec_log_open(const struct tp_window *w, char *path, size_t n)
{
    const char *dir = w->reports_folder && w->reports_folder[0] ? w->reports_folder : ".";
    char name[64];
    snprintf(name, sizeof name, "rank%d.exec.log", w->rank);
    snprintf(path, n, "%s/%s", dir, name);
    const char *why = NULL;
    int fd = -1, dfd = -1;
    struct stat st;
    if (tp_safefile_mkdirs(dir) != 0 || (dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (fd = openat(dfd, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
                                    O_NOCTTY | O_CLOEXEC, 0666)) < 0 ||
        fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != geteuid())
        why = "not a regular file of ours with one link";
    else if (fcntl(fd, F_SETFL, O_APPEND) != 0)
        why = strerror(errno);
    if (!why && fd < 3) {      /* the program closed 0, 1 or 2 */
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (hi < 0)
            why = strerror(errno);
        close(fd);
        fd = hi;
    }
    if (dfd >= 0)
        close(dfd);
    if (why) {
        if (fd >= 0)
            close(fd);
        if (!tp_exec_log_warned++)
            TP_WARN("TRAINPROF_EXEC: cannot use the log %s (%s): the commands' output goes to "
                    "/dev/null", path, why);
        snprintf(path, n, "/dev/null");
        return -1;
    }
    return fd;
}

/* Starts "cmd" with environment "env", its output to "logfd" (-1:
 * /dev/null); returns its pid, or -1 with errno set. */
static pid_t tp_exec_spawn(const char *cmd, char *const *env, int logfd)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, dfl;
    pid_t pid = -1;
    if (!env) {
        errno = ENOMEM;
        return -1;
    }
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        if (!(rc = posix_spawnattr_init(&at))) {
            char *argv[] = { "sh", "-c", (char *)cmd, NULL };
            if (!(rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) &&
                !(rc = logfd >= 0 ? posix_spawn_file_actions_adddup2(&fa, logfd, 1)
                                  : posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) &&
                !(rc = posix_spawn_file_actions_adddup2(&fa, 1, 2)) &&
                !(rc = posix_spawnattr_setsigmask(&at, &none)) &&
                !(rc = posix_spawnattr_setsigdefault(&at, &dfl)) &&
                !(rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)))
                rc = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, env);
            posix_spawnattr_destroy(&at);
        }
        posix_spawn_file_actions_destroy(&fa);
    }
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

/* Starts TRAINPROF_EXEC for "file", one of the window's saved files, its
 * output to "logfd" (path "log"); its child is filed under the window's
 * trace for TRAINPROF_KEEP.  0 or -1. */
static int exec_one(const struct tp_window *w, const char *trace, const char *file, int logfd,
                    const char *log)
{
    struct tp_format_vars v = {
        .run_name = w->run_name, .hostname = w->hostname,
        .rank = w->rank, .local_rank = w->local_rank, .world_size = w->world_size,
        .local_world_size = w->local_world_size, .node_rank = w->node_rank,
        .pid = (int)w->pid, .batch = (int64_t)w->batch, .path = file,
    };
    char cmd[8192], err[256];
    if (tp_format_expand_sh(w->exec, &v, cmd, sizeof cmd, err, sizeof err) < 0) {
        TP_ERROR("TRAINPROF_EXEC=\"%.160s\": %s: not run for %s", w->exec, err, file);
        return -1;
    }
    pthread_mutex_lock(&tp_exec_lock);
    struct tp_exec_child *k = NULL;
    for (int i = 0; i < TP_EXEC_MAX && !k; i++)
        if (!tp_exec_kids[i].pid)
            k = &tp_exec_kids[i];
    int rc = -1;
    if (!k) {
        TP_ERROR("TRAINPROF_EXEC: %d commands still running: not run for %s", TP_EXEC_MAX, file);
    } else {
        snprintf(k->cmd, sizeof k->cmd, "%.*s%s", TP_EXEC_SHOWN, cmd,
                 strlen(cmd) > TP_EXEC_SHOWN ? "..." : "");
        snprintf(k->path, sizeof k->path, "%s", trace);
        snprintf(k->file, sizeof k->file, "%s", file);
        snprintf(k->log, sizeof k->log, "%s", log);
        if (logfd >= 0) {       /* which command the lines after it come from */
            char head[TP_EXEC_SHOWN + 4200], when[112];
            tp_exec_utc(time(NULL), when, sizeof when);
            int len = snprintf(head, sizeof head, "trainprof: %s rank %d: sh -c \"%s\" for %s\n",
                               when, w->rank, k->cmd, file);
            if (len > 0 && write(logfd, head, (size_t)len < sizeof head ? (size_t)len
                                                                        : sizeof head - 1) < 0)
                TP_DEBUG("TRAINPROF_EXEC: cannot write to %s: %s", log, strerror(errno));
        }
        pid_t pid = tp_exec_spawn(cmd, w->exec_env, logfd);
        if (pid > 0) {
            k->pid = pid;
            rc = 0;
        } else {
            TP_ERROR("TRAINPROF_EXEC command \"%s\": cannot start /bin/sh: %s",
                     k->cmd, strerror(errno));
        }
    }
    pthread_mutex_unlock(&tp_exec_lock);
    return rc;
}

int tp_exec_saved(const struct tp_window *w, const struct tp_saved *saved)
{
    if (!saved->trace[0])
        return 0;
    char log[4200];
    int logfd = tp_exec_log_open(w, log, sizeof log);
    int rc = exec_one(w, saved->trace, saved->trace, logfd, log);
    for (int i = 0; i < saved->n_reports; i++)
        rc |= exec_one(w, saved->trace, saved->reports[i], logfd, log);
    if (logfd >= 0)
        close(logfd);
    return rc ? -1 : 0;
}
