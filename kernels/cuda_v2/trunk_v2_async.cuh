/*
 * trunk_v2_async.cuh — the asynchronous global-to-shared copies of the exact
 * v2 GEMM tile (trunk_v2.cu, gemm_tile_async): 16-byte cp.async.cg copies
 * with zero-fill, commit groups and waits. Included by trunk_v2.cu only.
 *
 * Copies only move data; they never take part in arithmetic, so they cannot
 * change a result. Before sm_80 (no cp.async) the copy is a plain load and
 * store, and commit/wait do nothing: the barrier that follows every wait in
 * the tile makes the stores visible all the same.
 */
#ifndef AUXTRUNK_TRUNK_V2_ASYNC_CUH
#define AUXTRUNK_TRUNK_V2_ASYNC_CUH

#include <cuda_runtime.h>

namespace v2async {

/* Copies the first `bytes` (0, 4, 8, 12 or 16) of the 16 bytes at src to
 * dst and zero-fills the rest. dst (shared) and src (global) are 16-byte
 * aligned; with bytes == 0 nothing is read, but src must still be a valid
 * global address (pass the operand's base). */
__device__ __forceinline__ void copy16(float *dst, const float *src, int bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(bytes)
                 : "memory");
#else
#pragma unroll
    for (int q = 0; q < 4; q++)
        dst[q] = 4 * q < bytes ? src[q] : 0.0f;
#endif
}

/* Closes the group of copies this thread issued since the last commit. */
__device__ __forceinline__ void commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

} /* namespace v2async */

#endif /* AUXTRUNK_TRUNK_V2_ASYNC_CUH */
