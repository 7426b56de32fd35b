/*
 * trunk_v3.cu — the fused small-batch path of cuda-v3 (see trunk_v3.h) and
 * the dispatch between it, the large-batch core (trunk_v3_sgemm.cu) and
 * cuda-v2's kernels.
 *
 * Layout of a cluster (CL = 8 blocks of NT = 128 threads): the cluster owns
 * R = RG·TM batch rows; block `rank` owns columns [32·rank, 32·rank + 32) of
 * H1 and H2 (and 8·TC3 columns of AUX). With RG = 16 row groups, thread t
 * works on rows t%16 + 16·i (i < TM) and on 4 columns of its group t/16, so
 * a warp covers 16·TM rows × 2 groups: per four reduction steps it reads 16
 * distinct activation rows (16-byte loads) and only 2 distinct weight
 * pieces per load: a wide shared load costs more once its quarter-warp
 * touches 4 or more distinct words, less with 1 or 2 (docs/floors-h200.md),
 * so this layout halves the weight loads' cost against 4 rows × 8 groups.
 * With RG = 8 (TM = 1), thread t works on row t%8 and 2 columns of its
 * group t/8: a block's chains then cost two thirds of the shared-memory
 * clocks a step for half the rows, and the small batches run on twice the
 * clusters. The chains track those clocks, so the forward takes RG = 8
 * wherever ceil(B / 8) clusters fit, the backward up to
 * HALF_BWD_MAX_BATCH (docs/perf-notes-v3.md, "8 rows a cluster").
 * A backward block has twice NT threads: its first NT (the row group) run
 * that layout, then both halves take gradient tiles side by side, so that
 * each scheduler has two warps to issue from (docs/perf-notes-v3.md,
 * "3.45").
 *
 * Exactness: each output is one thread's fmaf chain over its reduction
 * index, ascending, from the bias (forward) or 0 (hidden and weight
 * gradients), with the epilogues of abi/auxtrunk_canon.h. Batch sums: a
 * tile's thread runs the chain of chunk 2p, then of chunk 2p + 1, and adds
 * left + right (the tree's first level); with two pairs the last level adds
 * pair 0 + pair 1. That is the canonical tree for up to 4 chunks
 * (V3_MAX_BATCH = 1,024). Reduction lengths are exact loop bounds.
 *
 * No atomics: blocks of a cluster talk through st.async into each other's
 * shared memory, completing on the receiver's mbarrier; blocks of the grid
 * through per-block flags in the workspace (st.release.gpu by the writer's
 * first thread after its group's barrier; for the row blocks' dh2, by the
 * other group's first thread once every row thread has arrived at an
 * mbarrier, so that no row thread waits for the release's fence;
 * ld.acquire.gpu polls by the reader, then its group's barrier: the
 * release/acquire pair and the barriers order every thread's accesses, so
 * no further fence is needed),
 * each on its own 128-byte line. A flag is a count, not a bit: each flag
 * of a TM's whole grid moves exactly once per call (by its block, or, in
 * a launch on fewer blocks, by one that runs: bump_absent), so all flags
 * of the grid hold one count n when a launch starts; a block reads n
 * from its own dh1 flag first, and a waiter waits while a producer's
 * flag still reads n (sound across the 32-bit wrap). No memset precedes
 * the launch. The counts live in the workspace's state region, one set per
 * TM (each TM's whole grid is fixed), which nothing else writes and the adapter
 * zeroes once at init (trunk_v3.h, "Workspace"). The backward is a
 * cooperative launch, so every block is resident while others poll. It is
 * also a programmatic dependent launch where the device takes both
 * (g_dependent): its blocks may be placed before the kernel ahead ends,
 * and every one waits for that kernel (grid_dependency_wait) before it
 * reads its count or touches any memory but the weights (the parameters
 * the forward read, which the ABI has the caller leave unchanged), so no
 * flag is polled before every block of the grid can be resident.
 *
 * Staging: each block's weight slices (the forward's columns of W1, W2,
 * W3) and rows (the backward's rows of W3 and W2) arrive by bulk tensor
 * copies, one instruction of thread 0 a box, through tensor maps the host
 * encodes each call (v3_prepare finds the driver's encoder; without one
 * the fused path is not taken); the batch rows (x, dout) by cp.async,
 * whose padded rows keep a warp's rows in different banks. The backward's
 * weight rows come in the 128-byte swizzle instead of padding (FragRows).
 * Moving the weights from cp.async to boxes took 0.6 and 0.9 µs off the
 * two kernels' staging at B = 32 (docs/perf-notes-v3.md, 3.40 and 3.41).
 * Bytes in flight into an SM share its bandwidth from L2, so W2's slice
 * (forward) is asked for only once x and W1 have landed, and W2's rows
 * (backward) only once the cluster's row threads have asked for dout's
 * rows, by the other group's first thread (docs/perf-notes-v3.md, 3.49
 * and 3.51); both land during the first phase.
 *
 * One block per SM: every launch of either kernel asks for more than half
 * of an SM's shared memory (`sole`), padding where its layout needs less,
 * so that two blocks never share an SM; the cluster counts the plans use
 * are measured with that same request. A block sharing its SM runs every
 * phase at about half speed, and one slow block holds up the grid
 * (docs/perf-notes-v3.md, "3.5").
 */
#include "trunk_v3.h"

#include <stdint.h>

#include "auxtrunk_canon.h"
#include "trunk_v2.h"
#include "trunk_v3_sgemm.h"
#include "trunk_v3_sync.cuh"
#include "trunk_v3_tmap.h"
#include "trunk_v3_trace.h"

