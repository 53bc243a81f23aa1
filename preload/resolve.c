/*
 * resolve.c - DESIGN: resolution is lazy (at a wrapper's first call, when
 * the library that defines the function is loaded) and cached by the
 * caller in its own slot.  The scan fallback is what finds functions in
 * libraries Python loaded with RTLD_LOCAL: dlsym(RTLD_NEXT) does not find
 * a function in a dependency of an RTLD_LOCAL dlopen.
 *
 * Every lookup here uses the real dlsym (tp_dlsym_real), never the dlsym
 * symbol: that one is our interposer, and for a handle of a wrapped library
 * it calls tp_resolve to decide whether to hand out our wrapper.  Through
 * the symbol, a lookup in a cudart that ctypes had opened RTLD_LOCAL went
 * tp_dlsym_handle -> tp_resolve -> dlsym(handle) -> tp_dlsym_handle ...
 * until the stack overflowed, with the profiler enabled or not (tests/programs/dlsym_local.c).
 */
#include "resolve.h"
#include "collector/common/grow.h"
#include "collector/common/loader.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

/* dl_iterate_phdr holds the loader's write lock while it calls back, and
 * dlopen takes the load lock and then that write lock: a dlopen inside the
 * callback deadlocks against another thread's dlopen.  So the scan only
 * copies the names; the lookups happen after it. */
struct tp_scan {
    const char *self;
    char *names;             /* NUL-separated paths */
    size_t len, cap;
};

static int tp_scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct tp_scan *s = arg;
    if (!info->dlpi_name || !info->dlpi_name[0] || strcmp(info->dlpi_name, s->self) == 0)
        return 0;
    size_t n = strlen(info->dlpi_name) + 1;
    char *p = tp_grow(s->names, &s->cap, s->len + n, 1, 4096);
    if (!p)
        return 1;        /* out of memory: look in what we have */
    s->names = p;
    memcpy(s->names + s->len, info->dlpi_name, n);
    s->len += n;
    return 0;
}

void *tp_resolve(const char *name)
{
    void *p = tp_dlsym_real(RTLD_NEXT, name);
    if (p)
        return p;
    Dl_info me;
    struct tp_scan s = { "", NULL, 0, 0 };
    if (dladdr((void *)tp_resolve, &me) && me.dli_fname)
        s.self = me.dli_fname;
    dl_iterate_phdr(tp_scan_one, &s);
    for (size_t off = 0; off < s.len && !p; off += strlen(s.names + off) + 1) {
        void *h = dlopen(s.names + off, RTLD_NOLOAD | RTLD_LAZY);
        if (!h)
            continue;
        p = tp_dlsym_real(h, name);
        dlclose(h);
    }
    free(s.names);
    return p;
}
