/*
 * engine_host.c — the engine for host plugins (engine.h): the state in host
 * arrays, one synchronous step per call, timed with the monotonic clock.
 * The arithmetic is step_canon.h's, in the order the device path uses.
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include "adam.h"

typedef struct host_engine {
    float *params, *m, *v, *grads; /* [P] */
    float *x, *target;             /* [B, ENC], [B, AUX] */
    float *out, *dout, *q;         /* [B, AUX] each; q: the loss elements */
} host_engine_t;

float ath_loss_sum_host(const float *out, const float *target, size_t n, size_t n_total,
                        float *dout, float *q)
{
    const float nf = (float)n_total;
    for (size_t i = 0; i < n; i++)
        q[i] = ath_loss_elem(out[i], target[i], nf, &dout[i]);
    /* The canon's tree, level by level (step_canon.h). */
    for (size_t s = 1; s < n; s *= 2)
        for (size_t i = 0; i + s < n; i += 2 * s)
            ath_tree_node(q, (uint32_t)n, (uint32_t)s, (uint32_t)i);
    return n ? q[0] : 0.0f;
}

float ath_loss_host(const float *out, const float *target, size_t n, float *dout, float *q)
{
    return ath_loss_of_sum(ath_loss_sum_host(out, target, n, n, dout, q), (float)n);
}

int ath_any_nonfinite(const float *g, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= !ath_finite(g[i]);
    return bad;
}

static void host_close(ath_engine_t *e)
{
    host_engine_t *h = e->impl;
    if (!h)
        return;
    float *bufs[] = {h->params, h->m, h->v, h->grads, h->x, h->target, h->out, h->dout, h->q};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(h);
    e->impl = NULL;
}

static int host_open(ath_engine_t *e, ath_err_t *err)
{
    host_engine_t *h = calloc(1, sizeof *h);
    if (!h)
        return ath_errf(err, "out of host memory");
    e->impl = h;
    const size_t P = e->cfg.n_params, B = (size_t)e->cfg.batch;
    const size_t ENC = (size_t)e->cfg.config.enc, AUX = (size_t)e->cfg.config.aux;
    h->params = calloc(P, sizeof(float));
    h->m = calloc(P, sizeof(float));
    h->v = calloc(P, sizeof(float));
    h->grads = calloc(P, sizeof(float));
    h->x = calloc(B * ENC, sizeof(float));
    h->target = calloc(B * AUX, sizeof(float));
    h->out = calloc(B * AUX, sizeof(float));
    h->dout = calloc(B * AUX, sizeof(float));
    h->q = calloc(B * AUX, sizeof(float));
    if (!h->params || !h->m || !h->v || !h->grads || !h->x || !h->target || !h->out || !h->dout ||
        !h->q) {
        host_close(e);
        return ath_errf(err, "out of host memory for the training state");
    }
    return 0;
}

static int host_put(ath_engine_t *e, const float *params, const float *m, const float *v,
                    const ath_scalars_t *sc, ath_err_t *err)
{
    (void)err;
    host_engine_t *h = e->impl;
    const size_t bytes = e->cfg.n_params * sizeof(float);
    if (params) {
        memcpy(h->params, params, bytes);
        memcpy(h->m, m, bytes);
        memcpy(h->v, v, bytes);
    }
    e->sc = *sc;
    e->enqueued = sc->step;
    return 0;
}

static int host_get(ath_engine_t *e, float *params, float *m, float *v, ath_err_t *err)
{
    (void)err;
    host_engine_t *h = e->impl;
    const size_t bytes = e->cfg.n_params * sizeof(float);
    memcpy(params, h->params, bytes);
    memcpy(m, h->m, bytes);
    memcpy(v, h->v, bytes);
    return 0;
}

static int host_step(ath_engine_t *e, ath_trunk_t *t, int timed, ath_err_t *err)
{
    host_engine_t *h = e->impl;
    const ath_engine_cfg_t *c = &e->cfg;
    const int32_t B = c->batch;
    const size_t n = (size_t)B * (size_t)c->config.aux;
    double mark[ATH_PHASES + 1];
    mark[0] = timed ? ath_now_s() : 0.0;
#define MARK(phase) (timed ? (void)(mark[(phase) + 1] = ath_now_s()) : (void)0)
    const uint64_t step = e->sc.step + 1;
    ath_task_draw(c->task, step, B, h->x, h->target);
    MARK(ATH_PHASE_DATA);
    if (ath_trunk_forward(t, h->params, h->x, B, h->out, err) != 0)
        return -1;
    MARK(ATH_PHASE_FORWARD);
    const float loss = ath_loss_host(h->out, h->target, n, h->dout, h->q);
    MARK(ATH_PHASE_LOSS);
    int grads_bad = 0;
    if (ath_finite(loss)) { /* else the step is refused whatever the gradients */
        if (ath_trunk_backward(t, h->dout, B, h->grads, err) != 0)
            return -1;
        MARK(ATH_PHASE_BACKWARD);
        grads_bad = ath_any_nonfinite(h->grads, c->n_params);
    } else {
        MARK(ATH_PHASE_BACKWARD);
    }
    ath_step_verdict(&e->sc, loss, grads_bad, c->hp);
    e->ring[(step - 1) % ATH_ENGINE_RING] = loss;
    MARK(ATH_PHASE_VERDICT);
    if (e->sc.ok)
        ath_adam_host(c->hp, e->sc.lr_t, c->n_params, h->params, h->m, h->v, h->grads);
    MARK(ATH_PHASE_ADAM);
#undef MARK
    if (timed) {
        for (int p = 0; p < ATH_PHASES; p++)
            e->phase_us[p] += (mark[p + 1] - mark[p]) * 1e6;
        e->timed++;
    }
    e->enqueued = step;
    return 0;
}

static int host_sync(ath_engine_t *e, ath_err_t *err)
{
    (void)e;
    (void)err;
    return 0;
}

static void host_forget_plugin(ath_engine_t *e) { (void)e; }

const ath_engine_ops_t ath_engine_host_ops = {
    .name = "host",
    .open = host_open,
    .close = host_close,
    .put = host_put,
    .get = host_get,
    .step = host_step,
    .sync = host_sync,
    .forget_plugin = host_forget_plugin,
};
