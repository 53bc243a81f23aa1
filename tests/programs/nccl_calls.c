/*
 * nccl_calls.c - calls every wrapped NCCL entry point with known counts,
 * types and communicators, step by step.
 *
 * DESIGN
 * Communicators (the fake NCCL takes size and rank from the creation
 * arguments): A = InitRank(4, rank 1), B = InitRank(8, rank 3), a pair from
 * InitAll(2), C = InitRankConfig(16, rank 5), S = Split(B, color 3, key 2)
 * (size 3, rank 2: the fake's split), and T = InitRank(3, rank 2), created
 * after a communicator InitRank(6, rank 4) was destroyed, in the slot (the
 * address) it freed, and G = Grow(A, 6 ranks) (rank 1: A's).
 *   step 0: ncclAllReduce(A, 1000 floats)               a marker
 *   step 1: every collective once, a nested group with ncclSend/ncclRecv;
 *           then gather and scatter, ncclMemAlloc'ed memory registered as a
 *           buffer and as a window, one-sided calls on that window (a wait
 *           on one peer, a wait on two), a group ended by
 *           ncclGroupSimulateEnd with a send in it, an allreduce on G,
 *           suspend/resume, a device communicator, Finalize and Revoke
 *   step 2: ncclAllReduce(A, 77 of type 42)              unknown type
 *   step 3: ncclAllReduce(A, 1003 floats)               a marker
 * then trainprof_step() after each, and a sleep of NCCL_STEP_SLEEP_US (default
 * 0: long enough, the fake CUPTI is enabled during a warmup step 0).
 * tests/preload/test_nccl.py holds the
 * expected values.  Prints one line per call with its result, the same with
 * and without the library.
 */
#include <nccl.h>

#include "prog.h"
#include "preload/nccl_compat.h"

#define MEM_BYTES (3u << 20)    /* ncclMemAlloc'ed: tests/preload/test_nccl.py */

static int bad;

static void step(void)
{
    static long sleep_us = -1;
    if (sleep_us < 0)
        sleep_us = prog_env_long("NCCL_STEP_SLEEP_US", 0);
    tp_call_step();
    if (sleep_us > 0)
        usleep((useconds_t)sleep_us);
}

#define CALL(x) do { ncclResult_t r_ = (x); printf("%-72s %s\n", #x, ncclGetErrorString(r_)); \
                     if (r_ != ncclSuccess) bad++; } while (0)

