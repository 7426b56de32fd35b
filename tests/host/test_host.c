/*
 * test_host.c — Check tests of auxtrunk-host: the command line, the loader's
 * refusals (with the fixtures in fixtures/), training the default task to a
 * 100x lower loss, bit-exact resume, refusal of bad checkpoints, the CSV and
 * SVG reports, and the benchmark mode.
 *
 * Most tests run the real program as a subprocess (what a user runs); the
 * loader, checkpoint and report code are also called directly where a
 * property is easier to pin there (nothing written on refusal, nothing left
 * mapped after a refusal). Fork mode: every test in its own process, CUDA
 * only ever touched inside a test. CPU only.
 *
 * Suites (CK_RUN_SUITE selects one): cli, loader, train, checkpoint, files
 * (what a run reads and writes: issue 16's failures 2, 3, 5, 6, 7), report,
 * bench.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "checkpoint.h"
#include "devmem.h"
#include "loader.h"
#include "options.h"
#include "report.h"
#include "rng.h"
#include "scratch.h"
#include "swap.h"
#include "train.h"

extern char **environ;

/* ------------------------------------------------------------------------- */
/* Scratch directory, files, subprocesses                                    */

/* Output of the last run_host. */
static char *g_out, *g_err;

/* Runs auxtrunk-host with the NULL-terminated arguments, stdout and stderr
 * into <scratch>/<tag>.out/.err (also loaded into g_out, g_err). Returns the
 * exit code, or -1 if it died by a signal. */
static int run_host(const char *tag, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)AUXTRUNK_HOST_EXE;
    va_list ap;
    va_start(ap, tag);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        ck_assert(argc < 63);
        argv[argc++] = (char *)a;
    }
    va_end(ap);
    argv[argc] = NULL;

    int rc = tst_wait(tst_spawn(AUXTRUNK_HOST_EXE, argv, tag), 900.0, tag, &g_out, &g_err);
    return rc >= 128 ? -1 : rc;
}

#define ck_assert_contains(hay, needle) \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (hay))

/* ------------------------------------------------------------------------- */
/* CSV and a minimal XML well-formedness check                               */

typedef struct csv_data {
    int n;
    uint64_t step[20000];
    double loss[20000];
} csv_data_t;

/* Parses a loss CSV strictly: header "step,loss", then "<uint>,<float>" lines. */
static csv_data_t *read_loss_csv(const char *path)
{
    csv_data_t *c = calloc(1, sizeof *c);
    char *text = tst_slurp(path, NULL);
    ck_assert_msg(strncmp(text, "step,loss\n", 10) == 0, "%s: bad header", path);
    char *save = NULL;
    for (char *line = strtok_r(text + 10, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        ck_assert(c->n < 20000);
        char *end;
        c->step[c->n] = strtoull(line, &end, 10);
        ck_assert_msg(*end == ',', "%s: bad line '%s'", path, line);
        c->loss[c->n] = strtod(end + 1, &end);
        ck_assert_msg(*end == '\0', "%s: bad line '%s'", path, line);
        ck_assert_msg(isfinite(c->loss[c->n]) && c->loss[c->n] >= 0, "%s: bad loss '%s'", path,
                      line);
        c->n++;
    }
    free(text);
    return c;
}

static const char *xml_name(const char *p, char *name, size_t n)
{
    size_t k = 0;
    while (*p && (isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == ':' || *p == '.')) {
        if (k + 1 < n)
            name[k++] = *p;
        p++;
    }
    name[k] = '\0';
    return p;
}

/* Text or attribute value: no raw '<', every '&' starts a known entity. */
static int xml_text_ok(const char *a, const char *b)
{
    for (const char *p = a; p < b; p++) {
        if (*p == '<')
            return 0;
        if (*p == '&') {
            const char *ents[] = {"&lt;", "&gt;", "&amp;", "&quot;", "&apos;"};
            int ok = 0;
            for (int i = 0; i < 5; i++)
                ok |= strncmp(p, ents[i], strlen(ents[i])) == 0;
            if (!ok)
                return 0;
        }
    }
    return 1;
}

/* Returns NULL if doc is well-formed XML with one root element named root,
 * else a reason. Covers what our SVG uses: prolog, elements, attributes in
 * double quotes, text, comments. */
static const char *xml_check(const char *doc, const char *root)
{
    char stack[64][64];
    int depth = 0, roots = 0;
    const char *p = doc;
    if (strncmp(p, "<?xml", 5) == 0) {
        p = strstr(p, "?>");
        if (!p)
            return "unterminated prolog";
        p += 2;
    }
    while (*p) {
        const char *lt = strchr(p, '<');
        const char *text_end = lt ? lt : p + strlen(p);
        if (!xml_text_ok(p, text_end))
            return "bad character data";
        if (depth == 0)
            for (const char *q = p; q < text_end; q++)
                if (!isspace((unsigned char)*q))
                    return "text outside the root element";
        if (!lt)
            break;
        p = lt + 1;
        if (strncmp(p, "!--", 3) == 0) {
            p = strstr(p, "-->");
            if (!p)
                return "unterminated comment";
            p += 3;
            continue;
        }
        char name[64];
        if (*p == '/') {
            p = xml_name(p + 1, name, sizeof name);
            while (isspace((unsigned char)*p))
                p++;
            if (*p != '>')
                return "bad end tag";
            if (depth == 0 || strcmp(stack[depth - 1], name) != 0)
                return "mismatched end tag";
            depth--;
            p++;
            continue;
        }
        p = xml_name(p, name, sizeof name);
        if (!name[0])
            return "bad tag name";
        if (depth == 0) {
            if (++roots > 1)
                return "more than one root element";
            if (strcmp(name, root) != 0)
                return "wrong root element";
        }
        for (;;) {
            while (isspace((unsigned char)*p))
                p++;
            if (*p == '>' || (p[0] == '/' && p[1] == '>'))
                break;
            char attr[64];
            p = xml_name(p, attr, sizeof attr);
            if (!attr[0] || *p != '=' || p[1] != '"')
                return "bad attribute";
            const char *v = p + 2, *q = strchr(v, '"');
            if (!q || !xml_text_ok(v, q))
                return "bad attribute value";
            p = q + 1;
        }
        if (*p == '/') {
            p += 2;
        } else {
            if (depth == 64)
                return "too deep";
            snprintf(stack[depth++], sizeof stack[0], "%s", name);
            p++;
        }
    }
    if (depth != 0)
        return "unclosed element";
    if (roots != 1)
        return "no root element";
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* cli                                                                       */

/* Every option a --help text lists ("  --name ...") appears in docs/host.md
 * as `--name` or `--name ARG`, so the reference cannot fall behind the
 * option tables. */
static void assert_help_documented(const char *help, const char *doc)
{
    for (const char *l = strstr(help, "\n  --"); l; l = strstr(l + 1, "\n  --")) {
        const char *name = l + 3;
        size_t n = strcspn(name, " \n");
        if (n == 6 && strncmp(name, "--help", 6) == 0)
            continue;
        char a[96], b[96];
        snprintf(a, sizeof a, "`%.*s`", (int)n, name);
        snprintf(b, sizeof b, "`%.*s ", (int)n, name);
        ck_assert_msg(strstr(doc, a) || strstr(doc, b), "%.*s is not documented in %s", (int)n,
                      name, AUXTRUNK_HOST_DOC);
    }
}

START_TEST(test_help)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    ck_assert_int_eq(run_host("top", "--help", NULL), 0);
    ck_assert_contains(g_out, "Usage: auxtrunk-host");
    ck_assert_contains(g_out, "bench");
    ck_assert_contains(g_out, "Exit codes");

    ck_assert_int_eq(run_host("train", "train", "--help", NULL), 0);
    const char *train_opts[] = {"--plugin-dir", "--plugin ",
                                "--steps",      "--batch",
                                "--seed",       "--lr",
                                "--enc",        "--h1",
                                "--h2",         "--aux",
                                "--csv",        "--svg",
                                "--checkpoint", "--checkpoint-every",
                                "--resume",     "--quiet",
                                "Exit codes"};
    for (size_t i = 0; i < sizeof train_opts / sizeof train_opts[0]; i++)
        ck_assert_contains(g_out, train_opts[i]);

    ck_assert_int_eq(run_host("bench", "bench", "--help", NULL), 0);
    const char *bench_opts[] = {"--plugin-dir", "--batches", "--iters",
                                "--warmup",     "--csv",     "2*B*(ENC*H1 + H1*H2 + H2*AUX)",
                                "Exit codes"};
    for (size_t i = 0; i < sizeof bench_opts / sizeof bench_opts[0]; i++)
        ck_assert_contains(g_out, bench_opts[i]);

    char *doc = tst_slurp(AUXTRUNK_HOST_DOC, NULL);
    assert_help_documented(g_out, doc);
    ck_assert_int_eq(run_host("train", "train", "--help", NULL), 0);
    assert_help_documented(g_out, doc);
    free(doc);

    ck_assert_int_eq(run_host("version", "--version", NULL), 0);
    ck_assert_contains(g_out, "auxtrunk-host");
    tst_scratch_done();
}
END_TEST

START_TEST(test_usage_errors)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    ck_assert_int_eq(run_host("u1", "--no-such-option", NULL), 2);
    ck_assert_contains(g_err, "unknown option");
    ck_assert_int_eq(run_host("u2", "--steps", "many", NULL), 2);
    ck_assert_contains(g_err, "bad value");
    ck_assert_int_eq(run_host("u3", "--batch", "0", NULL), 2);
    ck_assert_int_eq(run_host("u4", "--steps", NULL), 2);
    ck_assert_contains(g_err, "needs a value");
    ck_assert_int_eq(run_host("u5", "frobnicate", NULL), 2);
    ck_assert_contains(g_err, "unknown command");
    ck_assert_int_eq(run_host("u6", "bench", "--batches", "32,,x", NULL), 2);
    ck_assert_int_eq(run_host("u7", "--enc", "0", NULL), 2);
    ck_assert_int_eq(run_host("u8", "--plugin-dir", ".", "--plugin", "cpu", NULL), 2);
    ck_assert_int_eq(run_host("u9", "--swap-at", "5", NULL), 2);
    ck_assert_contains(g_err, "STEP:PATH");
    ck_assert_int_eq(run_host("u10", "--swap-at", "5:a", "--swap-at", "3:b", NULL), 2);
    ck_assert_contains(g_err, "ascending");
    tst_scratch_done();
}
END_TEST

