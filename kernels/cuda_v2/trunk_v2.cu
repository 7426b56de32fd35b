/*
 * trunk_v2.cu — CUDA kernel version 2 (see trunk_v2.h).
 *
 * One register-tiled SIMT GEMM core serves every stage. A block owns a
 * BM x BN output tile; each thread owns a TM x TN micro-tile of accumulators
 * and walks the reduction index k in ascending order, one fmaf per step and
 * accumulator. That per-thread walk IS the canonical chain of
 * abi/auxtrunk_canon.h (sections 1 and 2), so the result is bit-exact with the
 * CPU reference without any extra bookkeeping: tiling only decides which
 * thread owns an element, never the order of its sum. The reduction tail is
 * handled with an exact loop bound, never by zero padding (a padded
 * fmaf(0, 0, -0.0f) would turn -0 into +0).
 *
 * Batch sums (section 3) split the batch into chunks of AUXTRUNK_CANON_CHUNK
 * samples: one grid row per chunk, each producing the chunk partial of every
 * dW and db element as a sequential chain over its samples, written to the
 * workspace; one tree launch then combines the partials in the canonical
 * pairwise order with a binary-counter stack held in registers. With a single
 * chunk the partial is the result and goes straight to the gradient.
 *
 * No atomics, no host synchronisation, no allocation: capture-friendly.
 */
#include "trunk_v2.h"

#include "auxtrunk_canon.h"

