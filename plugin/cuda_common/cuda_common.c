/*
 * cuda_common.c — checked CUDA calls, the memory-space checker and the device
 * guard shared by the CUDA plugins (see cuda_common.h).
 */
#include "cuda_common.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Checked calls                                                             */

static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int32_t atc_check_(atp_handle_base_t *base, cudaError_t err, const char *expr, const char *file,
                   int line)
{
    if (err == cudaSuccess)
        return AUXTRUNK_OK;
    /* Read back the runtime's last error so a non-sticky failure here cannot
     * be reported again by a later launch check. */
    (void)cudaGetLastError();
    int32_t st = err == cudaErrorMemoryAllocation ? AUXTRUNK_E_OUT_OF_MEMORY : AUXTRUNK_E_DEVICE;
    /* The expression goes last: it is the part a long text may lose. */
    return atp_fail(base, st, "%s:%d: %s (%s) in %s", file_name(file), line, cudaGetErrorName(err),
                    cudaGetErrorString(err), expr);
}

/* ------------------------------------------------------------------------- */
/* Memory space                                                              */

static int32_t check_address(int device, const void *p, const char *which, char *why,
                             size_t why_len)
{
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t err = cudaPointerGetAttributes(&a, p);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* the lookup's error is ours; leave none behind */
        snprintf(why, why_len, "%s byte: the CUDA runtime cannot look it up (%s)", which,
                 cudaGetErrorName(err));
        return AUXTRUNK_E_MEMORY_SPACE;
    }
    switch (a.type) {
    case cudaMemoryTypeDevice:
        if (a.device == device)
            return AUXTRUNK_OK;
        snprintf(why, why_len, "%s byte: device memory of device %d, the plugin runs on device %d",
                 which, a.device, device);
        return AUXTRUNK_E_MEMORY_SPACE;
    case cudaMemoryTypeManaged:
        return AUXTRUNK_OK; /* migrates to the device on access */
    case cudaMemoryTypeHost:
        snprintf(why, why_len, "%s byte: page-locked host memory, not device memory", which);
        return AUXTRUNK_E_MEMORY_SPACE;
    default:
        snprintf(why, why_len, "%s byte: host memory unknown to CUDA, not device memory", which);
        return AUXTRUNK_E_MEMORY_SPACE;
    }
}

int32_t atc_space_check(void *ctx, const void *ptr, size_t bytes, char *why, size_t why_len)
{
    int device = *(const int *)ctx;
    /* A call may run while the host captures its stream into a graph. The
     * lookup is a pure query, but a strict capture mode could still refuse it
     * (and invalidate the host's capture): look up in relaxed mode, then put
     * the thread's mode back. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    int exchanged = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    if (!exchanged)
        (void)cudaGetLastError();
    int32_t st = check_address(device, ptr, "first", why, why_len);
    if (st == AUXTRUNK_OK && bytes > 1)
        st = check_address(device, (const char *)ptr + (bytes - 1), "last", why, why_len);
    if (exchanged && cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess)
        (void)cudaGetLastError();
    return st;
}

/* ------------------------------------------------------------------------- */
/* Devices                                                                   */

int32_t atc_device_resolve(int32_t requested, int *device, char *why, size_t why_len)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        snprintf(why, why_len, "no CUDA device (cudaGetDeviceCount: %s, %d devices)",
                 cudaGetErrorName(err), count);
        return AUXTRUNK_E_DEVICE;
    }
    if (requested == -1) {
        err = cudaGetDevice(device);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(why, why_len, "cudaGetDevice: %s", cudaGetErrorName(err));
            return AUXTRUNK_E_DEVICE;
        }
        return AUXTRUNK_OK;
    }
    if (requested < 0 || requested >= count) {
        snprintf(why, why_len, "device %d does not exist (%d devices; -1 = current)",
                 (int)requested, count);
        return AUXTRUNK_E_DEVICE;
    }
    *device = requested;
    return AUXTRUNK_OK;
}

int32_t atc_device_enter(atc_device_guard_t *g, atp_handle_base_t *base, int device)
{
    int32_t st = ATC_CHECK(base, cudaGetDevice(&g->previous));
    if (st != AUXTRUNK_OK)
        return st;
    g->device = device;
    if (g->previous != device)
        st = ATC_CHECK(base, cudaSetDevice(device));
    return st;
}

int32_t atc_device_leave(const atc_device_guard_t *g, atp_handle_base_t *base, int32_t status)
{
    if (g->previous == g->device)
        return status;
    /* After a failure, keep its text as the last error: the first one wins. */
    int32_t st = ATC_CHECK(status == AUXTRUNK_OK ? base : NULL, cudaSetDevice(g->previous));
    return status != AUXTRUNK_OK ? status : st;
}
