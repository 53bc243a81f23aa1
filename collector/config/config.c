/*
 * config.c - every TRAINPROF_* variable, parsed once, from one table.
 *
 * DESIGN
 * TP_CONFIG_TABLE lists each variable once: name, documented default (the
 * README cell, checked by tests/unit/test_config.c), the value parsed when
 * the variable is unset, a parser and a printer.  tp_config_parse() walks
 * the table with a lookup function, so tests drive it without touching the
 * environment; tp_config_init() runs it once over getenv()/environ, which
 * appear in this file and nowhere else (make lint), and there copies the
 * environment for TRAINPROF_EXEC's children, once.  Parsing is silent
 * (nothing is printed before activation): a bad value stores one line,
 * "trainprof: error: VAR="value": what is accepted", keeps the default in its
 * place and counts an error; tp_config_report() prints the lines at
 * activation, honours TRAINPROF_LOG, TRAINPROF_DUMP_CONFIG and
 * TRAINPROF_STRICT, and tells the caller to stay passive.  It also takes
 * the working directory, once (tp_cfg.start_dir): relative output folders
 * are resolved against it at every save, so that a program that changes
 * its directory between two windows (os.chdir) does not split its traces
 * over two folders, and every path printed or given to TRAINPROF_EXEC is
 * absolute.  At activation, not at load: the run folder of on-demand
 * capture (control/trigger.c) is resolved then too, and the two must agree.
 * TRAINPROF_ENABLED=0 silences all of it, STRICT included: a disabled
 * profiler must not stop a program (the TRAINPROF_EXEC child inherits the
 * parent's variables, with TRAINPROF_ENABLED=0).  Launcher variables are not
 * ours to validate: a malformed RANK is skipped and the next source in
 * README's order (Configuration, "Ranks come from the launcher's
 * environment") is tried.  An empty value means unset, so `TRAINPROF_X= cmd`
 * restores a default.
 *
 * The parts: config_values.c (value parsers and printers),
 * config_grammar.c (schedule, step signals, handlers, ranks), config_launcher.c
 * (the launcher's variables and the run name); this file holds the table,
 * the messages, the spell-check of unknown TRAINPROF_* names, the report
 * at activation and the JSON dump.
 */
#include "config.h"
#include "config_impl.h"

#include "collector/common/log.h"
#include "schedule.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct tp_config tp_cfg;

/* ---- the table ------------------------------------------------------------- */

