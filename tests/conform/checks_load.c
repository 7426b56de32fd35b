/*
 * checks_load.c — groups 1 and 2: load hygiene and ABI negotiation.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "auxtrunk_canon.h"
#include "checks.h"
#include "device.h"
#include "elf_dynsym.h"

#define V(maj, min) AUXTRUNK_VERSION(maj, min)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------- */
/* load.dlopen                                                               */

void check_load_dlopen(cf_ctx_t *ctx)
{
    enum { CYCLES = 10 };
    for (int i = 0; i < CYCLES; i++) {
        cf_plugin_t pl;
        char why[512];
        cf_stage(ctx, "dlopen/dlclose cycle %d", i + 1);
        if (cf_plugin_open(&pl, ctx->opt->plugin, why, sizeof why) != 0) {
            cf_fail(ctx, "%s", why);
            return;
        }
        if (dlclose(pl.dl) != 0) {
            cf_fail(ctx, "dlclose failed: %s", dlerror());
            return;
        }
    }
    cf_pass_detail(ctx, "RTLD_NOW | RTLD_LOCAL; %d open/close cycles", CYCLES);
}

/* ------------------------------------------------------------------------- */
/* load.symbols                                                              */

void check_load_symbols(cf_ctx_t *ctx)
{
    cf_elf_sym_t *syms = NULL;
    size_t n = 0;
    char why[512];
    if (cf_elf_exports(ctx->opt->plugin, &syms, &n, why, sizeof why) != 0) {
        cf_fail(ctx, "cannot read the dynamic symbol table: %s", why);
        return;
    }
    int have_entry = 0;
    char extra[600] = "";
    size_t n_extra = 0, len = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(syms[i].name, AUXTRUNK_ENTRY_SYMBOL) == 0) {
            have_entry = 1;
            if (!cf_elf_is_function(syms[i].type)) {
                cf_fail(ctx, "%s is exported as a %s, not a function", AUXTRUNK_ENTRY_SYMBOL,
                        cf_elf_type_name(syms[i].type));
                return;
            }
            continue;
        }
        if (n_extra++ < 8 && len < sizeof extra)
            len += (size_t)snprintf(extra + len, sizeof extra - len, "%s%s (%s)", len ? ", " : "",
                                    syms[i].name, cf_elf_type_name(syms[i].type));
    }
    if (!have_entry)
        cf_fail(ctx, "%s is not exported", AUXTRUNK_ENTRY_SYMBOL);
    else if (n_extra)
        cf_fail(ctx, "%zu symbol(s) exported besides %s: %s%s", n_extra, AUXTRUNK_ENTRY_SYMBOL,
                extra, n_extra > 8 ? ", ..." : "");
    else
        cf_pass_detail(ctx, "exactly one: %s", AUXTRUNK_ENTRY_SYMBOL);
    free(syms);
}

/* ------------------------------------------------------------------------- */
/* load.table                                                                */

const char *cf_api_diff(const auxtrunk_api_t *a, const auxtrunk_api_t *b)
{
#define CF_API_FIELD_(f)                        \
    if (memcmp(&a->f, &b->f, sizeof a->f) != 0) \
        return #f;
    CF_API_FIELD_(struct_size)
    CF_API_FIELD_(abi_version)
    CF_API_FIELD_(caps)
    CF_API_FIELD_(impl_name)
    CF_API_FIELD_(kernel_version)
    CF_API_FIELD_(status_string)
    CF_API_FIELD_(init)
    CF_API_FIELD_(destroy)
    CF_API_FIELD_(forward)
    CF_API_FIELD_(infer)
    CF_API_FIELD_(backward)
    CF_API_FIELD_(memory_usage)
    CF_API_FIELD_(last_error)
#undef CF_API_FIELD_
    return NULL;
}

static int printable(const char *s, size_t max)
{
    size_t i = 0;
    for (; i < max && s[i]; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7F)
            return 0;
    return i > 0 && i < max;
}

