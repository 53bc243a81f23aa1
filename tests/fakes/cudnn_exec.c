/*
 * cudnn_exec.c - the executing half of cuDNN, faked: handles, the four
 * legacy convolution calls, the convolution algorithm searches, RNNs,
 * batch normalization, pooling, CTC loss, spatial transformers, dropout
 * state initialization and cudnnBackendExecute succeed without a GPU.
 *
 * DESIGN
 * Test programs link this library BEFORE the real libcudnn.so.9 of the CUDA
 * toolkit (tests/programs/conv_calls.mk), so their executing calls bind here
 * while every descriptor function (create, set, get, backend attributes)
 * is the real one, whose host-side code needs no GPU.  Each convolution and
 * each backend execute launches one kernel, "cudnn_fake_conv", every other
 * executing call one "cudnn_fake_op" (an algorithm search one per algorithm
 * it reports, cudnnSetDropoutDescriptor one when given states to fill),
 * through the CUDA runtime found at run time (dlsym(RTLD_DEFAULT), so it is
 * the fake runtime, or the profiler's wrapper of it when preloaded), as the
 * real library does: such launches are recorded on their own.
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

static char fake_stub;   /* host stub address of the fake convolution kernel */
static char fake_op_stub;   /* ... of the kernel of every other call */
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
        fn(h, &fake_op_stub, (char *)"cudnn_fake_op", "cudnn_fake_op", -1, NULL, NULL, NULL,
           NULL, NULL);
        if (end)
            end(h);
    }
    const char *no = getenv("FAKE_CUDNN_NO_LAUNCH");
    if (!no || strcmp(no, "1"))
        __atomic_store_n(&fake_launch, (launch_fn)dlsym(RTLD_DEFAULT, "cudaLaunchKernel"),
                         __ATOMIC_RELEASE);
}

static cudnnStatus_t fake_launch_on(cudnnHandle_t h, const void *stub)
{
    if (!h)
        return CUDNN_STATUS_BAD_PARAM;
    launch_fn l = __atomic_load_n(&fake_launch, __ATOMIC_ACQUIRE);
    if (l) {
        dim3 g = { 1, 1, 1 }, b = { 32, 1, 1 };
        if (l(stub, g, b, NULL, 0, h->stream) != cudaSuccess)
            return CUDNN_STATUS_EXECUTION_FAILED;
    }
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fake_run(cudnnHandle_t h)
{
    return fake_launch_on(h, &fake_stub);
}

static cudnnStatus_t fake_op(cudnnHandle_t h)
{
    return fake_launch_on(h, &fake_op_stub);
}

/* An algorithm search: one result (algorithm 0, 1 us, no workspace), one
 * launch for it; *ret = 0 and no launch when none is asked for. */
#define FAKE_FIND(h, req, ret, perf)                                             \
    do {                                                                         \
        if (!(ret) || !(perf) || (req) < 0)                                      \
            return CUDNN_STATUS_BAD_PARAM;                                       \
        *(ret) = (req) > 0;                                                      \
        if ((req) == 0)                                                          \
            return (h) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;          \
        memset(&(perf)[0], 0, sizeof (perf)[0]);                                 \
        (perf)[0].status = CUDNN_STATUS_SUCCESS;                                 \
        (perf)[0].time = 0.001f;                                                 \
        (perf)[0].determinism = CUDNN_DETERMINISTIC;                             \
        return fake_op(h);                                                       \
    } while (0)

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

FAKE_EXPORT cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
    const cudnnTensorDescriptor_t yd, void *y, const int req, int *ret,
    cudnnConvolutionFwdAlgoPerf_t *perf, void *ws, size_t wsb)
{
    (void)xd; (void)x; (void)wd; (void)w; (void)cd; (void)yd; (void)y; (void)ws; (void)wsb;
    FAKE_FIND(h, req, ret, perf);
}

FAKE_EXPORT cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t h, const cudnnFilterDescriptor_t wd, const void *w,
    const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
    const cudnnTensorDescriptor_t dxd, void *dx, const int req, int *ret,
    cudnnConvolutionBwdDataAlgoPerf_t *perf, void *ws, size_t wsb)
{
    (void)wd; (void)w; (void)dyd; (void)dy; (void)cd; (void)dxd; (void)dx; (void)ws; (void)wsb;
    FAKE_FIND(h, req, ret, perf);
}

