/*
 * step_canon.h — the canonical arithmetic of the host's training step: the
 * data draw, the loss and its gradient, the finite check and Adam. Each is
 * defined once here, as static inline functions that compile both as C (the
 * host path, train_host.c) and as CUDA (the device path, step_cuda.cu), so a
 * run gives the same bits whatever memory space its plugin uses.
 *
 * Rules that make the bits the same on every device:
 *   - only correctly rounded operations: + - * / sqrt (binary32, round to
 *     nearest even) through the ath_f* helpers below, which are the CUDA
 *     round-to-nearest intrinsics on the device (so no contraction can
 *     happen there whatever the flags) and plain operators in C (built with
 *     -ffp-contract=off); no fmaf here, no libm, no transcendental other
 *     than the canon's expm1 (abi/auxtrunk_canon.h), used by ath_tanh;
 *   - integers for everything random: a counter-based hash of (seed, step,
 *     slot), so a draw depends on where it is, not on what ran before;
 *   - every sum over more than one element is the canon's pairwise tree
 *     (auxtrunk_canon.h section 3) over a fixed index order.
 *
 * Shape letters: B batch, ENC, AUX as in auxtrunk.h; n = B·AUX.
 */
#ifndef ATH_STEP_CANON_H
#define ATH_STEP_CANON_H

#include <stdint.h>

#include "auxtrunk_canon.h"

#include <math.h>
#include <string.h>

#if defined(__CUDACC__)
#define ATH_HD static __host__ __device__ __forceinline__
#else
#define ATH_HD static inline
#endif

/* ------------------------------------------------------------------------- */
/* Correctly rounded binary32 operations                                     */

#if defined(__CUDA_ARCH__)
ATH_HD float ath_fadd(float a, float b) { return __fadd_rn(a, b); }
ATH_HD float ath_fsub(float a, float b) { return __fsub_rn(a, b); }
ATH_HD float ath_fmul(float a, float b) { return __fmul_rn(a, b); }
ATH_HD float ath_fdiv(float a, float b) { return __fdiv_rn(a, b); }
ATH_HD float ath_fsqrt(float a) { return __fsqrt_rn(a); }
ATH_HD uint32_t ath_fbits(float f) { return __float_as_uint(f); }
#else
ATH_HD float ath_fadd(float a, float b) { return a + b; }
ATH_HD float ath_fsub(float a, float b) { return a - b; }
ATH_HD float ath_fmul(float a, float b) { return a * b; }
ATH_HD float ath_fdiv(float a, float b) { return a / b; }
ATH_HD float ath_fsqrt(float a) { return sqrtf(a); }
ATH_HD uint32_t ath_fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
#endif

/* Finite: neither Inf nor NaN (the exponent field is not all ones). */
ATH_HD int ath_finite(float f) { return (ath_fbits(f) & 0x7F800000u) != 0x7F800000u; }

/* tanh from the canon's expm1 (defined for arguments <= 0):
 * tanh|x| = -e / (e + 2) with e = expm1(-2|x|), the sign restored. */
ATH_HD float ath_tanh(float x)
{
    const float a = x < 0.0f ? -x : x;
    const float e = auxtrunk_canon_expm1(ath_fmul(-2.0f, a));
    const float t = ath_fdiv(-e, ath_fadd(e, 2.0f));
    return x < 0.0f ? -t : t; /* NaN in, NaN out (through e) */
}

/* ------------------------------------------------------------------------- */
/* Counter-based draws                                                       */
/*
 * ath_mix64 is splitmix64's finaliser (a bijection of uint64). A draw is
 *   ath_hash(key, a, b) = mix(mix(key + a·G) + b·G),   G = 0x9E3779B97F4A7C15
 * with key = mix(seed ^ tag·0xD1B54A32D192ED03) for one purpose of a seed.
 */
#define ATH_HASH_G UINT64_C(0x9E3779B97F4A7C15)
#define ATH_TAG_REPLAY UINT64_C(4) /* which buffer sample fills slot b of step s */

ATH_HD uint64_t ath_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

ATH_HD uint64_t ath_hash_key(uint64_t seed, uint64_t tag)
{
    return ath_mix64(seed ^ (tag * UINT64_C(0xD1B54A32D192ED03)));
}

ATH_HD uint64_t ath_hash(uint64_t key, uint64_t a, uint64_t b)
{
    return ath_mix64(ath_mix64(key + a * ATH_HASH_G) + b * ATH_HASH_G);
}

/* The sample of the replay buffer (2^log2n samples) that fills slot b of
 * step s (s counts from 1): the top log2n bits of the hash, so every sample
 * is equally likely and draws are with replacement, as from replay memory. */
ATH_HD uint32_t ath_replay_index(uint64_t key, uint64_t step, uint32_t b, int log2n)
{
    return log2n == 0 ? 0u : (uint32_t)(ath_hash(key, step, b) >> (64 - log2n));
}

/* ------------------------------------------------------------------------- */
/* Loss: half mean squared error                                             */
/*
 * For element i = b·AUX + j (n = B·AUX elements):
 *   d_i = out_i - target_i;   dout_i = d_i / n;   q_i = d_i · d_i
 * sum = the canon's pairwise tree over q_0 .. q_{n-1};  loss = (0.5·sum) / n
 * (n is converted to float once, correctly rounded). The tree over aligned
 * segments of 2^k elements gives the tree's own nodes, which is what lets the
 * device reduce segment by segment and get the same sum.
 */
