/*
 * fuzz_options.c — libFuzzer harness for the command-line parser
 * (host_stub/options.c: ath_opts_parse and the strict number readers) and
 * the --swap-at STEP:PATH reader (ath_swap_parse_at).
 *
 * Input: the arguments after the program name, separated by NUL bytes (at
 * most MAX_ARGS; each is its own allocation, so reading past its end is a
 * sanitizer report). They are parsed against a table with every option kind
 * and the ranges auxtrunk-host uses (host_stub/main.c): flags, bounded and
 * unbounded int and uint64, a float with a positive lower bound, doubles,
 * strings, and a custom kind.
 *
 * Invariants, besides no sanitizer report, crash or hang:
 *   - a refusal comes with a message;
 *   - every accepted number lies in its option's range;
 *   - parse -> print -> parse is a fixpoint: the accepted values, printed
 *     back as "--name=value" (integers in decimal, floats and doubles with
 *     enough digits to round-trip), parse again to the same bits.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auxtrunk.h"
#include "fuzz_common.h"
#include "options.h"
#include "swap.h"

#define MAX_ARGS 32

typedef struct values {
    int quiet, watch;
    int batch, device, any_int;
    uint64_t steps, every, rotate;
    float lr;
    double timeout, budget;
    const char *csv;
    ath_swap_at_t at;
    int have_at;
} values_t;

static int set_at(void *dst, const char *value, ath_err_t *err)
{
    values_t *v = dst;
    if (ath_swap_parse_at(value, &v->at, err) != 0)
        return -1;
    v->have_at = 1;
    return 0;
}

static void show_at(const void *dst, char *buf, size_t n)
{
    const values_t *v = dst;
    snprintf(buf, n, "%s", v->have_at ? "set" : "none");
}

#define NUM(V, name, kind, field, lo, hi)                              \
    {                                                                  \
        name, "X", kind, &(V)->field, "h", lo, hi, 1, NULL, NULL, NULL \
    }
#define PLAIN(V, name, arg, kind, field)                             \
    {                                                                \
        name, arg, kind, &(V)->field, "h", 0, 0, 0, NULL, NULL, NULL \
    }

/* The table over the values at V. */
#define TABLE(V)                                                                                \
    {                                                                                           \
        PLAIN(V, "quiet", NULL, ATH_OPT_FLAG, quiet),                                           \
            PLAIN(V, "watch-plugin-dir", NULL, ATH_OPT_FLAG, watch),                            \
            NUM(V, "batch", ATH_OPT_INT, batch, 1, AUXTRUNK_MAX_BATCH),                         \
            NUM(V, "device", ATH_OPT_INT, device, 0, 1023),                                     \
            NUM(V, "any-int", ATH_OPT_INT, any_int, 0, 0),                                      \
            NUM(V, "steps", ATH_OPT_U64, steps, 0, 0x1p64),                                     \
            NUM(V, "checkpoint-every", ATH_OPT_U64, every, 1, 0x1p64),                          \
            NUM(V, "rotate-mib", ATH_OPT_U64, rotate, 0, 1 << 20),                              \
            NUM(V, "lr", ATH_OPT_FLOAT, lr, FLT_MIN, 1e30),                                     \
            NUM(V, "swap-timeout", ATH_OPT_DOUBLE, timeout, 0.001, 86400),                      \
            NUM(V, "budget", ATH_OPT_DOUBLE, budget, 0, 86400),                                 \
            PLAIN(V, "csv", "FILE", ATH_OPT_STR, csv),                                          \
            {"swap-at", "STEP:PATH", ATH_OPT_CUSTOM, (V), "h", 0, 0, 1, NULL, set_at, show_at}, \
    }

static void defaults(values_t *v)
{
    memset(v, 0, sizeof *v);
    v->batch = 64;
    v->steps = 2000;
    v->every = 1;
    v->rotate = 128;
    v->lr = 1e-3f;
    v->timeout = 30.0;
    v->budget = 5.0;
}

static int parse(values_t *v, int argc, char **argv, ath_err_t *err)
{
    defaults(v);
    const ath_opt_t opts[] = TABLE(v);
    return ath_opts_parse(argc, argv, 1, opts, sizeof opts / sizeof opts[0], err);
}

