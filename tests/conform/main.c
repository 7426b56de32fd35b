/*
 * main.c — auxtrunk-conform, the parent process: options, check selection,
 * one forked child per check with a timeout, the text output and the TAP or
 * JSON report.
 *
 * The parent never loads the plugin and never touches CUDA: a plugin that
 * crashes, hangs or corrupts memory takes down only the child running one
 * check, which then fails with the reason ("killed by signal 11
 * (Segmentation fault) during init", "timed out after 60 s during forward").
 * Each child leads its own process group, and a timeout kills the group
 * (host_stub/supervise.c, the same supervised child as the host's vetting).
 *
 * Exit status: 0 every selected check passed or was skipped; 1 at least one
 * failed; 2 usage error (bad option, no plugin path, a plugin or reference
 * file that cannot be read, a seed that is not a number in [0, 2^64),
 * --only matching nothing, report file not writable).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conform.h"
#include "supervise.h"

/* The result of one check, as the parent saw it. */
typedef struct cf_result {
    const cf_check_t *check;
    int verdict;
    char reason[1200];
    char *notes; /* "\n"-separated, malloc'd, may be NULL */
    double seconds;
} cf_result_t;

/* ------------------------------------------------------------------------- */
/* Small helpers                                                             */

/* Ctrl-C in the parent: take the running check's process group down too. */
static void on_interrupt(int sig)
{
    if (ath_child_pgid > 0)
        kill(-(pid_t)ath_child_pgid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void append(char **dst, const char *line)
{
    size_t old = *dst ? strlen(*dst) : 0, add = strlen(line);
    char *p = realloc(*dst, old + add + 2);
    if (!p)
        return;
    if (old)
        p[old++] = '\n';
    memcpy(p + old, line, add + 1);
    *dst = p;
}

/* ------------------------------------------------------------------------- */
/* Running one check in a child                                              */

/* Applies the child's protocol lines (see conform.h) to r. */
static void parse_child_output(char *buf, cf_result_t *r, int *have_verdict, char *stage,
                               size_t stage_len)
{
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (line[0] == '@' && line[1] == ' ') {
            snprintf(stage, stage_len, "%s", line + 2);
        } else if (line[0] == 'N' && line[1] == ' ') {
            append(&r->notes, line + 2);
        } else if (line[0] == 'R' && line[1] == ' ' && line[2]) {
            r->verdict = line[2] == 'P' ? CF_PASS : line[2] == 'S' ? CF_SKIP : CF_FAIL;
            snprintf(r->reason, sizeof r->reason, "%s", line[3] == ' ' ? line + 4 : "");
            *have_verdict = 1;
        }
        line = nl ? nl + 1 : NULL;
    }
}

/* The child's side of run_check. */
typedef struct check_job {
    const cf_check_t *check;
    const cf_options_t *opt;
} check_job_t;

static void check_body(void *arg, int fd)
{
    const check_job_t *j = arg;
    cf_child_run(j->check, j->opt, fd);
}

static void run_check(const cf_check_t *c, const cf_options_t *opt, cf_result_t *r)
{
    memset(r, 0, sizeof *r);
    r->check = c;
    r->verdict = CF_FAIL;
    check_job_t job = {c, opt};
    ath_child_spec_t spec = {
        .body = check_body, .arg = &job, .timeout_s = opt->timeout_s, .max_output = 1u << 20};
    ath_child_t ch;
    ath_err_t err;
    if (ath_child_run(&spec, &ch, &err) != 0) {
        snprintf(r->reason, sizeof r->reason, "runner: %s", err.msg);
        return;
    }
    r->seconds = ch.seconds;
    int timed_out = ch.timed_out, status = ch.status;
    char *buf = ch.out;
    int have_verdict = 0;
    char stage[256] = "";
    parse_child_output(buf, r, &have_verdict, stage, sizeof stage);
    ath_child_free(&ch);
    char during[300] = "";
    if (stage[0])
        snprintf(during, sizeof during, " during %s", stage);
    if (timed_out) {
        r->verdict = CF_FAIL;
        snprintf(r->reason, sizeof r->reason, "timed out after %g s%s (process group killed)",
                 opt->timeout_s, during);
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        char prev[600];
        snprintf(prev, sizeof prev, "%.500s", have_verdict ? r->reason : "");
        r->verdict = CF_FAIL;
        snprintf(r->reason, sizeof r->reason, "killed by signal %d (%s)%s%s%.500s", sig,
                 strsignal(sig), have_verdict ? " after its verdict" : during,
                 prev[0] ? "; verdict was: " : "", prev);
    } else if (!have_verdict) {
        r->verdict = CF_FAIL;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code != 0)
            snprintf(r->reason, sizeof r->reason, "process exited with status %d%s", code, during);
        else
            snprintf(r->reason, sizeof r->reason, "process ended without a verdict%s", during);
    }
}

