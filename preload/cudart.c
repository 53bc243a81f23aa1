/*
 * cudart.c - DESIGN: the CUDA runtime wrappers, expanded from cudart.def.
 *
 * Every wrapper has one shape: load the real pointer (resolved on first
 * use), load tp_hot, and if it is zero tail-call the real function.  Only
 * while a window records or a step signal counts calls does it take the
 * clock, call, fill a record and publish it (collector/core.h).  The
 * runtime's own error code is returned when the real function is missing.
 * Registration calls feed the kernel-name table and never activate.
 */
#include "wrap.h"
#include "../collector/apis.h"
#include "../collector/core.h"
#include "../collector/kernels.h"
#include "../collector/memtrack.h"

#include <cuda_runtime_api.h>
#include <string.h>

#define TP_MISSING cudaErrorSharedObjectSymbolNotFound

static inline void tp_fill_launch(struct tp_record *r, uint64_t func, int kind, dim3 g, dim3 b,
                                  size_t smem, const void *stream)
{
    r->kind = TP_REC_LAUNCH;
    r->u.launch.func = func;
    r->u.launch.func_kind = (uint8_t)kind;
    r->u.launch.grid_x = g.x;
    r->u.launch.grid_y = (uint16_t)g.y;
    r->u.launch.grid_z = (uint16_t)g.z;
    r->u.launch.block_x = (uint16_t)b.x;
    r->u.launch.block_y = (uint16_t)b.y;
    r->u.launch.block_z = (uint16_t)b.z;
    r->u.launch.smem = (uint32_t)smem;
    r->u.launch.stream = (uint64_t)(uintptr_t)stream;
}

static inline void tp_fill_copy(struct tp_record *r, const void *dst, const void *src, size_t n,
                                int kind, const void *stream)
{
    r->u.api.dst = (uint64_t)(uintptr_t)dst;
    r->u.api.src = (uint64_t)(uintptr_t)src;
    r->u.api.bytes = n;
    r->u.api.copy_kind = (uint32_t)kind;
    r->u.api.stream = (uint64_t)(uintptr_t)stream;
}

/* Record expressions of cudart.def: each sets the launch identity used by
 * step signals ("tp_func", "tp_fkind") and fills "tp_r" when it is not NULL. */
#define TP_R_LAUNCH(f, kind, g, b, sm, s) \
    tp_func = (uint64_t)(uintptr_t)(f); tp_fkind = (kind); \
    if (tp_r) tp_fill_launch(tp_r, tp_func, tp_fkind, g, b, sm, s)
#define TP_R_LAUNCH_CFG(f, cfg) \
    tp_func = (uint64_t)(uintptr_t)(f); tp_fkind = TP_FUNC_STUB; \
    if (tp_r && cfg) tp_fill_launch(tp_r, tp_func, tp_fkind, (cfg)->gridDim, (cfg)->blockDim, (cfg)->dynamicSmemBytes, (cfg)->stream)
#define TP_R_GRAPH(e, s) \
    if (tp_r) { tp_r->kind = TP_REC_LAUNCH; tp_r->u.launch.func = (uint64_t)(uintptr_t)(e); \
             tp_r->u.launch.func_kind = TP_FUNC_GRAPH; tp_r->u.launch.stream = (uint64_t)(uintptr_t)(s); }
#define TP_R_COPY(d, s, n, k, st) if (tp_r) tp_fill_copy(tp_r, d, s, n, k, st)
#define TP_R_SET(d, v, n, st)     if (tp_r) tp_fill_copy(tp_r, d, (const void *)(uintptr_t)(v), n, 0, st)
#define TP_R_SYNC(h)              if (tp_r) tp_r->u.api.stream = (uint64_t)(uintptr_t)(h)
#define TP_R_SYNC_EVENT(h)        TP_R_SYNC(h)
/* Allocations update collector/memtrack.c on every outermost call, recording
 * or not, and fill tp_r->u.mem when a window records. */
#define TP_R_ALLOC(p, n, cls) \
    tp_mem_alloc_at(tp_r, cls, tp_rc == cudaSuccess && (p) ? (uint64_t)(uintptr_t)*(p) : 0, n, tp_rc == cudaSuccess)
#define TP_R_ALLOC3D(pp, e) \
    tp_mem_alloc_at(tp_r, TP_MEM_DEVICE, tp_rc == cudaSuccess && (pp) ? (uint64_t)(uintptr_t)(pp)->ptr : 0, \
                    tp_rc == cudaSuccess && (pp) ? (uint64_t)(pp)->pitch * (e).height * (e).depth \
                                                 : (uint64_t)(e).width * (e).height * (e).depth, \
                    tp_rc == cudaSuccess)
#define TP_R_FREE(p, cls)         tp_mem_free_at(tp_r, cls, (uint64_t)(uintptr_t)(p), 0, tp_rc == cudaSuccess)
#define TP_R_NONE                 (void)tp_r

/* bytes of a pitched allocation: pitch x height once known, else asked */
#define TP_PITCHED(pitch, w, h) \
    (tp_rc == cudaSuccess && (pitch) ? (uint64_t)*(pitch) * (h) : (uint64_t)(w) * (h))

#define TP_MEMLINE_TP_R_LAUNCH(...)     0
#define TP_MEMLINE_TP_R_LAUNCH_CFG(...) 0
#define TP_MEMLINE_TP_R_GRAPH(...)      0
#define TP_MEMLINE_TP_R_COPY(...)       0
#define TP_MEMLINE_TP_R_SET(...)        0
#define TP_MEMLINE_TP_R_SYNC(...)       0
#define TP_MEMLINE_TP_R_SYNC_EVENT(...) 0
#define TP_MEMLINE_TP_R_ALLOC(...)      1
#define TP_MEMLINE_TP_R_ALLOC3D(...)    1
#define TP_MEMLINE_TP_R_FREE(...)       1
#define TP_MEMLINE_TP_R_NONE            0

#define TP_FN(ret, name, params, args, cbid, rec) \
    TP_WRAP_GATED(TP_MEMLINE_##rec, ret, name, params, args, TP_MISSING, (void)0, (void)0, \
                  tp_call_begin, rec)
#include "../collector/apis/cudart.def"
#undef TP_FN

/* ---- registration: names for launches; never activates ------------------ */

typedef void (*tp_register_fn)(void **, const char *, char *, const char *, int,
                               uint3 *, uint3 *, dim3 *, dim3 *, int *);
typedef cudaError_t (*tp_getkernel_fn)(cudaKernel_t *, const void *);

TP_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid,
                                      uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    TP_REAL(tp_register_fn, __cudaRegisterFunction, );
    real(fatCubinHandle, hostFun, deviceFun, deviceName, thread_limit, tid, bid, bDim, gDim, wSize);
    /* always: registration can precede our constructor and its configuration,
     * and the table is invisible to the program */
    tp_kernels_register(hostFun, deviceFun ? deviceFun : deviceName);
}

TP_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *stub)
{
    TP_REAL(tp_getkernel_fn, __cudaGetKernel, TP_MISSING);
    cudaError_t rc = real(kernel, stub);
    if (rc == cudaSuccess && kernel)
        tp_kernels_alias(*kernel, stub);
    return rc;
}
