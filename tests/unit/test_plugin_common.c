/*
 * test_plugin_common.c — plugin/common on its own, where a plugin cannot
 * reach it: negotiation for plugins that speak later minor versions and have
 * larger tables, the config limits at their exact boundaries (no allocation
 * happens here, so the largest legal configs can be read), the memory-space
 * hook, the validation order, aliasing at address-space edges and the
 * last-error text. Data pointers are never dereferenced by the checks, so
 * fake addresses stand in for big buffers.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_common.h"

#define V(maj, min) AUXTRUNK_VERSION(maj, min)

/* ------------------------------------------------------------------------- */
/* Negotiation                                                               */

/* A plugin of a later minor version: its table is 16 bytes longer. */
typedef struct future_api {
    auxtrunk_api_t api;
    uint64_t extra[2];
} future_api_t;

static future_api_t future_plugin(uint32_t minor)
{
    future_api_t f;
    memset(&f, 0x11, sizeof f);
    f.api.struct_size = sizeof f;
    f.api.abi_version = V(1, minor);
    return f;
}

static int32_t call(uint32_t lo, uint32_t hi, const future_api_t *mine, unsigned char *room,
                    uint32_t room_size)
{
    auxtrunk_host_info_t h = {sizeof h, lo, hi, 0};
    memcpy(room, &room_size, sizeof room_size);
    return atp_negotiate(&h, (auxtrunk_api_t *)(void *)room, &mine->api);
}

