/*
 * train.h — the training loop of the host trainer: each step draws a batch
 * from the task's replay buffer, runs it through the plugin (forward,
 * backward), computes the loss and its gradient, checks that both are finite
 * and applies Adam. The state lives with an engine (engine.h): in host
 * memory for host plugins, in device memory for the whole run for CUDA
 * plugins. Progress lines, the loss curve (CSV, SVG), checkpoints, resume,
 * hot swap, the call watchdog and SIGINT/SIGTERM are handled here.
 */
#ifndef ATH_TRAIN_H
#define ATH_TRAIN_H

#include <stdint.h>

/* Defaults of the training task (see main.c --help and the README). */
#define ATH_TRAIN_ENC 256
#define ATH_TRAIN_H1 256
#define ATH_TRAIN_H2 256
#define ATH_TRAIN_AUX 128
#define ATH_TRAIN_BATCH 64
#define ATH_TRAIN_STEPS 2000
#define ATH_TRAIN_LR 1e-3f
#define ATH_TRAIN_SEED 1
#define ATH_TRAIN_CALL_TIMEOUT_S 120.0

typedef struct ath_train_opts {
    const char *plugin; /* plugin directory or file */
    int device;         /* CUDA device, -1 = current */
    int32_t enc, h1, h2, aux;
    int32_t batch;
    uint64_t steps; /* train until this step number (a resumed run continues to it) */
    uint64_t seed;
    float lr;
    const char *csv, *svg;
    const char *checkpoint;           /* written at the end and every checkpoint_every steps */
    uint64_t checkpoint_every;        /* 0 = only at the end */
    const char *resume;               /* checkpoint to continue from */
    uint64_t log_every;               /* progress line interval in steps; 0 = automatic */
    int quiet;                        /* no progress lines, only the summary */
    const struct ath_swap_opts *swap; /* hot-swap settings (swap.h), or NULL for none */
    int no_graph;                     /* CUDA plugins: enqueue every step, never a CUDA graph */
    double call_timeout_s; /* watchdog: longest a plugin call or a device wait may take; 0 = none */
    int gpus;              /* data parallel over this many ranks (dist.h); 0 = one device */
    const struct ath_dist_env *dist; /* this worker's rank (dist.h), or NULL */
} ath_train_opts_t;

/* Runs training; prints progress to stdout and errors to stderr. Returns an
 * ATH_EXIT_* code. */
int ath_train_run(const ath_train_opts_t *o);

#endif
