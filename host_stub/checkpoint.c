/*
 * checkpoint.c — atomic checkpoint writing and checked reading
 * (checkpoint.h has the format).
 *
 * Fields are packed byte by byte in little-endian order, so the format does
 * not depend on struct padding or on the host's byte order.
 */
#define _POSIX_C_SOURCE 200809L /* fsync, O_DIRECTORY, O_CLOEXEC */
#include "checkpoint.h"

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

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsync of the directory holding path, so the rename itself is durable. */
static int sync_parent_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

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

    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        free(buf);
        return ath_errf(err, "checkpoint %s: cannot create %s: %s", path, tmp, strerror(e));
    }
    const char *step = "write";
    int ok = write_all(fd, buf, ATH_CKPT_HEADER_SIZE + payload) == 0;
    if (ok) {
        step = "fsync";
        ok = fsync(fd) == 0;
    }
    int e = errno;
    if (close(fd) != 0 && ok) {
        e = errno;
        step = "close";
        ok = 0;
    }
    free(buf);
    if (ok) {
        step = "rename";
        ok = rename(tmp, path) == 0;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        return ath_errf(err, "checkpoint %s: %s failed: %s", path, step, strerror(e));
    }
    if (sync_parent_dir(path) != 0)
        return ath_errf(err, "checkpoint %s: fsync of its directory failed: %s", path,
                        strerror(errno));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Load                                                                      */

static int read_file(const char *path, unsigned char **data, size_t *len, ath_err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ath_errf(err, "checkpoint %s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ath_errf(err, "checkpoint %s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return ath_errf(err, "checkpoint %s: out of host memory (%zu bytes)", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = got;
    return 0;
}

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
        return ath_errf(err, "checkpoint %s: written with --lr %.9g, this run uses --lr %.9g",
                        path, (double)g->lr, (double)x->lr);
    if (f32_bits(g->beta1) != f32_bits(x->beta1) || f32_bits(g->beta2) != f32_bits(x->beta2) ||
        f32_bits(g->eps) != f32_bits(x->eps))
        return ath_errf(err, "checkpoint %s: written with other Adam settings (beta1 %.9g, "
                             "beta2 %.9g, eps %.9g)",
                        path, (double)g->beta1, (double)g->beta2, (double)g->eps);
    return 0;
}

int ath_ckpt_load(const char *path, const ath_ckpt_meta_t *expect, ath_ckpt_meta_t *got,
                  float *params, float *m, float *v, size_t n, ath_err_t *err)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    if (read_file(path, &buf, &len, err) != 0)
        return -1;
    int rc = -1;
    const unsigned char *h = buf;
    uint32_t version, hsize;
    uint64_t payload, want_payload = 3 * (uint64_t)n * 4;
    ath_ckpt_meta_t meta;

    if (len < 16) {
        ath_errf(err, "checkpoint %s: truncated: %zu bytes, not even a header", path, len);
        goto out;
    }
    if (memcmp(h, ATH_CKPT_MAGIC, 8) != 0) {
        ath_errf(err, "checkpoint %s: not an auxtrunk checkpoint (bad magic)", path);
        goto out;
    }
    version = get_u32(h + 8);
    if (version != ATH_CKPT_VERSION) {
        ath_errf(err, "checkpoint %s: format version %u, this auxtrunk-host reads version %u",
                 path, (unsigned)version, ATH_CKPT_VERSION);
        goto out;
    }
    hsize = get_u32(h + 12);
    if (hsize != ATH_CKPT_HEADER_SIZE) {
        ath_errf(err, "checkpoint %s: corrupted: header size %u, expected %u", path,
                 (unsigned)hsize, ATH_CKPT_HEADER_SIZE);
        goto out;
    }
    if (len < ATH_CKPT_HEADER_SIZE) {
        ath_errf(err, "checkpoint %s: truncated: %zu bytes, the header alone is %u", path, len,
                 ATH_CKPT_HEADER_SIZE);
        goto out;
    }
    if (get_u32(h + 108) != ath_crc32(0, h, 108)) {
        ath_errf(err, "checkpoint %s: corrupted: header checksum mismatch", path);
        goto out;
    }
    unpack_header(h, &meta);
    if (check_meta(path, &meta, expect, err) != 0)
        goto out;
    payload = get_u64(h + 96);
    if (payload != want_payload) {
        ath_errf(err, "checkpoint %s: corrupted: payload size %llu, the topology needs %llu",
                 path, (unsigned long long)payload, (unsigned long long)want_payload);
        goto out;
    }
    if (len != ATH_CKPT_HEADER_SIZE + payload) {
        ath_errf(err, "checkpoint %s: %s: %zu bytes, expected %llu", path,
                 len < ATH_CKPT_HEADER_SIZE + payload ? "truncated" : "trailing bytes", len,
                 (unsigned long long)(ATH_CKPT_HEADER_SIZE + payload));
        goto out;
    }
    if (get_u32(h + 104) != ath_crc32(0, h + ATH_CKPT_HEADER_SIZE, (size_t)payload)) {
        ath_errf(err, "checkpoint %s: corrupted: payload checksum mismatch", path);
        goto out;
    }
    unpack_floats(params, h + ATH_CKPT_HEADER_SIZE, n);
    unpack_floats(m, h + ATH_CKPT_HEADER_SIZE + 4 * n, n);
    unpack_floats(v, h + ATH_CKPT_HEADER_SIZE + 8 * n, n);
    *got = meta;
    rc = 0;
out:
    free(buf);
    return rc;
}
