/*
 * test_cpu_plugin.c — the built CPU reference plugin (build/plugins/cpu/
 * libauxtrunk.so), loaded by abi/auxtrunk_loader.h as a host loads it, against the
 * ABI of abi/auxtrunk.h:
 *
 *   negotiation   host ranges, struct sizes, flags, the table it fills
 *   init          config rules, statuses, out of memory without leaks
 *   forward       against ref64 (double) and bit for bit against canon32
 *   backward      against ref64, finite differences and canon32; accumulate;
 *                 every batch-tree shape up to 40 chunks
 *   rules         determinism, stop-gradient (x untouched, guard zones),
 *                 infer leaves the record alone, floating-point environment,
 *                 two handles in two threads
 *   bad input     every documented error: status, nothing written, record
 *                 kept, last_error set
 *
 * Fork mode; seeded inputs, the seed printed once (AUXTRUNK_SEED reproduces).
 * Shape letters: B batch, ENC, H1, H2, AUX.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "auxtrunk.h"
#define AUXTRUNK_LOADER_IMPLEMENTATION
#include "auxtrunk_loader.h"
#include "bits.h"
#include "canon32.h"
#include "ref64.h"
#include "rng.h"

#ifndef AUXTRUNK_CPU_PLUGIN_PATH
#error "AUXTRUNK_CPU_PLUGIN_PATH must name the built CPU plugin"
#endif

/* ------------------------------------------------------------------------- */
/* Loading and negotiation helpers                                           */

static uint64_t g_seed;

/* The CPU plugin, opened by the installed loader as a trainer opens it
 * (permission and ELF checks, dlopen, entry); it stays loaded for the
 * process. Negotiation is left to the tests, or to api(). */
static auxtrunk_plugin_t *plugin(void)
{
    static auxtrunk_plugin_t pl;
    if (!pl.lib) {
        char msg[AUXTRUNK_LOAD_MESSAGE_MAX];
        int32_t st = auxtrunk_plugin_open(&pl, AUXTRUNK_CPU_PLUGIN_PATH, NULL, msg, sizeof msg);
        ck_assert_msg(st == AUXTRUNK_LOAD_OK, "%s", msg);
    }
    return &pl;
}

static auxtrunk_entry_fn load_entry(void) { return plugin()->entry; }

static auxtrunk_host_info_t host_info(uint32_t lo, uint32_t hi)
{
    auxtrunk_host_info_t h = {sizeof h, lo, hi, 0};
    return h;
}

/* The table negotiated at this header's version, with the loader's checks. */
static const auxtrunk_api_t *api(void)
{
    auxtrunk_plugin_t *pl = plugin();
    if (!pl->space) {
        char msg[AUXTRUNK_LOAD_MESSAGE_MAX];
        int32_t st = auxtrunk_plugin_negotiate(pl, AUXTRUNK_ABI_VERSION, AUXTRUNK_ABI_VERSION, msg,
                                               sizeof msg);
        ck_assert_msg(st == AUXTRUNK_LOAD_OK, "%s", msg);
    }
    return &pl->api;
}

/* ------------------------------------------------------------------------- */
/* Buffers: guarded, poisoned, compared bit for bit                          */

#define POISON_BITS UINT32_C(0xFFC0DEAD) /* a quiet NaN no computation yields */
#define GUARD_BITS UINT32_C(0x7FBADBAD)
#define GUARD 16 /* floats of guard zone on each side of a buffer */

/* n floats with GUARD floats of GUARD_BITS on each side; returns the body. */
typedef struct gbuf {
    float *base;
    float *p;
    size_t n;
} gbuf_t;

static float *gb_alloc(gbuf_t *g, size_t n)
{
    g->n = n;
    g->base = malloc((n + 2 * GUARD) * sizeof(float));
    ck_assert(g->base != NULL);
    g->p = g->base + GUARD;
    for (size_t i = 0; i < n + 2 * GUARD; i++)
        g->base[i] = tst_bits_f32(GUARD_BITS);
    return g->p;
}

static void gb_poison(gbuf_t *g)
{
    for (size_t i = 0; i < g->n; i++)
        g->p[i] = tst_bits_f32(POISON_BITS);
}

static void gb_check_guards(const gbuf_t *g, const char *what)
{
    for (size_t i = 0; i < GUARD; i++) {
        ck_assert_msg(tst_f32_bits(g->base[i]) == GUARD_BITS, "%s: guard before [%zu] written",
                      what, i);
        ck_assert_msg(tst_f32_bits(g->p[g->n + i]) == GUARD_BITS, "%s: guard after [%zu] written",
                      what, i);
    }
}

/* Every element written (no poison left) and the guard zones intact. */
static void gb_check_written(const gbuf_t *g, const char *what)
{
    for (size_t i = 0; i < g->n; i++)
        ck_assert_msg(tst_f32_bits(g->p[i]) != POISON_BITS, "%s[%zu] not written", what, i);
    gb_check_guards(g, what);
}

static void gb_free(gbuf_t *g) { free(g->base); }

static void expect_same_bits(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(tst_f32_bits(got[i]) == tst_f32_bits(want[i]),
                      "%s[%zu]: got %.9g (0x%08x), want %.9g (0x%08x)", what, i, got[i],
                      tst_f32_bits(got[i]), want[i], tst_f32_bits(want[i]));
}

/* ------------------------------------------------------------------------- */
/* Models: topology, parameters, gradients                                   */

typedef struct topo {
    int32_t enc, h1, h2, aux, max_batch;
} topo_t;

#define TINY             \
    {                    \
        3, 5, 7, 2, 2048 \
    }
#define ODD                \
    {                      \
        13, 29, 31, 9, 700 \
    } /* no width a multiple of 8 */
#define PROD                    \
    {                           \
        256, 256, 256, 128, 600 \
    } /* the production topology */
static const topo_t T_TINY = TINY, T_ODD = ODD, T_PROD = PROD;

static ref64_dims_t dims_of(topo_t t) { return (ref64_dims_t){t.enc, t.h1, t.h2, t.aux}; }

static auxtrunk_config_t config_of(topo_t t)
{
    auxtrunk_config_t c = {sizeof c, 0, t.enc, t.h1, t.h2, t.aux, t.max_batch, -1};
    return c;
}

/* Sizes of the six tensors, in struct order (W1, b1, W2, b2, W3, b3). */
static void tensor_sizes(topo_t t, size_t n[6])
{
    n[0] = (size_t)t.enc * t.h1;
    n[1] = (size_t)t.h1;
    n[2] = (size_t)t.h1 * t.h2;
    n[3] = (size_t)t.h2;
    n[4] = (size_t)t.h2 * t.aux;
    n[5] = (size_t)t.aux;
}

static const char *const TENSOR_NAMES[6] = {"w1", "b1", "w2", "b2", "w3", "b3"};
static const char *const GRAD_NAMES[6] = {"dw1", "db1", "dw2", "db2", "dw3", "db3"};

/* Parameters in one guarded buffer per tensor (so aliasing and "unchanged"
 * checks see each tensor's own bounds). */
typedef struct model {
    topo_t t;
    gbuf_t buf[6];
    auxtrunk_params_t p;
    ref64_params_t rp;
} model_t;

static void model_views(model_t *m)
{
    const float *v[6];
    for (int i = 0; i < 6; i++)
        v[i] = m->buf[i].p;
    m->p = (auxtrunk_params_t){sizeof m->p, 0, v[0], v[1], v[2], v[3], v[4], v[5]};
    m->rp = (ref64_params_t){v[0], v[1], v[2], v[3], v[4], v[5]};
}

/* Weights uniform in ±sqrt(3/fan_in) (unit-variance pre-activations for
 * unit-variance inputs, so both ELU branches are exercised), biases ±0.1. */
static void model_init(model_t *m, topo_t t, tst_rng_t *r)
{
    size_t n[6];
    tensor_sizes(t, n);
    const int32_t fan_in[3] = {t.enc, t.h1, t.h2};
    m->t = t;
    for (int i = 0; i < 6; i++) {
        float *p = gb_alloc(&m->buf[i], n[i]);
        float a = (i % 2 == 0) ? sqrtf(3.0f / (float)fan_in[i / 2]) : 0.1f;
        tst_rng_fill(r, p, n[i], -a, a);
    }
    model_views(m);
}

static void model_free(model_t *m)
{
    for (int i = 0; i < 6; i++)
        gb_free(&m->buf[i]);
}

typedef struct grads {
    gbuf_t buf[6];
    auxtrunk_grads_t g;
} grads_t;

static void grads_init(grads_t *g, topo_t t)
{
    size_t n[6];
    tensor_sizes(t, n);
    float *v[6];
    for (int i = 0; i < 6; i++) {
        v[i] = gb_alloc(&g->buf[i], n[i]);
        gb_poison(&g->buf[i]);
    }
    g->g = (auxtrunk_grads_t){sizeof g->g, 0, v[0], v[1], v[2], v[3], v[4], v[5]};
}

static void grads_poison(grads_t *g)
{
    for (int i = 0; i < 6; i++)
        gb_poison(&g->buf[i]);
}

