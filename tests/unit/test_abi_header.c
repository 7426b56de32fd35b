/*
 * test_abi_header.c — abi/auxtrunk.h and abi/auxtrunk_canon.h compile on
 * their own as C11 and (test_abi_header.cpp includes this file) as C++, with
 * -Wall -Wextra -pedantic -Werror; the build is most of the test. At run time
 * it checks what the compiler cannot: the status table's values and texts,
 * the version macros, the size constants and a few canonical values.
 * Plain code only (no designated initialisers, no compound literals), so the
 * same text is valid C and C++.
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond)                                                           \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                        \
        }                                                                      \
    } while (0)

typedef struct status_row {
    int32_t value;
    const char *name;
    const char *msg;
} status_row_t;

#define ROW_(name, value, msg) {AUXTRUNK_##name, #name, msg},
static const status_row_t rows[] = {AUXTRUNK_STATUS_MAP(ROW_)};
#undef ROW_

/* The entry and every table slot have the types a plugin would give them. */
static int32_t fake_entry(const auxtrunk_host_info_t *host, auxtrunk_api_t *api)
{
    (void)host;
    (void)api;
    return AUXTRUNK_E_ABI_VERSION;
}

int main(void)
{
    const size_t n = sizeof rows / sizeof rows[0];
    EXPECT(n == 16);
    EXPECT(rows[0].value == AUXTRUNK_OK && rows[0].value == 0);
    for (size_t i = 0; i < n; i++) {
        EXPECT(rows[i].msg[0] != '\0');
        EXPECT(i == 0 || rows[i].value < 0);
        for (size_t j = i + 1; j < n; j++) {
            EXPECT(rows[i].value != rows[j].value);
            EXPECT(strcmp(rows[i].msg, rows[j].msg) != 0);
        }
        /* The helpers hosts use instead of expanding the map. */
        EXPECT(strncmp(auxtrunk_status_name(rows[i].value), "AUXTRUNK_", 9) == 0);
        EXPECT(strcmp(auxtrunk_status_name(rows[i].value) + 9, rows[i].name) == 0);
        EXPECT(strcmp(auxtrunk_status_message(rows[i].value), rows[i].msg) == 0);
    }
    const int32_t unknown[] = {1, -16, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        EXPECT(strcmp(auxtrunk_status_name(unknown[i]), "AUXTRUNK_(unknown)") == 0);
        EXPECT(strcmp(auxtrunk_status_message(unknown[i]), "unknown status") == 0);
    }

    EXPECT(AUXTRUNK_ABI_VERSION == AUXTRUNK_VERSION(1, 0));
    EXPECT(AUXTRUNK_VERSION_MAJOR_OF(AUXTRUNK_VERSION(3, 7)) == 3);
    EXPECT(AUXTRUNK_VERSION_MINOR_OF(AUXTRUNK_VERSION(3, 7)) == 7);
    EXPECT(AUXTRUNK_VERSION(1, 2) > AUXTRUNK_VERSION(1, 1));
    EXPECT(AUXTRUNK_VERSION(2, 0) > AUXTRUNK_VERSION(1, 0xFFFF));

    EXPECT(sizeof(auxtrunk_host_info_t) == AUXTRUNK_HOST_INFO_SIZE_1_0);
    EXPECT(sizeof(auxtrunk_config_t) == AUXTRUNK_CONFIG_SIZE_1_0);
    EXPECT(sizeof(auxtrunk_params_t) == AUXTRUNK_PARAMS_SIZE_1_0);
    EXPECT(sizeof(auxtrunk_grads_t) == AUXTRUNK_GRADS_SIZE_1_0);
    EXPECT(sizeof(auxtrunk_memory_t) == AUXTRUNK_MEMORY_SIZE_1_0);
    EXPECT(sizeof(auxtrunk_api_t) == AUXTRUNK_API_SIZE_1_0);
    EXPECT((AUXTRUNK_CONFIG_KNOWN_FLAGS & AUXTRUNK_CONFIG_FAST) != 0);
    EXPECT(AUXTRUNK_FORWARD_KNOWN_FLAGS == 0);

    auxtrunk_config_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.enc = 256;
    c.h1 = 256;
    c.h2 = 256;
    c.aux = 128;
    EXPECT(AUXTRUNK_PARAM_COUNT(&c) == 256u * 256 + 256 + 256u * 256 + 256 + 256u * 128 + 128);
    /* The flat layout: W1 b1 W2 b2 W3 b3, back to back. */
    EXPECT(AUXTRUNK_W1_OFFSET(&c) == 0);
    EXPECT(AUXTRUNK_B1_OFFSET(&c) == 256u * 256);
    EXPECT(AUXTRUNK_W2_OFFSET(&c) == 256u * 256 + 256);
    EXPECT(AUXTRUNK_B2_OFFSET(&c) == 2 * 256u * 256 + 256);
    EXPECT(AUXTRUNK_W3_OFFSET(&c) == 2 * 256u * 256 + 2 * 256);
    EXPECT(AUXTRUNK_B3_OFFSET(&c) == 2 * 256u * 256 + 2 * 256 + 256u * 128);
    EXPECT(AUXTRUNK_PARAM_COUNT(&c) == AUXTRUNK_B3_OFFSET(&c) + 128);

    auxtrunk_entry_fn entry = fake_entry;
    auxtrunk_api_t api;
    memset(&api, 0, sizeof api);
    EXPECT(entry(NULL, &api) == AUXTRUNK_E_ABI_VERSION);
    EXPECT(strcmp(AUXTRUNK_ENTRY_SYMBOL, "auxtrunk_plugin_entry") == 0);

    EXPECT(auxtrunk_canon_chunks(1) == 1);
    EXPECT(auxtrunk_canon_chunks(AUXTRUNK_CANON_CHUNK) == 1);
    EXPECT(auxtrunk_canon_chunks(AUXTRUNK_CANON_CHUNK + 1) == 2);
    EXPECT(auxtrunk_canon_elu(2.5f) == 2.5f);
    EXPECT(auxtrunk_canon_elu(0.0f) == 0.0f);
    EXPECT(auxtrunk_canon_elu(-30.0f) == -1.0f);
    float e = auxtrunk_canon_elu(-1.0f); /* expm1(-1) = -0.63212055882... */
    EXPECT(e > -0.6321207f && e < -0.6321204f);
    EXPECT(auxtrunk_canon_elu_grad(3.0f, 0.5f) == 3.0f);
    EXPECT(auxtrunk_canon_elu_grad(3.0f, -0.5f) == 1.5f);

    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("ABI headers: %zu statuses, version %u.%u, sizes and canon values as documented\n",
               n, (unsigned)AUXTRUNK_ABI_MAJOR, (unsigned)AUXTRUNK_ABI_MINOR);
    return failures ? 1 : 0;
}
