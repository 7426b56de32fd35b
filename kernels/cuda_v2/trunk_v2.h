/*
 * trunk_v2.h — CUDA kernel version 2 of the auxtrunk trunk: register-tiled
 * SIMT GEMMs with fused epilogues, a grouped split-batch weight-gradient
 * launch and one tree-reduction launch. Every output element is computed in
 * exactly the canonical order of abi/auxtrunk_canon.h, so results are
 * bit-identical to the CPU reference; there are no atomics and no host
 * synchronisation, and every launch goes to the caller's stream.
 *
 * Math only: no ABI types. All pointers are device memory of the current
 * device; shapes use B, ENC, H1, H2, AUX; layouts are those of abi/auxtrunk.h.
 *
 * Launch sequence (fixed for a given batch; nothing depends on data):
 *   forward:  layer 1 (bias+ELU), layer 2 (bias+ELU), layer 3 (bias)
 *   backward: dh2_pre, dh1_pre, grouped dW/db chunk partials, tree (if B > 256)
 */
#ifndef AUXTRUNK_TRUNK_V2_H
#define AUXTRUNK_TRUNK_V2_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct v2_dims {
    int enc, h1, h2, aux;
} v2_dims_t;

typedef struct v2_params {
    const float *w1, *b1, *w2, *b2, *w3, *b3;
} v2_params_t;

typedef struct v2_grads {
    float *dw1, *db1, *dw2, *db2, *dw3, *db3;
} v2_grads_t;

/* Floats of workspace backward needs for batches up to max_batch: the chunk
 * partials of all six gradients, ceil(max_batch/256) * P when max_batch > 256
 * (P = parameter count), else 0, plus dh2_pre and dh1_pre [max_batch, H2+H1]. */
size_t v2_workspace_floats(v2_dims_t d, int max_batch);

/* Loads every kernel of this file on the current device (even under lazy
 * module loading), so that no later launch loads code, e.g. inside a host's
 * graph capture. Call once per device at init. */
cudaError_t v2_prepare(void);

/* Forward: h1 [B,H1], h2 [B,H2] (scratch or recorded) and out [B,AUX]. */
cudaError_t v2_forward(v2_dims_t d, const v2_params_t *p, const float *x, int batch, float *h1,
                       float *h2, float *out, cudaStream_t stream);

/* Backward: the six gradients (overwrite, or g = g + result if accumulate)
 * from x, the recorded h1/h2 and dout. workspace holds v2_workspace_floats. */
cudaError_t v2_backward(v2_dims_t d, const v2_params_t *p, const float *x, const float *h1,
                        const float *h2, const float *dout, int batch, const v2_grads_t *g,
                        int accumulate, float *workspace, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V2_H */
