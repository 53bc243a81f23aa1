/*
 * vocab.h - the vocabulary records and handlers share: element types,
 * GEMM precision classes, collectives, memory classes, API layers, and the
 * names and factors derived from them (torch's type names, nccl-tests' bus
 * bandwidth).  Pure data and inline functions: every side may include it.
 */
#ifndef TRAINPROF_COLLECTOR_VOCAB_H
#define TRAINPROF_COLLECTOR_VOCAB_H

#include <stdint.h>

/* What memory an allocation holds (each class is counted apart). */
enum tp_mem_class {
    TP_MEM_DEVICE = 0,  /* device memory: cudaMalloc*, cuMemAlloc*, VMM physical (cuMemCreate) */
    TP_MEM_MANAGED,     /* unified memory (cudaMallocManaged, cuMemAllocManaged) */
    TP_MEM_HOST,        /* page-locked host memory (cudaMallocHost, cudaHostAlloc, ...) */
    TP_MEM_CLASS_COUNT
};

/* Which layer an intercepted entry point belongs to. */
enum tp_layer { TP_LAYER_NONE = 0, TP_LAYER_RUNTIME, TP_LAYER_DRIVER, TP_LAYER_LIBRARY };

/* Element types of library calls ("dtype" args use torch's names). */
enum tp_dtype {
    TP_DT_UNKNOWN = 0, TP_DT_F32, TP_DT_F64, TP_DT_F16, TP_DT_BF16, TP_DT_F8E4M3,
    TP_DT_F8E5M2, TP_DT_I8, TP_DT_U8, TP_DT_I32, TP_DT_U32, TP_DT_I64, TP_DT_U64,
    TP_DT_C32, TP_DT_C64, TP_DT_COUNT
};

/* The precision class of a GEMM, which picks the peak for MFU. */
enum tp_precision {
    TP_PREC_UNKNOWN = 0, TP_PREC_FP64, TP_PREC_FP32, TP_PREC_TF32, TP_PREC_BF16,
    TP_PREC_FP16, TP_PREC_FP8, TP_PREC_INT8, TP_PREC_COUNT
};

/* Collectives, point-to-point calls and one-sided (window) calls. */
enum tp_coll {
    TP_COLL_NONE = 0, TP_COLL_ALLREDUCE, TP_COLL_ALLGATHER, TP_COLL_REDUCESCATTER,
    TP_COLL_BROADCAST, TP_COLL_REDUCE, TP_COLL_SEND, TP_COLL_RECV, TP_COLL_ALLTOALL,
    TP_COLL_GATHER, TP_COLL_SCATTER, TP_COLL_PUT_SIGNAL, TP_COLL_SIGNAL, TP_COLL_WAIT_SIGNAL,
    TP_COLL_COUNT
};

/* A collective whose communicator is unknown (record's u.lib.batch). */
#define TP_COLL_NO_COMM UINT32_MAX

/* A wait on signals from more than one peer (record's u.lib.k). */
#define TP_COLL_PEERS UINT32_MAX

/* tp_coll_rooted - 1 if "op" has a root rank (u.lib.k). */
static inline int tp_coll_rooted(unsigned op)
{
    return op == TP_COLL_BROADCAST || op == TP_COLL_REDUCE || op == TP_COLL_GATHER ||
           op == TP_COLL_SCATTER;
}

/* tp_coll_peered - 1 if "op" names one peer rank (u.lib.k). */
static inline int tp_coll_peered(unsigned op)
{
    return op == TP_COLL_SEND || op == TP_COLL_RECV || op == TP_COLL_PUT_SIGNAL ||
           op == TP_COLL_SIGNAL || op == TP_COLL_WAIT_SIGNAL;
}

/* tp_dtype_size - bytes per element, 0 if unknown. */
static inline unsigned tp_dtype_size(unsigned dt)
{
    switch (dt) {
    case TP_DT_F64: case TP_DT_I64: case TP_DT_U64: case TP_DT_C32: return 8;
    case TP_DT_F32: case TP_DT_I32: case TP_DT_U32: return 4;
    case TP_DT_F16: case TP_DT_BF16: return 2;
    case TP_DT_F8E4M3: case TP_DT_F8E5M2: case TP_DT_I8: case TP_DT_U8: return 1;
    case TP_DT_C64: return 16;
    default: return 0;
    }
}

