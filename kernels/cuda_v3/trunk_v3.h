/*
 * trunk_v3.h — CUDA kernel version 3 of the auxtrunk trunk: the small-batch
 * hot path (B <= V3_MAX_BATCH) as one persistent launch per call, the mid
 * path of trunk_v3_mid.h (one persistent launch per call walking a tile
 * list) between V3_MID_MIN_BATCH and V3_MID_MAX_BATCH where the fused path
 * does not run, the large-batch core of trunk_v3_sgemm.h from
 * V3_SGEMM_MIN_BATCH, and cuda-v2's kernels (kernels/cuda_v2, linked, not
 * copied) everywhere else.
 * Exact: every output element is computed in the canonical order of
 * abi/auxtrunk_canon.h, bit-identical to the CPU reference; no atomics, no
 * host synchronisation, every launch on the caller's stream; x is never
 * differentiated.
 *
 * Math only: no ABI types. All pointers are device memory of the current
 * device; shapes and layouts as in abi/auxtrunk.h.
 *
 * The fused path (trunk_v3.cu) runs when the topology is in its domain
 * (every width a multiple of 4, ENC, H1, H2, AUX <= 256), the batch is at
 * most V3_FUSED_MAX_BATCH (up to V3_FUSED_TM1_MAX_BATCH where one row a
 * thread fits; V3_MAX_BATCH through v3_fused_*), every pointer
 * is 16-byte aligned, and its row blocks fit on the device at once (at
 * most 16 clusters of 8 blocks, counted at v3_prepare with one block per
 * SM: every launch asks for more than half an SM's shared memory, so two
 * blocks never share one); the backward also needs cooperative cluster
 * launches:
 *
 *   forward:  one cluster launch. A cluster of 8 blocks owns 8, 16, 32 or 64
 *             batch rows; block j owns column slice j of every layer (32
 *             columns of H1 and H2, AUX/8 of the output), holds its weight
 *             slices in shared memory, and pushes each hidden layer's slice
 *             into all eight blocks by st.async, completing on the
 *             receiver's mbarrier (no cluster barrier per layer).
 *   backward: one cooperative cluster launch on every cluster that fits
 *             (at 8 rows a cluster and B <= 32 at the production widths,
 *             on the clusters the forward leaves free, so that it is
 *             placed while the forward runs), and nothing before it, a
 *             programmatic dependent launch where the device takes both
 *             (its blocks may be placed while the kernel ahead ends, and
 *             read nothing but their rows of W3 before they wait for it;
 *             the forward lets them in at its start). Blocks of two groups
 *             of 128 threads: the first computes dh2_pre and dh1_pre
 *             row-local in the clusters that hold rows (dh2_pre pushed to
 *             the cluster), written to the workspace; then both groups of
 *             every block take weight- and bias-gradient tiles side by
 *             side (dW3, db3 first: they need nothing from this launch;
 *             dW2/db2 and dW1/db1 wait on per-block counting flags,
 *             release store / acquire poll); each tile
 *             covers one pair of 256-sample chunks and adds the pair (the
 *             canonical tree's first level); for more than one pair
 *             (B > 512) a flag grid barrier, then the last tree level.
 *
 * Measured (docs/perf-notes-v3.md), the fused path is faster than cuda-v2's
 * kernels wherever its row blocks take one row a thread (TM = 1: about 5.4
 * µs a graph step at B = 32, 3.2-5.3 µs at 129-240 on the H200, 3.37.0)
 * and level with them at B = 256 (TM = 2), hence V3_FUSED_MAX_BATCH and
 * V3_FUSED_TM1_MAX_BATCH; it is the vehicle of the small-batch design
 * work, exact and tested bit for bit.
 *
 * Workspace: v3_workspace_floats = the state region (V3_STATE_FLOATS: the
 * fused backward's flags, one set of 48 KiB per TM = 1, 2, 4 (its 8 row
 * groups run on TM = 1's grid and set), which keep
 * counts from call to call and must start equal: the adapter zeroes the
 * workspace once at init), then the larger of cuda-v2's workspace, the
 * large-batch core's and the fused path's (dh2/dh1
 * [min(max_batch, V3_MAX_BATCH), H2 + H1], and two tree nodes of every
 * parameter when max_batch > 512). Only the fused backward touches the
 * state region; every other path gets the workspace past it. The paths
 * never run in one call, so they share the rest.
 */
#ifndef AUXTRUNK_TRUNK_V3_H
#define AUXTRUNK_TRUNK_V3_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "trunk_types.h"
#include "trunk_v3_mid.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest batch the fused kernels can run (the DQN hot path): the in-kernel
 * tree, the workspace and the trace program are sized for it. */
#define V3_MAX_BATCH 1024

/* Largest batch v3_forward and v3_backward always give to the fused path;
 * above it, up to V3_FUSED_TM1_MAX_BATCH (below), they run cuda-v2's kernels
 * up to V3_SGEMM_MIN_BATCH (trunk_v3_sgemm.h). */
#define V3_FUSED_MAX_BATCH 128

