/*
 * trunk_v3_fast.h — fast mode (AUXTRUNK_CONFIG_FAST) of CUDA kernel version
 * 3: the trunk on TF32 tensor cores. Math only: no ABI types; pointers are
 * device memory of the current device, shapes and layouts as in
 * abi/auxtrunk.h.
 *
 * Which kernels run (fixed by the widths and the batch; nothing depends on
 * data):
 *   B >= V3_WGMMA_MIN_BATCH  the Hopper layer GEMM below, where the device
 *   (1,024)                  runs its sm_90a image, the widths are in its
 *                            domain and every pointer is 16-byte aligned: the
 *                            forward in three launches (bias and ELU fused,
 *                            staging variant 2), or in one chain launch
 *                            where v3_wgmma_chain_forward_picked says so (the
 *                            same bits), the backward's hidden
 *                            gradients dh2_pre, dh1_pre on its ELU' form (two
 *                            launches, the weights read as stored: no
 *                            transposed copy), then the weight and bias
 *                            gradients from dh2_pre and dh1_pre in the
 *                            workspace, on the same GEMM's tensor cores
 *                            (v3_wgmma_weight_grads, two launches) where
 *                            V3_WGMMA_WEIGHT_GRADS is 1, else cuda-v2's fast
 *                            launches (v2_fast_weight_grads); where
 *                            V3_WGMMA_DW3 is 1 (not by default), from
 *                            V3_WGMMA_DW3_MIN_BATCH (49,152) the first
 *                            launch computes dW3 and db3 with dh2_pre
 *                            (v3_wgmma_hidden_grad_dw3) and the weight
 *                            gradients' launches dW1 and dW2 only. Every launch
 *                            after the first of a call is a programmatic
 *                            dependent of the one before (pdl below);
 *   otherwise, B < V2_FAST_MIN_BATCH (trunk_v2.h, 2,048)
 *                            cuda-v3's exact path (v3_forward, v3_backward):
 *                            canonical bits, so fast mode is never slower
 *                            than exact mode there;
 *   otherwise                cuda-v2's fast kernels (trunk_v2_fast.cu,
 *                            linked): mma.sync TF32, and cuda-v2's exact
 *                            kernels outside their domain.
 * Deterministic (no atomics; a summation order fixed by the widths and the
 * batch), graph-capturable (no allocation, no synchronisation, launches on
 * the caller's stream, and in a graph captured from v3_fast_backward_forked
 * on the caller's second stream, forked from and joined back to it), no
 * gradient for x.
 *
 * Tolerance, against the double reference with the norm-relative measure of
 * every numeric test (max |got - ref| / max |ref| per tensor):
 *     V3_FAST_TOL = 1e-2 for out and each of the six gradients,
 * cuda-v2's bound (trunk_v2.h: five TF32 stages deep, 2u = 2^-10 each,
 * added as if they never cancelled, doubled). The measure is scale-free for
 * out, but not for the gradients once the pre-activations z are large: TF32
 * errs on z by about 1e-3 · |z|, and ELU'(z) = e^z for z < 0 turns that into
 * a relative error of the hidden gradients where z lies within a few units of
 * 0. Inputs 100 times the unit scale (x in ±1e2) stay well inside the
 * tolerance (emulated: about 2.5e-3; measured 2.8e-3 at B = 4,096 with the
 * wgmma hidden gradients); at x in ±1e3 the weight gradients
 * exceed it (1.4e-2 measured on the H200; figures in
 * docs/perf-notes-v3-fast.md).
 *
 * Workspace: the largest of cuda-v3's exact workspace (its state region
 * first: the exact path below V2_FAST_MIN_BATCH keeps its flags' counts
 * there) and, past that state region, cuda-v2's fast
 * workspace (either may run) or cuda-v2's carve (dh2_pre, dh1_pre, W2ᵀ,
 * W3ᵀ) followed by v3_wgmma_weight_grads' chunk partials and, from
 * V3_WGMMA_MIN_BATCH on (fast mode may pick the chain kernel there, below),
 * its prepared weights (v3_wgmma_chain_scratch_floats; the forward puts
 * them there too), and, where V3_WGMMA_DW3 is 1, from
 * V3_WGMMA_DW3_MIN_BATCH on, the fused dh2_pre launch's partials of dW3 and
 * db3 (v3_wgmma_dw3_partials_floats).
 *
 * The Hopper layer GEMM below (trunk_v3_fast_wgmma.cu: wgmma + TMA, sm_90a):
 * with staging variant 1 it measured slower than cuda-v2's fast forward at
 * every batch; with variant 2 the whole step on it is faster than the exact
 * path from B = 1,024 on the H200 and slower at 512 (docs/perf-notes-v3-fast.md,
 * "The wgmma step from B = 1,024"), hence V3_WGMMA_MIN_BATCH. Its own test
 * (tests/cuda/test_v3_fast_wgmma.cu) checks both variants and the hidden
 * gradients.
 */
