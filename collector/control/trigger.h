/*
 * trigger.h - on-demand capture of a running job, with no daemon
 * (TRAINPROF_TRIGGER): tp-flush polls a trigger file under the run folder
 * and publishes a per-rank status file there; `trainprof trigger` and
 * `trainprof status` (scripts/) are the other side.
 *
 * The run folder is the trigger file's folder; in it:
 *   trigger                      one line written by `trainprof trigger`:
 *                                "id=ID start=S warmup=W active=N", keys in any
 *                                order, others ignored; W defaults to 1, N to 4
 *   status/rank{rank}.{pid}.json this process's status (README describes it)
 * A process acts on each id once, and not on a file older than its
 * activation (a stale trigger of an earlier run in the same folder).
 */
#ifndef TRAINPROF_COLLECTOR_TRIGGER_H
#define TRAINPROF_COLLECTOR_TRIGGER_H

/* tp_trigger_init - at activation, before step 0: decide whether triggers
 * are watched (TRAINPROF_SCHEDULE=none, or TRAINPROF_TRIGGER set, and not
 * "none"), resolve the run folder, install TRAINPROF_TRIGGER_SIGNAL over
 * SIG_DFL only. */
void tp_trigger_init(void);

/* tp_trigger_idle - on tp-flush after each wake-up: poll the trigger file
 * (one stat, at most every 0.4 s unless the signal came), say what the
 * steps made of a request, and rewrite the status file (at most every
 * 0.5 s). */
void tp_trigger_idle(void);

/* tp_trigger_exit - at exit, after the last window was written, or on
 * tp-flush when a termination or fatal signal came: the last status
 * ("exited": true). */
void tp_trigger_exit(void);

/* tp_trigger_atfork_child - a forked child goes passive: the signal's
 * default disposition comes back. */
void tp_trigger_atfork_child(void);

#endif
