/*
 * test_log.c - log lines: tp_log_escape keeps valid UTF-8 and writes every
 * control byte (C0, DEL, C1) and every byte outside valid UTF-8 as an
 * escape, truncating at a whole character; tp_log_write puts a line with
 * such a value in it out as one line.
 *
 * DESIGN
 * A table of inputs (with their length: NUL is a byte like any other) and
 * exact outputs; then one line written through TP_ERROR into a file that
 * stands in for stderr (each test runs in its own process: CK_FORK).
 */
#include "collector/common/log.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/tp_test.h"

#define C(in, out) { in, sizeof in - 1, out }   /* with its length: NUL is a byte too */
static const struct { const char *in; size_t n; const char *out; } cases[] = {
    C("plain text", "plain text"),
    C("a\nb\rc\td", "a\\x0ab\\x0dc\\x09d"),
    C("\x1b[31mred", "\\x1b[31mred"),
    C("nul\0x", "nul\\x00x"),
    C("del\x7f", "del\\x7f"),
    C("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
    C("c1 \xc2\x85 \xc2\x9b", "c1 \\xc2\\x85 \\xc2\\x9b"),     /* NEL, CSI */
    C("nbsp \xc2\xa0", "nbsp \xc2\xa0"),                       /* U+00A0 is text */
    C("bad \xff\xfe", "bad \\xff\\xfe"),
    C("lone \x80", "lone \\x80"),
    C("cut \xe2\x82", "cut \\xe2\\x82"),                       /* truncated sequence */
    C("overlong \xc0\xaf", "overlong \\xc0\\xaf"),
    C("overlong3 \xe0\x80\xaf", "overlong3 \\xe0\\x80\\xaf"),
    C("surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80"),
    C("too high \xf4\x90\x80\x80", "too high \\xf4\\x90\\x80\\x80"),
    C("max \xf4\x8f\xbf\xbf", "max \xf4\x8f\xbf\xbf"),
};

START_TEST(test_escape_table)
{
    char out[128];
    size_t n = tp_log_escape(cases[_i].in, cases[_i].n, out, sizeof out);
    ck_assert_str_eq(out, cases[_i].out);
    ck_assert_uint_eq(n, strlen(cases[_i].out));
}
END_TEST

START_TEST(test_escape_truncates_whole)
{
    char out[8];
    /* "a\n" -> "a\\x0a" (5), then the 4-byte emoji does not fit in 7 */
    ck_assert_uint_eq(tp_log_escape("a\n\xf0\x9f\x98\x80z", 7, out, sizeof out), 5);
    ck_assert_str_eq(out, "a\\x0a");
    /* an escape is never cut: "\x1b" needs 4 bytes, 3 are left */
    ck_assert_uint_eq(tp_log_escape("abcd\x1b", 5, out, sizeof out), 4);
    ck_assert_str_eq(out, "abcd");
    ck_assert_uint_eq(tp_log_escape("x", 1, out, 1), 0);
    ck_assert_str_eq(out, "");
    ck_assert_uint_eq(tp_log_escape("x", 1, out, 0), 0);
}
END_TEST

START_TEST(test_line_cannot_be_split)
{
    char root[64], path[128];
    tp_test_mkdtemp(root, sizeof root, "log");
    snprintf(path, sizeof path, "%s/err", root);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(dup2(fd, 2), 2);
    close(fd);
    tp_log_level = TP_LOG_WARN;
    TP_ERROR("unknown item \"%.40s\"", "x\ntrainprof: forged\x1b[31m\xff");
    TP_INFO("not at this level");
    size_t n = 0;
    char *got = tp_test_slurp(path, &n);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, "trainprof: error: unknown item "
                     "\"x\\x0atrainprof: forged\\x1b[31m\\xff\"\n");
    free(got);
    tp_test_rmtree(root);
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *t = tcase_create("log");
    tcase_add_loop_test(t, test_escape_table, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(t, test_escape_truncates_whole);
    tcase_add_test(t, test_line_cannot_be_split);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(log_suite());
}
