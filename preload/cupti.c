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
 * loaded (collector/cupti_load.c), never through these symbols: every call
 * that reaches this file is someone else's.  Each passes through unchanged
 * (arguments, return value, errno) and, when it succeeded, the collector is
 * told (tp_cupti_foreign), which stops using CUPTI and marks the windows the
 * other client spoiled instead of writing its records as ours.  A client
 * that calls libcupti through dlsym on its own handle bypasses this file;
 * the records' times then give it away (collector/cupti_window.c).
 *
 * Not a hot path: these calls happen when a profiler starts or stops.
 */
#include "resolve.h"
#include "../collector/cupti.h"

#include <cupti_activity.h>

#define TP_CALLER __builtin_extract_return_addr(__builtin_return_address(0))

/* The real function "name" of type "type" into "fn", or return "missing". */
#define TP_REAL(type, fn, name, missing) \
    static type fn; \
    type real_ = __atomic_load_n(&fn, __ATOMIC_ACQUIRE); \
    if (!real_) { \
        real_ = (type)tp_resolve(name); \
        if (!real_) \
            return (missing); \
        __atomic_store_n(&fn, real_, __ATOMIC_RELEASE); \
    }

typedef CUptiResult (*tp_regcb_fn)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*tp_regts_fn)(CUpti_TimestampCallbackFunc);
typedef CUptiResult (*tp_kind_fn)(CUpti_ActivityKind);
typedef CUptiResult (*tp_void_fn)(void);

TP_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                              CUpti_BuffersCallbackCompleteFunc done)
{
    TP_REAL(tp_regcb_fn, tp_real_regcb, "cuptiActivityRegisterCallbacks", CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real_(req, done);
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_BUFFERS, -1, TP_CALLER);
    return rc;
}

TP_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    TP_REAL(tp_regts_fn, tp_real_regts, "cuptiActivityRegisterTimestampCallback",
            CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real_(f);
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_CLOCK, -1, TP_CALLER);
    return rc;
}

TP_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    TP_REAL(tp_kind_fn, tp_real_enable, "cuptiActivityEnable", CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real_(kind);
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_ENABLE, (int)kind, TP_CALLER);
    return rc;
}

TP_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    TP_REAL(tp_kind_fn, tp_real_disable, "cuptiActivityDisable", CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real_(kind);
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_DISABLE, (int)kind, TP_CALLER);
    return rc;
}

TP_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void)
{
    TP_REAL(tp_void_fn, tp_real_finalize, "cuptiFinalize", CUPTI_ERROR_NOT_INITIALIZED);
    CUptiResult rc = real_();
    if (rc == CUPTI_SUCCESS)
        tp_cupti_foreign(TP_FOREIGN_FINALIZE, -1, TP_CALLER);
    return rc;
}
