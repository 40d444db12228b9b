/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loaders per kind of section: [maxscale] into struct sl_global, and
 * each server, filter, service, listener and monitor section into its
 * object (config_load.h). The driver (config.c) classifies the sections
 * by type= through sl__cfg_classify, then calls sl__cfg_load_section for
 * each, kinds in sl__cfg_kind_order, and runs the cross checks and the
 * module instances itself.
 *
 * A loader makes its object and appends it to the configuration being
 * built before looking at the section (an object whose section has errors
 * is freed with the rest when the driver drops the load), validates the
 * section's parameters against the core's table for its kind
 * (config_spec.c) and its module's, and fills the object's fields from
 * the validated values. Every problem goes through sl__cfg_error() naming
 * the section and parameter; a loader returns -ENOMEM only when memory ran
 * out, never for a configuration error.
 *
 * Context: main thread while loading; the admin thread for objects added
 * at run time (sl__config_add_text), on a generation not yet published.
 */
#define SL_LOG_TAG "config"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sluice/log.h>
#include <sluice/server.h>

#include "config_int.h"
#include "config_load.h"
#include "../modules/protocol/mariadb/mdb_accfile.h"
#include "history.h"
#include "ini.h"
#include "init_sql.h"
#include "module_int.h"
#include "proxyproto.h"
#include "tls.h"

static const char *const kind_names[K_N] = {
    "server", "service", "listener", "monitor", "filter",
};

/* Grow *arr (of pointers) by one slot and store v; -ENOMEM on failure. */
static int
push_ptr(void *arrp, size_t *n, void *v)
{
    void ***arr = arrp;
    void **nv = realloc(*arr, (*n + 1) * sizeof(void *));

    if (nv == NULL) {
        return -ENOMEM;
    }
    nv[(*n)++] = v;
    *arr = nv;
    return 0;
}

/*
 * A params set from a section's keys. ssl_check is unused since TLS is
 * supported (tls.c checks the ssl* parameters); kept for the call sites.
 */
