/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Run-time changes through the REST API: create, alter and destroy
 * servers, services, listeners, monitors and filters; set and clear server
 * states; stop and start services, listeners and monitors; module commands;
 * log rotation. Every change that must survive a restart is written to
 * PERSISTDIR/NAME.cnf (one ini section), which sl__persist_merge() lays
 * over the main file at the next start.
 *
 * Creation goes through the configuration loader (sl__config_add_text), so
 * runtime objects get exactly the checks of the main file and the same
 * error messages naming the parameter.
 *
 * Publishing (generation.c): the object arrays are changed only in a new
 * configuration generation (sl__config_next), published whole with one
 * release store. Workers read a service's server array and router
 * instance without locks. A change builds a new array (never shorter than
 * the old count, padded with a repeat of the last entry, so any mix of
 * old/new count and pointer stays in bounds), creates a new router
 * instance over it and publishes both with release stores. The old
 * instance, with the array and parameter set it was made over, is freed
 * when its last session ends (struct sl_inst_ref), through the workers'
 * epochs. Destroyed objects themselves (a session may still point at its
 * service, server, listener or filter) leave the published generation
 * here and are freed when their last holder lets go (sl__obj_destroyed,
 * generation.c).
 *
 * Context: the libmicrohttpd thread, except sl__admin_runtime_free (main,
 * after the workers stopped).
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sluice/log.h>
#include <sluice/modcmd.h>
#include <sluice/monitor.h>
#include <sluice/server.h>

#include "admin_int.h"
#include "config_int.h"
#include "ini.h"
#include "init_sql.h"
#include "modcmd_int.h"
#include "worker_int.h"

/* ---- deferred frees and stopped objects ---- */

static void
params_free_cb(void *p)
{
    sl__params_free(p);
}

/* Free memory that workers may still be reading once they cannot. */
static void
defer_free(void *p)
{
    if (p != NULL && sl__worker_defer(free, p) < 0) {
        sl_log_error("out of memory: %p leaked", p);
    }
}

static void
defer_params_free(struct sl_params *p)
{
    if (p != NULL && sl__worker_defer(params_free_cb, p) < 0) {
        sl_log_error("out of memory: a parameter set leaked");
    }
}

/* Main, after the workers stopped. */
void
sl__admin_runtime_free(void)
{
    /* the workers have stopped: every deferred free may run (each round
     * may defer more: a retired instance or a destroyed object losing its
     * last reference) */
    while (sl__worker_reclaim(true) > 0) {
    }
    sl__admin_stopped_free();
}

/* ---- JSON to ini ---- */

static bool
safe_text(const char *s)
{
    return s != NULL && strpbrk(s, "\r\n") == NULL;
}

static bool
safe_key(const char *s)
{
    for (const char *c = s; *c; c++) {
        if (!isalnum((unsigned char)*c) && *c != '_') {
            return false;
        }
    }
    return s[0] != '\0';
}

/* An object name: it becomes an ini section name and the file name
 * PERSISTDIR/NAME.cnf, so no path separators, brackets, comment
 * characters or spaces. */
static bool
safe_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= SL_NAME_MAX || s[0] == '.') {
        return false;
    }
    for (const char *c = s; *c; c++) {
        if (!isalnum((unsigned char)*c) && !strchr("_-.", *c)) {
            return false;
        }
    }
    return true;
}

/* Write key=value lines for a parameters object to f. 0, or -1 with the
 * reason in err. */
static int
params_to_ini(json_t *params, FILE *f, char *err, size_t errlen)
{
    const char *k;
    json_t *v;

    if (params != NULL && !json_is_object(params)) {
        snprintf(err, errlen, "'parameters' must be a JSON object");
        return -1;
    }
    json_object_foreach(params, k, v) {
        char val[4096];

        if (!safe_key(k)) {
            snprintf(err, errlen, "invalid parameter name '%.100s'", k);
            return -1;
        }
        if (json_is_string(v)) {
            snprintf(val, sizeof(val), "%s", json_string_value(v));
        } else if (json_is_integer(v)) {
            snprintf(val, sizeof(val), "%lld",
                     (long long)json_integer_value(v));
        } else if (json_is_boolean(v)) {
            snprintf(val, sizeof(val), "%s", json_is_true(v) ? "true"
                                                             : "false");
        } else if (json_is_null(v)) {
            continue;
        } else {
            snprintf(err, errlen, "invalid value for parameter '%s' "
                     "(expected a string, number or boolean)", k);
            return -1;
        }
        if (!safe_text(val)) {
            snprintf(err, errlen, "invalid value for parameter '%s' "
                     "(line breaks are not allowed)", k);
            return -1;
        }
        fprintf(f, "%s=%s\n", k, val);
    }
    return 0;
}

/* "a<sep>b<sep>c" from a relationship {"data":[{"id":..},..]}; NULL with
 * err set when malformed. The caller frees. */
static char *
rel_ids(json_t *relobj, char sep, char *err, size_t errlen)
{
    json_t *data = json_object_get(relobj, "data");
    char *out = NULL;
    size_t len = 0;
    FILE *f;
    size_t i;
    json_t *e;

    if (!json_is_array(data)) {
        snprintf(err, errlen, "a relationship needs a 'data' array");
        return NULL;
    }
    f = open_memstream(&out, &len);
    if (f == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    json_array_foreach(data, i, e) {
        const char *id = json_string_value(json_object_get(e, "id"));

        if (id == NULL || !safe_text(id) || strpbrk(id, ",|")) {
            snprintf(err, errlen, "relationship entry %zu has no valid 'id'",
                     i);
            fclose(f);
            free(out);
            return NULL;
        }
        fprintf(f, "%s%s", i ? (sep == '|' ? "|" : ",") : "", id);
    }
    fclose(f);
    return out;
}

/* ---- service server lists ---- */

/* Publish a new server list for svc (see the top of the file). 0, or -1
 * with err set. */
static int
service_set_servers(struct sl_service *svc, struct sl_server **list,
                    size_t n, char *err, size_t errlen)
{
    size_t oldn = svc->nservers;
    size_t cap = n > oldn ? n : oldn;
    struct sl_server **arr = calloc(cap ? cap : 1, sizeof(*arr));
    struct sl_server **oldarr = svc->servers;
    struct sl_inst_ref *oldref = svc->router_ref;
    struct sl_inst_ref *ref;
    void *inst;

    if (arr == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < cap; i++) {
        arr[i] = i < n ? list[i] : (n ? list[n - 1] : NULL);
    }
    if (n == 0 && cap > 0) {
        arr[0] = NULL;
    }
    /* the new array holds its servers (sl__obj_ref), the old one lets go
     * with the old instance */
    for (size_t i = 0; svc->links_held && i < n; i++) {
        sl__obj_ref(SL_OBJ_SERVER, arr[i]);
    }
    /* Growing: pointer first, then count; shrinking: count first. */
    if (n >= oldn) {
        __atomic_store_n(&svc->servers, arr, __ATOMIC_RELEASE);
        __atomic_store_n(&svc->nservers, n, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&svc->nservers, n, __ATOMIC_RELEASE);
        __atomic_store_n(&svc->servers, arr, __ATOMIC_RELEASE);
    }
    inst = svc->router->create_instance(svc, svc->params);
    ref = inst ? sl__inst_ref_new(inst, svc->router, NULL) : NULL;
    if (ref == NULL) {
        if (inst != NULL && svc->router->destroy_instance) {
            svc->router->destroy_instance(inst);
        }
        __atomic_store_n(&svc->nservers, n < oldn ? n : oldn,
                         __ATOMIC_RELEASE);
        __atomic_store_n(&svc->servers, oldarr, __ATOMIC_RELEASE);
        __atomic_store_n(&svc->nservers, oldn, __ATOMIC_RELEASE);
        sl__servers_unref(svc->links_held ? arr : NULL, n);
        defer_free(arr);
        snprintf(err, errlen, "router of service '%s' refused the new server "
                 "list", svc->name);
        return -1;
    }
    __atomic_store_n(&svc->router_instance, inst, __ATOMIC_RELEASE);
    __atomic_store_n(&svc->router_ref, ref, __ATOMIC_RELEASE);
    /* the old instance was made over the old array: they go together,
     * when its last session ends */
    sl__inst_ref_retire(oldref, svc, NULL, oldarr,
                        svc->links_held ? oldn : 0);
    return 0;
}

static int
persist_service(struct sl_service *svc)
{
    char *over = NULL;
    size_t len = 0;
    FILE *f;
    int rc;

    if (svc->cluster != NULL) {   /* its cluster= names the servers */
        return sl__persist_write(svc->name, svc->params, NULL);
    }
    f = open_memstream(&over, &len);
    if (f == NULL) {
        return -ENOMEM;
    }
    fprintf(f, "servers=");
    for (size_t i = 0; i < svc->nservers; i++) {
        fprintf(f, "%s%s", i ? "," : "", svc->servers[i]->name);
    }
    fprintf(f, "\n");
    fclose(f);
    rc = sl__persist_write(svc->name, svc->params, over);
    free(over);
    return rc;
}

/* Set svc's servers to the comma list ids. */
static struct admin_resp
relink_service(struct sl_service *svc, const char *ids)
{
    struct sl_server *list[256];
    size_t n = 0;
    char *copy;
    char *save = NULL;
    char err[512];

    if (svc->cluster != NULL) {
        return sl__admin_error(400, "service '%s' takes its servers from "
                               "monitor '%s' (cluster=): change the "
                               "monitor's servers", svc->name,
                               svc->cluster->name);
    }
    copy = strdup(ids);

    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t;
         t = strtok_r(NULL, ",", &save)) {
        struct sl_server *s = sl__admin_find_server(t);

        if (s == NULL || n == SL_ARRAY_LEN(list)) {
            free(copy);
            return sl__admin_error(s ? 400 : 404, "server '%.128s' not found",
                               t);
        }
        for (size_t i = 0; i < n; i++) {
            if (list[i] == s) {
                s = NULL;
            }
        }
        if (s != NULL) {
            list[n++] = s;
        }
    }
    free(copy);
    if (service_set_servers(svc, list, n, err, sizeof(err)) < 0) {
        return sl__admin_error(400, "%s", err);
    }
    persist_service(svc);
    sl_log_notice("service '%s' now has %zu server(s)", svc->name, n);
    return sl__admin_no_content();
}

