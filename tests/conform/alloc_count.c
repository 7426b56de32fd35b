/*
 * alloc_count.c — the runner's hooks on host memory: counts the allocations
 * a plugin makes inside its calls (lifecycle.no_alloc_in_calls: "no later
 * call allocates"), counts its own memory mappings (process.mmap: host memory
 * comes from the malloc family), and quarantines what destroy frees
 * (lifecycle.after_destroy: a destroyed handle's memory stays mapped and
 * unchanged, so calling the plugin with it is safe and must give
 * E_BAD_HANDLE).
 *
 * The runner defines the malloc family itself and forwards to glibc's
 * __libc_* entry points. An executable's definitions come first in the
 * dynamic linker's search order, so a plugin's calls to malloc, calloc,
 * realloc, posix_memalign, aligned_alloc, memalign and valloc land here. A
 * counter is bumped only while counting is switched on, around one call into
 * the plugin; the cost otherwise is one relaxed load. glibc only, and not
 * under AddressSanitizer (which owns these symbols); cf_alloc_supported()
 * then returns 0 and the check is skipped.
 *
 * free is defined here too (glibc requires the whole family to be replaced
 * together) and, while quarantine is on, keeps the blocks instead of freeing
 * them. mmap, mmap64, munmap and mremap are defined here and go straight to
 * the system calls: glibc's own callers (malloc, pthread_create, the dynamic
 * loader) use internal aliases and are not counted, a plugin's calls are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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
static atomic_int cf_map_counting;
static atomic_long cf_maps;
static atomic_int cf_quarantining;
/* Blocks held back by quarantine; past the end they are freed for real and
 * cf_quarantine_end reports the overflow. */
#define CF_QUARANTINE_MAX 4096
static atomic_int cf_quarantined;

#ifndef CF_NO_INTERPOSE
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void __libc_free(void *p);

static void *cf_quarantine[CF_QUARANTINE_MAX];

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

CF_INTERPOSE void free(void *p)
{
    if (p && atomic_load_explicit(&cf_quarantining, memory_order_relaxed)) {
        int i = atomic_fetch_add(&cf_quarantined, 1);
        if (i < CF_QUARANTINE_MAX) {
            cf_quarantine[i] = p;
            return;
        }
    }
    __libc_free(p);
}

static void count_map(void)
{
    if (atomic_load_explicit(&cf_map_counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&cf_maps, 1, memory_order_relaxed);
}

CF_INTERPOSE void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    count_map();
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

CF_INTERPOSE void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    count_map();
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

CF_INTERPOSE int munmap(void *addr, size_t len)
{
    count_map();
    return (int)syscall(SYS_munmap, addr, len);
}

CF_INTERPOSE void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    count_map();
    void *fixed = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        fixed = va_arg(ap, void *);
        va_end(ap);
    }
    return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, fixed);
}

int cf_alloc_supported(void) { return 1; }

void cf_quarantine_release(void)
{
    int n = atomic_exchange(&cf_quarantined, 0);
    for (int i = 0; i < n && i < CF_QUARANTINE_MAX; i++)
        __libc_free(cf_quarantine[i]);
}
#else
int cf_alloc_supported(void) { return 0; }
void cf_quarantine_release(void) {}
#endif

void cf_quarantine_begin(void)
{
    atomic_store(&cf_quarantined, 0);
    atomic_store(&cf_quarantining, 1);
}

int cf_quarantine_end(void)
{
    atomic_store(&cf_quarantining, 0);
    int n = atomic_load(&cf_quarantined);
    return n > CF_QUARANTINE_MAX ? -1 : n;
}

void cf_map_count_begin(void)
{
    atomic_store(&cf_maps, 0);
    atomic_store(&cf_map_counting, 1);
}

long cf_map_count_end(void)
{
    atomic_store(&cf_map_counting, 0);
    return atomic_load(&cf_maps);
}

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
