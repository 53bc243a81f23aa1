/*
 * itt_domains.c - DESIGN: a program whose ITT tasks come from two kinds of
 * domain, as a PyTorch process's do: torch's ("PyTorch", its operators) and
 * others' (oneDNN's "dnnl::primitive::execute", a user's "my_app").  It
 * plays the part of ittnotify's static part the way libtorch_cpu links it:
 * domains made before the collector is loaded (ittnotify's own, flags 1),
 * then the collector's __itt_api_init handed the global with its API table
 * and its domain list, then domains made through the collector; its calls
 * go through the table's pointers, skipped on a domain whose flags are 0
 * as ittnotify's macros skip them, and some made directly regardless of
 * the flags (a caller that does not use the macros).  Without the library
 * no collector is found and every ITT call is skipped, as ittnotify does.
 * Steps and activation: trainprof_step() found with dlsym.
 *
 * Each step: aten::conv2d (torch) holding oneDNN's "convolution" (through
 * the macro) and "reorder" (direct) tasks, and the user's "user_task"
 * (direct) holding aten::mm (torch); then torch's own ProfilerStep#7 range
 * (a program's own torch.profiler's step(), direct).
 *
 * Usage: itt_domains STEPS.  stdout: one line, the same with or without
 * the library; stderr: "itt_flags torch=F dnnl=F my_app=F torch_after=F
 * table=N" (the domains' flags after init, and how many API pointers the
 * collector filled).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ittnotify.h's (ITT API 3) layouts: domain, string handle, id; and
 * ittnotify_config.h's __itt_global up to its domain list, __itt_api_info */
typedef struct itt_domain {
    volatile int flags;
    const char *nameA;
    void *nameW;
    int extra1;
    void *extra2;
    struct itt_domain *next;
} itt_domain;

typedef struct itt_string {
    const char *strA;
    void *strW;
    int extra1;
    void *extra2;
    struct itt_string *next;
} itt_string;

typedef struct {
    unsigned long long d1, d2, d3;
} itt_id;

typedef itt_domain *(*domain_create_fn)(const char *);
typedef itt_string *(*string_create_fn)(const char *);
typedef void (*task_begin_fn)(const itt_domain *, itt_id, itt_id, itt_string *);
typedef void (*task_end_fn)(const itt_domain *);

static domain_create_fn p_domain_create;
static string_create_fn p_string_create;
static task_begin_fn p_task_begin;
static task_end_fn p_task_end;
static void *p_frame_begin = (void *)1;  /* an entry we do not implement: set to its no-op */

static void null_fn(void) {}

typedef struct {
    const char *name;
    void **func_ptr;
    void *init_func;
    void *null_func;
    int group;
} itt_api_info;

static itt_api_info api_list[] = {
    { "__itt_domain_create", (void **)&p_domain_create, NULL, NULL, 0 },
    { "__itt_string_handle_create", (void **)&p_string_create, NULL, NULL, 0 },
    { "__itt_task_begin", (void **)&p_task_begin, NULL, NULL, 0 },
    { "__itt_task_end", (void **)&p_task_end, NULL, NULL, 0 },
    { "__itt_frame_begin_v3", &p_frame_begin, NULL, (void *)null_fn, 0 },
    { NULL, NULL, NULL, NULL, 0 },
};

static struct {
    unsigned char magic[8];
    unsigned long version_major, version_minor, version_build;
    volatile long api_initialized, mutex_initialized, atomic_counter;
    pthread_mutex_t mutex;
    void *lib;
    void *error_handler;
    const char **dll_path_ptr;
    itt_api_info *api_list_ptr;
    void *next;
    void *thread_list;
    itt_domain *domain_list;
    itt_string *string_list;
} global = {
    { 0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30 }, 3, 0, 0, 0, 0, 0,
    PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL, api_list, NULL, NULL, NULL, NULL,
};

/* ittnotify's own domains, made before the collector is loaded */
static itt_domain own_torch = { 1, "PyTorch", NULL, 0, NULL, NULL };
static itt_domain own_dnnl = { 1, "dnnl::primitive::execute", NULL, 0, NULL, NULL };

static const itt_id null_id = { 0, 0, 0 };

/* ittnotify's macros: nothing on a NULL or disabled domain, or with no
 * collector */
static void begin(const itt_domain *d, itt_string *name)
{
    if (d && d->flags && p_task_begin)
        p_task_begin(d, null_id, null_id, name);
}

static void end(const itt_domain *d)
{
    if (d && d->flags && p_task_end)
        p_task_end(d);
}

/* a caller that does not look at the flags */
static void begin_direct(const itt_domain *d, itt_string *name)
{
    if (p_task_begin)
        p_task_begin(d, null_id, null_id, name);
}

static void end_direct(const itt_domain *d)
{
    if (p_task_end)
        p_task_end(d);
}

static itt_string *handle(const char *name)
{
    return p_string_create ? p_string_create(name) : NULL;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 6;
    void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");
    void (*api_init)(void *, int) = (void (*)(void *, int))dlsym(RTLD_DEFAULT, "__itt_api_init");

    own_torch.next = &own_dnnl;
    global.domain_list = &own_torch;
    int filled = 0;
    if (api_init) {
        pthread_mutex_lock(&global.mutex);
        api_init(&global, 0);
        pthread_mutex_unlock(&global.mutex);
        for (itt_api_info *e = api_list; e->name; e++)
            filled += *e->func_ptr != NULL && *e->func_ptr != e->null_func;
    }
    itt_domain *my_app = p_domain_create ? p_domain_create("my_app") : NULL;
    itt_domain *torch_after = p_domain_create ? p_domain_create("PyTorch") : NULL;
    fprintf(stderr, "itt_flags torch=%d dnnl=%d my_app=%d torch_after=%d table=%d frame_null=%d\n",
            own_torch.flags, own_dnnl.flags, my_app ? my_app->flags : -1,
            torch_after ? torch_after->flags : -1, filled, p_frame_begin == (void *)null_fn);

    itt_string *conv2d = handle("aten::conv2d"), *mm = handle("aten::mm");
    itt_string *convolution = handle("convolution"), *reorder = handle("reorder");
    itt_string *user = handle("user_task"), *prof_step = handle("ProfilerStep#7");
    long work = 0;
    if (step)
        step();             /* activates; step 0 begins */
    for (int s = 0; s < steps; s++) {
        begin(&own_torch, conv2d);
        begin(&own_dnnl, convolution);
        begin_direct(&own_dnnl, reorder);
        work += s;
        end_direct(&own_dnnl);
        end(&own_dnnl);
        begin_direct(my_app, user);
        begin(torch_after, mm);
        work += 2 * s;
        end(torch_after);
        end_direct(my_app);
        end(&own_torch);
        begin_direct(&own_torch, prof_step);
        end_direct(&own_torch);
        if (step)
            step();
    }
    printf("itt_domains: %d steps, work %ld\n", steps, work);
    return 0;
}
