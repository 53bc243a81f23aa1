/*
 * entry_points.c - driver functions obtained through the runtime, as
 * PyTorch obtains cuMemCreate, cuMemMap and the rest
 * (cudaGetDriverEntryPointByVersion at 12000, cudaEnableDefault).
 *
 * DESIGN
 * One step: cuMemCreate and cuMemRelease from cudaGetDriverEntryPointByVersion,
 * cuLaunchKernel from it with each flag and from its _ptsz form, cuMemsetD8
 * from the deprecated cudaGetDriverEntryPoint; every one is called once.  The
 * same functions are also looked up from the driver directly (dlopen,
 * cuGetProcAddress_v2, as driver_calls.c), and stdout says whether both
 * lookups gave the same pointer, and what the runtime answers for a name
 * the driver lacks and for a version too old.  stderr says which file
 * each pointer the runtime handed out lives in ("<name> pointer in: FILE").
 * The output on stdout is the same with and without the library.
 */
#define _GNU_SOURCE
#include <cuda.h>
#undef cuGetProcAddress   /* cuda.h: cuGetProcAddress_v2 */

#include "prog.h"

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *sym, void **fn, unsigned int version,
                                                  unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *st);

static const char image[] = "fakecubin _Z6matmulPfS_S_i";

static void *by_version(const char *label, const char *sym, unsigned version, unsigned long long flags, int ptsz)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st = -1;
    cudaError_t rc = ptsz ? cudaGetDriverEntryPointByVersion_ptsz(sym, &fn, version, flags, &st)
                          : cudaGetDriverEntryPointByVersion(sym, &fn, version, flags, &st);
    printf("%s: rc=%d status=%d null=%d\n", label, (int)rc, (int)st, fn == NULL);
    Dl_info where;
    fprintf(stderr, "%s pointer in: %s\n", label,
            fn && dladdr(fn, &where) && where.dli_fname ? where.dli_fname : "-");
    return fn;
}

int main(void)
{
    /* the driver, directly */
    void *h = prog_open_driver();
    gpa2_fn gpa2 = h ? (gpa2_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    void *p = NULL;
    CUdriverProcAddressQueryResult dst;
    if (!gpa2 || gpa2("cuGetProcAddress", &p, 12000, 0, &dst) != CUDA_SUCCESS)
        return 2;
    gpa2 = (gpa2_fn)p;
    void *create_drv = NULL, *lib_load = NULL, *lib_kernel = NULL;
    PROG_CU_CHECK(gpa2("cuMemCreate", &create_drv, 12000, 0, &dst));
    PROG_CU_CHECK(gpa2("cuLibraryLoadData", &lib_load, 12000, 0, &dst));
    PROG_CU_CHECK(gpa2("cuLibraryGetKernel", &lib_kernel, 12000, 0, &dst));

    /* the driver, through the runtime */
    __typeof__(&cuMemCreate) create = by_version("cuMemCreate", "cuMemCreate", 12000, cudaEnableDefault, 0);
    __typeof__(&cuMemRelease) release = by_version("cuMemRelease", "cuMemRelease", 12000, cudaEnableDefault, 0);
    __typeof__(&cuLaunchKernel) launch = by_version("cuLaunchKernel", "cuLaunchKernel", 12000, cudaEnableDefault, 0);
    __typeof__(&cuLaunchKernel) launch_pt = by_version("cuLaunchKernel per-thread", "cuLaunchKernel", 12000,
                                                       cudaEnablePerThreadDefaultStream, 0);
    __typeof__(&cuLaunchKernel) launch_ptsz = by_version("cuLaunchKernel _ptsz default", "cuLaunchKernel", 12000,
                                                         cudaEnableDefault, 1);
    by_version("unknown", "cuNoSuchFunction", 12000, cudaEnableDefault, 0);
    by_version("too old", "cuMemCreate", 10000, cudaEnableDefault, 0);
    void *memset_fn = NULL;
    enum cudaDriverEntryPointQueryResult st = -1;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    cudaError_t rc = cudaGetDriverEntryPoint("cuMemsetD8", &memset_fn, cudaEnableDefault, &st);
#pragma GCC diagnostic pop
    printf("cuMemsetD8 (unversioned): rc=%d status=%d null=%d\n", (int)rc, (int)st, memset_fn == NULL);
    Dl_info where;
    fprintf(stderr, "cuMemsetD8 pointer in: %s\n",
            memset_fn && dladdr(memset_fn, &where) && where.dli_fname ? where.dli_fname : "-");
    printf("cuMemCreate the same as a driver lookup: %s\n", (void *)create == create_drv ? "yes" : "no");
    if (!create || !release || !launch || !launch_pt || !launch_ptsz || !memset_fn)
        return 3;

    CUlibrary lib;
    CUkernel k;
    PROG_CU_CHECK(((__typeof__(&cuLibraryLoadData))lib_load)(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    PROG_CU_CHECK(((__typeof__(&cuLibraryGetKernel))lib_kernel)(&k, lib, "_Z6matmulPfS_S_i"));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle vh;
    PROG_CU_CHECK(create(&vh, 1 << 20, &prop, 0));
    PROG_CU_CHECK(launch((CUfunction)k, 2, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    PROG_CU_CHECK(launch_pt((CUfunction)k, 3, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD, NULL, NULL));
    PROG_CU_CHECK(launch_ptsz((CUfunction)k, 4, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD, NULL, NULL));
    static unsigned char buf[64];
    PROG_CU_CHECK(((__typeof__(&cuMemsetD8_v2))memset_fn)((CUdeviceptr)(uintptr_t)buf, 0x11, sizeof buf));
    PROG_CU_CHECK(release(vh));
    printf("set %02x\n", buf[63]);
    tp_call_step();
    return 0;
}
