/*
 * cupti.c - the device side through CUPTI's Activity API, loaded at run time.
 *
 * DESIGN
 * Loading: a libcupti already in the process (dl_iterate_phdr) is reused with
 * RTLD_NOLOAD, never a second copy; else TRAINPROF_CUPTI_PATH, the folder of
 * the loaded libcudart/libcuda, then the default search path.  Every entry
 * point comes from dlsym into one table whose slots are typed from the real
 * prototypes (__typeof__), so a signature cannot drift from the headers.
 * Subscription (cuptiSubscribe_v2) failing, a CUPTI older than 13 or a
 * missing entry point make CUPTI "unavailable": one line, never retried.
 *
 * Buffers: 4 MiB each from fresh anonymous mappings (zero pages, so CUPTI is
 * told ZEROED_OUT_ACTIVITY_BUFFER = 1 and never zeroes on application
 * threads).  16 are mapped at the first start; "requested" (any thread) takes
 * one from a free bitmap with a CAS, maps a new one up to 32, then recycles
 * the oldest completed-but-undecoded buffer (its records counted as dropped),
 * then maps more up to 256; it returns NULL only when mmap fails or 256
 * buffers are out (refusing can crash CUPTI < 12.9: Kineto's note).
 * "completed" (a CUPTI thread) pushes (buffer, validSize) on a FIFO under a
 * mutex of ours that is never held across a CUPTI call.  Decoding happens on
 * tp-flush only, in tp_cupti_collect(): FlushAll with no lock of ours held,
 * decode every completed buffer into pending arrays, then zero the buffer
 * with madvise(MADV_DONTNEED) and put it back in the bitmap.
 *
 * Pending arrays (flush thread only, no locks) are bounded: 1 M device
 * records, 2 M API and 2 M external-correlation records; beyond that records
 * are counted as dropped.  tp_cupti_take() moves a window out and discards
 * what is older than the window and was not taken.  Records with a zero start
 * (no timing: CUPTI ran out of device buffer, or a forced flush caught work
 * still running) are dropped and counted: the buffer that carried them is
 * gone, so the record never comes back complete; a zero or early end becomes
 * end = start.
 *
 * Lifecycle (decision 6): kinds are toggled per window only on CUPTI >=
 * 130001 (13.0 GA could deadlock disabling CONCURRENT_KERNEL); the last
 * stop flushes, disables, unsubscribes and calls cuptiFinalize when the
 * driver (libcuda already loaded: never loaded by us) is >= 12.6 and no
 * stream capture may be open; then CUPTI is "finished" for the process.
 */
#include "cupti.h"

#include "clock.h"
#include "config.h"
#include "devprops.h"
#include "loader.h"
#include "intern.h"
#include "kernels.h"
#include "log.h"

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_result.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define TP_CUPTI_MIN_VERSION    130000u
#define TP_CUPTI_TOGGLE_VERSION 130001u  /* 13.0 Update 1: disabling kinds is safe */
#define TP_CUPTI_FINALIZE_CUDA  12060    /* cuptiFinalize with graphs fixed (notes 2.5) */

#define TP_BUF_SIZE   (4u << 20)
#define TP_POOL_INIT  16
#define TP_POOL_SOFT  32
#define TP_POOL_MAX   256
#define TP_POOL_WORDS (TP_POOL_MAX / 64)

#define TP_MAX_REC (1u << 20)
#define TP_MAX_API (2u << 20)
#define TP_MAX_EXT (2u << 20)

/* ---- the loaded library ------------------------------------------------- */

/* X(name, required) */
#define TP_CUPTI_FNS(X) \
    X(cuptiGetVersion, 1) \
    X(cuptiSubscribe_v2, 1) \
    X(cuptiUnsubscribe, 1) \
    X(cuptiActivityRegisterCallbacks, 1) \
    X(cuptiActivityRegisterTimestampCallback, 1) \
    X(cuptiActivitySetAttribute, 1) \
    X(cuptiActivityEnable, 1) \
    X(cuptiActivityDisable, 1) \
    X(cuptiActivityFlushAll, 1) \
    X(cuptiActivityGetNextRecord, 1) \
    X(cuptiActivityGetNumDroppedRecords, 1) \
    X(cuptiActivityPushExternalCorrelationId, 1) \
    X(cuptiActivityPopExternalCorrelationId, 1) \
    X(cuptiFinalize, 1) \
    X(cuptiActivityEnableRuntimeApi, 0) \
    X(cuptiActivityEnableDriverApi, 0) \
    X(cuptiGetResultString, 0)

static struct {
#define X(name, req) __typeof__(name) *name;
    TP_CUPTI_FNS(X)
#undef X
} F;

enum { ST_UNTRIED = 0, ST_ACTIVE, ST_UNAVAILABLE, ST_FINISHED, ST_OFF };

