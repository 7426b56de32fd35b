/*
 * supervise.h — one child process under a deadline: fork, a pipe from the
 * child to the parent, poll with the deadline, SIGKILL to the child's whole
 * process group when the deadline passes and again once it has ended, reap.
 *
 * Used wherever code that may crash, hang or leave processes behind must run
 * away from the caller: the hot-swap vetting child (vet.c), the first load of
 * a plugin, and every check of the conformance runner (tests/conform).
 *
 * The child leads its own process group (so a plugin that forks cannot leave
 * a process behind: the group is killed, not only the child), dies with its
 * parent (PR_SET_PDEATHSIG), and starts with the default actions of SIGHUP,
 * SIGINT, SIGTERM and SIGPIPE. The parent reads what the child writes until
 * EOF or the deadline; output past max_output is read and dropped, so a child
 * cannot block on a full pipe or make the parent grow without bound.
 *
 * Not done here: interpreting the output or the status (the caller's
 * protocol), or running more than one child at a time.
 */
#ifndef ATH_SUPERVISE_H
#define ATH_SUPERVISE_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "util.h"

#define ATH_CHILD_MAX_OUTPUT_DEFAULT (64u * 1024u)

typedef struct ath_child_spec {
    /* Runs in the child with the write end of the pipe; the child ends with
     * _exit(0) when it returns. It may also exec (the fd is close-on-exec:
     * dup it to keep it across exec). */
    void (*body)(void *arg, int fd);
    void *arg;
    double timeout_s;  /* from fork to reap; the child is killed when it passes */
    size_t max_output; /* bytes of output kept; 0: ATH_CHILD_MAX_OUTPUT_DEFAULT */
} ath_child_spec_t;

typedef struct ath_child {
    pid_t pid;
    int timed_out;  /* the deadline passed: the group was killed */
    int status;     /* waitpid status (meaningful whether or not timed_out) */
    char *out;      /* what the child wrote, NUL-terminated (malloc'd; may hold NULs) */
    size_t len;     /* bytes in out */
    size_t dropped; /* bytes read past max_output and dropped */
    double seconds; /* fork to reap */
} ath_child_t;

/* Runs spec->body in a supervised child and waits for it (or the deadline).
 * Returns 0 with *c filled (free with ath_child_free), or -1 with the
 * message when no child could be started (pipe, fork, memory). */
int ath_child_run(const ath_child_spec_t *spec, ath_child_t *c, ath_err_t *err);

void ath_child_free(ath_child_t *c);

/* The process group of the child being supervised, 0 when none: a signal
 * handler of the parent may kill(-ath_child_pgid, SIGKILL) on its way out. */
extern volatile sig_atomic_t ath_child_pgid;

#endif
