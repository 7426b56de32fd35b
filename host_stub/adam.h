/*
 * adam.h — the optimizer, entirely host-owned: the moments live in host
 * memory in the flat parameter layout (layout.h), next to the parameters and
 * gradients the host also owns. A plugin never sees any of it except the
 * parameters (read) and the gradients (written) for one call.
 *
 * The update is plain float arithmetic in a fixed order, so it is
 * deterministic and a resumed run continues bit for bit.
 */
#ifndef ATH_ADAM_H
#define ATH_ADAM_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct ath_adam {
    size_t n;
    float lr, beta1, beta2, eps;
    uint64_t t;   /* updates applied so far */
    float *m, *v; /* [n] first and second moments */
} ath_adam_t;

#define ATH_ADAM_BETA1 0.9f
#define ATH_ADAM_BETA2 0.999f
#define ATH_ADAM_EPS 1e-8f

/* Zeroed moments for n parameters. */
int ath_adam_create(ath_adam_t *a, size_t n, float lr, ath_err_t *err);
void ath_adam_destroy(ath_adam_t *a);

/* One update: t += 1, then for each i
 *   m = b1·m + (1-b1)·g;   v = b2·v + (1-b2)·g²
 *   p = p - lr_t · m / (sqrt(v) + eps)
 * with the bias correction folded into lr_t = lr·sqrt(1-b2^t)/(1-b1^t). */
void ath_adam_step(ath_adam_t *a, float *params, const float *grads);

#endif