void check_load_table(cf_ctx_t *ctx)
{
    const auxtrunk_api_t *a = &ctx->pl.api;
    if (!printable(a->impl_name, 256)) {
        cf_fail(ctx, "impl_name is empty, too long or not printable");
        return;
    }
    if (!printable(a->kernel_version, 256)) {
        cf_fail(ctx, "kernel_version is empty, too long or not printable");
        return;
    }
    if (a->caps & AUXTRUNK_CAP_EXACT) {
        char canon[32];
        snprintf(canon, sizeof canon, "canon %d", AUXTRUNK_CANON_VERSION);
        if (!strstr(a->kernel_version, canon)) {
            cf_fail(ctx,
                    "claims EXACT but kernel_version \"%s\" does not name \"%s\" "
                    "(auxtrunk_canon.h: it appears in every exact plugin's kernel_version)",
                    a->kernel_version, canon);
            return;
        }
    }
    uint64_t known = AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_MEM_CUDA | AUXTRUNK_CAP_DETERMINISTIC |
                     AUXTRUNK_CAP_EXACT | AUXTRUNK_CAP_GRAPH_CAPTURE | AUXTRUNK_CAP_FAST_MODE;
    if (a->caps & ~known)
        cf_note(ctx, "caps has bits unknown to ABI 1.0: 0x%llx (ignored)",
                (unsigned long long)(a->caps & ~known));
    /* The same table every time, from one call to the next, and the same
     * texts behind its names. */
    char impl[256], kernel[256];
    snprintf(impl, sizeof impl, "%s", a->impl_name);
    snprintf(kernel, sizeof kernel, "%s", a->kernel_version);
    for (int i = 0; i < 3; i++) {
        auxtrunk_host_info_t host = {sizeof host, V(1, 0), V(1, 0), 0};
        auxtrunk_api_t again;
        memset(&again, 0xCD, sizeof again);
        again.struct_size = sizeof again;
        int32_t rc = ctx->pl.entry(&host, &again);
        if (rc != AUXTRUNK_OK) {
            cf_fail(ctx, "a repeated entry call returned %s", cf_status_name(rc));
            return;
        }
        const char *field = cf_api_diff(&again, a);
        if (field) {
            cf_fail(ctx, "a repeated entry call filled a different table: api.%s differs", field);
            return;
        }
        a->status_string(AUXTRUNK_E_BATCH);
        if (strcmp(a->impl_name, impl) != 0 || strcmp(a->kernel_version, kernel) != 0) {
            int k = strcmp(a->impl_name, impl) != 0;
            cf_fail(ctx,
                    "%s changed from \"%s\" to \"%s\" after another entry call: the names "
                    "are static and immutable",
                    k ? "impl_name" : "kernel_version", k ? impl : kernel,
                    k ? a->impl_name : a->kernel_version);
            return;
        }
    }
    char caps[200];
    cf_pass_detail(ctx, "%s, \"%s\", caps %s", a->impl_name, a->kernel_version,
                   cf_caps_text(a->caps, caps, sizeof caps));
}

/* ------------------------------------------------------------------------- */
/* load.init_fast                                                            */

typedef struct init_job {
    const auxtrunk_api_t *api;
    auxtrunk_config_t cfg;
    auxtrunk_handle_t *h;
    int32_t rc;
    double seconds;
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} init_job_t;

