/*
 * trunk_v3_wgmma.cuh — the sm_90a tensor-core instructions of cuda-v3's fast
 * mode, as small device functions: the shared-memory matrix descriptor of a
 * K-major operand in the 128-byte swizzle, the wgmma fence, commit and wait,
 * the TF32 wgmma m64nNk8 (N = 64, 128, 256) with both operands in shared
 * memory and fp32 accumulators, and the bulk tensor store (the load, an
 * sm_90 instruction, is trunk_v3_sync.cuh's, re-exported here). Used by
 * trunk_v3_fast_wgmma.cu and by the floors program that measures their
 * rate (tests/cuda/floors/floors_wgmma.cu), so both run the same
 * instructions. Defined only where the compilation
 * targets sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); callers guard their uses the
 * same way.
 */
#ifndef AUXTRUNK_TRUNK_V3_WGMMA_CUH
#define AUXTRUNK_TRUNK_V3_WGMMA_CUH

#include <stdint.h>

#include <cuda.h> /* CUtensorMap */
#include <cuda_runtime.h>

#include "trunk_v3_sync.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace v3wgmma {

/* A shared-memory matrix descriptor for a K-major operand in 128-byte
 * swizzle: rows of 128 bytes, 8-row atoms 1024 bytes apart (stride byte
 * offset), leading byte offset unused in this mode (1 by convention). The
 * address may step by 32 bytes inside a row (the next k8 of the slab): the
 * hardware swizzles the address it forms, the atom base stays 1024-aligned. */
__device__ __forceinline__ uint64_t desc_sw128(unsigned saddr)
{
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) |
           ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
/* Waits until at most one committed group of this warpgroup is pending. */
__device__ __forceinline__ void wgmma_wait_one()
{
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}

/* The bulk tensor load is an sm_90 instruction (trunk_v3_sync.cuh). */
using v3sync::tma_load_2d;

/* The box at coordinates (c0, c1) of a tensor map from shared memory at src
 * (its layout, swizzle included, as tma_load_2d writes it), in the calling
 * thread's current bulk group; the part of the box outside the tensor is
 * not written. */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, int c0, int c1, unsigned src)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
            reinterpret_cast<uint64_t>(map)),
        "r"(c0), "r"(c1), "r"(src)
        : "memory");
}

/* The calling thread's bulk stores issued so far form one group. */
__device__ __forceinline__ void bulk_commit()
{
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* Until every bulk group of the calling thread has read its shared memory
 * (which may then be overwritten), or has been written completely. */
__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

#define V3W_R8(i)                                                                               \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])

/* d[32] += A (64 x 8, descriptor) · B (8 x 64, descriptor), fp32 accumulate. */
__device__ __forceinline__ void wgmma_m64n64k8(float (&d)[32], uint64_t da, uint64_t db)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1;\n"
                 "}"
                 : V3W_R8(0), V3W_R8(8), V3W_R8(16), V3W_R8(24)
                 : "l"(da), "l"(db), "r"(1)
                 : "memory");
}

/* d[64] += A (64 x 8, descriptor) · B (8 x 128, descriptor), fp32 accumulate. */
__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[64], uint64_t da, uint64_t db)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
                 "{"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1;\n"
                 "}"
                 : V3W_R8(0), V3W_R8(8), V3W_R8(16), V3W_R8(24), V3W_R8(32), V3W_R8(40), V3W_R8(48),
                   V3W_R8(56)
                 : "l"(da), "l"(db), "r"(1)
                 : "memory");
}

/* d[128] += A (64 x 8, descriptor) · B (8 x 256, descriptor), fp32 accumulate. */
__device__ __forceinline__ void wgmma_m64n256k8(float (&d)[128], uint64_t da, uint64_t db)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
                 "{"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "
                 "%110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "
                 "%125, %126, %127}, "
                 "%128, %129, p, 1, 1;\n"
                 "}"
                 : V3W_R8(0), V3W_R8(8), V3W_R8(16), V3W_R8(24), V3W_R8(32), V3W_R8(40), V3W_R8(48),
                   V3W_R8(56), V3W_R8(64), V3W_R8(72), V3W_R8(80), V3W_R8(88), V3W_R8(96),
                   V3W_R8(104), V3W_R8(112), V3W_R8(120)
                 : "l"(da), "l"(db), "r"(1)
                 : "memory");
}

#undef V3W_R8

} /* namespace v3wgmma */

#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

#endif /* AUXTRUNK_TRUNK_V3_WGMMA_CUH */
