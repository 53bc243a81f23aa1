/*
 * record.h - the hot record: what an intercepted call writes.
 *
 * DESIGN
 * The hot path writes one fixed-size struct tp_record (64 bytes, one cache
 * line) per intercepted call into its thread's buffer: raw values only, no
 * strings, timestamps in TSC ticks.  At the end of a window the flush thread
 * walks the buffers and turns every record into a struct tp_event (names
 * resolved, times in Unix nanoseconds) that it hands to the handlers
 * (sink.h, the handler contract).  The values stored in the small fields
 * (types, precisions, collectives, memory classes) are the vocabulary of
 * vocab.h.
 */
#ifndef TRAINPROF_COLLECTOR_RECORD_H
#define TRAINPROF_COLLECTOR_RECORD_H

#include <stdint.h>

#include "vocab.h"

/* The longest name a record's string ids stand for (intern.c): longer ones
 * are cut on a UTF-8 boundary.  Handlers size their name buffers by it. */
#define TP_INTERN_LEN_MAX  1024

enum tp_rec_kind {
    TP_REC_NONE = 0,
    TP_REC_API,      /* a runtime/driver call: memcpy, memset, sync, profiler control */
    TP_REC_LAUNCH,   /* a kernel or graph launch */
    TP_REC_STEP,     /* a recorded step ended: t0 = step start, t1 = step end */
    TP_REC_RANGE,    /* an NVTX or trainprof range, written when it ends */
    TP_REC_MARK,     /* an instant (NVTX mark, trainprof_instant) */
    TP_REC_COUNTER,  /* trainprof_counter(name, value) */
    TP_REC_STACK,    /* host call-stack frames of the record that follows it
                        on the same thread (TRAINPROF_WITH_STACK; collector/modules/stack.h) */
    TP_REC_KIND_COUNT
};

/* Launch forms: how rec.u.launch.func is to be interpreted. */
enum tp_func_kind {
    TP_FUNC_STUB = 0,   /* host stub address (cudaLaunchKernel, cooperative, ExC) */
    TP_FUNC_KERNEL,     /* cudaKernel_t from __cudaGetKernel (__cudaLaunchKernel) */
    TP_FUNC_GRAPH,      /* cudaGraphExec_t or CUgraphExec (graph launches) */
    TP_FUNC_DRIVER,     /* CUfunction or CUkernel (driver launches: cuLaunchKernel*) */
};

/* Memory-copy kinds, as in enum cudaMemcpyKind (0..4). */

