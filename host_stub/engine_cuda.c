/*
 * engine_cuda.c — the device-resident engine (engine.h): the whole training
 * state in device memory for the whole run, one step enqueued on one
 * non-blocking stream (devmem_cuda.c) with the host's kernels of
 * step_cuda.cu around the plugin's calls, or replayed as one CUDA graph
 * captured from that same enqueue. The host waits only in sync.
 *
 * The step, in stream order:
 *   gather -> plugin forward -> loss -> plugin backward -> check -> verdict -> Adam
 * Data parallel (dist.h), each rank gathers its shard, and between backward
 * and the check the ranks' gradients and loss sums are all-gathered and
 * combined in rank order (combine.h), so every rank then holds the same
 * gradients and loss and runs the same verdict and Adam.
 */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "dist.h"
#include "layout.h"
#include "step_cuda.h"

/* Timing marks: the phases of a timed eager step, then a timed replay. */
#define MARK_REPLAY_BEGIN (ATH_PHASES + 1)
#define MARK_REPLAY_END (ATH_PHASES + 2)

typedef struct cuda_engine {
    ath_devmem_t *mem;
    float *params, *m, *v, *grads; /* [P] */
    float *x, *target;             /* [B, ENC], [B, AUX] */
    float *out, *dout;             /* [B, AUX] */
    float *part;                   /* [n_part] loss segment sums */
    uint32_t *bad;                 /* [ATH_CUDA_CHECK_BLOCKS] */
    ath_scalars_t *sc;
    float *ring;            /* [ATH_ENGINE_RING] */
    float *buf_x, *buf_t;   /* the replay buffer */
    float *gathered, *lsum; /* data parallel: [world, P] and [world] */
    uint32_t n, n_part;
    void *graph;      /* the captured step, or NULL */
    int graph_failed; /* this plugin's step could not be captured */
    int phases_pending, replay_pending, time_next_replay;
} cuda_engine_t;

#define CU_TRY(call)                                                         \
    do {                                                                     \
        int rc_ = (call);                                                    \
        if (rc_ != 0)                                                        \
            return ath_errf(err, "%s:%d: %s: %s", __FILE__, __LINE__, #call, \
                            ath_cuda_error_text(rc_));                       \
    } while (0)

static void cuda_close(ath_engine_t *e)
{
    cuda_engine_t *c = e->impl;
    if (!c)
        return;
    if (c->mem) {
        (void)c->mem->ops->sync(c->mem, NULL);
        c->mem->ops->graph_free(c->mem, c->graph);
        void *bufs[] = {c->params, c->m,     c->v,        c->grads, c->x,  c->target,
                        c->out,    c->dout,  c->part,     c->bad,   c->sc, c->ring,
                        c->buf_x,  c->buf_t, c->gathered, c->lsum};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i])
                c->mem->ops->release(c->mem, bufs[i]);
        ath_devmem_close(c->mem);
    }
    free(c);
    e->impl = NULL;
}

static int cuda_open(ath_engine_t *e, ath_err_t *err)
{
    cuda_engine_t *c = calloc(1, sizeof *c);
    if (!c)
        return ath_errf(err, "out of host memory");
    e->impl = c;
    e->lazy = 1;
    const ath_engine_cfg_t *g = &e->cfg;
    const ath_task_t *task = g->task;
    const size_t P = g->n_params, B = (size_t)g->batch;
    const size_t ENC = (size_t)g->config.enc, AUX = (size_t)g->config.aux;
    c->n = (uint32_t)(B * AUX);
    const size_t world = g->dist ? (size_t)g->dist->world : 0;
    c->n_part = (c->n + ATH_CUDA_SEGMENT - 1) / ATH_CUDA_SEGMENT;
    if (ath_devmem_open(ATH_SPACE_CUDA, g->device, &c->mem, err) != 0) {
        cuda_close(e);
        return -1;
    }
    struct {
        void **p;
        size_t bytes;
    } bufs[] = {
        {(void **)&c->params, P * sizeof(float)},
        {(void **)&c->m, P * sizeof(float)},
        {(void **)&c->v, P * sizeof(float)},
        {(void **)&c->grads, P * sizeof(float)},
        {(void **)&c->x, B * ENC * sizeof(float)},
        {(void **)&c->target, B * AUX * sizeof(float)},
        {(void **)&c->out, B * AUX * sizeof(float)},
        {(void **)&c->dout, B * AUX * sizeof(float)},
        {(void **)&c->part, c->n_part * sizeof(float)},
        {(void **)&c->bad, ATH_CUDA_CHECK_BLOCKS * sizeof(uint32_t)},
        {(void **)&c->sc, sizeof(ath_scalars_t)},
        {(void **)&c->ring, ATH_ENGINE_RING * sizeof(float)},
        {(void **)&c->buf_x, (size_t)task->n * ENC * sizeof(float)},
        {(void **)&c->buf_t, (size_t)task->n * AUX * sizeof(float)},
        {(void **)&c->gathered, world * P * sizeof(float)},
        {(void **)&c->lsum, world * sizeof(float)},
    };
    ath_devmem_t *mem = c->mem;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (bufs[i].bytes == 0)
            continue;
        if (mem->ops->alloc(mem, bufs[i].bytes, bufs[i].p, err) != 0) {
            cuda_close(e);
            return -1;
        }
    }
    /* The replay buffer is uploaded once; it never changes. */
    if (mem->ops->upload(mem, c->buf_x, task->x, (size_t)task->n * ENC * sizeof(float), err) != 0 ||
        mem->ops->upload(mem, c->buf_t, task->target, (size_t)task->n * AUX * sizeof(float), err) !=
            0) {
        cuda_close(e);
        return -1;
    }
    return 0;
}

