/*
 * cpu_blocked.c — the blocked CPU kernels (cpu_blocked.h): the canonical
 * order of abi/auxtrunk_canon.h (section numbers below refer to it) with
 * loops organised around output tiles.
 *
 * What keeps the bits canonical whatever the tiling: every output element
 * owns one accumulator that sees its terms in the documented order (k, or n,
 * or b ascending), and the chunk partials are combined by the literal
 * level-by-level tree. Tiling only decides which independent chains advance
 * together. Build with -ffp-contract=off and without fast-math (the
 * top-level CMakeLists.txt does).
 *
 * Shape letters: B batch, ENC, H1, H2, AUX; C = AUXTRUNK_CANON_CHUNK.
 */
#include "cpu_blocked.h"

#include <math.h>
#include <string.h>

#include "auxtrunk_canon.h"

#define C AUXTRUNK_CANON_CHUNK
/* Register tile of a layer or a hidden gradient: TR rows x TC outputs. */
#define TR 4
#define TC 16
/* Floats of one gradient tile whose chunk partials are kept side by side. */
#define SUM_TILE 4096

static int32_t min_i32(int32_t a, int32_t b) { return a < b ? a : b; }

/* ------------------------------------------------------------------------- */
/* Layer forward (section 1)                                                 */

/*
 * y [M, N] = init [N] (0.0f if NULL) then, k ascending, fmaf(a[m,k], w[k,n], .)
 * for one TR x TC tile at a time; a [M, K], w [K, N].
 */
static void layer_tiles(const float *restrict a, int32_t M, int32_t K, const float *restrict w,
                        int32_t N, const float *restrict init, float *restrict y)
{
    for (int32_t n0 = 0; n0 < N; n0 += TC) {
        const int32_t nc = min_i32(TC, N - n0);
        for (int32_t m0 = 0; m0 < M; m0 += TR) {
            const int32_t mr = min_i32(TR, M - m0);
            float acc[TR][TC];
            for (int32_t r = 0; r < mr; r++)
                for (int32_t c = 0; c < nc; c++)
                    acc[r][c] = init ? init[n0 + c] : 0.0f;
            for (int32_t k = 0; k < K; k++) {
                const float *restrict wk = w + (size_t)k * N + n0;
                for (int32_t r = 0; r < mr; r++) {
                    const float av = a[(size_t)(m0 + r) * K + k];
                    for (int32_t c = 0; c < nc; c++)
                        acc[r][c] = fmaf(av, wk[c], acc[r][c]);
                }
            }
            for (int32_t r = 0; r < mr; r++)
                memcpy(y + (size_t)(m0 + r) * N + n0, acc[r], (size_t)nc * sizeof(float));
        }
    }
}

static void elu_rows(float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = auxtrunk_canon_elu(y[i]);
}

void cpb_forward(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch, float *h1,
                 float *h2, float *out)
{
    layer_tiles(x, batch, d.enc, p->w1, d.h1, p->b1, h1);
    elu_rows(h1, (size_t)batch * d.h1);
    layer_tiles(h1, batch, d.h1, p->w2, d.h2, p->b2, h2);
    elu_rows(h2, (size_t)batch * d.h2);
    layer_tiles(h2, batch, d.h2, p->w3, d.aux, p->b3, out);
}

/* ------------------------------------------------------------------------- */
/* Hidden gradient (section 2)                                               */

/*
 * dpre [M, K]: for each (m, k) the dot product of d[m, :] with w[k, :] (the
 * weight's own row, n ascending: no transposed copy), then times ELU'(y[m, k]).
 * d [M, N], w [K, N], y [M, K]. Tiles of TR rows x TC values of k.
 */
