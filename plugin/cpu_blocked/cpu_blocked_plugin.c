/*
 * cpu_blocked_plugin.c — the blocked CPU plugin ("cpu-blocked"): the ABI of
 * abi/auxtrunk.h on top of kernels/cpu_blocked. Host memory, synchronous, exact
 * (canonical order) and deterministic; no fast mode, no device.
 *
 * Every entry checks its handle and arguments (plugin/common) before it
 * writes anything; init allocates every buffer a handle will ever use, so
 * forward, infer and backward never allocate and cannot fail after
 * validation. Nothing here prints. The adapter is plugin/cpu's, line for line;
 * only the kernels underneath differ (the point of a second version).
 */
#include <stdlib.h>
#include <string.h>

#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cpu_blocked.h"
#include "plugin_common.h"

#if defined(__SSE2__) || defined(__x86_64__)
#include <xmmintrin.h>
#define CPU_HAVE_MXCSR 1
#else
#include <fenv.h>
#endif

#define CPU_STR_(x) #x
#define CPU_STR(x) CPU_STR_(x)
#define CPU_IMPL_NAME "cpu-blocked"
#define CPU_KERNEL_VERSION "cpu-blocked 1.0.0 (canon " CPU_STR(AUXTRUNK_CANON_VERSION) ")"
#define CPU_CAPS (AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT)
/* Samples per inference block: rows are independent in section 1, so a block
 * scratch gives the training forward's bits without touching its record. */
#define INFER_ROWS 64
/* Buffers are aligned for whole vector loads; any alignment gives the same bits. */
#define CPU_ALIGN 64

struct auxtrunk_handle {
    atp_handle_base_t base; /* first member: magic, dims, record, last error */
    cpb_dims_t dims;
    float *h1;       /* [max_batch, H1] recorded by forward for backward */
    float *h2;       /* [max_batch, H2] likewise */
    float *infer_ws; /* inference scratch [INFER_ROWS, H1 + H2]: never the record */
    float *bwd_ws;   /* backward workspace (kernels/cpu_blocked sizes it) */
    uint64_t host_bytes;
};

/* ------------------------------------------------------------------------- */
/* Floating-point environment                                                */

/*
 * The canonical order assumes round-to-nearest-even and kept denormals. A
 * host built with -ffast-math (crtfastmath sets FTZ/DAZ) or one that changed
 * the rounding mode or unmasked exceptions would otherwise change the bits or
 * trap, so each computing call runs under the default environment and gives
 * the caller's back afterwards (flags raised inside are not reported). On
 * x86-64 that is the whole MXCSR; elsewhere <fenv.h> resets the rounding mode
 * and exception traps (a target's own flush-to-zero bit is not covered).
 */
#ifdef CPU_HAVE_MXCSR
typedef unsigned int cpu_fpenv_t;
#define CPU_MXCSR_DEFAULT 0x1F80u /* all exceptions masked, nearest, no FTZ/DAZ */
static cpu_fpenv_t fpenv_enter(void)
{
    cpu_fpenv_t saved = _mm_getcsr();
    _mm_setcsr(CPU_MXCSR_DEFAULT);
    return saved;
}
static void fpenv_leave(cpu_fpenv_t saved) { _mm_setcsr(saved); }
#else
typedef fenv_t cpu_fpenv_t;
static cpu_fpenv_t fpenv_enter(void)
{
    cpu_fpenv_t saved;
    feholdexcept(&saved);
    fesetround(FE_TONEAREST);
    return saved;
}
static void fpenv_leave(cpu_fpenv_t saved) { fesetenv(&saved); }
#endif

/* ------------------------------------------------------------------------- */
/* Lifecycle                                                                 */

static const char *cpu_status_string(int32_t status) { return atp_status_string(status); }