FAKE_EXPORT cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnTensorDescriptor_t dyd, const void *y, const cudnnConvolutionDescriptor_t cd,
    const cudnnFilterDescriptor_t dwd, void *dw, const int req, int *ret,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf, void *ws, size_t wsb)
{
    (void)xd; (void)x; (void)dyd; (void)y; (void)cd; (void)dwd; (void)dw; (void)ws; (void)wsb;
    FAKE_FIND(h, req, ret, perf);
}

FAKE_EXPORT cudnnStatus_t cudnnRNNForward(
    cudnnHandle_t h, cudnnRNNDescriptor_t rd, cudnnForwardMode_t mode, const int32_t seqlens[],
    cudnnRNNDataDescriptor_t xd, const void *x, cudnnRNNDataDescriptor_t yd, void *y,
    cudnnTensorDescriptor_t hd, const void *hx, void *hy, cudnnTensorDescriptor_t cdd,
    const void *cx, void *cy, size_t wsz, const void *w, size_t wssz, void *ws, size_t rsz,
    void *rs)
{
    (void)mode; (void)seqlens; (void)x; (void)yd; (void)y; (void)hd; (void)hx; (void)hy;
    (void)cdd; (void)cx; (void)cy; (void)wsz; (void)w; (void)wssz; (void)ws; (void)rsz; (void)rs;
    return rd && xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnRNNBackwardData_v8(
    cudnnHandle_t h, cudnnRNNDescriptor_t rd, const int32_t seqlens[],
    cudnnRNNDataDescriptor_t yd, const void *y, const void *dy, cudnnRNNDataDescriptor_t xd,
    void *dx, cudnnTensorDescriptor_t hd, const void *hx, const void *dhy, void *dhx,
    cudnnTensorDescriptor_t cdd, const void *cx, const void *dcy, void *dcx, size_t wsz,
    const void *w, size_t wssz, void *ws, size_t rsz, void *rs)
{
    (void)seqlens; (void)yd; (void)y; (void)dy; (void)dx; (void)hd; (void)hx; (void)dhy;
    (void)dhx; (void)cdd; (void)cx; (void)dcy; (void)dcx; (void)wsz; (void)w; (void)wssz;
    (void)ws; (void)rsz; (void)rs;
    return rd && xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnRNNBackwardWeights_v8(
    cudnnHandle_t h, cudnnRNNDescriptor_t rd, cudnnWgradMode_t add, const int32_t seqlens[],
    cudnnRNNDataDescriptor_t xd, const void *x, cudnnTensorDescriptor_t hd, const void *hx,
    cudnnRNNDataDescriptor_t yd, const void *y, size_t wsz, void *dw, size_t wssz, void *ws,
    size_t rsz, void *rs)
{
    (void)add; (void)seqlens; (void)x; (void)hd; (void)hx; (void)yd; (void)y; (void)wsz;
    (void)dw; (void)wssz; (void)ws; (void)rsz; (void)rs;
    return rd && xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

/* The real one initializes the RNG states with a kernel when given them. */
FAKE_EXPORT cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t dd, cudnnHandle_t h,
                                                    float p, void *states, size_t ssz,
                                                    unsigned long long seed)
{
    (void)p; (void)ssz; (void)seed;
    if (!dd || !h)
        return CUDNN_STATUS_BAD_PARAM;
    return states ? fake_op(h) : CUDNN_STATUS_SUCCESS;
}

FAKE_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const void *alpha,
    const void *beta, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnTensorDescriptor_t zd, const void *z, const cudnnTensorDescriptor_t yd, void *y,
    const cudnnTensorDescriptor_t sd, const void *scale, const void *bias, double factor,
    void *rmean, void *rvar, double eps, void *smean, void *sinvvar,
    cudnnActivationDescriptor_t ad, void *ws, size_t wsb, void *rs, size_t rsb)
{
    (void)mode; (void)ops; (void)alpha; (void)beta; (void)x; (void)zd; (void)z; (void)yd;
    (void)y; (void)sd; (void)scale; (void)bias; (void)factor; (void)rmean; (void)rvar;
    (void)eps; (void)smean; (void)sinvvar; (void)ad; (void)ws; (void)wsb; (void)rs; (void)rsb;
    return xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xd, const void *x, const cudnnTensorDescriptor_t yd, void *y,
    const cudnnTensorDescriptor_t sd, const void *scale, const void *bias, const void *emean,
    const void *evar, double eps)
{
    (void)mode; (void)alpha; (void)beta; (void)x; (void)yd; (void)y; (void)sd; (void)scale;
    (void)bias; (void)emean; (void)evar; (void)eps;
    return xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnBatchNormalizationBackwardEx(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const void *alphad,
    const void *betad, const void *alphap, const void *betap, const cudnnTensorDescriptor_t xd,
    const void *x, const cudnnTensorDescriptor_t yd, const void *y,
    const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnTensorDescriptor_t dzd,
    void *dz, const cudnnTensorDescriptor_t dxd, void *dx, const cudnnTensorDescriptor_t sd,
    const void *scale, const void *bias, void *dscale, void *dbias, double eps,
    const void *smean, const void *sinvvar, cudnnActivationDescriptor_t ad, void *ws,
    size_t wsb, void *rs, size_t rsb)
{
    (void)mode; (void)ops; (void)alphad; (void)betad; (void)alphap; (void)betap; (void)x;
    (void)yd; (void)y; (void)dyd; (void)dy; (void)dzd; (void)dz; (void)dxd; (void)dx; (void)sd;
    (void)scale; (void)bias; (void)dscale; (void)dbias; (void)eps; (void)smean; (void)sinvvar;
    (void)ad; (void)ws; (void)wsb; (void)rs; (void)rsb;
    return xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd,
                                              const void *alpha, const cudnnTensorDescriptor_t xd,
                                              const void *x, const void *beta,
                                              const cudnnTensorDescriptor_t yd, void *y)
{
    (void)alpha; (void)x; (void)beta; (void)yd; (void)y;
    return pd && xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnSpatialTfGridGeneratorForward(
    cudnnHandle_t h, const cudnnSpatialTransformerDescriptor_t st, const void *theta, void *grid)
{
    (void)theta; (void)grid;
    return st ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnSpatialTfGridGeneratorBackward(
    cudnnHandle_t h, const cudnnSpatialTransformerDescriptor_t st, const void *dgrid,
    void *dtheta)
{
    (void)dgrid; (void)dtheta;
    return st ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnSpatialTfSamplerForward(
    cudnnHandle_t h, cudnnSpatialTransformerDescriptor_t st, const void *alpha,
    const cudnnTensorDescriptor_t xd, const void *x, const void *grid, const void *beta,
    cudnnTensorDescriptor_t yd, void *y)
{
    (void)alpha; (void)x; (void)grid; (void)beta; (void)yd; (void)y;
    return st && xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnSpatialTfSamplerBackward(
    cudnnHandle_t h, cudnnSpatialTransformerDescriptor_t st, const void *alpha,
    const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
    const cudnnTensorDescriptor_t dxd, void *dx, const void *alphag,
    const cudnnTensorDescriptor_t dyd, const void *dy, const void *grid, const void *betag,
    void *dgrid)
{
    (void)alpha; (void)x; (void)beta; (void)dxd; (void)dx; (void)alphag; (void)dyd; (void)dy;
    (void)grid; (void)betag; (void)dgrid;
    return st && xd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnCTCLoss(cudnnHandle_t h, const cudnnTensorDescriptor_t pd,
                                       const void *probs, const int labels[],
                                       const int label_lens[], const int input_lens[],
                                       void *costs, const cudnnTensorDescriptor_t gd, void *grads,
                                       cudnnCTCLossAlgo_t algo, cudnnCTCLossDescriptor_t cd,
                                       void *ws, size_t wsb)
{
    (void)probs; (void)labels; (void)label_lens; (void)input_lens; (void)costs; (void)gd;
    (void)grads; (void)algo; (void)ws; (void)wsb;
    return pd && cd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}

FAKE_EXPORT cudnnStatus_t cudnnCTCLoss_v8(cudnnHandle_t h, cudnnCTCLossAlgo_t algo,
                                          cudnnCTCLossDescriptor_t cd,
                                          const cudnnTensorDescriptor_t pd, const void *probs,
                                          const int labels[], const int label_lens[],
                                          const int input_lens[], void *costs,
                                          const cudnnTensorDescriptor_t gd, void *grads,
                                          size_t wsb, void *ws)
{
    (void)algo; (void)probs; (void)labels; (void)label_lens; (void)input_lens; (void)costs;
    (void)gd; (void)grads; (void)wsb; (void)ws;
    return pd && cd ? fake_op(h) : CUDNN_STATUS_BAD_PARAM;
}
