/*
 * cupti_buffers.c - DESIGN: the activity buffers CUPTI fills, from a pool
 * of ours (the CUPTI samples' buffer-requested/buffer-completed pair).
 * Buffers are 4 MiB each from fresh anonymous mappings (zero pages, so
 * CUPTI is told ZEROED_OUT_ACTIVITY_BUFFER = 1 and never zeroes on
 * application threads).  16 are mapped at the first start; "requested"
 * (any thread) takes one from a free bitmap with a CAS, maps a new one up
 * to 32 (both fewer when TRAINPROF_BUFFER_MB is under 256: an eighth of
 * it, at least 2), then recycles the oldest completed-but-undecoded buffer (its
 * records counted as lost), then maps more up to 256; it returns NULL only
 * when mmap fails or 256 buffers are out (refusing can crash CUPTI < 12.9:
 * Kineto's note).  "completed" (a CUPTI thread) pushes (buffer, validSize)
 * on a FIFO under a mutex of ours that is never held across a CUPTI call.
 * Draining happens on tp-flush only: every completed buffer's records go to
 * the caller's function, then the buffer is zeroed with
 * madvise(MADV_DONTNEED) and put back in the bitmap.  Once a termination
 * or fatal signal came (tp_cupti_hurried), the drain waits for that mutex
 * at most TP_DONE_WAIT_MS: the thread the signal interrupted may be inside
 * our callback, holding it (CUPTI calls "requested" on application
 * threads), and the save must not wait on it; the buffers left are left
 * out.
 */
#include "cupti_impl.h"

#include "collector/config/config.h"
#include "collector/common/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define TP_BUF_SIZE   (4u << 20)
#define TP_POOL_INIT  16
#define TP_POOL_SOFT  32                 /* with the default TRAINPROF_BUFFER_MB (256) */
#define TP_POOL_MAX   256
#define TP_POOL_WORDS (TP_POOL_MAX / 64)
#define TP_DONE_WAIT_MS 100

static uint8_t *_Atomic tp_slot[TP_POOL_MAX];     /* mapping of each slot, NULL if none */
static atomic_uint tp_slots_claimed;               /* slot indexes handed to a mapping */
static _Atomic uint64_t tp_free[TP_POOL_WORDS];    /* bit set: slot free, zeroed */
static _Atomic uint64_t tp_dropped_async;          /* records lost by recycling buffers */
static atomic_int tp_foreign_said;

static pthread_mutex_t tp_done_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uint16_t slot; size_t valid; } tp_done[TP_POOL_MAX];  /* FIFO of completed */
static unsigned tp_done_head, tp_done_n;

static uint8_t *tp_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The soft cap follows TRAINPROF_BUFFER_MB: an eighth of it in 4 MiB
 * buffers (32 at the default 256), at least 2; the first mapping is at
 * most that.  Set once, before CUPTI can ask for a buffer. */
static unsigned tp_pool_soft = TP_POOL_SOFT;

static int tp_pool_init(void)
{
    if (atomic_load(&tp_slots_claimed))
        return 0;
    long soft = tp_cfg.buffer_mb / 8;
    tp_pool_soft = soft < 2 ? 2 : soft > TP_POOL_SOFT ? TP_POOL_SOFT : (unsigned)soft;
    unsigned init = tp_pool_soft < TP_POOL_INIT ? tp_pool_soft : TP_POOL_INIT;
    uint8_t *base = tp_map((size_t)init * TP_BUF_SIZE);
    if (!base)
        return -1;
    for (unsigned i = 0; i < init; i++)
        atomic_store(&tp_slot[i], base + (size_t)i * TP_BUF_SIZE);
    atomic_store(&tp_slots_claimed, init);
    atomic_fetch_or(&tp_free[0], (init >= 64 ? ~0ull : (1ull << init) - 1));
    return 0;
}

static int tp_pool_take_free(void)
{
    for (unsigned w = 0; w < TP_POOL_WORDS; w++) {
        uint64_t m = atomic_load_explicit(&tp_free[w], memory_order_acquire);
        while (m) {
            int b = __builtin_ctzll(m);
            if (atomic_compare_exchange_weak_explicit(&tp_free[w], &m, m & ~(1ull << b),
                                                      memory_order_acq_rel, memory_order_acquire))
                return (int)(w * 64 + (unsigned)b);
        }
    }
    return -1;
}

/* A new slot with a fresh (zero) mapping, while fewer than "limit" exist. */
static int tp_pool_grow(unsigned limit)
{
    unsigned i = atomic_load(&tp_slots_claimed);
    do {
        if (i >= limit)
            return -1;
    } while (!atomic_compare_exchange_weak(&tp_slots_claimed, &i, i + 1));
    uint8_t *p = tp_map(TP_BUF_SIZE);
    if (!p)
        return -1;                      /* the slot stays unmapped */
    atomic_store(&tp_slot[i], p);
    return (int)i;
}

