/*
 * driver.h - the driver wrappers that lookups hand out (preload/driver.c:
 * records and name capture; preload/graphs.c: graph capture bookkeeping),
 * and the lookup-side substitution (preload/procaddr.c) that dlsym.c shares.
 */
#ifndef TRAINPROF_PRELOAD_DRIVER_H
#define TRAINPROF_PRELOAD_DRIVER_H

#include <stdint.h>

#include "collector/common/loader.h"

/* Wrappers per wrapped variant, each bound at lookup time to one real
 * function (a driver may hand out several pointers for one variant). */
#define TP_DRV_SLOTS 4

/* One wrapped variant of a driver entry point. */
struct tp_drv_entry {
    const char *name;      /* its exported symbol: "cuMemcpyHtoD_v2_ptds" */
    const char *request;   /* the name lookups ask for: "cuMemcpyHtoD" */
    int version;           /* lowest ABI version of this signature */
    void (*bind)(int slot, void *real);   /* publish slot's real function */
    void *fns[TP_DRV_SLOTS];              /* the slot wrappers */
};

/* The variants of preload/driver.c: cuda.def and the name-capture calls. */
extern const struct tp_drv_entry tp_drv_entries[];
extern const unsigned tp_drv_n_entries;

/* The variants of preload/graphs.c: graph capture and instantiation. */
extern const struct tp_drv_entry tp_graph_entries[];
extern const unsigned tp_graph_n_entries;

/*
 * TP_DRV_HOOK - a driver entry point whose work is not a record (name
 * capture, graph bookkeeping): the exported wrapper and TP_DRV_SLOTS slot
 * wrappers, all calling tp_do_<name>(real, args...), which the file defines
 * first.  Expand where wrap.h and cuda.h are included, with cuda.h's macro
 * of the same name (cuStreamBeginCapture -> _v2) undefined.
 */
#define TP_UNPAREN(...) __VA_ARGS__
#define TP_DRV_HOOK_SLOT(name, params, args, k)                                       \
    static CUresult tp_slot_##name##_##k params                                       \
    {                                                                                 \
        return tp_do_##name(__atomic_load_n(&tp_sreal_##name[k], __ATOMIC_ACQUIRE),   \
                            TP_UNPAREN args);                                         \
    }
#define TP_DRV_HOOK(name, params, args)                                               \
    TP_EXPORT CUresult name params                                                    \
    {                                                                                 \
        TP_REAL(tp_fn_##name, name, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);       \
        return tp_do_##name(real, TP_UNPAREN args);                                   \
    }                                                                                 \
    static tp_fn_##name tp_sreal_##name[TP_DRV_SLOTS];                                \
    static void tp_bind_##name(int k, void *real)                                     \
    {                                                                                 \
        __atomic_store_n(&tp_sreal_##name[k], (tp_fn_##name)real, __ATOMIC_RELEASE);  \
    }                                                                                 \
    TP_DRV_HOOK_SLOT(name, params, args, 0)                                           \
    TP_DRV_HOOK_SLOT(name, params, args, 1)                                           \
    TP_DRV_HOOK_SLOT(name, params, args, 2)                                           \
    TP_DRV_HOOK_SLOT(name, params, args, 3)

/* TP_DRV_ENTRY - the table row of a variant defined by TP_DRV_FN or
 * TP_DRV_HOOK: exported name "str", lookup request and version strings as
 * cudaTypedefs.h spells them (cuda.h defines some as macros). */
#define TP_DRV_ENTRY(name, str, request, version)                                     \
    { str, request, version, tp_bind_##name,                                          \
      { (void *)tp_slot_##name##_0, (void *)tp_slot_##name##_1,                       \
        (void *)tp_slot_##name##_2, (void *)tp_slot_##name##_3 } },

/*
 * tp_procaddr_wrap - what to hand out instead of "real", which a lookup of
 * "sym" at ABI version "version" with flags "flags" returned successfully.
 * Returns "real" itself for anything not wrapped, when every slot of the
 * variant is bound to other functions, or when the profiler is disabled.
 * Takes a mutex; makes no CUDA call.
 */
void *tp_procaddr_wrap(const char *sym, int version, uint64_t flags, void *real);

/*
 * tp_procaddr_wrap_symbol - the same for "real" = dlsym(libcuda, "sym"):
 * the variant is the one exported under that exact name.
 */
void *tp_procaddr_wrap_symbol(const char *sym, void *real);

/* tp_dlsym_real: collector/common/loader.h */

/* tp_lookup_enabled - 1 if lookups may hand out our wrappers: an enabled,
 * selected process whose configuration parsed (otherwise the real pointers:
 * TRAINPROF_ENABLED=0 leaves every lookup as it was).  Parses the
 * configuration silently if not yet done. */
int tp_lookup_enabled(void);

/* tp_dlsym_init - from our constructor: take our own handle now, while a
 * dlopen of ourselves cannot run our initialisers again (preload/dlsym.c). */
void tp_dlsym_init(void);

#endif