/* cluster=: every service of the current generation whose servers are
 * m's gets m's new list (a new router instance, as relinking does; not
 * persisted: the service's cluster= says it). */
static void
follow_cluster(struct sl_monitor *m)
{
    const struct sl_config *cfg = sl__config;
    char err[512];

    for (size_t i = 0; cfg != NULL && i < cfg->nservices; i++) {
        struct sl_service *svc = cfg->services[i];

        if (svc->cluster != m ||
            (svc->nservers == m->nservers &&
             (m->nservers == 0 ||
              memcmp(svc->servers, m->servers,
                     m->nservers * sizeof(*m->servers)) == 0))) {
            continue;
        }
        if (service_set_servers(svc, m->servers, m->nservers, err,
                                sizeof(err)) < 0) {
            sl_log_error("service '%s' could not follow monitor '%s': %s",
                         svc->name, m->name, err);
        } else {
            sl_log_notice("service '%s' now has the %zu server(s) of "
                          "monitor '%s'", svc->name, m->nservers, m->name);
        }
    }
}

/* Add (or remove) srv to/from svc. */
static struct admin_resp
link_one(struct sl_service *svc, struct sl_server *srv, bool add)
{
    char *ids = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&ids, &len);
    struct admin_resp res;
    bool first = true;

    if (f == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    for (size_t i = 0; i < svc->nservers; i++) {
        if (svc->servers[i] != srv) {
            fprintf(f, "%s%s", first ? "" : ",", svc->servers[i]->name);
            first = false;
        }
    }
    if (add) {
        fprintf(f, "%s%s", first ? "" : ",", srv->name);
    }
    fclose(f);
    res = relink_service(svc, ids);
    free(ids);
    return res;
}

/* ---- create ---- */

static const char *const kinds[][2] = {
    {"servers", "server"}, {"services", "service"},
    {"listeners", "listener"}, {"monitors", "monitor"},
    {"filters", "filter"},
};

