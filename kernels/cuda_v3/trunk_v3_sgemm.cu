/*
 * trunk_v3_sgemm.cu — cuda-v3's exact large-batch path (see trunk_v3_sgemm.h).
 *
 * One tile routine serves every GEMM: C[m, n] = epilogue(chain over k of
 * A[m, k] · B[k, n]) for a 128 x 128 block of C, k ascending from k_begin to
 * k_end with an exact loop bound (never zero padding: fmaf(0, 0, -0.0f)
 * would turn -0 into +0). Tiling only decides which thread owns an element,
 * never the order of its sum, so the result is the canonical chain.
 *
 * Shared memory holds, per stage, one slab of BK reduction steps of each
 * operand, reduction-major: As[k][m], Bs[k][n], rows of 128 + 4 floats.
 * Operand forms:
 *   A row-major (a[m * lda + k]: the forward's and the hidden gradients'
 *     activations): each thread loads two 16-byte pieces (rows (l >> 1) +
 *     16 (w >> 1) and 64 further, k-piece (l & 1) + 2 (w & 1)) into
 *     registers one slab ahead and stores them transposed, four 4-byte
 *     stores each, after the current slab's FMAs. A warp reads whole 32-byte
 *     sectors (16 rows x 2 pieces), and its stores of one k hit 32 distinct
 *     banks (16 rows, and the other piece 16 banks further: 132 ≡ 4 mod 32).
 *   A reduction-major (a[k * lda + m]: the weight gradients' activations, k
 *     = sample) and B (b[k * ldb + n]: weights, transposed weights, or the
 *     weight gradients' output gradients): cp.async, a warp one 512-byte
 *     row piece of a slab.
 * Fragments: a thread of warp w, lane l owns rows (w >> 1) 32 + (l >> 3) 4
 * + {0..3, 16..19} and columns (w & 1) 64 + (l & 7) 4 + {0..3, 32..35}; per
 * step it loads two 16-byte words of As (4 distinct per warp, one per
 * quarter-warp: 2 shared-memory clocks each) and two of Bs (8 distinct per
 * quarter-warp: 4 clocks each; docs/floors-h200.md, "by the warp's address
 * pattern"): 12 clocks per 64 FMAs (16 issue clocks of 4 schedulers).
 *
 * No atomics, no host synchronisation, no allocation: capture-friendly.
 */
#include "trunk_v3_sgemm.h"

#include <stdint.h>

#include "auxtrunk_canon.h"
#include "trunk_v2.h"
#include "trunk_v2_async.cuh"
#include "trunk_v2_gemm.cuh"
#include "trunk_v2_pdl.cuh"

