/*
 * auxtrunk.h — the auxtrunk plugin ABI, version 1.0.
 *
 * This header is the whole contract between a host trainer and a
 * libauxtrunk.so plugin. It is plain C11, includes only <stdint.h> and
 * <stddef.h>, and compiles as C++ too. It includes no CUDA header: a CUDA
 * stream travels as an opaque `void *`.
 *
 * What a plugin computes (shape letters used throughout: B batch, ENC encoder
 * width, H1 and H2 hidden widths, AUX output width):
 *
 *   x   [B, ENC]  encoder output, read-only, never differentiated
 *   h1  = ELU(x  · W1 + b1)   [B, H1]
 *   h2  = ELU(h1 · W2 + b2)   [B, H2]
 *   out =      h2 · W3 + b3   [B, AUX]     (linear output layer)
 *
 *   ELU(z) = z > 0 ? z : expm1(z)          (alpha = 1)
 *
 * and, for a given dout [B, AUX], the gradients of sum(out ⊙ dout) with
 * respect to the trunk's own parameters only:
 *
 *   dh2_pre = (dout    · W3ᵀ) ⊙ ELU'(h2)     ELU'(y) = y > 0 ? 1 : 1 + y
 *   dh1_pre = (dh2_pre · W2ᵀ) ⊙ ELU'(h1)     (taken from the post-activation)
 *   dW3 = h2ᵀ · dout      db3 = Σ_b dout
 *   dW2 = h1ᵀ · dh2_pre   db2 = Σ_b dh2_pre
 *   dW1 = xᵀ  · dh1_pre   db1 = Σ_b dh1_pre
 *
 * Stop-gradient: no gradient for x exists. x is `const` in every entry and no
 * entry has a parameter through which a gradient for x could be returned.
 *
 * Layouts (the only place they are defined):
 *   - every matrix is dense, row-major, with no padding between rows;
 *   - x [B, ENC]: x[b*ENC + k];  out, dout [B, AUX]: out[b*AUX + j];
 *   - a weight maps its layer's input to its output and is stored
 *     [in, out]: W1 [ENC, H1] with W1[k*H1 + j] the weight from input k to
 *     unit j; W2 [H1, H2]; W3 [H2, AUX]; biases b1 [H1], b2 [H2], b3 [AUX];
 *   - a gradient has the layout of its parameter.
 *   AUXTRUNK_PARAM_COUNT() and the offsets below (AUXTRUNK_W1_OFFSET ..
 *   AUXTRUNK_B3_OFFSET) give one flat buffer layout (W1, b1, W2, b2, W3, b3,
 *   in that order) for hosts that want one; the ABI itself takes six
 *   separate pointers, so any layout of the six works.
 *
 * The exact arithmetic (the order of every sum and the one expm1) is the
 * canonical order defined in auxtrunk_canon.h beside this file; it is part of
 * this contract. A plugin that advertises AUXTRUNK_CAP_EXACT reproduces it bit
 * for bit.
 *
 * Versioning rules:
 *   - A version is AUXTRUNK_VERSION(major, minor). Same major = compatible.
 *   - A minor version only appends fields at the end of structs and entries
 *     at the end of the API table; it never removes, reorders or changes the
 *     meaning of what exists. A new major version may change anything.
 *   - Every struct that crosses the ABI starts with `uint32_t struct_size`.
 *     The side that fills a struct sets it to sizeof(the struct as it knows
 *     it). The side that reads it:
 *       * refuses a size below the 1.0 size with AUXTRUNK_E_STRUCT_SIZE;
 *       * reads only the fields it knows of and that lie inside struct_size
 *         (so an older writer's missing trailing fields read as absent);
 *       * accepts trailing bytes it does not know of only if they are all
 *         zero, and otherwise refuses with AUXTRUNK_E_STRUCT_SIZE (so a newer
 *         host cannot silently have a newer feature ignored).
 *   - The API table goes the other way (the plugin fills host storage): see
 *     auxtrunk_plugin_entry below.
 *
 * Error rule: every entry validates all of its arguments before it writes
 * anything; an entry that returns a status other than AUXTRUNK_OK has written
 * nothing the caller can see (no output, no gradient, no recorded state), and
 * for CUDA plugins it leaves no sticky CUDA error behind. Library code never
 * exits, aborts or prints.
 *
 * Threading: the entry symbol, status_string and the string fields are safe
 * from any thread at any time. A handle is not internally locked: calls on
 * one handle must not overlap (the host serialises them, from any thread);
 * calls on different handles may run concurrently.
 *
 * Inputs: a `const` pointer is never written, not even to be restored before
 * the call returns (the host may keep inputs in read-only pages), and every
 * entry reads only the bytes its arguments define: B*ENC floats of x, the
 * parameters' element counts, struct_size bytes of a struct.
 *
 * Process rules (a plugin shares its host's process):
 *   - Floating-point environment: every entry returns with the caller's
 *     environment as it found it (x86-64: the MXCSR rounding, FTZ, DAZ and
 *     exception-mask bits and the x87 control word; elsewhere fegetenv's
 *     control state). Results do not depend on the caller's environment: an
 *     exact plugin computes under round-to-nearest with denormals kept
 *     (no flush-to-zero) whatever the caller has set.
 *   - Stack: an entry uses at most AUXTRUNK_MAX_STACK_BYTES of the calling
 *     thread's stack, whatever the batch and widths (work arrays live in the
 *     handle, allocated by init).
 *   - No process-wide state: a plugin installs no signal handler and changes
 *     no signal mask, maps no memory itself (host memory comes from the malloc
 *     family, so the host's accounting sees it), writes nothing to stdout or
 *     stderr (at load time included), and every thread it starts is joined by
 *     the time the last handle is destroyed. CUDA plugins may hold what the
 *     CUDA runtime itself keeps per process (its context, threads, mappings).
 *   - Status strings, impl_name and kernel_version are immutable: the same
 *     pointer to the same text on every call, for as long as the library is
 *     loaded; every entry call fills the same table.
 *
 * Platform: the ABI is defined for 64-bit targets (8-byte pointers); the
 * static assertions below pin every size and offset.
 */
