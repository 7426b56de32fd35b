/*
 * cpu_blocked_plugin.c — libauxtrunk.so "cpu-blocked": kernels/cpu_blocked (a
 * second exact CPU kernel version, bit for bit the same as kernels/cpu)
 * behind the shared host adapter (plugin/common/host_plugin.c), which
 * implements every entry of the ABI. This file only translates ABI types
 * into kernel types; only the kernels underneath differ from plugin/cpu (the
 * point of a second version).
 *
 * Host memory per handle, besides the adapter's h1/h2 record: an inference
 * scratch of INFER_ROWS rows and kernels/cpu_blocked's backward workspace.
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cpu_blocked.h"
#include "host_plugin.h"

#define CPB_STR_(x) #x
#define CPB_STR(x) CPB_STR_(x)

/* Samples per inference block: rows are independent in section 1, so a block
 * scratch gives the training forward's bits without touching its record. */
#define INFER_ROWS 64

/* [INFER_ROWS, H1] then [INFER_ROWS, H2]. */
static size_t infer_workspace(const atp_dims_t *d)
{
    return (size_t)INFER_ROWS * ((size_t)d->h1 + (size_t)d->h2);
}

static size_t backward_workspace(const atp_dims_t *d)
{
    return cpb_backward_workspace(atp_kernel_dims(d), d->max_batch);
}

static void forward(void *state, const atp_dims_t *d, const auxtrunk_params_t *p, const float *x,
                    int32_t batch, float *h1, float *h2, float *out)
{
    (void)state;
    const cpb_params_t v = atp_kernel_params(p);
    cpb_forward(atp_kernel_dims(d), &v, x, batch, h1, h2, out);
}

static void infer(void *state, const atp_dims_t *d, const auxtrunk_params_t *p, const float *x,
                  int32_t batch, float *out, float *ws)
{
    (void)state;
    const cpb_dims_t c = atp_kernel_dims(d);
    const cpb_params_t v = atp_kernel_params(p);
    float *h1 = ws, *h2 = ws + (size_t)INFER_ROWS * (size_t)c.h1;
    for (int32_t b0 = 0; b0 < batch; b0 += INFER_ROWS) {
        int32_t rows = batch - b0 < INFER_ROWS ? batch - b0 : INFER_ROWS;
        cpb_forward(c, &v, x + (size_t)b0 * c.enc, rows, h1, h2, out + (size_t)b0 * c.aux);
    }
}

static void backward(void *state, const atp_dims_t *d, const auxtrunk_params_t *p,
                     const float *x, const float *h1, const float *h2, const float *dout,
                     int32_t batch, const auxtrunk_grads_t *g, int accumulate, float *ws)
{
    (void)state;
    const cpb_params_t v = atp_kernel_params(p);
    const cpb_grads_t gr = atp_kernel_grads(g);
    cpb_backward(atp_kernel_dims(d), &v, x, h1, h2, dout, batch, &gr, accumulate, ws);
}

const atp_host_kernels_t atp_host_plugin_kernels = {
    .impl_name = "cpu-blocked",
    .kernel_version = "cpu-blocked 1.0.0 (canon " CPB_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT,
    .infer_workspace = infer_workspace,
    .backward_workspace = backward_workspace,
    .forward = forward,
    .infer = infer,
    .backward = backward,
};
