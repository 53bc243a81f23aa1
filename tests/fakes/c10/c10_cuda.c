/*
 * c10_cuda.c - a fake of PyTorch's CUDA caching allocator, built as
 * build/fakes/c10/libc10_cuda.so: the file name of torch/lib/libc10_cuda.so,
 * in a folder of its own so that nothing that searches build/fakes finds it
 * by accident.
 *
 * DESIGN
 * What matters to a profiler that names the owner of device memory is where
 * the real library's allocations come from: PyTorch's libc10_cuda.so imports
 * cudaMalloc, cudaFree, cudaMallocAsync, cudaFreeAsync and cudaMemGetInfo
 * from the dynamic runtime (readelf --dyn-syms on the torch 2.15.0 wheel's
 * torch/lib/libc10_cuda.so: "UND cudaMalloc@libcudart.so.13", DT_NEEDED
 * libcudart.so.13; no cuMem* import, the expandable segments reach the
 * driver through cudaGetDriverEntryPointByVersion).  So the fake links the
 * (fake) libcudart.so.13 and calls cudaMalloc/cudaFree from its own code;
 * the symbol versions come from the fake runtime's version script, as in
 * the wheel.
 * The allocator is PyTorch's in miniature: c10_fake_raw_alloc(n) hands out
 * a cached block of exactly n bytes if one is free, else cudaMalloc(n); when
 * that fails with cudaErrorMemoryAllocation it clears the runtime's error
 * (as c10 does), frees every cached block (release_cached_blocks) and tries
 * once more; NULL if that fails too (where PyTorch raises
 * torch.OutOfMemoryError).  c10_fake_raw_delete(p) puts the block back in
 * the cache (no cudaFree), c10_fake_empty_cache() frees the cached blocks
 * (torch.cuda.empty_cache()).  PyTorch rounds sizes (512 bytes, 2 MiB for
 * large blocks) and splits blocks; the fake does neither, so a test's
 * sizes are the bytes that reach cudaMalloc.  One lock guards the block
 * list, as the real allocator's mutex does.
 * c10_fake_reserved() and c10_fake_allocated() answer
 * torch.cuda.memory_reserved() and memory_allocated().
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

struct block {
    void *ptr;
    size_t size;
    int in_use;
    struct block *next;
};

static struct block *blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

FAKE_EXPORT void *c10_fake_raw_alloc(size_t n);
FAKE_EXPORT void c10_fake_raw_delete(void *p);
FAKE_EXPORT void c10_fake_empty_cache(void);
FAKE_EXPORT size_t c10_fake_reserved(void);
FAKE_EXPORT size_t c10_fake_allocated(void);

/* cudaFree every cached block (lock held). */
static void release_cached(void)
{
    for (struct block **pp = &blocks; *pp;) {
        struct block *b = *pp;
        if (b->in_use) {
            pp = &b->next;
            continue;
        }
        cudaFree(b->ptr);
        *pp = b->next;
        free(b);
    }
}

FAKE_EXPORT void *c10_fake_raw_alloc(size_t n)
{
    if (!n)
        return NULL;
    pthread_mutex_lock(&lock);
    for (struct block *b = blocks; b; b = b->next)
        if (!b->in_use && b->size == n) {
            b->in_use = 1;
            pthread_mutex_unlock(&lock);
            return b->ptr;
        }
    struct block *b = calloc(1, sizeof *b);
    void *p = NULL;
    cudaError_t e = b ? cudaMalloc(&p, n) : cudaErrorMemoryAllocation;
    if (b && e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        release_cached();
        e = cudaMalloc(&p, n);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        pthread_mutex_unlock(&lock);
        free(b);
        return NULL;
    }
    b->ptr = p;
    b->size = n;
    b->in_use = 1;
    b->next = blocks;
    blocks = b;
    pthread_mutex_unlock(&lock);
    return p;
}

FAKE_EXPORT void c10_fake_raw_delete(void *p)
{
    pthread_mutex_lock(&lock);
    for (struct block *b = blocks; b; b = b->next)
        if (b->ptr == p)
            b->in_use = 0;
    pthread_mutex_unlock(&lock);
}

FAKE_EXPORT void c10_fake_empty_cache(void)
{
    pthread_mutex_lock(&lock);
    release_cached();
    pthread_mutex_unlock(&lock);
}

static size_t sum(int in_use_only)
{
    size_t n = 0;
    pthread_mutex_lock(&lock);
    for (struct block *b = blocks; b; b = b->next)
        if (!in_use_only || b->in_use)
            n += b->size;
    pthread_mutex_unlock(&lock);
    return n;
}

FAKE_EXPORT size_t c10_fake_reserved(void)
{
    return sum(0);
}

FAKE_EXPORT size_t c10_fake_allocated(void)
{
    return sum(1);
}
