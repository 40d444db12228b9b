/*
 * The admin REST API: a MaxScale-shaped /v1 JSON:API served by
 * libmicrohttpd on admin_host:admin_port.
 *
 *   request -> body accumulated (at most SL_ADMIN_MAX_BODY, else 413)
 *           -> basic auth (401) -> role check for writes (403)
 *           -> path split into segments -> GET: admin_json.c
 *                                          else: runtime.c
 *           -> JSON response (errors: {"errors":[{"detail":...}]})
 *
 * libmicrohttpd runs one internal polling thread; every request is handled
 * there, one at a time, so the admin side needs no locks of its own. It
 * never touches a worker's DCBs or sessions: worker data is collected by
 * posting messages (admin_json.c). Connections are limited in number,
 * memory and idle time, so a flood of bad requests costs the admin thread
 * only, never the workers.
 *
 * Context: sl__admin_start/stop on the main thread; the rest on the
 * libmicrohttpd thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/log.h>

#include "admin_int.h"
#include "config_int.h"

#define ADMIN_CONN_LIMIT 64
#define ADMIN_CONN_TIMEOUT 10          /* seconds idle */
#define ADMIN_CONN_MEMORY (64 * 1024)  /* headers and URL per connection */

/* Per-connection request state (MHD's con_cls). */
struct conn_state {
    char *body;
    size_t len;
    size_t cap;
    bool too_large;
};

static struct MHD_Daemon *daemon_;
static time_t started_at;
static bool auth_required = true;
static char *tls_key;
static char *tls_cert;

uint64_t
sl__admin_uptime(void)
{
    time_t now = time(NULL);

    return started_at && now > started_at ? (uint64_t)(now - started_at) : 0;
}

bool
sl__admin_default_credentials(void)
{
    return admin_users_default_active();
}

/* ---- responses ---- */

struct admin_resp
admin_error(int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return (struct admin_resp){
        status, json_pack("{s:[{s:s}]}", "errors", "detail", msg)};
}

struct admin_resp
admin_ok(json_t *doc)
{
    if (doc == NULL) {
        return admin_error(500, "out of memory");
    }
    return (struct admin_resp){200, doc};
}

struct admin_resp
admin_no_content(void)
{
    return (struct admin_resp){204, NULL};
}

json_t *
admin_link(struct admin_req *r, const char *fmt, ...)
{
    char path[1024];
    char url[1400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    snprintf(url, sizeof(url), "%s://%s/v1/%s", tls_cert ? "https" : "http",
             r->host, path);
    return json_string(url);
}

const char *
admin_query(struct admin_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
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
admin_query_args(struct admin_req *r, const char **argv, int max)
{
    struct args_ctx c = {argv, 0, max};

    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &c);
    return c.n;
}

static enum MHD_Result
send_resp(struct MHD_Connection *conn, struct admin_resp res)
{
    struct MHD_Response *mr;
    enum MHD_Result ret;
    char *text = NULL;

    if (res.doc != NULL) {
        text = json_dumps(res.doc, JSON_INDENT(4));
        json_decref(res.doc);
    }
    mr = MHD_create_response_from_buffer(text ? strlen(text) : 0,
                                         text ? text : (void *)"",
                                         text ? MHD_RESPMEM_MUST_FREE
                                              : MHD_RESPMEM_PERSISTENT);
    if (mr == NULL) {
        free(text);
        return MHD_NO;
    }
    if (text != NULL) {
        MHD_add_response_header(mr, "Content-Type", "application/json");
    }
    if (res.status == 401) {
        MHD_add_response_header(mr, "WWW-Authenticate",
                                "Basic realm=\"sluice\"");
    }
    ret = MHD_queue_response(conn, (unsigned)res.status, mr);
    MHD_destroy_response(mr);
    return ret;
}

/* ---- request handling ---- */

static bool
peer_is_local(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;

    if (sa == NULL) {
        return false;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)sa;

        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0,
                                             0, 0, 0xff, 0xff};

        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) {
            return true;
        }
        return memcmp(in6->sin6_addr.s6_addr, v4mapped, 12) == 0 &&
               in6->sin6_addr.s6_addr[12] == 127;
    }
    return sa->sa_family == AF_UNIX;
}

