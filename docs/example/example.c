/*
 * example.c — a trainer's whole use of auxtrunk, to copy: load a plugin, init
 * a handle, one training step (forward, backward) and the target network's
 * infer on buffers where the plugin computes and on the trainer's own stream,
 * the step captured into a CUDA graph and replayed where the plugin claims
 * AUXTRUNK_CAP_GRAPH_CAPTURE, destroy, unload. docs/integrate.md explains each
 * call; space.h holds the buffers (host memory, or CUDA device memory).
 *
 *   auxtrunk-example [PLUGIN]   a file, a directory, or a plugin name looked
 *                               up in $AUXTRUNK_PLUGIN_PATH (default: cpu)
 *
 * Exit 0 when every call succeeds and the target network's output equals the
 * training forward's bit for bit (both use the same parameters here).
 */
#define _XOPEN_SOURCE 700 /* POSIX with realpath, for the loader */
#define AUXTRUNK_LOADER_IMPLEMENTATION
#include "auxtrunk_loader.h"
#include "space.h"

#include <stdio.h>

enum { B = 256, ENC = 256, H1 = 256, H2 = 256, AUX = 128 };

/* A parameter set, or its gradient, in one flat buffer: the ABI's flat
 * layout (W1, b1, W2, b2, W3, b3 at the AUXTRUNK_*_OFFSET of the config). */
static auxtrunk_params_t params_at(const auxtrunk_config_t *c, const float *w)
{
    auxtrunk_params_t p = {.struct_size = sizeof p,
                           .w1 = w + AUXTRUNK_W1_OFFSET(c),
                           .b1 = w + AUXTRUNK_B1_OFFSET(c),
                           .w2 = w + AUXTRUNK_W2_OFFSET(c),
                           .b2 = w + AUXTRUNK_B2_OFFSET(c),
                           .w3 = w + AUXTRUNK_W3_OFFSET(c),
                           .b3 = w + AUXTRUNK_B3_OFFSET(c)};
    return p;
}

static auxtrunk_grads_t grads_at(const auxtrunk_config_t *c, float *g)
{
    auxtrunk_grads_t d = {.struct_size = sizeof d,
                          .dw1 = g + AUXTRUNK_W1_OFFSET(c),
                          .db1 = g + AUXTRUNK_B1_OFFSET(c),
                          .dw2 = g + AUXTRUNK_W2_OFFSET(c),
                          .db2 = g + AUXTRUNK_B2_OFFSET(c),
                          .dw3 = g + AUXTRUNK_W3_OFFSET(c),
                          .db3 = g + AUXTRUNK_B3_OFFSET(c)};
    return d;
}

typedef struct step {
    auxtrunk_params_t online, target; /* the trained network and its lagged copy */
    auxtrunk_grads_t grads;           /* d(loss)/d(online): the host owns them */
    const float *x, *dout;            /* [B, ENC] encoder output; [B, AUX] loss gradient */
    float *out, *target_out;          /* [B, AUX] each */
} step_t;

/* One training step and the target network's forward, in stream order. A
 * trainer computes dout from out (its loss) between forward and backward, on
 * the same stream; here dout is fixed. */
static int32_t step(const auxtrunk_api_t *api, auxtrunk_handle_t *h, const step_t *s, void *stream)
{
    int32_t rc = api->forward(h, &s->online, s->x, B, s->out, 0, stream);
    if (rc == AUXTRUNK_OK)
        rc = api->backward(h, &s->online, s->x, s->dout, B, &s->grads, 0, stream);
    if (rc == AUXTRUNK_OK)
        rc = api->infer(h, &s->target, s->x, B, s->target_out, 0, stream);
    return rc;
}

/* Each step names itself, so a failure says which one. */
#define CHECK(what, status)                 \
    do {                                    \
        failed = (what);                    \
        if ((rc = (status)) != AUXTRUNK_OK) \
            goto done;                      \
    } while (0)

