/*
 * supervise.c — one child process under a deadline (supervise.h).
 */
#define _GNU_SOURCE /* pipe2, prctl */
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t ath_child_pgid;

static void child_start(const ath_child_spec_t *spec, int rd, int wr, pid_t parent)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before prctl took effect */
        _exit(127);
    signal(SIGHUP, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    close(rd);
    spec->body(spec->arg, wr);
    _exit(0);
}

/* Has pid ended? Leaves it unreaped (a zombie keeps its pid and process
 * group id from being reused while the group is killed). */
static int ended(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno != EINTR;
    return si.si_pid == pid;
}

int ath_child_run(const ath_child_spec_t *spec, ath_child_t *c, ath_err_t *err)
{
    memset(c, 0, sizeof *c);
    size_t cap = spec->max_output ? spec->max_output : ATH_CHILD_MAX_OUTPUT_DEFAULT;
    c->out = malloc(cap + 1);
    if (!c->out)
        return ath_errf(err, "out of host memory for a child's output");
    double t0 = ath_now_s(), deadline = t0 + spec->timeout_s;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        int e = errno;
        ath_child_free(c);
        return ath_errf(err, "pipe: %s", strerror(e));
    }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        ath_child_free(c);
        return ath_errf(err, "fork: %s", strerror(e));
    }
    if (pid == 0)
        child_start(spec, fds[0], fds[1], parent);
    setpgid(pid, pid); /* also done by the child; whichever runs first */
    ath_child_pgid = pid;
    close(fds[1]);
    c->pid = pid;

    /* Read until EOF or the deadline. */
    for (;;) {
        double left = deadline - ath_now_s();
        if (left <= 0) {
            c->timed_out = 1;
            break;
        }
        /* Slices of at most 100 ms: a child that ended while a process it
         * started still holds the pipe open sends no EOF. */
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int pr = poll(&pfd, 1, left > 0.1 ? 100 : (int)(left * 1000.0) + 1);
        if (pr == 0 && ended(pid))
            break;
        if (pr <= 0)
            continue; /* EINTR or the deadline: the loop decides */
        char drop[4096];
        int keep = c->len < cap;
        ssize_t got =
            keep ? read(fds[0], c->out + c->len, cap - c->len) : read(fds[0], drop, sizeof drop);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (keep)
            c->len += (size_t)got;
        else
            c->dropped += (size_t)got;
    }
    close(fds[0]);

    /* After EOF the child is ending: it gets until the deadline to do so. */
    while (!c->timed_out && !ended(pid)) {
        if (ath_now_s() > deadline) {
            c->timed_out = 1;
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    /* The whole group, whatever the child left behind in it, then the child
     * itself in case it never got to lead the group. */
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, &c->status, 0) < 0 && errno == EINTR)
        ;
    ath_child_pgid = 0;
    c->out[c->len] = '\0';
    c->seconds = ath_now_s() - t0;
    return 0;
}

void ath_child_free(ath_child_t *c)
{
    free(c->out);
    c->out = NULL;
    c->len = 0;
}
