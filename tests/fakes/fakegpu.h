/*
 * fakegpu.h - how the fake runtime (cudart.c) and the fake driver (cuda.c)
 * tell the fake CUPTI (cupti.c) about the work they pretend to run.
 *
 * The fake CUPTI, once its activity kinds are enabled, finds the fakes with
 * dlopen(soname, RTLD_NOLOAD) and calls their exported fakegpu_set_observer().
 * From then on each fake calls begin() on entry of every API call it
 * implements and end() just before returning; the fake CUPTI turns the pair
 * into an API record (and, for work, a device record) and delivers them from
 * its own thread.  Passing NULLs stops the reports.  A begin() on a thread
 * whose last begin() has not ended yet is a nested call (a runtime calling
 * the driver): the real CUPTI gives it no record, and its work goes under
 * the outer call's correlation id.  A program may export
 * fakegpu_set_observer too (tests/programs/static_rt.c, its own runtime).
 */
#ifndef TRAINPROF_FAKES_FAKEGPU_H
#define TRAINPROF_FAKES_FAKEGPU_H

#include <stddef.h>
#include <stdint.h>

enum fakegpu_domain { FAKEGPU_RUNTIME = 0, FAKEGPU_DRIVER = 1 };
enum fakegpu_kind {
    FAKEGPU_NONE = 0, FAKEGPU_KERNEL, FAKEGPU_MEMCPY, FAKEGPU_MEMSET, FAKEGPU_SYNC,
    FAKEGPU_EVENT,           /* cudaEventRecord: "event" recorded on "stream" */
};

struct fakegpu_op {
    int domain;              /* enum fakegpu_domain */
    int cbid;                /* CUPTI runtime or driver callback id of the call */
    int kind;                /* enum fakegpu_kind */
    const char *kernel;      /* KERNEL: mangled name, NULL if unknown */
    unsigned grid[3], block[3];
    unsigned smem;           /* KERNEL: dynamic shared memory */
    unsigned cluster[3];     /* KERNEL: cluster dimension attribute (0: none) */
    int cooperative;         /* KERNEL: CUpti_ActivityLaunchType (1: cooperative) */
    uint64_t stream;         /* stream handle as passed (0: default stream) */
    uint64_t bytes;          /* MEMCPY, MEMSET */
    int copy_kind;           /* MEMCPY: enum cudaMemcpyKind */
    int status;              /* the call's return code (0: success) */
    uint64_t event;          /* EVENT, and SYNC on an event (cudaEventSynchronize,
                                cudaStreamWaitEvent): the event handle */
};

/* A CUDA array of the fake driver (cuArray3DCreate_v2): the CUarray, and
 * the runtime's cudaArray_t, points at this.  Elements are stored densely,
 * row after row, layer after layer. */
#define FAKEGPU_ARRAY_MAGIC 0x61727279u
struct fakegpu_array {
    uint32_t magic;
    unsigned format, channels, elem;   /* CUarray_format, channels, bytes per element */
    size_t width, height, depth;       /* in elements; height and depth at least 1 */
    unsigned char data[];
};

/* begin() returns a token (the fake correlation id) that end() gets back. */
typedef uint64_t (*fakegpu_begin_fn)(void);
typedef void (*fakegpu_end_fn)(uint64_t token, const struct fakegpu_op *op);
typedef void (*fakegpu_set_observer_fn)(fakegpu_begin_fn begin, fakegpu_end_fn end);

/* fakegpu_driver_sym - a driver function as a library with the CUDA runtime
 * linked in statically reaches it (NCCL, cuBLAS: no DT_NEEDED on any CUDA
 * library, their runtime dlopens libcuda.so.1 and looks its functions up),
 * for the fakes of those libraries: NULL while libcuda.so.1 is not loaded
 * (a fake that allocates nothing then), else the global definition
 * (dlsym(RTLD_DEFAULT): an interposer's, when one is preloaded), else the
 * loaded driver's own (dlsym on its handle: the fake runtime loads it
 * RTLD_LOCAL).  Either way the call is made from the fake library's code, as
 * the real library's static runtime makes it from the library's. */
#ifdef FAKEGPU_DRIVER_SYM
#include <dlfcn.h>

static inline void *fakegpu_driver_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return NULL;
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p)
        p = dlsym(h, name);
    dlclose(h);
    return p;
}
#endif

#endif
