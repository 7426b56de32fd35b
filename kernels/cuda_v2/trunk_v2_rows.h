/*
 * trunk_v2_rows.h — the small-batch path of cuda-v2 (trunk_v2_rows.cu):
 * the row-local stages as one cluster launch each.
 *
 *   v2_rows_forward:  the whole forward (h1, h2, out) in one launch;
 *   v2_rows_backward: dh2_pre and dh1_pre in one launch (into the workspace
 *                     of v2_backward, which then launches the weight
 *                     gradients as usual).
 *
 * Same arithmetic as the tiled kernels (canonical order, bit-identical).
 * Domain: every width a multiple of 4, ENC <= 512, H1, H2, AUX <= 256, and
 * every pointer 16-byte aligned (v2_rows_*_ok); any batch. trunk_v2.cu
 * decides when to use it (batches up to its ROWS_MAX_BATCH).
 */
#ifndef AUXTRUNK_TRUNK_V2_ROWS_H
#define AUXTRUNK_TRUNK_V2_ROWS_H

#include "trunk_v2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if the topology is in the domain above. */
int v2_rows_supported(atk_dims_t d);

/* Raises the kernels' shared-memory limits and checks that a cluster of
 * eight blocks fits on the current device. Once per device at init. */
cudaError_t v2_rows_prepare(void);

/* 1 if this call's topology and pointers are in the domain. */
int v2_rows_forward_ok(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                       const float *h2, const float *out);
int v2_rows_backward_ok(atk_dims_t d, const atk_params_t *p, const float *h1, const float *h2,
                        const float *dout, const float *dh2, const float *dh1);

/* The forward of v2_forward, one launch. */
cudaError_t v2_rows_forward(atk_dims_t d, const atk_params_t *p, const float *x, int batch,
                            float *h1, float *h2, float *out, cudaStream_t stream);

/* dh2 [B, H2] = dh2_pre and dh1 [B, H1] = dh1_pre, one launch. */
cudaError_t v2_rows_backward(atk_dims_t d, const atk_params_t *p, const float *h1, const float *h2,
                             const float *dout, int batch, float *dh2, float *dh1,
                             cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V2_ROWS_H */
