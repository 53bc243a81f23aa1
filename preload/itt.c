/*
 * itt.c - DESIGN: libtrainprof.so as an ITT collector, the library that
 * INTEL_LIBITTNOTIFY64 names (set by the constructor when unset, as
 * NVTX_INJECTION64_PATH is).  The ittnotify static part linked into a
 * program (PyTorch's libtorch_cpu) loads it at its first ITT call and,
 * finding __itt_api_init, hands it the program's ITT global: a table of
 * (name, function pointer, no-op) for every ITT entry point
 * (ittnotify_static.c, __itt_init_ittlib, and ittnotify_config.h's
 * __itt_global and __itt_api_info).  We point the four API entries defined
 * here (domain, string handle, task begin and end) at our functions and
 * every other one at its no-op.  (The other protocol,
 * a collector exporting only __itt_api_version whose entries ittnotify
 * looks up with dlsym, fills nothing unless INTEL_ITTNOTIFY_GROUPS is set.)
 * The table is checked first (ITT's magic bytes, major version 3); one we
 * do not recognise is left alone, so that program's ITT calls stay no-ops
 * and the hook goes back to NVTX.  ittnotify loads its collector at the
 * first call that needs one (torch: the first __itt_task_begin), not at its
 * first domain or string handle, which it makes itself until then: a
 * handle of its own may reach __itt_task_begin, and is swapped for ours.
 *
 * torch's ITT profiler state (ProfilerState.ITT, what
 * torch.autograd.profiler.emit_itt turns on) announces each operator with
 * __itt_string_handle_create(name) and __itt_task_begin, then
 * __itt_task_end: the bare operator name, where the NVTX state formats a
 * message ("aten::addmm, seq = 3, op_id = 12") for every operator.  That
 * formatting is most of what torch's side costs (tests/bench/RESULTS.md),
 * so the Python hook (scripts/trainprof_cli/pyhook/sitecustomize.py) uses this state
 * unless shapes are asked for, which only the NVTX messages carry.  The
 * ranges become torch operators like NVTX's (collector/wrap/ranges.h
 * tp_range_push_op), each with an External id of its own from a
 * process-wide counter, and no sequence number.
 *
 * torch asks for a string handle at every push, so each thread keeps a
 * small direct-mapped cache from the name's address to its handle, whose
 * text is compared with the name's at every hit (an address may later hold
 * another name), 8 bytes at a time (tp_itt_same).  A miss looks the
 * name up in a process-wide table under a lock, making the handle on first
 * use: handles live as long as the process, as ITT requires.  The table
 * holds at most TP_ITT_NAME_BYTES (handles are made before activation too,
 * and a program may name tasks without end): past it every new name gets
 * one handle named "<name table full>", whose ranges count as names lost
 * (collector/record/intern.h's overflow id).  A handle
 * carries the name's interned id once a recorded range used it (interning
 * takes the intern table's lock, so it is done once per name, not per
 * push).  Task ids and parents are ignored: ITT tasks nest per thread, as
 * the range stack does.
 *
 * Only torch's domain becomes operators.  We are the process's one ITT
 * collector, so every ITT user's tasks reach us: oneDNN's primitives
 * (domains "dnnl::primitive::execute" and "::create", one "convolution" or
 * "reorder" task per primitive run inside torch's own aten:: operators),
 * OpenVINO's, a user's through the ittapi package.  torch.profiler shows
 * none of them, and they are no torch operators; they are dropped, and as
 * cheaply as ITT allows: a domain's flags are its runtime's (ittnotify.h:
 * "the meaning of different non-zero values is reserved to the runtime"),
 * and ittnotify's macros skip every call on a domain whose flags are 0.
 * torch's domain ("PyTorch", torch/csrc/itt_wrapper.cpp: the one every
 * emit_itt operator and torch.profiler.itt range is announced in) gets
 * flags TP_ITT_TORCH, every other domain 0: ours when made, and those
 * ittnotify made itself before it loaded us (flags 1, torch's among them:
 * torch makes its domain at start-up) when __itt_api_init hands us its
 * global, whose domain list (ittnotify_config.h's __itt_global, the layout
 * of ITT API 3) we walk.  A task on a domain with other flags (one we
 * never saw) is recorded only if the domain is named "PyTorch", checked per
 * call without writing to it.  A task on a domain we drop is neither
 * pushed nor popped: its __itt_task_end, on the same domain, pops nothing.
 * Outside windows a task of torch's domain is ranges.h's bare push (its
 * place on the stack: a per-thread counter), its end the counter going
 * down, both inline here; the name is looked at only when a window records
 * or an nvtx:GLOB signal is live (tp_itt_begin_slow).
 * torch's own ProfilerStep#N ranges (a program's own torch.profiler's
 * step(), collector/record/torchop.h) keep their place on the range stack and
 * are not recorded: the handle of such a name says so.
 */
