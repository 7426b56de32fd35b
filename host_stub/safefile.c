/*
 * safefile.c — regular-file inputs opened without blocking, outputs through
 * exclusive temporaries and rename, and the check of a run's paths
 * (safefile.h).
 */
#define _GNU_SOURCE /* mkostemp, realpath, O_CLOEXEC */
#include "safefile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* Inputs                                                                    */

int ath_in_open(const char *path, const char *what, struct stat *st, int *missing, ath_err_t *err)
{
    if (missing)
        *missing = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (missing)
            *missing = errno == ENOENT || errno == ENOTDIR;
        return ath_errf(err, "%s %s: cannot open: %s", what, path, strerror(errno));
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        int fifo = S_ISFIFO(st->st_mode), dir = S_ISDIR(st->st_mode);
        close(fd);
        return ath_errf(err, "%s %s: not a regular file (%s); refusing it", what, path,
                        fifo  ? "a FIFO"
                        : dir ? "a directory"
                              : "a device or socket");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

long long ath_in_read(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (long long)got;
}

int ath_in_slurp(const char *path, const char *what, size_t limit, char **data, size_t *len,
                 struct stat *st, ath_err_t *err)
{
    int fd = ath_in_open(path, what, st, NULL, err);
    if (fd < 0)
        return -1;
    if ((unsigned long long)st->st_size > limit) {
        close(fd);
        return ath_errf(err, "%s %s: %lld bytes, more than the %zu this accepts", what, path,
                        (long long)st->st_size, limit);
    }
    char *buf = malloc(limit + 1);
    if (!buf) {
        close(fd);
        return ath_errf(err, "%s %s: out of host memory", what, path);
    }
    /* One byte more than the limit: a file that grew since fstat is refused too. */
    long long got = ath_in_read(fd, buf, limit + 1);
    int e = errno;
    close(fd);
    if (got < 0 || (size_t)got > limit) {
        free(buf);
        return got < 0 ? ath_errf(err, "%s %s: read failed: %s", what, path, strerror(e))
                       : ath_errf(err, "%s %s: more than the %zu bytes this accepts", what, path,
                                  limit);
    }
    buf[got] = '\0';
    *data = buf;
    *len = (size_t)got;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Outputs                                                                   */

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Removes "<base>.tmp.<pid>[.XXXXXX]" files in dir whose pid is gone: the
 * temporaries of killed runs (ours only, regular files only). */
static void remove_stale_temporaries(const char *dir, const char *base)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t lb = strlen(base);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (strncmp(n, base, lb) != 0 || strncmp(n + lb, ".tmp.", 5) != 0)
            continue;
        const char *p = n + lb + 5;
        char *end;
        errno = 0;
        long pid = strtol(p, &end, 10);
        if (errno || end == p || pid <= 0 || (*end && *end != '.'))
            continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* a live run's, or one we cannot tell */
        char file[ATH_PATH_MAX + 300];
        struct stat st;
        snprintf(file, sizeof file, "%s/%s", dir, n);
        if (lstat(file, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
            unlink(file);
    }
    closedir(d);
}

int ath_out_open(ath_out_t *o, const char *path, const char *what, ath_err_t *err)
{
    memset(o, 0, sizeof *o);
    snprintf(o->what, sizeof o->what, "%s", what);
    if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path)
        return ath_errf(err, "%s %s: path too long", what, path);
    char dir[ATH_PATH_MAX];
    ath_dir_of(path, dir, sizeof dir);
    remove_stale_temporaries(dir, base_of(path));
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        o->tmp[0] = '\0';
        return ath_errf(err, "%s %s: cannot create a file in %s: %s", what, path, dir, strerror(e));
    }
    o->f = fdopen(fd, "w");
    if (!o->f) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return ath_errf(err, "%s %s: %s", what, path, strerror(e));
    }
    return 0;
}

