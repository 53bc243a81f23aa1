/*
 * test_cupti.c - the CUPTI collector: record decoding on hand-made CUDA 13.0
 * record structs, windows (take, discard, unfinished, CUDA event records
 * kept across windows), and the lifecycle
 * against the fake libcupti (build/fakes/libcupti.so) driven by the fake
 * runtime (build/fakes/libcudart.so.13).
 *
 * DESIGN
 * Each test runs in its own process (CK_FORK=yes, as `make check-unit` runs
 * it): the collector's state, the configuration read once by
 * tp_config_init() and the fakes' environment variables (read when the fake
 * is loaded) all start fresh.  With CK_FORK=no the lifecycle tests skip.
 * The fakes are found next to this binary: <build>/tests/test_cupti ->
 * <build>/fakes/; if they were not built (`make fakes`), those tests skip
 * with a message, or fail where TP_TEST_NEED_FAKES is set (make check-unit,
 * which builds them first).
 */
#include "collector/common/clock.h"
#include "collector/config/config.h"
#include "collector/device/cupti.h"
#include "collector/device/cupti_impl.h"
#include "collector/drain/join.h"
#include "collector/record/intern.h"

#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cuda_runtime_api.h>

#include <check.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tp_test.h"

/* ---- decoding ----------------------------------------------------------- */

static const struct tp_device_record *find_rec_by(const struct tp_device_batch *w, uint32_t corr)
{
    for (size_t i = 0; i < w->n_rec; i++)
        if (w->rec[i].correlation == corr)
            return &w->rec[i];
    ck_abort_msg("no record with correlation %u", corr);
    return NULL;
}

static struct tp_device_batch take_all(void)
{
    struct tp_device_batch w;
    tp_cupti_take(0, UINT64_MAX, &w);
    return w;
}

/* Empty the pending lists (for CK_FORK=no, where tests share a process). */
static void fresh(void)
{
    struct tp_device_batch w;
    tp_cupti_take(0, UINT64_MAX, &w);
    tp_cupti_window_free(&w);
    tp_cupti_take(UINT64_MAX, UINT64_MAX, &w);
    tp_cupti_window_free(&w);
}

static void add_api(int driver, uint32_t cbid, uint32_t corr, uint64_t start, uint64_t end)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = cbid;
    a.start = start;
    a.end = end;
    a.processId = 1;
    a.threadId = 4242;
    a.correlationId = corr;
    ck_assert_int_eq(tp_cupti_decode(&a), 1);
}

static void add_kernel(uint32_t corr, uint64_t start, uint64_t end)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = start;
    k.end = end;
    k.correlationId = corr;
    k.streamId = 7;
    k.name = "_Z4stepv";
    ck_assert_int_eq(tp_cupti_decode(&k), 1);
}

/* A name pointer CUPTI reuses for another kernel after a module unload
 * (same address, same length, other bytes) is not served from the cache. */
START_TEST(test_decode_kernel_name_reused)
{
    fresh();
    static char name[] = "_Z4stepv";
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1000;
    k.end = 1500;
    k.correlationId = 1;
    k.name = name;
    ck_assert_int_eq(tp_cupti_decode(&k), 1);
    memcpy(name, "_Z4stopv", sizeof name);
    k.correlationId = 2;
    ck_assert_int_eq(tp_cupti_decode(&k), 1);
    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_rec, 2);
    ck_assert_str_eq(tp_intern_str(w.rec[0].name), "step()");
    ck_assert_str_eq(tp_intern_str(w.rec[1].name), "stop()");
    tp_cupti_window_free(&w);
}
END_TEST

/* INTERNAL_LAUNCH_API records (a launch outside any public API call, cbid
 * unused) are kept as driver launches: the window waits for their kernel,
 * their external correlation reaches it, and no host call claims them. */
START_TEST(test_decode_internal_launch)
{
    fresh();
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API;
    a.cbid = 0;
    a.start = 1000;
    a.end = 1100;
    a.correlationId = 41;
    ck_assert_int_eq(tp_cupti_decode(&a), 1);
    ck_assert_uint_eq(tp_cupti_unfinished(0, UINT64_MAX), 1);
    CUpti_ActivityExternalCorrelation e;
    memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = TP_CUPTI_EXT_KIND;
    e.externalId = 555;
    e.correlationId = 41;
    ck_assert_int_eq(tp_cupti_decode(&e), 1);
    add_kernel(41, 1200, 1300);
    ck_assert_uint_eq(tp_cupti_unfinished(0, UINT64_MAX), 0);
    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_api, 1);
    ck_assert_int_eq(w.api[0].internal, 1);
    ck_assert_int_eq(w.api[0].driver, 1);
    ck_assert_int_eq(tp_cupti_cb_class(1, w.api[0].cbid), TP_CB_LAUNCH);
    ck_assert_uint_eq(w.n_ext, 1);
    ck_assert_uint_eq(w.ext[0].external_id, 555);
    tp_cupti_window_free(&w);
}
END_TEST

START_TEST(test_decode_kernel)
{
    fresh();
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.registersPerThread = 40;
    k.start = 1000;
    k.end = 1500;
    k.deviceId = 2;
    k.contextId = 3;
    k.streamId = 14;
    k.gridX = 5, k.gridY = 6, k.gridZ = 7;
    k.blockX = 128, k.blockY = 2, k.blockZ = 1;
    k.staticSharedMemory = 1024;
    k.dynamicSharedMemory = 4096;
    k.correlationId = 77;
    k.name = "_Z6kernelPfi";
    k.graphId = 9;
    k.graphNodeId = 0x100000001ull;
    ck_assert_int_eq(tp_cupti_decode(&k), 1);
    /* The same name pointer again: served from the cache. */
    k.correlationId = 78;
    k.start = 2000;
    k.end = 1900;                            /* end before start -> end = start */
    ck_assert_int_eq(tp_cupti_decode(&k), 1);

    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_rec, 2);
    ck_assert_uint_eq(w.n_api, 0);
    const struct tp_device_record *r = &w.rec[0];
    ck_assert_int_eq(r->kind, TP_DEVICE_KERNEL);
    ck_assert_uint_eq(r->device, 2);
    ck_assert_uint_eq(r->context, 3);
    ck_assert_uint_eq(r->stream, 14);
    ck_assert_uint_eq(r->correlation, 77);
    ck_assert_uint_eq(r->start, 1000);
    ck_assert_uint_eq(r->end, 1500);
    ck_assert_int_eq(r->grid[0], 5);
    ck_assert_int_eq(r->grid[1], 6);
    ck_assert_int_eq(r->grid[2], 7);
    ck_assert_int_eq(r->block[0], 128);
    ck_assert_int_eq(r->block[1], 2);
    ck_assert_int_eq(r->block[2], 1);
    ck_assert_int_eq(r->static_smem, 1024);
    ck_assert_int_eq(r->dynamic_smem, 4096);
    ck_assert_uint_eq(r->registers, 40);
    ck_assert_uint_eq(r->graph_id, 9);
    ck_assert_uint_eq(r->graph_node_id, 0x100000001ull);
    ck_assert_str_eq(tp_intern_str(r->name), "kernel(float*, int)");
    ck_assert_uint_eq(w.rec[1].correlation, 78);
    ck_assert_uint_eq(w.rec[1].start, 2000);
    ck_assert_uint_eq(w.rec[1].end, 2000);
    ck_assert_uint_eq(w.rec[1].name, r->name);
    ck_assert_uint_eq(w.dropped, 0);
    tp_cupti_window_free(&w);
    ck_assert_ptr_null(w.rec);
}
END_TEST

