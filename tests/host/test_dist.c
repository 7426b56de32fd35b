/*
 * test_dist.c — Check tests of `auxtrunk-host train --gpus N` (host_stub/
 * dist*.c, the data-parallel path of engine_cuda.c).
 *
 * Cases (CK_RUN_CASE selects one):
 *   cli   (CPU, in CI): the refusals — no NCCL in the build, a batch that is
 *         not a multiple of --gpus, a host plugin, incomplete worker
 *         variables; hot swap accepted with --gpus; --plugin-sha256 honoured
 *         by a worker of rank 1;
 *   gpu1  (1 CUDA device): the device combine against combine.h, bit for bit;
 *         --gpus 1 through NCCL, byte-identical (loss CSV and
 *         checkpoint) to the plain device run, in graph and eager mode, and
 *         a resume across the two;
 *   gpu1_swap (1 CUDA device): --gpus 1 hot-swapping cuda-v2 -> cuda-v1 ->
 *         cuda-v2, byte-identical to the unswapped plain run; the watcher on;
 *         a host plugin refused by rank 0 with the run unchanged;
 *   gpu2_swap (2 CUDA devices): the same swaps on 2 GPUs against 1 GPU;
 *         --plugin-sha256 refusing a version on rank 0; two workers started
 *         by hand whose rank 1 cannot take rank 0's swap (its allow-list):
 *         both end with its reason, the last checkpoint intact;
 *   gpu2  (2 CUDA devices): 2 GPUs vs 1 GPU byte-identical for cuda-v2 where
 *         combine.h's condition holds, a resume from 2 GPUs onto 1, a batch
 *         that breaks it (two 2-GPU runs identical; equality with 1 GPU
 *         reported, not asserted), a killed rank and a stopped (hung) rank:
 *         the run ends on every rank with a message, the checkpoint intact.
 * A GPU case without its devices prints why ("no CUDA device", "needs 2
 * CUDA devices") and the program exits 77 (ctest: skipped).
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "combine.h"
#include "dist.h"
#include "scratch.h"
#include "sha256.h"
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#ifndef CUDA_V2_DIR
#define CUDA_V1_DIR ""
#define CUDA_V2_DIR ""
#endif
#define SKIP_EXIT 77

static char *g_out, *g_err;

static int cuda_devices(void)
{
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 0;
    return n;
#else
    return 0;
#endif
}

static pid_t spawn_train(const char *tag, va_list ap)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)AUXTRUNK_HOST_EXE;
    argv[argc++] = "train";
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        ck_assert(argc < 63);
        argv[argc++] = (char *)a;
    }
    argv[argc] = NULL;
    return tst_spawn(AUXTRUNK_HOST_EXE, argv, tag);
}

/* Runs auxtrunk-host train with the NULL-terminated arguments. */
static int run_train(const char *tag, ...)
{
    va_list ap;
    va_start(ap, tag);
    pid_t pid = spawn_train(tag, ap);
    va_end(ap);
    return tst_wait(pid, 600.0, tag, &g_out, &g_err);
}

static pid_t start_train(const char *tag, ...)
{
    va_list ap;
    va_start(ap, tag);
    pid_t pid = spawn_train(tag, ap);
    va_end(ap);
    return pid;
}

#define ck_assert_contains(hay, needle) \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (hay))

static void assert_same_file(const char *a, const char *b)
{
    ck_assert_msg(tst_same_file(a, b), "%s and %s differ", a, b);
}

/* ------------------------------------------------------------------------- */
/* cli                                                                       */

