/*
 * fuzz_metadata.c - libFuzzer harness: TRAINPROF_METADATA from the
 * variable to the trace: parsed and checked by collector/config/config_values.c
 * (tp_opt_parse_metadata, through tp_config_parse as the library does),
 * then re-read and merged into the trace's top level by handlers/chrome_header.c.
 *
 * DESIGN
 * The input, NUL-terminated, is the variable's value.  When it is
 * accepted, one empty window is written by the chrome handler (plain text)
 * into a private temporary folder and read back.  Checks beyond the
 * sanitizers: the trace parses as JSON (jansson), every key of the value
 * is at its top level with an equal value (strings with their escapes
 * and NULs; numbers by value, since the trace writes a real without a
 * fraction as an integer) beside trainprof's own keys, and
 * the trace nests no deeper than TP_METADATA_MAX_DEPTH + 1 levels, far
 * below what Python's json (HTA, TensorBoard) reads.  A value that is
 * rejected stores exactly one error line naming the variable.
 */
#include "collector/config/config.h"
#include "handlers/handler.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *value;

static const char *fake_get(const char *name)
{
    return strcmp(name, "TRAINPROF_METADATA") == 0 ? value : NULL;
}

/* Deepest nesting of [ and { in a JSON text (outside strings). */
static int text_depth(const char *t, size_t n)
{
    int d = 0, most = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            most = ++d > most ? d : most;
        } else if (c == ']' || c == '}') {
            d--;
        }
    }
    return most;
}

/* json_equal, except that numbers compare by value: the trace writes a
 * real without a fraction as an integer (tp_jsonw_double), 1.0 as 1. */
static int same_value(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_is_object(a) && json_is_object(b)) {
        const char *key;
        json_t *v;
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach(a, key, v)
            if (!same_value(v, json_object_get(b, key)))
                return 0;
        return 1;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_value(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    }
    return json_equal(a, b);
}

static char folder[64];

static void remove_folder(void)
{
    rmdir(folder);
}

static void check_trace(const char *metadata)
{
    if (!folder[0]) {
        snprintf(folder, sizeof folder, "/tmp/tp-fuzz-meta-XXXXXX");
        if (!mkdtemp(folder))
            abort();
        atexit(remove_folder);
    }
    static struct tp_window win;
    static struct tp_saved saved;
    memset(&win, 0, sizeof win);
    memset(&saved, 0, sizeof saved);
    win.run_name = "fuzz";
    win.hostname = "host";
    win.program = "fuzz";
    win.pid = 1;
    win.world_size = 1;
    win.step_signal = "api";
    win.config_json = "{}";
    win.user_metadata = metadata;
    win.trace_folder = folder;
    win.trace_filename = "t.json";
    win.reports_folder = folder;
    win.overwrite = 1;
    win.keep = -1;
    const struct tp_handler *h = tp_handler_find("chrome");
    void *st = h->open(&win);
    if (!st || h->close(st, &win, &saved) != 0)
        abort();
    FILE *f = fopen(saved.trace, "rb");
    if (!f)
        abort();
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    unlink(saved.trace);
    json_error_t err;
    json_t *trace = json_loadb(text, n, 0, &err);
    json_t *user = json_loads(metadata, 0, NULL);
    if (!trace || !user) {
        fprintf(stderr, "the trace does not parse: %s\n%.*s\n", err.text, (int)n, text);
        abort();
    }
    const char *key;
    json_t *v;
    json_object_foreach(user, key, v) {
        if (!same_value(json_object_get(trace, key), v)) {
            fprintf(stderr, "metadata key \"%s\" differs in the trace\n%.*s\n", key, (int)n, text);
            abort();
        }
    }
    if (!json_is_object(json_object_get(trace, "trainprof")) ||
        !json_is_array(json_object_get(trace, "traceEvents")))
        abort();
    if (text_depth(text, n) > TP_METADATA_MAX_DEPTH + 1) {
        fprintf(stderr, "trace nested %d deep\n", text_depth(text, n));
        abort();
    }
    json_decref(trace);
    json_decref(user);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = strndup((const char *)data, size);
    if (!copy)
        abort();
    value = copy;
    static struct tp_config cfg;
    const char *names[] = { NULL };
    int errors = tp_config_parse(&cfg, fake_get, names);
    if (copy[0] && errors == 0) {
        if (!cfg.metadata)
            abort();
        check_trace(cfg.metadata);
    } else if (copy[0]) {
        if (errors != 1 || !strstr(cfg.messages[0], "TRAINPROF_METADATA=") || cfg.metadata)
            abort();
    }
    tp_config_free(&cfg);
    free(copy);
    return 0;
}
