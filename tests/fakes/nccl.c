/*
 * nccl.c - the executing half of a fake NCCL (build/fakes/libnccl.so.2,
 * soname libnccl.so.2 like the real library, which has no symbol versions).
 *
 * DESIGN
 * Communicators come from a fixed pool, first free slot first, so a
 * communicator created after one is destroyed gets the same address: that
 * is what tests of the profiler's per-communicator cache need.  A
 * communicator's size and rank come from its creation arguments
 * (ncclCommSplit: size = color, rank = key; ncclCommShrink: size minus the
 * excluded ranks, same rank).  Collectives check their arguments like NCCL
 * (an unknown type or operation is ncclInvalidArgument) and move no data;
 * ncclAllReduce launches one kernel through the CUDA runtime, registered in
 * a constructor under the name NCCL's device kernels carry, so a test can
 * see launches made inside a collective.
 * ncclGather/ncclScatter check their root as Broadcast does; the one-sided
 * calls (NCCL 2.29) check their peers and the window a put writes to.
 * Windows and buffer registrations come from fixed pools as communicators
 * do.  ncclMemAlloc/ncclMemFree allocate through the (fake) runtime's
 * cudaMalloc/cudaFree, as NCCL falls back to them without cuMem: calls a
 * profiler must fold into the NCCL call.  ncclGroupSimulateEnd ends the
 * group as ncclGroupEnd does.  The functions NCCL 2.28's nccl.h lacks are
 * declared by preload/nccl_compat.h as NCCL 2.30.7's headers declare them.
 * FAKE_NCCL_MEET=DIR makes ncclAllReduce block until every rank of its
 * communicator has arrived at the same all-reduce, as NCCL's does: the
 * k-th all-reduce on communicator c (its pool slot: ranks that create
 * their communicators in the same order agree on it) creates
 * DIR/c<c>.<k>.r<rank> and polls every 5 ms until the files of ranks 0 to
 * size-1 are all there (processes need share nothing but the folder).
 * FAKE_NCCL_FAIL_AT=K makes the process's K-th ncclAllReduce return
 * ncclRemoteError (a peer died: what NCCL answers when a connection
 * breaks), after checking its arguments and before meeting the others.
 * FAKE_NCCL_STATS=1 prints to stderr at exit how often ncclCommCount and
 * ncclCommUserRank were called.
 * FAKE_NCCL_VERSION=N makes the fake NCCL version N (ncclGetVersion's
 * answer; default the header's NCCL_VERSION_CODE).  Below 2.19 (21900) the
 * kernel gets the name NCCL 2.18 and older give theirs,
 * "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long,
 * ncclWork*)", instead of 2.19's "ncclDevKernel_AllReduce_Sum_f32_RING_LL
 * (ncclDevKernelArgsStorage<4096ul>)": some trace readers know only the old
 * prefix (HTA 0.5's straggler analysis looks for "ncclKernel").
 * Device memory: the real libnccl.so.2 links the CUDA runtime statically
 * (readelf -d: no DT_NEEDED on libcudart or libcuda; it dlopens
 * libcuda.so.1), so what it allocates for a communicator reaches the
 * driver from NCCL's own code, never the dynamic runtime's cudaMalloc.  The
 * fake does the same when libcuda.so.1 is loaded: creating a communicator
 * (ncclCommInitRank, ncclCommInitRankConfig, ncclCommInitAll, ncclCommSplit,
 * ncclCommShrink, ncclCommGrow) allocates FAKE_NCCL_INIT_BYTES (default
 * 4 MiB, 0: none) with the driver's cuMemAlloc_v2 (fakegpu_driver_sym), the
 * first collective or point-to-point call on a communicator 2 MiB more (NCCL
 * sets its connections up, and allocates their buffers, at the first
 * operation that needs them), and ncclCommDestroy/ncclCommAbort free both
 * with cuMemFree_v2.  A failed allocation fails the call with
 * ncclUnhandledCudaError, as NCCL's CUDACHECK does (no communicator is
 * made).  Without libcuda.so.1 nothing is allocated.
 */
#define _GNU_SOURCE   /* RTLD_DEFAULT in fakegpu.h */
#define FAKEGPU_DRIVER_SYM
#include "fakegpu.h"
#include "../../preload/nccl_compat.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);

