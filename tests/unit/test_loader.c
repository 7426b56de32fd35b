/*
 * test_loader.c — abi/auxtrunk_loader.h, the loader trainers install with
 * the headers: every refusal with its status and message, the search path,
 * the permission rules, the message buffer, unload, and loads from several
 * threads at once.
 *
 *   locate       explicit file and directory, names over a search path
 *                (first match, empty entries, $AUXTRUNK_PLUGIN_PATH)
 *   refusals     missing, permissions, not ELF, truncated, foreign machine,
 *                no entry, ABI, broken tables (the tests/host fixtures),
 *                bad arguments; a refusal leaves nothing mapped
 *   use          a good load, negotiate over a chosen range, unload twice,
 *                short message buffers, concurrent loads
 *
 * Fork mode: each test is its own process with its own scratch directory.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define AUXTRUNK_LOADER_IMPLEMENTATION
#include "auxtrunk_loader.h"
#include "scratch.h"

#if !defined(CPU_PLUGIN) || !defined(FX_DIR) || !defined(AUXTRUNK_TEST_TMP)
#error \
    "CPU_PLUGIN (the built CPU plugin), FX_DIR (tests/host fixtures) and AUXTRUNK_TEST_TMP must be set"
#endif

/* ------------------------------------------------------------------------- */
/* Helpers                                                                   */

static char g_msg[AUXTRUNK_LOAD_MESSAGE_MAX];

/* Loads plugin, expects status want and a message containing text; on a
 * refusal *pl must be empty and nothing of the file may stay mapped. */
static void expect_load(const char *plugin, int32_t want, const char *text)
{
    auxtrunk_plugin_t pl;
    memset(&pl, 0x5A, sizeof pl);
    int32_t s = auxtrunk_plugin_load(&pl, plugin, g_msg, sizeof g_msg);
    ck_assert_msg(s == want, "%s: got %s (%s), want %s", plugin, auxtrunk_load_status_name(s),
                  g_msg, auxtrunk_load_status_name(want));
    ck_assert_msg(strstr(g_msg, text) != NULL, "%s: message \"%s\" lacks \"%s\"", plugin, g_msg,
                  text);
    if (want == AUXTRUNK_LOAD_OK) {
        auxtrunk_plugin_unload(&pl);
        return;
    }
    const auxtrunk_plugin_t empty = {0};
    ck_assert_msg(memcmp(&pl, &empty, sizeof pl) == 0, "%s: refused, but *pl is not empty", plugin);
    char real[4096];
    if (realpath(plugin, real)) {
        char *maps = tst_slurp("/proc/self/maps", NULL);
        ck_assert_msg(strstr(maps, real) == NULL, "%s still mapped after its refusal", real);
        free(maps);
    }
}

/* A copy of the CPU plugin at <scratch>/dir/libauxtrunk.so with the given
 * modes; returns the directory. */
static const char *plugin_copy(const char *dir, mode_t dir_mode, mode_t file_mode)
{
    const char *d = tst_path_in(dir);
    ck_assert(mkdir(d, 0755) == 0);
    size_t n;
    char *so = tst_slurp(CPU_PLUGIN, &n);
    char file[4200];
    snprintf(file, sizeof file, "%s/" AUXTRUNK_PLUGIN_FILE, d);
    tst_spit(file, so, n, file_mode);
    free(so);
    ck_assert(chmod(d, dir_mode) == 0);
    return d;
}

static char *file_in(const char *dir)
{
    static char file[4200];
    snprintf(file, sizeof file, "%s/" AUXTRUNK_PLUGIN_FILE, dir);
    return file;
}

/* ------------------------------------------------------------------------- */
/* Locate                                                                    */

START_TEST(test_explicit_file_and_dir)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const char *d = plugin_copy("good", 0755, 0644);
    auxtrunk_plugin_t pl;
    ck_assert_int_eq(auxtrunk_plugin_load(&pl, d, g_msg, sizeof g_msg), AUXTRUNK_LOAD_OK);
    ck_assert_str_eq(g_msg, "");
    ck_assert_str_eq(pl.path, file_in(d));
    ck_assert_uint_eq(pl.space, AUXTRUNK_CAP_MEM_HOST);
    ck_assert_str_eq(pl.api.impl_name, "cpu-ref");
    ck_assert_uint_eq(pl.api.abi_version, AUXTRUNK_ABI_VERSION);
    ck_assert(pl.entry != NULL && pl.lib != NULL);
    auxtrunk_plugin_unload(&pl);
    /* The file itself, and the directory with a trailing slash. */
    char slash[4200];
    snprintf(slash, sizeof slash, "%s/", d);
    expect_load(file_in(d), AUXTRUNK_LOAD_OK, "");
    expect_load(slash, AUXTRUNK_LOAD_OK, "");
    tst_scratch_done();
}
END_TEST

