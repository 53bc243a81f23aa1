/*
 * cupti_cbid.c - DESIGN: the classes of the runtime and driver API
 * callback ids, as two constant tables indexed by cbid and expanded from
 * one list (cupti_cbid.def), so that a lookup is one bounds check and one
 * load: the decoder asks for every API record, the lifecycle walks the
 * tables to enable only the cbids we keep.  No state, no CUPTI call.
 */
#include "cupti_impl.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

static const uint8_t tp_rt_class[CUPTI_RUNTIME_TRACE_CBID_SIZE] = {
#define TP_RT(name, cls) [CUPTI_RUNTIME_TRACE_CBID_##name] = TP_CB_##cls,
#define TP_DRV(name, cls)
#include "cupti_cbid.def"
#undef TP_RT
#undef TP_DRV
};

static const uint8_t tp_drv_class[CUPTI_DRIVER_TRACE_CBID_SIZE] = {
#define TP_RT(name, cls)
#define TP_DRV(name, cls) [CUPTI_DRIVER_TRACE_CBID_##name] = TP_CB_##cls,
#include "cupti_cbid.def"
#undef TP_RT
#undef TP_DRV
};

int tp_cupti_cb_class(int driver, uint32_t cbid)
{
    if (driver)
        return cbid < CUPTI_DRIVER_TRACE_CBID_SIZE ? tp_drv_class[cbid] : TP_CB_OTHER;
    return cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE ? tp_rt_class[cbid] : TP_CB_OTHER;
}