START_TEST(test_decode_copies_sets_syncs)
{
    fresh();
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = 1u << 20;
    m.start = 100;
    m.end = 200;
    m.deviceId = 1;
    m.contextId = 2;
    m.streamId = 13;
    m.correlationId = 5;
    m.graphId = 3;
    m.graphNodeId = 4;
    ck_assert_int_eq(tp_cupti_decode(&m), 1);

    CUpti_ActivityMemcpyPtoP4 p;
    memset(&p, 0, sizeof p);
    p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    p.srcKind = p.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    p.bytes = 4096;
    p.start = 300;
    p.end = 350;
    p.deviceId = 1;
    p.contextId = 2;
    p.streamId = 15;
    p.srcDeviceId = 0;
    p.dstDeviceId = 1;
    p.correlationId = 6;
    ck_assert_int_eq(tp_cupti_decode(&p), 1);

    CUpti_ActivityMemset4 s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.value = 0xff;
    s.bytes = 8192;
    s.start = 400;
    s.end = 410;
    s.deviceId = 1;
    s.contextId = 2;
    s.streamId = 7;
    s.correlationId = 7;
    s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    s.graphId = 11;
    s.graphNodeId = 12;
    ck_assert_int_eq(tp_cupti_decode(&s), 1);

    CUpti_ActivitySynchronization2 y;
    memset(&y, 0, sizeof y);
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    y.start = 500;
    y.end = 900;
    y.correlationId = 8;
    y.contextId = 2;
    y.streamId = 13;
    ck_assert_int_eq(tp_cupti_decode(&y), 1);

    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_rec, 4);
    const struct tp_device_record *r = w.rec;
    ck_assert_int_eq(r[0].kind, TP_DEVICE_MEMCPY);
    ck_assert_uint_eq(r[0].copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    ck_assert_uint_eq(r[0].src_kind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
    ck_assert_uint_eq(r[0].dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    ck_assert_uint_eq(r[0].bytes, 1u << 20);
    ck_assert_uint_eq(r[0].device, 1);
    ck_assert_uint_eq(r[0].context, 2);
    ck_assert_uint_eq(r[0].stream, 13);
    ck_assert_uint_eq(r[0].correlation, 5);
    ck_assert_uint_eq(r[0].start, 100);
    ck_assert_uint_eq(r[0].end, 200);
    ck_assert_uint_eq(r[0].graph_id, 3);
    ck_assert_uint_eq(r[0].graph_node_id, 4);

    ck_assert_int_eq(r[1].kind, TP_DEVICE_MEMCPY);
    ck_assert_uint_eq(r[1].copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
    ck_assert_uint_eq(r[1].bytes, 4096);
    ck_assert_uint_eq(r[1].stream, 15);
    ck_assert_uint_eq(r[1].correlation, 6);

    ck_assert_int_eq(r[2].kind, TP_DEVICE_MEMSET);
    ck_assert_uint_eq(r[2].dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    ck_assert_uint_eq(r[2].bytes, 8192);
    ck_assert_uint_eq(r[2].stream, 7);
    ck_assert_uint_eq(r[2].correlation, 7);
    ck_assert_uint_eq(r[2].graph_id, 11);
    ck_assert_uint_eq(r[2].graph_node_id, 12);
    ck_assert_uint_eq(r[2].start, 400);
    ck_assert_uint_eq(r[2].end, 410);

    ck_assert_int_eq(r[3].kind, TP_DEVICE_SYNC);
    ck_assert_uint_eq(r[3].copy_kind, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
    ck_assert_uint_eq(r[3].context, 2);
    ck_assert_uint_eq(r[3].stream, 13);
    ck_assert_uint_eq(r[3].correlation, 8);
    ck_assert_uint_eq(r[3].start, 500);
    ck_assert_uint_eq(r[3].end, 900);
    tp_cupti_window_free(&w);
}
END_TEST

START_TEST(test_decode_api_filter)
{
    fresh();
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.start = 10;
    a.end = 20;
    a.threadId = 99;
    a.correlationId = 1;
    a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    ck_assert_int_eq(tp_cupti_decode(&a), 1);
    a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
    ck_assert_int_eq(tp_cupti_decode(&a), 0);
    a.cbid = CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000;
    a.correlationId = 2;
    a.start = 30;
    a.end = 40;
    ck_assert_int_eq(tp_cupti_decode(&a), 1);
    a.cbid = CUPTI_RUNTIME_TRACE_CBID___cudaGetKernel_v13000;
    ck_assert_int_eq(tp_cupti_decode(&a), 0);
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
    a.correlationId = 3;
    a.start = 50;
    a.end = 60;
    ck_assert_int_eq(tp_cupti_decode(&a), 1);
    a.cbid = CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent;
    ck_assert_int_eq(tp_cupti_decode(&a), 0);

    ck_assert_int_eq(tp_cupti_cb_class(0, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000),
                     TP_CB_LAUNCH);
    ck_assert_int_eq(tp_cupti_cb_class(0, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000),
                     TP_CB_GRAPH);
    ck_assert_int_eq(tp_cupti_cb_class(0, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020),
                     TP_CB_COPY);
    ck_assert_int_eq(tp_cupti_cb_class(0, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020),
                     TP_CB_SET);
    ck_assert_int_eq(tp_cupti_cb_class(0, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020),
                     TP_CB_SYNC);
    ck_assert_int_eq(tp_cupti_cb_class(1, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz),
                     TP_CB_LAUNCH);
    ck_assert_int_eq(tp_cupti_cb_class(1, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch), TP_CB_GRAPH);
    ck_assert_int_eq(tp_cupti_cb_class(1, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2),
                     TP_CB_COPY);
    ck_assert_int_eq(tp_cupti_cb_class(1, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2), TP_CB_SET);
    ck_assert_int_eq(tp_cupti_cb_class(1, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize), TP_CB_SYNC);
    ck_assert_int_eq(tp_cupti_cb_class(1, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2), TP_CB_OTHER);
    ck_assert_int_eq(tp_cupti_cb_class(0, 100000), TP_CB_OTHER);

    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_api, 3);
    ck_assert_uint_eq(w.api[0].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    ck_assert_uint_eq(w.api[0].driver, 0);
    ck_assert_uint_eq(w.api[0].correlation, 1);
    ck_assert_uint_eq(w.api[0].thread_id, 99);
    ck_assert_uint_eq(w.api[0].start, 10);
    ck_assert_uint_eq(w.api[0].end, 20);
    ck_assert_uint_eq(w.api[1].cbid, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000);
    ck_assert_uint_eq(w.api[2].cbid, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
    ck_assert_uint_eq(w.api[2].driver, 1);
    ck_assert_uint_eq(w.api[2].correlation, 3);
    tp_cupti_window_free(&w);
}
END_TEST

START_TEST(test_decode_ext_overhead_other)
{
    fresh();
    CUpti_ActivityExternalCorrelation e;
    memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
    e.externalId = 0xabcdef0123ull;
    e.correlationId = 21;
    ck_assert_int_eq(tp_cupti_decode(&e), 1);
    e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;  /* Kineto's operators */
    ck_assert_int_eq(tp_cupti_decode(&e), 0);
    e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;  /* Kineto's annotations */
    ck_assert_int_eq(tp_cupti_decode(&e), 0);
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 21, 100, 110);

    /* OVERHEAD: counted, and overheadData freed (ASan/valgrind would see a leak). */
    CUpti_ActivityOverhead3 o;
    memset(&o, 0, sizeof o);
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    o.start = 1;
    o.end = 2;
    o.overheadData = malloc(64);
    ck_assert_int_eq(tp_cupti_decode(&o), 0);
    o.overheadData = NULL;
    ck_assert_int_eq(tp_cupti_decode(&o), 0);

    CUpti_Activity m2 = { .kind = CUPTI_ACTIVITY_KIND_MEMORY2 };
    ck_assert_int_eq(tp_cupti_decode(&m2), 0);
    CUpti_Activity marker = { .kind = CUPTI_ACTIVITY_KIND_MARKER };
    ck_assert_int_eq(tp_cupti_decode(&marker), -2);

    /* No timing: dropped and counted. */
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = 22;
    ck_assert_int_eq(tp_cupti_decode(&k), -1);

    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_ext, 1);
    ck_assert_uint_eq(w.ext[0].correlation, 21);
    ck_assert_uint_eq(w.ext[0].external_id, 0xabcdef0123ull);
    ck_assert_uint_eq(w.n_api, 1);
    ck_assert_uint_eq(w.n_rec, 0);
    ck_assert_uint_eq(w.dropped, 1);
    tp_cupti_window_free(&w);
    w = take_all();
    ck_assert_uint_eq(w.dropped, 0);
    tp_cupti_window_free(&w);
}
END_TEST

START_TEST(test_take_window)
{
    fresh();
    /* before the window: API 1 and its kernel (ends in the window: taken by time) */
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, 50, 60);
    add_kernel(1, 70, 80);
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 2, 90, 95);
    add_kernel(2, 150, 160);                 /* starts in the window */
    /* in the window [100, 200]: API 3 (kernel after the window), API 4 */
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 4, 180, 185);
    add_kernel(4, 190, 195);
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 3, 120, 130);
    add_kernel(3, 250, 260);
    /* after the window: API 5 with its kernel */
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 5, 300, 310);
    add_kernel(5, 320, 330);
    CUpti_ActivityExternalCorrelation e;
    memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = TP_CUPTI_EXT_KIND;
    for (uint32_t c = 1; c <= 5; c++) {
        e.correlationId = c;
        e.externalId = 1000 + c;
        ck_assert_int_eq(tp_cupti_decode(&e), 1);
    }
    ck_assert_uint_eq(tp_cupti_unfinished(100, 200), 0);

    struct tp_device_batch w;
    tp_cupti_take(100, 200, &w);
    ck_assert_uint_eq(w.n_api, 2);
    ck_assert_uint_eq(w.api[0].correlation, 3);   /* sorted by start */
    ck_assert_uint_eq(w.api[1].correlation, 4);
    ck_assert_uint_eq(w.n_rec, 3);
    ck_assert_uint_eq(w.rec[0].correlation, 2);   /* started in the window */
    ck_assert_uint_eq(w.rec[1].correlation, 4);
    ck_assert_uint_eq(w.rec[2].correlation, 3);   /* after it, but its launch is in it */
    ck_assert_uint_eq(w.n_ext, 3);
    ck_assert_uint_eq(w.ext[0].correlation, 2);   /* sorted by correlation */
    ck_assert_uint_eq(w.ext[1].correlation, 3);
    ck_assert_uint_eq(w.ext[2].correlation, 4);
    ck_assert_uint_eq(w.ext[2].external_id, 1004);
    tp_cupti_window_free(&w);

    /* Records 1 were discarded; 5 is still pending. */
    w = take_all();
    ck_assert_uint_eq(w.n_api, 1);
    ck_assert_uint_eq(w.api[0].correlation, 5);
    ck_assert_uint_eq(w.n_rec, 1);
    ck_assert_uint_eq(w.rec[0].correlation, 5);
    ck_assert_uint_eq(w.n_ext, 1);
    ck_assert_uint_eq(w.ext[0].external_id, 1005);
    tp_cupti_window_free(&w);
}
END_TEST

