/* elf_dynsym.h — the exported dynamic symbols of a shared object, read from
 * the file itself (see elf_dynsym.c for what counts as exported). */
#ifndef AUXTRUNK_CONFORM_ELF_DYNSYM_H
#define AUXTRUNK_CONFORM_ELF_DYNSYM_H

#include <stddef.h>

typedef struct cf_elf_sym {
    char name[128];
    unsigned char type; /* STT_* */
    unsigned char bind; /* STB_* */
} cf_elf_sym_t;

/* Fills *out (malloc'd, caller frees) with *count exported symbols. Returns
 * 0, or -1 with a reason in why. */
int cf_elf_exports(const char *path, cf_elf_sym_t **out, size_t *count, char *why, size_t why_len);
const char *cf_elf_type_name(unsigned type);
int cf_elf_is_function(unsigned type);

#endif