namespace {

constexpr int BM = 128, BN = 128; /* tile */
constexpr int BK = 16;            /* reduction steps per slab */
constexpr int NT = 256;           /* threads per block: 8 x 8 outputs each */
constexpr int LD = 128 + 4;       /* row stride of a slab, floats */
constexpr int SLAB = BK * LD;     /* floats of one operand's slab */
constexpr int STAGES = 2;
constexpr size_t SMEM = (size_t)STAGES * 2 * SLAB * sizeof(float);
constexpr int CHUNK = AUXTRUNK_CANON_CHUNK;
static_assert(CHUNK % BK == 0, "a chunk is whole slabs but for the batch's last");

enum Epilogue {
    EPI_BIAS = 0,     /* acc starts at bias[n]; store acc              (layer 3) */
    EPI_BIAS_ELU = 1, /* acc starts at bias[n]; store ELU(acc)         (layers 1, 2) */
    EPI_ELU_GRAD = 2, /* acc starts at 0; store acc * ELU'(y[m, n])    (dh_pre) */
    EPI_SUM = 3       /* acc starts at 0; store acc, or old + acc      (chunk partials) */
};

/* One GEMM problem. A is row-major (a[m * lda + k]) for the forward and
 * hidden-gradient launches and reduction-major (a[k * lda + m]) for the
 * weight gradients; B is always b[k * ldb + n]; C and y are [m, n] with
 * row stride ldc. Built by name (trunk_v2_gemm.cuh). */
struct Op : v2gemm::Named<Op> {
    const float *a;
    const float *b;
    float *c;
    const float *bias;
    const float *y;
    int lda, ldb, ldc;
    int m, n;
};

/* The thread's first row and column inside the tile (see the file comment). */
__device__ __forceinline__ int row_base(int tid) { return (tid >> 6) * 32 + ((tid & 31) >> 3) * 4; }
__device__ __forceinline__ int col_base(int tid) { return ((tid >> 5) & 1) * 64 + (tid & 7) * 4; }
/* Fragment element i (0..7) of a run pair: 4 consecutive, then 4 more `gap` on. */
template <int GAP>
__device__ __forceinline__ int run(int i)
{
    return (i & 3) + (i >> 2) * GAP;
}

/* cp.async of a reduction-major operand's slab: steps [k0, k0 + BK) of
 * columns [d0, d0 + 128), p[k * ld + d]. Out-of-range pieces (k >= klim or
 * d >= dlim; every width is a multiple of 4, so a piece is wholly in or
 * out) are zero-filled and never meet a stored output. */
__device__ __forceinline__ void copy_slab(float *s, const float *p, int ld, int d0, int dlim,
                                          int k0, int klim, int tid)
{
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int piece = tid + e * NT;
        const int r = piece >> 5, c = (piece & 31) * 4;
        const bool ok = k0 + r < klim && d0 + c < dlim;
        const float *src = ok ? p + (size_t)(k0 + r) * ld + d0 + c : p;
        v2async::copy16(s + r * LD + c, src, ok ? 16 : 0);
    }
}

/* The row-major A operand's two 16-byte pieces of a slab, into registers. */
struct RowStage {
    float4 v[2];

