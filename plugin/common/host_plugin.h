/*
 * host_plugin.h — the ABI adapter every host-memory (CPU) plugin shares. A CPU
 * plugin is one kernel set plus this adapter: it defines the table
 * atp_host_plugin_kernels (names, caps, two workspace sizes and three kernel
 * calls) and compiles host_plugin.c among its sources, which implements every
 * entry of abi/auxtrunk.h on top of it: validation (plugin/common) before
 * anything is written, the default floating-point environment around every
 * kernel call, and the handle's buffers, all allocated by init.
 *
 * Host memory of a handle, allocated once by init:
 *   h1, h2     [max_batch, H1], [max_batch, H2]  recorded by forward for backward
 *   infer_ws   infer_workspace(dims) floats      infer's scratch, never the record
 *   bwd_ws     backward_workspace(dims) floats   backward's scratch
 *   state      state_create's, when the kernel set has one (its own threads
 *              and buffers), freed by destroy
 * Calls are synchronous (the kernels may use their own threads, and return
 * when all is done), cannot fail once the arguments are validated, and never
 * allocate. No fast mode.
 */
#ifndef AUXTRUNK_PLUGIN_HOST_PLUGIN_H
#define AUXTRUNK_PLUGIN_HOST_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "auxtrunk.h"
#include "plugin_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct atp_host_kernels {
    const char *impl_name;      /* auxtrunk_api_t.impl_name */
    const char *kernel_version; /* auxtrunk_api_t.kernel_version */
    uint64_t caps;              /* must include AUXTRUNK_CAP_MEM_HOST */

    /* Optional, both or neither (NULL: no state): per-handle kernel state,
     * made by init after the buffers and freed by destroy. Returns
     * AUXTRUNK_OK and sets *state and *bytes (host memory it holds, added to
     * memory_usage), or init's status with nothing left behind. The three
     * calls below receive it as `state` (NULL without one). */
    int32_t (*state_create)(const atp_dims_t *dims, void **state, uint64_t *bytes);
    void (*state_destroy)(void *state);
    /* Floats of scratch infer needs for any batch up to dims->max_batch. */
    size_t (*infer_workspace)(const atp_dims_t *dims);
    /* Floats of scratch backward needs for any batch up to dims->max_batch. */
    size_t (*backward_workspace)(const atp_dims_t *dims);
    /* Arguments are validated; h1, h2 are the handle's record. */
    void (*forward)(void *state, const atp_dims_t *dims, const auxtrunk_params_t *p,
                    const float *x, int32_t batch, float *h1, float *h2, float *out);
    /* The same bits as forward in out; hidden activations only in ws. */
    void (*infer)(void *state, const atp_dims_t *dims, const auxtrunk_params_t *p,
                  const float *x, int32_t batch, float *out, float *ws);
    /* Backward of the forward that recorded h1, h2 from x. */
    void (*backward)(void *state, const atp_dims_t *dims, const auxtrunk_params_t *p,
                     const float *x, const float *h1, const float *h2, const float *dout,
                     int32_t batch, const auxtrunk_grads_t *g, int accumulate, float *ws);
} atp_host_kernels_t;

/* Defined by each CPU plugin (one per libauxtrunk.so). */
extern const atp_host_kernels_t atp_host_plugin_kernels;

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_PLUGIN_HOST_PLUGIN_H */
