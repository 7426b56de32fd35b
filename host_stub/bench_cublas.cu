/*
 * bench_cublas.cu — see bench_cublas.h. Row-major matrices are handed to
 * column-major cuBLAS as their transposes:
 *   forward  out[B,N] = a[B,K]·W[K,N]    → Sgemm(N, N, m=N, n=B, k=K, W, a)
 *   hidden   d[B,K]  = g[B,N]·W[K,N]ᵀ   → Sgemm(T, N, m=K, n=B, k=N, W, g)
 *   weights  dW[K,N] = a[B,K]ᵀ·g[B,N]   → Sgemm(N, T, m=N, n=K, k=B, g, a)
 */
#include "bench_cublas.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace {

/* ------------------------------------------------------- custom kernels -- */

__global__ void bias_elu_kernel(float *y, const float *bias, int rows, int n, int elu)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * n)
        return;
    float v = y[i] + bias[i % n];
    y[i] = (elu && v <= 0.0f) ? expm1f(v) : v;
}

__global__ void elu_grad_kernel(float *d, const float *y, size_t count)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count && y[i] <= 0.0f)
        d[i] *= 1.0f + y[i];
}

struct Bufs {
    float *w[3], *b[3], *dw[3], *db[3];
    float *x, *h1, *h2, *out, *dout, *dh2, *dh1;
    float *ones; /* [B] of 1.0f: bias gradients as gᵀ·1 (Sgemv) */
};

#define TRY(call)                                                                            \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            snprintf(err, err_len, "%s:%d: %s", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            goto fail;                                                                       \
        }                                                                                    \
    } while (0)
#define TRYB(call)                                                                          \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                  \
            snprintf(err, err_len, "%s:%d: cuBLAS status %d", __FILE__, __LINE__, (int)s_); \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

unsigned blocks(size_t n) { return (unsigned)((n + 255) / 256); }

cublasStatus_t fwd_layer(cublasHandle_t h, const float *a, const float *w, float *y, int B, int K,
                         int N)
{
    const float one = 1.0f, zero = 0.0f;
    return cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, B, K, &one, w, N, a, K, &zero, y, N);
}

/* Enqueues one forward (fwd) or backward (!fwd) pass. */
int enqueue(cublasHandle_t h, cudaStream_t s, const Bufs &m, int enc, int h1, int h2, int aux,
            int B, bool fwd)
{
    const float one = 1.0f, zero = 0.0f;
    if (fwd) {
        if (fwd_layer(h, m.x, m.w[0], m.h1, B, enc, h1))
            return -1;
        bias_elu_kernel<<<blocks((size_t)B * h1), 256, 0, s>>>(m.h1, m.b[0], B, h1, 1);
        if (fwd_layer(h, m.h1, m.w[1], m.h2, B, h1, h2))
            return -1;
        bias_elu_kernel<<<blocks((size_t)B * h2), 256, 0, s>>>(m.h2, m.b[1], B, h2, 1);
        if (fwd_layer(h, m.h2, m.w[2], m.out, B, h2, aux))
            return -1;
        bias_elu_kernel<<<blocks((size_t)B * aux), 256, 0, s>>>(m.out, m.b[2], B, aux, 0);
    } else {
        if (cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, h2, B, aux, &one, m.w[2], aux, m.dout, aux,
                        &zero, m.dh2, h2))
            return -1;
        elu_grad_kernel<<<blocks((size_t)B * h2), 256, 0, s>>>(m.dh2, m.h2, (size_t)B * h2);
        if (cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, h1, B, h2, &one, m.w[1], h2, m.dh2, h2, &zero,
                        m.dh1, h1))
            return -1;
        elu_grad_kernel<<<blocks((size_t)B * h1), 256, 0, s>>>(m.dh1, m.h1, (size_t)B * h1);
        if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, aux, h2, B, &one, m.dout, aux, m.h2, h2, &zero,
                        m.dw[2], aux) ||
            cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, h2, h1, B, &one, m.dh2, h2, m.h1, h1, &zero,
                        m.dw[1], h2) ||
            cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, h1, enc, B, &one, m.dh1, h1, m.x, enc, &zero,
                        m.dw[0], h1))
            return -1;
        if (cublasSgemv(h, CUBLAS_OP_N, aux, B, &one, m.dout, aux, m.ones, 1, &zero, m.db[2], 1) ||
            cublasSgemv(h, CUBLAS_OP_N, h2, B, &one, m.dh2, h2, m.ones, 1, &zero, m.db[1], 1) ||
            cublasSgemv(h, CUBLAS_OP_N, h1, B, &one, m.dh1, h1, m.ones, 1, &zero, m.db[0], 1))
            return -1;
    }
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

__global__ void ones_kernel(float *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = 1.0f;
}

