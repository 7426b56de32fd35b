/*
 * cpb_isa.c — the register-tile kernels and ELUs of kernels/cpu_blocked
 * (cpb_isa.h), one per instruction set, picked at run time.
 *
 * The AVX2 and AVX-512 functions carry target attributes, so the build needs
 * a compiler that knows them, not a machine that has them; cpb_ops_for only
 * hands out a variant the running CPU supports (__builtin_cpu_supports, which
 * also checks that the OS saves the wider registers).
 *
 * Exactness: _mm256_fmadd_ps and _mm512_fmadd_ps round once, as fmaf does;
 * each accumulator register holds one chain per lane, and every chain sees
 * its depth steps in order, one fused multiply-add each. The ELU is the one
 * definition in abi/auxtrunk_canon.h, inlined into each variant and
 * vectorised by the compiler (lanes are independent elements; no
 * reassociation under -ffp-contract=off). The library is built with
 * -fno-trapping-math so that the compiler may evaluate both sides of the
 * ELU' select in every lane: that changes which exception flags an
 * operation may raise (the host adapter masks them all), never a value.
 */
#include "cpb_isa.h"

#include <math.h>
#include <stddef.h>

#include "auxtrunk_canon.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPB_X86 1
#endif

/* ------------------------------------------------------------------------- */
/* Shared bodies, instantiated per instruction set below                     */

static inline __attribute__((always_inline)) void elu_body(float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = auxtrunk_canon_elu(y[i]);
}

static inline __attribute__((always_inline)) void elu_grad_body(float *restrict d,
                                                                const float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = auxtrunk_canon_elu_grad(d[i], y[i]);
}

/* ------------------------------------------------------------------------- */
/* Scalar: 4 x 8, plain fmaf (any CPU)                                       */

#define S_MR 4
#define S_NR 8

static void tile_scalar(int32_t depth, const float *restrict a, const float *restrict b, size_t ldb,
                        const float *restrict init, float *restrict t, size_t ldc)
{
    float c[S_MR][S_NR];
    for (int i = 0; i < S_MR; i++)
        for (int j = 0; j < S_NR; j++)
            c[i][j] = init ? init[j] : 0.0f;
    for (int32_t r = 0; r < depth; r++, a += S_MR, b += ldb)
        for (int i = 0; i < S_MR; i++)
            for (int j = 0; j < S_NR; j++)
                c[i][j] = fmaf(a[i], b[j], c[i][j]);
    for (int i = 0; i < S_MR; i++)
        for (int j = 0; j < S_NR; j++)
            t[i * ldc + j] = c[i][j];
}

static void elu_scalar(float *y, size_t n) { elu_body(y, n); }
static void elu_grad_scalar(float *d, const float *y, size_t n) { elu_grad_body(d, y, n); }

static void transpose8_scalar(int32_t depth, const float *restrict src, size_t lds,
                              float *restrict dst, size_t ldd)
{
    for (int32_t r = 0; r < depth; r++)
        for (int i = 0; i < 8; i++)
            dst[(size_t)r * ldd + i] = src[(size_t)i * lds + r];
}

#ifdef CPB_X86
/* ------------------------------------------------------------------------- */
/* AVX2 + FMA: 6 x 16, 12 accumulators of 8 lanes                            */

#define A2_MR 6
#define A2_NR 16
#define TARGET_AVX2 __attribute__((target("avx2,fma")))

