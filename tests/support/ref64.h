/*
 * ref64.h — the trunk in double precision: the oracle that tests and the
 * conformance runner compare every plugin against. Inputs are float (what a
 * plugin sees), all arithmetic is double, with libm's expm1. Host memory.
 * Layouts as in abi/auxtrunk.h.
 */
#ifndef AUXTRUNK_TEST_REF64_H
#define AUXTRUNK_TEST_REF64_H

#include <stddef.h>

typedef struct ref64_dims {
    int enc, h1, h2, aux;
} ref64_dims_t;

/* Float parameter views (host memory). */
typedef struct ref64_params {
    const float *w1, *b1, *w2, *b2, *w3, *b3;
} ref64_params_t;

/* out [B, AUX]; h1 [B, H1] and h2 [B, H2] may be NULL if not wanted. */
void ref64_forward(ref64_dims_t d, const ref64_params_t *p, const float *x, int batch, double *h1,
                   double *h2, double *out);

/* Gradients of sum(out ⊙ dout) for the six parameters (double, layouts of the
 * parameters). Allocates its own scratch; returns 0, or -1 on out of memory. */
int ref64_backward(ref64_dims_t d, const ref64_params_t *p, const float *x, const float *dout,
                   int batch, double *dw1, double *db1, double *dw2, double *db2, double *dw3,
                   double *db3);

/* The scalar loss L = sum(out ⊙ dout) in double, for finite differences. */
double ref64_loss(ref64_dims_t d, const ref64_params_t *p, const float *x, const float *dout,
                  int batch);

/* Error measure used by every numeric check: max_i |got_i - ref_i| divided
 * by max_i |ref_i| (1 if that is 0): the worst error relative to the tensor's
 * scale. NaN or Inf anywhere in got gives +inf. */
double ref64_max_rel_err(const float *got, const double *ref, size_t n);

/* The same with the scale at least floor: a tensor of one or a few sums (a
 * bias of width 1) can cancel to far below the size of its terms, while
 * rounding is relative to the terms. The conformance runner's rule for
 * gradients (docs/conformance.md): floor = a tenth of the largest gradient
 * tensor's max |ref|. ref64_max_rel_err is floor 0. */
double ref64_max_rel_err_floor(const float *got, const double *ref, size_t n, double floor);

/* max_i |v_i| (0 for n = 0). */
double ref64_max_abs(const double *v, size_t n);

/* The conformance runner's floor for the six gradient tensors of one case,
 * in the order dw1, db1, dw2, db2, dw3, db3 (lengths from d): a tenth of the
 * largest tensor's max |ref|. Pass it to ref64_max_rel_err_floor for each. */
double ref64_grads_floor(ref64_dims_t d, const double *const g[6]);

/* The floor for out [B, AUX], given h2 [B, H2] from ref64_forward: a tenth
 * of the largest sum of the last layer's terms, max over b, j of
 * |b3_j| + Σ_k |h2[b,k] W3[k,j]|. Rounding is relative to those terms, so an
 * output that cancels (a 1-wide layer: h2·w3 + b3 near 0) is judged against
 * them, not its own tiny value. Rows with non-finite h2 are passed over. */
double ref64_out_floor(ref64_dims_t d, const ref64_params_t *p, const double *h2, int batch);

#endif
