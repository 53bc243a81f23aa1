/*
 * cupti_decode.c - DESIGN: one CUPTI activity record in, one of our fixed
 * structs out (cupti.h: tp_device_record, tp_device_api, tp_device_ext,
 * tp_device_cuda_event), and nothing stored: the caller keeps or drops the
 * item, so that the layouts of CUPTI's record structs are known here and
 * nowhere else: one table, a row per range of CUPTI versions (12.4 to
 * 13.x; the facts are in cupti_layouts.h), selected at load
 * (tp_cupti_layout_use) and read through the row's field offsets, never
 * past the struct that version delivers.
 * Times are CUPTI's ns of our own clock (cupti.c registers tp_clock_ns as
 * its timestamp callback), mapped back to ticks so that they compare with
 * host records exactly; where CUPTI refused the callback, they are its own
 * clock's, moved by the offset cupti.c measures before each collection
 * (tp_cupti_clock_offset).  A device record with a
 * zero start (no timing: CUPTI ran out of device buffer, or a forced flush
 * caught work still running) is "untimed" and the caller drops it: the
 * buffer that carried it is gone, so the record never comes back
 * complete; a zero or early end becomes end = start.  API records are kept
 * only for the cbids of cupti_cbid.def.  Flush thread only.
 */
#include "cupti_impl.h"
#include "cupti_layouts.h"

#include "collector/common/clock.h"
#include "collector/record/intern.h"
#include "collector/record/kernels.h"

#include <cupti_driver_cbid.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- the layout table --------------------------------------------------
 * Per range of cuptiGetVersion values, the struct each kind delivers and
 * the offsets of the fields we read (cupti_layouts.h has the facts and the
 * field lists).  Offsets come from offsetof on the struct of that version,
 * as the CUDA 13.0 headers we build with declare it (older versions live in
 * cupti_activity_deprecated.h); Kernel11 (13.1+) is not in them, so its row
 * takes Kernel10's offsets and names Kernel11's size: test_cupti.c checks
 * every row against tests/unit/data/cupti_layouts.txt, probed from the
 * real 12.4-13.2 headers (scripts/dev/cupti-layouts). */
#define TP_OFF(T, f) offsetof(T, f),
#define TP_REC(FIELDS, T) { #T, sizeof(T), FIELDS(TP_OFF, T) }
#define TP_REC_AS(FIELDS, T, name, size) { name, size, FIELDS(TP_OFF, T) }
#define TP_COMMON_13 \
    TP_REC(TP_CUPTI_MEMCPY_FIELDS, CUpti_ActivityMemcpy6), \
    TP_REC(TP_CUPTI_MEMCPY_FIELDS, CUpti_ActivityMemcpyPtoP4), \
    TP_REC(TP_CUPTI_MEMSET_FIELDS, CUpti_ActivityMemset4), \
    TP_REC(TP_CUPTI_SYNC_FIELDS, CUpti_ActivitySynchronization2), \
    TP_REC(TP_CUPTI_EVENT_FIELDS, CUpti_ActivityCudaEvent2), \
    TP_REC(TP_CUPTI_API_FIELDS, CUpti_ActivityAPI), \
    TP_REC(TP_CUPTI_EXT_FIELDS, CUpti_ActivityExternalCorrelation), \
    TP_REC(TP_CUPTI_OVERHEAD_FIELDS, CUpti_ActivityOverhead3)

static const struct tp_cupti_layout tp_layouts[] = {
    { 22, 25, "12.4-12.6",                      /* v22 12.4, v23 12.5, v24 12.6 */
      TP_REC(TP_CUPTI_KERNEL_FIELDS, CUpti_ActivityKernel9),
      TP_REC(TP_CUPTI_MEMCPY_FIELDS, CUpti_ActivityMemcpy5),
      TP_REC(TP_CUPTI_MEMCPY_FIELDS, CUpti_ActivityMemcpyPtoP4),
      TP_REC(TP_CUPTI_MEMSET_FIELDS, CUpti_ActivityMemset4),
      TP_REC(TP_CUPTI_SYNC_FIELDS, CUpti_ActivitySynchronization),
      TP_REC(TP_CUPTI_EVENT_FIELDS, CUpti_ActivityCudaEvent),
      TP_REC(TP_CUPTI_API_FIELDS, CUpti_ActivityAPI),
      TP_REC(TP_CUPTI_EXT_FIELDS, CUpti_ActivityExternalCorrelation),
      TP_REC(TP_CUPTI_OVERHEAD_FIELDS, CUpti_ActivityOverhead3) },
    { 26, 129999, "12.8-12.9",                  /* v26 12.8, v27 12.9, v28 12.9U1 */
      TP_REC(TP_CUPTI_KERNEL_FIELDS, CUpti_ActivityKernel9), TP_COMMON_13 },
    { 130000, 130099, "13.0",                   /* 130000 GA, 130001 U1 */
      TP_REC(TP_CUPTI_KERNEL_FIELDS, CUpti_ActivityKernel10), TP_COMMON_13 },
    { 130100, 139999, "13.1-13.2",              /* 130100 .. 130202; newer 13.x read so */
      TP_REC_AS(TP_CUPTI_KERNEL_FIELDS, CUpti_ActivityKernel10, "CUpti_ActivityKernel11", 224),
      TP_COMMON_13 },
};
#define TP_LAYOUTS (sizeof tp_layouts / sizeof tp_layouts[0])