static int cuda_put(ath_engine_t *e, const float *params, const float *m, const float *v,
                    const ath_scalars_t *sc, ath_err_t *err)
{
    cuda_engine_t *c = e->impl;
    ath_devmem_t *mem = c->mem;
    const size_t bytes = e->cfg.n_params * sizeof(float);
    if (params && (mem->ops->upload(mem, c->params, params, bytes, err) != 0 ||
                   mem->ops->upload(mem, c->m, m, bytes, err) != 0 ||
                   mem->ops->upload(mem, c->v, v, bytes, err) != 0))
        return -1;
    if (mem->ops->upload(mem, c->sc, sc, sizeof *sc, err) != 0)
        return -1;
    e->sc = *sc;
    e->enqueued = sc->step;
    return 0;
}

static int cuda_get(ath_engine_t *e, float *params, float *m, float *v, ath_err_t *err)
{
    cuda_engine_t *c = e->impl;
    ath_devmem_t *mem = c->mem;
    const size_t bytes = e->cfg.n_params * sizeof(float);
    if (mem->ops->download(mem, params, c->params, bytes, err) != 0 ||
        mem->ops->download(mem, m, c->m, bytes, err) != 0 ||
        mem->ops->download(mem, v, c->v, bytes, err) != 0)
        return -1;
    return 0;
}

/* Enqueues one step; marks between the phases when timed. The same calls
 * run eagerly and inside a graph capture. */
static int enqueue(ath_engine_t *e, ath_trunk_t *t, int timed, ath_err_t *err)
{
    cuda_engine_t *c = e->impl;
    ath_devmem_t *mem = c->mem;
    void *st = mem->stream;
    const ath_engine_cfg_t *g = &e->cfg;
    const int32_t B = g->batch;
    const auxtrunk_api_t *api = &t->plugin.api;
    auxtrunk_params_t pv = ath_params_view(&g->config, c->params);
    auxtrunk_grads_t gv = ath_grads_view(&g->config, c->grads);
#define MARK(slot)                                          \
    do {                                                    \
        if (timed && mem->ops->mark(mem, (slot), err) != 0) \
            return -1;                                      \
    } while (0)
    MARK(0);
    CU_TRY(ath_cuda_gather_shard(st, c->buf_x, c->buf_t, g->task->key, g->task->log2n, c->sc,
                                 g->slot0, B, g->config.enc, g->config.aux, c->x, c->target));
    MARK(ATH_PHASE_DATA + 1);
    int32_t s = api->forward(t->plugin.handle, &pv, c->x, B, c->out, 0, st);
    if (s != AUXTRUNK_OK)
        return ath_plugin_failf(&t->plugin, s, err, "forward");
    MARK(ATH_PHASE_FORWARD + 1);
    const uint32_t n_total = (uint32_t)((size_t)g->batch_total * (size_t)g->config.aux);
    CU_TRY(ath_cuda_loss_shard(st, c->out, c->target, c->n, n_total, c->dout, c->part));
    MARK(ATH_PHASE_LOSS + 1);
    s = api->backward(t->plugin.handle, &pv, c->x, c->dout, B, &gv, 0, st);
    if (s != AUXTRUNK_OK)
        return ath_plugin_failf(&t->plugin, s, err, "backward");
    MARK(ATH_PHASE_BACKWARD + 1);
    uint32_t n_part = c->n_part;
    if (g->dist) {
        /* The rank's loss sum into part[0]; every rank's sums and gradients
         * gathered, then combined in rank order into part[0] and grads. */
        CU_TRY(ath_cuda_loss_reduce(st, c->part, c->n_part));
        if (ath_dist_allgather(g->dist, c->grads, c->gathered, g->n_params, st, err) != 0 ||
            ath_dist_allgather(g->dist, c->part, c->lsum, 1, st, err) != 0)
            return -1;
        CU_TRY(ath_cuda_combine(st, c->gathered, g->n_params, g->dist->world, c->grads));
        CU_TRY(ath_cuda_combine(st, c->lsum, 1, g->dist->world, c->part));
        n_part = 1;
    }
    CU_TRY(ath_cuda_check(st, c->grads, g->n_params, c->bad));
    CU_TRY(ath_cuda_verdict(st, c->part, n_part, c->bad, n_total, g->hp, c->sc, c->ring,
                            ATH_ENGINE_RING));
    MARK(ATH_PHASE_VERDICT + 1);
    CU_TRY(ath_cuda_adam(st, c->params, c->m, c->v, c->grads, g->n_params, c->sc, g->hp));
    MARK(ATH_PHASE_ADAM + 1);
#undef MARK
    return 0;
}

