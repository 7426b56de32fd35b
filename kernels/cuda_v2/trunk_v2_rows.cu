/*
 * trunk_v2_rows.cu — the small-batch path of cuda-v2 (see trunk_v2_rows.h).
 *
 * At small batches the trunk is bound by launches and by the length of the
 * canonical chains (256 dependent fmaf per output), not by arithmetic. Here
 * the row-local stages run as one launch each, on clusters of CL = 8 blocks:
 * a cluster owns R = 16 batch rows, and block j of the cluster owns column
 * slice j of every layer (32 columns of a 256-wide layer). A block computes
 * its slice for the cluster's rows, then pushes the slice into the shared
 * memory of all eight blocks (distributed shared memory), so that after one
 * cluster barrier every block holds the full rows of the next layer's input.
 * Only the block's weight slice is ever loaded (1/8 of each matrix), and the
 * activations never leave the chip between layers.
 *
 *   forward:  x → h1 → h2 → out, one launch (h1, h2 also stored for backward)
 *   backward: dout → dh2_pre → dh1_pre, one launch (both stored to the
 *             workspace for the weight-gradient launch of trunk_v2.cu)
 *
 * Exactness: every output element is one thread's sequential fmaf chain over
 * its reduction index, ascending, starting at the bias (forward) or 0 (hidden
 * gradients), with the epilogues of abi/auxtrunk_canon.h: bit-identical to the
 * CPU reference. Loads go through cp.async (16-byte copies, zero-filled past
 * the batch); reduction lengths are exact loop bounds (no padded terms).
 *
 * No atomics: the only inter-block communication is distributed shared
 * memory ordered by cluster barriers (barrier.cluster with release/acquire).
 */
#include "trunk_v2_rows.h"

#include "auxtrunk_canon.h"

namespace {

constexpr int CL = 8;   /* blocks per cluster: column slices per layer */
constexpr int R = 16;   /* batch rows per cluster */
constexpr int NT = 128; /* threads per block: R rows x 8 column groups */
constexpr int GROUPS = NT / R;
constexpr int HID_TC = 4; /* columns per thread for hidden widths <= 256 */
constexpr int MAX_ENC = 512;
constexpr int MAX_HID = CL * GROUPS * HID_TC; /* 256 */

static_assert(GROUPS == 8, "thread layout: 16 rows x 8 column groups");

/* ------------------------------------------------------------ plumbing -- */

__device__ __forceinline__ void cp_async16(float *dst, const float *src, bool valid)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    const int n = valid ? 16 : 0; /* 0: zero-fill, nothing read */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Cluster barrier halves. The first arrive is relaxed (it only says "this
 * block has started", which must hold before anyone writes into its shared
 * memory); later ones release this block's writes, and the waits acquire. */
__device__ __forceinline__ void cluster_arrive_relaxed()
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

/* Address of the same shared-memory location in block `rank` of the cluster. */
__device__ __forceinline__ float *peer(float *p, unsigned rank)
{
    float *q;
    asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(q) : "l"(p), "r"(rank));
    return q;
}

/* Staging: every thread copies 16-byte pieces c = tid, tid + NT, ...; the
 * (row, piece) pair is advanced incrementally (no division in the loop) and
 * offsets are 32-bit (this path only runs for batch * width < 2^31). */

/* Rows [row0, row0 + rows) of a row-major matrix with k columns into
 * s[rows][k + 4]; rows at or past `limit` are zero-filled (computed, never
 * stored). Used for activations (limit = batch) and for weight rows (limit =
 * the width they index). */
__device__ __forceinline__ void stage_rows(float *s, const float *g, int row0, int rows, int limit,
                                           int k)
{
    const int per_row = k / 4;
    int r = threadIdx.x / per_row, q = threadIdx.x % per_row;
    const int step_r = NT / per_row, step_q = NT % per_row;
    for (; r < rows;) {
        const bool ok = row0 + r < limit;
        cp_async16(s + r * (k + 4) + 4 * q, g + (ok ? (unsigned)((row0 + r) * k + 4 * q) : 0u), ok);
        r += step_r, q += step_q;
        if (q >= per_row)
            q -= per_row, r++;
    }
}