char *
sl__admin_body_to_ini(json_t *body, const char *kind, const char *svcname,
                  const char **idp, char *err, size_t errlen)
{
    json_t *data = json_object_get(body, "data");
    json_t *attrs = json_object_get(data, "attributes");
    json_t *rels = json_object_get(data, "relationships");
    const char *id = json_string_value(json_object_get(data, "id"));
    const char *modkey = strcmp(kind, "service") == 0 ? "router" : "module";
    const char *mod = json_string_value(json_object_get(attrs, modkey));
    static const char *const relmap[][3] = {
        {"servers", "servers", ","}, {"filters", "filters", "|"},
        {"services", "service", ","},
    };
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    if (!json_is_object(data) || id == NULL) {
        snprintf(err, errlen, "the body needs data.id (the new object's "
                 "name)");
        return NULL;
    }
    if (!safe_name(id)) {
        snprintf(err, errlen, "invalid object name in data.id (1 to %d "
                 "letters, digits, '_', '-' or '.', not starting with "
                 "'.')", SL_NAME_MAX - 1);
        return NULL;
    }
    *idp = id;
    f = open_memstream(&text, &len);
    if (f == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    fprintf(f, "[%s]\ntype=%s\n", id, kind);
    if (mod != NULL && safe_text(mod)) {
        fprintf(f, "%s=%s\n", modkey, mod);
    }
    if (svcname != NULL) {
        fprintf(f, "service=%s\n", svcname);
    }
    if (params_to_ini(json_object_get(attrs, "parameters"), f, err,
                      errlen) < 0) {
        goto out_bad;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(relmap) &&
                       strcmp(kind, "server") != 0; i++) {
        json_t *ro = json_object_get(rels, relmap[i][0]);
        char *ids;

        if (ro == NULL) {
            continue;
        }
        ids = rel_ids(ro, relmap[i][2][0], err, errlen);
        if (ids == NULL) {
            goto out_bad;
        }
        if (ids[0]) {
            fprintf(f, "%s=%s\n", relmap[i][1], ids);
        }
        free(ids);
    }
    fclose(f);
    return text;

out_bad:
    fclose(f);
    free(text);
    return NULL;
}

/* The ini section for a POST body; NULL with *res set on error. */
static char *
body_to_ini(struct admin_req *r, const char *kind, const char *svcname,
            const char **idp, struct admin_resp *res)
{
    char err[512];
    char *text = sl__admin_body_to_ini(r->body, kind, svcname, idp, err,
                                   sizeof(err));

    if (text == NULL) {
        *res = sl__admin_error(400, "%s", err);
    }
    return text;
}

/* The first diagnostic line without the "runtime:N: " prefix. */
static struct admin_resp
diag_error(struct sl_cfg_diag *d)
{
    const char *t = d->text ? d->text : "invalid object";
    const char *p = strstr(t, ": ");
    const char *nl;

    if (p && strncmp(t, "runtime", 7) == 0) {
        t = p + 2;
        p = strstr(t, ": ");
        if (p && isdigit((unsigned char)t[0])) {
            t = p + 2;
        }
    }
    nl = strchr(t, '\n');
    return sl__admin_error(400, "%.*s", nl ? (int)(nl - t) : (int)strlen(t), t);
}

static int
start_new(const char *kind, const char *id, struct admin_resp *res)
{
    struct sl_listener *l = strcmp(kind, "listener") == 0
                                ? sl__admin_find_listener(id) : NULL;
    struct sl_monitor *m = strcmp(kind, "monitor") == 0
                               ? sl__admin_find_monitor(id) : NULL;
    int rc;

    if (m != NULL) {
        rc = sl__monitor_start(m);
        if (rc < 0) {
            *res = sl__admin_error(500, "monitor '%s' cannot start: %s", id,
                               strerror(-rc));
            sl__admin_set_stopped(m, true);
        }
        return rc;
    }
    if (l == NULL) {
        return 0;
    }
    rc = sl__listener_start(l);
    if (rc < 0) {
        *res = sl__admin_error(400, "listener '%s' cannot listen: %s", id,
                           strerror(-rc));
        sl__admin_set_stopped(l, true);
        return rc;
    }
    return 0;
}

static struct admin_resp
create_object(struct admin_req *r, const char *kind, const char *svcname)
{
    struct sl_cfg_diag d = {.file = "runtime", .quiet = true};
    struct admin_resp res;
    const char *id = NULL;
    struct sl_config *gen;
    char *text;
    json_t *attrs;
    json_t *rels;
    int rc;

    attrs = json_object_get(json_object_get(r->body, "data"), "attributes");
    if (sl__admin_check_paths(kind, sl__admin_module_specs(json_string_value(
                              json_object_get(attrs, strcmp(kind, "service")
                                                 == 0 ? "router"
                                                      : "module"))),
                          json_object_get(attrs, "parameters"), &res) < 0) {
        return res;
    }
    text = body_to_ini(r, kind, svcname, &id, &res);
    if (text == NULL) {
        return res;
    }
    gen = sl__config_next();
    rc = gen ? sl__config_add_text(gen, text, strlen(text), &d) : -ENOMEM;
    free(text);
    if (rc == 0) {
        sl__config_publish(gen);
    } else {
        sl__config_discard(gen);
    }
    if (rc == -ENOMEM && gen == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    if (rc < 0) {
        res = d.text && strstr(d.text, "already exists")
                  ? sl__admin_error(409, "an object named '%s' already exists",
                                id)
                  : diag_error(&d);
        sl__cfg_diag_free(&d);
        return res;
    }
    sl__cfg_diag_free(&d);
    sl_log_notice("created %s '%s' through the REST API", kind, id);
    if (strcmp(kind, "server") == 0) {
        struct sl_server *srv = sl__admin_find_server(id);

        sl__persist_write(id, srv->params, NULL);
        rels = json_object_get(json_object_get(json_object_get(
            r->body, "data"), "relationships"), "services");
        for (size_t i = 0; i < json_array_size(json_object_get(rels,
                                                               "data"));
             i++) {
            const char *s = json_string_value(json_object_get(
                json_array_get(json_object_get(rels, "data"), i), "id"));
            struct sl_service *svc = s ? sl__admin_find_service(s) : NULL;

            if (svc != NULL) {
                link_one(svc, srv, true);
            }
        }
        return sl__admin_no_content();
    }
    if (start_new(kind, id, &res) < 0) {
        return res;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(kinds); i++) {
        const struct sl_params *p = NULL;

        if (strcmp(kinds[i][1], kind) != 0) {
            continue;
        }
        p = strcmp(kind, "service") == 0
                ? sl__admin_find_service(id)->params
            : strcmp(kind, "listener") == 0
                ? sl__admin_find_listener(id)->params
            : strcmp(kind, "monitor") == 0
                ? sl__admin_find_monitor(id)->params
                : sl__admin_find_filter(id)->params;
        sl__persist_write(id, p, NULL);
    }
    return sl__admin_no_content();
}

/* ---- alter ---- */

int
sl__admin_check_params(const char *kind, const struct sl_param_spec *modspecs,
             json_t *params, FILE *f, struct admin_resp *res)
{
    const struct sl_param_spec *core = sl__config_core_specs(kind);
    char *text = NULL;
    size_t len = 0;
    FILE *tmp = open_memstream(&text, &len);
    char err[512];
    char why[256];
    const char *k;
    json_t *v;

    if (tmp == NULL || params_to_ini(params, tmp, err, sizeof(err)) < 0) {
        if (tmp) {
            fclose(tmp);
        }
        free(text);
        *res = sl__admin_error(400, "%s", tmp ? err : "out of memory");
        return -1;
    }
    fclose(tmp);
    free(text);
    json_object_foreach(params, k, v) {
        /* the module's row first, as the loader looks them up */
        const struct sl_param_spec *s = modspecs
                                            ? sl__param_spec_find(modspecs, k)
                                            : NULL;
        char val[4096];

        s = s ? s : sl__param_spec_find(core, k);
        if (s == NULL || strcmp(k, "type") == 0) {
            *res = sl__admin_error(400, "unknown parameter '%s' for %s", k,
                               kind);
            return -1;
        }
        snprintf(val, sizeof(val), "%s", json_is_string(v)
                 ? json_string_value(v) : json_is_true(v) ? "true"
                 : json_is_false(v) ? "false" : "");
        if (json_is_integer(v)) {
            snprintf(val, sizeof(val), "%lld",
                     (long long)json_integer_value(v));
        }
        if (sl__param_check(s, val, why, sizeof(why)) < 0) {
            *res = sl__admin_error(400, "invalid value '%s' for parameter '%s' "
                               "(%s)", s->type == SL_PARAM_PASSWORD
                               ? "*****" : val, k, why);
            return -1;
        }
        fprintf(f, "%s=%s\n", k, val);
    }
    return 0;
}

/* A JSON boolean, or a string maxctrl sends ("true", "false", "1",
 * "0", "on", "off", "yes", "no"): 1, 0, or -1 for anything else. */
static int
bool_value(json_t *v)
{
    static const char *const yes[] = {"true", "1", "on", "yes"};
    static const char *const no[] = {"false", "0", "off", "no"};
    const char *s = json_string_value(v);

    if (json_is_boolean(v)) {
        return json_is_true(v) ? 1 : 0;
    }
    for (size_t i = 0; s != NULL && i < SL_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            return 1;
        }
        if (strcasecmp(s, no[i]) == 0) {
            return 0;
        }
    }
    return -1;
}

static struct admin_resp
alter_maxscale(json_t *params)
{
    static const char *const levels[] = {"log_warning", "log_notice",
                                         "log_info", "log_debug"};
    const char *k;
    json_t *v;
    int passive = -1;

    if (!json_is_object(params)) {
        return sl__admin_error(400, "the body needs data.attributes.parameters");
    }
    json_object_foreach(params, k, v) {
        size_t i;

        if (strncmp(k, "admin_audit", 11) == 0 &&
            (k[11] == '\0' || strcmp(k + 11, "_file") == 0 ||
             strcmp(k + 11, "_exclude_methods") == 0)) {
            struct admin_resp err;

            if (strcmp(k, "admin_audit_file") == 0) {
                /* under logdir or admin_secure_paths, as any path an
                 * admin gives at run time (admin_paths.c) */
                json_t *one = json_pack("{s:O}", k, v);
                int rc = sl__admin_check_paths("maxscale", NULL, one, &err);

                json_decref(one);
                if (rc < 0) {
                    return err;
                }
            }
            if (sl__admin_audit_alter(k, v, &err) < 0) {
                return err;
            }
            continue;
        }
        /* passive: applied once the whole body has been accepted */
        if (strcmp(k, "passive") == 0) {
            passive = bool_value(v);
            if (passive < 0) {
                return sl__admin_error(400, "invalid value for parameter "
                                       "'passive' (expected true or "
                                       "false)");
            }
            continue;
        }
        for (i = 0; i < SL_ARRAY_LEN(levels); i++) {
            if (strcmp(k, levels[i]) == 0) {
                break;
            }
        }
        if (i == SL_ARRAY_LEN(levels)) {
            return sl__param_spec_find(sl__config_core_specs("maxscale"), k)
                       ? sl__admin_error(400, "parameter '%s' cannot be changed "
                                     "at run time", k)
                       : sl__admin_error(400, "unknown parameter '%s'", k);
        }
        if (!json_is_boolean(v)) {
            return sl__admin_error(400, "invalid value for parameter '%s' "
                               "(expected true or false)", k);
        }
        if (json_is_true(v)) {
            atomic_store(&sl_log_max_level, (int)i + SL_LOG_WARN);
        } else if (atomic_load(&sl_log_max_level) >= (int)i + SL_LOG_WARN) {
            atomic_store(&sl_log_max_level, (int)i + SL_LOG_WARN - 1);
        }
    }
    if (passive >= 0) {
        sl__monitor_set_passive(passive == 1);
    }
    return sl__admin_no_content();
}

static void
remove_at(void *arrp, size_t *n, size_t i)
{
    void **arr = *(void ***)arrp;

    memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof(void *));
    (*n)--;
}

static size_t
index_of(void **arr, size_t n, const void *obj)
{
    for (size_t i = 0; i < n; i++) {
        if (arr[i] == obj) {
            return i;
        }
    }
    return n;
}

/* Take obj out of *arrp (an array of gen) if it is there. */
static void
drop_from(void *arrp, size_t *n, const void *obj)
{
    size_t i = index_of(*(void ***)arrp, *n, obj);

    if (i < *n) {
        remove_at(arrp, n, i);
    }
}

/* Publish a generation without obj (whichever array holds it). The
 * object itself stays allocated until its holders let go: the caller
 * hands the configuration's reference to sl__obj_destroyed. */
static void
unpublish(struct sl_config *gen, const void *obj)
{
    drop_from(&gen->servers, &gen->nservers, obj);
    drop_from(&gen->services, &gen->nservices, obj);
    drop_from(&gen->listeners, &gen->nlisteners, obj);
    drop_from(&gen->monitors, &gen->nmonitors, obj);
    drop_from(&gen->filters, &gen->nfilters, obj);
    sl__config_publish(gen);
    /* its address may be reused once it is freed */
    sl__admin_set_stopped(obj, false);
}

/* ---- live parameter changes ---- */

/* The keys of over ("k=v\n"...) not listed in live[] (NULL-terminated;
 * live == NULL: all keys are live), as a JSON array, or NULL if none. */
