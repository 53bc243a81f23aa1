/*
 * memtrack.c - DESIGN: the device-memory timeline of the process (the
 * handler that reports it is handlers/memory.c).
 *
 * Allocation calls are rare next to launches (a caching allocator such as
 * PyTorch's calls cudaMalloc a few hundred times per run), so one mutex
 * guards everything here; the launch path never comes near it.  Two
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
 */
#include "memtrack.h"
#include "collector/config/config.h"
#include "module.h"
#include "collector/contract/sink.h"
#include "collector/common/loader.h"

#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Atomic int tp_mem_on;

struct tp_mem_ent {
    uint64_t key;           /* 0: empty slot (no allocation has address 0) */
    uint64_t bytes;
    int16_t  device;
    uint8_t  mclass;
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

static pthread_mutex_t tp_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_mem_tab tp_addrs, tp_handles;
static struct tp_mem_acct tp_acct[TP_MEM_MAX_ACCT];
static int tp_nacct;
static int tp_win_open;
static uint64_t tp_win_tick;
static struct tp_mem_snap tp_snaps[TP_MEM_SNAPS];

void tp_mem_enable(int on)
{
    /* touch the tables now (activation), not at a window's first use: a
     * first-touch page fault costs several µs in a step here */
    if (on && !atomic_load(&tp_mem_on)) {
        pthread_mutex_lock(&tp_mem_lock);
        memset(tp_snaps, 0, sizeof tp_snaps);
        memset(tp_acct + tp_nacct, 0, sizeof tp_acct - (size_t)tp_nacct * sizeof *tp_acct);
        pthread_mutex_unlock(&tp_mem_lock);
    }
    atomic_store(&tp_mem_on, on ? 1 : 0);
}

/* ---- driver queries ------------------------------------------------------ */

typedef CUresult (*tp_ctxdev_fn)(CUdevice *);
typedef CUresult (*tp_ptrattr_fn)(void *, CUpointer_attribute, CUdeviceptr);
static _Atomic(tp_ctxdev_fn) tp_ctxdev;
static _Atomic(tp_ptrattr_fn) tp_ptrattr;

/* Look the queries up once libcuda is in the process (never load it);
 * tp_driver_syms probes again only after the loader has added objects. */
static void tp_mem_driver(void)
{
    if (atomic_load_explicit(&tp_ctxdev, memory_order_acquire))
        return;
    static const char *const names[] = { "cuPointerGetAttribute", "cuCtxGetDevice" };
    void *fn[2];
    if (tp_driver_syms(names, fn, 2) != 0)
        return;
    if (fn[0])
        atomic_store_explicit(&tp_ptrattr, (tp_ptrattr_fn)fn[0], memory_order_release);
    if (fn[1])
        atomic_store_explicit(&tp_ctxdev, (tp_ctxdev_fn)fn[1], memory_order_release);
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

int tp_mem_pointer_device(uint64_t addr)
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

/* ---- the address tables (lock held) ---------------------------------------- */

static size_t tp_mem_hash(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static int tp_tab_grow(struct tp_mem_tab *t)
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

/* Insert or replace; -1 when out of memory (the allocation goes uncounted). */
static int tp_tab_put(struct tp_mem_tab *t, const struct tp_mem_ent *e)
{
    if ((t->n + 1) * 2 > t->cap && tp_tab_grow(t) != 0)
        return -1;
    size_t j = tp_mem_hash(e->key, t->cap);
    while (t->v[j].key && t->v[j].key != e->key)
        j = (j + 1) & (t->cap - 1);
    if (!t->v[j].key)
        t->n++;
    t->v[j] = *e;
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
static int tp_tab_take(struct tp_mem_tab *t, uint64_t key, struct tp_mem_ent *out)
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
    struct tp_mem_acct *a = &tp_acct[tp_nacct++];
    memset(a, 0, sizeof *a);
    a->device = (int16_t)device;
    a->mclass = (uint8_t)mclass;
    a->wpeak_tick = tp_win_tick;
    return a;
}

static void tp_acct_add(struct tp_mem_acct *a, uint64_t bytes)
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

static void tp_acct_sub(struct tp_mem_acct *a, uint64_t bytes)
{
    a->total = a->total >= bytes ? a->total - bytes : 0;
    if (tp_win_open)
        a->frees++;
}

static void tp_mem_fill(struct tp_record *r, uint64_t addr, uint64_t bytes, int device, int mclass,
                        const struct tp_mem_acct *a, unsigned flags)
{
    if (!r)
        return;
    r->u.mem.addr = addr;
    r->u.mem.bytes = bytes;
    r->u.mem.total = a ? a->total : 0;
    r->u.mem.peak = a ? a->peak : 0;
    r->u.mem.device = (int16_t)device;
    r->u.mem.mclass = (uint8_t)mclass;
    r->u.mem.flags = (uint8_t)flags;
}

void tp_mem_alloc(struct tp_record *r, int mclass, int device, uint64_t addr, uint64_t bytes,
                  int handle, int ok)
{
    if (mclass == TP_MEM_HOST)
        device = -1;
    pthread_mutex_lock(&tp_mem_lock);
    struct tp_mem_acct *a = tp_acct_of(device, mclass);
    unsigned flags = 0;
    if (!ok || !addr) {
        /* a failed call, or a successful one of 0 bytes (NULL, nothing held) */
        flags = ok ? TP_MEM_NOOP : TP_MEM_FAILED;
        if (!ok && a && tp_win_open) {
            a->failed++;
            if (bytes > a->failed_bytes)
                a->failed_bytes = bytes;
        }
    } else {
        struct tp_mem_ent e = { addr, bytes, (int16_t)device, (uint8_t)mclass };
        struct tp_mem_ent old;
        /* an address handed out again that we never saw freed (a free we
         * missed, e.g. made before activation): release the stale entry */
        if (tp_tab_take(handle ? &tp_handles : &tp_addrs, addr, &old) == 0) {
            struct tp_mem_acct *o = tp_acct_of(old.device, old.mclass);
            if (o)
                o->total = o->total >= old.bytes ? o->total - old.bytes : 0;
        }
        if (a && tp_tab_put(handle ? &tp_handles : &tp_addrs, &e) == 0)
            tp_acct_add(a, bytes);
    }
    tp_mem_fill(r, addr, bytes, device, mclass, a, flags);
    pthread_mutex_unlock(&tp_mem_lock);
}

void tp_mem_free(struct tp_record *r, int mclass, int device, uint64_t addr, int handle, int ok)
{
    if (mclass == TP_MEM_HOST)
        device = -1;
    if (!addr) {
        tp_mem_fill(r, 0, 0, device, mclass, NULL, TP_MEM_NOOP);
        if (r) {
            uint64_t total, peak;
            tp_mem_totals(device, mclass, &total, &peak);
            r->u.mem.total = total;
            r->u.mem.peak = peak;
        }
        return;
    }
    pthread_mutex_lock(&tp_mem_lock);
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
        tp_mem_fill(r, addr, f ? f->bytes : 0, device, mclass, a, TP_MEM_FAILED | (f ? 0 : TP_MEM_UNKNOWN));
    } else if (tp_tab_take(t, addr, &e) == 0) {
        a = tp_acct_of(e.device, e.mclass);
        if (a)
            tp_acct_sub(a, e.bytes);
        tp_mem_fill(r, addr, e.bytes, e.device, e.mclass, a, 0);
    } else {
        a = tp_acct_of(device, mclass);
        tp_mem_fill(r, addr, 0, device, mclass, a, TP_MEM_UNKNOWN);
    }
    pthread_mutex_unlock(&tp_mem_lock);
}

void tp_mem_free_at(struct tp_record *r, int mclass, uint64_t addr, int handle, int ok)
{
    if (!atomic_load_explicit(&tp_mem_on, memory_order_relaxed)) {
        tp_mem_untracked(r, mclass, addr, 0, ok);
        return;
    }
    int device = -1;
    if (mclass != TP_MEM_HOST) {
        pthread_mutex_lock(&tp_mem_lock);
        int known = tp_tab_find(handle ? &tp_handles : &tp_addrs, addr) != NULL;
        pthread_mutex_unlock(&tp_mem_lock);
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
        if (pthread_mutex_trylock(&tp_mem_lock) == 0)
            return 1;
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

void tp_mem_window_begin(uint8_t gen, uint64_t now)
{
    (void)gen;
    pthread_mutex_lock(&tp_mem_lock);
    tp_win_open = 1;
    tp_win_tick = now;
    for (int i = 0; i < tp_nacct; i++) {
        struct tp_mem_acct *a = &tp_acct[i];
        a->wstart = a->wpeak = a->total;
        a->wpeak_tick = now;
        a->allocs = a->frees = a->failed = a->failed_bytes = 0;
    }
    pthread_mutex_unlock(&tp_mem_lock);
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
        pthread_mutex_unlock(&tp_mem_lock);
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
    pthread_mutex_lock(&tp_mem_lock);
    struct tp_mem_snap *s = &tp_snaps[gen % TP_MEM_SNAPS];
    int n = 0;
    if (s->used && s->gen == gen && s->n > 0 && (*out = malloc((size_t)s->n * sizeof **out)) != NULL) {
        n = s->n;
        memcpy(*out, s->u, (size_t)n * sizeof **out);
    }
    s->used = 0;
    pthread_mutex_unlock(&tp_mem_lock);
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
    pthread_mutex_lock(&tp_mem_lock);
    for (int i = 0; i < tp_nacct; i++)
        if (tp_acct[i].device == device && tp_acct[i].mclass == mclass) {
            *total = tp_acct[i].total;
            *peak = tp_acct[i].peak;
            found = 1;
        }
    pthread_mutex_unlock(&tp_mem_lock);
    return found;
}

void tp_mem_reset(void)
{
    pthread_mutex_lock(&tp_mem_lock);
    free(tp_addrs.v);
    free(tp_handles.v);
    memset(&tp_addrs, 0, sizeof tp_addrs);
    memset(&tp_handles, 0, sizeof tp_handles);
    tp_nacct = 0;
    tp_win_open = 0;
    memset(tp_snaps, 0, sizeof tp_snaps);
    pthread_mutex_unlock(&tp_mem_lock);
}

/* ---- the module (collector/modules/modules.def) ---------------------------------- */

static int tp_mem_flight;           /* the flight recorder's ring holds memory events too */

static void mem_init(const struct tp_config *cfg)
{
    tp_mem_flight = cfg->flight > 0;
    tp_mem_enable(cfg->profile_memory);
}

/* no window will need totals again (the flight recorder's dumps still
 * do: they run to the end), and a forked child is passive */
static void mem_schedule_end(void)
{
    if (!tp_mem_flight)
        tp_mem_enable(0);
}

static void mem_off(void)
{
    tp_mem_enable(0);
}

const struct tp_module tp_module_memtrack = {
    .name = "memtrack",
    .init = mem_init,
    .window_begin = tp_mem_window_begin,
    .window_end = tp_mem_window_end,
    .schedule_end = mem_schedule_end,
    .atfork_child = mem_off,
};