/* X(name, documented default, parsed when unset, help, parser, printer, field, lo, hi) */
#define TP_CONFIG_TABLE(X) \
    X("TRAINPROF_ENABLED", "1", "1", "0: pass-through only", \
      tp_opt_parse_bool, tp_opt_show_bool, enabled, 0, 0) \
    X("TRAINPROF_SCHEDULE", TP_SCHEDULE_DEFAULT_TEXT, TP_SCHEDULE_DEFAULT_TEXT, \
      "step schedule as torch.profiler's; any subset of keys, or all, none or profiler-api", \
      tp_opt_parse_schedule, tp_opt_show_schedule, schedule, 0, 0) \
    X("TRAINPROF_STEP_ON", "api,nvtx:step", "api,nvtx:step", "comma list of step signals", \
      tp_opt_parse_step_on, tp_opt_show_step_on, signals, 0, 0) \
    X("TRAINPROF_RUN_NAME", "see below", NULL, "the {run_name} variable", \
      tp_opt_parse_run_name, tp_opt_show_string, run_name, 0, 0) \
    X("TRAINPROF_FOLDER", "{run_name}/traces", "{run_name}/traces", \
      "output folder, a format string", tp_opt_parse_format, tp_opt_show_string, folder, 0, 0) \
    X("TRAINPROF_FILENAME", TP_FILENAME_DEFAULT, TP_FILENAME_DEFAULT, \
      "trace file name, a format string; .gz is appended when gzip is on", \
      tp_opt_parse_format, tp_opt_show_string, filename, 0, 0) \
    X("TRAINPROF_GZIP", "1", "1", "gzip the trace", tp_opt_parse_bool, tp_opt_show_bool, gzip, 0, 0) \
    X("TRAINPROF_OVERWRITE", "0", "0", "0: never replace an existing file", \
      tp_opt_parse_bool, tp_opt_show_bool, overwrite, 0, 0) \
    X("TRAINPROF_KEEP", "-1", "-1", "number of this process's traces to keep; -1 all", \
      tp_opt_parse_int, tp_opt_show_int, keep, -1, LLONG_MAX) \
    X("TRAINPROF_HANDLERS", "chrome,summary", "chrome,summary", "output handlers", \
      tp_opt_parse_handlers, tp_opt_show_handlers, handlers, 0, 0) \
    X("TRAINPROF_REPORTS", "{run_name}/reports", "{run_name}/reports", \
      "folder for summary, stacks and memory outputs", \
      tp_opt_parse_format, tp_opt_show_string, reports, 0, 0) \
    X("TRAINPROF_EXEC", "unset", NULL, "command template run after each saved file", \
      tp_opt_parse_exec, tp_opt_show_string, exec, 0, 0) \
    X("TRAINPROF_ACTIVITIES", "cpu,cuda", "cpu,cuda", "cpu: host calls; cuda: GPU activity (CUPTI)", \
      tp_opt_parse_activities, tp_opt_show_activities, activities, 0, 0) \
    X("TRAINPROF_RECORD_SHAPES", "0", "0", "shapes of library calls and torch operators", \
      tp_opt_parse_bool, tp_opt_show_bool, record_shapes, 0, 0) \
    X("TRAINPROF_PROFILE_MEMORY", "1", "1", "allocations and the memory timeline", \
      tp_opt_parse_bool, tp_opt_show_bool, profile_memory, 0, 0) \
    X("TRAINPROF_WITH_STACK", "0", "0", "host call stacks at intercepted calls", \
      tp_opt_parse_bool, tp_opt_show_bool, with_stack, 0, 0) \
    X("TRAINPROF_MEMORY_STACKS", "0", "0", "host call stacks at allocations (memory ledger)", \
      tp_opt_parse_bool, tp_opt_show_bool, memory_stacks, 0, 0) \
    X("TRAINPROF_STACK_DEPTH", "32", "32", "frames kept per stack", \
      tp_opt_parse_int, tp_opt_show_int, stack_depth, 1, 128) \
    X("TRAINPROF_WITH_FLOPS", "1", "1", "FLOP estimates for math-library calls", \
      tp_opt_parse_bool, tp_opt_show_bool, with_flops, 0, 0) \
    X("TRAINPROF_SYS", "cpu", "cpu", "host statistics: cpu,memory,disk,net or none", \
      tp_opt_parse_sys, tp_opt_show_sys, sys, 0, 0) \
    X("TRAINPROF_SYS_INTERVAL", "0.5", "0.5", "seconds between host samples", \
      tp_opt_parse_sys_interval, tp_opt_show_double, sys_interval, 0, 0) \
    X("TRAINPROF_RANKS", "all", "", "global ranks that record, e.g. 0,8-15", \
      tp_opt_parse_ranks, tp_opt_show_string, ranks, 0, 0) \
    X("TRAINPROF_BUFFER_MB", "256", "256", "cap on event memory per process", \
      tp_opt_parse_int, tp_opt_show_int, buffer_mb, 1, 65536) \
    X("TRAINPROF_FLIGHT", "0", "0", \
      "flight recorder: steps kept outside windows and dumped on trouble; 0: off", \
      tp_opt_parse_int, tp_opt_show_int, flight, 0, TP_FLIGHT_MAX) \
    X("TRAINPROF_FLIGHT_MB", "64", "64", "cap on the flight recorder's records", \
      tp_opt_parse_int, tp_opt_show_int, flight_mb, 1, 65536) \
    X("TRAINPROF_FLIGHT_SLOW", "3", "3", \
      "a step this many times slower than the median of the last 50 steps is dumped", \
      tp_opt_parse_flight_slow, tp_opt_show_double, flight_slow, 0, 0) \
    X("TRAINPROF_METADATA", "unset", NULL, "a JSON object merged into the trace's top level", \
      tp_opt_parse_metadata, tp_opt_show_metadata, metadata, 0, 0) \
    X("TRAINPROF_PEAK_TFLOPS", "from GPU name", NULL, "dense peak used for MFU", \
      tp_opt_parse_peak, tp_opt_show_double, peak_tflops, 0, 0) \
    X("TRAINPROF_LOG", "info", "info", "quiet, error, warn, info, debug", \
      tp_opt_parse_log, tp_opt_show_log, log, 0, 0) \
    X("TRAINPROF_STRICT", "0", "0", "1: a configuration error exits with status 2", \
      tp_opt_parse_bool, tp_opt_show_bool, strict, 0, 0) \
    X("TRAINPROF_DUMP_CONFIG", "0", "0", "1: print the effective configuration at activation", \
      tp_opt_parse_bool, tp_opt_show_bool, dump_config, 0, 0) \
    X("TRAINPROF_CUPTI_PATH", "unset", NULL, "libcupti to load when none is loaded yet", \
      tp_opt_parse_string, tp_opt_show_string, cupti_path, 0, 0) \
    X("TRAINPROF_TRIGGER", "unset", NULL, \
      "on-demand capture: the trigger file tp-flush polls, a format string; unset: " \
      "{run_name}/trigger with TRAINPROF_SCHEDULE=none, else none; none: never", \
      tp_opt_parse_format, tp_opt_show_string, trigger, 0, 0) \
    X("TRAINPROF_TRIGGER_SIGNAL", "off", "off", \
      "a signal that makes tp-flush read the trigger file at once (SIGUSR1, SIGUSR2, SIGRTMIN+N)", \
      tp_opt_parse_signal, tp_opt_show_signal, trigger_signal, 0, 0) \
    X("TRAINPROF_HANG_S", "unset", NULL, \
      "seconds without a step end before the hang doctor reports; unset: 60 with the flight " \
      "recorder, else off; off or 0: never", \
      tp_opt_parse_hang, tp_opt_show_hang, hang_s, 0, 0)

