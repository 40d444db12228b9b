/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Servers: configured backends. Status bits are written by monitors (or the
 * admin API) and read lock-free by workers: atomics, no locks.
 *
 * Context: the name, address and parameters are immutable once published.
 * Status and counters may be read from any thread.
 */
#ifndef SLUICE_SERVER_H
#define SLUICE_SERVER_H

#include <sluice/ccdefs.h>
#include <sluice/worker.h>

struct sl_server;
struct sl_params;

enum sl_server_status {
    SL_SRV_RUNNING = 1u << 0,
    SL_SRV_MASTER = 1u << 1,
    SL_SRV_SLAVE = 1u << 2,
    SL_SRV_MAINT = 1u << 3,
    SL_SRV_DRAINING = 1u << 4,
    SL_SRV_AUTH_ERROR = 1u << 5,   /* monitor could not log in */
    SL_SRV_RELAY = 1u << 6,        /* a replica that also replicates on */
    SL_SRV_SYNCED = 1u << 7,       /* Galera: synced */
    SL_SRV_MOVING = 1u << 8,       /* a primary being demoted by a
                                    * switchover: routers hold what needs
                                    * the primary until a server is Master
                                    * without this bit */
    SL_SRV_DISK_EXHAUSTED = 1u << 9,  /* a disk over its
                                       * disk_space_threshold (mariadbmon's
                                       * disk space check): "Disk Space
                                       * Exhausted" */
};

/* Sentinel for "replication lag unknown". */
#define SL_SERVER_LAG_UNKNOWN (-1)

SL_EXPORT const char *sl_server_name(const struct sl_server *s);
SL_EXPORT const char *sl_server_address(const struct sl_server *s);
SL_EXPORT int sl_server_port(const struct sl_server *s);
/* Unix socket path, or NULL when the server is reached over TCP. */
SL_EXPORT const char *sl_server_socket(const struct sl_server *s);
SL_EXPORT const struct sl_params *sl_server_params(const struct sl_server *s);
SL_EXPORT int sl_server_weight(const struct sl_server *s);

/*
 * The server's rank (parameter `rank`, MaxScale's semantics): routers use
 * secondary servers only while no primary-rank server fits; lower is
 * better. Changed live through the REST API: read it at every choice (a
 * relaxed atomic load). Any thread.
 */
enum sl_server_rank {
    SL_SERVER_RANK_PRIMARY = 0,
    SL_SERVER_RANK_SECONDARY = 1,
};
SL_EXPORT int sl_server_rank(const struct sl_server *s);

/*
 * max_routing_connections (0 = no limit) and whether the server's
 * routing connections (sessions' backend connections, pooled ones
 * included) have reached it. The core enforces the limit when it opens a
 * connection (sl_backend_connect returns NULL); routers ask this only to
 * word the error. Any thread.
 */
SL_EXPORT int64_t sl_server_max_routing_connections(
    const struct sl_server *s);
SL_EXPORT bool sl_server_routing_full(const struct sl_server *s);

SL_EXPORT uint32_t sl_server_status(const struct sl_server *s);
/* Replace the status bits. Any thread (normally a monitor). */
SL_EXPORT void sl_server_set_status(struct sl_server *s, uint32_t status);
/* Human-readable status ("Master, Running"); writes into buf[len]. */
SL_EXPORT const char *sl_server_status_str(uint32_t status, char *buf,
                                           size_t len);
/* Usable at all: running and not in maintenance. */
static inline bool
sl_server_is_usable(uint32_t status)
{
    return (status & SL_SRV_RUNNING) && !(status & SL_SRV_MAINT);
}

/*
 * Give a libmariadb handle (a MYSQL *, before mysql_real_connect) the
 * server's TLS settings when it has ssl=true: TLS required, ssl_ca,
 * ssl_cert, ssl_key, ssl_cipher, ssl_crl, ssl_version, and certificate
 * verification (which in libmariadb also checks the host name) when
 * ssl_verify_peer_certificate=true; also the options every connection
 * to the server needs whatever its TLS: a PROXY header with
 * proxy_protocol=true, the source address with local_address. Every
 * connection Sluice opens with libmariadb (monitors, account loading,
 * config sync) goes through this. 0, or -1 if libmariadb refused an option. Any thread.
 *
 * libmariadb falls back to plain text when the server (or someone in the
 * path) does not offer TLS, unless it verifies the certificate: callers
 * check sl_server_mysql_tls_ok right after connecting and close the
 * connection when it says false (ssl=true but no TLS).
 */
