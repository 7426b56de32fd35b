/*
 * checks_bad.c — group 8: every documented error case of init, forward,
 * infer and backward returns its documented status, writes nothing (no
 * output, no guard byte, no recorded state) and leaves last_error set.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "device.h"

static int claims(const cf_plugin_t *pl, uint64_t cap) { return (pl->api.caps & cap) != 0; }

/* Field names of auxtrunk_params_t and auxtrunk_grads_t, for reasons. */
static const char *const pfield[CF_NPARAM] = {"w1", "b1", "w2", "b2", "w3", "b3"};
static const char *const gfield[CF_NPARAM] = {"dw1", "db1", "dw2", "db2", "dw3", "db3"};

/* ------------------------------------------------------------------------- */
/* bad.init                                                                  */

static int init_probe(cf_ctx_t *ctx, const auxtrunk_config_t *cfg, int32_t want, int32_t alt,
                      const char *what)
{
    auxtrunk_handle_t *sentinel = (auxtrunk_handle_t *)(uintptr_t)0x5A5A5A50, *h = sentinel;
    cf_stage(ctx, "%s", what);
    int32_t rc = ctx->pl.api.init(cfg, &h);
    if (cf_expect_status2(ctx, rc, want, alt, what))
        return -1;
    if (h != sentinel)
        return cf_fail(ctx, "%s failed but changed *out_handle", what);
    if (ctx->pl.space == CF_SPACE_CUDA && cfd_take_error() != 0)
        return cf_fail(ctx, "%s left a CUDA error behind: %s", what, cfd_error());
    return 0;
}

void check_bad_init(cf_ctx_t *ctx)
{
    const auxtrunk_api_t *a = &ctx->pl.api;
    const auxtrunk_config_t good = cf_config(6, 5, 4, 3, 16);
    auxtrunk_handle_t *h = NULL;
    if (cf_expect_status(ctx, a->init(NULL, &h), AUXTRUNK_E_NULL_POINTER, "init(NULL config)") ||
        cf_expect_status(ctx, a->init(&good, NULL), AUXTRUNK_E_NULL_POINTER,
                         "init(NULL out_handle)"))
        return;
    int probes = 2;
    /* Each width, and max_batch, out of range. */
    static const char *const field[5] = {"enc", "h1", "h2", "aux", "max_batch"};
    const int32_t bad_w[] = {0, -1, INT32_MIN, AUXTRUNK_MAX_WIDTH + 1, INT32_MAX};
    const int32_t bad_b[] = {0, -1, INT32_MIN, AUXTRUNK_MAX_BATCH + 1, INT32_MAX};
    for (int f = 0; f < 5; f++)
        for (int i = 0; i < 5; i++) {
            auxtrunk_config_t c = good;
            int32_t v = f < 4 ? bad_w[i] : bad_b[i];
            int32_t *slot = f == 0   ? &c.enc
                            : f == 1 ? &c.h1
                            : f == 2 ? &c.h2
                            : f == 3 ? &c.aux
                                     : &c.max_batch;
            *slot = v;
            char what[96];
            snprintf(what, sizeof what, "init with %s = %d", field[f], (int)v);
            if (init_probe(ctx, &c, AUXTRUNK_E_DIMENSION, AUXTRUNK_E_DIMENSION, what))
                return;
            probes++;
        }
    /* max_batch * max(width) above INT32_MAX (32-bit indexing). */
    for (int f = 0; f < 4; f++) {
        auxtrunk_config_t c = cf_config(1, 1, 1, 1, 131072);
        int32_t *slot = f == 0 ? &c.enc : f == 1 ? &c.h1 : f == 2 ? &c.h2 : &c.aux;
        *slot = AUXTRUNK_MAX_WIDTH;
        char what[128];
        snprintf(what, sizeof what, "init with %s = %d and max_batch = 131072 (product 2^31)",
                 field[f], AUXTRUNK_MAX_WIDTH);
        if (init_probe(ctx, &c, AUXTRUNK_E_DIMENSION, AUXTRUNK_E_DIMENSION, what))
            return;
        probes++;
    }
    /* The limits themselves are valid. */
    const auxtrunk_config_t edge[] = {cf_config(AUXTRUNK_MAX_WIDTH, 1, 1, 1, 1),
                                      cf_config(1, 1, 1, AUXTRUNK_MAX_WIDTH, 131071),
                                      cf_config(1, 1, 1, 1, AUXTRUNK_MAX_BATCH)};
    for (int i = 0; i < 3; i++) {
        char what[128];
        snprintf(what, sizeof what,
                 "init with ENC=%d H1=%d H2=%d AUX=%d max_batch=%d (at the limits)", edge[i].enc,
                 edge[i].h1, edge[i].h2, edge[i].aux, edge[i].max_batch);
        cf_stage(ctx, "%s", what);
        h = NULL;
        int32_t rc = a->init(&edge[i], &h);
        if (rc == AUXTRUNK_E_OUT_OF_MEMORY) {
            cf_note(ctx, "%s: AUXTRUNK_E_OUT_OF_MEMORY (accepted)", what);
            continue;
        }
        if (cf_expect_status(ctx, rc, AUXTRUNK_OK, what))
            return;
        a->destroy(h);
        probes++;
    }
    /* device: host plugins take only -1; CUDA plugins refuse a device that
     * does not exist (the status is not specified beyond "an error"). */
    const int32_t devs[] = {0, 7, 9999, -2};
    for (int i = 0; i < 4; i++) {
        auxtrunk_config_t c = good;
        c.device = devs[i];
        char what[64];
        snprintf(what, sizeof what, "init with device = %d", (int)devs[i]);
        if (ctx->pl.space == CF_SPACE_HOST) {
            if (init_probe(ctx, &c, AUXTRUNK_E_UNSUPPORTED, AUXTRUNK_E_UNSUPPORTED, what))
                return;
            probes++;
        } else if (devs[i] == 9999 || devs[i] == -2) {
            auxtrunk_handle_t *sentinel = (auxtrunk_handle_t *)(uintptr_t)0x5A5A5A50;
            h = sentinel;
            int32_t rc = a->init(&c, &h);
            if (rc == AUXTRUNK_OK) {
                cf_fail(ctx, "%s returned AUXTRUNK_OK for a device that does not exist", what);
                return;
            }
            if (h != sentinel) {
                cf_fail(ctx, "%s failed but changed *out_handle", what);
                return;
            }
            if (cfd_take_error() != 0) {
                cf_fail(ctx, "%s left a CUDA error behind: %s", what, cfd_error());
                return;
            }
            probes++;
        }
    }
    cf_pass_detail(ctx, "%d configurations", probes);
}

