/*
 * canary.h — the numerical check a plugin version passes before it runs a
 * training step: forward and backward on a fixed, seeded probe batch with
 * the current parameters, compared with what the running version computes.
 *
 * Passing: bit-identical outputs and gradients when both versions claim
 * AUXTRUNK_CAP_EXACT (and the run is not in fast mode); otherwise every value
 * finite and each tensor's largest error at most ATH_CANARY_TOL_REL times its
 * largest reference magnitude. NaN or Inf never passes. Without a reference
 * (the first version of a run) only finiteness is checked.
 */
#ifndef ATH_CANARY_H
#define ATH_CANARY_H

#include <stddef.h>
#include <stdint.h>

#include "auxtrunk.h"
#include "trunk.h"
#include "util.h"

#define ATH_CANARY_PROBE_BATCH 64 /* samples of the probe (at most max_batch) */
#define ATH_CANARY_TOL_REL 5e-3   /* tolerance when not both exact */

/* The probe batch and room for two versions' results. */
typedef struct ath_canary {
    int32_t pb;                 /* probe samples */
    size_t n_params;            /* of the topology */
    float *x, *dout;            /* the probe: [pb, ENC], [pb, AUX] */
    float *ref_out, *ref_grads; /* the running version's results */
    float *out, *grads;         /* the candidate's */
} ath_canary_t;

/* Draws the fixed probe for config (the same for every swap of every run).
 * Returns 0, or -1 with the message. */
int ath_canary_create(ath_canary_t *c, const auxtrunk_config_t *config, ath_err_t *err);
void ath_canary_free(ath_canary_t *c);

/* Runs the probe through t: forward into out, backward into grads. */
int ath_canary_run(ath_trunk_t *t, const float *params, const float *x, const float *dout,
                   int32_t pb, float *out, float *grads, ath_err_t *err);

/* Compares a candidate's results with the reference (ref_out NULL: no
 * reference, finiteness only). exact: bit equality. Returns 0 or -1 with the
 * first difference. */
int ath_canary_compare(const auxtrunk_config_t *config, int32_t pb, int exact, const float *ref_out,
                       const float *out, const float *ref_grads, const float *grads,
                       ath_err_t *err);

/* Does t compute exactly (claims AUXTRUNK_CAP_EXACT, not in fast mode)? */
int ath_canary_is_exact(const ath_trunk_t *t);

#endif
