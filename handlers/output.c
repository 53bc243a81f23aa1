/*
 * output.c - DESIGN: the handlers' files (traces and reports), each
 * created the library's one way (collector/common/safefile.c: a temporary name
 * "<final>.<host>.<pid>.tmp" in the final folder, created exclusively and
 * never through a link, renamed when complete).  Here: the folders, the
 * choice of the final name, and leftovers.  The final name is chosen
 * twice: a free name is picked at open so that the temporary file sits
 * next to it, and the rename itself refuses to replace, moving to the
 * next suffix if another process took the name meanwhile.  So with
 * TRAINPROF_OVERWRITE=0 nothing is ever lost, even with racing ranks; with
 * TRAINPROF_OVERWRITE=1 rename(2) replaces a link at the final name
 * itself, never its target.
 *
 * Leftovers: a process killed during a save leaves its temporary file.
 * The first open in a folder (per process) removes the temporary files of
 * our naming whose writer is gone: written on this host (the folder may be
 * shared by nodes, whose pids mean nothing here), by a pid no longer alive
 * (kill(pid, 0) fails with ESRCH), a regular file (a link is not followed)
 * owned by our effective uid.
 */
#include "output.h"
#include "collector/common/safefile.h"
#include "collector/contract/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/common/log.h"

int tp_output_mkdirs(const char *dir)
{
    return tp_safefile_mkdirs(dir);
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

/* ---- temporary names ------------------------------------------------------ */

const char *tp_output_tmp_host(void)
{
    return tp_safefile_host();
}

long tp_output_tmp_writer(const char *name)
{
    return tp_safefile_writer(name);
}

/* Folders already cleaned by this process (a few; more are cleaned again). */
#define TP_OUTPUT_CLEANED 8
static pthread_mutex_t cleaned_lock = PTHREAD_MUTEX_INITIALIZER;
static char cleaned[TP_OUTPUT_CLEANED][TP_PATH_MAX];
static unsigned n_cleaned;

static int first_visit(const char *dir)
{
    pthread_mutex_lock(&cleaned_lock);
    int first = 1;
    for (unsigned i = 0; i < n_cleaned && i < TP_OUTPUT_CLEANED && first; i++)
        first = strcmp(cleaned[i], dir) != 0;
    if (first)
        snprintf(cleaned[n_cleaned++ % TP_OUTPUT_CLEANED], TP_PATH_MAX, "%s", dir);
    pthread_mutex_unlock(&cleaned_lock);
    return first;
}

int tp_output_clean_stale(const char *path)
{
    char dir[TP_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (!first_visit(dir))
        return 0;
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    int removed = tp_safefile_clean(dfd, dir);
    close(dfd);
    return removed;
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

    tp_output_clean_stale(o->final);
    o->fd = tp_safefile_create(AT_FDCWD, o->final, o->tmp, sizeof o->tmp);
    if (o->fd < 0) {
        int e = errno;
        TP_ERROR("cannot write %s: %s", o->final, strerror(e));
        o->tmp[0] = '\0';
        return -1;
    }
    return 0;
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
        rc = tp_safefile_rename(AT_FDCWD, o->tmp, o->final, o->overwrite);
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
