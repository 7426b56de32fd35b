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
    const atc_mode_t *mode; /* the kernel set's exact or fast mode */
    void *block;            /* the one device allocation */
    float *h1, *h2;         /* recorded activations */
    float *ih1, *ih2;       /* infer's activations */
    float *workspace;       /* the kernel set's scratch */
    cudaStream_t side;      /* where mode->backward_forked: its second stream */
    cudaEvent_t fork, join; /* ... and the events that fork it off and join it back */
};

static const atc_kernels_t *const K = &atc_plugin_kernels;

/* The AUXTRUNK_CONFIG_* bits init accepts: FAST where the set has a fast mode. */
static uint32_t accepted_flags(void) { return K->fast.forward ? AUXTRUNK_CONFIG_FAST : 0; }

static size_t aligned(size_t bytes) { return (bytes + ATC_ALIGN - 1) / ATC_ALIGN * ATC_ALIGN; }

/* ------------------------------------------------------------------------- */
/* Lifecycle                                                                 */

/* Zeroes n bytes of device memory at p and waits for it, on a stream of its
 * own: the caller's streams, which may be busy (a hot swap in a running
 * host), are neither waited for nor made to wait. */
static cudaError_t zero_now(void *p, size_t n)
{
    cudaStream_t t;
    cudaError_t e = cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), e2;
    if (e != cudaSuccess)
        return e;
    if ((e = cudaMemsetAsync(p, 0, n, t)) == cudaSuccess)
        e = cudaStreamSynchronize(t);
    e2 = cudaStreamDestroy(t);
    return e != cudaSuccess ? e : e2;
}

/* The second stream and its events, where made (each NULL otherwise); the
 * first error is kept. */
static cudaError_t side_free(auxtrunk_handle_t *h)
{
    cudaError_t first = cudaSuccess, e;
    if (h->join && (e = cudaEventDestroy(h->join)) != cudaSuccess)
        first = e;
    if (h->fork && (e = cudaEventDestroy(h->fork)) != cudaSuccess && first == cudaSuccess)
        first = e;
    if (h->side && (e = cudaStreamDestroy(h->side)) != cudaSuccess && first == cudaSuccess)
        first = e;
    h->join = h->fork = NULL;
    h->side = NULL;
    return first;
}

/* The second stream and its events, where the mode forks; on failure none. */
static cudaError_t side_make(auxtrunk_handle_t *h)
{
    cudaError_t e = cudaSuccess;
    if (h->mode->backward_forked &&
        ((e = cudaStreamCreateWithFlags(&h->side, cudaStreamNonBlocking)) != cudaSuccess ||
         (e = cudaEventCreateWithFlags(&h->fork, cudaEventDisableTiming)) != cudaSuccess ||
         (e = cudaEventCreateWithFlags(&h->join, cudaEventDisableTiming)) != cudaSuccess))
        (void)side_free(h);
    return e;
}

/* destroy's part (atp_destroy): the device block, then the second stream.
 * cudaFree waits for the device to finish the work that may still use it,
 * so the handle's outstanding work is complete first. */
static int32_t cuda_release(auxtrunk_handle_t *h)
{
    atc_device_guard_t g;
    int32_t st = atc_device_enter(&g, &h->base, h->device);
    if (st == AUXTRUNK_OK) {
        st = ATC_CHECK(&h->base, cudaFree(h->block));
        const int32_t ss = ATC_CHECK(&h->base, side_free(h));
        st = atc_device_leave(&g, &h->base, st != AUXTRUNK_OK ? st : ss);
    }
    return st;
}

