/*
 * bench_v3_fast.cu — auxtrunk-bench-v3-fast: fast mode's forward and
 * backward, cuda-v2's (trunk_v2_fast.cu, mma.sync) against cuda-v3's Hopper
 * layer GEMM (trunk_v3_fast_wgmma.cu), on the production topology
 * 256/256/256/128 (docs/perf-notes-v3-fast.md quotes it). For each batch:
 * CUDA events around each call, a warm-up, the median of --iters calls.
 * Forward table: the three-layer forward of each, in each wgmma
 * weight-staging variant, layer 1 alone of each variant (the per-layer
 * cost) and the chain kernel's one-launch forward (v3_wgmma_forward, 64-
 * and 128-row tiles); then
 * the largest relative difference between the wgmma forward's
 * out and cuda-v2's (both TF32: a sanity figure, about 1e-3, not a check).
 * Backward table (on the records of cuda-v2's forward): cuda-v2's fast
 * backward, cuda-v3's (v3_fast_backward: the wgmma hidden gradients, then
 * the weight gradients as V3_WGMMA_WEIGHT_GRADS picks), cuda-v2's weight
 * gradients alone (v2_fast_weight_grads; cuda-v2's hidden gradients are its
 * backward less that), the wgmma weight gradients alone
 * (v3_wgmma_weight_grads), the two wgmma hidden-gradient launches alone and
 * the chain kernel's one launch of both (v3_wgmma_hidden_grads, 64- and
 * 128-row tiles); then the largest relative difference between the two
 * backwards over the
 * six gradients (a sanity figure, about 1e-3); from B = V2_FAST_MIN_BATCH on
 * (the weight gradients' domain).
 *
 *   auxtrunk-bench-v3-fast [--batches 1024,4096,16384,65536] [--iters 50]
 *                          [--tile auto|tall|short|narrow|paired] [--graph]
 *
 * --tile: the tile shape of the wgmma layer and hidden-gradient columns
 * (auto, the default: as fast mode picks it, V3_WGMMA_TILE_AUTO); the v3
 * fast backward column always runs as fast mode does.
 *
 * --graph: instead of the two tables, the graph-replayed step by parts,
 * from B = V3_WGMMA_MIN_BATCH: growing prefixes of the step's launches
 * (layer 1; the forward; + dh2_pre; + dh1_pre; + dW1 and its sum on the
 * same stream), then the forked step built from the same launches, the
 * forked step without dW1, the step as fast mode runs it
 * (v3_fast_forward, v3_fast_backward_forked) and the unforked step (every
 * weight gradient in one launch after dh1_pre), each captured into a graph
 * and replayed between two events, the median of --iters replays. The
 * difference between two columns is what a part adds to the replayed
 * step, overlap included; the forked step and fast mode's differ only
 * where fast mode picks the chain forward (marked). With --tile auto the launches
 * take the call tile (v3_wgmma_call_tile), as fast mode's do.
 *
 * Not a test: it asserts nothing about the times. Inputs stay the same on
 * every call (at small batches they sit in L2). Needs a device that runs
 * the sm_90a image (exit 1 otherwise).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_ck.h"
extern "C" {
#include "rng.h"
}
#include "trunk_types.h"
#include "trunk_v2.h"
#include "trunk_v3_fast.h"

namespace {

const atk_dims_t D = {256, 256, 256, 128};

float *dev_random(tst_rng_t *r, size_t n, float s)
{
    std::vector<float> h(n);
    tst_rng_fill(r, h.data(), n, -s, s);
    float *d;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

/* Median µs of iters calls of f (after a warm-up), each between two events. */
template <class F>
double median_us(int iters, F f)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++)
        CK(f());
    std::vector<double> t(iters);
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(a));
        CK(f());
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[i] = ms * 1e3;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[iters / 2];
}

double max_rel_diff(const float *dx, const float *dy, size_t n)
{
    std::vector<float> x(n), y(n);
    CK(cudaMemcpy(x.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)x[i] - y[i]));
        s = fmax(s, fabs((double)y[i]));
    }
    return e / (s > 0 ? s : 1);
}

/* Median µs of iters replays of the graph that capture(s, side) queues on
 * s (after a warm-up), each between two events on s. */
template <class F>
double graph_median_us(int iters, cudaStream_t s, cudaStream_t side, F capture)
{
    cudaGraph_t g;
    cudaGraphExec_t x;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const cudaError_t e = capture(s, side);
    CK(cudaStreamEndCapture(s, &g));
    CK(e);
    CK(cudaGraphInstantiate(&x, g, 0));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++)
        CK(cudaGraphLaunch(x, s));
    std::vector<double> t(iters);
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(a, s));
        CK(cudaGraphLaunch(x, s));
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[i] = ms * 1e3;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaGraphExecDestroy(x));
    CK(cudaGraphDestroy(g));
    std::sort(t.begin(), t.end());
    return t[iters / 2];
}

