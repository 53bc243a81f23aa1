/*
 * mem_lean.c - allocations that cross the edges of recording windows, for
 * the memory ledger's lean path between windows (preload/wrap.h
 * TP_WRAP_LEANFN; tests/preload/test_memory.py).
 *
 * DESIGN
 * Between windows an allocation's wrapper updates the ledger without the
 * recording path; inside a window the recording path does.  Each must see
 * what the other did: a block allocated between windows and freed inside
 * one gives back its size (not an unknown address), and a block allocated
 * inside a window and freed between windows is gone at the next window's
 * start.  Steps end with trainprof_step(); with
 * TRAINPROF_SCHEDULE=wait=1,warmup=0,active=1,repeat=2 steps 1 and 3
 * record.  MiB = 1048576 bytes.
 *   step 0: cudaFree(NULL) (activates), cudaMalloc X 1 MiB,
 *           driver cuMemAlloc_v2 D 64 KiB                        (between)
 *   step 1: cudaFree X, cudaMalloc Y 2 MiB                      (window 1)
 *   step 2: cudaFree Y, driver cuMemFree_v2 D, cudaMalloc Z 4 MiB,
 *           cudaMalloc W 8 MiB                                  (between)
 *   step 3: cudaFree Z                                          (window 2)
 *   step 4: nothing; W is held at exit unless --free-w frees it
 * The driver is reached as the runtime does (dlopen libcuda.so.1, dlsym on
 * its handle).  stdout is the same with and without the preload; stderr
 * names the addresses ("addr NAME 0x...").
 */
#include <cuda.h>
#include <string.h>

#include "prog.h"

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

static void show(const char *name, unsigned long long p)
{
    fprintf(stderr, "addr %s 0x%llx\n", name, p);
}

int main(int argc, char **argv)
{
    int free_w = argc > 1 && strcmp(argv[1], "--free-w") == 0;
    void *drv = prog_open_driver();
    if (!drv)
        return 2;
    init_fn cu_init = (init_fn)prog_sym(drv, "cuInit");
    alloc_fn cu_alloc = (alloc_fn)prog_sym(drv, "cuMemAlloc_v2");
    free_fn cu_free = (free_fn)prog_sym(drv, "cuMemFree_v2");
    PROG_CU_CHECK(cu_init(0));
    void *x, *y, *z, *w;
    CUdeviceptr d;

    /* step 0: cudaFree(NULL) makes the context, as programs do, and
     * activates the profiler, so that X is the lean path's */
    PROG_CHECK(cudaFree(NULL));
    PROG_CHECK(cudaMalloc(&x, 1 << 20));
    PROG_CU_CHECK(cu_alloc(&d, 64 << 10));
    show("X", (unsigned long long)(uintptr_t)x);
    show("D", (unsigned long long)d);
    tp_call_step();

    /* step 1 */
    PROG_CHECK(cudaFree(x));
    PROG_CHECK(cudaMalloc(&y, 2 << 20));
    show("Y", (unsigned long long)(uintptr_t)y);
    tp_call_step();

    /* step 2 */
    PROG_CHECK(cudaFree(y));
    PROG_CU_CHECK(cu_free(d));
    PROG_CHECK(cudaMalloc(&z, 4 << 20));
    PROG_CHECK(cudaMalloc(&w, 8 << 20));
    show("Z", (unsigned long long)(uintptr_t)z);
    show("W", (unsigned long long)(uintptr_t)w);
    tp_call_step();

    /* step 3 */
    PROG_CHECK(cudaFree(z));
    tp_call_step();

    /* step 4 */
    if (free_w)
        PROG_CHECK(cudaFree(w));
    tp_call_step();
    printf("mem_lean: done\n");
    return 0;
}