#ifndef AUXTRUNK_TRUNK_V3_FAST_H
#define AUXTRUNK_TRUNK_V3_FAST_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tolerance above, for tests and documentation. */
#define V3_FAST_TOL 1e-2
/* Smallest batch whose step runs on the Hopper layer GEMM. */
#define V3_WGMMA_MIN_BATCH 1024
/* Smallest batch whose weight gradients run on the kernel fed by the copy
 * engine (v3_wgmma_weight_grads below; docs/perf-notes-v3-fast.md, "The
 * weight gradients fed by the copy engine"). */
#define V3_WGMMA_WGRAD_TMA_MIN_BATCH 2049
/* Smallest batch whose weight gradients run on wide tiles (128 rows x 256
 * columns; docs/perf-notes-v3-fast.md, "Wide tiles for the weight
 * gradients", "The wide tiles' threshold after the faster sum"). */
#define V3_WGMMA_WGRAD_WIDE_MIN_BATCH 32768

size_t v3_fast_workspace_floats(atk_dims_t d, int max_batch);

/* v3_prepare, v2_fast_prepare and v3_wgmma_prepare. Once per device at init. */
cudaError_t v3_fast_prepare(void);

/* workspace: the handle's (v3_fast_workspace_floats), used as the chain
 * kernel's scratch where fast mode picks it; NULL runs the layer launches. */
cudaError_t v3_fast_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                            float *h1, float *h2, float *out, float *workspace,
                            cudaStream_t stream);
cudaError_t v3_fast_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                             const float *h2, const float *dout, int batch, const atk_grads_t *g,
                             int accumulate, float *workspace, cudaStream_t stream);
/* The same bits, with a second stream to fork onto in a graph: side a
 * stream of the current device other than stream (non-blocking, so that
 * the legacy stream does not serialise it), fork and join two events made
 * without timing. Where the wgmma backward runs and stream is being
 * captured, the call records fork on stream once dh2_pre is queued, runs
 * dW2, db2, dW3, db3 on side after it while dh1_pre, dW1, db1 run on
 * stream, records join on side and makes stream wait for it: the graph
 * forks there and joins before whatever stream runs next (v2_forks says
 * when: not for eager calls, whose cross-stream waits cost more than they
 * save). Below V2_FAST_MIN_BATCH, v3_backward_forked (which forks cuda-v2's
 * exact kernels the same way); elsewhere, or with side NULL,
 * v3_fast_backward. side is the caller's to keep: the device work of two
 * calls that share it must not overlap, as for the workspace. */
cudaError_t v3_fast_backward_forked(atk_dims_t d, const atk_params_t *p, const float *x,
                                    const float *h1, const float *h2, const float *dout, int batch,
                                    const atk_grads_t *g, int accumulate, float *workspace,
                                    cudaStream_t stream, cudaStream_t side, cudaEvent_t fork,
                                    cudaEvent_t join);

/* ------------------------------------------------------------------------- */
/* The Hopper layer GEMM (trunk_v3_fast_wgmma.cu; library                   */
/* auxtrunk_kernels_cuda_v3_sm90a, linked into auxtrunk_kernels_cuda_v3)    */

/* Loads the kernel and the driver's cuTensorMapEncodeTiled (through the
 * runtime, cudaGetDriverEntryPointByVersion: libcuda is never linked). A
 * device without the kernel's sm_90a image, or a driver without the entry
 * point, is not an error: v3_wgmma_available() then answers 0. */
cudaError_t v3_wgmma_prepare(void);
int v3_wgmma_available(void);

