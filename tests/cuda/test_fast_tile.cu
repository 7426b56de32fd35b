/*
 * test_fast_tile.cu — the index arithmetic of cuda-v2's fast mode
 * (kernels/cuda_v2/trunk_v2_fast_tile.cuh), checked on the host, no GPU:
 *   - both shared-memory layouts are permutations of the stage, and the stage
 *     copies cover every element exactly once with aligned 16-byte stores;
 *   - every warp-wide shared-memory access of the kernels (16-byte copies,
 *     8-byte fragment reads, the fused column sums) is free of bank conflicts;
 *   - a block-level emulation built from the same functions the kernels use
 *     (stage copies with zero fill, fragment reads, accumulator maps, column
 *     sums), with mma.m16n8k8 emulated from the PTX ISA's fragment layout,
 *     equals a plain product of TF32-rounded operands for the three operand
 *     forms of the trunk (forward, hidden gradient, weight gradient over a
 *     batch chunk), with tails in every dimension;
 *   - the batch-chunk plan covers the batch, and the workspace bound holds.
 * A mapping error anywhere gives an O(1) error here; the emulation's only
 * difference from the product is the order of its double-precision sums.
 *
 * Built with nvcc as host code (the header needs float2 and
 * __host__ __device__); Check in fork mode; AUXTRUNK_SEED reproduces inputs.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "rng.h"
}
#include "trunk_v2_fast_tile.cuh"

using namespace v2fast;

static uint64_t g_seed;

/* ------------------------------------------------------------------------- */
/* Layouts and copies                                                        */

START_TEST(layouts_are_permutations)
{
    std::vector<int> hit_kc(TILE_FLOATS, 0), hit_nk(TILE_FLOATS, 0);
    for (int d = 0; d < BM; d++)
        for (int k = 0; k < BK; k++) {
            int a = kc_off(d, k), b = nk_off(k, d);
            ck_assert(a >= 0 && a < TILE_FLOATS && b >= 0 && b < TILE_FLOATS);
            hit_kc[a]++, hit_nk[b]++;
        }
    for (int i = 0; i < TILE_FLOATS; i++) {
        ck_assert_msg(hit_kc[i] == 1, "KC word %d used %d times", i, hit_kc[i]);
        ck_assert_msg(hit_nk[i] == 1, "NK word %d used %d times", i, hit_nk[i]);
    }
}
END_TEST

