/*
 * trigger.c - DESIGN: on-demand capture of a running job with no daemon
 * (README "Capturing a running job"; the file formats are in trigger.h).
 *
 * Everything here runs on tp-flush, from its idle hook, except
 * tp_trigger_init (activation), the signal handler and the last status at
 * exit.  tp-flush wakes at least every 0.5 s while triggers are watched
 * (tp_flusher_tick); each wake-up that is 0.4 s past the last poll costs
 * one fstatat of the trigger file (and a fcntl and a fstat that check the
 * folder's descriptor, below), and only a file that changed (inode, size,
 * mtime) is read.  A new id is handed to the steps (trigger_cycle.c),
 * which take it at the next step boundary; what they made of it (armed,
 * late, ignored) comes back and is said once on stderr and kept in the
 * status file.  The training thread never touches a file.
 *
 * The run folder is opened once (O_PATH) and every file is reached
 * relative to it, so a program that changes its working directory keeps
 * its folder, and `trainprof trigger PID` finds the folder of a process
 * among the links of /proc/PID/fd (scripts/trainprof_cli/trigger.py).  The
 * program may close that descriptor (close_range(3, ~0U, 0) after
 * activation, as daemonizing code does) and get its number back from its
 * next open: before each use the descriptor must still be an O_PATH one
 * on the folder's device and inode (tp_tr_fd_ours), else the number is
 * the program's, left alone (never closed), and the folder is opened
 * again.  A folder the program opened at that number would otherwise
 * have been read for a trigger file and written status files.
 *
 * The status file is rewritten atomically at most once a second, by the
 * library's one way of creating a file (safefile.c: an exclusive
 * temporary name, never through a link, then rename; it was a fixed
 * "rank{rank}.{pid}.json.tmp" opened with O_TRUNC, and a link planted
 * there had the job overwrite its target), in "status" opened with
 * O_NOFOLLOW for each write (a link planted at "status" is not
 * followed either), so that a job of thousands of ranks on a shared
 * file system costs its metadata server one rename per rank and second,
 * and once more at exit.  Its step rate lets `trainprof trigger` choose a
 * start step that every process reaches only after it has polled.
 *
 * The flight recorder's ring (`trainprof trigger --flight`: a line "id=ID
 * flight=1"): with TRAINPROF_FLIGHT on the default trigger file is watched
 * for that alone, without watching for windows (the schedule then finishes
 * as without triggers, and CUPTI is finalized after its last window); a
 * window asked of such a process is ignored and says why.  The dump is
 * made here, on tp-flush, with the step lock only tried (steps.c's
 * tp_steps_flight_now), and tried again at each wake-up while busy; its
 * outcome goes in the status file as a window's does.
 *
 * TRAINPROF_TRIGGER_SIGNAL: installed at activation over SIG_DFL only;
 * the handler sets a flag and wakes tp-flush (async-signal-safe), so the
 * file is read at once.  In a process that is not the owner (a fork that
 * missed the atfork handler) it restores the default and re-raises,
 * as lifecycle.c's handlers do.
 */
#include "trigger.h"
#include "collector/record/buffer.h"
#include "collector/record/pgroup.h"
#include "collector/config/config.h"
#include "collector/drain/flusher.h"
#include "collector/common/format.h"
#include "collector/drain/window.h"
#include "collector/common/log.h"
#include "steps.h"
#include "trigger_cycle.h"
#include "collector/common/safefile.h"
#include "collector/config/schedule.h"
#include "collector/common/sighandler.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef TP_VERSION_STRING
#define TP_VERSION_STRING "0.1.0"
#endif

#define TP_TR_TICK_MS 500
#define TP_TR_POLL_NS (400ll * 1000000ll)
#define TP_TR_STATUS_NS (1000ll * 1000000ll)
#define TP_TR_RATE_NS (2000ll * 1000000ll)
#define TP_TR_RETRY_NS (10000ll * 1000000ll)
#define TP_TR_DEFAULT "{run_name}/trigger"

static int tp_tr_on;                       /* triggers are watched */
static int tp_tr_windows;                  /* ... for windows too, not only the flight ring */
static char tp_tr_dir[4200];               /* the run folder, absolute */
static char tp_tr_base[256];               /* the trigger file's name in it */
static char tp_tr_status[128];             /* rank{rank}.{pid}.json, in status/ */
static pid_t tp_tr_owner;
/* CLOCK_REALTIME_COARSE at activation: a file's times come from the
 * kernel's coarse clock, which lags CLOCK_REALTIME by up to a tick, so a
 * trigger written just after activation could be dated before a precise
 * reading and be taken for a stale file (tests/unit/test_control.c) */