struct ncclComm {
    int used;
    int size;
    int rank;
    int device;
    long allreduces;    /* all-reduces made, for FAKE_NCCL_MEET */
    int connected;      /* its first operation made (comm_connect) */
    unsigned long long init_mem, conn_mem;   /* device memory (0: none) */
};

struct ncclWindow_vidmem {
    int used;
    struct ncclComm *comm;
    size_t size;
};

struct fake_reg {
    int used;
    struct ncclComm *comm;
};

#define FAKE_COMMS 64
#define FAKE_WINDOWS 16
static struct ncclComm comms[FAKE_COMMS];
static struct ncclWindow_vidmem windows[FAKE_WINDOWS];
static struct fake_reg regs[FAKE_WINDOWS];
static int group_depth;
static int count_calls, rank_calls;

static char kernel_stub;   /* host stub stand-in: its address names the kernel */
static const unsigned long long fatbin[4] = { 0x466243b1ull, 1, 0, 0 };

static int fake_version = NCCL_VERSION_CODE;

__attribute__((constructor)) static void fake_nccl_init(void)
{
    const char *v = getenv("FAKE_NCCL_VERSION");
    if (v && *v) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n <= 0 || n > 99999)
            fprintf(stderr, "fake-nccl: bad FAKE_NCCL_VERSION=%s ignored\n", v);
        else
            fake_version = (int)n;
    }
    void **h = __cudaRegisterFatBinary((void *)fatbin);
    static char name[] = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
    static char old_name[] = "_Z38ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclDevCommmP8ncclWork";
    char *kname = fake_version < 21900 ? old_name : name;
    __cudaRegisterFunction(h, &kernel_stub, kname, kname, -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(h);
}

__attribute__((destructor)) static void fake_nccl_fini(void)
{
    const char *s = getenv("FAKE_NCCL_STATS");
    if (s && strcmp(s, "1") == 0)
        fprintf(stderr, "fake-nccl: ncclCommCount=%d ncclCommUserRank=%d\n", count_calls,
                rank_calls);
}

static ncclComm_t comm_new(int size, int rank)
{
    for (int i = 0; i < FAKE_COMMS; i++)
        if (!comms[i].used) {
            comms[i].used = 1;
            comms[i].size = size;
            comms[i].rank = rank;
            comms[i].device = 0;
            return &comms[i];
        }
    return NULL;
}

static int comm_ok(const struct ncclComm *c)
{
    return c && c >= comms && c < comms + FAKE_COMMS && c->used;
}

FAKE_EXPORT ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = fake_version;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id)
        return ncclInvalidArgument;
    memset(id, 0, sizeof *id);
    memcpy(id->internal, "fake-nccl", 9);
    return ncclSuccess;
}

FAKE_EXPORT const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

/* ---- device memory, through the driver ------------------------------------- */

typedef int (*drv_alloc_fn)(unsigned long long *, size_t);
typedef int (*drv_free_fn)(unsigned long long);

#define FAKE_CONN_BYTES ((size_t)2 << 20)

static size_t init_bytes(void)
{
    const char *v = getenv("FAKE_NCCL_INIT_BYTES");
    return v && *v ? (size_t)strtoull(v, NULL, 10) : (size_t)4 << 20;
}

/* n bytes of device memory into *d (0 when n is 0 or there is no driver):
 * 0 on success, -1 when the driver refused. */
static int dev_alloc(unsigned long long *d, size_t n)
{
    *d = 0;
    if (!n)
        return 0;
    drv_alloc_fn fn = (drv_alloc_fn)fakegpu_driver_sym("cuMemAlloc_v2");
    if (!fn)
        return 0;
    return fn(d, n) == 0 ? 0 : -1;
}

static void dev_free(unsigned long long *d)
{
    if (!*d)
        return;
    drv_free_fn fn = (drv_free_fn)fakegpu_driver_sym("cuMemFree_v2");
    if (fn)
        fn(*d);
    *d = 0;
}

static void comm_release(struct ncclComm *c)
{
    dev_free(&c->init_mem);
    dev_free(&c->conn_mem);
    memset(c, 0, sizeof *c);
}

/* A new communicator and its device memory; ncclUnhandledCudaError (and no
 * communicator) when the driver refuses it. */
