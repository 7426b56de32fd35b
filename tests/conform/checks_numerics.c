/*
 * checks_numerics.c — groups 4 to 7: numerics against the double-precision
 * reference, the stop-gradient and output rules, determinism and exactness,
 * and the target-network forward.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auxtrunk_canon.h"
#include "canon32.h"
#include "checks.h"
#include "device.h"

static int claims(const cf_plugin_t *pl, uint64_t cap) { return (pl->api.caps & cap) != 0; }

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* One problem with a handle the caller owns: inputs, buffers, outputs. */
typedef struct problem {
    cf_inputs_t in;
    cf_bufs_t b;
    cf_outputs_t o;
} problem_t;

static int problem_make(cf_ctx_t *ctx, const cf_plugin_t *pl, problem_t *p, cf_topo_t t, int batch,
                        size_t misalign)
{
    if (cf_inputs_make(&p->in, &ctx->rng, t, batch) || cf_outputs_make(&p->o, &p->in))
        return cf_fail(ctx, "runner: out of host memory");
    if (cf_bufs_make(&p->b, pl->space, &p->in, misalign))
        return cf_fail(ctx, "runner: cannot allocate plugin buffers: %s", cfd_error());
    return 0;
}

static void problem_free(problem_t *p)
{
    cf_bufs_free(&p->b);
    free(p->in.x);
    free(p->in.dout);
    free(p->o.out);
    for (int i = 0; i < CF_NPARAM; i++) {
        free(p->in.p[i]);
        free(p->o.g[i]);
    }
}

/* Topologies and batch sizes of the numeric checks: degenerate widths,
 * small odd widths, the batch sizes 1, odd, prime and the configured
 * maximum, batches that cross one and several canonical chunks (256), and
 * the production topology. Sized to stay fast on a CPU. */
typedef struct num_case {
    cf_topo_t t;
    int batches[6]; /* 0-terminated */
} num_case_t;

static const num_case_t num_cases[] = {
    {{1, 1, 1, 1, 64}, {1, 7, 61, 64}},  {{3, 5, 7, 2, 769}, {1, 7, 131, 257, 769}},
    {{17, 33, 9, 5, 523}, {1, 9, 523}},  {{64, 48, 40, 16, 300}, {1, 257, 300}},
    {{256, 256, 256, 128, 37}, {1, 37}},
};
#define N_NUM_CASES (sizeof num_cases / sizeof num_cases[0])

/* Fast mode runs these after num_cases: the production topology from
 * B = 1,024 on, where the CUDA plugins' tensor-core kernels take over from
 * their exact ones (every case above stays below that). */
static const num_case_t fast_cases[] = {
    {{256, 256, 256, 128, 2048}, {1024, 2048}},
};
#define N_FAST_CASES (sizeof fast_cases / sizeof fast_cases[0])

/* ------------------------------------------------------------------------- */
/* numerics.forward / numerics.backward                                      */

static void numerics_sweep(cf_ctx_t *ctx, int grads, uint32_t config_flags, double tol)
{
    const cf_plugin_t *pl = &ctx->pl;
    double worst = 0;
    int n_runs = 0;
    const int fast = (config_flags & AUXTRUNK_CONFIG_FAST) != 0;
    for (size_t c = 0; c < N_NUM_CASES + (fast ? N_FAST_CASES : 0); c++) {
        const num_case_t *nc = c < N_NUM_CASES ? &num_cases[c] : &fast_cases[c - N_NUM_CASES];
        const cf_topo_t t = nc->t;
        auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
        cfg.flags = config_flags;
        auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
        if (!h)
            return;
        for (const int *bp = nc->batches; *bp; bp++) {
            problem_t p;
            cf_ref_t r;
            if (problem_make(ctx, pl, &p, t, *bp, 0))
                return;
            if (cf_ref_make(&r, &p.in)) {
                cf_fail(ctx, "runner: out of host memory");
                return;
            }
            char what[96];
            snprintf(what, sizeof what, "%dx%dx%dx%d B=%d", t.enc, t.h1, t.h2, t.aux, *bp);
            char w2[128];
            snprintf(w2, sizeof w2, "%s infer", what);
            if (cf_forward(ctx, pl, h, &p.b, *bp, &p.o, NULL) ||
                cf_expect_close_all(ctx, what, &p.in, &p.o, &r, 1, 0, tol, &worst))
                return;
            if (grads) {
                if (cf_backward(ctx, pl, h, &p.b, *bp, 0, &p.o, NULL) ||
                    cf_expect_close_all(ctx, what, &p.in, &p.o, &r, 0, 1, tol, &worst))
                    return;
            } else if (cf_infer(ctx, pl, h, &p.b, *bp, &p.o, NULL) ||
                       cf_expect_close_all(ctx, w2, &p.in, &p.o, &r, 1, 0, tol, &worst)) {
                return;
            }
            cf_ref_free(&r);
            problem_free(&p);
            n_runs++;
        }
        pl->api.destroy(h);
    }
    cf_pass_detail(ctx, "%d problems, worst relative error %.2g at %s (limit %.0e)", n_runs, worst,
                   ctx->worst_at, tol);
}

void check_numerics_forward(cf_ctx_t *ctx) { numerics_sweep(ctx, 0, 0, CF_TOL); }

void check_numerics_backward(cf_ctx_t *ctx) { numerics_sweep(ctx, 1, 0, CF_TOL); }

void check_numerics_fast_mode(cf_ctx_t *ctx)
{
    if (!claims(&ctx->pl, AUXTRUNK_CAP_FAST_MODE)) {
        cf_skip(ctx, "plugin does not claim FAST_MODE");
        return;
    }
    numerics_sweep(ctx, 1, AUXTRUNK_CONFIG_FAST, CF_TOL_FAST);
}

/* ------------------------------------------------------------------------- */
/* numerics.accumulate                                                       */