struct tp_record {
    uint8_t  kind;      /* enum tp_rec_kind */
    uint8_t  gen;       /* window generation (mod 256) the record belongs to */
    uint16_t api;       /* enum tp_api_id (collector/record/apis.h), or 0 */
    int32_t  status;    /* return code of the real call */
    uint64_t t0;        /* TSC ticks at entry (range/step: start) */
    uint64_t t1;        /* TSC ticks at return (range/step: end) */
    union {
        struct {
            uint64_t func;      /* see enum tp_func_kind */
            uint64_t stream;
            uint32_t grid_x;
            uint16_t grid_y, grid_z;
            uint16_t block_x, block_y, block_z;
            uint8_t  func_kind;
            uint8_t  pad;
            uint32_t smem;
            uint32_t corr;      /* correlation id, 0 = assign at flush */
        } launch;
        struct {
            uint64_t bytes;     /* memcpy/memset size */
            uint64_t stream;    /* stream or event handle, 0 if none */
            uint64_t dst, src;  /* memcpy: addresses; memset: dst, value */
            uint32_t copy_kind; /* enum cudaMemcpyKind for copies */
            uint32_t corr;
        } api;
        struct {                /* library calls: TP_FORM_GEMM, TP_FORM_COLL */
            uint64_t flops;     /* GEMM: estimated FLOPs (2mnk x batch; 8mnk complex);
                                   TP_LIB_BLAS: collector/record/flops/blas.c's count */
            uint64_t bytes;     /* collectives: count x dtype size, as passed;
                                   TP_LIB_BLAS copy/swap: n x element size */
            uint32_t m, n, k;   /* GEMM sizes (saturated at UINT32_MAX);
                                   TP_LIB_BLAS: the routine's own m, n, k (or
                                   nrhs), those op's TP_BLAS_HAS_* name;
                                   collectives: m = group size, n = rank,
                                   k = peer (send/recv) or root, else 0 */
            uint32_t batch;     /* GEMM batch count (1 if none); collectives: the
                                   communicator (collector/record/comms.h serial), or
                                   TP_COLL_NO_COMM */
            uint8_t  dtype;     /* enum tp_dtype: A/B, or the collective's buffers */
            uint8_t  precision; /* enum tp_precision: GEMM compute class */
            uint8_t  op;        /* collectives: enum tp_coll; TP_LIB_BLAS: TP_BLAS_HAS_* */
            uint8_t  flags;     /* TP_LIB_* */
            uint32_t corr;
        } lib;
        struct {                /* TP_FORM_TENSOR: a cuDNN op's main tensor */
            uint32_t dim[8];    /* logical dims (N, C, spatial...; CUDNN_DIM_MAX
                                   at most), each saturated at UINT32_MAX */
            uint8_t  dtype;     /* enum tp_dtype, at u.lib.dtype's offset */
            uint8_t  pad;
            uint8_t  nd;        /* dims used, 0 if unknown */
            uint8_t  flags;     /* at u.lib.flags' offset */
            uint32_t corr;      /* at u.lib.corr's offset */
        } tensor;
        struct {                /* TP_FORM_ALLOC, TP_FORM_FREE (collector/modules/memtrack.h) */
            uint64_t addr;      /* address; cuMemCreate/cuMemRelease: the handle */
            uint64_t bytes;     /* size (allocations: asked for, also when failed;
                                   frees: the size the address was allocated with,
                                   0 if unknown) */
            uint64_t total;     /* bytes held in (device, class) after this call */
            uint32_t origin;    /* the memory ledger's call site of the allocation
                                   (collector/modules/memtrack.h; a free: the
                                   allocation's), TP_MEM_NO_ORIGIN if none */
            uint32_t spare;
            int16_t  device;    /* CUDA device ordinal; -1 for host-pinned memory */
            uint8_t  mclass;    /* enum tp_mem_class */
            uint8_t  flags;     /* TP_MEM_* */
            uint32_t corr;      /* same offset as the other forms' corr */
        } mem;
        struct {
            uint64_t index;     /* global 0-based step index */
            uint32_t signal;    /* which step signal fired (enum tp_signal_kind) */
            int32_t  tid;       /* the thread that ended the step (its record sits in
                                   the step markers' buffer: collector/record/buffer.h) */
            char     thread[16];/* that thread's name */
        } step;
        struct {
            uint32_t name;      /* interned string id (torch's operators: the name only) */
            int32_t  tid;       /* thread the range started on (start/end ranges) */
            uint32_t domain;    /* interned domain name id, 0 = default */
            uint32_t source;    /* enum tp_range_source */
            uint64_t range_id;  /* start/end ranges: the id; torch's operators: op_id */
            int64_t  seq;       /* torch's operators: sequence number, -1 if none */
            uint32_t sizes;     /* torch's operators: interned input shapes, 0 if none */
        } range;
        struct {
            uint32_t name;
            uint32_t domain;
            double   value;     /* counters */
        } mark;
        uint8_t raw[40];
    } u;
};

_Static_assert(sizeof(struct tp_record) == 64, "records are one cache line");

_Static_assert(__builtin_offsetof(struct tp_record, u.mem.corr) ==
               __builtin_offsetof(struct tp_record, u.api.corr), "corr at one offset");
