/*
 * nccl.c - DESIGN: the NCCL wrappers, expanded from nccl.def with the shape
 * of the runtime wrappers (preload/cudart.c), nesting as library calls
 * (tp_lib_begin: the launches a collective makes are still recorded as
 * runtime calls of their own).
 *
 * A collective's record holds what its arguments say: bytes = count x the
 * element size (NCCL exports no type-size function, so the table is ours,
 * as nccl-tests keeps its own wordSize()), the dtype, and the communicator's
 * size and rank.  Those two are asked of NCCL (ncclCommCount and
 * ncclCommUserRank) at most once per communicator and kept in a small
 * lock-free open-addressing table keyed by the ncclComm_t pointer:
 *  - creation wrappers fill it from their own arguments (InitRank,
 *    InitRankConfig, InitRankScalable, InitAll), or from the getters right
 *    after the real call (Split, Shrink, Grow), outside any recording path;
 *  - Destroy and Abort remove the entry before the real call frees the
 *    communicator (a later communicator may get the same address);
 *  - a communicator we did not see created (a non-blocking one still
 *    initialising, pncclCommInitRank, a creator added later) is asked once,
 *    at its first recorded collective.
 * The getters of real NCCL emit NVTX ranges, so they are called with
 * tp_depth raised: nothing they do is recorded.
 *
 * The creation and destruction wrappers are not recorded and never
 * activate the profiler (like registration in cudart.c).
 *
 * ncclGroupStart/End (and ncclGroupSimulateEnd, which ends the group as
 * ncclGroupEnd does) keep a per-thread group depth on every call, even
 * outside windows: a window that opens or closes inside a group would
 * otherwise leave the depth wrong for the rest of the run.  It is one
 * thread-local add, and only in those three wrappers.
 *
 * The one-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal) are
 * collective records too: communicator, peer, and the bytes a put moves.
 * ncclMemAlloc/ncclMemFree are allocation lines (gate MEM, as in
 * cudart.def): they go through tp_mem_begin, counted in the memory timeline
 * between windows too, and the driver or runtime calls NCCL makes inside
 * them are folded in, so their memory counts once, under the call the
 * program made.  Every other wrapper nests as a library call.
 */
#include "nccl_compat.h"
/* tp_nccl_group_track runs on every call (the entry hook): no entry stubs */
#define TP_WRAP_STUBS 0
#include "wrap.h"
#include "collector/record/pgroup.h"
#include "collector/record/apis.h"
#include "collector/record/comms.h"
#include "collector/wrap/core.h"
#include "collector/wrap/memtrack_api.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#define TP_MISSING ncclSystemError

static __thread int tp_nccl_group __attribute__((tls_model("initial-exec")));

/* ---- dtype table ---------------------------------------------------------- */

/* enum tp_dtype of an ncclDataType_t; TP_DT_UNKNOWN (size 0) for anything
 * else, so an unknown type records bytes 0. */
static inline unsigned tp_nccl_dtype(int dt)
{
    static const uint8_t map[ncclNumTypes] = {
        [ncclInt8] = TP_DT_I8,         [ncclUint8] = TP_DT_U8,
        [ncclInt32] = TP_DT_I32,       [ncclUint32] = TP_DT_U32,
        [ncclInt64] = TP_DT_I64,       [ncclUint64] = TP_DT_U64,
        [ncclFloat16] = TP_DT_F16,     [ncclFloat32] = TP_DT_F32,
        [ncclFloat64] = TP_DT_F64,     [ncclBfloat16] = TP_DT_BF16,
        [ncclFloat8e4m3] = TP_DT_F8E4M3, [ncclFloat8e5m2] = TP_DT_F8E5M2,
    };
    return dt >= 0 && dt < ncclNumTypes ? map[dt] : TP_DT_UNKNOWN;
}

/* ---- communicator cache ---------------------------------------------------- */

typedef ncclResult_t (*tp_comm_get_fn)(const ncclComm_t, int *);
typedef ncclResult_t (*tp_version_fn)(int *);

static tp_comm_get_fn tp_comm_count, tp_comm_rank;
static tp_version_fn tp_get_version;

/* Resolves the getters (idempotent; called when a wrapper resolves its real
 * function, never on the recording path: tp_resolve may allocate). */
