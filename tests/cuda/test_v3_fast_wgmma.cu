/*
 * test_v3_fast_wgmma.cu — cuda-v3's Hopper layer GEMM
 * (kernels/cuda_v3/trunk_v3_fast_wgmma.cu) on its own, against a double
 * reference, on a GPU:
 *   - on a device of compute capability 9.0 the sm_90a image must load
 *     (v3_wgmma_available), or fast mode would silently run cuda-v2's kernels;
 *   - c = act(a · W + b) for layer shapes with tails in every dimension
 *     (rows past a 128-row tile, columns past a 128-column slice, k past a
 *     32-float slab), and for the trunk's layers at batches of one and many
 *     row tiles per block: the output poisoned (NaN) before the call, every
 *     element written, the guard floats after it untouched, the
 *     norm-relative error (max |got - ref| / max |ref|) at most LAYER_TOL,
 *     inputs of magnitude 1 and of 1e3 (large inputs: the ELU saturates and
 *     the linear part dominates; the error measure is scale-free);
 *   - both staging variants of the weights (V3_WGMMA_STAGING_*), each with
 *     every tile shape (V3_WGMMA_TILE_TALL, _SHORT, _NARROW, _PAIRED): all
 *     eight give the same bits;
 *   - the hidden gradient c = (d · wᵀ) ⊙ ELU'(y) (v3_wgmma_hidden_grad) the
 *     same way, y an ELU record (ELU of pre-activations of either sign), for
 *     the trunk's dh2_pre (k 128) and dh1_pre (k 256) shapes and shapes with
 *     tails, d of magnitude 1 and 1e3 with pre-activations of 3 and 1e2,
 *     every tile shape (the same bits);
 *   - the weight and bias gradients (v3_wgmma_weight_grads: dW = aᵀ · g over
 *     the batch, db = column sums, for the three layers at once) the same
 *     way, for batches of 1, 37, one chunk and many, not multiples of the
 *     32-row slab or the chunk, widths with tails past a 128 x 128 tile, a
 *     and g of magnitude 1 and 1e2; the flat gradient buffer poisoned, every
 *     element written, the guard floats after it untouched; then again with
 *     accumulate onto random gradients; and in two parts
 *     (v3_wgmma_weight_grads_of: dW1 | dW2, dW3 and dW1, dW2 | dW3) on two
 *     streams at once, each given only its own operands: the same bits;
 *     each case on the kernel its batch picks and on each of the three
 *     forced (v3_wgmma_weight_grads_as: 128 x 128 tiles by loads and by
 *     TMA, wide 128 x 256 tiles with swapped gradients and half tiles), the
 *     picked one the same bits as its forced run;
 *   - dh2_pre with dW3 and db3 in one launch (v3_wgmma_hidden_grad_dw3,
 *     v3_wgmma_dw3_sum): all three against the double reference for the
 *     production widths at 1 to 65,536 rows and widths with tails (h2 past
 *     a 64-column slice, aux past a 32-float slab), dout of magnitude 1 and
 *     1e2, outputs poisoned, every element written, the guards untouched, a
 *     second call the same bits, dh2 the bits of the narrow hidden-gradient
 *     launch; accumulate onto random gradients; refused outside its domain;
 *   - the chain kernel (v3_wgmma_forward, v3_wgmma_hidden_grads), on 64-
 *     and on 128-row tiles, bit for bit against the layer launches it
 *     replaces, for the production topology at batches of 1 to 40,000 and
 *     widths with tails, inputs of magnitude 1 and 1e2, outputs poisoned,
 *     every element written, the guards untouched;
 *   - fast mode's backward forked onto a second stream in a graph
 *     (v3_fast_backward_forked), replayed, and called eagerly, the same
 *     bits as on one stream (v3_fast_backward); where the first launch
 *     computes dW3 and db3 (V3_WGMMA_DW3 1, past V3_WGMMA_DW3_MIN_BATCH)
 *     those against the double reference as well;
 *   - a second call gives the same bits;
 *   - shapes outside the domain are refused with nothing written.
 * Prints every measured error (the worst goes to docs/perf-notes-v3-fast.md).
 * Without a device: "no CUDA device", exit 77 (ctest: skipped).
 *
 * LAYER_TOL: one TF32 stage. A product of an activation truncated to TF32
 * (at most 2^-10 relative) and a weight rounded to nearest (2^-11) is off by
 * at most 1.5 · 2^-10 = 1.5e-3; the errors of the K terms are independent
 * and grow like sqrt(K) as the sum does, so the norm-relative error of a
 * stage is about that bound or less. LAYER_TOL = 3e-3 leaves a factor 2;
 * expected measurements: a few 1e-4. The hidden gradient is one such stage
 * (d truncated, w rounded) times ELU'(y), a factor in [0, 1] that the
 * reference forms in double from the same y: the same bound. A weight
 * gradient is one stage too (both operands rounded to nearest: 2^-10 per
 * product), its bias sum an fp32 sum: the same bound holds with room.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include <cuda_runtime.h>

extern "C" {
#include "auxtrunk.h"
#include "bits.h"
#include "rng.h"
}
#include "trunk_v3_fast.h"

#define LAYER_TOL 3e-3
#define GUARD 64 /* floats after c that must stay as they were */

static uint64_t g_seed;

#define CUDA_OK(call)                                                              \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

static float *dev_from(const std::vector<float> &h)
{
    float *d = NULL;
    CUDA_OK(cudaMalloc(&d, h.size() * sizeof(float)));
    CUDA_OK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

/* nc NaN-poisoned floats on the device followed by GUARD guard floats 1, 2,
 * …, whose values go to guard_want. */
static float *dev_poisoned(size_t nc, std::vector<float> &guard_want)
{
    std::vector<float> poison(nc + GUARD, tst_bits_f32(0x7fc0dead));
    guard_want.resize(GUARD);
    for (int i = 0; i < GUARD; i++)
        guard_want[i] = poison[nc + i] = (float)(i + 1);
    return dev_from(poison);
}

static void prepare_or_fail(void)
{
    CUDA_OK(v3_wgmma_prepare());
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major == 9 && prop.minor == 0)
        ck_assert_msg(v3_wgmma_available(), "%s (sm_90) did not load the sm_90a layer kernel",
                      prop.name);
}

typedef struct layer_case {
    int m, n, k, elu;
} layer_case_t;

/* Copies the device result (c and its guard floats) of call(0), then of
 * call(0) followed at once by call(1) (a programmatic dependent launch) on c
 * poisoned again; checks the guards, the bits of the last call against the
 * first, and that every element was written (finite; c was NaN-poisoned). */
