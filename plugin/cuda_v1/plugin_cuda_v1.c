/*
 * plugin_cuda_v1.c — libauxtrunk.so "cuda-v1": kernels/cuda_v1 (the reference
 * GPU design; exact, deterministic, graph-capturable) behind the shared CUDA
 * adapter (plugin/cuda_common/cuda_plugin.c), which implements every entry of
 * the ABI. This file is the table: names, caps and the kernel functions.
 *
 * Device memory per handle, besides the adapter's h1/h2 (record) and ih1/ih2
 * (infer): backward's dh2_pre and dh1_pre, [max_batch, H2] and [max_batch, H1].
 * Production topology, max_batch 65,536: 3 x 128 MiB in all. No per-sample
 * partials: batch sums keep their chunk partials in shared memory.
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cuda_plugin.h"
#include "trunk_v1.h"

#define V1_STR_(x) #x
#define V1_STR(x) V1_STR_(x)

ATC_FORWARD_WITHOUT_WORKSPACE(v1_forward_ws, v1_forward)

const atc_kernels_t atc_plugin_kernels = {
    .impl_name = "cuda-v1",
    .kernel_version =
        "cuda-v1 " AUXTRUNK_KERNEL_VERSION " (canon " V1_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT |
            AUXTRUNK_CAP_GRAPH_CAPTURE,
    .exact =
        {
            .workspace_floats = v1_workspace_floats,
            .prepare = v1_prepare,
            .forward = v1_forward_ws,
            .backward = v1_backward,
        },
    /* no fast mode: init refuses AUXTRUNK_CONFIG_FAST */
};