#ifndef AUXTRUNK_H
#define AUXTRUNK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Versions                                                                  */

#define AUXTRUNK_VERSION(major, minor) \
    ((uint32_t)(((uint32_t)(major) << 16) | ((uint32_t)(minor)&0xFFFFu)))
#define AUXTRUNK_VERSION_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define AUXTRUNK_VERSION_MINOR_OF(v) ((uint32_t)(v)&0xFFFFu)

#define AUXTRUNK_ABI_MAJOR 1
#define AUXTRUNK_ABI_MINOR 0
/* The version this header describes. */
#define AUXTRUNK_ABI_VERSION AUXTRUNK_VERSION(AUXTRUNK_ABI_MAJOR, AUXTRUNK_ABI_MINOR)

/* ------------------------------------------------------------------------- */
/* Status codes                                                              */
/*
 * One table defines every status once: its enum name, its value and its
 * message. AUXTRUNK_STATUS_MAP(X) expands X(NAME, value, "message") per row.
 * Every plugin's status_string returns exactly these messages.
 */
#define AUXTRUNK_STATUS_MAP(X)                                                                \
    X(OK, 0, "success")                                                                       \
    X(E_NULL_POINTER, -1, "a required pointer argument is NULL")                              \
    X(E_STRUCT_SIZE, -2,                                                                      \
      "struct_size is too small, or unknown trailing bytes or a reserved field are not zero") \
    X(E_ABI_VERSION, -3, "no ABI version is supported by both host and plugin")               \
    X(E_DIMENSION, -4, "a dimension is zero, negative, above its limit, or overflows")        \
    X(E_BATCH, -5, "batch is not in [1, max_batch]")                                          \
    X(E_FLAGS, -6, "unknown or unsupported flag bits are set")                                \
    X(E_NO_FORWARD, -7, "backward called with no recorded training forward")                  \
    X(E_BATCH_MISMATCH, -8, "backward batch differs from the recorded forward's batch")       \
    X(E_MEMORY_SPACE, -9, "a pointer is not in the memory space or device the plugin uses")   \
    X(E_ALIAS, -10, "an output buffer overlaps an input or another output")                   \
    X(E_BAD_HANDLE, -11, "the handle is not a live handle of this plugin")                    \
    X(E_UNSUPPORTED, -12, "the requested feature is not supported by this plugin")            \
    X(E_OUT_OF_MEMORY, -13, "memory allocation failed")                                       \
    X(E_DEVICE, -14, "the device or its runtime reported an error")                           \
    X(E_INTERNAL, -15, "internal error in the plugin")

