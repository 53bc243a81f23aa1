/*
 * test_fuzz_found.c - every defect the fuzz harnesses (tests/fuzz/) found,
 * with the input that showed it, and the depth cap on TRAINPROF_METADATA.
 *
 * DESIGN
 * One test per finding, named after the harness, holding the input as
 * the fuzzer wrote it (the same bytes are in the harness's seed corpus,
 * tests/fuzz/corpus/, so `make fuzz` replays them too).  Each asserts the
 * property the harness checks, so that it fails on the code before the
 * fix whatever the sanitizers say.  fuzz_merge's findings (a raw line
 * break in a string, a key and its value over lines) are tests of the merge
 * engine, in test_merge_engine.c, which needs ISA-L.
 */
#include "collector/config/config.h"
#include "collector/record/torchop.h"
#include "tests/unit/tp_test.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fuzz_torchop: torch's sizes field with a leading zero was accepted and
 * pasted into the trace as it is ("[[01, 64]]"), which no JSON reader
 * accepts.  An accepted message's sizes must parse as JSON. */
START_TEST(test_torchop_sizes_leading_zero)
{
    static const char *const msgs[] = {
        "aten::addmm, seq = 12, op_id = 345, sizes = [[01, 64], [64, 128], []], "
        "input_op_ids = [(3,0), (4,1)]",
        "aten::mm, op_id = 1, sizes = [[-007]]",
        "aten::mm, op_id = 1, sizes = [[0, 00]]",
    };
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        struct tp_torch_op op;
        if (!tp_torch_op_parse(msgs[i], &op))
            continue;
        ck_assert_ptr_nonnull(op.sizes);
        json_t *j = json_loadb(op.sizes, op.sizes_len, 0, NULL);
        ck_assert_msg(j != NULL, "sizes \"%.*s\" accepted but not JSON", (int)op.sizes_len, op.sizes);
        json_decref(j);
    }
    /* what torch writes still parses, zeros and negative sizes included */
    struct tp_torch_op op;
    ck_assert_int_eq(tp_torch_op_parse("aten::mm, op_id = 1, sizes = [[0, -1], [10]]", &op), 1);
    ck_assert_uint_eq(op.sizes_len, strlen("[[0, -1], [10]]"));
}
END_TEST

static const char *meta_value;

static const char *meta_get(const char *name)
{
    return strcmp(name, "TRAINPROF_METADATA") == 0 ? meta_value : NULL;
}

/* {"a":{"a":...{}...}}, "depth" levels of objects. */
static char *nested(int depth)
{
    char *s = malloc((size_t)depth * 6 + 1);
    ck_assert_ptr_nonnull(s);
    size_t n = 0;
    for (int i = 0; i < depth - 1; i++)
        n += (size_t)sprintf(s + n, "{\"a\":");
    n += (size_t)sprintf(s + n, "{}");
    for (int i = 0; i < depth - 1; i++)
        s[n++] = '}';
    s[n] = '\0';
    return s;
}

/* Arrays inside objects count as levels as well. */
static char *nested_arrays(int depth)
{
    char *s = malloc((size_t)depth * 6 + 16);
    ck_assert_ptr_nonnull(s);
    size_t n = (size_t)sprintf(s, "{\"a\":");
    for (int i = 0; i < depth - 1; i++)
        s[n++] = '[';
    for (int i = 0; i < depth - 1; i++)
        s[n++] = ']';
    s[n++] = '}';
    s[n] = '\0';
    return s;
}

static int parse_metadata(struct tp_config *c, const char *value)
{
    const char *names[] = { NULL };
    meta_value = value;
    return tp_config_parse(c, meta_get, names);
}

/* TRAINPROF_METADATA nested 2,000 deep was accepted, and Python's json
 * (HTA, TensorBoard) cannot read the trace that carries it: beyond
 * TP_METADATA_MAX_DEPTH levels it is one error naming the variable, the
 * depth and the limit, and the trace gets no metadata. */
START_TEST(test_metadata_depth_cap)
{
    struct tp_config c;
    char *deep = nested(2000);
    ck_assert_int_eq(parse_metadata(&c, deep), 1);
    ck_assert_ptr_null(c.metadata);
    ck_assert_int_eq(c.n_messages, 1);
    ck_assert_msg(strstr(c.messages[0], "trainprof: error: TRAINPROF_METADATA=") == c.messages[0] &&
                      strstr(c.messages[0], "nested 2000 levels deep; at most 64 are accepted"),
                  "message: %s", c.messages[0]);
    ck_assert_ptr_null(strchr(c.messages[0], '\n'));
    tp_config_free(&c);
    free(deep);

    ck_assert_int_eq(TP_METADATA_MAX_DEPTH, 64);
    for (int arrays = 0; arrays < 2; arrays++) {
        char *at = arrays ? nested_arrays(TP_METADATA_MAX_DEPTH) : nested(TP_METADATA_MAX_DEPTH);
        char *over = arrays ? nested_arrays(TP_METADATA_MAX_DEPTH + 1) : nested(TP_METADATA_MAX_DEPTH + 1);
        ck_assert_int_eq(parse_metadata(&c, at), 0);
        ck_assert_ptr_nonnull(c.metadata);
        tp_config_free(&c);
        ck_assert_int_eq(parse_metadata(&c, over), 1);
        ck_assert_ptr_null(c.metadata);
        ck_assert_ptr_nonnull(strstr(c.messages[0], "nested 65 levels deep"));
        tp_config_free(&c);
        free(at);
        free(over);
    }
}
END_TEST

static Suite *fuzz_found_suite(void)
{
    Suite *s = suite_create("fuzz_found");
    TCase *t = tcase_create("fuzz_found");
    tcase_add_test(t, test_torchop_sizes_leading_zero);
    tcase_add_test(t, test_metadata_depth_cap);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(fuzz_found_suite());
}