template <class F>
static std::vector<float> two_calls(F call, float *dc, size_t nc,
                                    const std::vector<float> &guard_want, const char *what)
{
    std::vector<float> got(nc + GUARD), again(nc + GUARD);
    CUDA_OK(call(0));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(got.data(), dc, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    /* again, then at once as a programmatic dependent of that call: it stages
     * its operands while the first still runs, and must give the same bits */
    CUDA_OK(cudaMemset(dc, 0xFF, nc * sizeof(float)));
    CUDA_OK(call(0));
    CUDA_OK(call(1));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(again.data(), dc, again.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < GUARD; i++)
        ck_assert_msg(tst_f32_bits(got[nc + i]) == tst_f32_bits(guard_want[i]),
                      "%s: wrote past c (guard float %d)", what, i);
    size_t diff = 0, unwritten = 0;
    for (size_t i = 0; i < nc; i++) {
        diff += tst_f32_bits(got[i]) != tst_f32_bits(again[i]);
        unwritten += !isfinite(got[i]);
    }
    ck_assert_msg(diff == 0, "%s: %zu elements differ between two calls", what, diff);
    ck_assert_msg(unwritten == 0, "%s: %zu elements not written (still NaN) or not finite", what,
                  unwritten);
    got.resize(nc);
    return got;
}

/* The tile shapes every case runs with (V3_WGMMA_TILE_AUTO picks one). */
static const int k_tiles[4] = {V3_WGMMA_TILE_TALL, V3_WGMMA_TILE_SHORT, V3_WGMMA_TILE_NARROW,
                               V3_WGMMA_TILE_PAIRED};
static const char *const k_tile_names[5] = {"auto", "tall", "short", "narrow", "paired"};

/* Counts the elements of got whose bits differ from first's (the first
 * variant's result), or keeps got as first when first is empty. */
static size_t differs_from_first(std::vector<float> &first, const std::vector<float> &got)
{
    if (first.empty()) {
        first = got;
        return 0;
    }
    size_t diff = 0;
    for (size_t i = 0; i < got.size(); i++)
        diff += tst_f32_bits(got[i]) != tst_f32_bits(first[i]);
    return diff;
}

/* One layer on the device, each staging variant with each tile shape,
 * against the double reference; every variant must give the same bits (the
 * same k order per output, the same rounding of W). Returns the error. */
static double run_layer(const layer_case_t &c, float scale, tst_rng_t *r)
{
    const size_t na = (size_t)c.m * c.k, nw = (size_t)c.k * c.n, nc = (size_t)c.m * c.n;
    std::vector<float> a(na), w(nw), b(c.n);
    tst_rng_fill(r, a.data(), na, -scale, scale);
    const float ws = 1.0f / sqrtf((float)c.k);
    tst_rng_fill(r, w.data(), nw, -ws, ws);
    tst_rng_fill(r, b.data(), c.n, -0.5f, 0.5f);

    std::vector<float> guard_want;
    float *da = dev_from(a), *dw = dev_from(w), *db = dev_from(b),
          *dc = dev_poisoned(nc, guard_want);

    char what[128];
    std::vector<float> got, first;
    for (int staging = V3_WGMMA_STAGING_SCALAR; staging <= V3_WGMMA_STAGING_BLOCK4; staging++)
        for (int tile : k_tiles) {
            snprintf(what, sizeof what, "layer m %d n %d k %d, staging %d, %s tiles", c.m, c.n, c.k,
                     staging, k_tile_names[tile]);
            CUDA_OK(cudaMemset(dc, 0xFF, nc * sizeof(float))); /* NaN again */
            got = two_calls(
                [&](int pdl) {
                    return v3_wgmma_layer(da, dw, db, dc, c.m, c.n, c.k, c.elu, staging, pdl, tile,
                                          0);
                },
                dc, nc, guard_want, what);
            const size_t diff = differs_from_first(first, got);
            ck_assert_msg(diff == 0, "%s: %zu elements differ from staging 1, tall tiles", what,
                          diff);
        }

    double worst = 0, scale_ref = 0;
    size_t at = 0;
    std::vector<double> ref(c.n);
    for (int i = 0; i < c.m; i++) {
        for (int j = 0; j < c.n; j++)
            ref[j] = b[j];
        for (int k = 0; k < c.k; k++) {
            const double av = a[(size_t)i * c.k + k];
            const float *wr = &w[(size_t)k * c.n];
            for (int j = 0; j < c.n; j++)
                ref[j] += av * wr[j];
        }
        for (int j = 0; j < c.n; j++) {
            const double want = c.elu && ref[j] <= 0 ? expm1(ref[j]) : ref[j];
            const double e = fabs((double)got[(size_t)i * c.n + j] - want);
            if (e > worst)
                worst = e, at = (size_t)i * c.n + j;
            scale_ref = fmax(scale_ref, fabs(want));
        }
    }
    const double rel = worst / (scale_ref > 0 ? scale_ref : 1.0);
    printf("  wgmma layer m %5d n %3d k %3d %s, inputs ±%g: error %.2e (at %zu, limit %.0e); "
           "6 variants, same bits\n",
           c.m, c.n, c.k, c.elu ? "ELU " : "bias", (double)scale, rel, at, LAYER_TOL);
    fflush(stdout);
    ck_assert_msg(rel <= LAYER_TOL, "%s: error %.3g > %.0e", what, rel, LAYER_TOL);
    cudaFree(da), cudaFree(dw), cudaFree(db), cudaFree(dc);
    return rel;
}

/* One hidden gradient c [m, n] = (d [m, k] · wᵀ) ⊙ ELU'(y), w [n, k], on the
 * device with each tile shape (the same bits) against the double
 * reference; returns the error. d in ±scale, y = ELU(z) for z in ±zscale
 * (float, as a record holds it). */
static double run_hidden_grad(const layer_case_t &c, float scale, float zscale, tst_rng_t *r)
{
    const size_t nd = (size_t)c.m * c.k, nw = (size_t)c.n * c.k, nc = (size_t)c.m * c.n;
    std::vector<float> d(nd), w(nw), y(nc);
    tst_rng_fill(r, d.data(), nd, -scale, scale);
    const float ws = 1.0f / sqrtf((float)c.k);
    tst_rng_fill(r, w.data(), nw, -ws, ws);
    tst_rng_fill(r, y.data(), nc, -zscale, zscale);
    for (size_t i = 0; i < nc; i++)
        y[i] = y[i] > 0.0f ? y[i] : expm1f(y[i]);

    std::vector<float> guard_want;
    float *dd = dev_from(d), *dw = dev_from(w), *dy = dev_from(y),
          *dc = dev_poisoned(nc, guard_want);
    char what[128];
    std::vector<float> got, first;
    for (int tile : k_tiles) {
        snprintf(what, sizeof what, "hidden grad m %d n %d k %d, %s tiles", c.m, c.n, c.k,
                 k_tile_names[tile]);
        CUDA_OK(cudaMemset(dc, 0xFF, nc * sizeof(float))); /* NaN again */
        got = two_calls(
            [&](int pdl) {
                return v3_wgmma_hidden_grad(dd, dw, dy, dc, c.m, c.n, c.k, pdl, tile, 0);
            },
            dc, nc, guard_want, what);
        const size_t diff = differs_from_first(first, got);
        ck_assert_msg(diff == 0, "%s: %zu elements differ from tall tiles", what, diff);
    }

    double worst = 0, scale_ref = 0;
    size_t at = 0;
    for (int i = 0; i < c.m; i++) {
        const float *di = &d[(size_t)i * c.k];
        for (int j = 0; j < c.n; j++) {
            const float *wj = &w[(size_t)j * c.k];
            double acc = 0;
            for (int k = 0; k < c.k; k++)
                acc += (double)di[k] * wj[k];
            const double yv = y[(size_t)i * c.n + j];
            const double want = yv > 0 ? acc : acc * (1.0 + yv);
            const double e = fabs((double)got[(size_t)i * c.n + j] - want);
            if (e > worst)
                worst = e, at = (size_t)i * c.n + j;
            scale_ref = fmax(scale_ref, fabs(want));
        }
    }
    const double rel = worst / (scale_ref > 0 ? scale_ref : 1.0);
    printf("  wgmma hidden grad m %5d n %3d k %3d, d ±%g, z ±%g: error %.2e (at %zu, limit %.0e); "
           "%zu tile shapes, same bits\n",
           c.m, c.n, c.k, (double)scale, (double)zscale, rel, at, LAYER_TOL,
           sizeof k_tiles / sizeof k_tiles[0]);
    fflush(stdout);
    ck_assert_msg(rel <= LAYER_TOL, "%s: error %.3g > %.0e", what, rel, LAYER_TOL);
    cudaFree(dd), cudaFree(dw), cudaFree(dy), cudaFree(dc);
    return rel;
}

/* How many of a test's cases run: all, or with AUXTRUNK_CUDA_TEST_QUICK=1
 * (the sanitizer runs) the first 8, each list's cases up to 4,133 rows. */
static size_t cases_to_run(size_t all)
{
    const char *quick = getenv("AUXTRUNK_CUDA_TEST_QUICK");
    return quick && quick[0] == '1' && all > 8 ? 8 : all;
}

START_TEST(layer_matches_double_reference)
{
    prepare_or_fail();
    if (!v3_wgmma_available()) {
        printf("  no sm_90a device: the layer kernel does not run here\n");
        return;
    }
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0x71);
    static const layer_case_t cases[] = {
        {1, 256, 256, 1},     {97, 256, 256, 1},    {1024, 256, 256, 1}, {1024, 128, 256, 0},
        {4133, 256, 256, 1},  {300, 20, 36, 1},     {513, 132, 132, 0},  {129, 12, 4, 1},
        {40000, 256, 256, 1}, {20011, 128, 256, 0},
    };
    const size_t n_cases = cases_to_run(sizeof cases / sizeof cases[0]);
    double worst = 0;
    for (size_t i = 0; i < n_cases; i++)
        for (int big = 0; big < 2; big++)
            worst = fmax(worst, run_layer(cases[i], big ? 1e3f : 1.0f, &r));
    printf("  wgmma layer worst error %.2e (limit %.0e)\n", worst, LAYER_TOL);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}
END_TEST

START_TEST(hidden_grad_matches_double_reference)
{
    prepare_or_fail();
    if (!v3_wgmma_available()) {
        printf("  no sm_90a device: the hidden-gradient kernel does not run here\n");
        return;
    }
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0x72);
    /* {m, n, k}: dh2_pre is n = H2, k = AUX; dh1_pre n = H1, k = H2 */
    static const layer_case_t cases[] = {
        {1, 256, 128, 0},     {97, 256, 256, 0},    {1024, 256, 128, 0}, {4133, 256, 256, 0},
        {300, 20, 36, 0},     {513, 132, 132, 0},   {129, 12, 4, 0},     {4096, 256, 128, 0},
        {40000, 256, 256, 0}, {20011, 256, 128, 0},
    };
    const size_t n_cases = cases_to_run(sizeof cases / sizeof cases[0]);
    double worst = 0;
    for (size_t i = 0; i < n_cases; i++)
        for (int big = 0; big < 2; big++)
            worst =
                fmax(worst, run_hidden_grad(cases[i], big ? 1e3f : 1.0f, big ? 1e2f : 3.0f, &r));
    printf("  wgmma hidden grad worst error %.2e (limit %.0e)\n", worst, LAYER_TOL);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}