/* Numbers are strict decimals with ranges: base-0 parsing read "010" as 8
 * and refused "08", a leading space let " -1" wrap to 2^64-1, --lr 1e-50
 * became 0, --swap-timeout -1/0/nan fell back to 30 and inf disabled it,
 * --rollback-steps 0 became 50. Each is now a usage error that names the
 * option. */
START_TEST(test_strict_numbers)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    static const struct {
        const char *opt, *value, *says;
    } bad[] = {
        {"--steps", "010", "decimal"},
        {"--steps", "08", "decimal"},
        {"--seed", " -1", "decimal"},
        {"--steps", "-1", "decimal"},
        {"--steps", "+5", "decimal"},
        {"--steps", "0x10", "decimal"},
        {"--steps", "18446744073709551616", "outside"},
        {"--batch", "0", "outside"},
        {"--batch", " 64", "decimal"},
        {"--lr", "1e-50", "outside"},
        {"--lr", "0", "outside"},
        {"--lr", "nan", "finite"},
        {"--lr", "inf", "finite"},
        {"--swap-timeout", "-1", "outside"},
        {"--swap-timeout", "0", "outside"},
        {"--swap-timeout", "nan", "finite"},
        {"--swap-timeout", "inf", "finite"},
        {"--rollback-steps", "0", "outside"},
        {"--swap-poll-ms", "0", "outside"},
        {"--checkpoint-every", "0", "outside"},
        {"--log-every", "0", "outside"},
        {"--enc", "99999", "outside"},
        {"--device", "-1", "outside"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "strict%zu", i);
        ck_assert_msg(run_host(tag, bad[i].opt, bad[i].value, NULL) == 2, "%s '%s' was accepted",
                      bad[i].opt, bad[i].value);
        ck_assert_contains(g_err, bad[i].opt);
        ck_assert_contains(g_err, bad[i].says);
    }
    ck_assert_int_eq(run_host("b1", "bench", "--batches", "032", NULL), 2);
    ck_assert_contains(g_err, "decimal");

    /* The readers themselves, as the fuzzers call them. */
    uint64_t u = 7;
    int64_t i = 7;
    double d = 7;
    ath_err_t err;
    ck_assert_int_eq(ath_parse_u64("0", 0, 10, "x", &u, &err), 0);
    ck_assert_uint_eq(u, 0);
    ck_assert_int_eq(ath_parse_u64("18446744073709551615", 0, UINT64_MAX, "x", &u, &err), 0);
    ck_assert(u == UINT64_MAX);
    ck_assert_int_eq(ath_parse_u64("11", 0, 10, "x", &u, &err), -1);
    ck_assert_int_eq(ath_parse_u64("", 0, 10, "x", &u, &err), -1);
    ck_assert_int_eq(ath_parse_i64("-3", -5, 5, "x", &i, &err), 0);
    ck_assert_int_eq(i, -3);
    ck_assert_int_eq(ath_parse_i64("-0", -5, 5, "x", &i, &err), -1);
    ck_assert_int_eq(ath_parse_i64("-", -5, 5, "x", &i, &err), -1);
    ck_assert_int_eq(ath_parse_real("1e-3", 0, 1, "x", &d, &err), 0);
    ck_assert(d == 1e-3);
    ck_assert_int_eq(ath_parse_real(".5", 0, 1, "x", &d, &err), 0);
    ck_assert_int_eq(ath_parse_real("1e", 0, 1, "x", &d, &err), -1);
    ck_assert_int_eq(ath_parse_real("1e999", 0, INFINITY, "x", &d, &err), -1);
    ck_assert_int_eq(ath_parse_real("0x1p3", 0, 100, "x", &d, &err), -1);
    tst_scratch_done();
}
END_TEST

/* --help prints each default from the option table (the value the parser
 * starts from), so it names the constants the program uses. */
START_TEST(test_help_defaults_from_tables)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    ck_assert_int_eq(run_host("train", "train", "--help", NULL), 0);
    char want[128];
    snprintf(want, sizeof want,
             "--steps N                train until step N (a resumed run "
             "continues to N) (default: %d)",
             ATH_TRAIN_STEPS);
    ck_assert_contains(g_out, want);
    snprintf(want, sizeof want, "(default: %d)\n  --seed", ATH_TRAIN_BATCH);
    ck_assert_contains(g_out, want);
    snprintf(want, sizeof want, "vetting a candidate (default: %g)", ATH_VET_TIMEOUT_S);
    ck_assert_contains(g_out, want);
    snprintf(want, sizeof want, "roll back (default: %d)", ATH_SWAP_ROLLBACK_STEPS);
    ck_assert_contains(g_out, want);
    snprintf(want, sizeof want, "learning rate (default: %g)", (double)ATH_TRAIN_LR);
    ck_assert_contains(g_out, want);
    ck_assert_int_eq(run_host("bench", "bench", "--help", NULL), 0);
    ck_assert_contains(g_out, "comma-separated (default: 32,256,1024,4096,65536)");
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* loader                                                                    */

/* True if path (resolved) is mapped into this process. */
static int is_mapped(const char *path)
{
    char real[4096];
    if (!realpath(path, real))
        return 0;
    char *maps = tst_slurp("/proc/self/maps", NULL);
    int found = strstr(maps, real) != NULL;
    free(maps);
    return found;
}

typedef struct refusal {
    const char *what;
    const char *dir; /* fixture dir, or a scratch name prepared by the test */
    ath_load_status_t status;
    const char *text;
} refusal_t;