/* ------------------------------------------------------------------------- */
/* bad.forward / bad.backward                                                */

typedef struct call_args {
    int kind; /* 0 forward, 1 infer, 2 backward */
    auxtrunk_handle_t *h;
    const auxtrunk_params_t *params;
    const float *x, *dout;
    float *out;
    int32_t batch;
    const auxtrunk_grads_t *grads;
    uint32_t flags;
} call_args_t;

static const char *const kind_name[3] = {"forward", "infer", "backward"};

static int32_t do_call(const auxtrunk_api_t *a, const call_args_t *c)
{
    if (c->kind == 0)
        return a->forward(c->h, c->params, c->x, c->batch, c->out, c->flags, NULL);
    if (c->kind == 1)
        return a->infer(c->h, c->params, c->x, c->batch, c->out, c->flags, NULL);
    return a->backward(c->h, c->params, c->x, c->dout, c->batch, c->grads, c->flags, NULL);
}

/* One call that must fail with want: nothing written, last_error set. */
static int probe(cf_ctx_t *ctx, const cf_bufs_t *b, const call_args_t *c, int32_t want,
                 const char *detail, int *count)
{
    char what[160];
    snprintf(what, sizeof what, "%s with %s", kind_name[c->kind], detail);
    cf_stage(ctx, "%s", what);
    cf_watch_t w;
    if (cf_watch_begin(ctx, &w, b))
        return -1;
    int32_t rc = do_call(&ctx->pl.api, c);
    if (cf_expect_status(ctx, rc, want, what) || cf_watch_end(ctx, &w, what) ||
        cf_expect_last_error(ctx, &ctx->pl, c->h, what))
        return -1;
    (*count)++;
    return 0;
}

/* The record must be what the last good forward left: a backward gives the
 * same gradients as before the bad calls. */
