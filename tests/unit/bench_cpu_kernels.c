/*
 * bench_cpu_kernels.c — median times of the two CPU kernel sets, kernels/cpu
 * (cpu-ref, one thread) and kernels/cpu_blocked (cpu-blocked, --threads), on
 * the production topology ENC=256, H1=256, H2=256, AUX=128: forward,
 * backward and their sum (one training step of the trunk). A program, not a
 * test; docs/cpu-perf.md holds its results beside tests/unit/bench_numpy.py.
 *
 *   bench_cpu_kernels [--threads N] [--reps N] [--isa NAME] [--only NAME] [B ...]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_blocked.h"
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
        fprintf(stderr, "bench_cpu_kernels: out of memory\n");
        exit(1);
    }
    tst_rng_fill(r, p, n, -a, a);
    return p;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_cpu_kernels [--threads N] [--reps N] [--isa NAME] [--only NAME] [B ...]\n"
            "  --threads N  threads of cpu-blocked, the caller's included (default: the CPUs\n"
            "               this process may run on); cpu-ref always runs on one\n"
            "  --reps N     timed repetitions per batch and kernel set, median (default 101)\n"
            "  --isa NAME   cpu-blocked's instruction set: scalar, avx2 or avx512 (default: the\n"
            "               widest this CPU runs)\n"
            "  --only NAME  time only cpu-ref or only cpu-blocked\n"
            "  B ...        batch sizes (default 1 64 256 1024)\n"
            "Production topology 256/256/256/128; inputs fixed per batch (warm caches).\n");
}

typedef struct timing {
    double fwd, bwd, step; /* medians, microseconds */
} timing_t;

/* Medians over reps of forward, backward and forward + backward. */
#define TIME_STEPS(reps, t, FWD, BWD)                                            \
    do {                                                                         \
        double *tf = malloc(3 * (size_t)(reps) * sizeof *tf), *tb = tf + (reps), \
               *ts = tb + (reps);                                                \
        for (int k = -(reps) / 10 - 2; k < (reps); k++) {                        \
            double t0 = now_us();                                                \
            FWD;                                                                 \
            double t1 = now_us();                                                \
            BWD;                                                                 \
            double t2 = now_us();                                                \
            if (k >= 0) {                                                        \
                tf[k] = t1 - t0;                                                 \
                tb[k] = t2 - t1;                                                 \
                ts[k] = t2 - t0;                                                 \
            }                                                                    \
        }                                                                        \
        qsort(tf, (size_t)(reps), sizeof *tf, cmp_double);                       \
        qsort(tb, (size_t)(reps), sizeof *tb, cmp_double);                       \
        qsort(ts, (size_t)(reps), sizeof *ts, cmp_double);                       \
        (t) = (timing_t){tf[(reps) / 2], tb[(reps) / 2], ts[(reps) / 2]};        \
        free(tf);                                                                \
    } while (0)