static void grads_check_written(const grads_t *g)
{
    for (int i = 0; i < 6; i++)
        gb_check_written(&g->buf[i], GRAD_NAMES[i]);
}

static void grads_expect_same(const grads_t *got, const grads_t *want, const char *what)
{
    char name[64];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "%s %s", what, GRAD_NAMES[i]);
        expect_same_bits(got->buf[i].p, want->buf[i].p, got->buf[i].n, name);
    }
}

static void grads_free(grads_t *g)
{
    for (int i = 0; i < 6; i++)
        gb_free(&g->buf[i]);
}

/* One random draw per test case: the run's seed mixed with a case tag. */
static void rng_for(tst_rng_t *r, uint64_t tag)
{
    tst_rng_seed(r, g_seed ^ (tag * UINT64_C(0x9E3779B97F4A7C15)));
}

static auxtrunk_handle_t *make_handle(topo_t t)
{
    auxtrunk_config_t c = config_of(t);
    auxtrunk_handle_t *h = NULL;
    ck_assert_int_eq(api()->init(&c, &h), AUXTRUNK_OK);
    ck_assert(h != NULL);
    return h;
}

/* ------------------------------------------------------------------------- */
/* Negotiation                                                               */

#define V(maj, min) AUXTRUNK_VERSION(maj, min)

/* Calls the entry with a host range into an api table of `room` bytes (inside
 * a larger buffer filled with 0xAB), checks status, the untouched bytes and,
 * on OK, the table. Returns the negotiated version (0 on error). */
static uint32_t negotiate(const auxtrunk_host_info_t *h, uint32_t room, int32_t want)
{
    _Alignas(16) unsigned char buf[512];
    ck_assert(room + 8 <= sizeof buf);
    memset(buf, 0xAB, sizeof buf);
    memcpy(buf, &room, sizeof room);
    unsigned char before[512];
    memcpy(before, buf, sizeof buf);

    int32_t st = load_entry()(h, (auxtrunk_api_t *)(void *)buf);
    ck_assert_msg(st == want, "entry returned %d, want %d", st, want);
    if (st != AUXTRUNK_OK) {
        ck_assert_msg(memcmp(buf, before, sizeof buf) == 0, "api written on error");
        return 0;
    }
    auxtrunk_api_t a;
    memcpy(&a, buf, sizeof a);
    uint32_t valid = room < sizeof a ? room : (uint32_t)sizeof a;
    ck_assert_uint_eq(a.struct_size, valid);
    for (uint32_t i = valid; i < room; i++)
        ck_assert_msg(buf[i] == 0, "byte %u of the table past the valid size is not zero", i);
    for (uint32_t i = room; i < sizeof buf; i++)
        ck_assert_msg(buf[i] == 0xAB, "byte %u beyond the host's table was written", i);
    ck_assert_str_eq(a.impl_name, "cpu-ref");
    ck_assert_str_eq(a.kernel_version, CPU_KERNEL_VERSION);
    ck_assert_uint_eq(a.caps,
                      AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT);
    ck_assert(a.status_string && a.init && a.destroy && a.forward && a.infer && a.backward &&
              a.memory_usage && a.last_error);
    return a.abi_version;
}

START_TEST(test_dlopen_exports_only_entry)
{
    auxtrunk_plugin_t *pl = plugin();
    void *lib = pl->lib;
    ck_assert(dlsym(lib, AUXTRUNK_ENTRY_SYMBOL) != NULL);
    /* Internal helpers of plugin/common and kernels/cpu stay hidden. */
    const char *hidden[] = {"atp_negotiate",     "atp_status_string",  "atp_check_forward",
                            "cpu_trunk_forward", "cpu_trunk_backward", "cpu_api"};
    for (size_t i = 0; i < sizeof hidden / sizeof *hidden; i++)
        ck_assert_msg(dlsym(lib, hidden[i]) == NULL, "%s is visible", hidden[i]);
    auxtrunk_plugin_unload(pl);
    ck_assert(pl->lib == NULL && pl->entry == NULL);
}
END_TEST

START_TEST(test_negotiate_ranges)
{
    auxtrunk_host_info_t h;
    /* Exactly 1.0, and ranges overlapping 1.0: the plugin speaks only 1.0. */
    h = host_info(V(1, 0), V(1, 0));
    ck_assert_uint_eq(negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_OK), V(1, 0));
    h = host_info(V(0, 1), V(1, 5));
    ck_assert_uint_eq(negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_OK), V(1, 0));
    h = host_info(V(1, 0), V(2, 3));
    ck_assert_uint_eq(negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_OK), V(1, 0));
    h = host_info(V(0, 0), V(0xFFFF, 0xFFFF));
    ck_assert_uint_eq(negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_OK), V(1, 0));
    /* Host too old (below), too new (above), inverted ranges. */
    h = host_info(V(0, 0), V(0, 9));
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_ABI_VERSION);
    h = host_info(V(1, 1), V(1, 7));
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_ABI_VERSION);
    h = host_info(V(2, 0), V(2, 0));
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_ABI_VERSION);
    h = host_info(V(1, 1), V(1, 0));
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_ABI_VERSION);
    h = host_info(V(2, 0), V(0, 0));
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_ABI_VERSION);
}
END_TEST

START_TEST(test_negotiate_struct_sizes)
{
    auxtrunk_host_info_t h = host_info(V(1, 0), V(1, 0));
    /* api table: below the 1.0 size is refused; larger gets zeros after 96. */
    negotiate(&h, AUXTRUNK_API_SIZE_1_0 - 8, AUXTRUNK_E_STRUCT_SIZE);
    negotiate(&h, 0, AUXTRUNK_E_STRUCT_SIZE);
    negotiate(&h, AUXTRUNK_API_SIZE_1_0 + 40, AUXTRUNK_OK);
    negotiate(&h, AUXTRUNK_API_SIZE_1_0 + 1, AUXTRUNK_OK);

    /* host info: below 1.0 refused; larger accepted only with a zero tail. */
    struct {
        auxtrunk_host_info_t info;
        uint32_t tail[4];
    } big = {host_info(V(1, 0), V(1, 0)), {0, 0, 0, 0}};
    big.info.struct_size = sizeof big;
    ck_assert_uint_eq(negotiate(&big.info, sizeof(auxtrunk_api_t), AUXTRUNK_OK), V(1, 0));
    big.tail[3] = 1;
    negotiate(&big.info, sizeof(auxtrunk_api_t), AUXTRUNK_E_STRUCT_SIZE);
    big.tail[3] = 0;
    big.info.struct_size = sizeof big - 4; /* the non-zero byte lies outside: fine */
    big.tail[3] = 7;
    ck_assert_uint_eq(negotiate(&big.info, sizeof(auxtrunk_api_t), AUXTRUNK_OK), V(1, 0));
    h.struct_size = AUXTRUNK_HOST_INFO_SIZE_1_0 - 4;
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_STRUCT_SIZE);
    h.struct_size = 0;
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_STRUCT_SIZE);
}
END_TEST

START_TEST(test_negotiate_flags_and_nulls)
{
    auxtrunk_host_info_t h = host_info(V(1, 0), V(1, 0));
    h.flags = 1;
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_FLAGS);
    h.flags = UINT32_C(0x80000000);
    negotiate(&h, sizeof(auxtrunk_api_t), AUXTRUNK_E_FLAGS);
    negotiate(NULL, sizeof(auxtrunk_api_t), AUXTRUNK_E_NULL_POINTER);
    h.flags = 0;
    ck_assert_int_eq(load_entry()(&h, NULL), AUXTRUNK_E_NULL_POINTER);
    /* Many calls, same table. */
    auxtrunk_api_t a, b;
    a.struct_size = b.struct_size = sizeof a;
    ck_assert_int_eq(load_entry()(&h, &a), AUXTRUNK_OK);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(load_entry()(&h, &b), AUXTRUNK_OK);
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
}
END_TEST

START_TEST(test_status_string)
{
    const auxtrunk_api_t *a = api();
    /* Every status of the map, and unknown values around it. */
    for (int32_t s = -40; s <= 8; s++)
        ck_assert_str_eq(a->status_string(s), auxtrunk_status_message(s));
    ck_assert_str_eq(a->status_string(AUXTRUNK_E_ALIAS),
                     "an output buffer overlaps an input or another output");
    const int32_t unknown[] = {1, 2, -16, -17, 1000, -1000, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++)
        ck_assert_str_eq(a->status_string(unknown[i]), "unknown status");
}
END_TEST

/* ------------------------------------------------------------------------- */
/* init, destroy, memory_usage                                               */

/* init must fail with want and leave *out untouched. */
static void expect_init_fails(const auxtrunk_config_t *c, int32_t want, const char *what)
{
    auxtrunk_handle_t *sentinel = (auxtrunk_handle_t *)(uintptr_t)0x5151;
    auxtrunk_handle_t *h = sentinel;
    int32_t st = api()->init(c, &h);
    ck_assert_msg(st == want, "%s: init returned %d (%s), want %d", what, st,
                  api()->status_string(st), want);
    ck_assert_msg(h == sentinel, "%s: *out_handle written on error", what);
}