END_TEST

/* A topology and a batch: the weight-gradient and chain cases. */
typedef struct trunk_case {
    atk_dims_t d;
    int batch;
} trunk_case_t;

/* Norm-relative error of got against want (doubles), printed as name. */
static double rel_error(const float *got, const double *want, size_t n, const char *name,
                        const char *what)
{
    double worst = 0, scale_ref = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - want[i]));
        scale_ref = fmax(scale_ref, fabs(want[i]));
    }
    const double rel = worst / (scale_ref > 0 ? scale_ref : 1.0);
    printf(" %s %.2e", name, rel);
    ck_assert_msg(rel <= LAYER_TOL, "%s: %s error %.3g > %.0e", what, name, rel, LAYER_TOL);
    return rel;
}

/* The six gradients of one case on the device (overwrite, then accumulate
 * onto random gradients) against the double reference; returns the worst
 * error. The activations and the hidden gradients are random in ±scale: the
 * kernel does not relate them. */
static double run_weight_grads(const trunk_case_t &c, float scale, tst_rng_t *r)
{
    const atk_dims_t d = c.d;
    const int B = c.batch;
    const int ms[3] = {d.enc, d.h1, d.h2}, ns[3] = {d.h1, d.h2, d.aux};
    std::vector<float> host[6]; /* x, h1, h2 (a); dh1, dh2, dout (g) */
    float *dev[6];
    for (int q = 0; q < 3; q++) {
        host[q].resize((size_t)B * ms[q]);
        host[3 + q].resize((size_t)B * ns[q]);
    }
    for (int i = 0; i < 6; i++) {
        tst_rng_fill(r, host[i].data(), host[i].size(), -scale, scale);
        dev[i] = dev_from(host[i]);
    }
    const size_t P = AUXTRUNK_PARAM_COUNT(&d);
    const size_t off[6] = {AUXTRUNK_W1_OFFSET(&d), AUXTRUNK_B1_OFFSET(&d), AUXTRUNK_W2_OFFSET(&d),
                           AUXTRUNK_B2_OFFSET(&d), AUXTRUNK_W3_OFFSET(&d), AUXTRUNK_B3_OFFSET(&d)};
    std::vector<float> guard_want;
    float *dg = dev_poisoned(P, guard_want);
    const atk_grads_t g = {dg + off[0], dg + off[1], dg + off[2],
                           dg + off[3], dg + off[4], dg + off[5]};
    const size_t np = v3_wgmma_weight_grads_floats(d, B);
    ck_assert_msg(np >= P, "partials: %zu floats for P = %zu", np, P);
    float *dpart = NULL;
    CUDA_OK(cudaMalloc(&dpart, np * sizeof(float)));

    /* reference, flat layout: dW_q[i][j] = sum_b a_q[b][i] g_q[b][j], db_q[j] = sum_b g_q[b][j] */
    std::vector<double> ref(P, 0.0);
    for (int q = 0; q < 3; q++) {
        const float *a = host[q].data(), *gq = host[3 + q].data();
        double *dw = &ref[off[2 * q]], *db = &ref[off[2 * q + 1]];
        for (int b = 0; b < B; b++) {
            const float *ab = a + (size_t)b * ms[q], *gb = gq + (size_t)b * ns[q];
            for (int j = 0; j < ns[q]; j++)
                db[j] += gb[j];
            for (int i = 0; i < ms[q]; i++) {
                const double av = ab[i];
                double *row = dw + (size_t)i * ns[q];
                for (int j = 0; j < ns[q]; j++)
                    row[j] += av * gb[j];
            }
        }
    }

    static const char *const names[6] = {"dW1", "db1", "dW2", "db2", "dW3", "db3"};
    static const char *const kinds[4] = {"auto", "loads", "tma", "wide"};
    const size_t end[6] = {off[1], off[2], off[3], off[4], off[5], P};
    double worst = 0;
    std::vector<float> got_auto;
    /* AUTO (the kernel the batch picks: v3_wgmma_weight_grads), then each
     * kernel forced, with its own chunk plan; AUTO must give the bits of the
     * kernel it picks. */
    for (int kind = V3_WGMMA_WGRAD_AUTO; kind <= V3_WGMMA_WGRAD_WIDE; kind++) {
        char what[112];
        snprintf(what, sizeof what, "weight grads %d/%d/%d/%d B %d (%s)", d.enc, d.h1, d.h2, d.aux,
                 B, kinds[kind]);
        auto call = [&](int accumulate, int pdl) {
            return kind == V3_WGMMA_WGRAD_AUTO
                       ? v3_wgmma_weight_grads(d, dev[0], dev[1], dev[2], dev[5], dev[3], dev[4], B,
                                               &g, accumulate, dpart, pdl, 0)
                       : v3_wgmma_weight_grads_as(d, dev[0], dev[1], dev[2], dev[5], dev[3], dev[4],
                                                  B, &g, accumulate, dpart, 0, 2, kind, pdl, 0);
        };
        const std::vector<float> got =
            two_calls([&](int pdl) { return call(0, pdl); }, dg, P, guard_want, what);
        if (kind == V3_WGMMA_WGRAD_AUTO)
            got_auto = got;
        else if (kind == v3_wgmma_weight_grads_kernel(B)) {
            size_t diff = 0;
            for (size_t i = 0; i < P; i++)
                diff += tst_f32_bits(got[i]) != tst_f32_bits(got_auto[i]);
            ck_assert_msg(diff == 0,
                          "%s: %zu elements differ from the same kernel picked by the batch", what,
                          diff);
        }

        /* In two parts on two streams at once (v3_wgmma_weight_grads_of, as
     * fast mode's forked backward runs them), each part given only its own
     * operands: the same bits as one call, every element written. */
        cudaStream_t st[2];
        for (cudaStream_t &s : st)
            CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        static const int splits[2][2][2] = {{{0, 0}, {1, 2}}, {{0, 1}, {2, 2}}};
        for (const auto &sp : splits) {
            CUDA_OK(cudaMemset(dg, 0xFF, P * sizeof(float)));
            CUDA_OK(cudaDeviceSynchronize());
            for (int part = 0; part < 2; part++) {
                const int first = sp[part][0], last = sp[part][1];
                auto only = [&](int i) { return i % 3 >= first && i % 3 <= last ? dev[i] : NULL; };
                CUDA_OK(v3_wgmma_weight_grads_as(d, only(0), only(1), only(2), only(5), only(3),
                                                 only(4), B, &g, 0, dpart, first, last, kind, 0,
                                                 st[part]));
            }
            CUDA_OK(cudaDeviceSynchronize());
            std::vector<float> split(P);
            CUDA_OK(cudaMemcpy(split.data(), dg, P * sizeof(float), cudaMemcpyDeviceToHost));
            size_t diff = 0;
            for (size_t i = 0; i < P; i++)
                diff += tst_f32_bits(split[i]) != tst_f32_bits(got[i]);
            ck_assert_msg(diff == 0,
                          "%s: gradients %d-%d and %d-%d on two streams: %zu elements "
                          "differ from one call",
                          what, sp[0][0], sp[0][1], sp[1][0], sp[1][1], diff);
        }
        for (cudaStream_t s : st)
            CUDA_OK(cudaStreamDestroy(s));
        printf("  wgmma weight grads %3d/%3d/%3d/%3d B %5d, inputs ±%g, %-5s:", d.enc, d.h1, d.h2,
               d.aux, B, (double)scale, kinds[kind]);
        for (int i = 0; i < 6; i++)
            worst =
                fmax(worst, rel_error(&got[off[i]], &ref[off[i]], end[i] - off[i], names[i], what));

        /* accumulate: g0 + result */
        std::vector<float> g0(P);
        tst_rng_fill(r, g0.data(), P, -scale, scale);
        CUDA_OK(cudaMemcpy(dg, g0.data(), P * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_OK(call(1, 0));
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<float> acc(P);
        CUDA_OK(cudaMemcpy(acc.data(), dg, P * sizeof(float), cudaMemcpyDeviceToHost));
        std::vector<double> ref_acc(ref);
        for (size_t i = 0; i < P; i++)
            ref_acc[i] += g0[i];
        printf(" | accumulate:");
        for (int i = 0; i < 6; i++)
            worst = fmax(
                worst, rel_error(&acc[off[i]], &ref_acc[off[i]], end[i] - off[i], names[i], what));
        printf(" (limit %.0e)\n", LAYER_TOL);
        fflush(stdout);
    }
    for (int i = 0; i < 6; i++)
        cudaFree(dev[i]);
    cudaFree(dg), cudaFree(dpart);
    return worst;
}

START_TEST(weight_grads_match_double_reference)
{
    prepare_or_fail();
    if (!v3_wgmma_available()) {
        printf("  no sm_90a device: the weight-gradient kernel does not run here\n");
        return;
    }
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0x73);
    /* {enc, h1, h2, aux}, batch: the production topology at 1, 37, one
     * chunk and many, either side of the last short-chunk batch (2,048,
     * 2,049); widths past a 128-wide tile (132, 260, 136, 20, 12, 4) */
    static const trunk_case_t cases[] = {
        {{256, 256, 256, 128}, 1},     {{256, 256, 256, 128}, 37},   {{36, 132, 20, 12}, 300},
        {{132, 260, 136, 4}, 4133},    {{256, 256, 256, 128}, 4096}, {{256, 256, 256, 128}, 2048},
        {{4, 8, 12, 16}, 129},         {{256, 256, 256, 128}, 2049}, {{256, 256, 256, 128}, 1024},
        {{256, 256, 256, 128}, 256},   {{256, 256, 256, 128}, 6700}, {{256, 256, 256, 128}, 40000},
        {{256, 256, 256, 128}, 20011},
    };
    const size_t n_cases = cases_to_run(sizeof cases / sizeof cases[0]);
    double worst = 0;
    for (size_t i = 0; i < n_cases; i++)
        for (int big = 0; big < 2; big++)
            worst = fmax(worst, run_weight_grads(cases[i], big ? 1e2f : 1.0f, &r));
    printf("  wgmma weight grads worst error %.2e (limit %.0e)\n", worst, LAYER_TOL);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}
END_TEST

/* Bits of got against want (same size), as a count of differing elements. */
static size_t bits_differ(const std::vector<float> &got, const std::vector<float> &want)
{
    size_t diff = 0;
    for (size_t i = 0; i < got.size(); i++)
        diff += tst_f32_bits(got[i]) != tst_f32_bits(want[i]);
    return diff;
}

/* dh2_pre with dW3 and db3 in one launch (v3_wgmma_hidden_grad_dw3, then
 * v3_wgmma_dw3_sum): dh2, dW3 and db3 against the double reference, each
 * output poisoned, every element written, the guards untouched, a second
 * call the same bits (two_calls), dh2 the bits of the narrow hidden-gradient
 * launch; then accumulate onto random gradients. */
static double run_dh2_dw3(atk_dims_t d, int B, float scale, tst_rng_t *r)
{
    const int n = d.h2, k = d.aux;
    const size_t nd = (size_t)B * k, nw = (size_t)n * k, nc = (size_t)B * n, n3 = nw + k;
    std::vector<float> dout(nd), w(nw), y(nc);
    tst_rng_fill(r, dout.data(), nd, -scale, scale);
    const float ws = 1.0f / sqrtf((float)k);
    tst_rng_fill(r, w.data(), nw, -ws, ws);
    tst_rng_fill(r, y.data(), nc, -3.0f, 3.0f);
    for (size_t i = 0; i < nc; i++)
        y[i] = y[i] > 0.0f ? y[i] : expm1f(y[i]);
    std::vector<float> gw_dh2, gw_3;
    float *dd = dev_from(dout), *dw = dev_from(w), *dy = dev_from(y);
    float *dc = dev_poisoned(nc, gw_dh2), *d3 = dev_poisoned(n3, gw_3), *dpart = NULL;
    const size_t np = v3_wgmma_dw3_partials_floats(d);
    ck_assert_msg(np >= n3, "partials: %zu floats", np);
    CUDA_OK(cudaMalloc(&dpart, np * sizeof(float)));
    atk_grads_t g = {};
    g.dw3 = d3, g.db3 = d3 + nw;

    char what[112];
    snprintf(what, sizeof what, "dh2 + dW3 h2 %d aux %d B %d, dout ±%g", n, k, B, (double)scale);
    /* the launch with its partials summed after it; two_calls checks dh2,
     * then dW3 and db3 */
    auto call = [&](int pdl) {
        cudaError_t e = v3_wgmma_hidden_grad_dw3(d, dd, dw, dy, dc, B, dpart, pdl, 0);
        return e != cudaSuccess ? e : v3_wgmma_dw3_sum(d, B, &g, 0, dpart, 1, 0);
    };
    const std::vector<float> got = two_calls(call, dc, nc, gw_dh2, what);
    const std::vector<float> got3 = two_calls(call, d3, n3, gw_3, what);

    /* dh2: the bits of the hidden-gradient launch on narrow tiles (the same
     * k order) */
    {
        std::vector<float> gw;
        float *dn = dev_poisoned(nc, gw);
        CUDA_OK(v3_wgmma_hidden_grad(dd, dw, dy, dn, B, n, k, 0, V3_WGMMA_TILE_NARROW, 0));
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<float> narrow(nc);
        CUDA_OK(cudaMemcpy(narrow.data(), dn, nc * sizeof(float), cudaMemcpyDeviceToHost));
        const size_t diff = bits_differ(got, narrow);
        ck_assert_msg(diff == 0, "%s: dh2 differs from the narrow launch's in %zu elements", what,
                      diff);
        cudaFree(dn);
    }
    std::vector<double> ref_dh2(nc), ref3(n3, 0.0);
    for (int b = 0; b < B; b++) {
        const float *db_ = &dout[(size_t)b * k];
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int q = 0; q < k; q++)
                acc += (double)db_[q] * w[(size_t)j * k + q];
            const double yv = y[(size_t)b * n + j];
            ref_dh2[(size_t)b * n + j] = yv > 0 ? acc : acc * (1.0 + yv);
            for (int q = 0; q < k; q++)
                ref3[(size_t)j * k + q] += yv * db_[q];
        }
        for (int q = 0; q < k; q++)
            ref3[nw + q] += db_[q];
    }
    printf("  wgmma dh2 + dW3 h2 %3d aux %3d B %5d, dout ±%g:", n, k, B, (double)scale);
    double worst = rel_error(got.data(), ref_dh2.data(), nc, "dh2", what);
    worst = fmax(worst, rel_error(got3.data(), ref3.data(), nw, "dW3", what));
    worst = fmax(worst, rel_error(&got3[nw], &ref3[nw], k, "db3", what));

    /* accumulate: g0 + result */
    std::vector<float> g0(n3);
    tst_rng_fill(r, g0.data(), n3, -scale, scale);
    CUDA_OK(cudaMemcpy(d3, g0.data(), n3 * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(v3_wgmma_hidden_grad_dw3(d, dd, dw, dy, dc, B, dpart, 0, 0));
    CUDA_OK(v3_wgmma_dw3_sum(d, B, &g, 1, dpart, 1, 0));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> acc(n3);
    CUDA_OK(cudaMemcpy(acc.data(), d3, n3 * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n3; i++)
        ref3[i] += g0[i];
    printf(" | accumulate:");
    worst = fmax(worst, rel_error(acc.data(), ref3.data(), nw, "dW3", what));
    worst = fmax(worst, rel_error(&acc[nw], &ref3[nw], k, "db3", what));
    printf(" (limit %.0e)\n", LAYER_TOL);
    fflush(stdout);
    cudaFree(dd), cudaFree(dw), cudaFree(dy), cudaFree(dc), cudaFree(d3), cudaFree(dpart);
    return worst;
}

START_TEST(dh2_dw3_matches_double_reference)
{
    prepare_or_fail();
    if (!v3_wgmma_available()) {
        printf("  no sm_90a device: the fused dh2 + dW3 kernel does not run here\n");
        return;
    }
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0x76);
    /* the production widths at one row, one tile, batches with row tails
     * and many tiles per block; h2 past a 64-column slice, aux past a
     * 32-float slab, aux 128 at h2 260 */
    static const trunk_case_t cases[] = {
        {{256, 256, 256, 128}, 1},     {{256, 256, 256, 128}, 129},  {{4, 8, 20, 12}, 300},
        {{4, 8, 260, 128}, 4133},      {{4, 8, 136, 4}, 1000},       {{256, 256, 256, 128}, 4096},
        {{256, 256, 256, 128}, 20011}, {{256, 256, 256, 128}, 65536},
    };
    const size_t n_cases = cases_to_run(sizeof cases / sizeof cases[0]);
    double worst = 0;
    for (size_t i = 0; i < n_cases; i++)
        for (int big = 0; big < 2; big++)
            worst = fmax(worst, run_dh2_dw3(cases[i].d, cases[i].batch, big ? 1e2f : 1.0f, &r));
    printf("  wgmma dh2 + dW3 worst error %.2e (limit %.0e)\n", worst, LAYER_TOL);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}
END_TEST

/* The outputs of a chain launch: nb buffers (sizes n[i]), poisoned with NaN
 * and followed by guard floats; call runs the chain into them. Runs it
 * twice (poisoned again in between) and checks the guards, that every
 * element was written (finite) and that the two calls gave the same bits;
 * returns the first call's results. */
template <class F>
static std::vector<std::vector<float>> chain_twice(F call, float *const *dst, const size_t *n,
                                                   int nb, const std::vector<float> &guard_want,
                                                   const char *what)
{
    std::vector<std::vector<float>> got(nb), again(nb);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < nb; i++)
            CUDA_OK(cudaMemset(dst[i], 0xFF, n[i] * sizeof(float)));
        CUDA_OK(call());
        CUDA_OK(cudaDeviceSynchronize());
        for (int i = 0; i < nb; i++) {
            std::vector<float> &v = pass ? again[i] : got[i];
            v.resize(n[i] + GUARD);
            CUDA_OK(cudaMemcpy(v.data(), dst[i], v.size() * sizeof(float), cudaMemcpyDeviceToHost));
        }
    }
    for (int i = 0; i < nb; i++) {
        for (int j = 0; j < GUARD; j++)
            ck_assert_msg(tst_f32_bits(got[i][n[i] + j]) == tst_f32_bits(guard_want[j]),
                          "%s: output %d: wrote past its end (guard float %d)", what, i, j);
        size_t diff = 0, unwritten = 0;
        for (size_t j = 0; j < n[i]; j++) {
            diff += tst_f32_bits(got[i][j]) != tst_f32_bits(again[i][j]);
            unwritten += !isfinite(got[i][j]);
        }
        ck_assert_msg(diff == 0, "%s: output %d: %zu elements differ between two calls", what, i,
                      diff);
        ck_assert_msg(unwritten == 0, "%s: output %d: %zu elements not written or not finite", what,
                      i, unwritten);
        got[i].resize(n[i]);
    }
    return got;
}

