/*
 * fuzz_allowlist.c — libFuzzer harness for the SHA-256 allow-list parser
 * (host_stub/allowlist.c, ath_allow_parse), the security boundary for
 * which plugins may load.
 *
 * Input: the list's bytes, as is, in an allocation of exactly that size (no
 * terminating NUL: reading past it is a sanitizer report).
 *
 * Invariants, besides no sanitizer report, crash, leak or hang:
 *   - the result equals a reference reading of the format documented in
 *     allowlist.h, written here from that text alone: lines split at '\n';
 *     leading blanks (space, tab) skipped; a blank line or one starting with
 *     '#' skipped; any other line is 64 hex digits (either case) and then
 *     its end or a blank and anything; a NUL byte anywhere makes the list
 *     invalid, as does a list without a digest;
 *   - a refused list is empty (no digest, no memory) with a message;
 *   - every digest read is listed (ath_allow_has), and a digest that differs
 *     in one place is not;
 *   - writing the digests back one per line and parsing that gives the same
 *     list.
 */
#include <stdlib.h>
#include <string.h>

#include "allowlist.h"
#include "fuzz_common.h"

#define HEX ATH_SHA256_HEX

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static char lower(char c) { return c >= 'A' && c <= 'F' ? (char)(c - 'A' + 'a') : c; }

/* The reference: the digests in order into out (at most cap), their number,
 * or -1 for an invalid list. */
static int reference(const char *t, size_t len, char (*out)[HEX], int cap)
{
    if (memchr(t, '\0', len))
        return -1;
    int n = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(t + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - t) : len, i = at;
        while (i < end && (t[i] == ' ' || t[i] == '\t'))
            i++;
        if (i < end && t[i] != '#') {
            if (end - i < 64)
                return -1;
            for (int k = 0; k < 64; k++)
                if (!is_hex(t[i + (size_t)k]))
                    return -1;
            if (i + 64 < end && t[i + 64] != ' ' && t[i + 64] != '\t')
                return -1;
            if (n < cap) {
                for (int k = 0; k < 64; k++)
                    out[n][k] = lower(t[i + (size_t)k]);
                out[n][64] = '\0';
            }
            n++;
        }
        at = end + 1;
    }
    return n > 0 ? n : -1;
}

static void check_list(const ath_allow_t *a, const char *text, size_t len)
{
    static char want[4096][HEX];
    int n = reference(text, len, want, 4096);
    fz_check(n > 0, "ath_allow_parse accepted a list the format refuses");
    fz_check(a->n == n, "ath_allow_parse read %d digests, the format gives %d", a->n, n);
    for (int i = 0; i < n && i < 4096; i++) {
        fz_check(strlen(a->sha[i]) == 64 && strcmp(a->sha[i], want[i]) == 0,
                 "digest %d is %.65s, the format gives %s", i, a->sha[i], want[i]);
        fz_check(ath_allow_has(a, a->sha[i]), "digest %d is not listed by ath_allow_has", i);
    }
    char other[HEX];
    memcpy(other, a->sha[0], HEX);
    other[17] = other[17] == '0' ? '1' : '0';
    int listed = 0;
    for (int i = 0; i < a->n; i++)
        listed |= strcmp(a->sha[i], other) == 0;
    fz_check(ath_allow_has(a, other) == listed, "ath_allow_has answers for an unlisted digest");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    ath_allow_t a;
    ath_err_t err;
    err.msg[0] = '\0';
    int rc = ath_allow_parse(&a, text, size, "fuzz.sha256", &err);
    if (rc != 0) {
        fz_check(rc == -1, "ath_allow_parse returned %d", rc);
        fz_check(a.n == 0 && a.sha == NULL, "a refused list kept %d digests", a.n);
        fz_check(err.msg[0] != '\0', "a refused list gave no message");
        fz_check(reference(text, size, NULL, 0) < 0, "refused a valid list: %s", err.msg);
        free(text);
        return 0;
    }
    check_list(&a, text, size);

    /* Written back, one digest per line, it reads the same. */
    size_t len2 = (size_t)a.n * 65;
    char *again = malloc(len2);
    for (int i = 0; i < a.n; i++) {
        memcpy(again + (size_t)i * 65, a.sha[i], 64);
        again[(size_t)i * 65 + 64] = '\n';
    }
    ath_allow_t b;
    fz_check(ath_allow_parse(&b, again, len2, "again", &err) == 0,
             "the list written back was "
             "refused: %s",
             err.msg);
    fz_check(b.n == a.n, "the list written back has %d digests, not %d", b.n, a.n);
    for (int i = 0; i < a.n; i++)
        fz_check(strcmp(a.sha[i], b.sha[i]) == 0, "digest %d changed when written back", i);
    ath_allow_free(&b);
    ath_allow_free(&a);
    free(again);
    free(text);
    return 0;
}
