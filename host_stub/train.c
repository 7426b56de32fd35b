/*
 * train.c — the host trainer's training loop (train.h).
 *
 * One step (step s, counted from 1; engine.h runs it, step_canon.h defines
 * its arithmetic):
 *   1. draw the batch of step s from the replay buffer: x [B, ENC], target [B, AUX]
 *   2. out = trunk.forward(params, x)                                  (plugin)
 *   3. loss = ½·mean((out − target)²);  dout = (out − target)/(B·AUX)
 *   4. grads = trunk.backward(dout)                                    (plugin)
 *   5. verdict: the loss and every gradient finite? Only then
 *   6. Adam updates params.
 * The loss reported for step s is that of the parameters before update s.
 *
 * The loop is ath_train_run: open, then run_step until the last step, then
 * the summary. run_step returns an explicit outcome: STEP_OK, STEP_RETRY
 * (a failing version was rolled back; the state is that before the failing
 * step, which is run again), STEP_FAIL or STEP_STOP (SIGINT/SIGTERM).
 *
 * Probation: from a swap until its window ends, the state at the swap is
 * kept (a known-good copy, moved forward at each checkpoint), and the loss
 * rows are held back from the curve and the CSV. A rollback restores that
 * state and drops the held rows, and the steps since are run again with the
 * held version: the run continues as if the failing version had never run.
 *
 * A host engine runs each step to completion, so the host sees every step's
 * verdict at once. A CUDA engine runs ahead: the host syncs (sync_report) only
 * for a progress line, a checkpoint, a swap, a full loss ring, once a second,
 * and at the end. A faulty step freezes the device state (step_canon.h), so
 * at the sync the host finds the state just before it, and both engines
 * continue or fail the same way.
 */
#define _POSIX_C_SOURCE 200809L /* sigaction */
#include "train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"
#include "checkpoint.h"
#include "combine.h"
#include "dist.h"
#include "dist_swap.h"
#include "engine.h"
#include "layout.h"
#include "report.h"
#include "swap.h"
#include "task.h"
#include "trunk.h"
#include "util.h"
#include "vet.h"
#include "watchdog.h"

typedef enum step_outcome { STEP_OK, STEP_RETRY, STEP_FAIL, STEP_STOP } step_outcome_t;

/* A CUDA engine syncs at least this often, so that a wait for the device
 * covers a bounded amount of work (the watchdog's limit applies to it). */
#define SYNC_EVERY_S 1.0
/* Data parallel, where the clock may not decide (sync_due), the steps
 * between two syncs at most instead. */
#define DIST_SYNC_EVERY 64

typedef struct run {
    const ath_train_opts_t *o;
    ath_trunk_t trunk;
    ath_task_t task;
    ath_curve_t curve;
    ath_csv_t csv;
    ath_swap_t *swap; /* NULL unless hot-swapping */
    ath_dist_t *dist; /* NULL unless data parallel (dist.h) */
    ath_engine_cfg_t ecfg;
    ath_engine_t *eng[3];  /* by ath_space_t, opened on first use */
    ath_engine_t *e;       /* the engine of the live plugin */
    float *params, *m, *v; /* host copies [P] for checkpoints, swaps, migration */
    size_t P;
    uint64_t step0;    /* the run started after this step */
    uint64_t reported; /* the last step whose loss is in the curve and CSV */
    uint64_t last_saved;
    uint64_t log_every;
    double first_loss, last_loss;
    double t_start, t_mark, t_sync;
    uint64_t s_mark;
    int probe_due;            /* time the next step's phases */
    double enqueue_s, wait_s; /* host time in the engine's step and sync calls */
    int code;                 /* exit code of a STEP_FAIL */
    /* Probation (see the top of the file). */
    int on_probation;
    uint64_t probation_end;               /* as the swapper's: probation is over after this step */
    float *good_params, *good_m, *good_v; /* [P] the state at the last commit */
    ath_scalars_t good_sc;
    double good_first_loss;
    uint64_t *held_step; /* rows not yet in the curve and CSV */
    double *held_loss;
    size_t n_held, cap_held;
    ath_err_t err;
} run_t;

