/*
 * scratch.c — scratch directories, whole-file I/O and subprocesses for
 * Check tests (scratch.h).
 */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#include "scratch.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static char g_dir[4096];

const char *tst_scratch(const char *root)
{
    snprintf(g_dir, sizeof g_dir, "%s/scratch-XXXXXX", root);
    ck_assert_msg(mkdtemp(g_dir) != NULL, "mkdtemp %s: %s", g_dir, strerror(errno));
    ck_assert(chmod(g_dir, 0755) == 0);
    return g_dir;
}

const char *tst_scratch_dir(void) { return g_dir; }

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

void tst_scratch_done(void) { nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

char *tst_path_in(const char *name)
{
    static char buf[16][4200];
    static int k = 0;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

char *tst_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    ck_assert(buf != NULL);
    for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            ck_assert(buf != NULL);
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

void tst_spit(const char *path, const void *data, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    ck_assert_msg(fd >= 0, "cannot write %s: %s", path, strerror(errno));
    ck_assert(write(fd, data, n) == (ssize_t)n);
    ck_assert(close(fd) == 0);
    ck_assert(chmod(path, mode) == 0);
}

pid_t tst_spawn(const char *exe, char *const argv[], const char *tag)
{
    char out[4200], err[4200];
    snprintf(out, sizeof out, "%s/%s.out", tst_scratch_dir(), tag);
    snprintf(err, sizeof err, "%s/%s.err", tst_scratch_dir(), tag);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_msg(rc == 0, "posix_spawn %s: %s", exe, strerror(rc));
    return pid;
}

int tst_wait(pid_t pid, double limit_s, const char *tag, char **out, char **err)
{
    int status = 0;
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (double waited = 0.0;; waited += 0.01) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        ck_assert(w >= 0);
        if (w == pid)
            break;
        if (waited > limit_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ck_abort_msg("%s: the process did not end within %g s", tag, limit_s);
        }
        nanosleep(&tick, NULL);
    }
    char path[4200];
    free(*out);
    free(*err);
    snprintf(path, sizeof path, "%s/%s.out", tst_scratch_dir(), tag);
    *out = tst_slurp(path, NULL);
    snprintf(path, sizeof path, "%s/%s.err", tst_scratch_dir(), tag);
    *err = tst_slurp(path, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int tst_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *da = tst_slurp(a, &na), *db = tst_slurp(b, &nb);
    const int same = na == nb && memcmp(da, db, na) == 0;
    free(da);
    free(db);
    return same;
}
