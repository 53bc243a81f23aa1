/*
 * config_values.c - DESIGN: the value parsers and printers of the
 * configuration table (config.c): integers and doubles with ranges,
 * booleans, strings, format strings (checked by collector/common/format.c),
 * flag lists, log levels, the metadata object (jansson) and the run name.
 * Each parser takes one row of the table (struct opt) and writes the field
 * it names, or returns -1 with the reason, naming what is accepted; each
 * printer turns the field back into the text the dump shows.
 */
#include "config_impl.h"
#include "collector/common/format.h"
#include "collector/common/log.h"
#include "collector/contract/vocab.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int tp_opt_to_ll(const char *s, long long *out)
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

int tp_opt_to_double(const char *s, double *out)
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

void *tp_opt_field(struct tp_config *c, const struct opt *o)
{
    return (char *)c + o->off;
}

const void *tp_opt_cfield(const struct tp_config *c, const struct opt *o)
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

int tp_opt_parse_bool(struct tp_config *c, const struct opt *o, const char *val,
                      char *why, size_t whysz)
{
    int b;
    if (parse_bool_str(val, &b) < 0)
        return WHY("must be a boolean: 0/1, true/false, yes/no or on/off");
    *(int *)tp_opt_field(c, o) = b;
    return 0;
}

int tp_opt_parse_int(struct tp_config *c, const struct opt *o, const char *val,
                     char *why, size_t whysz)
{
    long long v;
    if (tp_opt_to_ll(val, &v) < 0 || v < o->lo || v > o->hi) {
        if (o->hi == LLONG_MAX)
            return WHY("must be an integer >= %lld", o->lo);
        return WHY("must be an integer between %lld and %lld", o->lo, o->hi);
    }
    if (o->size == sizeof(int))
        *(int *)tp_opt_field(c, o) = (int)v;
    else
        *(long *)tp_opt_field(c, o) = (long)v;
    return 0;
}

int tp_opt_parse_sys_interval(struct tp_config *c, const struct opt *o, const char *val,
                              char *why, size_t whysz)
{
    double v;
    if (tp_opt_to_double(val, &v) < 0 || v < 0.01 || v > 3600)
        return WHY("must be a number of seconds between 0.01 and 3600");
    *(double *)tp_opt_field(c, o) = v;
    return 0;
}

/* TRAINPROF_FLIGHT_SLOW: a factor of the running median; at or below 1
 * every step would be "slow". */
int tp_opt_parse_flight_slow(struct tp_config *c, const struct opt *o, const char *val,
                             char *why, size_t whysz)
{
    double v;
    if (tp_opt_to_double(val, &v) < 0 || !(v > 1) || v > 1000)
        return WHY("must be a number greater than 1 and at most 1000");
    *(double *)tp_opt_field(c, o) = v;
    return 0;
}

/* TRAINPROF_HANG_S: "off" or 0 is -1 (off even with the flight recorder,
 * whose default turns it on); unset stays 0 (control/hang.c decides). */
int tp_opt_parse_hang(struct tp_config *c, const struct opt *o, const char *val, char *why,
                      size_t whysz)
{
    double v;
    if (strcmp(val, "off") == 0 || (tp_opt_to_double(val, &v) == 0 && v == 0)) {
        *(double *)tp_opt_field(c, o) = -1;
        return 0;
    }
    if (tp_opt_to_double(val, &v) < 0 || v < 1 || v > 86400)
        return WHY("must be a number of seconds between 1 and 86400, or off (or 0)");
    *(double *)tp_opt_field(c, o) = v;
    return 0;
}

const char *tp_opt_show_hang(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    double v = *(const double *)tp_opt_cfield(c, o);
    if (v == 0)
        return "";
    if (v < 0)
        return "off";
    snprintf(b, n, "%g", v);
    return b;
}

int tp_opt_parse_peak(struct tp_config *c, const struct opt *o, const char *val,
                      char *why, size_t whysz)
{
    double v;
    if (tp_opt_to_double(val, &v) < 0 || !(v > 0))
        return WHY("must be a number of TFLOP/s > 0 (unset: from the GPU name)");
    *(double *)tp_opt_field(c, o) = v;
    return 0;
}

int tp_opt_parse_string(struct tp_config *c, const struct opt *o, const char *val,
                        char *why, size_t whysz)
{
    if (strlen(val) >= o->size)
        return WHY("must be at most %zu bytes", o->size - 1);
    memcpy(tp_opt_field(c, o), val, strlen(val) + 1);
    return 0;
}

int tp_opt_parse_format(struct tp_config *c, const struct opt *o, const char *val,
                        char *why, size_t whysz)
{
    char err[400];
    if (tp_format_check(val, err, sizeof err) < 0)
        return WHY("%s", err);
    return tp_opt_parse_string(c, o, val, why, whysz);
}

