/*
 * config.c - every TRAINPROF_* variable, parsed once, from one table.
 *
 * DESIGN
 * TP_CONFIG_TABLE lists each variable once: name, documented default (the
 * README cell, checked by tests/unit/test_config.c), the value parsed when
 * the variable is unset, a parser and a printer.  tp_config_parse() walks
 * the table with a lookup function, so tests drive it without touching the
 * environment; tp_config_init() runs it once over getenv()/environ, which
 * appear in this file and nowhere else (make lint).  Parsing is silent
 * (decision 3): a bad value stores one line, "trainprof: error: VAR="value":
 * what is accepted", keeps the default in its place and counts an error;
 * tp_config_report() prints the lines at activation, honours TRAINPROF_LOG,
 * TRAINPROF_DUMP_CONFIG and TRAINPROF_STRICT, and tells the caller to stay
 * passive.  TRAINPROF_ENABLED=0 silences all of it, STRICT included: a
 * disabled profiler must not stop a program (the exec child of decision 10
 * inherits the parent's variables).  Launcher variables are not ours to
 * validate: a malformed RANK is skipped and the next source in SPEC 4's
 * order is tried.  An empty value means unset, so `TRAINPROF_X= cmd`
 * restores a default.
 */
#include "config.h"

#include "format.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct tp_config tp_cfg;

struct opt;
typedef int (*parse_fn)(struct tp_config *c, const struct opt *o, const char *val,
                        char *why, size_t whysz);
typedef const char *(*show_fn)(const struct tp_config *c, const struct opt *o,
                               char *buf, size_t n);

struct opt {
    const char *name;
    const char *init;      /* parsed when unset; NULL leaves the zeroed field */
    parse_fn parse;
    show_fn show;
    size_t off, size;      /* the field in struct tp_config */
    long long lo, hi;      /* integer range */
};

#define FIELD(f) offsetof(struct tp_config, f), sizeof(((struct tp_config *)0)->f)
#define WHY(...) (snprintf(why, whysz, __VA_ARGS__), -1)

static const char schedule_default[] = "skip_first=0,wait=0,warmup=1,active=4,repeat=1";

/* ---- parsers ------------------------------------------------------------- */

