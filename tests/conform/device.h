/*
 * device.h — the little of CUDA the conformance runner needs, behind plain C.
 *
 * device_cuda.c implements it with the CUDA runtime, linked statically into
 * the runner (so the runner needs no libcudart at run time, only the driver);
 * device_none.c is the build without CUDA, where every call fails and
 * cfd_available says why. Only child processes call any of this: CUDA and
 * fork do not mix, and the parent never initialises CUDA.
 *
 * Functions return 0 on success and -1 on a CUDA error, whose text
 * cfd_error() gives; streams and graphs are opaque pointers.
 */
#ifndef AUXTRUNK_CONFORM_DEVICE_H
#define AUXTRUNK_CONFORM_DEVICE_H

#include <stddef.h>
#include <stdint.h>

/* 1 if the runner can use a CUDA device (and has made device 0 current with
 * its context initialised); else 0 and the reason: "runner built without
 * CUDA" or "no CUDA device". */
int cfd_available(char *why, size_t why_len);
/* Text of the last failure of a cfd_ call. */
const char *cfd_error(void);

int cfd_malloc(void **p, size_t bytes);
void cfd_free(void *p);
/* Synchronous copies (wait for the device first, so plugin work on any
 * stream is complete). */
int cfd_put(void *dst_dev, const void *src_host, size_t bytes);
int cfd_get(void *dst_host, const void *src_dev, size_t bytes);
/* Waits for all work on the device. */
int cfd_sync(void);
/* Clears and returns the runtime's sticky/last error: 0 if none, -1 with
 * cfd_error() set. */
int cfd_take_error(void);
/* Bytes of device memory in use (total - free), device-wide. */
int cfd_mem_used(long long *bytes);

/* A stream created with cudaStreamNonBlocking (never synchronises with the
 * legacy default stream). */
int cfd_stream_create(void **s);
void cfd_stream_destroy(void *s);
int cfd_stream_sync(void *s);
/* 1 if all work enqueued on s is complete, 0 if not yet, -1 on error. */
int cfd_stream_done(void *s);

/* Blocks the legacy default stream: enqueues a host function on it that
 * waits until cfd_gate_open. Anything that synchronises with the legacy
 * stream (the legacy stream itself, a blocking stream, a device-wide
 * synchronisation) then waits too. */
typedef struct cfd_gate cfd_gate_t;
int cfd_gate_block_legacy(cfd_gate_t **g);
void cfd_gate_open(cfd_gate_t *g);

/* Stream capture (global mode) into a graph, instantiated for replay. */
int cfd_capture_begin(void *s);
int cfd_capture_end(void *s, void **exec);
int cfd_graph_launch(void *exec, void *s);
void cfd_graph_destroy(void *exec);

/* 1 if p is device memory of the current device, 0 if not, -1 on error. */
int cfd_is_device_pointer(const void *p);

#endif
