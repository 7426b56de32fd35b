/*
 * vet.h — vetting a plugin file in a child process before this process runs
 * any of its code: the child loads the file, negotiates, initialises it with
 * the run's configuration and runs the canary (canary.h), telling the parent
 * through a pipe which stage it is in and, at the end, its verdict. The child
 * runs supervised (supervise.h): a crash is seen as its signal, a hang as the
 * deadline passing (the child's process group is killed), and either names
 * the stage it happened in.
 *
 * Fork or exec: a forked child cannot use CUDA once the parent holds a CUDA
 * context, so then the child is this program started afresh
 * ("<exe> --swap-vet <request file> <fd>"), the request travelling in a file.
 *
 * What vetting can protect against: a version that crashes, hangs, fails to
 * load or initialise, or computes wrong or non-finite numbers on the probe,
 * in the child. What it cannot: a version that behaves in the child and
 * misbehaves later in the trainer, or a malicious one (it runs with this
 * user's rights in the child): the SHA-256 allow-list is the security
 * boundary, the child is a safety net.
 */
#ifndef ATH_VET_H
#define ATH_VET_H

#include <stdint.h>

#include "auxtrunk.h"
#include "loader.h"
#include "sha256.h"
#include "trunk.h"
#include "util.h"

#define ATH_VET_COMMAND "--swap-vet" /* argv[1] of an exec'd vetting child */
#define ATH_VET_TIMEOUT_S 30.0       /* default limit for the vetting child */

/* Refusal reasons of vetting (besides the loader's status names). */
#define ATH_VET_R_CRASHED "crashed"
#define ATH_VET_R_HUNG "hung"
#define ATH_VET_R_CANARY "canary-failed"
#define ATH_VET_R_VETTING "vetting-failed"

/* What the child gets: in fork mode it points into the parent's memory
 * (copy-on-write); in exec mode it is written to a request file. */
typedef struct ath_vet_req {
    auxtrunk_config_t config;
    int32_t device, pb;
    int32_t ref_exact; /* the reference was computed exactly */
    int32_t has_ref;   /* 0: no reference (a first load): finiteness only */
    uint64_t n_params;
    char path[ATH_PATH_MAX]; /* the private copy to vet */
    const float *params, *x, *dout, *ref_out, *ref_grads;
    float *out, *grads;
} ath_vet_req_t;

/* The candidate's names, once the child got that far. */
typedef struct ath_vet_version {
    char impl[64];
    char kver[192];
} ath_vet_version_t;

/*
 * Vets rq->path in a child within timeout_s. exe: NULL to fork only, else
 * the program to exec with the request written to req_file first. Returns 0
 * when the child passed; otherwise -1 with *reason (ATH_VET_R_* or a loader
 * status name) and the message. *ver gets the candidate's names when the
 * child reported them; *child_ms the child's time.
 */
int ath_vet(const ath_vet_req_t *rq, double timeout_s, const char *exe, const char *req_file,
            ath_vet_version_t *ver, const char **reason, double *child_ms, ath_err_t *err);

/* ------------------------------------------------------------------------- */
/* Opening a plugin through all of it (vet_open.c)                           */

typedef struct ath_vet_open_opts {
    struct ath_privdir *dir;       /* NULL: a private directory of its own, removed after */
    const struct ath_allow *allow; /* NULL or empty: no allow-list */
    const char *allow_name;        /* the allow-list's file, for messages */
    double timeout_s;              /* 0: ATH_VET_TIMEOUT_S */
    const char *exe;               /* exec this program for the child (NULL: fork; a
                                       process that already holds a CUDA context must
                                       give one: the first load of a run happens before
                                       any, so trainers fork) */
} ath_vet_open_opts_t;

/*
 * Opens the plugin at dir_or_file (see ath_plugin_file) into *t the way every
 * plugin of a run is opened, the first one included: a private copy behind
 * the permission checks (plugin_copy.h), its digest on the allow-list when
 * there is one, vetted in a child (loads, initialises, and computes finite
 * results on the probe, within the timeout), and only then loaded here from
 * the copy. o NULL: the defaults. sha (may be NULL) gets the digest.
 * Returns ATH_LOAD_OK or the refusal: the loader's status where the loader
 * refused (here or in the child); ATH_LOAD_NO_FILE for a missing file;
 * ATH_LOAD_NOT_LOADABLE for permissions, digest, a crash, a hang or a
 * failed probe (the message says which).
 */
ath_load_status_t ath_vet_open(ath_trunk_t *t, const char *dir_or_file,
                               const auxtrunk_config_t *config, int device,
                               const ath_vet_open_opts_t *o, char sha[ATH_SHA256_HEX],
                               ath_err_t *err);

/* Entry of an exec'd vetting child: argv = {prog, ATH_VET_COMMAND, request
 * file, report fd}. Returns the process exit code. */
int ath_vet_main(int argc, char **argv);

#endif