int main(int argc, char **argv)
{
    const atk_dims_t d = {256, 256, 256, 128};
    int batches[32] = {1, 64, 256, 1024}, nb = 4, user_b = 0, reps = 101;
    cpu_set_t set;
    int threads = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    cpb_isa_t isa = CPB_ISA_AUTO;
    int run_ref = 1, run_blocked = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(a, "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(a, "--isa") && i + 1 < argc) {
            const char *v = argv[++i];
            isa = !strcmp(v, "scalar")   ? CPB_ISA_SCALAR
                  : !strcmp(v, "avx2")   ? CPB_ISA_AVX2
                  : !strcmp(v, "avx512") ? CPB_ISA_AVX512
                                         : (cpb_isa_t)-1;
            if (isa == (cpb_isa_t)-1) {
                fprintf(stderr, "bench_cpu_kernels: unknown --isa %s\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--only") && i + 1 < argc) {
            const char *v = argv[++i];
            run_ref = !strcmp(v, "cpu-ref");
            run_blocked = !strcmp(v, "cpu-blocked");
            if (!run_ref && !run_blocked) {
                fprintf(stderr, "bench_cpu_kernels: unknown --only %s\n", v);
                return 2;
            }
        } else if (a[0] != '-' && atoi(a) > 0 && nb < 32) {
            if (!user_b)
                nb = 0, user_b = 1;
            batches[nb++] = atoi(a);
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (threads < 1 || reps < 1) {
        usage(stderr);
        return 2;
    }
    int max_b = 1;
    for (int i = 0; i < nb; i++)
        max_b = batches[i] > max_b ? batches[i] : max_b;

    tst_rng_t r;
    tst_rng_seed(&r, 1);
    atk_params_t p = {randoms(&r, 256 * 256, 0.1f), randoms(&r, 256, 0.1f),
                      randoms(&r, 256 * 256, 0.1f), randoms(&r, 256, 0.1f),
                      randoms(&r, 256 * 128, 0.1f), randoms(&r, 128, 0.1f)};
    atk_grads_t g = {randoms(&r, 256 * 256, 0), randoms(&r, 256, 0),
                     randoms(&r, 256 * 256, 0), randoms(&r, 256, 0),
                     randoms(&r, 256 * 128, 0), randoms(&r, 128, 0)};
    const cpb_config_t cfg = {.dims = d, .max_batch = max_b, .threads = threads, .isa = isa};
    cpb_trunk_t *t;
    if (cpb_create(&cfg, &t) != CPB_OK) {
        fprintf(stderr, "bench_cpu_kernels: cpu-blocked: cannot create (instruction set, memory "
                        "or threads)\n");
        return 1;
    }
    printf("cpu-blocked: %s, %d threads; cpu-ref: 1 thread; median of %d\n", cpb_isa_name(t),
           cpb_threads(t), reps);
    printf("%8s %-12s %12s %12s %12s %9s\n", "B", "kernels", "forward_us", "backward_us", "step_us",
           "GFLOP/s");
    for (int i = 0; i < nb; i++) {
        const int B = batches[i];
        float *x = randoms(&r, (size_t)B * d.enc, 1.0f),
              *dout = randoms(&r, (size_t)B * d.aux, 1.0f);
        float *h1 = randoms(&r, (size_t)B * d.h1, 0), *h2 = randoms(&r, (size_t)B * d.h2, 0);
        float *out = randoms(&r, (size_t)B * d.aux, 0);
        float *ws = randoms(&r, cpu_trunk_backward_workspace(d, B), 0);
        /* 2 flops per multiply-add: forward 1x, backward 2x the layer MACs less
         * the input gradient of layer 1 that does not exist. */
        const double macs = (double)B * (256.0 * 256 + 256.0 * 256 + 256.0 * 128);
        const double flops = 2.0 * (macs + macs + (double)B * (256.0 * 256 + 256.0 * 128));
        timing_t tr, tbk;
        if (run_ref) {
            TIME_STEPS(reps, tr, cpu_trunk_forward(d, &p, x, B, h1, h2, out),
                       cpu_trunk_backward(d, &p, x, h1, h2, dout, B, &g, 0, ws));
            printf("%8d %-12s %12.1f %12.1f %12.1f %9.2f\n", B, "cpu-ref", tr.fwd, tr.bwd, tr.step,
                   flops / tr.step * 1e-3);
        }
        if (run_blocked) {
            TIME_STEPS(reps, tbk, cpb_forward(t, &p, x, B, h1, h2, out),
                       cpb_backward(t, &p, x, h1, h2, dout, B, &g, 0));
            printf("%8d %-12s %12.1f %12.1f %12.1f %9.2f\n", B, "cpu-blocked", tbk.fwd, tbk.bwd,
                   tbk.step, flops / tbk.step * 1e-3);
        }
        fflush(stdout);
        free(ws);
        free(out);
        free(h2);
        free(h1);
        free(dout);
        free(x);
    }
    cpb_destroy(t);
    return 0;
}