static void check_ranges(const values_t *v)
{
    fz_check(v->batch >= 1 && v->batch <= AUXTRUNK_MAX_BATCH, "--batch %d accepted", v->batch);
    fz_check(v->device >= 0 && v->device <= 1023, "--device %d accepted", v->device);
    fz_check(v->every >= 1, "--checkpoint-every 0 accepted");
    fz_check(v->rotate <= (1u << 20), "--rotate-mib %llu accepted", (unsigned long long)v->rotate);
    fz_check(v->lr >= FLT_MIN && v->lr <= 1e30f, "--lr %.9g accepted", (double)v->lr);
    fz_check(v->timeout >= 0.001 && v->timeout <= 86400, "--swap-timeout %.17g accepted",
             v->timeout);
    fz_check(v->budget >= 0 && v->budget <= 86400, "--budget %.17g accepted", v->budget);
}

/* The values as arguments again; strings are malloc'd into out[]. */
static int print(const values_t *v, char **out)
{
    int n = 0;
    char buf[8192];
#define ARG(...) (snprintf(buf, sizeof buf, __VA_ARGS__), out[n++] = strdup(buf))
    out[n++] = strdup("auxtrunk-host");
    if (v->quiet)
        ARG("--quiet");
    if (v->watch)
        ARG("--watch-plugin-dir");
    ARG("--batch=%d", v->batch);
    ARG("--device=%d", v->device);
    ARG("--any-int=%d", v->any_int);
    ARG("--steps=%llu", (unsigned long long)v->steps);
    ARG("--checkpoint-every=%llu", (unsigned long long)v->every);
    ARG("--rotate-mib=%llu", (unsigned long long)v->rotate);
    ARG("--lr=%.9g", (double)v->lr);
    ARG("--swap-timeout=%.17g", v->timeout);
    ARG("--budget=%.17g", v->budget);
    if (v->csv)
        ARG("--csv=%s", v->csv);
    if (v->have_at)
        ARG("--swap-at=%llu:%s", (unsigned long long)v->at.step, v->at.path);
#undef ARG
    return n;
}

static void check_same(const values_t *a, const values_t *b, char **printed, int n)
{
    char line[4096] = "";
    for (int i = 1; i < n && strlen(line) < sizeof line - 200; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), " %.160s", printed[i]);
#define SAME(cond, what) fz_check(cond, "parse -> print -> parse changed %s:%s", what, line)
    SAME(a->quiet == b->quiet && a->watch == b->watch, "a flag");
    SAME(a->batch == b->batch && a->device == b->device && a->any_int == b->any_int, "an int");
    SAME(a->steps == b->steps && a->every == b->every && a->rotate == b->rotate, "a uint64");
    SAME(memcmp(&a->lr, &b->lr, sizeof a->lr) == 0, "--lr");
    SAME(memcmp(&a->timeout, &b->timeout, sizeof a->timeout) == 0 &&
             memcmp(&a->budget, &b->budget, sizeof a->budget) == 0,
         "a double");
    SAME((a->csv == NULL) == (b->csv == NULL) && (!a->csv || strcmp(a->csv, b->csv) == 0), "--csv");
    SAME(a->have_at == b->have_at &&
             (!a->have_at || (a->at.step == b->at.step && strcmp(a->at.path, b->at.path) == 0)),
         "--swap-at");
#undef SAME
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* --help text from the same table: once, for its own sanitizer coverage. */
    values_t v;
    defaults(&v);
    const ath_opt_t opts[] = TABLE(&v);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        ath_opts_help(null, opts, sizeof opts / sizeof opts[0]);
        fclose(null);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = strdup("auxtrunk-host");
    for (size_t at = 0; at < size && argc < MAX_ARGS;) {
        const uint8_t *nul = memchr(data + at, 0, size - at);
        size_t n = nul ? (size_t)(nul - (data + at)) : size - at;
        char *a = malloc(n + 1);
        memcpy(a, data + at, n);
        a[n] = '\0';
        argv[argc++] = a;
        at += n + 1;
    }
    argv[argc] = NULL;

    values_t first;
    ath_err_t err;
    err.msg[0] = '\0';
    int rc = parse(&first, argc, argv, &err);
    fz_check(rc == 0 || rc == 1 || rc == -1, "ath_opts_parse returned %d", rc);
    if (rc == -1)
        fz_check(err.msg[0] != '\0', "a refused command line gave no message");
    if (rc == 0) {
        check_ranges(&first);
        char *printed[MAX_ARGS + 1];
        int n = print(&first, printed);
        printed[n] = NULL;
        values_t second;
        int rc2 = parse(&second, n, printed, &err);
        fz_check(rc2 == 0, "the printed values were refused: %s", err.msg);
        check_same(&first, &second, printed, n);
        for (int i = 0; i < n; i++)
            free(printed[i]);
    }
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return 0;
}
