/*
 * task.c — the feature map, the teacher, the replay buffer and the student's
 * seeded initialisation (task.h). Every sum runs in index order with one
 * rounding per operation (step_canon.h), so the buffer has the same bits on
 * every machine; the loops are ordered so the compiler can vectorise them
 * across outputs without changing any sum's order.
 */
#include "task.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "step_canon.h"

/* Stream tags: one independent generator per purpose of a seed. */
#define TAG_TEACHER 1u
#define TAG_STUDENT 2u
#define TAG_SAMPLES 3u

static void fill_uniform(ath_rng_t *r, float *dst, size_t n, float a)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ath_rng_uniform(r, -a, a);
}

void ath_task_destroy(ath_task_t *task)
{
    float **bufs[] = {&task->x,    &task->target, &task->proj, &task->proj_b, &task->t1,
                      &task->t1_b, &task->t2,     &task->t2_b, &task->z};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

/* y[N] = c[N] + a[K] · W[K, N], each y[n] summed over k in order. */
static void affine(const float *a, const float *w, const float *c, int K, int N, float *y)
{
    for (int n = 0; n < N; n++)
        y[n] = c[n];
    for (int k = 0; k < K; k++) {
        const float ak = a[k];
        const float *wk = w + (size_t)k * N;
        for (int n = 0; n < N; n++)
            y[n] = ath_fadd(y[n], ath_fmul(ak, wk[n]));
    }
}

static void sample(const ath_task_t *task, const float *z, float *x, float *target)
{
    const int L = ATH_TASK_LATENT, T = ATH_TASK_TEACHER;
    float h[ATH_TASK_TEACHER];
    affine(z, task->proj, task->proj_b, L, task->enc, x);
    for (int k = 0; k < task->enc; k++)
        x[k] = ath_tanh(x[k]);
    affine(x, task->t1, task->t1_b, task->enc, T, h);
    for (int j = 0; j < T; j++)
        h[j] = ath_tanh(h[j]);
    affine(h, task->t2, task->t2_b, T, task->aux, target);
}

int ath_task_create(ath_task_t *task, const auxtrunk_config_t *config, uint64_t seed,
                    ath_err_t *err)
{
    const size_t L = ATH_TASK_LATENT, T = ATH_TASK_TEACHER;
    const size_t ENC = (size_t)config->enc, AUX = (size_t)config->aux;
    memset(task, 0, sizeof *task);
    task->enc = config->enc;
    task->aux = config->aux;
    task->log2n = ATH_TASK_LOG2_SAMPLES;
    while (task->log2n > 0 && ((uint64_t)1 << task->log2n) * (ENC + AUX) > ATH_TASK_MAX_FLOATS)
        task->log2n--;
    task->n = (uint32_t)1 << task->log2n;
    task->key = ath_hash_key(seed, ATH_TAG_REPLAY);
    const size_t N = task->n;
    task->proj = malloc(L * ENC * sizeof(float));
    task->proj_b = malloc(ENC * sizeof(float));
    task->t1 = malloc(ENC * T * sizeof(float));
    task->t1_b = malloc(T * sizeof(float));
    task->t2 = malloc(T * AUX * sizeof(float));
    task->t2_b = malloc(AUX * sizeof(float));
    task->z = malloc(N * L * sizeof(float));
    task->x = malloc(N * ENC * sizeof(float));
    task->target = malloc(N * AUX * sizeof(float));
    if (!task->proj || !task->proj_b || !task->t1 || !task->t1_b || !task->t2 || !task->t2_b ||
        !task->z || !task->x || !task->target) {
        ath_task_destroy(task);
        return ath_errf(err, "out of host memory for the task");
    }
    /* Uniform(-a, a) has variance a²/3: a = sqrt(3·gain/fan_in) keeps each
     * pre-activation near unit variance. The teacher's hidden layer gets a
     * gain of 2 so its tanh units are genuinely non-linear. (sqrtf of these
     * constants is correctly rounded everywhere.) */
    ath_rng_t r = ath_rng_make(seed, TAG_TEACHER);
    fill_uniform(&r, task->proj, L * ENC, sqrtf(3.0f / (float)L));
    fill_uniform(&r, task->proj_b, ENC, 0.5f);
    fill_uniform(&r, task->t1, ENC * T, sqrtf(3.0f / (float)ENC));
    fill_uniform(&r, task->t1_b, T, 0.5f);
    fill_uniform(&r, task->t2, T * AUX, sqrtf(3.0f / (float)T));
    fill_uniform(&r, task->t2_b, AUX, 0.2f);
    ath_rng_t zs = ath_rng_make(seed, TAG_SAMPLES);
    fill_uniform(&zs, task->z, N * L, 1.7320508f); /* sqrt(3): unit variance */
    for (size_t i = 0; i < N; i++)
        sample(task, task->z + i * L, task->x + i * ENC, task->target + i * AUX);
    return 0;
}

void ath_task_draw(const ath_task_t *task, uint64_t step, int32_t batch, float *x, float *target)
{
    const size_t ENC = (size_t)task->enc, AUX = (size_t)task->aux;
    for (int32_t b = 0; b < batch; b++) {
        size_t i = ath_replay_index(task->key, step, (uint32_t)b, task->log2n);
        memcpy(x + (size_t)b * ENC, task->x + i * ENC, ENC * sizeof(float));
        memcpy(target + (size_t)b * AUX, task->target + i * AUX, AUX * sizeof(float));
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
