/* rng.c — see rng.h. */
#define _POSIX_C_SOURCE 200809L
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void tst_rng_seed(tst_rng_t *r, uint64_t seed) { r->state = seed; }

uint64_t tst_rng_next(tst_rng_t *r)
{
    uint64_t z = (r->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

float tst_rng_uniform(tst_rng_t *r, float lo, float hi)
{
    /* 24 random bits: exactly representable in [0, 1). */
    float u = (float)(tst_rng_next(r) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

void tst_rng_fill(tst_rng_t *r, float *dst, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = tst_rng_uniform(r, lo, hi);
}

uint64_t tst_seed(const char *who)
{
    static int printed = 0;
    static uint64_t seed = 0;
    if (!printed) {
        const char *env = getenv("AUXTRUNK_SEED");
        if (env && *env) {
            seed = strtoull(env, NULL, 0);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed = (uint64_t)ts.tv_sec * UINT64_C(1000000007) ^ (uint64_t)ts.tv_nsec;
        }
        fprintf(stderr, "%s: seed %llu (set AUXTRUNK_SEED=%llu to reproduce)\n", who ? who : "test",
                (unsigned long long)seed, (unsigned long long)seed);
        printed = 1;
    }
    return seed;
}
