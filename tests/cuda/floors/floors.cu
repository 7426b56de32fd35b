/*
 * floors.cu — auxtrunk-floors: measures the hardware costs that bound the
 * fused trunk (cuda-v3) on the GPU it runs on, and prints them as tables
 * (docs/floors-h200.md quotes them):
 *
 *   smem     shared-memory loads (32, 64, 128 bits) by distinct addresses
 *            per warp: warp-instructions per SM clock, 1,024 threads per SM
 *   smempat  64- and 128-bit shared-memory loads by the warp's pattern of
 *            addresses (the fragment patterns of R x C thread layouts)
 *   dsmem    a layer exchange inside a cluster (8 and 16 blocks): every block
 *            pushes one slice to every block, by st.async completing on the
 *            receiver's mbarrier, or by plain remote stores and a cluster
 *            barrier; and a one-way push + wait between two blocks
 *   flags    a flag round trip between two blocks (release store, acquire
 *            poll) and a grid barrier made of per-block flags (no atomics)
 *   clock    the SM clock during a sustained FFMA load (clock64 against
 *            %globaltimer), and the FFMA rate
 *   graph    whether a cooperative launch, a cluster launch and both at once
 *            are captured into a CUDA graph and replayed (and what a replay
 *            of one such node, and of a memset node before it, costs)
 *   wgmma    the TF32 wgmma's rate in the loop shape of fast mode's kernels
 *            (floors_wgmma.cu, an sm_90a build)
 *   stage    a block's staging from L2 into shared memory by 16-byte
 *            cp.async (the fused kernels' prologue): clocks from the
 *            block's first instruction to its first and its last commit
 *            group landed, by size, layout, groups and blocks; the same
 *            column slices by one bulk tensor copy (TMA) a slice; and what
 *            code run for the first time costs (an instruction-cache miss)
 *
 *   auxtrunk-floors [smem|smempat|dsmem|flags|clock|graph|wgmma|stage|all]   (default all)
 *
 * Not a test: it asserts nothing about the numbers; it exits non-zero only
 * when a CUDA call fails, and prints what failed.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "../cuda_ck.h"
#include "floors_wgmma.h"
#include "trunk_v2_async.cuh"
#include "trunk_v3_sync.cuh"
#include "trunk_v3_tmap.h"

using namespace v3sync;

static cudaDeviceProp g_prop;

__device__ __forceinline__ uint64_t gtimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

/* ------------------------------------------------------------------ smem -- */

constexpr int SMEM_ITERS = 2048;
constexpr int SMEM_UNROLL = 8;

constexpr int SMEM_WORDS = 4096; /* the load kernels' shared buffer, 4-byte words */

/* Fills the block's buffer (buf[i] = i) and returns the shared-memory
 * address of this thread's word (`word`, of `bytes` bytes each). */
__device__ __forceinline__ unsigned load_buffer(unsigned *buf, int word, int bytes)
{
    for (int i = threadIdx.x; i < SMEM_WORDS; i += blockDim.x)
        buf[i] = i;
    __syncthreads();
    return (unsigned)__cvta_generic_to_shared(buf) + (unsigned)(word * bytes);
}

/* Thread 0 of each block records the cycles since t0, once the whole block
 * is done. */
__device__ __forceinline__ void record_cycles(long long t0, unsigned long long *cycles)
{
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0)
        cycles[blockIdx.x] = (unsigned long long)(t1 - t0);
}

/* Address patterns of the smempat table: lane l reads word pattern(l) (W
 * bytes each) of a contiguous array. They are those of a warp of R x C
 * threads, each thread's fragment starting at word (l / C) for the row
 * operand and (l % C) for the column operand: quarter-uniform (l >> 3) is a
 * 4 x 8 warp's rows, quarter-replicated (l & 7) its columns, and so on. */
enum Pattern { PAT_ALL_SAME, PAT_HALF_UNIFORM, PAT_QUARTER_UNIFORM, PAT_EIGHTH_UNIFORM,
               PAT_QUARTER_REPL, PAT_HALF_REPL, PAT_ALL_DISTINCT, PAT_MOD4, PAT_COUNT };

static const char *const pattern_name[PAT_COUNT] = {
    "all lanes one word",
    "l >> 4 (2 words, each half-warp uniform)",
    "l >> 3 (4 words, each quarter-warp uniform)",
    "l >> 2 (8 words, each 4-lane group uniform)",
    "l & 7 (8 words, the quarter-warps alike)",
    "l & 15 (16 words, the half-warps alike)",
    "l (32 words)",
    "l % 4 (4 words, every quarter-warp all 4)"};

__device__ __forceinline__ int pattern_word(int p, int l)
{
    switch (p) {
    case PAT_ALL_SAME: return 0;
    case PAT_HALF_UNIFORM: return l >> 4;
    case PAT_QUARTER_UNIFORM: return l >> 3;
    case PAT_EIGHTH_UNIFORM: return l >> 2;
    case PAT_QUARTER_REPL: return l & 7;
    case PAT_HALF_REPL: return l & 15;
    case PAT_ALL_DISTINCT: return l;
    default: return l & 3;
    }
}

