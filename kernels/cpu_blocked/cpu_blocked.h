/*
 * cpu_blocked.h — the fast CPU trunk: the canonical order of
 * abi/auxtrunk_canon.h bit for bit (the same results as kernels/cpu, the
 * reference), computed with register-tiled kernels (AVX-512, AVX2+FMA or
 * scalar, chosen at run time) on a pool of threads.
 *
 * Why the bits cannot depend on the thread count or the instruction set:
 * every output element is one accumulator that sees its terms in the
 * documented order; threads split the work over whole outputs (row tiles of
 * a layer, column panels of a weight gradient) and over the chunk partials
 * of the batch sums, never inside one chain, and the partials are combined
 * by the canonical pairwise tree.
 *
 * A trunk object owns everything a call needs: the workers (created by
 * cpb_create, joined by cpb_destroy) and all scratch, so calls never
 * allocate and never fail. Math only: dims, raw float pointers (host memory,
 * layouts as in abi/auxtrunk.h); no ABI structs, no validation, no printing.
 * Calls on one object must not overlap.
 *
 * Shape letters: B batch, ENC, H1, H2, AUX.
 */
#ifndef AUXTRUNK_CPU_BLOCKED_H
#define AUXTRUNK_CPU_BLOCKED_H

#include <stddef.h>
#include <stdint.h>

#include "trunk_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Instruction set of the register tiles. AUTO: the widest the CPU runs. */
typedef enum cpb_isa {
    CPB_ISA_AUTO = 0,
    CPB_ISA_SCALAR,
    CPB_ISA_AVX2,  /* AVX2 + FMA */
    CPB_ISA_AVX512 /* AVX-512F */
} cpb_isa_t;

typedef enum cpb_status {
    CPB_OK = 0,
    CPB_E_MEMORY,  /* an allocation failed */
    CPB_E_THREADS, /* the system refused a worker thread */
    CPB_E_ISA      /* the requested instruction set is not on this CPU */
} cpb_status_t;

typedef struct cpb_config {
    atk_dims_t dims;
    int32_t max_batch; /* largest batch of any call, >= 1 */
    int32_t threads;   /* threads per call, the caller included, >= 1 */
    cpb_isa_t isa;
} cpb_config_t;

typedef struct cpb_trunk cpb_trunk_t;

/* A trunk for cfg, with threads - 1 workers started; nothing is left behind
 * on failure. */
cpb_status_t cpb_create(const cpb_config_t *cfg, cpb_trunk_t **out);

/* Joins the workers and frees everything. NULL is a no-op. */
void cpb_destroy(cpb_trunk_t *t);

/* Bytes of host memory the object holds (workers' stacks not counted). */
size_t cpb_bytes(const cpb_trunk_t *t);
/* Threads of a call, and the name of the instruction set in use. */
int32_t cpb_threads(const cpb_trunk_t *t);
const char *cpb_isa_name(const cpb_trunk_t *t);

/* Training forward: h1 [B, H1], h2 [B, H2] (the record backward reads) and
 * out [B, AUX] from x [B, ENC]; 1 <= batch <= max_batch. */
void cpb_forward(cpb_trunk_t *t, const atk_params_t *p, const float *x, int32_t batch, float *h1,
                 float *h2, float *out);

/* Inference forward: out [B, AUX] only, the same bits as cpb_forward. */
void cpb_infer(cpb_trunk_t *t, const atk_params_t *p, const float *x, int32_t batch, float *out);

/* Backward of the forward that produced h1, h2 from x (same params): the six
 * gradients of sum(out ⊙ dout), dout [B, AUX]. accumulate = 0: g = result;
 * else g = g + result (one addition, after the canonical sum). */
void cpb_backward(cpb_trunk_t *t, const atk_params_t *p, const float *x, const float *h1,
                  const float *h2, const float *dout, int32_t batch, const atk_grads_t *g,
                  int accumulate);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_CPU_BLOCKED_H */
