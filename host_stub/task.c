/*
 * task.c — synthetic features, the teacher, and the student's seeded
 * initialisation (task.h). The teacher is evaluated in double and rounded
 * once to float, so targets do not depend on summation details.
 */
#include "task.h"

#include <math.h>
#include <stdlib.h>

#include "layout.h"

/* Stream tags: one independent generator per purpose of a seed. */
#define TAG_TEACHER 1u
#define TAG_STUDENT 2u
#define TAG_DATA 3u

static void fill_uniform(ath_rng_t *r, float *dst, size_t n, float a)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ath_rng_uniform(r, -a, a);
}

void ath_task_destroy(ath_task_t *task)
{
    free(task->proj);
    free(task->proj_b);
    free(task->t1);
    free(task->t1_b);
    free(task->t2);
    free(task->t2_b);
    task->proj = task->proj_b = task->t1 = task->t1_b = task->t2 = task->t2_b = NULL;
}

int ath_task_create(ath_task_t *task, const auxtrunk_config_t *config, uint64_t seed,
                    ath_err_t *err)
{
    const size_t L = ATH_TASK_LATENT, T = ATH_TASK_TEACHER;
    const size_t ENC = (size_t)config->enc, AUX = (size_t)config->aux;
    task->enc = config->enc;
    task->aux = config->aux;
    task->proj = malloc(L * ENC * sizeof(float));
    task->proj_b = malloc(ENC * sizeof(float));
    task->t1 = malloc(ENC * T * sizeof(float));
    task->t1_b = malloc(T * sizeof(float));
    task->t2 = malloc(T * AUX * sizeof(float));
    task->t2_b = malloc(AUX * sizeof(float));
    if (!task->proj || !task->proj_b || !task->t1 || !task->t1_b || !task->t2 || !task->t2_b) {
        ath_task_destroy(task);
        return ath_errf(err, "out of host memory for the task");
    }
    /* Uniform(-a, a) has variance a²/3: a = sqrt(3·gain/fan_in) keeps each
     * pre-activation near unit variance. The teacher's hidden layer gets a
     * gain of 2 so its tanh units are genuinely non-linear. */
    ath_rng_t r = ath_rng_make(seed, TAG_TEACHER);
    fill_uniform(&r, task->proj, L * ENC, sqrtf(3.0f / (float)L));
    fill_uniform(&r, task->proj_b, ENC, 0.5f);
    fill_uniform(&r, task->t1, ENC * T, sqrtf(3.0f / (float)ENC));
    fill_uniform(&r, task->t1_b, T, 0.5f);
    fill_uniform(&r, task->t2, T * AUX, sqrtf(3.0f / (float)T));
    fill_uniform(&r, task->t2_b, AUX, 0.2f);
    return 0;
}

ath_rng_t ath_task_data_stream(uint64_t seed)
{
    return ath_rng_make(seed, TAG_DATA);
}

void ath_task_sample(const ath_task_t *task, ath_rng_t *data, int32_t batch, float *x,
                     float *target)
{
    const int L = ATH_TASK_LATENT, T = ATH_TASK_TEACHER;
    const int ENC = task->enc, AUX = task->aux;
    const float a = 1.7320508f; /* sqrt(3): unit variance */
    for (int b = 0; b < batch; b++) {
        float z[ATH_TASK_LATENT];
        for (int l = 0; l < L; l++)
            z[l] = ath_rng_uniform(data, -a, a);
        float *xb = x + (size_t)b * ENC;
        for (int k = 0; k < ENC; k++) {
            double s = task->proj_b[k];
            for (int l = 0; l < L; l++)
                s += (double)z[l] * task->proj[(size_t)l * ENC + k];
            xb[k] = (float)tanh(s);
        }
        double h[ATH_TASK_TEACHER];
        for (int j = 0; j < T; j++) {
            double s = task->t1_b[j];
            for (int k = 0; k < ENC; k++)
                s += (double)xb[k] * task->t1[(size_t)k * T + j];
            h[j] = tanh(s);
        }
        float *tb = target + (size_t)b * AUX;
        for (int n = 0; n < AUX; n++) {
            double s = task->t2_b[n];
            for (int j = 0; j < T; j++)
                s += h[j] * task->t2[(size_t)j * AUX + n];
            tb[n] = (float)s;
        }
    }
}

void ath_task_init_params(const auxtrunk_config_t *c, uint64_t seed, float *params)
{
    ath_layout_t l = ath_layout_of(c);
    ath_rng_t r = ath_rng_make(seed, TAG_STUDENT);
    fill_uniform(&r, params + l.w1, AUXTRUNK_W1_COUNT(c), sqrtf(3.0f / (float)c->enc));
    fill_uniform(&r, params + l.w2, AUXTRUNK_W2_COUNT(c), sqrtf(3.0f / (float)c->h1));
    fill_uniform(&r, params + l.w3, AUXTRUNK_W3_COUNT(c), 0.25f * sqrtf(3.0f / (float)c->h2));
    for (size_t i = 0; i < (size_t)c->h1; i++)
        params[l.b1 + i] = 0.0f;
    for (size_t i = 0; i < (size_t)c->h2; i++)
        params[l.b2 + i] = 0.0f;
    for (size_t i = 0; i < (size_t)c->aux; i++)
        params[l.b3 + i] = 0.0f;
}
