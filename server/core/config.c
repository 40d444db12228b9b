/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading the configuration: ini text -> validated objects. The driver:
 *
 *   read file -> sl__ini_parse -> [maxscale] -> classify sections by type=
 *     -> servers -> filters -> services -> listeners -> monitors
 *     -> cross checks -> (create_instances) module instances
 *
 * The loaders per kind of section are in config_objects.c (config_load.h),
 * the core's spec tables in config_spec.c, the diagnostics in
 * config_diag.c, where the text comes from in config_files.c. Each
 * object's parameters are validated against the core's table for its type
 * plus its module's table. Every problem is reported through
 * sl__cfg_error() as "FILE:LINE: ..." naming the section and parameter, and
 * loading goes on so that one run shows every mistake; any error makes the
 * whole load fail (NULL). Here too: the cross checks between objects, the
 * module instances, freeing, and objects added at run time.
 *
 * Context: main thread, before the workers start. The objects are then
 * immutable (apart from their atomics) until sl__config_free at exit.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_files.h"
#include "config_int.h"
#include "config_load.h"
#include "ini.h"
#include "stats.h"
#include "tls.h"

/* ---- loading ---- */

static void
ini_error(void *ctx, int line, const char *msg)
{
    sl__cfg_error(ctx, line, "%s", msg);
}

/* A server may be watched by one monitor only: two would fight over its
 * status bits. */
static void
check_monitored_once(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t a = 0; a < cfg->nmonitors; a++) {
        for (size_t i = 0; i < cfg->monitors[a]->nservers; i++) {
            struct sl_server *srv = cfg->monitors[a]->servers[i];

            for (size_t b = 0; b < a; b++) {
                for (size_t j = 0; j < cfg->monitors[b]->nservers; j++) {
                    if (cfg->monitors[b]->servers[j] != srv) {
                        continue;
                    }
                    sl__cfg_error(L->d, sl__params_line(
                                      cfg->monitors[a]->params, "servers"),
                                  "server '%s' is monitored by both monitor "
                                  "'%s' and monitor '%s'", srv->name,
                                  cfg->monitors[b]->name,
                                  cfg->monitors[a]->name);
                }
            }
        }
    }
}

/* cluster=MONITOR: a service's servers are a copy of the monitor's list
 * (services load before monitors, so this runs after them); runtime.c
 * follow_cluster keeps the copy in step. */
static void
resolve_clusters(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t i = 0; i < cfg->nservices; i++) {
        struct sl_service *svc = cfg->services[i];
        const struct sl_params *p = svc->params;
        const char *name = p ? sl_params_get(p, "cluster") : NULL;
        struct sl_monitor *m;

        if (name == NULL || svc->cluster != NULL || svc->servers != NULL) {
            continue;   /* not cluster=, done before, or servers= too */
        }
        if ((m = sl__find_monitor(cfg, name)) == NULL) {
            sl__cfg_error(L->d, sl__params_line(p, "cluster"), "parameter "
                          "'cluster' of service '%s' refers to unknown "
                          "monitor '%s'", svc->name, name);
            continue;
        }
        svc->servers = calloc(m->nservers ? m->nservers : 1,
                              sizeof(*svc->servers));
        if (svc->servers == NULL) {
            sl__cfg_error(L->d, 0, "out of memory");
            continue;
        }
        if (m->nservers > 0) {
            memcpy(svc->servers, m->servers,
                   m->nservers * sizeof(*svc->servers));
        }
        svc->nservers = m->nservers;
        svc->cluster = m;
    }
}

/* config_sync_cluster names a monitor and comes with a user; the database
 * name is quoted in SQL with backticks (config_sync.c). */
static void
check_config_sync(struct loader *L)
{
    const struct sl_params *p = L->cfg->global.params;
    const char *cluster = p ? sl_params_get(p, "config_sync_cluster") : NULL;
    const char *user = p ? sl_params_get(p, "config_sync_user") : NULL;
    const char *db = p ? sl_params_get(p, "config_sync_db") : NULL;

    if (cluster == NULL || cluster[0] == '\0') {
        return;
    }
    if (sl__find_monitor(L->cfg, cluster) == NULL) {
        sl__cfg_error(L->d, sl__params_line(p, "config_sync_cluster"),
                      "config_sync_cluster: no monitor named '%s'", cluster);
    }
    if (user == NULL || user[0] == '\0') {
        sl__cfg_error(L->d, sl__params_line(p, "config_sync_cluster"),
                      "config_sync_cluster needs config_sync_user");
    }
    for (size_t i = 0; i < 2; i++) {
        static const char *const names[] = {"config_sync_interval",
                                            "config_sync_timeout"};

        if (sl_params_duration_ms(p, names[i]) == 0) {
            sl__cfg_error(L->d, sl__params_line(p, names[i]),
                          "invalid value '%s' for parameter '%s' in section "
                          "'maxscale' (must be more than 0)",
                          sl_params_get(p, names[i]), names[i]);
        }
    }
    if (db == NULL || db[0] == '\0' || strchr(db, '`') != NULL ||
        strlen(db) > 64) {
        sl__cfg_error(L->d, sl__params_line(p, "config_sync_db"),
                      "invalid value '%s' for parameter 'config_sync_db' in "
                      "section 'maxscale' (a database name, at most 64 "
                      "characters, no backtick)", db ? db : "");
    }
}

