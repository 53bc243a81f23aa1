/*
 * test_format.c - format strings (collector/common/format.c): expansion, literal braces and
 * every error (unknown variable, unterminated or lone brace, overflow).
 *
 * DESIGN
 * One table of format strings with either the expected expansion or the
 * expected reason; each row is checked through tp_format_expand and
 * tp_format_check, which must agree on what is valid.  A second table
 * gives TRAINPROF_EXEC commands and the exact quoting of {path} in them.
 */
#include "collector/common/format.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include "tests/unit/tp_test.h"

static const struct tp_format_vars vars = {
    .run_name = "job", .hostname = "node1", .rank = 3, .local_rank = 1, .world_size = 8,
    .local_world_size = 4, .node_rank = 1, .pid = 1234, .batch = 5,
};

struct fmt_case {
    const char *fmt;
    const char *out;     /* NULL: an error */
    const char *reason;  /* substring of the error */
};

static const struct fmt_case cases[] = {
    { "", "", NULL },
    { "plain/path.json", "plain/path.json", NULL },
    { "{run_name}/traces", "job/traces", NULL },
    { "rank{rank}.{batch}.pt.trace.json", "rank3.5.pt.trace.json", NULL },
    { "{run_name}{rank}{local_rank}{world_size}{local_world_size}{node_rank}{batch}{pid}{hostname}",
      "job3184151234node1", NULL },
    { "{rank}{rank}", "33", NULL },
    { "{{rank}}", "{rank}", NULL },
    { "a{{b", "a{b", NULL },
    { "a}}b", "a}b", NULL },
    { "{{{rank}}}", "{3}", NULL },
    { "{{}}", "{}", NULL },
    { "{runname}", NULL, "unknown variable {runname}" },
    { "{RANK}", NULL, "unknown variable {RANK}" },
    /* Python's integer padding, "[0][width][d]", and nothing else of its specs */
    { "rank{rank}.{batch:08d}.pt.trace.json", "rank3.00000005.pt.trace.json", NULL },
    { "{rank:02d}|{batch:08}|{pid:3}|{pid:d}|{batch:1}", "03|00000005|1234|1234|5", NULL },
    { "{world_size:4d}", "   8", NULL },
    { "{node_rank:032d}", "00000000000000000000000000000001", NULL },
    { "{node_rank:033d}", NULL, "WIDTH 1 to 32" },
    { "{batch:99999999999999999999}", NULL, "WIDTH 1 to 32" },
    { "{rank:}", NULL, "format spec \"\" of {rank} not accepted" },
    { "{rank:0}", NULL, "not accepted" },
    { "{rank:x}", NULL, "not accepted" },
    { "{rank:08x}", NULL, "not accepted" },
    { "{rank:>8}", NULL, "not accepted" },
    { "{rank:8.2f}", NULL, "not accepted" },
    { "{rank:08dd}", NULL, "not accepted" },
    { "{run_name:08d}", NULL, "{run_name} takes no format spec" },
    { "{hostname:10}", NULL, "{hostname} takes no format spec" },
    { "{rnak:02d}", NULL, "unknown variable {rnak}" },
    { "{}", NULL, "unknown variable {}" },
    { "{ rank }", NULL, "unknown variable { rank }" },
    { "{epoch}", NULL, "accepted: {run_name}, {rank}, {local_rank}, {world_size}, "
      "{local_world_size}, {node_rank}, {batch}, {pid}, {hostname}" },
    { "{path}", NULL, "unknown variable {path}" },
    { "{rank", NULL, "unterminated '{' at offset 0" },
    { "x/{", NULL, "unterminated '{' at offset 2" },
    { "{ra{rank}", NULL, "unterminated '{' at offset 0" },
    { "{{{rank}", "{3", NULL },
    { "{{{rank", NULL, "unterminated '{' at offset 2" },
    { "rank}", NULL, "single '}' at offset 4" },
    { "}", NULL, "single '}'" },
    { "{rank}}", NULL, "single '}'" },
};

START_TEST(test_expand_table)
{
    const struct fmt_case *c = &cases[_i];
    char out[256], err[512] = "";
    int rc = tp_format_expand(c->fmt, &vars, out, sizeof out, err, sizeof err);
    if (c->out) {
        ck_assert_msg(rc == 0, "\"%s\": %s", c->fmt, err);
        ck_assert_str_eq(out, c->out);
    } else {
        ck_assert_msg(rc == -1, "\"%s\" expanded to \"%s\"", c->fmt, out);
        ck_assert_msg(strstr(err, c->reason) != NULL, "\"%s\": reason \"%s\", want \"%s\"",
                      c->fmt, err, c->reason);
        ck_assert_str_eq(out, "");
    }
}
END_TEST

START_TEST(test_check_table)
{
    const struct fmt_case *c = &cases[_i];
    char err[512] = "";
    int rc = tp_format_check(c->fmt, err, sizeof err);
    ck_assert_int_eq(rc, c->out ? 0 : -1);
    if (!c->out)
        ck_assert_msg(strstr(err, c->reason) != NULL, "\"%s\": %s", c->fmt, err);
}
END_TEST

