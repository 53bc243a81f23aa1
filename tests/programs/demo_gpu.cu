// demo_gpu.cu - the `make demo` training loop on a real GPU: a small MLP-like
// loop (matmul, bias+relu, an SGD update) with NVTX "step" ranges, so the
// default TRAINPROF_STEP_ON=api,nvtx:step counts steps.  Built with
// -cudart shared so that the runtime wrappers see its launches.
#include <cstdio>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

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

int main()
{
    const int n = 1024, steps = 12;
    size_t bytes = sizeof(float) * n * n;
    float *h = (float *)malloc(bytes), *x, *w, *y, *bias;
    for (int i = 0; i < n * n; i++)
        h[i] = (float)(i % 17) / 17.0f;
    cudaMalloc(&x, bytes);
    cudaMalloc(&w, bytes);
    cudaMalloc(&y, bytes);
    cudaMalloc(&bias, sizeof(float) * n);
    cudaMemcpy(w, h, bytes, cudaMemcpyHostToDevice);
    cudaMemset(bias, 0, sizeof(float) * n);
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
        float probe;
        cudaMemcpy(&probe, y, sizeof probe, cudaMemcpyDeviceToHost);
        sum += probe;
        nvtxRangePop();
    }
    cudaDeviceSynchronize();
    printf("demo_gpu: %d steps, checksum %.3f\n", steps, sum);
    cudaFree(x); cudaFree(w); cudaFree(y); cudaFree(bias);
    free(h);
    return 0;
}
