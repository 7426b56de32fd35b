/*
 * trunk_v3_mid.cu — cuda-v3's mid-batch exact path: one persistent,
 * cooperative launch per call walking a list of tiles (trunk_v3_mid.h says
 * what the lists are and why they cannot deadlock).
 *
 * A block is NT = 128 threads, two an SM (PER_SM); thread t keeps 4 x 2
 * outputs of an R x 32 tile, R = NT / 4 (32 x 32). On an H100 the same
 * lists' graph step was 11-18 % longer at B = 256-1,024 built with 256
 * threads, one block an SM (64 x 32 tiles), and 5-22 % longer with four
 * blocks an SM (docs/perf-notes-v3.md, "3.54 measured").
 * Three tile kinds, each staged in slabs of 32 reduction steps through a
 * ring of three by cp.async.cg (L2 only: what another block of the launch
 * wrote is read after an acquire, never from a stale L1 line):
 *   layer   out[r, c] = b[c] + Σ_k a[r, k] W[k, c]   (a's rows, W's columns)
 *   hidden  d'[r, k] = ELU'(Σ_n d[r, n] W[k, n])     (d's rows, W's rows)
 *   weight  partial[k, n] = Σ_{b in chunk} a[b, k] g[b, n]
 * In each, a warp's 16-byte loads of the row operand touch two rows (one
 * shared-memory clock, docs/floors-h200.md) and its loads of the other
 * operand 128 contiguous bytes (layer, weight) or 16 rows 36 floats apart
 * (hidden: two clocks).
 */
#include "trunk_v3_mid.h"

#include <stdint.h>

#include "auxtrunk_canon.h"
#include "trunk_v2.h"
#include "trunk_v2_async.cuh"
#include "trunk_v3_sync.cuh"