#define AUXTRUNK_STATUS_ENUM_ROW_(name, value, msg) AUXTRUNK_##name = (value),
/* Statuses are declared as constants but always stored as int32_t. */
enum auxtrunk_status_constants { AUXTRUNK_STATUS_MAP(AUXTRUNK_STATUS_ENUM_ROW_) };
#undef AUXTRUNK_STATUS_ENUM_ROW_
typedef int32_t auxtrunk_status_t;

/* The enum name of a status, e.g. "AUXTRUNK_E_BATCH", or "AUXTRUNK_(unknown)"
 * for a value not in the map. Never NULL; the string is static. A host's own
 * helper, so that it need not expand AUXTRUNK_STATUS_MAP. [any thread] */
static inline const char *auxtrunk_status_name(int32_t status)
{
    switch (status) {
#define AUXTRUNK_STATUS_NAME_ROW_(name, value, msg) \
    case (value):                                   \
        return "AUXTRUNK_" #name;
        AUXTRUNK_STATUS_MAP(AUXTRUNK_STATUS_NAME_ROW_)
#undef AUXTRUNK_STATUS_NAME_ROW_
    }
    return "AUXTRUNK_(unknown)";
}

/* The message of a status, or "unknown status" for a value not in the map:
 * exactly what every plugin's status_string returns. Never NULL; static.
 * [any thread] */
static inline const char *auxtrunk_status_message(int32_t status)
{
    switch (status) {
#define AUXTRUNK_STATUS_MESSAGE_ROW_(name, value, msg) \
    case (value):                                      \
        return msg;
        AUXTRUNK_STATUS_MAP(AUXTRUNK_STATUS_MESSAGE_ROW_)
#undef AUXTRUNK_STATUS_MESSAGE_ROW_
    }
    return "unknown status";
}

/* ------------------------------------------------------------------------- */
/* Capability flags (auxtrunk_api_t.caps)                                    */

/* All pointers passed to forward/infer/backward are host memory. Calls are
 * synchronous: results are complete when the call returns; stream is ignored. */
#define AUXTRUNK_CAP_MEM_HOST (UINT64_C(1) << 0)
/* All pointers passed to forward/infer/backward are CUDA device memory of the
 * configured device. Calls are asynchronous: they enqueue work on the given
 * stream and return; results are ready when the stream reaches that point. */
#define AUXTRUNK_CAP_MEM_CUDA (UINT64_C(1) << 1)
/* Repeated calls with the same inputs give bitwise-identical results. */
#define AUXTRUNK_CAP_DETERMINISTIC (UINT64_C(1) << 2)
/* Without AUXTRUNK_CONFIG_FAST, results are bit-identical to the canonical
 * order of auxtrunk_canon.h (so to every other exact plugin). */
#define AUXTRUNK_CAP_EXACT (UINT64_C(1) << 3)
/* forward/infer/backward allocate nothing, synchronise nothing and order
 * all of their device work on the given stream (a plugin may fork work onto
 * streams of its own handle, but only after an event recorded on the given
 * stream, and joins it back with an event the given stream waits for before
 * the call returns), so they may be captured into a CUDA graph and
 * replayed. */
#define AUXTRUNK_CAP_GRAPH_CAPTURE (UINT64_C(1) << 4)
/* AUXTRUNK_CONFIG_FAST is accepted (see there). */
#define AUXTRUNK_CAP_FAST_MODE (UINT64_C(1) << 5)

/* ------------------------------------------------------------------------- */
/* Limits                                                                    */

/* Each of ENC, H1, H2, AUX lies in [1, AUXTRUNK_MAX_WIDTH]. */
#define AUXTRUNK_MAX_WIDTH 16384
/* max_batch lies in [1, AUXTRUNK_MAX_BATCH]. */
#define AUXTRUNK_MAX_BATCH (1 << 20)
/* max_batch * max(ENC, H1, H2, AUX) must not exceed this (32-bit indexing). */
#define AUXTRUNK_MAX_ELEMENTS INT32_MAX
/* Bytes of the calling thread's stack any entry may use (see "Process
 * rules" above): hosts may call from threads with small stacks. */
