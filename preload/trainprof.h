/*
 * trainprof.h - optional API for programs profiled with libtrainprof.so.
 *
 * A program that links nothing can still call these through
 * dlsym(RTLD_DEFAULT, "trainprof_step") and run with or without the library:
 *
 *     void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");
 *     ...
 *     if (step) step();
 *
 * All functions are thread safe, cheap outside recording windows, and never
 * fail visibly: without the library, or with TRAINPROF_ENABLED=0, they do
 * nothing.
 */
#ifndef TRAINPROF_H
#define TRAINPROF_H

#ifdef __cplusplus
extern "C" {
#endif

/* trainprof_step - end the current training step (step signal "api"). */
void trainprof_step(void);

/* trainprof_range_push - open a named range on this thread (a user_annotation
 * event in the trace).  "name" is copied; it may be freed after the call. */
void trainprof_range_push(const char *name);

/* trainprof_range_pop - close the innermost range opened on this thread. */
void trainprof_range_pop(void);

/* trainprof_instant - a named instant event on this thread. */
void trainprof_instant(const char *name);

/* trainprof_counter - a sample of counter "name" (a "C" event). */
void trainprof_counter(const char *name, double value);

/* trainprof_enabled - 1 if this process is being profiled, else 0. */
int trainprof_enabled(void);

/* trainprof_phase - what the current step is to the schedule: 2 it records,
 * 1 it warms up, 0 neither (a window may come later), -1 no window will
 * come again (or the process is not profiled).  A framework hook turns its
 * own instrumentation (torch's operator ranges) on while it is 1 or 2. */
int trainprof_phase(void);

/* trainprof_itt_collector - 2 once a program's ITT API (Intel's
 * ittnotify, linked into PyTorch) has loaded this library as its collector,
 * 1 while INTEL_LIBITTNOTIFY64 names this library (ittnotify loads it at
 * its first task), 0 otherwise.  A framework hook may announce its
 * operators through ITT (torch's ITT profiler state): bare names, cheaper
 * than formatted NVTX messages. */
int trainprof_itt_collector(void);

/* trainprof_operators_lost - torch's operators stop reaching the library
 * from now on, because of "why" (one sentence, at most 191 bytes kept),
 * or reach it again (NULL).  `trainprof run`'s Python hook calls it when
 * the program's own torch profiler takes torch's one profiler slot; the
 * windows that overlap the loss name their steps without operators and
 * the reason, in the trace, the summary and the log.  No-op when passive. */
void trainprof_operators_lost(const char *why);

/* trainprof_process_group - the program's default process group is now
 * "backend" (what torch.distributed.get_backend() returns: "nccl", "gloo",
 * "mpi", "cpu:gloo,cuda:nccl", ...; printable ASCII, at most 63 bytes),
 * this process being "rank" of "world_size" (0 <= rank < world_size);
 * backend NULL (rank and world_size then ignored): the default group was
 * destroyed.  The trace's distributedInfo then names that backend, rank and
 * size, as torch.profiler's does.  Without it, distributedInfo is written
 * only where the launcher's variables (RANK, WORLD_SIZE, ...) or NCCL
 * communicators say the process is part of a job, with backend "nccl" only
 * where NCCL communicators were created, else no backend.  `trainprof run`'s
 * Python hook calls it at the first step after torch.distributed's default
 * group is initialized, and at the first after it is destroyed (before any
 * window of that group is saved).  Bad values are ignored; may be called before
 * the profiler activates (it does not activate it). */
void trainprof_process_group(const char *backend, int rank, int world_size);

#ifdef __cplusplus
}
#endif

#endif
