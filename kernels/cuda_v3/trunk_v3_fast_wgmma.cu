/*
 * trunk_v3_fast_wgmma.cu — cuda-v3's Hopper layer GEMM for fast mode: one
 * forward layer, out = act(a · W + b), or one hidden gradient of the
 * backward, dh = (d · Wᵀ) ⊙ ELU'(y), on the TF32 tensor cores through
 * wgmma (sm_90a), the activations (or d) streamed into shared memory by the
 * bulk tensor copy engine (TMA) on mbarriers; and the backward's weight and
 * bias gradients on the same wgmma (v3_wgmma_wgrad_kernel, described there:
 * their operands are transposed on the way into shared memory, by ordinary
 * loads; from V3_WGMMA_WGRAD_TMA_MIN_BATCH v3_wgmma_wgrad_tma_kernel, the
 * same transposes from row-major boxes that TMA brings in; from
 * V3_WGMMA_WGRAD_WIDE_MIN_BATCH v3_wgmma_wgrad_wide_kernel, the same on
 * tiles twice as wide); and dh2_pre with dW3 and db3 in one launch
 * (v3_wgmma_dh2_dw3_kernel, which fast mode does not pick: V3_WGMMA_DW3).
 * Built for sm_90a only
 * (kernels/cuda_v3/CMakeLists.txt): on any other device the kernels have no
 * image and v3_wgmma_available() answers 0. Fast mode calls them from
 * V3_WGMMA_MIN_BATCH (trunk_v3_fast.h, docs/perf-notes-v3-fast.md); their
 * test is tests/cuda/test_v3_fast_wgmma.cu.
 *
 * What it guarantees: deterministic results (a fixed k order per output, no
 * atomics), nothing allocated, nothing synchronised, one launch on the
 * caller's stream (graph-capturable: the tensor map is a kernel parameter).
 * What it does not do: round a like cvt.rn does. The tensor cores read
 * the fp32 bits of a as TF32 by dropping the low 13 mantissa bits
 * (truncation, at most 2^-10 relative); W is rounded to nearest (cvt.rn)
 * as it is staged. See trunk_v3_fast.h for the tolerance.
 *
 * One block of two warpgroups (256 threads, one block per SM) owns a TN-
 * column slice of the layer's output and walks row tiles of the batch
 * (a persistent grid: blocks n-slice-major, so the blocks of one row tile
 * run side by side and share it in L2). A tile is tall, 128 rows x 128
 * columns (each warpgroup 64 rows and all the columns); narrow, 128 x 64,
 * for batches whose tall tiles would leave most multiprocessors idle
 * (auto_tile): twice the blocks, each with half the work and half the
 * slice; or short, 64 x 128 (both warpgroups on the same rows, 64 columns
 * each), measured for comparison only:
 *   - the B slice [TN n, K] is staged once per block by ordinary loads into
 *     shared memory, K-major in 32-float slabs with the 128-byte swizzle the
 *     wgmma descriptors name (the tf32 wgmma takes K-major operands only):
 *     for a forward layer Wᵀ (W is n-contiguous: a transpose on the way),
 *     for a hidden gradient W's rows as they are (k-contiguous already);
 *     then fence.proxy.async for the tensor cores;
 *   - the activations arrive as [tile rows, 32 k] slabs (16 or 8 KiB, the
 *     TMA box, 128-byte swizzle, zero fill past B and K) in a ring of NS
 *     buffers (ring_stages: FWD_STAGES or STAGES), each completing on its
 *     mbarrier (expect_tx by thread 0, which issues every copy); the ring
 *     runs across row tiles, so the next tile's first slabs load during this
 *     tile's epilogue;
 *   - per slab each warpgroup issues four m64n128k8 wgmmas (tall: its 64
 *     rows) or m64n64k8 (short: its 64 columns) and waits for the previous
 *     slab's, so that the tensor cores run while that slab's stage is given
 *     back: after a block barrier thread 0 refills it with the slab NS
 *     after it;
 *   - epilogue from the accumulators: + bias, ELU (hardware exponential), or
 *     ⊙ ELU'(y) with the record's elements loaded before the tile's wgmmas;
 *     one 8-byte store per accumulator pair (each warp store covers whole
 *     32-byte sectors).
 */
#include "trunk_v3_fast.h"

#include <cuda.h> /* CUtensorMap and its enums; the driver is reached through the runtime */

#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "trunk_v2_pdl.cuh"
#include "trunk_v3_sync.cuh"
#include "trunk_v3_tmap.h"
#include "trunk_v3_wgmma.cuh"

