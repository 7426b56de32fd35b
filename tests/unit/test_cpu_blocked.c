/*
 * test_cpu_blocked.c — kernels/cpu_blocked (the fast CPU trunk) bit for bit
 * against kernels/cpu (the reference, itself checked against the literal
 * canonical order by test_cpu_plugin), and the cpu-blocked plugin's threads:
 *
 *   kernels   every instruction set this CPU runs x 1, 2, 3 and 7 threads, on
 *             the production topology and odd shapes, batches at the chunk
 *             boundaries (255, 256, 257, 511, 512, 513, 5*256+1, ...), B = 1;
 *             forward, infer, backward, accumulate: every element of every
 *             output, written over a poison, equal in bits to the reference
 *   canon     one odd shape against canon32, the literal canonical order
 *   fork      a child of fork() (no workers there) still gets every result
 *   plugin    AUXTRUNK_CPU_THREADS sets the workers a handle starts (invalid
 *             values fall back to the CPUs), destroy leaves no thread, and
 *             the plugin's results equal the reference for each count; a
 *             worker the system refuses is a status, with no thread left
 *
 * Fork mode; seeded inputs, the seed printed once (AUXTRUNK_SEED reproduces).
 * Shape letters: B batch, ENC, H1, H2, AUX.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define AUXTRUNK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AUXTRUNK_TEST_ASAN 1
#endif
#endif

#include "auxtrunk.h"
#define AUXTRUNK_LOADER_IMPLEMENTATION
#include "auxtrunk_loader.h"
#include "bits.h"
#include "canon32.h"
#include "cpu_blocked.h"
#include "cpu_trunk.h"
#include "rng.h"

#ifndef AUXTRUNK_CPU_BLOCKED_PLUGIN_PATH
#error "AUXTRUNK_CPU_BLOCKED_PLUGIN_PATH must name the built cpu-blocked plugin"
#endif

static uint64_t g_seed;

/* A NaN payload no arithmetic produces: an element left unwritten shows. */
#define POISON_BITS UINT32_C(0x7FA5A5A5)

