/*
 * conform.h — the auxtrunk ABI conformance runner (auxtrunk-conform): what
 * its parts share.
 *
 * The runner tells whether a libauxtrunk.so honours abi/auxtrunk.h. It knows
 * only the public headers (auxtrunk.h, auxtrunk_canon.h) and the test suite's
 * own oracles (tests/support: ref64 in double, canon32 in the canonical float
 * order, the seeded RNG); it never links a plugin's code.
 *
 * Process model: the parent (main.c) parses options, forks one child per
 * check, enforces the timeout (killing the child's whole process group) and
 * writes the report. Everything that touches the plugin, and CUDA, happens in
 * the child. A child sends its verdict to the parent through a pipe:
 *   "@ stage\n"     what it is about to do (named in a crash or timeout reason)
 *   "N text\n"      a note, printed under the check
 *   "R P|F|S text\n" the verdict: pass, fail or skip, with its reason
 * A check that returns early does not free what it allocated: its process
 * ends right after (except where a check measures growth, see lifecycle).
 *
 * Shape letters: B batch, ENC, H1, H2, AUX (as in auxtrunk.h).
 */
#ifndef AUXTRUNK_CONFORM_H
#define AUXTRUNK_CONFORM_H

#include <stddef.h>
#include <stdint.h>

#include "auxtrunk.h"
#include "auxtrunk_version.h"
#include "ref64.h"
#include "rng.h"

#define CONFORM_VERSION AUXTRUNK_PROJECT_VERSION

/* ------------------------------------------------------------------------- */
/* Options (parent) and checks                                               */

typedef struct cf_options {
    const char *plugin;    /* path of the libauxtrunk.so under test */
    const char *reference; /* --reference: an exact plugin to bit-compare with */
    uint64_t seed;
    double timeout_s; /* per check */
} cf_options_t;

enum { CF_PASS = 0, CF_FAIL = 1, CF_SKIP = 2 };

/* What the child prepares before a check runs. */
#define CF_RAW 0u       /* nothing: the check loads the plugin itself */
#define CF_LOADED 1u    /* plugin loaded and negotiated at 1.0 (ctx->pl) */
#define CF_MEMORY 3u    /* loaded, and its memory space usable (CUDA set up) */
#define CF_CUDA_ONLY 7u /* CF_MEMORY, and skipped for host-memory plugins */
/* With CF_LOADED: the one check that fails when the plugin cannot be loaded
 * and negotiated; every other check that needs the plugin is then skipped. */
#define CF_LOAD_VERDICT 8u

typedef struct cf_ctx cf_ctx_t;

typedef struct cf_check {
    const char *name; /* group.name */
    unsigned needs;   /* CF_RAW / CF_LOADED / CF_MEMORY / CF_CUDA_ONLY */
    void (*run)(cf_ctx_t *ctx);
    const char *summary; /* one line, for --list and docs */
} cf_check_t;

/* The table of every check, in run order (checks.c). */
extern const cf_check_t cf_checks[];
extern const size_t cf_check_count;

/* ------------------------------------------------------------------------- */
/* A loaded plugin (child)                                                   */

enum { CF_SPACE_HOST = 0, CF_SPACE_CUDA = 1 };

typedef struct cf_plugin {
    const char *path;
    void *dl;
    auxtrunk_entry_fn entry;
    auxtrunk_api_t api; /* negotiated for host range [1.0, 1.0] */
    int space;          /* CF_SPACE_* from api.caps */
} cf_plugin_t;

struct cf_ctx {
    const cf_options_t *opt;
    const cf_check_t *check;
    uint64_t seed; /* this check's seed, derived from opt->seed and its name */
    tst_rng_t rng;
    cf_plugin_t pl;  /* the plugin under test (needs >= CF_LOADED) */
    cf_plugin_t ref; /* the --reference plugin, loaded by cf_load_reference */
    int fd;          /* pipe to the parent */
    int verdict;
    char reason[1024];
    char worst_at[160]; /* where cf_expect_close_all saw its largest error */
};

/* Verdicts. The first failure wins; later ones are ignored. Each returns -1
 * (cf_skip too), so a check can `return cf_fail(...)`-style bail out. */
