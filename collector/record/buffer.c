/*
 * buffer.c - DESIGN: the pool is one anonymous MAP_NORESERVE mapping, so
 * reserving 256 MiB costs address space only; pages are touched as chunks
 * are first used and are reused after a drain.  Chunks come from a bump
 * index, then from a free list that is a Treiber stack of chunk indices with
 * a 32-bit tag against ABA, so both ends are lock-free.  A thread's buffer
 * (struct tp_tbuf) is calloc'ed the first time the thread records (once per
 * thread, not per call) and is reused after the thread exits and its
 * records are drained.  The pthread key destructor only marks the buffer
 * exited: the flush thread retires it.
 *
 * A window's step markers are its structure (ProfilerStep#N, the steps of
 * the summary and the trainprof object): they never compete with the other
 * records for room.  The last chunks of the mapping (a 64th, at least 2:
 * 2,046 steps) are a reserve that only they take, through a buffer of
 * their own (tp_buf_write_step, one writer at a time: steps.c's step
 * lock), into which each marker carries its thread's id and name.  When a
 * flood of records filled the pool, a window of steps 1-4 was saved with
 * none or one of its ProfilerStep events before (test_losses.py).
 *
 * The flight recorder (collector/control/steps.c) records outside windows
 * as a window does, into the same buffers: it needs only a cap on the
 * general chunks (tp_buf_limit, TRAINPROF_FLIGHT_MB, tested on the slow
 * path where a chunk is taken, never per record), a count of chunks ever
 * taken (its per-step memory) and a consuming pass that gives back the
 * records of its oldest steps (tp_buf_trim, on tp-flush, the one reader).
 */
#include "buffer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread struct tp_tbuf *tp_tls_buf __attribute__((tls_model("initial-exec")));

/* Chunks [first, end) of the mapping: taken from a bump index, then from a
 * free list. */
struct tp_pool {
    uint32_t first, end;
    _Atomic uint32_t bump;
    _Atomic uint64_t free;                              /* tag << 32 | index */
};

static char *tp_pool;
static struct tp_pool tp_general = { .free = UINT32_MAX };
static struct tp_pool tp_reserve = { .free = UINT32_MAX };   /* the step markers' */
static _Atomic uint32_t tp_pool_used;                   /* general chunks held */
static _Atomic uint64_t tp_pool_taken;                  /* general chunks ever taken */
static _Atomic uint32_t tp_pool_limit = UINT32_MAX;     /* tp_buf_limit */
static _Atomic(struct tp_tbuf *) tp_tbufs;
static _Atomic uint64_t tp_dropped_orphan;              /* drops before a buffer existed */
static pthread_key_t tp_tbuf_key;
static pthread_once_t tp_key_once = PTHREAD_ONCE_INIT;
static struct tp_tbuf tp_steps_buf;                     /* the step markers, under tp_steps_lock */
static pthread_mutex_t tp_steps_lock = PTHREAD_MUTEX_INITIALIZER;

static struct tp_chunk *tp_chunk_at(uint32_t i)
{
    return (struct tp_chunk *)(tp_pool + (size_t)i * TP_CHUNK_BYTES);
}

static struct tp_chunk *tp_chunk_get(struct tp_pool *p)
{
    uint64_t head = atomic_load_explicit(&p->free, memory_order_acquire);
    struct tp_chunk *c = NULL;
    while ((uint32_t)head != UINT32_MAX) {
        c = tp_chunk_at((uint32_t)head);
        uint32_t nxt = (uint32_t)(uintptr_t)atomic_load_explicit(&c->next, memory_order_relaxed);
        uint64_t want = ((head >> 32) + 1) << 32 | nxt;
        if (atomic_compare_exchange_weak_explicit(&p->free, &head, want,
                                                  memory_order_acquire, memory_order_acquire))
            break;
        c = NULL;
    }
    if (!c) {
        uint32_t i = atomic_load_explicit(&p->bump, memory_order_relaxed);
        do {
            if (i >= p->end)
                return NULL;
        } while (!atomic_compare_exchange_weak_explicit(&p->bump, &i, i + 1,
                                                        memory_order_relaxed, memory_order_relaxed));
        c = tp_chunk_at(i);
        c->index = i;
    }
    atomic_store_explicit(&c->count, 0, memory_order_relaxed);
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    if (p == &tp_general) {
        atomic_fetch_add_explicit(&tp_pool_used, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&tp_pool_taken, 1, memory_order_relaxed);
    }
    return c;
}

/* Back to the pool it came from.  On the free list, chunk->next holds the
 * index of the next free chunk. */
static void tp_chunk_put(struct tp_chunk *c)
{
    struct tp_pool *p = c->index >= tp_reserve.first ? &tp_reserve : &tp_general;
    uint64_t head = atomic_load_explicit(&p->free, memory_order_relaxed);
    uint64_t want;
    do {
        atomic_store_explicit(&c->next, (struct tp_chunk *)(uintptr_t)(uint32_t)head, memory_order_relaxed);
        want = ((head >> 32) + 1) << 32 | c->index;
    } while (!atomic_compare_exchange_weak_explicit(&p->free, &head, want,
                                                    memory_order_release, memory_order_relaxed));
    if (p == &tp_general)
        atomic_fetch_sub_explicit(&tp_pool_used, 1, memory_order_relaxed);
}

