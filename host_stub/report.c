/*
 * report.c — loss curve in memory, CSV, and the SVG chart (report.h).
 */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Curve                                                                     */

/* Pushes are numbered k = 0, 1, 2, ...; the curve keeps those with k a
 * multiple of the stride, plus the latest push when it is not one of them.
 * When ATH_CURVE_MAX_POINTS are kept, every other one is dropped and the
 * stride doubles: the points stay evenly spaced, the first and the latest
 * are always there, and memory stays bounded however long the run. */
int ath_curve_push(ath_curve_t *c, uint64_t step, double loss, ath_err_t *err)
{
    if (!c->stride)
        c->stride = 1;
    uint64_t k = c->pushes++;
    if (c->provisional) {
        c->n--;
        c->provisional = 0;
    }
    if (k % c->stride == 0 && c->n == ATH_CURVE_MAX_POINTS) {
        for (size_t j = 0; 2 * j < c->n; j++) {
            c->step[j] = c->step[2 * j];
            c->loss[j] = c->loss[2 * j];
        }
        c->n = (c->n + 1) / 2;
        c->stride *= 2;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 1024;
        if (cap > ATH_CURVE_MAX_POINTS + 1)
            cap = ATH_CURVE_MAX_POINTS + 1;
        uint64_t *st = realloc(c->step, cap * sizeof *st);
        if (!st)
            return ath_errf(err, "out of host memory for the loss curve");
        c->step = st;
        double *l = realloc(c->loss, cap * sizeof *l);
        if (!l)
            return ath_errf(err, "out of host memory for the loss curve");
        c->loss = l;
        c->cap = cap;
    }
    c->step[c->n] = step;
    c->loss[c->n] = loss;
    c->n++;
    c->provisional = k % c->stride != 0;
    return 0;
}

void ath_curve_free(ath_curve_t *c)
{
    free(c->step);
    free(c->loss);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------------- */
/* CSV                                                                       */

int ath_csv_open(ath_csv_t *csv, const char *path, ath_err_t *err)
{
    memset(csv, 0, sizeof *csv);
    csv->path = path;
    if (strcmp(path, "-") == 0) {
        csv->f = stdout;
    } else {
        /* Published at once, then grown in its own fresh file: a crash keeps
         * every line written so far, and nothing is written through a link. */
        if (ath_out_open(&csv->out, path, "CSV", err) != 0)
            return -1;
        csv->f = csv->out.f;
        if (ath_out_publish(&csv->out, err) != 0) {
            csv->f = NULL;
            return -1;
        }
    }
    if (fputs("step,loss\n", csv->f) == EOF)
        return ath_errf(err, "cannot write CSV %s: %s", path, strerror(errno));
    return 0;
}

int ath_csv_row(ath_csv_t *csv, uint64_t step, double loss, ath_err_t *err)
{
    if (fprintf(csv->f, "%llu,%.9g\n", (unsigned long long)step, loss) < 0)
        return ath_errf(err, "cannot write CSV %s: %s", csv->path, strerror(errno));
    return 0;
}

int ath_csv_flush(ath_csv_t *csv, ath_err_t *err)
{
    if (fflush(csv->f) != 0)
        return ath_errf(err, "cannot write CSV %s: %s", csv->path, strerror(errno));
    return 0;
}

int ath_csv_close(ath_csv_t *csv, ath_err_t *err)
{
    if (!csv->f)
        return 0;
    int bad = fflush(csv->f) != 0 || ferror(csv->f);
    int e = errno;
    if (csv->f != stdout)
        bad |= ath_out_close(&csv->out, NULL) != 0;
    csv->f = NULL;
    if (bad)
        return ath_errf(err, "cannot write CSV %s: %s", csv->path, strerror(e));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* SVG                                                                       */

/* Chart geometry, in SVG user units. */
enum { W = 720, H = 420, ML = 78, MR = 24, MT = 40, MB = 52 };
#define MAX_POINTS 2000

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
        }
    }
}

