/*
 * elf_dynsym.c — the exported symbols of a shared object, read from its ELF
 * dynamic symbol table (.dynsym) with <elf.h>; no external tool.
 *
 * Exported means what the dynamic linker would let another object bind to:
 * defined (not SHN_UNDEF), binding GLOBAL, WEAK or GNU_UNIQUE, visibility
 * DEFAULT or PROTECTED. The absolute symbols that some linkers emit for the
 * version nodes of a version script (e.g. AUXTRUNK_1, value 0, SHN_ABS) name
 * a version, not code or data, and are not counted. Every offset read from
 * the file is bounds-checked: a malformed file gives an error, not a crash.
 */
#define _POSIX_C_SOURCE 200809L
#include "elf_dynsym.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef STB_GNU_UNIQUE
#define STB_GNU_UNIQUE 10
#endif

typedef struct elf_view {
    const unsigned char *data;
    size_t size;
} elf_view_t;

static int in_file(const elf_view_t *v, uint64_t off, uint64_t len)
{
    return off <= v->size && len <= v->size - off;
}

/* NUL-terminated string at strtab[idx] inside the file, or NULL. */
static const char *elf_string(const elf_view_t *v, const Elf64_Shdr *strtab, uint64_t idx)
{
    if (idx >= strtab->sh_size || !in_file(v, strtab->sh_offset, strtab->sh_size))
        return NULL;
    const char *s = (const char *)v->data + strtab->sh_offset + idx;
    if (!memchr(s, '\0', strtab->sh_size - idx))
        return NULL;
    return s;
}

/* Is name one of the version definitions of the version-definition section? */
static int is_version_node(const elf_view_t *v, const Elf64_Shdr *sh, int shnum, const char *name)
{
    for (int i = 0; i < shnum; i++) {
        if (sh[i].sh_type != SHT_GNU_verdef || sh[i].sh_link >= (Elf64_Word)shnum)
            continue;
        const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
        uint64_t off = sh[i].sh_offset;
        for (uint64_t n = 0; n < sh[i].sh_info; n++) {
            if (!in_file(v, off, sizeof(Elf64_Verdef)))
                return 0;
            Elf64_Verdef vd;
            memcpy(&vd, v->data + off, sizeof vd);
            if (vd.vd_cnt > 0 && in_file(v, off + vd.vd_aux, sizeof(Elf64_Verdaux))) {
                Elf64_Verdaux va;
                memcpy(&va, v->data + off + vd.vd_aux, sizeof va);
                const char *vn = elf_string(v, strtab, va.vda_name);
                if (vn && strcmp(vn, name) == 0)
                    return 1;
            }
            if (vd.vd_next == 0)
                break;
            off += vd.vd_next;
        }
    }
    return 0;
}

static int elf_fail(char *why, size_t n, const char *msg)
{
    snprintf(why, n, "%s", msg);
    return -1;
}

static int read_exports(const elf_view_t *v, cf_elf_sym_t **out, size_t *count, char *why,
                        size_t why_len)
{
    if (v->size < sizeof(Elf64_Ehdr) || memcmp(v->data, ELFMAG, SELFMAG) != 0)
        return elf_fail(why, why_len, "not an ELF file");
    Elf64_Ehdr eh;
    memcpy(&eh, v->data, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64)
        return elf_fail(why, why_len, "not a 64-bit ELF file");
    if (eh.e_type != ET_DYN)
        return elf_fail(why, why_len, "not a shared object (e_type is not ET_DYN)");
    if (eh.e_shoff == 0 || eh.e_shnum == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !in_file(v, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
        return elf_fail(why, why_len, "no readable section header table");
    int shnum = eh.e_shnum;
    Elf64_Shdr *sh = malloc((size_t)shnum * sizeof *sh);
    if (!sh)
        return elf_fail(why, why_len, "out of memory");
    memcpy(sh, v->data + eh.e_shoff, (size_t)shnum * sizeof *sh);

    const Elf64_Shdr *dynsym = NULL;
    for (int i = 0; i < shnum; i++)
        if (sh[i].sh_type == SHT_DYNSYM)
            dynsym = &sh[i];
    if (!dynsym || dynsym->sh_entsize != sizeof(Elf64_Sym) ||
        dynsym->sh_link >= (Elf64_Word)shnum || !in_file(v, dynsym->sh_offset, dynsym->sh_size)) {
        free(sh);
        return elf_fail(why, why_len, "no readable .dynsym section");
    }
    const Elf64_Shdr *strtab = &sh[dynsym->sh_link];
    size_t nsym = dynsym->sh_size / sizeof(Elf64_Sym);
    cf_elf_sym_t *syms = calloc(nsym ? nsym : 1, sizeof *syms);
    if (!syms) {
        free(sh);
        return elf_fail(why, why_len, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 1; i < nsym; i++) { /* entry 0 is the null symbol */
        Elf64_Sym s;
        memcpy(&s, v->data + dynsym->sh_offset + i * sizeof s, sizeof s);
        unsigned bind = ELF64_ST_BIND(s.st_info), type = ELF64_ST_TYPE(s.st_info);
        unsigned vis = ELF64_ST_VISIBILITY(s.st_other);
        if (s.st_shndx == SHN_UNDEF)
            continue;
        if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)
            continue;
        if (vis != STV_DEFAULT && vis != STV_PROTECTED)
            continue;
        const char *name = elf_string(v, strtab, s.st_name);
        if (!name) {
            free(syms);
            free(sh);
            return elf_fail(why, why_len, "a .dynsym name lies outside its string table");
        }
        if (s.st_shndx == SHN_ABS && s.st_value == 0 && is_version_node(v, sh, shnum, name))
            continue;
        snprintf(syms[k].name, sizeof syms[k].name, "%s", name);
        syms[k].type = (unsigned char)type;
        syms[k].bind = (unsigned char)bind;
        k++;
    }
    free(sh);
    *out = syms;
    *count = k;
    return 0;
}

int cf_elf_exports(const char *path, cf_elf_sym_t **out, size_t *count, char *why, size_t why_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "cannot open %s", path);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return elf_fail(why, why_len, "cannot stat the file, or it is empty");
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return elf_fail(why, why_len, "cannot map the file");
    elf_view_t v = {map, (size_t)st.st_size};
    int rc = read_exports(&v, out, count, why, why_len);
    munmap(map, (size_t)st.st_size);
    return rc;
}

const char *cf_elf_type_name(unsigned type)
{
    switch (type) {
    case STT_FUNC:
        return "function";
    case STT_OBJECT:
        return "object";
    case STT_TLS:
        return "tls";
    case STT_GNU_IFUNC:
        return "ifunc";
    case STT_NOTYPE:
        return "notype";
    default:
        return "other";
    }
}

int cf_elf_is_function(unsigned type) { return type == STT_FUNC || type == STT_GNU_IFUNC; }
