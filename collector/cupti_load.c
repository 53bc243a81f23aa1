/*
 * cupti_load.c - DESIGN: libcupti is never linked; it is found at run time.
 * A libcupti already in the process (dl_iterate_phdr) is reused with
 * RTLD_NOLOAD, never a second copy; else TRAINPROF_CUPTI_PATH, the folder
 * of the loaded libcudart/libcuda, $CUDA_HOME (whose CUPTI matches the
 * toolkit the program was built with), then the default search path.
 * Every entry point comes from dlsym into one table (tp_cupti_fn) whose
 * slots are typed from the real prototypes, so a signature cannot drift
 * from the headers.  A missing library, a missing required entry point or
 * a CUPTI older than 13 is one warning line and a reason for the status;
 * the caller makes that final (cupti.c: "unavailable", never retried).
 */
#include "cupti_impl.h"

#include "config.h"
#include "loader.h"
#include "log.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#define TP_CUPTI_MIN_VERSION 130000u

struct tp_cupti_fns tp_cupti_fn;

struct tp_find {
    const char *prefix;                 /* basename prefix */
    char path[1024];
};

static int tp_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct tp_find *f = data;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, f->prefix, strlen(f->prefix)) != 0)
        return 0;
    snprintf(f->path, sizeof f->path, "%s", name);
    return 1;
}

/* Path of a loaded object whose basename starts with "prefix", or NULL. */
static const char *tp_find_loaded(const char *prefix, struct tp_find *f)
{
    f->prefix = prefix;
    f->path[0] = 0;
    return dl_iterate_phdr(tp_find_cb, f) ? f->path : NULL;
}

static void *tp_open_in_dir_of(const char *prefix)
{
    struct tp_find f;
    const char *lib = tp_find_loaded(prefix, &f);
    if (!lib)
        return NULL;
    char *slash = strrchr(f.path, '/');
    if (!slash)
        return NULL;
    static const char *const names[] = { "libcupti.so.13", "libcupti.so" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - f.path), f.path, names[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

/* The libcupti to use: the loaded one, else the first found: the path
 * asked for, beside the loaded runtime or driver, under $CUDA_HOME (whose
 * CUPTI matches the toolkit the program was built with), the search path. */
static void *tp_open(void)
{
    struct tp_find f;
    if (tp_find_loaded("libcupti.so", &f))
        return dlopen(f.path, RTLD_NOLOAD | RTLD_NOW);
    void *h = NULL;
    if (tp_cfg.cupti_path[0]) {
        h = dlopen(tp_cfg.cupti_path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            TP_WARN("TRAINPROF_CUPTI_PATH: %s; trying the usual places", e ? e : "cannot load");
        }
    }
    if (!h)
        h = tp_open_in_dir_of("libcudart.so");
    if (!h)
        h = tp_open_in_dir_of("libcuda.so");
    static const char *const homes[] = { "lib64/libcupti.so.13", "extras/CUPTI/lib64/libcupti.so.13" };
    for (size_t i = 0; !h && tp_cfg.cuda_home[0] && i < sizeof homes / sizeof homes[0]; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%.1000s/%s", tp_cfg.cuda_home, homes[i]);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h)
        h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    return h;
}

int tp_cupti_load(uint32_t *version, char *why, size_t why_size)
{
    void *h = tp_open();
    if (!h) {
        snprintf(why, why_size, "libcupti not found");
        TP_WARN("CUPTI not found (set TRAINPROF_CUPTI_PATH); recording host-side only");
        return -1;
    }
#define X(name, req) \
    tp_cupti_fn.name = (__typeof__(tp_cupti_fn.name))tp_dlsym_real(h, #name); \
    if ((req) && !tp_cupti_fn.name) { \
        snprintf(why, why_size, "%s", #name " missing"); \
        TP_WARN("libcupti lacks " #name "; recording host-side only"); \
        memset(&tp_cupti_fn, 0, sizeof tp_cupti_fn); \
        return -1; \
    }
    TP_CUPTI_FNS(X)
#undef X
    *version = 0;
    if (tp_cupti_fn.cuptiGetVersion(version) != CUPTI_SUCCESS || *version < TP_CUPTI_MIN_VERSION) {
        snprintf(why, why_size, "CUPTI API version %u < %u", *version, TP_CUPTI_MIN_VERSION);
        TP_WARN("%s; recording host-side only", why);
        memset(&tp_cupti_fn, 0, sizeof tp_cupti_fn);
        return -1;
    }
    return 0;
}

const char *tp_cupti_result_str(CUptiResult r)
{
    __typeof__(tp_cupti_fn.cuptiGetResultString) fn = tp_cupti_fn.cuptiGetResultString;
    const char *s = NULL;
    if (fn && fn(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "CUPTI error";
}
