/*
 * cuda_plugin.c — every entry of abi/auxtrunk.h for a CUDA plugin, on top of
 * the plugin's atc_plugin_kernels (see cuda_plugin.h). Every pointer is CUDA
 * device memory of the handle's device; every call validates all of its
 * arguments before it enqueues anything, then enqueues its launches on the
 * host's stream and returns without synchronising.
 */
#include <stdlib.h>

#include "auxtrunk.h"
#include "cuda_common.h"
#include "cuda_plugin.h"
#include "plugin_common.h"

#define ATC_ALIGN 256 /* bytes; every buffer of the device block starts aligned */

struct auxtrunk_handle {
    atp_handle_base_t base; /* first: plugin/common reads the magic here */
    int device;             /* resolved ordinal the handle runs on */
    void *block;            /* the one device allocation */
    size_t block_bytes;
    float *h1, *h2;   /* recorded activations */
    float *ih1, *ih2; /* infer's activations */
    void *workspace;  /* the kernel set's scratch */
};

static const atc_kernels_t *const K = &atc_plugin_kernels;

static size_t aligned(size_t bytes) { return (bytes + ATC_ALIGN - 1) / ATC_ALIGN * ATC_ALIGN; }

/* ------------------------------------------------------------------------- */
/* Lifecycle                                                                 */

static int32_t cuda_init(const auxtrunk_config_t *config, auxtrunk_handle_t **out_handle)
{
    atp_dims_t dims;
    uint32_t flags;
    int32_t requested;
    int32_t st;
    char why[160];

    if (!out_handle)
        return AUXTRUNK_E_NULL_POINTER;
    if ((st = atp_config_read(config, K->config_flags, &dims, &flags, &requested)) != AUXTRUNK_OK)
        return st;
    int device;
    if ((st = atc_device_resolve(requested, &device, why, sizeof why)) != AUXTRUNK_OK)
        return st; /* no handle yet, so no last error to hold why */

    auxtrunk_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        return AUXTRUNK_E_OUT_OF_MEMORY;
    atp_handle_base_init(&h->base, &dims, flags, requested);
    h->device = device;

    const size_t rows = (size_t)dims.max_batch;
    const size_t b1 = aligned(rows * (size_t)dims.h1 * sizeof(float));
    const size_t b2 = aligned(rows * (size_t)dims.h2 * sizeof(float));
    const size_t bw = aligned(K->workspace_bytes(&dims, flags));
    h->block_bytes = 2 * (b1 + b2) + bw;

    atc_device_guard_t g;
    if ((st = atc_device_enter(&g, &h->base, device)) != AUXTRUNK_OK)
        goto fail;
    st = ATC_CHECK(&h->base, cudaMalloc(&h->block, h->block_bytes));
    if (st == AUXTRUNK_OK) {
        st = ATC_CHECK(&h->base, K->prepare(flags));
        if (st != AUXTRUNK_OK)
            (void)ATC_CHECK(NULL, cudaFree(h->block)); /* keeps the first error */
    }
    st = atc_device_leave(&g, &h->base, st);
    if (st != AUXTRUNK_OK)
        goto fail;

    char *p = h->block;
    h->h1 = (float *)p;
    h->h2 = (float *)(p += b1);
    h->ih1 = (float *)(p += b2);
    h->ih2 = (float *)(p += b1);
    h->workspace = (p += b2);
    *out_handle = h;
    return AUXTRUNK_OK;

fail:
    free(h);
    return st;
}

static int32_t cuda_destroy(auxtrunk_handle_t *h)
{
    if (!h)
        return AUXTRUNK_OK;
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    /* cudaFree waits for the device to finish the work that may still use
     * the block, so the handle's outstanding work is complete first. */
    atc_device_guard_t g;
    st = atc_device_enter(&g, &h->base, h->device);
    if (st == AUXTRUNK_OK) {
        st = ATC_CHECK(&h->base, cudaFree(h->block));
        st = atc_device_leave(&g, &h->base, st);
    }
    atp_handle_base_retire(&h->base);
    free(h);
    return st;
}

