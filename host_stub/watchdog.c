/*
 * watchdog.c — the call watchdog (watchdog.h): one thread polling an armed
 * deadline every 20 ms; the arming side only stores atomics.
 */
#define _POSIX_C_SOURCE 200809L
#include "watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static struct {
    pthread_t thread;
    int running;
    double timeout_s;
    atomic_int stop;
    atomic_uint_fast64_t armed_at_ns; /* 0: disarmed */
    _Atomic(const char *) what;
    atomic_uint_fast64_t step;
    _Atomic(const char *) ck_path;
    atomic_uint_fast64_t ck_step;
} g_wd;

static uint64_t now_ns(void) { return (uint64_t)(ath_now_s() * 1e9); }

static void *watch(void *arg)
{
    (void)arg;
    const struct timespec tick = {0, 20 * 1000 * 1000};
    while (!atomic_load(&g_wd.stop)) {
        nanosleep(&tick, NULL);
        uint64_t at = atomic_load(&g_wd.armed_at_ns);
        if (at == 0 || (double)(now_ns() - at) * 1e-9 < g_wd.timeout_s)
            continue;
        char msg[1024], ck[600] = "no checkpoint was written in this run";
        const char *path = atomic_load(&g_wd.ck_path);
        if (path)
            snprintf(ck, sizeof ck, "the last checkpoint, %s at step %llu, is intact", path,
                     (unsigned long long)atomic_load(&g_wd.ck_step));
        int n = snprintf(msg, sizeof msg,
                         "auxtrunk-host: %s at step %llu has not returned after %g s "
                         "(--call-timeout); ending the run (exit code %d): %s\n",
                         atomic_load(&g_wd.what), (unsigned long long)atomic_load(&g_wd.step),
                         g_wd.timeout_s, ATH_EXIT_HUNG, ck);
        fflush(stdout);
        if (n > 0 && write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1) < 0) {
            /* nothing left to report to */
        }
        _exit(ATH_EXIT_HUNG);
    }
    return NULL;
}

int ath_watchdog_start(double timeout_s)
{
    if (timeout_s <= 0 || g_wd.running)
        return 0;
    g_wd.timeout_s = timeout_s;
    atomic_store(&g_wd.stop, 0);
    atomic_store(&g_wd.armed_at_ns, 0);
    if (pthread_create(&g_wd.thread, NULL, watch, NULL) != 0)
        return -1;
    g_wd.running = 1;
    return 0;
}

void ath_watchdog_stop(void)
{
    if (!g_wd.running)
        return;
    atomic_store(&g_wd.stop, 1);
    pthread_join(g_wd.thread, NULL);
    g_wd.running = 0;
}

void ath_watchdog_arm(const char *what, uint64_t step)
{
    atomic_store(&g_wd.what, what);
    atomic_store(&g_wd.step, step);
    atomic_store(&g_wd.armed_at_ns, now_ns() | 1u);
}

void ath_watchdog_disarm(void) { atomic_store(&g_wd.armed_at_ns, 0); }

void ath_watchdog_checkpoint(const char *path, uint64_t step)
{
    atomic_store(&g_wd.ck_step, step);
    atomic_store(&g_wd.ck_path, path);
}
