/*
 * bgthread.h - what every thread of the library's own does first: its
 * name, and SCHED_BATCH (see bgthread.c).
 */
#ifndef TRAINPROF_COLLECTOR_BGTHREAD_H
#define TRAINPROF_COLLECTOR_BGTHREAD_H

/* tp_bgthread_start - called by a thread of the library at its start:
 * names it "name" (at most 15 characters) and makes it a batch thread.
 * Never fails the thread: a refusal leaves it as it was. */
void tp_bgthread_start(const char *name);

#endif