/* Opens the output for path (safefile.h) and writes what every chart starts
 * with: the header, a white background and the title. NULL (with the error)
 * if it cannot be created. */
static FILE *svg_begin(ath_out_t *o, const char *path, const char *title, ath_err_t *err)
{
    if (ath_out_open(o, path, "SVG", err) != 0)
        return NULL;
    FILE *f = o->f;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">", W / 2);
    put_escaped(f, title);
    fputs("</text>\n", f);
    return f;
}

/* Closes the document and puts the file in place. Returns 0, or -1 if
 * anything failed to be written (the old file, if any, is then untouched). */
static int svg_end(ath_out_t *o, ath_err_t *err)
{
    fputs("</svg>\n", o->f);
    return ath_out_commit(o, err);
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about n ticks. */
static double nice_step(double span, int n)
{
    double raw = span / n;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

int ath_svg_write(const char *path, const ath_curve_t *c, const char *title, ath_err_t *err)
{
    /* Axis ranges: steps linear, loss in decades (log10). Non-positive or
     * non-finite losses cannot sit on a log axis and are left out. */
    double s0 = 0, s1 = 1, lo = INFINITY, hi = -INFINITY;
    size_t plotted = 0;
    for (size_t i = 0; i < c->n; i++) {
        double l = c->loss[i];
        if (!(l > 0) || !isfinite(l))
            continue;
        if (plotted == 0)
            s0 = s1 = (double)c->step[i];
        s0 = fmin(s0, (double)c->step[i]);
        s1 = fmax(s1, (double)c->step[i]);
        lo = fmin(lo, l);
        hi = fmax(hi, l);
        plotted++;
    }
    int d0 = plotted ? (int)floor(log10(lo)) : -1;
    int d1 = plotted ? (int)ceil(log10(hi)) : 0;
    if (d1 <= d0)
        d1 = d0 + 1;
    if (s1 <= s0)
        s1 = s0 + 1;
    const double pw = W - ML - MR, ph = H - MT - MB;
#define XS(s) (ML + ((s)-s0) / (s1 - s0) * pw)
#define YS(l) (MT + ((double)d1 - log10(l)) / (double)(d1 - d0) * ph)

    ath_out_t o;
    FILE *f = svg_begin(&o, path, title, err);
    if (!f)
        return -1;

    /* Decade grid lines and labels on the loss axis. */
    fputs("<g stroke=\"#dddddd\" stroke-width=\"1\">\n", f);
    for (int d = d0; d <= d1; d++) {
        double y = YS(pow(10.0, d));
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", ML, y, W - MR, y);
    }
    fputs("</g>\n<g text-anchor=\"end\">\n", f);
    for (int d = d0; d <= d1; d++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">1e%d</text>\n", ML - 6, YS(pow(10.0, d)) + 4, d);
    fputs("</g>\n", f);

    /* Step ticks. */
    double st = nice_step(s1 - s0, 6);
    fputs("<g text-anchor=\"middle\">\n", f);
    for (double s = ceil(s0 / st) * st; s <= s1 + 1e-9 * st; s += st)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.0f</text>\n", XS(s), H - MB + 18, s);
    fputs("</g>\n", f);

    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"black\"/>\n",
            ML, MT, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">step</text>\n", ML + pw / 2,
            H - 12);
    fprintf(f,
            "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 18 %.1f)\">loss (log scale)</text>\n",
            MT + ph / 2, MT + ph / 2);

    /* The curve, thinned to at most MAX_POINTS points (the last always kept). */
    if (plotted) {
        size_t stride = (plotted + MAX_POINTS - 1) / MAX_POINTS;
        size_t k = 0, last = c->n;
        for (size_t i = c->n; i-- > 0;)
            if (c->loss[i] > 0 && isfinite(c->loss[i])) {
                last = i;
                break;
            }
        fputs("<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"", f);
        for (size_t i = 0; i < c->n; i++) {
            double l = c->loss[i];
            if (!(l > 0) || !isfinite(l))
                continue;
            if (k++ % stride == 0 || i == last)
                fprintf(f, "%.1f,%.1f ", XS((double)c->step[i]), YS(l));
        }
        fputs("\"/>\n", f);
    }
#undef XS
#undef YS
    return svg_end(&o, err);
}

/* ------------------------------------------------------------------------- */
/* Log-log chart of several series                                           */

static const char *const palette[8] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                       "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static int usable(double x, double y) { return x > 0 && y > 0 && isfinite(x) && isfinite(y); }

int ath_svg_loglog(const char *path, const char *title, const char *xlabel, const char *ylabel,
                   const ath_series_t *series, int n_series, ath_err_t *err)
{
    if (n_series > 8)
        n_series = 8;
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < series[k].n; i++)
            if (usable(series[k].x[i], series[k].y[i])) {
                xlo = fmin(xlo, series[k].x[i]);
                xhi = fmax(xhi, series[k].x[i]);
                ylo = fmin(ylo, series[k].y[i]);
                yhi = fmax(yhi, series[k].y[i]);
            }
    if (!(xlo <= xhi)) {
        xlo = 1;
        xhi = 10;
        ylo = 1;
        yhi = 10;
    }
    const int legend_w = 150;
    const double x0 = floor(log10(xlo)), x1 = fmax(ceil(log10(xhi)), x0 + 1);
    const double y0 = floor(log10(ylo)), y1 = fmax(ceil(log10(yhi)), y0 + 1);
    const double pw = W - ML - MR - legend_w, ph = H - MT - MB;
#define LX(v) (ML + (log10(v) - x0) / (x1 - x0) * pw)
#define LY(v) (MT + (y1 - log10(v)) / (y1 - y0) * ph)

    ath_out_t o;
    FILE *f = svg_begin(&o, path, title, err);
    if (!f)
        return -1;
    fputs("<g stroke=\"#dddddd\" stroke-width=\"1\">\n", f);
    for (double d = x0; d <= x1; d++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.0f\"/>\n", LX(pow(10, d)), MT,
                LX(pow(10, d)), MT + ph);
    for (double d = y0; d <= y1; d++)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\"/>\n", ML, LY(pow(10, d)),
                ML + pw, LY(pow(10, d)));
    fputs("</g>\n<g text-anchor=\"middle\">\n", f);
    for (double d = x0; d <= x1; d++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">1e%.0f</text>\n", LX(pow(10, d)), H - MB + 18, d);
    fputs("</g>\n<g text-anchor=\"end\">\n", f);
    for (double d = y0; d <= y1; d++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">1e%.0f</text>\n", ML - 6, LY(pow(10, d)) + 4, d);
    fputs("</g>\n", f);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"black\"/>\n",
            ML, MT, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", ML + pw / 2, H - 12);
    put_escaped(f, xlabel);
    fprintf(f,
            "</text>\n<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 18 %.1f)\">",
            MT + ph / 2, MT + ph / 2);
    put_escaped(f, ylabel);
    fputs("</text>\n", f);

    for (int k = 0; k < n_series; k++) {
        const ath_series_t *s = &series[k];
        fprintf(f, "<g stroke=\"%s\" fill=\"%s\">\n", palette[k], palette[k]);
        fputs("<polyline fill=\"none\" stroke-width=\"1.5\" points=\"", f);
        for (int i = 0; i < s->n; i++)
            if (usable(s->x[i], s->y[i]))
                fprintf(f, "%.1f,%.1f ", LX(s->x[i]), LY(s->y[i]));
        fputs("\"/>\n", f);
        for (int i = 0; i < s->n; i++)
            if (usable(s->x[i], s->y[i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>\n", LX(s->x[i]), LY(s->y[i]));
        double ly = MT + 14 + 18 * k;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke-width=\"2\"/>\n",
                ML + pw + 12, ly - 4, ML + pw + 32, ly - 4);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" stroke=\"none\" fill=\"black\">", ML + pw + 38, ly);
        put_escaped(f, s->name);
        fputs("</text>\n</g>\n", f);
    }
#undef LX
#undef LY
    return svg_end(&o, err);
}