#define AUXTRUNK_MAX_STACK_BYTES (128 * 1024)

/* ------------------------------------------------------------------------- */
/* Structs                                                                   */

/* Opaque per-instance state, created by init and freed by destroy. */
typedef struct auxtrunk_handle auxtrunk_handle_t;

/* What the host tells the plugin in auxtrunk_plugin_entry. */
typedef struct auxtrunk_host_info {
    uint32_t struct_size; /* sizeof(auxtrunk_host_info_t) as the host knows it */
    uint32_t abi_min;     /* lowest ABI version the host speaks, AUXTRUNK_VERSION() */
    uint32_t abi_max;     /* highest ABI version the host speaks; abi_min <= abi_max */
    uint32_t flags;       /* reserved: must be 0 (else AUXTRUNK_E_FLAGS) */
} auxtrunk_host_info_t;

/* Configuration flags (auxtrunk_config_t.flags). */
/* Fast mode: the plugin may use reduced-precision arithmetic (for CUDA
 * plugins: TF32 tensor cores). Results are then not bit-exact; each plugin
 * documents its tolerance against the double-precision reference. Only valid
 * if the plugin advertises AUXTRUNK_CAP_FAST_MODE, else AUXTRUNK_E_FLAGS. */
#define AUXTRUNK_CONFIG_FAST (UINT32_C(1) << 0)
#define AUXTRUNK_CONFIG_KNOWN_FLAGS (AUXTRUNK_CONFIG_FAST)

/* The topology and limits of one handle; read by init only. */
typedef struct auxtrunk_config {
    uint32_t struct_size; /* sizeof(auxtrunk_config_t) */
    uint32_t flags;       /* AUXTRUNK_CONFIG_* bits; unknown bits: AUXTRUNK_E_FLAGS */
    int32_t enc;          /* ENC, in [1, AUXTRUNK_MAX_WIDTH] */
    int32_t h1;           /* H1, likewise */
    int32_t h2;           /* H2, likewise */
    int32_t aux;          /* AUX, likewise */
    int32_t max_batch;    /* largest B any call will pass, [1, AUXTRUNK_MAX_BATCH] */
    int32_t device;       /* CUDA plugins: device ordinal, or -1 for the device
                             current on the thread calling init. Host plugins:
                             must be -1 (else AUXTRUNK_E_UNSUPPORTED). */
} auxtrunk_config_t;

/* Trunk parameters, owned by the host; read-only for the plugin. All six
 * pointers are in the plugin's memory space (see caps), 4-byte aligned,
 * non-NULL, and valid for the duration of the call (for CUDA plugins: until
 * the enqueued work completes). */
typedef struct auxtrunk_params {
    uint32_t struct_size; /* sizeof(auxtrunk_params_t) */
    uint32_t reserved;    /* must be 0, else AUXTRUNK_E_STRUCT_SIZE (a field a later
                             minor version may define, like a non-zero unknown tail) */
    const float *w1;      /* [ENC, H1] row-major */
    const float *b1;      /* [H1] */
    const float *w2;      /* [H1, H2] row-major */
    const float *b2;      /* [H2] */
    const float *w3;      /* [H2, AUX] row-major */
    const float *b3;      /* [AUX] */
} auxtrunk_params_t;

/* Gradient buffers, owned by the host; written by backward. Same rules as
 * auxtrunk_params_t; no two may overlap, nor overlap any input. */
typedef struct auxtrunk_grads {
    uint32_t struct_size; /* sizeof(auxtrunk_grads_t) */
    uint32_t reserved;    /* must be 0, else AUXTRUNK_E_STRUCT_SIZE (as params) */
    float *dw1;           /* [ENC, H1] */
    float *db1;           /* [H1] */
    float *dw2;           /* [H1, H2] */
    float *db2;           /* [H2] */
    float *dw3;           /* [H2, AUX] */
    float *db3;           /* [AUX] */
} auxtrunk_grads_t;

/* Memory a handle holds, for the host's accounting. */
typedef struct auxtrunk_memory {
    uint32_t struct_size;  /* sizeof(auxtrunk_memory_t), set by the host */
    uint32_t reserved;     /* written 0 by the plugin */
    uint64_t host_bytes;   /* host memory owned by the handle */
    uint64_t device_bytes; /* device memory owned by the handle (0 for host plugins) */
} auxtrunk_memory_t;

