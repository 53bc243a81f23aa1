/*
 * dlopen_count.c - a second preloaded library, listed after libtrainprof.so
 * in LD_PRELOAD, that counts the process's dlopen calls of the CUDA driver
 * (a file whose base name starts with "libcuda.so") that failed, with and
 * without RTLD_NOLOAD, and prints them on stderr at exit:
 * "dlopen_count: libcuda failed <n> noload_failed <m>".  Each failed dlopen
 * of a bare name searches the loader's paths; a torch job once made
 * hundreds per step.  The real dlopen comes from dlsym(RTLD_NEXT); glibc then takes the
 * caller's $ORIGIN from here, which is fine for a test that only counts.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*dlopen_fn)(const char *, int);

static int count_failed, count_noload_failed;

static void count_report(void)
{
    fprintf(stderr, "dlopen_count: libcuda failed %d noload_failed %d\n",
            __atomic_load_n(&count_failed, __ATOMIC_RELAXED),
            __atomic_load_n(&count_noload_failed, __ATOMIC_RELAXED));
}

__attribute__((constructor)) static void count_init(void)
{
    atexit(count_report);
}

void *dlopen(const char *file, int mode)
{
    static dlopen_fn real;
    if (!real)
        real = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    if (!real)
        return NULL;
    void *h = real(file, mode);
    if (!h && file) {
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        if (strncmp(base, "libcuda.so", 10) == 0)
            __atomic_fetch_add((mode & RTLD_NOLOAD) ? &count_noload_failed : &count_failed, 1,
                               __ATOMIC_RELAXED);
    }
    return h;
}