/* ------------------------------------------------------------------------- */
/* Signals: SIGINT and SIGTERM end the run at the next step boundary        */

static volatile sig_atomic_t g_stop;
static struct sigaction g_old_int, g_old_term;
static int g_signals_installed;

static void on_stop(int sig)
{
    g_stop = sig;
    /* A second signal ends the process the default way. */
    signal(sig, SIG_DFL);
}

static void signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    g_stop = 0;
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_signals_installed = 1;
}

static void signals_restore(void)
{
    if (!g_signals_installed)
        return;
    g_signals_installed = 0;
    sigaction(SIGINT, &g_old_int, NULL);
    sigaction(SIGTERM, &g_old_term, NULL);
}

/* ------------------------------------------------------------------------- */
/* Open and free                                                             */

static void run_free(run_t *r)
{
    /* Engines first: a device engine's stream must be idle before the plugin
     * whose kernels it ran goes away. */
    for (size_t i = 0; i < sizeof r->eng / sizeof r->eng[0]; i++)
        ath_engine_close(r->eng[i]);
    ath_dist_close(r->dist);
    ath_swap_destroy(r->swap);
    ath_trunk_close(&r->trunk);
    ath_task_destroy(&r->task);
    ath_curve_free(&r->curve);
    ath_csv_close(&r->csv, NULL);
    free(r->params);
    free(r->m);
    free(r->v);
    free(r->good_params);
    free(r->good_m);
    free(r->good_v);
    free(r->held_step);
    free(r->held_loss);
    ath_watchdog_stop();
    signals_restore();
}

static ath_ckpt_meta_t meta_of(const ath_train_opts_t *o, ath_adam_hp_t hp)
{
    ath_ckpt_meta_t m;
    memset(&m, 0, sizeof m);
    m.enc = o->enc;
    m.h1 = o->h1;
    m.h2 = o->h2;
    m.aux = o->aux;
    m.batch = o->batch;
    m.seed = o->seed;
    m.lr = hp.lr;
    m.beta1 = hp.beta1;
    m.beta2 = hp.beta2;
    m.eps = hp.eps;
    return m;
}

/* Makes the engine of the live plugin's memory space current, moving the
 * state (host copies, then *sc) into it. At a synced step boundary only. */
static int use_engine(run_t *r, const ath_scalars_t *sc)
{
    ath_space_t space = r->trunk.plugin.space;
    if (!r->eng[space] && ath_engine_open(space, &r->ecfg, &r->eng[space], &r->err) != 0)
        return -1;
    ath_engine_t *to = r->eng[space];
    if (to == r->e)
        return 0;
    if (r->e && r->e->ops->get(r->e, r->params, r->m, r->v, &r->err) != 0)
        return -1;
    if (to->ops->put(to, r->params, r->m, r->v, sc, &r->err) != 0)
        return -1;
    r->e = to;
    return 0;
}

/* The loss of step s into the curve and the CSV, or held while on
 * probation. */
static int put_row(run_t *r, uint64_t s, double loss, ath_err_t *err)
{
    if (!r->on_probation)
        return ath_curve_push(&r->curve, s, loss, err) != 0 ||
                       (r->csv.f && ath_csv_row(&r->csv, s, loss, err) != 0)
                   ? -1
                   : 0;
    if (r->n_held == r->cap_held) {
        size_t cap = r->cap_held ? 2 * r->cap_held : 256;
        uint64_t *st = realloc(r->held_step, cap * sizeof *st);
        if (st)
            r->held_step = st;
        double *lo = st ? realloc(r->held_loss, cap * sizeof *lo) : NULL;
        if (!lo)
            return ath_errf(err, "out of host memory");
        r->held_loss = lo;
        r->cap_held = cap;
    }
    r->held_step[r->n_held] = s;
    r->held_loss[r->n_held++] = loss;
    return 0;
}

/* The held rows become final: the curve and the CSV get them. */
static int commit_rows(run_t *r, ath_err_t *err)
{
    const int was = r->on_probation;
    r->on_probation = 0;
    for (size_t i = 0; i < r->n_held; i++)
        if (put_row(r, r->held_step[i], r->held_loss[i], err) != 0)
            return -1;
    r->n_held = 0;
    r->on_probation = was;
    return 0;
}

