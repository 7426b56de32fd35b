/*
 * cpu_plugin.c — libauxtrunk.so "cpu-ref", the CPU reference plugin:
 * kernels/cpu (exact, canonical order; deterministic) behind the shared host
 * adapter (plugin/common/host_plugin.c), which implements every entry of the
 * ABI. This file only translates ABI types into kernel types.
 *
 * Host memory per handle, besides the adapter's h1/h2 record: kernels/cpu's
 * inference scratch (independent of the batch) and its backward workspace
 * (never proportional to the batch).
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cpu_trunk.h"
#include "host_plugin.h"

#define CPU_STR_(x) #x
#define CPU_STR(x) CPU_STR_(x)

static size_t infer_workspace(const atp_dims_t *d)
{
    return cpu_trunk_infer_workspace(atp_kernel_dims(d));
}

static size_t backward_workspace(const atp_dims_t *d)
{
    return cpu_trunk_backward_workspace(atp_kernel_dims(d), d->max_batch);
}

static void forward(void *state, const atp_dims_t *d, const auxtrunk_params_t *p, const float *x,
                    int32_t batch, float *h1, float *h2, float *out)
{
    (void)state;
    const cpu_params_t v = atp_kernel_params(p);
    cpu_trunk_forward(atp_kernel_dims(d), &v, x, batch, h1, h2, out);
}

static void infer(void *state, const atp_dims_t *d, const auxtrunk_params_t *p, const float *x,
                  int32_t batch, float *out, float *ws)
{
    (void)state;
    const cpu_params_t v = atp_kernel_params(p);
    cpu_trunk_infer(atp_kernel_dims(d), &v, x, batch, out, ws);
}

static void backward(void *state, const atp_dims_t *d, const auxtrunk_params_t *p,
                     const float *x, const float *h1, const float *h2, const float *dout,
                     int32_t batch, const auxtrunk_grads_t *g, int accumulate, float *ws)
{
    (void)state;
    const cpu_params_t v = atp_kernel_params(p);
    const cpu_grads_t gr = atp_kernel_grads(g);
    cpu_trunk_backward(atp_kernel_dims(d), &v, x, h1, h2, dout, batch, &gr, accumulate, ws);
}

const atp_host_kernels_t atp_host_plugin_kernels = {
    .impl_name = "cpu-ref",
    .kernel_version = "cpu-ref " AUXTRUNK_KERNEL_VERSION " (canon " CPU_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT,
    .infer_workspace = infer_workspace,
    .backward_workspace = backward_workspace,
    .forward = forward,
    .infer = infer,
    .backward = backward,
};
