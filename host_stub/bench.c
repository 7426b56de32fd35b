/*
 * bench.c — benchmark mode (bench.h).
 *
 * Per plugin and batch size: a fresh handle with max_batch = B (so the memory
 * reported is what a handle for that batch holds), random parameters, and a
 * pool of random input sets (x and dout) rotated so that, where memory
 * allows, the pool is larger than any L2 cache and every call reads inputs
 * that are not cache-hot. Each iteration records three marks in stream order:
 *   mark 0, forward, mark 1, backward, mark 2
 * giving forward, backward and step times; the median of each is reported.
 * CUDA plugins run on a non-blocking stream and are timed with CUDA events;
 * host plugins with the monotonic clock.
 */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "layout.h"
#include "loader.h"
#include "task.h"
#include "util.h"

double ath_bench_flop_forward(int32_t B, int32_t enc, int32_t h1, int32_t h2, int32_t aux)
{
    return 2.0 * B * ((double)enc * h1 + (double)h1 * h2 + (double)h2 * aux);
}

double ath_bench_flop_backward(int32_t B, int32_t enc, int32_t h1, int32_t h2, int32_t aux)
{
    return 2.0 * B * ((double)enc * h1 + 2.0 * h1 * h2 + 2.0 * h2 * aux);
}

/* One measured (plugin, batch) row. */
typedef struct row {
    int ok;
    int iters, sets;
    double fwd_us, bwd_us, step_us;
    uint64_t host_bytes, device_bytes;
} row_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Fills n floats of device memory with uniform(-1, 1) values, generated on
 * the host in blocks. */
