/*
 * floors_wgmma.cu — the wgmma table of auxtrunk-floors (built for sm_90a,
 * as the kernels that use the instruction: kernels/cuda_v3/trunk_v3_wgmma.cuh).
 *
 * What it measures: the rate of the TF32 wgmma m64nNk8 (both operands in
 * shared memory, fp32 accumulators) in the loop shape of cuda-v3's fast-mode
 * kernels, with nothing else in the loop: one block per SM of NWG consumer
 * warpgroups, each issuing per 32-k "slab" the four k8 wgmmas of the slab
 * on one accumulator, committing them as a group and waiting until at most
 * one group is pending; also with a block barrier per slab (as the layer
 * kernel has), with no wait in the loop at all, or with two accumulators used
 * in turn (two independent chains). The operands are fixed slabs of pseudo-random TF32 values (the
 * tensor cores' power depends on the data), so the loop moves nothing
 * through memory. Per row: SM clocks per slab (thread 0 of every block,
 * clock64, the median block), multiply-adds per SM clock, and TFLOP/s over
 * the whole grid from CUDA events. A 32-k slab of one warpgroup is
 * 64 · N · 32 multiply-adds.
 *
 * A second table feeds the same loop through a ring of TMA boxes, as the
 * kernels are fed: [rows, 32 k] boxes with the 128-byte swizzle, four
 * stages on mbarriers, one thread issuing every copy and refilling a stage
 * once every warpgroup is done with it (a block barrier per slab), from a
 * 16 MiB tensor (it stays in L2; each block reads its own rows of it), a
 * 1 GiB one (every box from DRAM), or the same rows for every block (the
 * box's rows of a 256-wide tensor, 256 KiB: as the chain kernel's blocks all
 * read one layer's weights):
 *   - TMA alone (no wgmma): the copy engine's rate into one SM;
 *   - A by TMA, B resident: the layer kernel's tall tile (128 rows, N = 128);
 *   - B by TMA, A resident, each warpgroup its own 64 rows and all of a
 *     256-column B: a 128-row chain tile (m64n256k8);
 *   - B by TMA, A resident, both warpgroups on one 64-row A, each on half of
 *     a 256-column B: the 64-row chain tile (m64n128k8).
 * Per row: SM clocks per slab, bytes delivered per SM clock, and the whole
 * grid's TB/s.
 *
 * Not a test: it asserts nothing about the numbers.
 */
#include <cuda.h> /* CUtensorMap and its enums; the driver is reached through the runtime */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

#include "../cuda_ck.h"
#include "floors_wgmma.h"
#include "trunk_v3_sync.cuh"
#include "trunk_v3_tmap.h"
#include "trunk_v3_wgmma.cuh"

namespace {

constexpr int SLABS = 4096; /* per launch and warpgroup */
constexpr int BK = 32;      /* k per slab: one 128-byte swizzled row */

template <int N>
__host__ __device__ constexpr int acc_regs()
{
    return N / 2;
}

/* Shared memory: a [64, 32] A slab per warpgroup, one [N, 32] B slab. */
template <int N, int NWG>
constexpr int smem_bytes()
{
    return 1024 + NWG * 64 * BK * 4 + N * BK * 4;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int N>
__device__ __forceinline__ void wgmma_n(float (&d)[acc_regs<N>()], uint64_t da, uint64_t db)
{
    if constexpr (N == 64)
        v3wgmma::wgmma_m64n64k8(d, da, db);
    else if constexpr (N == 128)
        v3wgmma::wgmma_m64n128k8(d, da, db);
    else
        v3wgmma::wgmma_m64n256k8(d, da, db);
}
/* Fills n words of the block's shared memory with TF32 values in ±[0.5, 1)
 * (pseudo-random sign and mantissa, the low 13 bits clear), then makes them
 * visible to the tensor cores. */
__device__ __forceinline__ void fill_operands(uint32_t *words, int n)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u + 0x9e3779b9u;
        h ^= h >> 15;
        words[i] = (h & 0x80000000u) | 0x3F000000u | (h & 0x007FE000u);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* The end of a timed loop: every wgmma complete, then thread 0 records the
 * block's cycles since t0 once the whole block is there. */
__device__ __forceinline__ void stop_clock(long long t0, unsigned long long *cycles)
{
    v3wgmma::wgmma_wait_all();
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0)
        cycles[blockIdx.x] = (unsigned long long)(t1 - t0);
}

/* The sum of a warpgroup's accumulators, which the caller keeps live. */
template <int N>
__device__ __forceinline__ float acc_sum(const float (&acc)[acc_regs<N>()])
{
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < acc_regs<N>(); i++)
        v += acc[i];
    return v;
}
#endif

