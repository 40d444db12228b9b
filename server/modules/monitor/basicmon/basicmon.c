/* SPDX-License-Identifier: Apache-2.0 */
/*
 * basicmon: the interim MariaDB monitor (until mariadbmon exists).
 *
 * Every tick it probes each server of the monitor over a persistent
 * libmariadb connection (opened with the monitor's user and password,
 * reopened when lost) with one query:
 *
 *     SELECT @@read_only, @@server_id, @@version
 *
 * and publishes the status:
 *
 *     cannot connect             -> Down (Running/Master/Slave cleared)
 *     access denied              -> Down + Auth Error
 *     connected, read_only = 0   -> Master, Running
 *     connected, read_only = 1   -> Slave, Running
 *     connected, query failed    -> Running
 *
 * Only the first server in configuration order with read_only = 0 becomes
 * Master; other writable servers are just Running and a warning names them
 * (two writable servers usually mean a broken replication set-up, and
 * routing writes to both would split the data). Maintenance and Draining
 * are set by an administrator and are kept as they were. For replicas
 * SHOW SLAVE STATUS gives Seconds_Behind_Master as the replication lag.
 *
 * Per tick:
 *
 *   for each server: probe (connect if needed) -> probe result
 *   assign Master to the first writable server
 *   for each server: status = kept admin bits | probed bits; log changes
 *
 * Context: create/destroy in the main thread; start/tick/stop in the
 * monitor's own thread (the MYSQL handles are touched only there);
 * diagnostics in the admin thread, which reads the per-server snapshot
 * under the instance mutex.
 */
#define SL_LOG_TAG "basicmon"

#include <errno.h>
#include <jansson.h>
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/log.h>
#include <sluice/module.h>
#include <sluice/monitor.h>
#include <sluice/params.h>
#include <sluice/server.h>

/* Server error codes that mean "the monitor's credentials are refused". */
#define BM_ER_ACCESS_DENIED 1045
#define BM_ER_ACCESS_DENIED_NO_PASSWORD 1698
/* Client library errors start here (CR_*): the connection is at fault. */
#define BM_CR_MIN 2000

/* Status bits an administrator owns; the monitor never changes them. */
#define BM_ADMIN_BITS (SL_SRV_MAINT | SL_SRV_DRAINING)

struct bm_probe {
    uint32_t bits;       /* SL_SRV_RUNNING or SL_SRV_AUTH_ERROR or 0 */
    bool role_known;     /* the query answered */
    bool writable;       /* @@read_only = 0 */
};

struct bm_server {
    struct sl_server *srv;
    MYSQL *conn;                 /* monitor thread only */
    struct bm_probe probe;       /* this tick's result */
    unsigned logged_errno;       /* last connect error logged, 0 none */
    bool conflict_warned;        /* "also writable" warning given */
    /* Snapshot for diagnostics, under bm_instance.lock. */
    bool connected;
    bool read_only;
    char last_error[256];
};

struct bm_instance {
    struct sl_monitor *mon;
    struct bm_server *servers;   /* config order */
    size_t nservers;
    pthread_mutex_t lock;        /* guards the diagnostics snapshot */
    uint64_t query_retries;      /* global, read at creation */
    uint64_t query_retry_timeout_ms;
};

static void
close_conn(struct bm_server *bs)
{
    if (bs->conn != NULL) {
        mysql_close(bs->conn);
        bs->conn = NULL;
    }
}

static void
set_snapshot(struct bm_instance *inst, struct bm_server *bs, bool connected,
             const char *err)
{
    pthread_mutex_lock(&inst->lock);
    bs->connected = connected;
    bs->read_only = bs->probe.role_known && !bs->probe.writable;
    if (err != NULL) {
        snprintf(bs->last_error, sizeof(bs->last_error), "%s", err);
    }
    pthread_mutex_unlock(&inst->lock);
}