/* ------------------------------------------------------------------------- */
/* Reports                                                                   */

static const char *verdict_word(int v)
{
    return v == CF_PASS ? "PASS" : v == CF_SKIP ? "SKIP" : "FAIL";
}

static void print_result(const cf_result_t *r, int verbose)
{
    if (r->verdict == CF_PASS)
        printf("PASS %s%s%s%s\n", r->check->name, r->reason[0] ? " (" : "", r->reason,
               r->reason[0] ? ")" : "");
    else
        printf("%s %s: %s\n", verdict_word(r->verdict), r->check->name, r->reason);
    if (r->notes && (verbose || r->verdict == CF_FAIL)) {
        for (const char *p = r->notes; *p;) {
            const char *nl = strchr(p, '\n');
            int n = nl ? (int)(nl - p) : (int)strlen(p);
            printf("     %.*s\n", n, p);
            p = nl ? nl + 1 : p + n;
        }
    }
    fflush(stdout);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

typedef struct cf_probe {
    int ok;
    char impl[256], kernel[256], caps[256], abi[32];
} cf_probe_t;

static void write_json(FILE *f, const cf_options_t *opt, const cf_probe_t *pr,
                       const cf_result_t *res, size_t n, const int count[3])
{
    fputs("{\n  \"runner\": \"auxtrunk-conform\",\n  \"version\": \"" CONFORM_VERSION "\",\n", f);
    fputs("  \"plugin\": ", f);
    json_string(f, opt->plugin);
    fputs(",\n  \"reference\": ", f);
    if (opt->reference)
        json_string(f, opt->reference);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"seed\": %llu,\n  \"timeout_s\": %g,\n", (unsigned long long)opt->seed,
            opt->timeout_s);
    fputs("  \"impl_name\": ", f);
    json_string(f, pr->ok ? pr->impl : NULL);
    fputs(",\n  \"kernel_version\": ", f);
    json_string(f, pr->ok ? pr->kernel : NULL);
    fputs(",\n  \"abi_version\": ", f);
    json_string(f, pr->ok ? pr->abi : NULL);
    fputs(",\n  \"caps\": ", f);
    json_string(f, pr->ok ? pr->caps : NULL);
    fputs(",\n  \"checks\": [\n", f);
    for (size_t i = 0; i < n; i++) {
        fputs("    {\"name\": ", f);
        json_string(f, res[i].check->name);
        fprintf(f, ", \"result\": \"%s\", \"reason\": ",
                res[i].verdict == CF_PASS   ? "pass"
                : res[i].verdict == CF_SKIP ? "skip"
                                            : "fail");
        json_string(f, res[i].reason);
        fputs(", \"notes\": ", f);
        json_string(f, res[i].notes);
        fprintf(f, ", \"seconds\": %.3f}%s\n", res[i].seconds, i + 1 < n ? "," : "");
    }
    fprintf(f, "  ],\n  \"summary\": {\"pass\": %d, \"fail\": %d, \"skip\": %d, \"total\": %zu},\n",
            count[CF_PASS], count[CF_FAIL], count[CF_SKIP], n);
    fprintf(f, "  \"conforms\": %s\n}\n", count[CF_FAIL] ? "false" : "true");
}

