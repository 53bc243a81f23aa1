/*
 * log.h - stderr lines prefixed "trainprof:", never stdout.
 *
 * The level is checked before the arguments are evaluated (Redis serverLog).
 * Lines are formatted into a stack buffer and written with one write(2), so
 * that lines from several processes do not interleave mid-line.
 */
#ifndef TRAINPROF_COLLECTOR_LOG_H
#define TRAINPROF_COLLECTOR_LOG_H

#include "config.h"

/* Current level; TP_LOG_INFO until the configuration says otherwise. */
extern int tp_log_level;

void tp_log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define TP_LOG(level, ...) do { \
        if ((level) <= tp_log_level) tp_log_write((level), __VA_ARGS__); \
    } while (0)
#define TP_ERROR(...) TP_LOG(TP_LOG_ERROR, __VA_ARGS__)
#define TP_WARN(...)  TP_LOG(TP_LOG_WARN, __VA_ARGS__)
#define TP_INFO(...)  TP_LOG(TP_LOG_INFO, __VA_ARGS__)
#define TP_DEBUG(...) TP_LOG(TP_LOG_DEBUG, __VA_ARGS__)

#endif
