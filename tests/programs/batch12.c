/*
 * batch12.c - the batch copies called with CUDA 12.8's arguments, bound to
 * libcudart.so.12's definitions (tests/fakes/cudart12.c), as a program
 * built with CUDA 12.8 or 12.9 calls them.
 *
 * DESIGN
 * cudaMemcpyBatchAsync and cudaMemcpy3DBatchAsync took a size_t *failIdx
 * before their flags and stream in CUDA 12.8; CUDA 13 dropped it.  One
 * unversioned wrapper in libtrainprof.so serves both libraries' callers, so
 * it must forward whichever arguments it was given.  One step: each batch
 * once, on a stream; stdout says whether the copies happened and whether the
 * library received the stream and failIdx this program passed (the same with
 * and without trainprof); stderr gives the stream's value for the test.
 */
#include <stddef.h>

/* CUDA 13's declarations under other names: this program is CUDA 12.8's */
#define cudaMemcpyBatchAsync cuda13_cudaMemcpyBatchAsync
#define cudaMemcpy3DBatchAsync cuda13_cudaMemcpy3DBatchAsync
#include "prog.h"
#undef cudaMemcpyBatchAsync
#undef cudaMemcpy3DBatchAsync

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
                                 struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                 size_t *failIdx, cudaStream_t stream);
cudaError_t cudaMemcpy3DBatchAsync(size_t numOps, struct cudaMemcpy3DBatchOp *opList, size_t *failIdx,
                                   unsigned long long flags, cudaStream_t stream);
void fake_cudart12_seen(void **stream, size_t **fail_idx);

/* the layout tests/fakes/cudart12.c reads */
_Static_assert(sizeof(struct cudaMemcpy3DBatchOp) == 112 &&
               offsetof(struct cudaMemcpy3DBatchOp, extent) == 80, "cudaMemcpy3DBatchOp layout");

static void report(const char *what, cudaError_t rc, cudaStream_t s, size_t *fail_idx, int copied)
{
    void *seen_stream;
    size_t *seen_fail;
    fake_cudart12_seen(&seen_stream, &seen_fail);
    printf("%s: rc=%d copied=%d stream %s failIdx %s\n", what, (int)rc, copied,
           seen_stream == (void *)s ? "intact" : "garbled", seen_fail == fail_idx ? "intact" : "garbled");
}

int main(void)
{
    cudaStream_t s;
    PROG_CHECK(cudaStreamCreate(&s));
    fprintf(stderr, "stream %llu\n", (unsigned long long)(uintptr_t)s);
    static char a[256], b[256], c[128], d[128];
    memset(a, 1, sizeof a);
    memset(c, 2, sizeof c);
    void *dsts[2] = { b, d };
    const void *srcs[2] = { a, c };
    size_t sizes[2] = { sizeof a, sizeof c }, idx[1] = { 0 }, fail = 0;
    struct cudaMemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    cudaError_t rc = cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, idx, 1, &fail, s);
    report("batch", rc, s, &fail, b[255] == 1 && d[127] == 2);

    struct cudaMemcpy3DBatchOp op;
    memset(&op, 0, sizeof op);
    op.src.type = op.dst.type = cudaMemcpyOperandTypePointer;
    memset(c, 3, sizeof c);
    op.src.op.ptr.ptr = c, op.dst.op.ptr.ptr = d;
    op.extent.width = 32, op.extent.height = 2, op.extent.depth = 1;
    op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    rc = cudaMemcpy3DBatchAsync(1, &op, &fail, 0, s);
    report("3D batch", rc, s, &fail, d[63] == 3 && d[64] == 2);
    tp_call_step();
    PROG_CHECK(cudaStreamDestroy(s));
    return 0;
}
