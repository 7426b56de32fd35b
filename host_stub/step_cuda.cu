/*
 * step_cuda.cu — the host's CUDA kernels of a device-resident step
 * (step_cuda.h): the batch draw, the loss and dout, the gradient check, the
 * verdict and Adam. All arithmetic is step_canon.h's, the same functions the
 * host path calls, so the bits are the same; every reduction is a fixed tree
 * in shared memory or one thread's loop, never an atomic.
 */
#include <cuda_runtime.h>

#include "step_cuda.h"

/* ------------------------------------------------------------------------- */
/* The batch draw                                                            */

/* One block per sample of the batch: all threads compute the same index.
 * Row b holds global slot slot0 + b (a data-parallel rank's shard). */
__global__ void gather_kernel(const float *__restrict__ buf_x, const float *__restrict__ buf_t,
                              uint64_t key, int log2n, const ath_scalars_t *__restrict__ sc,
                              uint32_t slot0, int32_t enc, int32_t aux, float *__restrict__ x,
                              float *__restrict__ target)
{
    const uint32_t b = blockIdx.x;
    const size_t i = ath_replay_index(key, sc->step + 1, slot0 + b, log2n);
    for (int32_t k = threadIdx.x; k < enc; k += blockDim.x)
        x[(size_t)b * enc + k] = buf_x[i * enc + k];
    for (int32_t j = threadIdx.x; j < aux; j += blockDim.x)
        target[(size_t)b * aux + j] = buf_t[i * aux + j];
}

/* ------------------------------------------------------------------------- */
/* The loss                                                                  */

/* The canon's tree over q [0, len) in shared memory, by the block's threads
 * (blockDim.x == ATH_CUDA_SEGMENT). Level s: node i (a multiple of 2s)
 * absorbs i + s; i + s is never written at that level, so one barrier per
 * level orders everything. */
__device__ void tree_in_block(float *q, uint32_t len)
{
    for (uint32_t s = 1; s < len; s *= 2) {
        const uint32_t i = threadIdx.x;
        if (i % (2 * s) == 0)
            ath_tree_node(q, len, s, i);
        __syncthreads();
    }
}

/* Segment blockIdx.x: elements [seg·SEGMENT, min(n, (seg+1)·SEGMENT)). */
/* dout is divided by n_total (n for one device; B·AUX of the global batch
 * for a data-parallel rank's n elements). */
__global__ void loss_kernel(const float *__restrict__ out, const float *__restrict__ target,
                            uint32_t n, uint32_t n_total, float *__restrict__ dout,
                            float *__restrict__ part)
{
    __shared__ float q[ATH_CUDA_SEGMENT];
    const size_t base = (size_t)blockIdx.x * ATH_CUDA_SEGMENT;
    const uint32_t len = (uint32_t)min((size_t)ATH_CUDA_SEGMENT, (size_t)n - base);
    const float nf = (float)n_total;
    const uint32_t t = threadIdx.x;
    if (t < len)
        q[t] = ath_loss_elem(out[base + t], target[base + t], nf, &dout[base + t]);
    __syncthreads();
    tree_in_block(q, len);
    if (t == 0)
        part[blockIdx.x] = q[0];
}

/* ------------------------------------------------------------------------- */
/* The finite check, the verdict                                             */

__global__ void check_kernel(const float *__restrict__ grads, size_t n, uint32_t *__restrict__ bad)
{
    int mine = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        mine |= !ath_finite(grads[i]);
    const int any = __syncthreads_or(mine);
    if (threadIdx.x == 0)
        bad[blockIdx.x] = (uint32_t)any;
}

/* By one block of ATH_CUDA_SEGMENT threads: the segment sums are the tree's
 * nodes at level log2(SEGMENT); reducing them in aligned groups of SEGMENT,
 * level after level, walks the rest of the same tree, into part[0]. Group
 * g's sum goes to part[g], an index of a group already read. */
__device__ void reduce_parts(float *part, uint32_t n_part)
{
    __shared__ float q[ATH_CUDA_SEGMENT];
    const uint32_t t = threadIdx.x;
    for (uint32_t np = n_part; np > 1; np = (np + ATH_CUDA_SEGMENT - 1) / ATH_CUDA_SEGMENT) {
        for (uint32_t g = 0; g * ATH_CUDA_SEGMENT < np; g++) {
            const uint32_t base = g * ATH_CUDA_SEGMENT;
            const uint32_t len = min((uint32_t)ATH_CUDA_SEGMENT, np - base);
            if (t < len)
                q[t] = part[base + t];
            __syncthreads();
            tree_in_block(q, len);
            if (t == 0)
                part[g] = q[0];
            __syncthreads();
        }
    }
}

