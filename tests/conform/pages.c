/*
 * pages.c — host buffers in pages of their own, for the rules guard zones
 * cannot see: a `const` input is never written, not even to be restored
 * before the call returns, and nothing is read outside it.
 *
 * Each buffer is one mapping: a PROT_NONE page, the data pages, a PROT_NONE
 * page, with the payload flush against the end of the data (so the first
 * byte past it faults) or against its start (so the byte before it faults).
 * While a plugin runs the data pages are read-only. A fault inside a watched
 * mapping fails the check from the signal handler, naming the call, the
 * buffer and the element, instead of leaving the parent a bare "killed by
 * signal 11". Host memory only: device buffers have no pages to protect.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conform.h"

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

int cf_pages_alloc(cf_pages_t *pg, const char *name, size_t bytes, size_t unit, int at_end)
{
    memset(pg, 0, sizeof *pg);
    const size_t ps = page_size();
    const size_t data = (bytes + ps - 1) / ps * ps + (bytes == 0 ? ps : 0);
    pg->name = name;
    pg->unit = unit;
    pg->bytes = bytes;
    pg->map_len = data + 2 * ps;
    void *m = mmap(NULL, pg->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    pg->map = m;
    pg->data = pg->map + ps;
    pg->data_len = data;
    if (mprotect(pg->data, data, PROT_READ | PROT_WRITE) != 0)
        return -1;
    pg->p = at_end ? pg->data + data - bytes : pg->data;
    return 0;
}

int cf_pages_protect(cf_pages_t *pg, int writable)
{
    return mprotect(pg->data, pg->data_len, writable ? PROT_READ | PROT_WRITE : PROT_READ);
}

void cf_pages_free(cf_pages_t *pg)
{
    if (pg->map)
        munmap(pg->map, pg->map_len);
    memset(pg, 0, sizeof *pg);
}

/* ------------------------------------------------------------------------- */
/* The fault handler                                                         */

#define CF_PAGES_WATCH_MAX 16
static cf_pages_t *const *watched;
static int n_watched;
static int fault_fd = -1;
static const char *volatile fault_call = "a call";
static struct sigaction old_segv, old_bus;

/* Runs on the faulting thread; the process ends right after, so the
 * formatting need not be reentrant, only allocation-free. */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const unsigned char *a = si->si_addr;
    for (int i = 0; i < n_watched; i++) {
        const cf_pages_t *pg = watched[i];
        if (a < pg->map || a >= pg->map + pg->map_len)
            continue;
        const char *what = pg->unit == 1 ? "byte" : "element";
        long long at = (long long)(a - pg->p) / (long long)pg->unit;
        if (a < pg->p)
            at = -(long long)(((size_t)(pg->p - a) + pg->unit - 1) / pg->unit);
        char line[600];
        int n;
        if (a >= pg->p && a < pg->p + pg->bytes)
            n = snprintf(line, sizeof line,
                         "R F %s wrote into %s, which is const and lay in a "
                         "read-only page during the call (%s %lld): inputs are never written, "
                         "not even to be restored\n",
                         fault_call, pg->name, what, at);
        else if (a >= pg->p + pg->bytes)
            n = snprintf(line, sizeof line,
                         "R F %s touched %s past its end (%s %lld of %zu): "
                         "the page after it is PROT_NONE\n",
                         fault_call, pg->name, what, at, pg->bytes / pg->unit);
        else
            n = snprintf(line, sizeof line,
                         "R F %s touched %s before its start (%s %lld): the "
                         "page before it is %s\n",
                         fault_call, pg->name, what, at, a < pg->data ? "PROT_NONE" : "read-only");
        if (n > 0 && write(fault_fd, line, (size_t)n) < 0)
            _exit(3);
        _exit(0);
    }
    /* Not ours: the default action, so the parent reports the signal. */
    signal(sig, SIG_DFL);
}

void cf_pages_watch(cf_ctx_t *ctx, cf_pages_t *const *pgs, int n)
{
    watched = pgs;
    n_watched = n < CF_PAGES_WATCH_MAX ? n : CF_PAGES_WATCH_MAX;
    fault_fd = ctx->fd;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
}

void cf_pages_call(const char *call) { fault_call = call; }

void cf_pages_unwatch(void)
{
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    n_watched = 0;
}