static const refusal_t refusals[] = {
    {"missing directory", "@missing", ATH_LOAD_NO_FILE, "does not exist"},
    {"directory without plugin", "@empty", ATH_LOAD_NO_FILE, "libauxtrunk.so does not exist"},
    {"not ELF", "@notelf", ATH_LOAD_NOT_LOADABLE, "not an ELF file"},
    {"truncated ELF", "@truncated", ATH_LOAD_NOT_LOADABLE, "truncated"},
    {"group-writable file", "@groupw", ATH_LOAD_PERMISSIONS, "writable by its group"},
    {"no entry symbol", FX_DIR "/no_export", ATH_LOAD_NO_ENTRY, "auxtrunk_plugin_entry"},
    {"ABI too new", FX_DIR "/abi_new", ATH_LOAD_ABI, "incompatible ABI"},
    {"ABI too old", FX_DIR "/abi_old", ATH_LOAD_ABI, "incompatible ABI"},
    {"ABI answer outside range", FX_DIR "/abi_lies", ATH_LOAD_ABI, "answered version 2.0"},
    {"NULL entry", FX_DIR "/null_entry", ATH_LOAD_BAD_TABLE, "forward is NULL"},
    {"two memory spaces", FX_DIR "/two_spaces", ATH_LOAD_BAD_TABLE, "name two memory space"},
    {"no memory space", FX_DIR "/no_space", ATH_LOAD_BAD_TABLE, "name no memory space"},
    {"short table", FX_DIR "/short_table", ATH_LOAD_BAD_TABLE, "struct_size 64"},
};

/* Builds the scratch-made cases; returns the directory to load. */
static const char *refusal_dir(const refusal_t *r)
{
    if (r->dir[0] != '@')
        return r->dir;
    if (strcmp(r->dir, "@missing") == 0)
        return tst_path_in("missing");
    const char *d = tst_path_in(r->dir + 1);
    ck_assert(mkdir(d, 0755) == 0);
    char file[4200];
    snprintf(file, sizeof file, "%s/libauxtrunk.so", d);
    if (strcmp(r->dir, "@notelf") == 0) {
        const char text[] = "this is not a shared object\n";
        tst_spit(file, text, sizeof text - 1, 0644);
    } else if (strcmp(r->dir, "@truncated") == 0 || strcmp(r->dir, "@groupw") == 0) {
        size_t n;
        char *so = tst_slurp(CPU_PLUGIN_DIR "/libauxtrunk.so", &n);
        if (r->dir[1] == 't')
            tst_spit(file, so, n / 3, 0644);
        else
            tst_spit(file, so, n, 0664);
        free(so);
    }
    return d;
}

/* --plugin NAME looks in $AUXTRUNK_PLUGIN_PATH first. */
START_TEST(test_loader_named)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *root = tst_path_in("roots");
    char dir[4200], file[4300], path[4300];
    snprintf(dir, sizeof dir, "%s/mine", root);
    snprintf(file, sizeof file, "%s/libauxtrunk.so", dir);
    ck_assert(mkdir(root, 0755) == 0 && mkdir(dir, 0755) == 0);
    size_t n;
    char *so = tst_slurp(CPU_PLUGIN_DIR "/libauxtrunk.so", &n);
    tst_spit(file, so, n, 0644);
    free(so);
    char list[9000];
    snprintf(list, sizeof list, "%s/none:%s", tst_scratch_dir(), root);
    ck_assert(setenv("AUXTRUNK_PLUGIN_PATH", list, 1) == 0);
    ath_err_t err = {{0}};
    ck_assert_msg(ath_plugin_named("mine", path, sizeof path, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(path, file);
    ath_plugin_t pl;
    ck_assert_msg(ath_plugin_load(path, &pl, &err) == ATH_LOAD_OK, "%s", err.msg);
    ck_assert_str_eq(pl.api.impl_name, "cpu-ref");
    ath_plugin_unload(&pl);
    ck_assert(unsetenv("AUXTRUNK_PLUGIN_PATH") == 0);
    tst_scratch_done();
}
END_TEST

START_TEST(test_loader_refuses)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const refusal_t *r = &refusals[_i];
    const char *dir = refusal_dir(r);
    ath_plugin_t pl;
    ath_err_t err = {{0}};
    ath_load_status_t s = ath_plugin_load(dir, &pl, &err);
    ck_assert_msg(s == r->status, "%s: got %s (%s), want %s", r->what, ath_load_status_name(s),
                  err.msg, ath_load_status_name(r->status));
    ck_assert_msg(strstr(err.msg, r->text) != NULL, "%s: message \"%s\" lacks \"%s\"", r->what,
                  err.msg, r->text);
    ck_assert_msg(pl.lib == NULL && pl.handle == NULL, "%s: refused plugin left loaded", r->what);
    /* A refused file is closed again: nothing of it stays mapped. */
    char file[4200];
    ath_plugin_file(dir, file, sizeof file);
    ck_assert_msg(!is_mapped(file), "%s: %s still mapped after refusal", r->what, file);
    tst_scratch_done();
}
END_TEST

START_TEST(test_loader_init_refused)
{
    ath_plugin_t pl;
    ath_err_t err = {{0}};
    ck_assert_int_eq(ath_plugin_load(FX_DIR "/init_fails", &pl, &err), ATH_LOAD_OK);
    auxtrunk_config_t c = {sizeof c, 0, 8, 8, 8, 4, 16, -1};
    ck_assert_int_eq(ath_plugin_init(&pl, &c, &err), ATH_LOAD_INIT);
    ck_assert_contains(err.msg, "init(");
    ck_assert_contains(err.msg, "fixture error");
    ck_assert(pl.handle == NULL);
    ath_plugin_unload(&pl);
    ck_assert(pl.lib == NULL);
}
END_TEST

START_TEST(test_loader_cpu_plugin)
{
    ath_plugin_t pl;
    ath_err_t err = {{0}};
    ath_load_status_t s = ath_plugin_load(CPU_PLUGIN_DIR, &pl, &err);
    ck_assert_msg(s == ATH_LOAD_OK, "%s", err.msg);
    ck_assert_int_eq(pl.space, ATH_SPACE_HOST);
    ck_assert_uint_eq(pl.api.abi_version, AUXTRUNK_ABI_VERSION);
    ck_assert(pl.api.impl_name[0] != '\0' && pl.api.kernel_version[0] != '\0');
    auxtrunk_config_t c = {sizeof c, 0, 256, 256, 256, 128, 64, -1};
    ck_assert_msg(ath_plugin_init(&pl, &c, &err) == ATH_LOAD_OK, "%s", err.msg);
    ck_assert(pl.handle != NULL);
    char file[4200];
    snprintf(file, sizeof file, "%s", pl.path);
    ck_assert(is_mapped(file));
    /* Unload must really unload: a hot swap replaces the library in place. */
    ath_plugin_unload(&pl);
    ck_assert(pl.lib == NULL && pl.handle == NULL);
    ck_assert_msg(!is_mapped(file), "%s still mapped after unload", file);
}
END_TEST

START_TEST(test_cli_refusals)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    ck_assert_int_eq(run_host("missing", "--plugin-dir", tst_path_in("nope"), "--steps", "1", NULL),
                     3);
    ck_assert_contains(g_err, "does not exist");
    ck_assert_int_eq(run_host("abi", "--plugin-dir", FX_DIR "/abi_new", "--steps", "1", NULL), 3);
    ck_assert_contains(g_err, "incompatible ABI");
    ck_assert_int_eq(run_host("table", "--plugin-dir", FX_DIR "/null_entry", NULL), 3);
    ck_assert_contains(g_err, "broken plugin");
    ck_assert_int_eq(run_host("init", "--plugin-dir", FX_DIR "/init_fails", NULL), 3);
    ck_assert_contains(g_err, "init(");
    tst_scratch_done();
}
END_TEST

/* A CUDA plugin needs the CUDA-enabled host and a device; without either the
 * refusal says which. */