/* The host copies (just fetched from the engine at a synced boundary)
 * become the state a rollback returns to. */
static int keep_good_state(run_t *r, ath_err_t *err)
{
    const size_t bytes = r->P * sizeof(float);
    if (!r->good_params) {
        r->good_params = malloc(bytes);
        r->good_m = malloc(bytes);
        r->good_v = malloc(bytes);
        if (!r->good_params || !r->good_m || !r->good_v)
            return ath_errf(err, "out of host memory for the known-good state");
    }
    memcpy(r->good_params, r->params, bytes);
    memcpy(r->good_m, r->m, bytes);
    memcpy(r->good_v, r->v, bytes);
    r->good_sc = r->e->sc;
    r->good_first_loss = r->first_loss;
    return 0;
}

/* Also called on the ranks of a data-parallel run that write no files
 * (no --checkpoint there): they commit at the same steps as rank 0, so that
 * every rank's rollback target is the same state. */
static int save_checkpoint(run_t *r, ath_err_t *err)
{
    const ath_scalars_t *sc = &r->e->sc;
    if (r->e->ops->get(r->e, r->params, r->m, r->v, err) != 0)
        return -1;
    /* The CSV first: a checkpoint on disk never holds steps the CSV lacks.
     * On probation a checkpoint commits: the rows so far are written and
     * the rollback target moves here. */
    if (r->on_probation && (commit_rows(r, err) != 0 || keep_good_state(r, err) != 0))
        return -1;
    if (!r->o->checkpoint) {
        r->last_saved = sc->step;
        return 0;
    }
    if (r->csv.f && ath_csv_flush(&r->csv, err) != 0)
        return -1;
    ath_ckpt_meta_t m = meta_of(r->o, r->ecfg.hp);
    m.step = sc->step;
    m.adam_t = sc->t;
    m.data_state = 0; /* the draws are counter-based (task.h) */
    m.first_loss = r->first_loss;
    if (ath_ckpt_save(r->o->checkpoint, &m, r->params, r->m, r->v, r->P, err) != 0)
        return -1;
    r->last_saved = sc->step;
    ath_watchdog_checkpoint(r->o->checkpoint, sc->step);
    return 0;
}

