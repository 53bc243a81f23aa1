/*
 * cupti_load.c - DESIGN: libcupti is never linked; it is found at run time.
 * A libcupti already in the process (dl_iterate_phdr) is reused with
 * RTLD_NOLOAD, never a second copy; else TRAINPROF_CUPTI_PATH, the folder
 * of the loaded libcudart/libcuda, $CUDA_HOME (whose CUPTI matches the
 * toolkit the program was built with), then the default search path.
 * Which major: the one of the libcudart.so.N in the process (a CUDA 12
 * runtime gets libcupti.so.12), else 13 then 12 (static cudart: nothing
 * says which).  Every entry point comes from dlsym into one table
 * (tp_cupti_fn) whose slots are typed from the real prototypes, so a
 * signature cannot drift from the headers.  The version picks the record
 * layouts (cupti_decode.c's table): 12.4 (API version 22) to 13.x; a later
 * 13.x is read with the newest 13 layouts (CUPTI appends fields within a
 * major), a 14 or an older one is refused.  A missing library, a missing
 * required entry point or a version we cannot read is one warning line and
 * a reason for the status; the caller makes that final (cupti.c:
 * "unavailable", never retried).
 */
#include "cupti_impl.h"

#include "collector/config/config.h"
#include "collector/common/loader.h"
#include "collector/common/log.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP_CUPTI_MIN_VERSION 22u       /* CUDA 12.4 (cupti_version.h) */
#define TP_CUPTI_NEXT_MAJOR 140000u    /* 14.0 in the 13.x numbering: unknown layouts */

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

int tp_cupti_cudart_major(void)
{
    struct tp_find f;
    const char *lib = tp_find_loaded("libcudart.so.", &f);
    if (!lib)
        return 0;
    const char *base = strrchr(lib, '/');
    base = base ? base + 1 : lib;
    return atoi(base + strlen("libcudart.so."));
}

size_t tp_cupti_sonames(int cudart_major, const char **names, size_t max)
{
    size_t n = 0;
    if (max < 3)
        return 0;
    if (cudart_major == 12) {
        names[n++] = "libcupti.so.12";
        names[n++] = "libcupti.so.13";
    } else {
        names[n++] = "libcupti.so.13";
        names[n++] = "libcupti.so.12";
    }
    names[n++] = "libcupti.so";
    return n;
}

static void *tp_open_in_dir_of(const char *prefix, const char *const *names, size_t n)
{
    struct tp_find f;
    const char *lib = tp_find_loaded(prefix, &f);
    if (!lib)
        return NULL;
    char *slash = strrchr(f.path, '/');
    if (!slash)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - f.path), f.path, names[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

/* TRAINPROF_CUPTI_PATH is not used when "loaded" is already in the process
 * (two CUPTIs in one process are unsafe: one activity API per process):
 * one line says so when it names another file. */
static void tp_cupti_path_yields(const char *loaded)
{
    char want[PATH_MAX], have[PATH_MAX];
    if (!tp_cfg.cupti_path[0])
        return;
    if (realpath(tp_cfg.cupti_path, want) && realpath(loaded, have) && strcmp(want, have) == 0)
        return;
    TP_WARN("TRAINPROF_CUPTI_PATH=\"%s\" not used: %s is already loaded in the process, "
            "and two CUPTIs in one process are unsafe", tp_cfg.cupti_path, loaded);
}

/* The libcupti to use: the loaded one, else the first found: the path
 * asked for, beside the loaded runtime or driver, under $CUDA_HOME (whose
 * CUPTI matches the toolkit the program was built with), the search path. */
static void *tp_open(void)
{
    struct tp_find f;
    if (tp_find_loaded("libcupti.so", &f)) {
        tp_cupti_path_yields(f.path);
        return dlopen(f.path, RTLD_NOLOAD | RTLD_NOW);
    }
    void *h = NULL;
    if (tp_cfg.cupti_path[0]) {
        h = dlopen(tp_cfg.cupti_path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            TP_WARN("TRAINPROF_CUPTI_PATH: %s; trying the usual places", e ? e : "cannot load");
        }
    }
    const char *names[3];
    size_t n = tp_cupti_sonames(tp_cupti_cudart_major(), names, 3);
    if (!h)
        h = tp_open_in_dir_of("libcudart.so", names, n);
    if (!h)
        h = tp_open_in_dir_of("libcuda.so", names, n);
    static const char *const homes[] = { "lib64", "extras/CUPTI/lib64" };
    for (size_t i = 0; !h && tp_cfg.cuda_home[0] && i < sizeof homes / sizeof homes[0]; i++) {
        for (size_t j = 0; !h && j + 1 < n; j++) {
            char path[1100];
            snprintf(path, sizeof path, "%.1000s/%s/%s", tp_cfg.cuda_home, homes[i], names[j]);
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    for (size_t j = 0; !h && j + 1 < n; j++)
        h = dlopen(names[j], RTLD_NOW | RTLD_LOCAL);
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
    /* cuptiSubscribe_v2 is new in 13.0; 12.x has only cuptiSubscribe. */
    if (!tp_cupti_fn.cuptiSubscribe_v2 && !tp_cupti_fn.cuptiSubscribe) {
        snprintf(why, why_size, "cuptiSubscribe missing");
        TP_WARN("libcupti lacks cuptiSubscribe; recording host-side only");
        memset(&tp_cupti_fn, 0, sizeof tp_cupti_fn);
        return -1;
    }
    *version = 0;
    CUptiResult rc = tp_cupti_fn.cuptiGetVersion(version);
    const struct tp_cupti_layout *l = rc == CUPTI_SUCCESS ? tp_cupti_layout_for(*version) : NULL;
    if (!l) {
        if (rc != CUPTI_SUCCESS)
            snprintf(why, why_size, "cuptiGetVersion failed: %s", tp_cupti_result_str(rc));
        else if (*version < TP_CUPTI_MIN_VERSION)
            snprintf(why, why_size, "CUPTI API version %u < %u (CUDA 12.4)", *version,
                     TP_CUPTI_MIN_VERSION);
        else
            snprintf(why, why_size,
                     "CUPTI API version %u is newer than the 13.x record layouts known", *version);
        TP_WARN("%s; recording host-side only", why);
        memset(&tp_cupti_fn, 0, sizeof tp_cupti_fn);
        return -1;
    }
    tp_cupti_layout_use(l);
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