static void tp_nccl_getters(void)
{
    if (!__atomic_load_n(&tp_comm_rank, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&tp_comm_count, (tp_comm_get_fn)tp_resolve("ncclCommCount"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&tp_get_version, (tp_version_fn)tp_resolve("ncclGetVersion"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&tp_comm_rank, (tp_comm_get_fn)tp_resolve("ncclCommUserRank"),
                         __ATOMIC_RELEASE);
    }
}

/* NCCL's version, asked once (at the first communicator) for the trace's
 * distributedInfo; the getter emits no NVTX range but is called like the
 * others, with tp_depth raised. */
static void tp_nccl_version(void)
{
    static int asked;
    tp_version_fn fn = __atomic_load_n(&tp_get_version, __ATOMIC_ACQUIRE);
    if (!fn || __atomic_exchange_n(&asked, 1, __ATOMIC_ACQ_REL))
        return;
    int code = 0;
    tp_depth++;
    if (fn(&code) == ncclSuccess)
        tp_comms_set_version(code);
    tp_depth--;
}

#define TP_COMMS       1024u          /* slots; a job has a handful of communicators */
#define TP_COMM_PROBES 32u            /* longest probe sequence */
#define TP_COMM_TOMB   ((uintptr_t)1) /* a removed entry: keeps probe chains intact */
#define TP_COMM_VALID  (1ull << 63)

/* A cached value: TP_COMM_VALID | serial << 48 | size << 24 | rank (15, 24
 * and 24 bits: serials past 32767 and sizes past 16M saturate). */
static inline uint64_t tp_comm_pack(uint32_t serial, int size, int rank)
{
    uint64_t s = serial < 0x7fffu ? serial : 0x7fffu;
    uint64_t n = size <= 0 ? 0 : size < 0xffffff ? (uint64_t)size : 0xffffffu;
    uint64_t r = rank <= 0 ? 0 : rank < 0xffffff ? (uint64_t)rank : 0xffffffu;
    return TP_COMM_VALID | s << 48 | n << 24 | r;
}
#define TP_COMM_SERIAL(v) ((uint32_t)((v) >> 48) & 0x7fffu)
#define TP_COMM_SIZE(v)   ((uint32_t)((v) >> 24) & 0xffffffu)
#define TP_COMM_RANK(v)   ((uint32_t)(v) & 0xffffffu)

/* key: the communicator (0 = never used, TP_COMM_TOMB = removed);
 * val: tp_comm_pack(), 0 while being filled.  A reader
 * checks the key again after reading val, so a value is never taken from a
 * slot that changed hands in between (a collective racing the destruction
 * of its own communicator is the caller's bug anyway). */
static struct tp_comm_slot {
    _Atomic uintptr_t key;
    _Atomic uint64_t val;
} tp_comms[TP_COMMS];

static inline unsigned tp_comm_hash(uintptr_t key)
{
    return (unsigned)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 54) & (TP_COMMS - 1);
}

/* The cached value of "comm", 0 if none. */
static uint64_t tp_comm_lookup(uintptr_t comm)
{
    unsigned h = tp_comm_hash(comm);
    for (unsigned i = 0; i < TP_COMM_PROBES; i++) {
        struct tp_comm_slot *s = &tp_comms[(h + i) & (TP_COMMS - 1)];
        uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == 0)
            return 0;
        if (k == comm) {
            uint64_t v = atomic_load_explicit(&s->val, memory_order_acquire);
            if (v && atomic_load_explicit(&s->key, memory_order_acquire) == comm)
                return v;
            return 0;
        }
    }
    return 0;
}

/* Removes every entry of "comm" (two racing inserts may have made two). */
static void tp_comm_forget(uintptr_t comm)
{
    unsigned h = tp_comm_hash(comm);
    for (unsigned i = 0; i < TP_COMM_PROBES; i++) {
        struct tp_comm_slot *s = &tp_comms[(h + i) & (TP_COMMS - 1)];
        uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == 0)
            return;
        if (k == comm) {
            atomic_store_explicit(&s->val, 0, memory_order_release);
            atomic_store_explicit(&s->key, TP_COMM_TOMB, memory_order_release);
        }
    }
}

/* Stores the packed value "v" of "comm", replacing an entry it may have; a
 * full probe sequence leaves it uncached (each recorded call then asks NCCL). */
static void tp_comm_store(uintptr_t comm, uint64_t v)
{
    if (comm <= TP_COMM_TOMB)
        return;
    unsigned h = tp_comm_hash(comm);
    for (unsigned i = 0; i < TP_COMM_PROBES; i++) {
        struct tp_comm_slot *s = &tp_comms[(h + i) & (TP_COMMS - 1)];
        uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == comm) {
            atomic_store_explicit(&s->val, v, memory_order_release);
            return;
        }
    }
    for (unsigned i = 0; i < TP_COMM_PROBES; i++) {
        struct tp_comm_slot *s = &tp_comms[(h + i) & (TP_COMMS - 1)];
        uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if ((k == 0 || k == TP_COMM_TOMB) &&
            atomic_compare_exchange_strong_explicit(&s->key, &k, comm, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            atomic_store_explicit(&s->val, v, memory_order_release);
            return;
        }
    }
}

