/*
 * procaddr.c - DESIGN: cuGetProcAddress{,_v2} interposition
 * (tests/programs/driver_calls.c replays what a cudart does here).
 *
 * Every cudart, static or shared, asks the driver for its entry points
 * through cuGetProcAddress_v2, and from the second lookup on through the
 * pointer the driver returned for ("cuGetProcAddress", 12000).  So the real
 * lookup runs first with the caller's exact arguments, its status and
 * symbolStatus are kept, and only a successful non-NULL answer is replaced:
 *  - the self-lookups get our 4-argument (11030) or 5-argument (12000)
 *    wrapper, bound to the real pointer returned, so we stay in the chain;
 *  - a wrapped driver function gets a slot wrapper of its variant
 *    (preload/driver.h) bound to the returned pointer.
 * The variant is chosen by the returned pointer: the exported variant of
 * the request's family at that address (dlsym on the driver's own handle),
 * else, for an internal pointer, by (request, version, flags) among our
 * variants, up to the version of the headers our table was checked
 * against (above it a newer ABI we cannot know may answer); a pointer that
 * is some other exported symbol (cuMemAlloc, the pre-3020 ABI) or one of
 * our own wrappers passes through untouched.  A slot stays bound to its real
 * pointer for the life of the process; the same pointer gets the same slot;
 * with every slot taken the real pointer is handed out.  The lookup path
 * takes a mutex, never calls CUDA (cudart makes its lookups before
 * cuInit) and never activates the profiler (a lookup is no CUDA work); with
 * TRAINPROF_ENABLED=0 or an excluded rank it substitutes nothing.
 * cuGetExportTable is not touched.  The runtime's own lookups of driver
 * functions (cudaGetDriverEntryPoint*) get the same substitution, at the end
 * of this file.
 */
#include "driver.h"
#include "resolve.h"
#include "collector/config/config.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#undef cuGetProcAddress   /* cuda.h: #define cuGetProcAddress cuGetProcAddress_v2 */

typedef CUresult (*tp_gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*tp_gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void tp_substitute(CUresult rc, const char *sym, void **pfn, int version, cuuint64_t flags)
{
    if (rc == CUDA_SUCCESS && sym && pfn && *pfn) {
        int saved = errno;
        *pfn = tp_procaddr_wrap(sym, version, (uint64_t)flags, *pfn);
        errno = saved;
    }
}

static CUresult tp_gpa1_serve(tp_gpa1_fn real, const char *sym, void **pfn, int version,
                              cuuint64_t flags)
{
    CUresult rc = real(sym, pfn, version, flags);
    tp_substitute(rc, sym, pfn, version, flags);
    return rc;
}

static CUresult tp_gpa2_serve(tp_gpa2_fn real, const char *sym, void **pfn, int version,
                              cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    CUresult rc = real(sym, pfn, version, flags, status);
    tp_substitute(rc, sym, pfn, version, flags);
    return rc;
}

TP_EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int version, cuuint64_t flags)
{
    static tp_gpa1_fn exported;
    tp_gpa1_fn real = __atomic_load_n(&exported, __ATOMIC_ACQUIRE);
    if (!real && !(real = (tp_gpa1_fn)tp_resolve("cuGetProcAddress")))
        return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
    __atomic_store_n(&exported, real, __ATOMIC_RELEASE);
    return tp_gpa1_serve(real, sym, pfn, version, flags);
}

TP_EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status)
{
    static tp_gpa2_fn exported;
    tp_gpa2_fn real = __atomic_load_n(&exported, __ATOMIC_ACQUIRE);
    if (!real && !(real = (tp_gpa2_fn)tp_resolve("cuGetProcAddress_v2")))
        return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
    __atomic_store_n(&exported, real, __ATOMIC_RELEASE);
    return tp_gpa2_serve(real, sym, pfn, version, flags, status);
}

/* ---- slots of the two lookup functions themselves ------------------------- */

