/*
 * trunk_v2_fast_tile.cuh — the geometry of the fast-mode (TF32) GEMM tile of
 * trunk_v2_fast.cu: shared-memory layouts and their swizzles, which thread
 * copies which 16-byte chunk of a stage, which shared-memory words a lane hands
 * to mma.sync.m16n8k8 (tf32), and which output element every accumulator
 * register is.
 *
 * Host and device code, no runtime calls. The kernels are built from these
 * functions; tests/cuda/test_fast_tile.cu runs the same functions on the host
 * against an emulation of the PTX fragment layouts and a plain matrix product,
 * and checks every warp-wide shared-memory access for bank conflicts, so the
 * index arithmetic is verified without a GPU.
 *
 * Terms. A GEMM here is C[m,n] = sum over k of A[m,k] * B[k,n]. An operand is
 * stored either k-contiguous ("KC": a[d*ld + k], d = m for A, n for B) or
 * d-contiguous ("NK": a[k*ld + d]). A block owns a BM x BN output tile and
 * walks k in slabs of BK; each of its 4 warps owns a WM x WN sub-tile made of
 * MT x NT8 mma tiles of 16 x 8.
 *
 * PTX fragment layout of mma.m16n8k8 .row.col tf32 (lane = 4*g + q):
 *   A (16x8):  a0 (g, q)   a1 (g+8, q)   a2 (g, q+4)   a3 (g+8, q+4)
 *   B (8x8):   b0 (k=q, n=g)            b1 (k=q+4, n=g)
 *   C (16x8):  c0 (g, 2q)  c1 (g, 2q+1)  c2 (g+8, 2q)  c3 (g+8, 2q+1)
 * The logical row/column/k of a fragment is free to stand for any physical
 * one as long as A, B and C agree, and this file chooses them so that every
 * fragment is read with 8-byte loads:
 *   k:  logical q -> physical 2q, logical q+4 -> 2q+1 (within each step of 8);
 *   m:  KC A: logical g -> g, g+8 -> g+8;  NK A: g -> 2g, g+8 -> 2g+1;
 *   n:  KC B: tile t of a 16-wide group, column g -> 8t + g;
 *       NK B: the two tiles of a 16-wide group interleave, column g of tile
 *       t -> 2g + t, so that a lane's four accumulators of one row are four
 *       consecutive columns (one 16-byte store).
 */
#ifndef AUXTRUNK_TRUNK_V2_FAST_TILE_CUH
#define AUXTRUNK_TRUNK_V2_FAST_TILE_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h> /* float2, __host__ __device__ */

#define V2F_HD __host__ __device__ __forceinline__