static int tp_state;                   /* flush thread */
static uint32_t tp_version;
static char tp_status_text[160] = "not started";
static CUpti_SubscriberHandle tp_subscriber;
static atomic_int tp_kinds_on;          /* read by application threads (ext push/pop) */
static uint64_t tp_kinds_enabled;       /* bit per CUpti_ActivityKind that Enable accepted */
static uint64_t tp_kinds_reported;      /* kinds whose failure was said */
static int tp_rt_trimmed, tp_drv_trimmed;
static int (*tp_capture_check)(void);
static __thread int tp_ext_depth __attribute__((tls_model("initial-exec")));

/* Enabled at start: CONCURRENT_KERNEL, never KERNEL (it serialises kernels). */
static const CUpti_ActivityKind tp_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD,
};

static const char *tp_kind_name(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return "MEMCPY2";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_MEMORY2: return "MEMORY2";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return "EXTERNAL_CORRELATION";
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return "OVERHEAD";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "DRIVER";
    default: return "?";
    }
}

static const char *tp_result_str(CUptiResult r)
{
    const char *s = NULL;
    if (F.cuptiGetResultString && F.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "CUPTI error";
}

/* ---- API cbids we keep (generated from cupti_runtime_cbid.h and
 * cupti_driver_cbid.h of CUDA 13.0: launches, copies, sets, syncs) ------- */

static const uint8_t tp_rt_class[CUPTI_RUNTIME_TRACE_CBID_SIZE] = {
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020] = TP_CB_SYNC,
    [CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020] = TP_CB_SYNC,
    [CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020] = TP_CB_SYNC,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020] = TP_CB_SYNC,
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000] = TP_CB_SYNC,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000] = TP_CB_SET,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000] = TP_CB_GRAPH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000] = TP_CB_GRAPH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v12080] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v12080] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v12080] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000] = TP_CB_LAUNCH,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000] = TP_CB_COPY,
    [CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v13000] = TP_CB_COPY,
};

static const uint8_t tp_drv_class[CUPTI_DRIVER_TRACE_CBID_SIZE] = {
    [CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize] = TP_CB_SYNC,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD8] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD16] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD32] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunch] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize] = TP_CB_SYNC,
    [CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize] = TP_CB_SYNC,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz] = TP_CB_SET,
    [CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz] = TP_CB_SYNC,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch] = TP_CB_GRAPH,
    [CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz] = TP_CB_GRAPH,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz] = TP_CB_LAUNCH,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2_ptsz] = TP_CB_COPY,
    [CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2] = TP_CB_SYNC,
};

int tp_cupti_cb_class(int driver, uint32_t cbid)
{
    if (driver)
        return cbid < CUPTI_DRIVER_TRACE_CBID_SIZE ? tp_drv_class[cbid] : TP_CB_OTHER;
    return cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE ? tp_rt_class[cbid] : TP_CB_OTHER;
}

/* ---- buffer pool ---------------------------------------------------------- */

static uint8_t *_Atomic tp_slot[TP_POOL_MAX];     /* mapping of each slot, NULL if none */
static atomic_uint tp_slots_claimed;               /* slot indexes handed to a mapping */
static _Atomic uint64_t tp_free[TP_POOL_WORDS];    /* bit set: slot free, zeroed */
static _Atomic uint64_t tp_dropped_async;          /* records lost by recycling buffers */
static atomic_int tp_foreign_said;

static pthread_mutex_t tp_done_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uint16_t slot; size_t valid; } tp_done[TP_POOL_MAX];  /* FIFO of completed */
static unsigned tp_done_head, tp_done_n;

static uint8_t *tp_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int tp_pool_init(void)
{
    if (atomic_load(&tp_slots_claimed))
        return 0;
    uint8_t *base = tp_map((size_t)TP_POOL_INIT * TP_BUF_SIZE);
    if (!base)
        return -1;
    for (unsigned i = 0; i < TP_POOL_INIT; i++)
        atomic_store(&tp_slot[i], base + (size_t)i * TP_BUF_SIZE);
    atomic_store(&tp_slots_claimed, TP_POOL_INIT);
    atomic_fetch_or(&tp_free[0], (TP_POOL_INIT >= 64 ? ~0ull : (1ull << TP_POOL_INIT) - 1));
    return 0;
}

static int tp_pool_take_free(void)
{
    for (unsigned w = 0; w < TP_POOL_WORDS; w++) {
        uint64_t m = atomic_load_explicit(&tp_free[w], memory_order_acquire);
        while (m) {
            int b = __builtin_ctzll(m);
            if (atomic_compare_exchange_weak_explicit(&tp_free[w], &m, m & ~(1ull << b),
                                                      memory_order_acq_rel, memory_order_acquire))
                return (int)(w * 64 + (unsigned)b);
        }
    }
    return -1;
}

