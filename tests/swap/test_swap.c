/*
 * test_swap.c — Check tests of hot-swapping in auxtrunk-host (swap.h) and of
 * the second CPU kernel version it swaps to (cpu-blocked).
 *
 * Suites (CK_RUN_SUITE selects one):
 *   blocked   cpu-blocked is bit-identical to cpu-ref and canon32, close to ref64
 *   sha256    the digest against FIPS 180-4 test vectors
 *   train     swaps in the middle of training: loss curve and final state
 *             bit-identical to an unswapped run; a non-exact version accepted
 *   refuse    every bad file refused with its reason while training goes on
 *   rollback  a version failing on probation rolls back; not after probation
 *   watch     inotify (rename, copy-over), polling, SIGHUP
 *   security  file/directory mode and owner, SHA-256 allow-list
 *   supervise the supervised child: group killed, deadline, bounded output
 *   soak      1000+ swaps: no growth of RSS, descriptors or mapped libraries
 *
 * Training tests run the real program (what an operator runs); watching,
 * security and the soak call the swap API directly. Fork mode; CPU only.
 */
#define _GNU_SOURCE /* strsignal */
#include <check.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "canon32.h"
#include "layout.h"
#include "loader.h"
#include "ref64.h"
#include "rng.h"
#include "scratch.h"
#include "sha256.h"
#include "supervise.h"
#include "swap.h"
#include "trunk.h"

extern char **environ;

/* The soak's bound on RSS growth over 1000 swaps. Under AddressSanitizer
 * (the sanitizer build, run without quarantine) its own bookkeeping adds
 * 1.4 to 2.4 MiB there; a swap that leaked its copy of the plugin would add
 * over 100 MiB. */
#if defined(__SANITIZE_ADDRESS__)
#define SOAK_RSS_SLACK_KB 8192
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_RSS_SLACK_KB 8192
#endif
#endif
#ifndef SOAK_RSS_SLACK_KB
#define SOAK_RSS_SLACK_KB 2048
#endif

#define CPU_SO CPU_PLUGIN_DIR "/libauxtrunk.so"
#define BLOCKED_SO BLOCKED_PLUGIN_DIR "/libauxtrunk.so"
#define FX(kind) FX_DIR "/" kind "/libauxtrunk.so"

/* ------------------------------------------------------------------------- */
/* Scratch directory, files, subprocesses                                    */

static void copy_file(const char *src, const char *dst, mode_t mode)
{
    size_t n;
    char *data = tst_slurp(src, &n);
    tst_spit(dst, data, n, mode);
    free(data);
}

/* A plugin directory (0755) holding a copy of src (0644). */
static char *plugin_dir(const char *name, const char *src)
{
    char *dir = tst_path_in(name);
    ck_assert(mkdir(dir, 0755) == 0);
    char file[4300];
    snprintf(file, sizeof file, "%s/libauxtrunk.so", dir);
    copy_file(src, file, 0644);
    return dir;
}

/* Replaces dir/libauxtrunk.so as a deploy tool does: write aside, rename. */
static void deploy_rename(const char *dir, const char *src)
{
    char tmp[4300], file[4300];
    snprintf(tmp, sizeof tmp, "%s/.libauxtrunk.so.new", dir);
    snprintf(file, sizeof file, "%s/libauxtrunk.so", dir);
    copy_file(src, tmp, 0644);
    ck_assert(rename(tmp, file) == 0);
}

static char *g_out;

/* Runs auxtrunk-host with the NULL-terminated arguments; stdout and stderr
 * both go to <scratch>/<tag>.out (loaded into g_out). Returns the exit code,
 * or -1 if it died by a signal. */
static int run_host(const char *tag, ...)
{
    char *argv[96];
    int argc = 0;
    argv[argc++] = (char *)AUXTRUNK_HOST_EXE;
    va_list ap;
    va_start(ap, tag);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        ck_assert(argc < 95);
        argv[argc++] = (char *)a;
    }
    va_end(ap);
    argv[argc] = NULL;
    char *out = tst_path_in(tag);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, AUXTRUNK_HOST_EXE, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_msg(rc == 0, "posix_spawn: %s", strerror(rc));
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    free(g_out);
    g_out = tst_slurp(out, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The line of g_out containing `key`, or NULL. (Static buffer.) */
static const char *line_with(const char *key)
{
    static char line[4096];
    const char *p = strstr(g_out, key);
    if (!p)
        return NULL;
    const char *b = p;
    while (b > g_out && b[-1] != '\n')
        b--;
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - b) : strlen(b);
    if (n >= sizeof line)
        n = sizeof line - 1;
    memcpy(line, b, n);
    line[n] = '\0';
    return line;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *da = tst_slurp(a, &na), *db = tst_slurp(b, &nb);
    ck_assert_msg(na == nb && memcmp(da, db, na) == 0, "%s and %s differ (%zu vs %zu bytes)", a, b,
                  na, nb);
    free(da);
    free(db);
}

/* The small training task every exe-level test uses: batch 300 crosses a
 * canonical chunk boundary, so the batch-sum tree is exercised too. */
#define TASK                                                                                    \
    "--enc", "24", "--h1", "20", "--h2", "17", "--aux", "9", "--batch", "300", "--steps", "40", \
        "--quiet"

/* The unswapped run: its CSV and checkpoint are the reference. */
static void reference_run(void)
{
    int rc = run_host("ref.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--csv",
                      tst_path_in("ref.csv"), "--checkpoint", tst_path_in("ref.ckpt"), NULL);
    ck_assert_msg(rc == 0, "reference run failed (%d):\n%s", rc, g_out);
}

static void assert_same_as_reference(const char *csv, const char *ckpt)
{
    assert_same_file(tst_path_in("ref.csv"), csv);
    assert_same_file(tst_path_in("ref.ckpt"), ckpt);
}

/* ------------------------------------------------------------------------- */
/* blocked: the second kernel version                                        */

#define POISON 0x7FC0DEADu

static void poison(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        memcpy(&p[i], &(uint32_t){POISON}, 4);
}

static void assert_written(const float *p, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &p[i], 4);
        ck_assert_msg(u != POISON, "%s[%zu] was not written", what, i);
    }
}

static void assert_bits(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&a[i], &b[i], 4) == 0, "%s[%zu]: %.9g vs %.9g", what, i, (double)a[i],
                      (double)b[i]);
}

typedef struct shape {
    int enc, h1, h2, aux, batch;
} shape_t;