static ncclResult_t comm_make(ncclComm_t *out, int size, int rank)
{
    *out = comm_new(size, rank);
    if (!*out)
        return ncclSystemError;
    if (dev_alloc(&(*out)->init_mem, init_bytes()) != 0) {
        comm_release(*out);
        *out = NULL;
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

/* The first operation on "c" sets its connections up. */
static ncclResult_t comm_connect(struct ncclComm *c)
{
    if (c->connected)
        return ncclSuccess;
    if (dev_alloc(&c->conn_mem, FAKE_CONN_BYTES) != 0)
        return ncclUnhandledCudaError;      /* the next operation tries again */
    c->connected = 1;
    return ncclSuccess;
}

static ncclResult_t init(ncclComm_t *comm, int nranks, int rank)
{
    if (!comm || nranks <= 0 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    return comm_make(comm, nranks, rank);
}

FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    (void)id;
    return init(comm, nranks, rank);
}

FAKE_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                                int rank, ncclConfig_t *config)
{
    (void)id; (void)config;
    return init(comm, nranks, rank);
}

FAKE_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    if (!comm || ndev <= 0)
        return ncclInvalidArgument;
    for (int i = 0; i < ndev; i++) {
        ncclResult_t r = comm_make(&comm[i], ndev, i);
        if (r != ncclSuccess)
            return r;
        comm[i]->device = devlist ? devlist[i] : i;
    }
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                       ncclConfig_t *config)
{
    (void)config;
    if (!comm_ok(comm) || !newcomm)
        return ncclInvalidArgument;
    if (color == NCCL_SPLIT_NOCOLOR) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    return init(newcomm, color, key);
}

FAKE_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int nexclude,
                                        ncclComm_t *newcomm, ncclConfig_t *config, int flags)
{
    (void)exclude; (void)config; (void)flags;
    if (!comm_ok(comm) || !newcomm || nexclude < 0 || nexclude >= comm->size)
        return ncclInvalidArgument;
    return init(newcomm, comm->size - nexclude, comm->rank % (comm->size - nexclude));
}

FAKE_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
                                      int rank, ncclComm_t *newcomm, ncclConfig_t *config)
{
    (void)uniqueId; (void)config;
    if (!newcomm)
        return ncclInvalidArgument;
    if (comm) {     /* an existing rank keeps its rank */
        if (!comm_ok(comm) || rank != -1 || nRanks <= comm->size)
            return ncclInvalidArgument;
        return init(newcomm, nRanks, comm->rank);
    }
    return init(newcomm, nRanks, rank);
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    comm_release(comm);
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    return ncclCommDestroy(comm);
}

FAKE_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    __atomic_add_fetch(&count_calls, 1, __ATOMIC_RELAXED);
    if (!comm_ok(comm) || !count)
        return ncclInvalidArgument;
    *count = comm->size;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    __atomic_add_fetch(&rank_calls, 1, __ATOMIC_RELAXED);
    if (!comm_ok(comm) || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm_ok(comm) || !device)
        return ncclInvalidArgument;
    *device = comm->device;
    return ncclSuccess;
}

static ncclResult_t check(size_t count, ncclDataType_t dt, ncclComm_t comm)
{
    (void)count;
    if (!comm_ok(comm) || (int)dt < 0 || dt >= ncclNumTypes)
        return ncclInvalidArgument;
    return ncclSuccess;
}

static ncclResult_t check_op(ncclRedOp_t op)
{
    return (int)op >= 0 && op < ncclNumOps ? ncclSuccess : ncclInvalidArgument;
}

static ncclResult_t check_root(int root, ncclComm_t comm)
{
    return root >= 0 && root < comm->size ? ncclSuccess : ncclInvalidArgument;
}

/* A collective or point-to-point call whose arguments checked "r": its
 * communicator connected (comm_connect) when they are good. */
static ncclResult_t connected(ncclResult_t r, ncclComm_t comm)
{
    return r != ncclSuccess ? r : comm_connect(comm);
}

