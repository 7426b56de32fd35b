/*
 * auxtrunk_canon.h — the canonical arithmetic of the auxtrunk ABI (part of
 * the contract, version "canon 1").
 *
 * A plugin that advertises AUXTRUNK_CAP_EXACT produces, for every output and
 * gradient element, exactly the float32 value obtained by the order below:
 * every multiply-add is one fused multiply-add (fmaf, one rounding), every
 * other operation is one IEEE-754 binary32 operation rounded to nearest even,
 * no other contraction or reassociation is allowed, and denormals are kept
 * (no flush to zero). The order was chosen so that a fast GPU kernel can
 * follow it: every dot product over a layer's width is one sequential chain
 * (what a register-tiled GEMM computes per thread), and every sum over the
 * batch is split into fixed-size chunks whose partials are combined by a
 * fixed pairwise tree (what a split-K reduction computes), with workspace
 * bounded by ceil(B / AUXTRUNK_CANON_CHUNK) partials, never B.
 *
 * Notation: a layer has input a [B, K], weight W [K, N] (row-major, see
 * auxtrunk.h), bias c [N]; fmaf(p, q, r) = p*q + r rounded once.
 *
 * 1. Layer forward (layers 1, 2, 3), for each b, n:
 *        acc = c[n]
 *        for k = 0, 1, ..., K-1:   acc = fmaf(a[b,k], W[k,n], acc)
 *        z[b,n] = acc
 *    Layers 1 and 2 then apply y = auxtrunk_canon_elu(z); layer 3 is linear.
 *
 * 2. Hidden gradient (layer with output gradient d [B, N], weight W [K, N],
 *    post-activation y [B, K] of its input), for each b, k:
 *        acc = 0.0f
 *        for n = 0, 1, ..., N-1:   acc = fmaf(d[b,n], W[k,n], acc)
 *        dpre[b,k] = auxtrunk_canon_elu_grad(acc, y[b,k])
 *    dh2_pre uses d = dout, W = W3, y = h2; dh1_pre uses d = dh2_pre, W = W2,
 *    y = h1.
 *
 * 3. Batch sums. Let C = AUXTRUNK_CANON_CHUNK and nc = ceil(B / C); chunk i
 *    holds samples [i*C, min(B, (i+1)*C)). For a weight gradient
 *    dW[k,n] = Σ_b a[b,k]·g[b,n], chunk partial i is
 *        p = 0.0f;  for b in chunk i, ascending:  p = fmaf(a[b,k], g[b,n], p)
 *    and for a bias gradient db[n] = Σ_b g[b,n] it is
 *        p = 0.0f;  for b in chunk i, ascending:  p = p + g[b,n]
 *    The nc partials q[0..nc-1] are then combined by the pairwise tree
 *        for s = 1, 2, 4, ... while s < nc:
 *            for every i that is a multiple of 2s with i + s < nc:
 *                q[i] = q[i] + q[i+s]
 *        result = q[0]
 *    (level by level: neighbours are added left + right, and an element with
 *    no right neighbour moves up a level unchanged). With
 *    AUXTRUNK_BACKWARD_ACCUMULATE the stored gradient becomes
 *    g_old + result (one addition); otherwise it becomes result.
 *    The pairs are (a, g) = (h2, dout) for dW3, (h1, dh2_pre) for dW2,
 *    (x, dh1_pre) for dW1; db3, db2, db1 sum dout, dh2_pre, dh1_pre.
 *
 * 4. Inference forward is the same as the training forward, bit for bit.
 *
 * The functions below are the single definition of the element-wise parts
 * (expm1, ELU, ELU'). They use only +, -, *, fmaf, comparisons and bit
 * moves, so that a C compiler and nvcc produce the same bits. Build flags:
 * C code with -ffp-contract=off (the default for -std=c11), CUDA code with
 * -fmad=false; neither with fast-math.
 */
#ifndef AUXTRUNK_CANON_H
#define AUXTRUNK_CANON_H

#include <stdint.h>