/* Flags for backward. */
/* Add the computed gradient to the existing contents of each gradient buffer
 * (g = g + computed, one rounding per element, after the canonical sum is
 * complete). Without it every gradient element is overwritten. */
#define AUXTRUNK_BACKWARD_ACCUMULATE (UINT32_C(1) << 0)
#define AUXTRUNK_BACKWARD_KNOWN_FLAGS (AUXTRUNK_BACKWARD_ACCUMULATE)
/* forward and infer define no flags yet: pass 0 (else AUXTRUNK_E_FLAGS). */
#define AUXTRUNK_FORWARD_KNOWN_FLAGS (UINT32_C(0))

/* The API table a plugin hands to the host. */
typedef struct auxtrunk_api {
    uint32_t struct_size; /* bytes of this table that are valid (see entry) */
    uint32_t abi_version; /* the ABI version negotiated for this host */
    uint64_t caps;        /* AUXTRUNK_CAP_* bits */

    /* Implementation name, e.g. "cpu-ref" or "cuda-v1": static, NUL-terminated,
     * valid until the library is closed. [any thread] */
    const char *impl_name;
    /* Kernel version, e.g. "cpu-ref 1.0.0 (canon 1)": static, NUL-terminated,
     * valid until the library is closed; it changes whenever the kernels do.
     * [any thread] */
    const char *kernel_version;

    /* Message of a status code (the AUXTRUNK_STATUS_MAP text), or
     * "unknown status" for a value not in the map. Never NULL; the string is
     * static. [any thread, any state] */
    const char *(*status_string)(int32_t status);

    /* Creates a handle for config. On AUXTRUNK_OK *out_handle owns every
     * buffer the handle needs (recorded activations, workspace); no later
     * call allocates. The config is copied; its storage may be reused at
     * once. On any other status *out_handle is left unchanged.
     * Returns OK, E_NULL_POINTER, E_STRUCT_SIZE, E_FLAGS, E_DIMENSION,
     * E_UNSUPPORTED, E_OUT_OF_MEMORY, E_DEVICE.
     * [any thread] */
    int32_t (*init)(const auxtrunk_config_t *config, auxtrunk_handle_t **out_handle);

    /* Frees a handle and everything it owns. NULL is accepted (returns OK).
     * For CUDA plugins it waits for the handle's own outstanding work to
     * finish first. The handle must not be used afterwards; where the plugin
     * can still tell (the freed memory is still mapped and unchanged, e.g.
     * under a quarantining allocator), later calls return E_BAD_HANDLE:
     * destroy marks the handle dead in a way the compiler cannot drop.
     * Returns OK, E_BAD_HANDLE, E_DEVICE.
     * [any thread; no call on this handle in flight] */
    int32_t (*destroy)(auxtrunk_handle_t *handle);

    /* Training forward: computes out [batch, AUX] from x [batch, ENC] and
     * records what backward needs (h1, h2 and batch), replacing any earlier
     * record. x, params and out are in the plugin's memory space; out must
     * not overlap x or any parameter (E_ALIAS). x and params are only read.
     * flags must be 0. stream: CUDA plugins enqueue on this cudaStream_t
     * (NULL means the legacy default stream); host plugins ignore it.
     * Returns OK, E_NULL_POINTER, E_BAD_HANDLE, E_STRUCT_SIZE, E_BATCH,
     * E_FLAGS, E_ALIAS, E_MEMORY_SPACE, E_DEVICE.
     * [after init, before destroy; calls on one handle never overlap] */
    int32_t (*forward)(auxtrunk_handle_t *handle, const auxtrunk_params_t *params, const float *x,
                       int32_t batch, float *out, uint32_t flags, void *stream);

    /* Inference forward (target network): the same function and the same bits
     * as forward, with any parameter set, but it records nothing and leaves an
     * earlier training forward's record intact, so a following backward gives
     * exactly the result it would have given without this call.
     * Arguments, statuses and rules as forward. */
    int32_t (*infer)(auxtrunk_handle_t *handle, const auxtrunk_params_t *params, const float *x,
                     int32_t batch, float *out, uint32_t flags, void *stream);

    /* Backward of the last training forward: from dout [batch, AUX] computes
     * dW1, db1, dW2, db2, dW3, db3 into grads (overwrite, or accumulate with
     * AUXTRUNK_BACKWARD_ACCUMULATE). params and x must hold the same values as
     * in that forward (the plugin cannot check this). There is no gradient for
     * x. The record stays valid: backward may be repeated (deterministic
     * plugins then give identical bits). batch must equal the recorded batch.
     * Returns OK, E_NULL_POINTER, E_BAD_HANDLE, E_STRUCT_SIZE, E_BATCH,
     * E_FLAGS, E_NO_FORWARD, E_BATCH_MISMATCH, E_ALIAS, E_MEMORY_SPACE,
     * E_DEVICE.
     * [after init, before destroy; calls on one handle never overlap] */
    int32_t (*backward)(auxtrunk_handle_t *handle, const auxtrunk_params_t *params, const float *x,
                        const float *dout, int32_t batch, const auxtrunk_grads_t *grads,
                        uint32_t flags, void *stream);

    /* Reports the memory the handle owns into *out (struct_size set by the
     * host): host_bytes + device_bytes is at least the handle's record
     * (4 * max_batch * (H1 + H2) bytes of h1 and h2).
     * Returns OK, E_NULL_POINTER, E_BAD_HANDLE, E_STRUCT_SIZE.
     * [after init, before destroy] */
    int32_t (*memory_usage)(const auxtrunk_handle_t *handle, auxtrunk_memory_t *out);

    /* Text describing the last error returned on this handle (with detail,
     * e.g. which argument), or "" if none. The string belongs to the handle
     * and is valid until the next call on it. Never NULL: a fresh handle
     * gives "". NULL handle: "".
     * [after init, before destroy] */
    const char *(*last_error)(const auxtrunk_handle_t *handle);
} auxtrunk_api_t;

