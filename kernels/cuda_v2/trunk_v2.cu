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
 * Staging (gemm_tile_async, for aligned widths that are multiples of 4):
 * operands travel global -> shared memory by cp.async in a ring of ASTAGES
 * slabs of ABK reduction steps, each kept in its global orientation; threads
 * read 16-byte fragments, 4 reduction steps at a time for k-contiguous
 * operands. The large tile is 128 x 128 with an 8 x 8 micro-tile per thread
 * and two blocks per SM: on the H200 a warp's 16-byte
 * shared load costs 4 shared-memory cycles whatever its broadcast, so an
 * 8 x 8 micro-tile is what balances shared-memory traffic against FFMA issue
 * (docs/perf-history.md). Other widths and pointers use gemm_tile (register
 * staging, double-buffered). Batches up to ROWS_MAX_BATCH run their
 * row-local stages on the cluster path of trunk_v2_rows.cu.
 *
 * Hidden gradients (dh = d · Wᵀ) at large batches read W2 and W3 from
 * transposed copies that one small launch writes into the workspace, so that
 * they run the forward's orientation (A k-contiguous, B d-contiguous).
 *
 * Batch sums (section 3) split the batch into chunks of AUXTRUNK_CANON_CHUNK
 * samples: one grid row per chunk (or per pair of chunks at large batches,
 * whose two partials the block adds: the tree's first level), each producing
 * the partial of every dW and db element as a sequential chain over its
 * samples, written to the workspace; the tree launches then combine the
 * partials in the canonical pairwise order with a binary-counter stack held
 * in registers (two launches when there are many: blocks of 16 nodes, then
 * the rest). With a single chunk the partial is the result and goes straight
 * to the gradient.
 *
 * No atomics, no host synchronisation, no allocation: capture-friendly.
 */
#include "trunk_v2.h"

#include <string.h>
#include <type_traits>

#include "auxtrunk_canon.h"
#include "trunk_v2_async.cuh"
#include "trunk_v2_gemm.cuh"
#include "trunk_v2_pdl.cuh"
#include "trunk_v2_rows.h"

namespace {

/* Batches up to this size take the cluster path of trunk_v2_rows.cu for the
 * row-local stages (forward, hidden gradients). */
constexpr int ROWS_MAX_BATCH = 128;

/* ---------------------------------------------------------------- tiles -- */

constexpr int CHUNK = AUXTRUNK_CANON_CHUNK;
/* Reduction steps staged in shared memory per slab: small tiles take long
 * slabs so that a 256-long reduction needs few dependent global round trips
 * (small batches are latency-bound), large tiles short ones (registers).
 * Measured on the H200 (docs/perf-history.md): 128-step slabs for the small
 * tile were slower than 64 (more staging registers, longer tail loop). */
template <int BM>
__host__ __device__ constexpr int bk_of()
{
    return BM >= 128 ? 16 : (BM >= 64 ? 32 : 64);
}
constexpr int NTHREADS = 256;
constexpr int MIN_BLOCKS = 1; /* blocks per SM the register budget must allow */
constexpr int LARGE_BN = 128; /* columns of the large tile (rows are 128); see group_8x8 */

enum Epilogue {
    EPI_BIAS = 0,     /* acc starts at bias[n]; store acc            (layer 3) */
    EPI_BIAS_ELU = 1, /* acc starts at bias[n]; store ELU(acc)       (layers 1, 2) */
    EPI_ELU_GRAD = 2, /* acc starts at 0; store acc * ELU'(y[m,n])   (dh_pre) */
    EPI_SUM = 3       /* acc starts at 0; store acc, or old + acc    (chunk sums) */
};

/* One GEMM problem: C[m,n] = epilogue(chain over k of A[m,k] * B[k,n]).
 * A is stored k-contiguous (a[m*lda + k]) when A_KC, else m-contiguous
 * (a[k*lda + m]); likewise B is b[n*ldb + k] when B_KC, else b[k*ldb + n].
 * Built by name (trunk_v2_gemm.cuh), never by position. */
struct Gemm : v2gemm::Named<Gemm> {
    const float *a;
    const float *b;
    float *c;
    const float *bias; /* EPI_BIAS, EPI_BIAS_ELU: [N] */
    const float *y;    /* EPI_ELU_GRAD: [M, N] with row stride ldc */
    int lda, ldb, ldc;
    int m, n;
    int b_pre; /* async tile: B may be copied before pdl_wait (no launch in flight writes it) */

    /* B is the layer's weights, which no launch of the call writes. */
    Gemm with_b_early() const
    {
        Gemm g = *this;
        g.b_pre = 1;
        return g;
    }
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
            acc[i][j] =
                (EPI == EPI_BIAS || EPI == EPI_BIAS_ELU) ? (n < g.n ? g.bias[n] : 0.0f) : 0.0f;
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

/* ----------------------------------------------------------- async tile -- */

/* gemm_tile_async: the same per-thread chain as gemm_tile (accumulator starts
 * at bias[n] or 0, then one fmaf per k, k strictly ascending, exact tail), fed
 * by a ring of ASTAGES shared-memory slabs that cp.async fills directly from
 * global memory, so ASTAGES - 1 slabs are in flight while one is used and no
 * staging registers are needed. Every VEC launch (every width a multiple of 4
 * and every base 16-byte aligned) runs it, whatever its tile size; async
 * tiles of 128 rows give every thread an 8x8 micro-tile (group_8x8). */
/* Slabs in the ring: 3 x 36 KiB for the 128x128 tile, so that two blocks fit
 * in one SM's 228 KiB. */
constexpr int ASTAGES = 3;
constexpr int ABK = 32;       /* reduction steps per slab */
constexpr int TM8_REGS = 128; /* register cap of the 8x8 kernels (through __launch_bounds__) */
static_assert(ASTAGES >= 2, "the ring needs one slab in use and one in flight");
static_assert(ABK % 8 == 0, "k in groups of 4, and an odd KC row stride in 16-byte units");

/* Threads of a BM x BN tile's block: NTHREADS, except for the 8x8 async
 * tiles (ASYNC: the launch runs gemm_tile_async), one thread per 64 outputs. */
template <int BM, int BN, bool ASYNC>
__host__ __device__ constexpr int threads_of()
{
    return ASYNC && BM == 128 ? BM * BN / 64 : NTHREADS;
}

/* Blocks per SM that __launch_bounds__ asks the register allocator to allow:
 * the 8x8 kernels are held to TM8_REGS registers per thread. */
template <int BM, int BN, bool ASYNC>
__host__ __device__ constexpr int min_blocks_of()
{
    return ASYNC && BM == 128 ? 65536 / (threads_of<BM, BN, ASYNC>() * TM8_REGS) : MIN_BLOCKS;
}

/* One operand's slab in shared memory, in its global orientation (no
 * transposes). KC (element [d,k] at p[d*ld + k]): BD rows of d, k contiguous,
 * row stride ABK + 4 floats. Otherwise (element [d,k] at p[k*ld + d]): ABK
 * rows of k, d contiguous, row stride BD + 4 floats. */
template <int BD, bool KC, int NT = NTHREADS>
struct AsyncSlab {
    static constexpr int ROW = KC ? ABK + 4 : BD + 4;
    static constexpr int FLOATS = (KC ? BD : ABK) * ROW;
    static constexpr int PPR = (KC ? ABK : BD) / 4; /* 16-byte pieces per row */
    static_assert(BD % 4 == 0 && NT % PPR == 0, "whole rows of 16-byte pieces");

    /* Issues the copies of k in [k0, k0 + ABK), d in [d0, d0 + BD), where
     * d0 < dlim (the tile exists) and k0 < klim (the slab does). Consecutive
     * threads take consecutive pieces of one row, so a warp reads whole runs
     * of global memory. A piece is wholly in range or wholly out: VEC makes
     * every d-contiguous width (dlim) and every KC reduction length (klim) a
     * multiple of 4, and KC slabs start at k0 % 4 == 0 (k_begin is 0 for
     * every KC use). A piece out of range (d >= dlim or k >= klim) is
     * zero-filled with src-size 0: shared memory stays defined, but the
     * arithmetic never reads a k >= klim (exact loop bound), and a d >= dlim
     * only meets accumulators that are never stored. */
    template <bool REFORM = false>
    static __device__ __forceinline__ void issue(float *s, const float *base, int ld, int d0,
                                                 int dlim, int k0, int klim, int tid)
    {
#if defined(__CUDA_ARCH__)
        /* REFORM: ld passes through an empty asm, so the piece addresses are
         * formed here, once per slab, instead of being kept live across the
         * k loop (a 64-bit pair per piece), which would not fit the 128
         * registers of an 8x8 micro-tile. Addresses only: no arithmetic. */
        if constexpr (REFORM)
            asm volatile("" : "+r"(ld));
#endif
        const float *p = KC ? base + (size_t)d0 * ld + k0 : base + (size_t)k0 * ld + d0;
        const int rlim = KC ? dlim - d0 : klim - k0; /* rows of the slab that exist */
        const int clim = KC ? klim - k0 : dlim - d0; /* floats of a row that exist */
        constexpr int ROWS = KC ? BD : ABK;
        constexpr int RSTEP = NT / PPR; /* rows between one thread's pieces */
        const int r0 = tid / PPR, c = tid % PPR * 4;
#pragma unroll
        for (int e = 0; e < (ROWS + RSTEP - 1) / RSTEP; e++) {
            const int r = r0 + e * RSTEP;
            if (ROWS % RSTEP != 0 && r >= ROWS)
                break;
            const bool ok = r < rlim && c < clim;
            v2async::copy16(s + r * ROW + c, ok ? p + (size_t)r * ld + c : p, ok ? 16 : 0);
        }
    }
};

/* Which of a tile's BD rows/columns fragment element i of thread coordinate
 * t (0..15) covers in the async tile. KC operand: t + (BD/T) i, so that lane
 * neighbours read neighbouring rows; d-contiguous operand: 4-wide runs as in
 * frag_index, read with one 16-byte load per run. (Ownership only: it never
 * changes the order of any sum.) */
template <int BD, int T, bool KC>
__device__ __forceinline__ int async_own(int t, int i)
{
    if constexpr (KC)
        return t + (BD / T) * i;
    else
        return frag_index<BD, T>(t, i);
}

/* Fragment of k-group g (slab steps 4g..4g+3): f[i][q] = operand element
 * (d = async_own(t, i), k = 4g + q). KC: one 16-byte load per owned d gives
 * its 4 k; d-contiguous: per k, one 16-byte load per 4 owned d (8 bytes per
 * 2 when T == 2). Rows past the reduction end are loaded (they are defined,
 * zero-filled) but never used. */
template <int BD, int T, bool KC>
__device__ __forceinline__ void load_group(float (&f)[T][4], const float *s, int t, int g)
{
    using S = AsyncSlab<BD, KC>;
    if constexpr (KC) {
#pragma unroll
        for (int i = 0; i < T; i++) {
            const float4 v =
                *reinterpret_cast<const float4 *>(s + async_own<BD, T, KC>(t, i) * S::ROW + 4 * g);
            f[i][0] = v.x;
            f[i][1] = v.y;
            f[i][2] = v.z;
            f[i][3] = v.w;
        }
    } else {
        static_assert(T == 2 || T % 4 == 0, "fragment width");
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const float *row = s + (4 * g + q) * S::ROW;
            if constexpr (T == 2) {
                const float2 v = *reinterpret_cast<const float2 *>(row + 2 * t);
                f[0][q] = v.x;
                f[1][q] = v.y;
            } else {
#pragma unroll
                for (int h = 0; h < T / 4; h++) {
                    const float4 v =
                        *reinterpret_cast<const float4 *>(row + async_own<BD, T, KC>(t, 4 * h));
                    f[4 * h][q] = v.x;
                    f[4 * h + 1][q] = v.y;
                    f[4 * h + 2][q] = v.z;
                    f[4 * h + 3][q] = v.w;
                }
            }
        }
    }
}

/* The first nq (1..4) steps of a k-group, k ascending: the canonical chain. */
template <int TM, int TN>
__device__ __forceinline__ void group_steps(float (&acc)[TM][TN], const float (&fa)[TM][4],
                                            const float (&fb)[TN][4], int nq)
{
#pragma unroll
    for (int q = 0; q < 4; q++) {
        if (q < nq) {
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] = fmaf(fa[i][q], fb[j][q], acc[i][j]);
        }
    }
}

/* The first nq (1..4) steps of k-group g with an 8x8 micro-tile.
 * Both operands' group fragments (2 x 32 floats) next to the 64
 * accumulators, the copy state and the addresses would not fit 128
 * registers, so one operand's group is held and the other is streamed four
 * floats at a time:
 *   A KC, B d:   B's group held (per step k two 16-byte loads of 4 n);
 *                per owned row i one 16-byte load gives A's 4 k, then the
 *                4 steps of that row's 8 accumulators.
 *   A d, B KC:   A's group held likewise; per owned column j one 16-byte
 *                load gives B's 4 k.
 *   A KC, B KC:  A's group held (one 16-byte load per owned row); B streamed
 *                per owned column as above.
 *   A d, B d:    per step k two 16-byte loads of each operand (16 floats).
 * Always 16 16-byte loads per 4 steps and 256 FMAs, and every accumulator
 * takes its steps k ascending (the order across accumulators is free: they
 * are independent chains). KC operands always come in whole groups (VEC:
 * KC reduction lengths are multiples of 4), so nq < 4 only meets d-contiguous
 * ones, whose rows past the end are never read. */
template <int BM, int BN, bool A_KC, bool B_KC>
__device__ __forceinline__ void group_8x8(float (&acc)[8][8], const float *a_s, const float *b_s,
                                          int ty, int tx, int g, int nq)
{
    constexpr int AROW = AsyncSlab<BM, A_KC>::ROW, BROW = AsyncSlab<BN, B_KC>::ROW;
    if constexpr (A_KC && !B_KC) {
        float fb[8][4];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float v[8];
            if (q < nq)
                load_frag<BN, 8>(v, b_s + (4 * g + q) * BROW, tx);
#pragma unroll
            for (int j = 0; j < 8; j++)
                fb[j][q] = q < nq ? v[j] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 v = *reinterpret_cast<const float4 *>(
                a_s + async_own<BM, 8, true>(ty, i) * AROW + 4 * g);
            const float fa[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int q = 0; q < 4; q++)
                if (q < nq)
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[i][j] = fmaf(fa[q], fb[j][q], acc[i][j]);
        }
    } else if constexpr (B_KC) {
        float fa[8][4];
        if constexpr (A_KC) {
            load_group<BM, 8, true>(fa, a_s, ty, g);
        } else {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                float v[8];
                if (q < nq)
                    load_frag<BM, 8>(v, a_s + (4 * g + q) * AROW, ty);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    fa[i][q] = q < nq ? v[i] : 0.0f;
            }
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float4 v = *reinterpret_cast<const float4 *>(
                b_s + async_own<BN, 8, true>(tx, j) * BROW + 4 * g);
            const float fb[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int q = 0; q < 4; q++)
                if (q < nq)
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[i][j] = fmaf(fa[i][q], fb[q], acc[i][j]);
        }
    } else {
#pragma unroll
        for (int q = 0; q < 4; q++) {
            if (q < nq) {
                float fa[8], fb[8];
                load_frag<BM, 8>(fa, a_s + (4 * g + q) * AROW, ty);
                load_frag<BN, 8>(fb, b_s + (4 * g + q) * BROW, tx);
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
            }
        }
    }
}

