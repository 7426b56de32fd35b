/*
 * util.h — the few things every host_stub file shares: an error-text buffer
 * that a failing function fills for its caller, a monotonic clock, and a
 * seeded random stream (splitmix64) whose whole state is one uint64_t, so a
 * checkpoint can save and restore it exactly.
 *
 * Internal prefix of the host trainer: ath_ (auxtrunk host).
 */
#ifndef ATH_UTIL_H
#define ATH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of auxtrunk-host (also listed by --help). */
enum {
    ATH_EXIT_OK = 0,      /* success */
    ATH_EXIT_FAILURE = 1, /* a plugin call, the device, I/O, or a non-finite loss failed */
    ATH_EXIT_USAGE = 2,   /* bad command line */
    ATH_EXIT_PLUGIN = 3,  /* the plugin was refused (missing, not loadable, ABI, table, init) */
    ATH_EXIT_CHECKPOINT =
        4,             /* a checkpoint could not be read, was refused, or could not be written */
    ATH_EXIT_HUNG = 5, /* a plugin call or the device did not return within --call-timeout */
    /* Ended by SIGINT or SIGTERM (after the final checkpoint): 128 + the signal. */
};

/* Text of the last failure, written by the callee, printed by main. */
typedef struct ath_err {
    char msg[1024];
} ath_err_t;

/* Formats into err (NULL is allowed) and returns -1, so a failing path reads
 * `return ath_errf(err, "...", ...);`. */
int ath_errf(ath_err_t *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* One line to f (a newline added) and a flush: the log lines of
 * long-running parts (the swapper) are seen as they happen. */
void ath_logf(FILE *f, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A message cut to buf's n bytes by snprintf ends in "..." (len: what
 * snprintf returned), so a reader sees it was cut. */
void ath_mark_cut(char *buf, size_t n, int len);

/* The directory part of path: "." for a bare name, "/" for "/name". */
void ath_dir_of(const char *path, char *dir, size_t n);

/* The directory of the running executable (from /proc/self/exe). Returns 0,
 * or -1 if it cannot be found or does not fit in n bytes. */
int ath_exe_dir(char *dir, size_t n);

/* Seconds on CLOCK_MONOTONIC. */
double ath_now_s(void);

/* splitmix64: the state is the whole generator. */
typedef struct ath_rng {
    uint64_t state;
} ath_rng_t;

static inline uint64_t ath_rng_next(ath_rng_t *r)
{
    uint64_t z = (r->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A generator for one purpose of one seed: streams with different tags never
 * overlap in practice, so teacher, student and data draws are independent. */
static inline ath_rng_t ath_rng_make(uint64_t seed, uint64_t tag)
{
    ath_rng_t r = {seed ^ (tag * UINT64_C(0xD1B54A32D192ED03))};
    (void)ath_rng_next(&r);
    return r;
}

/* Uniform in [lo, hi) from the top 24 bits (exact in float). */
static inline float ath_rng_uniform(ath_rng_t *r, float lo, float hi)
{
    float u = (float)(ath_rng_next(r) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

#endif
