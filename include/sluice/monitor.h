/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Monitor modules. The core runs each monitor in its own thread, calling
 * tick() every monitor_interval. Monitors publish server status with
 * sl_server_set_status() (atomics; workers read it lock-free) and never
 * touch a worker's DCBs.
 */
#ifndef SLUICE_MONITOR_H
#define SLUICE_MONITOR_H

#include <sluice/ccdefs.h>

struct sl_monitor;
struct sl_server;
struct sl_params;

struct sl_monitor_ops {
    size_t size;   /* sizeof(struct sl_monitor_ops) the module was built with */
    /* Main thread. NULL on error (logged). */
    void *(*create_instance)(struct sl_monitor *mon,
                             const struct sl_params *p);
    void (*destroy_instance)(void *instance);
    /* Monitor thread: once before the first tick and once after the last. */
    void (*start)(void *instance);
    void (*stop)(void *instance);
    /* Monitor thread, every monitor_interval. */
    void (*tick)(void *instance);
    void *(*diagnostics)(void *instance);   /* json_t * or NULL */
};

SL_EXPORT const char *sl_monitor_name(const struct sl_monitor *mon);
SL_EXPORT struct sl_server *const *sl_monitor_servers(
    const struct sl_monitor *mon, size_t *count);
SL_EXPORT const char *sl_monitor_user(const struct sl_monitor *mon);
SL_EXPORT const char *sl_monitor_password(const struct sl_monitor *mon);
SL_EXPORT const struct sl_params *sl_monitor_params(
    const struct sl_monitor *mon);
/* Milliseconds: monitor_interval, backend_connect_timeout,
 * backend_read_timeout (core parameters of every monitor). */
SL_EXPORT uint64_t sl_monitor_interval_ms(const struct sl_monitor *mon);
SL_EXPORT uint64_t sl_monitor_connect_timeout_ms(const struct sl_monitor *m);
SL_EXPORT uint64_t sl_monitor_read_timeout_ms(const struct sl_monitor *mon);
/*
 * Open a libmariadb connection (a MYSQL *, returned as void * so this
 * header does not need mysql.h) to srv with the monitor's user, password
 * and backend_connect/read/write_timeout, over TCP or the server's unix
 * socket. NULL on failure with *err = mysql_errno (0 for out of memory)
 * and the message in msg[msglen]. Monitor thread (blocks).
 */
SL_EXPORT void *sl_monitor_connect(const struct sl_monitor *mon,
                                   struct sl_server *srv, unsigned *err,
                                   char *msg, size_t msglen);

/* Ticks completed so far (tests wait on it). */
SL_EXPORT uint64_t sl_monitor_ticks(const struct sl_monitor *mon);

/*
 * The global `passive` parameter ([maxscale] section, changed at run time
 * by PATCH /v1/maxscale): while true, monitors keep monitoring and
 * publishing server states but never change the cluster (no failover,
 * switchover, rejoin or read_only enforcement). Any thread.
 */
SL_EXPORT bool sl_monitor_passive(void);
/* What a monitor did, counted for /metrics (sluice_monitor_*_total):
 * a cluster operation that ended (ok or not), or an error of its loop (a
 * server it could not reach or query in a tick). Any thread; relaxed
 * atomics, never on a worker's hot path. */
enum sl_monitor_op {
    SL_MONITOR_OP_SWITCHOVER,
    SL_MONITOR_OP_FAILOVER,
    SL_MONITOR_OP_REJOIN,
    SL_MONITOR_OP_COUNT
};
SL_EXPORT void sl_monitor_count_op(struct sl_monitor *mon,
                                   enum sl_monitor_op op, bool ok);
SL_EXPORT void sl_monitor_count_error(struct sl_monitor *mon);

#endif
