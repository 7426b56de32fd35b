/*
 * dist.c — the worker variables and the one-host launcher of a
 * data-parallel run (dist.h). No NCCL here: the communicator is
 * dist_nccl.c's.
 */
#define _POSIX_C_SOURCE 200809L /* sigaction, setenv, mkdtemp */
#include "dist.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist_swap.h"
#include "train.h"

/* After the first failure, the others get this long to end by SIGTERM. */
#define GRACE_S 15.0

static int parse_int(const char *s, int lo, int hi, int *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int ath_dist_env_read(ath_dist_env_t *env, ath_err_t *err)
{
    const char *rank = getenv(ATH_DIST_ENV_RANK);
    if (!rank)
        return 0;
    const char *world = getenv(ATH_DIST_ENV_WORLD), *local = getenv(ATH_DIST_ENV_LOCAL_RANK);
    memset(env, 0, sizeof *env);
    if (parse_int(world, 1, ATH_DIST_MAX_RANKS, &env->world) != 0)
        return ath_errf(err, "%s=%s: needs %s=N (1..%d) too", ATH_DIST_ENV_RANK, rank,
                        ATH_DIST_ENV_WORLD, ATH_DIST_MAX_RANKS);
    if (parse_int(rank, 0, env->world - 1, &env->rank) != 0)
        return ath_errf(err, "%s=%s is not a rank of %d", ATH_DIST_ENV_RANK, rank, env->world);
    env->local_rank = env->rank;
    if (local && parse_int(local, 0, 1023, &env->local_rank) != 0)
        return ath_errf(err, "%s=%s is not a GPU index", ATH_DIST_ENV_LOCAL_RANK, local);
    env->id_file = getenv(ATH_DIST_ENV_ID_FILE);
    if (!env->id_file || !*env->id_file)
        return ath_errf(err, "%s: needs %s=FILE (in a directory every rank sees)",
                        ATH_DIST_ENV_RANK, ATH_DIST_ENV_ID_FILE);
    return 1;
}

/* ------------------------------------------------------------------------- */
/* The launcher                                                              */

static volatile sig_atomic_t g_term;

static void on_term(int sig) { g_term = sig; }

static void signal_all(const pid_t *pid, int n, int sig)
{
    for (int r = 0; r < n; r++)
        if (pid[r] > 0)
            kill(pid[r], sig);
}

static void describe(char *buf, size_t size, int status)
{
    if (WIFEXITED(status))
        snprintf(buf, size, "exited with code %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, size, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, size, "ended (status %d)", status);
}

int ath_dist_launch(int gpus, int argc, char **argv)
{
    (void)argc;
    char dir[PATH_MAX], id_file[PATH_MAX + 16];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/auxtrunk-dp-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "auxtrunk-host: cannot create a directory for the NCCL id in %s: %s\n",
                tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return ATH_EXIT_FAILURE;
    }
    snprintf(id_file, sizeof id_file, "%s/nccl-id", dir);
    pid_t *pid = calloc((size_t)gpus, sizeof *pid);
    if (!pid) {
        rmdir(dir);
        fprintf(stderr, "auxtrunk-host: out of host memory\n");
        return ATH_EXIT_FAILURE;
    }
    /* SIGTERM is passed on; SIGINT from a terminal reaches the workers (the
     * same process group) directly, so the launcher only outlives it, to
     * report and clean up after them. */
    struct sigaction sa, ign, old_term, old_int;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    ign = sa;
    ign.sa_handler = SIG_IGN;
    g_term = 0;
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &ign, &old_int);
    fflush(stdout);
    fflush(stderr);
    int code = ATH_EXIT_OK, running = 0, first_failed = -1;
    for (int r = 0; r < gpus; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            char v[16];
            sigaction(SIGTERM, &old_term, NULL);
            sigaction(SIGINT, &old_int, NULL);
            snprintf(v, sizeof v, "%d", r);
            setenv(ATH_DIST_ENV_RANK, v, 1);
            setenv(ATH_DIST_ENV_LOCAL_RANK, v, 1);
            snprintf(v, sizeof v, "%d", gpus);
            setenv(ATH_DIST_ENV_WORLD, v, 1);
            setenv(ATH_DIST_ENV_ID_FILE, id_file, 1);
            setenv("NCCL_NVLS_ENABLE", "0", 0);
            execv("/proc/self/exe", argv);
            fprintf(stderr, "auxtrunk-host: rank %d: cannot start: %s\n", r, strerror(errno));
            _exit(127);
        }
        if (pid[r] < 0) {
            fprintf(stderr, "auxtrunk-host: cannot start rank %d: %s\n", r, strerror(errno));
            signal_all(pid, r, SIGTERM);
            code = ATH_EXIT_FAILURE;
            first_failed = r;
            gpus = r;
            break;
        }
        running++;
    }
    double kill_at = 0.0;
    int forwarded = 0;
    while (running > 0) {
        if (g_term && !forwarded) {
            signal_all(pid, gpus, SIGTERM);
            forwarded = 1;
        }
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w < 0 && errno == ECHILD)
            break;
        if (w <= 0) {
            if (kill_at > 0.0 && ath_now_s() > kill_at) {
                fprintf(stderr,
                        "auxtrunk-host: ranks still running %.0f s after the failure; "
                        "killing them\n",
                        GRACE_S);
                signal_all(pid, gpus, SIGKILL);
                kill_at = 0.0;
            }
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        int r = 0;
        while (r < gpus && pid[r] != w)
            r++;
        if (r == gpus)
            continue;
        pid[r] = 0;
        running--;
        const int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        /* A worker stopped by SIGINT/SIGTERM ended cleanly (train.c). */
        const int stopped = WIFEXITED(status) && (WEXITSTATUS(status) == 128 + SIGINT ||
                                                  WEXITSTATUS(status) == 128 + SIGTERM);
        if (stopped && code == ATH_EXIT_OK)
            code = WEXITSTATUS(status);
        if (!ok && !stopped && first_failed < 0) {
            char how[64];
            describe(how, sizeof how, status);
            first_failed = r;
            code = WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            if (running > 0) {
                fprintf(stderr, "auxtrunk-host: rank %d %s; ending the other %d rank%s\n", r, how,
                        running, running == 1 ? "" : "s");
                signal_all(pid, gpus, SIGTERM);
                kill_at = ath_now_s() + GRACE_S;
            } else {
                fprintf(stderr, "auxtrunk-host: rank %d %s\n", r, how);
            }
        }
    }
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    unlink(id_file); /* normally already removed by rank 0 */
    rmdir(dir);
    free(pid);
    if (first_failed >= 0)
        fprintf(stderr,
                "auxtrunk-host: the data-parallel run failed (rank %d first); a "
                "checkpoint written before is intact\n",
                first_failed);
    return code;
}

