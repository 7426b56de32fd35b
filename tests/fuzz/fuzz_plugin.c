/*
 * fuzz_plugin.c — libFuzzer harness for the ABI entries of the CPU plugins
 * (build/plugins/cpu and cpu-blocked, dlopened as a host would): the entry
 * symbol, init, forward, infer, backward, memory_usage, last_error, destroy
 * and status_string, driven with random structs, struct sizes, dimensions,
 * batch sizes, flags, and NULL or non-NULL pointers into buffers of exactly
 * the size the handle's topology gives them (so that a write or read past
 * one is an AddressSanitizer report).
 *
 * Input: one byte picks the plugin; then a negotiation with a random host
 * info and table size; then up to MAX_OPS operations on at most two
 * handles, each an opcode byte and its arguments, read as they are needed
 * (fz_u8 gives 0 past the end). Sizes and values are drawn from lists of
 * boundary cases and small values (pick()), so most inputs mean something.
 *
 * The harness keeps its own model of what the ABI (abi/auxtrunk.h) allows:
 * which config is valid, which handle has a recorded forward of which batch.
 * Invariants, besides no sanitizer report, crash or hang:
 *   - every status is one its entry documents, and it is AUXTRUNK_OK exactly
 *     when the model says the call is valid (init may also run out of
 *     memory);
 *   - a refused call writes nothing: the table, the handle pointer, out and
 *     the gradients keep their poison, and a failed forward keeps the record;
 *   - an accepted call writes every element of its outputs and changes no
 *     input; a negotiated table is min(host, plugin) bytes, zeros after the
 *     entries;
 *   - status_string and last_error give NUL-terminated strings, never NULL.
 * Topologies whose buffers or arithmetic would exceed MAX_PARAMS /
 * MAX_WORK are not initialised (they are valid, merely slow to fuzz).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auxtrunk.h"
#include "fuzz_common.h"

#define MAX_OPS 24
#define MAX_PARAMS (1u << 15) /* parameters of a topology the harness initialises */
#define MAX_WORK (1u << 21)   /* max_batch * parameters, likewise */
#define MAX_STRUCT 160        /* largest struct_size tried */

static const char *const k_plugin_files[] = {AUXTRUNK_FUZZ_PLUGINS};
#define N_PLUGINS (sizeof k_plugin_files / sizeof k_plugin_files[0])

typedef struct plugin {
    auxtrunk_entry_fn entry;
    auxtrunk_api_t api; /* negotiated once, correctly, for the operations */
} plugin_t;

static plugin_t g_plugins[N_PLUGINS];

/* ------------------------------------------------------------------------- */
/* Drawing values                                                            */

static int32_t pick_i32(fz_bytes_t *in, const int32_t *list, size_t n)
{
    uint8_t k = fz_u8(in);
    if (k < n)
        return list[k];
    if (k < 250)
        return list[k % n];
    return (int32_t)fz_u32(in); /* now and then anything at all */
}

static const int32_t k_widths[] = {1,
                                   2,
                                   3,
                                   4,
                                   5,
                                   7,
                                   8,
                                   16,
                                   17,
                                   31,
                                   32,
                                   33,
                                   64,
                                   0,
                                   -1,
                                   AUXTRUNK_MAX_WIDTH,
                                   AUXTRUNK_MAX_WIDTH + 1,
                                   INT32_MIN,
                                   INT32_MAX};
static const int32_t k_batches[] = {1,
                                    2,
                                    3,
                                    4,
                                    7,
                                    8,
                                    9,
                                    16,
                                    33,
                                    64,
                                    65,
                                    0,
                                    -1,
                                    AUXTRUNK_MAX_BATCH,
                                    AUXTRUNK_MAX_BATCH + 1,
                                    INT32_MIN,
                                    INT32_MAX,
                                    1 << 16,
                                    131072};
static const int32_t k_sizes[] = {AUXTRUNK_CONFIG_SIZE_1_0,
                                  AUXTRUNK_PARAMS_SIZE_1_0,
                                  0,
                                  4,
                                  8,
                                  16,
                                  24,
                                  31,
                                  33,
                                  40,
                                  48,
                                  55,
                                  57,
                                  64,
                                  96,
                                  97,
                                  104,
                                  128,
                                  160};