static void blocked_case(shape_t sh, tst_rng_t *rng)
{
    auxtrunk_config_t c = {sizeof c, 0, sh.enc, sh.h1, sh.h2, sh.aux, sh.batch, -1};
    ath_plugin_t cpu, blk;
    ath_err_t err;
    ck_assert_msg(ath_plugin_load(CPU_SO, &cpu, &err) == ATH_LOAD_OK, "%s", err.msg);
    ck_assert_msg(ath_plugin_load(BLOCKED_SO, &blk, &err) == ATH_LOAD_OK, "%s", err.msg);
    ck_assert_str_eq(blk.api.impl_name, "cpu-blocked");
    ck_assert_str_eq(blk.api.kernel_version, CPU_BLOCKED_KERNEL_VERSION);
    ck_assert(blk.api.caps & AUXTRUNK_CAP_EXACT);
    ck_assert(ath_plugin_init(&cpu, &c, &err) == ATH_LOAD_OK);
    ck_assert(ath_plugin_init(&blk, &c, &err) == ATH_LOAD_OK);

    ath_layout_t l = ath_layout_of(&c);
    size_t B = (size_t)sh.batch, nx = B * sh.enc, no = B * sh.aux;
    float *par = malloc(l.count * 4), *x = malloc(nx * 4), *dout = malloc(no * 4);
    float *o1 = malloc(no * 4), *o2 = malloc(no * 4), *o3 = malloc(no * 4);
    float *g1 = malloc(l.count * 4), *g2 = malloc(l.count * 4), *g3 = malloc(l.count * 4);
    ck_assert(par && x && dout && o1 && o2 && o3 && g1 && g2 && g3);
    tst_rng_fill(rng, par, l.count, -0.5f, 0.5f);
    tst_rng_fill(rng, x, nx, -2.0f, 2.0f);
    tst_rng_fill(rng, dout, no, -1.0f, 1.0f);
    auxtrunk_params_t p = ath_params_view(&c, par);

    poison(o1, no);
    poison(o2, no);
    ck_assert(cpu.api.forward(cpu.handle, &p, x, sh.batch, o1, 0, NULL) == AUXTRUNK_OK);
    ck_assert(blk.api.forward(blk.handle, &p, x, sh.batch, o2, 0, NULL) == AUXTRUNK_OK);
    assert_written(o2, no, "out");
    assert_bits(o1, o2, no, "out (cpu-ref vs cpu-blocked)");
    poison(o3, no);
    ck_assert(blk.api.infer(blk.handle, &p, x, sh.batch, o3, 0, NULL) == AUXTRUNK_OK);
    assert_bits(o2, o3, no, "infer vs forward");

    ref64_dims_t d = {sh.enc, sh.h1, sh.h2, sh.aux};
    ref64_params_t rp = {p.w1, p.b1, p.w2, p.b2, p.w3, p.b3};
    canon32_forward(d, &rp, x, sh.batch, NULL, NULL, o3);
    assert_bits(o3, o2, no, "out (canon32 vs cpu-blocked)");
    double *r64 = malloc(no * sizeof(double));
    ck_assert(r64);
    ref64_forward(d, &rp, x, sh.batch, NULL, NULL, r64);
    double e = ref64_max_rel_err(o2, r64, no);
    ck_assert_msg(e < 1e-4, "out vs ref64: relative error %g", e);
    free(r64);

    auxtrunk_grads_t q1 = ath_grads_view(&c, g1), q2 = ath_grads_view(&c, g2);
    poison(g1, l.count);
    poison(g2, l.count);
    ck_assert(cpu.api.backward(cpu.handle, &p, x, dout, sh.batch, &q1, 0, NULL) == AUXTRUNK_OK);
    ck_assert(blk.api.backward(blk.handle, &p, x, dout, sh.batch, &q2, 0, NULL) == AUXTRUNK_OK);
    assert_written(g2, l.count, "grads");
    assert_bits(g1, g2, l.count, "grads (cpu-ref vs cpu-blocked)");
    ck_assert(canon32_backward(d, &rp, x, dout, sh.batch, g3 + l.w1, g3 + l.b1, g3 + l.w2,
                               g3 + l.b2, g3 + l.w3, g3 + l.b3) == 0);
    assert_bits(g3, g2, l.count, "grads (canon32 vs cpu-blocked)");

    /* Accumulate onto the same random contents. */
    tst_rng_fill(rng, g1, l.count, -1.0f, 1.0f);
    memcpy(g2, g1, l.count * 4);
    ck_assert(cpu.api.backward(cpu.handle, &p, x, dout, sh.batch, &q1, AUXTRUNK_BACKWARD_ACCUMULATE,
                               NULL) == AUXTRUNK_OK);
    ck_assert(blk.api.backward(blk.handle, &p, x, dout, sh.batch, &q2, AUXTRUNK_BACKWARD_ACCUMULATE,
                               NULL) == AUXTRUNK_OK);
    assert_bits(g1, g2, l.count, "accumulated grads");

    /* A smaller batch on the same handle (workspace sized for max_batch). */
    int32_t b2 = sh.batch > 1 ? sh.batch / 2 + 1 : 1;
    ck_assert(cpu.api.forward(cpu.handle, &p, x, b2, o1, 0, NULL) == AUXTRUNK_OK);
    ck_assert(blk.api.forward(blk.handle, &p, x, b2, o2, 0, NULL) == AUXTRUNK_OK);
    ck_assert(cpu.api.backward(cpu.handle, &p, x, dout, b2, &q1, 0, NULL) == AUXTRUNK_OK);
    ck_assert(blk.api.backward(blk.handle, &p, x, dout, b2, &q2, 0, NULL) == AUXTRUNK_OK);
    assert_bits(o1, o2, (size_t)b2 * sh.aux, "out at the smaller batch");
    assert_bits(g1, g2, l.count, "grads at the smaller batch");

    free(par), free(x), free(dout), free(o1), free(o2), free(o3), free(g1), free(g2), free(g3);
    ath_plugin_unload(&cpu);
    ath_plugin_unload(&blk);
}

