/*
 * fuzz_elf.c — libFuzzer harness for the ELF pre-check that runs before
 * dlopen (abi/auxtrunk_loader.h, step 3: auxtrunk_load_check_elf_). The
 * loader is a single-header library, so this file holds its implementation
 * and reaches the step directly.
 *
 * Input: the candidate plugin file, as is.
 *
 * Invariants, besides no sanitizer report, crash or hang: the answer is OK
 * or NOT_LOADABLE with a message, and an accepted file is checked again here,
 * independently: ELF magic, 64-bit, this byte order, ET_DYN, this machine,
 * program headers of the right size inside the file, and every segment's
 * file range inside the file (what keeps dlopen from faulting on a
 * truncated plugin).
 */
#define _XOPEN_SOURCE 700
#define AUXTRUNK_LOADER_IMPLEMENTATION
#include "auxtrunk_loader.h"

#include <elf.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"

/* The accepted file's headers, read with nothing but memcpy. */
static void recheck(const uint8_t *f, size_t n)
{
    Elf64_Ehdr eh;
    fz_check(n >= sizeof eh, "accepted a file of %zu bytes, shorter than an ELF header", n);
    memcpy(&eh, f, sizeof eh);
    fz_check(memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0, "accepted a file without ELF magic");
    fz_check(eh.e_ident[EI_CLASS] == ELFCLASS64, "accepted a non-64-bit ELF");
    const uint16_t one = 1;
    const int lsb = *(const unsigned char *)&one == 1;
    fz_check(eh.e_ident[EI_DATA] == (lsb ? ELFDATA2LSB : ELFDATA2MSB),
             "accepted an ELF of the other byte order");
    fz_check(eh.e_type == ET_DYN, "accepted ELF type %u", (unsigned)eh.e_type);
#if defined(__x86_64__)
    fz_check(eh.e_machine == EM_X86_64, "accepted ELF machine %u", (unsigned)eh.e_machine);
#elif defined(__aarch64__)
    fz_check(eh.e_machine == EM_AARCH64, "accepted ELF machine %u", (unsigned)eh.e_machine);
#endif
    fz_check(eh.e_phentsize == sizeof(Elf64_Phdr), "accepted e_phentsize %u",
             (unsigned)eh.e_phentsize);
    fz_check(eh.e_phoff <= n && (n - eh.e_phoff) / sizeof(Elf64_Phdr) >= eh.e_phnum,
             "accepted program headers past the end (phoff %llu, %u entries, %zu bytes)",
             (unsigned long long)eh.e_phoff, (unsigned)eh.e_phnum, n);
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, f + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        fz_check(ph.p_offset <= n && ph.p_filesz <= n - ph.p_offset,
                 "accepted segment %u at [%llu, +%llu) of a %zu-byte file", i,
                 (unsigned long long)ph.p_offset, (unsigned long long)ph.p_filesz, n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_path("libauxtrunk.so");
    fz_write(path, data, size);
    char msg[AUXTRUNK_LOAD_MESSAGE_MAX] = "";
    int32_t st = auxtrunk_load_check_elf_(path, (uint64_t)size, msg, sizeof msg);
    if (st == AUXTRUNK_LOAD_OK) {
        recheck(data, size);
        return 0;
    }
    fz_check(st == AUXTRUNK_LOAD_E_NOT_LOADABLE, "the ELF pre-check returned status %d", (int)st);
    fz_check(msg[0] != '\0', "a refused file gave no message");
    return 0;
}