static int run_open(run_t *r, const ath_train_opts_t *o)
{
    memset(r, 0, sizeof *r);
    r->o = o;
    r->first_loss = r->last_loss = NAN;
    /* Data parallel, the plugin's handle takes this rank's shard. */
    const int ranks = o->dist ? o->dist->world : 1;
    const int32_t shard = o->batch / ranks;
    auxtrunk_config_t config = {sizeof config, 0, o->enc, o->h1, o->h2, o->aux, shard, -1};
    ath_load_status_t ls;
    if (o->swap) {
        /* Data parallel, only rank 0 watches and decides (dist_swap.h). */
        ath_swap_opts_t so = *o->swap;
        so.cuda_only = o->dist != NULL;
        if (o->dist && o->dist->rank != 0)
            so.watch = so.poll_ms = 0;
        if (ath_swap_create(&r->swap, &so, &config, o->device, &r->err) != 0) {
            fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
            return ATH_EXIT_PLUGIN;
        }
        ls = ath_swap_open(r->swap, o->plugin, &r->trunk, &r->err);
    } else {
        ls = ath_vet_open(&r->trunk, o->plugin, &config, o->device, NULL, NULL, &r->err);
    }
    if (ls != ATH_LOAD_OK) {
        fprintf(stderr, "auxtrunk-host: plugin refused (%s): %s\n", ath_load_status_name(ls),
                r->err.msg);
        return ATH_EXIT_PLUGIN;
    }
    r->P = r->trunk.n_params;
    r->params = malloc(r->P * sizeof(float));
    r->m = calloc(r->P, sizeof(float));
    r->v = calloc(r->P, sizeof(float));
    if (!r->params || !r->m || !r->v) {
        fprintf(stderr, "auxtrunk-host: out of host memory\n");
        return ATH_EXIT_FAILURE;
    }
    if (ath_task_create(&r->task, &config, o->seed, &r->err) != 0) {
        fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
        return ATH_EXIT_FAILURE;
    }
    r->ecfg = (ath_engine_cfg_t){.config = config,
                                 .batch = o->batch,
                                 .n_params = r->P,
                                 .hp = ath_adam_settings(o->lr),
                                 .task = &r->task,
                                 .device = o->device,
                                 .graph = !o->no_graph,
                                 .dist = NULL,
                                 .slot0 = 0,
                                 .batch_total = o->batch};
    if (o->dist) {
        if (r->trunk.plugin.space != ATH_SPACE_CUDA) {
            fprintf(stderr, "auxtrunk-host: --gpus needs a CUDA plugin (%s is a host plugin)\n",
                    r->trunk.plugin.path);
            return ATH_EXIT_USAGE;
        }
        /* Half the watchdog's limit: a stalled exchange is reported as one,
         * on every rank, before the watchdog would end the process. */
        if (ath_dist_open(&r->dist, o->dist, o->device, o->call_timeout_s / 2, &r->err) != 0) {
            fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
            return ATH_EXIT_FAILURE;
        }
        /* At a decision boundary the others wait while rank 0 tries each
         * trigger due (the --swap-at entries, SIGHUP, the watch), each within
         * its vetting limit and the load and canary after it. */
        if (o->swap)
            r->dist->decide_s =
                (o->swap->n_at + 2) *
                ((o->swap->vet_timeout_s > 0 ? o->swap->vet_timeout_s : ATH_VET_TIMEOUT_S) +
                 ATH_DIST_SWAP_LOAD_S);
        r->ecfg.batch = shard;
        r->ecfg.dist = r->dist;
        r->ecfg.slot0 = o->dist->rank * shard;
    }

    /* Fresh start or resume. */
    ath_scalars_t sc = ath_scalars_at(0, 0, r->ecfg.hp);
    if (o->resume) {
        ath_ckpt_meta_t expect = meta_of(o, r->ecfg.hp), got;
        if (ath_ckpt_load(o->resume, &expect, &got, r->params, r->m, r->v, r->P, &r->err) != 0) {
            fprintf(stderr, "auxtrunk-host: cannot resume: %s\n", r->err.msg);
            return ATH_EXIT_CHECKPOINT;
        }
        sc = ath_scalars_at(got.step, got.adam_t, r->ecfg.hp);
        r->first_loss = got.first_loss;
    } else {
        ath_task_init_params(&config, o->seed, r->params);
    }
    r->step0 = r->reported = r->last_saved = sc.step;
    if (use_engine(r, &sc) != 0) {
        fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
        return ATH_EXIT_FAILURE;
    }
    if (o->csv && ath_csv_open(&r->csv, o->csv, &r->err) != 0) {
        fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
        return ATH_EXIT_FAILURE;
    }
    if (ath_watchdog_start(o->call_timeout_s) != 0) {
        fprintf(stderr, "auxtrunk-host: cannot start the call watchdog\n");
        return ATH_EXIT_FAILURE;
    }
    signals_install();

    r->log_every = o->log_every;
    if (r->log_every == 0)
        r->log_every = o->steps >= 2000 ? 200 : o->steps >= 200 ? o->steps / 10 : 20;
    const ath_plugin_t *pl = &r->trunk.plugin;
    printf("auxtrunk-host: training with %s (%s) from %s\n", pl->api.impl_name,
           pl->api.kernel_version, pl->path);
    printf("  topology ENC=%d H1=%d H2=%d AUX=%d (%zu parameters), batch %d, lr %g, seed %llu, "
           "%s %llu to step %llu\n",
           o->enc, o->h1, o->h2, o->aux, r->P, o->batch, (double)o->lr, (unsigned long long)o->seed,
           o->resume ? "resuming at step" : "from step", (unsigned long long)r->step0,
           (unsigned long long)o->steps);
    printf("  state in %s memory%s; replay buffer of %u samples\n", r->e->ops->name,
           r->e->lazy ? (r->ecfg.graph ? " for the whole run, steps as CUDA graphs where the "
                                         "plugin allows"
                                       : " for the whole run, steps enqueued one by one")
                      : "",
           r->task.n);
    if (o->dist) {
        const int grads_exact = ath_dp_grads_exact(o->batch, ranks);
        const int loss_exact = ath_dp_loss_exact(o->batch, ranks, o->aux);
        printf("  data parallel: %d ranks through NCCL, %d samples each of the global batch %d; "
               "%s\n",
               ranks, shard, o->batch,
               grads_exact && loss_exact ? "bit-identical to one GPU on the full batch"
               : grads_exact ? "gradients bit-identical to one GPU, the loss NOT (the shard's "
                               "B/N*AUX elements are not a power of two); deterministic"
                             : "NOT bit-identical to one GPU (the shard is not 256*2^k "
                               "samples); deterministic for this number of GPUs");
    }
    fflush(stdout);
    r->t_start = r->t_mark = r->t_sync = ath_now_s();
    r->s_mark = r->step0;
    r->probe_due = 1;
    return ATH_EXIT_OK;
}