/* A window's tail: launch 7's kernel arrives only after its window was
 * written; the next take discards it (it started before that window) and
 * counts it as dropped.  A kernel of a launch no window took (warmup) is
 * discarded without being counted, and so is nothing else. */
START_TEST(test_take_late_tail_counted)
{
    fresh();
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 6, 120, 125);
    add_kernel(6, 130, 140);
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 7, 190, 195);
    struct tp_device_batch w;
    tp_cupti_take(100, 200, &w);                 /* kernel 7 not there yet */
    ck_assert_uint_eq(w.n_api, 2);
    ck_assert_uint_eq(w.n_rec, 1);
    ck_assert_uint_eq(w.dropped, 0);
    tp_cupti_window_free(&w);
    add_kernel(7, 198, 240);                     /* late: starts before the next window */
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 3, 150, 155);
    add_kernel(3, 160, 170);                     /* a launch no window took */
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 8, 320, 325);
    add_kernel(8, 330, 340);
    tp_cupti_take(300, 400, &w);
    ck_assert_uint_eq(w.n_rec, 1);
    ck_assert_uint_eq(w.rec[0].correlation, 8);
    ck_assert_uint_eq(w.dropped, 1);             /* 7, not 3 */
    tp_cupti_window_free(&w);
}
END_TEST

/* Records timed outside the bounds of tp_cupti_pending_clock (another
 * client's timestamp callback) are refused and counted, kernels and API
 * records alike; inside, stored as before; unset bounds check nothing. */
START_TEST(test_decode_refuses_foreign_times)
{
    fresh();
    tp_cupti_pending_clock(tp_clock_ns_to_ticks(1000000), tp_clock_ns_to_ticks(2000000));
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = 5;
    k.name = "_Z4stepv";
    k.start = 1500000;
    k.end = 1600000;
    ck_assert_int_eq(tp_cupti_decode(&k), 1);
    k.start = 2500000;                           /* after "now" */
    k.end = 2600000;
    ck_assert_int_eq(tp_cupti_decode(&k), 0);
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    a.correlationId = 5;
    a.start = 500000;                            /* before we started */
    a.end = 600000;
    ck_assert_int_eq(tp_cupti_decode(&a), 0);
    ck_assert_uint_eq(tp_cupti_pending_off_clock(), 2);
    ck_assert_uint_eq(tp_cupti_pending_off_clock(), 0);
    tp_cupti_pending_clock(0, UINT64_MAX);
    ck_assert_int_eq(tp_cupti_decode(&a), 1);
    ck_assert_uint_eq(tp_cupti_pending_off_clock(), 0);
    struct tp_device_batch w;
    tp_cupti_take(0, UINT64_MAX, &w);
    ck_assert_uint_eq(w.n_rec, 1);
    ck_assert_uint_eq(w.n_api, 1);
    tp_cupti_window_free(&w);
}
END_TEST

static void add_cuda_event(uint32_t context, uint32_t event, uint32_t corr, uint32_t stream)
{
    CUpti_ActivityCudaEvent2 e;
    memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    e.contextId = context;
    e.eventId = event;
    e.correlationId = corr;
    e.streamId = stream;
    e.deviceId = 3;
    e.cudaEventSyncId = 1000 + corr;
    ck_assert_int_eq(tp_cupti_decode(&e), 1);
}

/* CUDA_EVENT records as CUPTI >= 12.8 writes them (CudaEvent2), and the
 * older 24-byte CudaEvent from exactly sized memory: the decoder reads only
 * the prefix both share (ASan would see a read past it).  An event sync
 * keeps its cudaEventId.  None of them is a device record. */
START_TEST(test_decode_cuda_event)
{
    fresh();
    add_cuda_event(1, 5, 40, 14);
    CUpti_ActivityCudaEvent *old = malloc(sizeof *old);
    ck_assert_ptr_nonnull(old);
    memset(old, 0, sizeof *old);
    old->kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    old->contextId = 1;
    old->eventId = 5;
    old->correlationId = 10;
    old->streamId = 13;
    ck_assert_int_eq(tp_cupti_decode(old), 1);
    free(old);

    CUpti_ActivitySynchronization2 y;
    memset(&y, 0, sizeof y);
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
    y.start = 500;
    y.end = 600;
    y.correlationId = 50;
    y.contextId = 1;
    y.streamId = 20;
    y.cudaEventId = 5;
    y.cudaEventSyncId = 1040;
    ck_assert_int_eq(tp_cupti_decode(&y), 1);

    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_rec, 1);
    ck_assert_int_eq(w.rec[0].kind, TP_DEVICE_SYNC);
    ck_assert_uint_eq(w.rec[0].copy_kind, TP_SYNC_STREAM_WAIT_EVENT);
    ck_assert_uint_eq(w.rec[0].event_id, 5);
    ck_assert_int_eq(tp_device_waits_on_event(&w.rec[0]), 1);
    ck_assert_uint_eq(w.n_cuda_event, 2);
    ck_assert_uint_eq(w.cuda_event[0].correlation, 10);    /* sorted by correlation */
    ck_assert_uint_eq(w.cuda_event[0].stream, 13);
    ck_assert_uint_eq(w.cuda_event[1].context, 1);
    ck_assert_uint_eq(w.cuda_event[1].event_id, 5);
    ck_assert_uint_eq(w.cuda_event[1].correlation, 40);
    ck_assert_uint_eq(w.cuda_event[1].stream, 14);
    ck_assert_uint_eq(w.dropped, 0);
    tp_cupti_window_free(&w);
}
END_TEST

/* CUDA event records outlive the window they came in: a later window still
 * gets, per event, the last record at or before the cut of the takes
 * before it (the highest correlation they consumed) and every newer one. */
