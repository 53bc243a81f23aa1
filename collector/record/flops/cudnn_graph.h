/*
 * cudnn_graph.h - the cuDNN backend descriptors a program builds, followed
 * so that cudnnBackendExecute's record carries its plan's FLOPs (DESIGN in
 * cudnn_graph.c).  The preload's descriptor wrappers call the tp_bd_*
 * functions after each successful call; none prints, calls CUDA or changes
 * errno.
 */
#ifndef TRAINPROF_COLLECTOR_FLOPS_CUDNN_GRAPH_H
#define TRAINPROF_COLLECTOR_FLOPS_CUDNN_GRAPH_H

#include <stdint.h>

#include "collector/contract/record.h"

/* tp_bd_create - remember "d" of type "type" (cudnnBackendDescriptorType_t). */
void tp_bd_create(void *d, int type);

/* tp_bd_destroy - forget "d". */
void tp_bd_destroy(void *d);

/* tp_bd_attr - the descriptor type attribute "attr" belongs to, 0 if it is
 * not tracked (then SetAttribute need not report it); *ref the ref slot it
 * sets, -1 for dims, types and ops. */
int tp_bd_attr(int attr, int *ref);

/* tp_bd_set - after a successful cudnnBackendSetAttribute. */
void tp_bd_set(void *d, int attr, int etype, int64_t count, const void *arr);

/* tp_bd_get - after a successful cudnnBackendGetAttribute. */
void tp_bd_get(void *d, int attr, int etype, int64_t req, const int64_t *count, void *arr);

/* tp_backend_record - r->u.lib of cudnnBackendExecute(plan): the plan's
 * FLOPs, sizes, type and precision (0 FLOPs for an unknown plan). */
void tp_backend_record(struct tp_record *r, void *plan);

#endif
