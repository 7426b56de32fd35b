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
 *
 * Then, for a CUDA plugin that claims AUXTRUNK_CAP_GRAPH_CAPTURE, one step
 * (forward, then backward with accumulate 0, on the first input set) is
 * captured into a CUDA graph on the same stream and replayed:
 *   mark 0, replay, mark 1
 * giving the graph step time, measured the way the --cublas column is. Every
 * replay reads the same inputs, so at small batches they may sit in L2.
 */
#include "bench.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cublas.h"
#include "devmem.h"
#include "layout.h"
#include "loader.h"
#include "report.h"
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
    /* 1: step_graph_us measured; 0: not offered (host memory, or no
     * AUXTRUNK_CAP_GRAPH_CAPTURE); -1: the capture or a replay failed. */
    int graph;
    double step_graph_us;
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

/* The schedule of every timing loop: up to o->warmup untimed iterations,
 * cut short once a quarter of the budget has passed, then timed ones: at most
 * o->iters, and no more once o->min_iters ran and o->budget_s has passed. */
typedef struct sched {
    const ath_bench_opts_t *o;
    int i;     /* iterations begun */
    int timed; /* timed iterations done: the loop counts them */
    double t0; /* start of the warm-up, then of the timed iterations */
} sched_t;

static sched_t sched_start(const ath_bench_opts_t *o)
{
    sched_t s = {o, 0, 0, ath_now_s()};
    return s;
}

/* Whether another iteration runs; *warm says whether it is untimed. */
static int sched_next(sched_t *s, int *warm)
{
    const ath_bench_opts_t *o = s->o;
    if (s->i < o->warmup && s->i > 0 && ath_now_s() - s->t0 > 0.25 * o->budget_s)
        s->i = o->warmup; /* warm-up budget spent: go on to the timed iterations */
    if (s->i >= o->warmup + o->iters)
        return 0;
    if (s->i == o->warmup)
        s->t0 = ath_now_s();
    else if (s->i > o->warmup && s->timed >= o->min_iters && ath_now_s() - s->t0 > o->budget_s)
        return 0;
    *warm = s->i < o->warmup;
    s->i++;
    return 1;
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

/* One step of the live handle (forward, then backward with accumulate 0, on
 * the inputs x and dout) captured into a CUDA graph and replayed on the
 * timing schedule; the median replay in *us. t holds o->iters times. */
static int bench_graph(const ath_bench_opts_t *o, ath_plugin_t *pl, ath_devmem_t *m,
                       const auxtrunk_params_t *p, auxtrunk_grads_t *g, const float *x,
                       const float *dout, int32_t B, float *d_out, double *t, double *us,
                       ath_err_t *err)
{
    void *graph = NULL;
    int rc = -1;
    if (m->ops->capture_begin(m, err) != 0)
        return -1;
    const char *what = "forward during CUDA graph capture";
    int32_t s = pl->api.forward(pl->handle, p, x, B, d_out, 0, m->stream);
    if (s == AUXTRUNK_OK) {
        what = "backward during CUDA graph capture";
        s = pl->api.backward(pl->handle, p, x, dout, B, g, 0, m->stream);
    }
    if (s != AUXTRUNK_OK) {
        m->ops->capture_abort(m);
        return ath_plugin_failf(pl, s, err, what);
    }
    if (m->ops->capture_end(m, &graph, err) != 0)
        return -1;

    sched_t sc = sched_start(o);
    int warm;
    while (sched_next(&sc, &warm)) {
        double st;
        if (m->ops->mark(m, 0, err) != 0 || m->ops->replay(m, graph, err) != 0 ||
            m->ops->mark(m, 1, err) != 0 || m->ops->elapsed_us(m, 0, 1, &st, err) != 0)
            goto out;
        if (!warm)
            t[sc.timed++] = st;
    }
    *us = median(t, sc.timed);
    rc = 0;
out:
    (void)m->ops->sync(m, NULL);
    m->ops->graph_free(m, graph);
    return rc;
}

/* Fills row; returns -1 (with err) if the plugin or the device failed. A
 * failed graph step alone leaves the eager times standing: 0 is returned
 * with row->graph = -1 and the reason in err. */
static int bench_one(const ath_bench_opts_t *o, ath_plugin_t *pl, ath_devmem_t *m,
                     const float *d_params, float *d_grads, int32_t B, row_t *row, ath_err_t *err)
{
    memset(row, 0, sizeof *row);
    auxtrunk_config_t config = {
        sizeof config, o->fast ? AUXTRUNK_CONFIG_FAST : 0u, o->enc, o->h1, o->h2, o->aux, B,
        m->device};
    if (ath_plugin_init(pl, &config, err) != ATH_LOAD_OK)
        return -1;

    int rc = -1;
    float *pool = NULL, *d_out = NULL;
    double *t_fwd = NULL, *t_bwd = NULL, *t_step = NULL, *t_graph = NULL;
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
    t_graph = malloc((size_t)o->iters * sizeof(double));
    if (!t_fwd || !t_bwd || !t_step || !t_graph) {
        ath_errf(err, "out of host memory");
        goto out;
    }

    auxtrunk_params_t p = ath_params_view(&config, d_params);
    auxtrunk_grads_t g = ath_grads_view(&config, d_grads);
    size_t next = 0;
    sched_t sc = sched_start(o);
    int warm;
    while (sched_next(&sc, &warm)) {
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
            m->ops->elapsed_us(m, 1, 2, &b, err) != 0 || m->ops->elapsed_us(m, 0, 2, &st, err) != 0)
            goto out;
        if (!warm) {
            t_fwd[sc.timed] = f;
            t_bwd[sc.timed] = b;
            t_step[sc.timed] = st;
            sc.timed++;
        }
    }
    const int timed = sc.timed;
    row->ok = 1;
    row->iters = timed;
    row->sets = (int)sets;
    row->fwd_us = median(t_fwd, timed);
    row->bwd_us = median(t_bwd, timed);
    row->step_us = median(t_step, timed);
    row->host_bytes = mem.host_bytes;
    row->device_bytes = mem.device_bytes;
    rc = 0;

    /* The graph step, after the eager loop has warmed the handle up. */
    if (pl->space == ATH_SPACE_CUDA && (pl->api.caps & AUXTRUNK_CAP_GRAPH_CAPTURE) &&
        m->ops->capture_begin) {
        const float *x = pool, *dout = pool + (size_t)B * (size_t)o->enc;
        row->graph =
            bench_graph(o, pl, m, &p, &g, x, dout, B, d_out, t_graph, &row->step_graph_us, err) == 0
                ? 1
                : -1;
    }
out:
    (void)m->ops->sync(m, NULL);
    if (pool)
        m->ops->release(m, pool);
    if (d_out)
        m->ops->release(m, d_out);
    free(t_fwd);
    free(t_bwd);
    free(t_step);
    free(t_graph);
    (void)pl->api.destroy(pl->handle);
    pl->handle = NULL;
    return rc;
}

