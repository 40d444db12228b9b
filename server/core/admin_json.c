/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET resources of the REST API, shaped like MaxScale's /v1 JSON:API:
 * every document has "data" (one resource or an array) and "links"; a
 * resource has "id", "type", "attributes", "relationships" and "links".
 *
 * Configuration objects are read directly: their names and parameters are
 * immutable once published and their counters are atomics. Worker-owned
 * data (sessions, per-thread statistics) is collected by posting a message
 * to every worker (collect_workers) and waiting a bounded time for the
 * answers; each worker builds its own part of the JSON on its own thread.
 *
 * Context: the libmicrohttpd thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sluice/log.h>
#include <sluice/modcmd.h>
#include <sluice/monitor.h>
#include <sluice/server.h>
#include <sluice/worker.h>

#include "admin_int.h"
#include "config_int.h"
#include "module_int.h"
#include "stats.h"

#define COLLECT_TIMEOUT_MS 2000
#define LOG_TAIL_BYTES (32 * 1024)

/* ---- helpers ---- */

json_t *
sl__admin_params_json(const struct sl_params *p)
{
    json_t *o = json_object();
    const char *name;
    const char *value;
    size_t it = 0;

    while (p && sl_params_next(p, &it, &name, &value)) {
        const struct sl_param_spec *s = sl__params_spec(p, name);

        if (strcmp(name, "type") == 0) {
            continue;
        }
        /* By type, and by name for a module that declared a password as
         * a plain string. */
        if ((s && s->type == SL_PARAM_PASSWORD) || strstr(name, "password") ||
            strcmp(name, "passwd") == 0 || strcmp(name, "monitorpw") == 0) {
            value = "*****";
        }
        json_object_set_new(o, name, json_string(value));
    }
    return o;
}

static json_t *
rel(struct admin_req *r, const char *type, const char *const *names,
    size_t n)
{
    json_t *data = json_array();

    for (size_t i = 0; i < n; i++) {
        json_array_append_new(data, json_pack("{s:s, s:s}", "id", names[i],
                                              "type", type));
    }
    return json_pack("{s:o, s:{s:o}}", "data", data, "links", "self",
                     sl__admin_link(r, "%s/", type));
}

/* A relationship from an array of objects whose first field is the name
 * (every sl_* object starts with char name[SL_NAME_MAX]). */
static json_t *
rel_objs(struct admin_req *r, const char *type, void *const *objs, size_t n)
{
    const char **names = calloc(n ? n : 1, sizeof(*names));
    json_t *j;

    if (names == NULL) {
        return json_null();
    }
    for (size_t i = 0; i < n; i++) {
        names[i] = (const char *)objs[i];
    }
    j = rel(r, type, names, n);
    free(names);
    return j;
}

static json_t *
resource(struct admin_req *r, const char *type, const char *id,
         json_t *attrs, json_t *rels)
{
    return json_pack("{s:s, s:s, s:o, s:o, s:{s:o}}", "id", id, "type", type,
                     "attributes", attrs, "relationships",
                     rels ? rels : json_object(), "links", "self",
                     sl__admin_link(r, "%s%s/%s",
                                strcmp(type, "threads") == 0 ||
                                strcmp(type, "modules") == 0 ? "maxscale/"
                                                             : "",
                                type, id));
}

static struct admin_resp
document(struct admin_req *r, json_t *data)
{
    return sl__admin_ok(json_pack("{s:o, s:{s:o}}", "data", data, "links",
                              "self", sl__admin_link(r, "%s", r->url + 4)));
}

/* t as an HTTP date (MaxScale's format for `started`, `connected`,
 * `started_at`), into buf. */
static const char *
http_date(time_t t, char *buf, size_t len)
{
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return buf;
}

/* ---- servers ---- */

/* MaxScale's server attributes that come from its monitor (the server's
 * entry in monitor_diagnostics.server_info of the monitor watching it), as an
 * object to merge into the server's attributes; empty when no monitor
 * watches it or the monitor does not report them. */
