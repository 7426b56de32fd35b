/*
 * devmem.h — memory and timing in a plugin's memory space, behind one small
 * interface: host memory (devmem_host.c) or CUDA device memory with a
 * non-blocking stream and events (devmem_cuda.c, built only when the CUDA
 * toolkit is found). The trainer and the benchmark never call CUDA directly.
 *
 * Copies are synchronous for the caller: upload/download return when the
 * data has arrived (for CUDA: stream-ordered after every call already
 * enqueued, then the stream is waited for).
 *
 * Timing marks are recorded in stream order (CUDA events) or taken from the
 * monotonic clock (host plugins, whose calls are synchronous).
 *
 * CUDA device memory also offers graphs: what is enqueued on the stream
 * between capture_begin and capture_end becomes one graph, replayed as a
 * unit (the benchmark times a whole step that way).
 */
#ifndef ATH_DEVMEM_H
#define ATH_DEVMEM_H

#include <stddef.h>

#include "loader.h"
#include "util.h"

#define ATH_DEVMEM_MARKS 10

typedef struct ath_devmem ath_devmem_t;

typedef struct ath_devmem_ops {
    const char *name; /* "host" or "cuda" */
    int (*open)(ath_devmem_t *m, int device, ath_err_t *err);
    void (*close)(ath_devmem_t *m);
    int (*alloc)(ath_devmem_t *m, size_t bytes, void **out, ath_err_t *err);
    void (*release)(ath_devmem_t *m, void *p);
    int (*upload)(ath_devmem_t *m, void *dst, const void *src, size_t bytes, ath_err_t *err);
    int (*download)(ath_devmem_t *m, void *dst, const void *src, size_t bytes, ath_err_t *err);
    /* Waits until everything enqueued on the stream has finished. */
    int (*sync)(ath_devmem_t *m, ath_err_t *err);
    /* Records timing mark slot (0 .. ATH_DEVMEM_MARKS-1) in stream order. */
    int (*mark)(ath_devmem_t *m, int slot, ath_err_t *err);
    /* Microseconds from mark a to mark b; waits for b. */
    int (*elapsed_us)(ath_devmem_t *m, int a, int b, double *us, ath_err_t *err);

    /* CUDA graphs of work enqueued on the stream. Optional: NULL where the
     * memory space has none (host memory); all five or none are set. */
    /* Starts recording instead of running what is enqueued on the stream
     * (cudaStreamCaptureModeThreadLocal: until the capture ends, this thread
     * may make no call that is unsafe during capture, such as an allocation
     * or a synchronisation; such a call fails and invalidates the capture). */
    int (*capture_begin)(ath_devmem_t *m, ath_err_t *err);
    /* Ends the capture and instantiates what it recorded: *graph is an opaque
     * executable graph for replay and graph_free. The capture is over also
     * when this fails (invalidated by an unsafe call, say; *graph is NULL). */
    int (*capture_end)(ath_devmem_t *m, void **graph, ath_err_t *err);
    /* Ends the capture, if one is open, and discards what it recorded: for a
     * caller whose own enqueueing failed. The stream is left not capturing. */
    void (*capture_abort)(ath_devmem_t *m);
    /* Enqueues one run of graph on the stream. */
    int (*replay)(ath_devmem_t *m, void *graph, ath_err_t *err);
    /* Frees a graph from capture_end (NULL is allowed); a replay still in
     * flight completes first. */
    void (*graph_free)(ath_devmem_t *m, void *graph);
} ath_devmem_ops_t;

struct ath_devmem {
    const ath_devmem_ops_t *ops;
    void *stream; /* what plugin calls receive: a cudaStream_t, or NULL */
    int device;   /* CUDA device ordinal in use, -1 for host memory */
    void *impl;   /* the implementation's private state */
};

/* Opens the memory space a plugin uses. device: CUDA ordinal, or -1 for the
 * current one; ignored for host memory. Fails with a clear message when the
 * host was built without CUDA or no CUDA device is present. */
int ath_devmem_open(ath_space_t space, int device, ath_devmem_t **out, ath_err_t *err);
void ath_devmem_close(ath_devmem_t *m);

/* The implementations (devmem_cuda_ops exists only in CUDA builds). */
extern const ath_devmem_ops_t ath_devmem_host_ops;
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
extern const ath_devmem_ops_t ath_devmem_cuda_ops;
#endif

#endif