namespace {

using v3sync::ld_acquire;
using v3sync::st_release;

constexpr int NT = 128;     /* threads per block */
constexpr int PER_SM = 2;   /* blocks of the grid per SM */
constexpr int R = NT / 4;   /* rows of a tile (k-rows of a weight tile): 16 row groups of 4 */
constexpr int C = 32;       /* columns of a tile: 16 column groups of 2 */
constexpr int KS = 32;      /* reduction steps per slab */
constexpr int LDA = KS + 4; /* row stride of a reduction-contiguous slab */
constexpr int STAGES = 3;   /* slabs in flight */
constexpr int CHUNK = AUXTRUNK_CANON_CHUNK;
constexpr int FLAG_STRIDE = 32;          /* words between two blocks' flags */
constexpr unsigned CALL_STEP = 1u << 16; /* a flag's move over one call */
constexpr int STAGE_FLOATS = (R + C) * LDA;
constexpr int DB_FLOATS = CHUNK * C; /* a bias item's staged chunk */
constexpr size_t SMEM =
    (STAGES * STAGE_FLOATS > DB_FLOATS ? STAGES * STAGE_FLOATS : DB_FLOATS) * sizeof(float);
constexpr int TREE_DEPTH = 7; /* the tree's stack: up to 2^(7-1) = 64 chunks */
static_assert(R * C == NT * 8, "a thread keeps 4 x 2 outputs");
static_assert(CHUNK % R == 0, "a chunk is whole row blocks");

/* ------------------------------------------------------------- flags -- */

struct Flags {
    unsigned *w;   /* the launch's words, FLAG_STRIDE apart */
    unsigned base; /* what every word held when the launch started */
};

/* Every thread reads its block's word before the block's first barrier:
 * only this block writes it, and only after that barrier. */
__device__ __forceinline__ Flags flags_start(unsigned *w)
{
    return {w, ld_acquire(w + blockIdx.x * FLAG_STRIDE)};
}

/* This block's m-th tile is written: every thread's stores precede thread
 * 0's release through the barrier. */
__device__ __forceinline__ void publish(const Flags &f, int m)
{
    __syncthreads();
    if (threadIdx.x == 0)
        st_release(f.w + blockIdx.x * FLAG_STRIDE, f.base + (unsigned)m + 1u);
}

__device__ __forceinline__ void flags_end(const Flags &f)
{
    __syncthreads();
    if (threadIdx.x == 0)
        st_release(f.w + blockIdx.x * FLAG_STRIDE, f.base + CALL_STEP);
}

/* Waits until tiles [q0, q1) of the list are written. Tile q is block q %
 * G's (q / G)-th, and a block writes its tiles in order, so the last G
 * tiles of the range (the last of each block) are the ones to poll. */
__device__ __forceinline__ void await_tiles(const Flags &f, int q0, int q1)
{
    const int G = (int)gridDim.x;
    for (int q = q1 - 1 - (int)threadIdx.x; q >= q0 && q >= q1 - G; q -= NT) {
        const unsigned want = f.base + (unsigned)(q / G) + 1u;
        const unsigned *w = f.w + (q % G) * FLAG_STRIDE;
        while ((int)(ld_acquire(w) - want) < 0)
            __nanosleep(32);
    }
    __syncthreads();
}

/* ------------------------------------------------------------- tiles -- */

/* ROWS rows of W floats: rows [r0, r0 + ROWS) of m [*, ld], columns [c0,
 * c0 + W), into s (rows ls floats apart); zeros where a row reaches rlimit
 * or a column climit (a multiple of 4). */
template <int ROWS, int W>
__device__ __forceinline__ void stage(float *s, int ls, const float *m, int ld, int r0, int rlimit,
                                      int c0, int climit)
{
    constexpr unsigned PER_ROW = W / 4, COPIES = ROWS * PER_ROW;
#pragma unroll
    for (unsigned u = 0; u < (COPIES + NT - 1) / NT; u++) {
        const unsigned p = threadIdx.x + u * NT;
        if (COPIES % NT == 0 || p < COPIES) {
            const int r = (int)(p / PER_ROW), q = 4 * (int)(p % PER_ROW);
            const bool ok = r0 + r < rlimit && c0 + q < climit;
            v2async::copy16(s + r * ls + q, ok ? m + (size_t)(r0 + r) * ld + c0 + q : m,
                            ok ? 16 : 0);
        }
    }
}

/* The ring: slab s is staged by stage(buffer, s); body(buffer, s) runs once
 * slab s has landed. */
template <typename Stage, typename Body>
__device__ __forceinline__ void ring(float *smem, int slabs, Stage stage_slab, Body body)
{
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < slabs)
            stage_slab(smem + s * STAGE_FLOATS, s);
        v2async::commit();
    }
    for (int s = 0; s < slabs; s++) {
        const int ahead = s + STAGES - 1;
        if (ahead < slabs)
            stage_slab(smem + (ahead % STAGES) * STAGE_FLOATS, ahead);
        v2async::commit();
        v2async::wait<STAGES - 1>();
        __syncthreads();
        body(smem + (s % STAGES) * STAGE_FLOATS, s);
        __syncthreads(); /* the buffer is staged again at s + STAGES */
    }
}

/* Layer tile: out[r0.., c0..] = act(b + a · W), a [rows, K], W [K, N]. A
 * thread keeps rows r0 + 4 rg + i and columns c0 + 2 cg + j. */
