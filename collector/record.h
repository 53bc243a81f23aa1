/*
 * record.h - the one format shared by the collector and the handlers.
 *
 * DESIGN
 * The hot path writes one fixed-size struct tp_record (64 bytes, one cache
 * line) per intercepted call into its thread's buffer: raw values only, no
 * strings, timestamps in TSC ticks.  At the end of a window the flush thread
 * walks the buffers and turns every record into a struct tp_event (names
 * resolved, times in Unix nanoseconds) that it hands to each handler in turn.
 * Handlers see only tp_event and tp_window: they could run in another process
 * on a dump of the records (the perf record/report split).
 */
#ifndef TRAINPROF_COLLECTOR_RECORD_H
#define TRAINPROF_COLLECTOR_RECORD_H

#include <stdint.h>

#include "cupti.h"
#include "devprops.h"

enum tp_rec_kind {
    TP_REC_NONE = 0,
    TP_REC_API,      /* a runtime/driver call: memcpy, memset, sync, profiler control */
    TP_REC_LAUNCH,   /* a kernel or graph launch */
    TP_REC_STEP,     /* a recorded step ended: t0 = step start, t1 = step end */
    TP_REC_RANGE,    /* an NVTX or trainprof range, written when it ends */
    TP_REC_MARK,     /* an instant (NVTX mark, trainprof_instant) */
    TP_REC_COUNTER,  /* trainprof_counter(name, value) */
    TP_REC_STACK,    /* host call-stack frames of the record that follows it
                        on the same thread (TRAINPROF_WITH_STACK; collector/stack.h) */
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
    uint16_t api;       /* enum tp_api_id (collector/apis.h, from the preload .def lists), or 0 */
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
            uint64_t flops;     /* GEMM: estimated FLOPs (2mnk x batch; 8mnk complex) */
            uint64_t bytes;     /* collectives: count x dtype size, as passed */
            uint32_t m, n, k;   /* GEMM sizes (saturated at UINT32_MAX);
                                   collectives: m = group size, n = rank,
                                   k = peer (send/recv) or root, else 0 */
            uint32_t batch;     /* GEMM batch count (1 if none) */
            uint8_t  dtype;     /* enum tp_dtype: A/B, or the collective's buffers */
            uint8_t  precision; /* enum tp_precision: GEMM compute class */
            uint8_t  op;        /* collectives: enum tp_coll */
            uint8_t  flags;     /* TP_LIB_* */
            uint32_t corr;
        } lib;
        struct {                /* TP_FORM_ALLOC, TP_FORM_FREE (collector/memory.h) */
            uint64_t addr;      /* address; cuMemCreate/cuMemRelease: the handle */
            uint64_t bytes;     /* size (allocations: asked for, also when failed;
                                   frees: the size the address was allocated with,
                                   0 if unknown) */
            uint64_t total;     /* bytes held in (device, class) after this call */
            uint64_t peak;      /* process high-water mark of (device, class) after it */
            int16_t  device;    /* CUDA device ordinal; -1 for host-pinned memory */
            uint8_t  mclass;    /* enum tp_mem_class */
            uint8_t  flags;     /* TP_MEM_* */
            uint32_t corr;      /* same offset as the other forms' corr */
        } mem;
        struct {
            uint64_t index;     /* global 0-based step index */
            uint32_t signal;    /* which step signal fired (enum tp_signal_kind) */
        } step;
        struct {
            uint32_t name;      /* interned string id */
            int32_t  tid;       /* thread the range started on (start/end ranges) */
            uint32_t domain;    /* interned domain name id, 0 = default */
            uint32_t source;    /* enum tp_range_source */
            uint64_t range_id;
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

/* What memory an allocation holds (SPEC 6: counted separately). */
enum tp_mem_class {
    TP_MEM_DEVICE = 0,  /* device memory: cudaMalloc*, cuMemAlloc*, VMM physical (cuMemCreate) */
    TP_MEM_MANAGED,     /* unified memory (cudaMallocManaged, cuMemAllocManaged) */
    TP_MEM_HOST,        /* page-locked host memory (cudaMallocHost, cudaHostAlloc, ...) */
    TP_MEM_CLASS_COUNT
};

#define TP_MEM_FAILED  0x01u  /* the call failed (e.g. out of memory): nothing changed */
#define TP_MEM_UNKNOWN 0x02u  /* a free of an address never seen allocated: bytes 0 */
#define TP_MEM_NOOP    0x04u  /* a free of NULL (cudaFree(0) initialises the context) */
#define TP_MEM_UNTRACKED 0x08u /* TRAINPROF_PROFILE_MEMORY=0: addr and bytes only, no totals */

enum tp_range_source { TP_RANGE_NVTX = 0, TP_RANGE_API = 1 };

/* A drained record as handlers see it. */
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

/* Collectives and point-to-point calls. */
enum tp_coll {
    TP_COLL_NONE = 0, TP_COLL_ALLREDUCE, TP_COLL_ALLGATHER, TP_COLL_REDUCESCATTER,
    TP_COLL_BROADCAST, TP_COLL_REDUCE, TP_COLL_SEND, TP_COLL_RECV, TP_COLL_ALLTOALL,
    TP_COLL_COUNT
};

#define TP_LIB_COMPLEX 0x01u   /* GEMM on complex numbers */
#define TP_LIB_GROUPED 0x02u   /* collective issued inside ncclGroupStart/End */
#define TP_LIB_CAPTURED 0x04u  /* made during a CUDA graph capture: runs at graph launch */

/* What an API record's payload holds: the record form of its .def line. */
enum tp_form {
    TP_FORM_NONE = 0,
    TP_FORM_LAUNCH,       /* u.launch */
    TP_FORM_COPY,         /* u.api: dst, src, bytes, copy_kind, stream */
    TP_FORM_SET,          /* u.api: dst, src = value, bytes, stream */
    TP_FORM_SYNC_STREAM,  /* u.api.stream: a stream (0: the device) */
    TP_FORM_SYNC_EVENT,   /* u.api.stream: an event */
    TP_FORM_ALLOC,        /* u.mem: an allocation (collector/memory.h) */
    TP_FORM_FREE,         /* u.mem: a free */
    TP_FORM_GEMM,         /* u.lib: a cuBLAS/cuBLASLt matrix product */
    TP_FORM_COLL,         /* u.lib: an NCCL collective or send/recv */
    TP_FORM_CONV,         /* u.lib: a cuDNN convolution as its implicit GEMM:
                             m = N, n = output channels (K), k = C/groups x
                             filter spatial size, batch = output spatial size,
                             flops = 2 m n k batch */
};

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
        "send", "recv", "all_to_all",
    };
    return op < TP_COLL_COUNT ? names[op] : "unknown";
}

