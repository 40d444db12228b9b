/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin REST API: a MaxScale-shaped /v1 JSON:API served by
 * libmicrohttpd on admin_host:admin_port.
 *
 *   headers -> Host names this API (403) -> Origin/Sec-Fetch-Site for
 *              writes (403) -> basic auth (401) -> the role the route's
 *              row requires (403, admin_routes.c)
 *              -> declared body size (413)          [admit, before the body]
 *           -> body accumulated (at most SL_ADMIN_MAX_BODY, else 413)
 *           -> path split into segments -> the route's handler
 *              (reads: admin_json.c; writes: runtime.c; users:
 *              admin_users.c), 404 / 405 when no row matches
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
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <sluice/log.h>

#include "admin_int.h"
#include "config_int.h"
#include "proxyproto.h"
#include "worker_int.h"

#define ADMIN_CONN_LIMIT 64
#define ADMIN_CONN_TIMEOUT 10          /* seconds idle */
#define ADMIN_CONN_MEMORY (64 * 1024)  /* headers and URL per connection */

/* Per-connection request state (MHD's con_cls). */
struct conn_state {
    char *body;
    size_t len;
    size_t cap;
    bool too_large;
    bool refused;      /* answered from the headers (admit) */
    bool is_admin;     /* the authenticated role allows writes */
    bool auth_failed;  /* refused for its credentials (always audited) */
    char user[128];    /* the basic-auth user, for the audit file */
    struct timespec start;
    /* A deferred answer (sl__admin_defer): the connection is suspended
     * until another thread hands the answer over (sl__admin_answer). */
    struct admin_deferred *deferred;
};

static struct MHD_Daemon *daemon_;
static bool auth_required = true;
static char *tls_key;
static char *tls_cert;
static char *tls_ca;     /* admin_ssl_ca: checks clients' certificates */
/* What a Host header may name (host_allowed). */
static char listen_host[256];
static int listen_port;
static bool listen_loopback;   /* admin_host is 127.x or ::1 */
static bool listen_any;        /* admin_host is 0.0.0.0 or :: */
static char *allowed_hosts;    /* admin_allowed_hosts, or NULL */
static bool metrics_public;    /* admin_metrics_public */
static bool log_auth_failures = true;   /* admin_log_auth_failures */
static bool gui = true;        /* admin_gui: serve the dashboard */
static bool secure_gui;        /* admin_secure_gui: only over TLS */
static struct sl_pp_net *rw_hosts;   /* admin_readwrite_hosts */
static size_t n_rw_hosts;
static struct sl_pp_net *ro_hosts;   /* admin_readonly_hosts */
static size_t n_ro_hosts;