/* Log a connection failure once per distinct error, not every tick. */
static void
log_connect_error(struct bm_instance *inst, struct bm_server *bs,
                  unsigned err, const char *msg)
{
    const char *sock = sl_server_socket(bs->srv);

    if (bs->logged_errno == err) {
        return;
    }
    bs->logged_errno = err;
    if (sock != NULL) {
        sl_log_warn("Monitor '%s' cannot connect to server '%s' (%s): %s", sl_monitor_name(inst->mon), sl_server_name(bs->srv), sock, msg);
    } else {
        sl_log_warn("Monitor '%s' cannot connect to server '%s' ([%s]:%d): %s", sl_monitor_name(inst->mon), sl_server_name(bs->srv), sl_server_address(bs->srv), sl_server_port(bs->srv), msg);
    }
}

/* A core monitor parameter, or dflt when the monitor has no such value
 * (the params getters need a declared name). */
static uint64_t
core_param(const struct sl_monitor *mon, const char *name, bool duration,
           uint64_t dflt)
{
    const struct sl_params *p = sl_monitor_params(mon);

    if (p == NULL || !sl_params_has(p, name)) {
        return dflt;
    }
    return duration ? sl_params_duration_ms(p, name)
                    : sl_params_count(p, name);
}


/*
 * Open bs->conn (backend_connect_attempts tries). On failure bs->conn
 * stays NULL, probe.bits says Down or Auth Error, and the error is logged
 * (once) and kept for diagnostics.
 */
static bool
open_conn(struct bm_instance *inst, struct bm_server *bs)
{
    uint64_t attempts =
        core_param(inst->mon, "backend_connect_attempts", false, 1);
    unsigned err = 0;
    char msg[256];

    for (uint64_t i = 0; i < (attempts ? attempts : 1); i++) {
        bs->conn = sl_monitor_connect(inst->mon, bs->srv, &err, msg,
                                      sizeof(msg));
        if (bs->conn != NULL) {
            bs->logged_errno = 0;
            return true;
        }
        if (err == BM_ER_ACCESS_DENIED ||
            err == BM_ER_ACCESS_DENIED_NO_PASSWORD) {
            bs->probe.bits = SL_SRV_AUTH_ERROR;
            break;   /* retrying a refused login changes nothing */
        }
    }
    log_connect_error(inst, bs, err, msg);
    set_snapshot(inst, bs, false, msg);
    return false;
}

/* Read Seconds_Behind_Master of the first replication channel. */
static int64_t
query_lag(struct bm_server *bs)
{
    int64_t lag = SL_SERVER_LAG_UNKNOWN;
    MYSQL *c = bs->conn;
    MYSQL_RES *res;

    if (mysql_query(c, "SHOW SLAVE STATUS") != 0 ||
        (res = mysql_store_result(c)) == NULL) {
        /* Usually a missing privilege (SLAVE MONITOR on 10.5+,
         * REPLICATION CLIENT before): say it once, not every tick. */
        sl_log_warn_once("Cannot read replication lag of server '%s', lag stays unknown: %s", sl_server_name(bs->srv), mysql_error(c));
        return lag;
    }
    MYSQL_ROW row = mysql_fetch_row(res);
    unsigned n = mysql_num_fields(res);
    MYSQL_FIELD *f = mysql_fetch_fields(res);

    for (unsigned i = 0; row != NULL && i < n; i++) {
        if (strcmp(f[i].name, "Seconds_Behind_Master") == 0 &&
            row[i] != NULL) {
            lag = strtoll(row[i], NULL, 10);
        }
    }
    mysql_free_result(res);
    return lag;
}

/* Run the probe query on an open connection. Returns the client error
 * (>= 2000) when the connection itself failed, else 0. */
static unsigned
run_probe_query(struct bm_server *bs)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (mysql_query(bs->conn,
                    "SELECT @@read_only, @@server_id, @@version") != 0 ||
        (res = mysql_store_result(bs->conn)) == NULL) {
        unsigned err = mysql_errno(bs->conn);
        return err >= BM_CR_MIN ? err : 0;
    }
    row = mysql_fetch_row(res);
    if (row != NULL && mysql_num_fields(res) == 3 && row[0] != NULL) {
        bs->probe.role_known = true;
        bs->probe.writable = strtol(row[0], NULL, 10) == 0;
        if (row[1] != NULL) {
            sl_server_set_server_id(bs->srv, strtoll(row[1], NULL, 10));
        }
        sl_server_set_version(bs->srv, mysql_get_server_version(bs->conn),
                              row[2] != NULL ? row[2] : "");
    }
    mysql_free_result(res);
    return 0;
}