/* ------------------------------------------------------------------------- */
/* The entry symbol                                                          */
/*
 * A plugin exports exactly one symbol, this function, with C linkage:
 *
 *   int32_t auxtrunk_plugin_entry(const auxtrunk_host_info_t *host,
 *                                 auxtrunk_api_t *api);
 *
 * Negotiation: the plugin speaks versions 1.0 .. 1.<its minor>. It answers
 * with the highest version v it speaks such that host->abi_min <= v <=
 * host->abi_max; if there is none, or abi_min > abi_max, it returns
 * E_ABI_VERSION. The host must then only use what version v defines.
 *
 * Filling the table: the host sets api->struct_size to the size of the table
 * it can hold (sizeof(auxtrunk_api_t) as the host knows it, at least
 * AUXTRUNK_API_SIZE_1_0). On OK the plugin has written exactly that many
 * bytes and no byte past them: the entries it has, then zeros;
 * api->struct_size now says how many bytes are valid, exactly
 * min(host's size, sizeof the plugin's table) (so AUXTRUNK_API_SIZE_1_0 for
 * a plugin whose highest version is 1.0), and a host must treat an entry
 * past it as absent.
 *
 * Returns OK, E_NULL_POINTER, E_STRUCT_SIZE (host info or api size below the
 * 1.0 size, or non-zero unknown trailing bytes in host info), E_FLAGS,
 * E_ABI_VERSION. On any error *api is untouched.
 * [any thread; may be called any number of times; allocates nothing]
 */
#define AUXTRUNK_ENTRY_SYMBOL "auxtrunk_plugin_entry"
typedef int32_t (*auxtrunk_entry_fn)(const auxtrunk_host_info_t *host, auxtrunk_api_t *api);

#if defined(AUXTRUNK_BUILDING_PLUGIN)
#if defined(__GNUC__) || defined(__clang__)
#define AUXTRUNK_EXPORT __attribute__((visibility("default")))
#else
#define AUXTRUNK_EXPORT
#endif
AUXTRUNK_EXPORT int32_t auxtrunk_plugin_entry(const auxtrunk_host_info_t *host,
                                              auxtrunk_api_t *api);
#endif

/* ------------------------------------------------------------------------- */
/* Sizes of version 1.0, and helpers for one flat parameter buffer            */

#define AUXTRUNK_HOST_INFO_SIZE_1_0 16u
#define AUXTRUNK_CONFIG_SIZE_1_0 32u
#define AUXTRUNK_PARAMS_SIZE_1_0 56u
#define AUXTRUNK_GRADS_SIZE_1_0 56u
#define AUXTRUNK_MEMORY_SIZE_1_0 24u
#define AUXTRUNK_API_SIZE_1_0 96u

