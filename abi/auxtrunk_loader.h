/*
 * auxtrunk_loader.h — finding, opening, negotiating and checking one
 * libauxtrunk.so: the code a trainer runs before it touches the API table.
 *
 * A single-header library. Every file may include it for the declarations;
 * exactly one C file of the program defines the implementation:
 *
 *   #define _XOPEN_SOURCE 700         // or _GNU_SOURCE, before any include
 *   #define AUXTRUNK_LOADER_IMPLEMENTATION
 *   #include "auxtrunk_loader.h"
 *
 * and the program links libdl (-ldl; part of libc from glibc 2.34).
 *
 *   auxtrunk_plugin_t pl;
 *   char msg[AUXTRUNK_LOAD_MESSAGE_MAX];
 *   if (auxtrunk_plugin_load(&pl, "cuda-v2", msg, sizeof msg) != AUXTRUNK_LOAD_OK) {
 *       fprintf(stderr, "%s\n", msg);   // e.g. "plugin /x/libauxtrunk.so is
 *       return 1;                       //  writable by its group (mode 0664)..."
 *   }
 *   ... pl.api.init(...), pl.api.forward(...), pl.api.destroy(...) ...
 *   auxtrunk_plugin_unload(&pl);
 *
 * What loading does, in order, each step with its own status and a message
 * that names the file and the reason:
 *   1. locate: a path with a '/' is explicit (a directory means
 *      DIR/libauxtrunk.so, anything else is the file); a bare name such as
 *      "cpu" is looked up as ENTRY/NAME/libauxtrunk.so in each entry of the
 *      ':'-separated search path ($AUXTRUNK_PLUGIN_PATH unless the caller
 *      gives one), first match wins; empty entries are skipped (never ".");
 *   2. permissions: the file is a regular file, owned by this user or root,
 *      writable by neither its group nor others; so is its directory, and the
 *      directory of the name given where a symbolic link led elsewhere;
 *   3. ELF pre-check: a 64-bit shared object of this byte order and
 *      architecture whose headers and segments lie inside the file (dlopen of
 *      a truncated file would fault on first touch instead of failing);
 *   4. dlopen(RTLD_NOW | RTLD_LOCAL) and lookup of auxtrunk_plugin_entry;
 *   5. negotiation over the caller's ABI range [abi_min, abi_max];
 *   6. the table: struct_size within [1.0 size, sizeof(auxtrunk_api_t)], the
 *      negotiated version inside the caller's range, exactly one memory space
 *      in caps, every 1.0 entry non-NULL, impl_name and kernel_version
 *      printable ASCII of 1..AUXTRUNK_LOAD_NAME_MAX characters.
 * A refusal leaves nothing behind: the library is closed before it returns
 * and *pl is empty.
 *
 * Guarantees: never prints, never exits or aborts; messages go to the
 * caller's buffer (always NUL-terminated, cut with "..." if it is short; NULL
 * with length 0 is allowed). No global state: loads on different
 * auxtrunk_plugin_t run concurrently from any threads (dlopen and dlerror are
 * thread-safe in glibc, and strerror only names errno values of file calls,
 * whose texts are constant); the environment is only read, so it must not be
 * changed (setenv) while a load runs.
 *
 * Not done here: init and the calls after it (the table is the plugin's own
 * contract, abi/auxtrunk.h), and protection from a plugin that crashes in its
 * entry (run an untrusted plugin in a child process for that). The file can
 * change between the checks and dlopen; a host that must exclude that loads
 * a private copy it made itself.
 */
#ifndef AUXTRUNK_LOADER_H
#define AUXTRUNK_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "auxtrunk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The file name of a plugin inside its directory. */
#define AUXTRUNK_PLUGIN_FILE "libauxtrunk.so"
/* The search path variable: ':'-separated directories of plugin folders. */
#define AUXTRUNK_PLUGIN_PATH_ENV "AUXTRUNK_PLUGIN_PATH"
/* Room for a resolved plugin path, and a message size that never cuts one. */
#define AUXTRUNK_LOAD_PATH_MAX 4096
#define AUXTRUNK_LOAD_MESSAGE_MAX (AUXTRUNK_LOAD_PATH_MAX + 512)
/* Longest impl_name / kernel_version accepted. */
#define AUXTRUNK_LOAD_NAME_MAX 255