START_TEST(test_refusals)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    if (!ath_dist_available()) {
        ck_assert_int_eq(run_train("nonccl", "--plugin-dir", CPU_PLUGIN_DIR, "--gpus", "2", NULL),
                         3);
        ck_assert_contains(g_err, "--gpus needs a build with CUDA and NCCL");
        printf("cli: this build has no NCCL: --gpus refused with a message\n");
        tst_scratch_done();
        return;
    }
    ck_assert_int_eq(
        run_train("odd", "--plugin-dir", CPU_PLUGIN_DIR, "--gpus", "2", "--batch", "513", NULL), 2);
    ck_assert_contains(g_err, "--batch 513 is not a multiple of --gpus 2");
    /* Hot swap is accepted with --gpus: the host plugin is what is refused. */
    ck_assert_int_eq(run_train("swap", "--plugin-dir", CPU_PLUGIN_DIR, "--gpus", "2",
                               "--watch-plugin-dir", "--steps", "3", NULL),
                     2);
    ck_assert_contains(g_err, "--gpus needs a CUDA plugin");
    /* A host plugin: each worker refuses before it joins NCCL; the launcher
     * reports the first failure. */
    ck_assert_int_eq(
        run_train("host", "--plugin-dir", CPU_PLUGIN_DIR, "--gpus", "2", "--steps", "3", NULL), 2);
    ck_assert_contains(g_err, "--gpus needs a CUDA plugin");
    ck_assert_contains(g_err, "the data-parallel run failed");
    /* Worker variables: incomplete, or disagreeing with --gpus. */
    setenv(ATH_DIST_ENV_RANK, "1", 1);
    unsetenv(ATH_DIST_ENV_WORLD);
    ck_assert_int_eq(run_train("noworld", "--plugin-dir", CPU_PLUGIN_DIR, "--gpus", "2", NULL), 2);
    ck_assert_contains(g_err, "needs AUXTRUNK_WORLD_SIZE");
    setenv(ATH_DIST_ENV_WORLD, "4", 1);
    setenv(ATH_DIST_ENV_ID_FILE, tst_path_in("id"), 1);
    ck_assert_int_eq(run_train("world", "--plugin-dir", CPU_PLUGIN_DIR, "--gpus", "2", NULL), 2);
    ck_assert_contains(g_err, "AUXTRUNK_WORLD_SIZE=4 but --gpus 2");
    setenv(ATH_DIST_ENV_RANK, "4", 1);
    ck_assert_int_eq(run_train("rank", "--plugin-dir", CPU_PLUGIN_DIR, "--gpus", "4", NULL), 2);
    ck_assert_contains(g_err, "AUXTRUNK_RANK=4 is not a rank of 4");
    /* --plugin-sha256 is honoured on a rank other than 0: the worker refuses
     * a plugin the list lacks before it joins the communicator. */
    const char list[] = "0000000000000000000000000000000000000000000000000000000000000000  other\n";
    tst_spit(tst_path_in("allow"), list, sizeof list - 1, 0644);
    setenv(ATH_DIST_ENV_RANK, "1", 1);
    setenv(ATH_DIST_ENV_WORLD, "2", 1);
    ck_assert_int_eq(run_train("sha", "--plugin-dir", CPU_PLUGIN_DIR, "--gpus", "2",
                               "--plugin-sha256", tst_path_in("allow"), NULL),
                     3);
    ck_assert_contains(g_err, "not on the allow-list");
    unsetenv(ATH_DIST_ENV_RANK);
    unsetenv(ATH_DIST_ENV_WORLD);
    unsetenv(ATH_DIST_ENV_ID_FILE);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* gpu1, gpu2                                                                */

#define NEED_DEVICES(n)                                                            \
    do {                                                                           \
        if (!CUDA_V2_DIR[0] || cuda_devices() < (n) || !ath_dist_available()) {    \
            printf("%s: %s skipped\n",                                             \
                   !CUDA_V2_DIR[0] || !ath_dist_available() ? "no CUDA/NCCL build" \
                   : (n) == 1                               ? "no CUDA device"     \
                                                            : "needs 2 CUDA devices",                            \
                   __func__);                                                      \
            fflush(stdout);                                                        \
            exit(SKIP_EXIT);                                                       \
        }                                                                          \
    } while (0)

/* Production topology; the global batch B, checkpoints every 50 steps; then
 * the NULL-terminated extra arguments. */