/* Above V3_FUSED_MAX_BATCH and up to this batch, v3_forward and v3_backward
 * give the fused path the batches whose forward and backward row blocks
 * both fit at once with one row a thread (16 rows a cluster: B <= 240 where
 * 15 clusters fit, as on the H100 and H200); cuda-v2's kernels take the
 * rest. With two rows a thread (B = 256) the fused step measured level with
 * cuda-v2's, with one 3.2-5.3 µs shorter (docs/perf-notes-v3.md). */
#define V3_FUSED_TM1_MAX_BATCH 256

/* Floats at the workspace's start that keep flags from call to call: the
 * fused backward's (3 sets x 3 flags x 128 blocks x one 128-byte line),
 * then the mid path's (V3_MID_FLAG_FLOATS, trunk_v3_mid.h). */
#define V3_FUSED_FLAG_FLOATS (3 * 3 * 128 * 32)
#define V3_STATE_FLOATS (V3_FUSED_FLAG_FLOATS + V3_MID_FLAG_FLOATS)

/* Batches from V3_MID_MIN_BATCH to V3_MID_MAX_BATCH that the fused path
 * does not take run the mid path (trunk_v3_mid.h) where its domain holds.
 * On an H100 its graph step was 2-17 % shorter than cuda-v2's kernels at
 * every batch measured from 272 to 1,792, level at 257, and longer at 256
 * (the fused path) and at 1,984 and 2,047 (docs/perf-notes-v3.md, "3.54.3
 * over its range" and "3.55.0's landing call"). Its bits have been shown
 * on a GPU up to B = 1,031 (test_cuda_plugin.c, exact_small_batches and
 * exact_production), so it stops at 1,024 until exact_mid_batches (up to
 * 1,792) has run on one. */
#define V3_MID_MIN_BATCH 257
#define V3_MID_MAX_BATCH 1024

/* Floats of workspace v3_backward needs for batches up to max_batch. */
size_t v3_workspace_floats(atk_dims_t d, int max_batch);

/* cuda-v2's preparation (v2_prepare), plus the fused kernels: raises their
 * shared-memory limits, records how many of their clusters fit on the
 * device at once (the backward's flags need every block resident), and
 * checks that a cooperative cluster launch is accepted. Once per device at
 * init. */
cudaError_t v3_prepare(void);

/* 1 if the topology is in the fused path's domain (above). */
int v3_supported(atk_dims_t d);

/* Forward: h1 [B,H1], h2 [B,H2] (recorded or scratch) and out [B,AUX]: the
 * fused path up to V3_FUSED_MAX_BATCH (V3_FUSED_TM1_MAX_BATCH where one row
 * a thread fits), the mid path from V3_MID_MIN_BATCH to V3_MID_MAX_BATCH
 * (its flags in the workspace's state region: workspace holds
 * v3_workspace_floats, or is NULL, which leaves the mid path out), the
 * large-batch core from V3_SGEMM_MIN_BATCH (inside its domain), cuda-v2's
 * kernels between and elsewhere. */
cudaError_t v3_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch, float *h1,
                       float *h2, float *out, float *workspace, cudaStream_t stream);

/* Backward: the six gradients (overwrite, or g = g + result if accumulate)
 * from x, the recorded h1/h2 and dout. workspace holds v3_workspace_floats. Dispatched
 * as v3_forward. */
cudaError_t v3_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                        const float *h2, const float *dout, int batch, const atk_grads_t *g,
                        int accumulate, float *workspace, cudaStream_t stream);
/* v3_backward, the same bits, with a second stream to fork onto (as
 * v2_backward_forked takes it): the batches from V3_FORK_MIN_BATCH fork
 * dW2 and dW3 beside dh1_pre and dW1, on cuda-v2's kernels in a graph
 * (v2_backward_forked) and, from V3_EAGER_FORK_MIN_BATCH, in eager calls
 * too (v2_backward_forked_eager), or on the large-batch core's in a graph
 * and in eager calls (v3_sgemm_backward_forked); smaller batches (at 256
 * the fork measured 0.4 µs slower on the H200, level at 512) and cuda-v2's
 * eager calls below V3_EAGER_FORK_MIN_BATCH run as v3_backward. On an
 * H100 the eager fork of cuda-v2's kernels measured level at 1,024, 1.5–5
 * µs slower at 2,048 to 8,192 and 3.5–6 µs faster at 12,288
 * (docs/perf-notes-v3.md, "Eager forks below the core"). */
#define V3_FORK_MIN_BATCH 1024
#define V3_EAGER_FORK_MIN_BATCH 12288
cudaError_t v3_backward_forked(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                               const float *h2, const float *dout, int batch, const atk_grads_t *g,
                               int accumulate, float *workspace, cudaStream_t stream,
                               cudaStream_t side, cudaEvent_t fork, cudaEvent_t join);

/* The same two with the fused path wherever it can run (batch up to
 * V3_MAX_BATCH, the conditions above), cuda-v2's kernels elsewhere: the
 * trace and racecheck program (tests/cuda/trace_v3) runs the fused kernels
 * with these at the batches v3_forward gives to cuda-v2. */
cudaError_t v3_fused_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                             float *h1, float *h2, float *out, cudaStream_t stream);
cudaError_t v3_fused_backward(atk_dims_t d, const atk_params_t *p, const float *x,
                              const float *h1, const float *h2, const float *dout, int batch,
                              const atk_grads_t *g, int accumulate, float *workspace,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V3_H */
