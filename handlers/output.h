/*
 * output.h - atomic creation of output files for handlers (README "Files
 * trainprof creates").
 *
 * A file is written under "<final>.<host>.<pid>.tmp" in its final folder
 * (created exclusively, never through a link: collector/common/safefile.c, the
 * library's one way of creating a file) and renamed when complete, so
 * that no reader ever sees half a file.  With
 * TRAINPROF_OVERWRITE=0 an existing file is never replaced: the new one
 * gets "-1", "-2", ... before its extension and a warning says so.
 * Every failure prints one error line naming the path and strerror, and
 * leaves no temporary file behind.
 */
#ifndef TRAINPROF_HANDLERS_OUTPUT_H
#define TRAINPROF_HANDLERS_OUTPUT_H

#include <stddef.h>

#define TP_PATH_MAX 4096
#define TP_OUTPUT_MAX_SUFFIX 100000

struct tp_output {
    int fd;                      /* open on tmp; -1 when closed */
    int overwrite;
    int suffix;                  /* 0: the requested name; n: "-n" inserted */
    size_t stem;                 /* where "-n" goes in "requested" */
    char requested[TP_PATH_MAX]; /* the path the caller asked for */
    char final[TP_PATH_MAX];     /* the path the file has (after commit) or will get */
    char tmp[TP_PATH_MAX + 64];  /* the temporary path, ends in ".tmp" */
};

/*
 * tp_output_mkdirs - create "dir" and its missing parents (mode 0777 less
 * the umask), like mkdir -p.  Returns 0, or -1 with errno set (no message).
 */
int tp_output_mkdirs(const char *dir);

/*
 * tp_output_suffix_pos - where "-n" goes in "path": for names ending
 * ".pt.trace.json" or ".pt.trace.json.gz" before ".pt.trace.json"; else
 * before the last extension of the file name, ".gz" not counted as one
 * ("a.json.gz" -> "a-1.json.gz"); the end of the name if it has none.
 */
size_t tp_output_suffix_pos(const char *path);

/*
 * tp_output_open - create the folder of "path" as needed, choose the final
 * name and open its temporary file for writing.
 * stem: offset in "path" from which the first '.' marks where "-n" goes
 * (".summary.txt" after the trace base name), or 0 for
 * tp_output_suffix_pos().  overwrite: TRAINPROF_OVERWRITE.
 * Returns 0 with o->fd open, or -1 after one error line (nothing created
 * but possibly folders).
 */
int tp_output_open(struct tp_output *o, const char *path, size_t stem, int overwrite);

/*
 * tp_output_commit - close the temporary file and rename it to its final
 * name: without replacing anything when overwrite is 0 (renameat2
 * RENAME_NOREPLACE, or link+unlink where the filesystem lacks it; on
 * EEXIST the next suffix is tried), with rename(2) otherwise.  When the
 * name got a suffix, one warning line says so.
 * Returns 0 with o->final the path written, or -1 after one error line,
 * the temporary file removed.
 */
int tp_output_commit(struct tp_output *o);

/*
 * tp_output_abort - give up: close and remove the temporary file.  When
 * "err" (an errno value) is non-zero, print one error line naming the
 * temporary path and strerror(err).  Always returns -1.
 */
int tp_output_abort(struct tp_output *o, int err);

/*
 * tp_output_trace_base - the trace's file name without its directory and
 * without a final ".json.gz" or ".json": "d/rank0.5.pt.trace.json.gz" ->
 * "rank0.5.pt.trace".  Writes at most n bytes with the NUL; returns the
 * length, or -1 if it does not fit.
 */
int tp_output_trace_base(char *out, size_t n, const char *trace_path);

/*
 * tp_output_report_path - "<reports_folder>/<trace base>.<ext>" into "out"
 * (size n), ext given without its dot ("summary.txt").  Returns the offset
 * of the dot before ext (the "stem" for tp_output_open), or -1 if the path
 * does not fit or trace_path is empty.
 */
int tp_output_report_path(char *out, size_t n, const char *reports_folder,
                          const char *trace_path, const char *ext);

/*
 * tp_output_open_report - tp_output_open() of the report "<trace base>.<ext>"
 * in "reports_folder"; "what" names it in the error line ("summary").
 * Returns 0, or -1 after one error line.
 */
int tp_output_open_report(struct tp_output *o, const char *reports_folder, const char *trace_path,
                          const char *ext, int overwrite, const char *what);

/*
 * tp_output_tmp_host - this host's name as temporary names carry it
 * (tp_safefile_host: bytes other than [A-Za-z0-9_-] as '_', at most
 * TP_SAFEFILE_HOST_MAX).
 */
const char *tp_output_tmp_host(void);

/*
 * tp_output_tmp_writer - tp_safefile_writer: the pid of the writer of a
 * temporary file, if the file name "name" (no folder) is one of ours
 * written on this host:
 * "<final>.<host>.<pid>.tmp" or "<final>.<host>.<pid>-<k>.tmp".  -1 if not.
 */
long tp_output_tmp_writer(const char *name);

/*
 * tp_output_clean_stale - once per folder and process (tp_output_open calls
 * it): remove the temporary files in the folder of "path" that
 * tp_output_tmp_writer names, whose writer is gone (kill: ESRCH), that are
 * regular files (links not followed) of our effective uid.  Returns how
 * many it removed.
 */
int tp_output_clean_stale(const char *path);

struct tp_saved;

/*
 * tp_output_report_done - finish a report file: abort it if "err" (an
 * errno, reported) else commit it, and list the committed file in
 * saved->reports, where the post-save stage finds it.  0 or -1.
 */
int tp_output_report_done(struct tp_output *o, int err, struct tp_saved *saved);

#endif
