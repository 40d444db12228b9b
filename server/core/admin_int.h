/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin REST API's internals, shared by admin.c (the HTTP server,
 * authentication and dispatch), admin_json.c (the GET documents),
 * admin_users.c (the admin accounts) and runtime.c (objects created,
 * altered and destroyed at run time, and their persistence).
 *
 * Context: everything here runs on libmicrohttpd's single internal thread
 * (requests are handled one at a time), except sl__admin_start/stop (main)
 * and sl__admin_answer (the thread that ran a deferred request's work:
 * /v1/sql queries, admin_sql.c).
 * That thread is the only one that changes the configuration's object
 * arrays after start-up; workers are reached by sl_worker_post only.
 */
#ifndef SLUICE_CORE_ADMIN_INT_H
#define SLUICE_CORE_ADMIN_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>

#include "internal.h"

#define SL_ADMIN_MAX_BODY (1024 * 1024)

/* A response: an HTTP status and an optional JSON document (owned), or
 * instead of the document a text (owned, free()) of type ctype. */
struct admin_resp {
    int status;
    json_t *doc;
    char *text;
    const char *ctype;
    char *location;                 /* Location header (owned) or NULL */
    char *cookie;                   /* Set-Cookie header (owned) or NULL */
};

/* One parsed request. */
struct admin_req {
    const char *method;
    const char *url;                /* path only, as MHD gives it */
    char *seg[8];                   /* path segments after /v1 */
    int nseg;
    char *pathbuf;                  /* storage for seg */
    json_t *body;                   /* parsed body or NULL */
    void *conn;                     /* struct MHD_Connection * */
    bool is_admin;                  /* role allows writes */
    bool https;                     /* served over TLS (for links) */
    char host[300];                 /* Host header, for links */
    struct admin_deferred *deferred;   /* set by sl__admin_defer */
};

/* A handler that answers from another thread returns this status after
 * sl__admin_defer(r): the HTTP connection is suspended (other requests go
 * on) until that thread calls sl__admin_answer(handle, res) exactly once.
 * Nothing of r may be used after the handler returns. */
#define SL_ADMIN_DEFERRED 0
struct admin_deferred;
struct admin_deferred *sl__admin_defer(struct admin_req *r);
void sl__admin_answer(struct admin_deferred *d, struct admin_resp res);
/* admin.c, on its thread once the connection was resumed: whether d was
 * answered, with the answer in *res (then d is freed). */
bool sl__admin_answered(struct admin_deferred *d, struct admin_resp *res);
/* admin.c, when the HTTP connection ends before the answer was sent: free
 * d and its answer. Every deferred request is answered before
 * libmicrohttpd stops (sl__admin_sql_cancel_all), so d is answered. */
void sl__admin_deferred_free(struct admin_deferred *d);

/* Start/stop the REST API (main thread). 0 or -errno. */
int sl__admin_start(const struct sl_config *cfg);
void sl__admin_stop(void);
/* Free what run-time changes retired. Main, after the workers stopped. */
void sl__admin_finish(void);

/* ---- admin_common.c ---- */
/* Seconds since sl__admin_start (the daemon's uptime). */
uint64_t sl__admin_uptime(void);
void sl__admin_mark_started(void);

/* Query argument of the current request, NULL if absent. */
const char *sl__admin_query(struct admin_req *r, const char *name);
/* Header of the current request, NULL if absent. */
const char *sl__admin_header(struct admin_req *r, const char *name);
/* The query's keys in order (module command arguments); their count. */
int sl__admin_query_args(struct admin_req *r, const char **argv, int max);
/* Error responses: {"errors":[{"detail": fmt...}]}. */
struct admin_resp sl__admin_error(int status, const char *fmt, ...)
    SL_PRINTF(2, 3);
struct admin_resp sl__admin_ok(json_t *doc);
struct admin_resp sl__admin_no_content(void);
/* "http://HOST/v1/" + path, for links. */
json_t *sl__admin_link(struct admin_req *r, const char *fmt, ...)
    SL_PRINTF(2, 3);

/* ---- admin_users.c ---- */
int sl__admin_users_load(const char *datadir);
void sl__admin_users_free(void);
/* 1 admin, 0 basic (read-only), -1 refused. local: peer is loopback. */
int sl__admin_users_check(const char *user, const char *password, bool local);
bool sl__admin_users_default_active(void);

/* ---- admin_json.c: GET resources ---- */
json_t *sl__admin_params_json(const struct sl_params *p);
/* The object called name in the running generation, or NULL (admin
 * thread: the only writer, so it reads sl__config as it is). */