/* Asks NCCL for size and rank of "comm" and caches them under "serial"
 * (-1: a communicator not seen created, given the next serial once NCCL
 * answers); 0 if NCCL cannot tell yet (a non-blocking communicator still
 * initialising). */
static uint64_t tp_comm_ask(ncclComm_t comm, int64_t serial)
{
    tp_comm_get_fn gc = __atomic_load_n(&tp_comm_count, __ATOMIC_ACQUIRE);
    tp_comm_get_fn gr = __atomic_load_n(&tp_comm_rank, __ATOMIC_ACQUIRE);
    int size = 0, rank = 0;
    if (!comm || !gc || !gr)
        return 0;
    tp_depth++;
    int ok = gc(comm, &size) == ncclSuccess && gr(comm, &rank) == ncclSuccess;
    tp_depth--;
    if (!ok || size <= 0)
        return 0;
    if (serial < 0)
        serial = tp_comms_add(size, rank);
    else
        tp_comms_update((uint32_t)serial, size, rank);
    uint64_t v = tp_comm_pack((uint32_t)serial, size, rank);
    tp_comm_store((uintptr_t)comm, v);
    return v;
}

/* ---- records ----------------------------------------------------------------- */

static void tp_nccl_fill(struct tp_record *r, unsigned op, size_t count, int dt, ncclComm_t comm,
                         uint32_t peer)
{
    unsigned t = tp_nccl_dtype(dt);
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)count, (uint64_t)tp_dtype_size(t), &bytes))
        bytes = UINT64_MAX;
    uint64_t v = tp_comm_lookup((uintptr_t)comm);
    if (!v || !TP_COMM_SIZE(v)) {
        uint64_t asked = tp_comm_ask(comm, v ? (int64_t)TP_COMM_SERIAL(v) : -1);
        if (asked)
            v = asked;
    }
    r->u.lib.bytes = bytes;
    r->u.lib.dtype = (uint8_t)t;
    r->u.lib.op = (uint8_t)op;
    r->u.lib.m = TP_COMM_SIZE(v);
    r->u.lib.n = TP_COMM_RANK(v);
    r->u.lib.batch = v ? TP_COMM_SERIAL(v) : TP_COLL_NO_COMM;
    r->u.lib.k = peer;
    r->u.lib.flags = tp_nccl_group > 0 ? TP_LIB_GROUPED : 0;
}

/* The one peer every descriptor of a wait names, else TP_COLL_PEERS (none,
 * or several).  Called while recording only, after the real call read the
 * same array. */
static uint32_t tp_nccl_wait_peer(int n, const ncclWaitSignalDesc_t *d)
{
    if (n <= 0 || !d)
        return TP_COLL_PEERS;
    for (int i = 1; i < n; i++)
        if (d[i].peer != d[0].peer)
            return TP_COLL_PEERS;
    return (uint32_t)d[0].peer;
}

/* Group depth, kept on every call (see DESIGN); constant-folded away in
 * every other wrapper. */
static inline void tp_nccl_group_track(unsigned api)
{
    if (api == TP_API_ncclGroupStart)
        tp_nccl_group++;
    else if ((api == TP_API_ncclGroupEnd || api == TP_API_ncclGroupSimulateEnd) &&
             tp_nccl_group > 0)
        tp_nccl_group--;
}

/* Record expressions of nccl.def (see there). */
#define TP_NCCL_NO_TYPE (-1)
#define TP_R_COLL(op, count, dt, comm, peer) \
    if (tp_r) tp_nccl_fill(tp_r, op, count, dt, comm, peer)
#define TP_U64(x) ((uint64_t)(uintptr_t)(x))
/* what an output pointer holds once the call succeeded, else 0 */
#define TP_NCCL_OUT(p) (tp_rc == ncclSuccess && (p) ? TP_U64(*(p)) : 0)
/* NCCL names no out-of-memory result: a failed allocation is ncclUnhandledCudaError
 * or ncclSystemError; bad arguments are ncclInvalidArgument/ncclInvalidUsage */
#define TP_R_ALLOC(p, n, cls) \
    tp_mem_alloc_at(tp_r, &tp_c, cls, TP_NCCL_OUT(p), n, tp_rc == ncclSuccess, \
                    tp_rc == ncclUnhandledCudaError || tp_rc == ncclSystemError)
