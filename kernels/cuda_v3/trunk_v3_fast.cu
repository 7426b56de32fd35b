/*
 * trunk_v3_fast.cu — the entry points of cuda-v3's fast mode
 * (trunk_v3_fast.h): which kernels a call runs. No kernels of its own: the
 * exact path below V2_FAST_MIN_BATCH (trunk_v3.cu); from V3_WGMMA_MIN_BATCH
 * the Hopper layer GEMM for the forward (trunk_v3_fast_wgmma.cu, staging
 * variant 2; the chain kernel on 128-row tiles where
 * v3_wgmma_chain_forward_picked says) and for the backward's hidden
 * gradients where the device runs
 * it, and for the weight gradients after them (V3_WGMMA_WEIGHT_GRADS);
 * cuda-v2's fast kernels for the rest (trunk_v2_fast.cu, linked from
 * auxtrunk_kernels_cuda_v2).
 */
#include "trunk_v3_fast.h"

#include <stdint.h>

#include "trunk_v2.h"
#include "trunk_v3.h"

namespace {

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The wgmma forward takes the call: the batch is large enough for it to
 * win, the device runs it, every layer is in its domain, and everything it
 * reads or writes with 16-byte accesses (activations by TMA, weights by the
 * block-transposing staging) is 16-byte aligned. */
bool wgmma_forward_takes(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                         const float *h1, const float *h2, const float *out)
{
    return batch >= V3_WGMMA_MIN_BATCH && v3_wgmma_available() &&
           v3_wgmma_layer_supported(batch, d.h1, d.enc) &&
           v3_wgmma_layer_supported(batch, d.h2, d.h1) &&
           v3_wgmma_layer_supported(batch, d.aux, d.h2) && aligned16(x) && aligned16(h1) &&
           aligned16(h2) && aligned16(out) && aligned16(p->w1) && aligned16(p->w2) &&
           aligned16(p->w3);
}

/* The wgmma hidden gradients take the backward: as above for the forward,
 * plus what cuda-v2's fast weight gradients need after them (its fast
 * domain, every pointer they read or write 16-byte aligned; dh2_pre and
 * dh1_pre in the workspace are then aligned too, every width being a
 * multiple of 4). A null pointer goes to cuda-v2's backward, which refuses
 * it. */
bool wgmma_backward_takes(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                          const float *h2, const float *dout, int batch, const atk_grads_t *g,
                          const float *workspace)
{
    return p && g && x && h1 && h2 && dout && workspace && batch >= V3_WGMMA_MIN_BATCH &&
           v3_wgmma_available() && v2_fast_supported(d) &&
           v3_wgmma_layer_supported(batch, d.h2, d.aux) &&
           v3_wgmma_layer_supported(batch, d.h1, d.h2) && aligned16(x) && aligned16(h1) &&
           aligned16(h2) && aligned16(dout) && aligned16(p->w2) && aligned16(p->w3) &&
           aligned16(workspace) && aligned16(g->dw1) && aligned16(g->db1) && aligned16(g->dw2) &&
           aligned16(g->db2) && aligned16(g->dw3) && aligned16(g->db3);
}

/* Where the chain kernel's prepared weights go in the workspace: after the
 * backward's carve and the weight gradients' partials (both sized for
 * this batch, never more than for the handle's max_batch). */
float *chain_scratch(atk_dims_t d, int batch, float *workspace)
{
    return v2_workspace_carve(d, batch, workspace).partials +
           v3_wgmma_weight_grads_floats(d, batch);
}

/* Where the fused dh2_pre + dW3 launch's partials go: after the chain's
 * prepared weights. */
float *dw3_partials(atk_dims_t d, int batch, float *workspace)
{
    return chain_scratch(d, batch, workspace) + v3_wgmma_chain_scratch_floats(d);
}

/* The backward's first launch computes dW3 and db3 too (V3_WGMMA_DW3). */
bool dw3_fused(atk_dims_t d, int batch)
{
    return V3_WGMMA_DW3 && V3_WGMMA_WEIGHT_GRADS && batch >= V3_WGMMA_DW3_MIN_BATCH &&
           v3_wgmma_dw3_supported(d);
}

} /* namespace */

