/*
 * checkpoint.c — atomic checkpoint writing and checked reading
 * (checkpoint.h has the format).
 *
 * Fields are packed byte by byte in little-endian order, so the format does
 * not depend on struct padding or on the host's byte order.
 */
#include "checkpoint.h"

#include "safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* CRC-32 and byte packing                                                   */

uint32_t ath_crc32(uint32_t crc, const void *data, size_t n)
{
    static uint32_t table[256];
    static int ready = 0;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bits_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* Payload: the three arrays as little-endian float32, one after another. */
static void pack_floats(unsigned char *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put_u32(dst + 4 * i, f32_bits(src[i]));
}

static void unpack_floats(float *dst, const unsigned char *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = bits_f32(get_u32(src + 4 * i));
}

static void pack_header(unsigned char *h, const ath_ckpt_meta_t *m, uint64_t payload_bytes,
                        uint32_t payload_crc)
{
    memset(h, 0, ATH_CKPT_HEADER_SIZE);
    memcpy(h, ATH_CKPT_MAGIC, 8);
    put_u32(h + 8, ATH_CKPT_VERSION);
    put_u32(h + 12, ATH_CKPT_HEADER_SIZE);
    put_u32(h + 16, (uint32_t)m->enc);
    put_u32(h + 20, (uint32_t)m->h1);
    put_u32(h + 24, (uint32_t)m->h2);
    put_u32(h + 28, (uint32_t)m->aux);
    put_u32(h + 32, (uint32_t)m->batch);
    put_u64(h + 40, m->seed);
    put_u32(h + 48, f32_bits(m->lr));
    put_u32(h + 52, f32_bits(m->beta1));
    put_u32(h + 56, f32_bits(m->beta2));
    put_u32(h + 60, f32_bits(m->eps));
    put_u64(h + 64, m->step);
    put_u64(h + 72, m->adam_t);
    put_u64(h + 80, m->data_state);
    put_u64(h + 88, f64_bits(m->first_loss));
    put_u64(h + 96, payload_bytes);
    put_u32(h + 104, payload_crc);
    put_u32(h + 108, ath_crc32(0, h, 108));
}

static void unpack_header(const unsigned char *h, ath_ckpt_meta_t *m)
{
    m->enc = (int32_t)get_u32(h + 16);
    m->h1 = (int32_t)get_u32(h + 20);
    m->h2 = (int32_t)get_u32(h + 24);
    m->aux = (int32_t)get_u32(h + 28);
    m->batch = (int32_t)get_u32(h + 32);
    m->seed = get_u64(h + 40);
    m->lr = bits_f32(get_u32(h + 48));
    m->beta1 = bits_f32(get_u32(h + 52));
    m->beta2 = bits_f32(get_u32(h + 56));
    m->eps = bits_f32(get_u32(h + 60));
    m->step = get_u64(h + 64);
    m->adam_t = get_u64(h + 72);
    m->data_state = get_u64(h + 80);
    m->first_loss = bits_f64(get_u64(h + 88));
}

/* ------------------------------------------------------------------------- */
/* Save                                                                      */

int ath_ckpt_save(const char *path, const ath_ckpt_meta_t *meta, const float *params,
                  const float *m, const float *v, size_t n, ath_err_t *err)
{
    size_t payload = 3 * n * 4;
    unsigned char *buf = malloc(ATH_CKPT_HEADER_SIZE + payload);
    if (!buf)
        return ath_errf(err, "checkpoint %s: out of host memory", path);
    unsigned char *pl = buf + ATH_CKPT_HEADER_SIZE;
    pack_floats(pl, params, n);
    pack_floats(pl + 4 * n, m, n);
    pack_floats(pl + 8 * n, v, n);
    pack_header(buf, meta, payload, ath_crc32(0, pl, payload));

    ath_out_t o;
    int rc = ath_out_open(&o, path, "checkpoint", err);
    if (rc == 0) {
        if (fwrite(buf, 1, ATH_CKPT_HEADER_SIZE + payload, o.f) != ATH_CKPT_HEADER_SIZE + payload) {
            rc = ath_errf(err, "checkpoint %s: write failed: %s", path, strerror(errno));
            ath_out_close(&o, NULL);
        } else {
            rc = ath_out_commit(&o, err);
        }
    }
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Load                                                                      */

static int check_meta(const char *path, const ath_ckpt_meta_t *g, const ath_ckpt_meta_t *x,
                      ath_err_t *err)
{
    if (g->enc != x->enc || g->h1 != x->h1 || g->h2 != x->h2 || g->aux != x->aux)
        return ath_errf(err,
                        "checkpoint %s: wrong topology: it holds ENC=%d H1=%d H2=%d AUX=%d, "
                        "this run is ENC=%d H1=%d H2=%d AUX=%d",
                        path, g->enc, g->h1, g->h2, g->aux, x->enc, x->h1, x->h2, x->aux);
    if (g->batch != x->batch)
        return ath_errf(err, "checkpoint %s: written with --batch %d, this run uses --batch %d",
                        path, g->batch, x->batch);
    if (g->seed != x->seed)
        return ath_errf(err, "checkpoint %s: written with --seed %llu, this run uses --seed %llu",
                        path, (unsigned long long)g->seed, (unsigned long long)x->seed);
    if (f32_bits(g->lr) != f32_bits(x->lr))
        return ath_errf(err, "checkpoint %s: written with --lr %.9g, this run uses --lr %.9g", path,
                        (double)g->lr, (double)x->lr);
    if (f32_bits(g->beta1) != f32_bits(x->beta1) || f32_bits(g->beta2) != f32_bits(x->beta2) ||
        f32_bits(g->eps) != f32_bits(x->eps))
        return ath_errf(err,
                        "checkpoint %s: written with other Adam settings (beta1 %.9g, "
                        "beta2 %.9g, eps %.9g)",
                        path, (double)g->beta1, (double)g->beta2, (double)g->eps);
    return 0;
}

int ath_ckpt_check_header(const char *path, const unsigned char *h, size_t len,
                          const ath_ckpt_meta_t *expect, size_t n, ath_ckpt_meta_t *meta,
                          ath_err_t *err)
{
    if (len < 16)
        return ath_errf(err, "checkpoint %s: truncated: %zu bytes, not even a header", path, len);
    if (memcmp(h, ATH_CKPT_MAGIC, 8) != 0)
        return ath_errf(err, "checkpoint %s: not an auxtrunk checkpoint (bad magic)", path);
    uint32_t version = get_u32(h + 8);
    if (version != ATH_CKPT_VERSION)
        return ath_errf(err,
                        "checkpoint %s: format version %u, this auxtrunk-host reads version %u",
                        path, (unsigned)version, ATH_CKPT_VERSION);
    uint32_t hsize = get_u32(h + 12);
    if (hsize != ATH_CKPT_HEADER_SIZE)
        return ath_errf(err, "checkpoint %s: corrupted: header size %u, expected %u", path,
                        (unsigned)hsize, ATH_CKPT_HEADER_SIZE);
    if (len < ATH_CKPT_HEADER_SIZE)
        return ath_errf(err, "checkpoint %s: truncated: %zu bytes, the header alone is %u", path,
                        len, ATH_CKPT_HEADER_SIZE);
    if (get_u32(h + 108) != ath_crc32(0, h, 108))
        return ath_errf(err, "checkpoint %s: corrupted: header checksum mismatch", path);
    unpack_header(h, meta);
    if (expect && check_meta(path, meta, expect, err) != 0)
        return -1;
    uint64_t payload = get_u64(h + 96), want_payload = 3 * (uint64_t)n * 4;
    if (expect && payload != want_payload)
        return ath_errf(err, "checkpoint %s: corrupted: payload size %llu, the topology needs %llu",
                        path, (unsigned long long)payload, (unsigned long long)want_payload);
    if (payload > UINT64_MAX - ATH_CKPT_HEADER_SIZE || len != ATH_CKPT_HEADER_SIZE + payload)
        return ath_errf(err, "checkpoint %s: %s: %zu bytes, expected %llu", path,
                        len < ATH_CKPT_HEADER_SIZE + payload ? "truncated" : "trailing bytes", len,
                        (unsigned long long)(ATH_CKPT_HEADER_SIZE + payload));
    return 0;
}

/* Opens path and reads at most its header; every header check before a
 * byte of the payload is read, so a huge or wrong file costs 112 bytes. */
static int open_checked(const char *path, const ath_ckpt_meta_t *expect, size_t n,
                        ath_ckpt_meta_t *meta, uint32_t *payload_crc, ath_err_t *err)
{
    struct stat st;
    int fd = ath_in_open(path, "checkpoint", &st, NULL, err);
    if (fd < 0)
        return -1;
    unsigned char h[ATH_CKPT_HEADER_SIZE];
    long long got = ath_in_read(fd, h, sizeof h);
    if (got < 0) {
        int e = errno;
        close(fd);
        return ath_errf(err, "checkpoint %s: read failed: %s", path, strerror(e));
    }
    size_t len = (size_t)got < sizeof h ? (size_t)got : (size_t)st.st_size;
    if (ath_ckpt_check_header(path, h, len, expect, n, meta, err) != 0) {
        close(fd);
        return -1;
    }
    *payload_crc = get_u32(h + 104);
    return fd;
}

int ath_ckpt_peek(const char *path, ath_ckpt_meta_t *meta, ath_err_t *err)
{
    uint32_t crc;
    int fd = open_checked(path, NULL, 0, meta, &crc, err);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

int ath_ckpt_load(const char *path, const ath_ckpt_meta_t *expect, ath_ckpt_meta_t *got,
                  float *params, float *m, float *v, size_t n, ath_err_t *err)
{
    ath_ckpt_meta_t meta;
    uint32_t crc;
    int fd = open_checked(path, expect, n, &meta, &crc, err);
    if (fd < 0)
        return -1;
    size_t payload = 3 * n * 4;
    unsigned char *buf = malloc(payload + 1);
    if (!buf) {
        close(fd);
        return ath_errf(err, "checkpoint %s: out of host memory (%zu bytes)", path, payload);
    }
    /* One byte more than the payload: a file that changed since fstat. */
    long long r = ath_in_read(fd, buf, payload + 1);
    close(fd);
    int rc = -1;
    if (r < 0)
        ath_errf(err, "checkpoint %s: read failed: %s", path, strerror(errno));
    else if ((size_t)r != payload)
        ath_errf(err, "checkpoint %s: %s while reading", path,
                 (size_t)r < payload ? "truncated" : "trailing bytes");
    else if (crc != ath_crc32(0, buf, payload))
        ath_errf(err, "checkpoint %s: corrupted: payload checksum mismatch", path);
    else {
        unpack_floats(params, buf, n);
        unpack_floats(m, buf + 4 * n, n);
        unpack_floats(v, buf + 8 * n, n);
        *got = meta;
        rc = 0;
    }
    free(buf);
    return rc;
}
