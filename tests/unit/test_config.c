/*
 * test_config.c - the configuration table, parsers, messages, report and
 * the README agreement.
 *
 * DESIGN
 * Most tests drive tp_config_parse() with a fake environment (a NULL
 * terminated list of "NAME=VALUE" strings that is also the "names" list).
 * Everything that goes through tp_config_init()/tp_config_report() runs in
 * a child forked by the test itself, with a cleared environment and stderr
 * on a pipe, so that those tests also hold with CK_FORK=no and the
 * process-wide once-state starts fresh each time.
 */
#include "collector/config/config.h"
#include "collector/common/log.h"
#include "handlers/handler.h"

#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const *fake_env;

static const char *fake_get(const char *name)
{
    size_t n = strlen(name);
    for (const char *const *e = fake_env; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static int parse(struct tp_config *c, const char *const *env)
{
    fake_env = env;
    return tp_config_parse(c, fake_get, env);
}

/* Parses a single NAME=VALUE. */
static int parse1(struct tp_config *c, const char *name, const char *value)
{
    static char item[4096];
    snprintf(item, sizeof item, "%s=%s", name, value);
    const char *env[] = { item, NULL };
    return parse(c, env);
}

/* The effective value of "name" from tp_config_json, in "out". */
static void effective(const struct tp_config *c, const char *name, char *out, size_t n)
{
    char *s = tp_config_json(c);
    ck_assert_ptr_nonnull(s);
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    ck_assert_msg(j != NULL, "tp_config_json is not JSON: %s", s);
    json_t *v = json_object_get(j, name);
    ck_assert_msg(json_is_string(v), "%s missing from tp_config_json", name);
    snprintf(out, n, "%s", json_string_value(v));
    json_decref(j);
    free(s);
}

static const char *const no_value_defaults[] = { "see below", "unset", "all", "from GPU name" };

static int is_value_default(const char *def)
{
    for (size_t i = 0; i < sizeof no_value_defaults / sizeof no_value_defaults[0]; i++)
        if (strcmp(def, no_value_defaults[i]) == 0)
            return 0;
    return 1;
}

/* ---- defaults ------------------------------------------------------------ */

START_TEST(test_defaults)
{
    struct tp_config c;
    const char *env[] = { NULL };
    ck_assert_int_eq(parse(&c, env), 0);
    ck_assert_int_eq(c.n_errors, 0);
    ck_assert_int_eq(c.n_messages, 0);
    ck_assert_int_eq(c.enabled, 1);
    ck_assert_int_eq(c.schedule.all, 0);
    ck_assert_uint_eq(c.schedule.skip_first, 0);
    ck_assert_uint_eq(c.schedule.wait, 0);
    ck_assert_uint_eq(c.schedule.warmup, 1);
    ck_assert_uint_eq(c.schedule.active, 4);
    ck_assert_uint_eq(c.schedule.repeat, 1);
    ck_assert_int_eq(c.n_signals, 2);
    ck_assert_int_eq(c.signals[0].kind, TP_SIGNAL_API);
    ck_assert_str_eq(c.signals[0].text, "api");
    ck_assert_int_eq(c.signals[1].kind, TP_SIGNAL_NVTX);
    ck_assert_str_eq(c.signals[1].pattern, "step");
    ck_assert_uint_eq(c.signals[1].every, 1);
    ck_assert_str_eq(c.signals[1].text, "nvtx:step");
    ck_assert_str_eq(c.folder, "{run_name}/traces");
    ck_assert_str_eq(c.filename, "rank{rank}.{batch:08d}.pt.trace.json");
    ck_assert_str_eq(c.reports, "{run_name}/reports");
    ck_assert_str_eq(c.exec, "");
    ck_assert_int_eq(c.gzip, 1);
    ck_assert_int_eq(c.overwrite, 0);
    ck_assert_int_eq(c.keep, -1);
    ck_assert_int_eq(c.n_handlers, 2);
    ck_assert_str_eq(c.handlers[0], "chrome");
    ck_assert_str_eq(c.handlers[1], "summary");
    ck_assert_uint_eq(c.activities, TP_ACT_CPU | TP_ACT_CUDA);
    ck_assert_int_eq(c.record_shapes, 0);
    ck_assert_int_eq(c.profile_memory, 1);
    ck_assert_int_eq(c.with_stack, 0);
    ck_assert_int_eq(c.stack_depth, 32);
    ck_assert_int_eq(c.with_flops, 1);
    ck_assert_uint_eq(c.sys, TP_SYS_CPU);
    ck_assert_double_eq(c.sys_interval, 0.5);
    ck_assert_str_eq(c.ranks, "");
    ck_assert_int_eq(c.rank_selected, 1);
    ck_assert_int_eq(c.buffer_mb, 256);
    ck_assert_ptr_null(c.metadata);
    ck_assert_double_eq(c.peak_tflops, 0);
    ck_assert_int_eq(c.log, TP_LOG_INFO);
    ck_assert_int_eq(c.strict, 0);
    ck_assert_int_eq(c.dump_config, 0);
    ck_assert_str_eq(c.cupti_path, "");
    ck_assert_int_eq(c.rank, 0);
    ck_assert_int_eq(c.local_rank, 0);
    ck_assert_int_eq(c.world_size, 1);
    ck_assert_int_eq(c.local_world_size, 1);
    ck_assert_int_eq(c.node_rank, 0);
    ck_assert_str_eq(c.nvtx_injection_path, "");
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    ck_assert_str_eq(c.hostname, host);
    ck_assert_str_eq(c.program, program_invocation_short_name);
}
END_TEST

/* Every documented default that is a value is what the code uses. */
START_TEST(test_documented_defaults_are_effective)
{
    struct tp_config c;
    const char *env[] = { NULL };
    parse(&c, env);
    size_t n;
    const struct tp_config_var *v = tp_config_vars(&n);
    int checked = 0;
    for (size_t i = 0; i < n; i++) {
        char eff[4096];
        effective(&c, v[i].name, eff, sizeof eff);
        if (is_value_default(v[i].def)) {
            ck_assert_msg(strcmp(eff, v[i].def) == 0, "%s: documented %s, effective %s",
                          v[i].name, v[i].def, eff);
            checked++;
        } else if (strcmp(v[i].name, "TRAINPROF_RUN_NAME") != 0) {
            ck_assert_msg(strcmp(eff, "") == 0, "%s: documented %s, effective %s",
                          v[i].name, v[i].def, eff);
        }
    }
    ck_assert_int_ge(checked, 20);
}
END_TEST

START_TEST(test_vars_table)
{
    size_t n;
    const struct tp_config_var *v = tp_config_vars(&n);
    static const char *const spec[] = {
        "TRAINPROF_ENABLED", "TRAINPROF_SCHEDULE", "TRAINPROF_STEP_ON", "TRAINPROF_RUN_NAME",
        "TRAINPROF_FOLDER", "TRAINPROF_FILENAME", "TRAINPROF_GZIP", "TRAINPROF_OVERWRITE",
        "TRAINPROF_KEEP", "TRAINPROF_HANDLERS", "TRAINPROF_REPORTS", "TRAINPROF_EXEC",
        "TRAINPROF_ACTIVITIES", "TRAINPROF_RECORD_SHAPES", "TRAINPROF_PROFILE_MEMORY",
        "TRAINPROF_WITH_STACK", "TRAINPROF_MEMORY_STACKS", "TRAINPROF_STACK_DEPTH", "TRAINPROF_WITH_FLOPS",
        "TRAINPROF_SYS",
        "TRAINPROF_SYS_INTERVAL", "TRAINPROF_RANKS", "TRAINPROF_BUFFER_MB", "TRAINPROF_FLIGHT",
        "TRAINPROF_FLIGHT_MB", "TRAINPROF_FLIGHT_SLOW", "TRAINPROF_METADATA",
        "TRAINPROF_PEAK_TFLOPS", "TRAINPROF_LOG", "TRAINPROF_STRICT", "TRAINPROF_DUMP_CONFIG",
        "TRAINPROF_CUPTI_PATH", "TRAINPROF_TRIGGER", "TRAINPROF_TRIGGER_SIGNAL",
        "TRAINPROF_HANG_S",
    };
    ck_assert_uint_eq(n, sizeof spec / sizeof spec[0]);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(v[i].name, spec[i]);
        ck_assert_ptr_nonnull(v[i].def);
        ck_assert_msg(v[i].help && v[i].help[0], "%s has no help", v[i].name);
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(v[i].name, v[j].name);
    }
}
END_TEST

/* ---- good values ----------------------------------------------------------- */

struct good_case {
    const char *name, *value, *effective;
};

static const struct good_case good_cases[] = {
    { "TRAINPROF_ENABLED", "off", "0" },
    { "TRAINPROF_SCHEDULE", "wait=2", "skip_first=0,wait=2,warmup=1,active=4,repeat=1" },
    { "TRAINPROF_SCHEDULE", "ALL", "all" },
    { "TRAINPROF_STEP_ON", "launch:*gemm*/10,call:cudaGraphLaunch",
      "launch:*gemm*/10,call:cudaGraphLaunch" },
    { "TRAINPROF_RUN_NAME", "exp42", "exp42" },
    { "TRAINPROF_FOLDER", "/tmp/{run_name}/{hostname}-{{x}}", "/tmp/{run_name}/{hostname}-{{x}}" },
    { "TRAINPROF_FILENAME", "r{rank}-{local_rank}-{world_size}-{local_world_size}-{node_rank}"
      "-{pid}-{batch}.json", "r{rank}-{local_rank}-{world_size}-{local_world_size}-{node_rank}"
      "-{pid}-{batch}.json" },
    { "TRAINPROF_GZIP", "no", "0" },
    { "TRAINPROF_OVERWRITE", "yes", "1" },
    { "TRAINPROF_KEEP", "3", "3" },
    { "TRAINPROF_KEEP", "0", "0" },
    { "TRAINPROF_HANDLERS", "summary", "summary" },
    { "TRAINPROF_HANDLERS", "summary,chrome", "summary,chrome" },
    { "TRAINPROF_REPORTS", "out/{rank}", "out/{rank}" },
    { "TRAINPROF_EXEC", "gsutil cp {path} gs://b/{run_name}/", "gsutil cp {path} gs://b/{run_name}/" },
    { "TRAINPROF_ACTIVITIES", "cpu", "cpu" },
    { "TRAINPROF_ACTIVITIES", "cuda", "cuda" },
    { "TRAINPROF_ACTIVITIES", "cuda,cpu", "cpu,cuda" },
    { "TRAINPROF_RECORD_SHAPES", "1", "1" },
    { "TRAINPROF_PROFILE_MEMORY", "false", "0" },
    { "TRAINPROF_WITH_STACK", "on", "1" },
    { "TRAINPROF_STACK_DEPTH", "1", "1" },
    { "TRAINPROF_STACK_DEPTH", "128", "128" },
    { "TRAINPROF_WITH_FLOPS", "0", "0" },
    { "TRAINPROF_SYS", "none", "none" },
    { "TRAINPROF_SYS", "net,cpu,disk,memory", "cpu,memory,disk,net" },
    { "TRAINPROF_SYS_INTERVAL", "0.01", "0.01" },
    { "TRAINPROF_SYS_INTERVAL", "3600", "3600" },
    { "TRAINPROF_SYS_INTERVAL", "2", "2" },
    { "TRAINPROF_RANKS", "0,8-15", "0,8-15" },
    { "TRAINPROF_BUFFER_MB", "1", "1" },
    { "TRAINPROF_BUFFER_MB", "65536", "65536" },
    { "TRAINPROF_FLIGHT", "0", "0" },
    { "TRAINPROF_FLIGHT", "100", "100" },
    { "TRAINPROF_FLIGHT", "10000", "10000" },
    { "TRAINPROF_FLIGHT_MB", "1", "1" },
    { "TRAINPROF_FLIGHT_MB", "65536", "65536" },
    { "TRAINPROF_FLIGHT_SLOW", "1.5", "1.5" },
    { "TRAINPROF_FLIGHT_SLOW", "1000", "1000" },
    { "TRAINPROF_METADATA", "{ \"team\": \"nlp\", \"n\": [1, 2] }", "{\"team\":\"nlp\",\"n\":[1,2]}" },
    { "TRAINPROF_PEAK_TFLOPS", "989.5", "989.5" },
    { "TRAINPROF_LOG", "quiet", "quiet" },
    { "TRAINPROF_LOG", "DEBUG", "debug" },
    { "TRAINPROF_STRICT", "1", "1" },
    { "TRAINPROF_DUMP_CONFIG", "true", "1" },
    { "TRAINPROF_CUPTI_PATH", "/opt/cuda/lib64/libcupti.so.13", "/opt/cuda/lib64/libcupti.so.13" },
    { "TRAINPROF_SCHEDULE", "None", "none" },
    { "TRAINPROF_TRIGGER", "/shared/{run_name}/go", "/shared/{run_name}/go" },
    { "TRAINPROF_TRIGGER", "none", "none" },
    { "TRAINPROF_TRIGGER_SIGNAL", "SIGUSR2", "SIGUSR2" },
    { "TRAINPROF_TRIGGER_SIGNAL", "usr1", "SIGUSR1" },
    { "TRAINPROF_TRIGGER_SIGNAL", "SIGRTMIN+3", "SIGRTMIN+3" },
    { "TRAINPROF_TRIGGER_SIGNAL", "off", "off" },
    { "TRAINPROF_HANG_S", "2", "2" },
    { "TRAINPROF_HANG_S", "90.5", "90.5" },
    { "TRAINPROF_HANG_S", "off", "off" },
    { "TRAINPROF_HANG_S", "0", "off" },
};

START_TEST(test_good_values)
{
    const struct good_case *g = &good_cases[_i];
    struct tp_config c;
    ck_assert_msg(parse1(&c, g->name, g->value) == 0, "%s=%s: %s", g->name, g->value,
                  c.n_messages ? c.messages[0] : "");
    ck_assert_int_eq(c.n_messages, 0);
    char eff[4096];
    effective(&c, g->name, eff, sizeof eff);
    ck_assert_str_eq(eff, g->effective);
    tp_config_free(&c);
}
END_TEST

START_TEST(test_good_fields)
{
    struct tp_config c;
    const char *env[] = {
        "TRAINPROF_KEEP=7", "TRAINPROF_STACK_DEPTH=64", "TRAINPROF_BUFFER_MB=1024",
        "TRAINPROF_SYS_INTERVAL=0.25", "TRAINPROF_PEAK_TFLOPS=312", "TRAINPROF_SYS=memory,net",
        "TRAINPROF_ACTIVITIES=cpu", "TRAINPROF_LOG=warn", "TRAINPROF_EXEC=echo {path}",
        "TRAINPROF_CUPTI_PATH=/x/libcupti.so", "NVTX_INJECTION64_PATH=/lib/inj.so", NULL,
    };
    ck_assert_int_eq(parse(&c, env), 0);
    ck_assert_int_eq(c.keep, 7);
    ck_assert_int_eq(c.stack_depth, 64);
    ck_assert_int_eq(c.buffer_mb, 1024);
    ck_assert_double_eq(c.sys_interval, 0.25);
    ck_assert_double_eq(c.peak_tflops, 312);
    ck_assert_uint_eq(c.sys, TP_SYS_MEMORY | TP_SYS_NET);
    ck_assert_uint_eq(c.activities, TP_ACT_CPU);
    ck_assert_int_eq(c.log, TP_LOG_WARN);
    ck_assert_str_eq(c.exec, "echo {path}");
    ck_assert_str_eq(c.cupti_path, "/x/libcupti.so");
    ck_assert_str_eq(c.nvtx_injection_path, "/lib/inj.so");
}
END_TEST

/* An empty value means unset. */
START_TEST(test_empty_is_default)
{
    struct tp_config c;
    const char *env[] = { "TRAINPROF_SCHEDULE=", "TRAINPROF_ENABLED=", "TRAINPROF_KEEP=", NULL };
    ck_assert_int_eq(parse(&c, env), 0);
    ck_assert_uint_eq(c.schedule.active, 4);
    ck_assert_int_eq(c.enabled, 1);
    ck_assert_int_eq(c.keep, -1);
}
END_TEST

/* ---- bad values ----------------------------------------------------------- */

struct bad_case {
    const char *name, *value, *accepted;
};

static const struct bad_case bad_cases[] = {
    { "TRAINPROF_ENABLED", "2", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_ENABLED", "enabled", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_SCHEDULE", "wait=-1", "wait must be an integer >= 0" },
    { "TRAINPROF_SCHEDULE", "warmup=-1", "warmup must be an integer >= 0" },
    { "TRAINPROF_SCHEDULE", "skip_first=x", "skip_first must be an integer >= 0" },
    { "TRAINPROF_SCHEDULE", "repeat=1.5", "repeat must be an integer >= 0" },
    { "TRAINPROF_SCHEDULE", "active=0", "active must be an integer >= 1" },
    { "TRAINPROF_SCHEDULE", "active=", "active must be an integer >= 1" },
    { "TRAINPROF_SCHEDULE", "wait=1,wait=2", "duplicate key wait" },
    { "TRAINPROF_SCHEDULE", "cycles=2", "accepted: skip_first, wait, warmup, active, repeat" },
    { "TRAINPROF_SCHEDULE", "wait", "expected key=value, all, none or profiler-api" },
    { "TRAINPROF_SCHEDULE", "wait=1,", "empty item" },
    { "TRAINPROF_SCHEDULE", "all,wait=1", "expected key=value, all, none or profiler-api" },
    { "TRAINPROF_STEP_ON", "epoch", "accepted: api, nvtx:GLOB, launch:GLOB[/N] or call:NAME[/N]" },
    { "TRAINPROF_STEP_ON", "api,nvtx:", "empty GLOB" },
    { "TRAINPROF_STEP_ON", "launch:", "empty GLOB" },
    { "TRAINPROF_STEP_ON", "launch:/4", "empty GLOB" },
    { "TRAINPROF_STEP_ON", "launch:gemm/0", "N must be an integer >= 1" },
    { "TRAINPROF_STEP_ON", "launch:gemm/x", "N must be an integer >= 1" },
    { "TRAINPROF_STEP_ON", "call:", "empty NAME" },
    { "TRAINPROF_STEP_ON", "call:cudaGraphLaunch/-2", "N must be an integer >= 1" },
    { "TRAINPROF_STEP_ON", "call:cuda*", "NAME must be a function name" },
    { "TRAINPROF_STEP_ON", "api,,nvtx:step", "empty item" },
    { "TRAINPROF_STEP_ON", "api,api,api,api,api,api,api,api,api", "at most 8 items" },
    { "TRAINPROF_FOLDER", "{runname}/traces", "unknown variable {runname}; accepted: {run_name}, "
      "{rank}, {local_rank}, {world_size}, {local_world_size}, {node_rank}, {batch}, {pid}, "
      "{hostname}" },
    { "TRAINPROF_FOLDER", "{run_name/traces", "unterminated" },
    { "TRAINPROF_FILENAME", "rank{rank}}.json", "single '}'" },
    { "TRAINPROF_FILENAME", "{path}", "unknown variable {path}" },
    { "TRAINPROF_REPORTS", "{epoch}", "unknown variable {epoch}" },
    { "TRAINPROF_EXEC", "cp {file} /x", "accepted: {run_name}, {rank}, {local_rank}, "
      "{world_size}, {local_world_size}, {node_rank}, {batch}, {pid}, {hostname}, {path}" },
    { "TRAINPROF_GZIP", "gz", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_OVERWRITE", "y", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_KEEP", "-2", "must be an integer >= -1" },
    { "TRAINPROF_KEEP", "all", "must be an integer >= -1" },
    { "TRAINPROF_KEEP", "3 ", "must be an integer >= -1" },
    { "TRAINPROF_HANDLERS", "chrome,flame", "unknown handler \"flame\"; accepted: " },
    { "TRAINPROF_HANDLERS", "chrome,chrome", "handler chrome listed twice" },
    { "TRAINPROF_HANDLERS", "chrome,", "empty item" },
    { "TRAINPROF_ACTIVITIES", "gpu", "accepted: a comma list of cpu, cuda" },
    { "TRAINPROF_RECORD_SHAPES", "2", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_PROFILE_MEMORY", "nope", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_WITH_STACK", "-1", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_STACK_DEPTH", "0", "must be an integer between 1 and 128" },
    { "TRAINPROF_STACK_DEPTH", "129", "must be an integer between 1 and 128" },
    { "TRAINPROF_STACK_DEPTH", "32x", "must be an integer between 1 and 128" },
    { "TRAINPROF_WITH_FLOPS", "t", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_SYS", "cpu,gpu", "accepted: a comma list of cpu, memory, disk, net; or none" },
    { "TRAINPROF_SYS", "none,cpu", "accepted: a comma list of cpu, memory, disk, net; or none" },
    { "TRAINPROF_SYS_INTERVAL", "0.001", "must be a number of seconds between 0.01 and 3600" },
    { "TRAINPROF_SYS_INTERVAL", "3601", "must be a number of seconds between 0.01 and 3600" },
    { "TRAINPROF_SYS_INTERVAL", "nan", "must be a number of seconds between 0.01 and 3600" },
    { "TRAINPROF_SYS_INTERVAL", "1s", "must be a number of seconds between 0.01 and 3600" },
    { "TRAINPROF_RANKS", "a", "e.g. 0,8-15" },
    { "TRAINPROF_RANKS", "-1", "e.g. 0,8-15" },
    { "TRAINPROF_RANKS", "5-3", "is not a range A-B with 0 <= A <= B" },
    { "TRAINPROF_RANKS", "1,,2", "empty item" },
    { "TRAINPROF_BUFFER_MB", "0", "must be an integer between 1 and 65536" },
    { "TRAINPROF_BUFFER_MB", "65537", "must be an integer between 1 and 65536" },
    { "TRAINPROF_FLIGHT", "-1", "must be an integer between 0 and 10000" },
    { "TRAINPROF_FLIGHT", "10001", "must be an integer between 0 and 10000" },
    { "TRAINPROF_FLIGHT", "ten", "must be an integer between 0 and 10000" },
    { "TRAINPROF_FLIGHT_MB", "0", "must be an integer between 1 and 65536" },
    { "TRAINPROF_FLIGHT_SLOW", "1", "must be a number greater than 1 and at most 1000" },
    { "TRAINPROF_FLIGHT_SLOW", "0.5", "must be a number greater than 1 and at most 1000" },
    { "TRAINPROF_FLIGHT_SLOW", "1001", "must be a number greater than 1 and at most 1000" },
    { "TRAINPROF_FLIGHT_SLOW", "nan", "must be a number greater than 1 and at most 1000" },
    { "TRAINPROF_METADATA", "[1, 2]", "must be a JSON object" },
    { "TRAINPROF_METADATA", "\"x\"", "must be a JSON object" },
    { "TRAINPROF_METADATA", "{\"a\": ", "must be a JSON object" },
    { "TRAINPROF_METADATA", "{\"a\": 1, \"a\": 2}", "must be a JSON object" },
    { "TRAINPROF_METADATA", "{\"traceEvents\": []}", "key \"traceEvents\" is reserved" },
    /* found by fuzz_metadata: accepted, then dropped from the trace (catapult's key) */
    { "TRAINPROF_METADATA", "{\"ir\":18,\"samples\":\"0\"}", "key \"samples\" is reserved" },
    { "TRAINPROF_PEAK_TFLOPS", "0", "must be a number of TFLOP/s > 0" },
    { "TRAINPROF_PEAK_TFLOPS", "-5", "must be a number of TFLOP/s > 0" },
    { "TRAINPROF_PEAK_TFLOPS", "inf", "must be a number of TFLOP/s > 0" },
    { "TRAINPROF_LOG", "verbose", "must be one of quiet, error, warn, info, debug" },
    { "TRAINPROF_STRICT", "strict", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_DUMP_CONFIG", "2", "0/1, true/false, yes/no or on/off" },
    { "TRAINPROF_SCHEDULE", "none,wait=1", "expected key=value, all, none or profiler-api, got \"none\"" },
    { "TRAINPROF_TRIGGER", "{run}/trigger", "unknown variable {run}" },
    { "TRAINPROF_TRIGGER_SIGNAL", "SIGTERM", "accepted: off, SIGUSR1, SIGUSR2 or SIGRTMIN+N" },
    { "TRAINPROF_TRIGGER_SIGNAL", "SIGRTMIN+99", "accepted: off, SIGUSR1, SIGUSR2 or SIGRTMIN+N" },
    { "TRAINPROF_TRIGGER_SIGNAL", "12", "accepted: off, SIGUSR1, SIGUSR2 or SIGRTMIN+N" },
    { "TRAINPROF_HANG_S", "-3", "must be a number of seconds between 1 and 86400, or off (or 0)" },
    { "TRAINPROF_HANG_S", "0.5", "must be a number of seconds between 1 and 86400, or off (or 0)" },
    { "TRAINPROF_HANG_S", "10s", "must be a number of seconds between 1 and 86400, or off (or 0)" },
    { "TRAINPROF_HANG_S", "nan", "must be a number of seconds between 1 and 86400, or off (or 0)" },
};

START_TEST(test_bad_values)
{
    const struct bad_case *b = &bad_cases[_i];
    struct tp_config c, d;
    const char *none[] = { NULL };
    parse(&d, none);
    ck_assert_int_eq(parse1(&c, b->name, b->value), 1);
    ck_assert_int_eq(c.n_errors, 1);
    ck_assert_int_eq(c.n_messages, 1);
    char prefix[512];
    snprintf(prefix, sizeof prefix, "trainprof: error: %s=\"", b->name);
    const char *m = c.messages[0];
    ck_assert_msg(strncmp(m, prefix, strlen(prefix)) == 0, "message: %s", m);
    ck_assert_msg(strstr(m, b->value) != NULL || strchr(b->value, '"'), "value missing: %s", m);
    ck_assert_msg(strstr(m, b->accepted) != NULL, "expected \"%s\" in: %s", b->accepted, m);
    ck_assert_ptr_null(strchr(m, '\n'));
    char eff[4096], def[4096];
    effective(&c, b->name, eff, sizeof eff);
    effective(&d, b->name, def, sizeof def);
    ck_assert_msg(strcmp(eff, def) == 0, "%s keeps the default after an error: %s", b->name, eff);
    tp_config_free(&c);
    tp_config_free(&d);
}
END_TEST

START_TEST(test_spec_error_line)
{
    struct tp_config c;
    parse1(&c, "TRAINPROF_SCHEDULE", "wait=-1");
    ck_assert_str_eq(c.messages[0],
                     "trainprof: error: TRAINPROF_SCHEDULE=\"wait=-1\": wait must be an integer >= 0");
}
END_TEST

START_TEST(test_handler_error_lists_names)
{
    struct tp_config c;
    parse1(&c, "TRAINPROF_HANDLERS", "flame");
    char want[512];
    snprintf(want, sizeof want, "trainprof: error: TRAINPROF_HANDLERS=\"flame\": "
             "unknown handler \"flame\"; accepted: %s", tp_config_handler_names());
    ck_assert_str_eq(c.messages[0], want);
    ck_assert_ptr_nonnull(tp_handler_find("chrome"));
}
END_TEST

/* Names come from collector/contract/handlers.def, whole names only;
 * exec, a post-save stage, stays a valid name. */
START_TEST(test_handler_names_whole)
{
    struct tp_config c;
    parse1(&c, "TRAINPROF_HANDLERS", "stacks,exec,memory");
    ck_assert_int_eq(c.n_messages, 0);
    ck_assert_int_eq(c.n_handlers, 3);
    ck_assert_str_eq(c.handlers[1], "exec");
    tp_config_free(&c);
    const char *partial[] = { "chr", "chromex", "summary,exe", "c" };
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
        parse1(&c, "TRAINPROF_HANDLERS", partial[i]);
        ck_assert_int_eq(c.n_messages, 1);
        ck_assert_ptr_nonnull(strstr(c.messages[0], "unknown handler"));
        tp_config_free(&c);
    }
}
END_TEST

START_TEST(test_message_value_is_one_line)
{
    struct tp_config c;
    parse1(&c, "TRAINPROF_KEEP", "1\n2\"\\");
    ck_assert_int_eq(c.n_messages, 1);
    ck_assert_ptr_null(strchr(c.messages[0], '\n'));
    ck_assert_ptr_nonnull(strstr(c.messages[0], "=\"1\\x0a2\\x22\\x5c\""));
    char big[3000];
    memset(big, '9', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    parse1(&c, "TRAINPROF_KEEP", big);
    ck_assert_int_eq(c.n_errors, 1);
    ck_assert_ptr_nonnull(strstr(c.messages[0], "...\": must be an integer >= -1"));
}
END_TEST

START_TEST(test_several_errors_counted)
{
    struct tp_config c;
    const char *env[] = { "TRAINPROF_KEEP=x", "TRAINPROF_LOG=x", "TRAINPROF_SYS=x", NULL };
    ck_assert_int_eq(parse(&c, env), 3);
    ck_assert_int_eq(c.n_messages, 3);
}
END_TEST

START_TEST(test_message_overflow)
{
    struct tp_config c;
    const char *env[] = {
        "TRAINPROF_KEEP=x", "TRAINPROF_A=1", "TRAINPROF_B=1", "TRAINPROF_C=1", "TRAINPROF_D=1",
        "TRAINPROF_E=1", "TRAINPROF_F=1", "TRAINPROF_G=1", "TRAINPROF_H=1", "TRAINPROF_I=1", NULL,
    };
    parse(&c, env);
    ck_assert_int_eq(c.n_errors, 1);
    ck_assert_int_eq(c.n_messages, 8);
    ck_assert_int_eq(c.n_dropped_messages, 2);
    ck_assert_ptr_nonnull(strstr(c.messages[0], "trainprof: error: TRAINPROF_KEEP="));
}
END_TEST

/* ---- booleans ------------------------------------------------------------- */

START_TEST(test_booleans_all_spellings)
{
    static const char *const bools[] = {
        "TRAINPROF_ENABLED", "TRAINPROF_GZIP", "TRAINPROF_OVERWRITE", "TRAINPROF_RECORD_SHAPES",
        "TRAINPROF_PROFILE_MEMORY", "TRAINPROF_WITH_STACK", "TRAINPROF_WITH_FLOPS",
        "TRAINPROF_STRICT", "TRAINPROF_DUMP_CONFIG",
    };
    static const struct { const char *s; const char *v; } spell[] = {
        { "1", "1" }, { "0", "0" }, { "true", "1" }, { "false", "0" }, { "yes", "1" },
        { "no", "0" }, { "on", "1" }, { "off", "0" }, { "TRUE", "1" }, { "False", "0" },
        { "YES", "1" }, { "No", "0" }, { "oN", "1" }, { "OFF", "0" },
    };
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        for (size_t j = 0; j < sizeof spell / sizeof spell[0]; j++) {
            struct tp_config c;
            ck_assert_int_eq(parse1(&c, bools[i], spell[j].s), 0);
            char eff[64];
            effective(&c, bools[i], eff, sizeof eff);
            ck_assert_msg(strcmp(eff, spell[j].v) == 0, "%s=%s gave %s", bools[i], spell[j].s, eff);
        }
        static const char *const bad[] = { "2", "tru", "y", "n", "enable", "1.0", " 1" };
        for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
            struct tp_config c;
            ck_assert_msg(parse1(&c, bools[i], bad[j]) == 1, "%s=%s accepted", bools[i], bad[j]);
        }
    }
}
END_TEST

/* ---- schedule --------------------------------------------------------------- */

struct sched_case {
    const char *value;
    uint64_t skip_first, wait, warmup, active, repeat;
    int all;
};

static const struct sched_case sched_cases[] = {
    { "wait=2", 0, 2, 1, 4, 1, 0 },
    { "active=1", 0, 0, 1, 1, 1, 0 },
    { "repeat=0", 0, 0, 1, 4, 0, 0 },
    { "skip_first=10", 10, 0, 1, 4, 1, 0 },
    { "warmup=3,active=2", 0, 0, 3, 2, 1, 0 },
    { "repeat=2,skip_first=1,active=3,warmup=2,wait=5", 1, 5, 2, 3, 2, 0 },
    { "skip_first=0,wait=0,warmup=1,active=4,repeat=1", 0, 0, 1, 4, 1, 0 },
    { "all", 0, 0, 0, 0, 0, 1 },
    { "All", 0, 0, 0, 0, 0, 1 },
    { "profiler-api", 0, 0, 1, 4, 1, 0 },
    { "Profiler-API", 0, 0, 1, 4, 1, 0 },
};

START_TEST(test_schedule)
{
    const struct sched_case *s = &sched_cases[_i];
    struct tp_config c;
    ck_assert_int_eq(parse1(&c, "TRAINPROF_SCHEDULE", s->value), 0);
    ck_assert_int_eq(c.schedule.all, s->all);
    ck_assert_int_eq(c.schedule.profiler_api, strcasecmp(s->value, "profiler-api") == 0);
    if (!s->all) {
        ck_assert_uint_eq(c.schedule.skip_first, s->skip_first);
        ck_assert_uint_eq(c.schedule.wait, s->wait);
        ck_assert_uint_eq(c.schedule.warmup, s->warmup);
        ck_assert_uint_eq(c.schedule.active, s->active);
        ck_assert_uint_eq(c.schedule.repeat, s->repeat);
    }
    ck_assert_int_eq(c.n_messages, 0);
}
END_TEST

START_TEST(test_schedule_warmup_zero_warns)
{
    struct tp_config c;
    ck_assert_int_eq(parse1(&c, "TRAINPROF_SCHEDULE", "warmup=0,active=2"), 0);
    ck_assert_int_eq(c.n_errors, 0);
    ck_assert_int_eq(c.n_messages, 1);
    ck_assert_str_eq(c.messages[0], "trainprof: warning: TRAINPROF_SCHEDULE: Profiler won't be "
                     "using warmup, this can skew profiler results");
    ck_assert_uint_eq(c.schedule.warmup, 0);
    ck_assert_uint_eq(c.schedule.active, 2);
}
END_TEST

/* ---- step signals --------------------------------------------------------- */

struct sig_want {
    enum tp_signal_kind kind;
    const char *pattern;
    uint64_t every;
    const char *text;
};

struct step_case {
    const char *value;
    int n;
    struct sig_want s[3];
};

static const struct step_case step_cases[] = {
    { "api", 1, { { TP_SIGNAL_API, "", 1, "api" } } },
    { "nvtx:train*", 1, { { TP_SIGNAL_NVTX, "train*", 1, "nvtx:train*" } } },
    { "nvtx:train/step", 1, { { TP_SIGNAL_NVTX, "train/step", 1, "nvtx:train/step" } } },
    { "launch:*gemm*", 1, { { TP_SIGNAL_LAUNCH, "*gemm*", 1, "launch:*gemm*" } } },
    { "launch:*gemm*/10", 1, { { TP_SIGNAL_LAUNCH, "*gemm*", 10, "launch:*gemm*/10" } } },
    { "launch:a/b/3", 1, { { TP_SIGNAL_LAUNCH, "a/b", 3, "launch:a/b/3" } } },
    { "call:cudaGraphLaunch", 1, { { TP_SIGNAL_CALL, "cudaGraphLaunch", 1, "call:cudaGraphLaunch" } } },
    { "call:cudaGraphLaunch/4", 1,
      { { TP_SIGNAL_CALL, "cudaGraphLaunch", 4, "call:cudaGraphLaunch/4" } } },
    { "api,nvtx:step,launch:k/2", 3,
      { { TP_SIGNAL_API, "", 1, "api" }, { TP_SIGNAL_NVTX, "step", 1, "nvtx:step" },
        { TP_SIGNAL_LAUNCH, "k", 2, "launch:k/2" } } },
};

START_TEST(test_step_on)
{
    const struct step_case *s = &step_cases[_i];
    struct tp_config c;
    ck_assert_int_eq(parse1(&c, "TRAINPROF_STEP_ON", s->value), 0);
    ck_assert_int_eq(c.n_signals, s->n);
    for (int i = 0; i < s->n; i++) {
        ck_assert_int_eq(c.signals[i].kind, s->s[i].kind);
        ck_assert_str_eq(c.signals[i].pattern, s->s[i].pattern);
        ck_assert_uint_eq(c.signals[i].every, s->s[i].every);
        ck_assert_str_eq(c.signals[i].text, s->s[i].text);
    }
}
END_TEST

START_TEST(test_step_on_max)
{
    struct tp_config c;
    ck_assert_int_eq(parse1(&c, "TRAINPROF_STEP_ON", "api,api,api,api,api,api,api,nvtx:x"), 0);
    ck_assert_int_eq(c.n_signals, TP_MAX_SIGNALS);
    ck_assert_str_eq(c.signals[7].pattern, "x");
}
END_TEST

/* ---- ranks ------------------------------------------------------------------ */

struct ranks_case {
    const char *ranks, *rank_var, *rank;
    int selected;
};

static const struct ranks_case ranks_cases[] = {
    { "0,8-15", "RANK", "0", 1 },
    { "0,8-15", "RANK", "1", 0 },
    { "0,8-15", "RANK", "7", 0 },
    { "0,8-15", "RANK", "8", 1 },
    { "0,8-15", "RANK", "12", 1 },
    { "0,8-15", "RANK", "15", 1 },
    { "0,8-15", "RANK", "16", 0 },
    { "3", "SLURM_PROCID", "3", 1 },
    { "3", "SLURM_PROCID", "4", 0 },
    { "2-2,5", "PMI_RANK", "2", 1 },
    { "2-2,5", "OMPI_COMM_WORLD_RANK", "5", 1 },
    { "2-2,5", "OMPI_COMM_WORLD_RANK", "4", 0 },
    { "1", NULL, NULL, 0 },
    { "0", NULL, NULL, 1 },
    { "", "RANK", "99", 1 },
};

START_TEST(test_ranks)
{
    const struct ranks_case *r = &ranks_cases[_i];
    char a[128], b[128];
    snprintf(a, sizeof a, "TRAINPROF_RANKS=%s", r->ranks);
    snprintf(b, sizeof b, "%s=%s", r->rank_var ? r->rank_var : "UNRELATED", r->rank ? r->rank : "");
    const char *env[] = { a, b, NULL };
    struct tp_config c;
    ck_assert_int_eq(parse(&c, env), 0);
    ck_assert_msg(c.rank_selected == r->selected, "RANKS=%s %s=%s: selected %d", r->ranks,
                  r->rank_var, r->rank, c.rank_selected);
}
END_TEST

START_TEST(test_ranks_unset_selects)
{
    struct tp_config c;
    const char *env[] = { "RANK=1234", NULL };
    parse(&c, env);
    ck_assert_int_eq(c.rank_selected, 1);
}
END_TEST

/* ---- launcher variables ------------------------------------------------------ */

struct launcher_case {
    const char *env[5];
    int rank, local_rank, world_size, local_world_size, node_rank;
};

static const struct launcher_case launcher_cases[] = {
    { { NULL }, 0, 0, 1, 1, 0 },
    { { "RANK=3", "PMI_RANK=4", "OMPI_COMM_WORLD_RANK=5", "SLURM_PROCID=6" }, 3, 0, 1, 1, 0 },
    { { "PMI_RANK=4", "OMPI_COMM_WORLD_RANK=5", "SLURM_PROCID=6" }, 4, 0, 1, 1, 0 },
    { { "OMPI_COMM_WORLD_RANK=5", "SLURM_PROCID=6" }, 5, 0, 1, 1, 0 },
    { { "SLURM_PROCID=6" }, 6, 0, 1, 1, 0 },
    { { "RANK=x", "PMI_RANK=4" }, 4, 0, 1, 1, 0 },
    { { "RANK=-1" }, 0, 0, 1, 1, 0 },
    { { "RANK=99999999999" }, 0, 0, 1, 1, 0 },
    { { "LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_RANK=2", "MPI_LOCALRANKID=3", "SLURM_LOCALID=4" },
      0, 1, 1, 1, 0 },
    { { "OMPI_COMM_WORLD_LOCAL_RANK=2", "MPI_LOCALRANKID=3", "SLURM_LOCALID=4" }, 0, 2, 1, 1, 0 },
    { { "MPI_LOCALRANKID=3", "SLURM_LOCALID=4" }, 0, 3, 1, 1, 0 },
    { { "SLURM_LOCALID=4" }, 0, 4, 1, 1, 0 },
    { { "WORLD_SIZE=16", "PMI_SIZE=2", "OMPI_COMM_WORLD_SIZE=3", "SLURM_NTASKS=4" }, 0, 0, 16, 1, 0 },
    { { "PMI_SIZE=2", "OMPI_COMM_WORLD_SIZE=3", "SLURM_NTASKS=4" }, 0, 0, 2, 1, 0 },
    { { "OMPI_COMM_WORLD_SIZE=3", "SLURM_NTASKS=4" }, 0, 0, 3, 1, 0 },
    { { "SLURM_NTASKS=4" }, 0, 0, 4, 1, 0 },
    { { "WORLD_SIZE=0" }, 0, 0, 1, 1, 0 },
    { { "LOCAL_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "MPI_LOCALNRANKS=3" }, 0, 0, 1, 8, 0 },
    { { "OMPI_COMM_WORLD_LOCAL_SIZE=2", "MPI_LOCALNRANKS=3" }, 0, 0, 1, 2, 0 },
    { { "MPI_LOCALNRANKS=3" }, 0, 0, 1, 3, 0 },
    { { "NODE_RANK=1", "GROUP_RANK=2", "SLURM_NODEID=3" }, 0, 0, 1, 1, 1 },
    { { "GROUP_RANK=2", "SLURM_NODEID=3" }, 0, 0, 1, 1, 2 },
    { { "SLURM_NODEID=3" }, 0, 0, 1, 1, 3 },
    { { "NODE_RANK=", "GROUP_RANK=2.0", "SLURM_NODEID=3" }, 0, 0, 1, 1, 3 },
};

START_TEST(test_launcher)
{
    const struct launcher_case *l = &launcher_cases[_i];
    struct tp_config c;
    ck_assert_int_eq(parse(&c, l->env), 0);
    ck_assert_int_eq(c.rank, l->rank);
    ck_assert_int_eq(c.local_rank, l->local_rank);
    ck_assert_int_eq(c.world_size, l->world_size);
    ck_assert_int_eq(c.local_world_size, l->local_world_size);
    ck_assert_int_eq(c.node_rank, l->node_rank);
}
END_TEST

/* ---- run name --------------------------------------------------------------- */

struct run_case {
    const char *env[4];
    const char *run_name;   /* NULL: derived from program and parent start */
};

static const struct run_case run_cases[] = {
    { { "TRAINPROF_RUN_NAME=mine", "TORCHELASTIC_RUN_ID=te", "SLURM_JOB_ID=42" }, "mine" },
    { { "TORCHELASTIC_RUN_ID=te", "SLURM_JOB_ID=42" }, "te" },
    { { "TORCHELASTIC_RUN_ID=none", "SLURM_JOB_ID=42" }, "42" },
    { { "SLURM_JOB_ID=42" }, "42" },
    { { "TORCHELASTIC_RUN_ID=none" }, NULL },
    { { NULL }, NULL },
    { { "TRAINPROF_RUN_NAME=a/b\x01" "c" }, "a_b_c" },
    { { "TRAINPROF_RUN_NAME=.." }, "__" },
    { { "TORCHELASTIC_RUN_ID=x/y" }, "x_y" },
};

static int derived_time(const char *run_name, time_t *t)
{
    const char *prog = program_invocation_short_name;
    size_t n = strlen(prog);
    if (strncmp(run_name, prog, n) != 0 || run_name[n] != '-' || strlen(run_name + n + 1) != 15)
        return -1;
    struct tm tm = { 0 };
    const char *end = strptime(run_name + n + 1, "%Y%m%d-%H%M%S", &tm);
    if (!end || *end)
        return -1;
    *t = timegm(&tm);
    return 0;
}

START_TEST(test_run_name)
{
    const struct run_case *r = &run_cases[_i];
    struct tp_config c;
    ck_assert_int_eq(parse(&c, r->env), 0);
    if (r->run_name) {
        ck_assert_str_eq(c.run_name, r->run_name);
    } else {
        time_t t;
        ck_assert_msg(derived_time(c.run_name, &t) == 0, "run name %s", c.run_name);
        ck_assert_int_le(t, time(NULL));
    }
}
END_TEST

START_TEST(test_run_name_too_long)
{
    char name[400];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    struct tp_config c;
    ck_assert_int_eq(parse1(&c, "TRAINPROF_RUN_NAME", name), 1);
    ck_assert_ptr_nonnull(strstr(c.messages[0], "must be at most 255 bytes"));
    time_t t;
    ck_assert_int_eq(derived_time(c.run_name, &t), 0);
}
END_TEST

/* Runs tp_config_parse in a child of this process; its run name goes to "out". */
static void child_run_name(char *out, size_t n)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct tp_config c;
        const char *env[] = { NULL };
        parse(&c, env);
        ssize_t w = write(fd[1], c.run_name, strlen(c.run_name));
        _exit(w > 0 ? 0 : 1);
    }
    close(fd[1]);
    ssize_t r = read(fd[0], out, n - 1);
    close(fd[0]);
    out[r > 0 ? r : 0] = '\0';
    int st;
    waitpid(pid, &st, 0);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Ranks started by one launcher share the name; it is the launcher's start,
 * not the rank's: this process started before "before", its children after. */
START_TEST(test_run_name_from_parent_start)
{
    time_t before = time(NULL);
    sleep(3);
    char a[256], b[256];
    child_run_name(a, sizeof a);
    usleep(1200 * 1000);
    child_run_name(b, sizeof b);
    ck_assert_str_eq(a, b);
    time_t t;
    ck_assert_msg(derived_time(a, &t) == 0, "run name %s", a);
    ck_assert_msg(t <= before, "run name %s is after the parent started (%lld)", a,
                  (long long)before);
    ck_assert_msg(t >= before - 600, "run name %s long before this test", a);
}
END_TEST

/* ---- unknown variables ------------------------------------------------------ */

START_TEST(test_unknown_suggestion)
{
    struct tp_config c;
    const char *env[] = {
        "TRAINPROF_SCHEDUEL=all", "PATH=/bin", "TRAINPROF_STEPON=api", "TRAINPROF_dump_config=1",
        "TRAINPROF_SCHEDULE=all", "XTRAINPROF_FOO=1", "TRAINPROF_BUFER_MB=4", NULL,
    };
    ck_assert_int_eq(parse(&c, env), 0);
    ck_assert_int_eq(c.n_errors, 0);
    ck_assert_int_eq(c.n_messages, 4);
    ck_assert_str_eq(c.messages[0], "trainprof: warning: unknown variable TRAINPROF_SCHEDUEL "
                     "(did you mean TRAINPROF_SCHEDULE?)");
    ck_assert_str_eq(c.messages[1], "trainprof: warning: unknown variable TRAINPROF_STEPON "
                     "(did you mean TRAINPROF_STEP_ON?)");
    ck_assert_str_eq(c.messages[2], "trainprof: warning: unknown variable TRAINPROF_dump_config "
                     "(did you mean TRAINPROF_DUMP_CONFIG?)");
    ck_assert_str_eq(c.messages[3], "trainprof: warning: unknown variable TRAINPROF_BUFER_MB "
                     "(did you mean TRAINPROF_BUFFER_MB?)");
    ck_assert_int_eq(c.schedule.all, 1);
}
END_TEST

START_TEST(test_unknown_names_without_values)
{
    struct tp_config c;
    const char *names[] = { "TRAINPROF_CUPTIPATH", "TRAINPROF_CUPTI_PATH", NULL };
    fake_env = NULL;
    tp_config_parse(&c, fake_get, names);
    ck_assert_int_eq(c.n_messages, 1);
    ck_assert_ptr_nonnull(strstr(c.messages[0], "(did you mean TRAINPROF_CUPTI_PATH?)"));
}
END_TEST

/* ---- JSON -------------------------------------------------------------------- */

START_TEST(test_json)
{
    struct tp_config c;
    const char *env[] = { "TRAINPROF_SCHEDULE=all", "TRAINPROF_METADATA={\"k\": \"v\"}",
                          "TRAINPROF_RUN_NAME=r\xff" "1", NULL };
    ck_assert_int_eq(parse(&c, env), 0);
    char *s = tp_config_json(&c);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_null(strchr(s, '\n'));
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    ck_assert_ptr_nonnull(j);
    size_t n;
    const struct tp_config_var *v = tp_config_vars(&n);
    ck_assert_uint_eq(json_object_size(j), n);
    const char *key;
    json_t *val;
    size_t i = 0;
    json_object_foreach(j, key, val) {
        ck_assert_str_eq(key, v[i].name);
        ck_assert(json_is_string(val));
        i++;
    }
    ck_assert_str_eq(json_string_value(json_object_get(j, "TRAINPROF_SCHEDULE")), "all");
    ck_assert_str_eq(json_string_value(json_object_get(j, "TRAINPROF_METADATA")), "{\"k\":\"v\"}");
    ck_assert_str_eq(json_string_value(json_object_get(j, "TRAINPROF_RUN_NAME")), "r?1");
    ck_assert_str_eq(json_string_value(json_object_get(j, "TRAINPROF_HANDLERS")), "chrome,summary");
    json_decref(j);
    free(s);
    tp_config_free(&c);
    ck_assert_ptr_null(c.metadata);
}
END_TEST

/* ---- init and report, in a child ------------------------------------------- */

struct child_result {
    int status;          /* raw wait status */
    int passive;         /* tp_config_report()'s answer, -1 if the child exited early */
    int log_level;       /* tp_log_level after the report */
    int silent_init;     /* nothing was written before the report */
    char out[16384];     /* stderr */
};

static void run_child(const char *const *env, struct child_result *r)
{
    int fd[2];
    memset(r, 0, sizeof *r);
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        clearenv();
        for (const char *const *e = env; *e; e++)
            putenv((char *)*e);
        dup2(fd[1], STDERR_FILENO);
        close(fd[0]);
        tp_config_init();
        tp_config_init();
        ssize_t w = write(STDERR_FILENO, "<init>", 6);
        int passive = tp_config_report();
        int again = tp_config_report();
        tp_config_announce();           /* tp-flush's, once activated */
        (void)w;
        _exit(passive == again ? 100 + passive * 10 + tp_log_level : 99);
    }
    close(fd[1]);
    size_t len = 0;
    for (;;) {
        ssize_t k = read(fd[0], r->out + len, sizeof r->out - 1 - len);
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    r->out[len] = '\0';
    close(fd[0]);
    waitpid(pid, &r->status, 0);
    r->passive = -1;
    if (WIFEXITED(r->status) && WEXITSTATUS(r->status) >= 100) {
        r->passive = (WEXITSTATUS(r->status) - 100) / 10;
        r->log_level = (WEXITSTATUS(r->status) - 100) % 10;
    }
    r->silent_init = strncmp(r->out, "<init>", 6) == 0;
    if (r->silent_init)
        memmove(r->out, r->out + 6, len - 5);
}

START_TEST(test_report_clean)
{
    const char *env[] = { NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_int_eq(r.passive, 0);
    ck_assert_int_eq(r.log_level, TP_LOG_INFO);
    ck_assert(r.silent_init);
    /* one start-up line: the effective schedule, in words, and the signals */
    ck_assert_str_eq(r.out, "trainprof: rank 0: schedule skip_first=0,wait=0,warmup=1,active=4,"
                            "repeat=1: records steps 1-4, one window (repeat=0: every 5 steps "
                            "until exit); step signals api,nvtx:step\n");
}
END_TEST

/* The start-up line is an info line, of the rank that records, with the
 * effective schedule (keys not given take their defaults). */
START_TEST(test_report_startup_line)
{
    const char *env[] = { "TRAINPROF_SCHEDULE=wait=5,active=3,repeat=0", "RANK=3", "WORLD_SIZE=4",
                          "TRAINPROF_STEP_ON=launch:*gemm*/2", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_int_eq(r.passive, 0);
    ck_assert_str_eq(r.out, "trainprof: rank 3: schedule skip_first=0,wait=5,warmup=1,active=3,"
                            "repeat=0: records steps 6-8, then every 9 steps until exit; "
                            "step signals launch:*gemm*/2\n");
    const char *quiet[] = { "TRAINPROF_LOG=warn", NULL };
    run_child(quiet, &r);
    ck_assert_int_eq(r.passive, 0);
    ck_assert_str_eq(r.out, "");
    const char *other[] = { "TRAINPROF_RANKS=1", "RANK=0", "WORLD_SIZE=2", NULL };
    run_child(other, &r);
    ck_assert_str_eq(r.out, "");
}
END_TEST

START_TEST(test_report_error_once)
{
    const char *env[] = { "TRAINPROF_SCHEDULE=wait=-1", "TRAINPROF_SCHEDUEL=1", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert(r.silent_init);
    ck_assert_int_eq(r.passive, 1);
    ck_assert_str_eq(r.out,
                     "trainprof: error: TRAINPROF_SCHEDULE=\"wait=-1\": wait must be an integer >= 0\n"
                     "trainprof: warning: unknown variable TRAINPROF_SCHEDUEL "
                     "(did you mean TRAINPROF_SCHEDULE?)\n");
}
END_TEST

struct level_case {
    const char *log;
    int level, errors_shown, warnings_shown;
};

static const struct level_case level_cases[] = {
    { "TRAINPROF_LOG=quiet", TP_LOG_QUIET, 0, 0 },
    { "TRAINPROF_LOG=error", TP_LOG_ERROR, 1, 0 },
    { "TRAINPROF_LOG=warn", TP_LOG_WARN, 1, 1 },
    { "TRAINPROF_LOG=info", TP_LOG_INFO, 1, 1 },
    { "TRAINPROF_LOG=debug", TP_LOG_DEBUG, 1, 1 },
};

START_TEST(test_report_levels)
{
    const struct level_case *l = &level_cases[_i];
    const char *env[] = { l->log, "TRAINPROF_KEEP=-5", "TRAINPROF_KEPE=1", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_int_eq(r.passive, 1);
    ck_assert_int_eq(r.log_level, l->level);
    ck_assert_int_eq(strstr(r.out, "trainprof: error: TRAINPROF_KEEP=\"-5\"") != NULL,
                     l->errors_shown);
    ck_assert_int_eq(strstr(r.out, "trainprof: warning: unknown variable TRAINPROF_KEPE") != NULL,
                     l->warnings_shown);
}
END_TEST

START_TEST(test_report_disabled)
{
    const char *env[] = { "TRAINPROF_ENABLED=0", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_int_eq(r.passive, 1);
    ck_assert_str_eq(r.out, "");
}
END_TEST

/* A disabled profiler says nothing and never stops the program. */
START_TEST(test_report_disabled_is_silent)
{
    const char *env[] = { "TRAINPROF_ENABLED=off", "TRAINPROF_STRICT=1", "TRAINPROF_KEEP=x",
                          "TRAINPROF_DUMP_CONFIG=1", "TRAINPROF_FOO=1", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_int_eq(r.passive, 1);
    ck_assert_int_eq(r.log_level, TP_LOG_QUIET);
    ck_assert_str_eq(r.out, "");
}
END_TEST

START_TEST(test_report_rank_excluded)
{
    const char *env[] = { "TRAINPROF_RANKS=1-3", "RANK=0", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_int_eq(r.passive, 1);
    const char *env2[] = { "TRAINPROF_RANKS=1-3", "RANK=2", NULL };
    run_child(env2, &r);
    ck_assert_int_eq(r.passive, 0);
}
END_TEST

START_TEST(test_strict_exits_2)
{
    const char *env[] = { "TRAINPROF_STRICT=1", "TRAINPROF_BUFFER_MB=0", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert(WIFEXITED(r.status));
    ck_assert_int_eq(WEXITSTATUS(r.status), 2);
    ck_assert_ptr_nonnull(strstr(r.out, "trainprof: error: TRAINPROF_BUFFER_MB=\"0\""));
}
END_TEST

START_TEST(test_strict_without_error_runs)
{
    const char *env[] = { "TRAINPROF_STRICT=yes", "TRAINPROF_SCHEDULEE=1", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_int_eq(r.passive, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "did you mean TRAINPROF_SCHEDULE?"));
}
END_TEST

/* Through the Check runner's own exit-value check, too (CK_FORK=yes). */
START_TEST(test_strict_exit_value)
{
    clearenv();
    setenv("TRAINPROF_STRICT", "on", 1);
    setenv("TRAINPROF_LOG", "quiet", 1);
    setenv("TRAINPROF_SYS", "gpu", 1);
    tp_config_init();
    tp_config_report();
}
END_TEST

START_TEST(test_dump_config)
{
    const char *env[] = { "TRAINPROF_DUMP_CONFIG=1", "TRAINPROF_SCHEDULE=wait=2",
                          "TRAINPROF_RUN_NAME=job7", "TRAINPROF_METADATA={\"a\":[1]}", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert(r.silent_init);
    ck_assert_int_eq(r.passive, 0);
    size_t n;
    const struct tp_config_var *v = tp_config_vars(&n);
    char *save, *line = strtok_r(r.out, "\n", &save);
    for (size_t i = 0; i < n; i++, line = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(line != NULL, "dump stops before %s", v[i].name);
        char want[128];
        snprintf(want, sizeof want, "trainprof: config: %s=", v[i].name);
        ck_assert_msg(strncmp(line, want, strlen(want)) == 0, "line %zu: %s", i, line);
        const char *val = line + strlen(want);
        if (strcmp(v[i].name, "TRAINPROF_SCHEDULE") == 0)
            ck_assert_str_eq(val, "skip_first=0,wait=2,warmup=1,active=4,repeat=1");
        else if (strcmp(v[i].name, "TRAINPROF_RUN_NAME") == 0)
            ck_assert_str_eq(val, "job7");
        else if (strcmp(v[i].name, "TRAINPROF_METADATA") == 0)
            ck_assert_str_eq(val, "{\"a\":[1]}");
        else if (strcmp(v[i].name, "TRAINPROF_DUMP_CONFIG") == 0)
            ck_assert_str_eq(val, "1");
        else if (is_value_default(v[i].def))
            ck_assert_str_eq(val, v[i].def);
    }
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, ": schedule skip_first=0,wait=2,"));  /* the start-up line */
    ck_assert_ptr_null(strtok_r(NULL, "\n", &save));
}
END_TEST

START_TEST(test_dump_escapes_control_bytes)
{
    const char *env[] = { "TRAINPROF_DUMP_CONFIG=1", "TRAINPROF_EXEC=a\nb", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_ptr_nonnull(strstr(r.out, "trainprof: config: TRAINPROF_EXEC=a\\x0ab\n"));
}
END_TEST

START_TEST(test_init_reads_environment)
{
    const char *env[] = { "TRAINPROF_DUMP_CONFIG=1", "TRAINPROF_KEEP=9", "LOCAL_RANK=3",
                          "TRAINPROF_LOG=warn", NULL };
    struct child_result r;
    run_child(env, &r);
    ck_assert_ptr_nonnull(strstr(r.out, "trainprof: config: TRAINPROF_KEEP=9\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "trainprof: config: TRAINPROF_LOG=warn\n"));
    ck_assert_int_eq(r.log_level, TP_LOG_WARN);
}
END_TEST

/* ---- README agreement ------------------------------------------------------ */

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    size_t k = strspn(s, " \t");
    memmove(s, s + k, strlen(s + k) + 1);
}

static void unquote(char *s)
{
    trim(s);
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '`' && s[n - 1] == '`') {
        memmove(s, s + 1, n - 2);
        s[n - 2] = '\0';
    }
}

START_TEST(test_readme_agrees)
{
    const char *dir = getenv("TP_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", dir && *dir ? dir : ".");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    size_t n;
    const struct tp_config_var *v = tp_config_vars(&n);
    int seen[64] = { 0 };
    ck_assert_uint_le(n, 64);
    char line[4096];
    int in_section = 0, rows = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "## ", 3) == 0) {
            in_section = strcmp(line, "## Configuration") == 0;
            continue;
        }
        if (!in_section || strncmp(line, "| `TRAINPROF_", 13) != 0)
            continue;
        char *cells[4] = { 0 };
        char *save, *p = strtok_r(line + 1, "|", &save);
        for (int i = 0; i < 3 && p; i++, p = strtok_r(NULL, "|", &save))
            cells[i] = p;
        ck_assert_msg(cells[1] != NULL, "README row without a default: %s", line);
        unquote(cells[0]);
        unquote(cells[1]);
        size_t i;
        for (i = 0; i < n; i++)
            if (strcmp(v[i].name, cells[0]) == 0)
                break;
        ck_assert_msg(i < n, "README documents %s, which the code does not know", cells[0]);
        ck_assert_msg(!seen[i], "README documents %s twice", cells[0]);
        seen[i] = 1;
        ck_assert_msg(strcmp(v[i].def, cells[1]) == 0, "%s: README default \"%s\", code \"%s\"",
                      v[i].name, cells[1], v[i].def);
        rows++;
    }
    fclose(f);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(seen[i], "%s is missing from README's configuration table", v[i].name);
    ck_assert_int_eq(rows, (int)n);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *t = tcase_create("parse");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, test_defaults);
    tcase_add_test(t, test_documented_defaults_are_effective);
    tcase_add_test(t, test_vars_table);
    tcase_add_loop_test(t, test_good_values, 0, sizeof good_cases / sizeof good_cases[0]);
    tcase_add_test(t, test_good_fields);
    tcase_add_test(t, test_empty_is_default);
    tcase_add_loop_test(t, test_bad_values, 0, sizeof bad_cases / sizeof bad_cases[0]);
    tcase_add_test(t, test_spec_error_line);
    tcase_add_test(t, test_handler_error_lists_names);
    tcase_add_test(t, test_handler_names_whole);
    tcase_add_test(t, test_message_value_is_one_line);
    tcase_add_test(t, test_several_errors_counted);
    tcase_add_test(t, test_message_overflow);
    tcase_add_test(t, test_booleans_all_spellings);
    tcase_add_loop_test(t, test_schedule, 0, sizeof sched_cases / sizeof sched_cases[0]);
    tcase_add_test(t, test_schedule_warmup_zero_warns);
    tcase_add_loop_test(t, test_step_on, 0, sizeof step_cases / sizeof step_cases[0]);
    tcase_add_test(t, test_step_on_max);
    tcase_add_loop_test(t, test_ranks, 0, sizeof ranks_cases / sizeof ranks_cases[0]);
    tcase_add_test(t, test_ranks_unset_selects);
    tcase_add_loop_test(t, test_launcher, 0, sizeof launcher_cases / sizeof launcher_cases[0]);
    tcase_add_loop_test(t, test_run_name, 0, sizeof run_cases / sizeof run_cases[0]);
    tcase_add_test(t, test_run_name_too_long);
    tcase_add_test(t, test_run_name_from_parent_start);
    tcase_add_test(t, test_unknown_suggestion);
    tcase_add_test(t, test_unknown_names_without_values);
    tcase_add_test(t, test_json);
    tcase_add_test(t, test_readme_agrees);
    suite_add_tcase(s, t);

    TCase *r = tcase_create("report");
    tcase_set_timeout(r, 30);
    tcase_add_test(r, test_report_clean);
    tcase_add_test(r, test_report_startup_line);
    tcase_add_test(r, test_report_error_once);
    tcase_add_loop_test(r, test_report_levels, 0, sizeof level_cases / sizeof level_cases[0]);
    tcase_add_test(r, test_report_disabled);
    tcase_add_test(r, test_report_disabled_is_silent);
    tcase_add_test(r, test_report_rank_excluded);
    tcase_add_test(r, test_strict_exits_2);
    tcase_add_test(r, test_strict_without_error_runs);
    tcase_add_test(r, test_dump_config);
    tcase_add_test(r, test_dump_escapes_control_bytes);
    tcase_add_test(r, test_init_reads_environment);
    suite_add_tcase(s, r);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    if (srunner_fork_status(sr) == CK_FORK) {
        TCase *x = tcase_create("exit");
        tcase_add_exit_test(x, test_strict_exit_value, 2);
        Suite *s = suite_create("config-exit");
        suite_add_tcase(s, x);
        srunner_add_suite(sr, s);
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
