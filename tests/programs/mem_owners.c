/*
 * mem_owners.c - device memory held by several owners, with known sizes, for
 * the memory ledger by owner and the out-of-memory report.
 *
 * DESIGN
 * A training job's device memory belongs to NCCL, cuBLAS, PyTorch's caching
 * allocator and the program's own code; each reaches the driver its own
 * way, as the real libraries do (see each fake's DESIGN):
 *   NCCL          tests/fakes/nccl.c: cuMemAlloc_v2 from libnccl.so.2's code
 *   cuBLAS        tests/fakes/cublas.c: cuMemAlloc_v2 from libcublas.so.13's
 *   libc10_cuda   tests/fakes/c10/c10_cuda.c: cudaMalloc from libc10_cuda.so
 *   the program   cudaMalloc and cuMemCreate from this file's code
 * The driver is reached as the runtime does (dlopen libcuda.so.1, dlsym on
 * its handle).  MiB = 1048576 bytes; N = --steps (default 5).
 *
 * Setup, in this order:
 *   ncclCommInitRank (1 rank)          NCCL        +4 MiB (cuMemAlloc_v2)
 *   cublasCreate_v2                    cuBLAS      +1 MiB (cuMemAlloc_v2)
 *   3 x c10_fake_raw_alloc(8 MiB)      libc10_cuda +24 MiB (3 cudaMalloc)
 *   cuMemAddressReserve 2 MiB, cuMemCreate 2 MiB, cuMemMap
 *                                      program     +2 MiB (cuMemCreate)
 *   cudaMalloc 16 MiB (buffer B)       program     +16 MiB
 *   live after setup: 47 MiB (49283072 bytes)
 * Step s = 0 .. N-1, then trainprof_step():
 *   ncclAllReduce of 1024 floats of B  NCCL        +2 MiB at step 0 only
 *   with --grow=G, from step K on (--grow-from=K, default 1):
 *     c10_fake_raw_alloc(G), never given back           libc10_cuda +G
 *   c10_fake_empty_cache()             libc10_cuda -8 MiB (cudaFree of the
 *                                      block cached at step s-1; none at 0)
 *   c10_fake_raw_alloc(8 MiB)          libc10_cuda +8 MiB (cudaMalloc)
 *   c10_fake_raw_delete(block s % 3)   (to the cache: still reserved)
 *   live at the end of every step: 57 MiB (59768832 bytes) + the G's
 * End:
 *   c10_fake_raw_delete of the 3 blocks, c10_fake_empty_cache
 *                                      libc10_cuda -32 MiB (4 cudaFree)
 *   cublasDestroy_v2                   cuBLAS      -1 MiB (cuMemFree_v2)
 *   ncclCommDestroy                    NCCL        -6 MiB (2 cuMemFree_v2)
 *   cuMemUnmap, cuMemRelease, cuMemAddressFree
 *                                      program     -2 MiB (cuMemRelease)
 *   cudaFree(B), unless --leak         program     -16 MiB
 *   live at exit: 0, or 16 MiB with --leak (+ the G's, which are never freed)
 * Per owner, default options: NCCL peak 6 MiB (2 allocations);
 * cuBLAS 1 MiB (1); libc10_cuda peak 32 MiB, 3 + N allocations of 8 MiB
 * and as many frees (N - 1 during the steps, 4 at the end); the program
 * peak 18 MiB (cudaMalloc 16 MiB + cuMemCreate 2 MiB).  Peak of all: 57 MiB.
 *
 * Out of memory: with FAKE_CUDA_MEM_BUDGET=BUDGET and --grow=G (K >= 1),
 * the job dies at the first step s >= K with 57 MiB + (s - K + 1) * G >
 * BUDGET: there the grow allocation fails, c10 frees its cached 8 MiB block
 * and retries once, and either that fails too, or it succeeds and the
 * step's 8 MiB allocation then fails with nothing left to free.  Any failed
 * allocation prints one line to stderr, "torch.OutOfMemoryError: CUDA out
 * of memory. Tried to allocate BYTES bytes (step S, WHAT)" (S -1 in setup),
 * and exits 1, as a Python job's uncaught OutOfMemoryError ends it.
 *
 * stdout is the same with and without the preload: "setup: used BYTES",
 * "step S: used BYTES" after each step, "end: used BYTES" (cudaMemGetInfo:
 * total - free) and "done".
 *
 * Options: --steps=N (or a bare N), --leak, --grow=G, --grow-from=K,
 * --c10=PATH (else $MEM_OWNERS_C10, else ../fakes/c10/libc10_cuda.so beside
 * the program).
 */
#include <cuda.h>
#include <cublas_api.h>
#include <getopt.h>
#include <nccl.h>

#include "prog.h"

#define MIB ((size_t)1 << 20)
#define C10_BLOCK (8 * MIB)

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*addr_free_fn)(CUdeviceptr, size_t);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);

typedef void *(*c10_alloc_fn)(size_t);
typedef void (*c10_delete_fn)(void *);
typedef void (*c10_empty_fn)(void);

static size_t used(void)
{
    size_t fr = 0, total = 0;
    PROG_CHECK(cudaMemGetInfo(&fr, &total));
    return total - fr;
}

/* What PyTorch's uncaught OutOfMemoryError does to the job. */
static void oom(size_t bytes, int step, const char *what)
{
    fprintf(stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %zu bytes (step %d, %s)\n",
            bytes, step, what);
    exit(1);
}