/* ------------------------------------------------------------------------- */
/* The cuBLAS comparison point (bench_cublas.cu, a separate module)           */
/*
 * The cuBLAS equivalent is built as its own shared module so that
 * auxtrunk-host itself never depends on libcublas: only --cublas loads it.
 */

#ifndef AUXTRUNK_HOST_INSTALL_AUXLIB_REL
#define AUXTRUNK_HOST_INSTALL_AUXLIB_REL "../lib/auxtrunk"
#endif
#define ATH_CUBLAS_MODULE "libauxtrunk_bench_cublas.so"

typedef int (*cublas_run_fn)(int enc, int h1, int h2, int aux, int batch, int warmup, int iters,
                             int tf32, bench_cublas_result_t *res, char *err, int err_len);

static cublas_run_fn cublas_load(void **lib, ath_err_t *err)
{
#if !defined(AUXTRUNK_HOST_HAVE_CUDA)
    (void)lib;
    ath_errf(err, "--cublas needs auxtrunk-host built with the CUDA toolkit");
    return NULL;
#else
    char dir[4096], path[2][4400];
    if (ath_exe_dir(dir, sizeof dir) != 0) {
        ath_errf(err, "cannot locate the running executable");
        return NULL;
    }
    snprintf(path[0], sizeof path[0], "%s/%s", dir, ATH_CUBLAS_MODULE);
    snprintf(path[1], sizeof path[1], "%s/%s/%s", dir, AUXTRUNK_HOST_INSTALL_AUXLIB_REL,
             ATH_CUBLAS_MODULE);
    const char *why = "not found";
    for (int i = 0; i < 2; i++) {
        *lib = dlopen(path[i], RTLD_NOW | RTLD_LOCAL);
        if (!*lib) {
            const char *e = dlerror();
            if (i == 0 && e)
                why = e;
            continue;
        }
        void *sym = dlsym(*lib, "bench_cublas_run");
        if (sym) {
            cublas_run_fn fn;
            memcpy(&fn, &sym, sizeof fn);
            return fn;
        }
        dlclose(*lib);
        *lib = NULL;
    }
    ath_errf(err,
             "the cuBLAS comparison module %s cannot be loaded (%s); it is built only where "
             "the CUDA toolkit has cuBLAS",
             path[0], why);
    return NULL;
#endif
}

