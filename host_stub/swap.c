/*
 * swap.c — hot-swapping the trainer's plugin (swap.h): security checks, the
 * private copy, the canary, the vetting child, the switch, probation and
 * rollback, and the triggers (--swap-at, inotify or polling, SIGHUP).
 *
 * Only the child ever runs a candidate's code before it has passed; the
 * parent touches a candidate only after the child reported a pass.
 */
#define _GNU_SOURCE /* prctl, pipe2, O_CLOEXEC, realpath */
#include "swap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "layout.h"
#include "options.h"
#include "sha256.h"
#include "supervise.h"

#define SHA_HEX ATH_SHA256_HEX

struct ath_swap {
    ath_swap_opts_t o;
    auxtrunk_config_t config;
    int device;
    FILE *log;

    /* The private directory (0700) and a counter for unique copy names. */
    char tmpdir[ATH_PATH_MAX];
    unsigned counter;

    /* Allow-list of digests (lower-case hex), or none. */
    char (*allow)[SHA_HEX];
    int n_allow;

    /* Versions: digest of the live one; the previous one while on probation. */
    char live_sha[SHA_HEX];
    char source[ATH_PATH_MAX]; /* the file the live version came from */
    ath_trunk_t prev;
    char prev_sha[SHA_HEX];
    char prev_source[ATH_PATH_MAX];
    uint64_t probation_end; /* prev is unloaded once this step has completed */
    char bad_sha[SHA_HEX];  /* the last version rolled back: refused if offered again */
    uint64_t bad_step;
    int cuda_used;          /* a CUDA context may exist in this process */

    /* The canary: probe batch, the live version's results, the candidate's. */
    int32_t pb;
    size_t n_params;
    float *probe_x, *probe_dout, *ref_out, *ref_grads, *out, *grads;

    /* Triggers. */
    int next_at;
    char watch_file[ATH_PATH_MAX], watch_dir[ATH_PATH_MAX];
    const char *watch_name;
    int ino_fd;              /* -1: polling (or not watching) */
    double next_poll_s;
    struct stat seen, pending; /* polling: last acted-on and last observed */
    int have_seen, have_pending;
    int change_seen;         /* ath_swap_due saw the watched file change */
    struct sigaction old_hup;
    int hup_installed;

    ath_swap_stats_t stats;
};

/* SIGHUP: ask for a re-read of the plugin directory between two steps. */
static volatile sig_atomic_t g_hup;
static void on_hup(int sig)
{
    (void)sig;
    g_hup = 1;
}

/* ------------------------------------------------------------------------- */
/* Small helpers                                                             */

