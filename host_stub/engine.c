/*
 * engine.c — picks the engine for a memory space (engine.h).
 */
#include "engine.h"

#include <stdlib.h>

const char *const ath_phase_names[ATH_PHASES] = {
    [ATH_PHASE_DATA] = "data (batch draw)",
    [ATH_PHASE_FORWARD] = "plugin forward",
    [ATH_PHASE_LOSS] = "loss and dout",
    [ATH_PHASE_BACKWARD] = "plugin backward",
    [ATH_PHASE_VERDICT] = "finite check, loss sum",
    [ATH_PHASE_ADAM] = "Adam",
};

int ath_engine_open(ath_space_t space, const ath_engine_cfg_t *cfg, ath_engine_t **out,
                    ath_err_t *err)
{
    const ath_engine_ops_t *ops = &ath_engine_host_ops;
    if (space == ATH_SPACE_CUDA) {
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
        ops = &ath_engine_cuda_ops;
#else
        return ath_errf(err, "a device-resident run needs a build with CUDA");
#endif
    }
    ath_engine_t *e = calloc(1, sizeof *e);
    if (!e)
        return ath_errf(err, "out of host memory");
    e->ops = ops;
    e->cfg = *cfg;
    if (ops->open(e, err) != 0) {
        free(e);
        return -1;
    }
    *out = e;
    return 0;
}

void ath_engine_close(ath_engine_t *e)
{
    if (!e)
        return;
    e->ops->close(e);
    free(e);
}
