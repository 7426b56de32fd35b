/*
 * plugin_cuda_v1.c — libauxtrunk.so "cuda-v1": the ABI of abi/auxtrunk.h on
 * top of kernels/cuda_v1 (the reference GPU design, exact, deterministic,
 * graph-capturable).
 *
 * Every pointer is CUDA device memory of the handle's device; every call
 * validates all of its arguments (plugin/common, with the CUDA memory-space
 * checker) before it enqueues anything, then enqueues its launches on the
 * host's stream and returns without synchronising. The CUDA runtime is
 * linked statically, so the library needs only the driver at run time.
 *
 * Device memory of a handle, allocated once by init as one block:
 *   h1, h2     [max_batch, H1], [max_batch, H2]  recorded by forward for backward
 *   ih1, ih2   the same shapes                   infer's activations, so that
 *                                                infer never touches the record
 *   dh1, dh2   the same shapes                   backward's dh1_pre, dh2_pre
 * The host orders the handle's calls; the device work of two calls on one
 * handle must not overlap either (same stream, or an event between them),
 * since they share these buffers.
 */
#include <stdlib.h>

#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cuda_common.h"
#include "plugin_common.h"
#include "trunk_v1.h"

#define V1_IMPL_NAME "cuda-v1"
#define V1_STR_(x) #x
#define V1_STR(x) V1_STR_(x)
#define V1_KERNEL_VERSION "cuda-v1 1.0.0 (canon " V1_STR(AUXTRUNK_CANON_VERSION) ")"
#define V1_ALIGN 256 /* bytes; every buffer of the device block starts aligned */

struct auxtrunk_handle {
    atp_handle_base_t base; /* first: plugin/common reads the magic here */
    int device;             /* resolved ordinal the handle runs on */
    void *block;            /* the one device allocation */
    size_t block_bytes;
    float *h1, *h2;   /* recorded activations */
    float *ih1, *ih2; /* infer's activations */
    float *dh1, *dh2; /* backward workspace */
};

/* ------------------------------------------------------------------------- */
/* Helpers                                                                   */

static size_t aligned(size_t bytes) { return (bytes + V1_ALIGN - 1) / V1_ALIGN * V1_ALIGN; }

static v1_dims_t dims_of(const auxtrunk_handle_t *h)
{
    v1_dims_t d = {h->base.dims.enc, h->base.dims.h1, h->base.dims.h2, h->base.dims.aux};
    return d;
}

static v1_params_t params_of(const auxtrunk_params_t *p)
{
    v1_params_t v = {p->w1, p->b1, p->w2, p->b2, p->w3, p->b3};
    return v;
}

/* ------------------------------------------------------------------------- */
/* Lifecycle                                                                 */

static int32_t v1_init(const auxtrunk_config_t *config, auxtrunk_handle_t **out_handle)
{
    atp_dims_t dims;
    uint32_t flags;
    int32_t requested;
    int32_t st;
    char why[160];

    if (!out_handle)
        return AUXTRUNK_E_NULL_POINTER;
    if ((st = atp_config_read(config, 0, &dims, &flags, &requested)) != AUXTRUNK_OK)
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
    h->block_bytes = 3 * (b1 + b2);

    atc_device_guard_t g;
    if ((st = atc_device_enter(&g, &h->base, device)) != AUXTRUNK_OK)
        goto fail;
    st = ATC_CHECK(&h->base, cudaMalloc(&h->block, h->block_bytes));
    if (st == AUXTRUNK_OK) {
        st = ATC_CHECK(&h->base, v1_prepare()); /* no code loading in later calls */
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
    h->dh1 = (float *)(p += b2);
    h->dh2 = (float *)(p += b1);
    *out_handle = h;
    return AUXTRUNK_OK;

fail:
    free(h);
    return st;
}

static int32_t v1_destroy(auxtrunk_handle_t *h)
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
    h->base.magic = ATP_MAGIC_DEAD;
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
    v1_params_t p = params_of(params);
    st = ATC_CHECK(&h->base, v1_forward(dims_of(h), &p, x, batch, record ? h->h1 : h->ih1,
                                        record ? h->h2 : h->ih2, out, (cudaStream_t)stream));
    st = atc_device_leave(&g, &h->base, st);

    if (record)
        /* A forward that failed part way leaves no usable record. */
        h->base.recorded_batch = st == AUXTRUNK_OK ? batch : 0;
    if (st == AUXTRUNK_OK)
        atp_ok(&h->base);
    return st;
}

static int32_t v1_forward_entry(auxtrunk_handle_t *h, const auxtrunk_params_t *params,
                                const float *x, int32_t batch, float *out, uint32_t flags,
                                void *stream)
{
    return run_forward(h, params, x, batch, out, flags, stream, 1);
}

static int32_t v1_infer_entry(auxtrunk_handle_t *h, const auxtrunk_params_t *params,
                              const float *x, int32_t batch, float *out, uint32_t flags,
                              void *stream)
{
    return run_forward(h, params, x, batch, out, flags, stream, 0);
}

static int32_t v1_backward_entry(auxtrunk_handle_t *h, const auxtrunk_params_t *params,
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
    v1_params_t p = params_of(params);
    v1_grads_t gr = {grads->dw1, grads->db1, grads->dw2, grads->db2, grads->dw3, grads->db3};
    const int accumulate = (flags & AUXTRUNK_BACKWARD_ACCUMULATE) != 0;
    st = ATC_CHECK(&h->base, v1_backward(dims_of(h), &p, x, h->h1, h->h2, dout, batch, &gr,
                                         accumulate, h->dh2, h->dh1, (cudaStream_t)stream));
    st = atc_device_leave(&g, &h->base, st);
    if (st == AUXTRUNK_OK)
        atp_ok(&h->base);
    return st;
}

/* ------------------------------------------------------------------------- */
/* Queries                                                                   */

static int32_t v1_memory_usage(const auxtrunk_handle_t *h, auxtrunk_memory_t *out)
{
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    if ((st = atp_check_memory_out(out)) != AUXTRUNK_OK)
        return st;
    out->host_bytes = sizeof *h;
    out->device_bytes = h->block_bytes;
    return AUXTRUNK_OK;
}

static const char *v1_last_error(const auxtrunk_handle_t *h)
{
    return atp_check_handle(h) == AUXTRUNK_OK ? h->base.last_error : "";
}

/* ------------------------------------------------------------------------- */
/* The entry                                                                 */

static const auxtrunk_api_t v1_api = {
    .struct_size = sizeof(auxtrunk_api_t),
    .abi_version = AUXTRUNK_ABI_VERSION,
    .caps = AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT |
            AUXTRUNK_CAP_GRAPH_CAPTURE,
    .impl_name = V1_IMPL_NAME,
    .kernel_version = V1_KERNEL_VERSION,
    .status_string = atp_status_string,
    .init = v1_init,
    .destroy = v1_destroy,
    .forward = v1_forward_entry,
    .infer = v1_infer_entry,
    .backward = v1_backward_entry,
    .memory_usage = v1_memory_usage,
    .last_error = v1_last_error,
};

int32_t auxtrunk_plugin_entry(const auxtrunk_host_info_t *host, auxtrunk_api_t *api)
{
    return atp_negotiate(host, api, &v1_api);
}