/* One W-byte shared-memory load into v[0 .. W/4 - 1]; volatile, so that
 * ptxas neither merges the loads nor hoists them out of the loop (plain
 * loads left it: docs/floors-h200.md). */
template <int W>
__device__ __forceinline__ void lds(unsigned (&v)[4], unsigned a)
{
    if constexpr (W == 4)
        asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v[0]) : "r"(a));
    else if constexpr (W == 8)
        asm volatile("ld.volatile.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v[0]), "=r"(v[1]) : "r"(a));
    else
        asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                     : "r"(a));
}

/* W bytes per lane. FOLD (the smem table): lane l reads word (l % arg) of a
 * contiguous array, so a warp touches arg distinct W-byte words, all in
 * distinct banks when arg*W <= 128, and every load is folded into an
 * integer at once (which binds the rate at 1 and 2 words: the integer pipe,
 * not shared memory). Otherwise (the smempat table): lane l reads word
 * pattern_word(arg, l), and the loop does nothing but the loads (the values
 * are folded once, after it). Each unrolled load reads a different 512-byte
 * row. */
template <int W, bool FOLD>
__global__ void __launch_bounds__(1024)
    smem_kernel(int arg, unsigned long long *cycles, unsigned *sink)
{
    __shared__ __align__(16) unsigned buf[SMEM_WORDS];
    const int lane = threadIdx.x & 31;
    const unsigned base = load_buffer(buf, FOLD ? lane % arg : pattern_word(arg, lane), W);
    unsigned r[SMEM_UNROLL][4] = {};
    unsigned acc = 0;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < SMEM_ITERS; it++) {
#pragma unroll
        for (int u = 0; u < SMEM_UNROLL; u++) {
            lds<W>(r[u], base + (unsigned)(u * 512));
            if constexpr (FOLD)
                acc += r[u][0] ^ r[u][1] ^ r[u][2] ^ r[u][3];
        }
    }
    record_cycles(t0, cycles);
    if constexpr (!FOLD) {
#pragma unroll
        for (int u = 0; u < SMEM_UNROLL; u++)
            acc ^= r[u][0] ^ r[u][1] ^ r[u][2] ^ r[u][3];
    }
    if (acc == 0x12345678u)
        sink[0] = acc;
}

typedef void (*load_kernel_t)(int, unsigned long long *, unsigned *);

/* Warp-instructions per SM clock of a load kernel (one block of 1,024
 * threads per SM, SMEM_ITERS x SMEM_UNROLL loads per thread): the median
 * over blocks and three launches. */
static double load_rate(load_kernel_t kernel, int arg)
{
    const int blocks = g_prop.multiProcessorCount;
    unsigned long long *cyc;
    unsigned *sink;
    CK(cudaMalloc(&cyc, blocks * sizeof *cyc));
    CK(cudaMalloc(&sink, sizeof *sink));
    std::vector<double> rates;
    for (int rep = 0; rep < 3; rep++) {
        kernel<<<blocks, 1024>>>(arg, cyc, sink);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<unsigned long long> h(blocks);
        CK(cudaMemcpy(h.data(), cyc, blocks * sizeof *cyc, cudaMemcpyDeviceToHost));
        for (int b = 0; b < blocks; b++)
            rates.push_back(32.0 * SMEM_ITERS * SMEM_UNROLL / (double)h[b]);
    }
    CK(cudaFree(cyc));
    CK(cudaFree(sink));
    return median(rates);
}

template <int W>
static double smem_rate(int distinct)
{
    return load_rate(smem_kernel<W, true>, distinct);
}

template <int W>
static double smempat_rate(int pattern)
{
    return load_rate(smem_kernel<W, false>, pattern);
}

static void run_smem()
{
    printf("\n## Shared-memory loads: warp-instructions per SM clock (1,024 threads per SM)\n\n");
    const int ds[] = {1, 2, 4, 8, 16, 32};
    printf("| distinct addresses per warp |");
    for (int d : ds)
        printf(" %d |", d);
    printf("\n|---|---|---|---|---|---|---|\n");
    printf("| LDS.32 |");
    for (int d : ds)
        printf(" %.2f |", smem_rate<4>(d));
    printf("\n| LDS.64 |");
    for (int d : ds)
        printf(" %.2f |", smem_rate<8>(d));
    printf("\n| LDS.128 |");
    for (int d : ds)
        printf(" %.2f |", smem_rate<16>(d));
    printf("\n");
}

/* --------------------------------------------------------------- smempat -- */

/* 64- and 128-bit loads by the warp's address pattern (Pattern, above). */
static void run_smempat()
{
    printf("\n## Shared-memory loads by address pattern: warp-instructions per SM clock, and SM "
           "clocks per load (1,024 threads per SM, loads only)\n\n");
    printf("| pattern (word of lane l) | LDS.64 per clock | clocks | LDS.128 per clock | clocks |\n");
    printf("|---|---|---|---|---|\n");
    for (int p = 0; p < PAT_COUNT; p++) {
        const double r8 = smempat_rate<8>(p), r16 = smempat_rate<16>(p);
        printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", pattern_name[p], r8, 1.0 / r8, r16,
               1.0 / r16);
    }
}

/* ----------------------------------------------------------------- dsmem -- */

