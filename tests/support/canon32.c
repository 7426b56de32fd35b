/* canon32.c — see canon32.h; section numbers refer to abi/auxtrunk_canon.h. */
#include "canon32.h"

#include <math.h>
#include <stdlib.h>

#include "auxtrunk_canon.h"

/* Section 1. */
static void layer(const float *a, const float *w, const float *c, int batch, int K, int N, int elu,
                  float *y)
{
    for (int b = 0; b < batch; b++)
        for (int n = 0; n < N; n++) {
            float acc = c[n];
            for (int k = 0; k < K; k++)
                acc = fmaf(a[(size_t)b * K + k], w[(size_t)k * N + n], acc);
            y[(size_t)b * N + n] = elu ? auxtrunk_canon_elu(acc) : acc;
        }
}

void canon32_forward(ref64_dims_t d, const ref64_params_t *p, const float *x, int batch, float *h1,
                     float *h2, float *out)
{
    float *t1 = h1 ? h1 : malloc((size_t)batch * d.h1 * sizeof *t1);
    float *t2 = h2 ? h2 : malloc((size_t)batch * d.h2 * sizeof *t2);
    if (t1 && t2) {
        layer(x, p->w1, p->b1, batch, d.enc, d.h1, 1, t1);
        layer(t1, p->w2, p->b2, batch, d.h1, d.h2, 1, t2);
        layer(t2, p->w3, p->b3, batch, d.h2, d.aux, 0, out);
    }
    if (!h1)
        free(t1);
    if (!h2)
        free(t2);
}

/* Section 2. */
static void hidden(const float *g, const float *w, const float *y, int batch, int K, int N,
                   float *dpre)
{
    for (int b = 0; b < batch; b++)
        for (int k = 0; k < K; k++) {
            float acc = 0.0f;
            for (int n = 0; n < N; n++)
                acc = fmaf(g[(size_t)b * N + n], w[(size_t)k * N + n], acc);
            dpre[(size_t)b * K + k] = auxtrunk_canon_elu_grad(acc, y[(size_t)b * K + k]);
        }
}

/* Section 3: the pairwise tree over q[0..nc-1], level by level. */
static float tree(float *q, int nc)
{
    for (int s = 1; s < nc; s *= 2)
        for (int i = 0; i + s < nc; i += 2 * s)
            q[i] = q[i] + q[i + s];
    return q[0];
}

/* dw[k,n] = Σ_b a[b,k]·g[b,n] and db[n] = Σ_b g[b,n], both in the canonical order. */
static void batch_sums(const float *a, const float *g, int batch, int K, int N, float *dw,
                       float *db, float *q)
{
    int nc = auxtrunk_canon_chunks(batch);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            for (int i = 0; i < nc; i++) {
                float p = 0.0f;
                int end =
                    (i + 1) * AUXTRUNK_CANON_CHUNK < batch ? (i + 1) * AUXTRUNK_CANON_CHUNK : batch;
                for (int b = i * AUXTRUNK_CANON_CHUNK; b < end; b++)
                    p = fmaf(a[(size_t)b * K + k], g[(size_t)b * N + n], p);
                q[i] = p;
            }
            dw[(size_t)k * N + n] = tree(q, nc);
        }
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < nc; i++) {
            float p = 0.0f;
            int end =
                (i + 1) * AUXTRUNK_CANON_CHUNK < batch ? (i + 1) * AUXTRUNK_CANON_CHUNK : batch;
            for (int b = i * AUXTRUNK_CANON_CHUNK; b < end; b++)
                p = p + g[(size_t)b * N + n];
            q[i] = p;
        }
        db[n] = tree(q, nc);
    }
}

int canon32_backward(ref64_dims_t d, const ref64_params_t *p, const float *x, const float *dout,
                     int batch, float *dw1, float *db1, float *dw2, float *db2, float *dw3,
                     float *db3)
{
    int rc = -1;
    size_t B = (size_t)batch;
    float *h1 = malloc(B * d.h1 * sizeof *h1);
    float *h2 = malloc(B * d.h2 * sizeof *h2);
    float *out = malloc(B * d.aux * sizeof *out);
    float *dh2 = malloc(B * d.h2 * sizeof *dh2);
    float *dh1 = malloc(B * d.h1 * sizeof *dh1);
    float *q = malloc((size_t)auxtrunk_canon_chunks(batch) * sizeof *q);
    if (!h1 || !h2 || !out || !dh2 || !dh1 || !q)
        goto done;
    canon32_forward(d, p, x, batch, h1, h2, out);
    hidden(dout, p->w3, h2, batch, d.h2, d.aux, dh2);
    hidden(dh2, p->w2, h1, batch, d.h1, d.h2, dh1);
    batch_sums(h2, dout, batch, d.h2, d.aux, dw3, db3, q);
    batch_sums(h1, dh2, batch, d.h1, d.h2, dw2, db2, q);
    batch_sums(x, dh1, batch, d.enc, d.h1, dw1, db1, q);
    rc = 0;
done:
    free(q);
    free(dh1);
    free(dh2);
    free(out);
    free(h2);
    free(h1);
    return rc;
}
