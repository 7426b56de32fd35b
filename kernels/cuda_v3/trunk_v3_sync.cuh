/*
 * trunk_v3_sync.cuh — the sm_90 instructions cuda-v3 communicates with, as
 * small device functions: cluster ranks and barriers, distributed shared
 * memory addresses (mapa), mbarriers with transaction counts, st.async
 * pushes completing on a peer's mbarrier, release/acquire flags in global
 * memory, and the bulk tensor load (TMA) of a box into shared memory. Used
 * by trunk_v3.cu, trunk_v3_fast_wgmma.cu and the floors program that
 * measures their costs (tests/cuda/floors), so all run the same
 * instructions. None of them is an atomic read-modify-write on memory.
 */
#ifndef AUXTRUNK_TRUNK_V3_SYNC_CUH
#define AUXTRUNK_TRUNK_V3_SYNC_CUH

#include <stdint.h>

#include <cuda.h> /* CUtensorMap */
#include <cuda_runtime.h>

namespace v3sync {

/* Programmatic dependent launch: a launch that allows it may start before
 * the kernel ahead of it on the stream ends, once that kernel's blocks have
 * all run launch_dependents (or ended); grid_dependency_wait returns when
 * the kernels ahead have ended and their memory is visible. Without the
 * launch attribute both are no-ops. */
__device__ __forceinline__ void grid_dependency_wait()
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

__device__ __forceinline__ void launch_dependents()
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned cluster_size()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}

/* The same shared-memory address in block `rank` of the cluster. */
__device__ __forceinline__ unsigned peer(unsigned addr, unsigned rank)
{
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

/* Cluster barrier halves. A relaxed arrive only says "this block has got
 * this far" (with fence.mbarrier_init before it: "my mbarriers are
 * initialised"); a release arrive also publishes this block's writes; the
 * wait acquires. */
__device__ __forceinline__ void cluster_arrive_relaxed()
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive()
{
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* An mbarrier of `count` arrivals, visible to the cluster once a cluster
 * barrier follows. */
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* One arrival that also expects `bytes` more of st.async data this phase. */
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

/* One arrival, a release at block scope: a thread that sees the phase
 * complete (mbar_wait_cta, an acquire) sees what the arriving thread wrote
 * before. */
__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/* Waits until the phase of the given parity of a local mbarrier completes;
 * data pushed into this block for it is then visible. */
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "WAIT: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT;\n"
                 "}" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* The same for an mbarrier that only this block's own copies complete (a
 * TMA load into this block): acquire at block scope, which does not
 * invalidate the L1 as the cluster-scope wait does. */
__device__ __forceinline__ void mbar_wait_cta(unsigned bar, unsigned parity)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "WAIT: mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT;\n"
                 "}" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* 16 bytes into a peer's shared memory (dst from peer()), counted on the
 * peer's mbarrier (bar from peer()). */
__device__ __forceinline__ void push16(unsigned dst, float4 v, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], "
                 "{%1, %2, %3, %4}, [%5];" ::"r"(dst),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
                 : "memory");
}

/* The same for 8 bytes. */
__device__ __forceinline__ void push8(unsigned dst, float2 v, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], "
                 "{%1, %2}, [%3];" ::"r"(dst),
                 "f"(v.x), "f"(v.y), "r"(bar)
                 : "memory");
}

/* A flag in global memory: release store by the writer, acquire load by
 * the reader (GPU scope). */
__device__ __forceinline__ void st_release(unsigned *p, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Orders this thread's earlier shared-memory accesses (an mbarrier's
 * initialisation) before its later bulk copies, which run in the async
 * proxy. */
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* One box of the tensor map at coordinates (c0, c1) into shared memory at
 * dst, completing on the mbarrier bar (whose expected bytes the caller set). */
__device__ __forceinline__ void tma_load_2d(unsigned dst, const CUtensorMap *map, int c0, int c1,
                                            unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* Asks for the tensor map's descriptor ahead of its first copy, so that
 * the copy engine holds it when the copies are issued. */
__device__ __forceinline__ void tma_prefetch(const CUtensorMap *map)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

/* Asks for the line holding p into L2 (a hint: it reads nothing into the
 * thread and orders nothing). */
__device__ __forceinline__ void prefetch_l2(const void *p)
{
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p) : "memory");
}

} /* namespace v3sync */

#endif /* AUXTRUNK_TRUNK_V3_SYNC_CUH */