int main(int argc, char **argv)
{
    char msg[AUXTRUNK_LOAD_MESSAGE_MAX];
    auxtrunk_plugin_t pl;
    const char *which = argc > 1 ? argv[1] : "cpu";
    if (auxtrunk_plugin_load(&pl, which, msg, sizeof msg) != AUXTRUNK_LOAD_OK) {
        fprintf(stderr, "auxtrunk-example: %s\n", msg);
        return 1;
    }
    const auxtrunk_api_t *api = &pl.api;
    const int cuda = pl.space == AUXTRUNK_CAP_MEM_CUDA;
    const auxtrunk_config_t cfg = {.struct_size = sizeof cfg,
                                   .enc = ENC,
                                   .h1 = H1,
                                   .h2 = H2,
                                   .aux = AUX,
                                   .max_batch = B,
                                   .device = -1};
    const size_t P = AUXTRUNK_PARAM_COUNT(&cfg), X = (size_t)B * ENC, Y = (size_t)B * AUX;
    const size_t total = 3 * P + X + 3 * Y; /* online, target, grads, x, dout, out, target_out */
    auxtrunk_handle_t *h = NULL;
    void *stream = NULL;
    float *host = calloc(2 * total, sizeof *host), *dev = NULL;
    const char *failed;
    int32_t rc;

    const char *no_stream = space_open(cuda, &stream);
    CHECK(no_stream ? no_stream : "stream", no_stream ? AUXTRUNK_E_DEVICE : AUXTRUNK_OK);
    CHECK("init", api->init(&cfg, &h));
    CHECK("host memory", host ? AUXTRUNK_OK : AUXTRUNK_E_OUT_OF_MEMORY);
    for (size_t i = 0; i < P; i++) /* the target network starts as a copy */
        host[i] = host[P + i] = 0.1f * ((float)rand() / (float)RAND_MAX - 0.5f);
    for (size_t i = 3 * P; i < 3 * P + X + Y; i++)
        host[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    dev = space_alloc(cuda, host, total);
    CHECK("buffers", dev ? AUXTRUNK_OK : AUXTRUNK_E_OUT_OF_MEMORY);
    const step_t s = {.online = params_at(&cfg, dev),
                      .target = params_at(&cfg, dev + P),
                      .grads = grads_at(&cfg, dev + 2 * P),
                      .x = dev + 3 * P,
                      .dout = dev + 3 * P + X,
                      .out = dev + 3 * P + X + Y,
                      .target_out = dev + 3 * P + X + 2 * Y};

    CHECK("forward, backward or infer", step(api, h, &s, stream));
    CHECK("copy back", space_get(cuda, stream, host, dev, total) ? AUXTRUNK_E_DEVICE : AUXTRUNK_OK);
    const float *out = host + 3 * P + X + Y;
    CHECK("target infer differs from forward on equal parameters",
          memcmp(out, out + Y, Y * sizeof *out) ? AUXTRUNK_E_INTERNAL : AUXTRUNK_OK);

    const char *graph = "not claimed";
#ifdef EXAMPLE_WITH_CUDA
    if (cuda && (api->caps & AUXTRUNK_CAP_GRAPH_CAPTURE)) {
        /* Captured once, replayed every step: the same calls without their
         * launch cost. The replay recomputes every output from the same
         * inputs, so it must match the eager step. */
        cudaStream_t st = (cudaStream_t)stream;
        cudaGraph_t g = NULL;
        cudaGraphExec_t exec = NULL;
        CHECK("graph capture", cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal)
                                   ? AUXTRUNK_E_DEVICE
                                   : AUXTRUNK_OK);
        int32_t captured = step(api, h, &s, stream);
        int ok = cudaStreamEndCapture(st, &g) == cudaSuccess && captured == AUXTRUNK_OK &&
                 cudaGraphInstantiate(&exec, g, 0) == cudaSuccess &&
                 cudaGraphLaunch(exec, st) == cudaSuccess &&
                 !space_get(cuda, stream, host + total, dev, total);
        if (exec)
            cudaGraphExecDestroy(exec);
        if (g)
            cudaGraphDestroy(g);
        CHECK("graph capture and replay", ok                        ? AUXTRUNK_OK
                                          : captured != AUXTRUNK_OK ? captured
                                                                    : AUXTRUNK_E_DEVICE);
        int same = memcmp(host, host + total, total * sizeof *host) == 0;
        graph = same ? "replayed, bit-identical to the eager step" : "replayed, results differ";
        int deterministic = (api->caps & AUXTRUNK_CAP_DETERMINISTIC) != 0;
        CHECK("deterministic, yet the replay differs",
              same || !deterministic ? AUXTRUNK_OK : AUXTRUNK_E_INTERNAL);
    }
#endif
    printf("auxtrunk-example: %s [%s], %s memory, B=%d: forward, backward, infer ok, "
           "out[0] = %.6f, target infer bit-identical to forward; CUDA graph: %s\n",
           api->impl_name, api->kernel_version, cuda ? "CUDA device" : "host", B, out[0], graph);
done:
    if (rc != AUXTRUNK_OK)
        fprintf(stderr, "auxtrunk-example: %s: %s: %s\n", api->impl_name, failed,
                h && api->last_error(h)[0] ? api->last_error(h) : auxtrunk_status_message(rc));
    if (h)
        api->destroy(h);
    space_close(cuda, stream, dev);
    free(host);
    auxtrunk_plugin_unload(&pl);
    return rc == AUXTRUNK_OK ? 0 : 1;
}