START_TEST(test_blocked_matches_cpu_and_canon)
{
    tst_rng_t rng;
    tst_rng_seed(&rng, tst_seed("swap/blocked"));
    /* Widths off the 4 x 16 tile, batches of 1..6 chunks (6: the pairwise
     * tree differs from a running sum), and a width above the 4096-float sum
     * tile (one row per tile). */
    const shape_t shapes[] = {
        {1, 1, 1, 1, 1},      {5, 17, 3, 33, 7},    {24, 20, 17, 9, 300},
        {16, 32, 16, 8, 513}, {3, 4099, 5, 2, 260}, {7, 9, 5, 3, 1300},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        blocked_case(shapes[i], &rng);
    /* And random shapes. */
    for (int i = 0; i < 3; i++) {
        shape_t s = {1 + (int)(tst_rng_next(&rng) % 40), 1 + (int)(tst_rng_next(&rng) % 40),
                     1 + (int)(tst_rng_next(&rng) % 40), 1 + (int)(tst_rng_next(&rng) % 40),
                     1 + (int)(tst_rng_next(&rng) % 600)};
        blocked_case(s, &rng);
    }
}
END_TEST

/* ------------------------------------------------------------------------- */
/* sha256                                                                    */

static void sha_of(const void *data, size_t n, char hex[ATH_SHA256_HEX])
{
    ath_sha256_t s;
    uint8_t d[ATH_SHA256_BYTES];
    ath_sha256_init(&s);
    ath_sha256_update(&s, data, n);
    ath_sha256_final(&s, d);
    ath_sha256_hex(d, hex);
}

START_TEST(test_sha256_vectors)
{
    char hex[ATH_SHA256_HEX];
    sha_of("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_of("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_of(m448, strlen(m448), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* One million 'a', fed in uneven pieces (block boundaries everywhere). */
    ath_sha256_t s;
    ath_sha256_init(&s);
    char a[997];
    memset(a, 'a', sizeof a);
    size_t left = 1000000;
    for (size_t k = 1; left > 0; k = k % 997 + 1) {
        size_t n = k < left ? k : left;
        ath_sha256_update(&s, a, n);
        left -= n;
    }
    uint8_t d[ATH_SHA256_BYTES];
    ath_sha256_final(&s, d);
    ath_sha256_hex(d, hex);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* Lengths around the padding boundary (55, 56, 63, 64 bytes) agree
     * between one update and byte-at-a-time updates. */
    char buf[130];
    memset(buf, 0x5a, sizeof buf);
    for (size_t n = 50; n < 130; n++) {
        char one[ATH_SHA256_HEX], many[ATH_SHA256_HEX];
        sha_of(buf, n, one);
        ath_sha256_init(&s);
        for (size_t i = 0; i < n; i++)
            ath_sha256_update(&s, buf + i, 1);
        ath_sha256_final(&s, d);
        ath_sha256_hex(d, many);
        ck_assert_str_eq(one, many);
    }
    tst_scratch(AUXTRUNK_TEST_TMP);
    tst_spit(tst_path_in("abc"), "abc", 3, 0644);
    ck_assert(ath_sha256_file(tst_path_in("abc"), hex) == 0);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert(ath_sha256_file(tst_path_in("missing"), hex) == -1);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* train: swaps in the middle of training                                    */

START_TEST(test_swap_curve_bit_identical)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    reference_run();
    char a1[4400], a2[4400], a3[4400];
    snprintf(a1, sizeof a1, "10:%s", BLOCKED_PLUGIN_DIR);
    snprintf(a2, sizeof a2, "25:%s", CPU_PLUGIN_DIR);
    snprintf(a3, sizeof a3, "31:%s", BLOCKED_SO);
    int rc =
        run_host("swap.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--csv",
                 tst_path_in("swap.csv"), "--checkpoint", tst_path_in("swap.ckpt"), "--swap-at", a1,
                 "--swap-at", a2, "--swap-at", a3, "--rollback-steps", "3", NULL);
    ck_assert_msg(rc == 0, "swapped run failed (%d):\n%s", rc, g_out);
    ck_assert_msg(count_of(g_out, ": took ") == 3, "expected three swaps:\n%s", g_out);
    const char *l = line_with("after step 10 (--swap-at): took cpu-blocked");
    ck_assert_msg(l && strstr(l, "[" CPU_BLOCKED_KERNEL_VERSION "]") &&
                      strstr(l, "replacing cpu-ref [" CPU_REF_KERNEL_VERSION "]") &&
                      strstr(l, "bit-identical") && strstr(l, " ms]"),
                  "swap line lacks a version, the canary or the time:\n%s", g_out);
    ck_assert_msg(line_with("after step 25 (--swap-at): took cpu-ref") != NULL, "%s", g_out);
    ck_assert_msg(line_with("after step 31 (--swap-at): took cpu-blocked") != NULL, "%s", g_out);
    ck_assert_msg(line_with("summary: plugin cpu-blocked") != NULL, "%s", g_out);
    ck_assert_msg(line_with("summary: hot-swap: 3 taken, 0 refused") != NULL, "%s", g_out);
    assert_same_as_reference(tst_path_in("swap.csv"), tst_path_in("swap.ckpt"));
    tst_scratch_done();
}
END_TEST

START_TEST(test_swap_inexact_within_tolerance)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char a1[4400];
    snprintf(a1, sizeof a1, "5:%s", FX("inexact"));
    int rc = run_host("inexact.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--swap-at", a1,
                      NULL);
    ck_assert_msg(rc == 0, "run failed (%d):\n%s", rc, g_out);
    const char *l = line_with("took fixture");
    ck_assert_msg(l && strstr(l, "within tolerance"), "non-exact version not taken:\n%s", g_out);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* refuse: every bad file, training goes on                                  */

/* A copy of the CPU plugin cut in half, and one claiming another machine. */
static void make_bad_files(void)
{
    size_t n;
    char *so = tst_slurp(CPU_SO, &n);
    tst_spit(tst_path_in("truncated.so"), so, n / 2, 0644);
    Elf64_Ehdr eh;
    memcpy(&eh, so, sizeof eh);
#if defined(__x86_64__)
    eh.e_machine = EM_AARCH64;
#else
    eh.e_machine = EM_X86_64;
#endif
    memcpy(so, &eh, sizeof eh);
    tst_spit(tst_path_in("otherarch.so"), so, n, 0644);
    free(so);
    const char text[] = "#!/bin/sh\necho this is not a plugin\n";
    tst_spit(tst_path_in("notelf.so"), text, sizeof text - 1, 0644);
}

START_TEST(test_refuse_every_bad_file)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    reference_run();
    make_bad_files();
    static const struct {
        const char *file;      /* in the scratch dir if no '/' */
        const char *expect[2]; /* both on the refusal line */
    } bad[] = {
        {"truncated.so", {"not-loadable", "truncated"}},
        {"notelf.so", {"not-loadable", "not an ELF file"}},
        {"otherarch.so", {"not-loadable", "another architecture"}},
        {"missing.so", {"no-file", "No such file"}},
        {FX("no_export"), {"no-entry", "no entry symbol"}},
        {FX("abi_new"), {"incompatible-abi", "speaks no version"}},
        {FX("crash_init"), {"crashed", "during init"}},
        {FX("hang_init"), {"hung", "during init"}},
        {FX("crash_canary"), {"crashed", "during the canary"}},
        {FX("hang_canary"), {"hung", "during the canary"}},
        {FX("wrong_grad"), {"canary-failed", "dW2[0] differs in exact mode"}},
        {FX("nan_out"), {"canary-failed", "out[0] is nan"}},
        {FX("inexact_far"), {"canary-failed", "above the tolerance"}},
    };
    const int n = (int)(sizeof bad / sizeof bad[0]);
    static char at[16][4400];
    const char *argv_at[32];
    for (int i = 0; i < n; i++) {
        const char *f = strchr(bad[i].file, '/') ? bad[i].file : tst_path_in(bad[i].file);
        snprintf(at[i], sizeof at[i], "%d:%s", 2 + 2 * i, f);
        argv_at[2 * i] = "--swap-at";
        argv_at[2 * i + 1] = at[i];
    }
    ck_assert(n == 13);
#define A2(i) argv_at[2 * (i)], argv_at[2 * (i) + 1]
    int rc = run_host("refuse.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--csv",
                      tst_path_in("refuse.csv"), "--checkpoint", tst_path_in("refuse.ckpt"),
                      "--swap-timeout", "2", A2(0), A2(1), A2(2), A2(3), A2(4), A2(5), A2(6), A2(7),
                      A2(8), A2(9), A2(10), A2(11), A2(12), NULL);
#undef A2
    ck_assert_msg(rc == 0, "training did not survive the bad files (%d):\n%s", rc, g_out);
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "after step %d (--swap-at): refused", 2 + 2 * i);
        const char *l = line_with(key);
        ck_assert_msg(l != NULL, "no refusal for %s:\n%s", bad[i].file, g_out);
        for (int k = 0; k < 2; k++)
            ck_assert_msg(strstr(l, bad[i].expect[k]) != NULL, "refusal of %s lacks '%s': %s",
                          bad[i].file, bad[i].expect[k], l);
        ck_assert_msg(strstr(l, "cpu-ref [" CPU_REF_KERNEL_VERSION "] keeps running") &&
                          strstr(l, " ms]"),
                      "refusal line lacks the running version or the time: %s", l);
    }
    /* Messages name the deployed file, not the private copy. */
    const char *ne = line_with("after step 4 (--swap-at)");
    ck_assert_msg(ne && strstr(ne, "notelf.so is not loadable") && !strstr(ne, "auxtrunk-swap-"),
                  "%s", ne ? ne : g_out);
    /* Once the child got that far, the candidate's own names are logged. */
    const char *l = line_with("after step 14 (--swap-at)");
    ck_assert_msg(l && strstr(l, "(candidate fixture [fixture 1])"), "%s", l ? l : g_out);
    ck_assert_msg(line_with("summary: hot-swap: 0 taken, 13 refused") != NULL, "%s", g_out);
    assert_same_as_reference(tst_path_in("refuse.csv"), tst_path_in("refuse.ckpt"));
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* rollback                                                                  */

static void rollback_case(const char *fixture, const char *why)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    reference_run();
    char a1[4400];
    snprintf(a1, sizeof a1, "10:%s", fixture);
    int rc = run_host("rb.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--csv",
                      tst_path_in("rb.csv"), "--checkpoint", tst_path_in("rb.ckpt"), "--swap-at",
                      a1, NULL);
    ck_assert_msg(rc == 0, "run failed (%d):\n%s", rc, g_out);
    ck_assert_msg(line_with("after step 10 (--swap-at): took fixture") != NULL, "%s", g_out);
    /* Canary: forward call 1; steps 11 and 12 are calls 2 and 3; step 13 fails. */
    const char *l = line_with("swap: step 13: rolled back from fixture");
    ck_assert_msg(l && strstr(l, "to cpu-ref [" CPU_REF_KERNEL_VERSION "]") && strstr(l, why),
                  "no rollback at step 13 naming '%s':\n%s", why, g_out);
    ck_assert_msg(line_with("summary: plugin cpu-ref") != NULL, "%s", g_out);
    ck_assert_msg(line_with("1 rolled back") != NULL, "%s", g_out);
    /* The failed step was redone with the good version: nothing changed. */
    assert_same_as_reference(tst_path_in("rb.csv"), tst_path_in("rb.ckpt"));
    tst_scratch_done();
}