__device__ void layer_tile(const float *a, int K, const float *W, const float *bias, float *out,
                           int N, int rows, int r0, int c0, bool elu, float *smem)
{
    const int cg = threadIdx.x % 16, rg = threadIdx.x / 16, c = c0 + 2 * cg;
    float acc[4][2];
    const float b0 = c < N ? bias[c] : 0.0f, b1 = c < N ? bias[c + 1] : 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++)
        acc[i][0] = b0, acc[i][1] = b1;
    auto stage_slab = [&](float *buf, int s) {
        stage<R, KS>(buf, LDA, a, K, r0, rows, s * KS, K);
        stage<KS, C>(buf + R * LDA, C, W, N, s * KS, K, c0, N);
    };
    auto steps = [&](const float *as, const float *ws, int k) {
        float4 av[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            av[i] = *reinterpret_cast<const float4 *>(as + (4 * rg + i) * LDA + k);
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const float2 w = *reinterpret_cast<const float2 *>(ws + (k + u) * C + 2 * cg);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float x = u == 0 ? av[i].x : u == 1 ? av[i].y : u == 2 ? av[i].z : av[i].w;
                acc[i][0] = fmaf(x, w.x, acc[i][0]);
                acc[i][1] = fmaf(x, w.y, acc[i][1]);
            }
        }
    };
    auto body = [&](const float *buf, int s) {
        const float *as = buf, *ws = buf + R * LDA;
        const int n = min(KS, K - s * KS); /* a multiple of 4 */
        if (n == KS) {
#pragma unroll
            for (int k = 0; k < KS; k += 4)
                steps(as, ws, k);
        } else {
            for (int k = 0; k < n; k += 4)
                steps(as, ws, k);
        }
    };
    ring(smem, (K + KS - 1) / KS, stage_slab, body);
    if (c < N)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = r0 + 4 * rg + i;
            if (r < rows) {
                float2 v = make_float2(acc[i][0], acc[i][1]);
                if (elu)
                    v = make_float2(auxtrunk_canon_elu(v.x), auxtrunk_canon_elu(v.y));
                *reinterpret_cast<float2 *>(out + (size_t)r * N + c) = v;
            }
        }
}

/* Hidden-gradient tile: out[r, k] = ELU'(Σ_n d[r, n] W[k, n]; y[r, k]) for
 * rows r0.., columns k0.. (out and y [rows, K], d [rows, N], W [K, N]). A
 * thread keeps rows r0 + 4 rg + i and columns k0 + cg + 16 j. */
__device__ void hidden_tile(const float *d, int N, const float *W, const float *y, float *out,
                            int K, int rows, int r0, int k0, float *smem)
{
    const int cg = threadIdx.x % 16, rg = threadIdx.x / 16;
    float acc[4][2] = {};
    auto stage_slab = [&](float *buf, int s) {
        stage<R, KS>(buf, LDA, d, N, r0, rows, s * KS, N);
        stage<C, KS>(buf + R * LDA, LDA, W, N, k0, K, s * KS, N);
    };
    auto steps = [&](const float *ds, const float *ws, int n) {
        float4 dv[4], wv[2];
#pragma unroll
        for (int i = 0; i < 4; i++)
            dv[i] = *reinterpret_cast<const float4 *>(ds + (4 * rg + i) * LDA + n);
#pragma unroll
        for (int j = 0; j < 2; j++)
            wv[j] = *reinterpret_cast<const float4 *>(ws + (cg + 16 * j) * LDA + n);
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const float4 &p = dv[i], &q = wv[j];
                    const float x = u == 0 ? p.x : u == 1 ? p.y : u == 2 ? p.z : p.w;
                    const float w = u == 0 ? q.x : u == 1 ? q.y : u == 2 ? q.z : q.w;
                    acc[i][j] = fmaf(x, w, acc[i][j]);
                }
    };
    auto body = [&](const float *buf, int s) {
        const float *ds = buf, *ws = buf + R * LDA;
        const int n = min(KS, N - s * KS);
        if (n == KS) {
#pragma unroll
            for (int k = 0; k < KS; k += 4)
                steps(ds, ws, k);
        } else {
            for (int k = 0; k < n; k += 4)
                steps(ds, ws, k);
        }
    };
    ring(smem, (N + KS - 1) / KS, stage_slab, body);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = r0 + 4 * rg + i;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int k = k0 + cg + 16 * j;
            if (r < rows && k < K) {
                const size_t at = (size_t)r * K + k;
                out[at] = auxtrunk_canon_elu_grad(acc[i][j], __ldcg(y + at));
            }
        }
    }
}

/* Where a gradient's partial (or, with one chunk, the gradient) goes. */
struct Dst {
    float *p; /* element 0 of this gradient in its destination */
    bool add; /* the gradient itself with accumulate: old + value */
};

