/*
 * trunk_v2_fast.cu — the fast mode of CUDA kernel version 2 (see the "fast
 * mode" section of trunk_v2.h): the same trunk on TF32 tensor cores.
 *
 * What it guarantees: every result within the documented tolerance of the
 * double reference (trunk_v2.h); the same bits on every repeated call (no
 * atomics, a launch sequence and a summation order fixed by the widths and the
 * batch alone); nothing allocated and nothing synchronised, only launches on
 * the caller's stream (graph-capturable); no gradient for x. What it does not
 * do: follow the canonical order of abi/auxtrunk_canon.h — results are not
 * bit-exact and differ from the exact path.
 *
 * One GEMM core serves every stage. A block of 4 warps owns a 128 x 128 output
 * tile; each warp a 64 x 64 sub-tile of 4 x 8 mma.sync.m16n8k8 (tf32) tiles,
 * 128 fp32 accumulators per thread. The reduction index k is staged in slabs
 * of 32 through a 3-deep cp.async pipeline in shared memory (96 KiB, two
 * blocks per SM); operands are rounded to TF32 (cvt.rn) as fragments are
 * read. trunk_v2_fast_tile.cuh holds the index arithmetic (layouts, swizzles,
 * fragment and accumulator maps) and is verified on the host by
 * tests/cuda/test_fast_tile.cu.
 *
 * Launches (fixed for a given batch; nothing depends on data):
 *   forward:  layer 1 (bias+ELU), layer 2 (bias+ELU), layer 3 (bias)
 *   backward: W2ᵀ and W3ᵀ into the workspace (one small launch, so that the
 *             hidden gradients run the forward's orientation), dh2_pre (ELU'),
 *             dh1_pre (ELU'), one grouped launch of the three
 *             weight gradients over batch chunks with the bias gradients fused
 *             in (column sums of the staged fp32 operand), and, when there is
 *             more than one chunk, one launch adding the chunk partials in
 *             ascending chunk order.
 * Topologies or pointers outside the fast kernels' domain (a width not a
 * multiple of 4, a pointer not 16-byte aligned) run the exact kernels.
 */
#include "trunk_v2.h"

#include "auxtrunk_canon.h"
#include "trunk_v2_fast_tile.cuh"
#include "trunk_v2_gemm.cuh"

namespace {

using namespace v2fast;

/* -------------------------------------------------------------- PTX -- */

/* fp32 -> tf32, round to nearest (ties to even), as a 32-bit operand. On
 * sm_90 cvt.rn is one instruction (F2FP.TF32); cvt.rna (ties away) is
 * emulated with a compare, a predicated add and a mask, which made the
 * conversions the larger part of the GEMM loop's instructions. */
__device__ __forceinline__ uint32_t to_tf32(float f)
{
    uint32_t r;
    asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}

/* d += a * b on one 16x8x8 tile (fp32 accumulate). */
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2])
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ELU for fast mode: e^z - 1 from the hardware exponential (ex2.approx)
 * for z <= 0. Absolute error about 1e-7 (relative error of e^z a few ulp),
 * far inside V2_FAST_TOL; five instructions instead of the canonical
 * expm1's twenty-odd, once per element of layers 1 and 2. */
__device__ __forceinline__ float fast_elu(float z) { return z > 0.0f ? z : __expf(z) - 1.0f; }

/* One 16-byte global -> shared copy, or 16 zero bytes when !ok (src-size 0:
 * nothing is read). Bypasses L1 (.cg): every operand is used once per block. */
struct AsyncCopy {
    V2F_HD void operator()(float *dst, const float *src, bool ok) const
    {
#if defined(__CUDA_ARCH__)
        const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src),
                     "r"(ok ? 16 : 0)
                     : "memory");
#else
        (void)dst, (void)src, (void)ok;
#endif
    }
};

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* ------------------------------------------------------------ the core -- */