namespace {

/* ---------------------------------------------------------------- tiles -- */

constexpr int CHUNK = AUXTRUNK_CANON_CHUNK;
/* Reduction steps staged in shared memory per slab: small tiles take long
 * slabs so that a 256-long reduction needs few dependent global round trips
 * (small batches are latency-bound), large tiles short ones (registers).
 * Measured on the H200 (docs/perf-notes.md): 128-step slabs for the small
 * tile were slower than 64 (more staging registers, longer tail loop). */
template <int BM>
__host__ __device__ constexpr int bk_of()
{
    return BM >= 128 ? 16 : (BM >= 64 ? 32 : 64);
}
constexpr int NTHREADS = 256;
#ifndef V2_MIN_BLOCKS
#define V2_MIN_BLOCKS 1 /* blocks per SM the register budget must allow */
#endif
#ifndef V2_FRAG_PREFETCH
#define V2_FRAG_PREFETCH 1 /* double-buffer the register fragments (measured neutral) */
#endif
#ifndef V2_LARGE_BN
#define V2_LARGE_BN 64 /* columns of the large tile (rows are 128): 128x64 with 8x4 per
                          thread measured 9% faster per step than 128x128 at B = 65536 */
#endif

enum Epilogue {
    EPI_BIAS = 0,     /* acc starts at bias[n]; store acc            (layer 3) */
    EPI_BIAS_ELU = 1, /* acc starts at bias[n]; store ELU(acc)       (layers 1, 2) */
    EPI_ELU_GRAD = 2, /* acc starts at 0; store acc * ELU'(y[m,n])   (dh_pre) */
    EPI_SUM = 3       /* acc starts at 0; store acc, or old + acc    (chunk sums) */
};

/* One GEMM problem: C[m,n] = epilogue(chain over k of A[m,k] * B[k,n]).
 * A is stored k-contiguous (a[m*lda + k]) when A_KC, else m-contiguous
 * (a[k*lda + m]); likewise B is b[n*ldb + k] when B_KC, else b[k*ldb + n]. */
struct Gemm {
    const float *a;
    const float *b;
    float *c;
    const float *bias; /* EPI_BIAS, EPI_BIAS_ELU: [N] */
    const float *y;    /* EPI_ELU_GRAD: [M, N] with row stride ldc */
    int lda, ldb, ldc;
    int m, n;
};

/* Which of a tile's BD rows/columns a thread's fragment element i covers.
 * 8-wide fragments are split into two 4-wide halves BD/2 apart, so that the
 * 16-byte shared-memory reads of 8 neighbouring threads hit 32 distinct banks.
 * (Ownership only: it never changes the order of any sum.) */
template <int BD, int T>
__device__ __forceinline__ int frag_index(int t, int i)
{
    if constexpr (T == 8)
        return i < 4 ? t * 4 + i : BD / 2 + t * 4 + (i - 4);
    else
        return t * T + i;
}

template <int BD, int T>
__device__ __forceinline__ void load_frag(float (&f)[T], const float *row, int t)
{
    static_assert(T == 2 || T == 4 || T == 8, "fragment width");
    if constexpr (T == 2) {
        float2 v = *reinterpret_cast<const float2 *>(row + t * 2);
        f[0] = v.x;
        f[1] = v.y;
    } else {
#pragma unroll
        for (int h = 0; h < T / 4; h++) {
            float4 v = *reinterpret_cast<const float4 *>(row + frag_index<BD, T>(t, 4 * h));
            f[4 * h] = v.x;
            f[4 * h + 1] = v.y;
            f[4 * h + 2] = v.z;
            f[4 * h + 3] = v.w;
        }
    }
}

/* Stage a BK x BD slab of an operand into registers. KC: the operand is
 * stored k-contiguous. VEC: 16-byte loads along the contiguous direction
 * (every width a multiple of 4 and every base 16-byte aligned, checked by the
 * launcher). Out-of-range rows/columns read as 0; they only ever meet
 * accumulators that are never stored, and out-of-range k is never used. */
template <int BD, int BK, bool KC, bool VEC>
struct Slab {
    static constexpr int N = BK * BD / NTHREADS; /* floats per thread */
    static constexpr bool V = VEC && N % 4 == 0;
    static __device__ __forceinline__ void fetch(float (&r)[N], const float *p, int ld, int d0,
                                                 int dlim, int k0, int klim, int tid)
    {
        if constexpr (V) {
#pragma unroll
            for (int e = 0; e < N / 4; e++) {
                int i = (tid + e * NTHREADS) * 4; /* first of 4 consecutive */
                int kk = KC ? i % BK : i / BD;
                int dd = KC ? i / BK : i % BD;
                int k = k0 + kk, d = d0 + dd;
                float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (k < klim && d < dlim)
                    v = __ldg(reinterpret_cast<const float4 *>(KC ? p + (size_t)d * ld + k
                                                                   : p + (size_t)k * ld + d));
                r[4 * e] = v.x;
                r[4 * e + 1] = v.y;
                r[4 * e + 2] = v.z;
                r[4 * e + 3] = v.w;
            }
        } else {
#pragma unroll
            for (int e = 0; e < N; e++) {
                int i = tid + e * NTHREADS;
                int kk = KC ? i % BK : i / BD;
                int dd = KC ? i / BK : i % BD;
                int k = k0 + kk, d = d0 + dd;
                float v = 0.0f;
                if (k < klim && d < dlim)
                    v = KC ? __ldg(p + (size_t)d * ld + k) : __ldg(p + (size_t)k * ld + d);
                r[e] = v;
            }
        }
    }
    static __device__ __forceinline__ void stash(const float (&r)[N], float *s, int tid)
    {
        if constexpr (V) {
#pragma unroll
            for (int e = 0; e < N / 4; e++) {
                int i = (tid + e * NTHREADS) * 4;
                int kk = KC ? i % BK : i / BD;
                int dd = KC ? i / BK : i % BD;
                if constexpr (KC) { /* 4 consecutive k of one row d: a column of s */
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        s[(kk + q) * (BD + 4) + dd] = r[4 * e + q];
                } else {
                    *reinterpret_cast<float4 *>(s + kk * (BD + 4) + dd) =
                        make_float4(r[4 * e], r[4 * e + 1], r[4 * e + 2], r[4 * e + 3]);
                }
            }
        } else {
#pragma unroll
            for (int e = 0; e < N; e++) {
                int i = tid + e * NTHREADS;
                int kk = KC ? i % BK : i / BD;
                int dd = KC ? i / BK : i % BD;
                s[kk * (BD + 4) + dd] = r[e];
            }
        }
    }
};

/* Computes one BM x BN tile over reduction indices [k_begin, k_end). */
template <int BM, int BN, bool A_KC, bool B_KC, int EPI, bool VEC>
__device__ __forceinline__ void gemm_tile(const Gemm &g, int m0, int n0, int k_begin, int k_end,
                                          bool accumulate, float *smem)
{
    constexpr int TN = BN * BM / NTHREADS >= 64 ? 8 : (BN * BM / NTHREADS >= 16 ? 4 : 2);
    constexpr int TM = BM * BN / NTHREADS / TN;
    constexpr int TX = BN / TN; /* threads along n */
    static_assert(TX * (BM / TM) == NTHREADS, "tile shape");
    constexpr int BK = bk_of<BM>();
    static_assert(BK * BM % NTHREADS == 0 && BK * BN % NTHREADS == 0, "staging shape");
    constexpr int AS = BK * (BM + 4), BS = BK * (BN + 4);

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    /* Buffer b of A at as + b*AS, of B at bs + b*BS; bs follows the A
     * buffers actually allocated (one when a single slab covers k). */
    const int ntiles = (k_end - k_begin + BK - 1) / BK;
    float *as = smem, *bs = smem + (ntiles > 1 ? 2 : 1) * AS;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int n = n0 + frag_index<BN, TN>(tx, j);
            acc[i][j] = (EPI == EPI_BIAS || EPI == EPI_BIAS_ELU) ? (n < g.n ? g.bias[n] : 0.0f)
                                                                 : 0.0f;
        }