/*
 * Bank analysis of the fragment reads. Threads: tx = tid % 16 owns columns n,
 * ty = tid / 16 owns rows m (TX = TY = 16 in every tile), so a warp holds two
 * ty (2w, 2w+1), each with tx = 0..15; a quarter warp (8 lanes, the unit of a
 * 16-byte access) has one ty and 8 consecutive tx, a half warp (the unit of
 * an 8-byte access) one ty and tx = 0..15. Shared memory has 8 bank groups
 * of 16 bytes; a KC row is ABK + 4 = 36 floats = 9 groups long, so
 * consecutive rows start one group apart.
 *  - A, either orientation: the address depends on ty only, so every lane of
 *    a quarter (half) warp reads the same piece: broadcast. The warp's two
 *    pieces (rows ty, ty+1 when KC; neighbouring pieces of one row when
 *    d-contiguous) fall in different groups: one wavefront.
 *  - B KC (rows n = tx + 16 j, one k-group g): a quarter warp reads rows
 *    r..r+7, groups (9 r + g) mod 8, all 8 distinct. The warp's 16 distinct
 *    pieces take the minimum of 2 wavefronts.
 *  - B d-contiguous (n = 4 tx + j, and BN/2 + 4 tx + j when TN = 8; one row
 *    k): a quarter warp reads 8 consecutive pieces, all 32 banks once, and the
 *    two ty read the same pieces: 2 wavefronts. TN = 2 (32x32): a half warp
 *    reads 16 consecutive 8-byte pieces, all 32 banks once.
 * Per combination (A reads, B reads):
 *    A_KC=1 B_KC=0 (forward):          broadcast, one row  -> conflict-free
 *    A_KC=1 B_KC=1 (hidden gradients): broadcast, 8 rows   -> conflict-free
 *    A_KC=0 B_KC=0 (weight gradients): broadcast, one row  -> conflict-free
 *    A_KC=0 B_KC=1 (not launched):     broadcast, 8 rows   -> conflict-free
 * 128x64 forward, per warp and k-group of 4: 8 + 4 16-byte loads (8 + 8
 * wavefronts) for 128 FMAs per thread. Copies: with ABK = 32 a quarter warp
 * writes 8 consecutive pieces of one row (a KC row holds 8, a d-contiguous
 * row BD/4 >= 8): 8 distinct groups.
 *
 * 8x8 micro-tiles (128x64 with 128 threads, 128x128 with 256). On
 * sm_90 a warp's 16-byte load takes 4 shared-memory cycles (512 bytes at 128
 * per cycle) however much it broadcasts, so the cost is counted in loads:
 * 8x4 per thread spends 12 loads (48 cycles) per 4 steps on 128 FMAs per
 * lane (128 FMA-pipe cycles per warp): 16 warps per SM then ask 192 shared
 * cycles per 128 FMA cycles. 8x8 spends 16 loads (64 cycles) per 256 FMAs
 * per lane (256 cycles): 1 : 4 instead of 1.5 : 1. Loads per k-group of 4
 * and thread (group_8x8): A KC 8 (one per owned row m = ty + 16 i, 4 k
 * each), A d-contiguous 8 (per k one per run m = 4 ty + i, 64 + 4 ty + i);
 * B likewise with n = tx + (BN/8) j or 4 tx + j, BN/2 + 4 tx + j; so 16 in
 * all four combinations. 128x64: tx = tid % 8, ty = tid / 8, a warp holds
 * ty = 4w..4w+3 and a quarter warp one ty with tx = 0..7 (128x128: the 16 x
 * 16 map above).
 *  - A, either orientation: one address per quarter warp: broadcast.
 *  - B KC: a quarter warp reads rows r..r+7 of one k-group, groups
 *    (9 r + g) mod 8 all distinct: conflict-free.
 *  - B d-contiguous: a quarter warp reads 8 consecutive pieces of one row
 *    (4 tx, tx = 0..7; and the same 8 pieces BN/2 further on): the 32 banks
 *    once, conflict-free.
 * Copies: NT = 128 threads still take whole rows (PPR = 8 for KC, BD/4 = 16
 * or 32 d-contiguous), a quarter warp 8 consecutive pieces of one row.
 */