static void dir_of(const char *path, char *dir, size_t n)
{
    snprintf(dir, n, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, n, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
}

/* A message that did not fit ends in "..." (len: what snprintf wanted). */
static void mark_cut(char *buf, size_t n, int len)
{
    if (len >= (int)n && n > 4)
        memcpy(buf + n - 4, "...", 4);
}

/* Messages from the loader name the private copy; the operator knows the
 * file they deployed, so every occurrence of copy is replaced by src. */
static void name_source(char *msg, size_t n, const char *copy, const char *src)
{
    if (!copy[0])
        return;
    char out[sizeof(((ath_err_t *)0)->msg)];
    size_t o = 0, lc = strlen(copy), ls = strlen(src);
    for (const char *p = msg; *p && o + 1 < sizeof out;) {
        if (strncmp(p, copy, lc) == 0 && o + ls + 1 < sizeof out) {
            memcpy(out + o, src, ls);
            o += ls;
            p += lc;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    snprintf(msg, n, "%s", out);
}

/* "cpu-ref [cpu-ref 1.0.0 (canon 1)]" of a loaded trunk. */
static const char *version_of(const ath_trunk_t *t, char *buf, size_t n)
{
    if (!t->plugin.lib)
        snprintf(buf, n, "(none)");
    else
        snprintf(buf, n, "%s [%s]", t->plugin.api.impl_name, t->plugin.api.kernel_version);
    return buf;
}

int ath_swap_parse_at(const char *text, ath_swap_at_t *at, ath_err_t *err)
{
    const char *colon = strchr(text, ':');
    char step[32];
    if (!colon || !colon[1] || colon == text || (size_t)(colon - text) >= sizeof step)
        return ath_errf(err, "--swap-at wants STEP:PATH, got '%s'", text);
    memcpy(step, text, (size_t)(colon - text));
    step[colon - text] = '\0';
    if (ath_parse_u64(step, 0, UINT64_MAX, "--swap-at STEP", &at->step, err) != 0)
        return ath_errf(err, "--swap-at wants STEP:PATH with a decimal STEP, got '%s'", text);
    at->path = colon + 1;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Security: ownership, modes, the private copy and its digest               */

static int check_stat(const struct stat *st, const char *what, const char *path, ath_err_t *err)
{
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return ath_errf(err, "%s %s is writable by %s (mode %04o); refusing it", what, path,
                        (st->st_mode & S_IWOTH) ? "others" : "its group",
                        (unsigned)(st->st_mode & 07777));
    if (st->st_uid != geteuid() && st->st_uid != 0)
        return ath_errf(err, "%s %s is owned by uid %u, neither this user (uid %u) nor root; "
                             "refusing it",
                        what, path, (unsigned)st->st_uid, (unsigned)geteuid());
    return 0;
}

static int check_dir(const char *dir, ath_err_t *err)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return ath_errf(err, "plugin directory %s: %s", dir, strerror(errno));
    return check_stat(&st, "plugin directory", dir, err);
}

/* Refusal reasons (the names tests and operators grep for). */
#define R_NO_FILE "no-file"
#define R_PERMISSIONS "permissions"
#define R_DIGEST "digest"
#define R_COPY "copy-failed"
#define R_ROLLED_BACK "rolled-back-before"
#define R_CRASHED "crashed"
#define R_HUNG "hung"
#define R_CANARY "canary-failed"
#define R_REFERENCE "reference-failed"
#define R_VETTING "vetting-failed"

/*
 * Copies the plugin file at src into a fresh private file, checking the
 * opened file's owner and mode (fstat: the file actually read) and both
 * directories, and hashing what it copies; then checks the allow-list.
 * Returns 0 (dst is the copy, sha its digest), or -1 with *reason and the
 * message (no copy is left behind).
 */
static int private_copy(ath_swap_t *s, const char *src, char *dst, size_t n,
                        char sha[SHA_HEX], const char **reason, ath_err_t *err)
{
    char dir[ATH_PATH_MAX], real[PATH_MAX], realdir[ATH_PATH_MAX];
    dir_of(src, dir, sizeof dir);
    *reason = R_PERMISSIONS;
    if (check_dir(dir, err) != 0)
        return -1;
    if (!realpath(src, real)) {
        *reason = R_NO_FILE;
        return ath_errf(err, "no plugin: %s: %s", src, strerror(errno));
    }
    dir_of(real, realdir, sizeof realdir);
    if (strcmp(realdir, dir) != 0 && check_dir(realdir, err) != 0)
        return -1;

    int in = open(real, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        *reason = R_NO_FILE;
        return ath_errf(err, "cannot open %s: %s", src, strerror(errno));
    }
    struct stat st;
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(in);
        *reason = R_NO_FILE;
        return ath_errf(err, "%s is not a regular file", src);
    }
    if (check_stat(&st, "plugin file", src, err) != 0) {
        close(in);
        return -1;
    }

    *reason = R_COPY;
    if (snprintf(dst, n, "%s/%u-" ATH_PLUGIN_FILE, s->tmpdir, ++s->counter) >= (int)n)
        return ath_errf(err, "private directory path too long");
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return ath_errf(err, "cannot create the private copy %s: %s", dst, strerror(errno));
    }
    ath_sha256_t h;
    ath_sha256_init(&h);
    char buf[1 << 16];
    ssize_t got;
    int bad = 0;
    while ((got = read(in, buf, sizeof buf)) > 0) {
        ath_sha256_update(&h, buf, (size_t)got);
        for (ssize_t off = 0; off < got && !bad;) {
            ssize_t w = write(out, buf + off, (size_t)(got - off));
            if (w <= 0)
                bad = 1;
            else
                off += w;
        }
        if (bad)
            break;
    }
    if (got < 0)
        bad = 1;
    close(in);
    if (close(out) != 0)
        bad = 1;
    if (bad) {
        unlink(dst);
        return ath_errf(err, "copying %s to %s failed: %s", src, dst, strerror(errno));
    }
    uint8_t d[ATH_SHA256_BYTES];
    ath_sha256_final(&h, d);
    ath_sha256_hex(d, sha);

    if (s->n_allow > 0) {
        int found = 0;
        for (int i = 0; i < s->n_allow && !found; i++)
            found = strcmp(s->allow[i], sha) == 0;
        if (!found) {
            unlink(dst);
            *reason = R_DIGEST;
            return ath_errf(err, "%s has SHA-256 %s, which is not on the allow-list %s", src,
                            sha, s->o.sha256_file);
        }
    }
    *reason = "";
    return 0;
}

static int read_allow_list(ath_swap_t *s, const char *path, ath_err_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ath_errf(err, "cannot read the SHA-256 allow-list %s: %s", path, strerror(errno));
    char line[1024];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        char hex[SHA_HEX];
        int k = 0;
        for (; k < 64 && p[k]; k++) {
            char c = p[k];
            if (c >= 'A' && c <= 'F')
                c = (char)(c - 'A' + 'a');
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                break;
            hex[k] = c;
        }
        hex[64] = '\0';
        if (k != 64 || (p[64] && p[64] != ' ' && p[64] != '\t' && p[64] != '\n')) {
            rc = ath_errf(err, "%s:%d: not a SHA-256 digest (64 hex digits, as sha256sum prints)",
                          path, lineno);
            break;
        }
        void *grown = realloc(s->allow, (size_t)(s->n_allow + 1) * sizeof *s->allow);
        if (!grown) {
            rc = ath_errf(err, "out of host memory");
            break;
        }
        s->allow = grown;
        memcpy(s->allow[s->n_allow++], hex, SHA_HEX);
    }
    fclose(f);
    if (rc == 0 && s->n_allow == 0)
        rc = ath_errf(err, "the SHA-256 allow-list %s lists no digest", path);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* The canary                                                                */

static const char *tensor_names[7] = {"out", "dW1", "db1", "dW2", "db2", "dW3", "db3"};

/*
 * Compares a candidate's canary results with the reference. exact: bit
 * equality; otherwise finite and within ATH_SWAP_TOL_REL of each tensor's
 * largest reference magnitude. Returns 0 or -1 with the first difference.
 */
static int canary_compare(const auxtrunk_config_t *c, int32_t pb, int exact, const float *ref_out,
                          const float *out, const float *ref_grads, const float *grads,
                          ath_err_t *err)
{
    ath_layout_t l = ath_layout_of(c);
    struct {
        const float *r, *v;
        size_t n;
    } t[7] = {
        {ref_out, out, (size_t)pb * (size_t)c->aux},
        {ref_grads + l.w1, grads + l.w1, l.b1 - l.w1},
        {ref_grads + l.b1, grads + l.b1, l.w2 - l.b1},
        {ref_grads + l.w2, grads + l.w2, l.b2 - l.w2},
        {ref_grads + l.b2, grads + l.b2, l.w3 - l.b2},
        {ref_grads + l.w3, grads + l.w3, l.b3 - l.w3},
        {ref_grads + l.b3, grads + l.b3, l.count - l.b3},
    };
    for (int k = 0; k < 7; k++) {
        double scale = 0.0, worst = -1.0;
        size_t at = 0;
        for (size_t i = 0; i < t[k].n; i++) {
            float v = t[k].v[i];
            if (!isfinite(v))
                return ath_errf(err, "canary: %s[%zu] is %g (never allowed)", tensor_names[k], i,
                                (double)v);
            if (exact && memcmp(&v, &t[k].r[i], sizeof v) != 0) {
                uint32_t a, b;
                memcpy(&a, &t[k].r[i], 4);
                memcpy(&b, &v, 4);
                return ath_errf(err,
                                "canary: %s[%zu] differs in exact mode: %.9g (0x%08x) running, "
                                "%.9g (0x%08x) candidate",
                                tensor_names[k], i, (double)t[k].r[i], (unsigned)a, (double)v,
                                (unsigned)b);
            }
            double r = fabs((double)t[k].r[i]), e = fabs((double)v - (double)t[k].r[i]);
            if (r > scale)
                scale = r;
            if (e > worst) {
                worst = e;
                at = i;
            }
        }
        if (!exact && worst > ATH_SWAP_TOL_REL * scale)
            return ath_errf(err,
                            "canary: %s[%zu] is off by %.3g, above the tolerance %.1e x %.3g "
                            "(largest running magnitude)",
                            tensor_names[k], at, worst, ATH_SWAP_TOL_REL, scale);
    }
    return 0;
}

/* Runs the probe through t: forward into out, backward into grads. */
static int canary_run(ath_trunk_t *t, const float *params, const float *x, const float *dout,
                      int32_t pb, float *out, float *grads, ath_err_t *err)
{
    if (ath_trunk_forward(t, params, x, pb, out, err) != 0)
        return -1;
    return ath_trunk_backward(t, dout, pb, grads, err);
}

static int is_exact(const ath_trunk_t *t)
{
    return (t->plugin.api.caps & AUXTRUNK_CAP_EXACT) && !(t->config.flags & AUXTRUNK_CONFIG_FAST);
}

/* ------------------------------------------------------------------------- */
/* The vetting child                                                         */

/* Everything the child needs: in fork mode it points into the parent's
 * memory (copy-on-write); in exec mode it is read from a request file. */
typedef struct vet_req {
    auxtrunk_config_t config;
    int32_t device, pb, ref_exact, pad;
    uint64_t n_params;
    char path[ATH_PATH_MAX];
    const float *params, *x, *dout, *ref_out, *ref_grads;
    float *out, *grads;
} vet_req_t;

/* The child's messages: one tag byte, then for 'V' and 'R' a fixed payload. */
enum { TAG_LOAD = 'L', TAG_INIT = 'I', TAG_CANARY = 'C', TAG_DESTROY = 'D', TAG_VERSION = 'V',
       TAG_REPORT = 'R' };

typedef struct vet_version {
    char impl[64];
    char kver[192];
} vet_version_t;

typedef struct vet_report {
    int32_t ok;
    int32_t load_status; /* ath_load_status_t when loading or init failed */
    int32_t exact;       /* the candidate claims EXACT */
    int32_t pad;
    char msg[1024];
} vet_report_t;

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

static void vet_body(const vet_req_t *rq, int fd)
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
    vet_version_t v;
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
    rep.exact = is_exact(&t);
    put(fd, TAG_CANARY, NULL, 0);
    int rc = canary_run(&t, rq->params, rq->x, rq->dout, rq->pb, rq->out, rq->grads, &err);
    if (rc == 0)
        rc = canary_compare(&t.config, rq->pb, rq->ref_exact && rep.exact, rq->ref_out, rq->out,
                            rq->ref_grads, rq->grads, &err);
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
    case TAG_LOAD: return "loading (dlopen, entry, negotiation)";
    case TAG_INIT: return "init";
    case TAG_CANARY: return "the canary";
    case TAG_DESTROY: return "destroy";
    default: return "start-up";
    }
}

