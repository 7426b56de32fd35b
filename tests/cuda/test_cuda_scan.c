/*
 * test_cuda_scan.c — the CUDA plugins' checks that need no GPU, so CI runs
 * them: no atomic or reduction-to-memory instruction in the kernels' PTX (and
 * in the plugin's SASS where cuobjdump exists, which must not hold wgmma
 * instructions that ptxas serialised either), no dx-style symbol in the
 * kernel and plugin sources, and fixtures proving each scanner fails when it
 * should. (The exported-symbol check of every plugin is in tests/unit.)
 *
 * Usage (one ctest entry per mode):
 *   test_cuda_scan fixtures
 *   test_cuda_scan ptx FILE.ptx...
 *   test_cuda_scan ptx-fixture FILE.ptx        PTX that must hold atomics
 *   test_cuda_scan source FILE...
 *   test_cuda_scan sass CUOBJDUMP PLUGIN.so     exit 77 (skip) without cuobjdump
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scan.h"

#define SKIP_EXIT 77

static char **g_files; /* the mode's arguments */
static int g_nfiles;

/* The kernels every scan must have seen, so a scan of the wrong file (or of
 * nothing) cannot pass. */
/* The kernels the scanned PTX/SASS must contain (so an empty or wrong file
 * cannot pass): $AUXTRUNK_SCAN_KERNELS, comma-separated, set per plugin by
 * tests/cuda/CMakeLists.txt; cuda-v1's kernels when unset. */
#define MAX_KERNEL_NAMES 16
static const char *kernel_names[MAX_KERNEL_NAMES] = {"layer_forward_kernel", "dh_pre_kernel",
                                                     "dw_reduce_kernel", "db_reduce_kernel"};
static size_t N_KERNEL_NAMES = 4;

static void kernel_names_from_env(void)
{
    static char buf[1024];
    const char *env = getenv("AUXTRUNK_SCAN_KERNELS");
    if (!env || !*env)
        return;
    snprintf(buf, sizeof buf, "%s", env);
    N_KERNEL_NAMES = 0;
    for (char *tok = strtok(buf, ","); tok && N_KERNEL_NAMES < MAX_KERNEL_NAMES;
         tok = strtok(NULL, ","))
        kernel_names[N_KERNEL_NAMES++] = tok;
}

static char *read_or_fail(const char *path)
{
    char *text = scan_read_file(path);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    ck_assert_msg(text[0] != '\0', "%s is empty", path);
    return text;
}

/* ------------------------------------------------------------------------- */
/* Fixtures: every scanner must find what is planted and nothing else        */

typedef struct fixture {
    const char *text;
    int expect; /* findings the scanner must report */
} fixture_t;

typedef int (*scanner_fn)(const char *text, char *first, size_t first_len);

static void expect_findings(const char *kind, scanner_fn scan, const fixture_t *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char first[256] = "";
        int found = scan(cases[i].text, first, sizeof first);
        ck_assert_msg(found == cases[i].expect, "%s fixture %zu: %d findings, expected %d (%s)",
                      kind, i, found, cases[i].expect, first);
    }
}

START_TEST(ptx_scanner_catches_atomics)
{
    static const fixture_t cases[] = {
        {"\tatom.global.add.f32 \t%f1, [%rd1], %f2;\n", 1},
        {"\t@%p1 red.global.add.f32 \t[%rd1], %f2;\n", 1},
        {"$L__BB0_3:\n\tatom.shared.cas.b32 %r1, [%r2], %r3, %r4;\n", 1},
        {"\tcp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd1], [%r1], 16;\n", 1},
        {"\tmultimem.red.relaxed.gpu.global.add.f32 [%rd1], %f1;\n", 1},
        {"\t{ .reg .pred p; atom.global.exch.b32 %r1, [%rd2], %r3; }\n", 1},
        {"\tld.shared.f32 %f1, [%r1];\n\tfma.rn.f32 %f2, %f1, %f1, %f2;\n", 0},
        /* "shared.f32" holds the letters "red." but is no opcode */
        {"\tst.shared.f32 [%r4], %f23;\n", 0},
        {"\tredux.sync.add.s32 %r1, %r2, -1;\n", 0},
        {"\t// atom.global.add.f32 in a comment\n\tadd.rn.f32 %f1, %f2, %f3;\n", 0},
        {"\t/* red.global.add.f32 [%rd1], %f2; */ mov.f32 %f1, %f2;\n", 0},
        {".visible .entry red_kernel(\n\t.param .u64 red_param_0\n)\n", 0},
    };
    expect_findings("PTX", scan_ptx_atomics, cases, sizeof cases / sizeof cases[0]);
}
END_TEST