    __device__ __forceinline__ static int row(int tid, int e)
    {
        return ((tid & 31) >> 1) + 16 * (tid >> 6) + 64 * e;
    }
    __device__ __forceinline__ static int piece(int tid)
    {
        return (tid & 1) + 2 * ((tid >> 5) & 1);
    }
    __device__ __forceinline__ void load(const float *a, int lda, int m0, int mlim, int k0,
                                         int klim, int tid)
    {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int r = row(tid, e), k = k0 + 4 * piece(tid);
            if (m0 + r < mlim && k < klim)
                v[e] = __ldg(reinterpret_cast<const float4 *>(a + (size_t)(m0 + r) * lda + k));
            else
                v[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
    __device__ __forceinline__ void store(float *s, int tid) const
    {
        const int q = 4 * piece(tid);
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int r = row(tid, e);
            s[(q + 0) * LD + r] = v[e].x;
            s[(q + 1) * LD + r] = v[e].y;
            s[(q + 2) * LD + r] = v[e].z;
            s[(q + 3) * LD + r] = v[e].w;
        }
    }
};

__device__ __forceinline__ void frag(float (&f)[8], const float *s, int gap)
{
    const float4 u = *reinterpret_cast<const float4 *>(s);
    const float4 v = *reinterpret_cast<const float4 *>(s + gap);
    f[0] = u.x, f[1] = u.y, f[2] = u.z, f[3] = u.w;
    f[4] = v.x, f[5] = v.y, f[6] = v.z, f[7] = v.w;
}

/* The first kn steps of a slab (all BK unless TAIL), k ascending per
 * accumulator: the canonical chain. The next step's fragments load before
 * this step's FMAs. */
template <bool TAIL>
__device__ __forceinline__ void slab_steps(float (&acc)[8][8], const float *as, const float *bs,
                                           int kn)
{
    float fa[2][8], fb[2][8];
    frag(fa[0], as, 16);
    frag(fb[0], bs, 32);
#pragma unroll
    for (int k = 0; k < BK; k++) {
        if (TAIL && k >= kn)
            break;
        if (k + 1 < BK && (!TAIL || k + 1 < kn)) {
            frag(fa[(k + 1) & 1], as + (k + 1) * LD, 16);
            frag(fb[(k + 1) & 1], bs + (k + 1) * LD, 32);
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[i][j] = fmaf(fa[k & 1][i], fb[k & 1][j], acc[i][j]);
    }
}

/* Stores one run of 4 outputs of row m, columns n..n+3, after the epilogue. */
template <int EPI>
__device__ __forceinline__ void put(const Op &g, int m, int n, const float (&r)[4], bool add_old)
{
    float v[4];
    float *dst = g.c + (size_t)m * g.ldc + n;
    if constexpr (EPI == EPI_BIAS) {
#pragma unroll
        for (int q = 0; q < 4; q++)
            v[q] = r[q];
    } else if constexpr (EPI == EPI_BIAS_ELU) {
#pragma unroll
        for (int q = 0; q < 4; q++)
            v[q] = auxtrunk_canon_elu(r[q]);
    } else if constexpr (EPI == EPI_ELU_GRAD) {
        const float4 y = __ldg(reinterpret_cast<const float4 *>(g.y + (size_t)m * g.ldc + n));
        v[0] = auxtrunk_canon_elu_grad(r[0], y.x);
        v[1] = auxtrunk_canon_elu_grad(r[1], y.y);
        v[2] = auxtrunk_canon_elu_grad(r[2], y.z);
        v[3] = auxtrunk_canon_elu_grad(r[3], y.w);
    } else {
        if (add_old) {
            const float4 o = *reinterpret_cast<const float4 *>(dst);
            v[0] = o.x + r[0], v[1] = o.y + r[1], v[2] = o.z + r[2], v[3] = o.w + r[3];
        } else {
#pragma unroll
            for (int q = 0; q < 4; q++)
                v[q] = r[q];
        }
    }
    *reinterpret_cast<float4 *>(dst) = make_float4(v[0], v[1], v[2], v[3]);
}

/* One 128 x 128 tile at (m0, n0) over reduction steps [kb, ke). A_ROW: A is
 * row-major (transposed on its way in), else reduction-major. add_old
 * (EPI_SUM): the stored value becomes old + acc, old being what this same
 * thread stored there before (the left partial of a pair) or the caller's
 * gradient. */
template <bool A_ROW, int EPI>
__device__ __forceinline__ void tile(const Op &g, int m0, int n0, int kb, int ke, bool add_old,
                                     float *smem)
{
    const int tid = threadIdx.x;
    const int rb = row_base(tid), cb = col_base(tid);
    float acc[8][8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int n = n0 + cb + run<32>(j);
        const float c0 = (EPI == EPI_BIAS || EPI == EPI_BIAS_ELU) && n < g.n ? g.bias[n] : 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[i][j] = c0;
    }
    if constexpr (EPI == EPI_ELU_GRAD) {
        /* y is read only in the epilogue: ask L2 for it now. */
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int m = m0 + rb + run<16>(i);
            if (m < g.m && n0 + cb < g.n)
                asm volatile("prefetch.global.L2 [%0];" ::"l"(g.y + (size_t)m * g.ldc + n0 + cb));
        }
    }
    float *const as0 = smem, *const bs0 = smem + STAGES * SLAB;
    const int ns = (ke - kb + BK - 1) / BK;
    RowStage st;
    /* Slab 0. */
    if constexpr (A_ROW) {
        st.load(g.a, g.lda, m0, g.m, kb, ke, tid);
        st.store(as0, tid);
    } else {
        copy_slab(as0, g.a, g.lda, m0, g.m, kb, ke, tid);
    }
    copy_slab(bs0, g.b, g.ldb, n0, g.n, kb, ke, tid);
    v2async::commit();
    v2async::wait<0>();
    __syncthreads();
#pragma unroll 1
    for (int s = 0; s < ns; s++) {
        const int cur = s & 1;
        const int k0 = kb + s * BK;
        const bool next = s + 1 < ns;
        if (next) {
            if constexpr (A_ROW)
                st.load(g.a, g.lda, m0, g.m, k0 + BK, ke, tid);
            else
                copy_slab(as0 + (cur ^ 1) * SLAB, g.a, g.lda, m0, g.m, k0 + BK, ke, tid);
            copy_slab(bs0 + (cur ^ 1) * SLAB, g.b, g.ldb, n0, g.n, k0 + BK, ke, tid);
            v2async::commit();
        }
        const float *as = as0 + cur * SLAB + rb, *bs = bs0 + cur * SLAB + cb;
        const int kn = ke - k0;
        if (kn >= BK)
            slab_steps<false>(acc, as, bs, BK);
        else
            slab_steps<true>(acc, as, bs, kn);
        if (next) {
            if constexpr (A_ROW)
                st.store(as0 + (cur ^ 1) * SLAB, tid);
            v2async::wait<0>();
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int m = m0 + rb + run<16>(i);
        if (m >= g.m)
            continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int n = n0 + cb + 32 * h;
            if (n < g.n) {
                const float r[4] = {acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2],
                                    acc[i][4 * h + 3]};
                put<EPI>(g, m, n, r, add_old);
            }
        }
    }
}