template <int BM, int BN, int NT, bool A_KC, bool B_KC, int EPI>
__device__ __forceinline__ void gemm_tile_async(const Gemm &g, int m0, int n0, int k_begin,
                                                int k_end, bool accumulate, float *smem)
{
    constexpr int TN = BN * BM / NT >= 64 ? 8 : (BN * BM / NT >= 16 ? 4 : 2);
    constexpr int TM = BM * BN / NT / TN;
    constexpr int TX = BN / TN; /* threads along n */
    static_assert(TX * (BM / TM) == NT, "tile shape");
    static_assert((TX == 16 && BM / TM == 16) || (TM == 8 && TN == 8 && TX == 8),
                  "the bank analysis assumes 16 x 16 threads, or 8 x 16 with 8x8 each");
    /* 8x8 micro-tiles take the streamed group_8x8. */
    constexpr bool T88 = TM == 8 && TN == 8;
    /* Register fit of the 8x8 kernels at 128 (ptxas, sm_90, CUDA 13): copy
     * addresses re-formed per slab when an operand is KC, and the k-groups
     * of a slab not unrolled when both are (found by -Xptxas -v: the
     * settings with the fewest spills; the forward's 128 x 128 kernels keep
     * 36 bytes, once per slab, outside the FMA loop). */
    constexpr bool REFORM = T88 && (A_KC || B_KC);
    constexpr bool ROLLED = T88 && A_KC && B_KC;
    using SA = AsyncSlab<BM, A_KC, NT>;
    using SB = AsyncSlab<BN, B_KC, NT>;

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    /* Stage s of A at as + s * SA::FLOATS, of B at bs + s * SB::FLOATS; only
     * min(ntiles, ASTAGES) stages are allocated (async_smem_for), and stage
     * indices t % ASTAGES with t < ntiles stay below that. */
    const int ntiles = (k_end - k_begin + ABK - 1) / ABK;
    const int nst = ntiles < ASTAGES ? ntiles : ASTAGES;
    float *as = smem, *bs = smem + nst * SA::FLOATS;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int n = n0 + async_own<BN, TN, B_KC>(tx, j);
            acc[i][j] =
                (EPI == EPI_BIAS || EPI == EPI_BIAS_ELU) ? (n < g.n ? g.bias[n] : 0.0f) : 0.0f;
        }

    /* With b_pre, B's copies of slabs 0 .. ASTAGES-2 are issued before
     * waiting for the previous launch (trunk_v2_pdl.cuh): they join the
     * first commit group, which the first wait covers. Not in the 128-row
     * tiles: at the batches that take them the early copies are worth
     * nothing, and the branch costs the 8x8 kernels' register schedule
     * (docs/perf-notes.md, decided settings). */
    const bool pre = BM < 128 && g.b_pre;
    if (pre) {
#pragma unroll
        for (int s = 0; s < ASTAGES - 1; s++)
            if (s < ntiles)
                SB::template issue<REFORM>(bs + s * SB::FLOATS, g.b, g.ldb, n0, g.n,
                                           k_begin + s * ABK, k_end, tid);
    }
    v2pdl::pdl_wait();
    v2pdl::pdl_trigger();

    /* Slabs 0 .. ASTAGES-2 in flight; one commit group per slab, empty
     * groups included, so that "slab t has landed" is always wait_group
     * ASTAGES-2 at iteration t. */
#pragma unroll
    for (int s = 0; s < ASTAGES - 1; s++) {
        if (s < ntiles) {
            const int k0 = k_begin + s * ABK;
            SA::template issue<REFORM>(as + s * SA::FLOATS, g.a, g.lda, m0, g.m, k0, k_end, tid);
            if (!pre)
                SB::template issue<REFORM>(bs + s * SB::FLOATS, g.b, g.ldb, n0, g.n, k0, k_end,
                                           tid);
        }
        v2async::commit();
    }

    for (int t = 0; t < ntiles; t++) {
        v2async::wait<ASTAGES - 2>(); /* this thread's copies of slab t are done */
        __syncthreads();              /* everyone's are, and everyone is done reading slab t-1 */
        const int tn = t + ASTAGES - 1;
        if (tn < ntiles) { /* into the stage of slab t-1, free since the barrier */
            const int ws = (unsigned)tn % ASTAGES;
            const int k0 = k_begin + tn * ABK;
            SA::template issue<REFORM>(as + ws * SA::FLOATS, g.a, g.lda, m0, g.m, k0, k_end, tid);
            SB::template issue<REFORM>(bs + ws * SB::FLOATS, g.b, g.ldb, n0, g.n, k0, k_end, tid);
        }
        v2async::commit();

        const int rs = (unsigned)t % ASTAGES;
        const float *a_s = as + rs * SA::FLOATS;
        const float *b_s = bs + rs * SB::FLOATS;
        const int kn = k_end - (k_begin + t * ABK); /* steps left in the reduction */
        if constexpr (T88) {
            if (kn >= ABK && ROLLED) {
#pragma unroll 1
                for (int q = 0; q < ABK / 4; q++)
                    group_8x8<BM, BN, A_KC, B_KC>(acc, a_s, b_s, ty, tx, q, 4);
            } else if (kn >= ABK) {
#pragma unroll
                for (int q = 0; q < ABK / 4; q++)
                    group_8x8<BM, BN, A_KC, B_KC>(acc, a_s, b_s, ty, tx, q, 4);
            } else { /* reduction tail: exactly kn more steps */
                int q = 0;
                for (; 4 * q + 4 <= kn; q++)
                    group_8x8<BM, BN, A_KC, B_KC>(acc, a_s, b_s, ty, tx, q, 4);
                if (4 * q < kn)
                    group_8x8<BM, BN, A_KC, B_KC>(acc, a_s, b_s, ty, tx, q, kn - 4 * q);
            }
        } else {
            float fa[TM][4], fb[TN][4];
            if (kn >= ABK) {
#pragma unroll
                for (int q = 0; q < ABK / 4; q++) {
                    load_group<BM, TM, A_KC>(fa, a_s, ty, q);
                    load_group<BN, TN, B_KC>(fb, b_s, tx, q);
                    group_steps<TM, TN>(acc, fa, fb, 4);
                }
            } else { /* reduction tail: exactly kn more steps */
                int q = 0;
                for (; 4 * q + 4 <= kn; q++) {
                    load_group<BM, TM, A_KC>(fa, a_s, ty, q);
                    load_group<BN, TN, B_KC>(fb, b_s, tx, q);
                    group_steps<TM, TN>(acc, fa, fb, 4);
                }
                if (4 * q < kn) {
                    load_group<BM, TM, A_KC>(fa, a_s, ty, q);
                    load_group<BN, TN, B_KC>(fb, b_s, tx, q);
                    group_steps<TM, TN>(acc, fa, fb, kn - 4 * q);
                }
            }
        }
    }
    v2async::wait<0>(); /* only empty groups remain; leave none behind */

    /* Epilogue, a row of the micro-tile at a time: every load of the row
     * (y, or the old value when accumulating) is issued before any store.
     * As far as the compiler knows c may alias y, so a load placed after a
     * store would wait for it: one global round trip per element instead of
     * one per row. */
    constexpr bool LOADS = EPI == EPI_ELU_GRAD || EPI == EPI_SUM;
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int m = m0 + async_own<BM, TM, A_KC>(ty, i);
        if (m >= g.m)
            continue;
        const size_t row = (size_t)m * g.ldc;
        float in[TN];
        if (LOADS && (EPI == EPI_ELU_GRAD || accumulate)) {
#pragma unroll
            for (int j = 0; j < TN; j++) {
                const int n = n0 + async_own<BN, TN, B_KC>(tx, j);
                in[j] = n < g.n ? (EPI == EPI_ELU_GRAD ? g.y : g.c)[row + n] : 0.0f;
            }
        }
