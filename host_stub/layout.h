/*
 * layout.h — where each of the six parameters lives in the host's one flat
 * buffer: W1, b1, W2, b2, W3, b3 in that order (the optional flat layout of
 * abi/auxtrunk.h). Parameters, gradients and both Adam moments all use it,
 * so the optimizer and the checkpoint see one array of `count` floats.
 */
#ifndef ATH_LAYOUT_H
#define ATH_LAYOUT_H

#include <stddef.h>

#include "auxtrunk.h"

typedef struct ath_layout {
    size_t w1, b1, w2, b2, w3, b3; /* offsets, in floats */
    size_t count;                  /* AUXTRUNK_PARAM_COUNT */
} ath_layout_t;

/* The ABI's offsets (abi/auxtrunk.h), by name. */
static inline ath_layout_t ath_layout_of(const auxtrunk_config_t *c)
{
    ath_layout_t l = {AUXTRUNK_W1_OFFSET(c),  AUXTRUNK_B1_OFFSET(c), AUXTRUNK_W2_OFFSET(c),
                      AUXTRUNK_B2_OFFSET(c),  AUXTRUNK_W3_OFFSET(c), AUXTRUNK_B3_OFFSET(c),
                      AUXTRUNK_PARAM_COUNT(c)};
    return l;
}

/* ABI views of a flat buffer (the buffer may be in any memory space). */
static inline auxtrunk_params_t ath_params_view(const auxtrunk_config_t *c, const float *base)
{
    ath_layout_t l = ath_layout_of(c);
    auxtrunk_params_t p = {sizeof(auxtrunk_params_t),
                           0,
                           base + l.w1,
                           base + l.b1,
                           base + l.w2,
                           base + l.b2,
                           base + l.w3,
                           base + l.b3};
    return p;
}

static inline auxtrunk_grads_t ath_grads_view(const auxtrunk_config_t *c, float *base)
{
    ath_layout_t l = ath_layout_of(c);
    auxtrunk_grads_t g = {sizeof(auxtrunk_grads_t),
                          0,
                          base + l.w1,
                          base + l.b1,
                          base + l.w2,
                          base + l.b2,
                          base + l.w3,
                          base + l.b3};
    return g;
}

#endif
