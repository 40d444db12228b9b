/*
 * Monitor connections: one libmariadb connection from a monitor to one of
 * its servers, with the monitor's credentials and its
 * backend_connect/read/write_timeout, over TCP or the server's unix socket.
 * Every monitor module opens its connections through here so they all
 * honour the same core parameters the same way.
 *
 * Context: the monitor's own thread (blocking calls; never a worker).
 */
#include <mysql.h>
#include <stdio.h>
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
    if (mysql_real_connect(c, sock ? NULL : sl_server_address(srv),
                           sl_monitor_user(mon), sl_monitor_password(mon),
                           NULL, sock ? 0 : (unsigned)sl_server_port(srv),
                           sock, 0) == NULL) {
        *err = mysql_errno(c);
        snprintf(msg, msglen, "%s", mysql_error(c));
        mysql_close(c);
        return NULL;
    }
    return c;
}