START_TEST(test_negotiate_picks_highest_common)
{
    future_api_t mine = future_plugin(3); /* speaks 1.0 .. 1.3 */
    _Alignas(16) unsigned char room[256];
    auxtrunk_api_t got;
    const struct {
        uint32_t lo, hi, want;
    } ok[] = {
        {V(1, 0), V(1, 0), V(1, 0)}, {V(1, 1), V(1, 2), V(1, 2)}, {V(1, 0), V(1, 9), V(1, 3)},
        {V(0, 5), V(1, 1), V(1, 1)}, {V(1, 3), V(4, 0), V(1, 3)}, {V(1, 3), V(1, 3), V(1, 3)},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        ck_assert_int_eq(call(ok[i].lo, ok[i].hi, &mine, room, sizeof(auxtrunk_api_t)),
                         AUXTRUNK_OK);
        memcpy(&got, room, sizeof got);
        ck_assert_uint_eq(got.abi_version, ok[i].want);
    }
    const struct {
        uint32_t lo, hi;
    } bad[] = {{V(1, 4), V(1, 9)}, {V(2, 0), V(2, 1)}, {V(0, 0), V(0, 0xFFFF)}, {V(1, 2), V(1, 1)}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_int_eq(call(bad[i].lo, bad[i].hi, &mine, room, sizeof(auxtrunk_api_t)),
                         AUXTRUNK_E_ABI_VERSION);
}
END_TEST

START_TEST(test_negotiate_table_sizes)
{
    future_api_t mine = future_plugin(1);
    _Alignas(16) unsigned char room[256];
    /* Host room: 1.0 size, between, the plugin's size, larger. */
    const uint32_t sizes[] = {AUXTRUNK_API_SIZE_1_0, AUXTRUNK_API_SIZE_1_0 + 8,
                              sizeof(future_api_t), sizeof(future_api_t) + 40};
    for (size_t i = 0; i < 4; i++) {
        memset(room, 0xEE, sizeof room);
        ck_assert_int_eq(call(V(1, 0), V(1, 1), &mine, room, sizes[i]), AUXTRUNK_OK);
        uint32_t valid = sizes[i] < sizeof mine ? sizes[i] : (uint32_t)sizeof mine;
        auxtrunk_api_t got;
        memcpy(&got, room, sizeof got);
        ck_assert_uint_eq(got.struct_size, valid);
        ck_assert(memcmp(room + 8, (unsigned char *)&mine + 8, valid - 8) == 0);
        for (uint32_t b = valid; b < sizes[i]; b++)
            ck_assert_uint_eq(room[b], 0);
        for (uint32_t b = sizes[i]; b < sizeof room; b++)
            ck_assert_uint_eq(room[b], 0xEE);
    }
}
END_TEST

START_TEST(test_negotiate_order)
{
    future_api_t mine = future_plugin(0);
    _Alignas(16) unsigned char room[128];
    auxtrunk_host_info_t h = {sizeof h, V(2, 0), V(1, 0), 1}; /* bad flags and bad range */
    memcpy(room, &(uint32_t){sizeof(auxtrunk_api_t)}, 4);
    ck_assert_int_eq(atp_negotiate(&h, (auxtrunk_api_t *)(void *)room, &mine.api),
                     AUXTRUNK_E_FLAGS);
    memcpy(room, &(uint32_t){8}, 4); /* and a small table: size first */
    ck_assert_int_eq(atp_negotiate(&h, (auxtrunk_api_t *)(void *)room, &mine.api),
                     AUXTRUNK_E_STRUCT_SIZE);
    ck_assert_int_eq(atp_negotiate(NULL, (auxtrunk_api_t *)(void *)room, &mine.api),
                     AUXTRUNK_E_NULL_POINTER);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Config                                                                    */

static int32_t read_config(auxtrunk_config_t c, uint32_t supported)
{
    atp_dims_t d;
    uint32_t flags;
    int32_t device;
    return atp_config_read(&c, supported, &d, &flags, &device);
}

START_TEST(test_config_boundaries)
{
    auxtrunk_config_t c = {sizeof c, 0, 1, 1, 1, 1, 1, -1};
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_OK);
    c.enc = c.h1 = c.h2 = c.aux = AUXTRUNK_MAX_WIDTH;
    c.max_batch = AUXTRUNK_MAX_ELEMENTS / AUXTRUNK_MAX_WIDTH;
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_OK);
    c.max_batch++;
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_E_DIMENSION);
    c.enc = AUXTRUNK_MAX_WIDTH + 1;
    c.max_batch = 1;
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_E_DIMENSION);

    /* max_batch * widest <= INT32_MAX exactly: 2^20 * 2047 fits, * 2048 does not. */
    c = (auxtrunk_config_t){sizeof c, 0, 3, 2047, 5, 7, AUXTRUNK_MAX_BATCH, -1};
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_OK);
    c.aux = 2048;
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_E_DIMENSION);
    c.aux = 7;
    c.max_batch = AUXTRUNK_MAX_BATCH + 1;
    c.h1 = 1;
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_E_DIMENSION);

    /* The outputs on success. */
    c = (auxtrunk_config_t){sizeof c, AUXTRUNK_CONFIG_FAST, 3, 5, 7, 2, 9, 4};
    atp_dims_t d;
    uint32_t flags = 0;
    int32_t device = 0;
    ck_assert_int_eq(atp_config_read(&c, AUXTRUNK_CONFIG_FAST, &d, &flags, &device), AUXTRUNK_OK);
    ck_assert(d.enc == 3 && d.h1 == 5 && d.h2 == 7 && d.aux == 2 && d.max_batch == 9);
    ck_assert_uint_eq(flags, AUXTRUNK_CONFIG_FAST);
    ck_assert_int_eq(device, 4);
    ck_assert_int_eq(atp_config_read(NULL, 0, &d, &flags, &device), AUXTRUNK_E_NULL_POINTER);
    ck_assert_int_eq(atp_config_read(&c, 0, NULL, &flags, &device), AUXTRUNK_E_NULL_POINTER);
}
END_TEST

START_TEST(test_config_flags)
{
    auxtrunk_config_t c = {sizeof c, AUXTRUNK_CONFIG_FAST, 3, 5, 7, 2, 9, -1};
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_E_FLAGS);
    ck_assert_int_eq(read_config(c, AUXTRUNK_CONFIG_FAST), AUXTRUNK_OK);
    /* An unknown bit is refused even by a plugin that "supports" every bit. */
    c.flags = UINT32_C(1) << 9;
    ck_assert_int_eq(read_config(c, UINT32_MAX), AUXTRUNK_E_FLAGS);
    /* Flags are checked before dimensions. */
    c.enc = 0;
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_E_FLAGS);
    /* Size before everything. */
    c.struct_size = 4;
    ck_assert_int_eq(read_config(c, 0), AUXTRUNK_E_STRUCT_SIZE);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Argument checks                                                           */

