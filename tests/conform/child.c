/*
 * child.c — the child side of one check: verdicts and notes sent to the
 * parent, loading and negotiating the plugin, status and capability names,
 * process measurements.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conform.h"
#include "device.h"

#define AUXTRUNK_LOADER_IMPLEMENTATION
#include "auxtrunk_loader.h"

/* ------------------------------------------------------------------------- */
/* Verdicts and messages to the parent                                       */

static pthread_mutex_t cf_msg_mu = PTHREAD_MUTEX_INITIALIZER;

/* One protocol line; newlines inside text become spaces. */
static void send_line(const cf_ctx_t *ctx, const char *tag, const char *text)
{
    char line[1400];
    int n = snprintf(line, sizeof line, "%s %s", tag, text);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n++] = '\n';
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(ctx->fd, line + off, (size_t)(n - off));
        if (w <= 0)
            return;
        off += w;
    }
}

static void set_verdict(cf_ctx_t *ctx, int verdict, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&cf_msg_mu);
    if (ctx->verdict == CF_PASS) {
        ctx->verdict = verdict;
        vsnprintf(ctx->reason, sizeof ctx->reason, fmt, ap);
    }
    pthread_mutex_unlock(&cf_msg_mu);
}

int cf_fail(cf_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_verdict(ctx, CF_FAIL, fmt, ap);
    va_end(ap);
    return -1;
}

int cf_skip(cf_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_verdict(ctx, CF_SKIP, fmt, ap);
    va_end(ap);
    return -1;
}

void cf_pass_detail(cf_ctx_t *ctx, const char *fmt, ...)
{
    pthread_mutex_lock(&cf_msg_mu);
    if (ctx->verdict == CF_PASS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->reason, sizeof ctx->reason, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&cf_msg_mu);
}

int cf_done(const cf_ctx_t *ctx) { return ctx->verdict != CF_PASS; }

void cf_note(cf_ctx_t *ctx, const char *fmt, ...)
{
    char text[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&cf_msg_mu);
    send_line(ctx, "N", text);
    pthread_mutex_unlock(&cf_msg_mu);
}

void cf_stage(cf_ctx_t *ctx, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&cf_msg_mu);
    send_line(ctx, "@", text);
    pthread_mutex_unlock(&cf_msg_mu);
}

/* A check's own seed: the run's seed mixed with its name (FNV-1a), so that
 * --only runs a check on exactly the inputs it had in the full run. */
static uint64_t check_seed(uint64_t seed, const char *name)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    return seed ^ h;
}

void cf_child_run(const cf_check_t *c, const cf_options_t *opt, int fd)
{
    static cf_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.opt = opt;
    ctx.check = c;
    ctx.fd = fd;
    ctx.verdict = CF_PASS;
    ctx.seed = check_seed(opt->seed, c->name);
    tst_rng_seed(&ctx.rng, ctx.seed);
    signal(SIGPIPE, SIG_IGN);

    if (c->needs & CF_LOADED) {
        char why[512];
        cf_stage(&ctx, "loading the plugin");
        if (cf_plugin_load(&ctx.pl, opt->plugin, why, sizeof why) != 0) {
            if (c->needs & CF_LOAD_VERDICT)
                cf_fail(&ctx, "cannot load the plugin: %s", why);
            else
                cf_skip(&ctx, "plugin not loadable (load.table fails for it): %s", why);
            goto out;
        }
    }
    if ((c->needs & CF_CUDA_ONLY) == CF_CUDA_ONLY && ctx.pl.space != CF_SPACE_CUDA) {
        cf_skip(&ctx, "host-memory plugin (caps MEM_HOST): CUDA checks do not apply");
        goto out;
    }
    if ((c->needs & CF_MEMORY) == CF_MEMORY && ctx.pl.space == CF_SPACE_CUDA) {
        char why[512];
        cf_stage(&ctx, "initialising CUDA");
        if (!cfd_available(why, sizeof why)) {
            cf_skip(&ctx, "%s", why);
            goto out;
        }
    }
    cf_stage(&ctx, "the check's first calls");
    c->run(&ctx);
out:;
    char text[1200];
    snprintf(text, sizeof text, "%c %s",
             ctx.verdict == CF_PASS   ? 'P'
             : ctx.verdict == CF_SKIP ? 'S'
                                      : 'F',
             ctx.reason);
    pthread_mutex_lock(&cf_msg_mu);
    send_line(&ctx, "R", text);
    pthread_mutex_unlock(&cf_msg_mu);
}

/* ------------------------------------------------------------------------- */
/* Status and capability names                                               */

const char *cf_status_name(int32_t s)
{
    static _Thread_local char buf[64];
    const char *name = auxtrunk_status_name(s);
    if (strcmp(name, "AUXTRUNK_(unknown)") != 0)
        return name;
    snprintf(buf, sizeof buf, "unknown status %d", (int)s);
    return buf;
}

const char *cf_caps_text(uint64_t caps, char *buf, size_t n)
{
    static const struct {
        uint64_t bit;
        const char *name;
    } names[] = {
        {AUXTRUNK_CAP_MEM_HOST, "MEM_HOST"},           {AUXTRUNK_CAP_MEM_CUDA, "MEM_CUDA"},
        {AUXTRUNK_CAP_DETERMINISTIC, "DETERMINISTIC"}, {AUXTRUNK_CAP_EXACT, "EXACT"},
        {AUXTRUNK_CAP_GRAPH_CAPTURE, "GRAPH_CAPTURE"}, {AUXTRUNK_CAP_FAST_MODE, "FAST_MODE"}};
    size_t len = 0;
    buf[0] = '\0';
    uint64_t rest = caps;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (caps & names[i].bit) {
            len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", len ? "|" : "",
                                    names[i].name);
            rest &= ~names[i].bit;
        }
    if (rest && len < n)
        snprintf(buf + len, n - len, "%s0x%llx", len ? "|" : "", (unsigned long long)rest);
    else if (!caps)
        snprintf(buf, n, "none");
    return buf;
}

