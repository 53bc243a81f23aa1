/*
 * cublas.c - a fake libcublas.so.13: the executing half of cuBLAS for the
 * preload tests.
 *
 * DESIGN
 * Handles hold a math mode and a stream; every entry point of
 * collector/record/apis/cublas.def exists with cuBLAS's own prototype (the .def is
 * expanded here too, so a wrong parameter list fails to compile against
 * cublas_api.h) and succeeds without computing or copying.  Two behave like the real
 * library in the ways the wrappers must cope with: cublasGemmEx calls
 * cublasLtMatmul through the PLT (libcublas.so.13 imports it from libcublasLt),
 * and cublasSgemm_v2 launches one kernel through the CUDA runtime.  Both
 * symbols are left undefined here and bound at load time from the program's
 * libraries (or the preloaded wrappers), as in the real library.  The
 * kernel is registered at the first cublasCreate_v2 (not in a constructor:
 * this library has no DT_NEEDED on the runtime, so the runtime's own may not
 * have run yet) under a name of the kind cuBLAS's SGEMM kernels carry, so
 * that traces name it as they would on a GPU instead of "unknown kernel".
 * Device memory: the real libcublas.so.13 links the CUDA runtime statically
 * (readelf -d: no DT_NEEDED on libcudart or libcuda), so the workspace
 * cublasCreate_v2 allocates for the handle reaches the driver from
 * cuBLAS's own code.  The fake allocates FAKE_CUBLAS_WORKSPACE (1 MiB) with
 * the driver's cuMemAlloc_v2 (fakegpu_driver_sym) when libcuda.so.1 is
 * loaded, and cublasDestroy_v2 frees it with cuMemFree_v2; a refused
 * allocation makes cublasCreate_v2 return CUBLAS_STATUS_ALLOC_FAILED ("the
 * resources could not be allocated", cuBLAS's documentation) and no handle.
 * (The real default workspace depends on the GPU, several MiB on Hopper;
 * the fake's is small and fixed so that tests can count it.)
 */
#define _GNU_SOURCE   /* RTLD_DEFAULT in fakegpu.h */
#define FAKEGPU_DRIVER_SYM
#include "fakegpu.h"

#include <cublas_api.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

struct cublasContext {
    cublasMath_t mode;
    cudaStream_t stream;
    unsigned long long workspace;   /* device memory (0: none) */
};

#define FAKE_CUBLAS_WORKSPACE ((size_t)1 << 20)

typedef int (*drv_alloc_fn)(unsigned long long *, size_t);
typedef int (*drv_free_fn)(unsigned long long);

/* crt/host_runtime.h is C++-only: its prototypes, as nvcc's generated code
 * calls them. */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);

/* The host stub of the one kernel cublasSgemm_v2 launches. */
static char fake_sgemm_kernel;
static const unsigned long long fake_fatbin[4] = { 0x466243b1ull, 1, 0, 0 };

static void fake_register(void)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return;
    static char name[] = "ampere_sgemm_128x64_nn";
    void **h = __cudaRegisterFatBinary((void *)fake_fatbin);
    __cudaRegisterFunction(h, &fake_sgemm_kernel, name, name, -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(h);
}

FAKE_EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    fake_register();
    struct cublasContext *c = calloc(1, sizeof *c);
    if (!c) {
        *h = NULL;
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    drv_alloc_fn alloc = (drv_alloc_fn)fakegpu_driver_sym("cuMemAlloc_v2");
    if (alloc && alloc(&c->workspace, FAKE_CUBLAS_WORKSPACE) != 0) {
        free(c);
        *h = NULL;
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *h = c;
    return CUBLAS_STATUS_SUCCESS;
}

FAKE_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    if (h && h->workspace) {
        drv_free_fn release = (drv_free_fn)fakegpu_driver_sym("cuMemFree_v2");
        if (release)
            release(h->workspace);
    }
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

FAKE_EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

FAKE_EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

FAKE_EXPORT cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode)
{
    if (!h || !mode)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *mode = h->mode;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_gemm(const char *name, cublasHandle_t h)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (strcmp(name, "cublasSgemm_v2") == 0) {
        dim3 g = { 1, 1, 1 }, b = { 128, 1, 1 };
        if (cudaLaunchKernel(&fake_sgemm_kernel, g, b, NULL, 0, h->stream) != cudaSuccess)
            return CUBLAS_STATUS_EXECUTION_FAILED;
    } else if (strcmp(name, "cublasGemmEx") == 0) {
        if (cublasLtMatmul(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                           NULL, NULL, NULL, 0, h->stream) != CUBLAS_STATUS_SUCCESS)
            return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* Each .def line's body is picked by its record expression, whose first
 * token is pasted onto FAKE_ (in the X-macro, before it expands): math
 * routines (TP_R_GEMM) go through fake_gemm, copies succeed, and the
 * TP_R_NONE lines (cublasCreate_v2, cublasDestroy_v2, written above) get
 * only a declaration, which fails to compile if the .def's prototype is not
 * theirs.  The H forms, declared for C++ only, get their prototype here. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define FAKE_TP_R_GEMM(...) FAKE_MATH
#define FAKE_TP_R_COPY(...) FAKE_COPY
#define FAKE_TP_R_NONE      FAKE_DECLARED
#define FAKE_MATH(ret, name, params) \
    FAKE_EXPORT ret name params;     \
    FAKE_EXPORT ret name params { return fake_gemm(#name, h); }
#define FAKE_COPY(ret, name, params) \
    FAKE_EXPORT ret name params;     \
    FAKE_EXPORT ret name params { return CUBLAS_STATUS_SUCCESS; }
#define FAKE_DECLARED(ret, name, params) FAKE_EXPORT ret name params;
#define TP_LIB_FN(ret, name, params, args, gate, rec) FAKE_##rec(ret, name, params)
#include "../../collector/record/apis/cublas.def"
#undef TP_LIB_FN