enum Epilogue {
    EPI_BIAS = 0,     /* store acc + bias[n]                  (layer 3) */
    EPI_BIAS_ELU = 1, /* store ELU(acc + bias[n])             (layers 1, 2) */
    EPI_ELU_GRAD = 2, /* store acc * ELU'(y[m,n])             (dh_pre) */
    EPI_STORE = 3     /* store acc, or old + acc (accumulate)  (weight gradients) */
};

/* One GEMM problem: C[m,n] = epilogue(sum over k of A[m,k] * B[k,n]); A is
 * a[m*lda + k] when A_KC, else a[k*lda + m]; B is b[n*ldb + k] when B_KC,
 * else b[k*ldb + n]. Every width (m, n, lda, ldb, ldc) is a multiple of 4 and
 * every pointer 16-byte aligned (checked by the public entries). Built by
 * name (trunk_v2_gemm.cuh), never by position. */
struct FGemm : v2gemm::Named<FGemm> {
    const float *a;
    const float *b;
    float *c;
    const float *bias; /* EPI_BIAS, EPI_BIAS_ELU: [n] */
    const float *y;    /* EPI_ELU_GRAD: [m, n], row stride ldc */
    int lda, ldb, ldc;
    int m, n;
};

using Acc = float[MT][NT8][4];

/* Accumulates the block tile at (m0, n0) over k in [kb, ke) into acc. The
 * pipeline keeps STAGES-1 slabs in flight: iteration t waits for slab t,
 * then (after the barrier that also ends every warp's reads of slab t-1)
 * starts copying slab t+STAGES-1 into slab t-1's buffer, then computes slab t.
 * With sum_cols, thread tid also adds column tid of every staged B slab to
 * colsum (B must be NK). */
template <bool A_KC, bool B_KC>
__device__ __forceinline__ void mainloop(Acc &acc, const FGemm &g, int m0, int n0, int kb, int ke,
                                         float *smem, bool sum_cols, float &colsum)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = warp_m(warp) * WM, wn0 = warp_n(warp) * WN;
    float *sa = smem, *sb = smem + STAGES * TILE_FLOATS;
    const int ktiles = (ke - kb + BK - 1) / BK;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles) {
            stage_load<A_KC>(AsyncCopy{}, sa + s * TILE_FLOATS, g.a, g.lda, m0, g.m, kb + s * BK,
                             ke, tid);
            stage_load<B_KC>(AsyncCopy{}, sb + s * TILE_FLOATS, g.b, g.ldb, n0, g.n, kb + s * BK,
                             ke, tid);
        }
        cp_async_commit(); /* empty groups keep the count uniform */
    }

    for (int t = 0; t < ktiles; t++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of slab t are done */
        __syncthreads();             /* everyone's are; slab t-1 is no longer read */
        const int tn = t + STAGES - 1;
        if (tn < ktiles) {
            const int s = tn % STAGES;
            stage_load<A_KC>(AsyncCopy{}, sa + s * TILE_FLOATS, g.a, g.lda, m0, g.m, kb + tn * BK,
                             ke, tid);
            stage_load<B_KC>(AsyncCopy{}, sb + s * TILE_FLOATS, g.b, g.ldb, n0, g.n, kb + tn * BK,
                             ke, tid);
        }
        cp_async_commit();

        const float *as = sa + (t % STAGES) * TILE_FLOATS;
        const float *bs = sb + (t % STAGES) * TILE_FLOATS;
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ks++) {
            uint32_t af[MT][4], bf[NT8][2];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                float a[4];
                frag_a<A_KC>(as, wm0 + 16 * i, ks, lane, a);
#pragma unroll
                for (int r = 0; r < 4; r++)
                    af[i][r] = to_tf32(a[r]);
            }
