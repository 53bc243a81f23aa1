/*
 * apis.c - DESIGN: the tables are expanded from the same .def lists
 * (collector/record/apis/) as the preload's wrappers, so a name, its id and its
 * CUPTI cbid cannot disagree.  The lists live in the collector, which owns
 * the ids; the preload includes them to generate its entry points.  The
 * logical call of a _ptsz/_ptds variant is the entry without the suffix:
 * the per-thread-default-stream form is the same operation.
 */
#include "apis.h"
#include "collector/contract/record.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <stdatomic.h>
#include <string.h>

/* Each record expression of a .def line names its form here. */
#define TP_R_LAUNCH(...)     TP_FORM_LAUNCH
#define TP_R_LAUNCH_CFG(...) TP_FORM_LAUNCH
#define TP_R_DLAUNCH(...)    TP_FORM_LAUNCH
#define TP_R_DLAUNCH_CFG(...) TP_FORM_LAUNCH
#define TP_R_MAP(...)        TP_FORM_NONE
#define TP_R_GRAPH(...)      TP_FORM_LAUNCH
#define TP_R_COPY(...)       TP_FORM_COPY
#define TP_R_SET(...)        TP_FORM_SET
#define TP_R_SYNC(...)       TP_FORM_SYNC_STREAM
#define TP_R_SYNC_EVENT(...) TP_FORM_SYNC_EVENT
#define TP_R_STREAM(...)     TP_FORM_SYNC_STREAM
#define TP_R_ALLOC(...)      TP_FORM_ALLOC
#define TP_R_FREE(...)       TP_FORM_FREE
#define TP_R_ALLOC3D(...)    TP_FORM_ALLOC
#define TP_R_VMM_CREATE(...) TP_FORM_ALLOC
#define TP_R_VMM_RELEASE(...) TP_FORM_FREE
#define TP_R_NONE            TP_FORM_NONE
#define TP_R_PROFILER(...)   TP_FORM_NONE
#define TP_R_GEMM(...)       TP_FORM_GEMM
#define TP_R_COLL(...)       TP_FORM_COLL
#define TP_R_CONV(...)       TP_FORM_CONV
#define TP_R_BEXEC(...)      TP_FORM_CONV
#define TP_R_FIND(...)       TP_FORM_CONV
#define TP_R_RNN(...)        TP_FORM_RNN
#define TP_R_TENSOR(...)     TP_FORM_TENSOR

