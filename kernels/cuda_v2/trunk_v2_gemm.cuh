/*
 * trunk_v2_gemm.cuh — named construction of the GEMM descriptors of cuda-v2
 * (Gemm in trunk_v2.cu, FGemm in trunk_v2_fast.cu). Host code only; included
 * by those two files.
 *
 * A descriptor holds three pointers and five ints (lda, ldb, ldc, m, n), so a
 * positional initialiser compiles whatever order its ints come in. Each is
 * built by name instead, every operand next to its own row stride:
 *
 *     Gemm::shape(batch, d.h1)           C is [m, n] = [batch, H1]
 *         .with_a(x, d.enc)              A and lda
 *         .with_b(p->w1, d.h1)           B and ldb
 *         .with_c(h1, d.h1)              C and ldc
 *         .with_bias(p->b1)              (epilogues with a bias)
 *
 * The mixin has no data: the descriptors keep the layout the kernels take.
 */
#ifndef AUXTRUNK_TRUNK_V2_GEMM_CUH
#define AUXTRUNK_TRUNK_V2_GEMM_CUH

#include "trunk_types.h"

namespace v2gemm {

/* Base of a descriptor G with fields a, b, c, bias, y, lda, ldb, ldc, m, n. */
template <class G>
struct Named {
    /* Every field zero (no bias, no y) except the output's shape. */
    static G shape(int m, int n)
    {
        G g = {};
        g.m = m;
        g.n = n;
        return g;
    }
    G with_a(const float *p, int ld) const
    {
        G g = self();
        g.a = p;
        g.lda = ld;
        return g;
    }
    G with_b(const float *p, int ld) const
    {
        G g = self();
        g.b = p;
        g.ldb = ld;
        return g;
    }
    G with_c(float *p, int ld) const
    {
        G g = self();
        g.c = p;
        g.ldc = ld;
        return g;
    }
    G with_bias(const float *p) const
    {
        G g = self();
        g.bias = p;
        return g;
    }
    /* The activation an ELU' epilogue reads, [m, n] with row stride ldc. */
    G with_y(const float *p) const
    {
        G g = self();
        g.y = p;
        return g;
    }

  private:
    const G &self() const { return static_cast<const G &>(*this); }
};

/* The three layers of one forward, layer i: C = h_(i+1) [B, out] from
 * A = h_i [B, in] (k-contiguous; h_0 = x), B = W_(i+1) [in, out]
 * (n-contiguous) and its bias; h_3 = out. */
template <class G>
void forward_layers(G (&layer)[3], atk_dims_t d, int batch, const atk_params_t *p, const float *x,
                    float *h1, float *h2, float *out)
{
    const int width[4] = {d.enc, d.h1, d.h2, d.aux};
    const float *const in[3] = {x, h1, h2}, *const w[3] = {p->w1, p->w2, p->w3};
    const float *const bias[3] = {p->b1, p->b2, p->b3};
    float *const c[3] = {h1, h2, out};
    for (int i = 0; i < 3; i++)
        layer[i] = G::shape(batch, width[i + 1])
                       .with_a(in[i], width[i])
                       .with_b(w[i], width[i + 1])
                       .with_c(c[i], width[i + 1])
                       .with_bias(bias[i]);
}

/* The three weight-gradient problems of one backward, dW_i = a_iᵀ · g_i over
 * the batch (or a chunk of it): a = x, h1, h2 [B, in] and g = dh1, dh2, dout
 * [B, out]; as A (m = feature, k = sample) a_i is m-contiguous, g_i is B
 * (n-contiguous), and dW_i [in, out] goes to c[i]. */
template <class G>
void weight_grads(G (&dw)[3], atk_dims_t d, const float *const (&a)[3], const float *const (&g)[3],
                  float *const (&c)[3])
{
    const int width[4] = {d.enc, d.h1, d.h2, d.aux}; /* layer i maps width i to i+1 */
    for (int i = 0; i < 3; i++)
        dw[i] = G::shape(width[i], width[i + 1])
                    .with_a(a[i], width[i])
                    .with_b(g[i], width[i + 1])
                    .with_c(c[i], width[i + 1]);
}

} /* namespace v2gemm */

#endif /* AUXTRUNK_TRUNK_V2_GEMM_CUH */
