/*
 * bench.h — benchmark mode: forward, backward and a whole step of one or
 * more plugins, timed separately, median of many iterations, per batch size.
 *
 * FLOP counts (multiply-add = 2 FLOP; bias, ELU, ELU' and bias-gradient work
 * not counted):
 *   forward  = 2·B·(ENC·H1 + H1·H2 + H2·AUX)
 *   backward = 2·B·(ENC·H1 + 2·H1·H2 + 2·H2·AUX)
 *              (the three weight gradients, plus the input gradients of
 *              layers 3 and 2; layer 1 has none: stop-gradient)
 *   step     = forward + backward
 * At the production topology 256/256/256/128 and B = 65536 a step is
 * 55.8 GFLOP.
 *
 * With --cublas the same trunk written with cuBLAS (bench_cublas.cu: SGEMM
 * plus small bias/ELU kernels, one CUDA graph per pass) is timed alongside,
 * as what a user would write instead.
 *
 * CUDA plugins that claim AUXTRUNK_CAP_GRAPH_CAPTURE also get a graph step
 * (step_graph_us): one forward + backward captured into a CUDA graph by the
 * host and timed by replay, as cuBLAS is, on one fixed input set.
 */
#ifndef ATH_BENCH_H
#define ATH_BENCH_H

#include <stddef.h>
#include <stdint.h>

#define ATH_BENCH_MAX_PLUGINS 16
#define ATH_BENCH_MAX_BATCHES 32
/* Plugins plus the optional cuBLAS comparison. */
#define ATH_BENCH_MAX_COLUMNS (ATH_BENCH_MAX_PLUGINS + 1)

typedef struct ath_bench_opts {
    const char *plugins[ATH_BENCH_MAX_PLUGINS]; /* directories or files */
    int n_plugins;
    int device;
    int32_t enc, h1, h2, aux;
    int32_t batches[ATH_BENCH_MAX_BATCHES];
    int n_batches;
    int iters;         /* timed iterations (at most) */
    int warmup;        /* untimed iterations first (at most) */
    int min_iters;     /* timed iterations at least, whatever the budget */
    double budget_s;   /* wall-clock budget of each timed loop (eager, graph) */
    size_t rotate_mib; /* input sets rotated through this much memory (0 = one set) */
    uint64_t seed;
    const char *csv;
    const char *svg; /* chart of step time against batch size */
    int cublas;      /* also time the cuBLAS equivalent (CUDA builds with cuBLAS) */
    int fast;        /* ask for AUXTRUNK_CONFIG_FAST (plugins without it are skipped) */
    int quiet;       /* only the table */
} ath_bench_opts_t;

/* FLOP of one call, by the formulas above. */
double ath_bench_flop_forward(int32_t B, int32_t enc, int32_t h1, int32_t h2, int32_t aux);
double ath_bench_flop_backward(int32_t B, int32_t enc, int32_t h1, int32_t h2, int32_t aux);

/* Runs the benchmark; prints the table to stdout. Returns an ATH_EXIT_* code. */
int ath_bench_run(const ath_bench_opts_t *o);

#endif
