/*
 * train.h — the training loop of the host trainer: the task's samples go
 * through the plugin (forward, backward), the host computes the loss and its
 * gradient, and Adam updates the host-owned parameters. Progress lines, the
 * loss curve (CSV, SVG), checkpoints and resume are handled here.
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

typedef struct ath_train_opts {
    const char *plugin; /* plugin directory or file */
    int device;         /* CUDA device, -1 = current */
    int32_t enc, h1, h2, aux;
    int32_t batch;
    uint64_t steps; /* train until this step number (a resumed run continues to it) */
    uint64_t seed;
    float lr;
    const char *csv, *svg;
    const char *checkpoint;    /* written at the end and every checkpoint_every steps */
    uint64_t checkpoint_every; /* 0 = only at the end */
    const char *resume;        /* checkpoint to continue from */
    uint64_t log_every;        /* progress line interval in steps; 0 = automatic */
    int quiet;                 /* no progress lines, only the summary */
    const struct ath_swap_opts *swap; /* hot-swap settings (swap.h), or NULL for none */
} ath_train_opts_t;

/* Runs training; prints progress to stdout and errors to stderr. Returns an
 * ATH_EXIT_* code. */
int ath_train_run(const ath_train_opts_t *o);

#endif
