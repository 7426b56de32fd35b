/*
 * checks_lifecycle.c — group 3: init/destroy cycles without growth, unused
 * and concurrent handles, backward before forward, handles that are not
 * live, memory_usage.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "device.h"

/* ------------------------------------------------------------------------- */
/* lifecycle.cycles                                                          */

/* Growth allowed over the measured cycles. The heap figure is exact (bytes
 * malloc has handed out), so its slack only absorbs lazily-created runtime
 * state: host plugins may not leak 330 bytes per cycle; CUDA plugins, whose
 * runtime and driver keep host-side caches, get four times the slack over
 * fewer cycles (5 KiB per cycle). */
#define CYCLE_HEAP_SLACK (64LL << 10)
/* Host plugins over the second half of the cycles, after anything lazily
 * created has been created: a leak grows the heap every cycle, so even 16
 * bytes per handle (one malloc chunk) exceed this. */
#define CYCLE_HEAP_SLACK_TAIL (1LL << 10)
#define CYCLE_HEAP_SLACK_CUDA (256LL << 10)
#define CYCLE_RSS_SLACK_KB (8LL << 10)
#define CYCLE_DEVICE_SLACK (64LL << 20)

void check_lifecycle_cycles(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const int cuda = pl->space == CF_SPACE_CUDA;
    /* CUDA: a topology whose recorded activations are 16 MiB per handle, so
     * that a handle leaked per cycle shows in device-wide memory figures. */
    const cf_topo_t t =
        cuda ? (cf_topo_t){256, 256, 256, 128, 8192} : (cf_topo_t){16, 32, 24, 8, 64};
    const int warm = cuda ? 5 : 10, cycles = cuda ? 50 : 200, B = 64;
    const long long heap_slack = cuda ? CYCLE_HEAP_SLACK_CUDA : CYCLE_HEAP_SLACK;
    cf_inputs_t in;
    cf_bufs_t b;
    if (cf_inputs_make(&in, &ctx->rng, t, B) || cf_bufs_make(&b, pl->space, &in, 0)) {
        cf_fail(ctx, "runner: cannot allocate buffers");
        return;
    }
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    cf_usage_t u0, umid, u1;
    for (int i = 0; i < warm + cycles; i++) {
        if (i == warm)
            cf_usage_read(&u0, cuda);
        if (i == warm + cycles / 2)
            cf_usage_read(&umid, cuda);
        auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
        if (!h)
            return;
        if (cf_forward(ctx, pl, h, &b, B, NULL, NULL) ||
            cf_backward(ctx, pl, h, &b, B, 0, NULL, NULL))
            return;
        int32_t rc = pl->api.destroy(h);
        if (rc != AUXTRUNK_OK) {
            cf_fail(ctx, "destroy returned %s in cycle %d", cf_status_name(rc), i + 1);
            return;
        }
    }
    cf_usage_read(&u1, cuda);
    const int sanitized = cf_heap_sanitized();
    long long dheap = u0.heap >= 0 && !sanitized ? u1.heap - u0.heap : 0;
    long long dtail = u0.heap >= 0 && !sanitized ? u1.heap - umid.heap : 0;
    long long drss = sanitized ? 0 : u1.rss_kb - u0.rss_kb;
    long long ddev = cuda && u0.device >= 0 && u1.device >= 0 ? u1.device - u0.device : 0;
    u1.threads = cf_threads_settle(u0.threads);
    int dfd = u1.fds - u0.fds, dthr = u1.threads - u0.threads;
    char fig[400];
    snprintf(fig, sizeof fig,
             "over %d init/forward/backward/destroy cycles: heap %+lld B, RSS %+lld KiB, "
             "fds %+d, threads %+d%s",
             cycles, dheap, drss, dfd, dthr, cuda ? ", device " : "");
    if (!cuda)
        snprintf(fig + strlen(fig), sizeof fig - strlen(fig), " (heap %+lld B over the last %d)",
                 dtail, cycles - cycles / 2);
    if (cuda)
        snprintf(fig + strlen(fig), sizeof fig - strlen(fig), "%+lld B", ddev);
    if (dheap > heap_slack)
        cf_fail(ctx, "host heap grew by %lld bytes (%lld per cycle) %s", dheap, dheap / cycles,
                fig);
    else if (!cuda && dtail > CYCLE_HEAP_SLACK_TAIL)
        cf_fail(ctx,
                "host heap grew by %lld bytes over the last %d cycles (%lld per cycle; "
                "limit %lld): a small leak per handle %s",
                dtail, cycles - cycles / 2, dtail / (cycles - cycles / 2), CYCLE_HEAP_SLACK_TAIL,
                fig);
    else if (drss > CYCLE_RSS_SLACK_KB)
        cf_fail(ctx, "resident memory grew by %lld KiB %s", drss, fig);
    else if (dfd > 0)
        cf_fail(ctx, "%d file descriptor(s) leaked %s", dfd, fig);
    else if (dthr > 0)
        cf_fail(ctx, "%d thread(s) left running %s", dthr, fig);
    else if (ddev > CYCLE_DEVICE_SLACK)
        cf_fail(ctx, "device memory grew by %lld bytes %s", ddev, fig);
    else
        cf_pass_detail(ctx, "%s", fig);
    if (sanitized)
        cf_note(ctx, "sanitizer build of the runner: heap and RSS growth not compared");
    else if (u0.heap < 0)
        cf_note(ctx, "heap figures unavailable (no mallinfo2): only RSS was compared");
}