    using SA = Slab<BM, BK, A_KC, VEC>;
    using SB = Slab<BN, BK, B_KC, VEC>;
    float ra[SA::N], rb[SB::N];
    SA::fetch(ra, g.a, g.lda, m0, g.m, k_begin, k_end, tid);
    SB::fetch(rb, g.b, g.ldb, n0, g.n, k_begin, k_end, tid);
    SA::stash(ra, as, tid);
    SB::stash(rb, bs, tid);
    __syncthreads();

    for (int t = 0; t < ntiles; t++) {
        const int buf = t & 1;
        const int k0 = k_begin + t * BK;
        if (t + 1 < ntiles) { /* next slab in flight while this one is used */
            SA::fetch(ra, g.a, g.lda, m0, g.m, k0 + BK, k_end, tid);
            SB::fetch(rb, g.b, g.ldb, n0, g.n, k0 + BK, k_end, tid);
        }
        const float *a_s = as + buf * AS;
        const float *b_s = bs + buf * BS;
        const int kn = k_end - k0;
        if (kn >= BK) {
#if V2_FRAG_PREFETCH
            /* Fragments of step kk+1 are read while step kk's FMAs issue, so
             * the shared-memory latency hides behind arithmetic. */
            float fa[2][TM], fb[2][TN];
            load_frag<BM, TM>(fa[0], a_s, ty);
            load_frag<BN, TN>(fb[0], b_s, tx);
#pragma unroll
            for (int kk = 0; kk < BK; kk++) {
                if (kk + 1 < BK) {
                    load_frag<BM, TM>(fa[(kk + 1) & 1], a_s + (kk + 1) * (BM + 4), ty);
                    load_frag<BN, TN>(fb[(kk + 1) & 1], b_s + (kk + 1) * (BN + 4), tx);
                }
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++)
                        acc[i][j] = fmaf(fa[kk & 1][i], fb[kk & 1][j], acc[i][j]);
            }
#else
#pragma unroll
            for (int kk = 0; kk < BK; kk++) {
                float fa[TM], fb[TN];
                load_frag<BM, TM>(fa, a_s + kk * (BM + 4), ty);
                load_frag<BN, TN>(fb, b_s + kk * (BN + 4), tx);
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++)
                        acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
            }
#endif
        } else { /* reduction tail: exactly kn more steps */
#pragma unroll 8
            for (int kk = 0; kk < kn; kk++) {
                float fa[TM], fb[TN];
                load_frag<BM, TM>(fa, a_s + kk * (BM + 4), ty);
                load_frag<BN, TN>(fb, b_s + kk * (BN + 4), tx);
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++)
                        acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
            }
        }
        if (t + 1 < ntiles) {
            /* The other buffer was last read in iteration t-1, which ended
             * with the barrier below, so it is free to overwrite now. */
            SA::stash(ra, as + (buf ^ 1) * AS, tid);
            SB::stash(rb, bs + (buf ^ 1) * BS, tid);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; i++) {
        int m = m0 + frag_index<BM, TM>(ty, i);
        if (m >= g.m)
            continue;
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int n = n0 + frag_index<BN, TN>(tx, j);
            if (n >= g.n)
                continue;
            size_t o = (size_t)m * g.ldc + n;
            float v = acc[i][j];
            if (EPI == EPI_BIAS_ELU)
                v = auxtrunk_canon_elu(v);
            else if (EPI == EPI_ELU_GRAD)
                v = auxtrunk_canon_elu_grad(v, g.y[o]);
            else if (EPI == EPI_SUM && accumulate)
                v = g.c[o] + v;
            g.c[o] = v;
        }
    }
}