/* A new slot with a fresh (zero) mapping, while fewer than "limit" exist. */
static int tp_pool_grow(unsigned limit)
{
    unsigned i = atomic_load(&tp_slots_claimed);
    do {
        if (i >= limit)
            return -1;
    } while (!atomic_compare_exchange_weak(&tp_slots_claimed, &i, i + 1));
    uint8_t *p = tp_map(TP_BUF_SIZE);
    if (!p)
        return -1;                      /* the slot stays unmapped */
    atomic_store(&tp_slot[i], p);
    return (int)i;
}

static int tp_slot_of(const uint8_t *buf)
{
    unsigned n = atomic_load(&tp_slots_claimed);
    for (unsigned i = 0; i < n && i < TP_POOL_MAX; i++)
        if (buf && atomic_load_explicit(&tp_slot[i], memory_order_acquire) == buf)
            return (int)i;
    return -1;
}

/* Zero a used buffer (private anonymous pages read back as zero after
 * MADV_DONTNEED, and their memory is returned) and mark it free. */
static void tp_pool_release(int i, int used)
{
    uint8_t *p = atomic_load(&tp_slot[i]);
    if (used && madvise(p, TP_BUF_SIZE, MADV_DONTNEED) != 0)
        memset(p, 0, TP_BUF_SIZE);
    atomic_fetch_or_explicit(&tp_free[i / 64], 1ull << (i % 64), memory_order_release);
}

static int tp_done_pop(size_t *valid)
{
    int slot = -1;
    pthread_mutex_lock(&tp_done_lock);
    if (tp_done_n) {
        slot = tp_done[tp_done_head].slot;
        *valid = tp_done[tp_done_head].valid;
        tp_done_head = (tp_done_head + 1) % TP_POOL_MAX;
        tp_done_n--;
    }
    pthread_mutex_unlock(&tp_done_lock);
    return slot;
}

static void tp_free_overhead(const CUpti_Activity *a)
{
    if (a->kind == CUPTI_ACTIVITY_KIND_OVERHEAD) {
        /* "Client is responsible for freeing this memory using the free
         * function when done" (cupti_activity.h, CUpti_ActivityOverhead3). */
        void *d = ((const CUpti_ActivityOverhead3 *)(const void *)a)->overheadData;
        free(d);
    }
}

static void CUPTIAPI tp_buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0;
    int i = tp_pool_take_free();
    if (i < 0)
        i = tp_pool_grow(TP_POOL_SOFT);
    if (i < 0) {
        size_t valid = 0;
        i = tp_done_pop(&valid);
        if (i >= 0) {
            /* Over the soft cap: sacrifice the oldest undecoded buffer. */
            uint8_t *p = atomic_load(&tp_slot[i]);
            CUpti_Activity *a = NULL;
            uint64_t n = 0;
            while (F.cuptiActivityGetNextRecord(p, valid, &a) == CUPTI_SUCCESS) {
                tp_free_overhead(a);
                n++;
            }
            atomic_fetch_add(&tp_dropped_async, n);
            if (madvise(p, TP_BUF_SIZE, MADV_DONTNEED) != 0)
                memset(p, 0, TP_BUF_SIZE);
        }
    }
    if (i < 0)
        i = tp_pool_grow(TP_POOL_MAX);
    if (i < 0) {
        *buffer = NULL;
        *size = 0;
        return;
    }
    *buffer = atomic_load(&tp_slot[i]);
    *size = TP_BUF_SIZE;
}

static void CUPTIAPI tp_buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    int i = tp_slot_of(buffer);
    if (i < 0) {
        /* Another client re-registered the callbacks: not ours to free. */
        if (!atomic_exchange(&tp_foreign_said, 1))
            TP_WARN("CUPTI returned a buffer trainprof did not hand out; ignored");
        return;
    }
    if (valid == 0) {
        tp_pool_release(i, 1);
        return;
    }
    pthread_mutex_lock(&tp_done_lock);
    unsigned tail = (tp_done_head + tp_done_n) % TP_POOL_MAX;
    tp_done[tail].slot = (uint16_t)i;
    tp_done[tail].valid = valid;
    tp_done_n++;
    pthread_mutex_unlock(&tp_done_lock);
}

/* CUPTI's clock: ours, in ns as its contract asks; records are mapped back
 * to ticks when decoded, so that they compare with host records exactly. */
static uint64_t CUPTIAPI tp_timestamp(void)
{
    return tp_clock_ns();
}

static void CUPTIAPI tp_subscriber_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                      const void *data)
{
    (void)ud;
    (void)d;
    (void)id;
    (void)data;
}

/* ---- pending records (flush thread) -------------------------------------- */

