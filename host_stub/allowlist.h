/*
 * allowlist.h — the SHA-256 allow-list of plugins (--plugin-sha256 FILE):
 * the digests a run may load, in sha256sum format. This list, not the
 * vetting child, is the security boundary against a malicious plugin.
 *
 * Format: one digest per line, 64 hex digits (upper case accepted), then
 * the end of the line or a blank and anything (sha256sum prints the file
 * name there); lines that are blank or start with '#' (after blanks) are
 * skipped. Any other line makes the whole list invalid, as does a list
 * without a digest.
 */
#ifndef ATH_ALLOWLIST_H
#define ATH_ALLOWLIST_H

#include <stddef.h>

#include "sha256.h"
#include "util.h"

#define ATH_ALLOW_MAX_BYTES (1u << 20) /* a larger file is refused unread */

struct ath_allow {
    char (*sha)[ATH_SHA256_HEX]; /* lower-case hex */
    int n;
};
typedef struct ath_allow ath_allow_t;

/* Parses len bytes of text (name: for messages, "FILE" or "FILE:LINE").
 * Returns 0 with at least one digest in *a, or -1 with the message and *a
 * empty. A NUL byte in text is an invalid line. */
int ath_allow_parse(ath_allow_t *a, const char *text, size_t len, const char *name, ath_err_t *err);

/* Reads and parses the file at path: a regular file of at most
 * ATH_ALLOW_MAX_BYTES that passes the permission checks of trust.h (itself
 * and its directories). */
int ath_allow_read(ath_allow_t *a, const char *path, ath_err_t *err);

/* Is sha (lower-case hex) listed? */
int ath_allow_has(const ath_allow_t *a, const char *sha);

/* 0 when a is empty (no allow-list) or lists sha; else -1 with the message
 * naming file (the plugin) and list (the allow-list's path). */
int ath_allow_check(const ath_allow_t *a, const char *sha, const char *file, const char *list,
                    ath_err_t *err);

void ath_allow_free(ath_allow_t *a);

#endif