START_TEST(sass_scanner_catches_atomics)
{
    static const fixture_t cases[] = {
        {"        /*0090*/                   ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU PT, R2, [R2.64], R5 "
         ";"
         "   /* 0x000fe200099ef384 */\n",
         1},
        {"        /*00a0*/               @P0 RED.E.ADD.F32.FTZ.RN.STRONG.GPU [R2.64], R5 ;\n", 1},
        {"        /*00b0*/                   ATOMS.ADD R1, [R2], R3 ;\n", 1},
        {"        /*00c0*/                   REDG.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R2.64], R5 "
         ";\n",
         1},
        {"        /*00d0*/                   ATOM.E.ADD.STRONG.GPU PT, R0, [R2.64], R5 ;\n", 1},
        {"        /*00e0*/                   UTMAREDG.2D.ADD [UR4], [UR6] ;\n", 1},
        {"        /*0000*/                   REDUX.SUM UR4, R2 ;\n", 0},
        {"        /*0010*/                   FFMA R1, R2, R3, R4 ;     /* 0x0000000302017223 */\n"
         "                                                             /* 0x004fca0000000004 */\n",
         0},
        {"\t\tFunction : _ZN16dw_reduce_kernelEPKfS1_iiiiPf\n\t.headerflags @\"EF_CUDA_SM90\"\n",
         0},
    };
    expect_findings("SASS", scan_sass_atomics, cases, sizeof cases / sizeof cases[0]);
}
END_TEST

START_TEST(sass_scanner_catches_serialized_wgmma)
{
#define FN(name) "\t\tFunction : " name "\n"
#define INS(addr, text) \
    "        /*" addr "*/                   " text " ;  /* 0x05e00000141879f0 */\n"
#define HGMMA "HGMMA.64x128x8.F32.TF32 R24, gdesc[UR20], R24"
    static const fixture_t cases[] = {
        /* a slab's four k steps in one group, as cuda-v3 issues them */
        {FN("_Z11good_kernelv") INS("0100", "WARPGROUP.ARRIVE") INS("0110", HGMMA)
             INS("0120", HGMMA) INS("0130", HGMMA) INS("0140", HGMMA ", gsb0")
                 INS("0150", "WARPGROUP.DEPBAR.LE gsb0, 0x1"),
         0},
        /* serialised: every wgmma its own group, waited for at once */
        {FN("_Z10bad_kernelv") INS("0100", "WARPGROUP.ARRIVE") INS("0110", HGMMA ", gsb0")
             INS("0120", "WARPGROUP.DEPBAR.LE gsb0, 0x0") INS("0130", "WARPGROUP.ARRIVE")
                 INS("0140", HGMMA ", gsb0") INS("0150", "WARPGROUP.DEPBAR.LE gsb0, 0x0"),
         1},
        /* the second of two functions, with a guard predicate */
        {FN("_Z11good_kernelv") INS("0110", HGMMA) INS("0120", HGMMA ", gsb0") FN("_Z10bad_kernelv")
             INS("0110", "@P0 " HGMMA ", gsb0") INS("0120", "@P0 " HGMMA ", gsb0"),
         1},
        /* one wgmma in a function is one group, whatever it names */
        {FN("_Z10one_kernelv") INS("0110", HGMMA ", gsb0"), 0},
        /* no wgmma at all; gsb0 in a comment is no instruction */
        {FN("_Z10ffma_kernelv") INS(
             "0110", "FFMA R1, R2, R3, R4") "        /* HGMMA gsb0 */\n        /* HGMMA gsb0 */\n",
         0},
    };
#undef HGMMA
#undef INS
#undef FN
    expect_findings("SASS wgmma", scan_sass_serialized_wgmma, cases,
                    sizeof cases / sizeof cases[0]);
}
END_TEST

