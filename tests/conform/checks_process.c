/*
 * checks_process.c — group 11: the plugin shares its host's process, and
 * leaves it as it found it (abi/auxtrunk.h, "Process rules"): the
 * floating-point environment, signal handlers and mask, memory mappings,
 * threads after the last destroy and dlclose, and the stack budget.
 *
 * The checks that load the plugin themselves (signals, threads) first bring
 * up the runner's own CUDA, where there is one, so that what the CUDA
 * runtime sets up for the runner is not charged to the plugin.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fenv.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "canon32.h"
#include "checks.h"
#include "device.h"

static int claims(const cf_plugin_t *pl, uint64_t cap) { return (pl->api.caps & cap) != 0; }

/* ------------------------------------------------------------------------- */
/* process.fp_environment                                                    */

/* The control state of the floating-point environment (not the sticky
 * exception flags, which any arithmetic may raise). */
typedef struct fp_state {
    unsigned mxcsr;     /* x86-64: MXCSR without its flag bits */
    unsigned short x87; /* x86-64: x87 control word */
    int round;          /* fegetround() */
} fp_state_t;

#if defined(__x86_64__)
#define FP_MXCSR_CONTROL 0xFFC0u /* DAZ, exception masks, rounding, FTZ */
#define FP_MXCSR_DEFAULT 0x1F80u
#define FP_MXCSR_FTZ_DAZ 0x8040u
#endif

static fp_state_t fp_read(void)
{
    fp_state_t s = {0, 0, fegetround()};
#if defined(__x86_64__)
    s.mxcsr = _mm_getcsr() & FP_MXCSR_CONTROL;
    __asm__ volatile("fnstcw %0" : "=m"(s.x87));
#endif
    return s;
}

/* odd: round toward zero, and on x86-64 flush-to-zero and denormals-are-zero. */
static void fp_enter(int odd)
{
    fesetround(odd ? FE_TOWARDZERO : FE_TONEAREST);
#if defined(__x86_64__)
    unsigned m = _mm_getcsr() & ~FP_MXCSR_FTZ_DAZ;
    _mm_setcsr(odd ? m | FP_MXCSR_FTZ_DAZ : m);
#endif
}

static void fp_reset(void)
{
    fesetround(FE_TONEAREST);
#if defined(__x86_64__)
    _mm_setcsr(FP_MXCSR_DEFAULT);
#endif
}

static int fp_same(cf_ctx_t *ctx, const fp_state_t *a, const fp_state_t *b, const char *what)
{
    if (a->mxcsr == b->mxcsr && a->x87 == b->x87 && a->round == b->round)
        return 0;
    fp_reset();
    return cf_fail(ctx,
                   "%s returned with the caller's floating-point environment changed: MXCSR "
                   "control 0x%04x -> 0x%04x, x87 control 0x%04x -> 0x%04x, rounding %d -> %d",
                   what, a->mxcsr, b->mxcsr, a->x87, b->x87, a->round, b->round);
}

/* Inputs whose products and sums are denormal (biases 0, x around 2^-124):
 * flushing them to zero changes the results. */
static int denormal_inputs(cf_ctx_t *ctx, cf_setup_t *s)
{
    const size_t nx = (size_t)s->in.batch * s->in.d.enc;
    for (size_t i = 0; i < nx; i++)
        s->in.x[i] = ldexpf(s->in.x[i], -124);
    for (int i = 1; i < CF_NPARAM; i += 2)
        memset(s->in.p[i], 0, cf_param_len(s->in.d, i) * sizeof(float));
    if (cf_bufs_upload(&s->b, &s->in))
        return cf_fail(ctx, "runner: upload failed: %s", cfd_error());
    return 0;
}