TARGET_AVX2 static void tile_avx2(int32_t depth, const float *restrict a, const float *restrict b,
                                  size_t ldb, const float *restrict init, float *restrict t,
                                  size_t ldc)
{
    const __m256 i0 = init ? _mm256_loadu_ps(init) : _mm256_setzero_ps();
    const __m256 i1 = init ? _mm256_loadu_ps(init + 8) : _mm256_setzero_ps();
    __m256 c0[A2_MR], c1[A2_MR];
#pragma GCC unroll 6
    for (int i = 0; i < A2_MR; i++) {
        c0[i] = i0;
        c1[i] = i1;
    }
    for (int32_t r = 0; r < depth; r++, a += A2_MR, b += ldb) {
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
        for (int i = 0; i < A2_MR; i++) {
            const __m256 av = _mm256_broadcast_ss(a + i);
            c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < A2_MR; i++) {
        _mm256_storeu_ps(t + i * ldc, c0[i]);
        _mm256_storeu_ps(t + i * ldc + 8, c1[i]);
    }
}

TARGET_AVX2 static void elu_avx2(float *y, size_t n) { elu_body(y, n); }
TARGET_AVX2 static void elu_grad_avx2(float *d, const float *y, size_t n)
{
    elu_grad_body(d, y, n);
}

/* Eight steps at a time: eight row loads, the 8 x 8 transpose of unpack,
 * shuffle and lane permute, eight group stores; the depth tail by the
 * scalar copy. Used by the AVX-512 variant too (its packed widths are
 * multiples of 8 as well). */
TARGET_AVX2 static void transpose8_avx2(int32_t depth, const float *restrict src, size_t lds,
                                        float *restrict dst, size_t ldd)
{
    int32_t r = 0;
    for (; r + 8 <= depth; r += 8) {
        const __m256 r0 = _mm256_loadu_ps(src + 0 * lds + r),
                     r1 = _mm256_loadu_ps(src + 1 * lds + r);
        const __m256 r2 = _mm256_loadu_ps(src + 2 * lds + r),
                     r3 = _mm256_loadu_ps(src + 3 * lds + r);
        const __m256 r4 = _mm256_loadu_ps(src + 4 * lds + r),
                     r5 = _mm256_loadu_ps(src + 5 * lds + r);
        const __m256 r6 = _mm256_loadu_ps(src + 6 * lds + r),
                     r7 = _mm256_loadu_ps(src + 7 * lds + r);
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
        const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
        const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
        const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
        float *o = dst + (size_t)r * ldd;
        _mm256_storeu_ps(o + 0 * ldd, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(o + 1 * ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(o + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(o + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(o + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(o + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(o + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_storeu_ps(o + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    transpose8_scalar(depth - r, src + r, lds, dst + (size_t)r * ldd, ldd);
}

/* ------------------------------------------------------------------------- */
/* AVX-512: 8 x 32, 16 accumulators of 16 lanes                             */
/* Eight rows rather than twelve (which the registers would hold): batches and
 * widths are mostly multiples of 8, so tiles are whole and the row tasks of a
 * small batch split evenly between threads (see docs/cpu-perf.md). */

#define A5_MR 8
#define A5_NR 32
#define TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

TARGET_AVX512 static void tile_avx512(int32_t depth, const float *restrict a,
                                      const float *restrict b, size_t ldb,
                                      const float *restrict init, float *restrict t, size_t ldc)
{
    const __m512 i0 = init ? _mm512_loadu_ps(init) : _mm512_setzero_ps();
    const __m512 i1 = init ? _mm512_loadu_ps(init + 16) : _mm512_setzero_ps();
    __m512 c0[A5_MR], c1[A5_MR];
#pragma GCC unroll 8
    for (int i = 0; i < A5_MR; i++) {
        c0[i] = i0;
        c1[i] = i1;
    }
    for (int32_t r = 0; r < depth; r++, a += A5_MR, b += ldb) {
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
        for (int i = 0; i < A5_MR; i++) {
            const __m512 av = _mm512_set1_ps(a[i]);
            c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < A5_MR; i++) {
        _mm512_storeu_ps(t + i * ldc, c0[i]);
        _mm512_storeu_ps(t + i * ldc + 16, c1[i]);
    }
}

TARGET_AVX512 static void elu_avx512(float *y, size_t n) { elu_body(y, n); }
TARGET_AVX512 static void elu_grad_avx512(float *d, const float *y, size_t n)
{
    elu_grad_body(d, y, n);
}
#endif /* CPB_X86 */

/* ------------------------------------------------------------------------- */
/* Selection                                                                 */

static const cpb_ops_t ops_scalar = {
    CPB_ISA_SCALAR,  "scalar",         S_MR, S_NR, tile_scalar, elu_scalar,
    elu_grad_scalar, transpose8_scalar};
#ifdef CPB_X86
static const cpb_ops_t ops_avx2 = {CPB_ISA_AVX2, "avx2",   A2_MR,         A2_NR,
                                   tile_avx2,    elu_avx2, elu_grad_avx2, transpose8_avx2};
static const cpb_ops_t ops_avx512 = {CPB_ISA_AVX512, "avx512",   A5_MR,           A5_NR,
                                     tile_avx512,    elu_avx512, elu_grad_avx512, transpose8_avx2};
#endif

const cpb_ops_t *cpb_ops_for(cpb_isa_t isa)
{
#ifdef CPB_X86
    __builtin_cpu_init();
    const int has512 = __builtin_cpu_supports("avx512f");
    const int has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    switch (isa) {
    case CPB_ISA_AUTO:
        return has512 ? &ops_avx512 : has2 ? &ops_avx2 : &ops_scalar;
    case CPB_ISA_AVX512:
        return has512 ? &ops_avx512 : NULL;
    case CPB_ISA_AVX2:
        return has2 ? &ops_avx2 : NULL;
    case CPB_ISA_SCALAR:
        return &ops_scalar;
    }
    return NULL;
#else
    return isa == CPB_ISA_AUTO || isa == CPB_ISA_SCALAR ? &ops_scalar : NULL;
#endif
}
