/*
 * test_step.c — Check tests of the host's training step (host_stub/
 * step_canon.h, engine*.c, task.c, train.c): the canonical task, loss and
 * Adam against double-precision references within the bounds documented in
 * docs/host.md; the device's segment-wise loss tree equal to the host's;
 * runs byte-identical to each other and across plugins; and the run's
 * behaviour under faults (non-finite gradients, a hung call, SIGTERM, a kill
 * with --quiet).
 *
 * Cases (CK_RUN_CASE selects one): canon, runs, faults (CPU, in CI); gpu
 * (the same runs on CUDA plugins) and kernels (the host's CUDA kernels
 * against the host path, bit for bit, in one process, for compute-sanitizer);
 * without a CUDA device every GPU test says "no CUDA device" and the program
 * exits 77.
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "adam.h"
#include "checkpoint.h"
#include "devmem.h"
#include "engine.h"
#include "rng.h"
#include "scratch.h"
#include "step_canon.h"
#include "task.h"
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
#include "step_cuda.h"
#endif

extern char **environ;

#ifndef CUDA_V1_DIR
#define CUDA_V1_DIR ""
#define CUDA_V2_DIR ""
#endif

#define SKIP_EXIT 77
static uint64_t g_seed;
static struct counts {
    int ran, skipped;
} * g_counts;

/* ------------------------------------------------------------------------- */
/* Running auxtrunk-host                                                     */

static char *g_out, *g_err;

/* Starts auxtrunk-host with the NULL-terminated arguments. */
static pid_t spawn_host(const char *tag, char **args)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)AUXTRUNK_HOST_EXE;
    for (; *args; args++) {
        ck_assert(argc < 63);
        argv[argc++] = *args;
    }
    argv[argc] = NULL;
    return tst_spawn(AUXTRUNK_HOST_EXE, argv, tag);
}

static int wait_host(const char *tag, pid_t pid, double limit_s)
{
    return tst_wait(pid, limit_s, tag, &g_out, &g_err);
}

/* Runs auxtrunk-host train with the NULL-terminated arguments. */
static int run_train(const char *tag, ...)
{
    char *args[64];
    int n = 0;
    args[n++] = "train";
    va_list ap;
    va_start(ap, tag);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        ck_assert(n < 62);
        args[n++] = (char *)a;
    }
    va_end(ap);
    args[n] = NULL;
    return wait_host(tag, spawn_host(tag, args), 600.0);
}

#define ck_assert_contains(hay, needle) \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (hay))

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *da = tst_slurp(a, &na), *db = tst_slurp(b, &nb);
    ck_assert_msg(na == nb && memcmp(da, db, na) == 0, "%s and %s differ (%zu vs %zu bytes)", a, b,
                  na, nb);
    free(da);
    free(db);
}

/* The rows of a loss CSV (header excluded). */
static size_t csv_rows(const char *path)
{
    char *t = tst_slurp(path, NULL);
    size_t n = 0;
    for (char *p = t; *p; p++)
        n += *p == '\n';
    free(t);
    return n ? n - 1 : 0;
}

/* The step field of a checkpoint file, or 0 if there is none yet. */
static uint64_t checkpoint_step(const char *path)
{
    unsigned char h[ATH_CKPT_HEADER_SIZE];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got != sizeof h)
        return 0;
    uint64_t s = 0;
    for (int i = 7; i >= 0; i--)
        s = s << 8 | h[64 + i];
    return s;
}

/* A small topology: fast runs for the fault cases. */
#define SMALL "--enc", "16", "--h1", "16", "--h2", "16", "--aux", "8", "--batch", "16"
#define SMALL_P (16 * 16 + 16 + 16 * 16 + 16 + 16 * 8 + 8)

static void load_checkpoint(const char *path, uint64_t *step, float *params, float *m, float *v)
{
    ath_ckpt_meta_t expect = {16,           16, 16, 8, 16, 1, 1e-3f, ATH_ADAM_BETA1, ATH_ADAM_BETA2,
                              ATH_ADAM_EPS, 0,  0,  0, 0},
                    got;
    ath_err_t err = {{0}};
    ck_assert_msg(ath_ckpt_load(path, &expect, &got, params, m, v, SMALL_P, &err) == 0, "%s",
                  err.msg);
    *step = got.step;
}

/* ------------------------------------------------------------------------- */
/* canon: the step's arithmetic against double precision                    */

/* Bounds (docs/host.md "The canonical step"). */
#define TANH_TOL 4e-7    /* absolute, |x| <= 20 */
#define FEATURE_TOL 2e-6 /* absolute: x in (-1, 1) */
#define TARGET_TOL 2e-6  /* relative to the largest |target| */
#define LOSS_TOL 1e-5    /* relative */
#define ADAM_TOL 5e-6    /* relative to the largest |parameter| */

START_TEST(test_tanh_vs_double)
{
    double worst = 0.0;
    for (int i = -200000; i <= 200000; i++) {
        float x = (float)i * 1e-4f;
        worst = fmax(worst, fabs((double)ath_tanh(x) - tanh((double)x)));
    }
    fprintf(stderr, "canon: ath_tanh worst abs error %.3g on [-20, 20]\n", worst);
    ck_assert_msg(worst <= TANH_TOL, "ath_tanh: worst error %g > %g", worst, TANH_TOL);
    ck_assert(isnan(ath_tanh(NAN)));
    ck_assert(ath_tanh(INFINITY) == 1.0f && ath_tanh(-INFINITY) == -1.0f);
    ck_assert(ath_tanh(0.0f) == 0.0f);
}
END_TEST