void check_numerics_accumulate(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const cf_topo_t t = {17, 33, 9, 5, 523};
    const int B = 300;
    problem_t p;
    cf_ref_t r;
    if (problem_make(ctx, pl, &p, t, B, 0) || cf_ref_make(&r, &p.in))
        return;
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
    if (!h)
        return;
    cf_outputs_t over, acc;
    if (cf_outputs_make(&over, &p.in) || cf_outputs_make(&acc, &p.in)) {
        cf_fail(ctx, "runner: out of host memory");
        return;
    }
    if (cf_forward(ctx, pl, h, &p.b, B, NULL, NULL) ||
        cf_backward(ctx, pl, h, &p.b, B, 0, &over, NULL))
        return;
    /* Existing gradients g0; ACCUMULATE gives g0 + computed. */
    float *g0[CF_NPARAM];
    cf_ref_t want;
    memset(&want, 0, sizeof want);
    for (int i = 0; i < CF_NPARAM; i++) {
        size_t n = cf_param_len(p.in.d, i);
        g0[i] = malloc(n * sizeof(float));
        want.g[i] = malloc(n * sizeof(double));
        tst_rng_fill(&ctx->rng, g0[i], n, -2.0f, 2.0f);
        for (size_t k = 0; k < n; k++)
            want.g[i][k] = (double)g0[i][k] + r.g[i][k];
        if (cf_buf_put(&p.b.g[i], g0[i])) {
            cf_fail(ctx, "runner: upload failed: %s", cfd_error());
            return;
        }
    }
    double worst = 0;
    if (cf_backward(ctx, pl, h, &p.b, B, AUXTRUNK_BACKWARD_ACCUMULATE, &acc, NULL) ||
        cf_expect_close_all(ctx, "ACCUMULATE onto random gradients", &p.in, &acc, &want, 0, 1,
                            CF_TOL, &worst))
        return;
    if (claims(pl, AUXTRUNK_CAP_EXACT)) {
        /* One rounding per element, after the canonical sum: g0 + result. */
        for (int i = 0; i < CF_NPARAM; i++) {
            size_t n = cf_param_len(p.in.d, i);
            for (size_t k = 0; k < n; k++)
                over.g[i][k] = g0[i][k] + over.g[i][k];
        }
        if (cf_expect_same_all(ctx, "EXACT: ACCUMULATE vs g0 + overwrite result", &p.in, &acc,
                               &over, 0, 1))
            return;
    }
    pl->api.destroy(h);
    cf_pass_detail(ctx, "worst relative error %.2g%s", worst,
                   claims(pl, AUXTRUNK_CAP_EXACT) ? "; bit-exact g0 + result" : "");
}

/* ------------------------------------------------------------------------- */
/* numerics.finite_diff                                                      */

void check_numerics_finite_diff(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const cf_topo_t t = {6, 7, 5, 3, 16};
    const int B = 11, PER_TENSOR = 4;
    /* The step: small enough that a pre-activation crossing the ELU's
     * second-derivative kink costs ~1e-5 of the gradient, large enough that
     * the double loss difference keeps ~11 digits. */
    const double step = 1.0 / 4096.0;
    problem_t p;
    if (problem_make(ctx, pl, &p, t, B, 0))
        return;
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
    if (!h || cf_forward(ctx, pl, h, &p.b, B, NULL, NULL) ||
        cf_backward(ctx, pl, h, &p.b, B, 0, &p.o, NULL))
        return;
    double worst = 0;
    int probes = 0;
    for (int i = 0; i < CF_NPARAM; i++) {
        size_t n = cf_param_len(p.in.d, i);
        double scale = 0;
        for (size_t k = 0; k < n; k++)
            scale = fmax(scale, fabs((double)p.o.g[i][k]));
        for (int j = 0; j < PER_TENSOR; j++) {
            size_t k = (size_t)(tst_rng_next(&ctx->rng) % n);
            float keep = p.in.p[i][k];
            float up = (float)((double)keep + step), down = (float)((double)keep - step);
            ref64_params_t rp = {p.in.p[0], p.in.p[1], p.in.p[2], p.in.p[3], p.in.p[4], p.in.p[5]};
            p.in.p[i][k] = up;
            double lu = ref64_loss(p.in.d, &rp, p.in.x, p.in.dout, B);
            p.in.p[i][k] = down;
            double ld = ref64_loss(p.in.d, &rp, p.in.x, p.in.dout, B);
            p.in.p[i][k] = keep;
            double fd = (lu - ld) / ((double)up - (double)down);
            double got = p.o.g[i][k];
            double tol = 1e-3 * fmax(fabs(fd), 0.1 * scale) + 1e-6;
            double err = fabs(got - fd);
            if (err / (tol / 1e-3) > worst)
                worst = err / (tol / 1e-3);
            probes++;
            if (err > tol) {
                cf_fail(ctx,
                        "%s[%zu] = %.9g but the central finite difference of the loss (in "
                        "double, step %.3g) is %.9g: error %.3g > %.3g",
                        cf_grad_names[i], k, got, step, fd, err, tol);
                return;
            }
        }
    }
    pl->api.destroy(h);
    cf_pass_detail(ctx, "%d probes, worst error %.2g of the gradient's scale", probes, worst);
}

/* ------------------------------------------------------------------------- */
/* numerics.nonfinite                                                        */

/* 0 finite, 1 NaN, 2 +Inf, 3 -Inf */
static int fclass(double v) { return isnan(v) ? 1 : isinf(v) ? (v > 0 ? 2 : 3) : 0; }
static const char *const fclass_name[4] = {"finite", "NaN", "+Inf", "-Inf"};

/* What is required: out[b, j] is NaN, +Inf, -Inf or finite exactly where the
 * double-precision reference's is (IEEE semantics: which of these a sum or
 * product is does not depend on the order of operations), and the finite
 * ones are close to it. Rows of x without a non-finite value are unaffected. */