/* Every field read has the offset and width of the CUDA 13.0 struct in
 * each older struct a row names: the versions append fields or reuse
 * padding, so the offsets above are one set in fact; the table keeps them
 * per row so that a CUPTI that moves a field needs one new row. */
#define TP_SAME_AS_REF(T, f) \
    _Static_assert(offsetof(T, f) == offsetof(TP_REF, f) && \
                   sizeof(((T *)0)->f) == sizeof(((TP_REF *)0)->f), \
                   #f " differs between " #T " and the CUDA 13.0 struct");
#define TP_REF CUpti_ActivityKernel10
TP_CUPTI_KERNEL_FIELDS(TP_SAME_AS_REF, CUpti_ActivityKernel9)
#undef TP_REF
#define TP_REF CUpti_ActivityMemcpy6
TP_CUPTI_MEMCPY_FIELDS(TP_SAME_AS_REF, CUpti_ActivityMemcpy5)
#undef TP_REF
#define TP_REF CUpti_ActivitySynchronization2
TP_CUPTI_SYNC_FIELDS(TP_SAME_AS_REF, CUpti_ActivitySynchronization)
#undef TP_REF
#define TP_REF CUpti_ActivityCudaEvent2
TP_CUPTI_EVENT_FIELDS(TP_SAME_AS_REF, CUpti_ActivityCudaEvent)
#undef TP_REF
_Static_assert(sizeof(CUpti_ActivityKernel10) <= 224, "Kernel11 (224 bytes) appends to Kernel10");

/* The row in use: 13.0 until tp_cupti_layout_use() says otherwise (the
 * unit tests decode CUDA 13.0 structs without loading CUPTI). */
static const struct tp_cupti_layout *tp_lay = &tp_layouts[2];

const struct tp_cupti_layout *tp_cupti_layouts(size_t *n)
{
    *n = TP_LAYOUTS;
    return tp_layouts;
}

const struct tp_cupti_layout *tp_cupti_layout_for(uint32_t version)
{
    for (size_t i = 0; i < TP_LAYOUTS; i++)
        if (version >= tp_layouts[i].from && version <= tp_layouts[i].to)
            return &tp_layouts[i];
    return NULL;
}

void tp_cupti_layout_use(const struct tp_cupti_layout *l)
{
    tp_lay = l;
}

/* Field "f" of record "rec" of family "fam" in the row in use, typed as in
 * the CUDA 13.0 struct "REF" (the same width in every row: checked above). */
#define TP_RD(rec, fam, REF, f) __extension__({ \
        __typeof__(((REF *)0)->f) v_; \
        memcpy(&v_, (const char *)(rec) + tp_lay->fam.f, sizeof v_); \
        v_; })
#define TP_K(f) TP_RD(a, kernel, CUpti_ActivityKernel10, f)
#define TP_MS(f) TP_RD(a, memset, CUpti_ActivityMemset4, f)
#define TP_SY(f) TP_RD(a, sync, CUpti_ActivitySynchronization2, f)
#define TP_EV(f) TP_RD(a, event, CUpti_ActivityCudaEvent2, f)
#define TP_AP(f) TP_RD(a, api, CUpti_ActivityAPI, f)
#define TP_EX(f) TP_RD(a, ext, CUpti_ActivityExternalCorrelation, f)

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
 * function, so demangling and interning happen once per pointer.  The
 * pointer alone is not a key: after a module unload CUPTI's string may be
 * freed and the address reused for another kernel's name, so an entry also
 * keeps a hash of the bytes (FNV-1a, one pass, as strlen would be). */