/* ------------------------------------------------------------------------- */
/* lifecycle.unused_handle                                                   */

void check_lifecycle_unused_handle(cf_ctx_t *ctx)
{
    const auxtrunk_api_t *a = &ctx->pl.api;
    auxtrunk_config_t cfg = cf_config(7, 6, 5, 4, 33);
    auxtrunk_handle_t *h = cf_init(ctx, &ctx->pl, &cfg);
    if (!h)
        return;
    cf_stage(ctx, "last_error of a fresh handle");
    const char *le = a->last_error(h);
    if (!le || le[0]) {
        cf_fail(ctx, "last_error of a fresh handle is %s%s%s, expected \"\" (never NULL)",
                le ? "\"" : "NULL", le ? le : "", le ? "\"" : "");
        return;
    }
    cf_stage(ctx, "destroy of a handle never used");
    if (cf_expect_status(ctx, a->destroy(h), AUXTRUNK_OK, "destroy of a never-used handle"))
        return;
    cf_stage(ctx, "destroy(NULL)");
    cf_expect_status(ctx, a->destroy(NULL), AUXTRUNK_OK, "destroy(NULL)");
}

/* ------------------------------------------------------------------------- */
/* lifecycle.two_handles                                                     */

void check_lifecycle_two_handles(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    cf_setup_t A, B;
    cf_ref_t ra, rb;
    const int nA = 37, nB = 300;
    if (cf_setup_make(ctx, pl, &A, (cf_topo_t){9, 14, 11, 6, 40}, nA) ||
        cf_setup_make(ctx, pl, &B, (cf_topo_t){20, 8, 16, 3, 300}, nB))
        return;
    if (cf_ref_make(&ra, &A.in) || cf_ref_make(&rb, &B.in)) {
        cf_fail(ctx, "runner: out of host memory");
        return;
    }
    double worst = 0;
    /* Interleaved: each backward must use its own handle's record. */
    if (cf_forward(ctx, pl, A.h, &A.b, nA, &A.o, NULL) ||
        cf_expect_close_all(ctx, "handle A forward", &A.in, &A.o, &ra, 1, 0, CF_TOL, &worst) ||
        cf_forward(ctx, pl, B.h, &B.b, nB, &B.o, NULL) ||
        cf_expect_close_all(ctx, "handle B forward", &B.in, &B.o, &rb, 1, 0, CF_TOL, &worst) ||
        cf_backward(ctx, pl, A.h, &A.b, nA, 0, &A.o, NULL) ||
        cf_expect_close_all(ctx, "handle A backward after B's forward", &A.in, &A.o, &ra, 0, 1,
                            CF_TOL, &worst) ||
        cf_infer(ctx, pl, A.h, &A.b, nA, &A.o, NULL) ||
        cf_backward(ctx, pl, B.h, &B.b, nB, 0, &B.o, NULL) ||
        cf_expect_close_all(ctx, "handle B backward", &B.in, &B.o, &rb, 0, 1, CF_TOL, &worst))
        return;
    int32_t rc = pl->api.destroy(A.h);
    if (cf_expect_status(ctx, rc, AUXTRUNK_OK, "destroy of handle A"))
        return;
    if (cf_backward(ctx, pl, B.h, &B.b, nB, 0, &B.o, NULL) ||
        cf_expect_close_all(ctx, "handle B backward after A was destroyed", &B.in, &B.o, &rb, 0, 1,
                            CF_TOL, &worst))
        return;
    if (cf_expect_status(ctx, pl->api.destroy(B.h), AUXTRUNK_OK, "destroy of handle B"))
        return;
    cf_pass_detail(ctx, "worst relative error %.2g", worst);
}

