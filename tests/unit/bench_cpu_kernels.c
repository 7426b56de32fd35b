/*
 * bench_cpu_kernels.c — median times of the two CPU kernel sets, kernels/cpu
 * (cpu-ref, one thread) and kernels/cpu_blocked (cpu-blocked, --threads), on
 * the production topology ENC=256, H1=256, H2=256, AUX=128: forward,
 * backward and their sum (one training step of the trunk). A program, not a
 * test; docs/cpu-perf.md holds its results beside tests/unit/bench_numpy.py.
 *
 *   bench_cpu_kernels [--threads N[,N...]] [--reps N] [--block N] [--isa NAME]
 *                     [--only NAME] [--ceiling] [B ...]
 *
 * With several thread counts, cpu-blocked's trunks (one per count) take turns
 * in blocks of --block steps, so that a machine whose speed drifts over
 * milliseconds (a shared or virtual machine) slows every count alike; each
 * block's first step (a pool waking from sleep) is not timed. The speedup it
 * prints is the median over rounds of each round's ratio of block medians.
 *
 * --ceiling adds, in every round, a block in which N one-thread trunks (N the
 * largest count) run at once, each on its own thread, outputs and scratch:
 * N independent steps with nothing shared but the read-only inputs. Its
 * speedup, N times the one-thread block median over the block's wall time
 * per step of all N together, is what the machine gives N threads that
 * never meet; no split of one step over N threads can beat it.
 */
#define _GNU_SOURCE
#include <pthread.h>
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
            "usage: bench_cpu_kernels [--threads N[,N...]] [--reps N] [--block N] [--isa NAME]\n"
            "                         [--only NAME] [--ceiling] [B ...]\n"
            "  --threads N  threads of cpu-blocked, the caller's included (default: the CPUs\n"
            "               this process may run on); cpu-ref always runs on one. A list\n"
            "               (1,2) times one trunk per count, interleaved in blocks, and\n"
            "               prints each count's speedup over the first\n"
            "  --reps N     timed repetitions per batch and kernel set, median (default 101)\n"
            "  --block N    steps per block when interleaving thread counts (default 20;\n"
            "               the first step of a block is not timed)\n"
            "  --isa NAME   cpu-blocked's instruction set: scalar, avx2 or avx512 (default: the\n"
            "               widest this CPU runs)\n"
            "  --only NAME  time only cpu-ref or only cpu-blocked\n"
            "  --ceiling    with a list of counts, also time N one-thread trunks at once,\n"
            "               one per thread (N the largest count), interleaved with the\n"
            "               others: the machine's speedup for N threads that share nothing\n"
            "  B ...        batch sizes (default 1 64 256 1024)\n"
            "Production topology 256/256/256/128; inputs fixed per batch (warm caches).\n");
}

/* The median of v[0, n) (sorts v). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
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
        (t) = (timing_t){median(tf, reps), median(tb, reps), median(ts, reps)};  \
        free(tf);                                                                \
    } while (0)

/* Up to this many thread counts in one run, and lanes of --ceiling. */
#define MAX_COUNTS 8
#define MAX_LANES 64

/* The inputs and outputs of one batch. */
typedef struct batch_io {
    const atk_params_t *p;
    atk_grads_t *g;
    const float *x, *dout;
    float *h1, *h2, *out;
    int b;
} batch_io_t;

/* The ceiling block: lanes one-thread trunks, lane 0 on the calling thread
 * and the others on threads of their own, each with its own outputs, run
 * `block` steps at once, started together by a barrier; each lane notes when
 * its first (untimed) step ended and when its last one did. */
typedef struct lane {
    struct ceiling *c;
    int k;
    atk_grads_t g; /* lanes 1 and up: gradients of their own */
} lane_t;

typedef struct ceiling {
    int lanes, block, stop;
    cpb_trunk_t **t;
    batch_io_t *io; /* per lane: its own h1, h2, out, g; shared p, x, dout */
    double *span;   /* per lane: [begin, end) of its timed steps, microseconds */
    pthread_barrier_t start, end;
    pthread_t *tid;
    lane_t *lane; /* what each lane's thread holds */
} ceiling_t;

