/*
 * config_grammar.c - DESIGN: the small languages of the configuration:
 * TRAINPROF_SCHEDULE (torch.profiler.schedule's keys: from schedule.h's one list of keys,
 * defaults and minimums, or "all", or "none" (only triggered windows), or
 * "profiler-api": windows from cudaProfilerStart to cudaProfilerStop),
 * TRAINPROF_STEP_ON (step signals:
 * api, nvtx:GLOB, launch:GLOB, call:NAME, each with an optional /N),
 * TRAINPROF_HANDLERS (names from collector/contract/handlers.def, whole names
 * only), TRAINPROF_RANKS (lists and ranges of global ranks) and
 * TRAINPROF_TRIGGER_SIGNAL (a signal name, never one the profiler or the
 * runtime already uses).  Parsers
 * and printers in the shape of config_values.c.
 */
#include "config_impl.h"
#include "schedule.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int tp_opt_parse_schedule(struct tp_config *c, const struct opt *o, const char *val,
                          char *why, size_t whysz)
{
#define NAME(key, def, min) #key,
#define LEAST(key, def, min) min,
#define DEFAULT(key, def, min) .key = def,
#define SLOT(key, def, min) &s.key,
#define LISTED(key, def, min) ", " #key
    static const char *const keys[] = { TP_SCHEDULE_KEYS(NAME) };
    static const long long least[] = { TP_SCHEDULE_KEYS(LEAST) };
    struct tp_schedule s = { TP_SCHEDULE_KEYS(DEFAULT) };
    uint64_t *slot[] = { TP_SCHEDULE_KEYS(SLOT) };
    const char *accepted = &TP_SCHEDULE_KEYS(LISTED)[2];
#undef NAME
#undef LEAST
#undef DEFAULT
#undef SLOT
#undef LISTED
    enum { NKEYS = sizeof keys / sizeof keys[0] };
    int seen[NKEYS] = { 0 };
    (void)o;
    if (strcasecmp(val, "all") == 0) {
        memset(&c->schedule, 0, sizeof c->schedule);
        c->schedule.all = 1;
        return 0;
    }
    if (strcasecmp(val, "profiler-api") == 0) {
        c->schedule = s;            /* the keys keep their defaults, unused */
        c->schedule.profiler_api = 1;
        return 0;
    }
    if (strcasecmp(val, "none") == 0) {    /* only triggered windows (trigger.h) */
        memset(&c->schedule, 0, sizeof c->schedule);
        c->schedule.none = 1;
        return 0;
    }
    char buf[512], *items[16];
    int n;
    if (tp_opt_split_list(val, buf, sizeof buf, items, 16, &n, why, whysz) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char *eq = strchr(items[i], '=');
        if (!eq)
            return WHY("expected key=value, all, none or profiler-api, got \"%.40s\"", items[i]);
        *eq = '\0';
        int k = -1;
        for (int j = 0; j < NKEYS; j++)
            if (strcmp(items[i], keys[j]) == 0)
                k = j;
        if (k < 0)
            return WHY("unknown key \"%.40s\"; accepted: %s", items[i], accepted);
        if (seen[k]++)
            return WHY("duplicate key %s", keys[k]);
        long long v;
        if (tp_opt_to_ll(eq + 1, &v) < 0 || v < least[k])
            return WHY("%s must be an integer >= %lld", keys[k], least[k]);
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
            if (tp_opt_to_ll(slash + 1, &n) < 0 || n < 1)
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

int tp_opt_parse_step_on(struct tp_config *c, const struct opt *o, const char *val,
                         char *why, size_t whysz)
{
    char buf[TP_MAX_SIGNALS * (TP_PATTERN_MAX + 32)], *items[TP_MAX_SIGNALS];
    struct tp_signal sigs[TP_MAX_SIGNALS];
    int n;
    (void)o;
    if (tp_opt_split_list(val, buf, sizeof buf, items, TP_MAX_SIGNALS, &n, why, whysz) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (parse_one_signal(&sigs[i], items[i], why, whysz) < 0)
            return -1;
    memcpy(c->signals, sigs, (size_t)n * sizeof sigs[0]);
    c->n_signals = n;
    return 0;
}

const char *tp_config_handler_names(void)
{
#define TP_HANDLER(n) "," #n
#define TP_STAGE(n) "," #n
    static const char names[] =
#include "collector/contract/handlers.def"
        ;
#undef TP_HANDLER
#undef TP_STAGE
    return names + 1;
}

static int handler_known(const char *name)
{
    size_t n = strlen(name);
    for (const char *p = tp_config_handler_names(); *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

int tp_opt_parse_handlers(struct tp_config *c, const struct opt *o, const char *val,
                          char *why, size_t whysz)
{
    char buf[512], *items[TP_MAX_HANDLERS];
    int n;
    (void)o;
    if (tp_opt_split_list(val, buf, sizeof buf, items, TP_MAX_HANDLERS, &n, why, whysz) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (strlen(items[i]) >= TP_HANDLER_NAME_MAX || !handler_known(items[i]))
            return WHY("unknown handler \"%.40s\"; accepted: %s", items[i], tp_config_handler_names());
        for (int j = 0; j < i; j++)
            if (strcmp(items[i], items[j]) == 0)
                return WHY("handler %s listed twice", items[i]);
    }
    for (int i = 0; i < n; i++)
        snprintf(c->handlers[i], TP_HANDLER_NAME_MAX, "%s", items[i]);
    c->n_handlers = n;
    return 0;
}

static int ranks_contain(const char *val, long long rank, char *why, size_t whysz)
{
    char buf[1024], *items[256];
    int n, hit = 0;
    if (tp_opt_split_list(val, buf, sizeof buf, items, 256, &n, why, whysz) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        long long a, b;
        char *dash = strchr(items[i], '-');
        if (dash)
            *dash = '\0';
        if (tp_opt_to_ll(items[i], &a) < 0 || a < 0)
            return WHY("\"%.40s\" is not a rank; expected ranks >= 0 and ranges A-B, e.g. 0,8-15",
                       items[i]);
        b = a;
        if (dash && (tp_opt_to_ll(dash + 1, &b) < 0 || b < a))
            return WHY("\"%.20s-%.20s\" is not a range A-B with 0 <= A <= B", items[i], dash + 1);
        if (rank >= a && rank <= b)
            hit = 1;
    }
    return hit;
}

int tp_opt_parse_ranks(struct tp_config *c, const struct opt *o, const char *val,
                       char *why, size_t whysz)
{
    if (!*val) {
        c->ranks[0] = '\0';
        c->rank_selected = 1;
        return 0;
    }
    int hit = ranks_contain(val, c->rank, why, whysz);
    if (hit < 0 || tp_opt_parse_string(c, o, val, why, whysz) < 0)
        return -1;
    c->rank_selected = hit;
    return 0;
}

const char *tp_opt_show_schedule(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    (void)o;
    return tp_schedule_show(&c->schedule, b, n);
}

const char *tp_opt_show_step_on(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    size_t len = 0;
    (void)o;
    b[0] = '\0';
    for (int i = 0; i < c->n_signals; i++)
        tp_opt_join(b, n, &len, c->signals[i].text);
    return b;
}

const char *tp_opt_show_handlers(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    size_t len = 0;
    (void)o;
    b[0] = '\0';
    for (int i = 0; i < c->n_handlers; i++)
        tp_opt_join(b, n, &len, c->handlers[i]);
    return b;
}

/* TRAINPROF_TRIGGER_SIGNAL: the signals a user may spare for the trigger.
 * Not SIGTERM, SIGINT or the fatal ones (lifecycle.c's), nor SIGRTMIN-2
 * and below (glibc's own), nor the job-control and stop signals. */
int tp_opt_parse_signal(struct tp_config *c, const struct opt *o, const char *val,
                        char *why, size_t whysz)
{
    static const char accepted[] = "off, SIGUSR1, SIGUSR2 or SIGRTMIN+N (N = 0 to SIGRTMAX-SIGRTMIN)";
    int *out = (int *)tp_opt_field(c, o);
    const char *v = val;
    if (strcasecmp(v, "off") == 0 || strcasecmp(v, "none") == 0 || strcmp(v, "0") == 0) {
        *out = 0;
        return 0;
    }
    if (strncasecmp(v, "SIG", 3) == 0)
        v += 3;
    if (strcasecmp(v, "USR1") == 0) {
        *out = SIGUSR1;
        return 0;
    }
    if (strcasecmp(v, "USR2") == 0) {
        *out = SIGUSR2;
        return 0;
    }
    if (strncasecmp(v, "RTMIN", 5) == 0) {
        long long n = 0;
        if (v[5] && (v[5] != '+' || tp_opt_to_ll(v + 6, &n) < 0 || n < 0 || n > SIGRTMAX - SIGRTMIN))
            return WHY("accepted: %s", accepted);
        *out = SIGRTMIN + (int)n;
        return 0;
    }
    return WHY("accepted: %s", accepted);
}

const char *tp_opt_show_signal(const struct tp_config *c, const struct opt *o, char *b, size_t n)
{
    int sig = *(const int *)tp_opt_cfield(c, o);
    if (sig == 0)
        return "off";
    if (sig == SIGUSR1 || sig == SIGUSR2)
        return sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2";
    snprintf(b, n, "SIGRTMIN+%d", sig - SIGRTMIN);
    return b;
}