namespace {

using v3sync::mbar_expect_tx;
using v3sync::mbar_init;
using v3sync::mbar_wait_cta;
using v3sync::smem_u32;

constexpr int NT = 256;           /* two warpgroups */
constexpr int BM = 128;           /* batch rows per tile: 64 per warpgroup (the weight
                                     gradients' tiles, and the layer GEMM's tall tiles) */
constexpr int BM_SHORT = 64;      /* the layer GEMM's short tiles: both warpgroups on
                                     the same 64 rows, 64 of the block's columns each */
constexpr int BN = 128;           /* output columns per block (wgmma n): the weight
                                     gradients' tiles, the layer GEMM's tall and short ones */
constexpr int BN_NARROW = 64;     /* the layer GEMM's narrow tiles: 128 rows x 64 columns */
constexpr int BK = 32;            /* floats per slab row: 128 bytes, the swizzle span */
constexpr int KSTEP = 8;          /* k of one tf32 wgmma */
constexpr int STAGES = 4;         /* activation ring depth of the hidden gradients */
constexpr int FWD_STAGES = 6;     /* and of the forward layers */
constexpr int SLAB = BM * BK * 4; /* bytes of one activation slab (= one Wᵀ slab) */
constexpr int KMAX = 256;         /* widest K whose Wᵀ slice stays resident */
constexpr int PAIRED_STAGES = 3;  /* activation ring depth of paired narrow tiles */
/* Whether the ring's mbarriers of a layer block with TM x TN tiles and NS
 * stages live in the alignment slack: only for paired narrow tiles, which
 * need the room to fit two blocks on an SM; every other shape keeps them
 * after the ring, where they have always been. */
template <int TM, int TN, int NS>
__host__ __device__ constexpr bool bars_in_slack()
{
    return TM == BM && TN == BN_NARROW && NS == PAIRED_STAGES;
}
/* Shared memory of the layer GEMM with TM x TN tiles and NS stages: the Wᵀ
 * slice (TN columns), the ring of TM-row slabs, 1024 bytes of slack for the
 * 1024-byte alignment, and the ring's mbarriers, after the ring or, for
 * paired tiles, in the slack (before the aligned base where the slack
 * there is large enough, else after the ring, where the rest of it is). */
template <int TM, int TN, int NS>
constexpr int layer_smem_bytes()
{
    static_assert(NS * 8 <= 512, "the mbarriers fit in either part of the slack");
    return 1024 /* alignment slack */ + KMAX / BK * (TN * BK * 4) + NS * (TM * BK * 4) +
           (bars_in_slack<TM, TN, NS>() ? 0 : NS * 8);
}
constexpr int SMEM_BYTES = layer_smem_bytes<BM, BN, FWD_STAGES>(); /* the largest of the shapes */
constexpr int SMEM_OPTIN = 227 * 1024; /* the most a block may opt in to on sm_90 */
/* Two paired narrow blocks share an SM (228 KiB, 1 KiB reserved per block). */
static_assert(2 * (layer_smem_bytes<BM, BN_NARROW, PAIRED_STAGES>() + 1024) <= 228 * 1024,
              "two paired narrow blocks fit on an SM");
static_assert(BN * BK * 4 == SLAB, "a Wᵀ slab and an activation slab have one shape");
/* The weight gradients' ring: WG_STAGES stages of an A and a B slab. A
 * thread stages WG_ROWS batch rows of one column of each operand per slab. */
constexpr int WG_STAGES = 3;
constexpr int WG_ROWS = BK * BM / NT;
constexpr int WG_SMEM_BYTES = 1024 /* alignment slack */ + WG_STAGES * 2 * SLAB;
static_assert(BM == BN && NT % BM == 0, "a thread's column is one of both operands' tiles");
static_assert(WG_ROWS % 4 == 0, "a thread's rows are whole 16-byte chunks");
static_assert(NT / BM * BN * 4 <= WG_STAGES * 2 * SLAB, "the bias sums' scratch fits in the ring");
/* Most blocks of the grouped weight-gradient launch: tiles x chunks (two per SM). */
constexpr int WG_MAX_BLOCKS = 264;

/* What a launch computes from the accumulators acc = a · B (B from w, as the
 * staging reads it). */
enum Epilogue {
    EPI_BIAS_ACT = 0, /* c = act(acc + bias[n]): a forward layer (w [K, N]) */
    EPI_ELU_GRAD = 1  /* c = acc ⊙ ELU'(y): a hidden gradient (w [N, K]) */
};

/* The ring depth of a layer launch: six slabs for the forward, four for the
 * hidden gradients, where six measured slower on the H200 for a reason not
 * yet known (docs/perf-notes-v3-fast.md, "A deeper activation ring in the
 * layer GEMM", "Six stages for the forward only"). */
template <int EPI>
__host__ __device__ constexpr int ring_stages()
{
    return EPI == EPI_BIAS_ACT ? FWD_STAGES : STAGES;
}

/* Staging of B for the hidden gradients: w [N, K] k-contiguous (the layer's
 * weight as stored, its rows the gradient's columns), copied as it is. */
constexpr int STAGING_ROWS = 0;

struct Layer {
    const float *w;    /* [K, N] n-contiguous, or [N, K] k-contiguous (STAGING_ROWS) */
    const float *bias; /* EPI_BIAS_ACT: [N] */
    const float *y;    /* EPI_ELU_GRAD: [M, N], the record whose ELU' scales acc */
    float *c;          /* [M, N] */
    int m, n, k;
    int elu;
    int pdl; /* launched as a programmatic dependent (v3_wgmma_layer) */
    int tiles_n, tiles_m;
};

/* ------------------------------------------------------------ device -- */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

using v3wgmma::bulk_commit;
using v3wgmma::bulk_wait_all;
using v3wgmma::bulk_wait_read;
using v3wgmma::desc_sw128;
using v3wgmma::tma_load_2d;
using v3wgmma::tma_store_2d;
using v3wgmma::wgmma_commit;
using v3wgmma::wgmma_fence;
using v3wgmma::wgmma_m64n128k8;
using v3wgmma::wgmma_m64n256k8;
using v3wgmma::wgmma_m64n64k8;
using v3wgmma::wgmma_wait_all;
using v3wgmma::wgmma_wait_one;

/* Byte offset of element (row r, k) of a slab in the 128-byte swizzle: the
 * 16-byte chunk index is xored with the row's index within its atom, as the
 * TMA writes it (the slab base 1024-aligned). */
__device__ __forceinline__ unsigned sw128_off(int r, int k)
{
    return (unsigned)(r * 128 + (((k >> 2) ^ (r & 7)) << 4) + (k & 3) * 4);
}

__device__ __forceinline__ float to_tf32_rn(float f)
{
    uint32_t r;
    asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return __uint_as_float(r);
}

/* ELU from the hardware exponential, as cuda-v2's fast mode (trunk_v2_fast.cu). */
__device__ __forceinline__ float elu_fast(float z) { return z > 0.0f ? z : __expf(z) - 1.0f; }

/* One slab's k8 steps of a warpgroup: acc += A · B over BK, in k order. */
template <int NACC>
__device__ __forceinline__ void wgmma_slab(float (&acc)[NACC], unsigned sa, unsigned sb)
{
#pragma unroll
    for (int j = 0; j < BK / KSTEP; j++) {
        if constexpr (NACC == 128)
            wgmma_m64n256k8(acc, desc_sw128(sa + 32 * j), desc_sw128(sb + 32 * j));
        else if constexpr (NACC == 64)
            wgmma_m64n128k8(acc, desc_sw128(sa + 32 * j), desc_sw128(sb + 32 * j));
        else
            wgmma_m64n64k8(acc, desc_sw128(sa + 32 * j), desc_sw128(sb + 32 * j));
    }
}

/* Wᵀ staging, variant 1 (V3_WGMMA_STAGING_SCALAR): thread tid takes column
 * n = tid % 128 of every other group of 4 k (the four loads of a group read
 * four rows of W, each coalesced across the warp), rounds, and stores one
 * 16-byte chunk (8 consecutive lanes: 8 rows, 8 distinct chunk columns). */
template <int TN>
__device__ __forceinline__ void stage_wt_scalar(unsigned char *wt, const Layer &L, int n0, int ks_n)
{
    constexpr int WSLAB = TN * BK * 4;
    const int tid = threadIdx.x, n = tid & (TN - 1);
    const bool in_n = n0 + n < L.n;
    const float *col = L.w + n0 + n;
#pragma unroll 8
    for (int kc = tid / TN; kc < ks_n * (BK / 4); kc += NT / TN) {
        const int k0 = kc * 4;
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            v[e] = in_n && k0 + e < L.k ? to_tf32_rn(__ldg(col + (size_t)(k0 + e) * L.n)) : 0.0f;
        *reinterpret_cast<float4 *>(wt + (k0 / BK) * WSLAB + sw128_off(n, k0 % BK)) =
            make_float4(v[0], v[1], v[2], v[3]);
    }
}

/* Column c of a 4 x 4 block held as four rows (compile-time indices only). */
__device__ __forceinline__ float4 block_column(const float4 (&r)[4], int c)
{
    return c == 0   ? make_float4(r[0].x, r[1].x, r[2].x, r[3].x)
           : c == 1 ? make_float4(r[0].y, r[1].y, r[2].y, r[3].y)
           : c == 2 ? make_float4(r[0].z, r[1].z, r[2].z, r[3].z)
                    : make_float4(r[0].w, r[1].w, r[2].w, r[3].w);
}

/* Wᵀ staging, variant 2 (V3_WGMMA_STAGING_BLOCK4), shown for a 128-column
 * slice (a 64-column one gives each half-warp its own 4-row blocks, lane g
 * then columns 4 (g mod 16) …): lane g of a warp takes
 * columns 4g … 4g+3 of the slice, warp w the 4-row blocks w, w+8, …: four
 * 16-byte loads per block (each 512 contiguous bytes across the warp), a
 * 4 x 4 transpose in registers, four 16-byte stores of 4 consecutive k. Store
 * s of lane g writes column (s + g/2) mod 4, so that the 8 lanes of a
 * quarter-warp write rows 4g + c with 8 distinct values of (row mod 8): 8
 * distinct chunk columns of the swizzle, no bank conflict. Every load of a
 * thread (32 for a 128-column slice, 16 for a 64-column one) is issued
 * before its first store, so the slice costs one trip to L2, not one per
 * block of rows (a block past K loads zeros and stores nothing). w is
 * 16-byte aligned and n a multiple of 4 (the host checks). */
template <int TN>
__device__ __forceinline__ void stage_wt_block4(unsigned char *wt, const Layer &L, int n0, int ks_n)
{
    constexpr int WSLAB = TN * BK * 4;
    constexpr int LANES = TN / 4;   /* lanes across the slice's columns */
    constexpr int SUB = 32 / LANES; /* 4-row blocks per warp at a time */
    constexpr int PER_PASS = NT / 32 * SUB;
    constexpr int PASSES = KMAX / 4 / PER_PASS;
    const int tid = threadIdx.x, g = tid & 31, n = 4 * (g % LANES);
    const int kb0 = (tid >> 5) * SUB + g / LANES; /* the thread's first 4-row block */
    const bool in_n = n0 + n < L.n;
    const float *col = L.w + n0 + n;
    float4 r[PASSES][4];
#pragma unroll
    for (int i = 0; i < PASSES; i++) {
        const int kb = kb0 + PER_PASS * i;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int k = 4 * kb + e;
            r[i][e] = in_n && k < L.k
                          ? __ldg(reinterpret_cast<const float4 *>(col + (size_t)k * L.n))
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
#pragma unroll
    for (int i = 0; i < PASSES; i++) {
        const int kb = kb0 + PER_PASS * i;
        if (kb >= ks_n * (BK / 4))
            break;
#pragma unroll
        for (int e = 0; e < 4; e++)
            r[i][e] = make_float4(to_tf32_rn(r[i][e].x), to_tf32_rn(r[i][e].y),
                                  to_tf32_rn(r[i][e].z), to_tf32_rn(r[i][e].w));
        const int k0 = 4 * kb;
#pragma unroll
        for (int st = 0; st < 4; st++) {
            const int c = (st + (g >> 1)) & 3;
            *reinterpret_cast<float4 *>(wt + (k0 / BK) * WSLAB + sw128_off(n + c, k0 % BK)) =
                block_column(r[i], c);
        }
    }
}

/* B staging for the hidden gradients (STAGING_ROWS): w is [N, K] with k
 * contiguous, so B (element (k, n) = w[n][k]) is K-major as stored: the
 * slice's rows n0 … n0+TN-1 are copied row for row, 16 bytes at a time,
 * rounded (cvt.rn). Chunk c of the slice is slab c / (8 TN), row (c / 8) % TN,
 * 16-byte column c % 8: eight lanes read one 128-byte row segment and write
 * one 128-byte swizzled row (no bank conflict); every load of a thread is
 * issued before its stores. w is 16-byte aligned and k a multiple of 4. */
template <int TN>
__device__ __forceinline__ void stage_w_rows(unsigned char *wt, const Layer &L, int n0, int ks_n)
{
    constexpr int WSLAB = TN * BK * 4;
    constexpr int CHUNKS = TN * BK / 4;   /* 16-byte chunks per slab */
    constexpr int PER_SLAB = CHUNKS / NT; /* chunks per thread and slab */
    constexpr int MAXC = KMAX / BK * PER_SLAB;
    const int tid = threadIdx.x, count = ks_n * PER_SLAB;
    float4 v[MAXC];
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = tid + NT * i, r = (c >> 3) & (TN - 1), k = (c / CHUNKS) * BK + (c & 7) * 4;
        v[i] = i < count && n0 + r < L.n && k < L.k
                   ? __ldg(reinterpret_cast<const float4 *>(L.w + (size_t)(n0 + r) * L.k + k))
                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        if (i >= count)
            break;
        const int c = tid + NT * i, r = (c >> 3) & (TN - 1), q = c & 7;
        *reinterpret_cast<float4 *>(wt + (c / CHUNKS) * WSLAB + sw128_off(r, q * 4)) = make_float4(
            to_tf32_rn(v[i].x), to_tf32_rn(v[i].y), to_tf32_rn(v[i].z), to_tf32_rn(v[i].w));
    }
}

/* Weight gradients: rows b … b+WG_ROWS-1 of column c of t [rows, width],
 * zero past b_end or the width. Across a warp (32 consecutive columns) each
 * load is 128 contiguous bytes. */
__device__ __forceinline__ void load_column(float (&v)[WG_ROWS], const float *t, int width, int c,
                                            int b, int b_end)
{
    const float *p = t + (size_t)b * width + c;
    if (c < width && b + WG_ROWS <= b_end) {
#pragma unroll
        for (int e = 0; e < WG_ROWS; e++)
            v[e] = __ldg(p + (size_t)e * width);
    } else {
#pragma unroll
        for (int e = 0; e < WG_ROWS; e++)
            v[e] = c < width && b + e < b_end ? __ldg(p + (size_t)e * width) : 0.0f;
    }
}

/* v (WG_ROWS consecutive batch rows of one column) rounded and stored into
 * row r of a K-major slab at k = k0 …: 16-byte stores of 4 consecutive k.
 * The 8 lanes of a quarter-warp store 8 consecutive rows, hence 8 distinct
 * chunk columns of the swizzle: no bank conflict, and the column is the
 * lane's own, so no select. */
__device__ __forceinline__ void store_column(unsigned char *slab, const float (&v)[WG_ROWS], int r,
                                             int k0)
{
#pragma unroll
    for (int q = 0; q < WG_ROWS / 4; q++)
        *reinterpret_cast<float4 *>(slab + sw128_off(r, k0 + 4 * q)) =
            make_float4(to_tf32_rn(v[4 * q]), to_tf32_rn(v[4 * q + 1]), to_tf32_rn(v[4 * q + 2]),
                        to_tf32_rn(v[4 * q + 3]));
}

#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

template <int STAGING, int EPI, int TM, int TN, int NS>
__global__ void __launch_bounds__(NT, 1)
    v3_wgmma_layer_kernel(const __grid_constant__ CUtensorMap a, Layer L)
{
    static_assert((TM == BM && (TN == BN || TN == BN_NARROW)) || (TM == BM_SHORT && TN == BN),
                  "tall, narrow or short tiles");
    /* A tall or narrow tile gives each warpgroup 64 rows and the block's TN
     * columns, a short one each warpgroup the tile's 64 rows and 64 columns. */
    constexpr int ASLAB = TM * BK * 4; /* bytes of one activation slab */
    constexpr int WSLAB = TN * BK * 4; /* bytes of one Wᵀ slab */
    constexpr int WT_BYTES = KMAX / BK * WSLAB;
    constexpr int WN = TM == BM ? TN : TN / 2; /* columns of one warpgroup */
    constexpr int NACC = WN / 2;               /* its accumulators per thread */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_u32(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u; /* the swizzle atoms need 1024-byte alignment */
    unsigned char *const gbase = smem_raw + (base - raw);
    const unsigned wt = base, ring = base + WT_BYTES;
    /* the mbarriers (layer_smem_bytes) */
    const unsigned bars = bars_in_slack<TM, TN, NS>() && base - raw >= 8u * NS
                              ? base - 8u * NS
                              : ring + NS * ASLAB;

    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = (tid >> 5) & 3;
    const int nt = blockIdx.x % L.tiles_n, group = blockIdx.x / L.tiles_n;
    const int groups = gridDim.x / L.tiles_n;
    const int n0 = nt * TN;
    const int ks_n = (L.k + BK - 1) / BK;
    const int tiles = group < L.tiles_m ? (L.tiles_m - group + groups - 1) / groups : 0;
    const int total = tiles * ks_n; /* slabs this block consumes, in order */

    /* slab t: row tile group + (t / ks_n) * groups, k slab t % ks_n, stage t % NS */
    const CUtensorMap *const map = &a;
    auto issue = [&](int t) {
        const int s = t % NS;
        const unsigned bar = bars + 8 * s;
        mbar_expect_tx(bar, ASLAB);
        tma_load_2d(ring + s * ASLAB, map, (t % ks_n) * BK, (group + (t / ks_n) * groups) * TM,
                    bar);
    };
    if (tid == 0) {
        for (int s = 0; s < NS; s++)
            mbar_init(bars + 8 * s, 1);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        if (!L.pdl) /* the activations are ready: load them while W is staged */
            for (int t = 0; t < NS && t < total; t++)
                issue(t);
    }

    /* B slice: the weights, which no launch of the call writes, so a
     * dependent launch stages them while its predecessor still runs */
    if (STAGING == STAGING_ROWS)
        stage_w_rows<TN>(gbase, L, n0, ks_n);
    else if (STAGING == V3_WGMMA_STAGING_BLOCK4)
        stage_wt_block4<TN>(gbase, L, n0, ks_n);
    else
        stage_wt_scalar<TN>(gbase, L, n0, ks_n);
    v2pdl::pdl_wait(); /* the predecessor's activations (and record) are complete */
    v2pdl::pdl_trigger();
    if (L.pdl && tid == 0)
        for (int t = 0; t < NS && t < total; t++)
            issue(t);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* for the tensor cores */
    __syncthreads(); /* Wᵀ staged, mbarriers initialised */

    /* this thread's accumulator row within the tile, its warpgroup's first
     * column, its accumulator column within an n8 */
    const int rw = (TM == BM ? wg * 64 : 0) + warp * 16 + (lane >> 2);
    const int cw = n0 + (TM == BM ? 0 : wg * WN);
    const int cq = 2 * (lane & 3);
    float bias[NACC / 2];
#pragma unroll
    for (int j = 0; j < WN / 8; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int c = cw + 8 * j + cq + e;
            bias[2 * j + e] = EPI == EPI_BIAS_ACT && c < L.n ? __ldg(L.bias + c) : 0.0f;
        }

    for (int i = 0; i < tiles; i++) {
        const int m0 = (group + i * groups) * TM;
        /* ELU': this thread's NACC elements of the record, loaded before the
         * tile's wgmmas so that they arrive while the tensor cores run. */
        float2 y[2][WN / 8];
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int j = 0; j < WN / 8; j++) {
                const int row = m0 + rw + 8 * h, col = cw + 8 * j + cq;
                y[h][j] = EPI == EPI_ELU_GRAD && row < L.m && col < L.n
                              ? *reinterpret_cast<const float2 *>(L.y + (size_t)row * L.n + col)
                              : make_float2(0.0f, 0.0f);
            }
        float acc[NACC];
#pragma unroll
        for (int r = 0; r < NACC; r++)
            acc[r] = 0.0f;
        /* Slab t's wgmmas run while slab t - 1's stage is given back: after
         * wgmma_wait_one every warpgroup's group t - 1 is complete, after
         * the barrier every warpgroup's, so thread 0 refills that stage. */
        for (int ks = 0; ks < ks_n; ks++) {
            const int t = i * ks_n + ks, s = t % NS;
            mbar_wait_cta(bars + 8 * s, (unsigned)(t / NS) & 1u);
            wgmma_fence();
            /* a tall or narrow tile: this warpgroup's 64 rows of the slab, all
             * of Wᵀ's slab; a short one: the slab, this warpgroup's 64 rows of Wᵀ's
             * (8 swizzle atoms, so the base stays 1024-aligned) */
            const unsigned sa = ring + s * ASLAB + (TM == BM ? wg * (ASLAB / 2) : 0);
            const unsigned sb = wt + ks * WSLAB + (TM == BM ? 0 : wg * (WSLAB / 2));
            wgmma_slab(acc, sa, sb);
            wgmma_commit();
            wgmma_wait_one();
            __syncthreads(); /* every warpgroup is done with slab t - 1's stage */
            if (tid == 0 && t >= 1 && t - 1 + NS < total)
                issue(t - 1 + NS);
        }
        wgmma_wait_all(); /* the tile's accumulators are final */

#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = m0 + rw + 8 * h;
            if (row >= L.m)
                continue;
            float *dst = L.c + (size_t)row * L.n + cw + cq;
#pragma unroll
            for (int j = 0; j < WN / 8; j++) {
                if (cw + 8 * j + cq >= L.n) /* n is a multiple of 4: pairs are whole */
                    break;
                float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
                if (EPI == EPI_ELU_GRAD) {
                    v0 = auxtrunk_canon_elu_grad(v0, y[h][j].x);
                    v1 = auxtrunk_canon_elu_grad(v1, y[h][j].y);
                } else {
                    v0 += bias[2 * j], v1 += bias[2 * j + 1];
                    if (L.elu)
                        v0 = elu_fast(v0), v1 = elu_fast(v1);
                }
                *reinterpret_cast<float2 *>(dst + 8 * j) = make_float2(v0, v1);
            }
        }
    }
#else
    (void)a, (void)L;
#endif
}

/* dh2_pre with dW3 and db3 in the same launch (v3_wgmma_dh2_dw3_kernel):
 * the hidden gradient dh2 = (dout · W3ᵀ) ⊙ ELU'(h2) on narrow tiles (128
 * rows x 64 columns of dh2, W3's 64 rows of the slice resident), and, from
 * the same tiles already on chip, this block's part of dW3 over its rows,
 * as its transpose dW3ᵀ [aux, 64 columns] = doutᵀ · h2: while a tile's dh2
 * wgmmas run, the threads copy the dout tile (from the ring, which both
 * only read) and the h2 slice (from the registers that hold it for ELU',
 * loaded a tile ahead) into K-major slabs over the tile's rows, rounded
 * (cvt.rn); then each warpgroup issues m64n64k8 for 64 aux rows of dW3ᵀ
 * beside the dh2 epilogue, accumulating over every tile of the block; the bias
 * sums of dout (db3) are fp32 sums of the unrounded dout, each thread's
 * rows in order, then the two halves. At the end each block writes its
 * slice of one partial of dW3 and db3 (row-tile group `group`: [h2 · aux]
 * as the ABI lays out dW3, then [aux]), which v3_wgmma_dw3_sum adds in
 * group order. dout and h2 are then read from device memory once for both
 * products (docs/perf-notes-v3-fast.md, "dW3 inside the dh2_pre launch").
 * aux <= 128: a tile's dout is at most four slabs, held in a ring of
 * FD_NS; a tile's slabs are given back once copied and read by the dh2
 * wgmmas. Measured slower than dh2_pre's own launch plus dW3 in the weight
 * gradients on the H200 (faster on an H100): fast mode does not pick it
 * (V3_WGMMA_DW3, trunk_v3_fast.h). */
constexpr int FD_TN = BN_NARROW;                 /* dh2 columns of a block */
constexpr int FD_KS = 4;                         /* dout slabs of a tile (aux <= 128) */
constexpr int FD_KMAX = FD_KS * BK;              /* the widest aux */
constexpr int FD_NS = 6;                         /* ring stages: a tile and a half */
constexpr int FD_WSLAB = FD_TN * BK * 4;         /* a W3 slab [64 n, 32 k] */
constexpr int FD_DT_SLAB = FD_KMAX * BK * 4;     /* a doutᵀ slab [128 aux, 32 rows] */
constexpr int FD_HT_SLAB = FD_TN * BK * 4;       /* an h2ᵀ slab [64 columns, 32 rows] */
constexpr int FD_WT = FD_KS * FD_WSLAB;          /* 32 KiB */
constexpr int FD_RING = FD_NS * SLAB;            /* 96 KiB */
constexpr int FD_DT = BM / BK * FD_DT_SLAB;      /* 64 KiB */
constexpr int FD_HT = BM / BK * FD_HT_SLAB;      /* 32 KiB */
constexpr int FD_SMEM_BYTES = 1024 /* alignment slack */ + FD_WT + FD_RING + FD_DT + FD_HT + 8 * FD_NS;
static_assert(FD_SMEM_BYTES <= SMEM_OPTIN, "the fused block fits in a block's shared memory");
static_assert(2 * FD_KMAX * 4 <= FD_DT, "the bias halves' scratch fits in doutᵀ");
static_assert(FD_KMAX == BM && NT == 2 * BM, "a thread copies one aux column of half the rows");

