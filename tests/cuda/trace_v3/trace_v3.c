/*
 * trace_v3.c — auxtrunk-trace-v3: where the time of cuda-v3's fused kernels
 * goes, phase by phase (docs/perf-notes-v3.md quotes it). It links its own
 * build of kernels/cuda_v3/trunk_v3.cu with AUXTRUNK_V3_TRACE=1, whose
 * kernels stamp %globaltimer and clock64 at the end of every phase in every
 * block (kernels/cuda_v3/trunk_v3_trace.h); the plugin's build has no stamps.
 *
 * For each batch, on the production topology 256/256/256/128:
 *   1. checks the traced kernels' out, h1, h2 and six gradients bit-identical
 *      to cuda-v2's (both are exact: any difference is a defect, exit 1);
 *   2. times, with CUDA events, medians: the eager forward and backward
 *      (synchronised after each step, as auxtrunk-host bench does) and the
 *      graph of one step (forward + backward) replayed;
 *   3. replays that graph --replays times, reading the stamps after each,
 *      and prints medians over the replays of: the timeline (block starts
 *      and ends on the GPU's global timer, µs after the forward's first
 *      block; for the backward also when each block was placed, before
 *      its grid dependency wait), each phase's length (SM cycles, printed in µs at the measured
 *      SM clock) in the block --block and as median and maximum over the
 *      blocks, and the backward's gradient items by kind (flag waits, work);
 *      also how many blocks of each kernel shared their SM with another
 *      block of the same launch, and when those blocks ended against the
 *      others (%smid, recorded at each block's first stamp).
 *
 *   auxtrunk-trace-v3 [--batches 32,128,256,512] [--replays 200] [--block 0] [--once]
 *
 * --once runs step 1 only, one call each (for compute-sanitizer).
 *
 * It calls v3_fused_forward/v3_fused_backward, so the fused kernels run at
 * every batch up to V3_MAX_BATCH, also above V3_FUSED_MAX_BATCH, where the
 * plugin runs cuda-v2's kernels.
 *
 * Not a test: it asserts nothing about the times. Inputs are the same on
 * every call (so at small batches they sit in L2, as in bench's graph step).
 */
#include <cuda_runtime_api.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda_ck.h"
#include "rng.h"
#include "trunk_v2.h"
#include "trunk_v3.h"
#include "trunk_v3_trace.h"

static const atk_dims_t DIMS = {256, 256, 256, 128};
enum { MAX_BATCHES = 16, WARM = 20, TIMED = 200 };

/* ------------------------------------------------------------- medians -- */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of the non-NaN values of v[0..n) (reorders v); NaN if none. */
static double median(double *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i]))
            v[m++] = v[i];
    if (m == 0)
        return NAN;
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

/* ------------------------------------------------------------- metrics -- */

/* A printed row: three values per replay (the traced block, the median and
 * the maximum over blocks or items), in ns (global timer) or SM cycles. */
typedef struct row {
    char name[64];
    int cycles;
    double *v[3];
} row_t;

enum { MAX_ROWS = 96 };
static row_t g_rows[MAX_ROWS];
static int g_nrows, g_replays, g_rep;