/* A struct_size: the right one most often. */
static uint32_t pick_size(fz_bytes_t *in, uint32_t right)
{
    uint8_t k = fz_u8(in);
    if (k < 128)
        return right;
    uint32_t s = (uint32_t)k_sizes[k % (sizeof k_sizes / sizeof k_sizes[0])];
    return s > MAX_STRUCT ? MAX_STRUCT : s;
}

/* A struct of `size` bytes (at least 4, for struct_size itself) in its own
 * allocation, filled from the known fields and then, past them, zeros or
 * (now and then) input bytes. */
static void *make_struct(fz_bytes_t *in, const void *known, uint32_t known_size, uint32_t size)
{
    uint32_t alloc = size < 4 ? 4 : size;
    unsigned char *s = malloc(alloc);
    memset(s, 0, alloc);
    memcpy(s, known, known_size < alloc ? known_size : alloc);
    memcpy(s, &size, 4);
    int dirty = size > known_size && fz_u8(in) >= 240;
    for (uint32_t i = known_size; dirty && i < size; i++)
        s[i] = fz_u8(in);
    return s;
}

/* Is every byte of [p + from, p + to) zero? */
static int zero_tail(const void *p, uint32_t from, uint32_t to)
{
    const unsigned char *b = p;
    for (uint32_t i = from; i < to; i++)
        if (b[i])
            return 0;
    return 1;
}

/* ------------------------------------------------------------------------- */
/* Statuses                                                                  */

static int in_set(int32_t st, const int32_t *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == st)
            return 1;
    return 0;
}

#define SET(...) \
    ((const int32_t[]){__VA_ARGS__}), sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)
#define ENTRY_ST                                                                        \
    SET(AUXTRUNK_OK, AUXTRUNK_E_NULL_POINTER, AUXTRUNK_E_STRUCT_SIZE, AUXTRUNK_E_FLAGS, \
        AUXTRUNK_E_ABI_VERSION)
#define INIT_ST                                                                         \
    SET(AUXTRUNK_OK, AUXTRUNK_E_NULL_POINTER, AUXTRUNK_E_STRUCT_SIZE, AUXTRUNK_E_FLAGS, \
        AUXTRUNK_E_DIMENSION, AUXTRUNK_E_UNSUPPORTED, AUXTRUNK_E_OUT_OF_MEMORY, AUXTRUNK_E_DEVICE)
#define DESTROY_ST SET(AUXTRUNK_OK, AUXTRUNK_E_BAD_HANDLE, AUXTRUNK_E_DEVICE)
#define FORWARD_ST                                                                           \
    SET(AUXTRUNK_OK, AUXTRUNK_E_NULL_POINTER, AUXTRUNK_E_BAD_HANDLE, AUXTRUNK_E_STRUCT_SIZE, \
        AUXTRUNK_E_BATCH, AUXTRUNK_E_FLAGS, AUXTRUNK_E_ALIAS, AUXTRUNK_E_MEMORY_SPACE,       \
        AUXTRUNK_E_DEVICE)
#define BACKWARD_ST                                                                           \
    SET(AUXTRUNK_OK, AUXTRUNK_E_NULL_POINTER, AUXTRUNK_E_BAD_HANDLE, AUXTRUNK_E_STRUCT_SIZE,  \
        AUXTRUNK_E_BATCH, AUXTRUNK_E_FLAGS, AUXTRUNK_E_NO_FORWARD, AUXTRUNK_E_BATCH_MISMATCH, \
        AUXTRUNK_E_ALIAS, AUXTRUNK_E_MEMORY_SPACE, AUXTRUNK_E_DEVICE)
#define MEMORY_ST \
    SET(AUXTRUNK_OK, AUXTRUNK_E_NULL_POINTER, AUXTRUNK_E_BAD_HANDLE, AUXTRUNK_E_STRUCT_SIZE)

/* valid: 1 the model says the call is valid, 0 invalid (why: the model's
 * reason), -1 no opinion. */