static void *init_thread(void *arg)
{
    init_job_t *j = arg;
    double t0 = now_s();
    int32_t rc = j->api->init(&j->cfg, &j->h);
    double dt = now_s() - t0;
    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    j->seconds = dt;
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

void check_load_init_fast(cf_ctx_t *ctx)
{
    /* Host plugins: 1 s. CUDA plugins: 5 s, with the CUDA context already
     * created by the runner (so the limit is for the plugin's own work). */
    const double limit = ctx->pl.space == CF_SPACE_CUDA ? 5.0 : 1.0;
    static init_job_t job; /* static: a hung init thread may outlive this frame */
    job.api = &ctx->pl.api;
    job.cfg = cf_config(256, 256, 256, 128, 4096); /* the production topology */
    pthread_mutex_init(&job.mu, NULL);
    pthread_cond_init(&job.cv, NULL);
    cf_stage(ctx, "init of the production topology (256x256x256x128, max_batch 4096)");
    pthread_t t;
    if (pthread_create(&t, NULL, init_thread, &job) != 0) {
        cf_fail(ctx, "runner: cannot start a thread");
        return;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(2 * limit);
    pthread_mutex_lock(&job.mu);
    while (!job.done)
        if (pthread_cond_timedwait(&job.cv, &job.mu, &until) != 0)
            break;
    int done = job.done;
    pthread_mutex_unlock(&job.mu);
    if (!done) {
        cf_fail(ctx, "init did not return within %g s (limit %g s)", 2 * limit, limit);
        return; /* the process ends with the thread still inside init */
    }
    pthread_join(t, NULL);
    if (job.rc != AUXTRUNK_OK) {
        cf_fail(ctx, "init of the production topology returned %s", cf_status_name(job.rc));
        return;
    }
    double t0 = now_s();
    cf_stage(ctx, "destroy");
    int32_t rc = ctx->pl.api.destroy(job.h);
    double td = now_s() - t0;
    if (rc != AUXTRUNK_OK)
        cf_fail(ctx, "destroy returned %s", cf_status_name(rc));
    else if (job.seconds > limit)
        cf_fail(ctx, "init took %.3f s, limit %g s", job.seconds, limit);
    else if (td > limit)
        cf_fail(ctx, "destroy took %.3f s, limit %g s", td, limit);
    else
        cf_pass_detail(ctx, "init %.1f ms, destroy %.1f ms", 1e3 * job.seconds, 1e3 * td);
}

/* ------------------------------------------------------------------------- */
/* load.status_string                                                        */

static int status_text_ok(cf_ctx_t *ctx, int32_t v)
{
    const char *s = ctx->pl.api.status_string(v), *want = auxtrunk_status_message(v);
    if (s && strcmp(s, want) == 0)
        return 1;
    cf_fail(ctx, "status_string(%d) (%s) is \"%s\", expected \"%s\"", (int)v,
            auxtrunk_status_name(v), s ? s : "(NULL)", want);
    return 0;
}

void check_load_status_string(cf_ctx_t *ctx)
{
    /* Every status of the map and unknown values around it, then far ones. */
    for (int32_t v = -40; v <= 8; v++)
        if (!status_text_ok(ctx, v))
            return;
    const int32_t far[] = {100, -100, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof far / sizeof far[0]; i++)
        if (!status_text_ok(ctx, far[i]))
            return;
    /* Static and immutable: each status keeps its pointer, and no later call
     * (of status_string or another entry) changes a text handed out. */
    const auxtrunk_api_t *a = &ctx->pl.api;
    enum { N = 24 };
    int32_t st[N];
    const char *ptr[N];
    char copy[N][128];
    int n = 0;
    for (int32_t v = 2; v >= -18 && n < N; v--)
        st[n++] = v;
    for (int i = 0; i < n; i++) {
        ptr[i] = a->status_string(st[i]);
        snprintf(copy[i], sizeof copy[i], "%s", ptr[i]);
        for (int k = 0; k <= i; k++)
            if (strcmp(ptr[k], copy[k]) != 0) {
                cf_fail(ctx,
                        "the text status_string(%d) returned changed to \"%s\" after "
                        "status_string(%d) was called: status strings are static and immutable",
                        (int)st[k], ptr[k], (int)st[i]);
                return;
            }
    }
    auxtrunk_config_t bad = cf_config(0, 1, 1, 1, 1);
    auxtrunk_handle_t *h = NULL;
    a->init(&bad, &h);
    for (int i = n - 1; i >= 0; i--) {
        const char *again = a->status_string(st[i]);
        if (again != ptr[i]) {
            cf_fail(ctx, "status_string(%d) returned another pointer on a later call (%p, then %p)",
                    (int)st[i], (const void *)ptr[i], (const void *)again);
            return;
        }
        for (int k = 0; k < n; k++)
            if (strcmp(ptr[k], copy[k]) != 0) {
                cf_fail(ctx,
                        "the text status_string(%d) returned changed to \"%s\" after later "
                        "calls: status strings are static and immutable",
                        (int)st[k], ptr[k]);
                return;
            }
    }
    cf_pass_detail(ctx, "the header's text for every status, \"unknown status\" otherwise; the "
                        "same pointers and texts on every call");
}

/* ------------------------------------------------------------------------- */
/* load.silent                                                               */

/* What load.silent captured so far, for a crash while capturing: the
 * handler sends it to the parent as the stage, so that the reason names the
 * call and keeps the plugin's own last words ("killed by signal 6 during
 * destroy (it printed: "assertion failed ...")"). */
static int silent_cap = -1, silent_fd = -1;
static char silent_stage_text[256];

static void silent_stage(cf_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void silent_stage(cf_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(silent_stage_text, sizeof silent_stage_text, fmt, ap);
    va_end(ap);
    cf_stage(ctx, "%s", silent_stage_text);
}

static void silent_on_crash(int sig)
{
    (void)sig;
    char out[200];
    ssize_t got = pread(silent_cap, out, sizeof out - 1, 0);
    if (got < 0)
        got = 0;
    for (ssize_t i = 0; i < got; i++)
        if (out[i] == '\n' || out[i] == '\r' || out[i] == '"')
            out[i] = out[i] == '"' ? '\'' : ' ';
    char line[600];
    int n = got > 0 ? snprintf(line, sizeof line, "@ %s (it printed: \"%.*s\")\n",
                               silent_stage_text, (int)got, out)
                    : snprintf(line, sizeof line, "@ %s\n", silent_stage_text);
    if (n > 0 && write(silent_fd, line, (size_t)n) < 0)
        _exit(3);
    /* SA_RESETHAND: returning re-raises the fault (abort raises again). */
}

/* Every entry, succeeding and failing, from dlopen to dlclose. */
static void silent_calls(cf_ctx_t *ctx, cf_plugin_t *pl)
{
    const auxtrunk_api_t *a = &pl->api;
    auxtrunk_host_info_t bad_host = {sizeof bad_host, V(3, 0), V(3, 1), 0};
    auxtrunk_api_t tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.struct_size = sizeof tmp;
    silent_stage(ctx, "the entry with a host range it cannot speak, and with NULL");
    pl->entry(&bad_host, &tmp);
    pl->entry(NULL, &tmp);
    silent_stage(ctx, "status_string(-1)");
    a->status_string(-1);
    auxtrunk_config_t bad = cf_config(0, 1, 1, 1, 1);
    auxtrunk_handle_t *h = NULL;
    silent_stage(ctx, "init with ENC 0");
    a->init(&bad, &h);
    if (pl->space == CF_SPACE_CUDA) {
        char why[256];
        if (!cfd_available(why, sizeof why))
            return; /* the entry, status_string and a failing init only */
    }
    cf_setup_t s;
    silent_stage(ctx, "init(5x4x3x2, max_batch 8)");
    if (cf_setup_make(ctx, pl, &s, (cf_topo_t){5, 4, 3, 2, 8}, 8) != 0)
        return;
    auxtrunk_memory_t mem = {sizeof mem, 0, 0, 0};
    silent_stage(ctx, "backward before any forward");
    a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, 8, &s.b.grads, 0, NULL);
    silent_stage(ctx, "forward with batch 9 > max_batch 8, and with NULL params");
    a->forward(s.h, &s.b.params, s.b.x.p, 9, s.b.out.p, 0, NULL);
    a->forward(s.h, NULL, s.b.x.p, 8, s.b.out.p, 0, NULL);
    silent_stage(ctx, "last_error");
    a->last_error(s.h);
    silent_stage(ctx, "forward(B=8)");
    a->forward(s.h, &s.b.params, s.b.x.p, 8, s.b.out.p, 0, NULL);
    silent_stage(ctx, "infer(B=8)");
    a->infer(s.h, &s.b.params, s.b.x.p, 8, s.b.out.p, 0, NULL);
    silent_stage(ctx, "backward(B=8)");
    a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, 8, &s.b.grads, 0, NULL);
    silent_stage(ctx, "backward with a mismatched batch");
    a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, 7, &s.b.grads, 0, NULL);
    silent_stage(ctx, "memory_usage, and with NULL");
    a->memory_usage(s.h, &mem);
    a->memory_usage(s.h, NULL);
    silent_stage(ctx, "last_error(NULL)");
    a->last_error(NULL);
    silent_stage(ctx, "waiting for the plugin's work");
    cf_plugin_wait(ctx, pl, "the calls");
    silent_stage(ctx, "destroy");
    a->destroy(s.h);
    silent_stage(ctx, "destroy(NULL)");
    a->destroy(NULL);
}

