/*
 * plugin_cuda_v3.c — libauxtrunk.so "cuda-v3": kernels/cuda_v3 (the fused
 * small-batch path: one launch per call for B <= V3_MAX_BATCH; cuda-v2's
 * kernels everywhere else; exact, deterministic, graph-capturable) behind
 * the shared CUDA adapter (plugin/cuda_common/cuda_plugin.c). This file is
 * the table: names, caps and the kernel functions. Exact mode only: a handle
 * asking for AUXTRUNK_CONFIG_FAST is refused (the adapter answers E_FLAGS).
 *
 * Device memory per handle, besides the adapter's h1/h2/ih1/ih2:
 * v3_workspace_floats(dims, max_batch) floats, the larger of cuda-v2's
 * workspace and the fused path's (48 KiB of flags, dh2/dh1
 * [min(max_batch, 1024), H2+H1], two tree nodes of all P parameters when
 * max_batch > 512): the two paths never run in one call. For the production
 * topology that is cuda-v2's figure (plugin/cuda_v2/plugin_cuda_v2.c).
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cuda_plugin.h"
#include "trunk_v3.h"

#define V3_STR_(x) #x
#define V3_STR(x) V3_STR_(x)

const atc_kernels_t atc_plugin_kernels = {
    .impl_name = "cuda-v3",
    .kernel_version =
        "cuda-v3 " AUXTRUNK_KERNEL_VERSION " (canon " V3_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT |
            AUXTRUNK_CAP_GRAPH_CAPTURE,
    .exact =
        {
            .workspace_floats = v3_workspace_floats,
            .prepare = v3_prepare,
            .forward = v3_forward,
            .backward = v3_backward,
        },
    /* no fast mode: init refuses AUXTRUNK_CONFIG_FAST */
};
