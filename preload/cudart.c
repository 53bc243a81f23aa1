/*
 * cudart.c - DESIGN: the CUDA runtime wrappers, expanded from cudart.def.
 *
 * Every wrapper has one shape: load the real pointer (resolved on first
 * use), load tp_hot, and if it is zero tail-call the real function.  Only
 * while a window records or a step signal counts calls does it take the
 * clock, call, fill a record and publish it (collector/wrap/core.h).  The
 * runtime's own error code is returned when the real function is missing.
 * Registration calls (and cudaLibraryGetKernel) feed the kernel-name table
 * and never activate.
 */
/* The batch copies changed ABI in CUDA 13 (cudart.def): their wrappers
 * take libcudart.so.12's longer argument lists, so the header's CUDA 13
 * declarations are kept out of the way under other names.  For a CUDA 13
 * caller of cudaMemcpyBatchAsync the ninth argument is a stack slot above
 * its eight, in its own frame: read, passed on unused, and (by the fast
 * path's tail call, which stores its stack arguments back where they came
 * from) rewritten with the value it held. */
#define cudaMemcpyBatchAsync tp_cuda13_cudaMemcpyBatchAsync
#define cudaMemcpy3DBatchAsync tp_cuda13_cudaMemcpy3DBatchAsync
#include <cuda_runtime_api.h>
#undef cudaMemcpyBatchAsync
#undef cudaMemcpy3DBatchAsync

#include "wrap.h"
#include "collector/record/apis.h"
#include "collector/wrap/core.h"
#include "collector/record/kernels.h"
#include "collector/common/loader.h"
#include "collector/wrap/memtrack_api.h"

#include <cuda.h>
#include <dlfcn.h>
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
/* Allocations update collector/modules/memtrack.c on every outermost call, recording
 * or not, and fill tp_r->u.mem when a window records. */
#define TP_R_ALLOC(p, n, cls) \
    tp_mem_alloc_at(tp_r, &tp_c, cls, tp_rc == cudaSuccess && (p) ? (uint64_t)(uintptr_t)*(p) : 0, n, \
                    tp_rc == cudaSuccess, tp_rc == cudaErrorMemoryAllocation)
#define TP_R_ALLOC3D(pp, e) \
    tp_mem_alloc_at(tp_r, &tp_c, TP_MEM_DEVICE, tp_rc == cudaSuccess && (pp) ? (uint64_t)(uintptr_t)(pp)->ptr : 0, \
                    tp_rc == cudaSuccess && (pp) ? (uint64_t)(pp)->pitch * (e).height * (e).depth \
                                                 : (uint64_t)(e).width * (e).height * (e).depth, \
                    tp_rc == cudaSuccess, tp_rc == cudaErrorMemoryAllocation)
#define TP_R_FREE(p, cls)         tp_mem_free_at(tp_r, cls, (uint64_t)(uintptr_t)(p), 0, tp_rc == cudaSuccess)
#define TP_R_NONE                 (void)tp_r

#define TP_R_STREAM(h)            TP_R_SYNC(h)
#define TP_R_MAP(p, n, h)         if (tp_r) tp_fill_copy(tp_r, p, (const void *)(uintptr_t)(h), n, 0, 0)

/* TP_AT(p) - "where the address lands" for a call given the address p
 * itself (cudaHostRegister): TP_R_ALLOC reads *TP_AT(p) == p. */
static inline void *const *tp_at(void *const *p)
{
    return p;
}
#define TP_AT(p) tp_at(&(p))

/* ---- copies described by a struct or a batch ---------------------------- */

/* Bytes of one element of CUDA array "a" (a cudaArray_t is a CUarray:
 * cudaMemcpy3DOperand says so), from the driver's descriptor, a
 * side-effect-free query; 0 if unknown (no driver, or a
 * format whose elements are not whole bytes per channel). */