static void lane_block(ceiling_t *c, int k)
{
    const batch_io_t *io = &c->io[k];
    for (int s = 0; s < c->block; s++) {
        cpb_forward(c->t[k], io->p, io->x, io->b, io->h1, io->h2, io->out);
        cpb_backward(c->t[k], io->p, io->x, io->h1, io->h2, io->dout, io->b, io->g, 0);
        if (s == 0)
            c->span[2 * k] = now_us();
    }
    c->span[2 * k + 1] = now_us();
}

static void *lane_main(void *arg)
{
    const lane_t *l = arg;
    ceiling_t *c = l->c;
    for (;;) {
        pthread_barrier_wait(&c->start);
        if (c->stop)
            return NULL;
        lane_block(c, l->k);
        pthread_barrier_wait(&c->end);
    }
}

/* One ceiling block; returns the wall time per step of the timed steps, all
 * lanes together: from the first lane's first timed step to the last lane's
 * end, over block - 1 (a mean, hiccups included, so if anything it
 * understates the ceiling; a per-step median would overstate it whenever
 * lanes take turns on fewer CPUs than lanes). */
static double ceiling_block(ceiling_t *c)
{
    pthread_barrier_wait(&c->start);
    lane_block(c, 0);
    pthread_barrier_wait(&c->end);
    double begin = c->span[0], end = c->span[1];
    for (int k = 1; k < c->lanes; k++) {
        begin = c->span[2 * k] < begin ? c->span[2 * k] : begin;
        end = c->span[2 * k + 1] > end ? c->span[2 * k + 1] : end;
    }
    return (end - begin) / (c->block - 1);
}

/* n trunks timed in turn, one block of `block` steps each per round (the
 * first step of a block untimed), until each has at least `reps` timed
 * steps: res[k] the medians of trunk k over all its steps, speedup[k] the
 * median over rounds of (trunk 0's block median / trunk k's). 0, or -1 when
 * out of memory. */
static int time_interleaved(int n, cpb_trunk_t *const *t, const batch_io_t *io, int reps, int block,
                            timing_t *res, double *speedup, ceiling_t *ceil, double *ceil_speedup)
{
    const int per = block - 1, rounds = (reps + per - 1) / per, steps = rounds * per;
    double *buf = malloc(((size_t)n * 3 * steps + (size_t)(n + 1) * rounds + per) * sizeof *buf);
    if (!buf)
        return -1;
    double *ratio = buf + (size_t)n * 3 * steps, *scratch = ratio + (size_t)(n + 1) * rounds;
    double first = 0.0;
    for (int r = -1; r < rounds; r++) { /* round -1 warms every trunk up */
        for (int k = 0; k < n; k++) {
            double *tf = buf + (size_t)k * 3 * steps, *tb = tf + steps, *ts = tb + steps;
            for (int s = 0; s < block; s++) {
                double t0 = now_us();
                cpb_forward(t[k], io->p, io->x, io->b, io->h1, io->h2, io->out);
                double t1 = now_us();
                cpb_backward(t[k], io->p, io->x, io->h1, io->h2, io->dout, io->b, io->g, 0);
                double t2 = now_us();
                if (r >= 0 && s > 0) {
                    const int i = r * per + s - 1;
                    tf[i] = t1 - t0, tb[i] = t2 - t1, ts[i] = t2 - t0;
                }
            }
            if (r < 0)
                continue;
            memcpy(scratch, ts + (size_t)r * per, (size_t)per * sizeof *scratch);
            const double m = median(scratch, per);
            if (k == 0)
                first = m;
            ratio[(size_t)k * rounds + r] = first / m;
        }
        if (ceil) {
            const double m = ceiling_block(ceil);
            if (r >= 0)
                ratio[(size_t)n * rounds + r] = ceil->lanes * first / m;
        }
    }
    if (ceil)
        *ceil_speedup = median(ratio + (size_t)n * rounds, rounds);
    for (int k = 0; k < n; k++) {
        double *tf = buf + (size_t)k * 3 * steps, *tb = tf + steps, *ts = tb + steps;
        res[k] = (timing_t){median(tf, steps), median(tb, steps), median(ts, steps)};
        speedup[k] = median(ratio + (size_t)k * rounds, rounds);
    }
    free(buf);
    return 0;
}

/* The lanes of a ceiling block for one batch: lane k runs trunk t[k] on
 * the shared read-only inputs of io and outputs of its own (lane 0 on
 * io's). A benchmark program: out of memory or threads, it says so and
 * exits. */