__device__ __forceinline__ void put2(const Dst &o, size_t at, float2 v)
{
    float2 *p = reinterpret_cast<float2 *>(o.p + at);
    if (o.add) {
        const float2 old = *p;
        v = make_float2(old.x + v.x, old.y + v.y);
    }
    *p = v;
}

/* Weight-gradient tile: partial[k, n] = Σ_{b0 <= b < b1} a[b, k] g[b, n]
 * for k0.. (R) and n0.. (32), a [*, K], g [*, N]. A thread keeps k0 + 4
 * kg + i and n0 + 2 ng + j. */
__device__ void weight_tile(const float *a, int K, const float *g, int N, int b0, int b1, int k0,
                            int n0, const Dst &o, float *smem)
{
    const int ng = threadIdx.x % 16, kg = threadIdx.x / 16;
    float acc[4][2] = {};
    auto stage_slab = [&](float *buf, int s) {
        stage<KS, R>(buf, R, a, K, b0 + s * KS, b1, k0, K);
        stage<KS, C>(buf + KS * R, C, g, N, b0 + s * KS, b1, n0, N);
    };
    auto sample = [&](const float *as, const float *gs, int b) {
        const float4 av = *reinterpret_cast<const float4 *>(as + b * R + 4 * kg);
        const float2 gv = *reinterpret_cast<const float2 *>(gs + b * C + 2 * ng);
        const float x[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            acc[i][0] = fmaf(x[i], gv.x, acc[i][0]);
            acc[i][1] = fmaf(x[i], gv.y, acc[i][1]);
        }
    };
    auto body = [&](const float *buf, int s) {
        const float *as = buf, *gs = buf + KS * R;
        const int n = min(KS, b1 - b0 - s * KS); /* samples: any count */
        if (n == KS) {
#pragma unroll
            for (int b = 0; b < KS; b++)
                sample(as, gs, b);
        } else {
            for (int b = 0; b < n; b++)
                sample(as, gs, b);
        }
    };
    ring(smem, (b1 - b0 + KS - 1) / KS, stage_slab, body);
    const int n = n0 + 2 * ng;
    if (n < N)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int k = k0 + 4 * kg + i;
            if (k < K)
                put2(o, (size_t)k * N + n, make_float2(acc[i][0], acc[i][1]));
        }
}

/* Bias-gradient columns n0.. (32) over samples [b0, b1) of g [*, N]:
 * staged whole (at most one chunk), then one thread a column adds them in
 * order. */
__device__ void bias_cols(const float *g, int N, int b0, int b1, int n0, const Dst &o, float *smem)
{
    const int rows = b1 - b0;
    stage<CHUNK, C>(smem, C, g, N, b0, b1, n0, N);
    v2async::commit();
    v2async::wait<0>();
    __syncthreads();
    const int t = threadIdx.x;
    if (t < C && n0 + t < N) {
        float s = 0.0f;
        for (int b = 0; b < rows; b++)
            s = s + smem[b * C + t];
        float *p = o.p + n0 + t;
        *p = o.add ? *p + s : s;
    }
    __syncthreads(); /* the staging buffer is reused by the next tile */
}

/* ------------------------------------------------------------ forward -- */

struct Fwd {
    const float *a[3], *w[3], *b[3]; /* layer L's input, weight, bias */
    float *y[3];                     /* h1, h2, out */
    unsigned *flags;
    int k[3], n[3];           /* layer L's reduction and width */
    int batch, ct[3], end[3]; /* column tiles; cumulative tile counts */
};