/* Loader statuses: X(NAME, value, short name, meaning). The short names are
 * stable words for logs and scripts ("no-file", "broken-table", ...). */
#define AUXTRUNK_LOAD_STATUS_MAP(X)                                                           \
    X(OK, 0, "ok", "loaded, negotiated and checked")                                          \
    X(E_ARGUMENT, -1, "bad-argument", "a NULL or empty argument, or an invalid ABI range")    \
    X(E_NO_FILE, -2, "no-file", "no plugin file at the path or in the search path")           \
    X(E_PERMISSIONS, -3, "permissions", "the file or its directory is not safe to load from") \
    X(E_NOT_LOADABLE, -4, "not-loadable",                                                     \
      "not a shared object for this process, or dlopen failed")                               \
    X(E_NO_ENTRY, -5, "no-entry", "the file has no auxtrunk_plugin_entry symbol")             \
    X(E_ABI, -6, "incompatible-abi", "no common ABI version, or an answer outside the range") \
    X(E_BAD_TABLE, -7, "broken-table", "the API table fails a check")

#define AUXTRUNK_LOAD_ENUM_ROW_(name, value, word, meaning) AUXTRUNK_LOAD_##name = (value),
enum auxtrunk_load_status_constants { AUXTRUNK_LOAD_STATUS_MAP(AUXTRUNK_LOAD_ENUM_ROW_) };
#undef AUXTRUNK_LOAD_ENUM_ROW_

/* The short name of a loader status ("no-entry"), "unknown" otherwise. */
static inline const char *auxtrunk_load_status_name(int32_t status)
{
    switch (status) {
#define AUXTRUNK_LOAD_NAME_ROW_(name, value, word, meaning) \
    case (value):                                           \
        return word;
        AUXTRUNK_LOAD_STATUS_MAP(AUXTRUNK_LOAD_NAME_ROW_)
#undef AUXTRUNK_LOAD_NAME_ROW_
    }
    return "unknown";
}

/* What a loader status means in general; the message buffer says what
 * happened in one load. "unknown loader status" otherwise. */
static inline const char *auxtrunk_load_status_message(int32_t status)
{
    switch (status) {
#define AUXTRUNK_LOAD_MESSAGE_ROW_(name, value, word, meaning) \
    case (value):                                              \
        return meaning;
        AUXTRUNK_LOAD_STATUS_MAP(AUXTRUNK_LOAD_MESSAGE_ROW_)
#undef AUXTRUNK_LOAD_MESSAGE_ROW_
    }
    return "unknown loader status";
}

/* One loaded plugin. Zero-initialised (or after unload) it is empty. */
typedef struct auxtrunk_plugin {
    void *lib;                         /* dlopen handle; NULL when nothing is loaded */
    auxtrunk_entry_fn entry;           /* the entry, for hosts that negotiate again */
    auxtrunk_api_t api;                /* the negotiated table (a copy); zero after open only */
    uint64_t space;                    /* AUXTRUNK_CAP_MEM_HOST or _MEM_CUDA; 0 after open only */
    char path[AUXTRUNK_LOAD_PATH_MAX]; /* the file that was opened, as located */
} auxtrunk_plugin_t;

/* Resolves `plugin` (step 1 above) into path[n]. search_path NULL means
 * $AUXTRUNK_PLUGIN_PATH. Returns OK, E_ARGUMENT or E_NO_FILE. [any thread] */
int32_t auxtrunk_plugin_locate(const char *plugin, const char *search_path, char *path, size_t n,
                               char *msg, size_t msg_len);

/* Step 2's rule for one file or directory of mode and owner uid (as stat
 * gives them), for a host that checks a file it opened itself (fstat). what
 * names it in the message ("plugin file", "plugin directory"). Returns OK or
 * E_PERMISSIONS. [any thread] */
int32_t auxtrunk_plugin_check_mode(uint32_t mode, uint32_t uid, const char *what, const char *path,
                                   char *msg, size_t msg_len);

