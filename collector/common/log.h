/*
 * log.h - stderr lines prefixed "trainprof:", never stdout.
 *
 * The level is checked before the arguments are evaluated (Redis serverLog).
 * Lines are formatted into a stack buffer and written with one write(2), so
 * that lines from several processes do not interleave mid-line.  Each line
 * is escaped (tp_log_escape) so that no value in it can split it.
 */
#ifndef TRAINPROF_COLLECTOR_LOG_H
#define TRAINPROF_COLLECTOR_LOG_H

#include <stddef.h>

/* The levels, TRAINPROF_LOG's words (config.c reads them). */
enum tp_log_level { TP_LOG_QUIET = 0, TP_LOG_ERROR, TP_LOG_WARN, TP_LOG_INFO, TP_LOG_DEBUG };

/* Current level; TP_LOG_INFO until the configuration says otherwise. */
extern int tp_log_level __attribute__((visibility("hidden")));

void tp_log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * tp_log_escape - the "n" bytes at "s" as they may appear in a log line,
 * into "out" (size "outsz", NUL-terminated): valid UTF-8 is copied, except
 * C0 controls (newline and tab included), DEL and C1 controls
 * (U+0080..U+009F), written \xNN per byte, as is every byte that is not
 * part of valid UTF-8 (the form config.c's quoted values already use).  Stops at a whole character or escape when
 * "out" is full.  Returns the length written.
 */
size_t tp_log_escape(const char *s, size_t n, char *out, size_t outsz);

/* tp_utf8_len - length of the valid UTF-8 character at "p" (at most "n"
 * bytes, n >= 1), 0 if none: no overlong forms, no surrogates, nothing
 * above U+10FFFF (RFC 3629). */
size_t tp_utf8_len(const unsigned char *p, size_t n);

/* tp_log_line - write "text" ("n" bytes) escaped, and a newline, to stderr
 * with one write(2), whatever the level (config.c's stored lines). */
void tp_log_line(const char *text, size_t n);

/* tp_log_last - the last error or warning line written (escaped), "" if
 * none, into "out" (size "n"). */
void tp_log_last(char *out, size_t n);

#define TP_LOG(level, ...) do { \
        if ((level) <= tp_log_level) tp_log_write((level), __VA_ARGS__); \
    } while (0)
#define TP_ERROR(...) TP_LOG(TP_LOG_ERROR, __VA_ARGS__)
#define TP_WARN(...)  TP_LOG(TP_LOG_WARN, __VA_ARGS__)
#define TP_INFO(...)  TP_LOG(TP_LOG_INFO, __VA_ARGS__)
#define TP_DEBUG(...) TP_LOG(TP_LOG_DEBUG, __VA_ARGS__)

#endif