extern "C" size_t v3_fast_workspace_floats(atk_dims_t d, int max_batch)
{
    /* exact: its own state region and the rest; every other path here: the
     * state region (left to the exact path) and its own scratch past it */
    const size_t exact = v3_workspace_floats(d, max_batch);
    const size_t fast = V3_STATE_FLOATS + v2_fast_workspace_floats(d, max_batch);
    /* the chain's prepared weights wherever the wgmma path may run (the
     * batches fast mode picks the chain at depend on the device) */
    const size_t chain = max_batch >= V3_WGMMA_MIN_BATCH ? v3_wgmma_chain_scratch_floats(d) : 0;
    const size_t dw3 = dw3_fused(d, max_batch) ? v3_wgmma_dw3_partials_floats(d) : 0;
    const size_t wgrad = V3_STATE_FLOATS + v2_workspace_carve(d, max_batch, NULL).floats +
                         v3_wgmma_weight_grads_floats(d, max_batch) + chain + dw3;
    const size_t most = fast > exact ? fast : exact;
    return wgrad > most ? wgrad : most;
}

extern "C" cudaError_t v3_fast_prepare(void)
{
    cudaError_t e;
    if ((e = v3_prepare()) != cudaSuccess || (e = v2_fast_prepare()) != cudaSuccess)
        return e;
    return v3_wgmma_prepare();
}

extern "C" cudaError_t v3_fast_forward(atk_dims_t d, const atk_params_t *p, const float *x,
                                       int batch, float *h1, float *h2, float *out,
                                       float *workspace, cudaStream_t stream)
{
    float *const ws = workspace ? workspace + V3_STATE_FLOATS : NULL; /* past the exact state */
    if (!wgmma_forward_takes(d, p, x, batch, h1, h2, out))
        return batch < V2_FAST_MIN_BATCH ? v3_forward(d, p, x, batch, h1, h2, out, workspace, stream)
                                         : v2_fast_forward(d, p, x, batch, h1, h2, out, stream);
    if (v3_wgmma_chain_forward_picked(batch) && v3_wgmma_chain_supported(d) && ws &&
        aligned16(ws)) /* the prepared weights, then one launch */
        return v3_wgmma_forward(d, p, x, batch, h1, h2, out, chain_scratch(d, batch, ws),
                                V3_WGMMA_CHAIN_TILE_128, stream);
    /* the first launch of the call is an ordinary one: whatever the caller
     * queued before (an optimizer step writing the weights) is complete
     * before any block runs; the next ones stage their weights early */
    const int st = V3_WGMMA_STAGING_BLOCK4;
    const int widths[3] = {d.h1, d.h2, d.aux}, tile = v3_wgmma_call_tile(batch, widths, 3);
    cudaError_t e;
    if ((e = v3_wgmma_layer(x, p->w1, p->b1, h1, batch, d.h1, d.enc, 1, st, 0, tile, stream)) !=
            cudaSuccess ||
        (e = v3_wgmma_layer(h1, p->w2, p->b2, h2, batch, d.h2, d.h1, 1, st, 1, tile, stream)) !=
            cudaSuccess)
        return e;
    return v3_wgmma_layer(h2, p->w3, p->b3, out, batch, d.aux, d.h2, 0, st, 1, tile, stream);
}