__global__ void __launch_bounds__(NT, PER_SM) mid_forward_kernel(Fwd f)
{
    extern __shared__ float4 smem4[];
    float *smem = reinterpret_cast<float *>(smem4);
    const Flags fl = flags_start(f.flags);
    int m = 0;
    for (int q = (int)blockIdx.x; q < f.end[2]; q += (int)gridDim.x, m++) {
        const int L = q < f.end[0] ? 0 : q < f.end[1] ? 1 : 2;
        const int first = L == 0 ? 0 : f.end[L - 1], qq = q - first;
        const int i = qq / f.ct[L], j = qq % f.ct[L];
        if (L > 0) { /* row block i of the layer before */
            const int prev = (L == 1 ? 0 : f.end[0]) + i * f.ct[L - 1];
            await_tiles(fl, prev, prev + f.ct[L - 1]);
        }
        layer_tile(f.a[L], f.k[L], f.w[L], f.b[L], f.y[L], f.n[L], f.batch, i * R, j * C, L < 2,
                   smem);
        publish(fl, m);
    }
    flags_end(fl);
}

/* ----------------------------------------------------------- backward -- */

/* Segments of the backward's list, in order. */
enum { S_DH2, S_DW3, S_DB3, S_DH1, S_DW2, S_DB2, S_DW1, S_DB1, S_T3, S_T2, S_T1, S_COUNT };

struct Bwd {
    const float *x, *h1, *h2, *dout, *w2, *w3;
    float *dh2, *dh1, *nodes;
    float *grad[6]; /* dW1, db1, dW2, db2, dW3, db3 */
    int off[7];     /* their offsets in a node; off[6] = P */
    unsigned *flags;
    int batch, enc, n1, n2, aux, accumulate, nc;
    int ct2, ct1;     /* column tiles of dh2_pre, dh1_pre */
    int wt[3], wn[3]; /* weight tiles a chunk, and their column tiles, of dW1..3 */
    int end[S_COUNT]; /* cumulative tile counts */
};

__device__ __forceinline__ Dst dst_of(const Bwd &f, int which, int c)
{
    if (f.nc == 1)
        return {f.grad[which], f.accumulate != 0};
    return {f.nodes + (size_t)c * f.off[6] + f.off[which], false};
}

/* The tree over the nc chunk partials of parameters [p0, p0 + 4 NT) below
 * `hi` (a gradient pair's end): level by level, left + right, as a binary
 * counter (a finished left subtree is added to its right sibling once the
 * sibling is complete; what is left at the end is added right to left). */
__device__ void tree_part(const Bwd &f, int p0, int hi)
{
    const int p = p0 + 4 * (int)threadIdx.x;
    if (p >= hi)
        return;
    float4 st[TREE_DEPTH];
    int top = 0;
    for (int j = 0; j < f.nc; j++) {
        float4 v = __ldcg(reinterpret_cast<const float4 *>(f.nodes + (size_t)j * f.off[6] + p));
        for (int m = j + 1; (m & 1) == 0; m >>= 1) {
            const float4 l = st[--top];
            v = make_float4(l.x + v.x, l.y + v.y, l.z + v.z, l.w + v.w);
        }
        st[top++] = v;
    }
    float4 r = st[--top];
    while (top > 0) {
        const float4 l = st[--top];
        r = make_float4(l.x + r.x, l.y + r.y, l.z + r.z, l.w + r.w);
    }
    int w = 5;
    while (p < f.off[w])
        w--;
    float4 *g = reinterpret_cast<float4 *>(f.grad[w] + (p - f.off[w]));
    if (f.accumulate) {
        const float4 o = *g;
        r = make_float4(o.x + r.x, o.y + r.y, o.z + r.z, o.w + r.w);
    }
    *g = r;
}