/* 1 if v3_wgmma_layer takes these shapes: n and k multiples of 4, k <= 256. */
int v3_wgmma_layer_supported(int m, int n, int k);

/* How a block stages its Wᵀ slice (numbered variants, both built and
 * tested; docs/perf-notes-v3-fast.md): 1 = 4-byte loads of W, a column per
 * thread (the variant measured on the H200); 2 = 16-byte loads, a 4 x 4
 * block per thread transposed in registers (w must be 16-byte aligned). */
#define V3_WGMMA_STAGING_SCALAR 1
#define V3_WGMMA_STAGING_BLOCK4 2

/* pdl (here and below): 0 for an ordinary launch; 1 to launch as a
 * programmatic dependent of the stream's previous launch (as cuda-v2's
 * trunk_v2_pdl.cuh does): the blocks stage w while that launch still runs and
 * wait for it to complete before they touch anything else. Only for a
 * previous launch that writes none of w (the caller's own launch of the same
 * call, never what the caller queued before the call); the results are the
 * same bits either way. */

/* tile (here and below): the shape of one block's tile of the output.
 * TALL 128 rows x 128 columns (each warpgroup 64 rows, all the columns);
 * SHORT 64 x 128 (both warpgroups on the same 64 rows, 64 columns each);
 * NARROW 128 x 64 (each warpgroup 64 rows, the 64 columns): short and
 * narrow tiles make twice the blocks of tall ones for one product, narrow
 * ones with half the weight slice per block; PAIRED narrow tiles with a
 * ring of three slabs instead of four (hidden gradients) or six (forward),
 * 113 KiB a block, so that a block of the next launch fits beside one of
 * this launch on a multiprocessor and stages its weights while this one
 * runs. V3_WGMMA_TILE_AUTO picks narrow tiles where tall ones would keep at
 * most half of the multiprocessors busy, else tall (on an H200 at the
 * production widths: narrow to B = 4,224; short tiles measured slower than
 * narrow ones and are for comparison); fast mode picks paired tiles for a
 * whole call where v3_wgmma_call_tile says so. Every shape gives the same
 * bits: each output's k order is the same. */
#define V3_WGMMA_TILE_AUTO 0
#define V3_WGMMA_TILE_TALL 1
#define V3_WGMMA_TILE_SHORT 2
#define V3_WGMMA_TILE_NARROW 3
#define V3_WGMMA_TILE_PAIRED 4

/* The tile for every layer launch of one call whose products are m x n[i],
 * i < count, launched one after another as dependents: PAIRED where
 * V3_WGMMA_TILE_AUTO would give every one of them narrow tiles and at
 * least one grid would take more than half of the multiprocessors (so that
 * its dependent's blocks find no idle one; at the production widths on the
 * H200, B = 2,049 to 4,224), else V3_WGMMA_TILE_AUTO (also before a
 * successful v3_wgmma_prepare on this device). */
int v3_wgmma_call_tile(int m, const int *n, int count);

/* c [m, n] = act(a [m, k] · w [k, n] + bias [n]), act = ELU if elu, else
 * the identity; a and c 16-byte aligned; staging one of the variants above.
 * One launch on stream; cudaErrorInvalidValue (nothing launched) outside
 * the domain or before a successful v3_wgmma_prepare on this device. */
cudaError_t v3_wgmma_layer(const float *a, const float *w, const float *bias, float *c, int m,
                           int n, int k, int elu, int staging, int pdl, int tile,
                           cudaStream_t stream);

/* A hidden gradient of the backward on the same GEMM:
 *     c [m, n] = (d [m, k] · wᵀ) ⊙ ELU'(y),  ELU' as auxtrunk_canon_elu_grad,
 * w [n, k] the layer's weight as stored (n its inputs, k its outputs: W3 for
 * dh2_pre with d = dout, y = h2; W2 for dh1_pre with d = dh2_pre, y = h1),
 * y [m, n] the record. The tf32 wgmma's B operand (element (k, j) = w[j][k])
 * is K-major as w is stored, so w is staged without a transpose (16-byte
 * loads, rounded to nearest); d is truncated to TF32 as a is above. Same
 * domain as v3_wgmma_layer (v3_wgmma_layer_supported), every pointer 16-byte
 * aligned; one launch on stream, cudaErrorInvalidValue (nothing launched)
 * outside it or before a successful v3_wgmma_prepare on this device. */