#pragma unroll
            for (int p = 0; p < NT8 / 2; p++) {
                float b[2][2];
                frag_b<B_KC>(bs, wn0 + 16 * p, ks, lane, b);
#pragma unroll
                for (int u = 0; u < 2; u++) {
                    bf[2 * p + u][0] = to_tf32(b[u][0]);
                    bf[2 * p + u][1] = to_tf32(b[u][1]);
                }
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT8; j++)
                    mma_tf32(acc[i][j], af[i], bf[j]);
        }
        if (!B_KC && sum_cols)
            column_sum(bs, tid, colsum);
    }
    cp_async_wait<0>();
}

/* Applies the epilogue to the block tile at (m0, n0) and stores it, through
 * shared memory: the warps park their raw accumulators in a [BM][ST_ROW]
 * tile (the pipeline's buffers, idle by then), then every thread walks
 * 16-byte groups: a thread keeps one column group (its 4 bias values are
 * loaded once) and walks every RSTEP-th row: bias and ELU, or ELU' with y,
 * or old + value, and one 16-byte store per group. The bias/ELU loop is
 * rolled (unrolled by 4) to keep the kernel within the instruction cache;
 * the ELU' and accumulate loops issue all their loads first. Rows past m and
 * groups past n (a multiple of 4) are skipped. */
constexpr int ST_ROW = BN + 16; /* the 16-byte writes of two rows hit disjoint banks */
static_assert(BM * ST_ROW * 4 <= SMEM_BYTES, "the output tile fits the pipeline's buffers");

template <bool A_KC, bool B_KC, int EPI>
__device__ __forceinline__ void epilogue(const Acc &acc, const FGemm &g, int m0, int n0,
                                         bool accumulate, float *smem)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = warp_m(warp) * WM, wn0 = warp_n(warp) * WN;
    constexpr int RUNS = Runs<B_KC>::RUNS, LEN = Runs<B_KC>::LEN;
    __syncthreads(); /* every warp is done reading the last slab */
#pragma unroll
    for (int i = 0; i < MT; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *row = smem + c_row<A_KC>(wm0 + 16 * i, lane, h) * ST_ROW;
#pragma unroll
            for (int p = 0; p < NT8 / 2; p++) {
#pragma unroll
                for (int u = 0; u < RUNS; u++) {
                    int col;
                    float v[4];
                    c_run<B_KC>(acc[i][2 * p], acc[i][2 * p + 1], wn0 + 16 * p, lane, h, u, col, v);
                    if (LEN == 4)
                        *reinterpret_cast<float4 *>(row + col) =
                            make_float4(v[0], v[1], v[2], v[3]);
                    else
                        *reinterpret_cast<float2 *>(row + col) = make_float2(v[0], v[1]);
                }
            }
        }
    }
    __syncthreads();
    constexpr int G4 = BN / 4;        /* 16-byte groups per tile row */
    constexpr int RSTEP = NT / G4;    /* rows between a thread's groups */
    constexpr int ITERS = BM / RSTEP; /* groups per thread */
    static_assert(NT % G4 == 0 && BM % RSTEP == 0, "a thread keeps one column group");
    const int c = tid % G4 * 4, r0 = tid / G4, n = n0 + c;
    if (n >= g.n)
        return;
    const float *st = smem + r0 * ST_ROW + c;
    float *dst = g.c + (size_t)(m0 + r0) * g.ldc + n;
    const size_t dstep = (size_t)RSTEP * g.ldc;
    const int rows = g.m - m0 - r0; /* this thread's group j is a row while RSTEP * j < rows */
    if (EPI == EPI_BIAS || EPI == EPI_BIAS_ELU) {
        const float b[4] = {__ldg(g.bias + n), __ldg(g.bias + n + 1), __ldg(g.bias + n + 2),
                            __ldg(g.bias + n + 3)};
#pragma unroll 4
        for (int j = 0; j < ITERS; j++) {
            if (RSTEP * j >= rows)
                break;
            const float4 t = *reinterpret_cast<const float4 *>(st + j * RSTEP * ST_ROW);
            float v[4] = {t.x + b[0], t.y + b[1], t.z + b[2], t.w + b[3]};
            if (EPI == EPI_BIAS_ELU) {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    v[e] = fast_elu(v[e]);
            }
            *reinterpret_cast<float4 *>(dst + j * dstep) = make_float4(v[0], v[1], v[2], v[3]);
        }
    } else {
        /* ELU' needs y, accumulate the old gradient: every load of the
         * thread is issued before its first store (ITERS 16-byte loads in
         * flight), since c may alias y as far as the compiler knows and would
         * otherwise wait for each store before the next load. */
        const bool load = EPI == EPI_ELU_GRAD || accumulate;
        const float *src = EPI == EPI_ELU_GRAD ? g.y : g.c;
        const float *s0 = src + (size_t)(m0 + r0) * g.ldc + n;
        float4 w[ITERS];
#pragma unroll
        for (int j = 0; j < ITERS; j++)
            w[j] = load && RSTEP * j < rows ? *reinterpret_cast<const float4 *>(s0 + j * dstep)
                                            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int j = 0; j < ITERS; j++) {
            if (RSTEP * j >= rows)
                break;
            const float4 t = *reinterpret_cast<const float4 *>(st + j * RSTEP * ST_ROW);
            float4 v = t;
            if (EPI == EPI_ELU_GRAD) {
                v.x = auxtrunk_canon_elu_grad(t.x, w[j].x);
                v.y = auxtrunk_canon_elu_grad(t.y, w[j].y);
                v.z = auxtrunk_canon_elu_grad(t.z, w[j].z);
                v.w = auxtrunk_canon_elu_grad(t.w, w[j].w);
            } else if (accumulate) {
                v = make_float4(w[j].x + t.x, w[j].y + t.y, w[j].z + t.z, w[j].w + t.w);
            }
            *reinterpret_cast<float4 *>(dst + j * dstep) = v;
        }
    }
}

