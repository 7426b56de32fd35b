/*
 * trunk.h — a plugin bound to one topology: the loaded plugin, its memory
 * space, and mirrors of the host's buffers in that space. Training calls go
 * through an ath_trunk_t with host arrays in and out; the trunk moves data
 * across and calls the plugin.
 *
 * The mirrors are refreshed on every call, so a trunk holds no training
 * state: a hot swap can open a new ath_trunk_t, check it with host arrays,
 * and replace the old one between two steps. The training state belongs to
 * the run's engine (engine.h); a device-resident engine calls the plugin
 * directly with its own device buffers and stream, not through these calls.
 */
#ifndef ATH_TRUNK_H
#define ATH_TRUNK_H

#include "auxtrunk.h"
#include "devmem.h"
#include "loader.h"
#include "util.h"

typedef struct ath_trunk {
    ath_plugin_t plugin;
    ath_devmem_t *mem;
    auxtrunk_config_t config;
    size_t n_params;           /* floats in the flat parameter layout */
    float *d_params, *d_grads; /* [n_params] each, in the plugin's space */
    float *d_x;                /* [max_batch, ENC] */
    float *d_out;              /* [max_batch, AUX] */
    float *d_dout;             /* [max_batch, AUX] */
} ath_trunk_t;

/* Loads the plugin at dir_or_file, opens its memory space, creates a handle
 * for config (config->device is filled in for CUDA plugins) and allocates the
 * mirrors. Returns ATH_LOAD_OK, a loader refusal, or ATH_LOAD_INIT when the
 * memory space or the handle cannot be set up. On failure *t is empty. */
ath_load_status_t ath_trunk_open(ath_trunk_t *t, const char *dir_or_file,
                                 const auxtrunk_config_t *config, int device, ath_err_t *err);

/* Training forward: out [batch, AUX] = trunk(params, x [batch, ENC]).
 * Records the forward for the next ath_trunk_backward. */
int ath_trunk_forward(ath_trunk_t *t, const float *params, const float *x, int32_t batch,
                      float *out, ath_err_t *err);

/* Backward of the last forward (same params and x, kept in the mirrors):
 * grads [n_params] (overwritten) from dout [batch, AUX]. */
int ath_trunk_backward(ath_trunk_t *t, const float *dout, int32_t batch, float *grads,
                       ath_err_t *err);

/* Handle memory as reported by the plugin. */
int ath_trunk_memory(ath_trunk_t *t, auxtrunk_memory_t *m, ath_err_t *err);

/* Frees the mirrors, destroys the handle, closes the library and the memory
 * space. Safe on an empty or partly opened trunk. */
void ath_trunk_close(ath_trunk_t *t);

#endif
