/*
 * train.c — the host trainer's training loop (train.h).
 *
 * One step, all state on the host:
 *   1. draw a batch from the task's data stream: x [B, ENC], target [B, AUX]
 *   2. out = trunk.forward(params, x)                       (plugin)
 *   3. loss = ½·mean((out − target)²);  dout = (out − target)/(B·AUX)   (host)
 *   4. grads = trunk.backward(dout)                          (plugin)
 *   5. Adam updates params from grads                        (host)
 * The loss reported for step s is that of the parameters before update s.
 */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"
#include "checkpoint.h"
#include "layout.h"
#include "report.h"
#include "swap.h"
#include "task.h"
#include "trunk.h"
#include "util.h"
#include "vet.h"

typedef struct run {
    ath_trunk_t trunk;
    ath_task_t task;
    ath_adam_t adam;
    ath_curve_t curve;
    ath_csv_t csv;
    ath_swap_t *swap; /* NULL unless hot-swapping */
    float *params, *grads, *x, *target, *out, *dout;
} run_t;

static void run_free(run_t *r)
{
    ath_swap_destroy(r->swap);
    ath_trunk_close(&r->trunk);
    ath_task_destroy(&r->task);
    ath_adam_destroy(&r->adam);
    ath_curve_free(&r->curve);
    ath_csv_close(&r->csv, NULL);
    free(r->params);
    free(r->grads);
    free(r->x);
    free(r->target);
    free(r->out);
    free(r->dout);
}

/* A failing step: with a swapped-in version on probation, roll back to the
 * previous one; the caller then redoes the step with the same samples
 * (nothing was updated yet), so the run continues as if it had not failed. */
static int rolled_back(run_t *r, uint64_t step, const ath_err_t *err)
{
    return r->swap && ath_swap_failed(r->swap, step, &r->trunk, err->msg) == 0;
}

/* Half mean squared error and its gradient with respect to out. */
static double loss_and_grad(const float *out, const float *target, size_t n, float *dout)
{
    double sum = 0.0;
    const double inv = 1.0 / (double)n;
    for (size_t i = 0; i < n; i++) {
        float d = out[i] - target[i];
        sum += (double)d * (double)d;
        dout[i] = (float)((double)d * inv);
    }
    return 0.5 * sum * inv;
}

static ath_ckpt_meta_t meta_of(const ath_train_opts_t *o, const ath_adam_t *a)
{
    ath_ckpt_meta_t m;
    memset(&m, 0, sizeof m);
    m.enc = o->enc;
    m.h1 = o->h1;
    m.h2 = o->h2;
    m.aux = o->aux;
    m.batch = o->batch;
    m.seed = o->seed;
    m.lr = a->lr;
    m.beta1 = a->beta1;
    m.beta2 = a->beta2;
    m.eps = a->eps;
    return m;
}

static int save_checkpoint(const ath_train_opts_t *o, run_t *r, uint64_t step,
                           const ath_rng_t *data, double first_loss, ath_err_t *err)
{
    ath_ckpt_meta_t m = meta_of(o, &r->adam);
    m.step = step;
    m.adam_t = r->adam.t;
    m.data_state = data->state;
    m.first_loss = first_loss;
    return ath_ckpt_save(o->checkpoint, &m, r->params, r->adam.m, r->adam.v, r->adam.n, err);
}