static float *alloc_f(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void poison(float *p, size_t n)
{
    const float v = tst_bits_f32(POISON_BITS);
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

static void assert_bits(const float *got, const float *want, size_t n, const char *what,
                        const char *config)
{
    /* One Check assertion per tensor: each one costs a write to the runner. */
    size_t i = 0;
    while (i < n && tst_f32_bits(got[i]) == tst_f32_bits(want[i]))
        i++;
    ck_assert_msg(i == n, "%s: %s[%zu] = %a (0x%08x), reference %a (0x%08x)", config, what, i,
                  i < n ? (double)got[i] : 0.0, i < n ? tst_f32_bits(got[i]) : 0u,
                  i < n ? (double)want[i] : 0.0, i < n ? tst_f32_bits(want[i]) : 0u);
}

/* ------------------------------------------------------------------------- */
/* A problem and its reference results                                       */

enum { NT = 6 }; /* the six parameter tensors, flat-layout order */

typedef struct problem {
    atk_dims_t d;
    int32_t B;
    size_t size[NT]; /* elements of W1, b1, W2, b2, W3, b3 */
    float *param[NT];
    float *x, *dout;
    float *g_old[NT]; /* gradients before an accumulating backward */
    /* reference results */
    float *h1, *h2, *out;
    float *g[NT];     /* overwrite */
    float *g_acc[NT]; /* accumulate onto g_old */
} problem_t;

static atk_params_t params_of(const problem_t *pr)
{
    return (atk_params_t){pr->param[0], pr->param[1], pr->param[2],
                          pr->param[3], pr->param[4], pr->param[5]};
}

static atk_grads_t grads_of(float *const g[NT])
{
    return (atk_grads_t){g[0], g[1], g[2], g[3], g[4], g[5]};
}

static void problem_make(problem_t *pr, atk_dims_t d, int32_t B, uint64_t tag)
{
    tst_rng_t r;
    tst_rng_seed(&r, g_seed ^ (tag * UINT64_C(0x9E3779B97F4A7C15)));
    memset(pr, 0, sizeof *pr);
    pr->d = d;
    pr->B = B;
    const size_t sz[NT] = {(size_t)d.enc * d.h1, (size_t)d.h1,         (size_t)d.h1 * d.h2,
                           (size_t)d.h2,         (size_t)d.h2 * d.aux, (size_t)d.aux};
    for (int i = 0; i < NT; i++) {
        pr->size[i] = sz[i];
        pr->param[i] = alloc_f(sz[i]);
        tst_rng_fill(&r, pr->param[i], sz[i], -0.25f, 0.25f);
        pr->g_old[i] = alloc_f(sz[i]);
        tst_rng_fill(&r, pr->g_old[i], sz[i], -1.0f, 1.0f);
        pr->g[i] = alloc_f(sz[i]);
        pr->g_acc[i] = alloc_f(sz[i]);
        memcpy(pr->g_acc[i], pr->g_old[i], sz[i] * sizeof(float));
    }
    pr->x = alloc_f((size_t)B * d.enc);
    pr->dout = alloc_f((size_t)B * d.aux);
    /* Inputs wide enough that both ELU branches and the expm1 ranges occur. */
    tst_rng_fill(&r, pr->x, (size_t)B * d.enc, -3.0f, 3.0f);
    tst_rng_fill(&r, pr->dout, (size_t)B * d.aux, -1.0f, 1.0f);
    pr->h1 = alloc_f((size_t)B * d.h1);
    pr->h2 = alloc_f((size_t)B * d.h2);
    pr->out = alloc_f((size_t)B * d.aux);

    const atk_params_t p = params_of(pr);
    cpu_trunk_forward(d, &p, pr->x, B, pr->h1, pr->h2, pr->out);
    float *ws = alloc_f(cpu_trunk_backward_workspace(d, B));
    const atk_grads_t g = grads_of(pr->g), ga = grads_of(pr->g_acc);
    cpu_trunk_backward(d, &p, pr->x, pr->h1, pr->h2, pr->dout, B, &g, 0, ws);
    cpu_trunk_backward(d, &p, pr->x, pr->h1, pr->h2, pr->dout, B, &ga, 1, ws);
    free(ws);
}

static void problem_free(problem_t *pr)
{
    for (int i = 0; i < NT; i++) {
        free(pr->param[i]);
        free(pr->g_old[i]);
        free(pr->g[i]);
        free(pr->g_acc[i]);
    }
    free(pr->x);
    free(pr->dout);
    free(pr->h1);
    free(pr->h2);
    free(pr->out);
}

static const char *const g_names[NT] = {"dW1", "db1", "dW2", "db2", "dW3", "db3"};

/* Forward, infer, backward and accumulating backward on t, every output
 * poisoned first and compared in full with the reference. */
static void check_trunk(cpb_trunk_t *t, const problem_t *pr, const char *config)
{
    const atk_dims_t d = pr->d;
    const int32_t B = pr->B;
    const atk_params_t p = params_of(pr);
    float *h1 = alloc_f((size_t)B * d.h1), *h2 = alloc_f((size_t)B * d.h2);
    float *out = alloc_f((size_t)B * d.aux), *g[NT];
    poison(h1, (size_t)B * d.h1);
    poison(h2, (size_t)B * d.h2);
    poison(out, (size_t)B * d.aux);
    cpb_forward(t, &p, pr->x, B, h1, h2, out);
    assert_bits(h1, pr->h1, (size_t)B * d.h1, "h1", config);
    assert_bits(h2, pr->h2, (size_t)B * d.h2, "h2", config);
    assert_bits(out, pr->out, (size_t)B * d.aux, "out", config);

    poison(out, (size_t)B * d.aux);
    cpb_infer(t, &p, pr->x, B, out);
    assert_bits(out, pr->out, (size_t)B * d.aux, "out (infer)", config);

    for (int i = 0; i < NT; i++) {
        g[i] = alloc_f(pr->size[i]);
        poison(g[i], pr->size[i]);
    }
    const atk_grads_t gv = grads_of(g);
    cpb_backward(t, &p, pr->x, h1, h2, pr->dout, B, &gv, 0);
    for (int i = 0; i < NT; i++)
        assert_bits(g[i], pr->g[i], pr->size[i], g_names[i], config);

    for (int i = 0; i < NT; i++)
        memcpy(g[i], pr->g_old[i], pr->size[i] * sizeof(float));
    cpb_backward(t, &p, pr->x, h1, h2, pr->dout, B, &gv, 1);
    for (int i = 0; i < NT; i++)
        assert_bits(g[i], pr->g_acc[i], pr->size[i], g_names[i], config);

    for (int i = 0; i < NT; i++)
        free(g[i]);
    free(out);
    free(h2);
    free(h1);
}

/* ------------------------------------------------------------------------- */
/* kernels: instruction sets x thread counts x shapes x batches              */

static const int32_t g_threads[] = {1, 2, 3, 7};
static const cpb_isa_t g_isas[] = {CPB_ISA_SCALAR, CPB_ISA_AVX2, CPB_ISA_AVX512};

typedef struct shape_case {
    atk_dims_t d;
    int32_t B;
    int scalar; /* also run the (slow) scalar variant */
} shape_case_t;

static const shape_case_t g_cases[] = {
    /* production topology */
    {{256, 256, 256, 128}, 1, 1},
    {{256, 256, 256, 128}, 64, 1},
    {{256, 256, 256, 128}, 255, 1},
    {{256, 256, 256, 128}, 256, 0},
    {{256, 256, 256, 128}, 257, 0},
    {{256, 256, 256, 128}, 511, 0},
    {{256, 256, 256, 128}, 512, 0},
    {{256, 256, 256, 128}, 513, 0},
    {{256, 256, 256, 128}, 5 * 256 + 1, 0},
    {{256, 256, 256, 128}, 7 * 256 - 1, 0}, /* 7 chunks: three pending tree nodes */
    /* odd sizes: no dimension a multiple of any tile */
    {{37, 29, 45, 19}, 1, 1},
    {{37, 29, 45, 19}, 13, 1},
    {{37, 29, 45, 19}, 255, 1},
    {{37, 29, 45, 19}, 256, 1},
    {{37, 29, 45, 19}, 257, 1},
    {{37, 29, 45, 19}, 513, 1},
    {{37, 29, 45, 19}, 5 * 256 + 1, 1},
    {{37, 29, 45, 19}, 6 * 256 + 5, 1},
    {{37, 29, 45, 19}, 7 * 256 + 3, 1},
    {{37, 29, 45, 19}, 11 * 256 + 100, 1},
    {{1, 1, 1, 1}, 1, 1},
    {{1, 1, 1, 1}, 3 * 256 + 2, 1},
    {{70, 33, 97, 5}, 300, 1},
    {{13, 130, 17, 66}, 1000, 1},
};

START_TEST(test_kernels_bit_exact)
{
    const shape_case_t *sc = &g_cases[_i];
    problem_t pr;
    problem_make(&pr, sc->d, sc->B, (uint64_t)_i + 1);
    int ran = 0;
    for (size_t a = 0; a < sizeof g_isas / sizeof g_isas[0]; a++) {
        if (g_isas[a] == CPB_ISA_SCALAR && !sc->scalar)
            continue;
        for (size_t k = 0; k < sizeof g_threads / sizeof g_threads[0]; k++) {
            /* max_batch above B, so a smaller call than the capacity is covered */
            const cpb_config_t cfg = {
                .dims = sc->d, .max_batch = sc->B + 3, .threads = g_threads[k], .isa = g_isas[a]};
            cpb_trunk_t *t;
            cpb_status_t st = cpb_create(&cfg, &t);
            if (st == CPB_E_ISA)
                break; /* this CPU lacks the instruction set */
            ck_assert_int_eq(st, CPB_OK);
            ck_assert_int_eq(cpb_threads(t), g_threads[k]);
            char config[160];
            snprintf(config, sizeof config, "%s, %d threads, dims %d/%d/%d/%d, B=%d",
                     cpb_isa_name(t), g_threads[k], sc->d.enc, sc->d.h1, sc->d.h2, sc->d.aux,
                     sc->B);
            check_trunk(t, &pr, config);
            cpb_destroy(t);
            ran++;
        }
    }
    ck_assert_int_ge(ran, 4); /* at least the scalar or AVX2 variant ran */
    problem_free(&pr);
}
END_TEST

/* Gradient arrays at every float offset from a cache line (the caller
 * allocates them; where two threads' row groups meet, the line they share
 * is stored by both, each its own floats): overwrite and
 * accumulate give the reference's bits at 2, 3 and 7 threads, for one chunk
 * (stored from the tiles) and several (stored from the tree), production
 * widths and widths whose rows are not whole lines. Everything outside the
 * arrays stays as it was. */
START_TEST(test_gradients_at_every_line_offset)
{
    static const shape_case_t cases[] = {
        {{256, 256, 256, 128}, 64, 0},
        {{256, 256, 256, 128}, 300, 0},
        {{13, 130, 17, 66}, 40, 0},
    };
    const shape_case_t *sc = &cases[_i];
    problem_t pr;
    problem_make(&pr, sc->d, sc->B, (uint64_t)_i + 101);
    const atk_params_t p = params_of(&pr);
    const int32_t threads[] = {2, 3, 7};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        const cpb_config_t cfg = {.dims = sc->d, .max_batch = sc->B, .threads = threads[k]};
        cpb_trunk_t *t;
        ck_assert_int_eq(cpb_create(&cfg, &t), CPB_OK);
        for (int32_t off = 0; off < 16; off++) {
            float *base[NT], *g[NT];
            for (int i = 0; i < NT; i++) {
                /* C11: the size a multiple of the alignment */
                base[i] = aligned_alloc(64, (pr.size[i] + 32 + 15) / 16 * 16 * sizeof(float));
                ck_assert_ptr_nonnull(base[i]);
                poison(base[i], pr.size[i] + 32);
                g[i] = base[i] + off;
            }
            const atk_grads_t gv = grads_of(g);
            char config[160];
            snprintf(config, sizeof config, "%s, %d threads, dims %d/%d/%d/%d, B=%d, g at +%d floats",
                     cpb_isa_name(t), threads[k], sc->d.enc, sc->d.h1, sc->d.h2, sc->d.aux, sc->B,
                     off);
            cpb_backward(t, &p, pr.x, pr.h1, pr.h2, pr.dout, sc->B, &gv, 0);
            for (int i = 0; i < NT; i++)
                assert_bits(g[i], pr.g[i], pr.size[i], g_names[i], config);
            for (int i = 0; i < NT; i++)
                memcpy(g[i], pr.g_old[i], pr.size[i] * sizeof(float));
            cpb_backward(t, &p, pr.x, pr.h1, pr.h2, pr.dout, sc->B, &gv, 1);
            for (int i = 0; i < NT; i++) {
                assert_bits(g[i], pr.g_acc[i], pr.size[i], g_names[i], config);
                for (int32_t j = 0; j < off; j++)
                    ck_assert_msg(tst_f32_bits(base[i][j]) == POISON_BITS,
                                  "%s: %s: float %d before the array written", config,
                                  g_names[i], (int)j - off);
                for (int32_t j = 0; j < 32 - off; j++)
                    ck_assert_msg(tst_f32_bits(g[i][pr.size[i] + (size_t)j]) == POISON_BITS,
                                  "%s: %s: float %d past the array written", config, g_names[i],
                                  (int)j);
                free(base[i]);
            }
        }
        cpb_destroy(t);
    }
    problem_free(&pr);
}
END_TEST

/* The variant AUTO picks is the widest the CPU runs. */
START_TEST(test_auto_is_widest)
{
    const cpb_config_t base = {.dims = {8, 8, 8, 8}, .max_batch = 4, .threads = 1};
    const char *widest = "scalar";
    for (size_t a = 0; a < sizeof g_isas / sizeof g_isas[0]; a++) {
        cpb_config_t cfg = base;
        cfg.isa = g_isas[a];
        cpb_trunk_t *t;
        if (cpb_create(&cfg, &t) == CPB_OK) {
            widest = cpb_isa_name(t);
            cpb_destroy(t);
        }
    }
    cpb_trunk_t *t;
    ck_assert_int_eq(cpb_create(&base, &t), CPB_OK);
    ck_assert_str_eq(cpb_isa_name(t), widest);
    fprintf(stderr, "test_cpu_blocked: this CPU runs the %s variant\n", widest);
    cpb_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* canon: the literal canonical order (tests/support/canon32)                */

START_TEST(test_canon32)
{
    const atk_dims_t d = {37, 29, 45, 19};
    const int32_t B = 2 * 256 + 7;
    problem_t pr;
    problem_make(&pr, d, B, 1001);
    const ref64_dims_t rd = {d.enc, d.h1, d.h2, d.aux};
    const ref64_params_t rp = {pr.param[0], pr.param[1], pr.param[2],
                               pr.param[3], pr.param[4], pr.param[5]};
    float *out = alloc_f((size_t)B * d.aux), *g[NT];
    for (int i = 0; i < NT; i++)
        g[i] = alloc_f(pr.size[i]);
    canon32_forward(rd, &rp, pr.x, B, NULL, NULL, out);
    ck_assert_int_eq(
        canon32_backward(rd, &rp, pr.x, pr.dout, B, g[0], g[1], g[2], g[3], g[4], g[5]), 0);
    /* the reference agrees with canon32 ... */
    assert_bits(pr.out, out, (size_t)B * d.aux, "out", "kernels/cpu vs canon32");
    for (int i = 0; i < NT; i++)
        assert_bits(pr.g[i], g[i], pr.size[i], g_names[i], "kernels/cpu vs canon32");
    /* ... and so does the fast trunk, on two threads */
    const cpb_config_t cfg = {.dims = d, .max_batch = B, .threads = 2};
    cpb_trunk_t *t;
    ck_assert_int_eq(cpb_create(&cfg, &t), CPB_OK);
    check_trunk(t, &pr, "canon32 problem, 2 threads");
    cpb_destroy(t);
    for (int i = 0; i < NT; i++)
        free(g[i]);
    free(out);
    problem_free(&pr);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* fork: the child has only the forking thread                               */

START_TEST(test_fork_child)
{
    const atk_dims_t d = {37, 29, 45, 19};
    problem_t pr;
    problem_make(&pr, d, 300, 3001);
    const cpb_config_t cfg = {.dims = d, .max_batch = 300, .threads = 3};
    cpb_trunk_t *t;
    ck_assert_int_eq(cpb_create(&cfg, &t), CPB_OK);
    check_trunk(t, &pr, "parent before fork");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* A failed assertion in the child exits non-zero (Check's fork mode). */
        check_trunk(t, &pr, "child of fork");
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status 0x%x", status);
    check_trunk(t, &pr, "parent after fork");
    cpb_destroy(t);
    problem_free(&pr);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* plugin: AUXTRUNK_CPU_THREADS, workers joined by destroy                   */

static int thread_count_now(void)
{
    DIR *dir = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(dir));)
        n += e->d_name[0] != '.';
    closedir(dir);
    return n;
}

/* A thread that was joined may still be listed for a moment (the kernel
 * wakes the joiner before it releases the thread): wait up to a second for
 * the count to come down to base. */
static int thread_count_back_to(int base)
{
    int n = thread_count_now();
    for (int i = 0; i < 100 && n > base; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        n = thread_count_now();
    }
    return n;
}

/* The plugin through the installed loader (it stays loaded for the process). */
static const auxtrunk_api_t *plugin_api(void)
{
    static auxtrunk_plugin_t pl;
    char msg[AUXTRUNK_LOAD_MESSAGE_MAX];
    if (!pl.lib)
        ck_assert_msg(auxtrunk_plugin_load(&pl, AUXTRUNK_CPU_BLOCKED_PLUGIN_PATH, msg,
                                           sizeof msg) == AUXTRUNK_LOAD_OK,
                      "%s", msg);
    ck_assert_str_eq(pl.api.impl_name, "cpu-blocked");
    return &pl.api;
}

static int affinity_cpus(void)
{
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    return CPU_COUNT(&set);
}

/* env value -> expected threads of a handle (0: the affinity count) */
static const struct {
    const char *env;
    int threads;
} g_env_cases[] = {
    {"1", 1}, {"2", 2},  {"3", 3},   {"7", 7},  {NULL, 0},     {"", 0},
    {"0", 0}, {"-2", 0}, {"abc", 0}, {"4x", 0}, {"100000", 0},
};

START_TEST(test_plugin_threads)
{
    const char *env = g_env_cases[_i].env;
    const int want = g_env_cases[_i].threads ? g_env_cases[_i].threads : affinity_cpus();
    if (env)
        setenv("AUXTRUNK_CPU_THREADS", env, 1);
    else
        unsetenv("AUXTRUNK_CPU_THREADS");
    const auxtrunk_api_t *api = plugin_api();
    const atk_dims_t d = {256, 256, 256, 128};
    const int32_t B = 2 * 256 + 5;
    problem_t pr;
    problem_make(&pr, d, B, 2000 + (uint64_t)_i);

    const int before = thread_count_now();
    const auxtrunk_config_t cfg = {.struct_size = sizeof cfg,
                                   .enc = d.enc,
                                   .h1 = d.h1,
                                   .h2 = d.h2,
                                   .aux = d.aux,
                                   .max_batch = B,
                                   .device = -1};
    auxtrunk_handle_t *h = NULL;
    ck_assert_int_eq(api->init(&cfg, &h), AUXTRUNK_OK);
    ck_assert_msg(thread_count_now() == before + want - 1,
                  "AUXTRUNK_CPU_THREADS=%s: %d threads after init, want %d + %d workers",
                  env ? env : "(unset)", thread_count_now(), before, want - 1);

    const auxtrunk_params_t p = {.struct_size = sizeof p,
                                 .w1 = pr.param[0],
                                 .b1 = pr.param[1],
                                 .w2 = pr.param[2],
                                 .b2 = pr.param[3],
                                 .w3 = pr.param[4],
                                 .b3 = pr.param[5]};
    float *out = alloc_f((size_t)B * d.aux), *g[NT];
    poison(out, (size_t)B * d.aux);
    ck_assert_int_eq(api->forward(h, &p, pr.x, B, out, 0, NULL), AUXTRUNK_OK);
    assert_bits(out, pr.out, (size_t)B * d.aux, "out", "plugin");
    for (int i = 0; i < NT; i++) {
        g[i] = alloc_f(pr.size[i]);
        poison(g[i], pr.size[i]);
    }
    const auxtrunk_grads_t gr = {.struct_size = sizeof gr,
                                 .dw1 = g[0],
                                 .db1 = g[1],
                                 .dw2 = g[2],
                                 .db2 = g[3],
                                 .dw3 = g[4],
                                 .db3 = g[5]};
    ck_assert_int_eq(api->backward(h, &p, pr.x, pr.dout, B, &gr, 0, NULL), AUXTRUNK_OK);
    for (int i = 0; i < NT; i++)
        assert_bits(g[i], pr.g[i], pr.size[i], g_names[i], "plugin");

    ck_assert_int_eq(api->destroy(h), AUXTRUNK_OK);
    ck_assert_int_eq(thread_count_back_to(before), before);
    for (int i = 0; i < NT; i++)
        free(g[i]);
    free(out);
    problem_free(&pr);
}
END_TEST

/* Under AddressSanitizer (the sanitizer build) a capped address space kills
 * the process instead: the sanitizer maps 2 MiB for every thread it starts
 * and aborts when it cannot. These tests run in the regular build. */
#if !defined(AUXTRUNK_TEST_ASAN)
/* The address space capped margin_kib above what the process uses, so that
 * only so many workers' stacks (512 KiB each) can be mapped while small
 * allocations still succeed. */
static void cap_address_space(long margin_kib)
{
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    long vm_kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &vm_kib) == 1)
            break;
    fclose(f);
    ck_assert_int_gt(vm_kib, 0);
    struct rlimit lim;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &lim), 0);
    lim.rlim_cur = (rlim_t)(vm_kib + margin_kib) * 1024;
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
}

