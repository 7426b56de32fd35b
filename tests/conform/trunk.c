/*
 * trunk.c — the runner's side of one trunk problem: guarded buffers in the
 * plugin's memory space, random inputs, the double-precision reference,
 * calls into the plugin that fetch their results, and comparisons that fail
 * the check with a precise reason.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"
#include "device.h"

const char *const cf_param_names[CF_NPARAM] = {"W1", "b1", "W2", "b2", "W3", "b3"};
const char *const cf_grad_names[CF_NPARAM] = {"dW1", "db1", "dW2", "db2", "dW3", "db3"};

/* ------------------------------------------------------------------------- */
/* Guarded buffers                                                           */

static unsigned char guard_byte(size_t i) { return (unsigned char)(0xA5u ^ (unsigned)(i * 0x3Bu)); }

static int raw_put(int space, void *dst, const void *src, size_t bytes)
{
    if (space == CF_SPACE_CUDA)
        return cfd_put(dst, src, bytes);
    memcpy(dst, src, bytes);
    return 0;
}

static int raw_get(int space, void *dst, const void *src, size_t bytes)
{
    if (space == CF_SPACE_CUDA)
        return cfd_get(dst, src, bytes);
    memcpy(dst, src, bytes);
    return 0;
}

int cf_buf_alloc(cf_buf_t *b, int space, size_t n, size_t misalign)
{
    memset(b, 0, sizeof *b);
    b->space = space;
    b->n = n;
    b->misalign = misalign;
    b->total = CF_GUARD_BYTES + misalign + n * sizeof(float) + CF_GUARD_BYTES;
    void *base = NULL;
    if (space == CF_SPACE_CUDA) {
        if (cfd_malloc(&base, b->total) != 0)
            return -1;
    } else if (!(base = malloc(b->total))) {
        return -1;
    }
    b->base = base;
    b->p = (float *)(b->base + CF_GUARD_BYTES + misalign);
    unsigned char *img = malloc(b->total);
    if (!img)
        return -1;
    for (size_t i = 0; i < b->total; i++)
        img[i] = guard_byte(i);
    uint32_t poison = CF_POISON_NAN;
    for (size_t i = 0; i < n; i++)
        memcpy(img + CF_GUARD_BYTES + misalign + i * 4, &poison, 4);
    int rc = raw_put(space, b->base, img, b->total);
    free(img);
    return rc;
}

void cf_buf_free(cf_buf_t *b)
{
    if (!b->base)
        return;
    if (b->space == CF_SPACE_CUDA)
        cfd_free(b->base);
    else
        free(b->base);
    b->base = NULL;
    b->p = NULL;
}

int cf_buf_put(cf_buf_t *b, const float *src) { return raw_put(b->space, b->p, src, b->n * 4); }

int cf_buf_get(const cf_buf_t *b, float *dst) { return raw_get(b->space, dst, b->p, b->n * 4); }

int cf_buf_fill(cf_buf_t *b, uint32_t bits)
{
    uint32_t *tmp = malloc(b->n * 4 + 4);
    if (!tmp)
        return -1;
    for (size_t i = 0; i < b->n; i++)
        tmp[i] = bits;
    int rc = raw_put(b->space, b->p, tmp, b->n * 4);
    free(tmp);
    return rc;
}

int cf_buf_snapshot(const cf_buf_t *b, unsigned char **dst)
{
    *dst = malloc(b->total);
    if (!*dst)
        return -1;
    return raw_get(b->space, *dst, b->base, b->total);
}

int cf_buf_diff(const cf_buf_t *b, const unsigned char *snap, long long *where)
{
    unsigned char *now = NULL;
    if (cf_buf_snapshot(b, &now) != 0) {
        free(now);
        return -1;
    }
    int differs = 0;
    long long front = (long long)(CF_GUARD_BYTES + b->misalign);
    for (size_t i = 0; i < b->total; i++)
        if (now[i] != snap[i]) {
            *where = (long long)i - front;
            differs = 1;
            break;
        }
    free(now);
    return differs;
}