static json_t *
server_monitor_facts(const struct sl_server *s)
{
    static const char *const keys[] = {
        "gtid_binlog_pos", "master_id", "node_id", "uptime",
        "slave_connections", "lock_held", "last_event", "triggered_at",
    };
    const struct sl_config *c = sl__config;
    json_t *facts = json_object();

    for (size_t i = 0; i < c->nmonitors; i++) {
        const struct sl_monitor *m = c->monitors[i];
        json_t *diag = NULL;
        json_t *one;
        size_t k;

        for (size_t j = 0; j < m->nservers && diag == NULL; j++) {
            if (m->servers[j] == s && m->ops->diagnostics && m->instance) {
                diag = m->ops->diagnostics(m->instance);
            }
        }
        json_array_foreach(json_object_get(diag, "server_info"), k, one) {
            if (json_is_string(json_object_get(one, "name")) &&
                strcmp(json_string_value(json_object_get(one, "name")),
                       s->name) == 0) {
                for (size_t n = 0; n < SL_ARRAY_LEN(keys); n++) {
                    json_t *v = json_object_get(one, keys[n]);

                    if (v != NULL) {
                        json_object_set(facts, keys[n], v);
                    }
                }
            }
        }
        json_decref(diag);
    }
    return facts;
}

static json_t *
server_json(struct admin_req *r, void *obj)
{
    struct sl_server *s = obj;
    const struct sl_config *c = sl__config;
    json_t *svcs = json_array();
    json_t *mons = json_array();
    char state[256];
    uint64_t rd = atomic_load(&s->routed_reads);
    uint64_t wr = atomic_load(&s->routed_writes);
    json_t *attrs;
    json_t *rels;
    json_t *monitor_facts;

    for (size_t i = 0; i < c->nservices; i++) {
        for (size_t j = 0; j < c->services[i]->nservers; j++) {
            if (c->services[i]->servers[j] == s) {
                json_array_append_new(svcs, json_pack(
                    "{s:s, s:s}", "id", c->services[i]->name, "type",
                    "services"));
            }
        }
    }
    for (size_t i = 0; i < c->nmonitors; i++) {
        for (size_t j = 0; j < c->monitors[i]->nservers; j++) {
            if (c->monitors[i]->servers[j] == s) {
                json_array_append_new(mons, json_pack(
                    "{s:s, s:s}", "id", c->monitors[i]->name, "type",
                    "monitors"));
            }
        }
    }
    sl_server_status_str(sl_server_status(s), state, sizeof(state));
    monitor_facts = server_monitor_facts(s);
    attrs = json_pack(
        "{s:s, s:o, s:I, s:I, s:s, s:o, s:{s:I, s:I, s:I, s:I, s:I}}",
        "state", state, "parameters", sl__admin_params_json(s->params),
        "replication_lag", (json_int_t)sl_server_replication_lag(s),
        "server_id", (json_int_t)sl_server_id(s),
        "version_string", s->version_string, "last_event", json_null(),
        "statistics",
        "connections", (json_int_t)sl_server_connections(s),
        "total_connections", (json_int_t)sl_server_total_connections(s),
        "routed_reads", (json_int_t)rd, "routed_writes", (json_int_t)wr,
        "routed_packets", (json_int_t)(rd + wr));
    json_object_set_new(attrs, "response_time", sl__admin_hist_json(&s->stats));
    {
        uint64_t in, out;

        json_t *st = json_object_get(attrs, "statistics");

        sl__stats_obj_bytes(&s->stats, &in, &out);
        json_object_set_new(st, "persistent_connections",
                            json_integer(atomic_load(&s->pool_size)));
        /* max_routing_connections: connections counted against it are
         * `connections` (pooled ones included); refused ones here */
        json_object_set_new(st, "routing_connections_refused", json_integer(
                                (json_int_t)atomic_load(
                                    &s->routing_conns_refused)));
        json_object_set_new(st, "max_pool_size",
                            json_integer(atomic_load(&s->pool_max)));
        json_object_set_new(st, "reused_connections", json_integer(
                                (json_int_t)atomic_load(&s->pool_reused)));
        json_object_set_new(st, "connection_pool_empty", json_integer(
                                (json_int_t)atomic_load(&s->pool_empty)));
        json_object_set_new(st, "pool_expired_connections", json_integer(
                                (json_int_t)atomic_load(&s->pool_expired)));
        json_object_set_new(st, "pool_lost_connections", json_integer(
                                (json_int_t)atomic_load(&s->pool_lost)));
        json_object_set_new(json_object_get(attrs, "statistics"),
                            "bytes_received", json_integer((json_int_t)in));
        json_object_set_new(json_object_get(attrs, "statistics"),
                            "bytes_sent", json_integer((json_int_t)out));
    }
    {
        /* the parameters PATCH changes live: their current values, not
         * the ones loaded (the file has the new ones for the next start) */
        json_t *pa = json_object_get(attrs, "parameters");
        char num[32];

        json_object_set_new(pa, "rank", json_string(
                                sl_server_rank(s) == SL_SERVER_RANK_SECONDARY
                                    ? "secondary" : "primary"));
        snprintf(num, sizeof(num), "%lld",
                 (long long)sl_server_max_routing_connections(s));
        json_object_set_new(pa, "max_routing_connections", json_string(num));
    }
    sl_server_gtid_pos(s, state, sizeof(state));
    json_object_set_new(attrs, "gtid_current_pos", json_string(state));
    json_object_update(attrs, monitor_facts);   /* the monitor's own */
    json_decref(monitor_facts);
    rels = json_object();
    if (json_array_size(svcs)) {
        json_object_set_new(rels, "services", json_pack("{s:o}", "data",
                                                        svcs));
    } else {
        json_decref(svcs);
    }
    if (json_array_size(mons)) {
        json_object_set_new(rels, "monitors", json_pack("{s:o}", "data",
                                                        mons));
    } else {
        json_decref(mons);
    }
    return resource(r, "servers", s->name, attrs, rels);
}

