/*
 * checks_cuda.c — groups 9 and 10: the CUDA rules (the host's stream is
 * honoured, graph capture replays the eager bits, two handles on two
 * streams, memory-space refusals) and the thread rules of the header.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "device.h"

static int claims(const cf_plugin_t *pl, uint64_t cap) { return (pl->api.caps & cap) != 0; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------- */
/* cuda.stream                                                               */

typedef struct stream_job {
    const cf_plugin_t *pl;
    auxtrunk_handle_t *h;
    cf_bufs_t *b;
    int batch;
    void *stream;
    int32_t rc_fwd, rc_bwd;
    volatile int returned;
} stream_job_t;

static void *stream_job_run(void *arg)
{
    stream_job_t *j = arg;
    const auxtrunk_api_t *a = &j->pl->api;
    j->rc_fwd = a->forward(j->h, &j->b->params, j->b->x.p, j->batch, j->b->out.p, 0, j->stream);
    if (j->rc_fwd == AUXTRUNK_OK)
        j->rc_bwd = a->backward(j->h, &j->b->params, j->b->x.p, j->b->dout.p, j->batch,
                                &j->b->grads, 0, j->stream);
    __atomic_store_n(&j->returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* While a host function holds the legacy default stream, work the plugin
 * enqueues on the host's non-blocking stream must still run to completion.
 * If the plugin used the legacy stream (or a blocking stream, or
 * synchronised the device) inside a call, it would wait behind the gate. */
void check_cuda_stream(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const double limit = 10.0;
    cf_setup_t s;
    cf_ref_t r;
    const int B = 300;
    void *st = NULL;
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){64, 48, 40, 16, 300}, B) || cf_ref_make(&r, &s.in))
        return;
    if (cfd_stream_create(&st) || cfd_sync()) {
        cf_fail(ctx, "runner: %s", cfd_error());
        return;
    }
    cfd_gate_t *gate = NULL;
    if (cfd_gate_block_legacy(&gate)) {
        cf_fail(ctx, "runner: cannot block the legacy stream: %s", cfd_error());
        return;
    }
    static stream_job_t job;
    job = (stream_job_t){pl, s.h, &s.b, B, st, 0, 0, 0};
    pthread_t t;
    cf_stage(ctx, "forward and backward on a non-blocking stream, legacy stream blocked");
    if (pthread_create(&t, NULL, stream_job_run, &job) != 0) {
        cfd_gate_open(gate);
        cf_fail(ctx, "runner: cannot start a thread");
        return;
    }
    double t0 = now_s();
    while (!__atomic_load_n(&job.returned, __ATOMIC_ACQUIRE) && now_s() - t0 < limit)
        sleep_ms(2);
    if (!__atomic_load_n(&job.returned, __ATOMIC_ACQUIRE)) {
        cfd_gate_open(gate);
        cf_fail(ctx,
                "forward/backward did not return within %g s while the legacy default "
                "stream was blocked: a call synchronises with the legacy stream or the device",
                limit);
        return;
    }
    pthread_join(t, NULL);
    if (job.rc_fwd != AUXTRUNK_OK || job.rc_bwd != AUXTRUNK_OK) {
        cfd_gate_open(gate);
        cf_fail(ctx, "on a non-blocking stream: forward returned %s, backward %s",
                cf_status_name(job.rc_fwd), cf_status_name(job.rc_bwd));
        return;
    }
    int done = 0;
    while ((done = cfd_stream_done(st)) == 0 && now_s() - t0 < limit)
        sleep_ms(2);
    cfd_gate_open(gate);
    if (done < 0) {
        cf_fail(ctx, "the host's stream reported an error: %s", cfd_error());
        return;
    }
    if (!done) {
        cf_fail(ctx,
                "work enqueued on the host's non-blocking stream did not complete within %g s "
                "while the legacy default stream was blocked: the plugin enqueues on the legacy "
                "stream (or a blocking stream) instead of the one it is given",
                limit);
        return;
    }
    double worst = 0;
    if (cf_plugin_wait(ctx, pl, "the stream test") || cf_bufs_fetch(&s.b, &s.o, 1, 1) ||
        cf_expect_close_all(ctx, "results on a non-blocking stream", &s.in, &s.o, &r, 1, 1, CF_TOL,
                            &worst))
        return;
    pl->api.destroy(s.h);
    cfd_stream_destroy(st);
    cf_pass_detail(ctx, "completed in %.1f ms with the legacy stream blocked",
                   1e3 * (now_s() - t0));
}