START_TEST(test_take_keeps_cuda_events)
{
    fresh();
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, 50, 60);   /* warmup */
    add_cuda_event(1, 1, 2, 13);
    add_cuda_event(1, 2, 3, 15);
    add_cuda_event(1, 1, 4, 14);
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 5, 150, 160); /* the window */
    add_cuda_event(1, 1, 7, 16);                                              /* after its cut */
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 8, 300, 310); /* later */

    struct tp_device_batch w;
    tp_cupti_take(100, 200, &w);
    ck_assert_uint_eq(w.n_api, 1);
    static const uint32_t all[][3] = { { 1, 2, 13 }, { 1, 4, 14 }, { 1, 7, 16 }, { 2, 3, 15 } };
    ck_assert_uint_eq(w.n_cuda_event, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(w.cuda_event[i].event_id, all[i][0]);
        ck_assert_uint_eq(w.cuda_event[i].correlation, all[i][1]);
        ck_assert_uint_eq(w.cuda_event[i].stream, all[i][2]);
    }
    tp_cupti_window_free(&w);

    /* cut 5: event 1's record 2 is superseded by 4, which a sync after 5
     * would pick over it; 7 may still be after a later sync's record */
    tp_cupti_take(250, 400, &w);
    ck_assert_uint_eq(w.n_api, 1);
    ck_assert_uint_eq(w.n_cuda_event, 3);
    ck_assert_uint_eq(w.cuda_event[0].correlation, 4);
    ck_assert_uint_eq(w.cuda_event[1].correlation, 7);
    ck_assert_uint_eq(w.cuda_event[2].correlation, 3);
    tp_cupti_window_free(&w);

    /* cut 8: only the last of each event is left */
    w = take_all();
    ck_assert_uint_eq(w.n_cuda_event, 2);
    ck_assert_uint_eq(w.cuda_event[0].correlation, 7);
    ck_assert_uint_eq(w.cuda_event[1].correlation, 3);
    tp_cupti_window_free(&w);
}
END_TEST

START_TEST(test_unfinished)
{
    fresh();
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, 100, 110);
    add_api(1, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, 101, 109);   /* same launch */
    add_api(0, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 2, 120, 130);
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 3, 140, 150);
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 4, 160, 170);
    add_api(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 5, 500, 510);
    ck_assert_uint_eq(tp_cupti_unfinished(100, 200), 2);
    ck_assert_uint_eq(tp_cupti_unfinished(0, 1000), 3);
    add_kernel(2, 300, 310);
    ck_assert_uint_eq(tp_cupti_unfinished(100, 200), 1);
    add_kernel(1, 200, 210);
    ck_assert_uint_eq(tp_cupti_unfinished(100, 200), 0);
    ck_assert_uint_eq(tp_cupti_unfinished(0, 1000), 1);
}
END_TEST

START_TEST(test_absent_is_harmless)
{
    fresh();
    /* Nothing started: every call is a no-op. */
    tp_cupti_collect(1);
    tp_cupti_ext_push(7);
    tp_cupti_ext_pop();
    ck_assert_int_eq(tp_cupti_enabled(), 0);
    ck_assert_uint_eq(tp_cupti_unfinished(0, UINT64_MAX), 0);
    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_rec + w.n_api + w.n_ext, 0);
    tp_cupti_window_free(&w);
    tp_cupti_stop(0);
    tp_cupti_stop(1);
    ck_assert_str_eq(tp_cupti_status(), "not started");
}
END_TEST

/* ---- the layout table against the headers of each CUPTI release ----------- */

/* Offset in row "l" of "field" of family "fam", its struct's name and size,
 * and the field's width in the CUDA 13.0 struct; -1 if not a field we read. */