static int32_t cuda_init(const auxtrunk_config_t *config, auxtrunk_handle_t **out_handle)
{
    atp_dims_t dims;
    uint32_t flags;
    int32_t requested;
    int32_t st;
    char why[160];

    if (!out_handle)
        return AUXTRUNK_E_NULL_POINTER;
    if ((st = atp_config_read(config, accepted_flags(), &dims, &flags, &requested)) != AUXTRUNK_OK)
        return st;
    int device;
    if ((st = atc_device_resolve(requested, &device, why, sizeof why)) != AUXTRUNK_OK)
        return st; /* no handle yet, so no last error to hold why */

    auxtrunk_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        return AUXTRUNK_E_OUT_OF_MEMORY;
    atp_handle_base_init(&h->base, &dims, flags, requested);
    h->base.release = cuda_release;
    h->base.host_bytes = sizeof *h;
    h->device = device;
    h->mode = (flags & AUXTRUNK_CONFIG_FAST) ? &K->fast : &K->exact;

    const size_t rows = (size_t)dims.max_batch;
    const size_t b1 = aligned(rows * (size_t)dims.h1 * sizeof(float));
    const size_t b2 = aligned(rows * (size_t)dims.h2 * sizeof(float));
    const size_t bw =
        aligned(h->mode->workspace_floats(atp_kernel_dims(&dims), dims.max_batch) * sizeof(float));
    const size_t block_bytes = 2 * (b1 + b2) + bw;
    h->base.device_bytes = block_bytes;

    atc_device_guard_t g;
    if ((st = atc_device_enter(&g, &h->base, device)) != AUXTRUNK_OK)
        goto fail;
    st = ATC_CHECK(&h->base, cudaMalloc(&h->block, block_bytes));
    if (st == AUXTRUNK_OK) {
        char *p = h->block;
        h->h1 = (float *)p;
        h->h2 = (float *)(p += b1);
        h->ih1 = (float *)(p += b2);
        h->ih2 = (float *)(p += b1);
        h->workspace = (float *)(p += b2);
        /* the workspace starts zeroed (cuda_plugin.h) */
        st = ATC_CHECK(&h->base, zero_now(h->workspace, bw));
        if (st == AUXTRUNK_OK)
            st = ATC_CHECK(&h->base, h->mode->prepare());
        if (st == AUXTRUNK_OK)
            st = ATC_CHECK(&h->base, side_make(h));
        if (st != AUXTRUNK_OK)
            (void)ATC_CHECK(NULL, cudaFree(h->block)); /* keeps the first error */
    }
    st = atc_device_leave(&g, &h->base, st);
    if (st != AUXTRUNK_OK)
        goto fail;

    *out_handle = h;
    return AUXTRUNK_OK;

fail:
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
    const atk_params_t p = atp_kernel_params(params);
    st = ATC_CHECK(&h->base, h->mode->forward(atp_kernel_dims(&h->base.dims), &p, x, batch,
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

static int32_t cuda_backward(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                             const float *dout, int32_t batch, const auxtrunk_grads_t *grads,
                             uint32_t flags, void *stream)
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
    const atk_params_t p = atp_kernel_params(params);
    const atk_grads_t gr = atp_kernel_grads(grads);
    const atk_dims_t d = atp_kernel_dims(&h->base.dims);
    const cudaStream_t s = (cudaStream_t)stream;
    st = ATC_CHECK(&h->base, h->mode->backward_forked
                                 ? h->mode->backward_forked(d, &p, x, h->h1, h->h2, dout, batch,
                                                            &gr, accumulate, h->workspace, s,
                                                            h->side, h->fork, h->join)
                                 : h->mode->backward(d, &p, x, h->h1, h->h2, dout, batch, &gr,
                                                     accumulate, h->workspace, s));
    st = atc_device_leave(&g, &h->base, st);
    if (st == AUXTRUNK_OK)
        atp_ok(&h->base);
    return st;
}

/* ------------------------------------------------------------------------- */
/* The entry                                                                 */

/* destroy, memory_usage and last_error are plugin/common's. */
int32_t auxtrunk_plugin_entry(const auxtrunk_host_info_t *host, auxtrunk_api_t *api)
{
    const auxtrunk_api_t mine = {
        .caps = K->caps,
        .impl_name = K->impl_name,
        .kernel_version = K->kernel_version,
        .init = cuda_init,
        .forward = cuda_forward,
        .infer = cuda_infer,
        .backward = cuda_backward,
    };
    const auxtrunk_api_t all = atp_api(mine);
    return atp_negotiate(host, api, &all);
}
