/*
 * fuzz_config.c - libFuzzer harness: the whole configuration parser.
 *
 * DESIGN
 * The input is a fake environment: NUL-separated chunks, each one byte
 * choosing a variable (every row of collector/config/config.c's table, from
 * tp_config_vars(), then the launcher's variables of config_launcher.c, then
 * "an unknown TRAINPROF_ name" whose text is the chunk) and the rest of the
 * chunk its value.  tp_config_parse() runs over it exactly as
 * tp_config_init() runs over getenv(), so every parser, the default
 * re-parse, the messages and the spell-check are reached.  Checks beyond
 * the sanitizers: the effective configuration (tp_config_json, every
 * printer) is a JSON object with one string per variable, the stored
 * messages are NUL-terminated inside their slots and, as printed
 * (tp_log_escape), one line of valid UTF-8 without control bytes, and
 * tp_config_free
 * releases everything (LeakSanitizer).
 */
#include "collector/config/config.h"
#include "collector/common/log.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const launcher[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_ID",
    "TORCHELASTIC_RUN_ID", "NVTX_INJECTION64_PATH", "INTEL_LIBITTNOTIFY64",
};
#define N_LAUNCHER (sizeof launcher / sizeof launcher[0])
#define MAX_VARS 16

static char *env[MAX_VARS + 1];     /* "NAME=VALUE", NULL terminated */

static const char *fake_get(const char *name)
{
    size_t n = strlen(name);
    for (char **e = env; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t nvars;
    const struct tp_config_var *vars = tp_config_vars(&nvars);
    int n = 0;
    size_t i = 0;
    while (i < size && n < MAX_VARS) {
        size_t end = i;
        while (end < size && data[end])
            end++;
        if (end > i) {
            size_t pick = data[i] % (nvars + N_LAUNCHER + 1);
            const char *value = (const char *)data + i + 1;
            int vlen = (int)(end - i - 1);
            char *item = NULL;
            int rc;
            if (pick < nvars)
                rc = asprintf(&item, "%s=%.*s", vars[pick].name, vlen, value);
            else if (pick < nvars + N_LAUNCHER)
                rc = asprintf(&item, "%s=%.*s", launcher[pick - nvars], vlen, value);
            else
                rc = asprintf(&item, "TRAINPROF_%.*s", vlen, value);
            if (rc < 0)
                abort();
            env[n++] = item;
        }
        i = end + 1;
    }
    env[n] = NULL;

    static struct tp_config cfg;
    tp_config_parse(&cfg, fake_get, (const char *const *)env);
    for (int m = 0; m < cfg.n_messages; m++) {
        const char *msg = cfg.messages[m];
        const char *nul = memchr(msg, '\0', sizeof cfg.messages[m]);
        if (!nul)
            abort();
        /* as printed (tp_log_line escapes the line): one line, nothing for
         * a terminal to act on (no log injection): no control
         * byte, valid UTF-8 (jansson checks it) */
        static char esc[4 * sizeof cfg.messages[0] + 1];
        size_t n_esc = tp_log_escape(msg, (size_t)(nul - msg), esc, sizeof esc);
        for (size_t c = 0; c < n_esc; c++)
            if ((unsigned char)esc[c] < 0x20 || esc[c] == 0x7f) {
                fprintf(stderr, "control byte 0x%02x in printed message: %s\n", (unsigned char)esc[c], esc);
                abort();
            }
        json_t *u = json_stringn(esc, n_esc);
        if (!u) {
            fprintf(stderr, "printed message is not UTF-8: %s\n", esc);
            abort();
        }
        json_decref(u);
    }
    char *js = tp_config_json(&cfg);
    if (!js)
        abort();
    json_error_t err;
    json_t *o = json_loads(js, 0, &err);
    if (!json_is_object(o) || json_object_size(o) != nvars) {
        fprintf(stderr, "tp_config_json is not an object of %zu strings: %s\n%s\n", nvars,
                err.text, js);
        abort();
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
        if (!json_is_string(v))
            abort();
    json_decref(o);
    free(js);
    tp_config_free(&cfg);
    for (int k = 0; k < n; k++)
        free(env[k]);
    return 0;
}
