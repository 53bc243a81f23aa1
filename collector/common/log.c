/*
 * log.c - DESIGN: one write(2) per line, "trainprof: <level>: <text>\n".
 * Info lines carry no level word ("trainprof: saved ..."), errors and
 * warnings do, as README's examples show.  errno is preserved for the caller.
 * Lines repeat values from the user and from files (a bad item of a
 * variable, a path, jansson's "near '...'"), so every line passes through
 * tp_log_escape before it is written: a value can neither end the line
 * (and forge a "trainprof:" line of its own), nor send escape codes to a
 * terminal, nor put bytes that are not UTF-8 into a log.
 */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int tp_log_level = TP_LOG_INFO;

/* The last error or warning line, for the status file (trigger.c); a
 * writer that finds the lock taken skips the copy rather than wait. */
static pthread_mutex_t tp_last_lock = PTHREAD_MUTEX_INITIALIZER;
static char tp_last[512];

size_t tp_utf8_len(const unsigned char *p, size_t n)
{
    size_t len;
    uint32_t cp, min;
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2; cp = p[0] & 0x1fu; min = 0x80;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3; cp = p[0] & 0x0fu; min = 0x800;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4; cp = p[0] & 0x07u; min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

size_t tp_log_escape(const char *s, size_t n, char *out, size_t outsz)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t len = 0;
    if (!outsz)
        return 0;
    for (size_t i = 0; i < n;) {
        char esc[16];
        size_t elen = 0, used = 1;
        size_t c = tp_utf8_len(p + i, n - i);
        if (c == 1 && p[i] >= 0x20 && p[i] != 0x7f) {
            esc[elen++] = (char)p[i];
        } else if (c > 1 && !(p[i] == 0xc2 && p[i + 1] < 0xa0)) {
            memcpy(esc, p + i, c);
            elen = used = c;
        } else {
            /* C0 (newline and tab included), DEL, a C1 control (U+0080..U+009F: both bytes), or a byte
             * that is not part of valid UTF-8 */
            used = c > 1 ? c : 1;
            for (size_t k = 0; k < used; k++) {
                esc[elen++] = '\\';
                esc[elen++] = 'x';
                esc[elen++] = hex[p[i + k] >> 4];
                esc[elen++] = hex[p[i + k] & 15];
            }
        }
        if (len + elen >= outsz)
            break;                   /* truncated at a whole character or escape */
        memcpy(out + len, esc, elen);
        len += elen;
        i += used;
    }
    out[len] = '\0';
    return len;
}

void tp_log_line(const char *text, size_t n)
{
    int saved = errno;
    char line[2048];
    size_t len = tp_log_escape(text, n, line, sizeof line - 1);
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
    errno = saved;
}

void tp_log_write(int level, const char *fmt, ...)
{
    static const char *const prefix[] = {
        [TP_LOG_QUIET] = "", [TP_LOG_ERROR] = "error: ", [TP_LOG_WARN] = "warning: ",
        [TP_LOG_INFO] = "", [TP_LOG_DEBUG] = "debug: ",
    };
    int saved = errno;
    char raw[1024];
    int n = snprintf(raw, sizeof raw, "trainprof: %s", prefix[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(raw + n, sizeof raw - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof raw - 1)
        len = sizeof raw - 1;
    errno = saved;
    tp_log_line(raw, len);
    if (level <= TP_LOG_WARN && pthread_mutex_trylock(&tp_last_lock) == 0) {
        tp_log_escape(raw, len, tp_last, sizeof tp_last);
        pthread_mutex_unlock(&tp_last_lock);
    }
    errno = saved;
}

void tp_log_last(char *out, size_t n)
{
    if (!n)
        return;
    pthread_mutex_lock(&tp_last_lock);
    snprintf(out, n, "%s", tp_last);
    pthread_mutex_unlock(&tp_last_lock);
}