__global__ void __launch_bounds__(NT, PER_SM) mid_backward_kernel(Bwd f)
{
    extern __shared__ float4 smem4[];
    float *smem = reinterpret_cast<float *>(smem4);
    const Flags fl = flags_start(f.flags);
    int m = 0;
    for (int q = (int)blockIdx.x; q < f.end[S_COUNT - 1]; q += (int)gridDim.x, m++) {
        int s = 0;
        while (q >= f.end[s])
            s++;
        const int qq = q - (s ? f.end[s - 1] : 0);
        switch (s) {
        case S_DH2: { /* dh2_pre = (dout · W3ᵀ) ⊙ ELU'(h2) */
            const int i = qq / f.ct2, j = qq % f.ct2;
            hidden_tile(f.dout, f.aux, f.w3, f.h2, f.dh2, f.n2, f.batch, i * R, j * C, smem);
            break;
        }
        case S_DH1: { /* dh1_pre = (dh2_pre · W2ᵀ) ⊙ ELU'(h1), once its rows of dh2_pre are */
            const int i = qq / f.ct1, j = qq % f.ct1;
            await_tiles(fl, i * f.ct2, (i + 1) * f.ct2);
            hidden_tile(f.dh2, f.n2, f.w2, f.h1, f.dh1, f.n1, f.batch, i * R, j * C, smem);
            break;
        }
        case S_DW3:
        case S_DW2:
        case S_DW1: {
            const int g = s == S_DW1 ? 0 : s == S_DW2 ? 1 : 2; /* dW1, dW2, dW3 */
            const int c = qq / f.wt[g], t = qq % f.wt[g];
            const int b0 = c * CHUNK, b1 = min(f.batch, b0 + CHUNK);
            const int i0 = b0 / R, i1 = (b1 + R - 1) / R; /* the chunk's row blocks */
            if (g == 1)
                await_tiles(fl, i0 * f.ct2, i1 * f.ct2);
            else if (g == 0)
                await_tiles(fl, f.end[S_DB3] + i0 * f.ct1, f.end[S_DB3] + i1 * f.ct1);
            const float *a = g == 0 ? f.x : g == 1 ? f.h1 : f.h2;
            const float *gr = g == 0 ? f.dh1 : g == 1 ? f.dh2 : f.dout;
            const int K = g == 0 ? f.enc : g == 1 ? f.n1 : f.n2;
            const int N = g == 0 ? f.n1 : g == 1 ? f.n2 : f.aux;
            weight_tile(a, K, gr, N, b0, b1, (t / f.wn[g]) * R, (t % f.wn[g]) * C,
                        dst_of(f, 2 * g, c), smem);
            break;
        }
        case S_DB3:
        case S_DB2:
        case S_DB1: {
            const int g = s == S_DB1 ? 0 : s == S_DB2 ? 1 : 2;
            const int N = g == 0 ? f.n1 : g == 1 ? f.n2 : f.aux;
            const int per = (N + C - 1) / C, c = qq / per;
            const int b0 = c * CHUNK, b1 = min(f.batch, b0 + CHUNK);
            const int i0 = b0 / R, i1 = (b1 + R - 1) / R;
            if (g == 1)
                await_tiles(fl, i0 * f.ct2, i1 * f.ct2);
            else if (g == 0)
                await_tiles(fl, f.end[S_DB3] + i0 * f.ct1, f.end[S_DB3] + i1 * f.ct1);
            const float *gr = g == 0 ? f.dh1 : g == 1 ? f.dh2 : f.dout;
            bias_cols(gr, N, b0, b1, (qq % per) * C, dst_of(f, 2 * g + 1, c), smem);
            break;
        }
        default: { /* the tree of dW3/db3, dW2/db2, dW1/db1 */
            const int g = s == S_T1 ? 0 : s == S_T2 ? 1 : 2;
            const int from = g == 2 ? f.end[S_DH2] : g == 1 ? f.end[S_DH1] : f.end[S_DB2];
            const int to = g == 2 ? f.end[S_DB3] : g == 1 ? f.end[S_DB2] : f.end[S_DB1];
            await_tiles(fl, from, to);
            tree_part(f, f.off[2 * g] + qq * 4 * NT, f.off[2 * g + 2]);
            break;
        }
        }
        publish(fl, m);
    }
    flags_end(fl);
}

/* ------------------------------------------------------------- host -- */

constexpr int MAX_DEVICES = 64;
int g_blocks[MAX_DEVICES]; /* per device: the grid (0: the path is off) */

inline int grid_here()
{
    int dev;
    return cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < MAX_DEVICES ? g_blocks[dev] : 0;
}