/* Shared memory of one tile: two slab buffers, or one when the whole
 * reduction fits in a single slab (the second buffer is only touched when a
 * next slab exists). */
template <int BM, int BN>
__host__ __device__ constexpr size_t smem_bytes(int buffers)
{
    return (size_t)buffers * (bk_of<BM>() * (BM + 4) + bk_of<BM>() * (BN + 4)) * sizeof(float);
}

template <int BM, int BN>
inline size_t smem_for(int k)
{
    return smem_bytes<BM, BN>(k > bk_of<BM>() ? 2 : 1);
}

/* ------------------------------------------------------- forward / dh -- */

/* One GEMM over the whole reduction (layer forward, hidden gradient). */
template <int BM, int BN, bool A_KC, bool B_KC, int EPI, bool VEC>
__global__ void __launch_bounds__(NTHREADS, V2_MIN_BLOCKS) gemm_kernel(Gemm g, int k)
{
    extern __shared__ __align__(16) float smem[];
    gemm_tile<BM, BN, A_KC, B_KC, EPI, VEC>(g, blockIdx.y * BM, blockIdx.x * BN, 0, k, false, smem);
}

/* ------------------------------------------------------------- backward -- */

/* The three dW problems and three db problems of one backward, for one
 * grouped launch: blockIdx.y is the batch chunk, blockIdx.x walks the dW
 * tiles of problems 0..2 and then the db column blocks of problems 3..5. */
struct GradGroup {
    Gemm dw[3];        /* c = destination for chunk 0 (see chunk_stride) */
    const float *g[3]; /* db sources [B, n] */
    float *db[3];
    int db_n[3];
    int tile_start[7]; /* prefix sums of blocks per problem */
    int tiles_n[3];    /* dW tiles along n */
    int batch;
    size_t chunk_stride; /* floats between chunk partials (0: single chunk) */
    int accumulate;
};