int cf_fail(cf_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cf_skip(cf_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cf_note(cf_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Detail shown after PASS, e.g. the worst error seen (kept only on a pass). */
void cf_pass_detail(cf_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cf_stage(cf_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Nonzero once the check has failed or skipped. */
int cf_done(const cf_ctx_t *ctx);

/* Runs check c in the current (child) process and writes its verdict to fd. */
void cf_child_run(const cf_check_t *c, const cf_options_t *opt, int fd);

/* ------------------------------------------------------------------------- */
/* Plugin loading and status names (plugin.c)                                */

/* auxtrunk_plugin_open (abi/auxtrunk_loader.h: permission and ELF checks,
 * dlopen(RTLD_NOW | RTLD_LOCAL), the entry) only. Returns 0, or -1 with a
 * reason in why. */
int cf_plugin_open(cf_plugin_t *pl, const char *path, char *why, size_t why_len);
/* cf_plugin_open, then auxtrunk_plugin_negotiate over [1.0, 1.0] (the
 * loader's table checks). */
int cf_plugin_load(cf_plugin_t *pl, const char *path, char *why, size_t why_len);
/* For checks that load the plugin themselves (CF_RAW): cf_plugin_load into
 * pl, or a skip naming why (load.table fails for it). Returns 0 or -1. */
int cf_load_or_skip(cf_ctx_t *ctx, cf_plugin_t *pl);
/* The name of the first field in which two API tables differ, or NULL. */
const char *cf_api_diff(const auxtrunk_api_t *a, const auxtrunk_api_t *b);
/* Loads opt->reference into ctx->ref. Returns 0, or -1 after cf_skip/cf_fail. */
int cf_load_reference(cf_ctx_t *ctx);
/* "AUXTRUNK_E_BATCH (-5)" and the like; static storage for known ones. */
const char *cf_status_name(int32_t s);
/* "MEM_HOST|DETERMINISTIC|EXACT" into buf. */
const char *cf_caps_text(uint64_t caps, char *buf, size_t n);
/* A valid config for the plugin's memory space. */
auxtrunk_config_t cf_config(int32_t enc, int32_t h1, int32_t h2, int32_t aux, int32_t max_batch);
/* init with a report on failure: returns the handle or NULL after cf_fail. */
auxtrunk_handle_t *cf_init(cf_ctx_t *ctx, const cf_plugin_t *pl, const auxtrunk_config_t *cfg);
/* Waits for the plugin's work (CUDA: device sync) and fails the check on a
 * sticky or asynchronous CUDA error. Returns 0 or -1. */
int cf_plugin_wait(cf_ctx_t *ctx, const cf_plugin_t *pl, const char *after);

/* ------------------------------------------------------------------------- */
/* Buffers in a plugin's memory space, with guard zones (trunk.c)            */

/* Every buffer handed to a plugin sits between two guard zones filled with a
 * known byte pattern; a write outside the payload changes a guard byte. */
#define CF_GUARD_BYTES 1024
/* The poison written into outputs before a call: a quiet NaN no arithmetic
 * produces by accident, and a finite pattern for a second round. */
#define CF_POISON_NAN UINT32_C(0x7FC0DEAD)
#define CF_POISON_FINITE UINT32_C(0x2B5ADBAD)

typedef struct cf_buf {
    int space;
    unsigned char *base; /* allocation: guard, payload, guard */
    float *p;            /* payload, what the plugin sees */
    size_t n;            /* payload floats */
    size_t misalign;     /* payload offset past the front guard, bytes */
    size_t total;        /* allocation bytes */
} cf_buf_t;

int cf_buf_alloc(cf_buf_t *b, int space, size_t n, size_t misalign);
void cf_buf_free(cf_buf_t *b);
int cf_buf_put(cf_buf_t *b, const float *src);
int cf_buf_get(const cf_buf_t *b, float *dst);
int cf_buf_fill(cf_buf_t *b, uint32_t bits);
/* Whole allocation, guards included: snapshot into (malloc'd) *dst. */
int cf_buf_snapshot(const cf_buf_t *b, unsigned char **dst);
/* Compares the whole allocation with a snapshot: 1 if a byte differs (*where
 * = its offset from the payload start, negative inside the front guard), 0 if
 * identical, -1 on a transfer error. */
int cf_buf_diff(const cf_buf_t *b, const unsigned char *snap, long long *where);
/* Checks the guard zones: 1 if a guard byte changed (*where as above), 0 if
 * intact, -1 on a transfer error. */
int cf_buf_guards(const cf_buf_t *b, long long *where);

/* ------------------------------------------------------------------------- */
/* Host inputs in read-only pages against PROT_NONE pages (pages.c)          */

typedef struct cf_pages {
    const char *name;   /* "x", "W1", "the config": for fault reasons */
    size_t unit;        /* 4 for floats, 1 for structs */
    unsigned char *map; /* whole mapping: PROT_NONE, data pages, PROT_NONE */
    size_t map_len;
    unsigned char *data; /* the data pages */
    size_t data_len;
    unsigned char *p; /* the payload, flush against the end or start of data */
    size_t bytes;
} cf_pages_t;

/* bytes of payload; at_end: flush against the PROT_NONE page after it, else
 * against the one before. Writable until cf_pages_protect(pg, 0). */
int cf_pages_alloc(cf_pages_t *pg, const char *name, size_t bytes, size_t unit, int at_end);
int cf_pages_protect(cf_pages_t *pg, int writable);
void cf_pages_free(cf_pages_t *pg);
/* Until cf_pages_unwatch, a SIGSEGV or SIGBUS inside one of the n mappings
 * fails the check ("<call> wrote into x ...") and ends the process. */
void cf_pages_watch(cf_ctx_t *ctx, cf_pages_t *const *pgs, int n);
/* Names the call now running, for those reasons ("forward(B=37)"). */
void cf_pages_call(const char *call);
void cf_pages_unwatch(void);

/* ------------------------------------------------------------------------- */
/* One trunk problem: random inputs, plugin buffers, results (trunk.c)       */

#define CF_NPARAM 6
extern const char *const cf_param_names[CF_NPARAM]; /* "W1", "b1", ... */
extern const char *const cf_grad_names[CF_NPARAM];  /* "dW1", "db1", ... */

typedef struct cf_topo {
    int32_t enc, h1, h2, aux, max_batch;
} cf_topo_t;

/* Host inputs of one problem. */
typedef struct cf_inputs {
    ref64_dims_t d;
    int batch;
    float *p[CF_NPARAM]; /* W1, b1, W2, b2, W3, b3 */
    float *x;            /* [B, ENC] */
    float *dout;         /* [B, AUX] */
} cf_inputs_t;

size_t cf_param_len(ref64_dims_t d, int i);
/* Fresh random inputs: x, dout in [-1, 1), weights scaled by fan-in so both
 * ELU branches are exercised, biases in [-0.5, 0.5). */
int cf_inputs_make(cf_inputs_t *in, tst_rng_t *rng, cf_topo_t t, int batch);

/* Host copies of what a plugin produced. */
typedef struct cf_outputs {
    float *out;          /* [B, AUX] */
    float *g[CF_NPARAM]; /* gradients, layouts of the parameters */
} cf_outputs_t;
int cf_outputs_make(cf_outputs_t *o, const cf_inputs_t *in);

/* The double-precision reference of one problem. */
typedef struct cf_ref {
    double *out;
    double *g[CF_NPARAM];
    double out_floor; /* ref64_out_floor; 0 (no floor) where not computed */
} cf_ref_t;
int cf_ref_make(cf_ref_t *r, const cf_inputs_t *in);
void cf_ref_free(cf_ref_t *r);

/* Plugin-side buffers of one problem (inputs uploaded, outputs poisoned). */
typedef struct cf_bufs {
    int space;
    cf_buf_t p[CF_NPARAM], x, dout, out, g[CF_NPARAM];
    auxtrunk_params_t params;
    auxtrunk_grads_t grads;
} cf_bufs_t;
int cf_bufs_make(cf_bufs_t *b, int space, const cf_inputs_t *in, size_t misalign);
void cf_bufs_free(cf_bufs_t *b);
int cf_bufs_upload(cf_bufs_t *b, const cf_inputs_t *in);
int cf_bufs_poison(cf_bufs_t *b, uint32_t bits);
int cf_bufs_fetch(const cf_bufs_t *b, cf_outputs_t *o, int want_out, int want_grads);

/* Calls that fail the check on a status other than OK; each waits for the
 * work and fetches the result into o. Return 0 or -1. */
int cf_forward(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, cf_bufs_t *b, int batch,
               cf_outputs_t *o, void *stream);
int cf_infer(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, cf_bufs_t *b, int batch,
             cf_outputs_t *o, void *stream);
int cf_backward(cf_ctx_t *ctx, const cf_plugin_t *pl, auxtrunk_handle_t *h, cf_bufs_t *b, int batch,
                uint32_t flags, cf_outputs_t *o, void *stream);

/* A ready problem: inputs, plugin buffers, host outputs and a handle. */
typedef struct cf_setup {
    cf_topo_t t;
    cf_inputs_t in;
    cf_bufs_t b;
    cf_outputs_t o;
    auxtrunk_handle_t *h;
} cf_setup_t;
/* Returns 0, or -1 after failing the check. */
int cf_setup_make(cf_ctx_t *ctx, const cf_plugin_t *pl, cf_setup_t *s, cf_topo_t t, int batch);

/* Statuses of calls expected to fail. */
int cf_expect_status(cf_ctx_t *ctx, int32_t got, int32_t want, const char *what);
/* Either of two statuses (e.g. a NULL handle: E_NULL_POINTER or E_BAD_HANDLE). */
int cf_expect_status2(cf_ctx_t *ctx, int32_t got, int32_t want, int32_t alt, const char *what);
/* After an error on a live handle, last_error must describe it. */
int cf_expect_last_error(cf_ctx_t *ctx, const cf_plugin_t *pl, const auxtrunk_handle_t *h,
                         const char *what);

/* "Writes nothing": snapshots of every buffer of a problem (inputs, outputs,
 * guard zones), compared after a call that must fail. */
typedef struct cf_watch {
    const cf_bufs_t *b;
    unsigned char *snap[3 + 2 * CF_NPARAM];
} cf_watch_t;
int cf_watch_begin(cf_ctx_t *ctx, cf_watch_t *w, const cf_bufs_t *b);
/* Fails naming the call (what) and the buffer and byte it changed. */
int cf_watch_end(cf_ctx_t *ctx, cf_watch_t *w, const char *what);

/* Comparisons. Each fails the check with a reason naming what, the worst
 * element and the values, and returns -1; else 0. */
/* Bitwise equality. */
int cf_expect_same(cf_ctx_t *ctx, const char *what, const float *got, const float *want, size_t n);
/* All outputs (out and/or the six gradients) against the reference /
 * bitwise. Close: max |got - ref| / scale <= tol for each tensor, the scale
 * being max |ref| but at least a floor: out's is r->out_floor
 * (ref64_out_floor), each gradient's a tenth of the largest gradient
 * tensor's max |ref| (ref64_grads_floor). */
int cf_expect_close_all(cf_ctx_t *ctx, const char *what, const cf_inputs_t *in,
                        const cf_outputs_t *o, const cf_ref_t *r, int out, int grads, double tol,
                        double *worst);
int cf_expect_same_all(cf_ctx_t *ctx, const char *what, const cf_inputs_t *in,
                       const cf_outputs_t *got, const cf_outputs_t *want, int out, int grads);

/* Relative tolerance against ref64 for default (non-fast) mode, and for
 * AUXTRUNK_CONFIG_FAST. float32 with these sizes stays below 1e-5; the
 * margin keeps the check about bugs, not rounding. */
#define CF_TOL 1e-4
#define CF_TOL_FAST 2e-2

/* ------------------------------------------------------------------------- */
/* Process measurements (lifecycle)                                          */

typedef struct cf_usage {
    long long heap;   /* bytes in use by malloc (mallinfo2), -1 if unknown */
    long long rss_kb; /* VmRSS */
    int fds;          /* entries of /proc/self/fd */
    int threads;      /* Threads: of /proc/self/status */
    long long device; /* CUDA bytes in use on the device, -1 if not CUDA */
} cf_usage_t;
void cf_usage_read(cf_usage_t *u, int cuda);
/* The thread count of this process, after waiting up to a second for it to
 * come down to `base`: a joined thread may still be listed for a moment
 * (the kernel wakes the joiner before it releases the thread). */
int cf_threads_settle(int base);

/* Host allocations (the malloc family) made while counting is on, process
 * wide (alloc_count.c). cf_alloc_supported() is 0 where the runner cannot
 * interpose them (not glibc, or a sanitizer build). */
int cf_alloc_supported(void);
/* 1 in a sanitizer build, whose allocator keeps freed memory in quarantine:
 * heap and RSS growth then say nothing about the plugin. */
int cf_heap_sanitized(void);
void cf_alloc_count_begin(void);
long cf_alloc_count_end(void);
/* Memory mappings (mmap, mmap64, munmap, mremap) the plugin makes itself
 * while counting is on; glibc's own (malloc, threads, dlopen) are not seen.
 * Where cf_alloc_supported() is 0 the count stays 0. */
void cf_map_count_begin(void);
long cf_map_count_end(void);
/* While quarantine is on, free() keeps blocks (allocated and contents left as
 * they are) instead of freeing them. cf_quarantine_end returns how many it
 * kept, or -1 if there were more than it can hold (some were freed for real);
 * cf_quarantine_release frees them. Only where cf_alloc_supported(). */
void cf_quarantine_begin(void);
int cf_quarantine_end(void);
void cf_quarantine_release(void);

#endif
