/*
 * loader.c — dlopen, entry lookup, ABI negotiation and table checks for one
 * libauxtrunk.so (see loader.h), and where plugins are looked for.
 *
 * A refused plugin leaves nothing behind: the library is closed before the
 * refusal returns.
 */
#define _GNU_SOURCE /* dlerror, realpath and readlink are POSIX; keep glibc's full view */
#include "loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef AUXTRUNK_HOST_BUILD_PLUGINS_REL
#define AUXTRUNK_HOST_BUILD_PLUGINS_REL "../plugins"
#endif
#ifndef AUXTRUNK_HOST_INSTALL_PLUGINS_REL
#define AUXTRUNK_HOST_INSTALL_PLUGINS_REL "../lib/auxtrunk/plugins"
#endif

const char *ath_load_status_name(ath_load_status_t s)
{
    switch (s) {
    case ATH_LOAD_OK: return "ok";
    case ATH_LOAD_NO_FILE: return "no-file";
    case ATH_LOAD_NOT_LOADABLE: return "not-loadable";
    case ATH_LOAD_NO_ENTRY: return "no-entry";
    case ATH_LOAD_ABI: return "incompatible-abi";
    case ATH_LOAD_BAD_TABLE: return "broken-table";
    case ATH_LOAD_INIT: return "init-failed";
    }
    return "unknown";
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

void ath_plugin_file(const char *dir_or_file, char *path, size_t n)
{
    if (is_dir(dir_or_file)) {
        size_t len = strlen(dir_or_file);
        const char *sep = (len > 0 && dir_or_file[len - 1] == '/') ? "" : "/";
        snprintf(path, n, "%s%s%s", dir_or_file, sep, ATH_PLUGIN_FILE);
    } else if (strchr(dir_or_file, '/') == NULL) {
        /* dlopen would search the library path for a bare name. */
        snprintf(path, n, "./%s", dir_or_file);
    } else {
        snprintf(path, n, "%s", dir_or_file);
    }
}

static void version_text(uint32_t v, char *buf, size_t n)
{
    snprintf(buf, n, "%u.%u", (unsigned)AUXTRUNK_VERSION_MAJOR_OF(v),
             (unsigned)AUXTRUNK_VERSION_MINOR_OF(v));
}

/* The plugin's own text for a status, guarded against a NULL answer. */
static const char *plugin_status_text(const auxtrunk_api_t *api, int32_t s)
{
    const char *t = api->status_string ? api->status_string(s) : NULL;
    return t ? t : "(no message)";
}

/* ------------------------------------------------------------------------- */
/* ELF pre-check                                                             */
/*
 * dlopen maps a file's segments as they are described; a truncated file then
 * faults (SIGBUS) on first touch instead of failing. So before dlopen the
 * headers are read and every segment checked to lie inside the file, and the
 * class, byte order, type and architecture to match this process: each with
 * its own message. (The file can still change between this check and dlopen;
 * loading from a private copy closes that window.)
 */

#if defined(__x86_64__)
#define ATH_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define ATH_ELF_MACHINE EM_AARCH64
#endif

static ath_load_status_t check_elf(const char *path, uint64_t size, ath_err_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ath_errf(err, "plugin %s is not loadable: %s", path, strerror(errno));
        return ATH_LOAD_NOT_LOADABLE;
    }
    ath_load_status_t rc = ATH_LOAD_NOT_LOADABLE;
    Elf64_Ehdr eh;
    Elf64_Phdr ph;
    const uint16_t one = 1;
    const int host_lsb = *(const unsigned char *)&one == 1;
    if (size < sizeof eh || fread(&eh, sizeof eh, 1, f) != 1 ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        ath_errf(err, "plugin %s is not loadable: not an ELF file", path);
        goto out;
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != (host_lsb ? ELFDATA2LSB : ELFDATA2MSB)) {
        ath_errf(err, "plugin %s is not loadable: not a 64-bit ELF of this byte order", path);
        goto out;
    }
    if (eh.e_type != ET_DYN) {
        ath_errf(err, "plugin %s is not loadable: not a shared object (ELF type %u)", path,
                 (unsigned)eh.e_type);
        goto out;
    }
#if defined(ATH_ELF_MACHINE)
    if (eh.e_machine != ATH_ELF_MACHINE) {
        ath_errf(err,
                 "plugin %s is not loadable: built for another architecture (ELF machine %u, "
                 "this host is %u)",
                 path, (unsigned)eh.e_machine, (unsigned)ATH_ELF_MACHINE);
        goto out;
    }
#endif
    if (eh.e_phentsize != sizeof ph || eh.e_phoff > size ||
        (size - eh.e_phoff) / sizeof ph < eh.e_phnum) {
        ath_errf(err, "plugin %s is not loadable: truncated or corrupt (program headers lie "
                      "past the end of its %llu bytes)",
                 path, (unsigned long long)size);
        goto out;
    }
    if (eh.e_shoff && (eh.e_shoff > size || eh.e_shentsize == 0 ||
                       (size - eh.e_shoff) / eh.e_shentsize < eh.e_shnum)) {
        ath_errf(err, "plugin %s is not loadable: truncated (section headers lie past the end "
                      "of its %llu bytes)",
                 path, (unsigned long long)size);
        goto out;
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        if (fseek(f, (long)(eh.e_phoff + (uint64_t)i * sizeof ph), SEEK_SET) != 0 ||
            fread(&ph, sizeof ph, 1, f) != 1) {
            ath_errf(err, "plugin %s is not loadable: cannot read its program headers", path);
            goto out;
        }
        if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset) {
            ath_errf(err,
                     "plugin %s is not loadable: truncated (a segment ends at byte %llu, the "
                     "file has %llu)",
                     path, (unsigned long long)(ph.p_offset + ph.p_filesz),
                     (unsigned long long)size);
            goto out;
        }
    }
    rc = ATH_LOAD_OK;
