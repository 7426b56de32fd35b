/*
 * swap_watch.c — inotify or polling on the plugin file, and SIGHUP
 * (swap_watch.h).
 */
#define _GNU_SOURCE /* inotify_init1 flags, st_mtim */
#include "swap_watch.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "util.h"

/* A finished write or a rename onto a name in the directory, and the
 * directory itself going away (deleted, or renamed: a watch follows the
 * inode, so it would hear the old directory, not the path). */
#define WATCH_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)

/* The directory was replaced: watch the path again, or poll it if it is
 * not there now. Either way the file is offered again (the new directory
 * may hold a new version). */
static void rearm(ath_watch_t *w)
{
    inotify_rm_watch(w->ino_fd, w->wd); /* EINVAL once IN_IGNORED came: harmless */
    w->wd = inotify_add_watch(w->ino_fd, w->dir, WATCH_MASK);
    if (w->wd >= 0) {
        ath_logf(w->log, "swap: the plugin directory %s was replaced; watching the new one",
                 w->dir);
        return;
    }
    int e = errno;
    close(w->ino_fd);
    w->ino_fd = -1;
    w->poll_ms = ATH_WATCH_POLL_MS;
    w->next_poll_s = ath_now_s();
    w->have_seen = 0; /* whatever appears at the path is new */
    ath_logf(w->log, "swap: the plugin directory %s is gone (%s); polling for %s every %d ms",
             w->dir, strerror(e), w->name, w->poll_ms);
}

void ath_watch_init(ath_watch_t *w, const char *file)
{
    memset(w, 0, sizeof *w);
    w->ino_fd = -1;
    snprintf(w->file, sizeof w->file, "%s", file);
    ath_dir_of(w->file, w->dir, sizeof w->dir);
    const char *slash = strrchr(w->file, '/');
    w->name = slash ? slash + 1 : w->file;
}

void ath_watch_start(ath_watch_t *w, int poll_ms, FILE *log)
{
    w->log = log;
    struct stat st;
    if (stat(w->file, &st) == 0) {
        w->seen = st;
        w->have_seen = 1;
    }
    w->poll_ms = poll_ms;
    if (w->poll_ms <= 0) {
        w->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->ino_fd >= 0 && (w->wd = inotify_add_watch(w->ino_fd, w->dir, WATCH_MASK)) >= 0) {
            ath_logf(log, "swap: watching %s for a new %s (inotify); SIGHUP re-reads it now",
                     w->dir, w->name);
            return;
        }
        int e = errno;
        if (w->ino_fd >= 0)
            close(w->ino_fd);
        w->ino_fd = -1;
        w->poll_ms = ATH_WATCH_POLL_MS;
        ath_logf(log, "swap: inotify unavailable (%s); polling %s every %d ms", strerror(e), w->dir,
                 w->poll_ms);
    }
    w->next_poll_s = ath_now_s() + w->poll_ms * 1e-3;
    ath_logf(log, "swap: watching %s for a new %s (polling every %d ms); SIGHUP re-reads it now",
             w->dir, w->name, w->poll_ms);
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int ath_watch_changed(ath_watch_t *w)
{
    if (w->ino_fd >= 0) {
        int hit = 0, gone = 0;
        _Alignas(struct inotify_event) char buf[4096];
        for (;;) {
            ssize_t n = read(w->ino_fd, buf, sizeof buf);
            if (n <= 0)
                break;
            for (char *p = buf; p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
                if ((ev->mask & IN_Q_OVERFLOW) || (ev->len && strcmp(ev->name, w->name) == 0))
                    hit = 1;
                if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
                    gone = 1;
                p += sizeof *ev + ev->len;
            }
        }
        if (gone) {
            rearm(w);
            return 1;
        }
        return hit;
    }
    if (w->poll_ms <= 0)
        return 0;
    double now = ath_now_s();
    if (now < w->next_poll_s)
        return 0;
    w->next_poll_s = now + w->poll_ms * 1e-3;
    struct stat st;
    if (stat(w->file, &st) != 0)
        return 0; /* between an unlink and a rename: look again later */
    if (w->have_seen && same_file(&st, &w->seen)) {
        w->have_pending = 0;
        return 0;
    }
    if (w->have_pending && same_file(&st, &w->pending)) {
        w->seen = st;
        w->have_seen = 1;
        w->have_pending = 0;
        return 1;
    }
    w->pending = st;
    w->have_pending = 1;
    return 0;
}

const char *ath_watch_trigger(const ath_watch_t *w) { return w->ino_fd >= 0 ? "inotify" : "poll"; }

void ath_watch_stop(ath_watch_t *w)
{
    if (w->ino_fd >= 0)
        close(w->ino_fd);
    w->ino_fd = -1;
    w->poll_ms = 0;
}

/* ------------------------------------------------------------------------- */
/* SIGHUP                                                                    */

static volatile sig_atomic_t g_hup;
static struct sigaction g_old_hup;
static int g_hup_installed;

static void on_hup(int sig)
{
    (void)sig;
    g_hup = 1;
}

void ath_hup_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hup;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    g_hup = 0;
    g_hup_installed = sigaction(SIGHUP, &sa, &g_old_hup) == 0;
}

int ath_hup_take(void)
{
    if (!g_hup)
        return 0;
    g_hup = 0;
    return 1;
}

void ath_hup_restore(void)
{
    if (g_hup_installed)
        sigaction(SIGHUP, &g_old_hup, NULL);
    g_hup_installed = 0;
}