/* ------------------------------------------------------------------------- */
/* One step                                                                  */

/* The live version failed at `step` (r->err says why). With a version on
 * probation, roll back to it; the state is that before `step` (nothing that
 * failed was applied), so the run continues as if the failing version had
 * never run that step. */
static void forget_plugin(run_t *r)
{
    for (size_t i = 0; i < sizeof r->eng / sizeof r->eng[0]; i++)
        if (r->eng[i])
            r->eng[i]->ops->forget_plugin(r->eng[i]);
}

/* Whether a failure at `step` rolls back: only inside the window, decided
 * by the step numbers alone (not by when the host happened to sync), so
 * that every rank of a data-parallel run decides the same. */
static step_outcome_t recover(run_t *r, uint64_t step)
{
    if (!r->swap)
        return STEP_FAIL;
    forget_plugin(r);
    if (!r->on_probation || step > r->probation_end ||
        ath_swap_failed(r->swap, step, &r->trunk, r->err.msg) != 0)
        return STEP_FAIL;
    /* Back to the state at the swap (or the last checkpoint since), in the
     * memory space of the version rolled back to. */
    ath_space_t space = r->trunk.plugin.space;
    if (!r->eng[space] && ath_engine_open(space, &r->ecfg, &r->eng[space], &r->err) != 0)
        return STEP_FAIL;
    r->e = r->eng[space];
    if (r->e->ops->put(r->e, r->good_params, r->good_m, r->good_v, &r->good_sc, &r->err) != 0)
        return STEP_FAIL;
    r->on_probation = 0;
    r->n_held = 0;
    r->reported = r->good_sc.step;
    r->first_loss = r->good_first_loss;
    return STEP_RETRY;
}

static void progress_line(run_t *r, uint64_t step)
{
    double now = ath_now_s();
    double rate = now > r->t_mark ? (double)(step - r->s_mark) / (now - r->t_mark) : 0.0;
    printf("step %8llu  loss %.6e  %8.1f steps/s\n", (unsigned long long)step, r->last_loss, rate);
    fflush(stdout);
    r->t_mark = now;
    r->s_mark = step;
}

/* Waits for the engine, reports the steps it completed (curve, CSV), and
 * handles what is due at the step reached: a fault, the end of probation, a
 * checkpoint, a progress line. */
