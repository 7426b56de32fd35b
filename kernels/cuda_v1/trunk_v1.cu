/*
 * trunk_v1.cu — CUDA kernel version 1 (see trunk_v1.h): the reference GPU
 * design, written so that each kernel can be read side by side with the
 * canonical order of abi/auxtrunk_canon.h.
 *
 * How the canonical order is kept:
 *   - Dot products over a layer's width (sections 1 and 2): one thread owns
 *     one output element and walks the reduction index in ascending order,
 *     one fmaf per step, from the canonical start value (bias or 0). Shared
 *     memory tiles only decide where an operand is read from, never the order
 *     of the chain. A tile's tail is cut by an exact loop bound, never padded
 *     with zeros: fmaf(0, 0, -0.0f) is +0, and 0 * Inf is NaN.
 *   - Batch sums (section 3): one block per output element; thread i forms the
 *     partial of chunk i (AUXTRUNK_CANON_CHUNK samples, ascending) into shared
 *     memory, then the block combines the partials by the canonical pairwise
 *     tree, one level per barrier. Accumulate mode adds the finished sum to
 *     the old value with one addition.
 * The element-wise parts (ELU, ELU') are the auxtrunk_canon_* functions
 * themselves. The build compiles with -fmad=false, so no a*b+c outside an
 * explicit fmaf is ever contracted.
 *
 * No atomics anywhere; shared memory only holds tiles and chunk partials
 * (at most ceil(B / AUXTRUNK_CANON_CHUNK) floats per block).
 */
#include "trunk_v1.h"

#include "auxtrunk_canon.h"

namespace {

constexpr int TILE = 16;                    /* tiles are TILE x TILE; blocks TILE x TILE threads */
constexpr int CHUNK = AUXTRUNK_CANON_CHUNK; /* samples per batch-sum chunk */
constexpr int REDUCE_THREADS_MAX = 256;
constexpr int MAX_GRID_Y = 65535;
constexpr int MAX_SHARED_DEFAULT = 48 * 1024; /* dynamic shared memory without opt-in */

/* ---------------------------------------------------------------- forward -- */

/* y[b, n] = act(c[n] + Σ_k a[b, k]·w[k, n]), section 1. Block: TILE samples x
 * TILE units; thread (tx, ty) owns y[b0 + ty, n0 + tx]. */
template <bool ELU>
__global__ void layer_forward_kernel(const float *__restrict__ a, const float *__restrict__ w,
                                     const float *__restrict__ c, int B, int K, int N,
                                     float *__restrict__ y)
{
    __shared__ float as[TILE][TILE]; /* as[r][i] = a[b0 + r, k0 + i] */
    __shared__ float ws[TILE][TILE]; /* ws[i][j] = w[k0 + i, n0 + j] */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int b = blockIdx.x * TILE + ty;
    const int n = blockIdx.y * TILE + tx;
    const bool mine = b < B && n < N;

    float acc = mine ? c[n] : 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int kt = min(TILE, K - k0);
        if (b < B && tx < kt)
            as[ty][tx] = a[(size_t)b * K + k0 + tx];
        if (ty < kt && n < N)
            ws[ty][tx] = w[(size_t)(k0 + ty) * N + n];
        __syncthreads(); /* the tile is complete */
        if (mine)
            for (int i = 0; i < kt; i++)
                acc = fmaf(as[ty][i], ws[i][tx], acc);
        __syncthreads(); /* everyone is done with the tile before it is overwritten */
    }
    if (mine)
        y[(size_t)b * N + n] = ELU ? auxtrunk_canon_elu(acc) : acc;
}

/* --------------------------------------------------------------- backward -- */

/* dpre[b, k] = ELU'(y[b, k]) · Σ_n d[b, n]·w[k, n] for the block's TILE
 * samples b0.., all k (section 2). Thread (tx, ty) owns sample b0 + ty and, in
 * turn, units k0 + tx. d is not __restrict__: dh_pre reads back dh2 rows that
 * this block wrote, which must not go through the read-only cache. */
__device__ void hidden_grad_rows(const float *d, const float *__restrict__ w,
                                 const float *__restrict__ y, int B, int K, int N, int b0,
                                 float *dpre)
{
    __shared__ float ds[TILE][TILE];     /* ds[r][i] = d[b0 + r, n0 + i] */
    __shared__ float ws[TILE][TILE + 1]; /* ws[j][i] = w[k0 + j, n0 + i]; +1: read by column */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int b = b0 + ty;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int k = k0 + tx;
        const bool mine = b < B && k < K;
        float acc = 0.0f;
        for (int n0 = 0; n0 < N; n0 += TILE) {
            const int nt = min(TILE, N - n0);
            if (b < B && tx < nt)
                ds[ty][tx] = d[(size_t)b * N + n0 + tx];
            if (k0 + ty < K && tx < nt)
                ws[ty][tx] = w[(size_t)(k0 + ty) * N + n0 + tx];
            __syncthreads(); /* the tiles are complete */
            if (mine)
                for (int i = 0; i < nt; i++)
                    acc = fmaf(ds[ty][i], ws[tx][i], acc);
            __syncthreads(); /* everyone is done with the tiles */
        }
        if (mine)
            dpre[(size_t)b * K + k] = auxtrunk_canon_elu_grad(acc, y[(size_t)b * K + k]);
    }
}