/* Capture starts before dlopen, so constructors are heard too. */
void check_load_silent(cf_ctx_t *ctx)
{
    int cap = memfd_create("auxtrunk-conform-output", 0);
    if (cap < 0) {
        cf_fail(ctx, "runner: memfd_create failed");
        return;
    }
    fflush(stdout);
    fflush(stderr);
    int saved1 = dup(1), saved2 = dup(2);
    silent_cap = cap;
    silent_fd = ctx->fd;
    struct sigaction sa, old[5];
    static const int fatal[5] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = silent_on_crash;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 5; i++)
        sigaction(fatal[i], &sa, &old[i]);
    dup2(cap, 1);
    dup2(cap, 2);

    cf_plugin_t pl;
    char why[512];
    silent_stage(ctx, "loading the plugin (dlopen, its constructors, the entry)");
    int loaded = cf_plugin_load(&pl, ctx->opt->plugin, why, sizeof why) == 0;
    if (loaded) {
        silent_calls(ctx, &pl);
        silent_stage(ctx, "dlclose (its destructors)");
        dlclose(pl.dl);
    }

    fflush(stdout);
    fflush(stderr);
    dup2(saved1, 1);
    dup2(saved2, 2);
    close(saved1);
    close(saved2);
    for (int i = 0; i < 5; i++)
        sigaction(fatal[i], &old[i], NULL);
    off_t n = lseek(cap, 0, SEEK_END);
    if (n > 0) {
        char text[121] = "";
        ssize_t got = pread(cap, text, sizeof text - 1, 0);
        text[got > 0 ? got : 0] = '\0';
        cf_fail(ctx,
                "the plugin wrote %lld bytes to stdout/stderr (library code never prints): "
                "\"%s\"",
                (long long)n, text);
    } else if (!loaded) {
        cf_skip(ctx, "plugin not loadable (load.table fails for it): %s", why);
    } else {
        cf_pass_detail(ctx, "nothing printed from dlopen to dlclose");
    }
    close(cap);
}

/* ------------------------------------------------------------------------- */
/* negotiate.host_range                                                      */

/* One entry call; returns its status, with the version in *v, and fails the
 * check if an error left *api touched. */
static int32_t negotiate(cf_ctx_t *ctx, auxtrunk_entry_fn entry, uint32_t lo, uint32_t hi,
                         uint32_t *v)
{
    auxtrunk_host_info_t host = {sizeof host, lo, hi, 0};
    auxtrunk_api_t api, before;
    memset(&api, 0xCD, sizeof api);
    api.struct_size = sizeof api;
    before = api;
    int32_t rc = entry(&host, &api);
    *v = api.abi_version;
    if (rc != AUXTRUNK_OK && memcmp(&api, &before, sizeof api) != 0)
        cf_fail(ctx, "host range [%u.%u, %u.%u]: returned %s but wrote into the api table",
                AUXTRUNK_VERSION_MAJOR_OF(lo), AUXTRUNK_VERSION_MINOR_OF(lo),
                AUXTRUNK_VERSION_MAJOR_OF(hi), AUXTRUNK_VERSION_MINOR_OF(hi), cf_status_name(rc));
    return rc;
}