START_TEST(test_task_vs_double)
{
    auxtrunk_config_t c = {sizeof c, 0, 48, 8, 8, 24, 1, -1};
    ath_task_t task;
    ath_err_t err = {{0}};
    ck_assert_msg(ath_task_create(&task, &c, g_seed, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(task.n, 1u << ATH_TASK_LOG2_SAMPLES);
    const int L = ATH_TASK_LATENT, T = ATH_TASK_TEACHER, ENC = c.enc, AUX = c.aux;
    double worst_x = 0.0, worst_t = 0.0, max_t = 0.0;
    for (uint32_t i = 0; i < task.n; i += 7) {
        const float *z = task.z + (size_t)i * L, *x = task.x + (size_t)i * ENC;
        for (int k = 0; k < ENC; k++) {
            double s = task.proj_b[k];
            for (int l = 0; l < L; l++)
                s += (double)z[l] * task.proj[l * ENC + k];
            worst_x = fmax(worst_x, fabs(tanh(s) - x[k]));
        }
        /* The teacher from this sample's float features, in double. */
        double h[ATH_TASK_TEACHER];
        for (int j = 0; j < T; j++) {
            double s = task.t1_b[j];
            for (int k = 0; k < ENC; k++)
                s += (double)x[k] * task.t1[k * T + j];
            h[j] = tanh(s);
        }
        for (int n = 0; n < AUX; n++) {
            double s = task.t2_b[n];
            for (int j = 0; j < T; j++)
                s += h[j] * task.t2[j * AUX + n];
            worst_t = fmax(worst_t, fabs(s - task.target[(size_t)i * AUX + n]));
            max_t = fmax(max_t, fabs(s));
        }
    }
    fprintf(stderr, "canon: task features worst %.3g, targets worst %.3g of %.3g\n", worst_x,
            worst_t, max_t);
    ck_assert_msg(worst_x <= FEATURE_TOL, "features: %g > %g", worst_x, FEATURE_TOL);
    ck_assert_msg(worst_t <= TARGET_TOL * max_t, "targets: %g > %g", worst_t, TARGET_TOL * max_t);

    /* Draws: in range, counter-based (the same for the same step, different
     * for another), and every sample equally likely. */
    float xa[8 * 48], ta[8 * 24], xb[8 * 48], tb[8 * 24];
    ath_task_draw(&task, 5, 8, xa, ta);
    ath_task_draw(&task, 5, 8, xb, tb);
    ck_assert(memcmp(xa, xb, sizeof xa) == 0 && memcmp(ta, tb, sizeof ta) == 0);
    ath_task_draw(&task, 6, 8, xb, tb);
    ck_assert(memcmp(xa, xb, sizeof xa) != 0);
    static unsigned hits[1u << ATH_TASK_LOG2_SAMPLES];
    const int draws = 64;
    for (uint64_t s = 1; s <= (uint64_t)draws * task.n / 256; s++)
        for (uint32_t b = 0; b < 256; b++)
            hits[ath_replay_index(task.key, s, b, task.log2n)]++;
    unsigned lo = ~0u, hi = 0;
    double chi2 = 0.0;
    for (uint32_t i = 0; i < task.n; i++) {
        lo = hits[i] < lo ? hits[i] : lo, hi = hits[i] > hi ? hits[i] : hi;
        const double dev = (double)hits[i] - draws;
        chi2 += dev * dev / draws;
    }
    /* Each of the 16,384 counts is about Poisson(64): one outside [12, 140]
     * has a probability under 1e-11 per run (the Poisson tails summed over
     * the samples; [16, 112] failed once in about 3,000 runs). Their
     * chi-square has n - 1 degrees of freedom (mean n - 1, sd
     * sqrt(2 (n - 1)), about 181): 8 sd either side, which a generator that
     * favours or skips even a few percent of the samples leaves. */
    ck_assert_msg(lo >= 12 && hi <= 140, "draw counts in [%u, %u]", lo, hi);
    const double dof = (double)task.n - 1.0;
    ck_assert_msg(fabs(chi2 - dof) <= 8.0 * sqrt(2.0 * dof),
                  "draw counts' chi-square %.1f, dof %.0f", chi2, dof);
    ath_task_destroy(&task);
}
END_TEST

START_TEST(test_loss_vs_double)
{
    tst_rng_t r;
    tst_rng_seed(&r, g_seed);
    const size_t sizes[] = {1, 2, 3, 1000, 1024, 1025, 38400, 300001};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        const size_t n = sizes[c];
        float *out = malloc(n * sizeof(float)), *tg = malloc(n * sizeof(float));
        float *dout = malloc(n * sizeof(float)), *q = malloc(n * sizeof(float));
        tst_rng_fill(&r, out, n, -2.0f, 2.0f);
        tst_rng_fill(&r, tg, n, -2.0f, 2.0f);
        for (size_t i = 0; i < n; i++)
            dout[i] = NAN;
        float loss = ath_loss_host(out, tg, n, dout, q);
        double sum = 0.0, worst_d = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)out[i] - tg[i];
            sum += d * d;
            worst_d = fmax(worst_d, fabs(dout[i] - d / (double)n) / (fabs(d / (double)n) + 1e-30));
        }
        double ref = 0.5 * sum / (double)n;
        ck_assert_msg(fabs(loss - ref) <= LOSS_TOL * ref, "n %zu: loss %.9g vs %.9g", n,
                      (double)loss, ref);
        ck_assert_msg(worst_d <= 2.5e-7, "n %zu: dout relative error %g", n, worst_d);
        free(out), free(tg), free(dout), free(q);
    }
}
END_TEST

/* The device reduces aligned segments of ATH_CUDA_SEGMENT, then the segment
 * sums group by group (step_cuda.cu): emulated here, it must give the
 * host's tree bit for bit. */
static float segment_tree(const float *q0, size_t n, uint32_t seg)
{
    float *part = malloc((n / seg + 2) * sizeof(float)), *q = malloc(seg * sizeof(float));
    size_t np = 0;
    for (size_t base = 0; base < n; base += seg, np++) {
        uint32_t len = (uint32_t)(n - base < seg ? n - base : seg);
        memcpy(q, q0 + base, len * sizeof(float));
        for (uint32_t s = 1; s < len; s *= 2)
            for (uint32_t i = 0; i + s < len; i += 2 * s)
                ath_tree_node(q, len, s, i);
        part[np] = q[0];
    }
    for (; np > 1; np = (np + seg - 1) / seg) {
        for (size_t g = 0; g * seg < np; g++) {
            uint32_t len = (uint32_t)(np - g * seg < seg ? np - g * seg : seg);
            memcpy(q, part + g * seg, len * sizeof(float));
            for (uint32_t s = 1; s < len; s *= 2)
                for (uint32_t i = 0; i + s < len; i += 2 * s)
                    ath_tree_node(q, len, s, i);
            part[g] = q[0];
        }
    }
    float r = part[0];
    free(part), free(q);
    return r;
}

