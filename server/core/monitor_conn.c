/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Monitor connections: one libmariadb connection from a monitor to one of
 * its servers, with the monitor's credentials and its
 * backend_connect/read/write_timeout, over TCP or the server's unix socket.
 * Every monitor module opens its connections through here so they all
 * honour the same core parameters the same way.
 *
 * sl_server_mysql_tls gives every libmariadb connection Sluice opens
 * (monitors here, account loading in the protocol module) the server's
 * ssl* settings, so credentials and password hashes never cross in the
 * clear to a server configured with ssl=true, and the PROXY protocol
 * header a server with proxy_protocol=true expects ("PROXY UNKNOWN").
 *
 * Context: the monitor's own thread (blocking calls; never a worker).
 */
#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sluice/log.h>
#include <sluice/monitor.h>
#include <sluice/params.h>
#include <sluice/server.h>

#include "internal.h"

/* libmariadb timeouts are whole seconds: round up, at least 1. */
static unsigned
ms_to_seconds(uint64_t ms)
{
    uint64_t s = (ms + 999) / 1000;

    return s == 0 ? 1 : (s > 3600 ? 3600 : (unsigned)s);
}

/*
 * Sluice's ssl_version ("MAX", or a comma list of TLSv10..TLSv13 or
 * TLSv1.0..TLSv1.3 bounding the range) as libmariadb's list of allowed
 * versions ("TLSv1.2,TLSv1.3"). false for MAX or nothing recognised:
 * libmariadb's defaults then apply (the config check refuses bad names).
 */
static bool
tls_versions(const char *list, char *out, size_t len)
{
    int lo = 9, hi = -1;
    const char *p = list;
    size_t off = 0;

    while (*p != '\0') {
        size_t n = strcspn(p, ", ");
        int v = -1;

        if (n >= 6 && strncasecmp(p, "TLSv1", 5) == 0) {
            const char *d = p + (n == 7 && p[5] == '.' ? 6 : 5);

            v = n >= 6 && *d >= '0' && *d <= '3' ? *d - '0' : -1;
        }
        lo = v >= 0 && v < lo ? v : lo;
        hi = v > hi ? v : hi;
        p += n;
        p += strspn(p, ", ");
    }
    out[0] = '\0';
    for (int v = lo; v <= hi && off < len; v++) {
        off += (size_t)snprintf(out + off, len - off, "%sTLSv1.%d",
                                off > 0 ? "," : "", v);
    }
    return hi >= 0 && off < len;
}

bool
sl_server_mysql_tls_ok(const struct sl_server *srv, void *mysql)
{
    const struct sl_params *p = sl_server_params(srv);

    return p == NULL || !sl_params_bool(p, "ssl") ||
           mysql_get_ssl_cipher(mysql) != NULL;
}

#define PP_UNKNOWN "PROXY UNKNOWN\r\n"

/* connector_plugindir: set when the [maxscale] section loads (before the
 * services' account loaders and the monitors start), read by their
 * threads. An atomic pointer; a replaced string is never freed, as a
 * reader may still hold it (a change needs a new configuration load and
 * an unchanged value is kept as it is). NULL: libmariadb's default. */
static _Atomic(char *) plugin_dir;

void
sl__connector_plugindir_set(const char *dir)
{
    char *cur = atomic_load(&plugin_dir);

    if ((dir == NULL || dir[0] == '\0') ? cur == NULL
        : (cur != NULL && strcmp(cur, dir) == 0)) {
        return;
    }
    atomic_store(&plugin_dir, dir != NULL && dir[0] != '\0' ? strdup(dir)
                                                            : NULL);
}

int
sl_server_mysql_tls(const struct sl_server *srv, void *mysql)
{
    const struct sl_params *p = sl_server_params(srv);
    static const struct {
        const char *param;
        enum mysql_option opt;
    } files[] = {
        {"ssl_ca", MYSQL_OPT_SSL_CA},        {"ssl_ca_cert", MYSQL_OPT_SSL_CA},
        {"ssl_cert", MYSQL_OPT_SSL_CERT},    {"ssl_key", MYSQL_OPT_SSL_KEY},
        {"ssl_cipher", MYSQL_OPT_SSL_CIPHER}, {"ssl_crl", MYSQL_OPT_SSL_CRL},
    };
    const char *plugindir = atomic_load(&plugin_dir);
    my_bool on = 1;
    my_bool verify;
    char versions[64];
    int rc = 0;

    /* connector_plugindir: where libmariadb finds client plugins
     * (client_ed25519, dialog, ...); unset: its compiled-in default */
    if (plugindir != NULL && plugindir[0] != '\0' &&
        mysql_optionsv(mysql, MYSQL_PLUGIN_DIR, plugindir) != 0) {
        return -1;
    }
    /* proxy_protocol=true: the server expects a PROXY header; an
     * internal connection has no client behind it, so it says UNKNOWN
     * (the server sees Sluice's own address, as without a header). */
    if (srv->proxy_protocol &&
        mysql_optionsv(mysql, MARIADB_OPT_PROXY_HEADER, PP_UNKNOWN,
                       sizeof(PP_UNKNOWN) - 1) != 0) {
        return -1;
    }
    /* local_address: the source address of TCP connections (ignored by
     * libmariadb for a unix socket) */
    if (sl__local_address() != NULL &&
        mysql_optionsv(mysql, MYSQL_OPT_BIND, sl__local_address()) != 0) {
        return -1;
    }
    if (p == NULL || !sl_params_bool(p, "ssl")) {
        return 0;
    }
    /* libmariadb checks the name whenever it checks the certificate. */
    verify = sl_params_bool(p, "ssl_verify_peer_certificate");
    rc |= mysql_optionsv(mysql, MYSQL_OPT_SSL_ENFORCE, &on);
    rc |= mysql_optionsv(mysql, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        const char *v = sl_params_get(p, files[i].param);

        if (v != NULL && v[0] != '\0') {
            rc |= mysql_optionsv(mysql, files[i].opt, v);
        }
    }
    if (sl_params_has(p, "ssl_version") &&
        tls_versions(sl_params_get(p, "ssl_version"), versions,
                     sizeof(versions))) {
        rc |= mysql_optionsv(mysql, MARIADB_OPT_TLS_VERSION, versions);
    }
    return rc != 0 ? -1 : 0;
}