START_TEST(test_rollback_on_status) { rollback_case(FX("fail_later"), "internal error"); }
END_TEST

START_TEST(test_rollback_on_nan_loss) { rollback_case(FX("nan_later"), "not finite"); }
END_TEST

START_TEST(test_rolled_back_file_refused_again)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char a1[4400], a2[4400];
    snprintf(a1, sizeof a1, "10:%s", FX("fail_later"));
    snprintf(a2, sizeof a2, "20:%s", FX("fail_later"));
    int rc = run_host("again.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--swap-at", a1,
                      "--swap-at", a2, NULL);
    ck_assert_msg(rc == 0, "run failed (%d):\n%s", rc, g_out);
    const char *l = line_with("after step 20 (--swap-at): refused");
    ck_assert_msg(l && strstr(l, "rolled-back-before") && strstr(l, "after step 13"), "%s", g_out);
    tst_scratch_done();
}
END_TEST

/* Every version rolled back is refused when offered again, not only the
 * last one: A fails and is rolled back, then B, then A is offered again. */
START_TEST(test_every_rolled_back_digest_refused)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char a1[4400], a2[4400], a3[4400];
    snprintf(a1, sizeof a1, "10:%s", FX("fail_later"));
    snprintf(a2, sizeof a2, "20:%s", FX("nan_later"));
    snprintf(a3, sizeof a3, "30:%s", FX("fail_later"));
    int rc = run_host("rb2.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--swap-at", a1,
                      "--swap-at", a2, "--swap-at", a3, NULL);
    ck_assert_msg(rc == 0, "run failed (%d):\n%s", rc, g_out);
    ck_assert_msg(line_with("swap: step 13: rolled back from fixture") != NULL, "%s", g_out);
    ck_assert_msg(line_with("swap: step 23: rolled back from fixture") != NULL, "%s", g_out);
    const char *l = line_with("after step 30 (--swap-at): refused");
    ck_assert_msg(l && strstr(l, "rolled-back-before") && strstr(l, "after step 13"),
                  "the first rolled-back version was not refused again:\n%s", g_out);
    ck_assert_msg(line_with("2 rolled back") != NULL, "%s", g_out);
    tst_scratch_done();
}
END_TEST

START_TEST(test_no_rollback_after_probation)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char a1[4400];
    snprintf(a1, sizeof a1, "10:%s", FX("fail_later"));
    int rc = run_host("late.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--swap-at", a1,
                      "--rollback-steps", "1", NULL);
    ck_assert_msg(rc == 1, "a failure after probation must end the run (rc %d):\n%s", rc, g_out);
    ck_assert_msg(line_with("probation over; unloaded cpu-ref") != NULL, "%s", g_out);
    ck_assert_msg(strstr(g_out, "rolled back") == NULL, "%s", g_out);
    ck_assert_msg(strstr(g_out, "internal error") != NULL, "%s", g_out);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The swap API on a tiny topology                                           */

typedef struct api {
    ath_swap_t *s;
    ath_trunk_t live;
    auxtrunk_config_t c;
    float *params;
    char log[4300];
    FILE *logf;
    uint64_t step;
} api_t;

/* Creates a swapper with o (log redirected) and opens plugin. Returns the
 * open status; the swapper exists either way. */
static ath_load_status_t api_open(api_t *a, ath_swap_opts_t *o, const char *plugin, ath_err_t *err)
{
    memset(a, 0, sizeof *a);
    a->c = (auxtrunk_config_t){sizeof a->c, 0, 8, 8, 8, 4, 16, -1};
    snprintf(a->log, sizeof a->log, "%s/api-%d.log", tst_scratch_dir(), (int)getpid());
    a->logf = fopen(a->log, "w");
    ck_assert(a->logf != NULL);
    o->log = a->logf;
    ck_assert_msg(ath_swap_create(&a->s, o, &a->c, -1, err) == 0, "%s", err->msg);
    a->params = malloc(ath_layout_of(&a->c).count * sizeof(float));
    ck_assert(a->params != NULL);
    tst_rng_t rng;
    tst_rng_seed(&rng, 7);
    tst_rng_fill(&rng, a->params, ath_layout_of(&a->c).count, -0.5f, 0.5f);
    return ath_swap_open(a->s, plugin, &a->live, err);
}

