/*
 * stack.c - DESIGN: host call stacks, captured raw and named later.
 *
 * Capture (training thread): libunwind's unw_backtrace walks the frames with
 * its per-thread trace cache (no malloc or lock once a call site was seen);
 * frames inside libtrainprof are dropped by address range, which holds
 * whatever the compiler inlined or tail-called: the leading ones (this
 * function, the wrapper's recording path, the wrapper) and those of an
 * enclosing library wrapper (a launch made inside cublasSgemm shows
 * "caller;libcublas...;cudaLaunchKernel", not our cublasSgemm_v2 wrapper).  The IPs go into the thread's buffer as
 * TP_REC_STACK records of 7 IPs each (t0, t1 and u are 56 contiguous bytes),
 * tagged with the low bits of the call's start tick.  libunwind is loaded
 * with dlopen(RTLD_LOCAL) only when TRAINPROF_WITH_STACK=1, so that
 * libtrainprof.so needs nothing more on GPU nodes and its _Unwind_* symbols
 * never shadow the C++ runtime's.  libunwind 1.6 (Debian 12) exports
 * unw_backtrace plainly and the rest under the architecture's local prefix
 * (_ULx86_64_, _ULaarch64_: TP_UNW_LOCAL); it has no
 * unw_get_proc_name_by_ip, so names come from dladdr (exported symbols),
 * else from the file's full symbol table (collector/common/elfsym.h: static
 * functions, programs built without -rdynamic), else "module+0xoffset" where the
 * offset is the function's start (unw_get_proc_info_by_ip, from .eh_frame)
 * when libunwind knows it, the return address less one otherwise.
 *
 * Symbolisation (tp-flush): one hash table per return address (name looked
 * up at ip - 1, inside the call instruction), one per whole stack, so that
 * a training loop's few thousand distinct stacks are resolved once for the
 * life of the process.
 */
#include "stack.h"
#include "module.h"
#include "collector/common/loader.h"
#include "collector/record/buffer.h"
#include "collector/config/config.h"
#include "collector/common/elfsym.h"
#include "collector/record/kernels.h"
#include "collector/common/log.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

/* libunwind's names for the local-unwinding entry points: _UL<arch>_ */
#if defined(__aarch64__)
#define TP_UNW_LOCAL(name) "_ULaarch64_" name
#else
#define TP_UNW_LOCAL(name) "_ULx86_64_" name
#endif

/* libunwind-common.h: enum unw_caching_policy_t */
#define TP_UNW_CACHE_PER_THREAD 2

typedef int (*tp_unw_backtrace_fn)(void **, int);
typedef int (*tp_unw_caching_fn)(void *as, int policy);
/* unw_get_proc_info_by_ip(as, ip, unw_proc_info_t *, as_arg): start_ip is
 * the struct's first member in every libunwind release; the rest of it is
 * given room (tp_symbol_make) and never read */
typedef int (*tp_unw_proc_info_fn)(void *as, uintptr_t ip, void *pi, void *arg);

static tp_unw_backtrace_fn tp_unw_backtrace;
static tp_unw_proc_info_fn tp_unw_proc_info;
static void *tp_unw_as;
static int tp_stack_ready;
static uintptr_t tp_self_lo, tp_self_hi;   /* libtrainprof's mapped range */

_Static_assert(__builtin_offsetof(struct tp_record, t1) == __builtin_offsetof(struct tp_record, t0) + 8 &&
               __builtin_offsetof(struct tp_record, u) == __builtin_offsetof(struct tp_record, t0) + 16 &&
               sizeof(struct tp_record) - __builtin_offsetof(struct tp_record, t0) == 8 * TP_STACK_PER_REC,
               "a STACK record holds 7 IPs from t0 on");

/* dl_iterate_phdr callback: the mapped range of the object holding "arg". */
static int tp_self_range_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t self = (uintptr_t)arg, lo = UINTPTR_MAX, hi = 0;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + p->p_vaddr;
        mine |= self >= a && self < a + p->p_memsz;
        if (a < lo)
            lo = a;
        if (a + p->p_memsz > hi)
            hi = a + p->p_memsz;
    }
    if (!mine)
        return 0;
    tp_self_lo = lo;
    tp_self_hi = hi;
    return 1;
}

