/*
 * alloc_count.c — counts the host allocations a plugin makes inside its
 * calls, for lifecycle.no_alloc_in_calls ("no later call allocates").
 *
 * The runner defines the malloc family itself and forwards to glibc's
 * __libc_* entry points. An executable's definitions come first in the
 * dynamic linker's search order, so a plugin's calls to malloc, calloc,
 * realloc, posix_memalign, aligned_alloc, memalign and valloc land here. A
 * counter is bumped only while counting is switched on, around one call into
 * the plugin; the cost otherwise is one relaxed load. glibc only, and not
 * under AddressSanitizer (which owns these symbols); cf_alloc_supported()
 * then returns 0 and the check is skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

#include "conform.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define CF_NO_INTERPOSE 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CF_NO_INTERPOSE 1
#define CF_SANITIZED 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define CF_SANITIZED 1
#endif
#endif
#if !defined(__GLIBC__)
#define CF_NO_INTERPOSE 1
#endif

int cf_heap_sanitized(void)
{
#ifdef CF_SANITIZED
    return 1;
#else
    return 0;
#endif
}

static atomic_int cf_counting;
static atomic_long cf_allocs;

#ifndef CF_NO_INTERPOSE
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);

/* Default visibility: the build hides everything else, and the dynamic
 * linker must see these. */
#define CF_INTERPOSE __attribute__((visibility("default")))

static void count(void)
{
    if (atomic_load_explicit(&cf_counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&cf_allocs, 1, memory_order_relaxed);
}

CF_INTERPOSE void *malloc(size_t n)
{
    count();
    return __libc_malloc(n);
}

CF_INTERPOSE void *calloc(size_t n, size_t m)
{
    count();
    return __libc_calloc(n, m);
}

CF_INTERPOSE void *realloc(void *p, size_t n)
{
    count();
    return __libc_realloc(p, n);
}

CF_INTERPOSE void *memalign(size_t align, size_t n)
{
    count();
    return __libc_memalign(align, n);
}

CF_INTERPOSE void *aligned_alloc(size_t align, size_t n)
{
    count();
    return __libc_memalign(align, n);
}

CF_INTERPOSE void *valloc(size_t n)
{
    count();
    return __libc_valloc(n);
}

CF_INTERPOSE int posix_memalign(void **out, size_t align, size_t n)
{
    count();
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

int cf_alloc_supported(void) { return 1; }
#else
int cf_alloc_supported(void) { return 0; }
#endif

void cf_alloc_count_begin(void)
{
    atomic_store(&cf_allocs, 0);
    atomic_store(&cf_counting, 1);
}

long cf_alloc_count_end(void)
{
    atomic_store(&cf_counting, 0);
    return atomic_load(&cf_allocs);
}