/* Steps 1-4: locate, check and dlopen `plugin`, and look up its entry; pl->api
 * stays zero. On failure *pl is empty. [any thread; pl owned by the caller] */
int32_t auxtrunk_plugin_open(auxtrunk_plugin_t *pl, const char *plugin, const char *search_path,
                             char *msg, size_t msg_len);

/* Steps 5-6 on an opened plugin: calls the entry with the host range
 * [abi_min, abi_max] (within [1.0, AUXTRUNK_ABI_VERSION]), checks the table,
 * sets pl->api and pl->space. On failure pl->api and pl->space are zero and
 * the library stays open (the caller unloads). [any thread] */
int32_t auxtrunk_plugin_negotiate(auxtrunk_plugin_t *pl, uint32_t abi_min, uint32_t abi_max,
                                  char *msg, size_t msg_len);

/* open + negotiate over [1.0, AUXTRUNK_ABI_VERSION] with $AUXTRUNK_PLUGIN_PATH;
 * on failure the library is closed and *pl is empty. The usual call. */
int32_t auxtrunk_plugin_load(auxtrunk_plugin_t *pl, const char *plugin, char *msg, size_t msg_len);

/* Closes the library and empties *pl. Safe on an empty struct, twice, and on
 * NULL. Handles created by pl->api.init must be destroyed before. */
void auxtrunk_plugin_unload(auxtrunk_plugin_t *pl);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AUXTRUNK_LOADER_H */

/* ========================================================================= */
/* Implementation                                                            */

#if defined(AUXTRUNK_LOADER_IMPLEMENTATION) && !defined(AUXTRUNK_LOADER_IMPLEMENTED_)
#define AUXTRUNK_LOADER_IMPLEMENTED_

/* POSIX.1-2008 with the X/Open part (realpath). */
#if !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && \
    (!defined(_XOPEN_SOURCE) || _XOPEN_SOURCE < 700)
#error "auxtrunk_loader.h: define _XOPEN_SOURCE 700 (or _GNU_SOURCE) before any #include"
#endif

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- Messages -------------------------------------------------------------- */

/* Formats into msg (if any) and returns status, so a refusal reads
 * `return auxtrunk_load_fail_(msg, n, AUXTRUNK_LOAD_E_..., "...", ...);`. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int32_t
auxtrunk_load_fail_(char *msg, size_t n, int32_t status, const char *fmt, ...)
{
    if (!msg || n == 0)
        return status;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    if (len >= 0 && (size_t)len >= n && n > 4)
        memcpy(msg + n - 4, "...", 4);
    return status;
}

static void auxtrunk_load_version_text_(uint32_t v, char *buf, size_t n)
{
    snprintf(buf, n, "%u.%u", (unsigned)AUXTRUNK_VERSION_MAJOR_OF(v),
             (unsigned)AUXTRUNK_VERSION_MINOR_OF(v));
}

/* --- Step 1: locate ---------------------------------------------------------- */

static int auxtrunk_load_is_dir_(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int32_t auxtrunk_plugin_locate(const char *plugin, const char *search_path, char *path, size_t n,
                               char *msg, size_t msg_len)
{
    if (!plugin || !plugin[0] || !path || n == 0)
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_ARGUMENT,
                                   "no plugin given (a file, a directory or a plugin name)");
    path[0] = '\0';
    int len;
    if (strchr(plugin, '/')) {
        if (auxtrunk_load_is_dir_(plugin)) {
            size_t pl = strlen(plugin);
            len = snprintf(path, n, "%s%s" AUXTRUNK_PLUGIN_FILE, plugin,
                           plugin[pl - 1] == '/' ? "" : "/");
        } else {
            len = snprintf(path, n, "%s", plugin);
        }
        if (len < 0 || (size_t)len >= n)
            return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_ARGUMENT,
                                       "plugin path too long: %s", plugin);
        return AUXTRUNK_LOAD_OK;
    }
    const char *list = search_path ? search_path : getenv(AUXTRUNK_PLUGIN_PATH_ENV);
    if (!list || !list[0])
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_NO_FILE,
                                   "no plugin named %s: " AUXTRUNK_PLUGIN_PATH_ENV " is not set "
                                   "(set it to directories of plugin folders, or give a path "
                                   "with a '/')",
                                   plugin);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ':');
        size_t dl = end ? (size_t)(end - p) : strlen(p);
        if (dl > 0) {
            len = snprintf(path, n, "%.*s/%s/" AUXTRUNK_PLUGIN_FILE, (int)dl, p, plugin);
            struct stat st;
            if (len > 0 && (size_t)len < n && stat(path, &st) == 0)
                return AUXTRUNK_LOAD_OK;
        }
        p += dl + (end ? 1 : 0);
    }
    path[0] = '\0';
    return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_NO_FILE,
                               "no plugin named %s: no %s/" AUXTRUNK_PLUGIN_FILE
                               " in any entry of the search path %s",
                               plugin, plugin, list);
}

