/*
 * dist.h — data-parallel training over several GPUs: one worker process per
 * GPU, each with its own plugin handle on its own device, joined by NCCL.
 *
 * Each step every rank draws its contiguous shard of the global batch,
 * runs forward, loss and backward on it, and then the ranks exchange their
 * gradients and loss sums with ncclAllGather (never ncclAllReduce, whose
 * order is NCCL's) and every rank combines them in rank order with
 * combine.h. Every rank then holds the same gradients and loss, and runs the
 * same verdict and Adam (engine_cuda.c). combine.h says when the run equals
 * the one-GPU run on the full batch.
 *
 * Processes: `auxtrunk-host train --gpus N` without the variables below is
 * the launcher (ath_dist_launch): it starts N workers of the same program on
 * this host, with the variables set. A worker is the same command with the
 * variables set, by the launcher or by an external one (one per GPU, on any
 * number of hosts):
 *   AUXTRUNK_RANK         this worker's rank, 0 .. N-1
 *   AUXTRUNK_WORLD_SIZE   N (must equal --gpus)
 *   AUXTRUNK_LOCAL_RANK   the GPU on this host (default: AUXTRUNK_RANK),
 *                         added to --device
 *   AUXTRUNK_NCCL_ID_FILE the file through which rank 0 hands the NCCL
 *                         unique id to the others (in a directory every
 *                         host sees; it must not exist when the run starts,
 *                         and rank 0 removes it once every rank has joined)
 * NCCL_NVLS_ENABLE is set to 0 for the workers unless already set.
 *
 * Hot swap: rank 0 decides, every rank applies at the same step boundary,
 * through ath_dist_broadcast and ath_dist_gather (dist_swap.h).
 */
#ifndef ATH_DIST_H
#define ATH_DIST_H

#include <stddef.h>

#include "util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATH_DIST_ENV_RANK "AUXTRUNK_RANK"
#define ATH_DIST_ENV_WORLD "AUXTRUNK_WORLD_SIZE"
#define ATH_DIST_ENV_LOCAL_RANK "AUXTRUNK_LOCAL_RANK"
#define ATH_DIST_ENV_ID_FILE "AUXTRUNK_NCCL_ID_FILE"
#define ATH_DIST_MAX_RANKS 1024

typedef struct ath_dist_env {
    int rank, world, local_rank;
    const char *id_file;
} ath_dist_env_t;

/* Reads the worker variables: 1 when this process is a worker (*env set),
 * 0 when AUXTRUNK_RANK is not set, -1 when they are incomplete or invalid. */
int ath_dist_env_read(ath_dist_env_t *env, ath_err_t *err);

/* The launcher: starts `gpus` workers, argv[0..argc) re-executed with the
 * variables set, and waits for them. When one fails, the others are sent
 * SIGTERM (SIGKILL after a grace period). SIGTERM to the launcher is passed
 * on. Returns the exit code of the first worker that failed, else 0. */
int ath_dist_launch(int gpus, int argc, char **argv);

/* train --gpus N (o->gpus > 0): in the launcher, runs the workers and
 * returns 1 with *code their result; in a worker, sets o up for its rank
 * (*env, its device; rank > 0 writes no files and prints only errors) and
 * returns 0; on an error, prints it and returns 1 with *code set. */
struct ath_train_opts;
int ath_dist_train_prepare(struct ath_train_opts *o, ath_dist_env_t *env, int argc, char **argv,
                           int *code);

/* 1 when this build has NCCL. */
int ath_dist_available(void);

/* A worker's communicator (dist_nccl.c). */
typedef struct ath_dist {
    int rank, world;
    int device;
    double timeout_s; /* no progress for this long: a rank failed or hung */
    int failed;       /* the communicator was aborted */
    void *comm;       /* ncclComm_t */
    /* Control messages (ath_dist_broadcast, ath_dist_gather). */
    void *ctl_stream; /* cudaStream_t, made on first use */
    void *ctl_buf;    /* device [ctl_bytes] */
    size_t ctl_bytes;
    double decide_s; /* a decision's broadcast may take this much longer than
                        timeout_s: rank 0 may be vetting candidates meanwhile */
} ath_dist_t;

/* Joins the run: the unique id through env->id_file, the communicator on
 * CUDA device `device`. Waits at most timeout_s for the other ranks. */
int ath_dist_open(ath_dist_t **out, const ath_dist_env_t *env, int device, double timeout_s,
                  ath_err_t *err);

/* Enqueues on `stream`: recv [world · count] = every rank's send [count],
 * in rank order. */
int ath_dist_allgather(ath_dist_t *d, const float *send, float *recv, size_t count, void *stream,
                       ath_err_t *err);

/* Waits for `stream`, watching the communicator: an NCCL error, or no
 * completion within timeout_s, aborts the communicator (the other ranks'
 * collectives then fail too) and returns -1 with the reason. */
int ath_dist_wait(ath_dist_t *d, void *stream, ath_err_t *err);

/* Control messages between steps (the hot swap's records, dist_swap.h), in
 * host memory: collective, on the communicator's own stream once every
 * step enqueued has completed (the caller synced), and waited for with
 * ath_dist_wait's polling and timeout. broadcast: rank 0's n bytes of buf
 * into every rank's buf; gather: every rank's n bytes of mine into all
 * [world · n], in rank order. */
int ath_dist_broadcast(ath_dist_t *d, void *buf, size_t n, ath_err_t *err);
int ath_dist_gather(ath_dist_t *d, const void *mine, void *all, size_t n, ath_err_t *err);

/* The link of dist_swap.h over d's broadcast and gather (dist.c). */
struct ath_dist_link;
void ath_dist_link_of(ath_dist_t *d, struct ath_dist_link *link);

/* Finalises the communicator (aborts it after a failure). Safe on NULL. */
void ath_dist_close(ath_dist_t *d);

/* The ordered combine on the device (dist_cuda.cu, combine.h): out[i] =
 * the canon's tree over gathered[r · count + i], r = 0 .. ranks-1
 * (gathered is scratch). Returns 0 or a cudaError_t value. */
int ath_cuda_combine(void *stream, float *gathered, size_t count, int ranks, float *out);

#ifdef __cplusplus
}
#endif

#endif