namespace {

using namespace v3sync;

constexpr int CL = 8;           /* blocks per cluster */
constexpr int NT = 128;         /* threads per block: 16 row groups x 8 column groups */
constexpr int GROUPS = 2;       /* groups of NT threads in a backward block (v3_backward_kernel) */
constexpr int NB = GROUPS * NT; /* threads per backward block */
constexpr int SW = 32;          /* hidden-layer columns per block */
constexpr int MAX_W = 256;      /* widest layer of the domain */
constexpr int MAX_CLUSTERS = 16;
constexpr int MAX_BLOCKS = MAX_CLUSTERS * CL;
constexpr int CHUNK = AUXTRUNK_CANON_CHUNK;
constexpr int PAIR = 2 * CHUNK; /* samples per weight-gradient tile */
constexpr int SLAB = 64;        /* samples per staged slab of a gradient tile */
constexpr int STAGES = 2;       /* slabs of a group's ring (docs/perf-notes-v3.md, "3.45") */
constexpr int RUN = 16;         /* samples per unrolled run of a tile's FMAs */
/* Per-block flags, three sets (dh2 done, dh1 done, tree nodes done), one
 * 128-byte line each, so that pollers of one flag do not queue on another's. */
constexpr int FLAG_STRIDE = 32;
constexpr int FLAGS = 3 * MAX_BLOCKS * FLAG_STRIDE; /* words of one TM's set */
enum { DH2_DONE = 0, DH1_DONE = 1, NODES_DONE = 2 };
static_assert(V3_FUSED_FLAG_FLOATS == 3 * FLAGS, "one set of flags per TM (1, 2, 4)");
static_assert(V3_STATE_FLOATS % 64 == 0, "the state region keeps the workspace 256-byte aligned");
static_assert(CHUNK % SLAB == 0, "a chunk is a whole number of slabs");
static_assert(SLAB % RUN == 0, "a full slab is a whole number of runs");
static_assert(V3_MAX_BATCH <= 2 * PAIR, "the in-kernel tree has at most two pairs");
static_assert(V3_MAX_BATCH <= MAX_CLUSTERS * 16 * 4, "TM = 4 covers the largest batch");

/* ------------------------------------------------------------ plumbing -- */

/* The exchange mbarriers expect one arrival, the owner's expect_tx of the
 * st.async bytes of their first phase; mbar_wait0 waits for that phase.
 * Thread 0 initialises them in the prologue and arrives only after its
 * group's next barrier: ptxas may issue the initialisation as a
 * warp-uniform instruction (executed by the whole warp, as racecheck sees
 * it), so the barrier, not program order within thread 0, is what orders
 * it before the arrival. Peers' bytes may land before the arrival: the
 * phase cannot complete while the arrival is pending. */
__device__ __forceinline__ void mbar_wait0(unsigned bar) { mbar_wait(bar, 0); }

__device__ __forceinline__ void copy16(float *dst, const float *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_copies()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Threads of the backward's block that synchronise together: `size`
 * threads on named barrier `bar` (0 with the whole block: its barrier), t
 * the thread's index among them. The block is two groups of NT
 * (v3_backward_kernel). */
struct Group {
    int bar, size, t;
};

__device__ __forceinline__ void group_sync(const Group &g)
{
    asm volatile("bar.sync %0, %1;" ::"r"(g.bar), "r"(g.size) : "memory");
}

/* Publishes "these threads' writes so far are done" by bumping a flag
 * from the call's count n to n + 1: every thread's stores precede the
 * first thread's release through the group's barrier (a release is
 * cumulative over what its thread has synchronised with). */
__device__ __forceinline__ void publish(unsigned *flag, unsigned n, const Group &g)
{
    group_sync(g);
    if (g.t == 0)
        st_release(flag, n + 1u);
}

__device__ __forceinline__ unsigned *flag_of(unsigned *flags, int set, int block)
{
    return flags + (set * MAX_BLOCKS + block) * FLAG_STRIDE;
}

/* Waits until the flags of blocks [first, first + n) in `set` have all
 * moved on from the call's count `count`;
 * every thread of the group may then read what those blocks published:
 * each poller's acquire reaches the others through the group's barrier
 * (reads of it go through L2: cp.async.cg, ld.cg). Polls back off, so
 * that waiting blocks leave L2 to the producers. */
__device__ __forceinline__ void await(unsigned *flags, int set, int first, int n, unsigned count,
                                      const Group &g)
{
    for (int j = g.t; j < n; j += g.size)
        while (ld_acquire(flag_of(flags, set, first + j)) == count)
            __nanosleep(64);
    group_sync(g);
}

/* -------------------------------------------------------------- trace -- */

/* Set to 1 only by the trace program's build of this file (trunk_v3_trace.h);
 * at 0 the stamps below compile to nothing. */
#ifndef AUXTRUNK_V3_TRACE
#define AUXTRUNK_V3_TRACE 0
#endif
#if AUXTRUNK_V3_TRACE
__device__ v3_trace_t g_trace;

/* The global timer and this SM's cycle count, now. */
__device__ __forceinline__ v3_stamp_t now()
{
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return {ns, (unsigned long long)clock64()};
}
#endif

/* Thread `lead` (0 unless a group's first thread) stamps the end of a
 * phase of this block: slot of the forward's (fwd) or the backward's row
 * of the trace; the first slot also records the block's SM. */
__device__ __forceinline__ void stamp(bool fwd, int slot, int lead = 0)
{
#if AUXTRUNK_V3_TRACE
    static_assert(V3F_START == 0 && V3B_START == 0, "START is each kernel's first slot");
    if ((int)threadIdx.x == lead) {
        (fwd ? g_trace.fwd[blockIdx.x] : g_trace.bwd[blockIdx.x])[slot] = now();
        if (slot == 0) {
            unsigned sm;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
            (fwd ? g_trace.sm_fwd : g_trace.sm_bwd)[blockIdx.x] = sm;
        }
    }
#else
    (void)fwd, (void)slot, (void)lead;
#endif
}

/* Thread 0 stamps the backward block's first instruction, before its grid
 * dependency wait (the trace's buffer is no memory of the call's). */
__device__ __forceinline__ void stamp_resident()
{
#if AUXTRUNK_V3_TRACE
    if (threadIdx.x == 0)
        g_trace.bwd_resident[blockIdx.x] = now();
#endif
}

/* Stamp `step` (0 begin, 1 flags awaited, 2 done) of the k-th gradient
 * item of the block's group g, whose kind is tag (trunk_v3_trace.h): its
 * first thread stamps item V3_TRACE_GROUP_ITEMS g + k of the block. */
__device__ __forceinline__ void stamp_item(int g, int k, int step, int tag)
{
#if AUXTRUNK_V3_TRACE
    if (k < V3_TRACE_GROUP_ITEMS) {
        const int slot = V3_TRACE_GROUP_ITEMS * g + k;
        stamp(false, V3B_ITEM0 + 3 * slot + step, g * NT);
        if ((int)threadIdx.x == g * NT)
            g_trace.item[blockIdx.x][slot] = tag;
    }
#else
    (void)g, (void)k, (void)step, (void)tag;
#endif
}

/* ------------------------------------------------------------ staging -- */

/* Rows [row0, row0 + rows) of g [*, k] into s with row stride ld; rows at
 * or past `limit` are zero-filled (computed, never stored). */
__device__ __forceinline__ void stage_rows(float *s, int ld, const float *g, int k, int row0,
                                           int rows, int limit)
{
    /* Piece p = r per + q of the rows, p = t, t + NT, ...: one division,
     * then steps of NT pieces, so that no copy waits for a division. */
    const int per = k / 4, dr = NT / per, dq = NT - dr * per;
    int r = (int)threadIdx.x / per, q = (int)threadIdx.x - r * per;
    while (r < rows) {
        const bool ok = row0 + r < limit;
        copy16(s + r * ld + 4 * q, ok ? g + (size_t)(row0 + r) * k + 4 * q : g, ok);
        r += dr, q += dq;
        if (q >= per)
            r++, q -= per;
    }
}

/* -------------------------------------------------------------- chains -- */

template <int TC>
__device__ __forceinline__ void load_tc(float (&w)[TC], const float *p)
{
    if constexpr (TC == 4) {
        const float4 v = *reinterpret_cast<const float4 *>(p);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
        static_assert(TC == 2, "2 or 4 columns per thread");
        const float2 v = *reinterpret_cast<const float2 *>(p);
        w[0] = v.x, w[1] = v.y;
    }
}

__device__ __forceinline__ float comp(float4 v, int q)
{
    return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
}

/* Fragments: S reduction steps (a multiple of 4) of a thread's TM x TC
 * outputs, loaded together and run together. A chain runs one fragment
 * while the next one's loads are in flight, to hide the loads' latency
 * (about 90 clocks under the block's load, docs/perf-notes-v3.md) behind
 * S steps of FFMAs; the fragments are as long as the registers allow
 * (steps_of). ptxas spreads a fragment's loads through the FFMAs ahead of
 * it and shares scoreboards among them, so the chains still wait on
 * recent loads, fewer times a step: 16 steps instead of 4 took 9-11 % off
 * the 8-row forward's layers (3.42). */
template <int TM, int TC>
__host__ __device__ constexpr int steps_of()
{
    return TM * TC <= 2 ? 16 : TM * TC <= 8 ? 8 : 4;
}

/* Weights stored [k][LDW] (a layer's column slice, as the forward reads W):
 * a[i][u] = steps 4u.. of row i's input (rows RS apart), w[q] = the TC
 * weights of step q, contiguous. */
template <int TM, int TC, int RS = 16, int LDW = 8 * TC, int S = 4>
struct FragCols {
    __host__ __device__ static constexpr int steps() { return S; }
    float4 a[TM][S / 4];
    float w[S][TC];
    __device__ __forceinline__ void load(const float *a0, int lda, const float *w0, int ldw, int k0)
    {
        (void)ldw;
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int u = 0; u < S / 4; u++)
                a[i][u] = *reinterpret_cast<const float4 *>(a0 + RS * i * lda + k0 + 4 * u);
#pragma unroll
        for (int q = 0; q < S; q++)
            load_tc<TC>(w[q], w0 + (k0 + q) * LDW);
    }
    __device__ __forceinline__ void run(float (&acc)[TM][TC]) const
    {
#pragma unroll
        for (int u = 0; u < S / 4; u++)
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int c = 0; c < TC; c++)
                        acc[i][c] = fmaf(comp(a[i][u], q), w[4 * u + q][c], acc[i][c]);
    }
    /* The 4-step fragment of the same layout, for a chain's last steps. */
    __device__ __forceinline__ FragCols<TM, TC, RS, LDW, 4> tail() const { return {}; }
};

/* The same with weights stored by rows (rows of W3 and W2, k contiguous,
 * as the hidden gradients read them), as the bulk tensor copy writes them
 * in the 128-byte swizzle: [K / 32][rows][32], the 16-byte piece q of a
 * row's 32 steps stored at q ^ (row % 8). The thread's columns are CS
 * apart (c = group + CS j, CS the block's column groups), so the groups of
 * a warp read consecutive rows, which the swizzle puts in different banks
 * without the padding the cp.async layout needed; w[j][u] = steps 4u.. of
 * column j. Rows of a RS apart. w0: the thread's first weight row (its
 * line of the first 32 steps), ldw: floats from one 32-step block to the
 * next; sw = row % 8, the same for every row of the thread (CS and the
 * blocks' row counts are multiples of 8): the address costs a shift, a
 * mask and an exclusive-or a piece. A fragment starts on a multiple of S
 * (at most 32), so it lies in one 32-step block. */
template <int TM, int TC, int RS = 16, int CS = 8, int S = 4>
struct FragRows {
    __host__ __device__ static constexpr int steps() { return S; }
    static_assert(S <= 32, "a fragment within one 32-step block");
    float4 a[TM][S / 4];
    float4 w[TC][S / 4];
    int sw;
    __device__ __forceinline__ explicit FragRows(int row_mod8 = 0) : sw(row_mod8) {}
    __device__ __forceinline__ void load(const float *a0, int lda, const float *w0, int ldw, int k0)
    {
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int u = 0; u < S / 4; u++)
                a[i][u] = *reinterpret_cast<const float4 *>(a0 + RS * i * lda + k0 + 4 * u);
        const float *wb = w0 + (k0 >> 5) * ldw;
#pragma unroll
        for (int u = 0; u < S / 4; u++) {
            const float *wk = wb + 4 * ((((k0 >> 2) + u) & 7) ^ sw);
#pragma unroll
            for (int j = 0; j < TC; j++)
                w[j][u] = *reinterpret_cast<const float4 *>(wk + CS * j * 32);
        }
    }
    __device__ __forceinline__ void run(float (&acc)[TM][TC]) const
    {
#pragma unroll
        for (int u = 0; u < S / 4; u++)
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TC; j++)
                        acc[i][j] = fmaf(comp(a[i][u], q), comp(w[j][u], q), acc[i][j]);
    }
    __device__ __forceinline__ FragRows<TM, TC, RS, CS, 4> tail() const
    {
        return FragRows<TM, TC, RS, CS, 4>(sw);
    }
};

/* acc[i][c] = chain over k < K (ascending) of a[row i][k] · w(k, c), with
 * the next fragment's operands loaded while the current one runs. a0:
 * this thread's first row, w0: its first column of the slice (layout by
 * the fragment kind). K is a multiple of 4; the steps past the last whole
 * fragment run on 4-step fragments.
 * Two fragments take turns (f0: steps 2Sj.., f1: 2Sj + S..), so that no
 * copy of one into the other waits on the loads just issued, as `cur =
 * nxt` did in SASS (docs/perf-notes-v3.md). */
template <class Frag, int TM, int TC>
__device__ __forceinline__ void chain(float (&acc)[TM][TC], const float *a0, int lda,
                                      const float *w0, int ldw, int K, Frag proto = Frag())
{
    constexpr int S = Frag::steps();
    const int KS = K - K % S; /* steps in whole fragments */
    if (KS > 0) {
        Frag f0 = proto, f1 = proto;
        f0.load(a0, lda, w0, ldw, 0);
        int k0 = 0;
        for (; k0 + 2 * S <= KS; k0 += 2 * S) {
            f1.load(a0, lda, w0, ldw, k0 + S);
            f0.run(acc);
            /* unconditional, so that no merge of old and new values is
             * needed; past the end it reloads the last fragment, unused */
            f0.load(a0, lda, w0, ldw, min(k0 + 2 * S, KS - S));
            f1.run(acc);
        }
        if (k0 < KS) /* KS = 2Sj + S: f0 holds the last fragment */
            f0.run(acc);
    }
    if constexpr (S > 4) {
        auto t = proto.tail();
        for (int k = KS; k < K; k += 4) {
            t.load(a0, lda, w0, ldw, k);
            t.run(acc);
        }
    }
}

