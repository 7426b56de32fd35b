/*
 * engine.h — where the training state lives and how one step runs on it.
 *
 * An engine owns the run's state in one memory space: parameters, Adam's
 * moments and scalars (ath_scalars_t), and the step's buffers (the batch,
 * out, dout, gradients, the loss reduction). Two implementations:
 *   - host (engine_host.c): everything in host arrays; a step is synchronous
 *     and the host plugin is called through ath_trunk_t's mirrors;
 *   - cuda (engine_cuda.c, CUDA builds only): everything in device memory
 *     for the whole run, the replay buffer uploaded once; a step is enqueued
 *     on one non-blocking stream (the batch draw, forward, loss and dout,
 *     backward, the finite check and verdict, Adam) and, for plugins that
 *     claim AUXTRUNK_CAP_GRAPH_CAPTURE, captured once into a CUDA graph and
 *     replayed. The host waits only in sync.
 * Both compute the step with the definitions of step_canon.h, so they give
 * the same bits, and the state moves between them (get, put) at any synced
 * step boundary: that is how a hot swap across memory spaces migrates it.
 *
 * The loss of step s is kept in ring[(s - 1) % ATH_ENGINE_RING]: a caller
 * must sync at least every ATH_ENGINE_RING steps.
 */
#ifndef ATH_ENGINE_H
#define ATH_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "auxtrunk.h"
#include "loader.h"
#include "step_canon.h"
#include "task.h"
#include "trunk.h"
#include "util.h"

#define ATH_ENGINE_RING 1024

/* Phases of the step, in order, for the timing breakdown. */
enum {
    ATH_PHASE_DATA,     /* the batch drawn from the replay buffer */
    ATH_PHASE_FORWARD,  /* plugin forward */
    ATH_PHASE_LOSS,     /* loss elements, dout, the per-segment sums */
    ATH_PHASE_BACKWARD, /* plugin backward */
    ATH_PHASE_VERDICT,  /* finite check of the gradients, the loss sum, the verdict */
    ATH_PHASE_ADAM,     /* Adam */
    ATH_PHASES
};
extern const char *const ath_phase_names[ATH_PHASES];

typedef struct ath_engine_cfg {
    auxtrunk_config_t config; /* topology; max_batch = batch */
    int32_t batch;
    size_t n_params;
    ath_adam_hp_t hp;
    const ath_task_t *task; /* the replay buffer (host memory), alive while the engine is */
    int device;             /* CUDA ordinal, -1 = current (cuda only) */
    int graph;              /* capture the step into a CUDA graph where the plugin allows */
    /* Data parallel (dist.h, cuda only): this rank's batch is global slots
     * [slot0, slot0 + batch) of a global batch of batch_total; its gradients
     * and loss are combined with the other ranks' through dist. One device:
     * dist NULL, slot0 0, batch_total = batch. */
    struct ath_dist *dist;
    int32_t slot0, batch_total;
} ath_engine_cfg_t;

typedef struct ath_engine ath_engine_t;

typedef struct ath_engine_ops {
    const char *name; /* "host" or "cuda" */
    int (*open)(ath_engine_t *e, ath_err_t *err);
    void (*close)(ath_engine_t *e);
    /* Sets the state from host arrays of n_params floats (NULL arrays: only
     * the scalars). Only at a synced step boundary. */
    int (*put)(ath_engine_t *e, const float *params, const float *m, const float *v,
               const ath_scalars_t *sc, ath_err_t *err);
    /* Copies the state into host arrays. Only at a synced step boundary. */
    int (*get)(ath_engine_t *e, float *params, float *m, float *v, ath_err_t *err);
    /* Runs (host) or enqueues (cuda) step e->enqueued + 1 with trunk t.
     * timed: record the phase times of this step (read by the next sync).
     * Returns -1 when a plugin call or the device failed; the state is then
     * that before the step. */
    int (*step)(ath_engine_t *e, ath_trunk_t *t, int timed, ath_err_t *err);
    /* Waits for every step enqueued; e->sc and e->ring are then current. */
    int (*sync)(ath_engine_t *e, ath_err_t *err);
    /* The plugin changed (swap, rollback): drop anything that holds it. */
    void (*forget_plugin)(ath_engine_t *e);
} ath_engine_ops_t;

struct ath_engine {
    const ath_engine_ops_t *ops;
    ath_engine_cfg_t cfg;
    int lazy;          /* steps run ahead of the host until a sync (cuda) */
    uint64_t enqueued; /* steps run or enqueued: the last step handed to step() */
    ath_scalars_t sc;  /* the scalars at the last sync */
    float ring[ATH_ENGINE_RING];
    /* Timing: sums over the steps timed, in microseconds. */
    double phase_us[ATH_PHASES];
    unsigned timed;
    double graph_us; /* device time of a whole replayed step (graph mode) */
    unsigned graph_timed;
    int graph_active; /* steps replay a captured CUDA graph */
    void *impl;
};

/* Opens the engine for a memory space (cuda: fails with a clear message in a
 * build without CUDA). The state is unset until put. */
int ath_engine_open(ath_space_t space, const ath_engine_cfg_t *cfg, ath_engine_t **out,
                    ath_err_t *err);
void ath_engine_close(ath_engine_t *e);

extern const ath_engine_ops_t ath_engine_host_ops;
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
extern const ath_engine_ops_t ath_engine_cuda_ops;
#endif

/* The host's reference of the step's arithmetic, also used by the tests:
 * the loss of n = B·AUX elements (dout written), with q [n] as scratch. */
float ath_loss_host(const float *out, const float *target, size_t n, float *dout, float *q);
/* The tree sum of the loss elements of n of the n_total elements (a rank's
 * shard: dout divided by n_total), before ath_loss_of_sum. */
float ath_loss_sum_host(const float *out, const float *target, size_t n, size_t n_total,
                        float *dout, float *q);
/* 1 when any of the n values is not finite. */
int ath_any_nonfinite(const float *g, size_t n);

#endif