static int tp_slot_of(const uint8_t *buf)
{
    unsigned n = atomic_load(&tp_slots_claimed);
    for (unsigned i = 0; i < n && i < TP_POOL_MAX; i++)
        if (buf && atomic_load_explicit(&tp_slot[i], memory_order_acquire) == buf)
            return (int)i;
    return -1;
}

/* Zero a used buffer (private anonymous pages read back as zero after
 * MADV_DONTNEED, and their memory is returned) and mark it free. */
static void tp_pool_release(int i, int used)
{
    uint8_t *p = atomic_load(&tp_slot[i]);
    if (used && madvise(p, TP_BUF_SIZE, MADV_DONTNEED) != 0)
        memset(p, 0, TP_BUF_SIZE);
    atomic_fetch_or_explicit(&tp_free[i / 64], 1ull << (i % 64), memory_order_release);
}

/* tp_done_lock, bounded to TP_DONE_WAIT_MS when "bounded"; 1 if taken. */
static int tp_done_enter(int bounded)
{
    if (!bounded) {
        pthread_mutex_lock(&tp_done_lock);
        return 1;
    }
    for (int ms = 0; ms < TP_DONE_WAIT_MS; ms++) {
        if (pthread_mutex_trylock(&tp_done_lock) == 0)
            return 1;
        struct timespec d = { 0, 1000000 };
        nanosleep(&d, NULL);
    }
    return 0;
}

static int tp_done_pop(size_t *valid, int bounded)
{
    int slot = -1;
    if (!tp_done_enter(bounded))
        return -1;
    if (tp_done_n) {
        slot = tp_done[tp_done_head].slot;
        *valid = tp_done[tp_done_head].valid;
        tp_done_head = (tp_done_head + 1) % TP_POOL_MAX;
        tp_done_n--;
    }
    pthread_mutex_unlock(&tp_done_lock);
    return slot;
}

static void CUPTIAPI tp_buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0;
    int i = tp_pool_take_free();
    if (i < 0)
        i = tp_pool_grow(tp_pool_soft);
    if (i < 0) {
        size_t valid = 0;
        i = tp_done_pop(&valid, 0);
        if (i >= 0) {
            /* Over the soft cap: sacrifice the oldest undecoded buffer. */
            uint8_t *p = atomic_load(&tp_slot[i]);
            CUpti_Activity *a = NULL;
            uint64_t n = 0;
            while (tp_cupti_fn.cuptiActivityGetNextRecord(p, valid, &a) == CUPTI_SUCCESS) {
                tp_cupti_record_discard(a);
                n++;
            }
            atomic_fetch_add(&tp_dropped_async, n);
            if (madvise(p, TP_BUF_SIZE, MADV_DONTNEED) != 0)
                memset(p, 0, TP_BUF_SIZE);
        }
    }
    if (i < 0)
        i = tp_pool_grow(TP_POOL_MAX);
    if (i < 0) {
        *buffer = NULL;
        *size = 0;
        return;
    }
    *buffer = atomic_load(&tp_slot[i]);
    *size = TP_BUF_SIZE;
}

static void CUPTIAPI tp_buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    int i = tp_slot_of(buffer);
    if (i < 0) {
        /* Another client re-registered the callbacks: not ours to free. */
        if (!atomic_exchange(&tp_foreign_said, 1))
            TP_WARN("CUPTI returned a buffer trainprof did not hand out; ignored");
        return;
    }
    if (valid == 0) {
        tp_pool_release(i, 1);
        return;
    }
    pthread_mutex_lock(&tp_done_lock);
    unsigned tail = (tp_done_head + tp_done_n) % TP_POOL_MAX;
    tp_done[tail].slot = (uint16_t)i;
    tp_done[tail].valid = valid;
    tp_done_n++;
    pthread_mutex_unlock(&tp_done_lock);
}

int tp_cupti_buf_register(void)
{
    uint8_t zeroed = 1;
    size_t zsz = sizeof zeroed;
    tp_cupti_fn.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zsz,
                                          &zeroed);
    if (tp_pool_init() != 0 ||
        tp_cupti_fn.cuptiActivityRegisterCallbacks(tp_buf_requested, tp_buf_completed) !=
            CUPTI_SUCCESS)
        return -1;
    return 0;
}

void tp_cupti_buf_drain(int (*each)(const void *record))
{
    size_t valid;
    int i;
    while ((i = tp_done_pop(&valid, tp_cupti_hurried())) >= 0) {
        uint8_t *buf = atomic_load(&tp_slot[i]);
        CUpti_Activity *a = NULL;
        for (;;) {
            CUptiResult rc = tp_cupti_fn.cuptiActivityGetNextRecord(buf, valid, &a);
            if (rc != CUPTI_SUCCESS)
                break;                  /* MAX_LIMIT_REACHED: done; INVALID_KIND: incomplete */
            each(a);
        }
        tp_pool_release(i, 1);
    }
}

uint64_t tp_cupti_buf_lost(void)
{
    return atomic_exchange(&tp_dropped_async, 0);
}