START_TEST(test_segment_tree_is_the_tree)
{
    tst_rng_t r;
    tst_rng_seed(&r, g_seed + 1);
    const size_t sizes[] = {1, 5, 1023, 1024, 1025, 4096, 70001, (1u << 20) + 3};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        const size_t n = sizes[c];
        float *v = malloc(n * sizeof(float)), *q = malloc(n * sizeof(float));
        tst_rng_fill(&r, v, n, 0.0f, 1.0f);
        memcpy(q, v, n * sizeof(float));
        for (size_t s = 1; s < n; s *= 2)
            for (size_t i = 0; i + s < n; i += 2 * s)
                ath_tree_node(q, (uint32_t)n, (uint32_t)s, (uint32_t)i);
        for (uint32_t seg = 4; seg <= 1024; seg *= 16) {
            float a = q[0], b = segment_tree(v, n, seg);
            ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "n %zu, segment %u: %a vs %a", n, seg,
                          (double)a, (double)b);
        }
        free(v), free(q);
    }
}
END_TEST

START_TEST(test_adam_vs_double)
{
    tst_rng_t r;
    tst_rng_seed(&r, g_seed + 2);
    const size_t n = 4096;
    const int steps = 300;
    ath_adam_hp_t hp = ath_adam_settings(1e-3f);
    float *p = malloc(n * sizeof(float)), *m = calloc(n, sizeof(float));
    float *v = calloc(n, sizeof(float)), *g = malloc(n * sizeof(float));
    double *pd = malloc(n * sizeof(double)), *md = calloc(n, sizeof(double));
    double *vd = calloc(n, sizeof(double));
    tst_rng_fill(&r, p, n, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        pd[i] = p[i];
    ath_scalars_t sc = ath_scalars_at(0, 0, hp);
    for (int t = 1; t <= steps; t++) {
        tst_rng_fill(&r, g, n, -1.0f, 1.0f);
        ath_step_verdict(&sc, 1.0f, 0, hp);
        ck_assert(sc.ok && sc.t == (uint64_t)t && sc.step == (uint64_t)t);
        ath_adam_host(hp, sc.lr_t, n, p, m, v, g);
        const double b1 = hp.beta1, b2 = hp.beta2;
        const double lr_t = hp.lr * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t));
        for (size_t i = 0; i < n; i++) {
            md[i] = b1 * md[i] + (1.0 - b1) * g[i];
            vd[i] = b2 * vd[i] + (1.0 - b2) * (double)g[i] * g[i];
            pd[i] -= lr_t * md[i] / (sqrt(vd[i]) + hp.eps);
        }
    }
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(p[i] - pd[i]));
        scale = fmax(scale, fabs(pd[i]));
    }
    fprintf(stderr, "canon: Adam after %d steps: worst parameter error %.3g of %.3g\n", steps,
            worst, scale);
    ck_assert_msg(worst <= ADAM_TOL * scale, "Adam: %g > %g", worst, ADAM_TOL * scale);
    /* Resuming recomputes the running products bit for bit. */
    ath_scalars_t again = ath_scalars_at(sc.step, sc.t, hp);
    ck_assert(memcmp(&again.b1t, &sc.b1t, sizeof sc.b1t) == 0);
    ck_assert(memcmp(&again.b2t, &sc.b2t, sizeof sc.b2t) == 0);
    free(p), free(m), free(v), free(g), free(pd), free(md), free(vd);
}
END_TEST

/* A faulty step freezes the state: no later update applies until cleared. */
START_TEST(test_verdict_freezes)
{
    ath_adam_hp_t hp = ath_adam_settings(1e-3f);
    ath_scalars_t sc = ath_scalars_at(0, 0, hp);
    ath_step_verdict(&sc, 0.5f, 0, hp);
    ath_step_verdict(&sc, 0.5f, 0, hp);
    const float b1t = sc.b1t;
    ath_step_verdict(&sc, 0.5f, 1, hp); /* step 3: a non-finite gradient */
    ck_assert(!sc.ok && sc.fault_step == 3 && sc.fault_kind == ATH_FAULT_GRAD && sc.t == 2);
    ath_step_verdict(&sc, NAN, 0, hp);  /* step 4: the first fault stays */
    ath_step_verdict(&sc, 0.5f, 0, hp); /* step 5: finite, still frozen */
    ck_assert(!sc.ok && sc.fault_step == 3 && sc.fault_kind == ATH_FAULT_GRAD);
    ck_assert(sc.t == 2 && sc.step == 5 && sc.b1t == b1t);
    ath_scalars_t l = ath_scalars_at(0, 0, hp);
    ath_step_verdict(&l, INFINITY, 0, hp);
    ck_assert(!l.ok && l.fault_step == 1 && l.fault_kind == ATH_FAULT_LOSS && l.t == 0);
    float g[5] = {0, 1, -2, 3, 4};
    ck_assert(!ath_any_nonfinite(g, 5));
    g[3] = -INFINITY;
    ck_assert(ath_any_nonfinite(g, 5));
    g[3] = NAN;
    ck_assert(ath_any_nonfinite(g, 5));
}
END_TEST

/* ------------------------------------------------------------------------- */
/* runs: byte-identical runs                                                 */