/* 0 when allowed (r->user, r->is_admin set), else the error response. */
static int
authenticate(struct admin_req *r, struct admin_resp *err)
{
    char *pass = NULL;
    char *user;
    int role;

    if (!auth_required) {
        r->user = "admin";
        r->is_admin = true;
        return 0;
    }
    user = MHD_basic_auth_get_username_password(r->conn, &pass);
    if (user == NULL) {
        *err = admin_error(401, "authentication required");
        free(pass);
        return -1;
    }
    role = admin_users_check(user, pass ? pass : "", peer_is_local(r->conn));
    free(pass);
    if (role < 0) {
        sl_log_warn("REST API: authentication failed for '%.64s'", user);
        *err = admin_error(401, "invalid user name or password");
        free(user);
        return -1;
    }
    free(user);
    r->user = "";
    r->is_admin = role == 1;
    return 0;
}

int
admin_split_path(const char *url, char **pathbuf, char **seg, int maxseg,
                 int *nseg)
{
    char *save = NULL;
    char *tok;

    *nseg = 0;
    *pathbuf = strdup(url);
    if (*pathbuf == NULL) {
        return -1;
    }
    tok = strtok_r(*pathbuf, "/", &save);
    if (tok == NULL || strcmp(tok, "v1") != 0) {
        return -1;
    }
    while ((tok = strtok_r(NULL, "/", &save)) != NULL) {
        if (*nseg == maxseg) {
            return -1;
        }
        seg[(*nseg)++] = tok;
    }
    return 0;
}

/* Split r->url into r->seg. -1 when the path is not /v1. */
static int
split_path(struct admin_req *r)
{
    return admin_split_path(r->url, &r->pathbuf, r->seg,
                            (int)SL_ARRAY_LEN(r->seg), &r->nseg);
}

