/*
 * call.h - the state every intercepted call reads first: the hot word
 * tp_hot and the per-thread nesting guards.  Kept apart from the core
 * (lifecycle.c, steps.c, flusher.c) so that modules below it (the host
 * sampler, whose thread sets the guard for life; the device module, which
 * sets a part of the hot word) need not link against it.
 *
 * Every wrapper first reads one word, tp_hot.  Zero means "pass through":
 * before any window, between windows and after the last one, with no
 * call-counting step signal configured, that load and a branch are all a
 * wrapper adds.  The low byte holds TP_HOT_* flags; bits 8-15 the current
 * window generation, stamped into records so that the flush thread can tell
 * windows apart (only while a flag is set: with none the word is 0).
 */
#ifndef TRAINPROF_COLLECTOR_CALL_H
#define TRAINPROF_COLLECTOR_CALL_H

#include <stdatomic.h>
#include <stdint.h>

#define TP_HOT_INACTIVE   0x01u   /* not activated yet: the next call activates */
#define TP_HOT_RECORDING  0x02u   /* a window records */
#define TP_HOT_LAUNCH_SIG 0x04u   /* launch:GLOB step signal counts launches */
#define TP_HOT_CALL_SIG   0x08u   /* call:NAME step signal counts calls */
#define TP_HOT_CAPTURE    0x10u   /* some thread captures a CUDA graph (graphs.h) */
#define TP_HOT_EXTCORR    0x20u   /* recording with CUPTI on: library calls push
                                     their external correlation id (cupti.h) */
#define TP_HOT_STACK      0x40u   /* recording with TRAINPROF_WITH_STACK=1 */
#define TP_HOT_FLAGS      0xffu
#define TP_HOT_GEN(w)     ((uint8_t)((w) >> 8))

/* Hidden on the declaration as well: -fvisibility=hidden covers only
 * definitions, and a reader that knows the word is this object's own loads
 * it PC-relative, not through the GOT (one load instead of two).  The other
 * words a fast path reads (tp_mem_on, tp_inflight_on, tp_steps_*, tp_cfg)
 * are declared the same way. */
extern _Atomic uint32_t tp_hot __attribute__((visibility("hidden")));

/* Per-thread nesting depth of CUDA runtime/driver calls: > 0 while inside a
 * recorded call or inside the profiler itself; helper threads keep it > 0
 * for life.  Library calls (cuBLAS, cuBLASLt, cuDNN, NCCL) nest separately
 * in tp_lib_depth: a GEMM that re-enters cuBLASLt is one record, while the
 * launches it makes are records of their own, nested inside its span. */
extern __thread int tp_depth __attribute__((tls_model("initial-exec")));
extern __thread int tp_lib_depth __attribute__((tls_model("initial-exec")));

/*
 * What the memory ledger (collector/modules/memtrack.h) learns of the call
 * around an allocation, for its owner: tp_lib_outer, the outermost library
 * call under way on this thread (an enum tp_api_id, or a TP_OUTER_* id of a
 * call wrapped by hand), valid while tp_lib_depth > 0; tp_mem_site, the
 * return address of the last allocation wrapper that took its slow path,
 * stored by the exported wrapper and read by tp_mem_begin before the real
 * call (a nested driver wrapper overwrites it after that, harmlessly).
 */
extern __thread uint16_t tp_lib_outer __attribute__((tls_model("initial-exec")));
extern __thread uint64_t tp_mem_site __attribute__((tls_model("initial-exec")));

static inline uint32_t tp_hot_load(void)
{
    return atomic_load_explicit(&tp_hot, memory_order_relaxed);
}

/*
 * The hot word is composed here from what its owners set, each under one
 * lock: the schedule's mode (TP_HOT_INACTIVE, TP_HOT_RECORDING and the
 * step-signal flags) and window generation (steps.c), whether a capture
 * is open (steps.c), whether CUPTI's kinds are on (the device module,
 * device.c) and whether stacks are wanted (activation).  TP_HOT_EXTCORR and
 * TP_HOT_STACK are set only while recording.
 */
void tp_hot_mode(uint32_t flags, uint8_t gen);
void tp_hot_capture(int open);
void tp_hot_extcorr(int on);
void tp_hot_stack(int on);

/* tp_hot_off - zero the hot word for good (exit, a forked child, failed
 * activation); returns the word it replaced.  Lock-free: a forked child
 * may not take the lock another thread held at fork. */
uint32_t tp_hot_off(void);

/* tp_hot_is_off - tp_hot_off was called. */
int tp_hot_is_off(void);

/* tp_cuda_succeeded - a CUDA call succeeded (so a driver context exists);
 * tp_cuda_ok - 1 once that happened. */
void tp_cuda_succeeded(void);
int tp_cuda_ok(void);

/* State of one intercepted call between tp_call_begin and tp_call_finish. */
struct tp_call {
    int *depth;           /* &tp_depth or &tp_lib_depth */
    uint32_t hot;
    int ext;              /* an external correlation id was pushed */
    uint16_t api;
    uint16_t outer;       /* allocation calls: tp_lib_outer or the call's own
                             library (tp_mem_begin), 0 if none */
    uint64_t t0;
    uint64_t site;        /* allocation calls: tp_mem_site at entry */
    int saved_errno;
};

#endif
