/*
 * fuzz_common.h — what the libFuzzer harnesses of tests/fuzz share: a
 * private scratch directory for the inputs that must be files, whole-file
 * I/O, and the one way a harness reports a broken invariant (fz_fail: a
 * message, then abort(), which libFuzzer records as a crash with the input
 * that caused it).
 *
 * Every harness is one LLVMFuzzerTestOneInput over its own input format,
 * described at the top of its file. A harness never treats a refusal as a
 * finding: only a sanitizer report, a hang, a crash or a failed fz_check is.
 */
#ifndef AUXTRUNK_FUZZ_COMMON_H
#define AUXTRUNK_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* "<scratch>/name": the scratch directory (mode 0700, under $TMPDIR, else
 * /dev/shm or /tmp)
 * is made on first use and removed with its files when the process exits. */
const char *fz_path(const char *name);

/* Writes n bytes to path (created or truncated, mode 0600); aborts on an I/O
 * error, which is the harness's machine failing, not a finding. */
void fz_write(const char *path, const void *data, size_t n);

/* The whole file, malloc'd (at least one byte), its length in *n. */
unsigned char *fz_read(const char *path, size_t *n);

/* Reports a broken invariant and aborts. */
void fz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

#define fz_check(cond, ...)       \
    do {                          \
        if (!(cond))              \
            fz_fail(__VA_ARGS__); \
    } while (0)

/* Reads the input front to back; past the end every read gives 0. */
typedef struct fz_bytes {
    const uint8_t *p;
    size_t n;
} fz_bytes_t;

uint8_t fz_u8(fz_bytes_t *b);
uint32_t fz_u32(fz_bytes_t *b);

#endif
