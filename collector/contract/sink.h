/*
 * sink.h - the handler contract: what the collector hands to output modules.
 *
 * DESIGN
 * The flush thread turns a window's records into struct tp_event values and
 * describes the window in a struct tp_window; both are read-only to the
 * handlers, which could run in another process on a dump of the records
 * (perf's split of record and report).  A handler's close() saves its files and
 * says which in a struct tp_saved, owned by the flush thread: chrome, first,
 * sets the trace there, and the reports that follow are named after it.
 * After every handler closed, the post-save stage (TRAINPROF_EXEC, then
 * TRAINPROF_KEEP) acts on what was saved.
 *
 * The collector reaches the handlers only through the struct tp_sink that
 * the preload's constructor hands down (tp_sink_set): the collector never
 * names a handler.
 */
#ifndef TRAINPROF_COLLECTOR_SINK_H
#define TRAINPROF_COLLECTOR_SINK_H

#include <stdint.h>

#include "collector/common/clock.h"
#include "record.h"

struct tp_device_record;
struct tp_device_prop;
/* The structs below are what events and windows point to: the stages that
 * fill them (record/torchop.c, drain/oplink.c, record/comms.c) include this
 * header for them, so that a handler reads them from the contract alone. */

/* One operator range, pointing into its message. */
struct tp_torch_op {
    size_t name_len;        /* the name: the message's first name_len bytes */
    int64_t seq;            /* autograd sequence number, -1 if none */
    uint64_t op_id;         /* the RecordFunction handle (unique in the process) */
    const char *sizes;      /* the input shapes, "[[32, 64], []]" (valid JSON), or NULL */
    size_t sizes_len;
    int cpu_op;             /* 1: an operator (a qualified name: aten::,
                               autograd::, c10d::; an autograd node such as
                               AddmmBackward0; detach); 0: a record_function
                               annotation ("Optimizer.step#AdamW.step", a
                               user's record_function) */
};

/* What Kineto writes of an operator's place in autograd (collector/drain/oplink.c's
 * DESIGN): the sequence number to write (an evaluate_function wrapper's:
 * its node's), whether a fwdbwd flow ends at it (a backward node; the
 * flow's id is the node's op_id) and the flows that start at it (a forward
 * operator: the op_ids of its nodes). */
struct tp_op_autograd {
    int64_t seq;
    int flow_end;
    const uint64_t *flows_out;
    size_t n_flows_out;
};

/* Communicators listed in a trace; later ones are still counted. */
#define TP_COMMS_LISTED 64

struct tp_comm_info {
    uint32_t serial;    /* creation order in the process, from 0 */
    uint32_t size;      /* ranks in the communicator, 0 if NCCL could not tell yet */
    int32_t rank;       /* this process's rank in it */
};