static enum MHD_Result
send_resp(struct MHD_Connection *conn, struct admin_resp res)
{
    struct MHD_Response *mr;
    enum MHD_Result ret;
    char *text = NULL;

    if (res.doc != NULL) {
        text = json_dumps(res.doc, JSON_INDENT(4));
        json_decref(res.doc);
    } else if (res.text != NULL) {
        text = res.text;
    }
    mr = MHD_create_response_from_buffer(text ? strlen(text) : 0,
                                         text ? text : (void *)"",
                                         text ? MHD_RESPMEM_MUST_FREE
                                              : MHD_RESPMEM_PERSISTENT);
    if (mr == NULL) {
        free(text);
        free(res.location);
        free(res.cookie);
        return MHD_NO;
    }
    if (text != NULL) {
        MHD_add_response_header(mr, "Content-Type",
                                res.ctype ? res.ctype : "application/json");
    }
    /* No page may frame the dashboard (its buttons act) or sniff. */
    MHD_add_response_header(mr, "X-Frame-Options", "DENY");
    MHD_add_response_header(mr, "X-Content-Type-Options", "nosniff");
    if (res.ctype != NULL && strncmp(res.ctype, "text/html", 9) == 0) {
        MHD_add_response_header(mr, "Content-Security-Policy",
                                "default-src 'self'; frame-ancestors 'none'");
    }
    if (res.status == 401) {
        MHD_add_response_header(mr, "WWW-Authenticate",
                                "Basic realm=\"sluice\"");
    }
    if (res.location != NULL) {
        MHD_add_response_header(mr, "Location", res.location);
    }
    if (res.cookie != NULL) {
        MHD_add_response_header(mr, "Set-Cookie", res.cookie);
    }
    free(res.location);
    free(res.cookie);
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

/* The caller's role: 1 admin, 0 read-only, or -1 with *err set (401). */
static int
authenticate(struct MHD_Connection *conn, struct conn_state *cs,
             struct admin_resp *err)
{
    char *pass = NULL;
    char *user;
    int role;

    if (!auth_required) {
        return 1;
    }
    user = MHD_basic_auth_get_username_password(conn, &pass);
    if (user == NULL) {
        *err = sl__admin_error(401, "authentication required");
        cs->auth_failed = true;
        free(pass);
        return -1;
    }
    snprintf(cs->user, sizeof(cs->user), "%s", user);
    role = sl__admin_users_check(user, pass ? pass : "", peer_is_local(conn));
    free(pass);
    if (role < 0) {
        if (log_auth_failures) {
            sl_log_warn("REST API: authentication failed for '%.64s'", user);
        }
        *err = sl__admin_error(401, "invalid user name or password");
        cs->auth_failed = true;
    }
    free(user);
    return role;
}

/* ---- Host and Origin: no browser page may drive the API ---- */

static bool
is_loopback_name(const char *name)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (strcasecmp(name, "localhost") == 0) {
        return true;
    }
    if (inet_pton(AF_INET, name, &a4) == 1) {
        return (ntohl(a4.s_addr) >> 24) == 127;
    }
    return inet_pton(AF_INET6, name, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static bool
is_ip_literal(const char *name)
{
    struct in_addr a4;
    struct in6_addr a6;

    return inet_pton(AF_INET, name, &a4) == 1 ||
           inet_pton(AF_INET6, name, &a6) == 1;
}

/* name in the comma list admin_allowed_hosts ("*": any name). */
static bool
in_allowed_list(const char *name)
{
    const char *p = allowed_hosts;
    size_t len = strlen(name);

    while (p != NULL && *p != '\0') {
        size_t n = strcspn(p, ",");
        const char *e = p + n;

        while (n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
            n--;
        }
        if ((n == 1 && *p == '*') ||
            (n == len && strncasecmp(p, name, n) == 0)) {
            return true;
        }
        p = *e ? e + 1 : e;
    }
    return false;
}

/*
 * Whether a Host header names this API: the listening address, a loopback
 * name for a loopback listener, any IP address for a wildcard listener, or
 * a name from admin_allowed_hosts; with the API's port or none. A page
 * that a browser loaded from an attacker's name which now resolves to us
 * (DNS rebinding) sends that name, so it is refused here.
 */
static bool
host_allowed(const char *host)
{
    char name[300];
    const char *port = NULL;
    size_t n;

    if (host[0] == '[') {
        n = strcspn(host + 1, "]");
        if (host[1 + n] != ']' || n >= sizeof(name)) {
            return false;
        }
        memcpy(name, host + 1, n);
        port = host[2 + n] == ':' ? host + 3 + n : NULL;
        if (port == NULL && host[2 + n] != '\0') {
            return false;
        }
    } else {
        n = strcspn(host, ":");
        if (n >= sizeof(name) ||
            (host[n] == ':' && strchr(host + n + 1, ':') != NULL)) {
            return false;   /* an IPv6 literal needs brackets */
        }
        memcpy(name, host, n);
        port = host[n] == ':' ? host + n + 1 : NULL;
    }
    name[n] = '\0';
    if (n == 0) {
        return false;
    }
    if (port != NULL && (strlen(port) > 5 ||
                         strspn(port, "0123456789") != strlen(port) ||
                         atoi(port) != listen_port)) {
        return false;
    }
    return strcasecmp(name, listen_host) == 0 || in_allowed_list(name) ||
           ((listen_loopback || listen_any) && is_loopback_name(name)) ||
           (listen_any && is_ip_literal(name));
}

/*
 * A request that changes state must not come from another site's page:
 * refused when Sec-Fetch-Site says cross-site or same-site (another port
 * of this host is "same-site") or when an Origin header is not this API's
 * own origin (scheme://Host). Tools such as curl and maxctrl send neither.
 */
static bool
origin_allowed(struct MHD_Connection *conn, const char *host)
{
    const char *site = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                   "Sec-Fetch-Site");
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     "Origin");
    const char *scheme = tls_cert ? "https://" : "http://";

    if (site != NULL && strcasecmp(site, "same-origin") != 0 &&
        strcasecmp(site, "none") != 0) {
        return false;
    }
    if (origin == NULL) {
        return true;
    }
    return host != NULL && strncasecmp(origin, scheme, strlen(scheme)) == 0 &&
           strcasecmp(origin + strlen(scheme), host) == 0;
}

