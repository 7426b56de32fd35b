/*
 * trunk_v2.h — CUDA kernel version 2 of the auxtrunk trunk: register-tiled
 * SIMT GEMMs with fused epilogues, a grouped split-batch weight-gradient
 * launch and a tree reduction. Every output element is computed in
 * exactly the canonical order of abi/auxtrunk_canon.h, so results are
 * bit-identical to the CPU reference; there are no atomics and no host
 * synchronisation, and every launch goes to the caller's stream.
 *
 * Math only: no ABI types. All pointers are device memory of the current
 * device; shapes use B, ENC, H1, H2, AUX; layouts are those of abi/auxtrunk.h.
 *
 * Launch sequence (fixed for a given batch; nothing depends on data):
 *   forward:  layer 1 (bias+ELU), layer 2 (bias+ELU), layer 3 (bias)
 *   backward: W2ᵀ/W3ᵀ copy (B >= 16,384), dh2_pre, dh1_pre, grouped dW/db
 *             chunk partials, tree (if B > 256; two launches above 16 nodes)
 * For batches up to 128 (ROWS_MAX_BATCH in trunk_v2.cu) the row-local stages run on the
 * cluster path of trunk_v2_rows.h instead: forward in one launch, dh2_pre and
 * dh1_pre in one launch.
 * Within a call, every launch after the first is a programmatic dependent
 * launch (trunk_v2_pdl.cuh): it becomes resident while its predecessor runs,
 * copies its weights, then waits for the predecessor to complete. The first
 * launch of each call is ordinary, so work the caller queued before the call
 * has completed before any of it runs. Stream capture keeps these edges.
 */
#ifndef AUXTRUNK_TRUNK_V2_H
#define AUXTRUNK_TRUNK_V2_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "auxtrunk.h"
#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The flat layout of abi/auxtrunk.h for the six gradients, W1 b1 W2 b2 W3
 * b3, shared by every chunk partial in the workspace and by the launches
 * that sum them (the exact tree and the fast chunk sum): gradient i occupies floats
 * [off[i], off[i+1]) for i = 0..5 (dW1 db1 dW2 db2 dW3 db3), and off[6] = P,
 * the parameter count. */
typedef struct v2_grad_layout {
    size_t off[7];
} v2_grad_layout_t;

static inline v2_grad_layout_t v2_grad_layout(atk_dims_t d)
{
    const v2_grad_layout_t L = {{AUXTRUNK_W1_OFFSET(&d), AUXTRUNK_B1_OFFSET(&d),
                                 AUXTRUNK_W2_OFFSET(&d), AUXTRUNK_B2_OFFSET(&d),
                                 AUXTRUNK_W3_OFFSET(&d), AUXTRUNK_B3_OFFSET(&d),
                                 AUXTRUNK_PARAM_COUNT(&d)}};
    return L;
}

/* The backward workspace of a batch, carved once for the exact and the fast
 * backward: dh2_pre [B, H2], dh1_pre [B, H1], W2ᵀ [H2, H1], W3ᵀ [AUX, H2],
 * then the chunk partials (as many as the backward needs, up to the end of
 * the workspace). floats: what comes before the partials. ws may be NULL
 * (sizes only). */
typedef struct v2_workspace {
    float *dh2, *dh1, *w2t, *w3t, *partials;
    size_t floats;
} v2_workspace_t;

static inline v2_workspace_t v2_workspace_carve(atk_dims_t d, int batch, float *ws)
{
    const size_t n_dh2 = (size_t)batch * d.h2, n_dh1 = (size_t)batch * d.h1;
    const size_t n_w2t = (size_t)d.h1 * d.h2, n_w3t = (size_t)d.h2 * d.aux;
    v2_workspace_t W = {NULL, NULL, NULL, NULL, NULL, n_dh2 + n_dh1 + n_w2t + n_w3t};
    if (ws) {
        W.dh2 = ws;
        W.dh1 = W.dh2 + n_dh2;
        W.w2t = W.dh1 + n_dh1;
        W.w3t = W.w2t + n_w2t;
        W.partials = W.w3t + n_w3t;
    }
    return W;
}

/* Floats of workspace backward needs for batches up to max_batch: dh2_pre
 * and dh1_pre [max_batch, H2+H1], W2 and W3 transposed (H1*H2 + H2*AUX), and
 * the tree nodes of the batch sums when max_batch > 256: one partial of every
 * parameter (P) per 256-sample chunk, or per pair of chunks where the
 * gradient launch folds pairs (large batches), so at most
 * ceil(max_batch/256) * P and about half of that at large max_batch. */
size_t v2_workspace_floats(atk_dims_t d, int max_batch);

/* w2t [H2, H1] = W2ᵀ and w3t [AUX, H2] = W3ᵀ, in one launch on stream: the
 * hidden-gradient GEMMs (dh = d · Wᵀ) then read their weight operand in the
 * forward's orientation. Values are copied, never rounded. Used by the exact
 * and the fast backward. */
