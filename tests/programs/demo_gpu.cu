// demo_gpu.cu - the `make demo` training loop on a real GPU, and the nvcc
// program of the preload tests (tests/preload/test_nvcc.py, against the fake
// runtime) and of scripts/dev/gpu-validate (against the real one).
//
// DESIGN
// A small MLP-like loop (matmul, bias+relu, an SGD update) with NVTX "step"
// ranges, so that the default TRAINPROF_STEP_ON=api,nvtx:step counts steps,
// plus a templated kernel in a namespace launched on a second stream with
// dynamic shared memory, so that demangling, stream ids and launch details
// are exercised.  Each step makes LAUNCHES_PER_STEP <<<>>> launches; the
// first stdout line says so, so that tests and gpu-validate need not copy the
// number.  Built with -cudart shared the runtime wrappers see its launches
// (__cudaLaunchKernel, or __cudaLaunchKernel_ptsz with --default-stream
// per-thread); built with the default static cudart only the driver layer or
// CUPTI can.  stdout depends only on the arguments and the device's results:
// every buffer read back is written first (the fake runtime's device memory
// is uninitialised host memory).
//
// Usage: demo_gpu [STEPS]   (default 12)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define LAUNCHES_PER_STEP 5

__global__ void matmul(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && j < n) {
        float s = 0;
        for (int k = 0; k < n; k++)
            s += a[i * n + k] * b[k * n + j];
        c[i * n + j] = s;
    }
}

__global__ void bias_relu(float *x, const float *bias, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * n) {
        float v = x[i] + bias[i % n];
        x[i] = v > 0 ? v : 0;
    }
}

__global__ void sgd(float *w, const float *g, float lr, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * n)
        w[i] -= lr * g[i] * 1e-6f;
}

namespace demo {
// y = a * y over a vector, staged through dynamic shared memory.
template <typename T>
__global__ void scale(T *y, T a, int len)
{
    extern __shared__ unsigned char smem[];
    T *buf = reinterpret_cast<T *>(smem);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len) {
        buf[threadIdx.x] = y[i];
        y[i] = a * buf[threadIdx.x];
    }
}
} // namespace demo

int main(int argc, char **argv)
{
    const int n = 1024, side_len = 1 << 16;
    int steps = argc > 1 ? atoi(argv[1]) : 12;
    if (steps < 1)
        steps = 1;
    size_t bytes = sizeof(float) * n * n;
    float *h = (float *)malloc(bytes), *x, *w, *y, *bias, *z;
    for (int i = 0; i < n * n; i++)
        h[i] = (float)(i % 17) / 17.0f;
    cudaStream_t side;
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    cudaMalloc(&x, bytes);
    cudaMalloc(&w, bytes);
    cudaMalloc(&y, bytes);
    cudaMalloc(&bias, sizeof(float) * n);
    cudaMalloc(&z, sizeof(float) * side_len);
    cudaMemcpy(w, h, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(z, h, sizeof(float) * side_len, cudaMemcpyHostToDevice);
    cudaMemset(y, 0, bytes);
    cudaMemset(bias, 0, sizeof(float) * n);
    printf("demo_gpu: %d launches per step\n", LAUNCHES_PER_STEP);
    dim3 blk(16, 16), grd((n + 15) / 16, (n + 15) / 16);
    double sum = 0;
    for (int s = 0; s < steps; s++) {
        nvtxRangePushA("step");
        cudaMemcpy(x, h, bytes, cudaMemcpyHostToDevice);
        nvtxRangePushA("forward");
        matmul<<<grd, blk>>>(x, w, y, n);
        bias_relu<<<(n * n + 255) / 256, 256>>>(y, bias, n);
        nvtxRangePop();
        nvtxRangePushA("backward+update");
        matmul<<<grd, blk>>>(y, w, x, n);
        sgd<<<(n * n + 255) / 256, 256>>>(w, x, 0.01f, n);
        nvtxRangePop();
        demo::scale<float><<<side_len / 128, 128, 128 * sizeof(float), side>>>(z, 0.5f, side_len);
        cudaStreamSynchronize(side);
        float probe;
        cudaMemcpy(&probe, y, sizeof probe, cudaMemcpyDeviceToHost);
        sum += probe;
        nvtxRangePop();
    }
    cudaDeviceSynchronize();
    printf("demo_gpu: %d steps, checksum %.3f\n", steps, sum);
    cudaFree(x); cudaFree(w); cudaFree(y); cudaFree(bias); cudaFree(z);
    cudaStreamDestroy(side);
    free(h);
    return 0;
}