/* ------------------------------------------------------------------------- */
/* train --gpus                                                              */

int ath_dist_train_prepare(ath_train_opts_t *o, ath_dist_env_t *env, int argc, char **argv,
                           int *code)
{
    ath_err_t err = {{0}};
    *code = ATH_EXIT_USAGE;
    if (!ath_dist_available()) {
        fprintf(stderr, "auxtrunk-host train: --gpus needs a build with CUDA and NCCL (nccl.h "
                        "and libnccl of the CUDA toolkit); this one has none\n");
        *code = ATH_EXIT_PLUGIN;
        return 1;
    }
    if (o->batch % o->gpus != 0) {
        fprintf(stderr,
                "auxtrunk-host train: --batch %d is not a multiple of --gpus %d (each "
                "rank takes an equal contiguous shard)\n",
                (int)o->batch, o->gpus);
        return 1;
    }
    const int is_worker = ath_dist_env_read(env, &err);
    if (is_worker < 0) {
        fprintf(stderr, "auxtrunk-host train: %s\n", err.msg);
        return 1;
    }
    if (is_worker == 0) {
        *code = ath_dist_launch(o->gpus, argc, argv);
        return 1;
    }
    if (env->world != o->gpus) {
        fprintf(stderr, "auxtrunk-host train: %s=%d but --gpus %d\n", ATH_DIST_ENV_WORLD,
                env->world, o->gpus);
        return 1;
    }
    o->dist = env;
    o->device = (o->device >= 0 ? o->device : 0) + env->local_rank;
    if (env->rank != 0) {
        /* One copy of the files and the progress: rank 0's. */
        o->csv = o->svg = o->checkpoint = NULL;
        /* With a swapper, the checkpoint steps still commit a probation
         * here as on rank 0 (train.c); nothing is written. */
        if (!o->swap)
            o->checkpoint_every = 0;
        o->quiet = 1;
        if (!freopen("/dev/null", "w", stdout)) {
            fprintf(stderr, "auxtrunk-host: rank %d: /dev/null: %s\n", env->rank, strerror(errno));
            *code = ATH_EXIT_FAILURE;
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The hot swap's link                                                       */

static int link_broadcast(void *ctx, void *buf, size_t n, ath_err_t *err)
{
    return ath_dist_broadcast(ctx, buf, n, err);
}

static int link_gather(void *ctx, const void *mine, void *all, size_t n, ath_err_t *err)
{
    return ath_dist_gather(ctx, mine, all, n, err);
}

void ath_dist_link_of(ath_dist_t *d, ath_dist_link_t *link)
{
    *link = (ath_dist_link_t){.rank = d->rank,
                              .world = d->world,
                              .broadcast = link_broadcast,
                              .gather = link_gather,
                              .ctx = d};
}