static step_outcome_t sync_report(run_t *r)
{
    const ath_train_opts_t *o = r->o;
    ath_engine_t *e = r->e;
    ath_watchdog_arm("waiting for the device", e->enqueued);
    const double t0 = ath_now_s();
    int rc = e->ops->sync(e, &r->err);
    ath_watchdog_disarm();
    if (rc != 0)
        return STEP_FAIL;
    r->t_sync = ath_now_s();
    r->wait_s += r->t_sync - t0;
    r->probe_due = 1;
    const ath_scalars_t *sc = &e->sc;
    const uint64_t before = r->reported;
    const uint64_t last = sc->fault_step ? sc->fault_step - 1 : sc->step;
    for (uint64_t s = r->reported + 1; s <= last; s++) {
        double loss = e->ring[(s - 1) % ATH_ENGINE_RING];
        if (s == 1)
            r->first_loss = loss;
        r->last_loss = loss;
        if (put_row(r, s, loss, &r->err) != 0)
            return STEP_FAIL;
    }
    if (last > r->reported)
        r->reported = last;
    if (sc->fault_step) {
        const uint64_t f = sc->fault_step;
        const double loss = e->ring[(f - 1) % ATH_ENGINE_RING];
        if (sc->fault_kind == ATH_FAULT_LOSS)
            ath_errf(&r->err, "the loss is not finite at step %llu (%g)", (unsigned long long)f,
                     loss);
        else
            ath_errf(&r->err,
                     "a gradient is not finite at step %llu (loss %g); the update was not "
                     "applied",
                     (unsigned long long)f, loss);
        return recover(r, f);
    }
    if (r->swap) {
        ath_swap_step_done(r->swap, last);
        if (r->on_probation && last >= r->probation_end) {
            if (commit_rows(r, &r->err) != 0)
                return STEP_FAIL;
            r->on_probation = 0;
        }
    }
    if (last == before)
        return STEP_OK;
    const int ckpt_due =
        o->checkpoint_every && last % o->checkpoint_every == 0 && last != r->last_saved;
    const int log_due = last % r->log_every == 0 || last == r->step0 + 1 || last == o->steps;
    if (ckpt_due && save_checkpoint(r, &r->err) != 0) {
        r->code = ATH_EXIT_CHECKPOINT;
        return STEP_FAIL;
    }
    if (log_due && r->csv.f && ath_csv_flush(&r->csv, &r->err) != 0)
        return STEP_FAIL;
    if (log_due && !o->quiet)
        progress_line(r, last);
    return STEP_OK;
}

/* Data parallel, the syncs are a function of the step numbers alone (no
 * clock): a fault is then found at the same sync on every rank, so every
 * rank rolls back after the same collectives and they keep pairing up. A
 * wait then covers at most DIST_SYNC_EVERY steps. */
static int sync_due(const run_t *r, uint64_t step)
{
    const ath_train_opts_t *o = r->o;
    if (!r->e->lazy || g_stop)
        return 1;
    return step % r->log_every == 0 || step == r->step0 + 1 || step >= o->steps ||
           (o->checkpoint_every && step % o->checkpoint_every == 0) ||
           step - r->reported >= ATH_ENGINE_RING ||
           (r->dist ? step % DIST_SYNC_EVERY == 0 : ath_now_s() - r->t_sync > SYNC_EVERY_S);
}

/* A swap needs the parameters on the host (the canary), and the engine
 * must let go of the plugin (its CUDA graph). */
static int prepare_swap(void *ctx, ath_err_t *err)
{
    run_t *r = ctx;
    if (r->e->ops->get(r->e, r->params, r->m, r->v, err) != 0)
        return -1;
    forget_plugin(r);
    return 0;
}

/* The boundary after step `done`, synced: the swapper's triggers (one GPU),
 * or the decision of rank 0 applied on every rank (data parallel). A swap
 * taken starts a new probation, whose rollback target is the state now. */
static step_outcome_t swap_boundary(run_t *r, uint64_t done)
{
    step_outcome_t oc = sync_report(r);
    if (oc != STEP_OK)
        return oc;
    int taken = 0;
    if (r->dist) {
        ath_dist_link_t link;
        ath_dist_link_of(r->dist, &link);
        ath_dist_swap_rank_t me = {.swap = r->swap,
                                   .live = &r->trunk,
                                   .prepare = prepare_swap,
                                   .ctx = r,
                                   .params = r->params};
        if (ath_dist_swap_boundary(&link, &me, done, &taken, &r->err) != 0) {
            r->code = r->dist->failed ? ATH_EXIT_FAILURE : ATH_EXIT_PLUGIN;
            return STEP_FAIL;
        }
        if (taken)
            ath_logf(stdout,
                     "swap: after step %llu: every rank (%d) runs %s [%s] (SHA-256 %.16s...)",
                     (unsigned long long)done, r->dist->world, r->trunk.plugin.api.impl_name,
                     r->trunk.plugin.api.kernel_version, ath_swap_live_sha(r->swap));
    } else {
        if (prepare_swap(r, &r->err) != 0)
            return STEP_FAIL;
        taken = ath_swap_poll(r->swap, done, r->params, &r->trunk);
    }
    if (taken == 0)
        return STEP_OK;
    if (commit_rows(r, &r->err) != 0 || keep_good_state(r, &r->err) != 0)
        return STEP_FAIL;
    r->on_probation = 1;
    r->probation_end =
        done + (r->o->swap->rollback_steps ? r->o->swap->rollback_steps : ATH_SWAP_ROLLBACK_STEPS);
    ath_scalars_t sc = r->e->sc;
    return use_engine(r, &sc) == 0 ? STEP_OK : STEP_FAIL;
}

