/*
 * checkpoint.h — the training state on disk, written atomically and read
 * back only if every check passes.
 *
 * File format (version 2, all integers and floats little-endian; version 1
 * held the state of a sequential data stream of an earlier task, and is
 * refused because its run cannot be continued):
 *
 *   offset size  field
 *        0    8  magic "AUXTCKPT"
 *        8    4  format version (ATH_CKPT_VERSION)
 *       12    4  header size in bytes (ATH_CKPT_HEADER_SIZE)
 *       16   16  topology: ENC, H1, H2, AUX (int32)
 *       32    4  batch (int32)
 *       36    4  reserved, 0
 *       40    8  seed (uint64)
 *       48   16  Adam lr, beta1, beta2, eps (float32 bits)
 *       64    8  step: training steps completed (uint64)
 *       72    8  Adam t: updates applied (uint64)
 *       80    8  0 (reserved: the task's draws are counter-based, task.h)
 *       88    8  loss of step 1 (float64 bits), for the run's overall ratio
 *       96    8  payload size in bytes (uint64) = 3 · P · 4
 *      104    4  CRC-32 of the payload
 *      108    4  CRC-32 of bytes [0, 108) of the header
 *      112       payload: parameters [P], Adam m [P], Adam v [P] (float32),
 *                P = AUXTRUNK_PARAM_COUNT, flat layout (layout.h)
 *
 * Gradients are not saved: every step overwrites them before use.
 *
 * Writing: through safefile.h, an exclusive temporary with an unpredictable
 * name in the same directory, fsync, rename over the target, fsync of the
 * directory. A crash leaves the old checkpoint or the new one, never a mix.
 *
 * Reading checks, in order, each with its own message: the file opens; it
 * is long enough for the fixed part; magic; format version; header size;
 * header CRC; topology equal to the run's; batch, seed and Adam settings equal
 * to the run's (else the resumed run could not continue the same run); the
 * payload size for that topology; the file length (truncated / trailing
 * bytes); payload CRC. Everything up to the file length is checked on the
 * header alone, before a byte of the payload is read or memory for it is
 * taken; the input must be a regular file (a FIFO or device is refused
 * without blocking). Nothing is written to the caller's arrays unless all
 * pass.
 */
#ifndef ATH_CHECKPOINT_H
#define ATH_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define ATH_CKPT_MAGIC "AUXTCKPT"
#define ATH_CKPT_VERSION 2u
#define ATH_CKPT_HEADER_SIZE 112u

typedef struct ath_ckpt_meta {
    int32_t enc, h1, h2, aux;
    int32_t batch;
    uint64_t seed;
    float lr, beta1, beta2, eps;
    uint64_t step;
    uint64_t adam_t;
    uint64_t data_state;
    double first_loss;
} ath_ckpt_meta_t;

/* Writes meta and the three arrays of n floats to path atomically. */
int ath_ckpt_save(const char *path, const ath_ckpt_meta_t *meta, const float *params,
                  const float *m, const float *v, size_t n, ath_err_t *err);

/* Reads path, checks it against expect (topology, batch, seed, Adam settings)
 * and, only if every check passes, fills *got and the three arrays of n
 * floats (n = the parameter count of expect's topology). */
int ath_ckpt_load(const char *path, const ath_ckpt_meta_t *expect, ath_ckpt_meta_t *got,
                  float *params, float *m, float *v, size_t n, ath_err_t *err);

/* The header checks of ath_ckpt_load, in its order, on bytes in memory (what
 * a fuzzer drives): h holds min(len, ATH_CKPT_HEADER_SIZE) bytes of a file of
 * len bytes; path names it in messages; expect NULL skips the comparison with
 * a run (then n is unused). Returns 0 with *meta, or -1 with the message. */
int ath_ckpt_check_header(const char *path, const unsigned char *h, size_t len,
                          const ath_ckpt_meta_t *expect, size_t n, ath_ckpt_meta_t *meta,
                          ath_err_t *err);

/* Reads only the header of path and checks it on its own (magic, version,
 * header size and CRC, and that the file is exactly header + payload long):
 * what a checkpoint holds, without loading it. Returns 0 with *meta, or -1
 * with the message. */
int ath_ckpt_peek(const char *path, ath_ckpt_meta_t *meta, ath_err_t *err);

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of n bytes, continuing crc
 * (start with 0). */
uint32_t ath_crc32(uint32_t crc, const void *data, size_t n);

#endif
