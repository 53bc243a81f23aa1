/*
 * dlsym.c - DESIGN: the dlsym interposer.
 *
 * glibc resolves RTLD_NEXT (and RTLD_DEFAULT's namespace) from dlsym's
 * return address, so those two handles must reach the real dlsym by a jump
 * that leaves the caller's return address on the stack: a wrapper that
 * calls it makes every RTLD_NEXT relative to this library, and a second
 * preloaded tool that wraps a function through RTLD_NEXT then finds itself
 * and recurses.  GCC 12 has no musttail, so on x86-64 and aarch64 dlsym
 * is a small assembly stub (one per architecture, the same logic): for
 * RTLD_NEXT/RTLD_DEFAULT it jumps to the real dlsym (resolving it first
 * with dlvsym, argument registers saved, when it is not yet known: our own
 * resolver and the sanitizer runtimes use dlsym before anything else ran);
 * for any other handle it jumps to tp_dlsym_handle, plain C.  That
 * function asks the real
 * dlsym, and for a handle of libcuda, cuBLAS(Lt), cuDNN, NCCL or cudart
 * (identified once per handle from its link map) replaces a found symbol
 * that we wrap with our wrapper - for libcuda a slot wrapper bound to the
 * very pointer found (procaddr.c), for the others our exported wrapper
 * when the function it forwards to is that pointer (libcudnn.so.9 looks up
 * libcudnn_graph's functions of the same names: handing it our wrapper
 * would loop).  Everything else, NULL and dlerror state included, passes
 * through.  Never activates the profiler (a lookup is no CUDA work).
 */
#include "driver.h"
#include "resolve.h"
#include "collector/common/loader.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

/* ---- which library a handle belongs to ------------------------------------ */

enum tp_lib { TP_LIB_UNKNOWN = 0, TP_LIB_OTHER, TP_LIB_CUDA, TP_LIB_WRAPPED };

static int tp_has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static enum tp_lib tp_classify(void *handle)
{
    struct link_map *lm = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name)
        return TP_LIB_OTHER;
    const char *base = strrchr(lm->l_name, '/');
    base = base ? base + 1 : lm->l_name;
    if (tp_has_prefix(base, "libcuda.so"))
        return TP_LIB_CUDA;
    static const char *const wrapped[] = {
        "libcublas.so", "libcublasLt.so", "libcudnn", "libnccl.so", "libcudart.so",
    };
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++)
        if (tp_has_prefix(base, wrapped[i]))
            return TP_LIB_WRAPPED;
    return TP_LIB_OTHER;
}

#define TP_HANDLES 32

static pthread_mutex_t tp_handle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { void *handle; enum tp_lib lib; } tp_handles[TP_HANDLES];
static unsigned tp_n_handles;

/* Cached per handle (a fixed array; beyond it, classified every time).  A
 * handle closed and reused for another library keeps its old class: the
 * libraries we look for are not unloaded in practice. */
static enum tp_lib tp_handle_lib(void *handle)
{
    enum tp_lib lib = TP_LIB_UNKNOWN;
    pthread_mutex_lock(&tp_handle_lock);
    for (unsigned i = 0; i < tp_n_handles && !lib; i++)
        if (tp_handles[i].handle == handle)
            lib = tp_handles[i].lib;
    pthread_mutex_unlock(&tp_handle_lock);
    if (lib)
        return lib;
    lib = tp_classify(handle);
    pthread_mutex_lock(&tp_handle_lock);
    if (tp_n_handles < TP_HANDLES) {
        tp_handles[tp_n_handles].handle = handle;
        tp_handles[tp_n_handles].lib = lib;
        tp_n_handles++;
    }
    pthread_mutex_unlock(&tp_handle_lock);
    return lib;
}

/*
 * Our own handle, for tp_own_symbol.  The first dlopen of an object loaded
 * at start-up, RTLD_NOLOAD or not, runs _dl_init on it, which calls every
 * initialiser whose object is not marked initialised - and at exit _dl_fini
 * clears that mark before it runs our destructor.  Taken lazily on tp-flush
 * while our destructor waited for the exit flush (a CUPTI constructor looking
 * up a cudart symbol), it ran our constructors a second time (a sanitizer
 * build reports that as an ODR violation of tp_dlsym_next).  So the handle
 * is taken in our constructor (init.c), where that dlopen runs nothing; the
 * lazy path is left only for lookups made by another library's constructor
 * before ours ran, at start-up.
 */