/* What the loop does after each slab's commit. */
enum Loop {
    WAIT_ONE = 0,      /* wait until at most one group is pending (the kernels' loop) */
    WAIT_ONE_SYNC = 1, /* the same, then a block barrier (the layer kernel's) */
    NO_WAIT = 2        /* nothing: every group in flight until the end */
};

/* CHAINS accumulators used in turn, one per slab. */
template <int N, int NWG, int CHAINS, int LOOP>
__global__ void __launch_bounds__(NWG * 128, 1)
    wgmma_rate_kernel(unsigned long long *cycles, float *sink)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(CHAINS * acc_regs<N>() <= 128, "accumulators within the register file");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    uint32_t *const words = reinterpret_cast<uint32_t *>(smem_raw + (base - raw));
    fill_operands(words, (NWG * 64 + N) * BK);
    __syncthreads();

    const int wg = threadIdx.x >> 7;
    const unsigned sa = base + wg * (64 * BK * 4), sb = base + NWG * (64 * BK * 4);
    float acc[CHAINS][acc_regs<N>()];
#pragma unroll
    for (int c = 0; c < CHAINS; c++)
#pragma unroll
        for (int i = 0; i < acc_regs<N>(); i++)
            acc[c][i] = 0.0f;

    const long long t0 = clock64();
    for (int s = 0; s < SLABS; s += CHAINS) {
#pragma unroll
        for (int c = 0; c < CHAINS; c++) {
            v3wgmma::wgmma_fence();
#pragma unroll
            for (int j = 0; j < BK / 8; j++)
                wgmma_n<N>(acc[c], v3wgmma::desc_sw128(sa + 32 * j),
                           v3wgmma::desc_sw128(sb + 32 * j));
            v3wgmma::wgmma_commit();
            if (LOOP != NO_WAIT)
                v3wgmma::wgmma_wait_one();
            if (LOOP == WAIT_ONE_SYNC)
                __syncthreads();
        }
    }
    stop_clock(t0, cycles);
    float v = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; c++)
        v += acc_sum<N>(acc[c]);
    if (v == 1.0f) /* never, in practice; keeps the sums live */
        sink[threadIdx.x] = v;
#else
    (void)cycles, (void)sink;
#endif
}

/* ---------------------------------------------------------- TMA feed -- */

enum Feed {
    FEED_ONLY = 0,   /* TMA boxes alone, no wgmma */
    FEED_A = 1,      /* A by TMA ([64 NWG rows, 32]), B resident ([N, 32]) */
    FEED_B_OWN = 2,  /* B by TMA ([N, 32]); each warpgroup its own 64 rows of a resident A */
    FEED_B_SPLIT = 3 /* B by TMA ([2N, 32]); both warpgroups on one resident 64-row A, each
                         on its N-row half of B */
};

constexpr int STAGES = 4;

template <int N, int FEED>
__host__ __device__ constexpr int box_rows()
{
    return FEED == FEED_A || FEED == FEED_ONLY ? 128 : FEED == FEED_B_OWN ? N : 2 * N;
}

