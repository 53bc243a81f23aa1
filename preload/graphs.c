/*
 * graphs.c - DESIGN: the CUDA graph calls whose bookkeeping must run even
 * outside windows (a model is usually captured during warm-up, long before
 * the steps we record): capture begin and end and instantiation feed
 * collector/graphs.c.  They are not recorded as events.
 * A capture begin that succeeds activates the profiler, so that a capture
 * made before any other CUDA call is still counted.
 */
#include "wrap.h"

#include <cuda_runtime_api.h>

#define TP_MISSING cudaErrorSharedObjectSymbolNotFound

typedef cudaError_t (*tp_begin_fn)(cudaStream_t, enum cudaStreamCaptureMode);
typedef cudaError_t (*tp_end_fn)(cudaStream_t, cudaGraph_t *);
typedef cudaError_t (*tp_inst_fn)(cudaGraphExec_t *, cudaGraph_t, unsigned long long);

static cudaError_t tp_begin(tp_begin_fn real, cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    cudaError_t rc = real(s, mode);
    if (rc == cudaSuccess) {
        if (tp_hot_load() & TP_HOT_INACTIVE) {
            tp_cuda_succeeded();
            tp_core_activate();
        }
        int saved = errno;
        tp_graphs_begin();
        tp_core_capturing(+1);
        errno = saved;
    }
    return rc;
}

static cudaError_t tp_end(tp_end_fn real, cudaStream_t s, cudaGraph_t *g)
{
    cudaError_t rc = real(s, g);
    int saved = errno;
    if (tp_graphs_end(rc == cudaSuccess && g ? (const void *)*g : NULL))
        tp_core_capturing(-1);
    errno = saved;
    return rc;
}

static cudaError_t tp_inst(tp_inst_fn real, cudaGraphExec_t *e, cudaGraph_t g, unsigned long long fl)
{
    cudaError_t rc = real(e, g, fl);
    if (rc == cudaSuccess && e)
        tp_graphs_instantiate(*e, g);
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
