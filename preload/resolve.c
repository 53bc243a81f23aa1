/*
 * resolve.c - DESIGN: resolution is lazy (at a wrapper's first call, when
 * the library that defines the function is loaded) and cached by the
 * caller in its own slot.  The scan fallback is what finds functions in
 * libraries Python loaded with RTLD_LOCAL (notes/injection.md 1.3).
 */
#include "resolve.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

struct tp_scan {
    const char *name;
    const char *self;
    void *found;
};

static int tp_scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct tp_scan *s = arg;
    if (!info->dlpi_name || !info->dlpi_name[0] || strcmp(info->dlpi_name, s->self) == 0)
        return 0;
    void *h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return 0;
    s->found = dlsym(h, s->name);
    dlclose(h);
    return s->found != NULL;
}

void *tp_resolve(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p)
        return p;
    Dl_info me;
    struct tp_scan s = { name, "", NULL };
    if (dladdr((void *)tp_resolve, &me) && me.dli_fname)
        s.self = me.dli_fname;
    dl_iterate_phdr(tp_scan_one, &s);
    return s.found;
}
