/*
 * plugin_cuda_v3.c — libauxtrunk.so "cuda-v3": kernels/cuda_v3 (the fused
 * small-batch path: one launch per call for B <= V3_FUSED_MAX_BATCH, and up
 * to V3_FUSED_TM1_MAX_BATCH where one row a thread fits; the mid path, one
 * launch per call, up to V3_MID_MAX_BATCH; the large-batch core from
 * V3_SGEMM_MIN_BATCH; cuda-v2's kernels elsewhere; exact, deterministic,
 * graph-capturable) behind the shared CUDA adapter
 * (plugin/cuda_common/cuda_plugin.c). This file is
 * the table: names, caps and the kernel functions of each mode. A handle
 * configured with AUXTRUNK_CONFIG_FAST runs trunk_v3_fast.h's kernels
 * (AUXTRUNK_CAP_FAST_MODE; TF32, not bit-exact, tolerance V3_FAST_TOL = 1e-2
 * against the double reference; exact below V3_WGMMA_MIN_BATCH), any other
 * handle the exact kernels (AUXTRUNK_CAP_EXACT holds for it).
 *
 * Device memory per handle, besides the adapter's h1/h2/ih1/ih2:
 * v3_workspace_floats(dims, max_batch) floats: the state region
 * (V3_STATE_FLOATS, 208 KiB of counting flags of the fused backward and the
 * mid path, which the adapter zeroes at init), then the largest of cuda-v2's
 * workspace, the mid path's (dh2/dh1 [B, H2+H1] and one node of all P
 * parameters per chunk), the fused path's (dh2/dh1
 * [min(max_batch, 1024), H2+H1], two tree nodes of all P parameters when
 * max_batch > 512) and the large-batch path's (cuda-v2's carve, and one
 * tree node of P floats per chunk up to 128 chunks, per chunk pair above:
 * v3_sgemm_workspace_floats): the paths never run in one call. For the
 * production topology that is cuda-v2's figure
 * (plugin/cuda_v2/plugin_cuda_v2.c) and the state region, but for
 * max_batch from 257 to 1,153, where the mid path keeps a node per chunk
 * and cuda-v2 fewer (up to 0.92 MB more, at 769), and from 16,384 to
 * 65,024, where up to 64 nodes more (42 MB at 32,768) are kept. In
 * fast mode v3_fast_workspace_floats (trunk_v3_fast.h says what it holds).
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cuda_plugin.h"
#include "trunk_v3.h"
#include "trunk_v3_fast.h"

#define V3_STR_(x) #x
#define V3_STR(x) V3_STR_(x)

const atc_kernels_t atc_plugin_kernels = {
    .impl_name = "cuda-v3",
    .kernel_version =
        "cuda-v3 " AUXTRUNK_KERNEL_VERSION " (canon " V3_STR(AUXTRUNK_CANON_VERSION) ")",
    /* EXACT describes the default mode (abi/auxtrunk.h); FAST_MODE adds the
     * TF32 mode on request. */
    .caps = AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT |
            AUXTRUNK_CAP_GRAPH_CAPTURE | AUXTRUNK_CAP_FAST_MODE,
    .exact =
        {
            .workspace_floats = v3_workspace_floats,
            .prepare = v3_prepare,
            .forward = v3_forward,
            .backward = v3_backward,
            .backward_forked = v3_backward_forked,
        },
    .fast =
        {
            .workspace_floats = v3_fast_workspace_floats,
            .prepare = v3_fast_prepare,
            .forward = v3_fast_forward,
            .backward = v3_fast_backward,
            .backward_forked = v3_fast_backward_forked,
        },
};
