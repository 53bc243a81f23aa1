/*
 * cupti_decode.c - DESIGN: one CUPTI activity record in, one of our fixed
 * structs out (cupti.h: tp_dev_record, tp_dev_api, tp_dev_ext,
 * tp_dev_cuda_event), and nothing stored: the caller keeps or drops the
 * item, so that the layouts of CUPTI's record structs (CUDA 13.0's
 * Kernel10, Memcpy6, MemcpyPtoP4, Memset4, Synchronization2, CudaEvent2,
 * API, ExternalCorrelation, Overhead3) are known here and nowhere else.
 * Times are CUPTI's ns of our own clock (cupti.c registers tp_clock_ns as
 * its timestamp callback), mapped back to ticks so that they compare with
 * host records exactly.  A device record with a
 * zero start (no timing: CUPTI ran out of device buffer, or a forced flush
 * caught work still running) is "untimed" and the caller drops it: the
 * buffer that carried it is gone, so the record never comes back
 * complete; a zero or early end becomes end = start.  API records are kept
 * only for the cbids of cupti_cbid.def.  Flush thread only.
 */
#include "cupti_impl.h"

#include "clock.h"
#include "intern.h"
#include "kernels.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* CUDA 12.8 (CUPTI v26) replaced CudaEvent with CudaEvent2 and
 * Synchronization with Synchronization2, appending fields (deviceId,
 * deviceTimestamp, cudaEventSyncId; cudaEventSyncId, returnValue); every
 * CUPTI we load (>= 13) delivers the "2" records.  The fields read here sit
 * in the prefix the two versions share, so CUDA_EVENT records are read
 * through the shorter CudaEvent and never past its 24 bytes. */
#define TP_SAME_FIELD(a, b, f) \
    _Static_assert(offsetof(a, f) == offsetof(b, f), #f " moved between " #a " and " #b)
TP_SAME_FIELD(CUpti_ActivityCudaEvent, CUpti_ActivityCudaEvent2, correlationId);
TP_SAME_FIELD(CUpti_ActivityCudaEvent, CUpti_ActivityCudaEvent2, contextId);
TP_SAME_FIELD(CUpti_ActivityCudaEvent, CUpti_ActivityCudaEvent2, streamId);
TP_SAME_FIELD(CUpti_ActivityCudaEvent, CUpti_ActivityCudaEvent2, eventId);
TP_SAME_FIELD(CUpti_ActivitySynchronization, CUpti_ActivitySynchronization2, correlationId);
TP_SAME_FIELD(CUpti_ActivitySynchronization, CUpti_ActivitySynchronization2, contextId);
TP_SAME_FIELD(CUpti_ActivitySynchronization, CUpti_ActivitySynchronization2, streamId);
TP_SAME_FIELD(CUpti_ActivitySynchronization, CUpti_ActivitySynchronization2, cudaEventId);

/* cupti.h keeps the sync types by value. */
#define TP_SAME_SYNC(ours, cupti) \
    _Static_assert((int)(ours) == (int)CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_##cupti, #ours)
TP_SAME_SYNC(TP_SYNC_UNKNOWN, UNKNOWN);
TP_SAME_SYNC(TP_SYNC_EVENT, EVENT_SYNCHRONIZE);
TP_SAME_SYNC(TP_SYNC_STREAM_WAIT_EVENT, STREAM_WAIT_EVENT);
TP_SAME_SYNC(TP_SYNC_STREAM, STREAM_SYNCHRONIZE);
TP_SAME_SYNC(TP_SYNC_CONTEXT, CONTEXT_SYNCHRONIZE);

static uint64_t tp_overheads;           /* OVERHEAD records seen (counted only) */

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

void tp_cupti_record_discard(const CUpti_Activity *a)
{
    if (a->kind == CUPTI_ACTIVITY_KIND_OVERHEAD) {
        /* "Client is responsible for freeing this memory using the free
         * function when done" (cupti_activity.h, CUpti_ActivityOverhead3). */
        void *d = ((const CUpti_ActivityOverhead3 *)(const void *)a)->overheadData;
        free(d);
    }
}

int tp_cupti_record_decode(const CUpti_Activity *a, struct tp_cupti_item *out)
{
    const void *record = a;
    struct tp_dev_record *r = &out->u.rec;
    memset(out, 0, sizeof *out);
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = record;
        if (!tp_times(r, k->start, k->end))
            return TP_CUPTI_GOT_UNTIMED;
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
        return TP_CUPTI_GOT_REC;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = record;
        if (!tp_times(r, m->start, m->end))
            return TP_CUPTI_GOT_UNTIMED;
        TP_COPY_FIELDS(r, m);
        return TP_CUPTI_GOT_REC;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {   /* peer to peer: read as a copy */
        const CUpti_ActivityMemcpyPtoP4 *m = record;
        if (!tp_times(r, m->start, m->end))
            return TP_CUPTI_GOT_UNTIMED;
        TP_COPY_FIELDS(r, m);
        return TP_CUPTI_GOT_REC;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = record;
        if (!tp_times(r, m->start, m->end))
            return TP_CUPTI_GOT_UNTIMED;
        r->kind = TP_DEV_MEMSET;
        r->dst_kind = (uint8_t)m->memoryKind;
        r->device = m->deviceId;
        r->context = m->contextId;
        r->stream = m->streamId;
        r->correlation = m->correlationId;
        r->bytes = m->bytes;
        r->graph_id = m->graphId;
        r->graph_node_id = m->graphNodeId;
        return TP_CUPTI_GOT_REC;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        /* Synchronization2 has no deviceId: device stays 0. */
        const CUpti_ActivitySynchronization2 *s = record;
        if (!tp_times(r, s->start, s->end))
            return TP_CUPTI_GOT_UNTIMED;
        r->kind = TP_DEV_SYNC;
        r->copy_kind = (uint8_t)s->type;
        r->context = s->contextId;
        r->stream = s->streamId;
        r->correlation = s->correlationId;
        r->event_id = s->cudaEventId;
        return TP_CUPTI_GOT_REC;
    }
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
        const CUpti_ActivityCudaEvent *e = record;     /* the prefix of CudaEvent2 */
        struct tp_dev_cuda_event *o = &out->u.cuda_event;
        o->context = e->contextId;
        o->event_id = e->eventId;
        o->correlation = e->correlationId;
        o->stream = e->streamId;
        return TP_CUPTI_GOT_CUDA_EVENT;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *p = record;
        int driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
        if (tp_cupti_cb_class(driver, p->cbid) == TP_CB_OTHER)
            return TP_CUPTI_GOT_NOTHING;
        struct tp_dev_api *o = &out->u.api;
        o->start = tp_clock_ns_to_ticks(p->start);
        o->end = p->end >= p->start ? tp_clock_ns_to_ticks(p->end) : o->start;
        o->correlation = p->correlationId;
        o->thread_id = p->threadId;
        o->cbid = p->cbid;
        o->driver = (uint8_t)driver;
        o->failed = p->returnValue != 0;
        return TP_CUPTI_GOT_API;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *e = record;
        if (e->externalKind != TP_CUPTI_EXT_KIND)
            return TP_CUPTI_GOT_NOTHING;
        out->u.ext.correlation = e->correlationId;
        out->u.ext.external_id = e->externalId;
        return TP_CUPTI_GOT_EXT;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
        tp_cupti_record_discard(a);
        tp_overheads++;
        return TP_CUPTI_GOT_NOTHING;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return TP_CUPTI_GOT_NOTHING;
    default:
        return TP_CUPTI_GOT_UNKNOWN;
    }
}