int tp_stack_init(void)
{
    if (tp_stack_ready)
        return 0;
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    tp_unw_backtrace_fn bt = h ? (tp_unw_backtrace_fn)tp_dlsym_real(h, "unw_backtrace") : NULL;
    if (!bt) {
        TP_WARN("TRAINPROF_WITH_STACK=1 but libunwind.so.8 cannot be loaded (%s): "
                "no call stacks (install libunwind8)", h ? "no unw_backtrace" : dlerror());
        return -1;
    }
    tp_unw_caching_fn caching = (tp_unw_caching_fn)tp_dlsym_real(h, TP_UNW_LOCAL("set_caching_policy"));
    void **as = (void **)tp_dlsym_real(h, TP_UNW_LOCAL("local_addr_space"));
    if (caching && as)
        caching(*as, TP_UNW_CACHE_PER_THREAD);
    if (as) {
        tp_unw_as = *as;
        tp_unw_proc_info = (tp_unw_proc_info_fn)tp_dlsym_real(h, TP_UNW_LOCAL("get_proc_info_by_ip"));
    }
    dl_iterate_phdr(tp_self_range_cb, (void *)(uintptr_t)tp_stack_init);
    tp_unw_backtrace = bt;
    __atomic_store_n(&tp_stack_ready, 1, __ATOMIC_RELEASE);
    return 0;
}

int tp_stack_on(void)
{
    return __atomic_load_n(&tp_stack_ready, __ATOMIC_ACQUIRE);
}

/* Frames of ours above the caller: tp_stack_capture (unless inlined),
 * tp_stack_record, the wrapper's recording path, the wrapper (unless it
 * tail-called).  Walking more costs ~100 ns per 8 frames at depth 32. */
#define TP_STACK_OURS 6

int tp_stack_capture(uint64_t *ips, int max)
{
    void *raw[TP_STACK_MAX + TP_STACK_OURS];
    if (!tp_unw_backtrace || max <= 0)
        return 0;
    if (max > TP_STACK_MAX)
        max = TP_STACK_MAX;
    int n = tp_unw_backtrace(raw, max + TP_STACK_OURS);
    int k = 0;
    for (int i = 0; i < n && k < max; i++)
        if ((uintptr_t)raw[i] < tp_self_lo || (uintptr_t)raw[i] >= tp_self_hi)
            ips[k++] = (uint64_t)(uintptr_t)raw[i];
    return k;
}

void tp_stack_record(uint8_t gen, uint64_t t0)
{
    uint64_t ips[TP_STACK_MAX];
    int n = tp_stack_capture(ips, tp_cfg.stack_depth);
    for (int i = 0; i < n; i += TP_STACK_PER_REC) {
        struct tp_record *r = tp_buf_reserve();
        if (!r)
            return;
        int k = n - i < TP_STACK_PER_REC ? n - i : TP_STACK_PER_REC;
        r->kind = TP_REC_STACK;
        r->gen = gen;
        r->api = (uint16_t)(k | (i == 0 ? TP_STACK_FIRST : 0));
        r->status = (int32_t)(uint32_t)t0;
        __builtin_memcpy(&r->t0, &ips[i], (size_t)k * 8);
        tp_buf_commit();
    }
}

/* ---- reader --------------------------------------------------------------- */

void tp_stack_gather(struct tp_stack_scratch *s, const void *owner, const struct tp_record *r)
{
    unsigned k = TP_STACK_COUNT(r->api);
    if ((r->api & TP_STACK_FIRST) || s->owner != owner || s->tag != (uint32_t)r->status) {
        s->owner = owner;
        s->tag = (uint32_t)r->status;
        s->n = 0;
        if (!(r->api & TP_STACK_FIRST)) {
            s->owner = NULL;     /* a continuation without its start: drop */
            return;
        }
    }
    if (k > TP_STACK_PER_REC)
        k = TP_STACK_PER_REC;
    for (unsigned i = 0; i < k && s->n < TP_STACK_MAX; i++)
        __builtin_memcpy(&s->ips[s->n++], (const char *)&r->t0 + 8 * i, 8);
}

const char *const *tp_stack_take(struct tp_stack_scratch *s, const void *owner,
                                 const struct tp_record *r, int *n)
{
    const char *const *f = NULL;
    *n = 0;
    if (s->owner == owner && s->n > 0 && s->tag == (uint32_t)r->t0) {
        f = tp_stack_resolve(s->ips, s->n);
        if (f)
            *n = s->n;
    }
    s->owner = NULL;
    s->n = 0;
    return f;
}

/* ---- symbols -------------------------------------------------------------- */

