/*
 * cpu_trunk.c — the CPU reference kernels: the canonical order of
 * abi/auxtrunk_canon.h (section numbers below refer to it), written so that
 * GCC vectorises them.
 *
 * Every output element is still one sequential fmaf chain in the documented
 * order; what the loop order buys is that the innermost loop runs over many
 * *independent* chains (consecutive output columns), which the compiler turns
 * into vfmadd...ps with one chain per lane. No reassociation happens anywhere:
 * build with -ffp-contract=off and without fast-math (the top-level
 * CMakeLists.txt does), and with -mfma for speed (the bits are the same
 * without it, fmaf is correctly rounded either way).
 *
 * Shape letters: B batch, ENC, H1, H2, AUX; C = AUXTRUNK_CANON_CHUNK.
 */
#include "cpu_trunk.h"

#include <math.h>
#include <string.h>

#include "auxtrunk.h"
#include "auxtrunk_canon.h"

#define C AUXTRUNK_CANON_CHUNK
/* Samples the forward pushes through all three layers at a time, so a
 * block's h1 and h2 rows are still in cache for the next layer; also the
 * height of the inference scratch. Any value gives the same bits. */
#define FWD_ROWS 64
/* Rows of a weight gradient whose chunk partials are formed together, so that
 * the tile (SUM_ROWS x N floats) stays in L1 while a chunk streams past. */
#define SUM_ROWS 16

static int32_t min_i32(int32_t a, int32_t b) { return a < b ? a : b; }

/* ------------------------------------------------------------------------- */
/* Row chains: sections 1 and 2                                              */

/*
 * y[m, n] = init[n] (0.0f if init is NULL), then for k = 0 .. K-1 ascending
 * y[m, n] = fmaf(a[m, k], w[k, n], y[m, n]); for m < M, n < N.
 * a [M, K], w [K, N], y [M, N]. The n loop is the vectorised one: each lane
 * carries one (m, n) chain, each chain sees k in order.
 */
static void rows_chain(const float *restrict a, int32_t M, int32_t K, const float *restrict w,
                       int32_t N, const float *restrict init, float *restrict y)
{
    for (int32_t m = 0; m < M; m++) {
        float *restrict ym = y + (size_t)m * N;
        const float *restrict am = a + (size_t)m * K;
        if (init)
            memcpy(ym, init, (size_t)N * sizeof *ym);
        else
            memset(ym, 0, (size_t)N * sizeof *ym); /* all-zero bits = 0.0f */
        for (int32_t k = 0; k < K; k++) {
            const float av = am[k];
            const float *restrict wk = w + (size_t)k * N;
            for (int32_t n = 0; n < N; n++)
                ym[n] = fmaf(av, wk[n], ym[n]);
        }
    }
}

static void elu_inplace(float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = auxtrunk_canon_elu(y[i]);
}

/* d = d · ELU'(y), y the post-activation (section 2). */
static void elu_grad_inplace(float *restrict d, const float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = auxtrunk_canon_elu_grad(d[i], y[i]);
}

/* wt [N, K] = w [K, N] transposed, so that section 2's chain over n becomes
 * a row chain (rows_chain) with the k loop contiguous. */
static void transpose(const float *restrict w, int32_t K, int32_t N, float *restrict wt)
{
    for (int32_t k = 0; k < K; k++)
        for (int32_t n = 0; n < N; n++)
            wt[(size_t)n * K + k] = w[(size_t)k * N + n];
}

/* ------------------------------------------------------------------------- */
/* Forward (section 1) and inference (section 4)                             */

/* All three layers for `rows` samples; h1, h2 receive their rows. */
static void trunk_rows(atk_dims_t d, const atk_params_t *p, const float *x, int32_t rows, float *h1,
                       float *h2, float *out)
{
    rows_chain(x, rows, d.enc, p->w1, d.h1, p->b1, h1);
    elu_inplace(h1, (size_t)rows * d.h1);
    rows_chain(h1, rows, d.h1, p->w2, d.h2, p->b2, h2);
    elu_inplace(h2, (size_t)rows * d.h2);
    rows_chain(h2, rows, d.h2, p->w3, d.aux, p->b3, out);
}

void cpu_trunk_forward(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch,
                       float *h1, float *h2, float *out)
{
    for (int32_t b0 = 0; b0 < batch; b0 += FWD_ROWS)
        trunk_rows(d, p, x + (size_t)b0 * d.enc, min_i32(FWD_ROWS, batch - b0),
                   h1 + (size_t)b0 * d.h1, h2 + (size_t)b0 * d.h2, out + (size_t)b0 * d.aux);
}

size_t cpu_trunk_infer_workspace(atk_dims_t d)
{
    return (size_t)FWD_ROWS * ((size_t)d.h1 + (size_t)d.h2);
}

/* Rows are independent in section 1, so a block-sized scratch for h1 and h2
 * gives the training forward's bits without touching its record. */