START_TEST(source_scanner_catches_dx)
{
    static const fixture_t cases[] = {
        {"__global__ void k(const float *x, float *dx_in) {}\n", 1},
        {"void f(float *dx_in_out);\n", 1},
        {"float *dX = 0;\n", 1},
        {"float *dx = p;\n", 1},
        {"float *grad_x = p;\n", 1},
        {"float *x_grad = p, *d_x = q;\n", 2},
        {"float *dxIn;\n", 1},
        /* prose and literals about the rule are not code */
        {"/* the kernels never write dx_in */\nint a;\n", 0},
        {"// no grad_x here\nint a;\n", 0},
        {"const char *s = \"dx_in\"; char c = 'x';\n", 0},
        {"/* a\n * multi-line dx\n */ float *dh2, *dw, *db, *dout, idx;\n", 0},
    };
    expect_findings("source", scan_source_dx, cases, sizeof cases / sizeof cases[0]);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The real files                                                            */

START_TEST(ptx_has_no_atomics)
{
    ck_assert_msg(g_nfiles > 0, "no PTX files given");
    int entries = 0, seen[MAX_KERNEL_NAMES] = {0};
    kernel_names_from_env();
    for (int f = 0; f < g_nfiles; f++) {
        char *ptx = read_or_fail(g_files[f]);
        char first[256] = "";
        int n = scan_ptx_atomics(ptx, first, sizeof first);
        ck_assert_msg(n == 0, "%s: %d atomic/reduction instructions, first at %s", g_files[f], n,
                      first);
        entries += scan_count(ptx, ".entry ");
        for (size_t k = 0; k < N_KERNEL_NAMES; k++)
            seen[k] += scan_count(ptx, kernel_names[k]);
        free(ptx);
    }
    printf("PTX scan: %d files, %d kernel entries, no atomics\n", g_nfiles, entries);
    ck_assert_msg(entries >= (int)N_KERNEL_NAMES, "only %d .entry in the PTX", entries);
    for (size_t k = 0; k < N_KERNEL_NAMES; k++)
        ck_assert_msg(seen[k] > 0, "kernel %s not found in the PTX", kernel_names[k]);
}
END_TEST

/* nvcc's own output for kernels that use atomics: the scan must see them. */
START_TEST(ptx_scan_catches_real_atomics)
{
    ck_assert_msg(g_nfiles > 0, "no PTX files given");
    for (int f = 0; f < g_nfiles; f++) {
        char *ptx = read_or_fail(g_files[f]);
        char first[256] = "";
        int n = scan_ptx_atomics(ptx, first, sizeof first);
        ck_assert_msg(n >= 3, "%s: the scan found %d atomics, the fixture has at least 3",
                      g_files[f], n);
        printf("PTX fixture scan: %d atomics found in %s, first at %s\n", n, g_files[f], first);
        free(ptx);
    }
}
END_TEST

START_TEST(sources_have_no_dx_symbol)
{
    ck_assert_msg(g_nfiles > 0, "no source files given");
    for (int f = 0; f < g_nfiles; f++) {
        char *src = read_or_fail(g_files[f]);
        char first[256] = "";
        int n = scan_source_dx(src, first, sizeof first);
        ck_assert_msg(n == 0, "%s: %d dx-style symbols in code, first at %s", g_files[f], n, first);
        free(src);
    }
    printf("source scan: %d files, no dx-style symbol in code\n", g_nfiles);
}
END_TEST

static char *shell_quoted(const char *s, char *buf, size_t len)
{
    snprintf(buf, len, "'%s'", s); /* build paths hold no quote */
    return buf;
}

START_TEST(sass_has_no_atomics_nor_serialized_wgmma)
{
    char tool[1024], lib[1024], cmd[2200];
    snprintf(cmd, sizeof cmd, "%s --dump-sass %s 2>&1", shell_quoted(g_files[0], tool, sizeof tool),
             shell_quoted(g_files[1], lib, sizeof lib));
    int status = 0;
    char *sass = scan_read_command(cmd, &status);
    kernel_names_from_env();
    ck_assert_msg(sass != NULL, "cannot run %s", cmd);
    ck_assert_msg(status == 0, "%s exited with %d:\n%.2000s", cmd, status, sass);
    char first[256] = "";
    int n = scan_sass_atomics(sass, first, sizeof first);
    int functions = scan_count(sass, "Function : ");
    ck_assert_msg(n == 0, "%s: %d atomic/reduction instructions in the SASS, first at %s",
                  g_files[1], n, first);
    for (size_t k = 0; k < N_KERNEL_NAMES; k++)
        ck_assert_msg(scan_count(sass, kernel_names[k]) > 0, "kernel %s not in the SASS",
                      kernel_names[k]);
    n = scan_sass_serialized_wgmma(sass, first, sizeof first);
    ck_assert_msg(n == 0, "%s: %d functions issue every wgmma as a group of its own, first %s",
                  g_files[1], n, first);
    printf("SASS scan: %d functions, no atomics, %d wgmma instructions, none serialised\n",
           functions, scan_count(sass, "HGMMA"));
    free(sass);
}
END_TEST

/* ------------------------------------------------------------------------- */

static Suite *make_suite(const char *mode)
{
    Suite *s = suite_create(mode);
    TCase *tc = tcase_create(mode);
    tcase_set_timeout(tc, 120);
    if (strcmp(mode, "fixtures") == 0) {
        tcase_add_test(tc, ptx_scanner_catches_atomics);
        tcase_add_test(tc, sass_scanner_catches_atomics);
        tcase_add_test(tc, sass_scanner_catches_serialized_wgmma);
        tcase_add_test(tc, source_scanner_catches_dx);
    } else if (strcmp(mode, "ptx") == 0) {
        tcase_add_test(tc, ptx_has_no_atomics);
    } else if (strcmp(mode, "ptx-fixture") == 0) {
        tcase_add_test(tc, ptx_scan_catches_real_atomics);
    } else if (strcmp(mode, "source") == 0) {
        tcase_add_test(tc, sources_have_no_dx_symbol);
    } else if (strcmp(mode, "sass") == 0) {
        tcase_add_test(tc, sass_has_no_atomics_nor_serialized_wgmma);
    } else {
        return NULL;
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s fixtures | ptx FILE... | ptx-fixture FILE... | source FILE... | "
                "sass CUOBJDUMP LIB\n",
                argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    g_files = argv + 2;
    g_nfiles = argc - 2;
    if (strcmp(mode, "sass") == 0 && g_nfiles != 2) {
        fprintf(stderr, "%s: mode %s takes TOOL LIB\n", argv[0], mode);
        return 2;
    }
    if (strcmp(mode, "sass") == 0 && access(g_files[0], X_OK) != 0) {
        printf("skip: cuobjdump not found (%s); the SASS scan runs where the CUDA toolkit "
               "has it\n",
               g_files[0]);
        return SKIP_EXIT;
    }
    Suite *s = make_suite(mode);
    if (!s) {
        fprintf(stderr, "%s: unknown mode %s\n", argv[0], mode);
        return 2;
    }
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