static int
build(struct loader *L)
{
    if (sl__cfg_load_global(L) < 0 || sl__cfg_classify(L) < 0) {
        return -ENOMEM;
    }
    for (size_t o = 0; o < K_N; o++) {
        enum obj_kind k = sl__cfg_kind_order[o];

        for (size_t i = 0; i < L->nby_kind[k]; i++) {
            if (sl__cfg_load_section(L, k, L->by_kind[k][i]) < 0) {
                return -ENOMEM;
            }
        }
    }
    check_monitored_once(L);
    resolve_clusters(L);
    check_config_sync(L);
    return 0;
}

/* ---- module instances ---- */

static int
section_line(struct loader *L, const char *name)
{
    const struct sl_ini_section *s = sl__ini_section(&L->ini, name);

    return s != NULL ? s->line : 0;
}

static void
create_service_instances(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t i = 0; i < cfg->nservices; i++) {
        struct sl_service *svc = cfg->services[i];

        sl__service_hold_links(svc, true);   /* see sl__obj_ref */
        svc->router_instance = svc->router->create_instance(svc,
                                                            svc->params);
        if (svc->router_instance == NULL) {
            sl__cfg_error(L->d, section_line(L, svc->name), "router '%s' "
                          "refused to create an instance for service '%s'",
                          svc->router_module->info->name, svc->name);
        } else if ((svc->router_ref = sl__inst_ref_new(
                        svc->router_instance, svc->router, NULL)) == NULL) {
            sl__cfg_error(L->d, 0, "out of memory");
        }
    }
    for (size_t i = 0; i < cfg->nlisteners; i++) {
        struct sl_listener *l = cfg->listeners[i];
        struct sl_service *svc = l->service;

        sl__listener_hold_links(l, true);
        if (svc->protocol) {
            if (svc->protocol != l->protocol) {
                sl__cfg_error(L->d, section_line(L, l->name), "listener "
                              "'%s' uses another protocol than the other "
                              "listeners of service '%s'", l->name,
                              svc->name);
            }
            continue;
        }
        svc->protocol = l->protocol;
        if (l->protocol->service_data_create == NULL) {
            continue;
        }
        svc->protocol_data = l->protocol->service_data_create(svc);
        if (svc->protocol_data == NULL) {
            svc->protocol = NULL;
            sl__cfg_error(L->d, section_line(L, l->name), "protocol '%s' "
                          "could not set up service '%s' for listener '%s'",
                          l->protocol_module->info->name, svc->name,
                          l->name);
        }
    }
}

static void
create_instances(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t i = 0; i < cfg->nfilters; i++) {
        struct sl_filter_def *f = cfg->filters[i];

        f->instance = f->ops->create_instance(f->name, f->params);
        if (f->instance == NULL) {
            sl__cfg_error(L->d, section_line(L, f->name), "filter module "
                          "'%s' refused to create filter '%s'",
                          f->module->info->name, f->name);
        } else if ((f->ref = sl__inst_ref_new(f->instance, NULL,
                                              f->ops)) == NULL) {
            sl__cfg_error(L->d, 0, "out of memory");
        }
    }
    create_service_instances(L);
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        struct sl_monitor *m = cfg->monitors[i];

        m->instance = m->ops->create_instance(m, m->params);
        if (m->instance == NULL) {
            sl__cfg_error(L->d, section_line(L, m->name), "monitor module "
                          "'%s' refused to create monitor '%s'",
                          m->module->info->name, m->name);
        }
    }
}

/*
 * --config-check: what a module checks only when it creates an instance
 * (a filter's or a monitor's rules across its parameters, the files a
 * monitor runs) is checked too, by creating each instance and destroying
 * it at once. Neither starts anything: a monitor's thread and a service's
 * account loader start only with the daemon. A filter that logs to a file
 * opens it (as at start-up).
 */
