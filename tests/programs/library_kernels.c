/*
 * library_kernels.c - kernels of a library loaded at run time
 * (cudaLibraryLoadData, cudaLibraryGetKernel), launched by their cudaKernel_t
 * through cudaLaunchKernel and cudaLaunchKernelExC, as the runtime allows.
 *
 * DESIGN
 * One step, two launches of each kernel; the test reads their names in the
 * trace.  The fake runtime's library image is "fakecubin" and mangled names.
 */
#include "prog.h"

static const char image[] = "fakecubin _Z5k_libv _ZN3lib2k2Ei";

int main(void)
{
    cudaLibrary_t lib;
    cudaKernel_t k1, k2;
    PROG_CHECK(cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    PROG_CHECK(cudaLibraryGetKernel(&k1, lib, "_Z5k_libv"));
    PROG_CHECK(cudaLibraryGetKernel(&k2, lib, "_ZN3lib2k2Ei"));
    int n = 3;
    void *args[] = { &n };
    dim3 g = prog_dim3(2, 1, 1), b = prog_dim3(32, 1, 1);
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = g;
    cfg.blockDim = b;
    PROG_CHECK(cudaLaunchKernel((const void *)k1, g, b, NULL, 0, NULL));
    PROG_CHECK(cudaLaunchKernel((const void *)k2, g, b, args, 0, NULL));
    PROG_CHECK(cudaLaunchKernelExC(&cfg, (const void *)k1, NULL));
    PROG_CHECK(cudaLaunchKernelExC(&cfg, (const void *)k2, args));
    printf("launched 4\n");
    tp_call_step();
    return 0;
}
