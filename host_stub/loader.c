/*
 * loader.c — the host's use of abi/auxtrunk_loader.h (whose implementation
 * lives in this file), init with the host's message, and where plugins are
 * looked for.
 *
 * A refused plugin leaves nothing behind: the library is closed before the
 * refusal returns.
 */
#define _GNU_SOURCE /* realpath and readlink are POSIX; keep glibc's full view */
#define AUXTRUNK_LOADER_IMPLEMENTATION
#include "loader.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef AUXTRUNK_HOST_BUILD_PLUGINS_REL
#define AUXTRUNK_HOST_BUILD_PLUGINS_REL "../plugins"
#endif
#ifndef AUXTRUNK_HOST_INSTALL_PLUGINS_REL
#define AUXTRUNK_HOST_INSTALL_PLUGINS_REL "../lib/auxtrunk/plugins"
#endif

const char *ath_load_status_name(ath_load_status_t s)
{
    return s == ATH_LOAD_INIT ? "init-failed" : auxtrunk_load_status_name(s);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

void ath_plugin_file(const char *dir_or_file, char *path, size_t n)
{
    /* A bare name is a file here, not a name for the search path. */
    char explicit_path[ATH_PATH_MAX];
    snprintf(explicit_path, sizeof explicit_path, "%s%s", strchr(dir_or_file, '/') ? "" : "./",
             dir_or_file);
    if (auxtrunk_plugin_locate(explicit_path, NULL, path, n, NULL, 0) != AUXTRUNK_LOAD_OK)
        snprintf(path, n, "%s", explicit_path);
}

/* The plugin's own text for a status, guarded against a NULL answer. */
static const char *plugin_status_text(const auxtrunk_api_t *api, int32_t s)
{
    const char *t = api->status_string ? api->status_string(s) : NULL;
    return t ? t : "(no message)";
}

/* ------------------------------------------------------------------------- */
/* Load, init, unload                                                        */

ath_load_status_t ath_plugin_load(const char *dir_or_file, ath_plugin_t *pl, ath_err_t *err)
{
    memset(pl, 0, sizeof *pl);
    char path[ATH_PATH_MAX];
    ath_plugin_file(dir_or_file, path, sizeof path);
    auxtrunk_plugin_t so;
    char msg[sizeof err->msg];
    /* path is explicit, and the host's range is the loader's default. */
    int32_t s = auxtrunk_plugin_load(&so, path, msg, sizeof msg);
    if (s != AUXTRUNK_LOAD_OK) {
        if (s == AUXTRUNK_LOAD_E_NO_FILE && !is_dir(dir_or_file))
            ath_errf(err, "%s (is the plugin directory right?)", msg);
        else
            ath_errf(err, "%s", msg);
        return (ath_load_status_t)s;
    }
    pl->lib = so.lib;
    pl->api = so.api;
    pl->space = so.space == AUXTRUNK_CAP_MEM_HOST ? ATH_SPACE_HOST : ATH_SPACE_CUDA;
    snprintf(pl->path, sizeof pl->path, "%s", path);
    return ATH_LOAD_OK;
}

ath_load_status_t ath_plugin_init(ath_plugin_t *pl, const auxtrunk_config_t *config, ath_err_t *err)
{
    auxtrunk_handle_t *h = NULL;
    int32_t s = pl->api.init(config, &h);
    if (s != AUXTRUNK_OK || h == NULL) {
        ath_errf(err,
                 "%s: init(ENC=%d H1=%d H2=%d AUX=%d max_batch=%d device=%d) failed: %s "
                 "(status %d)",
                 pl->path, config->enc, config->h1, config->h2, config->aux, config->max_batch,
                 config->device,
                 s == AUXTRUNK_OK ? "it returned OK but no handle"
                                  : plugin_status_text(&pl->api, s),
                 (int)s);
        return ATH_LOAD_INIT;
    }
    pl->handle = h;
    return ATH_LOAD_OK;
}

void ath_plugin_unload(ath_plugin_t *pl)
{
    if (pl->handle)
        (void)pl->api.destroy(pl->handle);
    auxtrunk_plugin_t so = {.lib = pl->lib};
    auxtrunk_plugin_unload(&so);
    memset(pl, 0, sizeof *pl);
}

const char *ath_plugin_name(const ath_plugin_t *pl)
{
    return pl->api.impl_name ? pl->api.impl_name : "(none)";
}

int ath_plugin_failf(const ath_plugin_t *pl, int32_t status, ath_err_t *err, const char *what)
{
    const char *detail = pl->handle ? pl->api.last_error(pl->handle) : "";
    return ath_errf(err, "%s: %s failed: %s%s%s%s", pl->api.impl_name, what,
                    plugin_status_text(&pl->api, status), detail && detail[0] ? " (" : "",
                    detail && detail[0] ? detail : "", detail && detail[0] ? ")" : "");
}

/* ------------------------------------------------------------------------- */
/* Where plugins live                                                        */

int ath_plugins_root(char *root, size_t n, ath_err_t *err)
{
    char dir[ATH_PATH_MAX];
    if (ath_exe_dir(dir, sizeof dir) != 0)
        return ath_errf(err, "cannot locate the running executable (/proc/self/exe)");
    const char *rel[] = {AUXTRUNK_HOST_BUILD_PLUGINS_REL, AUXTRUNK_HOST_INSTALL_PLUGINS_REL};
    char tried[2][ATH_PATH_MAX];
    for (int i = 0; i < 2; i++) {
        int len = snprintf(tried[i], sizeof tried[i], "%s/%s", dir, rel[i]);
        if (len > 0 && (size_t)len < sizeof tried[i] && is_dir(tried[i])) {
            char real[PATH_MAX];
            snprintf(root, n, "%s", realpath(tried[i], real) ? real : tried[i]);
            return 0;
        }
    }
    return ath_errf(err, "no plugins directory next to the executable (tried %s and %s)", tried[0],
                    tried[1]);
}

int ath_plugin_named(const char *name, char *path, size_t n, ath_err_t *err)
{
    /* A name with a '/' would be an explicit path to the loader: not here. */
    if (!strchr(name, '/') &&
        auxtrunk_plugin_locate(name, NULL, path, n, NULL, 0) == AUXTRUNK_LOAD_OK)
        return 0;
    char root[ATH_PATH_MAX];
    if (ath_plugins_root(root, sizeof root, err) != 0)
        return -1;
    int len = snprintf(path, n, "%s/%s", root, name);
    if (len < 0 || (size_t)len >= n)
        return ath_errf(err, "path too long: %s/%s", root, name);
    return 0;
}

int ath_default_plugin_dir(char *dir, size_t n, ath_err_t *err)
{
    const char *env = getenv("AUXTRUNK_PLUGIN_DIR");
    if (env && env[0]) {
        snprintf(dir, n, "%s", env);
        return 0;
    }
    char root[ATH_PATH_MAX];
    if (ath_plugins_root(root, sizeof root, err) != 0)
        return -1;
    /* The fastest exact CPU plugin (bit-identical to cpu-ref). */
    int len = snprintf(dir, n, "%s/cpu-blocked", root);
    if (len < 0 || (size_t)len >= n)
        return ath_errf(err, "plugin path too long: %s/cpu-blocked", root);
    return 0;
}
