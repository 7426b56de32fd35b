/*
 * trunk_v3_sgemm.h — cuda-v3's exact path for large batches: a SIMT GEMM
 * core whose fragments are double-buffered in registers, for every GEMM of
 * the step (three layers, two hidden gradients, the weight gradients).
 *
 * Exact: each thread walks the reduction index in ascending order, one fmaf
 * per step and accumulator, so every output and every chunk partial is the
 * canonical chain of abi/auxtrunk_canon.h; the chunk partials are summed in
 * pairs (the tree's first level, left + right) by the launch that makes
 * them, or, where that launch's blocks would leave a short last wave, left
 * single; the rest of the tree is cuda-v2's (v2_tree_sum). No atomics, no
 * host synchronisation, every launch on the caller's stream; x is never
 * differentiated.
 *
 * Tile: 128 x 128 outputs per block of 256 threads, 8 x 8 per thread, two
 * blocks per SM (at most 128 registers). A warp holds 4 x 8 threads; a
 * thread's rows are two runs of 4, 16 apart, its columns two runs of 4, 32
 * apart: each 16-byte fragment load of a warp touches one word per
 * quarter-warp (rows: 2 shared-memory clocks on the H200) or 8 (columns: 4
 * clocks; docs/floors-h200.md). With both operands stored reduction-major in
 * shared memory, a step is 4 such loads and 64 FMAs, and the next step's
 * fragments load while this one's FMAs issue. A row-major operand (the
 * activations, as the ABI and the records hold them) is transposed on its
 * way into shared memory (16-byte loads into registers, 4-byte stores one
 * slab ahead); a reduction-major one travels by cp.async.
 *
 * Launch sequence (fixed for a given batch):
 *   forward:  layer 1 (bias+ELU), layer 2 (bias+ELU), layer 3 (bias)
 *   backward: W2ᵀ/W3ᵀ copy (v2_transpose_hidden_weights), dh2_pre, dh1_pre,
 *             the dW/db partials of single chunks or chunk pairs (which
 *             of the two: by the batch and the GPU's size), the tree
 *             (v2_tree_sum); with a second stream, dW2/dW3 and their
 *             tree beside dh1_pre (v3_sgemm_backward_forked)
 * Every launch after the first of a call is a programmatic dependent of
 * the one before on its stream (trunk_v2_pdl.cuh), but the first on the
 * second stream, which waits for dh2_pre by an event.
 * Domain: every width a multiple of 4 and every pointer 16-byte aligned
 * (v3_sgemm_forward_ok, v3_sgemm_backward_ok); the workspace is cuda-v2's
 * carve (v2_workspace_carve) with room for the nodes
 * (v3_sgemm_workspace_floats).
 */
#ifndef AUXTRUNK_TRUNK_V3_SGEMM_H
#define AUXTRUNK_TRUNK_V3_SGEMM_H

#include <cuda_runtime.h>

#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Smallest batch v3_forward and v3_backward give to this path. */
#define V3_SGEMM_MIN_BATCH 16384

/* Most chunks for which the weight-gradient launch may give each block a
 * single chunk instead of a pair (more tree nodes; see grads_fold in
 * trunk_v3_sgemm.cu). 128 chunks (B = 32,768) need no more nodes than the
 * pairs of the largest batch the bench runs, 65,536. */
#define V3_SGEMM_SINGLE_MAX 128

/* 1 if the call is in this path's domain (above). */
int v3_sgemm_forward_ok(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                        const float *h2, const float *out);
int v3_sgemm_backward_ok(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                         const float *h2, const float *dout, const atk_grads_t *g,
                         const float *workspace, int batch);

/* Workspace floats this path needs for batches up to max_batch (0 below
 * V3_SGEMM_MIN_BATCH): cuda-v2's carve (v2_workspace_carve) and the tree's
 * nodes, which may be one per chunk up to V3_SGEMM_SINGLE_MAX chunks. */
size_t v3_sgemm_workspace_floats(atk_dims_t d, int max_batch);

/* Loads the kernels, raises their shared-memory limits and notes how many
 * weight-gradient blocks the current device holds at once (which the
 * backward's choice of single chunks or pairs needs; a device this was not
 * called on gets pairs); once per device. */
cudaError_t v3_sgemm_prepare(void);

/* As v2_forward (trunk_v2.h), bit for bit; the call must be in the domain
 * above (cudaErrorInvalidValue otherwise). */
cudaError_t v3_sgemm_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                             float *h1, float *h2, float *out, cudaStream_t stream);
/* As v2_backward (trunk_v2.h), bit for bit, in the same domain; with a
 * second stream to fork onto (as v2_backward_forked takes it: side, fork
 * and join, or NULL for one stream), in a graph and in eager calls alike
 * (v2_forks_eager: side is not stream and the stream's capture status can
 * be read): once dh2_pre is queued, dW2, db2, dW3, db3 (their
 * blocks of the weight-gradient launch, with the chunk plan of all three,
 * and their tree) run on side while dh1_pre, dW1, db1 run on stream. Every
 * launch has the block shape of every other, so the side's blocks take the
 * slots that dh1_pre's single wave leaves and dh1_pre's and dW1's take
 * those the side's last wave leaves. */
cudaError_t v3_sgemm_backward_forked(atk_dims_t d, const atk_params_t *p, const float *x,
                                     const float *h1, const float *h2, const float *dout, int batch,
                                     const atk_grads_t *g, int accumulate, float *workspace,
                                     cudaStream_t stream, cudaStream_t side, cudaEvent_t fork,
                                     cudaEvent_t join);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V3_SGEMM_H */