/* n floats, CPU_ALIGN-aligned; adds the bytes to *total. NULL on failure. */
static float *alloc_floats(size_t n, uint64_t *total)
{
    size_t bytes = n * sizeof(float);
    bytes = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if (bytes == 0)
        bytes = CPU_ALIGN;
    float *p = aligned_alloc(CPU_ALIGN, bytes);
    if (p)
        *total += bytes;
    return p;
}

static int32_t cpu_init(const auxtrunk_config_t *config, auxtrunk_handle_t **out_handle)
{
    if (!config || !out_handle)
        return AUXTRUNK_E_NULL_POINTER;
    atp_dims_t dims;
    uint32_t flags;
    int32_t device;
    int32_t st = atp_config_read(config, 0 /* no AUXTRUNK_CONFIG_FAST */, &dims, &flags, &device);
    if (st != AUXTRUNK_OK)
        return st;
    if (device != -1)
        return AUXTRUNK_E_UNSUPPORTED;

    struct auxtrunk_handle *h = calloc(1, sizeof *h);
    if (!h)
        return AUXTRUNK_E_OUT_OF_MEMORY;
    atp_handle_base_init(&h->base, &dims, flags, device);
    h->dims = (cpb_dims_t){dims.enc, dims.h1, dims.h2, dims.aux};
    h->host_bytes = sizeof *h;
    size_t B = (size_t)dims.max_batch;
    if (!(h->h1 = alloc_floats(B * (size_t)dims.h1, &h->host_bytes)))
        goto fail_h1;
    if (!(h->h2 = alloc_floats(B * (size_t)dims.h2, &h->host_bytes)))
        goto fail_h2;
    if (!(h->infer_ws = alloc_floats((size_t)INFER_ROWS * ((size_t)dims.h1 + dims.h2), &h->host_bytes)))
        goto fail_infer;
    if (!(h->bwd_ws = alloc_floats(cpb_backward_workspace(h->dims, dims.max_batch),
                                   &h->host_bytes)))
        goto fail_bwd;
    *out_handle = h;
    return AUXTRUNK_OK;

fail_bwd:
    free(h->infer_ws);
fail_infer:
    free(h->h2);
fail_h2:
    free(h->h1);
fail_h1:
    free(h);
    return AUXTRUNK_E_OUT_OF_MEMORY;
}

static int32_t cpu_destroy(auxtrunk_handle_t *h)
{
    if (!h)
        return AUXTRUNK_OK;
    if (atp_check_handle(h) != AUXTRUNK_OK)
        return AUXTRUNK_E_BAD_HANDLE;
    h->base.magic = ATP_MAGIC_DEAD; /* a stale pointer reads as dead, not live */
    free(h->bwd_ws);
    free(h->infer_ws);
    free(h->h2);
    free(h->h1);
    free(h);
    return AUXTRUNK_OK;
}

/* ------------------------------------------------------------------------- */
/* Forward, inference, backward                                              */

static cpb_params_t params_view(const auxtrunk_params_t *p)
{
    return (cpb_params_t){p->w1, p->b1, p->w2, p->b2, p->w3, p->b3};
}

static int32_t cpu_forward(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                           int32_t batch, float *out, uint32_t flags, void *stream)
{
    (void)stream; /* host plugin: synchronous */
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    if ((st = atp_check_forward(&h->base, params, x, batch, out, flags, NULL)) != AUXTRUNK_OK)
        return st;
    const cpb_params_t p = params_view(params);
    cpu_fpenv_t env = fpenv_enter();
    cpb_forward(h->dims, &p, x, batch, h->h1, h->h2, out);
    fpenv_leave(env);
    h->base.recorded_batch = batch;
    atp_ok(&h->base);
    return AUXTRUNK_OK;
}

