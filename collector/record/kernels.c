/*
 * kernels.c - DESIGN: the same lock-free-read, locked-insert hash chains as
 * intern.c, keyed by stub or kernel-handle address.  PyTorch registers on
 * the order of 10^5 kernels at load time, so registration only stores two
 * pointers; demangling is deferred to the first time a name is needed.
 * __cxa_demangle is not linked (no libstdc++ in DT_NEEDED): it is taken from
 * the process if present, else from libstdc++.so.6 loaded on first use.
 * Driver handles (TP_FUNC_DRIVER) get copied names from the driver's
 * name-capture calls; a handle obtained some other way is named by the
 * driver itself, once, and the answer (or its absence) is kept.
 */
#include "kernels.h"
#include "collector/common/loader.h"
#include "intern.h"
#include "collector/contract/record.h"

#include <dlfcn.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TP_KBUCKETS (1u << 16)

struct tp_kentry {
    struct tp_kentry *_Atomic next;
    uint64_t key;
    const char *mangled;               /* NULL for aliases */
    const void *stub;                  /* aliases: the stub they launch */
    _Atomic uint32_t name_id;          /* 0 = not yet demangled */
    _Atomic int8_t match;              /* launch-glob cache: 0 unknown, 1 yes, -1 no */
    uint8_t owned;                     /* mangled is our copy */
    _Atomic uint8_t asked;             /* the driver was asked for the name */
};

static struct tp_kentry *_Atomic tp_kbuckets[TP_KBUCKETS];
static pthread_mutex_t tp_klock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t tp_khash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static struct tp_kentry *tp_klookup(uint64_t key)
{
    struct tp_kentry *e = atomic_load_explicit(&tp_kbuckets[tp_khash(key) % TP_KBUCKETS], memory_order_acquire);
    for (; e; e = atomic_load_explicit(&e->next, memory_order_acquire))
        if (e->key == key)
            return e;
    return NULL;
}

/* Insert or update "key"; "owned": "mangled" is a malloc'ed copy that the
 * table takes over (freed at once if it adds nothing). */
static void tp_kinsert_at(uint64_t key, const char *mangled, const void *stub, int owned)
{
    pthread_mutex_lock(&tp_klock);
    struct tp_kentry *e = tp_klookup(key);
    if (e) {
        if (stub && !e->stub && !e->mangled)
            e->stub = stub;   /* an alias of a handle first seen unnamed */
        /* re-registration (module reloaded): later registration wins; a
         * replaced copy is leaked, the flush thread may be reading it */
        if (mangled && e->mangled != mangled && !(e->mangled && owned && strcmp(e->mangled, mangled) == 0)) {
            e->mangled = mangled;
            e->owned = (uint8_t)owned;
            atomic_store(&e->name_id, 0);
            atomic_store(&e->match, 0);
            owned = 0;
        }
        pthread_mutex_unlock(&tp_klock);
        if (owned)
            free((void *)mangled);
        return;
    }
    e = calloc(1, sizeof *e);
    if (e) {
        e->key = key;
        e->mangled = mangled;
        e->stub = stub;
        e->owned = (uint8_t)owned;
        struct tp_kentry *_Atomic *head = &tp_kbuckets[tp_khash(key) % TP_KBUCKETS];
        atomic_init(&e->next, atomic_load_explicit(head, memory_order_relaxed));
        atomic_store_explicit(head, e, memory_order_release);
    } else if (owned) {
        free((void *)mangled);
    }
    pthread_mutex_unlock(&tp_klock);
}

static void tp_kinsert(uint64_t key, const char *mangled, const void *stub)
{
    if (key)
        tp_kinsert_at(key, mangled, stub, 0);
}

void tp_kernels_register_copy(const void *handle, const char *mangled)
{
    if (!handle || !mangled)
        return;
    char *copy = strdup(mangled);
    if (copy)
        tp_kinsert_at((uint64_t)(uintptr_t)handle, copy, NULL, 1);
}

void tp_kernels_register(const void *stub, const char *mangled)
{
    if (mangled)
        tp_kinsert((uint64_t)(uintptr_t)stub, mangled, NULL);
}