/* ---- services, listeners, monitors, filters ---- */

static json_t *
service_json(struct admin_req *r, void *obj)
{
    struct sl_service *s = obj;
    const struct sl_config *c = sl__config;
    json_t *listeners = json_array();
    json_t *diag = NULL;
    json_t *attrs;
    json_t *rels;

    for (size_t i = 0; i < c->nlisteners; i++) {
        if (c->listeners[i]->service == s) {
            json_array_append_new(listeners, json_pack(
                "{s:s, s:s}", "id", c->listeners[i]->name, "type",
                "listeners"));
        }
    }
    if (s->router->diagnostics) {
        diag = s->router->diagnostics(
            __atomic_load_n(&s->router_instance, __ATOMIC_ACQUIRE));
    }
    attrs = json_pack(
        "{s:s, s:s, s:o, s:I, s:I, s:o, s:{s:I, s:I}}",
        "router", s->router_module->info->name,
        "state", sl__admin_is_stopped(s) ? "Stopped" : "Started",
        "parameters", sl__admin_params_json(s->params),
        "connections", (json_int_t)atomic_load(&s->sessions),
        "total_connections", (json_int_t)atomic_load(&s->total_sessions),
        "router_diagnostics", diag ? diag : json_object(),
        "statistics", "connections", (json_int_t)atomic_load(&s->sessions),
        "total_connections",
        (json_int_t)atomic_load(&s->total_sessions));
    {
        char date[64];

        json_object_set_new(attrs, "started", json_string(
            http_date(s->created_at, date, sizeof(date))));
        json_object_set_new(json_object_get(attrs, "statistics"),
                            "max_connections", json_integer(
                                (json_int_t)atomic_load(&s->peak_sessions)));
    }
    json_object_set_new(attrs, "response_time", sl__admin_hist_json(&s->stats));
    {
        uint64_t failed = 0;

        for (int k = 0; k < SL_AUTH_FAIL_COUNT; k++) {
            failed += atomic_load_explicit(&s->auth_failures[k],
                                           memory_order_relaxed);
        }
        json_object_set_new(json_object_get(attrs, "statistics"),
                            "failed_auths", json_integer((json_int_t)failed));
    }
    rels = json_pack("{s:o, s:o, s:{s:o}}",
                     "servers", rel_objs(r, "servers", (void *const *)
                                         s->servers, s->nservers),
                     "filters", rel_objs(r, "filters", (void *const *)
                                         s->filters, s->nfilters),
                     "listeners", "data", listeners);
    return resource(r, "services", s->name, attrs, rels);
}