__global__ void fill_kernel(float *p, size_t n, unsigned seed, float scale)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = (unsigned)i * 2654435761u ^ seed;
        v ^= v >> 15;
        v *= 2246822519u;
        v ^= v >> 13;
        p[i] = scale * ((float)(v & 0xFFFFFF) / 16777216.0f - 0.5f);
    }
}

double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : (double)v[v.size() / 2];
}

} /* namespace */

extern "C" int bench_cublas_run(int enc, int h1, int h2, int aux, int B, int warmup, int iters,
                                int tf32, bench_cublas_result_t *res, char *err, int err_len)
{
    Bufs m = {};
    cublasHandle_t h = nullptr;
    cudaStream_t s = nullptr;
    cudaGraph_t g[3] = {};
    cudaGraphExec_t ge[3] = {};
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    int rc = -1;
    const int ins[3] = {enc, h1, h2}, outs[3] = {h1, h2, aux};
    float **all[] = {&m.x, &m.h1, &m.h2, &m.out, &m.dout, &m.dh2, &m.dh1};
    const size_t cnt[] = {(size_t)B * enc, (size_t)B * h1, (size_t)B * h2, (size_t)B * aux,
                          (size_t)B * aux, (size_t)B * h2, (size_t)B * h1};
    double *slot[3] = {&res->fwd_us, &res->bwd_us, &res->step_us};

    TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    TRYB(cublasCreate(&h));
    TRYB(cublasSetStream(h, s));
    TRYB(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    for (int l = 0; l < 3; l++) {
        size_t nw = (size_t)ins[l] * outs[l];
        TRY(cudaMalloc(&m.w[l], nw * sizeof(float)));
        TRY(cudaMalloc(&m.dw[l], nw * sizeof(float)));
        TRY(cudaMalloc(&m.b[l], outs[l] * sizeof(float)));
        TRY(cudaMalloc(&m.db[l], outs[l] * sizeof(float)));
        fill_kernel<<<blocks(nw), 256, 0, s>>>(m.w[l], nw, 11u + l, 0.2f);
        fill_kernel<<<blocks(outs[l]), 256, 0, s>>>(m.b[l], outs[l], 21u + l, 0.2f);
    }
    for (int i = 0; i < 7; i++) {
        TRY(cudaMalloc(all[i], cnt[i] * sizeof(float)));
        fill_kernel<<<blocks(cnt[i]), 256, 0, s>>>(*all[i], cnt[i], 31u + i, 2.0f);
    }
    TRY(cudaMalloc(&m.ones, (size_t)B * sizeof(float)));
    ones_kernel<<<blocks(B), 256, 0, s>>>(m.ones, B);
    TRY(cudaGetLastError());

    /* Graphs: 0 = forward, 1 = backward, 2 = both. */
    for (int k = 0; k < 3; k++) {
        TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        int bad = 0;
        if (k != 1)
            bad |= enqueue(h, s, m, enc, h1, h2, aux, B, true);
        if (k != 0)
            bad |= enqueue(h, s, m, enc, h1, h2, aux, B, false);
        cudaError_t ce = cudaStreamEndCapture(s, &g[k]);
        if (bad) {
            snprintf(err, err_len, "cuBLAS enqueue failed during capture");
            goto fail;
        }
        TRY(ce);
        TRY(cudaGraphInstantiate(&ge[k], g[k], 0));
    }
    TRY(cudaEventCreate(&e0));
    TRY(cudaEventCreate(&e1));
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < warmup; i++)
            TRY(cudaGraphLaunch(ge[k], s));
        std::vector<float> t;
        for (int i = 0; i < iters; i++) {
            float ms = 0.0f;
            TRY(cudaEventRecord(e0, s));
            TRY(cudaGraphLaunch(ge[k], s));
            TRY(cudaEventRecord(e1, s));
            TRY(cudaEventSynchronize(e1));
            TRY(cudaEventElapsedTime(&ms, e0, e1));
            t.push_back(ms * 1000.0f);
        }
        *slot[k] = median(t);
    }
    rc = 0;
fail:
    if (s)
        cudaStreamSynchronize(s);
    for (int k = 0; k < 3; k++) {
        if (ge[k])
            cudaGraphExecDestroy(ge[k]);
        if (g[k])
            cudaGraphDestroy(g[k]);
    }
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    for (int l = 0; l < 3; l++) {
        cudaFree(m.w[l]);
        cudaFree(m.dw[l]);
        cudaFree(m.b[l]);
        cudaFree(m.db[l]);
    }
    for (int i = 0; i < 7; i++)
        cudaFree(*all[i]);
    cudaFree(m.ones);
    if (h)
        cublasDestroy(h);
    if (s)
        cudaStreamDestroy(s);
    return rc;
}