cudaError_t v3_wgmma_hidden_grad(const float *d, const float *w, const float *y, float *c, int m,
                                 int n, int k, int pdl, int tile, cudaStream_t stream);

/* dh2_pre with dW3 and db3 in one launch, the first step of a fused
 * backward (built and tested; fast mode calls it only where V3_WGMMA_DW3
 * is 1, from V3_WGMMA_DW3_MIN_BATCH: on an H100 it took 4–6 µs off the
 * graph step at 49,152 and 65,536, on the H200 it added 11–17;
 * docs/perf-notes-v3-fast.md, "dW3 inside the dh2_pre launch"): dh2 as
 * v3_wgmma_hidden_grad(dout, w3, h2, dh2, batch, d.h2,
 * d.aux) computes it on narrow tiles (128 rows x 64 columns, the same k
 * order, so the same bits), and, from the
 * same tiles, dW3 = h2ᵀ · dout and db3 = the column sums of dout, one
 * partial per row-tile group of the launch (at most
 * V3_WGMMA_DW3_MAX_GROUPS) into partials: [h2 · aux] (dW3, the ABI's
 * layout) then [aux] (db3) each. h2 and dout are rounded to nearest (TF32)
 * on the way into the tensor cores' K-major operands; each partial sums its
 * group's tiles in order; the bias sums are fp32 sums of the unrounded dout.
 * v3_wgmma_dw3_sum then adds the partials in group order into g->dw3 and
 * g->db3 (overwriting them, or adding to them if accumulate). Deterministic
 * (no atomics; the order is fixed by the widths, the batch and the
 * device's multiprocessor count). Domain (v3_wgmma_dw3_supported): every
 * width a multiple of 4, aux <= 128; every pointer 16-byte aligned;
 * partials holds v3_wgmma_dw3_partials_floats(d) floats. One launch each on
 * stream, cudaErrorInvalidValue (nothing launched) outside the domain or
 * before a successful v3_wgmma_prepare on this device. */
#define V3_WGMMA_DW3_MAX_GROUPS 64
#ifndef V3_WGMMA_DW3_MIN_BATCH
#define V3_WGMMA_DW3_MIN_BATCH 49152
#endif
int v3_wgmma_dw3_supported(atk_dims_t d);
size_t v3_wgmma_dw3_partials_floats(atk_dims_t d);
cudaError_t v3_wgmma_hidden_grad_dw3(atk_dims_t d, const float *dout, const float *w3,
                                     const float *h2, float *dh2, int batch, float *partials,
                                     int pdl, cudaStream_t stream);
cudaError_t v3_wgmma_dw3_sum(atk_dims_t d, int batch, const atk_grads_t *g, int accumulate,
                             const float *partials, int pdl, cudaStream_t stream);

/* The weight and bias gradients on the same tensor cores, in two launches:
 *     dW1 = xᵀ · dh1, dW2 = h1ᵀ · dh2, dW3 = h2ᵀ · dout, db = column sums,
 * (dh1, dh2 the hidden gradients dh1_pre, dh2_pre), overwriting g, or g = g
 * + result if accumulate. A grouped launch of tiles x batch chunks writes
 * one partial of all P = AUXTRUNK_PARAM_COUNT parameters per chunk (the
 * ABI's flat layout, W1 b1 W2 b2 W3 b3) into partials; a second launch sums
 * them in chunk order. Both operands are transposed into K-major shared
 * memory on the way (rounded to nearest): below V3_WGMMA_WGRAD_TMA_MIN_BATCH
 * on 128 x 128 tiles, each thread loading its column's rows with 4-byte
 * loads, two blocks per SM; from it the rows arrive by TMA as row-major
 * boxes, one block per SM, on 128 x 128 tiles four slabs ahead or, from
 * V3_WGMMA_WGRAD_WIDE_MIN_BATCH, on wide 128 x 256 tiles two and a half
 * slabs ahead, a gradient that makes fewer wide tiles transposed computed
 * as its transpose (dW3 of the production topology). Every kernel sums
 * each output over its chunk's rows in the same k order, so a chunk plan
 * gives the same bits in any of them. The bias sums are fp32 sums of the
 * unrounded g. Deterministic (no atomics, an order fixed
 * by the widths and the batch). Domain: every width a multiple of 4, batch >=
 * 1, every pointer 16-byte aligned and non-null; one pair of launches on
 * stream, cudaErrorInvalidValue (nothing launched) outside it or before a
 * successful v3_wgmma_prepare on this device. pdl applies to the first
 * launch; the second is always a dependent of the first.
 * partials holds v3_wgmma_weight_grads_floats(d, batch) floats: one P per
 * chunk of the largest plan of any batch up to this one, at most
 * 264 / tiles · P (tiles: the 128 x 128 tiles of the three weights, 10 for
 * the production topology, so at most 26 · P; on the 128 x 128 tiles fed by
 * TMA the plan takes at most 132 / tiles chunks, 13 for the production
 * topology, and on wide tiles 132 / wide tiles, 26 of its 5 wide tiles;
 * chunks of 256 rows, or of
 * about 32 rows where the 256-row plan would launch at most 44 blocks, that
 * is to B = 1,024 for the production topology, so 26 · P from B = 832 on),
 * never fewer for a larger batch; 0 outside the domain. */
