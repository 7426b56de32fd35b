/*
 * step_cuda.h — the host's own CUDA kernels for a device-resident step
 * (step_cuda.cu), as C-callable launchers. Each enqueues on `stream` (a
 * cudaStream_t) and returns 0 or a cudaError_t value (ath_cuda_error_text).
 * No atomics: every reduction is a fixed tree (step_canon.h), so the results
 * are deterministic and equal to the host path's.
 *
 * Buffers are device memory; shapes as in engine.h (B batch, n = B·AUX).
 */
#ifndef ATH_STEP_CUDA_H
#define ATH_STEP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "step_canon.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elements per loss segment, and blocks of the gradient check. */
#define ATH_CUDA_SEGMENT 1024
#define ATH_CUDA_CHECK_BLOCKS 128

/* The batch of step sc->step + 1: x [B, ENC], target [B, AUX] from the
 * replay buffer buf_x [2^log2n, ENC], buf_t [2^log2n, AUX]. */
int ath_cuda_gather(void *stream, const float *buf_x, const float *buf_t, uint64_t key, int log2n,
                    const ath_scalars_t *sc, int32_t B, int32_t enc, int32_t aux, float *x,
                    float *target);

/* The same for a data-parallel rank: row b of x and target holds global
 * slot slot0 + b. */
int ath_cuda_gather_shard(void *stream, const float *buf_x, const float *buf_t, uint64_t key,
                          int log2n, const ath_scalars_t *sc, int32_t slot0, int32_t B, int32_t enc,
                          int32_t aux, float *x, float *target);

/* dout [n] and the loss elements' sums per aligned segment of
 * ATH_CUDA_SEGMENT: part [ceil(n / ATH_CUDA_SEGMENT)]. */
int ath_cuda_loss(void *stream, const float *out, const float *target, uint32_t n, float *dout,
                  float *part);

/* The same for a data-parallel rank's n of the n_total elements (dout is
 * divided by n_total). */
int ath_cuda_loss_shard(void *stream, const float *out, const float *target, uint32_t n,
                        uint32_t n_total, float *dout, float *part);

/* One block: part [n_part] reduced in place by the canon's tree into part[0]
 * (a rank's loss sum, before the combine). */
int ath_cuda_loss_reduce(void *stream, float *part, uint32_t n_part);

/* bad [ATH_CUDA_CHECK_BLOCKS]: 1 where a block found a non-finite gradient. */
int ath_cuda_check(void *stream, const float *grads, size_t n_params, uint32_t *bad);

/* One block: the loss from part (reduced in place), the verdict with the
 * gradient check's flags, the scalars advanced, the loss into
 * ring [ring_n] at (step - 1) % ring_n. */
int ath_cuda_verdict(void *stream, float *part, uint32_t n_part, const uint32_t *bad, uint32_t n,
                     ath_adam_hp_t hp, ath_scalars_t *sc, float *ring, uint32_t ring_n);

/* Adam on n_params elements if the verdict in sc is ok. */
int ath_cuda_adam(void *stream, float *params, float *m, float *v, const float *grads,
                  size_t n_params, const ath_scalars_t *sc, ath_adam_hp_t hp);

const char *ath_cuda_error_text(int code);

#ifdef __cplusplus
}
#endif

#endif
