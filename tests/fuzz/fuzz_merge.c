/*
 * fuzz_merge.c - libFuzzer harness: the engine of `trainprof merge`
 * (scripts/trainprof_cli/merge/engine.c, included), which reads other processes'
 * traces: any bytes as the text of an event array.
 *
 * DESIGN
 * The input is written to a memfd and read by tp_merge_events as a plain
 * trace from its first byte (a gzip input exercises ISA-L's inflate, not
 * our code), with a slot, a flow-id suffix and a ts shift taken from the
 * input's size, and metadata events handed back unchanged.  Whatever the
 * bytes: the engine returns one of its three statuses with a one-line
 * error, a resume offset inside the input, one output line per event
 * counted, each ending in ",\n".  And where the events it read were a JSON
 * array (jansson parses "[" + the input up to the "]" it stopped at), each
 * output line is a JSON object with the keys of that array's element, so
 * that the rewrite never breaks or loses an event, however it was laid out.
 */
#include "scripts/trainprof_cli/merge/engine.c"

#include <jansson.h>
#include <sys/mman.h>

static long meta_same(const char *line, size_t len, char *out, size_t cap)
{
    if (len <= cap)
        memcpy(out, line, len);
    return (long)len;
}

/* The JSON object in [p, p + n), or NULL; *overflow set when the text is
 * JSON but a number is beyond a double (an id grown by its suffix digits
 * can be: the script's own json does the same). */
static json_t *object_of(const char *p, size_t n, bool *overflow)
{
    json_error_t err;
    json_t *v = json_loadb(p, n, JSON_DECODE_INT_AS_REAL, &err);
    if (!v && overflow)
        *overflow = strstr(err.text, "overflow") != NULL;
    if (v && !json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int in = memfd_create("fuzz-merge-in", 0), out = memfd_create("fuzz-merge-out", 0);
    if (in < 0 || out < 0)
        abort();
    if (size && write(in, data, size) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", in);
    static const char *suffixes[] = {"", "0", "3", "07", "12"};
    struct tp_merge_job job = {
        .path = path, .out_fd = out, .slot = (uint32_t)(size % 5), .plain = 1,
        .suffix = suffixes[size % 5], .shift_ns = (int64_t)(size % 13) * 777777 - 4000000,
        .meta = meta_same,
    };
    int status = tp_merge_events(&job);
    if (status != -1 && status != 0 && status != 1)
        abort();
    if (status == -1 && (!job.error[0] || strchr(job.error, '\n')))
        abort();
    if (status == 1 && job.resume > size)
        abort();

    size_t n = (size_t)lseek(out, 0, SEEK_END);
    char *text = malloc(n + 1);
    if (!text || pread(out, text, n, 0) != (ssize_t)n)
        abort();
    if (status != -1) {
        size_t lines = 0;
        for (const char *p = text; p < text + n; lines++) {
            const char *nl = memchr(p, '\n', (size_t)(text + n - p));
            if (!nl || nl - p < 1 || nl[-1] != ',')
                abort();
            p = nl + 1;
        }
        if (lines != job.events)
            abort();
    }
    if (status == 0) {
        /* the array read, as jansson reads it, against the lines written */
        size_t body = size - (size_t)job.trailer_len - 1;
        char *arr = malloc(body + 3);
        arr[0] = '[';
        memcpy(arr + 1, data, body);
        arr[body + 1] = ']';
        json_t *src = json_loadb(arr, body + 2, JSON_DECODE_INT_AS_REAL, NULL);
        if (src && json_array_size(src) == job.events) {
            const char *p = text;
            for (size_t i = 0; i < job.events; i++) {
                const char *nl = memchr(p, '\n', (size_t)(text + n - p));
                json_t *want = json_array_get(src, i);
                bool overflow = false;
                json_t *got = object_of(p, (size_t)(nl - 1 - p), &overflow);
                if (!got && !overflow)
                    abort();
                if (got) {
                    if (!json_is_object(want) || json_object_size(got) != json_object_size(want))
                        abort();
                    const char *key;
                    json_t *v;
                    json_object_foreach(want, key, v) {
                        if (!json_object_get(got, key))
                            abort();
                    }
                    json_decref(got);
                }
                p = nl + 1;
            }
        } else if (src && json_array_size(src) != job.events) {
            /* a valid array of objects is read whole */
            size_t objects = 0;
            for (size_t i = 0; i < json_array_size(src); i++)
                objects += json_is_object(json_array_get(src, i));
            if (objects == json_array_size(src))
                abort();
        }
        json_decref(src);
        free(arr);
    }
    free(text);
    tp_merge_free(&job);
    close(in);
    close(out);
    return 0;
}