/* A forward or hidden-gradient launch: one tile per block, grid (n tiles,
 * m tiles), A row-major, reduction [0, k). */
template <int EPI>
__global__ void __launch_bounds__(NT, 2) gemm_kernel(Op g, int k)
{
    extern __shared__ __align__(16) float smem[];
    v2pdl::pdl_wait(); /* A comes from the previous launch (or the caller) */
    v2pdl::pdl_trigger();
    tile<true, EPI>(g, blockIdx.y * BM, blockIdx.x * BN, 0, k, false, smem);
}

/* The weight- and bias-gradient launch of one backward: blockIdx.y is a
 * node of fold chunks (fold y .. fold y + fold - 1; the node written at
 * node_stride * y), blockIdx.x walks the dW tiles of problems 0..2 and then
 * the db column blocks (NT columns each) of problems 0..2. With fold 2 a
 * pair's second chunk adds the first's partial, which the same thread
 * stored (left + right, the tree's first level); with fold 1 the tree does
 * that level. With a single chunk (node_stride == 0) the partial is the
 * gradient, and accumulate adds the caller's. */
struct Grads {
    Op dw[3];
    const float *g[3]; /* db sources [B, db_n] */
    float *db[3];
    int db_n[3];
    int start[7];   /* prefix sums of blocks per problem (dW 0..2, db 0..2) */
    int tiles_n[3]; /* dW tiles along n */
    int batch, nc;
    int fold; /* chunks per block: 1, or 2 (a pair, the tree's first level) */
    size_t node_stride;
    int accumulate;
};

/* Bias-gradient samples loaded ahead per thread. */
constexpr int DB_AHEAD = 16;

__global__ void __launch_bounds__(NT, 2) grads_kernel(Grads G)
{
    extern __shared__ __align__(16) float smem[];
    v2pdl::pdl_wait();
    v2pdl::pdl_trigger();
    const int c0 = G.fold * blockIdx.y, c1 = min(G.nc, c0 + G.fold);
    const bool single = G.node_stride == 0;
    int blk = blockIdx.x;
    if (blk < G.start[3]) {
        const int p = blk >= G.start[2] ? 2 : (blk >= G.start[1] ? 1 : 0);
        blk -= G.start[p];
        Op g = p == 0 ? G.dw[0] : (p == 1 ? G.dw[1] : G.dw[2]);
        g.c += (size_t)blockIdx.y * G.node_stride;
        const int m0 = blk / G.tiles_n[p] * BM, n0 = blk % G.tiles_n[p] * BN;
#pragma unroll 1
        for (int c = c0; c < c1; c++) {
            if (c > c0)
                __syncthreads(); /* every warp is done with the ring */
            const int kb = c * CHUNK, ke = min(G.batch, kb + CHUNK);
            tile<false, EPI_SUM>(g, m0, n0, kb, ke, c > c0 || (single && G.accumulate), smem);
        }
        return;
    }
    const int q = blk >= G.start[5] ? 2 : (blk >= G.start[4] ? 1 : 0);
    const int n = (blk - G.start[3 + q]) * NT + threadIdx.x;
    const int width = G.db_n[q];
    if (n >= width)
        return;
    const float *src = G.g[q];
    float node = 0.0f;
    for (int c = c0; c < c1; c++) {
        const int kb = c * CHUNK, ke = min(G.batch, kb + CHUNK);
        float acc = 0.0f;
        int b = kb;
        /* DB_AHEAD loads in flight, then added in order: p = p + g[b, n]. */
        for (; b + DB_AHEAD <= ke; b += DB_AHEAD) {
            float v[DB_AHEAD];
#pragma unroll
            for (int j = 0; j < DB_AHEAD; j++)
                v[j] = src[(size_t)(b + j) * width + n];
#pragma unroll
            for (int j = 0; j < DB_AHEAD; j++)
                acc = acc + v[j];
        }
        for (; b < ke; b++)
            acc = acc + src[(size_t)b * width + n];
        node = c > c0 ? node + acc : acc;
    }
    float *dst = G.db[q] + (size_t)blockIdx.y * G.node_stride + n;
    *dst = single && G.accumulate ? *dst + node : node;
}

