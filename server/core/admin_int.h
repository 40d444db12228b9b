/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin REST API's internals, shared by admin.c (the HTTP server,
 * authentication and dispatch), admin_json.c (the GET documents),
 * admin_users.c (the admin accounts) and runtime.c (objects created,
 * altered and destroyed at run time, and their persistence).
 *
 * Context: everything here runs on libmicrohttpd's single internal thread
 * (requests are handled one at a time), except sl__admin_start/stop (main).
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
    char host[300];                 /* Host header, for links */
};

/* Start/stop the REST API (main thread). 0 or -errno. */
int sl__admin_start(const struct sl_config *cfg);
void sl__admin_stop(void);
/* Free what run-time changes retired. Main, after the workers stopped. */
void sl__admin_finish(void);
/* Seconds since sl__admin_start (the daemon's uptime). */
uint64_t sl__admin_uptime(void);
/* True while the default admin/mariadb credentials are in use. */
bool sl__admin_default_credentials(void);

/* Query argument of the current request, NULL if absent. */
const char *admin_query(struct admin_req *r, const char *name);
/* The query's keys in order (module command arguments); their count. */
int admin_query_args(struct admin_req *r, const char **argv, int max);
/* Error responses: {"errors":[{"detail": fmt...}]}. */
struct admin_resp admin_error(int status, const char *fmt, ...)
    SL_PRINTF(2, 3);
struct admin_resp admin_ok(json_t *doc);
struct admin_resp admin_no_content(void);
/* "http://HOST/v1/" + path, for links. */
json_t *admin_link(struct admin_req *r, const char *fmt, ...)
    SL_PRINTF(2, 3);

/* ---- admin_users.c ---- */
int admin_users_load(const char *datadir);
void admin_users_free(void);
/* 1 admin, 0 basic (read-only), -1 refused. local: peer is loopback. */
int admin_users_check(const char *user, const char *password, bool local);
struct admin_resp admin_users_get(struct admin_req *r);
struct admin_resp admin_users_write(struct admin_req *r);
bool admin_users_default_active(void);

/* ---- admin_json.c: GET resources ---- */
struct admin_resp admin_get(struct admin_req *r);
json_t *admin_params_json(const struct sl_params *p);
struct sl_server *admin_find_server(const char *name);
struct sl_service *admin_find_service(const char *name);
struct sl_listener *admin_find_listener(const char *name);
struct sl_monitor *admin_find_monitor(const char *name);
struct sl_filter_def *admin_find_filter(const char *name);

/* ---- admin_paths.c ---- */
/* Check the path parameters (filebase, socket, *file, SL_PARAM_PATH) of a
 * create or alter of kind (modspecs: its module's table, may be NULL):
 * each must lie under logdir or admin_secure_paths, not under datadir or
 * persistdir. 0, or -1 with *res set (403). */
int admin_check_paths(const char *kind, const struct sl_param_spec *modspecs,
                      json_t *params, struct admin_resp *res);
/* The parameter table of the loaded module named name, or NULL. */
const struct sl_param_spec *admin_module_specs(const char *name);

/* ---- admin_metrics.c, admin_queries.c ---- */
/* GET /metrics (Prometheus text format 0.0.4). */
struct admin_resp admin_metrics_get(struct admin_req *r);
/* GET, DELETE /v1/sluice/queries. */
struct admin_resp admin_queries(struct admin_req *r);
/* admin_static.c: the dashboard's files ("/", /dashboard/...). */
void admin_static_init(const char *dir);
bool admin_static_path(const char *url);
struct admin_resp admin_static_get(struct admin_req *r);
struct sl_obj_slots;
/* {"count", "errors", "sum", "buckets": [{"le", "count"}...], p50...}:
 * an object's merged response-time histogram for the REST resources. */
json_t *admin_hist_json(struct sl_obj_slots *const *slotsp);

/* ---- runtime.c: writes ---- */
struct admin_resp admin_write(struct admin_req *r);
/* POST (or GET for passive commands) maxscale/modules/MOD/CMD?args. */
struct admin_resp admin_modcmd(struct admin_req *r);

/*
 * Pure request parsing, also driven by fuzz/fuzz_rest.c (no network, no
 * running configuration needed):
 * admin_body_to_ini: a POST body (JSON:API document) as the ini section
 * for a new object of kind ("server", "service", ...; svcname: the
 * service of a listener created under /services/NAME/listeners, or
 * NULL). *idp points into body. The text (caller frees) has exactly one
 * section, named data.id; NULL with err set when malformed.
 * admin_check_params: check a PATCH's parameters object against the core
 * table for kind and a module's (may be NULL); write the accepted ones as
 * "key=value" lines to f. 0, or -1 with *res set (an error document).
 * admin_split_path: split a URL path after "/v1/" into at most maxseg
 * segments pointing into *pathbuf (caller frees, also on error). 0, or
 * -1 when the path is not under /v1, has too many segments or no memory.
 */
char *admin_body_to_ini(json_t *body, const char *kind, const char *svcname,
                        const char **idp, char *err, size_t errlen);
int admin_check_params(const char *kind,
                       const struct sl_param_spec *modspecs, json_t *params,
                       FILE *f, struct admin_resp *res);
int admin_split_path(const char *url, char **pathbuf, char **seg,
                     int maxseg, int *nseg);

/* Stopped-state bookkeeping for services, listeners and monitors. */
bool admin_is_stopped(const void *obj);
/* Objects replaced or removed at run time are kept here until exit. */
void admin_runtime_free(void);

#endif
