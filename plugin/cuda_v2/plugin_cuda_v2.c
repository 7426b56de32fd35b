/*
 * plugin_cuda_v2.c — libauxtrunk.so "cuda-v2": kernels/cuda_v2 (register-tiled,
 * fused epilogues, split-batch gradients; exact, deterministic,
 * graph-capturable) behind the shared CUDA adapter (plugin/cuda_common/
 * cuda_plugin.c). This file is the table: names, caps and the kernel
 * functions of each mode. A handle configured with AUXTRUNK_CONFIG_FAST runs the TF32
 * kernels of trunk_v2_fast.cu (AUXTRUNK_CAP_FAST_MODE; not bit-exact,
 * tolerance V2_FAST_TOL = 1e-2 against the double reference, see trunk_v2.h),
 * any other handle the exact kernels (AUXTRUNK_CAP_EXACT holds for it).
 *
 * Device memory per handle, besides the adapter's h1/h2/ih1/ih2:
 * v2_workspace_floats(dims, max_batch) floats = dh2/dh1 [max_batch, H2+H1],
 * W2ᵀ/W3ᵀ, and, when max_batch > 256, at most ceil(max_batch/256) tree nodes
 * of all P parameters (one per chunk, or per pair of chunks at large batches;
 * production topology, max_batch 65,536: 128 MiB + 0.4 MiB + 80 MiB); in
 * fast mode v2_fast_workspace_floats, which is never less (the exact kernels
 * run for topologies or pointers outside the fast kernels' domain).
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cuda_plugin.h"
#include "trunk_v2.h"

#define V2_STR_(x) #x
#define V2_STR(x) V2_STR_(x)

ATC_FORWARD_WITHOUT_WORKSPACE(v2_forward_ws, v2_forward)
ATC_FORWARD_WITHOUT_WORKSPACE(v2_fast_forward_ws, v2_fast_forward)

const atc_kernels_t atc_plugin_kernels = {
    .impl_name = "cuda-v2",
    .kernel_version =
        "cuda-v2 " AUXTRUNK_KERNEL_VERSION " (canon " V2_STR(AUXTRUNK_CANON_VERSION) ")",
    /* EXACT describes the default mode (abi/auxtrunk.h); FAST_MODE adds the
     * TF32 mode on request. */
    .caps = AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT |
            AUXTRUNK_CAP_GRAPH_CAPTURE | AUXTRUNK_CAP_FAST_MODE,
    .exact =
        {
            .workspace_floats = v2_workspace_floats,
            .prepare = v2_prepare,
            .forward = v2_forward_ws,
            .backward = v2_backward,
        },
    .fast =
        {
            .workspace_floats = v2_fast_workspace_floats,
            .prepare = v2_fast_prepare,
            .forward = v2_fast_forward_ws,
            .backward = v2_fast_backward,
        },
};
