/*
 * host_plugin.c — every entry of abi/auxtrunk.h for a host-memory plugin, on
 * top of the plugin's atp_host_plugin_kernels (see host_plugin.h). Host
 * memory, synchronous, no device.
 *
 * Every entry checks its handle and arguments (plugin/common) before it
 * writes anything; init allocates every buffer a handle will ever use, so
 * forward, infer and backward never allocate and cannot fail after
 * validation. Nothing here prints.
 */
#include <stdlib.h>
#include <string.h>

#include "auxtrunk.h"
#include "host_plugin.h"
#include "plugin_common.h"

#if defined(__SSE2__) || defined(__x86_64__)
#include <xmmintrin.h>
#define HOST_HAVE_MXCSR 1
#else
#include <fenv.h>
#endif

/* Buffers are aligned for whole vector loads; any alignment gives the same bits. */
#define HOST_ALIGN 64

struct auxtrunk_handle {
    atp_handle_base_t base; /* first member: magic, dims, record, last error */
    float *h1;              /* [max_batch, H1] recorded by forward for backward */
    float *h2;              /* [max_batch, H2] likewise */
    float *infer_ws;        /* inference scratch: never the record */
    float *bwd_ws;          /* backward workspace (the kernel set sizes it) */
    void *state;            /* a stateful kernel set's state, else NULL */
};

static const atp_host_kernels_t *const K = &atp_host_plugin_kernels;

/* ------------------------------------------------------------------------- */
/* Floating-point environment                                                */

/*
 * The canonical order assumes round-to-nearest-even and kept denormals. A
 * host built with -ffast-math (crtfastmath sets FTZ/DAZ) or one that changed
 * the rounding mode or unmasked exceptions would otherwise change the bits or
 * trap, so each computing call runs under the default environment and gives
 * the caller's back afterwards (flags raised inside are not reported). On
 * x86-64 that is the whole MXCSR; elsewhere <fenv.h> resets the rounding mode
 * and exception traps (a target's own flush-to-zero bit is not covered).
 */
#ifdef HOST_HAVE_MXCSR
typedef unsigned int host_fpenv_t;
#define HOST_MXCSR_DEFAULT 0x1F80u /* all exceptions masked, nearest, no FTZ/DAZ */
static host_fpenv_t fpenv_enter(void)
{
    host_fpenv_t saved = _mm_getcsr();
    _mm_setcsr(HOST_MXCSR_DEFAULT);
    return saved;
}
static void fpenv_leave(host_fpenv_t saved) { _mm_setcsr(saved); }
#else
typedef fenv_t host_fpenv_t;
static host_fpenv_t fpenv_enter(void)
{
    host_fpenv_t saved;
    feholdexcept(&saved);
    fesetround(FE_TONEAREST);
    return saved;
}
static void fpenv_leave(host_fpenv_t saved) { fesetenv(&saved); }
#endif

/* ------------------------------------------------------------------------- */
/* Lifecycle                                                                 */

/* destroy's part (atp_destroy): the buffers init allocated. */
static int32_t host_release(auxtrunk_handle_t *h)
{
    if (K->stateful)
        K->stateful->destroy(h->state);
    free(h->bwd_ws);
    free(h->infer_ws);
    free(h->h2);
    free(h->h1);
    return AUXTRUNK_OK;
}

/* n floats, HOST_ALIGN-aligned; adds the bytes to *total. NULL on failure. */
static float *alloc_floats(size_t n, uint64_t *total)
{
    size_t bytes = n * sizeof(float);
    bytes = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
    if (bytes == 0)
        bytes = HOST_ALIGN;
    float *p = aligned_alloc(HOST_ALIGN, bytes);
    if (p)
        *total += bytes;
    return p;
}