static void check_status_why(const char *what, int32_t st, const int32_t *set, size_t n, int valid,
                             const char *why)
{
    fz_check(in_set(st, set, n), "%s returned %d (%s), not one of its documented statuses", what,
             (int)st, auxtrunk_status_name(st));
    if (valid < 0)
        return;
    if (valid)
        fz_check(st == AUXTRUNK_OK || (st == AUXTRUNK_E_OUT_OF_MEMORY && strcmp(what, "init") == 0),
                 "%s refused a valid call with %s", what, auxtrunk_status_name(st));
    else
        fz_check(st != AUXTRUNK_OK, "%s accepted an invalid call (%s)", what, why);
}

static void check_status(const char *what, int32_t st, const int32_t *set, size_t n, int valid)
{
    check_status_why(what, st, set, n, valid, "see the model");
}

static void check_string(const char *what, const char *s)
{
    fz_check(s != NULL, "%s returned NULL", what);
    (void)strlen(s); /* NUL-terminated, inside its object */
}

/* ------------------------------------------------------------------------- */
/* Buffers                                                                   */

/* A signalling-NaN pattern no arithmetic produces: an element still holding
 * it after an accepted call was not written. */
#define POISON 0x7FA5A5A5u

typedef struct buf {
    float *p;
    size_t n;
} buf_t;

static buf_t buf_new(size_t n, fz_bytes_t *in, int poison)
{
    buf_t b = {malloc((n ? n : 1) * sizeof(float)), n};
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = POISON;
        if (!poison) {
            /* Small values most of the time; the input decides some of them. */
            uint8_t k = in->n ? fz_u8(in) : (uint8_t)(i * 37u);
            float v = ((float)(k % 64) - 32.0f) / 16.0f;
            memcpy(&bits, &v, 4);
            if (k == 255)
                bits = 0x7FC00000u; /* a quiet NaN now and then */
        }
        memcpy(&b.p[i], &bits, 4);
    }
    return b;
}

static buf_t buf_copy(const buf_t *a)
{
    buf_t b = {malloc((a->n ? a->n : 1) * sizeof(float)), a->n};
    memcpy(b.p, a->p, a->n * sizeof(float));
    return b;
}

static int buf_same(const buf_t *a, const buf_t *b)
{
    return memcmp(a->p, b->p, a->n * sizeof(float)) == 0;
}

static int buf_poisoned(const buf_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        uint32_t bits;
        memcpy(&bits, &b->p[i], 4);
        if (bits != POISON)
            return 0;
    }
    return 1;
}

static int buf_written(const buf_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        uint32_t bits;
        memcpy(&bits, &b->p[i], 4);
        if (bits == POISON)
            return 0;
    }
    return 1;
}

static void buf_free(buf_t *b) { free(b->p); }

/* ------------------------------------------------------------------------- */
/* Handles and the model                                                     */

typedef struct slot {
    auxtrunk_handle_t *h; /* NULL: free */
    auxtrunk_config_t c;  /* as accepted */
    int32_t recorded;     /* batch of the last training forward, 0 = none */
} slot_t;

/* The six parameter (or gradient) buffers of a topology, W1 b1 W2 b2 W3 b3. */
static void six_sizes(const auxtrunk_config_t *c, size_t n[6])
{
    n[0] = AUXTRUNK_W1_COUNT(c);
    n[1] = (size_t)c->h1;
    n[2] = AUXTRUNK_W2_COUNT(c);
    n[3] = (size_t)c->h2;
    n[4] = AUXTRUNK_W3_COUNT(c);
    n[5] = (size_t)c->aux;
}

/* What init must do with c, by the header's rules. */
static int config_valid(const auxtrunk_config_t *c, uint32_t size, int dirty_tail)
{
    if (size < AUXTRUNK_CONFIG_SIZE_1_0 || dirty_tail)
        return 0;
    if (c->flags != 0) /* the CPU plugins support no config flag (no FAST_MODE) */
        return 0;
    const int32_t w[4] = {c->enc, c->h1, c->h2, c->aux};
    int32_t widest = 0;
    for (int i = 0; i < 4; i++) {
        if (w[i] < 1 || w[i] > AUXTRUNK_MAX_WIDTH)
            return 0;
        widest = w[i] > widest ? w[i] : widest;
    }
    if (c->max_batch < 1 || c->max_batch > AUXTRUNK_MAX_BATCH)
        return 0;
    if ((int64_t)c->max_batch * widest > AUXTRUNK_MAX_ELEMENTS)
        return 0;
    return c->device == -1;
}

