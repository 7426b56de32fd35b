/*
 * dist_none.c — the communicator in a build without NCCL (dist.h): every
 * worker refuses with the reason, and the launcher is never started
 * (main.c checks ath_dist_available first).
 */
#include "dist.h"

int ath_dist_available(void) { return 0; }

int ath_dist_open(ath_dist_t **out, const ath_dist_env_t *env, int device, double timeout_s,
                  ath_err_t *err)
{
    (void)env, (void)device, (void)timeout_s;
    *out = NULL;
    return ath_errf(err, "this auxtrunk-host was built without NCCL (the CUDA toolkit's nccl.h "
                         "and libnccl): data-parallel training is not available");
}

int ath_dist_allgather(ath_dist_t *d, const float *send, float *recv, size_t count, void *stream,
                       ath_err_t *err)
{
    (void)d, (void)send, (void)recv, (void)count, (void)stream;
    return ath_errf(err, "no NCCL in this build");
}

int ath_dist_wait(ath_dist_t *d, void *stream, ath_err_t *err)
{
    (void)d, (void)stream;
    return ath_errf(err, "no NCCL in this build");
}

int ath_dist_broadcast(ath_dist_t *d, void *buf, size_t n, ath_err_t *err)
{
    (void)d, (void)buf, (void)n;
    return ath_errf(err, "no NCCL in this build");
}

int ath_dist_gather(ath_dist_t *d, const void *mine, void *all, size_t n, ath_err_t *err)
{
    (void)d, (void)mine, (void)all, (void)n;
    return ath_errf(err, "no NCCL in this build");
}

void ath_dist_close(ath_dist_t *d) { (void)d; }