/* Columns [c0, c0 + W) of a [k, n] row-major matrix into s[k][W]; columns
 * past n are zero-filled (never stored). */
template <int W>
__device__ __forceinline__ void stage_cols(float *s, const float *g, int k, int n, int c0)
{
    constexpr int PER = W / 4; /* pieces per row; divides NT */
    static_assert(NT % PER == 0, "staging layout");
    const int q = threadIdx.x % PER;
    const bool ok = c0 + 4 * q < n;
    const float *src = g + (ok ? c0 + 4 * q : 0);
    for (int kk = threadIdx.x / PER; kk < k; kk += NT / PER)
        cp_async16(s + kk * W + 4 * q, src + (ok ? (unsigned)(kk * n) : 0u), ok);
}

/* ------------------------------------------------------------- layers -- */

template <int TC>
__device__ __forceinline__ void load_tc(float (&w)[TC], const float *p)
{
    if constexpr (TC == 4) {
        const float4 v = *reinterpret_cast<const float4 *>(p);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if constexpr (TC == 2) {
        const float2 v = *reinterpret_cast<const float2 *>(p);
        w[0] = v.x, w[1] = v.y;
    } else {
        w[0] = p[0];
    }
}

/* The chains below walk k in steps of 8, ping-ponging between two register
 * stages: the shared-memory operands of the next step are loaded while the
 * current step's FMAs issue (with one warp per scheduler nothing else hides
 * the shared-memory latency), and the two stages are named, so no copies.
 * Reduction lengths are multiples of 4 (the domain); a final group of 4 is
 * handled exactly, never padded. */
template <typename Step, typename Acc>
__device__ __forceinline__ void chain(Acc &acc, Step &A, Step &B, int k)
{
    int k0 = 0;
    if (k >= 8)
        A.load(0);
    for (; k0 + 16 <= k; k0 += 16) {
        B.load(k0 + 8);
        A.run8(acc);
        if (k0 + 24 <= k)
            A.load(k0 + 16);
        B.run8(acc);
    }
    if (k0 + 8 <= k) { /* A holds k0 .. k0 + 7 */
        A.run8(acc);
        k0 += 8;
    }
    if (k0 < k) /* k % 8 == 4 */
        A.run4(acc, k0);
}

/* acc[i] = chain over k of a[k] * W[k, col_i] with the slice stored
 * s[k][8 * TC] and this thread's columns group*TC + i (contiguous). A warp
 * reads 4 rows of a (broadcast, rows 4 banks apart) and 8 * TC consecutive
 * floats of the slice per step: one shared-memory wavefront each. */
template <int TC>
struct ColsStep {
    const float *a, *w;
    float4 av[2];
    float wv[8][TC];
    __device__ __forceinline__ void load(int k0)
    {
        av[0] = *reinterpret_cast<const float4 *>(a + k0);
        av[1] = *reinterpret_cast<const float4 *>(a + k0 + 4);
#pragma unroll
        for (int q = 0; q < 8; q++)
            load_tc<TC>(wv[q], w + (k0 + q) * (GROUPS * TC));
    }
    __device__ __forceinline__ static float pick(float4 v, int q)
    {
        return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
    }
    __device__ __forceinline__ void run8(float (&acc)[TC]) const
    {
#pragma unroll
        for (int q = 0; q < 8; q++)
#pragma unroll
            for (int i = 0; i < TC; i++)
                acc[i] = fmaf(pick(av[q / 4], q % 4), wv[q][i], acc[i]);
    }
    __device__ __forceinline__ void run4(float (&acc)[TC], int k0) const
    {
        const float4 v = *reinterpret_cast<const float4 *>(a + k0);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float t[TC];
            load_tc<TC>(t, w + (k0 + q) * (GROUPS * TC));
#pragma unroll
            for (int i = 0; i < TC; i++)
                acc[i] = fmaf(pick(v, q), t[i], acc[i]);
        }
    }
};