START_TEST(test_two_runs_identical)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    for (int i = 0; i < 2; i++) {
        char csv[64], ck[64];
        snprintf(csv, sizeof csv, "%d.csv", i);
        snprintf(ck, sizeof ck, "%d.ck", i);
        ck_assert_int_eq(run_train(csv, "--plugin-dir", CPU_PLUGIN_DIR, "--batch", "37", "--steps",
                                   "60", "--quiet", "--csv", tst_path_in(csv), "--checkpoint",
                                   tst_path_in(ck), NULL),
                         0);
    }
    assert_same_file(tst_path_in("0.csv"), tst_path_in("1.csv"));
    assert_same_file(tst_path_in("0.ck"), tst_path_in("1.ck"));
    ck_assert_uint_eq(csv_rows(tst_path_in("0.csv")), 60);
    tst_scratch_done();
}
END_TEST

START_TEST(test_cpu_and_blocked_identical)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *dirs[] = {CPU_PLUGIN_DIR, BLOCKED_PLUGIN_DIR};
    for (int i = 0; i < 2; i++) {
        char csv[64], ck[64];
        snprintf(csv, sizeof csv, "%d.csv", i);
        snprintf(ck, sizeof ck, "%d.ck", i);
        ck_assert_int_eq(run_train(csv, "--plugin-dir", dirs[i], "--batch", "300", "--steps", "12",
                                   "--quiet", "--csv", tst_path_in(csv), "--checkpoint",
                                   tst_path_in(ck), NULL),
                         0);
    }
    assert_same_file(tst_path_in("0.csv"), tst_path_in("1.csv"));
    assert_same_file(tst_path_in("0.ck"), tst_path_in("1.ck"));
    /* The summary's breakdown names every phase. */
    ck_assert_contains(g_out, "summary: time per step");
    ck_assert_contains(g_out, "plugin backward");
    ck_assert_contains(g_out, "host overhead");
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* faults                                                                    */

/* A reference run of 40 steps, then the same run with the fixture swapped
 * in at step 10 (--checkpoint-every 1 when every_step): the swapped run must
 * exit 0 and end with the reference's CSV and checkpoint bytes, as if the
 * failing version had never run. The caller checks what the log says. */
static void assert_rollback_leaves_no_trace(const char *fixture, int every_step)
{
    ck_assert_int_eq(run_train("ref", "--plugin-dir", CPU_PLUGIN_DIR, SMALL, "--steps", "40",
                               "--quiet", "--csv", tst_path_in("ref.csv"), "--checkpoint",
                               tst_path_in("ref.ck"), NULL),
                     0);
    char at[4400];
    snprintf(at, sizeof at, "10:%s/%s", SWAP_FX_DIR, fixture);
    /* Without every_step the argument list ends at the NULL in its place. */
    int rc = run_train("rb", "--plugin-dir", CPU_PLUGIN_DIR, SMALL, "--steps", "40", "--quiet",
                       "--csv", tst_path_in("rb.csv"), "--checkpoint", tst_path_in("rb.ck"),
                       "--swap-at", at, every_step ? "--checkpoint-every" : NULL, "1", NULL);
    ck_assert_msg(rc == 0, "exit %d\n%s\n%s", rc, g_out, g_err);
    assert_same_file(tst_path_in("ref.csv"), tst_path_in("rb.csv"));
    assert_same_file(tst_path_in("ref.ck"), tst_path_in("rb.ck"));
}

/* Issue 16.1: a version that returns OK with non-finite gradients. */
START_TEST(test_nan_gradient_rolled_back)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    assert_rollback_leaves_no_trace("nan_grad_later", 1);
    ck_assert_contains(g_out, "swap: step 13: rolled back from fixture");
    ck_assert_contains(g_out, "a gradient is not finite at step 13");
    tst_scratch_done();
}
END_TEST

/* A rollback restores the state of the swap: the steps the failing version
 * ran in its probation window, within tolerance but not bit-exact, are
 * undone and run again with the held version. */
START_TEST(test_rollback_undoes_probation)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    assert_rollback_leaves_no_trace("inexact_nan_later", 0);
    ck_assert_contains(g_out, "within tolerance");
    ck_assert_contains(g_out, "swap: step 13: rolled back from fixture");
    tst_scratch_done();
}
END_TEST

/* Without a version to roll back to, the run ends; the last checkpoint is
 * the state before the bad step, all finite. */
START_TEST(test_nan_gradient_never_applied)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    int rc = run_train("bad", "--plugin-dir", SWAP_FX_DIR "/nan_grad_later", SMALL, "--steps", "40",
                       "--quiet", "--csv", tst_path_in("bad.csv"), "--checkpoint",
                       tst_path_in("bad.ck"), "--checkpoint-every", "1", NULL);
    ck_assert_msg(rc == 1, "exit %d\n%s\n%s", rc, g_out, g_err);
    ck_assert_contains(g_err, "a gradient is not finite at step 4");
    uint64_t step;
    static float p[SMALL_P], m[SMALL_P], v[SMALL_P];
    load_checkpoint(tst_path_in("bad.ck"), &step, p, m, v);
    ck_assert_uint_eq(step, 3);
    for (size_t i = 0; i < SMALL_P; i++)
        ck_assert(isfinite(p[i]) && isfinite(m[i]) && isfinite(v[i]));
    ck_assert_uint_eq(csv_rows(tst_path_in("bad.csv")), 3);
    tst_scratch_done();
}
END_TEST

/* Issue 16.4: with --quiet the CSV used to be flushed only at the end. */
START_TEST(test_csv_flushed_with_checkpoints)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *ck = tst_path_in("q.ck"), *csv = tst_path_in("q.csv");
    char *args[] = {"train",
                    "--plugin-dir",
                    CPU_PLUGIN_DIR,
                    SMALL,
                    "--steps",
                    "100000000",
                    "--quiet",
                    "--csv",
                    (char *)csv,
                    "--checkpoint",
                    (char *)ck,
                    "--checkpoint-every",
                    "7",
                    NULL};
    pid_t pid = spawn_host("q", args);
    for (int i = 0; i < 3000 && checkpoint_step(ck) < 300; i++) {
        const struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    ck_assert_int_eq(wait_host("q", pid, 10), 128 + SIGKILL);
    uint64_t at = checkpoint_step(ck);
    ck_assert_msg(at >= 300, "the run made no progress (checkpoint at %llu)",
                  (unsigned long long)at);
    size_t rows = csv_rows(csv);
    ck_assert_msg(rows >= at, "checkpoint at step %llu but the CSV holds %zu rows",
                  (unsigned long long)at, rows);
    tst_scratch_done();
}
END_TEST

