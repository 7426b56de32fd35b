/*
 * test_combine.c — Check tests of the data-parallel combine (host_stub/
 * combine.h) without NCCL: N handles of the CPU plugin in one process, each
 * given its contiguous shard of a fresh seeded random batch; their gradients
 * and loss sums combined in rank order and compared byte for byte with the
 * full-batch values. Where combine.h's condition holds the bytes must be
 * equal; where it does not, the combine must be deterministic and close to
 * the full-batch value, and the test reports how many elements differ.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "combine.h"
#include "engine.h"
#include "rng.h"
#include "trunk.h"

static uint64_t g_seed;

typedef struct dp_case {
    int32_t enc, h1, h2, aux;
    int32_t batch, ranks;
    int grads_exact, loss_exact; /* what combine.h's condition must say */
} dp_case_t;

static const dp_case_t g_cases[] = {
    /* N = 1: always the full batch. */
    {24, 32, 16, 8, 100, 1, 1, 1},
    {24, 32, 16, 8, 256, 1, 1, 1},
    /* Shards of 256·2^k samples: exact. */
    {24, 32, 16, 8, 512, 2, 1, 1},
    {24, 32, 16, 8, 1024, 2, 1, 1},
    {24, 32, 16, 8, 1024, 4, 1, 1},
    {24, 32, 16, 8, 2048, 4, 1, 1},
    {24, 32, 16, 8, 2048, 8, 1, 1},
    {24, 32, 16, 8, 4096, 8, 1, 1},
    /* N not a power of two: the canon's tree over 3 rank values. */
    {24, 32, 16, 8, 768, 3, 1, 1},
    {24, 32, 16, 8, 1536, 3, 1, 1},
    /* Breaking the condition: 3 chunks a shard, or partial chunks. */
    {24, 32, 16, 8, 1536, 2, 0, 0},
    {24, 32, 16, 8, 200, 2, 0, 0},
    {24, 32, 16, 8, 3072, 4, 0, 0},
    {24, 32, 16, 8, 2400, 8, 0, 0},
    /* AUX not a power of two: the gradients exact, the loss not. */
    {24, 32, 16, 24, 512, 2, 1, 0},
    /* The production topology. */
    {256, 256, 256, 128, 512, 2, 1, 1},
};

static void open_trunk(ath_trunk_t *t, const dp_case_t *c, int32_t max_batch)
{
    auxtrunk_config_t config = {sizeof config, 0, c->enc, c->h1, c->h2, c->aux, max_batch, -1};
    ath_err_t err = {{0}};
    ath_load_status_t ls = ath_trunk_open(t, CPU_PLUGIN_DIR, &config, -1, &err);
    ck_assert_msg(ls == ATH_LOAD_OK, "%s: %s", CPU_PLUGIN_DIR, err.msg);
}

/* The per-rank gradients [N, P] and loss sums [N] of the shards. */
static void run_shards(ath_trunk_t *ranks, const dp_case_t *c, const float *params, const float *x,
                       const float *target, const float *dout_full, float *gathered, float *lsum)
{
    const int32_t b = c->batch / c->ranks;
    const size_t P = ranks[0].n_params, nb = (size_t)b * (size_t)c->aux;
    const size_t n = (size_t)c->batch * (size_t)c->aux;
    float *out = malloc(nb * sizeof(float)), *dout = malloc(nb * sizeof(float));
    float *q = malloc(nb * sizeof(float));
    ath_err_t err = {{0}};
    for (int32_t r = 0; r < c->ranks; r++) {
        const size_t s0 = (size_t)r * (size_t)b;
        for (size_t i = 0; i < P; i++)
            gathered[r * P + i] = NAN; /* poisoned: backward must write all */
        ck_assert_msg(ath_trunk_forward(&ranks[r], params, x + s0 * c->enc, b, out, &err) == 0,
                      "%s", err.msg);
        lsum[r] = ath_loss_sum_host(out, target + s0 * c->aux, nb, n, dout, q);
        /* A shard's dout is the full batch's, element for element. */
        ck_assert(memcmp(dout, dout_full + s0 * c->aux, nb * sizeof(float)) == 0);
        ck_assert_msg(ath_trunk_backward(&ranks[r], dout, b, gathered + r * P, &err) == 0, "%s",
                      err.msg);
        ck_assert(!ath_any_nonfinite(gathered + r * P, P));
    }
    free(out), free(dout), free(q);
}

