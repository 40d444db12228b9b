/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The module loader's internal interface (module.c): loading a module by
 * name or alias, checking a descriptor, and the registry of loaded
 * modules that the configuration loader, the workers' module hooks and
 * the REST API read.
 *
 * Context: loading and unloading on the main thread (configuration time,
 * exit); the registry is read-only in between, so any thread may read it.
 */
#ifndef SLUICE_CORE_MODULE_INT_H
#define SLUICE_CORE_MODULE_INT_H

#include <stddef.h>

#include "internal.h"

/* Load a module of the given type by name or alias from module_dir;
 * NULL with the reason logged (naming the file) on failure. */
const struct sl_loaded_module *sl__module_load(const char *module_dir,
                                               const char *name,
                                               enum sl_module_type type);
/* sl__module_load with the reason written to err[] instead of the log. */
const struct sl_loaded_module *sl__module_load_err(const char *module_dir,
                                                   const char *name,
                                                   enum sl_module_type type,
                                                   char *err, size_t errlen);
void sl__modules_unload(void);
/* Check a descriptor as the loader does: NULL if acceptable, else a static
 * string saying why not. Exposed for unit tests. */
const char *sl__module_check(const struct sl_module *m,
                             enum sl_module_type type);
const char *sl__module_type_name(enum sl_module_type type);
/* Loaded modules, for diagnostics and the admin API. */
size_t sl__module_count(void);
const struct sl_loaded_module *sl__module_at(size_t i);

#endif