static char *api_log(api_t *a)
{
    fflush(a->logf);
    return tst_slurp(a->log, NULL);
}

static void api_close(api_t *a)
{
    ath_swap_destroy(a->s);
    ath_trunk_close(&a->live);
    fclose(a->logf);
    free(a->params);
}

/* The live version computes (a forward and a backward on real data). */
static void api_live_works(api_t *a)
{
    float x[16 * 8], out[16 * 4], dout[16 * 4];
    float *g = malloc(ath_layout_of(&a->c).count * sizeof(float));
    for (int i = 0; i < 16 * 8; i++)
        x[i] = (float)(i % 7) * 0.1f;
    for (int i = 0; i < 16 * 4; i++)
        dout[i] = 0.01f;
    ath_err_t err;
    ck_assert_msg(ath_trunk_forward(&a->live, a->params, x, 16, out, &err) == 0, "%s", err.msg);
    ck_assert_msg(ath_trunk_backward(&a->live, dout, 16, g, &err) == 0, "%s", err.msg);
    free(g);
}

/* Polls between "steps" until `taken` swaps happened or 5 s passed. */
static void api_wait_taken(api_t *a, unsigned taken)
{
    double end = ath_now_s() + 5.0;
    while (ath_swap_stats(a->s).taken + ath_swap_stats(a->s).refused < taken && ath_now_s() < end) {
        ath_swap_poll(a->s, ++a->step, a->params, &a->live);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

static const char *live_name(const api_t *a) { return a->live.plugin.api.impl_name; }

/* ------------------------------------------------------------------------- */
/* watch                                                                     */

static void watch_case(int poll_ms, int copy_over, const char *trigger)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char *dir = plugin_dir("pd", CPU_SO);
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o);
    o.watch = 1;
    o.poll_ms = poll_ms;
    api_t a;
    ath_err_t err;
    ck_assert_msg(api_open(&a, &o, dir, &err) == ATH_LOAD_OK, "%s", err.msg);
    ck_assert_str_eq(live_name(&a), "cpu-ref");
    /* Nothing changed: polling takes nothing. */
    for (int i = 0; i < 20; i++)
        ath_swap_poll(a.s, ++a.step, a.params, &a.live);
    ck_assert_uint_eq(ath_swap_stats(a.s).taken, 0);

    char file[4300];
    snprintf(file, sizeof file, "%s/libauxtrunk.so", dir);
    if (copy_over)
        copy_file(BLOCKED_SO, file, 0644); /* in place: the live copy is private */
    else
        deploy_rename(dir, BLOCKED_SO);
    api_wait_taken(&a, 1);
    char *log = api_log(&a);
    ck_assert_msg(ath_swap_stats(a.s).taken == 1, "the new file was not taken:\n%s", log);
    ck_assert_str_eq(live_name(&a), "cpu-blocked");
    ck_assert_msg(strstr(log, trigger) != NULL, "no '%s' in:\n%s", trigger, log);
    api_live_works(&a);

    /* A bad file dropped in is refused and the live version keeps working;
     * a good one after it is taken. */
    char bad[4300];
    snprintf(bad, sizeof bad, "%s/notelf", tst_scratch_dir());
    tst_spit(bad, "not a plugin\n", 13, 0644);
    deploy_rename(dir, bad);
    api_wait_taken(&a, 2);
    ck_assert_uint_eq(ath_swap_stats(a.s).refused, 1);
    ck_assert_str_eq(live_name(&a), "cpu-blocked");
    api_live_works(&a);
    deploy_rename(dir, CPU_SO);
    api_wait_taken(&a, 3);
    free(log);
    log = api_log(&a);
    ck_assert_msg(ath_swap_stats(a.s).taken == 2, "%s", log);
    ck_assert_str_eq(live_name(&a), "cpu-ref");
    free(log);
    api_close(&a);
    tst_scratch_done();
}

/* A plugin directory "pd" holding the CPU plugin, watched (inotify) by a
 * swapper that runs it; file gets the path of its libauxtrunk.so. */
static char *watched_dir(api_t *a, char *file, size_t n)
{
    char *dir = plugin_dir("pd", CPU_SO);
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o);
    o.watch = 1;
    ath_err_t err;
    ck_assert_msg(api_open(a, &o, dir, &err) == ATH_LOAD_OK, "%s", err.msg);
    snprintf(file, n, "%s/libauxtrunk.so", dir);
    return dir;
}

/* The watched directory replaced (renamed away, a new one put at its
 * path): the watch must not go deaf. It says so, watches the new directory
 * and takes what is there and what is deployed into it later; the same with
 * the directory deleted and re-created. */
static void dir_replaced_case(int remove_old)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    api_t a;
    char old[4400], file[4400];
    char *dir = watched_dir(&a, file, sizeof file);
    snprintf(old, sizeof old, "%s.old", dir);
    if (remove_old) {
        ck_assert(unlink(file) == 0);
        ck_assert(rmdir(dir) == 0);
    } else {
        ck_assert(rename(dir, old) == 0);
    }
    ck_assert(mkdir(dir, 0755) == 0);
    copy_file(BLOCKED_SO, file, 0644);
    api_wait_taken(&a, 1);
    char *log = api_log(&a);
    ck_assert_msg(strstr(log, "was replaced; watching the new one") || strstr(log, "is gone"),
                  "the replacement of the directory went unnoticed:\n%s", log);
    ck_assert_msg(ath_swap_stats(a.s).taken == 1, "%s", log);
    ck_assert_str_eq(live_name(&a), "cpu-blocked");
    free(log);
    /* And it still hears the new directory. */
    deploy_rename(dir, CPU_SO);
    api_wait_taken(&a, 2);
    log = api_log(&a);
    ck_assert_msg(ath_swap_stats(a.s).taken == 2, "deaf after the directory was replaced:\n%s",
                  log);
    ck_assert_str_eq(live_name(&a), "cpu-ref");
    free(log);
    api_close(&a);
    tst_scratch_done();
}

START_TEST(test_watch_dir_renamed_away) { dir_replaced_case(0); }
END_TEST

START_TEST(test_watch_dir_deleted) { dir_replaced_case(1); }
END_TEST

START_TEST(test_watch_inotify_rename) { watch_case(0, 0, "(inotify): took cpu-blocked"); }
END_TEST

START_TEST(test_watch_inotify_copy_over) { watch_case(0, 1, "(inotify): took cpu-blocked"); }
END_TEST

START_TEST(test_watch_polling) { watch_case(20, 0, "(poll): took cpu-blocked"); }
END_TEST