/* ------------------------------------------------------------------------- */
/* lifecycle.no_forward                                                      */

/* A forward that must fail, one kind of failure each. */
typedef struct failed_forward {
    const char *what;
    const auxtrunk_params_t *params;
    const float *x;
    float *out;
    int32_t batch;
    uint32_t flags;
    int32_t want;
} failed_forward_t;

/* The k-th kind for setup s (max_batch 16) into *f; returns how many kinds
 * there are. Batches are 5 where the batch is not the failure, so that a
 * record taken by mistake differs from the good forward's 12. */
static int failed_forward_kinds(const cf_setup_t *s, failed_forward_t *f, int k)
{
    static auxtrunk_params_t no_w2, small, reserved;
    no_w2 = s->b.params, no_w2.w2 = NULL;
    small = s->b.params, small.struct_size = 8;
    reserved = s->b.params, reserved.reserved = 1;
    const auxtrunk_params_t *P = &s->b.params;
    float *x = s->b.x.p, *out = s->b.out.p;
    const failed_forward_t all[] = {
        {"params NULL", NULL, x, out, 5, 0, AUXTRUNK_E_NULL_POINTER},
        {"x NULL", P, NULL, out, 5, 0, AUXTRUNK_E_NULL_POINTER},
        {"out NULL", P, x, NULL, 5, 0, AUXTRUNK_E_NULL_POINTER},
        {"params.w2 NULL", &no_w2, x, out, 5, 0, AUXTRUNK_E_NULL_POINTER},
        {"params.struct_size 8", &small, x, out, 5, 0, AUXTRUNK_E_STRUCT_SIZE},
        {"params.reserved 1", &reserved, x, out, 5, 0, AUXTRUNK_E_STRUCT_SIZE},
        {"flags 0x80", P, x, out, 5, 0x80u, AUXTRUNK_E_FLAGS},
        {"batch 0", P, x, out, 0, 0, AUXTRUNK_E_BATCH},
        {"batch 17 > max_batch 16", P, x, out, 17, 0, AUXTRUNK_E_BATCH},
        {"out == x", P, x, x, 5, 0, AUXTRUNK_E_ALIAS},
        {"out overlapping W1", P, x, (float *)s->b.p[0].p + 1, 5, 0, AUXTRUNK_E_ALIAS},
        /* CUDA plugins only: a host pointer as x. */
        {"x in host memory", P, s->in.x, out, 5, 0, AUXTRUNK_E_MEMORY_SPACE},
    };
    const int n = (int)(sizeof all / sizeof all[0]) - (s->b.space == CF_SPACE_CUDA ? 0 : 1);
    if (f)
        *f = all[k];
    return n;
}

/* The failing forward f, then a backward of batch B that must return want
 * (bwd names it) and write nothing. */
static int failed_then_backward(cf_ctx_t *ctx, cf_setup_t *s, const failed_forward_t *f, int B,
                                int32_t want, const char *bwd)
{
    const auxtrunk_api_t *a = &ctx->pl.api;
    char fwd[160];
    snprintf(fwd, sizeof fwd, "forward with %s", f->what);
    cf_stage(ctx, "%s", fwd);
    int32_t rc = a->forward(s->h, f->params, f->x, f->batch, f->out, f->flags, NULL);
    if (cf_expect_status(ctx, rc, f->want, fwd))
        return -1;
    cf_stage(ctx, "%s", bwd);
    cf_watch_t w;
    if (cf_watch_begin(ctx, &w, &s->b))
        return -1;
    rc = a->backward(s->h, &s->b.params, s->b.x.p, s->b.dout.p, B, &s->b.grads, 0, NULL);
    if (cf_expect_status(ctx, rc, want, bwd) || cf_watch_end(ctx, &w, bwd))
        return -1;
    return 0;
}

