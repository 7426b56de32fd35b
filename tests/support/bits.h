/*
 * bits.h — a float's bit pattern and back, for the tests' bit-for-bit
 * comparisons and poison checks (memcpy: no aliasing, no conversion).
 */
#ifndef AUXTRUNK_TEST_BITS_H
#define AUXTRUNK_TEST_BITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tst_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float tst_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
