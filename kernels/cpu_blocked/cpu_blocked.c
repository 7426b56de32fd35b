/*
 * cpu_blocked.c — the fast CPU trunk (cpu_blocked.h): how the canonical
 * order of abi/auxtrunk_canon.h (section numbers below refer to it) is cut
 * into packed operands, register tiles (cpb_isa.c) and pool phases
 * (cpb_pool.c).
 *
 * Every product of the trunk is one shape: out[i][j] = init[j], then for each
 * depth step r in order, out[i][j] = fmaf(A(i, r), B(r, j), out[i][j]):
 *
 *   product            rows i      columns j   depth r            A, B
 *   layer (1)          samples     outputs n   inputs k           act, W
 *   hidden grad (2)    samples     inputs k    outputs n          d, W^T
 *   weight grad (3)    inputs k    outputs n   chunk samples b    a^T, g
 *
 * Operands are packed (A into tiles [depth][MR], B into panels [depth][NR])
 * so that the tile kernel reads both as contiguous streams, except the
 * forward's weights, whose whole panels are rows of W read in place; packing
 * moves floats and never changes one.
 *
 * Phases (each a cpb_pool_run; tasks of a phase write disjoint outputs):
 *   forward   pack the partial last panel of W1..W3 and its bias, if any;
 *             then one task per row tile runs its MR samples through all
 *             three layers (rows are independent in section 1).
 *   backward  per chunk of C samples:
 *             dh2     one task per (column group, row tile): dh2_pre
 *                     (section 2) of the tile's samples in the group's
 *                     columns, stored straight into the chunk's packed dW2
 *                     operand and, as A tiles, into the dh1 product's
 *                     operand; and the group's share of the tile's other
 *                     packed dW operands;
 *             dh1     the same for dh1_pre, from those A tiles;
 *                     a group is one thread's columns (column_groups), and
 *                     each thread packs its own copy of the W3^T / W2^T
 *                     panels of the groups it runs, once per call;
 *             grads   one task per (row group, block of about 32 rows)
 *                     of dW1, dW3, dW2, every column: the chunk partials of
 *                     its region (and, in a layer's first block, of the
 *                     bias), then its region's steps of the pairwise tree
 *                     (the tree is element-wise, so each region can run it
 *                     alone). Row group q's rows are the A tiles that
 *                     group q of the dh2 phase packed, on the same thread,
 *                     and two threads' regions meet only where one group's
 *                     rows end: whole rows, so no cache line of the
 *                     caller's dW is written by two threads but the one at
 *                     such a meeting, whatever the caller's alignment (a
 *                     column split shares the line at every row's end when
 *                     a row is not a whole number of lines from one;
 *                     docs/cpu-perf.md, step 15).
 *
 * The pool (cpb_pool.c) gives each thread the same home range of a phase's
 * tasks in every call, so a task's outputs stay in one core's cache.
 *
 * The tree is kept as a binary-counter stack of partial sets, as in
 * kernels/cpu/cpu_trunk.c, whose comment proves it equal to the
 * level-by-level tree; a batch of one chunk stores its partial directly.
 *
 * Shape letters: B batch, ENC, H1, H2, AUX; C = AUXTRUNK_CANON_CHUNK.
 */
#include "cpu_blocked.h"

#include <stdlib.h>
#include <string.h>

#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cpb_isa.h"
#include "cpb_pool.h"

#define C AUXTRUNK_CANON_CHUNK
/* Buffers are aligned for whole vector loads; any alignment gives the same bits. */
#define ALIGN_FLOATS 16

