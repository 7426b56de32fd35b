/*
 * test_data_parallel.c — the data-parallel rule of docs/integrate.md, on the
 * CPU plugin: when every replica but the last gets a power-of-two number of
 * whole canonical chunks (AUXTRUNK_CANON_CHUNK samples each) and the host
 * combines the replicas' gradients with the canonical pairwise tree in rank
 * order, the result is bit-identical to one backward over the whole batch.
 * And the two conditions matter: a shard that splits a chunk, or a
 * left-to-right sum of the replicas, gives other bits.
 *
 * Each replica is its own handle (as each device would be). Seeded inputs
 * (AUXTRUNK_SEED reproduces); fork mode.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdlib.h>
#include <string.h>

#define AUXTRUNK_LOADER_IMPLEMENTATION
#include "auxtrunk_canon.h"
#include "auxtrunk_loader.h"
#include "bits.h"
#include "layout.h" /* host_stub's flat parameter layout */
#include "rng.h"

#ifndef CPU_PLUGIN
#error "CPU_PLUGIN must name the built CPU plugin"
#endif

enum { ENC = 48, H1 = 40, H2 = 36, AUX = 20, MAX_REPLICAS = 8 };
#define C AUXTRUNK_CANON_CHUNK

static uint64_t g_seed;
static const auxtrunk_config_t k_config = {.struct_size = sizeof(auxtrunk_config_t),
                                           .enc = ENC,
                                           .h1 = H1,
                                           .h2 = H2,
                                           .aux = AUX,
                                           .max_batch = 4 * C,
                                           .device = -1};

static const auxtrunk_api_t *api(void)
{
    static auxtrunk_plugin_t pl;
    if (!pl.lib) {
        char msg[AUXTRUNK_LOAD_MESSAGE_MAX];
        ck_assert_msg(auxtrunk_plugin_load(&pl, CPU_PLUGIN, msg, sizeof msg) == AUXTRUNK_LOAD_OK,
                      "%s", msg);
    }
    return &pl.api;
}

/* Gradients of samples [first, first + n) of x/dout, on a handle of their own. */
static void backward_of(const float *w, const float *x, const float *dout, int first, int n,
                        float *grads)
{
    const auxtrunk_api_t *a = api();
    auxtrunk_handle_t *h = NULL;
    ck_assert_int_eq(a->init(&k_config, &h), AUXTRUNK_OK);
    auxtrunk_params_t p = ath_params_view(&k_config, w);
    float *out = malloc((size_t)n * AUX * sizeof *out);
    ck_assert(out != NULL);
    const float *xs = x + (size_t)first * ENC, *ds = dout + (size_t)first * AUX;
    ck_assert_int_eq(a->forward(h, &p, xs, n, out, 0, NULL), AUXTRUNK_OK);
    auxtrunk_grads_t g = ath_grads_view(&k_config, grads);
    ck_assert_int_eq(a->backward(h, &p, xs, ds, n, &g, 0, NULL), AUXTRUNK_OK);
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
    free(out);
}

/* The canonical pairwise tree over the replicas, in rank order (the
 * combine docs/integrate.md gives): the result is left in g[0]. */
static void tree_combine(float *g[], int r, size_t n)
{
    for (int s = 1; s < r; s *= 2)
        for (int i = 0; i + s < r; i += 2 * s)
            for (size_t e = 0; e < n; e++)
                g[i][e] = g[i][e] + g[i + s][e];
}

static void left_combine(float *g[], int r, size_t n)
{
    for (int i = 1; i < r; i++)
        for (size_t e = 0; e < n; e++)
            g[0][e] = g[0][e] + g[i][e];
}

/* Elements of a and b whose bits differ. */
static size_t differing(const float *a, const float *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += tst_f32_bits(a[i]) != tst_f32_bits(b[i]);
    return d;
}

/* The whole batch on one handle against the shards on one handle each,
 * combined by combine; returns how many gradient elements differ. */
static size_t run(const int *shards, int r, void (*combine)(float **, int, size_t), int tag)
{
    const size_t P = AUXTRUNK_PARAM_COUNT(&k_config);
    int B = 0;
    for (int i = 0; i < r; i++)
        B += shards[i];
    ck_assert_int_le(B, k_config.max_batch);
    tst_rng_t rng;
    tst_rng_seed(&rng, g_seed ^ (uint64_t)tag);
    float *w = malloc(P * sizeof *w), *x = malloc((size_t)B * ENC * sizeof *x);
    float *dout = malloc((size_t)B * AUX * sizeof *dout), *whole = malloc(P * sizeof *whole);
    ck_assert(w && x && dout && whole);
    tst_rng_fill(&rng, w, P, -0.3f, 0.3f);
    tst_rng_fill(&rng, x, (size_t)B * ENC, -1.0f, 1.0f);
    tst_rng_fill(&rng, dout, (size_t)B * AUX, -1.0f, 1.0f);
    backward_of(w, x, dout, 0, B, whole);

    float *g[MAX_REPLICAS];
    for (int i = 0, first = 0; i < r; first += shards[i++]) {
        ck_assert(g[i] = malloc(P * sizeof *g[i]));
        backward_of(w, x, dout, first, shards[i], g[i]);
    }
    combine(g, r, P);
    size_t d = differing(g[0], whole, P);
    for (int i = 0; i < r; i++)
        free(g[i]);
    free(w), free(x), free(dout), free(whole);
    return d;
}

START_TEST(test_tree_of_whole_chunks_is_bit_identical)
{
    /* Power-of-two whole chunks per replica, the last replica shorter. */
    static const struct {
        int r, shards[MAX_REPLICAS];
    } cases[] = {
        {4, {C, C, C, C}}, {3, {C, C, C - 17}}, {2, {2 * C, 2 * C}},
        {2, {2 * C, 1}},   {1, {3 * C + 5}}, /* one replica: the combine is the identity */
    };
    size_t d = run(cases[_i].shards, cases[_i].r, tree_combine, _i);
    ck_assert_msg(d == 0, "case %d: %zu gradient elements differ from the whole batch", _i, d);
}
END_TEST

START_TEST(test_conditions_matter)
{
    /* A shard boundary inside a chunk, and a left-to-right combine: both are
     * exact sums in a different order, and the bits show it. */
    const int split[] = {C + C / 2, C + C / 2};
    ck_assert_msg(run(split, 2, tree_combine, 50) > 0,
                  "shards splitting a chunk matched the whole batch bit for bit");
    const int whole_chunks[] = {C, C, C, C};
    ck_assert_msg(run(whole_chunks, 4, left_combine, 51) > 0,
                  "a left-to-right combine of 4 replicas matched the tree bit for bit");
}
END_TEST

int main(void)
{
    g_seed = tst_seed("test_data_parallel");
    Suite *s = suite_create("data_parallel");
    TCase *tc = tcase_create("combine");
    tcase_add_loop_test(tc, test_tree_of_whole_chunks_is_bit_identical, 0, 5);
    tcase_add_test(tc, test_conditions_matter);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