#define sl__admin_find_server(name) sl__find_server(sl__config, (name))
#define sl__admin_find_service(name) sl__find_service(sl__config, (name))
#define sl__admin_find_listener(name) sl__find_listener(sl__config, (name))
#define sl__admin_find_monitor(name) sl__find_monitor(sl__config, (name))
#define sl__admin_find_filter(name) sl__find_filter(sl__config, (name))

/* ---- admin_paths.c ---- */
/* Check the path parameters (filebase, socket, *file, SL_PARAM_PATH) of a
 * create or alter of kind (modspecs: its module's table, may be NULL):
 * each must lie under logdir or admin_secure_paths, not under datadir or
 * persistdir. 0, or -1 with *res set (403). */
int sl__admin_check_paths(const char *kind, const struct sl_param_spec *modspecs,
                      json_t *params, struct admin_resp *res);
/* The parameter table of the loaded module named name, or NULL. */
const struct sl_param_spec *sl__admin_module_specs(const char *name);

/* ---- admin_routes.c: the routing table ---- */

enum sl_admin_role {
    SL_ADMIN_ROLE_BASIC = 0,   /* read-only accounts */
    SL_ADMIN_ROLE_ADMIN = 1,
};

typedef struct admin_resp (*sl_admin_handler)(struct admin_req *r);

struct sl_admin_route {
    const char *method;        /* "GET" (also HEAD), "POST|PATCH", ... */
    const char *path;          /* after /v1/: "servers/ *", "users/ **" */
    sl_admin_handler handler;
    enum sl_admin_role role;   /* required of the caller */
};

/* The row for method and path, or NULL; *path_known tells whether a row
 * with another method has the path (405 rather than 404). */
const struct sl_admin_route *sl__admin_route_find(const char *method,
                                                  char *const *seg,
                                                  int nseg,
                                                  bool *path_known);
/* The role a request needs: its row's, or for a path no row has, basic
 * for reads and admin for writes. */
enum sl_admin_role sl__admin_route_role(const char *method, char *const *seg,
                                        int nseg);

/* The handlers (admin_json.c: reads; runtime.c: writes and module
 * commands; admin_users.c: accounts). Each is reached only through a row
 * whose pattern it relies on (segment counts and names). */
struct admin_resp sl__rest_maxscale_get(struct admin_req *r);
struct admin_resp sl__rest_threads_get(struct admin_req *r);
struct admin_resp sl__rest_modules_get(struct admin_req *r);
struct admin_resp sl__rest_logs_get(struct admin_req *r);
struct admin_resp sl__rest_objects_get(struct admin_req *r);
struct admin_resp sl__rest_sessions_get(struct admin_req *r);
struct admin_resp sl__rest_users_get(struct admin_req *r);
struct admin_resp sl__rest_users_write(struct admin_req *r);

/* ---- admin_metrics.c, admin_queries.c ---- */
/* GET /metrics (Prometheus text format 0.0.4). */
struct admin_resp sl__rest_metrics_get(struct admin_req *r);
/* GET, DELETE /v1/sluice/queries. */
struct admin_resp sl__rest_queries(struct admin_req *r);
/* admin_sql.c: /v1/sql (MaxScale's SQL resource); _stop closes every
 * SQL connection and stops its reaper (main, after the MHD thread). */
struct admin_resp sl__rest_sql(struct admin_req *r);
void sl__admin_sql_stop(void);
/* Cut short every query running on its own thread and wait until each
 * has answered (main, before libmicrohttpd stops). */
void sl__admin_sql_cancel_all(void);
/* admin_logs.c: GET /v1/maxscale/logs/data (alias .../entries). */
struct admin_resp sl__rest_log_data(struct admin_req *r);
/* admin_audit.c: the REST API audit file (admin_audit*). Configured at
 * start; _alter takes admin_audit, admin_audit_file or
 * admin_audit_exclude_methods from PATCH /v1/maxscale (0, or -1 with *err
 * set); _reopen follows log rotation. */
int sl__admin_audit_configure(const struct sl_params *p, const char *logdir);
int sl__admin_audit_alter(const char *key, json_t *v, struct admin_resp *err);
bool sl__admin_audit_enabled(void);
void sl__admin_audit_reopen(void);
void sl__admin_audit_close(void);
/* One row: the request, who made it from where, its status and how long
 * it took; body (len bytes) with its passwords masked. */
void sl__admin_audit(const char *method, const char *url, const char *user,
                     const char *client, int status, double seconds,
                     const char *body, size_t len, bool auth_failed);