struct tp_sym { uint64_t ip; char *name; };
static struct tp_sym *tp_syms;
static size_t tp_syms_n, tp_syms_cap;      /* cap: power of two */
static uint64_t tp_sym_lookups, tp_sym_misses;

struct tp_stk {
    struct tp_stk *next;
    uint64_t hash;
    int n;
    const char **frames;                   /* root first */
    uint64_t ips[];                        /* innermost first */
};
static struct tp_stk **tp_stks;
static size_t tp_stks_n, tp_stks_cap;

static uint64_t tp_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

void tp_stack_sanitize(char *s)
{
    for (; *s; s++) {
        if (*s == ';')
            *s = ':';
        else if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
    }
}

static char *tp_symbol_make(uint64_t ip)
{
    char buf[4096];
    Dl_info info;
    const char *name;
    const void *at = (const void *)(uintptr_t)(ip ? ip - 1 : ip);
    int found = dladdr(at, &info) != 0;
    if (found && info.dli_sname && info.dli_sname[0]) {
        tp_demangle(info.dli_sname, buf, sizeof buf);
    } else if (found && info.dli_fname && info.dli_fname[0] &&
               (name = tp_elfsym_lookup(info.dli_fname, (uintptr_t)info.dli_fbase,
                                        (uintptr_t)at, NULL)) != NULL) {
        /* no dynamic symbol, but the file's full symbol table names it */
        tp_demangle(name, buf, sizeof buf);
    } else if (found && info.dli_fname && info.dli_fname[0]) {
        /* a function without any symbol (stripped file): named by where it
         * starts, from its unwind entry, so that all its call sites fold
         * into one frame */
        uintptr_t start = (uintptr_t)at;
        uint64_t pi[32];
        if (tp_unw_proc_info && tp_unw_proc_info(tp_unw_as, (uintptr_t)at, pi, NULL) == 0 &&
            pi[0] && pi[0] <= (uintptr_t)at && pi[0] >= (uintptr_t)info.dli_fbase)
            start = (uintptr_t)pi[0];
        const char *base = strrchr(info.dli_fname, '/');
        snprintf(buf, sizeof buf, "%s+0x%llx", base ? base + 1 : info.dli_fname,
                 (unsigned long long)(start - (uintptr_t)info.dli_fbase));
    } else {
        snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)(uintptr_t)at);
    }
    if (!buf[0])
        snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)(uintptr_t)at);
    tp_stack_sanitize(buf);
    return strdup(buf);
}

static int tp_syms_grow(void)
{
    size_t cap = tp_syms_cap ? 2 * tp_syms_cap : 1024;
    struct tp_sym *v = calloc(cap, sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < tp_syms_cap; i++) {
        if (!tp_syms[i].name)
            continue;
        size_t j = tp_mix(tp_syms[i].ip) & (cap - 1);
        while (v[j].name)
            j = (j + 1) & (cap - 1);
        v[j] = tp_syms[i];
    }
    free(tp_syms);
    tp_syms = v;
    tp_syms_cap = cap;
    return 0;
}

const char *tp_stack_symbol(uint64_t ip)
{
    tp_sym_lookups++;
    if (tp_syms_cap) {
        size_t j = tp_mix(ip) & (tp_syms_cap - 1);
        for (; tp_syms[j].name; j = (j + 1) & (tp_syms_cap - 1))
            if (tp_syms[j].ip == ip)
                return tp_syms[j].name;
    }
    tp_sym_misses++;
    if ((tp_syms_n + 1) * 2 > tp_syms_cap && tp_syms_grow() != 0)
        return NULL;
    char *name = tp_symbol_make(ip);
    if (!name)
        return NULL;
    size_t j = tp_mix(ip) & (tp_syms_cap - 1);
    while (tp_syms[j].name)
        j = (j + 1) & (tp_syms_cap - 1);
    tp_syms[j] = (struct tp_sym){ ip, name };
    tp_syms_n++;
    return name;
}

