/*
 * fuzz_common.c — scratch files, whole-file I/O and failure reports for the
 * fuzz harnesses (fuzz_common.h).
 */
#define _GNU_SOURCE /* mkdtemp */
#include "fuzz_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[4096];
static pid_t g_owner;

static void remove_dir(void)
{
    if (!g_dir[0] || getpid() != g_owner) /* forked children leave it to the parent */
        return;
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *e;
        char p[8192];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(g_dir);
}

const char *fz_path(const char *name)
{
    static char path[8192];
    if (!g_dir[0]) {
        /* Memory-backed where there is one: the checkpoint writer fsyncs. */
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(g_dir, sizeof g_dir, "%s/auxtrunk-fuzz-XXXXXX", tmp);
        if (!mkdtemp(g_dir))
            fz_fail("cannot make a scratch directory %s: %s", g_dir, strerror(errno));
        g_owner = getpid();
        atexit(remove_dir);
    }
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

void fz_write(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        fz_fail("cannot create %s: %s", path, strerror(errno));
    const unsigned char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fz_fail("cannot write %s: %s", path, strerror(errno));
        p += w;
        n -= (size_t)w;
    }
    if (close(fd) != 0)
        fz_fail("cannot close %s: %s", path, strerror(errno));
}

unsigned char *fz_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fz_fail("cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            fz_fail("out of memory reading %s", path);
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    if (ferror(f))
        fz_fail("cannot read %s", path);
    fclose(f);
    *n = len;
    return buf;
}

void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\nFUZZ INVARIANT BROKEN: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

uint8_t fz_u8(fz_bytes_t *b)
{
    if (b->n == 0)
        return 0;
    b->n--;
    return *b->p++;
}

uint32_t fz_u32(fz_bytes_t *b)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)fz_u8(b) << (8 * i);
    return v;
}