START_TEST(test_sighup_swaps_on_demand)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char *dir = plugin_dir("pd", CPU_SO);
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o); /* no watching: only the signal triggers */
    api_t a;
    ath_err_t err;
    ck_assert_msg(api_open(&a, &o, dir, &err) == ATH_LOAD_OK, "%s", err.msg);
    deploy_rename(dir, BLOCKED_SO);
    for (int i = 0; i < 20; i++)
        ath_swap_poll(a.s, ++a.step, a.params, &a.live);
    ck_assert_uint_eq(ath_swap_stats(a.s).taken, 0);
    ck_assert(raise(SIGHUP) == 0); /* the process survives: the handler only notes it */
    ath_swap_poll(a.s, ++a.step, a.params, &a.live);
    char *log = api_log(&a);
    ck_assert_msg(ath_swap_stats(a.s).taken == 1 && strstr(log, "(SIGHUP): took cpu-blocked"), "%s",
                  log);
    /* Asking again for the same file does nothing. */
    ck_assert(raise(SIGHUP) == 0);
    ath_swap_poll(a.s, ++a.step, a.params, &a.live);
    ck_assert_uint_eq(ath_swap_stats(a.s).unchanged, 1);
    free(log);
    api_close(&a);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* security                                                                  */

static ath_swap_outcome_t try_file(api_t *a, const char *file, ath_swap_result_t *res)
{
    return ath_swap_try(a->s, file, "test", ++a->step, a->params, &a->live, res);
}

START_TEST(test_security_modes)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    char *dir = plugin_dir("pd", CPU_SO);
    char *cdir = plugin_dir("cand", BLOCKED_SO);
    char cand[4300];
    snprintf(cand, sizeof cand, "%s/libauxtrunk.so", cdir);
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o);
    api_t a;
    ath_err_t err;
    ath_swap_result_t res;
    ck_assert_msg(api_open(&a, &o, dir, &err) == ATH_LOAD_OK, "%s", err.msg);

    ck_assert(chmod(cand, 0666) == 0);
    ck_assert(try_file(&a, cand, &res) == ATH_SWAP_REFUSED);
    ck_assert_str_eq(res.reason, "permissions");
    ck_assert_msg(strstr(res.msg, "writable by others"), "%s", res.msg);
    ck_assert(chmod(cand, 0664) == 0);
    ck_assert(try_file(&a, cand, &res) == ATH_SWAP_REFUSED);
    ck_assert_msg(strstr(res.msg, "writable by its group"), "%s", res.msg);
    ck_assert(chmod(cand, 0644) == 0);
    ck_assert(chmod(cdir, 0777) == 0);
    ck_assert(try_file(&a, cand, &res) == ATH_SWAP_REFUSED);
    ck_assert_msg(strstr(res.msg, "plugin directory") && strstr(res.msg, "writable by others"),
                  "%s", res.msg);
    ck_assert(chmod(cdir, 0775) == 0);
    ck_assert(try_file(&a, cand, &res) == ATH_SWAP_REFUSED);
    ck_assert_str_eq(res.reason, "permissions");
    ck_assert(chmod(cdir, 0755) == 0);
    if (geteuid() == 0) {
        ck_assert(chown(cand, 65534, 65534) == 0);
        ck_assert(try_file(&a, cand, &res) == ATH_SWAP_REFUSED);
        ck_assert_msg(strstr(res.msg, "owned by uid 65534"), "%s", res.msg);
        ck_assert(chown(cdir, 65534, 65534) == 0 && chown(cand, 0, 0) == 0);
        ck_assert(try_file(&a, cand, &res) == ATH_SWAP_REFUSED);
        ck_assert_msg(strstr(res.msg, "plugin directory") && strstr(res.msg, "owned by uid 65534"),
                      "%s", res.msg);
        ck_assert(chown(cdir, 0, 0) == 0);
    } else {
        fprintf(
            stderr,
            "swap/security: not root, foreign-owner cases need chown; checked own files only\n");
    }
    ck_assert_str_eq(live_name(&a), "cpu-ref");
    ck_assert_msg(try_file(&a, cand, &res) == ATH_SWAP_TAKEN, "%s", res.msg);
    ck_assert_str_eq(live_name(&a), "cpu-blocked");
    api_close(&a);

    /* The first version is checked too. */
    ck_assert(chmod(dir, 0777) == 0);
    ck_assert(api_open(&a, &o, dir, &err) == ATH_LOAD_NOT_LOADABLE);
    ck_assert_msg(strstr(err.msg, "writable by others"), "%s", err.msg);
    api_close(&a);
    ck_assert(chmod(dir, 0755) == 0);
    tst_scratch_done();
}
END_TEST

static void write_allow(const char *name, const char *const *files, int n)
{
    char text[1024] = "# digests this trainer may load\n";
    for (int i = 0; i < n; i++) {
        char hex[ATH_SHA256_HEX];
        ck_assert(ath_sha256_file(files[i], hex) == 0);
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len, "%s  %s\n", hex, files[i]);
    }
    tst_spit(tst_path_in(name), text, strlen(text), 0644);
}

/* Item 7: the allow-list file itself was not permission-checked: anyone
 * who could write it decided what runs. Now it passes the same owner and
 * mode checks as a plugin file (itself and its directory). */
START_TEST(test_allow_list_permissions)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *cpu_only[] = {CPU_SO};
    write_allow("cpu.sha", cpu_only, 1);
    char *list = tst_path_in("cpu.sha");
    ck_assert(chmod(list, 0664) == 0);
    int rc = run_host("gw.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--plugin-sha256",
                      list, NULL);
    ck_assert_msg(rc == 3 && strstr(g_out, "allow-list") && strstr(g_out, "writable by its group"),
                  "exit %d:\n%s", rc, g_out);
    ck_assert(chmod(list, 0644) == 0);
    if (geteuid() == 0) {
        ck_assert(chown(list, 65534, 65534) == 0);
        rc = run_host("own.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--plugin-sha256",
                      list, NULL);
        ck_assert_msg(rc == 3 && strstr(g_out, "owned by uid 65534"), "exit %d:\n%s", rc, g_out);
        ck_assert(chown(list, 0, 0) == 0);
    }
    rc = run_host("ok.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--plugin-sha256", list,
                  NULL);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    tst_scratch_done();
}
END_TEST