template <int BM, int BN, bool VEC>
__global__ void __launch_bounds__(NTHREADS, V2_MIN_BLOCKS) grad_chunk_kernel(GradGroup G)
{
    extern __shared__ __align__(16) float smem[];
    const int chunk = blockIdx.y;
    const int kb = chunk * CHUNK;
    const int ke = min(G.batch, kb + CHUNK);
    const size_t off = (size_t)chunk * G.chunk_stride;
    int blk = blockIdx.x, p = 0;
    while (p < 6 && blk >= G.tile_start[p + 1])
        p++;
    blk -= G.tile_start[p];
    if (p < 3) {
        Gemm g = G.dw[p];
        g.c += off;
        gemm_tile<BM, BN, false, false, EPI_SUM, VEC>(g, (blk / G.tiles_n[p]) * BM,
                                                 (blk % G.tiles_n[p]) * BN, kb, ke,
                                                 G.accumulate && G.chunk_stride == 0, smem);
    } else {
        const int q = p - 3;
        const int n = blk * NTHREADS + threadIdx.x;
        if (n < G.db_n[q]) {
            const float *src = G.g[q];
            float acc = 0.0f;
            for (int b = kb; b < ke; b++) /* section 3: p = p + g[b,n] */
                acc = acc + src[(size_t)b * G.db_n[q] + n];
            float *dst = G.db[q] + off + n;
            *dst = (G.accumulate && G.chunk_stride == 0) ? *dst + acc : acc;
        }
    }
}

/* Deepest binary-counter stack: 2^14 chunks = 4M samples > AUXTRUNK_MAX_BATCH. */
constexpr int TREE_LEVELS = 14;

/* Combines nc chunk partials per element in the canonical pairwise tree.
 * Element e of the flat gradient (layout W1 b1 W2 b2 W3 b3) reads
 * ws[c * stride + e] for c = 0..nc-1. The level-by-level tree of
 * abi/auxtrunk_canon.h equals a binary counter: after partial c arrives,
 * equal-sized subtrees on the stack merge (left + right) like carries, and
 * the remaining stack is folded lowest level first (older, higher level on
 * the left). Stack indices are compile-time constants, so it stays in
 * registers. */
struct TreeArgs {
    const float *ws;
    size_t stride;
    int nc;
    int64_t end[6]; /* prefix sums of gradient sizes */
    float *dst[6];
    int accumulate;
};

__global__ void __launch_bounds__(NTHREADS) tree_kernel(TreeArgs T)
{
    const int64_t e = (int64_t)blockIdx.x * NTHREADS + threadIdx.x;
    if (e >= T.end[5])
        return;
    float stack[TREE_LEVELS];
#pragma unroll
    for (int l = 0; l < TREE_LEVELS; l++)
        stack[l] = 0.0f;
    unsigned count = 0;
    for (int c = 0; c < T.nc; c++) {
        float v = T.ws[(size_t)c * T.stride + e];
        bool placed = false;
#pragma unroll
        for (int l = 0; l < TREE_LEVELS; l++) {
            if (!placed) {
                if (count & (1u << l)) {
                    v = stack[l] + v;
                } else {
                    stack[l] = v;
                    placed = true;
                }
            }
        }
        count++;
    }
    float r = 0.0f;
    bool have = false;
#pragma unroll
    for (int l = 0; l < TREE_LEVELS; l++) {
        if (count & (1u << l)) {
            r = have ? stack[l] + r : stack[l];
            have = true;
        }
    }
    int q = 0;
    while (q < 5 && e >= T.end[q])
        q++;
    float *d = T.dst[q] + (e - (q ? T.end[q - 1] : 0));
    *d = T.accumulate ? *d + r : r;
}

/* --------------------------------------------------------------- launch -- */

/* Tile configurations, largest first; a launch takes the largest one that
 * still fills every multiprocessor once (132 on the H200). Larger tiles do
 * more FMAs per shared-memory read; below one full wave, smaller tiles win
 * because the small batches of RL are latency-bound. */
#ifndef V2_FULL_WAVE
#define V2_FULL_WAVE 132
#endif
constexpr int FULL_WAVE = V2_FULL_WAVE;

inline int tiles(int m, int n, int bm, int bn)
{
    return ((m + bm - 1) / bm) * ((n + bn - 1) / bn);
}