/* _i workers start before the system refuses one: all are joined. */
START_TEST(test_thread_refused)
{
    const cpb_config_t cfg = {.dims = {5, 6, 7, 3}, .max_batch = 9, .threads = 4};
    cpb_trunk_t *t = NULL;
    const int before = thread_count_now();
    cap_address_space(256 + 560 * _i);
    ck_assert_int_eq(cpb_create(&cfg, &t), CPB_E_THREADS);
    ck_assert_int_eq(thread_count_back_to(before), before);
}
END_TEST

START_TEST(test_plugin_thread_refused)
{
    setenv("AUXTRUNK_CPU_THREADS", "4", 1);
    const auxtrunk_api_t *api = plugin_api();
    const auxtrunk_config_t cfg = {.struct_size = sizeof cfg,
                                   .enc = 5,
                                   .h1 = 6,
                                   .h2 = 7,
                                   .aux = 3,
                                   .max_batch = 9,
                                   .device = -1};
    auxtrunk_handle_t *h = NULL;
    const int before = thread_count_now();
    cap_address_space(256);
    ck_assert_int_eq(api->init(&cfg, &h), AUXTRUNK_E_OUT_OF_MEMORY);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(thread_count_back_to(before), before);
}
END_TEST
#endif

/* ------------------------------------------------------------------------- */

static Suite *cpu_blocked_suite(void)
{
    Suite *s = suite_create("cpu_blocked");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_kernels_bit_exact, 0, (int)(sizeof g_cases / sizeof g_cases[0]));
    tcase_add_test(tc, test_auto_is_widest);
    tcase_add_loop_test(tc, test_gradients_at_every_line_offset, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("canon");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_canon32);
    suite_add_tcase(s, tc);

    tc = tcase_create("fork");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fork_child);
    suite_add_tcase(s, tc);

    tc = tcase_create("plugin");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_plugin_threads, 0,
                        (int)(sizeof g_env_cases / sizeof g_env_cases[0]));
#if !defined(AUXTRUNK_TEST_ASAN)
    tcase_add_loop_test(tc, test_thread_refused, 0, 3);
    tcase_add_test(tc, test_plugin_thread_refused);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    g_seed = tst_seed("test_cpu_blocked");
    SRunner *sr = srunner_create(cpu_blocked_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