START_TEST(test_security_digest_allow_list)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *cpu_only[] = {CPU_SO}, *both[] = {CPU_SO, BLOCKED_SO}, *blk_only[] = {BLOCKED_SO};
    write_allow("cpu.sha", cpu_only, 1);
    write_allow("both.sha", both, 2);
    write_allow("blk.sha", blk_only, 1);
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o);
    api_t a;
    ath_err_t err;
    ath_swap_result_t res;

    o.sha256_file = tst_path_in("cpu.sha");
    ck_assert_msg(api_open(&a, &o, CPU_PLUGIN_DIR, &err) == ATH_LOAD_OK, "%s", err.msg);
    ck_assert(try_file(&a, BLOCKED_SO, &res) == ATH_SWAP_REFUSED);
    ck_assert_str_eq(res.reason, "digest");
    ck_assert_msg(strstr(res.msg, "not on the allow-list"), "%s", res.msg);
    ck_assert_str_eq(live_name(&a), "cpu-ref");
    api_close(&a);

    o.sha256_file = tst_path_in("both.sha");
    ck_assert_msg(api_open(&a, &o, CPU_PLUGIN_DIR, &err) == ATH_LOAD_OK, "%s", err.msg);
    ck_assert_msg(try_file(&a, BLOCKED_SO, &res) == ATH_SWAP_TAKEN, "%s", res.msg);
    api_close(&a);

    o.sha256_file = tst_path_in("blk.sha"); /* the first version must be listed too */
    ck_assert(api_open(&a, &o, CPU_PLUGIN_DIR, &err) == ATH_LOAD_NOT_LOADABLE);
    ck_assert_msg(strstr(err.msg, "not on the allow-list"), "%s", err.msg);
    api_close(&a);

    tst_spit(tst_path_in("junk.sha"), "not-a-digest  x\n", 16, 0644);
    memset(&o, 0, sizeof o);
    o.sha256_file = tst_path_in("junk.sha");
    auxtrunk_config_t c = {sizeof c, 0, 8, 8, 8, 4, 16, -1};
    ath_swap_t *s = NULL;
    ck_assert(ath_swap_create(&s, &o, &c, -1, &err) != 0);
    ck_assert_msg(strstr(err.msg, "not a SHA-256 digest"), "%s", err.msg);

    /* And through the program: refused at start with exit code 3. */
    int rc = run_host("sha.log", "train", "--plugin-dir", CPU_PLUGIN_DIR, TASK, "--plugin-sha256",
                      tst_path_in("blk.sha"), NULL);
    ck_assert_msg(rc == 3 && strstr(g_out, "not on the allow-list"), "rc %d:\n%s", rc, g_out);
    tst_scratch_done();
}
END_TEST

/* Vetting by fork + exec of auxtrunk-host (what a process holding a CUDA
 * context uses): the same verdicts as the plain fork. */
/* Item 5: a first plugin that crashed in its entry gave exit 139 with no
 * message, and one whose init hung hung the trainer. The first load is now
 * vetted like a candidate, in every mode: a clear refusal, exit code 3,
 * within --swap-timeout. */
START_TEST(test_first_load_vetted)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    int rc = run_host("entry.log", "train", "--plugin-dir", FX_DIR "/crash_entry", TASK, NULL);
    ck_assert_msg(rc == 3, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "crashed during loading") && strstr(g_out, "signal 11"), "%s",
                  g_out);
    rc = run_host("init.log", "train", "--plugin-dir", FX_DIR "/crash_init", TASK, NULL);
    ck_assert_msg(rc == 3 && strstr(g_out, "crashed during init"), "exit %d:\n%s", rc, g_out);
    double t0 = ath_now_s();
    rc = run_host("hang.log", "train", "--plugin-dir", FX_DIR "/hang_init", TASK,
                  "--watch-plugin-dir", "--swap-timeout", "1", NULL);
    double took = ath_now_s() - t0;
    ck_assert_msg(rc == 3 && strstr(g_out, "hung during init"), "exit %d:\n%s", rc, g_out);
    ck_assert_msg(took < 20, "a hung first plugin held the trainer %.1f s", took);
    rc = run_host("canary.log", "train", "--plugin-dir", FX_DIR "/nan_out", TASK, NULL);
    ck_assert_msg(rc == 3 && strstr(g_out, "never allowed"), "exit %d:\n%s", rc, g_out);
    tst_scratch_done();
}
END_TEST

/* Item 5: a FIFO renamed onto the watched plugin blocked the trainer in
 * open(). Now it is refused as not a regular file and training goes on. */
START_TEST(test_fifo_renamed_onto_watched_plugin)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    api_t a;
    char fifo[4400], file[4400];
    char *dir = watched_dir(&a, file, sizeof file);
    snprintf(fifo, sizeof fifo, "%s/.fifo", dir);
    ck_assert(mkfifo(fifo, 0644) == 0);
    ck_assert(rename(fifo, file) == 0);
    api_wait_taken(&a, 1);
    char *log = api_log(&a);
    ck_assert_msg(ath_swap_stats(a.s).refused == 1 && strstr(log, "FIFO"), "%s", log);
    ck_assert_str_eq(live_name(&a), "cpu-ref");
    api_live_works(&a);
    free(log);
    api_close(&a);
    tst_scratch_done();
}
END_TEST

START_TEST(test_refuse_exec_vetting)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o);
    o.vet_exe = AUXTRUNK_HOST_EXE;
    o.vet_exec_always = 1;
    o.vet_timeout_s = 2.0;
    api_t a;
    ath_err_t err;
    ath_swap_result_t res;
    ck_assert_msg(api_open(&a, &o, CPU_PLUGIN_DIR, &err) == ATH_LOAD_OK, "%s", err.msg);
    ck_assert_msg(try_file(&a, BLOCKED_SO, &res) == ATH_SWAP_TAKEN, "%s", res.msg);
    ck_assert(try_file(&a, FX("crash_canary"), &res) == ATH_SWAP_REFUSED);
    ck_assert_msg(strcmp(res.reason, "crashed") == 0 && strstr(res.msg, "during the canary"), "%s",
                  res.msg);
    ck_assert(try_file(&a, FX("hang_init"), &res) == ATH_SWAP_REFUSED);
    ck_assert_msg(strcmp(res.reason, "hung") == 0 && strstr(res.msg, "during init"), "%s", res.msg);
    ck_assert(try_file(&a, FX("wrong_grad"), &res) == ATH_SWAP_REFUSED);
    ck_assert_str_eq(res.reason, "canary-failed");
    ck_assert(try_file(&a, FX("abi_new"), &res) == ATH_SWAP_REFUSED);
    ck_assert_str_eq(res.reason, "incompatible-abi");
    ck_assert_str_eq(live_name(&a), "cpu-blocked");
    api_live_works(&a);
    ck_assert_msg(try_file(&a, CPU_SO, &res) == ATH_SWAP_TAKEN, "%s", res.msg);
    api_close(&a);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* soak                                                                      */

static long vm_rss_kb(void)
{
    char *s = tst_slurp("/proc/self/status", NULL);
    const char *p = strstr(s, "VmRSS:");
    long kb = p ? strtol(p + 6, NULL, 10) : -1;
    free(s);
    return kb;
}

static int open_fds(void)
{
    int n = 0;
    char path[64];
    for (int fd = 0; fd < 4096; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        n += access(path, F_OK) == 0;
    }
    return n;
}

static int plugin_mappings(void)
{
    char *s = tst_slurp("/proc/self/maps", NULL);
    int n = count_of(s, "libauxtrunk");
    free(s);
    return n;
}

