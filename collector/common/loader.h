/*
 * loader.h - the dynamic loader as trainprof itself uses it: the real
 * dlsym, and lookups in the CUDA driver the process has already loaded.
 *
 * The collector never calls the dlsym symbol: in libtrainprof.so that is
 * our interposer (preload/dlsym.c), which for a handle of a wrapped library
 * asks our own resolution whether to hand out a wrapper - and our
 * resolution calling it back recursed until the stack overflowed (ctypes
 * opening a cudart RTLD_LOCAL: tests/programs/dlsym_local.c).  Everything
 * trainprof looks up for itself goes through here.
 */
#ifndef TRAINPROF_COLLECTOR_LOADER_H
#define TRAINPROF_COLLECTOR_LOADER_H

/*
 * tp_dlsym_real - glibc's dlsym (the next definition after the object this
 * code is linked into, of either version glibc exports), never our
 * interposer.  RTLD_NEXT and RTLD_DEFAULT are resolved relative to this
 * library (or the test program the collector is linked into).  Returns
 * NULL when the symbol or dlsym itself is not found.
 */
void *tp_dlsym_real(void *handle, const char *name);

/* tp_dlsym_next - glibc's dlsym, resolved on first use (NULL if none).
 * The x86-64 and aarch64 dlsym stubs read and fill the same slot in
 * assembly. */
typedef void *(*tp_dlsym_fn)(void *, const char *);

/* The version of dlsym before glibc 2.34 moved it into libc (dlsym@GLIBC_2.34
 * since): the architecture's first glibc symbol version, which the CUDA
 * libraries, built against older glibc, import. */
#if defined(__aarch64__)
#define TP_GLIBC_BASE "GLIBC_2.17"
#else
#define TP_GLIBC_BASE "GLIBC_2.2.5"     /* x86-64 */
#endif
tp_dlsym_fn tp_dlsym_next_fn(void);

/*
 * tp_driver_syms - look up the "n" entry points "names" of the libcuda the
 * process has already loaded (dlopen RTLD_NOLOAD: we never load it) into
 * "out", NULL where one is missing.  The pointers stay valid while the
 * program keeps libcuda loaded.  Returns 0, or -1 (all NULL) if libcuda is
 * not in the process.  A failed probe is tried again only after the loader
 * has added objects.
 */
int tp_driver_syms(const char *const *names, void **out, int n);

#endif
