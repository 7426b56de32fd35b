/*
 * dist_nccl.c — a data-parallel worker's NCCL communicator (dist.h). The
 * communicator is non-blocking (ncclConfig_t.blocking = 0), so that every
 * NCCL call and every wait is a poll of ncclCommGetAsyncError with a
 * deadline: a rank that fails or hangs ends the run on every rank with a
 * message, never a silent hang.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "dist.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A worker waits this long for the id file when no timeout is set. */
#define ID_WAIT_DEFAULT_S 300.0

int ath_dist_available(void) { return 1; }

static void nap(void)
{
    struct timespec ts = {0, 100 * 1000};
    nanosleep(&ts, NULL);
}

static double limit_of(const ath_dist_t *d) { return d->timeout_s > 0 ? d->timeout_s : 1e30; }

static int fail(ath_dist_t *d, ath_err_t *err, const char *fmt, const char *what)
{
    if (d->comm && !d->failed)
        ncclCommAbort((ncclComm_t)d->comm);
    d->failed = 1;
    return ath_errf(err, fmt, d->rank, d->world, what);
}

/* Polls the communicator until its last call is through (not in progress). */
static int settle(ath_dist_t *d, ncclResult_t r, const char *what, ath_err_t *err)
{
    const double t0 = ath_now_s();
    while (r == ncclInProgress) {
        if (ath_now_s() - t0 > limit_of(d))
            return fail(d, err, "rank %d of %d: %s made no progress: another rank failed or hung",
                        what);
        nap();
        if (ncclCommGetAsyncError((ncclComm_t)d->comm, &r) != ncclSuccess)
            r = ncclInternalError;
    }
    if (r != ncclSuccess) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s: %s (%s)", what, ncclGetErrorString(r),
                 ncclGetLastError((ncclComm_t)d->comm));
        return fail(d, err, "rank %d of %d: NCCL %s; ending the run", msg);
    }
    return 0;
}

/* Rank 0: the id into the file, atomically (a reader sees all of it or
 * nothing). The file must not exist: an old one is another run's id. */
static int write_id(const char *path, const ncclUniqueId *id, ath_err_t *err)
{
    if (access(path, F_OK) == 0)
        return ath_errf(err, "%s exists (left by an earlier run?): remove it and start again",
                        path);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return ath_errf(err, "cannot create %s: %s", tmp, strerror(errno));
    const ssize_t w = write(fd, id, sizeof *id);
    const int ok = w == (ssize_t)sizeof *id && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return ath_errf(err, "cannot write %s: %s", path, strerror(errno));
    }
    return 0;
}

static int read_id(const char *path, ncclUniqueId *id, double limit_s, ath_err_t *err)
{
    const double t0 = ath_now_s();
    for (;;) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            const ssize_t got = read(fd, id, sizeof *id);
            close(fd);
            if (got == (ssize_t)sizeof *id)
                return 0;
            return ath_errf(err, "%s: %zd bytes, not an NCCL unique id", path, got);
        }
        if (ath_now_s() - t0 > limit_s)
            return ath_errf(err, "no NCCL id in %s after %.0f s: did rank 0 start?", path, limit_s);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int ath_dist_open(ath_dist_t **out, const ath_dist_env_t *env, int device, double timeout_s,
                  ath_err_t *err)
{
    *out = NULL;
    ath_dist_t *d = calloc(1, sizeof *d);
    if (!d)
        return ath_errf(err, "out of host memory");
    d->rank = env->rank;
    d->world = env->world;
    d->device = device;
    d->timeout_s = timeout_s;
    cudaError_t ce = cudaSetDevice(device);
    if (ce != cudaSuccess) {
        free(d);
        return ath_errf(err, "rank %d: CUDA device %d: %s", env->rank, device,
                        cudaGetErrorString(ce));
    }
    ncclUniqueId id;
    int rc = 0;
    if (d->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            rc = ath_errf(err, "rank 0: ncclGetUniqueId: %s", ncclGetErrorString(r));
        else
            rc = write_id(env->id_file, &id, err);
    } else {
        rc = read_id(env->id_file, &id, timeout_s > 0 ? timeout_s : ID_WAIT_DEFAULT_S, err);
    }
    if (rc != 0) {
        free(d);
        return -1;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, d->world, id, d->rank, &cfg);
    d->comm = comm;
    if (!comm) {
        free(d);
        return ath_errf(err, "rank %d of %d: ncclCommInitRankConfig: %s", env->rank, env->world,
                        ncclGetErrorString(r));
    }
    if (settle(d, r, "joining the communicator", err) != 0) {
        ath_dist_close(d);
        return -1;
    }
    /* Every rank has joined, so every rank has read the id. */
    if (d->rank == 0)
        unlink(env->id_file);
    *out = d;
    return 0;
}

int ath_dist_allgather(ath_dist_t *d, const float *send, float *recv, size_t count, void *stream,
                       ath_err_t *err)
{
    if (d->failed)
        return ath_errf(err, "rank %d of %d: the communicator was aborted", d->rank, d->world);
    ncclResult_t r =
        ncclAllGather(send, recv, count, ncclFloat, (ncclComm_t)d->comm, (cudaStream_t)stream);
    return settle(d, r, "ncclAllGather", err);
}

/* Waits for stream as ath_dist_wait does, extra_s longer; what names the
 * work in messages. */