static int too_big(const auxtrunk_config_t *c)
{
    size_t p = AUXTRUNK_PARAM_COUNT(c);
    return p > MAX_PARAMS || (size_t)c->max_batch * p > MAX_WORK;
}

/* ------------------------------------------------------------------------- */
/* Negotiation                                                               */

static const uint32_t k_versions[] = {AUXTRUNK_VERSION(1, 0),
                                      AUXTRUNK_VERSION(1, 1),
                                      AUXTRUNK_VERSION(1, 0xFFFF),
                                      AUXTRUNK_VERSION(0, 9),
                                      AUXTRUNK_VERSION(2, 0),
                                      0,
                                      0xFFFFFFFFu};

static uint32_t pick_version(fz_bytes_t *in)
{
    uint8_t k = fz_u8(in);
    return k < 250 ? k_versions[k % (sizeof k_versions / sizeof k_versions[0])] : fz_u32(in);
}

static void fuzz_entry(const plugin_t *pl, fz_bytes_t *in)
{
    auxtrunk_host_info_t known = {
        .struct_size = 0,
        .abi_min = pick_version(in),
        .abi_max = pick_version(in),
        .flags = fz_u8(in) >= 240 ? fz_u32(in) : 0,
    };
    uint32_t hsize = pick_size(in, AUXTRUNK_HOST_INFO_SIZE_1_0);
    unsigned char *host = make_struct(in, &known, sizeof known, hsize);
    uint32_t asize = pick_size(in, AUXTRUNK_API_SIZE_1_0);
    uint32_t aalloc = asize < 4 ? 4 : asize;
    unsigned char *api = malloc(aalloc), *before = malloc(aalloc);
    memset(api, 0xA5, aalloc);
    memcpy(api, &asize, 4);
    memcpy(before, api, aalloc);
    uint8_t nulls = fz_u8(in);
    const int null_host = nulls == 1, null_api = nulls == 2;

    const uint32_t one0 = AUXTRUNK_VERSION(1, 0); /* the CPU plugins speak 1.0 only */
    int valid = !null_host && !null_api && hsize >= AUXTRUNK_HOST_INFO_SIZE_1_0 &&
                zero_tail(host, sizeof known, hsize) && known.flags == 0 &&
                known.abi_min <= known.abi_max && known.abi_min <= one0 && one0 <= known.abi_max &&
                asize >= AUXTRUNK_API_SIZE_1_0;
    int32_t st = pl->entry(null_host ? NULL : (const auxtrunk_host_info_t *)host,
                           null_api ? NULL : (auxtrunk_api_t *)api);
    check_status("auxtrunk_plugin_entry", st, ENTRY_ST, valid);
    if (st != AUXTRUNK_OK) {
        fz_check(memcmp(api, before, aalloc) == 0,
                 "auxtrunk_plugin_entry refused (%s) but wrote "
                 "the table",
                 auxtrunk_status_name(st));
    } else {
        auxtrunk_api_t got;
        memcpy(&got, api, sizeof got);
        fz_check(got.struct_size == AUXTRUNK_API_SIZE_1_0,
                 "negotiated table struct_size %u, "
                 "expected min(%u, %u)",
                 (unsigned)got.struct_size, (unsigned)asize, AUXTRUNK_API_SIZE_1_0);
        fz_check(got.abi_version == one0, "negotiated version 0x%x", (unsigned)got.abi_version);
        fz_check(zero_tail(api, AUXTRUNK_API_SIZE_1_0, asize),
                 "the table's bytes past the plugin's entries are not zero");
    }
    free(host);
    free(api);
    free(before);
}

/* ------------------------------------------------------------------------- */
/* Operations                                                                */