/* ------------------------------------------------------------------------- */
/* cuda.graph                                                                */

static int enqueue_step(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, cf_bufs_t *b,
                        int B, void *st, const char *when)
{
    int32_t rc = pl->api.forward(h, &b->params, b->x.p, B, b->out.p, 0, st);
    if (rc != AUXTRUNK_OK)
        return cf_fail(ctx, "forward %s returned %s", when, cf_status_name(rc));
    rc = pl->api.backward(h, &b->params, b->x.p, b->dout.p, B, &b->grads, 0, st);
    if (rc != AUXTRUNK_OK)
        return cf_fail(ctx, "backward %s returned %s", when, cf_status_name(rc));
    return 0;
}

void check_cuda_graph(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    if (!claims(pl, AUXTRUNK_CAP_GRAPH_CAPTURE)) {
        cf_skip(ctx, "plugin does not claim GRAPH_CAPTURE");
        return;
    }
    const int B = 600;
    cf_setup_t s;
    cf_outputs_t eager, replay;
    void *st = NULL, *exec = NULL;
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){33, 20, 17, 9, 600}, B) ||
        cf_outputs_make(&eager, &s.in) || cf_outputs_make(&replay, &s.in))
        return;
    if (cfd_stream_create(&st)) {
        cf_fail(ctx, "runner: %s", cfd_error());
        return;
    }
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            /* New inputs in the same buffers: the graph must read them. */
            tst_rng_fill(&ctx->rng, s.in.x, (size_t)B * s.t.enc, -1.0f, 1.0f);
            tst_rng_fill(&ctx->rng, s.in.dout, (size_t)B * s.t.aux, -1.0f, 1.0f);
            tst_rng_fill(&ctx->rng, s.in.p[2], cf_param_len(s.in.d, 2), -0.3f, 0.3f);
            if (cf_bufs_upload(&s.b, &s.in)) {
                cf_fail(ctx, "runner: upload failed: %s", cfd_error());
                return;
            }
        }
        cf_stage(ctx, "eager forward and backward (round %d)", round + 1);
        if (enqueue_step(ctx, pl, s.h, &s.b, B, st, "eagerly") ||
            cf_plugin_wait(ctx, pl, "eager forward/backward") || cf_bufs_fetch(&s.b, &eager, 1, 1))
            return;
        if (cf_bufs_poison(&s.b, CF_POISON_NAN))
            return;
        if (round == 0) {
            cf_stage(ctx, "capturing forward and backward");
            if (cfd_capture_begin(st)) {
                cf_fail(ctx, "runner: %s", cfd_error());
                return;
            }
            int bad = enqueue_step(ctx, pl, s.h, &s.b, B, st, "during stream capture");
            if (cfd_capture_end(st, &exec) && !bad) {
                cf_fail(ctx,
                        "stream capture of forward and backward failed: %s (the plugin made a "
                        "call that is not allowed during capture)",
                        cfd_error());
                return;
            }
            cfd_take_error();
            if (bad)
                return;
        }
        cf_stage(ctx, "graph replay (round %d)", round + 1);
        if (cfd_graph_launch(exec, st) || cfd_stream_sync(st)) {
            cf_fail(ctx, "graph replay failed: %s", cfd_error());
            return;
        }
        if (cf_plugin_wait(ctx, pl, "graph replay") || cf_bufs_fetch(&s.b, &replay, 1, 1))
            return;
        if (cf_expect_same_all(
                ctx, round == 0 ? "graph replay vs eager" : "graph replay on new inputs vs eager",
                &s.in, &replay, &eager, 1, 1))
            return;
    }
    cf_ref_t r;
    double worst = 0;
    if (cf_ref_make(&r, &s.in) ||
        cf_expect_close_all(ctx, "graph replay", &s.in, &replay, &r, 1, 1, CF_TOL, &worst))
        return;
    cfd_graph_destroy(exec);
    pl->api.destroy(s.h);
    cfd_stream_destroy(st);
    cf_pass_detail(ctx, "captured forward+backward replays the eager bits, on new inputs too");
}

