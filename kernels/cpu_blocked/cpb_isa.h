/*
 * cpb_isa.h — the instruction-set-specific part of kernels/cpu_blocked: one
 * register-tile kernel and the ELU per variant (scalar, AVX2+FMA, AVX-512),
 * chosen at run time from what the CPU has. Every variant gives the same
 * bits: a tile is MR x NR independent fmaf chains, each in depth order.
 *
 * Packed operands (built by cpu_blocked.c) are what make one kernel serve
 * every product of the trunk:
 *   A tile   [depth][MR]  the MR values of the tile's rows at each depth step
 *   B panel  [depth][NR]  the NR values of the panel's columns at each step
 * both zero-padded past the matrix edge.
 */
#ifndef AUXTRUNK_CPB_ISA_H
#define AUXTRUNK_CPB_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_blocked.h"

typedef struct cpb_ops {
    cpb_isa_t isa;
    const char *name;
    int32_t mr, nr; /* register tile: MR rows x NR columns */
    /* c[i*ldc + j] (i < MR, j < NR) = init[j] (0.0f when init is NULL), then
     * for r = 0 .. depth-1 ascending  c = fmaf(a[r*MR + i], b[r*ldb + j], c).
     * a packed as above; b a packed panel (ldb = NR) or NR columns of a
     * row-major matrix read in place; init NR floats; the whole MR x NR
     * block of c is written. */
    void (*tile)(int32_t depth, const float *a, const float *b, size_t ldb, const float *init,
                 float *c, size_t ldc);
    /* y[i] = auxtrunk_canon_elu(y[i]) for i < n. */
    void (*elu)(float *y, size_t n);
    /* d[i] = auxtrunk_canon_elu_grad(d[i], y[i]) for i < n. */
    void (*elu_grad)(float *d, const float *y, size_t n);
    /* The transposing copy of packing: dst[r*ldd + i] = src[i*lds + r] for
     * i < 8, r < depth (eight rows of src, each contiguous along r, become
     * `depth` groups of eight). Moves floats, never changes one. */
    void (*transpose8)(int32_t depth, const float *src, size_t lds, float *dst, size_t ldd);
} cpb_ops_t;

/* The variant for `isa` (CPB_ISA_AUTO: the widest this CPU runs), or NULL
 * when this CPU cannot run it. */
const cpb_ops_t *cpb_ops_for(cpb_isa_t isa);

#endif /* AUXTRUNK_CPB_ISA_H */