/* admin_qc.c: GET /v1/maxscale/query_classifier/classify|cache. */
struct admin_resp sl__rest_query_classifier(struct admin_req *r);
/* admin_static.c: the dashboard's files ("/", /dashboard/...). */
void sl__admin_static_init(const char *dir);
bool sl__admin_static_path(const char *url);
struct admin_resp sl__admin_static_get(struct admin_req *r);
struct sl_obj_slots;
/* {"count", "errors", "sum", "buckets": [{"le", "count"}...], p50...}:
 * an object's merged response-time histogram for the REST resources. */
json_t *sl__admin_hist_json(struct sl_obj_slots *const *slotsp);

/* ---- config_sync.c: configuration synchronization ---- */
/* Serializes REST request handling with replays of synchronized changes. */
void sl__csync_lock(void);
void sl__csync_unlock(void);
bool sl__csync_enabled(void);
/* Whether r is a change that is synchronized (create, alter, relink or
 * destroy of a server, service, listener, monitor or filter). */
bool sl__csync_synced(const struct admin_req *r);
bool sl__csync_synced_path(const char *method, char *const *seg, int nseg);
/* Check a document from the cluster whole before anything is applied
 * (shape, versions 1..version, every change a synchronized route; needs
 * sl__csync_set_routing). 0, or -1 with msg. */
int sl__csync_check_doc(json_t *doc, long long version, char *msg,
                        size_t len);
/* main hands over the routing (sl__admin_route_find and
 * sl__admin_split_path) used to replay changes. */
typedef const struct sl_admin_route *(*sl__csync_route_fn)(
    const char *method, char *const *seg, int nseg, bool *path_known);
typedef int (*sl__csync_split_fn)(const char *url, char **pathbuf,
                                  char **seg, int maxseg, int *nseg);
void sl__csync_set_routing(sl__csync_route_fn find, sl__csync_split_fn split);
/* Run h(r) inside the cluster's version check (see config_sync.c). */
struct admin_resp sl__csync_change(struct admin_req *r, sl_admin_handler h);
/* config_sync for GET /v1/maxscale (null when not configured). */
json_t *sl__csync_json(void);
/* main: start/stop the sync thread. 0, or -1 (logged). */
int sl__csync_start(const struct sl_config *cfg);
void sl__csync_stop(void);

/* POST (or GET for passive commands) maxscale/modules/MOD/CMD?args. */
struct admin_resp sl__rest_modcmd(struct admin_req *r);
struct admin_resp sl__rest_log_rotate(struct admin_req *r);
struct admin_resp sl__rest_create(struct admin_req *r);
struct admin_resp sl__rest_create_listener(struct admin_req *r);
struct admin_resp sl__rest_server_state(struct admin_req *r);
struct admin_resp sl__rest_stop_start(struct admin_req *r);
struct admin_resp sl__rest_alter(struct admin_req *r);
struct admin_resp sl__rest_relink_monitor(struct admin_req *r);
struct admin_resp sl__rest_relink_service(struct admin_req *r);
struct admin_resp sl__rest_destroy(struct admin_req *r);

/*
 * Pure request parsing, also driven by fuzz/fuzz_rest.c (no network, no
 * running configuration needed):
 * sl__admin_body_to_ini: a POST body (JSON:API document) as the ini section
 * for a new object of kind ("server", "service", ...; svcname: the
 * service of a listener created under /services/NAME/listeners, or
 * NULL). *idp points into body. The text (caller frees) has exactly one
 * section, named data.id; NULL with err set when malformed.
 * sl__admin_check_params: check a PATCH's parameters object against the core
 * table for kind and a module's (may be NULL); write the accepted ones as
 * "key=value" lines to f. 0, or -1 with *res set (an error document).
 * sl__admin_split_path: split a URL path after "/v1/" into at most maxseg
 * segments pointing into *pathbuf (caller frees, also on error). 0, or
 * -1 when the path is not under /v1, has too many segments or no memory.
 */
char *sl__admin_body_to_ini(json_t *body, const char *kind, const char *svcname,
                        const char **idp, char *err, size_t errlen);
int sl__admin_check_params(const char *kind,
                       const struct sl_param_spec *modspecs, json_t *params,
                       FILE *f, struct admin_resp *res);
int sl__admin_split_path(const char *url, char **pathbuf, char **seg,
                     int maxseg, int *nseg);

/* Stopped-state bookkeeping for services, listeners and monitors
 * (admin_common.c). */
bool sl__admin_is_stopped(const void *obj);
void sl__admin_set_stopped(const void *obj, bool stop);
void sl__admin_stopped_free(void);
/* Objects replaced or removed at run time are kept here until exit. */
void sl__admin_runtime_free(void);

#endif
