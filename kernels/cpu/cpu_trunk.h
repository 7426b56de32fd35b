/*
 * cpu_trunk.h — the auxtrunk trunk on the CPU, in the canonical order of
 * abi/auxtrunk_canon.h, bit for bit. Math only: dims, raw float pointers and a
 * caller-owned workspace; it knows nothing of the ABI structs, statuses or
 * validation (the plugin in plugin/cpu/ does that first).
 *
 * Shape letters: B batch, ENC, H1, H2, AUX. Layouts as in abi/auxtrunk.h:
 * dense row-major, weights stored [in, out]. All pointers are host memory;
 * outputs must not overlap inputs or each other. No function allocates,
 * prints or fails.
 */
#ifndef AUXTRUNK_CPU_TRUNK_H
#define AUXTRUNK_CPU_TRUNK_H

#include <stddef.h>
#include <stdint.h>

#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Training forward: h1 [B, H1], h2 [B, H2] (kept for backward) and out [B, AUX]
 * from x [B, ENC]. */
void cpu_trunk_forward(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch,
                       float *h1, float *h2, float *out);

/* Floats of scratch cpu_trunk_infer needs (independent of the batch). */
size_t cpu_trunk_infer_workspace(atk_dims_t d);

/* Inference forward: out [B, AUX] only, the same bits as cpu_trunk_forward;
 * hidden activations live in ws (cpu_trunk_infer_workspace floats). */
void cpu_trunk_infer(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch, float *out,
                     float *ws);

/* Floats of workspace cpu_trunk_backward needs for any batch up to max_batch:
 * O(log2(max_batch / AUXTRUNK_CANON_CHUNK) * parameter count + CHUNK * (H1 + H2)),
 * never proportional to the batch. */
size_t cpu_trunk_backward_workspace(atk_dims_t d, int32_t max_batch);

/* Backward of the forward that produced h1, h2 from x (same params): the six
 * gradients of sum(out ⊙ dout), dout [B, AUX]. accumulate = 0: each gradient
 * element is overwritten; else g = g + result (one addition, after the
 * canonical sum is complete). ws holds cpu_trunk_backward_workspace(d, M)
 * floats for some M >= batch. */
void cpu_trunk_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                        const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                        int accumulate, float *ws);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_CPU_TRUNK_H */