/* FAKE_NCCL_MEET: wait until every rank of "c" reached this all-reduce. */
static void meet(struct ncclComm *c)
{
    const char *dir = getenv("FAKE_NCCL_MEET");
    if (!dir || !*dir)
        return;
    long k = ++c->allreduces;
    int slot = (int)(c - comms);
    char path[4096];
    snprintf(path, sizeof path, "%s/c%d.%ld.r%d", dir, slot, k, c->rank);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    for (int r = 0; r < c->size; r++) {
        snprintf(path, sizeof path, "%s/c%d.%ld.r%d", dir, slot, k, r);
        while (access(path, F_OK) != 0) {
            struct timespec ts = { 0, 5 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t s)
{
    (void)sb; (void)rb;
    ncclResult_t r = check(count, dt, comm);
    if (r == ncclSuccess)
        r = check_op(op);
    if (r != ncclSuccess)
        return r;
    static long made, fail_at = -1;
    if (fail_at < 0) {
        const char *f = getenv("FAKE_NCCL_FAIL_AT");
        fail_at = f ? atol(f) : 0;
    }
    if (fail_at > 0 && __atomic_add_fetch(&made, 1, __ATOMIC_RELAXED) == fail_at)
        return ncclRemoteError;
    if ((r = comm_connect(comm)) != ncclSuccess)
        return r;
    meet(comm);
    dim3 g = { 1, 1, 1 }, b = { 64, 1, 1 };
    return cudaLaunchKernel(&kernel_stub, g, b, NULL, 0, s) == cudaSuccess
        ? ncclSuccess : ncclUnhandledCudaError;
}

FAKE_EXPORT ncclResult_t ncclAllGather(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                       ncclComm_t comm, cudaStream_t s)
{
    (void)sb; (void)rb; (void)s;
    return connected(check(count, dt, comm), comm);
}

FAKE_EXPORT ncclResult_t ncclReduceScatter(const void *sb, void *rb, size_t count,
                                           ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t s)
{
    (void)sb; (void)rb; (void)s;
    ncclResult_t r = check(count, dt, comm);
    return connected(r != ncclSuccess ? r : check_op(op), comm);
}

FAKE_EXPORT ncclResult_t ncclBroadcast(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                       int root, ncclComm_t comm, cudaStream_t s)
{
    (void)sb; (void)rb; (void)s;
    ncclResult_t r = check(count, dt, comm);
    return connected(r != ncclSuccess ? r : check_root(root, comm), comm);
}

FAKE_EXPORT ncclResult_t ncclBcast(void *b, size_t count, ncclDataType_t dt, int root,
                                   ncclComm_t comm, cudaStream_t s)
{
    return ncclBroadcast(b, b, count, dt, root, comm, s);
}

FAKE_EXPORT ncclResult_t ncclReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s)
{
    (void)sb; (void)rb; (void)s;
    ncclResult_t r = check(count, dt, comm);
    if (r == ncclSuccess)
        r = check_op(op);
    return connected(r != ncclSuccess ? r : check_root(root, comm), comm);
}

FAKE_EXPORT ncclResult_t ncclAlltoAll(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                      ncclComm_t comm, cudaStream_t s)
{
    (void)sb; (void)rb; (void)s;
    return connected(check(count, dt, comm), comm);
}

FAKE_EXPORT ncclResult_t ncclSend(const void *sb, size_t count, ncclDataType_t dt, int peer,
                                  ncclComm_t comm, cudaStream_t s)
{
    (void)sb; (void)s;
    ncclResult_t r = check(count, dt, comm);
    return connected(r != ncclSuccess ? r : check_root(peer, comm), comm);
}

FAKE_EXPORT ncclResult_t ncclRecv(void *rb, size_t count, ncclDataType_t dt, int peer,
                                  ncclComm_t comm, cudaStream_t s)
{
    (void)rb; (void)s;
    ncclResult_t r = check(count, dt, comm);
    return connected(r != ncclSuccess ? r : check_root(peer, comm), comm);
}

FAKE_EXPORT ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

/* Called inside this library, never through an exported name (a preloaded
 * wrapper of that name would see a call the real NCCL does not make). */
static ncclResult_t group_end(void)
{
    if (group_depth == 0)
        return ncclInvalidUsage;
    group_depth--;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGroupEnd(void)
{
    return group_end();
}

FAKE_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    if (!simInfo)
        return ncclInvalidArgument;
    ncclResult_t r = group_end();
    if (r == ncclSuccess)
        simInfo->estimatedTime = 1.0f;
    return r;
}

FAKE_EXPORT ncclResult_t ncclGather(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                    int root, ncclComm_t comm, cudaStream_t s)
{
    (void)sb; (void)rb; (void)s;
    ncclResult_t r = check(count, dt, comm);
    return connected(r != ncclSuccess ? r : check_root(root, comm), comm);
}

FAKE_EXPORT ncclResult_t ncclScatter(const void *sb, void *rb, size_t count, ncclDataType_t dt,
                                     int root, ncclComm_t comm, cudaStream_t s)
{
    (void)sb; (void)rb; (void)s;
    ncclResult_t r = check(count, dt, comm);
    return connected(r != ncclSuccess ? r : check_root(root, comm), comm);
}

/* ---- memory ---------------------------------------------------------------- */

FAKE_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    return cudaMalloc(ptr, size) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

FAKE_EXPORT ncclResult_t ncclMemFree(void *ptr)
{
    return cudaFree(ptr) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

FAKE_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                          void **handle)
{
    if (!comm_ok(comm) || !buff || !size || !handle)
        return ncclInvalidArgument;
    for (int i = 0; i < FAKE_WINDOWS; i++)
        if (!regs[i].used) {
            regs[i].used = 1;
            regs[i].comm = comm;
            *handle = &regs[i];
            return ncclSuccess;
        }
    return ncclSystemError;
}

FAKE_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    struct fake_reg *g = handle;
    if (!comm_ok(comm) || g < regs || g >= regs + FAKE_WINDOWS || !g->used || g->comm != comm)
        return ncclInvalidArgument;
    g->used = 0;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                                ncclWindow_t *win, int winFlags)
{
    (void)winFlags;
    if (!comm_ok(comm) || !buff || !size || !win)
        return ncclInvalidArgument;
    for (int i = 0; i < FAKE_WINDOWS; i++)
        if (!windows[i].used) {
            windows[i].used = 1;
            windows[i].comm = comm;
            windows[i].size = size;
            *win = &windows[i];
            return ncclSuccess;
        }
    return ncclSystemError;
}

static int window_ok(ncclWindow_t w, ncclComm_t comm)
{
    return w && w >= windows && w < windows + FAKE_WINDOWS && w->used && w->comm == comm;
}

FAKE_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    if (!comm_ok(comm) || !window_ok(win, comm))
        return ncclInvalidArgument;
    win->used = 0;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
    return comm_ok(comm) && (flags & ~NCCL_SUSPEND_MEM) == 0 ? ncclSuccess : ncclInvalidArgument;
}

