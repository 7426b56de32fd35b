/*
 * trust.h — may this file be run or believed? The permission checks every
 * plugin file and the SHA-256 allow-list go through: the file and each
 * directory it is reached through must not be writable by group or others
 * and must be owned by this user or root, so no other user can have put
 * something there or can replace it.
 *
 * Not done here: reading the file (safefile.h) or judging its contents (the
 * allow-list and the vetting child do that).
 */
#ifndef ATH_TRUST_H
#define ATH_TRUST_H

#include <sys/stat.h>

#include "util.h"

/* st (of the file as opened: fstat) is owned by this user or root and not
 * writable by group or others. what names it in the message ("plugin
 * file"). Returns 0, or -1 with the message. */
int ath_trust_stat(const struct stat *st, const char *what, const char *path, ath_err_t *err);

/* The same for the directory dir (what: "plugin directory"). */
int ath_trust_dir(const char *dir, const char *what, ath_err_t *err);

/* The directory of path and, when path is a symlink, the directory of the
 * file it resolves to: both must pass ath_trust_dir. real gets the resolved
 * path (n bytes). Returns 0; -1 with *missing set when path does not
 * resolve (no such file), or with the message of the failed check. */
int ath_trust_dirs_of(const char *path, const char *what, char *real, size_t n, int *missing,
                      ath_err_t *err);

#endif