static void dp_run(const char *tag, const char *batch, const char *steps, const char *gpus, ...)
{
    char csv[64], ck[64];
    snprintf(csv, sizeof csv, "%s.csv", tag);
    snprintf(ck, sizeof ck, "%s.ck", tag);
    char *argv[64];
    int n = 0;
    const char *fixed[] = {AUXTRUNK_HOST_EXE,
                           "train",
                           "--plugin-dir",
                           CUDA_V2_DIR,
                           "--batch",
                           batch,
                           "--steps",
                           steps,
                           "--checkpoint-every",
                           "50",
                           "--csv",
                           tst_path_in(csv),
                           "--checkpoint",
                           tst_path_in(ck),
                           "--log-every",
                           "100",
                           gpus ? "--gpus" : "--quiet",
                           gpus ? gpus : "--quiet"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv[n++] = (char *)fixed[i];
    va_list ap;
    va_start(ap, gpus);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        ck_assert(n < 63);
        argv[n++] = (char *)a;
    }
    va_end(ap);
    argv[n] = NULL;
    int rc = tst_wait(tst_spawn(AUXTRUNK_HOST_EXE, argv, tag), 600.0, tag, &g_out, &g_err);
    ck_assert_msg(rc == 0, "%s: exit %d\n%s\n%s", tag, rc, g_out, g_err);
    if (gpus)
        ck_assert_contains(g_out, "data parallel:");
    const char *summary = strstr(g_out, "summary:");
    fprintf(stderr, "dist: %s:\n%s", tag, summary ? summary : g_out);
}

static void assert_same_run(const char *a, const char *b)
{
    char x[64], y[64];
    snprintf(x, sizeof x, "%s.csv", a);
    snprintf(y, sizeof y, "%s.csv", b);
    assert_same_file(tst_path_in(x), tst_path_in(y));
    snprintf(x, sizeof x, "%s.ck", a);
    snprintf(y, sizeof y, "%s.ck", b);
    assert_same_file(tst_path_in(x), tst_path_in(y));
}

/* The device combine (dist_cuda.cu) against combine.h on the host, bit for
 * bit, at several rank counts; the output poisoned first and checked fully
 * written. */