static json_t *
listener_json(struct admin_req *r, void *obj)
{
    struct sl_listener *l = obj;
    const char *n = l->service->name;
    json_t *attrs = json_pack(
        "{s:s, s:s, s:o, s:{s:I, s:I}}",
        "state", sl__admin_is_stopped(l) ? "Stopped" : "Running",
        "protocol", l->protocol_module->info->name,
        "parameters", sl__admin_params_json(l->params), "statistics",
        "connections", (json_int_t)atomic_load(&l->connections),
        "total_connections", (json_int_t)atomic_load(&l->connections_total));

    return resource(r, "listeners", l->name, attrs,
                    json_pack("{s:o}", "services", rel(r, "services", &n,
                                                       1)));
}

static json_t *
monitor_json(struct admin_req *r, void *obj)
{
    struct sl_monitor *m = obj;
    json_t *diag = m->ops->diagnostics && m->instance
                       ? m->ops->diagnostics(m->instance) : NULL;
    json_t *attrs = json_pack(
        "{s:s, s:s, s:I, s:o, s:o}", "module", m->module->info->name,
        "state", sl__admin_is_stopped(m) ? "Stopped" : "Running",
        "ticks", (json_int_t)atomic_load(&m->ticks),
        "parameters", sl__admin_params_json(m->params),
        "monitor_diagnostics", diag ? diag : json_object());

    return resource(r, "monitors", m->name, attrs,
                    json_pack("{s:o}", "servers",
                              rel_objs(r, "servers", (void *const *)
                                       m->servers, m->nservers)));
}

static json_t *
filter_json(struct admin_req *r, void *obj)
{
    struct sl_filter_def *f = obj;
    const struct sl_config *c = sl__config;
    json_t *diag = f->ops->diagnostics && f->instance
                       ? f->ops->diagnostics(f->instance) : NULL;
    json_t *svcs = json_array();
    json_t *attrs = json_pack("{s:s, s:o, s:o}", "module",
                              f->module->info->name, "parameters",
                              sl__admin_params_json(f->params),
                              "filter_diagnostics",
                              diag ? diag : json_object());

    for (size_t i = 0; i < c->nservices; i++) {
        for (size_t j = 0; j < c->services[i]->nfilters; j++) {
            if (c->services[i]->filters[j] == f) {
                json_array_append_new(svcs, json_pack(
                    "{s:s, s:s}", "id", c->services[i]->name, "type",
                    "services"));
            }
        }
    }
    return resource(r, "filters", f->name, attrs,
                    json_pack("{s:{s:o}}", "services", "data", svcs));
}

/* Generic collection/single-object handler over a config array. */
typedef json_t *(*obj_json_fn)(struct admin_req *r, void *obj);

static struct admin_resp
objects(struct admin_req *r, const char *kind, void **arr, size_t n,
        obj_json_fn fn)
{
    json_t *data;

    if (r->nseg > 2) {
        return sl__admin_error(404, "unknown resource '%.200s'", r->url);
    }
    if (r->nseg == 2) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp((const char *)arr[i], r->seg[1]) == 0) {
                return document(r, fn(r, arr[i]));
            }
        }
        return sl__admin_error(404, "%s '%s' not found", kind, r->seg[1]);
    }
    data = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(data, fn(r, arr[i]));
    }
    return document(r, data);
}

/* ---- worker data: sessions and threads ---- */

struct collect {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int pending;
    int refs;
    bool want_sessions;
    uint64_t session_id;       /* 0: all */
    json_t *results[256];      /* per worker index */
};

static void
collect_unref(struct collect *c)
{
    bool last;

    pthread_mutex_lock(&c->lock);
    last = --c->refs == 0;
    pthread_mutex_unlock(&c->lock);
    if (last) {
        for (size_t i = 0; i < SL_ARRAY_LEN(c->results); i++) {
            json_decref(c->results[i]);
        }
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->cond);
        free(c);
    }
}

/* A session's kernel forwarding (splice.c), or null when it never was. */
static json_t *
kfwd_json(const struct sl_session_info *ses)
{
    const struct sl_splice_stats *st = &ses->kfwd;

    if (!ses->has_kfwd) {
        return json_null();
    }
    return json_pack("{s:b, s:I, s:I, s:I, s:I}", "active", st->active,
                     "client_bytes", (json_int_t)st->client_bytes,
                     "client_packets", (json_int_t)st->client_packets,
                     "server_bytes", (json_int_t)st->server_bytes,
                     "server_packets", (json_int_t)st->server_packets);
}