/* Issue 16.5: a plugin call that hangs ends the run, the checkpoint intact. */
START_TEST(test_hung_call_watchdog)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *ck = tst_path_in("h.ck");
    char *args[] = {"train",
                    "--plugin-dir",
                    SWAP_FX_DIR "/hang_later",
                    SMALL,
                    "--steps",
                    "100",
                    "--quiet",
                    "--checkpoint",
                    (char *)ck,
                    "--checkpoint-every",
                    "5",
                    "--call-timeout",
                    "1",
                    NULL};
    int rc = wait_host("h", spawn_host("h", args), 30.0);
    ck_assert_msg(rc == 5, "exit %d\n%s\n%s", rc, g_out, g_err);
    ck_assert_contains(g_err, "a plugin call at step 30 has not returned after 1 s");
    ck_assert_contains(g_err, "at step 25, is intact");
    uint64_t step;
    static float p[SMALL_P], m[SMALL_P], v[SMALL_P];
    load_checkpoint(ck, &step, p, m, v);
    ck_assert_uint_eq(step, 25);
    tst_scratch_done();
}
END_TEST

static int count_entries(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    ck_assert(d != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, needle) != NULL;
    closedir(d);
    return n;
}

/* Issue 16.7: SIGTERM writes the final checkpoint, removes the swapper's
 * private directory, and the run resumes from it bit-exactly. */
START_TEST(test_sigterm_clean_shutdown)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    setenv("TMPDIR", tst_scratch_dir(), 1); /* the swapper's private directory */
    const char *ck = tst_path_in("t.ck"), *csv = tst_path_in("t.csv");
    char at[4400];
    snprintf(at, sizeof at, "100000000:%s", BLOCKED_PLUGIN_DIR);
    char *args[] = {"train",
                    "--plugin-dir",
                    CPU_PLUGIN_DIR,
                    SMALL,
                    "--steps",
                    "100000000",
                    "--quiet",
                    "--csv",
                    (char *)csv,
                    "--checkpoint",
                    (char *)ck,
                    "--checkpoint-every",
                    "50",
                    "--swap-at",
                    at,
                    NULL};
    pid_t pid = spawn_host("t", args);
    for (int i = 0; i < 3000 && checkpoint_step(ck) < 100; i++) {
        const struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(count_entries(tst_scratch_dir(), "auxtrunk-swap-"), 1);
    kill(pid, SIGTERM);
    int rc = wait_host("t", pid, 30);
    ck_assert_msg(rc == 128 + SIGTERM, "exit %d\n%s\n%s", rc, g_out, g_err);
    ck_assert_contains(g_out, "summary: stopped by SIGTERM after step");
    uint64_t end = checkpoint_step(ck);
    ck_assert_msg(end >= 100, "final checkpoint at step %llu", (unsigned long long)end);
    ck_assert_uint_eq(csv_rows(csv), end);
    ck_assert_int_eq(count_entries(tst_scratch_dir(), "auxtrunk-swap-"), 0);
    ck_assert_int_eq(count_entries(tst_scratch_dir(), ".tmp."), 0);
    /* Continue 20 steps from it; compare with one run straight to there. */
    char to[32];
    snprintf(to, sizeof to, "%llu", (unsigned long long)end + 20);
    ck_assert_int_eq(run_train("r", "--plugin-dir", CPU_PLUGIN_DIR, SMALL, "--steps", to, "--quiet",
                               "--resume", ck, "--checkpoint", ck, NULL),
                     0);
    ck_assert_int_eq(run_train("s", "--plugin-dir", CPU_PLUGIN_DIR, SMALL, "--steps", to, "--quiet",
                               "--checkpoint", tst_path_in("s.ck"), NULL),
                     0);
    assert_same_file(ck, tst_path_in("s.ck"));
    unsetenv("TMPDIR");
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* gpu: the same bytes on CUDA plugins                                       */

static int have_cuda(void)
{
    ath_devmem_t *m = NULL;
    ath_err_t err = {{0}};
    if (!CUDA_V2_DIR[0] || ath_devmem_open(ATH_SPACE_CUDA, -1, &m, &err) != 0)
        return 0;
    ath_devmem_close(m);
    return 1;
}

#define REQUIRE_GPU()                                         \
    do {                                                      \
        if (!have_cuda()) {                                   \
            printf("no CUDA device: %s skipped\n", __func__); \
            fflush(stdout);                                   \
            g_counts->skipped++;                              \
            return;                                           \
        }                                                     \
        g_counts->ran++;                                      \
    } while (0)

/* The GPU runs: production topology, a batch that is not a multiple of the
 * loss segment, checkpoints every 50 steps. */
#define GPU_RUN "--batch", "300", "--quiet"

static void gpu_run(const char *tag, const char *dir, const char *steps, const char *extra1,
                    const char *extra2)
{
    char csv[64], ck[64];
    snprintf(csv, sizeof csv, "%s.csv", tag);
    snprintf(ck, sizeof ck, "%s.ck", tag);
    int rc = run_train(tag, "--plugin-dir", dir, GPU_RUN, "--steps", steps, "--csv",
                       tst_path_in(csv), "--checkpoint", tst_path_in(ck),
                       extra1 ? extra1 : "--quiet", extra2 ? extra2 : "--quiet", NULL);
    ck_assert_msg(rc == 0, "%s: exit %d\n%s\n%s", tag, rc, g_out, g_err);
    const char *summary = strstr(g_out, "summary:");
    fprintf(stderr, "gpu: %s:\n%s", tag, summary ? summary : g_out);
}

START_TEST(test_gpu_runs_identical)
{
    REQUIRE_GPU();
    tst_scratch(AUXTRUNK_TEST_TMP);
    gpu_run("cpu", CPU_PLUGIN_DIR, "200", NULL, NULL);
    gpu_run("v1", CUDA_V1_DIR, "200", NULL, NULL);
    gpu_run("v2", CUDA_V2_DIR, "200", NULL, NULL);
    ck_assert_contains(g_out, "state in device memory");
    gpu_run("v2-eager", CUDA_V2_DIR, "200", "--no-graph", NULL);
    gpu_run("v1-eager", CUDA_V1_DIR, "200", "--no-graph", NULL);
    const char *runs[] = {"v1", "v2", "v2-eager", "v1-eager"};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "%s.csv", runs[i]);
        snprintf(b, sizeof b, "%s.ck", runs[i]);
        assert_same_file(tst_path_in("cpu.csv"), tst_path_in(a));
        assert_same_file(tst_path_in("cpu.ck"), tst_path_in(b));
    }
    tst_scratch_done();
}
END_TEST