/* --- Step 2: permissions ------------------------------------------------------ */

int32_t auxtrunk_plugin_check_mode(uint32_t mode, uint32_t uid, const char *what, const char *path,
                                   char *msg, size_t msg_len)
{
    if (mode & (S_IWGRP | S_IWOTH))
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_PERMISSIONS,
                                   "%s %s is writable by %s (mode %04o); refusing it", what, path,
                                   (mode & S_IWOTH) ? "others" : "its group",
                                   (unsigned)(mode & 07777));
    if (uid != (uint32_t)geteuid() && uid != 0)
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_PERMISSIONS,
                                   "%s %s is owned by uid %u, neither this user (uid %u) nor "
                                   "root; refusing it",
                                   what, path, (unsigned)uid, (unsigned)geteuid());
    return AUXTRUNK_LOAD_OK;
}

/* The directory part of path ("." for a bare name, "/" for a top-level file). */
static void auxtrunk_load_dir_of_(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, n, ".");
    else
        snprintf(dir, n, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

static int32_t auxtrunk_load_check_dir_(const char *dir, char *msg, size_t n)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return auxtrunk_load_fail_(msg, n, AUXTRUNK_LOAD_E_NO_FILE, "plugin directory %s: %s", dir,
                                   strerror(errno));
    return auxtrunk_plugin_check_mode((uint32_t)st.st_mode, (uint32_t)st.st_uid, "plugin directory",
                                      dir, msg, n);
}

/* Checks the file named `given` (as located) and resolves it into real[n];
 * *size is the file's size for the ELF pre-check. */
static int32_t auxtrunk_load_check_file_(const char *given, char *real, size_t n, uint64_t *size,
                                         char *msg, size_t msg_len)
{
    struct stat st;
    if (stat(given, &st) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_NO_FILE,
                                       "no plugin: %s does not exist", given);
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_NOT_LOADABLE,
                                   "plugin %s is not accessible: %s", given, strerror(e));
    }
    if (!S_ISREG(st.st_mode))
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_NOT_LOADABLE,
                                   "plugin %s is not a regular file", given);
    char resolved[PATH_MAX];
    if (!realpath(given, resolved))
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_NOT_LOADABLE,
                                   "plugin %s: cannot resolve its path: %s", given,
                                   strerror(errno));
    int len = snprintf(real, n, "%s", resolved);
    if (len < 0 || (size_t)len >= n)
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_ARGUMENT,
                                   "plugin path too long: %s", resolved);
    int32_t s = auxtrunk_plugin_check_mode((uint32_t)st.st_mode, (uint32_t)st.st_uid, "plugin file",
                                           given, msg, msg_len);
    if (s != AUXTRUNK_LOAD_OK)
        return s;
    char dir[AUXTRUNK_LOAD_PATH_MAX], real_dir[AUXTRUNK_LOAD_PATH_MAX];
    auxtrunk_load_dir_of_(real, real_dir, sizeof real_dir);
    if ((s = auxtrunk_load_check_dir_(real_dir, msg, msg_len)) != AUXTRUNK_LOAD_OK)
        return s;
    /* Where a link led elsewhere, whoever may replace the link could choose
     * the file: its directory is held to the same rule. */
    char given_real_dir[PATH_MAX];
    auxtrunk_load_dir_of_(given, dir, sizeof dir);
    if (realpath(dir, given_real_dir) && strcmp(given_real_dir, real_dir) != 0 &&
        (s = auxtrunk_load_check_dir_(dir, msg, msg_len)) != AUXTRUNK_LOAD_OK)
        return s;
    *size = (uint64_t)st.st_size;
    return AUXTRUNK_LOAD_OK;
}

