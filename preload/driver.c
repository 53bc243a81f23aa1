/*
 * driver.c - DESIGN: the CUDA driver wrappers, expanded from cuda.def.
 *
 * Each cuda.def line gives two kinds of wrapper with the runtime wrappers'
 * shape (one load of tp_hot, then a tail call outside windows):
 *  - the exported one, for programs linked with -lcuda and dlsym(RTLD_DEFAULT);
 *  - TP_DRV_SLOTS private slot wrappers, each bound by procaddr.c to the one
 *    real pointer a cuGetProcAddress or dlsym(libcuda) lookup returned, so
 *    that a wrapper always calls exactly the function the caller was given.
 * A driver call made inside a runtime wrapper is folded into the runtime
 * record by tp_depth (collector/wrap/core.h); one made inside a library call is
 * recorded on its own, inside the library call's span.  The name-capture calls (cuLibraryGetKernel,
 * cuModuleGetFunction, cuKernelGetFunction) feed collector/record/kernels.c and never
 * activate, like __cudaRegisterFunction in cudart.c.
 */
#include "driver.h"
#include "wrap.h"
#include "collector/record/apis.h"
#include "collector/wrap/core.h"
#include "collector/record/kernels.h"
#include "collector/wrap/memtrack_api.h"

#include <cuda.h>

#define TP_MISSING CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND

static inline void tp_dfill_launch(struct tp_record *r, uint64_t func, unsigned gx, unsigned gy,
                                   unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                   unsigned smem, CUstream s)
{
    r->kind = TP_REC_LAUNCH;
    r->u.launch.func = func;
    r->u.launch.func_kind = TP_FUNC_DRIVER;
    r->u.launch.grid_x = gx;
    r->u.launch.grid_y = (uint16_t)gy;
    r->u.launch.grid_z = (uint16_t)gz;
    r->u.launch.block_x = (uint16_t)bx;
    r->u.launch.block_y = (uint16_t)by;
    r->u.launch.block_z = (uint16_t)bz;
    r->u.launch.smem = smem;
    r->u.launch.stream = (uint64_t)(uintptr_t)s;
}

static inline void tp_dfill_api(struct tp_record *r, uint64_t dst, uint64_t src, uint64_t n,
                                int kind, uint64_t stream)
{
    r->u.api.dst = dst;
    r->u.api.src = src;
    r->u.api.bytes = n;
    r->u.api.copy_kind = (uint32_t)kind;
    r->u.api.stream = stream;
}

#define TP_U64(x) ((uint64_t)(uintptr_t)(x))

/* Record expressions of cuda.def (see there). */
#define TP_R_DLAUNCH(f, gx, gy, gz, bx, by, bz, sm, s) \
    tp_func = TP_U64(f); tp_fkind = TP_FUNC_DRIVER; \
    if (tp_r) tp_dfill_launch(tp_r, tp_func, gx, gy, gz, bx, by, bz, sm, s)
#define TP_R_DLAUNCH_CFG(f, c) \
    tp_func = TP_U64(f); tp_fkind = TP_FUNC_DRIVER; \
    if (tp_r && (c)) tp_dfill_launch(tp_r, tp_func, (c)->gridDimX, (c)->gridDimY, (c)->gridDimZ, \
                                     (c)->blockDimX, (c)->blockDimY, (c)->blockDimZ, (c)->sharedMemBytes, (c)->hStream)
#define TP_R_GRAPH(e, s) \
    if (tp_r) { tp_r->kind = TP_REC_LAUNCH; tp_r->u.launch.func = TP_U64(e); \
                tp_r->u.launch.func_kind = TP_FUNC_GRAPH; tp_r->u.launch.stream = TP_U64(s); }
#define TP_R_COPY(d, s, n, k, st) if (tp_r) tp_dfill_api(tp_r, TP_U64(d), TP_U64(s), n, k, TP_U64(st))
#define TP_R_SET(d, v, n, st)     if (tp_r) tp_dfill_api(tp_r, TP_U64(d), (uint64_t)(v), n, 0, TP_U64(st))
#define TP_R_SYNC(h)              if (tp_r) tp_r->u.api.stream = TP_U64(h)
#define TP_R_SYNC_EVENT(h)        TP_R_SYNC(h)
#define TP_R_STREAM(h)            TP_R_SYNC(h)
#define TP_R_ALLOC(p, n, cls) \
    tp_mem_alloc_at(tp_r, &tp_c, cls, tp_rc == CUDA_SUCCESS && (p) ? TP_U64(*(p)) : 0, n, tp_rc == CUDA_SUCCESS, \
                    tp_rc == CUDA_ERROR_OUT_OF_MEMORY)