void check_negotiate_host_range(cf_ctx_t *ctx)
{
    cf_plugin_t pl;
    char why[512];
    if (cf_plugin_open(&pl, ctx->opt->plugin, why, sizeof why) != 0) {
        cf_fail(ctx, "%s", why);
        return;
    }
    /* The plugin's own highest version: what it answers to the widest range
     * of major 1. It must be a 1.x. */
    uint32_t top = 0;
    int32_t rc = negotiate(ctx, pl.entry, V(1, 0), V(1, 0xFFFF), &top);
    if (rc != AUXTRUNK_OK) {
        cf_fail(ctx, "host range [1.0, 1.65535] returned %s", cf_status_name(rc));
        return;
    }
    if (AUXTRUNK_VERSION_MAJOR_OF(top) != 1) {
        cf_fail(ctx, "host range [1.0, 1.65535]: answered %u.%u, outside the host's range",
                AUXTRUNK_VERSION_MAJOR_OF(top), AUXTRUNK_VERSION_MINOR_OF(top));
        return;
    }
    /* The plugin speaks [1.0, top]: each host range gets the highest common
     * version, or E_ABI_VERSION if there is none (minors compared, not only
     * majors) or the range is inverted. */
    const struct {
        uint32_t lo, hi;
        const char *what;
    } cases[] = {
        {V(0, 0), V(0, 9), "below"},
        {V(0, 0), V(0, 0xFFFF), "below"},
        {V(0, 5), V(1, 0), "overlapping from below"},
        {V(1, 0), V(1, 0), "exactly 1.0"},
        {V(0, 1), V(3, 0), "around"},
        {V(1, 0), V(2, 7), "overlapping from above"},
        {V(1, 0), V(1, 1), "1.0 to 1.1"},
        {V(0, 9), V(1, 2), "0.9 to 1.2"},
        {V(1, 1), V(1, 5), "inside major 1, above 1.0"},
        {V(1, 3), V(1, 3), "exactly 1.3"},
        {V(1, 0xFFFF), V(2, 0), "1.65535 to 2.0"},
        {V(2, 0), V(2, 5), "above"},
        {V(7, 0), V(9, 0), "far above"},
        {V(1, 0), V(0, 9), "abi_min > abi_max"},
        {V(2, 0), V(1, 0), "abi_min > abi_max"},
        {V(1, 5), V(1, 1), "abi_min > abi_max inside major 1"},
        {V(1, 1), V(1, 0), "abi_min > abi_max inside major 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t v = 0, lo = cases[i].lo, hi = cases[i].hi;
        rc = negotiate(ctx, pl.entry, lo, hi, &v);
        if (cf_done(ctx))
            return;
        unsigned lmj = AUXTRUNK_VERSION_MAJOR_OF(lo), lmn = AUXTRUNK_VERSION_MINOR_OF(lo);
        unsigned hmj = AUXTRUNK_VERSION_MAJOR_OF(hi), hmn = AUXTRUNK_VERSION_MINOR_OF(hi);
        uint32_t common_lo = lo > V(1, 0) ? lo : V(1, 0), common_hi = hi < top ? hi : top;
        if (lo > hi || common_lo > common_hi) {
            if (rc != AUXTRUNK_E_ABI_VERSION) {
                if (rc == AUXTRUNK_OK)
                    cf_fail(ctx,
                            "host range [%u.%u, %u.%u] (%s): answered %u.%u, expected "
                            "AUXTRUNK_E_ABI_VERSION (the plugin speaks 1.0 to %u.%u)",
                            lmj, lmn, hmj, hmn, cases[i].what, AUXTRUNK_VERSION_MAJOR_OF(v),
                            AUXTRUNK_VERSION_MINOR_OF(v), AUXTRUNK_VERSION_MAJOR_OF(top),
                            AUXTRUNK_VERSION_MINOR_OF(top));
                else
                    cf_fail(ctx,
                            "host range [%u.%u, %u.%u] (%s) returned %s, expected "
                            "AUXTRUNK_E_ABI_VERSION",
                            lmj, lmn, hmj, hmn, cases[i].what, cf_status_name(rc));
                return;
            }
            continue;
        }
        if (rc != AUXTRUNK_OK) {
            cf_fail(ctx, "host range [%u.%u, %u.%u] (%s) returned %s", lmj, lmn, hmj, hmn,
                    cases[i].what, cf_status_name(rc));
            return;
        }
        if (v < lo || v > hi) {
            cf_fail(ctx, "host range [%u.%u, %u.%u] (%s): answered %u.%u, outside the host's range",
                    lmj, lmn, hmj, hmn, cases[i].what, AUXTRUNK_VERSION_MAJOR_OF(v),
                    AUXTRUNK_VERSION_MINOR_OF(v));
            return;
        }
        if (v != common_hi) {
            cf_fail(ctx,
                    "host range [%u.%u, %u.%u] (%s): answered %u.%u, expected the highest "
                    "common version %u.%u",
                    lmj, lmn, hmj, hmn, cases[i].what, AUXTRUNK_VERSION_MAJOR_OF(v),
                    AUXTRUNK_VERSION_MINOR_OF(v), AUXTRUNK_VERSION_MAJOR_OF(common_hi),
                    AUXTRUNK_VERSION_MINOR_OF(common_hi));
            return;
        }
    }
    /* A 1.x plugin above 1.0 must still answer 1.0 to a 1.0-only host. */
    cf_pass_detail(ctx, "plugin speaks up to %u.%u", AUXTRUNK_VERSION_MAJOR_OF(top),
                   AUXTRUNK_VERSION_MINOR_OF(top));
}

/* ------------------------------------------------------------------------- */
/* negotiate.struct_sizes                                                    */

/* A struct of `size` bytes whose first bytes are `known` (sizeof) and whose
 * tail is zero, or has one non-zero byte. */
typedef union big_struct {
    unsigned char bytes[256];
    uint64_t align;
} big_struct_t;

static void big_make(big_struct_t *s, const void *known, size_t known_size, uint32_t size,
                     int dirty_tail)
{
    memset(s, 0, sizeof *s);
    memcpy(s->bytes, known, known_size);
    memcpy(s->bytes, &size, 4); /* struct_size is the first field of every struct */
    if (dirty_tail && size > known_size)
        s->bytes[size - 1] = 0x01;
}

static int entry_sizes(cf_ctx_t *ctx)
{
    auxtrunk_entry_fn entry = ctx->pl.entry;
    const auxtrunk_api_t *good = &ctx->pl.api;
    auxtrunk_host_info_t host = {sizeof host, V(1, 0), V(1, 0), 0};
    big_struct_t hs;
    auxtrunk_api_t api, before;
    /* Host info: too small, larger with a zero tail, larger with a dirty tail. */
    const struct {
        uint32_t size;
        int dirty;
        int32_t want;
    } hcases[] = {{0, 0, AUXTRUNK_E_STRUCT_SIZE},
                  {AUXTRUNK_HOST_INFO_SIZE_1_0 - 4, 0, AUXTRUNK_E_STRUCT_SIZE},
                  {AUXTRUNK_HOST_INFO_SIZE_1_0 + 16, 0, AUXTRUNK_OK},
                  {AUXTRUNK_HOST_INFO_SIZE_1_0 + 16, 1, AUXTRUNK_E_STRUCT_SIZE}};
    for (size_t i = 0; i < sizeof hcases / sizeof hcases[0]; i++) {
        big_make(&hs, &host, sizeof host, hcases[i].size, hcases[i].dirty);
        memset(&api, 0xCD, sizeof api);
        api.struct_size = sizeof api;
        before = api;
        char what[128];
        snprintf(what, sizeof what, "the entry with host_info.struct_size %u%s", hcases[i].size,
                 hcases[i].dirty       ? " and a non-zero tail"
                 : hcases[i].size > 16 ? " (zero tail)"
                                       : "");
        int32_t rc = entry((const auxtrunk_host_info_t *)hs.bytes, &api);
        if (cf_expect_status(ctx, rc, hcases[i].want, what))
            return -1;
        if (rc != AUXTRUNK_OK && memcmp(&api, &before, sizeof api) != 0)
            return cf_fail(ctx, "%s failed but wrote into the api table", what);
        const char *field = rc == AUXTRUNK_OK ? cf_api_diff(&api, good) : NULL;
        if (field)
            return cf_fail(ctx, "%s filled a different table: api.%s differs", what, field);
    }
    /* API table: smaller than 1.0 is refused untouched. */
    const uint32_t small[] = {0, 8, AUXTRUNK_API_SIZE_1_0 - 8};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        memset(&api, 0xCD, sizeof api);
        api.struct_size = small[i];
        before = api;
        char what[96];
        snprintf(what, sizeof what, "the entry with api.struct_size %u", small[i]);
        int32_t rc = entry(&host, &api);
        if (cf_expect_status(ctx, rc, AUXTRUNK_E_STRUCT_SIZE, what))
            return -1;
        if (memcmp(&api, &before, sizeof api) != 0)
            return cf_fail(ctx, "%s failed but wrote into the api table", what);
    }
    /* Host tables of 96 bytes and larger (newer hosts'), each followed by a
     * canary: the plugin writes exactly struct_size bytes, its entries then
     * zeros, and says min(host's size, its own) are valid. Its own size is
     * what it answers to the largest table; a plugin speaking only 1.0 has
     * the 96-byte 1.0 table. */
    uint32_t top = 0;
    {
        auxtrunk_host_info_t wide = {sizeof wide, V(1, 0), V(1, 0xFFFF), 0};
        auxtrunk_api_t t;
        memset(&t, 0, sizeof t);
        t.struct_size = sizeof t;
        if (entry(&wide, &t) == AUXTRUNK_OK)
            top = t.abi_version;
    }
    const uint32_t sizes[] = {200, AUXTRUNK_API_SIZE_1_0, AUXTRUNK_API_SIZE_1_0 + 8, 136};
    uint32_t own = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const uint32_t size = sizes[k];
        big_struct_t big;
        memset(&big, 0xCD, sizeof big);
        memcpy(big.bytes, &size, 4);
        char what[96];
        snprintf(what, sizeof what, "the entry with a %u-byte api table", size);
        int32_t rc = entry(&host, (auxtrunk_api_t *)big.bytes);
        if (cf_expect_status(ctx, rc, AUXTRUNK_OK, what))
            return -1;
        for (size_t i = size; i < sizeof big.bytes; i++)
            if (big.bytes[i] != 0xCD)
                return cf_fail(ctx,
                               "%s wrote past it (byte %zu): a plugin writes exactly the "
                               "host's struct_size bytes",
                               what, i);
        uint32_t valid;
        memcpy(&valid, big.bytes, 4);
        if (valid < AUXTRUNK_API_SIZE_1_0 || valid > size)
            return cf_fail(ctx, "%s set struct_size to %u, outside [%u, %u]", what, valid,
                           AUXTRUNK_API_SIZE_1_0, size);
        if (k == 0) {
            own = valid;
            if (top == V(1, 0) && own != AUXTRUNK_API_SIZE_1_0)
                return cf_fail(ctx,
                               "%s set struct_size to %u: a plugin speaking only ABI 1.0 "
                               "has the %u-byte 1.0 table, so it must be min(%u, %u) = %u",
                               what, valid, AUXTRUNK_API_SIZE_1_0, size, AUXTRUNK_API_SIZE_1_0,
                               AUXTRUNK_API_SIZE_1_0);
        } else {
            uint32_t want = size < own ? size : own;
            if (valid != want)
                return cf_fail(ctx,
                               "%s set struct_size to %u, expected min(host %u, plugin %u) "
                               "= %u",
                               what, valid, size, own, want);
        }
        if (memcmp(big.bytes + 4, (const unsigned char *)good + 4, AUXTRUNK_API_SIZE_1_0 - 4) != 0)
            return cf_fail(ctx, "%s filled different 1.0 entries", what);
        for (uint32_t i = valid; i < size; i++)
            if (big.bytes[i] != 0)
                return cf_fail(ctx,
                               "%s left byte %u (past the valid %u) non-zero: the table must "
                               "be filled with zeros to the host's size",
                               what, i, valid);
    }
    return 0;
}