#pragma unroll
        for (int j = 0; j < TN; j++) {
            const int n = n0 + async_own<BN, TN, B_KC>(tx, j);
            if (n >= g.n)
                continue;
            float v = acc[i][j];
            if (EPI == EPI_BIAS_ELU)
                v = auxtrunk_canon_elu(v);
            else if (EPI == EPI_ELU_GRAD)
                v = auxtrunk_canon_elu_grad(v, in[j]);
            else if (EPI == EPI_SUM && accumulate)
                v = in[j] + v;
            g.c[row + n] = v;
        }
    }
}

/* Shared memory of the async tile: `stages` slabs of both operands. */
template <int BM, int BN, bool A_KC, bool B_KC>
__host__ __device__ constexpr size_t async_smem_bytes(int stages)
{
    return (size_t)stages * (AsyncSlab<BM, A_KC>::FLOATS + AsyncSlab<BN, B_KC>::FLOATS) *
           sizeof(float);
}

/* A reduction of k steps uses min(ceil(k / ABK), ASTAGES) stages. */
template <int BM, int BN, bool A_KC, bool B_KC>
inline size_t async_smem_for(int k)
{
    const int nt = (k + ABK - 1) / ABK;
    return async_smem_bytes<BM, BN, A_KC, B_KC>(nt < ASTAGES ? nt : ASTAGES);
}

/* Dynamic shared memory of one launch over a k-step reduction, and the most
 * any launch of that kernel asks for (granted once in v2_prepare). */
template <int BM, int BN, bool A_KC, bool B_KC, bool VEC>
inline size_t launch_smem(int k)
{
    if (VEC)
        return async_smem_for<BM, BN, A_KC, B_KC>(k);
    return smem_for<BM, BN>(k);
}

template <int BM, int BN, bool A_KC, bool B_KC, bool VEC>
constexpr size_t max_smem()
{
    return VEC ? async_smem_bytes<BM, BN, A_KC, B_KC>(ASTAGES) : smem_bytes<BM, BN>(2);
}

/* ------------------------------------------------------- forward / dh -- */

/* One GEMM over the whole reduction (layer forward, hidden gradient). */
template <int BM, int BN, bool A_KC, bool B_KC, int EPI, bool VEC>
__global__ void __launch_bounds__(threads_of<BM, BN, VEC>(), min_blocks_of<BM, BN, VEC>())
    gemm_kernel(Gemm g, int k)
{
    extern __shared__ __align__(16) float smem[];
    if constexpr (VEC)
        gemm_tile_async<BM, BN, threads_of<BM, BN, true>(), A_KC, B_KC, EPI>(
            g, blockIdx.y * BM, blockIdx.x * BN, 0, k, false, smem);
    else {
        v2pdl::pdl_wait();
        v2pdl::pdl_trigger();
        gemm_tile<BM, BN, A_KC, B_KC, EPI, VEC>(g, blockIdx.y * BM, blockIdx.x * BN, 0, k, false,
                                                smem);
    }
}

/* ------------------------------------------------------------- backward -- */

/* The three dW problems and three db problems of one backward, for one
 * grouped launch: blockIdx.y is the batch chunk, blockIdx.x walks the dW
 * tiles of problems 0..2 and then the db column blocks of problems 3..5. */
struct GradGroup {
    Gemm dw[3];        /* c = destination of grid row 0 (see node_stride) */
    const float *g[3]; /* db sources [B, n] */
    float *db[3];
    int db_n[3];
    int tile_start[7]; /* prefix sums of blocks per problem */
    int tiles_n[3];    /* dW tiles along n */
    int batch;
    int nc;             /* chunks; grid row j walks chunks FOLD*j .. FOLD*j+FOLD-1 */
    size_t node_stride; /* floats between the rows' tree nodes (0: single chunk) */
    int accumulate;
};

/* Chunks per block of the weight-gradient launch when folding (fold_of):
 * a block walks the chunks 2j and 2j+1 one after the other and adds the
 * second's partial to the first's (left + right: the canonical tree's first
 * level) in its epilogue, so the workspace holds, and the tree reads, half as
 * many partials. */
constexpr int GRAD_FOLD = 2;
static_assert(GRAD_FOLD == 1 || GRAD_FOLD == 2, "the epilogue folds one pair: left + right");

/* Bias-gradient samples loaded ahead per thread (grad_chunk_kernel). */
constexpr int DB_BATCH = 16;
static_assert(DB_BATCH >= 1, "at least one sample per batch of loads");

template <int BM, int BN, bool VEC, int FOLD>
__global__ void __launch_bounds__(threads_of<BM, BN, VEC>(), min_blocks_of<BM, BN, VEC>())
    grad_chunk_kernel(GradGroup G)
{
    constexpr int NT = threads_of<BM, BN, VEC>(); /* db: columns per block */
    extern __shared__ __align__(16) float smem[];
    v2pdl::pdl_wait(); /* every operand comes from earlier launches */
    v2pdl::pdl_trigger();
    const int c0 = blockIdx.y * FOLD;
    const int c1 = min(G.nc, c0 + FOLD);
    const size_t off = (size_t)blockIdx.y * G.node_stride;
    const bool add_old = G.accumulate && G.node_stride == 0; /* single chunk, accumulate */
    int blk = blockIdx.x, p = 0;
    while (p < 6 && blk >= G.tile_start[p + 1])
        p++;
    blk -= G.tile_start[p];
    if (p < 3) {
        /* The second chunk of a pair adds the first's partial, which this
         * same thread stored (the ownership map does not depend on the
         * chunk). Everything a pass needs is re-derived from blockIdx and the
         * launch parameters, so nothing stays live across passes (at 128
         * registers the 8x8 tile has none to spare). */
#pragma unroll 1
        for (int i = 0; i < FOLD; i++) {
            const int c = (int)blockIdx.y * FOLD + i;
            if (c >= G.nc)
                break;
            if (i > 0)
                __syncthreads(); /* every warp is done with the ring */
            int tb = blockIdx.x, tp = 0;
            while (tp < 2 && tb >= G.tile_start[tp + 1])
                tp++;
            tb -= G.tile_start[tp];
            Gemm g = G.dw[tp];
            g.c += (size_t)blockIdx.y * G.node_stride;
            const int m0 = (tb / G.tiles_n[tp]) * BM, n0 = (tb % G.tiles_n[tp]) * BN;
            const int kb = c * CHUNK, ke = min(G.batch, kb + CHUNK);
            const bool acc_old = i > 0 || (G.accumulate && G.node_stride == 0);
            if constexpr (VEC)
                gemm_tile_async<BM, BN, NT, false, false, EPI_SUM>(g, m0, n0, kb, ke, acc_old,
                                                                   smem);
            else
                gemm_tile<BM, BN, false, false, EPI_SUM, VEC>(g, m0, n0, kb, ke, acc_old, smem);
        }
    } else {
        const int q = p - 3;
        const int n = blk * NT + threadIdx.x;
        if (n < G.db_n[q]) {
            const float *src = G.g[q];
            float node = 0.0f;
            const size_t ld = (size_t)G.db_n[q];
            for (int c = c0; c < c1; c++) {
                const int kb = c * CHUNK, ke = min(G.batch, kb + CHUNK);
                float acc = 0.0f;
                int b = kb;
                /* DB_BATCH loads in flight, then added in order: the chain is
                 * section 3's p = p + g[b,n], b ascending, and no longer
                 * waits one memory latency per sample (at B = 256 these
                 * blocks were the launch's critical path). */
                for (; b + DB_BATCH <= ke; b += DB_BATCH) {
                    float v[DB_BATCH];
#pragma unroll
                    for (int j = 0; j < DB_BATCH; j++)
                        v[j] = src[(size_t)(b + j) * ld + n];
#pragma unroll
                    for (int j = 0; j < DB_BATCH; j++)
                        acc = acc + v[j];
                }
                for (; b < ke; b++)
                    acc = acc + src[(size_t)b * ld + n];
                node = c > c0 ? node + acc : acc;
            }
            float *dst = G.db[q] + off + n;
            *dst = add_old ? *dst + node : node;
        }
    }
}