static int32_t host_init(const auxtrunk_config_t *config, auxtrunk_handle_t **out_handle)
{
    if (!config || !out_handle)
        return AUXTRUNK_E_NULL_POINTER;
    atp_dims_t dims;
    uint32_t flags;
    int32_t device;
    int32_t st = atp_config_read(config, 0 /* no AUXTRUNK_CONFIG_FAST */, &dims, &flags, &device);
    if (st != AUXTRUNK_OK)
        return st;
    if (device != -1)
        return AUXTRUNK_E_UNSUPPORTED;

    struct auxtrunk_handle *h = calloc(1, sizeof *h);
    if (!h)
        return AUXTRUNK_E_OUT_OF_MEMORY;
    atp_handle_base_init(&h->base, &dims, flags, device);
    h->base.release = host_release;
    uint64_t *bytes = &h->base.host_bytes;
    *bytes = sizeof *h;
    const atk_dims_t d = atp_kernel_dims(&dims);
    size_t B = (size_t)dims.max_batch;
    st = AUXTRUNK_E_OUT_OF_MEMORY;
    if (!(h->h1 = alloc_floats(B * (size_t)dims.h1, bytes)))
        goto fail_h1;
    if (!(h->h2 = alloc_floats(B * (size_t)dims.h2, bytes)))
        goto fail_h2;
    if (K->stateful) {
        uint64_t state_bytes = 0;
        if ((st = K->stateful->create(d, dims.max_batch, &h->state, &state_bytes)) != AUXTRUNK_OK)
            goto fail_state;
        *bytes += state_bytes;
        *out_handle = h;
        return AUXTRUNK_OK;
    }
    if (!(h->infer_ws = alloc_floats(K->infer_workspace(d), bytes)))
        goto fail_infer;
    if (!(h->bwd_ws = alloc_floats(K->backward_workspace(d, dims.max_batch), bytes)))
        goto fail_bwd;
    *out_handle = h;
    return AUXTRUNK_OK;

fail_bwd:
    free(h->infer_ws);
fail_infer:
fail_state:
    free(h->h2);
fail_h2:
    free(h->h1);
fail_h1:
    free(h);
    return st;
}

/* ------------------------------------------------------------------------- */
/* Forward, inference, backward                                              */

/* forward and infer differ only in the kernel (infer keeps its activations
 * in its own scratch) and in whether the batch is recorded. */
static int32_t run_forward(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                           int32_t batch, float *out, uint32_t flags, int record)
{
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    if ((st = atp_check_forward(&h->base, params, x, batch, out, flags, NULL)) != AUXTRUNK_OK)
        return st;
    const atk_dims_t d = atp_kernel_dims(&h->base.dims);
    const atk_params_t p = atp_kernel_params(params);
    host_fpenv_t env = fpenv_enter();
    const atp_host_stateful_t *S = K->stateful;
    if (S && record)
        S->forward(h->state, &p, x, batch, h->h1, h->h2, out);
    else if (S)
        S->infer(h->state, &p, x, batch, out);
    else if (record)
        K->forward(d, &p, x, batch, h->h1, h->h2, out);
    else
        K->infer(d, &p, x, batch, out, h->infer_ws);
    fpenv_leave(env);
    if (record)
        h->base.recorded_batch = batch;
    atp_ok(&h->base);
    return AUXTRUNK_OK;
}

static int32_t host_forward(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                            int32_t batch, float *out, uint32_t flags, void *stream)
{
    (void)stream; /* host plugin: synchronous */
    return run_forward(h, params, x, batch, out, flags, 1);
}

static int32_t host_infer(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                          int32_t batch, float *out, uint32_t flags, void *stream)
{
    (void)stream;
    return run_forward(h, params, x, batch, out, flags, 0);
}

static int32_t host_backward(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                             const float *dout, int32_t batch, const auxtrunk_grads_t *grads,
                             uint32_t flags, void *stream)
{
    (void)stream;
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    st = atp_check_backward(&h->base, params, x, dout, batch, grads, flags, NULL);
    if (st != AUXTRUNK_OK)
        return st;
    const atk_params_t p = atp_kernel_params(params);
    const atk_grads_t g = atp_kernel_grads(grads);
    host_fpenv_t env = fpenv_enter();
    const int accumulate = (flags & AUXTRUNK_BACKWARD_ACCUMULATE) != 0;
    if (K->stateful)
        K->stateful->backward(h->state, &p, x, h->h1, h->h2, dout, batch, &g, accumulate);
    else
        K->backward(atp_kernel_dims(&h->base.dims), &p, x, h->h1, h->h2, dout, batch, &g,
                    accumulate, h->bwd_ws);
    fpenv_leave(env);
    atp_ok(&h->base);
    return AUXTRUNK_OK;
}

/* ------------------------------------------------------------------------- */
/* The entry symbol                                                          */

/* The plugin's whole table; destroy, memory_usage and last_error are
 * plugin/common's. */
static auxtrunk_api_t host_api(void)
{
    const auxtrunk_api_t mine = {
        .caps = K->caps,
        .impl_name = K->impl_name,
        .kernel_version = K->kernel_version,
        .init = host_init,
        .forward = host_forward,
        .infer = host_infer,
        .backward = host_backward,
    };
    return atp_api(mine);
}

int32_t auxtrunk_plugin_entry(const auxtrunk_host_info_t *host, auxtrunk_api_t *api)
{
    const auxtrunk_api_t mine = host_api();
    return atp_negotiate(host, api, &mine);
}
