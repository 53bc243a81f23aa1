/*
 * test_memowner.c - who owns a call site (collector/modules/memowner.c):
 * the rule by outer library call and by object, then real objects: this
 * program, a system library loaded with dlopen, and PyTorch's
 * libc10_cuda.so from the PyPI wheel.
 *
 * DESIGN
 * libc10_cuda.so is the real one: it imports cudaMalloc and cudaFree from
 * libcudart, so its calls reach the runtime's exported entry points (our
 * wrappers) with return addresses inside it.  TP_TEST_C10 names the file
 * and TP_TEST_C10_SITES the offsets of such return addresses (hex, comma
 * separated: the instruction after each "call cudaMalloc@plt", found with
 * objdump by tests/preload/test_memory_owners.py, which runs this binary);
 * without them the test looks for the file under build/venv and resolves
 * an address inside an exported allocator function, and without the file
 * that part is skipped (no venv yet: `make check-unit` runs before it).
 */
#include "collector/config/config.h"
#include "collector/modules/memowner.h"
#include "collector/modules/memtrack.h"

#include "tp_test.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <stdint.h>

static void setup(void)
{
    snprintf(tp_cfg.program, sizeof tp_cfg.program, "%s", "test_memowner");
    tp_memown_reset();
}

START_TEST(test_rule)
{
    char buf[256];
    ck_assert_str_eq(tp_memown_name(TP_API_ncclMemAlloc, "/x/libfoo.so", 0, "p", buf, sizeof buf), "NCCL");
    ck_assert_str_eq(tp_memown_name(TP_OUTER_ncclCommInitRank, NULL, 0, "p", buf, sizeof buf), "NCCL");
    ck_assert_str_eq(tp_memown_name(TP_API_cublasCreate_v2, NULL, 1, "p", buf, sizeof buf), "cuBLAS");
    ck_assert_str_eq(tp_memown_name(TP_API_cudnnCreate, NULL, 0, "p", buf, sizeof buf), "cuDNN");
    /* an outer call that names no library: the object decides */
    ck_assert_str_eq(tp_memown_name(TP_API_cudaMalloc, "/lib/libcudart.so.13", 0, "p", buf, sizeof buf),
                     "CUDA runtime");
    ck_assert_str_eq(tp_memown_name(0, "/t/lib/libc10_cuda.so", 0, "p", buf, sizeof buf),
                     "PyTorch caching allocator");
    ck_assert_str_eq(tp_memown_name(0, "/n/libnccl.so.2", 0, "p", buf, sizeof buf), "NCCL");
    ck_assert_str_eq(tp_memown_name(0, "/n/libcublasLt.so.13", 0, "p", buf, sizeof buf), "cuBLAS");
    ck_assert_str_eq(tp_memown_name(0, "/n/libcudnn_engines_precompiled.so.9", 0, "p", buf, sizeof buf), "cuDNN");
    ck_assert_str_eq(tp_memown_name(0, "/usr/lib/libcuda.so.1", 0, "p", buf, sizeof buf), "CUDA driver");
    ck_assert_str_eq(tp_memown_name(0, "/j/jaxlib/xla_extension.so", 0, "p", buf, sizeof buf),
                     "xla_extension.so");
    ck_assert_str_eq(tp_memown_name(0, "/anything", 1, "train", buf, sizeof buf), "train");
    ck_assert_str_eq(tp_memown_name(0, NULL, 0, "p", buf, sizeof buf), TP_MEMOWN_UNKNOWN);
    ck_assert_str_eq(tp_memown_name(0, "", 0, "p", buf, sizeof buf), TP_MEMOWN_UNKNOWN);
}
END_TEST