static int row_field(const struct tp_cupti_layout *l, const char *fam, const char *field,
                     const char **sname, unsigned *size, unsigned *width)
{
#define TP_T_FIELD(member, REF, f) \
    if (strcmp(field, #f) == 0) { \
        *width = sizeof(((REF *)0)->f); \
        return l->member.f; \
    }
#define TP_T_FAMILY(member, FIELDS, REF, KIND) \
    if (strcmp(fam, #member) == 0) { \
        *sname = l->member.struct_name; \
        *size = l->member.size; \
        FIELDS(TP_T_FIELD_##member, REF) \
        return -1; \
    }
#define TP_T_FIELD_kernel(REF, f) TP_T_FIELD(kernel, REF, f)
#define TP_T_FIELD_memcpy(REF, f) TP_T_FIELD(memcpy, REF, f)
#define TP_T_FIELD_p2p(REF, f) TP_T_FIELD(p2p, REF, f)
#define TP_T_FIELD_memset(REF, f) TP_T_FIELD(memset, REF, f)
#define TP_T_FIELD_sync(REF, f) TP_T_FIELD(sync, REF, f)
#define TP_T_FIELD_event(REF, f) TP_T_FIELD(event, REF, f)
#define TP_T_FIELD_api(REF, f) TP_T_FIELD(api, REF, f)
#define TP_T_FIELD_ext(REF, f) TP_T_FIELD(ext, REF, f)
#define TP_T_FIELD_overhead(REF, f) TP_T_FIELD(overhead, REF, f)
    TP_CUPTI_FAMILIES(TP_T_FAMILY)
    return -1;
}

#define TP_T_COUNT(T, f) +1
#define TP_T_NFIELDS(member, FIELDS, REF, KIND) \
    if (strcmp(fam, #member) == 0) \
        return 0 FIELDS(TP_T_COUNT, REF);
static int family_fields(const char *fam)
{
    TP_CUPTI_FAMILIES(TP_T_NFIELDS)
    return -1;
}

/* tests/unit/data/cupti_layouts.txt (scripts/dev/cupti-layouts: the structs
 * and offsets of the real 12.4, 12.6, 12.8, 12.9, 13.0, 13.1 and 13.2
 * headers) agrees with the table, row by row, field by field; every row
 * is checked by at least one release. */
START_TEST(test_layouts_match_headers)
{
    const char *dir = getenv("TP_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/data/cupti_layouts.txt", dir && *dir ? dir : ".");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t nrows;
    const struct tp_cupti_layout *rows = tp_cupti_layouts(&nrows);
    int checked[16] = { 0 };
    ck_assert_uint_le(nrows, 16);
    char line[4096];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        unsigned version, size;
        char fam[32], sname[64];
        int used = 0;
        ck_assert_int_eq(sscanf(line, "%u %31s %63s size %u%n", &version, fam, sname, &size, &used),
                         4);
        const struct tp_cupti_layout *l = tp_cupti_layout_for(version);
        ck_assert_msg(l != NULL, "no row for CUPTI %u", version);
        checked[l - rows]++;
        const char *row_sname = NULL;
        unsigned row_size = 0, width = 0;
        int n = 0;
        char field[64];
        unsigned off, w;
        int k;
        for (const char *p = line + used; sscanf(p, " %63[^@]@%u:%u%n", field, &off, &w, &k) == 3;
             p += k) {
            int o = row_field(l, fam, field, &row_sname, &row_size, &width);
            ck_assert_msg(o >= 0, "%s.%s not in the table", fam, field);
            ck_assert_msg((unsigned)o == off, "CUPTI %u %s.%s: table %d, header %u", version, sname,
                          field, o, off);
            ck_assert_msg(width == w, "CUPTI %u %s.%s: width %u, header %u", version, sname, field,
                          width, w);
            ck_assert_uint_le(off + w, size);
            n++;
        }
        ck_assert_int_eq(n, family_fields(fam));
        ck_assert_msg(strcmp(row_sname, sname) == 0, "CUPTI %u %s: table %s, header %s", version,
                      fam, row_sname, sname);
        ck_assert_msg(row_size == size, "CUPTI %u %s: table %u bytes, header %u", version, sname,
                      row_size, size);
        lines++;
    }
    fclose(f);
    ck_assert_int_ge(lines, 7 * 9);
    for (size_t i = 0; i < nrows; i++)
        ck_assert_msg(checked[i] > 0, "row %s checked against no header", rows[i].cuda);
    /* The ranges: 12.4 (22) first, no gap, 13.x to its end, nothing after. */
    ck_assert_ptr_null(tp_cupti_layout_for(21));
    ck_assert_ptr_null(tp_cupti_layout_for(140000));
    ck_assert_uint_eq(rows[0].from, 22);
    for (size_t i = 1; i < nrows; i++)
        ck_assert_uint_eq(rows[i].from, rows[i - 1].to + 1);
    ck_assert_str_eq(tp_cupti_layout_for(23)->kernel.struct_name, "CUpti_ActivityKernel9");
    ck_assert_str_eq(tp_cupti_layout_for(139999)->kernel.struct_name, "CUpti_ActivityKernel11");
}
END_TEST

/* CUDA 12.4's records, each in a buffer exactly its struct's size (ASan
 * catches a read past it), decoded through the 12.4 row. */
START_TEST(test_decode_12_4)
{
    fresh();
    tp_cupti_layout_use(tp_cupti_layout_for(22));
    CUpti_ActivityKernel9 *k = calloc(1, sizeof *k);
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->start = 1000, k->end = 1500, k->deviceId = 2, k->contextId = 3, k->streamId = 14;
    k->gridX = 5, k->blockX = 128, k->registersPerThread = 40, k->correlationId = 77;
    k->name = "_Z6kernelPfi";
    k->graphNodeId = 0x100000001ull;
    ck_assert_int_eq(tp_cupti_decode(k), 1);
    CUpti_ActivityMemcpy5 *m = calloc(1, sizeof *m);
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, m->bytes = 4096;
    m->start = 2000, m->end = 2100, m->streamId = 15, m->correlationId = 78;
    ck_assert_int_eq(tp_cupti_decode(m), 1);
    CUpti_ActivitySynchronization *y = calloc(1, sizeof *y);
    y->kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
    y->start = 3000, y->end = 3100, y->correlationId = 79, y->cudaEventId = 1001;
    ck_assert_int_eq(tp_cupti_decode(y), 1);
    CUpti_ActivityCudaEvent *e = calloc(1, sizeof *e);
    e->kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    e->correlationId = 80, e->streamId = 16, e->eventId = 1001;
    ck_assert_int_eq(tp_cupti_decode(e), 1);
    CUpti_ActivityOverhead3 *o = calloc(1, sizeof *o);
    o->kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o->overheadData = malloc(16);              /* freed by the decoder (LSan: leak if not) */
    ck_assert_int_eq(tp_cupti_decode(o), 0);     /* counted only */

    struct tp_device_batch w = take_all();
    ck_assert_uint_eq(w.n_rec, 3);
    const struct tp_device_record *r = find_rec_by(&w, 77);
    ck_assert_int_eq(r->kind, TP_DEVICE_KERNEL);
    ck_assert_uint_eq(r->device, 2);
    ck_assert_uint_eq(r->stream, 14);
    ck_assert_int_eq(r->grid[0], 5);
    ck_assert_int_eq(r->block[0], 128);
    ck_assert_uint_eq(r->registers, 40);
    ck_assert_uint_eq(r->graph_node_id, 0x100000001ull);
    ck_assert_str_eq(tp_intern_str(r->name), "kernel(float*, int)");
    r = find_rec_by(&w, 78);
    ck_assert_int_eq(r->kind, TP_DEVICE_MEMCPY);
    ck_assert_uint_eq(r->bytes, 4096);
    ck_assert_uint_eq(r->copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
    r = find_rec_by(&w, 79);
    ck_assert_int_eq(r->kind, TP_DEVICE_SYNC);
    ck_assert_uint_eq(r->event_id, 1001);
    tp_cupti_window_free(&w);
    free(k), free(m), free(y), free(e), free(o);
}
END_TEST

/* ---- against the fakes ---------------------------------------------------- */

static char fakes_dir[PATH_MAX];

/* 1 if the fakes are there and tests fork; else says why and returns 0. */
static int have_fakes(void)
{
    const char *f = getenv("CK_FORK");
    if (f && strcmp(f, "no") == 0) {
        fprintf(stderr, "test_cupti: lifecycle tests skipped: they need CK_FORK=yes\n");
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    char *tests = dirname(exe);               /* <build>/tests */
    char *build = dirname(tests);
    snprintf(fakes_dir, sizeof fakes_dir, "%s/fakes", build);
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/libcupti.so", fakes_dir);
    if (access(p, R_OK) != 0) {
        /* make check-unit builds the fakes first: missing there is a failure */
        ck_assert_msg(!getenv("TP_TEST_NEED_FAKES"), "%s missing: the fakes were not built", p);
        fprintf(stderr, "test_cupti: %s missing (make fakes): lifecycle test skipped\n", p);
        return 0;
    }
    return 1;
}

typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
typedef cudaError_t (*memcpy_fn)(void *, const void *, size_t, enum cudaMemcpyKind);
typedef cudaError_t (*sync_fn)(cudaStream_t);
typedef void **(*regfat_fn)(void *);
typedef void (*regfun_fn)(void **, const char *, char *, const char *, int, uint3 *, uint3 *,
                          dim3 *, dim3 *, int *);

static struct {
    void *rt;
    launch_fn launch;
    memcpy_fn copy;
    sync_fn sync;
} fk;

static void stub_kernel(void)
{
}

/* Environment for the fakes and the configuration, then the fake runtime,
 * with one kernel registered for stub_kernel. */
static void setup(const char *log)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/libcupti.so", fakes_dir);
    setenv("TRAINPROF_CUPTI_PATH", p, 1);
    if (log)
        setenv("FAKE_CUPTI_LOG", log, 1);
    tp_clock_init();
    tp_config_init();
    snprintf(p, sizeof p, "%s/libcudart.so.13", fakes_dir);
    fk.rt = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    ck_assert_msg(fk.rt != NULL, "%s", dlerror());
    fk.launch = (launch_fn)dlsym(fk.rt, "cudaLaunchKernel");
    fk.copy = (memcpy_fn)dlsym(fk.rt, "cudaMemcpy");
    fk.sync = (sync_fn)dlsym(fk.rt, "cudaStreamSynchronize");
    regfat_fn regfat = (regfat_fn)dlsym(fk.rt, "__cudaRegisterFatBinary");
    regfun_fn regfun = (regfun_fn)dlsym(fk.rt, "__cudaRegisterFunction");
    ck_assert(fk.launch && fk.copy && fk.sync && regfat && regfun);
    static char name[] = "_Z6kernelPfi";
    void **h = regfat(NULL);
    regfun(h, (const char *)(uintptr_t)stub_kernel, name, name, -1, NULL, NULL, NULL, NULL, NULL);
}

static void launch_one(void)
{
    dim3 g = { 2, 3, 4 }, b = { 32, 1, 1 };
    ck_assert_int_eq(fk.launch((const void *)(uintptr_t)stub_kernel, g, b, NULL, 128, NULL),
                     cudaSuccess);
}

static int count_lines(const char *text, const char *line)
{
    int n = 0;
    size_t len = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += len)
        if ((p == text || p[-1] == '\n') && (p[len] == '\n' || p[len] == 0))
            n++;
    return n;
}

static const struct tp_device_api *find_api(const struct tp_device_batch *w, uint32_t cbid)
{
    for (size_t i = 0; i < w->n_api; i++)
        if (w->api[i].cbid == cbid)
            return &w->api[i];
    return NULL;
}

static const struct tp_device_record *find_rec(const struct tp_device_batch *w, uint32_t corr)
{
    for (size_t i = 0; i < w->n_rec; i++)
        if (w->rec[i].correlation == corr)
            return &w->rec[i];
    return NULL;
}

/* One row of the layout table each (and a later 13.x than any known): the
 * fake writes that release's structs, at their sizes. */
static const char *const fake_versions[] = {
    "22", "24", "26", "28", "130000", "130001", "130101", "130202", "130300",
};

START_TEST(test_fake_records)
{
    if (!have_fakes())
        return;
    setenv("FAKE_CUPTI_VERSION", fake_versions[_i], 1);
    setup(NULL);
    ck_assert_int_eq(tp_cupti_start(1), 0);
    ck_assert_int_eq(tp_cupti_enabled(), 1);
    char want[64];
    snprintf(want, sizeof want, "active (CUPTI %s)", fake_versions[_i]);
    ck_assert_str_eq(tp_cupti_status(), want);

    uint64_t t0 = tp_clock_now();
    launch_one();
    static char src[4096], dst[4096];
    ck_assert_int_eq(fk.copy(dst, src, sizeof src, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(fk.sync(NULL), cudaSuccess);
    uint64_t t1 = tp_clock_now();
    tp_cupti_collect(1);
    ck_assert_uint_eq(tp_cupti_unfinished(t0, t1), 0);

    struct tp_device_batch w;
    tp_cupti_take(t0, t1, &w);
    ck_assert_uint_eq(w.n_api, 3);
    ck_assert_uint_eq(w.n_rec, 3);
    ck_assert_uint_eq(w.dropped, 0);
    const struct tp_device_api *la = find_api(&w, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    ck_assert_ptr_nonnull(la);
    ck_assert_uint_eq(la->driver, 0);
    ck_assert_uint_eq(la->thread_id, (uint32_t)syscall(SYS_gettid));
    ck_assert(la->start >= t0 && la->end <= t1 && la->start <= la->end);
    const struct tp_device_record *k = find_rec(&w, la->correlation);
    ck_assert_ptr_nonnull(k);
    ck_assert_int_eq(k->kind, TP_DEVICE_KERNEL);
    ck_assert_str_eq(tp_intern_str(k->name), "kernel(float*, int)");
    ck_assert_int_eq(k->grid[0], 2);
    ck_assert_int_eq(k->grid[1], 3);
    ck_assert_int_eq(k->grid[2], 4);
    ck_assert_int_eq(k->block[0], 32);
    ck_assert_int_eq(k->dynamic_smem, 128);
    ck_assert_uint_eq(k->registers, 32);
    ck_assert_uint_eq(k->stream, 7);
    ck_assert_uint_eq(k->device, 0);
    ck_assert_uint_eq(k->context, 1);
    ck_assert(k->start > la->end && k->end > k->start);

    const struct tp_device_api *ca = find_api(&w, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
    ck_assert_ptr_nonnull(ca);
    const struct tp_device_record *c = find_rec(&w, ca->correlation);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->kind, TP_DEVICE_MEMCPY);
    ck_assert_uint_eq(c->bytes, 4096);
    ck_assert_uint_eq(c->copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    ck_assert(c->start >= k->end);           /* serialized on stream 7 */

    const struct tp_device_api *sa = find_api(&w, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020);
    ck_assert_ptr_nonnull(sa);
    const struct tp_device_record *s = find_rec(&w, sa->correlation);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->kind, TP_DEVICE_SYNC);
    ck_assert_uint_eq(s->copy_kind, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
    tp_cupti_window_free(&w);
    tp_cupti_stop(1);
}
END_TEST

START_TEST(test_fake_unfinished)
{
    if (!have_fakes())
        return;
    setenv("FAKE_CUPTI_DELAY_MS", "400", 1);
    setup(NULL);
    ck_assert_int_eq(tp_cupti_start(1), 0);
    uint64_t t0 = tp_clock_now();
    launch_one();
    launch_one();
    uint64_t t1 = tp_clock_now();
    tp_cupti_collect(0);
    ck_assert_uint_eq(tp_cupti_unfinished(t0, t1), 2);
    tp_cupti_collect(1);                      /* forced: the kernels come now */
    ck_assert_uint_eq(tp_cupti_unfinished(t0, t1), 0);

    t0 = tp_clock_now();
    launch_one();
    t1 = tp_clock_now();
    tp_cupti_collect(0);
    ck_assert_uint_eq(tp_cupti_unfinished(t0, t1), 1);
    struct timespec d = { 0, 500000000 };
    nanosleep(&d, NULL);                      /* the fake's thread delivers it */
    tp_cupti_collect(0);
    ck_assert_uint_eq(tp_cupti_unfinished(t0, t1), 0);
}
END_TEST

START_TEST(test_fake_busy)
{
    if (!have_fakes())
        return;
    char dir[64], log[128];
    tp_test_mkdtemp(dir, sizeof dir, "cupti");
    snprintf(log, sizeof log, "%s/log", dir);
    setenv("FAKE_CUPTI_BUSY", "1", 1);
    setup(log);
    ck_assert_int_eq(tp_cupti_start(1), -1);
    ck_assert_int_eq(tp_cupti_start(1), -1);   /* never retried */
    ck_assert_int_eq(tp_cupti_enabled(), 0);
    ck_assert_str_eq(tp_cupti_status(), "unavailable: in use by another tool (Nsight Systems)");
    char *text = tp_test_slurp(log, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(count_lines(text, "subscribe refused"), 1);
    ck_assert_ptr_null(strstr(text, "enable"));
    free(text);
    tp_cupti_ext_push(5);                     /* harmless */
    tp_cupti_ext_pop();
    tp_test_rmtree(dir);
}
END_TEST

/* Older than 12.4, or a major we know nothing of: host-side only, said why. */
START_TEST(test_fake_old_version)
{
    static const char *const v[] = { "21", "140000" };
    static const char *const why[] = {
        "unavailable: CUPTI API version 21 < 22 (CUDA 12.4)",
        "unavailable: CUPTI API version 140000 is newer than the 13.x record layouts known",
    };
    if (!have_fakes())
        return;
    setenv("FAKE_CUPTI_VERSION", v[_i], 1);
    setup(NULL);
    ck_assert_int_eq(tp_cupti_start(1), -1);
    ck_assert_str_eq(tp_cupti_status(), why[_i]);
}
END_TEST

/* 12.x has no cuptiSubscribe_v2: the plain one cannot name the holder. */
START_TEST(test_fake_busy_12)
{
    if (!have_fakes())
        return;
    setenv("FAKE_CUPTI_BUSY", "1", 1);
    setenv("FAKE_CUPTI_VERSION", "26", 1);
    setup(NULL);
    ck_assert_int_eq(tp_cupti_start(1), -1);
    ck_assert_str_eq(tp_cupti_status(), "unavailable: in use by another tool (not named by CUPTI)");
}
END_TEST

/* The soname follows the loaded runtime's major; 13 first when unknown. */
START_TEST(test_sonames)
{
    const char *n[3];
    ck_assert_uint_eq(tp_cupti_sonames(12, n, 2), 0);
    ck_assert_uint_eq(tp_cupti_sonames(12, n, 3), 3);
    ck_assert_str_eq(n[0], "libcupti.so.12");
    ck_assert_str_eq(n[1], "libcupti.so.13");
    ck_assert_str_eq(n[2], "libcupti.so");
    ck_assert_uint_eq(tp_cupti_sonames(0, n, 3), 3);
    ck_assert_str_eq(n[0], "libcupti.so.13");
    ck_assert_str_eq(n[1], "libcupti.so.12");
    ck_assert_uint_eq(tp_cupti_sonames(13, n, 3), 3);
    ck_assert_str_eq(n[0], "libcupti.so.13");
    if (!have_fakes())
        return;
    ck_assert_int_eq(tp_cupti_cudart_major(), 0);
    setup(NULL);                                 /* loads <fakes>/libcudart.so.13 */
    ck_assert_int_eq(tp_cupti_cudart_major(), 13);
}
END_TEST

static int capture_open(void)
{
    return 1;
}

/* The application side while CUPTI stops: CUDA calls for the exit
 * callback that finalizes, each with an external id pushed and popped
 * around it as a library wrapper does (none may reach a finalized CUPTI). */
static atomic_int busy_stop;

static void *busy_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&busy_stop)) {
        tp_cupti_ext_push(77);
        launch_one();
        tp_cupti_ext_pop();
    }
    return NULL;
}

static void lifecycle(const char *version, int capture)
{
    char dir[64], log[128];
    tp_test_mkdtemp(dir, sizeof dir, "cupti");
    snprintf(log, sizeof log, "%s/log", dir);
    if (version)
        setenv("FAKE_CUPTI_VERSION", version, 1);
    setup(log);
    /* A fake driver, if one was built, makes cuptiFinalize possible. */
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/libcuda.so.1", fakes_dir);
    void *drv = access(p, R_OK) == 0 ? dlopen(p, RTLD_NOW | RTLD_GLOBAL) : NULL;
    int drv_version = 0;
    if (drv) {
        int (*getv)(int *) = (int (*)(int *))dlsym(drv, "cuDriverGetVersion");
        if (!getv || getv(&drv_version) != 0)
            drv_version = 0;
    }
    if (capture)
        tp_cupti_set_capture_check(capture_open);

    ck_assert_int_eq(tp_cupti_start(1), 0);
    ck_assert_int_eq(tp_cupti_start(1), 0);    /* already active */
    tp_cupti_stop(0);
    int toggles = !version || atoi(version) >= 130001;
    ck_assert_int_eq(tp_cupti_enabled(), !toggles);
    ck_assert_int_eq(tp_cupti_start(1), 0);
    ck_assert_int_eq(tp_cupti_enabled(), 1);
    pthread_t busy;
    atomic_store(&busy_stop, 0);
    ck_assert_int_eq(pthread_create(&busy, NULL, busy_thread, NULL), 0);
    tp_cupti_stop(1);
    atomic_store(&busy_stop, 1);
    pthread_join(busy, NULL);
    ck_assert_int_eq(tp_cupti_enabled(), 0);
    ck_assert_int_eq(tp_cupti_start(1), -1);   /* finished: never re-subscribed */
    ck_assert_ptr_nonnull(strstr(tp_cupti_status(), "finished"));

    char *text = tp_test_slurp(log, NULL);
    ck_assert_ptr_nonnull(text);
    long v = version ? atol(version) : 130001;
    /* 12.x: no cuptiSubscribe_v2, the plain cuptiSubscribe names nobody. */
    ck_assert_int_eq(count_lines(text, v >= 130000 ? "subscribe trainprof" : "subscribe "), 1);
    ck_assert_int_eq(count_lines(text, "enable CONCURRENT_KERNEL"), toggles ? 2 : 1);
    ck_assert_int_eq(count_lines(text, "disable CONCURRENT_KERNEL"), toggles ? 2 : 1);
    ck_assert_int_eq(count_lines(text, "enable MEMCPY"), toggles ? 2 : 1);
    ck_assert_int_eq(count_lines(text, "enable EXTERNAL_CORRELATION"), toggles ? 2 : 1);
    ck_assert_int_eq(count_lines(text, "enable KERNEL"), 0);
    ck_assert_int_eq(count_lines(text, "enable INTERNAL_LAUNCH_API"), toggles ? 2 : 1);
    ck_assert_int_eq(count_lines(text, "enable MEMORY2"), 0);   /* decoded for nothing */
    /* the whole kind, the cbids we do not keep then turned off (per-cbid
     * enabling alone gave no record on a real CUPTI 13.0) */
    ck_assert_int_eq(count_lines(text, "enable RUNTIME"), toggles ? 2 : 1);
    ck_assert_int_eq(count_lines(text, "enable DRIVER"), toggles ? 2 : 1);
    ck_assert_int_ge(count_lines(text, "flush forced"), 1);
    /* finalized from an API exit callback of the busy thread (Kineto's
     * way), never from here, and without unsubscribing in that callback
     * (it corrupted a real CUPTI's heap); nothing reached CUPTI after it.
     * Not finalized: unsubscribed from here instead. */
    int finalize = drv_version >= 12060 && !capture;
    ck_assert_int_eq(count_lines(text, "finalize in-exit-callback"), finalize);
    ck_assert_int_eq(count_lines(text, "finalize"), 0);
    ck_assert_int_eq(count_lines(text, "unsubscribe"), !finalize);
    ck_assert_ptr_null(strstr(text, "reinit"));
    ck_assert_ptr_nonnull(strstr(tp_cupti_status(), finalize ? "; finalized)" : "not finalized"));
    const char *last = strstr(text, finalize ? "finalize in-exit-callback" : "unsubscribe");
    ck_assert_ptr_nonnull(last);
    ck_assert(strstr(text, "disable CONCURRENT_KERNEL") < last);
    free(text);
    tp_test_rmtree(dir);
}

START_TEST(test_fake_lifecycle)
{
    if (have_fakes())
        lifecycle(NULL, 0);
}
END_TEST

START_TEST(test_fake_lifecycle_130000)
{
    if (have_fakes())
        lifecycle("130000", 0);
}
END_TEST

/* CUDA 12.4 and 12.8: never toggled per window (toggling waits for 13.0 U1). */
START_TEST(test_fake_lifecycle_12)
{
    static const char *const v[] = { "22", "26" };
    if (have_fakes())
        lifecycle(v[_i], 0);
}
END_TEST

START_TEST(test_fake_lifecycle_capture)
{
    if (have_fakes())
        lifecycle(NULL, 1);
}
END_TEST

/* torch.profiler in the same process: Kineto pushes its operators' ids
 * (CUSTOM0) on the same CUPTI, here inside one of our calls; our records
 * keep our ids, and Kineto's kind gets its own records, never ours. */
static void kineto_push(uint64_t id)
{
    tp_cupti_fn.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

static void kineto_pop(void)
{
    tp_cupti_fn.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, NULL);
}

START_TEST(test_fake_ext)
{
    if (!have_fakes())
        return;
    setup(NULL);
    ck_assert_int_eq(tp_cupti_start(1), 0);
    uint64_t t0 = tp_clock_now();
    tp_cupti_ext_push(42);
    launch_one();
    tp_cupti_ext_push(43);                    /* nested: the innermost id */
    kineto_push(7);                           /* torch.profiler's operator, innermost */
    launch_one();
    kineto_pop();
    tp_cupti_ext_pop();
    tp_cupti_ext_pop();
    launch_one();
    uint64_t t1 = tp_clock_now();
    tp_cupti_collect(1);
    struct tp_device_batch w;
    tp_cupti_take(t0, t1, &w);
    ck_assert_uint_eq(w.n_api, 3);
    ck_assert_uint_eq(w.n_rec, 3);
    ck_assert_uint_eq(w.n_ext, 2);
    ck_assert_uint_eq(w.ext[0].correlation, w.api[0].correlation);
    ck_assert_uint_eq(w.ext[0].external_id, 42);
    ck_assert_uint_eq(w.ext[1].correlation, w.api[1].correlation);
    ck_assert_uint_eq(w.ext[1].external_id, 43);
    tp_cupti_window_free(&w);
    /* Between windows (kinds off on 130001) a push does nothing. */
    tp_cupti_stop(0);
    tp_cupti_ext_push(44);
    tp_cupti_ext_pop();
    tp_cupti_stop(1);
}
END_TEST

typedef cudaError_t (*stream_create_fn)(cudaStream_t *);
typedef cudaError_t (*event_create_fn)(cudaEvent_t *);
typedef cudaError_t (*event_record_fn)(cudaEvent_t, cudaStream_t);
typedef cudaError_t (*wait_event_fn)(cudaStream_t, cudaEvent_t, unsigned int);
typedef cudaError_t (*event_sync_fn)(cudaEvent_t);

static const struct tp_device_record *find_sync(const struct tp_device_batch *w, int type)
{
    for (size_t i = 0; i < w->n_rec; i++)
        if (w->rec[i].kind == TP_DEVICE_SYNC && w->rec[i].copy_kind == type)
            return &w->rec[i];
    return NULL;
}

static struct tp_event wait_seen[8];
static int n_wait_seen;

static void keep_event(void *ctx, const struct tp_event *ev)
{
    (void)ctx;
    if (n_wait_seen < 8)
        wait_seen[n_wait_seen++] = *ev;
}

/* The fake CUPTI's CUDA_EVENT records, from cudaEventRecord, through the
 * take and the join: an event recorded on stream A, waited on by stream B,
 * recorded again on B, then synchronized on: the wait names A and the first
 * record, the sync B and the second.  cudaEventRecord's API record is not
 * kept (cupti_cbid.def), cudaStreamWaitEvent's is. */
START_TEST(test_fake_cuda_events)
{
    if (!have_fakes())
        return;
    setup(NULL);
    stream_create_fn stream_create = (stream_create_fn)dlsym(fk.rt, "cudaStreamCreate");
    event_create_fn event_create = (event_create_fn)dlsym(fk.rt, "cudaEventCreate");
    event_record_fn record = (event_record_fn)dlsym(fk.rt, "cudaEventRecord");
    wait_event_fn wait = (wait_event_fn)dlsym(fk.rt, "cudaStreamWaitEvent");
    event_sync_fn event_sync = (event_sync_fn)dlsym(fk.rt, "cudaEventSynchronize");
    ck_assert(stream_create && event_create && record && wait && event_sync);
    cudaStream_t a, b;
    cudaEvent_t ev;
    ck_assert_int_eq(stream_create(&a), cudaSuccess);
    ck_assert_int_eq(stream_create(&b), cudaSuccess);
    ck_assert_int_eq(event_create(&ev), cudaSuccess);
    ck_assert_int_eq(tp_cupti_start(1), 0);

    uint64_t t0 = tp_clock_now();
    ck_assert_int_eq(record(ev, a), cudaSuccess);
    ck_assert_int_eq(wait(b, ev, 0), cudaSuccess);
    ck_assert_int_eq(record(ev, b), cudaSuccess);
    ck_assert_int_eq(event_sync(ev), cudaSuccess);
    ck_assert_int_eq(fk.sync(b), cudaSuccess);
    uint64_t t1 = tp_clock_now();
    tp_cupti_collect(1);
    struct tp_device_batch w;
    tp_cupti_take(t0, t1, &w);

    ck_assert_ptr_null(find_api(&w, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020));
    const struct tp_device_api *wa = find_api(&w, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020);
    ck_assert_ptr_nonnull(wa);
    ck_assert_uint_eq(w.n_cuda_event, 2);
    const struct tp_device_cuda_event *r1 = &w.cuda_event[0], *r2 = &w.cuda_event[1];
    ck_assert_uint_eq(r1->event_id, r2->event_id);
    ck_assert_uint_ne(r1->stream, r2->stream);
    ck_assert_uint_lt(r1->correlation, wa->correlation);
    ck_assert_uint_gt(r2->correlation, wa->correlation);
    const struct tp_device_record *ws = find_sync(&w, TP_SYNC_STREAM_WAIT_EVENT);
    const struct tp_device_record *es = find_sync(&w, TP_SYNC_EVENT);
    const struct tp_device_record *ss = find_sync(&w, TP_SYNC_STREAM);
    ck_assert(ws && es && ss);
    ck_assert_uint_eq(ws->correlation, wa->correlation);
    ck_assert_uint_eq(ws->stream, r2->stream);              /* the waiting stream: B */
    ck_assert_uint_eq(ws->event_id, r1->event_id);
    ck_assert_uint_eq(es->event_id, r1->event_id);
    ck_assert_uint_eq(ss->event_id, CUPTI_SYNCHRONIZATION_INVALID_VALUE);

    uint64_t next_own = 1;
    struct tp_join *j = tp_join_new(&w, &next_own);
    ck_assert_ptr_nonnull(j);
    struct tp_window win;
    memset(&win, 0, sizeof win);
    tp_join_finish(j, &win);
    ck_assert_uint_eq(win.gpu_records, 3);
    ck_assert_uint_eq(win.gpu_kernels, 0);
    struct tp_clock_map map = tp_clock_map_now();
    n_wait_seen = 0;
    tp_join_dispatch(j, &map, keep_event, NULL);
    ck_assert_int_eq(n_wait_seen, 3);
    int checked = 0;
    for (int i = 0; i < n_wait_seen; i++) {
        const struct tp_event *e = &wait_seen[i];
        if (e->dev->copy_kind == TP_SYNC_STREAM_WAIT_EVENT) {
            ck_assert_int_eq(e->wait_on_stream, r1->stream);
            ck_assert_int_eq(e->wait_on_corr, r1->correlation);
            checked++;
        } else if (e->dev->copy_kind == TP_SYNC_EVENT) {
            ck_assert_int_eq(e->wait_on_stream, r2->stream);
            ck_assert_int_eq(e->wait_on_corr, r2->correlation);
            checked++;
        }
    }
    ck_assert_int_eq(checked, 2);
    tp_join_free(j);
    tp_cupti_window_free(&w);
    tp_cupti_stop(1);
}
END_TEST

#define N_THREADS 4
#define N_LAUNCH  6000

static void *launcher(void *arg)
{
    (void)arg;
    for (int i = 0; i < N_LAUNCH; i++)
        launch_one();
    return NULL;
}

START_TEST(test_fake_threads_many_buffers)
{
    if (!have_fakes())
        return;
    setup(NULL);
    ck_assert_int_eq(tp_cupti_start(1), 0);
    uint64_t t0 = tp_clock_now();
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, launcher, NULL), 0);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    uint64_t t1 = tp_clock_now();
    tp_cupti_collect(1);
    ck_assert_uint_eq(tp_cupti_unfinished(t0, t1), 0);
    struct tp_device_batch w;
    tp_cupti_take(t0, t1, &w);
    ck_assert_uint_eq(w.n_api, N_THREADS * N_LAUNCH);
    ck_assert_uint_eq(w.n_rec, N_THREADS * N_LAUNCH);
    ck_assert_uint_eq(w.dropped, 0);
    for (size_t i = 1; i < w.n_rec; i++)
        ck_assert(w.rec[i - 1].start <= w.rec[i].start);
    tp_cupti_window_free(&w);
    tp_cupti_stop(1);
}
END_TEST

/* More completed buffers than the soft cap (32 x 4 MiB) before any collect:
 * the oldest are recycled and their records counted as dropped, so every
 * record is either delivered or counted. */
START_TEST(test_fake_recycle)
{
    if (!have_fakes())
        return;
    setup(NULL);
    ck_assert_int_eq(tp_cupti_start(1), 0);
    enum { N = 700000 };
    uint64_t t0 = tp_clock_now();
    for (int i = 0; i < N; i++)
        launch_one();
    uint64_t t1 = tp_clock_now();
    tp_cupti_collect(1);
    struct tp_device_batch w;
    tp_cupti_take(t0, t1, &w);
    ck_assert_uint_gt(w.dropped, 0);
    ck_assert_uint_eq(w.n_api + w.n_rec + w.dropped, 2 * (uint64_t)N);
    tp_cupti_window_free(&w);
    tp_cupti_stop(1);
}
END_TEST

/* A kind CUPTI refuses is said once and skipped; the others still work. */
START_TEST(test_fake_kind_refused)
{
    if (!have_fakes())
        return;
    char kind[16];
    snprintf(kind, sizeof kind, "%d", (int)CUPTI_ACTIVITY_KIND_OVERHEAD);
    setenv("FAKE_CUPTI_FAIL_KIND", kind, 1);
    setup(NULL);
    ck_assert_int_eq(tp_cupti_start(1), 0);
    uint64_t t0 = tp_clock_now();
    launch_one();
    uint64_t t1 = tp_clock_now();
    tp_cupti_stop(0);
    ck_assert_int_eq(tp_cupti_start(1), 0);    /* refused again, not said again */
    tp_cupti_collect(1);
    struct tp_device_batch w;
    tp_cupti_take(t0, t1, &w);
    ck_assert_uint_eq(w.n_api, 1);
    ck_assert_uint_eq(w.n_rec, 1);
    tp_cupti_window_free(&w);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cupti");
    TCase *d = tcase_create("decode");
    tcase_add_test(d, test_decode_kernel);
    tcase_add_test(d, test_decode_kernel_name_reused);
    tcase_add_test(d, test_decode_internal_launch);
    tcase_add_test(d, test_decode_copies_sets_syncs);
    tcase_add_test(d, test_decode_api_filter);
    tcase_add_test(d, test_decode_ext_overhead_other);
    tcase_add_test(d, test_take_window);
    tcase_add_test(d, test_decode_refuses_foreign_times);
    tcase_add_test(d, test_take_late_tail_counted);
    tcase_add_test(d, test_decode_cuda_event);
    tcase_add_test(d, test_take_keeps_cuda_events);
    tcase_add_test(d, test_unfinished);
    tcase_add_test(d, test_absent_is_harmless);
    tcase_add_test(d, test_layouts_match_headers);
    tcase_add_test(d, test_decode_12_4);
    suite_add_tcase(s, d);
    TCase *f = tcase_create("fake");
    tcase_set_timeout(f, 30);
    tcase_add_loop_test(f, test_fake_records, 0,
                        (int)(sizeof fake_versions / sizeof fake_versions[0]));
    tcase_add_test(f, test_fake_unfinished);
    tcase_add_test(f, test_fake_busy);
    tcase_add_loop_test(f, test_fake_old_version, 0, 2);
    tcase_add_test(f, test_fake_busy_12);
    tcase_add_test(f, test_sonames);
    tcase_add_loop_test(f, test_fake_lifecycle_12, 0, 2);
    tcase_add_test(f, test_fake_lifecycle);
    tcase_add_test(f, test_fake_lifecycle_130000);
    tcase_add_test(f, test_fake_lifecycle_capture);
    tcase_add_test(f, test_fake_ext);
    tcase_add_test(f, test_fake_cuda_events);
    tcase_add_test(f, test_fake_threads_many_buffers);
    tcase_add_test(f, test_fake_recycle);
    tcase_add_test(f, test_fake_kind_refused);
    suite_add_tcase(s, f);
    return s;
}

int main(void)
{
    return tp_test_run(suite());
}
