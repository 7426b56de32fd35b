/*
 * combine.h — the ordered combine of a data-parallel step: N ranks, each
 * with a contiguous shard of the global batch, turn their per-rank
 * gradients and loss sums into the one-GPU full-batch values. Defined once
 * here, as static inline functions that compile as C (the CPU test) and as
 * CUDA (the NCCL path's combine kernel, dist_cuda.cu), like step_canon.h.
 *
 * Rank r of N holds global slots [r·b, (r+1)·b), b = B / N (N divides B).
 * It computes, with its own plugin handle on batch b:
 *   - its gradient: canon section 3 over its own b samples, that is chunks
 *     of 256 from its first sample and the canon's tree over its
 *     ceil(b / 256) chunk partials;
 *   - its loss sum: the step's tree (step_canon.h) over its b·AUX loss
 *     elements, with dout divided by the global n = B·AUX.
 * The combine is the canon's pairwise tree over the N rank values, in rank
 * order (ath_combine_elem). It equals the full-batch value bit for bit when
 * each rank's value is one node of the full batch's tree:
 *   - gradients: N = 1, or b = 256·2^k (k >= 0). Then the full batch has
 *     N·2^k chunks; the tree's levels below 2^k stay inside aligned blocks of
 *     2^k chunks (one rank each, a complete subtree), and its levels from 2^k
 *     up act on the block roots exactly as the canon's tree over N values.
 *     N need not be a power of two.
 *   - the loss: N = 1, or b·AUX a power of two (the same argument, with
 *     elements for chunks).
 * Otherwise the result is still a fixed function of the inputs and N
 * (deterministic on every device), but not the one-GPU value.
 */
#ifndef ATH_COMBINE_H
#define ATH_COMBINE_H

#include <stddef.h>
#include <stdint.h>

#include "step_canon.h"

/* Element i of the combine of n rank buffers held rank after rank with
 * `stride` floats between ranks (g[r·stride + i], r = 0 .. n-1): the canon's
 * tree in place over the n values, level by level, left + right. Returns the
 * result, which is also left in g[i]. */
ATH_HD float ath_combine_elem(float *g, size_t stride, uint32_t n, size_t i)
{
    for (uint32_t s = 1; s < n; s *= 2)
        for (uint32_t r = 0; r + s < n; r += 2 * s)
            g[(size_t)r * stride + i] =
                ath_fadd(g[(size_t)r * stride + i], g[(size_t)(r + s) * stride + i]);
    return g[i];
}

ATH_HD int ath_is_pow2_u64(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

/* The gradient combine of N ranks over a global batch B equals the one-GPU
 * gradient (see the top of the file). */
ATH_HD int ath_dp_grads_exact(int32_t batch, int32_t ranks)
{
    if (ranks == 1)
        return 1;
    if (ranks < 1 || batch % ranks != 0)
        return 0;
    const int32_t b = batch / ranks;
    return b % AUXTRUNK_CANON_CHUNK == 0 && ath_is_pow2_u64((uint64_t)(b / AUXTRUNK_CANON_CHUNK));
}

/* The loss combine of N ranks equals the one-GPU loss. */
ATH_HD int ath_dp_loss_exact(int32_t batch, int32_t ranks, int32_t aux)
{
    if (ranks == 1)
        return 1;
    if (ranks < 1 || batch % ranks != 0)
        return 0;
    return ath_is_pow2_u64((uint64_t)(batch / ranks) * (uint64_t)aux);
}

#endif
