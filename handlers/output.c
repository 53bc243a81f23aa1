/*
 * output.c - DESIGN: Darshan's rule, applied to every file we write: write
 * under a temporary name in the final folder, rename when complete.  The
 * temporary name is "<final>.tmp" (HTA loads every .json/.gz of the trace
 * folder, SPEC decision 10, so it must not end in either), created with
 * O_EXCL; if a stale one is in the way we use "<final>.<pid>.tmp".  The
 * final name is chosen twice: a free name is picked at open so that the
 * temporary file sits next to it, and the rename itself refuses to replace
 * (RENAME_NOREPLACE, or link+unlink on filesystems without it), moving to
 * the next suffix if another process took the name meanwhile.  So with
 * TRAINPROF_OVERWRITE=0 nothing is ever lost, even with racing ranks.
 */
#include "output.h"
#include "../collector/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../collector/log.h"

int tp_output_mkdirs(const char *dir)
{
    char p[TP_PATH_MAX];
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

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

size_t tp_output_suffix_pos(const char *path)
{
    size_t n = strlen(path);
    const char *slash = strrchr(path, '/');
    size_t name = slash ? (size_t)(slash - path) + 1 : 0;
    if (ends_with(path, n, ".pt.trace.json.gz") && n - 17 > name)
        return n - 17;
    if (ends_with(path, n, ".pt.trace.json") && n - 14 > name)
        return n - 14;
    size_t end = n;
    if (ends_with(path, n, ".gz") && n - 3 > name)
        end = n - 3;
    for (size_t i = end; i > name + 1; i--)
        if (path[i - 1] == '.')
            return i - 1;
    return end;
}

static size_t stem_pos(const char *path, size_t stem)
{
    if (stem == 0)
        return tp_output_suffix_pos(path);
    size_t n = strlen(path);
    if (stem > n)
        return n;
    const char *dot = strchr(path + stem, '.');
    return dot ? (size_t)(dot - path) : n;
}

/* o->final = requested with "-k" inserted at o->stem (k = 0: as is). */
static int make_final(struct tp_output *o, int k)
{
    size_t n = strlen(o->requested);
    if (k == 0) {
        memcpy(o->final, o->requested, n + 1);
        return 0;
    }
    char sfx[16];
    int s = snprintf(sfx, sizeof sfx, "-%d", k);
    if ((size_t)s + n >= sizeof o->final)
        return -1;
    memcpy(o->final, o->requested, o->stem);
    memcpy(o->final + o->stem, sfx, (size_t)s);
    memcpy(o->final + o->stem + (size_t)s, o->requested + o->stem, n - o->stem + 1);
    return 0;
}

static int name_taken(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int tp_output_abort(struct tp_output *o, int err)
{
    if (o->fd >= 0) {
        close(o->fd);
        o->fd = -1;
    }
    if (o->tmp[0])
        unlink(o->tmp);
    o->tmp[0] = '\0';
    if (err)
        TP_ERROR("cannot write %s: %s", o->final[0] ? o->final : o->requested, strerror(err));
    return -1;
}

int tp_output_open(struct tp_output *o, const char *path, size_t stem, int overwrite)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->overwrite = overwrite;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof o->requested || path[n - 1] == '/') {
        TP_ERROR("cannot write \"%s\": %s", path, strerror(n ? ENAMETOOLONG : ENOENT));
        return -1;
    }
    memcpy(o->requested, path, n + 1);
    o->stem = stem_pos(path, stem);

    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char dir[TP_PATH_MAX];
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
        if (tp_output_mkdirs(dir) != 0) {
            TP_ERROR("cannot create folder %s: %s", dir, strerror(errno));
            return -1;
        }
    }

    int k = 0;
    for (;; k++) {
        if (k > TP_OUTPUT_MAX_SUFFIX || make_final(o, k) != 0) {
            TP_ERROR("cannot write %s: no free name (TRAINPROF_OVERWRITE=0)", path);
            return -1;
        }
        if (overwrite || !name_taken(o->final))
            break;
    }
    o->suffix = k;

    snprintf(o->tmp, sizeof o->tmp, "%s.tmp", o->final);
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (o->fd < 0 && errno == EEXIST) {
        snprintf(o->tmp, sizeof o->tmp, "%s.%ld.tmp", o->final, (long)getpid());
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    }
    if (o->fd < 0) {
        int e = errno;
        TP_ERROR("cannot create %s: %s", o->tmp, strerror(e));
        o->tmp[0] = '\0';
        return -1;
    }
    return 0;
}