typedef CUresult (*tp_arraydesc_fn)(CUDA_ARRAY3D_DESCRIPTOR *, CUarray);
static uint64_t tp_array_elem(const void *a)
{
    static _Atomic(tp_arraydesc_fn) desc_fn;
    tp_arraydesc_fn fn = atomic_load_explicit(&desc_fn, memory_order_acquire);
    if (!fn) {
        static const char *const name[] = { "cuArray3DGetDescriptor_v2" };
        void *f = NULL;
        if (tp_driver_syms(name, &f, 1) != 0 || !f)
            return 0;
        fn = (tp_arraydesc_fn)f;
        atomic_store_explicit(&desc_fn, fn, memory_order_release);
    }
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof d);
    if (!a || fn(&d, (CUarray)(uintptr_t)a) != CUDA_SUCCESS)
        return 0;
    switch (d.Format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8:
        return d.NumChannels;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
        return 2u * d.NumChannels;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
        return 4u * d.NumChannels;
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1: return 1;
    case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1: return 2;
    case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2: return 4;
    case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4: return 8;
    default:
        return 0;
    }
}

/* A 3D copy's extent is in bytes between pointers, in elements of the
 * array when one side is an array (cudaMemcpy3D's documentation). */
static inline uint64_t tp_extent_bytes(struct cudaExtent e, const void *src_array, const void *dst_array)
{
    uint64_t n = (uint64_t)e.width * e.height * e.depth;
    if (!src_array && !dst_array)
        return n;
    return n * tp_array_elem(src_array ? src_array : dst_array);
}

#define TP_3D_DST(p) ((p) ? ((p)->dstArray ? (const void *)(p)->dstArray : (p)->dstPtr.ptr) : NULL)
#define TP_3D_SRC(p) ((p) ? ((p)->srcArray ? (const void *)(p)->srcArray : (p)->srcPtr.ptr) : NULL)

static uint64_t tp_copy3d_bytes(const struct cudaMemcpy3DParms *p)
{
    return p ? tp_extent_bytes(p->extent, p->srcArray, p->dstArray) : 0;
}

static uint64_t tp_copy3d_peer_bytes(const struct cudaMemcpy3DPeerParms *p)
{
    return p ? tp_extent_bytes(p->extent, p->srcArray, p->dstArray) : 0;
}

/* cudaMemcpyBatchAsync: the bytes of all its copies (saturating). */
static uint64_t tp_batch_bytes(const size_t *sizes, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; sizes && i < n; i++)
        sum = sum + sizes[i] < sum ? UINT64_MAX : sum + sizes[i];
    return sum;
}

static const void *tp_operand_addr(const struct cudaMemcpy3DOperand *o)
{
    return o->type == cudaMemcpyOperandTypeArray ? (const void *)o->op.array.array : o->op.ptr.ptr;
}

/* cudaMemcpy3DBatchAsync: the first copy's destination (dst 1) or source. */
static const void *tp_batch3d_addr(const struct cudaMemcpy3DBatchOp *ops, size_t n, int dst)
{
    return n && ops ? tp_operand_addr(dst ? &ops[0].dst : &ops[0].src) : NULL;
}

/* ... and the bytes of all its copies: extents in elements, of 1 byte
 * between pointers, of the array's element otherwise. */
static uint64_t tp_batch3d_bytes(const struct cudaMemcpy3DBatchOp *ops, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; ops && i < n; i++) {
        const struct cudaMemcpy3DOperand *s = &ops[i].src, *d = &ops[i].dst;
        uint64_t b = tp_extent_bytes(ops[i].extent,
                                     s->type == cudaMemcpyOperandTypeArray ? s->op.array.array : NULL,
                                     d->type == cudaMemcpyOperandTypeArray ? d->op.array.array : NULL);
        sum = sum + b < sum ? UINT64_MAX : sum + b;
    }
    return sum;
}