START_TEST(stage_copies_cover_the_tile)
{
    for (int kc = 0; kc < 2; kc++) {
        std::vector<int> hit(TILE_FLOATS, 0);
        for (int tid = 0; tid < NT; tid++)
            for (int j = 0; j < CHUNKS; j++) {
                int d, k;
                if (kc)
                    kc_chunk(tid, j, d, k);
                else
                    nk_chunk(tid, j, k, d);
                ck_assert(d >= 0 && d < BM && k >= 0 && k < BK);
                int off = kc ? kc_off(d, k) : nk_off(k, d);
                ck_assert_msg(off % 4 == 0, "16-byte copy to unaligned word %d", off);
                for (int e = 0; e < 4; e++) { /* the chunk's 4 floats are 4 consecutive words */
                    int want = kc ? kc_off(d, k + e) : nk_off(k, d + e);
                    ck_assert_int_eq(want, off + e);
                    hit[off + e]++;
                }
            }
        for (int i = 0; i < TILE_FLOATS; i++)
            ck_assert_msg(hit[i] == 1, "%s stage word %d copied %d times", kc ? "KC" : "NK", i,
                          hit[i]);
    }
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Bank conflicts                                                            */

/* 16-byte accesses: each quarter-warp (8 lanes) must cover 8 distinct
 * 4-bank groups. */
static void expect_free_16(const int *off, const char *what)
{
    for (int ph = 0; ph < 4; ph++) {
        int seen = 0;
        for (int l = 8 * ph; l < 8 * ph + 8; l++) {
            int grp = (off[l] / 4) % 8;
            ck_assert_msg(!(seen & (1 << grp)), "%s: bank conflict in quarter-warp %d", what, ph);
            seen |= 1 << grp;
        }
    }
}

/* 8-byte accesses: each half-warp (16 lanes) must cover 32 distinct banks. */
static void expect_free_8(const int *off, const char *what)
{
    for (int ph = 0; ph < 2; ph++) {
        uint32_t seen = 0;
        for (int l = 16 * ph; l < 16 * ph + 16; l++) {
            ck_assert_msg(off[l] % 2 == 0, "%s: 8-byte read at odd word %d", what, off[l]);
            for (int e = 0; e < 2; e++) {
                int bank = (off[l] + e) % 32;
                ck_assert_msg(!(seen & (1u << bank)), "%s: bank conflict in half-warp %d", what,
                              ph);
                seen |= 1u << bank;
            }
        }
    }
}

/* 4-byte accesses: the 32 lanes must cover 32 distinct banks. */
static void expect_free_4(const int *off, const char *what)
{
    uint32_t seen = 0;
    for (int l = 0; l < 32; l++) {
        int bank = off[l] % 32;
        ck_assert_msg(!(seen & (1u << bank)), "%s: bank conflict", what);
        seen |= 1u << bank;
    }
}

START_TEST(no_bank_conflicts)
{
    int off[32];
    char what[96];
    for (int w = 0; w < NT / 32; w++) {
        /* stage copies */
        for (int kc = 0; kc < 2; kc++)
            for (int j = 0; j < CHUNKS; j++) {
                for (int l = 0; l < 32; l++) {
                    int d, k;
                    if (kc)
                        kc_chunk(32 * w + l, j, d, k), off[l] = kc_off(d, k);
                    else
                        nk_chunk(32 * w + l, j, k, d), off[l] = nk_off(k, d);
                }
                snprintf(what, sizeof what, "%s copy %d of warp %d", kc ? "KC" : "NK", j, w);
                expect_free_16(off, what);
            }
        /* fragment reads: A of every m16 tile, B of every 16-wide group */
        const int wm0 = warp_m(w) * WM, wn0 = warp_n(w) * WN;
        for (int ks = 0; ks < KSTEPS; ks++)
            for (int kc = 0; kc < 2; kc++)
                for (int r = 0; r < 2; r++) {
                    for (int i = 0; i < MT; i++) {
                        for (int l = 0; l < 32; l++) {
                            int o[2];
                            if (kc)
                                a_offs<true>(wm0 + 16 * i, ks, l, o);
                            else
                                a_offs<false>(wm0 + 16 * i, ks, l, o);
                            off[l] = o[r];
                        }
                        snprintf(what, sizeof what, "%s A read %d, tile %d, k-step %d, warp %d",
                                 kc ? "KC" : "NK", r, i, ks, w);
                        expect_free_8(off, what);
                    }
                    for (int p = 0; p < NT8 / 2; p++) {
                        for (int l = 0; l < 32; l++) {
                            int o[2];
                            if (kc)
                                b_offs<true>(wn0 + 16 * p, ks, l, o);
                            else
                                b_offs<false>(wn0 + 16 * p, ks, l, o);
                            off[l] = o[r];
                        }
                        snprintf(what, sizeof what, "%s B read %d, group %d, k-step %d, warp %d",
                                 kc ? "KC" : "NK", r, p, ks, w);
                        expect_free_8(off, what);
                    }
                }
        /* column sums: row r, column = thread */
        for (int r = 0; r < BK; r++) {
            for (int l = 0; l < 32; l++)
                off[l] = nk_off(r, 32 * w + l);
            snprintf(what, sizeof what, "column sum row %d, warp %d", r, w);
            expect_free_4(off, what);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Block-level emulation                                                     */

/* cvt.rn.tf32.f32 on a finite value: round to 10 explicit mantissa bits,
 * ties to even (add just under half an ulp, plus the kept last bit, to the
 * magnitude, then truncate). */
static float tf32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x0FFFu + ((u >> 13) & 1u)) & 0xFFFFE000u;
    memcpy(&f, &u, 4);
    return f;
}

struct HostCopy { /* __host__ __device__ only to match stage_load; runs on the host */
    __host__ __device__ void operator()(float *dst, const float *src, bool ok) const
    {
        for (int e = 0; e < 4; e++)
            dst[e] = ok ? src[e] : 0.0f;
    }
};

/* mma.sync.m16n8k8 .row.col on one warp, from the PTX ISA's fragment
 * layout: c[lane] += A · B with A, B gathered from a[lane], b[lane]. Fails
 * if the lanes do not define every element of A and B. */
static void mma_emulate(const float (*a)[4], const float (*b)[2], double (*c)[4])
{
    double A[16][8], B[8][8];
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 8; k++)
            A[i][k] = NAN;
    for (int k = 0; k < 8; k++)
        for (int n = 0; n < 8; n++)
            B[k][n] = NAN;
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, q = lane & 3;
        A[g][q] = a[lane][0], A[g + 8][q] = a[lane][1];
        A[g][q + 4] = a[lane][2], A[g + 8][q + 4] = a[lane][3];
        B[q][g] = b[lane][0], B[q + 4][g] = b[lane][1];
    }
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, q = lane & 3;
        const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * q, 2 * q + 1, 2 * q, 2 * q + 1};
        for (int r = 0; r < 4; r++) {
            double s = 0;
            for (int k = 0; k < 8; k++)
                s += A[rows[r]][k] * B[k][cols[r]];
            c[lane][r] += s;
        }
    }
}