static void *tp_self;

static void *tp_self_handle(void)
{
    void *h = __atomic_load_n(&tp_self, __ATOMIC_ACQUIRE);
    if (h)
        return h;
    Dl_info info;
    if (!dladdr((void *)tp_self_handle, &info) || !info.dli_fname)
        return NULL;
    h = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
    if (h) {
        void *prev = NULL;
        if (!__atomic_compare_exchange_n(&tp_self, &prev, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            dlclose(h);            /* only drops the count we added */
            h = prev;
        }
    }
    return h;
}

void tp_dlsym_init(void)
{
    (void)tp_dlsym_next_fn();
    (void)tp_self_handle();
}

/* Our exported definition of "name", or NULL. */
static void *tp_own_symbol(const char *name)
{
    void *h = tp_self_handle();
    return h ? tp_dlsym_real(h, name) : NULL;
}

/* dlsym for every handle but RTLD_NEXT/RTLD_DEFAULT (tail-jumped to). */
__attribute__((visibility("hidden"))) void *tp_dlsym_handle(void *handle, const char *name)
{
    void *p = tp_dlsym_real(handle, name);
    if (!p || !name || !tp_lookup_enabled())
        return p;
    switch (tp_handle_lib(handle)) {
    case TP_LIB_CUDA:
        return tp_procaddr_wrap_symbol(name, p);
    case TP_LIB_WRAPPED: {
        /* only where our wrapper calls exactly "p": cuDNN's shim looks its
         * own sub-libraries up by handle and must get their functions */
        void *ours = tp_own_symbol(name);
        return ours && tp_resolve(name) == p ? ours : p;
    }
    default:
        return p;
    }
}

#if defined(__x86_64__)
/*
 * dlsym(handle %rdi, name %rsi).  RTLD_NEXT is -1, RTLD_DEFAULT 0.  The
 * first lookup finds the real dlsym itself with dlvsym, in assembly: the
 * sanitizer runtimes look their interceptors up through dlsym(RTLD_NEXT)
 * while initialising, before any instrumented code (ours) may run.  At
 * entry %rsp is 8 mod 16; two pushes and 8 bytes keep the calls aligned.
 * The plain store of tp_dlsym_next is a release on x86-64; racing first
 * calls store the same value.
 */
__asm__(
    "    .text\n"
    "    .globl dlsym\n"
    "    .type dlsym, @function\n"
    "dlsym:\n"
    "    .cfi_startproc\n"
    "    cmpq $-1, %rdi\n"
    "    je 1f\n"
    "    testq %rdi, %rdi\n"
    "    je 1f\n"
    "    jmp tp_dlsym_handle\n"
    "1:  movq tp_dlsym_next(%rip), %rax\n"
    "    testq %rax, %rax\n"
    "    je 2f\n"
    "    jmp *%rax\n"
    "2:  pushq %rdi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    pushq %rsi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    subq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    movq $-1, %rdi\n"
    "    leaq .Ltp_dlsym_name(%rip), %rsi\n"
    "    leaq .Ltp_glibc_234(%rip), %rdx\n"
    "    call dlvsym@PLT\n"
    "    testq %rax, %rax\n"
    "    jne 4f\n"
    "    movq $-1, %rdi\n"
    "    leaq .Ltp_dlsym_name(%rip), %rsi\n"
    "    leaq .Ltp_glibc_base(%rip), %rdx\n"
    "    call dlvsym@PLT\n"
    "4:  movq %rax, tp_dlsym_next(%rip)\n"
    "    addq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %rsi\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %rdi\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    testq %rax, %rax\n"
    "    je 3f\n"
    "    jmp *%rax\n"
    "3:  ret\n"
    "    .cfi_endproc\n"
    "    .size dlsym, .-dlsym\n"
    "    .section .rodata.str1.1,\"aMS\",@progbits,1\n"
    ".Ltp_dlsym_name: .string \"dlsym\"\n"
    ".Ltp_glibc_234: .string \"GLIBC_2.34\"\n"
    ".Ltp_glibc_base: .string \"" TP_GLIBC_BASE "\"\n"
    "    .text\n");
#elif defined(__aarch64__)
/*
 * dlsym(handle x0, name x1), return address in x30: a branch (b, br) leaves
 * x30 as the caller set it, which is what glibc's dlsym reads for
 * RTLD_NEXT/RTLD_DEFAULT.  The stub opens with "bti c" ("hint 34", a no-op
 * without branch target identification) because callers reach it by br
 * through a PLT; it jumps on through x16, the register such landing pads
 * accept.  The first RTLD_NEXT/RTLD_DEFAULT lookup finds the real dlsym
 * with dlvsym as on x86-64 (a frame saving x29/x30 and the two arguments,
 * 16-byte aligned), stores it with release semantics (stlr: AArch64 does
 * not order plain stores; racing first calls store the same value), and
 * returns NULL when neither version exists.
 */
__asm__(
    "    .text\n"
    "    .globl dlsym\n"
    "    .type dlsym, %function\n"
    "    .p2align 2\n"
    "dlsym:\n"
    "    .cfi_startproc\n"
    "    hint #34\n"
    "    cmn x0, #1\n"
    "    b.eq 1f\n"
    "    cbz x0, 1f\n"
    "    b tp_dlsym_handle\n"
    "1:  adrp x16, tp_dlsym_next\n"
    "    ldr x16, [x16, #:lo12:tp_dlsym_next]\n"
    "    cbz x16, 2f\n"
    "    br x16\n"
    "2:  stp x29, x30, [sp, #-32]!\n"
    "    .cfi_def_cfa_offset 32\n"
    "    .cfi_offset 29, -32\n"
    "    .cfi_offset 30, -24\n"
    "    mov x29, sp\n"
    "    stp x0, x1, [sp, #16]\n"
    "    mov x0, #-1\n"
    "    adrp x1, .Ltp_dlsym_name\n"
    "    add x1, x1, #:lo12:.Ltp_dlsym_name\n"
    "    adrp x2, .Ltp_glibc_234\n"
    "    add x2, x2, #:lo12:.Ltp_glibc_234\n"
    "    bl dlvsym\n"
    "    cbnz x0, 4f\n"
    "    mov x0, #-1\n"
    "    adrp x1, .Ltp_dlsym_name\n"
    "    add x1, x1, #:lo12:.Ltp_dlsym_name\n"
    "    adrp x2, .Ltp_glibc_base\n"
    "    add x2, x2, #:lo12:.Ltp_glibc_base\n"
    "    bl dlvsym\n"
    "4:  adrp x16, tp_dlsym_next\n"
    "    add x16, x16, #:lo12:tp_dlsym_next\n"
    "    stlr x0, [x16]\n"
    "    mov x16, x0\n"
    "    ldp x0, x1, [sp, #16]\n"
    "    ldp x29, x30, [sp], #32\n"
    "    .cfi_def_cfa_offset 0\n"
    "    .cfi_restore 29\n"
    "    .cfi_restore 30\n"
    "    cbz x16, 3f\n"
    "    br x16\n"
    "3:  mov x0, #0\n"
    "    ret\n"
    "    .cfi_endproc\n"
    "    .size dlsym, .-dlsym\n"
    "    .section .rodata.str1.1,\"aMS\",@progbits,1\n"
    ".Ltp_dlsym_name: .string \"dlsym\"\n"
    ".Ltp_glibc_234: .string \"GLIBC_2.34\"\n"
    ".Ltp_glibc_base: .string \"" TP_GLIBC_BASE "\"\n"
    "    .text\n");
#else
/*
 * Other architectures: a C wrapper.  RTLD_NEXT/RTLD_DEFAULT lookups made
 * through it are resolved relative to this library, not to the caller
 * (a tool preloaded after us that uses RTLD_NEXT would find itself): port
 * one of the stubs above before relying on this.
 */
TP_EXPORT void *dlsym(void *handle, const char *name)
{
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT)
        return tp_dlsym_real(handle, name);
    return tp_dlsym_handle(handle, name);
}
#endif