#define TP_NAME_CACHE 4096
static struct { const char *p; uint64_t hash; uint32_t id; } tp_names[TP_NAME_CACHE];

static uint64_t tp_name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static uint32_t tp_kernel_name(const char *name)
{
    if (!name)
        return 0;
    uint64_t hash = tp_name_hash(name);
    uintptr_t h = ((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull;
    unsigned i = (unsigned)(h >> 52) % TP_NAME_CACHE;
    if (tp_names[i].p == name && tp_names[i].hash == hash)
        return tp_names[i].id;
    char buf[TP_INTERN_LEN_MAX + 1];
    tp_demangle(name, buf, sizeof buf);
    uint32_t id = tp_intern(buf, (size_t)-1);
    tp_names[i].p = name;
    tp_names[i].hash = hash;
    tp_names[i].id = id;
    return id;
}

/* The fields Memcpy and MemcpyPtoP share by name ("fam": memcpy or p2p). */
#define TP_COPY_FIELDS(r, fam, REF) do {                                           \
        (r)->kind = TP_DEVICE_MEMCPY;                                                 \
        (r)->copy_kind = TP_RD(a, fam, REF, copyKind);                             \
        (r)->src_kind = TP_RD(a, fam, REF, srcKind);                               \
        (r)->dst_kind = TP_RD(a, fam, REF, dstKind);                               \
        (r)->device = TP_RD(a, fam, REF, deviceId);                                \
        (r)->context = TP_RD(a, fam, REF, contextId);                              \
        (r)->stream = TP_RD(a, fam, REF, streamId);                                \
        (r)->correlation = TP_RD(a, fam, REF, correlationId);                      \
        (r)->bytes = TP_RD(a, fam, REF, bytes);                                    \
        (r)->graph_id = TP_RD(a, fam, REF, graphId);                               \
        (r)->graph_node_id = TP_RD(a, fam, REF, graphNodeId);                      \
    } while (0)

/* CUPTI's clock minus ours (ns): 0 while our callback times the records;
 * and how far off that may be (ticks). */
static _Atomic int64_t tp_offset_ns;
static _Atomic uint64_t tp_slack_ticks;

void tp_cupti_clock_offset(int64_t ns, uint64_t slack_ticks)
{
    atomic_store_explicit(&tp_offset_ns, ns, memory_order_relaxed);
    atomic_store_explicit(&tp_slack_ticks, slack_ticks, memory_order_relaxed);
}

uint64_t tp_cupti_clock_slack(void)
{
    return atomic_load_explicit(&tp_slack_ticks, memory_order_relaxed);
}

/* A CUPTI timestamp as our ticks. */
static uint64_t tp_ticks_of(uint64_t cupti_ns)
{
    int64_t off = atomic_load_explicit(&tp_offset_ns, memory_order_relaxed);
    return tp_clock_ns_to_ticks(cupti_ns - (uint64_t)off);
}

/* Start and end of a device record; 0 if it carries no timing. */
static int tp_times(struct tp_device_record *r, uint64_t start, uint64_t end)
{
    if (start == 0)
        return 0;
    r->start = tp_ticks_of(start);
    r->end = end >= start ? tp_ticks_of(end) : r->start;
    return 1;
}

void tp_cupti_record_discard(const CUpti_Activity *a)
{
    if (a->kind == CUPTI_ACTIVITY_KIND_OVERHEAD && tp_lay->overhead.overheadData) {
        /* "Client is responsible for freeing this memory using the free
         * function when done" (cupti_activity.h, CUpti_ActivityOverhead3);
         * a row without overheadData (Overhead2) frees nothing. */
        free(TP_RD(a, overhead, CUpti_ActivityOverhead3, overheadData));
    }
}

int tp_cupti_record_decode(const CUpti_Activity *a, struct tp_cupti_item *out)
{
    struct tp_device_record *r = &out->u.rec;
    memset(out, 0, sizeof *out);
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        if (!tp_times(r, TP_K(start), TP_K(end)))
            return TP_CUPTI_GOT_UNTIMED;
        r->kind = TP_DEVICE_KERNEL;
        r->device = TP_K(deviceId);
        r->context = TP_K(contextId);
        r->stream = TP_K(streamId);
        r->correlation = TP_K(correlationId);
        r->name = tp_kernel_name(TP_K(name));
        r->grid[0] = TP_K(gridX), r->grid[1] = TP_K(gridY), r->grid[2] = TP_K(gridZ);
        r->block[0] = TP_K(blockX), r->block[1] = TP_K(blockY), r->block[2] = TP_K(blockZ);
        r->static_smem = TP_K(staticSharedMemory);
        r->dynamic_smem = TP_K(dynamicSharedMemory);
        r->registers = TP_K(registersPerThread);
        r->launch_type = TP_K(launchType);
        r->cluster[0] = TP_K(clusterX), r->cluster[1] = TP_K(clusterY);
        r->cluster[2] = TP_K(clusterZ);
        r->graph_id = TP_K(graphId);
        r->graph_node_id = TP_K(graphNodeId);
        return TP_CUPTI_GOT_REC;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        if (!tp_times(r, TP_RD(a, memcpy, CUpti_ActivityMemcpy6, start),
                      TP_RD(a, memcpy, CUpti_ActivityMemcpy6, end)))
            return TP_CUPTI_GOT_UNTIMED;
        TP_COPY_FIELDS(r, memcpy, CUpti_ActivityMemcpy6);
        return TP_CUPTI_GOT_REC;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:     /* peer to peer: read as a copy */
        if (!tp_times(r, TP_RD(a, p2p, CUpti_ActivityMemcpyPtoP4, start),
                      TP_RD(a, p2p, CUpti_ActivityMemcpyPtoP4, end)))
            return TP_CUPTI_GOT_UNTIMED;
        TP_COPY_FIELDS(r, p2p, CUpti_ActivityMemcpyPtoP4);
        return TP_CUPTI_GOT_REC;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        if (!tp_times(r, TP_MS(start), TP_MS(end)))
            return TP_CUPTI_GOT_UNTIMED;
        r->kind = TP_DEVICE_MEMSET;
        r->dst_kind = (uint8_t)TP_MS(memoryKind);
        r->device = TP_MS(deviceId);
        r->context = TP_MS(contextId);
        r->stream = TP_MS(streamId);
        r->correlation = TP_MS(correlationId);
        r->bytes = TP_MS(bytes);
        r->graph_id = TP_MS(graphId);
        r->graph_node_id = TP_MS(graphNodeId);
        return TP_CUPTI_GOT_REC;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        /* Synchronization(2) has no deviceId: device stays 0. */
        if (!tp_times(r, TP_SY(start), TP_SY(end)))
            return TP_CUPTI_GOT_UNTIMED;
        r->kind = TP_DEVICE_SYNC;
        r->copy_kind = (uint8_t)TP_SY(type);
        r->context = TP_SY(contextId);
        r->stream = TP_SY(streamId);
        r->correlation = TP_SY(correlationId);
        r->event_id = TP_SY(cudaEventId);
        return TP_CUPTI_GOT_REC;
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
        struct tp_device_cuda_event *o = &out->u.cuda_event;
        o->context = TP_EV(contextId);
        o->event_id = TP_EV(eventId);
        o->correlation = TP_EV(correlationId);
        o->stream = TP_EV(streamId);
        return TP_CUPTI_GOT_CUDA_EVENT;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API: {
        /* An internal launch (a driver launch outside any public API call,
         * cbid unused) is kept as a driver launch no host call may claim:
         * its external correlation still names the library call that made
         * it, and the window waits for its kernel. */
        int internal = a->kind == CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API;
        int driver = a->kind != CUPTI_ACTIVITY_KIND_RUNTIME;
        uint32_t cbid = internal ? CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel : TP_AP(cbid);
        if (tp_cupti_cb_class(driver, cbid) == TP_CB_OTHER)
            return TP_CUPTI_GOT_NOTHING;
        struct tp_device_api *o = &out->u.api;
        uint64_t start = TP_AP(start), end = TP_AP(end);
        o->start = tp_ticks_of(start);
        o->end = end >= start ? tp_ticks_of(end) : o->start;
        o->correlation = TP_AP(correlationId);
        o->thread_id = TP_AP(threadId);
        o->cbid = cbid;
        o->driver = (uint8_t)driver;
        o->internal = (uint8_t)internal;
        o->failed = TP_AP(returnValue) != 0;
        return TP_CUPTI_GOT_API;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        if (TP_EX(externalKind) != TP_CUPTI_EXT_KIND)
            return TP_CUPTI_GOT_NOTHING;
        out->u.ext.correlation = TP_EX(correlationId);
        out->u.ext.external_id = TP_EX(externalId);
        return TP_CUPTI_GOT_EXT;
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