/* ------------------------------------------------------- forward / dh -- */

/* One GEMM over its whole reduction k: blockIdx.x walks n tiles (so the
 * blocks sharing an A row block run together and share it in L2). */
template <bool A_KC, bool B_KC, int EPI>
__global__ void __launch_bounds__(NT, 2) fast_gemm_kernel(FGemm g, int k)
{
    extern __shared__ __align__(16) float smem[];
    Acc acc = {};
    float unused = 0.0f;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    mainloop<A_KC, B_KC>(acc, g, m0, n0, 0, k, smem, false, unused);
    epilogue<A_KC, B_KC, EPI>(acc, g, m0, n0, false, smem);
}

/* ------------------------------------------------------------ backward -- */

/* The three weight-gradient problems of one backward for one grouped
 * launch: dW = aᵀ · d over a batch chunk, with a [batch, M] and d [batch, N]
 * both NK (the batch is the reduction). blockIdx.y is the chunk, blockIdx.x
 * walks the tiles of problems 0..2. The blocks of m tile 0 also sum the
 * staged d columns: the chunk partial of the bias gradient. */
struct FGrads {
    FGemm dw[3];       /* c: the chunk-0 destination (partials, or the gradient) */
    float *db[3];      /* likewise for the bias gradients [N] */
    int tile_start[4]; /* prefix sums of tiles per problem */
    int tiles_n[3];    /* tiles along n per problem */
    int batch, chunk_len;
    size_t chunk_stride; /* floats between chunk partials; 0: one chunk, direct */
    int accumulate;      /* only with chunk_stride 0 (else the reduction adds) */
};