/* ------------------------------------------------------------------------- */
/* The run                                                                   */

static double tflops(double flop, double us) { return us > 0 ? flop / (us * 1e-6) / 1e12 : 0.0; }

/* What a row of the table needs to know about whoever produced it. */
typedef struct column {
    char name[64];
    char version[160];
    const char *space;
} column_t;

static void print_row(FILE *csv, const ath_bench_opts_t *o, const column_t *c, int32_t B,
                      const row_t *r)
{
    const int32_t E = o->enc, H1 = o->h1, H2 = o->h2, A = o->aux;
    double ff = ath_bench_flop_forward(B, E, H1, H2, A);
    double fb = ath_bench_flop_backward(B, E, H1, H2, A);
    char graph[32];
    if (r->graph > 0)
        snprintf(graph, sizeof graph, "%.2f", r->step_graph_us);
    else
        snprintf(graph, sizeof graph, "%s", r->graph < 0 ? "failed" : "-");
    printf("%-10s %8d %6d %11.2f %11.2f %11.2f %13s %8.3f %8.3f %8.3f %10.2f %10.2f\n", c->name, B,
           r->iters, r->fwd_us, r->bwd_us, r->step_us, graph, tflops(ff, r->fwd_us),
           tflops(fb, r->bwd_us), tflops(ff + fb, r->step_us), (double)r->device_bytes / 1048576.0,
           (double)r->host_bytes / 1048576.0);
    fflush(stdout);
    if (csv) {
        /* The version is free text from the plugin: one quoted CSV field. */
        fprintf(csv, "%s,\"", c->name);
        for (const char *q = c->version; *q; q++) {
            if (*q == '"')
                fputc('"', csv);
            fputc(*q, csv);
        }
        fputc('"', csv);
        fprintf(csv, ",%s,%d,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.6f,%.6f,%.6f,%llu,%llu,", c->space,
                E, H1, H2, A, B, r->iters, r->sets, r->fwd_us, r->bwd_us, r->step_us,
                tflops(ff, r->fwd_us), tflops(fb, r->bwd_us), tflops(ff + fb, r->step_us),
                (unsigned long long)r->host_bytes, (unsigned long long)r->device_bytes);
        /* Appended last, so older readers keep their column positions; empty
         * where there is no graph step. */
        if (r->graph > 0)
            fprintf(csv, "%.3f", r->step_graph_us);
        fputc('\n', csv);
    }
}