SL_EXPORT int sl_server_mysql_tls(const struct sl_server *s, void *mysql);
SL_EXPORT bool sl_server_mysql_tls_ok(const struct sl_server *s,
                                      void *mysql);
/*
 * Connect an administrative connection (monitors, user account loading)
 * as user/password: mysql is an initialised MYSQL * whose options are
 * set (sl_server_mysql_tls). With the server's extra_port set (and no
 * socket) the extra port is tried first, and the normal port only when
 * that refuses because of its connection limit (1040) or nothing
 * listens there (2002, 2003), as MaxScale does; client sessions always use
 * the normal port. Returns mysql_real_connect's result (NULL: failed,
 * mysql_errno/mysql_error tell why). Any thread; blocks.
 */
SL_EXPORT void *sl_server_mysql_connect(const struct sl_server *s,
                                        void *mysql, const char *user,
                                        const char *password);

/*
 * query_retries and query_retry_timeout ([maxscale], as in MaxScale): may
 * an internal read-only query (a monitor's probe, user-account loading)
 * that failed with client error `err` be run again on a fresh connection?
 * Only network errors are retried: 2006 (CR_SERVER_GONE_ERROR), 2013
 * (CR_SERVER_LOST, also a read timeout) and 2055
 * (CR_SERVER_LOST_EXTENDED). `done` retries were made already, the first
 * failure was at sl_monotonic_ms() `first_ms`; a retry starts only while
 * fewer than `retries` (query_retries) were made and `timeout_ms`
 * (query_retry_timeout) has not passed since. Callers read the two
 * global parameters once, on the main thread (instance or service
 * creation: sl_global_params is not for other threads while a
 * configuration loads). Statements that change a server (failover,
 * switchover, rejoin, read_only enforcement, cooperative locks) are never
 * retried. Inline (no ABI symbol); any thread.
 */
static inline bool
sl_query_retry_ok(unsigned err, uint64_t done, uint64_t first_ms,
                  uint64_t retries, uint64_t timeout_ms)
{
    if (err != 2006 && err != 2013 && err != 2055) {
        return false;
    }
    return done < retries && sl_monotonic_ms() - first_ms < timeout_ms;
}

SL_EXPORT int64_t sl_server_replication_lag(const struct sl_server *s);
SL_EXPORT void sl_server_set_replication_lag(struct sl_server *s, int64_t lag);
/* Server version as reported by the monitor (e.g. 101119), 0 unknown. */
SL_EXPORT uint64_t sl_server_version(const struct sl_server *s);
SL_EXPORT void sl_server_set_version(struct sl_server *s, uint64_t version,
                                     const char *version_string);
SL_EXPORT int64_t sl_server_id(const struct sl_server *s);
SL_EXPORT void sl_server_set_server_id(struct sl_server *s, int64_t id);

/* Connection counters (maintained by the core for backend DCBs). */
SL_EXPORT int64_t sl_server_connections(const struct sl_server *s);
SL_EXPORT uint64_t sl_server_total_connections(const struct sl_server *s);
/* Routed-statement counters (routers bump them). */
SL_EXPORT void sl_server_count_route(struct sl_server *s, bool is_write);

/*
 * The server's @@gtid_current_pos as last seen by its monitor ("" when
 * unknown), e.g. "0-1-42,1-2-7". The monitor sets it every tick; routers
 * copy it out (NUL-terminated, truncated to len) to know what a replica
 * has applied. Any thread; a short spinlock guards the string.
 */
SL_EXPORT void sl_server_set_gtid_pos(struct sl_server *s, const char *pos);
SL_EXPORT void sl_server_gtid_pos(const struct sl_server *s, char *buf,
                                  size_t len);

#endif