template <int TC>
__device__ __forceinline__ float4 as4(const float (&v)[TC])
{
    if constexpr (TC == 4)
        return make_float4(v[0], v[1], v[2], v[3]);
    else
        return make_float4(v[0], v[1], 0.0f, 0.0f);
}

template <int TC>
__device__ __forceinline__ void store_tc(float *p, const float (&v)[TC])
{
    if constexpr (TC == 4)
        *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    else
        *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
}

/* Pushes this thread's TM x TC outputs (columns c.., rows rg + RS i) into
 * the buffer s [R][ld] of every block of the cluster. */
template <int TM, int TC, int RS>
__device__ __forceinline__ void push_rows(float *s, int ld, int rg, int c,
                                          const float (&v)[TM][TC], unsigned bar)
{
#pragma unroll
    for (unsigned b = 0; b < CL; b++) {
        const unsigned rbar = peer(bar, b);
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const unsigned dst = peer(smem_u32(s + (rg + RS * i) * ld + c), b);
            if constexpr (TC == 4)
                push16(dst, as4<4>(v[i]), rbar);
            else
                push8(dst, make_float2(v[i][0], v[i][1]), rbar);
        }
    }
}

/* Stores rows row0 + rg + RS i (< batch) of this thread's outputs to g [*, n]. */
template <int TM, int TC, int RS>
__device__ __forceinline__ void store_rows(float *g, int n, int row0, int rg, int c, int batch,
                                           const float (&v)[TM][TC])
{
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int row = row0 + rg + RS * i;
        if (row < batch)
            store_tc<TC>(g + (size_t)row * n + c, v[i]);
    }
}

/* ------------------------------------------------------------ forward -- */

/* The forward's operands. mw1, mw2, mw3: tensor maps of W1, W2 and W3
 * whose box is one block's column slice, all rows ([K][SW] or [K][8 TC3],
 * the layout the chains read), columns past the width zero-filled. */
struct Fwd {
    CUtensorMap mw1, mw2, mw3;
    const float *x, *w1, *b1, *w2, *b2, *w3, *b3;
    float *h1, *h2, *out;
    int batch, enc, n1, n2, aux;
};

__host__ __device__ constexpr int imax(int a, int b) { return a > b ? a : b; }

/* Shared memory of the forward for `rows` rows a cluster, in floats
 * (layout in v3_forward_kernel). */
__host__ __device__ constexpr size_t fwd_floats(int rows, int enc, int n1, int n2, int tc3)
{
    return (size_t)rows * (imax(enc, n2) + 4) + (size_t)rows * (n1 + 4) +
           (size_t)imax(enc * SW, n2 * 8 * tc3) + (size_t)n1 * SW;
}

/* RG row groups of NT / RG column groups: RG = 16, a thread's TC = 4
 * columns of layers 1 and 2 in each of its TM rows; RG = 8 (TM = 1 only),
 * TC = 2 columns of its one row: per four steps a warp then loads one
 * activation piece and four 8-byte weight pieces of one column group per
 * quarter-warp, two thirds of RG = 16's shared-memory clocks for half the
 * rows. Layer 3 keeps 8 column groups of TC3 columns: with RG = 8 only
 * the block's first 64 threads run it. */
template <int TM, int TC3, int RG>
__global__ void __cluster_dims__(CL, 1, 1)
    __launch_bounds__(NT, 1) v3_forward_kernel(const __grid_constant__ Fwd f)
{
    static_assert(RG == 16 || (RG == 8 && TM == 1), "16 row groups, or 8 with one row a thread");
    constexpr int R = RG * TM, W3 = 8 * TC3, TC = SW * RG / NT;
    using Hidden = FragCols<TM, TC, RG, SW, steps_of<TM, TC>()>; /* layers 1 and 2 */
    using Output = FragCols<TM, TC3, RG, W3, steps_of<TM, TC3>()>;
    /* 128-byte aligned: the bulk tensor copies' destinations (every part
     * below starts on a multiple of 128 bytes: R is a multiple of 8, the
     * widths of 4). */
    extern __shared__ __align__(1024) float smem[];
    __shared__ __align__(8) unsigned long long bars[5];
    const int ldx = f.enc + 4, ld1 = f.n1 + 4, ld2 = f.n2 + 4;
    float *xs = smem;                              /* [R][ldx]: x rows; later h2 [R][ld2] */
    float *h1s = xs + R * (imax(f.enc, f.n2) + 4); /* [R][ld1], filled by every block */
    float *w2s = h1s + R * ld1;                    /* [n1][SW]: this block's W2 columns */
    float *w1s = w2s + f.n1 * SW;                  /* [enc][SW] */
    /* Reused: h2 arrives only after every block has pushed h1, i.e. read all
     * of x; W3 is staged once this block is done with W1, during layer 2,
     * where nothing waits for it. */
    float *h2s = xs;  /* [R][ld2] */
    float *w3s = w1s; /* [n2][W3] */

    const unsigned rank = cluster_rank();
    const int row0 = (int)(blockIdx.x / CL) * R;
    /* A warp: RG rows x 32 / RG column groups. */
    const int rg = threadIdx.x % RG, cg = threadIdx.x / RG;
    const int c12 = (int)rank * SW + TC * cg, c3 = (int)rank * W3 + TC3 * cg;
    const unsigned bar1 = smem_u32(&bars[0]), bar2 = smem_u32(&bars[1]);
    /* The weight slices' copies complete on their own mbarriers. */
    const unsigned bw1 = smem_u32(&bars[2]), bw2 = smem_u32(&bars[3]), bw3 = smem_u32(&bars[4]);

    stamp(true, V3F_START);
    /* The backward may be scheduled now: its blocks wait for this launch to
     * end before touching memory other than their rows of W3
     * (grid_dependency_wait). They are placed as soon as they fit beside
     * this launch, which its whole grid does not: it is placed 0.5-0.8 us
     * after this launch ends (docs/perf-notes-v3.md, "The backward beside
     * the forward"). */
    launch_dependents();
    if (threadIdx.x == 0) {
        mbar_init(bar1, 1);
        mbar_init(bar2, 1);
        mbar_init(bw1, 1);
        mbar_init(bw2, 1);
        mbar_init(bw3, 1);
        fence_proxy_async(); /* the copies' mbarriers are initialised */
        /* Each slice is one box: one instruction, where cp.async took
         * 64 copies a thread. W2's is asked for once W1's has landed:
         * the bytes in flight into an SM share its bandwidth from L2, and
         * layer 1 needs only x and W1 (docs/perf-notes-v3.md, "W2's slice
         * after W1's"). */
        mbar_expect_tx(bw1, (unsigned)(f.enc * SW * 4));
        tma_load_2d(smem_u32(w1s), &f.mw1, (int)rank * SW, 0, bw1);
    }
    stamp(true, V3F_ISSUED);
    stage_rows(xs, ldx, f.x, f.enc, row0, R, f.batch);
    commit();
    cluster_arrive_relaxed();

    /* Widths are multiples of 4 and slices start on multiples of 4, so a
     * thread's columns are all in range or all out. */
    const bool in1 = c12 < f.n1, in2 = c12 < f.n2, in3 = cg < 8 && c3 < f.aux;
    float a1[TM][TC], a2[TM][TC], a3[TM][TC3];
#pragma unroll
    for (int c = 0; c < TC; c++) {
        const float v1 = in1 ? f.b1[c12 + c] : 0.0f, v2 = in2 ? f.b2[c12 + c] : 0.0f;
#pragma unroll
        for (int i = 0; i < TM; i++)
            a1[i][c] = v1, a2[i][c] = v2;
    }
#pragma unroll
    for (int c = 0; c < TC3; c++) {
        const float v3 = in3 ? f.b3[c3 + c] : 0.0f;
#pragma unroll
        for (int i = 0; i < TM; i++)
            a3[i][c] = v3;
    }

    /* Layer 1. */
    wait_copies<0>(); /* x */
    __syncthreads();
    stamp(true, V3F_XROWS);
    mbar_wait_cta(bw1, 0);
    if (threadIdx.x == 0) {
        mbar_expect_tx(bw2, (unsigned)(f.n1 * SW * 4));
        tma_load_2d(smem_u32(w2s), &f.mw2, (int)rank * SW, 0, bw2);
        mbar_expect_tx(bar1, (unsigned)(R * f.n1 * 4));
        mbar_expect_tx(bar2, (unsigned)(R * f.n2 * 4));
    }
    stamp(true, V3F_STAGED);
    if (in1) {
        chain<Hidden>(a1, xs + rg * ldx, ldx, w1s + TC * cg, SW, f.enc);
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int c = 0; c < TC; c++)
                a1[i][c] = auxtrunk_canon_elu(a1[i][c]);
    }
    stamp(true, V3F_L1);
    cluster_wait(); /* every block's mbarriers are initialised */
    stamp(true, V3F_CLUSTER);
    if (in1) {
        push_rows<TM, TC, RG>(h1s, ld1, rg, c12, a1, bar1);
        store_rows<TM, TC, RG>(f.h1, f.n1, row0, rg, c12, f.batch, a1);
    }
    stamp(true, V3F_PUSH1);
    __syncthreads(); /* W1 is read: its space takes W3 */
    if (threadIdx.x == 0) {
        mbar_expect_tx(bw3, (unsigned)(f.n2 * W3 * 4));
        tma_load_2d(smem_u32(w3s), &f.mw3, (int)rank * W3, 0, bw3);
    }

    /* Layer 2. */
    mbar_wait_cta(bw2, 0);
    stamp(true, V3F_W2);
    mbar_wait0(bar1);
    stamp(true, V3F_X1);
    if (in2) {
        chain<Hidden>(a2, h1s + rg * ld1, ld1, w2s + TC * cg, SW, f.n1);
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int c = 0; c < TC; c++)
                a2[i][c] = auxtrunk_canon_elu(a2[i][c]);
        stamp(true, V3F_L2);
        push_rows<TM, TC, RG>(h2s, ld2, rg, c12, a2, bar2);
        store_rows<TM, TC, RG>(f.h2, f.n2, row0, rg, c12, f.batch, a2);
    }
    stamp(true, V3F_PUSH2);

    /* Layer 3 (linear). Every push into this block has landed once bar2
     * completes, so the block may exit after it. */
    mbar_wait_cta(bw3, 0);
    stamp(true, V3F_W3);
    mbar_wait0(bar2);
    stamp(true, V3F_X2);
    if (in3) {
        chain<Output>(a3, h2s + rg * ld2, ld2, w3s + TC3 * cg, W3, f.n2);
        store_rows<TM, TC3, RG>(f.out, f.aux, row0, rg, c3, f.batch, a3);
    }
    stamp(true, V3F_L3);
}