void tp_kernels_alias(const void *kernel, const void *stub)
{
    if (kernel != stub)
        tp_kinsert((uint64_t)(uintptr_t)kernel, NULL, stub);
}

typedef int (*tp_getname_fn)(const char **, uint64_t);

/* The driver's name for CUkernel or CUfunction "func", copied into the
 * table; only if libcuda is already loaded. */
static void tp_kask_driver(uint64_t func)
{
    static const char *const getters[] = { "cuKernelGetName", "cuFuncGetName" };
    void *fn[2];
    if (tp_driver_syms(getters, fn, 2) != 0)
        return;
    const char *name = NULL;
    for (size_t i = 0; i < 2 && !name; i++) {
        tp_getname_fn get = (tp_getname_fn)fn[i];
        if (!get || get(&name, func) != 0)
            name = NULL;
    }
    if (name && name[0])
        tp_kernels_register_copy((const void *)(uintptr_t)func, name);
}

/* The entry holding the mangled name for a launched function. */
static struct tp_kentry *tp_kresolve(uint64_t func, int kind)
{
    if (kind == TP_FUNC_GRAPH)
        return NULL;
    struct tp_kentry *e = tp_klookup(func);
    if (e && !e->mangled && e->stub)
        e = tp_klookup((uint64_t)(uintptr_t)e->stub);
    if (kind == TP_FUNC_DRIVER && !(e && e->mangled) && func) {
        struct tp_kentry *self = tp_klookup(func);
        if (!self) {
            tp_kinsert(func, NULL, NULL);
            self = tp_klookup(func);
        }
        if (self && !atomic_exchange(&self->asked, 1)) {
            tp_kask_driver(self->stub ? (uint64_t)(uintptr_t)self->stub : func);
            return tp_kresolve(func, TP_FUNC_KERNEL);
        }
    }
    return e && e->mangled ? e : NULL;
}

typedef char *(*tp_cxa_demangle_fn)(const char *, char *, size_t *, int *);

static tp_cxa_demangle_fn tp_find_demangler(void)
{
    static _Atomic(tp_cxa_demangle_fn) fn;
    static _Atomic int tried;
    tp_cxa_demangle_fn f = atomic_load(&fn);
    if (f || atomic_load(&tried))
        return f;
    f = (tp_cxa_demangle_fn)tp_dlsym_real(RTLD_DEFAULT, "__cxa_demangle");
    if (!f) {
        void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h)
            f = (tp_cxa_demangle_fn)tp_dlsym_real(h, "__cxa_demangle");
    }
    atomic_store(&fn, f);
    atomic_store(&tried, 1);
    return f;
}

void tp_demangle(const char *name, char *out, size_t outsz)
{
    if (!outsz)
        return;
    tp_cxa_demangle_fn f = name[0] == '_' && name[1] == 'Z' ? tp_find_demangler() : NULL;
    int status = -1;
    char *d = f ? f(name, NULL, NULL, &status) : NULL;
    const char *src = d && status == 0 ? d : name;
    size_t n = strlen(src);
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, src, n);
    out[n] = 0;
    free(d);
}

static uint32_t tp_kname(struct tp_kentry *e)
{
    uint32_t id = atomic_load_explicit(&e->name_id, memory_order_acquire);
    if (!id) {
        char buf[TP_INTERN_LEN_MAX + 1];
        tp_demangle(e->mangled, buf, sizeof buf);
        id = tp_intern(buf, (size_t)-1);
        atomic_store_explicit(&e->name_id, id, memory_order_release);
    }
    return id;
}

uint32_t tp_kernels_name_id(uint64_t func, int kind)
{
    struct tp_kentry *e = tp_kresolve(func, kind);
    return e ? tp_kname(e) : 0;
}

int tp_kernels_match(uint64_t func, int kind, const char *glob)
{
    struct tp_kentry *e = tp_kresolve(func, kind);
    if (!e)
        return 0;
    int8_t m = atomic_load_explicit(&e->match, memory_order_relaxed);
    if (!m) {
        m = fnmatch(glob, tp_intern_str(tp_kname(e)), 0) == 0 ? 1 : -1;
        atomic_store_explicit(&e->match, m, memory_order_relaxed);
    }
    return m > 0;
}