START_TEST(test_path_only_for_exec)
{
    char err[512] = "";
    ck_assert_int_eq(tp_format_check_exec("cp {path} /b/{run_name}/", err, sizeof err), 0);
    ck_assert_int_eq(tp_format_check_exec("cp {file}", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "{hostname}, {path}"));
    ck_assert_int_eq(tp_format_check("cp {path}", err, sizeof err), -1);

    struct tp_format_vars v = vars;
    char out[128];
    ck_assert_int_eq(tp_format_expand("cp {path}", &v, out, sizeof out, err, sizeof err), -1);
    v.path = "/t/rank3.5.json.gz";
    ck_assert_int_eq(tp_format_expand("cp {path} {rank}", &v, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "cp /t/rank3.5.json.gz 3");
    ck_assert_int_eq(tp_format_check_exec("cp {path:08d}", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "{path} takes no format spec"));
    /* a space-padded number is one word to the shell */
    ck_assert_int_eq(tp_format_expand_sh("echo {world_size:4d} {batch:03d}", &v, out, sizeof out,
                                         err, sizeof err), 0);
    ck_assert_str_eq(out, "echo '   8' 005");
}
END_TEST

START_TEST(test_overflow)
{
    char out[16], err[256];
    /* "rank3.5.json" is 12 bytes: fits 13, not 12. */
    ck_assert_int_eq(tp_format_expand("rank{rank}.{batch}.json", &vars, out, 13, err, sizeof err), 0);
    ck_assert_str_eq(out, "rank3.5.json");
    ck_assert_int_eq(tp_format_expand("rank{rank}.{batch}.json", &vars, out, 12, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "longer than 11 bytes"));
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(tp_format_expand("{hostname}{hostname}{hostname}{hostname}", &vars, out,
                                      sizeof out, err, sizeof err), -1);
    ck_assert_int_eq(tp_format_expand("x", &vars, out, 1, err, sizeof err), -1);
    ck_assert_int_eq(tp_format_expand("", &vars, out, 1, err, sizeof err), 0);
}
END_TEST

START_TEST(test_batch_unknown)
{
    struct tp_format_vars v = vars;
    v.batch = -1;
    char out[128], err[256];
    ck_assert_int_eq(tp_format_expand("{run_name}/traces", &v, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "job/traces");
    ck_assert_int_eq(tp_format_expand("b{batch}", &v, out, sizeof out, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "{batch}"));
    ck_assert_int_eq(tp_format_expand("b{batch:08d}", &v, out, sizeof out, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "{batch}"));
    v.batch = 12345678901LL;
    ck_assert_int_eq(tp_format_expand("b{batch}", &v, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "b12345678901");
    /* wider than the width: the whole number, as Python writes it */
    ck_assert_int_eq(tp_format_expand("b{batch:08d}", &v, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "b12345678901");
    v.batch = INT64_MAX;
    ck_assert_int_eq(tp_format_expand("{batch:032d}", &v, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "00000000000009223372036854775807");
}
END_TEST

/* A flight recorder's dump names itself through {batch}: its text in
 * place of the number, whatever the width asked for. */
START_TEST(test_batch_text)
{
    struct tp_format_vars v = vars;
    v.batch_text = "flight-slow-step.41";
    char out[128], err[256];
    ck_assert_int_eq(tp_format_expand("rank{rank}.{batch:08d}.pt.trace.json", &v, out, sizeof out,
                                      err, sizeof err), 0);
    ck_assert_str_eq(out, "rank3.flight-slow-step.41.pt.trace.json");
    ck_assert_int_eq(tp_format_expand("{batch}-{batch:3}", &v, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "flight-slow-step.41-flight-slow-step.41");
    v.batch_text = NULL;
    ck_assert_int_eq(tp_format_expand("{batch:08d}", &v, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "00000005");
}
END_TEST

START_TEST(test_values_and_nulls)
{
    struct tp_format_vars v = vars;
    v.rank = -7;
    v.run_name = NULL;
    char out[128];
    ck_assert_int_eq(tp_format_expand("[{run_name}]{rank}", &v, out, sizeof out, NULL, 0), 0);
    ck_assert_str_eq(out, "[]-7");
    ck_assert_int_eq(tp_format_expand("{bad}", &v, out, sizeof out, NULL, 0), -1);
    ck_assert_int_eq(tp_format_check(NULL, NULL, 0), -1);
    ck_assert_int_eq(tp_format_expand("x", NULL, out, sizeof out, NULL, 0), -1);
}
END_TEST

START_TEST(test_long_unknown_name_truncated)
{
    char fmt[400], err[256];
    fmt[0] = '{';
    memset(fmt + 1, 'z', 300);
    fmt[301] = '}';
    fmt[302] = '\0';
    ck_assert_int_eq(tp_format_check(fmt, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "...}"));
    ck_assert_uint_lt(strlen(err), sizeof err);
}
END_TEST

/* TRAINPROF_EXEC: each value quoted for where it stands in the command. */
static const struct { const char *fmt, *path, *out; } sh_cases[] = {
    { "cp {path} /x", "/a/b.json.gz", "cp /a/b.json.gz /x" },        /* plain: as it is */
    { "cp {path} /x", "a b", "cp 'a b' /x" },
    { "cp {path} /x", "", "cp '' /x" },
    { "cp {path} /x", "it's", "cp 'it'\\''s' /x" },
    { "cp '{path}' /x", "$(id) it's", "cp '$(id) it'\\''s' /x" },
    { "cp \"{path}\" /x", "$(id)", "cp \"\"'$(id)'\"\" /x" },
    { "cp \"a/{path}.gz\"", "`id`", "cp \"a/\"'`id`'\".gz\"" },
    { "echo \"$(basename {path})\"", "a;b", "echo \"$(basename 'a;b')\"" },
    { "echo \"$(cat '{path}')\"", "a;b", "echo \"$(cat 'a;b')\"" },
    { "echo `cat {path}`", "a b", "echo `cat 'a b'`" },
    { "echo $((1+2)) {path}", "a b", "echo $((1+2)) 'a b'" },
    { "echo \\' {path}", "a b", "echo \\' 'a b'" },         /* \' is no quote */
    { "echo \"\\\"\" {path}", "a b", "echo \"\\\"\" 'a b'" },  /* nor is "\"" */
    { "echo # don't\n{path}", "a b", "echo # don't\n'a b'" },  /* nor a comment's */
    { "echo $# {path}", "a b", "echo $# 'a b'" },
    { "x=a#'{path}'", "a b", "x=a#'a b'" },                 /* # inside a word */
    { "case {path} in *.gz) echo {path};; esac", "a b",
      "case 'a b' in *.gz) echo 'a b';; esac" },
};

START_TEST(test_expand_sh_table)
{
    struct tp_format_vars v = vars;
    v.path = sh_cases[_i].path;
    char out[256], err[256];
    ck_assert_int_eq(tp_format_expand_sh(sh_cases[_i].fmt, &v, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, sh_cases[_i].out);
}
END_TEST

/* A relative folder is made absolute under the base (the working directory
 * at activation); an absolute one, or no base, is left as expanded. */
START_TEST(test_expand_at)
{
    static const struct { const char *fmt, *base, *out; } at[] = {
        { "{run_name}/traces", "/work/d", "/work/d/job/traces" },
        { "{run_name}/traces", "/work/d/", "/work/d/job/traces" },
        { "./{run_name}", "/w", "/w/job" },
        { ".//./x", "/w", "/w/x" },
        { "", "/w", "/w" },
        { ".", "/w", "/w" },
        { "x", "/", "/x" },
        { "", "/", "/" },
        { "/abs/{rank}", "/w", "/abs/3" },
        { "rel/{batch}", NULL, "rel/5" },
        { "rel", "", "rel" },
        { "rel", "not/absolute", "rel" },
    };
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        char out[64], err[256];
        ck_assert_int_eq(tp_format_expand_at(at[i].fmt, &vars, at[i].base, out, sizeof out,
                                             err, sizeof err), 0);
        ck_assert_str_eq(out, at[i].out);
    }
    char small[12], err[256];
    ck_assert_int_eq(tp_format_expand_at("traces", &vars, "/work/dir", small, sizeof small, err,
                                         sizeof err), -1);
    ck_assert_str_eq(small, "");
    ck_assert_ptr_nonnull(strstr(err, "working directory at activation"));
    ck_assert_int_eq(tp_format_expand_at("/ok", &vars, "/a/very/long/base/dir", small,
                                         sizeof small, err, sizeof err), 0);
    ck_assert_int_eq(tp_format_expand_at("{bad}", &vars, "/w", small, sizeof small, err,
                                         sizeof err), -1);
}
END_TEST

START_TEST(test_expand_sh_too_deep)
{
    struct tp_format_vars v = vars;
    v.path = "p";
    char fmt[128] = "", out[256], err[256];
    for (int i = 0; i < 20; i++)
        strcat(fmt, "$(");
    ck_assert_int_eq(tp_format_expand_sh(fmt, &v, out, sizeof out, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "nested"));
    ck_assert_int_eq(tp_format_expand(fmt, &v, out, sizeof out, err, sizeof err), 0);
}
END_TEST

static Suite *format_suite(void)
{
    Suite *s = suite_create("format");
    TCase *t = tcase_create("format");
    size_t n = sizeof cases / sizeof cases[0];
    tcase_add_loop_test(t, test_expand_table, 0, (int)n);
    tcase_add_loop_test(t, test_check_table, 0, (int)n);
    tcase_add_test(t, test_path_only_for_exec);
    tcase_add_test(t, test_overflow);
    tcase_add_test(t, test_batch_unknown);
    tcase_add_test(t, test_batch_text);
    tcase_add_test(t, test_values_and_nulls);
    tcase_add_test(t, test_long_unknown_name_truncated);
    tcase_add_loop_test(t, test_expand_sh_table, 0, (int)(sizeof sh_cases / sizeof sh_cases[0]));
    tcase_add_test(t, test_expand_sh_too_deep);
    tcase_add_test(t, test_expand_at);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(format_suite());
}
