/*
 * wrap.h - the one shape of every generated wrapper: every wrapper has the
 * same short shape.  Each preload/<lib>.c defines its record
 * expressions (TP_R_*) and expands its .def list through TP_WRAP.
 */
#ifndef TRAINPROF_PRELOAD_WRAP_H
#define TRAINPROF_PRELOAD_WRAP_H

#include "resolve.h"
#include "collector/record/apis.h"
#include "collector/wrap/core.h"
#include "collector/wrap/graphs_api.h"
#include "collector/wrap/memtrack_api.h"
#include "collector/record/inflight.h"

/*
 * TP_WRAP - define the exported wrapper "name".
 *   missing     returned when no real function can be found
 *   on_resolve  run once, after the real function was found
 *   on_entry    run on every call, before the fast path (keep it trivial)
 *   begin       tp_call_begin (CUDA runtime/driver) or tp_lib_begin (libraries)
 *   rec         the record expression: fills tp_r when it is not NULL, and for
 *               launches sets tp_func/tp_fkind for step signals
 * Outside windows the wrapper is one load of tp_hot and a tail call of the
 * real function (the recording path is a separate function, so that the
 * wrapper's frame stays empty); errno and the return value pass through
 * unchanged.  During a
 * CUDA graph capture a call that records nothing still fills a scratch
 * record, so that the capture learns its FLOPs (collector/record/graphs.h).
 */
#define TP_WRAP(ret, name, params, args, missing, on_resolve, on_entry, begin, rec)   \
    TP_WRAP_GATED(TP_GATE_WIN, ret, name, params, args, missing, on_resolve, on_entry, begin, rec)

/*
 * The fast-path test of a wrapper.  "gate" is its .def line's gate column
 * (enum tp_gate, a constant: a wrapper file's TP_FN passes TP_GATE_##gate):
 * TP_GATE_MEM adds tp_mem_on, so that allocation calls reach
 * collector/modules/memtrack.c between windows too, TP_GATE_OWN the same
 * for a library's handle creation (its allocations are the library's), and TP_GATE_PAPI
 * TRAINPROF_SCHEDULE=profiler-api, so that the profiler API's Start reaches
 * the steps between windows, while every other wrapper keeps its one load.
 */
#define TP_PASS_H(gate, hot) \
    (!(hot) && \
     !(((gate) == TP_GATE_MEM || (gate) == TP_GATE_OWN) && \
       atomic_load_explicit(&tp_mem_on, memory_order_relaxed)) && \
     !((gate) == TP_GATE_PAPI && tp_cfg.schedule.profiler_api))
#define TP_PASS(gate) TP_PASS_H(gate, tp_hot_load())

/*
 * TP_COUNTS(gate, hot, func) - whether a launch (gate LAUNCH) of kernel
 * "func" passes through while a launch: step signal is the only thing the
 * hot word asks for (no window records, no call: signal, no capture,
 * activated): a kernel known to hit no signal (collector/control/steps.h
 * tp_launch_quiet).  Loads and compares only, so that the wrapper stays a
 * tail call.  A kernel that hits a signal, or is not cached yet, takes the
 * recording path, which counts it; there the depth guard keeps a runtime
 * launch's driver launch from counting twice.  A runtime launch that passes
 * through reaches its driver launch's wrapper, which finds the kernel's own
 * answer: the same kernel, the same signals.
 */
#define TP_COUNTS(gate, hot, func) \
    ((gate) == TP_GATE_LAUNCH && ((hot) & TP_HOT_FLAGS) == TP_HOT_LAUNCH_SIG && \
     tp_launch_quiet(func))

/*
 * TP_WRAP_FUNC - define "fn", the kernel a call of "name" launches, from
 * its arguments: "rec" with tp_r NULL (a launch's sets tp_func before the
 * call as well as after it).  Emitted for every wrapper, compiled only
 * where a LAUNCH gate uses it.
 */