static struct sl_params *
section_params(struct loader *L, const struct sl_ini_section *s,
               const char *what, bool ssl_check)
{
    struct sl_params *p = sl__params_new();

    if (p == NULL) {
        sl__cfg_error(L->d, s->line, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < s->nkvs; i++) {
        const struct sl_ini_kv *kv = &s->kvs[i];

        if (sl__params_set(p, kv->name, kv->value, kv->line) < 0) {
            sl__cfg_error(L->d, kv->line, "out of memory");
            sl__params_free(p);
            return NULL;
        }
    }
    return p;
}

/* mod_failed: the object's module did not load, so names that are not
 * core parameters may be the module's: do not call them unknown. */
static int
validate(struct loader *L, struct sl_params *p, enum obj_kind kind,
         const struct sl_loaded_module *mod, bool mod_failed,
         const char *what, int line)
{
    const struct sl_param_spec *tables[2];
    size_t n = 0;
    int errors;

    /* The module's table first: a router that implements a name the core
     * table lists as ignored (max_sescmd_history) wins. */
    if (mod && mod->info->params) {
        tables[n++] = mod->info->params;
    }
    tables[n++] = sl__config_core_specs(kind_names[kind]);
    L->d->skip_unknown = mod_failed;
    errors = sl__params_validate(p, tables, n, L->d, what, line);
    L->d->skip_unknown = false;
    return errors;
}

static bool
copy_checked(struct loader *L, char *dst, size_t len, const char *src,
             const char *param, const char *what, int line)
{
    if (strlen(src) >= len) {
        sl__cfg_error(L->d, line, "value of parameter '%s' in %s is too "
                      "long (at most %zu characters)", param, what, len - 1);
        return false;
    }
    memcpy(dst, src, strlen(src) + 1);
    return true;
}

static const char *
module_dir(struct loader *L)
{
    return L->cfg->global.module_dir;
}

/* Load the module named by param (already known to be set). */
static const struct sl_loaded_module *
load_module(struct loader *L, const struct sl_ini_section *s,
            const char *param, enum sl_module_type type, const char *what)
{
    const struct sl_ini_kv *kv = sl__ini_find(s, param);
    const struct sl_loaded_module *m;
    char err[1024];

    if (kv == NULL) {
        return NULL;
    }
    m = sl__module_load_err(module_dir(L), kv->value, type, err, sizeof(err));
    if (m == NULL) {
        sl__cfg_error(L->d, kv->line, "unknown %s module '%s' in %s: %s",
                      sl__module_type_name(type), kv->value, what, err);
    }
    return m;
}

/* ---- [maxscale] ---- */

static void
resolve_threads(struct loader *L, struct sl_global *g)
{
    const char *v = sl_params_get(g->params, "threads");
    int line = sl__params_line(g->params, "threads");
    uint64_t max = sl_params_count(g->params, "threads_max");
    int64_t n;

    if (max < 1 || max > 1024) {
        sl__cfg_error(L->d, sl__params_line(g->params, "threads_max"),
                      "invalid value '%s' for parameter 'threads_max' in "
                      "section 'maxscale' (expected 1 to 1024)",
                      sl_params_get(g->params, "threads_max"));
        return;
    }
    if (strcasecmp(v, "auto") == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        g->threads = cpus > 0 ? (int)((uint64_t)cpus > max ? max : (uint64_t)
                                      cpus) : 1;
    } else if (sl__param_parse_int(v, &n) == 0 && n >= 1 &&
               (uint64_t)n <= max) {
        g->threads = (int)n;
    } else {
        sl__cfg_error(L->d, line, "invalid value '%s' for parameter "
                      "'threads' in section 'maxscale' (expected 'auto' or "
                      "a number from 1 to threads_max=%llu)", v,
                      (unsigned long long)max);
    }
}

static int
resolve_log_level(const struct sl_params *p)
{
    if (sl_params_bool(p, "log_debug")) {
        return SL_LOG_DEBUG;
    }
    if (sl_params_bool(p, "log_info")) {
        return SL_LOG_INFO;
    }
    if (sl_params_bool(p, "log_notice")) {
        return SL_LOG_NOTICE;
    }
    return sl_params_bool(p, "log_warning") ? SL_LOG_WARN : SL_LOG_ERROR;
}

static void
copy_path(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

/* log_throttling = COUNT, WINDOW, SUPPRESS (MaxScale's form; durations
 * with a unit, or bare milliseconds). */
static void
resolve_log_throttling(struct loader *L, struct sl_global *g)
{
    const char *v = sl_params_get(g->params, "log_throttling");
    char a[64], b[64], c[64], extra[8];
    uint64_t count, window, suppress;

    if (v == NULL) {
        return;
    }
    if (sscanf(v, " %63[^, ] , %63[^, ] , %63[^, ] %7s", a, b, c,
               extra) != 3 || sl__param_parse_count(a, &count) < 0 ||
        count > 1000000 || sl_param_parse_duration(b, false, &window) < 0 ||
        sl_param_parse_duration(c, false, &suppress) < 0) {
        sl__cfg_error(L->d, sl__params_line(g->params, "log_throttling"),
                      "invalid value '%s' for parameter 'log_throttling' in "
                      "section 'maxscale' (expected COUNT, WINDOW, SUPPRESS "
                      "such as 10, 1000ms, 10000ms)", v);
        return;
    }
    g->log_throttle_count = (unsigned)count;
    g->log_throttle_window_ms = window;
    g->log_throttle_suppress_ms = suppress;
}

const char *const sl__http_methods[] = {
    "GET", "PUT", "POST", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT",
    "TRACE", NULL,
};

int
sl__http_methods_parse(const char *list, unsigned *mask)
{
    char buf[256];
    char *rest = buf;
    char *w;

    *mask = 0;
    if (list == NULL || list[0] == '\0') {
        return 0;
    }
    if (strlen(list) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, list);
    while ((w = strsep(&rest, ",")) != NULL) {
        int i = 0;

        while (*w == ' ') {
            w++;
        }
        for (char *e = w + strlen(w); e > w && e[-1] == ' ';) {
            *--e = '\0';
        }
        while (sl__http_methods[i] && strcasecmp(sl__http_methods[i], w)) {
            i++;
        }
        if (sl__http_methods[i] == NULL) {
            return -1;
        }
        *mask |= 1u << i;
    }
    return 0;
}

int
sl__host_list_parse(const char *value, struct sl_pp_net **out, size_t *n,
                    char *err, size_t errlen)
{
    char buf[1024];
    size_t j = 0;

    /* MaxScale's "%" (any address) is the networks parser's "*" */
    for (const char *c = value ? value : ""; *c && j + 1 < sizeof(buf);
         c++) {
        bool alone = *c == '%' && (c == value || strchr(", \t", c[-1])) &&
                     (c[1] == '\0' || strchr(", \t", c[1]));

        if (*c == '%' && !alone) {
            snprintf(err, errlen, "'%%' stands only for any address: give "
                     "addresses or address/prefix networks");
            return -1;
        }
        buf[j++] = alone ? '*' : *c;
    }
    buf[j] = '\0';
    if (value && strlen(value) >= sizeof(buf)) {
        snprintf(err, errlen, "the list is longer than %zu characters",
                 sizeof(buf) - 1);
        return -1;
    }
    return sl__pp_networks_parse(buf, out, n, err, errlen);
}

/* admin_readwrite_hosts, admin_readonly_hosts, admin_audit_exclude_methods:
 * checked here so a bad value names its file and line. */
static void
check_admin_lists(struct loader *L, const struct sl_params *p)
{
    static const char *const lists[] = {"admin_readwrite_hosts",
                                        "admin_readonly_hosts"};
    unsigned mask;

    for (size_t i = 0; i < SL_ARRAY_LEN(lists); i++) {
        struct sl_pp_net *nets = NULL;
        size_t n = 0;
        char err[256];

        if (sl__host_list_parse(sl_params_get(p, lists[i]), &nets, &n, err,
                                sizeof(err)) < 0) {
            sl__cfg_error(L->d, sl__params_line(p, lists[i]),
                          "invalid value for parameter '%s' in section "
                          "'maxscale': %s", lists[i], err);
        }
        free(nets);
    }
    if (sl__http_methods_parse(sl_params_get(p, "admin_audit_exclude_methods"),
                               &mask) < 0) {
        sl__cfg_error(L->d, sl__params_line(p, "admin_audit_exclude_methods"),
                      "invalid value '%s' for parameter "
                      "'admin_audit_exclude_methods' in section 'maxscale' "
                      "(a comma-separated list of GET, PUT, POST, PATCH, "
                      "DELETE, HEAD, OPTIONS, CONNECT, TRACE)",
                      sl_params_get(p, "admin_audit_exclude_methods"));
    }
}

/* retain_last_statements and session_trace: at most SL_HISTORY_MAX (a
 * ring of that many entries per session). */
static uint32_t
history_count(struct loader *L, const struct sl_params *p, const char *name,
              const char *section)
{
    int64_t v = sl_params_int(p, name);

    if (v < 0 || v > SL_HISTORY_MAX) {
        sl__cfg_error(L->d, sl__params_line(p, name),
                      "invalid value '%s' for parameter '%s' in section "
                      "'%s' (expected 0-%d)", sl_params_get(p, name), name,
                      section, SL_HISTORY_MAX);
        return 0;
    }
    return (uint32_t)v;
}

static void
resolve_history(struct loader *L, struct sl_global *g)
{
    g->retain_last_statements = history_count(L, g->params,
                                               "retain_last_statements",
                                               "maxscale");
    g->session_trace = history_count(L, g->params, "session_trace",
                                     "maxscale");
    g->dump_last_statements = sl_params_enum(g->params,
                                             "dump_last_statements");
}

static void
fill_global(struct loader *L, struct sl_global *g)
{
    struct sl_params *p = g->params;
    const char *env = getenv("SLUICE_MODULE_DIR");
    int64_t port = sl_params_int(p, "admin_port");
    const char *local;
    const char *plugindir;
    struct stat pst;
    struct in6_addr a6;

    resolve_threads(L, g);
    resolve_log_throttling(L, g);
    g->event_model = sl_params_enum(p, "event_model") == 1
                         ? SL_EVENT_MODEL_SHARED : SL_EVENT_MODEL_PINNED;
    if (L->d->module_dir) {
        copy_path(g->module_dir, sizeof(g->module_dir), L->d->module_dir);
    } else if (env && env[0]) {
        copy_path(g->module_dir, sizeof(g->module_dir), env);
    } else {
        copy_path(g->module_dir, sizeof(g->module_dir),
                  sl_params_get(p, "module_dir"));
    }
    copy_path(g->logdir, sizeof(g->logdir), sl_params_get(p, "logdir"));
    if (sl__params_line(p, "logdir") > 0) {
        snprintf(g->log_file, sizeof(g->log_file), "%.4000s/sluice.log",
                 g->logdir);
    }
    copy_path(g->datadir, sizeof(g->datadir), sl_params_get(p, "datadir"));
    copy_path(g->piddir, sizeof(g->piddir), sl_params_get(p, "piddir"));
    copy_path(g->persistdir, sizeof(g->persistdir),
              sl_params_get(p, "persistdir"));
    g->log_level = resolve_log_level(p);
    local = sl_params_get(p, "local_address");
    if (local != NULL && local[0] != '\0' &&
        inet_pton(AF_INET, local, &a6) != 1 &&
        inet_pton(AF_INET6, local, &a6) != 1) {
        sl__cfg_error(L->d, sl__params_line(p, "local_address"),
                      "invalid value '%s' for parameter 'local_address' in "
                      "section 'maxscale' (expected an IPv4 or IPv6 "
                      "address)", local);
    }
    /* connector_plugindir: libmariadb would only fail at the first
     * login that needs a plugin; say it at start-up instead */
    plugindir = sl_params_get(p, "connector_plugindir");
    if (plugindir != NULL) {
        const char *why = stat(plugindir, &pst) != 0 ? strerror(errno)
                          : !S_ISDIR(pst.st_mode) ? "not a directory"
                                                  : NULL;

        if (why != NULL) {
            sl__cfg_error(L->d, sl__params_line(p, "connector_plugindir"),
                          "invalid value '%s' for parameter "
                          "'connector_plugindir' in section 'maxscale': %s",
                          plugindir, why);
        }
    }
    sl__connector_plugindir_set(plugindir);
    g->writeq_high_water = sl_params_size(p, "writeq_high_water");
    g->writeq_low_water = sl_params_size(p, "writeq_low_water");
    if (g->writeq_high_water && g->writeq_low_water >= g->writeq_high_water) {
        sl__cfg_error(L->d, sl__params_line(p, "writeq_low_water"),
                      "writeq_low_water must be below writeq_high_water in "
                      "section 'maxscale'");
    }
    copy_path(g->admin_host, sizeof(g->admin_host),
              sl_params_get(p, "admin_host"));
    if (port < 0 || port > 65535) {
        sl__cfg_error(L->d, sl__params_line(p, "admin_port"),
                      "invalid value '%s' for parameter 'admin_port' in "
                      "section 'maxscale' (expected a port 0-65535)",
                      sl_params_get(p, "admin_port"));
    }
    g->admin_port = (int)port;
    g->admin_enabled = sl_params_bool(p, "admin_enabled");
    if (sl_params_has(p, "admin_ssl_ca") &&
        sl_params_has(p, "admin_ssl_ca_cert")) {
        sl__cfg_error(L->d, sl__params_line(p, "admin_ssl_ca_cert"),
                      "parameters 'admin_ssl_ca' and 'admin_ssl_ca_cert' in "
                      "section 'maxscale' are the same setting (MaxScale's "
                      "new and old name); set one");
    }
    if ((sl_params_has(p, "admin_ssl_ca") ||
         sl_params_has(p, "admin_ssl_ca_cert")) &&
        !sl_params_has(p, "admin_ssl_cert")) {
        const char *name = sl_params_has(p, "admin_ssl_ca")
                           ? "admin_ssl_ca" : "admin_ssl_ca_cert";

        sl__cfg_error(L->d, sl__params_line(p, name), "parameter '%s' in "
                      "section 'maxscale' needs admin_ssl_cert and "
                      "admin_ssl_key (it checks the certificates of the REST "
                      "API's HTTPS clients)", name);
    }
    check_admin_lists(L, p);
    resolve_history(L, g);
}

int
sl__cfg_load_global(struct loader *L)
{
    static const struct sl_ini_section empty = {.name = "maxscale"};
    const struct sl_ini_section *s = &empty;
    const struct sl_param_spec *tables[1] = {
        sl__config_core_specs("maxscale"),
    };
    struct sl_global *g = &L->cfg->global;
    int before = L->d->errors;

    for (size_t i = 0; i < L->ini.nsections; i++) {
        if (strcasecmp(L->ini.sections[i].name, "maxscale") == 0) {
            s = &L->ini.sections[i];
        }
    }
    g->params = section_params(L, s, "section 'maxscale'", false);
    if (g->params == NULL) {
        return -ENOMEM;
    }
    sl__params_validate(g->params, tables, 1, L->d, "section 'maxscale'",
                        s->line);
    if (L->d->errors == before) {
        fill_global(L, g);
    } else {
        /* Still find modules so later sections get useful errors. */
        const char *env = getenv("SLUICE_MODULE_DIR");

        copy_path(g->module_dir, sizeof(g->module_dir),
                  L->d->module_dir ? L->d->module_dir
                  : env && env[0] ? env : SLUICE_DEFAULT_MODULE_DIR);
    }
    return 0;
}

/* ---- classifying sections ---- */

static bool
valid_name(const char *name)
{
    if (strlen(name) >= SL_NAME_MAX) {
        return false;
    }
    for (const char *c = name; *c; c++) {
        if (!isalnum((unsigned char)*c) && !strchr("_.~-", *c)) {
            return false;
        }
    }
    return true;
}

static void
unknown_type(struct loader *L, const struct sl_ini_section *s,
             const struct sl_ini_kv *kv)
{
    const char *near = NULL;

    for (int k = 0; k < K_N; k++) {
        if (sl__edit_distance(kv->value, kind_names[k]) <= 2) {
            near = kind_names[k];
        }
    }
    sl__cfg_error(L->d, kv->line, "unknown object type '%s' in section '%s' "
                  "(expected server, service, listener, monitor or "
                  "filter)%s%s%s", kv->value, s->name,
                  near ? " (did you mean '" : "", near ? near : "",
                  near ? "'?)" : "");
}

int
sl__cfg_classify(struct loader *L)
{
    for (size_t i = 0; i < L->ini.nsections; i++) {
        const struct sl_ini_section *s = &L->ini.sections[i];
        const struct sl_ini_kv *kv;
        int k;

        if (strcasecmp(s->name, "maxscale") == 0) {
            continue;
        }
        if (!valid_name(s->name)) {
            sl__cfg_error(L->d, s->line, "invalid section name '%s' (use at "
                          "most %d letters, digits and _.~-)", s->name,
                          SL_NAME_MAX - 1);
            continue;
        }
        kv = sl__ini_find(s, "type");
        if (kv == NULL) {
            sl__cfg_error(L->d, s->line, "missing mandatory parameter 'type' "
                          "in section '%s'", s->name);
            continue;
        }
        if (strcmp(kv->value, "include") == 0) {
            continue;   /* merged into the sections that @include it */
        }
        for (k = 0; k < K_N; k++) {
            if (strcmp(kv->value, kind_names[k]) == 0) {
                break;
            }
        }
        if (k == K_N) {
            unknown_type(L, s, kv);
            continue;
        }
        if (push_ptr(&L->by_kind[k], &L->nby_kind[k], (void *)s) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---- list splitting ---- */

/* Calls fn for each trimmed non-empty item of a sep-separated list. */
static int
for_each_item(const char *list, char sep,
              int (*fn)(void *ctx, const char *item), void *ctx)
{
    char item[SL_NAME_MAX * 2];

    while (list && *list) {
        const char *e = strchr(list, sep);
        const char *b = list;
        const char *end = e ? e : list + strlen(list);
        size_t n;
        int rc;

        while (b < end && isspace((unsigned char)*b)) {
            b++;
        }
        while (end > b && isspace((unsigned char)end[-1])) {
            end--;
        }
        n = (size_t)(end - b);
        if (n > 0) {
            snprintf(item, sizeof(item), "%.*s", (int)n, b);
            rc = fn(ctx, item);
            if (rc < 0) {
                return rc;
            }
        }
        list = e ? e + 1 : NULL;
    }
    return 0;
}

struct server_ref_ctx {
    struct loader *L;
    const char *what;       /* "service 'x'" */
    const char *param;
    int line;
    struct sl_server ***arr;
    size_t *n;
    bool allow_services;
};

static int
add_server_ref(void *ctx, const char *name)
{
    struct server_ref_ctx *c = ctx;
    struct sl_server *srv = sl__find_server(c->L->cfg, name);

    if (srv == NULL) {
        if (c->allow_services && sl__find_service(c->L->cfg, name)) {
            sl__cfg_error(c->L->d, c->line, "%s: service '%s' in '%s': "
                          "services as targets are not supported yet",
                          c->what, name, c->param);
        } else {
            sl__cfg_error(c->L->d, c->line, "parameter '%s' of %s refers to "
                          "unknown server '%s'", c->param, c->what, name);
        }
        return 0;
    }
    for (size_t i = 0; i < *c->n; i++) {
        if ((*c->arr)[i] == srv) {
            sl__cfg_error(c->L->d, c->line, "%s lists server '%s' twice",
                          c->what, name);
            return 0;
        }
    }
    return push_ptr(c->arr, c->n, srv);
}

static int
resolve_servers(struct loader *L, const struct sl_params *p,
                const char *param, const char *what, struct sl_server ***arr,
                size_t *n)
{
    struct server_ref_ctx c = {
        .L = L, .what = what, .param = param,
        .line = sl__params_line(p, param), .arr = arr, .n = n,
        .allow_services = strcmp(param, "targets") == 0,
    };

    return for_each_item(sl_params_get(p, param), ',', add_server_ref, &c);
}

/* ---- authenticator= (servers and listeners) ---- */

/*
 * MaxScale's authenticator module names. Sluice has the native
 * (mysql_native_password) authentication, and on listeners ed25519auth
 * (client_ed25519) and PAMAuth (pam accounts, docs/authentication.md):
 * a listener or server naming
 * anything else is refused, since accepting it would silently change who
 * can log in.
 */
static void
check_authenticator(struct loader *L, const struct sl_params *p,
                    const char *what, bool listener)
{
    static const char *const native[] = {
        "mariadbauth", "mysqlauth", "mariadbbackendauth",
        "mysqlbackendauth", "mariadb", "mysql_native_password",
    };
    const char *v = sl_params_get(p, "authenticator");
    char item[SL_NAME_MAX];
    int line = sl__params_line(p, "authenticator");

    while (v && *v) {
        const char *e = strchr(v, ',');
        size_t n = e ? (size_t)(e - v) : strlen(v);
        bool ok = false;

        while (n > 0 && isspace((unsigned char)*v)) {
            v++;
            n--;
        }
        while (n > 0 && isspace((unsigned char)v[n - 1])) {
            n--;
        }
        snprintf(item, sizeof(item), "%.*s", (int)n, v);
        for (size_t i = 0; i < SL_ARRAY_LEN(native); i++) {
            ok = ok || strcasecmp(item, native[i]) == 0;
        }
        ok = ok || (listener && (strcasecmp(item, "ed25519auth") == 0 ||
                                 strcasecmp(item, "pamauth") == 0));
        if (!ok && n > 0) {
            sl__cfg_error(L->d, line, "parameter 'authenticator' in %s: "
                          "authenticator '%s' is not supported by Sluice "
                          "(only the native MariaDBAuth/MySQLAuth%s is); "
                          "accepting it would change who can log in",
                          what, item,
                          listener ? ", ed25519auth and PAMAuth" : "");
        }
        v = e ? e + 1 : NULL;
    }
}

/*
 * authenticator_options (listeners): MaxScale's comma-separated key=value
 * list. Sluice knows ed25519auth's ed_mode=ed25519 (the default) and
 * ed_mode=sha256, PAMAuth's pam_use_cleartext_plugin and
 * pam_allow_plain_cleartext (true/false), pam_mode=password|password_2FA
 * (not with pam_use_cleartext_plugin=true, as in MaxScale),
 * pam_backend_map=none|mariadb (MaxScale's name pam_backend_mapping too)
 * and pam_mapped_pw_file=<path> (with mariadb only; a readable JSON
 * object whose users_and_passwords entries have string user and
 * password) (docs/authentication.md); every other option and value (the
 * RSA key files of ed_mode=sha256 included) is refused.
 */
static bool
known_auth_option(const char *item)
{
    static const char *const known[] = {
        "ed_mode=ed25519", "ed_mode=sha256",
        "pam_use_cleartext_plugin=true", "pam_use_cleartext_plugin=false",
        "pam_allow_plain_cleartext=true", "pam_allow_plain_cleartext=false",
        "pam_mode=password", "pam_mode=password_2FA",
        "pam_backend_map=none", "pam_backend_map=mariadb",
        "pam_backend_mapping=none", "pam_backend_mapping=mariadb",
    };

    for (size_t i = 0; i < SL_ARRAY_LEN(known); i++) {
        if (strcasecmp(item, known[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* pam_mapped_pw_file=<path>: only with pam_backend_map=mariadb (it would
 * do nothing otherwise), and a readable JSON object whose
 * "users_and_passwords" is an array of {"user": string, "password":
 * string}. Passwords are plaintext (maxpasswd's encryption is not
 * decrypted here). Sluice reads it again at each mapped login. */
static void
check_mapped_pw_file(struct loader *L, int line, const char *what,
                     const char *v, size_t n, bool mapping)
{
    char path[512];
    json_error_t e;
    json_t *j, *arr;
    size_t i;

    while (n > 0 && isspace((unsigned char)*v)) {
        v++;
        n--;
    }
    while (n > 0 && isspace((unsigned char)v[n - 1])) {
        n--;
    }
    snprintf(path, sizeof(path), "%.*s", (int)n, v);
    if (!mapping) {
        sl__cfg_error(L->d, line, "parameter 'authenticator_options' in %s: "
                      "pam_mapped_pw_file is used only with "
                      "pam_backend_map=mariadb", what);
        return;
    }
    j = json_load_file(path, 0, &e);
    arr = json_object_get(j, "users_and_passwords");
    if (!json_is_object(j) || !json_is_array(arr)) {
        sl__cfg_error(L->d, line, "parameter 'authenticator_options' in %s: "
                      "pam_mapped_pw_file '%s' %s%s", what, path,
                      j == NULL ? "cannot be read as JSON: "
                                : "has no \"users_and_passwords\" array",
                      j == NULL ? e.text : "");
        json_decref(j);
        return;
    }
    for (i = 0; i < json_array_size(arr); i++) {
        const json_t *o = json_array_get(arr, i);

        if (!json_is_string(json_object_get(o, "user")) ||
            !json_is_string(json_object_get(o, "password"))) {
            sl__cfg_error(L->d, line, "parameter 'authenticator_options' "
                          "in %s: pam_mapped_pw_file '%s': entry %zu of "
                          "\"users_and_passwords\" needs string \"user\" "
                          "and \"password\"", what, path, i + 1);
            break;
        }
    }
    json_decref(j);
}

static void
check_authenticator_options(struct loader *L, const struct sl_params *p,
                            const char *what)
{
    const char *v = sl_params_get(p, "authenticator_options");
    int line = sl__params_line(p, "authenticator_options");
    char item[SL_NAME_MAX];
    bool two_factor = false, cleartext = false, mapping = false;
    const char *pw_file = NULL;
    size_t pw_file_len = 0;

    while (v && *v) {
        const char *e = strchr(v, ',');
        size_t n = e ? (size_t)(e - v) : strlen(v);
        size_t j = 0;

        for (size_t i = 0; i < n && j + 1 < sizeof(item); i++) {
            if (!isspace((unsigned char)v[i])) {
                item[j++] = v[i];
            }
        }
        item[j] = '\0';
        if (strncasecmp(item, "pam_mapped_pw_file=", 19) == 0) {
            pw_file = strchr(v, '=') + 1;   /* as written: a path */
            pw_file_len = (size_t)(v + n - pw_file);
        } else if (j > 0 && !known_auth_option(item)) {
            sl__cfg_error(L->d, line, "parameter 'authenticator_options' "
                          "in %s: option '%s' is not supported by Sluice: "
                          "only ed_mode=ed25519|sha256, "
                          "pam_use_cleartext_plugin=true|false, "
                          "pam_allow_plain_cleartext=true|false, "
                          "pam_mode=password|password_2FA, "
                          "pam_backend_map=none|mariadb and "
                          "pam_mapped_pw_file are "
                          "(see docs/authentication.md)", what, item);
        }
        two_factor = two_factor ||
                     strcasecmp(item, "pam_mode=password_2FA") == 0;
        cleartext = cleartext ||
                    strcasecmp(item, "pam_use_cleartext_plugin=true") == 0;
        mapping = mapping ||
                  strcasecmp(item, "pam_backend_map=mariadb") == 0 ||
                  strcasecmp(item, "pam_backend_mapping=mariadb") == 0;
        v = e ? e + 1 : NULL;
    }
    if (two_factor && cleartext) {
        sl__cfg_error(L->d, line, "parameter 'authenticator_options' in %s: "
                      "pam_mode=password_2FA cannot be combined with "
                      "pam_use_cleartext_plugin=true: mysql_clear_password "
                      "carries one answer, and the mode asks for a "
                      "password and a code (see docs/authentication.md)",
                      what);
    }
    if (pw_file != NULL) {
        check_mapped_pw_file(L, line, what, pw_file, pw_file_len, mapping);
    }
}

/* user_mapping_file (listeners): must be a readable JSON object now; its
 * entries are checked each time it is read (mdb_usermap.c), since the
 * file may change while Sluice runs. */
static void
check_user_mapping_file(struct loader *L, const struct sl_params *p,
                        const char *what)
{
    const char *path = sl_params_get(p, "user_mapping_file");
    json_error_t e;
    json_t *j;

    if (path == NULL || path[0] == '\0') {
        return;
    }
    j = json_load_file(path, 0, &e);
    if (!json_is_object(j)) {
        sl__cfg_error(L->d, sl__params_line(p, "user_mapping_file"),
                      "parameter 'user_mapping_file' in %s: '%s' %s%s",
                      what, path, j == NULL ? "cannot be read as JSON: "
                                            : "is not a JSON object",
                      j == NULL ? e.text : "");
    }
    json_decref(j);
}

/* ---- servers ---- */

/*
 * replication_custom_options: "MASTER_X = value[, ...]" only, a value being
 * a number, a word or a '...' string (no backslash), so what mariadbmon
 * appends to its CHANGE MASTER TO cannot end the statement or start
 * another. The options mariadbmon sets itself are refused. NULL or why.
 */
static const char *
custom_options_error(const char *v)
{
    static const char *const own[] = {
        "MASTER_HOST", "MASTER_PORT", "MASTER_USER", "MASTER_PASSWORD",
        "MASTER_USE_GTID", "MASTER_CONNECT_RETRY",
    };

    for (;;) {
        const char *name;
        size_t n;

        while (*v == ' ') {
            v++;
        }
        name = v;
        if (strncasecmp(v, "MASTER_", 7) != 0) {
            return "each option must be MASTER_NAME=value";
        }
        while ((*v >= 'A' && *v <= 'Z') || (*v >= 'a' && *v <= 'z') ||
               (*v >= '0' && *v <= '9') || *v == '_') {
            v++;
        }
        n = (size_t)(v - name);
        for (size_t i = 0; i < SL_ARRAY_LEN(own); i++) {
            if (n == strlen(own[i]) && strncasecmp(name, own[i], n) == 0) {
                return "MASTER_HOST, MASTER_PORT, MASTER_USER, "
                       "MASTER_PASSWORD, MASTER_USE_GTID and "
                       "MASTER_CONNECT_RETRY are set by the monitor";
            }
        }
        while (*v == ' ') {
            v++;
        }
        if (*v++ != '=') {
            return "each option must be MASTER_NAME=value";
        }
        while (*v == ' ') {
            v++;
        }
        if (*v == '\'') {
            for (v++; *v != '\''; v++) {
                if (*v == '\0' || *v == '\\') {
                    return "a quoted value must end with ' and have no "
                           "backslash";
                }
            }
            v++;
        } else {
            const char *start = v;

            while ((*v >= 'A' && *v <= 'Z') || (*v >= 'a' && *v <= 'z') ||
                   (*v >= '0' && *v <= '9') || *v == '_' || *v == '.') {
                v++;
            }
            if (v == start) {
                return "a value must be a number, a word or a 'string'";
            }
        }
        while (*v == ' ') {
            v++;
        }
        if (*v == '\0') {
            return NULL;
        }
        if (*v++ != ',') {
            return "options are separated by commas";
        }
    }
}

static void
fill_server(struct loader *L, struct sl_server *srv,
            const struct sl_ini_section *s, const char *what)
{
    struct sl_params *p = srv->params;
    const char *proto = sl_params_get(p, "protocol");
    int64_t port = sl_params_int(p, "port");
    int64_t weight = sl_params_int(p, "weight");
    bool has_addr = sl_params_has(p, "address");
    bool has_sock = sl_params_has(p, "socket");

    if (strcasecmp(proto, "mariadbbackend") != 0 &&
        strcasecmp(proto, "mysqlbackend") != 0) {
        sl__cfg_error(L->d, sl__params_line(p, "protocol"), "invalid value "
                      "'%s' for parameter 'protocol' in %s (expected "
                      "MariaDBBackend or MySQLBackend)", proto, what);
    }
    if (!has_addr && !has_sock) {
        sl__cfg_error(L->d, s->line, "missing mandatory parameter 'address' "
                      "(or 'socket') in %s", what);
    } else if (has_addr && has_sock) {
        sl__cfg_error(L->d, sl__params_line(p, "socket"), "%s has both "
                      "'address' and 'socket'; use one", what);
    }
    if (port < 1 || port > 65535) {
        sl__cfg_error(L->d, sl__params_line(p, "port"), "invalid value "
                      "'%s' for parameter 'port' in %s (expected a port "
                      "1-65535)", sl_params_get(p, "port"), what);
    }
    if (weight < 0 || weight > 1000000) {
        sl__cfg_error(L->d, sl__params_line(p, "weight"), "invalid value "
                      "'%s' for parameter 'weight' in %s (expected 0 to "
                      "1000000)", sl_params_get(p, "weight"), what);
    }
    srv->port = (int)port;
    srv->weight = (int)weight;
    srv->proxy_protocol = sl_params_bool(p, "proxy_protocol");
    srv->persistpoolmax = (int64_t)sl_params_count(p, "persistpoolmax");
    srv->rank = sl_params_enum(p, "rank") == 1 ? SL_SERVER_RANK_SECONDARY
                                              : SL_SERVER_RANK_PRIMARY;
    srv->max_routing_conns =
        (int64_t)sl_params_count(p, "max_routing_connections");
    srv->persistmaxtime_ms = sl_params_duration_ms(p, "persistmaxtime");
    if (has_addr) {
        copy_checked(L, srv->address, sizeof(srv->address),
                     sl_params_get(p, "address"), "address", what,
                     sl__params_line(p, "address"));
    }
    if (has_sock) {
        copy_checked(L, srv->socket, sizeof(srv->socket),
                     sl_params_get(p, "socket"), "socket", what,
                     sl__params_line(p, "socket"));
    }
    if (sl_params_has(p, "replication_custom_options")) {
        const char *why = custom_options_error(
            sl_params_get(p, "replication_custom_options"));

        if (why != NULL) {
            sl__cfg_error(L->d, sl__params_line(p,
                                                "replication_custom_options"),
                          "invalid value for parameter "
                          "'replication_custom_options' in %s: %s", what,
                          why);
        }
    }
    if (sl_params_has(p, "private_address") &&
        strspn(sl_params_get(p, "private_address"),
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
               "0123456789.-:") !=
            strlen(sl_params_get(p, "private_address"))) {
        sl__cfg_error(L->d, sl__params_line(p, "private_address"),
                      "invalid value '%s' for parameter 'private_address' in "
                      "%s (a host name or an IP address)",
                      sl_params_get(p, "private_address"), what);
    }
    if (sl_params_has(p, "monitoruser") != sl_params_has(p, "monitorpw")) {
        const char *set = sl_params_has(p, "monitoruser") ? "monitoruser"
                                                         : "monitorpw";

        sl__cfg_error(L->d, sl__params_line(p, set), "parameter '%s' in %s "
                      "needs '%s' too (the monitor's credentials for this "
                      "server)", set, what,
                      set[7] == 'u' ? "monitorpw" : "monitoruser");
    }
    sl__tls_configure(L->d, p, false, what, &srv->tls);
    check_authenticator(L, p, what, false);
}

static int
load_server(struct loader *L, const struct sl_ini_section *s)
{
    /* aligned: struct sl_server keeps its hot counters on their own
     * cache line */
    struct sl_server *srv = aligned_alloc(_Alignof(struct sl_server),
                                          sizeof(*srv));
    char what[SL_NAME_MAX + 16];

    if (srv == NULL || push_ptr(&L->cfg->servers, &L->cfg->nservers,
                                srv) < 0) {
        free(srv);
        return -ENOMEM;
    }
    memset(srv, 0, sizeof(*srv));
    snprintf(srv->name, sizeof(srv->name), "%s", s->name);
    atomic_init(&srv->lag, SL_SERVER_LAG_UNKNOWN);
    snprintf(what, sizeof(what), "server '%s'", s->name);
    srv->params = section_params(L, s, what, false);
    if (srv->params == NULL) {
        return -ENOMEM;
    }
    if (validate(L, srv->params, K_SERVER, NULL, false, what, s->line) == 0) {
        fill_server(L, srv, s, what);
    }
    return 0;
}

/* ---- filters ---- */

struct filter_server_ctx {
    struct loader *L;
    const char *what;
    const char *param;
    int line;
};

/* A server named by a filter: must exist; "->master" & co are routing
 * targets the filter understands (namedserverfilter). */
static int
check_filter_server(void *ctx, const char *name)
{
    struct filter_server_ctx *c = ctx;

    if (strncmp(name, "->", 2) != 0 &&
        sl__find_server(c->L->cfg, name) == NULL) {
        sl__cfg_error(c->L->d, c->line, "parameter '%s' of %s refers to "
                      "unknown server '%s'", c->param, c->what, name);
    }
    return 0;
}

/* Filters' SL_PARAM_SERVERS parameters (servers are loaded first). */
static void
check_filter_servers(struct loader *L, struct sl_filter_def *f,
                     const char *what)
{
    const struct sl_param_spec *spec;

    if (f->module == NULL || f->module->info->params == NULL) {
        return;
    }
    for (spec = f->module->info->params; spec->name != NULL; spec++) {
        struct filter_server_ctx c = {L, what, spec->name,
                                      sl__params_line(f->params, spec->name)};

        if (spec->type == SL_PARAM_SERVERS &&
            sl_params_get(f->params, spec->name) != NULL) {
            for_each_item(sl_params_get(f->params, spec->name), ',',
                          check_filter_server, &c);
        }
    }
}

static int
load_filter(struct loader *L, const struct sl_ini_section *s)
{
    struct sl_filter_def *f = calloc(1, sizeof(*f));
    char what[SL_NAME_MAX + 16];

    if (f == NULL || push_ptr(&L->cfg->filters, &L->cfg->nfilters, f) < 0) {
        free(f);
        return -ENOMEM;
    }
    snprintf(f->name, sizeof(f->name), "%s", s->name);
    snprintf(what, sizeof(what), "filter '%s'", s->name);
    f->params = section_params(L, s, what, false);
    if (f->params == NULL) {
        return -ENOMEM;
    }
    if (sl__ini_find(s, "module")) {
        f->module = load_module(L, s, "module", SL_MODULE_FILTER, what);
        f->ops = f->module ? f->module->info->ops : NULL;
    }
    validate(L, f->params, K_FILTER, f->module, f->module == NULL, what,
             s->line);
    check_filter_servers(L, f, what);
    return 0;
}

/* ---- services ---- */

struct filter_ref_ctx {
    struct loader *L;
    struct sl_service *svc;
    int line;
};

static int
add_filter_ref(void *ctx, const char *name)
{
    struct filter_ref_ctx *c = ctx;
    struct sl_filter_def *f = sl__find_filter(c->L->cfg, name);

    if (f == NULL) {
        sl__cfg_error(c->L->d, c->line, "parameter 'filters' of service "
                      "'%s' refers to unknown filter '%s'", c->svc->name,
                      name);
        return 0;
    }
    return push_ptr(&c->svc->filters, &c->svc->nfilters, f);
}

/* user_accounts_file and user_accounts_file_usage of a service's
 * parameters p: the file must be there and well formed (every entry
 * checked, mdb_accfile.c), file_only_always needs a file. 0, or -1 with
 * err[errlen] and *param naming the parameter at fault. Also used by
 * PATCH (runtime.c). */
int
sl__check_accounts_file(const struct sl_params *p, const char **param,
                        char *err, size_t errlen)
{
    const char *path = sl_params_get(p, "user_accounts_file");
    const char *usage = sl_params_get(p, "user_accounts_file_usage");
    char why[512];

    if (path == NULL || path[0] == '\0') {
        if (usage != NULL && strcmp(usage, "file_only_always") == 0) {
            *param = "user_accounts_file_usage";
            snprintf(err, errlen, "user_accounts_file_usage="
                     "file_only_always needs user_accounts_file");
            return -1;
        }
        return 0;
    }
    if (mdb_accfile_read(path, NULL, NULL, why, sizeof(why)) != 0) {
        *param = "user_accounts_file";
        snprintf(err, errlen, "'%s' %s", path, why);
        return -1;
    }
    return 0;
}

static int
fill_service(struct loader *L, struct sl_service *svc, const char *what)
{
    struct sl_params *p = svc->params;
    struct filter_ref_ctx fc = {L, svc, sl__params_line(p, "filters")};
    int rc = 0;

    if (sl_params_has(p, "cluster") &&
        (sl_params_has(p, "servers") || sl_params_has(p, "targets"))) {
        sl__cfg_error(L->d, sl__params_line(p, "cluster"), "%s has both "
                      "'cluster' and '%s'; use one", what,
                      sl_params_has(p, "servers") ? "servers" : "targets");
    } else if (sl_params_has(p, "cluster")) {
        /* resolved once the monitors are loaded (resolve_clusters) */
    } else if (sl_params_has(p, "servers") && sl_params_has(p, "targets")) {
        sl__cfg_error(L->d, sl__params_line(p, "targets"), "%s has both "
                      "'servers' and 'targets'; use one", what);
    } else if (sl_params_has(p, "servers")) {
        rc = resolve_servers(L, p, "servers", what, &svc->servers,
                             &svc->nservers);
    } else if (sl_params_has(p, "targets")) {
        rc = resolve_servers(L, p, "targets", what, &svc->servers,
                             &svc->nservers);
    }
    if (rc == 0) {
        rc = for_each_item(sl_params_get(p, "filters"), '|', add_filter_ref,
                           &fc);
    }
    copy_checked(L, svc->user, sizeof(svc->user), sl_params_get(p, "user"),
                 "user", what, sl__params_line(p, "user"));
    copy_checked(L, svc->password, sizeof(svc->password),
                 sl_params_get(p, "password"), "password", what,
                 sl__params_line(p, "password"));
    svc->max_connections = (int64_t)sl_params_count(p, "max_connections");
    svc->connection_timeout_ms = sl_params_duration_ms(p,
                                                       "connection_timeout");
    svc->net_write_timeout_ms = sl_params_duration_ms(p, "net_write_timeout");
    svc->keepalive_ms = sl_params_duration_ms(p, "connection_keepalive");
    svc->auth_timeout_ms = sl_params_duration_ms(p, "auth_timeout");
    svc->max_pending_logins_per_host =
        (unsigned)sl_params_count(p, "max_pending_logins_per_host");
    {
        const char *param = NULL;
        char err[768];

        if (sl__check_accounts_file(p, &param, err, sizeof(err)) != 0) {
            sl__cfg_error(L->d, sl__params_line(p, param),
                          "parameter '%s' in %s: %s", param, what, err);
        }
    }
    svc->retain_last_statements = sl_params_int(p,
                                                "retain_last_statements");
    if (svc->retain_last_statements != -1) {
        svc->retain_last_statements = history_count(
            L, p, "retain_last_statements", svc->name);
    }
    return rc;
}

static int
load_service(struct loader *L, const struct sl_ini_section *s)
{
    struct sl_service *svc = calloc(1, sizeof(*svc));
    char what[SL_NAME_MAX + 16];

    if (svc == NULL || push_ptr(&L->cfg->services, &L->cfg->nservices,
                                svc) < 0) {
        free(svc);
        return -ENOMEM;
    }
    snprintf(svc->name, sizeof(svc->name), "%s", s->name);
    svc->created_at = time(NULL);
    snprintf(what, sizeof(what), "service '%s'", s->name);
    svc->params = section_params(L, s, what, false);
    if (svc->params == NULL) {
        return -ENOMEM;
    }
    if (sl__ini_find(s, "router")) {
        svc->router_module = load_module(L, s, "router", SL_MODULE_ROUTER,
                                         what);
        svc->router = svc->router_module ? svc->router_module->info->ops
                                         : NULL;
    }
    if (validate(L, svc->params, K_SERVICE, svc->router_module,
                 svc->router_module == NULL, what, s->line) != 0) {
        return 0;
    }
    return fill_service(L, svc, what);
}

/* ---- listeners ---- */

static void
fill_listener(struct loader *L, struct sl_listener *l,
              const struct sl_ini_section *s, const char *what)
{
    struct sl_params *p = l->params;
    const char *svc = sl_params_get(p, "service");
    bool has_port = sl_params_has(p, "port");
    bool has_sock = sl_params_has(p, "socket");

    l->fd = -1;
    l->service = sl__find_service(L->cfg, svc);
    if (l->service == NULL) {
        sl__cfg_error(L->d, sl__params_line(p, "service"), "parameter "
                      "'service' of listener '%s' refers to unknown service "
                      "'%s'", l->name, svc);
    }
    if (!has_port && !has_sock) {
        sl__cfg_error(L->d, s->line, "missing mandatory parameter 'port' "
                      "(or 'socket') in %s", what);
    } else if (has_port && has_sock) {
        sl__cfg_error(L->d, sl__params_line(p, "socket"), "%s has both "
                      "'port' and 'socket'; use one", what);
    }
    if (has_port) {
        int64_t port = sl_params_int(p, "port");

        if (port < 1 || port > 65535) {
            sl__cfg_error(L->d, sl__params_line(p, "port"), "invalid value "
                          "'%s' for parameter 'port' in %s (expected a port "
                          "1-65535)", sl_params_get(p, "port"), what);
        }
        l->port = (int)port;
        copy_checked(L, l->address, sizeof(l->address),
                     sl_params_get(p, "address"), "address", what,
                     sl__params_line(p, "address"));
    }
    if (has_sock) {
        copy_checked(L, l->socket, sizeof(l->socket),
                     sl_params_get(p, "socket"), "socket", what,
                     sl__params_line(p, "socket"));
    }
    if (sl_params_has(p, "proxy_protocol_networks")) {
        char err[256];

        if (sl__pp_networks_parse(sl_params_get(p, "proxy_protocol_networks"),
                                  &l->pp_nets, &l->pp_nnets, err,
                                  sizeof(err)) != 0) {
            sl__cfg_error(L->d, sl__params_line(p, "proxy_protocol_networks"),
                          "invalid value for parameter "
                          "'proxy_protocol_networks' in %s: %s", what, err);
        }
    }
    sl__tls_configure(L->d, p, true, what, &l->tls);
    check_authenticator(L, p, what, true);
    check_authenticator_options(L, p, what);
    check_user_mapping_file(L, p, what);
    if (sl_params_has(p, "connection_init_sql_file") &&
        sl_params_get(p, "connection_init_sql_file")[0] != '\0') {
        char err[PATH_MAX + 128];

        if (sl__init_sql_read(sl_params_get(p, "connection_init_sql_file"),
                              &l->init_sql, &l->ninit_sql, err,
                              sizeof(err)) != 0) {
            sl__cfg_error(L->d, sl__params_line(p,
                                                "connection_init_sql_file"),
                          "parameter 'connection_init_sql_file' in %s: %s",
                          what, err);
        }
    }
}

static int
load_listener(struct loader *L, const struct sl_ini_section *s)
{
    struct sl_listener *l = calloc(1, sizeof(*l));
    const struct sl_ini_kv *proto = sl__ini_find(s, "protocol");
    char what[SL_NAME_MAX + 16];
    char err[1024];

    if (l == NULL || push_ptr(&L->cfg->listeners, &L->cfg->nlisteners,
                              l) < 0) {
        free(l);
        return -ENOMEM;
    }
    l->fd = -1;
    snprintf(l->name, sizeof(l->name), "%s", s->name);
    snprintf(what, sizeof(what), "listener '%s'", s->name);
    l->params = section_params(L, s, what, false);
    if (l->params == NULL) {
        return -ENOMEM;
    }
    if (proto) {
        l->protocol_module = load_module(L, s, "protocol",
                                         SL_MODULE_PROTOCOL, what);
    } else {
        l->protocol_module = sl__module_load_err(
            module_dir(L), "mariadbprotocol", SL_MODULE_PROTOCOL, err,
            sizeof(err));
        if (l->protocol_module == NULL) {
            sl__cfg_error(L->d, s->line, "cannot load the default protocol "
                          "module for %s: %s", what, err);
        }
    }
    l->protocol = l->protocol_module ? l->protocol_module->info->ops : NULL;
    if (validate(L, l->params, K_LISTENER, l->protocol_module,
                 l->protocol_module == NULL, what, s->line) == 0) {
        fill_listener(L, l, s, what);
    }
    return 0;
}

/* ---- monitors ---- */

static int
load_monitor(struct loader *L, const struct sl_ini_section *s)
{
    struct sl_monitor *m = calloc(1, sizeof(*m));
    char what[SL_NAME_MAX + 16];
    struct sl_params *p;

    if (m == NULL || push_ptr(&L->cfg->monitors, &L->cfg->nmonitors, m) < 0) {
        free(m);
        return -ENOMEM;
    }
    snprintf(m->name, sizeof(m->name), "%s", s->name);
    snprintf(what, sizeof(what), "monitor '%s'", s->name);
    m->params = p = section_params(L, s, what, false);
    if (p == NULL) {
        return -ENOMEM;
    }
    if (sl__ini_find(s, "module")) {
        m->module = load_module(L, s, "module", SL_MODULE_MONITOR, what);
        m->ops = m->module ? m->module->info->ops : NULL;
    }
    if (validate(L, p, K_MONITOR, m->module, m->module == NULL, what,
                 s->line) != 0) {
        return 0;
    }
    copy_checked(L, m->user, sizeof(m->user),
                 sl_params_has(p, "user") ? sl_params_get(p, "user") : "",
                 "user", what, sl__params_line(p, "user"));
    copy_checked(L, m->password, sizeof(m->password),
                 sl_params_has(p, "password") ? sl_params_get(p, "password")
                                              : "",
                 "password", what, sl__params_line(p, "password"));
    m->interval_ms = sl_params_duration_ms(p, "monitor_interval");
    m->connect_timeout_ms = sl_params_duration_ms(p,
                                                  "backend_connect_timeout");
    m->read_timeout_ms = sl_params_duration_ms(p, "backend_read_timeout");
    if (m->interval_ms == 0) {
        sl__cfg_error(L->d, sl__params_line(p, "monitor_interval"),
                      "invalid value '0' for parameter 'monitor_interval' "
                      "in %s (expected a duration above zero)", what);
    }
    return resolve_servers(L, p, "servers", what, &m->servers, &m->nservers);
}

/* Dependency order: references always point at earlier kinds. */
const enum obj_kind sl__cfg_kind_order[K_N] = {
    K_SERVER, K_FILTER, K_SERVICE, K_LISTENER, K_MONITOR,
};

int
sl__cfg_load_section(struct loader *L, enum obj_kind k,
                     const struct sl_ini_section *s)
{
    static int (*const loaders[K_N])(struct loader *,
                                     const struct sl_ini_section *) = {
        [K_SERVER] = load_server, [K_FILTER] = load_filter,
        [K_SERVICE] = load_service, [K_LISTENER] = load_listener,
        [K_MONITOR] = load_monitor,
    };

    return loaders[k](L, s);
}