static bool
is_read_method(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

/*
 * Everything decided from the headers alone, on libmicrohttpd's first call
 * for a request, before a byte of its body is read: Host (403), Origin for
 * writes (403), credentials (401), the role for writes (403), the declared
 * body size (413). 0 with *is_admin set, or -1 with *err set.
 */
/* The role a request for url needs (admin_routes.c). */
static enum sl_admin_role
required_role(const char *method, const char *url)
{
    char *seg[8];
    char *buf = NULL;
    int nseg = 0;
    enum sl_admin_role role;

    if (sl__admin_split_path(url, &buf, seg, (int)SL_ARRAY_LEN(seg), &nseg) < 0) {
        nseg = 0;   /* answered 404 later; a write still needs admin */
        seg[0] = NULL;
        role = is_read_method(method) ? SL_ADMIN_ROLE_BASIC
                                      : SL_ADMIN_ROLE_ADMIN;
    } else {
        role = sl__admin_route_role(method, seg, nseg);
    }
    free(buf);
    return role;
}

/* The client's address as text ("" if unknown). */
static void
client_address(struct MHD_Connection *conn, char *buf, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;

    buf[0] = '\0';
    if (sa != NULL && sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)
                               ->sin_addr, buf, (socklen_t)len);
    } else if (sa != NULL && sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)
                                ->sin6_addr, buf, (socklen_t)len);
    }
}

/* admin_readwrite_hosts / admin_readonly_hosts: may this client make this
 * kind of request? false with *err set (403). */
static bool
host_list_admits(struct MHD_Connection *conn, bool write,
                 struct admin_resp *err)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    bool ro;

    if (sa == NULL) {
        *err = sl__admin_error(403, "the client's address is unknown");
        return false;
    }
    if (sl__pp_networks_match(rw_hosts, n_rw_hosts, sa)) {
        return true;
    }
    ro = sl__pp_networks_match(ro_hosts, n_ro_hosts, sa);
    if (!write && ro) {
        return true;
    }
    *err = sl__admin_error(403, write && ro
                           ? "this address may only read (see "
                             "admin_readwrite_hosts)"
                           : "this address may not use the REST API (see "
                             "admin_readwrite_hosts and "
                             "admin_readonly_hosts)");
    return false;
}

/*
 * admin_ssl_ca: libmicrohttpd asks each HTTPS client for a certificate and
 * trusts that CA, but does not check what it gets. A client that sends one
 * is refused unless GnuTLS verifies it (chain to admin_ssl_ca, dates,
 * signature); a client that sends none goes on to log in with its
 * password as without admin_ssl_ca.
 */
static bool
client_cert_acceptable(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
        conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t session;
    unsigned int n = 0;
    unsigned int status = 0;

    if (ci == NULL || ci->tls_session == NULL) {
        return false;
    }
    session = (gnutls_session_t)ci->tls_session;
    if (gnutls_certificate_get_peers(session, &n) == NULL || n == 0) {
        return true;
    }
    return gnutls_certificate_verify_peers2(session, &status) == 0 &&
           status == 0;
}