int cf_buf_guards(const cf_buf_t *b, long long *where)
{
    unsigned char *now = NULL;
    if (cf_buf_snapshot(b, &now) != 0) {
        free(now);
        return -1;
    }
    size_t front = CF_GUARD_BYTES + b->misalign, back = front + b->n * 4;
    int changed = 0;
    for (size_t i = 0; i < b->total && !changed; i++) {
        if (i >= front && i < back)
            continue;
        if (now[i] != guard_byte(i)) {
            *where = (long long)i - (long long)front;
            changed = 1;
        }
    }
    free(now);
    return changed;
}

/* ------------------------------------------------------------------------- */
/* Inputs, outputs, the reference                                            */

size_t cf_param_len(ref64_dims_t d, int i)
{
    switch (i) {
    case 0:
        return (size_t)d.enc * d.h1;
    case 1:
        return (size_t)d.h1;
    case 2:
        return (size_t)d.h1 * d.h2;
    case 3:
        return (size_t)d.h2;
    case 4:
        return (size_t)d.h2 * d.aux;
    default:
        return (size_t)d.aux;
    }
}

int cf_inputs_make(cf_inputs_t *in, tst_rng_t *rng, cf_topo_t t, int batch)
{
    memset(in, 0, sizeof *in);
    in->d = (ref64_dims_t){t.enc, t.h1, t.h2, t.aux};
    in->batch = batch;
    const int fan_in[CF_NPARAM] = {t.enc, 0, t.h1, 0, t.h2, 0};
    for (int i = 0; i < CF_NPARAM; i++) {
        size_t n = cf_param_len(in->d, i);
        if (!(in->p[i] = malloc(n * sizeof(float))))
            return -1;
        /* Uniform with variance 1/fan_in: pre-activations of unit scale. */
        float a = fan_in[i] ? sqrtf(3.0f / (float)fan_in[i]) : 0.5f;
        tst_rng_fill(rng, in->p[i], n, -a, a);
    }
    in->x = malloc((size_t)batch * t.enc * sizeof(float));
    in->dout = malloc((size_t)batch * t.aux * sizeof(float));
    if (!in->x || !in->dout)
        return -1;
    tst_rng_fill(rng, in->x, (size_t)batch * t.enc, -1.0f, 1.0f);
    tst_rng_fill(rng, in->dout, (size_t)batch * t.aux, -1.0f, 1.0f);
    return 0;
}

int cf_outputs_make(cf_outputs_t *o, const cf_inputs_t *in)
{
    memset(o, 0, sizeof *o);
    o->out = malloc((size_t)in->batch * in->d.aux * sizeof(float));
    if (!o->out)
        return -1;
    for (int i = 0; i < CF_NPARAM; i++)
        if (!(o->g[i] = malloc(cf_param_len(in->d, i) * sizeof(float))))
            return -1;
    return 0;
}

int cf_ref_make(cf_ref_t *r, const cf_inputs_t *in)
{
    memset(r, 0, sizeof *r);
    r->out = malloc((size_t)in->batch * in->d.aux * sizeof(double));
    for (int i = 0; i < CF_NPARAM; i++)
        r->g[i] = malloc(cf_param_len(in->d, i) * sizeof(double));
    double *h2 = malloc((size_t)in->batch * in->d.h2 * sizeof *h2);
    if (!r->out || !r->g[5] || !h2) {
        free(h2);
        return -1;
    }
    ref64_params_t p = {in->p[0], in->p[1], in->p[2], in->p[3], in->p[4], in->p[5]};
    ref64_forward(in->d, &p, in->x, in->batch, NULL, h2, r->out);
    r->out_floor = ref64_out_floor(in->d, &p, h2, in->batch);
    free(h2);
    return ref64_backward(in->d, &p, in->x, in->dout, in->batch, r->g[0], r->g[1], r->g[2], r->g[3],
                          r->g[4], r->g[5]);
}

void cf_ref_free(cf_ref_t *r)
{
    free(r->out);
    for (int i = 0; i < CF_NPARAM; i++)
        free(r->g[i]);
}

/* ------------------------------------------------------------------------- */
/* Plugin-side buffers                                                       */

