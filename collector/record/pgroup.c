/*
 * pgroup.c - DESIGN: what the program's process group says of it.
 *
 * Kineto's distributedInfo is torch's answer to torch.distributed: the
 * default group's backend, rank and size, written only while a group
 * exists.  The library alone can tell less: NCCL communicators it saw
 * (collector/record/comms.c) say "nccl", a launcher's variables (RANK,
 * WORLD_SIZE, ..., collector/config/config_launcher.c) say rank and size but no
 * backend, and a gloo or MPI group leaves no trace in the calls we
 * intercept.  So the framework hook tells us: after
 * init_process_group() it calls trainprof_process_group(backend, rank,
 * size) with what torch.distributed answers, and with NULL after the
 * default group is destroyed.
 *
 * Calls are few (one or two a run) and come from any Python thread; a
 * window's save reads the state on tp-flush, also at a save on a signal,
 * so the reader takes no lock: each call fills a slot of its own, never
 * written again, and publishes it with a release store of the count;
 * writers serialise on a mutex.  After TP_PGROUP_CALLS calls later ones
 * are refused and the last state kept stands (no program creates and
 * destroys its default group that often).
 */
#include "pgroup.h"
#include "collector/config/config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define TP_PGROUP_CALLS 32

struct tp_pgroup_slot {
    int known;                      /* 0: the group was destroyed */
    struct tp_pgroup g;
};

static struct tp_pgroup_slot tp_slots[TP_PGROUP_CALLS];
static _Atomic unsigned tp_n_slots;
static pthread_mutex_t tp_writer = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t tp_nccl_rank;      /* nranks << 32 | rank of the largest; 0: none */

int tp_pgroup_set(const char *backend, int rank, int world_size)
{
    if (backend) {
        size_t len = strnlen(backend, TP_PGROUP_BACKEND);
        if (len == 0 || len >= TP_PGROUP_BACKEND || rank < 0 || world_size <= rank)
            return -1;
        for (size_t i = 0; i < len; i++)
            if (backend[i] < 0x20 || backend[i] > 0x7e)
                return -1;
    }
    pthread_mutex_lock(&tp_writer);
    unsigned k = atomic_load_explicit(&tp_n_slots, memory_order_relaxed);
    if (k == TP_PGROUP_CALLS) {
        pthread_mutex_unlock(&tp_writer);
        return -1;
    }
    struct tp_pgroup_slot *s = &tp_slots[k];
    memset(s, 0, sizeof *s);
    if (backend) {
        s->known = 1;
        memcpy(s->g.backend, backend, strlen(backend) + 1);
        s->g.rank = rank;
        s->g.world_size = world_size;
    }
    atomic_store_explicit(&tp_n_slots, k + 1, memory_order_release);
    pthread_mutex_unlock(&tp_writer);
    return 0;
}

int tp_pgroup_get(struct tp_pgroup *out)
{
    unsigned k = atomic_load_explicit(&tp_n_slots, memory_order_acquire);
    if (k == 0 || !tp_slots[k - 1].known)
        return 0;
    *out = tp_slots[k - 1].g;
    return 1;
}

void tp_pgroup_nccl(int rank, int nranks)
{
    if (rank < 0 || nranks <= rank)
        return;
    uint64_t want = (uint64_t)(uint32_t)nranks << 32 | (uint32_t)rank;
    uint64_t have = atomic_load(&tp_nccl_rank);
    while ((have >> 32) < (uint64_t)(uint32_t)nranks &&
           !atomic_compare_exchange_weak(&tp_nccl_rank, &have, want))
        ;
}

enum tp_rank_source tp_rank_now(int *rank, int *world_size)
{
    struct tp_pgroup g;
    uint64_t n;
    *rank = tp_cfg.rank;
    *world_size = tp_cfg.world_size;
    if (tp_cfg.rank_given)
        return TP_RANK_LAUNCHER;
    if (tp_pgroup_get(&g)) {
        *rank = g.rank;
        *world_size = g.world_size;
        return TP_RANK_PGROUP;
    }
    if ((n = atomic_load(&tp_nccl_rank)) != 0) {
        *rank = (int)(uint32_t)n;
        *world_size = (int)(n >> 32);
        return TP_RANK_NCCL;
    }
    return TP_RANK_LAUNCHER;
}

void tp_pgroup_reset(void)
{
    atomic_store(&tp_nccl_rank, 0);
    pthread_mutex_lock(&tp_writer);
    atomic_store(&tp_n_slots, 0);
    pthread_mutex_unlock(&tp_writer);
}