/* The --graph table (see the file comment). */
void graph_parts(const std::vector<int> &batches, int iters, int tile, const atk_params_t &p,
                 tst_rng_t *r)
{
    printf("fast-mode step by parts, graph-replayed, median of %d replays, µs (each column "
           "adds to the one before it but the last four)\n",
           iters);
    printf("%8s %9s %9s %9s %9s %12s %12s %12s %12s %12s\n", "B", "L1", "forward", "+dh2",
           "+dh1", "+dW1 (one)", "+dW2,3 fork", "fork no dW1", "fast step", "unforked");
    cudaStream_t s, side;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    const v2_grad_layout_t L = v2_grad_layout(D);
    const int st = V3_WGMMA_STAGING_BLOCK4;
    for (int B : batches) {
        if (B < V3_WGMMA_MIN_BATCH) {
            printf("%8d %9s\n", B, "-");
            continue;
        }
        float *x = dev_random(r, (size_t)B * D.enc, 1.0f);
        float *dout = dev_random(r, (size_t)B * D.aux, 1.0f);
        float *h1, *h2, *out, *ws, *gb;
        const size_t nws = v3_fast_workspace_floats(D, B);
        CK(cudaMalloc(&h1, (size_t)B * D.h1 * sizeof(float)));
        CK(cudaMalloc(&h2, (size_t)B * D.h2 * sizeof(float)));
        CK(cudaMalloc(&out, (size_t)B * D.aux * sizeof(float)));
        CK(cudaMalloc(&ws, nws * sizeof(float)));
        CK(cudaMalloc(&gb, L.off[6] * sizeof(float)));
        atk_grads_t g;
        g.dw1 = gb + L.off[0], g.db1 = gb + L.off[1], g.dw2 = gb + L.off[2];
        g.db2 = gb + L.off[3], g.dw3 = gb + L.off[4], g.db3 = gb + L.off[5];
        const v2_workspace_t W = v2_workspace_carve(D, B, ws);
        const int fw[3] = {D.h1, D.h2, D.aux}, bw[2] = {D.h2, D.h1};
        const int tf = tile == V3_WGMMA_TILE_AUTO ? v3_wgmma_call_tile(B, fw, 3) : tile;
        const int tb = tile == V3_WGMMA_TILE_AUTO ? v3_wgmma_call_tile(B, bw, 2) : tile;
        /* the step's launches, in order, each returning its error */
        auto layers = [&](int n, cudaStream_t q) {
            cudaError_t e = v3_wgmma_layer(x, p.w1, p.b1, h1, B, D.h1, D.enc, 1, st, 0, tf, q);
            if (e == cudaSuccess && n > 1)
                e = v3_wgmma_layer(h1, p.w2, p.b2, h2, B, D.h2, D.h1, 1, st, 1, tf, q);
            if (e == cudaSuccess && n > 2)
                e = v3_wgmma_layer(h2, p.w3, p.b3, out, B, D.aux, D.h2, 0, st, 1, tf, q);
            return e;
        };
        auto dh2 = [&](cudaStream_t q) {
            return v3_wgmma_hidden_grad(dout, p.w3, h2, W.dh2, B, D.h2, D.aux, 0, tb, q);
        };
        auto dh1 = [&](cudaStream_t q) {
            return v3_wgmma_hidden_grad(W.dh2, p.w2, h1, W.dh1, B, D.h1, D.h2, 1, tb, q);
        };
        auto dw1 = [&](cudaStream_t q) {
            return v3_wgmma_weight_grads_of(D, x, NULL, NULL, NULL, W.dh1, NULL, B, &g, 0,
                                            W.partials, 0, 0, 1, q);
        };
        auto dw23 = [&](cudaStream_t q) {
            return v3_wgmma_weight_grads_of(D, NULL, h1, h2, dout, NULL, W.dh2, B, &g, 0,
                                            W.partials, 1, 2, 0, q);
        };
        /* the prefix of n launches on one stream (n = 1..6) */
        auto prefix = [&](int n) {
            return [&, n](cudaStream_t q, cudaStream_t) {
                cudaError_t e = layers(n < 3 ? n : 3, q);
                if (e == cudaSuccess && n > 3)
                    e = dh2(q);
                if (e == cudaSuccess && n > 4)
                    e = dh1(q);
                if (e == cudaSuccess && n > 5)
                    e = dw1(q);
                return e;
            };
        };
        /* the forked step of fast mode's launches, with or without dW1 */
        auto forked = [&](bool with_dw1) {
            return [&, with_dw1](cudaStream_t q, cudaStream_t sd) {
                cudaError_t e = layers(3, q);
                if (e == cudaSuccess)
                    e = dh2(q);
                if (e != cudaSuccess || (e = v2_fork(q, sd, fork)) != cudaSuccess)
                    return e;
                const cudaError_t es = dw23(sd);
                e = dh1(q);
                if (e == cudaSuccess && with_dw1)
                    e = dw1(q);
                return v2_join(q, sd, join, es, e);
            };
        };
        auto fast_step = [&](cudaStream_t q, cudaStream_t sd) {
            cudaError_t e = v3_fast_forward(D, &p, x, B, h1, h2, out, ws, q);
            return e != cudaSuccess ? e
                                    : v3_fast_backward_forked(D, &p, x, h1, h2, dout, B, &g, 0,
                                                              ws, q, sd, fork, join);
        };
        /* the unforked step: every weight gradient in one launch after dh1_pre */
        auto one_stream = [&](cudaStream_t q, cudaStream_t) {
            cudaError_t e = prefix(5)(q, q);
            return e != cudaSuccess ? e
                                    : v3_wgmma_weight_grads(D, x, h1, h2, dout, W.dh1, W.dh2, B,
                                                            &g, 0, W.partials, 1, q);
        };
        double t[9];
        t[0] = graph_median_us(iters, s, side, prefix(1));
        t[1] = graph_median_us(iters, s, side, prefix(3));
        t[2] = graph_median_us(iters, s, side, prefix(4));
        t[3] = graph_median_us(iters, s, side, prefix(5));
        t[4] = graph_median_us(iters, s, side, prefix(6));
        t[5] = graph_median_us(iters, s, side, forked(true));
        t[6] = graph_median_us(iters, s, side, forked(false));
        t[7] = graph_median_us(iters, s, side, fast_step);
        t[8] = graph_median_us(iters, s, side, one_stream);
        printf("%8d %9.2f %9.2f %9.2f %9.2f %12.2f %12.2f %12.2f %12.2f %12.2f%s\n", B, t[0], t[1],
               t[2], t[3], t[4], t[5], t[6], t[7], t[8],
               v3_wgmma_chain_forward_picked(B) ? "  (fast step: chain forward)" : "");
        fflush(stdout);
        float *bufs[] = {x, dout, h1, h2, out, ws, gb};
        for (float *b : bufs)
            CK(cudaFree(b));
    }
    CK(cudaEventDestroy(fork));
    CK(cudaEventDestroy(join));
    CK(cudaStreamDestroy(s));
    CK(cudaStreamDestroy(side));
}

} /* namespace */