inline int pick(int m, int n, int mult)
{
    if ((long long)tiles(m, n, 128, V2_LARGE_BN) * mult >= FULL_WAVE)
        return 128;
    if ((long long)tiles(m, n, 64, 64) * mult >= FULL_WAVE)
        return 64;
    return 32;
}

template <bool A_KC, bool B_KC, int EPI, bool VEC>
cudaError_t gemm_launch(const Gemm &g, int k, cudaStream_t s)
{
    switch (pick(g.m, g.n, 1)) {
    case 128:
        gemm_kernel<128, V2_LARGE_BN, A_KC, B_KC, EPI, VEC>
            <<<dim3((g.n + V2_LARGE_BN - 1) / V2_LARGE_BN, (g.m + 127) / 128), NTHREADS,
               smem_for<128, V2_LARGE_BN>(k), s>>>(g, k);
        break;
    case 64:
        gemm_kernel<64, 64, A_KC, B_KC, EPI, VEC>
            <<<dim3((g.n + 63) / 64, (g.m + 63) / 64), NTHREADS, smem_for<64, 64>(k), s>>>(g, k);
        break;
    default:
        gemm_kernel<32, 32, A_KC, B_KC, EPI, VEC>
            <<<dim3((g.n + 31) / 32, (g.m + 31) / 32), NTHREADS, smem_for<32, 32>(k), s>>>(g, k);
        break;
    }
    return cudaGetLastError();
}

template <bool A_KC, bool B_KC, int EPI>
cudaError_t gemm(const Gemm &g, int k, bool vec, cudaStream_t s)
{
    return vec ? gemm_launch<A_KC, B_KC, EPI, true>(g, k, s)
               : gemm_launch<A_KC, B_KC, EPI, false>(g, k, s);
}

template <int BM, int BN>
cudaError_t launch_grads(GradGroup &G, int nc, bool vec, cudaStream_t s)
{
    int t = 0;
    G.tile_start[0] = 0;
    for (int p = 0; p < 3; p++) {
        G.tiles_n[p] = (G.dw[p].n + BN - 1) / BN;
        t += tiles(G.dw[p].m, G.dw[p].n, BM, BN);
        G.tile_start[p + 1] = t;
    }
    for (int q = 0; q < 3; q++) {
        t += (G.db_n[q] + NTHREADS - 1) / NTHREADS;
        G.tile_start[4 + q] = t;
    }
    const size_t smem = smem_for<BM, BN>(G.batch < CHUNK ? G.batch : CHUNK);
    if (vec)
        grad_chunk_kernel<BM, BN, true><<<dim3(t, nc), NTHREADS, smem, s>>>(G);
    else
        grad_chunk_kernel<BM, BN, false><<<dim3(t, nc), NTHREADS, smem, s>>>(G);
    return cudaGetLastError();
}

/* 16-byte loads need every row stride a multiple of 4 floats and every base
 * pointer 16-byte aligned. */
inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

} /* namespace */

/* ------------------------------------------------------------ public API -- */

static size_t param_count(v2_dims_t d)
{
    return (size_t)d.enc * d.h1 + d.h1 + (size_t)d.h1 * d.h2 + d.h2 + (size_t)d.h2 * d.aux + d.aux;
}