static tp_gpa1_fn tp_gpa1_real[TP_DRV_SLOTS];
static tp_gpa2_fn tp_gpa2_real[TP_DRV_SLOTS];

static void tp_gpa1_bind(int k, void *real)
{
    __atomic_store_n(&tp_gpa1_real[k], (tp_gpa1_fn)real, __ATOMIC_RELEASE);
}

static void tp_gpa2_bind(int k, void *real)
{
    __atomic_store_n(&tp_gpa2_real[k], (tp_gpa2_fn)real, __ATOMIC_RELEASE);
}

#define TP_GPA_SLOTS(k)                                                                     \
    static CUresult tp_gpa1_slot_##k(const char *sym, void **pfn, int version, cuuint64_t flags) \
    {                                                                                       \
        return tp_gpa1_serve(__atomic_load_n(&tp_gpa1_real[k], __ATOMIC_ACQUIRE), sym, pfn, \
                             version, flags);                                               \
    }                                                                                       \
    static CUresult tp_gpa2_slot_##k(const char *sym, void **pfn, int version, cuuint64_t flags, \
                                     CUdriverProcAddressQueryResult *status)                \
    {                                                                                       \
        return tp_gpa2_serve(__atomic_load_n(&tp_gpa2_real[k], __ATOMIC_ACQUIRE), sym, pfn, \
                             version, flags, status);                                       \
    }
TP_GPA_SLOTS(0)
TP_GPA_SLOTS(1)
TP_GPA_SLOTS(2)
TP_GPA_SLOTS(3)

static const struct tp_drv_entry tp_gpa_entries[] = {
    { "cuGetProcAddress", "cuGetProcAddress", 11030, tp_gpa1_bind,
      { (void *)tp_gpa1_slot_0, (void *)tp_gpa1_slot_1, (void *)tp_gpa1_slot_2, (void *)tp_gpa1_slot_3 } },
    { "cuGetProcAddress_v2", "cuGetProcAddress", 12000, tp_gpa2_bind,
      { (void *)tp_gpa2_slot_0, (void *)tp_gpa2_slot_1, (void *)tp_gpa2_slot_2, (void *)tp_gpa2_slot_3 } },
};

/* ---- the slot table -------------------------------------------------------- */

#define TP_GPA_N (sizeof tp_gpa_entries / sizeof tp_gpa_entries[0])
#define TP_MAX_ENTRIES 256

static pthread_mutex_t tp_slot_lock = PTHREAD_MUTEX_INITIALIZER;
static void *tp_bound[TP_MAX_ENTRIES][TP_DRV_SLOTS];   /* under tp_slot_lock */

static unsigned tp_n_entries(void)
{
    unsigned n = (unsigned)TP_GPA_N + tp_drv_n_entries + tp_graph_n_entries;
    return n < TP_MAX_ENTRIES ? n : TP_MAX_ENTRIES;
}

/* Our variants: the lookups themselves, driver.c's, graphs.c's. */
static const struct tp_drv_entry *tp_entry(unsigned i)
{
    if (i < TP_GPA_N)
        return &tp_gpa_entries[i];
    i -= (unsigned)TP_GPA_N;
    return i < tp_drv_n_entries ? &tp_drv_entries[i] : &tp_graph_entries[i - tp_drv_n_entries];
}

static int tp_per_thread(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && (strcmp(name + n - 5, "_ptsz") == 0 || strcmp(name + n - 5, "_ptds") == 0);
}

/* The wrapper of entry "i" bound to "real": the slot already bound to it,
 * else the first free one; "real" itself when all are taken. */
static void *tp_bind(unsigned i, void *real)
{
    const struct tp_drv_entry *e = tp_entry(i);
    for (int k = 0; k < TP_DRV_SLOTS; k++) {
        if (tp_bound[i][k] == real)
            return e->fns[k];
        if (!tp_bound[i][k]) {
            e->bind(k, real);
            tp_bound[i][k] = real;
            return e->fns[k];
        }
    }
    return real;
}