/* ----------------------------------------------------------- backward -- */

/* The backward's operands. mw3, mw2: tensor maps of W3 and W2 whose box is
 * 32 steps of 32 rows (a block's rows of W3 or W2, H2 or H1 index) in the
 * 128-byte swizzle (FragRows), rows past the height zero-filled. */
struct Bwd {
    CUtensorMap mw3, mw2;
    const float *x, *h1, *h2, *dout, *w2, *w3;
    float *dh2, *dh1, *nodes; /* workspace: [B, H2], [B, H1], [2][P] */
    unsigned *flags;          /* state region: this TM's FLAGS words (flag_of), all one count */
    float *grad[6];           /* dW1 db1 dW2 db2 dW3 db3 */
    int off[7];               /* their offsets in the flat layout; off[6] = P */
    int batch, enc, n1, n2, aux, accumulate;
    int slots; /* blocks of this TM's whole grid, whose flags all move each call */
};

/* Floats of one group's ring of gradient-tile slabs. */
constexpr int RING = STAGES * SLAB * 2 * 32;

/* Shared memory of the backward, in floats: the row-local stage (this
 * block's rows of W3 and W2, swizzled, from a 1 KiB boundary; dout rows,
 * dh2 rows, its own dh2 slice), then, reused, the two groups' rings of
 * gradient-tile slabs; 256 floats of room to align the start. */
__host__ __device__ constexpr size_t bwd_floats(int rows, int n2, int aux)
{
    return 256 + (size_t)imax(((aux + 31) / 32 + (n2 + 31) / 32) * SW * 32 + rows * (aux + 4) +
                                  rows * (n2 + 4) + rows * (SW + 4),
                              GROUPS * RING);
}

/* One weight gradient dW [K, N] = Σ_b a[b, k] · g[b, n] and its bias
 * gradient Σ_b g[b, n]. */
struct GradOf {
    const float *a, *g;
    int K, N, w, b; /* w, b: indices of dW and db in Bwd::grad / off */
    int ready;      /* flag set saying g is complete, or -1 (an input) */
};

__device__ __forceinline__ GradOf grad_of(const Bwd &f, int which)
{
    if (which == 0)
        return {f.h2, f.dout, f.n2, f.aux, 4, 5, -1};
    if (which == 1)
        return {f.h1, f.dh2, f.n1, f.n2, 2, 3, DH2_DONE};
    return {f.x, f.dh1, f.enc, f.n1, 0, 1, DH1_DONE};
}

/* The items of one gradient: per pair, kt x nt weight tiles of 32 x 32, then
 * bt bias tiles of NT columns. */
struct Items {
    GradOf G;
    int kt, nt, per_pair, count; /* count: items over all pairs */
};

/* Items of one gradient [K, N] per pair. */
__host__ __device__ constexpr int items_per_pair(int K, int N)
{
    return ((K + 31) / 32) * ((N + 31) / 32) + (N + NT - 1) / NT;
}

__device__ __forceinline__ Items items_of(const Bwd &f, int which, int pairs)
{
    const GradOf G = grad_of(f, which);
    const int kt = (G.K + 31) / 32, nt = (G.N + 31) / 32, per = items_per_pair(G.K, G.N);
    return {G, kt, nt, per, pairs * per};
}

/* Where a finished tile value goes: the gradient itself (one pair; with
 * accumulate, old + value) or tree node `pair`. */
__device__ __forceinline__ void put4(const Bwd &f, int which, int pairs, int pair, int index,
                                     float4 v)
{
    if (pairs == 1) {
        float4 *p = reinterpret_cast<float4 *>(f.grad[which] + index);
        if (f.accumulate) {
            const float4 o = *p;
            v = make_float4(o.x + v.x, o.y + v.y, o.z + v.z, o.w + v.w);
        }
        *p = v;
    } else {
        *reinterpret_cast<float4 *>(f.nodes + (size_t)pair * f.off[6] + f.off[which] + index) = v;
    }
}

__device__ __forceinline__ void put1(const Bwd &f, int which, int pairs, int pair, int index,
                                     float v)
{
    if (pairs == 1) {
        float *p = f.grad[which] + index;
        *p = f.accumulate ? *p + v : v;
    } else {
        f.nodes[(size_t)pair * f.off[6] + f.off[which] + index] = v;
    }
}

/* A launch on fewer blocks than its TM's whole grid (beside the forward,
 * bwd_clusters) moves the flags of the blocks it does not run, as they
 * would have: block b those of slots b + grid, b + 2 grid, ... below
 * f.slots. Every flag of the set then holds one count when a launch
 * starts, whatever grid the launches before ran; no block of this launch
 * reads them. */
__device__ __forceinline__ void bump_absent(const Bwd &f, unsigned count)
{
    if (threadIdx.x == 0)
        for (int s = (int)(blockIdx.x + gridDim.x); s < f.slots; s += (int)gridDim.x) {
            flag_of(f.flags, DH2_DONE, s)[0] = count + 1u;
            flag_of(f.flags, DH1_DONE, s)[0] = count + 1u;
            flag_of(f.flags, NODES_DONE, s)[0] = count + 1u;
        }
}

/* Slab s of a tile: samples [b0 + SLAB s, ...) of a's columns k0.. and g's
 * columns n0.. into buf [SLAB][32] x 2. */
__device__ __forceinline__ void stage_slab(float *buf, const GradOf &G, int k0, int n0, int b,
                                           int rows, const Group &grp)
{
    float *as = buf, *gs = buf + SLAB * 32;
    for (int p = grp.t; p < rows * 8; p += NT) {
        const int r = p / 8, q = 4 * (p % 8);
        const bool oka = k0 + q < G.K, okg = n0 + q < G.N;
        copy16(as + r * 32 + q, oka ? G.a + (size_t)(b + r) * G.K + k0 + q : G.a, oka);
        copy16(gs + r * 32 + q, okg ? G.g + (size_t)(b + r) * G.N + n0 + q : G.g, okg);
    }
}

/* The FMAs of N consecutive staged samples into a thread's 2 x 4 outputs,
 * in sample order: as, gs point at the first sample's activations and
 * gradients of this thread (rows 32 floats apart). */
template <int N>
__device__ __forceinline__ void slab_fmas(float (&acc)[2][4], const float *as, const float *gs)
{
#pragma unroll
    for (int r = 0; r < N; r++) {
        const float2 a = *reinterpret_cast<const float2 *>(as + r * 32);
        const float4 g = *reinterpret_cast<const float4 *>(gs + r * 32);
        const float av[2] = {a.x, a.y}, gv[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[i][j] = fmaf(av[i], gv[j], acc[i][j]);
    }
}

/* dW tile [k0, k0 + 32) x [n0, n0 + 32) over the pair's samples [b0, b1),
 * by a group of NT threads on its ring of slabs: thread (tk, tn) = (t %
 * 16, t / 16) keeps rows k0 + 2 tk + i (i < 2) and columns n0 + 4 tn + j;
 * a warp reads 16 distinct 8-byte pieces of the activations (2 cycles) and
 * 2 distinct 16-byte pieces of the gradient (2 cycles) per sample. */
__device__ void weight_tile(const Bwd &f, const GradOf &G, int pairs, int pair, int k0, int n0,
                            float *smem, const Group &grp)
{
    const int b0 = pair * PAIR, b1 = min(f.batch, b0 + PAIR);
    const int slabs = (b1 - b0 + SLAB - 1) / SLAB;
    const int tk = grp.t % 16, tn = grp.t / 16;
    float acc[2][4], left[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.0f, left[i][j] = 0.0f;

            /* Ring of STAGES slabs, one commit group per slab (empty past the end). */
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < slabs)
            stage_slab(smem + s * SLAB * 64, G, k0, n0, b0 + s * SLAB,
                       min(SLAB, b1 - b0 - s * SLAB), grp);
        commit();
    }
    for (int s = 0; s < slabs; s++) {
        const int ahead = s + STAGES - 1;
        if (ahead < slabs)
            stage_slab(smem + (ahead % STAGES) * SLAB * 64, G, k0, n0, b0 + ahead * SLAB,
                       min(SLAB, b1 - b0 - ahead * SLAB), grp);
        commit();
        wait_copies<STAGES - 1>();
        group_sync(grp);
        if (s == CHUNK / SLAB) { /* the right chunk of the pair starts */
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    left[i][j] = acc[i][j], acc[i][j] = 0.0f;
        }
        const float *as = smem + (s % STAGES) * SLAB * 64 + 2 * tk;
        const float *gs = smem + (s % STAGES) * SLAB * 64 + SLAB * 32 + 4 * tn;
        const int rows = min(SLAB, b1 - b0 - s * SLAB);
        /* Runs of RUN samples with a compile-time count, so that ptxas
         * issues a run's loads ahead of its FMAs: a loop of four samples
         * waited on its loads every four (docs/perf-notes-v3.md, "3.7"). */
        int r = 0;
        for (; r + RUN <= rows; r += RUN)
            slab_fmas<RUN>(acc, as + r * 32, gs + r * 32);
        for (; r < rows; r++)
            slab_fmas<1>(acc, as + r * 32, gs + r * 32);
        group_sync(grp); /* slab s's buffer is staged again at s + STAGES */
    }
    const bool two = b1 - b0 > CHUNK;
    const int n = n0 + 4 * tn;
    if (n < G.N)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int k = k0 + 2 * tk + i;
            if (k < G.K) {
                float4 v = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
                if (two) /* left + right: the tree's first level */
                    v = make_float4(left[i][0] + acc[i][0], left[i][1] + acc[i][1],
                                    left[i][2] + acc[i][2], left[i][3] + acc[i][3]);
                put4(f, G.w, pairs, pair, k * G.N + n, v);
            }
        }
}

