/*
 * trunk_v2_pdl.cuh — programmatic dependent launch (sm_90) for the exact v2
 * launches (trunk_v2.cu). Included by trunk_v2.cu only.
 *
 * Within one forward or one backward call, every launch after the first may
 * be started while its predecessor (our own previous launch) is still
 * running: its blocks get resident and do work that does not depend on the
 * predecessor (issuing the copies of the weights, which no launch of ours
 * writes) and then wait for the predecessor to complete, with all of its
 * memory visible, before they read or write anything else. The first launch
 * of a call is always an ordinary launch, so whatever the caller queued
 * before it (an optimizer step writing the weights, say) has completed
 * before any block of the call runs.
 *
 * The rule for a kernel that may be launched with `pdl` set: call
 * `pdl_wait()` before touching memory that an earlier launch writes or
 * reads (reads of the parameters are the only exception), then
 * `pdl_trigger()`. Launched normally, both are no-ops. Nothing here changes
 * which arithmetic happens or its order: results are bit-identical with and
 * without it.
 */
#ifndef AUXTRUNK_TRUNK_V2_PDL_CUH
#define AUXTRUNK_TRUNK_V2_PDL_CUH

#include <cuda_runtime.h>
#include <utility>

namespace v2pdl {

/* Waits until the launch this one depends on has completed and its memory
 * operations are visible (griddepcontrol.wait; a no-op without a dependency). */
__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lets the next launch, if it was made with `pdl`, be scheduled once every
 * block of this one has called this or exited. */
__device__ __forceinline__ void pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Launches kernel k; with pdl, as a programmatic dependent of
 * the stream's previous launch. Stream capture records the dependency as a
 * programmatic graph edge. */
template <typename... P, typename... A>
cudaError_t launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool pdl,
                   A &&...args)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
}

} /* namespace v2pdl */

#endif /* AUXTRUNK_TRUNK_V2_PDL_CUH */