#define TP_WRAP_FUNC(fn, ret, name, params, rec)                                    \
    _Pragma("GCC diagnostic push")                                                   \
    _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"")                        \
    static inline __attribute__((always_inline, unused)) uint64_t fn params         \
    {                                                                                \
        ret tp_rc = (ret)0;                                                          \
        tp_fn_##name real = NULL;                                                    \
        struct tp_call tp_c = { 0 };                                                 \
        struct tp_record *tp_r = NULL;                                               \
        uint64_t tp_func = 0;                                                        \
        int tp_fkind = 0;                                                            \
        (void)tp_rc;                                                                 \
        (void)real;                                                                  \
        (void)tp_c;                                                                  \
        (void)tp_fkind;                                                              \
        rec;                                                                         \
        (void)tp_r;                                                                  \
        return tp_func;                                                              \
    }                                                                                \
    _Pragma("GCC diagnostic pop")

#define TP_BEGIN(gate, begin) \
    ((gate) == TP_GATE_MEM ? tp_mem_begin : (gate) == TP_GATE_PAPI ? tp_papi_begin : \
     (gate) == TP_GATE_OWN ? tp_lib_own_begin : (begin))

/* TP_MEM_SITE(gate) - in an exported or lookup-time wrapper about to take
 * its slow path: an allocation's wrapper notes its caller for the memory
 * ledger (tp_mem_begin reads it before the real call). */
#define TP_MEM_SITE(gate) \
    do { if ((gate) == TP_GATE_MEM) tp_mem_site = (uint64_t)(uintptr_t)__builtin_return_address(0); } while (0)

/*
 * tp_papi_begin - tp_call_begin for cudaProfilerStart/Stop and
 * cuProfilerStart/Stop: the outermost call only (the runtime's reaches the
 * driver's inside it: one Start, one Stop), held also between windows.  A
 * Stop ends the window before the real call (collector/control/steps.h); a Start
 * opens one after it succeeded (TP_R_PROFILER), so that neither is an
 * event of the window it bounds.
 */
static inline int tp_papi_begin(struct tp_call *c, uint16_t api)
{
    if (tp_depth > 0)
        return 0;
    if (api == TP_API_cudaProfilerStop || api == TP_API_cuProfilerStop)
        tp_steps_profiler_api(0);
    if (tp_call_begin(c, api))
        return 1;
    c->depth = &tp_depth;   /* tp_hot is 0: no record, the re-entry still folded */
    c->hot = 0;
    c->api = api;
    c->t0 = 0;
    c->ext = 0;
    tp_depth++;
    return 1;
}

/* TP_R_PROFILER(start) - the record expression of the profiler API. */
#define TP_R_PROFILER(start) \
    (void)tp_r; if ((start) && tp_rc == 0) tp_steps_profiler_api(1)

/*
 * Blocking calls (collector/record/inflight.h): a preload file marks one by
 * defining TP_BLOCK_<name> as "~, 1, EXPR" before it expands its .def
 * list, EXPR filling the thread's in-flight slot from the wrapper's
 * parameters (tp_api is the call's id) and giving it back.  A name without
 * that line is not blocking: TP_BLOCKING(name) is then the constant 0 and
 * the wrapper is what it was (the probe idiom: the second and third items
 * of a list that only a defined TP_BLOCK_<name> makes longer).
 */
#define TP_PROBE_2(a, b, ...) b
#define TP_PROBE_3(a, b, c, ...) c
#define TP_PROBE_2_(...) TP_PROBE_2(__VA_ARGS__)
#define TP_PROBE_3_(...) TP_PROBE_3(__VA_ARGS__)
#define TP_BLOCKING(name) TP_PROBE_2_(TP_BLOCK_##name, 0, NULL, ~)
#define TP_BLOCK_EXPR(name) TP_PROBE_3_(TP_BLOCK_##name, 0, NULL, ~)

/* TP_IN_CALL(bytes, handle) - the EXPR of a blocking call that is not a
 * collective: the bytes it moves, its stream, event or pointer. */
#define TP_IN_CALL(bytes, handle) \
    tp_inflight_begin(tp_api, 0, 0, (uint64_t)(bytes), -1, (uint64_t)(uintptr_t)(handle), 0)

/*
 * TP_WRAP_INFLIGHT - "fn", the path of a blocking wrapper of "name" while
 * the hang doctor watches: the slot filled, the wrapper's usual path, the
 * slot cleared.  Never emitted for a call that is not blocking.
 */
