/*
 * devmem.c — picks the devmem implementation for a memory space.
 */
#include "devmem.h"

#include <stdlib.h>

int ath_devmem_open(ath_space_t space, int device, ath_devmem_t **out, ath_err_t *err)
{
    const ath_devmem_ops_t *ops = NULL;
    if (space == ATH_SPACE_HOST) {
        ops = &ath_devmem_host_ops;
    } else {
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
        ops = &ath_devmem_cuda_ops;
#else
        return ath_errf(err, "this plugin uses CUDA device memory, but this auxtrunk-host was "
                             "built without CUDA (no CUDA toolkit was found at configure time); "
                             "use a host-memory plugin such as cpu");
#endif
    }
    ath_devmem_t *m = calloc(1, sizeof *m);
    if (!m)
        return ath_errf(err, "out of host memory");
    m->ops = ops;
    m->device = -1;
    if (ops->open(m, device, err) != 0) {
        free(m);
        return -1;
    }
    *out = m;
    return 0;
}

void ath_devmem_close(ath_devmem_t *m)
{
    if (!m)
        return;
    m->ops->close(m);
    free(m);
}
