/*
 * canary.c — the probe batch, running it, and comparing two versions'
 * results (canary.h).
 */
#include "canary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

int ath_canary_create(ath_canary_t *c, const auxtrunk_config_t *config, ath_err_t *err)
{
    memset(c, 0, sizeof *c);
    c->pb = config->max_batch < ATH_CANARY_PROBE_BATCH ? config->max_batch : ATH_CANARY_PROBE_BATCH;
    c->n_params = ath_layout_of(config).count;
    size_t nx = (size_t)c->pb * (size_t)config->enc, no = (size_t)c->pb * (size_t)config->aux;
    c->x = malloc(nx * sizeof(float));
    c->dout = malloc(no * sizeof(float));
    c->ref_out = malloc(no * sizeof(float));
    c->out = malloc(no * sizeof(float));
    c->ref_grads = malloc(c->n_params * sizeof(float));
    c->grads = malloc(c->n_params * sizeof(float));
    if (!c->x || !c->dout || !c->ref_out || !c->out || !c->ref_grads || !c->grads) {
        ath_canary_free(c);
        return ath_errf(err, "out of host memory");
    }
    ath_rng_t r = ath_rng_make(UINT64_C(0xCA4A21), 1);
    for (size_t i = 0; i < nx; i++)
        c->x[i] = ath_rng_uniform(&r, -1.0f, 1.0f);
    for (size_t i = 0; i < no; i++)
        c->dout[i] = ath_rng_uniform(&r, -0.01f, 0.01f);
    return 0;
}

void ath_canary_free(ath_canary_t *c)
{
    free(c->x);
    free(c->dout);
    free(c->ref_out);
    free(c->out);
    free(c->ref_grads);
    free(c->grads);
    memset(c, 0, sizeof *c);
}

int ath_canary_run(ath_trunk_t *t, const float *params, const float *x, const float *dout,
                   int32_t pb, float *out, float *grads, ath_err_t *err)
{
    if (ath_trunk_forward(t, params, x, pb, out, err) != 0)
        return -1;
    return ath_trunk_backward(t, dout, pb, grads, err);
}

int ath_canary_is_exact(const ath_trunk_t *t)
{
    return (t->plugin.api.caps & AUXTRUNK_CAP_EXACT) && !(t->config.flags & AUXTRUNK_CONFIG_FAST);
}

static const char *tensor_names[7] = {"out", "dW1", "db1", "dW2", "db2", "dW3", "db3"};

int ath_canary_compare(const auxtrunk_config_t *c, int32_t pb, int exact, const float *ref_out,
                       const float *out, const float *ref_grads, const float *grads, ath_err_t *err)
{
    ath_layout_t l = ath_layout_of(c);
    const size_t off[7] = {0, l.w1, l.b1, l.w2, l.b2, l.w3, l.b3};
    const size_t len[7] = {(size_t)pb * (size_t)c->aux,
                           l.b1 - l.w1,
                           l.w2 - l.b1,
                           l.b2 - l.w2,
                           l.w3 - l.b2,
                           l.b3 - l.w3,
                           l.count - l.b3};
    const int have_ref = ref_out != NULL;
    for (int k = 0; k < 7; k++) {
        const float *v = (k == 0 ? out : grads) + off[k];
        const float *r = have_ref ? (k == 0 ? ref_out : ref_grads) + off[k] : NULL;
        double scale = 0.0, worst = -1.0;
        size_t at = 0;
        for (size_t i = 0; i < len[k]; i++) {
            if (!isfinite(v[i]))
                return ath_errf(err, "canary: %s[%zu] is %g (never allowed)", tensor_names[k], i,
                                (double)v[i]);
            if (!have_ref)
                continue;
            if (exact && memcmp(&v[i], &r[i], sizeof v[i]) != 0) {
                uint32_t a, b;
                memcpy(&a, &r[i], 4);
                memcpy(&b, &v[i], 4);
                return ath_errf(err,
                                "canary: %s[%zu] differs in exact mode: %.9g (0x%08x) running, "
                                "%.9g (0x%08x) candidate",
                                tensor_names[k], i, (double)r[i], (unsigned)a, (double)v[i],
                                (unsigned)b);
            }
            double m = fabs((double)r[i]), e = fabs((double)v[i] - (double)r[i]);
            if (m > scale)
                scale = m;
            if (e > worst) {
                worst = e;
                at = i;
            }
        }
        if (have_ref && !exact && worst > ATH_CANARY_TOL_REL * scale)
            return ath_errf(err,
                            "canary: %s[%zu] is off by %.3g, above the tolerance %.1e x %.3g "
                            "(largest running magnitude)",
                            tensor_names[k], at, worst, ATH_CANARY_TOL_REL, scale);
    }
    return 0;
}