/* The wall-clock time ms_ago milliseconds ago as an HTTP date. */
static const char *
http_date_ms_ago(uint64_t ms_ago, char *buf, size_t len)
{
    struct timespec now;

    clock_gettime(CLOCK_REALTIME, &now);
    return http_date((time_t)(((uint64_t)now.tv_sec * 1000 +
                               (uint64_t)now.tv_nsec / 1000000 - ms_ago) /
                              1000), buf, len);
}

static void
session_attrs(const struct sl_session_info *ses, void *arg)
{
    json_t *backends = json_array();
    char date[64];

    for (size_t i = 0; i < ses->nbackends; i++) {
        json_array_append_new(backends, json_string(ses->backends[i]));
    }
    json_array_append_new(arg, json_pack(
        "{s:I, s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:o, s:s, s:f, s:f}",
        "id", (json_int_t)ses->id, "service", ses->service,
        "state", ses->state, "user", ses->user, "remote", ses->remote,
        "database", ses->db, "backends", backends,
        "bytes_read", (json_int_t)ses->bytes_read,
        "bytes_written", (json_int_t)ses->bytes_written,
        "kernel_forwarding", kfwd_json(ses),
        "connected", http_date_ms_ago(ses->alive_ms, date, sizeof(date)),
        "seconds_alive", (double)ses->alive_ms / 1000.0,
        "idle", (double)ses->idle_ms / 1000.0));
    {
        json_t *o = json_array_get(arg, json_array_size(arg) - 1);

        /* retain_last_statements / session_trace (history.c) */
        json_object_set(o, "queries", ses->queries ? ses->queries
                                                   : json_null());
        json_object_set(o, "log", ses->log ? ses->log : json_null());
    }
}

/* A worker's attributes.stats: MaxScale's thread fields that Sluice
 * measures (docs/rest-api.md says which it leaves out), plus its own. */
static json_t *
thread_stats(const struct sl_worker_stats *st)
{
    const struct {
        const char *name;
        uint64_t value;
    } counts[] = {
        {"current_descriptors", (uint64_t)(st->listeners + st->clients +
                                           st->backends + st->other)},
        {"total_descriptors", st->total_descriptors},
        {"listeners", (uint64_t)st->listeners},
        {"sessions", (uint64_t)st->clients},
        {"backend_connections", (uint64_t)st->backends},
        {"zombies", st->zombies},
        {"event_queue_length", st->event_queue_length},
        {"bytes_read", st->bytes_read}, {"bytes_written", st->bytes_written},
        {"reads", st->reads}, {"writes", st->writes}, {"errors", st->errors},
        {"hangups", st->hangups}, {"accepts", st->accepts},
        {"events", st->events},
    };
    json_t *o = json_object();

    for (size_t i = 0; i < SL_ARRAY_LEN(counts); i++) {
        json_object_set_new(o, counts[i].name,
                            json_integer((json_int_t)counts[i].value));
    }
    json_object_set_new(o, "avg_event_queue_length", json_integer(
        st->polls ? (json_int_t)((st->events + st->polls / 2) / st->polls)
                  : 0));
    json_object_set_new(o, "max_event_queue_length",
                        json_integer((json_int_t)st->max_batch));
    if (st->has_load) {
        json_object_set_new(o, "load", json_pack(
            "{s:i, s:i, s:i}", "last_second", (int)st->load[0],
            "last_minute", (int)st->load[1], "last_hour", (int)st->load[2]));
    }
    return o;
}

/* Runs on a worker: describe its own sessions or DCB counts (through the
 * core's snapshot, sl__worker_snapshot). */
static void
collect_on_worker(void *arg)
{
    struct collect *c = arg;
    struct sl_worker *w = sl_worker_current();
    json_t *out = c->want_sessions ? json_array() : json_object();
    struct sl_worker_stats st;

    sl__worker_snapshot(&st, c->session_id,
                        c->want_sessions ? session_attrs : NULL, out);
    if (!c->want_sessions) {
        json_object_set_new(out, "stats", thread_stats(&st));
    }
    pthread_mutex_lock(&c->lock);
    c->results[sl_worker_index(w)] = out;
    c->pending--;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    collect_unref(c);
}