/* A handle header with a tiny topology; params at fake, disjoint addresses. */
typedef struct fixture {
    atp_handle_base_t base;
    auxtrunk_params_t p;
    auxtrunk_grads_t g;
} fixture_t;

#define FAKE(addr) ((float *)(uintptr_t)(addr))

static fixture_t fixture(void)
{
    fixture_t f;
    atp_dims_t d = {4, 8, 8, 2, 100}; /* w1 128 B, w2 256 B, w3 64 B */
    atp_handle_base_init(&f.base, &d, 0, -1);
    f.p = (auxtrunk_params_t){
        sizeof f.p,   0, FAKE(0x10000), FAKE(0x11000), FAKE(0x12000), FAKE(0x13000), FAKE(0x14000),
        FAKE(0x15000)};
    f.g = (auxtrunk_grads_t){
        sizeof f.g,   0, FAKE(0x20000), FAKE(0x21000), FAKE(0x22000), FAKE(0x23000), FAKE(0x24000),
        FAKE(0x25000)};
    return f;
}

START_TEST(test_alias_boundaries)
{
    fixture_t f = fixture();
    float *x = FAKE(0x30000); /* B=10: 160 bytes */
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 10, FAKE(0x40000), 0, NULL), AUXTRUNK_OK);
    /* out (80 bytes) touching x's end, and touching w1's start: fine. */
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 10, FAKE(0x30000 + 160), 0, NULL),
                     AUXTRUNK_OK);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 10, FAKE(0x10000 - 80), 0, NULL),
                     AUXTRUNK_OK);
    /* One byte of overlap either side. */
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 10, FAKE(0x30000 + 159), 0, NULL),
                     AUXTRUNK_E_ALIAS);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 10, FAKE(0x10000 - 79), 0, NULL),
                     AUXTRUNK_E_ALIAS);
    ck_assert_ptr_nonnull(strstr(f.base.last_error, "params->w1"));
    /* Inputs may overlap each other: x on top of w2. */
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, FAKE(0x12000), 10, FAKE(0x40000), 0, NULL),
                     AUXTRUNK_OK);
    /* At the top of the address space, where x + bytes wraps to 0, an overlap
     * is still seen (a naive a < b + nb && b < a + na would miss it). */
    float *top = FAKE(UINTPTR_MAX - 63); /* 64 bytes to the end: x for B=4 */
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, top, 4, FAKE(UINTPTR_MAX - 31), 0, NULL),
                     AUXTRUNK_E_ALIAS);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, top, 2, FAKE(UINTPTR_MAX - 31), 0, NULL),
                     AUXTRUNK_OK);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 4, top, 0, NULL), AUXTRUNK_OK);
    /* The batch sets the spans: out 16 bytes after x touches x for B=1 and
     * overlaps it for B=2. */
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 1, FAKE(0x30000 + 16), 0, NULL),
                     AUXTRUNK_OK);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 2, FAKE(0x30000 + 16), 0, NULL),
                     AUXTRUNK_E_ALIAS);

    /* Backward: gradients against each other, x, dout and parameters. */
    f.base.recorded_batch = 10;
    float *dout = FAKE(0x50000);
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 10, &f.g, 0, NULL), AUXTRUNK_OK);
    auxtrunk_grads_t g = f.g;
    g.db3 = FAKE(0x24000 + 60); /* last float of dw3 (64 bytes) */
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 10, &g, 0, NULL), AUXTRUNK_E_ALIAS);
    g.db3 = FAKE(0x24000 + 64);
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 10, &g, 0, NULL), AUXTRUNK_OK);
    g = f.g;
    g.dw1 = FAKE(0x50000 + 76); /* dout is 80 bytes */
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 10, &g, 0, NULL), AUXTRUNK_E_ALIAS);
    ck_assert_ptr_nonnull(strstr(f.base.last_error, "dout"));
}
END_TEST