static row_t *row_of(const char *name, int cycles)
{
    for (int i = 0; i < g_nrows; i++)
        if (strcmp(g_rows[i].name, name) == 0)
            return &g_rows[i];
    if (g_nrows == MAX_ROWS) {
        fprintf(stderr, "trace_v3: more than %d rows\n", MAX_ROWS);
        exit(1);
    }
    row_t *r = &g_rows[g_nrows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->cycles = cycles;
    for (int k = 0; k < 3; k++) {
        r->v[k] = malloc((size_t)g_replays * sizeof(double));
        if (!r->v[k]) {
            fprintf(stderr, "trace_v3: out of memory\n");
            exit(1);
        }
        for (int i = 0; i < g_replays; i++)
            r->v[k][i] = NAN;
    }
    return r;
}

static void rows_reset(void)
{
    for (int i = 0; i < g_nrows; i++)
        for (int k = 0; k < 3; k++)
            free(g_rows[i].v[k]);
    g_nrows = 0;
}

/* Values of one quantity over the blocks (or items) of one replay. */
typedef struct sample {
    double v[V3_TRACE_BLOCKS * V3_TRACE_ITEMS];
    int n;
    double traced;
} sample_t;

static void sample_start(sample_t *s)
{
    s->n = 0;
    s->traced = NAN;
}

static void sample_add(sample_t *s, double v, int is_traced)
{
    s->v[s->n++] = v;
    if (is_traced && isnan(s->traced))
        s->traced = v;
}

static void sample_put(sample_t *s, const char *name, int cycles)
{
    if (s->n == 0)
        return;
    row_t *r = row_of(name, cycles);
    double mx = s->v[0];
    for (int i = 1; i < s->n; i++)
        mx = s->v[i] > mx ? s->v[i] : mx;
    r->v[0][g_rep] = s->traced;
    r->v[2][g_rep] = mx;
    r->v[1][g_rep] = median(s->v, s->n);
}

/* ------------------------------------------------------ reading a trace -- */

static int stamped(const v3_stamp_t *s) { return s->ns != 0; }

/* SM clock estimate: cycles and ns summed over every block's whole run. */
static double g_clk_sum, g_ns_sum;
/* Smallest positive step of the global timer seen between two stamps. */
static unsigned long long g_ns_step;

static void note_span(const v3_stamp_t *a, const v3_stamp_t *b)
{
    if (stamped(a) && stamped(b) && b->ns > a->ns) {
        g_clk_sum += (double)(b->clk - a->clk);
        g_ns_sum += (double)(b->ns - a->ns);
    }
}

static void note_step(const v3_stamp_t *a, const v3_stamp_t *b)
{
    if (stamped(a) && stamped(b) && b->ns > a->ns && (g_ns_step == 0 || b->ns - a->ns < g_ns_step))
        g_ns_step = b->ns - a->ns;
}

/* Cycles from slot a to slot b of one block's row, NaN where one is missing. */
static double cycles(const v3_stamp_t *row, int a, int b)
{
    return stamped(&row[a]) && stamped(&row[b]) ? (double)(row[b].clk - row[a].clk) : NAN;
}

static const char *const FWD_PHASE[V3F_SLOTS] = {"",
                                                 "staging: copies issued",
                                                 "staging: x rows landed",
                                                 "staging: W1 slice landed",
                                                 "layer 1 chain",
                                                 "cluster barrier",
                                                 "h1 push + store",
                                                 "W2 slice landed",
                                                 "h1 exchange wait",
                                                 "layer 2 chain",
                                                 "h2 push + store",
                                                 "W3 slice landed",
                                                 "h2 exchange wait",
                                                 "layer 3 chain + store"};
static const char *const BWD_PHASE[V3B_ITEM0] = {"",
                                                 "staging: dout copies issued",
                                                 "staging: dout rows landed",
                                                 "staging: dh2 exchange armed",
                                                 "staging: W3 rows landed (after dout)",
                                                 "dh2 chain",
                                                 "cluster barrier",
                                                 "dh2 push + store",
                                                 "dh2 flag handed on (arrive)",
                                                 "W2 rows + dh2 exchange wait",
                                                 "dh1 chain",
                                                 "dh1 store",
                                                 "dh1 flag publish"};
static const char *const KIND[6] = {"dW3 tile", "db3", "dW2 tile", "db2", "dW1 tile", "db1"};

/* One row per phase p in [1, n) of a kernel whose blocks' slots are rows of
 * `stride` stamps from base: the cycles from slot p - 1 to slot p. Also
 * notes the global timer's step. */
static void put_phases(sample_t *s, const v3_stamp_t *base, int stride, int n,
                       const char *const *names, const char *kernel, int traced)
{
    char name[64];
    for (int p = 1; p < n; p++) {
        sample_start(s);
        for (int b = 0; b < V3_TRACE_BLOCKS; b++) {
            const v3_stamp_t *row = base + (size_t)b * stride;
            const double c = cycles(row, p - 1, p);
            if (!isnan(c))
                sample_add(s, c, b == traced);
            note_step(&row[p - 1], &row[p]);
        }
        snprintf(name, sizeof name, "%s %s", kernel, names[p]);
        sample_put(s, name, 1);
    }
}

/* Blocks of one kernel, per replay, that shared their SM with another block
 * of the same launch (printed as medians after the table). */
static double *g_shared[2];

enum { MAX_SM = 1024 };

/* Marks in shared[b] whether block b (START stamped) shared its SM; returns
 * how many did. */
static int sharing(const v3_stamp_t *start, int stride, const unsigned *sm, int *shared)
{
    static int count[MAX_SM];
    memset(count, 0, sizeof count);
    for (int b = 0; b < V3_TRACE_BLOCKS; b++)
        if (stamped(&start[(size_t)b * stride]) && sm[b] < MAX_SM)
            count[sm[b]]++;
    int n = 0;
    for (int b = 0; b < V3_TRACE_BLOCKS; b++) {
        shared[b] = stamped(&start[(size_t)b * stride]) && sm[b] < MAX_SM && count[sm[b]] > 1;
        n += shared[b];
    }
    return n;
}

/* Turns one replay's trace into this replay's values of every row. */
static void digest(const v3_trace_t *t, int traced, int *nf, int *nb)
{
    static sample_t s; /* large: not on the stack */
    char name[64];
    *nf = *nb = 0;
    unsigned long long t0 = 0;
    for (int b = 0; b < V3_TRACE_BLOCKS; b++) {
        if (stamped(&t->fwd[b][V3F_START])) {
            (*nf)++;
            if (t0 == 0 || t->fwd[b][V3F_START].ns < t0)
                t0 = t->fwd[b][V3F_START].ns;
        }
        if (stamped(&t->bwd[b][V3B_START]))
            (*nb)++;
    }
    for (int b = 0; b < V3_TRACE_BLOCKS && t0 == 0; b++) /* forward on cuda-v2's kernels */
        if (stamped(&t->bwd[b][V3B_START]) && (t0 == 0 || t->bwd[b][V3B_START].ns < t0))
            t0 = t->bwd[b][V3B_START].ns;

    /* Timeline, µs after the forward's first block. */
    struct {
        const char *name;
        int fwd, slot;
    } const when[] = {{"forward: block starts", 1, V3F_START},
                      {"forward: block ends", 1, V3F_L3},
                      {"backward: block starts", 0, V3B_START},
                      {"backward: dh2 published (row blocks)", 0, V3B_PUB2},
                      {"backward: dh1 published", 0, V3B_PUB1},
                      {"backward: block ends", 0, V3B_END}};
    for (size_t w = 0; w < sizeof when / sizeof when[0]; w++) {
        sample_start(&s);
        for (int b = 0; b < V3_TRACE_BLOCKS; b++) {
            const v3_stamp_t *st =
                when[w].fwd ? &t->fwd[b][when[w].slot] : &t->bwd[b][when[w].slot];
            if (stamped(st))
                sample_add(&s, (double)(st->ns - t0), b == traced);
        }
        sample_put(&s, when[w].name, 0);
        if (when[w].slot == V3B_START && !when[w].fwd) { /* and before its wait */
            sample_start(&s);
            for (int b = 0; b < V3_TRACE_BLOCKS; b++)
                if (stamped(&t->bwd_resident[b]) && t->bwd_resident[b].ns >= t0)
                    sample_add(&s, (double)(t->bwd_resident[b].ns - t0), b == traced);
            sample_put(&s, "backward: block resident (before its wait)", 0);
        }
    }

    /* Block ends of the blocks that shared an SM and of the others. */
    static int shared[2][V3_TRACE_BLOCKS];
    g_shared[0][g_rep] = sharing(&t->fwd[0][V3F_START], V3F_SLOTS, t->sm_fwd, shared[0]);
    g_shared[1][g_rep] = sharing(&t->bwd[0][V3B_START], V3B_SLOTS, t->sm_bwd, shared[1]);
    for (int k = 0; k < 2; k++)
        for (int alone = 0; alone < 2; alone++) {
            sample_start(&s);
            for (int b = 0; b < V3_TRACE_BLOCKS; b++) {
                const v3_stamp_t *st = k == 0 ? &t->fwd[b][V3F_L3] : &t->bwd[b][V3B_END];
                if (stamped(st) && shared[k][b] != alone)
                    sample_add(&s, (double)(st->ns - t0), b == traced);
            }
            snprintf(name, sizeof name, "%s: block ends, blocks %s",
                     k == 0 ? "forward" : "backward",
                     alone ? "alone on their SM" : "sharing an SM");
            sample_put(&s, name, 0);
        }

    /* Forward phases; the backward's row-local phases (blocks holding rows). */
    put_phases(&s, t->fwd[0], V3F_SLOTS, V3F_SLOTS, FWD_PHASE, "fwd", traced);
    put_phases(&s, t->bwd[0], V3B_SLOTS, V3B_ITEM0, BWD_PHASE, "bwd", traced);
    for (int b = 0; b < V3_TRACE_BLOCKS; b++)
        note_span(&t->fwd[b][V3F_START], &t->fwd[b][V3F_L3]);
    sample_start(&s);
    for (int b = 0; b < V3_TRACE_BLOCKS; b++)
        if (!stamped(&t->bwd[b][V3B_STAGED])) {
            const double c = cycles(t->bwd[b], V3B_START, V3B_PUB1);
            if (!isnan(c))
                sample_add(&s, c, b == traced);
        }
    sample_put(&s, "bwd (blocks without rows) flags published", 1);

    /* Gradient items by kind: flag wait and work. */
    for (int kind = 0; kind < 12; kind++)
        for (int step = 0; step < 2; step++) {
            sample_start(&s);
            for (int b = 0; b < V3_TRACE_BLOCKS; b++)
                for (int k = 0; k < V3_TRACE_ITEMS; k++)
                    if (t->item[b][k] == kind + 1) {
                        const int s0 = V3B_ITEM0 + 3 * k;
                        const double c = cycles(t->bwd[b], s0 + step, s0 + step + 1);
                        if (!isnan(c))
                            sample_add(&s, c, b == traced);
                    }
            snprintf(name, sizeof name, "bwd %s (pair %d): %s", KIND[kind % 6], kind / 6,
                     step == 0 ? "flag wait" : "work");
            sample_put(&s, name, 1);
        }
    /* From the block's last item to finish (of either group) to its end
     * (the tree's last level above 512). */
    sample_start(&s);
    for (int b = 0; b < V3_TRACE_BLOCKS; b++) {
        int last = -1;
        for (int k = 0; k < V3_TRACE_ITEMS; k++)
            if (t->item[b][k] && (last < 0 || t->bwd[b][V3B_ITEM0 + 3 * k + 2].ns >
                                                  t->bwd[b][V3B_ITEM0 + 3 * last + 2].ns))
                last = k;
        const int from = last < 0 ? V3B_PUB1 : V3B_ITEM0 + 3 * last + 2;
        const double c = cycles(t->bwd[b], from, V3B_END);
        if (!isnan(c))
            sample_add(&s, c, b == traced);
    }
    sample_put(&s, "bwd last item -> block end", 1);
    for (int b = 0; b < V3_TRACE_BLOCKS; b++)
        note_span(&t->bwd[b][V3B_START], &t->bwd[b][V3B_END]);
}

/* -------------------------------------------------------------- driver -- */

typedef struct bufs {
    float *params, *x, *dout, *h1, *h2, *out, *grads, *ws;
} bufs_t;

/* The six tensors of the flat parameter layout at p (abi/auxtrunk.h). */
static void carve(float *p, float *t[6])
{
    const atk_dims_t *d = &DIMS;
    const size_t off[6] = {AUXTRUNK_W1_OFFSET(d), AUXTRUNK_B1_OFFSET(d), AUXTRUNK_W2_OFFSET(d),
                           AUXTRUNK_B2_OFFSET(d), AUXTRUNK_W3_OFFSET(d), AUXTRUNK_B3_OFFSET(d)};
    for (int i = 0; i < 6; i++)
        t[i] = p + off[i];
}

static atk_params_t params_of(float *p)
{
    float *t[6];
    carve(p, t);
    const atk_params_t v = {t[0], t[1], t[2], t[3], t[4], t[5]};
    return v;
}

static atk_grads_t grads_of(float *p)
{
    float *t[6];
    carve(p, t);
    const atk_grads_t v = {t[0], t[1], t[2], t[3], t[4], t[5]};
    return v;
}

static float *dev_alloc(size_t floats)
{
    float *p;
    CK(cudaMalloc((void **)&p, floats * sizeof(float)));
    CK(cudaMemset(p, 0xff, floats * sizeof(float))); /* NaN poison */
    return p;
}

static void fill(float *dev, size_t n, tst_rng_t *rng, float scale)
{
    float *h = malloc(n * sizeof *h);
    if (!h) {
        fprintf(stderr, "trace_v3: out of memory\n");
        exit(1);
    }
    tst_rng_fill(rng, h, n, -scale, scale);
    CK(cudaMemcpy(dev, h, n * sizeof *h, cudaMemcpyHostToDevice));
    free(h);
}

/* 1 if the n floats at device a and b are the same bytes. */
static int same_bytes(const float *a, const float *b, size_t n)
{
    const size_t bytes = n * sizeof(float);
    char *ha = malloc(bytes), *hb = malloc(bytes);
    if (!ha || !hb) {
        fprintf(stderr, "trace_v3: out of memory\n");
        exit(1);
    }
    CK(cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost));
    const int same = memcmp(ha, hb, bytes) == 0;
    free(ha);
    free(hb);
    return same;
}

