/*
 * report.h — the loss curve: kept in memory during a run, streamed to a CSV
 * file as it grows, and drawn at the end as a small self-contained SVG chart
 * (no scripts, no external fonts or styles) with a log-scale loss axis.
 *
 * CSV format: a header line "step,loss", then one line per training step;
 * loss printed with %.9g (enough digits to round-trip a float, and the same
 * text for the same bits, so two runs can be compared byte for byte).
 */
#ifndef ATH_REPORT_H
#define ATH_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "safefile.h"
#include "util.h"

/* The loss curve in memory, bounded: at most ATH_CURVE_MAX_POINTS + 1
 * points, evenly spaced in steps (decimated by two whenever it fills), the
 * first and the latest always kept. Zero-initialised is empty. */
#define ATH_CURVE_MAX_POINTS 8192

typedef struct ath_curve {
    uint64_t *step;
    double *loss;
    size_t n, cap;
    uint64_t stride, pushes; /* every stride-th push is kept */
    int provisional;         /* the last point is the latest push, off the stride */
} ath_curve_t;

int ath_curve_push(ath_curve_t *c, uint64_t step, double loss, ath_err_t *err);
void ath_curve_free(ath_curve_t *c);

/* CSV writer; path "-" means stdout. A file is created through safefile.h
 * (a fresh file renamed into place when opened, never written through a
 * link or into an existing file). */
typedef struct ath_csv {
    FILE *f; /* stdout or out.f */
    const char *path;
    ath_out_t out;
} ath_csv_t;

int ath_csv_open(ath_csv_t *csv, const char *path, ath_err_t *err);
int ath_csv_row(ath_csv_t *csv, uint64_t step, double loss, ath_err_t *err);
int ath_csv_flush(ath_csv_t *csv, ath_err_t *err);
int ath_csv_close(ath_csv_t *csv, ath_err_t *err);

/* Writes the chart of c to path. title is plain text (escaped here). */
int ath_svg_write(const char *path, const ath_curve_t *c, const char *title, ath_err_t *err);

/* One named line of a log-log chart: n points (x[i], y[i]), x ascending.
 * Points with a non-positive or non-finite coordinate are left out. */
typedef struct ath_series {
    const char *name;
    int n;
    const double *x, *y;
} ath_series_t;

/* Writes a log-log chart of up to 8 series with a legend (the benchmark's
 * time against batch size). Texts are plain (escaped here). */
int ath_svg_loglog(const char *path, const char *title, const char *xlabel, const char *ylabel,
                   const ath_series_t *series, int n_series, ath_err_t *err);

#endif
