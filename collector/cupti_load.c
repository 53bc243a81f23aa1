/*
 * cupti_load.c - DESIGN: finding and loading libcupti.
 *
 * Loading: a libcupti already in the process (dl_iterate_phdr) is reused with
 * RTLD_NOLOAD, never a second copy; else TRAINPROF_CUPTI_PATH, the folder of
 * the loaded libcudart/libcuda, then the default search path.  Every entry
 * point comes from dlsym into one table whose slots are typed from the real
 * prototypes (__typeof__), so a signature cannot drift from the headers.
 * Subscription (cuptiSubscribe_v2) failing, a CUPTI older than 13 or a
 * missing entry point make CUPTI "unavailable": one line, never retried.
 */
#include "cupti_impl.h"
#include "config.h"
#include "loader.h"
#include "log.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

struct tp_cupti_fns tp_cupti_fn;
int tp_cupti_state;                   /* flush thread */
uint32_t tp_cupti_version;
char tp_cupti_status_buf[160] = "not started";
CUpti_SubscriberHandle tp_cupti_subscriber;

const char *tp_cupti_result_str(CUptiResult r)
{
    const char *s = NULL;
    if (tp_cupti_fn.cuptiGetResultString &&
        tp_cupti_fn.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "CUPTI error";
}


/* CUPTI calls back on subscription events we do not ask for. */
static void CUPTIAPI tp_subscriber_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                      const void *data)
{
    (void)ud;
    (void)d;
    (void)id;
    (void)data;
}

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

void tp_cupti_unavailable(const char *why)
{
    __atomic_store_n(&tp_cupti_state, ST_UNAVAILABLE, __ATOMIC_RELAXED);
    snprintf(tp_cupti_status_buf, sizeof tp_cupti_status_buf, "unavailable: %s", why);
}

/* Load, check and subscribe; 0 or -1 (state set, line printed). */
int tp_cupti_load(void)
{
    void *h = tp_open();
    if (!h) {
        tp_cupti_unavailable("libcupti not found");
        TP_WARN("CUPTI not found (set TRAINPROF_CUPTI_PATH); recording host-side only");
        return -1;
    }
#define X(name, req) \
    tp_cupti_fn.name = (__typeof__(tp_cupti_fn.name))tp_dlsym_real(h, #name); \
    if ((req) && !tp_cupti_fn.name) { \
        tp_cupti_unavailable(#name " missing"); \
        TP_WARN("libcupti lacks " #name "; recording host-side only"); \
        memset(&tp_cupti_fn, 0, sizeof tp_cupti_fn); \
        return -1; \
    }
    TP_CUPTI_FNS(X)
#undef X
    if (tp_cupti_fn.cuptiGetVersion(&tp_cupti_version) != CUPTI_SUCCESS ||
        tp_cupti_version < TP_CUPTI_MIN_VERSION) {
        char why[96];
        snprintf(why, sizeof why, "CUPTI API version %u < %u", tp_cupti_version, TP_CUPTI_MIN_VERSION);
        tp_cupti_unavailable(why);
        TP_WARN("%s; recording host-side only", why);
        memset(&tp_cupti_fn, 0, sizeof tp_cupti_fn);
        return -1;
    }
    char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
    CUpti_SubscriberParams sp = {
        .structSize = CUpti_SubscriberParams_STRUCT_SIZE,
        .subscriberName = "trainprof",
        .oldSubscriberName = other,
        .oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN,
    };
    CUptiResult rc =
        tp_cupti_fn.cuptiSubscribe_v2(&tp_cupti_subscriber, tp_subscriber_cb, NULL, &sp);
    if (rc != CUPTI_SUCCESS) {
        other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = 0;
        const char *who = other[0] ? other
                          : rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "unknown"
                                                                                 : tp_cupti_result_str(rc);
        char why[128];
        snprintf(why, sizeof why, "in use by another tool (%s)", who);
        tp_cupti_unavailable(why);
        TP_WARN("CUPTI is in use by another tool (%s); recording host-side only", who);
        return -1;
    }
    return 0;
}
