/*
 * oom.h - the out-of-memory report: at a failed allocation, who held the
 * memory and what grew (collector/modules/memtrack.h keeps the ledger).
 */
#ifndef TRAINPROF_COLLECTOR_OOM_H
#define TRAINPROF_COLLECTOR_OOM_H

/* tp_oom_idle - tp-flush's idle tick: writes the report of a burst of
 * failed allocations that began at least TP_OOM_SETTLE_MS before. */
void tp_oom_idle(void);

/* Time left to a burst of failures before it is reported: torch's
 * allocator frees its cache and retries at once, and the report says so. */
#define TP_OOM_SETTLE_MS 300

/* tp_oom_at_exit - the program exits (its exit handler): a report still
 * owed is written now, on tp-flush, then the line of the memory still
 * held; waits for them at most "ms". */
void tp_oom_at_exit(int ms);

/* tp_oom_reports - reports written (tests). */
unsigned tp_oom_reports(void);

#endif