void check_numerics_nonfinite(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const cf_topo_t t = {8, 16, 12, 6, 8};
    const int B = 8;
    problem_t p;
    if (problem_make(ctx, pl, &p, t, B, 0))
        return;
    const struct {
        int b, k;
        float v;
    } inject[] = {{1, 3, NAN},      {3, 0, INFINITY},  {4, 7, -INFINITY}, {5, 2, NAN},
                  {5, 5, INFINITY}, {7, 1, -INFINITY}, {7, 4, INFINITY}};
    for (size_t i = 0; i < sizeof inject / sizeof inject[0]; i++)
        p.in.x[inject[i].b * t.enc + inject[i].k] = inject[i].v;
    if (cf_buf_put(&p.b.x, p.in.x)) {
        cf_fail(ctx, "runner: upload failed: %s", cfd_error());
        return;
    }
    double *ref = malloc((size_t)B * t.aux * sizeof *ref);
    ref64_params_t rp = {p.in.p[0], p.in.p[1], p.in.p[2], p.in.p[3], p.in.p[4], p.in.p[5]};
    ref64_forward(p.in.d, &rp, p.in.x, B, NULL, NULL, ref);
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
    if (!h)
        return;
    int counts[4] = {0, 0, 0, 0};
    for (int call = 0; call < 2; call++) {
        const char *name = call == 0 ? "forward" : "infer";
        if (cf_bufs_poison(&p.b, CF_POISON_FINITE) ||
            (call == 0 ? cf_forward(ctx, pl, h, &p.b, B, &p.o, NULL)
                       : cf_infer(ctx, pl, h, &p.b, B, &p.o, NULL)))
            return;
        double scale = 0;
        for (int i = 0; i < B * t.aux; i++)
            if (isfinite(ref[i]))
                scale = fmax(scale, fabs(ref[i]));
        for (int i = 0; i < B * t.aux; i++) {
            int cg = fclass(p.o.out[i]), cr = fclass(ref[i]);
            if (call == 0)
                counts[cr]++;
            if (cg != cr) {
                cf_fail(ctx,
                        "%s: out[b=%d, j=%d] is %s (%g) where the reference is %s: non-finite "
                        "x values must propagate with IEEE semantics",
                        name, i / t.aux, i % t.aux, fclass_name[cg], (double)p.o.out[i],
                        fclass_name[cr]);
                return;
            }
            if (cr == 0 && fabs((double)p.o.out[i] - ref[i]) > CF_TOL * (scale > 0 ? scale : 1)) {
                cf_fail(ctx,
                        "%s: out[b=%d, j=%d] = %.9g, reference %.9g (x has non-finite values "
                        "in other rows)",
                        name, i / t.aux, i % t.aux, (double)p.o.out[i], ref[i]);
                return;
            }
        }
    }
    pl->api.destroy(h);
    cf_pass_detail(ctx,
                   "NaN and +-Inf in 5 of 8 rows of x: %d NaN, %d +Inf, %d -Inf, %d finite "
                   "outputs, all as the reference",
                   counts[1], counts[2], counts[3], counts[0]);
}

/* ------------------------------------------------------------------------- */
/* numerics.unaligned                                                        */

void check_numerics_unaligned(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const cf_topo_t t = {13, 11, 7, 5, 300};
    const int batches[] = {1, 33, 300};
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
    if (!h)
        return;
    double worst = 0;
    for (size_t bi = 0; bi < 3; bi++) {
        const int B = batches[bi];
        problem_t p, q; /* q: the same inputs at 4-byte (not 8- or 16-byte) alignment */
        cf_ref_t r;
        if (problem_make(ctx, pl, &p, t, B, 0) || cf_ref_make(&r, &p.in) ||
            cf_outputs_make(&q.o, &p.in))
            return;
        q.in = p.in;
        if (cf_bufs_make(&q.b, pl->space, &q.in, 4)) {
            cf_fail(ctx, "runner: cannot allocate plugin buffers: %s", cfd_error());
            return;
        }
        char what[64];
        snprintf(what, sizeof what, "4-byte-aligned buffers, B=%d", B);
        if (cf_forward(ctx, pl, h, &p.b, B, &p.o, NULL) ||
            cf_backward(ctx, pl, h, &p.b, B, 0, &p.o, NULL) ||
            cf_forward(ctx, pl, h, &q.b, B, &q.o, NULL) ||
            cf_backward(ctx, pl, h, &q.b, B, 0, &q.o, NULL) ||
            cf_expect_close_all(ctx, what, &q.in, &q.o, &r, 1, 1, CF_TOL, &worst))
            return;
        if (claims(pl, AUXTRUNK_CAP_DETERMINISTIC) &&
            cf_expect_same_all(ctx, "DETERMINISTIC: 4-byte-aligned vs aligned buffers", &q.in, &q.o,
                               &p.o, 1, 1))
            return;
    }
    pl->api.destroy(h);
    cf_pass_detail(ctx, "every pointer at an address = 4 mod 16; worst relative error %.2g", worst);
}

/* ------------------------------------------------------------------------- */
/* stopgrad.*                                                                */

static const cf_topo_t sg_topo = {12, 10, 8, 6, 300};
static const int sg_batches[] = {5, 300};

typedef struct sg_call {
    const char *name;
    int kind; /* 0 forward, 1 infer, 2 backward, 3 backward ACCUMULATE */
} sg_call_t;
static const sg_call_t sg_calls[] = {
    {"forward", 0}, {"infer", 1}, {"backward", 2}, {"backward(ACCUMULATE)", 3}};

static int32_t sg_run(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, cf_bufs_t *b,
                      int B, int kind)
{
    const auxtrunk_api_t *a = &pl->api;
    cf_stage(ctx, "%s(B=%d)", sg_calls[kind].name, B);
    int32_t rc = kind == 0   ? a->forward(h, &b->params, b->x.p, B, b->out.p, 0, NULL)
                 : kind == 1 ? a->infer(h, &b->params, b->x.p, B, b->out.p, 0, NULL)
                             : a->backward(h, &b->params, b->x.p, b->dout.p, B, &b->grads,
                                           kind == 3 ? AUXTRUNK_BACKWARD_ACCUMULATE : 0, NULL);
    if (rc != AUXTRUNK_OK)
        return cf_fail(ctx, "%s(B=%d) returned %s", sg_calls[kind].name, B, cf_status_name(rc));
    return cf_plugin_wait(ctx, pl, sg_calls[kind].name);
}

