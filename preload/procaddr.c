/*
 * procaddr.c - DESIGN: cuGetProcAddress{,_v2} interposition
 * (notes/injection.md 1.5, notes/static-cudart.md).
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
 * variants; a pointer that is some other exported symbol (cuMemAlloc, the
 * pre-3020 ABI) passes through untouched.  A slot stays bound to its real
 * pointer for the life of the process; the same pointer gets the same slot;
 * with every slot taken the real pointer is handed out.  The lookup path
 * takes a mutex, never calls CUDA and never activates the profiler
 * (decision 3); with TRAINPROF_ENABLED=0 or an excluded rank it substitutes
 * nothing.  cuGetExportTable is not touched.
 */
#include "driver.h"
#include "resolve.h"
#include "../collector/config.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#undef cuGetProcAddress   /* cuda.h: #define cuGetProcAddress cuGetProcAddress_v2 */

typedef CUresult (*tp_gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*tp_gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void tp_substitute(CUresult rc, const char *sym, void **pfn, int version, cuuint64_t flags)
{
    if (rc == CUDA_SUCCESS && sym && pfn && *pfn)
        *pfn = tp_procaddr_wrap(sym, version, (uint64_t)flags, *pfn);
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
#define TP_MAX_ENTRIES 128

static pthread_mutex_t tp_slot_lock = PTHREAD_MUTEX_INITIALIZER;
static void *tp_bound[TP_MAX_ENTRIES][TP_DRV_SLOTS];   /* under tp_slot_lock */

static unsigned tp_n_entries(void)
{
    unsigned n = tp_drv_n_entries + (unsigned)TP_GPA_N;
    return n < TP_MAX_ENTRIES ? n : TP_MAX_ENTRIES;
}

static const struct tp_drv_entry *tp_entry(unsigned i)
{
    return i < TP_GPA_N ? &tp_gpa_entries[i] : &tp_drv_entries[i - TP_GPA_N];
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
 * when the family has one. */
static int tp_by_request(const char *sym, int version, uint64_t flags)
{
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

void *tp_procaddr_wrap(const char *sym, int version, uint64_t flags, void *real)
{
    if (!real || !sym || !tp_lookup_enabled())
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
