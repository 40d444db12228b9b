/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every admin unit shares and that calls none of them: responses
 * (error documents, links), the request's query arguments, the API's
 * uptime, object lookups by name in the current configuration generation
 * and the stopped state of services, listeners and monitors.
 *
 * Layers (no unit calls one above it):
 *   admin.c (HTTP, authentication, admission)
 *     -> admin_routes.c (the routing table)
 *       -> admin_json.c (reads), runtime.c (writes), admin_users.c
 *         -> admin_paths.c, persist.c, admin_common.c
 *
 * Context: the libmicrohttpd thread (the only writer of the stopped
 * list and of the configuration at run time).
 */
#define _GNU_SOURCE

#include <microhttpd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_int.h"

static const void **stopped;
static size_t nstopped;

static time_t started_at;

void
sl__admin_mark_started(void)
{
    started_at = time(NULL);
}

uint64_t
sl__admin_uptime(void)
{
    time_t now = time(NULL);

    return started_at && now > started_at ? (uint64_t)(now - started_at) : 0;
}

struct admin_resp
sl__admin_error(int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return (struct admin_resp){
        .status = status,
        .doc = json_pack("{s:[{s:s}]}", "errors", "detail", msg)};
}

struct admin_resp
sl__admin_ok(json_t *doc)
{
    if (doc == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    return (struct admin_resp){.status = 200, .doc = doc};
}

struct admin_resp
sl__admin_no_content(void)
{
    return (struct admin_resp){.status = 204};
}

json_t *
sl__admin_link(struct admin_req *r, const char *fmt, ...)
{
    char path[1024];
    char url[1400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    snprintf(url, sizeof(url), "%s://%s/v1/%s", r->https ? "https" : "http",
             r->host, path);
    return json_string(url);
}

const char *
sl__admin_query(struct admin_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *
sl__admin_header(struct admin_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

struct args_ctx {
    const char **argv;
    int n;
    int max;
};

static enum MHD_Result
add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
        const char *value)
{
    struct args_ctx *c = cls;

    if (c->n < c->max) {
        c->argv[c->n++] = value && value[0] ? value : key;
    }
    return MHD_YES;
}

int
sl__admin_query_args(struct admin_req *r, const char **argv, int max)
{
    struct args_ctx c = {argv, 0, max};

    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &c);
    return c.n;
}

/* ---- stopped state ---- */

bool
sl__admin_is_stopped(const void *obj)
{
    for (size_t i = 0; i < nstopped; i++) {
        if (stopped[i] == obj) {
            return true;
        }
    }
    return false;
}

void
sl__admin_set_stopped(const void *obj, bool stop)
{
    for (size_t i = 0; i < nstopped; i++) {
        if (stopped[i] == obj) {
            if (!stop) {
                stopped[i] = stopped[--nstopped];
            }
            return;
        }
    }
    if (stop) {
        const void **ns = realloc(stopped, (nstopped + 1) * sizeof(*ns));

        if (ns != NULL) {
            stopped = ns;
            stopped[nstopped++] = obj;
        }
    }
}

void
sl__admin_stopped_free(void)
{
    free(stopped);
    stopped = NULL;
    nstopped = 0;
}

/* ---- deferred answers (admin_int.h) ---- */

struct admin_deferred {
    struct MHD_Connection *conn;
    atomic_bool answered;
    struct admin_resp res;
};

struct admin_deferred *
sl__admin_defer(struct admin_req *r)
{
    struct admin_deferred *d = calloc(1, sizeof(*d));

    if (d == NULL) {
        return NULL;
    }
    d->conn = r->conn;
    atomic_init(&d->answered, false);
    r->deferred = d;
    MHD_suspend_connection(d->conn);
    return d;
}

void
sl__admin_answer(struct admin_deferred *d, struct admin_resp res)
{
    d->res = res;
    atomic_store_explicit(&d->answered, true, memory_order_release);
    MHD_resume_connection(d->conn);
}

bool
sl__admin_answered(struct admin_deferred *d, struct admin_resp *res)
{
    if (!atomic_load_explicit(&d->answered, memory_order_acquire)) {
        return false;
    }
    *res = d->res;
    free(d);
    return true;
}

void
sl__admin_deferred_free(struct admin_deferred *d)
{
    if (d == NULL) {
        return;
    }
    if (!atomic_load_explicit(&d->answered, memory_order_acquire)) {
        return;   /* its thread still writes it: never, see admin_int.h */
    }
    json_decref(d->res.doc);
    free(d->res.text);
    free(d->res.location);
    free(d->res.cookie);
    free(d);
}