/* One GEMM problem in the kernels' terms: A [m, k] stored KC (a[m*lda + k])
 * or NK (a[k*lda + m]), B [k, n] stored KC (b[n*ldb + k]) or NK (b[k*ldb + n]),
 * reduction over k in [kb, ke). */
struct Problem {
    int m, n, kb, ke, ktot; /* ktot: rows/columns the operands really hold along k */
    std::vector<float> a, b;
    int lda, ldb;
};

template <bool A_KC, bool B_KC>
static Problem problem_make(int m, int n, int kb, int ke, int ktot, tst_rng_t *r)
{
    Problem P;
    P.m = m, P.n = n, P.kb = kb, P.ke = ke, P.ktot = ktot;
    P.lda = A_KC ? ktot : m;
    P.ldb = B_KC ? ktot : n;
    P.a.resize((size_t)m * ktot);
    P.b.resize((size_t)n * ktot);
    tst_rng_fill(r, P.a.data(), P.a.size(), -1.0f, 1.0f);
    tst_rng_fill(r, P.b.data(), P.b.size(), -1.0f, 1.0f);
    return P;
}

template <bool A_KC, bool B_KC>
static float elem_a(const Problem &P, int m, int k)
{
    return A_KC ? P.a[(size_t)m * P.lda + k] : P.a[(size_t)k * P.lda + m];
}

template <bool A_KC, bool B_KC>
static float elem_b(const Problem &P, int k, int n)
{
    return B_KC ? P.b[(size_t)n * P.ldb + k] : P.b[(size_t)k * P.ldb + n];
}

/* Emulates every block of the problem as the kernels run it; returns the
 * stored C [m, n] (NAN where nothing was stored, fails on a double store) and
 * the column sums of B over [kb, ke) as the m-tile-0 blocks compute them. */