template <int TC>
__device__ __forceinline__ void chain_cols(float (&acc)[TC], const float *a, const float *s, int k,
                                           int group)
{
    ColsStep<TC> A, B;
    A.a = B.a = a;
    A.w = B.w = s + group * TC;
    chain(acc, A, B, k);
}

/* acc[i] = chain over k of a[k] * W[row_i, k] with the slice stored
 * s[8 * TC][k + 4] and this thread's rows group + 8 i (interleaved, so a
 * warp's 8 groups read 8 consecutive rows, 4 banks apart: one wavefront). */
template <int TC>
struct RowsStep {
    const float *a, *w;
    int ld;
    float4 av[2];
    float4 wv[2][TC];
    __device__ __forceinline__ void load(int k0)
    {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            av[h] = *reinterpret_cast<const float4 *>(a + k0 + 4 * h);
#pragma unroll
            for (int i = 0; i < TC; i++)
                wv[h][i] = *reinterpret_cast<const float4 *>(w + GROUPS * i * ld + k0 + 4 * h);
        }
    }
    __device__ __forceinline__ static void fma4(float &acc, float4 x, float4 y)
    {
        acc = fmaf(x.x, y.x, acc);
        acc = fmaf(x.y, y.y, acc);
        acc = fmaf(x.z, y.z, acc);
        acc = fmaf(x.w, y.w, acc);
    }
    __device__ __forceinline__ void run8(float (&acc)[TC]) const
    {
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int i = 0; i < TC; i++)
                fma4(acc[i], av[h], wv[h][i]);
    }
    __device__ __forceinline__ void run4(float (&acc)[TC], int k0) const
    {
        const float4 v = *reinterpret_cast<const float4 *>(a + k0);
#pragma unroll
        for (int i = 0; i < TC; i++)
            fma4(acc[i], v, *reinterpret_cast<const float4 *>(w + GROUPS * i * ld + k0));
    }
};

template <int TC>
__device__ __forceinline__ void chain_rows(float (&acc)[TC], const float *a, const float *s, int k,
                                           int group)
{
    RowsStep<TC> A, B;
    A.a = B.a = a;
    A.w = B.w = s + group * (k + 4);
    A.ld = B.ld = k + 4;
    chain(acc, A, B, k);
}

/* Stores TC contiguous values at p (vector store when TC > 1). */
template <int TC>
__device__ __forceinline__ void store_tc(float *p, const float (&v)[TC])
{
    if constexpr (TC == 4)
        *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    else if constexpr (TC == 2)
        *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
    else
        p[0] = v[0];
}

/* ------------------------------------------------------------ forward -- */

struct Fwd {
    const float *x, *w1, *b1, *w2, *b2, *w3, *b3;
    float *h1, *h2, *out;
    int batch, enc, n1, n2, aux;
};

/* Shared memory of the forward, in floats (layout in rows_forward). */
__host__ __device__ constexpr size_t fwd_floats(int enc, int n1, int n2, int tc3)
{
    return (size_t)R * (enc + 4) + (size_t)R * (n1 + 4) + (size_t)R * (n2 + 4) +
           (size_t)enc * GROUPS * HID_TC + (size_t)n1 * GROUPS * HID_TC + (size_t)n2 * GROUPS * tc3;
}