void *
sl_server_mysql_connect(const struct sl_server *srv, void *mysql,
                        const char *user, const char *password)
{
    const char *sock = sl_server_socket(srv);
    const struct sl_params *p = sl_server_params(srv);
    uint64_t extra = sock == NULL && p != NULL
                         ? sl_params_count(p, "extra_port") : 0;

    if (extra > 0 && extra <= 65535) {
        unsigned e;

        /* CLIENT_REMEMBER_OPTIONS: a failed attempt keeps the options
         * (TLS, PROXY header, source address) for the second */
        if (mysql_real_connect(mysql, sl_server_address(srv), user,
                               password, NULL, (unsigned)extra, NULL,
                               CLIENT_REMEMBER_OPTIONS) != NULL) {
            return mysql;
        }
        e = mysql_errno(mysql);
        if (e != ER_CON_COUNT_ERROR && e != CR_CONNECTION_ERROR &&
            e != CR_CONN_HOST_ERROR) {
            return NULL;
        }
        sl_log_info("server %s: extra_port %llu: %s; using port %d",
                    sl_server_name(srv), (unsigned long long)extra,
                    mysql_error(mysql), sl_server_port(srv));
    }
    return mysql_real_connect(mysql, sock ? NULL : sl_server_address(srv),
                              user, password, NULL,
                              sock ? 0 : (unsigned)sl_server_port(srv),
                              sock, 0);
}

void *
sl_monitor_connect(const struct sl_monitor *mon, struct sl_server *srv,
                   unsigned *err, char *msg, size_t msglen)
{
    const char *sock = sl_server_socket(srv);
    const struct sl_params *p = sl_monitor_params(mon);
    uint64_t wms = p != NULL && sl_params_has(p, "backend_write_timeout")
                       ? sl_params_duration_ms(p, "backend_write_timeout")
                       : 3000;
    unsigned cto = ms_to_seconds(sl_monitor_connect_timeout_ms(mon));
    unsigned rto = ms_to_seconds(sl_monitor_read_timeout_ms(mon));
    unsigned wto = ms_to_seconds(wms);
    unsigned proto = sock ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    const struct sl_params *sp = sl_server_params(srv);
    /* the server's own monitoruser/monitorpw (set together) win */
    bool own = sp != NULL && sl_params_has(sp, "monitoruser");
    const char *user = own ? sl_params_get(sp, "monitoruser")
                           : sl_monitor_user(mon);
    const char *password = own ? sl_params_get(sp, "monitorpw")
                               : sl_monitor_password(mon);
    MYSQL *c = mysql_init(NULL);

    if (c == NULL) {
        *err = 0;
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    mysql_optionsv(c, MYSQL_OPT_CONNECT_TIMEOUT, &cto);
    mysql_optionsv(c, MYSQL_OPT_READ_TIMEOUT, &rto);
    mysql_optionsv(c, MYSQL_OPT_WRITE_TIMEOUT, &wto);
    mysql_optionsv(c, MYSQL_OPT_PROTOCOL, &proto);
    if (sl_server_mysql_tls(srv, c) != 0) {
        *err = 0;
        snprintf(msg, msglen, "cannot set the TLS options of server %s",
                 sl_server_name(srv));
        mysql_close(c);
        return NULL;
    }
    if (sl_server_mysql_connect(srv, c, user, password) == NULL) {
        *err = mysql_errno(c);
        snprintf(msg, msglen, "%s", mysql_error(c));
        mysql_close(c);
        return NULL;
    }
    if (!sl_server_mysql_tls_ok(srv, c)) {
        *err = 0;
        snprintf(msg, msglen, "server does not support TLS but ssl=true "
                 "is set");
        mysql_close(c);
        return NULL;
    }
    return c;
}