ATH_HD float ath_loss_elem(float out, float target, float n, float *dout)
{
    const float d = ath_fsub(out, target);
    *dout = ath_fdiv(d, n);
    return ath_fmul(d, d);
}

/* One level of the canon's tree over q[0 .. n) with stride s: the node at i
 * (a multiple of 2s) absorbs its right neighbour i + s when there is one. */
ATH_HD void ath_tree_node(float *q, uint32_t n, uint32_t s, uint32_t i)
{
    if (i + s < n)
        q[i] = ath_fadd(q[i], q[i + s]);
}

ATH_HD float ath_loss_of_sum(float sum, float n) { return ath_fdiv(ath_fmul(0.5f, sum), n); }

/* ------------------------------------------------------------------------- */
/* The step's verdict and Adam's scalars                                     */
/*
 * Adam (β1, β2, ε; lr): with b1t = β1^t and b2t = β2^t kept as running
 * products (one rounding per step, the same on every device; no pow),
 *   lr_t = (lr · sqrt(1 - b2t)) / (1 - b1t)
 *   m = β1·m + (1-β1)·g;   v = β2·v + (1-β2)·(g·g)
 *   p = p - (lr_t · m) / (sqrt(v) + ε)
 * each operation rounded once, in this order.
 */
typedef struct ath_adam_hp {
    float lr, beta1, beta2, eps;
} ath_adam_hp_t;

enum { ATH_FAULT_NONE = 0, ATH_FAULT_LOSS = 1, ATH_FAULT_GRAD = 2 };

/* The run's scalar state, in the memory space of its other state. A step
 * with a non-finite loss or gradient sets fault_step (the first such step)
 * and from then on no update is applied, so the parameters and Adam state
 * stay those before the faulty step until the host, at its next sync, rolls
 * back or ends the run: nothing non-finite is ever applied. */
typedef struct ath_scalars {
    uint64_t step;       /* steps run: the draw counter of the next step is step + 1 */
    uint64_t t;          /* Adam updates applied */
    uint64_t fault_step; /* first step with a non-finite loss or gradient; 0: none */
    float b1t, b2t;      /* β1^t, β2^t */
    float lr_t;          /* the last step's step size (valid when ok) */
    uint32_t ok;         /* the last step's update is applied */
    uint32_t fault_kind; /* ATH_FAULT_* of fault_step */
    float loss;          /* the last step's loss */
} ath_scalars_t;

/* The state of a fresh run, or of one resumed after t updates. */
ATH_HD ath_scalars_t ath_scalars_at(uint64_t step, uint64_t t, ath_adam_hp_t hp)
{
    ath_scalars_t s;
    s.step = step;
    s.t = t;
    s.fault_step = 0;
    s.b1t = 1.0f;
    s.b2t = 1.0f;
    for (uint64_t i = 0; i < t; i++) {
        s.b1t = ath_fmul(s.b1t, hp.beta1);
        s.b2t = ath_fmul(s.b2t, hp.beta2);
    }
    s.lr_t = 0.0f;
    s.ok = 0;
    s.fault_kind = ATH_FAULT_NONE;
    s.loss = 0.0f;
    return s;
}

/* Ends a step whose loss is `loss` and whose gradients are all finite unless
 * grads_bad: decides whether Adam applies it, and advances the scalars. */
ATH_HD void ath_step_verdict(ath_scalars_t *s, float loss, int grads_bad, ath_adam_hp_t hp)
{
    const uint64_t step = s->step + 1;
    const int bad = grads_bad || !ath_finite(loss);
    if (bad && s->fault_step == 0) {
        s->fault_step = step;
        s->fault_kind = ath_finite(loss) ? ATH_FAULT_GRAD : ATH_FAULT_LOSS;
    }
    s->ok = s->fault_step == 0;
    if (s->ok) {
        s->b1t = ath_fmul(s->b1t, hp.beta1);
        s->b2t = ath_fmul(s->b2t, hp.beta2);
        s->lr_t =
            ath_fdiv(ath_fmul(hp.lr, ath_fsqrt(ath_fsub(1.0f, s->b2t))), ath_fsub(1.0f, s->b1t));
        s->t += 1;
    }
    s->loss = loss;
    s->step = step;
}

/* Adam on element i. */
ATH_HD void ath_adam_elem(float *p, float *m, float *v, float g, float lr_t, ath_adam_hp_t hp)
{
    const float mi = ath_fadd(ath_fmul(hp.beta1, *m), ath_fmul(ath_fsub(1.0f, hp.beta1), g));
    const float vi =
        ath_fadd(ath_fmul(hp.beta2, *v), ath_fmul(ath_fsub(1.0f, hp.beta2), ath_fmul(g, g)));
    *m = mi;
    *v = vi;
    *p = ath_fsub(*p, ath_fdiv(ath_fmul(lr_t, mi), ath_fadd(ath_fsqrt(vi), hp.eps)));
}

#endif