/* TC3: output columns per thread (2 when AUX <= 128, else 4). */
template <int TC3>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(NT) rows_forward(Fwd f)
{
    extern __shared__ __align__(16) float smem[];
    constexpr int W12 = GROUPS * HID_TC, W3 = GROUPS * TC3; /* slice widths */
    float *xs = smem;                                       /* [R][enc + 4] */
    float *h1s = xs + R * (f.enc + 4);                      /* [R][n1 + 4], filled by all blocks */
    float *h2s = h1s + R * (f.n1 + 4);                      /* [R][n2 + 4], filled by all blocks */
    float *w1s = h2s + R * (f.n2 + 4); /* [enc][W12]: W1 columns of this slice */
    float *w2s = w1s + f.enc * W12;    /* [n1][W12] */
    float *w3s = w2s + f.n1 * W12;     /* [n2][W3] */

    const unsigned rank = cluster_rank();
    const int row0 = (int)(blockIdx.x / CL) * R;
    const int r = threadIdx.x / GROUPS, group = threadIdx.x % GROUPS;
    const int row = row0 + r;
    const int c12 = (int)rank * W12 + group * HID_TC; /* this thread's first column */
    const int c3 = (int)rank * W3 + group * TC3;

    stage_rows(xs, f.x, row0, R, f.batch, f.enc);
    stage_cols<W12>(w1s, f.w1, f.enc, f.n1, (int)rank * W12);
    cp_async_commit();
    stage_cols<W12>(w2s, f.w2, f.n1, f.n2, (int)rank * W12);
    cp_async_commit();
    stage_cols<W3>(w3s, f.w3, f.n2, f.aux, (int)rank * W3);
    cp_async_commit();
    cluster_arrive_relaxed(); /* this block has started */

    float a1[HID_TC], a2[HID_TC], a3[TC3];
#pragma unroll
    for (int i = 0; i < HID_TC; i++) {
        a1[i] = c12 + i < f.n1 ? f.b1[c12 + i] : 0.0f;
        a2[i] = c12 + i < f.n2 ? f.b2[c12 + i] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < TC3; i++)
        a3[i] = c3 + i < f.aux ? f.b3[c3 + i] : 0.0f;

    /* Layer 1: widths are multiples of 4 and slices start on multiples of
     * 4, so a thread's TC columns are all in range or all out. */
    cp_async_wait<2>();
    __syncthreads();
    chain_cols<HID_TC>(a1, xs + r * (f.enc + 4), w1s, f.enc, group);
#pragma unroll
    for (int i = 0; i < HID_TC; i++)
        a1[i] = auxtrunk_canon_elu(a1[i]);
    const bool in1 = c12 < f.n1;
    cluster_wait(); /* every block has started: its shared memory may be written */
    if (in1)
#pragma unroll
        for (unsigned b = 0; b < CL; b++)
            store_tc<HID_TC>(peer(h1s + r * (f.n1 + 4) + c12, b), a1);
    cp_async_wait<1>();
    cluster_arrive(); /* releases the pushes above (a GPU-scope fence: before the global store) */
    if (in1 && row < f.batch)
        store_tc<HID_TC>(f.h1 + (size_t)row * f.n1 + c12, a1);
    cluster_wait();

    /* Layer 2. */
    chain_cols<HID_TC>(a2, h1s + r * (f.n1 + 4), w2s, f.n1, group);
#pragma unroll
    for (int i = 0; i < HID_TC; i++)
        a2[i] = auxtrunk_canon_elu(a2[i]);
    const bool in2 = c12 < f.n2;
    if (in2)
#pragma unroll
        for (unsigned b = 0; b < CL; b++)
            store_tc<HID_TC>(peer(h2s + r * (f.n2 + 4) + c12, b), a2);
    cp_async_wait<0>();
    cluster_arrive();
    if (in2 && row < f.batch)
        store_tc<HID_TC>(f.h2 + (size_t)row * f.n2 + c12, a2);
    cluster_wait(); /* last cluster barrier: no remote access after it */

    /* Layer 3 (linear). */
    chain_cols<TC3>(a3, h2s + r * (f.n2 + 4), w3s, f.n2, group);
    if (c3 < f.aux && row < f.batch)
        store_tc<TC3>(f.out + (size_t)row * f.aux + c3, a3);
}

/* ----------------------------------------------------------- backward -- */

struct Bwd {
    const float *dout, *h1, *h2, *w2, *w3;
    float *dh2, *dh1;
    int batch, n1, n2, aux;
};

__host__ __device__ constexpr size_t bwd_floats(int n2, int aux)
{
    return (size_t)R * (aux + 4) + (size_t)R * (n2 + 4) + (size_t)GROUPS * HID_TC * (aux + 4) +
           (size_t)GROUPS * HID_TC * (n2 + 4);
}