int tp_opt_parse_exec(struct tp_config *c, const struct opt *o, const char *val,
                      char *why, size_t whysz)
{
    char err[400];
    if (tp_format_check_exec(val, err, sizeof err) < 0)
        return WHY("%s", err);
    return tp_opt_parse_string(c, o, val, why, whysz);
}

/* Splits "val" at commas into "items" (copies in "buf"); empty items are errors. */
int tp_opt_split_list(const char *val, char *buf, size_t bufsz, char **items, int max,
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
    if (tp_opt_split_list(val, buf, sizeof buf, items, 16, &n, why, whysz) < 0)
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

int tp_opt_parse_activities(struct tp_config *c, const struct opt *o, const char *val,
                            char *why, size_t whysz)
{
    (void)o;
    return parse_flags(val, activity_names, 2, "a comma list of cpu, cuda",
                       &c->activities, why, whysz);
}

int tp_opt_parse_sys(struct tp_config *c, const struct opt *o, const char *val,
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

int tp_opt_parse_log(struct tp_config *c, const struct opt *o, const char *val,
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

/* Levels of arrays and objects in "j" (a scalar is 0, {} is 1); jansson's
 * parser stops at 2048 levels, which bounds the recursion. */
static int json_depth(json_t *j)
{
    int most = 0;
    size_t i;
    const char *key;
    json_t *item;
    if (json_is_object(j)) {
        json_object_foreach(j, key, item) {
            int d = json_depth(item);
            most = d > most ? d : most;
        }
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, item) {
            int d = json_depth(item);
            most = d > most ? d : most;
        }
    } else {
        return 0;
    }
    return most + 1;
}

int tp_opt_parse_metadata(struct tp_config *c, const struct opt *o, const char *val,
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
    /* The trace holds the object one level down; Python's json (HTA,
     * TensorBoard) gives up near 990 levels, so keep far below that. */
    int depth = json_depth(j);
    if (depth > TP_METADATA_MAX_DEPTH) {
        json_decref(j);
        return WHY("nested %d levels deep; at most %d are accepted (readers of the trace "
                   "such as Python's json cannot load deeper ones)", depth, TP_METADATA_MAX_DEPTH);
    }
    for (size_t i = 0; tp_metadata_reserved[i]; i++) {
        if (json_object_get(j, tp_metadata_reserved[i])) {
            json_decref(j);
            return WHY("key \"%s\" is reserved: trainprof writes it or trace viewers read it",
                       tp_metadata_reserved[i]);
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
void tp_config_sanitize(char *s)
{
    for (char *p = s; *p; p++)
        if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '_';
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        memset(s, '_', strlen(s));
}

int tp_opt_parse_run_name(struct tp_config *c, const struct opt *o, const char *val,
                          char *why, size_t whysz)
{
    if (tp_opt_parse_string(c, o, val, why, whysz) < 0)
        return -1;
    tp_config_sanitize(c->run_name);
    return 0;
}

/* ---- printers -------------------------------------------------------------- */

const char *tp_opt_show_bool(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    snprintf(b, n, "%d", *(const int *)tp_opt_cfield(c, o) ? 1 : 0);
    return b;
}

const char *tp_opt_show_int(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    if (o->size == sizeof(int))
        snprintf(b, n, "%d", *(const int *)tp_opt_cfield(c, o));
    else
        snprintf(b, n, "%ld", *(const long *)tp_opt_cfield(c, o));
    return b;
}

const char *tp_opt_show_double(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    double v = *(const double *)tp_opt_cfield(c, o);
    if (v == 0)
        return "";
    snprintf(b, n, "%g", v);
    return b;
}

const char *tp_opt_show_string(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)b;
    (void)n;
    return (const char *)tp_opt_cfield(c, o);
}

void tp_opt_join(char *b, size_t n, size_t *len, const char *item)
{
    int m = snprintf(b + *len, n - *len, "%s%s", *len ? "," : "", item);
    if (m > 0)
        *len = *len + (size_t)m < n ? *len + (size_t)m : n - 1;
}

static const char *show_flags(unsigned bits, const struct flag_name *names, size_t nn,
                              char *b, size_t n)
{
    size_t len = 0;
    b[0] = '\0';
    for (size_t i = 0; i < nn; i++)
        if (bits & names[i].bit)
            tp_opt_join(b, n, &len, names[i].name);
    return b;
}

const char *tp_opt_show_activities(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)o;
    return show_flags(c->activities, activity_names, 2, b, n);
}

const char *tp_opt_show_sys(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)o;
    return c->sys ? show_flags(c->sys, sys_names, 4, b, n) : "none";
}

const char *tp_opt_show_log(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    static const char *const names[] = { "quiet", "error", "warn", "info", "debug" };
    (void)o;
    (void)b;
    (void)n;
    return (unsigned)c->log <= TP_LOG_DEBUG ? names[c->log] : "info";
}

const char *tp_opt_show_metadata(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)o;
    (void)b;
    (void)n;
    return c->metadata ? c->metadata : "";
}