static void step(const bufs_t *m, int B, int v2, cudaStream_t s)
{
    const atk_params_t p = params_of(m->params);
    const atk_grads_t g = grads_of(m->grads);
    if (v2) {
        CK(v2_forward(DIMS, &p, m->x, B, m->h1, m->h2, m->out, s));
        CK(v2_backward(DIMS, &p, m->x, m->h1, m->h2, m->dout, B, &g, 0, m->ws, s));
    } else {
        CK(v3_fused_forward(DIMS, &p, m->x, B, m->h1, m->h2, m->out, s));
        CK(v3_fused_backward(DIMS, &p, m->x, m->h1, m->h2, m->dout, B, &g, 0, m->ws, s));
    }
}

/* One replay of exec on s, timed by events ev[0] and ev[1], in µs. */
static double replay_us(cudaGraphExec_t exec, cudaStream_t s, cudaEvent_t *ev)
{
    CK(cudaEventRecord(ev[0], s));
    CK(cudaGraphLaunch(exec, s));
    CK(cudaEventRecord(ev[1], s));
    CK(cudaEventSynchronize(ev[1]));
    float ms;
    CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    return 1000.0 * ms;
}

static void print_us(double v, int is_cycles, double mhz)
{
    if (isnan(v))
        printf(" — |");
    else
        printf(" %.2f |", is_cycles ? v / mhz : v / 1000.0);
}