static int config_sizes(cf_ctx_t *ctx)
{
    const auxtrunk_api_t *a = &ctx->pl.api;
    auxtrunk_config_t cfg = cf_config(5, 4, 3, 2, 8);
    const struct {
        uint32_t size;
        int dirty;
        int32_t want;
    } cases[] = {{0, 0, AUXTRUNK_E_STRUCT_SIZE},
                 {AUXTRUNK_CONFIG_SIZE_1_0 - 4, 0, AUXTRUNK_E_STRUCT_SIZE},
                 {AUXTRUNK_CONFIG_SIZE_1_0 + 32, 0, AUXTRUNK_OK},
                 {AUXTRUNK_CONFIG_SIZE_1_0 + 32, 1, AUXTRUNK_E_STRUCT_SIZE}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        big_struct_t s;
        big_make(&s, &cfg, sizeof cfg, cases[i].size, cases[i].dirty);
        auxtrunk_handle_t *sentinel = (auxtrunk_handle_t *)(uintptr_t)0x5A5A5A50, *h = sentinel;
        char what[128];
        snprintf(what, sizeof what, "init with config.struct_size %u%s", cases[i].size,
                 cases[i].dirty       ? " and a non-zero tail"
                 : cases[i].size > 32 ? " (zero tail)"
                                      : "");
        int32_t rc = a->init((const auxtrunk_config_t *)s.bytes, &h);
        if (cf_expect_status(ctx, rc, cases[i].want, what))
            return -1;
        if (rc != AUXTRUNK_OK && h != sentinel)
            return cf_fail(ctx, "%s failed but changed *out_handle", what);
        if (rc == AUXTRUNK_OK && (rc = a->destroy(h)) != AUXTRUNK_OK)
            return cf_fail(ctx, "destroy after %s returned %s", what, cf_status_name(rc));
    }
    return 0;
}