namespace {

/* Loads a kernel and allows it `smem` bytes of dynamic shared memory. */
template <typename F>
cudaError_t touch(F *f, size_t smem = 0)
{
    cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, reinterpret_cast<const void *>(f));
    if (e == cudaSuccess && smem > 0)
        e = cudaFuncSetAttribute(reinterpret_cast<const void *>(f),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    return e;
}

template <int BM, int BN, bool VEC>
cudaError_t touch_config()
{
    const size_t smem = smem_bytes<BM, BN>(2);
    cudaError_t e;
    if ((e = touch(gemm_kernel<BM, BN, true, false, EPI_BIAS_ELU, VEC>, smem)) != cudaSuccess ||
        (e = touch(gemm_kernel<BM, BN, true, false, EPI_BIAS, VEC>, smem)) != cudaSuccess ||
        (e = touch(gemm_kernel<BM, BN, true, true, EPI_ELU_GRAD, VEC>, smem)) != cudaSuccess ||
        (e = touch(grad_chunk_kernel<BM, BN, VEC>, smem)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

} /* namespace */

extern "C" cudaError_t v2_prepare(void)
{
    cudaError_t e;
    if ((e = touch_config<128, V2_LARGE_BN, true>()) != cudaSuccess ||
        (e = touch_config<128, V2_LARGE_BN, false>()) != cudaSuccess ||
        (e = touch_config<64, 64, true>()) != cudaSuccess ||
        (e = touch_config<64, 64, false>()) != cudaSuccess ||
        (e = touch_config<32, 32, true>()) != cudaSuccess ||
        (e = touch_config<32, 32, false>()) != cudaSuccess)
        return e;
    return touch(tree_kernel);
}

extern "C" size_t v2_workspace_floats(v2_dims_t d, int max_batch)
{
    int nc = auxtrunk_canon_chunks(max_batch);
    size_t partials = nc > 1 ? (size_t)nc * param_count(d) : 0;
    return partials + (size_t)max_batch * (d.h1 + d.h2);
}

extern "C" cudaError_t v2_forward(v2_dims_t d, const v2_params_t *p, const float *x, int batch,
                                  float *h1, float *h2, float *out, cudaStream_t stream)
{
    if (batch <= 0 || !p || !x || !h1 || !h2 || !out)
        return cudaErrorInvalidValue;
    cudaError_t e;
    const bool vec = d.enc % 4 == 0 && d.h1 % 4 == 0 && d.h2 % 4 == 0 && d.aux % 4 == 0 &&
                     aligned16(x) && aligned16(p->w1) && aligned16(p->w2) && aligned16(p->w3) &&
                     aligned16(h1) && aligned16(h2);
    Gemm g1 = {x, p->w1, h1, p->b1, nullptr, d.enc, d.h1, d.h1, batch, d.h1};
    if ((e = gemm<true, false, EPI_BIAS_ELU>(g1, d.enc, vec, stream)) != cudaSuccess)
        return e;
    Gemm g2 = {h1, p->w2, h2, p->b2, nullptr, d.h1, d.h2, d.h2, batch, d.h2};
    if ((e = gemm<true, false, EPI_BIAS_ELU>(g2, d.h1, vec, stream)) != cudaSuccess)
        return e;
    Gemm g3 = {h2, p->w3, out, p->b3, nullptr, d.h2, d.aux, d.aux, batch, d.aux};
    return gemm<true, false, EPI_BIAS>(g3, d.h2, vec, stream);
}

extern "C" cudaError_t v2_backward(v2_dims_t d, const v2_params_t *p, const float *x,
                                   const float *h1, const float *h2, const float *dout, int batch,
                                   const v2_grads_t *gr, int accumulate, float *workspace,
                                   cudaStream_t stream)
{
    if (batch <= 0 || !p || !x || !h1 || !h2 || !dout || !gr || !workspace)
        return cudaErrorInvalidValue;
    cudaError_t e;
    float *dh2 = workspace;
    float *dh1 = dh2 + (size_t)batch * d.h2;
    float *partials = dh1 + (size_t)batch * d.h1;
    const bool vec = d.enc % 4 == 0 && d.h1 % 4 == 0 && d.h2 % 4 == 0 && d.aux % 4 == 0 &&
                     aligned16(x) && aligned16(h1) && aligned16(h2) && aligned16(dout) &&
                     aligned16(p->w2) && aligned16(p->w3) && aligned16(dh2) && aligned16(dh1);

    /* dh2_pre = (dout · W3ᵀ) ⊙ ELU'(h2): reduction over AUX, both operands
     * k-contiguous; dh1_pre likewise from dh2_pre and W2. */
    Gemm g2 = {dout, p->w3, dh2, nullptr, h2, d.aux, d.aux, d.h2, batch, d.h2};
    if ((e = gemm<true, true, EPI_ELU_GRAD>(g2, d.aux, vec, stream)) != cudaSuccess)
        return e;
    Gemm g1 = {dh2, p->w2, dh1, nullptr, h1, d.h2, d.h2, d.h1, batch, d.h1};
    if ((e = gemm<true, true, EPI_ELU_GRAD>(g1, d.h2, vec, stream)) != cudaSuccess)
        return e;

    const int nc = auxtrunk_canon_chunks(batch);
    const size_t P = param_count(d);
    /* Offsets of each gradient in the flat layout W1 b1 W2 b2 W3 b3. */
    const size_t o_w1 = 0, o_b1 = o_w1 + (size_t)d.enc * d.h1, o_w2 = o_b1 + d.h1,
                 o_b2 = o_w2 + (size_t)d.h1 * d.h2, o_w3 = o_b2 + d.h2,
                 o_b3 = o_w3 + (size_t)d.h2 * d.aux;
    const bool direct = nc == 1;
    GradGroup G = {};
    /* dW = aᵀ · g over the chunk: A(m = feature, k = sample) is m-contiguous. */
    G.dw[0] = {x, dh1, direct ? gr->dw1 : partials + o_w1, nullptr, nullptr, d.enc, d.h1, d.h1,
               d.enc, d.h1};
    G.dw[1] = {h1, dh2, direct ? gr->dw2 : partials + o_w2, nullptr, nullptr, d.h1, d.h2, d.h2,
               d.h1, d.h2};
    G.dw[2] = {h2, dout, direct ? gr->dw3 : partials + o_w3, nullptr, nullptr, d.h2, d.aux, d.aux,
               d.h2, d.aux};
    G.g[0] = dh1, G.g[1] = dh2, G.g[2] = dout;
    G.db[0] = direct ? gr->db1 : partials + o_b1;
    G.db[1] = direct ? gr->db2 : partials + o_b2;
    G.db[2] = direct ? gr->db3 : partials + o_b3;
    G.db_n[0] = d.h1, G.db_n[1] = d.h2, G.db_n[2] = d.aux;
    G.batch = batch;
    G.chunk_stride = direct ? 0 : P;
    G.accumulate = accumulate;

    /* dW tiles: sized by the largest of the three problems (W1 or W2). */
    const int wm = d.enc > d.h1 ? d.enc : d.h1, wn = d.h1 > d.h2 ? d.h1 : d.h2;
    switch (pick(wm, wn, nc)) {
    case 128:
        e = launch_grads<128, V2_LARGE_BN>(G, nc, vec, stream);
        break;
    case 64:
        e = launch_grads<64, 64>(G, nc, vec, stream);
        break;
    default:
        e = launch_grads<32, 32>(G, nc, vec, stream);
        break;
    }
    if (e != cudaSuccess || direct)
        return e;

    TreeArgs T = {};
    T.ws = partials;
    T.stride = P;
    T.nc = nc;
    const size_t sizes[6] = {(size_t)d.enc * d.h1, (size_t)d.h1, (size_t)d.h1 * d.h2,
                             (size_t)d.h2, (size_t)d.h2 * d.aux, (size_t)d.aux};
    float *dst[6] = {gr->dw1, gr->db1, gr->dw2, gr->db2, gr->dw3, gr->db3};
    int64_t acc = 0;
    for (int i = 0; i < 6; i++) {
        acc += (int64_t)sizes[i];
        T.end[i] = acc;
        T.dst[i] = dst[i];
    }
    T.accumulate = accumulate;
    tree_kernel<<<(unsigned)((P + NTHREADS - 1) / NTHREADS), NTHREADS, 0, stream>>>(T);
    return cudaGetLastError();
}