static int64_t tp_tr_act_ns;
static int tp_tr_sig;                      /* TRAINPROF_TRIGGER_SIGNAL, 0 off */
static int tp_tr_sig_installed;
static volatile sig_atomic_t tp_tr_sig_flag;

/* tp-flush's state, under tp_tr_lock (the exit's last status takes it too) */
static pthread_mutex_t tp_tr_lock = PTHREAD_MUTEX_INITIALIZER;
static int tp_tr_fd = -1;                  /* the run folder, O_PATH */
static dev_t tp_tr_fd_dev;                 /* ... its device and inode */
static ino_t tp_tr_fd_ino;
static int tp_tr_cleaned;                  /* dead writers' leftovers removed from status/ */
static int64_t tp_tr_retry_at;             /* when to try the folder again */
static int tp_tr_folder_warned, tp_tr_status_warned;
static int64_t tp_tr_polled, tp_tr_written;
static int tp_tr_known;                    /* the file's identity below is valid */
static struct stat tp_tr_st;
static char tp_tr_last_id[TP_TC_ID_MAX];   /* the last id handed to the steps */
static uint64_t tp_tr_logged;              /* outcome seq said on stderr */
static struct tp_tc_outcome tp_tr_out;
/* The latest request that the trigger cycle does not answer: a flight
 * dump (`trainprof trigger --flight`), or a window asked of a process that
 * watches the file for flight dumps only. */
static struct {
    char id[TP_TC_ID_MAX];
    const char *state;                     /* "pending", "dumped", "no-ring", "ignored" */
    const char *reason;                    /* for no-ring and ignored */
    uint64_t step, read_at;
    int flight;                            /* a flight request (else a window ignored) */
    uint64_t after;                        /* tp_tr_logged when read: a later window outcome wins */
} tp_tr_fl;
static int64_t tp_tr_rate_t;               /* the rate's last sample */
static uint64_t tp_tr_rate_step;
static double tp_tr_rate = -1;             /* steps per second, -1 unknown */

