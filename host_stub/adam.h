/*
 * adam.h — the optimizer's settings and its update on host arrays. The
 * arithmetic is step_canon.h's (ath_adam_elem, ath_step_verdict), shared
 * with the device path; the state (moments in the flat parameter layout of
 * layout.h, and the scalars) belongs to the engine that runs the step.
 */
#ifndef ATH_ADAM_H
#define ATH_ADAM_H

#include <stddef.h>

#include "step_canon.h"

#define ATH_ADAM_BETA1 0.9f
#define ATH_ADAM_BETA2 0.999f
#define ATH_ADAM_EPS 1e-8f

/* The settings of a run with learning rate lr. */
ath_adam_hp_t ath_adam_settings(float lr);

/* One update of n parameters with step size lr_t (from the step's verdict). */
void ath_adam_host(ath_adam_hp_t hp, float lr_t, size_t n, float *params, float *m, float *v,
                   const float *grads);

#endif
