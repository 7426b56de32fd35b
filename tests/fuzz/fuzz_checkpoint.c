/*
 * fuzz_checkpoint.c — libFuzzer harness for the checkpoint reader
 * (host_stub/checkpoint.c, ath_ckpt_load) on files it did not write.
 *
 * Input: one mode byte, then
 *   mode even: the rest is the checkpoint file, as is;
 *   mode odd:  the rest is a list of edits of 6 bytes each (op, u32 offset,
 *              value) applied to a valid checkpoint of the expected run:
 *              op % 3 = 0 sets the byte at offset % length to value, 1 cuts
 *              the file to offset % (length + 1) bytes, 2 appends value.
 * The edit form reaches the checks behind the CRCs without the fuzzer having
 * to find a checksum, and keeps doing so whatever the header layout becomes.
 *
 * Invariants, besides no sanitizer report, crash or hang:
 *   - the header checks agree, on the file (ath_ckpt_peek) and in memory
 *     (ath_ckpt_check_header without a run): same verdict, same meta;
 *   - a refused file leaves the caller's meta and arrays untouched (the
 *     reader's "nothing is written unless every check passes");
 *   - an accepted file matches the run it was checked against, and saving
 *     what was loaded writes the same bytes back.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auxtrunk.h"
#include "checkpoint.h"
#include "fuzz_common.h"

#define ENC 3
#define H1 4
#define H2 5
#define AUX 2

static const auxtrunk_config_t k_topology = {.enc = ENC, .h1 = H1, .h2 = H2, .aux = AUX};
#define N_PARAMS AUXTRUNK_PARAM_COUNT(&k_topology)

static const ath_ckpt_meta_t k_expect = {
    .enc = ENC,
    .h1 = H1,
    .h2 = H2,
    .aux = AUX,
    .batch = 8,
    .seed = 7,
    .lr = 1e-3f,
    .beta1 = 0.9f,
    .beta2 = 0.999f,
    .eps = 1e-8f,
    .step = 12,
    .adam_t = 12,
    .data_state = UINT64_C(0x0123456789abcdef),
    .first_loss = 0.75,
};

static unsigned char *g_valid;
static size_t g_valid_len;

/* The valid file every odd-mode input edits. */
static void make_valid(void)
{
    float p[N_PARAMS], m[N_PARAMS], v[N_PARAMS];
    for (size_t i = 0; i < N_PARAMS; i++) {
        p[i] = (float)i * 0.25f - 3.0f;
        m[i] = (float)i * -1e-3f;
        v[i] = (float)i * 1e-6f;
    }
    ath_err_t err;
    const char *path = fz_path("valid.ckpt");
    fz_check(ath_ckpt_save(path, &k_expect, p, m, v, N_PARAMS, &err) == 0, "save: %s", err.msg);
    g_valid = fz_read(path, &g_valid_len);
}

/* The file for this input: malloc'd, its length in *n. */
static unsigned char *build(const uint8_t *data, size_t size, size_t *n)
{
    fz_bytes_t in = {data + 1, size - 1};
    if ((data[0] & 1) == 0) {
        unsigned char *f = malloc(in.n ? in.n : 1);
        memcpy(f, in.p, in.n);
        *n = in.n;
        return f;
    }
    size_t cap = g_valid_len + in.n, len = g_valid_len;
    unsigned char *f = malloc(cap ? cap : 1);
    memcpy(f, g_valid, len);
    while (in.n >= 6) {
        uint8_t op = fz_u8(&in);
        uint32_t off = fz_u32(&in);
        uint8_t val = fz_u8(&in);
        if (op % 3 == 0 && len > 0)
            f[off % len] = val;
        else if (op % 3 == 1)
            len = off % (len + 1);
        else if (op % 3 == 2)
            f[len++] = val;
    }
    *n = len;
    return f;
}