static int64_t tp_tr_now(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---- the signal ------------------------------------------------------------ */

static void tp_tr_handler(int sig)
{
    int saved = errno;
    if (getpid() != tp_tr_owner) {
        tp_sighandler_default(sig);
        tp_sighandler_raise(sig);
    } else {
        tp_tr_sig_flag = 1;
        tp_flusher_wake();
    }
    errno = saved;
}

static void tp_tr_install(int sig)
{
    int got = tp_sighandler_install_over_default(sig, tp_tr_handler);
    if (got == 0)
        TP_WARN("TRAINPROF_TRIGGER_SIGNAL: the program handles signal %d itself; not installed "
                "(the trigger file is still polled)", sig);
    tp_tr_sig_installed = got == 1;
}

/* Our handler is still the one in place (the program may replace it). */
static int tp_tr_sig_ours(void)
{
    struct sigaction cur;
    return tp_tr_sig_installed && sigaction(tp_tr_sig, NULL, &cur) == 0 &&
           !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == tp_tr_handler;
}

void tp_trigger_atfork_child(void)
{
    tp_tr_on = 0;
    if (tp_tr_sig_installed) {
        tp_sighandler_default(tp_tr_sig);
        tp_tr_sig_installed = 0;
    }
}

/* ---- activation ---------------------------------------------------------- */

void tp_trigger_init(void)
{
    const char *fmt = tp_cfg.trigger[0] ? tp_cfg.trigger : TP_TR_DEFAULT;
    int windows = tp_cfg.trigger[0] || tp_cfg.schedule.none;
    /* the flight recorder's ring can be asked for (trainprof trigger
     * --flight) without the cost of watched windows: the schedule still
     * finishes, and CUPTI is finalized after its last window */
    if (strcasecmp(fmt, "none") == 0 || (!windows && tp_cfg.flight <= 0))
        return;
    struct tp_format_vars v = {
        .run_name = tp_cfg.run_name, .hostname = tp_cfg.hostname,
        .rank = tp_cfg.rank, .local_rank = tp_cfg.local_rank, .world_size = tp_cfg.world_size,
        .local_world_size = tp_cfg.local_world_size, .node_rank = tp_cfg.node_rank,
        .pid = (int)getpid(), .batch = -1,
    };
    char path[2048], err[256];
    if (tp_format_expand(fmt, &v, path, sizeof path, err, sizeof err) != 0) {
        TP_ERROR("TRAINPROF_TRIGGER=\"%s\": %s: on-demand capture is off", fmt, err);
        return;
    }
    char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
        strlen(base) >= sizeof tp_tr_base) {
        TP_ERROR("TRAINPROF_TRIGGER=\"%s\": not a file name: on-demand capture is off", fmt);
        return;
    }
    snprintf(tp_tr_base, sizeof tp_tr_base, "%s", base);
    if (slash)
        *slash = '\0';
    const char *dir = slash ? (path[0] ? path : "/") : ".";
    /* relative to where the job started, as the windows' folders are */
    if (dir[0] != '/' && tp_cfg.start_dir[0]) {
        int n = snprintf(tp_tr_dir, sizeof tp_tr_dir, "%s/%s", tp_cfg.start_dir, dir);
        if (n < 0 || (size_t)n >= sizeof tp_tr_dir) {
            TP_ERROR("TRAINPROF_TRIGGER=\"%s\": the folder is too long: on-demand capture is off",
                     fmt);
            return;
        }
    } else
        snprintf(tp_tr_dir, sizeof tp_tr_dir, "%s", dir);
    tp_tr_owner = getpid();
    snprintf(tp_tr_status, sizeof tp_tr_status, "rank%d.%d.json", tp_cfg.rank, (int)tp_tr_owner);
    tp_tr_act_ns = tp_tr_now(CLOCK_REALTIME_COARSE);
    tp_tr_on = 1;
    tp_tr_windows = windows;
    if (windows)
        tp_trigger_cycle_watch(1);
    tp_flusher_tick(TP_TR_TICK_MS);
    tp_tr_sig = tp_cfg.trigger_signal;
    if (tp_tr_sig)
        tp_tr_install(tp_tr_sig);
}

/* ---- tp-flush: the folder, the trigger file, the status file ----------------- */

/* tp_tr_fd is still ours: an O_PATH descriptor on the run folder.  The
 * program may have closed it and opened something at its number. */
static int tp_tr_fd_ours(void)
{
    struct stat st;
    int fl = fcntl(tp_tr_fd, F_GETFL);
    return fl >= 0 && (fl & O_PATH) && fstat(tp_tr_fd, &st) == 0 && S_ISDIR(st.st_mode) &&
           st.st_dev == tp_tr_fd_dev && st.st_ino == tp_tr_fd_ino;
}

static int tp_tr_open(int64_t now)
{
    if (tp_tr_fd >= 0) {
        if (tp_tr_fd_ours())
            return 0;
        TP_DEBUG("the run folder's descriptor %d was closed by the program; opening %s again",
                 tp_tr_fd, tp_tr_dir);
        tp_tr_fd = -1;          /* the number is the program's now: not ours to close */
    }
    if (now < tp_tr_retry_at)
        return -1;
    int fd = -1;
    struct stat st;
    if (tp_safefile_mkdirs(tp_tr_dir) == 0)
        fd = open(tp_tr_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && ((mkdirat(fd, "status", 0777) != 0 && errno != EEXIST) || fstat(fd, &st) != 0)) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        if (!tp_tr_folder_warned++)
            TP_ERROR("cannot use the run folder %s for the trigger and status files: %s; "
                     "retrying every 10 s", tp_tr_dir, strerror(errno));
        tp_tr_retry_at = now + TP_TR_RETRY_NS;
        return -1;
    }
    tp_tr_fd = fd;
    tp_tr_fd_dev = st.st_dev;
    tp_tr_fd_ino = st.st_ino;
    return 0;
}

static int tp_tr_id_ok(const char *s)
{
    if (!*s || strlen(s) >= TP_TC_ID_MAX)
        return 0;
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') &&
            !strchr("._:-", *s))
            return 0;
    return 1;
}