/* One case of the chain kernel: the forward (v3_wgmma_forward) against the
 * three v3_wgmma_layer launches it replaces, and the hidden gradients
 * (v3_wgmma_hidden_grads) against the two v3_wgmma_hidden_grad launches, bit
 * for bit (the layer launches are checked against the double reference
 * above); the records the backward reads are the forward's. Inputs in
 * ±scale. */
static void run_chain(const trunk_case_t &c, float scale, tst_rng_t *r)
{
    const atk_dims_t d = c.d;
    const int B = c.batch;
    const int ks[3] = {d.enc, d.h1, d.h2}, ns[3] = {d.h1, d.h2, d.aux};
    std::vector<float> x((size_t)B * d.enc), dout((size_t)B * d.aux), w[3], b[3];
    tst_rng_fill(r, x.data(), x.size(), -scale, scale);
    tst_rng_fill(r, dout.data(), dout.size(), -scale, scale);
    float *dw[3], *db[3];
    for (int l = 0; l < 3; l++) {
        w[l].resize((size_t)ks[l] * ns[l]);
        b[l].resize(ns[l]);
        const float ws = 1.0f / sqrtf((float)ks[l]);
        tst_rng_fill(r, w[l].data(), w[l].size(), -ws, ws);
        tst_rng_fill(r, b[l].data(), b[l].size(), -0.5f, 0.5f);
        dw[l] = dev_from(w[l]), db[l] = dev_from(b[l]);
    }
    const atk_params_t p = {dw[0], db[0], dw[1], db[1], dw[2], db[2]};
    float *dx = dev_from(x), *ddout = dev_from(dout), *scratch;
    CUDA_OK(cudaMalloc(&scratch, v3_wgmma_chain_scratch_floats(d) * sizeof(float)));

    std::vector<float> guard_want;
    const size_t nf[3] = {(size_t)B * d.h1, (size_t)B * d.h2, (size_t)B * d.aux};
    const size_t nh[2] = {(size_t)B * d.h2, (size_t)B * d.h1};
    float *fwd[3], *lay[3], *hid[2], *two[2];
    for (int l = 0; l < 3; l++)
        fwd[l] = dev_poisoned(nf[l], guard_want), lay[l] = dev_poisoned(nf[l], guard_want);
    for (int i = 0; i < 2; i++)
        hid[i] = dev_poisoned(nh[i], guard_want), two[i] = dev_poisoned(nh[i], guard_want);

    /* the layer launches: the forward, then the hidden gradients on its records */
    const float *in[3] = {dx, lay[0], lay[1]};
    for (int l = 0; l < 3; l++)
        CUDA_OK(v3_wgmma_layer(in[l], dw[l], db[l], lay[l], B, ns[l], ks[l], l < 2,
                               V3_WGMMA_STAGING_BLOCK4, 0, V3_WGMMA_TILE_AUTO, 0));
    CUDA_OK(v3_wgmma_hidden_grad(ddout, dw[2], lay[1], two[0], B, d.h2, d.aux, 0,
                                 V3_WGMMA_TILE_AUTO, 0));
    CUDA_OK(v3_wgmma_hidden_grad(two[0], dw[1], lay[0], two[1], B, d.h1, d.h2, 0,
                                 V3_WGMMA_TILE_AUTO, 0));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> want_f[3], want_h[2];
    for (int l = 0; l < 3; l++) {
        want_f[l].resize(nf[l]);
        CUDA_OK(
            cudaMemcpy(want_f[l].data(), lay[l], nf[l] * sizeof(float), cudaMemcpyDeviceToHost));
    }
    for (int i = 0; i < 2; i++) {
        want_h[i].resize(nh[i]);
        CUDA_OK(
            cudaMemcpy(want_h[i].data(), two[i], nh[i] * sizeof(float), cudaMemcpyDeviceToHost));
    }

    /* each tile shape of the chain against them */
    static const int tiles[2] = {V3_WGMMA_CHAIN_TILE_64, V3_WGMMA_CHAIN_TILE_128};
    for (int ti = 0; ti < 2; ti++) {
        const int tile = tiles[ti];
        char what[160];
        snprintf(what, sizeof what, "chain forward (%d-row tiles) %d/%d/%d/%d B %d", tile, d.enc,
                 d.h1, d.h2, d.aux, B);
        const auto chain = chain_twice(
            [&]() {
                return v3_wgmma_forward(d, &p, dx, B, fwd[0], fwd[1], fwd[2], scratch, tile, 0);
            },
            fwd, nf, 3, guard_want, what);
        for (int l = 0; l < 3; l++) {
            const size_t diff = bits_differ(chain[l], want_f[l]);
            ck_assert_msg(diff == 0, "%s: %zu elements of %s differ from the layer launches", what,
                          diff,
                          l == 0   ? "h1"
                          : l == 1 ? "h2"
                                   : "out");
        }
        snprintf(what, sizeof what, "chain hidden grads (%d-row tiles) %d/%d/%d/%d B %d", tile,
                 d.enc, d.h1, d.h2, d.aux, B);
        const auto grads = chain_twice(
            [&]() {
                return v3_wgmma_hidden_grads(d, &p, ddout, fwd[0], fwd[1], B, hid[0], hid[1],
                                             scratch, tile, 0);
            },
            hid, nh, 2, guard_want, what);
        for (int i = 0; i < 2; i++) {
            const size_t diff = bits_differ(grads[i], want_h[i]);
            ck_assert_msg(diff == 0, "%s: %zu elements of %s differ from the layer launches", what,
                          diff, i == 0 ? "dh2_pre" : "dh1_pre");
        }
    }
    printf("  wgmma chain %3d/%3d/%3d/%3d B %5d, inputs ±%g, 64- and 128-row tiles: forward (h1, "
           "h2, out) and hidden gradients (dh2_pre, dh1_pre) the same bits as the layer "
           "launches\n",
           d.enc, d.h1, d.h2, d.aux, B, (double)scale);
    fflush(stdout);
    for (int l = 0; l < 3; l++)
        cudaFree(dw[l]), cudaFree(db[l]), cudaFree(fwd[l]), cudaFree(lay[l]);
    for (int i = 0; i < 2; i++)
        cudaFree(hid[i]), cudaFree(two[i]);
    cudaFree(dx), cudaFree(ddout), cudaFree(scratch);
}

