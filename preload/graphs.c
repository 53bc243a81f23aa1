/*
 * graphs.c - DESIGN: the CUDA graph calls whose bookkeeping must run even
 * outside windows (a model is usually captured during warm-up, long before
 * the steps we record): capture begin and end and instantiation feed
 * collector/record/graphs.c.  They are not recorded as events.
 * A capture begin that succeeds activates the profiler, so that a capture
 * made before any other CUDA call is still counted.
 *
 * Both layers are wrapped: the runtime's calls (cudaStreamBeginCapture*,
 * cudaStreamEndCapture, cudaGraphInstantiate*) and the driver's
 * (cuStreamBeginCapture{,_v2}, cuStreamBeginCaptureToGraph,
 * cuStreamEndCapture, cuGraphInstantiate{,_v2,WithFlags,WithParams}, each
 * with its _ptsz form), so that a graph captured through the driver alone
 * (a driver-API program, cuda-python, a static cudart our runtime wrappers
 * never see) keeps the FLOPs of the library calls captured into it.  The
 * runtime reaches the driver inside its own call, so a runtime capture is
 * begun and ended twice on this thread; captures nest (collector/record/graphs.h),
 * so that is one capture, its FLOPs written to the graph at the outermost
 * end.  Each layer's books follow what its own call returned: a runtime
 * call that failed after the driver's succeeded leaves the capture the
 * driver made counted, and a thread never stays "capturing" after both
 * ended.  The driver wrappers are handed out by lookups like those of
 * driver.c (tp_graph_entries, preload/procaddr.c).
 *
 * cudaStreamBeginCaptureToGraph captures into an existing graph (PyTorch
 * does it for the body of a conditional node, nested in the outer capture):
 * a nested capture adds to the outer one (collector/record/graphs.h), so the body's
 * FLOPs count at every launch of the outer graph.
 */
#include "driver.h"
#include "wrap.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

/* cuda.h maps these request names to newer variants; the old ABIs are
 * defined here under their own exported names */
#undef cuStreamBeginCapture
#undef cuGraphInstantiate

#define TP_MISSING cudaErrorSharedObjectSymbolNotFound

/* ---- the bookkeeping, shared by both layers ------------------------------- */

static void tp_begun(void)
{
    if (tp_hot_load() & TP_HOT_INACTIVE) {
        tp_cuda_succeeded();
        tp_lifecycle_activate();
    }
    int saved = errno;
    tp_graphs_begin();
    tp_steps_capturing(+1);
    errno = saved;
}

static void tp_ended(const void *graph)
{
    int saved = errno;
    if (tp_graphs_end(graph))
        tp_steps_capturing(-1);
    errno = saved;
}

static void tp_instantiated(const void *exec, const void *graph)
{
    tp_graphs_instantiate(exec, graph);
}

/* ---- runtime ---------------------------------------------------------------- */

typedef cudaError_t (*tp_begin_fn)(cudaStream_t, enum cudaStreamCaptureMode);
typedef cudaError_t (*tp_begin_to_fn)(cudaStream_t, cudaGraph_t, const cudaGraphNode_t *,
                                      const cudaGraphEdgeData *, size_t, enum cudaStreamCaptureMode);
typedef cudaError_t (*tp_end_fn)(cudaStream_t, cudaGraph_t *);
typedef cudaError_t (*tp_inst_fn)(cudaGraphExec_t *, cudaGraph_t, unsigned long long);
typedef cudaError_t (*tp_inst_params_fn)(cudaGraphExec_t *, cudaGraph_t, cudaGraphInstantiateParams *);

static cudaError_t tp_begin(tp_begin_fn real, cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    cudaError_t rc = real(s, mode);
    if (rc == cudaSuccess)
        tp_begun();
    return rc;
}

static cudaError_t tp_begin_to(tp_begin_to_fn real, cudaStream_t s, cudaGraph_t g,
                               const cudaGraphNode_t *deps, const cudaGraphEdgeData *data, size_t n,
                               enum cudaStreamCaptureMode mode)
{
    cudaError_t rc = real(s, g, deps, data, n, mode);
    if (rc == cudaSuccess)
        tp_begun();
    return rc;
}