__global__ void __launch_bounds__(NT, 1)
    v3_wgmma_dh2_dw3_kernel(const __grid_constant__ CUtensorMap a, Layer L, float *part,
                            size_t pstride)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int WN = FD_TN, NACC = WN / 2;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_u32(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    unsigned char *const gbase = smem_raw + (base - raw);
    const unsigned wt = base, ring = wt + FD_WT, dt = ring + FD_RING, ht = dt + FD_DT;
    const unsigned bars = ht + FD_HT;
    unsigned char *const gring = gbase + FD_WT, *const gdt = gring + FD_RING,
                         *const ght = gdt + FD_DT;

    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = (tid >> 5) & 3;
    const int nt = blockIdx.x % L.tiles_n, group = blockIdx.x / L.tiles_n;
    const int groups = gridDim.x / L.tiles_n;
    const int n0 = nt * FD_TN;
    const int ks_n = (L.k + BK - 1) / BK; /* <= FD_KS */
    const int tiles = group < L.tiles_m ? (L.tiles_m - group + groups - 1) / groups : 0;
    const int total = tiles * ks_n;

    const CUtensorMap *const map = &a;
    auto issue = [&](int t) {
        const int s = t % FD_NS;
        const unsigned bar = bars + 8 * s;
        mbar_expect_tx(bar, SLAB);
        tma_load_2d(ring + s * SLAB, map, (t % ks_n) * BK, (group + (t / ks_n) * groups) * BM,
                    bar);
    };
    if (tid == 0) {
        for (int s = 0; s < FD_NS; s++)
            mbar_init(bars + 8 * s, 1);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        if (!L.pdl)
            for (int t = 0; t < FD_NS && t < total; t++)
                issue(t);
    }
    /* doutᵀ rows past the slabs a tile has (aux past 32 ks_n) stay zero */
    for (int i = tid; i < FD_DT / 16; i += NT)
        reinterpret_cast<float4 *>(gdt)[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    stage_w_rows<FD_TN>(gbase, L, n0, ks_n);
    v2pdl::pdl_wait();
    v2pdl::pdl_trigger();
    if (L.pdl && tid == 0)
        for (int t = 0; t < FD_NS && t < total; t++)
            issue(t);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();

    /* dh2: the thread's accumulator rows and columns, as in the layer kernel */
    const int rw = wg * 64 + warp * 16 + (lane >> 2), cq = 2 * (lane & 3);
    /* the copy of dout: aux column ta, rows 64 th … of the tile */
    const int ta = tid & (BM - 1), th = tid >> 7;
    float acc3[NACC]; /* dW3ᵀ: aux rows 64 wg + rw % 64 (+ 8), this block's columns */
#pragma unroll
    for (int r = 0; r < NACC; r++)
        acc3[r] = 0.0f;
    float db = 0.0f; /* the sum of dout[:, ta] over this thread's rows */

    /* the h2 slice of tile i (ELU' and dW3), loaded a tile ahead: at the end
     * of tile i - 1, once its own is stored, so that it arrives during that
     * tile's dW3 wgmmas and this tile's dh2 ones */
    float2 y[2][WN / 8];
    auto load_y = [&](int i) {
        const int m0 = (group + i * groups) * BM;
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int j = 0; j < WN / 8; j++) {
                const int row = m0 + rw + 8 * h, col = n0 + 8 * j + cq;
                y[h][j] = i < tiles && row < L.m && col < L.n
                              ? *reinterpret_cast<const float2 *>(L.y + (size_t)row * L.n + col)
                              : make_float2(0.0f, 0.0f);
            }
    };
    load_y(0);
    for (int i = 0; i < tiles; i++) {
        const int m0 = (group + i * groups) * BM;
        float acc[NACC];
#pragma unroll
        for (int r = 0; r < NACC; r++)
            acc[r] = 0.0f;
        for (int ks = 0; ks < ks_n; ks++) {
            const int t = i * ks_n + ks;
            mbar_wait_cta(bars + 8 * (t % FD_NS), (unsigned)(t / FD_NS) & 1u);
        }
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < FD_KS; ks++)
            if (ks < ks_n)
                wgmma_slab(acc, ring + ((i * ks_n + ks) % FD_NS) * SLAB + wg * (SLAB / 2),
                           wt + ks * FD_WSLAB);
        wgmma_commit();

        /* while the dh2 wgmmas run (they only read the ring too): dout's
         * tile into doutᵀ (K-major over the tile's rows) */
        if (ta < ks_n * BK) {
            const unsigned char *src = gring + ((i * ks_n + ta / BK) % FD_NS) * SLAB;
#pragma unroll
            for (int g = 0; g < 4; g++) {
                const int r0 = th * 64 + 16 * g;
                float v[WG_ROWS];
#pragma unroll
                for (int e = 0; e < WG_ROWS; e++)
                    v[e] = *reinterpret_cast<const float *>(src + sw128_off(r0 + e, ta % BK));
#pragma unroll
                for (int e = 0; e < WG_ROWS; e++)
                    db += v[e];
                store_column(gdt + (r0 / BK) * FD_DT_SLAB, v, ta, r0 % BK);
            }
        }
        /* the h2 slice into h2ᵀ, from the ELU' registers */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = rw + 8 * h;
#pragma unroll
            for (int j = 0; j < WN / 8; j++) {
                unsigned char *const slab = ght + (r / BK) * FD_HT_SLAB;
                *reinterpret_cast<float *>(slab + sw128_off(8 * j + cq, r % BK)) =
                    to_tf32_rn(y[h][j].x);
                *reinterpret_cast<float *>(slab + sw128_off(8 * j + cq + 1, r % BK)) =
                    to_tf32_rn(y[h][j].y);
            }
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* for the tensor cores */
        wgmma_wait_all(); /* this tile's dh2 */
        __syncthreads();  /* copied, and read by the dh2 wgmmas: the tile's slabs go back */
        if (tid == 0)
            for (int t = i * ks_n + FD_NS; t < (i + 1) * ks_n + FD_NS && t < total; t++)
                issue(t);

        /* dW3ᵀ += doutᵀ · h2 over the tile's rows (warpgroup wg's 64 aux
         * rows), while the dh2 epilogue runs; complete before the next
         * tile zeroes its accumulators (else ptxas serialises every wgmma) */
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < BM / BK; s++)
            wgmma_slab(acc3, dt + s * FD_DT_SLAB + wg * (FD_DT_SLAB / 2), ht + s * FD_HT_SLAB);
        wgmma_commit();

#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = m0 + rw + 8 * h;
            if (row >= L.m)
                continue;
            float *dst = L.c + (size_t)row * L.n + n0 + cq;
#pragma unroll
            for (int j = 0; j < WN / 8; j++) {
                if (n0 + 8 * j + cq >= L.n)
                    break;
                const float v0 = auxtrunk_canon_elu_grad(acc[4 * j + 2 * h], y[h][j].x);
                const float v1 = auxtrunk_canon_elu_grad(acc[4 * j + 2 * h + 1], y[h][j].y);
                *reinterpret_cast<float2 *>(dst + 8 * j) = make_float2(v0, v1);
            }
        }
        load_y(i + 1);
        wgmma_wait_all();
        __syncthreads(); /* both warpgroups' dW3ᵀ wgmmas have read doutᵀ and h2ᵀ */
    }

    float *const P = part + (size_t)group * pstride;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int m = rw + 8 * h; /* aux */
        if (m >= L.k)
            continue;
#pragma unroll
        for (int j = 0; j < WN / 8; j++) {
            const int c = n0 + 8 * j + cq;
            if (c >= L.n) /* n is a multiple of 4: pairs are whole */
                break;
            P[(size_t)c * L.k + m] = acc3[4 * j + 2 * h];
            P[(size_t)(c + 1) * L.k + m] = acc3[4 * j + 2 * h + 1];
        }
    }
    if (nt == 0) { /* db3: the two halves of the rows, in order */
        __syncthreads(); /* every wgmma of the block has read doutᵀ */
        float *const red = reinterpret_cast<float *>(gdt);
        red[th * FD_KMAX + ta] = db;
        __syncthreads();
        if (tid < L.k)
            P[(size_t)L.n * L.k + tid] = red[tid] + red[FD_KMAX + tid];
    }
#else
    (void)a, (void)L, (void)part, (void)pstride;
#endif
}

/* One weight gradient of the grouped launch: dw [m, n] = aᵀ · g over the
 * batch, db [n] = the column sums of g. */
struct WGrad {
    const float *a; /* [B, m] */
    const float *g; /* [B, n] */
    int m, n;
    int swap; /* the wide kernel computes this gradient's transpose: a is the
                 gradient's g operand and g its a, so the tile is stored
                 transposed and the bias sums are a's (wgrad_swap) */
    int tiles_n;
    int tile0;     /* its first block (blockIdx.x) */
    size_t dw_off; /* where it lies in a chunk partial (the ABI's flat layout) */
    size_t db_off;
};

struct WGrads {
    WGrad q[3]; /* dW1 (x, dh1), dW2 (h1, dh2), dW3 (h2, dout) */
    float *partials;
    size_t stride; /* floats per chunk partial: P */
    int batch, chunk_len;
};

/* What a block of the grouped weight-gradient launch owns: gradient qi,
 * tile (mt, nt) of tn columns, whose first row and column are m0 and n0,
 * and the batch rows [b_begin, b_end) of chunk blockIdx.y, in slabs. */
struct WGradBlock {
    int qi, mt, nt, m0, n0, b_begin, b_end, slabs;

    __device__ __forceinline__ WGradBlock(const WGrads &G, int tn)
    {
        const int t = blockIdx.x;
        qi = t >= G.q[2].tile0 ? 2 : t >= G.q[1].tile0 ? 1 : 0;
        const WGrad &Q = G.q[qi];
        mt = (t - Q.tile0) / Q.tiles_n, nt = (t - Q.tile0) % Q.tiles_n;
        m0 = mt * BM, n0 = nt * tn;
        b_begin = blockIdx.y * G.chunk_len;
        b_end = min(G.batch, b_begin + G.chunk_len);
        slabs = (b_end - b_begin + BK - 1) / BK;
    }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* One slab of a weight-gradient block (both kernels below), once it is
 * stored K-major at byte offset stage of the ring at base: warpgroup wg's
 * four m64n128k8 for its 64 rows, then the wait for its previous slab's;
 * returns the next slab's stage. */
__device__ __forceinline__ int wgrad_slab_mma(float (&acc)[64], unsigned base, int stage, int wg)
{
    wgmma_fence();
    const unsigned sa = base + stage + wg * (SLAB / 2), sb = base + stage + SLAB;
#pragma unroll
    for (int j = 0; j < BK / KSTEP; j++)
        wgmma_m64n128k8(acc, desc_sw128(sa + 32 * j), desc_sw128(sb + 32 * j));
    wgmma_commit();
    wgmma_wait_one();
    return stage == (WG_STAGES - 1) * 2 * SLAB ? 0 : stage + 2 * SLAB;
}

/* The bias sums of a weight-gradient block: into db[c0 + col] for its NCOL
 * columns (those below lim), each thread's sums[c] over its rows (column c ·
 * 128 + its own), then the row groups in order. scratch is the block's
 * shared memory, which every wgmma of the block is done reading. */
template <int NCOL>
__device__ __forceinline__ void wgrad_bias(float *db, const float (&sums)[NCOL / BN],
                                           unsigned char *scratch, int c0, int lim)
{
    const int tid = threadIdx.x;
    __syncthreads(); /* every wgmma of the block has read the ring */
    float *const red = reinterpret_cast<float *>(scratch); /* [NT / BM groups][NCOL columns] */
#pragma unroll
    for (int c = 0; c < NCOL / BN; c++)
        red[(tid / BM) * NCOL + c * BN + (tid & (BM - 1))] = sums[c];
    __syncthreads();
    for (int col = tid; col < NCOL; col += NT) {
        if (c0 + col >= lim)
            break;
        float v = red[col];
#pragma unroll
        for (int w = 1; w < NT / BM; w++)
            v += red[w * NCOL + col];
        db[c0 + col] = v;
    }
}

/* This block's chunk partial (the ABI's flat layout). */
__device__ __forceinline__ float *wgrad_partial(const WGrads &G)
{
    return G.partials + (size_t)blockIdx.y * G.stride;
}

/* A weight-gradient block's tile (NCOL columns: 128, or 256 for a wide
 * tile) from its final accumulators into the chunk's partial: element (r,
 * c) of the tile to (m0 + r, n0 + c) of the gradient, or for a swapped one
 * (WGrad::swap: the tile holds rows m0 … of the gradient's transpose) to
 * (n0 + c, m0 + r); nothing past Q.m and Q.n. */
template <int NCOL, bool SWAP>
__device__ __forceinline__ void wgrad_store(const WGrads &G, const WGrad &Q,
                                            const float (&acc)[NCOL / 2], int m0, int n0)
{
    const int tid = threadIdx.x, g = tid & 31, wg = tid >> 7;
    float *const part = wgrad_partial(G) + Q.dw_off;
    const int rw = wg * 64 + ((tid >> 5) & 3) * 16 + (g >> 2), cq = 2 * (g & 3);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = m0 + rw + 8 * h;
        if (row >= Q.m)
            continue;
#pragma unroll
        for (int j = 0; j < NCOL / 8; j++) {
            const int c = n0 + 8 * j + cq;
            if (c >= Q.n) /* n is a multiple of 4: pairs are whole */
                break;
            if constexpr (SWAP) {
                part[(size_t)c * Q.m + row] = acc[4 * j + 2 * h];
                part[(size_t)(c + 1) * Q.m + row] = acc[4 * j + 2 * h + 1];
            } else {
                *reinterpret_cast<float2 *>(part + (size_t)row * Q.n + c) =
                    make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            }
        }
    }
}

/* The end of a block of an unswapped gradient: its tile, and, for the
 * blocks of the first row tile (bias), the column sums of g (dbs[c]: the
 * thread's over its rows of column c · 128 + its own). */
template <int NCOL>
__device__ __forceinline__ void wgrad_epilogue(const WGrads &G, const WGrad &Q,
                                               const float (&acc)[NCOL / 2],
                                               const float (&dbs)[NCOL / BN],
                                               unsigned char *scratch, int m0, int n0, bool bias)
{
    wgrad_store<NCOL, false>(G, Q, acc, m0, n0);
    if (bias)
        wgrad_bias<NCOL>(wgrad_partial(G) + Q.db_off, dbs, scratch, n0, Q.n);
}
#endif

/* Block (tile, chunk): one 128 x 128 tile of one gradient over the batch
 * rows of one chunk, into that chunk's partial. Thread t owns column t mod
 * 128 of the tile (of both operands: a's m, g's n) and WG_ROWS batch rows,
 * WG_ROWS ⌊t / 128⌋ …, of each 32-row slab: it loads them one slab ahead,
 * while the tensor cores run, and stores them rounded into the K-major
 * slabs of a WG_STAGES-deep ring; each warpgroup issues four m64n128k8
 * wgmmas for its 64 rows and waits only for the previous slab's, so the
 * next slab's stores overlap this one's wgmmas. One barrier per slab is
 * enough: stage s mod 3 is written at slab s after every thread has passed
 * slab s - 1's barrier, hence after every warpgroup has waited, at the end
 * of slab s - 2, for slab s - 3's wgmmas, the last to read that stage.
 * As a programmatic dependent it loads its first rows of a before the wait
 * (a is x or a record, complete before the call began), those of g after. */
