/*
 * config_impl.h - what the files of the configuration share (private to
 * config.c, config_values.c, config_grammar.c and config_launcher.c): the option
 * row every parser and printer receives, and their prototypes.
 */
#ifndef TRAINPROF_COLLECTOR_CONFIG_IMPL_H
#define TRAINPROF_COLLECTOR_CONFIG_IMPL_H

#include <stddef.h>
#include <stdio.h>

#include "config.h"

struct opt;
typedef int (*parse_fn)(struct tp_config *c, const struct opt *o, const char *val,
                        char *why, size_t whysz);
typedef const char *(*show_fn)(const struct tp_config *c, const struct opt *o,
                               char *buf, size_t n);

/* One row of TP_CONFIG_TABLE as the parsers and printers see it. */
struct opt {
    const char *name;
    const char *init;      /* parsed when unset; NULL leaves the zeroed field */
    parse_fn parse;
    show_fn show;
    size_t off, size;      /* the field in struct tp_config */
    long long lo, hi;      /* integer range */
};

#define FIELD(f) offsetof(struct tp_config, f), sizeof(((struct tp_config *)0)->f)
/* A parser's failure: the reason into "why", then -1. */
#define WHY(...) (snprintf(why, whysz, __VA_ARGS__), -1)

/* The schedule's defaults as TRAINPROF_SCHEDULE text, from the one list
 * in config.h ("skip_first=0,wait=0,warmup=1,active=4,repeat=1"). */
#define TP_SCHED_TEXT(key, def, min) "," #key "=" #def
#define TP_SCHEDULE_DEFAULT_TEXT (&TP_SCHEDULE_KEYS(TP_SCHED_TEXT)[1])

/* ---- values (config_values.c) ---- */
const void *tp_opt_cfield(const struct tp_config *c, const struct opt *o);
void *tp_opt_field(struct tp_config *c, const struct opt *o);
void tp_opt_join(char *b, size_t n, size_t *len, const char *item);
int tp_opt_parse_activities(struct tp_config *c, const struct opt *o, const char *val, char *why,
                            size_t whysz);
int tp_opt_parse_bool(struct tp_config *c, const struct opt *o, const char *val, char *why,
                      size_t whysz);
int tp_opt_parse_exec(struct tp_config *c, const struct opt *o, const char *val, char *why,
                      size_t whysz);
int tp_opt_parse_format(struct tp_config *c, const struct opt *o, const char *val, char *why,
                        size_t whysz);
int tp_opt_parse_hang(struct tp_config *c, const struct opt *o, const char *val, char *why,
                      size_t whysz);
const char *tp_opt_show_hang(const struct tp_config *c, const struct opt *o, char *b, size_t n);
int tp_opt_parse_int(struct tp_config *c, const struct opt *o, const char *val, char *why,
                     size_t whysz);
int tp_opt_parse_log(struct tp_config *c, const struct opt *o, const char *val, char *why,
                     size_t whysz);
int tp_opt_parse_metadata(struct tp_config *c, const struct opt *o, const char *val, char *why,
                          size_t whysz);
int tp_opt_parse_peak(struct tp_config *c, const struct opt *o, const char *val, char *why,
                      size_t whysz);
int tp_opt_parse_run_name(struct tp_config *c, const struct opt *o, const char *val, char *why,
                          size_t whysz);
int tp_opt_parse_string(struct tp_config *c, const struct opt *o, const char *val, char *why,
                        size_t whysz);
int tp_opt_parse_sys(struct tp_config *c, const struct opt *o, const char *val, char *why,
                     size_t whysz);
int tp_opt_parse_flight_slow(struct tp_config *c, const struct opt *o, const char *val,
                             char *why, size_t whysz);
int tp_opt_parse_sys_interval(struct tp_config *c, const struct opt *o, const char *val,
                              char *why, size_t whysz);
const char *tp_opt_show_activities(const struct tp_config *c, const struct opt *o, char *b,
                                   size_t n);
const char *tp_opt_show_bool(const struct tp_config *c, const struct opt *o, char *b, size_t n);
const char *tp_opt_show_double(const struct tp_config *c, const struct opt *o, char *b, size_t n);
const char *tp_opt_show_int(const struct tp_config *c, const struct opt *o, char *b, size_t n);
const char *tp_opt_show_log(const struct tp_config *c, const struct opt *o, char *b, size_t n);
const char *tp_opt_show_metadata(const struct tp_config *c, const struct opt *o, char *b,
                                 size_t n);
const char *tp_opt_show_string(const struct tp_config *c, const struct opt *o, char *b, size_t n);
const char *tp_opt_show_sys(const struct tp_config *c, const struct opt *o, char *b, size_t n);
int tp_opt_split_list(const char *val, char *buf, size_t bufsz, char **items, int max, int *n,
                      char *why, size_t whysz);
int tp_opt_to_double(const char *s, double *out);
int tp_opt_to_ll(const char *s, long long *out);

/* tp_config_sanitize - make "s" safe as one path component, in place. */
void tp_config_sanitize(char *s);

/* ---- grammars (config_grammar.c) ---- */
int tp_opt_parse_handlers(struct tp_config *c, const struct opt *o, const char *val, char *why,
                          size_t whysz);
int tp_opt_parse_ranks(struct tp_config *c, const struct opt *o, const char *val, char *why,
                       size_t whysz);
int tp_opt_parse_schedule(struct tp_config *c, const struct opt *o, const char *val, char *why,
                          size_t whysz);
int tp_opt_parse_signal(struct tp_config *c, const struct opt *o, const char *val, char *why,
                        size_t whysz);
const char *tp_opt_show_signal(const struct tp_config *c, const struct opt *o, char *b, size_t n);
int tp_opt_parse_step_on(struct tp_config *c, const struct opt *o, const char *val, char *why,
                         size_t whysz);
const char *tp_opt_show_handlers(const struct tp_config *c, const struct opt *o, char *b,
                                 size_t n);
const char *tp_opt_show_schedule(const struct tp_config *c, const struct opt *o, char *b,
                                 size_t n);
const char *tp_opt_show_step_on(const struct tp_config *c, const struct opt *o, char *b,
                                size_t n);

/* ---- launcher environment (config_launcher.c) ---- */

/* tp_launcher_read - rank, local rank, world sizes and node rank from the
 * launcher's variables (README's order, in Configuration; a malformed one is skipped),
 * hostname, program name and NVTX_INJECTION64_PATH. */
void tp_launcher_read(struct tp_config *c, const char *(*get)(const char *));

/* tp_launcher_run_name - the run name when TRAINPROF_RUN_NAME is unset:
 * the launcher's run id, else the program name and its start time. */
void tp_launcher_run_name(struct tp_config *c, const char *(*get)(const char *));


#endif