static int fill_random(ath_devmem_t *m, float *dst, size_t n, ath_rng_t *rng, ath_err_t *err)
{
    const size_t block = (size_t)1 << 20;
    float *h = malloc(block * sizeof(float));
    if (!h)
        return ath_errf(err, "out of host memory");
    for (size_t done = 0; done < n;) {
        size_t k = n - done < block ? n - done : block;
        for (size_t i = 0; i < k; i++)
            h[i] = ath_rng_uniform(rng, -1.0f, 1.0f);
        if (m->ops->upload(m, dst + done, h, k * sizeof(float), err) != 0) {
            free(h);
            return -1;
        }
        done += k;
    }
    free(h);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* One plugin at one batch size                                              */

static int bench_one(const ath_bench_opts_t *o, ath_plugin_t *pl, ath_devmem_t *m,
                     const float *d_params, float *d_grads, int32_t B, row_t *row,
                     ath_err_t *err)
{
    memset(row, 0, sizeof *row);
    auxtrunk_config_t config = {sizeof config,
                                o->fast ? AUXTRUNK_CONFIG_FAST : 0u,
                                o->enc,
                                o->h1,
                                o->h2,
                                o->aux,
                                B,
                                m->device};
    if (ath_plugin_init(pl, &config, err) != ATH_LOAD_OK)
        return -1;

    int rc = -1;
    float *pool = NULL, *d_out = NULL;
    double *t_fwd = NULL, *t_bwd = NULL, *t_step = NULL;
    auxtrunk_memory_t mem;
    memset(&mem, 0, sizeof mem);
    mem.struct_size = sizeof mem;
    int32_t s = pl->api.memory_usage(pl->handle, &mem);
    if (s != AUXTRUNK_OK) {
        ath_plugin_failf(pl, s, err, "memory_usage");
        goto out;
    }

    const size_t set = (size_t)B * ((size_t)o->enc + (size_t)o->aux); /* x then dout */
    const size_t set_bytes = set * sizeof(float);
    size_t sets = 1;
    if (o->rotate_mib) {
        size_t want = o->rotate_mib << 20;
        sets = (want + set_bytes - 1) / set_bytes;
        if (sets < 2)
            sets = 2;
    }
    if (m->ops->alloc(m, sets * set_bytes, (void **)&pool, err) != 0 ||
        m->ops->alloc(m, (size_t)B * (size_t)o->aux * sizeof(float), (void **)&d_out, err) != 0)
        goto out;
    ath_rng_t rng = ath_rng_make(o->seed, 0xBE4C4u + (uint64_t)B);
    if (fill_random(m, pool, sets * set, &rng, err) != 0)
        goto out;

    t_fwd = malloc((size_t)o->iters * sizeof(double));
    t_bwd = malloc((size_t)o->iters * sizeof(double));
    t_step = malloc((size_t)o->iters * sizeof(double));
    if (!t_fwd || !t_bwd || !t_step) {
        ath_errf(err, "out of host memory");
        goto out;
    }

    auxtrunk_params_t p = ath_params_view(&config, d_params);
    auxtrunk_grads_t g = ath_grads_view(&config, d_grads);
    size_t next = 0;
    int timed = 0;
    double t0 = ath_now_s();
    for (int i = 0; i < o->warmup + o->iters; i++) {
        int warm = i < o->warmup;
        double wall = ath_now_s() - t0;
        if (warm && i > 0 && wall > 0.25 * o->budget_s) {
            i = o->warmup - 1; /* warm-up budget spent: go on to the timed loop */
            t0 = ath_now_s();
            continue;
        }
        if (!warm && timed >= o->min_iters && wall > o->budget_s)
            break;
        if (i == o->warmup)
            t0 = ath_now_s();
        const float *x = pool + next * set;
        const float *dout = x + (size_t)B * (size_t)o->enc;
        next = (next + 1) % sets;
        if (m->ops->mark(m, 0, err) != 0)
            goto out;
        s = pl->api.forward(pl->handle, &p, x, B, d_out, 0, m->stream);
        if (s != AUXTRUNK_OK) {
            ath_plugin_failf(pl, s, err, "forward");
            goto out;
        }
        if (m->ops->mark(m, 1, err) != 0)
            goto out;
        s = pl->api.backward(pl->handle, &p, x, dout, B, &g, 0, m->stream);
        if (s != AUXTRUNK_OK) {
            ath_plugin_failf(pl, s, err, "backward");
            goto out;
        }
        if (m->ops->mark(m, 2, err) != 0)
            goto out;
        double f, b, st;
        if (m->ops->elapsed_us(m, 0, 1, &f, err) != 0 ||
            m->ops->elapsed_us(m, 1, 2, &b, err) != 0 ||
            m->ops->elapsed_us(m, 0, 2, &st, err) != 0)
            goto out;
        if (!warm) {
            t_fwd[timed] = f;
            t_bwd[timed] = b;
            t_step[timed] = st;
            timed++;
        }
    }
    row->ok = 1;
    row->iters = timed;
    row->sets = (int)sets;
    row->fwd_us = median(t_fwd, timed);
    row->bwd_us = median(t_bwd, timed);
    row->step_us = median(t_step, timed);
    row->host_bytes = mem.host_bytes;
    row->device_bytes = mem.device_bytes;
    rc = 0;
out:
    (void)m->ops->sync(m, NULL);
    if (pool)
        m->ops->release(m, pool);
    if (d_out)
        m->ops->release(m, d_out);
    free(t_fwd);
    free(t_bwd);
    free(t_step);
    (void)pl->api.destroy(pl->handle);
    pl->handle = NULL;
    return rc;
}

/* ------------------------------------------------------------------------- */
/* The run                                                                   */

static double tflops(double flop, double us)
{
    return us > 0 ? flop / (us * 1e-6) / 1e12 : 0.0;
}

int ath_bench_run(const ath_bench_opts_t *o)
{
    const int32_t E = o->enc, H1 = o->h1, H2 = o->h2, A = o->aux;
    auxtrunk_config_t shape = {sizeof shape, 0, E, H1, H2, A, 1, -1};
    const size_t P = ath_layout_of(&shape).count;
    int code = ATH_EXIT_OK;
    row_t rows[ATH_BENCH_MAX_PLUGINS][ATH_BENCH_MAX_BATCHES];
    memset(rows, 0, sizeof rows);
    char names[ATH_BENCH_MAX_PLUGINS][64];
    memset(names, 0, sizeof names);

    FILE *csv = NULL;
    if (o->csv) {
        csv = strcmp(o->csv, "-") == 0 ? stdout : fopen(o->csv, "w");
        if (!csv) {
            fprintf(stderr, "auxtrunk-host bench: cannot write %s\n", o->csv);
            return ATH_EXIT_FAILURE;
        }
        fprintf(csv, "plugin,kernel_version,space,enc,h1,h2,aux,batch,iters,input_sets,fwd_us,"
                     "bwd_us,step_us,fwd_tflops,bwd_tflops,step_tflops,host_bytes,"
                     "device_bytes\n");
    }

    printf("auxtrunk-host bench: ENC=%d H1=%d H2=%d AUX=%d, %zu parameters%s\n", E, H1, H2, A, P,
           o->fast ? ", fast mode" : "");
    printf("  FLOP per call (multiply-add = 2; bias/ELU work not counted):\n"
           "    forward  = 2*B*(ENC*H1 + H1*H2 + H2*AUX)\n"
           "    backward = 2*B*(ENC*H1 + 2*H1*H2 + 2*H2*AUX)   (no input gradient for "
           "layer 1: stop-gradient)\n"
           "    step     = forward + backward\n");
    printf("  median of up to %d iterations (at least %d, %.3g s budget) after up to %d "
           "warm-up calls; inputs rotated through %zu MiB\n",
           o->iters, o->min_iters, o->budget_s, o->warmup, o->rotate_mib);
    printf("\n%-10s %8s %6s %11s %11s %11s %8s %8s %8s %10s %10s\n", "plugin", "B", "iters",
           "fwd_us", "bwd_us", "step_us", "fwd_TF/s", "bwd_TF/s", "step_TF/s", "dev_MiB",
           "host_MiB");
    fflush(stdout);

    for (int pi = 0; pi < o->n_plugins; pi++) {
        ath_err_t err = {{0}};
        ath_plugin_t pl;
        ath_devmem_t *m = NULL;
        float *d_params = NULL, *d_grads = NULL, *h_params = NULL;
        ath_load_status_t ls = ath_plugin_load(o->plugins[pi], &pl, &err);
        if (ls != ATH_LOAD_OK) {
            fprintf(stderr, "auxtrunk-host bench: plugin refused (%s): %s\n",
                    ath_load_status_name(ls), err.msg);
            snprintf(names[pi], sizeof names[pi], "(refused)");
            code = ATH_EXIT_PLUGIN;
            continue;
        }
        snprintf(names[pi], sizeof names[pi], "%s", pl.api.impl_name);
        if (!o->quiet)
            printf("# %s: %s, %s memory, %s\n", pl.api.impl_name, pl.api.kernel_version,
                   pl.space == ATH_SPACE_CUDA ? "CUDA device" : "host", pl.path);
        if (o->fast && !(pl.api.caps & AUXTRUNK_CAP_FAST_MODE)) {
            printf("# %s: skipped: no fast mode (AUXTRUNK_CAP_FAST_MODE)\n", pl.api.impl_name);
            ath_plugin_unload(&pl);
            continue;
        }
        if (ath_devmem_open(pl.space, o->device, &m, &err) != 0) {
            fprintf(stderr, "auxtrunk-host bench: %s: %s\n", pl.path, err.msg);
            ath_plugin_unload(&pl);
            code = ATH_EXIT_PLUGIN;
            continue;
        }
        h_params = malloc(P * sizeof(float));
        if (!h_params || m->ops->alloc(m, P * sizeof(float), (void **)&d_params, &err) != 0 ||
            m->ops->alloc(m, P * sizeof(float), (void **)&d_grads, &err) != 0) {
            if (!h_params)
                ath_errf(&err, "out of host memory");
            goto plugin_failed;
        }
        ath_task_init_params(&shape, o->seed, h_params);
        if (m->ops->upload(m, d_params, h_params, P * sizeof(float), &err) != 0)
            goto plugin_failed;

        for (int bi = 0; bi < o->n_batches; bi++) {
            int32_t B = o->batches[bi];
            row_t *r = &rows[pi][bi];
            if (bench_one(o, &pl, m, d_params, d_grads, B, r, &err) != 0) {
                printf("%-10s %8d  failed: %s\n", pl.api.impl_name, B, err.msg);
                fflush(stdout);
                code = ATH_EXIT_FAILURE;
                continue;
            }
            double ff = ath_bench_flop_forward(B, E, H1, H2, A);
            double fb = ath_bench_flop_backward(B, E, H1, H2, A);
            printf("%-10s %8d %6d %11.2f %11.2f %11.2f %8.3f %8.3f %8.3f %10.2f %10.2f\n",
                   pl.api.impl_name, B, r->iters, r->fwd_us, r->bwd_us, r->step_us,
                   tflops(ff, r->fwd_us), tflops(fb, r->bwd_us), tflops(ff + fb, r->step_us),
                   (double)r->device_bytes / 1048576.0, (double)r->host_bytes / 1048576.0);
            fflush(stdout);
            if (csv)
                fprintf(csv, "%s,%s,%s,%d,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.6f,%.6f,%.6f,%llu,%llu\n",
                        pl.api.impl_name, pl.api.kernel_version,
                        pl.space == ATH_SPACE_CUDA ? "cuda" : "host", E, H1, H2, A, B, r->iters,
                        r->sets, r->fwd_us, r->bwd_us, r->step_us, tflops(ff, r->fwd_us),
                        tflops(fb, r->bwd_us), tflops(ff + fb, r->step_us),
                        (unsigned long long)r->host_bytes, (unsigned long long)r->device_bytes);
        }
        goto plugin_done;
    plugin_failed:
        fprintf(stderr, "auxtrunk-host bench: %s: %s\n", pl.path, err.msg);
        code = ATH_EXIT_FAILURE;
    plugin_done:
        if (d_params)
            m->ops->release(m, d_params);
        if (d_grads)
            m->ops->release(m, d_grads);
        free(h_params);
        ath_plugin_unload(&pl);
        ath_devmem_close(m);
    }

    /* Side-by-side step times when several plugins ran. */
    if (o->n_plugins > 1) {
        printf("\nstep time (us) and speedup over %s:\n%8s", names[0], "B");
        for (int pi = 0; pi < o->n_plugins; pi++)
            printf(" %16s", names[pi]);
        printf("\n");
        for (int bi = 0; bi < o->n_batches; bi++) {
            printf("%8d", o->batches[bi]);
            for (int pi = 0; pi < o->n_plugins; pi++) {
                const row_t *r = &rows[pi][bi];
                if (!r->ok)
                    printf(" %16s", "-");
                else if (pi == 0 || !rows[0][bi].ok)
                    printf(" %16.2f", r->step_us);
                else
                    printf(" %9.2f %5.2fx", r->step_us, rows[0][bi].step_us / r->step_us);
            }
            printf("\n");
        }
    }
    if (csv && csv != stdout && fclose(csv) != 0) {
        fprintf(stderr, "auxtrunk-host bench: cannot write %s\n", o->csv);
        code = ATH_EXIT_FAILURE;
    }
    return code;
}
