/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The module loader.
 *
 * A module is <module_dir>/lib<name>.so exporting SL_MODULE_ENTRY_NAME.
 * Lookup of a configured name, first match wins:
 *   1. an already loaded module whose name or alias matches (any case);
 *   2. the core's table of MaxScale names (MariaDBClient -> mariadbprotocol);
 *   3. the file lib<lowercased name>.so;
 *   4. if that file does not exist, every lib*.so of module_dir whose
 *      descriptor lists the name among its aliases.
 * A module is loaded once (RTLD_NOW | RTLD_LOCAL), checked (see
 * sl__module_check), then its process_init runs. Refusals name the file.
 *
 * Context: main thread only (configuration time); the table is read-only
 * afterwards and lives until sl__modules_unload at exit.
 */
#define SL_LOG_TAG "modules"

#include <ctype.h>
#include <stdatomic.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/monitor.h>
#include <sluice/protocol.h>
#include <sluice/router.h>

#include "module_int.h"

#define MAX_MODULES 64

static struct sl_loaded_module *modules[MAX_MODULES];
/* Appended to by the loading thread (start-up, REST); read by workers
 * (their module hooks): the count is stored with release after the slot. */
static _Atomic size_t nmodules;

/* MaxScale's module names that map to a differently named Sluice module. */
static const struct {
    const char *alias;
    const char *name;
} builtin_aliases[] = {
    {"mariadbclient", "mariadbprotocol"},
    {"mysqlclient", "mariadbprotocol"},
    {"mariadb", "mariadbprotocol"},
    {"mariadbbackend", "mariadbprotocol"},
    {"mysqlbackend", "mariadbprotocol"},
    {"mysqlmon", "mariadbmon"},
};

const char *
sl__module_type_name(enum sl_module_type type)
{
    switch (type) {
    case SL_MODULE_PROTOCOL:
        return "protocol";
    case SL_MODULE_ROUTER:
        return "router";
    case SL_MODULE_FILTER:
        return "filter";
    case SL_MODULE_MONITOR:
        return "monitor";
    case SL_MODULE_AUTHENTICATOR:
        return "authenticator";
    }
    return "unknown";
}

size_t
sl__module_count(void)
{
    return atomic_load_explicit(&nmodules, memory_order_acquire);
}

const struct sl_loaded_module *
sl__module_at(size_t i)
{
    return i < sl__module_count() ? modules[i] : NULL;
}

/* Smallest ops size of ABI 1.0 for the type. */
static size_t
min_ops_size(enum sl_module_type type)
{
    switch (type) {
    case SL_MODULE_PROTOCOL:   /* 2.4 appended backend_park/_reuse */
        return offsetof(struct sl_protocol_ops, backend_park);
    case SL_MODULE_ROUTER:
        return sizeof(struct sl_router_ops);
    case SL_MODULE_FILTER:
        return sizeof(struct sl_filter_ops);
    case SL_MODULE_MONITOR:
        return sizeof(struct sl_monitor_ops);
    case SL_MODULE_AUTHENTICATOR:
        return sizeof(size_t);
    }
    return SIZE_MAX;
}

/* The create_instance callback the core will call unconditionally. */
static bool
has_create(const struct sl_module *m)
{
    switch (m->type) {
    case SL_MODULE_ROUTER:
        return ((const struct sl_router_ops *)m->ops)->create_instance;
    case SL_MODULE_FILTER:
        return ((const struct sl_filter_ops *)m->ops)->create_instance;
    case SL_MODULE_MONITOR:
        return ((const struct sl_monitor_ops *)m->ops)->create_instance;
    default:
        return true;
    }
}

const char *
sl__module_check(const struct sl_module *m, enum sl_module_type type)
{
    if (m == NULL) {
        return "the entry point returned no descriptor";
    }
    if (m->magic != SL_MODULE_MAGIC) {
        return "not a Sluice module (wrong magic number)";
    }
    if (m->abi_major != SL_MODULE_ABI_MAJOR) {
        return "built for another major version of the module ABI";
    }
    if (m->abi_minor > SL_MODULE_ABI_MINOR) {
        return "built for a newer minor version of the module ABI";
    }
    if (m->signature != SL_MODULE_SIGNATURE) {
        return "built against different headers (build signature mismatch)";
    }
    if (m->type != type) {
        return "not a module of the expected type";
    }
    if (m->name == NULL || m->name[0] == '\0') {
        return "the descriptor has no name";
    }
    if (m->ops == NULL) {
        return "the descriptor has no operations table";
    }
    if (*(const size_t *)m->ops < min_ops_size(type)) {
        return "its operations table is too small for this ABI";
    }
    if (!has_create(m)) {
        return "its operations table has no create_instance";
    }
    return NULL;
}