/* Parse "text" into "r"; NULL, or what is wrong. */
static const char *tp_tr_parse(char *text, struct tp_tc_request *r, int *flight)
{
    int have_start = 0;
    *flight = 0;
    memset(r, 0, sizeof *r);
    r->warmup = 1;
    r->active = 4;
    for (char *save = NULL, *tok = strtok_r(text, " \t\r\n", &save); tok;
         tok = strtok_r(NULL, " \t\r\n", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *val = eq + 1;
        char *end;
        errno = 0;
        unsigned long long n = strtoull(val, &end, 10);
        int num_ok = *val >= '0' && *val <= '9' && !*end && errno == 0;
        if (strcmp(tok, "id") == 0) {
            if (!tp_tr_id_ok(val))
                return "id must be 1 to 63 of [A-Za-z0-9._:-]";
            snprintf(r->id, sizeof r->id, "%s", val);
        } else if (strcmp(tok, "start") == 0) {
            if (!num_ok || n > (1ull << 62))
                return "start must be a step number";
            r->start = n;
            have_start = 1;
        } else if (strcmp(tok, "warmup") == 0) {
            if (!num_ok || n > TP_TC_MAX_WARMUP)
                return "warmup must be an integer from 0 to 100";
            r->warmup = (uint32_t)n;
        } else if (strcmp(tok, "active") == 0) {
            if (!num_ok || n < 1 || n > TP_TC_MAX_ACTIVE)
                return "active must be an integer from 1 to 10000";
            r->active = (uint32_t)n;
        } else if (strcmp(tok, "flight") == 0) {
            if (strcmp(val, "1") != 0)
                return "flight must be 1";
            *flight = 1;
        }
    }
    if (!r->id[0])
        return "no id=";
    if (!have_start && !*flight)
        return "no start=";
    return NULL;
}

/* A flight dump asked for and not yet made: try the step lock (tp-flush). */
static void tp_tr_flight_try(void)
{
    if (!tp_tr_fl.state || strcmp(tp_tr_fl.state, "pending") != 0)
        return;
    int rc = tp_steps_flight_now("trigger", &tp_tr_fl.step);
    if (rc < 0)
        return;
    if (rc == 0) {
        tp_tr_fl.state = "dumped";
        return;
    }
    tp_tr_fl.state = "no-ring";
    tp_tr_fl.reason = tp_cfg.flight > 0 ? "a window is recording (it ends the ring)"
                                         : "the flight recorder is off (TRAINPROF_FLIGHT)";
    TP_WARN("rank %d: trigger %s: no flight dump: %s", tp_cfg.rank, tp_tr_fl.id, tp_tr_fl.reason);
}

static void tp_tr_poll(void)
{
    struct stat st;
    if (fstatat(tp_tr_fd, tp_tr_base, &st, 0) != 0) {
        tp_tr_known = 0;
        return;
    }
    if (tp_tr_known && st.st_ino == tp_tr_st.st_ino && st.st_dev == tp_tr_st.st_dev &&
        st.st_size == tp_tr_st.st_size && st.st_mtim.tv_sec == tp_tr_st.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == tp_tr_st.st_mtim.tv_nsec)
        return;
    tp_tr_known = 1;
    tp_tr_st = st;
    int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
    if (mtime < tp_tr_act_ns) {
        TP_DEBUG("trigger file %s/%s predates this process: not acted on", tp_tr_dir, tp_tr_base);
        return;
    }
    char text[1024];
    ssize_t n = -1;
    int fd = openat(tp_tr_fd, tp_tr_base, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
        n = read(fd, text, sizeof text - 1);
        close(fd);
    }
    if (n < 0) {
        TP_WARN("trigger file %s/%s: %s; not acted on", tp_tr_dir, tp_tr_base, strerror(errno));
        return;
    }
    text[n] = '\0';
    struct tp_tc_request r;
    int flight;
    const char *why = tp_tr_parse(text, &r, &flight);
    if (why) {
        TP_WARN("trigger file %s/%s: %s (expected \"id=ID start=STEP active=N\" or \"id=ID "
                "flight=1\"); not acted on", tp_tr_dir, tp_tr_base, why);
        return;
    }
    if (strcmp(r.id, tp_tr_last_id) == 0)
        return;
    snprintf(tp_tr_last_id, sizeof tp_tr_last_id, "%s", r.id);
    if (flight || !tp_tr_windows) {
        snprintf(tp_tr_fl.id, sizeof tp_tr_fl.id, "%s", r.id);
        tp_tr_fl.read_at = tp_trigger_cycle_current();
        tp_tr_fl.after = tp_tr_logged;
        tp_tr_fl.step = 0;
        tp_tr_fl.reason = NULL;
        tp_tr_fl.flight = flight;
        if (flight) {
            tp_tr_fl.state = "pending";
            tp_tr_flight_try();
        } else {
            tp_tr_fl.state = "ignored";
            tp_tr_fl.reason = "this process watches the trigger file for flight dumps only "
                              "(windows need TRAINPROF_TRIGGER set or TRAINPROF_SCHEDULE=none)";
            TP_WARN("rank %d: trigger %s ignored: %s", tp_cfg.rank, r.id, tp_tr_fl.reason);
        }
        return;
    }
    TP_DEBUG("trigger %s: start=%llu warmup=%u active=%u read at step %llu", r.id,
             (unsigned long long)r.start, r.warmup, r.active,
             (unsigned long long)tp_trigger_cycle_current());
    tp_trigger_cycle_request(&r);
}

/* Say once what the steps made of the latest request. */
static void tp_tr_report(void)
{
    struct tp_tc_outcome o;
    if (tp_trigger_cycle_outcome(&o) == tp_tr_logged)
        return;
    tp_tr_logged = o.seq;
    tp_tr_out = o;
    if (o.state == TP_TC_IGNORED)
        TP_WARN("rank %d: trigger %s (start at step %llu) ignored: %s", tp_cfg.rank, o.id,
                (unsigned long long)o.requested, o.reason);
    else if (o.late)
        TP_WARN("rank %d: trigger %s asked for step %llu, which had passed when it was read "
                "(step %llu under way): warmup at step %llu, recording steps %llu-%llu",
                tp_cfg.rank, o.id, (unsigned long long)o.requested, (unsigned long long)o.at_step,
                (unsigned long long)o.start, (unsigned long long)o.first, (unsigned long long)o.last);
    else
        TP_INFO("rank %d: trigger %s: warmup at step %llu, recording steps %llu-%llu", tp_cfg.rank,
                o.id, (unsigned long long)o.start, (unsigned long long)o.first,
                (unsigned long long)o.last);
}

static const char *tp_tr_state(const struct tp_tc_outcome *o, uint64_t step)
{
    if (o->state == TP_TC_IGNORED)
        return "ignored";
    if (step < o->start)
        return "armed";
    if (step < o->first)
        return "warmup";
    return step <= o->last ? "recording" : "done";
}

static json_t *tp_tr_trigger_json(uint64_t step)
{
    const struct tp_tc_outcome *o = &tp_tr_out;
    if (tp_tr_fl.state && tp_tr_logged == tp_tr_fl.after) {
        json_t *t = json_pack("{s:s, s:s, s:b, s:I}", "id", tp_tr_fl.id, "state", tp_tr_fl.state,
                              "flight", tp_tr_fl.flight, "read_at_step", (json_int_t)tp_tr_fl.read_at);
        if (t && strcmp(tp_tr_fl.state, "dumped") == 0)
            json_object_set_new(t, "dump_step", json_integer((json_int_t)tp_tr_fl.step));
        if (t && tp_tr_fl.reason)
            json_object_set_new(t, "reason", json_string(tp_tr_fl.reason));
        return t;
    }
    if (!o->seq)
        return json_null();
    json_t *t = json_pack("{s:s, s:s, s:I, s:I, s:b}", "id", o->id, "state", tp_tr_state(o, step),
                          "requested", (json_int_t)o->requested, "read_at_step",
                          (json_int_t)o->at_step, "late", o->late);
    if (t && o->state == TP_TC_ARMED) {
        json_object_set_new(t, "warmup_step", json_integer((json_int_t)o->start));
        json_object_set_new(t, "first_step", json_integer((json_int_t)o->first));
        json_object_set_new(t, "last_step", json_integer((json_int_t)o->last));
    }
    if (t && o->state == TP_TC_IGNORED)
        json_object_set_new(t, "reason", json_string(o->reason));
    return t;
}

static void tp_tr_write_status(int exited)
{
    int rank, world_size;
    tp_rank_now(&rank, &world_size);
    uint64_t step = tp_trigger_cycle_current();
    int64_t now = tp_tr_now(CLOCK_MONOTONIC);
    if (!tp_tr_rate_t) {
        tp_tr_rate_t = now;
        tp_tr_rate_step = step;
    } else if (now - tp_tr_rate_t >= TP_TR_RATE_NS) {
        tp_tr_rate = (double)(step - tp_tr_rate_step) * 1e9 / (double)(now - tp_tr_rate_t);
        tp_tr_rate_t = now;
        tp_tr_rate_step = step;
    }
    char sched[256], last[512], sig[32] = "";
    tp_schedule_show(&tp_cfg.schedule, sched, sizeof sched);
    tp_log_last(last, sizeof last);
    if (tp_tr_sig == SIGUSR1 || tp_tr_sig == SIGUSR2)
        snprintf(sig, sizeof sig, "%s", tp_tr_sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
    else if (tp_tr_sig)
        snprintf(sig, sizeof sig, "SIGRTMIN+%d", tp_tr_sig - SIGRTMIN);
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:s}",
                          "schema", 1, "trainprof", TP_VERSION_STRING, "run_name", tp_cfg.run_name,
                          "run_folder", tp_tr_dir, "trigger_file", tp_tr_base, "host",
                          tp_cfg.hostname, "program", tp_cfg.program, "pid", (int)tp_tr_owner,
                          "rank", rank, "local_rank", tp_cfg.local_rank, "world_size",
                          world_size, "node_rank", tp_cfg.node_rank, "schedule", sched);
    if (!o)
        return;
    json_object_set_new(o, "step", json_integer((json_int_t)step));
    json_object_set_new(o, "steps_per_s", tp_tr_rate >= 0 ? json_real(tp_tr_rate) : json_null());
    json_object_set_new(o, "windows_saved", json_integer((json_int_t)tp_window_saved()));
    json_object_set_new(o, "dropped_events", json_integer((json_int_t)tp_buf_dropped()));
    json_object_set_new(o, "last_error", last[0] ? json_string(last) : json_null());
    json_object_set_new(o, "trigger_signal", sig[0] ? json_string(sig) : json_null());
    json_object_set_new(o, "signal_installed", json_boolean(tp_tr_sig_ours()));
    json_object_set_new(o, "last_trigger", tp_tr_trigger_json(step));
    json_object_set_new(o, "updated", json_real((double)tp_tr_now(CLOCK_REALTIME) / 1e9));
    json_object_set_new(o, "exited", json_boolean(exited));
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text)
        return;
    size_t len = strlen(text);
    text[len] = '\n';           /* over the NUL: written with its length */
    int ok = 0, sfd = openat(tp_tr_fd, "status", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd >= 0) {
        if (!tp_tr_cleaned) {
            char sdir[sizeof tp_tr_dir + 8];
            snprintf(sdir, sizeof sdir, "%s/status", tp_tr_dir);
            tp_tr_cleaned = 1;
            tp_safefile_clean(sfd, sdir);
        }
        ok = tp_safefile_replace(sfd, tp_tr_status, text, len + 1) == 0;
        int e = errno;
        close(sfd);
        errno = e;
    }
    if (!ok && !tp_tr_status_warned++)
        TP_ERROR("cannot write the status file %s/status/%s: %s", tp_tr_dir, tp_tr_status,
                 strerror(errno));
    free(text);
}

void tp_trigger_idle(void)
{
    if (!tp_tr_on || tp_flusher_exiting())
        return;
    pthread_mutex_lock(&tp_tr_lock);
    int64_t now = tp_tr_now(CLOCK_MONOTONIC);
    if (tp_tr_open(now) == 0) {
        if (tp_tr_sig_flag || now - tp_tr_polled >= TP_TR_POLL_NS) {
            tp_tr_sig_flag = 0;
            tp_tr_polled = now;
            tp_tr_poll();
        }
        tp_tr_flight_try();
        tp_tr_report();
        if (now - tp_tr_written >= TP_TR_STATUS_NS) {
            tp_tr_written = now;
            tp_tr_write_status(0);
        }
    }
    pthread_mutex_unlock(&tp_tr_lock);
}

void tp_trigger_exit(void)
{
    if (!tp_tr_on || getpid() != tp_tr_owner)
        return;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 2;
    if (pthread_mutex_timedlock(&tp_tr_lock, &dl) != 0)
        return;
    if (tp_tr_open(tp_tr_now(CLOCK_MONOTONIC)) == 0) {
        tp_tr_report();
        tp_tr_write_status(1);
    }
    pthread_mutex_unlock(&tp_tr_lock);
}