/* ------------------------------------------------------------------------- */
/* Loading                                                                   */

/* The loader's checks (auxtrunk_loader.h: permissions, ELF, dlopen, entry),
 * with path always a file, never a name for the search path. */
static int open_file(auxtrunk_plugin_t *so, const char *path, char *why, size_t why_len)
{
    char file[AUXTRUNK_LOAD_PATH_MAX];
    snprintf(file, sizeof file, "%s%s", strchr(path, '/') ? "" : "./", path);
    return auxtrunk_plugin_open(so, file, NULL, why, why_len) == AUXTRUNK_LOAD_OK ? 0 : -1;
}

int cf_plugin_open(cf_plugin_t *pl, const char *path, char *why, size_t why_len)
{
    memset(pl, 0, sizeof *pl);
    pl->path = path;
    auxtrunk_plugin_t so;
    if (open_file(&so, path, why, why_len) != 0)
        return -1;
    pl->dl = so.lib;
    pl->entry = so.entry;
    return 0;
}

int cf_plugin_load(cf_plugin_t *pl, const char *path, char *why, size_t why_len)
{
    memset(pl, 0, sizeof *pl);
    pl->path = path;
    auxtrunk_plugin_t so;
    if (open_file(&so, path, why, why_len) != 0)
        return -1;
    /* The loader's table checks, for host range [1.0, 1.0]. */
    if (auxtrunk_plugin_negotiate(&so, AUXTRUNK_VERSION(1, 0), AUXTRUNK_VERSION(1, 0), why,
                                  why_len) != AUXTRUNK_LOAD_OK) {
        auxtrunk_plugin_unload(&so);
        return -1;
    }
    pl->dl = so.lib;
    pl->entry = so.entry;
    pl->api = so.api;
    pl->space = so.space == AUXTRUNK_CAP_MEM_CUDA ? CF_SPACE_CUDA : CF_SPACE_HOST;
    return 0;
}

int cf_load_or_skip(cf_ctx_t *ctx, cf_plugin_t *pl)
{
    char why[512];
    cf_stage(ctx, "loading the plugin");
    if (cf_plugin_load(pl, ctx->opt->plugin, why, sizeof why) != 0)
        return cf_skip(ctx, "plugin not loadable (load.table fails for it): %s", why);
    return 0;
}

int cf_load_reference(cf_ctx_t *ctx)
{
    if (!ctx->opt->reference)
        return cf_skip(ctx, "no --reference plugin given");
    char why[512];
    cf_stage(ctx, "loading the reference plugin");
    if (cf_plugin_load(&ctx->ref, ctx->opt->reference, why, sizeof why) != 0)
        return cf_fail(ctx, "cannot load the reference plugin %s: %s", ctx->opt->reference, why);
    if (ctx->ref.space == CF_SPACE_CUDA) {
        char w2[256];
        if (!cfd_available(w2, sizeof w2))
            return cf_skip(ctx, "reference is a CUDA plugin: %s", w2);
    }
    return 0;
}

auxtrunk_config_t cf_config(int32_t enc, int32_t h1, int32_t h2, int32_t aux, int32_t max_batch)
{
    auxtrunk_config_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.flags = 0;
    c.enc = enc;
    c.h1 = h1;
    c.h2 = h2;
    c.aux = aux;
    c.max_batch = max_batch;
    c.device = -1;
    return c;
}

auxtrunk_handle_t *cf_init(cf_ctx_t *ctx, const cf_plugin_t *pl, const auxtrunk_config_t *cfg)
{
    auxtrunk_handle_t *h = NULL;
    cf_stage(ctx, "init(%dx%dx%dx%d, max_batch %d)", cfg->enc, cfg->h1, cfg->h2, cfg->aux,
             cfg->max_batch);
    int32_t rc = pl->api.init(cfg, &h);
    if (rc != AUXTRUNK_OK) {
        cf_fail(ctx, "init(ENC=%d H1=%d H2=%d AUX=%d max_batch=%d) returned %s", cfg->enc, cfg->h1,
                cfg->h2, cfg->aux, cfg->max_batch, cf_status_name(rc));
        return NULL;
    }
    if (!h) {
        cf_fail(ctx, "init returned AUXTRUNK_OK and a NULL handle");
        return NULL;
    }
    return h;
}

int cf_plugin_wait(cf_ctx_t *ctx, const cf_plugin_t *pl, const char *after)
{
    if (pl->space != CF_SPACE_CUDA)
        return 0;
    if (cfd_sync() != 0)
        return cf_fail(ctx, "CUDA error after %s: %s", after, cfd_error());
    if (cfd_take_error() != 0)
        return cf_fail(ctx, "sticky CUDA error after %s: %s", after, cfd_error());
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Process measurements                                                      */

static long long status_field(const char *key)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return -1;
    char line[256];
    long long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtoll(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

void cf_usage_read(cf_usage_t *u, int cuda)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    u->heap = (long long)(mi.uordblks + mi.hblkhd);
#else
    u->heap = -1;
#endif
    u->rss_kb = status_field("VmRSS");
    u->threads = (int)status_field("Threads");
    u->fds = count_fds();
    u->device = -1;
    if (cuda) {
        long long used = -1;
        if (cfd_sync() == 0 && cfd_mem_used(&used) == 0)
            u->device = used;
    }
}

int cf_threads_settle(int base)
{
    int n = (int)status_field("Threads");
    for (int i = 0; i < 100 && n > base; i++) {
        const struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        n = (int)status_field("Threads");
    }
    return n;
}
