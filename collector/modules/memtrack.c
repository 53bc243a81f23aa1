/*
 * memtrack.c - DESIGN: the device-memory timeline of the process (the
 * handler that reports it is handlers/memory.c).
 *
 * Allocation calls are rare next to launches (a caching allocator such as
 * PyTorch's calls cudaMalloc a few hundred times per run), so one mutex
 * (tp_mem_lock, a futex) guards everything here; the launch path never
 * comes near it.  Between windows an allocation's wrapper comes here
 * through its lean path (preload/wrap.h TP_WRAP_LEANFN: the real call and
 * tp_mem_alloc_lean or tp_mem_free_at, nothing else), so these two are
 * the whole cost of tracking there: their common case is one lock, a
 * comparison with the last allocation's call site (else one probe of the
 * origins' index) and one probe of the address table.  Two
 * open-addressing tables (linear probing, backward-shift deletion, doubled at
 * half load) map device addresses and, apart from them, VMM allocation
 * handles (cuMemCreate/cuMemRelease: physical memory has no address until
 * cuMemMap) to (bytes, device, class).  Per (device, class) an account keeps
 * the running total, the process peak, and the counters of the window that
 * records now; windows never record at the same time (window N stops
 * before N+1 starts) but window N may still wait to be written, so its
 * snapshot is kept per generation until the flush thread takes it.
 * The table is updated on every call while tp_mem_on, not only while a
 * window records: a window's start level and the frees of memory allocated
 * before it are only right that way.  The device of an allocation comes
 * from side-effect-free driver queries, made only when libcuda is already
 * loaded; never from the runtime (README "Never harming the job").
 *
 * The memory ledger (README "Memory ledger") rides on the same table: each
 * allocation comes with where it came from (struct tp_mem_from: the return
 * address into its caller and the outer library call, raw values), which
 * makes it one of the ledger's call sites ("origins": an append-only array
 * with an open-addressing index on (site, outer call, device, class,
 * stack)); the address table keeps each allocation's origin, so a free
 * goes back to it wherever it is called from.  Per origin: the bytes held,
 * its peak and counts; the bytes held when each of the last 4 windows
 * began (a window's owner table is replayed from them, drain/memview.c);
 * and the bytes held at each of the last 10 step ends, filled lazily (a
 * step end costs one atomic store, tp_mem_step; an origin that changes
 * writes the step ends it missed, at most 10).  A failed allocation for
 * want of memory starts a burst (failures less than 5 s apart): its first
 * failure copies every origin's level and step-end levels and keeps the
 * driver's free and total bytes, so that the report tp-flush writes later
 * (collector/control/oom.c) describes that moment.  Names are never made
 * here: memowner.c gives them on tp-flush.  With TRAINPROF_MEMORY_STACKS
 * the allocation's native stack is taken before the lock and interned.
 * The ledger runs from activation to exit (not only to the schedule's
 * end): the out-of-memory report and the memory held at exit need it.
 */
#include "memtrack.h"
#include "collector/config/config.h"
#include "module.h"
#include "collector/contract/sink.h"
#include "collector/common/loader.h"
#include "collector/common/clock.h"
#include "stack.h"

#include <cuda.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic int tp_mem_on;

struct tp_mem_ent {
    uint64_t key;           /* 0: empty slot (no allocation has address 0) */
    uint64_t bytes;
    int16_t  device;
    uint8_t  mclass;
    uint8_t  acct;          /* its account in tp_acct (a free finds it without a search) */
    uint32_t origin;        /* its call site in tp_orig, TP_MEM_NO_ORIGIN if none */
};

/* An account index for none (TP_MEM_MAX_ACCT accounts were full). */
#define TP_MEM_NO_ACCT 0xff
_Static_assert(TP_MEM_MAX_ACCT < TP_MEM_NO_ACCT, "account indexes fit a byte");

/* Window starts kept per call site: a window may wait to be written while
 * the next ones record (flusher.c queues 16), but the starts of the 4 most
 * recent windows cover what a flush thread that keeps up needs; an older
 * window's start is reported unknown. */
#define TP_MEM_WSLOTS 4

/* A call site of the ledger: (site, outer, device, class, stack). */
struct tp_mem_orig {
    uint64_t site;
    uint32_t stack;                 /* TRAINPROF_MEMORY_STACKS: its stack's id, 0 none */
    uint16_t outer, api;
    int16_t  device;
    uint8_t  mclass;
    uint8_t  acct;                  /* the account of (device, class), TP_MEM_NO_ACCT if none */
    uint64_t live, peak, allocated, allocs, frees, failed;
    uint64_t wstart[TP_MEM_WSLOTS];
    uint64_t ring[TP_MEM_GROWTH];   /* held at the end of step e, at ring[e % 10] */
    uint64_t upto;                  /* ring filled up to step end "upto" */
    uint64_t oom_live;              /* at the current burst's first failure */
    uint64_t oom_ring[TP_MEM_GROWTH];
};

struct tp_mem_tab {
    struct tp_mem_ent *v;
    size_t cap, n;          /* cap: a power of two, or 0 */
};

struct tp_mem_acct {
    int16_t  device;
    uint8_t  mclass;
    uint64_t total, peak;
    /* the window recording now */
    uint64_t wstart, wpeak, wpeak_tick;
    uint64_t allocs, frees, failed, failed_bytes;
};

/* Windows waiting to be written: more than flusher.c's queue of 16 plus the
 * one recording. */
#define TP_MEM_SNAPS 32

struct tp_mem_snap {
    int used;
    uint8_t gen;
    int n;
    struct tp_mem_usage u[TP_MEM_MAX_ACCT];  /* peak_ns holds a tick until taken */
};

/* The helpers of the common allocation and free (tp_mem_alloc_at,
 * tp_mem_free_at) are inlined into them: a call per helper cost more than
 * the helper's work (saved registers), and those two are the cost of
 * tracking between windows; the rare paths stay out of line. */
#define TP_MEM_HOT static inline __attribute__((always_inline))
#define TP_MEM_COLD static __attribute__((noinline, cold))

