/*
 * log.c - DESIGN: one write(2) per line, "trainprof: <level>: <text>\n".
 * Info lines carry no level word ("trainprof: saved ..."), errors and
 * warnings do, as SPEC 4 shows.  errno is preserved for the caller.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int tp_log_level = TP_LOG_INFO;

void tp_log_write(int level, const char *fmt, ...)
{
    static const char *const prefix[] = {
        [TP_LOG_QUIET] = "", [TP_LOG_ERROR] = "error: ", [TP_LOG_WARN] = "warning: ",
        [TP_LOG_INFO] = "", [TP_LOG_DEBUG] = "debug: ",
    };
    int saved = errno;
    char line[1024];
    int n = snprintf(line, sizeof line, "trainprof: %s", prefix[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
    errno = saved;
}
