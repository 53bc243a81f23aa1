/*
 * tp_test.h - helpers shared by the Check unit tests (test code only).
 */
#ifndef TRAINPROF_TESTS_UNIT_TP_TEST_H
#define TRAINPROF_TESTS_UNIT_TP_TEST_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* tp_test_mkdtemp - make a fresh folder /tmp/tp-<tag>-XXXXXX in "buf". */
static inline void tp_test_mkdtemp(char *buf, size_t bufsz, const char *tag)
{
    snprintf(buf, bufsz, "/tmp/tp-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

static inline int tp_test_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

/* tp_test_rmtree - remove folder "root" and everything below it; clears it. */
static inline void tp_test_rmtree(char *root)
{
    if (root[0])
        nftw(root, tp_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    root[0] = '\0';
}

/*
 * tp_test_slurp - the whole file "path" as a NUL-terminated malloc'ed
 * string (free it), its length in "*out_n" if set; NULL if it cannot be
 * opened.
 */
static inline char *tp_test_slurp(const char *path, size_t *out_n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)(n > 0 ? n : 0) + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    if (out_n)
        *out_n = (size_t)n;
    return b;
}

/*
 * tp_test_gunzip_one - inflate exactly one gzip member of "z" ("zn" bytes);
 * fails the test if bytes follow it (a second member: catapult reads one).
 * Returns a NUL-terminated malloc'ed buffer; its length in "*out_n" if set.
 */
static inline char *tp_test_gunzip_one(const char *z, size_t zn, size_t *out_n)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(inflateInit2(&s, 15 + 16), Z_OK);
    size_t cap = zn * 8 + 65536, n = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    s.next_in = (unsigned char *)z;
    s.avail_in = (unsigned)zn;
    int rc;
    do {
        if (cap - n < 65536) {
            cap *= 2;
            out = realloc(out, cap);
            ck_assert_ptr_nonnull(out);
        }
        s.next_out = (unsigned char *)out + n;
        s.avail_out = (unsigned)(cap - n - 1);
        rc = inflate(&s, Z_NO_FLUSH);
        ck_assert_msg(rc == Z_OK || rc == Z_STREAM_END, "inflate: %d", rc);
        n = (size_t)((char *)s.next_out - out);
    } while (rc != Z_STREAM_END);
    ck_assert_msg(s.avail_in == 0, "%u bytes after the first gzip member", s.avail_in);
    inflateEnd(&s);
    out[n] = '\0';
    if (out_n)
        *out_n = n;
    return out;
}

/* tp_test_run - run suite "s"; the process exit status for main(). */
static inline int tp_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
