/*
 * canon32.h — the canonical order of abi/auxtrunk_canon.h, transcribed
 * literally: one element at a time, every loop in the documented order, the
 * batch tree level by level. Slow on purpose; it is the executable form of the
 * contract that exact plugins are compared with bit for bit. Host memory.
 */
#ifndef AUXTRUNK_TEST_CANON32_H
#define AUXTRUNK_TEST_CANON32_H

#include "ref64.h" /* ref64_dims_t, ref64_params_t */

/* out [B, AUX]; h1, h2 optional (NULL). */
void canon32_forward(ref64_dims_t d, const ref64_params_t *p, const float *x, int batch, float *h1,
                     float *h2, float *out);

/* Gradients in float, overwrite semantics. Returns 0, or -1 on out of memory. */
int canon32_backward(ref64_dims_t d, const ref64_params_t *p, const float *x, const float *dout,
                     int batch, float *dw1, float *db1, float *dw2, float *db2, float *dw3,
                     float *db3);

#endif