/* Names an input buffer of b: 0 x, 1 dout, 2.. parameters. */
static cf_buf_t *sg_input(cf_bufs_t *b, int i, const char **name)
{
    if (i == 0) {
        *name = "x";
        return &b->x;
    }
    if (i == 1) {
        *name = "dout";
        return &b->dout;
    }
    *name = cf_param_names[i - 2];
    return &b->p[i - 2];
}

void check_stopgrad_x_unchanged(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    for (size_t bi = 0; bi < 2; bi++) {
        const int B = sg_batches[bi];
        problem_t p;
        if (problem_make(ctx, pl, &p, sg_topo, B, 0))
            return;
        auxtrunk_config_t cfg =
            cf_config(sg_topo.enc, sg_topo.h1, sg_topo.h2, sg_topo.aux, sg_topo.max_batch);
        auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
        if (!h)
            return;
        unsigned char *snap[2 + CF_NPARAM];
        for (int i = 0; i < 2 + CF_NPARAM; i++) {
            const char *name;
            if (cf_buf_snapshot(sg_input(&p.b, i, &name), &snap[i])) {
                cf_fail(ctx, "runner: cannot snapshot %s: %s", name, cfd_error());
                return;
            }
        }
        for (int c = 0; c < 4; c++) {
            if (sg_run(ctx, pl, h, &p.b, B, c))
                return;
            for (int i = 0; i < 2 + CF_NPARAM; i++) {
                const char *name;
                cf_buf_t *buf = sg_input(&p.b, i, &name);
                long long where = 0;
                int d = cf_buf_diff(buf, snap[i], &where);
                if (d < 0) {
                    cf_fail(ctx, "runner: cannot read %s back: %s", name, cfd_error());
                    return;
                }
                if (d == 0)
                    continue;
                if (where >= 0 && where < (long long)(buf->n * 4)) {
                    float now;
                    size_t e = (size_t)where / 4;
                    float *all = malloc(buf->n * 4);
                    cf_buf_get(buf, all);
                    now = all[e];
                    const float *orig = i == 0 ? p.in.x : i == 1 ? p.in.dout : p.in.p[i - 2];
                    cf_fail(ctx,
                            "%s(B=%d) wrote into %s: element %zu changed from %.9g (0x%08x) to "
                            "%.9g (0x%08x)%s",
                            sg_calls[c].name, B, name, e, (double)orig[e],
                            (unsigned)bits_of(orig[e]), (double)now, (unsigned)bits_of(now),
                            i == 0 ? ": x is read-only (stop-gradient)" : ": inputs are read-only");
                } else {
                    cf_fail(ctx, "%s(B=%d) wrote into the guard zone %s %s (byte %lld)",
                            sg_calls[c].name, B, where < 0 ? "before" : "after", name, where);
                }
                return;
            }
        }
        pl->api.destroy(h);
        problem_free(&p);
    }
    cf_pass_detail(ctx, "x, dout and parameters with guard zones, byte for byte, after forward, "
                        "infer, backward and backward(ACCUMULATE)");
}

/* Host structs the plugin reads during init and the entry, each in a
 * read-only page flush against a PROT_NONE one. */
static int ro_structs(cf_ctx_t *ctx, const cf_plugin_t *pl)
{
    cf_pages_t cfg_pg, host_pg;
    const auxtrunk_config_t cfg = cf_config(12, 10, 8, 6, 64);
    const auxtrunk_host_info_t host = {sizeof host, AUXTRUNK_VERSION(1, 0), AUXTRUNK_VERSION(1, 0),
                                       0};
    if (cf_pages_alloc(&cfg_pg, "the config", sizeof cfg, 1, 1) ||
        cf_pages_alloc(&host_pg, "the host info", sizeof host, 1, 1))
        return cf_fail(ctx, "runner: mmap failed");
    memcpy(cfg_pg.p, &cfg, sizeof cfg);
    memcpy(host_pg.p, &host, sizeof host);
    cf_pages_protect(&cfg_pg, 0);
    cf_pages_protect(&host_pg, 0);
    cf_pages_t *const pgs[2] = {&cfg_pg, &host_pg};
    cf_pages_watch(ctx, pgs, 2);
    cf_stage(ctx, "init with its const config in a read-only page");
    cf_pages_call("init");
    auxtrunk_handle_t *h = NULL;
    int32_t rc = pl->api.init((const auxtrunk_config_t *)cfg_pg.p, &h);
    cf_stage(ctx, "the entry with its const host info in a read-only page");
    cf_pages_call("the entry");
    auxtrunk_api_t api;
    memset(&api, 0, sizeof api);
    api.struct_size = sizeof api;
    int32_t erc = pl->entry((const auxtrunk_host_info_t *)host_pg.p, &api);
    cf_pages_unwatch();
    if (cf_expect_status(ctx, rc, AUXTRUNK_OK, "init with its config in a read-only page") ||
        cf_expect_status(ctx, erc, AUXTRUNK_OK, "the entry with its host info in a read-only page"))
        return -1;
    pl->api.destroy(h);
    cf_pages_free(&cfg_pg);
    cf_pages_free(&host_pg);
    return 0;
}

/* One round of forward, infer and backward with x, dout and the six
 * parameters in read-only pages, flush against the PROT_NONE page after
 * (at_end) or before them. */
