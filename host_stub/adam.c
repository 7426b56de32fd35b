/*
 * adam.c — Adam on host arrays (adam.h).
 */
#include "adam.h"

ath_adam_hp_t ath_adam_settings(float lr)
{
    ath_adam_hp_t hp = {
        .lr = lr, .beta1 = ATH_ADAM_BETA1, .beta2 = ATH_ADAM_BETA2, .eps = ATH_ADAM_EPS};
    return hp;
}

void ath_adam_host(ath_adam_hp_t hp, float lr_t, size_t n, float *params, float *m, float *v,
                   const float *grads)
{
    for (size_t i = 0; i < n; i++)
        ath_adam_elem(&params[i], &m[i], &v[i], grads[i], lr_t, hp);
}