static void
check_instances(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t i = 0; i < cfg->nfilters; i++) {
        struct sl_filter_def *f = cfg->filters[i];
        void *inst = f->ops->create_instance(f->name, f->params);

        if (inst == NULL) {
            sl__cfg_error(L->d, section_line(L, f->name), "filter module "
                          "'%s' refused to create filter '%s'",
                          f->module->info->name, f->name);
        } else if (f->ops->destroy_instance != NULL) {
            f->ops->destroy_instance(inst);
        }
    }
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        struct sl_monitor *m = cfg->monitors[i];
        void *inst = m->ops->create_instance(m, m->params);

        if (inst == NULL) {
            sl__cfg_error(L->d, section_line(L, m->name), "monitor module "
                          "'%s' refused to create monitor '%s'",
                          m->module->info->name, m->name);
        } else if (m->ops->destroy_instance != NULL) {
            m->ops->destroy_instance(inst);
        }
    }
}

/* ---- entry points ---- */

void
sl__config_free(struct sl_config *cfg)
{
    if (cfg == NULL) {
        return;
    }
    sl__config_free_objects(cfg);   /* generation.c */
    free(cfg->monitors);
    free(cfg->listeners);
    free(cfg->services);
    free(cfg->filters);
    free(cfg->servers);
    sl__params_free(cfg->global.params);
    free(cfg);
}

static const struct sl_config *loading_cfg;

struct sl_config *
sl__config_load_text(const char *text, size_t len, bool create_instances_,
                     struct sl_cfg_diag *d)
{
    struct loader L = {.d = d};
    int rc;

    L.cfg = calloc(1, sizeof(*L.cfg));
    if (L.cfg == NULL) {
        sl__cfg_error(d, 0, "out of memory");
        return NULL;
    }
    rc = sl__ini_parse(text, len, &L.ini, ini_error, d);
    if (rc >= 0) {
        sl__config_expand(&L.ini, d);   /* config_files.c */
    }
    if (rc < 0 || build(&L) < 0) {
        sl__cfg_error(d, 0, "out of memory");
    }
    if (d->errors == 0 && create_instances_) {
        /* Threads create_instances starts (a service's account loader)
         * may read it until sl__config_set_initial publishes the
         * configuration, which clears it. */
        __atomic_store_n(&loading_cfg, L.cfg, __ATOMIC_RELEASE);
        create_instances(&L);
        if (d->errors > 0) {
            __atomic_store_n(&loading_cfg, NULL, __ATOMIC_RELEASE);
        }
    } else if (d->errors == 0) {
        __atomic_store_n(&loading_cfg, L.cfg, __ATOMIC_RELEASE);
        check_instances(&L);
        __atomic_store_n(&loading_cfg, NULL, __ATOMIC_RELEASE);
    }
    for (int k = 0; k < K_N; k++) {
        free(L.by_kind[k]);
    }
    sl__ini_free(&L.ini);
    if (d->errors > 0) {
        sl__config_free(L.cfg);
        return NULL;
    }
    return L.cfg;
}

static int
text_lines(const char *t, size_t len)
{
    int n = 0;

    for (size_t i = 0; i < len; i++) {
        n += t[i] == '\n';
    }
    return n;
}

struct sl_config *
sl__config_load_diag(const char *path, bool create_instances_,
                     struct sl_cfg_diag *d)
{
    struct sl_config *cfg;
    size_t len, before;
    char *text;

    d->file = path;
    text = sl__config_read_all(path, &len, d);   /* config_files.c */
    if (text == NULL) {
        return NULL;
    }
    before = len;
    text = sl__persist_merge(text, &len);   /* runtime.c */
    if (len > before) {
        /* lines past the files come from persistdir */
        if (d->nsrcs == 0) {
            sl__cfg_add_src(d, 1, path);
        }
        sl__cfg_add_src(d, text_lines(text, before) + 1 +
                        (before > 0 && text[before - 1] != '\n'),
                        "persistdir");
    }
    cfg = sl__config_load_text(text, len, create_instances_, d);
    free(text);
    return cfg;
}

struct sl_config *
sl__config_load(const char *path, bool create_instances_)
{
    struct sl_cfg_diag d = {0};
    struct sl_config *cfg = sl__config_load_diag(path, create_instances_, &d);

    sl__cfg_diag_free(&d);
    return cfg;
}

/* ---- objects added at run time (admin API) ---- */

struct counts {
    size_t n[K_N];
};

static void
take_counts(const struct sl_config *cfg, struct counts *c)
{
    c->n[K_SERVER] = cfg->nservers;
    c->n[K_SERVICE] = cfg->nservices;
    c->n[K_LISTENER] = cfg->nlisteners;
    c->n[K_MONITOR] = cfg->nmonitors;
    c->n[K_FILTER] = cfg->nfilters;
}

/* arr + n, or NULL for an array not allocated yet (NULL + 0 is undefined
 * behaviour in C; the REST fuzz target found it on an empty config). */
#define TAIL_OF(arr, n) ((arr) != NULL ? (arr) + (n) : NULL)

