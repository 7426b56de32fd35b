/*
 * loader.h — the host's view of a loaded plugin: abi/auxtrunk_loader.h does
 * the finding, checking, opening and negotiating; this adds the plugin's
 * handle, the host's own refusal (init) and where auxtrunk-host looks.
 *
 * ath_plugin_t is the unit a hot swap replaces: the library handle, the
 * negotiated API table (a copy, so nothing points into the library's data),
 * the plugin's handle and the file it came from. Every call into a plugin
 * goes through one of these, never through a saved function pointer.
 *
 * The loader only refuses; it never prints. Each refusal has its own status
 * and a message that names the file and the reason.
 *
 * Not done here: running an untrusted plugin out of process (a crash in the
 * entry or init takes the caller down) — that is the hot-swap layer's job.
 */
#ifndef ATH_LOADER_H
#define ATH_LOADER_H

#include <stdint.h>

#include "auxtrunk.h"
#include "auxtrunk_loader.h"
#include "util.h"

#define ATH_PLUGIN_FILE AUXTRUNK_PLUGIN_FILE
#define ATH_PATH_MAX AUXTRUNK_LOAD_PATH_MAX

/* Why a plugin was refused: the loader's statuses (auxtrunk_loader.h), and
 * init's refusal, which only the host sees. */
typedef enum ath_load_status {
    ATH_LOAD_OK = AUXTRUNK_LOAD_OK,
    ATH_LOAD_NO_FILE = AUXTRUNK_LOAD_E_NO_FILE,           /* no file at the path */
    ATH_LOAD_PERMISSIONS = AUXTRUNK_LOAD_E_PERMISSIONS,   /* file or directory writable by others */
    ATH_LOAD_NOT_LOADABLE = AUXTRUNK_LOAD_E_NOT_LOADABLE, /* not ELF, truncated, dlopen failed */
    ATH_LOAD_NO_ENTRY = AUXTRUNK_LOAD_E_NO_ENTRY,         /* no auxtrunk_plugin_entry */
    ATH_LOAD_ABI = AUXTRUNK_LOAD_E_ABI,                   /* no common ABI version */
    ATH_LOAD_BAD_TABLE = AUXTRUNK_LOAD_E_BAD_TABLE,       /* the API table fails a check */
    ATH_LOAD_INIT = -100,                                 /* init refused the configuration */
} ath_load_status_t;

/* Memory space named by the caps (exactly one is set in an accepted table). */
typedef enum ath_space { ATH_SPACE_HOST = 1, ATH_SPACE_CUDA = 2 } ath_space_t;

typedef struct ath_plugin {
    void *lib;                 /* dlopen handle; NULL when nothing is loaded */
    auxtrunk_api_t api;        /* the negotiated table */
    auxtrunk_handle_t *handle; /* NULL until ath_plugin_init */
    ath_space_t space;         /* from api.caps */
    char path[ATH_PATH_MAX];   /* the file that was opened */
} ath_plugin_t;

/* Short name of a status, e.g. "no-entry" (the loader's, and "init-failed"). */
const char *ath_load_status_name(ath_load_status_t s);

/* Resolves a --plugin-dir argument to the plugin file: a directory means
 * DIR/libauxtrunk.so, anything else is taken as the file itself (a bare name
 * in the current directory, never a search). */
void ath_plugin_file(const char *dir_or_file, char *path, size_t n);

/* Loads dir_or_file (see ath_plugin_file) with auxtrunk_plugin_load's checks
 * over 1.0 .. AUXTRUNK_ABI_VERSION. On OK *pl is loaded (no handle yet); otherwise *pl
 * is left empty. */
ath_load_status_t ath_plugin_load(const char *dir_or_file, ath_plugin_t *pl, ath_err_t *err);

/* Creates the plugin handle for config. On failure the message carries the
 * plugin's status name and its last_error text where there is one. */
ath_load_status_t ath_plugin_init(ath_plugin_t *pl, const auxtrunk_config_t *config,
                                  ath_err_t *err);

/* Destroys the handle (if any) and closes the library; *pl becomes empty.
 * Safe on an empty struct. */
void ath_plugin_unload(ath_plugin_t *pl);

/* "<impl_name> (<kernel_version>)" style text for messages: never NULL. */
const char *ath_plugin_name(const ath_plugin_t *pl);

/* Formats a failed plugin call: "<what>: <STATUS message> (<last_error>)". */
int ath_plugin_failf(const ath_plugin_t *pl, int32_t status, ath_err_t *err, const char *what);

/* The plugins root: build tree <bindir>/../plugins, or the installed
 * <prefix>/lib.../auxtrunk/plugins, whichever exists next to the running
 * executable. Returns 0, or -1 with a message naming what was tried. */
int ath_plugins_root(char *root, size_t n, ath_err_t *err);

/* Where --plugin NAME points: NAME/libauxtrunk.so in the first entry of
 * $AUXTRUNK_PLUGIN_PATH that has it (the loader's search), else
 * <plugins root>/NAME. Returns 0, or -1 with a message. */
int ath_plugin_named(const char *name, char *path, size_t n, ath_err_t *err);

/* The plugin directory used when none is given: $AUXTRUNK_PLUGIN_DIR if set
 * and non-empty, else <plugins root>/cpu. */
int ath_default_plugin_dir(char *dir, size_t n, ath_err_t *err);

#endif