START_TEST(test_init_config_rules)
{
    const auxtrunk_api_t *a = api();
    auxtrunk_config_t c = config_of(T_TINY);
    auxtrunk_handle_t *h = NULL;
    ck_assert_int_eq(a->init(&c, &h), AUXTRUNK_OK);
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);

    expect_init_fails(NULL, AUXTRUNK_E_NULL_POINTER, "NULL config");
    ck_assert_int_eq(a->init(&c, NULL), AUXTRUNK_E_NULL_POINTER);

    /* struct_size */
    c.struct_size = AUXTRUNK_CONFIG_SIZE_1_0 - 4;
    expect_init_fails(&c, AUXTRUNK_E_STRUCT_SIZE, "small config");
    c.struct_size = 0;
    expect_init_fails(&c, AUXTRUNK_E_STRUCT_SIZE, "zero config size");
    struct {
        auxtrunk_config_t c;
        uint32_t tail[3];
    } big = {config_of(T_TINY), {0, 0, 0}};
    big.c.struct_size = sizeof big;
    h = NULL;
    ck_assert_int_eq(a->init(&big.c, &h), AUXTRUNK_OK);
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
    big.tail[1] = 0x100;
    expect_init_fails(&big.c, AUXTRUNK_E_STRUCT_SIZE, "non-zero unknown tail");

    /* flags: fast mode is not offered, unknown bits are refused */
    c = config_of(T_TINY);
    c.flags = AUXTRUNK_CONFIG_FAST;
    expect_init_fails(&c, AUXTRUNK_E_FLAGS, "CONFIG_FAST");
    c.flags = UINT32_C(1) << 7;
    expect_init_fails(&c, AUXTRUNK_E_FLAGS, "unknown config flag");

    /* dimensions: zero, negative, above the limit, for each width */
    const int32_t bad_width[] = {0, -1, INT32_MIN, AUXTRUNK_MAX_WIDTH + 1, INT32_MAX};
    for (int w = 0; w < 4; w++)
        for (size_t i = 0; i < sizeof bad_width / sizeof *bad_width; i++) {
            c = config_of(T_TINY);
            int32_t *field[4] = {&c.enc, &c.h1, &c.h2, &c.aux};
            *field[w] = bad_width[i];
            expect_init_fails(&c, AUXTRUNK_E_DIMENSION, "bad width");
        }
    const int32_t bad_batch[] = {0, -1, INT32_MIN, AUXTRUNK_MAX_BATCH + 1, INT32_MAX};
    for (size_t i = 0; i < sizeof bad_batch / sizeof *bad_batch; i++) {
        c = config_of(T_TINY);
        c.max_batch = bad_batch[i];
        expect_init_fails(&c, AUXTRUNK_E_DIMENSION, "bad max_batch");
    }
    /* element-count overflow: max_batch * widest > INT32_MAX */
    c = config_of(T_TINY);
    c.max_batch = AUXTRUNK_MAX_BATCH;
    c.h2 = 4096;
    expect_init_fails(&c, AUXTRUNK_E_DIMENSION, "max_batch * H2 overflow");

    /* device: host plugins take only -1 */
    c = config_of(T_TINY);
    c.device = 0;
    expect_init_fails(&c, AUXTRUNK_E_UNSUPPORTED, "device 0");
    c.device = -2;
    expect_init_fails(&c, AUXTRUNK_E_UNSUPPORTED, "device -2");
}
END_TEST

/* Virtual memory of this process in bytes, from /proc/self/statm. */
static size_t vm_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%lu", &pages) != 1)
        pages = 0;
    fclose(f);
    return (size_t)pages * 4096u;
}

START_TEST(test_init_out_of_memory)
{
    const auxtrunk_api_t *a = api();
    size_t vm = vm_bytes();
    if (vm == 0) {
        fprintf(stderr, "test_init_out_of_memory: no /proc/self/statm, skipped\n");
        return;
    }
    /* Address-space limit 700 MB above now: the 410 MB h1 buffer of `big`
     * fits, its h2 buffer does not, so init fails half-way and must unwind. */
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = vm + ((size_t)700 << 20);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
    topo_t big = {1024, 1024, 1024, 1024, 100000};
    auxtrunk_config_t c = config_of(big);
    for (int i = 0; i < 5; i++)
        expect_init_fails(&c, AUXTRUNK_E_OUT_OF_MEMORY, "over the address-space limit");
    /* Had a failed init leaked its h1, this ~520 MB handle would not fit. */
    topo_t fits = {1024, 1024, 1024, 1024, 50000};
    auxtrunk_handle_t *h = make_handle(fits);
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
}
END_TEST

START_TEST(test_destroy_and_bad_handles)
{
    const auxtrunk_api_t *a = api();
    ck_assert_int_eq(a->destroy(NULL), AUXTRUNK_OK);
    ck_assert_str_eq(a->last_error(NULL), "");

    /* Something that is not a live handle: zeros, and a dead magic. */
    static uint64_t fake[1024];
    memset(fake, 0, sizeof fake);
    auxtrunk_handle_t *bad = (auxtrunk_handle_t *)(void *)fake;
    model_t m;
    tst_rng_t r;
    rng_for(&r, 1);
    model_init(&m, T_TINY, &r);
    float x[3] = {0}, out[2], dout[2] = {0};
    grads_t g;
    grads_init(&g, T_TINY);
    auxtrunk_memory_t mem = {sizeof mem, 0, 0, 0};
    for (int pass = 0; pass < 2; pass++) {
        uint32_t magic = pass == 0 ? 0 : UINT32_C(0xDEADA0A0);
        memcpy(fake, &magic, sizeof magic);
        ck_assert_int_eq(a->forward(bad, &m.p, x, 1, out, 0, NULL), AUXTRUNK_E_BAD_HANDLE);
        ck_assert_int_eq(a->infer(bad, &m.p, x, 1, out, 0, NULL), AUXTRUNK_E_BAD_HANDLE);
        ck_assert_int_eq(a->backward(bad, &m.p, x, dout, 1, &g.g, 0, NULL), AUXTRUNK_E_BAD_HANDLE);
        ck_assert_int_eq(a->memory_usage(bad, &mem), AUXTRUNK_E_BAD_HANDLE);
        ck_assert_int_eq(a->destroy(bad), AUXTRUNK_E_BAD_HANDLE);
        ck_assert_str_eq(a->last_error(bad), "");
    }
    /* NULL handle to each entry. */
    ck_assert_int_eq(a->forward(NULL, &m.p, x, 1, out, 0, NULL), AUXTRUNK_E_NULL_POINTER);
    ck_assert_int_eq(a->infer(NULL, &m.p, x, 1, out, 0, NULL), AUXTRUNK_E_NULL_POINTER);
    ck_assert_int_eq(a->backward(NULL, &m.p, x, dout, 1, &g.g, 0, NULL), AUXTRUNK_E_NULL_POINTER);
    ck_assert_int_eq(a->memory_usage(NULL, &mem), AUXTRUNK_E_NULL_POINTER);
    grads_free(&g);
    model_free(&m);
}
END_TEST