static int ro_inputs(cf_ctx_t *ctx, const cf_plugin_t *pl, int at_end)
{
    const int B = 37;
    problem_t p;
    cf_ref_t r;
    if (problem_make(ctx, pl, &p, sg_topo, B, 0) || cf_ref_make(&r, &p.in))
        return -1;
    cf_pages_t pg[2 + CF_NPARAM];
    const float *src[2 + CF_NPARAM] = {p.in.x, p.in.dout};
    size_t n[2 + CF_NPARAM] = {(size_t)B * sg_topo.enc, (size_t)B * sg_topo.aux};
    const char *names[2 + CF_NPARAM] = {"x", "dout"};
    for (int i = 0; i < CF_NPARAM; i++) {
        src[2 + i] = p.in.p[i];
        n[2 + i] = cf_param_len(p.in.d, i);
        names[2 + i] = cf_param_names[i];
    }
    cf_pages_t *pgs[2 + CF_NPARAM];
    for (int i = 0; i < 2 + CF_NPARAM; i++) {
        if (cf_pages_alloc(&pg[i], names[i], n[i] * 4, 4, at_end))
            return cf_fail(ctx, "runner: mmap failed");
        memcpy(pg[i].p, src[i], n[i] * 4);
        cf_pages_protect(&pg[i], 0);
        pgs[i] = &pg[i];
    }
    const float *x = (const float *)pg[0].p, *dout = (const float *)pg[1].p;
    const auxtrunk_params_t params = {sizeof params,          0,
                                      (const float *)pg[2].p, (const float *)pg[3].p,
                                      (const float *)pg[4].p, (const float *)pg[5].p,
                                      (const float *)pg[6].p, (const float *)pg[7].p};
    auxtrunk_config_t cfg =
        cf_config(sg_topo.enc, sg_topo.h1, sg_topo.h2, sg_topo.aux, sg_topo.max_batch);
    auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
    if (!h)
        return -1;
    const auxtrunk_api_t *a = &pl->api;
    const char *where = at_end ? "flush against a PROT_NONE page after them"
                               : "flush against a PROT_NONE page before them";
    cf_pages_watch(ctx, pgs, 2 + CF_NPARAM);
    for (int c = 0; c < 4; c++) {
        char call[64];
        snprintf(call, sizeof call, "%s(B=%d)", sg_calls[c].name, B);
        cf_stage(ctx, "%s with x, dout and the parameters in read-only pages %s", call, where);
        cf_pages_call(call);
        int32_t rc = c == 0   ? a->forward(h, &params, x, B, p.b.out.p, 0, NULL)
                     : c == 1 ? a->infer(h, &params, x, B, p.b.out.p, 0, NULL)
                              : a->backward(h, &params, x, dout, B, &p.b.grads,
                                            c == 3 ? AUXTRUNK_BACKWARD_ACCUMULATE : 0, NULL);
        if (rc != AUXTRUNK_OK) {
            cf_pages_unwatch();
            return cf_fail(ctx, "%s with inputs in read-only pages returned %s", call,
                           cf_status_name(rc));
        }
        if (c == 3)
            break;
        if (cf_bufs_fetch(&p.b, &p.o, c < 2, c == 2))
            return cf_fail(ctx, "runner: cannot read results");
        char what[160];
        snprintf(what, sizeof what, "%s with inputs in read-only pages", call);
        if (cf_expect_close_all(ctx, what, &p.in, &p.o, &r, c < 2, c == 2, CF_TOL, NULL))
            return -1;
    }
    cf_pages_unwatch();
    a->destroy(h);
    for (int i = 0; i < 2 + CF_NPARAM; i++)
        cf_pages_free(&pg[i]);
    problem_free(&p);
    cf_ref_free(&r);
    return 0;
}

void check_stopgrad_inputs_read_only(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    if (ro_structs(ctx, pl))
        return;
    if (pl->space != CF_SPACE_HOST) {
        cf_pass_detail(ctx, "config and host info in read-only pages (x, dout and the parameters "
                            "are device memory: see stopgrad.x_unchanged)");
        return;
    }
    if (ro_inputs(ctx, pl, 1) || ro_inputs(ctx, pl, 0))
        return;
    cf_pass_detail(ctx, "config, host info, x, dout and the parameters in read-only pages, each "
                        "against a PROT_NONE page after it and then before it");
}

/* backward's x and params are its own arguments: given equal copies in
 * other buffers, with the forward's buffers poisoned, it gives the same
 * gradients. */
void check_stopgrad_backward_inputs(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const int B = 37;
    cf_setup_t s;
    cf_ref_t r;
    cf_bufs_t copy;
    cf_outputs_t want;
    if (cf_setup_make(ctx, pl, &s, sg_topo, B) || cf_ref_make(&r, &s.in) ||
        cf_outputs_make(&want, &s.in))
        return;
    if (cf_bufs_make(&copy, pl->space, &s.in, 4)) {
        cf_fail(ctx, "runner: cannot allocate plugin buffers: %s", cfd_error());
        return;
    }
    if (cf_forward(ctx, pl, s.h, &s.b, B, NULL, NULL) ||
        cf_backward(ctx, pl, s.h, &s.b, B, 0, &want, NULL))
        return;
    /* The forward's own x and parameters now hold NaN. */
    if (cf_buf_fill(&s.b.x, CF_POISON_NAN)) {
        cf_fail(ctx, "runner: cannot poison x: %s", cfd_error());
        return;
    }
    for (int i = 0; i < CF_NPARAM; i++)
        if (cf_buf_fill(&s.b.p[i], CF_POISON_NAN)) {
            cf_fail(ctx, "runner: cannot poison %s: %s", cf_param_names[i], cfd_error());
            return;
        }
    const char *what = "backward given equal copies of x and the parameters in other buffers "
                       "(the forward's own poisoned with NaN)";
    cf_stage(ctx, "%s", what);
    int32_t rc =
        pl->api.backward(s.h, &copy.params, copy.x.p, copy.dout.p, B, &copy.grads, 0, NULL);
    if (cf_expect_status(ctx, rc, AUXTRUNK_OK, what) || cf_plugin_wait(ctx, pl, "backward"))
        return;
    if (cf_bufs_fetch(&copy, &s.o, 0, 1)) {
        cf_fail(ctx, "runner: cannot read results: %s", cfd_error());
        return;
    }
    if (cf_expect_close_all(ctx, what, &s.in, &s.o, &r, 0, 1, CF_TOL, NULL))
        return;
    if (claims(pl, AUXTRUNK_CAP_DETERMINISTIC) &&
        cf_expect_same_all(ctx, "DETERMINISTIC: backward on the copies vs on the forward's buffers",
                           &s.in, &s.o, &want, 0, 1))
        return;
    pl->api.destroy(s.h);
    cf_pass_detail(ctx, "backward reads x and the parameters through its own arguments");
}