static struct admin_resp
dispatch(struct admin_req *r, struct conn_state *cs)
{
    struct admin_resp res;
    json_error_t jerr;
    bool is_get = strcmp(r->method, "GET") == 0 ||
                  strcmp(r->method, "HEAD") == 0;

    if (cs->too_large) {
        return admin_error(413, "request body larger than %d bytes",
                           SL_ADMIN_MAX_BODY);
    }
    if (authenticate(r, &res) < 0) {
        return res;
    }
    if (split_path(r) < 0) {
        return admin_error(404, "unknown resource '%.200s' (the API is "
                           "under /v1)", r->url);
    }
    if (is_get) {
        return admin_get(r);
    }
    if (!r->is_admin) {
        return admin_error(403, "user has read-only (basic) access");
    }
    if (cs->len > 0) {
        r->body = json_loadb(cs->body, cs->len, JSON_REJECT_DUPLICATES,
                             &jerr);
        if (r->body == NULL) {
            return admin_error(400, "invalid JSON in request body at line "
                               "%d column %d: %s", jerr.line, jerr.column,
                               jerr.text);
        }
    }
    return admin_write(r);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_size, void **con_cls)
{
    struct conn_state *cs = *con_cls;
    struct admin_req r = {.method = method, .url = url, .conn = conn};
    const char *host;
    struct admin_resp res;
    enum MHD_Result ret;

    if (cs == NULL) {
        const char *cl = MHD_lookup_connection_value(
            conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

        cs = calloc(1, sizeof(*cs));
        *con_cls = cs;
        if (cs == NULL) {
            return MHD_NO;
        }
        if (cl != NULL && strtoull(cl, NULL, 10) > SL_ADMIN_MAX_BODY) {
            /* Refuse before reading a byte of it. */
            return send_resp(conn, admin_error(413, "request body larger "
                                               "than %d bytes",
                                               SL_ADMIN_MAX_BODY));
        }
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!cs->too_large && cs->len + *upload_size > SL_ADMIN_MAX_BODY) {
            cs->too_large = true;
        }
        if (!cs->too_large) {
            if (cs->len + *upload_size > cs->cap) {
                size_t cap = (cs->len + *upload_size) * 2;
                char *nb = realloc(cs->body, cap);

                if (nb == NULL) {
                    return MHD_NO;
                }
                cs->body = nb;
                cs->cap = cap;
            }
            memcpy(cs->body + cs->len, upload, *upload_size);
            cs->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    snprintf(r.host, sizeof(r.host), "%.299s", host ? host : "localhost");
    res = dispatch(&r, cs);
    json_decref(r.body);
    free(r.pathbuf);
    ret = send_resp(conn, res);
    return ret;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
    struct conn_state *cs = *con_cls;

    if (cs != NULL) {
        free(cs->body);
        free(cs);
        *con_cls = NULL;
    }
}

/* ---- start / stop ---- */

static char *
read_small_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;

    if (f == NULL) {
        return NULL;
    }
    buf = calloc(1, 1024 * 1024 + 1);
    n = buf ? fread(buf, 1, 1024 * 1024, f) : 0;
    fclose(f);
    if (buf != NULL && n == 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int
resolve_addr(const char *host, int port, struct sockaddr_storage *ss)
{
    struct sockaddr_in *in = (void *)ss;
    struct sockaddr_in6 *in6 = (void *)ss;

    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        return 1;
    }
    if (strcmp(host, "localhost") == 0) {
        return resolve_addr("127.0.0.1", port, ss);
    }
    return -1;
}

static int
load_tls(const struct sl_params *p)
{
    const char *key = sl_params_get(p, "admin_ssl_key");
    const char *cert = sl_params_get(p, "admin_ssl_cert");

    if (!key && !cert) {
        return 0;
    }
    if (!key || !cert) {
        sl_log_error("REST API: admin_ssl_key and admin_ssl_cert must be "
                     "set together");
        return -EINVAL;
    }
    tls_key = read_small_file(key);
    tls_cert = read_small_file(cert);
    if (tls_key == NULL || tls_cert == NULL) {
        sl_log_error("REST API: cannot read '%s' or '%s'", key, cert);
        return -EINVAL;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        sl_log_error("REST API: libmicrohttpd was built without TLS");
        return -ENOTSUP;
    }
    return 0;
}

int
sl__admin_start(const struct sl_config *cfg)
{
    const struct sl_global *g = &cfg->global;
    struct sockaddr_storage ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    int rc;

    started_at = time(NULL);
    if (!g->admin_enabled) {
        return 0;
    }
    auth_required = sl_params_bool(g->params, "admin_auth");
    rc = resolve_addr(g->admin_host, g->admin_port, &ss);
    if (rc < 0) {
        sl_log_error("REST API: admin_host '%s' is not an IP address",
                     g->admin_host);
        return -EINVAL;
    }
    flags |= rc == 1 ? MHD_USE_IPv6 : 0;
    if (admin_users_load(g->datadir) < 0 || load_tls(g->params) < 0) {
        return -EINVAL;
    }
    flags |= tls_cert ? MHD_USE_TLS : 0;
    daemon_ = MHD_start_daemon(
        flags, (uint16_t)g->admin_port, NULL, NULL, on_request, NULL,
        MHD_OPTION_SOCK_ADDR, &ss,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)ADMIN_CONN_LIMIT,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)ADMIN_CONN_LIMIT,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ADMIN_CONN_TIMEOUT,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ADMIN_CONN_MEMORY,
        tls_cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, tls_key,
        MHD_OPTION_HTTPS_MEM_CERT, tls_cert, MHD_OPTION_END);
    if (daemon_ == NULL) {
        sl_log_error("REST API: cannot listen on %s:%d", g->admin_host,
                     g->admin_port);
        return -EADDRINUSE;
    }
    sl_log_notice("REST API listening on %s:%d%s", g->admin_host,
                  g->admin_port, tls_cert ? " (TLS)" : "");
    if (auth_required && admin_users_default_active()) {
        sl_log_warn("REST API: the default admin account (admin/mariadb) "
                    "is in use; it works from localhost only. Change its "
                    "password: maxctrl alter user admin NEW_PASSWORD");
    }
    return 0;
}

void
sl__admin_stop(void)
{
    if (daemon_ != NULL) {
        MHD_stop_daemon(daemon_);
        daemon_ = NULL;
    }
}

void
sl__admin_finish(void)
{
    admin_users_free();
    admin_runtime_free();
    free(tls_key);
    free(tls_cert);
    tls_key = tls_cert = NULL;
}