struct tp_event {
    const struct tp_record *rec;   /* the raw record, for kind-specific fields */
    const char *name;              /* API/LAUNCH: entry point name ("cudaMemcpyAsync");
                                      RANGE/MARK/COUNTER: the message; STEP: NULL */
    const char *kernel;            /* LAUNCH: demangled kernel name ("" for graphs) */
    const char *domain;            /* NVTX domain name or NULL */
    const char *thread_name;       /* OS name of the recording thread ("" unknown) */
    int32_t  cbid;                 /* API/LAUNCH: CUPTI callback id, -1 unknown */
    uint8_t  layer;                /* API/LAUNCH: enum tp_layer */
    uint8_t  form;                 /* API/LAUNCH: enum tp_form; device events:
                                      their issuer's (TP_FORM_COLL: a
                                      collective's kernel) */
    int32_t  pid;
    int32_t  tid;
    int64_t  ts_ns;                /* Unix time, ns */
    int64_t  dur_ns;               /* >= 0 */
    uint64_t correlation;          /* launches and API calls; unique per window
                                      (CUPTI's id when CUPTI saw the call) */
    uint64_t flops;                /* graph launches: library FLOPs captured in the graph */
    /* device side (CUPTI) */
    const struct tp_device_record *dev; /* (collector/contract/device.h) a device event: rec is NULL, pid is the
                                      device, tid the stream */
    uint64_t external_id;          /* Kineto's "External id": library calls, and
                                      the work they issued; 0 if none */
    const struct tp_record *issuer; /* device: the record of the library call
                                      that issued the work (a collective's
                                      kernel: its ncclAllReduce), NULL if none */
    uint8_t  flow;                 /* host: has device work (ac2g start);
                                      device: linked to a host call (ac2g end) */
    double   blocks_per_sm, warps_per_sm; /* kernels, 0 if the device is unknown */
    double   occupancy;            /* kernels: est. achieved occupancy %, -1 unknown */
    int64_t  wait_on_stream;       /* device syncs on a CUDA event (tp_device_waits_on_event):
                                      the CUPTI stream the event was last recorded on
                                      before the sync, and the correlation id of that
                                      cudaEventRecord (Kineto's wait_on_*); -1 unknown */
    int64_t  wait_on_corr;
    /* host call stack (TRAINPROF_WITH_STACK): symbolised frames, root
     * (outermost) first, ending at the caller of the intercepted function;
     * device events linked to a launch carry the launch's stack */
    const char *const *frames;
    int      n_frames;
    /* RANGE: one of torch's operator ranges (collector/record/torchop.h), its
     * fields pointing into "name"; NULL for any other range */
    const struct tp_torch_op *op;
    /* with "op": its place in autograd (collector/drain/oplink.h): the sequence
     * number to write in place of op->seq, the fwdbwd flows that end and
     * start at it; NULL if unknown */
    const struct tp_op_autograd *autograd;
    /* allocation and free records (TP_FORM_ALLOC, TP_FORM_FREE): the
     * memory ledger's owner and call site of the allocation, NULL if none */
    const char *mem_owner;
    const char *mem_site;
};

/* Memory held in one (device, class) as a window saw it (collector/modules/memtrack.h). */
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

/* Call sites listed per owner in a window's owner table. */
#define TP_MEM_TOP_SITES 5

/* One call site of an owner: its bytes held at the window's end. */
struct tp_mem_site_usage {
    const char *site;             /* "ncclCommInitRank > f+0x1c (libnccl.so.2)" */
    uint64_t live_bytes;
    uint64_t allocs;              /* successful allocations in the window */
};

/* One owner's memory in one (device, class) over a window
 * (collector/modules/memowner.h: who an owner is). */
struct tp_mem_owner_usage {
    int16_t  device;              /* -1: host-pinned memory */
    uint8_t  mclass;              /* enum tp_mem_class */
    uint16_t owner;               /* index into tp_window.mem_owner_names */
    uint64_t start_bytes;         /* held when the window began recording */
    uint64_t end_bytes;           /* held when it stopped */
    uint64_t peak_bytes;          /* the most it held at once in the window */
    uint64_t allocs, frees;       /* successful calls in the window */
    const struct tp_mem_site_usage *sites; /* its call sites by live bytes at
                                     the end, most first (TP_MEM_TOP_SITES at most) */
    int n_sites;
};

/* A point of the per-owner series: after a call at ts_ns, "owner" held
 * "bytes" in (device, class). */
struct tp_mem_owner_point {
    int64_t  ts_ns;
    int16_t  device;
    uint8_t  mclass;
    uint16_t owner;
    uint64_t bytes;
};

/* Memory held at exit by one owner in one (device, class): what was never freed. */
struct tp_mem_held {
    int16_t  device;
    uint8_t  mclass;
    uint16_t owner;               /* index into tp_window.mem_owner_names */
    uint64_t bytes, blocks;       /* blocks: allocations not freed */
};

