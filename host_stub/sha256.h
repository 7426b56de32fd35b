/*
 * sha256.h — SHA-256 (FIPS 180-4), small and dependency-free, for pinning
 * hot-swapped plugins to an allow-list of digests. Streaming interface plus a
 * whole-file helper. Not constant-time (digests of public files only).
 */
#ifndef ATH_SHA256_H
#define ATH_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define ATH_SHA256_BYTES 32
#define ATH_SHA256_HEX 65 /* 64 hex digits and the NUL */

typedef struct ath_sha256 {
    uint32_t h[8];
    uint64_t bytes;    /* message length so far */
    uint8_t block[64]; /* pending input */
    size_t fill;       /* bytes in block */
} ath_sha256_t;

void ath_sha256_init(ath_sha256_t *s);
void ath_sha256_update(ath_sha256_t *s, const void *data, size_t n);
void ath_sha256_final(ath_sha256_t *s, uint8_t out[ATH_SHA256_BYTES]);

/* Lower-case hex of a digest. */
void ath_sha256_hex(const uint8_t d[ATH_SHA256_BYTES], char hex[ATH_SHA256_HEX]);

/* Digest of a file's whole contents as hex. Returns 0, or -1 (errno set). */
int ath_sha256_file(const char *path, char hex[ATH_SHA256_HEX]);

#endif