int main(int argc, char **argv)
{
    std::vector<int> batches = {1024, 4096, 16384, 65536};
    static const char *const tile_names[] = {"auto", "tall", "short", "narrow", "paired"};
    int iters = 50, tile = -1;
    bool graph = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--batches") == 0 && i + 1 < argc) {
            batches.clear();
            for (char *t = strtok(argv[++i], ","); t; t = strtok(NULL, ","))
                batches.push_back(atoi(t));
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--tile") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            for (int t = V3_WGMMA_TILE_AUTO; t <= V3_WGMMA_TILE_PAIRED; t++)
                tile = strcmp(v, tile_names[t]) == 0 ? t : tile;
            if (tile < 0) {
                fprintf(stderr, "%s: --tile takes auto, tall, short, narrow or paired\n",
                        argv[0]);
                return 2;
            }
        } else if (strcmp(argv[i], "--graph") == 0) {
            graph = true;
        } else {
            const bool help = strcmp(argv[i], "--help") == 0;
            fprintf(
                help ? stdout : stderr,
                "usage: %s [--batches 1024,4096,16384,65536] [--iters 50]\n"
                "          [--tile auto|tall|short|narrow|paired] [--graph]\n"
                "  --tile   tile shape of the wgmma layer columns (auto: as fast mode picks it)\n"
                "  --graph  the graph-replayed step by parts instead of the eager tables\n",
                argv[0]);
            return help ? 0 : 2;
        }
    }
    if (tile < 0)
        tile = V3_WGMMA_TILE_AUTO;
    if (iters < 1 || batches.empty())
        return 2;
    CK(v3_fast_prepare());
    if (!v3_wgmma_available()) {
        fprintf(stderr, "auxtrunk-bench-v3-fast: this device does not run the sm_90a image\n");
        return 1;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("auxtrunk-bench-v3-fast on %s: %d/%d/%d/%d, wgmma tiles %s\n", prop.name, D.enc,
           D.h1, D.h2, D.aux, tile_names[tile]);

    tst_rng_t r;
    tst_rng_seed(&r, tst_seed("auxtrunk-bench-v3-fast"));
    atk_params_t p;
    float *w1 = dev_random(&r, (size_t)D.enc * D.h1, 1.5f / 16), *b1 = dev_random(&r, D.h1, 0.5f);
    float *w2 = dev_random(&r, (size_t)D.h1 * D.h2, 1.5f / 16), *b2 = dev_random(&r, D.h2, 0.5f);
    float *w3 = dev_random(&r, (size_t)D.h2 * D.aux, 1.5f / 16), *b3 = dev_random(&r, D.aux, 0.5f);
    p.w1 = w1, p.b1 = b1, p.w2 = w2, p.b2 = b2, p.w3 = w3, p.b3 = b3;
    if (graph) {
        graph_parts(batches, iters, tile, p, &r);
        return 0;
    }
    printf("fast-mode forward, median of %d calls, µs\n", iters);
    printf("%8s %12s %14s %14s %14s %14s %12s %12s %12s\n", "B", "v2 fast fwd", "wgmma fwd (1)",
           "wgmma fwd (2)", "wgmma L1 (1)", "wgmma L1 (2)", "chain64 fwd", "chain128 fwd",
           "out diff");
    float *chain_ws; /* the chain kernel's prepared weights */
    CK(cudaMalloc(&chain_ws, v3_wgmma_chain_scratch_floats(D) * sizeof(float)));
    for (int B : batches) {
        float *x = dev_random(&r, (size_t)B * D.enc, 1.0f);
        float *h1, *h2, *out, *out2;
        CK(cudaMalloc(&h1, (size_t)B * D.h1 * sizeof(float)));
        CK(cudaMalloc(&h2, (size_t)B * D.h2 * sizeof(float)));
        CK(cudaMalloc(&out, (size_t)B * D.aux * sizeof(float)));
        CK(cudaMalloc(&out2, (size_t)B * D.aux * sizeof(float)));
        auto wgmma_fwd = [&](int staging, float *o) {
            cudaError_t e;
            if ((e = v3_wgmma_layer(x, w1, b1, h1, B, D.h1, D.enc, 1, staging, 0, tile, 0)) !=
                    cudaSuccess ||
                (e = v3_wgmma_layer(h1, w2, b2, h2, B, D.h2, D.h1, 1, staging, 1, tile, 0)) !=
                    cudaSuccess)
                return e;
            return v3_wgmma_layer(h2, w3, b3, o, B, D.aux, D.h2, 0, staging, 1, tile, 0);
        };
        const double v2 =
            median_us(iters, [&] { return v2_fast_forward(D, &p, x, B, h1, h2, out2, 0); });
        double fwd[2], l1[2];
        for (int s = 0; s < 2; s++) {
            const int staging = s ? V3_WGMMA_STAGING_BLOCK4 : V3_WGMMA_STAGING_SCALAR;
            fwd[s] = median_us(iters, [&] { return wgmma_fwd(staging, out); });
            l1[s] = median_us(iters, [&] {
                return v3_wgmma_layer(x, w1, b1, h1, B, D.h1, D.enc, 1, staging, 0, tile, 0);
            });
        }
        double chain[2];
        for (int c = 0; c < 2; c++)
            chain[c] = median_us(iters, [&] {
                return v3_wgmma_forward(D, &p, x, B, h1, h2, out, chain_ws,
                                        c ? V3_WGMMA_CHAIN_TILE_128 : V3_WGMMA_CHAIN_TILE_64, 0);
            });
        CK(wgmma_fwd(V3_WGMMA_STAGING_BLOCK4, out));
        CK(v2_fast_forward(D, &p, x, B, h1, h2, out2, 0));
        CK(cudaDeviceSynchronize());
        const double diff = max_rel_diff(out, out2, (size_t)B * D.aux);
        printf("%8d %12.1f %14.1f %14.1f %14.1f %14.1f %12.1f %12.1f %12.1e\n", B, v2, fwd[0],
               fwd[1], l1[0], l1[1], chain[0], chain[1], diff);
        fflush(stdout);
        CK(cudaFree(x));
        CK(cudaFree(h1));
        CK(cudaFree(h2));
        CK(cudaFree(out));
        CK(cudaFree(out2));
    }
    printf("(v2 fast runs cuda-v2's exact kernels below B = %d)\n", V2_FAST_MIN_BATCH);

    printf("\nfast-mode backward, median of %d calls, µs (v3 fast: wgmma hidden gradients from "
           "B = %d)\n",
           iters, V3_WGMMA_MIN_BATCH);
    printf("%8s %12s %12s %14s %14s %14s %14s %12s %12s %12s\n", "B", "v2 fast bwd", "v3 fast bwd",
           "v2 wgrads", "v2 dh (diff)", "wgmma wgrads", "wgmma dh2+dh1", "chain64 dh",
           "chain128 dh", "grad diff");
    const size_t P = v2_grad_layout(D).off[6];
    for (int B : batches) {
        if (B < V2_FAST_MIN_BATCH) { /* below the fast weight gradients' domain */
            printf("%8d %12s\n", B, "-");
            continue;
        }
        float *x = dev_random(&r, (size_t)B * D.enc, 1.0f);
        float *dout = dev_random(&r, (size_t)B * D.aux, 1.0f);
        float *h1, *h2, *out, *ws, *gv2, *gv3;
        const size_t nws = v3_fast_workspace_floats(D, B);
        CK(cudaMalloc(&h1, (size_t)B * D.h1 * sizeof(float)));
        CK(cudaMalloc(&h2, (size_t)B * D.h2 * sizeof(float)));
        CK(cudaMalloc(&out, (size_t)B * D.aux * sizeof(float)));
        CK(cudaMalloc(&ws, nws * sizeof(float)));
        CK(cudaMalloc(&gv2, P * sizeof(float)));
        CK(cudaMalloc(&gv3, P * sizeof(float)));
        CK(v2_fast_forward(D, &p, x, B, h1, h2, out, 0));
        const v2_grad_layout_t L = v2_grad_layout(D);
        auto grads_at = [&](float *base) {
            atk_grads_t g;
            g.dw1 = base + L.off[0], g.db1 = base + L.off[1], g.dw2 = base + L.off[2];
            g.db2 = base + L.off[3], g.dw3 = base + L.off[4], g.db3 = base + L.off[5];
            return g;
        };
        const atk_grads_t g2 = grads_at(gv2), g3 = grads_at(gv3);
        const v2_workspace_t W = v2_workspace_carve(D, B, ws);
        const double bv2 = median_us(
            iters, [&] { return v2_fast_backward(D, &p, x, h1, h2, dout, B, &g2, 0, ws, 0); });
        const double bv3 = median_us(
            iters, [&] { return v3_fast_backward(D, &p, x, h1, h2, dout, B, &g3, 0, ws, 0); });
        const double wg = median_us(
            iters, [&] { return v2_fast_weight_grads(D, x, h1, h2, dout, B, &g3, 0, ws, 0); });
        const double wgv3 = median_us(iters, [&] {
            return v3_wgmma_weight_grads(D, x, h1, h2, dout, W.dh1, W.dh2, B, &g3, 0, W.partials, 0,
                                         0);
        });
        const double dh = median_us(iters, [&] {
            cudaError_t e = v3_wgmma_hidden_grad(dout, p.w3, h2, W.dh2, B, D.h2, D.aux, 0, tile, 0);
            return e != cudaSuccess
                       ? e
                       : v3_wgmma_hidden_grad(W.dh2, p.w2, h1, W.dh1, B, D.h1, D.h2, 1, tile, 0);
        });
        double cdh[2];
        for (int c = 0; c < 2; c++)
            cdh[c] = median_us(iters, [&] {
                return v3_wgmma_hidden_grads(D, &p, dout, h1, h2, B, W.dh2, W.dh1, chain_ws,
                                             c ? V3_WGMMA_CHAIN_TILE_128 : V3_WGMMA_CHAIN_TILE_64,
                                             0);
            });
        CK(v2_fast_backward(D, &p, x, h1, h2, dout, B, &g2, 0, ws, 0));
        CK(v3_fast_backward(D, &p, x, h1, h2, dout, B, &g3, 0, ws, 0));
        CK(cudaDeviceSynchronize());
        double diff = 0;
        for (int i = 0; i < 6; i++)
            diff =
                fmax(diff, max_rel_diff(gv3 + L.off[i], gv2 + L.off[i], L.off[i + 1] - L.off[i]));
        printf("%8d %12.1f %12.1f %14.1f %14.1f %14.1f %14.1f %12.1f %12.1f %12.1e\n", B, bv2, bv3,
               wg, bv2 - wg, wgv3, dh, cdh[0], cdh[1], diff);
        fflush(stdout);
        float *bufs[] = {x, dout, h1, h2, out, ws, gv2, gv3};
        for (float *b : bufs)
            CK(cudaFree(b));
    }
    CK(cudaFree(chain_ws));
    return 0;
}