/* Element counts of each weight, for a valid config. c is a pointer to
 * anything with the members enc, h1, h2, aux (an auxtrunk_config_t, or a
 * kernel's own dims): these macros are the one definition of the layout, for
 * the host and for the kernels. */
#define AUXTRUNK_W1_COUNT(c) ((size_t)(c)->enc * (size_t)(c)->h1)
#define AUXTRUNK_W2_COUNT(c) ((size_t)(c)->h1 * (size_t)(c)->h2)
#define AUXTRUNK_W3_COUNT(c) ((size_t)(c)->h2 * (size_t)(c)->aux)

/* The flat layout: offsets, in floats, of the six parameters (or of their
 * gradients) in one buffer holding W1, b1, W2, b2, W3, b3 in that order, and
 * the count of all six. */
#define AUXTRUNK_W1_OFFSET(c) ((size_t)0)
#define AUXTRUNK_B1_OFFSET(c) (AUXTRUNK_W1_OFFSET(c) + AUXTRUNK_W1_COUNT(c))
#define AUXTRUNK_W2_OFFSET(c) (AUXTRUNK_B1_OFFSET(c) + (size_t)(c)->h1)
#define AUXTRUNK_B2_OFFSET(c) (AUXTRUNK_W2_OFFSET(c) + AUXTRUNK_W2_COUNT(c))
#define AUXTRUNK_W3_OFFSET(c) (AUXTRUNK_B2_OFFSET(c) + (size_t)(c)->h2)
#define AUXTRUNK_B3_OFFSET(c) (AUXTRUNK_W3_OFFSET(c) + AUXTRUNK_W3_COUNT(c))
#define AUXTRUNK_PARAM_COUNT(c) (AUXTRUNK_B3_OFFSET(c) + (size_t)(c)->aux)

/* ------------------------------------------------------------------------- */
/* Layout assertions: the ABI is these exact bytes.                          */

#ifdef __cplusplus
#define AUXTRUNK_STATIC_ASSERT_(cond, msg) static_assert(cond, msg)
#else
#define AUXTRUNK_STATIC_ASSERT_(cond, msg) _Static_assert(cond, msg)
#endif

AUXTRUNK_STATIC_ASSERT_(sizeof(void *) == 8, "the auxtrunk ABI is defined for 64-bit targets");
AUXTRUNK_STATIC_ASSERT_(sizeof(auxtrunk_host_info_t) == AUXTRUNK_HOST_INFO_SIZE_1_0,
                        "host_info size");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_host_info_t, abi_max) == 8, "host_info layout");
AUXTRUNK_STATIC_ASSERT_(sizeof(auxtrunk_config_t) == AUXTRUNK_CONFIG_SIZE_1_0, "config size");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_config_t, enc) == 8, "config layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_config_t, max_batch) == 24, "config layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_config_t, device) == 28, "config layout");
AUXTRUNK_STATIC_ASSERT_(sizeof(auxtrunk_params_t) == AUXTRUNK_PARAMS_SIZE_1_0, "params size");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_params_t, w1) == 8, "params layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_params_t, b3) == 48, "params layout");
AUXTRUNK_STATIC_ASSERT_(sizeof(auxtrunk_grads_t) == AUXTRUNK_GRADS_SIZE_1_0, "grads size");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_grads_t, dw1) == 8, "grads layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_grads_t, db3) == 48, "grads layout");
AUXTRUNK_STATIC_ASSERT_(sizeof(auxtrunk_memory_t) == AUXTRUNK_MEMORY_SIZE_1_0, "memory size");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_memory_t, device_bytes) == 16, "memory layout");
AUXTRUNK_STATIC_ASSERT_(sizeof(auxtrunk_api_t) == AUXTRUNK_API_SIZE_1_0, "api size");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_api_t, caps) == 8, "api layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_api_t, impl_name) == 16, "api layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_api_t, status_string) == 32, "api layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_api_t, init) == 40, "api layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_api_t, backward) == 72, "api layout");
AUXTRUNK_STATIC_ASSERT_(offsetof(auxtrunk_api_t, last_error) == 88, "api layout");

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AUXTRUNK_H */
