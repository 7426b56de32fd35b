/*
 * adam.c — Adam on host arrays (adam.h).
 */
#include "adam.h"

#include <math.h>
#include <stdlib.h>

int ath_adam_create(ath_adam_t *a, size_t n, float lr, ath_err_t *err)
{
    a->n = n;
    a->lr = lr;
    a->beta1 = ATH_ADAM_BETA1;
    a->beta2 = ATH_ADAM_BETA2;
    a->eps = ATH_ADAM_EPS;
    a->t = 0;
    a->m = calloc(n, sizeof(float));
    a->v = calloc(n, sizeof(float));
    if (!a->m || !a->v) {
        ath_adam_destroy(a);
        return ath_errf(err, "out of host memory for the optimizer state");
    }
    return 0;
}

void ath_adam_destroy(ath_adam_t *a)
{
    free(a->m);
    free(a->v);
    a->m = a->v = NULL;
}

void ath_adam_step(ath_adam_t *a, float *params, const float *grads)
{
    a->t += 1;
    const double t = (double)a->t;
    const float lr_t = (float)((double)a->lr * sqrt(1.0 - pow((double)a->beta2, t)) /
                               (1.0 - pow((double)a->beta1, t)));
    const float b1 = a->beta1, b2 = a->beta2, c1 = 1.0f - a->beta1, c2 = 1.0f - a->beta2;
    for (size_t i = 0; i < a->n; i++) {
        float g = grads[i];
        float m = b1 * a->m[i] + c1 * g;
        float v = b2 * a->v[i] + c2 * (g * g);
        a->m[i] = m;
        a->v[i] = v;
        params[i] -= lr_t * m / (sqrtf(v) + a->eps);
    }
}