/* 1 if function "fn" is libcudart.so.12's (the ABI before CUDA 13). */
static int tp_cudart12(void *fn)
{
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_fname)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    return strncmp(base ? base + 1 : info.dli_fname, "libcudart.so.12", 15) == 0;
}

/* TP_ABI12(real) - in a record expression: 1 if this wrapper's real
 * function has libcudart.so.12's ABI, found once per wrapper. */
#define TP_ABI12(real) ({                                                            \
        static int tp_abi_;                                                          \
        int a_ = __atomic_load_n(&tp_abi_, __ATOMIC_RELAXED);                         \
        if (!a_) {                                                                   \
            a_ = tp_cudart12((void *)(real)) ? 12 : 13;                              \
            __atomic_store_n(&tp_abi_, a_, __ATOMIC_RELAXED);                        \
        }                                                                            \
        a_ == 12; })

/* bytes of a pitched allocation: pitch x height once known, else asked */
#define TP_PITCHED(pitch, w, h) \
    (tp_rc == cudaSuccess && (pitch) ? (uint64_t)*(pitch) * (h) : (uint64_t)(w) * (h))

/* Blocking calls: what their thread's in-flight slot holds (preload/wrap.h
 * TP_BLOCK_<name>; the hang doctor reads it): synchronization, the copies
 * that return once done, and the frees that wait for the device. */
#define TP_BLOCK_cudaDeviceSynchronize      ~, 1, TP_IN_CALL(0, 0)
#define TP_BLOCK_cudaStreamSynchronize      ~, 1, TP_IN_CALL(0, s)
#define TP_BLOCK_cudaStreamSynchronize_ptsz ~, 1, TP_IN_CALL(0, s)
#define TP_BLOCK_cudaEventSynchronize       ~, 1, TP_IN_CALL(0, e)
#define TP_BLOCK_cudaMemcpy                 ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cudaMemcpy_ptds            ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cudaMemcpy2D               ~, 1, TP_IN_CALL((uint64_t)w * h, 0)
#define TP_BLOCK_cudaMemcpyPeer             ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cudaMemcpyToSymbol         ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cudaMemcpyFromSymbol       ~, 1, TP_IN_CALL(n, 0)
#define TP_BLOCK_cudaMemcpy3D               ~, 1, TP_IN_CALL(0, 0)
#define TP_BLOCK_cudaMemcpy3D_ptds          ~, 1, TP_IN_CALL(0, 0)
#define TP_BLOCK_cudaMemcpy3DPeer           ~, 1, TP_IN_CALL(0, 0)
#define TP_BLOCK_cudaMemcpy3DPeer_ptds      ~, 1, TP_IN_CALL(0, 0)
#define TP_BLOCK_cudaFree                   ~, 1, TP_IN_CALL(0, p)
#define TP_BLOCK_cudaFreeHost               ~, 1, TP_IN_CALL(0, p)

#define TP_FN(ret, name, params, args, cbid, gate, rec) \
    TP_WRAP_GATED_F(TP_GATE_##gate, TP_FREG_##gate(TP_FUNCREG_##rec), ret, name, params, args, \
                    TP_MISSING, (void)0, (void)0, tp_call_begin, rec)
#include "collector/record/apis/cudart.def"
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

/* A kernel of a library loaded at run time (cudaLibraryLoadData): the
 * cudaKernel_t goes to cudaLaunchKernel as its "func", so it is named here,
 * as the driver's cuLibraryGetKernel is (the name need not outlive the
 * call: the table copies it). */
typedef cudaError_t (*tp_libkernel_fn)(cudaKernel_t *, cudaLibrary_t, const char *);

TP_EXPORT cudaError_t cudaLibraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t lib, const char *name)
{
    TP_REAL(tp_libkernel_fn, cudaLibraryGetKernel, TP_MISSING);
    cudaError_t rc = real(kernel, lib, name);
    if (rc == cudaSuccess && kernel && *kernel && name)
        tp_kernels_register_copy(*kernel, name);
    return rc;
}