size_t v3_wgmma_weight_grads_floats(atk_dims_t d, int batch);
cudaError_t v3_wgmma_weight_grads(atk_dims_t d, const float *x, const float *h1, const float *h2,
                                  const float *dout, const float *dh1, const float *dh2, int batch,
                                  const atk_grads_t *g, int accumulate, float *partials, int pdl,
                                  cudaStream_t stream);
/* The same for the gradients first..last only (0: dW1, db1; 1: dW2, db2; 2:
 * dW3, db3; 0 <= first <= last <= 2), in two launches on stream, with the
 * chunk plan of all three, so each gives the bits it gives in the call
 * above; only the operands of those gradients are read (the others may be
 * NULL) and only their parts of partials written, so two calls on disjoint
 * ranges may run at once on two streams. */
cudaError_t v3_wgmma_weight_grads_of(atk_dims_t d, const float *x, const float *h1, const float *h2,
                                     const float *dout, const float *dh1, const float *dh2,
                                     int batch, const atk_grads_t *g, int accumulate,
                                     float *partials, int first, int last, int pdl,
                                     cudaStream_t stream);
/* The kernels of v3_wgmma_weight_grads_of (kernel below): chosen by the
 * batch (AUTO, as every call above), or one kind at any batch, for tests
 * and benchmarks, with that kind's chunk plan (each kind gives the same
 * bits as AUTO wherever AUTO picks it). */
#define V3_WGMMA_WGRAD_AUTO 0
#define V3_WGMMA_WGRAD_LOADS 1 /* 128 x 128 tiles, rows loaded by each thread */
#define V3_WGMMA_WGRAD_TMA 2   /* 128 x 128 tiles, rows by TMA */
#define V3_WGMMA_WGRAD_WIDE 3  /* 128 x 256 tiles, rows by TMA */
cudaError_t v3_wgmma_weight_grads_as(atk_dims_t d, const float *x, const float *h1, const float *h2,
                                     const float *dout, const float *dh1, const float *dh2,
                                     int batch, const atk_grads_t *g, int accumulate,
                                     float *partials, int first, int last, int kernel, int pdl,
                                     cudaStream_t stream);
/* The kind AUTO picks for this batch (V3_WGMMA_WGRAD_LOADS, _TMA or _WIDE;
 * AUTO for batch <= 0). */
int v3_wgmma_weight_grads_kernel(int batch);