static int to_ll(const char *s, long long *out)
{
    if (!*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int to_double(const char *s, double *out)
{
    if (!*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static void *field(struct tp_config *c, const struct opt *o)
{
    return (char *)c + o->off;
}

static const void *cfield(const struct tp_config *c, const struct opt *o)
{
    return (const char *)c + o->off;
}

static int parse_bool_str(const char *v, int *out)
{
    static const char *const yes[] = { "1", "true", "yes", "on" };
    static const char *const no[] = { "0", "false", "no", "off" };
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int parse_bool(struct tp_config *c, const struct opt *o, const char *val,
                      char *why, size_t whysz)
{
    int b;
    if (parse_bool_str(val, &b) < 0)
        return WHY("must be a boolean: 0/1, true/false, yes/no or on/off");
    *(int *)field(c, o) = b;
    return 0;
}

static int parse_int(struct tp_config *c, const struct opt *o, const char *val,
                     char *why, size_t whysz)
{
    long long v;
    if (to_ll(val, &v) < 0 || v < o->lo || v > o->hi) {
        if (o->hi == LLONG_MAX)
            return WHY("must be an integer >= %lld", o->lo);
        return WHY("must be an integer between %lld and %lld", o->lo, o->hi);
    }
    if (o->size == sizeof(int))
        *(int *)field(c, o) = (int)v;
    else
        *(long *)field(c, o) = (long)v;
    return 0;
}

static int parse_sys_interval(struct tp_config *c, const struct opt *o, const char *val,
                              char *why, size_t whysz)
{
    double v;
    if (to_double(val, &v) < 0 || v < 0.01 || v > 3600)
        return WHY("must be a number of seconds between 0.01 and 3600");
    *(double *)field(c, o) = v;
    return 0;
}

static int parse_peak(struct tp_config *c, const struct opt *o, const char *val,
                      char *why, size_t whysz)
{
    double v;
    if (to_double(val, &v) < 0 || !(v > 0))
        return WHY("must be a number of TFLOP/s > 0 (unset: from the GPU name)");
    *(double *)field(c, o) = v;
    return 0;
}

static int parse_string(struct tp_config *c, const struct opt *o, const char *val,
                        char *why, size_t whysz)
{
    if (strlen(val) >= o->size)
        return WHY("must be at most %zu bytes", o->size - 1);
    memcpy(field(c, o), val, strlen(val) + 1);
    return 0;
}

static int parse_format(struct tp_config *c, const struct opt *o, const char *val,
                        char *why, size_t whysz)
{
    char err[400];
    if (tp_format_check(val, err, sizeof err) < 0)
        return WHY("%s", err);
    return parse_string(c, o, val, why, whysz);
}

static int parse_exec(struct tp_config *c, const struct opt *o, const char *val,
                      char *why, size_t whysz)
{
    char err[400];
    if (tp_format_check_exec(val, err, sizeof err) < 0)
        return WHY("%s", err);
    return parse_string(c, o, val, why, whysz);
}

/* Splits "val" at commas into "items" (copies in "buf"); empty items are errors. */
static int split_list(const char *val, char *buf, size_t bufsz, char **items, int max,
                      int *n, char *why, size_t whysz)
{
    if (strlen(val) >= bufsz)
        return WHY("must be at most %zu bytes", bufsz - 1);
    memcpy(buf, val, strlen(val) + 1);
    *n = 0;
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (!*p)
            return WHY("empty item in the comma-separated list");
        if (*n == max)
            return WHY("at most %d items", max);
        items[(*n)++] = p;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int parse_schedule(struct tp_config *c, const struct opt *o, const char *val,
                          char *why, size_t whysz)
{
    static const char *const keys[] = { "skip_first", "wait", "warmup", "active", "repeat" };
    struct tp_schedule s = { 0, 0, 1, 4, 1, 0 };
    uint64_t *slot[] = { &s.skip_first, &s.wait, &s.warmup, &s.active, &s.repeat };
    int seen[5] = { 0 };
    (void)o;
    if (strcasecmp(val, "all") == 0) {
        memset(&c->schedule, 0, sizeof c->schedule);
        c->schedule.all = 1;
        return 0;
    }
    char buf[512], *items[16];
    int n;
    if (split_list(val, buf, sizeof buf, items, 16, &n, why, whysz) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char *eq = strchr(items[i], '=');
        if (!eq)
            return WHY("expected key=value or all, got \"%.40s\"", items[i]);
        *eq = '\0';
        int k = -1;
        for (int j = 0; j < 5; j++)
            if (strcmp(items[i], keys[j]) == 0)
                k = j;
        if (k < 0)
            return WHY("unknown key \"%.40s\"; accepted: skip_first, wait, warmup, active, repeat",
                       items[i]);
        if (seen[k]++)
            return WHY("duplicate key %s", keys[k]);
        long long v;
        long long lo = k == 3 ? 1 : 0;
        if (to_ll(eq + 1, &v) < 0 || v < lo)
            return WHY("%s must be an integer >= %lld", keys[k], lo);
        if (v > 1000000000000LL)
            return WHY("%s must be an integer <= 1000000000000", keys[k]);
        *slot[k] = (uint64_t)v;
    }
    c->schedule = s;
    return 0;
}

static int parse_one_signal(struct tp_signal *sig, const char *item, char *why, size_t whysz)
{
    static const char accepted[] = "api, nvtx:GLOB, launch:GLOB[/N] or call:NAME[/N]";
    memset(sig, 0, sizeof *sig);
    sig->every = 1;
    if (strlen(item) >= sizeof sig->text)
        return WHY("step signal longer than %zu bytes", sizeof sig->text - 1);
    snprintf(sig->text, sizeof sig->text, "%s", item);
    const char *pat;
    if (strcmp(item, "api") == 0) {
        sig->kind = TP_SIGNAL_API;
        return 0;
    } else if (strncmp(item, "nvtx:", 5) == 0) {
        sig->kind = TP_SIGNAL_NVTX;
        pat = item + 5;
    } else if (strncmp(item, "launch:", 7) == 0) {
        sig->kind = TP_SIGNAL_LAUNCH;
        pat = item + 7;
    } else if (strncmp(item, "call:", 5) == 0) {
        sig->kind = TP_SIGNAL_CALL;
        pat = item + 5;
    } else {
        return WHY("unknown step signal \"%.60s\"; accepted: %s", item, accepted);
    }
    size_t plen = strlen(pat);
    if (sig->kind != TP_SIGNAL_NVTX) {
        const char *slash = strrchr(pat, '/');
        if (slash) {
            long long n;
            if (to_ll(slash + 1, &n) < 0 || n < 1)
                return WHY("in \"%.60s\": N must be an integer >= 1", item);
            sig->every = (uint64_t)n;
            plen = (size_t)(slash - pat);
        }
    }
    if (plen == 0)
        return WHY("in \"%.60s\": empty %s", item,
                   sig->kind == TP_SIGNAL_CALL ? "NAME" : "GLOB");
    if (plen >= sizeof sig->pattern)
        return WHY("in \"%.60s\": pattern longer than %zu bytes", item, sizeof sig->pattern - 1);
    memcpy(sig->pattern, pat, plen);
    sig->pattern[plen] = '\0';
    if (sig->kind == TP_SIGNAL_CALL) {
        for (size_t i = 0; i < plen; i++)
            if (!isalnum((unsigned char)pat[i]) && pat[i] != '_')
                return WHY("in \"%.60s\": NAME must be a function name", item);
    }
    return 0;
}

static int parse_step_on(struct tp_config *c, const struct opt *o, const char *val,
                         char *why, size_t whysz)
{
    char buf[TP_MAX_SIGNALS * (TP_PATTERN_MAX + 32)], *items[TP_MAX_SIGNALS];
    struct tp_signal sigs[TP_MAX_SIGNALS];
    int n;
    (void)o;
    if (split_list(val, buf, sizeof buf, items, TP_MAX_SIGNALS, &n, why, whysz) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (parse_one_signal(&sigs[i], items[i], why, whysz) < 0)
            return -1;
    memcpy(c->signals, sigs, (size_t)n * sizeof sigs[0]);
    c->n_signals = n;
    return 0;
}

/* The output modules' names, comma-separated (handlers.def). */
static const char *handler_names(void)
{
#define TP_HANDLER(n) "," #n
#define TP_STAGE(n) "," #n
    static const char names[] =
#include "handlers.def"
        ;
#undef TP_HANDLER
#undef TP_STAGE
    return names + 1;
}

static int handler_known(const char *name)
{
    size_t n = strlen(name);
    for (const char *p = handler_names(); *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static int parse_handlers(struct tp_config *c, const struct opt *o, const char *val,
                          char *why, size_t whysz)
{
    char buf[512], *items[TP_MAX_HANDLERS];
    int n;
    (void)o;
    if (split_list(val, buf, sizeof buf, items, TP_MAX_HANDLERS, &n, why, whysz) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (strlen(items[i]) >= TP_HANDLER_NAME_MAX || !handler_known(items[i]))
            return WHY("unknown handler \"%.40s\"; accepted: %s", items[i], handler_names());
        for (int j = 0; j < i; j++)
            if (strcmp(items[i], items[j]) == 0)
                return WHY("handler %s listed twice", items[i]);
    }
    for (int i = 0; i < n; i++)
        snprintf(c->handlers[i], TP_HANDLER_NAME_MAX, "%s", items[i]);
    c->n_handlers = n;
    return 0;
}

struct flag_name {
    const char *name;
    unsigned bit;
};

static const struct flag_name activity_names[] = { { "cpu", TP_ACT_CPU }, { "cuda", TP_ACT_CUDA } };
static const struct flag_name sys_names[] = {
    { "cpu", TP_SYS_CPU }, { "memory", TP_SYS_MEMORY }, { "disk", TP_SYS_DISK }, { "net", TP_SYS_NET },
};

static int parse_flags(const char *val, const struct flag_name *names, size_t nn,
                       const char *accepted, unsigned *out, char *why, size_t whysz)
{
    char buf[256], *items[16];
    int n;
    if (split_list(val, buf, sizeof buf, items, 16, &n, why, whysz) < 0)
        return -1;
    unsigned bits = 0;
    for (int i = 0; i < n; i++) {
        size_t j;
        for (j = 0; j < nn; j++)
            if (strcasecmp(items[i], names[j].name) == 0)
                break;
        if (j == nn)
            return WHY("unknown item \"%.40s\"; accepted: %s", items[i], accepted);
        bits |= names[j].bit;
    }
    *out = bits;
    return 0;
}

static int parse_activities(struct tp_config *c, const struct opt *o, const char *val,
                            char *why, size_t whysz)
{
    (void)o;
    return parse_flags(val, activity_names, 2, "a comma list of cpu, cuda",
                       &c->activities, why, whysz);
}

static int parse_sys(struct tp_config *c, const struct opt *o, const char *val,
                     char *why, size_t whysz)
{
    (void)o;
    if (strcasecmp(val, "none") == 0) {
        c->sys = 0;
        return 0;
    }
    return parse_flags(val, sys_names, 4, "a comma list of cpu, memory, disk, net; or none",
                       &c->sys, why, whysz);
}

static int parse_log(struct tp_config *c, const struct opt *o, const char *val,
                     char *why, size_t whysz)
{
    static const char *const names[] = {
        [TP_LOG_QUIET] = "quiet", [TP_LOG_ERROR] = "error", [TP_LOG_WARN] = "warn",
        [TP_LOG_INFO] = "info", [TP_LOG_DEBUG] = "debug",
    };
    (void)o;
    for (int i = TP_LOG_QUIET; i <= TP_LOG_DEBUG; i++) {
        if (strcasecmp(val, names[i]) == 0) {
            c->log = (enum tp_log_level)i;
            return 0;
        }
    }
    return WHY("must be one of quiet, error, warn, info, debug");
}

/* Walks a "0,8-15" list; returns -1 on a syntax error, else whether "rank" is in it. */
static int ranks_contain(const char *val, long long rank, char *why, size_t whysz)
{
    char buf[1024], *items[256];
    int n, hit = 0;
    if (split_list(val, buf, sizeof buf, items, 256, &n, why, whysz) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        long long a, b;
        char *dash = strchr(items[i], '-');
        if (dash)
            *dash = '\0';
        if (to_ll(items[i], &a) < 0 || a < 0)
            return WHY("\"%.40s\" is not a rank; expected ranks >= 0 and ranges A-B, e.g. 0,8-15",
                       items[i]);
        b = a;
        if (dash && (to_ll(dash + 1, &b) < 0 || b < a))
            return WHY("\"%.20s-%.20s\" is not a range A-B with 0 <= A <= B", items[i], dash + 1);
        if (rank >= a && rank <= b)
            hit = 1;
    }
    return hit;
}

static int parse_ranks(struct tp_config *c, const struct opt *o, const char *val,
                       char *why, size_t whysz)
{
    if (!*val) {
        c->ranks[0] = '\0';
        c->rank_selected = 1;
        return 0;
    }
    int hit = ranks_contain(val, c->rank, why, whysz);
    if (hit < 0 || parse_string(c, o, val, why, whysz) < 0)
        return -1;
    c->rank_selected = hit;
    return 0;
}

static const char *const reserved_keys[] = {
    "schemaVersion", "deviceProperties", "distributedInfo", "trainprof",
    "displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "traceName",
};

static int parse_metadata(struct tp_config *c, const struct opt *o, const char *val,
                          char *why, size_t whysz)
{
    json_error_t jerr;
    (void)o;
    json_t *j = json_loads(val, JSON_REJECT_DUPLICATES, &jerr);
    if (!j)
        return WHY("must be a JSON object: %s at column %d", jerr.text, jerr.column);
    if (!json_is_object(j)) {
        json_decref(j);
        return WHY("must be a JSON object {...}, not another JSON value");
    }
    for (size_t i = 0; i < sizeof reserved_keys / sizeof reserved_keys[0]; i++) {
        if (json_object_get(j, reserved_keys[i])) {
            json_decref(j);
            return WHY("key \"%s\" is written by trainprof and cannot be set", reserved_keys[i]);
        }
    }
    char *dump = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!dump)
        return WHY("out of memory");
    free(c->metadata);
    c->metadata = dump;
    return 0;
}

/* One path component: no '/', no control bytes, not "." or "..". */
static void sanitize_component(char *s)
{
    for (char *p = s; *p; p++)
        if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '_';
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        memset(s, '_', strlen(s));
}

static int parse_run_name(struct tp_config *c, const struct opt *o, const char *val,
                          char *why, size_t whysz)
{
    if (parse_string(c, o, val, why, whysz) < 0)
        return -1;
    sanitize_component(c->run_name);
    return 0;
}

/* ---- printers -------------------------------------------------------------- */

static const char *show_bool(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    snprintf(b, n, "%d", *(const int *)cfield(c, o) ? 1 : 0);
    return b;
}

static const char *show_int(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    if (o->size == sizeof(int))
        snprintf(b, n, "%d", *(const int *)cfield(c, o));
    else
        snprintf(b, n, "%ld", *(const long *)cfield(c, o));
    return b;
}

static const char *show_double(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    double v = *(const double *)cfield(c, o);
    if (v == 0)
        return "";
    snprintf(b, n, "%g", v);
    return b;
}

static const char *show_string(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)b;
    (void)n;
    return (const char *)cfield(c, o);
}

static const char *show_schedule(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    const struct tp_schedule *s = &c->schedule;
    (void)o;
    if (s->all)
        return "all";
    snprintf(b, n, "skip_first=%llu,wait=%llu,warmup=%llu,active=%llu,repeat=%llu",
             (unsigned long long)s->skip_first, (unsigned long long)s->wait,
             (unsigned long long)s->warmup, (unsigned long long)s->active,
             (unsigned long long)s->repeat);
    return b;
}

static void join(char *b, size_t n, size_t *len, const char *item)
{
    int m = snprintf(b + *len, n - *len, "%s%s", *len ? "," : "", item);
    if (m > 0)
        *len = *len + (size_t)m < n ? *len + (size_t)m : n - 1;
}

static const char *show_step_on(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    size_t len = 0;
    (void)o;
    b[0] = '\0';
    for (int i = 0; i < c->n_signals; i++)
        join(b, n, &len, c->signals[i].text);
    return b;
}

static const char *show_handlers(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    size_t len = 0;
    (void)o;
    b[0] = '\0';
    for (int i = 0; i < c->n_handlers; i++)
        join(b, n, &len, c->handlers[i]);
    return b;
}

static const char *show_flags(unsigned bits, const struct flag_name *names, size_t nn,
                              char *b, size_t n)
{
    size_t len = 0;
    b[0] = '\0';
    for (size_t i = 0; i < nn; i++)
        if (bits & names[i].bit)
            join(b, n, &len, names[i].name);
    return b;
}

static const char *show_activities(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)o;
    return show_flags(c->activities, activity_names, 2, b, n);
}

static const char *show_sys(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)o;
    return c->sys ? show_flags(c->sys, sys_names, 4, b, n) : "none";
}

static const char *show_log(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    static const char *const names[] = { "quiet", "error", "warn", "info", "debug" };
    (void)o;
    (void)b;
    (void)n;
    return (unsigned)c->log <= TP_LOG_DEBUG ? names[c->log] : "info";
}

static const char *show_metadata(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)o;
    (void)b;
    (void)n;
    return c->metadata ? c->metadata : "";
}

/* ---- the table ------------------------------------------------------------- */

/* X(name, documented default, parsed when unset, help, parser, printer, field, lo, hi) */
#define TP_CONFIG_TABLE(X) \
    X("TRAINPROF_ENABLED", "1", "1", "0: pass-through only", \
      parse_bool, show_bool, enabled, 0, 0) \
    X("TRAINPROF_SCHEDULE", schedule_default, schedule_default, \
      "step schedule (SPEC 5); any subset of keys, or all", \
      parse_schedule, show_schedule, schedule, 0, 0) \
    X("TRAINPROF_STEP_ON", "api,nvtx:step", "api,nvtx:step", "comma list of step signals", \
      parse_step_on, show_step_on, signals, 0, 0) \
    X("TRAINPROF_RUN_NAME", "see below", NULL, "the {run_name} variable", \
      parse_run_name, show_string, run_name, 0, 0) \
    X("TRAINPROF_FOLDER", "{run_name}/traces", "{run_name}/traces", \
      "output folder, a format string", parse_format, show_string, folder, 0, 0) \
    X("TRAINPROF_FILENAME", "rank{rank}.{batch}.pt.trace.json", "rank{rank}.{batch}.pt.trace.json", \
      "trace file name, a format string; .gz is appended when gzip is on", \
      parse_format, show_string, filename, 0, 0) \
    X("TRAINPROF_GZIP", "1", "1", "gzip the trace", parse_bool, show_bool, gzip, 0, 0) \
    X("TRAINPROF_OVERWRITE", "0", "0", "0: never replace an existing file", \
      parse_bool, show_bool, overwrite, 0, 0) \
    X("TRAINPROF_KEEP", "-1", "-1", "number of this process's traces to keep; -1 all", \
      parse_int, show_int, keep, -1, LLONG_MAX) \
    X("TRAINPROF_HANDLERS", "chrome,summary", "chrome,summary", "output handlers", \
      parse_handlers, show_handlers, handlers, 0, 0) \
    X("TRAINPROF_REPORTS", "{run_name}/reports", "{run_name}/reports", \
      "folder for summary, stacks and memory outputs", \
      parse_format, show_string, reports, 0, 0) \
    X("TRAINPROF_EXEC", "unset", NULL, "command template run after each saved file", \
      parse_exec, show_string, exec, 0, 0) \
    X("TRAINPROF_ACTIVITIES", "cpu,cuda", "cpu,cuda", "cpu: host calls; cuda: GPU activity (CUPTI)", \
      parse_activities, show_activities, activities, 0, 0) \
    X("TRAINPROF_RECORD_SHAPES", "0", "0", "shapes and dtypes of library calls", \
      parse_bool, show_bool, record_shapes, 0, 0) \
    X("TRAINPROF_PROFILE_MEMORY", "1", "1", "allocations and the memory timeline", \
      parse_bool, show_bool, profile_memory, 0, 0) \
    X("TRAINPROF_WITH_STACK", "0", "0", "host call stacks at intercepted calls", \
      parse_bool, show_bool, with_stack, 0, 0) \
    X("TRAINPROF_STACK_DEPTH", "32", "32", "frames kept per stack", \
      parse_int, show_int, stack_depth, 1, 128) \
    X("TRAINPROF_WITH_FLOPS", "1", "1", "FLOP estimates for math-library calls", \
      parse_bool, show_bool, with_flops, 0, 0) \
    X("TRAINPROF_SYS", "cpu", "cpu", "host statistics: cpu,memory,disk,net or none", \
      parse_sys, show_sys, sys, 0, 0) \
    X("TRAINPROF_SYS_INTERVAL", "0.5", "0.5", "seconds between host samples", \
      parse_sys_interval, show_double, sys_interval, 0, 0) \
    X("TRAINPROF_RANKS", "all", "", "global ranks that record, e.g. 0,8-15", \
      parse_ranks, show_string, ranks, 0, 0) \
    X("TRAINPROF_BUFFER_MB", "256", "256", "cap on event memory per process", \
      parse_int, show_int, buffer_mb, 1, 65536) \
    X("TRAINPROF_METADATA", "unset", NULL, "a JSON object merged into the trace's top level", \
      parse_metadata, show_metadata, metadata, 0, 0) \
    X("TRAINPROF_PEAK_TFLOPS", "from GPU name", NULL, "dense peak used for MFU", \
      parse_peak, show_double, peak_tflops, 0, 0) \
    X("TRAINPROF_LOG", "info", "info", "quiet, error, warn, info, debug", \
      parse_log, show_log, log, 0, 0) \
    X("TRAINPROF_STRICT", "0", "0", "1: a configuration error exits with status 2", \
      parse_bool, show_bool, strict, 0, 0) \
    X("TRAINPROF_DUMP_CONFIG", "0", "0", "1: print the effective configuration at activation", \
      parse_bool, show_bool, dump_config, 0, 0) \
    X("TRAINPROF_CUPTI_PATH", "unset", NULL, "libcupti to load (issue 4)", \
      parse_string, show_string, cupti_path, 0, 0)

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
            sanitize_component(shown);
            add_line(c, 0, "unknown variable %s (did you mean %s?)", shown, vars[best].name);
        }
    }
}

/* ---- launcher environment ------------------------------------------------------ */

static int first_int(const char *(*get)(const char *), const char *const *srcs,
                     long long lo, int def)
{
    for (; *srcs; srcs++) {
        const char *v = get(*srcs);
        long long n;
        if (v && to_ll(v, &n) == 0 && n >= lo && n <= INT_MAX)
            return (int)n;
    }
    return def;
}

static void read_launcher(struct tp_config *c, const char *(*get)(const char *))
{
    static const char *const rank[] = { "RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK",
                                        "SLURM_PROCID", NULL };
    static const char *const local_rank[] = { "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                              "MPI_LOCALRANKID", "SLURM_LOCALID", NULL };
    static const char *const world[] = { "WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                                         "SLURM_NTASKS", NULL };
    static const char *const local_world[] = { "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                               "MPI_LOCALNRANKS", NULL };
    static const char *const node[] = { "NODE_RANK", "GROUP_RANK", "SLURM_NODEID", NULL };
    c->rank = first_int(get, rank, 0, 0);
    c->local_rank = first_int(get, local_rank, 0, 0);
    c->world_size = first_int(get, world, 1, 1);
    c->local_world_size = first_int(get, local_world, 1, 1);
    c->node_rank = first_int(get, node, 0, 0);

    if (gethostname(c->hostname, sizeof c->hostname - 1) != 0)
        snprintf(c->hostname, sizeof c->hostname, "localhost");
    c->hostname[sizeof c->hostname - 1] = '\0';
    sanitize_component(c->hostname);

    const char *nvtx = get("NVTX_INJECTION64_PATH");
    snprintf(c->nvtx_injection_path, sizeof c->nvtx_injection_path, "%s", nvtx ? nvtx : "");

    snprintf(c->program, sizeof c->program, "%s",
             program_invocation_short_name && *program_invocation_short_name
                 ? program_invocation_short_name : "program");
    sanitize_component(c->program);
}

/* Start time (Unix seconds) of process "pid" from /proc; -1 if unknown. */
static long long proc_start_time(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long ticks = 0;
    /* Fields after comm start at 3 (state); starttime is field 22. */
    int field_no = 2;
    for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
        if (++field_no == 22) {
            ticks = strtoull(tok, NULL, 10);
            break;
        }
    }
    if (field_no != 22)
        return -1;
    f = fopen("/proc/stat", "re");
    if (!f)
        return -1;
    long long btime = -1;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lld", &btime) == 1)
            break;
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (btime < 0 || hz <= 0)
        return -1;
    return btime + (long long)(ticks / (unsigned long long)hz);
}

static void derive_run_name(struct tp_config *c, const char *(*get)(const char *))
{
    const char *v = get("TORCHELASTIC_RUN_ID");
    if (!v || !*v || strcmp(v, "none") == 0)
        v = get("SLURM_JOB_ID");
    if (v && *v) {
        snprintf(c->run_name, sizeof c->run_name, "%s", v);
    } else {
        long long t = proc_start_time((int)getppid());
        if (t < 0)
            t = proc_start_time((int)getpid());
        if (t < 0)
            t = (long long)time(NULL);
        time_t tt = (time_t)t;
        struct tm tm;
        char when[32] = "00000000-000000";
        if (gmtime_r(&tt, &tm))
            strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
        snprintf(c->run_name, sizeof c->run_name, "%.200s-%s", c->program, when);
    }
    sanitize_component(c->run_name);
}

/* ---- parse, init, report ----------------------------------------------------- */

int tp_config_parse(struct tp_config *cfg, const char *(*get)(const char *name),
                    const char *const *names)
{
    memset(cfg, 0, sizeof *cfg);
    read_launcher(cfg, get);
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
        derive_run_name(cfg, get);
    if (!cfg->schedule.all && cfg->schedule.warmup == 0)
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

static void init_run(void)
{
    tp_config_parse(&tp_cfg, env_get, (const char *const *)environ);
    const char *home = getenv("CUDA_HOME");
    snprintf(tp_cfg.cuda_home, sizeof tp_cfg.cuda_home, "%s", home && home[0] ? home : "/usr/local/cuda");
}

void tp_config_init(void)
{
    pthread_once(&init_once, init_run);
}

static void write_line(const char *line)
{
    struct iovec iov[2] = { { (void *)line, strlen(line) }, { (void *)"\n", 1 } };
    ssize_t w = writev(STDERR_FILENO, iov, 2);
    (void)w;
}

static pthread_once_t report_once = PTHREAD_ONCE_INIT;
static atomic_int strict_exit;

static void report_run(void)
{
    const struct tp_config *c = &tp_cfg;
    int saved = errno;
    tp_log_level = c->enabled ? c->log : TP_LOG_QUIET;
    for (int i = 0; i < c->n_messages; i++) {
        int level = strncmp(c->messages[i], "trainprof: error:", 17) == 0 ? TP_LOG_ERROR
                                                                           : TP_LOG_WARN;
        if (level <= tp_log_level)
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
            size_t len = 0;
            for (const unsigned char *p = (const unsigned char *)v; *p && len + 5 < sizeof esc; p++) {
                if (*p < 0x20 || *p == 0x7f)
                    len += (size_t)snprintf(esc + len, sizeof esc - len, "\\x%02x", *p);
                else
                    esc[len++] = (char)*p;
            }
            esc[len] = '\0';
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