/* --- Step 3: ELF pre-check ----------------------------------------------------- */

#if defined(__x86_64__)
#define AUXTRUNK_LOAD_ELF_MACHINE_ EM_X86_64
#elif defined(__aarch64__)
#define AUXTRUNK_LOAD_ELF_MACHINE_ EM_AARCH64
#endif

static int32_t auxtrunk_load_check_elf_(const char *path, uint64_t size, char *msg, size_t n)
{
    const int32_t bad = AUXTRUNK_LOAD_E_NOT_LOADABLE;
    FILE *f = fopen(path, "rb");
    if (!f)
        return auxtrunk_load_fail_(msg, n, bad, "plugin %s is not loadable: %s", path,
                                   strerror(errno));
    int32_t rc = bad;
    Elf64_Ehdr eh;
    Elf64_Phdr ph;
    const uint16_t one = 1;
    const int host_lsb = *(const unsigned char *)&one == 1;
    if (size < sizeof eh || fread(&eh, sizeof eh, 1, f) != 1 ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        auxtrunk_load_fail_(msg, n, bad, "plugin %s is not loadable: not an ELF file", path);
        goto out;
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != (host_lsb ? ELFDATA2LSB : ELFDATA2MSB)) {
        auxtrunk_load_fail_(msg, n, bad,
                            "plugin %s is not loadable: not a 64-bit ELF of this byte order", path);
        goto out;
    }
    if (eh.e_type != ET_DYN) {
        auxtrunk_load_fail_(msg, n, bad,
                            "plugin %s is not loadable: not a shared object (ELF type %u)", path,
                            (unsigned)eh.e_type);
        goto out;
    }
#if defined(AUXTRUNK_LOAD_ELF_MACHINE_)
    if (eh.e_machine != AUXTRUNK_LOAD_ELF_MACHINE_) {
        auxtrunk_load_fail_(msg, n, bad,
                            "plugin %s is not loadable: built for another architecture (ELF "
                            "machine %u, this host is %u)",
                            path, (unsigned)eh.e_machine, (unsigned)AUXTRUNK_LOAD_ELF_MACHINE_);
        goto out;
    }
#endif
    if (eh.e_phentsize != sizeof ph || eh.e_phoff > size ||
        (size - eh.e_phoff) / sizeof ph < eh.e_phnum) {
        auxtrunk_load_fail_(msg, n, bad,
                            "plugin %s is not loadable: truncated or corrupt (program headers "
                            "lie past the end of its %llu bytes)",
                            path, (unsigned long long)size);
        goto out;
    }
    if (eh.e_shoff && (eh.e_shoff > size || eh.e_shentsize == 0 ||
                       (size - eh.e_shoff) / eh.e_shentsize < eh.e_shnum)) {
        auxtrunk_load_fail_(msg, n, bad,
                            "plugin %s is not loadable: truncated (section headers lie past the "
                            "end of its %llu bytes)",
                            path, (unsigned long long)size);
        goto out;
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        if (fseek(f, (long)(eh.e_phoff + (uint64_t)i * sizeof ph), SEEK_SET) != 0 ||
            fread(&ph, sizeof ph, 1, f) != 1) {
            auxtrunk_load_fail_(msg, n, bad,
                                "plugin %s is not loadable: cannot read its program headers", path);
            goto out;
        }
        if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset) {
            auxtrunk_load_fail_(msg, n, bad,
                                "plugin %s is not loadable: truncated (a segment ends at byte "
                                "%llu, the file has %llu)",
                                path, (unsigned long long)(ph.p_offset + ph.p_filesz),
                                (unsigned long long)size);
            goto out;
        }
    }
    rc = AUXTRUNK_LOAD_OK;
out:
    fclose(f);
    return rc;
}

/* --- Step 4: open ---------------------------------------------------------------- */

