/*
 * swap.h — hot-swapping the plugin of a running trainer, safely.
 *
 * A swap replaces the trainer's live ath_trunk_t between two training steps.
 * A trunk holds no training state (trunk.h): the swapper is given the
 * current parameters in host memory for the canary, and the trainer moves
 * its state to the new version's memory space afterwards (train.c, engine.h).
 * A swap across memory spaces (cpu <-> cuda) is therefore the same operation
 * as any other here.
 *
 * How a candidate file becomes the live version (ath_swap_try):
 *   1. security: the file and its directory must not be writable by group or
 *      others and must be owned by this user or root;
 *   2. a private copy is made (mode 0600 in a 0700 directory, SHA-256 taken
 *      while copying): dlopen caches by path and the original may be
 *      replaced again, so everything after this step reads the copy;
 *      with an allow-list, the digest must be on it;
 *   3. the live version computes the canary reference: forward and backward
 *      on a fixed probe batch (ATH_CANARY_PROBE_BATCH samples, seeded) with the
 *      current parameters;
 *   4. vetting in a child process (fork, or fork + exec of a vetting program
 *      once this process holds a CUDA context): it loads the copy, negotiates,
 *      initialises with the same config and runs the canary against the
 *      reference; it reports its stage and verdict through a pipe. A crash is
 *      seen as a signal, a hang as the timeout (the child is killed);
 *   5. only then the parent loads the copy, initialises it, runs the canary
 *      again, and switches. The canary passes when both versions claim
 *      AUXTRUNK_CAP_EXACT and every output and gradient is bit-identical, or,
 *      otherwise, when every value is finite and each tensor's largest error
 *      is at most ATH_CANARY_TOL_REL times its largest reference magnitude.
 * The previous version stays loaded for ATH_SWAP_ROLLBACK_STEPS steps
 * (probation); if the new one fails in that window (a non-OK status or a
 * non-finite loss) the trainer rolls back to it. After the window it is
 * destroyed and its library closed, with its device idle.
 *
 * Triggers: --swap-at STEP:PATH entries, the plugin directory changing
 * (inotify; polling where inotify is unavailable or when asked), and SIGHUP
 * (re-read the plugin directory now). Every outcome is one "swap:" line on
 * the log with both versions, the reason and the time it took.
 *
 * CUDA graphs: the trainer captures none. A trainer that does must re-capture
 * its graphs after a swap or a rollback, before the next replay: a graph holds
 * kernels of the library that was live when it was captured, and that library
 * is closed when its probation ends.
 *
 * Not done here: swapping to a different topology (the config is the same
 * for every version), or watching more than one file.
 */
#ifndef ATH_SWAP_H
#define ATH_SWAP_H

#include <stdint.h>
#include <stdio.h>

#include "auxtrunk.h"
#include "trunk.h"
#include "util.h"
#include "vet.h"

#define ATH_SWAP_MAX_AT 16
#define ATH_SWAP_ROLLBACK_STEPS 50 /* default probation window */

/* One --swap-at entry: swap to path after step `step` has completed. */
typedef struct ath_swap_at {
    uint64_t step;
    const char *path;
} ath_swap_at_t;

typedef struct ath_swap_opts {
    int watch;                         /* watch the live plugin's file for replacement */
    int poll_ms;                       /* > 0: poll every poll_ms instead of inotify */
    double vet_timeout_s;              /* 0: ATH_VET_TIMEOUT_S */
    uint64_t rollback_steps;           /* 0: ATH_SWAP_ROLLBACK_STEPS */
    const char *sha256_file;           /* allow-list (sha256sum format), or NULL */
    ath_swap_at_t at[ATH_SWAP_MAX_AT]; /* in ascending step order */
    int n_at;
    const char *vet_exe; /* program run as "<vet_exe> --swap-vet ..." (vet.h) once a CUDA
                                context exists here; NULL: fork only */
    int vet_exec_always; /* exec vet_exe for every candidate (tests of that path) */
    int cuda_only;       /* refuse a candidate that is not a CUDA plugin (data parallel: the
                            ranks exchange device buffers) */
    FILE *log;           /* where "swap:" lines go; NULL: stdout */
} ath_swap_opts_t;

/* Parses "STEP:PATH" into at. Returns 0, or -1 with a message. */
int ath_swap_parse_at(const char *text, ath_swap_at_t *at, ath_err_t *err);