__global__ void __launch_bounds__(NT, 2) fast_grad_kernel(FGrads G)
{
    extern __shared__ __align__(16) float smem[];
    int blk = blockIdx.x, p = 0;
    while (p < 2 && blk >= G.tile_start[p + 1])
        p++;
    blk -= G.tile_start[p];
    const int mt = blk / G.tiles_n[p], nt = blk % G.tiles_n[p];
    const int chunk = blockIdx.y;
    const int kb = chunk * G.chunk_len;
    const int ke = min(G.batch, kb + G.chunk_len);
    const size_t off = (size_t)chunk * G.chunk_stride;
    const bool direct = G.chunk_stride == 0;

    FGemm g = G.dw[p];
    g.c += off;
    Acc acc = {};
    float colsum = 0.0f;
    mainloop<false, false>(acc, g, mt * BM, nt * BN, kb, ke, smem, mt == 0, colsum);
    epilogue<false, false, EPI_STORE>(acc, g, mt * BM, nt * BN, direct && G.accumulate, smem);
    if (mt == 0) {
        const int n = nt * BN + (int)threadIdx.x;
        if (n < g.n) {
            float *dst = G.db[p] + off + n;
            *dst = direct && G.accumulate ? *dst + colsum : colsum;
        }
    }
}

/* Adds the nc chunk partials of every gradient element in ascending chunk
 * order (one fixed sequential chain per element) and stores the sum, or
 * old + sum. Four consecutive elements per thread; every gradient's size and
 * offset in the flat layout (W1 b1 W2 b2 W3 b3) is a multiple of 4, so a
 * group of four never straddles two gradients. */
constexpr int REDUCE_THREADS = 256;

struct FReduce {
    const float *ws;
    size_t stride; /* floats between chunk partials */
    int nc;
    int64_t end[6]; /* prefix sums of gradient sizes */
    float *dst[6];
    int accumulate;
};

__global__ void __launch_bounds__(REDUCE_THREADS) fast_reduce_kernel(FReduce R)
{
    const int64_t e = ((int64_t)blockIdx.x * REDUCE_THREADS + threadIdx.x) * 4;
    if (e >= R.end[5])
        return;
    float4 s = *reinterpret_cast<const float4 *>(R.ws + e);
    for (int c = 1; c < R.nc; c++) {
        const float4 v = *reinterpret_cast<const float4 *>(R.ws + (size_t)c * R.stride + e);
        s.x = s.x + v.x, s.y = s.y + v.y, s.z = s.z + v.z, s.w = s.w + v.w;
    }
    float *base = R.dst[0];
    int64_t start = 0;
#pragma unroll
    for (int q = 0; q < 5; q++) /* constant indices: the arguments stay in registers */
        if (e >= R.end[q])
            base = R.dst[q + 1], start = R.end[q];
    float4 *d = reinterpret_cast<float4 *>(base + (e - start));
    if (R.accumulate) {
        const float4 o = *d;
        s.x = o.x + s.x, s.y = o.y + s.y, s.z = o.z + s.z, s.w = o.w + s.w;
    }
    *d = s;
}

/* -------------------------------------------------------------- launch -- */

inline int cdiv(int a, int b) { return (a + b - 1) / b; }

template <bool A_KC, bool B_KC, int EPI>
cudaError_t gemm(const FGemm &g, int k, cudaStream_t s)
{
    fast_gemm_kernel<A_KC, B_KC, EPI>
        <<<dim3(cdiv(g.n, BN), cdiv(g.m, BM)), NT, SMEM_BYTES, s>>>(g, k);
    return cudaGetLastError();
}

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Weight-gradient tiles per batch chunk. */
inline int grad_tiles(atk_dims_t d)
{
    return cdiv(d.enc, BM) * cdiv(d.h1, BN) + cdiv(d.h1, BM) * cdiv(d.h2, BN) +
           cdiv(d.h2, BM) * cdiv(d.aux, BN);
}

template <typename F>
cudaError_t prepare_kernel(F *f)
{
    const void *k = reinterpret_cast<const void *>(f);
    cudaError_t e =
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
    return e;
}

} /* namespace */

/* ---------------------------------------------------------- public API -- */

extern "C" int v2_fast_supported(atk_dims_t d)
{
    return d.enc > 0 && d.h1 > 0 && d.h2 > 0 && d.aux > 0 && d.enc % 4 == 0 && d.h1 % 4 == 0 &&
           d.h2 % 4 == 0 && d.aux % 4 == 0;
}