inline bool a16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

inline bool widths_ok(atk_dims_t d)
{
    return d.enc > 0 && d.h1 > 0 && d.h2 > 0 && d.aux > 0 && d.enc % 4 == 0 && d.h1 % 4 == 0 &&
           d.h2 % 4 == 0 && d.aux % 4 == 0;
}

inline int cdiv(int a, int b) { return (a + b - 1) / b; }

template <typename K, typename A>
cudaError_t launch(K kernel, const A &args, cudaStream_t s)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeCooperative;
    at[0].val.cooperative = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid_here());
    cfg.blockDim = dim3(NT);
    cfg.dynamicSmemBytes = SMEM;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, args);
}

struct Scratch {
    float *dh2, *dh1, *nodes;
    size_t end;
};

inline Scratch scratch_of(atk_dims_t d, int batch, float *base)
{
    Scratch s;
    const size_t dh1 = (size_t)batch * d.h2, nodes = dh1 + (size_t)batch * d.h1;
    const int nc = auxtrunk_canon_chunks(batch);
    s.end = nodes + (nc > 1 ? (size_t)nc * v2_grad_layout(d).off[6] : 0);
    s.dh2 = base, s.dh1 = base ? base + dh1 : NULL, s.nodes = base ? base + nodes : NULL;
    return s;
}

} /* namespace */

extern "C" int v3_mid_forward_ok(atk_dims_t d, const atk_params_t *p, const float *x,
                                 const float *h1, const float *h2, const float *out,
                                 const float *workspace)
{
    return grid_here() > 0 && p && workspace && widths_ok(d) && a16(x) && a16(h1) && a16(h2) &&
           a16(out) && a16(p->w1) && a16(p->w2) && a16(p->w3) && a16(workspace);
}

extern "C" int v3_mid_backward_ok(atk_dims_t d, const atk_params_t *p, const float *x,
                                  const float *h1, const float *h2, const float *dout,
                                  const atk_grads_t *g, const float *workspace)
{
    if (grid_here() <= 0 || !p || !g || !workspace || !widths_ok(d))
        return 0;
    const float *const grad[6] = {g->dw1, g->db1, g->dw2, g->db2, g->dw3, g->db3};
    bool ok =
        a16(x) && a16(h1) && a16(h2) && a16(dout) && a16(p->w2) && a16(p->w3) && a16(workspace);
    for (int i = 0; i < 6; i++)
        ok = ok && a16(grad[i]);
    return ok;
}

extern "C" size_t v3_mid_workspace_floats(atk_dims_t d, int batch)
{
    return batch > 0 ? scratch_of(d, batch, NULL).end : 0;
}

extern "C" cudaError_t v3_mid_prepare(void)
{
    cudaError_t e;
    if ((e = cudaFuncSetAttribute(mid_forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)SMEM)) != cudaSuccess ||
        (e = cudaFuncSetAttribute(mid_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)SMEM)) != cudaSuccess)
        return e;
    int dev, sms, coop, per_sm_f, per_sm_b;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev)) != cudaSuccess ||
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_f, mid_forward_kernel, NT,
                                                           SMEM)) != cudaSuccess ||
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_b, mid_backward_kernel, NT,
                                                           SMEM)) != cudaSuccess)
        return e;
    if (dev >= 0 && dev < MAX_DEVICES)
        g_blocks[dev] = coop && per_sm_f >= PER_SM && per_sm_b >= PER_SM
                            ? (PER_SM * sms < V3_MID_MAX_BLOCKS ? PER_SM * sms : V3_MID_MAX_BLOCKS)
                            : 0;
    return cudaSuccess;
}

