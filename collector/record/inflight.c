/*
 * inflight.c - DESIGN: the in-flight slots the hang doctor reads.  A hung
 * job is a rank stuck inside a call that waits for something (a collective
 * for its peers, a synchronize for the GPU, a blocking copy or a cudaFree
 * for the work queued before it); to say which call, each thread has one
 * slot, a cache line of its own, that a blocking wrapper fills on entry and
 * clears on return (preload/wrap.h, the TP_BLOCK_<name> lines of each
 * preload file).  Those calls wait anyway, so the cost is not on the hot
 * path; still it is stores only: the fields, then the start tick that
 * publishes them (release stores, plain stores on x86), and one store of
 * 0 on return.  No lock, no system call beyond the clock.
 *
 * Readers (tp-flush, once a second while the hang doctor watches) copy a
 * slot as a sequence lock reader does, the start tick standing for the
 * sequence: load it, copy the fields (acquire loads), load it again; equal
 * and non-zero is one call's consistent view (two calls never share a
 * start tick: the writer makes each greater than its slot's last, for the
 * clock alone does not advance between two short calls on a coarse counter,
 * aarch64's at 25 MHz or qemu-user's in ~1 us steps), else the copy is retried, and
 * after a few tries the slot is reported as changing (it is not stuck).
 *
 * Slots are claimed by a thread at its first blocking call (a CAS of its
 * thread id into a free slot, TP_INFLIGHT_SLOTS of them) and given back by
 * a pthread key's destructor when the thread exits, so a job that starts
 * and ends threads does not run out; a thread that finds none is counted
 * and not watched.  The key is made at activation, before any wrapper
 * fills a slot (tp_inflight_on is set after it).
 *
 * Sequence numbers: per communicator (its serial, record/comms.h), the
 * collectives issued on it so far.  NCCL requires a communicator to be used
 * by one thread at a time, so the count is a relaxed load and store, not a
 * locked add.
 */
#include "inflight.h"

#include "collector/contract/sink.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic int tp_inflight_on;
__thread struct tp_inflight *tp_inflight_self __attribute__((tls_model("initial-exec")));

static struct tp_inflight tp_slots[TP_INFLIGHT_SLOTS] __attribute__((aligned(64)));
static _Atomic uint64_t tp_seqs[TP_COMMS_LISTED];
static _Atomic uint64_t tp_unwatched;
static _Atomic int tp_key_made;
static pthread_key_t tp_key;
static __thread int tp_claim_failed __attribute__((tls_model("initial-exec")));

static void tp_inflight_release(void *p)
{
    struct tp_inflight *s = p;
    atomic_store_explicit(&s->t0, 0, memory_order_release);
    atomic_store_explicit(&s->tid, 0, memory_order_release);
}

void tp_inflight_activate(void)
{
    if (!atomic_load(&tp_key_made) && pthread_key_create(&tp_key, tp_inflight_release) == 0)
        atomic_store(&tp_key_made, 1);
    atomic_store(&tp_inflight_on, 1);
}

struct tp_inflight *tp_inflight_claim(void)
{
    if (tp_claim_failed || !atomic_load_explicit(&tp_key_made, memory_order_acquire))
        return NULL;
    int32_t tid = (int32_t)syscall(SYS_gettid);
    for (unsigned i = 0; i < TP_INFLIGHT_SLOTS; i++) {
        int32_t free_tid = 0;
        if (atomic_load_explicit(&tp_slots[i].tid, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&tp_slots[i].tid, &free_tid, tid)) {
            /* pthread_setspecific of a key made at start allocates nothing
             * for the first 32 keys of a thread (glibc's static block) */
            pthread_setspecific(tp_key, &tp_slots[i]);
            tp_inflight_self = &tp_slots[i];
            return &tp_slots[i];
        }
    }
    tp_claim_failed = 1;
    atomic_fetch_add_explicit(&tp_unwatched, 1, memory_order_relaxed);
    return NULL;
}

uint64_t tp_inflight_next_seq(uint32_t serial)
{
    if (serial >= TP_COMMS_LISTED)
        return 0;
    uint64_t n = atomic_load_explicit(&tp_seqs[serial], memory_order_relaxed) + 1;
    atomic_store_explicit(&tp_seqs[serial], n, memory_order_relaxed);
    return n;
}

uint64_t tp_inflight_last_seq(uint32_t serial)
{
    return serial < TP_COMMS_LISTED ? atomic_load_explicit(&tp_seqs[serial], memory_order_relaxed)
                                    : 0;
}

int tp_inflight_read(unsigned i, struct tp_inflight_view *out)
{
    if (i >= TP_INFLIGHT_SLOTS)
        return 0;
    const struct tp_inflight *s = &tp_slots[i];
    out->tid = atomic_load_explicit(&s->tid, memory_order_acquire);
    if (!out->tid)
        return 0;
    for (int tries = 0; tries < 8; tries++) {
        uint64_t t0 = atomic_load_explicit(&s->t0, memory_order_acquire);
        out->t0 = t0;
        if (!t0)
            return 1;
        /* acquire loads: the re-check of t0 below is not done before them */
        out->api = atomic_load_explicit(&s->api, memory_order_acquire);
        out->comm = atomic_load_explicit(&s->comm, memory_order_acquire);
        out->seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        out->bytes = atomic_load_explicit(&s->bytes, memory_order_acquire);
        out->peer = atomic_load_explicit(&s->peer, memory_order_acquire);
        out->handle = atomic_load_explicit(&s->handle, memory_order_acquire);
        out->op = atomic_load_explicit(&s->op, memory_order_acquire);
        if (atomic_load_explicit(&s->t0, memory_order_relaxed) == t0)
            return 1;
    }
    out->t0 = 0;        /* changing all the time: not stuck */
    return 1;
}

uint64_t tp_inflight_unwatched(void)
{
    return atomic_load_explicit(&tp_unwatched, memory_order_relaxed);
}