FAKE_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm)
{
    return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
}

FAKE_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements *reqs,
                                           struct ncclDevComm *outDevComm)
{
    return comm_ok(comm) && reqs && outDevComm ? ncclSuccess : ncclInvalidArgument;
}

FAKE_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm *devComm)
{
    return comm_ok(comm) && devComm ? ncclSuccess : ncclInvalidArgument;
}

/* ---- one-sided calls ---------------------------------------------------------- */

FAKE_EXPORT ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclWindow_t peerWin, size_t peerWinOffset,
                                       int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                       cudaStream_t stream)
{
    (void)localbuff; (void)sigIdx; (void)ctx; (void)stream;
    ncclResult_t r = check(count, datatype, comm);
    if (r == ncclSuccess)
        r = check_root(peer, comm);
    if (r != ncclSuccess)
        return r;
    return window_ok(peerWin, comm) && peerWinOffset <= peerWin->size && !flags
        ? ncclSuccess : ncclInvalidArgument;
}

FAKE_EXPORT ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags,
                                    ncclComm_t comm, cudaStream_t stream)
{
    (void)sigIdx; (void)ctx; (void)stream;
    if (!comm_ok(comm) || flags)
        return ncclInvalidArgument;
    return check_root(peer, comm);
}

FAKE_EXPORT ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs,
                                        ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    if (!comm_ok(comm) || nDesc < 0 || (nDesc > 0 && !signalDescs))
        return ncclInvalidArgument;
    for (int i = 0; i < nDesc; i++)
        if (check_root(signalDescs[i].peer, comm) != ncclSuccess || signalDescs[i].opCnt < 0)
            return ncclInvalidArgument;
    return ncclSuccess;
}

/* ---- communicator shutdown ---------------------------------------------------- */

FAKE_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
}

FAKE_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    return comm_ok(comm) && revokeFlags == 0 ? ncclSuccess : ncclInvalidArgument;
}