extern "C" cudaError_t v3_fast_backward_forked(atk_dims_t d, const atk_params_t *p,
                                               const float *x, const float *h1, const float *h2,
                                               const float *dout, int batch, const atk_grads_t *g,
                                               int accumulate, float *workspace,
                                               cudaStream_t stream, cudaStream_t side,
                                               cudaEvent_t fork, cudaEvent_t join)
{
    /* the exact path below V2_FAST_MIN_BATCH takes the whole workspace;
     * every other path its scratch past the exact path's state region */
    float *const ws = workspace ? workspace + V3_STATE_FLOATS : NULL;
    if (!wgmma_backward_takes(d, p, x, h1, h2, dout, batch, g, ws))
        return batch < V2_FAST_MIN_BATCH
                   ? v3_backward_forked(d, p, x, h1, h2, dout, batch, g, accumulate, workspace,
                                        stream, side, fork, join)
                   : v2_fast_backward(d, p, x, h1, h2, dout, batch, g, accumulate, ws,
                                      stream);
    /* dh2_pre and dh1_pre where cuda-v2's weight gradients read them */
    const v2_workspace_t W = v2_workspace_carve(d, batch, ws);
    const int widths[2] = {d.h2, d.h1}, tile = v3_wgmma_call_tile(batch, widths, 2);
    cudaError_t e;
    /* an ordinary first launch and a dependent, as in the forward; where
     * the first one computes dW3 and db3 too, the weight-gradient launches
     * compute dW1 and dW2 only, and dW3's sum follows dW2's */
    const bool fused = dw3_fused(d, batch);
    float *const part3 = fused ? dw3_partials(d, batch, ws) : NULL;
    const int last = fused ? 1 : 2;
    e = fused ? v3_wgmma_hidden_grad_dw3(d, dout, p->w3, h2, W.dh2, batch, part3, 0, stream)
              : v3_wgmma_hidden_grad(dout, p->w3, h2, W.dh2, batch, d.h2, d.aux, 0, tile, stream);
    if (e != cudaSuccess)
        return e;
    auto dh1 = [&]() {
        return v3_wgmma_hidden_grad(W.dh2, p->w2, h1, W.dh1, batch, d.h1, d.h2, 1, tile, stream);
    };
    auto dw3_sum = [&](cudaStream_t q) {
        return fused ? v3_wgmma_dw3_sum(d, batch, g, accumulate, part3, 1, q) : cudaSuccess;
    };
    if (!V3_WGMMA_WEIGHT_GRADS || !v2_forks(stream, side, fork, join)) { /* one stream */
        if ((e = dh1()) != cudaSuccess)
            return e;
        if (!V3_WGMMA_WEIGHT_GRADS)
            return v2_fast_weight_grads(d, x, h1, h2, dout, batch, g, accumulate, ws,
                                        stream);
        if ((e = v3_wgmma_weight_grads_of(d, x, h1, h2, dout, W.dh1, W.dh2, batch, g, accumulate,
                                          W.partials, 0, last, 1, stream)) != cudaSuccess)
            return e;
        return dw3_sum(stream);
    }
    /* dW2 (and dW3) need only dh2_pre: on side, beside dh1_pre and dW1 */
    if ((e = v2_fork(stream, side, fork)) != cudaSuccess)
        return e;
    cudaError_t es = v3_wgmma_weight_grads_of(d, NULL, h1, h2, dout, NULL, W.dh2, batch, g,
                                              accumulate, W.partials, 1, last, 0, side);
    if (es == cudaSuccess)
        es = dw3_sum(side);
    if ((e = dh1()) == cudaSuccess)
        e = v3_wgmma_weight_grads_of(d, x, NULL, NULL, NULL, W.dh1, NULL, batch, g, accumulate,
                                     W.partials, 0, 0, 1, stream);
    return v2_join(stream, side, join, es, e);
}

extern "C" cudaError_t v3_fast_backward(atk_dims_t d, const atk_params_t *p, const float *x,
                                        const float *h1, const float *h2, const float *dout,
                                        int batch, const atk_grads_t *g, int accumulate,
                                        float *workspace, cudaStream_t stream)
{
    return v3_fast_backward_forked(d, p, x, h1, h2, dout, batch, g, accumulate, workspace, stream,
                                   NULL, NULL, NULL);
}