int cf_bufs_make(cf_bufs_t *b, int space, const cf_inputs_t *in, size_t misalign)
{
    memset(b, 0, sizeof *b);
    b->space = space;
    for (int i = 0; i < CF_NPARAM; i++) {
        size_t n = cf_param_len(in->d, i);
        if (cf_buf_alloc(&b->p[i], space, n, misalign) ||
            cf_buf_alloc(&b->g[i], space, n, misalign))
            return -1;
    }
    if (cf_buf_alloc(&b->x, space, (size_t)in->batch * in->d.enc, misalign) ||
        cf_buf_alloc(&b->dout, space, (size_t)in->batch * in->d.aux, misalign) ||
        cf_buf_alloc(&b->out, space, (size_t)in->batch * in->d.aux, misalign))
        return -1;
    b->params = (auxtrunk_params_t){sizeof(auxtrunk_params_t),
                                    0,
                                    b->p[0].p,
                                    b->p[1].p,
                                    b->p[2].p,
                                    b->p[3].p,
                                    b->p[4].p,
                                    b->p[5].p};
    b->grads = (auxtrunk_grads_t){sizeof(auxtrunk_grads_t),
                                  0,
                                  b->g[0].p,
                                  b->g[1].p,
                                  b->g[2].p,
                                  b->g[3].p,
                                  b->g[4].p,
                                  b->g[5].p};
    return cf_bufs_upload(b, in);
}

void cf_bufs_free(cf_bufs_t *b)
{
    for (int i = 0; i < CF_NPARAM; i++) {
        cf_buf_free(&b->p[i]);
        cf_buf_free(&b->g[i]);
    }
    cf_buf_free(&b->x);
    cf_buf_free(&b->dout);
    cf_buf_free(&b->out);
}

int cf_bufs_upload(cf_bufs_t *b, const cf_inputs_t *in)
{
    for (int i = 0; i < CF_NPARAM; i++)
        if (cf_buf_put(&b->p[i], in->p[i]))
            return -1;
    if (cf_buf_put(&b->x, in->x) || cf_buf_put(&b->dout, in->dout))
        return -1;
    return 0;
}

int cf_bufs_poison(cf_bufs_t *b, uint32_t bits)
{
    if (cf_buf_fill(&b->out, bits))
        return -1;
    for (int i = 0; i < CF_NPARAM; i++)
        if (cf_buf_fill(&b->g[i], bits))
            return -1;
    return 0;
}