/* ------------------------------------------------------------------------- */
/* Forward, infer, backward                                                  */

/* forward and infer differ only in where h1/h2 go and whether the batch is
 * recorded. */
static int32_t run_forward(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                           int32_t batch, float *out, uint32_t flags, void *stream, int record)
{
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    atp_space_t space = atc_space(&h->device);
    if ((st = atp_check_forward(&h->base, params, x, batch, out, flags, &space)) != AUXTRUNK_OK)
        return st;

    atc_device_guard_t g;
    if ((st = atc_device_enter(&g, &h->base, h->device)) != AUXTRUNK_OK)
        return st;
    st = ATC_CHECK(&h->base, K->forward(&h->base.dims, h->base.config_flags, params, x, batch,
                                        record ? h->h1 : h->ih1, record ? h->h2 : h->ih2, out,
                                        h->workspace, (cudaStream_t)stream));
    st = atc_device_leave(&g, &h->base, st);

    if (record)
        /* A forward that failed part way leaves no usable record. */
        h->base.recorded_batch = st == AUXTRUNK_OK ? batch : 0;
    if (st == AUXTRUNK_OK)
        atp_ok(&h->base);
    return st;
}

static int32_t cuda_forward(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                            int32_t batch, float *out, uint32_t flags, void *stream)
{
    return run_forward(h, params, x, batch, out, flags, stream, 1);
}

static int32_t cuda_infer(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                          int32_t batch, float *out, uint32_t flags, void *stream)
{
    return run_forward(h, params, x, batch, out, flags, stream, 0);
}

static int32_t cuda_backward(auxtrunk_handle_t *h, const auxtrunk_params_t *params,
                             const float *x, const float *dout, int32_t batch,
                             const auxtrunk_grads_t *grads, uint32_t flags, void *stream)
{
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    atp_space_t space = atc_space(&h->device);
    st = atp_check_backward(&h->base, params, x, dout, batch, grads, flags, &space);
    if (st != AUXTRUNK_OK)
        return st;

    atc_device_guard_t g;
    if ((st = atc_device_enter(&g, &h->base, h->device)) != AUXTRUNK_OK)
        return st;
    const int accumulate = (flags & AUXTRUNK_BACKWARD_ACCUMULATE) != 0;
    st = ATC_CHECK(&h->base, K->backward(&h->base.dims, h->base.config_flags, params, x, h->h1,
                                         h->h2, dout, batch, grads, accumulate, h->workspace,
                                         (cudaStream_t)stream));
    st = atc_device_leave(&g, &h->base, st);
    if (st == AUXTRUNK_OK)
        atp_ok(&h->base);
    return st;
}

/* ------------------------------------------------------------------------- */
/* Queries                                                                   */

static int32_t cuda_memory_usage(const auxtrunk_handle_t *h, auxtrunk_memory_t *out)
{
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    /* The handle was created non-const by init; only its error text changes. */
    return atp_memory_report((atp_handle_base_t *)&h->base, out, sizeof *h, h->block_bytes);
}

static const char *cuda_last_error(const auxtrunk_handle_t *h)
{
    return atp_check_handle(h) == AUXTRUNK_OK ? h->base.last_error : "";
}

/* ------------------------------------------------------------------------- */
/* The entry                                                                 */

int32_t auxtrunk_plugin_entry(const auxtrunk_host_info_t *host, auxtrunk_api_t *api)
{
    const auxtrunk_api_t mine = {
        .struct_size = sizeof(auxtrunk_api_t),
        .abi_version = AUXTRUNK_ABI_VERSION,
        .caps = K->caps,
        .impl_name = K->impl_name,
        .kernel_version = K->kernel_version,
        .status_string = atp_status_string,
        .init = cuda_init,
        .destroy = cuda_destroy,
        .forward = cuda_forward,
        .infer = cuda_infer,
        .backward = cuda_backward,
        .memory_usage = cuda_memory_usage,
        .last_error = cuda_last_error,
    };
    return atp_negotiate(host, api, &mine);
}
