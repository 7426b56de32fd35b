/*
 * devmem_host.c — the devmem interface for host-memory plugins: aligned
 * malloc, memcpy, and the monotonic clock for timing marks (host plugins
 * finish their work before returning, so a clock read is in "stream order").
 */
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#include "devmem.h"

#include <stdlib.h>
#include <string.h>

typedef struct host_impl {
    double marks[ATH_DEVMEM_MARKS];
} host_impl_t;

static int host_open(ath_devmem_t *m, int device, ath_err_t *err)
{
    (void)device;
    m->impl = calloc(1, sizeof(host_impl_t));
    if (!m->impl)
        return ath_errf(err, "out of host memory");
    m->stream = NULL;
    m->device = -1;
    return 0;
}

static void host_close(ath_devmem_t *m)
{
    free(m->impl);
    m->impl = NULL;
}

static int host_alloc(ath_devmem_t *m, size_t bytes, void **out, ath_err_t *err)
{
    (void)m;
    void *p = NULL;
    /* 64-byte alignment: a cache line, and what wide vector loads like. */
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
        return ath_errf(err, "out of host memory (%zu bytes)", bytes);
    *out = p;
    return 0;
}

static void host_release(ath_devmem_t *m, void *p)
{
    (void)m;
    free(p);
}

static int host_copy(ath_devmem_t *m, void *dst, const void *src, size_t bytes, ath_err_t *err)
{
    (void)m;
    (void)err;
    if (dst != src && bytes)
        memcpy(dst, src, bytes);
    return 0;
}

static int host_sync(ath_devmem_t *m, ath_err_t *err)
{
    (void)m;
    (void)err;
    return 0;
}

static int host_mark(ath_devmem_t *m, int slot, ath_err_t *err)
{
    if (slot < 0 || slot >= ATH_DEVMEM_MARKS)
        return ath_errf(err, "timing mark %d out of range", slot);
    ((host_impl_t *)m->impl)->marks[slot] = ath_now_s();
    return 0;
}

static int host_elapsed_us(ath_devmem_t *m, int a, int b, double *us, ath_err_t *err)
{
    if (a < 0 || b < 0 || a >= ATH_DEVMEM_MARKS || b >= ATH_DEVMEM_MARKS)
        return ath_errf(err, "timing mark out of range");
    host_impl_t *h = m->impl;
    *us = (h->marks[b] - h->marks[a]) * 1e6;
    return 0;
}

/* No graphs in host memory: the capture ops stay NULL. */
const ath_devmem_ops_t ath_devmem_host_ops = {
    .name = "host",
    .open = host_open,
    .close = host_close,
    .alloc = host_alloc,
    .release = host_release,
    .upload = host_copy,
    .download = host_copy,
    .sync = host_sync,
    .mark = host_mark,
    .elapsed_us = host_elapsed_us,
};