/* a function of this program, called so that the return address is ours */
static __attribute__((noinline)) uint64_t here(void)
{
    return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

START_TEST(test_program_and_library)
{
    struct tp_mem_origin_info o;
    memset(&o, 0, sizeof o);
    o.site = here();
    const struct tp_memown *m = tp_memown_of(&o, 0);
    ck_assert_str_eq(m->owner, "test_memowner");
    ck_assert_int_eq(m->named, 1);
    ck_assert_msg(strstr(m->site, "(test_memowner)") != NULL, "%s", m->site);
    ck_assert_msg(strncmp(m->site, "test_program_and_library", 24) == 0 || strstr(m->site, "test_memowner+0x"),
                  "%s", m->site);
    /* cached by origin number */
    ck_assert_ptr_eq(tp_memown_of(&o, 0), m);

    /* an outer library call comes first in the site */
    o.outer = TP_OUTER_ncclCommSplit;
    m = tp_memown_of(&o, 1);
    ck_assert_str_eq(m->owner, "NCCL");
    ck_assert_msg(strncmp(m->site, "ncclCommSplit > ", 16) == 0, "%s", m->site);

    /* a library loaded with dlopen: named by its file */
    void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    void *fn = dlsym(h, "deflate");
    ck_assert_ptr_nonnull(fn);
    memset(&o, 0, sizeof o);
    o.site = (uint64_t)(uintptr_t)fn + 16;
    m = tp_memown_of(&o, 2);
    ck_assert_str_eq(m->owner, "libz.so.1");
    ck_assert_str_eq(m->site, "deflate+0x10 (libz.so.1)");

    /* nothing known */
    memset(&o, 0, sizeof o);
    m = tp_memown_of(&o, 3);
    ck_assert_str_eq(m->owner, TP_MEMOWN_UNKNOWN);
    ck_assert_int_eq(m->named, 0);
    dlclose(h);
}
END_TEST

/* Whether the ELF object "path" is for the machine this test runs on. */
static int same_machine(const char *path)
{
    Elf64_Ehdr eh;
    FILE *f = fopen(path, "rb");
    int ok = f && fread(&eh, sizeof eh, 1, f) == 1;
    if (f)
        fclose(f);
#if defined(__aarch64__)
    return ok && eh.e_machine == EM_AARCH64;
#elif defined(__x86_64__)
    return ok && eh.e_machine == EM_X86_64;
#else
    return ok;
#endif
}

static const char *find_c10(char *buf, size_t n)
{
    const char *p = getenv("TP_TEST_C10");
    if (p && *p)
        return p;
    glob_t g;
    const char *found = NULL;
    if (glob("build/venv/lib/python3*/site-packages/torch/lib/libc10_cuda.so", 0, NULL, &g) == 0 &&
        g.gl_pathc > 0) {
        snprintf(buf, n, "%s", g.gl_pathv[0]);
        found = buf;
    }
    globfree(&g);
    return found;
}

/* PyTorch's caching allocator, from the real library: every call site
 * of cudaMalloc in it is "PyTorch caching allocator", inside a c10 function. */
START_TEST(test_real_libc10_cuda)
{
    char path[4096];
    const char *c10 = find_c10(path, sizeof path);
    if (!c10) {
        fprintf(stderr, "test_real_libc10_cuda: no libc10_cuda.so (no venv yet): skipped\n");
        return;
    }
    if (!same_machine(c10)) {
        /* make check-arm64: the venv's torch wheel is the x86-64 host's */
        fprintf(stderr, "test_real_libc10_cuda: %s is built for another architecture: skipped\n", c10);
        return;
    }
    void *h = dlopen(c10, RTLD_LAZY | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s", dlerror());
    struct link_map *lm = NULL;
    ck_assert_int_eq(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
    const char *sites = getenv("TP_TEST_C10_SITES");
    uint64_t at[16];
    int n = 0;
    if (sites && *sites) {
        for (const char *s = sites; *s && n < 16;) {
            char *end;
            at[n++] = (uint64_t)lm->l_addr + strtoull(s, &end, 16);
            s = *end == ',' ? end + 1 : end;
        }
    } else {
        /* an exported function of the allocator (the call sites come from objdump) */
        void *fn = dlsym(h, "_ZN3c104cuda20CUDACachingAllocator19CUDAAllocatorConfig19expandable_segmentsEv");
        ck_assert_ptr_nonnull(fn);
        at[n++] = (uint64_t)(uintptr_t)fn + 8;
    }
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++) {
        struct tp_mem_origin_info o;
        memset(&o, 0, sizeof o);
        o.site = at[i];
        const struct tp_memown *m = tp_memown_of(&o, (uint32_t)(10 + i));
        ck_assert_str_eq(m->owner, "PyTorch caching allocator");
        ck_assert_str_eq(m->object, "libc10_cuda.so");
        ck_assert_msg(strncmp(m->site, "c10::", 5) == 0 && strstr(m->site, "+0x") &&
                      strstr(m->site, " (libc10_cuda.so)"), "%s", m->site);
        fprintf(stderr, "libc10_cuda.so call site %d: %s\n", i, m->site);
    }
    tp_memown_reset();
    dlclose(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memowner");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_rule);
    tcase_add_test(tc, test_program_and_library);
    tcase_add_test(tc, test_real_libc10_cuda);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