START_TEST(test_gpu_cross_device_resume)
{
    REQUIRE_GPU();
    tst_scratch(AUXTRUNK_TEST_TMP);
    gpu_run("full", CPU_PLUGIN_DIR, "160", NULL, NULL);
    /* CPU to GPU, then GPU to CPU. */
    gpu_run("a", CPU_PLUGIN_DIR, "60", NULL, NULL);
    gpu_run("b", CUDA_V2_DIR, "110", "--resume", tst_path_in("a.ck"));
    gpu_run("c", CPU_PLUGIN_DIR, "160", "--resume", tst_path_in("b.ck"));
    assert_same_file(tst_path_in("full.ck"), tst_path_in("c.ck"));
    char *full = tst_slurp(tst_path_in("full.csv"), NULL);
    char *joined = tst_slurp(tst_path_in("a.csv"), NULL);
    const char *parts[] = {"b.csv", "c.csv"};
    for (int i = 0; i < 2; i++) {
        char *t = tst_slurp(tst_path_in(parts[i]), NULL);
        joined = realloc(joined, strlen(joined) + strlen(t) + 1);
        strcat(joined, t + strlen("step,loss\n"));
        free(t);
    }
    ck_assert_msg(strcmp(full, joined) == 0, "the resumed runs' CSVs differ from the full run's");
    free(full), free(joined);
    tst_scratch_done();
}
END_TEST

START_TEST(test_gpu_swap_chain)
{
    REQUIRE_GPU();
    tst_scratch(AUXTRUNK_TEST_TMP);
    gpu_run("ref", CPU_PLUGIN_DIR, "120", NULL, NULL);
    char a1[4400], a2[4400], a3[4400];
    snprintf(a1, sizeof a1, "20:%s", CUDA_V2_DIR);
    snprintf(a2, sizeof a2, "50:%s", CUDA_V1_DIR);
    snprintf(a3, sizeof a3, "90:%s", BLOCKED_PLUGIN_DIR);
    int rc = run_train("swap", "--plugin-dir", CPU_PLUGIN_DIR, GPU_RUN, "--steps", "120", "--csv",
                       tst_path_in("swap.csv"), "--checkpoint", tst_path_in("swap.ck"), "--swap-at",
                       a1, "--swap-at", a2, "--swap-at", a3, "--rollback-steps", "5", NULL);
    ck_assert_msg(rc == 0, "exit %d\n%s\n%s", rc, g_out, g_err);
    ck_assert_contains(g_out, "summary: hot-swap: 3 taken, 0 refused");
    ck_assert_contains(g_out, "summary: plugin cpu-blocked");
    assert_same_file(tst_path_in("ref.csv"), tst_path_in("swap.csv"));
    assert_same_file(tst_path_in("ref.ck"), tst_path_in("swap.ck"));
    tst_scratch_done();
}
END_TEST

/* The host's kernels against the host path, bit for bit, in one process
 * (compute-sanitizer runs this case). */