void check_stopgrad_outputs_written(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const uint32_t poisons[2] = {CF_POISON_NAN, CF_POISON_FINITE};
    for (size_t bi = 0; bi < 2; bi++) {
        const int B = sg_batches[bi];
        problem_t p;
        if (problem_make(ctx, pl, &p, sg_topo, B, 0))
            return;
        auxtrunk_config_t cfg =
            cf_config(sg_topo.enc, sg_topo.h1, sg_topo.h2, sg_topo.aux, sg_topo.max_batch);
        auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
        if (!h)
            return;
        for (int round = 0; round < 2; round++) {
            for (int c = 0; c < 3; c++) {
                if (cf_bufs_poison(&p.b, poisons[round]) || sg_run(ctx, pl, h, &p.b, B, c))
                    return;
                if (cf_bufs_fetch(&p.b, &p.o, 1, 1)) {
                    cf_fail(ctx, "runner: cannot read results: %s", cfd_error());
                    return;
                }
                for (int i = (c == 2 ? 0 : -1); i < (c == 2 ? CF_NPARAM : 0); i++) {
                    const float *v = i < 0 ? p.o.out : p.o.g[i];
                    size_t n = i < 0 ? (size_t)B * sg_topo.aux : cf_param_len(p.in.d, i);
                    const char *name = i < 0 ? "out" : cf_grad_names[i];
                    size_t unwritten = 0, first = 0;
                    for (size_t k = 0; k < n; k++)
                        if (bits_of(v[k]) == poisons[round] || !isfinite(v[k])) {
                            if (!unwritten++)
                                first = k;
                        }
                    if (unwritten) {
                        cf_fail(ctx,
                                "%s(B=%d): %zu of %zu elements of %s not written (still the "
                                "poison 0x%08x or not finite), first at index %zu",
                                sg_calls[c].name, B, unwritten, n, name, (unsigned)poisons[round],
                                first);
                        return;
                    }
                }
            }
        }
        pl->api.destroy(h);
        problem_free(&p);
    }
    cf_pass_detail(ctx, "out and the six gradients fully written over NaN and finite poison");
}

void check_stopgrad_guard_zones(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    for (size_t bi = 0; bi < 2; bi++) {
        const int B = sg_batches[bi];
        for (size_t mis = 0; mis <= 4; mis += 4) {
            problem_t p;
            if (problem_make(ctx, pl, &p, sg_topo, B, mis))
                return;
            auxtrunk_config_t cfg =
                cf_config(sg_topo.enc, sg_topo.h1, sg_topo.h2, sg_topo.aux, sg_topo.max_batch);
            auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
            if (!h)
                return;
            for (int c = 0; c < 4; c++) {
                if (sg_run(ctx, pl, h, &p.b, B, c))
                    return;
                for (int i = -1; i < CF_NPARAM; i++) {
                    const cf_buf_t *buf = i < 0 ? &p.b.out : &p.b.g[i];
                    const char *name = i < 0 ? "out" : cf_grad_names[i];
                    long long where = 0;
                    int g = cf_buf_guards(buf, &where);
                    if (g < 0) {
                        cf_fail(ctx, "runner: cannot read %s back: %s", name, cfd_error());
                        return;
                    }
                    if (g > 0) {
                        long long past = where - (long long)(buf->n * 4);
                        if (where < 0)
                            cf_fail(ctx, "%s(B=%d) wrote %lld bytes before the start of %s",
                                    sg_calls[c].name, B, -where, name);
                        else
                            cf_fail(ctx,
                                    "%s(B=%d) wrote past the end of %s (%zu floats): byte %lld "
                                    "after it (element %lld)",
                                    sg_calls[c].name, B, name, buf->n, past,
                                    (long long)buf->n + past / 4);
                        return;
                    }
                }
            }
            pl->api.destroy(h);
            problem_free(&p);
        }
    }
    cf_pass_detail(ctx, "%d-byte guard zones around out and every gradient intact", CF_GUARD_BYTES);
}

/* ------------------------------------------------------------------------- */
/* determinism.repeat                                                        */

void check_determinism_repeat(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    if (!claims(pl, AUXTRUNK_CAP_DETERMINISTIC)) {
        cf_skip(ctx, "plugin does not claim DETERMINISTIC");
        return;
    }
    const cf_topo_t t = {33, 20, 17, 9, 600};
    const int batches[] = {1, 600};
    for (size_t bi = 0; bi < 2; bi++) {
        const int B = batches[bi];
        problem_t p;
        cf_outputs_t first, again;
        if (problem_make(ctx, pl, &p, t, B, 0) || cf_outputs_make(&first, &p.in) ||
            cf_outputs_make(&again, &p.in))
            return;
        auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
        auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg), *h2 = NULL;
        if (!h || cf_forward(ctx, pl, h, &p.b, B, &first, NULL) ||
            cf_backward(ctx, pl, h, &p.b, B, 0, &first, NULL))
            return;
        char what[96];
        for (int rep = 2; rep <= 4; rep++) {
            snprintf(what, sizeof what, "backward #%d vs #1 (B=%d)", rep, B);
            if (cf_bufs_poison(&p.b, CF_POISON_NAN) ||
                cf_backward(ctx, pl, h, &p.b, B, 0, &again, NULL) ||
                cf_expect_same_all(ctx, what, &p.in, &again, &first, 0, 1))
                return;
        }
        snprintf(what, sizeof what, "forward #2 vs #1 (B=%d)", B);
        if (cf_forward(ctx, pl, h, &p.b, B, &again, NULL) ||
            cf_expect_same_all(ctx, what, &p.in, &again, &first, 1, 0))
            return;
        snprintf(what, sizeof what, "infer vs forward (B=%d)", B);
        if (cf_infer(ctx, pl, h, &p.b, B, &again, NULL) ||
            cf_expect_same_all(ctx, what, &p.in, &again, &first, 1, 0))
            return;
        snprintf(what, sizeof what, "a second handle vs the first (B=%d)", B);
        if (!(h2 = cf_init(ctx, pl, &cfg)) || cf_forward(ctx, pl, h2, &p.b, B, &again, NULL) ||
            cf_backward(ctx, pl, h2, &p.b, B, 0, &again, NULL) ||
            cf_expect_same_all(ctx, what, &p.in, &again, &first, 1, 1))
            return;
        pl->api.destroy(h2);
        pl->api.destroy(h);
        problem_free(&p);
    }
    cf_pass_detail(ctx, "repeated forward, infer and backward, and a second handle, bit-identical");
}