/* Exec mode: the request as one file the child reads back. */
static int write_request(const char *file, const vet_req_t *rq, ath_err_t *err)
{
    FILE *f = fopen(file, "wb");
    if (!f)
        return ath_errf(err, "cannot write %s: %s", file, strerror(errno));
    size_t nx = (size_t)rq->pb * (size_t)rq->config.enc, no = (size_t)rq->pb * (size_t)rq->config.aux;
    int ok = fwrite(rq, sizeof *rq, 1, f) == 1 &&
             fwrite(rq->params, sizeof(float), rq->n_params, f) == rq->n_params &&
             fwrite(rq->x, sizeof(float), nx, f) == nx && fwrite(rq->dout, sizeof(float), no, f) == no &&
             fwrite(rq->ref_out, sizeof(float), no, f) == no &&
             fwrite(rq->ref_grads, sizeof(float), rq->n_params, f) == rq->n_params;
    if (fclose(f) != 0 || !ok)
        return ath_errf(err, "cannot write %s", file);
    return 0;
}

int ath_swap_vet_main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int fd = atoi(argv[3]);
    FILE *f = fopen(argv[2], "rb");
    if (!f)
        return 2;
    vet_req_t rq;
    if (fread(&rq, sizeof rq, 1, f) != 1 || rq.pb < 1 || rq.n_params == 0) {
        fclose(f);
        return 2;
    }
    size_t nx = (size_t)rq.pb * (size_t)rq.config.enc, no = (size_t)rq.pb * (size_t)rq.config.aux;
    size_t total = 3 * rq.n_params + nx + 3 * no;
    float *buf = malloc(total * sizeof(float));
    if (!buf || fread(buf, sizeof(float), total - rq.n_params - no, f) != total - rq.n_params - no) {
        fclose(f);
        free(buf);
        return 2;
    }
    fclose(f);
    float *p = buf;
    rq.params = p, p += rq.n_params;
    rq.x = p, p += nx;
    rq.dout = p, p += no;
    rq.ref_out = p, p += no;
    rq.ref_grads = p, p += rq.n_params;
    rq.out = p, p += no;
    rq.grads = p;
    vet_body(&rq, fd);
    free(buf);
    return 0;
}