START_TEST(chain_matches_layer_launches)
{
    prepare_or_fail();
    if (!v3_wgmma_available()) {
        printf("  no sm_90a device: the chain kernel does not run here\n");
        return;
    }
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0x74);
    /* {enc, h1, h2, aux}, batch: the production topology at one row, one
     * 64-row tile and past it, fast mode's batches (1,024 to 40,000: one to
     * five 64-row tiles per SM, up to three 128-row ones); widths with tails past a 32-float slab and past
     * 128 columns (132, 200), narrow ones (4, 12, 20); several tiles per
     * block where the last layer's A has fewer slabs than the first A (the
     * next tile's A then streams in mostly after the last layer's loop: 60
     * against 100 and 256, one slab against one) */
    static const trunk_case_t cases[] = {
        {{256, 256, 256, 128}, 1},     {{256, 256, 256, 128}, 65},    {{36, 132, 20, 12}, 300},
        {{100, 200, 60, 256}, 129},    {{4, 8, 12, 4}, 64},           {{256, 256, 256, 128}, 1024},
        {{100, 200, 60, 256}, 20000},  {{4, 8, 12, 4}, 9000},         {{132, 256, 132, 128}, 1000},
        {{256, 256, 256, 128}, 4113},  {{256, 256, 256, 128}, 16384}, {{256, 256, 256, 128}, 20011},
        {{256, 256, 256, 128}, 40000},
    };
    const size_t n_cases = cases_to_run(sizeof cases / sizeof cases[0]);
    for (size_t i = 0; i < n_cases; i++)
        for (int big = 0; big < 2; big++)
            run_chain(cases[i], big ? 1e2f : 1.0f, &r);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}