static step_outcome_t run_step(run_t *r)
{
    const uint64_t step = r->e->enqueued + 1;
    step_outcome_t oc;
    if (g_stop) {
        oc = sync_report(r);
        return oc == STEP_OK ? STEP_STOP : oc;
    }
    /* Between two steps. Data parallel, every rank stops at the same
     * boundaries (dist_swap.h) whether or not rank 0 has a trigger. */
    if (r->swap &&
        (r->dist ? ath_dist_swap_decides(r->o->swap, r->step0, step - 1)
                 : ath_swap_due(r->swap, step - 1)) &&
        (oc = swap_boundary(r, step - 1)) != STEP_OK)
        return oc;
    ath_watchdog_arm(r->e->lazy ? "enqueueing a step on the device" : "a plugin call", step);
    const double t0 = ath_now_s();
    int rc = r->e->ops->step(r->e, &r->trunk, r->probe_due, &r->err);
    r->enqueue_s += ath_now_s() - t0;
    ath_watchdog_disarm();
    if (rc != 0) {
        /* Earlier steps first: an earlier fault is the one to handle. */
        ath_err_t call = r->err;
        if ((oc = sync_report(r)) != STEP_OK)
            return oc;
        r->err = call;
        /* Data parallel, a call that failed here may have passed on the
         * other ranks: rolling back alone would split the run, so it ends
         * (the others through the communicator). Non-finite values are
         * seen by every rank in the combined verdict and roll back there. */
        if (r->dist) {
            ath_errf(&r->err,
                     "rank %d: %s; ending the run (the other ranks may have passed this call, so "
                     "no rank rolls back alone)",
                     r->dist->rank, call.msg);
            return STEP_FAIL;
        }
        return recover(r, step);
    }
    r->probe_due = 0;
    return sync_due(r, step) ? sync_report(r) : STEP_OK;
}

/* ------------------------------------------------------------------------- */
/* The end                                                                   */

/* The host path times every phase of every step with the clock; what is left
 * of the wall time is the loop's own work. The device path times the phases
 * of one eagerly enqueued step after each sync (CUDA events, so each phase
 * includes its launch gap) and, in graph mode, one whole replay; the host's
 * share is then what it spent enqueueing, waiting at syncs, and on the rest
 * of the loop, which add up to the wall time. */
static void timing_summary(const run_t *r, double elapsed, uint64_t ran)
{
    const ath_engine_t *e = r->e;
    if (!ran || !e->timed)
        return;
    const double per = 1e6 / (double)ran, wall_us = elapsed * per;
    printf("summary: time per step (mean of %u timed step%s, %s):\n", e->timed,
           e->timed == 1 ? "" : "s", e->lazy ? "enqueued one by one, CUDA events" : "host clock");
    double phases_us = 0.0;
    for (int p = 0; p < ATH_PHASES; p++) {
        double us = e->phase_us[p] / e->timed;
        phases_us += us;
        printf("summary:   %-30s %9.1f us\n", ath_phase_names[p], us);
    }
    if (!e->lazy) {
        printf("summary:   %-30s %9.1f us (wall %.1f us per step)\n", "host overhead",
               wall_us - phases_us, wall_us);
        return;
    }
    if (e->graph_timed)
        printf("summary:   %-30s %9.1f us (mean of %u replays)\n", "device: step as a CUDA graph",
               e->graph_us / e->graph_timed, e->graph_timed);
    const double enq = r->enqueue_s * per, wait = r->wait_s * per;
    printf("summary:   %-30s %9.1f us (launch calls; they block while the device's queue is "
           "full)\n",
           "host: enqueueing", enq);
    printf("summary:   %-30s %9.1f us\n", "host: waiting at syncs", wait);
    printf("summary:   %-30s %9.1f us (wall %.1f us per step)\n", "host: rest of the loop",
           wall_us - enq - wait, wall_us);
}