/* Publish the server's gtid_current_pos for read-your-writes routing
 * (readwritesplit); "" where the server has none (MySQL, failure). */
static void
query_gtid_pos(struct bm_server *bs)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    const char *pos = "";

    if (mysql_query(bs->conn, "SELECT @@gtid_current_pos") != 0 ||
        (res = mysql_store_result(bs->conn)) == NULL) {
        sl_server_set_gtid_pos(bs->srv, "");
        return;
    }
    row = mysql_fetch_row(res);
    if (row != NULL && row[0] != NULL) {
        pos = row[0];
    }
    sl_server_set_gtid_pos(bs->srv, pos);
    mysql_free_result(res);
}

/* Probe one server into bs->probe (monitor thread). */
static void
probe_server(struct bm_instance *inst, struct bm_server *bs)
{
    unsigned err;

    memset(&bs->probe, 0, sizeof(bs->probe));
    if (bs->conn == NULL && !open_conn(inst, bs)) {
        return;
    }
    if ((err = run_probe_query(bs)) != 0) {
        /* The connection broke (server restarted, idle timeout, killed):
         * with query_retries, fresh connections and the probe (read-only)
         * again before calling the server down. */
        uint64_t first = sl_monotonic_ms();
        uint64_t done = 0;

        while (err != 0 && sl_query_retry_ok(err, done++, first, inst->query_retries,
                                 inst->query_retry_timeout_ms)) {
            sl_log_notice("Monitor '%s': probe of '%s' failed (%s); retry %llu of query_retries", sl_monitor_name(inst->mon), sl_server_name(bs->srv), mysql_error(bs->conn), (unsigned long long)done);
            close_conn(bs);
            if (!open_conn(inst, bs)) {
                return;
            }
            err = run_probe_query(bs);
        }
        if (err != 0) {
            log_connect_error(inst, bs, mysql_errno(bs->conn),
                              mysql_error(bs->conn));
            set_snapshot(inst, bs, false, mysql_error(bs->conn));
            close_conn(bs);
            return;
        }
    }
    bs->probe.bits = SL_SRV_RUNNING;
    query_gtid_pos(bs);
    if (bs->probe.role_known && !bs->probe.writable) {
        sl_server_set_replication_lag(bs->srv, query_lag(bs));
    } else if (bs->probe.role_known) {
        sl_server_set_replication_lag(bs->srv, 0);
    }
    set_snapshot(inst, bs, true, NULL);
}

static const char *
status_text(uint32_t st, char *buf, size_t len)
{
    const char *s = sl_server_status_str(st, buf, len);

    return (s == NULL || s[0] == '\0') ? "Down" : s;
}

/* The bits the monitor owns for server i, after role assignment. */
static uint32_t
role_bits(struct bm_instance *inst, struct bm_server *bs, bool *master_taken)
{
    const struct bm_probe *p = &bs->probe;

    if (!(p->bits & SL_SRV_RUNNING) || !p->role_known) {
        bs->conflict_warned = false;
        return p->bits;
    }
    if (!p->writable) {
        bs->conflict_warned = false;
        return p->bits | SL_SRV_SLAVE;
    }
    if (!*master_taken) {
        *master_taken = true;
        bs->conflict_warned = false;
        return p->bits | SL_SRV_MASTER;
    }
    if (!bs->conflict_warned) {
        bs->conflict_warned = true;
        sl_log_warn("Monitor '%s': server '%s' is also writable (read_only=0); only the first writable server in configuration order is Master", sl_monitor_name(inst->mon), sl_server_name(bs->srv));
    }
    return p->bits;
}

static void
publish(struct bm_instance *inst, struct bm_server *bs, uint32_t bits)
{
    /* Read the admin bits as late as possible: sl_server_set_status
     * replaces the whole word, and an admin may set Maintenance at any
     * moment. */
    uint32_t old = sl_server_status(bs->srv);
    uint32_t now = (old & BM_ADMIN_BITS) | bits;
    char a[128], b[128];

    if (now == old) {
        return;
    }
    sl_server_set_status(bs->srv, now);
    if (!(now & SL_SRV_RUNNING)) {
        sl_server_set_replication_lag(bs->srv, SL_SERVER_LAG_UNKNOWN);
    }
    sl_log_notice("Server '%s' changed state: %s -> %s", sl_server_name(bs->srv), status_text(old, a, sizeof(a)), status_text(now, b, sizeof(b)));
}