END_TEST

/* Fast mode's backward with its second stream (v3_fast_backward_forked:
 * in a graph, dW2, dW3 on side beside dh1_pre, dW1; eager, one stream),
 * eager on a stream of its own and replayed from a graph captured on it,
 * against v3_fast_backward on one stream: the same bits in all six
 * gradients, every element written (the gradients NaN-poisoned before each
 * call), accumulate included. The records are ELU values of either sign;
 * inputs in ±1. */
static void run_forked_backward(atk_dims_t d, int B, tst_rng_t *r)
{
    const int ks[3] = {d.enc, d.h1, d.h2}, ns[3] = {d.h1, d.h2, d.aux};
    std::vector<float> host[4]; /* x, h1, h2, dout */
    const size_t n_in[4] = {(size_t)B * d.enc, (size_t)B * d.h1, (size_t)B * d.h2,
                            (size_t)B * d.aux};
    float *dev[4], *dw[3], *db[3];
    for (int i = 0; i < 4; i++) {
        host[i].resize(n_in[i]);
        tst_rng_fill(r, host[i].data(), n_in[i], i == 1 || i == 2 ? -0.9f : -1.0f, 1.0f);
        dev[i] = dev_from(host[i]);
    }
    for (int l = 0; l < 3; l++) {
        std::vector<float> w((size_t)ks[l] * ns[l]), b(ns[l]);
        const float ws = 1.0f / sqrtf((float)ks[l]);
        tst_rng_fill(r, w.data(), w.size(), -ws, ws);
        tst_rng_fill(r, b.data(), b.size(), -0.5f, 0.5f);
        dw[l] = dev_from(w), db[l] = dev_from(b);
    }
    const atk_params_t p = {dw[0], db[0], dw[1], db[1], dw[2], db[2]};
    const size_t P = AUXTRUNK_PARAM_COUNT(&d);
    const size_t off[6] = {AUXTRUNK_W1_OFFSET(&d), AUXTRUNK_B1_OFFSET(&d), AUXTRUNK_W2_OFFSET(&d),
                           AUXTRUNK_B2_OFFSET(&d), AUXTRUNK_W3_OFFSET(&d), AUXTRUNK_B3_OFFSET(&d)};
    float *dg = NULL, *ws = NULL;
    CUDA_OK(cudaMalloc(&dg, P * sizeof(float)));
    CUDA_OK(cudaMalloc(&ws, v3_fast_workspace_floats(d, B) * sizeof(float)));
    const atk_grads_t g = {dg + off[0], dg + off[1], dg + off[2],
                           dg + off[3], dg + off[4], dg + off[5]};
    std::vector<float> g0(P);
    tst_rng_fill(r, g0.data(), P, -1.0f, 1.0f);

    cudaStream_t s, side;
    cudaEvent_t fork, join;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDA_OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

    /* how: 0 one stream, 1 forked eager, 2 forked from a graph */
    auto run = [&](int how, int accumulate) {
        if (accumulate)
            CUDA_OK(cudaMemcpy(dg, g0.data(), P * sizeof(float), cudaMemcpyHostToDevice));
        else
            CUDA_OK(cudaMemset(dg, 0xFF, P * sizeof(float))); /* NaN */
        auto call = [&]() {
            return how == 0 ? v3_fast_backward(d, &p, dev[0], dev[1], dev[2], dev[3], B, &g,
                                               accumulate, ws, s)
                            : v3_fast_backward_forked(d, &p, dev[0], dev[1], dev[2], dev[3], B, &g,
                                                      accumulate, ws, s, side, fork, join);
        };
        if (how < 2) {
            CUDA_OK(call());
        } else {
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            const cudaError_t e = call();
            CUDA_OK(cudaStreamEndCapture(s, &graph));
            CUDA_OK(e);
            CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
            CUDA_OK(cudaGraphLaunch(exec, s));
            CUDA_OK(cudaStreamSynchronize(s));
            CUDA_OK(cudaGraphExecDestroy(exec));
            CUDA_OK(cudaGraphDestroy(graph));
        }
        CUDA_OK(cudaStreamSynchronize(s));
        std::vector<float> got(P);
        CUDA_OK(cudaMemcpy(got.data(), dg, P * sizeof(float), cudaMemcpyDeviceToHost));
        return got;
    };
    /* where the backward's first launch computes dW3 and db3
     * (V3_WGMMA_DW3_MIN_BATCH), those against the double reference too */
    const bool fused = V3_WGMMA_DW3 && B >= V3_WGMMA_DW3_MIN_BATCH && v3_wgmma_dw3_supported(d);
    const size_t n3 = (size_t)d.h2 * d.aux + d.aux;
    std::vector<double> ref3(fused ? n3 : 0, 0.0);
    for (int b = 0; fused && b < B; b++) {
        const float *h2b = &host[2][(size_t)b * d.h2], *gb = &host[3][(size_t)b * d.aux];
        for (int i = 0; i < d.h2; i++)
            for (int j = 0; j < d.aux; j++)
                ref3[(size_t)i * d.aux + j] += (double)h2b[i] * gb[j];
        for (int j = 0; j < d.aux; j++)
            ref3[(size_t)d.h2 * d.aux + j] += gb[j];
    }
    static const char *const hows[3] = {"one stream", "eager with a side stream",
                                        "forked graph replay"};
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        const std::vector<float> want = run(0, accumulate);
        size_t unwritten = 0;
        for (float v : want)
            unwritten += !isfinite(v);
        ck_assert_msg(unwritten == 0, "fast backward B %d: %zu gradient elements not written", B,
                      unwritten);
        if (fused) {
            char what[64];
            snprintf(what, sizeof what, "fast backward B %d%s", B,
                     accumulate ? " (accumulate)" : "");
            std::vector<double> r3(ref3);
            for (size_t i = 0; accumulate && i < n3; i++)
                r3[i] += g0[off[4] + i];
            printf("  fast backward B %5d%s, dW3 in the dh2_pre launch:", B,
                   accumulate ? " (accumulate)" : "");
            rel_error(&want[off[4]], r3.data(), n3 - d.aux, "dW3", what);
            rel_error(&want[off[5]], &r3[n3 - d.aux], d.aux, "db3", what);
            printf(" (limit %.0e)\n", LAYER_TOL);
        }
        for (int how = 1; how < 3; how++) {
            const size_t diff = bits_differ(run(how, accumulate), want);
            ck_assert_msg(diff == 0, "fast backward B %d%s, %s: %zu elements differ from one stream",
                          B, accumulate ? " (accumulate)" : "", hows[how], diff);
        }
    }
    printf("  fast backward %3d/%3d/%3d/%3d B %5d: forked graph replay and eager call with a side "
           "stream the same bits as one stream, accumulate too\n",
           d.enc, d.h1, d.h2, d.aux, B);
    fflush(stdout);
    CUDA_OK(cudaEventDestroy(fork));
    CUDA_OK(cudaEventDestroy(join));
    CUDA_OK(cudaStreamDestroy(side));
    CUDA_OK(cudaStreamDestroy(s));
    for (int i = 0; i < 4; i++)
        cudaFree(dev[i]);
    for (int l = 0; l < 3; l++)
        cudaFree(dw[l]), cudaFree(db[l]);
    cudaFree(dg), cudaFree(ws);
}