extern "C" size_t v2_fast_workspace_floats(atk_dims_t d, int max_batch)
{
    const size_t exact = v2_workspace_floats(d, max_batch);
    if (!v2_fast_supported(d))
        return exact;
    const int nc = chunk_bound(grad_tiles(d), max_batch);
    const size_t fast = v2_workspace_carve(d, max_batch, NULL).floats +
                        (nc > 1 ? (size_t)nc * v2_grad_layout(d).off[6] : 0);
    return fast > exact ? fast : exact; /* the exact kernels may run instead */
}

extern "C" cudaError_t v2_fast_prepare(void)
{
    cudaError_t e;
    if ((e = v2_prepare()) != cudaSuccess ||
        (e = prepare_kernel(fast_gemm_kernel<true, false, EPI_BIAS_ELU>)) != cudaSuccess ||
        (e = prepare_kernel(fast_gemm_kernel<true, false, EPI_BIAS>)) != cudaSuccess ||
        (e = prepare_kernel(fast_gemm_kernel<true, false, EPI_ELU_GRAD>)) != cudaSuccess ||
        (e = prepare_kernel(fast_grad_kernel)) != cudaSuccess)
        return e;
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, reinterpret_cast<const void *>(fast_reduce_kernel));
}

extern "C" cudaError_t v2_fast_forward(atk_dims_t d, const atk_params_t *p, const float *x,
                                       int batch, float *h1, float *h2, float *out,
                                       cudaStream_t stream)
{
    if (batch <= 0 || !p || !x || !h1 || !h2 || !out)
        return cudaErrorInvalidValue;
    const bool fast = v2_fast_supported(d) && batch >= V2_FAST_MIN_BATCH && aligned16(x) &&
                      aligned16(p->w1) && aligned16(p->w2) && aligned16(p->w3) && aligned16(h1) &&
                      aligned16(h2) && aligned16(out);
    if (!fast)
        return v2_forward(d, p, x, batch, h1, h2, out, stream);
    cudaError_t e;
    /* h = act(a · W + b): A = a [batch, K] k-contiguous, B = W [K, N] n-contiguous. */
    FGemm g[3];
    v2gemm::forward_layers(g, d, batch, p, x, h1, h2, out);
    if ((e = gemm<true, false, EPI_BIAS_ELU>(g[0], d.enc, stream)) != cudaSuccess)
        return e;
    if ((e = gemm<true, false, EPI_BIAS_ELU>(g[1], d.h1, stream)) != cudaSuccess)
        return e;
    return gemm<true, false, EPI_BIAS>(g[2], d.h2, stream);
}