namespace v2fast {

/* ------------------------------------------------------------- geometry -- */

constexpr int BM = 128, BN = 128, BK = 32; /* block tile and reduction slab */
constexpr int WM = 64, WN = 64;            /* warp tile */
constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
constexpr int NT = 32 * WARPS_M * WARPS_N; /* threads per block: 128 */
constexpr int STAGES = 3;                  /* cp.async pipeline depth */
constexpr int MT = WM / 16, NT8 = WN / 8;  /* mma tiles per warp: 4 x 8 */
constexpr int KSTEPS = BK / 8;             /* mma k-steps per slab */
constexpr int TILE_FLOATS = BM * BK;       /* one operand's stage */
constexpr int SMEM_FLOATS = STAGES * 2 * TILE_FLOATS;
constexpr int SMEM_BYTES = SMEM_FLOATS * 4;  /* 96 KiB: two blocks per SM */
constexpr int CHUNKS = TILE_FLOATS / 4 / NT; /* 16-byte copies per thread per operand stage */

static_assert(BM == BN, "one stage size serves both operands");
static_assert(BK == 32, "the KC swizzle covers 8 chunks of 4 floats per row");
static_assert(BM == 128, "the NK swizzle and the stage copy assume 32 chunks per row");
static_assert(NT == BN, "the fused column sums give one column to each thread");
static_assert(TILE_FLOATS % (4 * NT) == 0, "whole chunks per thread");

V2F_HD int warp_m(int warp) { return warp / WARPS_N; }
V2F_HD int warp_n(int warp) { return warp % WARPS_N; }

/* ------------------------------------------------ shared-memory layouts -- */

/* KC stage [BM rows d][BK k], no padding; the 16-byte chunk index of k is
 * XORed with 2*(d mod 4), so that the 8-byte fragment reads of a half-warp
 * (4 rows x 4 lanes) and the 16-byte copies of a quarter-warp (one row) each
 * cover all 32 banks once. */
V2F_HD int kc_off(int d, int k) { return d * BK + ((((k >> 2) ^ ((d & 3) << 1))) << 2) + (k & 3); }

/* NK stage [BK rows k][BM columns d], no padding; the chunk index of d is
 * XORed with 2*((k/2) mod 4) (within its aligned group of 8 chunks), so that
 * the paired reads of rows 2q, 2q+1 (q = 0..3) fall in distinct banks. */
V2F_HD int nk_off(int k, int d)
{
    return k * BM + ((((d >> 2) ^ (((k >> 1) & 3) << 1))) << 2) + (d & 3);
}

/* ---------------------------------------------------------- stage copy -- */

/* Copy j (0..CHUNKS-1) of thread tid: the chunk of 4 floats starting at
 * (d, k) of a KC stage (k a multiple of 4), or at (k, d) of an NK stage (d a
 * multiple of 4). Consecutive threads take consecutive chunks of one row, so
 * a warp reads whole 128-byte (KC) or 512-byte (NK) runs of global memory. */
V2F_HD void kc_chunk(int tid, int j, int &d, int &k)
{
    const int i = tid + j * NT;
    d = i / (BK / 4);
    k = (i % (BK / 4)) * 4;
}

V2F_HD void nk_chunk(int tid, int j, int &k, int &d)
{
    const int i = tid + j * NT;
    k = i / (BM / 4);
    d = (i % (BM / 4)) * 4;
}

/* Stages the slab k in [k0, k0 + BK) of an operand tile whose d range starts
 * at d0: element (d, k) comes from g[d*ld + k] (KC) or g[k*ld + d] (NK).
 * Chunks with d >= dlim or k >= klim are zero-filled, never read: dlim (KC:
 * also klim) must be a multiple of 4, so a chunk is wholly in or out.
 * cp(dst, src, ok) performs one 16-byte copy (src is a valid address even when
 * !ok; then dst gets zeros). */
template <bool KC, class Copy>
V2F_HD void stage_load(const Copy &cp, float *s, const float *g, int ld, int d0, int dlim, int k0,
                       int klim, int tid)
{
#pragma unroll
    for (int j = 0; j < CHUNKS; j++) {
        int d, k;
        if (KC)
            kc_chunk(tid, j, d, k);
        else
            nk_chunk(tid, j, k, d);
        const int gd = d0 + d, gk = k0 + k;
        const bool ok = gd < dlim && gk < klim;
        const float *src = !ok ? g : KC ? g + (size_t)gd * ld + gk : g + (size_t)gk * ld + gd;
        cp(s + (KC ? kc_off(d, k) : nk_off(k, d)), src, ok);
    }
}

/* ----------------------------------------------------------- fragments -- */

/* Shared-memory offsets of the two 8-byte reads giving the A fragment of the
 * m16 tile at tile row mb, k-step ks (both offsets even). */
template <bool KC>
V2F_HD void a_offs(int mb, int ks, int lane, int (&off)[2])
{
    const int g = lane >> 2, q = lane & 3, k = ks * 8 + 2 * q;
    if (KC) { /* rows g and g+8, physical k 2q and 2q+1 adjacent */
        off[0] = kc_off(mb + g, k);
        off[1] = kc_off(mb + g + 8, k);
    } else { /* rows 2g, 2g+1 adjacent; k rows 2q and 2q+1 */
        off[0] = nk_off(k, mb + 2 * g);
        off[1] = nk_off(k + 1, mb + 2 * g);
    }
}

/* The raw (fp32) A fragment a[0..3] in PTX register order. */
template <bool KC>
V2F_HD void frag_a(const float *s, int mb, int ks, int lane, float (&a)[4])
{
    int off[2];
    a_offs<KC>(mb, ks, lane, off);
    const float2 u = *reinterpret_cast<const float2 *>(s + off[0]);
    const float2 v = *reinterpret_cast<const float2 *>(s + off[1]);
    if (KC) { /* u = row g (k q, q+4), v = row g+8 */
        a[0] = u.x, a[2] = u.y, a[1] = v.x, a[3] = v.y;
    } else { /* u = k q (rows g, g+8), v = k q+4 */
        a[0] = u.x, a[1] = u.y, a[2] = v.x, a[3] = v.y;
    }
}

/* Offsets of the two 8-byte reads giving the B fragments of the two n8 tiles
 * of the 16-wide column group at tile column nb, k-step ks. */
template <bool KC>
V2F_HD void b_offs(int nb, int ks, int lane, int (&off)[2])
{
    const int g = lane >> 2, q = lane & 3, k = ks * 8 + 2 * q;
    if (KC) { /* tile t: row nb + 8t + g, physical k 2q and 2q+1 adjacent */
        off[0] = kc_off(nb + g, k);
        off[1] = kc_off(nb + 8 + g, k);
    } else { /* k rows 2q, 2q+1; columns 2g (tile 0) and 2g+1 (tile 1) adjacent */
        off[0] = nk_off(k, nb + 2 * g);
        off[1] = nk_off(k + 1, nb + 2 * g);
    }
}

/* The raw B fragments b[t][0..1] of tiles t = 0, 1 of that group. */
template <bool KC>
V2F_HD void frag_b(const float *s, int nb, int ks, int lane, float (&b)[2][2])
{
    int off[2];
    b_offs<KC>(nb, ks, lane, off);
    const float2 u = *reinterpret_cast<const float2 *>(s + off[0]);
    const float2 v = *reinterpret_cast<const float2 *>(s + off[1]);
    if (KC) { /* u = tile 0 (k q, q+4), v = tile 1 */
        b[0][0] = u.x, b[0][1] = u.y, b[1][0] = v.x, b[1][1] = v.y;
    } else { /* u = k q (tile 0, tile 1), v = k q+4 */
        b[0][0] = u.x, b[1][0] = u.y, b[0][1] = v.x, b[1][1] = v.y;
    }
}

/* ---------------------------------------------------------- accumulators -- */

/* Tile row of accumulator registers 2h, 2h+1 (h = 0: c0 c1, h = 1: c2 c3) of
 * the m16 tile at tile row mb. */
template <bool A_KC>
V2F_HD int c_row(int mb, int lane, int h)
{
    const int g = lane >> 2;
    return A_KC ? mb + g + 8 * h : mb + 2 * g + h;
}

/* Runs of consecutive output columns a lane holds in one row of a 16-wide
 * column group: KC B gives RUNS = 2 runs of LEN = 2, NK B one run of 4. */
template <bool B_KC>
struct Runs {
    static constexpr int RUNS = B_KC ? 2 : 1;
    static constexpr int LEN = B_KC ? 2 : 4;
};

/* Run u of row half h of the group at tile column nb, whose n8 tiles hold
 * accumulators c0[4] (tile 0) and c1[4] (tile 1): first tile column and
 * values in column order. */
template <bool B_KC>
V2F_HD void c_run(const float (&c0)[4], const float (&c1)[4], int nb, int lane, int h, int u,
                  int &col, float (&v)[4])
{
    const int q = lane & 3;
    if (B_KC) {
        const float(&c)[4] = u ? c1 : c0;
        col = nb + 8 * u + 2 * q;
        v[0] = c[2 * h], v[1] = c[2 * h + 1], v[2] = 0.0f, v[3] = 0.0f;
    } else { /* logical column 2q+e of tile t is physical 4q + 2e + t */
        col = nb + 4 * q;
        v[0] = c0[2 * h], v[1] = c1[2 * h], v[2] = c0[2 * h + 1], v[3] = c1[2 * h + 1];
    }
}

/* ------------------------------------------------------- column sums -- */

/* Adds column tid of an NK stage (its BK rows, ascending) to sum: the batch
 * sum of the B operand of the weight-gradient GEMM, i.e. the bias gradient,
 * taken from the staged fp32 values. One column per thread; the 32 reads of a
 * warp for one row fall in distinct banks. */
V2F_HD void column_sum(const float *s, int tid, float &sum)
{
#pragma unroll
    for (int r = 0; r < BK; r++)
        sum = sum + s[nk_off(r, tid)];
}

/* ------------------------------------------------------ batch chunking -- */

/* Weight gradients are summed over the batch in nc chunks of len samples
 * (len a multiple of BK; the last chunk may be shorter), one grid row per
 * chunk, and the chunk partials are added in ascending chunk order by a
 * second launch. nc fills about two blocks per SM of an H200 (132 SMs) and
 * keeps chunks at least MIN_CHUNK long. The plan depends only on the batch
 * and the widths, never on the device, so results are reproducible. */
constexpr int TARGET_BLOCKS = 2 * 132;
constexpr int MIN_CHUNK = 256;

V2F_HD int chunk_bound(int tiles_per_chunk, int batch)
{
    int by_blocks = TARGET_BLOCKS / (tiles_per_chunk > 0 ? tiles_per_chunk : 1);
    if (by_blocks < 1)
        by_blocks = 1;
    const int by_len = (batch + MIN_CHUNK - 1) / MIN_CHUNK;
    return by_blocks < by_len ? by_blocks : by_len;
}

V2F_HD void chunk_plan(int tiles_per_chunk, int batch, int &nc, int &len)
{
    const int n0 = chunk_bound(tiles_per_chunk, batch);
    len = (batch + n0 - 1) / n0;
    len = (len + BK - 1) / BK * BK;
    nc = (batch + len - 1) / len; /* <= n0; every chunk holds at least one sample */
}

} /* namespace v2fast */

#endif /* AUXTRUNK_TRUNK_V2_FAST_TILE_CUH */
