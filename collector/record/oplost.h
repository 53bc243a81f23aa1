/*
 * oplost.h - spans of time in which torch's operators could not reach the
 * library because the program ran a profiler of its own (collector/record/oplost.c).
 */
#ifndef TP_OPLOST_H
#define TP_OPLOST_H

#include <stddef.h>
#include <stdint.h>

/* Longest reason kept, with its terminating NUL. */
#define TP_OPLOST_WHY 192

/* tp_oplost_set - from now on torch's operators are lost, because of "why"
 * (copied, cut to TP_OPLOST_WHY - 1 bytes); NULL: they reach the library
 * again.  A second "why" while a loss is open keeps the first.  Any thread;
 * not for the hot path or a signal handler (it takes a writers' lock). */
void tp_oplost_set(const char *why);

/* tp_oplost_in - whether operators were lost during part of the ticks
 * [start, end).  Returns 1 and sets *from and *to to the loss clipped to
 * those ticks (*to = end while the loss is still open) and "why" (size n)
 * to the reason of the first such loss; else 0.  Lock-free: the flush
 * thread calls it, also at a save on a signal. */
int tp_oplost_in(uint64_t start, uint64_t end, uint64_t *from, uint64_t *to, char *why, size_t n);

/* tp_oplost_reset - forget every span (tests; a forked child). */
void tp_oplost_reset(void);

#endif
