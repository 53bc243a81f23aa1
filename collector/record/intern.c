/*
 * intern.c - DESIGN: a fixed array of hash-bucket heads (in .bss, so a
 * process that never interns touches no page of it) with chains of entries
 * published by release stores; readers walk chains with acquire loads and
 * never lock.  Inserting takes one mutex and re-checks the chain.  Entries
 * and their text live in 64 KiB arenas that are never freed, so a returned
 * string stays valid for the life of the process.  The id -> entry directory
 * is two-level (pages of 4096 pointers) so that it never moves either.
 * What the arenas and directory pages take is bounded (tp_intern_budget):
 * the table holds what a window records, and before activation only
 * domain names and NVTX registered strings, whose handles must outlast
 * activation; a program's stream of distinct messages (one per call, by
 * the million) would otherwise grow it by 1 KiB a name, 1.08 GB in a
 * process that never used CUDA (tests/preload/test_losses.py).  A string
 * refused is counted (tp_intern_refused) and its callers show it as
 * "<name table full>".
 */
#include "intern.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TP_INTERN_BUCKETS (1u << 16)
#define TP_INTERN_PAGE    4096u
#define TP_ARENA_SIZE     (64u * 1024u)

struct tp_istr {
    struct tp_istr *_Atomic next;
    uint32_t hash, id, len;
    _Atomic uint8_t flag;
    char text[];
};

static struct tp_istr *_Atomic tp_buckets[TP_INTERN_BUCKETS];
static struct tp_istr *_Atomic *_Atomic tp_dir[TP_INTERN_MAX / TP_INTERN_PAGE];
static _Atomic uint32_t tp_next_id = 2;     /* 0 = "", 1 = overflow */
static pthread_mutex_t tp_intern_lock = PTHREAD_MUTEX_INITIALIZER;
static char *tp_arena;
static size_t tp_arena_used = TP_ARENA_SIZE;
static size_t tp_taken;                         /* bytes of arenas and pages, under the lock */
static size_t tp_budget = TP_INTERN_EARLY_BYTES;
static _Atomic uint64_t tp_refused;