void cpu_trunk_infer(atk_dims_t d, const atk_params_t *p, const float *x, int32_t batch, float *out,
                     float *ws)
{
    float *h1 = ws, *h2 = ws + (size_t)FWD_ROWS * d.h1;
    for (int32_t b0 = 0; b0 < batch; b0 += FWD_ROWS)
        trunk_rows(d, p, x + (size_t)b0 * d.enc, min_i32(FWD_ROWS, batch - b0), h1, h2,
                   out + (size_t)b0 * d.aux);
}

/* ------------------------------------------------------------------------- */
/* Backward: batch sums (section 3)                                          */

/*
 * One chunk's partials, from 0.0f with the samples in ascending order:
 *   pw[k, n] = Σ_b a[b, k]·g[b, n] (fmaf chain),  pb[n] = Σ_b g[b, n] (adds);
 * a [rows, K], g [rows, N], pw [K, N], pb [N]. The k range is cut into tiles
 * of SUM_ROWS rows that stay in L1 while the chunk's g rows stream past; the
 * n loop is vectorised across independent chains.
 */
static void chunk_sums(const float *restrict a, const float *restrict g, int32_t rows, int32_t K,
                       int32_t N, float *restrict pw, float *restrict pb)
{
    for (int32_t k0 = 0; k0 < K; k0 += SUM_ROWS) {
        int32_t kn = min_i32(SUM_ROWS, K - k0);
        float *restrict tile = pw + (size_t)k0 * N;
        memset(tile, 0, (size_t)kn * N * sizeof *tile);
        for (int32_t b = 0; b < rows; b++) {
            const float *restrict gb = g + (size_t)b * N;
            const float *restrict ab = a + (size_t)b * K + k0;
            for (int32_t kk = 0; kk < kn; kk++) {
                const float av = ab[kk];
                float *restrict t = tile + (size_t)kk * N;
                for (int32_t n = 0; n < N; n++)
                    t[n] = fmaf(av, gb[n], t[n]);
            }
        }
    }
    memset(pb, 0, (size_t)N * sizeof *pb);
    for (int32_t b = 0; b < rows; b++) {
        const float *restrict gb = g + (size_t)b * N;
        for (int32_t n = 0; n < N; n++)
            pb[n] = pb[n] + gb[n];
    }
}

/* left = left + right, element-wise (one tree node, left operand first). */
static void add_into(float *restrict left, const float *restrict right, size_t n)
{
    for (size_t i = 0; i < n; i++)
        left[i] = left[i] + right[i];
}

/*
 * A "partial set" is the six gradients of one tree node, laid out as the flat
 * parameter buffer of abi/auxtrunk.h: W1, b1, W2, b2, W3, b3.
 */
typedef struct set_layout {
    size_t w1, b1, w2, b2, w3, b3, count;
} set_layout_t;

static set_layout_t set_layout(atk_dims_t d)
{
    set_layout_t s = {AUXTRUNK_W1_OFFSET(&d),  AUXTRUNK_B1_OFFSET(&d), AUXTRUNK_W2_OFFSET(&d),
                      AUXTRUNK_B2_OFFSET(&d),  AUXTRUNK_W3_OFFSET(&d), AUXTRUNK_B3_OFFSET(&d),
                      AUXTRUNK_PARAM_COUNT(&d)};
    return s;
}

/* Largest stack depth for nc chunks: floor(log2(nc)) + 1 (see below). */
static int32_t stack_levels(int32_t nc)
{
    int32_t levels = 1;
    while (levels < 31 && (INT32_C(1) << levels) <= nc)
        levels++;
    return levels;
}

/*
 * Workspace, in floats, for a batch of `batch` samples:
 *   wt3 [AUX, H2], wt2 [H2, H1]       transposed weights (section 2)
 *   dh2 [rows, H2], dh1 [rows, H1]    one chunk's hidden gradients
 *   stack [levels, set count]         pending tree nodes (section 3)
 * with rows = min(C, batch). Every term grows with batch, so the size for
 * max_batch covers every smaller batch.
 */
typedef struct bwd_layout {
    size_t wt3, wt2, dh2, dh1, stack, total;
} bwd_layout_t;

static bwd_layout_t bwd_layout(atk_dims_t d, int32_t batch)
{
    bwd_layout_t l;
    size_t rows = (size_t)min_i32(C, batch);
    l.wt3 = 0;
    l.wt2 = l.wt3 + (size_t)d.aux * d.h2;
    l.dh2 = l.wt2 + (size_t)d.h2 * d.h1;
    l.dh1 = l.dh2 + rows * d.h2;
    l.stack = l.dh1 + rows * d.h1;
    l.total = l.stack + (size_t)stack_levels(auxtrunk_canon_chunks(batch)) * set_layout(d).count;
    return l;
}

size_t cpu_trunk_backward_workspace(atk_dims_t d, int32_t max_batch)
{
    return bwd_layout(d, max_batch).total;
}

