/*
 * memowner.c - DESIGN: names the owner of each call site of the memory
 * ledger (memtrack.c), on the flush thread, once per site.
 *
 * The rule, first match wins:
 *  1. the outermost intercepted library call around the allocation (an
 *     allocation during ncclCommInitRank or a collective is NCCL's, during
 *     cublasCreate cuBLAS's, during a cuDNN call cuDNN's): the wrappers mark
 *     their thread (collector/wrap/memtrack_api.h), and ncclMemAlloc is
 *     NCCL's own entry point;
 *  2. the shared object whose code called the allocation function (the
 *     wrapper's return address, looked up with dladdr): libc10_cuda.so is
 *     PyTorch's caching allocator, libnccl/libcublas(Lt)/libcudnn* their
 *     libraries (NCCL, cuBLAS and cuDNN link the CUDA runtime statically, so
 *     their allocations reach the driver from their own code: the driver's
 *     wrappers see them there), libcudart the CUDA runtime's own (its
 *     memory pools, its context), libcuda the driver's, the program by its
 *     name, any other object (Triton's or XLA's modules, a user's library)
 *     by its file name without its directory;
 *  3. else "unknown": no return address (a call the wrapper could not see
 *     the caller of) or an address in no loaded object (freed JIT code).
 * An object unloaded since the allocation may no longer be found (dladdr
 * answers for what is mapped now): the first lookup is cached, so a site
 * named while its object was loaded keeps its name.
 *
 * The site is the caller's function and offset: dladdr's dynamic symbol,
 * else the full symbol table (elfsym.c), else the object and offset; C++
 * names demangled.  With an outer library call, that call's name first.
 */
#include "memowner.h"

#include "collector/common/elfsym.h"
#include "collector/config/config.h"
#include "collector/record/kernels.h"
#include "collector/modules/stack.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

struct tp_memown_slot {
    struct tp_memown v;
    int filled;
    int owned;              /* v's strings are ours to free */
};

static struct tp_memown_slot *tp_own;
static size_t tp_own_cap;

