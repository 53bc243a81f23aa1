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
 * address) it freed.
 *   step 0: ncclAllReduce(A, 1000 floats)               a marker
 *   step 1: every collective once, a nested group with ncclSend/ncclRecv
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
    ncclComm_t a, b, all[2], c, s, gone, t;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cudaStream_t st = NULL;

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
    step();

    /* step 2: an unknown type is refused by NCCL (counted as expected) */
    CALL(ncclAllReduce(buf, out, 77, (ncclDataType_t)42, ncclSum, a, st));
    bad--;
    step();

    /* step 3 */
    CALL(ncclAllReduce(buf, out, 1003, ncclFloat32, ncclSum, a, st));
    step();

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
