/*
 * plugin_cuda_v2.c — libauxtrunk.so "cuda-v2": kernels/cuda_v2 (register-tiled,
 * fused epilogues, split-batch gradients; exact, deterministic,
 * graph-capturable) behind the shared CUDA adapter (plugin/cuda_common/
 * cuda_plugin.c). This file only translates ABI types into kernel types and
 * picks the mode: a handle configured with AUXTRUNK_CONFIG_FAST runs the TF32
 * kernels of trunk_v2_fast.cu (AUXTRUNK_CAP_FAST_MODE; not bit-exact,
 * tolerance V2_FAST_TOL = 1e-2 against the double reference, see trunk_v2.h),
 * any other handle the exact kernels (AUXTRUNK_CAP_EXACT holds for it).
 *
 * Device memory per handle, besides the adapter's h1/h2/ih1/ih2:
 * v2_workspace_floats(dims, max_batch) floats = dh2/dh1 [max_batch, H2+H1],
 * W2ᵀ/W3ᵀ, and, when max_batch > 256, at most ceil(max_batch/256) tree nodes
 * of all P parameters (one per chunk, or per pair of chunks at large batches;
 * production topology, max_batch 65,536: 128 MiB + 0.4 MiB + 80 MiB); in
 * fast mode v2_fast_workspace_floats, which is never less (the exact kernels
 * run for topologies or pointers outside the fast kernels' domain).
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cuda_plugin.h"
#include "trunk_v2.h"

#define V2_STR_(x) #x
#define V2_STR(x) V2_STR_(x)

static int fast(uint32_t config_flags) { return (config_flags & AUXTRUNK_CONFIG_FAST) != 0; }

static size_t workspace_bytes(const atp_dims_t *d, uint32_t config_flags)
{
    const v2_dims_t k = atp_kernel_dims(d);
    const size_t floats = fast(config_flags) ? v2_fast_workspace_floats(k, d->max_batch)
                                             : v2_workspace_floats(k, d->max_batch);
    return floats * sizeof(float);
}

static cudaError_t prepare(uint32_t config_flags)
{
    return fast(config_flags) ? v2_fast_prepare() : v2_prepare();
}

static cudaError_t forward(const atp_dims_t *d, uint32_t config_flags, const auxtrunk_params_t *p,
                           const float *x, int batch, float *h1, float *h2, float *out,
                           void *workspace, cudaStream_t stream)
{
    (void)workspace;
    v2_params_t v = atp_kernel_params(p);
    const v2_dims_t k = atp_kernel_dims(d);
    return fast(config_flags) ? v2_fast_forward(k, &v, x, batch, h1, h2, out, stream)
                              : v2_forward(k, &v, x, batch, h1, h2, out, stream);
}

static cudaError_t backward(const atp_dims_t *d, uint32_t config_flags,
                            const auxtrunk_params_t *p, const float *x, const float *h1,
                            const float *h2, const float *dout, int batch,
                            const auxtrunk_grads_t *g, int accumulate, void *workspace,
                            cudaStream_t stream)
{
    v2_params_t v = atp_kernel_params(p);
    v2_grads_t gr = atp_kernel_grads(g);
    if (fast(config_flags))
        return v2_fast_backward(atp_kernel_dims(d), &v, x, h1, h2, dout, batch, &gr, accumulate,
                                workspace, stream);
    return v2_backward(atp_kernel_dims(d), &v, x, h1, h2, dout, batch, &gr, accumulate, workspace,
                       stream);
}

const atc_kernels_t atc_plugin_kernels = {
    .impl_name = "cuda-v2",
    .kernel_version = "cuda-v2 " AUXTRUNK_KERNEL_VERSION " (canon " V2_STR(AUXTRUNK_CANON_VERSION) ")",
    /* EXACT describes the default mode (abi/auxtrunk.h); FAST_MODE adds the
     * TF32 mode on request. */
    .caps = AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT |
            AUXTRUNK_CAP_GRAPH_CAPTURE | AUXTRUNK_CAP_FAST_MODE,
    .config_flags = AUXTRUNK_CONFIG_FAST,
    .workspace_bytes = workspace_bytes,
    .prepare = prepare,
    .forward = forward,
    .backward = backward,
};