cudaError_t v2_transpose_hidden_weights(atk_dims_t d, const atk_params_t *p, float *w2t, float *w3t,
                                        cudaStream_t stream);

/* The canonical pairwise tree (abi/auxtrunk_canon.h, section 3) over nodes
 * tree nodes in the workspace, node i at partials + i * P (flat layout
 * v2_grad_layout), into the six gradients (overwrite, or g = g + result if
 * accumulate). Each node must be an aligned subtree of the chunk tree of
 * the same size (a chunk, or a chunk pair summed left + right), so that the
 * tree over the nodes is the upper levels of the chunk tree. One or two
 * launches, each a programmatic dependent of the stream's previous launch,
 * which wrote the nodes. nodes >= 1 (one node is copied, or added). */
cudaError_t v2_tree_sum(atk_dims_t d, float *partials, int nodes, const atk_grads_t *g,
                        int accumulate, cudaStream_t stream);
/* The same tree for the gradients first..last only (0: dW1, db1; 1: dW2,
 * db2; 2: dW3, db3; 0 <= first <= last <= 2): it reads and writes only
 * their parts of the nodes and of g, so two calls on disjoint ranges may
 * run at once on two streams (each gradient gets the bits of v2_tree_sum).
 * cudaErrorInvalidValue (nothing launched) outside that domain. */
cudaError_t v2_tree_sum_of(atk_dims_t d, float *partials, int nodes, const atk_grads_t *g,
                           int accumulate, int first, int last, cudaStream_t stream);

/* Loads every kernel of this file and of trunk_v2_rows.cu on the current
 * device (even under lazy module loading), so that no later launch loads
 * code, e.g. inside a host's graph capture, raises their shared-memory limits,
 * and checks that the small-batch path's clusters fit. Call once per device
 * at init. */
cudaError_t v2_prepare(void);

/* Forward: h1 [B,H1], h2 [B,H2] (scratch or recorded) and out [B,AUX]. */
cudaError_t v2_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch, float *h1,
                       float *h2, float *out, cudaStream_t stream);

/* Backward: the six gradients (overwrite, or g = g + result if accumulate)
 * from x, the recorded h1/h2 and dout. workspace holds v2_workspace_floats. */
cudaError_t v2_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                        const float *h2, const float *dout, int batch, const atk_grads_t *g,
                        int accumulate, float *workspace, cudaStream_t stream);

/* Whether a backward given a second stream forks onto it (1) or runs on
 * stream alone (0): where side, fork and join are given, side is not
 * stream, and stream is being captured into a graph, whose fork and join
 * are edges. Eager, two cross-stream waits cost more than the overlap gives
 * back (H200: docs/perf-notes-v3-fast.md, "The backward forked"); a stream
 * whose capture status cannot be read (the legacy stream beside another
 * stream's capture) runs alone. */
int v2_forks(cudaStream_t stream, cudaStream_t side, cudaEvent_t fork, cudaEvent_t join);
/* The same test for a backward that also forks in eager calls: side, fork
 * and join given, side not stream, and stream either being captured or
 * not capturing at all (a stream whose capture status cannot be read runs
 * alone). */
int v2_forks_eager(cudaStream_t stream, cudaStream_t side, cudaEvent_t fork, cudaEvent_t join);

/* The fork and the join of a forked backward. v2_fork records fork on
 * stream and makes side wait for it: side's next launches run after what
 * stream holds so far. v2_join records join on side and makes stream wait
 * for it; it is called once side has waited, whatever failed since, so
 * that a capture of stream is never left forked, and returns the first
 * error of side_error, stream_error and its own. */
cudaError_t v2_fork(cudaStream_t stream, cudaStream_t side, cudaEvent_t fork);
cudaError_t v2_join(cudaStream_t stream, cudaStream_t side, cudaEvent_t join,
                    cudaError_t side_error, cudaError_t stream_error);

/* v2_backward, the same bits, with a second stream to fork onto where
 * v2_forks says so: side a non-blocking stream of the current device, fork
 * and join two events made without timing. From B = 257 (the batches whose
 * hidden gradients are two launches) the call records fork on stream once
 * dh2_pre is queued, runs dW2, db2, dW3, db3 (their launch of the grouped
 * weight-gradient kernel and their tree) on side while dh1_pre, dW1, db1
 * run on stream, records join on side and makes stream wait for it. side is
 * the caller's to keep: the device work of two calls that share it must not
 * overlap, as for the workspace. */
cudaError_t v2_backward_forked(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                               const float *h2, const float *dout, int batch, const atk_grads_t *g,
                               int accumulate, float *workspace, cudaStream_t stream,
                               cudaStream_t side, cudaEvent_t fork, cudaEvent_t join);
/* v2_backward_forked forking where v2_forks_eager says so: in eager calls
 * too (cuda-v3 calls it where that measured faster; the same bits). */