static json_t *
keys_not_live(const char *over, const char *const *live)
{
    json_t *out = json_array();
    const char *line = over;

    while (out != NULL && line != NULL && *line) {
        const char *eq = strchr(line, '=');
        const char *nl = strchr(line, '\n');
        bool ok = live == NULL;

        for (size_t i = 0; live && live[i] && eq; i++) {
            ok = ok || (strlen(live[i]) == (size_t)(eq - line) &&
                        strncmp(live[i], line, (size_t)(eq - line)) == 0);
        }
        if (!ok && eq) {
            json_array_append_new(out, json_stringn(line,
                                                    (size_t)(eq - line)));
        }
        line = nl ? nl + 1 : NULL;
    }
    if (json_array_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* 204, or 200 with a meta note naming the parameters that were stored
 * but take effect only at the next start. */
static struct admin_resp
applied(json_t *pending)
{
    if (pending == NULL) {
        return sl__admin_no_content();
    }
    return sl__admin_ok(json_pack(
        "{s:{s:s, s:o}}", "meta", "note", "parameters saved; those listed "
        "take effect at the next start", "restart_required", pending));
}

/*
 * A new parameter set for an object: its explicit parameters with the
 * accepted PATCH lines `over` laid on top, validated as the loader does
 * (the module's table, then the core's for kind: a name both declare,
 * such as mariadbmon's `script` or `disk_space_threshold`, means what the
 * module says) and completed with defaults. NULL with *res set on error.
 * The caller owns the result.
 */
static struct sl_params *
merged_params(const struct sl_params *old, const char *over,
              const char *kind, const struct sl_param_spec *modspecs,
              const char *what, struct admin_resp *res)
{
    struct sl_cfg_diag d = {.file = "runtime", .quiet = true};
    const struct sl_param_spec *core = sl__config_core_specs(kind);
    const struct sl_param_spec *tables[2] = {modspecs ? modspecs : core,
                                             core};
    struct sl_params *p = sl__params_new();
    char *copy = strdup(over);
    char *save = NULL;
    const char *k;
    const char *v;
    size_t it = 0;
    int err = p && copy ? 0 : -ENOMEM;

    while (err == 0 && sl_params_next(old, &it, &k, &v)) {
        if (sl__params_line(old, k) > 0) {
            err = sl__params_set(p, k, v, sl__params_line(old, k));
        }
    }
    for (char *l = copy ? strtok_r(copy, "\n", &save) : NULL;
         err == 0 && l; l = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(l, '=');

        if (eq != NULL) {
            *eq = '\0';
            /* the PATCH's name replaces the other name of its setting */
            if (sl__params_same_setting(l) != NULL) {
                sl__params_unset(p, sl__params_same_setting(l));
            }
            err = sl__params_set(p, l, eq + 1, 1);
        }
    }
    free(copy);
    if (err == 0 &&
        sl__params_validate(p, tables, modspecs ? 2 : 1, &d, what, 1) == 0 &&
        d.errors == 0) {
        sl__cfg_diag_free(&d);
        return p;
    }
    *res = err ? sl__admin_error(500, "out of memory") : diag_error(&d);
    sl__cfg_diag_free(&d);
    sl__params_free(p);
    return NULL;
}

/* Check a PATCH's parameters for kind (paths too: sl__admin_check_paths);
 * the accepted ones as ini lines in *over (caller frees). 0, or -1 with
 * *res set. */
static int
patch_lines(const char *kind, const struct sl_param_spec *modspecs,
            json_t *params, char **over, struct admin_resp *res)
{
    size_t len = 0;
    FILE *f;

    if (sl__admin_check_paths(kind, modspecs, params, res) < 0) {
        return -1;
    }
    f = open_memstream(over, &len);
    if (f == NULL) {
        *res = sl__admin_error(500, "out of memory");
        return -1;
    }
    if (sl__admin_check_params(kind, modspecs, params, f, res) < 0) {
        fclose(f);
        free(*over);
        *over = NULL;
        return -1;
    }
    fclose(f);
    return 0;
}

/* ---- monitors at run time ---- */

/* The fields the loader derives from a monitor's parameters. */
struct mon_fields {
    char user[256];
    char password[256];
    uint64_t interval_ms;
    uint64_t connect_timeout_ms;
    uint64_t read_timeout_ms;
};

static void
mon_get(const struct sl_monitor *m, struct mon_fields *f)
{
    memcpy(f->user, m->user, sizeof(f->user));
    memcpy(f->password, m->password, sizeof(f->password));
    f->interval_ms = m->interval_ms;
    f->connect_timeout_ms = m->connect_timeout_ms;
    f->read_timeout_ms = m->read_timeout_ms;
}

static void
mon_set(struct sl_monitor *m, const struct mon_fields *f)
{
    memcpy(m->user, f->user, sizeof(f->user));
    memcpy(m->password, f->password, sizeof(f->password));
    m->interval_ms = f->interval_ms;
    m->connect_timeout_ms = f->connect_timeout_ms;
    m->read_timeout_ms = f->read_timeout_ms;
}

/* The fields from a validated parameter set. 0, or -1 with *res set. */
static int
mon_from_params(const struct sl_params *p, struct mon_fields *f,
                struct admin_resp *res)
{
    const char *user = sl_params_has(p, "user") ? sl_params_get(p, "user")
                                                : "";
    const char *pw = sl_params_has(p, "password")
                         ? sl_params_get(p, "password") : "";

    if (strlen(user) >= sizeof(f->user) || strlen(pw) >= sizeof(f->user)) {
        *res = sl__admin_error(400, "monitor user or password is too long");
        return -1;
    }
    snprintf(f->user, sizeof(f->user), "%s", user);
    snprintf(f->password, sizeof(f->password), "%s", pw);
    f->interval_ms = sl_params_duration_ms(p, "monitor_interval");
    f->connect_timeout_ms = sl_params_duration_ms(p,
                                                  "backend_connect_timeout");
    f->read_timeout_ms = sl_params_duration_ms(p, "backend_read_timeout");
    if (f->interval_ms == 0) {
        *res = sl__admin_error(400, "invalid value '0' for parameter "
                           "'monitor_interval' (expected a duration above "
                           "zero)");
        return -1;
    }
    return 0;
}

/*
 * Give m new parameters (newp, owned; its servers are srvs/n, owned), as
 * MaxScale does: stop the thread, create an instance over the new values,
 * destroy the old instance, start again if it was running. On failure
 * everything is put back (the monitor runs on as before) and newp/srvs
 * are freed. The old instance is destroyed, not retired: only the monitor
 * thread (joined) and this thread use it, and a module may keep a
 * registry of its instances by monitor (mariadbmon's module commands).
 */
static struct admin_resp
monitor_rebuild(struct sl_monitor *m, struct sl_params *newp,
                struct sl_server **srvs, size_t n)
{
    bool was_running = m->running;
    struct sl_params *oldp = m->params;
    struct sl_server **olds = m->servers;
    size_t oldn = m->nservers;
    struct mon_fields oldf;
    struct mon_fields newf;
    struct admin_resp res;
    void *inst;

    if (mon_from_params(newp, &newf, &res) < 0) {
        sl__params_free(newp);
        free(srvs);
        return res;
    }
    mon_get(m, &oldf);
    sl__monitor_stop(m);
    mon_set(m, &newf);
    m->params = newp;
    m->servers = srvs;
    m->nservers = n;
    inst = m->ops->create_instance(m, newp);
    if (inst == NULL) {
        mon_set(m, &oldf);
        m->params = oldp;
        m->servers = olds;
        m->nservers = oldn;
        sl__params_free(newp);
        free(srvs);
        if (was_running) {
            sl__monitor_start(m);
        }
        return sl__admin_error(400, "monitor module '%s' refused the new "
                           "configuration of monitor '%s'",
                           m->module->info->name, m->name);
    }
    if (m->instance && m->ops->destroy_instance) {
        m->ops->destroy_instance(m->instance);
    }
    m->instance = inst;
    defer_params_free(oldp);
    defer_free(olds);
    if (was_running && sl__monitor_start(m) < 0) {
        return sl__admin_error(500, "monitor '%s' was reconfigured but its "
                           "thread did not start", m->name);
    }
    sl__persist_write(m->name, m->params, NULL);
    sl_log_notice("monitor '%s' reconfigured (%zu servers)", m->name, n);
    return sl__admin_no_content();
}

/* Servers named in the comma list ids, none watched by a monitor other
 * than m: a new array (caller frees) and its count; NULL with *res set.
 * An empty list gives a 1-slot array and *n = 0. */
static struct sl_server **
monitor_server_list(struct sl_monitor *m, const char *ids, size_t *n,
                    struct admin_resp *res)
{
    size_t cap = strlen(ids) / 2 + 2;
    struct sl_server **arr = calloc(cap, sizeof(*arr));
    char *copy = strdup(ids);
    char *save = NULL;

    *n = 0;
    for (char *t = copy && arr ? strtok_r(copy, ",", &save) : NULL; t;
         t = strtok_r(NULL, ",", &save)) {
        struct sl_server *s = sl__admin_find_server(t);

        *res = s ? sl__admin_no_content()
                 : sl__admin_error(404, "server '%.128s' not found", t);
        for (size_t i = 0; s && i < sl__config->nmonitors; i++) {
            struct sl_monitor *o = sl__config->monitors[i];

            if (o != m && index_of((void **)o->servers, o->nservers, s) <
                              o->nservers) {
                *res = sl__admin_error(400, "server '%s' is already monitored "
                                   "by '%s' (a server may belong to one "
                                   "monitor only)", s->name, o->name);
                s = NULL;
            }
        }
        if (s == NULL) {
            free(copy);
            free(arr);
            return NULL;
        }
        if (index_of((void **)arr, *n, s) == *n && *n < cap) {
            arr[(*n)++] = s;
        }
    }
    free(copy);
    if (arr == NULL) {
        *res = sl__admin_error(500, "out of memory");
    }
    return arr;
}

/* Set m's servers to the comma list ids (live). */
static struct admin_resp
relink_monitor(struct sl_monitor *m, const char *ids)
{
    struct admin_resp res;
    struct sl_params *newp;
    struct sl_server **arr;
    char *over = NULL;
    size_t n;
    char what[SL_NAME_MAX + 16];

    arr = monitor_server_list(m, ids, &n, &res);
    if (arr == NULL) {
        return res;
    }
    snprintf(what, sizeof(what), "monitor '%s'", m->name);
    if (asprintf(&over, "servers=%s\n", ids) < 0) {
        free(arr);
        return sl__admin_error(500, "out of memory");
    }
    newp = merged_params(m->params, over, "monitor",
                         m->module->info->params, what, &res);
    free(over);
    if (newp == NULL) {
        free(arr);
        return res;
    }
    res = monitor_rebuild(m, newp, arr, n);
    follow_cluster(m);
    return res;
}

/* PATCH monitors/NAME: parameters (live: the monitor is rebuilt) and
 * relationships.servers. */
static struct admin_resp
alter_monitor(struct sl_monitor *m, json_t *data)
{
    json_t *params = json_object_get(json_object_get(data, "attributes"),
                                     "parameters");
    json_t *srvs = json_object_get(json_object_get(data, "relationships"),
                                   "servers");
    struct admin_resp res = sl__admin_no_content();
    char what[SL_NAME_MAX + 16];
    char *over = NULL;

    snprintf(what, sizeof(what), "monitor '%s'", m->name);
    if (params != NULL) {
        struct sl_params *newp;
        struct sl_server **arr;

        if (json_object_get(params, "servers") != NULL) {
            return sl__admin_error(400, "change a monitor's servers through "
                               "relationships.servers");
        }
        if (patch_lines("monitor", m->module->info->params, params, &over,
                        &res) < 0) {
            return res;
        }
        newp = merged_params(m->params, over, "monitor",
                             m->module->info->params, what, &res);
        free(over);
        arr = calloc(m->nservers + 1, sizeof(*arr));
        if (newp == NULL || arr == NULL) {
            sl__params_free(newp);
            free(arr);
            return newp ? sl__admin_error(500, "out of memory") : res;
        }
        memcpy(arr, m->servers, m->nservers * sizeof(*arr));
        res = monitor_rebuild(m, newp, arr, m->nservers);
    }
    if (srvs != NULL && res.status < 300) {
        char err[256];
        char *ids = rel_ids(srvs, ',', err, sizeof(err));

        if (ids == NULL) {
            return sl__admin_error(400, "%s", err);
        }
        res = relink_monitor(m, ids);
        free(ids);
    }
    return res;
}

static struct admin_resp
monitor_run(struct sl_monitor *m, bool start)
{
    int rc;

    if (!start) {
        sl__monitor_stop(m);
        sl__admin_set_stopped(m, true);
        return sl__admin_no_content();
    }
    rc = sl__monitor_start(m);
    if (rc < 0) {
        return sl__admin_error(500, "cannot start monitor '%s': %s", m->name,
                           strerror(-rc));
    }
    sl__admin_set_stopped(m, false);
    return sl__admin_no_content();
}

/* Stop the thread, destroy the instance, let the object go. */
static struct admin_resp
destroy_monitor(struct sl_monitor *m)
{
    const struct sl_config *cur = sl__config;
    struct sl_config *gen;

    for (size_t i = 0; cur != NULL && i < cur->nservices; i++) {
        if (cur->services[i]->cluster == m) {
            return sl__admin_error(400, "monitor '%s' is the cluster of "
                                   "service '%s'", m->name,
                                   cur->services[i]->name);
        }
    }
    gen = sl__config_next();
    if (gen == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    sl__monitor_stop(m);
    if (m->instance && m->ops->destroy_instance) {
        m->ops->destroy_instance(m->instance);
    }
    m->instance = NULL;
    sl__admin_set_stopped(m, false);
    unpublish(gen, m);
    sl__persist_remove(m->name);
    sl_log_notice("destroyed monitor '%s'", m->name);
    sl__obj_destroyed(SL_OBJ_MONITOR, m);
    return sl__admin_no_content();
}

/* ---- services and filters: new instances over new parameters ---- */

/* PATCH services/NAME parameters: the router's own parameters and
 * max_connections, connection_timeout and net_write_timeout apply to new
 * sessions at once (a new router instance, published as relinking does);
 * other core parameters at the next start. */
static struct admin_resp
alter_service_params(struct sl_service *svc, json_t *params)
{
    static const char *const core_live[] = {
        "max_connections", "connection_timeout", "net_write_timeout",
        "connection_keepalive", NULL,
    };
    const struct sl_param_spec *mod = svc->router_module->info->params;
    struct admin_resp res;
    struct sl_params *newp;
    char what[SL_NAME_MAX + 16];
    char *over = NULL;
    json_t *pending;
    struct sl_inst_ref *oldref;
    struct sl_inst_ref *ref;
    struct sl_params *oldp;
    void *inst;

    if (json_object_get(params, "servers") != NULL ||
        json_object_get(params, "targets") != NULL) {
        return sl__admin_error(400, "change a service's servers through "
                           "relationships.servers");
    }
    if (json_object_get(params, "cluster") != NULL) {
        return sl__admin_error(400, "a service's cluster is set when it is "
                               "created");
    }
    if (patch_lines("service", mod, params, &over, &res) < 0) {
        return res;
    }
    snprintf(what, sizeof(what), "service '%s'", svc->name);
    newp = merged_params(svc->params, over, "service", mod, what, &res);
    if (newp == NULL) {
        free(over);
        return res;
    }
    {
        const char *param = NULL;
        char err[768];

        if (sl__check_accounts_file(newp, &param, err, sizeof(err)) != 0) {
            free(over);
            sl__params_free(newp);
            return sl__admin_error(400, "parameter '%s' in %s: %s", param,
                                   what, err);
        }
    }
    inst = svc->router->create_instance(svc, newp);
    ref = inst ? sl__inst_ref_new(inst, svc->router, NULL) : NULL;
    if (ref == NULL) {
        if (inst != NULL && svc->router->destroy_instance) {
            svc->router->destroy_instance(inst);
        }
        free(over);
        sl__params_free(newp);
        return sl__admin_error(400, "router of service '%s' refused the new "
                           "parameters", svc->name);
    }
    /* every key, then those that are live dropped (keys_not_live with
     * NULL would call them all live: no restart_required ever) */
    pending = keys_not_live(over, (const char *const[]){NULL});
    if (pending != NULL) {
        json_t *keep = json_array();
        size_t i;
        json_t *e;

        json_array_foreach(pending, i, e) {
            const char *k = json_string_value(e);
            bool live = sl__param_spec_find(mod, k) != NULL &&
                        sl__param_spec_find(sl__config_core_specs("service"),
                                            k) == NULL;

            for (size_t j = 0; core_live[j]; j++) {
                live = live || strcmp(core_live[j], k) == 0;
            }
            if (!live) {
                json_array_append(keep, e);
            }
        }
        json_decref(pending);
        pending = json_array_size(keep) ? keep : NULL;
        if (pending == NULL) {
            json_decref(keep);
        }
    }
    free(over);
    __atomic_store_n(&svc->max_connections,
                     (int64_t)sl_params_count(newp, "max_connections"),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&svc->connection_timeout_ms,
                     sl_params_duration_ms(newp, "connection_timeout"),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&svc->net_write_timeout_ms,
                     sl_params_duration_ms(newp, "net_write_timeout"),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&svc->keepalive_ms,
                     sl_params_duration_ms(newp, "connection_keepalive"),
                     __ATOMIC_RELAXED);
    oldp = svc->params;
    oldref = svc->router_ref;
    __atomic_store_n(&svc->params, newp, __ATOMIC_RELEASE);
    __atomic_store_n(&svc->router_instance, inst, __ATOMIC_RELEASE);
    __atomic_store_n(&svc->router_ref, ref, __ATOMIC_RELEASE);
    sl__inst_ref_retire(oldref, svc, oldp, NULL, 0);
    persist_service(svc);
    sl_log_notice("service '%s': parameters changed", svc->name);
    return applied(pending);
}

/* PATCH filters/NAME parameters: a new filter instance for new sessions
 * (existing sessions keep the old one until they end). */
static struct admin_resp
alter_filter_params(struct sl_filter_def *f, json_t *params)
{
    const struct sl_param_spec *mod = f->module->info->params;
    struct admin_resp res;
    struct sl_params *newp;
    char what[SL_NAME_MAX + 16];
    char *over = NULL;
    struct sl_inst_ref *oldref;
    struct sl_inst_ref *ref;
    struct sl_params *oldp;
    void *inst;

    if (patch_lines("filter", mod, params, &over, &res) < 0) {
        return res;
    }
    snprintf(what, sizeof(what), "filter '%s'", f->name);
    newp = merged_params(f->params, over, "filter", mod, what, &res);
    free(over);
    if (newp == NULL) {
        return res;
    }
    inst = f->ops->create_instance(f->name, newp);
    ref = inst ? sl__inst_ref_new(inst, NULL, f->ops) : NULL;
    if (ref == NULL) {
        if (inst != NULL && f->ops->destroy_instance) {
            f->ops->destroy_instance(inst);
        }
        sl__params_free(newp);
        return sl__admin_error(400, "filter module '%s' refused the new "
                           "parameters of filter '%s'",
                           f->module->info->name, f->name);
    }
    oldp = f->params;
    oldref = f->ref;
    __atomic_store_n(&f->params, newp, __ATOMIC_RELEASE);
    __atomic_store_n(&f->instance, inst, __ATOMIC_RELEASE);
    __atomic_store_n(&f->ref, ref, __ATOMIC_RELEASE);
    sl__inst_ref_retire(oldref, f, oldp, NULL, 0);
    sl__persist_write(f->name, newp, NULL);
    sl_log_notice("filter '%s': parameters changed", f->name);
    return sl__admin_no_content();
}

/* A listener's connection_init_sql_file must be readable when it is set
 * (the loader reads it at the next start and would refuse it there).
 * 0, or -1 with *res set. */
static int
init_sql_check(const struct sl_params *p, struct admin_resp *res)
{
    const char *path = sl_params_get(p, "connection_init_sql_file");
    char err[PATH_MAX + 128];
    char **stmts = NULL;
    size_t n = 0;

    if (path == NULL || path[0] == '\0') {
        return 0;
    }
    if (sl__init_sql_read(path, &stmts, &n, err, sizeof(err)) != 0) {
        *res = sl__admin_error(400, "parameter 'connection_init_sql_file': "
                               "%s", err);
        return -1;
    }
    sl__init_sql_free(stmts, n);
    return 0;
}

/* PATCH listeners/NAME parameters: validated and persisted; a listening
 * socket's parameters take effect at the next start. */
static struct admin_resp
alter_listener_params(struct sl_listener *l, json_t *params)
{
    struct admin_resp res;
    struct sl_params *newp;
    char what[SL_NAME_MAX + 16];
    char *over = NULL;
    json_t *pending;

    if (patch_lines("listener", l->protocol_module->info->params, params,
                    &over, &res) < 0) {
        return res;
    }
    snprintf(what, sizeof(what), "listener '%s'", l->name);
    newp = merged_params(l->params, over, "listener",
                         l->protocol_module->info->params, what, &res);
    if (newp == NULL) {
        free(over);
        return res;
    }
    if (init_sql_check(newp, &res) < 0) {
        free(over);
        sl__params_free(newp);
        return res;
    }
    pending = keys_not_live(over, (const char *const[]){NULL});
    free(over);
    sl__persist_write(l->name, newp, NULL);
    sl__params_free(newp);
    return applied(pending);
}

/* A server's weight, live: 0 to 1000000 as the loader requires.
 * 0, or -1 with *res set. */
static int
server_weight(struct sl_server *srv, json_t *params, struct admin_resp *res)
{
    json_t *w = json_object_get(params, "weight");
    char *end = NULL;
    long long v;

    if (w == NULL) {
        return 0;
    }
    v = json_is_integer(w) ? (long long)json_integer_value(w)
        : json_is_string(w) ? strtoll(json_string_value(w), &end, 10) : -1;
    if (v < 0 || v > 1000000 || (end && (*end || end ==
                                         json_string_value(w)))) {
        *res = sl__admin_error(400, "invalid value for parameter 'weight' "
                           "(expected 0 to 1000000)");
        return -1;
    }
    __atomic_store_n(&srv->weight, (int)v, __ATOMIC_RELAXED);
    return 0;
}

/* A server's rank and max_routing_connections, live (already checked
 * by patch_lines against the spec: an enum and a count). Routers and
 * sl__dcb_connect_backend read them with relaxed loads at every choice
 * or connection. 0, or -1 with *res set. */
static int
server_rank_limit(struct sl_server *srv, json_t *params,
                  struct admin_resp *res)
{
    json_t *r = json_object_get(params, "rank");
    json_t *m = json_object_get(params, "max_routing_connections");
    int rank = -1;
    long long max = -1;

    if (r != NULL) {
        const char *v = json_is_string(r) ? json_string_value(r) : "";

        rank = strcasecmp(v, "primary") == 0     ? SL_SERVER_RANK_PRIMARY
               : strcasecmp(v, "secondary") == 0 ? SL_SERVER_RANK_SECONDARY
                                                 : -1;
        if (rank < 0) {
            *res = sl__admin_error(400, "invalid value for parameter 'rank' "
                                   "(expected primary or secondary)");
            return -1;
        }
    }
    if (m != NULL) {
        char *end = NULL;

        max = json_is_integer(m) ? (long long)json_integer_value(m)
              : json_is_string(m) ? strtoll(json_string_value(m), &end, 10)
                                  : -1;
        if (max < 0 || (end && (*end || end == json_string_value(m)))) {
            *res = sl__admin_error(400, "invalid value for parameter "
                                   "'max_routing_connections' (expected a "
                                   "count, 0 = no limit)");
            return -1;
        }
    }
    if (rank >= 0) {
        __atomic_store_n(&srv->rank, rank, __ATOMIC_RELAXED);
        sl_log_notice("server '%s': rank is now %s", srv->name,
                      rank == SL_SERVER_RANK_PRIMARY ? "primary"
                                                     : "secondary");
    }
    if (max >= 0) {
        __atomic_store_n(&srv->max_routing_conns, (int64_t)max,
                         __ATOMIC_RELAXED);
        sl_log_notice("server '%s': max_routing_connections is now %lld",
                      srv->name, max);
    }
    return 0;
}

/* PATCH servers/NAME: parameters (persisted; `weight`, `rank` and
 * `max_routing_connections` apply at once, the others at the next start)
 * and relationships.services (live). */
static struct admin_resp
alter_server(struct sl_server *srv, json_t *data)
{
    static const char *const live[] = {"weight", "rank",
                                       "max_routing_connections", NULL};
    json_t *params = json_object_get(json_object_get(data, "attributes"),
                                     "parameters");
    json_t *svcs = json_object_get(json_object_get(data, "relationships"),
                                   "services");
    struct admin_resp res = sl__admin_no_content();
    json_t *pending = NULL;
    char *over = NULL;

    if (params != NULL) {
        if (patch_lines("server", NULL, params, &over, &res) < 0 ||
            server_weight(srv, params, &res) < 0 ||
            server_rank_limit(srv, params, &res) < 0) {
            free(over);
            return res;
        }
        sl__persist_write(srv->name, srv->params, over);
        pending = keys_not_live(over, live);
        free(over);
    }
    if (svcs != NULL) {
        char err[256];
        char *ids = rel_ids(svcs, ',', err, sizeof(err));

        if (ids == NULL) {
            return sl__admin_error(400, "%s", err);
        }
        for (size_t i = 0; i < sl__config->nservices && res.status < 300;
             i++) {
            struct sl_service *svc = sl__config->services[i];
            char needle[SL_NAME_MAX + 2];
            char hay[8192];
            bool want;
            bool has = false;

            snprintf(needle, sizeof(needle), ",%s,", svc->name);
            snprintf(hay, sizeof(hay), ",%s,", ids);
            want = strstr(hay, needle) != NULL;
            for (size_t j = 0; j < svc->nservers; j++) {
                has = has || svc->servers[j] == srv;
            }
            if (want != has) {
                res = link_one(svc, srv, want);
            }
        }
        free(ids);
    }
    if (res.status >= 300) {
        json_decref(pending);
        return res;
    }
    return applied(pending);
}

static struct admin_resp
alter_service(struct sl_service *svc, json_t *data)
{
    json_t *params = json_object_get(json_object_get(data, "attributes"),
                                     "parameters");
    json_t *srvs = json_object_get(json_object_get(data, "relationships"),
                                   "servers");
    struct admin_resp res = sl__admin_no_content();

    if (params != NULL) {
        res = alter_service_params(svc, params);
    }
    if (srvs != NULL && res.status < 300) {
        char err[256];
        char *ids = rel_ids(srvs, ',', err, sizeof(err));
        struct admin_resp r2;

        if (ids == NULL) {
            json_decref(res.doc);
            return sl__admin_error(400, "%s", err);
        }
        r2 = relink_service(svc, ids);
        free(ids);
        if (r2.status >= 300) {
            json_decref(res.doc);
            return r2;
        }
    }
    return res;
}

static struct admin_resp
alter_object(struct admin_req *r)
{
    json_t *data = json_object_get(r->body, "data");
    json_t *attrs = json_object_get(data, "attributes");
    json_t *params = json_object_get(attrs, "parameters");
    const char *k = r->seg[0];
    const char *name = r->nseg > 1 ? r->seg[1] : "";

    if (r->body == NULL || !json_is_object(data)) {
        return sl__admin_error(400, "the body needs a 'data' object");
    }
    if (strcmp(k, "maxscale") == 0) {
        return alter_maxscale(params);
    }
    if (strcmp(k, "servers") == 0) {
        struct sl_server *s = sl__admin_find_server(name);

        return s ? alter_server(s, data)
                 : sl__admin_error(404, "server '%s' not found", name);
    }
    if (strcmp(k, "services") == 0) {
        struct sl_service *svc = sl__admin_find_service(name);

        return svc ? alter_service(svc, data)
                   : sl__admin_error(404, "service '%s' not found", name);
    }
    if (strcmp(k, "monitors") == 0) {
        struct sl_monitor *m = sl__admin_find_monitor(name);

        return m ? alter_monitor(m, data)
                 : sl__admin_error(404, "monitor '%s' not found", name);
    }
    if (strcmp(k, "filters") == 0) {
        struct sl_filter_def *f = sl__admin_find_filter(name);

        if (f == NULL) {
            return sl__admin_error(404, "filter '%s' not found", name);
        }
        return params ? alter_filter_params(f, params) : sl__admin_no_content();
    }
    if (strcmp(k, "listeners") == 0) {
        struct sl_listener *l = sl__admin_find_listener(name);

        if (l == NULL) {
            return sl__admin_error(404, "listener '%s' not found", name);
        }
        return params ? alter_listener_params(l, params)
                      : sl__admin_no_content();
    }
    return sl__admin_error(405, "PATCH is not supported on %s", k);
}

/* ---- destroy ---- */

static struct admin_resp
destroy_server(struct sl_server *srv)
{
    struct sl_config *c = sl__config;
    struct sl_config *gen;

    for (size_t i = 0; i < c->nservices; i++) {
        if (index_of((void **)c->services[i]->servers,
                     c->services[i]->nservers, srv) <
            c->services[i]->nservers) {
            return sl__admin_error(400, "server '%s' is used by service '%s'; "
                               "unlink it first", srv->name,
                               c->services[i]->name);
        }
    }
    for (size_t i = 0; i < c->nmonitors; i++) {
        if (index_of((void **)c->monitors[i]->servers,
                     c->monitors[i]->nservers, srv) <
            c->monitors[i]->nservers) {
            return sl__admin_error(400, "server '%s' is monitored by '%s'",
                               srv->name, c->monitors[i]->name);
        }
    }
    gen = sl__config_next();
    if (gen == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    unpublish(gen, srv);
    sl__persist_remove(srv->name);
    sl_log_notice("destroyed server '%s'", srv->name);
    /* its pooled connections (each holds it) close at the pools' next
     * check, within a second (pool.c) */
    __atomic_store_n(&srv->persistpoolmax, 0, __ATOMIC_RELAXED);
    sl__obj_destroyed(SL_OBJ_SERVER, srv);
    return sl__admin_no_content();
}

/* Wait (bounded) until a stopped listener has closed its socket. */
static bool
listener_closed(struct sl_listener *l)
{
    for (int i = 0; i < 200; i++) {
        if (__atomic_load_n(&l->fd, __ATOMIC_ACQUIRE) < 0) {
            return true;
        }
        usleep(10000);
    }
    return false;
}

static struct admin_resp
destroy_listener(struct sl_listener *l)
{
    struct sl_config *gen = sl__config_next();

    if (gen == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    if (!sl__admin_is_stopped(l)) {
        sl__listener_stop(l);
    }
    listener_closed(l);
    sl__admin_set_stopped(l, false);
    unpublish(gen, l);
    sl__persist_remove(l->name);
    sl_log_notice("destroyed listener '%s'", l->name);
    sl__obj_destroyed(SL_OBJ_LISTENER, l);
    return sl__admin_no_content();
}

static struct admin_resp
destroy_object(struct admin_req *r)
{
    struct sl_config *c = sl__config;
    struct sl_config *gen;
    const char *k = r->seg[0];
    const char *name = r->seg[1];

    if (strcmp(k, "servers") == 0) {
        struct sl_server *s = sl__admin_find_server(name);

        return s ? destroy_server(s)
                 : sl__admin_error(404, "server '%s' not found", name);
    }
    if (strcmp(k, "listeners") == 0 || (strcmp(k, "services") == 0 &&
                                        r->nseg == 4)) {
        struct sl_listener *l = sl__admin_find_listener(r->seg[r->nseg - 1]);

        return l ? destroy_listener(l)
                 : sl__admin_error(404, "listener '%s' not found",
                               r->seg[r->nseg - 1]);
    }
    if (strcmp(k, "services") == 0) {
        struct sl_service *svc = sl__admin_find_service(name);

        if (svc == NULL) {
            return sl__admin_error(404, "service '%s' not found", name);
        }
        for (size_t i = 0; i < c->nlisteners; i++) {
            if (c->listeners[i]->service == svc) {
                return sl__admin_error(400, "service '%s' has listener '%s'; "
                                   "destroy it first", name,
                                   c->listeners[i]->name);
            }
        }
        if ((gen = sl__config_next()) == NULL) {
            return sl__admin_error(500, "out of memory");
        }
        unpublish(gen, svc);
        sl__persist_remove(name);
        sl__obj_destroyed(SL_OBJ_SERVICE, svc);
        return sl__admin_no_content();
    }
    if (strcmp(k, "filters") == 0) {
        struct sl_filter_def *f = sl__admin_find_filter(name);

        if (f == NULL) {
            return sl__admin_error(404, "filter '%s' not found", name);
        }
        for (size_t i = 0; i < c->nservices; i++) {
            if (index_of((void **)c->services[i]->filters,
                         c->services[i]->nfilters, f) <
                c->services[i]->nfilters) {
                return sl__admin_error(400, "filter '%s' is used by service "
                                   "'%s'", name, c->services[i]->name);
            }
        }
        if ((gen = sl__config_next()) == NULL) {
            return sl__admin_error(500, "out of memory");
        }
        unpublish(gen, f);
        sl__persist_remove(name);
        sl__obj_destroyed(SL_OBJ_FILTER, f);
        return sl__admin_no_content();
    }
    if (strcmp(k, "monitors") == 0) {
        struct sl_monitor *m = sl__admin_find_monitor(name);

        return m ? destroy_monitor(m)
                 : sl__admin_error(404, "monitor '%s' not found", name);
    }
    return sl__admin_error(405, "DELETE is not supported on %s", k);
}

/* ---- states, stop/start ---- */

static bool
monitored(const struct sl_server *srv)
{
    for (size_t i = 0; i < sl__config->nmonitors; i++) {
        const struct sl_monitor *m = sl__config->monitors[i];

        if (index_of((void **)m->servers, m->nservers, srv) < m->nservers) {
            return true;
        }
    }
    return false;
}

/* PUT servers/NAME/set|clear?state=maintenance|drain|running|master|
 * slave (the last three only for servers no monitor watches). */
static struct admin_resp
server_state(struct admin_req *r, struct sl_server *srv, bool set)
{
    static const struct {
        const char *name;
        uint32_t bits;
        bool admin;     /* allowed on monitored servers */
    } states[] = {
        {"maintenance", SL_SRV_MAINT, true},
        {"drain", SL_SRV_DRAINING, true},
        {"running", SL_SRV_RUNNING, false},
        {"master", SL_SRV_MASTER | SL_SRV_RUNNING, false},
        {"slave", SL_SRV_SLAVE | SL_SRV_RUNNING, false},
    };
    const char *st = sl__admin_query(r, "state");

    for (size_t i = 0; st && i < SL_ARRAY_LEN(states); i++) {
        if (strcasecmp(st, states[i].name) != 0) {
            continue;
        }
        if (!states[i].admin && monitored(srv)) {
            return sl__admin_error(400, "server '%s' is monitored: its '%s' "
                               "state is set by the monitor", srv->name, st);
        }
        if (set) {
            atomic_fetch_or(&srv->status, states[i].bits);
        } else {
            uint32_t bits = states[i].bits;

            if (bits != SL_SRV_RUNNING) {
                bits &= ~(uint32_t)SL_SRV_RUNNING;
            }
            atomic_fetch_and(&srv->status, ~bits);
        }
        sl_log_notice("server '%s': %s state '%s'", srv->name,
                      set ? "set" : "cleared", st);
        return sl__admin_no_content();
    }
    return sl__admin_error(400, "invalid or missing 'state' parameter '%s' "
                       "(expected maintenance, drain, running, master or "
                       "slave)", st ? st : "");
}

static struct admin_resp
listener_run(struct sl_listener *l, bool start)
{
    int rc;

    if (start == !sl__admin_is_stopped(l)) {
        return sl__admin_no_content();
    }
    if (!start) {
        sl__listener_stop(l);
        sl__admin_set_stopped(l, true);
        listener_closed(l);
        return sl__admin_no_content();
    }
    if (!listener_closed(l)) {
        return sl__admin_error(503, "listener '%s' is still closing", l->name);
    }
    rc = sl__listener_start(l);
    if (rc < 0) {
        return sl__admin_error(400, "listener '%s' cannot listen: %s", l->name,
                           strerror(-rc));
    }
    sl__admin_set_stopped(l, false);
    return sl__admin_no_content();
}

static struct admin_resp
stop_start(struct admin_req *r)
{
    const char *k = r->seg[0];
    bool start = strcmp(r->seg[2], "start") == 0;
    struct admin_resp res = sl__admin_no_content();

    if (strcmp(k, "listeners") == 0) {
        struct sl_listener *l = sl__admin_find_listener(r->seg[1]);

        return l ? listener_run(l, start)
                 : sl__admin_error(404, "listener '%s' not found", r->seg[1]);
    }
    if (strcmp(k, "services") == 0) {
        struct sl_service *svc = sl__admin_find_service(r->seg[1]);

        if (svc == NULL) {
            return sl__admin_error(404, "service '%s' not found", r->seg[1]);
        }
        for (size_t i = 0; i < sl__config->nlisteners; i++) {
            if (sl__config->listeners[i]->service == svc &&
                res.status < 300) {
                res = listener_run(sl__config->listeners[i], start);
            }
        }
        sl__admin_set_stopped(svc, !start);
        return res;
    }
    {
        struct sl_monitor *m = sl__admin_find_monitor(r->seg[1]);

        return m ? monitor_run(m, start)
                 : sl__admin_error(404, "monitor '%s' not found", r->seg[1]);
    }
}

/* ---- module commands ---- */

/*
 * GET or POST /v1/maxscale/modules/MOD/CMD?arg1&arg2. Only an admin's POST
 * may run a command that changes state (SL_MODCMD_ACTIVE): a GET of one is
 * 405, a read-only user's POST 403, so neither a viewer nor a link a
 * browser follows can fail over the cluster.
 */
struct admin_resp
sl__rest_modcmd(struct admin_req *r)
{
    const char *argv[16];
    int argc = sl__admin_query_args(r, argv, (int)SL_ARRAY_LEN(argv));
    bool is_post = strcmp(r->method, "POST") == 0;
    void *out = NULL;
    char *err = NULL;
    int rc;


    rc = sl__modcmd_call(r->seg[2], r->seg[3], is_post && r->is_admin, argv,
                         argc, &out, &err);
    if (rc < 0) {
        struct admin_resp res = sl__admin_error(
            rc == -ENOENT ? 404 : rc != -EACCES ? 400 : is_post ? 403 : 405,
            "%s", err ? err
            : rc == -ENOENT ? "no such module command" : "command failed");

        free(err);
        json_decref(out);
        return res;
    }
    free(err);
    if (out == NULL) {
        return sl__admin_no_content();
    }
    return sl__admin_ok(json_pack("{s:o}", "meta", (json_t *)out));
}

/* ---- dispatch ---- */

static int
kind_index(const char *seg)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(kinds); i++) {
        if (strcmp(kinds[i][0], seg) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* ---- the handlers of admin_routes.c's rows ---- */

struct admin_resp
sl__rest_log_rotate(struct admin_req *r)
{
    sl__log_reopen();
    sl__admin_audit_reopen();
    sl_log_notice("log rotated through the REST API");
    return sl__admin_no_content();
}

/* POST servers|services|listeners|monitors|filters */
struct admin_resp
sl__rest_create(struct admin_req *r)
{
    int k = kind_index(r->seg[0]);

    if (r->body == NULL) {
        return sl__admin_error(400, "POST needs a JSON body");
    }
    return create_object(r, kinds[k][1], NULL);
}

/* POST services/NAME/listeners */
struct admin_resp
sl__rest_create_listener(struct admin_req *r)
{
    if (r->body == NULL) {
        return sl__admin_error(400, "POST needs a JSON body");
    }
    if (sl__admin_find_service(r->seg[1]) == NULL) {
        return sl__admin_error(404, "service '%s' not found", r->seg[1]);
    }
    return create_object(r, "listener", r->seg[1]);
}

/* PUT servers/NAME/set|clear */
struct admin_resp
sl__rest_server_state(struct admin_req *r)
{
    struct sl_server *s = sl__admin_find_server(r->seg[1]);

    return s ? server_state(r, s, strcmp(r->seg[2], "set") == 0)
             : sl__admin_error(404, "server '%s' not found", r->seg[1]);
}

/* PUT services|listeners|monitors/NAME/stop|start */
struct admin_resp
sl__rest_stop_start(struct admin_req *r)
{
    return stop_start(r);
}

/* PATCH maxscale, PATCH KIND/NAME */
struct admin_resp
sl__rest_alter(struct admin_req *r)
{
    return alter_object(r);
}

/* PATCH monitors/NAME/relationships/servers */
struct admin_resp
sl__rest_relink_monitor(struct admin_req *r)
{
    struct sl_monitor *m = sl__admin_find_monitor(r->seg[1]);
    char err[256];
    char *ids;
    struct admin_resp res;

    if (m == NULL) {
        return sl__admin_error(404, "monitor '%s' not found", r->seg[1]);
    }
    ids = rel_ids(r->body, ',', err, sizeof(err));
    if (ids == NULL) {
        return sl__admin_error(400, "%s", err);
    }
    res = relink_monitor(m, ids);
    free(ids);
    return res;
}

/* PATCH services/NAME/relationships/servers */
struct admin_resp
sl__rest_relink_service(struct admin_req *r)
{
    struct sl_service *svc = sl__admin_find_service(r->seg[1]);
    char err[256];
    char *ids;
    struct admin_resp res;

    if (svc == NULL) {
        return sl__admin_error(404, "service '%s' not found", r->seg[1]);
    }
    ids = rel_ids(r->body, ',', err, sizeof(err));
    if (ids == NULL) {
        return sl__admin_error(400, "%s", err);
    }
    res = relink_service(svc, ids);
    free(ids);
    return res;
}

/* DELETE KIND/NAME, DELETE services/NAME/listeners/NAME */
struct admin_resp
sl__rest_destroy(struct admin_req *r)
{
    return destroy_object(r);
}