/* The vetting child: vet_body here (fork), or this program afresh (exec)
 * with the request file and the pipe as fd 3. */
typedef struct vet_job {
    ath_swap_t *s;
    const vet_req_t *rq;
    int use_exec;
    const char *req_file;
} vet_job_t;

static void vet_child_body(void *arg, int fd)
{
    const vet_job_t *j = arg;
    if (j->use_exec) {
        if (fd == 3 ? fcntl(fd, F_SETFD, 0) != 0 : dup2(fd, 3) < 0)
            _exit(127);
        char *args[] = {(char *)j->s->o.vet_exe, ATH_SWAP_VET_COMMAND, (char *)j->req_file, "3",
                        NULL};
        execv(j->s->o.vet_exe, args);
        _exit(127);
    }
    vet_body(j->rq, fd);
}

/*
 * Runs vet_body in a child and reads its verdict. Returns 0 when the child
 * passed; otherwise -1 with *reason and the message. *ver gets the
 * candidate's names once the child got that far.
 */
static int vet_in_child(ath_swap_t *s, const vet_req_t *rq, vet_version_t *ver,
                        const char **reason, double *child_ms, ath_err_t *err)
{
    /* A forked child cannot use CUDA once the parent has a context: then the
     * child starts afresh by exec (the request travels in a file). */
    int use_exec = s->o.vet_exe && (s->cuda_used || s->o.vet_exec_always);
    char req_file[ATH_PATH_MAX] = "";
    if (use_exec) {
        int len = snprintf(req_file, sizeof req_file, "%s/%u.vet", s->tmpdir, ++s->counter);
        if (len >= (int)sizeof req_file || write_request(req_file, rq, err) != 0) {
            *reason = R_VETTING;
            return -1;
        }
    }
    vet_job_t job = {s, rq, use_exec, req_file};
    ath_child_spec_t spec = {
        .body = vet_child_body,
        .arg = &job,
        .timeout_s = s->o.vet_timeout_s > 0 ? s->o.vet_timeout_s : ATH_SWAP_VET_TIMEOUT_S,
        .max_output = 4096,
    };
    ath_child_t ch;
    int started = ath_child_run(&spec, &ch, err) == 0;
    if (req_file[0])
        unlink(req_file);
    if (!started) {
        *reason = R_VETTING;
        return -1;
    }
    *child_ms = ch.seconds * 1e3;
    char buf[4096];
    size_t n = ch.len < sizeof buf ? ch.len : sizeof buf;
    memcpy(buf, ch.out, n);
    int timed_out = ch.timed_out, status = ch.status;
    pid_t pid = ch.pid;
    double limit = spec.timeout_s;
    ath_child_free(&ch);
    /* Parse: stage tags, the version, the report. */
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
        *reason = R_HUNG;
        return ath_errf(err, "hung during %s: no answer within %.1f s; the vetting child (pid %d) "
                             "was killed",
                        stage_name(stage), limit, (int)pid);
    }
    if (WIFSIGNALED(status)) {
        *reason = R_CRASHED;
        return ath_errf(err, "crashed during %s: the vetting child (pid %d) died of signal %d (%s)",
                        stage_name(stage), (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
    }
    if (!rep) {
        *reason = R_CRASHED;
        return ath_errf(err, "the vetting child (pid %d) exited with status %d during %s without a "
                             "verdict",
                        (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1, stage_name(stage));
    }
    if (rep->load_status != ATH_LOAD_OK) {
        *reason = ath_load_status_name((ath_load_status_t)rep->load_status);
        return ath_errf(err, "%s", rep->msg);
    }
    if (!rep->ok) {
        *reason = R_CANARY;
        return ath_errf(err, "%s", rep->msg);
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Logging                                                                   */

static void logf_(ath_swap_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void logf_(ath_swap_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(s->log, fmt, ap);
    va_end(ap);
    fputc('\n', s->log);
    fflush(s->log);
}

/* ------------------------------------------------------------------------- */
/* Create, open, destroy                                                     */

int ath_swap_create(ath_swap_t **out, const ath_swap_opts_t *o, const auxtrunk_config_t *config,
                    int device, ath_err_t *err)
{
    ath_swap_t *s = calloc(1, sizeof *s);
    if (!s)
        return ath_errf(err, "out of host memory");
    s->o = *o;
    s->config = *config;
    s->device = device;
    s->log = o->log ? o->log : stdout;
    s->ino_fd = -1;
    for (int i = 1; i < o->n_at; i++)
        if (o->at[i].step < o->at[i - 1].step) {
            free(s);
            return ath_errf(err, "--swap-at entries must be in ascending step order");
        }

    const char *base = getenv("TMPDIR");
    snprintf(s->tmpdir, sizeof s->tmpdir, "%s/auxtrunk-swap-XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(s->tmpdir)) {
        int e = errno;
        free(s);
        return ath_errf(err, "cannot create a private directory for plugin copies: %s",
                        strerror(e));
    }
    if (o->sha256_file && read_allow_list(s, o->sha256_file, err) != 0)
        goto fail;

    s->pb = config->max_batch < ATH_SWAP_PROBE_BATCH ? config->max_batch : ATH_SWAP_PROBE_BATCH;
    s->n_params = ath_layout_of(config).count;
    size_t nx = (size_t)s->pb * (size_t)config->enc, no = (size_t)s->pb * (size_t)config->aux;
    s->probe_x = malloc(nx * sizeof(float));
    s->probe_dout = malloc(no * sizeof(float));
    s->ref_out = malloc(no * sizeof(float));
    s->out = malloc(no * sizeof(float));
    s->ref_grads = malloc(s->n_params * sizeof(float));
    s->grads = malloc(s->n_params * sizeof(float));
    if (!s->probe_x || !s->probe_dout || !s->ref_out || !s->out || !s->ref_grads || !s->grads) {
        ath_errf(err, "out of host memory");
        goto fail;
    }
    /* A fixed probe: the same for every swap of every run. */
    ath_rng_t r = ath_rng_make(UINT64_C(0xCA4A21), 1);
    for (size_t i = 0; i < nx; i++)
        s->probe_x[i] = ath_rng_uniform(&r, -1.0f, 1.0f);
    for (size_t i = 0; i < no; i++)
        s->probe_dout[i] = ath_rng_uniform(&r, -0.01f, 0.01f);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hup;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    g_hup = 0;
    if (sigaction(SIGHUP, &sa, &s->old_hup) == 0)
        s->hup_installed = 1;
    *out = s;
    return 0;
fail:
    ath_swap_destroy(s);
    return -1;
}

static void start_watch(ath_swap_t *s)
{
    struct stat st;
    if (stat(s->watch_file, &st) == 0) {
        s->seen = st;
        s->have_seen = 1;
    }
    if (s->o.poll_ms <= 0) {
        s->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (s->ino_fd >= 0 &&
            inotify_add_watch(s->ino_fd, s->watch_dir, IN_CLOSE_WRITE | IN_MOVED_TO) >= 0) {
            logf_(s, "swap: watching %s for a new %s (inotify); SIGHUP re-reads it now",
                  s->watch_dir, s->watch_name);
            return;
        }
        int e = errno;
        if (s->ino_fd >= 0)
            close(s->ino_fd);
        s->ino_fd = -1;
        s->o.poll_ms = ATH_SWAP_POLL_MS;
        logf_(s, "swap: inotify unavailable (%s); polling %s every %d ms", strerror(e),
              s->watch_dir, s->o.poll_ms);
    }
    s->next_poll_s = ath_now_s() + s->o.poll_ms * 1e-3;
    logf_(s, "swap: watching %s for a new %s (polling every %d ms); SIGHUP re-reads it now",
          s->watch_dir, s->watch_name, s->o.poll_ms);
}

ath_load_status_t ath_swap_open(ath_swap_t *s, const char *dir_or_file, ath_trunk_t *live,
                                ath_err_t *err)
{
    memset(live, 0, sizeof *live);
    ath_plugin_file(dir_or_file, s->watch_file, sizeof s->watch_file);
    dir_of(s->watch_file, s->watch_dir, sizeof s->watch_dir);
    const char *slash = strrchr(s->watch_file, '/');
    s->watch_name = slash ? slash + 1 : s->watch_file;

    char copy[ATH_PATH_MAX], sha[SHA_HEX];
    const char *reason;
    if (private_copy(s, s->watch_file, copy, sizeof copy, sha, &reason, err) != 0)
        return strcmp(reason, R_NO_FILE) == 0 ? ATH_LOAD_NO_FILE : ATH_LOAD_NOT_LOADABLE;
    ath_load_status_t ls = ath_trunk_open(live, copy, &s->config, s->device, err);
    unlink(copy); /* the mapping stays; nothing else needs the name */
    if (ls != ATH_LOAD_OK) {
        name_source(err->msg, sizeof err->msg, copy, s->watch_file);
        return ls;
    }
    snprintf(live->plugin.path, sizeof live->plugin.path, "%s", s->watch_file);
    memcpy(s->live_sha, sha, SHA_HEX);
    snprintf(s->source, sizeof s->source, "%s", s->watch_file);
    if (live->plugin.space == ATH_SPACE_CUDA)
        s->cuda_used = 1;
    if (s->o.watch)
        start_watch(s);
    return ATH_LOAD_OK;
}

static void remove_private_dir(const char *dir)
{
    /* Only our own numbered copies and requests can be in it (mode 0700). */
    DIR *d = opendir(dir);
    if (d) {
        char file[ATH_PATH_MAX + 256];
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
            unlink(file);
        }
        closedir(d);
    }
    rmdir(dir);
}

void ath_swap_destroy(ath_swap_t *s)
{
    if (!s)
        return;
    ath_trunk_close(&s->prev);
    if (s->ino_fd >= 0)
        close(s->ino_fd);
    if (s->tmpdir[0])
        remove_private_dir(s->tmpdir);
    if (s->hup_installed)
        sigaction(SIGHUP, &s->old_hup, NULL);
    free(s->allow);
    free(s->probe_x);
    free(s->probe_dout);
    free(s->ref_out);
    free(s->out);
    free(s->ref_grads);
    free(s->grads);
    free(s);
}

ath_swap_stats_t ath_swap_stats(const ath_swap_t *s) { return s->stats; }

/* ------------------------------------------------------------------------- */
/* A swap, probation, rollback                                               */

/* Unloads the previous version; its device work is finished first
 * (ath_trunk_close synchronises through devmem before destroy and dlclose). */
static void release_prev(ath_swap_t *s) { ath_trunk_close(&s->prev); }

ath_swap_outcome_t ath_swap_try(ath_swap_t *s, const char *path, const char *trigger,
                                uint64_t step, const float *params, ath_trunk_t *live,
                                ath_swap_result_t *res)
{
    ath_swap_result_t local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    double t0 = ath_now_s();
    char file[ATH_PATH_MAX], copy[ATH_PATH_MAX] = "", sha[SHA_HEX] = "";
    char running[512], taken_v[512];
    ath_plugin_file(path, file, sizeof file);
    version_of(live, running, sizeof running);
    vet_version_t ver;
    memset(&ver, 0, sizeof ver);
    const char *reason = "";
    ath_err_t err = {{0}};
    ath_trunk_t cand;
    memset(&cand, 0, sizeof cand);
    double child_ms = 0.0;

    if (private_copy(s, file, copy, sizeof copy, sha, &reason, &err) != 0) {
        copy[0] = '\0';
        goto refused;
    }
    if (strcmp(sha, s->live_sha) == 0) {
        unlink(copy);
        res->outcome = ATH_SWAP_UNCHANGED;
        res->reason = "";
        res->ms = (ath_now_s() - t0) * 1e3;
        mark_cut(res->msg, sizeof res->msg, snprintf(res->msg, sizeof res->msg, "%s is the running version %s (SHA-256 %.16s...)",
                 file, running, sha));
        s->stats.unchanged++;
        logf_(s, "swap: after step %llu (%s): %s; nothing to do [%.1f ms]",
              (unsigned long long)step, trigger, res->msg, res->ms);
        return res->outcome;
    }
    if (s->bad_sha[0] && strcmp(sha, s->bad_sha) == 0) {
        reason = R_ROLLED_BACK;
        ath_errf(&err, "this file (SHA-256 %.16s...) was rolled back after step %llu; deploy a "
                       "fixed version",
                 sha, (unsigned long long)s->bad_step);
        goto refused;
    }

    /* The reference: the running version on the probe, current parameters.
     * Its record is overwritten, which is harmless between two steps (the
     * next step starts with a forward). */
    if (canary_run(live, params, s->probe_x, s->probe_dout, s->pb, s->ref_out, s->ref_grads,
                   &err) != 0) {
        reason = R_REFERENCE;
        goto refused;
    }
    vet_req_t rq;
    memset(&rq, 0, sizeof rq);
    rq.config = s->config;
    rq.device = s->device;
    rq.pb = s->pb;
    rq.ref_exact = is_exact(live);
    rq.n_params = s->n_params;
    snprintf(rq.path, sizeof rq.path, "%s", copy);
    rq.params = params;
    rq.x = s->probe_x;
    rq.dout = s->probe_dout;
    rq.ref_out = s->ref_out;
    rq.ref_grads = s->ref_grads;
    rq.out = s->out;
    rq.grads = s->grads;
    if (vet_in_child(s, &rq, &ver, &reason, &child_ms, &err) != 0)
        goto refused;

    /* Vetted: now load it here, and check it here too. */
    ath_load_status_t ls = ath_trunk_open(&cand, copy, &s->config, s->device, &err);
    if (ls != ATH_LOAD_OK) {
        reason = ath_load_status_name(ls);
        goto refused;
    }
    if (cand.plugin.space == ATH_SPACE_CUDA)
        s->cuda_used = 1;
    if (canary_run(&cand, params, s->probe_x, s->probe_dout, s->pb, s->out, s->grads, &err) != 0 ||
        canary_compare(&s->config, s->pb, is_exact(live) && is_exact(&cand), s->ref_out, s->out,
                       s->ref_grads, s->grads, &err) != 0) {
        reason = R_CANARY;
        ath_trunk_close(&cand);
        goto refused;
    }
    unlink(copy);
    int exact = is_exact(live) && is_exact(&cand);

    /* Switch. Only one previous version is held: a second swap during
     * probation makes the version it replaces the rollback target. */
    release_prev(s);
    s->prev = *live;
    memcpy(s->prev_sha, s->live_sha, SHA_HEX);
    snprintf(s->prev_source, sizeof s->prev_source, "%s", s->source);
    *live = cand;
    snprintf(live->plugin.path, sizeof live->plugin.path, "%s", file);
    memcpy(s->live_sha, sha, SHA_HEX);
    snprintf(s->source, sizeof s->source, "%s", file);
    s->probation_end = step + (s->o.rollback_steps ? s->o.rollback_steps : ATH_SWAP_ROLLBACK_STEPS);
    s->stats.taken++;

    res->outcome = ATH_SWAP_TAKEN;
    res->reason = "";
    res->ms = (ath_now_s() - t0) * 1e3;
    mark_cut(res->msg, sizeof res->msg, snprintf(res->msg, sizeof res->msg,
             "took %s from %s, replacing %s; canary %s on %d probe samples; vetted in a child "
             "in %.1f ms",
             version_of(live, taken_v, sizeof taken_v), file, running,
             exact ? "bit-identical (exact)" : "within tolerance", (int)s->pb, child_ms));
    logf_(s, "swap: after step %llu (%s): %s [%.1f ms]", (unsigned long long)step, trigger,
          res->msg, res->ms);
    return res->outcome;

refused:
    name_source(err.msg, sizeof err.msg, copy, file);
    if (copy[0])
        unlink(copy);
    s->stats.refused++;
    res->outcome = ATH_SWAP_REFUSED;
    res->reason = reason;
    res->ms = (ath_now_s() - t0) * 1e3;
    char cand_v[300] = "";
    if (ver.impl[0])
        snprintf(cand_v, sizeof cand_v, " (candidate %s [%s])", ver.impl, ver.kver);
    mark_cut(res->msg, sizeof res->msg, snprintf(res->msg, sizeof res->msg, "refused %s%s: %s: %s; %s keeps running", file, cand_v,
             reason, err.msg, running));
    logf_(s, "swap: after step %llu (%s): %s [%.1f ms]", (unsigned long long)step, trigger,
          res->msg, res->ms);
    return res->outcome;
}

int ath_swap_failed(ath_swap_t *s, uint64_t step, ath_trunk_t *live, const char *why)
{
    if (!s || !s->prev.plugin.lib)
        return -1;
    double t0 = ath_now_s();
    char bad[512], good[512];
    version_of(live, bad, sizeof bad);
    version_of(&s->prev, good, sizeof good);
    ath_trunk_close(live);
    *live = s->prev;
    memset(&s->prev, 0, sizeof s->prev);
    memcpy(s->bad_sha, s->live_sha, SHA_HEX);
    s->bad_step = step;
    memcpy(s->live_sha, s->prev_sha, SHA_HEX);
    snprintf(s->source, sizeof s->source, "%s", s->prev_source);
    s->stats.rolled_back++;
    logf_(s, "swap: step %llu: rolled back from %s to %s: %s [%.1f ms]", (unsigned long long)step,
          bad, good, why, (ath_now_s() - t0) * 1e3);
    return 0;
}

void ath_swap_step_done(ath_swap_t *s, uint64_t step)
{
    if (s && s->prev.plugin.lib && step >= s->probation_end) {
        char old[512];
        version_of(&s->prev, old, sizeof old);
        release_prev(s);
        logf_(s, "swap: after step %llu: probation over; unloaded %s", (unsigned long long)step,
              old);
    }
}

/* ------------------------------------------------------------------------- */
/* Triggers                                                                  */

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Has the watched file been replaced? inotify: a finished write or a rename
 * onto its name. Polling: a new identity seen twice in a row (so a copy in
 * progress is not taken half-written). */
static int watch_changed(ath_swap_t *s)
{
    if (s->ino_fd >= 0) {
        int hit = 0;
        _Alignas(struct inotify_event) char buf[4096];
        for (;;) {
            ssize_t n = read(s->ino_fd, buf, sizeof buf);
            if (n <= 0)
                break;
            for (char *p = buf; p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
                if ((ev->mask & IN_Q_OVERFLOW) ||
                    (ev->len && strcmp(ev->name, s->watch_name) == 0))
                    hit = 1;
                p += sizeof *ev + ev->len;
            }
        }
        return hit;
    }
    double now = ath_now_s();
    if (now < s->next_poll_s)
        return 0;
    s->next_poll_s = now + s->o.poll_ms * 1e-3;
    struct stat st;
    if (stat(s->watch_file, &st) != 0)
        return 0; /* between an unlink and a rename: look again later */
    if (s->have_seen && same_file(&st, &s->seen)) {
        s->have_pending = 0;
        return 0;
    }
    if (s->have_pending && same_file(&st, &s->pending)) {
        s->seen = st;
        s->have_seen = 1;
        s->have_pending = 0;
        return 1;
    }
    s->pending = st;
    s->have_pending = 1;
    return 0;
}

int ath_swap_due(ath_swap_t *s, uint64_t step)
{
    if (s->next_at < s->o.n_at && s->o.at[s->next_at].step <= step)
        return 1;
    if (g_hup)
        return 1;
    if (s->o.watch && !s->change_seen)
        s->change_seen = watch_changed(s);
    return s->change_seen;
}

int ath_swap_poll(ath_swap_t *s, uint64_t step, const float *params, ath_trunk_t *live)
{
    int taken = 0;
    while (s->next_at < s->o.n_at && s->o.at[s->next_at].step <= step) {
        const ath_swap_at_t *a = &s->o.at[s->next_at++];
        taken += ath_swap_try(s, a->path, "--swap-at", step, params, live, NULL) == ATH_SWAP_TAKEN;
    }
    if (g_hup) {
        g_hup = 0;
        if (s->watch_file[0])
            taken += ath_swap_try(s, s->watch_file, "SIGHUP", step, params, live, NULL) ==
                     ATH_SWAP_TAKEN;
    }
    int changed = s->change_seen || (s->o.watch && watch_changed(s));
    s->change_seen = 0;
    if (changed)
        taken += ath_swap_try(s, s->watch_file, s->ino_fd >= 0 ? "inotify" : "poll", step, params,
                              live, NULL) == ATH_SWAP_TAKEN;
    return taken;
}