/*
 * tp_mem_lock - the ledger's mutex: 0 free, 1 held, 2 held and a thread
 * may sleep on it (a futex: the third mutex of Drepper's "Futexes Are
 * Tricky", what glibc's own lock does, less pthread_mutex_lock's checks of
 * the mutex's kind, about 50 instructions per lock and unlock on the
 * allocation path).  Uncontended, a compare-and-swap to take it and a
 * decrement to give it back; a waiter sleeps in the kernel, so a thread
 * that holds it for long (the flush thread copying the origins) costs the
 * others no spinning.  Acquire and release order the ledger's data as a
 * pthread mutex does (TSan sees the atomics).
 */
static _Atomic int tp_mem_lock;
/* This thread holds tp_mem_lock: an allocation made by a signal handler
 * that interrupted it (not async-signal-safe, but programs do it) goes
 * uncounted rather than wait for a lock its own thread holds. */
static __thread int tp_mem_mine __attribute__((tls_model("initial-exec")));

TP_MEM_COLD void tp_mem_wait(void)
{
    /* mark it contended; sleep while it stays held */
    int c = atomic_exchange_explicit(&tp_mem_lock, 2, memory_order_acquire);
    while (c != 0) {
        syscall(SYS_futex, &tp_mem_lock, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
        c = atomic_exchange_explicit(&tp_mem_lock, 2, memory_order_acquire);
    }
}

TP_MEM_COLD void tp_mem_wake(void)
{
    atomic_store_explicit(&tp_mem_lock, 0, memory_order_release);
    syscall(SYS_futex, &tp_mem_lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

TP_MEM_HOT void tp_mem_take(void)
{
    int c = 0;
    if (!atomic_compare_exchange_strong_explicit(&tp_mem_lock, &c, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        tp_mem_wait();
    tp_mem_mine = 1;
}

/* tp_mem_take if the lock is free now: 1 if taken. */
static int tp_mem_try(void)
{
    int c = 0;
    if (!atomic_compare_exchange_strong_explicit(&tp_mem_lock, &c, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return 0;
    tp_mem_mine = 1;
    return 1;
}

TP_MEM_HOT void tp_mem_give(void)
{
    tp_mem_mine = 0;
    if (atomic_fetch_sub_explicit(&tp_mem_lock, 1, memory_order_release) != 1)
        tp_mem_wake();      /* it was 2: someone may sleep on it */
}
static struct tp_mem_tab tp_addrs, tp_handles;
static struct tp_mem_acct tp_acct[TP_MEM_MAX_ACCT];
static int tp_nacct;
static int tp_win_open;
static uint64_t tp_win_tick;
static struct tp_mem_snap tp_snaps[TP_MEM_SNAPS];

/* the call sites (append-only: a record's origin stays valid) and their
 * index, open addressing over origin + 1 (0: empty) */
static struct tp_mem_orig *tp_orig;
static uint32_t tp_norig, tp_orig_cap;
static uint32_t *tp_orig_idx;
static size_t tp_orig_idx_cap;
static int tp_wslot_gen[TP_MEM_WSLOTS] = { -1, -1, -1, -1 };
static uint32_t tp_orig_last = TP_MEM_NO_ORIGIN;   /* the last allocation's (tp_orig_of) */

/* TRAINPROF_MEMORY_STACKS (or TRAINPROF_WITH_STACK): the native stack of
 * each allocation, interned (id = index + 1) with an index on its hash */
struct tp_mem_stk {
    uint64_t hash;
    int n;
    uint64_t *ips;
};
static int tp_mem_stacks;
static struct tp_mem_stk *tp_stk;
static uint32_t tp_nstk, tp_stk_cap;
static uint32_t *tp_stk_idx;
static size_t tp_stk_idx_cap;
#define TP_MEM_MAX_STACKS 65536
static _Atomic uint64_t tp_mem_steps;   /* steps completed (tp_mem_step) */

/* the current burst of failed allocations */
#define TP_OOM_GAP_NS 5000000000ull     /* failures closer than this: one burst */
static struct tp_mem_oom tp_oom;
static int tp_oom_state;                /* 0 none yet, 1 a report is due, 2 reported */
static unsigned tp_oom_bursts;

void tp_mem_enable(int on)
{
    /* touch the tables now (activation), not at a window's first use: a
     * first-touch page fault costs several µs in a step here */
    if (on && !atomic_load(&tp_mem_on)) {
        tp_mem_take();
        memset(tp_snaps, 0, sizeof tp_snaps);
        memset(tp_acct + tp_nacct, 0, sizeof tp_acct - (size_t)tp_nacct * sizeof *tp_acct);
        tp_mem_give();
    }
    atomic_store(&tp_mem_on, on ? 1 : 0);
}

/* ---- driver queries ------------------------------------------------------ */

typedef CUresult (*tp_ctxdev_fn)(CUdevice *);
typedef CUresult (*tp_ptrattr_fn)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*tp_meminfo_fn)(size_t *, size_t *);
static _Atomic(tp_ctxdev_fn) tp_ctxdev;
static _Atomic(tp_ptrattr_fn) tp_ptrattr;
static _Atomic(tp_meminfo_fn) tp_meminfo;

/* Look the queries up once libcuda is in the process (never load it);
 * tp_driver_syms probes again only after the loader has added objects. */
TP_MEM_COLD void tp_mem_driver_find(void)
{
    static const char *const names[] = { "cuPointerGetAttribute", "cuCtxGetDevice", "cuMemGetInfo_v2" };
    void *fn[3];
    if (tp_driver_syms(names, fn, 3) != 0)
        return;
    if (fn[2])
        atomic_store_explicit(&tp_meminfo, (tp_meminfo_fn)fn[2], memory_order_release);
    if (fn[0])
        atomic_store_explicit(&tp_ptrattr, (tp_ptrattr_fn)fn[0], memory_order_release);
    if (fn[1])
        atomic_store_explicit(&tp_ctxdev, (tp_ctxdev_fn)fn[1], memory_order_release);
}

/* (inlined: after the first call, one load) */
TP_MEM_HOT void tp_mem_driver(void)
{
    if (__builtin_expect(!atomic_load_explicit(&tp_ctxdev, memory_order_acquire), 0))
        tp_mem_driver_find();
}

int tp_mem_current_device(void)
{
    tp_mem_driver();
    tp_ctxdev_fn cd = atomic_load_explicit(&tp_ctxdev, memory_order_acquire);
    CUdevice d = 0;
    if (cd && cd(&d) == CUDA_SUCCESS && d >= 0 && d < INT16_MAX)
        return d;
    return 0;
}

/* The driver's free and total bytes of the calling thread's current
 * device (cuMemGetInfo_v2: a query of the context it holds); 0 if it answered. */
static int tp_mem_info(uint64_t *free_b, uint64_t *total_b)
{
    tp_mem_driver();
    tp_meminfo_fn mi = atomic_load_explicit(&tp_meminfo, memory_order_acquire);
    size_t f = 0, t = 0;
    if (!mi || mi(&f, &t) != CUDA_SUCCESS || t == 0)
        return -1;
    *free_b = f;
    *total_b = t;
    return 0;
}

TP_MEM_HOT int tp_mem_pointer_dev(uint64_t addr)
{
    tp_mem_driver();
    tp_ptrattr_fn pa = atomic_load_explicit(&tp_ptrattr, memory_order_acquire);
    int ord = -1;
    if (addr && pa && pa(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)addr) == CUDA_SUCCESS &&
        ord >= 0 && ord < INT16_MAX)
        return ord;
    tp_ctxdev_fn cd = atomic_load_explicit(&tp_ctxdev, memory_order_acquire);
    CUdevice d = 0;
    if (cd && cd(&d) == CUDA_SUCCESS && d >= 0 && d < INT16_MAX)
        return d;
    return 0;
}

int tp_mem_pointer_device(uint64_t addr)
{
    return tp_mem_pointer_dev(addr);
}

/* ---- the address tables (lock held) ---------------------------------------- */

TP_MEM_HOT size_t tp_mem_hash(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

/* Put "value" (non-zero) into the first free slot from "home" of the
 * open-addressing index "idx" of "cap" slots (a power of two). */
static void tp_idx_put(uint32_t *idx, size_t cap, size_t home, uint32_t value)
{
    size_t j = home;
    while (idx[j])
        j = (j + 1) & (cap - 1);
    idx[j] = value;
}

TP_MEM_COLD int tp_tab_grow(struct tp_mem_tab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    struct tp_mem_ent *v = calloc(cap, sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->v[i].key)
            continue;
        size_t j = tp_mem_hash(t->v[i].key, cap);
        while (v[j].key)
            j = (j + 1) & (cap - 1);
        v[j] = t->v[i];
    }
    free(t->v);
    t->v = v;
    t->cap = cap;
    return 0;
}

/* Insert "e", or replace the entry of its key, kept in *old: 1 if one was
 * replaced, 0 if inserted, -1 when out of memory (the allocation goes
 * uncounted; there was no entry of its key). */
TP_MEM_HOT int tp_tab_set(struct tp_mem_tab *t, const struct tp_mem_ent *e, struct tp_mem_ent *old)
{
    if (t->cap) {
        size_t j = tp_mem_hash(e->key, t->cap);
        while (t->v[j].key && t->v[j].key != e->key)
            j = (j + 1) & (t->cap - 1);
        if (t->v[j].key) {
            *old = t->v[j];
            t->v[j] = *e;
            return 1;
        }
        if ((t->n + 1) * 2 <= t->cap) {
            t->v[j] = *e;
            t->n++;
            return 0;
        }
    }
    if (tp_tab_grow(t) != 0)
        return -1;
    size_t j = tp_mem_hash(e->key, t->cap);
    while (t->v[j].key)
        j = (j + 1) & (t->cap - 1);
    t->v[j] = *e;
    t->n++;
    return 0;
}

/* The entry of "key", or NULL. */
static struct tp_mem_ent *tp_tab_find(struct tp_mem_tab *t, uint64_t key)
{
    if (!t->cap || !key)
        return NULL;
    size_t j = tp_mem_hash(key, t->cap);
    while (t->v[j].key && t->v[j].key != key)
        j = (j + 1) & (t->cap - 1);
    return t->v[j].key ? &t->v[j] : NULL;
}

/* Remove "key" into *out; 0 if found. */
TP_MEM_HOT int tp_tab_take(struct tp_mem_tab *t, uint64_t key, struct tp_mem_ent *out)
{
    if (!t->cap || !key)
        return -1;
    size_t mask = t->cap - 1, j = tp_mem_hash(key, t->cap);
    while (t->v[j].key && t->v[j].key != key)
        j = (j + 1) & mask;
    if (!t->v[j].key)
        return -1;
    *out = t->v[j];
    t->n--;
    /* backward-shift deletion: no tombstones, probes stay short */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; t->v[k].key; k = (k + 1) & mask) {
        size_t home = tp_mem_hash(t->v[k].key, t->cap);
        if (((k - home) & mask) >= ((k - hole) & mask)) {
            t->v[hole] = t->v[k];
            hole = k;
        }
    }
    memset(&t->v[hole], 0, sizeof t->v[hole]);
    return 0;
}

/* ---- accounts (lock held) ------------------------------------------------- */

static struct tp_mem_acct *tp_acct_of(int device, int mclass)
{
    for (int i = 0; i < tp_nacct; i++)
        if (tp_acct[i].device == device && tp_acct[i].mclass == mclass)
            return &tp_acct[i];
    if (tp_nacct == TP_MEM_MAX_ACCT)
        return NULL;
    /* (the account's index is kept by its origins and entries: accounts
     * are never removed or moved before tp_mem_reset) */
    struct tp_mem_acct *a = &tp_acct[tp_nacct++];
    memset(a, 0, sizeof *a);
    a->device = (int16_t)device;
    a->mclass = (uint8_t)mclass;
    a->wpeak_tick = tp_win_tick;
    return a;
}

/* The account at index "i" (an entry's or origin's acct), or NULL. */
TP_MEM_HOT struct tp_mem_acct *tp_acct_at(unsigned i)
{
    return i < (unsigned)tp_nacct ? &tp_acct[i] : NULL;
}

TP_MEM_HOT uint8_t tp_acct_index(const struct tp_mem_acct *a)
{
    return a ? (uint8_t)(a - tp_acct) : TP_MEM_NO_ACCT;
}

TP_MEM_HOT void tp_acct_add(struct tp_mem_acct *a, uint64_t bytes)
{
    a->total += bytes;
    if (a->total > a->peak)
        a->peak = a->total;
    if (tp_win_open) {
        a->allocs++;
        if (a->total > a->wpeak) {
            a->wpeak = a->total;
            a->wpeak_tick = tp_clock_now();
        }
    }
}

TP_MEM_HOT void tp_acct_sub(struct tp_mem_acct *a, uint64_t bytes)
{
    a->total = a->total >= bytes ? a->total - bytes : 0;
    if (tp_win_open)
        a->frees++;
}

/* ---- call sites (lock held) ------------------------------------------------ */

static uint64_t tp_stk_hash(const uint64_t *ips, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= ips[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    return h;
}

/* The id of stack "ips" (n frames), added if new; 0 if none can be kept. */
static uint32_t tp_stk_of(const uint64_t *ips, int n)
{
    if (n <= 0)
        return 0;
    uint64_t h = tp_stk_hash(ips, n);
    if (tp_stk_idx_cap) {
        size_t j = tp_mem_hash(h | 1, tp_stk_idx_cap);
        for (; tp_stk_idx[j]; j = (j + 1) & (tp_stk_idx_cap - 1)) {
            const struct tp_mem_stk *k = &tp_stk[tp_stk_idx[j] - 1];
            if (k->hash == h && k->n == n && memcmp(k->ips, ips, (size_t)n * sizeof *ips) == 0)
                return tp_stk_idx[j];
        }
    }
    if (tp_nstk >= TP_MEM_MAX_STACKS)
        return 0;
    if (tp_nstk == tp_stk_cap) {
        uint32_t cap = tp_stk_cap ? tp_stk_cap * 2 : 64;
        struct tp_mem_stk *v = realloc(tp_stk, (size_t)cap * sizeof *v);
        if (!v)
            return 0;
        tp_stk = v;
        tp_stk_cap = cap;
        size_t icap = (size_t)cap * 2;
        uint32_t *idx = calloc(icap, sizeof *idx);
        if (!idx)
            return 0;
        for (uint32_t i = 0; i < tp_nstk; i++)
            tp_idx_put(idx, icap, tp_mem_hash(tp_stk[i].hash | 1, icap), i + 1);
        free(tp_stk_idx);
        tp_stk_idx = idx;
        tp_stk_idx_cap = icap;
    }
    uint64_t *copy = malloc((size_t)n * sizeof *copy);
    if (!copy)
        return 0;
    memcpy(copy, ips, (size_t)n * sizeof *copy);
    tp_stk[tp_nstk] = (struct tp_mem_stk){ h, n, copy };
    tp_idx_put(tp_stk_idx, tp_stk_idx_cap, tp_mem_hash(h | 1, tp_stk_idx_cap), ++tp_nstk);
    return tp_nstk;
}

TP_MEM_HOT size_t tp_orig_hash(uint64_t site, unsigned outer, int device, int mclass, uint32_t stack, size_t cap)
{
    uint64_t k = site ^ ((uint64_t)outer << 48) ^ ((uint64_t)(uint16_t)device << 32) ^ ((uint64_t)mclass << 56) ^
                 ((uint64_t)stack * 0x9e3779b97f4a7c15ull);
    return tp_mem_hash(k ? k : 1, cap);
}

TP_MEM_HOT int tp_orig_same(const struct tp_mem_orig *o, uint64_t site, unsigned outer, int device, int mclass,
                        uint32_t stack)
{
    return o->site == site && o->outer == outer && o->device == device && o->mclass == mclass &&
           o->stack == stack;
}

/* Bring the step-end values of "o" up to step end "steps": each step end
 * since the last change held what it holds now. */
TP_MEM_HOT void tp_orig_fill(struct tp_mem_orig *o, uint64_t steps)
{
    if (o->upto >= steps)
        return;
    uint64_t e = steps - o->upto > TP_MEM_GROWTH ? steps - TP_MEM_GROWTH : o->upto;
    for (e++; e <= steps; e++)
        o->ring[e % TP_MEM_GROWTH] = o->live;
    o->upto = steps;
}

TP_MEM_COLD int tp_orig_grow(void)
{
    uint32_t cap = tp_orig_cap ? tp_orig_cap * 2 : 64;
    struct tp_mem_orig *v = realloc(tp_orig, (size_t)cap * sizeof *v);
    if (!v)
        return -1;
    tp_orig = v;
    tp_orig_cap = cap;
    size_t icap = (size_t)cap * 2;
    uint32_t *idx = calloc(icap, sizeof *idx);
    if (!idx)
        return -1;
    for (uint32_t i = 0; i < tp_norig; i++) {
        const struct tp_mem_orig *o = &tp_orig[i];
        tp_idx_put(idx, icap, tp_orig_hash(o->site, o->outer, o->device, o->mclass, o->stack, icap), i + 1);
    }
    free(tp_orig_idx);
    tp_orig_idx = idx;
    tp_orig_idx_cap = icap;
    return 0;
}

/* The call site (site, outer, device, class, stack) if the ledger has it,
 * else TP_MEM_NO_ORIGIN. */
TP_MEM_HOT uint32_t tp_orig_find(uint64_t site, unsigned outer, int device, int mclass, uint32_t stack)
{
    if (tp_orig_idx_cap) {
        size_t j = tp_orig_hash(site, outer, device, mclass, stack, tp_orig_idx_cap);
        for (; tp_orig_idx[j]; j = (j + 1) & (tp_orig_idx_cap - 1))
            if (tp_orig_same(&tp_orig[tp_orig_idx[j] - 1], site, outer, device, mclass, stack))
                return tp_orig_idx[j] - 1;
    }
    return TP_MEM_NO_ORIGIN;
}

/* tp_orig_of for a call site the ledger does not have yet. */
TP_MEM_COLD uint32_t tp_orig_new(const struct tp_mem_from *from, int device, int mclass, uint32_t stack)
{
    uint64_t site = from->site;
    unsigned outer = from->outer;
    for (int tries = 0; tries < 2; tries++) {
        /* (the first try's site was looked up by tp_orig_of) */
        uint32_t known = tries ? tp_orig_find(site, outer, device, mclass, stack) : TP_MEM_NO_ORIGIN;
        if (known != TP_MEM_NO_ORIGIN)
            return known;
        if (tp_norig < TP_MEM_MAX_ORIGINS && (tp_norig < tp_orig_cap || tp_orig_grow() == 0)) {
            uint32_t i = tp_norig++;
            struct tp_mem_orig *o = &tp_orig[i];
            memset(o, 0, sizeof *o);
            o->site = site;
            o->stack = stack;
            o->outer = (uint16_t)outer;
            o->api = from->api;
            o->device = (int16_t)device;
            o->mclass = (uint8_t)mclass;
            o->acct = tp_acct_index(tp_acct_of(device, mclass));
            o->upto = atomic_load_explicit(&tp_mem_steps, memory_order_relaxed);
            tp_idx_put(tp_orig_idx, tp_orig_idx_cap,
                       tp_orig_hash(site, outer, device, mclass, stack, tp_orig_idx_cap), i + 1);
            return i;
        }
        if (!site && !outer && !stack)
            break;
        site = 0;           /* full: the (device, class)'s unknown site */
        outer = 0;
        stack = 0;
    }
    return TP_MEM_NO_ORIGIN;
}

/* The call site of "from" in (device, class), added if new; past
 * TP_MEM_MAX_ORIGINS (or out of memory) the (device, class)'s unknown one;
 * TP_MEM_NO_ORIGIN if even that cannot be had. */
TP_MEM_HOT uint32_t tp_orig_of(const struct tp_mem_from *from, int device, int mclass, uint32_t stack)
{
    /* the call site of the last allocation first: a loop allocates from
     * one site again and again (no hash, no probe) */
    uint32_t i = tp_orig_last;
    if (i < tp_norig && tp_orig_same(&tp_orig[i], from->site, from->outer, device, mclass, stack))
        return i;
    i = tp_orig_find(from->site, from->outer, device, mclass, stack);
    if (i == TP_MEM_NO_ORIGIN)
        i = tp_orig_new(from, device, mclass, stack);
    tp_orig_last = i;
    return i;
}

TP_MEM_HOT void tp_orig_add(uint32_t i, uint64_t bytes)
{
    if (i >= tp_norig)
        return;
    struct tp_mem_orig *o = &tp_orig[i];
    tp_orig_fill(o, atomic_load_explicit(&tp_mem_steps, memory_order_relaxed));
    o->live += bytes;
    o->allocated += bytes;
    o->allocs++;
    if (o->live > o->peak)
        o->peak = o->live;
}

TP_MEM_HOT void tp_orig_sub(uint32_t i, uint64_t bytes, int counted)
{
    if (i >= tp_norig)
        return;
    struct tp_mem_orig *o = &tp_orig[i];
    tp_orig_fill(o, atomic_load_explicit(&tp_mem_steps, memory_order_relaxed));
    o->live = o->live >= bytes ? o->live - bytes : 0;
    if (counted)
        o->frees++;
}

/* A failed allocation for want of memory: the first of a burst keeps what
 * every call site held then (the report is written later, on tp-flush,
 * while the program's allocator may already be freeing and retrying). */
static void tp_oom_note(const struct tp_mem_from *from, uint32_t origin, int device, int mclass,
                        uint64_t bytes, int meminfo, uint64_t mfree, uint64_t mtotal)
{
    uint64_t now = tp_clock_ns();
    if (tp_oom_state != 0 && now - tp_oom.last_ns < TP_OOM_GAP_NS) {
        tp_oom.failures++;
        tp_oom.last_ns = now;
        return;
    }
    uint64_t steps = atomic_load_explicit(&tp_mem_steps, memory_order_relaxed);
    memset(&tp_oom, 0, sizeof tp_oom);
    tp_oom.ns = tp_oom.last_ns = now;
    tp_oom.bytes = bytes;
    tp_oom.device = (int16_t)device;
    tp_oom.mclass = (uint8_t)mclass;
    tp_oom.from = *from;
    tp_oom.tid = (int32_t)gettid();
    tp_oom.steps = steps;
    tp_oom.meminfo = meminfo;
    tp_oom.dev_free = mfree;
    tp_oom.dev_total = mtotal;
    tp_oom.origin = origin;
    tp_oom.failures = 1;
    tp_oom.burst = ++tp_oom_bursts;
    for (uint32_t i = 0; i < tp_norig; i++) {
        struct tp_mem_orig *o = &tp_orig[i];
        tp_orig_fill(o, steps);
        o->oom_live = o->live;
        memcpy(o->oom_ring, o->ring, sizeof o->ring);
    }
    __atomic_store_n(&tp_oom_state, 1, __ATOMIC_RELAXED);
}

/* Within a burst: what the program did between its failures. */
TP_MEM_COLD void tp_oom_count(int alloc)
{
    if (tp_clock_ns() - tp_oom.last_ns >= TP_OOM_GAP_NS)
        return;
    if (alloc)
        tp_oom.allocs_after++;
    else
        tp_oom.frees_after++;
}

TP_MEM_HOT void tp_oom_after(int alloc)
{
    if (tp_oom_state != 0)
        tp_oom_count(alloc);
}

static void tp_orig_info(const struct tp_mem_orig *o, struct tp_mem_origin_info *v, uint64_t steps, int oom)
{
    memset(v, 0, sizeof *v);
    v->site = o->site;
    v->stack = o->stack;
    v->outer = o->outer;
    v->api = o->api;
    v->device = o->device;
    v->mclass = o->mclass;
    v->live = oom ? o->oom_live : o->live;
    v->peak = o->peak;
    v->allocated = o->allocated;
    v->allocs = o->allocs;
    v->frees = o->frees;
    v->failed = o->failed;
    const uint64_t *ring = oom ? o->oom_ring : o->ring;
    for (int i = 0; i < TP_MEM_GROWTH && (uint64_t)i < steps; i++)
        v->at_step[i] = ring[(steps - (uint64_t)i) % TP_MEM_GROWTH];
}

TP_MEM_HOT void tp_mem_fill(struct tp_record *r, uint64_t addr, uint64_t bytes, int device, int mclass,
                        const struct tp_mem_acct *a, unsigned flags, uint32_t origin)
{
    if (!r)
        return;
    r->u.mem.addr = addr;
    r->u.mem.bytes = bytes;
    r->u.mem.total = a ? a->total : 0;
    r->u.mem.origin = origin;
    r->u.mem.device = (int16_t)device;
    r->u.mem.mclass = (uint8_t)mclass;
    r->u.mem.flags = (uint8_t)flags;
}

/* The account of (device, class) for an allocation of origin "origin": the
 * origin keeps it; searched for only where the ledger kept no origin. */
TP_MEM_HOT struct tp_mem_acct *tp_orig_acct(uint32_t origin, int device, int mclass)
{
    return origin < tp_norig ? tp_acct_at(tp_orig[origin].acct) : tp_acct_of(device, mclass);
}

/* Entry "e" no longer holds memory (lock held): its account and origin give
 * its bytes back; "freed" a free call (counted), else a stale entry (an
 * address handed out again that we never saw freed: a free we missed, e.g.
 * made before activation). */
TP_MEM_HOT void tp_mem_release(const struct tp_mem_ent *e, int freed)
{
    struct tp_mem_acct *a = tp_acct_at(e->acct);
    if (freed) {
        if (a)
            tp_acct_sub(a, e->bytes);
    } else if (a) {
        a->total = a->total >= e->bytes ? a->total - e->bytes : 0;
    }
    tp_orig_sub(e->origin, e->bytes, freed);
    if (freed)
        tp_oom_after(0);
}

/* A successful allocation "e" into table "t" and account "a" (NULL: not
 * counted; a stale entry of its address is released all the same). */
TP_MEM_HOT void tp_mem_add(struct tp_mem_tab *t, const struct tp_mem_ent *e, struct tp_mem_acct *a)
{
    struct tp_mem_ent old;
    int got = a ? tp_tab_set(t, e, &old) : tp_tab_take(t, e->key, &old) == 0 ? 1 : -1;
    if (got == 1)
        tp_mem_release(&old, 0);
    if (a && got >= 0) {
        tp_acct_add(a, e->bytes);
        tp_orig_add(e->origin, e->bytes);
        tp_oom_after(1);
    }
}

/* tp_mem_alloc's other cases: a failed call, a successful one of 0 bytes,
 * and allocations with their native stack (TRAINPROF_MEMORY_STACKS). */
static __attribute__((noinline)) void tp_mem_alloc_rare(struct tp_record *r, int mclass, int device,
                                                       uint64_t addr, uint64_t bytes, int handle, int ok,
                                                       const struct tp_mem_from *from)
{
    /* the device's free and total bytes at a failure for want of memory:
     * asked before the lock (a driver call), on the failing thread, which
     * holds the context the report is about */
    uint64_t mfree = 0, mtotal = 0;
    int meminfo = !ok && from->oom && mclass != TP_MEM_HOST && tp_mem_info(&mfree, &mtotal) == 0;
    /* the stack, before the lock: unwinding takes microseconds */
    uint64_t ips[TP_STACK_MAX];
    int nips = tp_mem_stacks && tp_stack_on() ? tp_stack_capture(ips, tp_cfg.stack_depth) : 0;
    tp_mem_take();
    uint32_t origin = tp_orig_of(from, device, mclass, tp_stk_of(ips, nips));
    struct tp_mem_acct *a = tp_orig_acct(origin, device, mclass);
    unsigned flags = 0;
    if (!ok || !addr) {
        /* a failed call, or a successful one of 0 bytes (NULL, nothing held) */
        flags = ok ? TP_MEM_NOOP : TP_MEM_FAILED;
        if (!ok && a && tp_win_open) {
            a->failed++;
            if (bytes > a->failed_bytes)
                a->failed_bytes = bytes;
        }
        if (!ok && origin < tp_norig)
            tp_orig[origin].failed++;
        if (!ok && from->oom && bytes)
            tp_oom_note(from, origin, device, mclass, bytes, meminfo, mfree, mtotal);
    } else {
        struct tp_mem_ent e = { addr, bytes, (int16_t)device, (uint8_t)mclass, tp_acct_index(a), origin };
        tp_mem_add(handle ? &tp_handles : &tp_addrs, &e, a);
    }
    tp_mem_fill(r, addr, bytes, device, mclass, a, flags, origin);
    tp_mem_give();
}

TP_MEM_HOT void tp_mem_alloc_in(struct tp_record *r, int mclass, int device, uint64_t addr, uint64_t bytes,
                                int handle, int ok, struct tp_mem_from from)
{
    if (tp_mem_mine) {
        tp_mem_untracked(r, mclass, addr, bytes, ok);
        return;
    }
    if (mclass == TP_MEM_HOST)
        device = -1;
    if (__builtin_expect(!ok || !addr || tp_mem_stacks, 0)) {
        tp_mem_alloc_rare(r, mclass, device, addr, bytes, handle, ok, &from);
        return;
    }
    /* the common case: one probe of the origins' index, one of the table */
    tp_mem_take();
    uint32_t origin = tp_orig_of(&from, device, mclass, 0);
    struct tp_mem_acct *a = tp_orig_acct(origin, device, mclass);
    struct tp_mem_ent e = { addr, bytes, (int16_t)device, (uint8_t)mclass, tp_acct_index(a), origin };
    tp_mem_add(handle ? &tp_handles : &tp_addrs, &e, a);
    tp_mem_fill(r, addr, bytes, device, mclass, a, 0, origin);
    tp_mem_give();
}

void tp_mem_alloc(struct tp_record *r, int mclass, int device, uint64_t addr, uint64_t bytes,
                  int handle, int ok, struct tp_mem_from from)
{
    tp_mem_alloc_in(r, mclass, device, addr, bytes, handle, ok, from);
}

TP_MEM_HOT void tp_mem_alloc_here_in(struct tp_record *r, int mclass, uint64_t addr, uint64_t bytes, int ok,
                                     struct tp_mem_from from)
{
    int dev = mclass == TP_MEM_HOST ? -1 : ok && addr ? tp_mem_pointer_dev(addr) : tp_mem_current_device();
    tp_mem_alloc_in(r, mclass, dev, addr, bytes, 0, ok, from);
}

void tp_mem_alloc_here(struct tp_record *r, int mclass, uint64_t addr, uint64_t bytes, int ok,
                       struct tp_mem_from from)
{
    tp_mem_alloc_here_in(r, mclass, addr, bytes, ok, from);
}

/* The lean path's (no record): its arguments fit in registers, where
 * tp_mem_alloc_here's "from" goes on the stack. */
void tp_mem_alloc_lean(int mclass, uint64_t addr, uint64_t bytes, int ok, struct tp_mem_from from)
{
    tp_mem_alloc_here_in(NULL, mclass, addr, bytes, ok, from);
}

void tp_mem_free(struct tp_record *r, int mclass, int device, uint64_t addr, int handle, int ok)
{
    if (tp_mem_mine) {
        tp_mem_untracked(r, mclass, addr, 0, ok);
        return;
    }
    if (mclass == TP_MEM_HOST)
        device = -1;
    if (!addr) {
        tp_mem_fill(r, 0, 0, device, mclass, NULL, TP_MEM_NOOP, TP_MEM_NO_ORIGIN);
        if (r) {
            uint64_t total, peak;
            tp_mem_totals(device, mclass, &total, &peak);
            r->u.mem.total = total;
        }
        return;
    }
    tp_mem_take();
    struct tp_mem_tab *t = handle ? &tp_handles : &tp_addrs;
    struct tp_mem_ent e;
    struct tp_mem_acct *a;
    if (!ok) {
        /* nothing was released: report what the address holds, keep it */
        const struct tp_mem_ent *f = tp_tab_find(t, addr);
        if (f) {
            device = f->device;
            mclass = f->mclass;
        }
        a = tp_acct_of(device, mclass);
        tp_mem_fill(r, addr, f ? f->bytes : 0, device, mclass, a, TP_MEM_FAILED | (f ? 0 : TP_MEM_UNKNOWN),
                    f ? f->origin : TP_MEM_NO_ORIGIN);
    } else if (tp_tab_take(t, addr, &e) == 0) {
        tp_mem_release(&e, 1);
        tp_mem_fill(r, addr, e.bytes, e.device, e.mclass, tp_acct_at(e.acct), 0, e.origin);
    } else {
        a = tp_acct_of(device, mclass);
        tp_mem_fill(r, addr, 0, device, mclass, a, TP_MEM_UNKNOWN, TP_MEM_NO_ORIGIN);
    }
    tp_mem_give();
}

void tp_mem_free_at(struct tp_record *r, int mclass, uint64_t addr, int handle, int ok)
{
    if (!atomic_load_explicit(&tp_mem_on, memory_order_relaxed) || tp_mem_mine) {
        tp_mem_untracked(r, mclass, addr, 0, ok);
        return;
    }
    if (__builtin_expect(ok && addr, 1)) {
        /* the common case, a free of an address the table knows: one lock */
        tp_mem_take();
        struct tp_mem_ent e;
        if (tp_tab_take(handle ? &tp_handles : &tp_addrs, addr, &e) == 0) {
            tp_mem_release(&e, 1);
            tp_mem_fill(r, addr, e.bytes, e.device, e.mclass, tp_acct_at(e.acct), 0, e.origin);
            tp_mem_give();
            return;
        }
        tp_mem_give();
        /* unknown: its device from the driver, outside the lock (as below) */
        tp_mem_free(r, mclass, mclass != TP_MEM_HOST ? tp_mem_current_device() : -1, addr, handle, ok);
        return;
    }
    int device = -1;
    if (mclass != TP_MEM_HOST) {
        tp_mem_take();
        int known = tp_tab_find(handle ? &tp_handles : &tp_addrs, addr) != NULL;
        tp_mem_give();
        device = known ? 0 : tp_mem_current_device();   /* known: tp_mem_free takes the table's */
    }
    tp_mem_free(r, mclass, device, addr, handle, ok);
}

/* ---- windows ---------------------------------------------------------------- */

/* The signal path closes the window on tp-flush while the interrupted thread
 * may hold the lock: wait at most ~200 ms, then go on without it (the
 * numbers may be a call out of date; the window is still saved). */
static int tp_mem_lock_bounded(void)
{
    for (int i = 0; i < 200; i++) {
        if (tp_mem_try())
            return 1;
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

void tp_mem_window_begin(uint8_t gen, uint64_t now)
{
    tp_mem_take();
    tp_win_open = 1;
    tp_win_tick = now;
    int slot = gen % TP_MEM_WSLOTS;
    tp_wslot_gen[slot] = gen;
    for (uint32_t i = 0; i < tp_norig; i++)
        tp_orig[i].wstart[slot] = tp_orig[i].live;
    for (int i = 0; i < tp_nacct; i++) {
        struct tp_mem_acct *a = &tp_acct[i];
        a->wstart = a->wpeak = a->total;
        a->wpeak_tick = now;
        a->allocs = a->frees = a->failed = a->failed_bytes = 0;
    }
    tp_mem_give();
}

void tp_mem_window_end(uint8_t gen, uint64_t now)
{
    (void)now;
    int locked = tp_mem_lock_bounded();
    struct tp_mem_snap *s = &tp_snaps[gen % TP_MEM_SNAPS];
    s->used = 1;
    s->gen = gen;
    s->n = tp_nacct;
    for (int i = 0; i < tp_nacct; i++) {
        const struct tp_mem_acct *a = &tp_acct[i];
        struct tp_mem_usage *u = &s->u[i];
        memset(u, 0, sizeof *u);
        u->device = a->device;
        u->mclass = a->mclass;
        u->start_bytes = a->wstart;
        u->end_bytes = a->total;
        u->peak_bytes = a->wpeak;
        u->peak_ns = (int64_t)a->wpeak_tick;
        u->peak_process = a->peak;
        u->allocs = a->allocs;
        u->frees = a->frees;
        u->failed = a->failed;
        u->failed_bytes = a->failed_bytes;
    }
    tp_win_open = 0;
    if (locked)
        tp_mem_give();
}

static int tp_usage_cmp(const void *pa, const void *pb)
{
    const struct tp_mem_usage *a = pa, *b = pb;
    if (a->mclass != b->mclass)
        return a->mclass < b->mclass ? -1 : 1;
    return (a->device > b->device) - (a->device < b->device);
}

int tp_mem_window_take(uint8_t gen, const struct tp_clock_map *map, struct tp_mem_usage **out)
{
    *out = NULL;
    tp_mem_take();
    struct tp_mem_snap *s = &tp_snaps[gen % TP_MEM_SNAPS];
    int n = 0;
    if (s->used && s->gen == gen && s->n > 0 && (*out = malloc((size_t)s->n * sizeof **out)) != NULL) {
        n = s->n;
        memcpy(*out, s->u, (size_t)n * sizeof **out);
    }
    s->used = 0;
    tp_mem_give();
    for (int i = 0; i < n; i++)
        (*out)[i].peak_ns = map ? tp_clock_to_unix_ns(map, (uint64_t)(*out)[i].peak_ns) : 0;
    if (n > 1)
        qsort(*out, (size_t)n, sizeof **out, tp_usage_cmp);
    return n;
}

int tp_mem_totals(int device, int mclass, uint64_t *total, uint64_t *peak)
{
    int found = 0;
    *total = *peak = 0;
    tp_mem_take();
    for (int i = 0; i < tp_nacct; i++)
        if (tp_acct[i].device == device && tp_acct[i].mclass == mclass) {
            *total = tp_acct[i].total;
            *peak = tp_acct[i].peak;
            found = 1;
        }
    tp_mem_give();
    return found;
}

void tp_mem_step(uint64_t steps)
{
    atomic_store_explicit(&tp_mem_steps, steps, memory_order_relaxed);
}

int tp_mem_origins(int gen, struct tp_mem_origin_info **out, int *wstart_known, uint64_t *steps)
{
    *out = NULL;
    if (wstart_known)
        *wstart_known = 0;
    tp_mem_take();
    uint64_t now_steps = atomic_load_explicit(&tp_mem_steps, memory_order_relaxed);
    if (steps)
        *steps = now_steps;
    int slot = gen >= 0 ? gen % TP_MEM_WSLOTS : -1;
    int known = slot >= 0 && tp_wslot_gen[slot] == gen;
    if (wstart_known)
        *wstart_known = known;
    uint32_t n = tp_norig;
    struct tp_mem_origin_info *v = n ? malloc((size_t)n * sizeof *v) : NULL;
    if (v)
        for (uint32_t i = 0; i < n; i++) {
            tp_orig_fill(&tp_orig[i], now_steps);
            tp_orig_info(&tp_orig[i], &v[i], now_steps, 0);
            v[i].wstart = known ? tp_orig[i].wstart[slot] : 0;
        }
    tp_mem_give();
    *out = v;
    return v ? (int)n : 0;
}

int tp_mem_oom_take(uint64_t now, uint64_t settle_ns, struct tp_mem_oom *o, struct tp_mem_origin_info **out)
{
    *out = NULL;
    if (!__atomic_load_n(&tp_oom_state, __ATOMIC_RELAXED))
        return -1;      /* the common case, without the lock (a stale read waits a tick) */
    tp_mem_take();
    if (tp_oom_state != 1 || now < tp_oom.ns + settle_ns) {
        tp_mem_give();
        return -1;
    }
    *o = tp_oom;
    uint32_t n = tp_norig;
    struct tp_mem_origin_info *v = n ? malloc((size_t)n * sizeof *v) : NULL;
    if (v)
        for (uint32_t i = 0; i < n; i++)
            tp_orig_info(&tp_orig[i], &v[i], tp_oom.steps, 1);
    __atomic_store_n(&tp_oom_state, 2, __ATOMIC_RELAXED);
    tp_mem_give();
    *out = v;
    return v ? (int)n : 0;
}

int tp_mem_stack(uint32_t id, uint64_t *ips, int max)
{
    int n = 0;
    tp_mem_take();
    if (id >= 1 && id <= tp_nstk) {
        n = tp_stk[id - 1].n < max ? tp_stk[id - 1].n : max;
        memcpy(ips, tp_stk[id - 1].ips, (size_t)n * sizeof *ips);
    }
    tp_mem_give();
    return n;
}

int tp_mem_oom_pending(void)
{
    return __atomic_load_n(&tp_oom_state, __ATOMIC_RELAXED) == 1;
}

const char *tp_outer_name(unsigned id)
{
    static const char *const hand[TP_OUTER_END - TP_API_COUNT] = {
        [TP_OUTER_ncclCommInitRank - TP_API_COUNT] = "ncclCommInitRank",
        [TP_OUTER_ncclCommInitRankConfig - TP_API_COUNT] = "ncclCommInitRankConfig",
        [TP_OUTER_ncclCommInitRankScalable - TP_API_COUNT] = "ncclCommInitRankScalable",
        [TP_OUTER_ncclCommInitAll - TP_API_COUNT] = "ncclCommInitAll",
        [TP_OUTER_ncclCommSplit - TP_API_COUNT] = "ncclCommSplit",
        [TP_OUTER_ncclCommShrink - TP_API_COUNT] = "ncclCommShrink",
        [TP_OUTER_ncclCommGrow - TP_API_COUNT] = "ncclCommGrow",
    };
    if (id >= TP_API_COUNT && id < TP_OUTER_END)
        return hand[id - TP_API_COUNT];
    return id < TP_API_COUNT ? tp_api_name(id) : "";
}

void tp_mem_reset(void)
{
    tp_mem_take();
    for (uint32_t i = 0; i < tp_nstk; i++)
        free(tp_stk[i].ips);
    free(tp_stk);
    free(tp_stk_idx);
    tp_stk = NULL;
    tp_stk_idx = NULL;
    tp_nstk = tp_stk_cap = 0;
    tp_stk_idx_cap = 0;
    free(tp_orig);
    free(tp_orig_idx);
    tp_orig = NULL;
    tp_orig_idx = NULL;
    tp_norig = tp_orig_cap = 0;
    tp_orig_idx_cap = 0;
    tp_orig_last = TP_MEM_NO_ORIGIN;
    for (int i = 0; i < TP_MEM_WSLOTS; i++)
        tp_wslot_gen[i] = -1;
    memset(&tp_oom, 0, sizeof tp_oom);
    tp_oom_state = 0;
    tp_oom_bursts = 0;
    atomic_store(&tp_mem_steps, 0);
    free(tp_addrs.v);
    free(tp_handles.v);
    memset(&tp_addrs, 0, sizeof tp_addrs);
    memset(&tp_handles, 0, sizeof tp_handles);
    tp_nacct = 0;
    tp_win_open = 0;
    memset(tp_snaps, 0, sizeof tp_snaps);
    tp_mem_give();
}

/* ---- the module (collector/modules/modules.def) ---------------------------------- */

static void mem_init(const struct tp_config *cfg)
{
    tp_mem_stacks = cfg->memory_stacks || cfg->with_stack;
    tp_mem_enable(cfg->profile_memory);
}

/* The ledger runs to exit once memory tracking is on, past the schedule's
 * end: an out-of-memory report and the memory held at exit need it, and
 * allocations are rare next to launches (a caching allocator makes a few
 * hundred per run).  A forked child is passive. */

static void mem_off(void)
{
    tp_mem_enable(0);
}

const struct tp_module tp_module_memtrack = {
    .name = "memtrack",
    .init = mem_init,
    .window_begin = tp_mem_window_begin,
    .window_end = tp_mem_window_end,
    .atfork_child = mem_off,
};