/* ------------------------------------------------------------------------- */
/* cuda.two_streams                                                          */

void check_cuda_two_streams(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    cf_setup_t s[2];
    cf_ref_t r[2];
    void *st[2];
    const int B[2] = {600, 257};
    const cf_topo_t t[2] = {{64, 48, 40, 16, 600}, {33, 20, 17, 9, 300}};
    for (int i = 0; i < 2; i++) {
        if (cf_setup_make(ctx, pl, &s[i], t[i], B[i]) || cf_ref_make(&r[i], &s[i].in))
            return;
        if (cfd_stream_create(&st[i])) {
            cf_fail(ctx, "runner: %s", cfd_error());
            return;
        }
    }
    cf_stage(ctx, "two handles enqueued on two streams");
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < 2; i++)
            if (enqueue_step(ctx, pl, s[i].h, &s[i].b, B[i], st[i], "on its own stream"))
                return;
    double worst = 0;
    for (int i = 0; i < 2; i++) {
        char what[64];
        snprintf(what, sizeof what, "handle %c on stream %c", 'A' + i, 'A' + i);
        if (cfd_stream_sync(st[i])) {
            cf_fail(ctx, "stream %c: %s", 'A' + i, cfd_error());
            return;
        }
        if (cf_plugin_wait(ctx, pl, what) || cf_bufs_fetch(&s[i].b, &s[i].o, 1, 1) ||
            cf_expect_close_all(ctx, what, &s[i].in, &s[i].o, &r[i], 1, 1, CF_TOL, &worst))
            return;
    }
    for (int i = 0; i < 2; i++) {
        pl->api.destroy(s[i].h);
        cfd_stream_destroy(st[i]);
    }
    cf_pass_detail(ctx, "worst relative error %.2g", worst);
}

/* ------------------------------------------------------------------------- */
/* cuda.memory_space                                                         */

void check_cuda_memory_space(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    cf_setup_t s;
    const int B = 9;
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){6, 5, 4, 3, 16}, B) ||
        cf_forward(ctx, pl, s.h, &s.b, B, NULL, NULL))
        return;
    /* Plain host memory where device memory is required. */
    const size_t n = 4096;
    float *host = malloc(n * sizeof *host);
    for (size_t i = 0; i < n; i++)
        host[i] = (float)i;
    int count = 0;
    for (int which = 0; which < 6; which++) {
        static const char *const what[6] = {
            "forward with x in host memory",          "forward with out in host memory",
            "infer with params.w2 in host memory",    "backward with dout in host memory",
            "backward with grads.dw1 in host memory", "backward with x in host memory"};
        auxtrunk_params_t p = s.b.params;
        auxtrunk_grads_t g = s.b.grads;
        cf_watch_t w;
        cf_stage(ctx, "%s", what[which]);
        if (cf_watch_begin(ctx, &w, &s.b))
            return;
        int32_t rc;
        switch (which) {
        case 0:
            rc = a->forward(s.h, &p, host, B, s.b.out.p, 0, NULL);
            break;
        case 1:
            rc = a->forward(s.h, &p, s.b.x.p, B, host, 0, NULL);
            break;
        case 2:
            p.w2 = host;
            rc = a->infer(s.h, &p, s.b.x.p, B, s.b.out.p, 0, NULL);
            break;
        case 3:
            rc = a->backward(s.h, &p, s.b.x.p, host, B, &g, 0, NULL);
            break;
        case 4:
            g.dw1 = host;
            rc = a->backward(s.h, &p, s.b.x.p, s.b.dout.p, B, &g, 0, NULL);
            break;
        default:
            rc = a->backward(s.h, &p, host, s.b.dout.p, B, &g, 0, NULL);
            break;
        }
        if (cf_expect_status(ctx, rc, AUXTRUNK_E_MEMORY_SPACE, what[which]) ||
            cf_watch_end(ctx, &w, what[which]) || cf_expect_last_error(ctx, pl, s.h, what[which]))
            return;
        for (size_t i = 0; i < n; i++)
            if (host[i] != (float)i) {
                cf_fail(ctx, "%s failed but wrote into the host buffer (element %zu)", what[which],
                        i);
                return;
            }
        count++;
    }
    /* The handle still works, with no error left behind. */
    if (cf_forward(ctx, pl, s.h, &s.b, B, NULL, NULL) ||
        cf_backward(ctx, pl, s.h, &s.b, B, 0, NULL, NULL))
        return;
    pl->api.destroy(s.h);
    cf_pass_detail(
        ctx, "%d host pointers refused with E_MEMORY_SPACE, nothing written, no CUDA error", count);
}

