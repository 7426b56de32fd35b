/* consumer.c — loads the installed CPU plugin the way a trainer would, with
 * nothing but the installed header, and negotiates ABI 1.0. Exit 0 on
 * success, 1 with a message otherwise. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "auxtrunk.h"

int main(void)
{
    const char *path = PLUGIN_DIR "/cpu/libauxtrunk.so";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "consumer: cannot load %s: %s\n", path, dlerror());
        return 1;
    }
    auxtrunk_entry_fn entry;
    void *sym = dlsym(lib, AUXTRUNK_ENTRY_SYMBOL);
    if (!sym) {
        fprintf(stderr, "consumer: %s has no %s\n", path, AUXTRUNK_ENTRY_SYMBOL);
        return 1;
    }
    memcpy(&entry, &sym, sizeof entry);
    auxtrunk_host_info_t host = {sizeof host, AUXTRUNK_ABI_VERSION, AUXTRUNK_ABI_VERSION, 0};
    auxtrunk_api_t api;
    memset(&api, 0, sizeof api);
    api.struct_size = sizeof api;
    int32_t rc = entry(&host, &api);
    if (rc != AUXTRUNK_OK || api.abi_version != AUXTRUNK_ABI_VERSION || !api.init) {
        fprintf(stderr, "consumer: negotiation failed: status %d\n", (int)rc);
        return 1;
    }
    printf("consumer: %s (%s), ABI %u.%u\n", api.impl_name, api.kernel_version,
           AUXTRUNK_VERSION_MAJOR_OF(api.abi_version), AUXTRUNK_VERSION_MINOR_OF(api.abi_version));
    dlclose(lib);
    return 0;
}