/* Every batch size for one plugin. Returns an ATH_EXIT_* code. */
static int bench_plugin(const ath_bench_opts_t *o, const char *dir, FILE *csv, column_t *col,
                        row_t *rows)
{
    ath_err_t err = {{0}};
    ath_plugin_t pl;
    ath_devmem_t *m = NULL;
    float *d_params = NULL, *d_grads = NULL, *h_params = NULL;
    int code = ATH_EXIT_OK;
    auxtrunk_config_t shape = {sizeof shape, 0, o->enc, o->h1, o->h2, o->aux, 1, -1};
    const size_t P = ath_layout_of(&shape).count;

    ath_load_status_t ls = ath_plugin_load(dir, &pl, &err);
    if (ls != ATH_LOAD_OK) {
        fprintf(stderr, "auxtrunk-host bench: plugin refused (%s): %s\n", ath_load_status_name(ls),
                err.msg);
        snprintf(col->name, sizeof col->name, "(refused)");
        return ATH_EXIT_PLUGIN;
    }
    snprintf(col->name, sizeof col->name, "%s", pl.api.impl_name);
    snprintf(col->version, sizeof col->version, "%s", pl.api.kernel_version);
    col->space = pl.space == ATH_SPACE_CUDA ? "cuda" : "host";
    if (!o->quiet) {
        printf("# %s: %s, %s memory, %s\n", pl.api.impl_name, pl.api.kernel_version,
               pl.space == ATH_SPACE_CUDA ? "CUDA device" : "host", pl.path);
        if (pl.space == ATH_SPACE_CUDA)
            printf("# %s: %s\n", pl.api.impl_name,
                   pl.api.caps & AUXTRUNK_CAP_GRAPH_CAPTURE
                       ? "step_graph_us: one step captured into a CUDA graph, replayed"
                       : "no step_graph_us (no AUXTRUNK_CAP_GRAPH_CAPTURE)");
    }
    if (o->fast && !(pl.api.caps & AUXTRUNK_CAP_FAST_MODE)) {
        printf("# %s: skipped: no fast mode (AUXTRUNK_CAP_FAST_MODE)\n", pl.api.impl_name);
        ath_plugin_unload(&pl);
        return ATH_EXIT_OK;
    }
    if (ath_devmem_open(pl.space, o->device, &m, &err) != 0) {
        fprintf(stderr, "auxtrunk-host bench: %s: %s\n", pl.path, err.msg);
        ath_plugin_unload(&pl);
        return ATH_EXIT_PLUGIN;
    }
    h_params = malloc(P * sizeof(float));
    if (!h_params) {
        ath_errf(&err, "out of host memory");
        goto failed;
    }
    if (m->ops->alloc(m, P * sizeof(float), (void **)&d_params, &err) != 0 ||
        m->ops->alloc(m, P * sizeof(float), (void **)&d_grads, &err) != 0)
        goto failed;
    ath_task_init_params(&shape, o->seed, h_params);
    if (m->ops->upload(m, d_params, h_params, P * sizeof(float), &err) != 0)
        goto failed;

    for (int bi = 0; bi < o->n_batches; bi++) {
        int32_t B = o->batches[bi];
        if (bench_one(o, &pl, m, d_params, d_grads, B, &rows[bi], &err) != 0) {
            printf("%-10s %8d  failed: %s\n", col->name, B, err.msg);
            fflush(stdout);
            code = ATH_EXIT_FAILURE;
            continue;
        }
        print_row(csv, o, col, B, &rows[bi]);
        if (rows[bi].graph < 0) {
            printf("%-10s %8d  failed: graph step: %s\n", col->name, B, err.msg);
            fflush(stdout);
            code = ATH_EXIT_FAILURE;
        }
    }
    goto done;
failed:
    fprintf(stderr, "auxtrunk-host bench: %s: %s\n", pl.path, err.msg);
    code = ATH_EXIT_FAILURE;
done:
    if (d_params)
        m->ops->release(m, d_params);
    if (d_grads)
        m->ops->release(m, d_grads);
    free(h_params);
    ath_plugin_unload(&pl);
    ath_devmem_close(m);
    return code;
}

/* The cuBLAS equivalent at every batch size (graph replay, its own medians). */
static int bench_cublas(const ath_bench_opts_t *o, FILE *csv, column_t *col, row_t *rows)
{
    ath_err_t err = {{0}};
    void *lib = NULL;
    ath_devmem_t *m = NULL;
    snprintf(col->name, sizeof col->name, "cublas");
    snprintf(col->version, sizeof col->version, "cuBLAS SGEMM + custom kernels; CUDA graph (%s)",
             o->fast ? "TF32" : "FP32");
    col->space = "cuda";
    cublas_run_fn run = cublas_load(&lib, &err);
    if (!run || ath_devmem_open(ATH_SPACE_CUDA, o->device, &m, &err) != 0) {
        fprintf(stderr, "auxtrunk-host bench: cublas: %s\n", err.msg);
        if (lib)
            dlclose(lib);
        return ATH_EXIT_FAILURE;
    }
    if (!o->quiet)
        printf("# cublas: %s, timed by graph replay with CUDA events (no input rotation)\n",
               col->version);
    int code = ATH_EXIT_OK;
    for (int bi = 0; bi < o->n_batches; bi++) {
        int32_t B = o->batches[bi];
        bench_cublas_result_t res;
        char why[512] = "";
        if (run(o->enc, o->h1, o->h2, o->aux, B, o->warmup, o->iters, o->fast, &res, why,
                (int)sizeof why) != 0) {
            printf("%-10s %8d  failed: %s\n", col->name, B, why);
            code = ATH_EXIT_FAILURE;
            continue;
        }
        row_t *r = &rows[bi];
        memset(r, 0, sizeof *r);
        r->ok = 1;
        r->iters = o->iters;
        r->sets = 1;
        r->fwd_us = res.fwd_us;
        r->bwd_us = res.bwd_us;
        r->step_us = res.step_us;
        /* Its step is a graph replay already: the graph step is the same. */
        r->graph = 1;
        r->step_graph_us = res.step_us;
        print_row(csv, o, col, B, r);
    }
    ath_devmem_close(m);
    /* The module's CUDA runtime keeps its own state: leave it loaded until exit. */
    return code;
}