static const struct { const char *name; int cbid; uint8_t layer, form; } tp_apis[TP_API_COUNT] = {
    [TP_API_NONE] = { "", -1, TP_LAYER_NONE, TP_FORM_NONE },
#define TP_FN(ret, name, params, args, cbid, gate, rec) \
    [TP_API_##name] = { #name, CUPTI_RUNTIME_TRACE_CBID_##cbid, TP_LAYER_RUNTIME, rec },
#define TP_LIB_FN(ret, name, params, args, gate, rec) \
    [TP_API_##name] = { #name, -1, TP_LAYER_LIBRARY, rec },
#define TP_DRV_FN(ret, name, params, args, cbid, gate, rec, request, version) \
    [TP_API_##name] = { #name, CUPTI_DRIVER_TRACE_CBID_##cbid, TP_LAYER_DRIVER, rec },
#include "apis/cudart.def"
#include "apis/cuda.def"
#include "apis/cublas.def"
#include "apis/cublaslt.def"
#include "apis/nccl.def"
#include "apis/cudnn.def"
#undef TP_DRV_FN
#undef TP_LIB_FN
#undef TP_FN
};

/* Each line's gate agrees with its record, at compile time: MEM on exactly
 * the allocation and free records, PAPI on exactly the profiler API's (a
 * record of form NONE otherwise, told apart here alone), LAUNCH on exactly
 * the launches, OWN only on records of form NONE (a handle's creation), WIN
 * elsewhere. */
#undef TP_R_PROFILER
#define TP_R_PROFILER(...) (-1)
#define TP_GATE_OF(rec) \
    ((rec) == TP_FORM_ALLOC || (rec) == TP_FORM_FREE ? TP_GATE_MEM \
     : (rec) == -1                                   ? TP_GATE_PAPI \
     : (rec) == TP_FORM_LAUNCH                       ? TP_GATE_LAUNCH \
                                                     : TP_GATE_WIN)
#define TP_GATE_CHECK(name, gate, rec) \
    _Static_assert(TP_GATE_##gate == TP_GATE_OF(rec) || \
                   (TP_GATE_##gate == TP_GATE_OWN && (rec) == TP_FORM_NONE), \
                   #name ": its gate column disagrees with its record");
#define TP_FN(ret, name, params, args, cbid, gate, rec) TP_GATE_CHECK(name, gate, rec)
#define TP_LIB_FN(ret, name, params, args, gate, rec)   TP_GATE_CHECK(name, gate, rec)
#define TP_DRV_FN(ret, name, params, args, cbid, gate, rec, request, version) \
    TP_GATE_CHECK(name, gate, rec)
#include "apis/cudart.def"
#include "apis/cuda.def"
#include "apis/cublas.def"
#include "apis/cublaslt.def"
#include "apis/nccl.def"
#include "apis/cudnn.def"
#undef TP_DRV_FN
#undef TP_LIB_FN
#undef TP_FN

/* Driver entries (without _ptsz/_ptds) and the runtime call that reaches
 * them: every cudart, static or shared, serves these runtime calls through
 * these driver entries (cudaProfilerStart through cuProfilerStart, ...). */
static const char *const tp_driver_logical[][2] = {
    { "cuGraphLaunch", "cudaGraphLaunch" },
    { "cuProfilerStart", "cudaProfilerStart" },
    { "cuProfilerStop", "cudaProfilerStop" },
    { "cuStreamSynchronize", "cudaStreamSynchronize" },
    { "cuEventSynchronize", "cudaEventSynchronize" },
    { "cuCtxSynchronize", "cudaDeviceSynchronize" },
    { "cuCtxSynchronize_v2", "cudaDeviceSynchronize" },
    { "cuMemAlloc_v2", "cudaMalloc" },
    { "cuMemAllocPitch_v2", "cudaMallocPitch" },
    { "cuMemAllocFromPoolAsync", "cudaMallocFromPoolAsync" },
    { "cuMemFree_v2", "cudaFree" },
    { "cuMemAllocAsync", "cudaMallocAsync" },
    { "cuMemFreeAsync", "cudaFreeAsync" },
    { "cuMemAllocManaged", "cudaMallocManaged" },
    { "cuMemAllocHost_v2", "cudaMallocHost" },
    { "cuMemHostAlloc", "cudaHostAlloc" },
    { "cuMemFreeHost", "cudaFreeHost" },
    { "cuMemcpy", "cudaMemcpy" },
    { "cuMemcpyHtoD_v2", "cudaMemcpy" },
    { "cuMemcpyDtoH_v2", "cudaMemcpy" },
    { "cuMemcpyDtoD_v2", "cudaMemcpy" },
    { "cuMemcpyAsync", "cudaMemcpyAsync" },
    { "cuMemcpyHtoDAsync_v2", "cudaMemcpyAsync" },
    { "cuMemcpyDtoHAsync_v2", "cudaMemcpyAsync" },
    { "cuMemcpyDtoDAsync_v2", "cudaMemcpyAsync" },
    { "cuMemsetD8_v2", "cudaMemset" },
    { "cuMemsetD32_v2", "cudaMemset" },
    { "cuMemsetD8Async", "cudaMemsetAsync" },
    { "cuMemsetD32Async", "cudaMemsetAsync" },
};

static _Atomic uint16_t tp_logical[TP_API_COUNT];

const char *tp_api_name(unsigned id)
{
    return id < TP_API_COUNT ? tp_apis[id].name : "";
}

int tp_api_cbid(unsigned id)
{
    return id < TP_API_COUNT ? tp_apis[id].cbid : -1;
}

int tp_api_form(unsigned id)
{
    return id < TP_API_COUNT ? tp_apis[id].form : TP_FORM_NONE;
}

int tp_api_layer(unsigned id)
{
    return id < TP_API_COUNT ? tp_apis[id].layer : TP_LAYER_NONE;
}

static unsigned tp_api_lookup(const char *name, size_t len)
{
    for (unsigned i = 1; i < TP_API_COUNT; i++)
        if (strlen(tp_apis[i].name) == len && memcmp(tp_apis[i].name, name, len) == 0)
            return i;
    return TP_API_NONE;
}

static size_t tp_base_len(const char *name)
{
    size_t n = strlen(name);
    if (n > 5 && (strcmp(name + n - 5, "_ptsz") == 0 || strcmp(name + n - 5, "_ptds") == 0))
        return n - 5;
    return n;
}

/* The runtime call reaching driver entry "base" (its id), or "base". */
static unsigned tp_runtime_of(unsigned base)
{
    if (tp_apis[base].layer != TP_LAYER_DRIVER)
        return base;
    for (size_t i = 0; i < sizeof tp_driver_logical / sizeof tp_driver_logical[0]; i++)
        if (strcmp(tp_apis[base].name, tp_driver_logical[i][0]) == 0) {
            unsigned r = tp_api_lookup(tp_driver_logical[i][1], strlen(tp_driver_logical[i][1]));
            return r ? r : base;
        }
    return base;
}

unsigned tp_api_logical(unsigned id)
{
    if (id == 0 || id >= TP_API_COUNT)
        return TP_API_NONE;
    unsigned l = atomic_load_explicit(&tp_logical[id], memory_order_relaxed);
    if (!l) {
        unsigned base = tp_api_lookup(tp_apis[id].name, tp_base_len(tp_apis[id].name));
        l = tp_runtime_of(base ? base : id);
        atomic_store_explicit(&tp_logical[id], (uint16_t)l, memory_order_relaxed);
    }
    return l;
}

unsigned tp_api_find(const char *name)
{
    unsigned id = tp_api_lookup(name, strlen(name));
    if (!id)
        id = tp_api_lookup(name, tp_base_len(name));
    return tp_api_logical(id);
}