#define TP_R_FREE(p, cls)         tp_mem_free_at(tp_r, cls, TP_U64(p), 0, tp_rc == CUDA_SUCCESS)
#define TP_R_VMM_CREATE(h, n, prop) \
    tp_vmm_create(tp_r, &tp_c, tp_rc == CUDA_SUCCESS && (h) ? (uint64_t)*(h) : 0, n, prop, tp_rc == CUDA_SUCCESS, \
                  tp_rc == CUDA_ERROR_OUT_OF_MEMORY)
#define TP_R_VMM_RELEASE(h)       tp_mem_free_at(tp_r, TP_MEM_DEVICE, (uint64_t)(h), 1, tp_rc == CUDA_SUCCESS)
#define TP_PITCHED(pitch, w, h) \
    (tp_rc == CUDA_SUCCESS && (pitch) ? (uint64_t)*(pitch) * (h) : (uint64_t)(w) * (h))
#define TP_R_MAP(p, n, h)         if (tp_r) tp_dfill_api(tp_r, TP_U64(p), TP_U64(h), n, 0, 0)
#define TP_R_NONE                 (void)tp_r

/* Copies described by a CUDA_MEMCPY2D, CUDA_MEMCPY3D or CUDA_MEMCPY3D_PEER
 * (the same field names): each operand is host, device, array or unified
 * memory (CUmemorytype); the width is in bytes, arrays included. */
static inline uint64_t tp_cp_addr(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray array)
{
    return t == CU_MEMORYTYPE_HOST ? TP_U64(host) : t == CU_MEMORYTYPE_ARRAY ? TP_U64(array) : (uint64_t)dev;
}

/* As an enum cudaMemcpyKind: arrays are device memory; unified memory (or
 * anything unknown) is cudaMemcpyDefault, the runtime's "inferred". */
static inline int tp_cp_kind(CUmemorytype src, CUmemorytype dst)
{
    int sh = src == CU_MEMORYTYPE_HOST, dh = dst == CU_MEMORYTYPE_HOST;
    int sd = src == CU_MEMORYTYPE_DEVICE || src == CU_MEMORYTYPE_ARRAY;
    int dd = dst == CU_MEMORYTYPE_DEVICE || dst == CU_MEMORYTYPE_ARRAY;
    return sh && dh ? 0 : sh && dd ? 1 : sd && dh ? 2 : sd && dd ? 3 : 4;
}

#define TP_CP_DST(p) ((p) ? tp_cp_addr((p)->dstMemoryType, (p)->dstHost, (p)->dstDevice, (p)->dstArray) : 0)
#define TP_CP_SRC(p) ((p) ? tp_cp_addr((p)->srcMemoryType, (p)->srcHost, (p)->srcDevice, (p)->srcArray) : 0)
#define TP_CP_KIND(p) ((p) ? tp_cp_kind((p)->srcMemoryType, (p)->dstMemoryType) : 4)
#define TP_CP_BYTES2D(p) ((p) ? (uint64_t)(p)->WidthInBytes * (p)->Height : 0)
#define TP_CP_BYTES3D(p) ((p) ? (uint64_t)(p)->WidthInBytes * (p)->Height * (p)->Depth : 0)

/* cuMemCreate: physical memory, counted by handle on the device (or host)
 * the properties name. */
static inline void tp_vmm_create(struct tp_record *r, const struct tp_call *c, uint64_t h, uint64_t n,
                                 const CUmemAllocationProp *prop, int ok, int oom)
{
    if (!atomic_load_explicit(&tp_mem_on, memory_order_relaxed)) {
        tp_mem_untracked(r, TP_MEM_DEVICE, h, n, ok);
        return;
    }
    int host = prop && prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE &&
               prop->location.type != CU_MEM_LOCATION_TYPE_INVALID;
    int dev = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id
                                                                         : tp_mem_current_device();
    tp_mem_alloc(r, host ? TP_MEM_HOST : TP_MEM_DEVICE, host ? -1 : dev, h, n, 1, ok, tp_mem_from_call(c, oom));
}

/* TP_DRV_SLOT - slot wrapper "k" of "name": the exported wrapper's shape,
 * with the real function bound at lookup time (never NULL once handed out):
 * tp_slot_<name>_<k> is the entry stub (preload/wrap.h TP_ASM_STUB), hidden,
 * or an alias of the C wrapper tp_cslot_<name>_<k>. */
