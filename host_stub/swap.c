/*
 * swap.c — hot-swapping the trainer's plugin (swap.h): one swap attempt
 * from a file to the switch, probation and rollback, and the order in which
 * the triggers are served between two steps.
 *
 * The parts each live in their own file: the permission checks (trust.c),
 * the private copy and its digest (plugin_copy.c), the allow-list
 * (allowlist.c), the canary (canary.c), the vetting child (vet.c, supervised
 * by supervise.c), and the triggers (swap_watch.c).
 *
 * Only the child ever runs a candidate's code before it has passed; the
 * parent touches a candidate only after the child reported a pass.
 */
#include "swap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allowlist.h"
#include "canary.h"
#include "options.h"
#include "plugin_copy.h"
#include "sha256.h"
#include "swap_watch.h"
#include "vet.h"

#define SHA_HEX ATH_SHA256_HEX

/* Refusal reasons of the swapper itself (the copy's, vetting's and the
 * loader's are theirs). */
#define R_DIGEST "digest"
#define R_ROLLED_BACK "rolled-back-before"
#define R_REFERENCE "reference-failed"
#define R_NOT_CUDA "not-cuda"

struct ath_swap {
    ath_swap_opts_t o;
    auxtrunk_config_t config;
    int device;
    FILE *log;

    ath_privdir_t dir; /* the private copies */
    ath_allow_t allow; /* empty: no allow-list */

    /* Versions: digest of the live one; the previous one while on probation. */
    char live_sha[SHA_HEX];
    char source[ATH_PATH_MAX]; /* the file the live version came from */
    ath_trunk_t prev;
    char prev_sha[SHA_HEX];
    char prev_source[ATH_PATH_MAX];
    uint64_t probation_end; /* prev is unloaded once this step has completed */
    /* Every version rolled back in this run, refused if offered again. */
    struct {
        char sha[SHA_HEX];
        uint64_t step;
    } * bad;
    int n_bad;
    int cuda_used; /* a CUDA context may exist in this process */

    ath_canary_t canary;

    /* Triggers. */
    int next_at;
    ath_watch_t watch;
    int change_seen, hup_seen; /* ath_swap_due took a change or a SIGHUP for the next poll */
    int poll_read;             /* this poll has read SIGHUP and the watch (ath_swap_poll_one) */
    int hup_installed;

    ath_swap_stats_t stats;
};

/* ------------------------------------------------------------------------- */
/* Small helpers                                                             */

/* Messages from the loader name the private copy; the operator knows the
 * file they deployed, so every occurrence of copy is replaced by src. */