/* ------------------------------------------------------------------------- */
/* determinism.canonical / determinism.exact                                 */

/* Problems of the exactness checks: chunk-crossing batches (1, 2 and 4
 * chunks of 256), degenerate widths and the production topology (at a
 * larger batch too, where a plugin might switch to another path: for
 * determinism.canonical only, which holds every exact plugin to canon32). */
typedef struct exact_case {
    cf_topo_t t;
    int batch;
    int canonical_only;
} exact_case_t;

static const exact_case_t exact_fixed[] = {
    {{3, 5, 7, 2, 769}, 1, 0},           {{3, 5, 7, 2, 769}, 257, 0},
    {{3, 5, 7, 2, 769}, 769, 0},         {{17, 33, 9, 5, 523}, 523, 0},
    {{1, 1, 1, 1, 64}, 64, 0},           {{256, 256, 256, 128, 37}, 37, 0},
    {{256, 256, 256, 128, 513}, 513, 1},
};
#define N_EXACT_FIXED (sizeof exact_fixed / sizeof exact_fixed[0])
/* And every shape of the batch tree up to EXACT_MAX_CHUNKS chunks, then 33:
 * the tree's shape depends only on the number of chunks. Each third count
 * has only full chunks, the others end in a partial chunk of an odd size. */
#define EXACT_MAX_CHUNKS 17
#define N_EXACT_CASES (N_EXACT_FIXED + EXACT_MAX_CHUNKS + 1)

static exact_case_t exact_case(size_t i)
{
    if (i < N_EXACT_FIXED)
        return exact_fixed[i];
    const int nc = i < N_EXACT_FIXED + EXACT_MAX_CHUNKS ? (int)(i - N_EXACT_FIXED) + 1 : 33;
    const int C = AUXTRUNK_CANON_CHUNK;
    const int B = nc % 3 == 0 ? nc * C : (nc - 1) * C + 1 + 2 * ((nc * 37) % (C / 2));
    exact_case_t c = {{2, 3, 2, 2, B}, B, 0};
    return c;
}
/* Runs forward, backward and backward(ACCUMULATE onto g0) on pl, into o
 * (out, overwrite gradients) and acc (accumulated gradients). */
static int exact_run(cf_ctx_t *ctx, const cf_plugin_t *pl, const cf_inputs_t *in, float *const *g0,
                     cf_outputs_t *o, cf_outputs_t *acc)
{
    cf_bufs_t b;
    const cf_topo_t t = {in->d.enc, in->d.h1, in->d.h2, in->d.aux, in->batch};
    if (cf_bufs_make(&b, pl->space, in, 0))
        return cf_fail(ctx, "runner: cannot allocate plugin buffers: %s", cfd_error());
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
    if (!h || cf_forward(ctx, pl, h, &b, in->batch, o, NULL) ||
        cf_backward(ctx, pl, h, &b, in->batch, 0, o, NULL))
        return -1;
    for (int i = 0; i < CF_NPARAM; i++)
        if (cf_buf_put(&b.g[i], g0[i]))
            return cf_fail(ctx, "runner: upload failed: %s", cfd_error());
    if (cf_backward(ctx, pl, h, &b, in->batch, AUXTRUNK_BACKWARD_ACCUMULATE, acc, NULL))
        return -1;
    pl->api.destroy(h);
    cf_bufs_free(&b);
    return 0;
}

static float **random_grads(cf_ctx_t *ctx, const cf_inputs_t *in)
{
    static float *g0[CF_NPARAM];
    for (int i = 0; i < CF_NPARAM; i++) {
        size_t n = cf_param_len(in->d, i);
        g0[i] = malloc(n * sizeof(float));
        tst_rng_fill(&ctx->rng, g0[i], n, -1.0f, 1.0f);
    }
    return g0;
}

void check_determinism_canonical(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    if (!claims(pl, AUXTRUNK_CAP_EXACT)) {
        cf_skip(ctx, "plugin does not claim EXACT");
        return;
    }
    for (size_t c = 0; c < N_EXACT_CASES; c++) {
        cf_inputs_t in;
        cf_outputs_t got, acc, want;
        const exact_case_t ec = exact_case(c);
        const cf_topo_t t = ec.t;
        const int B = ec.batch;
        if (cf_inputs_make(&in, &ctx->rng, t, B) || cf_outputs_make(&got, &in) ||
            cf_outputs_make(&acc, &in) || cf_outputs_make(&want, &in)) {
            cf_fail(ctx, "runner: out of host memory");
            return;
        }
        float **g0 = random_grads(ctx, &in);
        if (exact_run(ctx, pl, &in, g0, &got, &acc))
            return;
        ref64_params_t rp = {in.p[0], in.p[1], in.p[2], in.p[3], in.p[4], in.p[5]};
        cf_stage(ctx, "canon32 %dx%dx%dx%d B=%d", t.enc, t.h1, t.h2, t.aux, B);
        canon32_forward(in.d, &rp, in.x, B, NULL, NULL, want.out);
        if (canon32_backward(in.d, &rp, in.x, in.dout, B, want.g[0], want.g[1], want.g[2],
                             want.g[3], want.g[4], want.g[5])) {
            cf_fail(ctx, "runner: out of host memory");
            return;
        }
        char what[128];
        snprintf(what, sizeof what, "%dx%dx%dx%d B=%d vs the canonical order", t.enc, t.h1, t.h2,
                 t.aux, B);
        if (cf_expect_same_all(ctx, what, &in, &got, &want, 1, 1))
            return;
        for (int i = 0; i < CF_NPARAM; i++)
            for (size_t k = 0; k < cf_param_len(in.d, i); k++)
                want.g[i][k] = g0[i][k] + want.g[i][k];
        snprintf(what, sizeof what, "%dx%dx%dx%d B=%d ACCUMULATE vs g0 + canonical", t.enc, t.h1,
                 t.h2, t.aux, B);
        if (cf_expect_same_all(ctx, what, &in, &acc, &want, 0, 1))
            return;
    }
    cf_pass_detail(ctx,
                   "%zu problems (batch trees of 1 to %d chunks and 33, production at B = 37 "
                   "and 513) bit-identical to auxtrunk_canon.h's order (canon %d)",
                   N_EXACT_CASES, EXACT_MAX_CHUNKS, AUXTRUNK_CANON_VERSION);
}