/* A recorded step, with the library FLOPs of the calls that began in it. */
struct tp_window_step {
    uint64_t index;
    int64_t start_ns, end_ns;     /* Unix ns */
    uint64_t flops;
    int32_t tid;                  /* the thread that ended the step */
    const char *thread_name;
};

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
    int partial;                  /* cut short by exit or a signal (not by exit
                                     with TRAINPROF_SCHEDULE=all, whose one
                                     window ends at exit by design) */
    const char *partial_reason;   /* why, when partial: "exit" or the signal's
                                     name ("SIGTERM", "SIGSEGV", ...); else NULL */
    const char *trigger_id;       /* the trigger that asked for this window
                                     (TRAINPROF_TRIGGER), NULL if the schedule did */
    uint64_t trigger_requested;   /* its requested warmup step */
    int trigger_late;             /* it was read after that step had begun */
    const char *step_signal;      /* the signal that counted steps, "" if none */
    /* a flight recorder's dump (TRAINPROF_FLIGHT): its reason ("slow-step",
     * "oom", "SIGSEGV", ...), NULL for a window; the step it was asked at;
     * for slow-step that step's duration, the running median and the
     * threshold (0 otherwise) */
    const char *flight_reason;
    uint64_t flight_step;
    uint64_t flight_step_ns, flight_median_ns, flight_threshold_ns;
    int64_t base_time_ns;         /* Kineto's baseTimeNanoseconds */
    int64_t start_ns, end_ns;     /* window bounds, Unix ns */
    /* the clocks read at window start and end (tick 0: not read), and the
     * Unix ns the trace gives those ticks (its tick->time map, calibrated
     * per window): `trainprof merge` aligns ranks on them */
    struct tp_clock_triple clock_start, clock_end;
    int64_t clock_start_trace_ns, clock_end_trace_ns;
    double ns_per_tick;
    const char *clock_source;     /* "tsc" or "monotonic" */
    const char *boot_id;          /* tp_clock_boot_id(), "" unknown */
    /* torch's operators lost to the program's own profiler (collector/record/oplost.h):
     * why, NULL if none were; the recorded steps the loss touched, when
     * ops_lost_steps (0: it fell between recorded steps) */
    const char *ops_lost_why;
    uint64_t ops_lost_first, ops_lost_last;
    int ops_lost_steps;
    uint64_t records;             /* records in the window */
    uint64_t dropped;             /* records lost to a full buffer */
    uint64_t late;                /* records that arrived after their window was written */
    uint64_t names_lost;          /* events whose name (or kernel's, or domain's) the
                                     full name table refused: "<name table full>" */
    uint64_t ranges_lost;         /* ranges not kept: nested past 128 on a thread, or
                                     start/end ranges whose slot a newer one took */
    uint64_t unmatched_pops;      /* range pops with no open range (ignored) */
    /* device side: gpu is 1 when CUPTI collected this window */
    int gpu;
    const char *gpu_status;       /* tp_cupti_status() */
    const struct tp_device_prop *devices; /* (collector/contract/device.h) deviceProperties, n_devices entries */
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
    /* the memory ledger (TRAINPROF_PROFILE_MEMORY): who held the memory.
     * Owner names (index = the rows' and points' owner); per (device,
     * class) in mem's order, owners by bytes held at the end, most first;
     * the series of every change in time order, each owner starting at its
     * start_bytes at start_ns.  mem_owners_exact is 0 when records were
     * lost or the window's starting levels were no longer kept (the rows
     * are then the ledger's best account).  mem_coverage: bytes allocated
     * through intercepted calls whose owner is named, over all of them,
     * since activation (-1: none allocated). */
    const char *const *mem_owner_names;
    int n_mem_owner_names;
    const struct tp_mem_owner_usage *mem_owners;
    int n_mem_owners;
    const struct tp_mem_owner_point *mem_owner_points;
    size_t n_mem_owner_points;
    int mem_owners_exact;
    double mem_coverage;
    /* the window written at exit: memory still held then, by owner
     * (NULL, 0 otherwise or when everything was freed) */
    const struct tp_mem_held *mem_held;
    int n_mem_held;
    /* NCCL (collector/record/comms.h): the communicators created so far, in
     * creation order (at most TP_COMMS_LISTED), and how many there were */
    const struct tp_comm_info *comms;
    int n_comms;
    uint32_t comms_created;
    const char *nccl_version;     /* "2.28.9", NULL if unknown */
    /* who says this process is one rank of a distributed job (Kineto's
     * distributedInfo is written only then): its launcher's variables
     * (launched), NCCL communicators (comms_created), or the framework's
     * process group (pg_backend, from trainprof_process_group) */
    int launched;
    const char *pg_backend;       /* "nccl", "gloo", ...; NULL: no group known */
    int pg_rank, pg_world_size;   /* this process in that group, when pg_backend */
    const char *config_json;      /* effective configuration, a JSON object */
    const char *user_metadata;    /* TRAINPROF_METADATA, a JSON object, or NULL */
    const char *trace_folder;     /* expanded TRAINPROF_FOLDER */
    const char *trace_filename;   /* expanded TRAINPROF_FILENAME (without .gz) */
    const char *reports_folder;   /* expanded TRAINPROF_REPORTS */
    int gzip;
    int overwrite;
    int record_shapes;            /* TRAINPROF_RECORD_SHAPES */
    const char *exec;             /* TRAINPROF_EXEC template, "" if unset */
    char *const *exec_env;        /* its commands' environment (taken at activation), or NULL */
    int with_stack;               /* TRAINPROF_WITH_STACK */
    int keep;                     /* TRAINPROF_KEEP, -1: keep all */
};