START_TEST(test_search_path)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    /* Two roots with a plugin folder "cpu" each, one root without. */
    const char *none = tst_path_in("none");
    ck_assert(mkdir(none, 0755) == 0);
    ck_assert(mkdir(tst_path_in("a"), 0755) == 0);
    ck_assert(mkdir(tst_path_in("b"), 0755) == 0);
    plugin_copy("a/cpu", 0755, 0644);
    plugin_copy("b/cpu", 0755, 0644);
    char list[9000], path[AUXTRUNK_LOAD_PATH_MAX];
    snprintf(list, sizeof list, "::%s:%s::%s:", none, tst_path_in("b"), tst_path_in("a"));
    ck_assert_int_eq(auxtrunk_plugin_locate("cpu", list, path, sizeof path, g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_OK);
    ck_assert_str_eq(path, file_in(tst_path_in("b/cpu")));

    ck_assert_int_eq(
        auxtrunk_plugin_locate("cuda-v9", list, path, sizeof path, g_msg, sizeof g_msg),
        AUXTRUNK_LOAD_E_NO_FILE);
    ck_assert_msg(strstr(g_msg, "no plugin named cuda-v9") && strstr(g_msg, list), "%s", g_msg);
    ck_assert_str_eq(path, "");

    /* auxtrunk_plugin_load reads $AUXTRUNK_PLUGIN_PATH. */
    ck_assert(setenv(AUXTRUNK_PLUGIN_PATH_ENV, tst_path_in("a"), 1) == 0);
    auxtrunk_plugin_t pl;
    ck_assert_int_eq(auxtrunk_plugin_load(&pl, "cpu", g_msg, sizeof g_msg), AUXTRUNK_LOAD_OK);
    ck_assert_str_eq(pl.path, file_in(tst_path_in("a/cpu")));
    auxtrunk_plugin_unload(&pl);
    ck_assert(unsetenv(AUXTRUNK_PLUGIN_PATH_ENV) == 0);
    expect_load("cpu", AUXTRUNK_LOAD_E_NO_FILE, AUXTRUNK_PLUGIN_PATH_ENV " is not set");
    /* An empty list is not the current directory. */
    ck_assert(chdir(tst_path_in("a")) == 0);
    ck_assert_int_eq(auxtrunk_plugin_locate("cpu", "", path, sizeof path, g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_E_NO_FILE);
    ck_assert_int_eq(auxtrunk_plugin_locate("cpu", ":", path, sizeof path, g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_E_NO_FILE);
    tst_scratch_done();
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Refusals                                                                  */

START_TEST(test_refuses_missing)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    expect_load(tst_path_in("nothing-here"), AUXTRUNK_LOAD_E_NO_FILE, "does not exist");
    const char *empty = tst_path_in("empty");
    ck_assert(mkdir(empty, 0755) == 0);
    expect_load(empty, AUXTRUNK_LOAD_E_NO_FILE, AUXTRUNK_PLUGIN_FILE " does not exist");
    /* A directory where the file should be. */
    const char *odd = tst_path_in("odd");
    ck_assert(mkdir(odd, 0755) == 0);
    ck_assert(mkdir(file_in(odd), 0755) == 0);
    expect_load(odd, AUXTRUNK_LOAD_E_NOT_LOADABLE, "not a regular file");
    tst_scratch_done();
}
END_TEST

START_TEST(test_refuses_permissions)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    expect_load(plugin_copy("gw", 0755, 0664), AUXTRUNK_LOAD_E_PERMISSIONS, "plugin file");
    ck_assert_msg(strstr(g_msg, "writable by its group (mode 0664)"), "%s", g_msg);
    expect_load(plugin_copy("ow", 0755, 0646), AUXTRUNK_LOAD_E_PERMISSIONS, "writable by others");
    expect_load(plugin_copy("dirgw", 0775, 0644), AUXTRUNK_LOAD_E_PERMISSIONS, "plugin directory");
    ck_assert_msg(strstr(g_msg, "writable by its group"), "%s", g_msg);
    /* Sticky or not, a world-writable directory is refused. */
    expect_load(plugin_copy("tmpish", 01777, 0644), AUXTRUNK_LOAD_E_PERMISSIONS,
                "writable by others");

    /* A good file reached through a link in a world-writable directory. */
    const char *good = plugin_copy("good", 0755, 0644);
    const char *open_dir = tst_path_in("open");
    ck_assert(mkdir(open_dir, 0755) == 0);
    char target[4200];
    snprintf(target, sizeof target, "%s", file_in(good));
    ck_assert(symlink(target, file_in(open_dir)) == 0);
    expect_load(open_dir, AUXTRUNK_LOAD_OK, "");
    ck_assert(chmod(open_dir, 0777) == 0);
    expect_load(open_dir, AUXTRUNK_LOAD_E_PERMISSIONS, "open is writable by others");

    /* The rule itself: owner and mode. */
    ck_assert_int_eq(auxtrunk_plugin_check_mode(0100644, (uint32_t)geteuid(), "plugin file", "f",
                                                g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_OK);
    ck_assert_int_eq(
        auxtrunk_plugin_check_mode(0100644, 0, "plugin file", "f", g_msg, sizeof g_msg),
        AUXTRUNK_LOAD_OK);
    if (geteuid() != 65534) {
        ck_assert_int_eq(
            auxtrunk_plugin_check_mode(0100644, 65534, "plugin file", "f", g_msg, sizeof g_msg),
            AUXTRUNK_LOAD_E_PERMISSIONS);
        ck_assert_msg(strstr(g_msg, "owned by uid 65534, neither this user"), "%s", g_msg);
    }
    /* And on a real file, where this process may give one away. */
    if (geteuid() == 0) {
        const char *d = plugin_copy("foreign", 0755, 0644);
        ck_assert(chown(file_in(d), 65534, 65534) == 0);
        expect_load(d, AUXTRUNK_LOAD_E_PERMISSIONS, "owned by uid 65534");
    }
    tst_scratch_done();
}
END_TEST

/* A copy of the CPU plugin, changed by edit, then loaded. */
static void expect_corrupt(void (*edit)(char *so, size_t *n), const char *text)
{
    size_t n;
    char *so = tst_slurp(CPU_PLUGIN, &n);
    edit(so, &n);
    const char *d = tst_path_in("corrupt");
    ck_assert(mkdir(d, 0755) == 0);
    tst_spit(file_in(d), so, n, 0644);
    free(so);
    expect_load(d, AUXTRUNK_LOAD_E_NOT_LOADABLE, text);
}

static void make_text(char *so, size_t *n) { *n = (size_t)snprintf(so, *n, "not a library\n"); }
static void make_truncated(char *so, size_t *n) { (void)so, *n /= 3; }
static void make_foreign(char *so, size_t *n)
{
    (void)n;
    Elf64_Ehdr *eh = (Elf64_Ehdr *)(void *)so;
    eh->e_machine = eh->e_machine == EM_RISCV ? EM_X86_64 : EM_RISCV;
}
static void make_executable(char *so, size_t *n)
{
    (void)n;
    ((Elf64_Ehdr *)(void *)so)->e_type = ET_EXEC;
}
static void make_32bit(char *so, size_t *n)
{
    (void)n;
    so[EI_CLASS] = ELFCLASS32;
}

START_TEST(test_refuses_not_loadable)
{
    static const struct {
        void (*edit)(char *, size_t *);
        const char *text;
    } cases[] = {{make_text, "not an ELF file"},
                 {make_truncated, "truncated"},
                 {make_foreign, "built for another architecture"},
                 {make_executable, "not a shared object (ELF type 2)"},
                 {make_32bit, "not a 64-bit ELF"}};
    tst_scratch(AUXTRUNK_TEST_TMP);
    expect_corrupt(cases[_i].edit, cases[_i].text);
    tst_scratch_done();
}
END_TEST

START_TEST(test_refuses_fixtures)
{
    static const struct {
        const char *fixture;
        int32_t status;
        const char *text;
    } cases[] = {
        {"no_export", AUXTRUNK_LOAD_E_NO_ENTRY, "has no entry symbol auxtrunk_plugin_entry"},
        {"abi_new", AUXTRUNK_LOAD_E_ABI, "speaks no version in this host's range 1.0.."},
        {"abi_old", AUXTRUNK_LOAD_E_ABI, "incompatible ABI"},
        {"abi_lies", AUXTRUNK_LOAD_E_ABI, "answered version 2.0, outside this host's range"},
        {"null_entry", AUXTRUNK_LOAD_E_BAD_TABLE, "entry forward is NULL"},
        {"two_spaces", AUXTRUNK_LOAD_E_BAD_TABLE, "name two memory space"},
        {"no_space", AUXTRUNK_LOAD_E_BAD_TABLE, "name no memory space"},
        {"short_table", AUXTRUNK_LOAD_E_BAD_TABLE, "struct_size 64 outside [96, 96]"},
        {"null_name", AUXTRUNK_LOAD_E_BAD_TABLE, "impl_name is NULL"},
        {"bad_name", AUXTRUNK_LOAD_E_BAD_TABLE, "kernel_version is not a name"},
        {"init_fails", AUXTRUNK_LOAD_OK, ""}, /* init is the caller's */
    };
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", FX_DIR, cases[_i].fixture);
    expect_load(dir, cases[_i].status, cases[_i].text);
}
END_TEST

START_TEST(test_refuses_arguments)
{
    auxtrunk_plugin_t pl = {0};
    ck_assert_int_eq(auxtrunk_plugin_load(NULL, CPU_PLUGIN, g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_E_ARGUMENT);
    ck_assert_int_eq(auxtrunk_plugin_load(&pl, NULL, g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_E_ARGUMENT);
    ck_assert_int_eq(auxtrunk_plugin_load(&pl, "", g_msg, sizeof g_msg), AUXTRUNK_LOAD_E_ARGUMENT);
    ck_assert_msg(strstr(g_msg, "no plugin given"), "%s", g_msg);
    ck_assert_int_eq(auxtrunk_plugin_negotiate(&pl, AUXTRUNK_VERSION(1, 0), AUXTRUNK_VERSION(1, 0),
                                               g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_E_ARGUMENT);
    ck_assert_msg(strstr(g_msg, "needs an opened plugin"), "%s", g_msg);

    /* A path that does not fit. */
    char longer[AUXTRUNK_LOAD_PATH_MAX + 64];
    memset(longer, 'p', sizeof longer - 1);
    longer[0] = '/';
    longer[sizeof longer - 1] = '\0';
    char path[AUXTRUNK_LOAD_PATH_MAX];
    ck_assert_int_eq(auxtrunk_plugin_locate(longer, NULL, path, sizeof path, g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_E_ARGUMENT);

    /* Host ranges outside what this header can hold; the library stays open. */
    ck_assert_int_eq(auxtrunk_plugin_open(&pl, CPU_PLUGIN, NULL, g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_OK);
    const uint32_t bad[][2] = {{AUXTRUNK_VERSION(1, 1), AUXTRUNK_VERSION(1, 0)},
                               {AUXTRUNK_VERSION(0, 9), AUXTRUNK_VERSION(1, 0)},
                               {AUXTRUNK_VERSION(1, 0), AUXTRUNK_ABI_VERSION + 1},
                               {AUXTRUNK_VERSION(2, 0), AUXTRUNK_VERSION(2, 0)}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(auxtrunk_plugin_negotiate(&pl, bad[i][0], bad[i][1], g_msg, sizeof g_msg),
                         AUXTRUNK_LOAD_E_ARGUMENT);
        ck_assert_msg(strstr(g_msg, "is not inside 1.0.."), "%s", g_msg);
        ck_assert(pl.lib != NULL && pl.space == 0 && pl.api.init == NULL);
    }
    ck_assert_int_eq(auxtrunk_plugin_negotiate(&pl, AUXTRUNK_VERSION(1, 0), AUXTRUNK_VERSION(1, 0),
                                               g_msg, sizeof g_msg),
                     AUXTRUNK_LOAD_OK);
    ck_assert_uint_eq(pl.api.abi_version, AUXTRUNK_VERSION(1, 0));
    auxtrunk_plugin_unload(&pl);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Use                                                                       */

START_TEST(test_unload_twice)
{
    auxtrunk_plugin_t pl;
    ck_assert_int_eq(auxtrunk_plugin_load(&pl, CPU_PLUGIN, g_msg, sizeof g_msg), AUXTRUNK_LOAD_OK);
    auxtrunk_plugin_unload(&pl);
    const auxtrunk_plugin_t empty = {0};
    ck_assert(memcmp(&pl, &empty, sizeof pl) == 0);
    auxtrunk_plugin_unload(&pl);
    auxtrunk_plugin_unload(NULL);
    ck_assert(memcmp(&pl, &empty, sizeof pl) == 0);
}
END_TEST

START_TEST(test_short_message_buffers)
{
    auxtrunk_plugin_t pl;
    char small[12];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(auxtrunk_plugin_load(&pl, FX_DIR "/abi_new", small, sizeof small),
                     AUXTRUNK_LOAD_E_ABI);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_str_eq(small + sizeof small - 4, "...");
    /* No buffer at all: the status alone. */
    ck_assert_int_eq(auxtrunk_plugin_load(&pl, FX_DIR "/abi_new", NULL, 0), AUXTRUNK_LOAD_E_ABI);
    char one[1] = {'x'};
    ck_assert_int_eq(auxtrunk_plugin_load(&pl, FX_DIR "/abi_new", one, sizeof one),
                     AUXTRUNK_LOAD_E_ABI);
    ck_assert_int_eq(one[0], '\0');
}
END_TEST

START_TEST(test_status_names)
{
    ck_assert_str_eq(auxtrunk_load_status_name(AUXTRUNK_LOAD_OK), "ok");
    ck_assert_str_eq(auxtrunk_load_status_name(AUXTRUNK_LOAD_E_NO_FILE), "no-file");
    ck_assert_str_eq(auxtrunk_load_status_name(AUXTRUNK_LOAD_E_PERMISSIONS), "permissions");
    ck_assert_str_eq(auxtrunk_load_status_name(AUXTRUNK_LOAD_E_BAD_TABLE), "broken-table");
    ck_assert_str_eq(auxtrunk_load_status_name(5), "unknown");
    ck_assert_str_eq(auxtrunk_load_status_message(AUXTRUNK_LOAD_E_NO_ENTRY),
                     "the file has no auxtrunk_plugin_entry symbol");
    ck_assert_str_eq(auxtrunk_load_status_message(-8), "unknown loader status");
}
END_TEST

/* Loads from several threads at once, each its own plugin struct and buffer. */
enum { THREADS = 4, ROUNDS = 40 };

static void *load_rounds(void *arg)
{
    intptr_t failures = 0;
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        auxtrunk_plugin_t pl;
        char msg[AUXTRUNK_LOAD_MESSAGE_MAX];
        const char *which = (i % 2) ? CPU_PLUGIN : FX_DIR "/abi_lies";
        int32_t want = (i % 2) ? AUXTRUNK_LOAD_OK : AUXTRUNK_LOAD_E_ABI;
        if (auxtrunk_plugin_load(&pl, which, msg, sizeof msg) != want)
            failures++;
        if (want == AUXTRUNK_LOAD_OK && strcmp(pl.api.impl_name, "cpu-ref") != 0)
            failures++;
        if (want != AUXTRUNK_LOAD_OK && !strstr(msg, "answered version 2.0"))
            failures++;
        auxtrunk_plugin_unload(&pl);
    }
    return (void *)failures;
}

START_TEST(test_concurrent_loads)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert(pthread_create(&t[i], NULL, load_rounds, NULL) == 0);
    intptr_t failures = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        ck_assert(pthread_join(t[i], &r) == 0);
        failures += (intptr_t)r;
    }
    ck_assert_msg(failures == 0, "%ld of %d concurrent loads went wrong", (long)failures,
                  THREADS * ROUNDS);
}
END_TEST

/* ------------------------------------------------------------------------- */

static Suite *loader_suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("locate");
    tcase_add_test(tc, test_explicit_file_and_dir);
    tcase_add_test(tc, test_search_path);
    suite_add_tcase(s, tc);
    tc = tcase_create("refusals");
    tcase_add_test(tc, test_refuses_missing);
    tcase_add_test(tc, test_refuses_permissions);
    tcase_add_loop_test(tc, test_refuses_not_loadable, 0, 5);
    tcase_add_loop_test(tc, test_refuses_fixtures, 0, 11);
    tcase_add_test(tc, test_refuses_arguments);
    suite_add_tcase(s, tc);
    tc = tcase_create("use");
    tcase_add_test(tc, test_unload_twice);
    tcase_add_test(tc, test_short_message_buffers);
    tcase_add_test(tc, test_status_names);
    tcase_add_test(tc, test_concurrent_loads);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(loader_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
