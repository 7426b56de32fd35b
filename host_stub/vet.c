/*
 * vet.c — the vetting child: its side (load, init, canary, report), the
 * request file of an exec'd child, and the parent's reading of the verdict
 * (vet.h).
 *
 * Protocol on the pipe: one tag byte per stage entered (L, I, C, D), then
 * 'V' with the candidate's names and 'R' with the verdict, each a fixed
 * payload. A child that dies leaves the last stage it entered behind it.
 */
#define _GNU_SOURCE /* strsignal, O_CLOEXEC */
#include "vet.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "canary.h"
#include "supervise.h"
#include "trunk.h"

enum {
    TAG_LOAD = 'L',
    TAG_INIT = 'I',
    TAG_CANARY = 'C',
    TAG_DESTROY = 'D',
    TAG_VERSION = 'V',
    TAG_REPORT = 'R'
};

typedef struct vet_report {
    int32_t ok;
    int32_t load_status; /* ath_load_status_t when loading or init failed */
    int32_t exact;       /* the candidate claims EXACT */
    int32_t pad;
    char msg[1024];
} vet_report_t;

/* ------------------------------------------------------------------------- */
/* The child's side                                                          */

static void put(int fd, char tag, const void *payload, size_t n)
{
    char buf[1 + sizeof(vet_report_t)];
    buf[0] = tag;
    if (n)
        memcpy(buf + 1, payload, n);
    size_t off = 0;
    while (off < 1 + n) {
        ssize_t w = write(fd, buf + off, 1 + n - off);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return;
        }
        off += (size_t)w;
    }
}

static void vet_body(const ath_vet_req_t *rq, int fd)
{
    vet_report_t rep;
    memset(&rep, 0, sizeof rep);
    ath_err_t err = {{0}};

    put(fd, TAG_LOAD, NULL, 0);
    ath_plugin_t probe;
    ath_load_status_t ls = ath_plugin_load(rq->path, &probe, &err);
    if (ls != ATH_LOAD_OK) {
        rep.load_status = ls;
        snprintf(rep.msg, sizeof rep.msg, "%s", err.msg);
        put(fd, TAG_REPORT, &rep, sizeof rep);
        return;
    }
    ath_vet_version_t v;
    memset(&v, 0, sizeof v);
    snprintf(v.impl, sizeof v.impl, "%s", probe.api.impl_name);
    snprintf(v.kver, sizeof v.kver, "%s", probe.api.kernel_version);
    put(fd, TAG_VERSION, &v, sizeof v);

    put(fd, TAG_INIT, NULL, 0);
    ath_trunk_t t;
    ls = ath_trunk_open(&t, rq->path, &rq->config, rq->device, &err);
    ath_plugin_unload(&probe);
    if (ls != ATH_LOAD_OK) {
        rep.load_status = ls;
        snprintf(rep.msg, sizeof rep.msg, "%s", err.msg);
        put(fd, TAG_REPORT, &rep, sizeof rep);
        return;
    }
    rep.exact = ath_canary_is_exact(&t);
    put(fd, TAG_CANARY, NULL, 0);
    int rc = ath_canary_run(&t, rq->params, rq->x, rq->dout, rq->pb, rq->out, rq->grads, &err);
    if (rc == 0)
        rc = ath_canary_compare(&t.config, rq->pb, rq->ref_exact && rep.exact,
                                rq->has_ref ? rq->ref_out : NULL, rq->out,
                                rq->has_ref ? rq->ref_grads : NULL, rq->grads, &err);
    put(fd, TAG_DESTROY, NULL, 0);
    ath_trunk_close(&t);
    rep.ok = rc == 0;
    rep.load_status = ATH_LOAD_OK;
    snprintf(rep.msg, sizeof rep.msg, "%s", rc == 0 ? "" : err.msg);
    put(fd, TAG_REPORT, &rep, sizeof rep);
}

static const char *stage_name(char tag)
{
    switch (tag) {
    case TAG_LOAD:
        return "loading (dlopen, entry, negotiation)";
    case TAG_INIT:
        return "init";
    case TAG_CANARY:
        return "the canary";
    case TAG_DESTROY:
        return "destroy";
    default:
        return "start-up";
    }
}

/* ------------------------------------------------------------------------- */
/* Exec mode: the request as one file the child reads back                   */

static size_t probe_floats(const ath_vet_req_t *rq, size_t *nx, size_t *no)
{
    *nx = (size_t)rq->pb * (size_t)rq->config.enc;
    *no = (size_t)rq->pb * (size_t)rq->config.aux;
    return (size_t)rq->n_params;
}

static int write_request(const char *file, const ath_vet_req_t *rq, ath_err_t *err)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return ath_errf(err, "cannot write %s: %s", file, strerror(e));
    }
    size_t nx, no, np = probe_floats(rq, &nx, &no);
    int ok = fwrite(rq, sizeof *rq, 1, f) == 1 && fwrite(rq->params, sizeof(float), np, f) == np &&
             fwrite(rq->x, sizeof(float), nx, f) == nx &&
             fwrite(rq->dout, sizeof(float), no, f) == no;
    if (ok && rq->has_ref)
        ok = fwrite(rq->ref_out, sizeof(float), no, f) == no &&
             fwrite(rq->ref_grads, sizeof(float), np, f) == np;
    if (fclose(f) != 0 || !ok)
        return ath_errf(err, "cannot write %s", file);
    return 0;
}

