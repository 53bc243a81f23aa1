/*
 * fuzz_format.c - libFuzzer harness: the format-string expander
 * (collector/common/format.c: tp_format_check, tp_format_check_exec,
 * tp_format_expand) that names folders and files and builds TRAINPROF_EXEC
 * commands.
 *
 * DESIGN
 * Input: byte 0 picks the small output size, bytes 1..8 the numbers
 * (rank, local_rank, world_size, local_world_size, node_rank, pid, batch),
 * then NUL-separated run_name, hostname, path and the format string.
 * Checks beyond the sanitizers, from format.h's contract:
 * - a string tp_format_check accepts, tp_format_check_exec accepts;
 * - with {path} known and room enough, expansion succeeds exactly when
 *   tp_format_check_exec accepts;
 * - into a small buffer the result is either the same text or an error
 *   whose reason is the length (never a silently cut path), and the
 *   buffer always holds a NUL-terminated string;
 * - a format string without '{' or '}' expands to itself.
 */
#include "collector/common/format.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *next_field(const char **p, const char *end)
{
    const char *start = *p;
    const char *nul = memchr(start, '\0', (size_t)(end - start));
    *p = nul ? nul + 1 : end;
    return start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    /* a NUL-terminated copy, so that each field is a C string */
    char *copy = malloc(size + 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    copy[size] = '\0';
    const char *p = copy + 9, *end = copy + size;
    struct tp_format_vars v = {
        .rank = (int8_t)data[1] * 1000003, .local_rank = (int8_t)data[2],
        .world_size = (int8_t)data[3] * 65537, .local_world_size = data[4],
        .node_rank = (int8_t)data[5], .pid = data[6] << 23,
        .batch = data[7] == 127 ? INT64_MAX : (int64_t)(int8_t)data[7] * INT64_C(1000000007),
    };
    v.run_name = next_field(&p, end);
    v.hostname = p < end ? next_field(&p, end) : NULL;
    v.path = p < end ? next_field(&p, end) : "";
    const char *fmt = p < end ? p : "";

    char err[256];
    int ok_plain = tp_format_check(fmt, err, sizeof err) == 0;
    int ok_exec = tp_format_check_exec(fmt, err, sizeof err) == 0;
    if (ok_plain && !ok_exec)
        abort();

    /* room enough: every byte of fmt could become the longest value */
    size_t longest = 24 + strlen(v.run_name) + (v.hostname ? strlen(v.hostname) : 0) + strlen(v.path);
    size_t bigsz = strlen(fmt) * longest + 1;
    char *big = malloc(bigsz);
    if (!big)
        abort();
    struct tp_format_vars known = v;
    if (known.batch < 0)
        known.batch = -known.batch;
    int ok_big = tp_format_expand(fmt, &known, big, bigsz, err, sizeof err) == 0;
    if (ok_big != ok_exec) {
        fprintf(stderr, "check_exec says %d, expansion says %d (%s)\n", ok_exec, ok_big, err);
        abort();
    }
    if (!strpbrk(fmt, "{}") && (!ok_big || strcmp(big, fmt) != 0))
        abort();

    size_t smallsz = data[0] ? data[0] : 1;
    char small[256];
    err[0] = '\0';
    int ok_small = tp_format_expand(fmt, &known, small, smallsz, err, sizeof err) == 0;
    if (!memchr(small, '\0', smallsz))
        abort();
    if (ok_small && (!ok_big || strcmp(small, big) != 0))
        abort();
    if (!ok_small && ok_big && (strlen(big) < smallsz || !strstr(err, "longer than"))) {
        fprintf(stderr, "\"%s\" fits in %zu bytes but: %s\n", big, smallsz, err);
        abort();
    }

    /* folder validation: {batch} and {path} unknown; only no crash */
    v.batch = -1;
    v.path = NULL;
    tp_format_expand(fmt, &v, small, sizeof small, err, sizeof err);
    tp_format_expand(fmt, &v, small, sizeof small, NULL, 0);
    free(big);
    free(copy);
    return 0;
}