inline int tiles_of(int m, int n) { return ((m + BM - 1) / BM) * ((n + BN - 1) / BN); }

/* Chunks per block of the weight-gradient launch, for nc chunks, `tiles`
 * dW tiles per chunk and `slots` resident blocks on the GPU. Pairs halve the
 * partials the tree reads; single chunks double the blocks, which pays when
 * the pairs' last wave is a short one: single chunks take ceil(tiles nc /
 * slots) waves of one chunk each, pairs ceil(tiles ceil(nc / 2) / slots) of
 * two (B = 16,384 on 132 SMs: 3 against 4). The order of every sum is the
 * canonical one either way. Single chunks only up to V3_SGEMM_SINGLE_MAX
 * chunks, which bounds the workspace (v3_sgemm_workspace_floats). */
inline int grads_fold(int nc, int tiles, int slots)
{
    if (nc <= 1 || nc > V3_SGEMM_SINGLE_MAX || slots <= 0)
        return 2;
    const long long one = ((long long)tiles * nc + slots - 1) / slots;
    const long long two = ((long long)tiles * ((nc + 1) / 2) + slots - 1) / slots;
    return one < 2 * two ? 1 : 2;
}

/* Per device: blocks of grads_kernel resident at once, found by
 * v3_sgemm_prepare (0 before it: grads_fold then keeps pairs). */
constexpr int MAX_DEVICES = 64;
int g_slots[MAX_DEVICES];

/* The current device's g_slots entry (0 where it has none). */
inline int grads_slots()
{
    int dev;
    return cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < MAX_DEVICES ? g_slots[dev] : 0;
}

template <int EPI>
cudaError_t launch_gemm(const Op &g, int k, cudaStream_t s, bool pdl)
{
    const dim3 grid((unsigned)((g.n + BN - 1) / BN), (unsigned)((g.m + BM - 1) / BM));
    return v2pdl::launch(gemm_kernel<EPI>, grid, dim3(NT), SMEM, s, pdl, g, k);
}

inline bool a16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

inline bool widths_ok(atk_dims_t d)
{
    return d.enc % 4 == 0 && d.h1 % 4 == 0 && d.h2 % 4 == 0 && d.aux % 4 == 0;
}

template <typename F>
cudaError_t touch(F *f)
{
    cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, reinterpret_cast<const void *>(f));
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(reinterpret_cast<const void *>(f),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM);
    return e;
}

} /* namespace */

extern "C" int v3_sgemm_forward_ok(atk_dims_t d, const atk_params_t *p, const float *x,
                                   const float *h1, const float *h2, const float *out)
{
    return p && widths_ok(d) && a16(x) && a16(h1) && a16(h2) && a16(out) && a16(p->w1) &&
           a16(p->w2) && a16(p->w3);
}

extern "C" int v3_sgemm_backward_ok(atk_dims_t d, const atk_params_t *p, const float *x,
                                    const float *h1, const float *h2, const float *dout,
                                    const atk_grads_t *g, const float *workspace, int batch)
{
    if (!p || !g || !workspace || !widths_ok(d) || batch <= 0)
        return 0;
    const v2_workspace_t W = v2_workspace_carve(d, batch, (float *)workspace);
    const v2_grad_layout_t L = v2_grad_layout(d);
    bool ok = a16(x) && a16(h1) && a16(h2) && a16(dout) && a16(p->w2) && a16(p->w3) && a16(W.dh2) &&
              a16(W.dh1) && a16(W.w2t) && a16(W.w3t) && a16(W.partials) && a16(g->dw1) &&
              a16(g->dw2) && a16(g->dw3);
    for (int i = 0; i < 7; i++) /* every gradient's start, and P */
        ok = ok && L.off[i] % 4 == 0;
    return ok;
}

