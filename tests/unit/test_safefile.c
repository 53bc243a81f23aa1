/*
 * test_safefile.c - collector/common/safefile.c through a folder descriptor, as
 * trigger.c writes the status file (handlers/output.c's path form is
 * test_output.c's): links planted at the temporary names and at the final
 * name are never followed, nothing is left behind.
 */
#include "collector/common/safefile.h"
#include "tp_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static char root[256];

static void cleanup(void)
{
    tp_test_rmtree(root);
}

static int is_link(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Entries of "dir" other than . and .. */
static int entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

START_TEST(test_replace_through_planted_links)
{
    tp_test_mkdtemp(root, sizeof root, "safefile");
    char victim[300], link[400], final[300];
    snprintf(victim, sizeof victim, "%s/victim", root);
    snprintf(final, sizeof final, "%s/rank0.7.json", root);
    put(victim, "precious");
    /* the first names this process tries, and the naive fixed ones */
    for (int k = 0; k < 3; k++) {
        if (k)
            snprintf(link, sizeof link, "%s.%s.%ld-%d.tmp", final, tp_safefile_host(),
                     (long)getpid(), k);
        else
            snprintf(link, sizeof link, "%s.%s.%ld.tmp", final, tp_safefile_host(),
                     (long)getpid());
        ck_assert_int_eq(symlink(victim, link), 0);
    }
    snprintf(link, sizeof link, "%s.tmp", final);
    ck_assert_int_eq(symlink(victim, link), 0);
    ck_assert_int_eq(symlink(victim, final), 0);          /* and the final name */

    int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dfd, 0);
    ck_assert_int_eq(tp_safefile_replace(dfd, "rank0.7.json", "{\"step\":1}\n", 11), 0);
    ck_assert_int_eq(tp_safefile_replace(dfd, "rank0.7.json", "{\"step\":22}\n", 12), 0);
    close(dfd);

    char *v = tp_test_slurp(victim, NULL), *f = tp_test_slurp(final, NULL);
    ck_assert_str_eq(v, "precious");
    ck_assert(!is_link(final));                            /* the link itself was replaced */
    ck_assert_str_eq(f, "{\"step\":22}\n");
    free(v);
    free(f);
    /* victim, final, the 4 planted links: no temporary file of ours left */
    ck_assert_int_eq(entries(root), 6);
}
END_TEST

START_TEST(test_rename_without_replacing)
{
    tp_test_mkdtemp(root, sizeof root, "safefile");
    char tmp[400], path[300];
    int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dfd, 0);
    snprintf(path, sizeof path, "%s/taken", root);
    put(path, "first");
    int fd = tp_safefile_create(dfd, "taken", tmp, sizeof tmp);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(tp_safefile_writer(tmp), (long)getpid());
    ck_assert_int_eq(write(fd, "second", 6), 6);
    close(fd);
    errno = 0;
    ck_assert_int_eq(tp_safefile_rename(dfd, tmp, "taken", 0), -1);
    ck_assert_int_eq(errno, EEXIST);
    char *t = tp_test_slurp(path, NULL);
    ck_assert_str_eq(t, "first");
    free(t);
    ck_assert_int_eq(tp_safefile_rename(dfd, tmp, "taken", 1), 0);
    t = tp_test_slurp(path, NULL);
    ck_assert_str_eq(t, "second");
    free(t);
    close(dfd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safefile");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, test_replace_through_planted_links);
    tcase_add_test(tc, test_rename_without_replacing);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