/* Per sample: dh2_pre from dout, then dh1_pre from dh2_pre. One block owns
 * TILE samples, so the dh2 rows layer 2 needs are the ones it just wrote. */
__global__ void dh_pre_kernel(const float *__restrict__ w2, const float *__restrict__ w3,
                              const float *__restrict__ h1, const float *__restrict__ h2,
                              const float *__restrict__ dout, int B, int H1, int H2, int AUX,
                              float *dh2, float *dh1)
{
    const int b0 = blockIdx.x * TILE;
    hidden_grad_rows(dout, w3, h2, B, H2, AUX, b0, dh2);
    /* The block's dh2 rows are written by all of its threads; the barrier
     * makes those global writes visible to the whole block. */
    __syncthreads();
    hidden_grad_rows(dh2, w2, h1, B, H1, H2, b0, dh1);
}

/* The canonical pairwise tree over q[0..nc-1] (section 3), one level per
 * barrier: at level s, q[i] += q[i + s] for every i that is a multiple of 2s
 * with i + s < nc. Within a level the written q[i] and the read q[i + s] are
 * disjoint sets, so there is no race. Returns q[0] to every thread. */
__device__ float batch_tree(float *q, int nc)
{
    __syncthreads(); /* all chunk partials are in q */
    for (int s = 1; s < nc; s *= 2) {
        for (int i = 2 * s * threadIdx.x; i + s < nc; i += 2 * s * blockDim.x)
            q[i] = q[i] + q[i + s];
        __syncthreads(); /* level s is complete before level 2s reads it */
    }
    return q[0];
}

/* dw[k, n] = Σ_b a[b, k]·g[b, n]: one block per output element (blockIdx.x =
 * k * N + n). q: nc floats of dynamic shared memory. */
__global__ void dw_reduce_kernel(const float *__restrict__ a, const float *__restrict__ g, int B,
                                 int K, int N, int accumulate, float *__restrict__ dw)
{
    extern __shared__ float q[];
    const int e = blockIdx.x;
    const int k = e / N, n = e % N;
    const int nc = auxtrunk_canon_chunks(B);
    for (int i = threadIdx.x; i < nc; i += blockDim.x) {
        const int end = min(B, (i + 1) * CHUNK);
        float p = 0.0f;
        for (int b = i * CHUNK; b < end; b++)
            p = fmaf(a[(size_t)b * K + k], g[(size_t)b * N + n], p);
        q[i] = p;
    }
    const float r = batch_tree(q, nc);
    if (threadIdx.x == 0)
        dw[e] = accumulate ? dw[e] + r : r;
}

/* db[n] = Σ_b g[b, n]: one block per output element (blockIdx.x = n). */
__global__ void db_reduce_kernel(const float *__restrict__ g, int B, int N, int accumulate,
                                 float *__restrict__ db)
{
    extern __shared__ float q[];
    const int n = blockIdx.x;
    const int nc = auxtrunk_canon_chunks(B);
    for (int i = threadIdx.x; i < nc; i += blockDim.x) {
        const int end = min(B, (i + 1) * CHUNK);
        float p = 0.0f;
        for (int b = i * CHUNK; b < end; b++)
            p = p + g[(size_t)b * N + n];
        q[i] = p;
    }
    const float r = batch_tree(q, nc);
    if (threadIdx.x == 0)
        db[n] = accumulate ? db[n] + r : r;
}

/* Threads for a batch-sum block: one per chunk up to REDUCE_THREADS_MAX (a
 * power of two, at least a warp); more chunks are looped over. */
int reduce_threads(int nc)
{
    int t = 32;
    while (t < nc && t < REDUCE_THREADS_MAX)
        t *= 2;
    return t;
}

} /* namespace */

/* --------------------------------------------------------------- launchers -- */

/* A launcher's launch assumptions: if one does not hold, nothing is launched. */
#define V1_REQUIRE(cond)                  \
    do {                                  \
        if (!(cond))                      \
            return cudaErrorInvalidValue; \
    } while (0)

/* Returns the first error of a sequence of launchers. */
#define V1_TRY(call)               \
    do {                           \
        cudaError_t err_ = (call); \
        if (err_ != cudaSuccess)   \
            return err_;           \
    } while (0)

cudaError_t v1_layer_forward(const float *a, const float *w, const float *c, int batch, int k,
                             int n, int elu, float *y, cudaStream_t stream)
{
    V1_REQUIRE(a && w && c && y);
    V1_REQUIRE(batch >= 1 && k >= 1 && n >= 1);
    V1_REQUIRE((n + TILE - 1) / TILE <= MAX_GRID_Y);
    const dim3 grid((unsigned)((batch + TILE - 1) / TILE), (unsigned)((n + TILE - 1) / TILE));
    const dim3 block(TILE, TILE);
    if (elu)
        layer_forward_kernel<true><<<grid, block, 0, stream>>>(a, w, c, batch, k, n, y);
    else
        layer_forward_kernel<false><<<grid, block, 0, stream>>>(a, w, c, batch, k, n, y);
    return cudaGetLastError();
}