void check_process_fp_environment(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    const cf_topo_t t = {12, 10, 8, 6, 64};
    const int B = 37;
    cf_setup_t s;
    cf_ref_t r;
    cf_outputs_t want;
    if (cf_setup_make(ctx, pl, &s, t, B) || denormal_inputs(ctx, &s) || cf_ref_make(&r, &s.in) ||
        cf_outputs_make(&want, &s.in))
        return;
    ref64_params_t rp = {s.in.p[0], s.in.p[1], s.in.p[2], s.in.p[3], s.in.p[4], s.in.p[5]};
    canon32_forward(s.in.d, &rp, s.in.x, B, NULL, NULL, want.out);
    if (canon32_backward(s.in.d, &rp, s.in.x, s.in.dout, B, want.g[0], want.g[1], want.g[2],
                         want.g[3], want.g[4], want.g[5])) {
        cf_fail(ctx, "runner: out of host memory");
        return;
    }
    const int exact = claims(pl, AUXTRUNK_CAP_EXACT);
    static const char *const env_name[2] = {"the default environment",
                                            "round toward zero with FTZ and DAZ"};
    for (int odd = 0; odd < 2; odd++) {
        for (int c = 0; c < 5; c++) {
            static const char *const names[5] = {"init", "forward", "infer", "backward", "destroy"};
            char what[160];
            snprintf(what, sizeof what, "%s under %s", names[c], env_name[odd]);
            cf_stage(ctx, "%s", what);
            auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
            auxtrunk_handle_t *h2 = NULL;
            fp_enter(odd);
            fp_state_t before = fp_read();
            int32_t rc = c == 0   ? a->init(&cfg, &h2)
                         : c == 1 ? a->forward(s.h, &s.b.params, s.b.x.p, B, s.b.out.p, 0, NULL)
                         : c == 2 ? a->infer(s.h, &s.b.params, s.b.x.p, B, s.b.out.p, 0, NULL)
                         : c == 3 ? a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, B,
                                                &s.b.grads, 0, NULL)
                                  : AUXTRUNK_OK;
            if (c == 4) {
                /* destroy of a handle made for it */
                fp_reset();
                if (!(h2 = cf_init(ctx, pl, &cfg)))
                    return;
                fp_enter(odd);
                before = fp_read();
                rc = a->destroy(h2);
                h2 = NULL;
            }
            fp_state_t after = fp_read();
            fp_reset();
            if (fp_same(ctx, &before, &after, what) || cf_expect_status(ctx, rc, AUXTRUNK_OK, what))
                return;
            if (h2)
                a->destroy(h2);
            if (c < 1 || c > 3)
                continue;
            if (cf_plugin_wait(ctx, pl, what) || cf_bufs_fetch(&s.b, &s.o, c < 3, c == 3)) {
                cf_fail(ctx, "runner: cannot read results: %s", cfd_error());
                return;
            }
            snprintf(what, sizeof what, "%s on denormal data under %s", names[c], env_name[odd]);
            if (exact
                    ? cf_expect_same_all(ctx, what, &s.in, &s.o, &want, c < 3, c == 3)
                    : cf_expect_close_all(ctx, what, &s.in, &s.o, &r, c < 3, c == 3, CF_TOL, NULL))
                return;
        }
    }
    a->destroy(s.h);
    cf_pass_detail(ctx,
                   "init, forward, infer, backward, destroy leave the caller's MXCSR, x87 "
                   "control and rounding mode as they were; denormal data %s under a caller's "
                   "round-toward-zero, FTZ and DAZ",
                   exact ? "bit-exact (canon32)" : "accurate");
}

/* ------------------------------------------------------------------------- */
/* process.signals                                                           */

typedef struct sig_state {
    struct sigaction sa[NSIG];
    sigset_t mask;
} sig_state_t;

static void sig_read(sig_state_t *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 1; i < NSIG; i++)
        sigaction(i, NULL, &s->sa[i]);
    pthread_sigmask(SIG_BLOCK, NULL, &s->mask);
}

static int sig_same(cf_ctx_t *ctx, const sig_state_t *a, const sig_state_t *b, const char *what)
{
    for (int i = 1; i < NSIG; i++) {
        const struct sigaction *x = &a->sa[i], *y = &b->sa[i];
        if (x->sa_handler != y->sa_handler || x->sa_flags != y->sa_flags)
            return cf_fail(ctx,
                           "%s changed the process-wide disposition of signal %d (%s): a "
                           "plugin installs no signal handler",
                           what, i, strsignal(i));
    }
    for (int i = 1; i < NSIG; i++)
        if (sigismember(&a->mask, i) != sigismember(&b->mask, i))
            return cf_fail(ctx, "%s changed the calling thread's signal mask (signal %d, %s)", what,
                           i, strsignal(i));
    return 0;
}

/* The runner's CUDA first (its own handlers and threads are not the
 * plugin's); returns whether device buffers can be made. */
static int runner_cuda_first(void)
{
    char why[256];
    return cfd_available(why, sizeof why);
}