#define AS_VAR(name, def, init, help, parse, show, f, lo, hi) { name, def, help },
#define AS_OPT(name, def, init, help, parse, show, f, lo, hi) \
    { name, init, parse, show, FIELD(f), lo, hi },

static const struct tp_config_var vars[] = { TP_CONFIG_TABLE(AS_VAR) };
static const struct opt opts[] = { TP_CONFIG_TABLE(AS_OPT) };
#define N_VARS (sizeof vars / sizeof vars[0])

const struct tp_config_var *tp_config_vars(size_t *n)
{
    if (n)
        *n = N_VARS;
    return vars;
}

/* ---- messages ---------------------------------------------------------------- */

static void add_line(struct tp_config *c, int is_error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_line(struct tp_config *c, int is_error, const char *fmt, ...)
{
    if (is_error)
        c->n_errors++;
    if (c->n_messages >= (int)(sizeof c->messages / sizeof c->messages[0])) {
        c->n_dropped_messages++;
        return;
    }
    char *m = c->messages[c->n_messages++];
    size_t sz = sizeof c->messages[0];
    int k = snprintf(m, sz, "trainprof: %s: ", is_error ? "error" : "warning");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m + k, sz - (size_t)k, fmt, ap);
    va_end(ap);
}

/* The value as shown in a message: one line, at most ~160 bytes. */
static void quote_value(const char *v, char *out, size_t n)
{
    size_t len = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p && len + 8 < n; p++) {
        if (len >= 160) {
            memcpy(out + len, "...", 3);
            len += 3;
            break;
        }
        if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
            len += (size_t)snprintf(out + len, n - len, "\\x%02x", *p);
        else
            out[len++] = (char)*p;
    }
    out[len] = '\0';
}

/* ---- unknown names ------------------------------------------------------------- */

