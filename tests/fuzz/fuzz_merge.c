/*
 * fuzz_merge.c - libFuzzer harness: the engine of `trainprof merge`
 * (scripts/trainprof_merge.c, included), which reads other processes'
 * traces: any bytes as the text of an event array.
 *
 * DESIGN
 * The input is written to a memfd and read by tp_merge_events as a plain
 * trace from its first byte (a gzip input exercises ISA-L's inflate, not
 * our code), with a slot, a flow-id suffix and a ts shift taken from the
 * input's size, and metadata lines handed back unchanged.  Whatever the
 * bytes: the engine returns one of its three statuses with a one-line
 * error, a resume offset inside the input, one output line per event
 * counted, each ending in ",\n"; and every output line whose input line
 * was a JSON object is itself a JSON object with the same keys (jansson
 * parses both), so that the rewrite never breaks an event it was given
 * whole.
 */
#include "scripts/trainprof_merge.c"

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

/* The next input line as the engine takes it: [*a, end) without the
 * trailing blanks and comma; *a moves to the line after. */
static void next_line(const char **a, const char *e, const char **from, const char **to)
{
    const char *nl = memchr(*a, '\n', (size_t)(e - *a));
    if (!nl)
        nl = e;
    const char *t = nl;
    while (t > *a && (t[-1] == ' ' || t[-1] == '\t' || t[-1] == '\r'))
        t--;
    if (t > *a && t[-1] == ',')
        t--;
    *from = *a;
    *to = t;
    *a = nl < e ? nl + 1 : e;
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
        /* lines: one per event, each ",\n"-ended; the keys kept */
        const char *a = (const char *)data, *e = a + size;
        while (a < e && (*a == ' ' || *a == '\t' || *a == '\r' || *a == '\n'))
            a++;
        size_t lines = 0;
        for (const char *p = text; p < text + n;) {
            const char *nl = memchr(p, '\n', (size_t)(text + n - p));
            if (!nl || nl - p < 1 || nl[-1] != ',')
                abort();
            const char *from, *to;
            next_line(&a, e, &from, &to);
            json_t *src = object_of(from, (size_t)(to - from), NULL);
            bool overflow = false;
            json_t *dst = src ? object_of(p, (size_t)(nl - 1 - p), &overflow) : NULL;
            if (src && !dst && !overflow)
                abort();
            if (dst) {
                if (json_object_size(dst) != json_object_size(src))
                    abort();
                const char *key;
                json_t *v;
                json_object_foreach(src, key, v) {
                    if (!json_object_get(dst, key))
                        abort();
                }
                json_decref(dst);
            }
            json_decref(src);
            lines++;
            p = nl + 1;
        }
        if (lines != job.events)
            abort();
    }
    free(text);
    tp_merge_free(&job);
    close(in);
    close(out);
    return 0;
}