extern "C" size_t v3_sgemm_workspace_floats(atk_dims_t d, int max_batch)
{
    if (max_batch < V3_SGEMM_MIN_BATCH)
        return 0;
    /* The most nodes of any batch up to max_batch: nc (single chunks) up to
     * V3_SGEMM_SINGLE_MAX chunks, ceil(nc / 2) (pairs) at any nc. */
    const int nc = auxtrunk_canon_chunks(max_batch);
    const int single = nc < V3_SGEMM_SINGLE_MAX ? nc : V3_SGEMM_SINGLE_MAX;
    const int pairs = (nc + 1) / 2;
    const size_t nodes = (size_t)(single > pairs ? single : pairs);
    return v2_workspace_carve(d, max_batch, NULL).floats + nodes * v2_grad_layout(d).off[6];
}

extern "C" cudaError_t v3_sgemm_prepare(void)
{
    cudaError_t e;
    if ((e = touch(gemm_kernel<EPI_BIAS>)) != cudaSuccess ||
        (e = touch(gemm_kernel<EPI_BIAS_ELU>)) != cudaSuccess ||
        (e = touch(gemm_kernel<EPI_ELU_GRAD>)) != cudaSuccess ||
        (e = touch(grads_kernel)) != cudaSuccess)
        return e;
    int dev, sms, per_sm;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grads_kernel, NT, SMEM)) !=
            cudaSuccess)
        return e;
    if (dev >= 0 && dev < MAX_DEVICES)
        g_slots[dev] = sms * per_sm;
    return cudaSuccess;
}

extern "C" cudaError_t v3_sgemm_forward(atk_dims_t d, const atk_params_t *p, const float *x,
                                        int batch, float *h1, float *h2, float *out,
                                        cudaStream_t stream)
{
    if (batch <= 0 || !v3_sgemm_forward_ok(d, p, x, h1, h2, out))
        return cudaErrorInvalidValue;
    Op g[3];
    v2gemm::forward_layers(g, d, batch, p, x, h1, h2, out);
    cudaError_t e;
    if ((e = launch_gemm<EPI_BIAS_ELU>(g[0], d.enc, stream, false)) != cudaSuccess ||
        (e = launch_gemm<EPI_BIAS_ELU>(g[1], d.h1, stream, true)) != cudaSuccess)
        return e;
    return launch_gemm<EPI_BIAS>(g[2], d.h2, stream, true);
}

namespace {

/* The weight- and bias-gradient launch of the gradients first..last (and
 * their tree), with the chunk plan of all three: a gradient outside the
 * range gets no blocks, so each one's blocks, fold and nodes are those of
 * the whole launch and it gets the same bits. */
cudaError_t grads_of(atk_dims_t d, const float *const (&acts)[3], const float *const (&grads)[3],
                     int batch, const atk_grads_t *gr, int accumulate, float *partials, int first,
                     int last, bool pdl, cudaStream_t stream)
{
    const int nc = auxtrunk_canon_chunks(batch);
    const bool single = nc == 1;
    const v2_grad_layout_t L = v2_grad_layout(d);
    Grads G = {};
    float *const dw_dst[3] = {single ? gr->dw1 : partials + L.off[0],
                              single ? gr->dw2 : partials + L.off[2],
                              single ? gr->dw3 : partials + L.off[4]};
    v2gemm::weight_grads(G.dw, d, acts, grads, dw_dst);
    G.g[0] = grads[0], G.g[1] = grads[1], G.g[2] = grads[2];
    G.db[0] = single ? gr->db1 : partials + L.off[1];
    G.db[1] = single ? gr->db2 : partials + L.off[3];
    G.db[2] = single ? gr->db3 : partials + L.off[5];
    G.db_n[0] = d.h1, G.db_n[1] = d.h2, G.db_n[2] = d.aux;
    int t = 0, all = 0;
    for (int q = 0; q < 3; q++) {
        const int tiles = tiles_of(G.dw[q].m, G.dw[q].n);
        G.start[q] = t;
        G.tiles_n[q] = (G.dw[q].n + BN - 1) / BN;
        t += q >= first && q <= last ? tiles : 0;
        all += tiles;
    }
    for (int q = 0; q < 3; q++) {
        G.start[3 + q] = t;
        t += q >= first && q <= last ? (G.db_n[q] + NT - 1) / NT : 0;
    }
    G.start[6] = t;
    G.fold = grads_fold(nc, all, grads_slots());
    const int nodes = (nc + G.fold - 1) / G.fold;
    G.batch = batch;
    G.nc = nc;
    G.node_stride = single ? 0 : L.off[6];
    G.accumulate = accumulate;
    cudaError_t e;
    if ((e = v2pdl::launch(grads_kernel, dim3((unsigned)t, (unsigned)nodes), dim3(NT), SMEM, stream,
                           pdl, G)) != cudaSuccess ||
        single)
        return e;
    return v2_tree_sum_of(d, partials, nodes, gr, accumulate, first, last, stream);
}

} /* namespace */

