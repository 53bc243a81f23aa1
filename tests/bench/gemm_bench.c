/*
 * gemm_bench.c - ns per cublasLtMatmul on the fake cuBLASLt, descriptors
 * real.  Usage: gemm_bench CALLS STEPS.  Prints "ns_per_matmul=X".
 *
 * The fake executing half (build/fakes/libcublaslt_exec.so, next to this
 * program's ../fakes) and CUDA's libcublasLt.so.13 are dlopen'ed
 * RTLD_GLOBAL in that order, so that cublasLtMatmul found through
 * dlsym(RTLD_DEFAULT) is the preloaded wrapper when there is one (else the
 * fake), and the wrapper's descriptor reads reach the real library: the
 * recording cost includes them.  Steps are signalled through
 * trainprof_step() when the library is present.
 */
#include <cublasLt.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef cublasStatus_t (*matmul_fn)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *,
                                    const void *, cublasLtMatrixLayout_t, const void *,
                                    cublasLtMatrixLayout_t, const void *, const void *,
                                    cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
                                    const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
typedef cublasStatus_t (*desc_create_fn)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
typedef cublasStatus_t (*desc_set_fn)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                      const void *, size_t);
typedef cublasStatus_t (*layout_create_fn)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t,
                                           uint64_t, int64_t);
typedef cublasStatus_t (*layout_set_fn)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                                        const void *, size_t);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        fprintf(stderr, "gemm_bench: %s not found\n", name);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 1000000;
    long steps = argc > 2 ? atol(argv[2]) : 10;
    char exe[PATH_MAX], lib[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 1;
    exe[n] = 0;
    snprintf(lib, sizeof lib, "%s/../fakes/libcublaslt_exec.so", dirname(exe));
    if (!dlopen(lib, RTLD_NOW | RTLD_GLOBAL) || !dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "gemm_bench: %s\n", dlerror());
        return 1;
    }
    matmul_fn matmul = (matmul_fn)sym("cublasLtMatmul");
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t ad, bd, cd;
    int32_t t = CUBLAS_OP_T, batch = 8;
    ((desc_create_fn)sym("cublasLtMatmulDescCreate"))(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    ((desc_set_fn)sym("cublasLtMatmulDescSetAttribute"))(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    layout_create_fn lc = (layout_create_fn)sym("cublasLtMatrixLayoutCreate");
    lc(&ad, CUDA_R_16BF, 4096, 1024, 4096);
    lc(&bd, CUDA_R_16BF, 4096, 2048, 4096);
    lc(&cd, CUDA_R_16BF, 1024, 2048, 1024);
    layout_set_fn ls = (layout_set_fn)sym("cublasLtMatrixLayoutSetAttribute");
    ls(ad, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    ls(bd, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    ls(cd, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");
    static float buf[16];
    long per = calls / steps;
    double total = 0;
    for (long s = 0; s < steps; s++) {
        double t0 = now_ns();
        for (long i = 0; i < per; i++)
            matmul(NULL, desc, buf, buf, ad, buf, bd, buf, buf, cd, buf, cd, NULL, NULL, 0, 0);
        total += now_ns() - t0;
        if (step)
            step();
    }
    printf("ns_per_matmul=%.2f\n", total / (double)(per * steps));
    return 0;
}