/* Deepest binary-counter stack: 2^14 chunks = 4M samples > AUXTRUNK_MAX_BATCH. */
constexpr int TREE_LEVELS = 14;
/* Partials loaded ahead per thread in the launch that writes the gradients. */
constexpr int TREE_BATCH = 8;
/* Nodes in the tree's input above which a first launch folds blocks of
 * TREE_SPAN of them (see tree_kernel); 0 < TREE_SPAN = 2^(TREE_SPAN_LEVELS-1). */
constexpr int TREE_SPLIT_MIN = 16;
constexpr int TREE_SPAN = 16, TREE_SPAN_LEVELS = 5, TREE_SPAN_BATCH = 8;

/* Combines nc chunk partials per element in the canonical pairwise tree.
 * Element e of the flat gradient (layout W1 b1 W2 b2 W3 b3) reads
 * ws[c * stride + e] for c = 0..nc-1. The level-by-level tree of
 * abi/auxtrunk_canon.h equals a binary counter: after partial c arrives,
 * equal-sized subtrees on the stack merge (left + right) like carries, and
 * the remaining stack is folded lowest level first (older, higher level on
 * the left). Stack indices are compile-time constants, so it stays in
 * registers. */
struct TreeArgs {
    float *ws;
    size_t stride;  /* floats between consecutive nodes */
    int nc;         /* nodes */
    int span;       /* nodes per thread; gridDim.y = ceil(nc / span) */
    int64_t begin;  /* the first element summed (the start of a gradient) */
    int64_t end[6]; /* prefix sums of gradient sizes; the last, where the sum ends */
    float *dst[6];
    int accumulate;
};

/* V consecutive elements per thread (V = 4: 16-byte loads and stores, when
 * every gradient's size is a multiple of 4 and every pointer 16-byte aligned,
 * so a group never straddles two gradients).
 *
 * Two levels of launches when there are many nodes: with span a power of
 * two, the nodes [y*span, min(nc, (y+1)*span)) form one node of the
 * canonical tree (every pair of its levels below span lies inside an aligned
 * block of span nodes, and a block cut short by nc is cut exactly as the
 * whole tree cuts it), so a first launch (span = TREE_SPAN, LEVELS =
 * TREE_SPAN_LEVELS) folds each block
 * (blockIdx.y) into the block's first node, in place, and a second launch
 * folds those (stride span * stride) into the gradients: the levels above
 * span, in the same order. gridDim.y == 1 marks the launch that writes the
 * gradients. Few levels keep the first launch's registers low, so that
 * more loads are in flight per multiprocessor. */
template <int V, int LEVELS, int BATCH>
__global__ void __launch_bounds__(NTHREADS) tree_kernel(TreeArgs T)
{
    using vec = typename std::conditional<V == 4, float4, float>::type;
    v2pdl::pdl_wait(); /* the partials come from the previous launch */
    v2pdl::pdl_trigger();
    const int64_t e = T.begin + ((int64_t)blockIdx.x * NTHREADS + threadIdx.x) * V;
    if (e >= T.end[5])
        return;
    float stack[LEVELS][V];
#pragma unroll
    for (int l = 0; l < LEVELS; l++)
#pragma unroll
        for (int i = 0; i < V; i++)
            stack[l][i] = 0.0f;
    unsigned count = 0;
    const int cb = blockIdx.y * T.span;
    const int ce = min(T.nc, cb + T.span);
    /* Nodes are fetched BATCH at a time, all loads in flight before the first
     * is combined: one thread walks up to 2^LEVELS - 1 nodes. */
    for (int c0 = cb; c0 < ce; c0 += BATCH) {
        vec vb[BATCH];
#pragma unroll
        for (int j = 0; j < BATCH; j++)
            if (c0 + j < ce)
                vb[j] = *reinterpret_cast<const vec *>(T.ws + (size_t)(c0 + j) * T.stride + e);
#pragma unroll
        for (int j = 0; j < BATCH; j++) {
            float v[V];
            memcpy(v, &vb[j], sizeof v);
            bool placed = c0 + j >= ce; /* past the last partial: nothing to place */
#pragma unroll
            for (int l = 0; l < LEVELS; l++) {
                if (!placed) {
                    if (count & (1u << l)) {
#pragma unroll
                        for (int i = 0; i < V; i++)
                            v[i] = stack[l][i] + v[i];
                    } else {
#pragma unroll
                        for (int i = 0; i < V; i++)
                            stack[l][i] = v[i];
                        placed = true;
                    }
                }
            }
            count += c0 + j < ce;
        }
    }
    float r[V];
    bool have = false;
#pragma unroll
    for (int l = 0; l < LEVELS; l++) {
        if (count & (1u << l)) {
#pragma unroll
            for (int i = 0; i < V; i++)
                r[i] = have ? stack[l][i] + r[i] : stack[l][i];
            have = true;
        }
    }
    if (gridDim.y > 1) { /* first level: the block's node replaces its first partial */
        vec out;
        memcpy(&out, r, sizeof out);
        *reinterpret_cast<vec *>(T.ws + (size_t)cb * T.stride + e) = out;
        return;
    }
    /* Which gradient e falls in: compile-time indices only (a dynamic index
     * into the parameter arrays would copy them to local memory). */
    float *d = T.dst[0] + e;
#pragma unroll
    for (int q = 1; q < 6; q++)
        if (e >= T.end[q - 1])
            d = T.dst[q] + (e - T.end[q - 1]);
    if (T.accumulate) {
        float old[V];
        memcpy(old, d, sizeof old);
#pragma unroll
        for (int i = 0; i < V; i++)
            r[i] = old[i] + r[i];
    }
    vec out;
    memcpy(&out, r, sizeof out);
    *reinterpret_cast<vec *>(d) = out;
}

/* ------------------------------------------------------------ transpose -- */

/* The hidden-gradient GEMMs reduce over a weight's columns (dh = d · Wᵀ):
 * read in place, both of their operands would be k-contiguous, the one
 * orientation whose 8x8 micro-tile does not fit 128 registers unrolled. One
 * launch copies W2 and W3 transposed into the workspace, so that they run the
 * forward's orientation (A k-contiguous, B d-contiguous). A copy moves
 * values only: the chains, and so the bits, are unchanged. */
/* Smallest batch whose hidden gradients take the transposed copies: below
 * it the copy's launch costs more than it saves (docs/perf-notes.md). */
constexpr int DH_TRANSPOSE_MIN_BATCH = 16384;
constexpr int TP = 32; /* transpose tile edge; blocks of TP x 8 threads */

struct TransposeArgs {
    const float *src[2]; /* [rows, cols] row-major */
    float *dst[2];       /* [cols, rows] row-major */
    int rows[2], cols[2];
    int tiles_c[2]; /* tiles along cols */
    int first[2];   /* first block of each matrix */
};