/* Optimal string alignment distance, so that a swap (SCHEDUEL) costs 1. */
static int edit_distance(const char *a, size_t la, const char *b)
{
    enum { MAXL = 64 };
    size_t lb = strlen(b);
    la = la > MAXL ? MAXL : la;
    lb = lb > MAXL ? MAXL : lb;
    int d[MAXL + 1][MAXL + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int cost = toupper((unsigned char)a[i - 1]) != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

static void check_unknown(struct tp_config *c, const char *const *names)
{
    static const char prefix[] = "TRAINPROF_";
    for (; names && *names; names++) {
        const char *nm = *names;
        if (strncmp(nm, prefix, sizeof prefix - 1) != 0)
            continue;
        const char *eq = strchr(nm, '=');
        size_t len = eq ? (size_t)(eq - nm) : strlen(nm);
        size_t best = 0;
        int best_d = INT_MAX, known = 0;
        for (size_t i = 0; i < N_VARS; i++) {
            if (strlen(vars[i].name) == len && memcmp(vars[i].name, nm, len) == 0) {
                known = 1;
                break;
            }
            int d = edit_distance(nm, len, vars[i].name);
            if (d < best_d) {
                best_d = d;
                best = i;
            }
        }
        if (!known) {
            char shown[200];
            snprintf(shown, sizeof shown, "%.*s", (int)(len > 100 ? 100 : len), nm);
            tp_config_sanitize(shown);
            add_line(c, 0, "unknown variable %s (did you mean %s?)", shown, vars[best].name);
        }
    }
}

/* ---- parse, init, report ----------------------------------------------------- */

int tp_config_parse(struct tp_config *cfg, const char *(*get)(const char *name),
                    const char *const *names)
{
    memset(cfg, 0, sizeof *cfg);
    tp_launcher_read(cfg, get);
    for (size_t i = 0; i < N_VARS; i++) {
        const struct opt *o = &opts[i];
        const char *val = get(o->name);
        char why[448];
        if (val && *val) {
            if (o->parse(cfg, o, val, why, sizeof why) == 0)
                continue;
            char shown[200];
            quote_value(val, shown, sizeof shown);
            add_line(cfg, 1, "%s=\"%s\": %s", o->name, shown, why);
        }
        if (o->init && o->parse(cfg, o, o->init, why, sizeof why) != 0)
            add_line(cfg, 1, "%s: built-in default rejected: %s", o->name, why);
    }
    if (!cfg->run_name[0])
        tp_launcher_run_name(cfg, get);
    for (int i = 0; i < cfg->n_signals; i++) {
        const char *pat = cfg->signals[i].pattern;
        unsigned char c0 = (unsigned char)pat[0];
        if (cfg->signals[i].kind != TP_SIGNAL_NVTX)
            continue;
        if (strchr("*?[\\", c0))      /* fnmatch's specials (flags 0): any first byte */
            memset(cfg->nvtx_lead, 0xff, sizeof cfg->nvtx_lead);
        else
            cfg->nvtx_lead[c0 >> 6] |= UINT64_C(1) << (c0 & 63);
    }
    if (!cfg->schedule.all && !cfg->schedule.none && cfg->schedule.warmup == 0)
        add_line(cfg, 0, "TRAINPROF_SCHEDULE: Profiler won't be using warmup, "
                 "this can skew profiler results");
    check_unknown(cfg, names);
    return cfg->n_errors;
}

void tp_config_free(struct tp_config *cfg)
{
    free(cfg->metadata);
    cfg->metadata = NULL;
}

static const char *env_get(const char *name)
{
    return getenv(name);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Copied once, at activation (strings included), because a program
 * thread may call setenv while tp-flush starts a command, and environ is
 * then reallocated under its reader. */
char **tp_config_exec_env(void)
{
    static const char name[] = "TRAINPROF_ENABLED=";
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], name, sizeof name - 1) != 0 && !(env[j++] = strdup(environ[i])))
            goto fail;
    if (!(env[j] = strdup("TRAINPROF_ENABLED=0")))
        goto fail;
    return env;
fail:
    for (size_t i = 0; env[i]; i++)
        free(env[i]);
    free(env);
    return NULL;
}

static void init_run(void)
{
    tp_config_parse(&tp_cfg, env_get, (const char *const *)environ);
    if (tp_cfg.exec[0] && tp_cfg.enabled)
        tp_cfg.exec_env = tp_config_exec_env();
    const char *home = getenv("CUDA_HOME");
    snprintf(tp_cfg.cuda_home, sizeof tp_cfg.cuda_home, "%s", home && home[0] ? home : "/usr/local/cuda");
    tp_cfg.cuda_visible = getenv("CUDA_VISIBLE_DEVICES");
}

void tp_config_init(void)
{
    pthread_once(&init_once, init_run);
}

static void write_line(const char *line)
{
    tp_log_line(line, strlen(line));
}

static pthread_once_t report_once = PTHREAD_ONCE_INIT;
static atomic_int strict_exit;

