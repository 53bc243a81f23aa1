/*
 * test_output.c - atomic output files: suffix placement, never replacing
 * with TRAINPROF_OVERWRITE=0 (also when another writer takes the name
 * between open and commit), replacing with 1, folders made as needed, and
 * nothing half-written left after a failure, with one error line; links
 * planted at the temporary or final names never written through, and the
 * temporary files of dead writers removed (only those).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handlers/output.h"
#include "tests/unit/tp_test.h"

static char root[64];

static void make_root(void)
{
    tp_test_mkdtemp(root, sizeof root, "output");
}

static void cleanup(void)
{
    tp_test_rmtree(root);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Number of entries in "dir", and whether any ends in ".tmp". */
static int count_entries(const char *dir, int *tmp)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    *tmp = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        size_t l = strlen(e->d_name);
        if (l >= 4 && !strcmp(e->d_name + l - 4, ".tmp"))
            *tmp = 1;
        n++;
    }
    closedir(d);
    return n;
}

static int write_file(const char *path, size_t stem, int overwrite, const char *text,
                      char *final, size_t n)
{
    struct tp_output o;
    if (tp_output_open(&o, path, stem, overwrite) != 0)
        return -1;
    ck_assert_int_eq(write(o.fd, text, strlen(text)), (ssize_t)strlen(text));
    int rc = tp_output_commit(&o);
    if (rc == 0)
        snprintf(final, n, "%s", o.final);
    return rc;
}

/* Runs fn with stderr captured; returns what it printed. */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    static char buf[4096];
    char path[] = "/tmp/tp-stderr-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