/* Fast mode's tile for a whole call (v3_wgmma_call_tile): paired only
 * where every launch would be narrow and some grid takes more than half of
 * the multiprocessors; on the H200's 132, from B = 2,049 to 4,224 at the
 * production widths. */
START_TEST(call_tile_follows_its_rule)
{
    prepare_or_fail();
    if (!v3_wgmma_available()) {
        printf("  no sm_90a device: no tile is picked here\n");
        return;
    }
    int dev = 0, sms = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int fwd[3] = {256, 256, 128}, bwd[2] = {256, 256};
    /* one row tile: 4 narrow blocks, never more than half of a GPU's SMs */
    ck_assert_int_eq(v3_wgmma_call_tile(1, fwd, 3), V3_WGMMA_TILE_AUTO);
    /* tall tiles: more than half of the SMs busy with tall tiles already */
    ck_assert_int_eq(v3_wgmma_call_tile(128 * sms, fwd, 3), V3_WGMMA_TILE_AUTO);
    ck_assert_int_eq(v3_wgmma_call_tile(0, fwd, 3), V3_WGMMA_TILE_AUTO);
    ck_assert_int_eq(v3_wgmma_call_tile(64, fwd, 0), V3_WGMMA_TILE_AUTO);
    ck_assert_int_eq(v3_wgmma_call_tile(64, NULL, 3), V3_WGMMA_TILE_AUTO);
    if (sms == 132) {
        static const int at[][2] = {{1024, V3_WGMMA_TILE_AUTO},   {2048, V3_WGMMA_TILE_AUTO},
                                    {2049, V3_WGMMA_TILE_PAIRED}, {3000, V3_WGMMA_TILE_PAIRED},
                                    {4096, V3_WGMMA_TILE_PAIRED}, {4224, V3_WGMMA_TILE_PAIRED},
                                    {4225, V3_WGMMA_TILE_AUTO},   {8192, V3_WGMMA_TILE_AUTO}};
        for (const auto &a : at) {
            ck_assert_msg(v3_wgmma_call_tile(a[0], fwd, 3) == a[1], "forward at B %d", a[0]);
            ck_assert_msg(v3_wgmma_call_tile(a[0], bwd, 2) == a[1], "backward at B %d", a[0]);
        }
        printf("  call tile: paired from B = 2,049 to 4,224 on %d SMs, as documented\n", sms);
    }
}
END_TEST

START_TEST(forked_backward_matches_one_stream)
{
    prepare_or_fail();
    CUDA_OK(v3_fast_prepare());
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0x75);
    /* below the wgmma backward (no fork), its first batch, 4,096, a batch
     * that is no multiple of a chunk, 16,384, past V3_WGMMA_DW3_MIN_BATCH
     * (dW3 in the dh2_pre launch where V3_WGMMA_DW3 is 1); widths with
     * tails */
    static const trunk_case_t cases[] = {
        {{256, 256, 256, 128}, 512},   {{256, 256, 256, 128}, 1024}, {{256, 256, 256, 128}, 4096},
        {{132, 260, 136, 20}, 3001},   {{256, 256, 256, 128}, 6700}, {{256, 256, 256, 128}, 16384},
        {{256, 256, 256, 128}, V3_WGMMA_DW3_MIN_BATCH + 1},
    };
    const size_t n_cases = cases_to_run(sizeof cases / sizeof cases[0]);
    for (size_t i = 0; i < n_cases; i++)
        run_forked_backward(cases[i].d, cases[i].batch, &r);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}
END_TEST

