/*
 * safefile.c - DESIGN: Darshan's rule for every file the library creates:
 * write under a temporary name in the final folder, rename when complete,
 * so that no reader sees half a file.  One way for all of them (README
 * "Files trainprof creates" lists each): the status file was the one
 * creation outside handlers/output.c, and it opened its fixed temporary
 * name "rank{rank}.{pid}.json.tmp" with O_CREAT|O_TRUNC, so a link planted
 * there made the job overwrite the link's target.  Here:
 *
 * - The temporary name is "<final>.<host>.<pid>.tmp": HTA loads every
 *   .json/.gz of a trace folder, so it must end in
 *   neither; host and pid name the writer, so that a later process can
 *   tell a dead writer's leftover (tp_safefile_clean) from a live one's
 *   file, even in a folder that nodes share.
 * - It is created with O_EXCL|O_NOFOLLOW: a file or a link planted under
 *   it is never opened.  On EEXIST "-1", "-2", ... follow the pid, a
 *   bounded number of times.
 * - rename(2) never follows a link at the final name: it replaces the
 *   link itself.  Where a file must not be replaced (TRAINPROF_OVERWRITE=0)
 *   the rename refuses to (RENAME_NOREPLACE, or link+unlink where the
 *   filesystem lacks it).
 *
 * Names are relative to a folder descriptor (trigger.c keeps its run
 * folder open) or paths with AT_FDCWD (handlers/output.c).
 */
#include "safefile.h"
#include "sighandler.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tp_safefile_mkdirs(const char *dir)
{
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0)
        return 0;
    if (n >= sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(p, dir, n + 1);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        if (p[i - 1] == '/')
            continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            struct stat st;
            if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
                errno = e;
                return -1;
            }
        }
        p[i] = saved;
    }
    struct stat st;
    if (stat(p, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static char tp_sf_host[TP_SAFEFILE_HOST_MAX + 1];
static pthread_once_t tp_sf_host_once = PTHREAD_ONCE_INIT;

static void tp_sf_host_init(void)
{
    char h[256];
    if (gethostname(h, sizeof h) != 0)
        h[0] = '\0';
    h[sizeof h - 1] = '\0';
    size_t i = 0;
    for (; h[i] && i < TP_SAFEFILE_HOST_MAX; i++) {
        char c = h[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_';
        tp_sf_host[i] = ok ? c : '_';
    }
    if (i == 0)
        tp_sf_host[i++] = '_';
    tp_sf_host[i] = '\0';
}

const char *tp_safefile_host(void)
{
    pthread_once(&tp_sf_host_once, tp_sf_host_init);
    return tp_sf_host;
}

int tp_safefile_create(int dirfd, const char *final, char *tmp, size_t n)
{
    const char *host = tp_safefile_host();
    long pid = (long)getpid();
    for (int k = 0; k < TP_SAFEFILE_TRIES; k++) {
        int w = k ? snprintf(tmp, n, "%s.%s.%ld-%d.tmp", final, host, pid, k)
                  : snprintf(tmp, n, "%s.%s.%ld.tmp", final, host, pid);
        if (w < 0 || (size_t)w >= n) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;      /* errno is EEXIST */
}

static int tp_sf_taken(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int tp_safefile_rename(int dirfd, const char *tmp, const char *final, int replace)
{
    if (replace)
        return renameat(dirfd, tmp, dirfd, final);
    if (renameat2(dirfd, tmp, dirfd, final, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != EOPNOTSUPP)
        return -1;
    if (linkat(dirfd, tmp, dirfd, final, 0) == 0) {
        unlinkat(dirfd, tmp, 0);
        return 0;
    }
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP)
        return -1;
    /* No hard links either (vfat, some FUSE): the best left is check, then rename. */
    if (tp_sf_taken(dirfd, final)) {
        errno = EEXIST;
        return -1;
    }
    return renameat(dirfd, tmp, dirfd, final);
}

int tp_safefile_replace(int dirfd, const char *final, const void *data, size_t len)
{
    char tmp[4200];
    int fd = tp_safefile_create(dirfd, final, tmp, sizeof tmp);
    if (fd < 0)
        return -1;
    const char *b = data;
    size_t done = 0;
    int ok = 1, e = 0;
    while (ok && done < len) {
        ssize_t w = write(fd, b + done, len - done);
        if (w > 0)
            done += (size_t)w;
        else if (w == 0 || errno != EINTR) {
            ok = 0;
            e = w == 0 ? ENOSPC : errno;
        }
    }
    if (close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && tp_safefile_rename(dirfd, tmp, final, 1) != 0) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlinkat(dirfd, tmp, 0);
        errno = e;
        return -1;
    }
    return 0;
}

static int tp_sf_ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

long tp_safefile_writer(const char *name)
{
    size_t n = strlen(name);
    if (!tp_sf_ends_with(name, n, ".tmp"))
        return -1;
    n -= 4;
    size_t p = n;                       /* start of "<pid>[-<k>]" */
    while (p > 0 && ((name[p - 1] >= '0' && name[p - 1] <= '9') || name[p - 1] == '-'))
        p--;
    if (p == n || p == 0 || name[p - 1] != '.' || name[p] < '0' || name[p] > '9')
        return -1;
    char *end;
    errno = 0;
    long pid = strtol(name + p, &end, 10);
    if (errno || pid <= 0)
        return -1;
    if (end != name + n) {              /* "-<k>" */
        if (*end != '-' || end + 1 == name + n)
            return -1;
        for (const char *c = end + 1; c < name + n; c++)
            if (*c < '0' || *c > '9')
                return -1;
    }
    const char *host = tp_safefile_host();
    size_t hl = strlen(host);
    /* "<final>.<host>." with a final name of at least one byte */
    if (p - 1 < hl + 2 || name[p - 2 - hl] != '.' || memcmp(name + p - 1 - hl, host, hl) != 0)
        return -1;
    return pid;
}

int tp_safefile_clean(int dirfd, const char *dir)
{
    int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    int removed = 0;
    pid_t self = getpid();
    uid_t uid = geteuid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = tp_safefile_writer(e->d_name);
        if (pid <= 0 || pid == (long)self || (pid_t)pid != pid)
            continue;
        if (tp_sighandler_alive((int)pid))
            continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != uid)
            continue;
        if (unlinkat(dfd, e->d_name, 0) == 0) {
            removed++;
            TP_INFO("removed %s/%s, left by process %ld (gone)", dir, e->d_name, pid);
        }
    }
    closedir(d);
    return removed;
}

int tp_safefile_put(const char *dir, const char *name, const void *data, size_t len)
{
    if (tp_safefile_mkdirs(dir) != 0)
        return -1;
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = tp_safefile_replace(fd, name, data, len);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}
