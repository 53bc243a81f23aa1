/*
 * buffer.h - per-thread record buffers: wait-free for the writer.
 *
 * Each thread that records owns a chain of 64 KiB chunks taken from one
 * process-wide pool (TRAINPROF_BUFFER_MB, reserved at activation).  The
 * writing thread fills its current chunk and publishes each record with a
 * release store of the chunk's count; the flush thread is the only reader.
 * When the pool is empty a record is dropped and counted: the writer never
 * blocks, locks, allocates or makes a system call.  Buffers of exited
 * threads stay until drained, then are reused by new threads.  Step
 * markers have chunks of their own (tp_buf_write_step), which no other
 * record takes.
 */
#ifndef TRAINPROF_COLLECTOR_BUFFER_H
#define TRAINPROF_COLLECTOR_BUFFER_H

#include <stdatomic.h>
#include <stdint.h>
#include "collector/contract/record.h"

#define TP_CHUNK_BYTES   (64u * 1024u)
#define TP_CHUNK_RECORDS (TP_CHUNK_BYTES / sizeof(struct tp_record) - 1)

struct tp_chunk {
    _Atomic uint32_t count;                 /* records published */
    uint32_t index;                         /* position in the pool */
    struct tp_chunk *_Atomic next;          /* set when the writer moves on */
    char pad[sizeof(struct tp_record) - 16];
    struct tp_record rec[TP_CHUNK_RECORDS];
};

struct tp_tbuf {
    struct tp_tbuf *next_all;               /* registry, never unlinked */
    int32_t tid;
    uint32_t pthread_id;                    /* low bits of pthread_self(): one of the
                                               thread ids CUPTI may report */
    char name[16];                          /* the thread's name when it registered */
    _Atomic int state;                      /* TP_TBUF_* */
    /* writer side */
    struct tp_chunk *cur;
    uint32_t widx;
    _Atomic uint64_t dropped;
    struct tp_chunk *_Atomic first;         /* the writer's first chunk, for the reader */
    /* reader side (flush thread) */
    struct tp_chunk *head;
    uint32_t ridx;
};

enum { TP_TBUF_LIVE = 0, TP_TBUF_EXITED, TP_TBUF_RETIRED };

extern __thread struct tp_tbuf *tp_tls_buf __attribute__((tls_model("initial-exec")));

/* tp_buf_init - reserve the chunk pool ("mb" MiB, address space only). 0 or -1. */
int tp_buf_init(long mb);

/* Slow path of tp_buf_reserve: registers the thread or takes a chunk. */
struct tp_record *tp_buf_reserve_slow(void);

/* tp_buf_reserve - a slot for one record of this thread, or NULL (dropped and
 * counted).  Fill it, then tp_buf_commit() it before reserving another. */
static inline struct tp_record *tp_buf_reserve(void)
{
    struct tp_tbuf *b = tp_tls_buf;
    if (__builtin_expect(b && b->cur && b->widx < TP_CHUNK_RECORDS, 1))
        return &b->cur->rec[b->widx];
    return tp_buf_reserve_slow();
}

/* The chunks of a pool of "chunks" kept for step markers. */
#define TP_STEP_RESERVE(chunks) ((chunks) / 64 > 2 ? (chunks) / 64 : 2)

/*
 * tp_buf_write_step - write step marker "rec" (TP_REC_STEP) where no other
 * record competes for room: a reserve of the pool (TP_STEP_RESERVE: a 64th
 * of it, at least 2 chunks, 2,046 markers), then the pool.  u.step.tid and u.step.thread
 * are set to the calling thread's.  One caller at a time (steps.c's step
 * lock; a lock of its own besides).  0, or -1 when even the pool is full
 * (dropped and counted).
 */
int tp_buf_write_step(const struct tp_record *rec);

/* tp_buf_commit - publish the slot returned by the last tp_buf_reserve(). */
static inline void tp_buf_commit(void)
{
    struct tp_tbuf *b = tp_tls_buf;
    atomic_store_explicit(&b->cur->count, ++b->widx, memory_order_release);
}

/* The reader's view of one drained record. */
typedef void (*tp_drain_fn)(void *ctx, const struct tp_tbuf *t, const struct tp_record *r);

/*
 * tp_buf_drain - flush thread only.  Feed every published record of window
 * generation "gen" to "fn", thread by thread in write order; records of an
 * older generation are skipped and added to "*late"; a newer one ends that
 * thread's pass.  Consumed chunks return to the pool after "fn" has seen
 * them, so "fn" must not keep record pointers.  With "count_only" nothing is
 * consumed ("fn", if not NULL, peeks at the records): the return value is
 * the number of records of "gen" and "*late" counts the stale ones (counts
 * precede the events in a trace); TP_REC_STACK records are fed to "fn" but
 * never counted (they are part of the record that follows them).
 */
uint64_t tp_buf_drain(uint8_t gen, tp_drain_fn fn, void *ctx, uint64_t *late, int count_only);

/*
 * tp_buf_limit - records needing a new chunk are dropped and counted while
 * "chunks" general chunks are held (UINT32_MAX: no limit but the pool).
 * The flight recorder's TRAINPROF_FLIGHT_MB; read on the slow path only.
 */
void tp_buf_limit(uint32_t chunks);

/* tp_buf_chunks_taken - general chunks taken so far (a running count). */
uint64_t tp_buf_chunks_taken(void);

/*
 * tp_buf_trim - flush thread only.  Consume, thread by thread, the records
 * of generation "gen" (and older ones) from the oldest up to the first of
 * "gen" that began at or after "tick" (its t0), giving their chunks back:
 * the flight recorder's oldest steps overwritten.
 */
void tp_buf_trim(uint8_t gen, uint64_t tick);

/* tp_buf_thread_known - whether "id" (a thread id CUPTI reported) is the
 * kernel tid or pthread_id of a thread that has, or had, a buffer: the
 * join's test of whose record it is.  Any thread; a walk of the registry. */
int tp_buf_thread_known(uint32_t id);

/* tp_buf_dropped - records dropped so far, all threads. */
uint64_t tp_buf_dropped(void);

/* tp_buf_chunks_in_use - chunks held by writers (tests, benchmarks). */
uint32_t tp_buf_chunks_in_use(void);

#endif
