/*
 * scratch.h — a scratch directory per test, whole files in and out, and a
 * subprocess with its output in files, for the Check programs that run
 * auxtrunk-host and read what it wrote (tests/host, tests/swap). Every failure is a Check assertion, so these are called only
 * inside a test (fork mode: each test is its own process and has its own
 * scratch directory).
 */
#ifndef AUXTRUNK_TEST_SCRATCH_H
#define AUXTRUNK_TEST_SCRATCH_H

#include <stddef.h>
#include <sys/types.h>

/* Makes a fresh directory root/scratch-XXXXXX, mode 0755 (a plugin directory
 * inside it must not be group- or world-writable, and a host may check its
 * parents too), and returns its path. */
const char *tst_scratch(const char *root);

/* The directory of the last tst_scratch. */
const char *tst_scratch_dir(void);

/* Removes the scratch directory and everything in it. Called at the end of a
 * passing test, so that a failing one keeps its files to look at. */
void tst_scratch_done(void);

/* "<scratch>/name", in one of 16 rotating buffers (valid for 16 calls). */
char *tst_path_in(const char *name);

/* The whole file as a NUL-terminated string (length in *len if given). Reads
 * to EOF, so /proc files (which report size 0) work too. Caller frees. */
char *tst_slurp(const char *path, size_t *len);

/* 1 when the two files hold the same bytes. */
int tst_same_file(const char *a, const char *b);

/* Writes n bytes to path (created or truncated), then sets its mode. */
void tst_spit(const char *path, const void *data, size_t n, mode_t mode);

/* Starts exe with argv (argv[0] first, NULL-terminated), its stdout and
 * stderr into <scratch>/<tag>.out and <scratch>/<tag>.err. */
pid_t tst_spawn(const char *exe, char *const argv[], const char *tag);

/* Waits for pid, at most limit_s seconds (then kills it and fails the
 * test), and loads its output into *out and *err (freeing what they held).
 * Returns the exit code, or 128 + the signal that ended the process. */
int tst_wait(pid_t pid, double limit_s, const char *tag, char **out, char **err);

#endif