__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(NT) rows_backward(Bwd f)
{
    extern __shared__ __align__(16) float smem[];
    constexpr int W = GROUPS * HID_TC;
    float *ds = smem;                   /* [R][aux + 4]: dout rows */
    float *d2s = ds + R * (f.aux + 4);  /* [R][n2 + 4]: dh2_pre rows, filled by all blocks */
    float *w3s = d2s + R * (f.n2 + 4);  /* [W][aux + 4]: rows of W3 (H2 index) of this slice */
    float *w2s = w3s + W * (f.aux + 4); /* [W][n2 + 4]: rows of W2 (H1 index) of this slice */

    const unsigned rank = cluster_rank();
    const int row0 = (int)(blockIdx.x / CL) * R;
    const int r = threadIdx.x / GROUPS, group = threadIdx.x % GROUPS;
    const int row = row0 + r;
    const int c0 = (int)rank * W; /* slice start, in H2 (stage 1) and H1 (stage 2) */

    stage_rows(ds, f.dout, row0, R, f.batch, f.aux);
    stage_rows(w3s, f.w3, c0, W, f.n2, f.aux);
    cp_async_commit();
    stage_rows(w2s, f.w2, c0, W, f.n1, f.n2);
    cp_async_commit();
    cluster_arrive_relaxed();

    /* The post-activations for ELU', read while the copies fly. This
     * thread's columns are c0 + group + 8 i. */
    float y2[HID_TC], y1[HID_TC];
#pragma unroll
    for (int i = 0; i < HID_TC; i++) {
        const int c = c0 + group + GROUPS * i;
        const bool ok = row < f.batch;
        y2[i] = ok && c < f.n2 ? f.h2[(size_t)row * f.n2 + c] : 0.0f;
        y1[i] = ok && c < f.n1 ? f.h1[(size_t)row * f.n1 + c] : 0.0f;
    }

    /* dh2_pre = (dout · W3ᵀ) ⊙ ELU'(h2), reduction over AUX. */
    float a[HID_TC];
#pragma unroll
    for (int i = 0; i < HID_TC; i++)
        a[i] = 0.0f;
    cp_async_wait<1>();
    __syncthreads();
    chain_rows<HID_TC>(a, ds + r * (f.aux + 4), w3s, f.aux, group);
#pragma unroll
    for (int i = 0; i < HID_TC; i++)
        a[i] = auxtrunk_canon_elu_grad(a[i], y2[i]);
    cluster_wait(); /* every block has started */
#pragma unroll
    for (int i = 0; i < HID_TC; i++) {
        const int c = c0 + group + GROUPS * i;
        if (c < f.n2)
#pragma unroll
            for (unsigned b = 0; b < CL; b++)
                *peer(d2s + r * (f.n2 + 4) + c, b) = a[i];
    }
    cp_async_wait<0>();
    cluster_arrive();
#pragma unroll
    for (int i = 0; i < HID_TC; i++) {
        const int c = c0 + group + GROUPS * i;
        if (c < f.n2 && row < f.batch)
            f.dh2[(size_t)row * f.n2 + c] = a[i];
    }
    cluster_wait(); /* last cluster barrier */

    /* dh1_pre = (dh2_pre · W2ᵀ) ⊙ ELU'(h1), reduction over H2. */
#pragma unroll
    for (int i = 0; i < HID_TC; i++)
        a[i] = 0.0f;
    chain_rows<HID_TC>(a, d2s + r * (f.n2 + 4), w2s, f.n2, group);
#pragma unroll
    for (int i = 0; i < HID_TC; i++) {
        const int c = c0 + group + GROUPS * i;
        if (c < f.n1 && row < f.batch)
            f.dh1[(size_t)row * f.n1 + c] = auxtrunk_canon_elu_grad(a[i], y1[i]);
    }
}

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

inline unsigned clusters(int batch) { return (unsigned)((batch + R - 1) / R); }

constexpr size_t FWD_SMEM_MAX = fwd_floats(MAX_ENC, MAX_HID, MAX_HID, HID_TC) * sizeof(float);
constexpr size_t BWD_SMEM_MAX = bwd_floats(MAX_HID, MAX_HID) * sizeof(float);
static_assert(FWD_SMEM_MAX <= 227 * 1024 && BWD_SMEM_MAX <= 227 * 1024, "shared memory");

