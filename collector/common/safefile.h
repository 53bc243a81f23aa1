/*
 * safefile.h - the one way the library creates a file (README "Files
 * trainprof creates"): under a temporary name in the final folder,
 * created exclusively and never through a link, renamed when complete.
 * handlers/output.c (traces and reports) and trigger.c (the status file)
 * both go through it; a name may be relative to a folder descriptor.
 */
#ifndef TRAINPROF_COLLECTOR_SAFEFILE_H
#define TRAINPROF_COLLECTOR_SAFEFILE_H

#include <stddef.h>

#define TP_SAFEFILE_TRIES 100        /* temporary names tried for one file */
#define TP_SAFEFILE_HOST_MAX 32      /* bytes of the host name in temporary names */

/*
 * tp_safefile_mkdirs - create "dir" and its missing parents (mode 0777
 * less the umask), like mkdir -p; an existing folder (or a link to one)
 * is used as it is.  Returns 0, or -1 with errno set (ENOTDIR: a part is
 * not a folder; no message).
 */
int tp_safefile_mkdirs(const char *dir);

/*
 * tp_safefile_host - this host's name as temporary names carry it: bytes
 * other than [A-Za-z0-9_-] (dots included, so that names parse back) as
 * '_', cut at TP_SAFEFILE_HOST_MAX; "_" when it has none.
 */
const char *tp_safefile_host(void);

/*
 * tp_safefile_create - create the temporary file of "final" (a name
 * relative to folder descriptor "dirfd", or a path with AT_FDCWD):
 * "<final>.<host>.<pid>.tmp", then "<final>.<host>.<pid>-<k>.tmp" for
 * k = 1, 2, ... while the name exists, at most TP_SAFEFILE_TRIES names,
 * each with O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, mode 0666 less
 * the umask: a file or a link planted under the name is never opened.
 * The name is written into "tmp" (size n).  Returns the descriptor, or -1
 * with errno (ENAMETOOLONG; EEXIST when every name was taken).
 */
int tp_safefile_create(int dirfd, const char *final, char *tmp, size_t n);

/*
 * tp_safefile_rename - give "tmp" its final name "final" (both relative
 * to "dirfd").  replace = 1: rename(2), which replaces a file or a link
 * at "final" without following it.  replace = 0: never replaces anything
 * (renameat2 RENAME_NOREPLACE; where the filesystem lacks it, link then
 * unlink; without hard links either, a check then a rename).  Returns 0,
 * or -1 with errno (EEXIST: "final" is taken).
 */
int tp_safefile_rename(int dirfd, const char *tmp, const char *final, int replace);

/*
 * tp_safefile_replace - write "len" bytes of "data" as the file "final"
 * (relative to "dirfd"), replacing what is there: tp_safefile_create,
 * write, close, tp_safefile_rename with replace = 1; on failure the
 * temporary file is removed.  For small files rewritten in place (the
 * status file).  Returns 0, or -1 with errno.
 */
int tp_safefile_replace(int dirfd, const char *final, const void *data, size_t len);

/*
 * tp_safefile_put - tp_safefile_replace of "name" in the folder "dir",
 * made first if missing (tp_safefile_mkdirs).  0, or -1 with errno.
 */
int tp_safefile_put(const char *dir, const char *name, const void *data, size_t len);

/*
 * tp_safefile_writer - the pid of the writer of a temporary file, if the
 * file name "name" (no folder) is one tp_safefile_create makes on this
 * host: "<final>.<host>.<pid>.tmp" or "<final>.<host>.<pid>-<k>.tmp", with
 * a final name of at least one byte.  -1 if not.
 */
long tp_safefile_writer(const char *name);

/*
 * tp_safefile_clean - remove the temporary files in folder "dirfd" that
 * tp_safefile_writer names, whose writer is gone (kill: ESRCH), that are
 * regular files (links not followed) of our effective uid; one info line
 * each, naming "dir" (the folder, for the message).  Returns how many.
 */
int tp_safefile_clean(int dirfd, const char *dir);

#endif