__global__ void __launch_bounds__(TP * 8) transpose_kernel(TransposeArgs T)
{
    __shared__ float t[TP][TP + 1];
    const bool q = blockIdx.x >= T.first[1]; /* selects, not indexes: no local copy */
    const int blk = blockIdx.x - (q ? T.first[1] : 0);
    const int tc = q ? T.tiles_c[1] : T.tiles_c[0];
    const int r0 = blk / tc * TP, c0 = blk % tc * TP;
    const int rows = q ? T.rows[1] : T.rows[0], cols = q ? T.cols[1] : T.cols[0];
    const float *src = q ? T.src[1] : T.src[0];
    float *dst = q ? T.dst[1] : T.dst[0];
    for (int i = threadIdx.y; i < TP; i += 8) {
        const int r = r0 + i, c = c0 + threadIdx.x;
        if (r < rows && c < cols)
            t[i][threadIdx.x] = src[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < TP; i += 8) {
        const int c = c0 + i, r = r0 + threadIdx.x;
        if (r < rows && c < cols)
            dst[(size_t)c * rows + r] = t[threadIdx.x][i];
    }
}

/* --------------------------------------------------------------- launch -- */

/* Tile configurations, largest first; a launch takes the largest one that
 * gives at least FULL_WAVE blocks, about one per multiprocessor (132 on the
 * H200). Larger tiles do more FMAs per shared-memory read; with far fewer
 * blocks than multiprocessors, smaller tiles win because the small batches
 * of RL are latency-bound. 128 rather than 132: the widths are powers of
 * two, so tile counts are too, and 128 blocks of the larger tile (4 SMs
 * idle) beat 512 of the next smaller one (docs/perf-notes.md, decided settings). */
constexpr int FULL_WAVE = 128;

inline int tiles(int m, int n, int bm, int bn) { return ((m + bm - 1) / bm) * ((n + bn - 1) / bn); }

inline int pick(int m, int n, int mult)
{
    if ((long long)tiles(m, n, 128, LARGE_BN) * mult >= FULL_WAVE)
        return 128;
    if ((long long)tiles(m, n, 64, 64) * mult >= FULL_WAVE)
        return 64;
    return 32;
}

/* Tile rows of a forward or hidden-gradient launch: when even the 16 x 32
 * tiles (1 x 2 per thread) fit one wave at one block per SM, they put twice
 * as many multiprocessors to work as 32 x 32 tiles; at B = 256 a 256-wide
 * layer is 64 blocks of 32 x 32 (64 of 132 SMs) or 128 of 16 x 32. Beyond
 * one wave (B = 384: 192 blocks, two on some SMs) they are slower, hence the
 * bound (docs/perf-notes.md, decided settings). Only for the async tile with A k-contiguous
 * (`row16`: VEC and A_KC), whose fragment loads have a 1-wide form. */
inline int pick_rows(int m, int n, bool row16)
{
    const int p = pick(m, n, 1);
    return row16 && p == 32 && tiles(m, n, 16, 32) <= FULL_WAVE ? 16 : p;
}

/* Tile of the weight-gradient launch with `rows` grid rows: sized by the
 * largest of the three problems (W1 or W2). */
inline int pick_grads(atk_dims_t d, int rows)
{
    const int wm = d.enc > d.h1 ? d.enc : d.h1, wn = d.h1 > d.h2 ? d.h1 : d.h2;
    return pick(wm, wn, rows);
}

/* Chunks per block of the weight-gradient launch for nc chunks: GRAD_FOLD
 * when the pairs alone still fill the GPU with the same tile (large
 * batches: half the partials, the same speed), else 1 (mid batches, where
 * halving the blocks would force a smaller tile). */
inline int fold_of(atk_dims_t d, int nc)
{
    if (GRAD_FOLD == 1 || nc <= 1)
        return 1;
    const int pairs = (nc + GRAD_FOLD - 1) / GRAD_FOLD;
    return pick_grads(d, pairs) == pick_grads(d, nc) ? GRAD_FOLD : 1;
}

/* Tree nodes (partials in the workspace) of a batch of nc chunks. */
inline int nodes_of(atk_dims_t d, int nc)
{
    const int f = fold_of(d, nc);
    return (nc + f - 1) / f;
}

/* One launch of a BM x BN tile kernel over the whole of g; pdl: as a
 * programmatic dependent of the previous launch (trunk_v2_pdl.cuh). */
template <int BM, int BN, bool A_KC, bool B_KC, int EPI, bool VEC>
cudaError_t launch_tile(const Gemm &g, int k, cudaStream_t s, bool pdl)
{
    return v2pdl::launch(
        gemm_kernel<BM, BN, A_KC, B_KC, EPI, VEC>, dim3((g.n + BN - 1) / BN, (g.m + BM - 1) / BM),
        dim3(threads_of<BM, BN, VEC>()), launch_smem<BM, BN, A_KC, B_KC, VEC>(k), s, pdl, g, k);
}

template <bool A_KC, bool B_KC, int EPI, bool VEC>
cudaError_t gemm_launch(const Gemm &g, int k, cudaStream_t s, bool pdl)
{
    constexpr bool ROW16 = VEC && A_KC;
    switch (pick_rows(g.m, g.n, ROW16)) {
    case 16:
        if constexpr (ROW16)
            return launch_tile<16, 32, A_KC, B_KC, EPI, VEC>(g, k, s, pdl);
        return cudaErrorInvalidConfiguration; /* pick_rows gives 16 only with ROW16 */
    case 128:
        return launch_tile<128, LARGE_BN, A_KC, B_KC, EPI, VEC>(g, k, s, pdl);
    case 64:
        return launch_tile<64, 64, A_KC, B_KC, EPI, VEC>(g, k, s, pdl);
    default:
        return launch_tile<32, 32, A_KC, B_KC, EPI, VEC>(g, k, s, pdl);
    }
}

/* A launch of the forward or the hidden gradients; pdl as in launch_tile. */
template <bool A_KC, bool B_KC, int EPI>
cudaError_t gemm(const Gemm &g, int k, bool vec, cudaStream_t s, bool pdl)
{
    return vec ? gemm_launch<A_KC, B_KC, EPI, true>(g, k, s, pdl)
               : gemm_launch<A_KC, B_KC, EPI, false>(g, k, s, pdl);
}

/* The gradients first..last of G (0: dW1, db1; 1: dW2, db2; 2: dW3, db3);
 * the others get no blocks. */
template <int BM, int BN>
cudaError_t launch_grads(GradGroup &G, int rows, int fold, bool vec, cudaStream_t s, bool pdl,
                         int first, int last)
{
    int t = 0;
    G.tile_start[0] = 0;
    for (int p = 0; p < 3; p++) {
        G.tiles_n[p] = (G.dw[p].n + BN - 1) / BN;
        if (p >= first && p <= last)
            t += tiles(G.dw[p].m, G.dw[p].n, BM, BN);
        G.tile_start[p + 1] = t;
    }
    /* db column blocks: one column per thread of the kernel's block */
    const int nt = vec ? threads_of<BM, BN, true>() : threads_of<BM, BN, false>();
    for (int q = 0; q < 3; q++) {
        if (q >= first && q <= last)
            t += (G.db_n[q] + nt - 1) / nt;
        G.tile_start[4 + q] = t;
    }
    const int k = G.batch < CHUNK ? G.batch : CHUNK; /* longest chunk */
    const dim3 grid(t, rows);
    const size_t smem = vec ? launch_smem<BM, BN, false, false, true>(k)
                            : launch_smem<BM, BN, false, false, false>(k);
    void (*kern)(GradGroup) = vec ? (fold > 1 ? grad_chunk_kernel<BM, BN, true, GRAD_FOLD>
                                              : grad_chunk_kernel<BM, BN, true, 1>)
                                  : (fold > 1 ? grad_chunk_kernel<BM, BN, false, GRAD_FOLD>
                                              : grad_chunk_kernel<BM, BN, false, 1>);
    return v2pdl::launch(kern, grid, dim3(nt), smem, s, pdl, G);
}

/* One launch of the tree: V = 4 (16-byte groups) when v4, else V = 1;
 * always a programmatic dependent of the launch that wrote its partials. */
template <int LEVELS, int BATCH>
cudaError_t launch_tree(const TreeArgs &T, dim3 grid, bool v4, cudaStream_t s)
{
    void (*k)(TreeArgs) = v4 ? tree_kernel<4, LEVELS, BATCH> : tree_kernel<1, LEVELS, BATCH>;
    return v2pdl::launch(k, grid, dim3(NTHREADS), 0, s, true, T);
}

/* 16-byte loads need every row stride a multiple of 4 floats and every base
 * pointer 16-byte aligned. */
inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

} /* namespace */

/* ------------------------------------------------------------ public API -- */

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