static int call_sizes(cf_ctx_t *ctx)
{
    const auxtrunk_api_t *a = &ctx->pl.api;
    cf_setup_t s;
    const int B = 6;
    if (cf_setup_make(ctx, &ctx->pl, &s, (cf_topo_t){5, 4, 3, 2, 8}, B))
        return -1;
    if (cf_forward(ctx, &ctx->pl, s.h, &s.b, B, NULL, NULL))
        return -1;
    const struct {
        uint32_t size;
        int dirty;
        int32_t want;
    } cases[] = {{0, 0, AUXTRUNK_E_STRUCT_SIZE},
                 {AUXTRUNK_PARAMS_SIZE_1_0 - 8, 0, AUXTRUNK_E_STRUCT_SIZE},
                 {AUXTRUNK_PARAMS_SIZE_1_0 + 40, 0, AUXTRUNK_OK},
                 {AUXTRUNK_PARAMS_SIZE_1_0 + 40, 1, AUXTRUNK_E_STRUCT_SIZE}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        big_struct_t p, g;
        big_make(&p, &s.b.params, sizeof s.b.params, cases[i].size, cases[i].dirty);
        big_make(&g, &s.b.grads, sizeof s.b.grads, cases[i].size, cases[i].dirty);
        const auxtrunk_params_t *pp = (const auxtrunk_params_t *)p.bytes;
        const auxtrunk_grads_t *gg = (const auxtrunk_grads_t *)g.bytes;
        const char *tail = cases[i].dirty       ? " and a non-zero tail"
                           : cases[i].size > 56 ? " (zero tail)"
                                                : "";
        for (int call = 0; call < 4; call++) {
            char what[128];
            cf_watch_t w;
            if (cases[i].want != AUXTRUNK_OK && cf_watch_begin(ctx, &w, &s.b))
                return -1;
            int32_t rc;
            if (call == 0) {
                snprintf(what, sizeof what, "forward with params.struct_size %u%s", cases[i].size,
                         tail);
                rc = a->forward(s.h, pp, s.b.x.p, B, s.b.out.p, 0, NULL);
            } else if (call == 1) {
                snprintf(what, sizeof what, "infer with params.struct_size %u%s", cases[i].size,
                         tail);
                rc = a->infer(s.h, pp, s.b.x.p, B, s.b.out.p, 0, NULL);
            } else if (call == 2) {
                snprintf(what, sizeof what, "backward with params.struct_size %u%s", cases[i].size,
                         tail);
                rc = a->backward(s.h, pp, s.b.x.p, s.b.dout.p, B, &s.b.grads, 0, NULL);
            } else {
                snprintf(what, sizeof what, "backward with grads.struct_size %u%s", cases[i].size,
                         tail);
                rc = a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, B, gg, 0, NULL);
            }
            if (cf_expect_status(ctx, rc, cases[i].want, what))
                return -1;
            if (cases[i].want != AUXTRUNK_OK &&
                (cf_watch_end(ctx, &w, what) || cf_expect_last_error(ctx, &ctx->pl, s.h, what)))
                return -1;
            if (cases[i].want == AUXTRUNK_OK && cf_plugin_wait(ctx, &ctx->pl, what))
                return -1;
        }
    }
    /* memory_usage: the host's struct, smaller or larger. */
    big_struct_t m;
    auxtrunk_memory_t mem = {sizeof mem, 0, 0, 0};
    big_make(&m, &mem, sizeof mem, AUXTRUNK_MEMORY_SIZE_1_0 - 8, 0);
    int32_t rc = a->memory_usage(s.h, (auxtrunk_memory_t *)m.bytes);
    if (cf_expect_status(ctx, rc, AUXTRUNK_E_STRUCT_SIZE, "memory_usage with struct_size 16"))
        return -1;
    memset(&m, 0xCD, sizeof m);
    const uint32_t msize = AUXTRUNK_MEMORY_SIZE_1_0 + 24;
    memcpy(m.bytes, &msize, 4);
    rc = a->memory_usage(s.h, (auxtrunk_memory_t *)m.bytes);
    if (cf_expect_status(ctx, rc, AUXTRUNK_OK, "memory_usage with struct_size 48"))
        return -1;
    for (size_t i = msize; i < sizeof m.bytes; i++)
        if (m.bytes[i] != 0xCD)
            return cf_fail(ctx, "memory_usage with struct_size %u wrote past it (byte %zu)", msize,
                           i);
    return 0;
}