/* Rename without replacing: 0, or -1 with errno (EEXIST: name taken). */
static int rename_noreplace(const char *from, const char *to)
{
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != EOPNOTSUPP)
        return -1;
    if (link(from, to) == 0) {
        unlink(from);
        return 0;
    }
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP)
        return -1;
    /* No hard links either (vfat, some FUSE): the best left is check, then rename. */
    if (name_taken(to)) {
        errno = EEXIST;
        return -1;
    }
    return rename(from, to);
}

int tp_output_commit(struct tp_output *o)
{
    if (o->fd < 0)
        return tp_output_abort(o, EBADF);
    int rc = close(o->fd);
    o->fd = -1;
    if (rc != 0 && errno != EINTR)
        return tp_output_abort(o, errno);

    for (;;) {
        rc = o->overwrite ? rename(o->tmp, o->final) : rename_noreplace(o->tmp, o->final);
        if (rc == 0)
            break;
        if (errno != EEXIST || o->overwrite)
            return tp_output_abort(o, errno);
        if (++o->suffix > TP_OUTPUT_MAX_SUFFIX || make_final(o, o->suffix) != 0)
            return tp_output_abort(o, EEXIST);
    }
    o->tmp[0] = '\0';
    if (o->suffix)
        TP_WARN("%s exists; saved as %s (TRAINPROF_OVERWRITE=0)", o->requested, o->final);
    return 0;
}

int tp_output_trace_base(char *out, size_t n, const char *trace_path)
{
    const char *slash = strrchr(trace_path, '/');
    const char *name = slash ? slash + 1 : trace_path;
    size_t len = strlen(name);
    if (ends_with(name, len, ".json.gz") && len > 8)
        len -= 8;
    else if (ends_with(name, len, ".json") && len > 5)
        len -= 5;
    if (len + 1 > n)
        return -1;
    memcpy(out, name, len);
    out[len] = '\0';
    return (int)len;
}

int tp_output_report_path(char *out, size_t n, const char *reports_folder,
                          const char *trace_path, const char *ext)
{
    char base[TP_PATH_MAX];
    if (!trace_path || !trace_path[0] || tp_output_trace_base(base, sizeof base, trace_path) <= 0)
        return -1;
    const char *dir = reports_folder && reports_folder[0] ? reports_folder : ".";
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    int k = snprintf(out, n, "%.*s%s%s.%s", (int)dl, dir, dir[dl - 1] == '/' ? "" : "/",
                     base, ext);
    if (k < 0 || (size_t)k >= n)
        return -1;
    return k - (int)strlen(ext) - 1;
}

int tp_output_open_report(struct tp_output *o, const char *reports_folder, const char *trace_path,
                          const char *ext, int overwrite, const char *what)
{
    char path[TP_PATH_MAX];
    int stem = tp_output_report_path(path, sizeof path, reports_folder, trace_path, ext);
    if (stem < 0) {
        TP_ERROR("%s of %s not written: %s", what, trace_path, strerror(ENAMETOOLONG));
        return -1;
    }
    return tp_output_open(o, path, (size_t)stem, overwrite);
}

int tp_output_report_done(struct tp_output *o, int err, struct tp_saved *saved)
{
    int rc = err ? tp_output_abort(o, err) : tp_output_commit(o);
    if (rc == 0 && saved->n_reports < TP_SAVED_REPORTS) {
        snprintf(saved->reports[saved->n_reports], sizeof saved->reports[0], "%s", o->final);
        saved->n_reports++;
    }
    return rc;
}