/* Lookups substitute only in an enabled, selected process.  The
 * configuration is parsed silently (it may not be yet: a library's
 * constructor can look the driver up before ours runs). */
int tp_lookup_enabled(void)
{
    tp_config_init();
    return tp_cfg.enabled && tp_cfg.rank_selected && !tp_cfg.n_errors;
}

/* The entry of family "sym" whose exported variant lives at "real" in the
 * driver that handed it out; -1 if none.  *other: "real" is an exported
 * symbol that is none of our variants (an older or newer ABI). */
static int tp_by_address(const char *sym, void *real, int *other)
{
    *other = 0;
    Dl_info info;
    if (!dladdr(real, &info) || !info.dli_fname)
        return -1;
    void *h = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
    int found = -1;
    for (unsigned i = 0; h && i < tp_n_entries() && found < 0; i++)
        if (strcmp(tp_entry(i)->request, sym) == 0 && tp_dlsym_real(h, tp_entry(i)->name) == real)
            found = (int)i;
    if (h)
        dlclose(h);
    if (found < 0 && info.dli_sname && info.dli_saddr == real)
        *other = 1;
    return found;
}

/* For a pointer the driver exports under no name: our variant of "sym" with
 * the highest version <= "version", of the stream class "flags" asks for
 * when the family has one.  None for a version above the headers our table
 * was checked against (CUDA_VERSION; test_driver_audit.py: every variant of
 * a wrapped family up to it is in the table): a newer ABI may exist there
 * (cuLaunchHostFunc@13010 is cuLaunchHostFunc_v2, one argument more), and a
 * wrapper of an older one would drop or garble arguments. */
static int tp_by_request(const char *sym, int version, uint64_t flags)
{
    if (version > CUDA_VERSION)
        return -1;
    int want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int best = -1, best_score = -1;
    for (unsigned i = 0; i < tp_n_entries(); i++) {
        const struct tp_drv_entry *e = tp_entry(i);
        if (strcmp(e->request, sym) != 0 || e->version > version)
            continue;
        int score = (tp_per_thread(e->name) == want_pt) * 1000000 + e->version;
        if (score > best_score) {
            best = (int)i;
            best_score = score;
        }
    }
    return best;
}

/* 1 if "p" is in libtrainprof.so: a wrapper we handed out before, which a
 * runtime may hand on (cudaGetDriverEntryPoint through our lookup slot). */
static int tp_ours(void *p)
{
    Dl_info them, me;
    return dladdr(p, &them) && dladdr((void *)tp_ours, &me) && them.dli_fbase == me.dli_fbase;
}

void *tp_procaddr_wrap(const char *sym, int version, uint64_t flags, void *real)
{
    if (!real || !sym || !tp_lookup_enabled() || tp_ours(real))
        return real;
    pthread_mutex_lock(&tp_slot_lock);
    int other;
    int i = tp_by_address(sym, real, &other);
    if (i < 0 && !other)
        i = tp_by_request(sym, version, flags);
    void *out = i >= 0 ? tp_bind((unsigned)i, real) : real;
    pthread_mutex_unlock(&tp_slot_lock);
    return out;
}

void *tp_procaddr_wrap_symbol(const char *sym, void *real)
{
    if (!real || !sym || !tp_lookup_enabled())
        return real;
    void *out = real;
    pthread_mutex_lock(&tp_slot_lock);
    for (unsigned i = 0; i < tp_n_entries(); i++)
        if (strcmp(tp_entry(i)->name, sym) == 0) {
            out = tp_bind(i, real);
            break;
        }
    pthread_mutex_unlock(&tp_slot_lock);
    return out;
}

