/*
 * devmem_cuda.c — the devmem interface for CUDA plugins: cudaMalloc'd device
 * memory, one non-blocking stream per devmem (never the legacy default
 * stream, which would serialise with everything), CUDA events for timing and
 * CUDA graphs captured on that stream. Built only when the CUDA toolkit is
 * found; uses the runtime API from C.
 *
 * Every runtime call goes through CUDA_TRY, which turns a failure into the
 * caller's error text with file and line, and clears the (non-sticky) error;
 * where a failure must also clean up (capture_end), the same is done by hand.
 */
#include "devmem.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

typedef struct cuda_impl {
    cudaStream_t stream;
    cudaEvent_t marks[ATH_DEVMEM_MARKS];
} cuda_impl_t;

#define CUDA_TRY(call)                                                       \
    do {                                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess) {                                             \
            (void)cudaGetLastError();                                        \
            return ath_errf(err, "%s:%d: %s: %s", __FILE__, __LINE__, #call, \
                            cudaGetErrorString(e_));                         \
        }                                                                    \
    } while (0)

static void cuda_close(ath_devmem_t *m)
{
    cuda_impl_t *c = m->impl;
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    for (int i = 0; i < ATH_DEVMEM_MARKS; i++)
        if (c->marks[i])
            cudaEventDestroy(c->marks[i]);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
    m->impl = NULL;
}

static int cuda_open_impl(ath_devmem_t *m, int device, ath_err_t *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return ath_errf(err, "no CUDA device (%s)",
                        e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
    }
    if (device >= count)
        return ath_errf(err, "CUDA device %d does not exist (%d present)", device, count);
    if (device >= 0)
        CUDA_TRY(cudaSetDevice(device));
    int current = 0;
    CUDA_TRY(cudaGetDevice(&current));
    m->device = current;

    cuda_impl_t *c = calloc(1, sizeof *c);
    if (!c)
        return ath_errf(err, "out of host memory");
    m->impl = c;
    CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    for (int i = 0; i < ATH_DEVMEM_MARKS; i++)
        CUDA_TRY(cudaEventCreate(&c->marks[i]));
    m->stream = (void *)c->stream;
    return 0;
}

static int cuda_open(ath_devmem_t *m, int device, ath_err_t *err)
{
    if (cuda_open_impl(m, device, err) != 0) {
        cuda_close(m);
        return -1;
    }
    return 0;
}

static int cuda_alloc(ath_devmem_t *m, size_t bytes, void **out, ath_err_t *err)
{
    (void)m;
    void *p = NULL;
    CUDA_TRY(cudaMalloc(&p, bytes ? bytes : 1));
    *out = p;
    return 0;
}

static void cuda_release(ath_devmem_t *m, void *p)
{
    (void)m;
    if (p)
        cudaFree(p);
}

static int cuda_upload(ath_devmem_t *m, void *dst, const void *src, size_t bytes, ath_err_t *err)
{
    cuda_impl_t *c = m->impl;
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cuda_download(ath_devmem_t *m, void *dst, const void *src, size_t bytes, ath_err_t *err)
{
    cuda_impl_t *c = m->impl;
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cuda_sync(ath_devmem_t *m, ath_err_t *err)
{
    cuda_impl_t *c = m->impl;
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cuda_mark(ath_devmem_t *m, int slot, ath_err_t *err)
{
    if (slot < 0 || slot >= ATH_DEVMEM_MARKS)
        return ath_errf(err, "timing mark %d out of range", slot);
    cuda_impl_t *c = m->impl;
    CUDA_TRY(cudaEventRecord(c->marks[slot], c->stream));
    return 0;
}

static int cuda_elapsed_us(ath_devmem_t *m, int a, int b, double *us, ath_err_t *err)
{
    if (a < 0 || b < 0 || a >= ATH_DEVMEM_MARKS || b >= ATH_DEVMEM_MARKS)
        return ath_errf(err, "timing mark out of range");
    cuda_impl_t *c = m->impl;
    float ms = 0.0f;
    CUDA_TRY(cudaEventSynchronize(c->marks[b]));
    CUDA_TRY(cudaEventElapsedTime(&ms, c->marks[a], c->marks[b]));
    *us = (double)ms * 1e3;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Graphs                                                                    */
/*
 * ThreadLocal capture: a call from this thread that cannot be captured (an
 * allocation, a synchronisation, a launch on the legacy default stream)
 * fails and invalidates the capture, so a plugin that breaks the promise of
 * AUXTRUNK_CAP_GRAPH_CAPTURE is caught at capture_end, not at replay. Other
 * threads are not affected.
 */

static int cuda_capture_begin(ath_devmem_t *m, ath_err_t *err)
{
    cuda_impl_t *c = m->impl;
    CUDA_TRY(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    return 0;
}

static void cuda_capture_abort(ath_devmem_t *m)
{
    cuda_impl_t *c = m->impl;
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(c->stream, &st);
    if (e != cudaSuccess || st != cudaStreamCaptureStatusNone) {
        /* Active or invalidated: either way only EndCapture closes it. */
        cudaGraph_t g = NULL;
        if (cudaStreamEndCapture(c->stream, &g) == cudaSuccess && g)
            cudaGraphDestroy(g);
    }
    (void)cudaGetLastError();
}

static int cuda_capture_end(ath_devmem_t *m, void **graph, ath_err_t *err)
{
    cuda_impl_t *c = m->impl;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    *graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (g)
            cudaGraphDestroy(g);
        cuda_capture_abort(m); /* in case EndCapture left it open */
        return ath_errf(err, "CUDA graph capture failed: %s%s", cudaGetErrorString(e),
                        e == cudaErrorStreamCaptureInvalidated
                            ? " (a call during the capture could not be captured: an "
                              "allocation, a synchronisation or another stream)"
                            : "");
    }
    e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g); /* the executable graph is independent of it */
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ath_errf(err, "%s:%d: cudaGraphInstantiate: %s", __FILE__, __LINE__,
                        cudaGetErrorString(e));
    }
    /* Uploaded now, so the first replay costs what every later one does. */
    e = cudaGraphUpload(x, c->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cudaGraphExecDestroy(x);
        return ath_errf(err, "%s:%d: cudaGraphUpload: %s", __FILE__, __LINE__,
                        cudaGetErrorString(e));
    }
    *graph = (void *)x;
    return 0;
}

static int cuda_replay(ath_devmem_t *m, void *graph, ath_err_t *err)
{
    cuda_impl_t *c = m->impl;
    CUDA_TRY(cudaGraphLaunch((cudaGraphExec_t)graph, c->stream));
    return 0;
}

static void cuda_graph_free(ath_devmem_t *m, void *graph)
{
    (void)m;
    if (graph)
        cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

const ath_devmem_ops_t ath_devmem_cuda_ops = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .upload = cuda_upload,
    .download = cuda_download,
    .sync = cuda_sync,
    .mark = cuda_mark,
    .elapsed_us = cuda_elapsed_us,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .capture_abort = cuda_capture_abort,
    .replay = cuda_replay,
    .graph_free = cuda_graph_free,
};
