/*
 * apis.h - ids, names and CUPTI callback ids of the intercepted entry
 * points, generated from the .def lists in collector/record/apis/ (written once,
 * there; the preload's wrappers expand the same lists).
 */
#ifndef TRAINPROF_COLLECTOR_APIS_H
#define TRAINPROF_COLLECTOR_APIS_H

#include <stdint.h>

/* The "gate" column of the .def lists (collector/record/apis/cudart.def): which
 * calls of an entry point take its wrapper's recording path besides those
 * made while a window records.  A constant of each wrapper: its fast-path
 * test (preload/wrap.h TP_PASS) is compiled for it. */
enum tp_gate {
    TP_GATE_WIN = 0, /* none */
    TP_GATE_MEM,     /* all while allocations are tracked (memtrack.h) */
    TP_GATE_PAPI,    /* all with TRAINPROF_SCHEDULE=profiler-api */
    TP_GATE_OWN,     /* a library's handle creation, whose allocations are the
                        library's: marked while allocations are tracked */
    TP_GATE_LAUNCH,  /* a kernel launch: none, but a launch: step signal
                        counted outside windows takes a count-only path */
};

enum tp_api_id {
    TP_API_NONE = 0,
#define TP_FN(ret, name, params, args, cbid, gate, rec)                       TP_API_##name,
#define TP_LIB_FN(ret, name, params, args, gate, rec)                         TP_API_##name,
#define TP_DRV_FN(ret, name, params, args, cbid, gate, rec, request, version) TP_API_##name,
#include "apis/cudart.def"
#include "apis/cuda.def"
#include "apis/cublas.def"
#include "apis/cublaslt.def"
#include "apis/nccl.def"
#include "apis/cudnn.def"
#undef TP_DRV_FN
#undef TP_LIB_FN
#undef TP_FN
    TP_API_COUNT
};

/* tp_api_name - the entry point's name ("" for TP_API_NONE). */
const char *tp_api_name(unsigned id);

/* tp_api_cbid - CUPTI callback id, -1 if none. */
int tp_api_cbid(unsigned id);

/* tp_api_form - enum tp_form: what the entry point's records hold. */
int tp_api_form(unsigned id);

/* tp_api_layer - enum tp_layer of the entry point. */
int tp_api_layer(unsigned id);

/* tp_api_logical - the id of the logical call ("cudaGraphLaunch" for
 * "cudaGraphLaunch_ptsz", "cuGraphLaunch" and "cuGraphLaunch_ptsz"), used by
 * call:NAME step signals: a driver entry maps to the runtime call that
 * reaches it (the table in apis.c), launches excepted (cuLaunchKernel
 * serves several runtime launch forms). */
unsigned tp_api_logical(unsigned id);

/* tp_api_find - the id of the logical call of "name" (any layer, any
 * _ptsz/_ptds form), or TP_API_NONE. */
unsigned tp_api_find(const char *name);

#endif
