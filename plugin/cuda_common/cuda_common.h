/*
 * cuda_common.h — what every CUDA plugin shares on top of plugin/common: one
 * macro that checks a CUDA runtime call or a checked launch, the memory-space
 * checker for atp_space_t, and a device guard. Plain C11 host code against the
 * CUDA runtime API; never prints, exits or aborts.
 *
 * Error texts go into the handle's last error (atp_fail); a failed call leaves
 * no non-sticky error behind in the runtime (it is read back and cleared), so
 * the next launch check does not see a stale one. Sticky errors (a corrupted
 * context) cannot be cleared by anyone; they surface as AUXTRUNK_E_DEVICE.
 *
 * Internal prefix: atc_ (auxtrunk plugin, CUDA).
 */
#ifndef AUXTRUNK_PLUGIN_CUDA_COMMON_H
#define AUXTRUNK_PLUGIN_CUDA_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "plugin_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Checked calls                                                             */

/* Evaluates call (a cudaError_t expression: a runtime call, or a kernel
 * launcher that checks its own launches) and returns AUXTRUNK_OK, or
 * AUXTRUNK_E_OUT_OF_MEMORY for cudaErrorMemoryAllocation and AUXTRUNK_E_DEVICE
 * for any other error, with "file:line: cudaErrorX (text) in call" recorded
 * as base's last error (base may be NULL). Usage:
 *     if ((st = ATC_CHECK(&h->base, cudaMalloc(&p, n))) != AUXTRUNK_OK) goto fail; */
#define ATC_CHECK(base, call) atc_check_((base), (call), #call, __FILE__, __LINE__)

int32_t atc_check_(atp_handle_base_t *base, cudaError_t err, const char *expr, const char *file,
                   int line);

/* ------------------------------------------------------------------------- */
/* Memory space                                                              */

/* The atp_space_t check for "CUDA device memory of *(const int *)ctx":
 * accepts device memory of that device and managed memory; refuses host
 * memory (pageable or page-locked), device memory of another device and
 * anything the runtime does not know, with AUXTRUNK_E_MEMORY_SPACE and the
 * reason in why. Both the first and the last byte of [ptr, ptr + bytes) are
 * looked up (in relaxed capture mode, so a lookup during the host's graph
 * capture cannot invalidate it). Any error the lookup provokes is cleared
 * before returning. */
int32_t atc_space_check(void *ctx, const void *ptr, size_t bytes, char *why, size_t why_len);

/* The space for a plugin whose device ordinal lives at *device (which must
 * outlive the returned value; normally a field of the handle). */
static inline atp_space_t atc_space(const int *device)
{
    atp_space_t s = {atc_space_check, (void *)device};
    return s;
}

/* ------------------------------------------------------------------------- */
/* Devices                                                                   */

/* Resolves a config's device field for init: -1 means the device current on
 * the calling thread, otherwise an ordinal that must exist. Returns OK with
 * *device set, or AUXTRUNK_E_DEVICE ("no CUDA device", or a bad ordinal) with
 * the reason in why. Leaves no error behind in the runtime. */
int32_t atc_device_resolve(int32_t requested, int *device, char *why, size_t why_len);

/* Makes a device current for the duration of one entry and puts the caller's
 * device back afterwards, so a plugin never changes the host's thread state:
 *     atc_device_guard_t g;
 *     if ((st = atc_device_enter(&g, &h->base, h->device)) != AUXTRUNK_OK) return st;
 *     st = ...work...;
 *     return atc_device_leave(&g, &h->base, st);
 * cudaSetDevice is only called when the current device differs. */
typedef struct atc_device_guard {
    int previous; /* the caller's current device */
    int device;   /* the device made current by enter */
} atc_device_guard_t;

int32_t atc_device_enter(atc_device_guard_t *g, atp_handle_base_t *base, int device);

/* Restores the caller's device. Returns status if it is not OK (the first
 * failure wins), else the status of the restore. */
int32_t atc_device_leave(const atc_device_guard_t *g, atp_handle_base_t *base, int32_t status);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_PLUGIN_CUDA_COMMON_H */