static cudaError_t tp_end(tp_end_fn real, cudaStream_t s, cudaGraph_t *g)
{
    cudaError_t rc = real(s, g);
    tp_ended(rc == cudaSuccess && g ? (const void *)*g : NULL);
    return rc;
}

static cudaError_t tp_inst(tp_inst_fn real, cudaGraphExec_t *e, cudaGraph_t g, unsigned long long fl)
{
    cudaError_t rc = real(e, g, fl);
    if (rc == cudaSuccess && e)
        tp_instantiated(*e, g);
    return rc;
}

static cudaError_t tp_inst_params(tp_inst_params_fn real, cudaGraphExec_t *e, cudaGraph_t g,
                                  cudaGraphInstantiateParams *p)
{
    cudaError_t rc = real(e, g, p);
    if (rc == cudaSuccess && e)
        tp_instantiated(*e, g);
    return rc;
}

TP_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    TP_REAL(tp_begin_fn, cudaStreamBeginCapture, TP_MISSING);
    return tp_begin(real, s, mode);
}

TP_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    TP_REAL(tp_begin_fn, cudaStreamBeginCapture_ptsz, TP_MISSING);
    return tp_begin(real, s, mode);
}

TP_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *deps,
                                                    const cudaGraphEdgeData *data, size_t n,
                                                    enum cudaStreamCaptureMode mode)
{
    TP_REAL(tp_begin_to_fn, cudaStreamBeginCaptureToGraph, TP_MISSING);
    return tp_begin_to(real, s, g, deps, data, n, mode);
}

TP_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t g,
                                                         const cudaGraphNode_t *deps,
                                                         const cudaGraphEdgeData *data, size_t n,
                                                         enum cudaStreamCaptureMode mode)
{
    TP_REAL(tp_begin_to_fn, cudaStreamBeginCaptureToGraph_ptsz, TP_MISSING);
    return tp_begin_to(real, s, g, deps, data, n, mode);
}

TP_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    TP_REAL(tp_end_fn, cudaStreamEndCapture, TP_MISSING);
    return tp_end(real, s, g);
}

TP_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
    TP_REAL(tp_end_fn, cudaStreamEndCapture_ptsz, TP_MISSING);
    return tp_end(real, s, g);
}

TP_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long fl)
{
    TP_REAL(tp_inst_fn, cudaGraphInstantiate, TP_MISSING);
    return tp_inst(real, e, g, fl);
}

TP_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long fl)
{
    TP_REAL(tp_inst_fn, cudaGraphInstantiateWithFlags, TP_MISSING);
    return tp_inst(real, e, g, fl);
}

TP_EXPORT cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *e, cudaGraph_t g,
                                                     cudaGraphInstantiateParams *p)
{
    TP_REAL(tp_inst_params_fn, cudaGraphInstantiateWithParams, TP_MISSING);
    return tp_inst_params(real, e, g, p);
}

TP_EXPORT cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *e, cudaGraph_t g,
                                                          cudaGraphInstantiateParams *p)
{
    TP_REAL(tp_inst_params_fn, cudaGraphInstantiateWithParams_ptsz, TP_MISSING);
    return tp_inst_params(real, e, g, p);
}

/* ---- driver ----------------------------------------------------------------- */

typedef CUresult (*tp_fn_cuStreamBeginCapture)(CUstream);
typedef CUresult (*tp_fn_cuStreamBeginCapture_ptsz)(CUstream);
typedef CUresult (*tp_fn_cuStreamBeginCapture_v2)(CUstream, CUstreamCaptureMode);
typedef CUresult (*tp_fn_cuStreamBeginCapture_v2_ptsz)(CUstream, CUstreamCaptureMode);
typedef CUresult (*tp_fn_cuStreamBeginCaptureToGraph)(CUstream, CUgraph, const CUgraphNode *,
                                                      const CUgraphEdgeData *, size_t, CUstreamCaptureMode);
typedef tp_fn_cuStreamBeginCaptureToGraph tp_fn_cuStreamBeginCaptureToGraph_ptsz;
typedef CUresult (*tp_fn_cuStreamEndCapture)(CUstream, CUgraph *);
typedef tp_fn_cuStreamEndCapture tp_fn_cuStreamEndCapture_ptsz;
typedef CUresult (*tp_fn_cuGraphInstantiate)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef tp_fn_cuGraphInstantiate tp_fn_cuGraphInstantiate_v2;
typedef CUresult (*tp_fn_cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*tp_fn_cuGraphInstantiateWithParams)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
typedef tp_fn_cuGraphInstantiateWithParams tp_fn_cuGraphInstantiateWithParams_ptsz;