void check_lifecycle_no_forward(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    cf_setup_t s;
    const int n = 12;
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){8, 7, 6, 5, 16}, n))
        return;
    cf_watch_t w;
    const char *what = "backward on a fresh handle";
    cf_stage(ctx, "%s", what);
    if (cf_watch_begin(ctx, &w, &s.b))
        return;
    int32_t rc = a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, n, &s.b.grads, 0, NULL);
    if (cf_expect_status(ctx, rc, AUXTRUNK_E_NO_FORWARD, what) || cf_watch_end(ctx, &w, what) ||
        cf_expect_last_error(ctx, pl, s.h, what))
        return;
    /* An inference forward records nothing. */
    if (cf_infer(ctx, pl, s.h, &s.b, n, NULL, NULL))
        return;
    what = "backward after only an inference forward";
    cf_stage(ctx, "%s", what);
    if (cf_watch_begin(ctx, &w, &s.b))
        return;
    rc = a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, n, &s.b.grads, 0, NULL);
    if (cf_expect_status(ctx, rc, AUXTRUNK_E_NO_FORWARD, what) || cf_watch_end(ctx, &w, what))
        return;
    /* Neither does a forward that failed, whatever made it fail. */
    const int kinds = failed_forward_kinds(&s, NULL, 0);
    for (int k = 0; k < kinds; k++) {
        failed_forward_t f;
        failed_forward_kinds(&s, &f, k);
        char bwd[200];
        snprintf(bwd, sizeof bwd, "backward after only a failed forward (%s)", f.what);
        if (failed_then_backward(ctx, &s, &f, f.batch >= 1 && f.batch <= 16 ? f.batch : n,
                                 AUXTRUNK_E_NO_FORWARD, bwd))
            return;
    }
    /* And then a real forward makes backward work; a failed forward of
     * another batch changes nothing of its record. */
    if (cf_forward(ctx, pl, s.h, &s.b, n, NULL, NULL) ||
        cf_backward(ctx, pl, s.h, &s.b, n, 0, NULL, NULL))
        return;
    for (int k = 0; k < kinds; k++) {
        failed_forward_t f;
        failed_forward_kinds(&s, &f, k);
        if (f.batch == n || f.batch < 1 || f.batch > 16)
            continue;
        char bwd[240];
        snprintf(bwd, sizeof bwd,
                 "backward(B=%d) after a forward(B=%d) and a failed forward with %s", f.batch, n,
                 f.what);
        if (failed_then_backward(ctx, &s, &f, f.batch, AUXTRUNK_E_BATCH_MISMATCH, bwd) ||
            cf_backward(ctx, pl, s.h, &s.b, n, 0, NULL, NULL))
            return;
    }
    cf_pass_detail(ctx,
                   "fresh handle, after only an infer, after failed forwards of %d kinds: "
                   "E_NO_FORWARD; failed forwards leave an earlier record as it was",
                   kinds);
}

/* ------------------------------------------------------------------------- */
/* lifecycle.not_a_handle                                                    */

void check_lifecycle_not_a_handle(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    cf_setup_t s;
    const int n = 4;
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){4, 3, 3, 2, 4}, n) ||
        cf_forward(ctx, pl, s.h, &s.b, n, NULL, NULL))
        return;
    /* A zeroed block the runner owns: reading its header is safe, and no
     * plugin's live-handle marker can be in it. */
    auxtrunk_handle_t *fake = calloc(1, 1 << 16);
    for (int round = 0; round < 2; round++) {
        auxtrunk_handle_t *h = round == 0 ? fake : NULL;
        const char *who = round == 0 ? "a zeroed non-handle block" : "a NULL handle";
        int32_t want = round == 0 ? AUXTRUNK_E_BAD_HANDLE : AUXTRUNK_E_NULL_POINTER;
        int32_t alt = round == 0 ? AUXTRUNK_E_BAD_HANDLE : AUXTRUNK_E_BAD_HANDLE;
        for (int call = 0; call < 5; call++) {
            static const char *const names[5] = {"forward", "infer", "backward", "memory_usage",
                                                 "destroy"};
            if (call == 4 && round == 1)
                break; /* destroy(NULL) is OK by definition */
            char what[96];
            snprintf(what, sizeof what, "%s on %s", names[call], who);
            cf_stage(ctx, "%s", what);
            cf_watch_t w;
            if (cf_watch_begin(ctx, &w, &s.b))
                return;
            auxtrunk_memory_t mem = {sizeof mem, 0, 0, 0};
            int32_t rc = call == 0   ? a->forward(h, &s.b.params, s.b.x.p, n, s.b.out.p, 0, NULL)
                         : call == 1 ? a->infer(h, &s.b.params, s.b.x.p, n, s.b.out.p, 0, NULL)
                         : call == 2 ? a->backward(h, &s.b.params, s.b.x.p, s.b.dout.p, n,
                                                   &s.b.grads, 0, NULL)
                         : call == 3 ? a->memory_usage(h, &mem)
                                     : a->destroy(h);
            if (cf_expect_status2(ctx, rc, want, alt, what) || cf_watch_end(ctx, &w, what))
                return;
        }
    }
    for (size_t i = 0; i < (1 << 16); i++)
        if (((unsigned char *)fake)[i] != 0) {
            cf_fail(ctx, "a call on a non-handle block wrote into it (byte %zu)", i);
            return;
        }
    const char *le = a->last_error(NULL);
    if (!le || le[0]) {
        cf_fail(ctx, "last_error(NULL) is %s%s%s, expected \"\"", le ? "\"" : "(NULL)",
                le ? le : "", le ? "\"" : "");
        return;
    }
    /* The real handle is unaffected. */
    cf_backward(ctx, pl, s.h, &s.b, n, 0, NULL, NULL);
}