const char *const *tp_stack_resolve(const uint64_t *ips, int n)
{
    if (n <= 0)
        return NULL;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = tp_mix(h ^ ips[i]);
    if (tp_stks_cap) {
        for (struct tp_stk *s = tp_stks[h & (tp_stks_cap - 1)]; s; s = s->next)
            if (s->hash == h && s->n == n && memcmp(s->ips, ips, (size_t)n * 8) == 0)
                return s->frames;
    }
    if (tp_stks_n >= tp_stks_cap) {
        size_t cap = tp_stks_cap ? 2 * tp_stks_cap : 256;
        struct tp_stk **v = calloc(cap, sizeof *v);
        if (!v)
            return NULL;
        for (size_t i = 0; i < tp_stks_cap; i++)
            for (struct tp_stk *s = tp_stks[i], *nx; s; s = nx) {
                nx = s->next;
                s->next = v[s->hash & (cap - 1)];
                v[s->hash & (cap - 1)] = s;
            }
        free(tp_stks);
        tp_stks = v;
        tp_stks_cap = cap;
    }
    struct tp_stk *s = malloc(sizeof *s + (size_t)n * 8);
    const char **f = malloc((size_t)n * sizeof *f);
    if (!s || !f) {
        free(s);
        free(f);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        f[n - 1 - i] = tp_stack_symbol(ips[i]);
        if (!f[n - 1 - i])
            f[n - 1 - i] = "?";
    }
    s->hash = h;
    s->n = n;
    s->frames = f;
    memcpy(s->ips, ips, (size_t)n * 8);
    s->next = tp_stks[h & (tp_stks_cap - 1)];
    tp_stks[h & (tp_stks_cap - 1)] = s;
    tp_stks_n++;
    return f;
}

/* ---- correlation -> frames --------------------------------------------------- */

struct tp_stack_corr {
    size_t n, cap;                 /* cap: power of two */
    struct tp_corr_slot {
        uint64_t corr;             /* 0 = empty */
        const char *const *frames;
        int n;
    } slot[];
};

static size_t tp_corr_pos(uint64_t corr, size_t cap)
{
    return tp_mix(corr) & (cap - 1);
}

void tp_stack_corr_put(struct tp_stack_corr **m, uint64_t corr, const char *const *frames, int n)
{
    struct tp_stack_corr *c = *m;
    if (!corr)
        return;
    if (!c || (c->n + 1) * 2 > c->cap) {
        size_t cap = c ? 2 * c->cap : 256;
        struct tp_stack_corr *v = calloc(1, sizeof *v + cap * sizeof v->slot[0]);
        if (!v)
            return;
        v->cap = cap;
        for (size_t i = 0; c && i < c->cap; i++) {
            if (!c->slot[i].corr)
                continue;
            size_t j = tp_corr_pos(c->slot[i].corr, cap);
            while (v->slot[j].corr)
                j = (j + 1) & (cap - 1);
            v->slot[j] = c->slot[i];
            v->n++;
        }
        free(c);
        *m = c = v;
    }
    size_t j = tp_corr_pos(corr, c->cap);
    while (c->slot[j].corr && c->slot[j].corr != corr)
        j = (j + 1) & (c->cap - 1);
    c->n += !c->slot[j].corr;
    c->slot[j].corr = corr;
    c->slot[j].frames = frames;
    c->slot[j].n = n;
}

const char *const *tp_stack_corr_get(const struct tp_stack_corr *m, uint64_t corr, int *n)
{
    *n = 0;
    if (!m || !corr)
        return NULL;
    for (size_t j = tp_corr_pos(corr, m->cap); m->slot[j].corr; j = (j + 1) & (m->cap - 1))
        if (m->slot[j].corr == corr) {
            *n = m->slot[j].n;
            return m->slot[j].frames;
        }
    return NULL;
}

void tp_stack_corr_free(struct tp_stack_corr *m)
{
    free(m);
}

void tp_stack_cache_stats(uint64_t *lookups, uint64_t *misses)
{
    *lookups = tp_sym_lookups;
    *misses = tp_sym_misses;
}

void tp_stack_reset(void)
{
    for (size_t i = 0; i < tp_syms_cap; i++)
        free(tp_syms[i].name);
    free(tp_syms);
    tp_syms = NULL;
    tp_syms_n = tp_syms_cap = 0;
    tp_elfsym_reset();
    for (size_t i = 0; i < tp_stks_cap; i++)
        for (struct tp_stk *s = tp_stks[i], *nx; s; s = nx) {
            nx = s->next;
            free(s->frames);
            free(s);
        }
    free(tp_stks);
    tp_stks = NULL;
    tp_stks_n = tp_stks_cap = 0;
    tp_sym_lookups = tp_sym_misses = 0;
}

/* ---- the module (collector/modules/modules.def) ---------------------------------- */

static void stack_init(const struct tp_config *cfg)
{
    if (cfg->with_stack || (cfg->memory_stacks && cfg->profile_memory))
        tp_stack_init();
}

const struct tp_module tp_module_stack = {
    .name = "stack",
    .init = stack_init,
};
