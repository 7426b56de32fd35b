/*
 * vet_open.c — opening a plugin the way every plugin of a run is opened:
 * private copy, allow-list, vetting child, then the load here (vet.h).
 *
 * The first plugin of a run is vetted too: a file that crashes or hangs in
 * its entry, its init or its first call then ends the run with a message
 * and exit code 3 instead of taking the trainer down or stalling it.
 */
#include "vet.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allowlist.h"
#include "canary.h"
#include "plugin_copy.h"

/* The loader status a refusal reason names, else NOT_LOADABLE. */
static ath_load_status_t status_of(const char *reason)
{
    for (int s = ATH_LOAD_NO_FILE; s <= ATH_LOAD_INIT; s++)
        if (strcmp(reason, ath_load_status_name((ath_load_status_t)s)) == 0)
            return (ath_load_status_t)s;
    return strcmp(reason, ATH_COPY_R_NO_FILE) == 0 ? ATH_LOAD_NO_FILE : ATH_LOAD_NOT_LOADABLE;
}

/* Messages name the private copy; the operator knows the file. */
static void name_file(ath_err_t *err, const char *copy, const char *file)
{
    const char *p = copy[0] ? strstr(err->msg, copy) : NULL;
    if (!p)
        return;
    char rest[sizeof err->msg];
    snprintf(rest, sizeof rest, "%s", p + strlen(copy));
    size_t at = (size_t)(p - err->msg);
    snprintf(err->msg + at, sizeof err->msg - at, "%s%s", file, rest);
}

ath_load_status_t ath_vet_open(ath_trunk_t *t, const char *dir_or_file,
                               const auxtrunk_config_t *config, int device,
                               const ath_vet_open_opts_t *o, char sha[ATH_SHA256_HEX],
                               ath_err_t *err)
{
    static const ath_vet_open_opts_t defaults = {0};
    if (!o)
        o = &defaults;
    memset(t, 0, sizeof *t);
    char file[ATH_PATH_MAX], copy[ATH_PATH_MAX] = "", digest[ATH_SHA256_HEX];
    ath_plugin_file(dir_or_file, file, sizeof file);
    ath_privdir_t own = {{0}, 0}, *dir = o->dir;
    if (!dir) {
        if (ath_privdir_create(&own, err) != 0)
            return ATH_LOAD_NOT_LOADABLE;
        dir = &own;
    }
    ath_canary_t c = {0};
    float *params = NULL;
    const char *reason = "";
    ath_load_status_t ls = ATH_LOAD_NOT_LOADABLE;

    if (ath_plugin_copy(dir, file, copy, sizeof copy, digest, &reason, err) != 0) {
        copy[0] = '\0';
        ls = status_of(reason);
        goto out;
    }
    if (ath_allow_check(o->allow, digest, file, o->allow_name, err) != 0)
        goto out;

    /* The child: load, init, and the probe on fixed parameters, whose
     * results must be finite (there is no running version to compare with). */
    if (ath_canary_create(&c, config, err) != 0)
        goto out;
    params = malloc(c.n_params * sizeof *params);
    if (!params) {
        ath_errf(err, "out of host memory");
        goto out;
    }
    ath_rng_t r = ath_rng_make(UINT64_C(0xF1257), 2);
    for (size_t i = 0; i < c.n_params; i++)
        params[i] = ath_rng_uniform(&r, -0.1f, 0.1f);
    ath_vet_req_t rq = {
        .config = *config,
        .device = device,
        .pb = c.pb,
        .n_params = c.n_params,
        .params = params,
        .x = c.x,
        .dout = c.dout,
        .out = c.out,
        .grads = c.grads,
    };
    snprintf(rq.path, sizeof rq.path, "%s", copy);
    char req_file[ATH_PATH_MAX] = "";
    if (o->exe && ath_privdir_name(dir, "request.vet", req_file, sizeof req_file) != 0) {
        ath_errf(err, "private directory path too long");
        goto out;
    }
    ath_vet_version_t ver;
    memset(&ver, 0, sizeof ver);
    double child_ms;
    if (ath_vet(&rq, o->timeout_s > 0 ? o->timeout_s : ATH_VET_TIMEOUT_S, o->exe, req_file, &ver,
                &reason, &child_ms, err) != 0) {
        ls = status_of(reason);
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        ath_errf(err, "%s: %s", reason, why);
        goto out;
    }
    ls = ath_trunk_open(t, copy, config, device, err);
    if (ls == ATH_LOAD_OK) {
        snprintf(t->plugin.path, sizeof t->plugin.path, "%s", file);
        if (sha)
            memcpy(sha, digest, ATH_SHA256_HEX);
    }
out:
    name_file(err, copy, file);
    if (copy[0])
        unlink(copy); /* a loaded copy stays mapped; nothing needs its name */
    free(params);
    ath_canary_free(&c);
    ath_privdir_remove(&own);
    return ls;
}