int cf_bufs_fetch(const cf_bufs_t *b, cf_outputs_t *o, int want_out, int want_grads)
{
    if (want_out && cf_buf_get(&b->out, o->out))
        return -1;
    for (int i = 0; want_grads && i < CF_NPARAM; i++)
        if (cf_buf_get(&b->g[i], o->g[i]))
            return -1;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Calls                                                                     */

static int after_call(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, int32_t rc,
                      const char *what, int batch, const cf_bufs_t *b, cf_outputs_t *o, int out,
                      int grads)
{
    if (rc != AUXTRUNK_OK) {
        const char *le = pl->api.last_error(h);
        return cf_fail(ctx, "%s(B=%d) returned %s (last_error: \"%s\")", what, batch,
                       cf_status_name(rc), le ? le : "(NULL)");
    }
    char after[64];
    snprintf(after, sizeof after, "%s(B=%d)", what, batch);
    if (cf_plugin_wait(ctx, pl, after))
        return -1;
    if (o && cf_bufs_fetch(b, o, out, grads))
        return cf_fail(ctx, "runner: cannot read the results of %s: %s", after, cfd_error());
    return 0;
}

int cf_forward(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, cf_bufs_t *b, int batch,
               cf_outputs_t *o, void *stream)
{
    cf_stage(ctx, "forward(B=%d)", batch);
    int32_t rc = pl->api.forward(h, &b->params, b->x.p, batch, b->out.p, 0, stream);
    return after_call(ctx, pl, h, rc, "forward", batch, b, o, 1, 0);
}

int cf_infer(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, cf_bufs_t *b, int batch,
             cf_outputs_t *o, void *stream)
{
    cf_stage(ctx, "infer(B=%d)", batch);
    int32_t rc = pl->api.infer(h, &b->params, b->x.p, batch, b->out.p, 0, stream);
    return after_call(ctx, pl, h, rc, "infer", batch, b, o, 1, 0);
}

int cf_backward(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, cf_bufs_t *b, int batch,
                uint32_t flags, cf_outputs_t *o, void *stream)
{
    cf_stage(ctx, "backward(B=%d, flags=%u)", batch, flags);
    int32_t rc =
        pl->api.backward(h, &b->params, b->x.p, b->dout.p, batch, &b->grads, flags, stream);
    return after_call(ctx, pl, h, rc, flags ? "backward(ACCUMULATE)" : "backward", batch, b, o, 0,
                      1);
}

/* ------------------------------------------------------------------------- */
/* Comparisons                                                               */

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The scale is max |ref| of the tensor, but at least floor: a tensor of one
 * or a few sums (a bias of width 1) can cancel to far below the size of its
 * terms, and rounding is relative to the terms. */
static int expect_close_floor(cf_ctx_t *ctx, const char *what, const float *got, const double *ref,
                              size_t n, double tol, double *worst, double floor)
{
    double scale = ref64_max_abs(ref, n);
    if (scale < floor)
        scale = floor;
    if (scale == 0.0)
        scale = 1.0;
    double err_max = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            return cf_fail(ctx, "%s[%zu] is %g (0x%08x), reference %.9g: not finite", what, i,
                           (double)got[i], (unsigned)bits_of(got[i]), ref[i]);
        double e = fabs((double)got[i] - ref[i]) / scale;
        if (e > err_max) {
            err_max = e;
            at = i;
        }
    }
    if (worst && err_max > *worst) {
        *worst = err_max;
        snprintf(ctx->worst_at, sizeof ctx->worst_at, "%s[%zu]", what, at);
    }
    if (err_max > tol)
        return cf_fail(ctx,
                       "%s[%zu] = %.9g, reference %.9g: error %.3g of the tensor's scale %.3g "
                       "exceeds %.1g",
                       what, at, (double)got[at], ref[at], err_max, scale, tol);
    return 0;
}

int cf_expect_same(cf_ctx_t *ctx, const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (bits_of(got[i]) != bits_of(want[i]))
            return cf_fail(ctx,
                           "%s[%zu] = %.9g (0x%08x), expected %.9g (0x%08x): not bit-identical",
                           what, i, (double)got[i], (unsigned)bits_of(got[i]), (double)want[i],
                           (unsigned)bits_of(want[i]));
    return 0;
}

int cf_expect_close_all(cf_ctx_t *ctx, const char *what, const cf_inputs_t *in,
                        const cf_outputs_t *o, const cf_ref_t *r, int out, int grads, double tol,
                        double *worst)
{
    char name[200];
    if (out) {
        snprintf(name, sizeof name, "%s: out", what);
        if (expect_close_floor(ctx, name, o->out, r->out, (size_t)in->batch * in->d.aux, tol, worst,
                               r->out_floor))
            return -1;
    }
    /* Gradient tensors share a floor of a tenth of the largest one's scale. */
    double floor = grads ? ref64_grads_floor(in->d, (const double *const *)r->g) : 0.0;
    for (int i = 0; grads && i < CF_NPARAM; i++) {
        snprintf(name, sizeof name, "%s: %s", what, cf_grad_names[i]);
        if (expect_close_floor(ctx, name, o->g[i], r->g[i], cf_param_len(in->d, i), tol, worst,
                               floor))
            return -1;
    }
    return 0;
}

