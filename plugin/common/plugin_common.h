/*
 * plugin_common.h — what every auxtrunk plugin shares, whatever its kernels:
 * the status table, ABI negotiation, config reading, the handle header (magic,
 * dims, recorded forward, last-error text) and argument validation in the
 * ABI's documented order. Plain C11, host code only; never prints or exits.
 *
 * Validation guarantees the ABI's error rule: a plugin calls atp_check_* first
 * and writes nothing unless it returns AUXTRUNK_OK.
 *
 * Internal prefix: atp_ (auxtrunk plugin). Nothing here is exported: plugins
 * build with hidden visibility and a version script.
 */
#ifndef AUXTRUNK_PLUGIN_COMMON_H
#define AUXTRUNK_PLUGIN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "auxtrunk.h"
#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Topology of a handle, read from auxtrunk_config_t. */
typedef struct atp_dims {
    int32_t enc, h1, h2, aux;
    int32_t max_batch;
} atp_dims_t;

#define ATP_MAGIC_LIVE UINT32_C(0x41555854) /* "AUXT" */
#define ATP_MAGIC_DEAD UINT32_C(0xDEADA0A0)
#define ATP_ERROR_TEXT 256

/* First member of every plugin's struct auxtrunk_handle. */
typedef struct atp_handle_base {
    uint32_t magic;        /* ATP_MAGIC_LIVE while alive; DEAD after destroy */
    uint32_t config_flags; /* AUXTRUNK_CONFIG_* accepted at init */
    atp_dims_t dims;
    int32_t device;         /* as given in the config (-1 = current) */
    int32_t recorded_batch; /* batch of the last training forward; 0 = none */
    uint64_t host_bytes;    /* memory_usage: set by the adapter's init */
    uint64_t device_bytes;
    /* Frees what the adapter's init allocated besides the handle itself (set
     * by that init); atp_destroy calls it, then retires and frees the handle.
     * Returns the status destroy returns. */
    int32_t (*release)(auxtrunk_handle_t *h);
    char last_error[ATP_ERROR_TEXT];
} atp_handle_base_t;

/* A memory-space check for pointer arguments. Returns AUXTRUNK_OK if
 * [ptr, ptr + bytes) is usable by the plugin, else a status (normally
 * AUXTRUNK_E_MEMORY_SPACE) and a short reason in why (may be left empty).
 * NULL space = host memory, nothing to check. */
typedef struct atp_space {
    int32_t (*check)(void *ctx, const void *ptr, size_t bytes, char *why, size_t why_len);
    void *ctx;
} atp_space_t;

/* The AUXTRUNK_STATUS_MAP message of s, or "unknown status". */
const char *atp_status_string(int32_t s);

/* Implements auxtrunk_plugin_entry for a plugin whose full table is *mine
 * (mine->struct_size = sizeof(auxtrunk_api_t), mine->abi_version = the highest
 * version it speaks). Negotiation and table-filling rules: abi/auxtrunk.h. */
int32_t atp_negotiate(const auxtrunk_host_info_t *host, auxtrunk_api_t *api,
                      const auxtrunk_api_t *mine);

/* Reads and validates a config: struct size rules, flags against
 * supported_flags (E_FLAGS), widths and max_batch against the limits and the
 * element-count overflow rule (E_DIMENSION). On OK fills the three outputs. */
int32_t atp_config_read(const auxtrunk_config_t *config, uint32_t supported_flags, atp_dims_t *dims,
                        uint32_t *flags, int32_t *device);

/* Fills a fresh handle header (magic live, no record, empty error). */
void atp_handle_base_init(atp_handle_base_t *base, const atp_dims_t *dims, uint32_t flags,
                          int32_t device);

/* Marks a handle dead just before destroy frees it, so that a stale pointer
 * whose memory is still mapped reads as E_BAD_HANDLE. The store is volatile:
 * a plain store right before free() is dead to the compiler, which drops it. */
void atp_handle_base_retire(atp_handle_base_t *base);