START_TEST(test_memory_usage)
{
    const auxtrunk_api_t *a = api();
    auxtrunk_handle_t *h = make_handle(T_PROD);
    /* A larger (newer) struct: everything after struct_size is written, the
     * unknown tail as zero; struct_size itself is the host's. */
    struct {
        auxtrunk_memory_t m;
        uint64_t tail[2];
    } big;
    memset(&big, 0xAB, sizeof big);
    big.m.struct_size = sizeof big;
    ck_assert_int_eq(a->memory_usage(h, &big.m), AUXTRUNK_OK);
    ck_assert_uint_eq(big.m.struct_size, sizeof big);
    ck_assert_uint_eq(big.m.reserved, 0);
    ck_assert_uint_eq(big.m.device_bytes, 0);
    ck_assert_uint_eq(big.tail[0], 0);
    ck_assert_uint_eq(big.tail[1], 0);
    /* At least the record (h1, h2 for max_batch); not absurdly more. */
    uint64_t record = (uint64_t)T_PROD.max_batch * (T_PROD.h1 + T_PROD.h2) * sizeof(float);
    ck_assert_msg(big.m.host_bytes >= record && big.m.host_bytes < 4 * record + (64u << 20),
                  "host_bytes %llu for a %llu-byte record", (unsigned long long)big.m.host_bytes,
                  (unsigned long long)record);

    auxtrunk_memory_t m;
    memset(&m, 0xCD, sizeof m);
    m.struct_size = AUXTRUNK_MEMORY_SIZE_1_0 - 8;
    ck_assert_int_eq(a->memory_usage(h, &m), AUXTRUNK_E_STRUCT_SIZE);
    ck_assert_uint_eq(m.host_bytes, UINT64_C(0xCDCDCDCDCDCDCDCD));
    ck_assert_str_ne(a->last_error(h), "");
    ck_assert_int_eq(a->memory_usage(h, NULL), AUXTRUNK_E_NULL_POINTER);
    ck_assert_str_ne(a->last_error(h), "");
    m.struct_size = sizeof m;
    ck_assert_int_eq(a->memory_usage(h, &m), AUXTRUNK_OK);
    ck_assert_str_eq(a->last_error(h), "");
    ck_assert_uint_eq(m.host_bytes, big.m.host_bytes);
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Forward                                                                   */

typedef struct fcase {
    topo_t t;
    int32_t batch;
} fcase_t;

/* Worst error against ref64 relative to the tensor's scale, with the
 * conformance runner's floors (ref64_out_floor, ref64_grads_floor). Worst
 * seen over 10,000 seeds a case (2,000 from B = 600 up): 2.4e-6 for out
 * (TINY, B = 1, over 200,000 seeds), 1.1e-5 for the gradients (TINY,
 * B = 513 and 2048: two-wide db3 sums that cancel). Each limit keeps a
 * margin of four or more over that. */
#define FWD_TOL 1e-5
#define BWD_TOL 5e-5

static const fcase_t FWD_CASES[] = {
    {TINY, 1},   {TINY, 2},   {TINY, 3},    {TINY, 97},   {TINY, 256}, {TINY, 257},
    {TINY, 509}, {TINY, 513}, {TINY, 1537}, {TINY, 2048}, /* 2048: the configured max */
    {ODD, 1},    {ODD, 63},   {ODD, 257},   {ODD, 700},   {PROD, 1},   {PROD, 2},
    {PROD, 97},  {PROD, 256}, {PROD, 257},  {PROD, 509},  {PROD, 513}, {PROD, 600},
};
#define N_FWD_CASES ((int)(sizeof FWD_CASES / sizeof *FWD_CASES))

/* forward and infer, each into a poisoned guarded out, against canon32 (bits)
 * and ref64 (tolerance). */
START_TEST(test_forward_numerics)
{
    const fcase_t fc = FWD_CASES[_i];
    const topo_t t = fc.t;
    const int32_t B = fc.batch;
    const auxtrunk_api_t *a = api();
    tst_rng_t r;
    rng_for(&r, 100 + (uint64_t)_i);
    model_t m;
    model_init(&m, t, &r);
    float *x = malloc((size_t)B * t.enc * sizeof *x);
    tst_rng_fill(&r, x, (size_t)B * t.enc, -1.0f, 1.0f);
    size_t n_out = (size_t)B * t.aux;
    float *want = malloc(n_out * sizeof *want);
    double *ref = malloc(n_out * sizeof *ref), *h2 = malloc((size_t)B * t.h2 * sizeof *h2);
    ck_assert(want && ref && h2);
    canon32_forward(dims_of(t), &m.rp, x, B, NULL, NULL, want);
    ref64_forward(dims_of(t), &m.rp, x, B, NULL, h2, ref);
    /* judged against the last layer's terms where out cancels (TINY, B = 1:
     * two sums of 7 terms; over 200,000 seeds the worst error was 1.6e-5 of
     * max |out|, and 2.4e-6 with this floor) */
    const double floor = ref64_out_floor(dims_of(t), &m.rp, h2, B);

    auxtrunk_handle_t *h = make_handle(t);
    gbuf_t out;
    gb_alloc(&out, n_out);
    for (int use_infer = 0; use_infer < 2; use_infer++) {
        gb_poison(&out);
        int32_t st = use_infer ? a->infer(h, &m.p, x, B, out.p, 0, NULL)
                               : a->forward(h, &m.p, x, B, out.p, 0, NULL);
        ck_assert_int_eq(st, AUXTRUNK_OK);
        ck_assert_str_eq(a->last_error(h), "");
        gb_check_written(&out, use_infer ? "infer out" : "forward out");
        expect_same_bits(out.p, want, n_out, use_infer ? "infer vs canon32" : "forward vs canon32");
        double err = ref64_max_rel_err_floor(out.p, ref, n_out, floor);
        ck_assert_msg(err < FWD_TOL, "%dx%dx%dx%d B=%d: rel err vs ref64 %.3g", t.enc, t.h1, t.h2,
                      t.aux, B, err);
    }
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
    gb_free(&out);
    free(h2);
    free(ref);
    free(want);
    free(x);
    model_free(&m);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Backward                                                                  */

static const fcase_t BWD_CASES[] = {
    {TINY, 1},   {TINY, 2},    {TINY, 3},    {TINY, 97},   {TINY, 256}, {TINY, 257},
    {TINY, 513}, {TINY, 1000}, {TINY, 1537}, {TINY, 2048}, {ODD, 1},    {ODD, 257},
    {ODD, 700},  {PROD, 1},    {PROD, 64},   {PROD, 257},  {PROD, 600},
};
#define N_BWD_CASES ((int)(sizeof BWD_CASES / sizeof *BWD_CASES))

/* Inputs of one backward case. */
typedef struct bcase {
    topo_t t;
    int32_t batch;
    model_t m;
    float *x, *dout;
} bcase_t;

static void bcase_init(bcase_t *c, topo_t t, int32_t batch, uint64_t tag)
{
    tst_rng_t r;
    rng_for(&r, tag);
    c->t = t;
    c->batch = batch;
    model_init(&c->m, t, &r);
    c->x = malloc((size_t)batch * t.enc * sizeof *c->x);
    c->dout = malloc((size_t)batch * t.aux * sizeof *c->dout);
    ck_assert(c->x && c->dout);
    tst_rng_fill(&r, c->x, (size_t)batch * t.enc, -1.0f, 1.0f);
    tst_rng_fill(&r, c->dout, (size_t)batch * t.aux, -1.0f, 1.0f);
}

static void bcase_free(bcase_t *c)
{
    free(c->dout);
    free(c->x);
    model_free(&c->m);
}

/* The canonical gradients of a case, in a grads_t. */
static void canon_grads(const bcase_t *c, grads_t *want)
{
    grads_init(want, c->t);
    const auxtrunk_grads_t *g = &want->g;
    ck_assert_int_eq(canon32_backward(dims_of(c->t), &c->m.rp, c->x, c->dout, c->batch, g->dw1,
                                      g->db1, g->dw2, g->db2, g->dw3, g->db3),
                     0);
}

/* forward then backward on h into g (poisoned first); both must succeed. */
static void run_train(auxtrunk_handle_t *h, const bcase_t *c, grads_t *g, uint32_t flags)
{
    const auxtrunk_api_t *a = api();
    float *out = malloc((size_t)c->batch * c->t.aux * sizeof *out);
    ck_assert_int_eq(a->forward(h, &c->m.p, c->x, c->batch, out, 0, NULL), AUXTRUNK_OK);
    if (!(flags & AUXTRUNK_BACKWARD_ACCUMULATE))
        grads_poison(g);
    ck_assert_int_eq(a->backward(h, &c->m.p, c->x, c->dout, c->batch, &g->g, flags, NULL),
                     AUXTRUNK_OK);
    ck_assert_str_eq(a->last_error(h), "");
    free(out);
}

START_TEST(test_backward_numerics)
{
    const fcase_t bc = BWD_CASES[_i];
    bcase_t c;
    bcase_init(&c, bc.t, bc.batch, 200 + (uint64_t)_i);
    auxtrunk_handle_t *h = make_handle(c.t);
    grads_t got, want;
    grads_init(&got, c.t);
    run_train(h, &c, &got, 0);
    grads_check_written(&got);
    canon_grads(&c, &want);
    grads_expect_same(&got, &want, "backward vs canon32");

    size_t n[6];
    tensor_sizes(c.t, n);
    double *ref[6];
    for (int i = 0; i < 6; i++)
        ref[i] = malloc(n[i] * sizeof(double));
    ck_assert_int_eq(ref64_backward(dims_of(c.t), &c.m.rp, c.x, c.dout, c.batch, ref[0], ref[1],
                                    ref[2], ref[3], ref[4], ref[5]),
                     0);
    /* the conformance runner's rule: the six tensors share a floor of a
     * tenth of the largest one's scale, so that a bias of a few sums that
     * cancel (TINY's db3 is two sums of B terms) is judged against the size
     * of its terms, not its own small value */
    double floor = ref64_grads_floor(dims_of(c.t), (const double *const *)ref);
    for (int i = 0; i < 6; i++) {
        double err = ref64_max_rel_err_floor(got.buf[i].p, ref[i], n[i], floor);
        ck_assert_msg(err < BWD_TOL, "B=%d %s: rel err vs ref64 %.3g", c.batch, GRAD_NAMES[i], err);
        free(ref[i]);
    }
    ck_assert_int_eq(api()->destroy(h), AUXTRUNK_OK);
    grads_free(&want);
    grads_free(&got);
    bcase_free(&c);
}
END_TEST

/* The error measure of the numeric checks (ref64_max_rel_err and its floor
 * form, the conformance runner's rule for gradients): a one-element tensor
 * whose sum cancels is judged against the floor, not its own tiny value;
 * the floor never lowers the scale; all-zero references fall back to 1;
 * a non-finite result is infinitely wrong. */
START_TEST(test_error_measure)
{
    const double tiny[1] = {1e-9}, vec[3] = {-4.0, 1.0, 2.0}, zero[2] = {0.0, 0.0};
    const float off[1] = {1e-7f}, near[3] = {-4.0f, 1.0f, 2.5f}, z[2] = {0.0f, 0.25f};
    ck_assert_double_eq(ref64_max_abs(vec, 3), 4.0);
    ck_assert_double_gt(ref64_max_rel_err(off, tiny, 1), 90.0);
    ck_assert_double_lt(ref64_max_rel_err_floor(off, tiny, 1, 1.0), 1e-6);
    ck_assert_double_eq(ref64_max_rel_err_floor(near, vec, 3, 0.5),
                        ref64_max_rel_err(near, vec, 3));
    ck_assert_double_eq_tol(ref64_max_rel_err(near, vec, 3), 0.125, 1e-12);
    ck_assert_double_eq_tol(ref64_max_rel_err(z, zero, 2), 0.25, 1e-12);
    const float bad[3] = {-4.0f, NAN, 2.0f};
    ck_assert(isinf(ref64_max_rel_err_floor(bad, vec, 3, 1.0)));
}
END_TEST

/* Every shape of the batch tree from 1 to 40 chunks (full and ragged last
 * chunks), on the tiny topology, bit for bit against canon32. */
START_TEST(test_backward_tree_shapes)
{
    const topo_t t = {3, 5, 7, 2, 40 * 256};
    auxtrunk_handle_t *h = make_handle(t);
    const int32_t ragged[4] = {0, 1, 129, 255};
    for (int32_t nc = 1; nc <= 40; nc++) {
        int32_t batch = nc * 256 - ragged[nc % 4];
        bcase_t c;
        bcase_init(&c, t, batch, 300 + (uint64_t)nc);
        grads_t got, want;
        grads_init(&got, t);
        run_train(h, &c, &got, 0);
        canon_grads(&c, &want);
        char what[64];
        snprintf(what, sizeof what, "B=%d (%d chunks)", batch, nc);
        grads_expect_same(&got, &want, what);
        grads_free(&want);
        grads_free(&got);
        bcase_free(&c);
    }
    ck_assert_int_eq(api()->destroy(h), AUXTRUNK_OK);
}
END_TEST

/* Central differences of ref64_loss (double) at sampled parameter indices
 * against the plugin's gradient. The perturbed parameter is a float, so the
 * step actually taken is measured and used. The step is small (1e-5 of the
 * parameter's size) because ELU's second derivative jumps at 0: where the
 * step moves a pre-activation across 0, the central difference is off by
 * O(step), not O(step^2) (a step of 1e-3 gave 1.2e-4 of the tensor's scale
 * for one seed). The loss is in double, so the small step costs nothing in
 * rounding. */
static const fcase_t FD_CASES[] = {
    {TINY, 300},
    {ODD, 5},
    {PROD, 3},
};

START_TEST(test_backward_finite_differences)
{
    const fcase_t fc = FD_CASES[_i];
    bcase_t c;
    bcase_init(&c, fc.t, fc.batch, 400 + (uint64_t)_i);
    auxtrunk_handle_t *h = make_handle(c.t);
    grads_t got;
    grads_init(&got, c.t);
    run_train(h, &c, &got, 0);

    tst_rng_t r;
    rng_for(&r, 450 + (uint64_t)_i);
    size_t n[6];
    tensor_sizes(c.t, n);
    const int samples = 12;
    for (int i = 0; i < 6; i++) {
        float scale = 0.0f;
        for (size_t j = 0; j < n[i]; j++)
            scale = fmaxf(scale, fabsf(got.buf[i].p[j]));
        float *param = c.m.buf[i].p; /* the model's own storage: perturbed in place */
        for (int s = 0; s < samples; s++) {
            size_t j = (size_t)(tst_rng_next(&r) % n[i]);
            const float w = param[j];
            const double step = 1e-5 * fmax(1.0, fabs(w));
            float wp = (float)(w + step), wm = (float)(w - step);
            param[j] = wp;
            double lp = ref64_loss(dims_of(c.t), &c.m.rp, c.x, c.dout, c.batch);
            param[j] = wm;
            double lm = ref64_loss(dims_of(c.t), &c.m.rp, c.x, c.dout, c.batch);
            param[j] = w;
            double fd = (lp - lm) / ((double)wp - (double)wm);
            double err = fabs(fd - (double)got.buf[i].p[j]);
            ck_assert_msg(err <= 1e-4 * scale, /* observed: below 1e-5 * scale (192 seeds) */
                          "%s[%zu]: finite difference %.7g, plugin %.7g (tensor scale %.3g)",
                          GRAD_NAMES[i], j, fd, got.buf[i].p[j], scale);
        }
    }
    ck_assert_int_eq(api()->destroy(h), AUXTRUNK_OK);
    grads_free(&got);
    bcase_free(&c);
}
END_TEST

/* ACCUMULATE: g = g_old + overwrite result, one float addition per element,
 * and twice = (g_old + r) + r. */
START_TEST(test_backward_accumulate)
{
    const fcase_t cases[2] = {{TINY, 1537}, {PROD, 64}};
    bcase_t c;
    bcase_init(&c, cases[_i].t, cases[_i].batch, 500 + (uint64_t)_i);
    auxtrunk_handle_t *h = make_handle(c.t);
    grads_t fresh, acc, want;
    grads_init(&fresh, c.t);
    grads_init(&acc, c.t);
    grads_init(&want, c.t);
    run_train(h, &c, &fresh, 0);

    tst_rng_t r;
    rng_for(&r, 550 + (uint64_t)_i);
    for (int i = 0; i < 6; i++) {
        tst_rng_fill(&r, acc.buf[i].p, acc.buf[i].n, -2.0f, 2.0f);
        for (size_t j = 0; j < acc.buf[i].n; j++)
            want.buf[i].p[j] = acc.buf[i].p[j] + fresh.buf[i].p[j];
    }
    const auxtrunk_api_t *a = api();
    ck_assert_int_eq(
        a->backward(h, &c.m.p, c.x, c.dout, c.batch, &acc.g, AUXTRUNK_BACKWARD_ACCUMULATE, NULL),
        AUXTRUNK_OK);
    grads_expect_same(&acc, &want, "accumulate once");
    for (int i = 0; i < 6; i++)
        for (size_t j = 0; j < acc.buf[i].n; j++)
            want.buf[i].p[j] = want.buf[i].p[j] + fresh.buf[i].p[j];
    ck_assert_int_eq(
        a->backward(h, &c.m.p, c.x, c.dout, c.batch, &acc.g, AUXTRUNK_BACKWARD_ACCUMULATE, NULL),
        AUXTRUNK_OK);
    grads_expect_same(&acc, &want, "accumulate twice");
    for (int i = 0; i < 6; i++)
        gb_check_guards(&acc.buf[i], GRAD_NAMES[i]);
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
    grads_free(&want);
    grads_free(&acc);
    grads_free(&fresh);
    bcase_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Rules: determinism, stop-gradient, infer vs record, fp environment         */

START_TEST(test_determinism)
{
    const fcase_t cases[2] = {{TINY, 1537}, {PROD, 257}};
    bcase_t c;
    bcase_init(&c, cases[_i].t, cases[_i].batch, 600 + (uint64_t)_i);
    const auxtrunk_api_t *a = api();
    topo_t wider = c.t;
    wider.max_batch = 3 * c.t.max_batch; /* another workspace layout, same bits */
    auxtrunk_handle_t *h1 = make_handle(c.t), *h2 = make_handle(wider);
    grads_t first, again;
    grads_init(&first, c.t);
    grads_init(&again, c.t);
    size_t n_out = (size_t)c.batch * c.t.aux;
    float *out1 = malloc(n_out * sizeof *out1), *out2 = malloc(n_out * sizeof *out2);

    ck_assert_int_eq(a->forward(h1, &c.m.p, c.x, c.batch, out1, 0, NULL), AUXTRUNK_OK);
    run_train(h1, &c, &first, 0);
    for (int rep = 0; rep < 3; rep++) {
        auxtrunk_handle_t *h = (rep % 2) ? h2 : h1;
        ck_assert_int_eq(a->forward(h, &c.m.p, c.x, c.batch, out2, 0, NULL), AUXTRUNK_OK);
        expect_same_bits(out2, out1, n_out, "repeated forward");
        run_train(h, &c, &again, 0);
        grads_expect_same(&again, &first, "repeated forward+backward");
        /* backward again on the same record */
        grads_poison(&again);
        ck_assert_int_eq(a->backward(h, &c.m.p, c.x, c.dout, c.batch, &again.g, 0, NULL),
                         AUXTRUNK_OK);
        grads_expect_same(&again, &first, "repeated backward");
    }
    ck_assert_int_eq(a->destroy(h2), AUXTRUNK_OK);
    ck_assert_int_eq(a->destroy(h1), AUXTRUNK_OK);
    free(out2);
    free(out1);
    grads_free(&again);
    grads_free(&first);
    bcase_free(&c);
}
END_TEST

/* x (with guard zones) and every parameter are unchanged byte for byte after
 * forward, infer and backward; outputs are fully written inside their guards. */
START_TEST(test_stop_gradient)
{
    const topo_t t = T_PROD;
    const int32_t B = 97;
    tst_rng_t r;
    rng_for(&r, 700);
    model_t m;
    model_init(&m, t, &r);
    gbuf_t x, dout, out;
    tst_rng_fill(&r, gb_alloc(&x, (size_t)B * t.enc), (size_t)B * t.enc, -1.0f, 1.0f);
    tst_rng_fill(&r, gb_alloc(&dout, (size_t)B * t.aux), (size_t)B * t.aux, -1.0f, 1.0f);
    gb_alloc(&out, (size_t)B * t.aux);
    const size_t xbytes = (x.n + 2 * GUARD) * sizeof(float);
    unsigned char *x_before = malloc(xbytes);
    memcpy(x_before, x.base, xbytes);
    unsigned char *p_before[6];
    for (int i = 0; i < 6; i++) {
        size_t nb = (m.buf[i].n + 2 * GUARD) * sizeof(float);
        p_before[i] = malloc(nb);
        memcpy(p_before[i], m.buf[i].base, nb);
    }
    const auxtrunk_api_t *a = api();
    auxtrunk_handle_t *h = make_handle(t);
    grads_t g;
    grads_init(&g, t);

    for (int step = 0; step < 3; step++) {
        int32_t st;
        if (step < 2) {
            gb_poison(&out);
            st = step == 0 ? a->forward(h, &m.p, x.p, B, out.p, 0, NULL)
                           : a->infer(h, &m.p, x.p, B, out.p, 0, NULL);
            ck_assert_int_eq(st, AUXTRUNK_OK);
            gb_check_written(&out, step == 0 ? "forward out" : "infer out");
        } else {
            grads_poison(&g);
            st = a->backward(h, &m.p, x.p, dout.p, B, &g.g, 0, NULL);
            ck_assert_int_eq(st, AUXTRUNK_OK);
            grads_check_written(&g);
        }
        ck_assert_msg(memcmp(x.base, x_before, xbytes) == 0, "x or its guards changed (step %d)",
                      step);
        for (int i = 0; i < 6; i++)
            ck_assert_msg(
                memcmp(m.buf[i].base, p_before[i], (m.buf[i].n + 2 * GUARD) * sizeof(float)) == 0,
                "%s changed (step %d)", TENSOR_NAMES[i], step);
        gb_check_guards(&dout, "dout");
    }
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
    for (int i = 0; i < 6; i++)
        free(p_before[i]);
    free(x_before);
    grads_free(&g);
    gb_free(&out);
    gb_free(&dout);
    gb_free(&x);
    model_free(&m);
}
END_TEST

/* An inference forward (another parameter set, another batch) between a
 * training forward and its backward changes nothing in that backward; infer
 * alone records nothing; infer and forward give the same bits. */
START_TEST(test_infer_keeps_record)
{
    const topo_t t = T_ODD;
    const auxtrunk_api_t *a = api();
    bcase_t train, target;
    bcase_init(&train, t, 300, 800);
    bcase_init(&target, t, 650, 801);
    auxtrunk_handle_t *h = make_handle(t);
    grads_t plain, with_infer;
    grads_init(&plain, t);
    grads_init(&with_infer, t);
    run_train(h, &train, &plain, 0);

    size_t n_out = (size_t)target.batch * t.aux;
    float *out = malloc((size_t)train.batch * t.aux * sizeof *out);
    float *inf = malloc(n_out * sizeof *inf), *fwd = malloc(n_out * sizeof *fwd);
    ck_assert_int_eq(a->forward(h, &train.m.p, train.x, train.batch, out, 0, NULL), AUXTRUNK_OK);
    ck_assert_int_eq(a->infer(h, &target.m.p, target.x, target.batch, inf, 0, NULL), AUXTRUNK_OK);
    ck_assert_int_eq(
        a->backward(h, &train.m.p, train.x, train.dout, train.batch, &with_infer.g, 0, NULL),
        AUXTRUNK_OK);
    grads_expect_same(&with_infer, &plain, "backward after an infer");

    /* infer's bits are forward's bits. */
    auxtrunk_handle_t *h2 = make_handle(t);
    ck_assert_int_eq(a->forward(h2, &target.m.p, target.x, target.batch, fwd, 0, NULL),
                     AUXTRUNK_OK);
    expect_same_bits(inf, fwd, n_out, "infer vs forward");
    ck_assert_int_eq(a->destroy(h2), AUXTRUNK_OK);

    /* infer records nothing. */
    auxtrunk_handle_t *h3 = make_handle(t);
    ck_assert_int_eq(a->infer(h3, &target.m.p, target.x, target.batch, inf, 0, NULL), AUXTRUNK_OK);
    ck_assert_int_eq(
        a->backward(h3, &target.m.p, target.x, target.dout, target.batch, &with_infer.g, 0, NULL),
        AUXTRUNK_E_NO_FORWARD);
    ck_assert_int_eq(a->destroy(h3), AUXTRUNK_OK);

    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
    free(fwd);
    free(inf);
    free(out);
    grads_free(&with_infer);
    grads_free(&plain);
    bcase_free(&target);
    bcase_free(&train);
}
END_TEST

/* A host running with another rounding mode and (x86) flush-to-zero and
 * denormals-are-zero, as a -ffast-math trainer does, still gets the canonical
 * bits, and gets its own environment back. */
START_TEST(test_fp_environment)
{
    const auxtrunk_api_t *a = api();
    bcase_t c;
    bcase_init(&c, T_ODD, 97, 900);
    size_t n_out = (size_t)c.batch * c.t.aux;
    float *want = malloc(n_out * sizeof *want), *out = malloc(n_out * sizeof *out);
    canon32_forward(dims_of(c.t), &c.m.rp, c.x, c.batch, NULL, NULL, want);
    grads_t g, gwant;
    grads_init(&g, c.t);
    canon_grads(&c, &gwant);

    /* 1x1x1x1 with identity weights: a denormal x must come out unchanged. */
    const topo_t unit = {1, 1, 1, 1, 1};
    const float one = 1.0f, zero = 0.0f, tiny = 1e-40f;
    auxtrunk_params_t up = {sizeof up, 0, &one, &zero, &one, &zero, &one, &zero};
    float tiny_out = 0.0f;

    auxtrunk_handle_t *h = make_handle(c.t), *hu = make_handle(unit);
    ck_assert_int_eq(fesetround(FE_TOWARDZERO), 0);
#if defined(__x86_64__)
    const unsigned int ftz_daz = 0x8040u;
    _mm_setcsr(_mm_getcsr() | ftz_daz);
#endif
    int32_t st1 = a->forward(h, &c.m.p, c.x, c.batch, out, 0, NULL);
    int32_t st2 = a->backward(h, &c.m.p, c.x, c.dout, c.batch, &g.g, 0, NULL);
    int32_t st3 = a->forward(hu, &up, &tiny, 1, &tiny_out, 0, NULL);
    int round_after = fegetround();
#if defined(__x86_64__)
    unsigned int csr_after = _mm_getcsr();
    _mm_setcsr(_mm_getcsr() & ~ftz_daz);
    ck_assert_msg((csr_after & ftz_daz) == ftz_daz, "the host's FTZ/DAZ bits were not restored");
#endif
    fesetround(FE_TONEAREST);
    ck_assert_int_eq(round_after, FE_TOWARDZERO);
    ck_assert_int_eq(st1, AUXTRUNK_OK);
    ck_assert_int_eq(st2, AUXTRUNK_OK);
    ck_assert_int_eq(st3, AUXTRUNK_OK);
    expect_same_bits(out, want, n_out, "forward under a foreign fp environment");
    grads_expect_same(&g, &gwant, "backward under a foreign fp environment");
    ck_assert_msg(tst_f32_bits(tiny_out) == tst_f32_bits(tiny), "denormal flushed: %g", tiny_out);

    ck_assert_int_eq(a->destroy(hu), AUXTRUNK_OK);
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
    grads_free(&gwant);
    grads_free(&g);
    free(out);
    free(want);
    bcase_free(&c);
}
END_TEST

/* Calls on different handles may run at the same time (abi/auxtrunk.h,
 * "Threading"): two threads, one handle each, same inputs, canonical bits. */
typedef struct worker {
    const bcase_t *c;
    grads_t g;
    float *out;
    int32_t status;
} worker_t;

static void *worker_run(void *arg)
{
    worker_t *w = arg;
    const auxtrunk_api_t *a = api();
    auxtrunk_config_t cfg = config_of(w->c->t);
    auxtrunk_handle_t *h = NULL;
    w->status = a->init(&cfg, &h);
    for (int rep = 0; rep < 4 && w->status == AUXTRUNK_OK; rep++) {
        w->status = a->forward(h, &w->c->m.p, w->c->x, w->c->batch, w->out, 0, NULL);
        if (w->status == AUXTRUNK_OK)
            w->status =
                a->backward(h, &w->c->m.p, w->c->x, w->c->dout, w->c->batch, &w->g.g, 0, NULL);
    }
    if (h)
        a->destroy(h);
    return NULL;
}

START_TEST(test_two_handles_concurrently)
{
    bcase_t c;
    bcase_init(&c, T_ODD, 600, 950);
    size_t n_out = (size_t)c.batch * c.t.aux;
    float *want = malloc(n_out * sizeof *want);
    canon32_forward(dims_of(c.t), &c.m.rp, c.x, c.batch, NULL, NULL, want);
    grads_t gwant;
    canon_grads(&c, &gwant);
    api(); /* load before the threads start */
    worker_t w[2];
    pthread_t tid[2];
    for (int i = 0; i < 2; i++) {
        w[i].c = &c;
        w[i].out = malloc(n_out * sizeof *w[i].out);
        grads_init(&w[i].g, c.t);
        ck_assert_int_eq(pthread_create(&tid[i], NULL, worker_run, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
        ck_assert_int_eq(w[i].status, AUXTRUNK_OK);
        expect_same_bits(w[i].out, want, n_out, "concurrent forward");
        grads_expect_same(&w[i].g, &gwant, "concurrent backward");
        grads_free(&w[i].g);
        free(w[i].out);
    }
    grads_free(&gwant);
    free(want);
    bcase_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Bad input: status, nothing written, record kept, last_error set           */

/*
 * A handle with a recorded training forward (batch B0) and the gradients that
 * record gives; every buffer a call could write is snapshotted so "writes
 * nothing" is checked over all of them after each failing call.
 */
typedef struct bad_ctx {
    bcase_t c;
    auxtrunk_handle_t *h;
    gbuf_t out;
    grads_t g, g_ref;
    unsigned char *snap;
    size_t snap_bytes;
} bad_ctx_t;

static size_t gbuf_bytes(const gbuf_t *b) { return (b->n + 2 * GUARD) * sizeof(float); }

/* The buffers a failing call must leave alone: out, the six gradients, the
 * six parameters, x and dout (x/dout are plain, the rest with guards). */
static size_t snapshot(const bad_ctx_t *k, unsigned char *dst)
{
    size_t off = 0;
#define SNAP_(ptr, bytes)                      \
    do {                                       \
        if (dst)                               \
            memcpy(dst + off, (ptr), (bytes)); \
        off += (bytes);                        \
    } while (0)
    SNAP_(k->out.base, gbuf_bytes(&k->out));
    for (int i = 0; i < 6; i++) {
        SNAP_(k->g.buf[i].base, gbuf_bytes(&k->g.buf[i]));
        SNAP_(k->c.m.buf[i].base, gbuf_bytes(&k->c.m.buf[i]));
    }
    SNAP_(k->c.x, (size_t)k->c.batch * k->c.t.enc * sizeof(float));
    SNAP_(k->c.dout, (size_t)k->c.batch * k->c.t.aux * sizeof(float));
#undef SNAP_
    return off;
}

static void bad_setup(bad_ctx_t *k)
{
    topo_t t = T_ODD;
    t.max_batch = 400;
    bcase_init(&k->c, t, 300, 1000);
    k->h = make_handle(t);
    gb_alloc(&k->out, (size_t)k->c.batch * t.aux);
    grads_init(&k->g, t);
    grads_init(&k->g_ref, t);
    run_train(k->h, &k->c, &k->g_ref, 0); /* the record every failing call must keep */
    gb_poison(&k->out);
    grads_poison(&k->g);
    k->snap_bytes = snapshot(k, NULL);
    k->snap = malloc(k->snap_bytes);
    snapshot(k, k->snap);
}

static void bad_check_failed(bad_ctx_t *k, int32_t st, int32_t want, const char *what,
                             const char *mention)
{
    const auxtrunk_api_t *a = api();
    ck_assert_msg(st == want, "%s: returned %d (%s), want %d (%s)", what, st, a->status_string(st),
                  want, a->status_string(want));
    unsigned char *now = malloc(k->snap_bytes);
    snapshot(k, now);
    ck_assert_msg(memcmp(now, k->snap, k->snap_bytes) == 0, "%s: a buffer was written", what);
    free(now);
    const char *msg = a->last_error(k->h);
    ck_assert_msg(msg && msg[0], "%s: last_error is empty", what);
    if (mention)
        ck_assert_msg(strstr(msg, mention), "%s: last_error \"%s\" does not mention %s", what, msg,
                      mention);
}

/* The record is what it was: a valid backward gives the reference bits. */
static void bad_check_record(bad_ctx_t *k)
{
    grads_t g;
    grads_init(&g, k->c.t);
    ck_assert_int_eq(api()->backward(k->h, &k->c.m.p, k->c.x, k->c.dout, k->c.batch, &g.g, 0, NULL),
                     AUXTRUNK_OK);
    grads_expect_same(&g, &k->g_ref, "backward after failed calls");
    grads_free(&g);
}

static void bad_teardown(bad_ctx_t *k)
{
    ck_assert_int_eq(api()->destroy(k->h), AUXTRUNK_OK);
    free(k->snap);
    grads_free(&k->g_ref);
    grads_free(&k->g);
    gb_free(&k->out);
    bcase_free(&k->c);
}

/* _i = 0: forward, 1: infer. */
START_TEST(test_bad_forward)
{
    bad_ctx_t k;
    bad_setup(&k);
    const auxtrunk_api_t *a = api();
    int32_t (*call)(auxtrunk_handle_t *, const auxtrunk_params_t *, const float *, int32_t, float *,
                    uint32_t, void *) = _i == 0 ? a->forward : a->infer;
    const int32_t B = 200; /* a valid batch other than the recorded one */
    const auxtrunk_params_t good = k.c.m.p;
    auxtrunk_params_t p;
    float *x = k.c.x, *out = k.out.p;

    bad_check_failed(&k, call(k.h, NULL, x, B, out, 0, NULL), AUXTRUNK_E_NULL_POINTER,
                     "params NULL", "params");
    bad_check_failed(&k, call(k.h, &good, NULL, B, out, 0, NULL), AUXTRUNK_E_NULL_POINTER, "x NULL",
                     "x");
    bad_check_failed(&k, call(k.h, &good, x, B, NULL, 0, NULL), AUXTRUNK_E_NULL_POINTER, "out NULL",
                     "out");
    for (int i = 0; i < 6; i++) {
        p = good;
        const float **field[6] = {&p.w1, &p.b1, &p.w2, &p.b2, &p.w3, &p.b3};
        *field[i] = NULL;
        bad_check_failed(&k, call(k.h, &p, x, B, out, 0, NULL), AUXTRUNK_E_NULL_POINTER,
                         "parameter NULL", TENSOR_NAMES[i]);
    }

    p = good;
    p.struct_size = AUXTRUNK_PARAMS_SIZE_1_0 - 8;
    bad_check_failed(&k, call(k.h, &p, x, B, out, 0, NULL), AUXTRUNK_E_STRUCT_SIZE,
                     "params too small", "struct_size");
    p.struct_size = 0;
    bad_check_failed(&k, call(k.h, &p, x, B, out, 0, NULL), AUXTRUNK_E_STRUCT_SIZE, "params size 0",
                     "struct_size");
    p = good;
    p.reserved = 1;
    bad_check_failed(&k, call(k.h, &p, x, B, out, 0, NULL), AUXTRUNK_E_STRUCT_SIZE,
                     "params reserved", "reserved");
    struct {
        auxtrunk_params_t p;
        uint64_t tail;
    } big = {good, 0x1};
    big.p.struct_size = sizeof big;
    bad_check_failed(&k, call(k.h, &big.p, x, B, out, 0, NULL), AUXTRUNK_E_STRUCT_SIZE,
                     "params non-zero tail", "struct_size");

    const uint32_t bad_flags[] = {1, 2, UINT32_C(0x80000000)};
    for (size_t i = 0; i < 3; i++)
        bad_check_failed(&k, call(k.h, &good, x, B, out, bad_flags[i], NULL), AUXTRUNK_E_FLAGS,
                         "flags", "flags");
    const int32_t bad_batch[] = {0, -1, INT32_MIN, 401, INT32_MAX};
    for (size_t i = 0; i < 5; i++)
        bad_check_failed(&k, call(k.h, &good, x, bad_batch[i], out, 0, NULL), AUXTRUNK_E_BATCH,
                         "batch", "batch");

    /* out overlapping x: one float inside either end, and x inside out. */
    const size_t nx = (size_t)B * k.c.t.enc, no = (size_t)B * k.c.t.aux;
    bad_check_failed(&k, call(k.h, &good, x, B, x + nx - 1, 0, NULL), AUXTRUNK_E_ALIAS,
                     "out starts in x's last float", "x");
    bad_check_failed(&k, call(k.h, &good, x + no - 1, B, x, 0, NULL), AUXTRUNK_E_ALIAS,
                     "out ends in x's first float", "x");
    /* out overlapping each parameter (B=1 keeps out inside small tensors). */
    const float *params[6] = {good.w1, good.b1, good.w2, good.b2, good.w3, good.b3};
    for (int i = 0; i < 6; i++)
        bad_check_failed(&k, call(k.h, &good, x, 1, (float *)(uintptr_t)params[i], 0, NULL),
                         AUXTRUNK_E_ALIAS, "out on a parameter", TENSOR_NAMES[i]);
    bad_check_record(&k);

    /* Touching is not overlapping: out right after x's B rows is accepted
     * (x has the recorded batch's rows, so this lies inside x's storage). */
    ck_assert_int_eq(call(k.h, &good, x, 1, x + k.c.t.enc, 0, NULL), AUXTRUNK_OK);
    ck_assert_str_eq(a->last_error(k.h), "");
    bad_teardown(&k);
}
END_TEST

START_TEST(test_bad_backward)
{
    bad_ctx_t k;
    bad_setup(&k);
    const auxtrunk_api_t *a = api();
    const int32_t B = k.c.batch;
    const auxtrunk_params_t good = k.c.m.p;
    const auxtrunk_grads_t gg = k.g.g;
    auxtrunk_params_t p;
    auxtrunk_grads_t g;
    const float *x = k.c.x, *dout = k.c.dout;

    bad_check_failed(&k, a->backward(k.h, NULL, x, dout, B, &gg, 0, NULL), AUXTRUNK_E_NULL_POINTER,
                     "params NULL", "params");
    bad_check_failed(&k, a->backward(k.h, &good, NULL, dout, B, &gg, 0, NULL),
                     AUXTRUNK_E_NULL_POINTER, "x NULL", "x");
    bad_check_failed(&k, a->backward(k.h, &good, x, NULL, B, &gg, 0, NULL), AUXTRUNK_E_NULL_POINTER,
                     "dout NULL", "dout");
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, NULL, 0, NULL),
                     AUXTRUNK_E_NULL_POINTER, "grads NULL", "grads");
    for (int i = 0; i < 6; i++) {
        p = good;
        const float **field[6] = {&p.w1, &p.b1, &p.w2, &p.b2, &p.w3, &p.b3};
        *field[i] = NULL;
        bad_check_failed(&k, a->backward(k.h, &p, x, dout, B, &gg, 0, NULL),
                         AUXTRUNK_E_NULL_POINTER, "parameter NULL", TENSOR_NAMES[i]);
        g = gg;
        float **gfield[6] = {&g.dw1, &g.db1, &g.dw2, &g.db2, &g.dw3, &g.db3};
        *gfield[i] = NULL;
        bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &g, 0, NULL),
                         AUXTRUNK_E_NULL_POINTER, "gradient NULL", GRAD_NAMES[i]);
    }

    p = good;
    p.struct_size = AUXTRUNK_PARAMS_SIZE_1_0 - 1;
    bad_check_failed(&k, a->backward(k.h, &p, x, dout, B, &gg, 0, NULL), AUXTRUNK_E_STRUCT_SIZE,
                     "params too small", "params");
    p = good;
    p.reserved = 3;
    bad_check_failed(&k, a->backward(k.h, &p, x, dout, B, &gg, 0, NULL), AUXTRUNK_E_STRUCT_SIZE,
                     "params reserved", "params");
    g = gg;
    g.struct_size = AUXTRUNK_GRADS_SIZE_1_0 - 8;
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &g, 0, NULL), AUXTRUNK_E_STRUCT_SIZE,
                     "grads too small", "grads");
    g = gg;
    g.reserved = 1;
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &g, 0, NULL), AUXTRUNK_E_STRUCT_SIZE,
                     "grads reserved", "grads");
    struct {
        auxtrunk_grads_t g;
        uint64_t tail;
    } big = {gg, UINT64_C(1) << 40};
    big.g.struct_size = sizeof big;
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &big.g, 0, NULL),
                     AUXTRUNK_E_STRUCT_SIZE, "grads non-zero tail", "grads");

    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &gg, 2, NULL), AUXTRUNK_E_FLAGS,
                     "flags 2", "flags");
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &gg, UINT32_C(0x80000001), NULL),
                     AUXTRUNK_E_FLAGS, "flags high bit", "flags");
    const int32_t bad_batch[] = {0, -5, 401, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < 5; i++)
        bad_check_failed(&k, a->backward(k.h, &good, x, dout, bad_batch[i], &gg, 0, NULL),
                         AUXTRUNK_E_BATCH, "batch", "batch");
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B - 1, &gg, 0, NULL),
                     AUXTRUNK_E_BATCH_MISMATCH, "batch - 1", "recorded");
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, 1, &gg, 0, NULL),
                     AUXTRUNK_E_BATCH_MISMATCH, "batch 1", "recorded");

    /* Aliasing: a gradient on another gradient, on x, on dout, on a parameter. */
    g = gg;
    g.db1 = g.dw1 + 3;
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &g, 0, NULL), AUXTRUNK_E_ALIAS,
                     "db1 inside dw1", "dw1");
    g = gg;
    g.dw3 = g.dw2 + k.c.t.h1 * k.c.t.h2 - 1; /* one float of overlap at dw2's end */
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &g, 0, NULL), AUXTRUNK_E_ALIAS,
                     "dw3 on dw2's last float", "dw2");
    g = gg;
    g.db3 = (float *)(uintptr_t)(x + 5);
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &g, 0, NULL), AUXTRUNK_E_ALIAS,
                     "db3 inside x", "x");
    g = gg;
    g.dw3 = (float *)(uintptr_t)dout;
    bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &g, 0, NULL), AUXTRUNK_E_ALIAS,
                     "dw3 on dout", "dout");
    const float *params[6] = {good.w1, good.b1, good.w2, good.b2, good.w3, good.b3};
    for (int i = 0; i < 6; i++) {
        g = gg;
        g.db2 = (float *)(uintptr_t)params[i];
        bad_check_failed(&k, a->backward(k.h, &good, x, dout, B, &g, 0, NULL), AUXTRUNK_E_ALIAS,
                         "db2 on a parameter", TENSOR_NAMES[i]);
    }
    bad_check_record(&k);
    bad_teardown(&k);
}
END_TEST