__global__ void __launch_bounds__(NT, 2) v3_wgmma_wgrad_kernel(const __grid_constant__ WGrads G)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_u32(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    unsigned char *const gbase = smem_raw + (base - raw);

    const WGradBlock K(G, BN);
    const WGrad &Q = G.q[K.qi];
    const int m0 = K.m0, n0 = K.n0, b_begin = K.b_begin, b_end = K.b_end, slabs = K.slabs;

    const int tid = threadIdx.x, wg = tid >> 7;
    const int col = tid & (BM - 1), k0 = WG_ROWS * (tid / BM);
    float va[WG_ROWS], vg[WG_ROWS];
    /* a (x, h1 or h2) is complete before the call's first launch, an
     * ordinary one, began: its first rows load while the predecessor runs */
    load_column(va, Q.a, Q.m, m0 + col, b_begin + k0, b_end);
    v2pdl::pdl_wait(); /* the hidden gradients are complete (when launched as a dependent) */
    v2pdl::pdl_trigger();
    load_column(vg, Q.g, Q.n, n0 + col, b_begin + k0, b_end);
    float dbs[1] = {0.0f}; /* this thread's share of its column's sum of g */
    float acc[64];
#pragma unroll
    for (int r = 0; r < 64; r++)
        acc[r] = 0.0f;

    int stage = 0;
    for (int s = 0; s < slabs; s++) {
        store_column(gbase + stage, va, col, k0);
        store_column(gbase + stage + SLAB, vg, col, k0);
#pragma unroll
        for (int e = 0; e < WG_ROWS; e++)
            dbs[0] += vg[e];
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* for the tensor cores */
        __syncthreads();
        if (s + 1 < slabs) {
            const int b = b_begin + (s + 1) * BK + k0;
            load_column(va, Q.a, Q.m, m0 + col, b, b_end);
            load_column(vg, Q.g, Q.n, n0 + col, b, b_end);
        }
        stage = wgrad_slab_mma(acc, base, stage, wg);
    }
    wgmma_wait_all();
    wgrad_epilogue<BN>(G, Q, acc, dbs, gbase, m0, n0, K.mt == 0);
#else
    (void)G;
#endif
}

/* The weight gradients fed by the copy engine (v3_wgmma_wgrad_tma_kernel):
 * the same blocks, k order and bits as v3_wgmma_wgrad_kernel, but each
 * block's operands arrive as row-major boxes of WT_HALF batch rows x 128
 * columns (a's m, g's n), both in one raw stage on one mbarrier, WT_NR
 * stages (WT_NR / 2 slabs) ahead of the transposes; a thread then reads its
 * column's WT_HALF rows of the raw stage (4-byte loads, a warp's 32
 * consecutive words in 32 banks) instead of from device memory. One block
 * per SM (the ring takes most of its shared memory), so the chunk plan
 * aims at WT_MAX_BLOCKS blocks. */
constexpr int WT_HALF = WG_ROWS;                /* batch rows of one raw stage: a thread's rows */
constexpr int WT_RAW = 2 * WT_HALF * BM * 4;    /* bytes of a raw stage: a box of each operand */
constexpr int WT_NR = 8;                        /* raw stages */
constexpr int WT_MAX_BLOCKS = 132;              /* tiles x chunks: one block per SM */
constexpr int WT_SMEM_BYTES = 1024 /* alignment slack */ + WG_STAGES * 2 * SLAB + WT_NR * WT_RAW +
                              8 * WT_NR;
static_assert(BK == 2 * WT_HALF, "a slab is two raw stages, one per warpgroup");
static_assert(WT_SMEM_BYTES <= SMEM_OPTIN, "the raw ring fits in a block's shared memory");

/* The row-major tensor maps of the grouped launch's operands ([B, m] and
 * [B, n]: [WT_HALF rows, 128 columns] boxes, zero fill past the batch and
 * the width), per gradient (unused for the gradients it does not compute). */
