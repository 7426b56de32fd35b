/* device_none.c — device.h for a runner built without CUDA: CUDA-memory
 * plugins are skipped with the reason below. */
#include "device.h"

#include <stdio.h>

static const char cfd_none_[] = "runner built without CUDA";

const char *cfd_error(void) { return cfd_none_; }

int cfd_available(char *why, size_t why_len)
{
    snprintf(why, why_len, "%s", cfd_none_);
    return 0;
}

int cfd_malloc(void **p, size_t bytes)
{
    (void)bytes;
    *p = NULL;
    return -1;
}
void cfd_free(void *p) { (void)p; }
int cfd_put(void *d, const void *s, size_t n)
{
    (void)d, (void)s, (void)n;
    return -1;
}
int cfd_get(void *d, const void *s, size_t n)
{
    (void)d, (void)s, (void)n;
    return -1;
}
int cfd_sync(void) { return -1; }
int cfd_take_error(void) { return 0; }
int cfd_mem_used(long long *bytes)
{
    *bytes = -1;
    return -1;
}
int cfd_stream_create(void **s)
{
    *s = NULL;
    return -1;
}
void cfd_stream_destroy(void *s) { (void)s; }
int cfd_stream_sync(void *s)
{
    (void)s;
    return -1;
}
int cfd_stream_done(void *s)
{
    (void)s;
    return -1;
}
int cfd_gate_block_legacy(cfd_gate_t **g)
{
    *g = NULL;
    return -1;
}
void cfd_gate_open(cfd_gate_t *g) { (void)g; }
int cfd_capture_begin(void *s)
{
    (void)s;
    return -1;
}
int cfd_capture_end(void *s, void **e)
{
    (void)s;
    *e = NULL;
    return -1;
}
int cfd_graph_launch(void *e, void *s)
{
    (void)e, (void)s;
    return -1;
}
void cfd_graph_destroy(void *e) { (void)e; }
int cfd_is_device_pointer(const void *p)
{
    (void)p;
    return -1;
}
