/*
 * format.h - format strings (README "Configuration"): {run_name}, {rank}, {local_rank},
 * {world_size}, {local_world_size}, {node_rank}, {batch}, {pid}, {hostname}.
 */
#ifndef TRAINPROF_COLLECTOR_FORMAT_H
#define TRAINPROF_COLLECTOR_FORMAT_H

#include <stddef.h>
#include <stdint.h>

struct tp_format_vars {
    const char *run_name;
    const char *hostname;
    int rank, local_rank, world_size, local_world_size, node_rank;
    int pid;
    int64_t batch;          /* < 0: {batch} not available (folder validation) */
    const char *path;       /* {path}: the saved file, TRAINPROF_EXEC only; NULL = not available */
    const char *batch_text; /* non-NULL: {batch} is this text, its width ignored (a flight
                               recorder's dump: "flight-slow-step.41") */
};

/*
 * tp_format_expand - expand "fmt" into "out" (size "outsz").
 * Returns 0, or -1 with a reason in "err" (size "errsz"): unknown variable,
 * unterminated brace, or output too long.  {{ and }} are literal braces.
 */
int tp_format_expand(const char *fmt, const struct tp_format_vars *v,
                     char *out, size_t outsz, char *err, size_t errsz);

/*
 * tp_format_expand_at - as tp_format_expand, for a folder: a relative
 * result is made absolute under "base" (an absolute folder: the working
 * directory at activation, tp_cfg.start_dir), so that a program's chdir
 * between two windows does not move them.  A "base" that is NULL, empty or
 * not absolute leaves the result as expanded.
 */
int tp_format_expand_at(const char *fmt, const struct tp_format_vars *v, const char *base,
                        char *out, size_t outsz, char *err, size_t errsz);

/*
 * tp_format_expand_sh - as tp_format_expand, for a /bin/sh command
 * (TRAINPROF_EXEC): each value is written so that the shell reads exactly
 * its bytes as data where it stands, bare, in '...', in "..." or in a
 * $(...) or `...` (format.c says how).
 */
int tp_format_expand_sh(const char *fmt, const struct tp_format_vars *v,
                        char *out, size_t outsz, char *err, size_t errsz);

/*
 * tp_format_check - validate "fmt" without expanding (configuration time).
 * Returns 0 or -1 with a reason in "err".
 */
int tp_format_check(const char *fmt, char *err, size_t errsz);

/*
 * tp_format_check_exec - as tp_format_check, also accepting {path}
 * (TRAINPROF_EXEC).  Returns 0 or -1 with a reason in "err".
 */
int tp_format_check_exec(const char *fmt, char *err, size_t errsz);

#endif