/* Free the objects past the counts in c (they were never published). */
static void
drop_new(struct sl_config *cfg, const struct counts *c)
{
    struct sl_config tail = {0};

    tail.servers = TAIL_OF(cfg->servers, c->n[K_SERVER]);
    tail.nservers = cfg->nservers - c->n[K_SERVER];
    tail.services = TAIL_OF(cfg->services, c->n[K_SERVICE]);
    tail.nservices = cfg->nservices - c->n[K_SERVICE];
    tail.listeners = TAIL_OF(cfg->listeners, c->n[K_LISTENER]);
    tail.nlisteners = cfg->nlisteners - c->n[K_LISTENER];
    tail.monitors = TAIL_OF(cfg->monitors, c->n[K_MONITOR]);
    tail.nmonitors = cfg->nmonitors - c->n[K_MONITOR];
    tail.filters = TAIL_OF(cfg->filters, c->n[K_FILTER]);
    tail.nfilters = cfg->nfilters - c->n[K_FILTER];
    sl__config_free_objects(&tail);
    cfg->nservers = c->n[K_SERVER];
    cfg->nservices = c->n[K_SERVICE];
    cfg->nlisteners = c->n[K_LISTENER];
    cfg->nmonitors = c->n[K_MONITOR];
    cfg->nfilters = c->n[K_FILTER];
}

static bool
name_taken(const struct sl_config *cfg, const char *name)
{
    return sl__find_listener(cfg, name) || sl__find_monitor(cfg, name) ||
           sl__find_server(cfg, name) || sl__find_service(cfg, name) ||
           sl__find_filter(cfg, name);
}

/* Instances for the objects past the counts in c. */
static void
create_new_instances(struct loader *L, const struct counts *c)
{
    struct sl_config *cfg = L->cfg;
    struct sl_config tail = {.global = cfg->global};

    tail.filters = TAIL_OF(cfg->filters, c->n[K_FILTER]);
    tail.nfilters = cfg->nfilters - c->n[K_FILTER];
    tail.services = TAIL_OF(cfg->services, c->n[K_SERVICE]);
    tail.nservices = cfg->nservices - c->n[K_SERVICE];
    tail.listeners = TAIL_OF(cfg->listeners, c->n[K_LISTENER]);
    tail.nlisteners = cfg->nlisteners - c->n[K_LISTENER];
    tail.monitors = TAIL_OF(cfg->monitors, c->n[K_MONITOR]);
    tail.nmonitors = cfg->nmonitors - c->n[K_MONITOR];
    L->cfg = &tail;
    create_instances(L);
    L->cfg = cfg;
}

int
sl__config_add_text(struct sl_config *cfg, const char *text, size_t len,
                    struct sl_cfg_diag *d)
{
    struct loader L = {.d = d, .cfg = cfg};
    struct counts before;
    int rc;

    take_counts(cfg, &before);
    rc = sl__ini_parse(text, len, &L.ini, ini_error, d);
    for (size_t i = 0; rc == 0 && i < L.ini.nsections; i++) {
        const struct sl_ini_section *s = &L.ini.sections[i];

        if (strcasecmp(s->name, "maxscale") == 0 || name_taken(cfg, s->name)) {
            sl__cfg_error(d, s->line, "an object named '%s' already exists",
                          s->name);
        }
    }
    if (rc < 0 || d->errors > 0 || sl__cfg_classify(&L) < 0) {
        goto out;
    }
    for (int o = 0; o < K_N; o++) {
        enum obj_kind k = sl__cfg_kind_order[o];

        for (size_t i = 0; i < L.nby_kind[k]; i++) {
            if (sl__cfg_load_section(&L, k, L.by_kind[k][i]) < 0) {
                sl__cfg_error(d, 0, "out of memory");
            }
        }
    }
    check_monitored_once(&L);
    resolve_clusters(&L);
    if (d->errors == 0) {
        create_new_instances(&L, &before);
    }
out:
    if (d->errors > 0) {
        drop_new(cfg, &before);
    }
    for (int k = 0; k < K_N; k++) {
        free(L.by_kind[k]);
    }
    sl__ini_free(&L.ini);
    return d->errors > 0 ? -EINVAL : 0;
}

/* The configuration whose instances are being created (main thread, during
 * sl__config_load_text, until sl__config_set_initial publishes it):
 * modules that read global parameters in their create_instance or
 * service_data_create, and the threads those start (a service's account
 * loader), see it before sl__config is published. Atomic: those threads
 * read it while the main thread changes it (TSan found the race). */
const struct sl_params *
sl_global_params(void)
{
    const struct sl_config *cfg = sl__config_current();

    if (cfg != NULL) {
        return cfg->global.params;
    }
    cfg = __atomic_load_n(&loading_cfg, __ATOMIC_ACQUIRE);
    return cfg != NULL ? cfg->global.params : NULL;
}

void
sl__config_loading_done(void)
{
    __atomic_store_n(&loading_cfg, NULL, __ATOMIC_RELEASE);
}