START_TEST(test_cuda_space)
{
    ath_devmem_t *m = NULL;
    ath_err_t err = {{0}};
    int rc = ath_devmem_open(ATH_SPACE_CUDA, -1, &m, &err);
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
    if (rc != 0) {
        ck_assert_contains(err.msg, "no CUDA device");
        fprintf(stderr, "test_cuda_space: no CUDA device: checked the refusal message\n");
    } else {
        ck_assert(m->stream != NULL);
        ck_assert(m->device >= 0);
        ath_devmem_close(m);
    }
#else
    ck_assert_int_ne(rc, 0);
    ck_assert_contains(err.msg, "built without CUDA");
#endif
}
END_TEST

/* ------------------------------------------------------------------------- */
/* train                                                                     */

START_TEST(test_default_task_trains)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *csv = tst_path_in("loss.csv");
    int rc = run_host("train", "--csv", csv, NULL);
    ck_assert_msg(rc == 0, "exit %d\n%s\n%s", rc, g_out, g_err);
    ck_assert_contains(g_out, "steps/s");
    ck_assert_contains(g_out, "summary: plugin");
    ck_assert_contains(g_out, "ratio");
    csv_data_t *c = read_loss_csv(csv);
    ck_assert_int_eq(c->n, 2000);
    for (int i = 0; i < c->n; i++)
        ck_assert_uint_eq(c->step[i], (uint64_t)i + 1);
    /* The loss at the end (the worst of the last ten steps, so one lucky
     * batch does not pass it) is at least 100x below the first. */
    double worst_end = 0;
    for (int i = c->n - 10; i < c->n; i++)
        worst_end = fmax(worst_end, c->loss[i]);
    fprintf(stderr, "default task: loss %.6g -> %.6g (worst of last 10), %.1fx\n", c->loss[0],
            worst_end, c->loss[0] / worst_end);
    ck_assert_msg(c->loss[0] >= 100.0 * worst_end, "loss %.6g -> %.6g: less than 100x", c->loss[0],
                  worst_end);
    free(c);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* checkpoint                                                                */

START_TEST(test_resume_bit_exact)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(tst_seed("test_host") % 1000000));
    const char *common[] = {"--batch", "16", "--seed", seed, "--quiet"};
#define COMMON common[0], common[1], common[2], common[3], common[4]
    ck_assert_int_eq(run_host("full", COMMON, "--steps", "200", "--csv", tst_path_in("full.csv"),
                              "--checkpoint", tst_path_in("full.ck"), NULL),
                     0);
    ck_assert_int_eq(run_host("part", COMMON, "--steps", "70", "--checkpoint-every", "25", "--csv",
                              tst_path_in("a.csv"), "--checkpoint", tst_path_in("part.ck"), NULL),
                     0);
    ck_assert_int_eq(run_host("resume", COMMON, "--steps", "200", "--resume",
                              tst_path_in("part.ck"), "--csv", tst_path_in("b.csv"), "--checkpoint",
                              tst_path_in("part.ck"), NULL),
                     0);
#undef COMMON
    ck_assert_contains(g_out, "summary: 130 steps (71..200)");

    /* Loss curve: the two halves, joined, are the full run's byte for byte. */
    size_t nf, na, nb;
    char *full = tst_slurp(tst_path_in("full.csv"), &nf);
    char *a = tst_slurp(tst_path_in("a.csv"), &na);
    char *b = tst_slurp(tst_path_in("b.csv"), &nb);
    const char *hdr = "step,loss\n";
    ck_assert(strncmp(b, hdr, strlen(hdr)) == 0);
    ck_assert_uint_eq(na + nb - strlen(hdr), nf);
    ck_assert(memcmp(full, a, na) == 0);
    ck_assert_msg(memcmp(full + na, b + strlen(hdr), nb - strlen(hdr)) == 0,
                  "resumed loss curve differs from the uninterrupted run");
    /* Final parameters and optimizer state: the checkpoints are identical. */
    char *ck_full = tst_slurp(tst_path_in("full.ck"), &nf);
    char *ck_part = tst_slurp(tst_path_in("part.ck"), &na);
    ck_assert_uint_eq(na, nf);
    ck_assert_msg(memcmp(ck_full, ck_part, nf) == 0,
                  "final parameters/Adam state differ after resume");
    /* Atomic writes leave no temporary files behind. */
    DIR *dir = opendir(tst_scratch_dir());
    ck_assert(dir != NULL);
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        ck_assert_msg(strstr(e->d_name, ".tmp.") == NULL, "temporary file %s left behind",
                      e->d_name);
    closedir(dir);
    free(full), free(a), free(b), free(ck_full), free(ck_part);
    tst_scratch_done();
}
END_TEST

/* A small valid checkpoint for the refusal cases. */
#define SMALL "--enc", "8", "--h1", "8", "--h2", "8", "--aux", "4", "--batch", "8", "--quiet"

typedef struct bad_ckpt {
    const char *what;
    const char *text; /* expected in the message; NULL = must be accepted */
} bad_ckpt_t;

static const bad_ckpt_t bad_ckpts[] = {
    {"intact (control)", NULL},
    {"truncated payload", "truncated"},
    {"truncated header", "truncated"},
    {"empty file", "truncated"},
    {"corrupted payload", "payload checksum mismatch"},
    {"corrupted header", "header checksum mismatch"},
    {"wrong magic", "bad magic"},
    {"wrong version (an older format)", "format version 1"},
    {"wrong topology", "wrong topology"},
    {"wrong batch", "--batch 8"},
    {"wrong seed", "--seed"},
    {"trailing bytes", "trailing bytes"},
    {"missing file", "cannot open"},
};

START_TEST(test_bad_checkpoint_refused)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const bad_ckpt_t *c = &bad_ckpts[_i];
    const char *good = tst_path_in("good.ck"), *bad = tst_path_in("bad.ck");
    ck_assert_int_eq(run_host("make", SMALL, "--steps", "5", "--checkpoint", good, NULL), 0);
    size_t n;
    unsigned char *d = (unsigned char *)tst_slurp(good, &n);
    ck_assert_uint_eq(n, ATH_CKPT_HEADER_SIZE + 3 * 4 * (8 * 8 + 8 + 8 * 8 + 8 + 8 * 4 + 4));
    const char *topo_h1 = "8", *batch = "8", *seed = "1";
    switch (_i) {
    case 0:
        break;
    case 1:
        n -= 100;
        break;
    case 2:
        n = 50;
        break;
    case 3:
        n = 0;
        break;
    case 4:
        d[ATH_CKPT_HEADER_SIZE + 123] ^= 0x10;
        break;
    case 5:
        d[64] ^= 0x01;
        break; /* the step field */
    case 6:
        d[0] = 'X';
        break;
    case 7:
        d[8] = 1;
        break;
    case 8:
        topo_h1 = "16";
        break;
    case 9:
        batch = "16";
        break;
    case 10:
        seed = "2";
        break;
    case 11:
        break;
    case 12:
        break;
    }
    if (_i != 12)
        tst_spit(bad, d, n, 0644);
    if (_i == 11) {
        FILE *f = fopen(bad, "ab");
        fputs("extra", f);
        fclose(f);
    }
    int rc = run_host("resume", "--enc", "8", "--h1", topo_h1, "--h2", "8", "--aux", "4", "--batch",
                      batch, "--seed", seed, "--steps", "9", "--resume", bad, NULL);
    if (!c->text) {
        ck_assert_msg(rc == 0, "%s: exit %d: %s", c->what, rc, g_err);
        ck_assert_contains(g_out, "resuming at step 5");
    } else {
        ck_assert_msg(rc == 4, "%s: exit %d, want 4\n%s", c->what, rc, g_err);
        ck_assert_contains(g_err, "cannot resume");
        ck_assert_contains(g_err, c->text);
    }
    free(d);
    tst_scratch_done();
}
END_TEST

