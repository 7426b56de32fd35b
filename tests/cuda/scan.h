/*
 * scan.h — text scanners behind the CUDA plugins' static checks: atomic or
 * reduction-to-memory instructions in PTX and in cuobjdump SASS listings, and
 * dx-style symbols (a gradient for x) in C/CUDA source with comments and
 * literals stripped. Pure C on strings, so tests can also run them on small
 * fixture texts and prove that they can fail.
 */
#ifndef AUXTRUNK_TEST_SCAN_H
#define AUXTRUNK_TEST_SCAN_H

#include <stddef.h>

/* Every scanner returns the number of findings and copies the first one
 * (the offending instruction or symbol, with its line number) into first. */

/* PTX: statements whose opcode is atom.*, red.*, cp.reduce.* or
 * multimem.red.*; // and block comments are ignored. */
int scan_ptx_atomics(const char *ptx, char *first, size_t first_len);

/* cuobjdump --dump-sass: instruction lines whose opcode is ATOM*, RED* (not
 * the register-only REDUX) or a TMA/bulk reduction (UTMAREDG, UBLKRED). */
int scan_sass_atomics(const char *sass, char *first, size_t first_len);

/* cuobjdump --dump-sass: functions whose wgmma instructions (HGMMA, at
 * least two) each close a group of their own (each names the gsb0 barrier):
 * ptxas serialises a kernel's wgmmas so, waiting for each before the next
 * (its "C7515" advisory), when registers of the accumulators are defined
 * by other instructions in between; cuda-v3's kernels issue a slab's k
 * steps as one group. */
int scan_sass_serialized_wgmma(const char *sass, char *first, size_t first_len);

/* C/CUDA source: identifiers that, lower-cased with '_' removed, start with
 * dx, gradx, xgrad, dinput, gradinput or inputgrad (dx, dX, dx_in, dx_in_out,
 * d_x, grad_x, x_grad, ...). Comments, string and character literals are
 * stripped first, so prose about the rule does not count. */
int scan_source_dx(const char *src, char *first, size_t first_len);

/* Number of non-overlapping occurrences of needle in text. */
int scan_count(const char *text, const char *needle);

/* Whole file as a NUL-terminated string (malloc), or NULL. */
char *scan_read_file(const char *path);

/* Whole stdout of a shell command (malloc) and its exit status, or NULL. */
char *scan_read_command(const char *cmd, int *status);

#endif