/* Shared memory: the ring, the resident operand (A: two 64-row slabs, or
 * B: [N, 32]), the mbarriers. */
template <int N, int FEED>
constexpr int feed_smem_bytes()
{
    return 1024 + STAGES * box_rows<N, FEED>() * 128 + (FEED == FEED_A ? N * 128 : 2 * 64 * 128) +
           STAGES * 8;
}

template <int N, int FEED>
__global__ void __launch_bounds__(256, 1)
    tma_feed_kernel(const __grid_constant__ CUtensorMap src, int boxes_m,
                    unsigned long long *cycles, float *sink)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BOX = box_rows<N, FEED>() * 128; /* bytes per stage */
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    const unsigned ring = base, res = base + STAGES * BOX;
    const unsigned bars = res + (FEED == FEED_A ? N * 128 : 2 * 64 * 128);
    uint32_t *const words = reinterpret_cast<uint32_t *>(smem_raw + (res - raw));
    fill_operands(words, (int)(bars - res) / 4);
    /* slab t: k box t % 8 of row box (blockIdx.x + gridDim.x · (t / 8)) mod boxes_m */
    auto issue = [&](int t) {
        const unsigned bar = bars + 8 * (t % STAGES);
        v3sync::mbar_expect_tx(bar, BOX);
        const int rb = (int)((blockIdx.x + (long long)gridDim.x * (t / 8)) % boxes_m);
        v3wgmma::tma_load_2d(ring + (t % STAGES) * BOX, &src, (t % 8) * BK,
                             rb * box_rows<N, FEED>(), bar);
    };
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++)
            v3sync::mbar_init(bars + 8 * s, 1);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        for (int t = 0; t < STAGES; t++)
            issue(t);
    }
    __syncthreads();

    const int wg = threadIdx.x >> 7;
    float acc[acc_regs<N>()];
#pragma unroll
    for (int i = 0; i < acc_regs<N>(); i++)
        acc[i] = 0.0f;
    const long long t0 = clock64();
    for (int t = 0; t < SLABS; t++) {
        const unsigned stage = ring + (t % STAGES) * BOX;
        v3sync::mbar_wait(bars + 8 * (t % STAGES), (unsigned)(t / STAGES) & 1u);
        if (FEED != FEED_ONLY) {
            const unsigned sa = FEED == FEED_A       ? stage + wg * (64 * 128)
                                : FEED == FEED_B_OWN ? res + wg * (64 * 128)
                                                     : res;
            const unsigned sb = FEED == FEED_A       ? res
                                : FEED == FEED_B_OWN ? stage
                                                     : stage + wg * (N * 128);
            v3wgmma::wgmma_fence();
#pragma unroll
            for (int j = 0; j < BK / 8; j++)
                wgmma_n<N>(acc, v3wgmma::desc_sw128(sa + 32 * j), v3wgmma::desc_sw128(sb + 32 * j));
            v3wgmma::wgmma_commit();
            v3wgmma::wgmma_wait_one();
        }
        __syncthreads(); /* every warpgroup is done with slab t - 1's stage */
        if (threadIdx.x == 0 && t >= 1 && t - 1 + STAGES < SLABS)
            issue(t - 1 + STAGES);
    }
    stop_clock(t0, cycles);
    const float v = acc_sum<N>(acc);
    if (v == 1.0f) /* never, in practice; keeps the sums live */
        sink[threadIdx.x] = v;
#else
    (void)src, (void)boxes_m, (void)cycles, (void)sink;
#endif
}

struct Row {
    int n, nwg, chains, loop;
    const void *kernel;
    int smem;
};

template <int N, int NWG, int CHAINS, int LOOP>
Row row()
{
    return {N,
            NWG,
            CHAINS,
            LOOP,
            reinterpret_cast<const void *>(wgmma_rate_kernel<N, NWG, CHAINS, LOOP>),
            smem_bytes<N, NWG>()};
}