_Static_assert(__builtin_offsetof(struct tp_record, u.tensor.corr) ==
               __builtin_offsetof(struct tp_record, u.lib.corr) &&
               __builtin_offsetof(struct tp_record, u.tensor.dtype) ==
               __builtin_offsetof(struct tp_record, u.lib.dtype) &&
               __builtin_offsetof(struct tp_record, u.tensor.flags) ==
               __builtin_offsetof(struct tp_record, u.lib.flags),
               "a library record's corr, dtype and flags at one offset in every form");

#define TP_MEM_FAILED  0x01u  /* the call failed (e.g. out of memory): nothing changed */
#define TP_MEM_UNKNOWN 0x02u  /* a free of an address never seen allocated: bytes 0 */
#define TP_MEM_NOOP    0x04u  /* a free of NULL (cudaFree(0) initialises the context) */
#define TP_MEM_UNTRACKED 0x08u /* TRAINPROF_PROFILE_MEMORY=0: addr and bytes only, no totals */

/* Where a range came from.  TP_RANGE_TORCH: one of torch's operator ranges
 * (collector/record/torchop.h), its fields kept in the record so that a message
 * unique per call (op_id) is never interned. */
enum tp_range_source { TP_RANGE_NVTX = 0, TP_RANGE_API = 1, TP_RANGE_TORCH = 2 };

#define TP_LIB_COMPLEX 0x01u   /* GEMM on complex numbers */
#define TP_LIB_GROUPED 0x02u   /* collective issued inside ncclGroupStart/End */
#define TP_LIB_CAPTURED 0x04u  /* made during a CUDA graph capture: runs at graph launch */
#define TP_LIB_BLAS    0x08u   /* TP_FORM_GEMM record of a cuBLAS routine that is no matrix
                                  product (collector/record/flops/blas.h): m, n, k are its own sizes,
                                  not A m x k and B k x n */

/* TP_LIB_BLAS records: which sizes the routine takes (u.lib.op); k holds
 * nrhs under TP_BLAS_HAS_NRHS (getrs, gels). */
#define TP_BLAS_HAS_M    0x01u
#define TP_BLAS_HAS_N    0x02u
#define TP_BLAS_HAS_K    0x04u
#define TP_BLAS_HAS_NRHS 0x08u

/* What an API record's payload holds: the record form of its .def line. */
enum tp_form {
    TP_FORM_NONE = 0,
    TP_FORM_LAUNCH,       /* u.launch */
    TP_FORM_COPY,         /* u.api: dst, src, bytes, copy_kind, stream */
    TP_FORM_SET,          /* u.api: dst, src = value, bytes, stream */
    TP_FORM_SYNC_STREAM,  /* u.api.stream: a stream (0: the device) */
    TP_FORM_SYNC_EVENT,   /* u.api.stream: an event */
    TP_FORM_ALLOC,        /* u.mem: an allocation (collector/modules/memtrack.h) */
    TP_FORM_FREE,         /* u.mem: a free */
    TP_FORM_GEMM,         /* u.lib: a cuBLAS/cuBLASLt matrix product, or (flag
                             TP_LIB_BLAS) another cuBLAS routine with FLOPs */
    TP_FORM_COLL,         /* u.lib: an NCCL collective or send/recv */
    TP_FORM_CONV,         /* u.lib: a cuDNN convolution as its implicit GEMM:
                             m = N, n = output channels (K), k = C/groups x
                             filter spatial size, batch = output spatial size,
                             flops = 2 m n k batch */
    TP_FORM_RNN,          /* u.lib: a cuDNN RNN call (collector/record/flops/rnn.h):
                             flops, m = max sequence length, n = mini-batch,
                             k = input size, batch = recurrent state size,
                             op = layers x directions */
    TP_FORM_TENSOR,       /* u.tensor: a cuDNN op counted for no FLOPs, with
                             the dims of its main tensor */
};

/* tp_form_counts_flops - whether records of "form" carry u.lib.flops, the
 * FLOPs that the steps, the summary and graph captures add up. */
static inline int tp_form_counts_flops(int form)
{
    return form == TP_FORM_GEMM || form == TP_FORM_CONV || form == TP_FORM_RNN;
}

#endif
