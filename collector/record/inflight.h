/*
 * inflight.h - the in-flight slot of each thread: the blocking call it is
 * inside now (inflight.c says why and how; the hang doctor, control/hang.c,
 * reads the slots).
 */
#ifndef TRAINPROF_COLLECTOR_INFLIGHT_H
#define TRAINPROF_COLLECTOR_INFLIGHT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/common/clock.h"

/* One thread's slot, one cache line.  "t0" publishes: the other fields are
 * valid while it is non-zero and unchanged (tp_inflight_read). */
struct tp_inflight {
    _Atomic uint64_t t0;        /* the call's start tick; 0: no blocking call in flight */
    _Atomic uint64_t bytes;     /* bytes it moves (a copy, a collective's count x size) */
    _Atomic uint64_t handle;    /* its stream, its event, or the pointer freed; 0: none */
    _Atomic uint64_t seq;       /* a collective's number on its communicator (1: the first) */
    _Atomic uint32_t api;       /* TP_API_* (record/apis.h) */
    _Atomic uint32_t comm;      /* the communicator's serial + 1 (record/comms.h); 0: none */
    _Atomic int32_t peer;       /* peer or root; -1: none */
    _Atomic int32_t tid;        /* the thread owning the slot; 0: free */
    _Atomic uint32_t op;        /* enum tp_coll of a collective, else 0 */
    uint32_t pad;
    uint64_t last_t0;           /* the owner's last t0 (only the owner touches it) */
};

/* TP_INFLIGHT_SLOTS - threads that can have a slot at once (a thread that
 * finds none is not watched, and counted: tp_inflight_unwatched). */
#define TP_INFLIGHT_SLOTS 512

/* tp_inflight_on - set at activation when the hang doctor is on: the
 * blocking wrappers (preload/wrap.h) then fill their thread's slot. */
extern _Atomic int tp_inflight_on __attribute__((visibility("hidden")));

extern __thread struct tp_inflight *tp_inflight_self __attribute__((tls_model("initial-exec")));

/* tp_inflight_claim - this thread's slot, claimed at its first blocking
 * call (released when the thread exits); NULL when all are taken. */
struct tp_inflight *tp_inflight_claim(void);

/* tp_inflight_next_seq - the number of the collective now issued on the
 * communicator of serial "serial" (1 for its first); 0 for a serial past
 * TP_COMMS_LISTED. */
uint64_t tp_inflight_next_seq(uint32_t serial);

/* tp_inflight_last_seq - the number of the last collective issued on
 * communicator "serial", 0 if none. */
uint64_t tp_inflight_last_seq(uint32_t serial);

/*
 * tp_inflight_begin - a blocking call "api" begins on this thread: fills
 * its slot and returns it, or NULL (no slot, or inside another blocking
 * call: the outermost one is what the thread waits in).  Stores only.
 */
static inline struct tp_inflight *tp_inflight_begin(uint32_t api, uint32_t comm, uint64_t seq,
                                                    uint64_t bytes, int32_t peer, uint64_t handle,
                                                    uint32_t op)
{
    struct tp_inflight *s = tp_inflight_self;
    if (__builtin_expect(!s, 0) && !(s = tp_inflight_claim()))
        return NULL;
    if (atomic_load_explicit(&s->t0, memory_order_relaxed))
        return NULL;
    /* release stores (plain stores on x86): a reader that sees one of this
     * call's fields also sees the clear of the last call's t0, so its
     * re-check of t0 fails (no fence: ThreadSanitizer has none) */
    atomic_store_explicit(&s->api, api, memory_order_release);
    atomic_store_explicit(&s->comm, comm, memory_order_release);
    atomic_store_explicit(&s->seq, seq, memory_order_release);
    atomic_store_explicit(&s->bytes, bytes, memory_order_release);
    atomic_store_explicit(&s->peer, peer, memory_order_release);
    atomic_store_explicit(&s->handle, handle, memory_order_release);
    atomic_store_explicit(&s->op, op, memory_order_release);
    /* t0 is unique per call, never 0: the reader tells two calls apart by
     * it (tp_inflight_read), and a coarse counter gives two short calls the
     * same tick (aarch64's runs at 25 MHz to 1 GHz; under qemu-user it moves
     * in ~1 us steps: make check-arm64 saw a torn view) */
    uint64_t t0 = tp_clock_now();
    if (t0 <= s->last_t0)
        t0 = s->last_t0 + 1;
    s->last_t0 = t0;
    atomic_store_explicit(&s->t0, t0, memory_order_release);
    return s;
}

/* tp_inflight_end - the call that "s" (from tp_inflight_begin) holds returned. */
static inline void tp_inflight_end(struct tp_inflight *s)
{
    if (s)
        atomic_store_explicit(&s->t0, 0, memory_order_release);
}

/* A consistent copy of one slot (tp_inflight_read). */
struct tp_inflight_view {
    uint64_t t0, bytes, handle, seq;
    uint32_t api, comm, op;
    int32_t peer, tid;
};

/*
 * tp_inflight_read - copies slot "i" (0 <= i < TP_INFLIGHT_SLOTS) into
 * "out".  Returns 1 if a thread owns it (out->t0 0: no call in flight), 0
 * if the slot is free.
 */
int tp_inflight_read(unsigned i, struct tp_inflight_view *out);

/* tp_inflight_unwatched - threads that found no free slot. */
uint64_t tp_inflight_unwatched(void);

/* tp_inflight_activate - at activation, with the hang doctor on. */
void tp_inflight_activate(void);

#endif