__device__ __forceinline__ void cluster_sync()
{
    cluster_arrive();
    cluster_wait();
}

/* One layer exchange: every block of the cluster owns `slice` floats and
 * writes them into the same place of every block's buffer (CL slices), then
 * waits until its own buffer is complete. mode 0: st.async + mbarrier;
 * mode 1: plain st.shared::cluster + cluster barrier. Cycles from the start
 * of the pushes to the end of the wait, per block. */
__global__ void __launch_bounds__(128)
    exchange_kernel(int mode, int slice, unsigned long long *cycles)
{
    extern __shared__ __align__(16) float buf[];
    __shared__ __align__(8) unsigned long long bar;
    const unsigned cl = cluster_size(), rank = cluster_rank();
    const unsigned b = smem_u32(&bar);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        mbar_expect_tx(b, cl * slice * 4u);
    }
    cluster_sync(); /* every barrier initialised before anyone pushes */
    const long long t0 = clock64();
    const unsigned mine = smem_u32(buf + rank * slice);
    for (int i = 4 * threadIdx.x; i < slice; i += 4 * blockDim.x) {
        const float4 v = make_float4(rank, i, 1.0f, 2.0f);
        for (unsigned p = 0; p < cl; p++) {
            const unsigned dst = peer(mine + 4u * i, p);
            if (mode == 0)
                push16(dst, v, peer(b, p));
            else
                asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(dst),
                             "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                             : "memory");
        }
    }
    if (mode == 0)
        mbar_wait(b, 0);
    else
        cluster_sync();
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0)
        cycles[blockIdx.x] = (unsigned long long)(t1 - t0);
    if (mode == 0)
        cluster_sync(); /* nobody exits while a peer may still push into it */
}

/* Ping-pong between ranks 0 and 1: rank 0 pushes 16 bytes into rank 1 and
 * waits for rank 1's push back; `iters` round trips. */
__global__ void __launch_bounds__(32) pingpong_kernel(int iters, unsigned long long *cycles)
{
    __shared__ __align__(16) float slot[4];
    __shared__ __align__(8) unsigned long long bar;
    const unsigned rank = cluster_rank();
    const unsigned b = smem_u32(&bar);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
    }
    cluster_sync();
    if (threadIdx.x == 0 && rank < 2) {
        const unsigned other = rank ^ 1u;
        const unsigned dst = peer(smem_u32(slot), other), rb = peer(b, other);
        const long long t0 = clock64();
        for (int i = 0; i < iters; i++) {
            const unsigned parity = (unsigned)i & 1u;
            if (rank == 0) {
                mbar_expect_tx(b, 16);
                push16(dst, make_float4(i, 0, 0, 0), rb);
                mbar_wait(b, parity);
            } else {
                mbar_expect_tx(b, 16);
                mbar_wait(b, parity);
                push16(dst, make_float4(i, 0, 0, 0), rb);
            }
        }
        const long long t1 = clock64();
        if (rank == 0)
            cycles[0] = (unsigned long long)(t1 - t0);
    }
    cluster_sync();
}

static cudaLaunchConfig_t cluster_cfg(cudaLaunchAttribute *attr, unsigned cl, unsigned blocks,
                                      unsigned threads, size_t smem)
{
    cudaLaunchConfig_t cfg = {};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cl;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

static int max_clusters(const void *k, unsigned cl, unsigned threads, size_t smem)
{
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = cluster_cfg(attr, cl, cl, threads, smem);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, k, &cfg) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return n;
}