#define TP_WRAP_INFLIGHT(fn, ret, name, params, args, gate)                         \
    static __attribute__((noinline, unused)) ret fn params                           \
    {                                                                                \
        const uint16_t tp_api = TP_API_##name;                                       \
        (void)tp_api;                                                                \
        struct tp_inflight *tp_in = TP_BLOCK_EXPR(name);                             \
        tp_fn_##name real = __atomic_load_n(&tp_real_##name, __ATOMIC_ACQUIRE);     \
        ret tp_rc = TP_PASS(gate) ? real args : tp_slow_##name args;                 \
        tp_inflight_end(tp_in);                                                      \
        return tp_rc;                                                                \
    }

/*
 * Entry stubs (x86-64, aarch64).  A compiler keeps a frame, or copies arguments it
 * never reads, in a wrapper that takes a struct by value or passes
 * arguments on the stack (cudaLaunchKernel's dim3s, cublasLtMatmul's 16):
 * 20-50 instructions on every call outside windows.  So where the C fast
 * path would be only "the real function is known and the hot word is 0,
 * jump to it", the exported symbol is that test written in assembly,
 * seven instructions whatever the signature; everything else (the first
 * call's resolution, a window, a step signal counted) jumps to the C
 * wrapper, which makes the whole test again.  The gate MEM's stubs also
 * OR tp_mem_on and tp_inflight_on into the test (eleven instructions on
 * x86-64 for an exported one, which also routes to the lean path: see
 * TP_ASM_HOT_meml).  Not for wrappers whose fast path tests more: the
 * gates OWN and PAPI, other blocking calls (the hang doctor's slot), and a
 * file whose entry hook does work on every call (preload/nccl.c sets
 * TP_WRAP_STUBS to 0).  r10 and r11 are scratch at a call in the x86-64
 * ABI and carry no argument (rax would: a variadic call's vector count).
 * aarch64 has the same stubs; other architectures export the C wrapper.
 */
#if defined(__x86_64__)
#define TP_STUB_ARCH 1
/* TP_ASM_STUB(sym, vis, slot, target, freg) - the stub "sym" (".globl" and
 * "vis", a visibility directive or nothing), whose real function is at
 * "slot", falling back to the C wrapper "target".  "freg" (arg1, arg2: the
 * argument that is a launch's kernel handle, or none) makes it a launch
 * stub, which also makes the launch: step signal's count-only test of
 * TP_COUNTS (below). */
#define TP_ASM_STUB(sym, vis, slot, target, freg)                                    \
    __asm__(".pushsection .text\n\t.p2align 4\n\t.globl " sym "\n\t" vis "\n\t"      \
            ".type " sym ", @function\n" sym ":\n\t.cfi_startproc\n\t"                 \
            "movq " slot "(%rip), %r11\n\t"                                           \
            "testq %r11, %r11\n\t"                                                    \
            "jz " target "\n\t"                                                       \
            "movl tp_hot(%rip), %r10d\n\t"                                            \
            "testl %r10d, %r10d\n\t"                                                  \
            TP_CAT(TP_ASM_HOT_, freg)(slot, target)                                  \
            ".cfi_endproc\n\t.size " sym ", .-" sym "\n\t.popsection");
#define TP_ASM_HOT_none(slot, target) "jnz " target "\n\tjmp *%r11\n\t"
#define TP_ASM_HOT_arg1(slot, target) TP_ASM_COUNT("%rdi", slot, target)
#define TP_ASM_HOT_arg2(slot, target) TP_ASM_COUNT("%rsi", slot, target)
/* An allocation's stub (gate MEM): passes through only while tp_hot,
 * tp_mem_on and tp_inflight_on are all 0 (TP_PASS_H, and a blocking
 * call's hang-doctor test, made as one; a call that is not blocking
 * reaches its C wrapper while the hang doctor is on, which passes it
 * through).  "meml", an exported wrapper's: with tp_hot's flags 0 (no
 * window records; the word is then 0 as a whole, the flag byte is what
 * the lean path needs) and tp_mem_on set (the hang doctor off) it stores its
 * return address in tp_mem_site, as the C wrapper's TP_MEM_SITE does, and
 * jumps to the lean path <target>_lean (TP_WRAP_LEANFN) itself. */