static int run_summary(run_t *r, step_outcome_t oc)
{
    const ath_train_opts_t *o = r->o;
    double elapsed = ath_now_s() - r->t_start;
    /* The run ends: rows held on probation are final (their steps ran). */
    ath_err_t cerr = {{0}};
    if (commit_rows(r, &cerr) != 0 && oc != STEP_FAIL) {
        fprintf(stderr, "auxtrunk-host: %s\n", cerr.msg);
        return ATH_EXIT_FAILURE;
    }
    if (oc == STEP_FAIL) {
        fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
        return r->code ? r->code : ATH_EXIT_FAILURE;
    }
    const uint64_t end = r->reported;
    if (o->checkpoint && end != r->last_saved && end > r->step0) {
        if (save_checkpoint(r, &r->err) != 0) {
            fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
            return ATH_EXIT_CHECKPOINT;
        }
    }
    if (ath_csv_close(&r->csv, &r->err) != 0) {
        fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
        return ATH_EXIT_FAILURE;
    }
    const ath_plugin_t *pl = &r->trunk.plugin;
    if (o->svg) {
        char title[512];
        snprintf(title, sizeof title, "auxtrunk-host: %s, ENC=%d H1=%d H2=%d AUX=%d, batch %d",
                 pl->api.impl_name, o->enc, o->h1, o->h2, o->aux, o->batch);
        if (ath_svg_write(o->svg, &r->curve, title, &r->err) != 0) {
            fprintf(stderr, "auxtrunk-host: %s\n", r->err.msg);
            return ATH_EXIT_FAILURE;
        }
    }
    uint64_t ran = end - r->step0;
    printf("summary: plugin %s, kernel %s\n", pl->api.impl_name, pl->api.kernel_version);
    printf("summary: %llu steps (%llu..%llu) in %.2f s, %.1f steps/s\n", (unsigned long long)ran,
           (unsigned long long)(ran ? r->step0 + 1 : r->step0), (unsigned long long)end, elapsed,
           elapsed > 0 ? (double)ran / elapsed : 0.0);
    if (ran)
        printf("summary: loss start %.6e (step 1), final %.6e (step %llu), ratio %.1fx\n",
               r->first_loss, r->last_loss, (unsigned long long)end, r->first_loss / r->last_loss);
    else
        printf("summary: the checkpoint is already at step %llu; nothing to do\n",
               (unsigned long long)r->step0);
    timing_summary(r, elapsed, ran);
    if (r->dist && ran)
        printf("summary: data parallel: %d ranks, global batch %d (%d per rank), %.1f us per "
               "step (tests/cuda/bench_dp.sh compares with one GPU)\n",
               r->dist->world, o->batch, o->batch / r->dist->world, elapsed * 1e6 / (double)ran);
    if (r->swap) {
        ath_swap_stats_t st = ath_swap_stats(r->swap);
        printf("summary: hot-swap: %u taken, %u refused, %u unchanged, %u rolled back\n", st.taken,
               st.refused, st.unchanged, st.rolled_back);
    }
    if (o->checkpoint && ran)
        printf("summary: checkpoint %s at step %llu\n", o->checkpoint, (unsigned long long)end);
    if (oc == STEP_STOP) {
        printf("summary: stopped by %s after step %llu\n", g_stop == SIGINT ? "SIGINT" : "SIGTERM",
               (unsigned long long)end);
        return 128 + (int)g_stop;
    }
    return ATH_EXIT_OK;
}

int ath_train_run(const ath_train_opts_t *o)
{
    run_t r;
    int code = run_open(&r, o);
    if (code == ATH_EXIT_OK) {
        step_outcome_t oc = STEP_OK;
        for (;;) {
            oc = r.e->enqueued < o->steps ? run_step(&r) : sync_report(&r);
            if (oc == STEP_FAIL || oc == STEP_STOP ||
                (oc == STEP_OK && r.e->enqueued >= o->steps && r.reported >= o->steps))
                break;
        }
        code = run_summary(&r, oc);
    }
    run_free(&r);
    return code;
}