out:
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Table checks                                                              */

static ath_load_status_t check_table(const auxtrunk_api_t *api, const char *path,
                                     ath_space_t *space, ath_err_t *err)
{
    char got[32], lo[32], hi[32];
    if (api->struct_size < AUXTRUNK_API_SIZE_1_0 || api->struct_size > sizeof *api) {
        ath_errf(err, "%s: broken plugin: API table struct_size %u outside [%u, %zu]", path,
                 (unsigned)api->struct_size, AUXTRUNK_API_SIZE_1_0, sizeof *api);
        return ATH_LOAD_BAD_TABLE;
    }
    if (AUXTRUNK_VERSION_MAJOR_OF(api->abi_version) != AUXTRUNK_ABI_MAJOR ||
        api->abi_version < ATH_HOST_ABI_MIN || api->abi_version > ATH_HOST_ABI_MAX) {
        version_text(api->abi_version, got, sizeof got);
        version_text(ATH_HOST_ABI_MIN, lo, sizeof lo);
        version_text(ATH_HOST_ABI_MAX, hi, sizeof hi);
        ath_errf(err,
                 "%s: incompatible ABI: the plugin accepted but answered version %s, outside "
                 "this host's range %s..%s",
                 path, got, lo, hi);
        return ATH_LOAD_ABI;
    }
    uint64_t mem = api->caps & (AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_MEM_CUDA);
    if (mem != AUXTRUNK_CAP_MEM_HOST && mem != AUXTRUNK_CAP_MEM_CUDA) {
        ath_errf(err,
                 "%s: broken plugin: caps 0x%llx name %s memory space (exactly one of "
                 "MEM_HOST, MEM_CUDA is required)",
                 path, (unsigned long long)api->caps, mem ? "two" : "no");
        return ATH_LOAD_BAD_TABLE;
    }
    *space = mem == AUXTRUNK_CAP_MEM_HOST ? ATH_SPACE_HOST : ATH_SPACE_CUDA;

    struct {
        const char *name;
        int present;
    } need[] = {
        {"impl_name", api->impl_name != NULL},
        {"kernel_version", api->kernel_version != NULL},
        {"status_string", api->status_string != NULL},
        {"init", api->init != NULL},
        {"destroy", api->destroy != NULL},
        {"forward", api->forward != NULL},
        {"infer", api->infer != NULL},
        {"backward", api->backward != NULL},
        {"memory_usage", api->memory_usage != NULL},
        {"last_error", api->last_error != NULL},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (!need[i].present) {
            ath_errf(err, "%s: broken plugin: API table entry %s is NULL", path, need[i].name);
            return ATH_LOAD_BAD_TABLE;
        }
    }
    return ATH_LOAD_OK;
}

/* ------------------------------------------------------------------------- */
/* Load, init, unload                                                        */