#define TP_ASM_HOT_mem(slot, target)                                                 \
    "orl tp_mem_on(%rip), %r10d\n\t"                                                \
    "orl tp_inflight_on(%rip), %r10d\n\t"                                           \
    "jnz " target "\n\tjmp *%r11\n\t"
#define TP_ASM_HOT_meml(slot, target)                                                \
    "testb %r10b, %r10b\n\t"                                                        \
    "jnz " target "\n\t"                                                            \
    "movl tp_inflight_on(%rip), %r10d\n\t"                                          \
    "orl tp_mem_on(%rip), %r10d\n\t"                                                \
    "jnz 1f\n\t"                                                                    \
    "jmp *%r11\n"                                                                   \
    "1:\n\t"                                                                        \
    "cmpl $0, tp_inflight_on(%rip)\n\t"                                             \
    "jne " target "\n\t"                                                            \
    "movq tp_mem_site@gottpoff(%rip), %r10\n\t"                                     \
    "movq (%rsp), %r11\n\t"                                                         \
    "movq %r11, %fs:(%r10)\n\t"                                                     \
    "jmp " target "_lean\n\t"
/* With the hot word's flags exactly TP_HOT_LAUNCH_SIG: pass through for a
 * kernel whose cache entry (tp_launch_slot: ((func >> 4) ^ (func >> 12)) &
 * 63, 16-byte entries, func at 0, mask at 8) says it hits no signal; else
 * the C wrapper. */
#define TP_ASM_COUNT(reg, slot, target)                                              \
    "jnz 1f\n\t"                                                                     \
    "jmp *%r11\n"                                                                    \
    "1:\n\t"                                                                         \
    "cmpb $" TP_STR(TP_HOT_LAUNCH_SIG_BYTE) ", %r10b\n\t"                            \
    "jne " target "\n\t"                                                             \
    "movq " reg ", %r10\n\t"                                                         \
    "movq " reg ", %r11\n\t"                                                         \
    "shrq $4, %r10\n\t"                                                              \
    "shrq $12, %r11\n\t"                                                             \
    "xorq %r11, %r10\n\t"                                                            \
    "andl $63, %r10d\n\t"                                                            \
    "shlq $4, %r10\n\t"                                                              \
    "addq tp_launch_cache@gottpoff(%rip), %r10\n\t"                                  \
    "cmpq %fs:(%r10), " reg "\n\t"                                                   \
    "jne " target "\n\t"                                                             \
    "cmpl $0, %fs:8(%r10)\n\t"                                                       \
    "jne " target "\n\t"                                                             \
    "movq " slot "(%rip), %r11\n\t"                                                  \
    "jmp *%r11\n\t"
#elif defined(__aarch64__)
#define TP_STUB_ARCH 1
/* The same on aarch64: x16 holds the real function (IP0, scratch at a
 * call, as a PLT stub uses it); x17 and x9-x11 are scratch too, x0-x7 the
 * arguments.  "b" reaches the C wrapper anywhere in the library (cbz's
 * range is 1 MiB), hence the local label 8.  "hint 34" is bti c. */
#define TP_ASM_STUB(sym, vis, slot, target, freg)                                    \
    __asm__(".pushsection .text\n\t.p2align 4\n\t.globl " sym "\n\t" vis "\n\t"      \
            ".type " sym ", %function\n" sym ":\n\t.cfi_startproc\n\t"                 \
            "hint 34\n\t"                                                            \
            "adrp x16, " slot "\n\t"                                                  \
            "ldr x16, [x16, #:lo12:" slot "]\n\t"                                     \
            "cbz x16, 8f\n\t"                                                         \
            "adrp x17, tp_hot\n\t"                                                    \
            "ldr w17, [x17, #:lo12:tp_hot]\n\t"                                       \
            TP_CAT(TP_ASM_HOT_, freg)(slot, target)                                  \
            "8:\n\t"                                                                   \
            "b " target "\n\t"                                                        \
            ".cfi_endproc\n\t.size " sym ", .-" sym "\n\t.popsection");