static int
admit(struct MHD_Connection *conn, const char *method, const char *url,
      struct conn_state *cs, struct admin_resp *err)
{
    bool *is_admin = &cs->is_admin;
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                   "Host");
    const char *cl = MHD_lookup_connection_value(
        conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    bool write = !is_read_method(method);
    int role;

    if (host != NULL && !host_allowed(host)) {
        *err = sl__admin_error(403, "Host '%.200s' is not an address of this "
                           "API (see admin_allowed_hosts)", host);
        return -1;
    }
    if (tls_ca != NULL && !client_cert_acceptable(conn)) {
        *err = sl__admin_error(403, "the client certificate is not signed "
                               "by admin_ssl_ca, or is expired or invalid");
        return -1;
    }
    if (!host_list_admits(conn, write, err)) {
        return -1;
    }
    if (!write && sl__admin_static_path(url)) {
        if (!gui) {
            *err = sl__admin_error(404, "the dashboard is off "
                                   "(admin_gui=false)");
            return -1;
        }
        if (secure_gui && tls_cert == NULL) {
            *err = sl__admin_error(403, "the dashboard is served over HTTPS "
                                   "only (admin_secure_gui=true): configure "
                                   "admin_ssl_cert and admin_ssl_key");
            return -1;
        }
        *is_admin = false;   /* the dashboard's files: no data in them */
        return 0;
    }
    if (!write && metrics_public && strcmp(url, "/metrics") == 0) {
        *is_admin = false;   /* admin_metrics_public: no credentials */
        return 0;
    }
    if (write && !origin_allowed(conn, host)) {
        *err = sl__admin_error(403, "cross-site request refused (Origin or "
                           "Sec-Fetch-Site is not this API)");
        return -1;
    }
    if ((role = authenticate(conn, cs, err)) < 0) {
        return -1;
    }
    /* the one role check: what the route's row requires */
    if (role < (int)required_role(method, url)) {
        *err = sl__admin_error(403, "user has read-only (basic) access");
        return -1;
    }
    if (cl != NULL && strtoull(cl, NULL, 10) > SL_ADMIN_MAX_BODY) {
        *err = sl__admin_error(413, "request body larger than %d bytes",
                           SL_ADMIN_MAX_BODY);
        return -1;
    }
    *is_admin = role == 1;
    return 0;
}

int
sl__admin_split_path(const char *url, char **pathbuf, char **seg, int maxseg,
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
    return sl__admin_split_path(r->url, &r->pathbuf, r->seg,
                            (int)SL_ARRAY_LEN(r->seg), &r->nseg);
}

/* The request, admitted and with its whole body: route it. */
static struct admin_resp
dispatch(struct admin_req *r, struct conn_state *cs)
{
    const struct sl_admin_route *route;
    json_error_t jerr;
    bool known;

    if (cs->too_large) {
        return sl__admin_error(413, "request body larger than %d bytes",
                           SL_ADMIN_MAX_BODY);
    }
    if (sl__admin_static_path(r->url)) {
        return sl__admin_static_get(r);
    }
    if (strcmp(r->url, "/metrics") == 0) {
        return is_read_method(r->method) ? sl__rest_metrics_get(r)
               : sl__admin_error(405, "/metrics takes GET");
    }
    if (split_path(r) < 0) {
        return sl__admin_error(404, "unknown resource '%.200s' (the API is "
                           "under /v1)", r->url);
    }
    route = sl__admin_route_find(r->method, r->seg, r->nseg, &known);
    if (route == NULL) {
        if (is_read_method(r->method) && !known) {
            return sl__admin_error(404, "unknown resource '%.200s'", r->url);
        }
        return sl__admin_error(405, "%.16s is not supported on '%.200s'",
                           r->method, r->url);
    }
    /* free what earlier changes unpublished and no worker can still hold
     * (generation.c); reads too, so a destroyed object whose last session
     * ended is freed without waiting for the next change */
    sl__worker_reclaim(false);
    if (is_read_method(r->method)) {
        return route->handler(r);
    }
    if (cs->len > 0) {
        r->body = json_loadb(cs->body, cs->len, JSON_REJECT_DUPLICATES,
                             &jerr);
        if (r->body == NULL) {
            return sl__admin_error(400, "invalid JSON in request body at line "
                               "%d column %d: %s", jerr.line, jerr.column,
                               jerr.text);
        }
    }
    if (sl__csync_synced(r)) {
        return sl__csync_change(r, route->handler);
    }
    return route->handler(r);
}