int tp_buf_init(long mb)
{
    if (tp_pool)
        return 0;
    size_t bytes = (size_t)mb << 20;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    /* 2 MiB pages where the kernel allows them: a window's first pass over
     * the pool takes 512 times fewer page faults on the training threads */
    madvise(p, bytes, MADV_HUGEPAGE);
    uint32_t chunks = (uint32_t)(bytes / TP_CHUNK_BYTES);     /* 16 at least (1 MiB) */
    uint32_t reserve = TP_STEP_RESERVE(chunks);
    tp_general.end = tp_reserve.first = chunks - reserve;
    tp_reserve.end = chunks;
    atomic_store(&tp_reserve.bump, tp_reserve.first);
    /* the step markers' buffer, read with the threads' */
    tp_steps_buf.next_all = atomic_load(&tp_tbufs);
    while (!atomic_compare_exchange_weak(&tp_tbufs, &tp_steps_buf.next_all, &tp_steps_buf))
        ;
    /* The step markers' first chunk is touched now, at activation: its
     * first write is a huge page's fault (the kernel zeroes 2 MiB, about
     * 0.2-0.5 ms), which would otherwise fall on the training thread's
     * trainprof_step() at the first save (scripts/dev/bench-stalls) */
    ((volatile char *)p)[(size_t)tp_reserve.first * TP_CHUNK_BYTES] = 0;
    tp_pool = p;
    return 0;
}

static void tp_tbuf_exit(void *arg)
{
    struct tp_tbuf *b = arg;
    atomic_store_explicit(&b->state, TP_TBUF_EXITED, memory_order_release);
}

static void tp_key_make(void)
{
    pthread_key_create(&tp_tbuf_key, tp_tbuf_exit);
}