struct WGradMaps {
    CUtensorMap a[3];
    CUtensorMap g[3];
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The raw ring of a block fed by TMA: NR stages of RAW bytes at rawb, each
 * a box of a (WT_HALF batch rows, 128 columns from m0) and then a box of g
 * (WT_HALF rows, as many columns as its map's box, from n0), both on the
 * stage's mbarrier at bars. Raw stage j holds batch rows b_begin + WT_HALF
 * j …, in stage j mod NR; a chunk ends on a slab unless the batch ends
 * there, and the boxes past the batch (and past a width) are zero-filled,
 * so every stage is whole. */
template <int NR, int RAW>
struct WGradRing {
    unsigned rawb, bars;
    const CUtensorMap *am, *gm;
    int m0, n0, b_begin;

    /* Raw stage j's copies (thread 0). */
    __device__ __forceinline__ void issue(int j) const
    {
        const int s = j % NR;
        const unsigned dst = rawb + s * RAW, bar = bars + 8 * s;
        mbar_expect_tx(bar, RAW);
        tma_load_2d(dst, am, m0, b_begin + j * WT_HALF, bar);
        tma_load_2d(dst + WT_HALF * BM * 4, gm, n0, b_begin + j * WT_HALF, bar);
    }
    /* Thread 0 initialises the mbarriers and, once the hidden gradients are
     * complete (when launched as a dependent), issues the first stages of
     * the block's `halves`; every thread then passes a block barrier. */
    __device__ __forceinline__ void start(int halves) const
    {
        if (threadIdx.x == 0) {
            for (int s = 0; s < NR; s++)
                mbar_init(bars + 8 * s, 1);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        }
        v2pdl::pdl_wait();
        v2pdl::pdl_trigger();
        if (threadIdx.x == 0)
            for (int j = 0; j < NR && j < halves; j++)
                issue(j);
        __syncthreads(); /* the mbarriers are initialised */
    }
    /* Once every thread has read slab s's two raw stages (after a block
     * barrier), thread 0 refills them with the stages NR later. */
    __device__ __forceinline__ void refill(int s, int halves) const
    {
        if (threadIdx.x == 0) {
            if (2 * s + NR < halves)
                issue(2 * s + NR);
            if (2 * s + 1 + NR < halves)
                issue(2 * s + 1 + NR);
        }
    }
    /* Waits until raw stage j has landed; returns its floats (gbase: the
     * generic address of the aligned base, the ring off bytes after it). */
    __device__ __forceinline__ const float *wait(int j, unsigned char *gbase, unsigned off) const
    {
        mbar_wait_cta(bars + 8 * (j % NR), (unsigned)(j / NR) & 1u);
        return reinterpret_cast<const float *>(gbase + off + (j % NR) * RAW);
    }
};
#endif

__global__ void __launch_bounds__(NT, 1)
    v3_wgmma_wgrad_tma_kernel(const __grid_constant__ WGrads G, const __grid_constant__ WGradMaps M)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_u32(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    unsigned char *const gbase = smem_raw + (base - raw);
    constexpr int KRING = WG_STAGES * 2 * SLAB; /* the K-major ring, then the raw stages */
    const unsigned rawb = base + KRING, bars = rawb + WT_NR * WT_RAW;

    const WGradBlock K(G, BN);
    const WGrad &Q = G.q[K.qi];
    const int m0 = K.m0, n0 = K.n0, slabs = K.slabs, halves = 2 * slabs;
    const WGradRing<WT_NR, WT_RAW> ring = {rawb, bars, &M.a[K.qi], &M.g[K.qi], m0, n0, K.b_begin};

    const int tid = threadIdx.x, wg = tid >> 7;
    const int col = tid & (BM - 1), h = tid / BM; /* rows WT_HALF h … of each slab */
    ring.start(halves);

    float dbs[1] = {0.0f}; /* this thread's share of its column's sum of g */
    float acc[64];
#pragma unroll
    for (int r = 0; r < 64; r++)
        acc[r] = 0.0f;
    int stage = 0;
    for (int s = 0; s < slabs; s++) {
        const float *const ra = ring.wait(2 * s + h, gbase, KRING);
        const float *const rg = ra + WT_HALF * BM;
        float va[WT_HALF], vg[WT_HALF];
#pragma unroll
        for (int e = 0; e < WT_HALF; e++)
            va[e] = ra[e * BM + col], vg[e] = rg[e * BM + col];
        store_column(gbase + stage, va, col, WT_HALF * h);
        store_column(gbase + stage + SLAB, vg, col, WT_HALF * h);
#pragma unroll
        for (int e = 0; e < WT_HALF; e++)
            dbs[0] += vg[e];
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* for the tensor cores */
        __syncthreads(); /* the slab is stored; both raw stages are read */
        ring.refill(s, halves);
        stage = wgrad_slab_mma(acc, base, stage, wg);
    }
    wgmma_wait_all();
    wgrad_epilogue<BN>(G, Q, acc, dbs, gbase, m0, n0, K.mt == 0);
#else
    (void)G, (void)M;
#endif
}

/* The weight gradients on wide tiles (v3_wgmma_wgrad_wide_kernel): a block
 * owns 128 rows of a gradient (a's m) and WW_BN = 256 of its columns (g's
 * n), twice a 128 x 128 tile's work for the same a, so per unit of work a
 * slab moves about a fifth fewer bytes through shared memory (112 KiB per
 * 128 x 128 x 32 unit against 144): the transposes of a
 * are shared by the two halves, and each warpgroup's m64n256k8 reads its A
 * once where two m64n128k8 would read it twice. Shared memory is what bounds
 * the 128 x 128 kernels (docs/perf-notes-v3-fast.md, "Wide tiles for the
 * weight gradients"). Rows arrive as in v3_wgmma_wgrad_tma_kernel (row-major
 * boxes of WT_HALF batch rows, a's 128 columns and g's 256 in one raw stage
 * on one mbarrier), WW_NR raw stages ahead; the K-major ring has two stages
 * (a 128-row A slab, a 256-row B slab), so each warpgroup waits for its
 * previous slab's wgmmas before the barrier that lets the next slab's
 * stores reuse that stage. A gradient that makes fewer wide tiles
 * transposed (dW3 of the production topology: 256 x 128, one tile as 128 x
 * 256, two half-empty ones as it is) is computed so (wgrad_swap): its tile
 * is stored transposed and its bias sums are a's. A tile whose second 128
 * columns still lie past n runs the same loop with m64n128k8 and stores
 * nothing there (wgrad_wide_body<true>).
 * The same k order and rounding as the other kernels: a chunk plan gives
 * the same bits in any of them. */
constexpr int WW_BN = 2 * BN;                      /* g's columns of a wide tile */
constexpr int WW_RAW = WT_HALF * (BM + WW_BN) * 4; /* a raw stage: both boxes */
constexpr int WW_KSTAGE = 3 * SLAB;                /* a K-major stage: A, then B */
constexpr int WW_NS = 2;                           /* K-major stages */
constexpr int WW_NR = 5;                           /* raw stages */
constexpr int WW_SMEM_BYTES =
    1024 /* alignment slack */ + WW_NS * WW_KSTAGE + WW_NR * WW_RAW + 8 * WW_NR;
static_assert(WW_SMEM_BYTES <= SMEM_OPTIN, "the wide rings fit in a block's shared memory");
static_assert(WW_NS == 2, "the slab loop's waits are those of a two-stage ring");
static_assert(WW_NR >= 2, "a slab's two raw stages are distinct");
static_assert(NT / BM * WW_BN * 4 <= WW_NS * WW_KSTAGE, "the bias sums' scratch fits in the ring");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The slab loop and epilogue of a wide block K: HALF where only g's first
 * 128 columns of the tile exist. base: the aligned shared memory (the
 * K-major ring, then ring's raw stages and their mbarriers), gbase its
 * generic address. */
template <bool HALF>
__device__ __forceinline__ void wgrad_wide_body(const WGrads &G, const WGrad &Q,
                                                const WGradBlock &K,
                                                const WGradRing<WW_NR, WW_RAW> &ring,
                                                unsigned char *gbase, unsigned base)
{
    constexpr int KRING = WW_NS * WW_KSTAGE;
    constexpr int NCOL = HALF ? BN : WW_BN;
    const int m0 = K.m0, n0 = K.n0, slabs = K.slabs, halves = 2 * slabs;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int col = tid & (BM - 1), h = tid / BM; /* rows WT_HALF h … of each slab */

    float dbs[NCOL / BN]; /* the sums of g's columns col, col + 128 over the thread's rows */
#pragma unroll
    for (int c = 0; c < NCOL / BN; c++)
        dbs[c] = 0.0f;
    float dba = 0.0f; /* of a's column col (a swapped gradient's bias) */
    float acc[NCOL / 2];
#pragma unroll
    for (int r = 0; r < NCOL / 2; r++)
        acc[r] = 0.0f;
    unsigned stage = 0;
    for (int s = 0; s < slabs; s++) {
        const float *const ra = ring.wait(2 * s + h, gbase, KRING);
        const float *const rg = ra + WT_HALF * BM;
        float va[WT_HALF];
#pragma unroll
        for (int e = 0; e < WT_HALF; e++)
            va[e] = ra[e * BM + col];
        /* summed as they are loaded, for every gradient: kept live across g's
         * stores instead, a's values made ptxas serialise the wgmmas
         * (C7515; the SASS scan of test_cuda_scan fails on that) */
#pragma unroll
        for (int e = 0; e < WT_HALF; e++)
            dba += va[e];
        store_column(gbase + stage, va, col, WT_HALF * h);
#pragma unroll
        for (int c = 0; c < NCOL / BN; c++) {
            float vg[WT_HALF];
#pragma unroll
            for (int e = 0; e < WT_HALF; e++)
                vg[e] = rg[e * WW_BN + c * BN + col];
            store_column(gbase + stage + (1 + c) * SLAB, vg, col, WT_HALF * h);
#pragma unroll
            for (int e = 0; e < WT_HALF; e++)
                dbs[c] += vg[e];
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* for the tensor cores */
        /* this warpgroup's previous slab is done, so after the barrier the
         * next slab may store into its stage */
        wgmma_wait_all();
        __syncthreads(); /* the slab is stored; both raw stages are read */
        ring.refill(s, halves);
        wgmma_fence();
        const unsigned sa = base + stage + wg * (SLAB / 2), sb = base + stage + SLAB;
#pragma unroll
        for (int k = 0; k < BK / KSTEP; k++) {
            if constexpr (HALF)
                wgmma_m64n128k8(acc, desc_sw128(sa + 32 * k), desc_sw128(sb + 32 * k));
            else
                wgmma_m64n256k8(acc, desc_sw128(sa + 32 * k), desc_sw128(sb + 32 * k));
        }
        wgmma_commit();
        stage = stage == 0 ? WW_KSTAGE : 0;
    }
    wgmma_wait_all();
    if (!Q.swap) {
        wgrad_epilogue<NCOL>(G, Q, acc, dbs, gbase, m0, n0, K.mt == 0);
        return;
    }
    /* a swapped gradient: its bias is the sums of a's columns, written by
     * the blocks of the first column tile */
    wgrad_store<NCOL, true>(G, Q, acc, m0, n0);
    if (K.nt == 0) {
        const float sums[1] = {dba};
        wgrad_bias<BN>(wgrad_partial(G) + Q.db_off, sums, gbase, m0, Q.m);
    }
}
#endif

__global__ void __launch_bounds__(NT, 1)
    v3_wgmma_wgrad_wide_kernel(const __grid_constant__ WGrads G,
                               const __grid_constant__ WGradMaps M)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_u32(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    unsigned char *const gbase = smem_raw + (base - raw);
    constexpr int KRING = WW_NS * WW_KSTAGE; /* the K-major ring, then the raw stages */
    const unsigned rawb = base + KRING, bars = rawb + WW_NR * WW_RAW;

    const WGradBlock K(G, WW_BN);
    const WGrad &Q = G.q[K.qi];
    const WGradRing<WW_NR, WW_RAW> ring = {rawb, bars, &M.a[K.qi], &M.g[K.qi],
                                           K.m0, K.n0, K.b_begin};
    ring.start(2 * K.slabs);
    if (K.n0 + BN >= Q.n)
        wgrad_wide_body<true>(G, Q, K, ring, gbase, base);
    else
        wgrad_wide_body<false>(G, Q, K, ring, gbase, base);
#else
    (void)G, (void)M;
#endif
}

/* The chunk sum: dst = (accumulate ? dst : 0) + (partial 0 + partial 1 +
 * …), the partials added in chunk order, 4 floats per thread (every segment
 * of the flat layout starts and ends on a multiple of 4). A thread issues
 * the loads of SUM_AHEAD partials (and of dst) before it adds the first of
 * them, so that a sum of up to SUM_AHEAD + 1 chunks waits for one trip to
 * L2, not one per few chunks; the order of the additions is unchanged. The
 * launch bound lets ptxas keep them all in registers (96; its default for
 * 256 threads interleaves loads and adds in 32), still two blocks per SM:
 * the production topology's sum is 160 blocks, one wave. */
struct WSum {
    const float *partials;
    size_t stride;
    int nc;
    int accumulate;
    size_t begin;  /* where the summed gradients start in the flat layout */
    size_t end[6]; /* end of gradient i in the flat layout (dW1 db1 dW2 db2 dW3 db3) */
    float *dst[6];
    size_t poff; /* flat index i lies at partials[i - poff] of a partial (0: the whole
                    layout; the fused dW3's partials hold dW3 and db3 only) */
};

constexpr int SUM_THREADS = 256;
constexpr int SUM_AHEAD = 16; /* partials in flight per thread */

__device__ __forceinline__ float4 add4(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

__global__ void __launch_bounds__(SUM_THREADS, 1)
    v3_wgmma_wgrad_sum_kernel(const __grid_constant__ WSum R)
{
    v2pdl::pdl_wait(); /* every partial is written */
    v2pdl::pdl_trigger();
    const size_t i = R.begin + ((size_t)blockIdx.x * SUM_THREADS + threadIdx.x) * 4;
    if (i >= R.end[5])
        return;
    int q = 0;
    while (i >= R.end[q])
        q++;
    float4 *const d = reinterpret_cast<float4 *>(R.dst[q] + (i - (q ? R.end[q - 1] : 0)));
    const float4 o = R.accumulate ? *d : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float *const p = R.partials + (i - R.poff);
    float4 s = *reinterpret_cast<const float4 *>(p);
    for (int c0 = 1; c0 < R.nc; c0 += SUM_AHEAD) {
        float4 v[SUM_AHEAD];
#pragma unroll
        for (int j = 0; j < SUM_AHEAD; j++) /* past the last chunk: the last again, unused */
            v[j] = *reinterpret_cast<const float4 *>(p + (size_t)min(c0 + j, R.nc - 1) * R.stride);
#pragma unroll
        for (int j = 0; j < SUM_AHEAD; j++)
            if (c0 + j < R.nc)
                s = add4(s, v[j]);
    }
    *d = R.accumulate ? add4(o, s) : s;
}

/* ------------------------------------------------------ the chain -- */

/* The chain kernel (v3_wgmma_chain_kernel): two or three layers of 64- or
 * 128-row tiles (ChainShape), each layer's output kept in shared memory as
 * the next one's A operand (K-major, 128-byte swizzle, as the TMA writes
 * it). A persistent launch: each block walks the row tiles blockIdx.x,
 * blockIdx.x + gridDim.x, ... with one activation buffer per 64 rows;
 * during a tile's last layer, each slab of it that the wgmmas are done with
 * takes a slab of the next tile's first A (x or dout) by TMA, on that slab's
 * own mbarrier, so that the next tile's first layer starts on its first
 * slab. Its B operands arrive by TMA as [256 n, 32 k] boxes (128 n for a
 * narrow layer) into a ring of stages on mbarriers, from a copy of the
 * weights that v3_wgmma_chain_prep_kernel writes first: K-major (Wᵀ for
 * the forward, W as stored for the hidden gradients) and rounded to TF32 as
 * the layer launches round them while they stage, so that both give the
 * same bits. One thread issues every load; a stage is refilled once every
 * warpgroup is done with it, and the ring runs across the layers and the
 * tiles, so the next layer's first slabs load during a layer's epilogue.
 * What an epilogue reads from device memory (the bias, the ELU' records) is
 * loaded before the layer's wgmmas, as the layer kernels load it (but for a
 * 128-row tile's records, below), and the outputs that go to device memory
 * by TMA are issued by one thread of each warp. */
constexpr int CH_M = 64;                     /* rows of one wgmma m: a warpgroup's rows */
constexpr int CH_ASLAB = CH_M * BK * 4;      /* 8 KiB: a [64, 32] slab of 64 rows */
constexpr int CH_ACT = KMAX / BK * CH_ASLAB; /* 64 KiB: the activation buffer of 64 rows */
constexpr int CH_NMAX = 256;                 /* widest layer output */
constexpr int CH_WSLAB = CH_NMAX * BK * 4;   /* 32 KiB: a [256 n, 32 k] B slab */
constexpr int CH_LAYERS = 3;

/* The chain's two tile shapes. TM = 64: both warpgroups on the tile's 64
 * rows, each on half of a layer's columns (m64n128k8 for a wide layer,
 * m64n64k8 for a narrow one), a ring of five B stages. TM = 128: each
 * warpgroup on its own 64 rows, every column (m64n256k8, m64n128k8), half
 * the weight traffic per row and twice the tensor work per slab, a ring of
 * three stages beside the two 64-row activation buffers. */
template <int TM>
struct ChainShape {
    static constexpr int halves = TM / CH_M; /* 64-row activation buffers */
    static constexpr int stages = TM == CH_M ? 5 : 3;
    /* the activation buffers, the B ring, an mbarrier per slab of the first
     * A and one per stage */
    static constexpr int smem =
        1024 + halves * CH_ACT + stages * CH_WSLAB + 8 * (KMAX / BK + stages);
    static_assert(smem <= SMEM_OPTIN, "more than a block may have");
};
/* v3_wgmma_prepare checks that the device gives a block this much. */
constexpr int CH_SMEM_MAX = ChainShape<128>::smem;

struct ChainLayer {
    const float *w;    /* forward: [K, N] n-contiguous; hidden gradient: [N, K] k-contiguous */
    const float *bias; /* EPI_BIAS_ACT: [N] */
    const float *y;    /* EPI_ELU_GRAD: [M, N], the record whose ELU' scales acc */
    float *c;          /* [M, N] */
    int n, k, elu;
    int slabs;  /* ceil(k / 32) */
    int wide;   /* n > 128: a 256-column B slab, m64n128k8 per warpgroup; else 128, m64n64k8 */
    float *wcp; /* the prepared copy of w: [N, K] k-contiguous, rounded to TF32 */
};

struct Chain {
    ChainLayer l[CH_LAYERS];
    int layers, m;
    int first[CH_LAYERS + 1]; /* the chain's slab index of each layer's first slab; [layers] all */
};

/* The chain's tensor maps, per layer: B, a [256 or 128 n, 32 k] box of its
 * prepared copy; c (every layer but the last), a [64 rows, 32 n] box of its
 * output, which the block stores from its activation buffer. */
struct ChainMaps {
    CUtensorMap b[CH_LAYERS];
    CUtensorMap c[CH_LAYERS];
};

/* v3_wgmma_chain_prep_kernel: every layer's copy, element (j, i) of layer l
 * (output j, input i) = TF32 (w[i][j]) for the forward (a transpose through a
 * 32 x 33 shared tile), TF32 (w[j][i]) for a hidden gradient (a copy). One
 * 32 x 32 tile per block, blocks layer by layer; thread (tx, ty) of 32 x 8. */
constexpr int PREP_TILE = 32;

/* Blocks of the prep launch for one layer: its [n, k] copy in 32 x 32 tiles. */
__host__ __device__ constexpr int prep_tiles(int n, int k)
{
    return ((n + PREP_TILE - 1) / PREP_TILE) * ((k + PREP_TILE - 1) / PREP_TILE);
}

template <int EPI>
__global__ void __launch_bounds__(256) v3_wgmma_chain_prep_kernel(const __grid_constant__ Chain C)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ float tile[PREP_TILE][PREP_TILE + 1];
    int b = blockIdx.x, l = 0;
    for (;; l++) {
        const ChainLayer &L = C.l[l];
        const int tiles = prep_tiles(L.n, L.k);
        if (b < tiles || l + 1 == C.layers)
            break;
        b -= tiles;
    }
    const ChainLayer &L = C.l[l];
    const int tj = (L.n + PREP_TILE - 1) / PREP_TILE;
    const int j0 = (b % tj) * PREP_TILE, i0 = (b / tj) * PREP_TILE;
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    if (EPI == EPI_BIAS_ACT) {
        /* read w[i][j] along j (coalesced), write the copy's [j][i] along i */
        for (int r = ty; r < PREP_TILE; r += 8) {
            const int i = i0 + r, j = j0 + tx;
            tile[r][tx] = i < L.k && j < L.n ? __ldg(L.w + (size_t)i * L.n + j) : 0.0f;
        }
        __syncthreads();
        for (int r = ty; r < PREP_TILE; r += 8) {
            const int j = j0 + r, i = i0 + tx;
            if (j < L.n && i < L.k)
                L.wcp[(size_t)j * L.k + i] = to_tf32_rn(tile[tx][r]);
        }
    } else {
        for (int r = ty; r < PREP_TILE; r += 8) {
            const int j = j0 + r, i = i0 + tx;
            if (j < L.n && i < L.k)
                L.wcp[(size_t)j * L.k + i] = to_tf32_rn(__ldg(L.w + (size_t)j * L.k + i));
        }
    }
#else
    (void)C;
#endif
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* Layer of slab t of a tile (0 <= t < C.first[C.layers]). */
__device__ __forceinline__ int chain_layer_of(const Chain &C, int t)
{
    return t >= C.first[2] && C.layers > 2 ? 2 : t >= C.first[1] ? 1 : 0;
}

/* Thread 0's place in the block's stream of B slabs (its tiles' slabs, one
 * tile after another): the next slab's index in the stream and in its
 * tile, and how many are left to issue. */
struct ChainCursor {
    int g, t, left;
};

/* Thread 0: the next B slab of the stream into its stage, on its mbarrier. */
template <int TM>
__device__ __forceinline__ void chain_issue(const Chain &C, const ChainMaps &M, unsigned ring_s,
                                            unsigned bars, ChainCursor &q)
{
    if (q.left == 0)
        return;
    const int l = chain_layer_of(C, q.t), s = q.g % ChainShape<TM>::stages;
    const unsigned bar = bars + 8 * s;
    mbar_expect_tx(bar, C.l[l].wide ? CH_WSLAB : CH_WSLAB / 2);
    tma_load_2d(ring_s + s * CH_WSLAB, &M.b[l], (q.t - C.first[l]) * BK, 0, bar);
    q.g++, q.left--;
    q.t = q.t + 1 == C.first[C.layers] ? 0 : q.t + 1;
}

/* The 64-row halves of the tile at row m0 that hold rows of the batch (a
 * box is never issued wholly past its end). */
template <int TM>
__device__ __forceinline__ int chain_halves(const Chain &C, int m0)
{
    return TM == CH_M || m0 + CH_M >= C.m ? 1 : 2;
}

/* Thread 0: slab s of the first A of the tile at row m0 (each of its
 * halves) into the activation buffers at act_s, on the slab's own mbarrier
 * (abars + 8 s), so that the first layer's wgmmas start on its first slab. */
template <int TM>
__device__ __forceinline__ void chain_issue_a(const Chain &C, const CUtensorMap &a, unsigned act_s,
                                              unsigned abars, int m0, int s)
{
    const int nh = chain_halves<TM>(C, m0);
    mbar_expect_tx(abars + 8 * s, (unsigned)(nh * CH_ASLAB));
    for (int h = 0; h < nh; h++)
        tma_load_2d(act_s + h * CH_ACT + s * CH_ASLAB, &a, s * BK, m0 + h * CH_M, abars + 8 * s);
}

/* ELU from the hardware exponential with its flush-to-zero form: the bits
 * of elu_fast (and so of the layer launches). Where the two exponentials
 * differ, below 2^-126, both results are 1 - e rounded to -1.0f, and for a
 * subnormal z both give 0.0f; test_v3_fast_wgmma checks it on inputs of
 * ±100. Half the instructions of __expf's range handling. */
__device__ __forceinline__ float elu_fast_ftz(float z)
{
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(z * 1.4426950216293334961f));
    return z > 0.0f ? z : e - 1.0f;
}

/* One output pair of a chain epilogue: the ELU' of the records, or the bias
 * and the activation. */
template <int EPI>
__device__ __forceinline__ float2 chain_pair(float v0, float v1, float2 pre, int elu)
{
    if (EPI == EPI_ELU_GRAD)
        return make_float2(auxtrunk_canon_elu_grad(v0, pre.x), auxtrunk_canon_elu_grad(v1, pre.y));
    v0 += pre.x, v1 += pre.y;
    if (elu)
        v0 = elu_fast_ftz(v0), v1 = elu_fast_ftz(v1);
    return make_float2(v0, v1);
}

/* One layer of a tile of the chain: NACC accumulators per thread (TM = 64:
 * 64 for the warpgroup's 128 of a wide layer's columns, 32 for its 64 of a
 * narrow one's; TM = 128: 128 for all 256, 64 for all 128). On entry the
 * layer's first slabs are in flight or in their stages; on return the same
 * holds for the next layer's (or the next tile's). The output of a layer
 * but the last goes into act, as the next layer's A, and from there to L.c
 * by TMA (thread 0's last bulk group); the last layer's goes to L.c from the
 * registers, while its slabs of act take the next tile's first A (at row
 * next_m0, if >= 0). The first layer waits for each slab of the tile's A on
 * its mbarrier (phase aphase). g0 is the stream index of the tile's first B
 * slab; q is thread 0's issue cursor. */
template <int EPI, int TM, int NACC>
__device__ __forceinline__ void
chain_layer(const Chain &C, const ChainMaps &M, const CUtensorMap &a, int l, unsigned char *act,
            unsigned act_s, unsigned ring_s, unsigned bars, unsigned abars, unsigned aphase, int m0,
            int next_m0, int g0, ChainCursor &q)
{
    constexpr bool TALL = TM != CH_M;
    constexpr int NS = ChainShape<TM>::stages;
    constexpr int WN = 2 * NACC;             /* columns of one warpgroup */
    constexpr int BLKN = TALL ? WN : 2 * WN; /* columns of the block: 256 wide, 128 narrow */
    constexpr int NP = WN / 8;               /* column pairs of one thread, per row */
    const ChainLayer &L = C.l[l];
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = (tid >> 5) & 3;
    /* the warpgroup's rows (its own 64 of a tall tile) and columns */
    const int rg = TALL ? wg * CH_M : 0, cw = TALL ? 0 : wg * WN;
    const int rw = warp * 16 + (lane >> 2), cq = 2 * (lane & 3);
    const unsigned act_w = act_s + (TALL ? wg * CH_ACT : 0); /* its activation buffer */
    const bool last = l + 1 == C.layers;

    /* what the epilogue reads, in flight during the wgmmas: the ELU'
     * records of this thread's elements (rows rw and rw + 8), or the bias of
     * its columns. The records of a tall tile's wide layer would take 128
     * registers beside its 128 accumulators: there the epilogue runs in
     * PARTS parts of NPE column pairs, the first part's records loaded now,
     * each later part's once the part before it has freed its accumulators,
     * from L2, where they are asked for now. */
    constexpr int PARTS = EPI == EPI_ELU_GRAD && NACC == 128 ? 4 : 1;
    constexpr int NPE = NP / PARTS;
    float2 pre[EPI == EPI_ELU_GRAD ? 2 * NP : NP];
    auto load_pre = [&](int j) {
        const int col = cw + 8 * j + cq; /* n is a multiple of 4: pairs are whole */
        if (EPI == EPI_ELU_GRAD) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = m0 + rg + rw + 8 * h;
                pre[2 * j + h] =
                    row < C.m && col < L.n
                        ? __ldg(reinterpret_cast<const float2 *>(L.y + (size_t)row * L.n + col))
                        : make_float2(0.0f, 0.0f);
            }
        } else {
            pre[j] = col < L.n ? __ldg(reinterpret_cast<const float2 *>(L.bias + col))
                               : make_float2(0.0f, 0.0f);
        }
    };
#pragma unroll
    for (int j = 0; j < NPE; j++)
        load_pre(j);
    if constexpr (PARTS > 1) {
        /* the later parts' lines of each row, shared by the row's quad */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = m0 + rg + rw + 8 * h;
#pragma unroll
            for (int c = 32 * (lane & 3); c < 8 * (NP - NPE); c += 128)
                if (row < C.m && cw + 8 * NPE + c < L.n)
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(L.y + (size_t)row * L.n + cw +
                                                                  8 * NPE + c));
        }
    }