const char *const loop_name[] = {"wait for all but one group", "the same, and a block barrier",
                                 "no wait until the end"};

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

/* Six launches of kernel (the first a warm-up): the medians over the other
 * five of the median block's cycles and of the launch's milliseconds. */
void time_launches(const void *kernel, int grid, int threads, int smem, void **args,
                   unsigned long long *cycles, cudaEvent_t e0, cudaEvent_t e1, double *clk_med,
                   double *ms_med)
{
    std::vector<double> clk, ms;
    for (int rep = 0; rep < 6; rep++) {
        CK(cudaEventRecord(e0));
        CK(cudaLaunchKernel(kernel, dim3(grid), dim3(threads), args, smem, 0));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        if (rep == 0)
            continue; /* warm-up (and an L2 source's first touch) */
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
        std::vector<unsigned long long> c(grid);
        CK(cudaMemcpy(c.data(), cycles, grid * sizeof *cycles, cudaMemcpyDeviceToHost));
        clk.push_back(median(std::vector<double>(c.begin(), c.end())));
    }
    *clk_med = median(clk), *ms_med = median(ms);
}

/* Where a feed row's boxes come from. */
enum Source {
    SRC_L2 = 0,    /* a 16 MiB tensor, each block its own rows */
    SRC_DRAM = 1,  /* a 1 GiB tensor, each block its own rows */
    SRC_SHARED = 2 /* one box's rows, the same for every block */
};
const char *const src_name[] = {"16 MiB (L2)", "1 GiB (DRAM)",
                                "256 KiB, every block the same (L2)"};

struct FeedRow {
    int n, feed, src;
    const void *kernel;
    int smem, box_rows;
};

template <int N, int FEED>
FeedRow feed_row(int src)
{
    return {N,
            FEED,
            src,
            reinterpret_cast<const void *>(tma_feed_kernel<N, FEED>),
            feed_smem_bytes<N, FEED>(),
            box_rows<N, FEED>()};
}

const char *const feed_name[] = {
    "TMA alone", "A by TMA, B resident (layer kernel, tall tile)",
    "B by TMA, A resident, own 64 rows each (128-row chain tile)",
    "B by TMA, A resident, one 64-row A, half of B each (64-row chain tile)"};

/* The table of the TMA-fed loop (file comment); cycles and sink hold one
 * value per block and thread. */
void floors_tma_feed(int grid, unsigned long long *cycles, float *sink, cudaEvent_t e0,
                     cudaEvent_t e1)
{
    const v3tmap::encoder_t encode = v3tmap::find_encoder();
    if (!encode) {
        printf("\n(no cuTensorMapEncodeTiled in this driver: the TMA table is skipped)\n");
        return;
    }
    const size_t rows_l2 = 16384, rows_dram = (size_t)1 << 20, width = 256;
    float *src;
    CK(cudaMalloc(&src, rows_dram * width * sizeof(float)));
    CK(cudaMemset(src, 0x3F, rows_dram * width * sizeof(float))); /* 0.747f everywhere */
    const FeedRow rows[] = {
        feed_row<128, FEED_ONLY>(SRC_L2),        feed_row<128, FEED_ONLY>(SRC_DRAM),
        feed_row<128, FEED_A>(SRC_L2),           feed_row<128, FEED_A>(SRC_DRAM),
        feed_row<256, FEED_B_OWN>(SRC_L2),       feed_row<128, FEED_B_SPLIT>(SRC_L2),
        feed_row<128, FEED_ONLY>(SRC_SHARED),    feed_row<256, FEED_B_OWN>(SRC_SHARED),
        feed_row<128, FEED_B_SPLIT>(SRC_SHARED),
    };
    printf("\n## The same loop fed by TMA (four stages, a block barrier per slab)\n\n");
    printf("| N | feed | source | bytes per slab | SM clocks per slab | bytes per SM clock | "
           "TB/s |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    for (const FeedRow &r : rows) {
        const size_t m = r.src == SRC_DRAM     ? rows_dram
                         : r.src == SRC_SHARED ? (size_t)r.box_rows
                                               : rows_l2;
        CUtensorMap map;
        if (!v3tmap::encode_2d(encode, &map, src, (int)width, (int)m, BK, r.box_rows,
                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B)) {
            printf("| %d | %s | tensor map refused | | | | |\n", r.n, feed_name[r.feed]);
            continue;
        }
        int boxes_m = (int)(m / (size_t)r.box_rows);
        CK(cudaFuncSetAttribute(r.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, r.smem));
        void *args[] = {&map, &boxes_m, &cycles, &sink};
        double clk, ms;
        time_launches(r.kernel, grid, 256, r.smem, args, cycles, e0, e1, &clk, &ms);
        const double bytes = (double)r.box_rows * 128, per_slab = clk / SLABS;
        printf("| %d | %s | %s | %.0f | %.0f | %.1f | %.2f |\n", r.n, feed_name[r.feed],
               src_name[r.src], bytes, per_slab, bytes / per_slab,
               bytes * SLABS * grid / (ms * 1e-3) / 1e12);
    }
    CK(cudaFree(src));
}

} /* namespace */

