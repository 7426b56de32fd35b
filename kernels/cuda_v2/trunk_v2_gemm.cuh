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

} /* namespace v2gemm */

#endif /* AUXTRUNK_TRUNK_V2_GEMM_CUH */
