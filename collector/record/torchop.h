/*
 * torchop.h - PyTorch's operator ranges: the NVTX messages torch writes for
 * every operator while its NVTX profiler state is on (what
 * torch.autograd.profiler.emit_nvtx turns on), read back into the fields
 * Kineto writes for a cpu_op.
 */
#ifndef TRAINPROF_COLLECTOR_TORCHOP_H
#define TRAINPROF_COLLECTOR_TORCHOP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "collector/contract/sink.h"


/*
 * tp_torch_op_parse - 1 if "msg" is one of torch's operator ranges, as
 * torch's getNvtxStr writes it: NAME[, seq = N][, op_id = N][, sizes =
 * [[...], ...]][, input_op_ids = [(id,n), ...]], with an op_id; then *op
 * describes it.  0 for any other message (a user's own NVTX range).
 */
int tp_torch_op_parse(const char *msg, struct tp_torch_op *op);

/*
 * tp_torch_op_is_profiler_step - 1 if the range name "name" ("n" bytes) is
 * one of torch's own ProfilerStep#N ranges: torch.profiler's step() opens
 * record_function("ProfilerStep#N") in a program that runs its own
 * profiler, and torch's ITT and NVTX states announce it like any
 * record_function.  They are not written (tp_range_push_hidden): the trace
 * has trainprof's steps, each once.  A copy under another name or category
 * would still be a step to its readers: HTA counts every event whose name
 * starts with (Trace._filter_irrelevant_gpu_kernels: contains)
 * "ProfilerStep", in any category; the TensorBoard plugin every X event
 * named "ProfilerStep#..." of category user_annotation or cpu_op.
 */
static inline int tp_torch_op_is_profiler_step(const char *name, size_t n)
{
    static const char p[] = "ProfilerStep#";
    return n >= sizeof p - 1 && name[0] == 'P' && memcmp(name, p, sizeof p - 1) == 0;
}

struct tp_record;

/* tp_torch_op_of - the operator of a TP_RANGE record: its fields for one
 * pushed as torch's (TP_RANGE_TORCH; "name" its interned name), else
 * "name" parsed.  1 if it is one of torch's operators. */
int tp_torch_op_of(const struct tp_record *r, const char *name, struct tp_torch_op *op);

/* tp_torch_op_is_operator - the cpu_op rule of struct tp_torch_op for the
 * name "name" of "n" bytes. */
int tp_torch_op_is_operator(const char *name, size_t n);

#endif