/* A memory-space hook that refuses one address range. */
static int32_t refuse_range(void *ctx, const void *ptr, size_t bytes, char *why, size_t why_len)
{
    uintptr_t bad = *(const uintptr_t *)ctx, p = (uintptr_t)ptr;
    (void)bytes;
    if (p >= bad && p < bad + 0x1000) {
        strncpy(why, "host pointer, device memory required", why_len - 1);
        why[why_len - 1] = '\0';
        return AUXTRUNK_E_MEMORY_SPACE;
    }
    return AUXTRUNK_OK;
}

START_TEST(test_memory_space_hook)
{
    fixture_t f = fixture();
    uintptr_t bad = 0x30000;
    atp_space_t space = {refuse_range, &bad};
    float *x = FAKE(0x30000), *out = FAKE(0x40000);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 10, out, 0, &space),
                     AUXTRUNK_E_MEMORY_SPACE);
    ck_assert_ptr_nonnull(strstr(f.base.last_error, "x ("));
    ck_assert_ptr_nonnull(strstr(f.base.last_error, "device memory required"));
    /* Memory space is checked before aliasing (out on x: still E_MEMORY_SPACE). */
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 10, x, 0, &space),
                     AUXTRUNK_E_MEMORY_SPACE);
    bad = 0x40000;
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, FAKE(0x60000), 10, out, 0, &space),
                     AUXTRUNK_E_MEMORY_SPACE);
    ck_assert_ptr_nonnull(strstr(f.base.last_error, "out"));
    bad = 0x22000; /* grads->dw2 */
    f.base.recorded_batch = 10;
    ck_assert_int_eq(
        atp_check_backward(&f.base, &f.p, FAKE(0x60000), FAKE(0x70000), 10, &f.g, 0, &space),
        AUXTRUNK_E_MEMORY_SPACE);
    ck_assert_ptr_nonnull(strstr(f.base.last_error, "grads->dw2"));
    /* A NULL hook checks nothing. */
    atp_space_t none = {NULL, NULL};
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 10, out, 0, &none), AUXTRUNK_OK);
}
END_TEST

START_TEST(test_validation_order)
{
    fixture_t f = fixture();
    float *x = FAKE(0x30000), *out = FAKE(0x40000), *dout = FAKE(0x50000);
    auxtrunk_params_t p = f.p;
    /* NULL before struct size before flags before batch before alias. */
    p.struct_size = 1;
    ck_assert_int_eq(atp_check_forward(&f.base, &p, NULL, 0, x, 9, NULL), AUXTRUNK_E_NULL_POINTER);
    ck_assert_int_eq(atp_check_forward(&f.base, &p, x, 0, x, 9, NULL), AUXTRUNK_E_STRUCT_SIZE);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 0, x, 9, NULL), AUXTRUNK_E_FLAGS);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 0, x, 0, NULL), AUXTRUNK_E_BATCH);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 101, out, 0, NULL), AUXTRUNK_E_BATCH);
    ck_assert_int_eq(atp_check_forward(&f.base, &f.p, x, 100, out, 0, NULL), AUXTRUNK_OK);

    /* Backward: batch range before the record, the record before its batch. */
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 0, &f.g, 0, NULL),
                     AUXTRUNK_E_BATCH);
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 5, &f.g, 0, NULL),
                     AUXTRUNK_E_NO_FORWARD);
    f.base.recorded_batch = 7;
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 5, &f.g, 0, NULL),
                     AUXTRUNK_E_BATCH_MISMATCH);
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 5, &f.g, 4, NULL),
                     AUXTRUNK_E_FLAGS);
    ck_assert_int_eq(
        atp_check_backward(&f.base, &f.p, x, dout, 7, &f.g, AUXTRUNK_BACKWARD_ACCUMULATE, NULL),
        AUXTRUNK_OK);
    auxtrunk_grads_t g = f.g;
    g.reserved = 1;
    ck_assert_int_eq(atp_check_backward(&f.base, &f.p, x, dout, 7, &g, 9, NULL),
                     AUXTRUNK_E_STRUCT_SIZE);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Handle header, errors, status text, memory struct                        */