#include "itt.h"
#include "wrap.h"
#include "collector/record/intern.h"
#include "collector/wrap/ranges.h"
#include "collector/record/torchop.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layouts of ittnotify.h (ittapi include/ittnotify.h, ITT API 3.0):
 * a program reads domain->flags and keeps the pointers we return. */
struct tp_itt_domain {
    volatile int flags;           /* non-zero: enabled; ours: TP_ITT_TORCH or 0 */
    const char *nameA;
    void *nameW;
    int extra1;
    void *extra2;
    struct tp_itt_domain *next;
};

struct tp_itt_string {
    const char *strA;
    void *strW;
    int extra1;                   /* "reserved, must be zero" */
    void *extra2;                 /* &tp_itt_tag: a handle of ours (not one the
                                     program's ittnotify made before loading us) */
    struct tp_itt_string *next;
    /* ours, after ITT's fields */
    uint32_t id;                  /* interned name, 0 until a recorded range used it */
    uint32_t hash;
    uint32_t len;                 /* strlen(name) */
    uint8_t hidden;               /* torch's own ProfilerStep#N: never recorded */
    char name[];
};

struct tp_itt_id {
    unsigned long long d1, d2, d3;
};

/* External ids of ITT operators: above our correlation ids (from 2^32),
 * below the steps' (2^48) and 2^53. */
#define TP_ITT_OP_ID_BASE (UINT64_C(1) << 44)

/* torch's ITT domain (torch/csrc/itt_wrapper.cpp), and the flags its
 * domain gets: non-zero (enabled) and not ittnotify's own 1, so that one
 * compare tells a recorded domain from one we never saw. */
#define TP_ITT_TORCH_DOMAIN "PyTorch"
#define TP_ITT_TORCH 0x7470

#define TP_ITT_DOMAINS 16
#define TP_ITT_BUCKETS 1024       /* the process-wide name table */
#define TP_ITT_CACHE 128          /* per thread */
#define TP_ITT_NAME_BYTES (1u << 20)  /* the handles of the name table; torch's
                                         few thousand operator names take ~200 KiB */

static pthread_mutex_t tp_itt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_itt_domain tp_itt_domains[TP_ITT_DOMAINS];
static char tp_itt_domain_names[TP_ITT_DOMAINS][64];
static int tp_itt_n_domains;
static struct tp_itt_string *tp_itt_names[TP_ITT_BUCKETS];
static _Atomic uint64_t tp_itt_next_op = TP_ITT_OP_ID_BASE;
static int tp_itt_tag;
static size_t tp_itt_name_bytes;  /* under tp_itt_lock */
static struct tp_itt_string *tp_itt_full;  /* the handle of names past TP_ITT_NAME_BYTES */
static int tp_itt_state;          /* trainprof_itt_collector()'s answer */

static __thread struct {
    const char *key;
    struct tp_itt_string *h;
} tp_itt_cache[TP_ITT_CACHE] __attribute__((tls_model("initial-exec")));

static uint32_t tp_itt_hash(const char *s, size_t *len)
{
    uint32_t h = 2166136261u;
    size_t n = 0;
    for (; s[n]; n++) {
        h ^= (unsigned char)s[n];
        h *= 16777619u;
    }
    *len = n;
    return h;
}