#define TP_ASM_HOT_none(slot, target) "cbnz w17, 8f\n\tbr x16\n"
#define TP_ASM_HOT_arg1(slot, target) TP_ASM_COUNT("x0")
#define TP_ASM_HOT_arg2(slot, target) TP_ASM_COUNT("x1")
#define TP_ASM_HOT_mem(slot, target)                                                 \
    "adrp x9, tp_mem_on\n\t"                                                        \
    "ldr w9, [x9, #:lo12:tp_mem_on]\n\t"                                            \
    "adrp x10, tp_inflight_on\n\t"                                                  \
    "ldr w10, [x10, #:lo12:tp_inflight_on]\n\t"                                     \
    "orr w17, w17, w9\n\t"                                                          \
    "orr w17, w17, w10\n\t"                                                         \
    "cbnz w17, 8f\n\tbr x16\n"
#define TP_ASM_HOT_meml(slot, target)                                                \
    "tst w17, #0xff\n\t"                                                            \
    "b.ne 8f\n\t"                                                                   \
    "adrp x9, tp_mem_on\n\t"                                                        \
    "ldr w9, [x9, #:lo12:tp_mem_on]\n\t"                                            \
    "adrp x10, tp_inflight_on\n\t"                                                  \
    "ldr w10, [x10, #:lo12:tp_inflight_on]\n\t"                                     \
    "orr w11, w9, w10\n\t"                                                          \
    "cbnz w11, 1f\n\t"                                                              \
    "br x16\n"                                                                      \
    "1:\n\t"                                                                        \
    "cbnz w10, 8f\n\t"                                                              \
    "mrs x9, tpidr_el0\n\t"                                                         \
    "adrp x10, :gottprel:tp_mem_site\n\t"                                           \
    "ldr x10, [x10, #:gottprel_lo12:tp_mem_site]\n\t"                               \
    "str x30, [x9, x10]\n\t"                                                        \
    "b " target "_lean\n"
#define TP_ASM_COUNT(reg)                                                            \
    "cbnz w17, 1f\n\t"                                                               \
    "br x16\n"                                                                       \
    "1:\n\t"                                                                         \
    "and w17, w17, #0xff\n\t"                                                        \
    "cmp w17, #" TP_STR(TP_HOT_LAUNCH_SIG_BYTE) "\n\t"                               \
    "b.ne 8f\n\t"                                                                    \
    "lsr x9, " reg ", #4\n\t"                                                        \
    "eor x9, x9, " reg ", lsr #12\n\t"                                               \
    "and x9, x9, #63\n\t"                                                            \
    "mrs x10, tpidr_el0\n\t"                                                         \
    "adrp x11, :gottprel:tp_launch_cache\n\t"                                        \
    "ldr x11, [x11, #:gottprel_lo12:tp_launch_cache]\n\t"                            \
    "add x10, x10, x11\n\t"                                                          \
    "add x10, x10, x9, lsl #4\n\t"                                                   \
    "ldr x11, [x10]\n\t"                                                             \
    "cmp x11, " reg "\n\t"                                                           \
    "b.ne 8f\n\t"                                                                    \
    "ldr w11, [x10, #8]\n\t"                                                         \
    "cbnz w11, 8f\n\t"                                                               \
    "br x16\n"
#else
#define TP_STUB_ARCH 0
#define TP_ASM_STUB(sym, vis, slot, target, freg)
#endif
#if TP_STUB_ARCH
#define TP_STR_(x) #x
#define TP_STR(x) TP_STR_(x)
#define TP_HOT_LAUNCH_SIG_BYTE 4
_Static_assert(TP_HOT_LAUNCH_SIG_BYTE == TP_HOT_LAUNCH_SIG, "the launch stub's flag byte");
_Static_assert(sizeof(struct tp_launch_hit) == 16 && __builtin_offsetof(struct tp_launch_hit, mask) == 8 &&
               TP_LAUNCH_CACHE == 64, "the launch stub's cache layout (tp_launch_slot)");
#endif
#ifndef TP_WRAP_STUBS
#define TP_WRAP_STUBS 1
#endif