static void name_source(char *msg, size_t n, const char *copy, const char *src)
{
    if (!copy[0])
        return;
    char out[sizeof(((ath_err_t *)0)->msg)];
    size_t o = 0, lc = strlen(copy), ls = strlen(src);
    for (const char *p = msg; *p && o + 1 < sizeof out;) {
        if (strncmp(p, copy, lc) == 0 && o + ls + 1 < sizeof out) {
            memcpy(out + o, src, ls);
            o += ls;
            p += lc;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    snprintf(msg, n, "%s", out);
}

/* "cpu-ref [cpu-ref 1.0.0 (canon 1)]" of a loaded trunk. */
static const char *version_of(const ath_trunk_t *t, char *buf, size_t n)
{
    if (!t->plugin.lib)
        snprintf(buf, n, "(none)");
    else
        snprintf(buf, n, "%s [%s]", t->plugin.api.impl_name, t->plugin.api.kernel_version);
    return buf;
}

int ath_swap_parse_at(const char *text, ath_swap_at_t *at, ath_err_t *err)
{
    const char *colon = strchr(text, ':');
    char step[32];
    if (!colon || !colon[1] || colon == text || (size_t)(colon - text) >= sizeof step)
        return ath_errf(err, "--swap-at wants STEP:PATH, got '%s'", text);
    memcpy(step, text, (size_t)(colon - text));
    step[colon - text] = '\0';
    if (ath_parse_u64(step, 0, UINT64_MAX, "--swap-at STEP", &at->step, err) != 0)
        return ath_errf(err, "--swap-at wants STEP:PATH with a decimal STEP, got '%s'", text);
    at->path = colon + 1;
    return 0;
}

/* The private copy of file, checked against the allow-list. */
static int checked_copy(ath_swap_t *s, const char *file, char *copy, size_t n, char sha[SHA_HEX],
                        const char **reason, ath_err_t *err)
{
    if (ath_plugin_copy(&s->dir, file, copy, n, sha, reason, err) != 0)
        return -1;
    if (ath_allow_check(&s->allow, sha, file, s->o.sha256_file, err) != 0) {
        unlink(copy);
        *reason = R_DIGEST;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Create, open, destroy                                                     */

int ath_swap_create(ath_swap_t **out, const ath_swap_opts_t *o, const auxtrunk_config_t *config,
                    int device, ath_err_t *err)
{
    for (int i = 1; i < o->n_at; i++)
        if (o->at[i].step < o->at[i - 1].step)
            return ath_errf(err, "--swap-at entries must be in ascending step order");
    ath_swap_t *s = calloc(1, sizeof *s);
    if (!s)
        return ath_errf(err, "out of host memory");
    s->o = *o;
    s->config = *config;
    s->device = device;
    s->log = o->log ? o->log : stdout;
    ath_watch_init(&s->watch, "");
    if (ath_privdir_create(&s->dir, err) != 0 ||
        (o->sha256_file && ath_allow_read(&s->allow, o->sha256_file, err) != 0) ||
        ath_canary_create(&s->canary, config, err) != 0)
        goto fail;
    ath_hup_install();
    s->hup_installed = 1;
    *out = s;
    return 0;
fail:
    ath_swap_destroy(s);
    return -1;
}

ath_load_status_t ath_swap_open(ath_swap_t *s, const char *dir_or_file, ath_trunk_t *live,
                                ath_err_t *err)
{
    memset(live, 0, sizeof *live);
    char file[ATH_PATH_MAX];
    ath_plugin_file(dir_or_file, file, sizeof file);
    ath_watch_init(&s->watch, file);

    /* The first version goes through all a later one does, vetting in a
     * child included (with no running version to compare with). */
    char sha[SHA_HEX];
    ath_vet_open_opts_t vo = {
        .dir = &s->dir,
        .allow = &s->allow,
        .allow_name = s->o.sha256_file,
        .timeout_s = s->o.vet_timeout_s,
        .exe = s->o.vet_exec_always ? s->o.vet_exe : NULL,
    };
    ath_load_status_t ls = ath_vet_open(live, file, &s->config, s->device, &vo, sha, err);
    if (ls != ATH_LOAD_OK)
        return ls;
    snprintf(live->plugin.path, sizeof live->plugin.path, "%s", file);
    memcpy(s->live_sha, sha, SHA_HEX);
    snprintf(s->source, sizeof s->source, "%s", file);
    if (live->plugin.space == ATH_SPACE_CUDA)
        s->cuda_used = 1;
    if (s->o.watch)
        ath_watch_start(&s->watch, s->o.poll_ms, s->log);
    return ATH_LOAD_OK;
}

void ath_swap_destroy(ath_swap_t *s)
{
    if (!s)
        return;
    ath_trunk_close(&s->prev);
    ath_watch_stop(&s->watch);
    ath_privdir_remove(&s->dir);
    if (s->hup_installed)
        ath_hup_restore();
    ath_allow_free(&s->allow);
    ath_canary_free(&s->canary);
    free(s->bad);
    free(s);
}

ath_swap_stats_t ath_swap_stats(const ath_swap_t *s) { return s->stats; }

/* ------------------------------------------------------------------------- */
/* A swap, probation, rollback                                               */

/* Unloads the previous version; its device work is finished first
 * (ath_trunk_close synchronises through devmem before destroy and dlclose). */
static void release_prev(ath_swap_t *s) { ath_trunk_close(&s->prev); }

/* The switch: cand (loaded from file, digest sha) becomes the live version
 * after `step`. Only one previous version is held: a second swap during
 * probation makes the version it replaces the rollback target. */
static void take(ath_swap_t *s, ath_trunk_t *live, ath_trunk_t *cand, const char *file,
                 const char sha[SHA_HEX], uint64_t step)
{
    release_prev(s);
    s->prev = *live;
    memcpy(s->prev_sha, s->live_sha, SHA_HEX);
    snprintf(s->prev_source, sizeof s->prev_source, "%s", s->source);
    *live = *cand;
    snprintf(live->plugin.path, sizeof live->plugin.path, "%s", file);
    memcpy(s->live_sha, sha, SHA_HEX);
    snprintf(s->source, sizeof s->source, "%s", file);
    s->probation_end = step + (s->o.rollback_steps ? s->o.rollback_steps : ATH_SWAP_ROLLBACK_STEPS);
    s->stats.taken++;
}

/* Loads the vetted (or already vetted elsewhere) copy here and runs the
 * canary on it against the reference in s->canary.ref_*. Returns 0 with
 * *cand open, or -1 with *reason and the message (*cand closed). */
static int load_checked(ath_swap_t *s, const char *copy, const ath_trunk_t *live,
                        const float *params, ath_trunk_t *cand, int *exact, const char **reason,
                        ath_err_t *err)
{
    ath_canary_t *c = &s->canary;
    ath_load_status_t ls = ath_trunk_open(cand, copy, &s->config, s->device, err);
    if (ls != ATH_LOAD_OK) {
        *reason = ath_load_status_name(ls);
        return -1;
    }
    if (cand->plugin.space == ATH_SPACE_CUDA)
        s->cuda_used = 1;
    else if (s->o.cuda_only) {
        *reason = R_NOT_CUDA;
        ath_errf(err, "%s is a host plugin; a data-parallel run swaps only between CUDA plugins",
                 cand->plugin.path);
        ath_trunk_close(cand);
        return -1;
    }
    *exact = ath_canary_is_exact(live) && ath_canary_is_exact(cand);
    if (ath_canary_run(cand, params, c->x, c->dout, c->pb, c->out, c->grads, err) != 0 ||
        ath_canary_compare(&s->config, c->pb, *exact, c->ref_out, c->out, c->ref_grads, c->grads,
                           err) != 0) {
        *reason = ATH_VET_R_CANARY;
        ath_trunk_close(cand);
        return -1;
    }
    return 0;
}

/* Vets copy in a child against the reference the live version computed. */
static int vet_candidate(ath_swap_t *s, const char *copy, const float *params, int ref_exact,
                         ath_vet_version_t *ver, const char **reason, double *child_ms,
                         ath_err_t *err)
{
    ath_canary_t *c = &s->canary;
    ath_vet_req_t rq = {
        .config = s->config,
        .device = s->device,
        .pb = c->pb,
        .ref_exact = ref_exact,
        .has_ref = 1,
        .n_params = c->n_params,
        .params = params,
        .x = c->x,
        .dout = c->dout,
        .ref_out = c->ref_out,
        .ref_grads = c->ref_grads,
        .out = c->out,
        .grads = c->grads,
    };
    snprintf(rq.path, sizeof rq.path, "%s", copy);
    /* A forked child cannot use CUDA once this process has a context: then
     * the child starts afresh by exec (the request travels in a file). */
    const char *exe = s->o.vet_exe && (s->cuda_used || s->o.vet_exec_always) ? s->o.vet_exe : NULL;
    char req_file[ATH_PATH_MAX] = "";
    if (exe && ath_privdir_name(&s->dir, "request.vet", req_file, sizeof req_file) != 0) {
        *reason = ATH_VET_R_VETTING;
        return ath_errf(err, "private directory path too long");
    }
    return ath_vet(&rq, s->o.vet_timeout_s > 0 ? s->o.vet_timeout_s : ATH_VET_TIMEOUT_S, exe,
                   req_file, ver, reason, child_ms, err);
}

ath_swap_outcome_t ath_swap_try(ath_swap_t *s, const char *path, const char *trigger, uint64_t step,
                                const float *params, ath_trunk_t *live, ath_swap_result_t *res)
{
    ath_swap_result_t local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    double t0 = ath_now_s();
    char file[ATH_PATH_MAX], copy[ATH_PATH_MAX] = "", sha[SHA_HEX] = "";
    char running[512], taken_v[512];
    ath_plugin_file(path, file, sizeof file);
    version_of(live, running, sizeof running);
    ath_vet_version_t ver;
    memset(&ver, 0, sizeof ver);
    const char *reason = "";
    ath_err_t err = {{0}};
    ath_trunk_t cand;
    memset(&cand, 0, sizeof cand);
    double child_ms = 0.0;
    ath_canary_t *c = &s->canary;

    if (checked_copy(s, file, copy, sizeof copy, sha, &reason, &err) != 0) {
        copy[0] = '\0';
        goto refused;
    }
    if (strcmp(sha, s->live_sha) == 0) {
        unlink(copy);
        res->outcome = ATH_SWAP_UNCHANGED;
        res->reason = "";
        res->ms = (ath_now_s() - t0) * 1e3;
        ath_mark_cut(res->msg, sizeof res->msg,
                     snprintf(res->msg, sizeof res->msg,
                              "%s is the running version %s (SHA-256 %.16s...)", file, running,
                              sha));
        s->stats.unchanged++;
        ath_logf(s->log, "swap: after step %llu (%s): %s; nothing to do [%.1f ms]",
                 (unsigned long long)step, trigger, res->msg, res->ms);
        return res->outcome;
    }
    for (int i = 0; i < s->n_bad; i++)
        if (strcmp(sha, s->bad[i].sha) == 0) {
            reason = R_ROLLED_BACK;
            ath_errf(&err,
                     "this file (SHA-256 %.16s...) was rolled back after step %llu; deploy "
                     "a fixed version",
                     sha, (unsigned long long)s->bad[i].step);
            goto refused;
        }

    /* The reference: the running version on the probe, current parameters.
     * Its record is overwritten, which is harmless between two steps (the
     * next step starts with a forward). */
    if (ath_canary_run(live, params, c->x, c->dout, c->pb, c->ref_out, c->ref_grads, &err) != 0) {
        reason = R_REFERENCE;
        goto refused;
    }
    if (vet_candidate(s, copy, params, ath_canary_is_exact(live), &ver, &reason, &child_ms, &err) !=
        0)
        goto refused;

    /* Vetted: now load it here, and check it here too. */
    int exact = 0;
    if (load_checked(s, copy, live, params, &cand, &exact, &reason, &err) != 0)
        goto refused;
    unlink(copy);
    take(s, live, &cand, file, sha, step);

    res->outcome = ATH_SWAP_TAKEN;
    res->reason = "";
    res->ms = (ath_now_s() - t0) * 1e3;
    ath_mark_cut(
        res->msg, sizeof res->msg,
        snprintf(res->msg, sizeof res->msg,
                 "took %s from %s, replacing %s; canary %s on %d probe samples; vetted in a "
                 "child in %.1f ms",
                 version_of(live, taken_v, sizeof taken_v), file, running,
                 exact ? "bit-identical (exact)" : "within tolerance", (int)c->pb, child_ms));
    ath_logf(s->log, "swap: after step %llu (%s): %s [%.1f ms]", (unsigned long long)step, trigger,
             res->msg, res->ms);
    return res->outcome;

refused:
    name_source(err.msg, sizeof err.msg, copy, file);
    if (copy[0])
        unlink(copy);
    s->stats.refused++;
    res->outcome = ATH_SWAP_REFUSED;
    res->reason = reason;
    res->ms = (ath_now_s() - t0) * 1e3;
    char cand_v[300] = "";
    if (ver.impl[0])
        snprintf(cand_v, sizeof cand_v, " (candidate %s [%s])", ver.impl, ver.kver);
    ath_mark_cut(res->msg, sizeof res->msg,
                 snprintf(res->msg, sizeof res->msg, "refused %s%s: %s: %s; %s keeps running", file,
                          cand_v, reason, err.msg, running));
    ath_logf(s->log, "swap: after step %llu (%s): %s [%.1f ms]", (unsigned long long)step, trigger,
             res->msg, res->ms);
    return res->outcome;
}

int ath_swap_follow(ath_swap_t *s, const char *path, const char *sha, uint64_t step,
                    const float *params, ath_trunk_t *live, ath_err_t *err)
{
    double t0 = ath_now_s();
    char file[ATH_PATH_MAX], copy[ATH_PATH_MAX] = "", got[SHA_HEX], v[512];
    const char *reason = "";
    ath_err_t why = {{0}};
    ath_trunk_t cand;
    memset(&cand, 0, sizeof cand);
    ath_canary_t *c = &s->canary;
    ath_plugin_file(path, file, sizeof file);
    if (checked_copy(s, file, copy, sizeof copy, got, &reason, &why) != 0) {
        copy[0] = '\0';
        goto fail;
    }
    if (strcmp(got, sha) != 0) {
        reason = R_DIGEST;
        ath_errf(&why,
                 "the file here has SHA-256 %.16s..., not the %.16s... rank 0 took (it differs "
                 "on this host, or changed since)",
                 got, sha);
        goto fail;
    }
    int exact = 0;
    if (ath_canary_run(live, params, c->x, c->dout, c->pb, c->ref_out, c->ref_grads, &why) != 0) {
        reason = R_REFERENCE;
        goto fail;
    }
    if (load_checked(s, copy, live, params, &cand, &exact, &reason, &why) != 0)
        goto fail;
    unlink(copy);
    take(s, live, &cand, file, sha, step);
    ath_logf(s->log,
             "swap: after step %llu: took %s from %s (SHA-256 %.16s...) as rank 0 did; "
             "canary %s [%.1f ms]",
             (unsigned long long)step, version_of(live, v, sizeof v), file, sha,
             exact ? "bit-identical (exact)" : "within tolerance", (ath_now_s() - t0) * 1e3);
    return 0;
fail:
    name_source(why.msg, sizeof why.msg, copy, file);
    if (copy[0])
        unlink(copy);
    return ath_errf(err, "cannot take %s: %s: %s", file, reason, why.msg);
}

const char *ath_swap_live_sha(const ath_swap_t *s) { return s->live_sha; }

const char *ath_swap_live_source(const ath_swap_t *s) { return s->source; }

int ath_swap_failed(ath_swap_t *s, uint64_t step, ath_trunk_t *live, const char *why)
{
    if (!s || !s->prev.plugin.lib)
        return -1;
    double t0 = ath_now_s();
    char bad[512], good[512];
    version_of(live, bad, sizeof bad);
    version_of(&s->prev, good, sizeof good);
    ath_trunk_close(live);
    *live = s->prev;
    memset(&s->prev, 0, sizeof s->prev);
    void *grown = realloc(s->bad, (size_t)(s->n_bad + 1) * sizeof *s->bad);
    if (grown) { /* without memory the digest is not remembered; the rollback still happens */
        s->bad = grown;
        memcpy(s->bad[s->n_bad].sha, s->live_sha, SHA_HEX);
        s->bad[s->n_bad++].step = step;
    }
    memcpy(s->live_sha, s->prev_sha, SHA_HEX);
    snprintf(s->source, sizeof s->source, "%s", s->prev_source);
    s->stats.rolled_back++;
    ath_logf(s->log, "swap: step %llu: rolled back from %s to %s: %s [%.1f ms]",
             (unsigned long long)step, bad, good, why, (ath_now_s() - t0) * 1e3);
    return 0;
}

void ath_swap_step_done(ath_swap_t *s, uint64_t step)
{
    if (s && s->prev.plugin.lib && step >= s->probation_end) {
        char old[512];
        version_of(&s->prev, old, sizeof old);
        release_prev(s);
        ath_logf(s->log, "swap: after step %llu: probation over; unloaded %s",
                 (unsigned long long)step, old);
    }
}

/* ------------------------------------------------------------------------- */
/* Triggers, in their order at a step boundary                               */

int ath_swap_due(ath_swap_t *s, uint64_t step)
{
    if (s->next_at < s->o.n_at && s->o.at[s->next_at].step <= step)
        return 1;
    if (!s->hup_seen)
        s->hup_seen = ath_hup_take();
    if (s->o.watch && !s->change_seen)
        s->change_seen = ath_watch_changed(&s->watch);
    return s->hup_seen || s->change_seen;
}

int ath_swap_poll_one(ath_swap_t *s, uint64_t step, const float *params, ath_trunk_t *live)
{
    while (s->next_at < s->o.n_at && s->o.at[s->next_at].step <= step) {
        const ath_swap_at_t *a = &s->o.at[s->next_at++];
        if (ath_swap_try(s, a->path, "--swap-at", step, params, live, NULL) == ATH_SWAP_TAKEN)
            return 1;
    }
    /* SIGHUP and the watch are read once per poll, after the entries. */
    if (!s->poll_read) {
        s->hup_seen = s->hup_seen || ath_hup_take();
        s->change_seen = s->change_seen || (s->o.watch && ath_watch_changed(&s->watch));
        s->poll_read = 1;
    }
    if (s->hup_seen) {
        s->hup_seen = 0;
        if (s->watch.file[0] &&
            ath_swap_try(s, s->watch.file, "SIGHUP", step, params, live, NULL) == ATH_SWAP_TAKEN)
            return 1;
    }
    if (s->change_seen) {
        s->change_seen = 0;
        if (ath_swap_try(s, s->watch.file, ath_watch_trigger(&s->watch), step, params, live,
                         NULL) == ATH_SWAP_TAKEN)
            return 1;
    }
    s->poll_read = 0;
    return 0;
}

int ath_swap_poll(ath_swap_t *s, uint64_t step, const float *params, ath_trunk_t *live)
{
    int taken = 0;
    while (ath_swap_poll_one(s, step, params, live))
        taken++;
    return taken;
}
