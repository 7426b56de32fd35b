/*
 * trunk_v3_mid.h — cuda-v3's exact path for mid batches: one persistent
 * launch per call, forward or backward, whose blocks walk a fixed list of
 * tiles in order and wait for the tiles a tile reads through per-block
 * counting flags (release store, acquire poll), instead of a launch per
 * layer.
 *
 * Exact: every output and chunk partial is one thread's canonical chain
 * (abi/auxtrunk_canon.h): the layers' and hidden gradients' dot products
 * in ascending order of their reduction index, each chunk's weight- and
 * bias-gradient partial in ascending sample order, then the chunk tree
 * level by level (left + right) in the same launch. No atomics; x is never
 * differentiated.
 *
 * The lists (32 x 32 tiles on blocks of 128 threads, two an SM, a thread 4 x
 * 2 outputs; 32 reduction steps a slab, a ring of three slabs by cp.async):
 *   forward:  layer 1, layer 2, layer 3 tiles, row block by row block; a
 *             tile of layer L + 1 waits for its row block of layer L.
 *   backward: dh2_pre tiles; dW3 chunk tiles and db3 columns; dh1_pre
 *             tiles (each waits for its row block of dh2_pre); dW2 and db2
 *             (each waits for its chunk's rows of dh2_pre); dW1 and db1
 *             (its chunk's rows of dh1_pre); the tree (each part waits for
 *             its gradient's partials).
 * Tile q of a list is block q % G's (q / G)-th: every tile waits only for
 * tiles before it in the list, every block takes its tiles in list order,
 * and the launch is cooperative (all G blocks resident), so no wait can
 * deadlock.
 *
 * Flags: one word a block (its own 128-byte line) in the state region
 * (V3_MID_FLAGS_OFFSET), which the adapter zeroes once at init. A block
 * reads its word n at its start (every word holds the same n then), stores
 * n + m + 1 (release) after its m-th tile and n + 2^16 at its end; a
 * waiter for block b's m-th tile polls b's word until it reaches n + m + 1
 * (a signed difference: sound across the 32-bit wrap). The forward and the
 * backward use the same words: the calls of a handle never overlap.
 *
 * Workspace past the state region (v3_mid_workspace_floats): dh2_pre [B,
 * H2], dh1_pre [B, H1], and, for more than one chunk, one partial of every
 * parameter per chunk.
 */
#ifndef AUXTRUNK_TRUNK_V3_MID_H
#define AUXTRUNK_TRUNK_V3_MID_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most blocks of a mid launch (two per SM, at most this many). */
#define V3_MID_MAX_BLOCKS 512
/* Floats of the state region the mid path's flags take (32 a block). */
#define V3_MID_FLAG_FLOATS (V3_MID_MAX_BLOCKS * 32)

/* 1 if the call is in this path's domain: every width a multiple of 4,
 * every pointer 16-byte aligned, a device that took the cooperative probe
 * (v3_mid_prepare). */
int v3_mid_forward_ok(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                      const float *h2, const float *out, const float *workspace);
int v3_mid_backward_ok(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                       const float *h2, const float *dout, const atk_grads_t *g,
                       const float *workspace);

/* Scratch floats (past the state region) for a batch of `batch`. */
size_t v3_mid_workspace_floats(atk_dims_t d, int batch);

/* Raises the kernels' shared-memory limits and records the grid (two
 * blocks per SM of the current device, at most V3_MID_MAX_BLOCKS; none, and
 * the path is off, where they cannot be resident at once); once per device. */
cudaError_t v3_mid_prepare(void);

/* Forward and backward as v2_forward / v2_backward, bit for bit. flags:
 * the state region's V3_MID_FLAG_FLOATS; scratch: v3_mid_workspace_floats. */
cudaError_t v3_mid_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                           float *h1, float *h2, float *out, float *flags, cudaStream_t stream);
cudaError_t v3_mid_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                            const float *h2, const float *dout, int batch, const atk_grads_t *g,
                            int accumulate, float *flags, float *scratch, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V3_MID_H */