START_TEST(test_handle_and_errors)
{
    fixture_t f = fixture();
    ck_assert_uint_eq(f.base.magic, ATP_MAGIC_LIVE);
    ck_assert_int_eq(f.base.recorded_batch, 0);
    ck_assert_str_eq(f.base.last_error, "");
    ck_assert_int_eq(atp_check_handle(&f.base), AUXTRUNK_OK);
    ck_assert_int_eq(atp_check_handle(NULL), AUXTRUNK_E_NULL_POINTER);
    f.base.magic = ATP_MAGIC_DEAD;
    ck_assert_int_eq(atp_check_handle(&f.base), AUXTRUNK_E_BAD_HANDLE);

    ck_assert_int_eq(atp_fail(&f.base, AUXTRUNK_E_BATCH, "batch %d", 7), AUXTRUNK_E_BATCH);
    ck_assert_str_eq(f.base.last_error, "AUXTRUNK_E_BATCH: batch 7");
    /* Long details are cut, still terminated. */
    char longer[4 * ATP_ERROR_TEXT];
    memset(longer, 'z', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    atp_fail(&f.base, AUXTRUNK_E_ALIAS, "%s", longer);
    ck_assert_uint_eq(strlen(f.base.last_error), ATP_ERROR_TEXT - 1);
    atp_ok(&f.base);
    ck_assert_str_eq(f.base.last_error, "");
    ck_assert_int_eq(atp_fail(NULL, AUXTRUNK_E_DEVICE, "ignored"), AUXTRUNK_E_DEVICE);

    /* Every status in the map and a margin of unknown values either side. */
    for (int32_t s = -20; s <= 4; s++)
        ck_assert_str_eq(atp_status_string(s), auxtrunk_status_message(s));
    ck_assert_str_eq(atp_status_string(AUXTRUNK_E_BATCH), "batch is not in [1, max_batch]");
    ck_assert_str_eq(atp_status_string(-16), "unknown status");
    ck_assert_str_eq(atp_status_string(7), "unknown status");
}
END_TEST

START_TEST(test_memory_out)
{
    struct {
        auxtrunk_memory_t m;
        uint32_t tail[2];
        uint32_t beyond;
    } s;
    memset(&s, 0x77, sizeof s);
    s.m.struct_size = AUXTRUNK_MEMORY_SIZE_1_0 + 8;
    ck_assert_int_eq(atp_check_memory_out(&s.m), AUXTRUNK_OK);
    ck_assert_uint_eq(s.m.struct_size, AUXTRUNK_MEMORY_SIZE_1_0 + 8);
    ck_assert(s.m.reserved == 0 && s.m.host_bytes == 0 && s.m.device_bytes == 0);
    ck_assert(s.tail[0] == 0 && s.tail[1] == 0);
    ck_assert_uint_eq(s.beyond, 0x77777777u);
    s.m.struct_size = AUXTRUNK_MEMORY_SIZE_1_0 - 1;
    s.m.host_bytes = 5;
    ck_assert_int_eq(atp_check_memory_out(&s.m), AUXTRUNK_E_STRUCT_SIZE);
    ck_assert_uint_eq(s.m.host_bytes, 5);
    ck_assert_int_eq(atp_check_memory_out(NULL), AUXTRUNK_E_NULL_POINTER);
}
END_TEST

static Suite *plugin_common_suite(void)
{
    Suite *s = suite_create("plugin_common");
    TCase *tc = tcase_create("negotiation");
    tcase_add_test(tc, test_negotiate_picks_highest_common);
    tcase_add_test(tc, test_negotiate_table_sizes);
    tcase_add_test(tc, test_negotiate_order);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, test_config_boundaries);
    tcase_add_test(tc, test_config_flags);
    suite_add_tcase(s, tc);
    tc = tcase_create("checks");
    tcase_add_test(tc, test_alias_boundaries);
    tcase_add_test(tc, test_memory_space_hook);
    tcase_add_test(tc, test_validation_order);
    tcase_add_test(tc, test_handle_and_errors);
    tcase_add_test(tc, test_memory_out);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(plugin_common_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
