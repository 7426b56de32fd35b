/*
 * dist_swap.h — the hot swap of a data-parallel run (dist.h): rank 0
 * decides, every rank applies the decision at the same step boundary.
 *
 * Rank 0 runs the swapper as a one-GPU run does (swap.h: the triggers, the
 * checks, the private copy, the allow-list, the vetting child, the canary).
 * The other ranks never watch, vet or decide; they follow. Every rank stops
 * at the same decision boundaries (ath_dist_swap_decides: the start, every
 * ATH_DIST_SWAP_EVERY steps and every --swap-at step, a function of the
 * options every rank shares), with its engine synced, and there:
 *   1. rank 0 serves its triggers until it takes one swap (or none is left)
 *      and broadcasts the decision record: none, or "swap to the file P
 *      with digest D after step S", with its live version's digest before;
 *   2. every rank checks that it runs the version rank 0 ran, and for a
 *      swap takes the same bytes itself (ath_swap_follow: the permission
 *      checks, its own private copy whose digest must be D, the allow-list,
 *      the load on its own device, the canary against its live version);
 *   3. every rank's answer (ok, or why not) is gathered by every rank: all
 *      ok, every rank has switched (and starts the same probation); any
 *      not, every rank ends the run with the failing ranks' messages, before
 *      a step runs with the new version, so the last checkpoint stays the
 *      last good one;
 *   4. after a swap, back to 1 (rank 0 may have more triggers due).
 * The records travel through a link (the NCCL communicator in a run,
 * dist_nccl.c; an in-process fake in the tests), whose broadcast and gather
 * poll for errors and time out as the gradient exchange does.
 *
 * Rollback needs no message: it follows from the step's verdict, which
 * every rank computes from the same combined loss and gradients, and the
 * probation window, which every rank starts at the same step (train.c).
 */
#ifndef ATH_DIST_SWAP_H
#define ATH_DIST_SWAP_H

#include <stddef.h>
#include <stdint.h>

#include "loader.h"
#include "sha256.h"
#include "swap.h"
#include "trunk.h"
#include "util.h"

/* A decision boundary at least every this many steps: how long a change of
 * the watched file or a SIGHUP waits on rank 0 (--swap-at steps are
 * boundaries themselves). */
#define ATH_DIST_SWAP_EVERY 64

/* Besides its vetting child's limit, what rank 0 is allowed for one
 * candidate's copy, load and canary while the others wait for the decision. */
#define ATH_DIST_SWAP_LOAD_S 30.0

/* Is the boundary after step `done` a decision boundary? step0: the step the
 * run started after (its first boundary is one). */
int ath_dist_swap_decides(const ath_swap_opts_t *o, uint64_t step0, uint64_t done);

/* ------------------------------------------------------------------------- */
/* The records                                                               */

enum {
    ATH_DECISION_NONE = 0, /* nothing to do at this boundary */
    ATH_DECISION_SWAP = 1, /* take sha from path */
    ATH_DECISION_END = 2,  /* rank 0 cannot go on (path holds why): every rank ends */
};

typedef struct ath_dist_decision {
    int32_t kind;                  /* ATH_DECISION_* */
    uint64_t step;                 /* the boundary: after this step */
    char live_sha[ATH_SHA256_HEX]; /* rank 0's live version before the decision */
    char sha[ATH_SHA256_HEX];      /* SWAP: the version to take; NONE: "" */
    char path[ATH_PATH_MAX];       /* SWAP: the file rank 0 took it from; END: why; NONE: "" */
} ath_dist_decision_t;

/* The record on the wire: "ATKD", format 1, kind, 0 (u32 little-endian),
 * step (u64 LE), live_sha and sha (64 hex digits each, or zeros), path
 * (NUL-padded). */
#define ATH_DIST_DECISION_BYTES (24 + 2 * 64 + ATH_PATH_MAX)

void ath_dist_decision_encode(const ath_dist_decision_t *d,
                              unsigned char out[ATH_DIST_DECISION_BYTES]);
/* Checks everything (magic, format, kind, the digests' hex, the path's NUL,
 * zero padding, the fields each kind has and no others). Returns 0, or -1 with the
 * message. */
int ath_dist_decision_decode(const unsigned char in[ATH_DIST_DECISION_BYTES],
                             ath_dist_decision_t *d, ath_err_t *err);

/* A rank's answer to a decision: ok, or the reason it cannot apply it. */
#define ATH_DIST_ANSWER_MSG 1016
#define ATH_DIST_ANSWER_BYTES (8 + ATH_DIST_ANSWER_MSG) /* "ATKA", ok (u32 LE), msg */

typedef struct ath_dist_answer {
    int32_t ok;
    char msg[ATH_DIST_ANSWER_MSG]; /* "" when ok */
} ath_dist_answer_t;

void ath_dist_answer_encode(const ath_dist_answer_t *a, unsigned char out[ATH_DIST_ANSWER_BYTES]);
int ath_dist_answer_decode(const unsigned char in[ATH_DIST_ANSWER_BYTES], ath_dist_answer_t *a,
                           ath_err_t *err);

/* ------------------------------------------------------------------------- */
/* A boundary                                                                */

/* How the records travel between the ranks. Both calls are collective:
 * every rank makes them in the same order; a failure (an error, a timeout)
 * means the run ends on every rank. */
typedef struct ath_dist_link {
    int rank, world;
    /* rank 0's n bytes of buf into every other rank's buf */
    int (*broadcast)(void *ctx, void *buf, size_t n, ath_err_t *err);
    /* every rank's n bytes of mine into all [world · n], in rank order */
    int (*gather)(void *ctx, const void *mine, void *all, size_t n, ath_err_t *err);
    void *ctx;
} ath_dist_link_t;

/* One rank's side of a boundary. */
typedef struct ath_dist_swap_rank {
    ath_swap_t *swap;
    ath_trunk_t *live;
    /* The state to the host (params, read by the canary) and the engine's
     * hold on the plugin dropped (its CUDA graph): called once, before the
     * first swap is tried (rank 0) or followed (the others). */
    int (*prepare)(void *ctx, ath_err_t *err);
    void *ctx;
    const float *params; /* [P] host; valid after prepare */
} ath_dist_swap_rank_t;

/* The decision boundary after step `done` (every rank there, synced).
 * Returns 0 with *taken the swaps every rank applied (0 or more), or -1
 * when the run must end on every rank, err saying why (which rank could not
 * take which file, or the link's failure). */
int ath_dist_swap_boundary(const ath_dist_link_t *link, ath_dist_swap_rank_t *me, uint64_t done,
                           int *taken, ath_err_t *err);

#endif
