/*
 * cupti.c - DESIGN: the CUPTI calls by which another client in the process
 * takes CUPTI's activity API away from us.
 *
 * The activity API is one per process: the buffer callbacks, the timestamp
 * callback, the enabled kinds and cuptiFinalize are process-wide, whoever
 * calls them.  torch.profiler's Kineto (libtorch_cpu.so links libcupti) and
 * tools injected with CUDA_INJECTION64_PATH call them by name, so with
 * libtrainprof.so preloaded those calls land here first.  trainprof itself
 * calls libcupti only through the pointers it looked up in the copy it
 * loaded (collector/device/cupti_load.c), never through these symbols: every call
 * that reaches this file is someone else's.  Only the calls that take
 * something we rely on are here (cuptiActivityEnable of more kinds takes
 * nothing).  Each passes through unchanged
 * (arguments, return value, errno) and, when it succeeded, the collector is
 * told (tp_cupti_foreign), which stops using CUPTI and marks the windows the
 * other client spoiled instead of writing its records as ours.  A client
 * that calls libcupti through dlsym on its own handle bypasses this file;
 * the records' times then give it away (collector/device/cupti_window.c).
 *
 * Not a hot path: these calls happen when a profiler starts or stops.
 */
#include "wrap.h"
#include "collector/device/cupti.h"

#include <cupti_activity.h>

#define TP_CALLER __builtin_extract_return_addr(__builtin_return_address(0))

typedef CUptiResult (*tp_regcb_fn)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*tp_regts_fn)(CUpti_TimestampCallbackFunc);
typedef CUptiResult (*tp_kind_fn)(CUpti_ActivityKind);
typedef CUptiResult (*tp_void_fn)(void);

TP_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                              CUpti_BuffersCallbackCompleteFunc done)
{
    TP_REAL(tp_regcb_fn, cuptiActivityRegisterCallbacks, CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real(req, done);
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_BUFFERS, -1, TP_CALLER);
    return rc;
}

TP_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    TP_REAL(tp_regts_fn, cuptiActivityRegisterTimestampCallback, CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real(f);
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_CLOCK, -1, TP_CALLER);
    return rc;
}

TP_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    TP_REAL(tp_kind_fn, cuptiActivityDisable, CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real(kind);
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_DISABLE, (int)kind, TP_CALLER);
    return rc;
}

TP_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void)
{
    TP_REAL(tp_void_fn, cuptiFinalize, CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real();
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_FINALIZE, -1, TP_CALLER);
    return rc;
}