static int usage(FILE *f)
{
    fprintf(f, "usage: auxtrunk-trace-v3 [--batches B,B,...] [--replays N] [--block K] [--once]\n"
               "  --batches  batches to trace (default 32,128,256,512; at most 1024)\n"
               "  --replays  graph replays whose stamps are read (default 200)\n"
               "  --block    the block whose phases get their own column (default 0)\n"
               "  --once     only check each batch bit-identical to cuda-v2, one call each\n"
               "Needs a CUDA device (sm_90). Prints Markdown tables, times in µs.\n");
    return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    int batches[MAX_BATCHES] = {32, 128, 256, 512}, nb = 4, traced = 0, once = 0;
    g_replays = 200;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(stdout);
        if (strcmp(argv[i], "--once") == 0) {
            once = 1;
            continue;
        }
        if (i + 1 >= argc)
            return usage(stderr);
        if (strcmp(argv[i], "--batches") == 0) {
            nb = 0;
            for (char *q = argv[++i]; *q && nb < MAX_BATCHES;) {
                char *end;
                const long b = strtol(q, &end, 10);
                if (end == q || b < 1 || b > V3_MAX_BATCH)
                    return usage(stderr);
                batches[nb++] = (int)b;
                q = *end == ',' ? end + 1 : end;
                if (*end && *end != ',')
                    return usage(stderr);
            }
        } else if (strcmp(argv[i], "--replays") == 0) {
            g_replays = atoi(argv[++i]);
            if (g_replays < 1)
                return usage(stderr);
        } else if (strcmp(argv[i], "--block") == 0) {
            traced = atoi(argv[++i]);
            if (traced < 0 || traced >= V3_TRACE_BLOCKS)
                return usage(stderr);
        } else {
            return usage(stderr);
        }
    }

    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
        fprintf(stderr, "auxtrunk-trace-v3: no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(v3_prepare());
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t ev[3];
    for (int i = 0; i < 3; i++)
        CK(cudaEventCreate(&ev[i]));

    int maxb = 0;
    for (int i = 0; i < nb; i++)
        maxb = batches[i] > maxb ? batches[i] : maxb;
    const size_t P = AUXTRUNK_PARAM_COUNT(&DIMS);
    const size_t ws3 = v3_workspace_floats(DIMS, maxb), ws2 = v2_workspace_floats(DIMS, maxb);
    bufs_t m3, m2;
    m3.params = m2.params = dev_alloc(P);
    m3.x = m2.x = dev_alloc((size_t)maxb * DIMS.enc);
    m3.dout = m2.dout = dev_alloc((size_t)maxb * DIMS.aux);
    bufs_t *mm[2] = {&m3, &m2};
    for (int k = 0; k < 2; k++) {
        mm[k]->h1 = dev_alloc((size_t)maxb * DIMS.h1);
        mm[k]->h2 = dev_alloc((size_t)maxb * DIMS.h2);
        mm[k]->out = dev_alloc((size_t)maxb * DIMS.aux);
        mm[k]->grads = dev_alloc(P);
        mm[k]->ws = dev_alloc(k == 0 ? ws3 : ws2);
    }
    tst_rng_t rng;
    tst_rng_seed(&rng, tst_seed("auxtrunk-trace-v3"));
    fill(m3.params, P, &rng, 0.1f);
    fill(m3.x, (size_t)maxb * DIMS.enc, &rng, 1.0f);
    fill(m3.dout, (size_t)maxb * DIMS.aux, &rng, 1.0f);

    v3_trace_t *t = malloc(sizeof *t);
    double *tf = malloc(TIMED * sizeof *tf), *tb = malloc(TIMED * sizeof *tb),
           *tg = malloc((size_t)(g_replays > TIMED ? g_replays : TIMED) * sizeof *tg);
    g_shared[0] = malloc((size_t)g_replays * sizeof(double));
    g_shared[1] = malloc((size_t)g_replays * sizeof(double));
    if (!t || !tf || !tb || !tg || !g_shared[0] || !g_shared[1]) {
        fprintf(stderr, "trace_v3: out of memory\n");
        return 1;
    }
    printf("# auxtrunk-trace-v3: %s, %d SMs, topology %d/%d/%d/%d, %d replays, traced block %d\n",
           prop.name, prop.multiProcessorCount, DIMS.enc, DIMS.h1, DIMS.h2, DIMS.aux, g_replays,
           traced);

    int failed = 0;
    for (int bi = 0; bi < nb; bi++) {
        const int B = batches[bi];
        fprintf(stderr, "trace_v3: batch %d\n", B);
        /* 1. Bit identity with cuda-v2. */
        step(&m3, B, 0, s);
        step(&m2, B, 1, s);
        CK(cudaStreamSynchronize(s));
        const int same = same_bytes(m3.out, m2.out, (size_t)B * DIMS.aux) &&
                         same_bytes(m3.h1, m2.h1, (size_t)B * DIMS.h1) &&
                         same_bytes(m3.h2, m2.h2, (size_t)B * DIMS.h2) &&
                         same_bytes(m3.grads, m2.grads, P);
        failed |= !same;
        if (once) {
            printf("B = %d: bit-identical to cuda-v2: %s\n", B, same ? "yes" : "NO");
            continue;
        }

        /* 2. Eager (synchronised each step) and graph times. */
        for (int i = 0; i < WARM + TIMED; i++) {
            const atk_params_t p = params_of(m3.params);
            const atk_grads_t g = grads_of(m3.grads);
            CK(cudaEventRecord(ev[0], s));
            CK(v3_fused_forward(DIMS, &p, m3.x, B, m3.h1, m3.h2, m3.out, s));
            CK(cudaEventRecord(ev[1], s));
            CK(v3_fused_backward(DIMS, &p, m3.x, m3.h1, m3.h2, m3.dout, B, &g, 0, m3.ws, s));
            CK(cudaEventRecord(ev[2], s));
            CK(cudaEventSynchronize(ev[2]));
            float a, b;
            CK(cudaEventElapsedTime(&a, ev[0], ev[1]));
            CK(cudaEventElapsedTime(&b, ev[1], ev[2]));
            if (i >= WARM)
                tf[i - WARM] = 1000.0 * a, tb[i - WARM] = 1000.0 * b;
        }
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        step(&m3, B, 0, s);
        CK(cudaStreamEndCapture(s, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        for (int i = 0; i < WARM + TIMED; i++) {
            const double us = replay_us(exec, s, ev);
            if (i >= WARM)
                tg[i - WARM] = us;
        }
        const double eager_f = median(tf, TIMED), eager_b = median(tb, TIMED),
                     graph_us = median(tg, TIMED);

        /* 3. Traced replays. */
        rows_reset();
        g_clk_sum = g_ns_sum = 0.0;
        g_ns_step = 0;
        int nf = 0, nbk = 0;
        for (g_rep = 0; g_rep < g_replays; g_rep++) {
            CK(v3_trace_clear());
            tg[g_rep] = replay_us(exec, s, ev);
            CK(v3_trace_get(t));
            digest(t, traced, &nf, &nbk);
        }
        const double traced_graph_us = median(tg, g_replays);
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(graph));

        const double mhz = g_ns_sum > 0 ? 1000.0 * g_clk_sum / g_ns_sum : NAN;
        printf("\n## B = %d: forward %d blocks%s, backward %d blocks; bit-identical to cuda-v2: "
               "%s\n\n",
               B, nf, nf ? "" : " (cuda-v2's kernels)", nbk, same ? "yes" : "NO");
        printf("Events, medians of %d: eager forward %.2f µs, eager backward %.2f µs (each step "
               "synchronised), graph step %.2f µs (traced replays: %.2f). SM clock from the stamps "
               "%.0f MHz; global-timer step seen %llu ns.\n\n",
               TIMED, eager_f, eager_b, graph_us, traced_graph_us, mhz, g_ns_step);
        printf("| µs (median of %d replays) | block %d | median over blocks | max over blocks |\n",
               g_replays, traced);
        printf("| --- | --- | --- | --- |\n");
        for (int r = 0; r < g_nrows; r++) {
            row_t *w = &g_rows[r];
            const char *sect = w->cycles ? "" : "at ";
            printf("| %s%s |", sect, w->name);
            for (int k = 0; k < 3; k++)
                print_us(median(w->v[k], g_replays), w->cycles, mhz);
            printf("\n");
        }
        printf("\nBlocks sharing their SM with another block of the same launch (median of %d "
               "replays): forward %.0f of %d, backward %.0f of %d.\n",
               g_replays, median(g_shared[0], g_replays), nf, median(g_shared[1], g_replays), nbk);
        fflush(stdout);
    }
    rows_reset();
    free(t);
    free(tf);
    free(tb);
    free(tg);
    free(g_shared[0]);
    free(g_shared[1]);
    if (failed) {
        fprintf(stderr, "auxtrunk-trace-v3: results differ from cuda-v2\n");
        return 1;
    }
    return 0;
}