/* The step time of a row: eager (graph = 0) or graph replay (graph = 1);
 * negative where there is none. */
static double step_of(const row_t *r, int graph)
{
    if (!r->ok || (graph && r->graph <= 0))
        return -1.0;
    return graph ? r->step_graph_us : r->step_us;
}

/* Step times side by side with the speedup over the first column shown.
 * Eager: every column (cuBLAS's step is a graph replay, said in the title).
 * Graph: only the columns with a graph step, and only if two have one. */
static void print_side_by_side(const ath_bench_opts_t *o, const column_t *cols,
                               row_t (*rows)[ATH_BENCH_MAX_BATCHES], int n_cols, int graph)
{
    int shown[ATH_BENCH_MAX_COLUMNS], n = 0;
    for (int c = 0; c < n_cols; c++) {
        int any = !graph;
        for (int bi = 0; bi < o->n_batches && !any; bi++)
            any = step_of(&rows[c][bi], 1) >= 0;
        if (any)
            shown[n++] = c;
    }
    if (n < 2)
        return;
    if (graph)
        printf("\ngraph step time (us; one step replayed from a CUDA graph) and speedup over "
               "%s:\n",
               cols[shown[0]].name);
    else
        printf("\nstep time (us; plugins: eager calls%s) and speedup over %s:\n",
               o->cublas ? ", cublas: graph replay" : "", cols[shown[0]].name);
    printf("%8s", "B");
    for (int k = 0; k < n; k++)
        printf(" %16s", cols[shown[k]].name);
    printf("\n");
    for (int bi = 0; bi < o->n_batches; bi++) {
        printf("%8d", o->batches[bi]);
        double base = step_of(&rows[shown[0]][bi], graph);
        for (int k = 0; k < n; k++) {
            double t = step_of(&rows[shown[k]][bi], graph);
            if (t < 0)
                printf(" %16s", "-");
            else if (k == 0 || base < 0)
                printf(" %16.2f", t);
            else
                printf(" %9.2f %5.2fx", t, base / t);
        }
        printf("\n");
    }
}

static int write_chart(const ath_bench_opts_t *o, const column_t *cols,
                       row_t (*rows)[ATH_BENCH_MAX_BATCHES], int n_cols, ath_err_t *err)
{
    double x[ATH_BENCH_MAX_COLUMNS][ATH_BENCH_MAX_BATCHES];
    double y[ATH_BENCH_MAX_COLUMNS][ATH_BENCH_MAX_BATCHES];
    char names[ATH_BENCH_MAX_COLUMNS][96];
    ath_series_t series[ATH_BENCH_MAX_COLUMNS];
    int n = 0;
    for (int c = 0; c < n_cols; c++) {
        /* A plugin's graph step where it has one (a line of graph points
         * only, never mixed with eager ones); cuBLAS's step as it is. */
        int graph = 0;
        for (int bi = 0; bi < o->n_batches && c < o->n_plugins && !graph; bi++)
            graph = step_of(&rows[c][bi], 1) >= 0;
        int k = 0;
        for (int bi = 0; bi < o->n_batches; bi++)
            if (step_of(&rows[c][bi], graph) >= 0) {
                x[n][k] = o->batches[bi];
                y[n][k] = step_of(&rows[c][bi], graph);
                k++;
            }
        if (k == 0)
            continue;
        snprintf(names[n], sizeof names[n], "%.63s%s", cols[c].name, graph ? " (graph)" : "");
        series[n].name = names[n];
        series[n].n = k;
        series[n].x = x[n];
        series[n].y = y[n];
        n++;
    }
    char title[256];
    snprintf(title, sizeof title, "step time (forward + backward), ENC=%d H1=%d H2=%d AUX=%d%s",
             o->enc, o->h1, o->h2, o->aux, o->fast ? ", fast mode" : "");
    return ath_svg_loglog(o->svg, title, "batch size B", "microseconds per step (median)", series,
                          n, err);
}

