/*
 * call.c - DESIGN: the definitions of the call protocol's shared state
 * (call.h): the hot word every wrapper reads first, and the per-thread
 * guards that make the profiler's own threads and nested calls pass
 * through.  Nothing else lives here, so that any collector module can set
 * the guard without depending on the core.
 */
#include "call.h"

_Atomic uint32_t tp_hot = TP_HOT_INACTIVE;
__thread int tp_depth __attribute__((tls_model("initial-exec")));
__thread int tp_lib_depth __attribute__((tls_model("initial-exec")));
