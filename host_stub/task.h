/*
 * task.h — the self-contained auxiliary task the host trains on: regress the
 * outputs of a fixed random teacher network on synthetic encoder features.
 *
 *   z       [B, LATENT]  uniform, unit variance: the "state" behind a sample
 *   x       [B, ENC]     = tanh(z · P + p)   synthetic encoder features
 *   target  [B, AUX]     = tanh(x · T1 + t1) · T2 + t2   the teacher
 *
 * P, p, T1, t1, T2, t2 are fixed by the seed. Every step draws fresh samples
 * from a data stream whose whole state is one uint64_t (saved in
 * checkpoints), so a resumed run sees exactly the samples it would have seen.
 * The teacher is narrower than the trunk (TEACHER hidden units), so the task
 * is learnable to a small fraction of its starting loss.
 *
 * Everything here is host arithmetic, independent of any plugin.
 */
#ifndef ATH_TASK_H
#define ATH_TASK_H

#include <stdint.h>

#include "auxtrunk.h"
#include "util.h"

#define ATH_TASK_LATENT 16
#define ATH_TASK_TEACHER 32

typedef struct ath_task {
    int32_t enc, aux;
    float *proj, *proj_b; /* P [LATENT, ENC], p [ENC] */
    float *t1, *t1_b;     /* T1 [ENC, TEACHER], t1 [TEACHER] */
    float *t2, *t2_b;     /* T2 [TEACHER, AUX], t2 [AUX] */
} ath_task_t;

/* Builds the features map and the teacher for config's ENC and AUX. */
int ath_task_create(ath_task_t *task, const auxtrunk_config_t *config, uint64_t seed,
                    ath_err_t *err);
void ath_task_destroy(ath_task_t *task);

/* The data stream of a seed, positioned at its first sample. */
ath_rng_t ath_task_data_stream(uint64_t seed);

/* Draws batch fresh samples: x [batch, ENC] and target [batch, AUX]. */
void ath_task_sample(const ath_task_t *task, ath_rng_t *data, int32_t batch, float *x,
                     float *target);

/* Seeded student initialisation into a flat parameter buffer (layout.h):
 * weights uniform with variance 1/fan_in (W3 scaled by 1/4 so the first
 * outputs are small), biases zero. */
void ath_task_init_params(const auxtrunk_config_t *config, uint64_t seed, float *params);

#endif
