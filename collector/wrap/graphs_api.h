/*
 * graphs_api.h - the wrappers' side of collector/record/graphs.h: whether
 * the call being made is captured into a CUDA graph, tested inline on the
 * training thread.  Apart from graphs.h because it reads the call's hot word
 * (protocol.h), which the flush thread, a reader of graphs.h, must not
 * include.
 */
#ifndef TRAINPROF_COLLECTOR_GRAPHS_API_H
#define TRAINPROF_COLLECTOR_GRAPHS_API_H

#include "collector/record/graphs.h"
#include "protocol.h"

extern __thread int tp_capture_depth __attribute__((tls_model("initial-exec")));

/* tp_graphs_capturing - 1 if the call "c" is made on a capturing thread. */
static inline int tp_graphs_capturing(const struct tp_call *c)
{
    return (c->hot & TP_HOT_CAPTURE) && tp_capture_depth > 0;
}

#endif