template <bool A_KC, bool B_KC>
static void emulate(const Problem &P, std::vector<float> &c, std::vector<float> &colsum)
{
    c.assign((size_t)P.m * P.n, NAN);
    colsum.assign(P.n, NAN);
    std::vector<int> stores((size_t)P.m * P.n, 0);
    std::vector<float> sa(TILE_FLOATS), sb(TILE_FLOATS);
    static double acc[NT / 32][32][MT][NT8][4];
    static float af[32][MT][4], bfr[32][NT8][2];
    const int ktiles = (P.ke - P.kb + BK - 1) / BK;

    for (int m0 = 0; m0 < P.m; m0 += BM)
        for (int n0 = 0; n0 < P.n; n0 += BN) {
            memset(acc, 0, sizeof acc);
            float sums[NT] = {0};
            for (int t = 0; t < ktiles; t++) {
                const int k0 = P.kb + t * BK;
                std::fill(sa.begin(), sa.end(), NAN); /* anything not copied poisons */
                std::fill(sb.begin(), sb.end(), NAN);
                for (int tid = 0; tid < NT; tid++) {
                    stage_load<A_KC>(HostCopy{}, sa.data(), P.a.data(), P.lda, m0, P.m, k0, P.ke,
                                     tid);
                    stage_load<B_KC>(HostCopy{}, sb.data(), P.b.data(), P.ldb, n0, P.n, k0, P.ke,
                                     tid);
                }
                for (int w = 0; w < NT / 32; w++) {
                    const int wm0 = warp_m(w) * WM, wn0 = warp_n(w) * WN;
                    for (int ks = 0; ks < KSTEPS; ks++) {
                        for (int lane = 0; lane < 32; lane++) {
                            for (int i = 0; i < MT; i++) {
                                float a[4];
                                frag_a<A_KC>(sa.data(), wm0 + 16 * i, ks, lane, a);
                                for (int e = 0; e < 4; e++)
                                    af[lane][i][e] = tf32(a[e]);
                            }
                            for (int p = 0; p < NT8 / 2; p++) {
                                float b[2][2];
                                frag_b<B_KC>(sb.data(), wn0 + 16 * p, ks, lane, b);
                                for (int u = 0; u < 2; u++)
                                    for (int e = 0; e < 2; e++)
                                        bfr[lane][2 * p + u][e] = tf32(b[u][e]);
                            }
                        }
                        for (int i = 0; i < MT; i++)
                            for (int j = 0; j < NT8; j++) {
                                float fa[32][4], fb[32][2];
                                double fc[32][4];
                                for (int lane = 0; lane < 32; lane++) {
                                    memcpy(fa[lane], af[lane][i], sizeof fa[lane]);
                                    memcpy(fb[lane], bfr[lane][j], sizeof fb[lane]);
                                    memcpy(fc[lane], acc[w][lane][i][j], sizeof fc[lane]);
                                }
                                mma_emulate(fa, fb, fc);
                                for (int lane = 0; lane < 32; lane++)
                                    memcpy(acc[w][lane][i][j], fc[lane], sizeof fc[lane]);
                            }
                    }
                }
                if (!B_KC && m0 == 0)
                    for (int tid = 0; tid < NT; tid++)
                        column_sum(sb.data(), tid, sums[tid]);
            }
            /* the epilogue's walk over the accumulators */
            for (int w = 0; w < NT / 32; w++) {
                const int wm0 = warp_m(w) * WM, wn0 = warp_n(w) * WN;
                for (int lane = 0; lane < 32; lane++)
                    for (int i = 0; i < MT; i++)
                        for (int h = 0; h < 2; h++) {
                            const int m = m0 + c_row<A_KC>(wm0 + 16 * i, lane, h);
                            if (m >= P.m)
                                continue;
                            for (int p = 0; p < NT8 / 2; p++)
                                for (int u = 0; u < Runs<B_KC>::RUNS; u++) {
                                    float c0[4], c1[4], v[4];
                                    for (int e = 0; e < 4; e++) {
                                        c0[e] = (float)acc[w][lane][i][2 * p][e];
                                        c1[e] = (float)acc[w][lane][i][2 * p + 1][e];
                                    }
                                    int col;
                                    c_run<B_KC>(c0, c1, wn0 + 16 * p, lane, h, u, col, v);
                                    const int n = n0 + col;
                                    if (n >= P.n)
                                        continue;
                                    ck_assert_msg(n % Runs<B_KC>::LEN == 0,
                                                  "run at column %d is not aligned", n);
                                    for (int e = 0; e < Runs<B_KC>::LEN; e++) {
                                        ck_assert_msg(n + e < P.n, "run crosses n = %d", P.n);
                                        size_t o = (size_t)m * P.n + n + e;
                                        ck_assert_msg(++stores[o] == 1, "C[%d,%d] stored twice", m,
                                                      n + e);
                                        c[o] = v[e];
                                    }
                                }
                        }
            }
            if (!B_KC && m0 == 0)
                for (int tid = 0; tid < NT; tid++)
                    if (n0 + tid < P.n)
                        colsum[n0 + tid] = sums[tid];
        }
}

