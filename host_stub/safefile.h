/*
 * safefile.h — every file auxtrunk-host reads or writes goes through here,
 * so that no path given to it can make it block, follow a planted link, or
 * destroy a file it did not mean to write.
 *
 * Inputs are opened non-blocking (a FIFO or a device cannot stall open())
 * and accepted only when fstat says they are regular files.
 *
 * Outputs are never written in place: each is a fresh temporary in the
 * target's directory, created exclusively with an unpredictable name
 * ("FILE.tmp.<pid>.XXXXXX", mode 0600, mkstemp), then fsync'd, given the
 * usual mode (0666 less the umask) and renamed over FILE, and the directory
 * is fsync'd. So a symlink or hard link planted at FILE or at a temporary's
 * name is replaced, not written through, and a crash leaves the old file or
 * the new one. A stream (the CSV) is published the same way when it is
 * opened and then grows in its own fresh inode. Temporaries left by a
 * killed run (their pid no longer exists) are removed when the next output
 * to the same FILE is opened.
 *
 * Before a run starts, ath_io_check compares every input and output path by
 * name and by st_dev/st_ino, so no output can be an input or another output,
 * and tries to create each output's temporary, so an unwritable output fails
 * before the run rather than after it.
 */
#ifndef ATH_SAFEFILE_H
#define ATH_SAFEFILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include "loader.h"
#include "util.h"

/* ------------------------------------------------------------------------- */
/* Inputs                                                                    */

/* Opens path for reading: non-blocking open, then regular files only. what
 * names it in messages ("checkpoint"). Returns the descriptor (O_CLOEXEC,
 * blocking again) with *st filled, or -1 with the message; *missing (may be
 * NULL) is set when there is no such file. */
int ath_in_open(const char *path, const char *what, struct stat *st, int *missing, ath_err_t *err);

/* Reads exactly n bytes (fewer only at end of file). Returns the count, or
 * -1 on a read error (errno set). */
long long ath_in_read(int fd, void *buf, size_t n);

/* Reads a whole input of at most limit bytes into a malloc'd, NUL-terminated
 * buffer. Returns 0, or -1 with the message (a larger file is refused
 * unread). */
int ath_in_slurp(const char *path, const char *what, size_t limit, char **data, size_t *len,
                 struct stat *st, ath_err_t *err);

/* ------------------------------------------------------------------------- */
/* Outputs                                                                   */

typedef struct ath_out {
    FILE *f;                     /* write through this */
    char path[ATH_PATH_MAX];     /* the target */
    char tmp[ATH_PATH_MAX + 32]; /* the temporary, "" once renamed */
    char what[64];               /* "checkpoint", "CSV", ... in messages */
} ath_out_t;

/* Creates the temporary for path. Returns 0, or -1 with the message. */
int ath_out_open(ath_out_t *o, const char *path, const char *what, ath_err_t *err);

/* fsync, the final mode, rename over the target, fsync of the directory,
 * then close. Returns 0, or -1 with the message (the temporary removed, the
 * target untouched). */
int ath_out_commit(ath_out_t *o, ath_err_t *err);

/* The same as commit but keeps o->f open for more writes to the published
 * file (a stream): the target is the fresh file from now on. */
int ath_out_publish(ath_out_t *o, ath_err_t *err);

/* Closes o->f; removes the temporary if it was not renamed. Safe on a
 * zeroed or already closed ath_out_t. Returns 0, or -1 if the close failed
 * (with the message when err is not NULL). */
int ath_out_close(ath_out_t *o, ath_err_t *err);

/* ------------------------------------------------------------------------- */
/* The paths of a run, checked together before it starts                     */

typedef struct ath_io_path {
    const char *path;      /* NULL: not given; "-" (stdout) is skipped */
    const char *what;      /* the option, "--csv" */
    int output;            /* written by the run */
    const char *may_equal; /* the option of one input this output may be ("--resume") */
} ath_io_path_t;

typedef enum ath_io_problem {
    ATH_IO_OK = 0,
    ATH_IO_COLLISION,  /* an output is an input or another output */
    ATH_IO_UNWRITABLE, /* an output cannot be created (or is not a regular file) */
} ath_io_problem_t;

/* Checks n paths: collisions by name and by st_dev/st_ino, then that every
 * output is (or can be created as) a regular file in a directory it may
 * write to (by creating and removing its temporary). *which is the index of
 * the offending path. */
ath_io_problem_t ath_io_check(const ath_io_path_t *p, int n, int *which, ath_err_t *err);

#endif