void check_process_signals(cf_ctx_t *ctx)
{
    const int device = runner_cuda_first();
    sig_state_t s0, s1;
    sig_read(&s0);
    cf_plugin_t pl;
    if (cf_load_or_skip(ctx, &pl))
        return;
    sig_read(&s1);
    if (sig_same(ctx, &s0, &s1, "loading the plugin (dlopen, its constructors, the entry)"))
        return;
    if (pl.space == CF_SPACE_CUDA && !device) {
        cf_pass_detail(ctx, "loading only: no CUDA device for the calls");
        return;
    }
    cf_setup_t s;
    const int B = 9;
    if (cf_setup_make(ctx, &pl, &s, (cf_topo_t){7, 6, 5, 4, 16}, B))
        return;
    sig_read(&s1);
    if (sig_same(ctx, &s0, &s1, "init"))
        return;
    if (cf_forward(ctx, &pl, s.h, &s.b, B, NULL, NULL) ||
        cf_backward(ctx, &pl, s.h, &s.b, B, 0, NULL, NULL))
        return;
    sig_read(&s1);
    if (sig_same(ctx, &s0, &s1, "forward or backward"))
        return;
    if (cf_expect_status(ctx, pl.api.destroy(s.h), AUXTRUNK_OK, "destroy"))
        return;
    sig_read(&s1);
    if (sig_same(ctx, &s0, &s1, "destroy"))
        return;
    cf_pass_detail(ctx, "dlopen, init, forward, backward, destroy: every signal disposition and "
                        "the signal mask as they were");
}

/* ------------------------------------------------------------------------- */
/* process.threads                                                           */

static int thread_count(void)
{
    cf_usage_t u;
    cf_usage_read(&u, 0);
    return u.threads;
}

void check_process_threads(cf_ctx_t *ctx)
{
    const int device = runner_cuda_first();
    const int base = thread_count();
    cf_plugin_t pl;
    if (cf_load_or_skip(ctx, &pl))
        return;
    if (pl.space == CF_SPACE_CUDA && !device) {
        cf_skip(ctx, "no CUDA device for the calls");
        return;
    }
    cf_setup_t s, s2;
    const int B = 9;
    const cf_topo_t t = {7, 6, 5, 4, 16};
    if (cf_setup_make(ctx, &pl, &s, t, B) || cf_setup_make(ctx, &pl, &s2, t, B) ||
        cf_forward(ctx, &pl, s.h, &s.b, B, NULL, NULL) ||
        cf_backward(ctx, &pl, s.h, &s.b, B, 0, NULL, NULL) ||
        cf_forward(ctx, &pl, s2.h, &s2.b, B, NULL, NULL) || cf_plugin_wait(ctx, &pl, "the calls"))
        return;
    const int live = thread_count();
    cf_stage(ctx, "destroy of both handles");
    if (cf_expect_status(ctx, pl.api.destroy(s.h), AUXTRUNK_OK, "destroy") ||
        cf_expect_status(ctx, pl.api.destroy(s2.h), AUXTRUNK_OK, "destroy"))
        return;
    int n = cf_threads_settle(base);
    if (n != base) {
        cf_fail(ctx,
                "%d thread(s) still running after the last destroy (%d before the plugin was "
                "loaded, %d with two live handles): every thread a plugin starts is joined by "
                "then",
                n - base, base, live);
        return;
    }
    cf_stage(ctx, "dlclose");
    if (dlclose(pl.dl) != 0) {
        cf_fail(ctx, "dlclose failed: %s", dlerror());
        return;
    }
    n = cf_threads_settle(base);
    if (n != base) {
        cf_fail(ctx,
                "%d thread(s) running after the last destroy and dlclose (%d before the "
                "plugin was loaded)",
                n - base, base);
        return;
    }
    cf_pass_detail(ctx,
                   "%d thread(s) before loading, %d with two live handles, %d after the last "
                   "destroy and dlclose",
                   base, live, n);
}

/* ------------------------------------------------------------------------- */
/* process.mmap                                                              */