/* Stores a finished gradient: g = r, or g = g + r. */
static void grad_store(float *restrict g, const float *restrict r, size_t n, int accumulate)
{
    if (accumulate)
        add_into(g, r, n);
    else
        memcpy(g, r, n * sizeof *g);
}

/*
 * The backward works chunk by chunk: for chunk i it forms that chunk's hidden
 * gradients (section 2, only its rows: no B-sized buffer), then the chunk's
 * partials of all six gradients (one partial set), and combines partial sets
 * with a binary counter instead of keeping all nc of them:
 *
 *   - after leaf i is pushed, the top two sets are replaced by (second + top)
 *     once per trailing zero bit of i + 1 (the leaves pushed so far), like a
 *     binary counter's carries. The stack then holds one set per 1-bit of i + 1,
 *     largest first, each being the tree node of an aligned, complete block of
 *     2^L leaves — built by exactly the additions the level-by-level tree makes
 *     inside that block: at level s = 2^L it adds q[j] + q[j+s] for j a
 *     multiple of 2s, the left (earlier) node first, as here.
 *   - at the end, with nc = 2^L1 + 2^L2 + ... (L1 > L2 > ...), the canonical
 *     tree adds nothing at a level where the last element has no right
 *     neighbour, so its result is  B1 + (B2 + (B3 + ...))  where Bk is the
 *     block of 2^Lk leaves: the remainder after B1 starts at a multiple of
 *     2^(L2+1) and is shorter than that, so it is one node of level L2+1
 *     carried up unchanged until it meets B1. Folding the stack from the top
 *     (second = second + top, repeatedly) computes exactly that.
 *
 * Hence the result equals the level-by-level tree bit for bit, and the stack
 * never holds more than floor(log2(nc)) + 1 sets (the number of bits of nc).
 */
void cpu_trunk_backward(atk_dims_t d, const atk_params_t *p, const float *x, const float *h1,
                        const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                        int accumulate, float *ws)
{
    const bwd_layout_t l = bwd_layout(d, batch);
    const set_layout_t s = set_layout(d);
    float *wt3 = ws + l.wt3, *wt2 = ws + l.wt2, *dh2 = ws + l.dh2, *dh1 = ws + l.dh1;
    float *stack = ws + l.stack;

    transpose(p->w3, d.h2, d.aux, wt3);
    transpose(p->w2, d.h1, d.h2, wt2);

    const int32_t nc = auxtrunk_canon_chunks(batch);
    int32_t depth = 0;
    for (int32_t i = 0; i < nc; i++) {
        const int32_t b0 = i * C, rows = min_i32(C, batch - b0);
        const float *x_i = x + (size_t)b0 * d.enc;
        const float *h1_i = h1 + (size_t)b0 * d.h1;
        const float *h2_i = h2 + (size_t)b0 * d.h2;
        const float *dout_i = dout + (size_t)b0 * d.aux;

        /* Section 2: dh2_pre from dout and W3, dh1_pre from dh2_pre and W2. */
        rows_chain(dout_i, rows, d.aux, wt3, d.h2, NULL, dh2);
        elu_grad_inplace(dh2, h2_i, (size_t)rows * d.h2);
        rows_chain(dh2, rows, d.h2, wt2, d.h1, NULL, dh1);
        elu_grad_inplace(dh1, h1_i, (size_t)rows * d.h1);

        /* Section 3: this chunk's leaf of every tree. */
        float *leaf = stack + (size_t)depth * s.count;
        chunk_sums(h2_i, dout_i, rows, d.h2, d.aux, leaf + s.w3, leaf + s.b3);
        chunk_sums(h1_i, dh2, rows, d.h1, d.h2, leaf + s.w2, leaf + s.b2);
        chunk_sums(x_i, dh1, rows, d.enc, d.h1, leaf + s.w1, leaf + s.b1);
        depth++;
        for (uint32_t pushed = (uint32_t)i + 1; (pushed & 1u) == 0; pushed >>= 1) {
            add_into(stack + (size_t)(depth - 2) * s.count, stack + (size_t)(depth - 1) * s.count,
                     s.count);
            depth--;
        }
    }
    for (; depth > 1; depth--)
        add_into(stack + (size_t)(depth - 2) * s.count, stack + (size_t)(depth - 1) * s.count,
                 s.count);

    grad_store(g->dw1, stack + s.w1, (size_t)d.enc * d.h1, accumulate);
    grad_store(g->db1, stack + s.b1, (size_t)d.h1, accumulate);
    grad_store(g->dw2, stack + s.w2, (size_t)d.h1 * d.h2, accumulate);
    grad_store(g->db2, stack + s.b2, (size_t)d.h2, accumulate);
    grad_store(g->dw3, stack + s.w3, (size_t)d.h2 * d.aux, accumulate);
    grad_store(g->db3, stack + s.b3, (size_t)d.aux, accumulate);
}