int ath_bench_run(const ath_bench_opts_t *o)
{
    const int n_cols = o->n_plugins + (o->cublas ? 1 : 0);
    auxtrunk_config_t shape = {sizeof shape, 0, o->enc, o->h1, o->h2, o->aux, 1, -1};
    const size_t P = ath_layout_of(&shape).count;
    int code = ATH_EXIT_OK;
    static row_t rows[ATH_BENCH_MAX_COLUMNS][ATH_BENCH_MAX_BATCHES];
    static column_t cols[ATH_BENCH_MAX_COLUMNS];
    memset(rows, 0, sizeof rows);
    memset(cols, 0, sizeof cols);

    FILE *csv = NULL;
    if (o->csv) {
        csv = strcmp(o->csv, "-") == 0 ? stdout : fopen(o->csv, "w");
        if (!csv) {
            fprintf(stderr, "auxtrunk-host bench: cannot write %s\n", o->csv);
            return ATH_EXIT_FAILURE;
        }
        fprintf(csv, "plugin,kernel_version,space,enc,h1,h2,aux,batch,iters,input_sets,fwd_us,"
                     "bwd_us,step_us,fwd_tflops,bwd_tflops,step_tflops,host_bytes,"
                     "device_bytes,step_graph_us\n");
    }

    printf("auxtrunk-host bench: ENC=%d H1=%d H2=%d AUX=%d, %zu parameters%s\n", o->enc, o->h1,
           o->h2, o->aux, P, o->fast ? ", fast mode" : "");
    printf("  FLOP per call (multiply-add = 2; bias/ELU work not counted):\n"
           "    forward  = 2*B*(ENC*H1 + H1*H2 + H2*AUX)\n"
           "    backward = 2*B*(ENC*H1 + 2*H1*H2 + 2*H2*AUX)   (no input gradient for "
           "layer 1: stop-gradient)\n"
           "    step     = forward + backward\n");
    printf("  median of up to %d iterations (at least %d, %.3g s budget) after up to %d "
           "warm-up calls; inputs rotated through %zu MiB\n",
           o->iters, o->min_iters, o->budget_s, o->warmup, o->rotate_mib);
    printf("  step_graph_us: one step replayed from a CUDA graph the host captures (CUDA\n"
           "    plugins with AUXTRUNK_CAP_GRAPH_CAPTURE), same schedule, one input set:\n"
           "    at small batches its inputs may stay in L2; '-' where not offered\n");
    printf("\n%-10s %8s %6s %11s %11s %11s %13s %8s %8s %8s %10s %10s\n", "plugin", "B", "iters",
           "fwd_us", "bwd_us", "step_us", "step_graph_us", "fwd_TF/s", "bwd_TF/s", "step_TF/s",
           "dev_MiB", "host_MiB");
    fflush(stdout);

    for (int pi = 0; pi < o->n_plugins; pi++) {
        int c = bench_plugin(o, o->plugins[pi], csv, &cols[pi], rows[pi]);
        if (c != ATH_EXIT_OK && code == ATH_EXIT_OK)
            code = c;
    }
    if (o->cublas) {
        int c = bench_cublas(o, csv, &cols[o->n_plugins], rows[o->n_plugins]);
        if (c != ATH_EXIT_OK && code == ATH_EXIT_OK)
            code = c;
    }

    /* Side-by-side step times when several ran: the eager steps (cuBLAS's
     * is its graph replay), then graph step against graph step. */
    if (n_cols > 1) {
        print_side_by_side(o, cols, rows, n_cols, 0);
        print_side_by_side(o, cols, rows, n_cols, 1);
    }
    if (o->svg) {
        ath_err_t err = {{0}};
        if (write_chart(o, cols, rows, n_cols, &err) != 0) {
            fprintf(stderr, "auxtrunk-host bench: %s\n", err.msg);
            code = ATH_EXIT_FAILURE;
        }
    }
    if (csv && csv != stdout && fclose(csv) != 0) {
        fprintf(stderr, "auxtrunk-host bench: cannot write %s\n", o->csv);
        code = ATH_EXIT_FAILURE;
    }
    return code;
}