cudaError_t v1_dh_pre(atk_dims_t d, const float *w2, const float *w3, const float *h1,
                      const float *h2, const float *dout, int batch, float *dh2, float *dh1,
                      cudaStream_t stream)
{
    V1_REQUIRE(w2 && w3 && h1 && h2 && dout && dh2 && dh1);
    V1_REQUIRE(batch >= 1 && d.h1 >= 1 && d.h2 >= 1 && d.aux >= 1);
    const dim3 grid((unsigned)((batch + TILE - 1) / TILE));
    const dim3 block(TILE, TILE);
    dh_pre_kernel<<<grid, block, 0, stream>>>(w2, w3, h1, h2, dout, batch, d.h1, d.h2, d.aux, dh2,
                                              dh1);
    return cudaGetLastError();
}

cudaError_t v1_dw_reduce(const float *a, const float *g, int batch, int k, int n, int accumulate,
                         float *dw, cudaStream_t stream)
{
    V1_REQUIRE(a && g && dw);
    V1_REQUIRE(batch >= 1 && k >= 1 && n >= 1);
    V1_REQUIRE((long long)k * n <= 0x7fffffffLL); /* one block per element, grid.x */
    const int nc = auxtrunk_canon_chunks(batch);
    const size_t shared = (size_t)nc * sizeof(float);
    V1_REQUIRE(shared <= MAX_SHARED_DEFAULT);
    dw_reduce_kernel<<<(unsigned)(k * n), reduce_threads(nc), shared, stream>>>(a, g, batch, k, n,
                                                                                accumulate, dw);
    return cudaGetLastError();
}

cudaError_t v1_db_reduce(const float *g, int batch, int n, int accumulate, float *db,
                         cudaStream_t stream)
{
    V1_REQUIRE(g && db);
    V1_REQUIRE(batch >= 1 && n >= 1);
    const int nc = auxtrunk_canon_chunks(batch);
    const size_t shared = (size_t)nc * sizeof(float);
    V1_REQUIRE(shared <= MAX_SHARED_DEFAULT);
    db_reduce_kernel<<<(unsigned)n, reduce_threads(nc), shared, stream>>>(g, batch, n, accumulate,
                                                                          db);
    return cudaGetLastError();
}

cudaError_t v1_prepare(void)
{
    const void *const kernels[] = {
        (const void *)layer_forward_kernel<true>,
        (const void *)layer_forward_kernel<false>,
        (const void *)dh_pre_kernel,
        (const void *)dw_reduce_kernel,
        (const void *)db_reduce_kernel,
    };
    for (const void *k : kernels) {
        cudaFuncAttributes a;
        V1_TRY(cudaFuncGetAttributes(&a, k));
    }
    return cudaSuccess;
}

cudaError_t v1_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch, float *h1,
                       float *h2, float *out, cudaStream_t stream)
{
    V1_REQUIRE(p);
    V1_TRY(v1_layer_forward(x, p->w1, p->b1, batch, d.enc, d.h1, 1, h1, stream));
    V1_TRY(v1_layer_forward(h1, p->w2, p->b2, batch, d.h1, d.h2, 1, h2, stream));
    return v1_layer_forward(h2, p->w3, p->b3, batch, d.h2, d.aux, 0, out, stream);
}

size_t v1_workspace_floats(atk_dims_t d, int max_batch)
{
    return (size_t)max_batch * ((size_t)d.h2 + (size_t)d.h1);
}

cudaError_t v1_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                        const float *h2, const float *dout, int batch, const atk_grads_t *g,
                        int accumulate, float *workspace, cudaStream_t stream)
{
    V1_REQUIRE(p && g && workspace);
    float *const dh2 = workspace;
    float *const dh1 = dh2 + (size_t)batch * d.h2;
    V1_TRY(v1_dh_pre(d, p->w2, p->w3, h1, h2, dout, batch, dh2, dh1, stream));
    V1_TRY(v1_dw_reduce(h2, dout, batch, d.h2, d.aux, accumulate, g->dw3, stream));
    V1_TRY(v1_db_reduce(dout, batch, d.aux, accumulate, g->db3, stream));
    V1_TRY(v1_dw_reduce(h1, dh2, batch, d.h1, d.h2, accumulate, g->dw2, stream));
    V1_TRY(v1_db_reduce(dh2, batch, d.h2, accumulate, g->db2, stream));
    V1_TRY(v1_dw_reduce(x, dh1, batch, d.enc, d.h1, accumulate, g->dw1, stream));
    return v1_db_reduce(dh1, batch, d.h1, accumulate, g->db1, stream);
}