/* ---- the runtime's lookups of driver entry points ----------------------------
 * cudaGetDriverEntryPoint{,ByVersion}{,_ptsz} hand out driver functions
 * (PyTorch gets cuMemCreate, cuMemMap, ... this way, at version 12000).  A
 * runtime that answers through the cuGetProcAddress it was given returns
 * our slot wrapper already (tp_ours: handed on unchanged); one that answers
 * from elsewhere returns the driver's own pointer, which gets the wrapper a
 * cuGetProcAddress lookup would.  The runtime's status and driverStatus pass
 * through; its funcPtr is replaced only when it succeeded with a pointer. */

typedef cudaError_t (*tp_entry_fn)(const char *, void **, unsigned long long,
                                   enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*tp_entry_ver_fn)(const char *, void **, unsigned int, unsigned long long,
                                       enum cudaDriverEntryPointQueryResult *);

/* cudaEnable* as CU_GET_PROC_ADDRESS_* (the same values): cudaEnableDefault
 * is the per-thread search for a --default-stream per-thread caller (the
 * _ptsz entry points), the legacy one otherwise. */
static uint64_t tp_entry_flags(unsigned long long flags, int ptsz)
{
    return flags == cudaEnableDefault && ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : flags;
}

static cudaError_t tp_entry_serve(cudaError_t rc, const char *sym, void **fn, int version, uint64_t flags)
{
    if (rc == cudaSuccess && sym && fn && *fn) {
        int saved = errno;
        *fn = tp_procaddr_wrap(sym, version, flags, *fn);
        errno = saved;
    }
    return rc;
}

/* The runtime's own version picks the variant of cudaGetDriverEntryPoint:
 * unknown here, so the pointer is named by its address only (INT_MAX: no
 * guess by request, tp_by_request). */
#define TP_ENTRY_WRAPPER(name, ptsz)                                                        \
    TP_EXPORT cudaError_t name(const char *sym, void **fn, unsigned long long flags,        \
                               enum cudaDriverEntryPointQueryResult *st)                    \
    {                                                                                       \
        static tp_entry_fn exported;                                                        \
        tp_entry_fn real = __atomic_load_n(&exported, __ATOMIC_ACQUIRE);                    \
        if (!real && !(real = (tp_entry_fn)tp_resolve(#name)))                              \
            return cudaErrorSharedObjectSymbolNotFound;                                     \
        __atomic_store_n(&exported, real, __ATOMIC_RELEASE);                                \
        return tp_entry_serve(real(sym, fn, flags, st), sym, fn, INT_MAX,                   \
                              tp_entry_flags(flags, ptsz));                                 \
    }

#define TP_ENTRY_VER_WRAPPER(name, ptsz)                                                    \
    TP_EXPORT cudaError_t name(const char *sym, void **fn, unsigned int version,            \
                               unsigned long long flags, enum cudaDriverEntryPointQueryResult *st) \
    {                                                                                       \
        static tp_entry_ver_fn exported;                                                    \
        tp_entry_ver_fn real = __atomic_load_n(&exported, __ATOMIC_ACQUIRE);                \
        if (!real && !(real = (tp_entry_ver_fn)tp_resolve(#name)))                          \
            return cudaErrorSharedObjectSymbolNotFound;                                     \
        __atomic_store_n(&exported, real, __ATOMIC_RELEASE);                                \
        return tp_entry_serve(real(sym, fn, version, flags, st), sym, fn,                   \
                              version > INT_MAX ? INT_MAX : (int)version,                   \
                              tp_entry_flags(flags, ptsz));                                 \
    }

TP_ENTRY_WRAPPER(cudaGetDriverEntryPoint, 0)
TP_ENTRY_WRAPPER(cudaGetDriverEntryPoint_ptsz, 1)
TP_ENTRY_VER_WRAPPER(cudaGetDriverEntryPointByVersion, 0)
TP_ENTRY_VER_WRAPPER(cudaGetDriverEntryPointByVersion_ptsz, 1)
