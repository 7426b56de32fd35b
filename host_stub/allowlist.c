/*
 * allowlist.c — the SHA-256 allow-list: parsing and lookup (allowlist.h).
 */
#include "allowlist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "safefile.h"
#include "trust.h"

/* One line (without its newline) into hex. Returns 1 for a digest, 0 for a
 * line to skip, -1 for an invalid line. */
static int parse_line(const char *p, size_t n, char hex[ATH_SHA256_HEX])
{
    /* A NUL anywhere, comments included: a tool that reads the list as C
     * strings would see another list than this parser does. */
    if (memchr(p, '\0', n))
        return -1;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i == n || p[i] == '#')
        return 0;
    if (n - i < 64)
        return -1;
    for (int k = 0; k < 64; k++) {
        char c = p[i + (size_t)k];
        if (c >= 'A' && c <= 'F')
            c = (char)(c - 'A' + 'a');
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return -1;
        hex[k] = c;
    }
    hex[64] = '\0';
    i += 64;
    if (i < n && p[i] != ' ' && p[i] != '\t')
        return -1;
    return 1;
}

int ath_allow_parse(ath_allow_t *a, const char *text, size_t len, const char *name, ath_err_t *err)
{
    memset(a, 0, sizeof *a);
    int lineno = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
        lineno++;
        char hex[ATH_SHA256_HEX];
        int r = parse_line(text + at, n, hex);
        if (r < 0) {
            ath_allow_free(a);
            return ath_errf(err, "%s:%d: not a SHA-256 digest (64 hex digits, as sha256sum prints)",
                            name, lineno);
        }
        if (r > 0) {
            void *grown = realloc(a->sha, (size_t)(a->n + 1) * sizeof *a->sha);
            if (!grown) {
                ath_allow_free(a);
                return ath_errf(err, "out of host memory");
            }
            a->sha = grown;
            memcpy(a->sha[a->n++], hex, ATH_SHA256_HEX);
        }
        at += n + 1;
    }
    if (a->n == 0)
        return ath_errf(err, "the SHA-256 allow-list %s lists no digest", name);
    return 0;
}

int ath_allow_read(ath_allow_t *a, const char *path, ath_err_t *err)
{
    memset(a, 0, sizeof *a);
    /* The list decides what may run: it passes the same owner and mode
     * checks as a plugin file, and only a regular file is read (a FIFO or
     * /dev/zero would block or never end). */
    char real[ATH_PATH_MAX], *text = NULL;
    int missing;
    size_t len;
    struct stat st;
    if (ath_trust_dirs_of(path, "SHA-256 allow-list", real, sizeof real, &missing, err) != 0 ||
        ath_in_slurp(real, "SHA-256 allow-list", ATH_ALLOW_MAX_BYTES, &text, &len, &st, err) != 0)
        return -1;
    int rc = ath_trust_stat(&st, "SHA-256 allow-list", path, err);
    if (rc == 0)
        rc = ath_allow_parse(a, text, len, path, err);
    free(text);
    return rc;
}

int ath_allow_has(const ath_allow_t *a, const char *sha)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->sha[i], sha) == 0)
            return 1;
    return 0;
}

int ath_allow_check(const ath_allow_t *a, const char *sha, const char *file, const char *list,
                    ath_err_t *err)
{
    if (!a || a->n == 0 || ath_allow_has(a, sha))
        return 0;
    return ath_errf(err, "%s has SHA-256 %s, which is not on the allow-list %s", file, sha, list);
}

void ath_allow_free(ath_allow_t *a)
{
    free(a->sha);
    a->sha = NULL;
    a->n = 0;
}