#define TP_R_FREE(p, cls)     tp_mem_free_at(tp_r, cls, TP_U64(p), 0, tp_rc == ncclSuccess)
#define TP_R_MAP(p, n, h) \
    if (tp_r) { tp_r->u.api.dst = TP_U64(p); tp_r->u.api.bytes = (n); tp_r->u.api.src = TP_U64(h); }
#define TP_R_NONE (void)tp_r

/* ---- blocking calls: the in-flight slot (preload/wrap.h TP_BLOCK_<name>) -- */

/* A collective or point-to-point call begins: its communicator by serial
 * (the identity every rank gives it: creation order, record/comms.h), its
 * number on it (collectives only count: a point-to-point call carries the
 * number of the last collective, as where it stands), bytes, peer or root,
 * stream.  The cache lookup is the record path's. */
static struct tp_inflight *tp_nccl_inflight(uint32_t api, unsigned op, size_t count, int dt,
                                            ncclComm_t comm, int peer, cudaStream_t s)
{
    uint64_t v = tp_comm_lookup((uintptr_t)comm);
    if (!v && comm)
        v = tp_comm_ask(comm, -1);
    uint32_t serial = v ? TP_COMM_SERIAL(v) : 0;
    uint64_t seq = 0;
    if (v)
        seq = tp_coll_peered(op) ? tp_inflight_last_seq(serial) : tp_inflight_next_seq(serial);
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)count, (uint64_t)tp_dtype_size(tp_nccl_dtype(dt)), &bytes))
        bytes = UINT64_MAX;
    return tp_inflight_begin(api, v ? serial + 1 : 0, seq, bytes, peer,
                             (uint64_t)(uintptr_t)s, op);
}
#define TP_IN_COLL(op, count, dt, comm, peer) tp_nccl_inflight(tp_api, op, count, dt, comm, peer, s)
#define TP_BLOCK_ncclAllReduce     ~, 1, TP_IN_COLL(TP_COLL_ALLREDUCE, count, dt, comm, -1)
#define TP_BLOCK_ncclAllGather     ~, 1, TP_IN_COLL(TP_COLL_ALLGATHER, count, dt, comm, -1)
#define TP_BLOCK_ncclReduceScatter ~, 1, TP_IN_COLL(TP_COLL_REDUCESCATTER, count, dt, comm, -1)
#define TP_BLOCK_ncclBroadcast     ~, 1, TP_IN_COLL(TP_COLL_BROADCAST, count, dt, comm, root)
#define TP_BLOCK_ncclBcast         ~, 1, TP_IN_COLL(TP_COLL_BROADCAST, count, dt, comm, root)
#define TP_BLOCK_ncclReduce        ~, 1, TP_IN_COLL(TP_COLL_REDUCE, count, dt, comm, root)
#define TP_BLOCK_ncclAlltoAll      ~, 1, TP_IN_COLL(TP_COLL_ALLTOALL, count, dt, comm, -1)
#define TP_BLOCK_ncclGather        ~, 1, TP_IN_COLL(TP_COLL_GATHER, count, dt, comm, root)
#define TP_BLOCK_ncclScatter       ~, 1, TP_IN_COLL(TP_COLL_SCATTER, count, dt, comm, root)
#define TP_BLOCK_ncclSend          ~, 1, TP_IN_COLL(TP_COLL_SEND, count, dt, comm, peer)
#define TP_BLOCK_ncclRecv          ~, 1, TP_IN_COLL(TP_COLL_RECV, count, dt, comm, peer)
#define TP_BLOCK_ncclWaitSignal    ~, 1, TP_IN_COLL(TP_COLL_WAIT_SIGNAL, 0, TP_NCCL_NO_TYPE, comm, -1)
#define TP_BLOCK_ncclGroupEnd      ~, 1, TP_IN_CALL(0, 0)