int ath_train_run(const ath_train_opts_t *o)
{
    run_t r;
    memset(&r, 0, sizeof r);
    ath_err_t err = {{0}};
    int code = ATH_EXIT_FAILURE;

    auxtrunk_config_t config = {sizeof config, 0, o->enc, o->h1, o->h2, o->aux, o->batch, -1};
    ath_load_status_t ls;
    if (o->swap) {
        if (ath_swap_create(&r.swap, o->swap, &config, o->device, &err) != 0) {
            fprintf(stderr, "auxtrunk-host: %s\n", err.msg);
            return ATH_EXIT_PLUGIN;
        }
        ls = ath_swap_open(r.swap, o->plugin, &r.trunk, &err);
    } else {
        ls = ath_vet_open(&r.trunk, o->plugin, &config, o->device, NULL, NULL, &err);
    }
    if (ls != ATH_LOAD_OK) {
        ath_swap_destroy(r.swap);
        fprintf(stderr, "auxtrunk-host: plugin refused (%s): %s\n", ath_load_status_name(ls),
                err.msg);
        return ATH_EXIT_PLUGIN;
    }
    const ath_plugin_t *pl = &r.trunk.plugin;
    const size_t P = r.trunk.n_params;
    const size_t B = (size_t)o->batch;
    r.params = malloc(P * sizeof(float));
    r.grads = malloc(P * sizeof(float));
    r.x = malloc(B * (size_t)o->enc * sizeof(float));
    r.target = malloc(B * (size_t)o->aux * sizeof(float));
    r.out = malloc(B * (size_t)o->aux * sizeof(float));
    r.dout = malloc(B * (size_t)o->aux * sizeof(float));
    if (!r.params || !r.grads || !r.x || !r.target || !r.out || !r.dout) {
        ath_errf(&err, "out of host memory");
        goto fail;
    }
    if (ath_adam_create(&r.adam, P, o->lr, &err) != 0 ||
        ath_task_create(&r.task, &config, o->seed, &err) != 0)
        goto fail;

    /* Fresh start or resume. */
    uint64_t step0 = 0;
    double first_loss = NAN;
    ath_rng_t data = ath_task_data_stream(o->seed);
    if (o->resume) {
        ath_ckpt_meta_t expect = meta_of(o, &r.adam), got;
        if (ath_ckpt_load(o->resume, &expect, &got, r.params, r.adam.m, r.adam.v, P, &err) !=
            0) {
            fprintf(stderr, "auxtrunk-host: cannot resume: %s\n", err.msg);
            code = ATH_EXIT_CHECKPOINT;
            goto done;
        }
        step0 = got.step;
        r.adam.t = got.adam_t;
        data.state = got.data_state;
        first_loss = got.first_loss;
    } else {
        ath_task_init_params(&config, o->seed, r.params);
    }

    if (o->csv && ath_csv_open(&r.csv, o->csv, &err) != 0)
        goto fail;

    uint64_t log_every = o->log_every;
    if (log_every == 0)
        log_every = o->steps >= 2000 ? 200 : o->steps >= 200 ? o->steps / 10 : 20;
    printf("auxtrunk-host: training with %s (%s) from %s\n", pl->api.impl_name,
           pl->api.kernel_version, pl->path);
    printf("  topology ENC=%d H1=%d H2=%d AUX=%d (%zu parameters), batch %d, lr %g, seed %llu, "
           "%s %llu to step %llu\n",
           o->enc, o->h1, o->h2, o->aux, P, o->batch, (double)o->lr,
           (unsigned long long)o->seed, o->resume ? "resuming at step" : "from step",
           (unsigned long long)step0, (unsigned long long)o->steps);
    fflush(stdout);

    const size_t n_out = B * (size_t)o->aux;
    double t_start = ath_now_s(), t_mark = t_start;
    uint64_t s_mark = step0, last_saved = step0;
    double loss = NAN;
    for (uint64_t step = step0 + 1; step <= o->steps; step++) {
        if (r.swap) /* between two steps */
            ath_swap_poll(r.swap, step - 1, r.params, &r.trunk);
        ath_task_sample(&r.task, &data, o->batch, r.x, r.target);
    redo:
        if (ath_trunk_forward(&r.trunk, r.params, r.x, o->batch, r.out, &err) != 0) {
            if (rolled_back(&r, step, &err))
                goto redo;
            goto fail;
        }
        loss = loss_and_grad(r.out, r.target, n_out, r.dout);
        if (!isfinite(loss)) {
            ath_errf(&err, "the loss is not finite at step %llu (%g)", (unsigned long long)step,
                     loss);
            if (rolled_back(&r, step, &err))
                goto redo;
            goto fail;
        }
        if (ath_trunk_backward(&r.trunk, r.dout, o->batch, r.grads, &err) != 0) {
            if (rolled_back(&r, step, &err))
                goto redo;
            goto fail;
        }
        ath_adam_step(&r.adam, r.params, r.grads);
        if (r.swap)
            ath_swap_step_done(r.swap, step);

        if (step == 1)
            first_loss = loss;
        if (ath_curve_push(&r.curve, step, loss, &err) != 0)
            goto fail;
        if (r.csv.f && ath_csv_row(&r.csv, step, loss, &err) != 0)
            goto fail;
        if (o->checkpoint && o->checkpoint_every && step % o->checkpoint_every == 0) {
            if (save_checkpoint(o, &r, step, &data, first_loss, &err) != 0) {
                fprintf(stderr, "auxtrunk-host: %s\n", err.msg);
                code = ATH_EXIT_CHECKPOINT;
                goto done;
            }
            last_saved = step;
        }
        if (!o->quiet && (step % log_every == 0 || step == step0 + 1 || step == o->steps)) {
            double now = ath_now_s();
            double rate = now > t_mark ? (double)(step - s_mark) / (now - t_mark) : 0.0;
            printf("step %8llu  loss %.6e  %8.1f steps/s\n", (unsigned long long)step, loss,
                   rate);
            fflush(stdout);
            t_mark = now;
            s_mark = step;
            if (r.csv.f && ath_csv_flush(&r.csv, &err) != 0)
                goto fail;
        }
    }
    double elapsed = ath_now_s() - t_start;

    if (o->checkpoint && last_saved != o->steps && o->steps > step0) {
        if (save_checkpoint(o, &r, o->steps, &data, first_loss, &err) != 0) {
            fprintf(stderr, "auxtrunk-host: %s\n", err.msg);
            code = ATH_EXIT_CHECKPOINT;
            goto done;
        }
    }
    if (ath_csv_close(&r.csv, &err) != 0)
        goto fail;
    if (o->svg) {
        char title[512];
        snprintf(title, sizeof title, "auxtrunk-host: %s, ENC=%d H1=%d H2=%d AUX=%d, batch %d",
                 pl->api.impl_name, o->enc, o->h1, o->h2, o->aux, o->batch);
        if (ath_svg_write(o->svg, &r.curve, title, &err) != 0)
            goto fail;
    }

    uint64_t ran = o->steps > step0 ? o->steps - step0 : 0;
    printf("summary: plugin %s, kernel %s\n", pl->api.impl_name, pl->api.kernel_version);
    printf("summary: %llu steps (%llu..%llu) in %.2f s, %.1f steps/s\n", (unsigned long long)ran,
           (unsigned long long)(ran ? step0 + 1 : step0), (unsigned long long)o->steps, elapsed,
           elapsed > 0 ? (double)ran / elapsed : 0.0);
    if (ran)
        printf("summary: loss start %.6e (step 1), final %.6e (step %llu), ratio %.1fx\n",
               first_loss, loss, (unsigned long long)o->steps, first_loss / loss);
    else
        printf("summary: the checkpoint is already at step %llu; nothing to do\n",
               (unsigned long long)step0);
    if (r.swap) {
        ath_swap_stats_t st = ath_swap_stats(r.swap);
        printf("summary: hot-swap: %u taken, %u refused, %u unchanged, %u rolled back\n", st.taken,
               st.refused, st.unchanged, st.rolled_back);
    }
    if (o->checkpoint && ran)
        printf("summary: checkpoint %s at step %llu\n", o->checkpoint,
               (unsigned long long)o->steps);
    code = ATH_EXIT_OK;
    goto done;

fail:
    fprintf(stderr, "auxtrunk-host: %s\n", err.msg);
    code = ATH_EXIT_FAILURE;
done:
    run_free(&r);
    return code;
}