/* Bias-gradient columns [n0, n0 + NT) over the pair: one column per thread
 * of a group, chunk by chunk in sample order, loads batched ahead of the
 * ordered adds. */
__device__ void bias_tile(const Bwd &f, const GradOf &G, int pairs, int pair, int n0,
                          const Group &grp)
{
    const int n = n0 + grp.t;
    if (n >= G.N)
        return;
    const int b0 = pair * PAIR, b1 = min(f.batch, b0 + PAIR);
    float part[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c0 = b0 + h * CHUNK, c1 = min(b1, c0 + CHUNK);
        float p = 0.0f;
        int b = c0;
        for (; b + 8 <= c1; b += 8) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                v[u] = __ldcg(G.g + (size_t)(b + u) * G.N + n);
#pragma unroll
            for (int u = 0; u < 8; u++)
                p = p + v[u];
        }
        for (; b < c1; b++)
            p = p + __ldcg(G.g + (size_t)b * G.N + n);
        part[h] = p;
    }
    put1(f, G.b, pairs, pair, n, b1 - b0 > CHUNK ? part[0] + part[1] : part[0]);
}

/* Stores this thread's TM x TC outputs (columns c0 + cg + CS j of rows
 * rg + RS i, the FragRows layout) to g [*, n]. */
template <int TM, int TC, int RS, int CS>
__device__ __forceinline__ void store_cols(float *g, int n, int row0, int rg, int c0, int cg,
                                           int batch, const float (&v)[TM][TC])
{
#pragma unroll
    for (int j = 0; j < TC; j++) {
        const int c = c0 + cg + CS * j;
        if (c >= n)
            continue;
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int row = row0 + rg + RS * i;
            if (row < batch)
                g[(size_t)row * n + c] = v[i][j];
        }
    }
}

/* Pushes the block's slice, columns [c0, c0 + SW) of n, of the R x n buffer
 * s [R][ld] into the same place of every block of the cluster (counted on
 * bar), from the FragRows outputs v of each thread of the group grp (the
 * block's first NT threads). A thread's columns are 8 apart, so they are
 * first gathered in the block's own [R][SW + 4] scratch and then pushed 16
 * bytes a piece, consecutive threads taking consecutive pieces: 4-byte
 * pushes of scattered words cost more (docs/perf-notes-v3.md). Contains
 * the group's barrier. */
template <int TM, int TC, int RS, int CS>
__device__ __forceinline__ void push_slice(float *s, int ld, int n, int c0, int rg, int cg,
                                           const float (&v)[TM][TC], float *scratch, unsigned bar,
                                           const Group &grp)
{
    constexpr int R = RS * TM, LS = SW + 4;
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TC; j++)
            scratch[(rg + RS * i) * LS + cg + CS * j] = v[i][j];
    group_sync(grp);
    const int w4 = max(0, min(SW, n - c0)) / 4, per = R * w4; /* pieces per receiver */
    for (int p = grp.t; p < per * CL; p += NT) {
        const int b = p / per, q = p - b * per, r = q / w4, c4 = q - r * w4;
        push16(peer(smem_u32(s + r * ld + c0 + 4 * c4), (unsigned)b),
               *reinterpret_cast<const float4 *>(scratch + r * LS + 4 * c4),
               peer(bar, (unsigned)b));
    }
}

/* Post-activations y [*, n] at this thread's FragRows outputs (0 outside). */
template <int TM, int TC, int RS, int CS>
__device__ __forceinline__ void load_y(float (&y)[TM][TC], const float *g, int n, int row0,
                                       int rg, int c0, int cg, int batch)
{
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TC; j++) {
            const int row = row0 + rg + RS * i, c = c0 + cg + CS * j;
            y[i][j] = row < batch && c < n ? g[(size_t)row * n + c] : 0.0f;
        }
}

/* A block of two groups of NT threads. The first (the row group, named
 * barrier 1) runs the row-local dh2 and dh1 of a block holding rows; then
 * both groups (barriers 1 and 2) take gradient items side by side, each on
 * its own ring of slabs, so that every scheduler has two warps to issue
 * from. RG row groups as in the forward: RG = 16, a thread's 4 columns (8
 * apart) in each of its TM rows; RG = 8 (TM = 1 only), 2 columns 16 apart
 * of its one row, two thirds of the shared-memory clocks a step for half
 * the rows. The gradient items do not depend on RG. */
