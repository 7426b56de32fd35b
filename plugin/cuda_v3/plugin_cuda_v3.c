/*
 * plugin_cuda_v3.c — libauxtrunk.so "cuda-v3": kernels/cuda_v3 (the fused
 * small-batch path: one launch per call for B <= V3_MAX_BATCH; cuda-v2's
 * kernels everywhere else; exact, deterministic, graph-capturable) behind
 * the shared CUDA adapter (plugin/cuda_common/cuda_plugin.c). This file only
 * translates ABI types into kernel types. Exact mode only: a handle asking
 * for AUXTRUNK_CONFIG_FAST is refused (the adapter answers E_FLAGS).
 *
 * Device memory per handle, besides the adapter's h1/h2/ih1/ih2:
 * v3_workspace_floats(dims, max_batch) floats, the larger of cuda-v2's
 * workspace and the fused path's (48 KiB of flags, dh2/dh1
 * [min(max_batch, 1024), H2+H1], two tree nodes of all P parameters when
 * max_batch > 512): the two paths never run in one call. For the production
 * topology that is cuda-v2's figure (plugin/cuda_v2/plugin_cuda_v2.c).
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cuda_plugin.h"
#include "trunk_v3.h"

#define V3_STR_(x) #x
#define V3_STR(x) V3_STR_(x)

static size_t workspace_bytes(const atp_dims_t *d, uint32_t config_flags)
{
    (void)config_flags;
    return v3_workspace_floats(atp_kernel_dims(d), d->max_batch) * sizeof(float);
}

static cudaError_t prepare(uint32_t config_flags)
{
    (void)config_flags;
    return v3_prepare();
}

static cudaError_t forward(const atp_dims_t *d, uint32_t config_flags, const auxtrunk_params_t *p,
                           const float *x, int batch, float *h1, float *h2, float *out,
                           void *workspace, cudaStream_t stream)
{
    (void)config_flags, (void)workspace;
    const atk_params_t v = atp_kernel_params(p);
    return v3_forward(atp_kernel_dims(d), &v, x, batch, h1, h2, out, stream);
}

static cudaError_t backward(const atp_dims_t *d, uint32_t config_flags,
                            const auxtrunk_params_t *p, const float *x, const float *h1,
                            const float *h2, const float *dout, int batch,
                            const auxtrunk_grads_t *g, int accumulate, void *workspace,
                            cudaStream_t stream)
{
    (void)config_flags;
    const atk_params_t v = atp_kernel_params(p);
    const atk_grads_t gr = atp_kernel_grads(g);
    return v3_backward(atp_kernel_dims(d), &v, x, h1, h2, dout, batch, &gr, accumulate,
                       workspace, stream);
}

const atc_kernels_t atc_plugin_kernels = {
    .impl_name = "cuda-v3",
    .kernel_version = "cuda-v3 " AUXTRUNK_KERNEL_VERSION " (canon " V3_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT |
            AUXTRUNK_CAP_GRAPH_CAPTURE,
    .config_flags = 0,
    .workspace_bytes = workspace_bytes,
    .prepare = prepare,
    .forward = forward,
    .backward = backward,
};