/* Ask every worker; NULL on allocation failure or timeout. */
static struct collect *
collect_workers(bool sessions, uint64_t id)
{
    struct collect *c = calloc(1, sizeof(*c));
    int n = sl_worker_count();
    struct timespec dl;

    if (c == NULL || n > (int)SL_ARRAY_LEN(c->results)) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->want_sessions = sessions;
    c->session_id = id;
    c->refs = 1;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&c->lock);
        c->refs++;
        c->pending++;
        pthread_mutex_unlock(&c->lock);
        if (sl_worker_post(sl_worker_get(i), collect_on_worker, c) != 0) {
            pthread_mutex_lock(&c->lock);
            c->refs--;
            c->pending--;
            pthread_mutex_unlock(&c->lock);
        }
    }
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += COLLECT_TIMEOUT_MS / 1000;
    pthread_mutex_lock(&c->lock);
    while (c->pending > 0) {
        if (pthread_cond_timedwait(&c->cond, &c->lock, &dl) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return c;
}

struct admin_resp
sl__rest_sessions_get(struct admin_req *r)
{
    uint64_t id = 0;
    struct collect *c;
    json_t *data = json_array();
    char idbuf[32];

    if (r->nseg > 2) {
        json_decref(data);
        return sl__admin_error(404, "unknown resource '%.200s'", r->url);
    }
    if (r->nseg == 2) {
        char *end;

        id = strtoull(r->seg[1], &end, 10);
        if (*end != '\0' || id == 0) {
            json_decref(data);
            return sl__admin_error(404, "session '%.64s' not found", r->seg[1]);
        }
    }
    c = collect_workers(true, id);
    if (c == NULL) {
        json_decref(data);
        return sl__admin_error(503, "workers did not answer");
    }
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < sl_worker_count(); i++) {
        size_t k;
        json_t *a;

        json_array_foreach(c->results[i], k, a) {
            snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(
                         json_object_get(a, "id")));
            json_array_append_new(data, resource(r, "sessions", idbuf,
                                                 json_deep_copy(a), NULL));
        }
    }
    pthread_mutex_unlock(&c->lock);
    collect_unref(c);
    if (id == 0) {
        return document(r, data);
    }
    if (json_array_size(data) == 0) {
        json_decref(data);
        return sl__admin_error(404, "session '%s' not found", r->seg[1]);
    }
    json_incref(json_array_get(data, 0));
    {
        json_t *one = json_array_get(data, 0);

        json_decref(data);
        return document(r, one);
    }
}

struct admin_resp
sl__rest_threads_get(struct admin_req *r)
{
    struct collect *c = collect_workers(false, 0);
    json_t *data = json_array();
    char id[16];

    if (c == NULL) {
        json_decref(data);
        return sl__admin_error(503, "workers did not answer");
    }
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < sl_worker_count(); i++) {
        json_t *a = c->results[i] ? json_deep_copy(c->results[i])
                                  : json_pack("{s:b}", "unresponsive", 1);

        snprintf(id, sizeof(id), "%d", i);
        if (r->nseg == 3 && strcmp(r->seg[2], id) != 0) {
            json_decref(a);
            continue;
        }
        json_array_append_new(data, resource(r, "threads", id, a, NULL));
    }
    pthread_mutex_unlock(&c->lock);
    collect_unref(c);
    if (r->nseg == 3) {
        json_t *one = json_incref(json_array_get(data, 0));

        json_decref(data);
        return one ? document(r, one)
                   : sl__admin_error(404, "thread '%s' not found", r->seg[2]);
    }
    return document(r, data);
}

/* ---- maxscale, modules, logs ---- */

struct admin_resp
sl__rest_maxscale_get(struct admin_req *r)
{
    const struct sl_global *g = &sl__config->global;
    char started[64];
    json_t *attrs;

    http_date(time(NULL) - (time_t)sl__admin_uptime(), started,
              sizeof(started));
    attrs = json_pack(
        "{s:s, s:s, s:I, s:i, s:i, s:b, s:o}",
        "version", SLUICE_VERSION, "started_at", started,
        "uptime", (json_int_t)sl__admin_uptime(), "threads", g->threads,
        "process_id", (int)getpid(),
        "default_admin_credentials", sl__admin_users_default_active(),
        "parameters", sl__admin_params_json(g->params));
    /* passive changes at run time (PATCH): the live value. */
    json_object_set_new(json_object_get(attrs, "parameters"), "passive",
                        json_boolean(sl_monitor_passive()));
    json_object_set_new(attrs, "config_sync", sl__csync_json());
    json_object_set_new(attrs, "config_generation", json_integer(
        (json_int_t)atomic_load(&sl__config_generations)));
    json_object_set_new(attrs, "event_model", json_string(
        g->event_model == SL_EVENT_MODEL_SHARED ? "shared" : "pinned"));
    json_object_set_new(attrs, "destroyed_objects",
                        json_integer(sl__obj_destroyed_live()));
    return document(r, json_pack("{s:s, s:s, s:o, s:{s:o}}", "id",
                                 "maxscale", "type", "maxscale",
                                 "attributes", attrs, "links", "self",
                                 sl__admin_link(r, "maxscale")));
}