/* The chain kernel: a whole forward, or both hidden gradients, in one
 * persistent launch (a block per multiprocessor walking 64- or 128-row
 * tiles: tile below), each
 * layer's output but the last kept in shared memory as the next layer's A
 * operand and stored from there to device memory by TMA, the last one's
 * stored from the registers (the records h1, h2 and out; dh2_pre and
 * dh1_pre, which the weight gradients read). The weights reach
 * the tensor cores slab by slab by TMA from a copy in scratch that a first,
 * small launch writes: K-major (Wᵀ for the forward, W3 and W2 as stored for
 * the hidden gradients) and rounded to TF32 as the layer launches round
 * them. Every output element gets the k order, the rounding and the
 * epilogue of the launches above: the same bits as v3_wgmma_layer's three
 * launches (x → h1 → h2 → out) and v3_wgmma_hidden_grad's two. Domain:
 * every width a multiple of 4 and at most 256 (v3_wgmma_chain_supported),
 * batch >= 1, every pointer non-null and, but the biases, 16-byte aligned;
 * scratch holds v3_wgmma_chain_scratch_floats(d) floats (0 outside the
 * domain) and nothing else may use it until the chain is done. Two
 * launches on stream, the first an ordinary one (whatever the caller
 * queued before is complete before it runs); cudaErrorInvalidValue
 * (nothing launched) outside the domain or before a successful
 * v3_wgmma_prepare on this device.
 * Fast mode takes it for the forward only, with 128-row tiles, where
 * v3_wgmma_chain_forward_picked says (below): on the H200 its forward is
 * faster than the layer launches only where its 128-row tiles make one
 * full wave (46.0 against 51.3 µs eager at 16,384), and slower elsewhere
 * (141.6 against 129.0 at 65,536), and its hidden gradients slower at every
 * batch; per tile its epilogues, in which the tensor cores idle, and its
 * waits for the weights take about as long as its wgmmas
 * (docs/perf-notes-v3-fast.md, "128-row chain tiles"). Both tile shapes stay
 * built and tested, bit for bit against the layer launches. */
int v3_wgmma_chain_supported(atk_dims_t d);
size_t v3_wgmma_chain_scratch_floats(atk_dims_t d);
/* tile (here and below): the chain's row tiles. 64: both warpgroups on a
 * tile's 64 rows, each on half of every layer's columns; 128: each
 * warpgroup on its own 64 rows and every column (half the weight traffic
 * per row, twice the tensor work per slab). AUTO takes 128 where the batch
 * gives at least 7/8 of the multiprocessors a 128-row tile, else 64. Every
 * tile gives the same bits; any other value is cudaErrorInvalidValue. */
#define V3_WGMMA_CHAIN_TILE_AUTO 0
#define V3_WGMMA_CHAIN_TILE_64 64
#define V3_WGMMA_CHAIN_TILE_128 128
cudaError_t v3_wgmma_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                             float *h1, float *h2, float *out, float *scratch, int tile,
                             cudaStream_t stream);
/* dh2 [batch, H2] = (dout · W3ᵀ) ⊙ ELU'(h2), dh1 [batch, H1] = (dh2 · W2ᵀ) ⊙ ELU'(h1). */
cudaError_t v3_wgmma_hidden_grads(atk_dims_t d, const atk_params_t *p, const float *dout,
                                  const float *h1, const float *h2, int batch, float *dh2,
                                  float *dh1, float *scratch, int tile, cudaStream_t stream);
/* 1 where fast mode's forward runs on the chain (128-row tiles) on the
 * current device: where those tiles make a single wave that keeps at least
 * 7/8 of the multiprocessors busy (B from 14,721 to 16,896 on the H200's
 * 132), the one regime where the chain measured faster than the three layer
 * launches (docs/perf-notes-v3-fast.md, "128-row chain tiles"); 0
 * elsewhere, and where v3_wgmma_available() is 0. The hidden gradients
 * always run on the two layer launches, which measured faster at every
 * batch. */
int v3_wgmma_chain_forward_picked(int batch);

/* Whether fast mode's backward calls v3_wgmma_weight_grads (1) or cuda-v2's
 * v2_fast_weight_grads (0) after the wgmma hidden gradients. */
#define V3_WGMMA_WEIGHT_GRADS 1
/* Whether fast mode's backward computes dW3 and db3 in its first launch
 * (v3_wgmma_hidden_grad_dw3) from V3_WGMMA_DW3_MIN_BATCH (1), or in the
 * weight-gradient launches with dW1 and dW2 (0, the default: on the H200
 * the fused launch made the graph step 11 µs longer at 49,152 and 15–17
 * at 65,536, where on an H100 it made it 4–6 µs shorter;
 * docs/perf-notes-v3-fast.md, "dW3 inside the dh2_pre launch"). */
#ifndef V3_WGMMA_DW3
#define V3_WGMMA_DW3 0
#endif

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V3_FAST_H */