int main(void)
{
    static char buf[1 << 16], out[1 << 16];
    int version = 0;
    ncclUniqueId id;
    ncclComm_t a, b, all[2], c, s, gone, t, g;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cudaStream_t st = NULL;
    void *mem = NULL, *reg = NULL;
    ncclWindow_t win = NULL;
    ncclWaitSignalDesc_t one[1] = { { 1, 0, 0, 0 } }, two[2] = { { 1, 2, 0, 0 }, { 2, 3, 1, 0 } };
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    /* nccl_device/core.h's structs are opaque here (that header is C++) */
    static unsigned char reqs_space[256], dev_space[4096];
    const struct ncclDevCommRequirements *reqs = (const void *)reqs_space;
    struct ncclDevComm *dev_comm = (void *)dev_space;

    CALL(ncclGetVersion(&version));
    printf("version %d\n", version);
    CALL(ncclGetUniqueId(&id));
    CALL(ncclCommInitRank(&a, 4, id, 1));
    CALL(ncclCommInitRank(&b, 8, id, 3));
    CALL(ncclCommInitAll(all, 2, NULL));
    CALL(ncclCommInitRankConfig(&c, 16, id, 5, &cfg));
    CALL(ncclCommSplit(b, 3, 2, &s, NULL));
    CALL(ncclCommInitRank(&gone, 6, id, 4));
    CALL(ncclCommDestroy(gone));
    CALL(ncclCommInitRank(&t, 3, id, 2));
    printf("T reuses the destroyed communicator's address: %s\n", t == gone ? "yes" : "no");
    CALL(ncclCommGrow(a, 6, NULL, -1, &g, NULL));
    int size = 0, rank = -1, dev = -1;
    CALL(ncclCommCount(a, &size));
    CALL(ncclCommUserRank(a, &rank));
    CALL(ncclCommCuDevice(a, &dev));
    printf("A: size %d rank %d device %d\n", size, rank, dev);

    /* step 0 */
    CALL(ncclAllReduce(buf, out, 1000, ncclFloat32, ncclSum, a, st));
    step();

    /* step 1 */
    CALL(ncclAllReduce(buf, out, 1024, ncclFloat32, ncclSum, a, st));
    CALL(ncclAllGather(buf, out, 256, ncclBfloat16, a, st));
    CALL(ncclReduceScatter(buf, out, 128, ncclFloat16, ncclSum, a, st));
    CALL(ncclBroadcast(buf, out, 100, ncclInt64, 2, a, st));
    CALL(ncclBcast(buf, 10, ncclUint8, 1, a, st));
    CALL(ncclReduce(buf, out, 64, ncclFloat64, ncclMax, 0, b, st));
    CALL(ncclAlltoAll(buf, out, 32, ncclInt32, b, st));
    CALL(ncclGroupStart());
    CALL(ncclGroupStart());
    CALL(ncclSend(buf, 50, ncclFloat8e4m3, 2, a, st));
    CALL(ncclGroupEnd());
    CALL(ncclRecv(out, 60, ncclFloat8e5m2, 0, a, st));
    CALL(ncclGroupEnd());
    CALL(ncclAllReduce(buf, out, 5, ncclUint32, ncclSum, all[1], st));
    CALL(ncclAllReduce(buf, out, 3, ncclInt8, ncclSum, c, st));
    CALL(ncclAllReduce(buf, out, 9, ncclFloat64, ncclSum, s, st));
    CALL(ncclAllGather(buf, out, 11, ncclUint64, t, st));
    CALL(ncclSend(buf, 7, ncclUint8, 3, b, st));
    CALL(ncclGather(buf, out, 40, ncclFloat32, 3, a, st));
    CALL(ncclScatter(buf, out, 20, ncclInt32, 0, b, st));
    CALL(ncclMemAlloc(&mem, MEM_BYTES));
    CALL(ncclCommRegister(a, mem, 4096, &reg));
    CALL(ncclCommWindowRegister(a, mem, 1 << 16, &win, 0));
    CALL(ncclPutSignal(buf, 30, ncclFloat16, 2, win, 256, 0, 0, 0, a, st));
    CALL(ncclSignal(3, 0, 0, 0, a, st));
    CALL(ncclWaitSignal(1, one, a, st));
    CALL(ncclWaitSignal(2, two, a, st));
    CALL(ncclCommWindowDeregister(a, win));
    CALL(ncclCommDeregister(a, reg));
    CALL(ncclMemFree(mem));
    CALL(ncclGroupStart());
    CALL(ncclSend(buf, 8, ncclUint8, 1, a, st));
    CALL(ncclGroupSimulateEnd(&sim));
    CALL(ncclAllReduce(buf, out, 13, ncclInt32, ncclSum, g, st));
    CALL(ncclCommSuspend(b, NCCL_SUSPEND_MEM));
    CALL(ncclCommResume(b));
    CALL(ncclDevCommCreate(a, reqs, dev_comm));
    CALL(ncclDevCommDestroy(a, dev_comm));
    CALL(ncclCommFinalize(s));
    CALL(ncclCommRevoke(c, 0));
    step();

    /* step 2: an unknown type is refused by NCCL (counted as expected) */
    CALL(ncclAllReduce(buf, out, 77, (ncclDataType_t)42, ncclSum, a, st));
    bad--;
    step();

    /* step 3 */
    CALL(ncclAllReduce(buf, out, 1003, ncclFloat32, ncclSum, a, st));
    step();

    CALL(ncclCommDestroy(g));
    CALL(ncclCommDestroy(t));
    CALL(ncclCommDestroy(s));
    CALL(ncclCommAbort(c));
    CALL(ncclCommDestroy(all[0]));
    CALL(ncclCommDestroy(all[1]));
    CALL(ncclCommDestroy(b));
    CALL(ncclCommDestroy(a));
    printf("failures: %d\n", bad);
    return bad ? 1 : 0;
}