void check_negotiate_struct_sizes(cf_ctx_t *ctx)
{
    if (entry_sizes(ctx) || config_sizes(ctx) || call_sizes(ctx))
        return;
    cf_pass_detail(ctx, "host_info, api, config, params, grads, memory: smaller, larger zero "
                        "tail, larger dirty tail");
}

/* ------------------------------------------------------------------------- */
/* negotiate.flags                                                           */

void check_negotiate_flags(cf_ctx_t *ctx)
{
    const auxtrunk_api_t *a = &ctx->pl.api;
    /* Host info flags are reserved: any bit is E_FLAGS, table untouched. */
    const uint32_t hflags[] = {1u, 0x80000000u};
    for (size_t i = 0; i < 2; i++) {
        auxtrunk_host_info_t host = {sizeof host, V(1, 0), V(1, 0), hflags[i]};
        auxtrunk_api_t api, before;
        memset(&api, 0xCD, sizeof api);
        api.struct_size = sizeof api;
        before = api;
        char what[64];
        snprintf(what, sizeof what, "the entry with host_info.flags 0x%x", hflags[i]);
        if (cf_expect_status(ctx, ctx->pl.entry(&host, &api), AUXTRUNK_E_FLAGS, what))
            return;
        if (memcmp(&api, &before, sizeof api) != 0) {
            cf_fail(ctx, "%s failed but wrote into the api table", what);
            return;
        }
    }
    /* Config flags: unknown bits; FAST only with CAP_FAST_MODE. */
    uint32_t cflags[3] = {0x80000000u, 1u << 5, AUXTRUNK_CONFIG_FAST};
    for (size_t i = 0; i < 3; i++) {
        int fast_ok = cflags[i] == AUXTRUNK_CONFIG_FAST && (a->caps & AUXTRUNK_CAP_FAST_MODE);
        auxtrunk_config_t cfg = cf_config(5, 4, 3, 2, 8);
        cfg.flags = cflags[i];
        auxtrunk_handle_t *sentinel = (auxtrunk_handle_t *)(uintptr_t)0x5A5A5A50, *h = sentinel;
        char what[96];
        snprintf(what, sizeof what, "init with config.flags 0x%x%s", cflags[i],
                 cflags[i] == AUXTRUNK_CONFIG_FAST ? " (FAST)" : "");
        int32_t rc = a->init(&cfg, &h);
        if (cf_expect_status(ctx, rc, fast_ok ? AUXTRUNK_OK : AUXTRUNK_E_FLAGS, what))
            return;
        if (rc != AUXTRUNK_OK && h != sentinel) {
            cf_fail(ctx, "%s failed but changed *out_handle", what);
            return;
        }
        if (rc == AUXTRUNK_OK)
            a->destroy(h);
    }
    /* Call flags. */
    cf_setup_t s;
    const int B = 5;
    if (cf_setup_make(ctx, &ctx->pl, &s, (cf_topo_t){5, 4, 3, 2, 8}, B))
        return;
    if (cf_forward(ctx, &ctx->pl, s.h, &s.b, B, NULL, NULL) ||
        cf_backward(ctx, &ctx->pl, s.h, &s.b, B, 0, &s.o, NULL))
        return;
    const uint32_t bad[] = {1u, 1u << 7, 0x80000000u};
    for (size_t i = 0; i < 3; i++) {
        for (int call = 0; call < 3; call++) {
            uint32_t f = bad[i];
            if (call == 2 && f == 1u)
                f = 1u << 1; /* bit 0 is ACCUMULATE for backward */
            char what[96];
            snprintf(what, sizeof what, "%s with flags 0x%x",
                     call == 0   ? "forward"
                     : call == 1 ? "infer"
                                 : "backward",
                     f);
            cf_watch_t w;
            if (cf_watch_begin(ctx, &w, &s.b))
                return;
            int32_t rc = call == 0   ? a->forward(s.h, &s.b.params, s.b.x.p, B, s.b.out.p, f, NULL)
                         : call == 1 ? a->infer(s.h, &s.b.params, s.b.x.p, B, s.b.out.p, f, NULL)
                                     : a->backward(s.h, &s.b.params, s.b.x.p, s.b.dout.p, B,
                                                   &s.b.grads, f, NULL);
            if (cf_expect_status(ctx, rc, AUXTRUNK_E_FLAGS, what) || cf_watch_end(ctx, &w, what) ||
                cf_expect_last_error(ctx, &ctx->pl, s.h, what))
                return;
        }
    }
}
