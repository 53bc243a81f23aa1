/*
 * config.h - every TRAINPROF_* variable, parsed once, in one table.
 *
 * getenv() appears in collector/config/config.c and nowhere else (make lint).
 */
#ifndef TRAINPROF_COLLECTOR_CONFIG_H
#define TRAINPROF_COLLECTOR_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "collector/common/log.h"
#include "schedule.h"

#define TP_MAX_SIGNALS 8
#define TP_PATTERN_MAX 256

enum tp_signal_kind {
    TP_SIGNAL_API = 0,   /* trainprof_step() */
    TP_SIGNAL_NVTX,      /* nvtx:GLOB, at the end of a matching range */
    TP_SIGNAL_LAUNCH,    /* launch:GLOB[/N], every Nth matching kernel launch */
    TP_SIGNAL_CALL,      /* call:NAME[/N], every Nth call of NAME */
};

struct tp_signal {
    enum tp_signal_kind kind;
    char pattern[TP_PATTERN_MAX];  /* GLOB or NAME; empty for api */
    uint64_t every;                /* N, >= 1 */
    char text[TP_PATTERN_MAX + 32];/* the item as written, for metadata */
};

enum tp_activity { TP_ACT_CPU = 1u << 0, TP_ACT_CUDA = 1u << 1 };
enum tp_sys_stat { TP_SYS_CPU = 1u << 0, TP_SYS_MEMORY = 1u << 1, TP_SYS_DISK = 1u << 2, TP_SYS_NET = 1u << 3 };

#define TP_MAX_HANDLERS 8
/* TRAINPROF_FLIGHT's largest value: the steps' ring of step starts is a
 * static array of this many (collector/control/steps.c). */
#define TP_FLIGHT_MAX 10000
/* TRAINPROF_METADATA: most levels of nested objects and arrays, the object
 * itself counted (Python's json, the trace readers' parser, reads ~990). */
#define TP_METADATA_MAX_DEPTH 64
#define TP_HANDLER_NAME_MAX 16

/* TRAINPROF_FILENAME's default: {batch} padded to 8 digits, so that the
 * windows of a run sort by name in the order they happened up to step
 * 99,999,999 (TensorBoard's profiler plugin numbers a worker's spans in the
 * text order of their names; so do `ls` and globs). */
#define TP_FILENAME_DEFAULT "rank{rank}.{batch:08d}.pt.trace.json"

struct tp_config {
    int enabled;                   /* TRAINPROF_ENABLED */
    struct tp_schedule schedule;   /* TRAINPROF_SCHEDULE */
    int n_signals;                 /* TRAINPROF_STEP_ON */
    struct tp_signal signals[TP_MAX_SIGNALS];
    uint64_t nvtx_lead[4];         /* the bytes an nvtx:GLOB match can begin with, a
                                      bit each (all where a GLOB begins with a
                                      wildcard; none without nvtx:GLOB): ranges.c's
                                      quick refusal of a message before activation */
    char run_name[256];            /* TRAINPROF_RUN_NAME, or derived (config_launcher.c) */
    char folder[1024];             /* TRAINPROF_FOLDER (format string, unexpanded) */
    char filename[512];            /* TRAINPROF_FILENAME (format string, unexpanded) */
    int gzip;                      /* TRAINPROF_GZIP */
    int overwrite;                 /* TRAINPROF_OVERWRITE */
    long keep;                     /* TRAINPROF_KEEP, -1 = all */
    int n_handlers;                /* TRAINPROF_HANDLERS */
    char handlers[TP_MAX_HANDLERS][TP_HANDLER_NAME_MAX];
    char reports[1024];            /* TRAINPROF_REPORTS (format string) */
    char start_dir[4096];          /* the working directory at activation, absolute ("" if
                                      getcwd failed): the base of relative TRAINPROF_FOLDER
                                      and TRAINPROF_REPORTS (tp_format_expand_at) */
    char exec[1024];               /* TRAINPROF_EXEC, "" if unset */
    char **exec_env;               /* TRAINPROF_EXEC's environment: a copy of ours taken at
                                      activation, TRAINPROF_ENABLED=0 (NULL: none) */
    unsigned activities;           /* TRAINPROF_ACTIVITIES, enum tp_activity bits */
    int record_shapes;             /* TRAINPROF_RECORD_SHAPES */
    int profile_memory;            /* TRAINPROF_PROFILE_MEMORY */
    int with_stack;                /* TRAINPROF_WITH_STACK */
    int memory_stacks;             /* TRAINPROF_MEMORY_STACKS */
    int stack_depth;               /* TRAINPROF_STACK_DEPTH, 1..128 */
    int with_flops;                /* TRAINPROF_WITH_FLOPS */
    unsigned sys;                  /* TRAINPROF_SYS, enum tp_sys_stat bits, 0 = none */
    double sys_interval;           /* TRAINPROF_SYS_INTERVAL, seconds, 0.01..3600 */
    char ranks[1024];              /* TRAINPROF_RANKS, "" = all */
    int rank_selected;             /* this process's rank is in TRAINPROF_RANKS */
    long buffer_mb;                /* TRAINPROF_BUFFER_MB, 1..65536 */
    int flight;                    /* TRAINPROF_FLIGHT, steps kept, 0 (off)..TP_FLIGHT_MAX */
    long flight_mb;                /* TRAINPROF_FLIGHT_MB, 1..65536 */
    double flight_slow;            /* TRAINPROF_FLIGHT_SLOW, > 1 */
    char *metadata;                /* TRAINPROF_METADATA, a JSON object (compact), or NULL */
    double peak_tflops;            /* TRAINPROF_PEAK_TFLOPS, 0 = from GPU name */
    enum tp_log_level log;         /* TRAINPROF_LOG */
    int strict;                    /* TRAINPROF_STRICT */
    int dump_config;               /* TRAINPROF_DUMP_CONFIG */