START_TEST(test_soak_1000_swaps)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    /* The private directory lands here, to be checked. */
    setenv("TMPDIR", tst_scratch_dir(), 1);
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o);
    o.rollback_steps = 1;
    api_t a;
    ath_err_t err;
    ck_assert_msg(api_open(&a, &o, CPU_PLUGIN_DIR, &err) == ATH_LOAD_OK, "%s", err.msg);
    const int warm = 100, total = 1100;
    long rss0 = 0;
    int fds0 = 0, maps0 = 0;
    double t0 = 0.0;
    for (int i = 0; i < total; i++) {
        if (i == warm) {
            rss0 = vm_rss_kb();
            fds0 = open_fds();
            maps0 = plugin_mappings();
            t0 = ath_now_s();
        }
        ath_swap_result_t res;
        const char *file = i % 2 == 0 ? BLOCKED_SO : CPU_SO;
        ck_assert_msg(try_file(&a, file, &res) == ATH_SWAP_TAKEN, "swap %d: %s", i, res.msg);
        ath_swap_step_done(a.s, ++a.step); /* probation over: the old one is unloaded */
    }
    double per = (ath_now_s() - t0) / (total - warm) * 1e3;
    long rss1 = vm_rss_kb();
    int fds1 = open_fds(), maps1 = plugin_mappings();
    fprintf(stderr,
            "swap/soak: %d swaps, %.2f ms each; VmRSS %ld -> %ld kB, fds %d -> %d, "
            "libauxtrunk mappings %d -> %d\n",
            total, per, rss0, rss1, fds0, fds1, maps0, maps1);
    ck_assert_uint_eq(ath_swap_stats(a.s).taken, (unsigned)total);
    ck_assert_str_eq(live_name(&a), "cpu-ref");
    api_live_works(&a);
    ck_assert_int_eq(fds1, fds0);
    ck_assert_int_le(maps1, maps0);
    ck_assert_msg(rss1 - rss0 < SOAK_RSS_SLACK_KB, "VmRSS grew by %ld kB over %d swaps",
                  rss1 - rss0, total - warm);
    api_close(&a);
    /* Nothing is left behind: no private copies, no private directory. */
    ck_assert_int_eq(plugin_mappings(), 0);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -q auxtrunk-swap", tst_scratch_dir());
    ck_assert_msg(system(cmd) != 0, "a private directory was left in %s", tst_scratch_dir());
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* supervise: the one supervised child (vetting here, checks in conform)     */

/* The child starts a grandchild that would outlive it, reports the
 * grandchild's pid, then either returns or hangs. */
static void forking_body(void *arg, int fd)
{
    int hang = *(const int *)arg;
    pid_t g = fork();
    if (g == 0) {
        for (;;)
            pause();
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%d\n", (int)g);
    if (write(fd, line, (size_t)n) != n)
        _exit(3);
    while (hang)
        pause();
}

/* True once pid is gone (or a zombie: its parent, the child, is dead and
 * init reaps it; /proc shows state Z until then). */
static int gone(pid_t pid)
{
    for (int i = 0; i < 200; i++) {
        char path[64], buf[512] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return 1;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *rp = strrchr(buf, ')');
        if (rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'))
            return 1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

START_TEST(test_supervise_kills_group)
{
    for (int hang = 0; hang <= 1; hang++) {
        ath_child_spec_t spec = {.body = forking_body, .arg = &hang, .timeout_s = 0.5};
        ath_child_t ch;
        ath_err_t err;
        ck_assert_int_eq(ath_child_run(&spec, &ch, &err), 0);
        ck_assert_int_eq(ch.timed_out, hang);
        if (hang)
            ck_assert(WIFSIGNALED(ch.status) && WTERMSIG(ch.status) == SIGKILL);
        else
            ck_assert(WIFEXITED(ch.status) && WEXITSTATUS(ch.status) == 0);
        /* The grandchild holds the pipe open: without the group kill the
         * parent would also wait for the deadline when the child returned. */
        if (!hang)
            ck_assert_msg(ch.seconds < 0.45, "waited %.3f s for a child that had returned",
                          ch.seconds);
        int g = atoi(ch.out);
        ck_assert_int_gt(g, 0);
        ck_assert_msg(gone((pid_t)g), "the grandchild %d outlived the supervised child", g);
        ck_assert_int_eq(ath_child_pgid, 0);
        ath_child_free(&ch);
    }
}
END_TEST

/* Output past max_output is dropped, not buffered, and does not block. */
static void chatty_body(void *arg, int fd)
{
    (void)arg;
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 256; i++)
        if (write(fd, buf, sizeof buf) < 0)
            _exit(2);
}

START_TEST(test_supervise_bounded_output)
{
    ath_child_spec_t spec = {.body = chatty_body, .timeout_s = 20, .max_output = 1000};
    ath_child_t ch;
    ath_err_t err;
    ck_assert_int_eq(ath_child_run(&spec, &ch, &err), 0);
    ck_assert_int_eq(ch.timed_out, 0);
    ck_assert_uint_eq(ch.len, 1000);
    ck_assert_uint_eq(ch.len + ch.dropped, 256u * 4096u);
    ck_assert(WIFEXITED(ch.status) && WEXITSTATUS(ch.status) == 0);
    ath_child_free(&ch);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* main                                                                      */

static Suite *suite_of(const char *name, TCase *tc)
{
    Suite *s = suite_create(name);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(NULL);
    TCase *tc;

    tc = tcase_create("blocked");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_blocked_matches_cpu_and_canon);
    srunner_add_suite(sr, suite_of("blocked", tc));

    tc = tcase_create("sha256");
    tcase_add_test(tc, test_sha256_vectors);
    srunner_add_suite(sr, suite_of("sha256", tc));

    tc = tcase_create("train");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_swap_curve_bit_identical);
    tcase_add_test(tc, test_swap_inexact_within_tolerance);
    srunner_add_suite(sr, suite_of("train", tc));

    tc = tcase_create("refuse");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_refuse_every_bad_file);
    tcase_add_test(tc, test_refuse_exec_vetting);
    tcase_add_test(tc, test_first_load_vetted);
    tcase_add_test(tc, test_fifo_renamed_onto_watched_plugin);
    srunner_add_suite(sr, suite_of("refuse", tc));

    tc = tcase_create("rollback");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rollback_on_status);
    tcase_add_test(tc, test_rollback_on_nan_loss);
    tcase_add_test(tc, test_rolled_back_file_refused_again);
    tcase_add_test(tc, test_no_rollback_after_probation);
    tcase_add_test(tc, test_every_rolled_back_digest_refused);
    srunner_add_suite(sr, suite_of("rollback", tc));

    tc = tcase_create("watch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_watch_inotify_rename);
    tcase_add_test(tc, test_watch_inotify_copy_over);
    tcase_add_test(tc, test_watch_polling);
    tcase_add_test(tc, test_sighup_swaps_on_demand);
    tcase_add_test(tc, test_watch_dir_renamed_away);
    tcase_add_test(tc, test_watch_dir_deleted);
    srunner_add_suite(sr, suite_of("watch", tc));

    tc = tcase_create("security");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_security_modes);
    tcase_add_test(tc, test_security_digest_allow_list);
    tcase_add_test(tc, test_allow_list_permissions);
    srunner_add_suite(sr, suite_of("security", tc));

    tc = tcase_create("supervise");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_supervise_kills_group);
    tcase_add_test(tc, test_supervise_bounded_output);
    srunner_add_suite(sr, suite_of("supervise", tc));

    tc = tcase_create("soak");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_soak_1000_swaps);
    srunner_add_suite(sr, suite_of("soak", tc));

    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
