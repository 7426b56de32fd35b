/*
 * plugin_cuda_v1.c — libauxtrunk.so "cuda-v1": kernels/cuda_v1 (the reference
 * GPU design; exact, deterministic, graph-capturable) behind the shared CUDA
 * adapter (plugin/cuda_common/cuda_plugin.c), which implements every entry of
 * the ABI. This file only translates ABI types into kernel types.
 *
 * Device memory per handle, besides the adapter's h1/h2 (record) and ih1/ih2
 * (infer): backward's dh2_pre and dh1_pre, [max_batch, H2] and [max_batch, H1].
 * Production topology, max_batch 65,536: 3 x 128 MiB in all. No per-sample
 * partials: batch sums keep their chunk partials in shared memory.
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cuda_plugin.h"
#include "trunk_v1.h"

#define V1_STR_(x) #x
#define V1_STR(x) V1_STR_(x)

/* dh2 [max_batch, H2] then dh1 [max_batch, H1]. */
static size_t workspace_bytes(const atp_dims_t *d, uint32_t config_flags)
{
    (void)config_flags; /* no AUXTRUNK_CONFIG_FAST: init refuses it */
    return (size_t)d->max_batch * ((size_t)d->h2 + (size_t)d->h1) * sizeof(float);
}

static cudaError_t prepare(uint32_t config_flags)
{
    (void)config_flags;
    return v1_prepare();
}

static cudaError_t forward(const atp_dims_t *d, uint32_t config_flags, const auxtrunk_params_t *p,
                           const float *x, int batch, float *h1, float *h2, float *out,
                           void *workspace, cudaStream_t stream)
{
    (void)config_flags, (void)workspace;
    v1_params_t v = atp_kernel_params(p);
    return v1_forward(atp_kernel_dims(d), &v, x, batch, h1, h2, out, stream);
}

static cudaError_t backward(const atp_dims_t *d, uint32_t config_flags,
                            const auxtrunk_params_t *p, const float *x, const float *h1,
                            const float *h2, const float *dout, int batch,
                            const auxtrunk_grads_t *g, int accumulate, void *workspace,
                            cudaStream_t stream)
{
    (void)config_flags;
    v1_params_t v = atp_kernel_params(p);
    v1_grads_t gr = atp_kernel_grads(g);
    float *dh2 = workspace;
    float *dh1 = dh2 + (size_t)d->max_batch * (size_t)d->h2;
    return v1_backward(atp_kernel_dims(d), &v, x, h1, h2, dout, batch, &gr, accumulate, dh2, dh1,
                       stream);
}

const atc_kernels_t atc_plugin_kernels = {
    .impl_name = "cuda-v1",
    .kernel_version = "cuda-v1 " AUXTRUNK_KERNEL_VERSION " (canon " V1_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT |
            AUXTRUNK_CAP_GRAPH_CAPTURE,
    .config_flags = 0,
    .workspace_bytes = workspace_bytes,
    .prepare = prepare,
    .forward = forward,
    .backward = backward,
};