static int32_t min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
static int32_t max_i32(int32_t a, int32_t b) { return a > b ? a : b; }
static int32_t blocks(int32_t n, int32_t w) { return (n + w - 1) / w; }
static size_t round_up(size_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

/* ------------------------------------------------------------------------- */
/* The object and its workspace                                              */

/* A thread's scratch: one packed A tile, a row tile of each hidden layer,
 * one register tile. */
typedef struct scratch {
    float *a;         /* [max depth][MR] */
    float *r1;        /* [MR, H1], inference's rows (no record) */
    float *r2;        /* [MR, H2] */
    float *tile;      /* [MR][NR] */
    float *wt3, *wt2; /* this thread's B panels of W3^T (depth AUX, columns
                         H2) and W2^T (H2, H1) */
    uint32_t *packed; /* per panel of wt3, then of wt2: the backward call it
                         was packed for (0: never) */
} scratch_t;

struct cpb_trunk {
    atk_dims_t d;
    int32_t max_batch;
    int32_t mr, nr;
    int32_t cr;     /* rows of a chunk buffer: min(C, max_batch) */
    int32_t levels; /* tree stack depth for max_batch; 0 when one chunk */
    const cpb_ops_t *ops;
    cpb_pool_t *pool;
    size_t set; /* floats of one partial set: the flat parameter layout of
                       abi/auxtrunk.h (AUXTRUNK_*_OFFSET) */
    size_t bytes;
    float *mem; /* every buffer below */

    /* forward: B panels of W1 (depth ENC), W2 (H1), W3 (H2); padded biases */
    float *wp1, *wp2, *wp3, *bp1, *bp2, *bp3;
    uint32_t calls; /* backward calls so far (never 0 once called) */
    /* one chunk's dW operands: B panels of dout, dh2_pre, dh1_pre and A
     * tiles of h2, h1, x, each with depth cr (the chunk's samples) */
    float *g3, *g2, *g1, *a3, *a2, *a1;
    float *ad2;         /* dh2_pre of the chunk as A tiles, depth H2: the dh1
                           product's operand */
    float *ones;        /* one A tile [cr][MR] of 1.0f: its product with a
                           g panel is the bias sums (bwd_grads_task) */
    float *stack;       /* [levels][set] pending tree nodes */
    scratch_t *scratch; /* one per thread */
    uint32_t *marks;    /* the scratches' `packed` arrays */
};

/* floor(log2(nc)) + 1, the bits of nc: the most sets the stack holds for nc
 * chunks (see kernels/cpu/cpu_trunk.c). */
static int32_t stack_levels(int32_t nc) { return 32 - __builtin_clz((unsigned)nc); }

/* Floats of B panels for n columns of depth `depth`, of A tiles for m rows. */
static size_t panel_floats(const cpb_trunk_t *t, int32_t n, int32_t depth)
{
    return round_up((size_t)blocks(n, t->nr) * t->nr * (size_t)depth);
}
static size_t tile_floats(const cpb_trunk_t *t, int32_t m, int32_t depth)
{
    return round_up((size_t)blocks(m, t->mr) * t->mr * (size_t)depth);
}

/* Carves mem (NULL: only counts) into the buffers; returns the floats used. */
static size_t carve(cpb_trunk_t *t, float *mem, int32_t threads)
{
    const atk_dims_t d = t->d;
    size_t at = 0;
#define TAKE(ptr, n)          \
    do {                      \
        if (mem)              \
            (ptr) = mem + at; \
        at += round_up(n);    \
    } while (0)
    TAKE(t->wp1, panel_floats(t, d.h1, d.enc));
    TAKE(t->wp2, panel_floats(t, d.h2, d.h1));
    TAKE(t->wp3, panel_floats(t, d.aux, d.h2));
    TAKE(t->bp1, panel_floats(t, d.h1, 1));
    TAKE(t->bp2, panel_floats(t, d.h2, 1));
    TAKE(t->bp3, panel_floats(t, d.aux, 1));
    TAKE(t->g3, panel_floats(t, d.aux, t->cr));
    TAKE(t->g2, panel_floats(t, d.h2, t->cr));
    TAKE(t->g1, panel_floats(t, d.h1, t->cr));
    TAKE(t->a3, tile_floats(t, d.h2, t->cr));
    TAKE(t->a2, tile_floats(t, d.h1, t->cr));
    TAKE(t->a1, tile_floats(t, d.enc, t->cr));
    TAKE(t->ad2, tile_floats(t, t->cr, d.h2));
    TAKE(t->ones, (size_t)t->cr * t->mr);
    TAKE(t->stack, (size_t)t->levels * t->set);
    const int32_t depth = max_i32(max_i32(d.enc, d.h1), max_i32(d.h2, d.aux));
    for (int32_t i = 0; i < threads; i++) {
        scratch_t *s = &t->scratch[i];
        TAKE(s->a, (size_t)t->mr * depth);
        TAKE(s->r1, (size_t)t->mr * d.h1);
        TAKE(s->r2, (size_t)t->mr * d.h2);
        TAKE(s->tile, (size_t)t->mr * t->nr);
        TAKE(s->wt3, panel_floats(t, d.h2, d.aux));
        TAKE(s->wt2, panel_floats(t, d.h1, d.h2));
    }
#undef TAKE
    return at;
}

cpb_status_t cpb_create(const cpb_config_t *cfg, cpb_trunk_t **out)
{
    const cpb_ops_t *ops = cpb_ops_for(cfg->isa);
    if (!ops)
        return CPB_E_ISA;
    const int32_t threads = max_i32(cfg->threads, 1);
    cpb_trunk_t *t = calloc(1, sizeof *t);
    if (!t)
        return CPB_E_MEMORY;
    t->d = cfg->dims;
    t->max_batch = cfg->max_batch;
    t->ops = ops;
    t->mr = ops->mr;
    t->nr = ops->nr;
    t->cr = min_i32(C, cfg->max_batch);
    const int32_t nc = auxtrunk_canon_chunks(cfg->max_batch);
    t->levels = nc > 1 ? stack_levels(nc) : 0;
    t->set = AUXTRUNK_PARAM_COUNT(&t->d);
    cpb_status_t st = CPB_E_MEMORY;
    if (!(t->scratch = calloc((size_t)threads, sizeof *t->scratch)))
        goto fail_scratch;
    const size_t panels = (size_t)blocks(t->d.h2, t->nr) + (size_t)blocks(t->d.h1, t->nr);
    if (!(t->marks = calloc((size_t)threads * panels, sizeof *t->marks)))
        goto fail_marks;
    for (int32_t i = 0; i < threads; i++)
        t->scratch[i].packed = t->marks + (size_t)i * panels;
    const size_t floats = carve(t, NULL, threads);
    if (!(t->mem = aligned_alloc(ALIGN_FLOATS * sizeof(float), floats * sizeof(float))))
        goto fail_mem;
    carve(t, t->mem, threads);
    for (size_t i = 0; i < (size_t)t->cr * t->mr; i++)
        t->ones[i] = 1.0f;
    t->bytes = sizeof *t + (size_t)threads * (sizeof *t->scratch + panels * sizeof *t->marks) +
               floats * sizeof(float);
    if (cpb_pool_create(threads, &t->pool) != 0) {
        st = CPB_E_THREADS;
        goto fail_pool;
    }
    *out = t;
    return CPB_OK;

fail_pool:
    free(t->mem);
fail_mem:
    free(t->marks);
fail_marks:
    free(t->scratch);
fail_scratch:
    free(t);
    return st;
}

void cpb_destroy(cpb_trunk_t *t)
{
    if (!t)
        return;
    cpb_pool_destroy(t->pool);
    free(t->mem);
    free(t->marks);
    free(t->scratch);
    free(t);
}

size_t cpb_bytes(const cpb_trunk_t *t) { return t->bytes; }
int32_t cpb_threads(const cpb_trunk_t *t) { return cpb_pool_threads(t->pool); }
const char *cpb_isa_name(const cpb_trunk_t *t) { return t->ops->name; }

/* ------------------------------------------------------------------------- */
/* Packing and register tiles                                                */

/* dst[0, n) = src[0, n). The packed widths as fixed-size copies, which the
 * compiler inlines as vector moves (a loop here would become a library call
 * per group of a few floats). */
static inline void copy_floats(float *restrict dst, const float *restrict src, int32_t n)
{
    switch (n) {
    case 32:
        memcpy(dst, src, 32 * sizeof *dst);
        return;
    case 16:
        memcpy(dst, src, 16 * sizeof *dst);
        return;
    case 8:
        memcpy(dst, src, 8 * sizeof *dst);
        return;
    case 6:
        memcpy(dst, src, 6 * sizeof *dst);
        return;
    case 4:
        memcpy(dst, src, 4 * sizeof *dst);
        return;
    default:
        for (int32_t i = 0; i < n; i++)
            dst[i] = src[i];
    }
}

/*
 * Packs `nrows` depth steps of `count` values into blocks of w:
 *   dst[(blk*depth + r0 + r)*w + i] = src[(blk*w + i)*s_idx + r*s_dep]
 * for every block blk, r < nrows, i < w; 0.0f where blk*w + i >= count.
 * `depth` is the depth capacity of a block, r0 the first step written.
 * Either the values of a step (s_idx == 1) or the steps of a value
 * (s_dep == 1) are contiguous in every use; the loops read along them.
 */
static void pack(const cpb_ops_t *ops, float *restrict dst, size_t depth, size_t r0,
                 const float *restrict src, int32_t count, int32_t nrows, int32_t w, size_t s_idx,
                 size_t s_dep)
{
    const int32_t nblk = blocks(count, w);
    if (s_idx == 1) {
        for (int32_t r = 0; r < nrows; r++) {
            const float *restrict sr = src + (size_t)r * s_dep;
            for (int32_t b = 0; b < nblk; b++) {
                float *restrict o = dst + ((size_t)b * depth + r0 + r) * (size_t)w;
                const int32_t n = min_i32(w, count - b * w);
                copy_floats(o, sr + b * w, n);
                for (int32_t i = n; i < w; i++)
                    o[i] = 0.0f;
            }
        }
        return;
    }
    for (int32_t b = 0; b < nblk; b++) {
        float *restrict blk = dst + ((size_t)b * depth + r0) * (size_t)w;
        const int32_t n = min_i32(w, count - b * w);
        int32_t i = 0;
        if (s_dep == 1 && w % 8 == 0)
            for (; i + 8 <= n; i += 8)
                ops->transpose8(nrows, src + (size_t)(b * w + i) * s_idx, s_idx, blk + i,
                                (size_t)w);
        for (; i < n; i++) {
            const float *restrict si = src + (size_t)(b * w + i) * s_idx;
            for (int32_t r = 0; r < nrows; r++)
                blk[(size_t)r * w + i] = si[(size_t)r * s_dep];
        }
        for (int32_t i = n; i < w; i++)
            for (int32_t r = 0; r < nrows; r++)
                blk[(size_t)r * w + i] = 0.0f;
    }
}

/* The B operand of a product with N columns: whole column panels read in
 * place from a row-major matrix (w, or packed when w is NULL) and the last,
 * partial panel packed and zero-padded (so no read passes the matrix end);
 * likewise the chains' start values (bias: in place, padded; or none). */
typedef struct operand_b {
    const float *w;      /* [depth, N] row-major, or NULL: every panel packed */
    const float *panels; /* packed panels [panel][depth][NR] */
    const float *bias;   /* [N] or NULL */
    const float *padded; /* bias padded to whole panels */
} operand_b_t;

/* One row tile of a product with N columns: y [rows, N] (row stride N) from
 * the packed A tile `a` and operand b, each chain started at its bias or at
 * 0.0f. Whole tiles are stored in place, edge tiles through `tile`. */
static void rows_product(const cpb_trunk_t *t, const float *a, int32_t depth, const operand_b_t *b,
                         int32_t N, int32_t rows, float *y, float *tile)
{
    const int32_t nr = t->nr;
    for (int32_t p = 0; p * nr < N; p++) {
        const int32_t cols = min_i32(nr, N - p * nr);
        const int whole = b->w && cols == nr;
        const float *bp = whole ? b->w + (size_t)p * nr : b->panels + (size_t)p * depth * nr;
        const size_t ldb = whole ? (size_t)N : (size_t)nr;
        const float *ip = !b->bias ? NULL
                          : whole  ? b->bias + (size_t)p * nr
                                   : b->padded + (size_t)p * nr;
        float *yp = y + (size_t)p * nr;
        if (rows == t->mr && cols == nr) {
            t->ops->tile(depth, a, bp, ldb, ip, yp, (size_t)N);
            continue;
        }
        t->ops->tile(depth, a, bp, ldb, ip, tile, (size_t)nr);
        for (int32_t i = 0; i < rows; i++)
            for (int32_t j = 0; j < cols; j++)
                yp[(size_t)i * N + j] = tile[(size_t)i * nr + j];
    }
}

/* ------------------------------------------------------------------------- */
/* Forward (section 1) and inference (section 4)                             */

typedef struct fwd_call {
    cpb_trunk_t *t;
    const atk_params_t *p;
    const float *x;
    int32_t batch;
    float *h1, *h2; /* the record, or NULL for inference (rows in scratch) */
    float *out;
} fwd_call_t;

/* Task i of the packing phase: the partial last panel (and bias) of each
 * layer whose width is not a multiple of NR; whole panels are read in place. */
static void fwd_pack_task(void *ctx, int32_t i, int32_t thread)
{
    (void)thread;
    const fwd_call_t *c = ctx;
    const cpb_trunk_t *t = c->t;
    const atk_dims_t d = t->d;
    const int32_t nr = t->nr;
    const float *w = NULL, *bias = NULL;
    float *wp = NULL, *bp = NULL;
    int32_t K = 0, N = 0;
    const int32_t widths[3] = {d.h1, d.h2, d.aux};
    for (int32_t l = 0, seen = 0; l < 3; l++) {
        if (widths[l] % nr == 0 || seen++ != i)
            continue;
        if (l == 0)
            w = c->p->w1, bias = c->p->b1, wp = t->wp1, bp = t->bp1, K = d.enc, N = d.h1;
        else if (l == 1)
            w = c->p->w2, bias = c->p->b2, wp = t->wp2, bp = t->bp2, K = d.h1, N = d.h2;
        else
            w = c->p->w3, bias = c->p->b3, wp = t->wp3, bp = t->bp3, K = d.h2, N = d.aux;
    }
    const int32_t p = N / nr;
    const int32_t n0 = p * nr, cols = min_i32(nr, N - n0);
    /* B(r = k, j = n) = W[k, n] */
    pack(t->ops, wp + (size_t)p * K * nr, (size_t)K, 0, w + n0, cols, K, nr, 1, (size_t)N);
    pack(t->ops, bp + (size_t)p * nr, 1, 0, bias + n0, cols, 1, nr, 1, 0);
}

/* Task i of the row phase: samples [i*MR, +MR) through all three layers. */
static void fwd_rows_task(void *ctx, int32_t i, int32_t thread)
{
    const fwd_call_t *c = ctx;
    const cpb_trunk_t *t = c->t;
    const atk_dims_t d = t->d;
    const scratch_t *s = &t->scratch[thread];
    const int32_t b0 = i * t->mr, rows = min_i32(t->mr, c->batch - b0);
    float *y1 = c->h1 ? c->h1 + (size_t)b0 * d.h1 : s->r1;
    float *y2 = c->h2 ? c->h2 + (size_t)b0 * d.h2 : s->r2;

    /* A(i, r = k) = act[i, k] */
    pack(t->ops, s->a, (size_t)d.enc, 0, c->x + (size_t)b0 * d.enc, rows, d.enc, t->mr,
         (size_t)d.enc, 1);
    const operand_b_t b1 = {c->p->w1, t->wp1, c->p->b1, t->bp1};
    const operand_b_t b2 = {c->p->w2, t->wp2, c->p->b2, t->bp2};
    const operand_b_t b3 = {c->p->w3, t->wp3, c->p->b3, t->bp3};
    rows_product(t, s->a, d.enc, &b1, d.h1, rows, y1, s->tile);
    t->ops->elu(y1, (size_t)rows * d.h1);
    pack(t->ops, s->a, (size_t)d.h1, 0, y1, rows, d.h1, t->mr, (size_t)d.h1, 1);
    rows_product(t, s->a, d.h1, &b2, d.h2, rows, y2, s->tile);
    t->ops->elu(y2, (size_t)rows * d.h2);
    pack(t->ops, s->a, (size_t)d.h2, 0, y2, rows, d.h2, t->mr, (size_t)d.h2, 1);
    rows_product(t, s->a, d.h2, &b3, d.aux, rows, c->out + (size_t)b0 * d.aux, s->tile);
}

static void run_forward(fwd_call_t *c)
{
    const cpb_trunk_t *t = c->t;
    const atk_dims_t d = t->d;
    const int32_t partial = (d.h1 % t->nr != 0) + (d.h2 % t->nr != 0) + (d.aux % t->nr != 0);
    cpb_pool_run(t->pool, partial, fwd_pack_task, c);
    cpb_pool_run(t->pool, blocks(c->batch, t->mr), fwd_rows_task, c);
}

void cpb_forward(cpb_trunk_t *t, const atk_params_t *p, const float *x, int32_t batch, float *h1,
                 float *h2, float *out)
{
    fwd_call_t c = {t, p, x, batch, h1, h2, out};
    run_forward(&c);
}

void cpb_infer(cpb_trunk_t *t, const atk_params_t *p, const float *x, int32_t batch, float *out)
{
    fwd_call_t c = {t, p, x, batch, NULL, NULL, out};
    run_forward(&c);
}

/* ------------------------------------------------------------------------- */
/* Backward: hidden gradients (section 2) and batch sums (section 3)         */

typedef struct bwd_call {
    cpb_trunk_t *t;
    const atk_params_t *p;
    const float *x, *h1, *h2, *dout;
    const atk_grads_t *g;
    int accumulate;
    int32_t nc;       /* chunks of the batch */
    int32_t chunk;    /* the chunk of the current phases */
    int32_t b0, rows; /* its first sample and its samples */
    int32_t tiles;    /* its row tiles */
    int32_t q2, q1;   /* column groups of the dh2 and dh1 phases (q2 also
                         the grads phase's row groups) */
    uint32_t call;    /* t->calls of this call */
    int32_t per;      /* tasks per row group of the grads phase (group_tasks) */
} bwd_call_t;

/* Column groups of a hidden-gradient phase: one per thread, at most one per
 * panel. With home ranges (cpb_pool.c) a thread then computes one group's
 * columns for every row tile and packs only that group's W^T panels. */
static int32_t column_groups(const cpb_trunk_t *t, int32_t n)
{
    return min_i32(cpb_pool_threads(t->pool), blocks(n, t->nr));
}

/* [*lo, *hi): part `q` of `n` things cut into `parts` ranges. */
static void part_of(int32_t n, int32_t q, int32_t parts, int32_t *lo, int32_t *hi)
{
    *lo = (int32_t)((int64_t)q * n / parts);
    *hi = (int32_t)((int64_t)(q + 1) * n / parts);
}

/* Panel `p` of W^T for W [K, N] (B(r = n, j = k) = W[k, n]: the panel's
 * columns are rows p*NR... of W), into this thread's copy, once per call:
 * the thread keeps the panels it reads in its own cache rather than reading
 * panels another core wrote. `mark` is the panel's entry of s->packed. */
static void pack_wt_panel(const cpb_trunk_t *t, float *panels, const float *w, int32_t K,
                          int32_t N, int32_t p, uint32_t *mark, uint32_t call)
{
    if (*mark == call)
        return;
    const int32_t nr = t->nr;
    pack(t->ops, panels + (size_t)p * N * nr, (size_t)N, 0, w + (size_t)p * nr * N,
         min_i32(nr, K - p * nr), N, nr, (size_t)N, 1);
    *mark = call;
}

/* out[0, rows) x [0, NR) of panel-layout destination `o` (row stride NR):
 * the register tile of A tile `a` (depth `depth`) and B panel `bp`, stored in
 * place when whole, else through the thread's tile buffer. */
static void tile_into_panel(const cpb_trunk_t *t, const scratch_t *s, int32_t depth,
                            const float *a, const float *bp, int32_t rows, float *o)
{
    const int32_t nr = t->nr;
    if (rows == t->mr) {
        t->ops->tile(depth, a, bp, (size_t)nr, NULL, o, (size_t)nr);
        return;
    }
    t->ops->tile(depth, a, bp, (size_t)nr, NULL, s->tile, (size_t)nr);
    memcpy(o, s->tile, (size_t)rows * nr * sizeof *o);
}

/* Columns [c0, c0 + cols) of a hidden gradient for `rows` samples, in panel
 * layout (row stride NR, as the chunk's dW operand g wants it): d = d ⊙
 * ELU'(y) with y the record's rows (stride n). */
static void elu_grad_rows(const cpb_trunk_t *t, float *d, const float *y, size_t n, int32_t rows,
                          int32_t cols)
{
    for (int32_t i = 0; i < rows; i++)
        t->ops->elu_grad(d + (size_t)i * t->nr, y + (size_t)i * n, (size_t)cols);
}

/* Task (group q, row tile i) of a chunk's dh2 phase, task = q*tiles + i:
 * dh2_pre (section 2) of the tile's samples in the group's columns, straight
 * into the chunk's dW2 operand g2 and, as A tiles, into ad2 for the dh1
 * phase; and the group's share of the tile's other dW operands (dout into
 * g3; h2, h1, x into a3, a2, a1), which no hidden gradient depends on. */
static void bwd_dh2_task(void *ctx, int32_t task, int32_t thread)
{
    const bwd_call_t *c = ctx;
    const cpb_trunk_t *t = c->t;
    const atk_dims_t d = t->d;
    scratch_t *s = &t->scratch[thread];
    const int32_t q = task / c->tiles, i = task % c->tiles;
    const int32_t nr = t->nr, mr = t->mr;
    const int32_t lb = i * mr, rows = min_i32(mr, c->rows - lb);
    const size_t b = (size_t)c->b0 + lb, cr = (size_t)t->cr;
    const float *dout = c->dout + b * d.aux, *h2 = c->h2 + b * d.h2;
    int32_t lo, hi;

    pack(t->ops, s->a, (size_t)d.aux, 0, dout, rows, d.aux, mr, (size_t)d.aux, 1);
    part_of(blocks(d.h2, nr), q, c->q2, &lo, &hi);
    for (int32_t p = lo; p < hi; p++) {
        pack_wt_panel(t, s->wt3, c->p->w3, d.h2, d.aux, p, &s->packed[p], c->call);
        const int32_t c0 = p * nr, cols = min_i32(nr, d.h2 - c0);
        float *o = t->g2 + ((size_t)p * cr + lb) * nr;
        tile_into_panel(t, s, d.aux, s->a, s->wt3 + (size_t)p * d.aux * nr, rows, o);
        elu_grad_rows(t, o, h2 + c0, (size_t)d.h2, rows, cols);
        /* A(i = b, r = n) = dh2_pre[b, n] for the dh1 product */
        pack(t->ops, t->ad2 + (size_t)i * d.h2 * mr, (size_t)d.h2, (size_t)c0, o, rows, cols, mr,
             (size_t)nr, 1);
    }

    /* This tile's depth steps [lb, lb + rows) of the other dW operands,
     * B(r = b, j = n) = g[b, n] and A(i = k, r = b) = a[b, k], the group's
     * share of each one's panels or tiles. */
    const struct {
        float *dst;
        const float *src;
        int32_t n, w;
    } operands[4] = {{t->g3, dout, d.aux, nr},
                {t->a3, h2, d.h2, mr},
                {t->a2, c->h1 + b * d.h1, d.h1, mr},
                {t->a1, c->x + b * d.enc, d.enc, mr}};
    for (int32_t k = 0; k < 4; k++) {
        const int32_t w = operands[k].w, n = operands[k].n;
        part_of(blocks(n, w), q, c->q2, &lo, &hi);
        if (lo < hi)
            pack(t->ops, operands[k].dst + (size_t)lo * cr * w, cr, (size_t)lb,
                 operands[k].src + lo * w, min_i32(n, hi * w) - lo * w, rows, w, 1, (size_t)n);
    }
}

/* Task (group q, row tile i) of a chunk's dh1 phase: dh1_pre (section 2) of
 * the tile's samples in the group's columns, from the tile's ad2, straight
 * into the chunk's dW1 operand g1. */
static void bwd_dh1_task(void *ctx, int32_t task, int32_t thread)
{
    const bwd_call_t *c = ctx;
    const cpb_trunk_t *t = c->t;
    const atk_dims_t d = t->d;
    scratch_t *s = &t->scratch[thread];
    const int32_t q = task / c->tiles, i = task % c->tiles;
    const int32_t nr = t->nr, mr = t->mr;
    const int32_t lb = i * mr, rows = min_i32(mr, c->rows - lb);
    const size_t b = (size_t)c->b0 + lb, cr = (size_t)t->cr;
    uint32_t *marks = s->packed + blocks(d.h2, nr);
    int32_t lo, hi;
    part_of(blocks(d.h1, nr), q, c->q1, &lo, &hi);
    for (int32_t p = lo; p < hi; p++) {
        pack_wt_panel(t, s->wt2, c->p->w2, d.h1, d.h2, p, &marks[p], c->call);
        const int32_t c0 = p * nr, cols = min_i32(nr, d.h1 - c0);
        float *o = t->g1 + ((size_t)p * cr + lb) * nr;
        tile_into_panel(t, s, d.h2, t->ad2 + (size_t)i * d.h2 * mr,
                        s->wt2 + (size_t)p * d.h2 * nr, rows, o);
        elu_grad_rows(t, o, c->h1 + b * d.h1 + c0, (size_t)d.h1, rows, cols);
    }
}

/* Rows [k0, k0 + rows) of one weight gradient [K, N], every column, and,
 * for the layer's first row block, its bias. Two threads' regions meet only
 * where one group's rows end and the next group's begin. */
typedef struct region {
    int32_t N, k0, rows, bias;
} region_t;

/* db = sb, or db = db + sb (its first row block only). */
static void region_bias(const region_t *r, float *db, const float *sb, int add)
{
    if (!r->bias)
        return;
    if (add)
        for (int32_t j = 0; j < r->N; j++)
            db[j] = db[j] + sb[j];
    else
        memcpy(db, sb, (size_t)r->N * sizeof *db);
}

/* dst = src, or dst = dst + src (one addition, left operand first), over a
 * region's weights and bias. */
static void region_combine(const region_t *r, float *dw, float *db, const float *sw,
                           const float *sb, int add)
{
    const size_t at = (size_t)r->k0 * r->N, n = (size_t)r->rows * r->N;
    float *restrict o = dw + at;
    const float *restrict v = sw + at;
    if (add)
        for (size_t j = 0; j < n; j++)
            o[j] = o[j] + v[j];
    else
        memcpy(o, v, n * sizeof *o);
    region_bias(r, db, sb, add);
}

/* Rows of a weight gradient per grads task: whole A tiles, about 32. */
static int32_t grad_block_rows(const cpb_trunk_t *t) { return t->mr * blocks(32, t->mr); }

/* Row groups of the grads phase: those of the dh2 phase's share of the A
 * tiles (bwd_dh2_task), so that group q's rows of each dW are the A tiles
 * that group q packed, on the same thread. */
static int32_t grad_groups(const bwd_call_t *c) { return c->q2; }

/* One weight gradient as the grads phase sees it. */
typedef struct grad_layer {
    const float *a, *g; /* the chunk's packed operands */
    float *gw, *gb;     /* the caller's gradients */
    size_t ow, ob;      /* their offsets in a partial set */
    int32_t K, N;
} grad_layer_t;

/* Layer l of the grads phase: dW1, dW3, dW2 in that order (see below). */
static grad_layer_t grad_layer(const bwd_call_t *c, int32_t l)
{
    const cpb_trunk_t *t = c->t;
    const atk_dims_t d = t->d;
    if (l == 0)
        return (grad_layer_t){
            t->a1, t->g1, c->g->dw1, c->g->db1, AUXTRUNK_W1_OFFSET(&d), AUXTRUNK_B1_OFFSET(&d),
            d.enc, d.h1};
    if (l == 1)
        return (grad_layer_t){
            t->a3, t->g3, c->g->dw3, c->g->db3, AUXTRUNK_W3_OFFSET(&d), AUXTRUNK_B3_OFFSET(&d),
            d.h2,  d.aux};
    return (grad_layer_t){
        t->a2, t->g2, c->g->dw2, c->g->db2, AUXTRUNK_W2_OFFSET(&d), AUXTRUNK_B2_OFFSET(&d),
        d.h1,  d.h2};
}

/* Rows [*lo, *hi) of group q of layer L: whole A tiles, as the dh2 phase
 * cut them. */
static void group_rows(const bwd_call_t *c, const grad_layer_t *L, int32_t q, int32_t *lo,
                       int32_t *hi)
{
    const int32_t mr = c->t->mr;
    int32_t t0, t1;
    part_of(blocks(L->K, mr), q, grad_groups(c), &t0, &t1);
    *lo = t0 * mr;
    *hi = min_i32(L->K, t1 * mr);
}

/* Tasks of one row group in a chunk's grads phase: the most row blocks any
 * group has of dW1, dW3 and dW2 together (a group with fewer has tasks
 * that do nothing). */
static int32_t group_tasks(const bwd_call_t *c)
{
    const int32_t kb = grad_block_rows(c->t), mr = c->t->mr, groups = grad_groups(c);
    int32_t n = 0;
    for (int32_t l = 0; l < 3; l++) {
        const grad_layer_t L = grad_layer(c, l);
        n += blocks(blocks(blocks(L.K, mr), groups) * mr, kb);
    }
    return n;
}

/* Task (group q, j) of a chunk's grads phase, task = q * c->per + j:
 * row block j of group q's rows of dW1, dW3, dW2 (in that order), every
 * column. For the production widths each group holds the same work, so
 * with home ranges nothing needs stealing, and the A tiles a task reads
 * were packed by its own thread. */
static void bwd_grads_task(void *ctx, int32_t task, int32_t thread)
{
    const bwd_call_t *c = ctx;
    const cpb_trunk_t *t = c->t;
    const scratch_t *s = &t->scratch[thread];
    const int32_t nr = t->nr, mr = t->mr, kb = grad_block_rows(t);
    const int32_t q = task / c->per;
    int32_t j = task % c->per, l = 0, lo = 0, hi = 0;
    for (;; l++) {
        if (l == 3)
            return;
        const grad_layer_t L = grad_layer(c, l);
        group_rows(c, &L, q, &lo, &hi);
        const int32_t nb = blocks(hi - lo, kb);
        if (j < nb)
            break;
        j -= nb;
    }
    const grad_layer_t L = grad_layer(c, l);
    region_t r;
    r.N = L.N;
    r.k0 = lo + j * kb;
    r.rows = min_i32(kb, hi - r.k0);
    r.bias = r.k0 == 0;
    const size_t cr = (size_t)t->cr;

    /* Where this chunk's partial goes: straight to the caller's gradients
     * when the batch is one chunk, else the stack slot of leaf `chunk`. */
    const int single = c->nc == 1;
    const int add = single && c->accumulate;
    int32_t depth = 0;
    float *dw = L.gw, *db = L.gb;
    if (!single) {
        depth = __builtin_popcount((unsigned)c->chunk);
        dw = t->stack + (size_t)depth * t->set + L.ow;
        db = t->stack + (size_t)depth * t->set + L.ob;
    }

    /* Section 3, chunk partials: pw[k, n] = Σ_b a[b,k]·g[b,n] (fmaf chain),
     * pb[n] = Σ_b g[b,n] (additions), samples ascending from 0.0f. A panel
     * stays in L1 while the block's A tiles pass over it. */
    for (int32_t p = 0; p < blocks(L.N, nr); p++) {
        const float *panel = L.g + (size_t)p * cr * nr;
        const int32_t c0 = p * nr, cols = min_i32(nr, L.N - c0);
        for (int32_t k0 = r.k0; k0 < r.k0 + r.rows; k0 += mr) {
            const float *ak = L.a + (size_t)(k0 / mr) * cr * mr;
            const int32_t kr = min_i32(mr, L.K - k0);
            float *o = dw + (size_t)k0 * L.N + c0;
            if (!add && kr == mr && cols == nr) {
                t->ops->tile(c->rows, ak, panel, (size_t)nr, NULL, o, (size_t)L.N);
                continue;
            }
            t->ops->tile(c->rows, ak, panel, (size_t)nr, NULL, s->tile, (size_t)nr);
            for (int32_t k = 0; k < kr; k++)
                for (int32_t i = 0; i < cols; i++) {
                    const float v = s->tile[(size_t)k * nr + i];
                    o[(size_t)k * L.N + i] = add ? o[(size_t)k * L.N + i] + v : v;
                }
        }
        if (!r.bias)
            continue;
        /* pb[n] = Σ_b g[b,n] (additions, samples ascending from 0.0f) as a
         * tile product with A = 1: fmaf(1.0f, g, p) rounds 1·g + p = p + g
         * once, the addition's own result, in the same order. */
        const float *pb = s->tile;
        t->ops->tile(c->rows, t->ones, panel, (size_t)nr, NULL, s->tile, (size_t)nr);
        for (int32_t i = 0; i < cols; i++)
            db[c0 + i] = add ? db[c0 + i] + pb[i] : pb[i];
    }
    if (single)
        return;

    /* The binary counter's carries for this region (see the file comment),
     * then, after the last chunk, the fold and the store. */
    float *st = t->stack;
    const size_t n = t->set;
    depth++;
    for (uint32_t pushed = (uint32_t)c->chunk + 1; (pushed & 1u) == 0; pushed >>= 1, depth--)
        region_combine(&r, st + (size_t)(depth - 2) * n + L.ow, st + (size_t)(depth - 2) * n + L.ob,
                       st + (size_t)(depth - 1) * n + L.ow, st + (size_t)(depth - 1) * n + L.ob, 1);
    if (c->chunk != c->nc - 1)
        return;
    for (; depth > 1; depth--)
        region_combine(&r, st + (size_t)(depth - 2) * n + L.ow, st + (size_t)(depth - 2) * n + L.ob,
                       st + (size_t)(depth - 1) * n + L.ow, st + (size_t)(depth - 1) * n + L.ob, 1);
    region_combine(&r, L.gw, L.gb, st + L.ow, st + L.ob, c->accumulate);
}

void cpb_backward(cpb_trunk_t *t, const atk_params_t *p, const float *x, const float *h1,
                  const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                  int accumulate)
{
    if (++t->calls == 0) /* 0 means "never packed" */
        t->calls = 1;
    bwd_call_t c = {.t = t,
                    .p = p,
                    .x = x,
                    .h1 = h1,
                    .h2 = h2,
                    .dout = dout,
                    .g = g,
                    .accumulate = accumulate,
                    .nc = auxtrunk_canon_chunks(batch),
                    .q2 = column_groups(t, t->d.h2),
                    .q1 = column_groups(t, t->d.h1),
                    .call = t->calls};
    c.per = group_tasks(&c); /* needs q2 */
    for (c.chunk = 0; c.chunk < c.nc; c.chunk++) {
        c.b0 = c.chunk * C;
        c.rows = min_i32(C, batch - c.b0);
        c.tiles = blocks(c.rows, t->mr);
        cpb_pool_run(t->pool, c.q2 * c.tiles, bwd_dh2_task, &c);
        cpb_pool_run(t->pool, c.q1 * c.tiles, bwd_dh1_task, &c);
        cpb_pool_run(t->pool, grad_groups(&c) * c.per, bwd_grads_task, &c);
    }
}