static void op_init(const auxtrunk_api_t *a, slot_t *s, fz_bytes_t *in)
{
    auxtrunk_config_t known = {
        .struct_size = 0,
        .flags = fz_u8(in) >= 240 ? fz_u32(in) : 0,
        .enc = pick_i32(in, k_widths, sizeof k_widths / sizeof k_widths[0]),
        .h1 = pick_i32(in, k_widths, sizeof k_widths / sizeof k_widths[0]),
        .h2 = pick_i32(in, k_widths, sizeof k_widths / sizeof k_widths[0]),
        .aux = pick_i32(in, k_widths, sizeof k_widths / sizeof k_widths[0]),
        .max_batch = pick_i32(in, k_batches, sizeof k_batches / sizeof k_batches[0]),
        .device = fz_u8(in) >= 240 ? (int32_t)fz_u32(in) : -1,
    };
    uint32_t size = pick_size(in, AUXTRUNK_CONFIG_SIZE_1_0);
    unsigned char *cfg = make_struct(in, &known, sizeof known, size);
    int dirty = !zero_tail(cfg, sizeof known, size);
    int valid = config_valid(&known, size, dirty);
    if (valid && too_big(&known)) {
        free(cfg);
        return;
    }
    uint8_t nulls = fz_u8(in);
    auxtrunk_handle_t *sentinel = (auxtrunk_handle_t *)&known, *h = sentinel;
    int32_t st =
        a->init(nulls == 1 ? NULL : (const auxtrunk_config_t *)cfg, nulls == 2 ? NULL : &h);
    if (nulls == 1 || nulls == 2)
        valid = 0;
    check_status("init", st, INIT_ST, valid);
    if (st != AUXTRUNK_OK) {
        fz_check(h == sentinel, "init refused (%s) but wrote the handle pointer",
                 auxtrunk_status_name(st));
    } else {
        fz_check(h != NULL && h != sentinel, "init returned OK without a handle");
        fz_check(s->h == NULL, "harness: init into a used slot");
        s->h = h;
        s->c = known;
        s->recorded = 0;
    }
    free(cfg);
}

/* A handle argument: a live one, NULL, or a block that is no handle. */
typedef struct target {
    auxtrunk_handle_t *h;
    slot_t *slot;        /* the live one, or NULL */
    auxtrunk_config_t c; /* its topology (a small stand-in otherwise) */
} target_t;

static void *g_not_a_handle; /* zeroed: no plugin's live magic */

static target_t pick_target(slot_t *slots, fz_bytes_t *in)
{
    uint8_t k = fz_u8(in);
    target_t t = {NULL, NULL, {.enc = 2, .h1 = 3, .h2 = 2, .aux = 1, .max_batch = 4}};
    if (k % 8 == 6)
        return t;
    if (k % 8 == 7) {
        t.h = g_not_a_handle;
        return t;
    }
    slot_t *s = &slots[k % 2];
    if (!s->h)
        s = &slots[(k + 1) % 2];
    if (s->h) {
        t.h = s->h;
        t.slot = s;
        t.c = s->c;
    }
    return t;
}

static int32_t pick_batch(fz_bytes_t *in, const target_t *t)
{
    uint8_t k = fz_u8(in);
    if (k < 96 && t->slot && t->slot->recorded)
        return t->slot->recorded;
    if (k < 192)
        return 1 + (int32_t)(k % (uint8_t)(t->c.max_batch < 64 ? t->c.max_batch : 64));
    return pick_i32(in, k_batches, sizeof k_batches / sizeof k_batches[0]);
}

/* The parameter-like struct (params or grads: same layout) over six buffers;
 * NULL pointers as the input says. Returns the struct, its size in *size,
 * and whether it is well formed (size, reserved, tail, no NULL) in *ok. */