START_TEST(test_gpu_kernels_match_host)
{
#if !defined(AUXTRUNK_HOST_HAVE_CUDA)
    printf("no CUDA device: this build has no CUDA; %s skipped\n", __func__);
    g_counts->skipped++;
#else
    REQUIRE_GPU();
    ath_devmem_t *m = NULL;
    ath_err_t err = {{0}};
    ck_assert_msg(ath_devmem_open(ATH_SPACE_CUDA, -1, &m, &err) == 0, "%s", err.msg);
    tst_rng_t r;
    tst_rng_seed(&r, g_seed + 3);
    ath_adam_hp_t hp = ath_adam_settings(1e-3f);
    /* Loss and verdict, over sizes that take 1, 2 and 3 levels of groups. */
    const uint32_t sizes[] = {1, 1000, 1024, 1025, 38400, (1u << 20) + 7, (1u << 21) + 1};
    /* Quick mode (under compute-sanitizer): one and two levels only. */
    const char *quick = getenv("AUXTRUNK_CUDA_TEST_QUICK");
    const size_t n_sizes = quick && *quick && strcmp(quick, "0") != 0 ? 5 : 7;
    for (size_t c = 0; c < n_sizes; c++) {
        const uint32_t n = sizes[c], np = (n + ATH_CUDA_SEGMENT - 1) / ATH_CUDA_SEGMENT;
        float *out = malloc(n * 4), *tg = malloc(n * 4), *dout = malloc(n * 4), *q = malloc(n * 4);
        float *ddout = malloc(n * 4);
        tst_rng_fill(&r, out, n, -2.0f, 2.0f);
        tst_rng_fill(&r, tg, n, -2.0f, 2.0f);
        float hloss = ath_loss_host(out, tg, n, dout, q);
        void *d_out, *d_tg, *d_dout, *d_part, *d_bad, *d_sc, *d_ring;
        ck_assert(m->ops->alloc(m, n * 4, &d_out, &err) == 0);
        ck_assert(m->ops->alloc(m, n * 4, &d_tg, &err) == 0);
        ck_assert(m->ops->alloc(m, n * 4, &d_dout, &err) == 0);
        ck_assert(m->ops->alloc(m, np * 4, &d_part, &err) == 0);
        ck_assert(m->ops->alloc(m, ATH_CUDA_CHECK_BLOCKS * 4, &d_bad, &err) == 0);
        ck_assert(m->ops->alloc(m, sizeof(ath_scalars_t), &d_sc, &err) == 0);
        ck_assert(m->ops->alloc(m, ATH_ENGINE_RING * 4, &d_ring, &err) == 0);
        uint32_t bad[ATH_CUDA_CHECK_BLOCKS] = {0};
        ath_scalars_t sc = ath_scalars_at(41, 41, hp), hsc = sc;
        /* The ring is poisoned: the verdict writes its own slot and no other. */
        float ring[ATH_ENGINE_RING];
        const uint32_t poison = 0x7fc0dead;
        for (size_t i = 0; i < ATH_ENGINE_RING; i++)
            memcpy(&ring[i], &poison, 4);
        ck_assert(m->ops->upload(m, d_ring, ring, sizeof ring, &err) == 0);
        ck_assert(m->ops->upload(m, d_out, out, n * 4, &err) == 0);
        ck_assert(m->ops->upload(m, d_tg, tg, n * 4, &err) == 0);
        ck_assert(m->ops->upload(m, d_bad, bad, sizeof bad, &err) == 0);
        ck_assert(m->ops->upload(m, d_sc, &sc, sizeof sc, &err) == 0);
        ck_assert(ath_cuda_loss(m->stream, d_out, d_tg, n, d_dout, d_part) == 0);
        ck_assert(ath_cuda_verdict(m->stream, d_part, np, d_bad, n, hp, d_sc, d_ring,
                                   ATH_ENGINE_RING) == 0);
        ck_assert_msg(m->ops->sync(m, &err) == 0, "%s", err.msg);
        ck_assert(m->ops->download(m, ddout, d_dout, n * 4, &err) == 0);
        ck_assert(m->ops->download(m, &sc, d_sc, sizeof sc, &err) == 0);
        ck_assert(m->ops->download(m, ring, d_ring, sizeof ring, &err) == 0);
        ath_step_verdict(&hsc, hloss, 0, hp);
        ck_assert_msg(memcmp(dout, ddout, n * 4) == 0, "n %u: dout differs", n);
        ck_assert_msg(memcmp(&ring[41], &hloss, 4) == 0, "n %u: loss %a vs host %a", n,
                      (double)ring[41], (double)hloss);
        for (size_t i = 0; i < ATH_ENGINE_RING; i++)
            ck_assert_msg(i == 41 || memcmp(&ring[i], &poison, 4) == 0,
                          "n %u: the verdict wrote ring slot %zu, not only its own (41)", n, i);
        ck_assert_msg(memcmp(&sc, &hsc, sizeof sc) == 0, "n %u: scalars differ", n);
        void *bufs[] = {d_out, d_tg, d_dout, d_part, d_bad, d_sc, d_ring};
        for (int i = 0; i < 7; i++)
            m->ops->release(m, bufs[i]);
        free(out), free(tg), free(dout), free(q), free(ddout);
    }
    /* Check and Adam: clean gradients update, one NaN anywhere stops it. */
    const size_t P = 200000 + 13;
    float *p = malloc(P * 4), *mm = malloc(P * 4), *v = malloc(P * 4), *g = malloc(P * 4);
    float *p2 = malloc(P * 4), *m2 = malloc(P * 4), *v2 = malloc(P * 4);
    tst_rng_fill(&r, p, P, -1, 1);
    tst_rng_fill(&r, mm, P, -0.1f, 0.1f);
    tst_rng_fill(&r, v, P, 0.0f, 0.01f);
    tst_rng_fill(&r, g, P, -1, 1);
    void *d_p, *d_m, *d_v, *d_g, *d_bad, *d_sc, *d_part, *d_ring;
    ck_assert(m->ops->alloc(m, P * 4, &d_p, &err) == 0);
    ck_assert(m->ops->alloc(m, P * 4, &d_m, &err) == 0);
    ck_assert(m->ops->alloc(m, P * 4, &d_v, &err) == 0);
    ck_assert(m->ops->alloc(m, P * 4, &d_g, &err) == 0);
    ck_assert(m->ops->alloc(m, ATH_CUDA_CHECK_BLOCKS * 4, &d_bad, &err) == 0);
    ck_assert(m->ops->alloc(m, sizeof(ath_scalars_t), &d_sc, &err) == 0);
    ck_assert(m->ops->alloc(m, 4, &d_part, &err) == 0);
    ck_assert(m->ops->alloc(m, ATH_ENGINE_RING * 4, &d_ring, &err) == 0);
    for (int nan_at = -1; nan_at < 2; nan_at++) {
        size_t where = nan_at == 0 ? 0 : P - 1;
        float *gg = malloc(P * 4);
        memcpy(gg, g, P * 4);
        if (nan_at >= 0)
            gg[where] = NAN;
        ath_scalars_t sc = ath_scalars_at(7, 7, hp), hsc = sc;
        float part = 3.0f;
        ck_assert(m->ops->upload(m, d_p, p, P * 4, &err) == 0);
        ck_assert(m->ops->upload(m, d_m, mm, P * 4, &err) == 0);
        ck_assert(m->ops->upload(m, d_v, v, P * 4, &err) == 0);
        ck_assert(m->ops->upload(m, d_g, gg, P * 4, &err) == 0);
        ck_assert(m->ops->upload(m, d_sc, &sc, sizeof sc, &err) == 0);
        ck_assert(m->ops->upload(m, d_part, &part, 4, &err) == 0);
        ck_assert(ath_cuda_check(m->stream, d_g, P, d_bad) == 0);
        ck_assert(ath_cuda_verdict(m->stream, d_part, 1, d_bad, 1, hp, d_sc, d_ring,
                                   ATH_ENGINE_RING) == 0);
        ck_assert(ath_cuda_adam(m->stream, d_p, d_m, d_v, d_g, P, d_sc, hp) == 0);
        ck_assert(m->ops->download(m, p2, d_p, P * 4, &err) == 0);
        ck_assert(m->ops->download(m, m2, d_m, P * 4, &err) == 0);
        ck_assert(m->ops->download(m, v2, d_v, P * 4, &err) == 0);
        ck_assert(m->ops->download(m, &sc, d_sc, sizeof sc, &err) == 0);
        ath_step_verdict(&hsc, ath_loss_of_sum(3.0f, 1.0f), ath_any_nonfinite(gg, P), hp);
        float *hp_ = malloc(P * 4), *hm = malloc(P * 4), *hv = malloc(P * 4);
        memcpy(hp_, p, P * 4), memcpy(hm, mm, P * 4), memcpy(hv, v, P * 4);
        if (hsc.ok)
            ath_adam_host(hp, hsc.lr_t, P, hp_, hm, hv, gg);
        ck_assert_msg(memcmp(&sc, &hsc, sizeof sc) == 0, "case %d: scalars differ", nan_at);
        ck_assert_int_eq(sc.ok, nan_at < 0);
        ck_assert_msg(memcmp(p2, hp_, P * 4) == 0 && memcmp(m2, hm, P * 4) == 0 &&
                          memcmp(v2, hv, P * 4) == 0,
                      "case %d: Adam differs from the host's", nan_at);
        free(gg), free(hp_), free(hm), free(hv);
    }
    /* The batch draw. */
    auxtrunk_config_t c = {sizeof c, 0, 40, 8, 8, 24, 1, -1};
    ath_task_t task;
    ck_assert(ath_task_create(&task, &c, g_seed, &err) == 0);
    const int32_t B = 333;
    void *d_bx, *d_bt, *d_x, *d_t;
    ck_assert(m->ops->alloc(m, (size_t)task.n * 40 * 4, &d_bx, &err) == 0);
    ck_assert(m->ops->alloc(m, (size_t)task.n * 24 * 4, &d_bt, &err) == 0);
    ck_assert(m->ops->alloc(m, (size_t)B * 40 * 4, &d_x, &err) == 0);
    ck_assert(m->ops->alloc(m, (size_t)B * 24 * 4, &d_t, &err) == 0);
    ck_assert(m->ops->upload(m, d_bx, task.x, (size_t)task.n * 40 * 4, &err) == 0);
    ck_assert(m->ops->upload(m, d_bt, task.target, (size_t)task.n * 24 * 4, &err) == 0);
    ath_scalars_t sc = ath_scalars_at(1234, 0, hp);
    ck_assert(m->ops->upload(m, d_sc, &sc, sizeof sc, &err) == 0);
    ck_assert(ath_cuda_gather(m->stream, d_bx, d_bt, task.key, task.log2n, d_sc, B, 40, 24, d_x,
                              d_t) == 0);
    float *x = malloc((size_t)B * 40 * 4), *t = malloc((size_t)B * 24 * 4);
    float *hx = malloc((size_t)B * 40 * 4), *ht = malloc((size_t)B * 24 * 4);
    ck_assert(m->ops->download(m, x, d_x, (size_t)B * 40 * 4, &err) == 0);
    ck_assert(m->ops->download(m, t, d_t, (size_t)B * 24 * 4, &err) == 0);
    ath_task_draw(&task, 1235, B, hx, ht);
    ck_assert(memcmp(x, hx, (size_t)B * 40 * 4) == 0 && memcmp(t, ht, (size_t)B * 24 * 4) == 0);
    void *bufs[] = {d_p, d_m, d_v, d_g, d_bad, d_sc, d_part, d_ring, d_bx, d_bt, d_x, d_t};
    for (int i = 0; i < 12; i++)
        m->ops->release(m, bufs[i]);
    free(p), free(mm), free(v), free(g), free(p2), free(m2), free(v2);
    free(x), free(t), free(hx), free(ht);
    ath_task_destroy(&task);
    ath_devmem_close(m);
#endif
}
END_TEST