int32_t auxtrunk_plugin_open(auxtrunk_plugin_t *pl, const char *plugin, const char *search_path,
                             char *msg, size_t msg_len)
{
    if (msg && msg_len)
        msg[0] = '\0';
    if (!pl)
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_ARGUMENT,
                                   "no auxtrunk_plugin_t to load into");
    memset(pl, 0, sizeof *pl);
    char located[AUXTRUNK_LOAD_PATH_MAX], real[AUXTRUNK_LOAD_PATH_MAX];
    uint64_t size = 0;
    int32_t s = auxtrunk_plugin_locate(plugin, search_path, located, sizeof located, msg, msg_len);
    if (s == AUXTRUNK_LOAD_OK)
        s = auxtrunk_load_check_file_(located, real, sizeof real, &size, msg, msg_len);
    if (s == AUXTRUNK_LOAD_OK)
        s = auxtrunk_load_check_elf_(located, size, msg, msg_len);
    if (s != AUXTRUNK_LOAD_OK)
        return s;

    dlerror();
    void *lib = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_NOT_LOADABLE,
                                   "plugin %s is not loadable: %s", located,
                                   why ? why : "dlopen failed");
    }
    dlerror();
    void *sym = dlsym(lib, AUXTRUNK_ENTRY_SYMBOL);
    if (!sym) {
        dlclose(lib);
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_NO_ENTRY,
                                   "%s is not an auxtrunk plugin: it has no entry symbol %s",
                                   located, AUXTRUNK_ENTRY_SYMBOL);
    }
    pl->lib = lib;
    /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
    memcpy(&pl->entry, &sym, sizeof pl->entry);
    memcpy(pl->path, located, sizeof pl->path);
    return AUXTRUNK_LOAD_OK;
}

/* --- Steps 5 and 6: negotiate and check the table ------------------------------------ */

/* Printable ASCII of 1..AUXTRUNK_LOAD_NAME_MAX characters. */
static int auxtrunk_load_name_ok_(const char *s)
{
    if (!s)
        return 0;
    size_t len = 0;
    for (; len <= AUXTRUNK_LOAD_NAME_MAX && s[len]; len++)
        if ((unsigned char)s[len] < 0x20 || (unsigned char)s[len] > 0x7e)
            return 0;
    return len >= 1 && len <= AUXTRUNK_LOAD_NAME_MAX;
}

static int32_t auxtrunk_load_check_table_(const auxtrunk_api_t *api, uint32_t lo, uint32_t hi,
                                          const char *path, char *msg, size_t n)
{
    const int32_t bad = AUXTRUNK_LOAD_E_BAD_TABLE;
    if (api->struct_size < AUXTRUNK_API_SIZE_1_0 || api->struct_size > sizeof *api)
        return auxtrunk_load_fail_(
            msg, n, bad, "%s: broken plugin: API table struct_size %u outside [%u, %u]", path,
            (unsigned)api->struct_size, AUXTRUNK_API_SIZE_1_0, (unsigned)sizeof *api);
    if (api->abi_version < lo || api->abi_version > hi) {
        char got[24], a[24], b[24];
        auxtrunk_load_version_text_(api->abi_version, got, sizeof got);
        auxtrunk_load_version_text_(lo, a, sizeof a);
        auxtrunk_load_version_text_(hi, b, sizeof b);
        return auxtrunk_load_fail_(msg, n, AUXTRUNK_LOAD_E_ABI,
                                   "%s: incompatible ABI: the plugin accepted but answered "
                                   "version %s, outside this host's range %s..%s",
                                   path, got, a, b);
    }
    uint64_t mem = api->caps & (AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_MEM_CUDA);
    if (mem != AUXTRUNK_CAP_MEM_HOST && mem != AUXTRUNK_CAP_MEM_CUDA)
        return auxtrunk_load_fail_(msg, n, bad,
                                   "%s: broken plugin: caps 0x%llx name %s memory space (exactly "
                                   "one of MEM_HOST, MEM_CUDA is required)",
                                   path, (unsigned long long)api->caps, mem ? "two" : "no");
    const struct {
        const char *name;
        int present;
    } need[] = {
        {"status_string", api->status_string != NULL},
        {"init", api->init != NULL},
        {"destroy", api->destroy != NULL},
        {"forward", api->forward != NULL},
        {"infer", api->infer != NULL},
        {"backward", api->backward != NULL},
        {"memory_usage", api->memory_usage != NULL},
        {"last_error", api->last_error != NULL},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!need[i].present)
            return auxtrunk_load_fail_(msg, n, bad, "%s: broken plugin: API table entry %s is NULL",
                                       path, need[i].name);
    const struct {
        const char *name;
        const char *value;
    } names[] = {{"impl_name", api->impl_name}, {"kernel_version", api->kernel_version}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!auxtrunk_load_name_ok_(names[i].value))
            return auxtrunk_load_fail_(msg, n, bad,
                                       "%s: broken plugin: %s is %s (printable ASCII of 1 to %d "
                                       "characters is required)",
                                       path, names[i].name, names[i].value ? "not a name" : "NULL",
                                       AUXTRUNK_LOAD_NAME_MAX);
    return AUXTRUNK_LOAD_OK;
}

