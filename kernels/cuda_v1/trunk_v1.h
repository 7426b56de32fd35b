/*
 * trunk_v1.h — CUDA kernel version 1 of the auxtrunk trunk: the reference GPU
 * design. Plain kernels, each easy to check against the canonical order of
 * abi/auxtrunk_canon.h, which they follow exactly (bit-identical to the CPU
 * reference). No atomics, no per-sample partial buffers, no allocation, no
 * synchronisation: every launch goes to the caller's stream, so forward and
 * backward can be captured into a CUDA graph.
 *
 * Math only: no ABI types, no validation beyond each launcher's launch
 * assumptions (a launcher whose assumptions do not hold launches nothing and
 * returns cudaErrorInvalidValue). All pointers are device memory of the
 * current device; layouts are those of abi/auxtrunk.h (row-major, weights
 * [in, out]). Shape letters: B batch, ENC, H1, H2, AUX.
 *
 * Launch sequence (fixed; nothing on the host depends on data):
 *   forward:  layer 1 (bias + ELU), layer 2 (bias + ELU), layer 3 (bias)
 *   backward: dh_pre; dW3, db3; dW2, db2; dW1, db1          (seven launches)
 *
 * Every launcher checks its launch (cudaGetLastError) and returns the error.
 * Usable from C and C++.
 */
#ifndef AUXTRUNK_TRUNK_V1_H
#define AUXTRUNK_TRUNK_V1_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* The building blocks                                                       */

/* y [B, N] = act(a [B, K] · w [K, N] + c [N]), act = ELU if elu else identity
 * (canonical section 1). y must not overlap a, w or c. */
cudaError_t v1_layer_forward(const float *a, const float *w, const float *c, int batch, int k,
                             int n, int elu, float *y, cudaStream_t stream);

/* dh2 [B, H2] = (dout [B, AUX] · w3ᵀ) ⊙ ELU'(h2), then
 * dh1 [B, H1] = (dh2 · w2ᵀ) ⊙ ELU'(h1)   (canonical section 2). */
cudaError_t v1_dh_pre(atk_dims_t d, const float *w2, const float *w3, const float *h1,
                      const float *h2, const float *dout, int batch, float *dh2, float *dh1,
                      cudaStream_t stream);

/* dw [K, N] = aᵀ [K, B] · g [B, N] (or dw + that, if accumulate), the sum over
 * the batch in the canonical chunk-and-tree order (section 3). */
cudaError_t v1_dw_reduce(const float *a, const float *g, int batch, int k, int n, int accumulate,
                         float *dw, cudaStream_t stream);

/* db [N] = Σ_b g [B, N] (or db + that, if accumulate), canonical order. */
cudaError_t v1_db_reduce(const float *g, int batch, int n, int accumulate, float *db,
                         cudaStream_t stream);

/* ------------------------------------------------------------------------- */
/* The trunk                                                                 */

/* Resolves every kernel of this file on the current device (loads it, even
 * under lazy module loading), so that no later launch loads code: call once
 * per device at init. A first launch inside a host's graph capture then
 * needs nothing but the launch itself. */
cudaError_t v1_prepare(void);

/* Forward: h1 [B, H1], h2 [B, H2] (recorded or scratch, the caller decides)
 * and out [B, AUX] from x [B, ENC]. Three launches. */
cudaError_t v1_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch, float *h1,
                       float *h2, float *out, cudaStream_t stream);

/* Floats of workspace v1_backward needs for batches up to max_batch: dh2_pre
 * [max_batch, H2] and dh1_pre [max_batch, H1]. No per-sample partials: batch
 * sums keep their chunk partials in shared memory. */
size_t v1_workspace_floats(atk_dims_t d, int max_batch);

/* Backward from the forward's x, h1, h2 and dout [B, AUX]: the six gradients
 * (overwrite, or g = g + result if accumulate), with dh2 [B, H2] and then
 * dh1 [B, H1] in workspace (v1_workspace_floats). Seven launches. There is no
 * gradient for x. */
cudaError_t v1_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                        const float *h2, const float *dout, int batch, const atk_grads_t *g,
                        int accumulate, float *workspace, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V1_H */