#define TP_LIB_FN(ret, name, params, args, gate, rec) \
    TP_WRAP_GATED(TP_GATE_##gate, ret, name, params, args, TP_MISSING, tp_nccl_getters(), \
                  tp_nccl_group_track(TP_API_##name), tp_lib_begin, rec)
#include "collector/record/apis/nccl.def"
#undef TP_LIB_FN

/* ---- communicator creation and destruction: feed the cache ------------------ */

/* The real "name", resolved once together with the getters.  Each creator
 * marks its thread while it runs (tp_lib_mark), so that the memory ledger
 * names NCCL as the owner of the buffers it allocates. */
#define TP_NCCL_REAL(name) TP_REAL_THEN(__typeof__(&name), name, TP_MISSING, tp_nccl_getters())

/* A new communicator: forget whatever the address held before, give it the
 * next serial, then store what the arguments say (size <= 0: ask NCCL,
 * which may not know yet: the entry then waits, size 0, for the first
 * collective to ask again).  The first creation also notes NCCL's version. */
static void tp_comm_created(ncclComm_t comm, int size, int rank)
{
    if (!comm)
        return;
    tp_nccl_version();
    tp_comm_forget((uintptr_t)comm);
    uint32_t serial = tp_comms_add(size, rank);
    if (size > 0)
        tp_comm_store((uintptr_t)comm, tp_comm_pack(serial, size, rank));
    else if (!tp_comm_ask(comm, serial))
        tp_comm_store((uintptr_t)comm, tp_comm_pack(serial, 0, 0));
}

TP_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    TP_NCCL_REAL(ncclCommInitRank);
    int marked = tp_lib_mark(TP_OUTER_ncclCommInitRank);
    ncclResult_t rc = real(comm, nranks, id, rank);
    tp_lib_unmark(marked);
    if ((rc == ncclSuccess || rc == ncclInProgress) && comm) {
        tp_comm_created(*comm, nranks, rank);
        tp_pgroup_nccl(rank, nranks);
    }
    return rc;
}

TP_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                              int rank, ncclConfig_t *config)
{
    TP_NCCL_REAL(ncclCommInitRankConfig);
    int marked = tp_lib_mark(TP_OUTER_ncclCommInitRankConfig);
    ncclResult_t rc = real(comm, nranks, id, rank, config);
    tp_lib_unmark(marked);
    if ((rc == ncclSuccess || rc == ncclInProgress) && comm) {
        tp_comm_created(*comm, nranks, rank);
        tp_pgroup_nccl(rank, nranks);
    }
    return rc;
}

TP_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid,
                                                ncclUniqueId *ids, ncclConfig_t *config)
{
    TP_NCCL_REAL(ncclCommInitRankScalable);
    int marked = tp_lib_mark(TP_OUTER_ncclCommInitRankScalable);
    ncclResult_t rc = real(comm, nranks, rank, nid, ids, config);
    tp_lib_unmark(marked);
    if ((rc == ncclSuccess || rc == ncclInProgress) && comm) {
        tp_comm_created(*comm, nranks, rank);
        tp_pgroup_nccl(rank, nranks);
    }
    return rc;
}

TP_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    TP_NCCL_REAL(ncclCommInitAll);
    int marked = tp_lib_mark(TP_OUTER_ncclCommInitAll);
    ncclResult_t rc = real(comms, ndev, devlist);
    tp_lib_unmark(marked);
    if (rc == ncclSuccess && comms)
        for (int i = 0; i < ndev; i++)
            tp_comm_created(comms[i], ndev, i);
    return rc;
}

TP_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                     ncclConfig_t *config)
{
    TP_NCCL_REAL(ncclCommSplit);
    int marked = tp_lib_mark(TP_OUTER_ncclCommSplit);
    ncclResult_t rc = real(comm, color, key, newcomm, config);
    tp_lib_unmark(marked);
    if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm)
        tp_comm_created(*newcomm, 0, 0);
    return rc;
}

TP_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int nexclude,
                                      ncclComm_t *newcomm, ncclConfig_t *config, int flags)
{
    TP_NCCL_REAL(ncclCommShrink);
    int marked = tp_lib_mark(TP_OUTER_ncclCommShrink);
    ncclResult_t rc = real(comm, exclude, nexclude, newcomm, config, flags);
    tp_lib_unmark(marked);
    if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm)
        tp_comm_created(*newcomm, 0, 0);
    return rc;
}

TP_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
                                    int rank, ncclComm_t *newcomm, ncclConfig_t *config)
{
    TP_NCCL_REAL(ncclCommGrow);
    int marked = tp_lib_mark(TP_OUTER_ncclCommGrow);
    ncclResult_t rc = real(comm, nRanks, uniqueId, rank, newcomm, config);
    tp_lib_unmark(marked);
    if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm)
        tp_comm_created(*newcomm, 0, 0);
    return rc;
}

TP_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    TP_NCCL_REAL(ncclCommDestroy);
    tp_comm_forget((uintptr_t)comm);
    return real(comm);
}

TP_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    TP_NCCL_REAL(ncclCommAbort);
    tp_comm_forget((uintptr_t)comm);
    return real(comm);
}