static const char *tp_basename(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static int tp_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

const char *tp_memown_name(unsigned outer, const char *object, int is_program, const char *program,
                           char *buf, size_t bufsz)
{
    if (outer) {
        const char *call = tp_outer_name(outer);
        if (tp_prefix(call, "nccl"))
            return "NCCL";
        if (tp_prefix(call, "cublas"))
            return "cuBLAS";
        if (tp_prefix(call, "cudnn"))
            return "cuDNN";
    }
    if (is_program)
        return program && program[0] ? program : "program";
    if (!object || !object[0])
        return TP_MEMOWN_UNKNOWN;
    const char *b = tp_basename(object);
    if (tp_prefix(b, "libc10_cuda.so"))
        return "PyTorch caching allocator";
    if (tp_prefix(b, "libnccl"))
        return "NCCL";
    if (tp_prefix(b, "libcublas"))
        return "cuBLAS";
    if (tp_prefix(b, "libcudnn"))
        return "cuDNN";
    if (tp_prefix(b, "libcudart"))
        return "CUDA runtime";
    if (tp_prefix(b, "libcuda.so"))
        return "CUDA driver";
    snprintf(buf, bufsz, "%s", b);
    return buf;
}

/* The base address of the program's own object (the one that holds its
 * program headers), or NULL. */
static const void *tp_program_base(void)
{
    static int done;
    static const void *base;
    if (!done) {
        Dl_info info;
        unsigned long phdr = getauxval(AT_PHDR);
        if (phdr && dladdr((const void *)(uintptr_t)phdr, &info))
            base = info.dli_fbase;
        done = 1;
    }
    return base;
}

/* "name+0xoff (object)" of return address "site" into "buf"; the object's
 * path in *object (dladdr's, valid while it stays loaded: copied by the
 * caller), *is_program when it is the program. */
static void tp_site_text(uint64_t site, char *buf, size_t bufsz, const char **object, int *is_program)
{
    *object = NULL;
    *is_program = 0;
    buf[0] = 0;
    if (!site)
        return;
    const void *at = (const void *)(uintptr_t)(site - 1);
    Dl_info info;
    if (!dladdr(at, &info)) {
        snprintf(buf, bufsz, "0x%llx", (unsigned long long)site);
        return;
    }
    *is_program = info.dli_fbase && info.dli_fbase == tp_program_base();
    *object = info.dli_fname;
    const char *obj = *is_program ? tp_cfg.program : info.dli_fname ? tp_basename(info.dli_fname) : "";
    const char *name = NULL;
    uintptr_t start = 0;
    if (info.dli_sname && info.dli_sname[0] && info.dli_saddr) {
        name = info.dli_sname;
        start = (uintptr_t)info.dli_saddr;
    } else if (info.dli_fname && info.dli_fname[0]) {
        name = tp_elfsym_lookup(info.dli_fname, (uintptr_t)info.dli_fbase, (uintptr_t)at, &start);
    }
    if (name && start && start <= site) {
        char sym[1024];
        tp_demangle(name, sym, sizeof sym);
        int n = snprintf(buf, bufsz, "%s+0x%llx (", sym, (unsigned long long)(site - start));
        if (n > 0 && (size_t)n < bufsz)
            snprintf(buf + n, bufsz - (size_t)n, "%s)", obj);   /* a name too long is cut */
    } else {
        snprintf(buf, bufsz, "%s+0x%llx", obj,
                 (unsigned long long)(site - (uintptr_t)info.dli_fbase));
    }
    tp_stack_sanitize(buf);
}

/* Fill "m"; 1 if its strings were allocated. */
static int tp_memown_fill(struct tp_memown *m, const struct tp_mem_origin_info *o)
{
    char text[1400], site[1200], nbuf[256];
    const char *object;
    int is_program;
    tp_site_text(o->site, site, sizeof site, &object, &is_program);
    const char *owner = tp_memown_name(o->outer, object, is_program, tp_cfg.program, nbuf, sizeof nbuf);
    const char *call = o->outer ? tp_outer_name(o->outer) : "";
    if (call[0] && site[0])
        snprintf(text, sizeof text, "%s > %s", call, site);
    else
        snprintf(text, sizeof text, "%s", call[0] ? call : site);
    m->owner = strdup(owner);
    m->site = strdup(text);
    m->object = strdup(object && !is_program ? tp_basename(object) : is_program ? tp_cfg.program : "");
    if (!m->owner || !m->site || !m->object) {
        free((void *)m->owner);
        free((void *)m->site);
        free((void *)m->object);
        m->owner = TP_MEMOWN_UNKNOWN;
        m->site = "";
        m->object = "";
        m->named = 0;
        return 0;
    }
    m->named = strcmp(m->owner, TP_MEMOWN_UNKNOWN) != 0;
    return 1;
}

const struct tp_memown *tp_memown_of(const struct tp_mem_origin_info *o, uint32_t index)
{
    static const struct tp_memown unknown = { TP_MEMOWN_UNKNOWN, "", "", 0 };
    if (index >= tp_own_cap) {
        size_t cap = tp_own_cap ? tp_own_cap : 64;
        while (cap <= index)
            cap *= 2;
        struct tp_memown_slot *v = realloc(tp_own, cap * sizeof *v);
        if (!v)
            return &unknown;
        memset(v + tp_own_cap, 0, (cap - tp_own_cap) * sizeof *v);
        tp_own = v;
        tp_own_cap = cap;
    }
    struct tp_memown_slot *s = &tp_own[index];
    if (!s->filled) {
        s->owned = tp_memown_fill(&s->v, o);
        s->filled = 1;
    }
    return &s->v;
}

void tp_memown_reset(void)
{
    for (size_t i = 0; i < tp_own_cap; i++)
        if (tp_own[i].owned) {
            free((void *)tp_own[i].v.owner);
            free((void *)tp_own[i].v.site);
            free((void *)tp_own[i].v.object);
        }
    free(tp_own);
    tp_own = NULL;
    tp_own_cap = 0;
}
