/*
 * plugin_common.c — the ABI rules every plugin shares (see plugin_common.h):
 * status text, negotiation, config reading, handle header, argument checks.
 *
 * Everything here follows abi/auxtrunk.h to the letter; a plugin adds only its
 * memory-space hook and its kernels. Host code only (no CUDA), never prints,
 * never allocates.
 */
#include "plugin_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Status text                                                               */

const char *atp_status_string(int32_t s) { return auxtrunk_status_message(s); }

/* ------------------------------------------------------------------------- */
/* Struct size rule (abi/auxtrunk.h, "Versioning rules")                     */

/* A struct read by the plugin: struct_size at least the 1.0 size, and any
 * bytes past the part this plugin knows (known = sizeof as compiled here) all
 * zero. s points at the struct's first byte (its struct_size field). */
static int32_t struct_size_ok(const void *s, size_t size_1_0, size_t known)
{
    uint32_t size;
    memcpy(&size, s, sizeof size);
    if (size < size_1_0)
        return AUXTRUNK_E_STRUCT_SIZE;
    const unsigned char *bytes = s;
    for (size_t i = known; i < size; i++)
        if (bytes[i] != 0)
            return AUXTRUNK_E_STRUCT_SIZE;
    return AUXTRUNK_OK;
}

/* ------------------------------------------------------------------------- */
/* Negotiation                                                               */

int32_t atp_negotiate(const auxtrunk_host_info_t *host, auxtrunk_api_t *api,
                      const auxtrunk_api_t *mine)
{
    if (!host || !api || !mine)
        return AUXTRUNK_E_NULL_POINTER;
    if (struct_size_ok(host, AUXTRUNK_HOST_INFO_SIZE_1_0, sizeof *host) != AUXTRUNK_OK)
        return AUXTRUNK_E_STRUCT_SIZE;
    uint32_t room = api->struct_size; /* bytes of host storage behind api */
    if (room < AUXTRUNK_API_SIZE_1_0)
        return AUXTRUNK_E_STRUCT_SIZE;
    if (host->flags != 0)
        return AUXTRUNK_E_FLAGS;

    /* The plugin speaks major.0 .. its own version; answer the highest one
     * that also lies in [abi_min, abi_max]. */
    uint32_t lo = AUXTRUNK_VERSION(AUXTRUNK_VERSION_MAJOR_OF(mine->abi_version), 0);
    uint32_t hi = mine->abi_version;
    if (host->abi_min > host->abi_max)
        return AUXTRUNK_E_ABI_VERSION;
    uint32_t v = host->abi_max < hi ? host->abi_max : hi;
    if (v < lo || v < host->abi_min)
        return AUXTRUNK_E_ABI_VERSION;

    /* Write exactly `room` bytes: the entries both sides know, then zeros. */
    uint32_t valid = room < mine->struct_size ? room : mine->struct_size;
    memcpy(api, mine, valid);
    memset((unsigned char *)api + valid, 0, room - valid);
    api->struct_size = valid;
    api->abi_version = v;
    return AUXTRUNK_OK;
}

/* ------------------------------------------------------------------------- */
/* Config                                                                    */

static int width_ok(int32_t w) { return w >= 1 && w <= AUXTRUNK_MAX_WIDTH; }

int32_t atp_config_read(const auxtrunk_config_t *config, uint32_t supported_flags, atp_dims_t *dims,
                        uint32_t *flags, int32_t *device)
{
    if (!config || !dims || !flags || !device)
        return AUXTRUNK_E_NULL_POINTER;
    if (struct_size_ok(config, AUXTRUNK_CONFIG_SIZE_1_0, sizeof *config) != AUXTRUNK_OK)
        return AUXTRUNK_E_STRUCT_SIZE;
    if (config->flags & ~(AUXTRUNK_CONFIG_KNOWN_FLAGS & supported_flags))
        return AUXTRUNK_E_FLAGS;
    if (!width_ok(config->enc) || !width_ok(config->h1) || !width_ok(config->h2) ||
        !width_ok(config->aux))
        return AUXTRUNK_E_DIMENSION;
    if (config->max_batch < 1 || config->max_batch > AUXTRUNK_MAX_BATCH)
        return AUXTRUNK_E_DIMENSION;
    int32_t widest = config->enc;
    if (config->h1 > widest)
        widest = config->h1;
    if (config->h2 > widest)
        widest = config->h2;
    if (config->aux > widest)
        widest = config->aux;
    if ((int64_t)config->max_batch * widest > AUXTRUNK_MAX_ELEMENTS)
        return AUXTRUNK_E_DIMENSION;

    dims->enc = config->enc;
    dims->h1 = config->h1;
    dims->h2 = config->h2;
    dims->aux = config->aux;
    dims->max_batch = config->max_batch;
    *flags = config->flags;
    *device = config->device;
    return AUXTRUNK_OK;
}