#define TP_CAT_(a, b) a##b
#define TP_CAT(a, b) TP_CAT_(a, b)
#define TP_IF_0(t, f) f
#define TP_IF_1(t, f) t
#define TP_IF(c) TP_CAT(TP_IF_, c)
#define TP_NOT_0 1
#define TP_NOT_1 0
#define TP_AND_00 0
#define TP_AND_01 0
#define TP_AND_10 0
#define TP_AND_11 1
#define TP_AND(a, b) TP_CAT(TP_AND_, TP_CAT(a, b))
#define TP_STUBGATE_TP_GATE_WIN 1
#define TP_STUBGATE_TP_GATE_LAUNCH 1
#define TP_STUBGATE_TP_GATE_MEM 1
#define TP_STUBGATE_TP_GATE_OWN 0
#define TP_STUBGATE_TP_GATE_PAPI 0
#define TP_OR_00 0
#define TP_OR_01 1
#define TP_OR_10 1
#define TP_OR_11 1
#define TP_OR(a, b) TP_CAT(TP_OR_, TP_CAT(a, b))
/* TP_ISMEM(gate) - 1 for gate MEM: its stub also tests tp_mem_on and the
 * hang doctor's tp_inflight_on (TP_ASM_HOT_mem), so a blocking allocation
 * call (cudaFree) has one too, and its C wrapper has a lean path. */
#define TP_ISMEM_TP_GATE_WIN 0
#define TP_ISMEM_TP_GATE_LAUNCH 0
#define TP_ISMEM_TP_GATE_MEM 1
#define TP_ISMEM_TP_GATE_OWN 0
#define TP_ISMEM_TP_GATE_PAPI 0
#define TP_ISMEM(gate) TP_CAT(TP_ISMEM_, gate)
/* TP_STUBBED(gate, name) - 1 if the wrapper of "name" has an entry stub. */
#define TP_STUBBED(gate, name)                                                       \
    TP_AND(TP_AND(TP_STUB_ARCH, TP_WRAP_STUBS),                                      \
           TP_AND(TP_CAT(TP_STUBGATE_, gate),                                        \
                  TP_OR(TP_ISMEM(gate), TP_CAT(TP_NOT_, TP_BLOCKING(name)))))

/*
 * The kernel argument's register of a launch, for its entry stub: a .def
 * list's TP_FN writes TP_FREG_##gate(TP_FUNCREG_##rec) itself (preload/
 * cudart.c, driver.c), so that "rec" is pasted while it is still the
 * record macro's name, not yet expanded.  Every gate but LAUNCH discards it.
 */
#define TP_FREG_WIN(x) none
#define TP_FREG_MEM(x) mem
#define TP_FREG_OWN(x) none
#define TP_FREG_PAPI(x) none
#define TP_FREG_LAUNCH(x) x
/* TP_STUBFREG(freg) - an exported wrapper's stub: an allocation's (mem)
 * also routes to its lean path (meml). */
#define TP_STUBFREG(freg) TP_CAT(TP_STUBFREG_, freg)
#define TP_STUBFREG_none none
#define TP_STUBFREG_arg1 arg1
#define TP_STUBFREG_arg2 arg2
#define TP_STUBFREG_mem meml
#define TP_FUNCREG_TP_R_LAUNCH(...) arg1
#define TP_FUNCREG_TP_R_DLAUNCH(...) arg1
#define TP_FUNCREG_TP_R_LAUNCH_CFG(...) arg2
#define TP_FUNCREG_TP_R_DLAUNCH_CFG(...) arg2
#define TP_FUNCREG_TP_R_GRAPH(...) none

/* TP_WRAP_GATED - TP_WRAP with "gate" (enum tp_gate, above).  The C
 * wrapper is tp_c_<name>; the exported <name> is its entry stub, or an
 * alias of it.  TP_WRAP_GATED_F: with the launch's kernel register "freg"
 * (TP_FREG). */
#define TP_WRAP_GATED(gate, ret, name, params, args, missing, on_resolve, on_entry, begin, rec) \
    TP_WRAP_GATED_F(gate, none, ret, name, params, args, missing, on_resolve, on_entry, begin, rec)