int cf_expect_same_all(cf_ctx_t *ctx, const char *what, const cf_inputs_t *in,
                       const cf_outputs_t *got, const cf_outputs_t *want, int out, int grads)
{
    char name[200];
    if (out) {
        snprintf(name, sizeof name, "%s: out", what);
        if (cf_expect_same(ctx, name, got->out, want->out, (size_t)in->batch * in->d.aux))
            return -1;
    }
    for (int i = 0; grads && i < CF_NPARAM; i++) {
        snprintf(name, sizeof name, "%s: %s", what, cf_grad_names[i]);
        if (cf_expect_same(ctx, name, got->g[i], want->g[i], cf_param_len(in->d, i)))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Setups, statuses, "writes nothing"                                        */

int cf_setup_make(cf_ctx_t *ctx, const cf_plugin_t *pl, cf_setup_t *s, cf_topo_t t, int batch)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    if (cf_inputs_make(&s->in, &ctx->rng, t, batch) || cf_outputs_make(&s->o, &s->in))
        return cf_fail(ctx, "runner: out of host memory");
    if (cf_bufs_make(&s->b, pl->space, &s->in, 0))
        return cf_fail(ctx, "runner: cannot allocate plugin buffers: %s",
                       pl->space == CF_SPACE_CUDA ? cfd_error() : "out of host memory");
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    s->h = cf_init(ctx, pl, &cfg);
    return s->h ? 0 : -1;
}

int cf_expect_status(cf_ctx_t *ctx, int32_t got, int32_t want, const char *what)
{
    if (got == want)
        return 0;
    return cf_fail(ctx, "%s returned %s, expected %s", what, cf_status_name(got),
                   cf_status_name(want));
}

int cf_expect_status2(cf_ctx_t *ctx, int32_t got, int32_t want, int32_t alt, const char *what)
{
    if (got == want || got == alt)
        return 0;
    if (want == alt)
        return cf_expect_status(ctx, got, want, what);
    char w[64];
    snprintf(w, sizeof w, "%s", cf_status_name(want));
    return cf_fail(ctx, "%s returned %s, expected %s or %s", what, cf_status_name(got), w,
                   cf_status_name(alt));
}

int cf_expect_last_error(cf_ctx_t *ctx, const cf_plugin_t *pl, const auxtrunk_handle_t *h,
                         const char *what)
{
    const char *le = pl->api.last_error(h);
    if (!le)
        return cf_fail(ctx, "after %s failed, last_error returned NULL", what);
    if (!le[0])
        return cf_fail(ctx, "after %s failed, last_error is empty", what);
    return 0;
}

/* The buffers of a problem in a fixed order, with names for reasons. */
static const cf_buf_t *watch_buf(const cf_bufs_t *b, int i, const char **name)
{
    static const char *const io[3] = {"x", "dout", "out"};
    if (i < 3) {
        *name = io[i];
        return i == 0 ? &b->x : i == 1 ? &b->dout : &b->out;
    }
    i -= 3;
    if (i < CF_NPARAM) {
        *name = cf_param_names[i];
        return &b->p[i];
    }
    *name = cf_grad_names[i - CF_NPARAM];
    return &b->g[i - CF_NPARAM];
}

int cf_watch_begin(cf_ctx_t *ctx, cf_watch_t *w, const cf_bufs_t *b)
{
    memset(w, 0, sizeof *w);
    w->b = b;
    for (int i = 0; i < 3 + 2 * CF_NPARAM; i++) {
        const char *name;
        if (cf_buf_snapshot(watch_buf(b, i, &name), &w->snap[i]))
            return cf_fail(ctx, "runner: cannot snapshot %s: %s", name, cfd_error());
    }
    return 0;
}

int cf_watch_end(cf_ctx_t *ctx, cf_watch_t *w, const char *what)
{
    int rc = 0;
    if (w->b->space == CF_SPACE_CUDA && (cfd_sync() != 0 || cfd_take_error() != 0))
        rc = cf_fail(ctx, "%s left a CUDA error behind: %s", what, cfd_error());
    for (int i = 0; i < 3 + 2 * CF_NPARAM && rc == 0; i++) {
        const char *name;
        const cf_buf_t *buf = watch_buf(w->b, i, &name);
        long long where = 0;
        int d = cf_buf_diff(buf, w->snap[i], &where);
        if (d < 0)
            rc = cf_fail(ctx, "runner: cannot read %s back: %s", name, cfd_error());
        else if (d > 0)
            rc = cf_fail(ctx, "%s failed as expected but wrote into %s (byte %lld %s)", what, name,
                         where,
                         where < 0                          ? "in the guard zone before it"
                         : where >= (long long)(buf->n * 4) ? "in the guard zone after it"
                                                            : "of its payload");
    }
    for (int i = 0; i < 3 + 2 * CF_NPARAM; i++)
        free(w->snap[i]);
    return rc;
}