static void
bm_tick(void *instance)
{
    struct bm_instance *inst = instance;
    bool master_taken = false;

    for (size_t i = 0; i < inst->nservers; i++) {
        probe_server(inst, &inst->servers[i]);
    }
    for (size_t i = 0; i < inst->nservers; i++) {
        struct bm_server *bs = &inst->servers[i];
        publish(inst, bs, role_bits(inst, bs, &master_taken));
    }
}

static void *
bm_create_instance(struct sl_monitor *mon, const struct sl_params *p)
{
    struct bm_instance *inst = calloc(1, sizeof(*inst));
    struct sl_server *const *servers;

    if (inst == NULL) {
        goto out_oom;
    }
    inst->mon = mon;
    if (sl_global_params() != NULL) {      /* main thread, at creation */
        inst->query_retries = sl_params_count(sl_global_params(),
                                              "query_retries");
        inst->query_retry_timeout_ms = sl_params_duration_ms(
            sl_global_params(), "query_retry_timeout");
    }
    servers = sl_monitor_servers(mon, &inst->nservers);
    inst->servers = calloc(inst->nservers ? inst->nservers : 1,
                           sizeof(*inst->servers));
    if (inst->servers == NULL) {
        goto out_free_inst;
    }
    for (size_t i = 0; i < inst->nservers; i++) {
        inst->servers[i].srv = servers[i];
    }
    pthread_mutex_init(&inst->lock, NULL);
    return inst;

out_free_inst:
    free(inst);
out_oom:
    sl_log_error("Monitor '%s': out of memory", sl_monitor_name(mon));
    return NULL;
}

static void
bm_destroy_instance(void *instance)
{
    struct bm_instance *inst = instance;

    if (inst == NULL) {
        return;
    }
    for (size_t i = 0; i < inst->nservers; i++) {
        close_conn(&inst->servers[i]);
    }
    pthread_mutex_destroy(&inst->lock);
    free(inst->servers);
    free(inst);
}

static void
bm_start(void *instance)
{
    mysql_thread_init();
}

static void
bm_stop(void *instance)
{
    struct bm_instance *inst = instance;

    for (size_t i = 0; i < inst->nservers; i++) {
        close_conn(&inst->servers[i]);
    }
    mysql_thread_end();
}

static void *
bm_diagnostics(void *instance)
{
    struct bm_instance *inst = instance;
    json_t *arr = json_array();

    pthread_mutex_lock(&inst->lock);
    for (size_t i = 0; i < inst->nservers; i++) {
        const struct bm_server *bs = &inst->servers[i];
        json_array_append_new(
            arr, json_pack("{s:s, s:b, s:b, s:s}", "name",
                           sl_server_name(bs->srv), "connected",
                           bs->connected, "read_only", bs->read_only,
                           "last_error", bs->last_error));
    }
    pthread_mutex_unlock(&inst->lock);
    return json_pack("{s:o}", "servers", arr);
}

/* libmariadb must be initialised before threads use it. Main thread. */
static int
bm_process_init(void)
{
    return mysql_library_init(0, NULL, NULL) == 0 ? 0 : -EIO;
}

static const struct sl_monitor_ops bm_ops = {
    .size = sizeof(struct sl_monitor_ops),
    .create_instance = bm_create_instance,
    .destroy_instance = bm_destroy_instance,
    .start = bm_start,
    .stop = bm_stop,
    .tick = bm_tick,
    .diagnostics = bm_diagnostics,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_MONITOR,
    .status = SL_MODULE_BETA,
    .name = "basicmon",
    .version = "1.0.0",
    .description = "Interim MariaDB monitor: Running by connecting, "
                   "Master or Slave by @@read_only",
    .aliases = NULL,
    .params = NULL,
    .process_init = bm_process_init,
    .ops = &bm_ops,
})