void floors_wgmma(const cudaDeviceProp &prop)
{
    printf(
        "\n## wgmma m64nNk8 TF32 (both operands in shared memory): the fast-mode loop alone\n\n");
    int dev;
    CK(cudaGetDevice(&dev));
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, reinterpret_cast<const void *>(
                                       wgmma_rate_kernel<128, 2, 1, WAIT_ONE>)) != cudaSuccess ||
        prop.major != 9) {
        (void)cudaGetLastError();
        printf("(no sm_90a image for this device: table skipped)\n");
        return;
    }
    const Row rows[] = {
        row<64, 1, 1, WAIT_ONE>(),  row<64, 2, 1, WAIT_ONE>(),  row<64, 2, 2, WAIT_ONE>(),
        row<128, 1, 1, WAIT_ONE>(), row<128, 2, 1, WAIT_ONE>(), row<128, 2, 1, WAIT_ONE_SYNC>(),
        row<128, 2, 1, NO_WAIT>(),  row<128, 2, 2, WAIT_ONE>(), row<128, 3, 1, WAIT_ONE>(),
        row<256, 1, 1, WAIT_ONE>(), row<256, 2, 1, WAIT_ONE>(), row<256, 2, 1, WAIT_ONE_SYNC>(),
        row<256, 2, 1, NO_WAIT>(),
    };
    const int grid = prop.multiProcessorCount;
    unsigned long long *cycles;
    float *sink;
    CK(cudaMalloc(&cycles, grid * sizeof *cycles));
    CK(cudaMalloc(&sink, 512 * sizeof *sink));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("%d blocks (one per SM), %d slabs of 32 k per warpgroup; medians of 5 launches\n\n",
           grid, SLABS);
    printf("| N | warpgroups | accumulators | after each slab | SM clocks per slab | "
           "multiply-adds per SM clock | TFLOP/s |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    for (const Row &r : rows) {
        CK(cudaFuncSetAttribute(r.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, r.smem));
        void *args[] = {&cycles, &sink};
        double clk, ms;
        time_launches(r.kernel, grid, r.nwg * 128, r.smem, args, cycles, e0, e1, &clk, &ms);
        const double per_slab = clk / SLABS;
        const double macs = (double)r.nwg * 64 * r.n * BK;
        const double flops = 2.0 * macs * SLABS * grid;
        printf("| %d | %d | %d | %s | %.0f | %.0f | %.0f |\n", r.n, r.nwg, r.chains,
               loop_name[r.loop], per_slab, macs / per_slab, flops / (ms * 1e-3) / 1e12);
    }
    floors_tma_feed(grid, cycles, sink, e0, e1);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(cycles));
    CK(cudaFree(sink));
}
