/*
 * cpu_blocked_plugin.c — libauxtrunk.so "cpu-blocked": kernels/cpu_blocked (a
 * second exact CPU kernel version, bit for bit the same as kernels/cpu)
 * behind the shared host adapter (plugin/common/host_plugin.c), which
 * implements every entry of the ABI. This file is the table, plus the
 * blocked inference over the kernels' forward; only the kernels underneath
 * differ from plugin/cpu (the point of a second version).
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
static size_t infer_workspace(atk_dims_t d)
{
    return (size_t)INFER_ROWS * ((size_t)d.h1 + (size_t)d.h2);
}

static void infer(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch, float *out,
                  float *ws)
{
    float *h1 = ws, *h2 = ws + (size_t)INFER_ROWS * (size_t)d.h1;
    for (int32_t b0 = 0; b0 < batch; b0 += INFER_ROWS) {
        int32_t rows = batch - b0 < INFER_ROWS ? batch - b0 : INFER_ROWS;
        cpb_forward(d, p, x + (size_t)b0 * d.enc, rows, h1, h2, out + (size_t)b0 * d.aux);
    }
}

const atp_host_kernels_t atp_host_plugin_kernels = {
    .impl_name = "cpu-blocked",
    .kernel_version = "cpu-blocked " AUXTRUNK_KERNEL_VERSION " (canon " CPB_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT,
    .infer_workspace = infer_workspace,
    .backward_workspace = cpb_backward_workspace,
    .forward = cpb_forward,
    .infer = infer,
    .backward = cpb_backward,
};