static const char *const param_type_names[] = {
    "string", "password", "int", "count", "bool", "size", "duration",
    "enum", "enum_mask", "serverlist", "target", "service", "filters",
    "path", "regex",
};

static json_t *
specs_json(const struct sl_param_spec *specs)
{
    json_t *arr = json_array();

    for (const struct sl_param_spec *s = specs; s && s->name; s++) {
        json_t *p = json_pack(
            "{s:s, s:s, s:b, s:s}", "name", s->name, "type",
            (size_t)s->type < SL_ARRAY_LEN(param_type_names)
                ? param_type_names[s->type] : "unknown",
            "mandatory", (s->flags & SL_PARAM_F_MANDATORY) != 0,
            "description", s->description ? s->description : "");

        /* What a MaxScale user gets from the name: implemented, accepted
         * with a start-up warning, or refused (docs/configuration.md). */
        json_object_set_new(p, "status", json_string(
            s->flags & SL_PARAM_F_REFUSED ? "refused"
            : s->flags & SL_PARAM_F_IGNORED ? "ignored" : "supported"));
        if (s->flags & SL_PARAM_F_DEPRECATED) {
            json_object_set_new(p, "deprecated", json_true());
        }

        if (s->default_value) {
            json_object_set_new(p, "default_value",
                                json_string(s->default_value));
        }
        if (s->enum_values) {
            json_t *ev = json_array();

            for (const char *const *e = s->enum_values; *e; e++) {
                json_array_append_new(ev, json_string(*e));
            }
            json_object_set_new(p, "enum_values", ev);
        }
        json_array_append_new(arr, p);
    }
    return arr;
}

static json_t *
commands_json(struct admin_req *r, const char *module)
{
    json_t *arr = json_array();
    const struct sl_modcmd_arg_spec *args;
    const char *mod;
    const char *cmd;
    const char *desc;
    enum sl_modcmd_kind kind;
    size_t it = 0;
    int nargs;

    while (sl_modcmd_next(&it, &mod, &cmd, &desc, &kind,
                                            &args, &nargs)) {
        json_t *params = json_array();

        if (strcasecmp(mod, module) != 0) {
            json_decref(params);
            continue;
        }
        for (int i = 0; i < nargs; i++) {
            json_array_append_new(params, json_pack(
                "{s:s, s:b, s:i}", "description",
                args[i].description ? args[i].description : "",
                "required", !args[i].optional, "type", (int)args[i].type));
        }
        json_array_append_new(arr, json_pack(
            "{s:s, s:s, s:{s:s, s:s, s:o}}", "id", cmd, "type",
            "module_command", "attributes", "method",
            kind == SL_MODCMD_ACTIVE ? "POST" : "GET", "description",
            desc ? desc : "", "parameters", params));
    }
    return arr;
}

static json_t *
module_json(struct admin_req *r, const struct sl_loaded_module *lm)
{
    const struct sl_module *m = lm->info;

    return resource(r, "modules", m->name, json_pack(
        "{s:s, s:s, s:s, s:s, s:o, s:o}", "module_type",
        sl__module_type_name(m->type), "version",
        m->version ? m->version : "", "description",
        m->description ? m->description : "", "path", lm->path,
        "parameters", specs_json(m->params), "commands",
        commands_json(r, m->name)), NULL);
}

/* The core's parameter tables as modules of type "core", reachable by
 * name only (GET /v1/maxscale/modules/servers...): what a server, service,
 * listener, monitor, filter or [maxscale] section takes besides its
 * module's parameters. */