static void combine_all(float *gathered, size_t P, uint32_t N, float *g)
{
    for (size_t i = 0; i < P; i++)
        g[i] = ath_combine_elem(gathered, P, N, i);
}

static size_t count_diff(const float *a, const float *b, size_t n, double *worst_rel)
{
    size_t d = 0;
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++) {
        d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    }
    *worst_rel = scale > 0 ? worst / scale : worst;
    return d;
}

START_TEST(test_combine_vs_full_batch)
{
    const dp_case_t *c = &g_cases[_i];
    ck_assert_int_eq(ath_dp_grads_exact(c->batch, c->ranks), c->grads_exact);
    ck_assert_int_eq(ath_dp_loss_exact(c->batch, c->ranks, c->aux), c->loss_exact);
    tst_rng_t rng;
    tst_rng_seed(&rng, g_seed + (uint64_t)_i);
    const int32_t B = c->batch, N = c->ranks, b = B / N;
    ath_trunk_t full;
    open_trunk(&full, c, B);
    const size_t P = full.n_params, n = (size_t)B * c->aux;
    float *params = malloc(P * sizeof(float)), *x = malloc((size_t)B * c->enc * sizeof(float));
    float *target = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    float *dout = malloc(n * sizeof(float)), *q = malloc(n * sizeof(float));
    float *g_full = malloc(P * sizeof(float)), *g1 = malloc(P * sizeof(float));
    float *g2 = malloc(P * sizeof(float));
    float *gathered = malloc((size_t)N * P * sizeof(float));
    float *lsum = malloc((size_t)N * sizeof(float)), *lsum2 = malloc((size_t)N * sizeof(float));
    tst_rng_fill(&rng, params, P, -0.3f, 0.3f);
    tst_rng_fill(&rng, x, (size_t)B * c->enc, -1.0f, 1.0f);
    tst_rng_fill(&rng, target, n, -1.0f, 1.0f);

    /* The one-handle full batch. */
    ath_err_t err = {{0}};
    ck_assert_msg(ath_trunk_forward(&full, params, x, B, out, &err) == 0, "%s", err.msg);
    const float full_sum = ath_loss_sum_host(out, target, n, n, dout, q);
    const float full_loss = ath_loss_of_sum(full_sum, (float)n);
    ck_assert_msg(ath_trunk_backward(&full, dout, B, g_full, &err) == 0, "%s", err.msg);
    ath_trunk_close(&full);

    /* N handles, one shard each, combined in rank order; then again. */
    ath_trunk_t *ranks = calloc((size_t)N, sizeof *ranks);
    for (int32_t r = 0; r < N; r++)
        open_trunk(&ranks[r], c, b);
    run_shards(ranks, c, params, x, target, dout, gathered, lsum);
    combine_all(gathered, P, (uint32_t)N, g1);
    const float loss1 = ath_loss_of_sum(ath_combine_elem(lsum, 1, (uint32_t)N, 0), (float)n);
    run_shards(ranks, c, params, x, target, dout, gathered, lsum2);
    combine_all(gathered, P, (uint32_t)N, g2);
    const float loss2 = ath_loss_of_sum(ath_combine_elem(lsum2, 1, (uint32_t)N, 0), (float)n);
    for (int32_t r = 0; r < N; r++)
        ath_trunk_close(&ranks[r]);
    free(ranks);

    /* Deterministic whatever the condition says. */
    ck_assert_msg(memcmp(g1, g2, P * sizeof(float)) == 0, "B %d, N %d: two combines differ", B, N);
    ck_assert(memcmp(&loss1, &loss2, sizeof loss1) == 0);
    double worst = 0.0;
    const size_t differ = count_diff(g1, g_full, P, &worst);
    const int loss_same = memcmp(&loss1, &full_loss, sizeof loss1) == 0;
    fprintf(stderr,
            "combine: ENC=%d H1=%d H2=%d AUX=%d B %5d N %d (shard %4d): gradients %s "
            "(%zu of %zu differ, worst %.2g of max), loss %s (%a vs %a)\n",
            c->enc, c->h1, c->h2, c->aux, B, N, b,
            differ == 0 ? "equal to one handle" : "NOT equal to one handle", differ, P, worst,
            loss_same ? "equal" : "NOT equal", (double)loss1, (double)full_loss);
    if (c->grads_exact)
        ck_assert_msg(differ == 0, "B %d, N %d: %zu gradients differ from the full batch", B, N,
                      differ);
    else
        ck_assert_msg(worst <= 1e-4, "B %d, N %d: the combine is far off (%g)", B, N, worst);
    if (c->loss_exact)
        ck_assert_msg(loss_same, "B %d, N %d: loss %a vs %a", B, N, (double)loss1,
                      (double)full_loss);
    else
        ck_assert(fabs((double)loss1 - full_loss) <= 1e-5 * fabs((double)full_loss));
    free(params), free(x), free(target), free(out), free(dout), free(q);
    free(g_full), free(g1), free(g2), free(gathered), free(lsum), free(lsum2);
}
END_TEST

