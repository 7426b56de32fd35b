/*
 * options.h — the command-line parser of auxtrunk-host: option tables, strict
 * numbers with ranges, and --help generated from the same tables (defaults
 * included, read from the destinations before parsing), so the help text, the
 * parser and the defaults cannot drift apart.
 *
 * Numbers are decimal and strict: no leading space, no '+', no leading zero
 * ("010" and "08" are refused, not read as octal), no hex; a value outside
 * the option's range is refused, never clamped or replaced by a default.
 * Reals are finite and written as digits ("1e-3", "0.5"), never "nan" or
 * "inf". The parser prints nothing: it returns a status and a message.
 */
#ifndef ATH_OPTIONS_H
#define ATH_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

typedef enum ath_opt_kind {
    ATH_OPT_FLAG,   /* int, set to 1; takes no value */
    ATH_OPT_INT,    /* int in [min, max] */
    ATH_OPT_U64,    /* uint64_t in [min, max] */
    ATH_OPT_FLOAT,  /* float in [(float)min, (float)max], checked on the stored float */
    ATH_OPT_DOUBLE, /* double in [min, max] */
    ATH_OPT_STR,    /* const char *, pointing into argv */
    ATH_OPT_CUSTOM, /* set(dst, value) parses; show(dst) prints the default */
} ath_opt_kind_t;

typedef struct ath_opt {
    const char *name; /* without the leading "--" */
    const char *arg;  /* metavariable, NULL for a flag */
    ath_opt_kind_t kind;
    void *dst;
    const char *help;
    double min, max;          /* numeric kinds: the accepted range, inclusive */
    int show_default;         /* --help prints "(default <value of *dst>)" */
    const char *default_text; /* --help prints "(default <this>)" instead */
    /* ATH_OPT_CUSTOM: parse value into dst (0, or -1 with a message); print
     * the default into buf. */
    int (*set)(void *dst, const char *value, ath_err_t *err);
    void (*show)(const void *dst, char *buf, size_t n);
} ath_opt_t;

/* Parses argv[first..] against opts, for the command named cmd (in
 * messages). Returns 0, 1 when --help or -h was given, or -1 with the
 * message in err. */
int ath_opts_parse(int argc, char **argv, int first, const ath_opt_t *opts, size_t n_opts,
                   ath_err_t *err);

/* Writes "  --name ARG   help (default D)" lines for opts to f. Call it
 * before parsing (or on untouched destinations): defaults are read from dst. */
void ath_opts_help(FILE *f, const ath_opt_t *opts, size_t n_opts);

/* The strict number readers behind the table (also used for "STEP:PATH"):
 * text must be entirely a number in [min, max]. Return 0, or -1 with a
 * message naming what (e.g. "--steps"). */
int ath_parse_u64(const char *text, uint64_t min, uint64_t max, const char *what, uint64_t *v,
                  ath_err_t *err);
int ath_parse_i64(const char *text, int64_t min, int64_t max, const char *what, int64_t *v,
                  ath_err_t *err);
int ath_parse_real(const char *text, double min, double max, const char *what, double *v,
                   ath_err_t *err);

#endif