#if defined(__CUDACC__)
#define AUXTRUNK_CANON_FN static __host__ __device__ __forceinline__
#else
#include <math.h>
#include <string.h>
#define AUXTRUNK_CANON_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this arithmetic; appears in every exact plugin's kernel_version. */
#define AUXTRUNK_CANON_VERSION 1
/* Samples per batch chunk in every batch sum (section 3). */
#define AUXTRUNK_CANON_CHUNK 256

/* Number of chunk partials for a batch of b samples. */
AUXTRUNK_CANON_FN int32_t auxtrunk_canon_chunks(int32_t b)
{
    return (b + AUXTRUNK_CANON_CHUNK - 1) / AUXTRUNK_CANON_CHUNK;
}

AUXTRUNK_CANON_FN float auxtrunk_canon_bits_to_float_(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/*
 * expm1(x) for x <= 0 (the ELU's negative branch), within 2 ulp of the exact
 * value; NaN in, NaN out. Positive x is outside the contract (ELU never asks).
 *   x < -20:                -1 (the exact value rounds to -1 for x < -17.33)
 *   -ln2/2 < x <= 0:        x + x²·P(x), P the degree-6 Taylor polynomial of
 *                           (e^x - 1 - x)/x², Horner with fmaf
 *   otherwise:              x = n·ln2 + r with n = round(x/ln2), |r| <= ln2/2,
 *                           e^x - 1 = 2^n·expm1(r) + (2^n - 1), where 2^n - 1
 *                           is exact and the last step is one fmaf.
 */
AUXTRUNK_CANON_FN float auxtrunk_canon_expm1_poly_(float r)
{
    float p = 2.48015873e-05f;       /* 1/8! */
    p = fmaf(p, r, 1.98412698e-04f); /* 1/7! */
    p = fmaf(p, r, 1.38888889e-03f); /* 1/6! */
    p = fmaf(p, r, 8.33333333e-03f); /* 1/5! */
    p = fmaf(p, r, 4.16666667e-02f); /* 1/4! */
    p = fmaf(p, r, 1.66666667e-01f); /* 1/3! */
    p = fmaf(p, r, 0.5f);            /* 1/2! */
    return fmaf(r * r, p, r);
}

AUXTRUNK_CANON_FN float auxtrunk_canon_expm1(float x)
{
    /* Both branches are evaluated and the result selected, so that a GPU
     * warp whose lanes fall in different ranges runs one path, not both in
     * turn. The range reduction works on a clamped copy (NaN and x < -20
     * become -20), so that the conversion to int and the exponent shift only
     * ever see n in [-29, 0]; the cases that use the clamp are selected away.
     * The operations that produce the selected value are exactly those of
     * the three cases above (same operands, same order). */
    const float xc = x >= -20.0f ? x : -20.0f;
    const float shift = 12582912.0f; /* n = round-to-nearest(x / ln2) by the 1.5·2^23 shift */
    const float t = fmaf(xc, 1.44269504f, shift);
    const float n = t - shift;
    float r = fmaf(-n, 0.693145751953125f, xc); /* ln2 high part, exact product */
    r = fmaf(-n, 1.42860677e-06f, r);           /* ln2 low part */
    const int near0 = xc > -0.34657359f;
    const float e = auxtrunk_canon_expm1_poly_(near0 ? xc : r);
    const int32_t ni = (int32_t)n;
    const float s = auxtrunk_canon_bits_to_float_((uint32_t)(ni + 127) << 23); /* 2^n */
    const float far = fmaf(s, e, s - 1.0f);
    const float v = x < -20.0f ? -1.0f : near0 ? e : far;
    return x != x ? x : v;
}

/* ELU with alpha = 1. */
AUXTRUNK_CANON_FN float auxtrunk_canon_elu(float z)
{
    return z > 0.0f ? z : auxtrunk_canon_expm1(z);
}

/* acc · ELU'(y), with ELU' from the post-activation y: y > 0 ? 1 : 1 + y.
 * The y > 0 branch returns acc unchanged (acc · 1 is exact). */
AUXTRUNK_CANON_FN float auxtrunk_canon_elu_grad(float acc, float y)
{
    return y > 0.0f ? acc : acc * (1.0f + y);
}

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_CANON_H */
