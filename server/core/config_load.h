/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Between the configuration loader's driver (config.c: entry points, cross
 * checks, module instances, objects added at run time) and its loaders per
 * kind of section (config_objects.c). Included by those two units only.
 *
 * Context: main thread while loading; the admin thread for objects added
 * at run time.
 */
#ifndef SLUICE_CORE_CONFIG_LOAD_H
#define SLUICE_CORE_CONFIG_LOAD_H

#include "config_int.h"
#include "ini.h"

enum obj_kind { K_SERVER, K_SERVICE, K_LISTENER, K_MONITOR, K_FILTER, K_N };

/* One load: where messages go, the configuration being built (a new one,
 * or at run time the next generation), the parsed text and its object
 * sections by kind (filled by sl__cfg_classify, freed by the driver). */
struct loader {
    struct sl_cfg_diag *d;
    struct sl_config *cfg;
    struct sl_ini ini;
    const struct sl_ini_section **by_kind[K_N];
    size_t nby_kind[K_N];
};

/* The order kinds are loaded in: a reference always points at an earlier
 * kind (services name servers and filters, listeners services). */
extern const enum obj_kind sl__cfg_kind_order[K_N];

/* [maxscale] (an empty one when absent) into L->cfg->global. -ENOMEM, or
 * 0 with any configuration errors in L->d. */
int sl__cfg_load_global(struct loader *L);
/* Sort the object sections of L->ini by type= into L->by_kind, reporting
 * invalid names and unknown or missing types. 0 or -ENOMEM. */
int sl__cfg_classify(struct loader *L);
/* Load one section of kind k into a new object appended to L->cfg. 0
 * (errors, if any, in L->d) or -ENOMEM. */
int sl__cfg_load_section(struct loader *L, enum obj_kind k,
                         const struct sl_ini_section *s);

#endif
