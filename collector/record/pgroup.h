/*
 * pgroup.h - the program's default process group as the framework told us
 * (trainprof_process_group, collector/record/pgroup.c): the backend and rank that
 * Kineto's distributedInfo carries.
 */
#ifndef TRAINPROF_COLLECTOR_PGROUP_H
#define TRAINPROF_COLLECTOR_PGROUP_H

/* Longest backend name kept, with its terminating NUL ("cpu:gloo,cuda:nccl"
 * is 18 bytes). */
#define TP_PGROUP_BACKEND 64

struct tp_pgroup {
    char backend[TP_PGROUP_BACKEND];  /* "nccl", "gloo", "mpi", "cpu:gloo,cuda:nccl", ... */
    int rank;                         /* this process's rank in it */
    int world_size;                   /* its size */
};

/* tp_pgroup_set - the default process group is now "backend" (copied;
 * printable ASCII only, at most TP_PGROUP_BACKEND - 1 bytes, else the call
 * is refused), this process being "rank" (>= 0) of "world_size" (> rank);
 * backend NULL: it was destroyed.  Returns 0, or -1 when refused (bad
 * values, or more than the calls kept: the last state kept stands).  Any
 * thread; not for the hot path or a signal handler (writers take a lock). */
int tp_pgroup_set(const char *backend, int rank, int world_size);

/* tp_pgroup_get - 1 and the group in "*out" while one is known, else 0.
 * Lock-free: the flush thread calls it, also at a save on a signal. */
int tp_pgroup_get(struct tp_pgroup *out);

/* tp_pgroup_nccl - this process created an NCCL communicator of "nranks"
 * ranks as rank "rank" (ncclCommInitRank and its variants, one rank per
 * process).  The largest such communicator is the job's, as far as NCCL
 * can tell.  Any thread, lock-free. */
void tp_pgroup_nccl(int rank, int nranks);

/* Where tp_rank_now's answer comes from. */
enum tp_rank_source { TP_RANK_LAUNCHER = 0, TP_RANK_PGROUP, TP_RANK_NCCL };

/* tp_rank_now - this process's rank and the job's world size now: the
 * launcher's RANK (or PMI_RANK, ...) when it gave one; else the default
 * process group the framework reported (mp.spawn and Lightning start
 * their ranks with no RANK variable); else the largest NCCL communicator
 * this process joined; else the launcher's other variables (rank 0, and
 * WORLD_SIZE or 1).  Lock-free (the flush thread, also at a signal). */
enum tp_rank_source tp_rank_now(int *rank, int *world_size);

/* tp_pgroup_reset - forget every call (tests). */
void tp_pgroup_reset(void);

#endif