extern "C" cudaError_t v3_sgemm_backward_forked(atk_dims_t d, const atk_params_t *p, const float *x,
                                                const float *h1, const float *h2, const float *dout,
                                                int batch, const atk_grads_t *gr, int accumulate,
                                                float *workspace, cudaStream_t stream,
                                                cudaStream_t side, cudaEvent_t fork,
                                                cudaEvent_t join)
{
    if (!v3_sgemm_backward_ok(d, p, x, h1, h2, dout, gr, workspace, batch))
        return cudaErrorInvalidValue;
    cudaError_t e;
    const v2_workspace_t W = v2_workspace_carve(d, batch, workspace);
    /* dh2_pre = (dout · W3ᵀ) ⊙ ELU'(h2), dh1_pre = (dh2_pre · W2ᵀ) ⊙ ELU'(h1),
     * on W3ᵀ and W2ᵀ copied just before (B reduction-major). */
    if ((e = v2_transpose_hidden_weights(d, p, W.w2t, W.w3t, stream)) != cudaSuccess)
        return e;
    const Op g2 = Op::shape(batch, d.h2)
                      .with_a(dout, d.aux)
                      .with_b(W.w3t, d.h2)
                      .with_c(W.dh2, d.h2)
                      .with_y(h2);
    const Op g1 = Op::shape(batch, d.h1)
                      .with_a(W.dh2, d.h2)
                      .with_b(W.w2t, d.h1)
                      .with_c(W.dh1, d.h1)
                      .with_y(h1);
    if ((e = launch_gemm<EPI_ELU_GRAD>(g2, d.aux, stream, true)) != cudaSuccess)
        return e;
    const float *const acts[3] = {x, h1, h2}, *const grads[3] = {W.dh1, W.dh2, dout};
    /* in a graph and in eager calls alike (v2_forks_eager): the core's
     * forked launches save more than the two cross-stream waits cost */
    if (!v2_forks_eager(stream, side, fork, join)) {
        if ((e = launch_gemm<EPI_ELU_GRAD>(g1, d.h2, stream, true)) != cudaSuccess)
            return e;
        return grads_of(d, acts, grads, batch, gr, accumulate, W.partials, 0, 2, true, stream);
    }
    /* Forked: dW2, dW3 (and their tree) need only dh2_pre, so they run on
     * side beside dh1_pre and dW1, whose blocks fill the SMs that theirs
     * leave (the same block shape: two of any of them per SM). */
    if ((e = v2_fork(stream, side, fork)) != cudaSuccess)
        return e;
    const cudaError_t es =
        grads_of(d, acts, grads, batch, gr, accumulate, W.partials, 1, 2, false, side);
    if ((e = launch_gemm<EPI_ELU_GRAD>(g1, d.h2, stream, true)) == cudaSuccess)
        e = grads_of(d, acts, grads, batch, gr, accumulate, W.partials, 0, 0, true, stream);
    return v2_join(stream, side, join, es, e);
}
