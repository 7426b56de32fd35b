/*
 * trunk.c — a plugin bound to a topology, with host-array calls (trunk.h).
 */
#include "trunk.h"

#include <string.h>

#include "layout.h"

void ath_trunk_close(ath_trunk_t *t)
{
    if (t->mem) {
        /* The plugin's work must be finished before its buffers go away. */
        (void)t->mem->ops->sync(t->mem, NULL);
    }
    ath_plugin_unload(&t->plugin);
    if (t->mem) {
        float *bufs[] = {t->d_params, t->d_grads, t->d_x, t->d_out, t->d_dout};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i])
                t->mem->ops->release(t->mem, bufs[i]);
        ath_devmem_close(t->mem);
    }
    memset(t, 0, sizeof *t);
}

ath_load_status_t ath_trunk_open(ath_trunk_t *t, const char *dir_or_file,
                                 const auxtrunk_config_t *config, int device, ath_err_t *err)
{
    memset(t, 0, sizeof *t);
    ath_load_status_t ls = ath_plugin_load(dir_or_file, &t->plugin, err);
    if (ls != ATH_LOAD_OK)
        return ls;

    if (ath_devmem_open(t->plugin.space, device, &t->mem, err) != 0) {
        if (err) {
            ath_err_t inner = *err;
            ath_errf(err, "%s (%s): %s", t->plugin.path, ath_plugin_name(&t->plugin), inner.msg);
        }
        ath_trunk_close(t);
        return ATH_LOAD_INIT;
    }
    t->config = *config;
    t->config.device = t->mem->device;
    ls = ath_plugin_init(&t->plugin, &t->config, err);
    if (ls != ATH_LOAD_OK) {
        ath_trunk_close(t);
        return ls;
    }

    t->n_params = ath_layout_of(&t->config).count;
    size_t B = (size_t)t->config.max_batch;
    struct {
        float **p;
        size_t n;
    } bufs[] = {
        {&t->d_params, t->n_params},
        {&t->d_grads, t->n_params},
        {&t->d_x, B * (size_t)t->config.enc},
        {&t->d_out, B * (size_t)t->config.aux},
        {&t->d_dout, B * (size_t)t->config.aux},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        void *p = NULL;
        if (t->mem->ops->alloc(t->mem, bufs[i].n * sizeof(float), &p, err) != 0) {
            ath_trunk_close(t);
            return ATH_LOAD_INIT;
        }
        *bufs[i].p = p;
    }
    return ATH_LOAD_OK;
}

int ath_trunk_forward(ath_trunk_t *t, const float *params, const float *x, int32_t batch,
                      float *out, ath_err_t *err)
{
    ath_devmem_t *m = t->mem;
    const auxtrunk_config_t *c = &t->config;
    if (m->ops->upload(m, t->d_params, params, t->n_params * sizeof(float), err) != 0 ||
        m->ops->upload(m, t->d_x, x, (size_t)batch * (size_t)c->enc * sizeof(float), err) != 0)
        return -1;
    auxtrunk_params_t p = ath_params_view(c, t->d_params);
    int32_t s = t->plugin.api.forward(t->plugin.handle, &p, t->d_x, batch, t->d_out, 0, m->stream);
    if (s != AUXTRUNK_OK)
        return ath_plugin_failf(&t->plugin, s, err, "forward");
    return m->ops->download(m, out, t->d_out, (size_t)batch * (size_t)c->aux * sizeof(float), err);
}

int ath_trunk_backward(ath_trunk_t *t, const float *dout, int32_t batch, float *grads,
                       ath_err_t *err)
{
    ath_devmem_t *m = t->mem;
    const auxtrunk_config_t *c = &t->config;
    if (m->ops->upload(m, t->d_dout, dout, (size_t)batch * (size_t)c->aux * sizeof(float), err) !=
        0)
        return -1;
    auxtrunk_params_t p = ath_params_view(c, t->d_params);
    auxtrunk_grads_t g = ath_grads_view(c, t->d_grads);
    int32_t s =
        t->plugin.api.backward(t->plugin.handle, &p, t->d_x, t->d_dout, batch, &g, 0, m->stream);
    if (s != AUXTRUNK_OK)
        return ath_plugin_failf(&t->plugin, s, err, "backward");
    return m->ops->download(m, grads, t->d_grads, t->n_params * sizeof(float), err);
}

int ath_trunk_memory(ath_trunk_t *t, auxtrunk_memory_t *mem, ath_err_t *err)
{
    memset(mem, 0, sizeof *mem);
    mem->struct_size = sizeof *mem;
    int32_t s = t->plugin.api.memory_usage(t->plugin.handle, mem);
    if (s != AUXTRUNK_OK)
        return ath_plugin_failf(&t->plugin, s, err, "memory_usage");
    return 0;
}