static void *six_struct(fz_bytes_t *in, buf_t six[6], uint32_t *size_out, int *ok)
{
    auxtrunk_params_t known;
    memset(&known, 0, sizeof known);
    known.reserved = fz_u8(in) >= 245 ? fz_u32(in) : 0;
    const float *ptr[6];
    int any_null = 0;
    uint8_t nulls = fz_u8(in);
    for (int i = 0; i < 6; i++) {
        int null = nulls >= 224 && (nulls & 7) == i;
        ptr[i] = null ? NULL : six[i].p;
        any_null |= null;
    }
    known.w1 = ptr[0];
    known.b1 = ptr[1];
    known.w2 = ptr[2];
    known.b2 = ptr[3];
    known.w3 = ptr[4];
    known.b3 = ptr[5];
    uint32_t size = pick_size(in, AUXTRUNK_PARAMS_SIZE_1_0);
    void *s = make_struct(in, &known, sizeof known, size);
    *ok = size >= AUXTRUNK_PARAMS_SIZE_1_0 && known.reserved == 0 && !any_null &&
          zero_tail(s, sizeof known, size);
    *size_out = size;
    return s;
}

static void op_forward(const auxtrunk_api_t *a, slot_t *slots, fz_bytes_t *in, int record)
{
    const char *what = record ? "forward" : "infer";
    target_t t = pick_target(slots, in);
    int32_t batch = pick_batch(in, &t);
    size_t rows = batch < 1 ? 1 : (size_t)(batch > t.c.max_batch ? t.c.max_batch : batch);
    size_t n6[6];
    six_sizes(&t.c, n6);
    buf_t w[6], w0[6];
    for (int i = 0; i < 6; i++) {
        w[i] = buf_new(n6[i], in, 0);
        w0[i] = buf_copy(&w[i]);
    }
    buf_t x = buf_new(rows * (size_t)t.c.enc, in, 0), x0 = buf_copy(&x);
    buf_t out = buf_new(rows * (size_t)t.c.aux, in, 1);
    int params_ok;
    uint32_t psize;
    void *params = six_struct(in, w, &psize, &params_ok);
    uint32_t flags = fz_u8(in) >= 240 ? fz_u32(in) : 0;
    uint8_t shape = fz_u8(in);
    const int null_params = shape == 1, null_x = shape == 2, null_out = shape == 3;
    const int alias_x = shape == 4, alias_w = (shape & 15) == 5;
    float *outp = null_out ? NULL : alias_x ? x.p : alias_w ? w[(shape >> 4) % 6].p : out.p;

    const char *why = !t.slot       ? "no live handle"
                      : null_params ? "params NULL"
                      : !params_ok  ? "params struct (size, reserved, tail or a NULL pointer)"
                      : null_x      ? "x NULL"
                      : null_out    ? "out NULL"
                      : alias_x     ? "out is x"
                      : alias_w     ? "out is a parameter"
                      : flags       ? "flags"
                      : batch < 1 || batch > t.c.max_batch ? "batch"
                                                           : NULL;
    int valid = why == NULL;
    int32_t before = t.slot ? t.slot->recorded : 0;
    int32_t st = (record ? a->forward : a->infer)(t.h, null_params ? NULL : params,
                                                  null_x ? NULL : x.p, batch, outp, flags, NULL);
    check_status_why(what, st, FORWARD_ST, valid, why);
    if (!alias_x && !alias_w) {
        fz_check(buf_same(&x, &x0), "%s changed x", what);
        for (int i = 0; i < 6; i++)
            fz_check(buf_same(&w[i], &w0[i]), "%s changed parameter %d", what, i);
    }
    if (st == AUXTRUNK_OK) {
        fz_check(buf_written(&out), "%s returned OK but left elements of out unwritten", what);
        if (record)
            t.slot->recorded = batch;
    } else {
        fz_check(buf_poisoned(&out), "%s refused (%s) but wrote out", what,
                 auxtrunk_status_name(st));
        if (t.slot)
            fz_check(t.slot->recorded == before, "harness: record changed");
    }
    if (t.slot) {
        const char *e = a->last_error(t.h);
        check_string("last_error", e);
        if (st != AUXTRUNK_OK)
            fz_check(e[0] != '\0', "%s refused (%s) with an empty last_error", what,
                     auxtrunk_status_name(st));
    }
    free(params);
    for (int i = 0; i < 6; i++) {
        buf_free(&w[i]);
        buf_free(&w0[i]);
    }
    buf_free(&x);
    buf_free(&x0);
    buf_free(&out);
}