    /* thread 0, last layer: the next tile's A slabs issued so far (from the
     * second slab on, once the previous layer's output stores have read act) */
    const bool refill = last && next_m0 >= 0 && tid == 0;
    const int a_slabs = C.l[0].slabs;
    int a_next = 0;
    float acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; i++)
        acc[i] = 0.0f;
    const int t0 = g0 + C.first[l];
    for (int s = 0; s < L.slabs; s++) {
        const int t = t0 + s;
        if (l == 0)
            mbar_wait_cta(abars + 8 * s, aphase);
        mbar_wait_cta(bars + 8 * (t % NS), (unsigned)(t / NS) & 1u);
        wgmma_fence();
        wgmma_slab(acc, act_w + s * CH_ASLAB, ring_s + (t % NS) * CH_WSLAB + cw * 128);
        wgmma_commit();
        wgmma_wait_one(); /* this warpgroup's slab t - 1 is done */
        if (last && s == 0 && (tid & 31) == 0)
            bulk_wait_read(); /* the previous layer's output stores (each warp's) have read act */
        __syncthreads();      /* every warpgroup's: its stage takes the next slab of the stream */
        if (tid == 0 && t >= 1)
            chain_issue<TM>(C, M, ring_s, bars, q);
        if (refill && s >= 1 && a_next < a_slabs) /* act's slab s - 1 is read */
            chain_issue_a<TM>(C, a, act_s, abars, next_m0, a_next++);
    }
    wgmma_wait_all();
    if ((tid & 31) == 0)
        bulk_wait_read(); /* the previous layer's output stores have read act */
    __syncthreads();      /* and every wgmma of this layer has */
    if (refill)
        while (a_next < a_slabs)
            chain_issue_a<TM>(C, a, act_s, abars, next_m0, a_next++);

    /* Every output pair of this thread, part by part (above): store(h, j, v)
     * takes the epilogue's value v of rows rw + 8 h, columns cw + 8 j + cq
     * (j a compile-time index once unrolled). */
    const int elu = EPI == EPI_BIAS_ACT ? L.elu : 0;
    auto each_pair = [&](auto store) {
#pragma unroll
        for (int part = 0; part < PARTS; part++) {
            if (part > 0) {
#pragma unroll
                for (int j = part * NPE; j < (part + 1) * NPE; j++)
                    load_pre(j);
            }
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int j = part * NPE; j < (part + 1) * NPE; j++)
                    store(h, j, [&] {
                        return chain_pair<EPI>(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1],
                                               pre[EPI == EPI_ELU_GRAD ? 2 * j + h : j], elu);
                    });
        }
    };
    const bool cols_full = L.n == BLKN;
    if (last) {
        if (cols_full && m0 + TM <= C.m) {
            /* every element is live and the row stride is BLKN: one address
             * and compile-time offsets from it */
            float *const c0 = L.c + (size_t)(m0 + rg + rw) * BLKN + cw + cq;
            each_pair([&](int h, int j, auto value) {
                *reinterpret_cast<float2 *>(c0 + (size_t)h * 8 * BLKN + 8 * j) = value();
            });
        } else {
            each_pair([&](int h, int j, auto value) {
                const int row = m0 + rg + rw + 8 * h, col = cw + 8 * j + cq;
                if (row < C.m && col < L.n)
                    *reinterpret_cast<float2 *>(L.c + (size_t)row * L.n + col) = value();
            });
        }
        return;
    }

    /* the output into act, as the next layer's A and for its stores: in the
     * swizzled slabs (sw128_off) element (rl, col) is at slab col / 32, row
     * rl, chunk ((col % 32) / 4) ^ (rl % 8); for this thread col % 32 = 8 (j
     * % 4) + cq and rl % 8 = rw % 8. Past n the values are 0, as the
     * weights were there. */
    unsigned char *const a0 =
        act + (act_w - act_s) + (cw >> 5) * CH_ASLAB + rw * 128 + (cq & 3) * 4;
    unsigned chunk[4];
#pragma unroll
    for (int r = 0; r < 4; r++)
        chunk[r] = (unsigned)(((2 * r + (cq >> 2)) ^ (rw & 7)) << 4);
    each_pair([&](int h, int j, auto value) {
        *reinterpret_cast<float2 *>(a0 + h * 8 * 128 + (j >> 2) * CH_ASLAB + chunk[j & 3]) =
            cols_full || cw + 8 * j + cq < L.n ? value() : make_float2(0.0f, 0.0f);
    });
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();       /* the output is complete in act */
    if ((tid & 31) == 0) { /* into L.c, clipped to the batch and to n: box i by warp i mod 8 */
        const int ns = (L.n + BK - 1) / BK, nb = chain_halves<TM>(C, m0) * ns;
        for (int i = tid >> 5; i < nb; i += NT / 32)
            tma_store_2d(&M.c[l], (i % ns) * BK, m0 + (i / ns) * CH_M,
                         act_s + (i / ns) * CH_ACT + (i % ns) * CH_ASLAB);
        bulk_commit();
    }
}

#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

/* A chain of layers on TM-row tiles (ChainShape): the forward (EPI_BIAS_ACT:
 * x → h1 → h2 → out) or the backward's hidden gradients (EPI_ELU_GRAD: dout
 * → dh2_pre → dh1_pre). A tile's first A (x or dout) arrives by TMA ([64
 * rows, 32 k] boxes; for every tile but the block's first, during the
 * previous tile's last layer); each layer's output but the last goes into
 * the tile's activation buffers, as the next layer's A, and from there by
 * TMA to device memory (the records, or the hidden gradients the weight
 * gradients read), the last layer's from the registers. Every output
 * element gets the k order, the rounding of B and the epilogue of
 * v3_wgmma_layer (or v3_wgmma_hidden_grad): the same bits, whatever TM. A
 * programmatic dependent of the prep launch: it waits for it before its
 * first copy of B. */