/* ------------------------------------------------------------------------- */

static Suite *make_suite(void)
{
    Suite *s = suite_create("step");
    TCase *tc = tcase_create("canon");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tanh_vs_double);
    tcase_add_test(tc, test_task_vs_double);
    tcase_add_test(tc, test_loss_vs_double);
    tcase_add_test(tc, test_segment_tree_is_the_tree);
    tcase_add_test(tc, test_adam_vs_double);
    tcase_add_test(tc, test_verdict_freezes);
    suite_add_tcase(s, tc);
    tc = tcase_create("runs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_two_runs_identical);
    tcase_add_test(tc, test_cpu_and_blocked_identical);
    suite_add_tcase(s, tc);
    tc = tcase_create("faults");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_nan_gradient_rolled_back);
    tcase_add_test(tc, test_rollback_undoes_probation);
    tcase_add_test(tc, test_nan_gradient_never_applied);
    tcase_add_test(tc, test_csv_flushed_with_checkpoints);
    tcase_add_test(tc, test_hung_call_watchdog);
    tcase_add_test(tc, test_sigterm_clean_shutdown);
    suite_add_tcase(s, tc);
    tc = tcase_create("gpu");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_gpu_runs_identical);
    tcase_add_test(tc, test_gpu_cross_device_resume);
    tcase_add_test(tc, test_gpu_swap_chain);
    suite_add_tcase(s, tc);
    /* Its own case, so compute-sanitizer can run just the host's kernels. */
    tc = tcase_create("kernels");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_gpu_kernels_match_host);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    g_seed = tst_seed("test_step");
    g_counts =
        mmap(NULL, sizeof *g_counts, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_counts == MAP_FAILED)
        return 2;
    SRunner *sr = srunner_create(make_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (failed)
        return EXIT_FAILURE;
    if (g_counts->ran == 0 && g_counts->skipped > 0) {
        printf("no CUDA device: all %d GPU cases skipped\n", g_counts->skipped);
        return SKIP_EXIT;
    }
    return EXIT_SUCCESS;
}