START_TEST(test_suffix_pos)
{
    static const struct { const char *path; const char *before; } c[] = {
        { "d/rank0.5.pt.trace.json.gz", ".pt.trace.json.gz" },
        { "d/rank0.5.pt.trace.json", ".pt.trace.json" },
        { "rank0.pt.trace.json", ".pt.trace.json" },
        { "d/trace.json.gz", ".json.gz" },
        { "d/trace.json", ".json" },
        { "d/a.b.txt", ".txt" },
        { "d/noext", "" },
        { "d.x/noext", "" },
        { "d/.hidden", "" },
        { "d/x.gz", ".gz" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        size_t pos = tp_output_suffix_pos(c[i].path);
        ck_assert_msg(strcmp(c[i].path + pos, c[i].before) == 0, "%s: suffix goes before \"%s\"",
                      c[i].path, c[i].path + pos);
    }
}
END_TEST

START_TEST(test_report_path)
{
    char out[256], base[256];
    ck_assert_int_eq(tp_output_trace_base(base, sizeof base, "/a/b/rank0.5.pt.trace.json.gz"), 16);
    ck_assert_str_eq(base, "rank0.5.pt.trace");
    ck_assert_int_eq(tp_output_trace_base(base, sizeof base, "rank1.pt.trace.json"), 14);
    ck_assert_str_eq(base, "rank1.pt.trace");
    ck_assert_int_eq(tp_output_trace_base(base, 5, "rank1.pt.trace.json"), -1);

    int stem = tp_output_report_path(out, sizeof out, "run/reports", "run/traces/rank0.5.pt.trace.json.gz",
                                     "summary.txt");
    ck_assert_str_eq(out, "run/reports/rank0.5.pt.trace.summary.txt");
    ck_assert_int_eq(stem, (int)strlen("run/reports/rank0.5.pt.trace"));
    stem = tp_output_report_path(out, sizeof out, "rep/", "t.json", "summary.txt");
    ck_assert_str_eq(out, "rep/t.summary.txt");
    ck_assert_int_eq(tp_output_report_path(out, sizeof out, "rep", "", "summary.txt"), -1);
    ck_assert_int_eq(tp_output_report_path(out, 10, "rep", "x/long-name.json", "summary.txt"), -1);
}
END_TEST

START_TEST(test_create_and_mkdirs)
{
    make_root();
    char path[256], final[TP_PATH_MAX];
    snprintf(path, sizeof path, "%s/a/b//c/rank0.5.pt.trace.json.gz", root);
    ck_assert_int_eq(write_file(path, 0, 0, "one", final, sizeof final), 0);
    ck_assert_str_eq(final, path);
    ck_assert_str_eq(slurp(path), "one");
    char dir[256];
    snprintf(dir, sizeof dir, "%s/a/b/c", root);
    int tmp;
    ck_assert_int_eq(count_entries(dir, &tmp), 1);
    ck_assert_int_eq(tmp, 0);
    ck_assert_int_eq(tp_output_mkdirs(dir), 0);
}
END_TEST

static char warn_final[3][TP_PATH_MAX];
static const char *warn_path;

static void three_writes(void *arg)
{
    (void)arg;
    ck_assert_int_eq(write_file(warn_path, 0, 0, "first", warn_final[0], TP_PATH_MAX), 0);
    ck_assert_int_eq(write_file(warn_path, 0, 0, "second", warn_final[1], TP_PATH_MAX), 0);
    ck_assert_int_eq(write_file(warn_path, 0, 0, "third", warn_final[2], TP_PATH_MAX), 0);
}

START_TEST(test_no_replace_suffixes)
{
    make_root();
    char path[256], p1[256], p2[256];
    snprintf(path, sizeof path, "%s/rank0.5.pt.trace.json.gz", root);
    snprintf(p1, sizeof p1, "%s/rank0.5-1.pt.trace.json.gz", root);
    snprintf(p2, sizeof p2, "%s/rank0.5-2.pt.trace.json.gz", root);
    warn_path = path;
    char *err = capture_stderr(three_writes, NULL);
    ck_assert_str_eq(warn_final[0], path);
    ck_assert_str_eq(warn_final[1], p1);
    ck_assert_str_eq(warn_final[2], p2);
    ck_assert_str_eq(slurp(path), "first");
    ck_assert_str_eq(slurp(p1), "second");
    ck_assert_str_eq(slurp(p2), "third");
    ck_assert_int_eq(count_lines(err), 2);
    ck_assert_ptr_nonnull(strstr(err, "trainprof: warning: "));
    ck_assert_ptr_nonnull(strstr(err, p2));
    int tmp;
    ck_assert_int_eq(count_entries(root, &tmp), 3);
    ck_assert_int_eq(tmp, 0);
}
END_TEST

START_TEST(test_no_replace_report_stem)
{
    make_root();
    char path[256], final[TP_PATH_MAX], expect[256];
    int stem = tp_output_report_path(path, sizeof path, root, "x/rank0.5.pt.trace.json.gz", "summary.txt");
    ck_assert_int_gt(stem, 0);
    ck_assert_int_eq(write_file(path, (size_t)stem, 0, "a", final, sizeof final), 0);
    ck_assert_int_eq(write_file(path, (size_t)stem, 0, "b", final, sizeof final), 0);
    snprintf(expect, sizeof expect, "%s/rank0.5.pt.trace-1.summary.txt", root);
    ck_assert_str_eq(final, expect);
    ck_assert_str_eq(slurp(expect), "b");
    ck_assert_str_eq(slurp(path), "a");

    char plain[256];
    snprintf(plain, sizeof plain, "%s/out.json.gz", root);
    ck_assert_int_eq(write_file(plain, 0, 0, "a", final, sizeof final), 0);
    ck_assert_int_eq(write_file(plain, 0, 0, "b", final, sizeof final), 0);
    snprintf(expect, sizeof expect, "%s/out-1.json.gz", root);
    ck_assert_str_eq(final, expect);
}
END_TEST

START_TEST(test_race_between_open_and_commit)
{
    make_root();
    char path[256], p1[256];
    snprintf(path, sizeof path, "%s/rank0.pt.trace.json", root);
    snprintf(p1, sizeof p1, "%s/rank0-1.pt.trace.json", root);
    struct tp_output a, b;
    ck_assert_int_eq(tp_output_open(&a, path, 0, 0), 0);
    ck_assert_int_eq(tp_output_open(&b, path, 0, 0), 0);
    ck_assert_str_eq(a.final, path);
    ck_assert_str_eq(b.final, path);
    ck_assert_str_ne(a.tmp, b.tmp);
    ck_assert_int_eq(write(a.fd, "A", 1), 1);
    ck_assert_int_eq(write(b.fd, "B", 1), 1);
    ck_assert_int_eq(tp_output_commit(&a), 0);
    ck_assert_int_eq(tp_output_commit(&b), 0);
    ck_assert_str_eq(b.final, p1);
    ck_assert_str_eq(slurp(path), "A");
    ck_assert_str_eq(slurp(p1), "B");
    int tmp;
    ck_assert_int_eq(count_entries(root, &tmp), 2);
    ck_assert_int_eq(tmp, 0);
}
END_TEST

START_TEST(test_overwrite_replaces)
{
    make_root();
    char path[256], final[TP_PATH_MAX];
    snprintf(path, sizeof path, "%s/r.summary.txt", root);
    put(path, "old");
    ck_assert_int_eq(write_file(path, 0, 1, "new", final, sizeof final), 0);
    ck_assert_str_eq(final, path);
    ck_assert_str_eq(slurp(path), "new");
    int tmp;
    ck_assert_int_eq(count_entries(root, &tmp), 1);
    ck_assert_int_eq(tmp, 0);
}
END_TEST

static const char *fail_path;
static int fail_rc;

static void open_fails(void *arg)
{
    (void)arg;
    struct tp_output o;
    fail_rc = tp_output_open(&o, fail_path, 0, 0);
}

START_TEST(test_unwritable_folder)
{
    make_root();
    char file[128], path[256];
    snprintf(file, sizeof file, "%s/plainfile", root);
    put(file, "x");
    snprintf(path, sizeof path, "%s/sub/trace.json", file);
    fail_path = path;
    char *err = capture_stderr(open_fails, NULL);
    ck_assert_int_eq(fail_rc, -1);
    ck_assert_int_eq(count_lines(err), 1);
    ck_assert_ptr_nonnull(strstr(err, "trainprof: error: "));
    ck_assert_ptr_nonnull(strstr(err, file));
    ck_assert_ptr_nonnull(strstr(err, strerror(ENOTDIR)));
    int tmp;
    ck_assert_int_eq(count_entries(root, &tmp), 1);
}
END_TEST

static struct tp_output disk_full;

static void commit_after_enospc(void *arg)
{
    (void)arg;
    tp_output_abort(&disk_full, ENOSPC);
}

START_TEST(test_disk_full_leaves_nothing)
{
    make_root();
    char path[256];
    snprintf(path, sizeof path, "%s/t/rank0.pt.trace.json.gz", root);
    ck_assert_int_eq(tp_output_open(&disk_full, path, 0, 0), 0);
    int full = open("/dev/full", O_WRONLY);
    ck_assert_int_ge(full, 0);
    dup2(full, disk_full.fd);
    close(full);
    ck_assert_int_eq(write(disk_full.fd, "x", 1), -1);
    ck_assert_int_eq(errno, ENOSPC);
    char *err = capture_stderr(commit_after_enospc, NULL);
    ck_assert_int_eq(count_lines(err), 1);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_nonnull(strstr(err, strerror(ENOSPC)));
    char dir[256];
    snprintf(dir, sizeof dir, "%s/t", root);
    int tmp;
    ck_assert_int_eq(count_entries(dir, &tmp), 0);
}
END_TEST

START_TEST(test_stale_tmp)
{
    make_root();
    char path[256], tmp_path[300], final[TP_PATH_MAX];
    snprintf(path, sizeof path, "%s/x.json", root);
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", path);
    put(tmp_path, "stale");
    ck_assert_int_eq(write_file(path, 0, 0, "fresh", final, sizeof final), 0);
    ck_assert_str_eq(final, path);
    ck_assert_str_eq(slurp(path), "fresh");
    ck_assert_str_eq(slurp(tmp_path), "stale");
}
END_TEST

/* "<path>.<host>.<pid>[-k].tmp" */
static void tmp_name(char *out, size_t n, const char *path, long pid, int k)
{
    if (k)
        snprintf(out, n, "%s.%s.%ld-%d.tmp", path, tp_output_tmp_host(), pid, k);
    else
        snprintf(out, n, "%s.%s.%ld.tmp", path, tp_output_tmp_host(), pid);
}

static int is_link(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

START_TEST(test_planted_links_not_followed)
{
    make_root();
    char path[256], victim[256], link_path[400], final[TP_PATH_MAX];
    snprintf(path, sizeof path, "%s/rank0.3.pt.trace.json.gz", root);
    snprintf(victim, sizeof victim, "%s/victim", root);
    put(victim, "precious");
    /* every name this process will try first, and the old fixed names */
    for (int k = 0; k < 4; k++) {
        tmp_name(link_path, sizeof link_path, path, (long)getpid(), k);
        ck_assert_int_eq(symlink(victim, link_path), 0);
    }
    snprintf(link_path, sizeof link_path, "%s.tmp", path);
    ck_assert_int_eq(symlink(victim, link_path), 0);
    snprintf(link_path, sizeof link_path, "%s.%ld.tmp", path, (long)getpid());
    ck_assert_int_eq(symlink(victim, link_path), 0);

    ck_assert_int_eq(write_file(path, 0, 0, "trace", final, sizeof final), 0);
    ck_assert_str_eq(final, path);
    ck_assert_str_eq(slurp(victim), "precious");
    ck_assert_str_eq(slurp(path), "trace");
    ck_assert(!is_link(path));
    tmp_name(link_path, sizeof link_path, path, (long)getpid(), 0);
    ck_assert(is_link(link_path));           /* not ours: left alone */
}
END_TEST

START_TEST(test_link_at_final_name)
{
    make_root();
    char path[256], victim[256], final[TP_PATH_MAX], p1[256];
    snprintf(path, sizeof path, "%s/r.json", root);
    snprintf(p1, sizeof p1, "%s/r-1.json", root);
    snprintf(victim, sizeof victim, "%s/victim", root);
    put(victim, "precious");
    ck_assert_int_eq(symlink(victim, path), 0);
    /* OVERWRITE=0: the link counts as a taken name */
    ck_assert_int_eq(write_file(path, 0, 0, "new", final, sizeof final), 0);
    ck_assert_str_eq(final, p1);
    ck_assert(is_link(path));
    ck_assert_str_eq(slurp(victim), "precious");
    /* OVERWRITE=1: the link itself is replaced, its target untouched */
    ck_assert_int_eq(write_file(path, 0, 1, "newer", final, sizeof final), 0);
    ck_assert_str_eq(final, path);
    ck_assert(!is_link(path));
    ck_assert_str_eq(slurp(path), "newer");
    ck_assert_str_eq(slurp(victim), "precious");
}
END_TEST

START_TEST(test_tmp_writer)
{
    char name[400];
    const char *host = tp_output_tmp_host();
    ck_assert_int_gt((int)strlen(host), 0);
    ck_assert_ptr_null(strchr(host, '.'));
    snprintf(name, sizeof name, "rank0.5.pt.trace.json.gz.%s.1234.tmp", host);
    ck_assert_int_eq(tp_output_tmp_writer(name), 1234);
    snprintf(name, sizeof name, "x.%s.77-3.tmp", host);
    ck_assert_int_eq(tp_output_tmp_writer(name), 77);
    static const char *const bad[] = {
        "rank0.5.pt.trace.json.gz.tmp", "rank0.5.pt.trace.json.gz.1234.tmp",
        "x.otherhost-that-is-not-this.12.tmp", "x.%s.12", "x.%s.12-.tmp", "x.%s.-3.tmp",
        "x.%s.1-2-3.tmp", "x.%s..tmp", ".%s.12.tmp", "x.%s.0.tmp", "x.%s.12a.tmp",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(name, sizeof name, bad[i], host);
        ck_assert_msg(tp_output_tmp_writer(name) == -1, "%s taken for ours", name);
    }
}
END_TEST

START_TEST(test_clean_stale_of_dead_writers)
{
    make_root();
    pid_t dead = fork();
    ck_assert_int_ge(dead, 0);
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    char path[256], victim[256], stale[400], stale_k[400], alive[400], link_path[400];
    char other[400], foreign[400];
    snprintf(path, sizeof path, "%s/rank0.5.pt.trace.json.gz", root);
    snprintf(victim, sizeof victim, "%s/victim", root);
    put(victim, "precious");
    tmp_name(stale, sizeof stale, path, (long)dead, 0);
    tmp_name(stale_k, sizeof stale_k, path, (long)dead, 2);
    tmp_name(alive, sizeof alive, path, (long)getppid(), 0);     /* a live writer */
    snprintf(link_path, sizeof link_path, "%s/l.json.%s.%ld.tmp", root, tp_output_tmp_host(),
             (long)dead);
    snprintf(other, sizeof other, "%s/o.json.otherhost.%ld.tmp", root, (long)dead);
    snprintf(foreign, sizeof foreign, "%s/notes.%ld.tmp", root, (long)dead);
    put(stale, "half");
    put(stale_k, "half");
    put(alive, "writing");
    put(other, "another node's");
    put(foreign, "not ours");
    ck_assert_int_eq(symlink(victim, link_path), 0);

    ck_assert_int_eq(tp_output_clean_stale(path), 2);
    ck_assert_int_eq(access(stale, F_OK), -1);
    ck_assert_int_eq(access(stale_k, F_OK), -1);
    ck_assert_str_eq(slurp(alive), "writing");
    ck_assert_str_eq(slurp(other), "another node's");
    ck_assert_str_eq(slurp(foreign), "not ours");
    ck_assert(is_link(link_path));
    ck_assert_str_eq(slurp(victim), "precious");
    /* once per folder and process */
    put(stale, "half");
    ck_assert_int_eq(tp_output_clean_stale(path), 0);
    ck_assert_str_eq(slurp(stale), "half");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("output");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, test_suffix_pos);
    tcase_add_test(tc, test_report_path);
    tcase_add_test(tc, test_create_and_mkdirs);
    tcase_add_test(tc, test_no_replace_suffixes);
    tcase_add_test(tc, test_no_replace_report_stem);
    tcase_add_test(tc, test_race_between_open_and_commit);
    tcase_add_test(tc, test_overwrite_replaces);
    tcase_add_test(tc, test_unwritable_folder);
    tcase_add_test(tc, test_disk_full_leaves_nothing);
    tcase_add_test(tc, test_stale_tmp);
    tcase_add_test(tc, test_planted_links_not_followed);
    tcase_add_test(tc, test_link_at_final_name);
    tcase_add_test(tc, test_tmp_writer);
    tcase_add_test(tc, test_clean_stale_of_dead_writers);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
