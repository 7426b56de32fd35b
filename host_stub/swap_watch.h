/*
 * swap_watch.h — what tells the swapper to look at the plugin file again:
 * the file being replaced (inotify: a finished write or a rename onto its
 * name; or polling its identity), and SIGHUP ("re-read it now").
 *
 * Polling sees a change when the file's identity (device, inode, size,
 * mtime, ctime) differs from the one last acted on and reads the same on two
 * polls in a row, so a copy in progress is not taken half-written. Where
 * inotify is unavailable the watch says so and polls every ATH_WATCH_POLL_MS.
 */
#ifndef ATH_SWAP_WATCH_H
#define ATH_SWAP_WATCH_H

#include <stdio.h>
#include <sys/stat.h>

#include "loader.h"

#define ATH_WATCH_POLL_MS 500 /* polling interval when inotify is unavailable */

typedef struct ath_watch {
    char file[ATH_PATH_MAX], dir[ATH_PATH_MAX];
    const char *name; /* the file's name within dir */
    int ino_fd;       /* -1: polling, or not watching */
    int wd;           /* the watch on dir */
    int poll_ms;      /* > 0 while polling */
    double next_poll_s;
    struct stat seen, pending; /* polling: last acted-on and last observed */
    int have_seen, have_pending;
    FILE *log;
} ath_watch_t;

/* Names the file to watch (dir and name derived); watches nothing yet. */
void ath_watch_init(ath_watch_t *w, const char *file);

/* Starts watching: inotify when poll_ms <= 0, else polling every poll_ms.
 * Logs one line to log saying how. */
void ath_watch_start(ath_watch_t *w, int poll_ms, FILE *log);

/* Has the file been replaced since the last call that returned 1? */
int ath_watch_changed(ath_watch_t *w);

/* "inotify" or "poll": the trigger named in log lines. */
const char *ath_watch_trigger(const ath_watch_t *w);

void ath_watch_stop(ath_watch_t *w);

/* SIGHUP: the handler only sets a flag, taken between two steps. One
 * handler per process: install and restore pair up. */
void ath_hup_install(void);
int ath_hup_take(void); /* 1 once per SIGHUP received since the last take */
void ath_hup_restore(void);

#endif