template <int TM, int RG>
__global__ void __cluster_dims__(CL, 1, 1)
    __launch_bounds__(NB, 1) v3_backward_kernel(const __grid_constant__ Bwd f)
{
    static_assert(RG == 16 || (RG == 8 && TM == 1), "16 row groups, or 8 with one row a thread");
    constexpr int R = RG * TM, CS = NT / RG, TC = SW / CS;
    extern __shared__ __align__(1024) float smem[]; /* as the forward declares it */
    __shared__ __align__(8) unsigned long long bars[4];
    const int ldd = f.aux + 4, ld2 = f.n2 + 4;
    const int k3 = (f.aux + 31) / 32, k2 = (f.n2 + 31) / 32; /* 32-step blocks of W3, W2 rows */
    /* The swizzle follows address bits, so its parts start on a 1 KiB line. */
    float *w3s = smem + ((1024u - (smem_u32(smem) & 1023u)) & 1023u) / 4; /* [k3][SW][32] */
    float *w2s = w3s + k3 * SW * 32; /* [k2][SW][32]: rows of W2 (H1 index) of this block */
    float *ds = w2s + k2 * SW * 32;  /* [R][ldd]: dout rows */
    float *d2s = ds + R * ldd;       /* [R][ld2]: dh2_pre rows, filled by every block */
    float *own = d2s + R * ld2;      /* [R][SW + 4]: this block's dh2_pre slice, to push */

    const unsigned rank = cluster_rank();
    const int row0 = (int)(blockIdx.x / CL) * R;
    const int rg = threadIdx.x % RG, cg = threadIdx.x / RG; /* a warp: RG rows x 32 / RG groups */
    const int c0 = (int)rank * SW; /* slice start in H2 (dh2_pre), then in H1 (dh1_pre) */
    const unsigned b2 = smem_u32(&bars[0]), bw3 = smem_u32(&bars[1]), bw2 = smem_u32(&bars[2]);
    /* dh2's hand-over: every row thread arrives, the other group's first
     * thread waits and publishes. */
    const unsigned hand = smem_u32(&bars[3]);
    const bool rows = row0 < f.batch; /* clusters past the batch only take gradient tiles */
    /* The whole block; the row group; this thread's item group. */
    const int group = (int)threadIdx.x / NT;
    const Group block = {0, NB, (int)threadIdx.x}, rowg = {1, NT, (int)threadIdx.x},
                grp = {1 + group, NT, (int)threadIdx.x & (NT - 1)};
    stamp_resident();
    /* Launched early behind the forward (launch_backward). Before the
     * kernels ahead have ended a block reads only the weights: the ABI has
     * the caller pass the parameters the forward read, unchanged, and they
     * were complete before the forward (an ordinary launch) began, so
     * before any block of this launch was placed. The block's rows of W3
     * (one box per 32 steps) then land while it waits; its rows of W2,
     * needed only after dh2, are asked for by the other group once the
     * cluster's row threads have asked for dout's rows: the bytes in
     * flight into an SM share its bandwidth from L2 (docs/perf-notes-v3.md,
     * "W2's slice after W1's"). */
    if (rows && threadIdx.x == 0) {
        mbar_init(b2, 1);
        mbar_init(bw3, 1);
        mbar_init(bw2, 1);
        mbar_init(hand, NT);
        fence_proxy_async(); /* the copies' mbarriers are initialised */
        mbar_expect_tx(bw3, (unsigned)(k3 * SW * 32 * 4));
        for (int k = 0; k < k3; k++)
            tma_load_2d(smem_u32(w3s + k * SW * 32), &f.mw3, 32 * k, c0, bw3);
        tma_prefetch(&f.mw2); /* W2's copies are issued after the wait */
    }
    /* The kernel's pointers (x, h1, h2, dout, ...) share a line of the
     * constant bank that nothing before the wait reads: the first copy
     * after it would wait for that line. A hint for dout's first row reads
     * the line now (and reads no memory into the block: dout may still be
     * in the making). */
    if (threadIdx.x == 0)
        prefetch_l2(f.dout + (size_t)min(row0, f.batch - 1) * f.aux);
    grid_dependency_wait();
    /* The call's count, which every flag of the block holds at the start:
     * read from its dh1 flag, which only this block moves, after a block
     * barrier that every thread reaches after this load (its dh2 flag moves
     * once the row threads have arrived at `hand`, with no block barrier
     * before it, so maybe before some thread has read it). */
    const unsigned count = __ldcg(flag_of(f.flags, DH1_DONE, blockIdx.x));
    stamp(false, V3B_START);

    /* --- dh2_pre, dh1_pre for the cluster's rows: the row group --------- */
    if (rows && group == 1) {
        /* The other group: the cluster barrier counts every thread of the
         * cluster (and orders thread 0's initialisation of `hand` before
         * the wait); its first thread then publishes dh2 for the row group,
         * whose threads only arrive at `hand` (a release; the wait is an
         * acquire), so that none of them waits for the release's fence
         * before its dh1 chain (docs/perf-notes-v3.md, "dh2's flag released
         * by the other group"); then the group waits at the dh1 flag's
         * block barrier. */
        cluster_arrive_relaxed();
        cluster_wait();
        if (threadIdx.x == NT) {
            /* The block's rows of W2, needed after dh2: their eight boxes
             * take 0.3 us to issue, which the row group's first warp no
             * longer spends before its dh2 chain (docs/perf-notes-v3.md,
             * "The backward's prologue"). The row threads arrive here once
             * they have issued dout's copies. */
            mbar_expect_tx(bw2, (unsigned)(k2 * SW * 32 * 4));
            for (int k = 0; k < k2; k++)
                tma_load_2d(smem_u32(w2s + k * SW * 32), &f.mw2, 32 * k, c0, bw2);
            mbar_wait_cta(hand, 0);
            st_release(flag_of(f.flags, DH2_DONE, blockIdx.x), count + 1u);
        }
    } else if (rows) {
        stage_rows(ds, ldd, f.dout, f.aux, row0, R, f.batch);
        commit();
        stamp(false, V3B_ISSUED);
        cluster_arrive_relaxed();

        float y2[TM][TC], y1[TM][TC], a[TM][TC] = {};
        load_y<TM, TC, RG, CS>(y2, f.h2, f.n2, row0, rg, c0, cg, f.batch);
        load_y<TM, TC, RG, CS>(y1, f.h1, f.n1, row0, rg, c0, cg, f.batch);
        wait_copies<0>();
        group_sync(rowg);
        stamp(false, V3B_DOUT);
        if (threadIdx.x == 0)
            mbar_expect_tx(b2, (unsigned)(R * f.n2 * 4));
        stamp(false, V3B_ARMED);
        mbar_wait_cta(bw3, 0);
        stamp(false, V3B_STAGED);
        chain(a, ds + rg * ldd, ldd, w3s + cg * 32, SW * 32, f.aux,
              FragRows<TM, TC, RG, CS, steps_of<TM, TC>()>(cg & 7));
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TC; j++)
                a[i][j] = auxtrunk_canon_elu_grad(a[i][j], y2[i][j]);
        stamp(false, V3B_DH2);
        cluster_wait(); /* every block's mbarrier is initialised */
        stamp(false, V3B_CLUSTER);
        store_cols<TM, TC, RG, CS>(f.dh2, f.n2, row0, rg, c0, cg, f.batch, a);
        push_slice<TM, TC, RG, CS>(d2s, ld2, f.n2, c0, rg, cg, a, own, b2, rowg);
        stamp(false, V3B_PUT2);
        mbar_arrive(hand); /* after the row group's barrier in push_slice */
        stamp(false, V3B_PUB2);

        mbar_wait_cta(bw2, 0);
        mbar_wait0(b2); /* every push into this block has landed */
        stamp(false, V3B_X);
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TC; j++)
                a[i][j] = 0.0f;
        chain(a, d2s + rg * ld2, ld2, w2s + cg * 32, SW * 32, f.n2,
              FragRows<TM, TC, RG, CS, steps_of<TM, TC>()>(cg & 7));
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TC; j++)
                a[i][j] = auxtrunk_canon_elu_grad(a[i][j], y1[i][j]);
        stamp(false, V3B_DH1);
        store_cols<TM, TC, RG, CS>(f.dh1, f.n1, row0, rg, c0, cg, f.batch, a);
        stamp(false, V3B_PUT1);
    } else {
        publish(flag_of(f.flags, DH2_DONE, blockIdx.x), count, block);
    }
    /* Also: shared memory is free again, and both groups go on. */
    publish(flag_of(f.flags, DH1_DONE, blockIdx.x), count, block);
    stamp(false, V3B_PUB1);

    /* --- weight and bias gradients -------------------------------------- */
    /* Items are numbered gradient by gradient (dW3/db3, dW2/db2, dW1/db1),
     * pair by pair, tiles before bias columns; the group at position `me`
     * takes items me, me + 2 grid, ... and visits only those: testing every
     * item of the list against its own number cost each block an integer
     * division per item, serially, around its own work
     * (docs/perf-notes-v3.md). Positions count from the grid's last block,
     * first groups first, then second groups: the clusters holding rows
     * are the first ones and the last to be free, so the items spread over
     * the blocks before a block's second group takes one, and the groups
     * that take one item more are in blocks without rows where there are
     * any. */
    const int pairs = (f.batch + PAIR - 1) / PAIR, grid = (int)gridDim.x;
    const int me = grid - 1 - (int)blockIdx.x + group * grid;
    float *ring = smem + group * RING;
    int waited = -1;         /* (gradient, pair) whose producers this group has awaited */
    int mine = 0;            /* items this group has taken */
    int which = 0, base = 0; /* the gradient of the current item, its first item */
    Items T = items_of(f, 0, pairs);
    for (int item = me;; item += GROUPS * grid) {
        while (which < 3 && item >= base + T.count) {
            base += T.count;
            if (++which < 3)
                T = items_of(f, which, pairs);
        }
        if (which == 3)
            break;
        const GradOf &G = T.G;
        const int i = item - base, pair = i / T.per_pair, j = i - pair * T.per_pair;
        const int tiles = T.kt * T.nt;
        const int tag = 1 + 6 * pair + 2 * which + (j >= tiles);
        stamp_item(group, mine, 0, tag);
        if (G.ready >= 0 && waited != which * 2 + pair) {
            /* The blocks of every cluster holding rows of this pair. */
            const int first = pair * PAIR / R, last = (min(f.batch, (pair + 1) * PAIR) - 1) / R;
            await(f.flags, G.ready, first * CL, (last - first + 1) * CL, count, grp);
            waited = which * 2 + pair;
        }
        stamp_item(group, mine, 1, tag);
        if (j < tiles)
            weight_tile(f, G, pairs, pair, 32 * (j / T.nt), 32 * (j % T.nt), ring, grp);
        else
            bias_tile(f, G, pairs, pair, NT * (j - tiles), grp);
        stamp_item(group, mine++, 2, tag);
    }
    bump_absent(f, count);
    if (pairs == 1) {
        /* no tree level to wait for: the tree's flag moves on all the same,
         * so that every flag holds the next call's count; the block ends
         * when both groups have */
        group_sync(block);
        if (threadIdx.x == 0)
            flag_of(f.flags, NODES_DONE, blockIdx.x)[0] = count + 1u;
        stamp(false, V3B_END);
        return;
    }

    /* --- the last tree level: node 0 + node 1 ----------------------------- */
    publish(flag_of(f.flags, NODES_DONE, blockIdx.x), count, block);
    stamp(false, V3B_NODES_PUB);
    await(f.flags, NODES_DONE, 0, (int)gridDim.x, count, block);
    stamp(false, V3B_NODES_WAIT);
    const int P = f.off[6];
    for (int q = 4 * ((int)blockIdx.x * NB + (int)threadIdx.x); q < P;
         q += 4 * NB * (int)gridDim.x) {
        const float4 l = __ldcg(reinterpret_cast<const float4 *>(f.nodes + q));
        const float4 r = __ldcg(reinterpret_cast<const float4 *>(f.nodes + P + q));
        float4 v = make_float4(l.x + r.x, l.y + r.y, l.z + r.z, l.w + r.w);
        int w = 0;
        while (q >= f.off[w + 1])
            w++;
        float4 *p = reinterpret_cast<float4 *>(f.grad[w] + (q - f.off[w]));
        if (f.accumulate) {
            const float4 o = *p;
            v = make_float4(o.x + v.x, o.y + v.y, o.z + v.z, o.w + v.w);
        }
        *p = v;
    }
    stamp(false, V3B_END);
}

/* Checks that a cooperative launch of a cluster kernel is accepted here. */
__global__ void __cluster_dims__(CL, 1, 1) v3_probe_kernel(int *out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *out = 1;
}

/* ---------------------------------------------------------------- host -- */

/* Clusters of each TM (1, 2, 4; the forward's slot 3: 8 row groups) that
 * fit on the device at once, measured at the domain's largest shared
 * memory, one block per SM; -1 before v3_prepare. */
int g_fwd_clusters[4] = {-1, -1, -1, -1};
int g_bwd_clusters[3] = {-1, -1, -1};
int g_cooperative = 0;
/* 1 if a cooperative cluster launch may also be a programmatic dependent
 * launch (v3_prepare's probe): the fused backward's launch then asks for it. */
int g_dependent = 0;
/* Dynamic shared memory (bytes) above which two blocks cannot share an SM:
 * half the SM's shared memory less a block's reservation, plus 16. The
 * kernels' static shared memory only adds to it. Set by v3_prepare. */
size_t g_exclusive = 0;
/* The driver's tensor-map encoder (v3_prepare); null where the driver has
 * none, and then the fused forward is not taken. */
v3tmap::encoder_t g_encode = nullptr;

/* The dynamic shared memory a launch asks for: `bytes`, or g_exclusive if
 * that is more, so that the block has its SM to itself. */
inline size_t sole(size_t bytes) { return bytes > g_exclusive ? bytes : g_exclusive; }

constexpr size_t FWD_SMEM_MAX(int rows) { return fwd_floats(rows, MAX_W, MAX_W, MAX_W, 4) * 4; }
constexpr size_t BWD_SMEM_MAX(int rows) { return bwd_floats(rows, MAX_W, MAX_W) * 4; }
static_assert(FWD_SMEM_MAX(64) <= 227 * 1024 && BWD_SMEM_MAX(64) <= 227 * 1024, "shared memory");

/* Raises k's shared-memory limit to sole(smem) and lowers *clusters to the
 * clusters of 8 that fit at once with that request (one block per SM). */
template <typename K>
cudaError_t fit(K *k, size_t smem, int threads, int *clusters)
{
    smem = sole(smem);
    cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void *>(k),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return e;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(CL);
    cfg.blockDim = dim3((unsigned)threads);
    cfg.dynamicSmemBytes = smem;
    int n = 0;
    e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
    if (e == cudaSuccess && (*clusters < 0 || n < *clusters))
        *clusters = n;
    return e;
}

