/*
 * util.c — error text and the monotonic clock (see util.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int ath_errf(ath_err_t *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

double ath_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