int32_t auxtrunk_plugin_negotiate(auxtrunk_plugin_t *pl, uint32_t abi_min, uint32_t abi_max,
                                  char *msg, size_t msg_len)
{
    if (msg && msg_len)
        msg[0] = '\0';
    if (!pl || !pl->lib || !pl->entry)
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_ARGUMENT,
                                   "negotiate needs an opened plugin");
    memset(&pl->api, 0, sizeof pl->api);
    pl->space = 0;
    char lo[24], hi[24];
    auxtrunk_load_version_text_(abi_min, lo, sizeof lo);
    auxtrunk_load_version_text_(abi_max, hi, sizeof hi);
    if (abi_min < AUXTRUNK_VERSION(1, 0) || abi_min > abi_max || abi_max > AUXTRUNK_ABI_VERSION) {
        char top[24];
        auxtrunk_load_version_text_(AUXTRUNK_ABI_VERSION, top, sizeof top);
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_ARGUMENT,
                                   "host ABI range %s..%s is not inside 1.0..%s (this header)", lo,
                                   hi, top);
    }
    auxtrunk_host_info_t host;
    memset(&host, 0, sizeof host);
    host.struct_size = sizeof host;
    host.abi_min = abi_min;
    host.abi_max = abi_max;
    auxtrunk_api_t api;
    memset(&api, 0, sizeof api);
    api.struct_size = sizeof api;
    int32_t s = pl->entry(&host, &api);
    if (s == AUXTRUNK_E_ABI_VERSION)
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_ABI,
                                   "%s: incompatible ABI: the plugin speaks no version in this "
                                   "host's range %s..%s",
                                   pl->path, lo, hi);
    if (s != AUXTRUNK_OK)
        return auxtrunk_load_fail_(msg, msg_len, AUXTRUNK_LOAD_E_ABI,
                                   "%s: ABI negotiation for host range %s..%s failed: %s (%d)",
                                   pl->path, lo, hi, auxtrunk_status_name(s), (int)s);
    s = auxtrunk_load_check_table_(&api, abi_min, abi_max, pl->path, msg, msg_len);
    if (s != AUXTRUNK_LOAD_OK)
        return s;
    pl->api = api;
    pl->space = api.caps & (AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_MEM_CUDA);
    return AUXTRUNK_LOAD_OK;
}

/* --- Load and unload --------------------------------------------------------------- */

int32_t auxtrunk_plugin_load(auxtrunk_plugin_t *pl, const char *plugin, char *msg, size_t msg_len)
{
    int32_t s = auxtrunk_plugin_open(pl, plugin, NULL, msg, msg_len);
    if (s != AUXTRUNK_LOAD_OK)
        return s;
    s = auxtrunk_plugin_negotiate(pl, AUXTRUNK_VERSION(1, 0), AUXTRUNK_ABI_VERSION, msg, msg_len);
    if (s != AUXTRUNK_LOAD_OK)
        auxtrunk_plugin_unload(pl);
    return s;
}

void auxtrunk_plugin_unload(auxtrunk_plugin_t *pl)
{
    if (!pl)
        return;
    if (pl->lib)
        dlclose(pl->lib);
    memset(pl, 0, sizeof *pl);
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AUXTRUNK_LOADER_IMPLEMENTATION */