#define TP_DRV_SLOT(gate, freg, ret, name, params, args, rec, k)                         \
    TP_WRAP_SLOW(tp_sslow_##name##_##k, ret, name, params, args, tp_sreal_##name[k],  \
                 TP_BEGIN(gate, tp_call_begin), rec)                                  \
    static __attribute__((used, noinline)) ret tp_cslot_##name##_##k params           \
    {                                                                                 \
        tp_fn_##name real = __atomic_load_n(&tp_sreal_##name[k], __ATOMIC_ACQUIRE);   \
        if (TP_BLOCKING(name) &&                                                      \
            __builtin_expect(atomic_load_explicit(&tp_inflight_on, memory_order_relaxed), 0)) { \
            const uint16_t tp_api = TP_API_##name;                                    \
            (void)tp_api;                                                             \
            struct tp_inflight *tp_in = TP_BLOCK_EXPR(name);                          \
            ret tp_rc = TP_PASS(gate) ? real args : tp_sslow_##name##_##k args;       \
            tp_inflight_end(tp_in);                                                   \
            return tp_rc;                                                             \
        }                                                                             \
        uint32_t tp_h = tp_hot_load();                                                \
        if (__builtin_expect(TP_PASS_H(gate, tp_h), 1))                               \
            return real args;                                                         \
        if (TP_COUNTS(gate, tp_h, tp_func_##name args))                               \
            return real args;                                                         \
        TP_MEM_SITE(gate);                                                            \
        return tp_sslow_##name##_##k args;                                            \
    }                                                                                 \
    TP_IF(TP_STUBBED(gate, name))(                                                    \
        TP_ASM_STUB("tp_slot_" #name "_" #k, ".hidden tp_slot_" #name "_" #k,         \
                    "tp_sreal_" #name "+" #k "*8", "tp_cslot_" #name "_" #k, freg)    \
        extern __typeof__(tp_cslot_##name##_##k) tp_slot_##name##_##k                 \
            __attribute__((visibility("hidden")));,                                   \
        static __typeof__(tp_cslot_##name##_##k) tp_slot_##name##_##k                 \
            __attribute__((alias("tp_cslot_" #name "_" #k)));)

/* Blocking calls: what their thread's in-flight slot holds (preload/wrap.h
 * TP_BLOCK_<name>), in both the exported and the lookup-time wrappers. */
#define TP_BLOCK_cuCtxSynchronize             ~, 1, TP_IN_CALL(0, 0)
#define TP_BLOCK_cuCtxSynchronize_v2          ~, 1, TP_IN_CALL(0, 0)
#define TP_BLOCK_cuStreamSynchronize          ~, 1, TP_IN_CALL(0, s)
#define TP_BLOCK_cuStreamSynchronize_ptsz     ~, 1, TP_IN_CALL(0, s)
#define TP_BLOCK_cuEventSynchronize           ~, 1, TP_IN_CALL(0, e)
#define TP_BLOCK_cuMemcpy                     ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpy_ptds                ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpyHtoD_v2              ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpyHtoD_v2_ptds         ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpyDtoH_v2              ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpyDtoH_v2_ptds         ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpyDtoD_v2              ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpyDtoD_v2_ptds         ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpyPeer                 ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpyPeer_ptds            ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cuMemcpy2D_v2                ~, 1, TP_IN_CALL(TP_CP_BYTES2D(p), 0)
#define TP_BLOCK_cuMemcpy2D_v2_ptds           ~, 1, TP_IN_CALL(TP_CP_BYTES2D(p), 0)
#define TP_BLOCK_cuMemcpy2DUnaligned_v2       ~, 1, TP_IN_CALL(TP_CP_BYTES2D(p), 0)
#define TP_BLOCK_cuMemcpy2DUnaligned_v2_ptds  ~, 1, TP_IN_CALL(TP_CP_BYTES2D(p), 0)
#define TP_BLOCK_cuMemcpy3D_v2                ~, 1, TP_IN_CALL(TP_CP_BYTES3D(p), 0)
#define TP_BLOCK_cuMemcpy3D_v2_ptds           ~, 1, TP_IN_CALL(TP_CP_BYTES3D(p), 0)
#define TP_BLOCK_cuMemcpy3DPeer               ~, 1, TP_IN_CALL(TP_CP_BYTES3D(p), 0)
#define TP_BLOCK_cuMemcpy3DPeer_ptds          ~, 1, TP_IN_CALL(TP_CP_BYTES3D(p), 0)
#define TP_BLOCK_cuMemFree_v2                 ~, 1, TP_IN_CALL(0, p)
#define TP_BLOCK_cuMemFreeHost                ~, 1, TP_IN_CALL(0, p)

#define TP_DRV_FN(ret, name, params, args, cbid, gate, rec, request, version)         \
    TP_DRV_FN_F(TP_FREG_##gate(TP_FUNCREG_##rec), ret, name, params, args, gate, rec)
#define TP_DRV_FN_F(freg, ret, name, params, args, gate, rec)                         \
    TP_WRAP_GATED_F(TP_GATE_##gate, freg, ret, name, params, args, TP_MISSING, (void)0, (void)0, \
                    tp_call_begin, rec)                                               \
    static __attribute__((used)) tp_fn_##name tp_sreal_##name[TP_DRV_SLOTS];          \
    static void tp_bind_##name(int k, void *real)                                     \
    {                                                                                 \
        __atomic_store_n(&tp_sreal_##name[k], (tp_fn_##name)real, __ATOMIC_RELEASE);  \
    }                                                                                 \
    TP_DRV_SLOT(TP_GATE_##gate, freg, ret, name, params, args, rec, 0)                 \
    TP_DRV_SLOT(TP_GATE_##gate, freg, ret, name, params, args, rec, 1)                 \
    TP_DRV_SLOT(TP_GATE_##gate, freg, ret, name, params, args, rec, 2)                 \
    TP_DRV_SLOT(TP_GATE_##gate, freg, ret, name, params, args, rec, 3)
#include "collector/record/apis/cuda.def"
#undef TP_DRV_FN

_Static_assert(TP_DRV_SLOTS == 4, "TP_DRV_FN and TP_DRV_HOOK define four slots");

/* ---- name capture: kernel handles to names; never activates ------------- */

typedef CUresult (*tp_fn_cuLibraryGetKernel)(CUkernel *, CUlibrary, const char *);
typedef CUresult (*tp_fn_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
typedef CUresult (*tp_fn_cuKernelGetFunction)(CUfunction *, CUkernel);

/* The driver's name string need not outlive the call: the table copies it. */
static CUresult tp_do_cuLibraryGetKernel(tp_fn_cuLibraryGetKernel real, CUkernel *k, CUlibrary lib,
                                         const char *name)
{
    CUresult rc = real(k, lib, name);
    if (rc == CUDA_SUCCESS && k && *k && name)
        tp_kernels_register_copy(*k, name);
    return rc;
}

static CUresult tp_do_cuModuleGetFunction(tp_fn_cuModuleGetFunction real, CUfunction *f, CUmodule mod,
                                          const char *name)
{
    CUresult rc = real(f, mod, name);
    if (rc == CUDA_SUCCESS && f && *f && name)
        tp_kernels_register_copy(*f, name);
    return rc;
}

static CUresult tp_do_cuKernelGetFunction(tp_fn_cuKernelGetFunction real, CUfunction *f, CUkernel k)
{
    CUresult rc = real(f, k);
    if (rc == CUDA_SUCCESS && f && *f)
        tp_kernels_alias(*f, k);
    return rc;
}

TP_DRV_HOOK(cuLibraryGetKernel, (CUkernel *k, CUlibrary lib, const char *name), (k, lib, name))
TP_DRV_HOOK(cuModuleGetFunction, (CUfunction *f, CUmodule mod, const char *name), (f, mod, name))
TP_DRV_HOOK(cuKernelGetFunction, (CUfunction *f, CUkernel k), (f, k))

/* ---- the table procaddr.c binds slots from ------------------------------- */

/* Names are stringified where they appear in cuda.def: cuda.h defines some
 * request names as macros (cuMemAlloc -> cuMemAlloc_v2). */
const struct tp_drv_entry tp_drv_entries[] = {
#define TP_DRV_FN(ret, name, params, args, cbid, gate, rec, request, version) \
    TP_DRV_ENTRY(name, #name, #request, version)
#include "collector/record/apis/cuda.def"
#undef TP_DRV_FN
    TP_DRV_ENTRY(cuLibraryGetKernel, "cuLibraryGetKernel", "cuLibraryGetKernel", 12000)
    TP_DRV_ENTRY(cuModuleGetFunction, "cuModuleGetFunction", "cuModuleGetFunction", 2000)
    TP_DRV_ENTRY(cuKernelGetFunction, "cuKernelGetFunction", "cuKernelGetFunction", 12000)
};

const unsigned tp_drv_n_entries = sizeof tp_drv_entries / sizeof tp_drv_entries[0];