static void report_run(void)
{
    const struct tp_config *c = &tp_cfg;
    int saved = errno;
    tp_log_level = c->enabled ? c->log : TP_LOG_QUIET;
    if (!getcwd(tp_cfg.start_dir, sizeof tp_cfg.start_dir) || tp_cfg.start_dir[0] != '/') {
        if (c->enabled && !c->n_errors)
            TP_WARN("cannot resolve the working directory (%s): relative output folders "
                    "follow the program's working directory at each save", strerror(errno));
        tp_cfg.start_dir[0] = '\0';
    }
    /* the errors that make TRAINPROF_STRICT end the program are printed at
     * any TRAINPROF_LOG: an exit with status 2 always says why */
    int shown = c->n_errors && c->strict && c->enabled ? TP_LOG_ERROR : tp_log_level;
    if (tp_log_level > shown)
        shown = tp_log_level;
    for (int i = 0; i < c->n_messages; i++) {
        int level = strncmp(c->messages[i], "trainprof: error:", 17) == 0 ? TP_LOG_ERROR
                                                                           : TP_LOG_WARN;
        if (level <= shown)
            write_line(c->messages[i]);
    }
    if (c->n_dropped_messages && tp_log_level >= TP_LOG_WARN) {
        char more[96];
        snprintf(more, sizeof more, "trainprof: warning: %d more configuration messages not shown",
                 c->n_dropped_messages);
        write_line(more);
    }
    if (c->dump_config && c->enabled) {
        char buf[4096], esc[8192];
        for (size_t i = 0; i < N_VARS; i++) {
            const char *v = opts[i].show(c, &opts[i], buf, sizeof buf);
            size_t len = tp_log_escape(v, strlen(v), esc, sizeof esc);
            struct iovec iov[5] = {
                { (void *)"trainprof: config: ", 19 }, { (void *)opts[i].name, strlen(opts[i].name) },
                { (void *)"=", 1 }, { esc, len }, { (void *)"\n", 1 },
            };
            ssize_t w = writev(STDERR_FILENO, iov, 5);
            (void)w;
        }
    }
    errno = saved;
}

/* What the schedule records (one window unless repeat says otherwise,
 * where torch.profiler.schedule repeats: our default repeat=1 is kept for a
 * profiler left attached to a long job), and the step signals. */
void tp_config_announce(void)
{
    const struct tp_config *c = &tp_cfg;
    if (c->n_errors || !c->enabled || !c->rank_selected || tp_log_level < TP_LOG_INFO)
        return;
    /* Not at all where the write could block: the line is information, and
     * tp-flush, blocked on a stderr pipe that is full and never read, would
     * not start CUPTI for the first window, which the training thread
     * awaits (steps.c tp_await_on) and then warns about, blocking in its turn
     * (test_fatal.py::test_stuck_flush_thread_is_given_up).  A pipe with
     * room for a page takes this line without blocking. */
    struct pollfd pfd = { .fd = STDERR_FILENO, .events = POLLOUT };
    if (poll(&pfd, 1, 0) != 1 || (pfd.revents & (POLLOUT | POLLERR | POLLHUP)) != POLLOUT)
        return;
    char sched[256], what[160], sigs[TP_MAX_SIGNALS * (TP_PATTERN_MAX + 33)];
    TP_INFO("rank %d: schedule %s: %s; step signals %s", c->rank,
            tp_opt_show_schedule(c, NULL, sched, sizeof sched),
            tp_schedule_describe(&c->schedule, what, sizeof what),
            tp_opt_show_step_on(c, NULL, sigs, sizeof sigs));
}

int tp_config_report(void)
{
    tp_config_init();
    pthread_once(&report_once, report_run);
    if (tp_cfg.n_errors && tp_cfg.strict && tp_cfg.enabled && !atomic_exchange(&strict_exit, 1))
        exit(2);
    return tp_cfg.n_errors > 0 || !tp_cfg.enabled || !tp_cfg.rank_selected;
}

/* jansson rejects invalid UTF-8; such bytes become '?' rather than losing the key. */
static json_t *json_string_lossy(const char *s)
{
    json_t *j = json_string(s);
    if (j)
        return j;
    char *copy = strdup(s);
    if (!copy)
        return NULL;
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string(copy);
    free(copy);
    return j;
}

char *tp_config_json(const struct tp_config *cfg)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    char buf[4096];
    for (size_t i = 0; i < N_VARS; i++) {
        const char *v = opts[i].show(cfg, &opts[i], buf, sizeof buf);
        if (json_object_set_new(o, opts[i].name, json_string_lossy(v)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