template <int TM>
cudaError_t prepare_tm(int slot)
{
    cudaError_t e;
    if ((e = fit(v3_forward_kernel<TM, 2, 16>, FWD_SMEM_MAX(16 * TM), NT,
                 &g_fwd_clusters[slot])) ||
        (e = fit(v3_forward_kernel<TM, 4, 16>, FWD_SMEM_MAX(16 * TM), NT,
                 &g_fwd_clusters[slot])) ||
        (e = fit(v3_backward_kernel<TM, 16>, BWD_SMEM_MAX(16 * TM), NB, &g_bwd_clusters[slot])))
        return e;
    return cudaSuccess;
}

/* The kernels with 8 row groups (one row a thread): the forward in slot 3;
 * the backward in TM = 1's slot, so that both run one grid and share its
 * flags (fused_backward). */
cudaError_t prepare_half()
{
    cudaError_t e;
    if ((e = fit(v3_forward_kernel<1, 2, 8>, FWD_SMEM_MAX(8), NT, &g_fwd_clusters[3])) ||
        (e = fit(v3_forward_kernel<1, 4, 8>, FWD_SMEM_MAX(8), NT, &g_fwd_clusters[3])) ||
        (e = fit(v3_backward_kernel<1, 8>, BWD_SMEM_MAX(8), NB, &g_bwd_clusters[0])))
        return e;
    return cudaSuccess;
}

/* Rows per thread (TM) and clusters of a launch: the smallest TM whose row
 * blocks fit at once in at most MAX_CLUSTERS clusters; {0, 0} if none. The
 * backward's grid is all the clusters that fit (its gradient tiles use
 * every block); the forward's, one per row block. */
struct Plan {
    int tm, clusters;
    int rg; /* row groups: 16, or 8 (TM = 1) */
};
/* Clusters a plan may use of the `fit` measured for its kernel. */
inline int usable(int fit) { return fit < MAX_CLUSTERS ? fit : MAX_CLUSTERS; }
Plan plan_of(int batch, const int *fit_clusters, bool whole_grid)
{
    for (int s = 0; s < 3; s++) {
        const int tm = 1 << s, need = (batch + 16 * tm - 1) / (16 * tm);
        const int cap = usable(fit_clusters[s]);
        if (need <= cap)
            return {tm, whole_grid ? cap : need, 16};
    }
    return {0, 0, 16};
}

/* The forward's plan: 8 row groups (R = 8 rows a cluster) where its
 * clusters fit at once, else plan_of's. Halving a block's rows cuts its
 * chains' shared-memory clocks a step by a third (v3_forward_kernel), for
 * twice the clusters. */
Plan fwd_plan_of(int batch)
{
    const int cap = usable(g_fwd_clusters[3]);
    const int need = (batch + 7) / 8;
    if (need <= cap)
        return {1, need, 8};
    return plan_of(batch, g_fwd_clusters, false);
}

/* The backward's: 8 row groups up to HALF_BWD_MAX_BATCH, on TM = 1's whole
 * grid (the same blocks, so the same flags), else plan_of's. Above it the
 * blocks busy with rows leave too few free for the gradient tiles that
 * need no dh: on an H100 8 row groups were 1.2-1.9 us faster a step at
 * B <= 64 and 0.5-0.9 slower at 96 and 120 (docs/perf-notes-v3.md). */
constexpr int HALF_BWD_MAX_BATCH = 64;
Plan bwd_plan_of(int batch)
{
    Plan p = plan_of(batch, g_bwd_clusters, true);
    if (p.tm == 1 && batch <= HALF_BWD_MAX_BATCH && (batch + 7) / 8 <= p.clusters)
        p.rg = 8;
    return p;
}

/* The backward's clusters: at 8 row groups, the clusters of its whole
 * grid that the forward's leave free, where they hold its row clusters
 * and their groups can take every gradient item at once, so that its
 * blocks are placed while the forward runs (a cooperative grid is placed
 * only where all of it fits; docs/perf-notes-v3.md, "The backward beside
 * the forward" and "3.46"); else the whole grid. */
int bwd_clusters(const Plan &p, atk_dims_t d, int batch)
{
    if (p.rg != 8)
        return p.clusters;
    const int beside = p.clusters - fwd_plan_of(batch).clusters, need = (batch + 7) / 8;
    const int pairs = (batch + PAIR - 1) / PAIR;
    const int items = pairs * (items_per_pair(d.h2, d.aux) + items_per_pair(d.h1, d.h2) +
                               items_per_pair(d.enc, d.h1));
    return beside >= need && GROUPS * CL * beside >= items ? beside : p.clusters;
}

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The tensor map of w [rows, k] (k contiguous) whose box is 32 steps of 32
 * rows in the 128-byte swizzle (FragRows), zero-filled past the rows. */
bool encode_rows_map(CUtensorMap *map, const float *w, int k, int rows)
{
    return v3tmap::encode_2d(g_encode, map, w, k, rows, 32, SW, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

/* The tensor map of w [k, n] (n contiguous) whose box is `cols` columns of
 * all k rows (k <= 256, the box's limit), zero-filled past n. */
bool encode_slice_map(CUtensorMap *map, const float *w, int k, int n, int cols)
{
    return v3tmap::encode_2d(g_encode, map, w, n, k, cols, k, CU_TENSOR_MAP_SWIZZLE_NONE,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

/* Workspace layout of the fused backward (floats). */
struct Layout {
    size_t dh2, dh1, nodes, end;
};
inline Layout layout_of(atk_dims_t d, int batch)
{
    const v2_grad_layout_t g = v2_grad_layout(d);
    Layout L;
    L.dh2 = V3_STATE_FLOATS; /* the state region comes first */
    L.dh1 = L.dh2 + (size_t)batch * d.h2;
    L.nodes = L.dh1 + (size_t)batch * d.h1;
    L.end = L.nodes + (batch > PAIR ? 2 * g.off[6] : 0);
    return L;
}

/* Output columns a block of the forward owns: 8 column groups of TC3 = 2
 * where the cluster covers aux with them, else of TC3 = 4. The launch's
 * kernel and W3's tensor-map box both follow it. */
inline int out_cols(int aux) { return aux <= CL * 8 * 2 ? 16 : 32; }

template <int TM, int RG>
cudaError_t launch_forward(const Fwd &f, int clusters, cudaStream_t s)
{
    const dim3 grid((unsigned)(clusters * CL));
    if (out_cols(f.aux) == 16) {
        const size_t smem = sole(fwd_floats(RG * TM, f.enc, f.n1, f.n2, 2) * 4);
        v3_forward_kernel<TM, 2, RG><<<grid, NT, smem, s>>>(f);
    } else {
        const size_t smem = sole(fwd_floats(RG * TM, f.enc, f.n1, f.n2, 4) * 4);
        v3_forward_kernel<TM, 4, RG><<<grid, NT, smem, s>>>(f);
    }
    return cudaGetLastError();
}

/* The fused backward's launch attributes: [0] a cooperative launch; [1] a
 * programmatic dependent launch, used where v3_prepare's probe shows the
 * device takes both (g_dependent): scheduled while the kernel ahead (the
 * forward, or whatever the caller ran) ends; the kernel waits for it
 * before any memory access but its rows of W3. */
void backward_attrs(cudaLaunchAttribute (&at)[2])
{
    at[0].id = cudaLaunchAttributeCooperative;
    at[0].val.cooperative = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
}

template <int TM, int RG>
cudaError_t launch_backward(const Bwd &f, int clusters, cudaStream_t s)
{
    cudaLaunchAttribute at[2];
    backward_attrs(at);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(clusters * CL));
    cfg.blockDim = dim3(NB);
    cfg.dynamicSmemBytes = sole(bwd_floats(RG * TM, f.n2, f.aux) * 4);
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = g_dependent ? 2 : 1;
    return cudaLaunchKernelEx(&cfg, v3_backward_kernel<TM, RG>, f);
}

/* 1 if v3_probe_kernel, launched with cfg, ran: a refused launch is an
 * answer, not an error, and leaves no error behind. */
int probe_runs(const cudaLaunchConfig_t &cfg, int *probe)
{
    int got = 0;
    if (cudaMemset(probe, 0, sizeof *probe) == cudaSuccess &&
        cudaLaunchKernelEx(&cfg, v3_probe_kernel, probe) == cudaSuccess &&
        cudaDeviceSynchronize() == cudaSuccess)
        cudaMemcpy(&got, probe, sizeof got, cudaMemcpyDeviceToHost);
    (void)cudaGetLastError();
    return got == 1;
}

} /* namespace */

/* ---------------------------------------------------------- public API -- */

#if AUXTRUNK_V3_TRACE
extern "C" cudaError_t v3_trace_clear(void)
{
    void *p;
    cudaError_t e = cudaGetSymbolAddress(&p, g_trace);
    return e != cudaSuccess ? e : cudaMemset(p, 0, sizeof(v3_trace_t));
}

extern "C" cudaError_t v3_trace_get(v3_trace_t *t)
{
    return cudaMemcpyFromSymbol(t, g_trace, sizeof *t);
}
#endif

extern "C" int v3_supported(atk_dims_t d)
{
    return d.enc > 0 && d.h1 > 0 && d.h2 > 0 && d.aux > 0 && d.enc % 4 == 0 && d.h1 % 4 == 0 &&
           d.h2 % 4 == 0 && d.aux % 4 == 0 && d.enc <= MAX_W && d.h1 <= MAX_W && d.h2 <= MAX_W &&
           d.aux <= MAX_W;
}

extern "C" size_t v3_workspace_floats(atk_dims_t d, int max_batch)
{
    const size_t v2 = v2_workspace_floats(d, max_batch);
    const size_t sg = v3_sgemm_workspace_floats(d, max_batch);
    const int b = max_batch < V3_MAX_BATCH ? max_batch : V3_MAX_BATCH;
    const size_t v3 = v3_supported(d) ? layout_of(d, b).end : 0;
    const int mb = max_batch < V3_MID_MAX_BATCH ? max_batch : V3_MID_MAX_BATCH;
    const size_t mid = mb >= V3_MID_MIN_BATCH ? v3_mid_workspace_floats(d, mb) : 0;
    size_t most = v2 > sg ? v2 : sg;
    if (mid > most)
        most = mid;
    const size_t m = V3_STATE_FLOATS + most;
    return m > v3 ? m : v3;
}

extern "C" cudaError_t v3_prepare(void)
{
    cudaError_t e;
    int dev, per_sm, reserved;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev)) !=
            cudaSuccess ||
        (e = cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev)) !=
            cudaSuccess)
        return e;
    if (!g_encode)
        g_encode = v3tmap::find_encoder();
    const size_t exclusive = (size_t)(per_sm / 2 - reserved + 16);
    if (exclusive > g_exclusive)
        g_exclusive = exclusive;
    if ((e = v2_prepare()) != cudaSuccess || (e = v3_sgemm_prepare()) != cudaSuccess ||
        (e = prepare_tm<1>(0)) != cudaSuccess || (e = prepare_tm<2>(1)) != cudaSuccess ||
        (e = prepare_tm<4>(2)) != cudaSuccess || (e = prepare_half()) != cudaSuccess ||
        (e = v3_mid_prepare()) != cudaSuccess)
        return e;
    /* A device that refuses cooperative cluster launches runs cuda-v2's
     * backward instead (the flags need every block resident). */
    int *probe;
    if ((e = cudaMalloc(&probe, sizeof *probe)) != cudaSuccess)
        return e;
    cudaLaunchAttribute at[2];
    backward_attrs(at);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(CL);
    cfg.blockDim = dim3(32);
    cfg.attrs = at;
    cfg.numAttrs = 1;
    g_cooperative = probe_runs(cfg, probe);
    /* The same launch with both attributes (the memset ahead of it). */
    cfg.numAttrs = 2;
    g_dependent = g_cooperative && probe_runs(cfg, probe);
    return cudaFree(probe);
}

