/*
 * options.c — the command-line parser: option tables, strict decimal numbers
 * with ranges, --help from the tables (options.h).
 */
#include "options.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Strict numbers                                                            */

/* Digits only, at least one, no leading zero unless the number is "0". */
static int plain_digits(const char *s)
{
    if (!s[0])
        return 0;
    if (s[0] == '0' && s[1])
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

static int bad_number(const char *text, const char *what, const char *kind, ath_err_t *err)
{
    return ath_errf(err, "bad value '%s' for %s: want %s", text, what, kind);
}

int ath_parse_u64(const char *text, uint64_t min, uint64_t max, const char *what, uint64_t *v,
                  ath_err_t *err)
{
    if (!plain_digits(text))
        return bad_number(text, what, "a decimal integer (no sign, space or leading zero)", err);
    errno = 0;
    unsigned long long x = strtoull(text, NULL, 10);
    if (errno == ERANGE || x < min || x > max)
        return ath_errf(err, "%s %s is outside [%llu, %llu]", what, text, (unsigned long long)min,
                        (unsigned long long)max);
    *v = (uint64_t)x;
    return 0;
}

int ath_parse_i64(const char *text, int64_t min, int64_t max, const char *what, int64_t *v,
                  ath_err_t *err)
{
    const char *digits = text[0] == '-' ? text + 1 : text;
    if (!plain_digits(digits) || (text[0] == '-' && strcmp(digits, "0") == 0))
        return bad_number(text, what, "a decimal integer (no space, '+' or leading zero)", err);
    errno = 0;
    long long x = strtoll(text, NULL, 10);
    if (errno == ERANGE || x < min || x > max)
        return ath_errf(err, "%s %s is outside [%lld, %lld]", what, text, (long long)min,
                        (long long)max);
    *v = (int64_t)x;
    return 0;
}

/* [-]digits[.digits][e[+-]digits], or [-].digits[...]: what a user types for
 * a real number; no space, hex, "nan" or "inf". */
static int plain_real(const char *s)
{
    const char *p = s;
    if (*p == '-')
        p++;
    int mant = 0;
    while (*p >= '0' && *p <= '9')
        p++, mant++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            p++, mant++;
    }
    if (!mant)
        return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        int exp = 0;
        while (*p >= '0' && *p <= '9')
            p++, exp++;
        if (!exp)
            return 0;
    }
    return *p == '\0';
}

int ath_parse_real(const char *text, double min, double max, const char *what, double *v,
                   ath_err_t *err)
{
    if (!plain_real(text))
        return bad_number(text, what, "a finite decimal number such as 0.5 or 1e-3", err);
    double x = strtod(text, NULL);
    if (!isfinite(x) || x < min || x > max)
        return ath_errf(err, "%s %s is outside [%g, %g]", what, text, min, max);
    *v = x;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Tables                                                                    */

/* A table's range for the integer kinds; min = max = 0 means the type's. */
static void int_range(const ath_opt_t *o, int64_t *lo, int64_t *hi)
{
    if (o->min == 0 && o->max == 0) {
        *lo = INT_MIN;
        *hi = INT_MAX;
        return;
    }
    *lo = (int64_t)o->min;
    *hi = (int64_t)o->max;
}

static void u64_range(const ath_opt_t *o, uint64_t *lo, uint64_t *hi)
{
    *lo = o->min > 0 ? (uint64_t)o->min : 0;
    *hi = (o->min == 0 && o->max == 0) || o->max >= 0x1p64 ? UINT64_MAX : (uint64_t)o->max;
}

static int set_value(const ath_opt_t *o, const char *v, const char *what, ath_err_t *err)
{
    switch (o->kind) {
    case ATH_OPT_INT: {
        int64_t lo, hi, x;
        int_range(o, &lo, &hi);
        if (ath_parse_i64(v, lo, hi, what, &x, err) != 0)
            return -1;
        *(int *)o->dst = (int)x;
        return 0;
    }
    case ATH_OPT_U64: {
        uint64_t lo, hi;
        u64_range(o, &lo, &hi);
        return ath_parse_u64(v, lo, hi, what, (uint64_t *)o->dst, err);
    }
    case ATH_OPT_FLOAT: {
        /* The range applies to the float that is stored (bounds rounded to
         * float too), so that a value accepted and printed back with enough
         * digits is accepted again as the same float. */
        double d;
        if (ath_parse_real(v, -DBL_MAX, DBL_MAX, what, &d, err) != 0)
            return -1;
        float f = (float)d;
        if (f < (float)o->min || f > (float)o->max)
            return ath_errf(err, "%s %s is outside [%g, %g]", what, v, o->min, o->max);
        *(float *)o->dst = f;
        return 0;
    }
    case ATH_OPT_DOUBLE:
        return ath_parse_real(v, o->min, o->max, what, (double *)o->dst, err);
    case ATH_OPT_STR:
        *(const char **)o->dst = v;
        return 0;
    case ATH_OPT_CUSTOM:
        return o->set(o->dst, v, err);
    case ATH_OPT_FLAG:
        break;
    }
    return 0;
}

int ath_opts_parse(int argc, char **argv, int first, const ath_opt_t *opts, size_t n_opts,
                   ath_err_t *err)
{
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return 1;
        if (strncmp(a, "--", 2) != 0)
            return ath_errf(err, "unexpected argument '%s' (see --help)", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const ath_opt_t *o = NULL;
        for (size_t k = 0; k < n_opts && !o; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, name, len) == 0)
                o = &opts[k];
        if (!o)
            return ath_errf(err, "unknown option '%s' (see --help)", a);
        if (o->kind == ATH_OPT_FLAG) {
            if (eq)
                return ath_errf(err, "--%s takes no value", o->name);
            *(int *)o->dst = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v)
            return ath_errf(err, "--%s needs a value (%s)", o->name, o->arg);
        char what[80];
        snprintf(what, sizeof what, "--%s", o->name);
        if (set_value(o, v, what, err) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Help                                                                      */

static void show_default(const ath_opt_t *o, char *buf, size_t n)
{
    buf[0] = '\0';
    if (o->default_text) {
        snprintf(buf, n, "%s", o->default_text);
        return;
    }
    if (!o->show_default)
        return;
    switch (o->kind) {
    case ATH_OPT_INT:
        snprintf(buf, n, "%d", *(const int *)o->dst);
        break;
    case ATH_OPT_U64:
        snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)o->dst);
        break;
    case ATH_OPT_FLOAT:
        snprintf(buf, n, "%g", (double)*(const float *)o->dst);
        break;
    case ATH_OPT_DOUBLE:
        snprintf(buf, n, "%g", *(const double *)o->dst);
        break;
    case ATH_OPT_STR:
        if (*(const char *const *)o->dst)
            snprintf(buf, n, "%s", *(const char *const *)o->dst);
        break;
    case ATH_OPT_CUSTOM:
        if (o->show)
            o->show(o->dst, buf, n);
        break;
    case ATH_OPT_FLAG:
        break;
    }
}

void ath_opts_help(FILE *f, const ath_opt_t *opts, size_t n_opts)
{
    for (size_t i = 0; i < n_opts; i++) {
        char left[64], def[160];
        snprintf(left, sizeof left, "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
                 opts[i].arg ? opts[i].arg : "");
        show_default(&opts[i], def, sizeof def);
        fprintf(f, "  %-24s %s%s%s%s\n", left, opts[i].help, def[0] ? " (default: " : "", def,
                def[0] ? ")" : "");
    }
}
