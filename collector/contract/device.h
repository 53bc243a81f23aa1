/*
 * device.h - the device side as handlers read it: one device activity
 * (struct tp_device_record, made by collector/device/cupti_decode.c from
 * CUPTI's records) and one device's properties (struct tp_device_prop, asked of
 * the driver by collector/device/props.c).  Types only, so that a
 * handler reads the device side without CUPTI's or the driver's functions
 * (collector/device/cupti.h and props.h include this).
 */
#ifndef TRAINPROF_COLLECTOR_CONTRACT_DEVICE_H
#define TRAINPROF_COLLECTOR_CONTRACT_DEVICE_H

#include <stdint.h>

enum tp_device_kind { TP_DEVICE_NONE = 0, TP_DEVICE_KERNEL, TP_DEVICE_MEMCPY, TP_DEVICE_MEMSET, TP_DEVICE_SYNC };

/* One device-side activity. */
struct tp_device_record {
    uint8_t  kind;              /* enum tp_device_kind */
    uint8_t  copy_kind;         /* MEMCPY: CUpti_ActivityMemcpyKind;
                                   SYNC: CUpti_ActivitySynchronizationType */
    uint8_t  src_kind, dst_kind;/* MEMCPY: CUpti_ActivityMemoryKind; MEMSET: dst_kind */
    uint32_t device;
    uint32_t context;
    uint32_t stream;            /* CUPTI stream id */
    uint32_t correlation;       /* CUPTI correlation id, 0 if none */
    uint32_t name;              /* KERNEL: interned demangled name (collector/record/intern.h) */
    uint64_t start, end;        /* tp_clock ticks; end >= start */
    uint64_t bytes;             /* MEMCPY, MEMSET */
    int32_t  grid[3], block[3]; /* KERNEL */
    int32_t  static_smem, dynamic_smem;
    uint16_t registers;         /* KERNEL: registers per thread */
    uint8_t  launch_type;       /* KERNEL: CUpti_ActivityLaunchType (1, 2: cooperative) */
    uint8_t  pad;
    uint32_t cluster[3];        /* KERNEL: thread block cluster dimensions (0 or 1: none) */
    uint32_t graph_id;          /* KERNEL/MEMCPY/MEMSET launched by a graph, else 0 */
    uint64_t graph_node_id;
    uint32_t event_id;          /* SYNC: CUPTI's cudaEventId of the event waited on,
                                   0xffffffff (CUPTI_SYNCHRONIZATION_INVALID_VALUE) if none */
};

/* CUpti_ActivitySynchronizationType, as kept in tp_device_record.copy_kind of
 * SYNC records (cupti_decode.c checks the values against CUPTI's). */
enum tp_device_sync_type {
    TP_SYNC_UNKNOWN = 0,
    TP_SYNC_EVENT = 1,          /* cudaEventSynchronize */
    TP_SYNC_STREAM_WAIT_EVENT = 2,
    TP_SYNC_STREAM = 3,
    TP_SYNC_CONTEXT = 4,
};

/* tp_device_waits_on_event - 1 if "d" is a sync on a CUDA event (Kineto's
 * isEventSync: the syncs that carry wait_on_* args). */
static inline int tp_device_waits_on_event(const struct tp_device_record *d)
{
    return d->kind == TP_DEVICE_SYNC &&
           (d->copy_kind == TP_SYNC_EVENT || d->copy_kind == TP_SYNC_STREAM_WAIT_EVENT);
}

/* Kineto's deviceProperties fields. */
struct tp_device_prop {
    int id;
    char name[256];
    uint64_t total_global_mem;
    int compute_major, compute_minor;
    int max_threads_per_block;
    int max_threads_per_sm;
    int regs_per_block, regs_per_sm;
    int warp_size;
    int smem_per_block, smem_per_sm, smem_per_block_optin, reserved_smem_per_block;
    int num_sms;
};

#endif