static int tp_itt_is_torch(const char *name)
{
    return name && strcmp(name, TP_ITT_TORCH_DOMAIN) == 0;
}

TP_EXPORT struct tp_itt_domain *__itt_domain_create(const char *name)
{
    struct tp_itt_domain *d = NULL;
    if (!name)
        return NULL;
    pthread_mutex_lock(&tp_itt_lock);
    for (int i = 0; i < tp_itt_n_domains && !d; i++)
        if (strcmp(tp_itt_domains[i].nameA, name) == 0)
            d = &tp_itt_domains[i];
    if (!d && tp_itt_n_domains < TP_ITT_DOMAINS) {
        int i = tp_itt_n_domains++;
        snprintf(tp_itt_domain_names[i], sizeof tp_itt_domain_names[i], "%s", name);
        d = &tp_itt_domains[i];
        d->nameA = tp_itt_domain_names[i];
        /* read with no lock by ittnotify's macros: a whole int, stored once */
        __atomic_store_n(&d->flags, tp_itt_is_torch(name) ? TP_ITT_TORCH : 0, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tp_itt_lock);
    return d;              /* NULL past TP_ITT_DOMAINS: ittnotify then skips its calls */
}

/* A handle named "name" ("len" bytes), not in the table (lock held). */
static struct tp_itt_string *tp_itt_make(const char *name, size_t len)
{
    struct tp_itt_string *h = calloc(1, sizeof *h + len + 1);
    if (h) {
        memcpy(h->name, name, len + 1);
        h->len = (uint32_t)len;
        h->strA = h->name;
        h->extra2 = &tp_itt_tag;
        h->hidden = (uint8_t)tp_torch_op_is_profiler_step(name, len);
    }
    return h;
}

/* The handle of "name" from the process-wide table, made on first use;
 * the full table's handle past TP_ITT_NAME_BYTES; NULL if memory ran out. */
static struct tp_itt_string *tp_itt_lookup(const char *name)
{
    size_t len;
    uint32_t hash = tp_itt_hash(name, &len);
    struct tp_itt_string **slot = &tp_itt_names[hash % TP_ITT_BUCKETS], *h;
    pthread_mutex_lock(&tp_itt_lock);
    for (h = *slot; h; h = h->next)
        if (h->hash == hash && strcmp(h->name, name) == 0)
            break;
    if (!h && tp_itt_name_bytes + sizeof *h + len + 1 > TP_ITT_NAME_BYTES) {
        if (!tp_itt_full && (tp_itt_full = tp_itt_make("<name table full>", 17)) != NULL)
            tp_itt_full->id = TP_INTERN_OVERFLOW;
        h = tp_itt_full;
    } else if (!h && (h = tp_itt_make(name, len)) != NULL) {
        tp_itt_name_bytes += sizeof *h + len + 1;
        h->hash = hash;
        h->next = *slot;
        *slot = h;
    }
    pthread_mutex_unlock(&tp_itt_lock);
    return h;
}

/* 8 bytes at "p", any alignment. */
static inline uint64_t tp_itt_load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/*
 * 1 if the NUL-terminated "name" is the text of "h", 0 if not, -1 if this
 * cannot tell (the caller's slow path asks strcmp).  A cache hit is
 * checked at every call (torch asks at every push, and the address may
 * hold another name by now), so this is the string handle's cost: its
 * length's bytes and the NUL are compared 8 at a time (the first 8 and the
 * last 8, overlapping, and those between), where strcmp took 20
 * instructions and a call.  If "name" is shorter, its NUL meets a byte of
 * h's that is not, so they differ; the loads may read past that NUL, but
 * never past the page "name" starts in (a name within 64 bytes of its
 * page's end, and names shorter than 7 or longer than 63 bytes, go to
 * strcmp): a page holding one byte of the string is mapped whole (4 KiB,
 * which every page size is a multiple of: aarch64's 64 KiB too).  Those
 * bytes are not the string's, so the sanitizers are told not to look.
 */
__attribute__((no_sanitize("address", "thread")))
static inline int tp_itt_same(const char *name, const struct tp_itt_string *h)
{
    size_t n = (size_t)h->len + 1;      /* with the NUL */
    if (__builtin_expect(n - 8 > 64 - 8 || ((uintptr_t)name & 4095) > 4096 - 64, 0))
        return -1;
    uint64_t d = (tp_itt_load8(name) ^ tp_itt_load8(h->name)) |
                 (tp_itt_load8(name + n - 8) ^ tp_itt_load8(h->name + n - 8));
    for (size_t i = 8; i + 8 < n; i += 8)
        d |= tp_itt_load8(name + i) ^ tp_itt_load8(h->name + i);
    return d == 0;
}

/* What the cache's fast check did not answer: a hit tp_itt_same left to
 * strcmp, or a miss, looked up in the process-wide table. */
static __attribute__((noinline)) struct tp_itt_string *tp_itt_handle_slow(const char *name, unsigned i)
{
    struct tp_itt_string *h = tp_itt_cache[i].h;
    if (tp_itt_cache[i].key == name && strcmp(h->name, name) == 0)
        return h;
    h = tp_itt_lookup(name);
    if (h) {
        tp_itt_cache[i].key = name;
        tp_itt_cache[i].h = h;
    }
    return h;
}

TP_EXPORT struct tp_itt_string *__itt_string_handle_create(const char *name)
{
    if (!name)
        return NULL;
    unsigned i = (unsigned)((uintptr_t)name >> 3) % TP_ITT_CACHE;
    struct tp_itt_string *h = tp_itt_cache[i].h;
    if (__builtin_expect(tp_itt_cache[i].key == name && tp_itt_same(name, h) > 0, 1))
        return h;
    return tp_itt_handle_slow(name, i);
}

/* 1 if the tasks of "d" are torch's, which we record: its flags say so;
 * one with flags we did not set (never seen) is checked by name. */
static __attribute__((noinline)) int tp_itt_unseen_is_torch(const struct tp_itt_domain *d)
{
    return __atomic_load_n(&d->flags, __ATOMIC_RELAXED) != 0 && tp_itt_is_torch(d->nameA);
}

static inline int tp_itt_recorded(const struct tp_itt_domain *d)
{
    return d && (__atomic_load_n(&d->flags, __ATOMIC_RELAXED) == TP_ITT_TORCH || tp_itt_unseen_is_torch(d));
}

/* __itt_task_begin past its bare push: a recorded domain's task while a
 * window records or an nvtx:GLOB signal is live, or one of another
 * domain. */
static __attribute__((noinline)) void tp_itt_begin_slow(const struct tp_itt_domain *domain,
                                                        struct tp_itt_string *name)
{
    if (!tp_itt_recorded(domain))
        return;
    if (tp_range_bare_text(name ? name->strA : NULL)) {   /* a domain never seen */
        tp_range_push_bare();
        return;
    }
    if (!tp_ranges_taken()) {           /* its place on the stack (ranges.h) */
        tp_range_push_op(0, 0);
        return;
    }
    if (tp_ranges_placed_only()) {      /* outside windows: no name */
        tp_range_push_hidden(TP_MSG_ID(0), 0);
        return;
    }
    uint32_t nid = 0;
    if (name && name->extra2 != &tp_itt_tag)  /* made by ittnotify before it loaded us */
        name = name->strA ? __itt_string_handle_create(name->strA) : NULL;
    if (name && name->hidden) {
        tp_range_push_hidden(TP_MSG_ID(0), 0);
        return;
    }
    if (name) {
        nid = __atomic_load_n(&name->id, __ATOMIC_ACQUIRE);
        if (!nid) {
            nid = tp_intern(name->name, strlen(name->name));
            __atomic_store_n(&name->id, nid, __ATOMIC_RELEASE);
        }
    }
    tp_range_push_op(nid, atomic_fetch_add_explicit(&tp_itt_next_op, 1, memory_order_relaxed));
}

TP_EXPORT void __itt_task_begin(const struct tp_itt_domain *domain, struct tp_itt_id id,
                                struct tp_itt_id parent, struct tp_itt_string *name)
{
    (void)id;
    (void)parent;
    /* torch's domain outside windows: its place on the stack (ranges.h);
     * by the name's first byte while an nvtx:GLOB signal is live, before
     * activation too (strA: ours and ittnotify's own handles have it) */
    if (__builtin_expect(domain && __atomic_load_n(&domain->flags, __ATOMIC_RELAXED) == TP_ITT_TORCH, 1) &&
        (__builtin_expect(tp_range_bare(), 1) || tp_range_bare_text(name ? name->strA : NULL))) {
        tp_range_push_bare();
        return;
    }
    tp_itt_begin_slow(domain, name);
}

TP_EXPORT void __itt_task_end(const struct tp_itt_domain *domain)
{
    if (__builtin_expect(domain && __atomic_load_n(&domain->flags, __ATOMIC_RELAXED) == TP_ITT_TORCH, 1))
        tp_range_pop();             /* inline: a clean slot's pop is a decrement */
    else if (domain && tp_itt_unseen_is_torch(domain))
        tp_range_pop();
}

/* ittnotify_config.h's __itt_global up to its API table (pack(8), which is
 * the natural layout here) and its __itt_api_info entries. */
struct tp_itt_api_info {
    const char *name;
    void **func_ptr;
    void *init_func;
    void *null_func;
    int group;
};

struct tp_itt_global {
    unsigned char magic[8];
    unsigned long version_major, version_minor, version_build;
    volatile long api_initialized, mutex_initialized, atomic_counter;
    pthread_mutex_t mutex;
    void *lib;
    void *error_handler;
    const char **dll_path_ptr;
    struct tp_itt_api_info *api_list_ptr;
    void *next;
    void *thread_list;
    struct tp_itt_domain *domain_list;   /* the domains ittnotify made before loading us */
};

static const unsigned char tp_itt_magic[8] = { 0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30 };

/* Called by ittnotify (with its own lock held) once, when it loads us. */
TP_EXPORT void __itt_api_init(struct tp_itt_global *g, int init_groups)
{
    static const struct {
        const char *name;
        void *fn;
    } ours[] = {
        { "__itt_domain_create", (void *)__itt_domain_create },
        { "__itt_string_handle_create", (void *)__itt_string_handle_create },
        { "__itt_task_begin", (void *)__itt_task_begin },
        { "__itt_task_end", (void *)__itt_task_end },
    };
    (void)init_groups;
    if (!g || memcmp(g->magic, tp_itt_magic, sizeof tp_itt_magic) != 0 || g->version_major != 3 ||
        !g->api_list_ptr)
        return;
    for (struct tp_itt_api_info *e = g->api_list_ptr; e->name; e++) {
        if (!e->func_ptr)
            continue;
        void *fn = e->null_func;
        for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
            if (strcmp(e->name, ours[i].name) == 0)
                fn = ours[i].fn;
        *e->func_ptr = fn;
    }
    /* ittnotify's own domains (malloc'd, flags 1), under its lock */
    for (struct tp_itt_domain *d = g->domain_list; d; d = d->next)
        __atomic_store_n(&d->flags, tp_itt_is_torch(d->nameA) ? TP_ITT_TORCH : 0, __ATOMIC_RELEASE);
    __atomic_store_n(&tp_itt_state, 2, __ATOMIC_RELEASE);
}

void tp_itt_named(int yes)
{
    if (yes && !__atomic_load_n(&tp_itt_state, __ATOMIC_ACQUIRE))
        __atomic_store_n(&tp_itt_state, 1, __ATOMIC_RELEASE);
}

/* trainprof_itt_collector - see preload/trainprof.h. */
TP_EXPORT int trainprof_itt_collector(void)
{
    return __atomic_load_n(&tp_itt_state, __ATOMIC_ACQUIRE);
}