static void op_backward(const auxtrunk_api_t *a, slot_t *slots, fz_bytes_t *in)
{
    target_t t = pick_target(slots, in);
    int32_t batch = pick_batch(in, &t);
    size_t rows = batch < 1 ? 1 : (size_t)(batch > t.c.max_batch ? t.c.max_batch : batch);
    size_t n6[6];
    six_sizes(&t.c, n6);
    buf_t w[6], w0[6], g[6];
    uint8_t mode = fz_u8(in);
    uint32_t flags = mode >= 240 ? fz_u32(in) : (mode & 1) ? AUXTRUNK_BACKWARD_ACCUMULATE : 0;
    for (int i = 0; i < 6; i++) {
        w[i] = buf_new(n6[i], in, 0);
        w0[i] = buf_copy(&w[i]);
        /* Accumulating adds to the poison (a NaN): still every element changes. */
        g[i] = buf_new(n6[i], in, 1);
    }
    buf_t x = buf_new(rows * (size_t)t.c.enc, in, 0), x0 = buf_copy(&x);
    buf_t dout = buf_new(rows * (size_t)t.c.aux, in, 0), dout0 = buf_copy(&dout);
    int params_ok, grads_ok;
    uint32_t psize, gsize;
    void *params = six_struct(in, w, &psize, &params_ok);
    void *grads = six_struct(in, g, &gsize, &grads_ok);
    uint8_t shape = fz_u8(in);
    const int null_params = shape == 1, null_x = shape == 2, null_dout = shape == 3,
              null_grads = shape == 4,
              alias = (shape & 15) == 5 && gsize >= AUXTRUNK_GRADS_SIZE_1_0;
    if (alias) /* two gradients overlap: one of dW1..db2 is db3's buffer */
        memcpy((unsigned char *)grads + 8 + 8 * ((shape >> 4) % 5), &g[5].p, sizeof(float *));

    const char *why = !t.slot       ? "no live handle"
                      : null_params ? "params NULL"
                      : !params_ok  ? "params struct (size, reserved, tail or a NULL pointer)"
                      : null_x      ? "x NULL"
                      : null_dout   ? "dout NULL"
                      : null_grads  ? "grads NULL"
                      : !grads_ok   ? "grads struct (size, reserved, tail or a NULL pointer)"
                      : alias       ? "two gradients overlap"
                      : (flags & ~AUXTRUNK_BACKWARD_KNOWN_FLAGS) ? "flags"
                      : batch < 1 || batch > t.c.max_batch       ? "batch"
                      : t.slot->recorded == 0                    ? "no recorded forward"
                      : t.slot->recorded != batch ? "batch differs from the recorded one"
                                                  : NULL;
    int valid = why == NULL;
    int32_t st =
        a->backward(t.h, null_params ? NULL : params, null_x ? NULL : x.p,
                    null_dout ? NULL : dout.p, batch, null_grads ? NULL : grads, flags, NULL);
    check_status_why("backward", st, BACKWARD_ST, valid, why);
    fz_check(buf_same(&x, &x0) && buf_same(&dout, &dout0), "backward changed x or dout");
    for (int i = 0; i < 6; i++)
        fz_check(buf_same(&w[i], &w0[i]), "backward changed parameter %d", i);
    for (int i = 0; i < 6; i++) {
        if (st == AUXTRUNK_OK)
            fz_check(buf_written(&g[i]), "backward returned OK but left gradient %d unwritten", i);
        else
            fz_check(buf_poisoned(&g[i]), "backward refused (%s) but wrote gradient %d",
                     auxtrunk_status_name(st), i);
    }
    free(params);
    free(grads);
    for (int i = 0; i < 6; i++) {
        buf_free(&w[i]);
        buf_free(&w0[i]);
        buf_free(&g[i]);
    }
    buf_free(&x);
    buf_free(&x0);
    buf_free(&dout);
    buf_free(&dout0);
}

