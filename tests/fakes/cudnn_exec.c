/*
 * cudnn_exec.c - the executing half of cuDNN, faked: handles, the four
 * legacy convolution calls and cudnnBackendExecute succeed without a GPU.
 *
 * DESIGN
 * Test programs link this library BEFORE the real libcudnn.so.9 of the CUDA
 * toolkit (tests/programs/conv_calls.mk), so their executing calls bind here
 * while every descriptor function (create, set, get, backend attributes)
 * is the real one, whose host-side code needs no GPU.  Each convolution and
 * each backend execute launches one kernel, "cudnn_fake_conv", through the
 * CUDA runtime found at run time (dlsym(RTLD_DEFAULT), so it is the fake
 * runtime, or the profiler's wrapper of it when preloaded), as the real
 * library does: such launches are recorded on their own (decision 1).
 * FAKE_CUDNN_NO_LAUNCH=1 (read at the first cudnnCreate) skips the launch,
 * for timing the cuDNN wrappers alone.  Nothing is printed.
 */
#include <cudnn.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

struct cudnnContext {
    cudaStream_t stream;
};

static char fake_stub;   /* host stub address of the fake kernel */
static const unsigned long long fake_fatbin[4] = { 0x466243b1ull, 1, 0, 0 };

typedef void **(*reg_bin_fn)(void *);
typedef void (*reg_end_fn)(void **);
typedef void (*reg_fn_fn)(void **, const char *, char *, const char *, int, void *, void *,
                          void *, void *, int *);
typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);

static launch_fn fake_launch;

static void fake_register(void)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return;
    reg_bin_fn bin = (reg_bin_fn)dlsym(RTLD_DEFAULT, "__cudaRegisterFatBinary");
    reg_end_fn end = (reg_end_fn)dlsym(RTLD_DEFAULT, "__cudaRegisterFatBinaryEnd");
    reg_fn_fn fn = (reg_fn_fn)dlsym(RTLD_DEFAULT, "__cudaRegisterFunction");
    if (bin && fn) {
        void **h = bin((void *)fake_fatbin);
        fn(h, &fake_stub, (char *)"cudnn_fake_conv", "cudnn_fake_conv", -1, NULL, NULL, NULL,
           NULL, NULL);
        if (end)
            end(h);
    }
    const char *no = getenv("FAKE_CUDNN_NO_LAUNCH");
    if (!no || strcmp(no, "1"))
        __atomic_store_n(&fake_launch, (launch_fn)dlsym(RTLD_DEFAULT, "cudaLaunchKernel"),
                         __ATOMIC_RELEASE);
}

static cudnnStatus_t fake_run(cudnnHandle_t h)
{
    if (!h)
        return CUDNN_STATUS_BAD_PARAM;
    launch_fn l = __atomic_load_n(&fake_launch, __ATOMIC_ACQUIRE);
    if (l) {
        dim3 g = { 1, 1, 1 }, b = { 32, 1, 1 };
        if (l(&fake_stub, g, b, NULL, 0, h->stream) != cudaSuccess)
            return CUDNN_STATUS_EXECUTION_FAILED;
    }
    return CUDNN_STATUS_SUCCESS;
}

FAKE_EXPORT cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    fake_register();
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

FAKE_EXPORT cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

FAKE_EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream)
{
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

FAKE_EXPORT cudnnStatus_t cudnnConvolutionForward(
    cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
    cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wsb, const void *beta,
    const cudnnTensorDescriptor_t yd, void *y)
{
    (void)alpha; (void)xd; (void)x; (void)wd; (void)w; (void)cd; (void)algo; (void)ws;
    (void)wsb; (void)beta; (void)yd; (void)y;
    return fake_run(h);
}

FAKE_EXPORT cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t h, const void *alpha1, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
    cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wsb, const void *alpha2,
    const cudnnTensorDescriptor_t zd, const void *z, const cudnnTensorDescriptor_t bd,
    const void *bias, const cudnnActivationDescriptor_t ad, const cudnnTensorDescriptor_t yd,
    void *y)
{
    (void)alpha1; (void)xd; (void)x; (void)wd; (void)w; (void)cd; (void)algo; (void)ws;
    (void)wsb; (void)alpha2; (void)zd; (void)z; (void)bd; (void)bias; (void)ad; (void)yd;
    (void)y;
    return fake_run(h);
}

FAKE_EXPORT cudnnStatus_t cudnnConvolutionBackwardData(
    cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd, const void *w,
    const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
    cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t wsb, const void *beta,
    const cudnnTensorDescriptor_t dxd, void *dx)
{
    (void)alpha; (void)wd; (void)w; (void)dyd; (void)dy; (void)cd; (void)algo; (void)ws;
    (void)wsb; (void)beta; (void)dxd; (void)dx;
    return fake_run(h);
}

FAKE_EXPORT cudnnStatus_t cudnnConvolutionBackwardFilter(
    cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
    cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t wsb, const void *beta,
    const cudnnFilterDescriptor_t dwd, void *dw)
{
    (void)alpha; (void)xd; (void)x; (void)dyd; (void)dy; (void)cd; (void)algo; (void)ws;
    (void)wsb; (void)beta; (void)dwd; (void)dw;
    return fake_run(h);
}

FAKE_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan,
                                              cudnnBackendDescriptor_t varpack)
{
    if (!plan || !varpack)
        return CUDNN_STATUS_BAD_PARAM;
    return fake_run(h);
}