template <bool A_KC, bool B_KC>
static void expect_product(int m, int n, int kb, int ke, int ktot, tst_rng_t *r)
{
    Problem P = problem_make<A_KC, B_KC>(m, n, kb, ke, ktot, r);
    std::vector<float> c, colsum;
    emulate<A_KC, B_KC>(P, c, colsum);
    double worst = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int k = kb; k < ke; k++) {
                double t = (double)tf32(elem_a<A_KC, B_KC>(P, i, k)) *
                           (double)tf32(elem_b<A_KC, B_KC>(P, k, j));
                s += t, mag += fabs(t);
            }
            float got = c[(size_t)i * n + j];
            ck_assert_msg(!isnan(got), "C[%d,%d] never stored (or read an uncopied word)", i, j);
            double err = fabs(got - s);
            ck_assert_msg(err <= 1e-6 * mag + 1e-30,
                          "C[%d,%d] = %.9g, product of the rounded operands %.9g (A_KC %d B_KC %d, "
                          "%dx%d, k [%d,%d)) [seed %llu]",
                          i, j, got, s, A_KC, B_KC, m, n, kb, ke, (unsigned long long)g_seed);
            if (mag > 0 && err / mag > worst)
                worst = err / mag;
        }
    if (!B_KC)
        for (int j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int k = kb; k < ke; k++)
                s += elem_b<A_KC, B_KC>(P, k, j), mag += fabs(elem_b<A_KC, B_KC>(P, k, j));
            ck_assert_msg(fabs(colsum[j] - s) <= 1e-5 * mag + 1e-30,
                          "column sum %d = %.9g, want %.9g", j, colsum[j], s);
        }
    printf("  A %s, B %s, %dx%d, k in [%d, %d): worst error / sum|terms| %.2g\n",
           A_KC ? "KC" : "NK", B_KC ? "KC" : "NK", m, n, kb, ke, worst);
}

START_TEST(forward_form)
{
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0xF1);
    /* A = activations [batch, K] (KC), B = W [K, N] (NK) */
    expect_product<true, false>(200, 136, 0, 72, 72, &r);   /* tails in m, n, k */
    expect_product<true, false>(256, 256, 0, 256, 256, &r); /* production layer */
    expect_product<true, false>(1, 4, 0, 4, 4, &r);
    expect_product<true, false>(97, 128, 0, 256, 256, &r);
}
END_TEST

START_TEST(hidden_gradient_form)
{
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0xF2);
    /* A = d [batch, N_out] (KC), B = W [K, N_out] read [n][k] (KC) */
    expect_product<true, true>(131, 44, 0, 100, 100, &r);
    expect_product<true, true>(257, 256, 0, 128, 128, &r); /* production dh2 */
    expect_product<true, true>(3, 12, 0, 8, 8, &r);
}
END_TEST

START_TEST(weight_gradient_form)
{
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ 0xF3);
    /* A = a [batch, M] (NK), B = d [batch, N] (NK); k = samples of one chunk,
     * with samples outside the chunk present (they must not be read). */
    expect_product<false, false>(132, 260, 32, 128, 150, &r);
    expect_product<false, false>(132, 260, 128, 150, 150, &r);
    expect_product<false, false>(256, 128, 0, 300, 300, &r);
    expect_product<false, false>(4, 8, 0, 1, 1, &r);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Batch chunks                                                              */

START_TEST(chunk_plan_covers_the_batch)
{
    const int tiles[] = {1, 3, 10, 100, 264, 1000};
    for (int t : tiles)
        for (int batch = 1; batch <= 70000; batch += (batch < 600 ? 1 : 997)) {
            int nc, len;
            chunk_plan(t, batch, nc, len);
            ck_assert(nc >= 1 && len >= 1 && len % BK == 0);
            ck_assert_msg((long long)(nc - 1) * len < batch && (long long)nc * len >= batch,
                          "tiles %d batch %d: %d chunks of %d", t, batch, nc, len);
            /* the workspace is sized by chunk_bound at max_batch: monotone */
            ck_assert(nc <= chunk_bound(t, batch));
            ck_assert(chunk_bound(t, batch) <= chunk_bound(t, batch + 1));
            ck_assert(nc * t <= TARGET_BLOCKS || nc == 1);
        }
    int nc, len;
    chunk_plan(10, 65536, nc, len); /* the production topology's 10 weight tiles */
    printf("  production, B = 65536: %d chunks of %d samples, %d blocks\n", nc, len, 10 * nc);
    ck_assert_int_eq(nc, 26);
    ck_assert_int_eq(len, 2528);
}
END_TEST

/* ------------------------------------------------------------------------- */

int main(void)
{
    g_seed = tst_seed("test_fast_tile");
    Suite *s = suite_create("cuda-v2 fast tile");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, layouts_are_permutations);
    tcase_add_test(tc, stage_copies_cover_the_tile);
    tcase_add_test(tc, no_bank_conflicts);
    tcase_add_test(tc, forward_form);
    tcase_add_test(tc, hidden_gradient_form);
    tcase_add_test(tc, weight_gradient_form);
    tcase_add_test(tc, chunk_plan_covers_the_batch);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