    /* launcher environment (config_launcher.c: ranks) */
    int rank, local_rank, world_size, local_world_size, node_rank;
    int launched;                  /* a launcher variable gave the rank or the world size */
    int rank_given;                /* ... the rank itself (else the process group or NCCL may
                                      say it later: collector/record/pgroup.c tp_rank_now) */
    char hostname[256];
    char nvtx_injection_path[1024];/* NVTX_INJECTION64_PATH as found, "" if unset */
    char itt_collector_path[1024]; /* INTEL_LIBITTNOTIFY64 as found, "" if unset */
    char cupti_path[1024];         /* TRAINPROF_CUPTI_PATH, "" if unset */
    char trigger[1024];            /* TRAINPROF_TRIGGER (format string), "" if unset (trigger.h) */
    int trigger_signal;            /* TRAINPROF_TRIGGER_SIGNAL, 0 = off */
    double hang_s;                 /* TRAINPROF_HANG_S: > 0 seconds, < 0 off, 0 unset (control/hang.c) */
    char cuda_home[1024];          /* $CUDA_HOME, else /usr/local/cuda: where CUPTI is looked for last */
    const char *cuda_visible;      /* $CUDA_VISIBLE_DEVICES, NULL if unset (for messages) */
    char program[256];             /* basename of /proc/self/exe's argv[0] */

    /* parse outcome */
    int n_errors;                  /* bad values; the profiler stays passive if > 0 */
    char messages[8][512];         /* error and warning lines, printed at activation */
    int n_messages;
    int n_dropped_messages;        /* lines that did not fit in messages[] */
};

/* The process's configuration; valid after tp_config_init(). */
extern struct tp_config tp_cfg __attribute__((visibility("hidden")));


/* tp_config_handler_names - the output modules' names that
 * TRAINPROF_HANDLERS accepts, comma-separated, in the order they run
 * (collector/contract/handlers.def). */
const char *tp_config_handler_names(void);

/*
 * tp_config_exec_env - a copy of the environment (array and strings, the
 * caller's to keep) with TRAINPROF_ENABLED=0 in place of any other value:
 * TRAINPROF_EXEC's children get it.  tp_config_init() takes it once, into
 * tp_cfg.exec_env, when TRAINPROF_EXEC is set.  NULL if out of memory.
 */
char **tp_config_exec_env(void);

/*
 * tp_config_init - parse the environment into tp_cfg, silently (tp_config_report
 * prints the messages, at activation).
 * Idempotent and thread-safe: the first caller parses, others wait.
 * Errors and warnings are kept in tp_cfg.messages for tp_config_report().
 */
void tp_config_init(void);

/*
 * tp_config_parse - parse from a lookup function instead of the environment
 * (tests).  "get" returns the value of a variable or NULL; "names" lists
 * every variable set in the environment (for unknown-name warnings), NULL
 * terminated.  Fills "cfg" from scratch.  Returns the number of errors.
 */
int tp_config_parse(struct tp_config *cfg, const char *(*get)(const char *name),
                    const char *const *names);

/* tp_config_free - release what tp_config_parse allocated (metadata). */
void tp_config_free(struct tp_config *cfg);

/*
 * tp_config_report - print the stored error/warning lines and, with
 * TRAINPROF_DUMP_CONFIG=1, the effective configuration, to stderr, once.
 * Called at activation, where it also takes tp_cfg.start_dir.  Returns 1 if the profiler must stay passive.
 * With TRAINPROF_STRICT=1 and an error, exits the process with status 2.
 */
int tp_config_report(void);

/*
 * tp_config_announce - the start-up line, at info level, of a process that
 * records (no configuration error, enabled, rank selected): "rank R:
 * schedule KEYS: what it records, in words (schedule.h
 * tp_schedule_describe); step signals LIST".  Written by tp-flush as it
 * starts, never on a program thread: a write to a stderr pipe that is full
 * and never read would block there; and not at all where stderr would
 * block (poll), so that tp-flush does not stall there either.
 */
void tp_config_announce(void);

/*
 * tp_config_json - the effective configuration as a compact JSON object,
 * allocated with malloc; caller frees.  NULL on allocation failure.
 */
char *tp_config_json(const struct tp_config *cfg);

/* One row of the variable table: used by the README agreement test. */
struct tp_config_var {
    const char *name;
    const char *def;       /* default, as documented */
    const char *help;
};

/* tp_config_vars - the table of known variables; "*n" receives its length. */
const struct tp_config_var *tp_config_vars(size_t *n);

#endif