START_TEST(outside_the_domain_is_refused)
{
    prepare_or_fail();
    float *buf = NULL;
    CUDA_OK(cudaMalloc(&buf, 1 << 20));
    const float *w = buf, *b = buf;
    /* k > 256, n or k not a multiple of 4, a misaligned, c misaligned, m = 0 */
    ck_assert(!v3_wgmma_layer_supported(16, 256, 260));
    ck_assert(!v3_wgmma_layer_supported(16, 254, 256));
    ck_assert(!v3_wgmma_layer_supported(16, 256, 6));
    ck_assert(!v3_wgmma_layer_supported(0, 256, 256));
    ck_assert_int_eq(
        v3_wgmma_layer(buf, w, b, buf + 4096, 16, 256, 260, 1, 1, 0, V3_WGMMA_TILE_AUTO, 0),
        cudaErrorInvalidValue);
    ck_assert_int_eq(
        v3_wgmma_layer(buf + 1, w, b, buf + 4096, 16, 256, 256, 1, 1, 0, V3_WGMMA_TILE_AUTO, 0),
        cudaErrorInvalidValue);
    ck_assert_int_eq(
        v3_wgmma_layer(buf, w, b, buf + 4097, 16, 256, 256, 1, 1, 0, V3_WGMMA_TILE_AUTO, 0),
        cudaErrorInvalidValue);
    ck_assert_int_eq(
        v3_wgmma_layer(buf, w, b, buf + 4096, 0, 256, 256, 1, 1, 0, V3_WGMMA_TILE_AUTO, 0),
        cudaErrorInvalidValue);
    /* an unknown staging variant; variant 2 with w not 16-byte aligned */
    ck_assert_int_eq(
        v3_wgmma_layer(buf, w, b, buf + 4096, 16, 256, 256, 1, 3, 0, V3_WGMMA_TILE_AUTO, 0),
        cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_layer(buf, w + 1, b, buf + 4096, 16, 256, 256, 1,
                                    V3_WGMMA_STAGING_BLOCK4, 0, V3_WGMMA_TILE_AUTO, 0),
                     cudaErrorInvalidValue);
    /* an unknown tile shape */
    ck_assert_int_eq(v3_wgmma_layer(buf, w, b, buf + 4096, 16, 256, 256, 1, 1, 0,
                                    V3_WGMMA_TILE_PAIRED + 1, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_hidden_grad(buf, w, buf + 8192, buf + 4096, 16, 256, 256, 0, -1, 0),
                     cudaErrorInvalidValue);
    /* the hidden gradient: k > 256, n not a multiple of 4, each pointer
     * misaligned or null in turn */
    float *c = buf + 4096;
    const float *y = buf + 8192;
    ck_assert_int_eq(v3_wgmma_hidden_grad(buf, w, y, c, 16, 256, 260, 0, V3_WGMMA_TILE_AUTO, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_hidden_grad(buf, w, y, c, 16, 254, 256, 0, V3_WGMMA_TILE_AUTO, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_hidden_grad(buf + 1, w, y, c, 16, 256, 256, 0, V3_WGMMA_TILE_AUTO, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_hidden_grad(buf, w + 1, y, c, 16, 256, 256, 0, V3_WGMMA_TILE_AUTO, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_hidden_grad(buf, w, y + 2, c, 16, 256, 256, 0, V3_WGMMA_TILE_AUTO, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_hidden_grad(buf, w, y, c + 1, 16, 256, 256, 0, V3_WGMMA_TILE_AUTO, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_hidden_grad(buf, w, NULL, c, 16, 256, 256, 0, V3_WGMMA_TILE_AUTO, 0),
                     cudaErrorInvalidValue);
    /* the chain: a width past 256 or not a multiple of 4, batch 0, a
     * misaligned or null pointer; nothing launched */
    {
        const atk_dims_t prod = {256, 256, 256, 128}, wide = {260, 256, 256, 128},
                         odd = {256, 256, 254, 128};
        const atk_params_t cp = {buf, buf, buf, buf, buf, buf},
                           cmis = {buf, buf, buf + 1, buf, buf, buf};
        float *o = buf + 4096;
        ck_assert(v3_wgmma_chain_supported(prod));
        ck_assert(!v3_wgmma_chain_supported(wide));
        ck_assert(!v3_wgmma_chain_supported(odd));
        ck_assert_int_eq(
            v3_wgmma_forward(wide, &cp, buf, 16, o, o, o, o, V3_WGMMA_CHAIN_TILE_AUTO, 0),
            cudaErrorInvalidValue);
        ck_assert_int_eq(
            v3_wgmma_forward(prod, &cp, buf, 0, o, o, o, o, V3_WGMMA_CHAIN_TILE_AUTO, 0),
            cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_forward(prod, &cp, buf, 16, o, o, o, o, 32, 0),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_hidden_grads(prod, &cp, buf, buf, buf, 16, o, o, o, 1, 0),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(
            v3_wgmma_forward(prod, &cp, buf + 1, 16, o, o, o, o, V3_WGMMA_CHAIN_TILE_AUTO, 0),
            cudaErrorInvalidValue);
        ck_assert_int_eq(
            v3_wgmma_forward(prod, &cmis, buf, 16, o, o, o, o, V3_WGMMA_CHAIN_TILE_AUTO, 0),
            cudaErrorInvalidValue);
        ck_assert_int_eq(
            v3_wgmma_forward(prod, &cp, buf, 16, o, NULL, o, o, V3_WGMMA_CHAIN_TILE_AUTO, 0),
            cudaErrorInvalidValue);
        ck_assert_int_eq(
            v3_wgmma_forward(prod, NULL, buf, 16, o, o, o, o, V3_WGMMA_CHAIN_TILE_AUTO, 0),
            cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_hidden_grads(odd, &cp, buf, buf, buf, 16, o, o, o,
                                               V3_WGMMA_CHAIN_TILE_AUTO, 0),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_hidden_grads(prod, &cp, buf, buf, buf, 16, o + 2, o, o,
                                               V3_WGMMA_CHAIN_TILE_AUTO, 0),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_hidden_grads(prod, &cmis, buf, buf, buf, 16, o, o, o,
                                               V3_WGMMA_CHAIN_TILE_AUTO, 0),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_hidden_grads(prod, &cp, buf, NULL, buf, 16, o, o, o,
                                               V3_WGMMA_CHAIN_TILE_AUTO, 0),
                         cudaErrorInvalidValue);
        /* the scratch of the prepared weights: null, misaligned */
        ck_assert_int_eq(
            v3_wgmma_forward(prod, &cp, buf, 16, o, o, o, NULL, V3_WGMMA_CHAIN_TILE_AUTO, 0),
            cudaErrorInvalidValue);
        ck_assert_int_eq(
            v3_wgmma_forward(prod, &cp, buf, 16, o, o, o, o + 1, V3_WGMMA_CHAIN_TILE_AUTO, 0),
            cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_hidden_grads(prod, &cp, buf, buf, buf, 16, o, o, NULL,
                                               V3_WGMMA_CHAIN_TILE_AUTO, 0),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_hidden_grads(prod, &cp, buf, buf, buf, 16, o, o, o + 2,
                                               V3_WGMMA_CHAIN_TILE_AUTO, 0),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(v3_wgmma_chain_scratch_floats(wide), 0);
        ck_assert_uint_eq(v3_wgmma_chain_scratch_floats(prod), 256 * 256 * 2 + 256 * 128);
    }
    /* the weight gradients: a width not a multiple of 4, batch 0, each
     * pointer misaligned or null in turn; nothing written */
    const atk_dims_t td = {8, 8, 8, 8}, odd = {8, 6, 8, 8};
    const float *in = buf + 16384;
    float *gflat = buf + 65536;
    CUDA_OK(cudaMemset(gflat, 0, 4096 * sizeof(float)));
    atk_grads_t tg = {gflat, gflat + 64, gflat + 128, gflat + 192, gflat + 256, gflat + 320};
    float *part = buf + 131072;
    ck_assert_uint_eq(v3_wgmma_weight_grads_floats(odd, 16), 0);
    ck_assert_int_eq(v3_wgmma_weight_grads(odd, in, in, in, in, in, in, 16, &tg, 0, part, 0, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_weight_grads(td, in, in, in, in, in, in, 0, &tg, 0, part, 0, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_weight_grads(td, in, in, in, in, in, in, 16, NULL, 0, part, 0, 0),
                     cudaErrorInvalidValue);
    for (int kernel : {V3_WGMMA_WGRAD_AUTO - 1, V3_WGMMA_WGRAD_WIDE + 1})
        ck_assert_int_eq(v3_wgmma_weight_grads_as(td, in, in, in, in, in, in, 16, &tg, 0, part, 0,
                                                  2, kernel, 0, 0),
                         cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_weight_grads_kernel(0), V3_WGMMA_WGRAD_AUTO);
    ck_assert_int_eq(v3_wgmma_weight_grads_kernel(1), V3_WGMMA_WGRAD_LOADS);
    ck_assert_int_eq(v3_wgmma_weight_grads_kernel(V3_WGMMA_WGRAD_WIDE_MIN_BATCH),
                     V3_WGMMA_WGRAD_WIDE);
    for (int i = 0; i < 7; i++)
        for (int bad = 0; bad < 2; bad++) {
            const float *p[7] = {in, in, in, in, in, in, part};
            p[i] = bad ? NULL : p[i] + 1;
            ck_assert_int_eq(v3_wgmma_weight_grads(td, p[0], p[1], p[2], p[3], p[4], p[5], 16, &tg,
                                                   0, const_cast<float *>(p[6]), 0, 0),
                             cudaErrorInvalidValue);
        }
    float **const tgp[6] = {&tg.dw1, &tg.db1, &tg.dw2, &tg.db2, &tg.dw3, &tg.db3};
    for (int i = 0; i < 6; i++) {
        float *const keep = *tgp[i];
        *tgp[i] = keep + 2;
        ck_assert_int_eq(v3_wgmma_weight_grads(td, in, in, in, in, in, in, 16, &tg, 0, part, 0, 0),
                         cudaErrorInvalidValue);
        *tgp[i] = NULL;
        ck_assert_int_eq(v3_wgmma_weight_grads(td, in, in, in, in, in, in, 16, &tg, 0, part, 0, 0),
                         cudaErrorInvalidValue);
        *tgp[i] = keep;
    }
    /* the fused dh2_pre + dW3 launch and its sum: aux past 128, a width not
     * a multiple of 4, batch 0, each pointer null or misaligned in turn;
     * nothing written (dh2 and the gradients lie in gflat) */
    const atk_dims_t aux_wide = {8, 8, 8, 132};
    ck_assert_int_eq(v3_wgmma_dw3_supported(aux_wide), 0);
    ck_assert_int_eq(v3_wgmma_dw3_supported(odd), 0);
    ck_assert_int_eq(v3_wgmma_dw3_supported(td), 1);
    ck_assert_uint_eq(v3_wgmma_dw3_partials_floats(aux_wide), 0);
    ck_assert_uint_eq(v3_wgmma_dw3_partials_floats(td), V3_WGMMA_DW3_MAX_GROUPS * (8 * 8 + 8));
    ck_assert_int_eq(v3_wgmma_hidden_grad_dw3(aux_wide, in, in, in, gflat, 16, part, 0, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_hidden_grad_dw3(td, in, in, in, gflat, 0, part, 0, 0),
                     cudaErrorInvalidValue);
    for (int i = 0; i < 5; i++)
        for (int bad = 0; bad < 2; bad++) {
            float *p[5] = {const_cast<float *>(in), const_cast<float *>(in),
                           const_cast<float *>(in), gflat, part};
            p[i] = bad ? NULL : p[i] + 1;
            ck_assert_int_eq(v3_wgmma_hidden_grad_dw3(td, p[0], p[1], p[2], p[3], 16, p[4], 0, 0),
                             cudaErrorInvalidValue);
        }
    ck_assert_int_eq(v3_wgmma_dw3_sum(aux_wide, 16, &tg, 0, part, 1, 0), cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_dw3_sum(td, 0, &tg, 0, part, 1, 0), cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_dw3_sum(td, 16, NULL, 0, part, 1, 0), cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_dw3_sum(td, 16, &tg, 0, NULL, 1, 0), cudaErrorInvalidValue);
    ck_assert_int_eq(v3_wgmma_dw3_sum(td, 16, &tg, 0, part + 1, 1, 0), cudaErrorInvalidValue);
    for (float **q : {&tg.dw3, &tg.db3}) {
        float *const keep = *q;
        *q = keep + 2;
        ck_assert_int_eq(v3_wgmma_dw3_sum(td, 16, &tg, 0, part, 1, 0), cudaErrorInvalidValue);
        *q = NULL;
        ck_assert_int_eq(v3_wgmma_dw3_sum(td, 16, &tg, 0, part, 1, 0), cudaErrorInvalidValue);
        *q = keep;
    }
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> untouched(4096);
    CUDA_OK(cudaMemcpy(untouched.data(), gflat, 4096 * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 4096; i++)
        ck_assert_msg(tst_f32_bits(untouched[i]) == 0, "refused call wrote gradient float %d", i);
    CUDA_OK(cudaFree(buf));
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}
END_TEST

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no CUDA device: test_v3_fast_wgmma skipped\n");
        return 77;
    }
    g_seed = tst_seed("test_v3_fast_wgmma");
    Suite *s = suite_create("cuda-v3 wgmma layer");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, layer_matches_double_reference);
    tcase_add_test(tc, hidden_grad_matches_double_reference);
    tcase_add_test(tc, weight_grads_match_double_reference);
    tcase_add_test(tc, dh2_dw3_matches_double_reference);
    tcase_add_test(tc, chain_matches_layer_launches);
    tcase_add_test(tc, call_tile_follows_its_rule);
    tcase_add_test(tc, forked_backward_matches_one_stream);
    tcase_add_test(tc, outside_the_domain_is_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* the CUDA context of main stays usable */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