static const struct {
    const char *name;
    const char *section;
} core_tables[] = {
    {"maxscale", "maxscale"}, {"servers", "server"},
    {"services", "service"}, {"listeners", "listener"},
    {"monitors", "monitor"}, {"filters", "filter"},
};

static json_t *
core_module_json(struct admin_req *r, const char *name, const char *section)
{
    return resource(r, "modules", name, json_pack(
        "{s:s, s:s, s:s, s:o, s:o}", "module_type", "core", "version",
        SLUICE_VERSION, "description", "the core's parameters of every "
        "section of this type", "parameters",
        specs_json(sl__config_core_specs(section)), "commands",
        json_array()), NULL);
}

struct admin_resp
sl__rest_modules_get(struct admin_req *r)
{
    json_t *data = json_array();

    for (size_t i = 0; r->nseg == 3 && i < SL_ARRAY_LEN(core_tables); i++) {
        if (strcasecmp(core_tables[i].name, r->seg[2]) == 0) {
            json_decref(data);
            return document(r, core_module_json(r, core_tables[i].name,
                                                core_tables[i].section));
        }
    }

    for (size_t i = 0; i < sl__module_count(); i++) {
        const struct sl_loaded_module *lm = sl__module_at(i);

        if (r->nseg == 3) {
            if (strcasecmp(lm->info->name, r->seg[2]) == 0) {
                json_decref(data);
                return document(r, module_json(r, lm));
            }
            continue;
        }
        json_array_append_new(data, module_json(r, lm));
    }
    if (r->nseg == 3) {
        json_decref(data);
        return sl__admin_error(404, "module '%s' not found", r->seg[2]);
    }
    return document(r, data);
}

static json_t *
log_tail(const char *path)
{
    json_t *lines = json_array();
    FILE *f = path[0] ? fopen(path, "r") : NULL;
    char *buf;
    char *save = NULL;
    long size;

    if (f == NULL) {
        return lines;
    }
    buf = calloc(1, LOG_TAIL_BYTES + 1);
    if (buf && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0) {
        size_t n;
        char *first;

        fseek(f, size > LOG_TAIL_BYTES ? size - LOG_TAIL_BYTES : 0,
              SEEK_SET);
        n = fread(buf, 1, LOG_TAIL_BYTES, f);
        buf[n] = '\0';
        first = size > LOG_TAIL_BYTES ? strchr(buf, '\n') : buf;
        for (char *l = strtok_r(first ? first : buf, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save)) {
            json_array_append_new(lines, json_string(l));
        }
    }
    free(buf);
    fclose(f);
    return lines;
}

struct admin_resp
sl__rest_logs_get(struct admin_req *r)
{
    const char *path = sl__log_path();

    return document(r, json_pack(
        "{s:s, s:s, s:{s:s, s:i, s:o}}", "id", "logs", "type", "logs",
        "attributes", "log_file", path, "log_level",
        (int)atomic_load(&sl_log_max_level), "log", log_tail(path)));
}

/* GET servers, services, listeners, monitors, filters (and one by name) */
struct admin_resp
sl__rest_objects_get(struct admin_req *r)
{
    static const struct {
        const char *path;
        const char *kind;
        size_t arr;      /* offsets in struct sl_config */
        size_t n;
        obj_json_fn fn;
    } kinds[] = {
        {"servers", "server", offsetof(struct sl_config, servers),
         offsetof(struct sl_config, nservers), server_json},
        {"services", "service", offsetof(struct sl_config, services),
         offsetof(struct sl_config, nservices), service_json},
        {"listeners", "listener", offsetof(struct sl_config, listeners),
         offsetof(struct sl_config, nlisteners), listener_json},
        {"monitors", "monitor", offsetof(struct sl_config, monitors),
         offsetof(struct sl_config, nmonitors), monitor_json},
        {"filters", "filter", offsetof(struct sl_config, filters),
         offsetof(struct sl_config, nfilters), filter_json},
    };
    char *c = (char *)sl__config;

    for (size_t i = 0; i < SL_ARRAY_LEN(kinds); i++) {
        if (strcmp(r->seg[0], kinds[i].path) == 0) {
            return objects(r, kinds[i].kind, *(void ***)(c + kinds[i].arr),
                           *(size_t *)(c + kinds[i].n), kinds[i].fn);
        }
    }
    return sl__admin_error(404, "unknown resource '%.200s'", r->url);
}