/* The "External id" of recorded step "index" (its ProfilerStep event, and
 * the calls inside it that no operator or library call claims): a range
 * of its own, above torch's operator ids and our correlation ids. */
#define TP_STEP_EXTERNAL_ID(index) ((UINT64_C(1) << 48) + (uint64_t)(index))

/* Files a window's handlers may save after its trace (summary, memory
 * page and JSON, two stacks files, and room to spare). */
#define TP_SAVED_REPORTS 8
#define TP_SAVED_PATH 4096

/* What a window's handlers saved, filled in handler order. */
struct tp_saved {
    char trace[TP_SAVED_PATH];     /* the trace (chrome), "" if none */
    char reports[TP_SAVED_REPORTS][TP_SAVED_PATH]; /* report files, in the order written */
    int n_reports;
    char line[256];                /* one line for TRAINPROF_LOG=info (summary) */
};

struct tp_handler {
    const char *name;
    /* Optional: 1 if the window needs this handler although
     * TRAINPROF_HANDLERS does not list it (stacks under TRAINPROF_WITH_STACK). */
    int (*implied)(const struct tp_window *w);
    /* Returns the handler's state for this window, or NULL to sit it out. */
    void *(*open)(const struct tp_window *w);
    void (*event)(void *state, const struct tp_event *ev);
    /* Writes the outputs, lists them in "saved" and frees "state".  Returns
     * 0, or -1 after having reported the failure on stderr once. */
    int (*close)(void *state, const struct tp_window *w, struct tp_saved *saved);
};

/* The output side as the collector sees it. */
struct tp_sink {
    /* The i-th handler in the order they run, NULL callbacks filled with
     * stubs; NULL past the last. */
    const struct tp_handler *(*handler)(int i);
    /* After every handler of the window closed (tp-flush). */
    void (*post_save)(const struct tp_window *w, const struct tp_saved *saved);
    /* tp-flush between windows, and once at exit after the last window. */
    void (*idle)(void);
    void (*finish)(void);
    /* Once, as the collector activates (the first thread to make a CUDA
     * call, before tp-flush starts), never once exit has begun (a dlopen
     * then would run finalised initialisers again): the libraries the
     * output side opens for itself (ISA-L when "gzip", TRAINPROF_GZIP, is
     * on).  NULL: none. */
    void (*load)(int gzip);
};

/* tp_sink_set - the output side (preload constructor; tests). */
void tp_sink_set(const struct tp_sink *s);

/* tp_sink_get - the output side, or NULL before tp_sink_set. */
const struct tp_sink *tp_sink_get(void);

#endif