/* ------------------------------------------------------------------------- */
/* lifecycle.after_destroy                                                   */

/* destroy runs with the runner's free() quarantining, so the handle's memory
 * stays allocated with whatever destroy left in it: calls on it are then
 * safe, and the documented E_BAD_HANDLE is what they must return. */
void check_lifecycle_after_destroy(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    if (!cf_alloc_supported()) {
        cf_skip(ctx, "this runner cannot quarantine freed memory (not glibc, or a sanitizer "
                     "build, whose own quarantine reports the use after free)");
        return;
    }
    cf_setup_t s;
    const int n = 6;
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){5, 4, 3, 2, 8}, n) ||
        cf_forward(ctx, pl, s.h, &s.b, n, NULL, NULL) ||
        cf_backward(ctx, pl, s.h, &s.b, n, 0, NULL, NULL))
        return;
    cf_stage(ctx, "destroy, with freed memory quarantined");
    cf_quarantine_begin();
    int32_t rc = a->destroy(s.h);
    int kept = cf_quarantine_end();
    if (cf_expect_status(ctx, rc, AUXTRUNK_OK, "destroy"))
        return;
    if (kept <= 0) {
        cf_skip(ctx, kept < 0 ? "destroy freed more blocks than the quarantine holds"
                              : "destroy freed nothing through free(): the handle's memory "
                                "cannot be kept for the probe");
        return;
    }
    static const char *const names[5] = {"forward", "infer", "backward", "memory_usage", "destroy"};
    for (int call = 0; call < 5; call++) {
        char what[96];
        snprintf(what, sizeof what, "%s on a destroyed handle", names[call]);
        cf_stage(ctx, "%s", what);
        cf_watch_t w;
        if (cf_watch_begin(ctx, &w, &s.b))
            return;
        auxtrunk_memory_t mem = {sizeof mem, 0, 0, 0};
        rc = call == 0   ? a->forward(s.h, &s.b.params, s.b.x.p, n, s.b.out.p, 0, NULL)
             : call == 1 ? a->infer(s.h, &s.b.params, s.b.x.p, n, s.b.out.p, 0, NULL)
             : call == 2
                 ? a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, n, &s.b.grads, 0, NULL)
             : call == 3 ? a->memory_usage(s.h, &mem)
                         : a->destroy(s.h);
        if (rc == AUXTRUNK_OK) {
            cf_fail(ctx,
                    "%s returned AUXTRUNK_OK: destroy left the handle looking live (its "
                    "dead marker was not stored, e.g. a plain store the compiler dropped "
                    "before free())",
                    what);
            return;
        }
        if (cf_expect_status(ctx, rc, AUXTRUNK_E_BAD_HANDLE, what) || cf_watch_end(ctx, &w, what))
            return;
    }
    cf_quarantine_release();
    cf_pass_detail(ctx,
                   "forward, infer, backward, memory_usage and destroy on a destroyed handle "
                   "(%d freed blocks quarantined): E_BAD_HANDLE, nothing written",
                   kept);
}

/* ------------------------------------------------------------------------- */
/* lifecycle.memory_usage                                                    */