#define TP_DRV_BEGUN(rc)   do { if ((rc) == CUDA_SUCCESS) tp_begun(); } while (0)
#define TP_DRV_ENDED(rc, g) tp_ended((rc) == CUDA_SUCCESS && (g) ? (const void *)*(g) : NULL)
#define TP_DRV_INST(rc, e, g) do { if ((rc) == CUDA_SUCCESS && (e)) tp_instantiated(*(e), g); } while (0)

static CUresult tp_do_cuStreamBeginCapture(tp_fn_cuStreamBeginCapture real, CUstream s)
{
    CUresult rc = real(s);
    TP_DRV_BEGUN(rc);
    return rc;
}

static CUresult tp_do_cuStreamBeginCapture_ptsz(tp_fn_cuStreamBeginCapture_ptsz real, CUstream s)
{
    return tp_do_cuStreamBeginCapture(real, s);
}

static CUresult tp_do_cuStreamBeginCapture_v2(tp_fn_cuStreamBeginCapture_v2 real, CUstream s,
                                              CUstreamCaptureMode mode)
{
    CUresult rc = real(s, mode);
    TP_DRV_BEGUN(rc);
    return rc;
}

static CUresult tp_do_cuStreamBeginCapture_v2_ptsz(tp_fn_cuStreamBeginCapture_v2_ptsz real, CUstream s,
                                                   CUstreamCaptureMode mode)
{
    return tp_do_cuStreamBeginCapture_v2(real, s, mode);
}

static CUresult tp_do_cuStreamBeginCaptureToGraph(tp_fn_cuStreamBeginCaptureToGraph real, CUstream s,
                                                  CUgraph g, const CUgraphNode *deps,
                                                  const CUgraphEdgeData *data, size_t n,
                                                  CUstreamCaptureMode mode)
{
    CUresult rc = real(s, g, deps, data, n, mode);
    TP_DRV_BEGUN(rc);
    return rc;
}

static CUresult tp_do_cuStreamBeginCaptureToGraph_ptsz(tp_fn_cuStreamBeginCaptureToGraph_ptsz real,
                                                       CUstream s, CUgraph g, const CUgraphNode *deps,
                                                       const CUgraphEdgeData *data, size_t n,
                                                       CUstreamCaptureMode mode)
{
    return tp_do_cuStreamBeginCaptureToGraph(real, s, g, deps, data, n, mode);
}

static CUresult tp_do_cuStreamEndCapture(tp_fn_cuStreamEndCapture real, CUstream s, CUgraph *g)
{
    CUresult rc = real(s, g);
    TP_DRV_ENDED(rc, g);
    return rc;
}

static CUresult tp_do_cuStreamEndCapture_ptsz(tp_fn_cuStreamEndCapture_ptsz real, CUstream s, CUgraph *g)
{
    return tp_do_cuStreamEndCapture(real, s, g);
}

static CUresult tp_do_cuGraphInstantiate(tp_fn_cuGraphInstantiate real, CUgraphExec *e, CUgraph g,
                                         CUgraphNode *err, char *log, size_t size)
{
    CUresult rc = real(e, g, err, log, size);
    TP_DRV_INST(rc, e, g);
    return rc;
}

static CUresult tp_do_cuGraphInstantiate_v2(tp_fn_cuGraphInstantiate_v2 real, CUgraphExec *e, CUgraph g,
                                            CUgraphNode *err, char *log, size_t size)
{
    return tp_do_cuGraphInstantiate(real, e, g, err, log, size);
}

static CUresult tp_do_cuGraphInstantiateWithFlags(tp_fn_cuGraphInstantiateWithFlags real, CUgraphExec *e,
                                                  CUgraph g, unsigned long long fl)
{
    CUresult rc = real(e, g, fl);
    TP_DRV_INST(rc, e, g);
    return rc;
}

static CUresult tp_do_cuGraphInstantiateWithParams(tp_fn_cuGraphInstantiateWithParams real, CUgraphExec *e,
                                                   CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    CUresult rc = real(e, g, p);
    TP_DRV_INST(rc, e, g);
    return rc;
}