cudaError_t v2_backward_forked_eager(atk_dims_t d, const atk_params_t *p, const float *x,
                                     const float *h1, const float *h2, const float *dout,
                                     int batch, const atk_grads_t *g, int accumulate,
                                     float *workspace, cudaStream_t stream, cudaStream_t side,
                                     cudaEvent_t fork, cudaEvent_t join);

/* ------------------------------------------------------------------------- */
/* Fast mode (AUXTRUNK_CONFIG_FAST): trunk_v2_fast.cu                        */
/*
 * The same trunk on TF32 tensor cores (mma.sync.m16n8k8, operands rounded to
 * TF32 with cvt.rn, fp32 accumulation; the ELU of layers 1 and 2 from the
 * hardware exponential, within about 1e-7 absolute). Not bit-exact and not the canonical
 * order; still deterministic (no atomics, a summation order fixed by the
 * widths and the batch), still capture-friendly (no allocation, no
 * synchronisation, launches on the given stream only), and x is never
 * differentiated.
 *
 * Tolerance, against the double reference with the norm-relative measure of
 * every numeric test (max |got - ref| / max |ref| per tensor, ref64_max_rel_err):
 *     V2_FAST_TOL = 1e-2 for out and each of the six gradients.
 * Why: TF32 keeps 10 explicit mantissa bits, so rounding an operand costs at
 * most u = 2^-11 = 4.9e-4 relative, and one product of two rounded operands
 * at most 2u = 9.8e-4. Round-to-nearest errors are unbiased and independent
 * across the terms of a dot product, so a K-term sum picks up an error that
 * grows like sqrt(K), as the sum itself does: a GEMM stage adds about 2u of
 * norm-relative error whatever K is (fp32 accumulation adds ~1e-7·sqrt(K),
 * negligible). The longest chain of TF32 stages in the trunk is five deep
 * (x·W1, h1·W2, dout·W3ᵀ, dh2·W2ᵀ, xᵀ·dh1 for dW1); adding the five
 * stages' errors linearly, as if they never cancelled, gives 5 · 2u = 4.9e-3.
 * The tolerance doubles that. Expected measurements: about 1e-3.
 * The argument treats the stages' relative errors as independent of the
 * data; the gradients' are not once the pre-activations z are large: TF32
 * errs on z by about 1e-3 · |z|, and ELU'(z) = e^z near z = 0 turns that
 * into a relative error of the hidden gradients. Inputs 100 times the unit
 * scale stay inside the bound (measured 2.6e-3 for cuda-v3's fast mode,
 * whose backward was this one); at 1,000 times the weight gradients exceed
 * it (emulated 2.8e-2; docs/perf-notes-v3-fast.md).
 *
 * Domain: every width a multiple of 4, every pointer 16-byte aligned, and a
 * batch of at least V2_FAST_MIN_BATCH. Outside it, the calls run the exact
 * kernels above (canonical bits): below that batch the 128 x 128 tensor-core
 * tiles leave most of the GPU idle and the exact path is faster (measured on
 * the H200, docs/perf-history.md). Workspace: the larger of the exact kernels' and the fast
 * kernels' (dh2/dh1 [max_batch, H2+H1], W2ᵀ and W3ᵀ, plus nc chunk partials
 * of all P parameters, nc <= min(264 / weight tiles, ceil(max_batch / 256)):
 * 26 for the production topology), since either may run.
 */

/* The tolerance above, for tests and documentation. */
#define V2_FAST_TOL 1e-2

/* Smallest batch the fast kernels take (see Domain above). */
#define V2_FAST_MIN_BATCH 2048

/* 1 if the fast kernels take this topology (every width a multiple of 4). */
int v2_fast_supported(atk_dims_t d);

/* Floats of workspace v2_fast_backward needs for batches up to max_batch
 * (at least v2_workspace_floats, for the exact fallback). */
size_t v2_fast_workspace_floats(atk_dims_t d, int max_batch);

/* v2_prepare, plus the fast kernels: loads them and raises their dynamic
 * shared-memory limit (96 KiB per block). Once per device at init. */
cudaError_t v2_fast_prepare(void);

/* As v2_forward / v2_backward, in fast mode (exact kernels outside the fast
 * domain). workspace holds v2_fast_workspace_floats. */
cudaError_t v2_fast_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                            float *h1, float *h2, float *out, cudaStream_t stream);
cudaError_t v2_fast_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                             const float *h2, const float *dout, int batch, const atk_grads_t *g,
                             int accumulate, float *workspace, cudaStream_t stream);

/* The second half of v2_fast_backward: the six weight and bias gradients from
 * x, the records and dout, and dh2_pre, dh1_pre already in the workspace
 * where v2_workspace_carve puts them (the first half's launches, or another
 * kernel computing the same tensors, wrote them). Inside the fast domain only:
 * the caller has checked it (topology, batch, 16-byte alignment of every
 * pointer, as v2_fast_backward does). */
cudaError_t v2_fast_weight_grads(atk_dims_t d, const float *x, const float *h1, const float *h2,
                                 const float *dout, int batch, const atk_grads_t *g, int accumulate,
                                 float *workspace, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V2_H */