static void run_dsmem()
{
    printf("\n## Cluster exchange (one layer: every block pushes its slice to every block)\n\n");
    CK(cudaFuncSetAttribute(exchange_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CK(cudaFuncSetAttribute(pingpong_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CK(cudaFuncSetAttribute(exchange_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            200 * 1024));
    printf("Most co-resident clusters of 128-thread blocks (cudaOccupancyMaxActiveClusters):\n\n");
    printf("| cluster | 32 KiB / block | 100 KiB / block | 150 KiB / block | 200 KiB / block |\n");
    printf("|---|---|---|---|---|\n");
    for (unsigned cl : {8u, 16u})
        printf("| %u | %d | %d | %d | %d |\n", cl,
               max_clusters((const void *)exchange_kernel, cl, 128, 32 * 1024),
               max_clusters((const void *)exchange_kernel, cl, 128, 100 * 1024),
               max_clusters((const void *)exchange_kernel, cl, 128, 150 * 1024),
               max_clusters((const void *)exchange_kernel, cl, 128, 200 * 1024));

    printf("\nCycles from the first push to the complete buffer, median over blocks and 20 "
           "launches (16 clusters):\n\n");
    printf("| cluster | slice (floats per block) | st.async + mbarrier | st.shared::cluster + "
           "barrier.cluster |\n|---|---|---|---|\n");
    unsigned long long *cyc;
    CK(cudaMalloc(&cyc, 512 * sizeof *cyc));
    for (unsigned cl : {8u, 16u}) {
        for (int slice : {512, 2048}) { /* 16 rows x 32 columns; 64 x 32 */
            double med[2];
            for (int mode = 0; mode < 2; mode++) {
                std::vector<double> v;
                const unsigned blocks = 16 * cl;
                for (int rep = 0; rep < 20; rep++) {
                    cudaLaunchAttribute attr[1];
                    cudaLaunchConfig_t cfg =
                        cluster_cfg(attr, cl, blocks, 128, (size_t)cl * slice * sizeof(float));
                    CK(cudaLaunchKernelEx(&cfg, exchange_kernel, mode, slice, cyc));
                    CK(cudaDeviceSynchronize());
                    std::vector<unsigned long long> h(blocks);
                    CK(cudaMemcpy(h.data(), cyc, blocks * sizeof *cyc, cudaMemcpyDeviceToHost));
                    for (unsigned b = 0; b < blocks; b++)
                        v.push_back((double)h[b]);
                }
                med[mode] = median(v);
            }
            printf("| %u | %d | %.0f | %.0f |\n", cl, slice, med[0], med[1]);
        }
    }
    printf("\nOne-way push + mbarrier wait between two blocks of a cluster (ping-pong, 10,000 "
           "round trips):\n\n| cluster | cycles one way |\n|---|---|\n");
    for (unsigned cl : {8u, 16u}) {
        cudaLaunchAttribute attr[1];
        cudaLaunchConfig_t cfg = cluster_cfg(attr, cl, cl, 32, 0);
        CK(cudaLaunchKernelEx(&cfg, pingpong_kernel, 10000, cyc));
        CK(cudaDeviceSynchronize());
        unsigned long long h;
        CK(cudaMemcpy(&h, cyc, sizeof h, cudaMemcpyDeviceToHost));
        printf("| %u | %.0f |\n", cl, h / 20000.0);
    }
    CK(cudaFree(cyc));
}

/* ----------------------------------------------------------------- flags -- */

/* Blocks 0 and 1 (on different SMs: each takes most of an SM's shared
 * memory) bounce a counter through two flags. */
__global__ void pingflag_kernel(unsigned *flags, int iters, unsigned long long *out)
{
    extern __shared__ float pad[];
    if (threadIdx.x != 0)
        return;
    pad[0] = 0.0f;
    const unsigned b = blockIdx.x;
    const uint64_t t0 = gtimer();
    const long long c0 = clock64();
    for (int i = 1; i <= iters; i++) {
        if (b == 0) {
            st_release(&flags[0], i);
            while (ld_acquire(&flags[32]) != (unsigned)i) {
            }
        } else {
            while (ld_acquire(&flags[0]) != (unsigned)i) {
            }
            st_release(&flags[32], i);
        }
    }
    if (b == 0) {
        out[0] = gtimer() - t0;
        out[1] = (unsigned long long)(clock64() - c0);
    }
}

/* A grid barrier of per-block flags: block j's thread 0 publishes round i in
 * flags[j]; every block's first `gridDim.x` threads each poll one flag. */
__global__ void gridbar_kernel(unsigned *flags, int rounds, unsigned long long *out)
{
    extern __shared__ float pad[]; /* only to keep one block per SM */
    if (threadIdx.x == 0)
        pad[0] = 0.0f;
    const uint64_t t0 = gtimer();
    for (int i = 1; i <= rounds; i++) {
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            st_release(&flags[blockIdx.x * 32], i);
        }
        for (unsigned j = threadIdx.x; j < gridDim.x; j += blockDim.x)
            while ((int)(ld_acquire(&flags[j * 32]) - (unsigned)i) < 0) {
            }
        __syncthreads();
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        out[0] = gtimer() - t0;
}

static void run_flags()
{
    printf("\n## Grid flags (release store, acquire poll; no atomics)\n\n");
    unsigned *flags;
    unsigned long long *out, h[2];
    CK(cudaMalloc(&flags, 132 * 32 * 4 * 8));
    CK(cudaMalloc(&out, 2 * sizeof *out));
    const size_t big = 150 * 1024;
    CK(cudaFuncSetAttribute(pingflag_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CK(cudaFuncSetAttribute(gridbar_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    const int iters = 20000;
    CK(cudaMemset(flags, 0, 64 * 4));
    pingflag_kernel<<<2, 32, big>>>(flags, iters, out);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    printf("| measurement | value |\n|---|---|\n");
    printf("| flag round trip between two SMs | %.0f ns (%.0f SM cycles) |\n", (double)h[0] / iters,
           (double)h[1] / iters);
    for (int blocks : {16, 64, 128, g_prop.multiProcessorCount}) {
        const int rounds = 2000;
        CK(cudaMemset(flags, 0, 132 * 32 * 4 * 8));
        gridbar_kernel<<<blocks, 128, big>>>(flags, rounds, out);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h, out, sizeof h[0], cudaMemcpyDeviceToHost));
        printf("| flag grid barrier, %d blocks (one per SM) | %.0f ns |\n", blocks,
               (double)h[0] / rounds);
    }
    CK(cudaFree(flags));
    CK(cudaFree(out));
}

/* ----------------------------------------------------------------- clock -- */

__global__ void __launch_bounds__(1024) ffma_kernel(int iters, float *sink, unsigned long long *out)
{
    float a[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        a[i] = threadIdx.x * 1e-3f + i;
    const float m = 0.999999f, c = 1e-7f;
    const uint64_t t0 = gtimer();
    const long long c0 = clock64();
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            a[i] = fmaf(a[i], m, c);
    const long long c1 = clock64();
    const uint64_t t1 = gtimer();
    float s = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
        s += a[i];
    if (s == 12345.0f)
        sink[0] = s;
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = t1 - t0;
        out[2 * blockIdx.x + 1] = (unsigned long long)(c1 - c0);
    }
}

static void run_clock()
{
    printf("\n## SM clock under a sustained FFMA load\n\n");
    const int blocks = g_prop.multiProcessorCount, iters = 4 << 20;
    float *sink;
    unsigned long long *out;
    CK(cudaMalloc(&sink, 4));
    CK(cudaMalloc(&out, 2 * blocks * sizeof *out));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("| run | kernel ms | SM clock (clock64 / globaltimer) | FFMA TFLOP/s | FFMA warp-instr. "
           "/ SM "
           "clock |\n|---|---|---|---|---|\n");
    for (int rep = 0; rep < 3; rep++) {
        CK(cudaEventRecord(e0));
        ffma_kernel<<<blocks, 1024>>>(iters, sink, out);
        CK(cudaEventRecord(e1));
        CK(cudaGetLastError());
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        std::vector<unsigned long long> h(2 * blocks);
        CK(cudaMemcpy(h.data(), out, h.size() * sizeof h[0], cudaMemcpyDeviceToHost));
        std::vector<double> mhz, cyc;
        for (int b = 0; b < blocks; b++) {
            mhz.push_back(1e3 * (double)h[2 * b + 1] / (double)h[2 * b]);
            cyc.push_back((double)h[2 * b + 1]);
        }
        const double ffma = 8.0 * iters * 1024.0 * blocks;
        printf("| %d | %.1f | %.0f MHz | %.1f | %.2f |\n", rep, ms, median(mhz),
               2.0 * ffma / (ms * 1e-3) / 1e12, 8.0 * iters * 32.0 / median(cyc));
    }
    CK(cudaFree(sink));
    CK(cudaFree(out));
}

/* ----------------------------------------------------------------- stage -- */

/* One block of 128 threads per SM stages `pieces` 16-byte pieces of src
 * into shared memory in GROUPS commit groups of equal size, as the fused
 * kernels stage x and their weight slices: layout 0 contiguous (piece p
 * at src[p]), layout 1 a column slice (8 pieces, 128 bytes, of every
 * 1 KiB row: the forward's W1 slice). Every block reads the same bytes
 * (the weights are shared by every cluster). out[2b], out[2b + 1]: clocks
 * from the block's first instruction to its first group and to all of
 * them landed for the whole block (wait_group and a block barrier). */
template <int GROUPS>
__global__ void __launch_bounds__(128, 1)
    stage_kernel(const float4 *src, int pieces, int layout, unsigned long long *out)
{
    extern __shared__ float4 sbuf[];
    const long long c0 = clock64();
    const int per = pieces / GROUPS;
#pragma unroll
    for (int g = 0; g < GROUPS; g++) {
        for (int p = g * per + (int)threadIdx.x; p < (g + 1) * per; p += 128) {
            const float4 *from = src + (layout ? (size_t)(p >> 3) * 64 + (p & 7) : (size_t)p);
            v2async::copy16(reinterpret_cast<float *>(sbuf + p), reinterpret_cast<const float *>(from),
                            16);
        }
        v2async::commit();
    }
    v2async::wait<GROUPS - 1>();
    __syncthreads();
    const long long c1 = clock64();
    v2async::wait<0>();
    __syncthreads();
    const long long c2 = clock64();
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = (unsigned long long)(c1 - c0);
        out[2 * blockIdx.x + 1] = (unsigned long long)(c2 - c0);
    }
}

/* The same slices by the bulk tensor copy, as cuda-v3's fused forward
 * stages its weight slices: thread 0 issues BOXES copies of a box of 32
 * columns x 256 rows (32 KiB) of a 256 x 256 matrix (block b takes columns
 * 32 (b % 8).., box j the next slice), all on one mbarrier; every thread
 * waits for it, after a block barrier (an mbarrier may not be waited on
 * before its initialisation). out[2b], out[2b + 1]: clocks from the
 * block's first instruction to the copies issued (and the barrier) and to
 * all of them landed. */
__global__ void __launch_bounds__(128, 1)
    stage_tma_kernel(const __grid_constant__ CUtensorMap map, int boxes, unsigned long long *out)
{
    extern __shared__ __align__(128) float tbuf[];
    __shared__ __align__(8) unsigned long long bar;
    const long long c0 = clock64();
    const unsigned b = smem_u32(&bar);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        fence_proxy_async();
        mbar_expect_tx(b, (unsigned)(boxes * 32 * 256 * 4));
        for (int j = 0; j < boxes; j++)
            tma_load_2d(smem_u32(tbuf + j * 32 * 256), &map, 32 * (int)((blockIdx.x + j) % 8), 0,
                        b);
    }
    __syncthreads(); /* the mbarrier is initialised before anyone waits on it */
    const long long c1 = clock64();
    mbar_wait_cta(b, 0);
    const long long c2 = clock64();
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = (unsigned long long)(c1 - c0);
        out[2 * blockIdx.x + 1] = (unsigned long long)(c2 - c0);
    }
}

/* Code run for the first time: one pass through ICACHE_STEPS distinct
 * straight-line steps (each a dependent multiply-add with its own
 * constant: one SASS instruction of 16 bytes), twice. The first pass fetches the code; the second runs it from the
 * instruction caches, if it fits. out[3b..]: clocks of pass 1, pass 2 and
 * the value (so that the adds are kept). */
constexpr int ICACHE_STEPS = 2048;
__global__ void __launch_bounds__(32, 1) icache_kernel(unsigned seed, unsigned long long *out)
{
    const unsigned m = seed | 1u; /* known at run time only, so the steps stay steps */
    unsigned v = seed + threadIdx.x;
    long long t0 = clock64(), t1 = 0, t2;
#pragma unroll 1
    for (int pass = 0; pass < 2; pass++) {
#pragma unroll
        for (int i = 0; i < ICACHE_STEPS; i++)
            v = v * m + (unsigned)(i + 1);
        t2 = clock64();
        if (pass == 0)
            t1 = t2;
    }
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = (unsigned long long)(t1 - t0);
        out[3 * blockIdx.x + 1] = (unsigned long long)(t2 - t1);
        out[3 * blockIdx.x + 2] = v;
    }
}

/* Runs `launch` 21 times (each a kernel writing two clock counts per block
 * into out: to the first group and to the last) and gives, in *first and
 * *all, the median over launches 2..21 of the median over blocks; the
 * first launch reads the source from device memory, the rest from L2. */
template <class Launch>
static void staging_clocks(Launch launch, int blocks, unsigned long long *out, double *first,
                           double *all)
{
    std::vector<double> f1, a1;
    for (int rep = 0; rep < 21; rep++) {
        launch();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        if (rep == 0)
            continue;
        std::vector<unsigned long long> h(2 * blocks);
        CK(cudaMemcpy(h.data(), out, h.size() * sizeof h[0], cudaMemcpyDeviceToHost));
        std::vector<double> f, a;
        for (int b = 0; b < blocks; b++)
            f.push_back((double)h[2 * b]), a.push_back((double)h[2 * b + 1]);
        f1.push_back(median(f));
        a1.push_back(median(a));
    }
    *first = median(f1);
    *all = median(a1);
}

/* The bulk-tensor-copy rows of the staging table (stage_tma_kernel), over
 * the first 256 KiB of src as a 256 x 256 matrix. */
static void stage_tma_table(float4 *src, unsigned long long *out, size_t smem, double mhz)
{
    const v3tmap::encoder_t encode = v3tmap::find_encoder();
    if (!encode) {
        printf("\n(no cuTensorMapEncodeTiled in this driver: the bulk tensor rows are skipped)\n");
        return;
    }
    CUtensorMap map;
    if (!v3tmap::encode_2d(encode, &map, reinterpret_cast<const float *>(src), 256, 256, 32, 256,
                           CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B)) {
        printf("\n(the tensor map was refused: the bulk tensor rows are skipped)\n");
        return;
    }
    CK(cudaFuncSetAttribute(stage_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    printf("\nThe same slices by the bulk tensor copy (thread 0 issues one box of 32 columns x 256 "
           "rows, 32 KiB, a slice; the second column the clocks to the copies issued):\n\n");
    printf("| KiB | boxes | blocks | issued | all landed | KiB/µs |\n|---|---|---|---|---|---|\n");
    for (int boxes : {1, 2})
        for (int blocks : {32, 120}) {
            double f, a;
            staging_clocks([&] { stage_tma_kernel<<<blocks, 128, smem>>>(map, boxes, out); },
                           blocks, out, &f, &a);
            printf("| %d | %d | %d | %.0f (%.2f µs) | %.0f (%.2f µs) | %.1f |\n", 32 * boxes, boxes,
                   blocks, f, f / mhz, a, a / mhz, 32 * boxes / (a / mhz));
        }
}

static void run_stage()
{
    printf("\n## Staging into shared memory by cp.async (one block of 128 threads per SM)\n\n");
    const int max_pieces = 72 * 1024 / 16, rows = max_pieces / 8;
    const size_t src_bytes = (size_t)rows * 1024; /* room for the slice layout */
    const size_t smem = 200 * 1024;               /* one block per SM, as the fused kernels */
    float4 *src;
    unsigned long long *out;
    CK(cudaMalloc(&src, src_bytes));
    CK(cudaMemset(src, 0x3c, src_bytes));
    CK(cudaMalloc(&out, 3 * 1024 * sizeof *out));
    CK(cudaFuncSetAttribute(stage_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(stage_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int khz = 0;
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0)); /* the peak: the SM runs at it under load (clock) */
    const double mhz = khz / 1e3;
    printf("Median over blocks of the median over 20 launches (the source is L2-resident after "
           "the first), SM clocks and µs at %.0f MHz; the last column the rate to the last group.\n\n",
           mhz);
    printf("| KiB | layout | groups | blocks | copies a thread | first group | all groups | KiB/µs |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int kib : {8, 16, 40, 72})
        for (int layout : {0, 1})
            for (int groups : {1, 4})
                for (int blocks : {32, 120}) {
                    const int pieces = kib * 1024 / 16;
                    double f, a;
                    staging_clocks(
                        [&] {
                            if (groups == 1)
                                stage_kernel<1><<<blocks, 128, smem>>>(src, pieces, layout, out);
                            else
                                stage_kernel<4><<<blocks, 128, smem>>>(src, pieces, layout, out);
                        },
                        blocks, out, &f, &a);
                    printf("| %d | %s | %d | %d | %d | %.0f (%.2f µs) | %.0f (%.2f µs) | %.1f |\n",
                           kib, layout ? "128 B of each 1 KiB row" : "contiguous", groups, blocks,
                           pieces / 128, f, f / mhz, a, a / mhz, kib / (a / mhz));
                }

    stage_tma_table(src, out, smem, mhz);

    printf("\n## Code run for the first time (one warp per SM, %d straight-line steps, twice)\n\n",
           ICACHE_STEPS);
    printf("| blocks | pass 1 clocks | pass 2 clocks | pass 1 - pass 2 per step |\n"
           "|---|---|---|---|\n");
    for (int blocks : {1, 32, 120}) {
        std::vector<double> p1, p2;
        for (int rep = 0; rep < 5; rep++) {
            icache_kernel<<<blocks, 32>>>(rep, out);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            std::vector<unsigned long long> h(3 * blocks);
            CK(cudaMemcpy(h.data(), out, h.size() * sizeof h[0], cudaMemcpyDeviceToHost));
            for (int b = 0; b < blocks; b++)
                p1.push_back((double)h[3 * b]), p2.push_back((double)h[3 * b + 1]);
        }
        const double a = median(p1), b = median(p2);
        printf("| %d | %.0f | %.0f | %.2f |\n", blocks, a, b, (a - b) / ICACHE_STEPS);
    }
    printf("\n(Pass 2 runs from the instruction caches where the code fits them: the difference "
           "is the fetch of code not yet run; cuobjdump -sass gives the code's size.)\n");
    CK(cudaFree(src));
    CK(cudaFree(out));
}

/* ----------------------------------------------------------------- graph -- */

/* Writes, for each block, 1 + its cluster size; with `barrier`, first waits
 * at a flag grid barrier (which needs every block resident). */
__global__ void probe_kernel(unsigned *flags, unsigned epoch, int barrier, unsigned *out)
{
    if (barrier) {
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            st_release(&flags[blockIdx.x], epoch);
        }
        for (unsigned j = threadIdx.x; j < gridDim.x; j += blockDim.x)
            while (ld_acquire(&flags[j]) != epoch) {
            }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = 1 + cluster_size();
}

struct launch_kind {
    const char *name;
    bool cooperative, cluster;
};

static cudaError_t probe_launch(launch_kind k, unsigned blocks, unsigned *flags, unsigned epoch,
                                int barrier, unsigned *out, cudaStream_t s)
{
    cudaLaunchAttribute attr[2];
    int n = 0;
    if (k.cluster) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = 8;
        attr[n].val.clusterDim.y = 1;
        attr[n].val.clusterDim.z = 1;
        n++;
    }
    if (k.cooperative) {
        attr[n].id = cudaLaunchAttributeCooperative;
        attr[n].val.cooperative = 1;
        n++;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(128);
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = n;
    return cudaLaunchKernelEx(&cfg, probe_kernel, flags, epoch, barrier, out);
}

static bool probe_ok(const unsigned *out, unsigned blocks, unsigned want)
{
    std::vector<unsigned> h(blocks);
    if (cudaMemcpy(h.data(), out, blocks * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
        return false;
    for (unsigned b = 0; b < blocks; b++)
        if (h[b] != want)
            return false;
    return true;
}

static void run_graph()
{
    printf("\n## CUDA graphs: capture and replay of cooperative and cluster launches\n\n");
    const launch_kind kinds[] = {{"plain", false, false},
                                 {"cooperative", true, false},
                                 {"cluster (8)", false, true},
                                 {"cooperative + cluster (8)", true, true}};
    const unsigned blocks = 128;
    unsigned *flags, *out;
    CK(cudaMalloc(&flags, blocks * 4));
    CK(cudaMalloc(&out, blocks * 4));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("| launch (128 blocks, flag grid barrier inside) | eager | captured | instantiated | "
           "replayed, right result | node keeps cooperative | replay µs | memset + replay µs "
           "| memset + replay with barrier µs |\n|---|---|---|---|---|---|---|---|---|\n");
    for (const launch_kind &k : kinds) {
        const unsigned want = 1 + (k.cluster ? 8 : 1);
        CK(cudaMemset(flags, 0, blocks * 4));
        CK(cudaMemset(out, 0, blocks * 4));
        cudaError_t e = probe_launch(k, blocks, flags, 1, 1, out, s);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(s);
        const bool eager = e == cudaSuccess && probe_ok(out, blocks, want);
        const char *eager_s = eager ? "ok" : cudaGetErrorString(e);
        cudaGetLastError();

        /* Three graphs: m = 0 the kernel alone (no barrier: its replays
         * repeat the epoch), m = 1 a memset of the flags then the kernel with
         * its barrier (checked), m = 2 the memset then the kernel without
         * the barrier (the memset node's price against m = 0). */
        const char *cap = "no", *inst = "no", *rep = "no", *coop = "—";
        double us[3] = {0, 0, 0};
        cudaGraph_t g[3] = {nullptr, nullptr, nullptr};
        cudaGraphExec_t x[3] = {nullptr, nullptr, nullptr};
        bool captured = true;
        for (int m = 0; m < 3 && captured; m++) {
            if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
                captured = false;
                break;
            }
            if (m >= 1)
                cudaMemsetAsync(flags, 0, blocks * 4, s);
            const cudaError_t le = probe_launch(k, blocks, flags, 2, m == 1, out, s);
            const cudaError_t ce = cudaStreamEndCapture(s, &g[m]);
            if (le != cudaSuccess || ce != cudaSuccess) {
                captured = false;
                cap = cudaGetErrorString(le != cudaSuccess ? le : ce);
                cudaGetLastError();
            }
        }
        if (captured) {
            cap = "ok";
            bool instantiated = true;
            for (int m = 0; m < 3; m++)
                if (cudaGraphInstantiate(&x[m], g[m], 0) != cudaSuccess) {
                    instantiated = false;
                    cudaGetLastError();
                }
            if (instantiated) {
                inst = "ok";
                CK(cudaMemset(out, 0, blocks * 4));
                cudaError_t re = cudaGraphLaunch(x[1], s);
                if (re == cudaSuccess)
                    re = cudaStreamSynchronize(s);
                rep = re == cudaSuccess && probe_ok(out, blocks, want) ? "yes"
                                                                       : cudaGetErrorString(re);
                cudaGetLastError();
                /* Is the kernel node still cooperative? */
                size_t nn = 0;
                cudaGraphGetNodes(g[1], nullptr, &nn);
                std::vector<cudaGraphNode_t> nodes(nn);
                cudaGraphGetNodes(g[1], nodes.data(), &nn);
                for (cudaGraphNode_t node : nodes) {
                    cudaGraphNodeType t;
                    cudaGraphNodeGetType(node, &t);
                    if (t != cudaGraphNodeTypeKernel)
                        continue;
                    cudaLaunchAttributeValue v;
                    if (cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeCooperative, &v) ==
                        cudaSuccess)
                        coop = v.cooperative ? "yes" : "no";
                    else
                        coop = "unknown";
                    cudaGetLastError();
                }
                /* Replay costs: 200 replays each, after 20 warm-ups. */
                for (int m = 0; m < 3; m++) {
                    std::vector<double> t;
                    for (int i = 0; i < 220; i++) {
                        CK(cudaEventRecord(e0, s));
                        CK(cudaGraphLaunch(x[m], s));
                        CK(cudaEventRecord(e1, s));
                        CK(cudaEventSynchronize(e1));
                        float ms;
                        CK(cudaEventElapsedTime(&ms, e0, e1));
                        if (i >= 20)
                            t.push_back(ms * 1e3);
                    }
                    us[m] = median(t);
                }
            }
        }
        printf("| %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f |\n", k.name, eager_s, cap, inst,
               rep, coop, us[0], us[2], us[1]);
        for (int m = 0; m < 3; m++) {
            if (x[m])
                cudaGraphExecDestroy(x[m]);
            if (g[m])
                cudaGraphDestroy(g[m]);
        }
    }
    CK(cudaStreamDestroy(s));
    CK(cudaFree(flags));
    CK(cudaFree(out));
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    if (!strcmp(what, "--help") || !strcmp(what, "-h")) {
        printf("usage: auxtrunk-floors [smem|smempat|dsmem|flags|clock|graph|wgmma|stage|all]\n"
               "Measures the hardware costs behind docs/floors-h200.md on the current GPU\n"
               "and prints them as Markdown tables.\n");
        return 0;
    }
    CK(cudaGetDeviceProperties(&g_prop, 0));
    printf("# auxtrunk-floors on %s (%d SMs, cc %d.%d, %d KiB shared memory per SM)\n", g_prop.name,
           g_prop.multiProcessorCount, g_prop.major, g_prop.minor,
           (int)(g_prop.sharedMemPerMultiprocessor / 1024));
    const bool all = !strcmp(what, "all");
    bool any = false;
    if (all || !strcmp(what, "clock"))
        run_clock(), any = true;
    if (all || !strcmp(what, "smem"))
        run_smem(), any = true;
    if (all || !strcmp(what, "smempat"))
        run_smempat(), any = true;
    if (all || !strcmp(what, "dsmem"))
        run_dsmem(), any = true;
    if (all || !strcmp(what, "flags"))
        run_flags(), any = true;
    if (all || !strcmp(what, "graph"))
        run_graph(), any = true;
    if (all || !strcmp(what, "wgmma"))
        floors_wgmma(g_prop), any = true;
    if (all || !strcmp(what, "stage"))
        run_stage(), any = true;
    if (!any) {
        fprintf(stderr, "auxtrunk-floors: unknown measurement '%s' (try --help)\n", what);
        return 2;
    }
    return 0;
}