/* tp_dtype_name - torch's name of the type ("Float", "BFloat16", ...). */
static inline const char *tp_dtype_name(unsigned dt)
{
    switch (dt) {
    case TP_DT_F32: return "Float";
    case TP_DT_F64: return "Double";
    case TP_DT_F16: return "Half";
    case TP_DT_BF16: return "BFloat16";
    case TP_DT_F8E4M3: return "Float8_e4m3fn";
    case TP_DT_F8E5M2: return "Float8_e5m2";
    case TP_DT_I8: return "Char";
    case TP_DT_U8: return "Byte";
    case TP_DT_I32: return "Int";
    case TP_DT_U32: return "UInt32";
    case TP_DT_I64: return "Long";
    case TP_DT_U64: return "UInt64";
    case TP_DT_C32: return "ComplexFloat";
    case TP_DT_C64: return "ComplexDouble";
    default: return "unknown";
    }
}

/* tp_dtype_cpp_name - the type as torch.profiler writes "Input type"
 * (c10's C++ names: "float", "c10::Half", "long int"; TensorBoard's
 * Distributed view sizes a collective's message from them). */
static inline const char *tp_dtype_cpp_name(unsigned dt)
{
    switch (dt) {
    case TP_DT_F32: return "float";
    case TP_DT_F64: return "double";
    case TP_DT_F16: return "c10::Half";
    case TP_DT_BF16: return "c10::BFloat16";
    case TP_DT_F8E4M3: return "c10::Float8_e4m3fn";
    case TP_DT_F8E5M2: return "c10::Float8_e5m2";
    case TP_DT_I8: return "signed char";
    case TP_DT_U8: return "unsigned char";
    case TP_DT_I32: return "int";
    case TP_DT_U32: return "unsigned int";
    case TP_DT_I64: return "long int";
    case TP_DT_U64: return "unsigned long";
    case TP_DT_C32: return "c10::complex<float>";
    case TP_DT_C64: return "c10::complex<double>";
    default: return "";
    }
}

/* tp_precision_name - "fp32", "tf32", "bf16", ... */
static inline const char *tp_precision_name(unsigned p)
{
    static const char *const names[TP_PREC_COUNT] = {
        "unknown", "fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8",
    };
    return p < TP_PREC_COUNT ? names[p] : "unknown";
}

/* tp_coll_name - the collective's name as Kineto writes "Collective name". */
static inline const char *tp_coll_name(unsigned op)
{
    static const char *const names[TP_COLL_COUNT] = {
        "unknown", "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",
        "send", "recv", "all_to_all", "gather", "scatter", "put_signal", "signal", "wait_signal",
    };
    return op < TP_COLL_COUNT ? names[op] : "unknown";
}

/* tp_coll_annotation - the record_function torch's ProcessGroupNCCL wraps
 * around the NCCL call ("nccl:" + opTypeToString), the name TensorBoard's
 * Distributed view looks for. */
static inline const char *tp_coll_annotation(unsigned op)
{
    static const char *const names[TP_COLL_COUNT] = {
        "nccl:unknown", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
        "nccl:broadcast", "nccl:reduce", "nccl:send", "nccl:recv", "nccl:all_to_all",
        "nccl:gather", "nccl:scatter", "nccl:put_signal", "nccl:signal", "nccl:wait_signal",
    };
    return op < TP_COLL_COUNT ? names[op] : "nccl:unknown";
}

/* tp_coll_busbw_factor - bus bandwidth / algorithm bandwidth for "op" over
 * "n" ranks, as nccl-tests defines it (PERFORMANCE.md; gather.cu and
 * scatter.cu: (n-1)/n).  One-sided calls move one message: 1. */
static inline double tp_coll_busbw_factor(unsigned op, unsigned n)
{
    if (n == 0)
        return 0;
    switch (op) {
    case TP_COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case TP_COLL_ALLGATHER: case TP_COLL_REDUCESCATTER: case TP_COLL_ALLTOALL:
    case TP_COLL_GATHER: case TP_COLL_SCATTER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

/* tp_coll_nelems - elements in and out per rank, from NCCL's count argument
 * (allgather and gather count what each rank sends, reduce_scatter and
 * scatter what each receives, all_to_all what goes to each peer), as
 * torch's record_param_comms gives them (gather: numel, numel x size;
 * scatter: numel x size, numel; all_to_all: both tensors' numel, torch
 * passing numel / size to ncclAlltoAll). */
static inline void tp_coll_nelems(unsigned op, uint64_t count, unsigned n, uint64_t *in, uint64_t *out)
{
    *in = *out = count;
    if (op == TP_COLL_ALLGATHER || op == TP_COLL_GATHER)
        *out = count * n;
    else if (op == TP_COLL_REDUCESCATTER || op == TP_COLL_SCATTER)
        *in = count * n;
    else if (op == TP_COLL_ALLTOALL)
        *in = *out = count * n;
}

/* tp_metadata_reserved - the top-level trace keys TRAINPROF_METADATA may not
 * set: the ones trainprof writes and the ones catapult reads itself (so the
 * trace would not load, or load differently); NULL-terminated. */
extern const char *const tp_metadata_reserved[];

#endif