static uint32_t tp_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;               /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* Cut at most TP_INTERN_LEN_MAX bytes without splitting a UTF-8 sequence. */
static size_t tp_cut(const char *s, size_t n)
{
    if (n <= TP_INTERN_LEN_MAX)
        return n;
    n = TP_INTERN_LEN_MAX;
    while (n > 0 && ((uint8_t)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* "n" more bytes for the table, NULL past its budget (lock held). */
static void *tp_take(size_t n, int zero)
{
    if (tp_taken + n > tp_budget)
        return NULL;
    void *p = zero ? calloc(1, n) : malloc(n);
    if (p)
        tp_taken += n;
    return p;
}

static void *tp_arena_alloc(size_t size)
{
    size = (size + 7) & ~(size_t)7;
    if (tp_arena_used + size > TP_ARENA_SIZE) {
        char *a = tp_take(size > TP_ARENA_SIZE ? size : TP_ARENA_SIZE, 0);
        if (!a)
            return NULL;
        tp_arena = a;
        tp_arena_used = 0;
    }
    void *p = tp_arena + tp_arena_used;
    tp_arena_used += size;
    return p;
}

static struct tp_istr *tp_find(uint32_t h, const char *s, size_t n)
{
    struct tp_istr *e = atomic_load_explicit(&tp_buckets[h % TP_INTERN_BUCKETS], memory_order_acquire);
    for (; e; e = atomic_load_explicit(&e->next, memory_order_acquire))
        if (e->hash == h && e->len == n && memcmp(e->text, s, n) == 0)
            return e;
    return NULL;
}

static struct tp_istr *tp_entry(uint32_t id)
{
    if (id >= TP_INTERN_MAX)
        return NULL;
    struct tp_istr *_Atomic *page = atomic_load_explicit(&tp_dir[id / TP_INTERN_PAGE], memory_order_acquire);
    return page ? atomic_load_explicit(&page[id % TP_INTERN_PAGE], memory_order_acquire) : NULL;
}

size_t tp_intern_len(const char *s, size_t len)
{
    if (!s)
        return 0;
    if (len == (size_t)-1)
        len = strnlen(s, TP_INTERN_LEN_MAX + 4);
    return tp_cut(s, len);
}

uint32_t tp_intern_find(const char *s, size_t len)
{
    len = tp_intern_len(s, len);
    if (len == 0)
        return 0;
    struct tp_istr *e = tp_find(tp_hash(s, len), s, len);
    return e ? e->id : 0;
}

uint32_t tp_intern(const char *s, size_t len)
{
    len = tp_intern_len(s, len);
    if (len == 0)
        return 0;
    uint32_t h = tp_hash(s, len);
    struct tp_istr *e = tp_find(h, s, len);
    if (e)
        return e->id;

    uint32_t id = TP_INTERN_OVERFLOW;
    pthread_mutex_lock(&tp_intern_lock);
    e = tp_find(h, s, len);
    if (e) {
        id = e->id;
        goto out;
    }
    id = atomic_load_explicit(&tp_next_id, memory_order_relaxed);
    if (id >= TP_INTERN_MAX) {
        id = TP_INTERN_OVERFLOW;
        goto out;
    }
    struct tp_istr *_Atomic *page = atomic_load_explicit(&tp_dir[id / TP_INTERN_PAGE], memory_order_relaxed);
    if (!page) {
        page = tp_take(TP_INTERN_PAGE * sizeof *page, 1);
        if (!page) {
            id = TP_INTERN_OVERFLOW;
            goto out;
        }
        atomic_store_explicit(&tp_dir[id / TP_INTERN_PAGE], page, memory_order_release);
    }
    e = tp_arena_alloc(sizeof *e + len + 1);
    if (!e) {
        id = TP_INTERN_OVERFLOW;
        goto out;
    }
    e->hash = h;
    e->id = id;
    e->len = (uint32_t)len;
    atomic_init(&e->flag, 0);
    memcpy(e->text, s, len);
    e->text[len] = 0;
    struct tp_istr *_Atomic *head = &tp_buckets[h % TP_INTERN_BUCKETS];
    atomic_init(&e->next, atomic_load_explicit(head, memory_order_relaxed));
    atomic_store_explicit(&page[id % TP_INTERN_PAGE], e, memory_order_release);
    atomic_store_explicit(head, e, memory_order_release);
    atomic_store_explicit(&tp_next_id, id + 1, memory_order_relaxed);
out:
    if (id == TP_INTERN_OVERFLOW)
        atomic_fetch_add_explicit(&tp_refused, 1, memory_order_relaxed);
    pthread_mutex_unlock(&tp_intern_lock);
    return id;
}

void tp_intern_set_budget(size_t bytes)
{
    pthread_mutex_lock(&tp_intern_lock);
    if (bytes > tp_budget)
        tp_budget = bytes;
    pthread_mutex_unlock(&tp_intern_lock);
}

uint64_t tp_intern_refused(void)
{
    return atomic_load_explicit(&tp_refused, memory_order_relaxed);
}

size_t tp_intern_bytes(void)
{
    pthread_mutex_lock(&tp_intern_lock);
    size_t n = tp_taken;
    pthread_mutex_unlock(&tp_intern_lock);
    return n;
}

const char *tp_intern_str(uint32_t id)
{
    if (id == TP_INTERN_OVERFLOW)
        return "<name table full>";
    struct tp_istr *e = tp_entry(id);
    return e ? e->text : "";
}

uint8_t tp_intern_flag(uint32_t id)
{
    struct tp_istr *e = tp_entry(id);
    return e ? atomic_load_explicit(&e->flag, memory_order_relaxed) : 0;
}

void tp_intern_set_flag(uint32_t id, uint8_t v)
{
    struct tp_istr *e = tp_entry(id);
    if (e)
        atomic_store_explicit(&e->flag, v, memory_order_relaxed);
}