/* Append one upload chunk to the body, or only count it once too large. */
static int
take_upload(struct conn_state *cs, const char *upload, size_t size)
{
    if (!cs->too_large && cs->len + size > SL_ADMIN_MAX_BODY) {
        cs->too_large = true;
    }
    if (cs->too_large) {
        return 0;
    }
    if (cs->len + size > cs->cap) {
        size_t cap = (cs->len + size) * 2;
        char *nb = realloc(cs->body, cap);

        if (nb == NULL) {
            return -ENOMEM;
        }
        cs->body = nb;
        cs->cap = cap;
    }
    memcpy(cs->body + cs->len, upload, size);
    cs->len += size;
    return 0;
}

/* The audit row of a request that is being answered (admin_audit.c). */
static void
audit(struct MHD_Connection *conn, struct conn_state *cs, const char *method,
      const char *url, int status)
{
    struct timespec now;
    char addr[INET6_ADDRSTRLEN];

    if (!sl__admin_audit_enabled()) {
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    client_address(conn, addr, sizeof(addr));
    sl__admin_audit(method, url, cs->user, addr, status,
                    (double)(now.tv_sec - cs->start.tv_sec) +
                        (double)(now.tv_nsec - cs->start.tv_nsec) / 1e9,
                    cs->body, cs->len, cs->auth_failed);
}

/*
 * libmicrohttpd's access handler: called once with the headers only
 * (*con_cls NULL: admit or refuse at once), then once per body chunk, then
 * once more with no data to answer.
 */
static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_size, void **con_cls)
{
    struct conn_state *cs = *con_cls;
    struct admin_req r = {.method = method, .url = url, .conn = conn};
    const char *host;
    struct admin_resp res;

    if (cs == NULL) {
        cs = calloc(1, sizeof(*cs));
        *con_cls = cs;
        if (cs == NULL) {
            return MHD_NO;
        }
        clock_gettime(CLOCK_MONOTONIC, &cs->start);
        if (admit(conn, method, url, cs, &res) < 0) {
            cs->refused = true;
            audit(conn, cs, method, url, res.status);
            return send_resp(conn, res);
        }
        return MHD_YES;
    }
    if (cs->refused) {
        *upload_size = 0;   /* answered already; drop what follows */
        return MHD_YES;
    }
    if (cs->deferred != NULL) {
        if (!sl__admin_answered(cs->deferred, &res)) {
            return MHD_YES;
        }
        cs->deferred = NULL;
        audit(conn, cs, method, url, res.status);
        return send_resp(conn, res);
    }
    if (*upload_size > 0) {
        if (take_upload(cs, upload, *upload_size) < 0) {
            return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    snprintf(r.host, sizeof(r.host), "%.299s", host ? host : "localhost");
    r.https = tls_cert != NULL;
    r.is_admin = cs->is_admin;
    sl__csync_lock();   /* one change at a time with config_sync replays */
    res = dispatch(&r, cs);
    sl__csync_unlock();
    json_decref(r.body);
    free(r.pathbuf);
    if (res.status == SL_ADMIN_DEFERRED) {
        cs->deferred = r.deferred;
        return MHD_YES;   /* suspended: sl__admin_answer resumes it */
    }
    audit(conn, cs, method, url, res.status);
    return send_resp(conn, res);
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
    struct conn_state *cs = *con_cls;

    if (cs != NULL) {
        sl__admin_deferred_free(cs->deferred);   /* answered, not sent */
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
    const char *ca;

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
    ca = sl_params_get(p, "admin_ssl_ca");
    ca = ca ? ca : sl_params_get(p, "admin_ssl_ca_cert");
    if (ca != NULL && (tls_ca = read_small_file(ca)) == NULL) {
        sl_log_error("REST API: cannot read admin_ssl_ca '%s'", ca);
        return -EINVAL;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        sl_log_error("REST API: libmicrohttpd was built without TLS");
        return -ENOTSUP;
    }
    return 0;
}

/* Record what host_allowed accepts for this listening address. */
static void
set_listen_names(const struct sl_global *g, const struct sockaddr_storage *ss)
{
    const struct sockaddr_in *in = (const void *)ss;
    const struct sockaddr_in6 *in6 = (const void *)ss;
    const char *extra = sl_params_get(g->params, "admin_allowed_hosts");

    snprintf(listen_host, sizeof(listen_host), "%s", g->admin_host);
    listen_port = g->admin_port;
    if (ss->ss_family == AF_INET) {
        listen_any = in->sin_addr.s_addr == htonl(INADDR_ANY);
        listen_loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else {
        listen_any = IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
        listen_loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    free(allowed_hosts);
    allowed_hosts = extra && extra[0] ? strdup(extra) : NULL;
}

int
sl__admin_start(const struct sl_config *cfg)
{
    const struct sl_global *g = &cfg->global;
    struct sockaddr_storage ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                     MHD_ALLOW_SUSPEND_RESUME;
    int rc;

    sl__admin_mark_started();
    if (!g->admin_enabled) {
        return 0;
    }
    auth_required = sl_params_bool(g->params, "admin_auth");
    metrics_public = sl_params_bool(g->params, "admin_metrics_public");
    log_auth_failures = sl_params_bool(g->params, "admin_log_auth_failures");
    gui = sl_params_bool(g->params, "admin_gui");
    secure_gui = sl_params_bool(g->params, "admin_secure_gui");
    {
        char err[256];

        free(rw_hosts);
        free(ro_hosts);
        if (sl__host_list_parse(sl_params_get(g->params,
                                              "admin_readwrite_hosts"),
                                &rw_hosts, &n_rw_hosts, err,
                                sizeof(err)) < 0 ||
            sl__host_list_parse(sl_params_get(g->params,
                                              "admin_readonly_hosts"),
                                &ro_hosts, &n_ro_hosts, err,
                                sizeof(err)) < 0) {
            sl_log_error("REST API: %s", err);   /* the loader checked */
            return -EINVAL;
        }
    }
    if (sl__admin_audit_configure(g->params, g->logdir) < 0) {
        return -EINVAL;
    }
    sl__admin_static_init(sl_params_get(g->params, "admin_dashboard_dir"));
    rc = resolve_addr(g->admin_host, g->admin_port, &ss);
    if (rc < 0) {
        sl_log_error("REST API: admin_host '%s' is not an IP address",
                     g->admin_host);
        return -EINVAL;
    }
    flags |= rc == 1 ? MHD_USE_IPv6 : 0;
    set_listen_names(g, &ss);
    if (sl__admin_users_load(g->datadir) < 0 || load_tls(g->params) < 0) {
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
        MHD_OPTION_HTTPS_MEM_CERT, tls_cert,
        tls_ca ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, tls_ca,
        MHD_OPTION_END);
    if (daemon_ == NULL) {
        sl_log_error("REST API: cannot listen on %s:%d", g->admin_host,
                     g->admin_port);
        return -EADDRINUSE;
    }
    sl_log_notice("REST API listening on %s:%d%s", g->admin_host,
                  g->admin_port, tls_cert ? " (TLS)" : "");
    if (auth_required && sl__admin_users_default_active()) {
        sl_log_warn("REST API: the default admin account (admin/mariadb) "
                    "is in use; it works from localhost only. Change its "
                    "password: maxctrl alter user admin NEW_PASSWORD");
    }
    return 0;
}

void
sl__admin_stop(void)
{
    /* every deferred answer given (SQL queries cut short) before MHD
     * stops: it may not stop with a connection suspended */
    sl__admin_sql_cancel_all();
    if (daemon_ != NULL) {
        MHD_stop_daemon(daemon_);
        daemon_ = NULL;
    }
    sl__admin_sql_stop();   /* after the MHD thread: its only other user */
    /* after the MHD thread is gone: it is the audit file's only user */
    sl__admin_audit_close();
}

void
sl__admin_finish(void)
{
    sl__admin_users_free();
    sl__admin_runtime_free();
    free(tls_key);
    free(tls_cert);
    free(tls_ca);
    tls_key = tls_cert = tls_ca = NULL;
    free(allowed_hosts);
    allowed_hosts = NULL;
}