static void infer_rows(struct auxtrunk_handle *h, const cpb_params_t *p, const float *x,
                       int32_t batch, float *out)
{
    const cpb_dims_t d = h->dims;
    float *h1 = h->infer_ws, *h2 = h->infer_ws + (size_t)INFER_ROWS * d.h1;
    for (int32_t b0 = 0; b0 < batch; b0 += INFER_ROWS) {
        int32_t rows = batch - b0 < INFER_ROWS ? batch - b0 : INFER_ROWS;
        cpb_forward(d, p, x + (size_t)b0 * d.enc, rows, h1, h2, out + (size_t)b0 * d.aux);
    }
}

static int32_t cpu_infer(auxtrunk_handle_t *h, const auxtrunk_params_t *params, const float *x,
                         int32_t batch, float *out, uint32_t flags, void *stream)
{
    (void)stream;
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    if ((st = atp_check_forward(&h->base, params, x, batch, out, flags, NULL)) != AUXTRUNK_OK)
        return st;
    const cpb_params_t p = params_view(params);
    cpu_fpenv_t env = fpenv_enter();
    infer_rows(h, &p, x, batch, out);
    fpenv_leave(env);
    atp_ok(&h->base);
    return AUXTRUNK_OK;
}

static int32_t cpu_backward(auxtrunk_handle_t *h, const auxtrunk_params_t *params,
                            const float *x, const float *dout, int32_t batch,
                            const auxtrunk_grads_t *grads, uint32_t flags, void *stream)
{
    (void)stream;
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    st = atp_check_backward(&h->base, params, x, dout, batch, grads, flags, NULL);
    if (st != AUXTRUNK_OK)
        return st;
    const cpb_params_t p = params_view(params);
    const cpb_grads_t g = {grads->dw1, grads->db1, grads->dw2, grads->db2, grads->dw3, grads->db3};
    cpu_fpenv_t env = fpenv_enter();
    cpb_backward(h->dims, &p, x, h->h1, h->h2, dout, batch, &g,
                       (flags & AUXTRUNK_BACKWARD_ACCUMULATE) != 0, h->bwd_ws);
    fpenv_leave(env);
    atp_ok(&h->base);
    return AUXTRUNK_OK;
}

/* ------------------------------------------------------------------------- */
/* Queries and the entry symbol                                              */

static int32_t cpu_memory_usage(const auxtrunk_handle_t *h, auxtrunk_memory_t *out)
{
    int32_t st = atp_check_handle(h);
    if (st != AUXTRUNK_OK)
        return st;
    /* The handle was created non-const by init; only its error text changes. */
    atp_handle_base_t *base = (atp_handle_base_t *)&h->base;
    if (!out)
        return atp_fail(base, AUXTRUNK_E_NULL_POINTER, "memory_usage: out is NULL");
    if ((st = atp_check_memory_out(out)) != AUXTRUNK_OK)
        return atp_fail(base, st, "memory_usage: out->struct_size %u is below the 1.0 size %u",
                        out->struct_size, AUXTRUNK_MEMORY_SIZE_1_0);
    out->host_bytes = h->host_bytes;
    out->device_bytes = 0;
    atp_ok(base);
    return AUXTRUNK_OK;
}

static const char *cpu_last_error(const auxtrunk_handle_t *h)
{
    if (atp_check_handle(h) != AUXTRUNK_OK)
        return "";
    return h->base.last_error;
}

static const auxtrunk_api_t cpu_api = {
    .struct_size = sizeof(auxtrunk_api_t),
    .abi_version = AUXTRUNK_ABI_VERSION,
    .caps = CPU_CAPS,
    .impl_name = CPU_IMPL_NAME,
    .kernel_version = CPU_KERNEL_VERSION,
    .status_string = cpu_status_string,
    .init = cpu_init,
    .destroy = cpu_destroy,
    .forward = cpu_forward,
    .infer = cpu_infer,
    .backward = cpu_backward,
    .memory_usage = cpu_memory_usage,
    .last_error = cpu_last_error,
};

int32_t auxtrunk_plugin_entry(const auxtrunk_host_info_t *host, auxtrunk_api_t *api)
{
    return atp_negotiate(host, api, &cpu_api);
}