/* The combine on its own: the canon's tree over the rank values, which for
 * N = 2^k is the complete binary tree and for other N leaves the last
 * values to be added at the level where they get a left neighbour. */
START_TEST(test_combine_order)
{
    /* Values whose sum depends on the order: 1 + 2^-24 + 2^-24 + ... */
    const float e = 0x1p-24f;
    float g3[3] = {1.0f, e, e};
    /* (1 + e) + e, each rounding to even: 1, then 1. */
    ck_assert(ath_combine_elem(g3, 1, 3, 0) == 1.0f);
    float g4[4] = {e, e, 1.0f, e};
    /* (e + e) + (1 + e) = 2^-23 + 1 */
    ck_assert(ath_combine_elem(g4, 1, 4, 0) == 1.0f + 0x1p-23f);
    float g5[5] = {e, e, e, e, 1.0f};
    /* ((e + e) + (e + e)) + 1 = 2^-22 + 1 */
    ck_assert(ath_combine_elem(g5, 1, 5, 0) == 1.0f + 0x1p-22f);
    float g1[1] = {3.5f};
    ck_assert(ath_combine_elem(g1, 1, 1, 0) == 3.5f);
    /* Strided: element i of each rank's buffer. */
    float gs[2 * 3] = {1, 10, 2, 20, 3, 30};
    ck_assert(ath_combine_elem(gs, 2, 3, 1) == 60.0f && ath_combine_elem(gs, 2, 3, 0) == 6.0f);
    /* The condition's edges. */
    ck_assert(ath_dp_grads_exact(256, 1) && ath_dp_grads_exact(7, 1));
    ck_assert(!ath_dp_grads_exact(256, 2) && ath_dp_grads_exact(512, 2));
    ck_assert(!ath_dp_grads_exact(513, 2) && !ath_dp_grads_exact(1536, 2));
    ck_assert(ath_dp_grads_exact(3 * 1024, 3) && ath_dp_grads_exact(65536, 8));
    ck_assert(ath_dp_loss_exact(512, 2, 128) && !ath_dp_loss_exact(512, 2, 24));
}
END_TEST

int main(void)
{
    g_seed = tst_seed("test_combine");
    Suite *s = suite_create("combine");
    TCase *tc = tcase_create("combine");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_combine_order);
    tcase_add_loop_test(tc, test_combine_vs_full_batch, 0,
                        (int)(sizeof g_cases / sizeof g_cases[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