static int wait_for(ath_dist_t *d, void *stream, const char *what, double extra_s, ath_err_t *err)
{
    const double t0 = ath_now_s();
    for (;;) {
        cudaError_t q = cudaStreamQuery((cudaStream_t)stream);
        if (q == cudaSuccess)
            return 0;
        if (q != cudaErrorNotReady)
            return fail(d, err, "rank %d of %d: the device failed (%s); ending the run",
                        cudaGetErrorString(q));
        ncclResult_t r = ncclSuccess;
        if (ncclCommGetAsyncError((ncclComm_t)d->comm, &r) != ncclSuccess || r != ncclSuccess) {
            if (r != ncclInProgress) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s (%s)", ncclGetErrorString(r),
                         ncclGetLastError((ncclComm_t)d->comm));
                return fail(d, err, "rank %d of %d: NCCL failed: %s; ending the run", msg);
            }
        }
        if (ath_now_s() - t0 > limit_of(d) + extra_s) {
            char lim[32];
            snprintf(lim, sizeof lim, "%.0f s", d->timeout_s + extra_s);
            char msg[128];
            snprintf(msg, sizeof msg, "%s made no progress in %s", what, lim);
            return fail(d, err, "rank %d of %d: %s: another rank failed or hung; ending the run",
                        msg);
        }
        nap();
    }
}

int ath_dist_wait(ath_dist_t *d, void *stream, ath_err_t *err)
{
    return wait_for(d, stream, "the step's exchange", 0.0, err);
}

/* ------------------------------------------------------------------------- */
/* Control messages                                                          */

/* The control stream and a device buffer of at least bytes. */
static int ctl_ready(ath_dist_t *d, size_t bytes, ath_err_t *err)
{
    if (d->failed)
        return ath_errf(err, "rank %d of %d: the communicator was aborted", d->rank, d->world);
    cudaError_t ce = cudaSuccess;
    if (!d->ctl_stream) {
        cudaStream_t st = NULL;
        ce = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        d->ctl_stream = st;
    }
    if (ce == cudaSuccess && bytes > d->ctl_bytes) {
        cudaFree(d->ctl_buf);
        d->ctl_buf = NULL;
        d->ctl_bytes = 0;
        ce = cudaMalloc(&d->ctl_buf, bytes);
        if (ce == cudaSuccess)
            d->ctl_bytes = bytes;
    }
    if (ce != cudaSuccess)
        return ath_errf(err, "rank %d of %d: device memory for the control messages: %s", d->rank,
                        d->world, cudaGetErrorString(ce));
    return 0;
}

/* The result into host memory, once the stream is idle (a copy to pageable
 * memory would otherwise block without the timeout). */
static int ctl_result(ath_dist_t *d, void *out, size_t n, const char *what, double extra_s,
                      ath_err_t *err)
{
    if (wait_for(d, d->ctl_stream, what, extra_s, err) != 0)
        return -1;
    cudaError_t ce = cudaMemcpy(out, d->ctl_buf, n, cudaMemcpyDeviceToHost);
    if (ce != cudaSuccess)
        return fail(d, err, "rank %d of %d: reading a control message: %s", cudaGetErrorString(ce));
    return 0;
}

int ath_dist_broadcast(ath_dist_t *d, void *buf, size_t n, ath_err_t *err)
{
    if (ctl_ready(d, n, err) != 0)
        return -1;
    cudaStream_t st = (cudaStream_t)d->ctl_stream;
    if (d->rank == 0) {
        cudaError_t ce = cudaMemcpyAsync(d->ctl_buf, buf, n, cudaMemcpyHostToDevice, st);
        if (ce != cudaSuccess)
            return fail(d, err, "rank %d of %d: a control message to the device: %s",
                        cudaGetErrorString(ce));
    }
    ncclResult_t r =
        ncclBroadcast(d->ctl_buf, d->ctl_buf, n, ncclUint8, 0, (ncclComm_t)d->comm, st);
    if (settle(d, r, "ncclBroadcast", err) != 0)
        return -1;
    return ctl_result(d, buf, n, "the hot-swap decision's broadcast", d->decide_s, err);
}

int ath_dist_gather(ath_dist_t *d, const void *mine, void *all, size_t n, ath_err_t *err)
{
    const size_t bytes = (size_t)d->world * n;
    if (ctl_ready(d, bytes, err) != 0)
        return -1;
    cudaStream_t st = (cudaStream_t)d->ctl_stream;
    /* In place: this rank's part of the result is its send buffer. */
    char *part = (char *)d->ctl_buf + (size_t)d->rank * n;
    cudaError_t ce = cudaMemcpyAsync(part, mine, n, cudaMemcpyHostToDevice, st);
    if (ce != cudaSuccess)
        return fail(d, err, "rank %d of %d: a control message to the device: %s",
                    cudaGetErrorString(ce));
    ncclResult_t r = ncclAllGather(part, d->ctl_buf, n, ncclUint8, (ncclComm_t)d->comm, st);
    if (settle(d, r, "ncclAllGather", err) != 0)
        return -1;
    return ctl_result(d, all, bytes, "the hot-swap answers' gather", 0.0, err);
}

void ath_dist_close(ath_dist_t *d)
{
    if (!d)
        return;
    if (d->ctl_stream && !d->failed)
        cudaStreamSynchronize((cudaStream_t)d->ctl_stream);
    cudaFree(d->ctl_buf);
    if (d->ctl_stream)
        cudaStreamDestroy((cudaStream_t)d->ctl_stream);
    ncclComm_t comm = (ncclComm_t)d->comm;
    if (comm && !d->failed) {
        ath_err_t err = {{0}};
        if (settle(d, ncclCommFinalize(comm), "finalising the communicator", &err) == 0)
            ncclCommDestroy(comm);
    }
    free(d);
}
