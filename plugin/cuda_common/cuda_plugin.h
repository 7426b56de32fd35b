/*
 * cuda_plugin.h — the ABI adapter every CUDA plugin shares. A CUDA plugin is
 * one kernel set plus this adapter: it defines the table atc_plugin_kernels
 * (names, caps, and per mode a workspace size, a prepare and two launchers,
 * each a kernel function of kernels/) and links cuda_plugin.c (the object
 * library auxtrunk_plugin_cuda), which implements every entry of
 * abi/auxtrunk.h on top of it: validation (plugin/common with the CUDA
 * memory-space checker) before anything is enqueued, the one conversion of
 * ABI types to the kernels' (atk_*), the device guard, checked launches, and
 * the handle's one device allocation.
 *
 * Device memory of a handle, allocated once by init as one block:
 *   h1, h2     [max_batch, H1], [max_batch, H2]  recorded by forward for backward
 *   ih1, ih2   the same shapes                   infer's activations, so that
 *                                                infer never touches the record
 *   workspace  mode->workspace_floats(dims,      the kernel set's own scratch, for
 *              max_batch) floats                 forward, infer and backward;
 *                                                zeroed once by init (before
 *                                                init returns), never again: a
 *                                                kernel set may keep state
 *                                                there from call to call
 * and, where the mode has backward_forked, a stream and two events of the
 * handle's device (no memory of their own that the handle reports).
 * The host orders the handle's calls; the device work of two calls on one
 * handle must not overlap either (same stream, or an event between them),
 * since they share these buffers.
 */
#ifndef AUXTRUNK_PLUGIN_CUDA_PLUGIN_H
#define AUXTRUNK_PLUGIN_CUDA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "auxtrunk.h"
#include "plugin_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One mode of a kernel set: the kernel functions a handle runs. */
typedef struct atc_mode {
    /* Device workspace floats a handle needs beyond h1/h2/ih1/ih2. */
    size_t (*workspace_floats)(atk_dims_t d, int max_batch);
    /* Loads every kernel on the current device (once per handle, at init), so
     * that no later launch loads code, e.g. inside a host's graph capture. */
    cudaError_t (*prepare)(void);
    /* h1, h2 are the record or infer's scratch; arguments are validated.
     * workspace is the handle's (the same as backward's: the calls of a
     * handle never overlap on the device), which a forward may use as
     * scratch; it holds nothing from one call to the next. */
    cudaError_t (*forward)(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                           float *h1, float *h2, float *out, float *workspace, cudaStream_t stream);
    cudaError_t (*backward)(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                            const float *h2, const float *dout, int batch, const atk_grads_t *g,
                            int accumulate, float *workspace, cudaStream_t stream);
    /* NULL, or the backward the adapter calls instead, with the handle's
     * second stream to fork independent launches onto: `side` (made
     * non-blocking on the handle's device) and two events made without
     * timing, `fork` to start side after what stream holds and `join` to
     * make stream wait for side before the call returns (as
     * v3_fast_backward_forked documents it). Init makes the three where
     * this is set, destroy frees them. */
    cudaError_t (*backward_forked)(atk_dims_t d, const atk_params_t *p, const float *x,
                                   const float *h1, const float *h2, const float *dout, int batch,
                                   const atk_grads_t *g, int accumulate, float *workspace,
                                   cudaStream_t stream, cudaStream_t side, cudaEvent_t fork,
                                   cudaEvent_t join);
} atc_mode_t;

typedef struct atc_kernels {
    const char *impl_name;      /* auxtrunk_api_t.impl_name */
    const char *kernel_version; /* auxtrunk_api_t.kernel_version */
    uint64_t caps;              /* must include AUXTRUNK_CAP_MEM_CUDA */
    atc_mode_t exact;           /* handles configured without AUXTRUNK_CONFIG_FAST */
    /* Handles configured with AUXTRUNK_CONFIG_FAST. All NULL: the kernel set
     * has no fast mode, and init refuses the flag (E_FLAGS). */
    atc_mode_t fast;
} atc_kernels_t;

/* atc_mode_t.forward for a kernel function `fn` that takes no workspace:
 * defines `name`, which drops it. */
#define ATC_FORWARD_WITHOUT_WORKSPACE(name, fn)                                             \
    static cudaError_t name(atk_dims_t d, const atk_params_t *p, const float *x, int batch, \
                            float *h1, float *h2, float *out, float *workspace,             \
                            cudaStream_t stream)                                            \
    {                                                                                       \
        (void)workspace;                                                                    \
        return fn(d, p, x, batch, h1, h2, out, stream);                                     \
    }

/* Defined by each CUDA plugin (one per libauxtrunk.so). */
extern const atc_kernels_t atc_plugin_kernels;

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_PLUGIN_CUDA_PLUGIN_H */
