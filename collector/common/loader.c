/*
 * loader.c - DESIGN: trainprof's own use of the dynamic loader, in one
 * place below everything that needs it (loader.h says why the dlsym symbol
 * is off limits).  The real dlsym is found with dlvsym, which we do not
 * interpose, and kept in tp_dlsym_next, a hidden global that the x86-64 and
 * aarch64 dlsym stubs in preload/dlsym.c also fill and read.  Probes for libcuda
 * are dlopen(RTLD_NOLOAD) of its bare name, ~10 us each when it is absent
 * (measured: 20 us per cudaMalloc/cudaFree pair on the fake runtime before
 * this guard), so a failed one is repeated only after the loader's object
 * count (dl_phdr_info.dlpi_adds) has changed.
 */
#include "loader.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>

/* Read and written by the assembly stub too: hidden, not static. */
__attribute__((visibility("hidden"))) tp_dlsym_fn tp_dlsym_next;

tp_dlsym_fn tp_dlsym_next_fn(void)
{
    tp_dlsym_fn f = __atomic_load_n(&tp_dlsym_next, __ATOMIC_ACQUIRE);
    if (f)
        return f;
    /* 2.34 moved dlsym into libc; the CUDA libraries import the compat
     * one (GLIBC_2.2.5 on x86-64, GLIBC_2.17 on aarch64) */
    f = (tp_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f)
        f = (tp_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", TP_GLIBC_BASE);
    if (f)
        __atomic_store_n(&tp_dlsym_next, f, __ATOMIC_RELEASE);
    return f;
}

/* glibc resolves RTLD_NEXT from its caller's address: here, or (as a tail
 * call) our caller, which is hidden and so always in the same object. */
void *tp_dlsym_real(void *handle, const char *name)
{
    tp_dlsym_fn f = tp_dlsym_next_fn();
    return f ? f(handle, name) : NULL;
}

static int tp_adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs))
        *(unsigned long long *)arg = info->dlpi_adds;
    return 1;   /* the counter is the same on every object: stop at the first */
}

/* The loader's count of objects added so far (~0 when glibc lacks it). */
static unsigned long long tp_loader_adds(void)
{
    unsigned long long adds = ~0ull;
    dl_iterate_phdr(tp_adds_cb, &adds);
    return adds;
}

static _Atomic unsigned long long tp_adds_failed = ~0ull;

int tp_driver_syms(const char *const *names, void **out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    unsigned long long adds = tp_loader_adds();
    if (adds != ~0ull && adds == atomic_load_explicit(&tp_adds_failed, memory_order_relaxed))
        return -1;
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h) {
        atomic_store_explicit(&tp_adds_failed, adds, memory_order_relaxed);
        return -1;
    }
    for (int i = 0; i < n; i++)
        out[i] = tp_dlsym_real(h, names[i]);
    dlclose(h);   /* only drops the reference NOLOAD took */
    return 0;
}