static void hidden_grad(const float *restrict d, int32_t M, int32_t N, const float *restrict w,
                        int32_t K, const float *restrict y, float *restrict dpre)
{
    for (int32_t k0 = 0; k0 < K; k0 += TC) {
        const int32_t kc = min_i32(TC, K - k0);
        for (int32_t m0 = 0; m0 < M; m0 += TR) {
            const int32_t mr = min_i32(TR, M - m0);
            float acc[TR][TC];
            memset(acc, 0, sizeof acc); /* all-zero bits = 0.0f */
            for (int32_t n = 0; n < N; n++) {
                for (int32_t r = 0; r < mr; r++) {
                    const float dv = d[(size_t)(m0 + r) * N + n];
                    for (int32_t j = 0; j < kc; j++)
                        acc[r][j] = fmaf(dv, w[(size_t)(k0 + j) * N + n], acc[r][j]);
                }
            }
            for (int32_t r = 0; r < mr; r++)
                for (int32_t j = 0; j < kc; j++) {
                    const size_t i = (size_t)(m0 + r) * K + k0 + j;
                    dpre[i] = auxtrunk_canon_elu_grad(acc[r][j], y[i]);
                }
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Batch sums (section 3)                                                    */

/* The pairwise tree over nc partials of `len` floats each, `stride` apart,
 * level by level, left + right; the result is left in partial 0. */
static void tree_reduce(float *q, int32_t nc, size_t len, size_t stride)
{
    for (int32_t s = 1; s < nc; s *= 2)
        for (int32_t i = 0; i + s < nc; i += 2 * s) {
            float *restrict left = q + (size_t)i * stride;
            const float *restrict right = q + (size_t)(i + s) * stride;
            for (size_t e = 0; e < len; e++)
                left[e] = left[e] + right[e];
        }
}

static void store(float *restrict g, const float *restrict r, size_t n, int accumulate)
{
    if (accumulate)
        for (size_t i = 0; i < n; i++)
            g[i] = g[i] + r[i];
    else
        memcpy(g, r, n * sizeof *g);
}

/*
 * dW [K, N] = Σ_b a[b, k]·g[b, n] and db [N] = Σ_b g[b, n], a [B, K], g [B, N].
 * Rows of dW are taken KT at a time (KT·N <= SUM_TILE, at least one row); for
 * such a tile every chunk's partial is formed (samples ascending, from 0.0f)
 * into q, then the tree combines them.
 */
static void batch_sums(const float *restrict a, const float *restrict g, int32_t B, int32_t K,
                       int32_t N, float *dw, float *db, int accumulate, float *restrict q)
{
    const int32_t nc = auxtrunk_canon_chunks(B);
    int32_t KT = SUM_TILE / N;
    if (KT < 1)
        KT = 1;
    for (int32_t k0 = 0; k0 < K; k0 += KT) {
        const int32_t kt = min_i32(KT, K - k0);
        const size_t len = (size_t)kt * N;
        for (int32_t i = 0; i < nc; i++) {
            float *restrict p = q + (size_t)i * len;
            memset(p, 0, len * sizeof *p);
            const int32_t b_end = min_i32(B, (i + 1) * C);
            for (int32_t b = i * C; b < b_end; b++) {
                const float *restrict gb = g + (size_t)b * N;
                for (int32_t kk = 0; kk < kt; kk++) {
                    const float av = a[(size_t)b * K + k0 + kk];
                    float *restrict pk = p + (size_t)kk * N;
                    for (int32_t n = 0; n < N; n++)
                        pk[n] = fmaf(av, gb[n], pk[n]);
                }
            }
        }
        tree_reduce(q, nc, len, len);
        store(dw + (size_t)k0 * N, q, len, accumulate);
    }
    for (int32_t i = 0; i < nc; i++) {
        float *restrict p = q + (size_t)i * N;
        memset(p, 0, (size_t)N * sizeof *p);
        const int32_t b_end = min_i32(B, (i + 1) * C);
        for (int32_t b = i * C; b < b_end; b++)
            for (int32_t n = 0; n < N; n++)
                p[n] = p[n] + g[(size_t)b * N + n];
    }
    tree_reduce(q, nc, (size_t)N, (size_t)N);
    store(db, q, (size_t)N, accumulate);
}

/* ------------------------------------------------------------------------- */
/* Backward                                                                  */

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* Floats of one chunk partial of any tile: max(SUM_TILE, widest N). */
static size_t partial_floats(atk_dims_t d)
{
    size_t w = max_sz(max_sz((size_t)d.h1, (size_t)d.h2), (size_t)d.aux);
    return max_sz(SUM_TILE, w);
}

size_t cpb_backward_workspace(atk_dims_t d, int32_t max_batch)
{
    size_t B = (size_t)max_batch;
    return B * (size_t)d.h2 + B * (size_t)d.h1 +
           (size_t)auxtrunk_canon_chunks(max_batch) * partial_floats(d);
}

void cpb_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                  const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                  int accumulate, float *ws)
{
    float *dh2 = ws;                              /* [batch, H2] */
    float *dh1 = dh2 + (size_t)batch * d.h2;      /* [batch, H1] */
    float *q = dh1 + (size_t)batch * d.h1;        /* chunk partials of one tile */

    hidden_grad(dout, batch, d.aux, p->w3, d.h2, h2, dh2);
    hidden_grad(dh2, batch, d.h2, p->w2, d.h1, h1, dh1);

    batch_sums(h2, dout, batch, d.h2, d.aux, g->dw3, g->db3, accumulate, q);
    batch_sums(h1, dh2, batch, d.h1, d.h2, g->dw2, g->db2, accumulate, q);
    batch_sums(x, dh1, batch, d.enc, d.h1, g->dw1, g->db1, accumulate, q);
}