extern "C" cudaError_t v3_fused_forward(atk_dims_t d, const atk_params_t *p, const float *x,
                                        int batch, float *h1, float *h2, float *out,
                                        cudaStream_t stream)
{
    /* Row blocks that do not fit at once would run in two waves: cuda-v2 is
     * faster then (docs/perf-notes-v3.md). */
    const Plan plan = fwd_plan_of(batch);
    const bool fused = v3_supported(d) && batch <= V3_MAX_BATCH && g_encode && aligned16(x) &&
                       aligned16(p->w1) && aligned16(p->w2) && aligned16(p->w3) && aligned16(h1) &&
                       aligned16(h2) && aligned16(out);
    Fwd f;
    if (!fused || plan.tm == 0 || !encode_slice_map(&f.mw1, p->w1, d.enc, d.h1, SW) ||
        !encode_slice_map(&f.mw2, p->w2, d.h1, d.h2, SW) ||
        !encode_slice_map(&f.mw3, p->w3, d.h2, d.aux, out_cols(d.aux)))
        return v2_forward(d, p, x, batch, h1, h2, out, stream);
    f.x = x, f.w1 = p->w1, f.b1 = p->b1, f.w2 = p->w2, f.b2 = p->b2, f.w3 = p->w3, f.b3 = p->b3;
    f.h1 = h1, f.h2 = h2, f.out = out;
    f.batch = batch, f.enc = d.enc, f.n1 = d.h1, f.n2 = d.h2, f.aux = d.aux;
    return plan.rg == 8     ? launch_forward<1, 8>(f, plan.clusters, stream)
           : plan.tm == 1 ? launch_forward<1, 16>(f, plan.clusters, stream)
           : plan.tm == 2 ? launch_forward<2, 16>(f, plan.clusters, stream)
                          : launch_forward<4, 16>(f, plan.clusters, stream);
}

extern "C" cudaError_t v3_fused_backward(atk_dims_t d, const atk_params_t *p, const float *x,
                                         const float *h1, const float *h2, const float *dout,
                                         int batch, const atk_grads_t *g, int accumulate,
                                         float *workspace, cudaStream_t stream)
{
    const Plan plan = bwd_plan_of(batch);
    float *const grad[6] = {g->dw1, g->db1, g->dw2, g->db2, g->dw3, g->db3};
    bool fused = g_cooperative && g_encode && plan.tm != 0 && v3_supported(d) &&
                 batch <= V3_MAX_BATCH && aligned16(x) && aligned16(h1) && aligned16(h2) &&
                 aligned16(dout) && aligned16(p->w2) && aligned16(p->w3) && aligned16(workspace);
    for (int i = 0; i < 6; i++)
        fused = fused && aligned16(grad[i]);
    if (!fused)
        return v2_backward(d, p, x, h1, h2, dout, batch, g, accumulate, workspace + V3_STATE_FLOATS,
                           stream);

    const Layout L = layout_of(d, batch);
    const v2_grad_layout_t gl = v2_grad_layout(d);
    Bwd f = {};
    if (!encode_rows_map(&f.mw3, p->w3, d.aux, d.h2) || !encode_rows_map(&f.mw2, p->w2, d.h2, d.h1))
        return v2_backward(d, p, x, h1, h2, dout, batch, g, accumulate, workspace + V3_STATE_FLOATS,
                           stream);
    f.x = x, f.h1 = h1, f.h2 = h2, f.dout = dout, f.w2 = p->w2, f.w3 = p->w3;
    f.dh2 = workspace + L.dh2, f.dh1 = workspace + L.dh1, f.nodes = workspace + L.nodes;
    const int set = plan.tm == 1 ? 0 : plan.tm == 2 ? 1 : 2; /* this TM's flags */
    f.flags = reinterpret_cast<unsigned *>(workspace) + set * FLAGS;
    for (int i = 0; i < 6; i++)
        f.grad[i] = grad[i];
    for (int i = 0; i < 7; i++)
        f.off[i] = (int)gl.off[i];
    f.batch = batch, f.enc = d.enc, f.n1 = d.h1, f.n2 = d.h2, f.aux = d.aux;
    f.accumulate = accumulate;
    f.slots = plan.clusters * CL;
    return plan.rg == 8     ? launch_backward<1, 8>(f, bwd_clusters(plan, d, batch), stream)
           : plan.tm == 1 ? launch_backward<1, 16>(f, plan.clusters, stream)
           : plan.tm == 2 ? launch_backward<2, 16>(f, plan.clusters, stream)
                          : launch_backward<4, 16>(f, plan.clusters, stream);
}

/* Whether v3_forward and v3_backward give `batch` to the fused path: up to
 * V3_FUSED_MAX_BATCH always; above it, up to V3_FUSED_TM1_MAX_BATCH, where
 * the plans both launches would run take one row a thread (TM = 1). At
 * TM = 2 the fused step is level with cuda-v2's kernels (B = 256), at TM =
 * 1 it is shorter (B = 192; docs/perf-notes-v3.md). */
static bool fused_takes(int batch)
{
    if (batch <= V3_FUSED_MAX_BATCH)
        return true;
    return batch <= V3_FUSED_TM1_MAX_BATCH && fwd_plan_of(batch).tm == 1 &&
           bwd_plan_of(batch).tm == 1;
}

/* Whether v3_forward and v3_backward give `batch` to the mid path (the
 * domain checks aside). */
static bool mid_takes(int batch)
{
    return batch >= V3_MID_MIN_BATCH && batch <= V3_MID_MAX_BATCH && !fused_takes(batch);
}

/* The mid path's flags in the state region. */
static float *mid_flags(float *workspace) { return workspace + V3_FUSED_FLAG_FLOATS; }

extern "C" cudaError_t v3_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                                  float *h1, float *h2, float *out, float *workspace,
                                  cudaStream_t stream)
{
    if (fused_takes(batch))
        return v3_fused_forward(d, p, x, batch, h1, h2, out, stream);
    if (mid_takes(batch) && v3_mid_forward_ok(d, p, x, h1, h2, out, workspace))
        return v3_mid_forward(d, p, x, batch, h1, h2, out, mid_flags(workspace), stream);
    if (batch >= V3_SGEMM_MIN_BATCH && v3_sgemm_forward_ok(d, p, x, h1, h2, out))
        return v3_sgemm_forward(d, p, x, batch, h1, h2, out, stream);
    return v2_forward(d, p, x, batch, h1, h2, out, stream);
}

extern "C" cudaError_t v3_backward_forked(atk_dims_t d, const atk_params_t *p, const float *x,
                                          const float *h1, const float *h2, const float *dout,
                                          int batch, const atk_grads_t *g, int accumulate,
                                          float *workspace, cudaStream_t stream,
                                          cudaStream_t side, cudaEvent_t fork, cudaEvent_t join)
{
    if (fused_takes(batch))
        return v3_fused_backward(d, p, x, h1, h2, dout, batch, g, accumulate, workspace, stream);
    float *const ws = workspace + V3_STATE_FLOATS; /* the other paths' scratch */
    if (mid_takes(batch) && v3_mid_backward_ok(d, p, x, h1, h2, dout, g, ws))
        return v3_mid_backward(d, p, x, h1, h2, dout, batch, g, accumulate, mid_flags(workspace),
                               ws, stream);
    if (batch >= V3_SGEMM_MIN_BATCH && v3_sgemm_backward_ok(d, p, x, h1, h2, dout, g, ws, batch))
        return v3_sgemm_backward_forked(d, p, x, h1, h2, dout, batch, g, accumulate, ws, stream,
                                        side, fork, join);
    if (batch < V3_FORK_MIN_BATCH)
        return v2_backward(d, p, x, h1, h2, dout, batch, g, accumulate, ws, stream);
    return (batch >= V3_EAGER_FORK_MIN_BATCH ? v2_backward_forked_eager : v2_backward_forked)(
        d, p, x, h1, h2, dout, batch, g, accumulate, ws, stream, side, fork, join);
}

extern "C" cudaError_t v3_backward(atk_dims_t d, const atk_params_t *p, const float *x,
                                   const float *h1, const float *h2, const float *dout, int batch,
                                   const atk_grads_t *g, int accumulate, float *workspace,
                                   cudaStream_t stream)
{
    return v3_backward_forked(d, p, x, h1, h2, dout, batch, g, accumulate, workspace, stream, NULL,
                              NULL, NULL);
}
