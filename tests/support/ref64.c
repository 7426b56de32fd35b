/* ref64.c — see ref64.h. Written for clarity, not speed. */
#include "ref64.h"

#include <math.h>
#include <stdlib.h>

static void layer_forward(const double *a, const float *w, const float *c, int batch, int k_in,
                          int n_out, int elu, double *y)
{
    for (int b = 0; b < batch; b++) {
        for (int n = 0; n < n_out; n++) {
            double acc = c[n];
            for (int k = 0; k < k_in; k++)
                acc += a[(size_t)b * k_in + k] * (double)w[(size_t)k * n_out + n];
            y[(size_t)b * n_out + n] = (elu && acc <= 0.0) ? expm1(acc) : acc;
        }
    }
}

void ref64_forward(ref64_dims_t d, const ref64_params_t *p, const float *x, int batch, double *h1,
                   double *h2, double *out)
{
    size_t nx = (size_t)batch * d.enc;
    double *xd = malloc(nx * sizeof *xd);
    double *t1 = h1 ? h1 : malloc((size_t)batch * d.h1 * sizeof *t1);
    double *t2 = h2 ? h2 : malloc((size_t)batch * d.h2 * sizeof *t2);
    if (xd && t1 && t2) {
        for (size_t i = 0; i < nx; i++)
            xd[i] = x[i];
        layer_forward(xd, p->w1, p->b1, batch, d.enc, d.h1, 1, t1);
        layer_forward(t1, p->w2, p->b2, batch, d.h1, d.h2, 1, t2);
        layer_forward(t2, p->w3, p->b3, batch, d.h2, d.aux, 0, out);
    }
    free(xd);
    if (!h1)
        free(t1);
    if (!h2)
        free(t2);
}

/* dpre[b,k] = (Σ_n g[b,n] W[k,n]) · ELU'(y[b,k]) */
static void hidden_grad(const double *g, const float *w, const double *y, int batch, int k_in,
                        int n_out, double *dpre)
{
    for (int b = 0; b < batch; b++)
        for (int k = 0; k < k_in; k++) {
            double acc = 0.0;
            for (int n = 0; n < n_out; n++)
                acc += g[(size_t)b * n_out + n] * (double)w[(size_t)k * n_out + n];
            double yy = y[(size_t)b * k_in + k];
            dpre[(size_t)b * k_in + k] = yy > 0.0 ? acc : acc * (1.0 + yy);
        }
}

static void weight_grad(const double *a, const double *g, int batch, int k_in, int n_out,
                        double *dw, double *db)
{
    for (int k = 0; k < k_in; k++)
        for (int n = 0; n < n_out; n++) {
            double acc = 0.0;
            for (int b = 0; b < batch; b++)
                acc += a[(size_t)b * k_in + k] * g[(size_t)b * n_out + n];
            dw[(size_t)k * n_out + n] = acc;
        }
    for (int n = 0; n < n_out; n++) {
        double acc = 0.0;
        for (int b = 0; b < batch; b++)
            acc += g[(size_t)b * n_out + n];
        db[n] = acc;
    }
}

int ref64_backward(ref64_dims_t d, const ref64_params_t *p, const float *x, const float *dout,
                   int batch, double *dw1, double *db1, double *dw2, double *db2, double *dw3,
                   double *db3)
{
    int rc = -1;
    size_t B = (size_t)batch;
    double *xd = malloc(B * d.enc * sizeof *xd);
    double *gd = malloc(B * d.aux * sizeof *gd);
    double *h1 = malloc(B * d.h1 * sizeof *h1);
    double *h2 = malloc(B * d.h2 * sizeof *h2);
    double *out = malloc(B * d.aux * sizeof *out);
    double *dh2 = malloc(B * d.h2 * sizeof *dh2);
    double *dh1 = malloc(B * d.h1 * sizeof *dh1);
    if (!xd || !gd || !h1 || !h2 || !out || !dh2 || !dh1)
        goto done;
    for (size_t i = 0; i < B * d.enc; i++)
        xd[i] = x[i];
    for (size_t i = 0; i < B * d.aux; i++)
        gd[i] = dout[i];
    ref64_forward(d, p, x, batch, h1, h2, out);
    hidden_grad(gd, p->w3, h2, batch, d.h2, d.aux, dh2);
    hidden_grad(dh2, p->w2, h1, batch, d.h1, d.h2, dh1);
    weight_grad(h2, gd, batch, d.h2, d.aux, dw3, db3);
    weight_grad(h1, dh2, batch, d.h1, d.h2, dw2, db2);
    weight_grad(xd, dh1, batch, d.enc, d.h1, dw1, db1);
    rc = 0;
done:
    free(dh1);
    free(dh2);
    free(out);
    free(h2);
    free(h1);
    free(gd);
    free(xd);
    return rc;
}

double ref64_loss(ref64_dims_t d, const ref64_params_t *p, const float *x, const float *dout,
                  int batch)
{
    size_t n = (size_t)batch * d.aux;
    double *out = malloc(n * sizeof *out);
    if (!out)
        return NAN;
    ref64_forward(d, p, x, batch, NULL, NULL, out);
    double l = 0.0;
    for (size_t i = 0; i < n; i++)
        l += out[i] * (double)dout[i];
    free(out);
    return l;
}

double ref64_max_abs(const double *v, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs(v[i]) > m)
            m = fabs(v[i]);
    return m;
}

double ref64_max_rel_err_floor(const float *got, const double *ref, size_t n, double floor)
{
    double scale = ref64_max_abs(ref, n), worst = 0.0;
    if (scale < floor)
        scale = floor;
    if (scale == 0.0)
        scale = 1.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isinf(got[i]))
            return INFINITY;
        double e = fabs((double)got[i] - ref[i]) / scale;
        if (e > worst)
            worst = e;
    }
    return worst;
}

double ref64_max_rel_err(const float *got, const double *ref, size_t n)
{
    return ref64_max_rel_err_floor(got, ref, n, 0.0);
}

double ref64_grads_floor(ref64_dims_t d, const double *const g[6])
{
    const size_t n[6] = {(size_t)d.enc * d.h1, (size_t)d.h1,         (size_t)d.h1 * d.h2,
                         (size_t)d.h2,         (size_t)d.h2 * d.aux, (size_t)d.aux};
    double floor = 0.0;
    for (int i = 0; i < 6; i++)
        floor = fmax(floor, 0.1 * ref64_max_abs(g[i], n[i]));
    return floor;
}

double ref64_out_floor(ref64_dims_t d, const ref64_params_t *p, const double *h2, int batch)
{
    double m = 0.0;
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < d.aux; j++) {
            double s = fabs((double)p->b3[j]);
            for (int k = 0; k < d.h2; k++)
                s += fabs(h2[(size_t)b * d.h2 + k] * (double)p->w3[(size_t)k * d.aux + j]);
            if (s > m) /* false for NaN */
                m = s;
        }
    return isinf(m) ? 0.0 : 0.1 * m;
}