START_TEST(test_backward_without_forward)
{
    const auxtrunk_api_t *a = api();
    bcase_t c;
    bcase_init(&c, T_TINY, 10, 1100);
    auxtrunk_handle_t *h = make_handle(T_TINY);
    grads_t g;
    grads_init(&g, T_TINY);
    ck_assert_int_eq(a->backward(h, &c.m.p, c.x, c.dout, c.batch, &g.g, 0, NULL),
                     AUXTRUNK_E_NO_FORWARD);
    ck_assert_str_ne(a->last_error(h), "");
    for (int i = 0; i < 6; i++)
        for (size_t j = 0; j < g.buf[i].n; j++)
            ck_assert(tst_f32_bits(g.buf[i].p[j]) == POISON_BITS);
    /* A failed forward records nothing either. */
    float out[20];
    ck_assert_int_eq(a->forward(h, &c.m.p, c.x, 0, out, 0, NULL), AUXTRUNK_E_BATCH);
    ck_assert_int_eq(a->backward(h, &c.m.p, c.x, c.dout, c.batch, &g.g, 0, NULL),
                     AUXTRUNK_E_NO_FORWARD);
    ck_assert_int_eq(a->destroy(h), AUXTRUNK_OK);
    grads_free(&g);
    bcase_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------- */

static Suite *cpu_plugin_suite(void)
{
    Suite *s = suite_create("cpu_plugin");
    TCase *tc;

    tc = tcase_create("negotiation");
    tcase_add_test(tc, test_dlopen_exports_only_entry);
    tcase_add_test(tc, test_negotiate_ranges);
    tcase_add_test(tc, test_negotiate_struct_sizes);
    tcase_add_test(tc, test_negotiate_flags_and_nulls);
    tcase_add_test(tc, test_status_string);
    suite_add_tcase(s, tc);

    tc = tcase_create("lifecycle");
    tcase_add_test(tc, test_init_config_rules);
    tcase_add_test(tc, test_init_out_of_memory);
    tcase_add_test(tc, test_destroy_and_bad_handles);
    tcase_add_test(tc, test_memory_usage);
    suite_add_tcase(s, tc);

    tc = tcase_create("numerics");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_forward_numerics, 0, N_FWD_CASES);
    tcase_add_loop_test(tc, test_backward_numerics, 0, N_BWD_CASES);
    tcase_add_test(tc, test_error_measure);
    tcase_add_test(tc, test_backward_tree_shapes);
    tcase_add_loop_test(tc, test_backward_finite_differences, 0,
                        (int)(sizeof FD_CASES / sizeof *FD_CASES));
    tcase_add_loop_test(tc, test_backward_accumulate, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("rules");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_determinism, 0, 2);
    tcase_add_test(tc, test_stop_gradient);
    tcase_add_test(tc, test_infer_keeps_record);
    tcase_add_test(tc, test_fp_environment);
    tcase_add_test(tc, test_two_handles_concurrently);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_bad_forward, 0, 2);
    tcase_add_test(tc, test_bad_backward);
    tcase_add_test(tc, test_backward_without_forward);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    g_seed = tst_seed("test_cpu_plugin");
    SRunner *sr = srunner_create(cpu_plugin_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