START_TEST(test_combine_kernel_matches_host)
{
    NEED_DEVICES(1);
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
    const size_t P = 164480 + 3; /* the production topology's gradient, and not a round size */
    const int counts[] = {1, 2, 3, 4, 5, 8, 16};
    const uint64_t seed = (uint64_t)time(NULL);
    uint64_t z = 0x9E3779B97F4A7C15u ^ seed;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        const int N = counts[c];
        float *g = malloc((size_t)N * P * sizeof(float)), *want = malloc(P * sizeof(float));
        float *got = malloc(P * sizeof(float));
        for (size_t i = 0; i < (size_t)N * P; i++) {
            z = z * 6364136223846793005u + 1442695040888963407u;
            /* Mixed magnitudes, so that the order of the additions shows. */
            g[i] = (float)((int32_t)(z >> 32)) * 0x1p-31f * (float)(1u << (z >> 59));
        }
        float *d_g = NULL, *d_out = NULL;
        ck_assert(cudaMalloc((void **)&d_g, (size_t)N * P * sizeof(float)) == cudaSuccess);
        ck_assert(cudaMalloc((void **)&d_out, P * sizeof(float)) == cudaSuccess);
        ck_assert(cudaMemcpy(d_g, g, (size_t)N * P * sizeof(float), cudaMemcpyHostToDevice) ==
                  cudaSuccess);
        ck_assert(cudaMemset(d_out, 0xFF, P * sizeof(float)) == cudaSuccess); /* NaN */
        ck_assert(ath_cuda_combine(NULL, d_g, P, N, d_out) == 0);
        ck_assert(cudaMemcpy(got, d_out, P * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
        for (size_t i = 0; i < P; i++)
            want[i] = ath_combine_elem(g, P, (uint32_t)N, i);
        size_t bad = 0;
        for (size_t i = 0; i < P; i++)
            bad += memcmp(&got[i], &want[i], sizeof(float)) != 0;
        ck_assert_msg(bad == 0, "N %d: %zu of %zu combined elements differ from the host's", N, bad,
                      P);
        cudaFree(d_g);
        cudaFree(d_out);
        free(g), free(want), free(got);
    }
    printf("gpu1: the device combine equals combine.h at N = 1, 2, 3, 4, 5, 8, 16 (inputs of "
           "seed %llu)\n",
           (unsigned long long)seed);
#endif
}
END_TEST

START_TEST(test_one_rank_equals_plain)
{
    NEED_DEVICES(1);
    tst_scratch(AUXTRUNK_TEST_TMP);
    dp_run("plain", "512", "200", NULL, NULL);
    dp_run("nccl1", "512", "200", "1", NULL);
    ck_assert_contains(g_out, "bit-identical to one GPU on the full batch");
    dp_run("nccl1-eager", "512", "200", "1", "--no-graph", NULL);
    assert_same_run("plain", "nccl1");
    assert_same_run("plain", "nccl1-eager");
    /* A plain checkpoint resumed through NCCL, and the reverse. */
    dp_run("a", "512", "100", NULL, NULL);
    dp_run("b", "512", "200", "1", "--resume", tst_path_in("a.ck"), NULL);
    assert_same_file(tst_path_in("plain.ck"), tst_path_in("b.ck"));
    dp_run("c", "512", "100", "1", NULL);
    dp_run("d", "512", "200", NULL, "--resume", tst_path_in("c.ck"), NULL);
    assert_same_file(tst_path_in("plain.ck"), tst_path_in("d.ck"));
    tst_scratch_done();
}
END_TEST

START_TEST(test_two_ranks_equal_one)
{
    NEED_DEVICES(2);
    tst_scratch(AUXTRUNK_TEST_TMP);
    /* Shards of 256 and 512 samples: 2 GPUs equal 1. */
    dp_run("one", "512", "200", NULL, NULL);
    dp_run("two", "512", "200", "2", NULL);
    ck_assert_contains(g_out, "bit-identical to one GPU on the full batch");
    assert_same_run("one", "two");
    dp_run("two-eager", "512", "200", "2", "--no-graph", NULL);
    assert_same_run("one", "two-eager");
    dp_run("one-1k", "1024", "200", NULL, NULL);
    dp_run("two-1k", "1024", "200", "2", NULL);
    assert_same_run("one-1k", "two-1k");
    /* From 2 GPUs onto 1. */
    dp_run("half", "512", "100", "2", NULL);
    dp_run("rest", "512", "200", NULL, "--resume", tst_path_in("half.ck"), NULL);
    assert_same_file(tst_path_in("one.ck"), tst_path_in("rest.ck"));
    /* Shards of 384: deterministic, not promised equal to 1 GPU. */
    dp_run("one-768", "768", "200", NULL, NULL);
    dp_run("two-768", "768", "200", "2", NULL);
    ck_assert_contains(g_out, "NOT bit-identical to one GPU");
    dp_run("two-768b", "768", "200", "2", NULL);
    assert_same_run("two-768", "two-768b");
    printf("gpu2: batch 768 on 2 GPUs: checkpoint %s the 1-GPU one (not promised)\n",
           tst_same_file(tst_path_in("one-768.ck"), tst_path_in("two-768.ck")) ? "EQUAL to"
                                                                               : "differs from");
    tst_scratch_done();
}
END_TEST

/* A hot swap cuda-v2 -> cuda-v1 -> cuda-v2 with --gpus gpus, both exact:
 * the loss CSV and the checkpoint equal the unswapped one-GPU run ref's. */
static void assert_swaps_leave_no_trace(const char *ref, const char *tag, const char *gpus,
                                        const char *world)
{
    char a1[4400], a2[4400], line[128];
    snprintf(a1, sizeof a1, "40:%s", CUDA_V1_DIR);
    snprintf(a2, sizeof a2, "100:%s", CUDA_V2_DIR);
    dp_run(tag, "512", "200", gpus, "--swap-at", a1, "--swap-at", a2, "--rollback-steps", "5",
           NULL);
    snprintf(line, sizeof line, "swap: after step 40: every rank (%s) runs cuda-v1", world);
    ck_assert_contains(g_out, line);
    snprintf(line, sizeof line, "swap: after step 100: every rank (%s) runs cuda-v2", world);
    ck_assert_contains(g_out, line);
    ck_assert_contains(g_out, "summary: hot-swap: 2 taken, 0 refused, 0 unchanged, 0 rolled back");
    ck_assert_contains(g_out, "summary: plugin cuda-v2");
    assert_same_run(ref, tag);
}

START_TEST(test_one_rank_swap_equals_plain)
{
    NEED_DEVICES(1);
    tst_scratch(AUXTRUNK_TEST_TMP);
    dp_run("plain", "512", "200", NULL, NULL);
    assert_swaps_leave_no_trace("plain", "swap1", "1", "1");
    /* Eager steps, and the watcher on (nothing changes; its boundaries still
     * run every rank's decision exchange). */
    dp_run("watch1", "512", "200", "1", "--no-graph", "--watch-plugin-dir", NULL);
    ck_assert_contains(g_out, "summary: hot-swap: 0 taken, 0 refused");
    assert_same_run("plain", "watch1");
    /* A host plugin is refused by rank 0 and the run goes on unchanged. */
    char at[4400];
    snprintf(at, sizeof at, "40:%s", CPU_PLUGIN_DIR);
    dp_run("host1", "512", "200", "1", "--swap-at", at, NULL);
    ck_assert_contains(g_out, "not-cuda");
    ck_assert_contains(g_out, "summary: hot-swap: 0 taken, 1 refused");
    assert_same_run("plain", "host1");
    tst_scratch_done();
}
END_TEST

START_TEST(test_two_rank_swap_equals_one)
{
    NEED_DEVICES(2);
    tst_scratch(AUXTRUNK_TEST_TMP);
    dp_run("one", "512", "200", NULL, NULL);
    assert_swaps_leave_no_trace("one", "swap2", "2", "2");
    /* --plugin-sha256 on every rank: a list of cuda-v2 alone, so rank 0
     * refuses cuda-v1 (digest) and the run equals the unswapped one. */
    char v2[4400], hex[ATH_SHA256_HEX], list[200], at[4400];
    snprintf(v2, sizeof v2, "%s/libauxtrunk.so", CUDA_V2_DIR);
    ck_assert(ath_sha256_file(v2, hex) == 0);
    snprintf(list, sizeof list, "%s  cuda-v2\n", hex);
    tst_spit(tst_path_in("allow"), list, strlen(list), 0644);
    snprintf(at, sizeof at, "40:%s", CUDA_V1_DIR);
    dp_run("pinned2", "512", "200", "2", "--plugin-sha256", tst_path_in("allow"), "--swap-at", at,
           NULL);
    ck_assert_contains(g_out, "digest");
    ck_assert_contains(g_out, "summary: hot-swap: 0 taken, 1 refused");
    assert_same_run("one", "pinned2");
    tst_scratch_done();
}
END_TEST

/* Two workers started as an external launcher would, each with its own
 * allow-list: rank 1's lacks cuda-v1, so rank 1 cannot take the swap rank 0
 * takes at step 60. Both must end with rank 1's reason, exit code 3, and the
 * checkpoint of step 50 intact. */
START_TEST(test_rank_that_cannot_take_ends_run)
{
    NEED_DEVICES(2);
    tst_scratch(AUXTRUNK_TEST_TMP);
    char v1[4400], v2[4400], hex1[ATH_SHA256_HEX], hex2[ATH_SHA256_HEX], list[300], at[4400];
    snprintf(v1, sizeof v1, "%s/libauxtrunk.so", CUDA_V1_DIR);
    snprintf(v2, sizeof v2, "%s/libauxtrunk.so", CUDA_V2_DIR);
    ck_assert(ath_sha256_file(v1, hex1) == 0 && ath_sha256_file(v2, hex2) == 0);
    snprintf(list, sizeof list, "%s  cuda-v2\n%s  cuda-v1\n", hex2, hex1);
    tst_spit(tst_path_in("both"), list, strlen(list), 0644);
    snprintf(list, sizeof list, "%s  cuda-v2\n", hex2);
    tst_spit(tst_path_in("v2only"), list, strlen(list), 0644);
    snprintf(at, sizeof at, "60:%s", CUDA_V1_DIR);
    const char *ck = tst_path_in("refuse.ck");
    setenv(ATH_DIST_ENV_WORLD, "2", 1);
    setenv(ATH_DIST_ENV_ID_FILE, tst_path_in("nccl-id"), 1);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        char rank[4];
        snprintf(rank, sizeof rank, "%d", r);
        setenv(ATH_DIST_ENV_RANK, rank, 1);
        setenv(ATH_DIST_ENV_LOCAL_RANK, rank, 1);
        pid[r] = start_train(r ? "refuse1" : "refuse0", "--plugin-dir", CUDA_V2_DIR, "--batch",
                             "512", "--steps", "200", "--checkpoint-every", "50", "--checkpoint",
                             ck, "--quiet", "--gpus", "2", "--swap-at", at, "--plugin-sha256",
                             tst_path_in(r ? "v2only" : "both"), NULL);
    }
    unsetenv(ATH_DIST_ENV_RANK);
    unsetenv(ATH_DIST_ENV_LOCAL_RANK);
    unsetenv(ATH_DIST_ENV_WORLD);
    unsetenv(ATH_DIST_ENV_ID_FILE);
    char *out[2] = {NULL, NULL}, *err[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++) {
        int rc = tst_wait(pid[r], 300.0, r ? "refuse1" : "refuse0", &out[r], &err[r]);
        fprintf(stderr, "dist: rank %d: exit %d, stderr:\n%s", r, rc, err[r]);
        ck_assert_msg(rc == 3, "rank %d: exit %d\n%s\n%s", r, rc, out[r], err[r]);
        ck_assert_contains(err[r], "hot swap: rank 1 of 2: cannot take");
        ck_assert_contains(err[r], "not on the allow-list");
        ck_assert_contains(err[r], "ending the run on every rank");
    }
    ck_assert_contains(out[0], "took cuda-v1");
    ath_ckpt_meta_t m;
    ath_err_t e = {{0}};
    ck_assert_msg(ath_ckpt_peek(ck, &m, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(m.step, 50);
    for (int r = 0; r < 2; r++)
        free(out[r]), free(err[r]);
    tst_scratch_done();
}
END_TEST

/* The pids of the launcher's children (its ranks, in start order). */
static int children_of(pid_t parent, pid_t *out, int max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
    char *t = tst_slurp(path, NULL);
    int n = 0;
    for (char *p = t; n < max && *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        out[n++] = (pid_t)v;
        p = end;
    }
    free(t);
    return n;
}

/* Starts a long 2-GPU run, waits for its first checkpoint, then hurts
 * rank 1 with sig; the run must end on every rank with a message, the
 * checkpoint intact and loadable. */
static void hurt_rank(const char *tag, int sig, const char *expect)
{
    const char *ck = tst_path_in("hurt.ck");
    pid_t pid = start_train(tag, "--plugin-dir", CUDA_V2_DIR, "--batch", "512", "--steps",
                            "100000000", "--checkpoint-every", "50", "--checkpoint", ck,
                            "--overwrite", "--quiet", "--call-timeout", "20", "--gpus", "2", NULL);
    const double t0 = (double)time(NULL);
    while (access(ck, F_OK) != 0) {
        ck_assert_msg((double)time(NULL) - t0 < 120, "no checkpoint after 120 s");
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pid_t ranks[2];
    ck_assert_int_eq(children_of(pid, ranks, 2), 2);
    ck_assert(kill(ranks[1], sig) == 0);
    int rc = tst_wait(pid, 120.0, tag, &g_out, &g_err);
    ck_assert_msg(rc != 0, "%s: the run went on after rank 1 got signal %d", tag, sig);
    ck_assert_contains(g_err, expect);
    ck_assert_contains(g_err, "a checkpoint written before is intact");
    ath_ckpt_meta_t m;
    ath_err_t err = {{0}};
    ck_assert_msg(ath_ckpt_peek(ck, &m, &err) == 0, "%s", err.msg);
    /* Every 50 steps, or where a rank ended by SIGTERM stopped: a step every
     * rank completed either way. */
    ck_assert(m.step > 0);
    fprintf(stderr, "dist: %s: exit %d, checkpoint at step %llu, stderr:\n%s", tag, rc,
            (unsigned long long)m.step, g_err);
    unlink(ck);
}

START_TEST(test_failed_rank_ends_run)
{
    NEED_DEVICES(2);
    tst_scratch(AUXTRUNK_TEST_TMP);
    hurt_rank("killed", SIGKILL, "rank 1 was killed by signal 9");
    /* A stopped rank: rank 0's exchange stalls for half of --call-timeout
     * (or, with its launch queue full, the watchdog ends it), and the
     * launcher then ends the stopped rank. */
    hurt_rank("stopped", SIGSTOP, "rank 0 exited with code");
    tst_scratch_done();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    tc = tcase_create("gpu1");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_combine_kernel_matches_host);
    tcase_add_test(tc, test_one_rank_equals_plain);
    suite_add_tcase(s, tc);
    tc = tcase_create("gpu1_swap");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_one_rank_swap_equals_plain);
    suite_add_tcase(s, tc);
    tc = tcase_create("gpu2_swap");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_two_rank_swap_equals_one);
    tcase_add_test(tc, test_rank_that_cannot_take_ends_run);
    suite_add_tcase(s, tc);
    tc = tcase_create("gpu2");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_two_ranks_equal_one);
    tcase_add_test(tc, test_failed_rank_ends_run);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* A skip inside a forked test is its exit status 77: run unforked so
     * that it is the program's. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