void check_lifecycle_memory_usage(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    auxtrunk_config_t cfg = cf_config(64, 64, 64, 32, 1024);
    auxtrunk_handle_t *h = cf_init(ctx, pl, &cfg);
    if (!h)
        return;
    auxtrunk_memory_t m;
    memset(&m, 0xCD, sizeof m);
    m.struct_size = sizeof m;
    if (cf_expect_status(ctx, a->memory_usage(h, &m), AUXTRUNK_OK, "memory_usage"))
        return;
    if (m.struct_size != sizeof m || m.reserved != 0) {
        cf_fail(ctx, "memory_usage left struct_size %u and reserved 0x%x (expected %zu and 0)",
                m.struct_size, m.reserved, sizeof m);
        return;
    }
    if (pl->space == CF_SPACE_HOST && m.device_bytes != 0) {
        cf_fail(ctx, "a host-memory plugin reports %llu device bytes",
                (unsigned long long)m.device_bytes);
        return;
    }
    /* The handle owns at least the record forward keeps for backward: h1
     * and h2 for max_batch rows, wherever it keeps them. */
    const uint64_t record = 4ull * (uint64_t)cfg.max_batch * (uint64_t)(cfg.h1 + cfg.h2);
    if (m.host_bytes + m.device_bytes < record) {
        cf_fail(ctx,
                "memory_usage reports %llu host and %llu device bytes, less than the record "
                "alone (h1 and h2 for max_batch rows: %llu bytes)",
                (unsigned long long)m.host_bytes, (unsigned long long)m.device_bytes,
                (unsigned long long)record);
        return;
    }
    if (cf_expect_status(ctx, a->memory_usage(h, NULL), AUXTRUNK_E_NULL_POINTER,
                         "memory_usage(handle, NULL)") ||
        cf_expect_last_error(ctx, pl, h, "memory_usage(handle, NULL)"))
        return;
    cf_pass_detail(ctx, "host %llu B, device %llu B for 64x64x64x32, max_batch 1024",
                   (unsigned long long)m.host_bytes, (unsigned long long)m.device_bytes);
    a->destroy(h);
}

/* ------------------------------------------------------------------------- */
/* lifecycle.no_alloc_in_calls                                               */

void check_lifecycle_no_alloc_in_calls(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    if (!cf_alloc_supported()) {
        cf_skip(ctx, "this runner cannot count allocations (not glibc, or a sanitizer build)");
        return;
    }
    if (pl->space == CF_SPACE_CUDA) {
        cf_skip(ctx, "CUDA plugins: the CUDA runtime may allocate host memory inside a launch; "
                     "device allocations inside calls are caught by cuda.graph");
        return;
    }
    cf_setup_t s;
    const int B = 300;
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){24, 20, 16, 8, 300}, B))
        return;
    auxtrunk_memory_t mem = {sizeof mem, 0, 0, 0};
    static const char *const names[] = {"forward",
                                        "infer",
                                        "backward",
                                        "backward(ACCUMULATE)",
                                        "memory_usage",
                                        "last_error",
                                        "forward with batch > max_batch (an error)",
                                        "backward with a mismatched batch (an error)"};
    for (int i = 0; i < 8; i++) {
        cf_stage(ctx, "%s, counting allocations", names[i]);
        int32_t rc = AUXTRUNK_OK, want = AUXTRUNK_OK;
        cf_alloc_count_begin();
        switch (i) {
        case 0:
            rc = a->forward(s.h, &s.b.params, s.b.x.p, B, s.b.out.p, 0, NULL);
            break;
        case 1:
            rc = a->infer(s.h, &s.b.params, s.b.x.p, B, s.b.out.p, 0, NULL);
            break;
        case 2:
            rc = a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, B, &s.b.grads, 0, NULL);
            break;
        case 3:
            rc = a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, B, &s.b.grads,
                             AUXTRUNK_BACKWARD_ACCUMULATE, NULL);
            break;
        case 4:
            rc = a->memory_usage(s.h, &mem);
            break;
        case 5:
            a->last_error(s.h);
            break;
        case 6:
            want = AUXTRUNK_E_BATCH;
            rc = a->forward(s.h, &s.b.params, s.b.x.p, B + 1, s.b.out.p, 0, NULL);
            break;
        default:
            want = AUXTRUNK_E_BATCH_MISMATCH;
            rc = a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, B - 1, &s.b.grads, 0, NULL);
            break;
        }
        long n = cf_alloc_count_end();
        if (cf_expect_status(ctx, rc, want, names[i]))
            return;
        if (n > 0) {
            cf_fail(ctx,
                    "%s allocated host memory (%ld malloc-family call%s): after init, no call "
                    "allocates",
                    names[i], n, n == 1 ? "" : "s");
            return;
        }
    }
    a->destroy(s.h);
    cf_pass_detail(ctx, "forward, infer, backward, memory_usage, last_error and failing calls: "
                        "no malloc-family call");
}
