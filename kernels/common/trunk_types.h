/*
 * trunk_types.h — the shapes and tensor views every kernel version takes
 * (kernels/cpu, cpu_blocked, cuda_v1, cuda_v2). Math only: no ABI types; the
 * plugins fill these from auxtrunk_config_t, auxtrunk_params_t and
 * auxtrunk_grads_t. All tensors are row-major, layouts as in abi/auxtrunk.h;
 * the memory space is whatever the kernel version works in.
 */
#ifndef AUXTRUNK_TRUNK_TYPES_H
#define AUXTRUNK_TRUNK_TYPES_H

#include <stdint.h>

typedef struct atk_dims {
    int32_t enc, h1, h2, aux;
} atk_dims_t;

typedef struct atk_params {
    const float *w1; /* [ENC, H1] */
    const float *b1; /* [H1] */
    const float *w2; /* [H1, H2] */
    const float *b2; /* [H2] */
    const float *w3; /* [H2, AUX] */
    const float *b3; /* [AUX] */
} atk_params_t;

typedef struct atk_grads {
    float *dw1; /* [ENC, H1] */
    float *db1; /* [H1] */
    float *dw2; /* [H1, H2] */
    float *db2; /* [H2] */
    float *dw3; /* [H2, AUX] */
    float *db3; /* [AUX] */
} atk_grads_t;

#endif /* AUXTRUNK_TRUNK_TYPES_H */