/* The forward and hidden-gradient kernels of one tile size. */
template <int BM, int BN, bool VEC>
cudaError_t touch_gemms()
{
    constexpr size_t fwd = max_smem<BM, BN, true, false, VEC>();
    constexpr size_t dh = max_smem<BM, BN, true, true, VEC>();
    static_assert(fwd <= 227 * 1024 && dh <= 227 * 1024, "dynamic shared memory of one block");
    cudaError_t e;
    if ((e = touch(gemm_kernel<BM, BN, true, false, EPI_BIAS_ELU, VEC>, fwd)) != cudaSuccess ||
        (e = touch(gemm_kernel<BM, BN, true, false, EPI_ELU_GRAD, VEC>, fwd)) != cudaSuccess ||
        (e = touch(gemm_kernel<BM, BN, true, false, EPI_BIAS, VEC>, fwd)) != cudaSuccess ||
        (e = touch(gemm_kernel<BM, BN, true, true, EPI_ELU_GRAD, VEC>, dh)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

/* Every kernel of one tile size: the GEMMs and the weight-gradient launch. */
template <int BM, int BN, bool VEC>
cudaError_t touch_config()
{
    constexpr size_t dw = max_smem<BM, BN, false, false, VEC>();
    static_assert(dw <= 227 * 1024, "dynamic shared memory of one block");
    cudaError_t e;
    if ((e = touch_gemms<BM, BN, VEC>()) != cudaSuccess ||
        (e = touch(grad_chunk_kernel<BM, BN, VEC, 1>, dw)) != cudaSuccess ||
        (e = touch(grad_chunk_kernel<BM, BN, VEC, GRAD_FOLD>, dw)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

} /* namespace */

extern "C" cudaError_t v2_prepare(void)
{
    cudaError_t e;
    if ((e = touch_config<128, LARGE_BN, true>()) != cudaSuccess ||
        (e = touch_config<128, LARGE_BN, false>()) != cudaSuccess ||
        (e = touch_config<64, 64, true>()) != cudaSuccess ||
        (e = touch_config<64, 64, false>()) != cudaSuccess ||
        (e = touch_config<32, 32, true>()) != cudaSuccess ||
        (e = touch_config<32, 32, false>()) != cudaSuccess ||
        (e = touch_gemms<16, 32, true>()) != cudaSuccess ||
        (e = touch(tree_kernel<1, TREE_LEVELS, TREE_BATCH>)) != cudaSuccess ||
        (e = touch(tree_kernel<4, TREE_LEVELS, TREE_BATCH>)) != cudaSuccess ||
        (e = touch(tree_kernel<1, TREE_SPAN_LEVELS, TREE_SPAN_BATCH>)) != cudaSuccess ||
        (e = touch(tree_kernel<4, TREE_SPAN_LEVELS, TREE_SPAN_BATCH>)) != cudaSuccess ||
        (e = touch(transpose_kernel)) != cudaSuccess)
        return e;
    return v2_rows_prepare();
}

extern "C" cudaError_t v2_transpose_hidden_weights(atk_dims_t d, const atk_params_t *p, float *w2t,
                                                   float *w3t, cudaStream_t stream)
{
    if (!p || !p->w2 || !p->w3 || !w2t || !w3t)
        return cudaErrorInvalidValue;
    TransposeArgs T = {};
    T.src[0] = p->w3, T.dst[0] = w3t, T.rows[0] = d.h2, T.cols[0] = d.aux;
    T.src[1] = p->w2, T.dst[1] = w2t, T.rows[1] = d.h1, T.cols[1] = d.h2;
    int blocks = 0;
    for (int q = 0; q < 2; q++) {
        T.tiles_c[q] = (T.cols[q] + TP - 1) / TP;
        T.first[q] = blocks;
        blocks += (T.rows[q] + TP - 1) / TP * T.tiles_c[q];
    }
    transpose_kernel<<<blocks, dim3(TP, 8), 0, stream>>>(T);
    return cudaGetLastError();
}

extern "C" size_t v2_workspace_floats(atk_dims_t d, int max_batch)
{
    /* The most tree nodes of any batch up to max_batch (folding makes the
     * count non-monotonic in the batch). */
    const int nc = auxtrunk_canon_chunks(max_batch);
    int nodes = 0;
    for (int c = 2; c <= nc; c++) {
        const int n = nodes_of(d, c);
        nodes = n > nodes ? n : nodes;
    }
    return v2_workspace_carve(d, max_batch, NULL).floats + (size_t)nodes * v2_grad_layout(d).off[6];
}

extern "C" cudaError_t v2_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                                  float *h1, float *h2, float *out, cudaStream_t stream)
{
    if (batch <= 0 || !p || !x || !h1 || !h2 || !out)
        return cudaErrorInvalidValue;
    cudaError_t e;
    const bool vec = d.enc % 4 == 0 && d.h1 % 4 == 0 && d.h2 % 4 == 0 && d.aux % 4 == 0 &&
                     aligned16(x) && aligned16(p->w1) && aligned16(p->w2) && aligned16(p->w3) &&
                     aligned16(h1) && aligned16(h2);
    if (batch <= ROWS_MAX_BATCH && v2_rows_forward_ok(d, p, x, h1, h2, out))
        return v2_rows_forward(d, p, x, batch, h1, h2, out, stream);
    /* Layers 2 and 3 start during the layer before them and copy their
     * weights before waiting for it (trunk_v2_pdl.cuh); layer 1 is an
     * ordinary launch, after whatever the caller queued. */
    Gemm g[3];
    v2gemm::forward_layers(g, d, batch, p, x, h1, h2, out);
    if ((e = gemm<true, false, EPI_BIAS_ELU>(g[0], d.enc, vec, stream, false)) != cudaSuccess)
        return e;
    if ((e = gemm<true, false, EPI_BIAS_ELU>(g[1].with_b_early(), d.h1, vec, stream, true)) !=
        cudaSuccess)
        return e;
    return gemm<true, false, EPI_BIAS>(g[2].with_b_early(), d.h2, vec, stream, true);
}

namespace {

/* The canonical tree of the gradients first..last (v2_tree_sum). */
cudaError_t tree_sum_of(atk_dims_t d, float *partials, int nodes, const atk_grads_t *gr,
                        int accumulate, int first, int last, cudaStream_t stream)
{
    if (!partials || !gr || nodes < 1 || first < 0 || first > last || last > 2)
        return cudaErrorInvalidValue;
    cudaError_t e;
    const v2_grad_layout_t L = v2_grad_layout(d);
    const size_t P = L.off[6];
    TreeArgs T = {};
    T.ws = partials;
    T.stride = P;
    T.nc = nodes;
    float *dst[6] = {gr->dw1, gr->db1, gr->dw2, gr->db2, gr->dw3, gr->db3};
    bool v4 = P % 4 == 0 && aligned16(partials);
    for (int i = 0; i < 6; i++) { /* the gradients after last end where last does */
        T.end[i] = (int64_t)L.off[(i < 2 * last + 2 ? i : 2 * last + 1) + 1];
        T.dst[i] = dst[i];
        v4 = v4 && L.off[i] % 4 == 0 && aligned16(dst[i]);
    }
    T.begin = (int64_t)L.off[2 * first];
    T.accumulate = accumulate;
    const size_t n = L.off[2 * last + 2] - L.off[2 * first];
    const unsigned blocks = (unsigned)(((v4 ? n / 4 : n) + NTHREADS - 1) / NTHREADS);
    if (nodes > TREE_SPLIT_MIN) { /* first level: blocks of TREE_SPAN nodes, in place */
        T.span = TREE_SPAN;
        const dim3 grid(blocks, (unsigned)((nodes + TREE_SPAN - 1) / TREE_SPAN));
        if ((e = launch_tree<TREE_SPAN_LEVELS, TREE_SPAN_BATCH>(T, grid, v4, stream)) !=
            cudaSuccess)
            return e;
        T.stride = P * TREE_SPAN;
        T.nc = (nodes + TREE_SPAN - 1) / TREE_SPAN;
    }
    T.span = T.nc;
    /* A tree of at most TREE_SPAN nodes needs only TREE_SPAN_LEVELS stack
     * levels: the shallow kernel's fewer registers keep more blocks, and
     * loads, in flight (mid batches: 2 to 16 chunks). */
    if (T.nc <= TREE_SPAN)
        return launch_tree<TREE_SPAN_LEVELS, TREE_SPAN_BATCH>(T, blocks, v4, stream);
    return launch_tree<TREE_LEVELS, TREE_BATCH>(T, blocks, v4, stream);
}

/* The weight-gradient launch (and tree) of the gradients first..last. */
cudaError_t grads_of(atk_dims_t d, const float *x, const float *h1, const float *h2,
                     const float *dout, const float *dh1, const float *dh2, float *partials,
                     int batch, const atk_grads_t *gr, int accumulate, bool vec, int first,
                     int last, bool pdl, cudaStream_t stream)
{
    const int nc = auxtrunk_canon_chunks(batch);
    const int fold = fold_of(d, nc);
    const int nodes = (nc + fold - 1) / fold; /* grid rows of the gradient launch */
    const v2_grad_layout_t L = v2_grad_layout(d);
    const size_t P = L.off[6];
    const bool direct = nc == 1;
    GradGroup G = {};
    const float *const acts[3] = {x, h1, h2}, *const grads[3] = {dh1, dh2, dout};
    float *const dw_dst[3] = {direct ? gr->dw1 : partials + L.off[0],
                              direct ? gr->dw2 : partials + L.off[2],
                              direct ? gr->dw3 : partials + L.off[4]};
    v2gemm::weight_grads(G.dw, d, acts, grads, dw_dst);
    G.g[0] = dh1, G.g[1] = dh2, G.g[2] = dout;
    G.db[0] = direct ? gr->db1 : partials + L.off[1];
    G.db[1] = direct ? gr->db2 : partials + L.off[3];
    G.db[2] = direct ? gr->db3 : partials + L.off[5];
    G.db_n[0] = d.h1, G.db_n[1] = d.h2, G.db_n[2] = d.aux;
    G.batch = batch;
    G.nc = nc;
    G.node_stride = direct ? 0 : P;
    G.accumulate = accumulate;

    cudaError_t e;
    switch (pick_grads(d, nodes)) { /* the tile of all three, whichever run */
    case 128:
        e = launch_grads<128, LARGE_BN>(G, nodes, fold, vec, stream, pdl, first, last);
        break;
    case 64:
        e = launch_grads<64, 64>(G, nodes, fold, vec, stream, pdl, first, last);
        break;
    default:
        e = launch_grads<32, 32>(G, nodes, fold, vec, stream, pdl, first, last);
        break;
    }
    if (e != cudaSuccess || direct)
        return e;
    return tree_sum_of(d, partials, nodes, gr, accumulate, first, last, stream);
}

/* v2_forks (eager: v2_forks_eager): side, fork and join given, side not
 * stream, and stream being captured (or, eager, not capturing at all). */
bool forks_when(cudaStream_t stream, cudaStream_t side, cudaEvent_t fork, cudaEvent_t join,
                bool eager)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    return side && fork && join && side != stream &&
           cudaStreamIsCapturing(stream, &cs) == cudaSuccess &&
           (cs == cudaStreamCaptureStatusActive || (eager && cs == cudaStreamCaptureStatusNone));
}

/* v2_backward, forking onto side where v2_forks (eager: v2_forks_eager)
 * says so. */
cudaError_t backward_impl(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                          const float *h2, const float *dout, int batch, const atk_grads_t *gr,
                          int accumulate, float *workspace, cudaStream_t stream,
                          cudaStream_t side, cudaEvent_t fork, cudaEvent_t join, bool eager)
{
    if (batch <= 0 || !p || !x || !h1 || !h2 || !dout || !gr || !workspace)
        return cudaErrorInvalidValue;
    cudaError_t e;
    const v2_workspace_t W = v2_workspace_carve(d, batch, workspace);
    float *const dh2 = W.dh2, *const dh1 = W.dh1, *const partials = W.partials;
    const bool vec = d.enc % 4 == 0 && d.h1 % 4 == 0 && d.h2 % 4 == 0 && d.aux % 4 == 0 &&
                     aligned16(x) && aligned16(h1) && aligned16(h2) && aligned16(dout) &&
                     aligned16(p->w2) && aligned16(p->w3) && aligned16(dh2) && aligned16(dh1);

    /* dh2_pre = (dout · W3ᵀ) ⊙ ELU'(h2): reduction over AUX, both operands
     * k-contiguous; dh1_pre likewise from dh2_pre and W2. */
    if (batch <= ROWS_MAX_BATCH && v2_rows_backward_ok(d, p, h1, h2, dout, dh2, dh1)) {
        if ((e = v2_rows_backward(d, p, h1, h2, dout, batch, dh2, dh1, stream)) != cudaSuccess)
            return e;
        return grads_of(d, x, h1, h2, dout, dh1, dh2, partials, batch, gr, accumulate, vec, 0, 2,
                        true, stream);
    }
    /* Large aligned batches read W2ᵀ and W3ᵀ from copies made just
     * before (B d-contiguous, the forward's orientation; no early copy of
     * W3ᵀ, which that launch writes); others read W2 [H1, H2] and
     * W3 [H2, AUX] in place (B k-contiguous). */
    const bool tr = vec && batch >= DH_TRANSPOSE_MIN_BATCH;
    if (tr && (e = v2_transpose_hidden_weights(d, p, W.w2t, W.w3t, stream)) != cudaSuccess)
        return e;
    const Gemm g2 = Gemm::shape(batch, d.h2)
                        .with_a(dout, d.aux)
                        .with_b(tr ? W.w3t : p->w3, tr ? d.h2 : d.aux)
                        .with_c(dh2, d.h2)
                        .with_y(h2);
    e = tr ? gemm<true, false, EPI_ELU_GRAD>(g2, d.aux, vec, stream, true)
           : gemm<true, true, EPI_ELU_GRAD>(g2, d.aux, vec, stream, false);
    if (e != cudaSuccess)
        return e;
    const Gemm g1 = Gemm::shape(batch, d.h1)
                        .with_a(dh2, d.h2)
                        .with_b(tr ? W.w2t : p->w2, tr ? d.h1 : d.h2)
                        .with_c(dh1, d.h1)
                        .with_y(h1)
                        .with_b_early();
    auto dh1_launch = [&]() {
        return tr ? gemm<true, false, EPI_ELU_GRAD>(g1, d.h2, vec, stream, true)
                  : gemm<true, true, EPI_ELU_GRAD>(g1, d.h2, vec, stream, true);
    };
    if (!forks_when(stream, side, fork, join, eager)) {
        if ((e = dh1_launch()) != cudaSuccess)
            return e;
        return grads_of(d, x, h1, h2, dout, dh1, dh2, partials, batch, gr, accumulate, vec, 0, 2,
                        true, stream);
    }
    /* Forked: dW2, dW3 (and their tree) need only dh2_pre, so they run on
     * side beside dh1_pre and dW1. */
    if ((e = v2_fork(stream, side, fork)) != cudaSuccess)
        return e;
    const cudaError_t es = grads_of(d, x, h1, h2, dout, dh1, dh2, partials, batch, gr, accumulate,
                                    vec, 1, 2, false, side);
    if ((e = dh1_launch()) == cudaSuccess)
        e = grads_of(d, x, h1, h2, dout, dh1, dh2, partials, batch, gr, accumulate, vec, 0, 0,
                     true, stream);
    return v2_join(stream, side, join, es, e);
}

} /* namespace */

extern "C" int v2_forks(cudaStream_t stream, cudaStream_t side, cudaEvent_t fork, cudaEvent_t join)
{
    return forks_when(stream, side, fork, join, false);
}

extern "C" int v2_forks_eager(cudaStream_t stream, cudaStream_t side, cudaEvent_t fork,
                              cudaEvent_t join)
{
    return forks_when(stream, side, fork, join, true);
}

extern "C" cudaError_t v2_fork(cudaStream_t stream, cudaStream_t side, cudaEvent_t fork)
{
    cudaError_t e = cudaEventRecord(fork, stream);
    return e != cudaSuccess ? e : cudaStreamWaitEvent(side, fork, 0);
}

extern "C" cudaError_t v2_join(cudaStream_t stream, cudaStream_t side, cudaEvent_t join,
                               cudaError_t side_error, cudaError_t stream_error)
{
    cudaError_t e = cudaEventRecord(join, side);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(stream, join, 0);
    return side_error != cudaSuccess ? side_error : stream_error != cudaSuccess ? stream_error : e;
}

extern "C" cudaError_t v2_backward(atk_dims_t d, const atk_params_t *p, const float *x,
                                   const float *h1, const float *h2, const float *dout, int batch,
                                   const atk_grads_t *gr, int accumulate, float *workspace,
                                   cudaStream_t stream)
{
    return backward_impl(d, p, x, h1, h2, dout, batch, gr, accumulate, workspace, stream, NULL,
                         NULL, NULL, false);
}

extern "C" cudaError_t v2_backward_forked(atk_dims_t d, const atk_params_t *p, const float *x,
                                          const float *h1, const float *h2, const float *dout,
                                          int batch, const atk_grads_t *gr, int accumulate,
                                          float *workspace, cudaStream_t stream,
                                          cudaStream_t side, cudaEvent_t fork, cudaEvent_t join)
{
    return backward_impl(d, p, x, h1, h2, dout, batch, gr, accumulate, workspace, stream, side,
                         fork, join, false);
}

extern "C" cudaError_t v2_backward_forked_eager(atk_dims_t d, const atk_params_t *p,
                                                const float *x, const float *h1, const float *h2,
                                                const float *dout, int batch,
                                                const atk_grads_t *gr, int accumulate,
                                                float *workspace, cudaStream_t stream,
                                                cudaStream_t side, cudaEvent_t fork,
                                                cudaEvent_t join)
{
    return backward_impl(d, p, x, h1, h2, dout, batch, gr, accumulate, workspace, stream, side,
                         fork, join, true);
}

extern "C" cudaError_t v2_tree_sum(atk_dims_t d, float *partials, int nodes, const atk_grads_t *gr,
                                   int accumulate, cudaStream_t stream)
{
    return tree_sum_of(d, partials, nodes, gr, accumulate, 0, 2, stream);
}

extern "C" cudaError_t v2_tree_sum_of(atk_dims_t d, float *partials, int nodes,
                                      const atk_grads_t *gr, int accumulate, int first, int last,
                                      cudaStream_t stream)
{
    return tree_sum_of(d, partials, nodes, gr, accumulate, first, last, stream);
}