static int same_meta(const ath_ckpt_meta_t *a, const ath_ckpt_meta_t *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* Field by field (struct padding aside), floats by their bits. */
static int equal_meta(const ath_ckpt_meta_t *a, const ath_ckpt_meta_t *b)
{
    return a->enc == b->enc && a->h1 == b->h1 && a->h2 == b->h2 && a->aux == b->aux &&
           a->batch == b->batch && a->seed == b->seed && memcmp(&a->lr, &b->lr, 4) == 0 &&
           memcmp(&a->beta1, &b->beta1, 4) == 0 && memcmp(&a->beta2, &b->beta2, 4) == 0 &&
           memcmp(&a->eps, &b->eps, 4) == 0 && a->step == b->step && a->adam_t == b->adam_t &&
           a->data_state == b->data_state && memcmp(&a->first_loss, &b->first_loss, 8) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!g_valid)
        make_valid();
    size_t len;
    unsigned char *file = build(data, size, &len);
    const char *path = fz_path("input.ckpt");
    fz_write(path, file, len);

    /* The header on its own, from the file and from memory. */
    ath_ckpt_meta_t peeked, checked;
    ath_err_t err_peek, err_check;
    int rc_peek = ath_ckpt_peek(path, &peeked, &err_peek);
    int rc_check = ath_ckpt_check_header(path, file, len, NULL, 0, &checked, &err_check);
    fz_check(rc_peek == rc_check, "ath_ckpt_peek says %d (%s), ath_ckpt_check_header %d (%s)",
             rc_peek, rc_peek ? err_peek.msg : "ok", rc_check, rc_check ? err_check.msg : "ok");
    fz_check(rc_peek != 0 || equal_meta(&peeked, &checked),
             "ath_ckpt_peek and ath_ckpt_check_header read different headers");

    /* Poisoned outputs: a refusal must leave every byte as it was. */
    float p[N_PARAMS], m[N_PARAMS], v[N_PARAMS];
    ath_ckpt_meta_t got;
    memset(p, 0xA5, sizeof p);
    memset(m, 0xA5, sizeof m);
    memset(v, 0xA5, sizeof v);
    memset(&got, 0xA5, sizeof got);
    ath_err_t err;
    err.msg[0] = '\0';
    int rc = ath_ckpt_load(path, &k_expect, &got, p, m, v, N_PARAMS, &err);
    if (rc != 0) {
        fz_check(rc == -1, "ath_ckpt_load returned %d", rc);
        fz_check(err.msg[0] != '\0', "a refused checkpoint gave no message");
        ath_ckpt_meta_t poison;
        memset(&poison, 0xA5, sizeof poison);
        fz_check(same_meta(&got, &poison), "refused (%s), yet the meta was written", err.msg);
        const unsigned char *bytes[3] = {(const void *)p, (const void *)m, (const void *)v};
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < sizeof p; i++)
                fz_check(bytes[k][i] == 0xA5, "refused (%s), yet array %d byte %zu was written",
                         err.msg, k, i);
        free(file);
        return 0;
    }

    /* Accepted: it belongs to the expected run, and re-saves to the same bytes. */
    fz_check(got.enc == ENC && got.h1 == H1 && got.h2 == H2 && got.aux == AUX &&
                 got.batch == k_expect.batch && got.seed == k_expect.seed,
             "accepted a checkpoint of another run");
    fz_check(rc_peek == 0 && equal_meta(&peeked, &got),
             "ath_ckpt_load accepted a file whose header ath_ckpt_peek refuses or reads otherwise");
    const char *again = fz_path("resaved.ckpt");
    fz_check(ath_ckpt_save(again, &got, p, m, v, N_PARAMS, &err) == 0, "re-save: %s", err.msg);
    size_t len2;
    unsigned char *file2 = fz_read(again, &len2);
    fz_check(len2 == len, "re-saving a loaded checkpoint gave %zu bytes, the file had %zu", len2,
             len);
    for (size_t i = 0; i < len; i++)
        fz_check(file2[i] == file[i],
                 "re-saving a loaded checkpoint changed byte %zu (0x%02x -> 0x%02x)", i, file[i],
                 file2[i]);
    free(file2);
    free(file);
    return 0;
}