/* tp_coll_busbw_factor - bus bandwidth / algorithm bandwidth for "op" over
 * "n" ranks, as nccl-tests defines it (PERFORMANCE.md). */
static inline double tp_coll_busbw_factor(unsigned op, unsigned n)
{
    if (n == 0)
        return 0;
    switch (op) {
    case TP_COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case TP_COLL_ALLGATHER: case TP_COLL_REDUCESCATTER: case TP_COLL_ALLTOALL: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

/* tp_coll_nelems - elements in and out per rank, from NCCL's count argument
 * (allgather counts what each rank sends, reduce_scatter what each receives). */
static inline void tp_coll_nelems(unsigned op, uint64_t count, unsigned n, uint64_t *in, uint64_t *out)
{
    *in = *out = count;
    if (op == TP_COLL_ALLGATHER)
        *out = count * n;
    else if (op == TP_COLL_REDUCESCATTER)
        *in = count * n;
}

struct tp_event {
    const struct tp_record *rec;   /* the raw record, for kind-specific fields */
    const char *name;              /* API/LAUNCH: entry point name ("cudaMemcpyAsync");
                                      RANGE/MARK/COUNTER: the message; STEP: NULL */
    const char *kernel;            /* LAUNCH: demangled kernel name ("" for graphs) */
    const char *domain;            /* NVTX domain name or NULL */
    const char *thread_name;       /* OS name of the recording thread ("" unknown) */
    int32_t  cbid;                 /* API/LAUNCH: CUPTI callback id, -1 unknown */
    uint8_t  layer;                /* API/LAUNCH: enum tp_layer */
    uint8_t  form;                 /* API/LAUNCH: enum tp_form */
    int32_t  pid;
    int32_t  tid;
    int64_t  ts_ns;                /* Unix time, ns */
    int64_t  dur_ns;               /* >= 0 */
    uint64_t correlation;          /* launches and API calls; unique per window
                                      (CUPTI's id when CUPTI saw the call) */
    uint64_t flops;                /* graph launches: library FLOPs captured in the graph */
    /* device side (CUPTI) */
    const struct tp_dev_record *dev; /* a device event: rec is NULL, pid is the
                                      device, tid the stream */
    uint64_t external_id;          /* Kineto's "External id": library calls, and
                                      the work they issued; 0 if none */
    uint8_t  flow;                 /* host: has device work (ac2g start);
                                      device: linked to a host call (ac2g end) */
    double   blocks_per_sm, warps_per_sm; /* kernels, 0 if the device is unknown */
    double   occupancy;            /* kernels: est. achieved occupancy %, -1 unknown */
    /* host call stack (TRAINPROF_WITH_STACK): symbolised frames, root
     * (outermost) first, ending at the caller of the intercepted function;
     * device events linked to a launch carry the launch's stack */
    const char *const *frames;
    int      n_frames;
};

/* Memory held in one (device, class) as a window saw it (collector/memory.h). */
struct tp_mem_usage {
    int16_t  device;              /* -1: host-pinned memory */
    uint8_t  mclass;              /* enum tp_mem_class */
    uint64_t start_bytes;         /* held when the window began recording */
    uint64_t end_bytes;           /* held when it stopped recording */
    uint64_t peak_bytes;          /* highest while it recorded */
    int64_t  peak_ns;             /* Unix ns when that peak was first reached
                                     (window start if never above start_bytes) */
    uint64_t peak_process;        /* highest since the process started */
    uint64_t allocs, frees;       /* successful calls in the window */
    uint64_t failed;              /* failed allocations in the window */
    uint64_t failed_bytes;        /* the largest size a failed allocation asked for */
};

/* A recorded step, with the library FLOPs of the calls that began in it. */
struct tp_window_step {
    uint64_t index;
    int64_t start_ns, end_ns;     /* Unix ns */
    uint64_t flops;
    int32_t tid;                  /* the thread that ended the step */
    const char *thread_name;
};

/* Report files a window may list for the exec handler (summary, memory
 * page and JSON, two stacks files, and room to spare). */
#define TP_WINDOW_REPORTS 8

/* What a handler knows about the window it is fed. */
struct tp_window {
    /* identity */
    const char *run_name;
    const char *hostname;
    const char *program;          /* process name (basename of argv[0]) */
    int32_t pid;
    int rank, local_rank, world_size, local_world_size, node_rank;
    uint64_t batch;               /* steps completed when the window was saved */
    uint64_t first_step, last_step; /* recorded steps, inclusive, when steps_recorded > 0 */
    uint64_t steps_recorded;      /* ProfilerStep events in the window */
    const struct tp_window_step *steps; /* the recorded steps in time order */
    uint64_t flops;               /* library FLOPs of the whole window */
    double peak_tflops;           /* TRAINPROF_PEAK_TFLOPS, 0 if unknown */
    int partial;                  /* cut short by exit or a signal (not with
                                     TRAINPROF_SCHEDULE=all, whose one window
                                     ends at exit by design) */
    const char *step_signal;      /* the signal that counted steps, "" if none */
    int64_t base_time_ns;         /* Kineto's baseTimeNanoseconds */
    int64_t start_ns, end_ns;     /* window bounds, Unix ns */
    uint64_t records;             /* records in the window */
    uint64_t dropped;             /* records lost to a full buffer */
    uint64_t late;                /* records that arrived after their window was written */
    /* device side: gpu is 1 when CUPTI collected this window */
    int gpu;
    const char *gpu_status;       /* tp_cupti_status() */
    const struct tp_devprop *devices; /* deviceProperties, n_devices entries */
    int n_devices;
    uint64_t host_launches;       /* launch records (wrappers) in the window */
    uint64_t gpu_kernels;         /* kernel records (CUPTI) */
    uint64_t gpu_kernels_linked;  /* of those, linked to a launch seen by a wrapper */
    uint64_t gpu_records;         /* device records of any kind */
    uint64_t gpu_dropped;         /* device records CUPTI or we dropped */
    double coverage;              /* gpu_kernels_linked / gpu_kernels, -1 if no kernels */
    /* memory (TRAINPROF_PROFILE_MEMORY): every (device, class) the process
     * has used so far, device memory first, then by device */
    const struct tp_mem_usage *mem;
    int n_mem;
    const char *config_json;      /* effective configuration, a JSON object */
    const char *user_metadata;    /* TRAINPROF_METADATA, a JSON object, or NULL */
    const char *trace_folder;     /* expanded TRAINPROF_FOLDER */
    const char *trace_filename;   /* expanded TRAINPROF_FILENAME (without .gz) */
    const char *reports_folder;   /* expanded TRAINPROF_REPORTS */
    int gzip;
    int overwrite;
    int record_shapes;            /* TRAINPROF_RECORD_SHAPES */
    const char *exec;             /* TRAINPROF_EXEC template, "" if unset */
    /* outputs: filled by handlers in list order (chrome first) */
    char trace_path[4096];        /* the saved trace, "" if none */
    char summary_line[256];       /* one line for TRAINPROF_LOG=info (summary handler) */
    char reports_saved[TP_WINDOW_REPORTS][4096]; /* the report files written, in order */
    int n_reports_saved;
};

#endif
