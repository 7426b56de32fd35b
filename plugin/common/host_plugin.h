/*
 * host_plugin.h — the ABI adapter every host-memory (CPU) plugin shares. A CPU
 * plugin is one kernel set plus this adapter: it defines the table
 * atp_host_plugin_kernels (names, caps, two workspace sizes and three kernel
 * calls, each a kernel function of kernels/) and links host_plugin.c (the
 * object library auxtrunk_plugin_host), which implements every entry of
 * abi/auxtrunk.h on top of it: validation (plugin/common) before anything is
 * written, the one conversion of ABI types to the kernels' (atk_*), the
 * default floating-point environment around every kernel call, and the
 * handle's buffers, all allocated by init.
 *
 * Host memory of a handle, allocated once by init:
 *   h1, h2     [max_batch, H1], [max_batch, H2]  recorded by forward for backward
 *   infer_ws   infer_workspace(dims) floats      infer's scratch, never the record
 *   bwd_ws     backward_workspace(dims) floats   backward's scratch
 * or, for a kernel set with state (its own threads and buffers), h1, h2 and
 * the state its create made, freed by destroy.
 * Calls are synchronous (a stateful kernel set may use its threads and
 * returns when all is done), cannot fail once the arguments are validated,
 * and never allocate. No fast mode.
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

/* A kernel set that keeps per-handle state, such as a thread pool. */
typedef struct atp_host_stateful {
    /* Made by init after the record: AUXTRUNK_OK with *state and *bytes (host
     * memory it holds, for memory_usage), or init's status with nothing left
     * behind. */
    int32_t (*create)(atk_dims_t d, int32_t max_batch, void **state, uint64_t *bytes);
    /* Called by destroy; joins whatever threads create started. */
    void (*destroy)(void *state);
    void (*forward)(void *state, const atk_params_t *p, const float *x, int32_t batch, float *h1,
                    float *h2, float *out);
    void (*infer)(void *state, const atk_params_t *p, const float *x, int32_t batch, float *out);
    void (*backward)(void *state, const atk_params_t *p, const float *x, const float *h1,
                     const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                     int accumulate);
} atp_host_stateful_t;

typedef struct atp_host_kernels {
    const char *impl_name;      /* auxtrunk_api_t.impl_name */
    const char *kernel_version; /* auxtrunk_api_t.kernel_version */
    uint64_t caps;              /* must include AUXTRUNK_CAP_MEM_HOST */

    /* Either the stateful kernels (then every entry below is unused) ... */
    const atp_host_stateful_t *stateful;

    /* ... or these: */

    /* Floats of scratch infer needs (for any batch). */
    size_t (*infer_workspace)(atk_dims_t d);
    /* Floats of scratch backward needs for any batch up to max_batch. */
    size_t (*backward_workspace)(atk_dims_t d, int32_t max_batch);
    /* Arguments are validated; h1, h2 are the handle's record. */
    void (*forward)(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch, float *h1,
                    float *h2, float *out);
    /* The same bits as forward in out; hidden activations only in ws. */
    void (*infer)(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch, float *out,
                  float *ws);
    /* Backward of the forward that recorded h1, h2 from x. */
    void (*backward)(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                     const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                     int accumulate, float *ws);
} atp_host_kernels_t;

/* Defined by each CPU plugin (one per libauxtrunk.so). */
extern const atp_host_kernels_t atp_host_plugin_kernels;

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_PLUGIN_HOST_PLUGIN_H */
