/*
 * cudart12.c - the two functions whose ABI CUDA 13 changed, as CUDA 12.8's
 * libcudart.so.12 exports them, for tests.
 *
 * DESIGN
 * Built as build/fakes/libcudart12.so with soname libcudart.so.12 and that
 * version node (cudart12.map), so that a program linked with it before the
 * fake CUDA 13 runtime carries references cudaMemcpyBatchAsync@libcudart.so.12
 * exactly as a CUDA 12.8/12.9 program does, and trainprof's unversioned
 * wrapper must forward the 12.x arguments: CUDA 12.8's prototypes have a
 * size_t *failIdx before the flags and the stream (cuda_runtime_api.h of
 * 12.8: cudaMemcpyBatchAsync(dsts, srcs, sizes, count, attrs, attrsIdxs,
 * numAttrs, failIdx, stream), cudaMemcpy3DBatchAsync(numOps, opList,
 * failIdx, flags, stream)); CUDA 13 dropped failIdx.  The copies are made
 * (pointer operands only); the stream and failIdx each call received are
 * kept for fake_cudart12_seen(), so that the program can tell whether they
 * arrived intact.  No CUDA header is included: its CUDA 13 declarations
 * would conflict.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

enum { fake_success = 0, fake_invalid_value = 1 };

/* struct cudaMemcpy3DBatchOp's layout, pointer operands only: the fields
 * read here (type, ptr, extent) at their CUDA 12.8 and 13 offsets */
struct fake_operand {
    int type;                      /* cudaMemcpyOperandTypePointer = 1 */
    int pad;
    union {
        struct {
            void *ptr;
            size_t row_length, layer_height;
            int loc_type, loc_id;
        } ptr;
        unsigned char raw[32];
    } op;
};

struct fake_op {
    struct fake_operand src, dst;
    size_t width, height, depth;
    int src_access_order;
    unsigned flags;
};

static void *seen_stream;
static size_t *seen_fail_idx;

FAKE_EXPORT void fake_cudart12_seen(void **stream, size_t **fail_idx);
FAKE_EXPORT void fake_cudart12_seen(void **stream, size_t **fail_idx)
{
    *stream = seen_stream;
    *fail_idx = seen_fail_idx;
}

FAKE_EXPORT int cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
                                     void *attrs, size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx,
                                     void *stream);
FAKE_EXPORT int cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
                                     void *attrs, size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx,
                                     void *stream)
{
    seen_stream = stream;
    seen_fail_idx = fail_idx;
    if (!stream || !count || !dsts || !srcs || !sizes || !attrs || !attrs_idxs || !num_attrs)
        return fake_invalid_value;
    for (size_t i = 0; i < count; i++)
        memmove(dsts[i], srcs[i], sizes[i]);
    return fake_success;
}

FAKE_EXPORT int cudaMemcpy3DBatchAsync(size_t num_ops, struct fake_op *ops, size_t *fail_idx,
                                       unsigned long long flags, void *stream);
FAKE_EXPORT int cudaMemcpy3DBatchAsync(size_t num_ops, struct fake_op *ops, size_t *fail_idx,
                                       unsigned long long flags, void *stream)
{
    seen_stream = stream;
    seen_fail_idx = fail_idx;
    if (!stream || !num_ops || !ops || flags)
        return fake_invalid_value;
    for (size_t i = 0; i < num_ops; i++) {
        if (ops[i].src.type != 1 || ops[i].dst.type != 1) {
            if (fail_idx)
                *fail_idx = i;
            return fake_invalid_value;
        }
        memmove(ops[i].dst.op.ptr.ptr, ops[i].src.op.ptr.ptr, ops[i].width * ops[i].height * ops[i].depth);
    }
    return fake_success;
}