static struct tp_tbuf *tp_tbuf_register(void)
{
    struct tp_tbuf *b;
    for (b = atomic_load(&tp_tbufs); b; b = b->next_all) {
        int st = TP_TBUF_RETIRED;
        if (atomic_compare_exchange_strong(&b->state, &st, TP_TBUF_LIVE))
            break;
    }
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b)
            return NULL;
        b->next_all = atomic_load(&tp_tbufs);
        while (!atomic_compare_exchange_weak(&tp_tbufs, &b->next_all, b))
            ;
    }
    /* atomic: tp_buf_thread_known reads them while a thread registers */
    __atomic_store_n(&b->tid, (int32_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
    __atomic_store_n(&b->pthread_id, (uint32_t)(uintptr_t)pthread_self(), __ATOMIC_RELAXED);
    prctl(PR_GET_NAME, b->name, 0, 0, 0);
    b->name[sizeof b->name - 1] = 0;
    b->cur = NULL;
    b->widx = 0;
    pthread_once(&tp_key_once, tp_key_make);
    pthread_setspecific(tp_tbuf_key, b);
    tp_tls_buf = b;
    return b;
}

/* Link a new chunk "c" at the end of "b"'s chain (its writer). */
static struct tp_record *tp_tbuf_extend(struct tp_tbuf *b, struct tp_chunk *c)
{
    if (b->cur)
        atomic_store_explicit(&b->cur->next, c, memory_order_release);
    else
        atomic_store_explicit(&b->first, c, memory_order_release);
    b->cur = c;
    b->widx = 0;
    return &c->rec[0];
}

struct tp_record *tp_buf_reserve_slow(void)
{
    struct tp_tbuf *b = tp_tls_buf;
    if (!tp_pool)
        return NULL;
    if (!b && !(b = tp_tbuf_register())) {
        atomic_fetch_add_explicit(&tp_dropped_orphan, 1, memory_order_relaxed);
        return NULL;
    }
    if (b->cur && b->widx < TP_CHUNK_RECORDS)
        return &b->cur->rec[b->widx];
    struct tp_chunk *c = NULL;
    if (atomic_load_explicit(&tp_pool_used, memory_order_relaxed) <
        atomic_load_explicit(&tp_pool_limit, memory_order_relaxed))
        c = tp_chunk_get(&tp_general);
    if (!c) {
        atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
        return NULL;
    }
    return tp_tbuf_extend(b, c);
}

int tp_buf_write_step(const struct tp_record *rec)
{
    if (!tp_pool)
        return -1;
    struct tp_tbuf *me = tp_tls_buf ? tp_tls_buf : tp_tbuf_register();
    struct tp_tbuf *b = &tp_steps_buf;
    pthread_mutex_lock(&tp_steps_lock);
    struct tp_record *r = NULL;
    if (b->cur && b->widx < TP_CHUNK_RECORDS) {
        r = &b->cur->rec[b->widx];
    } else {
        struct tp_chunk *c = tp_chunk_get(&tp_reserve);
        if (!c)
            c = tp_chunk_get(&tp_general);
        if (c)
            r = tp_tbuf_extend(b, c);
    }
    if (r) {
        *r = *rec;
        r->u.step.tid = me ? me->tid : (int32_t)syscall(SYS_gettid);
        memcpy(r->u.step.thread, me ? me->name : "", me ? sizeof r->u.step.thread : 1);
        atomic_store_explicit(&b->cur->count, ++b->widx, memory_order_release);
    } else {
        atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&tp_steps_lock);
    return r ? 0 : -1;
}

/* Reader: one thread's records from its read position, up to the first of
 * a later generation than "gen" or, of "gen", starting at tick "stop" or
 * later.  "fn" (may be NULL) gets each record of "gen"; "late" (may be
 * NULL) counts older ones.  "consume": chunks read to the end go back to
 * the pool and the read position moves.  Returns records of "gen" seen
 * (stack frames not counted: they belong to the next record).  The one
 * walk of a window's drain (tp_buf_drain) and of the flight ring's trim
 * (tp_buf_trim). */
static uint64_t tp_walk_one(struct tp_tbuf *b, uint8_t gen, uint64_t stop, tp_drain_fn fn,
                            void *ctx, uint64_t *late, int consume)
{
    uint64_t n = 0;
    struct tp_chunk *c = b->head ? b->head : atomic_load_explicit(&b->first, memory_order_acquire);
    uint32_t i = b->head ? b->ridx : 0;
    while (c) {
        uint32_t cnt = atomic_load_explicit(&c->count, memory_order_acquire);
        for (; i < cnt; i++) {
            const struct tp_record *r = &c->rec[i];
            int8_t age = (int8_t)(uint8_t)(r->gen - gen);
            if (age > 0 || (age == 0 && r->t0 >= stop))
                goto done;
            if (age == 0) {
                n += r->kind != TP_REC_STACK;
                if (fn)
                    fn(ctx, b, r);
            } else if (late && r->kind != TP_REC_STACK) {
                (*late)++;
            }
        }
        if (i < TP_CHUNK_RECORDS)
            break;
        struct tp_chunk *nx = atomic_load_explicit(&c->next, memory_order_acquire);
        if (!nx)
            break;
        if (consume) {
            tp_chunk_put(c);
            b->head = nx;
            b->ridx = 0;
        }
        c = nx;
        i = 0;
    }
done:
    if (consume && c) {
        b->head = c;
        b->ridx = i;
    }
    return n;
}

uint64_t tp_buf_drain(uint8_t gen, tp_drain_fn fn, void *ctx, uint64_t *late, int count_only)
{
    uint64_t n = 0;
    for (struct tp_tbuf *b = atomic_load(&tp_tbufs); b; b = b->next_all) {
        int st = atomic_load_explicit(&b->state, memory_order_acquire);
        if (st == TP_TBUF_RETIRED)
            continue;
        n += tp_walk_one(b, gen, UINT64_MAX, fn, ctx, late, !count_only);
        if (count_only || st != TP_TBUF_EXITED)
            continue;
        /* An exited thread writes no more: once read to the end, give back
         * its last chunk and let a new thread take the buffer. */
        struct tp_chunk *c = b->head;
        if (!c || (b->ridx == atomic_load(&c->count) && !atomic_load(&c->next))) {
            if (c)
                tp_chunk_put(c);
            b->head = NULL;
            b->ridx = 0;
            atomic_store(&b->first, NULL);
            atomic_fetch_add(&tp_dropped_orphan, atomic_exchange(&b->dropped, 0));
            atomic_store_explicit(&b->state, TP_TBUF_RETIRED, memory_order_release);
        }
    }
    return n;
}

void tp_buf_limit(uint32_t chunks)
{
    atomic_store_explicit(&tp_pool_limit, chunks, memory_order_relaxed);
}

uint64_t tp_buf_chunks_taken(void)
{
    return atomic_load_explicit(&tp_pool_taken, memory_order_relaxed);
}

/* One thread's records of "gen" (and older) that began before "tick",
 * consumed from its oldest on; stops at the first that began later. */
void tp_buf_trim(uint8_t gen, uint64_t tick)
{
    for (struct tp_tbuf *b = atomic_load(&tp_tbufs); b; b = b->next_all)
        if (atomic_load_explicit(&b->state, memory_order_acquire) != TP_TBUF_RETIRED)
            tp_walk_one(b, gen, tick, NULL, NULL, NULL, 1);
}

int tp_buf_thread_known(uint32_t id)
{
    if (id == 0)
        return 0;
    for (struct tp_tbuf *b = atomic_load(&tp_tbufs); b; b = b->next_all)
        if ((uint32_t)__atomic_load_n(&b->tid, __ATOMIC_RELAXED) == id ||
            __atomic_load_n(&b->pthread_id, __ATOMIC_RELAXED) == id)
            return 1;
    return 0;
}

uint64_t tp_buf_dropped(void)
{
    uint64_t n = atomic_load(&tp_dropped_orphan);
    for (struct tp_tbuf *b = atomic_load(&tp_tbufs); b; b = b->next_all)
        n += atomic_load_explicit(&b->dropped, memory_order_relaxed);
    return n;
}

uint32_t tp_buf_chunks_in_use(void)
{
    return atomic_load(&tp_pool_used);
}
