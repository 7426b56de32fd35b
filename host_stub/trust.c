/*
 * trust.c — owner and mode checks of files that are run or believed, and of
 * the directories they are reached through (trust.h).
 */
#define _GNU_SOURCE /* realpath */
#include "trust.h"

#include "auxtrunk_loader.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The installed loader's rule (auxtrunk_plugin_check_mode), on what was stat'ed. */
int ath_trust_stat(const struct stat *st, const char *what, const char *path, ath_err_t *err)
{
    char msg[sizeof err->msg];
    if (auxtrunk_plugin_check_mode((uint32_t)st->st_mode, (uint32_t)st->st_uid, what, path, msg,
                                   sizeof msg) != AUXTRUNK_LOAD_OK)
        return ath_errf(err, "%s", msg);
    return 0;
}

int ath_trust_dir(const char *dir, const char *what, ath_err_t *err)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return ath_errf(err, "%s %s: %s", what, dir, strerror(errno));
    return ath_trust_stat(&st, what, dir, err);
}

int ath_trust_dirs_of(const char *path, const char *what, char *real, size_t n, int *missing,
                      ath_err_t *err)
{
    char dir[PATH_MAX], resolved[PATH_MAX], realdir[PATH_MAX], dwhat[96];
    *missing = 0;
    snprintf(dwhat, sizeof dwhat, "%s directory", what);
    ath_dir_of(path, dir, sizeof dir);
    struct stat st;
    if (stat(dir, &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
        *missing = 1;
        return ath_errf(err, "no %s: %s does not exist (its directory %s: %s)", what, path, dir,
                        strerror(errno));
    }
    if (ath_trust_dir(dir, dwhat, err) != 0)
        return -1;
    if (!realpath(path, resolved)) {
        int e = errno;
        *missing = e == ENOENT || e == ENOTDIR;
        return ath_errf(err, "no %s: %s %s (%s)", what, path,
                        *missing ? "does not exist" : "cannot be resolved", strerror(e));
    }
    ath_dir_of(resolved, realdir, sizeof realdir);
    if (strcmp(realdir, dir) != 0 && ath_trust_dir(realdir, dwhat, err) != 0)
        return -1;
    if (snprintf(real, n, "%s", resolved) >= (int)n)
        return ath_errf(err, "%s %s: path too long", what, path);
    return 0;
}