static bool
name_matches(const struct sl_module *m, const char *name)
{
    if (strcasecmp(m->name, name) == 0) {
        return true;
    }
    for (size_t i = 0; m->aliases && m->aliases[i]; i++) {
        if (strcasecmp(m->aliases[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static bool
valid_module_name(const char *name)
{
    if (name[0] == '\0' || strlen(name) > 64) {
        return false;
    }
    for (const char *c = name; *c; c++) {
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-') {
            return false;
        }
    }
    return true;
}

/*
 * dlopen path and check its descriptor. On success *handle is open and the
 * descriptor is returned; otherwise NULL with err[] filled.
 */
static const struct sl_module *
open_module(const char *path, enum sl_module_type type, void **handle,
            char *err, size_t errlen)
{
    const struct sl_module *(*entry)(void);
    const struct sl_module *m;
    const char *why;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

    if (h == NULL) {
        snprintf(err, errlen, "cannot load '%s': %s", path, dlerror());
        return NULL;
    }
    *(void **)&entry = dlsym(h, SL_MODULE_ENTRY_NAME);
    if (entry == NULL) {
        snprintf(err, errlen, "'%s' does not export %s", path,
                 SL_MODULE_ENTRY_NAME);
        dlclose(h);
        return NULL;
    }
    m = entry();
    why = sl__module_check(m, type);
    if (why) {
        snprintf(err, errlen, "refusing '%s': %s", path, why);
        dlclose(h);
        return NULL;
    }
    *handle = h;
    return m;
}

static const struct sl_loaded_module *
cached(const char *name, enum sl_module_type type)
{
    for (size_t i = 0; i < nmodules; i++) {
        if (modules[i]->info->type == type &&
            name_matches(modules[i]->info, name)) {
            return modules[i];
        }
    }
    return NULL;
}

static const struct sl_loaded_module *
register_module(const struct sl_module *m, void *handle, const char *path,
                char *err, size_t errlen)
{
    struct sl_loaded_module *lm;
    int rc;

    if (nmodules == MAX_MODULES || (lm = calloc(1, sizeof(*lm))) == NULL) {
        snprintf(err, errlen, "cannot load '%s': too many modules", path);
        dlclose(handle);
        return NULL;
    }
    if (m->process_init && (rc = m->process_init()) != 0) {
        snprintf(err, errlen, "'%s' failed to initialise: %s", path,
                 strerror(rc < 0 ? -rc : rc));
        free(lm);
        dlclose(handle);
        return NULL;
    }
    lm->info = m;
    lm->handle = handle;
    snprintf(lm->path, sizeof(lm->path), "%s", path);
    modules[nmodules] = lm;
    atomic_store_explicit(&nmodules, nmodules + 1, memory_order_release);
    sl_log_info("loaded %s module '%s' %s from %s",
                sl__module_type_name(m->type), m->name,
                m->version ? m->version : "", path);
    return lm;
}

/* Step 4: look through module_dir for a module declaring the alias. */
static const struct sl_loaded_module *
scan_aliases(const char *dir, const char *name, enum sl_module_type type)
{
    DIR *dp = opendir(dir);
    struct dirent *de;
    const struct sl_loaded_module *found = NULL;
    char path[4096];
    char ignored[512];

    while (dp && found == NULL && (de = readdir(dp)) != NULL) {
        size_t n = strlen(de->d_name);
        const struct sl_module *m;
        void *h;

        if (n < 7 || strncmp(de->d_name, "lib", 3) != 0 ||
            strcmp(de->d_name + n - 3, ".so") != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        m = open_module(path, type, &h, ignored, sizeof(ignored));
        if (m == NULL) {
            continue;
        }
        if (!name_matches(m, name) || cached(m->name, type)) {
            dlclose(h);
            continue;
        }
        found = register_module(m, h, path, ignored, sizeof(ignored));
    }
    if (dp) {
        closedir(dp);
    }
    return found;
}

const struct sl_loaded_module *
sl__module_load_err(const char *dir, const char *name,
                    enum sl_module_type type, char *err, size_t errlen)
{
    const struct sl_loaded_module *lm = cached(name, type);
    const struct sl_module *m;
    char lower[80];
    char path[4096];
    void *h;

    if (lm) {
        return lm;
    }
    if (!valid_module_name(name)) {
        snprintf(err, errlen, "invalid module name (use letters, digits, "
                 "'_' and '-')");
        return NULL;
    }
    for (size_t i = 0; i <= strlen(name); i++) {
        lower[i] = (char)tolower((unsigned char)name[i]);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(builtin_aliases); i++) {
        if (strcmp(lower, builtin_aliases[i].alias) == 0) {
            snprintf(lower, sizeof(lower), "%s", builtin_aliases[i].name);
            if ((lm = cached(lower, type)) != NULL) {
                return lm;
            }
        }
    }
    snprintf(path, sizeof(path), "%s/lib%s.so", dir, lower);
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        lm = scan_aliases(dir, name, type);
        if (lm == NULL) {
            snprintf(err, errlen, "cannot open '%s': %s", path,
                     strerror(ENOENT));
        }
        return lm;
    }
    m = open_module(path, type, &h, err, errlen);
    if (m == NULL) {
        return NULL;
    }
    return register_module(m, h, path, err, errlen);
}

const struct sl_loaded_module *
sl__module_load(const char *module_dir, const char *name,
                enum sl_module_type type)
{
    char err[1024];
    const struct sl_loaded_module *lm =
        sl__module_load_err(module_dir, name, type, err, sizeof(err));

    if (lm == NULL) {
        sl_log_error("cannot load %s module '%s': %s",
                     sl__module_type_name(type), name, err);
    }
    return lm;
}

void
sl__modules_unload(void)
{
    while (nmodules > 0) {
        struct sl_loaded_module *lm = modules[--nmodules];

        if (lm->info->process_finish) {
            lm->info->process_finish();
        }
        dlclose(lm->handle);
        free(lm);
    }
}
