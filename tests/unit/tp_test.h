/*
 * tp_test.h - helpers shared by the Check unit tests (test code only).
 */
#ifndef TRAINPROF_TESTS_UNIT_TP_TEST_H
#define TRAINPROF_TESTS_UNIT_TP_TEST_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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