template <int EPI, int TM>
__global__ void __launch_bounds__(NT, 1)
    v3_wgmma_chain_kernel(const __grid_constant__ CUtensorMap a, const __grid_constant__ Chain C,
                          const __grid_constant__ ChainMaps M)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = ChainShape<TM>;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_u32(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    unsigned char *const act = smem_raw + (base - raw);
    const unsigned ring_s = base + S::halves * CH_ACT;
    const unsigned abars = ring_s + S::stages * CH_WSLAB, bars = abars + 8 * (KMAX / BK);
    const int tid = threadIdx.x;
    /* this block's tiles and slabs */
    const int tiles = (C.m + TM - 1) / TM;
    const int mine = (tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
    const int per_tile = C.first[C.layers], total = mine * per_tile;

    if (tid == 0) {
        for (int s = 0; s < KMAX / BK; s++)
            mbar_init(abars + 8 * s, 1);
        for (int s = 0; s < S::stages; s++)
            mbar_init(bars + 8 * s, 1);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    v2pdl::pdl_wait(); /* the prepared weights are complete */
    v2pdl::pdl_trigger();
    ChainCursor q = {0, 0, total};
    if (tid == 0) {
        for (int s = 0; s < C.l[0].slabs; s++)
            chain_issue_a<TM>(C, a, base, abars, (int)blockIdx.x * TM, s);
        for (int t = 0; t < S::stages; t++)
            chain_issue<TM>(C, M, ring_s, bars, q);
    }
    __syncthreads(); /* the mbarriers' initialisation is visible */
    constexpr int WIDE = TM == CH_M ? 64 : 128, NARROW = WIDE / 2; /* accumulators */
    for (int i = 0; i < mine; i++) {
        const int m0 = ((int)blockIdx.x + i * (int)gridDim.x) * TM;
        const int next_m0 = i + 1 < mine ? m0 + (int)gridDim.x * TM : -1;
        for (int l = 0; l < C.layers; l++) {
            if (C.l[l].wide)
                chain_layer<EPI, TM, WIDE>(C, M, a, l, act, base, ring_s, bars, abars,
                                           (unsigned)i & 1u, m0, next_m0, i * per_tile, q);
            else
                chain_layer<EPI, TM, NARROW>(C, M, a, l, act, base, ring_s, bars, abars,
                                             (unsigned)i & 1u, m0, next_m0, i * per_tile, q);
        }
    }
    if ((tid & 31) == 0) /* each warp's stored outputs are written before the shared memory goes */
        bulk_wait_all();
#else
    (void)a, (void)C, (void)M;
#endif
}

/* ------------------------------------------------------------- host -- */

/* Per device: whether v3_wgmma_prepare found the kernels' image and raised
 * their shared-memory limit there, and its multiprocessor count. */
constexpr int MAX_DEVICES = 64;
v3tmap::encoder_t g_encode = nullptr;
int g_ready[MAX_DEVICES];
int g_sms[MAX_DEVICES];

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The current device's index, or -1 where it has none of the above. */
int ready_device()
{
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= MAX_DEVICES || !g_ready[dev])
        return -1;
    return dev;
}

/* The tile shape for an m x n product on `sms` multiprocessors: narrow
 * tiles where a tall grid would keep at most half of the multiprocessors
 * busy (on the H200's 132: B <= 4,224 for a 256-wide layer, 8,448 for a
 * 128-wide one), tall ones above. A narrow tile halves a block's work and
 * the Wᵀ slice it stages; short tiles, which halve the work but not the
 * slice, measured slower than narrow ones at every batch and are not
 * picked (docs/perf-notes-v3-fast.md, "Short tiles", "Narrow tiles"). */
int auto_tile(int m, int n, int sms)
{
    const long tall = (long)((m + BM - 1) / BM) * ((n + BN - 1) / BN);
    return 2 * tall <= sms ? V3_WGMMA_TILE_NARROW : V3_WGMMA_TILE_TALL;
}

/* Row-tile groups of the persistent grid (launch_shape): one group of
 * tiles_n column blocks per tiles_n multiprocessors, at least one, at most
 * one per row tile. */
int layer_groups(int tiles_m, int tiles_n, int sms)
{
    const int groups = sms / tiles_n;
    return groups < 1 ? 1 : groups > tiles_m ? tiles_m : groups;
}

/* The tensor map of a K-major operand a [m, k] (k contiguous: an A operand,
 * or the chain's prepared B): [rows, 32 k] boxes in the 128-byte swizzle,
 * zero fill past m and k. */
bool encode_kmajor_map(CUtensorMap *map, const float *a, int k, int m, int rows)
{
    return v3tmap::encode_2d(g_encode, map, a, k, m, BK, rows, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

/* The tensor map of a row-major operand t [rows, width] of the weight
 * gradients (v3_wgmma_wgrad_tma_kernel, v3_wgmma_wgrad_wide_kernel):
 * [WT_HALF rows, cols columns] boxes, no swizzle, zero fill past the rows
 * and the width. */
bool encode_rows_map(CUtensorMap *map, const float *t, int width, int rows, int cols)
{
    return v3tmap::encode_2d(g_encode, map, t, width, rows, cols, WT_HALF,
                             CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

/* The A operand's tensor map ([m, k], k contiguous, [TM rows, 32 k] boxes)
 * and the persistent grid for L, then one launch of kernel. */
template <int STAGING, int EPI, int TM, int TN, int NS>
cudaError_t launch_shape(int dev, const float *a, Layer L, cudaStream_t stream)
{
    CUtensorMap map;
    if (!encode_kmajor_map(&map, a, L.k, L.m, TM))
        return cudaErrorInvalidValue;
    L.tiles_n = (L.n + TN - 1) / TN;
    L.tiles_m = (L.m + TM - 1) / TM;
    const int groups = layer_groups(L.tiles_m, L.tiles_n, g_sms[dev]);
    return v2pdl::launch(
        v3_wgmma_layer_kernel<STAGING, EPI, TM, TN, NS>, dim3((unsigned)(groups * L.tiles_n)),
        dim3(NT), layer_smem_bytes<TM, TN, NS>(), stream, L.pdl != 0, map, L);
}

/* launch_shape with the tile shape `tile` (V3_WGMMA_TILE_AUTO: auto_tile). */
template <int STAGING, int EPI>
cudaError_t launch(int dev, const float *a, Layer L, int tile, cudaStream_t stream)
{
    constexpr int NS = ring_stages<EPI>();
    if (tile == V3_WGMMA_TILE_AUTO)
        tile = auto_tile(L.m, L.n, g_sms[dev]);
    switch (tile) {
    case V3_WGMMA_TILE_SHORT:
        return launch_shape<STAGING, EPI, BM_SHORT, BN, NS>(dev, a, L, stream);
    case V3_WGMMA_TILE_NARROW:
        return launch_shape<STAGING, EPI, BM, BN_NARROW, NS>(dev, a, L, stream);
    case V3_WGMMA_TILE_PAIRED:
        return launch_shape<STAGING, EPI, BM, BN_NARROW, PAIRED_STAGES>(dev, a, L, stream);
    default:
        return launch_shape<STAGING, EPI, BM, BN, NS>(dev, a, L, stream);
    }
}

bool tile_ok(int tile) { return tile >= V3_WGMMA_TILE_AUTO && tile <= V3_WGMMA_TILE_PAIRED; }

/* Which kernel computes the weight gradients of a batch: the 128 x 128
 * kernels with their operands loaded by each thread (below
 * V3_WGMMA_WGRAD_TMA_MIN_BATCH, two blocks per SM) or by TMA (one block per
 * SM), or the wide tiles (from V3_WGMMA_WGRAD_WIDE_MIN_BATCH, one block per
 * SM). */
enum WgradKind {
    WGK_LOADS = V3_WGMMA_WGRAD_LOADS,
    WGK_TMA = V3_WGMMA_WGRAD_TMA,
    WGK_WIDE = V3_WGMMA_WGRAD_WIDE
};

WgradKind wgrad_kind(int batch)
{
    return batch >= V3_WGMMA_WGRAD_WIDE_MIN_BATCH  ? WGK_WIDE
           : batch >= V3_WGMMA_WGRAD_TMA_MIN_BATCH ? WGK_TMA
                                                   : WGK_LOADS;
}

/* g's columns per tile, and the most blocks of one wave, of a kind. */
int wgrad_tile_n(WgradKind k) { return k == WGK_WIDE ? WW_BN : BN; }
int wgrad_max_blocks(WgradKind k) { return k == WGK_LOADS ? WG_MAX_BLOCKS : WT_MAX_BLOCKS; }

/* The tiles of an m x n gradient, tn columns wide (wgrad_tile_n). */
int wgrad_tile_count(int m, int n, int tn) { return ((m + BM - 1) / BM) * ((n + tn - 1) / tn); }

/* Whether a kind computes the m x n gradient as its transpose: the wide
 * kind, where that makes fewer tiles. */
bool wgrad_swap(WgradKind k, int m, int n)
{
    return k == WGK_WIDE && wgrad_tile_count(n, m, WW_BN) < wgrad_tile_count(m, n, WW_BN);
}

/* The tiles of the three gradients for a kind. */
int wgrad_tiles(atk_dims_t d, WgradKind k)
{
    const int ms[3] = {d.enc, d.h1, d.h2}, ns[3] = {d.h1, d.h2, d.aux}, tn = wgrad_tile_n(k);
    int tiles = 0;
    for (int q = 0; q < 3; q++)
        tiles += wgrad_swap(k, ms[q], ns[q]) ? wgrad_tile_count(ns[q], ms[q], tn)
                                             : wgrad_tile_count(ms[q], ns[q], tn);
    return tiles;
}

int wgrad_cap(atk_dims_t d, WgradKind k)
{
    const int c = wgrad_max_blocks(k) / wgrad_tiles(d, k);
    return c > 1 ? c : 1;
}

/* The largest batch planned with short chunks (0: none). */
int wgrad_short_max_batch(atk_dims_t d, WgradKind k)
{
    return wgrad_max_blocks(k) / 3 / wgrad_tiles(d, k) * 256;
}

/* The chunks the plan of a kind aims at for this batch (nc <= it). */
int wgrad_chunk_want(atk_dims_t d, WgradKind k, int batch)
{
    const int rows = batch <= wgrad_short_max_batch(d, k) ? BK : 256;
    const int want = (batch + rows - 1) / rows, cap = wgrad_cap(d, k);
    return want < cap ? want : cap;
}

/* >= nc for every batch up to this one (the workspace's partials): each
 * plan is monotone within each regime, so its largest value is at the
 * batch itself or at the last short-chunk batch; the largest of the three
 * kinds' bounds. */
int wgrad_chunk_bound(atk_dims_t d, int batch)
{
    int most = 0;
    for (WgradKind k : {WGK_LOADS, WGK_TMA, WGK_WIDE}) {
        const int at = wgrad_chunk_want(d, k, batch), bt = wgrad_short_max_batch(d, k);
        const int at_short = bt > 0 && batch > bt ? wgrad_chunk_want(d, k, bt) : 0;
        most = at > most ? at : most;
        most = at_short > most ? at_short : most;
    }
    return most;
}

/* The weight gradients' chunk plan. As cuda-v2's fast mode plans its own:
 * at most min(most / tiles, ceil(batch / 256)) chunks, each a whole number
 * of 32-row slabs, most being one wave of the batch's kernel (WG_MAX_BLOCKS,
 * two blocks per SM, or WT_MAX_BLOCKS, one per SM: 13 chunks of the
 * production topology's 10 128 x 128 tiles, 26 of its 5 wide ones); but
 * where that plan's grid (tiles x chunks) would hold at most a third of most
 * blocks (B <= 2,048 for the production topology), chunks of about 32 rows
 * instead, up to the same cap (16 chunks of 64 rows at B = 1,024, 22 of 96
 * at 2,048): the grid there is too small to hide a block's chain of slabs
 * (docs/perf-notes-v3-fast.md, "Short chunks at small batches" and "Two
 * narrow blocks per SM"; at 4,096 the short plan measured 2 µs slower). nc
 * chunks of len rows cover the batch and none is empty. */
void wgrad_chunks(atk_dims_t d, WgradKind k, int batch, int &nc, int &len)
{
    const int want = wgrad_chunk_want(d, k, batch);
    len = ((batch + want - 1) / want + BK - 1) / BK * BK;
    nc = (batch + len - 1) / len;
}

bool wgrad_dims_ok(atk_dims_t d)
{
    return d.enc > 0 && d.h1 > 0 && d.h2 > 0 && d.aux > 0 && d.enc % 4 == 0 && d.h1 % 4 == 0 &&
           d.h2 % 4 == 0 && d.aux % 4 == 0;
}

/* The chain's widths: each a multiple of 4 and at most 256 (one B slab of
 * at most 256 columns, one tile of at most eight 32-float slabs). */
bool chain_width_ok(int w) { return w > 0 && w % 4 == 0 && w <= CH_NMAX && w <= KMAX; }

/* The chain's slab plan, its layers' prepared copies in scratch (one after
 * another, each [n, k]) with their B tensor maps ([256 or 128 n, 32 k]
 * boxes), the output maps of every layer but the last ([m, n], [64 rows, 32
 * n] boxes) and the first A's ([m, k0], [64 rows, 32 k] boxes); then the prep
 * launch (an ordinary one: whatever the caller queued before is complete
 * before it runs) and the chain on TM-row tiles as its programmatic
 * dependent. */
template <int EPI, int TM>
cudaError_t launch_chain(int dev, const float *a, int k0, Chain C, float *scratch,
                         cudaStream_t stream)
{
    CUtensorMap map;
    ChainMaps M;
    if (!encode_kmajor_map(&map, a, k0, C.m, CH_M))
        return cudaErrorInvalidValue;
    C.first[0] = 0;
    int prep_blocks = 0;
    for (int l = 0; l < C.layers; l++) {
        ChainLayer &L = C.l[l];
        L.slabs = (L.k + BK - 1) / BK;
        L.wide = L.n > CH_NMAX / 2;
        L.wcp = scratch;
        scratch += (size_t)L.n * L.k;
        C.first[l + 1] = C.first[l] + L.slabs;
        prep_blocks += prep_tiles(L.n, L.k);
        /* the last layer stores from the registers: no map for its output */
        if (!encode_kmajor_map(&M.b[l], L.wcp, L.k, L.n, L.wide ? CH_NMAX : CH_NMAX / 2) ||
            (l + 1 < C.layers && !encode_kmajor_map(&M.c[l], L.c, L.n, C.m, CH_M)))
            return cudaErrorInvalidValue;
    }
    for (int l = C.layers - 1; l < CH_LAYERS; l++)
        M.c[l] = M.c[0]; /* never read */
    for (int l = C.layers; l < CH_LAYERS; l++)
        M.b[l] = M.b[0]; /* never read */
    cudaError_t e;
    if ((e = v2pdl::launch(v3_wgmma_chain_prep_kernel<EPI>, dim3((unsigned)prep_blocks), dim3(256),
                           0, stream, false, C)) != cudaSuccess)
        return e;
    /* persistent: one block per multiprocessor, at most one per tile */
    const int tiles = (C.m + TM - 1) / TM;
    const int grid = tiles < g_sms[dev] ? tiles : g_sms[dev];
    return v2pdl::launch(v3_wgmma_chain_kernel<EPI, TM>, dim3((unsigned)grid), dim3(NT),
                         ChainShape<TM>::smem, stream, true, map, C, M);
}

/* The chain's tile rows for `tile` (V3_WGMMA_CHAIN_TILE_*) at batch m:
 * AUTO takes 128-row tiles where they give at least 7/8 of the
 * multiprocessors one (B >= 14,721 on the H200's 132), else 64; 0 for a
 * tile argument outside the list. */
int chain_rows(int tile, int m, int sms)
{
    if (tile == V3_WGMMA_CHAIN_TILE_AUTO)
        return 8L * ((m + 127) / 128) >= 7L * sms ? 128 : 64;
    return tile == V3_WGMMA_CHAIN_TILE_64 ? 64 : tile == V3_WGMMA_CHAIN_TILE_128 ? 128 : 0;
}

template <int EPI>
cudaError_t launch_chain_tile(int dev, const float *a, int k0, const Chain &C, float *scratch,
                              int tile, cudaStream_t stream)
{
    const int rows = chain_rows(tile, C.m, g_sms[dev]);
    if (rows == 128)
        return launch_chain<EPI, 128>(dev, a, k0, C, scratch, stream);
    if (rows == 64)
        return launch_chain<EPI, 64>(dev, a, k0, C, scratch, stream);
    return cudaErrorInvalidValue;
}

} /* namespace */

extern "C" cudaError_t v3_wgmma_prepare(void)
{
    int dev, smem_max;
    cudaError_t e;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess)
        return e;
    if (dev < 0 || dev >= MAX_DEVICES)
        return cudaSuccess;
    g_ready[dev] = 0;
    /* every layer kernel: 3 stagings (with their epilogues) x 4 shapes, each
     * with its shared memory */
    constexpr int FS = ring_stages<EPI_BIAS_ACT>(), HS = ring_stages<EPI_ELU_GRAD>();
#define V3W_KERNEL(ST, EPI, TM, TN, NS)                                           \
    {reinterpret_cast<const void *>(v3_wgmma_layer_kernel<ST, EPI, TM, TN, NS>), \
     layer_smem_bytes<TM, TN, NS>()}
#define V3W_KERNELS(ST, EPI, NS)                                                              \
    V3W_KERNEL(ST, EPI, BM, BN, NS), V3W_KERNEL(ST, EPI, BM_SHORT, BN, NS),                   \
        V3W_KERNEL(ST, EPI, BM, BN_NARROW, NS), V3W_KERNEL(ST, EPI, BM, BN_NARROW, PAIRED_STAGES)
    const struct {
        const void *k;
        int smem;
    } kernels[12] = {V3W_KERNELS(V3_WGMMA_STAGING_SCALAR, EPI_BIAS_ACT, FS),
                     V3W_KERNELS(V3_WGMMA_STAGING_BLOCK4, EPI_BIAS_ACT, FS),
                     V3W_KERNELS(STAGING_ROWS, EPI_ELU_GRAD, HS)};
#undef V3W_KERNELS
#undef V3W_KERNEL
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kernels[0].k) != cudaSuccess) {
        (void)cudaGetLastError(); /* no sm_90a image for this device: an answer, not an error */
        return cudaSuccess;
    }
    if ((e = cudaDeviceGetAttribute(&g_sms[dev], cudaDevAttrMultiProcessorCount, dev)) !=
            cudaSuccess ||
        (e = cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) !=
            cudaSuccess)
        return e;
    if (smem_max < SMEM_BYTES || smem_max < CH_SMEM_MAX)
        return cudaSuccess;
    for (const auto &kn : kernels)
        if ((e = cudaFuncSetAttribute(kn.k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      kn.smem)) != cudaSuccess)
            return e;
    if ((e = cudaFuncSetAttribute(reinterpret_cast<const void *>(v3_wgmma_wgrad_kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, WG_SMEM_BYTES)) !=
            cudaSuccess ||
        (e = cudaFuncSetAttribute(reinterpret_cast<const void *>(v3_wgmma_wgrad_tma_kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, WT_SMEM_BYTES)) !=
            cudaSuccess ||
        (e = cudaFuncSetAttribute(reinterpret_cast<const void *>(v3_wgmma_dh2_dw3_kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, FD_SMEM_BYTES)) !=
            cudaSuccess ||
        (e = cudaFuncSetAttribute(reinterpret_cast<const void *>(v3_wgmma_wgrad_wide_kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, WW_SMEM_BYTES)) !=
            cudaSuccess ||
        (e = cudaFuncSetAttribute(
             reinterpret_cast<const void *>(v3_wgmma_chain_kernel<EPI_BIAS_ACT, 64>),
             cudaFuncAttributeMaxDynamicSharedMemorySize, ChainShape<64>::smem)) != cudaSuccess ||
        (e = cudaFuncSetAttribute(
             reinterpret_cast<const void *>(v3_wgmma_chain_kernel<EPI_ELU_GRAD, 64>),
             cudaFuncAttributeMaxDynamicSharedMemorySize, ChainShape<64>::smem)) != cudaSuccess ||
        (e = cudaFuncSetAttribute(
             reinterpret_cast<const void *>(v3_wgmma_chain_kernel<EPI_BIAS_ACT, 128>),
             cudaFuncAttributeMaxDynamicSharedMemorySize, ChainShape<128>::smem)) != cudaSuccess ||
        (e = cudaFuncSetAttribute(
             reinterpret_cast<const void *>(v3_wgmma_chain_kernel<EPI_ELU_GRAD, 128>),
             cudaFuncAttributeMaxDynamicSharedMemorySize, ChainShape<128>::smem)) != cudaSuccess ||
        (e = cudaFuncGetAttributes(
             &fa, reinterpret_cast<const void *>(v3_wgmma_wgrad_sum_kernel))) != cudaSuccess ||
        (e = cudaFuncGetAttributes(
             &fa, reinterpret_cast<const void *>(v3_wgmma_chain_prep_kernel<EPI_BIAS_ACT>))) !=
            cudaSuccess ||
        (e = cudaFuncGetAttributes(
             &fa, reinterpret_cast<const void *>(v3_wgmma_chain_prep_kernel<EPI_ELU_GRAD>))) !=
            cudaSuccess)
        return e;
    if (!g_encode && !(g_encode = v3tmap::find_encoder()))
        return cudaSuccess;
    g_ready[dev] = 1;
    return cudaSuccess;
}

extern "C" int v3_wgmma_available(void) { return ready_device() >= 0; }

extern "C" int v3_wgmma_layer_supported(int m, int n, int k)
{
    return m > 0 && n > 0 && k > 0 && n % 4 == 0 && k % 4 == 0 && k <= KMAX;
}

extern "C" int v3_wgmma_call_tile(int m, const int *n, int count)
{
    const int dev = ready_device();
    if (dev < 0 || m <= 0 || !n || count <= 0)
        return V3_WGMMA_TILE_AUTO;
    const int sms = g_sms[dev], tiles_m = (m + BM - 1) / BM;
    int most = 0; /* blocks of the largest grid */
    for (int i = 0; i < count; i++) {
        if (n[i] <= 0 || auto_tile(m, n[i], sms) != V3_WGMMA_TILE_NARROW)
            return V3_WGMMA_TILE_AUTO;
        const int tiles_n = (n[i] + BN_NARROW - 1) / BN_NARROW;
        const int blocks = layer_groups(tiles_m, tiles_n, sms) * tiles_n;
        most = blocks > most ? blocks : most;
    }
    return 2 * most > sms ? V3_WGMMA_TILE_PAIRED : V3_WGMMA_TILE_AUTO;
}

extern "C" cudaError_t v3_wgmma_layer(const float *a, const float *w, const float *bias, float *c,
                                      int m, int n, int k, int elu, int staging, int pdl, int tile,
                                      cudaStream_t stream)
{
    const int dev = ready_device();
    if (dev < 0 || !a || !w || !bias || !c || !v3_wgmma_layer_supported(m, n, k) ||
        !tile_ok(tile) || !aligned16(a) || !aligned16(c) ||
        (staging != V3_WGMMA_STAGING_SCALAR && staging != V3_WGMMA_STAGING_BLOCK4) ||
        (staging == V3_WGMMA_STAGING_BLOCK4 && !aligned16(w)))
        return cudaErrorInvalidValue;
    Layer L = {};
    L.w = w, L.bias = bias, L.c = c, L.m = m, L.n = n, L.k = k, L.elu = elu, L.pdl = pdl;
    if (staging == V3_WGMMA_STAGING_BLOCK4)
        return launch<V3_WGMMA_STAGING_BLOCK4, EPI_BIAS_ACT>(dev, a, L, tile, stream);
    return launch<V3_WGMMA_STAGING_SCALAR, EPI_BIAS_ACT>(dev, a, L, tile, stream);
}

extern "C" cudaError_t v3_wgmma_hidden_grad(const float *d, const float *w, const float *y,
                                            float *c, int m, int n, int k, int pdl, int tile,
                                            cudaStream_t stream)
{
    const int dev = ready_device();
    if (dev < 0 || !d || !w || !y || !c || !v3_wgmma_layer_supported(m, n, k) || !tile_ok(tile) ||
        !aligned16(d) || !aligned16(w) || !aligned16(y) || !aligned16(c))
        return cudaErrorInvalidValue;
    Layer L = {};
    L.w = w, L.y = y, L.c = c, L.m = m, L.n = n, L.k = k, L.pdl = pdl;
    return launch<STAGING_ROWS, EPI_ELU_GRAD>(dev, d, L, tile, stream);
}

/* The row-tile groups of the fused dh2_pre + dW3 launch: as a layer
 * launch's, at most V3_WGMMA_DW3_MAX_GROUPS (the partials it writes). */
int dw3_groups(int m, int n, int sms)
{
    const int tiles_n = (n + FD_TN - 1) / FD_TN, tiles_m = (m + BM - 1) / BM;
    const int g = layer_groups(tiles_m, tiles_n, sms);
    return g < V3_WGMMA_DW3_MAX_GROUPS ? g : V3_WGMMA_DW3_MAX_GROUPS;
}

size_t dw3_partial_floats(atk_dims_t d) { return (size_t)d.h2 * d.aux + d.aux; }

extern "C" int v3_wgmma_dw3_supported(atk_dims_t d)
{
    return wgrad_dims_ok(d) && d.aux <= FD_KMAX && v3_wgmma_layer_supported(1, d.h2, d.aux);
}

extern "C" size_t v3_wgmma_dw3_partials_floats(atk_dims_t d)
{
    return v3_wgmma_dw3_supported(d) ? (size_t)V3_WGMMA_DW3_MAX_GROUPS * dw3_partial_floats(d) : 0;
}

extern "C" cudaError_t v3_wgmma_hidden_grad_dw3(atk_dims_t d, const float *dout, const float *w3,
                                                const float *h2, float *dh2, int batch,
                                                float *partials, int pdl, cudaStream_t stream)
{
    const int dev = ready_device();
    if (dev < 0 || batch <= 0 || !v3_wgmma_dw3_supported(d) || !dout || !w3 || !h2 || !dh2 ||
        !partials || !aligned16(dout) || !aligned16(w3) || !aligned16(h2) || !aligned16(dh2) ||
        !aligned16(partials))
        return cudaErrorInvalidValue;
    CUtensorMap map;
    if (!encode_kmajor_map(&map, dout, d.aux, batch, BM))
        return cudaErrorInvalidValue;
    Layer L = {};
    L.w = w3, L.y = h2, L.c = dh2, L.m = batch, L.n = d.h2, L.k = d.aux, L.pdl = pdl;
    L.tiles_n = (L.n + FD_TN - 1) / FD_TN;
    L.tiles_m = (L.m + BM - 1) / BM;
    const int groups = dw3_groups(batch, d.h2, g_sms[dev]);
    return v2pdl::launch(v3_wgmma_dh2_dw3_kernel, dim3((unsigned)(groups * L.tiles_n)), dim3(NT),
                         FD_SMEM_BYTES, stream, pdl != 0, map, L, partials,
                         dw3_partial_floats(d));
}

extern "C" cudaError_t v3_wgmma_dw3_sum(atk_dims_t d, int batch, const atk_grads_t *g,
                                        int accumulate, const float *partials, int pdl,
                                        cudaStream_t stream)
{
    const int dev = ready_device();
    if (dev < 0 || batch <= 0 || !v3_wgmma_dw3_supported(d) || !g || !g->dw3 || !g->db3 ||
        !aligned16(g->dw3) || !aligned16(g->db3) || !partials || !aligned16(partials))
        return cudaErrorInvalidValue;
    const size_t w3 = AUXTRUNK_W3_OFFSET(&d), b3 = AUXTRUNK_B3_OFFSET(&d),
                 end = AUXTRUNK_PARAM_COUNT(&d);
    WSum R = {};
    R.partials = partials, R.stride = dw3_partial_floats(d);
    R.nc = dw3_groups(batch, d.h2, g_sms[dev]), R.accumulate = accumulate;
    R.begin = R.poff = w3;
    for (int i = 0; i < 4; i++) /* no dW1 … db2 */
        R.end[i] = w3;
    R.end[4] = b3, R.end[5] = end, R.dst[4] = g->dw3, R.dst[5] = g->db3;
    const size_t quads = (end - w3) / 4;
    return v2pdl::launch(v3_wgmma_wgrad_sum_kernel,
                         dim3((unsigned)((quads + SUM_THREADS - 1) / SUM_THREADS)),
                         dim3(SUM_THREADS), 0, stream, pdl != 0, R);
}

extern "C" size_t v3_wgmma_weight_grads_floats(atk_dims_t d, int batch)
{
    if (!wgrad_dims_ok(d) || batch <= 0)
        return 0;
    return (size_t)wgrad_chunk_bound(d, batch) * AUXTRUNK_PARAM_COUNT(&d);
}

extern "C" cudaError_t v3_wgmma_weight_grads_as(atk_dims_t d, const float *x, const float *h1,
                                                const float *h2, const float *dout,
                                                const float *dh1, const float *dh2, int batch,
                                                const atk_grads_t *g, int accumulate,
                                                float *partials, int first, int last, int kernel,
                                                int pdl, cudaStream_t stream)
{
    const int dev = ready_device();
    if (dev < 0 || !g || !wgrad_dims_ok(d) || batch <= 0 || first < 0 || first > last || last > 2 ||
        kernel < V3_WGMMA_WGRAD_AUTO || kernel > V3_WGMMA_WGRAD_WIDE)
        return cudaErrorInvalidValue;
    /* what the gradients first..last read and write */
    const float *const acts[3] = {x, h1, h2}, *const grads[3] = {dh1, dh2, dout};
    float *const dst[6] = {g->dw1, g->db1, g->dw2, g->db2, g->dw3, g->db3};
    if (!partials || !aligned16(partials))
        return cudaErrorInvalidValue;
    for (int q = first; q <= last; q++)
        if (!acts[q] || !aligned16(acts[q]) || !grads[q] || !aligned16(grads[q]) || !dst[2 * q] ||
            !aligned16(dst[2 * q]) || !dst[2 * q + 1] || !aligned16(dst[2 * q + 1]))
            return cudaErrorInvalidValue;

    /* the plan of all three, whichever are computed: each gradient's chunks,
     * hence its bits, are the same in one launch and in two */
    const size_t off[7] = {AUXTRUNK_W1_OFFSET(&d),  AUXTRUNK_B1_OFFSET(&d), AUXTRUNK_W2_OFFSET(&d),
                           AUXTRUNK_B2_OFFSET(&d),  AUXTRUNK_W3_OFFSET(&d), AUXTRUNK_B3_OFFSET(&d),
                           AUXTRUNK_PARAM_COUNT(&d)};
    const int ms[3] = {d.enc, d.h1, d.h2}, ns[3] = {d.h1, d.h2, d.aux};
    const WgradKind kind =
        kernel == V3_WGMMA_WGRAD_AUTO ? wgrad_kind(batch) : static_cast<WgradKind>(kernel);
    int nc, len;
    wgrad_chunks(d, kind, batch, nc, len);
    const int tn = wgrad_tile_n(kind);
    WGrads G = {};
    int tiles = 0;
    for (int q = 0; q < 3; q++) {
        WGrad &Q = G.q[q];
        Q.tile0 = tiles; /* a gradient outside first..last has no blocks */
        if (q < first || q > last)
            continue;
        Q.swap = wgrad_swap(kind, ms[q], ns[q]);
        Q.a = Q.swap ? grads[q] : acts[q], Q.g = Q.swap ? acts[q] : grads[q];
        Q.m = Q.swap ? ns[q] : ms[q], Q.n = Q.swap ? ms[q] : ns[q];
        Q.tiles_n = (Q.n + tn - 1) / tn;
        Q.dw_off = off[2 * q], Q.db_off = off[2 * q + 1];
        tiles += wgrad_tile_count(Q.m, Q.n, tn);
    }
    G.partials = partials, G.stride = off[6], G.batch = batch, G.chunk_len = len;
    cudaError_t e;
    if (kind != WGK_LOADS) {
        WGradMaps M = {};
        for (int q = first; q <= last; q++)
            if (!encode_rows_map(&M.a[q], G.q[q].a, G.q[q].m, batch, BM) ||
                !encode_rows_map(&M.g[q], G.q[q].g, G.q[q].n, batch, tn))
                return cudaErrorInvalidValue;
        if (kind == WGK_WIDE)
            e = v2pdl::launch(v3_wgmma_wgrad_wide_kernel, dim3((unsigned)tiles, (unsigned)nc),
                              dim3(NT), WW_SMEM_BYTES, stream, pdl != 0, G, M);
        else
            e = v2pdl::launch(v3_wgmma_wgrad_tma_kernel, dim3((unsigned)tiles, (unsigned)nc),
                              dim3(NT), WT_SMEM_BYTES, stream, pdl != 0, G, M);
    } else {
        e = v2pdl::launch(v3_wgmma_wgrad_kernel, dim3((unsigned)tiles, (unsigned)nc), dim3(NT),
                          WG_SMEM_BYTES, stream, pdl != 0, G);
    }
    if (e != cudaSuccess)
        return e;

    WSum R = {};
    R.partials = partials, R.stride = off[6], R.nc = nc, R.accumulate = accumulate;
    R.begin = off[2 * first];
    for (int i = 0; i < 6; i++) /* the gradients after last end where last does */
        R.end[i] = off[(i < 2 * last + 2 ? i : 2 * last + 1) + 1], R.dst[i] = dst[i];
    const size_t groups = (off[2 * last + 2] - R.begin) / 4;
    /* a dependent of the launch above, always */
    return v2pdl::launch(v3_wgmma_wgrad_sum_kernel,
                         dim3((unsigned)((groups + SUM_THREADS - 1) / SUM_THREADS)),
                         dim3(SUM_THREADS), 0, stream, true, R);
}

extern "C" int v3_wgmma_weight_grads_kernel(int batch)
{
    return batch > 0 ? wgrad_kind(batch) : V3_WGMMA_WGRAD_AUTO;
}

extern "C" cudaError_t v3_wgmma_weight_grads_of(atk_dims_t d, const float *x, const float *h1,
                                                const float *h2, const float *dout,
                                                const float *dh1, const float *dh2, int batch,
                                                const atk_grads_t *g, int accumulate,
                                                float *partials, int first, int last, int pdl,
                                                cudaStream_t stream)
{
    return v3_wgmma_weight_grads_as(d, x, h1, h2, dout, dh1, dh2, batch, g, accumulate, partials,
                                    first, last, V3_WGMMA_WGRAD_AUTO, pdl, stream);
}

extern "C" cudaError_t v3_wgmma_weight_grads(atk_dims_t d, const float *x, const float *h1,
                                             const float *h2, const float *dout, const float *dh1,
                                             const float *dh2, int batch, const atk_grads_t *g,
                                             int accumulate, float *partials, int pdl,
                                             cudaStream_t stream)
{
    return v3_wgmma_weight_grads_of(d, x, h1, h2, dout, dh1, dh2, batch, g, accumulate, partials,
                                    0, 2, pdl, stream);
}

extern "C" int v3_wgmma_chain_supported(atk_dims_t d)
{
    return chain_width_ok(d.enc) && chain_width_ok(d.h1) && chain_width_ok(d.h2) &&
           chain_width_ok(d.aux);
}

extern "C" size_t v3_wgmma_chain_scratch_floats(atk_dims_t d)
{
    if (!v3_wgmma_chain_supported(d))
        return 0;
    /* the forward's three copies; the hidden gradients' two are the last two of them in size */
    return (size_t)d.enc * d.h1 + (size_t)d.h1 * d.h2 + (size_t)d.h2 * d.aux;
}

extern "C" int v3_wgmma_chain_forward_picked(int batch)
{
    const int dev = ready_device();
    if (dev < 0 || batch <= 0)
        return 0;
    const long tiles = ((long)batch + 127) / 128, sms = g_sms[dev];
    return 8 * tiles >= 7 * sms && tiles <= sms;
}

extern "C" cudaError_t v3_wgmma_forward(atk_dims_t d, const atk_params_t *p, const float *x,
                                        int batch, float *h1, float *h2, float *out, float *scratch,
                                        int tile, cudaStream_t stream)
{
    const int dev = ready_device();
    if (dev < 0 || !p || batch <= 0 || !v3_wgmma_chain_supported(d) || !chain_rows(tile, batch, 1))
        return cudaErrorInvalidValue;
    const void *const ptr[8] = {x, h1, h2, out, p->w1, p->w2, p->w3, scratch};
    for (const void *q : ptr)
        if (!q || !aligned16(q))
            return cudaErrorInvalidValue;
    if (!p->b1 || !p->b2 || !p->b3)
        return cudaErrorInvalidValue;
    Chain C = {};
    C.layers = 3, C.m = batch;
    C.l[0] = {p->w1, p->b1, nullptr, h1, d.h1, d.enc, 1, 0, 0};
    C.l[1] = {p->w2, p->b2, nullptr, h2, d.h2, d.h1, 1, 0, 0};
    C.l[2] = {p->w3, p->b3, nullptr, out, d.aux, d.h2, 0, 0, 0};
    return launch_chain_tile<EPI_BIAS_ACT>(dev, x, d.enc, C, scratch, tile, stream);
}

extern "C" cudaError_t v3_wgmma_hidden_grads(atk_dims_t d, const atk_params_t *p, const float *dout,
                                             const float *h1, const float *h2, int batch,
                                             float *dh2, float *dh1, float *scratch, int tile,
                                             cudaStream_t stream)
{
    const int dev = ready_device();
    if (dev < 0 || !p || batch <= 0 || !v3_wgmma_chain_supported(d) || !chain_rows(tile, batch, 1))
        return cudaErrorInvalidValue;
    const void *const ptr[8] = {dout, h1, h2, dh2, dh1, p->w2, p->w3, scratch};
    for (const void *q : ptr)
        if (!q || !aligned16(q))
            return cudaErrorInvalidValue;
    Chain C = {};
    C.layers = 2, C.m = batch;
    C.l[0] = {p->w3, nullptr, h2, dh2, d.h2, d.aux, 0, 0, 0};
    C.l[1] = {p->w2, nullptr, h1, dh1, d.h1, d.h2, 0, 0, 0};
    return launch_chain_tile<EPI_ELU_GRAD>(dev, dout, d.aux, C, scratch, tile, stream);
}