static struct tp_dev_record *tp_rec;
static size_t tp_n_rec, tp_cap_rec;
static struct tp_dev_api *tp_api;
static size_t tp_n_api, tp_cap_api;
static struct tp_dev_ext *tp_ext;
static size_t tp_n_ext, tp_cap_ext;
static uint64_t tp_dropped;             /* since the last take */
static uint64_t tp_overheads;           /* OVERHEAD records seen (counted only) */
static uint32_t tp_max_api_corr;        /* highest API correlation decoded */

/* Room for one more element in a growing array; 0 if at "max". */
static int tp_grow(void **p, size_t *cap, size_t n, size_t elem, size_t max)
{
    if (n < *cap)
        return 1;
    if (n >= max)
        return 0;
    size_t c = *cap ? *cap * 2 : 4096;
    if (c > max)
        c = max;
    void *q = realloc(*p, c * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

static struct tp_dev_record *tp_rec_new(void)
{
    if (!tp_grow((void **)&tp_rec, &tp_cap_rec, tp_n_rec, sizeof *tp_rec, TP_MAX_REC))
        return NULL;
    struct tp_dev_record *r = &tp_rec[tp_n_rec];
    memset(r, 0, sizeof *r);
    return r;
}

/* Kernel names: CUPTI hands the same name pointer for every launch of a
 * function, so demangling and interning happen once per pointer; the length
 * check catches a pointer reused for another name after a module unload. */
#define TP_NAME_CACHE 4096
static struct { const char *p; size_t len; uint32_t id; } tp_names[TP_NAME_CACHE];

static uint32_t tp_kernel_name(const char *name)
{
    if (!name)
        return 0;
    size_t len = strlen(name);
    uintptr_t h = ((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull;
    unsigned i = (unsigned)(h >> 52) % TP_NAME_CACHE;
    if (tp_names[i].p == name && tp_names[i].len == len)
        return tp_names[i].id;
    char buf[TP_INTERN_LEN_MAX + 1];
    tp_demangle(name, buf, sizeof buf);
    uint32_t id = tp_intern(buf, (size_t)-1);
    tp_names[i].p = name;
    tp_names[i].len = len;
    tp_names[i].id = id;
    return id;
}

/* The fields Memcpy6 and MemcpyPtoP4 share by name. */
#define TP_COPY_FIELDS(r, m) do {                                                   \
        (r)->kind = TP_DEV_MEMCPY;                                                 \
        (r)->copy_kind = (m)->copyKind;                                            \
        (r)->src_kind = (m)->srcKind;                                              \
        (r)->dst_kind = (m)->dstKind;                                              \
        (r)->device = (m)->deviceId;                                               \
        (r)->context = (m)->contextId;                                             \
        (r)->stream = (m)->streamId;                                               \
        (r)->correlation = (m)->correlationId;                                     \
        (r)->bytes = (m)->bytes;                                                   \
        (r)->graph_id = (m)->graphId;                                              \
        (r)->graph_node_id = (m)->graphNodeId;                                     \
    } while (0)

/* Start and end of a device record; 0 if it carries no timing. */
static int tp_times(struct tp_dev_record *r, uint64_t start, uint64_t end)
{
    if (start == 0)
        return 0;
    r->start = tp_clock_ns_to_ticks(start);
    r->end = end >= start ? tp_clock_ns_to_ticks(end) : r->start;
    return 1;
}

int tp_cupti_decode(const void *record)
{
    const CUpti_Activity *a = record;
    struct tp_dev_record *r;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = record;
        if (!(r = tp_rec_new()) || !tp_times(r, k->start, k->end))
            break;
        r->kind = TP_DEV_KERNEL;
        r->device = k->deviceId;
        r->context = k->contextId;
        r->stream = k->streamId;
        r->correlation = k->correlationId;
        r->name = tp_kernel_name(k->name);
        r->grid[0] = k->gridX, r->grid[1] = k->gridY, r->grid[2] = k->gridZ;
        r->block[0] = k->blockX, r->block[1] = k->blockY, r->block[2] = k->blockZ;
        r->static_smem = k->staticSharedMemory;
        r->dynamic_smem = k->dynamicSharedMemory;
        r->registers = k->registersPerThread;
        r->graph_id = k->graphId;
        r->graph_node_id = k->graphNodeId;
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = record;
        if (!(r = tp_rec_new()) || !tp_times(r, m->start, m->end))
            break;
        TP_COPY_FIELDS(r, m);
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {   /* peer to peer: read as a copy */
        const CUpti_ActivityMemcpyPtoP4 *m = record;
        if (!(r = tp_rec_new()) || !tp_times(r, m->start, m->end))
            break;
        TP_COPY_FIELDS(r, m);
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = record;
        if (!(r = tp_rec_new()) || !tp_times(r, m->start, m->end))
            break;
        r->kind = TP_DEV_MEMSET;
        r->dst_kind = (uint8_t)m->memoryKind;
        r->device = m->deviceId;
        r->context = m->contextId;
        r->stream = m->streamId;
        r->correlation = m->correlationId;
        r->bytes = m->bytes;
        r->graph_id = m->graphId;
        r->graph_node_id = m->graphNodeId;
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        /* Synchronization2 has no deviceId: device stays 0. */
        const CUpti_ActivitySynchronization2 *s = record;
        if (!(r = tp_rec_new()) || !tp_times(r, s->start, s->end))
            break;
        r->kind = TP_DEV_SYNC;
        r->copy_kind = (uint8_t)s->type;
        r->context = s->contextId;
        r->stream = s->streamId;
        r->correlation = s->correlationId;
        tp_n_rec++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *p = record;
        int driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
        if (tp_cupti_cb_class(driver, p->cbid) == TP_CB_OTHER)
            return 0;
        if (!tp_grow((void **)&tp_api, &tp_cap_api, tp_n_api, sizeof *tp_api, TP_MAX_API))
            break;
        struct tp_dev_api *o = &tp_api[tp_n_api++];
        memset(o, 0, sizeof *o);
        o->start = tp_clock_ns_to_ticks(p->start);
        o->end = p->end >= p->start ? tp_clock_ns_to_ticks(p->end) : o->start;
        o->correlation = p->correlationId;
        o->thread_id = p->threadId;
        o->cbid = p->cbid;
        o->driver = (uint8_t)driver;
        o->failed = p->returnValue != 0;
        if (p->correlationId > tp_max_api_corr)
            tp_max_api_corr = p->correlationId;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *e = record;
        if (e->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
            return 0;
        if (!tp_grow((void **)&tp_ext, &tp_cap_ext, tp_n_ext, sizeof *tp_ext, TP_MAX_EXT))
            break;
        tp_ext[tp_n_ext].correlation = e->correlationId;
        tp_ext[tp_n_ext].external_id = e->externalId;
        tp_n_ext++;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
        tp_free_overhead(a);
        tp_overheads++;
        return 0;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return 0;
    default:
        return -2;
    }
    tp_dropped++;
    return -1;
}

static void tp_decode_buffer(uint8_t *buf, size_t valid)
{
    CUpti_Activity *a = NULL;
    for (;;) {
        CUptiResult rc = F.cuptiActivityGetNextRecord(buf, valid, &a);
        if (rc != CUPTI_SUCCESS)
            break;                      /* MAX_LIMIT_REACHED: done; INVALID_KIND: incomplete */
        tp_cupti_decode(a);
    }
}

static void tp_drain(void)
{
    size_t valid;
    int i;
    while ((i = tp_done_pop(&valid)) >= 0) {
        tp_decode_buffer(atomic_load(&tp_slot[i]), valid);
        tp_pool_release(i, 1);
    }
}

/* ---- loading -------------------------------------------------------------- */

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

static void tp_unavailable(const char *why)
{
    __atomic_store_n(&tp_state, ST_UNAVAILABLE, __ATOMIC_RELAXED);
    snprintf(tp_status_text, sizeof tp_status_text, "unavailable: %s", why);
}

/* Load, check and subscribe; 0 or -1 (state set, line printed). */
static int tp_load(void)
{
    void *h = tp_open();
    if (!h) {
        tp_unavailable("libcupti not found");
        TP_WARN("CUPTI not found (set TRAINPROF_CUPTI_PATH); recording host-side only");
        return -1;
    }
#define X(name, req) \
    F.name = (__typeof__(F.name))tp_dlsym_real(h, #name); \
    if ((req) && !F.name) { \
        tp_unavailable(#name " missing"); \
        TP_WARN("libcupti lacks " #name "; recording host-side only"); \
        memset(&F, 0, sizeof F); \
        return -1; \
    }
    TP_CUPTI_FNS(X)
#undef X
    if (F.cuptiGetVersion(&tp_version) != CUPTI_SUCCESS || tp_version < TP_CUPTI_MIN_VERSION) {
        char why[96];
        snprintf(why, sizeof why, "CUPTI API version %u < %u", tp_version, TP_CUPTI_MIN_VERSION);
        tp_unavailable(why);
        TP_WARN("%s; recording host-side only", why);
        memset(&F, 0, sizeof F);
        return -1;
    }
    char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
    CUpti_SubscriberParams sp = {
        .structSize = CUpti_SubscriberParams_STRUCT_SIZE,
        .subscriberName = "trainprof",
        .oldSubscriberName = other,
        .oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN,
    };
    CUptiResult rc = F.cuptiSubscribe_v2(&tp_subscriber, tp_subscriber_cb, NULL, &sp);
    if (rc != CUPTI_SUCCESS) {
        other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = 0;
        const char *who = other[0] ? other
                          : rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "unknown"
                                                                                 : tp_result_str(rc);
        char why[128];
        snprintf(why, sizeof why, "in use by another tool (%s)", who);
        tp_unavailable(why);
        TP_WARN("CUPTI is in use by another tool (%s); recording host-side only", who);
        return -1;
    }
    /* Before any kind is enabled, so that every record uses our ticks. */
    if (F.cuptiActivityRegisterTimestampCallback(tp_timestamp) != CUPTI_SUCCESS)
        TP_WARN("CUPTI timestamp callback refused; device times may be off");
    uint8_t zeroed = 1;
    size_t zsz = sizeof zeroed;
    F.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zsz, &zeroed);
    if (tp_pool_init() != 0 ||
        (rc = F.cuptiActivityRegisterCallbacks(tp_buf_requested, tp_buf_completed)) != CUPTI_SUCCESS) {
        F.cuptiUnsubscribe(tp_subscriber);
        tp_unavailable("cannot register activity buffers");
        TP_WARN("CUPTI refused the activity buffers; recording host-side only");
        return -1;
    }
    return 0;
}

/* ---- enable / disable ----------------------------------------------------- */

static void tp_kind_set(CUpti_ActivityKind k, int on)
{
    uint64_t bit = 1ull << ((unsigned)k & 63);
    if (on) {
        CUptiResult rc = F.cuptiActivityEnable(k);
        if (rc == CUPTI_SUCCESS) {
            tp_kinds_enabled |= bit;
        } else if (!(tp_kinds_reported & bit)) {
            tp_kinds_reported |= bit;
            TP_WARN("CUPTI activity kind %s not enabled: %s", tp_kind_name(k), tp_result_str(rc));
        }
    } else if (tp_kinds_enabled & bit) {
        F.cuptiActivityDisable(k);
        tp_kinds_enabled &= ~bit;
    }
}

/* Runtime or driver API records: only the cbids we keep, through
 * cuptiActivityEnable{Runtime,Driver}Api when present (the whole kind must
 * then stay off: enabling it overrides the per-cbid settings); else the
 * whole kind, filtered while decoding. */
static void tp_api_set(int driver, int on)
{
    __typeof__(F.cuptiActivityEnableRuntimeApi) fn =
        driver ? F.cuptiActivityEnableDriverApi : F.cuptiActivityEnableRuntimeApi;
    const uint8_t *cls = driver ? tp_drv_class : tp_rt_class;
    unsigned n = driver ? CUPTI_DRIVER_TRACE_CBID_SIZE : CUPTI_RUNTIME_TRACE_CBID_SIZE;
    int *trimmed = driver ? &tp_drv_trimmed : &tp_rt_trimmed;
    CUpti_ActivityKind kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    if (on) {
        *trimmed = 0;
        if (fn) {
            int ok = 1;
            for (unsigned c = 0; c < n && ok; c++)
                if (cls[c] != TP_CB_OTHER && fn(c, 1) != CUPTI_SUCCESS)
                    ok = 0;
            *trimmed = ok;
        }
        if (!*trimmed)
            tp_kind_set(kind, 1);
    } else if (*trimmed) {
        for (unsigned c = 0; c < n; c++)
            if (cls[c] != TP_CB_OTHER)
                fn(c, 0);
        *trimmed = 0;
    } else {
        tp_kind_set(kind, 0);
    }
}

static void tp_enable_all(void)
{
    for (size_t i = 0; i < sizeof tp_kinds / sizeof tp_kinds[0]; i++)
        tp_kind_set(tp_kinds[i], 1);
    tp_api_set(0, 1);
    tp_api_set(1, 1);
    atomic_store(&tp_kinds_on, 1);
}

static void tp_disable_all(void)
{
    atomic_store(&tp_kinds_on, 0);
    tp_api_set(0, 0);
    tp_api_set(1, 0);
    for (size_t i = 0; i < sizeof tp_kinds / sizeof tp_kinds[0]; i++)
        tp_kind_set(tp_kinds[i], 0);
}

/* ---- lifecycle -------------------------------------------------------------- */

int tp_cupti_start(int had_context)
{
    switch (tp_state) {
    case ST_UNAVAILABLE:
    case ST_FINISHED:
    case ST_OFF:
        return -1;
    case ST_ACTIVE:
        if (!atomic_load(&tp_kinds_on))
            tp_enable_all();
        return 0;
    default:
        break;
    }
    if (!(tp_cfg.activities & TP_ACT_CUDA)) {
        __atomic_store_n(&tp_state, ST_OFF, __ATOMIC_RELAXED);
        snprintf(tp_status_text, sizeof tp_status_text, "off (TRAINPROF_ACTIVITIES)");
        return -1;
    }
    /* Decision 6: only with a driver and a context.  Not a final state: a
     * process may create its context after a trainprof_* call activated us;
     * asking again costs a loader callback while libcuda is absent. */
    if (!tp_driver_ready(had_context)) {
        snprintf(tp_status_text, sizeof tp_status_text, "not started: no CUDA driver or context");
        return -1;
    }
    if (tp_load() != 0)
        return -1;
    __atomic_store_n(&tp_state, ST_ACTIVE, __ATOMIC_RELAXED);
    tp_enable_all();
    snprintf(tp_status_text, sizeof tp_status_text, "active (CUPTI %u)", tp_version);
    return 0;
}

int tp_cupti_enabled(void)
{
    return atomic_load_explicit(&tp_kinds_on, memory_order_relaxed);
}

void tp_cupti_collect(int forced)
{
    if (tp_state != ST_ACTIVE)
        return;
    F.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    tp_drain();
    size_t d = 0;
    if (F.cuptiActivityGetNumDroppedRecords(NULL, 0, &d) == CUPTI_SUCCESS)
        tp_dropped += d;
}

void tp_cupti_set_capture_check(int (*fn)(void))
{
    tp_capture_check = fn;
}

/* CUDA driver version from a libcuda already loaded, 0 if none. */
static int tp_driver_version(void)
{
    static const char *const name = "cuDriverGetVersion";
    void *p;
    tp_driver_syms(&name, &p, 1);
    int v = 0;
    int (*fn)(int *) = (int (*)(int *))p;
    if (!fn || fn(&v) != 0)
        v = 0;
    return v;
}

void tp_cupti_stop(int final)
{
    if (tp_state != ST_ACTIVE)
        return;
    if (!final) {
        if (tp_version >= TP_CUPTI_TOGGLE_VERSION && atomic_load(&tp_kinds_on))
            tp_disable_all();
        return;
    }
    tp_cupti_collect(1);
    tp_disable_all();
    tp_cupti_collect(1);
    F.cuptiUnsubscribe(tp_subscriber);
    int capture = tp_capture_check && tp_capture_check();
    if (!capture && tp_driver_version() >= TP_CUPTI_FINALIZE_CUDA)
        F.cuptiFinalize();
    __atomic_store_n(&tp_state, ST_FINISHED, __ATOMIC_RELAXED);
    snprintf(tp_status_text, sizeof tp_status_text, "finished (CUPTI %u)", tp_version);
}

void tp_cupti_ext_push(uint64_t id)
{
    if (!atomic_load_explicit(&tp_kinds_on, memory_order_relaxed))
        return;
    if (F.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id) ==
        CUPTI_SUCCESS)
        tp_ext_depth++;
}

/* Pops what this thread pushed even if the kinds went off in between, so
 * that a stale id never stays on CUPTI's per-thread stack. */
void tp_cupti_ext_pop(void)
{
    if (tp_ext_depth <= 0)
        return;
    tp_ext_depth--;
    if (__atomic_load_n(&tp_state, __ATOMIC_RELAXED) != ST_ACTIVE)
        return;
    F.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, NULL);
}

const char *tp_cupti_status(void)
{
    return tp_status_text;
}

/* ---- windows ---------------------------------------------------------------- */

static int tp_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int tp_has_u32(const uint32_t *v, size_t n, uint32_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == x;
}

/* Sorted, deduplicated copy; NULL (and *out_n 0) on allocation failure. */
static uint32_t *tp_sorted_set(uint32_t *v, size_t n, size_t *out_n)
{
    if (!v) {
        *out_n = 0;
        return NULL;
    }
    qsort(v, n, sizeof *v, tp_cmp_u32);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[m - 1] != v[i])
            v[m++] = v[i];
    *out_n = m;
    return v;
}

static uint32_t *tp_rec_corrs(size_t *out_n)
{
    uint32_t *v = malloc((tp_n_rec ? tp_n_rec : 1) * sizeof *v);
    size_t n = 0;
    if (v)
        for (size_t i = 0; i < tp_n_rec; i++)
            if (tp_rec[i].correlation)
                v[n++] = tp_rec[i].correlation;
    return tp_sorted_set(v, n, out_n);
}

/* Graph launches are not counted: a graph may hold no kernel node at all,
 * and the core's 2-step / 10 s limit covers late graph work. */
size_t tp_cupti_unfinished(uint64_t t0, uint64_t t1)
{
    if (!tp_n_api)
        return 0;
    size_t n_dev;
    uint32_t *dev = tp_rec_corrs(&n_dev);
    uint32_t *open = malloc(tp_n_api * sizeof *open);
    size_t n = 0;
    if (open)
        for (size_t i = 0; i < tp_n_api; i++) {
            const struct tp_dev_api *a = &tp_api[i];
            if (a->start < t0 || a->start > t1 || !a->correlation || a->failed ||
                tp_cupti_cb_class(a->driver, a->cbid) != TP_CB_LAUNCH)
                continue;
            if (!tp_has_u32(dev, n_dev, a->correlation))
                open[n++] = a->correlation;
        }
    size_t n_open;
    free(tp_sorted_set(open, n, &n_open));  /* a runtime and a driver record of one launch count once */
    free(dev);
    return n_open;
}

static int tp_cmp_rec(const void *a, const void *b)
{
    const struct tp_dev_record *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int tp_cmp_api(const void *a, const void *b)
{
    const struct tp_dev_api *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int tp_cmp_ext(const void *a, const void *b)
{
    const struct tp_dev_ext *x = a, *y = b;
    return (x->correlation > y->correlation) - (x->correlation < y->correlation);
}

void tp_cupti_take(uint64_t t0, uint64_t t1, struct tp_dev_window *out)
{
    memset(out, 0, sizeof *out);
    out->dropped = tp_dropped + atomic_exchange(&tp_dropped_async, 0);
    tp_dropped = 0;

    /* API records: in the window -> out; later -> kept; earlier -> gone. */
    out->api = malloc((tp_n_api ? tp_n_api : 1) * sizeof *out->api);
    uint32_t *win = malloc((tp_n_api ? tp_n_api : 1) * sizeof *win);
    uint32_t *keep_c = malloc((tp_n_api + tp_n_rec + 1) * sizeof *keep_c);
    if (!out->api || !win || !keep_c) {
        /* Nothing can be handed out: drop everything rather than grow. */
        out->dropped += tp_n_api + tp_n_rec + tp_n_ext;
        tp_n_api = tp_n_rec = tp_n_ext = 0;
        free(out->api);
        out->api = NULL;
        free(win);
        free(keep_c);
        return;
    }
    size_t n_win = 0, n_keep_c = 0, kept = 0;
    for (size_t i = 0; i < tp_n_api; i++) {
        struct tp_dev_api a = tp_api[i];
        if (a.start >= t0 && a.start <= t1) {
            out->api[out->n_api++] = a;
            if (a.correlation)
                win[n_win++] = a.correlation;
        } else if (a.start > t1) {
            tp_api[kept++] = a;
            keep_c[n_keep_c++] = a.correlation;
        }
    }
    tp_n_api = kept;
    size_t n_w;
    win = tp_sorted_set(win, n_win, &n_w);

    /* Device records: of the window's launches or starting in it -> out. */
    out->rec = malloc((tp_n_rec ? tp_n_rec : 1) * sizeof *out->rec);
    uint32_t *taken_c = malloc((tp_n_rec ? tp_n_rec : 1) * sizeof *taken_c);
    size_t n_taken_c = 0;
    kept = 0;
    for (size_t i = 0; i < tp_n_rec; i++) {
        const struct tp_dev_record *r = &tp_rec[i];
        int mine = (r->correlation && tp_has_u32(win, n_w, r->correlation)) ||
                   (r->start >= t0 && r->start <= t1);
        if (mine && out->rec && taken_c) {
            out->rec[out->n_rec++] = *r;
            if (r->correlation)
                taken_c[n_taken_c++] = r->correlation;
        } else if (mine) {
            out->dropped++;
        } else if (r->start > t1) {
            tp_rec[kept++] = *r;
            keep_c[n_keep_c++] = r->correlation;
        }
    }
    tp_n_rec = kept;

    /* External correlations: of what was taken -> out; of what is kept, or
     * newer than every API record seen (its API record is still in a buffer
     * CUPTI has not completed) -> kept. */
    size_t n_t, n_k;
    taken_c = tp_sorted_set(taken_c, n_taken_c, &n_t);
    keep_c = tp_sorted_set(keep_c, n_keep_c, &n_k);
    out->ext = malloc((tp_n_ext ? tp_n_ext : 1) * sizeof *out->ext);
    kept = 0;
    for (size_t i = 0; i < tp_n_ext; i++) {
        struct tp_dev_ext e = tp_ext[i];
        if (tp_has_u32(win, n_w, e.correlation) || tp_has_u32(taken_c, n_t, e.correlation)) {
            if (out->ext)
                out->ext[out->n_ext++] = e;
        } else if (tp_has_u32(keep_c, n_k, e.correlation) || e.correlation > tp_max_api_corr) {
            tp_ext[kept++] = e;
        }
    }
    tp_n_ext = kept;
    free(win);
    free(taken_c);
    free(keep_c);

    qsort(out->api, out->n_api, sizeof *out->api, tp_cmp_api);
    if (out->rec)
        qsort(out->rec, out->n_rec, sizeof *out->rec, tp_cmp_rec);
    if (out->ext)
        qsort(out->ext, out->n_ext, sizeof *out->ext, tp_cmp_ext);
}

void tp_cupti_window_free(struct tp_dev_window *w)
{
    if (!w)
        return;
    free(w->rec);
    free(w->api);
    free(w->ext);
    memset(w, 0, sizeof *w);
}