/* A refused checkpoint writes nothing into the caller's arrays. */
START_TEST(test_checkpoint_load_writes_nothing)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *good = tst_path_in("good.ck");
    ck_assert_int_eq(run_host("make", SMALL, "--steps", "3", "--checkpoint", good, NULL), 0);
    size_t n;
    unsigned char *d = (unsigned char *)tst_slurp(good, &n);
    d[n - 1] ^= 0x80;
    tst_spit(good, d, n, 0644);
    const size_t P = 8 * 8 + 8 + 8 * 8 + 8 + 8 * 4 + 4;
    float params[200], m[200], v[200];
    for (size_t i = 0; i < 200; i++)
        params[i] = m[i] = v[i] = NAN;
    ath_ckpt_meta_t expect = {8, 8, 8, 4, 8, 1, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0, 0, 0}, got;
    memset(&got, 0xA5, sizeof got);
    ath_ckpt_meta_t got0 = got;
    ath_err_t err = {{0}};
    ck_assert_int_ne(ath_ckpt_load(good, &expect, &got, params, m, v, P, &err), 0);
    ck_assert_contains(err.msg, "payload checksum");
    for (size_t i = 0; i < 200; i++)
        ck_assert(isnan(params[i]) && isnan(m[i]) && isnan(v[i]));
    ck_assert(memcmp(&got, &got0, sizeof got) == 0);
    /* The intact file loads. */
    d[n - 1] ^= 0x80;
    tst_spit(good, d, n, 0644);
    ck_assert_msg(ath_ckpt_load(good, &expect, &got, params, m, v, P, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(got.step, 3);
    ck_assert_uint_eq(got.adam_t, 3);
    free(d);
    tst_scratch_done();
}
END_TEST

START_TEST(test_crc32)
{
    ck_assert_uint_eq(ath_crc32(0, "123456789", 9), 0xCBF43926u);
    ck_assert_uint_eq(ath_crc32(ath_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* files: what the run reads and writes (safefile.h, vet.h)                  */

static void assert_file_is(const char *path, const char *want)
{
    char *got = tst_slurp(path, NULL);
    ck_assert_msg(strcmp(got, want) == 0, "%s was changed to:\n%.200s", path, got);
    free(got);
}

/* A directory <scratch>/name (0755); plugin gets its libauxtrunk.so path. */
static char *scratch_dir(const char *name, char *plugin, size_t n)
{
    char *dir = tst_path_in(name);
    ck_assert(mkdir(dir, 0755) == 0);
    snprintf(plugin, n, "%s/libauxtrunk.so", dir);
    return dir;
}

/* A pid that existed and is gone: a reaped child's. */
static long dead_pid(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    ck_assert(p > 0 && waitpid(p, NULL, 0) == p);
    return (long)p;
}

/* Item 2: the checkpoint's temporary had a predictable name
 * (FILE.tmp.<pid>) and was opened without O_EXCL or O_NOFOLLOW, so symlinks
 * planted for the next pids redirected the write; --csv and --svg followed
 * a symlink at their own path. Now temporaries are exclusive and
 * unpredictable, and an output that is a symlink is refused before the run. */
START_TEST(test_planted_symlinks)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char *victim = tst_path_in("victim");
    tst_spit(victim, "precious\n", 9, 0644);
    char *ck = tst_path_in("ck");
    long me = (long)getpid();
    for (long p = me; p < me + 400; p++) {
        char link[4400];
        snprintf(link, sizeof link, "%s.tmp.%ld", ck, p);
        ck_assert(symlink(victim, link) == 0);
    }
    ck_assert_int_eq(run_host("ck", SMALL, "--steps", "20", "--checkpoint", ck, NULL), 0);
    assert_file_is(victim, "precious\n");
    ath_ckpt_meta_t m;
    ath_err_t err;
    ck_assert_msg(ath_ckpt_peek(ck, &m, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(m.step, 20);
    struct stat st;
    ck_assert(lstat(ck, &st) == 0 && S_ISREG(st.st_mode));

    const char *opt[] = {"--csv", "--svg"};
    for (int i = 0; i < 2; i++) {
        char *link = tst_path_in(i ? "out.svg" : "out.csv");
        ck_assert(symlink(victim, link) == 0);
        int rc = run_host("link", SMALL, "--steps", "20", opt[i], link, NULL);
        ck_assert_msg(rc == 1, "%s through a symlink: exit %d\n%s", opt[i], rc, g_err);
        ck_assert_contains(g_err, "symbolic link");
        ck_assert_msg(!strstr(g_out, "summary"), "%s trained before refusing:\n%s", opt[i], g_out);
        assert_file_is(victim, "precious\n");
    }
    tst_scratch_done();
}
END_TEST

/* Item 6: outputs that would destroy inputs or each other are refused
 * before anything runs, by name and by inode (a hard link), with exit 2;
 * the checkpoint may be the file the run resumes from. */
START_TEST(test_outputs_never_inputs)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char *ck = tst_path_in("ck");
    ck_assert_int_eq(run_host("base", SMALL, "--steps", "10", "--checkpoint", ck, NULL), 0);
    size_t n0;
    char *before = tst_slurp(ck, &n0);
    char *hard = tst_path_in("hard");
    ck_assert(link(ck, hard) == 0);
    char plugin[4400];
    char *plugin_dir = scratch_dir("pl", plugin, sizeof plugin);
    size_t np;
    char *so = tst_slurp(CPU_PLUGIN_DIR "/libauxtrunk.so", &np);
    tst_spit(plugin, so, np, 0644);

    struct {
        const char *tag, *a1, *v1, *a2, *v2, *says;
    } bad[] = {
        {"svg=ck", "--svg", ck, "--checkpoint", ck, "two outputs"},
        {"csv=resume", "--csv", ck, "--resume", ck, "destroy that input"},
        {"csv=hardlink", "--csv", hard, "--resume", ck, "destroy that input"},
        {"svg=csv", "--svg", tst_path_in("x"), "--csv", tst_path_in("x"), "two outputs"},
        {"csv=plugin", "--csv", plugin, "--plugin-dir", plugin_dir, "the plugin file"},
        {"ck=plugin", "--checkpoint", plugin, "--plugin-dir", plugin_dir, "the plugin file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_host(bad[i].tag, SMALL, "--steps", "20", bad[i].a1, bad[i].v1, bad[i].a2,
                          bad[i].v2, NULL);
        ck_assert_msg(rc == 2, "%s: exit %d\n%s%s", bad[i].tag, rc, g_out, g_err);
        ck_assert_contains(g_err, bad[i].says);
        size_t n1;
        char *after = tst_slurp(ck, &n1);
        ck_assert_msg(n1 == n0 && memcmp(before, after, n0) == 0, "%s changed the checkpoint",
                      bad[i].tag);
        free(after);
        size_t n2;
        char *so2 = tst_slurp(plugin, &n2);
        ck_assert_msg(n2 == np && memcmp(so, so2, np) == 0, "%s changed the plugin", bad[i].tag);
        free(so2);
    }
    /* Resuming from and writing to the same checkpoint is the normal case. */
    ck_assert_int_eq(
        run_host("same", SMALL, "--steps", "20", "--resume", ck, "--checkpoint", ck, NULL), 0);
    free(before);
    free(so);
    tst_scratch_done();
}
END_TEST

/* Item 6: an unwritable --checkpoint or --svg failed only after the whole
 * run. Now it fails before the first step: exit 4 for the checkpoint, 1 for
 * the SVG and CSV. */
START_TEST(test_unwritable_outputs_fail_first)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char *nodir = tst_path_in("no/such/dir/out");
    ck_assert(mkdir(tst_path_in("adir"), 0755) == 0);
    struct {
        const char *opt, *path;
        int code;
    } bad[] = {
        {"--checkpoint", nodir, 4},
        {"--svg", nodir, 1},
        {"--csv", nodir, 1},
        {"--checkpoint", tst_path_in("adir"), 4},
        {"--svg", tst_path_in("adir"), 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_host("unw", SMALL, "--steps", "100000000", "--log-every", "1", bad[i].opt,
                          bad[i].path, NULL);
        ck_assert_msg(rc == bad[i].code, "%s %s: exit %d\n%s", bad[i].opt, bad[i].path, rc, g_err);
        ck_assert_contains(g_err, bad[i].opt);
        ck_assert_msg(!strstr(g_out, "step "), "trained before refusing %s:\n%s", bad[i].opt,
                      g_out);
    }
    tst_scratch_done();
}
END_TEST

/* Item 6: re-running a command without --resume overwrote a later
 * checkpoint without a word. Now that is refused (exit 4, the file kept)
 * unless --overwrite is given. */
START_TEST(test_existing_checkpoint_kept)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char *ck = tst_path_in("ck");
    ck_assert_int_eq(run_host("a", SMALL, "--steps", "30", "--checkpoint", ck, NULL), 0);
    size_t n0;
    char *before = tst_slurp(ck, &n0);
    ck_assert_int_eq(run_host("b", SMALL, "--steps", "10", "--checkpoint", ck, NULL), 4);
    ck_assert_contains(g_err, "a checkpoint at step 30");
    ck_assert_contains(g_err, "--overwrite");
    size_t n1;
    char *after = tst_slurp(ck, &n1);
    ck_assert(n1 == n0 && memcmp(before, after, n0) == 0);
    ck_assert_int_eq(run_host("c", SMALL, "--steps", "10", "--checkpoint", ck, "--overwrite", NULL),
                     0);
    ath_ckpt_meta_t m;
    ath_err_t err;
    ck_assert_msg(ath_ckpt_peek(ck, &m, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(m.step, 10);
    free(before);
    free(after);
    tst_scratch_done();
}
END_TEST

/* Item 5: a FIFO as the plugin file, as --resume or as --plugin-sha256
 * blocked the trainer in open(), and /dev/zero as the allow-list spun
 * forever. Now each is refused at once as not a regular file. (A hang
 * fails this test by its timeout.) */
START_TEST(test_fifo_and_device_inputs)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char plugin[4400];
    char *dir = scratch_dir("pl", plugin, sizeof plugin);
    ck_assert(mkfifo(plugin, 0644) == 0);
    char *fifo = tst_path_in("fifo");
    ck_assert(mkfifo(fifo, 0644) == 0);

    ck_assert_int_eq(run_host("p", SMALL, "--steps", "5", "--plugin-dir", dir, NULL), 3);
    ck_assert_contains(g_err, "FIFO");
    ck_assert_int_eq(run_host("r", SMALL, "--steps", "5", "--resume", fifo, NULL), 4);
    ck_assert_contains(g_err, "FIFO");
    ck_assert_int_eq(run_host("s", SMALL, "--steps", "5", "--plugin-sha256", fifo, NULL), 3);
    ck_assert_contains(g_err, "FIFO");
    ck_assert_int_eq(run_host("z", SMALL, "--steps", "5", "--plugin-sha256", "/dev/zero", NULL), 3);
    ck_assert_contains(g_err, "not a regular file");
    tst_scratch_done();
}
END_TEST

/* Item 3: without --watch-plugin-dir the plugin was dlopened in place with
 * no checks: a group-writable file was run, and copying a new build over it
 * killed the running trainer (SIGBUS/SIGSEGV). Now every run loads a private
 * copy behind the owner and mode checks. */
START_TEST(test_plugin_private_in_every_mode)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char plugin[4400];
    char *dir = scratch_dir("pl", plugin, sizeof plugin);
    size_t np;
    char *so = tst_slurp(CPU_PLUGIN_DIR "/libauxtrunk.so", &np);
    tst_spit(plugin, so, np, 0664);
    ck_assert(chmod(plugin, 0664) == 0);
    ck_assert_int_eq(run_host("gw", SMALL, "--steps", "5", "--plugin-dir", dir, NULL), 3);
    ck_assert_contains(g_err, "writable by its group");
    ck_assert(chmod(plugin, 0644) == 0);

    /* Overwrite the file in place, page by page with junk, while a run uses it. */
    char out[4400];
    snprintf(out, sizeof out, "%s/long.out", tst_scratch_dir());
    char *argv[] = {(char *)AUXTRUNK_HOST_EXE,
                    "--enc",
                    "64",
                    "--h1",
                    "64",
                    "--h2",
                    "64",
                    "--aux",
                    "16",
                    "--batch",
                    "64",
                    "--steps",
                    "3000",
                    "--log-every",
                    "1",
                    "--plugin-dir",
                    dir,
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    ck_assert(posix_spawn(&pid, AUXTRUNK_HOST_EXE, &fa, NULL, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 2000; i++) { /* until it trains */
        char *text = tst_slurp(out, NULL);
        int training = strstr(text, "step ") != NULL;
        free(text);
        if (training)
            break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int fd = open(plugin, O_WRONLY);
    ck_assert(fd >= 0);
    memset(so, 0xCC, np);
    ck_assert(write(fd, so, np) == (ssize_t)np);
    ck_assert(ftruncate(fd, 100) == 0);
    close(fd);
    int status;
    ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0,
                  "the run ended before its plugin file was overwritten: nothing was tested");
    ck_assert(waitpid(pid, &status, 0) == pid);
    char *text = tst_slurp(out, NULL);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the run died when its plugin file was overwritten (status 0x%x):\n%.2000s",
                  (unsigned)status, text);
    ck_assert_contains(text, "summary: 3000 steps");
    free(text);
    free(so);
    tst_scratch_done();
}
END_TEST

/* Item 7: the checkpoint reader loaded the whole file before checking its
 * header (a 4 GB file took 4.2 GB of memory). Now the header alone decides:
 * a sparse 4 GiB file, garbage or a real header with trailing bytes, is
 * refused without the process growing. */
START_TEST(test_checkpoint_header_first)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char *junk = tst_path_in("junk");
    int fd = open(junk, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert(fd >= 0 && ftruncate(fd, (off_t)4 << 30) == 0);
    close(fd);
    char *ck = tst_path_in("ck");
    ck_assert_int_eq(run_host("ck", SMALL, "--steps", "5", "--checkpoint", ck, NULL), 0);
    ck_assert(truncate(ck, (off_t)4 << 30) == 0);

    ath_ckpt_meta_t expect = {.enc = 8,
                              .h1 = 8,
                              .h2 = 8,
                              .aux = 4,
                              .batch = 8,
                              .seed = 1,
                              .lr = 1e-3f,
                              .beta1 = 0.9f,
                              .beta2 = 0.999f,
                              .eps = 1e-8f};
    size_t n = 8 * 8 + 8 + 8 * 8 + 8 + 8 * 4 + 4;
    float *p = malloc(3 * n * sizeof(float));
    ath_ckpt_meta_t got;
    ath_err_t err;
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    ck_assert_int_eq(ath_ckpt_load(junk, &expect, &got, p, p + n, p + 2 * n, n, &err), -1);
    ck_assert_contains(err.msg, "bad magic");
    ck_assert_int_eq(ath_ckpt_load(ck, &expect, &got, p, p + n, p + 2 * n, n, &err), -1);
    ck_assert_contains(err.msg, "trailing bytes");
    getrusage(RUSAGE_SELF, &ru1);
    ck_assert_msg(ru1.ru_maxrss - ru0.ru_maxrss < 64 * 1024,
                  "reading a 4 GiB file grew the process by %ld KiB",
                  ru1.ru_maxrss - ru0.ru_maxrss);
    free(p);
    tst_scratch_done();
}
END_TEST

/* Item 7: the in-memory loss curve grew without bound. Now it keeps at most
 * ATH_CURVE_MAX_POINTS + 1 points, evenly spaced, the first and the latest
 * always among them. */
START_TEST(test_curve_bounded)
{
    ath_curve_t c = {0};
    ath_err_t err;
    const uint64_t N = 3000001;
    for (uint64_t k = 1; k <= N; k++) {
        ck_assert_int_eq(ath_curve_push(&c, k, 1.0 / (double)k, &err), 0);
        ck_assert(c.n <= ATH_CURVE_MAX_POINTS + 1);
        ck_assert(c.step[c.n - 1] == k && c.loss[c.n - 1] == 1.0 / (double)k);
    }
    ck_assert_uint_ge(c.n, ATH_CURVE_MAX_POINTS / 2);
    ck_assert(c.step[0] == 1);
    uint64_t gap = c.step[1] - c.step[0];
    for (size_t i = 1; i + 1 < c.n; i++)
        ck_assert_msg(c.step[i] - c.step[i - 1] == gap, "uneven at %zu", i);
    ck_assert(c.step[c.n - 1] > c.step[c.n - 2] && c.step[c.n - 1] - c.step[c.n - 2] <= gap);
    ck_assert(c.cap <= ATH_CURVE_MAX_POINTS + 1);
    ath_curve_free(&c);
}
END_TEST

/* Item 7: temporaries of killed runs (FILE.tmp.<pid>[.XXXXXX]) and their
 * private directories ($TMPDIR/auxtrunk-swap-<pid>-XXXXXX) accumulated. The
 * next run removes those whose pid is gone, and nothing of a live one. */
START_TEST(test_stale_temporaries_removed)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    long dead = dead_pid();
    char *ck = tst_path_in("ck");
    char t1[4400], t2[4400], live[4400], priv[4400], privf[4500];
    snprintf(t1, sizeof t1, "%s.tmp.%ld", ck, dead);
    snprintf(t2, sizeof t2, "%s.tmp.%ld.Ab12Cd", ck, dead);
    snprintf(live, sizeof live, "%s.tmp.%ld.Zz99Yy", ck, (long)getpid());
    tst_spit(t1, "x", 1, 0600);
    tst_spit(t2, "x", 1, 0600);
    tst_spit(live, "x", 1, 0600);
    snprintf(priv, sizeof priv, "%s/auxtrunk-swap-%ld-Q1w2E3", tst_scratch_dir(), dead);
    ck_assert(mkdir(priv, 0700) == 0);
    snprintf(privf, sizeof privf, "%s/1-libauxtrunk.so", priv);
    tst_spit(privf, "x", 1, 0600);
    setenv("TMPDIR", tst_scratch_dir(), 1);
    ck_assert_int_eq(run_host("run", SMALL, "--steps", "5", "--checkpoint", ck, NULL), 0);
    struct stat st;
    ck_assert_msg(stat(t1, &st) != 0 && stat(t2, &st) != 0, "stale temporaries are still there");
    ck_assert_msg(stat(priv, &st) != 0, "the stale private directory is still there");
    ck_assert_msg(stat(live, &st) == 0, "a live process's temporary was removed");
    unlink(live);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* report                                                                    */

START_TEST(test_csv_svg_written)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *csv = tst_path_in("loss.csv"), *svg = tst_path_in("loss.svg");
    ck_assert_int_eq(run_host("run", SMALL, "--steps", "50", "--csv", csv, "--svg", svg, NULL), 0);
    csv_data_t *c = read_loss_csv(csv);
    ck_assert_int_eq(c->n, 50);
    for (int i = 0; i < c->n; i++)
        ck_assert_uint_eq(c->step[i], (uint64_t)i + 1);
    free(c);
    char *doc = tst_slurp(svg, NULL);
    const char *why = xml_check(doc, "svg");
    ck_assert_msg(why == NULL, "SVG not well-formed: %s", why ? why : "");
    ck_assert_contains(doc, "<polyline");
    ck_assert_contains(doc, "log scale");
    free(doc);
    tst_scratch_done();
}
END_TEST

START_TEST(test_svg_edge_cases)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    /* The checker itself must reject broken documents. */
    ck_assert(xml_check("<svg><g></svg>", "svg") != NULL);
    ck_assert(xml_check("<svg a=\"<\"/>", "svg") != NULL);
    ck_assert(xml_check("<svg>&</svg>", "svg") != NULL);
    ck_assert(xml_check("<svg/><svg/>", "svg") != NULL);

    ath_curve_t c = {0};
    ath_err_t err;
    const char *svg = tst_path_in("edge.svg");
    const double losses[] = {NAN, 0.0, INFINITY, -1.0, 0.5, 1e-30, 3e5};
    for (int n = 0; n <= 7; n++) {
        ath_curve_free(&c);
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(ath_curve_push(&c, (uint64_t)i + 10, losses[i], &err), 0);
        ck_assert_int_eq(ath_svg_write(svg, &c, "title <with> \"markup\" & more", &err), 0);
        char *doc = tst_slurp(svg, NULL);
        const char *why = xml_check(doc, "svg");
        ck_assert_msg(why == NULL, "%d points: %s", n, why ? why : "");
        ck_assert_contains(doc, "&lt;with&gt;");
        free(doc);
    }
    ath_curve_free(&c);

    /* The benchmark's log-log chart: empty, degenerate and more series than
     * colours. */
    const double bx[] = {32, 256, 0, 65536}, by[] = {10, NAN, 5, 1e4};
    ath_series_t ser[10];
    for (int k = 0; k < 10; k++)
        ser[k] = (ath_series_t){k % 2 ? "a<b" : "c&d", k % 3 ? 4 : 1, bx, by};
    for (int n = 0; n <= 10; n += 5) {
        ck_assert_int_eq(ath_svg_loglog(svg, "t&t", "x", "y", ser, n, &err), 0);
        char *doc = tst_slurp(svg, NULL);
        const char *why = xml_check(doc, "svg");
        ck_assert_msg(why == NULL, "%d series: %s", n, why ? why : "");
        free(doc);
    }
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* bench                                                                     */

START_TEST(test_flop_formula)
{
    /* 55.8 GFLOP per step at the production topology and B = 65536. */
    double f = ath_bench_flop_forward(65536, 256, 256, 256, 128) +
               ath_bench_flop_backward(65536, 256, 256, 256, 128);
    ck_assert(f == 55834574848.0);
    ck_assert(ath_bench_flop_forward(1, 1, 1, 1, 1) == 6.0);
    ck_assert(ath_bench_flop_backward(1, 1, 1, 1, 1) == 10.0);
}
END_TEST

static double field(char *line, int k)
{
    char *p = line;
    for (int i = 0; i < k; i++) {
        p = strchr(p, ',');
        ck_assert(p != NULL);
        p++;
    }
    return strtod(p, NULL);
}

START_TEST(test_bench_cpu)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *csv = tst_path_in("bench.csv"), *svg = tst_path_in("bench.svg");
    int rc = run_host("bench", "bench", "--plugin-dir", CPU_PLUGIN_DIR, "--plugin", "cpu",
                      "--batches", "8,33", "--enc", "64", "--h1", "48", "--h2", "32", "--aux", "16",
                      "--iters", "5", "--warmup", "1", "--min-iters", "2", "--rotate-mib", "1",
                      "--csv", csv, "--svg", svg, NULL);
    ck_assert_msg(rc == 0, "exit %d\n%s\n%s", rc, g_out, g_err);
    char *doc = tst_slurp(svg, NULL);
    const char *why = xml_check(doc, "svg");
    ck_assert_msg(why == NULL, "bench SVG not well-formed: %s", why ? why : "");
    ck_assert_contains(doc, "<polyline");
    ck_assert_contains(doc, "batch size");
    /* Host plugins have no graph step: their lines are the eager step. */
    ck_assert(strstr(doc, "(graph)") == NULL);
    free(doc);
    ck_assert_contains(g_out, "fwd_us");
    ck_assert_contains(g_out, "step_TF/s");
    ck_assert_contains(g_out, "step_graph_us");
    ck_assert_contains(g_out, "speedup");
    ck_assert_msg(strstr(g_out, "graph step time") == NULL, "graph comparison without graphs:\n%s",
                  g_out);

    /* Table rows: plugin, B, iters, fwd_us, bwd_us, step_us, step_graph_us,
     * and for a host plugin step_graph_us is "-". */
    int table_rows = 0;
    for (const char *l = g_out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char name[64], graph[32];
        int B, iters;
        double f, b, st;
        if (strncmp(l, "cpu", 3) != 0 ||
            sscanf(l, "%63s %d %d %lf %lf %lf %31s", name, &B, &iters, &f, &b, &st, graph) != 7)
            continue;
        ck_assert_msg(strcmp(graph, "-") == 0, "step_graph_us of a host plugin: %s", graph);
        table_rows++;
    }
    ck_assert_int_eq(table_rows, 4);

    char *text = tst_slurp(csv, NULL);
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    ck_assert_str_eq(line, "plugin,kernel_version,space,enc,h1,h2,aux,batch,iters,input_sets,"
                           "fwd_us,bwd_us,step_us,fwd_tflops,bwd_tflops,step_tflops,host_bytes,"
                           "device_bytes,step_graph_us");
    int rows = 0;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        int B = (int)field(line, 7), iters = (int)field(line, 8), sets = (int)field(line, 9);
        double fwd = field(line, 10), bwd = field(line, 11), step = field(line, 12);
        double step_tf = field(line, 15), host_bytes = field(line, 16);
        ck_assert(B == 8 || B == 33);
        ck_assert(iters >= 2 && iters <= 5);
        ck_assert(sets >= 2);
        ck_assert(fwd > 0 && bwd > 0 && step >= fwd && step >= bwd);
        double flop =
            ath_bench_flop_forward(B, 64, 48, 32, 16) + ath_bench_flop_backward(B, 64, 48, 32, 16);
        double want = flop / (step * 1e-6) / 1e12;
        ck_assert_msg(fabs(step_tf - want) <= 1e-3 * want + 1e-6, "TFLOP/s %g, formula %g", step_tf,
                      want);
        ck_assert(host_bytes > 0);
        /* step_graph_us, the last field, is empty for a host plugin. */
        size_t len = strlen(line);
        ck_assert_msg(len > 0 && line[len - 1] == ',', "step_graph_us not empty: %s", line);
        rows++;
    }
    ck_assert_int_eq(rows, 4);
    free(text);
    tst_scratch_done();
}
END_TEST

/* The devmem graph ops the benchmark's step_graph_us uses: absent in host
 * memory; with CUDA, a capture is replayed, and a capture spoilt by a call
 * that cannot be captured fails at its end and leaves the stream usable. */
START_TEST(test_devmem_graph)
{
    const ath_devmem_ops_t *h = &ath_devmem_host_ops;
    ck_assert(!h->capture_begin && !h->capture_end && !h->capture_abort && !h->replay &&
              !h->graph_free);
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
    ath_devmem_t *m = NULL;
    ath_err_t err = {{0}};
    if (ath_devmem_open(ATH_SPACE_CUDA, -1, &m, &err) != 0) {
        ck_assert_contains(err.msg, "no CUDA device");
        fprintf(stderr, "test_devmem_graph: no CUDA device: only the host ops checked\n");
        return;
    }
    const ath_devmem_ops_t *c = m->ops;
    ck_assert(c->capture_begin && c->capture_end && c->capture_abort && c->replay && c->graph_free);
    float src[64], back[64], *d = NULL;
    for (int i = 0; i < 64; i++)
        src[i] = (float)i - 20.5f;
    ck_assert_int_eq(c->alloc(m, sizeof src, (void **)&d, &err), 0);

    /* An empty capture: replayed between two marks. */
    void *graph = NULL;
    ck_assert_msg(c->capture_begin(m, &err) == 0, "%s", err.msg);
    ck_assert_msg(c->capture_end(m, &graph, &err) == 0, "%s", err.msg);
    ck_assert(graph != NULL);
    double us = -1;
    for (int i = 0; i < 3; i++)
        ck_assert_msg(c->mark(m, 0, &err) == 0 && c->replay(m, graph, &err) == 0 &&
                          c->mark(m, 1, &err) == 0 && c->elapsed_us(m, 0, 1, &us, &err) == 0,
                      "%s", err.msg);
    ck_assert(us >= 0);
    c->graph_free(m, graph);

    /* upload synchronises: it fails inside a capture and spoils it; both ways
     * out (end, abort) leave a stream that copies again. */
    for (int way = 0; way < 2; way++) {
        ck_assert_msg(c->capture_begin(m, &err) == 0, "%s", err.msg);
        ck_assert_int_ne(c->upload(m, d, src, sizeof src, &err), 0);
        if (way == 0) {
            graph = (void *)&graph;
            ck_assert_int_ne(c->capture_end(m, &graph, &err), 0);
            ck_assert(graph == NULL);
            ck_assert_contains(err.msg, "capture");
        } else {
            c->capture_abort(m);
        }
        memset(back, 0, sizeof back);
        ck_assert_msg(c->upload(m, d, src, sizeof src, &err) == 0, "%s", err.msg);
        ck_assert_msg(c->download(m, back, d, sizeof back, &err) == 0, "%s", err.msg);
        ck_assert(memcmp(src, back, sizeof src) == 0);
    }
    /* Ending or aborting with no capture open: an error, or nothing. */
    ck_assert_int_ne(c->capture_end(m, &graph, &err), 0);
    c->capture_abort(m);
    ck_assert_msg(c->sync(m, &err) == 0, "%s", err.msg);
    c->release(m, d);
    ath_devmem_close(m);
#endif
}
END_TEST

START_TEST(test_bench_refused_plugin_continues)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *csv = tst_path_in("bench.csv");
    int rc = run_host("bench", "bench", "--plugin-dir", FX_DIR "/abi_lies", "--plugin-dir",
                      CPU_PLUGIN_DIR, "--batches", "4", "--enc", "16", "--h1", "16", "--h2", "16",
                      "--aux", "8", "--iters", "3", "--warmup", "0", "--rotate-mib", "0", "--csv",
                      csv, NULL);
    ck_assert_int_eq(rc, 3);
    ck_assert_contains(g_err, "incompatible ABI");
    char *text = tst_slurp(csv, NULL);
    ck_assert_contains(text, "\ncpu-ref,");
    free(text);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */

static Suite *host_suite(const char *name)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 120);
    if (strcmp(name, "cli") == 0) {
        tcase_add_test(tc, test_help);
        tcase_add_test(tc, test_usage_errors);
        tcase_add_test(tc, test_strict_numbers);
        tcase_add_test(tc, test_help_defaults_from_tables);
    } else if (strcmp(name, "loader") == 0) {
        tcase_add_loop_test(tc, test_loader_refuses, 0,
                            (int)(sizeof refusals / sizeof refusals[0]));
        tcase_add_test(tc, test_loader_init_refused);
        tcase_add_test(tc, test_loader_named);
        tcase_add_test(tc, test_loader_cpu_plugin);
        tcase_add_test(tc, test_cli_refusals);
        tcase_add_test(tc, test_cuda_space);
    } else if (strcmp(name, "train") == 0) {
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, test_default_task_trains);
    } else if (strcmp(name, "checkpoint") == 0) {
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, test_resume_bit_exact);
        tcase_add_loop_test(tc, test_bad_checkpoint_refused, 0,
                            (int)(sizeof bad_ckpts / sizeof bad_ckpts[0]));
        tcase_add_test(tc, test_checkpoint_load_writes_nothing);
        tcase_add_test(tc, test_crc32);
    } else if (strcmp(name, "report") == 0) {
        tcase_add_test(tc, test_csv_svg_written);
        tcase_add_test(tc, test_svg_edge_cases);
    } else if (strcmp(name, "files") == 0) {
        tcase_add_test(tc, test_planted_symlinks);
        tcase_add_test(tc, test_outputs_never_inputs);
        tcase_add_test(tc, test_unwritable_outputs_fail_first);
        tcase_add_test(tc, test_existing_checkpoint_kept);
        tcase_add_test(tc, test_fifo_and_device_inputs);
        tcase_add_test(tc, test_plugin_private_in_every_mode);
        tcase_add_test(tc, test_checkpoint_header_first);
        tcase_add_test(tc, test_curve_bounded);
        tcase_add_test(tc, test_stale_temporaries_removed);
    } else if (strcmp(name, "bench") == 0) {
        tcase_add_test(tc, test_flop_formula);
        tcase_add_test(tc, test_bench_cpu);
        tcase_add_test(tc, test_devmem_graph);
        tcase_add_test(tc, test_bench_refused_plugin_continues);
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* The default plugin must be found next to the program, not via the
     * environment of whoever runs the tests. */
    unsetenv("AUXTRUNK_PLUGIN_DIR");
    const char *names[] = {"cli", "loader", "train", "checkpoint", "files", "report", "bench"};
    SRunner *sr = srunner_create(NULL);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        srunner_add_suite(sr, host_suite(names[i]));
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
