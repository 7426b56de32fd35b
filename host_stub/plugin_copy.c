/*
 * plugin_copy.c — the private directory and the checked, hashed copy of a
 * plugin file (plugin_copy.h).
 */
#define _GNU_SOURCE /* O_CLOEXEC, mkdtemp */
#include "plugin_copy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safefile.h"
#include "trust.h"

/* Messages name the path the operator gave, not the one it resolved to. */
static void name_path(ath_err_t *err, const char *real, const char *src)
{
    if (strcmp(real, src) == 0)
        return;
    char rest[sizeof err->msg];
    const char *p = strstr(err->msg, real);
    if (!p)
        return;
    snprintf(rest, sizeof rest, "%s", p + strlen(real));
    snprintf(err->msg + (p - err->msg), sizeof err->msg - (size_t)(p - err->msg), "%s%s", src,
             rest);
}

/* Removes the files in dir, then dir (only copies and requests are ever
 * made there, no subdirectories). */
static void remove_dir(const char *path)
{
    DIR *dir = opendir(path);
    if (dir) {
        char file[ATH_PATH_MAX + 256];
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(file, sizeof file, "%s/%s", path, e->d_name);
            unlink(file);
        }
        closedir(dir);
    }
    rmdir(path);
}

/* Private directories of runs that were killed before removing theirs:
 * "auxtrunk-swap-<pid>-XXXXXX" of this user whose pid no longer exists.
 * (A run in another pid namespace sharing $TMPDIR looks gone too; losing its
 * directory costs it only its next copies, never the library it runs.) */
static void remove_stale_dirs(const char *base)
{
    DIR *d = opendir(base);
    if (!d)
        return;
    static const char prefix[] = "auxtrunk-swap-";
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0)
            continue;
        const char *p = e->d_name + sizeof prefix - 1;
        char *end;
        errno = 0;
        long pid = strtol(p, &end, 10);
        if (errno || end == p || *end != '-' || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[ATH_PATH_MAX + 256];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
            remove_dir(path);
    }
    closedir(d);
}

int ath_privdir_create(ath_privdir_t *d, ath_err_t *err)
{
    const char *base = getenv("TMPDIR");
    if (!base || !base[0])
        base = "/tmp";
    remove_stale_dirs(base);
    d->counter = 0;
    snprintf(d->path, sizeof d->path, "%s/auxtrunk-swap-%ld-XXXXXX", base, (long)getpid());
    if (!mkdtemp(d->path)) {
        int e = errno;
        d->path[0] = '\0';
        return ath_errf(err, "cannot create a private directory for plugin copies: %s",
                        strerror(e));
    }
    return 0;
}

void ath_privdir_remove(ath_privdir_t *d)
{
    if (!d->path[0])
        return;
    remove_dir(d->path);
    d->path[0] = '\0';
}

int ath_privdir_name(ath_privdir_t *d, const char *suffix, char *name, size_t n)
{
    int len = snprintf(name, n, "%s/%u-%s", d->path, ++d->counter, suffix);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

int ath_plugin_copy(ath_privdir_t *d, const char *src, char *dst, size_t n,
                    char sha[ATH_SHA256_HEX], const char **reason, ath_err_t *err)
{
    char real[PATH_MAX];
    int missing;
    *reason = ATH_COPY_R_PERMISSIONS;
    if (ath_trust_dirs_of(src, "plugin", real, sizeof real, &missing, err) != 0) {
        if (missing)
            *reason = ATH_COPY_R_NO_FILE;
        return -1;
    }
    struct stat st;
    int in = ath_in_open(real, "plugin", &st, &missing, err);
    if (in < 0) {
        *reason = ATH_COPY_R_NO_FILE;
        name_path(err, real, src);
        return -1;
    }
    if (ath_trust_stat(&st, "plugin file", src, err) != 0) {
        close(in);
        return -1;
    }

    *reason = ATH_COPY_R_COPY;
    if (ath_privdir_name(d, ATH_PLUGIN_FILE, dst, n) != 0) {
        close(in);
        return ath_errf(err, "private directory path too long");
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        int e = errno;
        close(in);
        return ath_errf(err, "cannot create the private copy %s: %s", dst, strerror(e));
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
    int e = errno;
    close(in);
    if (close(out) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(dst);
        return ath_errf(err, "copying %s to %s failed: %s", src, dst, strerror(e));
    }
    uint8_t dg[ATH_SHA256_BYTES];
    ath_sha256_final(&h, dg);
    ath_sha256_hex(dg, sha);
    *reason = "";
    return 0;
}
