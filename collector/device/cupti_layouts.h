/*
 * cupti_layouts.h - which CUPTI activity record struct each CUPTI version
 * delivers, and where the fields we read sit in it.  The table itself
 * (one row per version range, selected at load from cuptiGetVersion) is in
 * cupti_decode.c, its only reader; this header gives its shape, and the
 * field lists that the decoder, the table, the compile-time checks and the
 * offset probe (tests/unit/cupti_layout_probe.c, compiled once per CUPTI
 * header version by scripts/dev/cupti-layouts) all expand, so that the fields
 * read and the fields checked cannot differ.
 *
 * Facts from the headers of CUPTI 12.4, 12.6, 12.8, 12.9 (PyPI
 * nvidia-cuda-cupti-cu12), 13.0, 13.1 and 13.2 (nvidia-cuda-cupti), read
 * from the doc comment of each CUPTI_ACTIVITY_KIND_* and cupti_version.h:
 *
 *   CUDA    API version     kernel    memcpy   P2P        memset   sync    cuda event
 *   12.4    22              Kernel9   Memcpy5  MemcpyPtoP4 Memset4 Sync.   CudaEvent
 *   12.5    23 (no header)  as 12.4 and 12.6, which agree
 *   12.6    24              Kernel9   Memcpy5  MemcpyPtoP4 Memset4 Sync.   CudaEvent
 *   12.8    26              Kernel9   Memcpy6  MemcpyPtoP4 Memset4 Sync.2  CudaEvent2
 *   12.9    27, 28 (U1)     as 12.8
 *   13.0    130000, 130001  Kernel10  Memcpy6  MemcpyPtoP4 Memset4 Sync.2  CudaEvent2
 *   13.1    130100, 130101  Kernel11  Memcpy6  MemcpyPtoP4 Memset4 Sync.2  CudaEvent2
 *   13.2    130200-130202   Kernel11  (as 13.1)
 *
 * In every one RUNTIME and DRIVER deliver CUpti_ActivityAPI,
 * EXTERNAL_CORRELATION CUpti_ActivityExternalCorrelation and OVERHEAD
 * CUpti_ActivityOverhead3 (overheadData, which the client frees; the
 * 48-byte Overhead2 without it predates 12.4).  Newer versions append
 * fields or reuse padding: every field we read has the same offset and
 * width in all of them (checked at compile time in cupti_decode.c against
 * the CUDA 13.0 headers we build with, and by tests/unit/test_cupti.c
 * against tests/unit/data/cupti_layouts.txt, probed from each header).
 */
#ifndef TRAINPROF_COLLECTOR_CUPTI_LAYOUTS_H
#define TRAINPROF_COLLECTOR_CUPTI_LAYOUTS_H

#include <stdint.h>

/* The fields read, per record family: X(T, field) with T the struct. */
#define TP_CUPTI_KERNEL_FIELDS(X, T) \
    X(T, start) X(T, end) X(T, deviceId) X(T, contextId) X(T, streamId) X(T, correlationId) \
    X(T, name) X(T, gridX) X(T, gridY) X(T, gridZ) X(T, blockX) X(T, blockY) X(T, blockZ) \
    X(T, staticSharedMemory) X(T, dynamicSharedMemory) X(T, registersPerThread) \
    X(T, graphId) X(T, graphNodeId) X(T, launchType) X(T, clusterX) X(T, clusterY) X(T, clusterZ)
#define TP_CUPTI_MEMCPY_FIELDS(X, T) \
    X(T, copyKind) X(T, srcKind) X(T, dstKind) X(T, bytes) X(T, start) X(T, end) \
    X(T, deviceId) X(T, contextId) X(T, streamId) X(T, correlationId) X(T, graphId) \
    X(T, graphNodeId)
#define TP_CUPTI_MEMSET_FIELDS(X, T) \
    X(T, bytes) X(T, start) X(T, end) X(T, deviceId) X(T, contextId) X(T, streamId) \
    X(T, correlationId) X(T, memoryKind) X(T, graphId) X(T, graphNodeId)
#define TP_CUPTI_SYNC_FIELDS(X, T) \
    X(T, type) X(T, start) X(T, end) X(T, contextId) X(T, streamId) X(T, correlationId) \
    X(T, cudaEventId)
#define TP_CUPTI_EVENT_FIELDS(X, T) \
    X(T, correlationId) X(T, contextId) X(T, streamId) X(T, eventId)
#define TP_CUPTI_API_FIELDS(X, T) \
    X(T, cbid) X(T, start) X(T, end) X(T, threadId) X(T, correlationId) X(T, returnValue)
#define TP_CUPTI_EXT_FIELDS(X, T) \
    X(T, externalKind) X(T, externalId) X(T, correlationId)
#define TP_CUPTI_OVERHEAD_FIELDS(X, T) \
    X(T, overheadData)

/* The record families: X(member, FIELDS, REF, KIND) with REF the struct of
 * the CUDA 13.0 headers we build with (it gives each field's type) and KIND
 * the name of the activity kind that delivers it (MEMCPY2 for P2P). */
#define TP_CUPTI_FAMILIES(X) \
    X(kernel, TP_CUPTI_KERNEL_FIELDS, CUpti_ActivityKernel10, CONCURRENT_KERNEL) \
    X(memcpy, TP_CUPTI_MEMCPY_FIELDS, CUpti_ActivityMemcpy6, MEMCPY) \
    X(p2p, TP_CUPTI_MEMCPY_FIELDS, CUpti_ActivityMemcpyPtoP4, MEMCPY2) \
    X(memset, TP_CUPTI_MEMSET_FIELDS, CUpti_ActivityMemset4, MEMSET) \
    X(sync, TP_CUPTI_SYNC_FIELDS, CUpti_ActivitySynchronization2, SYNCHRONIZATION) \
    X(event, TP_CUPTI_EVENT_FIELDS, CUpti_ActivityCudaEvent2, CUDA_EVENT) \
    X(api, TP_CUPTI_API_FIELDS, CUpti_ActivityAPI, RUNTIME) \
    X(ext, TP_CUPTI_EXT_FIELDS, CUpti_ActivityExternalCorrelation, EXTERNAL_CORRELATION) \
    X(overhead, TP_CUPTI_OVERHEAD_FIELDS, CUpti_ActivityOverhead3, OVERHEAD)

/* One record struct version: its name, its size, and the byte offset of
 * each field read (0: absent, as "kind" is the only field at 0). */
#define TP_CUPTI_OFF_MEMBER(T, f) uint16_t f;
#define TP_CUPTI_REC_STRUCT(member, FIELDS, REF, KIND) \
    struct tp_cupti_rec_##member { \
        const char *struct_name; \
        uint16_t size; \
        FIELDS(TP_CUPTI_OFF_MEMBER, REF) \
    };
TP_CUPTI_FAMILIES(TP_CUPTI_REC_STRUCT)
#undef TP_CUPTI_REC_STRUCT

/* One row: the CUPTI API versions it covers and what they deliver. */
struct tp_cupti_layout {
    uint32_t from, to;          /* cuptiGetVersion values [from, to] */
    const char *cuda;           /* the CUDA releases, for messages */
#define TP_CUPTI_ROW_MEMBER(member, FIELDS, REF, KIND) struct tp_cupti_rec_##member member;
    TP_CUPTI_FAMILIES(TP_CUPTI_ROW_MEMBER)
#undef TP_CUPTI_ROW_MEMBER
};

#endif