void check_determinism_exact(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    if (!claims(pl, AUXTRUNK_CAP_EXACT)) {
        cf_skip(ctx, "plugin does not claim EXACT");
        return;
    }
    if (cf_load_reference(ctx))
        return;
    if (!claims(&ctx->ref, AUXTRUNK_CAP_EXACT)) {
        cf_skip(ctx, "reference plugin %s does not claim EXACT", ctx->ref.api.impl_name);
        return;
    }
    int n_run = (int)N_EXACT_CASES;
    for (size_t c = 0; c < N_EXACT_CASES; c++) {
        cf_inputs_t in;
        cf_outputs_t got, acc, want, wacc;
        const exact_case_t ec = exact_case(c);
        const cf_topo_t t = ec.t;
        const int B = ec.batch;
        if (cf_inputs_make(&in, &ctx->rng, t, B) || cf_outputs_make(&got, &in) ||
            cf_outputs_make(&acc, &in) || cf_outputs_make(&want, &in) ||
            cf_outputs_make(&wacc, &in)) {
            cf_fail(ctx, "runner: out of host memory");
            return;
        }
        float **g0 = random_grads(ctx, &in);
        if (ec.canonical_only) {
            n_run--;
            continue;
        }
        if (exact_run(ctx, pl, &in, g0, &got, &acc) ||
            exact_run(ctx, &ctx->ref, &in, g0, &want, &wacc))
            return;
        char what[160];
        snprintf(what, sizeof what, "%dx%dx%dx%d B=%d vs reference %s", t.enc, t.h1, t.h2, t.aux, B,
                 ctx->ref.api.impl_name);
        if (cf_expect_same_all(ctx, what, &in, &got, &want, 1, 1))
            return;
        snprintf(what, sizeof what, "%dx%dx%dx%d B=%d ACCUMULATE vs reference %s", t.enc, t.h1,
                 t.h2, t.aux, B, ctx->ref.api.impl_name);
        if (cf_expect_same_all(ctx, what, &in, &acc, &wacc, 0, 1))
            return;
    }
    cf_pass_detail(ctx,
                   "%d problems (batch trees of 1 to %d chunks and 33) bit-identical to %s "
                   "(%s)",
                   n_run, EXACT_MAX_CHUNKS, ctx->ref.api.impl_name, ctx->ref.api.kernel_version);
}

/* ------------------------------------------------------------------------- */
/* target.infer_between                                                      */

void check_target_infer_between(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    const cf_topo_t t = {10, 12, 9, 4, 300};
    const int det = claims(pl, AUXTRUNK_CAP_DETERMINISTIC);
    const int BX = 300;
    problem_t X;
    cf_ref_t rx;
    cf_outputs_t g1;
    if (problem_make(ctx, pl, &X, t, BX, 0) || cf_ref_make(&rx, &X.in) ||
        cf_outputs_make(&g1, &X.in))
        return;
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
    if (!h)
        return;
    double worst = 0;
    /* Target-network problems: other parameters and inputs, a smaller batch
     * and the training batch itself. */
    const int target_batches[2] = {7, BX};
    for (int round = 0; round < 2; round++) {
        const int BY = target_batches[round];
        problem_t Y;
        cf_ref_t ry;
        cf_outputs_t y_fwd;
        if (problem_make(ctx, pl, &Y, t, BY, 0) || cf_ref_make(&ry, &Y.in) ||
            cf_outputs_make(&y_fwd, &Y.in))
            return;
        /* The training forward of Y gives the bits infer must reproduce. */
        if (cf_forward(ctx, pl, h, &Y.b, BY, &y_fwd, NULL))
            return;
        if (cf_forward(ctx, pl, h, &X.b, BX, NULL, NULL) ||
            cf_backward(ctx, pl, h, &X.b, BX, 0, &g1, NULL) ||
            cf_expect_close_all(ctx, "backward", &X.in, &g1, &rx, 0, 1, CF_TOL, &worst))
            return;
        char what[160];
        snprintf(what, sizeof what, "infer (B=%d, other parameters) between forward and backward",
                 BY);
        if (cf_infer(ctx, pl, h, &Y.b, BY, &Y.o, NULL) ||
            cf_expect_close_all(ctx, what, &Y.in, &Y.o, &ry, 1, 0, CF_TOL, &worst))
            return;
        if (det) {
            snprintf(what, sizeof what, "infer vs training forward of the same inputs (B=%d)", BY);
            if (cf_expect_same_all(ctx, what, &Y.in, &Y.o, &y_fwd, 1, 0))
                return;
        }
        cf_stage(ctx, "backward after an infer (B=%d)", BY);
        int32_t rc = a->backward(h, &X.b.params, X.b.x.p, X.b.dout.p, BX, &X.b.grads, 0, NULL);
        if (rc != AUXTRUNK_OK) {
            cf_fail(ctx,
                    "backward(B=%d) after an infer(B=%d) with other parameters returned %s: "
                    "infer must leave the training forward's record intact",
                    BX, BY, cf_status_name(rc));
            return;
        }
        if (cf_plugin_wait(ctx, pl, "backward after infer") || cf_bufs_fetch(&X.b, &X.o, 0, 1))
            return;
        snprintf(what, sizeof what, "backward after an infer (B=%d)", BY);
        if (cf_expect_close_all(ctx, what, &X.in, &X.o, &rx, 0, 1, CF_TOL, &worst))
            return;
        if (det) {
            snprintf(what, sizeof what, "backward after an infer (B=%d) vs without it", BY);
            if (cf_expect_same_all(ctx, what, &X.in, &X.o, &g1, 0, 1))
                return;
        }
        problem_free(&Y);
        cf_ref_free(&ry);
    }
    a->destroy(h);
    cf_pass_detail(ctx, "backward unchanged%s by infer with other parameters (B=7 and B=300)",
                   det ? " bit for bit" : "");
}