__global__ void loss_reduce_kernel(float *part, uint32_t n_part) { reduce_parts(part, n_part); }

__global__ void verdict_kernel(float *part, uint32_t n_part, const uint32_t *__restrict__ bad,
                               uint32_t n, ath_adam_hp_t hp, ath_scalars_t *sc,
                               float *__restrict__ ring, uint32_t ring_n)
{
    const uint32_t t = threadIdx.x;
    reduce_parts(part, n_part);
    const int grads_bad = __syncthreads_or(t < ATH_CUDA_CHECK_BLOCKS && bad[t] != 0);
    if (t == 0) {
        const float loss = ath_loss_of_sum(n_part ? part[0] : 0.0f, (float)n);
        ath_step_verdict(sc, loss, grads_bad, hp);
        ring[(sc->step - 1) % ring_n] = loss;
    }
}

/* ------------------------------------------------------------------------- */
/* Adam                                                                      */

__global__ void adam_kernel(float *__restrict__ p, float *__restrict__ m, float *__restrict__ v,
                            const float *__restrict__ g, size_t n,
                            const ath_scalars_t *__restrict__ sc, ath_adam_hp_t hp)
{
    if (!sc->ok)
        return;
    const float lr_t = sc->lr_t;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        ath_adam_elem(&p[i], &m[i], &v[i], g[i], lr_t, hp);
}

/* ------------------------------------------------------------------------- */
/* Launchers                                                                 */

static unsigned blocks_for(size_t n, unsigned threads, unsigned cap)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

extern "C" int ath_cuda_gather_shard(void *stream, const float *buf_x, const float *buf_t,
                                     uint64_t key, int log2n, const ath_scalars_t *sc,
                                     int32_t slot0, int32_t B, int32_t enc, int32_t aux, float *x,
                                     float *target)
{
    gather_kernel<<<(unsigned)B, 128, 0, (cudaStream_t)stream>>>(
        buf_x, buf_t, key, log2n, sc, (uint32_t)slot0, enc, aux, x, target);
    return (int)cudaGetLastError();
}

extern "C" int ath_cuda_gather(void *stream, const float *buf_x, const float *buf_t, uint64_t key,
                               int log2n, const ath_scalars_t *sc, int32_t B, int32_t enc,
                               int32_t aux, float *x, float *target)
{
    return ath_cuda_gather_shard(stream, buf_x, buf_t, key, log2n, sc, 0, B, enc, aux, x, target);
}

extern "C" int ath_cuda_loss_shard(void *stream, const float *out, const float *target, uint32_t n,
                                   uint32_t n_total, float *dout, float *part)
{
    const unsigned segs = (n + ATH_CUDA_SEGMENT - 1) / ATH_CUDA_SEGMENT;
    loss_kernel<<<segs, ATH_CUDA_SEGMENT, 0, (cudaStream_t)stream>>>(out, target, n, n_total, dout,
                                                                     part);
    return (int)cudaGetLastError();
}

extern "C" int ath_cuda_loss(void *stream, const float *out, const float *target, uint32_t n,
                             float *dout, float *part)
{
    return ath_cuda_loss_shard(stream, out, target, n, n, dout, part);
}

extern "C" int ath_cuda_loss_reduce(void *stream, float *part, uint32_t n_part)
{
    loss_reduce_kernel<<<1, ATH_CUDA_SEGMENT, 0, (cudaStream_t)stream>>>(part, n_part);
    return (int)cudaGetLastError();
}

extern "C" int ath_cuda_check(void *stream, const float *grads, size_t n_params, uint32_t *bad)
{
    check_kernel<<<ATH_CUDA_CHECK_BLOCKS, 256, 0, (cudaStream_t)stream>>>(grads, n_params, bad);
    return (int)cudaGetLastError();
}

extern "C" int ath_cuda_verdict(void *stream, float *part, uint32_t n_part, const uint32_t *bad,
                                uint32_t n, ath_adam_hp_t hp, ath_scalars_t *sc, float *ring,
                                uint32_t ring_n)
{
    verdict_kernel<<<1, ATH_CUDA_SEGMENT, 0, (cudaStream_t)stream>>>(part, n_part, bad, n, hp, sc,
                                                                     ring, ring_n);
    return (int)cudaGetLastError();
}

extern "C" int ath_cuda_adam(void *stream, float *params, float *m, float *v, const float *grads,
                             size_t n_params, const ath_scalars_t *sc, ath_adam_hp_t hp)
{
    adam_kernel<<<blocks_for(n_params, 256, 1024), 256, 0, (cudaStream_t)stream>>>(
        params, m, v, grads, n_params, sc, hp);
    return (int)cudaGetLastError();
}

extern "C" const char *ath_cuda_error_text(int code)
{
    return cudaGetErrorString((cudaError_t)code);
}