static ceiling_t *ceiling_new(int lanes, int block, cpb_trunk_t **t, const batch_io_t *io,
                              tst_rng_t *r)
{
    ceiling_t *c = calloc(1, sizeof *c);
    if (c) {
        c->io = calloc((size_t)lanes, sizeof *c->io);
        c->span = malloc((size_t)lanes * 2 * sizeof *c->span);
        c->tid = calloc((size_t)lanes, sizeof *c->tid);
        c->lane = calloc((size_t)lanes, sizeof *c->lane);
    }
    if (!c || !c->io || !c->span || !c->tid || !c->lane ||
        pthread_barrier_init(&c->start, NULL, (unsigned)lanes) != 0 ||
        pthread_barrier_init(&c->end, NULL, (unsigned)lanes) != 0) {
        fprintf(stderr, "bench_cpu_kernels: --ceiling: out of memory\n");
        exit(1);
    }
    c->lanes = lanes, c->block = block, c->t = t;
    const size_t b = (size_t)io->b;
    c->io[0] = *io;
    for (int k = 1; k < lanes; k++) {
        lane_t *l = &c->lane[k];
        *l = (lane_t){c, k,
                      (atk_grads_t){randoms(r, 256 * 256, 0), randoms(r, 256, 0),
                                    randoms(r, 256 * 256, 0), randoms(r, 256, 0),
                                    randoms(r, 256 * 128, 0), randoms(r, 128, 0)}};
        c->io[k] = (batch_io_t){io->p,
                                &l->g,
                                io->x,
                                io->dout,
                                randoms(r, b * 256, 0),
                                randoms(r, b * 256, 0),
                                randoms(r, b * 128, 0),
                                io->b};
        if (pthread_create(&c->tid[k], NULL, lane_main, l) != 0) {
            fprintf(stderr, "bench_cpu_kernels: --ceiling: cannot start a thread\n");
            exit(1);
        }
    }
    return c;
}

static void ceiling_free(ceiling_t *c)
{
    if (!c)
        return;
    c->stop = 1;
    pthread_barrier_wait(&c->start);
    for (int k = 1; k < c->lanes; k++) {
        pthread_join(c->tid[k], NULL);
        const batch_io_t *io = &c->io[k];
        free(io->h1), free(io->h2), free(io->out);
        free(io->g->dw1), free(io->g->db1), free(io->g->dw2), free(io->g->db2);
        free(io->g->dw3), free(io->g->db3);
    }
    pthread_barrier_destroy(&c->start);
    pthread_barrier_destroy(&c->end);
    free(c->lane), free(c->tid), free(c->span), free(c->io), free(c);
}

