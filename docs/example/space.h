/*
 * space.h — the example's buffers and stream in a plugin's memory space: host
 * memory (MEM_HOST plugins), or CUDA device memory and a non-blocking stream
 * (MEM_CUDA plugins, in a build with EXAMPLE_WITH_CUDA). A trainer has its own
 * allocator and stream; this file only keeps example.c about the plugin.
 * space_open returns NULL or what failed; the others 0 or a pointer on success.
 */
#ifndef EXAMPLE_SPACE_H
#define EXAMPLE_SPACE_H

#include <stdlib.h>
#include <string.h>
#ifdef EXAMPLE_WITH_CUDA
#include <cuda_runtime.h>
#endif

/* The trainer's own stream: non-blocking, so it never waits on the legacy
 * default stream. Host plugins ignore the stream (*stream stays NULL). */
static const char *space_open(int cuda, void **stream)
{
    *stream = NULL;
    if (!cuda)
        return NULL;
#ifdef EXAMPLE_WITH_CUDA
    cudaStream_t s;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return cudaGetErrorString(e);
    *stream = s;
    return NULL;
#else
    return "this build has no CUDA (EXAMPLE_WITH_CUDA), which a MEM_CUDA plugin needs";
#endif
}

/* n floats in the space, copied from init. */
static float *space_alloc(int cuda, const float *init, size_t n)
{
    void *p = NULL;
#ifdef EXAMPLE_WITH_CUDA
    if (cuda)
        return cudaMalloc(&p, n * sizeof *init) == cudaSuccess &&
                       cudaMemcpy(p, init, n * sizeof *init, cudaMemcpyHostToDevice) == cudaSuccess
                   ? (float *)p
                   : NULL;
#endif
    if (!cuda && (p = malloc(n * sizeof *init)) != NULL)
        memcpy(p, init, n * sizeof *init);
    return (float *)p;
}

/* Waits for the work enqueued on stream, then copies n floats to the host. */
static int space_get(int cuda, void *stream, float *dst, const float *src, size_t n)
{
#ifdef EXAMPLE_WITH_CUDA
    if (cuda)
        return cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess ||
               cudaMemcpy(dst, src, n * sizeof *dst, cudaMemcpyDeviceToHost) != cudaSuccess;
#endif
    (void)stream;
    memcpy(dst, src, n * sizeof *dst);
    return cuda;
}

static void space_close(int cuda, void *stream, float *p)
{
#ifdef EXAMPLE_WITH_CUDA
    if (cuda) {
        cudaFree(p);
        if (stream)
            cudaStreamDestroy((cudaStream_t)stream);
        return;
    }
#endif
    (void)cuda, (void)stream;
    free(p);
}

#endif