/* AUXTRUNK_OK if h is non-NULL and its magic is live, else E_NULL_POINTER /
 * E_BAD_HANDLE. Reads only the magic. */
int32_t atp_check_handle(const void *h);

/* Records status and a printf-style detail as the handle's last error and
 * returns status. base may be NULL (then only returns status). */
int32_t atp_fail(atp_handle_base_t *base, int32_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Clears the last error (called by an entry that succeeds). */
void atp_ok(atp_handle_base_t *base);

/* Validates forward/infer arguments in this order: NULL pointers, params
 * struct size and reserved field, flags, batch range, memory space of every
 * pointer (if space != NULL), aliasing of out with x and each parameter.
 * Returns the first failing status (recorded with detail), else OK. */
int32_t atp_check_forward(atp_handle_base_t *base, const auxtrunk_params_t *params, const float *x,
                          int32_t batch, const float *out, uint32_t flags,
                          const atp_space_t *space);

/* Validates backward arguments: NULL pointers, params/grads struct sizes and
 * reserved fields, flags, batch range, a recorded forward (E_NO_FORWARD), its
 * batch (E_BATCH_MISMATCH), memory space, then aliasing: the six gradient
 * buffers must not overlap each other, x, dout or any parameter. */
int32_t atp_check_backward(atp_handle_base_t *base, const auxtrunk_params_t *params, const float *x,
                           const float *dout, int32_t batch, const auxtrunk_grads_t *grads,
                           uint32_t flags, const atp_space_t *space);

/* Validates memory_usage's output struct (size rules) and zero-fills it up to
 * its struct_size. */
int32_t atp_check_memory_out(auxtrunk_memory_t *out);

/* The kernels' views (kernels/common/trunk_types.h) of a handle's topology
 * and of a call's ABI parameter and gradient tables. */
static inline atk_dims_t atp_kernel_dims(const atp_dims_t *d)
{
    atk_dims_t v = {d->enc, d->h1, d->h2, d->aux};
    return v;
}

static inline atk_params_t atp_kernel_params(const auxtrunk_params_t *p)
{
    atk_params_t v = {p->w1, p->b1, p->w2, p->b2, p->w3, p->b3};
    return v;
}

static inline atk_grads_t atp_kernel_grads(const auxtrunk_grads_t *g)
{
    atk_grads_t v = {g->dw1, g->db1, g->dw2, g->db2, g->dw3, g->db3};
    return v;
}

/* memory_usage for every adapter, once the handle is checked: validates out
 * (NULL, struct_size) with the handle's error text, fills it and clears the
 * error. */
int32_t atp_memory_report(atp_handle_base_t *base, auxtrunk_memory_t *out, uint64_t host_bytes,
                          uint64_t device_bytes);

/* ------------------------------------------------------------------------- */
/* The entries every adapter shares (plugin/common/host_plugin.c for host     */
/* memory, plugin/cuda_common/cuda_plugin.c for CUDA). The handle of each     */
/* starts with an atp_handle_base_t whose release, host_bytes and             */
/* device_bytes its init set.                                                 */

/* destroy: NULL is OK; a handle that is not live is E_BAD_HANDLE; else
 * release's status, with the handle retired and freed either way. */
int32_t atp_destroy(auxtrunk_handle_t *h);

/* memory_usage: the bytes init recorded in the handle's base. */
int32_t atp_memory_usage(const auxtrunk_handle_t *h, auxtrunk_memory_t *out);

/* last_error: the handle's text, or "" for a handle that is not live. */
const char *atp_last_error(const auxtrunk_handle_t *h);

/* An adapter's whole table: mine holds its caps, names and its init,
 * forward, infer and backward; this fills in the rest (struct size, version,
 * status_string and the three shared entries above). The adapter's
 * auxtrunk_plugin_entry negotiates with it (atp_negotiate). */
auxtrunk_api_t atp_api(auxtrunk_api_t mine);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_PLUGIN_COMMON_H */
