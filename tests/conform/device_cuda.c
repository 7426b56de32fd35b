/* device_cuda.c — device.h on the CUDA runtime (linked statically). */
#define _POSIX_C_SOURCE 200809L
#include "device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

static char cfd_err_text[256];

/* Records a failed call's text and returns -1; 0 on success. */
static int cfd_check_(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(cfd_err_text, sizeof cfd_err_text, "%s: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return -1;
}
#define CFD_CHECK(call) cfd_check_((call), #call)

const char *cfd_error(void) { return cfd_err_text; }

int cfd_available(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        snprintf(why, why_len, "no CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        cudaGetLastError();
        return 0;
    }
    if (CFD_CHECK(cudaSetDevice(0)) || CFD_CHECK(cudaFree(NULL))) {
        snprintf(why, why_len, "no CUDA device (%s)", cfd_err_text);
        return 0;
    }
    return 1;
}

int cfd_malloc(void **p, size_t bytes) { return CFD_CHECK(cudaMalloc(p, bytes ? bytes : 1)); }

void cfd_free(void *p) { cudaFree(p); }

int cfd_put(void *dst, const void *src, size_t bytes)
{
    if (CFD_CHECK(cudaDeviceSynchronize()))
        return -1;
    return CFD_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

int cfd_get(void *dst, const void *src, size_t bytes)
{
    if (CFD_CHECK(cudaDeviceSynchronize()))
        return -1;
    return CFD_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

int cfd_sync(void) { return CFD_CHECK(cudaDeviceSynchronize()); }

int cfd_take_error(void) { return CFD_CHECK(cudaGetLastError()); }

int cfd_mem_used(long long *bytes)
{
    size_t free_b = 0, total_b = 0;
    if (CFD_CHECK(cudaMemGetInfo(&free_b, &total_b)))
        return -1;
    *bytes = (long long)(total_b - free_b);
    return 0;
}

int cfd_stream_create(void **s)
{
    cudaStream_t st = NULL;
    if (CFD_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)))
        return -1;
    *s = st;
    return 0;
}

void cfd_stream_destroy(void *s) { cudaStreamDestroy((cudaStream_t)s); }

int cfd_stream_sync(void *s) { return CFD_CHECK(cudaStreamSynchronize((cudaStream_t)s)); }

int cfd_stream_done(void *s)
{
    cudaError_t e = cudaStreamQuery((cudaStream_t)s);
    if (e == cudaSuccess)
        return 1;
    if (e == cudaErrorNotReady)
        return 0;
    return CFD_CHECK(e);
}

/* --- the gate ------------------------------------------------------------ */

struct cfd_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
};

static void CUDART_CB cfd_gate_wait_(void *arg)
{
    cfd_gate_t *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

int cfd_gate_block_legacy(cfd_gate_t **out)
{
    /* Never freed: the host function may still read it after cfd_gate_open,
     * and a check's process is short-lived. */
    cfd_gate_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(cfd_err_text, sizeof cfd_err_text, "out of host memory");
        return -1;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (CFD_CHECK(cudaLaunchHostFunc(cudaStreamLegacy, cfd_gate_wait_, g)))
        return -1;
    *out = g;
    return 0;
}

void cfd_gate_open(cfd_gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* --- graphs ---------------------------------------------------------------- */

int cfd_capture_begin(void *s)
{
    return CFD_CHECK(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeGlobal));
}

int cfd_capture_end(void *s, void **exec)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t ge = NULL;
    if (CFD_CHECK(cudaStreamEndCapture((cudaStream_t)s, &graph)))
        return -1;
    int rc = CFD_CHECK(cudaGraphInstantiate(&ge, graph, 0));
    cudaGraphDestroy(graph);
    if (rc)
        return -1;
    *exec = ge;
    return 0;
}

int cfd_graph_launch(void *exec, void *s)
{
    return CFD_CHECK(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)s));
}

void cfd_graph_destroy(void *exec) { cudaGraphExecDestroy((cudaGraphExec_t)exec); }

int cfd_is_device_pointer(const void *p)
{
    struct cudaPointerAttributes a;
    int dev = -1;
    if (CFD_CHECK(cudaGetDevice(&dev)) || CFD_CHECK(cudaPointerGetAttributes(&a, p)))
        return -1;
    return a.type == cudaMemoryTypeDevice && a.device == dev;
}