extern "C" cudaError_t v2_fast_backward(atk_dims_t d, const atk_params_t *p, const float *x,
                                        const float *h1, const float *h2, const float *dout,
                                        int batch, const atk_grads_t *gr, int accumulate,
                                        float *workspace, cudaStream_t stream)
{
    if (batch <= 0 || !p || !x || !h1 || !h2 || !dout || !gr || !workspace)
        return cudaErrorInvalidValue;
    const bool fast = v2_fast_supported(d) && batch >= V2_FAST_MIN_BATCH && aligned16(x) &&
                      aligned16(h1) && aligned16(h2) && aligned16(dout) && aligned16(p->w2) &&
                      aligned16(p->w3) && aligned16(workspace) && aligned16(gr->dw1) &&
                      aligned16(gr->db1) && aligned16(gr->dw2) && aligned16(gr->db2) &&
                      aligned16(gr->dw3) && aligned16(gr->db3);
    if (!fast)
        return v2_backward(d, p, x, h1, h2, dout, batch, gr, accumulate, workspace, stream);
    cudaError_t e;
    const v2_workspace_t W = v2_workspace_carve(d, batch, workspace);
    float *const dh2 = W.dh2, *const dh1 = W.dh1;

    /* dh_pre = (d · Wᵀ) ⊙ ELU'(y): A = d [batch, N_out] k-contiguous, B = Wᵀ
     * [N_out, K] from the transposed copies, n-contiguous: the forward's
     * orientation (the reduction is the layer's output). */
    if ((e = v2_transpose_hidden_weights(d, p, W.w2t, W.w3t, stream)) != cudaSuccess)
        return e;
    const FGemm g2 = FGemm::shape(batch, d.h2)
                         .with_a(dout, d.aux)
                         .with_b(W.w3t, d.h2)
                         .with_c(dh2, d.h2)
                         .with_y(h2);
    if ((e = gemm<true, false, EPI_ELU_GRAD>(g2, d.aux, stream)) != cudaSuccess)
        return e;
    const FGemm g1 = FGemm::shape(batch, d.h1)
                         .with_a(dh2, d.h2)
                         .with_b(W.w2t, d.h1)
                         .with_c(dh1, d.h1)
                         .with_y(h1);
    if ((e = gemm<true, false, EPI_ELU_GRAD>(g1, d.h2, stream)) != cudaSuccess)
        return e;
    return v2_fast_weight_grads(d, x, h1, h2, dout, batch, gr, accumulate, workspace, stream);
}

extern "C" cudaError_t v2_fast_weight_grads(atk_dims_t d, const float *x, const float *h1,
                                            const float *h2, const float *dout, int batch,
                                            const atk_grads_t *gr, int accumulate, float *workspace,
                                            cudaStream_t stream)
{
    cudaError_t e;
    const v2_workspace_t W = v2_workspace_carve(d, batch, workspace);
    float *const dh2 = W.dh2, *const dh1 = W.dh1, *const partials = W.partials;
    int nc, len;
    chunk_plan(grad_tiles(d), batch, nc, len);
    const v2_grad_layout_t L = v2_grad_layout(d);
    const size_t P = L.off[6];
    const bool direct = nc == 1;

    FGrads G = {};
    const float *const acts[3] = {x, h1, h2}, *const grads[3] = {dh1, dh2, dout};
    float *const dw_dst[3] = {direct ? gr->dw1 : partials + L.off[0],
                              direct ? gr->dw2 : partials + L.off[2],
                              direct ? gr->dw3 : partials + L.off[4]};
    v2gemm::weight_grads(G.dw, d, acts, grads, dw_dst);
    G.db[0] = direct ? gr->db1 : partials + L.off[1];
    G.db[1] = direct ? gr->db2 : partials + L.off[3];
    G.db[2] = direct ? gr->db3 : partials + L.off[5];
    int t = 0;
    G.tile_start[0] = 0;
    for (int q = 0; q < 3; q++) {
        G.tiles_n[q] = cdiv(G.dw[q].n, BN);
        t += cdiv(G.dw[q].m, BM) * G.tiles_n[q];
        G.tile_start[q + 1] = t;
    }
    G.batch = batch;
    G.chunk_len = len;
    G.chunk_stride = direct ? 0 : P;
    G.accumulate = accumulate;
    fast_grad_kernel<<<dim3(t, nc), NT, SMEM_BYTES, stream>>>(G);
    if ((e = cudaGetLastError()) != cudaSuccess || direct)
        return e;

    FReduce R = {};
    R.ws = partials;
    R.stride = P;
    R.nc = nc;
    float *dst[6] = {gr->dw1, gr->db1, gr->dw2, gr->db2, gr->dw3, gr->db3};
    for (int i = 0; i < 6; i++) {
        R.end[i] = (int64_t)L.off[i + 1];
        R.dst[i] = dst[i];
    }
    R.accumulate = accumulate;
    const size_t groups = P / 4;
    fast_reduce_kernel<<<(unsigned)((groups + REDUCE_THREADS - 1) / REDUCE_THREADS), REDUCE_THREADS,
                         0, stream>>>(R);
    return cudaGetLastError();
}