/* TAP 13: reasons of failures in a YAML block, skips as directives. */
static void tap_text(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc(*s == '\n' || *s == '#' ? ' ' : *s, f);
}

static void write_tap(FILE *f, const cf_options_t *opt, const cf_probe_t *pr,
                      const cf_result_t *res, size_t n)
{
    fprintf(f, "TAP version 13\n1..%zu\n", n);
    fprintf(f, "# auxtrunk-conform %s: %s\n# seed %llu\n", CONFORM_VERSION, opt->plugin,
            (unsigned long long)opt->seed);
    if (pr->ok)
        fprintf(f, "# plugin %s, %s, ABI %s, caps %s\n", pr->impl, pr->kernel, pr->abi, pr->caps);
    for (size_t i = 0; i < n; i++) {
        const cf_result_t *r = &res[i];
        if (r->verdict == CF_SKIP) {
            fprintf(f, "ok %zu - %s # SKIP ", i + 1, r->check->name);
            tap_text(f, r->reason);
            fputc('\n', f);
        } else if (r->verdict == CF_PASS) {
            fprintf(f, "ok %zu - %s\n", i + 1, r->check->name);
        } else {
            fprintf(f, "not ok %zu - %s\n  ---\n  message: ", i + 1, r->check->name);
            json_string(f, r->reason); /* a JSON string is a valid YAML scalar */
            fprintf(f, "\n  seconds: %.3f\n  ...\n", r->seconds);
        }
    }
}

/* ------------------------------------------------------------------------- */
/* The probe: plugin identity for the header, read in a child                */

/* The child's side of probe_plugin: the identity as four lines. */
static void probe_body(void *arg, int fd)
{
    const cf_options_t *opt = arg;
    cf_plugin_t pl;
    char why[512];
    char msg[1024];
    if (cf_plugin_load(&pl, opt->plugin, why, sizeof why) == 0) {
        char caps[256];
        int n = snprintf(msg, sizeof msg, "%s\n%s\n%s\n%u.%u\n", pl.api.impl_name,
                         pl.api.kernel_version, cf_caps_text(pl.api.caps, caps, sizeof caps),
                         AUXTRUNK_VERSION_MAJOR_OF(pl.api.abi_version),
                         AUXTRUNK_VERSION_MINOR_OF(pl.api.abi_version));
        if (n > 0 && write(fd, msg, (size_t)n) < 0)
            _exit(1);
    }
}

static void probe_plugin(const cf_options_t *opt, cf_probe_t *pr)
{
    memset(pr, 0, sizeof *pr);
    ath_child_spec_t spec = {.body = probe_body,
                             .arg = (void *)opt,
                             .timeout_s = opt->timeout_s < 10 ? opt->timeout_s : 10,
                             .max_output = 1100};
    ath_child_t ch;
    ath_err_t err;
    if (ath_child_run(&spec, &ch, &err) != 0)
        return;
    char *buf = ch.out;
    char *f[4] = {0};
    char *save = NULL, *p = buf;
    for (int i = 0; i < 4; i++, p = NULL)
        f[i] = strtok_r(p, "\n", &save);
    if (!f[3]) {
        ath_child_free(&ch);
        return;
    }
    snprintf(pr->impl, sizeof pr->impl, "%s", f[0]);
    snprintf(pr->kernel, sizeof pr->kernel, "%s", f[1]);
    snprintf(pr->caps, sizeof pr->caps, "%s", f[2]);
    snprintf(pr->abi, sizeof pr->abi, "%s", f[3]);
    pr->ok = 1;
    ath_child_free(&ch);
}

/* ------------------------------------------------------------------------- */
/* Options                                                                   */