void check_process_mmap(cf_ctx_t *ctx)
{
    const cf_plugin_t *pl = &ctx->pl;
    const auxtrunk_api_t *a = &pl->api;
    if (!cf_alloc_supported()) {
        cf_skip(ctx, "this runner cannot see memory mappings (not glibc, or a sanitizer build)");
        return;
    }
    if (pl->space == CF_SPACE_CUDA) {
        cf_skip(ctx, "CUDA plugins: the CUDA runtime maps host memory itself (pinned staging, "
                     "unified addressing)");
        return;
    }
    const cf_topo_t t = {64, 48, 40, 16, 600};
    const int B = 600;
    cf_inputs_t in;
    cf_bufs_t b;
    if (cf_inputs_make(&in, &ctx->rng, t, B) || cf_bufs_make(&b, pl->space, &in, 0)) {
        cf_fail(ctx, "runner: out of host memory");
        return;
    }
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    auxtrunk_handle_t *h = NULL;
    auxtrunk_memory_t mem = {sizeof mem, 0, 0, 0};
    static const char *const names[6] = {"init",     "forward",      "infer",
                                         "backward", "memory_usage", "destroy"};
    for (int c = 0; c < 6; c++) {
        cf_stage(ctx, "%s, counting memory mappings", names[c]);
        cf_map_count_begin();
        int32_t rc = c == 0   ? a->init(&cfg, &h)
                     : c == 1 ? a->forward(h, &b.params, b.x.p, B, b.out.p, 0, NULL)
                     : c == 2 ? a->infer(h, &b.params, b.x.p, B, b.out.p, 0, NULL)
                     : c == 3 ? a->backward(h, &b.params, b.x.p, b.dout.p, B, &b.grads, 0, NULL)
                     : c == 4 ? a->memory_usage(h, &mem)
                              : a->destroy(h);
        long maps = cf_map_count_end();
        if (cf_expect_status(ctx, rc, AUXTRUNK_OK, names[c]))
            return;
        if (maps > 0) {
            cf_fail(ctx,
                    "%s called mmap/munmap/mremap itself (%ld time%s): host memory comes from "
                    "the malloc family, which the host's accounting sees",
                    names[c], maps, maps == 1 ? "" : "s");
            return;
        }
    }
    cf_pass_detail(ctx, "init (max_batch 600), forward, infer, backward, memory_usage, destroy: "
                        "no mapping of the plugin's own");
}

/* ------------------------------------------------------------------------- */
/* process.stack                                                             */

/* The small stack: the budget, a margin for the thread's start, its static
 * TLS and the runner's frames, and a PROT_NONE reserve below, so that any
 * access past it faults instead of landing in another mapping. */
#define STACK_MARGIN (64u << 10)
#define STACK_RESERVE (16u << 20)
#define STACK_PAINT 0xA5

typedef struct stack_job {
    cf_ctx_t *ctx;
    const cf_plugin_t *pl;
    cf_bufs_t *b;
    int batch;
    cf_topo_t t;
    unsigned char *lo; /* lowest usable byte of the stack */
    size_t worst;
    const char *worst_call;
} stack_job_t;

/* Paints the stack from lo up to a little below this function's own frame
 * (memset's frame lies below it, inside that gap). */
__attribute__((noinline)) static void stack_paint(unsigned char *lo)
{
    uintptr_t top = (uintptr_t)__builtin_frame_address(0) - 512;
    memset(lo, STACK_PAINT, (size_t)(top - (uintptr_t)lo));
}

static size_t stack_deepest(const unsigned char *lo, const unsigned char *base)
{
    const unsigned char *p = lo;
    while (p < base && *p == STACK_PAINT)
        p++;
    return (size_t)(base - p);
}

