/*
 * cpu_blocked_plugin.c — libauxtrunk.so "cpu-blocked", the fast exact CPU
 * plugin: kernels/cpu_blocked (register tiles, a thread pool; bit for bit the
 * same as kernels/cpu) behind the shared host adapter
 * (plugin/common/host_plugin.c), which implements every entry of the ABI.
 * This file is the table (the stateful kind: the kernels own their threads
 * and scratch) and picks the threads.
 *
 * Threads per handle, the caller's included: $AUXTRUNK_CPU_THREADS when it is
 * a decimal integer in [1, MAX_THREADS], else the CPUs the process may run
 * on (sched_getaffinity) at init, at most MAX_THREADS. The handle's workers
 * are started by init and joined by destroy; the results do not depend on
 * their number. init returns AUXTRUNK_E_OUT_OF_MEMORY when memory or a
 * worker thread (a system limit) cannot be had, leaving nothing behind.
 *
 * Host memory per handle, besides the adapter's h1/h2 record: the kernels'
 * packed operands, tree stack and per-thread scratch (cpb_bytes), never
 * proportional to the batch beyond one chunk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cpu_blocked.h"
#include "host_plugin.h"

#define CPB_STR_(x) #x
#define CPB_STR(x) CPB_STR_(x)

#define MAX_THREADS 256

static int32_t thread_count(void)
{
    const char *env = getenv("AUXTRUNK_CPU_THREADS");
    if (env && env[0]) {
        char *end;
        errno = 0;
        long n = strtol(env, &end, 10);
        if (errno == 0 && *end == '\0' && n >= 1 && n <= MAX_THREADS)
            return (int32_t)n;
    }
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int32_t)n;
}

static int32_t create(atk_dims_t d, int32_t max_batch, void **state, uint64_t *bytes)
{
    const cpb_config_t cfg = {
        .dims = d,
        .max_batch = max_batch,
        .threads = thread_count(),
        .isa = CPB_ISA_AUTO,
    };
    cpb_trunk_t *t;
    switch (cpb_create(&cfg, &t)) {
    case CPB_OK:
        break;
    case CPB_E_MEMORY:
    case CPB_E_THREADS:
        return AUXTRUNK_E_OUT_OF_MEMORY;
    default:
        return AUXTRUNK_E_INTERNAL;
    }
    *state = t;
    *bytes = cpb_bytes(t);
    return AUXTRUNK_OK;
}

/* The kernel functions, with the adapter's untyped state. */
static void destroy(void *t) { cpb_destroy(t); }

static void forward(void *t, const atk_params_t *p, const float *x, int32_t batch, float *h1,
                    float *h2, float *out)
{
    cpb_forward(t, p, x, batch, h1, h2, out);
}

static void infer(void *t, const atk_params_t *p, const float *x, int32_t batch, float *out)
{
    cpb_infer(t, p, x, batch, out);
}

static void backward(void *t, const atk_params_t *p, const float *x, const float *h1,
                     const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                     int accumulate)
{
    cpb_backward(t, p, x, h1, h2, dout, batch, g, accumulate);
}

static const atp_host_stateful_t stateful = {
    .create = create,
    .destroy = destroy,
    .forward = forward,
    .infer = infer,
    .backward = backward,
};

const atp_host_kernels_t atp_host_plugin_kernels = {
    .impl_name = "cpu-blocked",
    .kernel_version =
        "cpu-blocked " AUXTRUNK_KERNEL_VERSION " (canon " CPB_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT,
    .stateful = &stateful,
};