static int record_intact(cf_ctx_t *ctx, cf_setup_t *s, int B, const cf_outputs_t *before,
                         const cf_ref_t *r)
{
    cf_outputs_t now;
    if (cf_outputs_make(&now, &s->in))
        return cf_fail(ctx, "runner: out of host memory");
    if (cf_backward(ctx, &ctx->pl, s->h, &s->b, B, 0, &now, NULL))
        return -1;
    if (claims(&ctx->pl, AUXTRUNK_CAP_DETERMINISTIC))
        return cf_expect_same_all(ctx, "backward after the failed calls vs before them", &s->in,
                                  &now, before, 0, 1);
    return cf_expect_close_all(ctx, "backward after the failed calls", &s->in, &now, r, 0, 1,
                               CF_TOL, NULL);
}

static int setup_recorded(cf_ctx_t *ctx, cf_setup_t *s, int B, cf_outputs_t *before, cf_ref_t *r)
{
    if (cf_setup_make(ctx, &ctx->pl, s, (cf_topo_t){6, 5, 4, 3, 16}, B) ||
        cf_outputs_make(before, &s->in))
        return -1;
    if (cf_ref_make(r, &s->in))
        return cf_fail(ctx, "runner: out of host memory");
    if (cf_forward(ctx, &ctx->pl, s->h, &s->b, B, NULL, NULL) ||
        cf_backward(ctx, &ctx->pl, s->h, &s->b, B, 0, before, NULL))
        return -1;
    return 0;
}

void check_bad_forward(cf_ctx_t *ctx)
{
    cf_setup_t s;
    cf_outputs_t before;
    cf_ref_t r;
    const int B = 9, MAXB = 16;
    if (setup_recorded(ctx, &s, B, &before, &r))
        return;
    int count = 0;
    for (int kind = 0; kind < 2; kind++) {
        const call_args_t base = {kind, s.h, &s.b.params, s.b.x.p, NULL, s.b.out.p, B, NULL, 0};
        call_args_t c;
        /* NULL pointers. */
        c = base, c.params = NULL;
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, "params NULL", &count))
            return;
        c = base, c.x = NULL;
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, "x NULL", &count))
            return;
        c = base, c.out = NULL;
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, "out NULL", &count))
            return;
        for (int i = 0; i < CF_NPARAM; i++) {
            auxtrunk_params_t p = s.b.params;
            const float **slot[CF_NPARAM] = {&p.w1, &p.b1, &p.w2, &p.b2, &p.w3, &p.b3};
            *slot[i] = NULL;
            char d[64];
            snprintf(d, sizeof d, "params.%s NULL", pfield[i]);
            c = base, c.params = &p;
            if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, d, &count))
                return;
        }
        /* A reserved field that is not zero. */
        for (int i = 0; i < 2; i++) {
            auxtrunk_params_t p = s.b.params;
            p.reserved = i ? 0x80000000u : 1u;
            c = base, c.params = &p;
            if (probe(ctx, &s.b, &c, AUXTRUNK_E_STRUCT_SIZE,
                      i ? "params.reserved 0x80000000" : "params.reserved 1", &count))
                return;
        }
        /* Batch out of [1, max_batch]. */
        const int32_t bad_b[] = {0, -1, INT32_MIN, MAXB + 1, INT32_MAX};
        for (int i = 0; i < 5; i++) {
            char d[64];
            snprintf(d, sizeof d, "batch %d (max_batch %d)", (int)bad_b[i], MAXB);
            c = base, c.batch = bad_b[i];
            if (probe(ctx, &s.b, &c, AUXTRUNK_E_BATCH, d, &count))
                return;
        }
        /* out overlapping an input. */
        const struct {
            float *out;
            const char *d;
        } alias[] = {
            {s.b.x.p, "out == x"},
            {s.b.x.p + 1, "out overlapping x (one element in)"},
            {s.b.x.p + (size_t)B * 6 - 1, "out overlapping the last element of x"},
            {s.b.p[0].p, "out == W1"},
            {s.b.p[5].p, "out == b3"},
            {s.b.p[3].p - 2, "out overlapping b2 from below"},
        };
        for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++) {
            c = base, c.out = alias[i].out;
            if (probe(ctx, &s.b, &c, AUXTRUNK_E_ALIAS, alias[i].d, &count))
                return;
        }
    }
    if (record_intact(ctx, &s, B, &before, &r))
        return;
    cf_pass_detail(
        ctx, "%d failing forward/infer calls: right status, nothing written, record intact", count);
}