static void *stack_thread(void *arg)
{
    stack_job_t *j = arg;
    const auxtrunk_api_t *a = &j->pl->api;
    volatile unsigned char here = 0;
    unsigned char *base = (unsigned char *)&here;
    cf_bufs_t *b = j->b;
    const int B = j->batch;
    auxtrunk_config_t cfg = cf_config(j->t.enc, j->t.h1, j->t.h2, j->t.aux, j->t.max_batch);
    auxtrunk_handle_t *h = NULL;
    auxtrunk_memory_t mem = {sizeof mem, 0, 0, 0};
    static const char *const names[7] = {
        "init", "forward", "infer", "backward", "backward(ACCUMULATE)", "memory_usage", "destroy"};
    for (int c = 0; c < 7; c++) {
        stack_paint(j->lo);
        cf_stage(j->ctx, "%s(B=%d) on a thread with a %u KiB stack (budget %u KiB)", names[c], B,
                 (unsigned)(AUXTRUNK_MAX_STACK_BYTES + STACK_MARGIN) >> 10,
                 (unsigned)AUXTRUNK_MAX_STACK_BYTES >> 10);
        int32_t rc = c == 0   ? a->init(&cfg, &h)
                     : c == 1 ? a->forward(h, &b->params, b->x.p, B, b->out.p, 0, NULL)
                     : c == 2 ? a->infer(h, &b->params, b->x.p, B, b->out.p, 0, NULL)
                     : c == 3 ? a->backward(h, &b->params, b->x.p, b->dout.p, B, &b->grads, 0, NULL)
                     : c == 4 ? a->backward(h, &b->params, b->x.p, b->dout.p, B, &b->grads,
                                            AUXTRUNK_BACKWARD_ACCUMULATE, NULL)
                     : c == 5 ? a->memory_usage(h, &mem)
                              : a->destroy(h);
        size_t used = stack_deepest(j->lo, base);
        if (used > j->worst) {
            j->worst = used;
            j->worst_call = names[c];
        }
        if (cf_expect_status(j->ctx, rc, AUXTRUNK_OK, names[c]))
            return NULL;
        if (c > 0 && c < 5 && cf_plugin_wait(j->ctx, j->pl, names[c]))
            return NULL;
    }
    return NULL;
}

void check_process_stack(cf_ctx_t *ctx)
{
    if (cf_heap_sanitized()) {
        cf_skip(ctx, "a sanitizer build: its redzones enlarge every frame (the regular build "
                     "checks the budget)");
        return;
    }
    const cf_plugin_t *pl = &ctx->pl;
    const cf_topo_t t = {256, 256, 256, 128, 512}; /* production widths */
    const int B = 512;
    cf_inputs_t in;
    cf_bufs_t b;
    if (cf_inputs_make(&in, &ctx->rng, t, B) || cf_bufs_make(&b, pl->space, &in, 0)) {
        cf_fail(ctx, "runner: cannot allocate buffers");
        return;
    }
    /* One round on the main thread first: one-time setup (a CUDA runtime
     * loading its modules on first use) is not a call's stack. */
    auxtrunk_config_t cfg = cf_config(t.enc, t.h1, t.h2, t.aux, t.max_batch);
    auxtrunk_handle_t *warm = cf_init(ctx, pl, &cfg);
    if (!warm || cf_forward(ctx, pl, warm, &b, B, NULL, NULL) ||
        cf_backward(ctx, pl, warm, &b, B, 0, NULL, NULL) ||
        cf_expect_status(ctx, pl->api.destroy(warm), AUXTRUNK_OK, "destroy"))
        return;
    const size_t size = AUXTRUNK_MAX_STACK_BYTES + STACK_MARGIN;
    unsigned char *map = mmap(NULL, STACK_RESERVE + size, PROT_NONE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED || mprotect(map + STACK_RESERVE, size, PROT_READ | PROT_WRITE) != 0) {
        cf_fail(ctx, "runner: cannot map a stack");
        return;
    }
    stack_job_t job = {ctx, pl, &b, B, t, map + STACK_RESERVE, 0, "none"};
    pthread_attr_t attr;
    pthread_t th;
    if (pthread_attr_init(&attr) || pthread_attr_setstack(&attr, job.lo, size) ||
        pthread_create(&th, &attr, stack_thread, &job)) {
        cf_fail(ctx, "runner: cannot start a thread on a small stack");
        return;
    }
    pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    if (cf_done(ctx))
        return;
    if (job.worst > (size_t)AUXTRUNK_MAX_STACK_BYTES) {
        cf_fail(ctx,
                "%s(B=%d, production widths) used %zu KiB of its thread's stack, above "
                "AUXTRUNK_MAX_STACK_BYTES (%u KiB)",
                job.worst_call, B, job.worst >> 10, (unsigned)AUXTRUNK_MAX_STACK_BYTES >> 10);
        return;
    }
    munmap(map, STACK_RESERVE + size);
    cf_pass_detail(ctx,
                   "every entry at production widths, B=%d, on a %zu KiB stack: at most %zu "
                   "bytes used (%s; budget %u KiB)",
                   B, size >> 10, job.worst, job.worst_call,
                   (unsigned)AUXTRUNK_MAX_STACK_BYTES >> 10);
}