#define TP_WRAP_GATED_F(gate, freg, ret, name, params, args, missing, on_resolve, on_entry, begin, rec) \
    typedef ret (*tp_fn_##name) params;                                              \
    static __attribute__((used)) tp_fn_##name tp_real_##name;                        \
    static ret tp_first_##name params;                                               \
    TP_WRAP_SLOW(tp_slow_##name, ret, name, params, args, tp_real_##name,            \
                 TP_BEGIN(gate, begin), rec)                                         \
    TP_IF(TP_ISMEM(gate))(TP_WRAP_LEANFN(tp_c_##name##_lean, ret, name, params, args, \
                                         tp_real_##name, tp_slow_##name, rec), )     \
    TP_WRAP_INFLIGHT(tp_inflight_##name, ret, name, params, args, gate)              \
    TP_WRAP_FUNC(tp_func_##name, ret, name, params, rec)                             \
    static __attribute__((used, noinline)) ret tp_c_##name params                    \
    {                                                                                \
        tp_fn_##name real = __atomic_load_n(&tp_real_##name, __ATOMIC_ACQUIRE);     \
        if (__builtin_expect(!real, 0))                                              \
            return tp_first_##name args;                                             \
        on_entry;                                                                    \
        if (TP_BLOCKING(name) &&                                                     \
            __builtin_expect(atomic_load_explicit(&tp_inflight_on, memory_order_relaxed), 0)) \
            return tp_inflight_##name args;                                          \
        uint32_t tp_h = tp_hot_load();                                               \
        if (__builtin_expect(TP_PASS_H(gate, tp_h), 1))                              \
            return real args;                                                        \
        if (TP_COUNTS(gate, tp_h, tp_func_##name args))                              \
            return real args;                                                        \
        TP_MEM_SITE(gate);                                                           \
        TP_IF(TP_ISMEM(gate))(if (!(tp_h & TP_HOT_FLAGS)) return tp_c_##name##_lean args;, ) \
        return tp_slow_##name args;                                                  \
    }                                                                                \
    TP_IF(TP_STUBBED(gate, name))(                                                   \
        TP_ASM_STUB(#name, "", "tp_real_" #name, "tp_c_" #name, TP_STUBFREG(freg)),  \
        TP_EXPORT __typeof__(tp_c_##name) name __attribute__((alias("tp_c_" #name)));) \
    static __attribute__((noinline, cold)) ret tp_first_##name params                \
    {                                                                                \
        tp_fn_##name real = (tp_fn_##name)tp_resolve(#name);                         \
        if (!real)                                                                   \
            return missing;                                                          \
        on_resolve;                                                                  \
        __atomic_store_n(&tp_real_##name, real, __ATOMIC_RELEASE);                   \
        return tp_c_##name args;                                                     \
    }

/*
 * TP_WRAP_SLOW - define "fn", the recording path of a wrapper of "name"
 * (type tp_fn_##name) whose real function is loaded from "slot".  Shared by
 * TP_WRAP and the driver's lookup-time slot wrappers (preload/driver.c).
 * "begin" answers 0 (pass through), 1 (the call protocol), or, only
 * tp_mem_begin, TP_MEM_LEAN: an allocation between windows, the real call
 * and "rec" with tp_r NULL (the ledger's update) and nothing else
 * (TP_WRAP_LEAN); the test costs the recording path nothing (one test of
 * begin's answer, as before).
 */
#define TP_WRAP_SLOW(fn, ret, name, params, args, slot, begin, rec)                 \
    static __attribute__((noinline)) ret fn params                                   \
    {                                                                                \
        tp_fn_##name real = __atomic_load_n(&(slot), __ATOMIC_ACQUIRE);             \
        struct tp_call tp_c;                                                         \
        int tp_b = begin(&tp_c, TP_API_##name);                                      \
        if (__builtin_expect(tp_b != 1, 0)) {                                        \
            if (!tp_b)                                                               \
                return real args;                                                    \
            TP_WRAP_LEAN(ret, real, args, rec)                                       \
        }                                                                            \
        ret tp_rc = real args;                                                       \
        struct tp_record *tp_r = tp_call_end(&tp_c, (int32_t)tp_rc);                 \
        struct tp_record tp_scratch;                                                 \
        int tp_cap = tp_graphs_capturing(&tp_c);                                     \
        if (__builtin_expect(tp_cap && !tp_r, 0)) {                                  \
            __builtin_memset(&tp_scratch, 0, sizeof tp_scratch);                     \
            tp_scratch.kind = TP_REC_API;                                            \
            tp_scratch.api = TP_API_##name;                                          \
            tp_r = &tp_scratch;                                                      \
        }                                                                            \
        uint64_t tp_func = 0;                                                        \
        int tp_fkind = 0;                                                            \
        rec;                                                                         \
        if (__builtin_expect(tp_cap, 0))                                             \
            tp_graphs_captured(tp_r);                                                \
        if (__builtin_expect((int32_t)tp_rc != 0, 0) && tp_r && tp_r != &tp_scratch)  \
            tp_r = tp_steps_flight_status(tp_r, TP_API_##name, (int32_t)tp_rc);      \
        tp_call_finish(&tp_c, tp_r == &tp_scratch ? NULL : tp_r, tp_func, tp_fkind); \
        return tp_rc;                                                                \
    }

/*
 * TP_WRAP_LEAN - the rest of a wrapper after tp_mem_begin answered
 * TP_MEM_LEAN (tp_depth raised, tp_c's site, outer and api set): the real
 * call, "rec" with no record (the ledger's update, which may call the
 * driver or malloc: errno is the real call's again after it), tp_depth
 * lowered, and the first-call bookkeeping of tp_call_finish (the exit
 * flush's registration).  What tp_call_end and tp_call_finish do besides
 * is for a hot word that is not 0.
 */
#define TP_WRAP_LEAN(ret, real, args, rec)                                           \
    {                                                                                \
        ret tp_rc = real args;                                                       \
        int tp_errno = errno;                                                        \
        struct tp_record *const tp_r = NULL;                                         \
        uint64_t tp_func = 0;                                                        \
        int tp_fkind = 0;                                                            \
        rec;                                                                         \
        (void)tp_r;                                                                  \
        (void)tp_func;                                                               \
        (void)tp_fkind;                                                              \
        tp_depth--;                                                                  \
        tp_lifecycle_check();                                                        \
        errno = tp_errno;                                                            \
        return tp_rc;                                                                \
    }

/*
 * TP_WRAP_LEANFN - define "fn", the lean path of the exported allocation
 * wrapper of "name" (gate MEM) between windows: the entry stub (or the C
 * wrapper), having found tp_hot's flags 0 and tp_mem_on set, jumps here
 * with tp_mem_site set instead of to the recording path "slow", whose frame (the call protocol's struct, the record, the
 * capture's scratch record, saved registers) costs about 80 instructions
 * per allocation and free that this path never uses.  tp_mem_lean_begin
 * makes tp_mem_begin's decision again (the hot word may have changed):
 * "slow" while a window records, the real function for a nested call or
 * with tracking off, else TP_WRAP_LEAN.  The driver's lookup-time slot
 * wrappers keep the lean branch inside TP_WRAP_SLOW.
 */
#define TP_WRAP_LEANFN(fn, ret, name, params, args, slot, slow, rec)                 \
    static __attribute__((used, noinline)) ret fn params                             \
    {                                                                                \
        tp_fn_##name real = __atomic_load_n(&(slot), __ATOMIC_ACQUIRE);             \
        struct tp_call tp_c;                                                         \
        int tp_b = tp_mem_lean_begin(&tp_c, TP_API_##name);                          \
        if (__builtin_expect(tp_b != TP_MEM_LEAN, 0))                                \
            return tp_b ? slow args : real args;                                     \
        TP_WRAP_LEAN(ret, real, args, rec)                                           \
    }

/*
 * TP_REAL_THEN - declare "real" as the real function "name" of type "type",
 * resolved on first use, then run "on_resolve" once; returns "missing" from
 * the caller if none exists.  For hand-written wrappers whose work is not a
 * record (registration, graph capture, communicator bookkeeping).
 */
#define TP_REAL_THEN(type, name, missing, on_resolve)                                \
    static type tp_slot_##name;                                                      \
    type real = __atomic_load_n(&tp_slot_##name, __ATOMIC_ACQUIRE);                  \
    if (__builtin_expect(!real, 0)) {                                                \
        if (!(real = (type)tp_resolve(#name)))                                       \
            return missing;                                                          \
        on_resolve;                                                                  \
        __atomic_store_n(&tp_slot_##name, real, __ATOMIC_RELEASE);                   \
    }

#define TP_REAL(type, name, missing) TP_REAL_THEN(type, name, missing, (void)0)

#endif