ath_load_status_t ath_plugin_load(const char *dir_or_file, ath_plugin_t *pl, ath_err_t *err)
{
    memset(pl, 0, sizeof *pl);
    char path[ATH_PATH_MAX];
    ath_plugin_file(dir_or_file, path, sizeof path);

    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            ath_errf(err, "no plugin: %s does not exist%s", path,
                     is_dir(dir_or_file) ? "" : " (is the plugin directory right?)");
            return ATH_LOAD_NO_FILE;
        }
        ath_errf(err, "plugin %s is not accessible: %s", path, strerror(e));
        return ATH_LOAD_NOT_LOADABLE;
    }
    if (!S_ISREG(st.st_mode)) {
        ath_errf(err, "plugin %s is not a regular file", path);
        return ATH_LOAD_NOT_LOADABLE;
    }

    ath_load_status_t ls = check_elf(path, (uint64_t)st.st_size, err);
    if (ls != ATH_LOAD_OK)
        return ls;

    dlerror();
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        ath_errf(err, "plugin %s is not loadable: %s", path, why ? why : "dlopen failed");
        return ATH_LOAD_NOT_LOADABLE;
    }

    dlerror();
    void *sym = dlsym(lib, AUXTRUNK_ENTRY_SYMBOL);
    if (!sym) {
        ath_errf(err, "%s is not an auxtrunk plugin: it has no entry symbol %s", path,
                 AUXTRUNK_ENTRY_SYMBOL);
        dlclose(lib);
        return ATH_LOAD_NO_ENTRY;
    }
    /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
    auxtrunk_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);

    auxtrunk_host_info_t host = {sizeof host, ATH_HOST_ABI_MIN, ATH_HOST_ABI_MAX, 0};
    auxtrunk_api_t api;
    memset(&api, 0, sizeof api);
    api.struct_size = sizeof api;
    int32_t s = entry(&host, &api);
    if (s != AUXTRUNK_OK) {
        char lo[32], hi[32];
        version_text(ATH_HOST_ABI_MIN, lo, sizeof lo);
        version_text(ATH_HOST_ABI_MAX, hi, sizeof hi);
        if (s == AUXTRUNK_E_ABI_VERSION)
            ath_errf(err,
                     "%s: incompatible ABI: the plugin speaks no version in this host's range "
                     "%s..%s (%s)",
                     path, lo, hi, plugin_status_text(&api, s));
        else
            ath_errf(err, "%s: ABI negotiation failed with status %d for host range %s..%s",
                     path, (int)s, lo, hi);
        dlclose(lib);
        return ATH_LOAD_ABI;
    }

    ath_space_t space;
    ls = check_table(&api, path, &space, err);
    if (ls != ATH_LOAD_OK) {
        dlclose(lib);
        return ls;
    }

    pl->lib = lib;
    pl->api = api;
    pl->space = space;
    snprintf(pl->path, sizeof pl->path, "%s", path);
    return ATH_LOAD_OK;
}

ath_load_status_t ath_plugin_init(ath_plugin_t *pl, const auxtrunk_config_t *config,
                                  ath_err_t *err)
{
    auxtrunk_handle_t *h = NULL;
    int32_t s = pl->api.init(config, &h);
    if (s != AUXTRUNK_OK || h == NULL) {
        ath_errf(err,
                 "%s: init(ENC=%d H1=%d H2=%d AUX=%d max_batch=%d device=%d) failed: %s "
                 "(status %d)",
                 pl->path, config->enc, config->h1, config->h2, config->aux, config->max_batch,
                 config->device,
                 s == AUXTRUNK_OK ? "it returned OK but no handle" : plugin_status_text(&pl->api, s),
                 (int)s);
        return ATH_LOAD_INIT;
    }
    pl->handle = h;
    return ATH_LOAD_OK;
}

void ath_plugin_unload(ath_plugin_t *pl)
{
    if (pl->handle)
        (void)pl->api.destroy(pl->handle);
    if (pl->lib)
        dlclose(pl->lib);
    memset(pl, 0, sizeof *pl);
}

const char *ath_plugin_name(const ath_plugin_t *pl)
{
    return pl->api.impl_name ? pl->api.impl_name : "(none)";
}

int ath_plugin_failf(const ath_plugin_t *pl, int32_t status, ath_err_t *err, const char *what)
{
    const char *detail = pl->handle ? pl->api.last_error(pl->handle) : "";
    return ath_errf(err, "%s: %s failed: %s%s%s%s", pl->api.impl_name, what,
                    plugin_status_text(&pl->api, status), detail && detail[0] ? " (" : "",
                    detail && detail[0] ? detail : "", detail && detail[0] ? ")" : "");
}

/* ------------------------------------------------------------------------- */
/* Where plugins live                                                        */

int ath_plugins_root(char *root, size_t n, ath_err_t *err)
{
    char dir[ATH_PATH_MAX];
    if (ath_exe_dir(dir, sizeof dir) != 0)
        return ath_errf(err, "cannot locate the running executable (/proc/self/exe)");
    const char *rel[] = {AUXTRUNK_HOST_BUILD_PLUGINS_REL, AUXTRUNK_HOST_INSTALL_PLUGINS_REL};
    char tried[2][ATH_PATH_MAX];
    for (int i = 0; i < 2; i++) {
        int len = snprintf(tried[i], sizeof tried[i], "%s/%s", dir, rel[i]);
        if (len > 0 && (size_t)len < sizeof tried[i] && is_dir(tried[i])) {
            char real[PATH_MAX];
            snprintf(root, n, "%s", realpath(tried[i], real) ? real : tried[i]);
            return 0;
        }
    }
    return ath_errf(err, "no plugins directory next to the executable (tried %s and %s)",
                    tried[0], tried[1]);
}

int ath_default_plugin_dir(char *dir, size_t n, ath_err_t *err)
{
    const char *env = getenv("AUXTRUNK_PLUGIN_DIR");
    if (env && env[0]) {
        snprintf(dir, n, "%s", env);
        return 0;
    }
    char root[ATH_PATH_MAX];
    if (ath_plugins_root(root, sizeof root, err) != 0)
        return -1;
    int len = snprintf(dir, n, "%s/cpu", root);
    if (len < 0 || (size_t)len >= n)
        return ath_errf(err, "plugin path too long: %s/cpu", root);
    return 0;
}