/* fsync of the directory holding path, so a rename into it is durable. */
static int sync_dir_of(const char *path)
{
    char dir[ATH_PATH_MAX];
    ath_dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int ath_out_publish(ath_out_t *o, ath_err_t *err)
{
    if (!o->f || !o->tmp[0])
        return ath_errf(err, "%s %s: nothing to publish", o->what, o->path);
    mode_t mask = umask(0);
    umask(mask);
    const char *step = "write";
    int ok = fflush(o->f) == 0 && !ferror(o->f);
    if (ok) {
        step = "fsync";
        ok = fsync(fileno(o->f)) == 0;
    }
    if (ok) {
        step = "chmod";
        ok = fchmod(fileno(o->f), 0666 & ~mask) == 0;
    }
    if (ok) {
        step = "rename";
        ok = rename(o->tmp, o->path) == 0;
    }
    int e = errno;
    if (!ok) {
        fclose(o->f);
        o->f = NULL;
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return ath_errf(err, "%s %s: %s failed: %s", o->what, o->path, step, strerror(e));
    }
    o->tmp[0] = '\0';
    if (sync_dir_of(o->path) != 0)
        return ath_errf(err, "%s %s: fsync of its directory failed: %s", o->what, o->path,
                        strerror(errno));
    return 0;
}

int ath_out_commit(ath_out_t *o, ath_err_t *err)
{
    if (ath_out_publish(o, err) != 0) {
        ath_out_close(o, NULL);
        return -1;
    }
    return ath_out_close(o, err);
}

int ath_out_close(ath_out_t *o, ath_err_t *err)
{
    int rc = 0;
    if (o->f) {
        if (fclose(o->f) != 0)
            rc = ath_errf(err, "%s %s: close failed: %s", o->what, o->path, strerror(errno));
        o->f = NULL;
    }
    if (o->tmp[0]) {
        unlink(o->tmp);
        o->tmp[0] = '\0';
    }
    return rc;
}

/* ------------------------------------------------------------------------- */
/* The paths of a run                                                        */

/* What identifies a path: the name it will have (the real directory and
 * the base name), the real name of what it resolves to, and the file. */
typedef struct ident {
    char name[PATH_MAX + 256];
    char real[PATH_MAX];
    int exists;
    dev_t dev;
    ino_t ino;
} ident_t;

static void ident_of(const char *path, ident_t *id)
{
    memset(id, 0, sizeof *id);
    char dir[ATH_PATH_MAX], rdir[PATH_MAX];
    ath_dir_of(path, dir, sizeof dir);
    if (realpath(dir, rdir))
        snprintf(id->name, sizeof id->name, "%s/%s", strcmp(rdir, "/") ? rdir : "", base_of(path));
    else
        snprintf(id->name, sizeof id->name, "%s", path);
    if (!realpath(path, id->real))
        id->real[0] = '\0';
    struct stat st;
    if (stat(path, &st) == 0) {
        id->exists = 1;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
    }
}

static int same_path(const ident_t *a, const ident_t *b)
{
    if (strcmp(a->name, b->name) == 0 || (a->real[0] && strcmp(a->real, b->name) == 0) ||
        (b->real[0] && strcmp(b->real, a->name) == 0) ||
        (a->real[0] && b->real[0] && strcmp(a->real, b->real) == 0))
        return 1;
    return a->exists && b->exists && a->dev == b->dev && a->ino == b->ino;
}

static int allowed_pair(const ath_io_path_t *a, const ath_io_path_t *b)
{
    return (a->may_equal && strcmp(a->may_equal, b->what) == 0) ||
           (b->may_equal && strcmp(b->may_equal, a->what) == 0);
}

static int given(const ath_io_path_t *p) { return p->path && strcmp(p->path, "-") != 0; }

ath_io_problem_t ath_io_check(const ath_io_path_t *p, int n, int *which, ath_err_t *err)
{
    ident_t *id = calloc((size_t)(n > 0 ? n : 1), sizeof *id);
    if (!id) {
        ath_errf(err, "out of host memory");
        *which = 0;
        return ATH_IO_UNWRITABLE;
    }
    ath_io_problem_t rc = ATH_IO_OK;
    for (int i = 0; i < n; i++)
        if (given(&p[i]))
            ident_of(p[i].path, &id[i]);
    for (int i = 0; i < n && rc == ATH_IO_OK; i++) {
        if (!given(&p[i]) || !p[i].output)
            continue;
        for (int j = 0; j < n; j++) {
            if (j == i || !given(&p[j]) || (p[j].output && j < i) || allowed_pair(&p[i], &p[j]))
                continue;
            if (same_path(&id[i], &id[j])) {
                *which = i;
                rc = ATH_IO_COLLISION;
                ath_errf(err, "%s %s is the same file as %s %s; %s", p[i].what, p[i].path,
                         p[j].what, p[j].path,
                         p[j].output ? "two outputs cannot share a file"
                                     : "writing it would destroy that input");
                break;
            }
        }
    }
    for (int i = 0; i < n && rc == ATH_IO_OK; i++) {
        if (!given(&p[i]) || !p[i].output)
            continue;
        struct stat st;
        if (lstat(p[i].path, &st) == 0 && !S_ISREG(st.st_mode)) {
            *which = i;
            rc = ATH_IO_UNWRITABLE;
            ath_errf(err, "%s %s exists and is not a regular file (%s); refusing to replace it",
                     p[i].what, p[i].path,
                     S_ISLNK(st.st_mode)    ? "a symbolic link"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                                            : "a device or socket");
            break;
        }
        ath_out_t o;
        if (ath_out_open(&o, p[i].path, p[i].what, err) != 0) {
            *which = i;
            rc = ATH_IO_UNWRITABLE;
            break;
        }
        ath_out_close(&o, NULL);
    }
    free(id);
    return rc;
}
