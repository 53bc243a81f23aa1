/*
 * graphs.h - library FLOPs inside CUDA graphs.
 *
 * Library calls made while a stream is captured do not run: their FLOPs are
 * added to the thread's capture, which becomes the graph's at
 * cudaStreamEndCapture, the executable graph's at cudaGraphInstantiate, and
 * are counted at every cudaGraphLaunch of it (at flush time).  A thread is
 * taken to capture from a successful cudaStreamBeginCapture to its
 * cudaStreamEndCapture (the way PyTorch captures: one thread, one stream).
 * The wrappers' inline test (tp_graphs_capturing) is in
 * collector/wrap/graphs_api.h, beside the call protocol.
 */
#ifndef TRAINPROF_COLLECTOR_GRAPHS_H
#define TRAINPROF_COLLECTOR_GRAPHS_H

#include <stdint.h>

struct tp_record;

/* tp_graphs_captured - account record "r" (filled, maybe not in a buffer)
 * of a call made during capture: its FLOPs go to the capture, and it is
 * marked TP_LIB_CAPTURED so that it does not count as work done. */
void tp_graphs_captured(struct tp_record *r);

/* After a successful cudaStreamBeginCapture on this thread (the entry
 * point then tells the core: tp_steps_capturing(+1)). */
void tp_graphs_begin(void);

/* After cudaStreamEndCapture on this thread; "graph" NULL if it failed.
 * Returns 1 if it closed a capture this thread had begun (the entry point
 * then calls tp_steps_capturing(-1)), 0 otherwise. */
int tp_graphs_end(const void *graph);

/* After a successful cudaGraphInstantiate*: "exec" runs "graph". */
void tp_graphs_instantiate(const void *exec, const void *graph);

/* tp_graphs_exec_flops - library FLOPs of one launch of "exec" (flush). */
uint64_t tp_graphs_exec_flops(uint64_t exec);

#endif