extern "C" cudaError_t v3_mid_forward(atk_dims_t d, const atk_params_t *p, const float *x,
                                      int batch, float *h1, float *h2, float *out, float *flags,
                                      cudaStream_t stream)
{
    if (batch <= 0 || !v3_mid_forward_ok(d, p, x, h1, h2, out, flags))
        return cudaErrorInvalidValue;
    Fwd f = {};
    f.a[0] = x, f.a[1] = h1, f.a[2] = h2;
    f.w[0] = p->w1, f.w[1] = p->w2, f.w[2] = p->w3;
    f.b[0] = p->b1, f.b[1] = p->b2, f.b[2] = p->b3;
    f.y[0] = h1, f.y[1] = h2, f.y[2] = out;
    f.k[0] = d.enc, f.k[1] = d.h1, f.k[2] = d.h2;
    f.n[0] = d.h1, f.n[1] = d.h2, f.n[2] = d.aux;
    f.flags = reinterpret_cast<unsigned *>(flags);
    f.batch = batch;
    const int rb = cdiv(batch, R);
    int t = 0;
    for (int L = 0; L < 3; L++) {
        f.ct[L] = cdiv(f.n[L], C);
        t += rb * f.ct[L];
        f.end[L] = t;
    }
    return launch(mid_forward_kernel, f, stream);
}

extern "C" cudaError_t v3_mid_backward(atk_dims_t d, const atk_params_t *p, const float *x,
                                       const float *h1, const float *h2, const float *dout,
                                       int batch, const atk_grads_t *g, int accumulate,
                                       float *flags, float *scratch, cudaStream_t stream)
{
    if (batch <= 0 || !v3_mid_backward_ok(d, p, x, h1, h2, dout, g, scratch) || !flags ||
        !a16(flags))
        return cudaErrorInvalidValue;
    const v2_grad_layout_t gl = v2_grad_layout(d);
    for (int i = 0; i < 7; i++)
        if (gl.off[i] % 4 != 0)
            return cudaErrorInvalidValue;
    const Scratch S = scratch_of(d, batch, scratch);
    Bwd f = {};
    f.x = x, f.h1 = h1, f.h2 = h2, f.dout = dout, f.w2 = p->w2, f.w3 = p->w3;
    f.dh2 = S.dh2, f.dh1 = S.dh1, f.nodes = S.nodes;
    f.grad[0] = g->dw1, f.grad[1] = g->db1, f.grad[2] = g->dw2;
    f.grad[3] = g->db2, f.grad[4] = g->dw3, f.grad[5] = g->db3;
    for (int i = 0; i < 7; i++)
        f.off[i] = (int)gl.off[i];
    f.flags = reinterpret_cast<unsigned *>(flags);
    f.batch = batch, f.enc = d.enc, f.n1 = d.h1, f.n2 = d.h2, f.aux = d.aux;
    f.accumulate = accumulate;
    f.nc = auxtrunk_canon_chunks(batch);
    if (f.nc > 1 << (TREE_DEPTH - 1))
        return cudaErrorInvalidValue;
    const int rb = cdiv(batch, R);
    f.ct2 = cdiv(d.h2, C), f.ct1 = cdiv(d.h1, C);
    const int K[3] = {d.enc, d.h1, d.h2}, N[3] = {d.h1, d.h2, d.aux};
    for (int q = 0; q < 3; q++) {
        f.wn[q] = cdiv(N[q], C);
        f.wt[q] = cdiv(K[q], R) * f.wn[q];
    }
    const int nc = f.nc;
    const int count[S_COUNT] = {rb * f.ct2,
                                nc * f.wt[2],
                                nc * cdiv(d.aux, C),
                                rb * f.ct1,
                                nc * f.wt[1],
                                nc * cdiv(d.h2, C),
                                nc * f.wt[0],
                                nc * cdiv(d.h1, C),
                                nc > 1 ? cdiv(f.off[6] - f.off[4], 4 * NT) : 0,
                                nc > 1 ? cdiv(f.off[4] - f.off[2], 4 * NT) : 0,
                                nc > 1 ? cdiv(f.off[2] - f.off[0], 4 * NT) : 0};
    int t = 0;
    for (int s = 0; s < S_COUNT; s++) {
        t += count[s];
        f.end[s] = t;
    }
    return launch(mid_backward_kernel, f, stream);
}