/* ------------------------------------------------------------------------- */
/* thread.two_handles                                                        */

typedef struct thread_job {
    cf_ctx_t *ctx;
    cf_setup_t *s;
    cf_ref_t *r;
    int batch, rounds;
    void *stream;
    cf_outputs_t first;
} thread_job_t;

static void *two_handles_thread(void *arg)
{
    thread_job_t *j = arg;
    const cf_plugin_t *pl = &j->ctx->pl;
    int det = claims(pl, AUXTRUNK_CAP_DETERMINISTIC);
    for (int round = 0; round < j->rounds && !cf_done(j->ctx); round++) {
        cf_outputs_t *o = round == 0 ? &j->first : &j->s->o;
        if (cf_forward(j->ctx, pl, j->s->h, &j->s->b, j->batch, o, j->stream) ||
            cf_backward(j->ctx, pl, j->s->h, &j->s->b, j->batch, 0, o, j->stream) ||
            cf_expect_close_all(j->ctx, "concurrent handle", &j->s->in, o, j->r, 1, 1, CF_TOL,
                                NULL))
            return NULL;
        if (round > 0 && det &&
            cf_expect_same_all(j->ctx, "concurrent handle, repeated", &j->s->in, o, &j->first, 1,
                               1))
            return NULL;
    }
    return NULL;
}

void check_thread_two_handles(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    static cf_setup_t s[2];
    static cf_ref_t r[2];
    static thread_job_t job[2];
    const cf_topo_t t[2] = {{40, 32, 24, 8, 300}, {24, 40, 16, 12, 257}};
    const int B[2] = {300, 257};
    for (int i = 0; i < 2; i++) {
        void *st = NULL;
        if (cf_setup_make(ctx, pl, &s[i], t[i], B[i]) || cf_ref_make(&r[i], &s[i].in))
            return;
        if (pl->space == CF_SPACE_CUDA && cfd_stream_create(&st)) {
            cf_fail(ctx, "runner: %s", cfd_error());
            return;
        }
        job[i] = (thread_job_t){ctx, &s[i], &r[i], B[i], 6, st, {0}};
        if (cf_outputs_make(&job[i].first, &s[i].in)) {
            cf_fail(ctx, "runner: out of host memory");
            return;
        }
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, two_handles_thread, &job[i]) != 0) {
            cf_fail(ctx, "runner: cannot start a thread");
            return;
        }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    if (cf_done(ctx))
        return;
    for (int i = 0; i < 2; i++)
        pl->api.destroy(s[i].h);
    cf_pass_detail(ctx, "two threads, one handle each, 6 forward/backward rounds, correct%s",
                   claims(pl, AUXTRUNK_CAP_DETERMINISTIC) ? " and bit-identical across rounds"
                                                          : "");
}

/* ------------------------------------------------------------------------- */
/* thread.handle_migration                                                   */

typedef struct migrate_job {
    cf_ctx_t *ctx;
    cf_setup_t *s;
    int step; /* 0 forward, 1 backward, 2 destroy */
    int batch;
} migrate_job_t;

