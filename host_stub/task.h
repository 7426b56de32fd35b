/*
 * task.h — the self-contained auxiliary task the host trains on: regress the
 * outputs of a fixed random teacher network on synthetic encoder features,
 * drawn from a replay buffer the way a DQN trainer draws from replay memory.
 *
 *   z       [LATENT]     uniform, unit variance: the "state" behind a sample
 *   x       [ENC]        = tanh(z · P + p)   synthetic encoder features
 *   target  [AUX]        = tanh(x · T1 + t1) · T2 + t2   the teacher
 *
 * P, p, T1, t1, T2, t2 and the buffer's N = 2^log2n samples are fixed by the
 * seed and built once, on the host, at the start of a run (the device path
 * uploads the buffer once). Step s fills slot b of its batch with buffer
 * sample ath_replay_index(key, s, b) (step_canon.h): a counter-based draw,
 * so a resumed run, or one that moved to another device, sees exactly the
 * samples it would have seen, and no generator state has to be saved.
 *
 * The buffer is canonical arithmetic too (step_canon.h: one rounding per
 * operation, sums in index order, tanh from the canon's expm1), so it has the
 * same bits on every machine, and a checkpoint resumes anywhere.
 */
#ifndef ATH_TASK_H
#define ATH_TASK_H

#include <stdint.h>

#include "auxtrunk.h"
#include "util.h"

#define ATH_TASK_LATENT 16
#define ATH_TASK_TEACHER 32
/* Samples in the replay buffer: 2^14, fewer for very wide topologies so
 * that the buffer stays within ATH_TASK_MAX_FLOATS. */
#define ATH_TASK_LOG2_SAMPLES 14
#define ATH_TASK_MAX_FLOATS (UINT64_C(1) << 26)

typedef struct ath_task {
    int32_t enc, aux;
    int log2n; /* the buffer holds n = 2^log2n samples */
    uint32_t n;
    uint64_t key;         /* ath_hash_key(seed, ATH_TAG_REPLAY) */
    float *x;             /* [n, ENC] */
    float *target;        /* [n, AUX] */
    float *proj, *proj_b; /* P [LATENT, ENC], p [ENC] */
    float *t1, *t1_b;     /* T1 [ENC, TEACHER], t1 [TEACHER] */
    float *t2, *t2_b;     /* T2 [TEACHER, AUX], t2 [AUX] */
    float *z;             /* [n, LATENT] the latent state of each sample */
} ath_task_t;

/* Builds the feature map, the teacher and the replay buffer for config's
 * ENC and AUX. */
int ath_task_create(ath_task_t *task, const auxtrunk_config_t *config, uint64_t seed,
                    ath_err_t *err);
void ath_task_destroy(ath_task_t *task);

/* The batch of step `step` (from 1): x [batch, ENC] and target [batch, AUX]
 * copied from the buffer. */
void ath_task_draw(const ath_task_t *task, uint64_t step, int32_t batch, float *x, float *target);

/* Seeded student initialisation into a flat parameter buffer (layout.h):
 * weights uniform with variance 1/fan_in (W3 scaled by 1/4 so the first
 * outputs are small), biases zero. */
void ath_task_init_params(const auxtrunk_config_t *config, uint64_t seed, float *params);

#endif
