/*
 * prog.h - shared by the test programs in tests/programs/.
 *
 * DESIGN
 * The programs stand in for what nvcc emits and what a training loop does,
 * written in C against the real CUDA headers.  Kernel registration uses the
 * same entry points as nvcc's generated code (crt/host_runtime.h, C++-only,
 * so the prototypes are repeated here); host stubs are distinct addresses.
 * trainprof_* is reached through dlsym(RTLD_DEFAULT) so every program runs
 * with or without the library and prints the same thing either way.
 */
#ifndef TRAINPROF_TESTS_PROG_H
#define TRAINPROF_TESTS_PROG_H

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preload/trainprof.h"

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **a, size_t sm,
                               cudaStream_t s);

/* Stand-ins for host stubs: one byte each in a static area, so that any
 * number of kernels get distinct, stable addresses. */
static char prog_stub_area[4096] __attribute__((unused));
#define PROG_STUB(i) ((const void *)&prog_stub_area[(i)])

/* A fake fat binary; the fake runtime never looks inside. */
static const unsigned long long prog_fatbin[4] __attribute__((unused)) = { 0x466243b1ull, 1, 0, 0 };

static inline void **prog_register_module(void)
{
    return __cudaRegisterFatBinary((void *)prog_fatbin);
}

static inline void prog_register(void **h, const void *stub, const char *devname)
{
    /* nvcc passes the mangled name as both deviceFun and deviceName. */
    __cudaRegisterFunction(h, (const char *)stub, (char *)devname, devname, -1,
                           NULL, NULL, NULL, NULL, NULL);
}

static inline dim3 prog_dim3(unsigned x, unsigned y, unsigned z)
{
    dim3 d;
    d.x = x;
    d.y = y;
    d.z = z;
    return d;
}

#define PROG_CHECK(call)                                                              \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,      \
                    cudaGetErrorString(e_));                                          \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* trainprof API through dlsym: no-ops without the library. */
static inline void tp_call_step(void)
{
    static void (*fn)(void);
    static int looked;
    if (!looked) {
        fn = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_step");
        looked = 1;
    }
    if (fn)
        fn();
}

static inline void tp_call_range_push(const char *name)
{
    void (*fn)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "trainprof_range_push");
    if (fn)
        fn(name);
}

static inline void tp_call_range_pop(void)
{
    void (*fn)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "trainprof_range_pop");
    if (fn)
        fn();
}

/* Integer from the environment, or a default. */
static inline long prog_env_long(const char *name, long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end) {
        fprintf(stderr, "bad %s=%s\n", name, v);
        exit(64);
    }
    return n;
}

/* prog_now_ns - CLOCK_MONOTONIC in ns, for the programs' timing modes. */
static inline uint64_t prog_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* PROG_STATUS_CHECK - PROG_CHECK for libraries whose status 0 is success
 * (CUresult, cudnnStatus_t); PROG_CU_CHECK is its name for driver calls. */
#define PROG_CU_CHECK(call) PROG_STATUS_CHECK(call)
#define PROG_STATUS_CHECK(call)                                                       \
    do {                                                                              \
        int r_ = (int)(call);                                                         \
        if (r_ != 0) {                                                                \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, r_);  \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#ifdef CUDNN_MAJOR
/* prog_dnn_tensor - set cuDNN tensor descriptor "d" to packed dims (a
 * program that includes <cudnn.h> before this header). */
static inline void prog_dnn_tensor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nb,
                                   const int *dims)
{
    int strides[CUDNN_DIM_MAX];
    strides[nb - 1] = 1;
    for (int i = nb - 2; i >= 0; i--)
        strides[i] = strides[i + 1] * dims[i + 1];
    PROG_STATUS_CHECK(cudnnSetTensorNdDescriptor(d, t, nb, dims, strides));
}
#endif

/* prog_sym - dlsym(h, name), or exit(3) saying which symbol is missing. */
static inline void *prog_sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(3);
    }
    return p;
}

/* prog_open_driver - dlopen("libcuda.so.1") as the runtime does (found
 * through the program's rpath), else by path beside the program: ASan's
 * dlopen interceptor makes the lookup relative to libasan, whose rpath does
 * not lead to the fake. */
static inline void *prog_open_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    char exe[4096], path[4200];
    ssize_t n = h ? -1 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
        snprintf(path, sizeof path, "%s/../fakes/libcuda.so.1", exe);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h)
        fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
    return h;
}

#endif