static void *migrate_thread(void *arg)
{
    migrate_job_t *j = arg;
    const cf_plugin_t *pl = &j->ctx->pl;
    if (j->step == 0)
        cf_forward(j->ctx, pl, j->s->h, &j->s->b, j->batch, &j->s->o, NULL);
    else if (j->step == 1)
        cf_backward(j->ctx, pl, j->s->h, &j->s->b, j->batch, 0, &j->s->o, NULL);
    else
        cf_expect_status(j->ctx, pl->api.destroy(j->s->h), AUXTRUNK_OK,
                         "destroy on a third thread");
    return NULL;
}

void check_thread_handle_migration(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    static cf_setup_t s;
    cf_ref_t r;
    const int B = 77;
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){20, 16, 12, 6, 128}, B) || cf_ref_make(&r, &s.in))
        return;
    double worst = 0;
    for (int step = 0; step < 3; step++) {
        migrate_job_t j = {ctx, &s, step, B};
        pthread_t th;
        cf_stage(ctx, "step %d on thread %d", step, step + 1);
        if (pthread_create(&th, NULL, migrate_thread, &j) != 0) {
            cf_fail(ctx, "runner: cannot start a thread");
            return;
        }
        pthread_join(th, NULL);
        if (cf_done(ctx))
            return;
        if (step < 2 && cf_expect_close_all(ctx,
                                            step == 0 ? "forward on a second thread"
                                                      : "backward on a third thread",
                                            &s.in, &s.o, &r, step == 0, step == 1, CF_TOL, &worst))
            return;
    }
    cf_pass_detail(ctx, "init, forward, backward and destroy each on a different thread");
}

/* ------------------------------------------------------------------------- */
/* thread.entry_strings                                                      */

typedef struct entry_job {
    cf_ctx_t *ctx;
    unsigned seed;
} entry_job_t;

static void *entry_thread(void *arg)
{
    entry_job_t *j = arg;
    const cf_plugin_t *pl = &j->ctx->pl;
    unsigned x = j->seed;
    for (int i = 0; i < 2000 && !cf_done(j->ctx); i++) {
        auxtrunk_host_info_t host = {sizeof host, AUXTRUNK_VERSION(1, 0), AUXTRUNK_VERSION(1, 0),
                                     0};
        auxtrunk_api_t api;
        memset(&api, 0, sizeof api);
        api.struct_size = sizeof api;
        int32_t rc = pl->entry(&host, &api);
        if (rc != AUXTRUNK_OK) {
            cf_fail(j->ctx, "concurrent entry call #%d returned %s", i, cf_status_name(rc));
            return NULL;
        }
        const char *field = cf_api_diff(&api, &pl->api);
        if (field) {
            cf_fail(j->ctx, "concurrent entry call #%d filled a different table: api.%s differs", i,
                    field);
            return NULL;
        }
        x = x * 1103515245u + 12345u;
        int32_t st = (int32_t)((x >> 16) % 20) - 17; /* -17 .. 2: every status and a few unknown */
        const char *text = api.status_string(st);
        if (!text || strcmp(text, auxtrunk_status_message(st)) != 0) {
            cf_fail(j->ctx, "concurrent status_string(%d) returned \"%s\"", (int)st,
                    text ? text : "(NULL)");
            return NULL;
        }
        if (strcmp(api.impl_name, pl->api.impl_name) != 0 ||
            strcmp(api.kernel_version, pl->api.kernel_version) != 0) {
            cf_fail(j->ctx, "impl_name or kernel_version changed under concurrent calls");
            return NULL;
        }
    }
    return NULL;
}

void check_thread_entry_strings(cf_ctx_t *ctx)
{
    enum { THREADS = 8 };
    entry_job_t job[THREADS];
    pthread_t th[THREADS];
    int started = 0;
    for (int i = 0; i < THREADS; i++) {
        job[i] = (entry_job_t){ctx, (unsigned)(tst_rng_next(&ctx->rng) & 0xFFFFFFFFu)};
        if (pthread_create(&th[i], NULL, entry_thread, &job[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (started < THREADS)
        cf_fail(ctx, "runner: cannot start %d threads", THREADS);
    cf_pass_detail(ctx, "%d threads x 2000 entry + status_string calls", THREADS);
}
