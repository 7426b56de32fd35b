/*
 * trunk_v3_fast.cu — the entry points of cuda-v3's fast mode
 * (trunk_v3_fast.h): which kernels a call runs. No kernels of its own: the
 * exact path below V2_FAST_MIN_BATCH (trunk_v3.cu), cuda-v2's fast kernels
 * from there on (trunk_v2_fast.cu, linked from auxtrunk_kernels_cuda_v2).
 * The Hopper layer GEMM (trunk_v3_fast_wgmma.cu) is not called here: on the
 * H200 it was slower than cuda-v2's fast forward at every batch measured
 * (docs/perf-notes-v3-fast.md).
 */
#include "trunk_v3_fast.h"

#include "trunk_v2.h"
#include "trunk_v3.h"

extern "C" size_t v3_fast_workspace_floats(atk_dims_t d, int max_batch)
{
    const size_t exact = v3_workspace_floats(d, max_batch);
    const size_t fast = v2_fast_workspace_floats(d, max_batch);
    return fast > exact ? fast : exact;
}

extern "C" cudaError_t v3_fast_prepare(void)
{
    cudaError_t e = v3_prepare();
    return e != cudaSuccess ? e : v2_fast_prepare();
}

extern "C" cudaError_t v3_fast_forward(atk_dims_t d, const atk_params_t *p, const float *x,
                                       int batch, float *h1, float *h2, float *out,
                                       cudaStream_t stream)
{
    if (batch < V2_FAST_MIN_BATCH)
        return v3_forward(d, p, x, batch, h1, h2, out, stream);
    return v2_fast_forward(d, p, x, batch, h1, h2, out, stream);
}

extern "C" cudaError_t v3_fast_backward(atk_dims_t d, const atk_params_t *p, const float *x,
                                        const float *h1, const float *h2, const float *dout,
                                        int batch, const atk_grads_t *g, int accumulate,
                                        float *workspace, cudaStream_t stream)
{
    if (batch < V2_FAST_MIN_BATCH)
        return v3_backward(d, p, x, h1, h2, dout, batch, g, accumulate, workspace, stream);
    return v2_fast_backward(d, p, x, h1, h2, dout, batch, g, accumulate, workspace, stream);
}