/* What the last ath_swap_try (or rollback) did. */
typedef enum ath_swap_outcome {
    ATH_SWAP_TAKEN = 0,
    ATH_SWAP_UNCHANGED, /* the file is the running version: nothing to do */
    ATH_SWAP_REFUSED,
    ATH_SWAP_ROLLED_BACK,
} ath_swap_outcome_t;

typedef struct ath_swap_result {
    ath_swap_outcome_t outcome;
    const char *reason; /* refusal reason name, e.g. "crashed" ("" when taken) */
    char msg[1024];     /* the detail of the log line */
    double ms;          /* how long it took */
} ath_swap_result_t;

typedef struct ath_swap ath_swap_t;

/* A swapper for one trainer: reads the allow-list, makes the private
 * directory, draws the probe batch and installs the SIGHUP handler.
 * config is the live topology (device -1 or the CUDA ordinal). */
int ath_swap_create(ath_swap_t **out, const ath_swap_opts_t *o, const auxtrunk_config_t *config,
                    int device, ath_err_t *err);

/* Opens the first version through everything a later one goes through
 * (ath_vet_open: checks, private copy, allow-list, the vetting child within
 * the timeout; no running version to compare with) into *live, and starts
 * watching its file if asked. Returns a loader status like ath_trunk_open;
 * a security, digest, crash, hang or probe refusal is ATH_LOAD_NOT_LOADABLE
 * with its message. */
ath_load_status_t ath_swap_open(ath_swap_t *s, const char *dir_or_file, ath_trunk_t *live,
                                ath_err_t *err);

/* Between steps (after `step` has completed): runs due --swap-at entries, a
 * pending SIGHUP and directory changes. Returns the number of swaps taken. */
int ath_swap_poll(ath_swap_t *s, uint64_t step, const float *params, ath_trunk_t *live);

/* ath_swap_poll one swap at a time, for a data-parallel run whose ranks
 * apply each swap rank 0 takes (dist_swap.h): serves the triggers in
 * ath_swap_poll's order until one swap is taken and returns 1; called again
 * after the same step, it goes on with the triggers left; 0 when none is. */
int ath_swap_poll_one(ath_swap_t *s, uint64_t step, const float *params, ath_trunk_t *live);

/* Whether ath_swap_poll after `step` has anything to try (a due --swap-at
 * entry, a SIGHUP, a change of the watched file, which is remembered for that
 * poll), so that a device-resident trainer syncs and copies its parameters to
 * the host only then. */
int ath_swap_due(ath_swap_t *s, uint64_t step);

/* One swap attempt to the file at path (a directory means its
 * libauxtrunk.so). trigger names the cause in the log. Returns the outcome;
 * details in *res if non-NULL. */
ath_swap_outcome_t ath_swap_try(ath_swap_t *s, const char *path, const char *trigger, uint64_t step,
                                const float *params, ath_trunk_t *live, ath_swap_result_t *res);

/* The other ranks of a data-parallel run: takes the version rank 0 took
 * after `step`, from path, whose digest must be sha (lower-case hex). The
 * file goes through the permission checks, the private copy and the
 * allow-list as any candidate; no vetting child (rank 0's vetted the same
 * bytes), but the canary runs here against the live version on this
 * rank's device. Then it is switched in as ath_swap_try does (probation,
 * the replaced version held). Returns 0, or -1 with the message (nothing
 * changed). */
int ath_swap_follow(ath_swap_t *s, const char *path, const char *sha, uint64_t step,
                    const float *params, ath_trunk_t *live, ath_err_t *err);

/* The live version's digest (lower-case hex) and the file it came from. */
const char *ath_swap_live_sha(const ath_swap_t *s);
const char *ath_swap_live_source(const ath_swap_t *s);

/* The live version failed at `step` (why: the error text). Rolls back to the
 * previous version if it is still held (probation) and returns 0: the caller
 * restores its state from the swap and runs the steps since again. Returns
 * -1 when there is nothing to roll back to. */
int ath_swap_failed(ath_swap_t *s, uint64_t step, ath_trunk_t *live, const char *why);

/* After `step` completed: ends probation (unloading the previous version)
 * once the window has passed. */
void ath_swap_step_done(ath_swap_t *s, uint64_t step);

/* Counts for the summary. */
typedef struct ath_swap_stats {
    unsigned taken, refused, unchanged, rolled_back;
} ath_swap_stats_t;
ath_swap_stats_t ath_swap_stats(const ath_swap_t *s);

/* Unloads the held previous version, stops watching, removes the private
 * directory, restores SIGHUP. The live trunk is the caller's. NULL is fine. */
void ath_swap_destroy(ath_swap_t *s);

#endif