static void *c10_path_open(const char *opt)
{
    char path[4200];
    const char *p = opt ? opt : getenv("MEM_OWNERS_C10");
    if (!p || !*p) {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return NULL;
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
        snprintf(path, sizeof path, "%s/../fakes/c10/libc10_cuda.so", exe);
        p = path;
    }
    void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "dlopen %s: %s\n", p, dlerror());
    return h;
}

int main(int argc, char **argv)
{
    long steps = 5, grow_from = 1;
    size_t grow = 0;
    int leak = 0;
    const char *c10_opt = NULL;
    static const struct option opts[] = {
        { "steps", required_argument, NULL, 's' },
        { "leak", no_argument, NULL, 'l' },
        { "grow", required_argument, NULL, 'g' },
        { "grow-from", required_argument, NULL, 'k' },
        { "c10", required_argument, NULL, 'c' },
        { NULL, 0, NULL, 0 },
    };
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': steps = atol(optarg); break;
        case 'l': leak = 1; break;
        case 'g': grow = (size_t)strtoull(optarg, NULL, 10); break;
        case 'k': grow_from = atol(optarg); break;
        case 'c': c10_opt = optarg; break;
        default:
            fprintf(stderr, "usage: %s [--steps=N|N] [--leak] [--grow=BYTES] [--grow-from=K] [--c10=PATH]\n",
                    argv[0]);
            return 64;
        }
    }
    if (optind < argc)
        steps = atol(argv[optind]);
    if (steps < 0 || grow_from < 0) {
        fprintf(stderr, "bad --steps or --grow-from\n");
        return 64;
    }

    void *drv = prog_open_driver();
    void *c10 = c10_path_open(c10_opt);
    if (!drv || !c10)
        return 2;
    init_fn cu_init = (init_fn)prog_sym(drv, "cuInit");
    create_fn cu_create = (create_fn)prog_sym(drv, "cuMemCreate");
    release_fn cu_release = (release_fn)prog_sym(drv, "cuMemRelease");
    reserve_fn cu_reserve = (reserve_fn)prog_sym(drv, "cuMemAddressReserve");
    addr_free_fn cu_addr_free = (addr_free_fn)prog_sym(drv, "cuMemAddressFree");
    map_fn cu_map = (map_fn)prog_sym(drv, "cuMemMap");
    unmap_fn cu_unmap = (unmap_fn)prog_sym(drv, "cuMemUnmap");
    c10_alloc_fn c10_alloc = (c10_alloc_fn)prog_sym(c10, "c10_fake_raw_alloc");
    c10_delete_fn c10_delete = (c10_delete_fn)prog_sym(c10, "c10_fake_raw_delete");
    c10_empty_fn c10_empty = (c10_empty_fn)prog_sym(c10, "c10_fake_empty_cache");
    PROG_CU_CHECK(cu_init(0));

    /* ---- setup ---- */
    ncclUniqueId id;
    ncclComm_t comm;
    PROG_STATUS_CHECK(ncclGetUniqueId(&id));
    if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
        oom(4 * MIB, -1, "ncclCommInitRank");
    cublasHandle_t blas;
    if (cublasCreate_v2(&blas) != CUBLAS_STATUS_SUCCESS)
        oom(MIB, -1, "cublasCreate_v2");
    void *blk[3];
    for (int i = 0; i < 3; i++)
        if (!(blk[i] = c10_alloc(C10_BLOCK)))
            oom(C10_BLOCK, -1, "libc10_cuda.so");
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle vh = 0;
    PROG_CU_CHECK(cu_reserve(&va, 2 * MIB, 0, 0, 0));
    if (cu_create(&vh, 2 * MIB, &prop, 0) != CUDA_SUCCESS)
        oom(2 * MIB, -1, "cuMemCreate");
    PROG_CU_CHECK(cu_map(va, 2 * MIB, 0, vh, 0));
    void *buf = NULL;
    if (cudaMalloc(&buf, 16 * MIB) != cudaSuccess)
        oom(16 * MIB, -1, "cudaMalloc");
    printf("setup: used %zu\n", used());

    /* ---- steps ---- */
    for (long s = 0; s < steps; s++) {
        if (ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, 0) != ncclSuccess)
            oom(2 * MIB, (int)s, "ncclAllReduce");
        if (grow && s >= grow_from && !c10_alloc(grow))
            oom(grow, (int)s, "libc10_cuda.so grow");
        c10_empty();
        void *fresh = c10_alloc(C10_BLOCK);
        if (!fresh)
            oom(C10_BLOCK, (int)s, "libc10_cuda.so");
        c10_delete(blk[s % 3]);
        blk[s % 3] = fresh;
        printf("step %ld: used %zu\n", s, used());
        tp_call_step();
    }

    /* ---- end ---- */
    for (int i = 0; i < 3; i++)
        c10_delete(blk[i]);
    c10_empty();
    PROG_STATUS_CHECK(cublasDestroy_v2(blas));
    PROG_STATUS_CHECK(ncclCommDestroy(comm));
    PROG_CU_CHECK(cu_unmap(va, 2 * MIB));
    PROG_CU_CHECK(cu_release(vh));
    PROG_CU_CHECK(cu_addr_free(va, 2 * MIB));
    if (!leak)
        PROG_CHECK(cudaFree(buf));
    printf("end: used %zu\n", used());
    printf("done\n");
    return 0;
}
