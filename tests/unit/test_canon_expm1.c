/*
 * test_canon_expm1.c — auxtrunk_canon_expm1 (abi/auxtrunk_canon.h) computes
 * its three documented cases with selects instead of branches, so that GPU
 * lanes in different ranges do not run both paths in turn. This program
 * checks, bit for bit, that it equals a literal transcription of the
 * three-case definition in the header's comment: on every negative float
 * pattern of a stride (5) through [-20, 0], on every pattern within 4096 ulp of
 * each case boundary, on every negative subnormal, on NaNs and infinities,
 * and on a stride through the values below -20. (The whole float range was
 * compared once when the select form was introduced: 2^32 inputs, no
 * difference.)
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "auxtrunk_canon.h"
#include "bits.h"

/* The three cases of the header comment, as branches. */
static float spec_expm1(float x)
{
    if (x != x)
        return x;
    if (x < -20.0f)
        return -1.0f;
    if (x > -0.34657359f)
        return auxtrunk_canon_expm1_poly_(x);
    const float shift = 12582912.0f;
    float t = fmaf(x, 1.44269504f, shift);
    float n = t - shift;
    float r = fmaf(-n, 0.693145751953125f, x);
    r = fmaf(-n, 1.42860677e-06f, r);
    float e = auxtrunk_canon_expm1_poly_(r);
    int32_t ni = (int32_t)n;
    float s = auxtrunk_canon_bits_to_float_((uint32_t)(ni + 127) << 23);
    return fmaf(s, e, s - 1.0f);
}

/* Compares bit patterns lo, lo + stride, ... <= hi; returns the count. */
static uint64_t compare_range(uint32_t lo, uint32_t hi, uint32_t stride)
{
    uint64_t n = 0;
    for (uint64_t u = lo; u <= hi; u += stride, n++) {
        const float x = tst_bits_f32((uint32_t)u);
        const uint32_t got = tst_f32_bits(auxtrunk_canon_expm1(x));
        const uint32_t want = tst_f32_bits(spec_expm1(x));
        if (got != want)
            ck_abort_msg("expm1(%a) = %a (bits %08x), the three-case definition gives %a "
                         "(bits %08x)",
                         (double)x, (double)tst_bits_f32(got), (unsigned)got,
                         (double)tst_bits_f32(want), (unsigned)want);
    }
    return n;
}

START_TEST(stride_through_the_domain)
{
    /* -0 (0x80000000) down to -20 (0xc1a00000), every 5th pattern. */
    const uint64_t n = compare_range(0x80000000u, tst_f32_bits(-20.0f), 5);
    /* Below -20 down to -inf: the clamp and the select, every 4099th. */
    const uint64_t m = compare_range(tst_f32_bits(-20.0f), 0xff800000u, 4099);
    printf("  expm1: %llu patterns in [-20, 0] and %llu below, equal to the definition\n",
           (unsigned long long)n, (unsigned long long)m);
}
END_TEST

START_TEST(every_pattern_near_the_case_boundaries)
{
    static const float edges[] = {-0.34657359f, -20.0f, -0.0f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        const uint32_t b = tst_f32_bits(edges[i]);
        const uint32_t lo = b - 4096 > 0x80000000u ? b - 4096 : 0x80000000u;
        compare_range(lo, b + 4096, 1);
    }
    /* every negative subnormal */
    compare_range(0x80000001u, 0x807fffffu, 1);
}
END_TEST

START_TEST(nan_and_infinity)
{
    static const uint32_t specials[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                        0x7fffffffu, 0xffffffffu, 0xff800000u};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        compare_range(specials[i], specials[i], 1);
    ck_assert(auxtrunk_canon_expm1(-INFINITY) == -1.0f);
    ck_assert(isnan(auxtrunk_canon_expm1(NAN)));
    ck_assert(isnan(auxtrunk_canon_elu(NAN)));
    ck_assert(auxtrunk_canon_elu(INFINITY) == INFINITY);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("canon_expm1");
    TCase *tc = tcase_create("select form equals the definition");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, stride_through_the_domain);
    tcase_add_test(tc, every_pattern_near_the_case_boundaries);
    tcase_add_test(tc, nan_and_infinity);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