static void usage(FILE *f)
{
    fputs("usage: auxtrunk-conform [options] path/to/libauxtrunk.so\n"
          "\n"
          "Checks that a plugin honours the auxtrunk ABI (abi/auxtrunk.h). Every check\n"
          "runs in its own process with a timeout; one line per check: PASS, FAIL: reason\n"
          "or SKIP: reason. Exit status 0 if no check failed, 1 if one did, 2 on usage\n"
          "errors.\n"
          "\n"
          "options:\n"
          "  --list               list the checks and exit\n"
          "  --only PATTERN       run only matching checks: a name, a group (\"numerics\")\n"
          "                       or a glob (\"*.guard_zones\"); repeatable, or a comma list\n"
          "  --seed N             seed of the random inputs, 0 to 2^64-1 (default:\n"
          "                       $AUXTRUNK_SEED, else from the clock); always printed\n"
          "  --timeout SEC        per-check time limit (default 60)\n"
          "  --reference PATH     an exact plugin (the CPU one) for determinism.exact\n"
          "  --report FILE        also write a machine-readable report to FILE\n"
          "  --format tap|json    report format (default: json, tap for *.tap)\n"
          "  --verbose            print notes of passing checks too\n"
          "  --help               this text\n",
          f);
}

/* A seed: decimal or 0x hex digits only (strtoull would take "-1" as
 * 2^64 - 1). Returns 0, or -1 if s is not one. */
static int parse_seed(const char *s, uint64_t *seed)
{
    if (!s || !((s[0] >= '0' && s[0] <= '9')))
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || !end || *end)
        return -1;
    *seed = (uint64_t)v;
    return 0;
}

