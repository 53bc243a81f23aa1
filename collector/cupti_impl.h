/*
 * cupti_impl.h - what the files of the CUPTI side share (private): the
 * table of CUPTI's entry points and the loaded library's state
 * (cupti_load.c), the buffer pool's hand-over (cupti_buffers.c), the
 * record store (cupti_decode.c) and the callback-id classes
 * (cupti_cbid.c).  Uses point one way: cupti.c (lifecycle) -> decode ->
 * buffers -> load; cbid stands alone.
 */
#ifndef TRAINPROF_COLLECTOR_CUPTI_IMPL_H
#define TRAINPROF_COLLECTOR_CUPTI_IMPL_H

#include "cupti.h"

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_result.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>

#include <stddef.h>
#include <stdint.h>

#define TP_CUPTI_MIN_VERSION    130000u
#define TP_CUPTI_TOGGLE_VERSION 130001u  /* 13.0 Update 1: disabling kinds is safe */
#define TP_CUPTI_FINALIZE_CUDA  12060    /* cuptiFinalize with graphs fixed (notes 2.5) */

#define TP_BUF_SIZE   (4u << 20)

/* ---- the loaded library (cupti_load.c) ---- */

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

struct tp_cupti_fns {
#define X(name, req) __typeof__(name) *name;
    TP_CUPTI_FNS(X)
#undef X
};

/* Every entry point, typed from the real prototypes; zeroed unless loaded. */
extern struct tp_cupti_fns tp_cupti_fn;

enum { ST_UNTRIED = 0, ST_ACTIVE, ST_UNAVAILABLE, ST_FINISHED, ST_OFF };

extern int tp_cupti_state;               /* ST_*; set on tp-flush */
extern uint32_t tp_cupti_version;        /* cuptiGetVersion's */
extern char tp_cupti_status_buf[160];    /* tp_cupti_status() */
extern CUpti_SubscriberHandle tp_cupti_subscriber;

/* tp_cupti_load - find and load libcupti, check its version, subscribe.
 * 0, or -1 with the state unavailable and one line printed. */
int tp_cupti_load(void);

/* tp_cupti_unavailable - state unavailable for good, "why" in the status. */
void tp_cupti_unavailable(const char *why);

/* tp_cupti_result_str - CUPTI's text for "r". */
const char *tp_cupti_result_str(CUptiResult r);

/* ---- buffers (cupti_buffers.c) ---- */

/* tp_cupti_buffers_register - our clock as CUPTI's timestamps, then the
 * pool's first buffers and the request/complete callbacks.  0 or -1. */
int tp_cupti_buffers_register(void);

/* tp_cupti_done_pop - the oldest completed buffer: its slot, *valid its
 * bytes; -1 when none waits.  tp_cupti_buf_at - the slot's mapping. */
int tp_cupti_done_pop(size_t *valid);
uint8_t *tp_cupti_buf_at(int slot);

/* tp_cupti_buf_release - zero slot "i" if "used" and make it free again. */
void tp_cupti_buf_release(int i, int used);

/* tp_cupti_take_recycled - records lost since the last call by recycling
 * undecoded buffers (the pool was full). */
uint64_t tp_cupti_take_recycled(void);

/* tp_cupti_free_overhead - free what an OVERHEAD record owns. */
void tp_cupti_free_overhead(const CUpti_Activity *a);

/* ---- records (cupti_decode.c) ---- */

/* tp_cupti_drain - decode every completed buffer and give it back. */
void tp_cupti_drain(void);

/* tp_cupti_count_dropped - "n" more records lost (CUPTI's own count). */
void tp_cupti_count_dropped(uint64_t n);

/* ---- callback ids (cupti_cbid.c) ---- */

/* The class (enum tp_cb_class) of each runtime and driver cbid. */
extern const uint8_t tp_cupti_rt_class[CUPTI_RUNTIME_TRACE_CBID_SIZE];
extern const uint8_t tp_cupti_drv_class[CUPTI_DRIVER_TRACE_CBID_SIZE];

#endif