template <typename F>
cudaError_t allow_smem(F *f, size_t bytes)
{
    return cudaFuncSetAttribute(reinterpret_cast<const void *>(f),
                                cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

/* At least one cluster of the kernel must fit on the device. */
template <typename F>
cudaError_t expect_cluster(F *f, size_t bytes)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = CL;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(CL);
    cfg.blockDim = dim3(NT);
    cfg.dynamicSmemBytes = bytes;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int n = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, f, &cfg);
    if (e == cudaSuccess && n < 1)
        e = cudaErrorInvalidConfiguration;
    return e;
}

} /* namespace */

/* ---------------------------------------------------------- public API -- */

extern "C" int v2_rows_supported(atk_dims_t d)
{
    return d.enc > 0 && d.h1 > 0 && d.h2 > 0 && d.aux > 0 && d.enc % 4 == 0 && d.h1 % 4 == 0 &&
           d.h2 % 4 == 0 && d.aux % 4 == 0 && d.enc <= MAX_ENC && d.h1 <= MAX_HID &&
           d.h2 <= MAX_HID && d.aux <= MAX_HID;
}

extern "C" cudaError_t v2_rows_prepare(void)
{
    cudaError_t e;
    if ((e = allow_smem(rows_forward<2>, FWD_SMEM_MAX)) != cudaSuccess ||
        (e = allow_smem(rows_forward<4>, FWD_SMEM_MAX)) != cudaSuccess ||
        (e = allow_smem(rows_backward, BWD_SMEM_MAX)) != cudaSuccess ||
        (e = expect_cluster(rows_forward<4>, FWD_SMEM_MAX)) != cudaSuccess ||
        (e = expect_cluster(rows_backward, BWD_SMEM_MAX)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

extern "C" int v2_rows_forward_ok(atk_dims_t d, const atk_params_t *p, const float *x,
                                  const float *h1, const float *h2, const float *out)
{
    return v2_rows_supported(d) && aligned16(x) && aligned16(p->w1) && aligned16(p->w2) &&
           aligned16(p->w3) && aligned16(h1) && aligned16(h2) && aligned16(out);
}

extern "C" int v2_rows_backward_ok(atk_dims_t d, const atk_params_t *p, const float *h1,
                                   const float *h2, const float *dout, const float *dh2,
                                   const float *dh1)
{
    return v2_rows_supported(d) && aligned16(p->w2) && aligned16(p->w3) && aligned16(dout) &&
           aligned16(h1) && aligned16(h2) && aligned16(dh2) && aligned16(dh1);
}

extern "C" cudaError_t v2_rows_forward(atk_dims_t d, const atk_params_t *p, const float *x,
                                       int batch, float *h1, float *h2, float *out,
                                       cudaStream_t stream)
{
    const Fwd f = {x,  p->w1, p->b1, p->w2, p->b2, p->w3, p->b3, h1,
                   h2, out,   batch, d.enc, d.h1,  d.h2,  d.aux};
    const dim3 grid(clusters(batch) * CL);
    if (d.aux <= CL * GROUPS * 2)
        rows_forward<2><<<grid, NT, fwd_floats(d.enc, d.h1, d.h2, 2) * sizeof(float), stream>>>(f);
    else
        rows_forward<4><<<grid, NT, fwd_floats(d.enc, d.h1, d.h2, 4) * sizeof(float), stream>>>(f);
    return cudaGetLastError();
}

extern "C" cudaError_t v2_rows_backward(atk_dims_t d, const atk_params_t *p, const float *h1,
                                        const float *h2, const float *dout, int batch, float *dh2,
                                        float *dh1, cudaStream_t stream)
{
    const Bwd f = {dout, h1, h2, p->w2, p->w3, dh2, dh1, batch, d.h1, d.h2, d.aux};
    rows_backward<<<clusters(batch) * CL, NT, bwd_floats(d.h2, d.aux) * sizeof(float), stream>>>(f);
    return cudaGetLastError();
}