void check_bad_backward(cf_ctx_t *ctx)
{
    cf_setup_t s;
    cf_outputs_t before;
    cf_ref_t r;
    const int B = 9, MAXB = 16;
    if (setup_recorded(ctx, &s, B, &before, &r))
        return;
    int count = 0;
    const call_args_t base = {2, s.h, &s.b.params, s.b.x.p, s.b.dout.p, NULL, B, &s.b.grads, 0};
    call_args_t c;
    c = base, c.params = NULL;
    if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, "params NULL", &count))
        return;
    c = base, c.x = NULL;
    if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, "x NULL", &count))
        return;
    c = base, c.dout = NULL;
    if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, "dout NULL", &count))
        return;
    c = base, c.grads = NULL;
    if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, "grads NULL", &count))
        return;
    for (int i = 0; i < CF_NPARAM; i++) {
        auxtrunk_grads_t g = s.b.grads;
        float **slot[CF_NPARAM] = {&g.dw1, &g.db1, &g.dw2, &g.db2, &g.dw3, &g.db3};
        *slot[i] = NULL;
        char d[64];
        snprintf(d, sizeof d, "grads.%s NULL", gfield[i]);
        c = base, c.grads = &g;
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, d, &count))
            return;
        auxtrunk_params_t p = s.b.params;
        const float **pslot[CF_NPARAM] = {&p.w1, &p.b1, &p.w2, &p.b2, &p.w3, &p.b3};
        *pslot[i] = NULL;
        snprintf(d, sizeof d, "params.%s NULL", pfield[i]);
        c = base, c.params = &p;
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_NULL_POINTER, d, &count))
            return;
    }
    /* Reserved fields that are not zero. */
    {
        auxtrunk_params_t p = s.b.params;
        auxtrunk_grads_t g = s.b.grads;
        p.reserved = 1u;
        g.reserved = 0x100u;
        c = base, c.params = &p;
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_STRUCT_SIZE, "params.reserved 1", &count))
            return;
        c = base, c.grads = &g;
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_STRUCT_SIZE, "grads.reserved 0x100", &count))
            return;
    }
    const int32_t bad_b[] = {0, -1, INT32_MIN, MAXB + 1, INT32_MAX};
    for (int i = 0; i < 5; i++) {
        char d[64];
        snprintf(d, sizeof d, "batch %d (max_batch %d)", (int)bad_b[i], MAXB);
        c = base, c.batch = bad_b[i];
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_BATCH, d, &count))
            return;
    }
    const int32_t mism[] = {B - 1, B + 1, 1, MAXB};
    for (int i = 0; i < 4; i++) {
        char d[80];
        snprintf(d, sizeof d, "batch %d after a forward of batch %d", (int)mism[i], B);
        c = base, c.batch = mism[i];
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_BATCH_MISMATCH, d, &count))
            return;
    }
    /* Gradient buffers overlapping each other or an input. */
    const struct {
        int slot;
        float *p;
        const char *d;
    } alias[] = {
        {0, s.b.g[1].p, "dW1 == db1"},
        {1, s.b.g[0].p + 3, "db1 inside dW1"},
        {4, s.b.g[5].p - 1, "dW3 overlapping db3 from below"},
        {3, s.b.g[2].p + 19, "db2 overlapping the end of dW2"},
        {2, s.b.x.p, "dW2 == x"},
        {5, s.b.dout.p, "db3 == dout"},
        {0, s.b.p[0].p, "dW1 == W1"},
        {1, s.b.p[1].p, "db1 == b1"},
        {4, s.b.p[2].p + 4, "dW3 inside W2"},
    };
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++) {
        auxtrunk_grads_t g = s.b.grads;
        float **slot[CF_NPARAM] = {&g.dw1, &g.db1, &g.dw2, &g.db2, &g.dw3, &g.db3};
        *slot[alias[i].slot] = alias[i].p;
        c = base, c.grads = &g;
        if (probe(ctx, &s.b, &c, AUXTRUNK_E_ALIAS, alias[i].d, &count))
            return;
    }
    if (record_intact(ctx, &s, B, &before, &r))
        return;
    cf_pass_detail(ctx, "%d failing backward calls: right status, nothing written, record intact",
                   count);
}
