/*
 * rng.h — seeded random inputs for tests and tools (xoshiro128**-free, plain
 * splitmix64). Deterministic across machines; never used by plugins.
 */
#ifndef AUXTRUNK_TEST_RNG_H
#define AUXTRUNK_TEST_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct tst_rng {
    uint64_t state;
} tst_rng_t;

void tst_rng_seed(tst_rng_t *r, uint64_t seed);
uint64_t tst_rng_next(tst_rng_t *r);
/* Uniform in [lo, hi). */
float tst_rng_uniform(tst_rng_t *r, float lo, float hi);
void tst_rng_fill(tst_rng_t *r, float *dst, size_t n, float lo, float hi);

/* The seed for this run: $AUXTRUNK_SEED if set (decimal or 0x hex), else one
 * drawn from the clock. Prints "seed: N (set AUXTRUNK_SEED=N to reproduce)"
 * to stderr once per process, prefixed by who. */
uint64_t tst_seed(const char *who);

#endif