int main(int argc, char **argv)
{
    const atk_dims_t d = {256, 256, 256, 128};
    int batches[32] = {1, 64, 256, 1024}, nb = 4, user_b = 0, reps = 101;
    cpu_set_t set;
    int counts[MAX_COUNTS] = {sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1};
    int ncounts = 1, block = 20;
    cpb_isa_t isa = CPB_ISA_AUTO;
    int run_ref = 1, run_blocked = 1, want_ceiling = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            const char *v = argv[++i];
            for (ncounts = 0; ncounts < MAX_COUNTS && *v; ncounts++) {
                char *end;
                const long c = strtol(v, &end, 10);
                counts[ncounts] = c >= 1 && c <= 1024 && end != v ? (int)c : 0;
                if (!counts[ncounts] || (*end && *end != ','))
                    break;
                v = *end ? end + 1 : end;
            }
            if (*v || ncounts == 0 || !counts[ncounts - 1]) {
                fprintf(stderr,
                        "bench_cpu_kernels: --threads takes 1 to %d counts, 1 to 1024 "
                        "each, separated by commas\n",
                        MAX_COUNTS);
                return 2;
            }
        } else if (!strcmp(a, "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(a, "--block") && i + 1 < argc) {
            block = atoi(argv[++i]);
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
        } else if (!strcmp(a, "--ceiling")) {
            want_ceiling = 1;
        } else if (a[0] != '-' && atoi(a) > 0 && nb < 32) {
            if (!user_b)
                nb = 0, user_b = 1;
            batches[nb++] = atoi(a);
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (reps < 1 || block < 2) {
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
    cpb_trunk_t *t[MAX_COUNTS];
    for (int k = 0; k < ncounts; k++) {
        const cpb_config_t cfg = {.dims = d, .max_batch = max_b, .threads = counts[k], .isa = isa};
        if (cpb_create(&cfg, &t[k]) != CPB_OK) {
            fprintf(stderr,
                    "bench_cpu_kernels: cpu-blocked: cannot create with %d threads "
                    "(instruction set, memory or threads)\n",
                    counts[k]);
            return 1;
        }
    }
    const int inter = ncounts > 1 && run_blocked;
    if (want_ceiling && !inter) {
        fprintf(stderr, "bench_cpu_kernels: --ceiling needs a list of thread counts "
                        "(--threads 1,N) and cpu-blocked\n");
        return 2;
    }
    int lanes = 0;
    for (int k = 0; k < ncounts; k++)
        lanes = counts[k] > lanes ? counts[k] : lanes;
    cpb_trunk_t *lane_t_[MAX_LANES];
    if (want_ceiling && lanes > MAX_LANES) {
        fprintf(stderr, "bench_cpu_kernels: --ceiling runs at most %d lanes\n", MAX_LANES);
        return 2;
    }
    for (int k = 0; want_ceiling && k < lanes; k++) {
        const cpb_config_t cfg = {.dims = d, .max_batch = max_b, .threads = 1, .isa = isa};
        if (cpb_create(&cfg, &lane_t_[k]) != CPB_OK) {
            fprintf(stderr, "bench_cpu_kernels: cpu-blocked: cannot create a one-thread trunk\n");
            return 1;
        }
    }
    printf("cpu-blocked: %s, %d", cpb_isa_name(t[0]), cpb_threads(t[0]));
    for (int k = 1; k < ncounts; k++)
        printf(",%d", cpb_threads(t[k]));
    printf(" threads; cpu-ref: 1 thread; median of %d", reps);
    if (inter)
        printf("; thread counts interleaved in blocks of %d steps", block);
    if (want_ceiling)
        printf("; ceiling: %d one-thread trunks at once", lanes);
    printf("\n%8s %-12s %12s %12s %12s %9s", "B", "kernels", "forward_us", "backward_us", "step_us",
           "GFLOP/s");
    printf(inter ? " %7s %8s\n" : "\n", "threads", "speedup");
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
        if (run_blocked && !inter) {
            TIME_STEPS(reps, tbk, cpb_forward(t[0], &p, x, B, h1, h2, out),
                       cpb_backward(t[0], &p, x, h1, h2, dout, B, &g, 0));
            printf("%8d %-12s %12.1f %12.1f %12.1f %9.2f\n", B, "cpu-blocked", tbk.fwd, tbk.bwd,
                   tbk.step, flops / tbk.step * 1e-3);
        } else if (inter) {
            const batch_io_t io = {&p, &g, x, dout, h1, h2, out, B};
            timing_t res[MAX_COUNTS];
            double speedup[MAX_COUNTS], ceil_speedup = 0.0;
            ceiling_t *c = want_ceiling ? ceiling_new(lanes, block, lane_t_, &io, &r) : NULL;
            if (time_interleaved(ncounts, t, &io, reps, block, res, speedup, c, &ceil_speedup) !=
                0) {
                fprintf(stderr, "bench_cpu_kernels: out of memory\n");
                return 1;
            }
            ceiling_free(c);
            for (int k = 0; k < ncounts; k++)
                printf("%8d %-12s %12.1f %12.1f %12.1f %9.2f %7d %8.2f\n", B, "cpu-blocked",
                       res[k].fwd, res[k].bwd, res[k].step, flops / res[k].step * 1e-3,
                       cpb_threads(t[k]), speedup[k]);
            if (want_ceiling)
                printf("%8d %-12s %12s %12s %12s %9s %7d %8.2f\n", B, "ceiling", "-", "-", "-", "-",
                       lanes, ceil_speedup);
        }
        fflush(stdout);
        free(ws);
        free(out);
        free(h2);
        free(h1);
        free(dout);
        free(x);
    }
    for (int k = 0; k < ncounts; k++)
        cpb_destroy(t[k]);
    for (int k = 0; want_ceiling && k < lanes; k++)
        cpb_destroy(lane_t_[k]);
    return 0;
}
