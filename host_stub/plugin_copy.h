/*
 * plugin_copy.h — the private copies plugins are loaded from: a private
 * directory ($TMPDIR/auxtrunk-swap-<pid>-XXXXXX, mode 0700; those of killed
 * runs, whose pid is gone, are removed when the next one is made) and, in
 * it, a copy
 * (mode 0600) of a plugin file that passed the permission checks (trust.h),
 * with its SHA-256 taken while copying.
 *
 * Why a copy: dlopen caches by path, and the deployed file may be replaced
 * (or truncated in place, which would fault the pages a running trainer has
 * mapped) at any time; everything after the copy reads the copy, and the
 * digest is that of the bytes that will run.
 */
#ifndef ATH_PLUGIN_COPY_H
#define ATH_PLUGIN_COPY_H

#include "loader.h"
#include "sha256.h"
#include "util.h"

struct ath_privdir {
    char path[ATH_PATH_MAX]; /* "" until created */
    unsigned counter;        /* for unique names inside it */
};
typedef struct ath_privdir ath_privdir_t;

/* Creates the private directory. Returns 0, or -1 with the message. */
int ath_privdir_create(ath_privdir_t *d, ath_err_t *err);

/* Removes the directory and everything in it (only our own copies and
 * requests can be there). A directory never created is fine. */
void ath_privdir_remove(ath_privdir_t *d);

/* A fresh unique name in the directory: "<dir>/<n>-<suffix>". Returns 0, or
 * -1 when it does not fit in n bytes. */
int ath_privdir_name(ath_privdir_t *d, const char *suffix, char *name, size_t n);

/* Refusal reasons of a copy (the names operators and tests grep for). */
#define ATH_COPY_R_NO_FILE "no-file"
#define ATH_COPY_R_PERMISSIONS "permissions"
#define ATH_COPY_R_COPY "copy-failed"

/* Copies the plugin file at src into a fresh file in d, after checking its
 * directories (ath_trust_dirs_of) and the opened file's owner and mode, and
 * hashes what it copies. Returns 0 (dst: the copy, sha: its digest), or -1
 * with *reason (ATH_COPY_R_*) and the message; no copy is left behind. */
int ath_plugin_copy(ath_privdir_t *d, const char *src, char *dst, size_t n,
                    char sha[ATH_SHA256_HEX], const char **reason, ath_err_t *err);

#endif