/* ------------------------------------------------------------------------- */
/* Handle header and last error                                              */

void atp_handle_base_init(atp_handle_base_t *base, const atp_dims_t *dims, uint32_t flags,
                          int32_t device)
{
    memset(base, 0, sizeof *base);
    base->magic = ATP_MAGIC_LIVE;
    base->config_flags = flags;
    base->dims = *dims;
    base->device = device; /* recorded_batch 0 (no record), last_error "" */
}

void atp_handle_base_retire(atp_handle_base_t *base)
{
    *(volatile uint32_t *)&base->magic = ATP_MAGIC_DEAD;
}

int32_t atp_check_handle(const void *h)
{
    if (!h)
        return AUXTRUNK_E_NULL_POINTER;
    uint32_t magic;
    memcpy(&magic, h, sizeof magic); /* magic is the first member */
    return magic == ATP_MAGIC_LIVE ? AUXTRUNK_OK : AUXTRUNK_E_BAD_HANDLE;
}

int32_t atp_fail(atp_handle_base_t *base, int32_t status, const char *fmt, ...)
{
    if (!base)
        return status;
    int n =
        snprintf(base->last_error, sizeof base->last_error, "%s: ", auxtrunk_status_name(status));
    if (n < 0 || (size_t)n >= sizeof base->last_error)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(base->last_error + n, sizeof base->last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

void atp_ok(atp_handle_base_t *base)
{
    if (base)
        base->last_error[0] = '\0';
}

/* ------------------------------------------------------------------------- */
/* Argument checks                                                           */

/* One pointer argument: its name (for the error text), where it starts and
 * how many bytes the call touches through it. */
typedef struct span {
    const char *name;
    const void *ptr;
    size_t bytes;
} span_t;

/* [a, a+na) and [b, b+nb) overlap. Unsigned differences, so no pointer sum
 * can wrap: if a >= b they overlap iff a - b < nb, else iff b - a < na. */
static int spans_overlap(const span_t *p, const span_t *q)
{
    uintptr_t a = (uintptr_t)p->ptr, b = (uintptr_t)q->ptr;
    if (p->bytes == 0 || q->bytes == 0)
        return 0;
    return a - b < q->bytes || b - a < p->bytes;
}

static size_t fbytes(int32_t rows, int32_t cols)
{
    return (size_t)rows * (size_t)cols * sizeof(float);
}

/* The six parameter spans, in struct order. */
static void param_spans(const atp_dims_t *d, const auxtrunk_params_t *p, span_t s[6])
{
    s[0] = (span_t){"params->w1", p->w1, fbytes(d->enc, d->h1)};
    s[1] = (span_t){"params->b1", p->b1, fbytes(1, d->h1)};
    s[2] = (span_t){"params->w2", p->w2, fbytes(d->h1, d->h2)};
    s[3] = (span_t){"params->b2", p->b2, fbytes(1, d->h2)};
    s[4] = (span_t){"params->w3", p->w3, fbytes(d->h2, d->aux)};
    s[5] = (span_t){"params->b3", p->b3, fbytes(1, d->aux)};
}

static void grad_spans(const atp_dims_t *d, const auxtrunk_grads_t *g, span_t s[6])
{
    s[0] = (span_t){"grads->dw1", g->dw1, fbytes(d->enc, d->h1)};
    s[1] = (span_t){"grads->db1", g->db1, fbytes(1, d->h1)};
    s[2] = (span_t){"grads->dw2", g->dw2, fbytes(d->h1, d->h2)};
    s[3] = (span_t){"grads->db2", g->db2, fbytes(1, d->h2)};
    s[4] = (span_t){"grads->dw3", g->dw3, fbytes(d->h2, d->aux)};
    s[5] = (span_t){"grads->db3", g->db3, fbytes(1, d->aux)};
}

static int32_t check_nulls(atp_handle_base_t *base, const span_t *s, int n)
{
    for (int i = 0; i < n; i++)
        if (!s[i].ptr)
            return atp_fail(base, AUXTRUNK_E_NULL_POINTER, "%s is NULL", s[i].name);
    return AUXTRUNK_OK;
}

static int32_t check_params_struct(atp_handle_base_t *base, const auxtrunk_params_t *p)
{
    if (struct_size_ok(p, AUXTRUNK_PARAMS_SIZE_1_0, sizeof *p) != AUXTRUNK_OK)
        return atp_fail(base, AUXTRUNK_E_STRUCT_SIZE,
                        "params->struct_size %u (1.0 size %u, this plugin knows %zu; "
                        "trailing bytes must be zero)",
                        p->struct_size, AUXTRUNK_PARAMS_SIZE_1_0, sizeof *p);
    if (p->reserved != 0)
        return atp_fail(base, AUXTRUNK_E_STRUCT_SIZE, "params->reserved is %u, must be 0",
                        p->reserved);
    return AUXTRUNK_OK;
}

static int32_t check_grads_struct(atp_handle_base_t *base, const auxtrunk_grads_t *g)
{
    if (struct_size_ok(g, AUXTRUNK_GRADS_SIZE_1_0, sizeof *g) != AUXTRUNK_OK)
        return atp_fail(base, AUXTRUNK_E_STRUCT_SIZE,
                        "grads->struct_size %u (1.0 size %u, this plugin knows %zu; "
                        "trailing bytes must be zero)",
                        g->struct_size, AUXTRUNK_GRADS_SIZE_1_0, sizeof *g);
    if (g->reserved != 0)
        return atp_fail(base, AUXTRUNK_E_STRUCT_SIZE, "grads->reserved is %u, must be 0",
                        g->reserved);
    return AUXTRUNK_OK;
}

static int32_t check_batch(atp_handle_base_t *base, int32_t batch)
{
    if (batch < 1 || batch > base->dims.max_batch)
        return atp_fail(base, AUXTRUNK_E_BATCH, "batch %d is not in [1, %d]", (int)batch,
                        (int)base->dims.max_batch);
    return AUXTRUNK_OK;
}

static int32_t check_space(atp_handle_base_t *base, const atp_space_t *space, const span_t *s,
                           int n)
{
    if (!space || !space->check)
        return AUXTRUNK_OK;
    for (int i = 0; i < n; i++) {
        char why[128] = "";
        int32_t st = space->check(space->ctx, s[i].ptr, s[i].bytes, why, sizeof why);
        if (st != AUXTRUNK_OK)
            return atp_fail(base, st, "%s (%p, %zu bytes)%s%s", s[i].name, s[i].ptr, s[i].bytes,
                            why[0] ? ": " : "", why);
    }
    return AUXTRUNK_OK;
}

/* Each of the n_out output spans must not overlap any input span nor any
 * other output span. Inputs may overlap each other (they are only read). */
static int32_t check_alias(atp_handle_base_t *base, const span_t *out, int n_out, const span_t *in,
                           int n_in)
{
    for (int i = 0; i < n_out; i++) {
        for (int j = 0; j < n_in; j++)
            if (spans_overlap(&out[i], &in[j]))
                return atp_fail(base, AUXTRUNK_E_ALIAS, "%s overlaps %s", out[i].name, in[j].name);
        for (int j = i + 1; j < n_out; j++)
            if (spans_overlap(&out[i], &out[j]))
                return atp_fail(base, AUXTRUNK_E_ALIAS, "%s overlaps %s", out[i].name, out[j].name);
    }
    return AUXTRUNK_OK;
}

int32_t atp_check_forward(atp_handle_base_t *base, const auxtrunk_params_t *params, const float *x,
                          int32_t batch, const float *out, uint32_t flags, const atp_space_t *space)
{
    const atp_dims_t *d = &base->dims;
    int32_t st;

    /* NULL pointers: the arguments first, then (once the struct is known to
     * hold them) the six parameter pointers. */
    span_t args[3] = {{"params", params, 0}, {"x", x, 0}, {"out", out, 0}};
    if ((st = check_nulls(base, args, 3)) != AUXTRUNK_OK)
        return st;
    if ((st = check_params_struct(base, params)) != AUXTRUNK_OK)
        return st;
    span_t in[7];
    param_spans(d, params, in);
    if ((st = check_nulls(base, in, 6)) != AUXTRUNK_OK)
        return st;

    if (flags & ~AUXTRUNK_FORWARD_KNOWN_FLAGS)
        return atp_fail(base, AUXTRUNK_E_FLAGS, "flags 0x%x: forward and infer take 0",
                        (unsigned)flags);
    if ((st = check_batch(base, batch)) != AUXTRUNK_OK)
        return st;

    in[6] = (span_t){"x", x, fbytes(batch, d->enc)};
    span_t o = {"out", out, fbytes(batch, d->aux)};
    if ((st = check_space(base, space, in, 7)) != AUXTRUNK_OK)
        return st;
    if ((st = check_space(base, space, &o, 1)) != AUXTRUNK_OK)
        return st;
    return check_alias(base, &o, 1, in, 7);
}

int32_t atp_check_backward(atp_handle_base_t *base, const auxtrunk_params_t *params, const float *x,
                           const float *dout, int32_t batch, const auxtrunk_grads_t *grads,
                           uint32_t flags, const atp_space_t *space)
{
    const atp_dims_t *d = &base->dims;
    int32_t st;

    span_t args[4] = {{"params", params, 0}, {"x", x, 0}, {"dout", dout, 0}, {"grads", grads, 0}};
    if ((st = check_nulls(base, args, 4)) != AUXTRUNK_OK)
        return st;
    if ((st = check_params_struct(base, params)) != AUXTRUNK_OK)
        return st;
    if ((st = check_grads_struct(base, grads)) != AUXTRUNK_OK)
        return st;
    span_t in[8], out[6];
    param_spans(d, params, in);
    grad_spans(d, grads, out);
    if ((st = check_nulls(base, in, 6)) != AUXTRUNK_OK)
        return st;
    if ((st = check_nulls(base, out, 6)) != AUXTRUNK_OK)
        return st;

    if (flags & ~AUXTRUNK_BACKWARD_KNOWN_FLAGS)
        return atp_fail(base, AUXTRUNK_E_FLAGS, "flags 0x%x: backward knows only 0x%x",
                        (unsigned)flags, (unsigned)AUXTRUNK_BACKWARD_KNOWN_FLAGS);
    if ((st = check_batch(base, batch)) != AUXTRUNK_OK)
        return st;
    if (base->recorded_batch == 0)
        return atp_fail(base, AUXTRUNK_E_NO_FORWARD, "no training forward has been recorded");
    if (batch != base->recorded_batch)
        return atp_fail(base, AUXTRUNK_E_BATCH_MISMATCH,
                        "batch %d differs from the recorded forward's batch %d", (int)batch,
                        (int)base->recorded_batch);

    in[6] = (span_t){"x", x, fbytes(batch, d->enc)};
    in[7] = (span_t){"dout", dout, fbytes(batch, d->aux)};
    if ((st = check_space(base, space, in, 8)) != AUXTRUNK_OK)
        return st;
    if ((st = check_space(base, space, out, 6)) != AUXTRUNK_OK)
        return st;
    return check_alias(base, out, 6, in, 8);
}

int32_t atp_check_memory_out(auxtrunk_memory_t *out)
{
    if (!out)
        return AUXTRUNK_E_NULL_POINTER;
    uint32_t size = out->struct_size;
    if (size < AUXTRUNK_MEMORY_SIZE_1_0)
        return AUXTRUNK_E_STRUCT_SIZE;
    /* An output struct: every byte after struct_size is ours to write, and a
     * field a newer host knows but this plugin does not reads as zero. */
    memset((unsigned char *)out + sizeof out->struct_size, 0, size - sizeof out->struct_size);
    return AUXTRUNK_OK;
}

int32_t atp_memory_report(atp_handle_base_t *base, auxtrunk_memory_t *out, uint64_t host_bytes,
                          uint64_t device_bytes)
{
    if (!out)
        return atp_fail(base, AUXTRUNK_E_NULL_POINTER, "memory_usage: out is NULL");
    int32_t st = atp_check_memory_out(out);
    if (st != AUXTRUNK_OK)
        return atp_fail(base, st, "memory_usage: out->struct_size %u is below the 1.0 size %u",
                        out->struct_size, AUXTRUNK_MEMORY_SIZE_1_0);
    out->host_bytes = host_bytes;
    out->device_bytes = device_bytes;
    atp_ok(base);
    return AUXTRUNK_OK;
}

/* ------------------------------------------------------------------------- */
/* Shared entries                                                            */

int32_t atp_destroy(auxtrunk_handle_t *h)
{
    if (!h)
        return AUXTRUNK_OK;
    if (atp_check_handle(h) != AUXTRUNK_OK)
        return AUXTRUNK_E_BAD_HANDLE;
    atp_handle_base_t *base = (atp_handle_base_t *)h;
    const int32_t st = base->release(h);
    atp_handle_base_retire(base); /* a stale pointer reads as dead, not live */
    free(h);
    return st;
}

int32_t atp_memory_usage(const auxtrunk_handle_t *h, auxtrunk_memory_t *out)
{
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    /* The handle was created non-const by init; only its error text changes. */
    atp_handle_base_t *base = (atp_handle_base_t *)h;
    return atp_memory_report(base, out, base->host_bytes, base->device_bytes);
}

const char *atp_last_error(const auxtrunk_handle_t *h)
{
    if (atp_check_handle(h) != AUXTRUNK_OK)
        return "";
    return ((const atp_handle_base_t *)h)->last_error;
}

auxtrunk_api_t atp_api(auxtrunk_api_t mine)
{
    mine.struct_size = sizeof(auxtrunk_api_t);
    mine.abi_version = AUXTRUNK_ABI_VERSION;
    mine.status_string = atp_status_string;
    mine.destroy = atp_destroy;
    mine.memory_usage = atp_memory_usage;
    mine.last_error = atp_last_error;
    return mine;
}