static void op_memory(const auxtrunk_api_t *a, slot_t *slots, fz_bytes_t *in)
{
    target_t t = pick_target(slots, in);
    auxtrunk_memory_t known;
    memset(&known, 0xA5, sizeof known);
    uint32_t size = pick_size(in, AUXTRUNK_MEMORY_SIZE_1_0);
    unsigned char *m = make_struct(in, &known, sizeof known, size);
    int null = fz_u8(in) == 1;
    int valid = t.slot && !null && size >= AUXTRUNK_MEMORY_SIZE_1_0;
    int clean = zero_tail(m, sizeof known, size);
    int32_t st = a->memory_usage(t.h, null ? NULL : (auxtrunk_memory_t *)m);
    /* An output struct: what the plugin does with unknown trailing bytes of
     * it is not pinned down, so with a dirty tail only the status set counts. */
    check_status("memory_usage", st, MEMORY_ST, clean ? valid : -1);
    if (st == AUXTRUNK_OK) {
        auxtrunk_memory_t got;
        memcpy(&got, m, sizeof got);
        fz_check(got.reserved == 0 && got.device_bytes == 0 && got.host_bytes > 0,
                 "memory_usage: reserved %u, device %llu, host %llu bytes", (unsigned)got.reserved,
                 (unsigned long long)got.device_bytes, (unsigned long long)got.host_bytes);
    }
    free(m);
}

static void op_destroy(const auxtrunk_api_t *a, slot_t *slots, fz_bytes_t *in)
{
    target_t t = pick_target(slots, in);
    if (!t.slot && t.h) /* destroying a non-handle is the host's bug, not probed */
        return;
    int32_t st = a->destroy(t.h);
    check_status("destroy", st, DESTROY_ST, 1);
    if (t.slot)
        t.slot->h = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_not_a_handle = calloc(1, 4096);
    for (size_t i = 0; i < N_PLUGINS; i++) {
        void *lib = dlopen(k_plugin_files[i], RTLD_NOW | RTLD_LOCAL);
        fz_check(lib != NULL, "dlopen %s: %s", k_plugin_files[i], dlerror());
        void *sym = dlsym(lib, AUXTRUNK_ENTRY_SYMBOL);
        fz_check(sym != NULL, "%s has no entry symbol", k_plugin_files[i]);
        memcpy(&g_plugins[i].entry, &sym, sizeof sym);
        auxtrunk_host_info_t host = {sizeof host, AUXTRUNK_VERSION(1, 0), AUXTRUNK_ABI_VERSION, 0};
        g_plugins[i].api.struct_size = sizeof g_plugins[i].api;
        fz_check(g_plugins[i].entry(&host, &g_plugins[i].api) == AUXTRUNK_OK,
                 "%s refused a plain negotiation", k_plugin_files[i]);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_bytes_t in = {data, size};
    const plugin_t *pl = &g_plugins[fz_u8(&in) % N_PLUGINS];
    const auxtrunk_api_t *a = &pl->api;
    fuzz_entry(pl, &in);
    slot_t slots[2];
    memset(slots, 0, sizeof slots);
    for (int op = 0; op < MAX_OPS && in.n > 0; op++) {
        uint8_t code = fz_u8(&in);
        switch (code % 8) {
        case 0: {
            slot_t *s = !slots[0].h ? &slots[0] : !slots[1].h ? &slots[1] : NULL;
            if (s)
                op_init(a, s, &in);
            break;
        }
        case 1:
        case 2:
            op_forward(a, slots, &in, 1);
            break;
        case 3:
            op_forward(a, slots, &in, 0);
            break;
        case 4:
            op_backward(a, slots, &in);
            break;
        case 5:
            op_memory(a, slots, &in);
            break;
        case 6:
            op_destroy(a, slots, &in);
            break;
        case 7: {
            int32_t s = (int32_t)fz_u32(&in);
            check_string("status_string", a->status_string(s));
            check_string("last_error(NULL)", a->last_error(NULL));
            fz_check(a->last_error(NULL)[0] == '\0', "last_error(NULL) is not empty");
            break;
        }
        }
    }
    for (int i = 0; i < 2; i++)
        if (slots[i].h)
            check_status("destroy", a->destroy(slots[i].h), DESTROY_ST, 1);
    return 0;
}
