/*
 * bench_cpu_kernels.c — median time of the CPU reference kernels (forward,
 * backward) on the production topology ENC=256, H1=256, H2=256, AUX=128.
 * A program, not a test: `bench_cpu_kernels [B ...]` prints one row per batch.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_trunk.h"
#include "rng.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *randoms(tst_rng_t *r, size_t n, float a)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    tst_rng_fill(r, p, n, -a, a);
    return p;
}

int main(int argc, char **argv)
{
    const atk_dims_t d = {256, 256, 256, 128};
    int batches[16] = {1, 64, 256, 1024}, nb = 4;
    if (argc > 1) {
        nb = 0;
        for (int i = 1; i < argc && nb < 16; i++)
            batches[nb++] = atoi(argv[i]);
    }
    tst_rng_t r;
    tst_rng_seed(&r, 1);
    atk_params_t p = {randoms(&r, 256 * 256, 0.1f), randoms(&r, 256, 0.1f),
                      randoms(&r, 256 * 256, 0.1f), randoms(&r, 256, 0.1f),
                      randoms(&r, 256 * 128, 0.1f), randoms(&r, 128, 0.1f)};
    atk_grads_t g = {randoms(&r, 256 * 256, 0), randoms(&r, 256, 0), randoms(&r, 256 * 256, 0),
                     randoms(&r, 256, 0),       randoms(&r, 256 * 128, 0), randoms(&r, 128, 0)};
    printf("%8s %14s %14s %12s\n", "B", "forward_us", "backward_us", "GFLOP/s");
    for (int i = 0; i < nb; i++) {
        int B = batches[i];
        if (B < 1)
            continue;
        float *x = randoms(&r, (size_t)B * d.enc, 1.0f), *dout = randoms(&r, (size_t)B * d.aux, 1.0f);
        float *h1 = randoms(&r, (size_t)B * d.h1, 0), *h2 = randoms(&r, (size_t)B * d.h2, 0);
        float *out = randoms(&r, (size_t)B * d.aux, 0);
        float *ws = randoms(&r, cpu_trunk_backward_workspace(d, B), 0);
        enum { REPS = 21 };
        double tf[REPS], tb[REPS];
        for (int k = 0; k < REPS; k++) {
            double t0 = now_us();
            cpu_trunk_forward(d, &p, x, B, h1, h2, out);
            double t1 = now_us();
            cpu_trunk_backward(d, &p, x, h1, h2, dout, B, &g, 0, ws);
            tf[k] = t1 - t0;
            tb[k] = now_us() - t1;
        }
        qsort(tf, REPS, sizeof *tf, cmp_double);
        qsort(tb, REPS, sizeof *tb, cmp_double);
        /* 2 flops per multiply-add: forward 1x, backward 2x the layer MACs less
         * the input gradient of layer 1 that does not exist. */
        double macs = (double)B * (256.0 * 256 + 256.0 * 256 + 256.0 * 128);
        double flops = 2.0 * (macs + macs + (double)B * (256.0 * 256 + 256.0 * 128));
        printf("%8d %14.1f %14.1f %12.2f\n", B, tf[REPS / 2], tb[REPS / 2],
               flops / (tf[REPS / 2] + tb[REPS / 2]) * 1e-3);
        free(ws);
        free(out);
        free(h2);
        free(h1);
        free(dout);
        free(x);
    }
    return 0;
}