static int matches(const char *pattern, const char *name)
{
    if (fnmatch(pattern, name, 0) == 0)
        return 1;
    const char *dot = strchr(name, '.');
    if (dot) {
        char group[64];
        snprintf(group, sizeof group, "%.*s", (int)(dot - name), name);
        if (fnmatch(pattern, group, 0) == 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    cf_options_t opt = {0};
    opt.timeout_s = 60;
    const char *report = NULL, *format = NULL;
    char *only[64];
    int n_only = 0, list = 0, verbose = 0, have_seed = 0;
    enum { O_LIST = 1, O_ONLY, O_SEED, O_TIMEOUT, O_REF, O_REPORT, O_FORMAT, O_VERBOSE, O_HELP };
    static const struct option longopts[] = {
        {"list", no_argument, 0, O_LIST},           {"only", required_argument, 0, O_ONLY},
        {"seed", required_argument, 0, O_SEED},     {"timeout", required_argument, 0, O_TIMEOUT},
        {"reference", required_argument, 0, O_REF}, {"report", required_argument, 0, O_REPORT},
        {"format", required_argument, 0, O_FORMAT}, {"verbose", no_argument, 0, O_VERBOSE},
        {"help", no_argument, 0, O_HELP},           {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end = NULL;
        switch (o) {
        case O_LIST:
            list = 1;
            break;
        case O_ONLY: {
            char *save = NULL;
            for (char *t = strtok_r(optarg, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (n_only < 64)
                    only[n_only++] = t;
            break;
        }
        case O_SEED:
            if (parse_seed(optarg, &opt.seed) != 0) {
                fprintf(stderr, "auxtrunk-conform: --seed: not a number in [0, 2^64): %s\n",
                        optarg);
                return 2;
            }
            have_seed = 1;
            break;
        case O_TIMEOUT:
            opt.timeout_s = strtod(optarg, &end);
            if (!end || *end || !(opt.timeout_s > 0)) {
                fprintf(stderr, "auxtrunk-conform: --timeout: not a positive number: %s\n", optarg);
                return 2;
            }
            break;
        case O_REF:
            opt.reference = optarg;
            break;
        case O_REPORT:
            report = optarg;
            break;
        case O_FORMAT:
            format = optarg;
            break;
        case O_VERBOSE:
            verbose = 1;
            break;
        case 'h':
        case O_HELP:
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (format && strcmp(format, "tap") != 0 && strcmp(format, "json") != 0) {
        fprintf(stderr, "auxtrunk-conform: --format must be tap or json\n");
        return 2;
    }
    if (!format)
        format = report && strlen(report) > 4 && strcmp(report + strlen(report) - 4, ".tap") == 0
                     ? "tap"
                     : "json";

    /* Selection. */
    const cf_check_t **sel = calloc(cf_check_count, sizeof *sel);
    if (!sel) {
        fprintf(stderr, "auxtrunk-conform: out of memory\n");
        return 2;
    }
    size_t n_sel = 0;
    for (int k = 0; k < n_only; k++) {
        int hit = 0;
        for (size_t i = 0; i < cf_check_count; i++)
            hit |= matches(only[k], cf_checks[i].name);
        if (!hit) {
            fprintf(stderr, "auxtrunk-conform: --only %s matches no check (see --list)\n", only[k]);
            free(sel);
            return 2;
        }
    }
    for (size_t i = 0; i < cf_check_count; i++) {
        int take = n_only == 0;
        for (int k = 0; k < n_only && !take; k++)
            take = matches(only[k], cf_checks[i].name);
        if (take)
            sel[n_sel++] = &cf_checks[i];
    }
    if (list) {
        for (size_t i = 0; i < n_sel; i++)
            printf("%-28s %s\n", sel[i]->name, sel[i]->summary);
        free(sel);
        return 0;
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "auxtrunk-conform: expected exactly one plugin path\n");
        usage(stderr);
        free(sel);
        return 2;
    }
    opt.plugin = argv[optind];
    /* A path that cannot be read is a usage error, not 41 failed checks. */
    const char *paths[2] = {opt.plugin, opt.reference};
    for (int i = 0; i < 2; i++)
        if (paths[i] && access(paths[i], R_OK) != 0) {
            fprintf(stderr, "auxtrunk-conform: cannot read %s%s: %s\n",
                    i ? "the reference plugin " : "", paths[i], strerror(errno));
            free(sel);
            return 2;
        }

    if (!have_seed) {
        const char *env = getenv("AUXTRUNK_SEED");
        if (env && *env) {
            if (parse_seed(env, &opt.seed) != 0) {
                fprintf(stderr, "auxtrunk-conform: AUXTRUNK_SEED: not a number in [0, 2^64): %s\n",
                        env);
                free(sel);
                return 2;
            }
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            opt.seed = ((uint64_t)ts.tv_sec * UINT64_C(1000000007)) ^ (uint64_t)ts.tv_nsec;
        }
    }

    FILE *rep = NULL;
    if (report) {
        rep = fopen(report, "w");
        if (!rep) {
            fprintf(stderr, "auxtrunk-conform: cannot write %s: %s\n", report, strerror(errno));
            free(sel);
            return 2;
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    printf("auxtrunk-conform %s: %s\n", CONFORM_VERSION, opt.plugin);
    if (opt.reference)
        printf("reference: %s\n", opt.reference);
    printf("seed: %llu (reproduce with --seed %llu)\n", (unsigned long long)opt.seed,
           (unsigned long long)opt.seed);
    cf_probe_t pr;
    probe_plugin(&opt, &pr);
    if (pr.ok)
        printf("plugin: %s, \"%s\", ABI %s, caps %s\n", pr.impl, pr.kernel, pr.abi, pr.caps);
    else
        printf("plugin: could not be loaded and negotiated (see load.*)\n");
    fflush(stdout);

    cf_result_t *res = calloc(n_sel ? n_sel : 1, sizeof *res);
    int count[3] = {0, 0, 0};
    for (size_t i = 0; i < n_sel; i++) {
        run_check(sel[i], &opt, &res[i]);
        count[res[i].verdict]++;
        print_result(&res[i], verbose);
    }
    printf("summary: %d passed, %d failed, %d skipped of %zu checks: %s\n", count[CF_PASS],
           count[CF_FAIL], count[CF_SKIP], n_sel, count[CF_FAIL] ? "DOES NOT CONFORM" : "conforms");

    int rc = count[CF_FAIL] ? 1 : 0;
    if (rep) {
        if (strcmp(format, "tap") == 0)
            write_tap(rep, &opt, &pr, res, n_sel);
        else
            write_json(rep, &opt, &pr, res, n_sel, count);
        if (fclose(rep) != 0) {
            fprintf(stderr, "auxtrunk-conform: writing %s failed\n", report);
            rc = 2;
        }
    }
    for (size_t i = 0; i < n_sel; i++)
        free(res[i].notes);
    free(res);
    free(sel);
    return rc;
}