/* Captures the step once; 0 with c->graph set, or 0 with graph_failed set
 * (the caller then enqueues), or -1 when a plugin call itself failed. */
static int capture(ath_engine_t *e, ath_trunk_t *t, ath_err_t *err)
{
    cuda_engine_t *c = e->impl;
    ath_devmem_t *mem = c->mem;
    ath_err_t why = {{0}};
    if (mem->ops->capture_begin(mem, &why) != 0) {
        c->graph_failed = 1;
    } else if (enqueue(e, t, 0, err) != 0) {
        mem->ops->capture_abort(mem);
        return -1;
    } else if (mem->ops->capture_end(mem, &c->graph, &why) != 0) {
        c->graph_failed = 1;
    }
    if (c->graph_failed)
        fprintf(stderr,
                "auxtrunk-host: the step could not be captured as a CUDA graph (%s); "
                "enqueueing it step by step\n",
                why.msg);
    return 0;
}

static int cuda_step(ath_engine_t *e, ath_trunk_t *t, int timed, ath_err_t *err)
{
    cuda_engine_t *c = e->impl;
    ath_devmem_t *mem = c->mem;
    const int graphs =
        e->cfg.graph && (t->plugin.api.caps & AUXTRUNK_CAP_GRAPH_CAPTURE) && !c->graph_failed;
    if (!timed && graphs && !c->graph && capture(e, t, err) != 0)
        return -1;
    if (timed || !c->graph) {
        if (enqueue(e, t, timed, err) != 0)
            return -1;
        if (timed) {
            c->phases_pending = 1;
            c->time_next_replay = 1;
        }
    } else {
        int time_it = c->time_next_replay;
        if (time_it && mem->ops->mark(mem, MARK_REPLAY_BEGIN, err) != 0)
            return -1;
        if (mem->ops->replay(mem, c->graph, err) != 0)
            return -1;
        if (time_it) {
            if (mem->ops->mark(mem, MARK_REPLAY_END, err) != 0)
                return -1;
            c->replay_pending = 1;
            c->time_next_replay = 0;
        }
    }
    e->graph_active = c->graph != NULL;
    e->enqueued++;
    return 0;
}

static int cuda_sync(ath_engine_t *e, ath_err_t *err)
{
    cuda_engine_t *c = e->impl;
    ath_devmem_t *mem = c->mem;
    /* A rank's stream waits on the others' collectives: watched, so that a
     * failed or hung rank ends this one too. */
    if (e->cfg.dist && ath_dist_wait(e->cfg.dist, mem->stream, err) != 0)
        return -1;
    if (mem->ops->sync(mem, err) != 0 ||
        mem->ops->download(mem, &e->sc, c->sc, sizeof e->sc, err) != 0 ||
        mem->ops->download(mem, e->ring, c->ring, sizeof e->ring, err) != 0)
        return -1;
    if (c->phases_pending) {
        for (int p = 0; p < ATH_PHASES; p++) {
            double us = 0.0;
            if (mem->ops->elapsed_us(mem, p, p + 1, &us, err) != 0)
                return -1;
            e->phase_us[p] += us;
        }
        e->timed++;
        c->phases_pending = 0;
    }
    if (c->replay_pending) {
        double us = 0.0;
        if (mem->ops->elapsed_us(mem, MARK_REPLAY_BEGIN, MARK_REPLAY_END, &us, err) != 0)
            return -1;
        e->graph_us += us;
        e->graph_timed++;
        c->replay_pending = 0;
    }
    return 0;
}

static void cuda_forget_plugin(ath_engine_t *e)
{
    cuda_engine_t *c = e->impl;
    c->mem->ops->graph_free(c->mem, c->graph);
    c->graph = NULL;
    c->graph_failed = 0;
    e->graph_active = 0;
}

const ath_engine_ops_t ath_engine_cuda_ops = {
    .name = "device",
    .open = cuda_open,
    .close = cuda_close,
    .put = cuda_put,
    .get = cuda_get,
    .step = cuda_step,
    .sync = cuda_sync,
    .forget_plugin = cuda_forget_plugin,
};