int ath_vet_main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int fd = atoi(argv[3]);
    FILE *f = fopen(argv[2], "rb");
    if (!f)
        return 2;
    ath_vet_req_t rq;
    if (fread(&rq, sizeof rq, 1, f) != 1 || rq.pb < 1 || rq.n_params == 0) {
        fclose(f);
        return 2;
    }
    size_t nx, no, np = probe_floats(&rq, &nx, &no);
    size_t stored = np + nx + no + (rq.has_ref ? no + np : 0);
    float *buf = malloc((stored + no + np) * sizeof(float));
    if (!buf || fread(buf, sizeof(float), stored, f) != stored) {
        fclose(f);
        free(buf);
        return 2;
    }
    fclose(f);
    float *p = buf;
    rq.params = p, p += np;
    rq.x = p, p += nx;
    rq.dout = p, p += no;
    rq.ref_out = rq.has_ref ? p : NULL, p += rq.has_ref ? no : 0;
    rq.ref_grads = rq.has_ref ? p : NULL, p += rq.has_ref ? np : 0;
    rq.out = p, p += no;
    rq.grads = p;
    vet_body(&rq, fd);
    free(buf);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The parent's side                                                         */

/* The child: vet_body here (fork), or the program afresh (exec) with the
 * request file and the pipe as fd 3. */
typedef struct vet_job {
    const ath_vet_req_t *rq;
    const char *exe, *req_file;
} vet_job_t;

static void vet_child_body(void *arg, int fd)
{
    const vet_job_t *j = arg;
    if (j->exe) {
        if (fd == 3 ? fcntl(fd, F_SETFD, 0) != 0 : dup2(fd, 3) < 0)
            _exit(127);
        char *args[] = {(char *)j->exe, ATH_VET_COMMAND, (char *)j->req_file, "3", NULL};
        execv(j->exe, args);
        _exit(127);
    }
    vet_body(j->rq, fd);
}

int ath_vet(const ath_vet_req_t *rq, double timeout_s, const char *exe, const char *req_file,
            ath_vet_version_t *ver, const char **reason, double *child_ms, ath_err_t *err)
{
    *child_ms = 0.0;
    if (exe && write_request(req_file, rq, err) != 0) {
        *reason = ATH_VET_R_VETTING;
        return -1;
    }
    vet_job_t job = {rq, exe, req_file};
    ath_child_spec_t spec = {
        .body = vet_child_body,
        .arg = &job,
        .timeout_s = timeout_s,
        .max_output = 4096,
    };
    ath_child_t ch;
    int started = ath_child_run(&spec, &ch, err) == 0;
    if (exe)
        unlink(req_file);
    if (!started) {
        *reason = ATH_VET_R_VETTING;
        return -1;
    }
    *child_ms = ch.seconds * 1e3;
    char buf[4096];
    size_t n = ch.len < sizeof buf ? ch.len : sizeof buf;
    memcpy(buf, ch.out, n);
    int timed_out = ch.timed_out, status = ch.status;
    pid_t pid = ch.pid;
    ath_child_free(&ch);

    /* Stage tags, the version, the report. */
    char stage = 0;
    const vet_report_t *rep = NULL;
    vet_report_t rep_copy;
    for (size_t i = 0; i < n;) {
        char tag = buf[i++];
        if (tag == TAG_VERSION) {
            if (n - i < sizeof *ver)
                break;
            memcpy(ver, buf + i, sizeof *ver);
            ver->impl[sizeof ver->impl - 1] = ver->kver[sizeof ver->kver - 1] = '\0';
            i += sizeof *ver;
        } else if (tag == TAG_REPORT) {
            if (n - i < sizeof rep_copy)
                break;
            memcpy(&rep_copy, buf + i, sizeof rep_copy);
            rep_copy.msg[sizeof rep_copy.msg - 1] = '\0';
            rep = &rep_copy;
            i += sizeof rep_copy;
        } else {
            stage = tag;
        }
    }
    if (timed_out) {
        *reason = ATH_VET_R_HUNG;
        return ath_errf(err,
                        "hung during %s: no answer within %.1f s; the vetting child (pid %d) "
                        "was killed",
                        stage_name(stage), timeout_s, (int)pid);
    }
    if (WIFSIGNALED(status)) {
        *reason = ATH_VET_R_CRASHED;
        return ath_errf(err, "crashed during %s: the vetting child (pid %d) died of signal %d (%s)",
                        stage_name(stage), (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
    }
    if (!rep) {
        *reason = ATH_VET_R_CRASHED;
        return ath_errf(err,
                        "the vetting child (pid %d) exited with status %d during %s without a "
                        "verdict",
                        (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1, stage_name(stage));
    }
    if (rep->load_status != ATH_LOAD_OK) {
        *reason = ath_load_status_name((ath_load_status_t)rep->load_status);
        return ath_errf(err, "%s", rep->msg);
    }
    if (!rep->ok) {
        *reason = ATH_VET_R_CANARY;
        return ath_errf(err, "%s", rep->msg);
    }
    return 0;
}