static CUresult tp_do_cuGraphInstantiateWithParams_ptsz(tp_fn_cuGraphInstantiateWithParams_ptsz real,
                                                        CUgraphExec *e, CUgraph g,
                                                        CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    return tp_do_cuGraphInstantiateWithParams(real, e, g, p);
}

TP_DRV_HOOK(cuStreamBeginCapture, (CUstream s), (s))
TP_DRV_HOOK(cuStreamBeginCapture_ptsz, (CUstream s), (s))
TP_DRV_HOOK(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode m), (s, m))
TP_DRV_HOOK(cuStreamBeginCapture_v2_ptsz, (CUstream s, CUstreamCaptureMode m), (s, m))
TP_DRV_HOOK(cuStreamBeginCaptureToGraph, (CUstream s, CUgraph g, const CUgraphNode *d, const CUgraphEdgeData *e, size_t n, CUstreamCaptureMode m), (s, g, d, e, n, m))
TP_DRV_HOOK(cuStreamBeginCaptureToGraph_ptsz, (CUstream s, CUgraph g, const CUgraphNode *d, const CUgraphEdgeData *e, size_t n, CUstreamCaptureMode m), (s, g, d, e, n, m))
TP_DRV_HOOK(cuStreamEndCapture, (CUstream s, CUgraph *g), (s, g))
TP_DRV_HOOK(cuStreamEndCapture_ptsz, (CUstream s, CUgraph *g), (s, g))
TP_DRV_HOOK(cuGraphInstantiate, (CUgraphExec *e, CUgraph g, CUgraphNode *n, char *l, size_t z), (e, g, n, l, z))
TP_DRV_HOOK(cuGraphInstantiate_v2, (CUgraphExec *e, CUgraph g, CUgraphNode *n, char *l, size_t z), (e, g, n, l, z))
TP_DRV_HOOK(cuGraphInstantiateWithFlags, (CUgraphExec *e, CUgraph g, unsigned long long f), (e, g, f))
TP_DRV_HOOK(cuGraphInstantiateWithParams, (CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p), (e, g, p))
TP_DRV_HOOK(cuGraphInstantiateWithParams_ptsz, (CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p), (e, g, p))

/* Requests and versions as cudaTypedefs.h's PFN_<request>_v<N>[_ptsz]
 * (tests/preload/test_driver_audit.py checks them). */
const struct tp_drv_entry tp_graph_entries[] = {
    TP_DRV_ENTRY(cuStreamBeginCapture, "cuStreamBeginCapture", "cuStreamBeginCapture", 10000)
    TP_DRV_ENTRY(cuStreamBeginCapture_ptsz, "cuStreamBeginCapture_ptsz", "cuStreamBeginCapture", 10000)
    TP_DRV_ENTRY(cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2", "cuStreamBeginCapture", 10010)
    TP_DRV_ENTRY(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture_v2_ptsz", "cuStreamBeginCapture", 10010)
    TP_DRV_ENTRY(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph", 12030)
    TP_DRV_ENTRY(cuStreamBeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph_ptsz", "cuStreamBeginCaptureToGraph", 12030)
    TP_DRV_ENTRY(cuStreamEndCapture, "cuStreamEndCapture", "cuStreamEndCapture", 10000)
    TP_DRV_ENTRY(cuStreamEndCapture_ptsz, "cuStreamEndCapture_ptsz", "cuStreamEndCapture", 10000)
    TP_DRV_ENTRY(cuGraphInstantiate, "cuGraphInstantiate", "cuGraphInstantiate", 10000)
    TP_DRV_ENTRY(cuGraphInstantiate_v2, "cuGraphInstantiate_v2", "cuGraphInstantiate", 11000)
    TP_DRV_ENTRY(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", 11040)
    TP_DRV_ENTRY(cuGraphInstantiateWithParams, "cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams", 12000)
    TP_DRV_ENTRY(cuGraphInstantiateWithParams_ptsz, "cuGraphInstantiateWithParams_ptsz", "cuGraphInstantiateWithParams", 12000)
};

const unsigned tp_graph_n_entries = sizeof tp_graph_entries / sizeof tp_graph_entries[0];
