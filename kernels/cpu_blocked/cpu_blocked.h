/*
 * cpu_blocked.h — the auxtrunk trunk on the CPU, a second implementation of
 * the canonical order of abi/auxtrunk_canon.h (bit for bit the same results
 * as kernels/cpu), with a different structure:
 *
 *   - layers and hidden gradients are computed in register tiles of
 *     ROWS x COLS outputs (each output still one fmaf chain, k ascending);
 *   - hidden gradients are dot products over a weight row (no transposed
 *     copy of W2, W3);
 *   - batch sums keep every chunk partial of one tile of a gradient and then
 *     run the pairwise tree literally, level by level (kernels/cpu folds a
 *     binary-counter stack instead).
 *
 * It exists so a host can swap between two exact kernel versions that share
 * no loop code. Math only: dims, raw float pointers, a caller-owned
 * workspace; no ABI structs, no validation, no allocation, never fails.
 *
 * Shape letters: B batch, ENC, H1, H2, AUX. Layouts as in abi/auxtrunk.h.
 */
#ifndef AUXTRUNK_CPU_BLOCKED_H
#define AUXTRUNK_CPU_BLOCKED_H

#include <stddef.h>
#include <stdint.h>

#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Forward: h1 [B, H1], h2 [B, H2] (may be scratch) and out [B, AUX]. */
void cpb_forward(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch, float *h1,
                 float *h2, float *out);

/* Floats of backward workspace for any batch up to max_batch: the two hidden
 * gradients [max_batch, H2] + [max_batch, H1] and one tile's chunk partials. */
size_t cpb_backward_workspace(atk_dims_t d, int32_t max_batch);

/* Backward of the forward that gave h1, h2 from x: the six gradients of
 * sum(out ⊙ dout). accumulate: g = g + result (one addition), else g = result. */
void cpb_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                  const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                  int accumulate, float *ws);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_CPU_BLOCKED_H */
