/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading the configuration: ini text -> validated objects.
 *
 *   read file -> sl__ini_parse -> [maxscale] -> classify sections by type=
 *     -> servers -> filters -> services -> listeners -> monitors
 *     -> cross checks -> (create_instances) module instances
 *
 * Each object's parameters are validated against the core's table for its
 * type (below) plus its module's table. Every problem is reported through
 * sl__cfg_error() as "FILE:LINE: ..." naming the section and parameter, and
 * loading goes on so that one run shows every mistake; any error makes the
 * whole load fail (NULL).
 *
 * Context: main thread, before the workers start. The objects are then
 * immutable (apart from their atomics) until sl__config_free at exit.
 */
#define SL_LOG_TAG "config"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sluice/log.h>
#include <sluice/server.h>

#include "config_files.h"
#include "config_int.h"
#include "ini.h"
#include "proxyproto.h"
#include "stats.h"
#include "tls.h"

struct sl_config *sl__config;
bool sl__config_errors_to_log;


/* ---- diagnostics ---- */

static void
diag_add(struct sl_cfg_diag *d, bool error, int line, const char *fmt,
         va_list ap)
{
    char msg[1024];
    char full[1400];
    size_t n;

    const char *file = d->file ? d->file : "-";

    vsnprintf(msg, sizeof(msg), fmt, ap);
    for (size_t i = d->nsrcs; line > 0 && i-- > 0;) {
        if (line >= d->srcs[i].first) {
            file = d->srcs[i].file;
            line = line - d->srcs[i].first + 1;
            break;
        }
    }
    if (line > 0) {
        snprintf(full, sizeof(full), "%s:%d: %s%s", file,
                 line, error ? "" : "warning: ", msg);
    } else {
        snprintf(full, sizeof(full), "%s: %s%s", d->file ? d->file : "-",
                 error ? "" : "warning: ", msg);
    }
    *(error ? &d->errors : &d->warnings) += 1;
    if (!d->quiet) {
        fprintf(stderr, "%s\n", full);
    }
    if (sl__config_errors_to_log) {
        if (error) {
            sl_log_error("%s", full);
        } else {
            sl_log_warn("%s", full);
        }
    }
    n = strlen(full);
    if (d->len + n + 2 > d->cap) {
        size_t cap = (d->cap + n + 2) * 2;
        char *t = realloc(d->text, cap);

        if (t == NULL) {
            return;
        }
        d->text = t;
        d->cap = cap;
    }
    memcpy(d->text + d->len, full, n);
    d->len += n;
    d->text[d->len++] = '\n';
    d->text[d->len] = '\0';
}

void
sl__cfg_error(struct sl_cfg_diag *d, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    diag_add(d, true, line, fmt, ap);
    va_end(ap);
}

void
sl__cfg_warn(struct sl_cfg_diag *d, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    diag_add(d, false, line, fmt, ap);
    va_end(ap);
}

void
sl__cfg_ignored(struct sl_cfg_diag *d, int line, const char *name,
                const char *what, const char *reason)
{
    size_t before = d->len;
    size_t n;

    sl__cfg_warn(d, line, "parameter '%s' in %s is accepted for MaxScale "
                 "compatibility and ignored: %s", name, what, reason);
    if (d->len <= before) {
        return;
    }
    n = d->len - before;
    if (d->ignored_len + n + 1 > d->ignored_cap) {
        size_t cap = (d->ignored_cap + n + 1) * 2;
        char *t = realloc(d->ignored, cap);

        if (t == NULL) {
            return;
        }
        d->ignored = t;
        d->ignored_cap = cap;
    }
    memcpy(d->ignored + d->ignored_len, d->text + before, n);
    d->ignored_len += n;
    d->ignored[d->ignored_len] = '\0';
    d->nignored++;
}

void
sl__cfg_diag_free(struct sl_cfg_diag *d)
{
    free(d->text);
    d->text = NULL;
    d->len = d->cap = 0;
    free(d->ignored);
    d->ignored = NULL;
    d->ignored_len = d->ignored_cap = 0;
    for (size_t i = 0; i < d->nsrcs; i++) {
        free(d->srcs[i].file);
    }
    free(d->srcs);
    d->srcs = NULL;
    d->nsrcs = 0;
}

/* ---- the core's parameter tables ---- */

#define P(n, t, def, fl, desc) {n, t, def, fl, NULL, desc}
#define PE(n, t, def, fl, vals, desc) {n, t, def, fl, vals, desc}
#define IGN SL_PARAM_F_IGNORED
#define REF SL_PARAM_F_REFUSED
#define MAND SL_PARAM_F_MANDATORY
#define SECS SL_PARAM_F_SECONDS

/*
 * MaxScale names Sluice does not implement. IGN rows (cosmetic or tuning
 * only) are accepted with a warning giving the description as the reason;
 * REF rows are refused with the description as the reason, except when the
 * value equals the row's default (the behaviour Sluice has), so that
 * "passive=false" loads and "passive=true" does not. docs/configuration.md
 * lists every row.
 */

static const char *const event_models[] = {"pinned", "shared", NULL};

static const struct sl_param_spec global_specs[] = {
    P("threads", SL_PARAM_STRING, "auto", 0,
      "Worker threads: 'auto' (one per CPU) or a number"),
    PE("event_model", SL_PARAM_ENUM, "pinned", 0, event_models,
       "pinned: per-worker event queues; shared: one queue for all"),
    P("module_dir", SL_PARAM_PATH, SLUICE_DEFAULT_MODULE_DIR, 0,
      "Directory of the module .so files"),
    P("logdir", SL_PARAM_PATH, "/var/log/sluice", 0,
      "Log directory; when set, the log goes to LOGDIR/sluice.log"),
    P("datadir", SL_PARAM_PATH, "/var/lib/sluice", 0, "Data directory"),
    P("piddir", SL_PARAM_PATH, "/run/sluice", 0,
      "When set, the pid is written to PIDDIR/sluice.pid"),
    P("persistdir", SL_PARAM_PATH, "/var/lib/sluice/sluice.cnf.d", 0,
      "Directory for objects created at run time"),
    P("log_debug", SL_PARAM_BOOL, "false", 0, "Log debug messages"),
    P("log_info", SL_PARAM_BOOL, "false", 0, "Log info messages"),
    P("log_notice", SL_PARAM_BOOL, "true", 0, "Log notices"),
    P("log_warning", SL_PARAM_BOOL, "true", 0, "Log warnings"),
    P("syslog", SL_PARAM_BOOL, "false", 0,
      "Also send log lines to the local syslog (/dev/log), facility user"),
    P("maxlog", SL_PARAM_BOOL, "true", 0,
      "Write Sluice's own log (file or standard output); false with "
      "syslog=true logs to syslog only"),
    P("admin_host", SL_PARAM_STRING, "127.0.0.1", 0, "REST API address"),
    P("admin_port", SL_PARAM_INT, "8989", 0, "REST API port"),
    P("admin_enabled", SL_PARAM_BOOL, "true", 0, "Enable the REST API"),
    P("admin_auth", SL_PARAM_BOOL, "true", 0,
      "Require HTTP basic authentication on the REST API"),
    P("admin_allowed_hosts", SL_PARAM_STRING, NULL, 0,
      "Extra names the REST API accepts in the Host header (comma list)"),
    P("admin_secure_paths", SL_PARAM_STRING, NULL, 0,
      "Directories (comma list) beside logdir where objects created "
      "through the REST API may put files"),
    P("admin_ssl_key", SL_PARAM_PATH, NULL, 0, "REST API TLS key"),
    P("admin_ssl_cert", SL_PARAM_PATH, NULL, 0, "REST API TLS certificate"),
    P("admin_ssl_ca_cert", SL_PARAM_PATH, NULL, 0, "REST API TLS CA"),
    P("admin_log_auth_failures", SL_PARAM_BOOL, "true", IGN,
      "REST API authentication failures are always logged"),
    P("admin_gui", SL_PARAM_BOOL, "false", IGN, "Sluice has no web GUI"),
    P("admin_secure_gui", SL_PARAM_BOOL, "false", IGN,
      "Sluice has no web GUI"),
    P("admin_pam_readwrite_service", SL_PARAM_STRING, NULL, REF,
      "PAM authentication of REST API users is not implemented"),
    P("admin_pam_readonly_service", SL_PARAM_STRING, NULL, REF,
      "PAM authentication of REST API users is not implemented"),
    P("admin_audit", SL_PARAM_BOOL, "false", REF,
      "the REST API audit file is not implemented"),
    P("admin_audit_file", SL_PARAM_PATH, NULL, REF,
      "the REST API audit file is not implemented"),
    P("admin_audit_exclude_methods", SL_PARAM_STRING, NULL, REF,
      "the REST API audit file is not implemented"),
    P("admin_jwt_algorithm", SL_PARAM_STRING, "auto", REF,
      "REST API JWT tokens are not implemented"),
    P("admin_jwt_key", SL_PARAM_PATH, NULL, REF,
      "REST API JWT tokens are not implemented"),
    P("admin_jwt_issuer", SL_PARAM_STRING, "maxscale", IGN,
      "REST API JWT tokens are not implemented"),
    P("admin_jwt_max_age", SL_PARAM_DURATION, "24h", IGN | SECS,
      "REST API JWT tokens are not implemented"),
    P("admin_ssl_version", SL_PARAM_STRING, "MAX", REF,
      "the REST API's TLS versions are not configurable"),
    P("admin_ssl_ca", SL_PARAM_PATH, NULL, REF,
      "REST API client certificates are not verified; use "
      "admin_ssl_ca_cert only with admin_ssl_cert/admin_ssl_key"),
    P("admin_verify_url", SL_PARAM_STRING, NULL, REF,
      "external REST API authentication is not implemented"),
    P("admin_readwrite_hosts", SL_PARAM_STRING, "%", REF,
      "REST API host restrictions are not implemented"),
    P("admin_readonly_hosts", SL_PARAM_STRING, "%", REF,
      "REST API host restrictions are not implemented"),
    P("shutdown_timeout", SL_PARAM_DURATION, "10s", SECS,
      "On SIGTERM, how long busy sessions may finish their statements"),
    P("writeq_high_water", SL_PARAM_SIZE, "64Ki", 0,
      "Pause reading the peer when a write queue exceeds this (0 = off)"),
    P("writeq_low_water", SL_PARAM_SIZE, "1024", 0,
      "Resume reading when the write queue drains below this"),
    P("query_digests", SL_PARAM_BOOL, "true", 0,
      "Keep per-statement statistics (GET /v1/sluice/queries); also "
      "counts statements by kind for routers that do not classify"),
    P("digest_max_entries", SL_PARAM_COUNT, "1000", 0,
      "Query digests each worker keeps (least recently seen evicted)"),
    P("latency_histograms", SL_PARAM_BOOL, "true", 0,
      "Response-time histograms per server and per service"),
    P("admin_metrics_public", SL_PARAM_BOOL, "false", 0,
      "GET /metrics without credentials"),
    P("admin_dashboard_dir", SL_PARAM_PATH, SLUICE_DEFAULT_DASHBOARD_DIR, 0,
      "Directory of the web dashboard's files (served at /)"),
    P("query_classifier", SL_PARAM_STRING, NULL, IGN,
      "Sluice has one built-in classifier"),
    P("query_classifier_args", SL_PARAM_STRING, NULL, IGN,
      "Sluice has one built-in classifier"),
    P("query_classifier_cache_size", SL_PARAM_SIZE, NULL, IGN,
      "tuning: Sluice's classifier has no cache"),
    P("local_address", SL_PARAM_STRING, NULL, 0,
      "Source address of connections to backends"),
    P("ms_timestamp", SL_PARAM_BOOL, "false", IGN,
      "cosmetic: log timestamps have Sluice's own format"),
    P("skip_permission_checks", SL_PARAM_BOOL, "false", IGN,
      "Sluice does not check the service users' grants at start-up"),
    P("skip_name_resolve", SL_PARAM_BOOL, "false", REF,
      "client host names are always resolved for host matching"),
    P("auth_connect_timeout", SL_PARAM_DURATION, "10s", IGN | SECS,
      "tuning: user-account loading uses Sluice's own timeouts"),
    P("auth_read_timeout", SL_PARAM_DURATION, "10s", IGN | SECS,
      "tuning: user-account loading uses Sluice's own timeouts"),
    P("auth_write_timeout", SL_PARAM_DURATION, "10s", IGN | SECS,
      "tuning: user-account loading uses Sluice's own timeouts"),
    P("query_retries", SL_PARAM_COUNT, "1", IGN,
      "tuning: Sluice's internal queries are not retried"),
    P("query_retry_timeout", SL_PARAM_DURATION, "5s", IGN | SECS,
      "tuning: Sluice's internal queries are not retried"),
    P("retain_last_statements", SL_PARAM_COUNT, "0", IGN,
      "diagnostics: sessions keep no statement history"),
    P("dump_last_statements", SL_PARAM_STRING, "never", IGN,
      "diagnostics: sessions keep no statement history"),
    P("session_trace", SL_PARAM_COUNT, "0", IGN,
      "diagnostics: session tracing is not implemented"),
    P("users_refresh_time", SL_PARAM_DURATION, "1s", SECS,
      "Least time between user account reloads caused by failed logins; "
      "a login that would wait longer is refused (MaxScale's default is "
      "30s)"),
    P("users_refresh_interval", SL_PARAM_DURATION, "0s", SECS,
      "Reload user accounts this often even without failed logins "
      "(0 = only on failed logins)"),
    P("passive", SL_PARAM_BOOL, "false", 0,
      "Monitors never change the cluster (no failover, switchover, rejoin "
      "or read_only enforcement); changeable at run time"),
    P("substitute_variables", SL_PARAM_BOOL, "false", 0,
      "Values starting with '$' are replaced by that environment "
      "variable"),
    P("sql_mode", SL_PARAM_STRING, "default", REF,
      "only the default SQL mode is parsed (sql_mode=oracle is not)"),
    P("log_throttling", SL_PARAM_STRING, NULL, 0,
      "COUNT, WINDOW, SUPPRESS: an error or warning logged COUNT times "
      "within WINDOW by one call site is suppressed for SUPPRESS (bare "
      "numbers are ms; default off)"),
    P("log_augmentation", SL_PARAM_COUNT, "0", IGN,
      "cosmetic: log lines are not augmented"),
    P("log_warn_super_user", SL_PARAM_BOOL, "false", IGN,
      "cosmetic: no warning for SUPER users"),
    P("max_auth_errors_until_block", SL_PARAM_COUNT, "10", 0,
      "Failed logins from one host before it is blocked for 60s (0 = off)"),
    P("rebalance_period", SL_PARAM_DURATION, "0s", IGN | SECS,
      "tuning: sessions are not moved between worker threads"),
    P("rebalance_threshold", SL_PARAM_COUNT, "20", IGN,
      "tuning: sessions are not moved between worker threads"),
    P("rebalance_window", SL_PARAM_COUNT, "10", IGN,
      "tuning: sessions are not moved between worker threads"),
    P("auto_tune", SL_PARAM_STRING, NULL, IGN,
      "tuning: nothing is tuned from the servers' variables"),
    P("threads_max", SL_PARAM_COUNT, "256", 0,
      "Most worker threads (1-1024): caps threads=auto, and a larger "
      "threads is an error"),
    P("load_persisted_configs", SL_PARAM_BOOL, "true", REF,
      "objects in persistdir are always loaded"),
    P("persist_runtime_changes", SL_PARAM_BOOL, "true", REF,
      "runtime changes are always written to persistdir"),
    P("config_sync_cluster", SL_PARAM_STRING, NULL, 0,
      "Monitor whose cluster's primary stores the synchronized runtime "
      "configuration in config_sync_db.maxscale_config (see "
      "docs/config-sync.md); unset = no synchronization"),
    P("config_sync_user", SL_PARAM_STRING, NULL, 0,
      "User for configuration synchronization (needed with "
      "config_sync_cluster)"),
    P("config_sync_password", SL_PARAM_PASSWORD, NULL, 0,
      "Password of config_sync_user"),
    P("config_sync_interval", SL_PARAM_DURATION, "5s", SECS,
      "How often the synchronized configuration's version is polled "
      "(more than 0)"),
    P("config_sync_timeout", SL_PARAM_DURATION, "10s", SECS,
      "Connect, read, write and lock-wait timeout of the synchronization "
      "queries (more than 0)"),
    P("config_sync_db", SL_PARAM_STRING, "mysql", 0,
      "Database of the maxscale_config table"),
    P("key_manager", SL_PARAM_STRING, "none", REF,
      "key managers are not implemented"),
    P("core_file", SL_PARAM_BOOL, "false", IGN,
      "core dumps follow the system's limits"),
    P("cachedir", SL_PARAM_PATH, NULL, 0,
      "Cache directory: created at start-up when set (nothing is stored "
      "in it yet)"),
    P("secretsdir", SL_PARAM_PATH, NULL, 0,
      "Directory of the .secrets key file (default: datadir)"),
    P("execdir", SL_PARAM_PATH, NULL, IGN,
      "Sluice runs no helper programs"),
    P("libdir", SL_PARAM_PATH, NULL, IGN, "modules come from module_dir"),
    P("sharedir", SL_PARAM_PATH, NULL, IGN, "Sluice has no shared data"),
    P("connector_plugindir", SL_PARAM_PATH, NULL, IGN,
      "Sluice's backend connections need no connector plugins"),
    P("module_configdir", SL_PARAM_PATH, NULL, IGN,
      "no module reads a separate configuration file"),
    P("language", SL_PARAM_PATH, NULL, IGN,
      "error messages are in English"),
    P("debug", SL_PARAM_STRING, NULL, IGN, "MaxScale debug switches"),
    P("writeq_high_water_mark", SL_PARAM_SIZE, NULL, IGN,
      "use writeq_high_water"),
    SL_PARAM_END,
};

/* The TLS parameters of servers and listeners (checked in tls.c). */
#define SL_TLS_PARAM_SPECS(what)                                              \
    P("ssl", SL_PARAM_BOOL, "false", 0, "TLS for " what),                     \
    P("ssl_cert", SL_PARAM_PATH, NULL, 0, "Certificate (PEM)"),               \
    P("ssl_key", SL_PARAM_PATH, NULL, 0, "Private key (PEM)"),                \
    P("ssl_ca", SL_PARAM_PATH, NULL, 0, "CA certificates (PEM)"),             \
    P("ssl_ca_cert", SL_PARAM_PATH, NULL, 0, "Old name of ssl_ca"),           \
    P("ssl_version", SL_PARAM_STRING, "MAX", 0,                               \
      "TLSv10, TLSv11, TLSv12, TLSv13 or MAX (comma list allowed)"),          \
    P("ssl_cipher", SL_PARAM_STRING, NULL, 0, "OpenSSL cipher list"),         \
    P("ssl_verify_peer_certificate", SL_PARAM_BOOL, "false", 0,               \
      "Verify the peer's certificate against ssl_ca"),                        \
    P("ssl_verify_peer_host", SL_PARAM_BOOL, "false", 0,                      \
      "Also check the peer certificate's host name"),                         \
    P("ssl_cert_verify_depth", SL_PARAM_COUNT, "9", 0,                        \
      "Longest certificate chain accepted"),                                  \
    P("ssl_crl", SL_PARAM_PATH, NULL, 0,                                     \
      "Certificate revocation lists (PEM) for the peer's chain")

static const struct sl_param_spec server_specs[] = {
    P("type", SL_PARAM_STRING, NULL, MAND, "Must be server"),
    P("address", SL_PARAM_STRING, NULL, 0, "Host name or IP address"),
    P("port", SL_PARAM_INT, "3306", 0, "TCP port"),
    P("socket", SL_PARAM_PATH, NULL, 0, "Unix socket path (instead of "
      "address and port)"),
    P("protocol", SL_PARAM_STRING, "mariadbbackend", 0,
      "Accepted for compatibility: MariaDBBackend or MySQLBackend"),
    P("weight", SL_PARAM_INT, "1", 0, "Relative weight for routers"),
    P("authenticator", SL_PARAM_STRING, NULL, 0,
      "MariaDBBackendAuth, MySQLBackendAuth, MariaDBAuth or MySQLAuth: "
      "the native authentication Sluice has (others are refused)"),
    P("persistpoolmax", SL_PARAM_COUNT, "0", REF,
      "backend connection pooling is not implemented"),
    P("persistmaxtime", SL_PARAM_DURATION, "0s", REF | SECS,
      "backend connection pooling is not implemented"),
    P("rank", SL_PARAM_STRING, "primary", REF,
      "server ranks are not implemented"),
    P("priority", SL_PARAM_INT, "0", IGN,
      "used only by galeramon, which Sluice does not have"),
    P("monitoruser", SL_PARAM_STRING, NULL, REF,
      "per-server monitor credentials are not implemented; set user and "
      "password on the monitor"),
    P("monitorpw", SL_PARAM_PASSWORD, NULL, REF,
      "per-server monitor credentials are not implemented; set user and "
      "password on the monitor"),
    P("extra_port", SL_PARAM_COUNT, "0", REF,
      "the server's extra port is not used"),
    P("proxy_protocol", SL_PARAM_BOOL, "false", 0,
      "Send a PROXY protocol (v1) header with the client's address on "
      "each client connection to this server"),
    P("compression", SL_PARAM_BOOL, "false", 0,
      "Compress the protocol (zlib) on connections to this server"),
    P("disk_space_threshold", SL_PARAM_STRING, NULL, REF,
      "disk space monitoring is not implemented"),
    P("max_routing_connections", SL_PARAM_COUNT, "0", REF,
      "connection limits per server are not implemented"),
    P("replication_custom_options", SL_PARAM_STRING, NULL, REF,
      "custom CHANGE MASTER options are not implemented"),
    P("private_address", SL_PARAM_STRING, NULL, REF,
      "private addresses for replication are not implemented"),
    SL_TLS_PARAM_SPECS("connections to the server"),
    SL_PARAM_END,
};

static const struct sl_param_spec service_specs[] = {
    P("type", SL_PARAM_STRING, NULL, MAND, "Must be service"),
    P("router", SL_PARAM_STRING, NULL, MAND, "Router module"),
    P("servers", SL_PARAM_SERVERS, NULL, 0, "Servers, comma separated"),
    P("targets", SL_PARAM_TARGETS, NULL, 0, "Servers, comma separated "
      "(alternative to servers)"),
    P("user", SL_PARAM_STRING, NULL, MAND, "User that loads user accounts"),
    P("password", SL_PARAM_PASSWORD, NULL, MAND, "Its password"),
    P("filters", SL_PARAM_FILTERS, NULL, 0, "Filter chain, a|b|c"),
    P("max_connections", SL_PARAM_COUNT, "0", 0,
      "Maximum client sessions, 0 = unlimited"),
    P("connection_timeout", SL_PARAM_DURATION, "0s", SECS,
      "Close idle client sessions after this long, 0 = never"),
    P("auth_timeout", SL_PARAM_DURATION, "10s", SECS,
      "Close clients that have not logged in this long after connecting, "
      "0 = never"),
    P("max_pending_logins_per_host", SL_PARAM_COUNT, "256", 0,
      "TCP connections from one host that may be logging in at once, "
      "0 = unlimited"),
    P("max_allowed_packet", SL_PARAM_SIZE, "16Mi", 0,
      "Largest command a client may send (1153 and close beyond)"),
    P("enable_root_user", SL_PARAM_BOOL, "false", 0,
      "Allow root to log in through the service"),
    P("version_string", SL_PARAM_STRING, NULL, 0,
      "Server version sent to clients in the handshake"),
    P("log_auth_warnings", SL_PARAM_BOOL, "true", 0,
      "Log failed client authentications"),
    P("kill_on_client_close", SL_PARAM_BOOL, "true", 0,
      "KILL QUERY a statement still running when its client goes away"),
    P("auth_all_servers", SL_PARAM_BOOL, "false", REF,
      "user accounts are loaded from one server only"),
    P("strip_db_esc", SL_PARAM_BOOL, "true", REF,
      "database grants are always matched with escapes stripped"),
    P("localhost_match_wildcard_host", SL_PARAM_BOOL, "true", REF,
      "localhost always matches wildcard hosts"),
    P("max_retry_interval", SL_PARAM_DURATION, "3600s", IGN | SECS,
      "tuning: Sluice does not retry starting a service"),
    P("retry_on_failure", SL_PARAM_BOOL, "true", IGN,
      "tuning: Sluice does not retry starting a service"),
    P("session_track_trx_state", SL_PARAM_BOOL, "false", REF,
      "transaction state comes from Sluice's classifier, not from "
      "session tracking"),
    P("net_write_timeout", SL_PARAM_DURATION, "0s", SECS,
      "Close a client whose writes make no progress this long, 0 = never"),
    P("idle_session_pool_time", SL_PARAM_DURATION, NULL, REF | SECS,
      "connection pooling is not implemented"),
    P("multiplex_timeout", SL_PARAM_DURATION, NULL, REF | SECS,
      "connection pooling is not implemented"),
    P("connection_keepalive", SL_PARAM_DURATION, "300s", SECS,
      "Ping (COM_PING, answer not passed on) a session's backend "
      "connection that has been idle this long, so the server's "
      "wait_timeout does not close it; 0 = never"),
    P("max_sescmd_history", SL_PARAM_COUNT, "50", IGN,
      "only readwritesplit keeps a session command history"),
    P("prune_sescmd_history", SL_PARAM_BOOL, "true", IGN,
      "only readwritesplit keeps a session command history"),
    P("disable_sescmd_history", SL_PARAM_BOOL, "false", IGN,
      "only readwritesplit keeps a session command history"),
    P("user_accounts_file", SL_PARAM_PATH, NULL, REF,
      "user account files are not implemented"),
    P("user_accounts_file_usage", SL_PARAM_STRING, NULL, REF,
      "user account files are not implemented"),
    P("rank", SL_PARAM_STRING, "primary", REF,
      "service ranks are not implemented"),
    P("cluster", SL_PARAM_STRING, NULL, 0,
      "The service's servers are this monitor's, following its list at "
      "run time (not with servers= or targets=)"),
    P("weightby", SL_PARAM_STRING, NULL, REF,
      "removed in MaxScale 6; use the servers' weight"),
    P("log_debug", SL_PARAM_BOOL, "false", IGN,
      "log levels are global ([maxscale] log_*)"),
    P("log_info", SL_PARAM_BOOL, "false", IGN,
      "log levels are global ([maxscale] log_*)"),
    P("log_notice", SL_PARAM_BOOL, "false", IGN,
      "log levels are global ([maxscale] log_*)"),
    P("log_warning", SL_PARAM_BOOL, "false", IGN,
      "log levels are global ([maxscale] log_*)"),
    SL_PARAM_END,
};

static const struct sl_param_spec listener_specs[] = {
    P("type", SL_PARAM_STRING, NULL, MAND, "Must be listener"),
    P("service", SL_PARAM_SERVICE, NULL, MAND, "Service the port serves"),
    P("protocol", SL_PARAM_STRING, "mariadbprotocol", 0,
      "Protocol module (MariaDBClient, MySQLClient... are aliases)"),
    P("address", SL_PARAM_STRING, "::", 0, "Address to bind"),
    P("port", SL_PARAM_INT, NULL, 0, "TCP port (port or socket is "
      "mandatory)"),
    P("socket", SL_PARAM_PATH, NULL, 0, "Unix socket path"),
    P("authenticator", SL_PARAM_STRING, NULL, 0,
      "MariaDBAuth or MySQLAuth: the native authentication Sluice has "
      "(PAMAuth, ed25519auth, GSSAPIAuth are refused)"),
    P("authenticator_options", SL_PARAM_STRING, NULL, REF,
      "authenticator options are not implemented"),
    P("sql_mode", SL_PARAM_STRING, "default", REF,
      "only the default SQL mode is parsed (sql_mode=oracle is not)"),
    P("connection_init_sql_file", SL_PARAM_PATH, NULL, REF,
      "connection initialization SQL is not implemented"),
    P("user_mapping_file", SL_PARAM_PATH, NULL, REF,
      "user mapping is not implemented"),
    P("proxy_protocol_networks", SL_PARAM_STRING, NULL, 0,
      "Clients allowed to send a PROXY protocol (v1 or v2) header: "
      "addresses, subnets (a.b.c.d/n), localhost, *"),
    P("connection_metadata", SL_PARAM_STRING, NULL, IGN,
      "cosmetic: no connection metadata is sent to clients"),
    SL_TLS_PARAM_SPECS("client connections (ssl=true requires TLS)"),
    SL_PARAM_END,
};

static const struct sl_param_spec monitor_specs[] = {
    P("type", SL_PARAM_STRING, NULL, MAND, "Must be monitor"),
    P("module", SL_PARAM_STRING, NULL, MAND, "Monitor module"),
    P("servers", SL_PARAM_SERVERS, NULL, 0, "Servers to monitor"),
    P("user", SL_PARAM_STRING, NULL, 0, "Monitor user"),
    P("password", SL_PARAM_PASSWORD, NULL, 0, "Its password"),
    P("monitor_interval", SL_PARAM_DURATION, "2000ms", 0,
      "Time between ticks; a bare number is milliseconds"),
    P("backend_connect_timeout", SL_PARAM_DURATION, "3s", SECS,
      "Connect timeout; a bare number is seconds"),
    P("backend_read_timeout", SL_PARAM_DURATION, "3s", SECS,
      "Read timeout; a bare number is seconds"),
    P("backend_write_timeout", SL_PARAM_DURATION, "3s", SECS,
      "Write timeout; a bare number is seconds"),
    P("backend_connect_attempts", SL_PARAM_COUNT, "1", 0,
      "Connection attempts per tick"),
    P("journal_max_age", SL_PARAM_DURATION, "28800s", IGN | SECS,
      "the monitor keeps no journal"),
    P("disk_space_threshold", SL_PARAM_STRING, NULL, REF,
      "disk space monitoring is not implemented"),
    P("disk_space_check_interval", SL_PARAM_DURATION, "0s", IGN,
      "disk space monitoring is not implemented"),
    P("script", SL_PARAM_STRING, NULL, REF,
      "monitor scripts are not implemented"),
    P("script_timeout", SL_PARAM_DURATION, "90s", IGN | SECS,
      "monitor scripts are not implemented"),
    P("events", SL_PARAM_STRING, NULL, IGN,
      "monitor scripts are not implemented"),
    SL_PARAM_END,
};

static const struct sl_param_spec filter_specs[] = {
    P("type", SL_PARAM_STRING, NULL, MAND, "Must be filter"),
    P("module", SL_PARAM_STRING, NULL, MAND, "Filter module"),
    SL_PARAM_END,
};

const struct sl_param_spec *
sl__config_core_specs(const char *type)
{
    static const struct {
        const char *type;
        const struct sl_param_spec *specs;
    } map[] = {
        {"maxscale", global_specs}, {"server", server_specs},
        {"service", service_specs}, {"listener", listener_specs},
        {"monitor", monitor_specs}, {"filter", filter_specs},
    };

    for (size_t i = 0; i < SL_ARRAY_LEN(map); i++) {
        if (strcmp(map[i].type, type) == 0) {
            return map[i].specs;
        }
    }
    return NULL;
}

/* ---- loading ---- */

enum obj_kind { K_SERVER, K_SERVICE, K_LISTENER, K_MONITOR, K_FILTER, K_N };

static const char *const kind_names[K_N] = {
    "server", "service", "listener", "monitor", "filter",
};

struct loader {
    struct sl_cfg_diag *d;
    struct sl_config *cfg;
    struct sl_ini ini;
    const struct sl_ini_section **by_kind[K_N];
    size_t nby_kind[K_N];
};

static void
ini_error(void *ctx, int line, const char *msg)
{
    sl__cfg_error(ctx, line, "%s", msg);
}

/* Grow *arr (of pointers) by one slot and store v; -ENOMEM on failure. */
static int
push_ptr(void *arrp, size_t *n, void *v)
{
    void ***arr = arrp;
    void **nv = realloc(*arr, (*n + 1) * sizeof(void *));

    if (nv == NULL) {
        return -ENOMEM;
    }
    nv[(*n)++] = v;
    *arr = nv;
    return 0;
}

/*
 * A params set from a section's keys. ssl_check is unused since TLS is
 * supported (tls.c checks the ssl* parameters); kept for the call sites.
 */
static struct sl_params *
section_params(struct loader *L, const struct sl_ini_section *s,
               const char *what, bool ssl_check)
{
    struct sl_params *p = sl__params_new();

    if (p == NULL) {
        sl__cfg_error(L->d, s->line, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < s->nkvs; i++) {
        const struct sl_ini_kv *kv = &s->kvs[i];

        if (sl__params_set(p, kv->name, kv->value, kv->line) < 0) {
            sl__cfg_error(L->d, kv->line, "out of memory");
            sl__params_free(p);
            return NULL;
        }
    }
    return p;
}

/* mod_failed: the object's module did not load, so names that are not
 * core parameters may be the module's: do not call them unknown. */
static int
validate(struct loader *L, struct sl_params *p, enum obj_kind kind,
         const struct sl_loaded_module *mod, bool mod_failed,
         const char *what, int line)
{
    const struct sl_param_spec *tables[2];
    size_t n = 0;
    int errors;

    /* The module's table first: a router that implements a name the core
     * table lists as ignored (max_sescmd_history) wins. */
    if (mod && mod->info->params) {
        tables[n++] = mod->info->params;
    }
    tables[n++] = sl__config_core_specs(kind_names[kind]);
    L->d->skip_unknown = mod_failed;
    errors = sl__params_validate(p, tables, n, L->d, what, line);
    L->d->skip_unknown = false;
    return errors;
}

static bool
copy_checked(struct loader *L, char *dst, size_t len, const char *src,
             const char *param, const char *what, int line)
{
    if (strlen(src) >= len) {
        sl__cfg_error(L->d, line, "value of parameter '%s' in %s is too "
                      "long (at most %zu characters)", param, what, len - 1);
        return false;
    }
    memcpy(dst, src, strlen(src) + 1);
    return true;
}

static const char *
module_dir(struct loader *L)
{
    return L->cfg->global.module_dir;
}

/* Load the module named by param (already known to be set). */
static const struct sl_loaded_module *
load_module(struct loader *L, const struct sl_ini_section *s,
            const char *param, enum sl_module_type type, const char *what)
{
    const struct sl_ini_kv *kv = sl__ini_find(s, param);
    const struct sl_loaded_module *m;
    char err[1024];

    if (kv == NULL) {
        return NULL;
    }
    m = sl__module_load_err(module_dir(L), kv->value, type, err, sizeof(err));
    if (m == NULL) {
        sl__cfg_error(L->d, kv->line, "unknown %s module '%s' in %s: %s",
                      sl__module_type_name(type), kv->value, what, err);
    }
    return m;
}

/* ---- [maxscale] ---- */

static void
resolve_threads(struct loader *L, struct sl_global *g)
{
    const char *v = sl_params_get(g->params, "threads");
    int line = sl__params_line(g->params, "threads");
    uint64_t max = sl_params_count(g->params, "threads_max");
    int64_t n;

    if (max < 1 || max > 1024) {
        sl__cfg_error(L->d, sl__params_line(g->params, "threads_max"),
                      "invalid value '%s' for parameter 'threads_max' in "
                      "section 'maxscale' (expected 1 to 1024)",
                      sl_params_get(g->params, "threads_max"));
        return;
    }
    if (strcasecmp(v, "auto") == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        g->threads = cpus > 0 ? (int)((uint64_t)cpus > max ? max : (uint64_t)
                                      cpus) : 1;
    } else if (sl__param_parse_int(v, &n) == 0 && n >= 1 &&
               (uint64_t)n <= max) {
        g->threads = (int)n;
    } else {
        sl__cfg_error(L->d, line, "invalid value '%s' for parameter "
                      "'threads' in section 'maxscale' (expected 'auto' or "
                      "a number from 1 to threads_max=%llu)", v,
                      (unsigned long long)max);
    }
}

static int
resolve_log_level(const struct sl_params *p)
{
    if (sl_params_bool(p, "log_debug")) {
        return SL_LOG_DEBUG;
    }
    if (sl_params_bool(p, "log_info")) {
        return SL_LOG_INFO;
    }
    if (sl_params_bool(p, "log_notice")) {
        return SL_LOG_NOTICE;
    }
    return sl_params_bool(p, "log_warning") ? SL_LOG_WARN : SL_LOG_ERROR;
}

static void
copy_path(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

/* log_throttling = COUNT, WINDOW, SUPPRESS (MaxScale's form; durations
 * with a unit, or bare milliseconds). */
static void
resolve_log_throttling(struct loader *L, struct sl_global *g)
{
    const char *v = sl_params_get(g->params, "log_throttling");
    char a[64], b[64], c[64], extra[8];
    uint64_t count, window, suppress;

    if (v == NULL) {
        return;
    }
    if (sscanf(v, " %63[^, ] , %63[^, ] , %63[^, ] %7s", a, b, c,
               extra) != 3 || sl__param_parse_count(a, &count) < 0 ||
        count > 1000000 || sl_param_parse_duration(b, false, &window) < 0 ||
        sl_param_parse_duration(c, false, &suppress) < 0) {
        sl__cfg_error(L->d, sl__params_line(g->params, "log_throttling"),
                      "invalid value '%s' for parameter 'log_throttling' in "
                      "section 'maxscale' (expected COUNT, WINDOW, SUPPRESS "
                      "such as 10, 1000ms, 10000ms)", v);
        return;
    }
    g->log_throttle_count = (unsigned)count;
    g->log_throttle_window_ms = window;
    g->log_throttle_suppress_ms = suppress;
}

static void
fill_global(struct loader *L, struct sl_global *g)
{
    struct sl_params *p = g->params;
    const char *env = getenv("SLUICE_MODULE_DIR");
    int64_t port = sl_params_int(p, "admin_port");

    resolve_threads(L, g);
    resolve_log_throttling(L, g);
    g->event_model = sl_params_enum(p, "event_model") == 1
                         ? SL_EVENT_MODEL_SHARED : SL_EVENT_MODEL_PINNED;
    if (L->d->module_dir) {
        copy_path(g->module_dir, sizeof(g->module_dir), L->d->module_dir);
    } else if (env && env[0]) {
        copy_path(g->module_dir, sizeof(g->module_dir), env);
    } else {
        copy_path(g->module_dir, sizeof(g->module_dir),
                  sl_params_get(p, "module_dir"));
    }
    copy_path(g->logdir, sizeof(g->logdir), sl_params_get(p, "logdir"));
    if (sl__params_line(p, "logdir") > 0) {
        snprintf(g->log_file, sizeof(g->log_file), "%.4000s/sluice.log",
                 g->logdir);
    }
    copy_path(g->datadir, sizeof(g->datadir), sl_params_get(p, "datadir"));
    copy_path(g->piddir, sizeof(g->piddir), sl_params_get(p, "piddir"));
    copy_path(g->persistdir, sizeof(g->persistdir),
              sl_params_get(p, "persistdir"));
    g->log_level = resolve_log_level(p);
    g->writeq_high_water = sl_params_size(p, "writeq_high_water");
    g->writeq_low_water = sl_params_size(p, "writeq_low_water");
    if (g->writeq_high_water && g->writeq_low_water >= g->writeq_high_water) {
        sl__cfg_error(L->d, sl__params_line(p, "writeq_low_water"),
                      "writeq_low_water must be below writeq_high_water in "
                      "section 'maxscale'");
    }
    copy_path(g->admin_host, sizeof(g->admin_host),
              sl_params_get(p, "admin_host"));
    if (port < 0 || port > 65535) {
        sl__cfg_error(L->d, sl__params_line(p, "admin_port"),
                      "invalid value '%s' for parameter 'admin_port' in "
                      "section 'maxscale' (expected a port 0-65535)",
                      sl_params_get(p, "admin_port"));
    }
    g->admin_port = (int)port;
    g->admin_enabled = sl_params_bool(p, "admin_enabled");
}

static int
load_global(struct loader *L)
{
    static const struct sl_ini_section empty = {.name = "maxscale"};
    const struct sl_ini_section *s = &empty;
    const struct sl_param_spec *tables[1] = {global_specs};
    struct sl_global *g = &L->cfg->global;
    int before = L->d->errors;

    for (size_t i = 0; i < L->ini.nsections; i++) {
        if (strcasecmp(L->ini.sections[i].name, "maxscale") == 0) {
            s = &L->ini.sections[i];
        }
    }
    g->params = section_params(L, s, "section 'maxscale'", false);
    if (g->params == NULL) {
        return -ENOMEM;
    }
    sl__params_validate(g->params, tables, 1, L->d, "section 'maxscale'",
                        s->line);
    if (L->d->errors == before) {
        fill_global(L, g);
    } else {
        /* Still find modules so later sections get useful errors. */
        const char *env = getenv("SLUICE_MODULE_DIR");

        copy_path(g->module_dir, sizeof(g->module_dir),
                  L->d->module_dir ? L->d->module_dir
                  : env && env[0] ? env : SLUICE_DEFAULT_MODULE_DIR);
    }
    return 0;
}

/* ---- classifying sections ---- */

static bool
valid_name(const char *name)
{
    if (strlen(name) >= SL_NAME_MAX) {
        return false;
    }
    for (const char *c = name; *c; c++) {
        if (!isalnum((unsigned char)*c) && !strchr("_.~-", *c)) {
            return false;
        }
    }
    return true;
}

static void
unknown_type(struct loader *L, const struct sl_ini_section *s,
             const struct sl_ini_kv *kv)
{
    const char *near = NULL;

    for (int k = 0; k < K_N; k++) {
        if (sl__edit_distance(kv->value, kind_names[k]) <= 2) {
            near = kind_names[k];
        }
    }
    sl__cfg_error(L->d, kv->line, "unknown object type '%s' in section '%s' "
                  "(expected server, service, listener, monitor or "
                  "filter)%s%s%s", kv->value, s->name,
                  near ? " (did you mean '" : "", near ? near : "",
                  near ? "'?)" : "");
}

static int
classify(struct loader *L)
{
    for (size_t i = 0; i < L->ini.nsections; i++) {
        const struct sl_ini_section *s = &L->ini.sections[i];
        const struct sl_ini_kv *kv;
        int k;

        if (strcasecmp(s->name, "maxscale") == 0) {
            continue;
        }
        if (!valid_name(s->name)) {
            sl__cfg_error(L->d, s->line, "invalid section name '%s' (use at "
                          "most %d letters, digits and _.~-)", s->name,
                          SL_NAME_MAX - 1);
            continue;
        }
        kv = sl__ini_find(s, "type");
        if (kv == NULL) {
            sl__cfg_error(L->d, s->line, "missing mandatory parameter 'type' "
                          "in section '%s'", s->name);
            continue;
        }
        if (strcmp(kv->value, "include") == 0) {
            continue;   /* merged into the sections that @include it */
        }
        for (k = 0; k < K_N; k++) {
            if (strcmp(kv->value, kind_names[k]) == 0) {
                break;
            }
        }
        if (k == K_N) {
            unknown_type(L, s, kv);
            continue;
        }
        if (push_ptr(&L->by_kind[k], &L->nby_kind[k], (void *)s) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---- name lookups and list splitting ---- */

static struct sl_server *
find_server(struct sl_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nservers; i++) {
        if (strcmp(cfg->servers[i]->name, name) == 0) {
            return cfg->servers[i];
        }
    }
    return NULL;
}

static struct sl_service *
find_service(struct sl_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nservices; i++) {
        if (strcmp(cfg->services[i]->name, name) == 0) {
            return cfg->services[i];
        }
    }
    return NULL;
}

static struct sl_monitor *
find_monitor(struct sl_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        if (strcmp(cfg->monitors[i]->name, name) == 0) {
            return cfg->monitors[i];
        }
    }
    return NULL;
}

static struct sl_filter_def *
find_filter(struct sl_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nfilters; i++) {
        if (strcmp(cfg->filters[i]->name, name) == 0) {
            return cfg->filters[i];
        }
    }
    return NULL;
}

/* Calls fn for each trimmed non-empty item of a sep-separated list. */
static int
for_each_item(const char *list, char sep,
              int (*fn)(void *ctx, const char *item), void *ctx)
{
    char item[SL_NAME_MAX * 2];

    while (list && *list) {
        const char *e = strchr(list, sep);
        const char *b = list;
        const char *end = e ? e : list + strlen(list);
        size_t n;
        int rc;

        while (b < end && isspace((unsigned char)*b)) {
            b++;
        }
        while (end > b && isspace((unsigned char)end[-1])) {
            end--;
        }
        n = (size_t)(end - b);
        if (n > 0) {
            snprintf(item, sizeof(item), "%.*s", (int)n, b);
            rc = fn(ctx, item);
            if (rc < 0) {
                return rc;
            }
        }
        list = e ? e + 1 : NULL;
    }
    return 0;
}

struct server_ref_ctx {
    struct loader *L;
    const char *what;       /* "service 'x'" */
    const char *param;
    int line;
    struct sl_server ***arr;
    size_t *n;
    bool allow_services;
};

static int
add_server_ref(void *ctx, const char *name)
{
    struct server_ref_ctx *c = ctx;
    struct sl_server *srv = find_server(c->L->cfg, name);

    if (srv == NULL) {
        if (c->allow_services && find_service(c->L->cfg, name)) {
            sl__cfg_error(c->L->d, c->line, "%s: service '%s' in '%s': "
                          "services as targets are not supported yet",
                          c->what, name, c->param);
        } else {
            sl__cfg_error(c->L->d, c->line, "parameter '%s' of %s refers to "
                          "unknown server '%s'", c->param, c->what, name);
        }
        return 0;
    }
    for (size_t i = 0; i < *c->n; i++) {
        if ((*c->arr)[i] == srv) {
            sl__cfg_error(c->L->d, c->line, "%s lists server '%s' twice",
                          c->what, name);
            return 0;
        }
    }
    return push_ptr(c->arr, c->n, srv);
}

static int
resolve_servers(struct loader *L, const struct sl_params *p,
                const char *param, const char *what, struct sl_server ***arr,
                size_t *n)
{
    struct server_ref_ctx c = {
        .L = L, .what = what, .param = param,
        .line = sl__params_line(p, param), .arr = arr, .n = n,
        .allow_services = strcmp(param, "targets") == 0,
    };

    return for_each_item(sl_params_get(p, param), ',', add_server_ref, &c);
}

/* ---- authenticator= (servers and listeners) ---- */

/*
 * MaxScale's authenticator module names. Sluice has the native
 * (mysql_native_password) authentication only: a listener or server naming
 * anything else is refused, since accepting it would silently change who
 * can log in.
 */
static void
check_authenticator(struct loader *L, const struct sl_params *p,
                    const char *what)
{
    static const char *const native[] = {
        "mariadbauth", "mysqlauth", "mariadbbackendauth",
        "mysqlbackendauth", "mariadb", "mysql_native_password",
    };
    const char *v = sl_params_get(p, "authenticator");
    char item[SL_NAME_MAX];
    int line = sl__params_line(p, "authenticator");

    while (v && *v) {
        const char *e = strchr(v, ',');
        size_t n = e ? (size_t)(e - v) : strlen(v);
        bool ok = false;

        while (n > 0 && isspace((unsigned char)*v)) {
            v++;
            n--;
        }
        while (n > 0 && isspace((unsigned char)v[n - 1])) {
            n--;
        }
        snprintf(item, sizeof(item), "%.*s", (int)n, v);
        for (size_t i = 0; i < SL_ARRAY_LEN(native); i++) {
            ok = ok || strcasecmp(item, native[i]) == 0;
        }
        if (!ok && n > 0) {
            sl__cfg_error(L->d, line, "parameter 'authenticator' in %s: "
                          "authenticator '%s' is not supported by Sluice "
                          "(only the native MariaDBAuth/MySQLAuth is); "
                          "accepting it would change who can log in",
                          what, item);
        }
        v = e ? e + 1 : NULL;
    }
}

/* ---- servers ---- */

static void
fill_server(struct loader *L, struct sl_server *srv,
            const struct sl_ini_section *s, const char *what)
{
    struct sl_params *p = srv->params;
    const char *proto = sl_params_get(p, "protocol");
    int64_t port = sl_params_int(p, "port");
    int64_t weight = sl_params_int(p, "weight");
    bool has_addr = sl_params_has(p, "address");
    bool has_sock = sl_params_has(p, "socket");

    if (strcasecmp(proto, "mariadbbackend") != 0 &&
        strcasecmp(proto, "mysqlbackend") != 0) {
        sl__cfg_error(L->d, sl__params_line(p, "protocol"), "invalid value "
                      "'%s' for parameter 'protocol' in %s (expected "
                      "MariaDBBackend or MySQLBackend)", proto, what);
    }
    if (!has_addr && !has_sock) {
        sl__cfg_error(L->d, s->line, "missing mandatory parameter 'address' "
                      "(or 'socket') in %s", what);
    } else if (has_addr && has_sock) {
        sl__cfg_error(L->d, sl__params_line(p, "socket"), "%s has both "
                      "'address' and 'socket'; use one", what);
    }
    if (port < 1 || port > 65535) {
        sl__cfg_error(L->d, sl__params_line(p, "port"), "invalid value "
                      "'%s' for parameter 'port' in %s (expected a port "
                      "1-65535)", sl_params_get(p, "port"), what);
    }
    if (weight < 0 || weight > 1000000) {
        sl__cfg_error(L->d, sl__params_line(p, "weight"), "invalid value "
                      "'%s' for parameter 'weight' in %s (expected 0 to "
                      "1000000)", sl_params_get(p, "weight"), what);
    }
    srv->port = (int)port;
    srv->weight = (int)weight;
    srv->proxy_protocol = sl_params_bool(p, "proxy_protocol");
    if (has_addr) {
        copy_checked(L, srv->address, sizeof(srv->address),
                     sl_params_get(p, "address"), "address", what,
                     sl__params_line(p, "address"));
    }
    if (has_sock) {
        copy_checked(L, srv->socket, sizeof(srv->socket),
                     sl_params_get(p, "socket"), "socket", what,
                     sl__params_line(p, "socket"));
    }
    sl__tls_configure(L->d, p, false, what, &srv->tls);
    check_authenticator(L, p, what);
}

static int
load_server(struct loader *L, const struct sl_ini_section *s)
{
    /* aligned: struct sl_server keeps its hot counters on their own
     * cache line */
    struct sl_server *srv = aligned_alloc(_Alignof(struct sl_server),
                                          sizeof(*srv));
    char what[SL_NAME_MAX + 16];

    if (srv == NULL || push_ptr(&L->cfg->servers, &L->cfg->nservers,
                                srv) < 0) {
        free(srv);
        return -ENOMEM;
    }
    memset(srv, 0, sizeof(*srv));
    snprintf(srv->name, sizeof(srv->name), "%s", s->name);
    atomic_init(&srv->lag, SL_SERVER_LAG_UNKNOWN);
    snprintf(what, sizeof(what), "server '%s'", s->name);
    srv->params = section_params(L, s, what, false);
    if (srv->params == NULL) {
        return -ENOMEM;
    }
    if (validate(L, srv->params, K_SERVER, NULL, false, what, s->line) == 0) {
        fill_server(L, srv, s, what);
    }
    return 0;
}

/* ---- filters ---- */

struct filter_server_ctx {
    struct loader *L;
    const char *what;
    const char *param;
    int line;
};

/* A server named by a filter: must exist; "->master" & co are routing
 * targets the filter understands (namedserverfilter). */
static int
check_filter_server(void *ctx, const char *name)
{
    struct filter_server_ctx *c = ctx;

    if (strncmp(name, "->", 2) != 0 && find_server(c->L->cfg, name) == NULL) {
        sl__cfg_error(c->L->d, c->line, "parameter '%s' of %s refers to "
                      "unknown server '%s'", c->param, c->what, name);
    }
    return 0;
}

/* Filters' SL_PARAM_SERVERS parameters (servers are loaded first). */
static void
check_filter_servers(struct loader *L, struct sl_filter_def *f,
                     const char *what)
{
    const struct sl_param_spec *spec;

    if (f->module == NULL || f->module->info->params == NULL) {
        return;
    }
    for (spec = f->module->info->params; spec->name != NULL; spec++) {
        struct filter_server_ctx c = {L, what, spec->name,
                                      sl__params_line(f->params, spec->name)};

        if (spec->type == SL_PARAM_SERVERS &&
            sl_params_get(f->params, spec->name) != NULL) {
            for_each_item(sl_params_get(f->params, spec->name), ',',
                          check_filter_server, &c);
        }
    }
}

static int
load_filter(struct loader *L, const struct sl_ini_section *s)
{
    struct sl_filter_def *f = calloc(1, sizeof(*f));
    char what[SL_NAME_MAX + 16];

    if (f == NULL || push_ptr(&L->cfg->filters, &L->cfg->nfilters, f) < 0) {
        free(f);
        return -ENOMEM;
    }
    snprintf(f->name, sizeof(f->name), "%s", s->name);
    snprintf(what, sizeof(what), "filter '%s'", s->name);
    f->params = section_params(L, s, what, false);
    if (f->params == NULL) {
        return -ENOMEM;
    }
    if (sl__ini_find(s, "module")) {
        f->module = load_module(L, s, "module", SL_MODULE_FILTER, what);
        f->ops = f->module ? f->module->info->ops : NULL;
    }
    validate(L, f->params, K_FILTER, f->module, f->module == NULL, what,
             s->line);
    check_filter_servers(L, f, what);
    return 0;
}

/* ---- services ---- */

struct filter_ref_ctx {
    struct loader *L;
    struct sl_service *svc;
    int line;
};

static int
add_filter_ref(void *ctx, const char *name)
{
    struct filter_ref_ctx *c = ctx;
    struct sl_filter_def *f = find_filter(c->L->cfg, name);

    if (f == NULL) {
        sl__cfg_error(c->L->d, c->line, "parameter 'filters' of service "
                      "'%s' refers to unknown filter '%s'", c->svc->name,
                      name);
        return 0;
    }
    return push_ptr(&c->svc->filters, &c->svc->nfilters, f);
}

static int
fill_service(struct loader *L, struct sl_service *svc, const char *what)
{
    struct sl_params *p = svc->params;
    struct filter_ref_ctx fc = {L, svc, sl__params_line(p, "filters")};
    int rc = 0;

    if (sl_params_has(p, "cluster") &&
        (sl_params_has(p, "servers") || sl_params_has(p, "targets"))) {
        sl__cfg_error(L->d, sl__params_line(p, "cluster"), "%s has both "
                      "'cluster' and '%s'; use one", what,
                      sl_params_has(p, "servers") ? "servers" : "targets");
    } else if (sl_params_has(p, "cluster")) {
        /* resolved once the monitors are loaded (resolve_clusters) */
    } else if (sl_params_has(p, "servers") && sl_params_has(p, "targets")) {
        sl__cfg_error(L->d, sl__params_line(p, "targets"), "%s has both "
                      "'servers' and 'targets'; use one", what);
    } else if (sl_params_has(p, "servers")) {
        rc = resolve_servers(L, p, "servers", what, &svc->servers,
                             &svc->nservers);
    } else if (sl_params_has(p, "targets")) {
        rc = resolve_servers(L, p, "targets", what, &svc->servers,
                             &svc->nservers);
    }
    if (rc == 0) {
        rc = for_each_item(sl_params_get(p, "filters"), '|', add_filter_ref,
                           &fc);
    }
    copy_checked(L, svc->user, sizeof(svc->user), sl_params_get(p, "user"),
                 "user", what, sl__params_line(p, "user"));
    copy_checked(L, svc->password, sizeof(svc->password),
                 sl_params_get(p, "password"), "password", what,
                 sl__params_line(p, "password"));
    svc->max_connections = (int64_t)sl_params_count(p, "max_connections");
    svc->connection_timeout_ms = sl_params_duration_ms(p,
                                                       "connection_timeout");
    svc->net_write_timeout_ms = sl_params_duration_ms(p, "net_write_timeout");
    svc->keepalive_ms = sl_params_duration_ms(p, "connection_keepalive");
    svc->auth_timeout_ms = sl_params_duration_ms(p, "auth_timeout");
    svc->max_pending_logins_per_host =
        (unsigned)sl_params_count(p, "max_pending_logins_per_host");
    return rc;
}

static int
load_service(struct loader *L, const struct sl_ini_section *s)
{
    struct sl_service *svc = calloc(1, sizeof(*svc));
    char what[SL_NAME_MAX + 16];

    if (svc == NULL || push_ptr(&L->cfg->services, &L->cfg->nservices,
                                svc) < 0) {
        free(svc);
        return -ENOMEM;
    }
    snprintf(svc->name, sizeof(svc->name), "%s", s->name);
    snprintf(what, sizeof(what), "service '%s'", s->name);
    svc->params = section_params(L, s, what, false);
    if (svc->params == NULL) {
        return -ENOMEM;
    }
    if (sl__ini_find(s, "router")) {
        svc->router_module = load_module(L, s, "router", SL_MODULE_ROUTER,
                                         what);
        svc->router = svc->router_module ? svc->router_module->info->ops
                                         : NULL;
    }
    if (validate(L, svc->params, K_SERVICE, svc->router_module,
                 svc->router_module == NULL, what, s->line) != 0) {
        return 0;
    }
    return fill_service(L, svc, what);
}

/* ---- listeners ---- */

static void
fill_listener(struct loader *L, struct sl_listener *l,
              const struct sl_ini_section *s, const char *what)
{
    struct sl_params *p = l->params;
    const char *svc = sl_params_get(p, "service");
    bool has_port = sl_params_has(p, "port");
    bool has_sock = sl_params_has(p, "socket");

    l->fd = -1;
    l->service = find_service(L->cfg, svc);
    if (l->service == NULL) {
        sl__cfg_error(L->d, sl__params_line(p, "service"), "parameter "
                      "'service' of listener '%s' refers to unknown service "
                      "'%s'", l->name, svc);
    }
    if (!has_port && !has_sock) {
        sl__cfg_error(L->d, s->line, "missing mandatory parameter 'port' "
                      "(or 'socket') in %s", what);
    } else if (has_port && has_sock) {
        sl__cfg_error(L->d, sl__params_line(p, "socket"), "%s has both "
                      "'port' and 'socket'; use one", what);
    }
    if (has_port) {
        int64_t port = sl_params_int(p, "port");

        if (port < 1 || port > 65535) {
            sl__cfg_error(L->d, sl__params_line(p, "port"), "invalid value "
                          "'%s' for parameter 'port' in %s (expected a port "
                          "1-65535)", sl_params_get(p, "port"), what);
        }
        l->port = (int)port;
        copy_checked(L, l->address, sizeof(l->address),
                     sl_params_get(p, "address"), "address", what,
                     sl__params_line(p, "address"));
    }
    if (has_sock) {
        copy_checked(L, l->socket, sizeof(l->socket),
                     sl_params_get(p, "socket"), "socket", what,
                     sl__params_line(p, "socket"));
    }
    if (sl_params_has(p, "proxy_protocol_networks")) {
        char err[256];

        if (sl__pp_networks_parse(sl_params_get(p, "proxy_protocol_networks"),
                                  &l->pp_nets, &l->pp_nnets, err,
                                  sizeof(err)) != 0) {
            sl__cfg_error(L->d, sl__params_line(p, "proxy_protocol_networks"),
                          "invalid value for parameter "
                          "'proxy_protocol_networks' in %s: %s", what, err);
        }
    }
    sl__tls_configure(L->d, p, true, what, &l->tls);
    check_authenticator(L, p, what);
}

static int
load_listener(struct loader *L, const struct sl_ini_section *s)
{
    struct sl_listener *l = calloc(1, sizeof(*l));
    const struct sl_ini_kv *proto = sl__ini_find(s, "protocol");
    char what[SL_NAME_MAX + 16];
    char err[1024];

    if (l == NULL || push_ptr(&L->cfg->listeners, &L->cfg->nlisteners,
                              l) < 0) {
        free(l);
        return -ENOMEM;
    }
    l->fd = -1;
    snprintf(l->name, sizeof(l->name), "%s", s->name);
    snprintf(what, sizeof(what), "listener '%s'", s->name);
    l->params = section_params(L, s, what, false);
    if (l->params == NULL) {
        return -ENOMEM;
    }
    if (proto) {
        l->protocol_module = load_module(L, s, "protocol",
                                         SL_MODULE_PROTOCOL, what);
    } else {
        l->protocol_module = sl__module_load_err(
            module_dir(L), "mariadbprotocol", SL_MODULE_PROTOCOL, err,
            sizeof(err));
        if (l->protocol_module == NULL) {
            sl__cfg_error(L->d, s->line, "cannot load the default protocol "
                          "module for %s: %s", what, err);
        }
    }
    l->protocol = l->protocol_module ? l->protocol_module->info->ops : NULL;
    if (validate(L, l->params, K_LISTENER, l->protocol_module,
                 l->protocol_module == NULL, what, s->line) == 0) {
        fill_listener(L, l, s, what);
    }
    return 0;
}

/* ---- monitors ---- */

static int
load_monitor(struct loader *L, const struct sl_ini_section *s)
{
    struct sl_monitor *m = calloc(1, sizeof(*m));
    char what[SL_NAME_MAX + 16];
    struct sl_params *p;

    if (m == NULL || push_ptr(&L->cfg->monitors, &L->cfg->nmonitors, m) < 0) {
        free(m);
        return -ENOMEM;
    }
    snprintf(m->name, sizeof(m->name), "%s", s->name);
    snprintf(what, sizeof(what), "monitor '%s'", s->name);
    m->params = p = section_params(L, s, what, false);
    if (p == NULL) {
        return -ENOMEM;
    }
    if (sl__ini_find(s, "module")) {
        m->module = load_module(L, s, "module", SL_MODULE_MONITOR, what);
        m->ops = m->module ? m->module->info->ops : NULL;
    }
    if (validate(L, p, K_MONITOR, m->module, m->module == NULL, what,
                 s->line) != 0) {
        return 0;
    }
    copy_checked(L, m->user, sizeof(m->user),
                 sl_params_has(p, "user") ? sl_params_get(p, "user") : "",
                 "user", what, sl__params_line(p, "user"));
    copy_checked(L, m->password, sizeof(m->password),
                 sl_params_has(p, "password") ? sl_params_get(p, "password")
                                              : "",
                 "password", what, sl__params_line(p, "password"));
    m->interval_ms = sl_params_duration_ms(p, "monitor_interval");
    m->connect_timeout_ms = sl_params_duration_ms(p,
                                                  "backend_connect_timeout");
    m->read_timeout_ms = sl_params_duration_ms(p, "backend_read_timeout");
    if (m->interval_ms == 0) {
        sl__cfg_error(L->d, sl__params_line(p, "monitor_interval"),
                      "invalid value '0' for parameter 'monitor_interval' "
                      "in %s (expected a duration above zero)", what);
    }
    return resolve_servers(L, p, "servers", what, &m->servers, &m->nservers);
}

/* A server may be watched by one monitor only: two would fight over its
 * status bits. */
static void
check_monitored_once(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t a = 0; a < cfg->nmonitors; a++) {
        for (size_t i = 0; i < cfg->monitors[a]->nservers; i++) {
            struct sl_server *srv = cfg->monitors[a]->servers[i];

            for (size_t b = 0; b < a; b++) {
                for (size_t j = 0; j < cfg->monitors[b]->nservers; j++) {
                    if (cfg->monitors[b]->servers[j] != srv) {
                        continue;
                    }
                    sl__cfg_error(L->d, sl__params_line(
                                      cfg->monitors[a]->params, "servers"),
                                  "server '%s' is monitored by both monitor "
                                  "'%s' and monitor '%s'", srv->name,
                                  cfg->monitors[b]->name,
                                  cfg->monitors[a]->name);
                }
            }
        }
    }
}

/* cluster=MONITOR: a service's servers are a copy of the monitor's list
 * (services load before monitors, so this runs after them); runtime.c
 * follow_cluster keeps the copy in step. */
static void
resolve_clusters(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t i = 0; i < cfg->nservices; i++) {
        struct sl_service *svc = cfg->services[i];
        const struct sl_params *p = svc->params;
        const char *name = p ? sl_params_get(p, "cluster") : NULL;
        struct sl_monitor *m;

        if (name == NULL || svc->cluster != NULL || svc->servers != NULL) {
            continue;   /* not cluster=, done before, or servers= too */
        }
        if ((m = find_monitor(cfg, name)) == NULL) {
            sl__cfg_error(L->d, sl__params_line(p, "cluster"), "parameter "
                          "'cluster' of service '%s' refers to unknown "
                          "monitor '%s'", svc->name, name);
            continue;
        }
        svc->servers = calloc(m->nservers ? m->nservers : 1,
                              sizeof(*svc->servers));
        if (svc->servers == NULL) {
            sl__cfg_error(L->d, 0, "out of memory");
            continue;
        }
        if (m->nservers > 0) {
            memcpy(svc->servers, m->servers,
                   m->nservers * sizeof(*svc->servers));
        }
        svc->nservers = m->nservers;
        svc->cluster = m;
    }
}

/* config_sync_cluster names a monitor and comes with a user; the database
 * name is quoted in SQL with backticks (config_sync.c). */
static void
check_config_sync(struct loader *L)
{
    const struct sl_params *p = L->cfg->global.params;
    const char *cluster = p ? sl_params_get(p, "config_sync_cluster") : NULL;
    const char *user = p ? sl_params_get(p, "config_sync_user") : NULL;
    const char *db = p ? sl_params_get(p, "config_sync_db") : NULL;

    if (cluster == NULL || cluster[0] == '\0') {
        return;
    }
    if (find_monitor(L->cfg, cluster) == NULL) {
        sl__cfg_error(L->d, sl__params_line(p, "config_sync_cluster"),
                      "config_sync_cluster: no monitor named '%s'", cluster);
    }
    if (user == NULL || user[0] == '\0') {
        sl__cfg_error(L->d, sl__params_line(p, "config_sync_cluster"),
                      "config_sync_cluster needs config_sync_user");
    }
    for (size_t i = 0; i < 2; i++) {
        static const char *const names[] = {"config_sync_interval",
                                            "config_sync_timeout"};

        if (sl_params_duration_ms(p, names[i]) == 0) {
            sl__cfg_error(L->d, sl__params_line(p, names[i]),
                          "invalid value '%s' for parameter '%s' in section "
                          "'maxscale' (must be more than 0)",
                          sl_params_get(p, names[i]), names[i]);
        }
    }
    if (db == NULL || db[0] == '\0' || strchr(db, '`') != NULL ||
        strlen(db) > 64) {
        sl__cfg_error(L->d, sl__params_line(p, "config_sync_db"),
                      "invalid value '%s' for parameter 'config_sync_db' in "
                      "section 'maxscale' (a database name, at most 64 "
                      "characters, no backtick)", db ? db : "");
    }
}

static int
build(struct loader *L)
{
    static int (*const loaders[K_N])(struct loader *,
                                     const struct sl_ini_section *) = {
        [K_SERVER] = load_server, [K_FILTER] = load_filter,
        [K_SERVICE] = load_service, [K_LISTENER] = load_listener,
        [K_MONITOR] = load_monitor,
    };
    /* Dependency order: references always point at earlier kinds. */
    static const enum obj_kind order[K_N] = {
        K_SERVER, K_FILTER, K_SERVICE, K_LISTENER, K_MONITOR,
    };

    if (load_global(L) < 0 || classify(L) < 0) {
        return -ENOMEM;
    }
    for (size_t o = 0; o < K_N; o++) {
        enum obj_kind k = order[o];

        for (size_t i = 0; i < L->nby_kind[k]; i++) {
            if (loaders[k](L, L->by_kind[k][i]) < 0) {
                return -ENOMEM;
            }
        }
    }
    check_monitored_once(L);
    resolve_clusters(L);
    check_config_sync(L);
    return 0;
}

/* ---- module instances ---- */

static int
section_line(struct loader *L, const char *name)
{
    for (size_t i = 0; i < L->ini.nsections; i++) {
        if (strcmp(L->ini.sections[i].name, name) == 0) {
            return L->ini.sections[i].line;
        }
    }
    return 0;
}

static void
create_service_instances(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t i = 0; i < cfg->nservices; i++) {
        struct sl_service *svc = cfg->services[i];

        svc->router_instance = svc->router->create_instance(svc,
                                                            svc->params);
        if (svc->router_instance == NULL) {
            sl__cfg_error(L->d, section_line(L, svc->name), "router '%s' "
                          "refused to create an instance for service '%s'",
                          svc->router_module->info->name, svc->name);
        } else if ((svc->router_ref = sl__inst_ref_new(
                        svc->router_instance, svc->router, NULL)) == NULL) {
            sl__cfg_error(L->d, 0, "out of memory");
        }
    }
    for (size_t i = 0; i < cfg->nlisteners; i++) {
        struct sl_listener *l = cfg->listeners[i];
        struct sl_service *svc = l->service;

        if (svc->protocol) {
            if (svc->protocol != l->protocol) {
                sl__cfg_error(L->d, section_line(L, l->name), "listener "
                              "'%s' uses another protocol than the other "
                              "listeners of service '%s'", l->name,
                              svc->name);
            }
            continue;
        }
        svc->protocol = l->protocol;
        if (l->protocol->service_data_create == NULL) {
            continue;
        }
        svc->protocol_data = l->protocol->service_data_create(svc);
        if (svc->protocol_data == NULL) {
            svc->protocol = NULL;
            sl__cfg_error(L->d, section_line(L, l->name), "protocol '%s' "
                          "could not set up service '%s' for listener '%s'",
                          l->protocol_module->info->name, svc->name,
                          l->name);
        }
    }
}

static void
create_instances(struct loader *L)
{
    struct sl_config *cfg = L->cfg;

    for (size_t i = 0; i < cfg->nfilters; i++) {
        struct sl_filter_def *f = cfg->filters[i];

        f->instance = f->ops->create_instance(f->name, f->params);
        if (f->instance == NULL) {
            sl__cfg_error(L->d, section_line(L, f->name), "filter module "
                          "'%s' refused to create filter '%s'",
                          f->module->info->name, f->name);
        } else if ((f->ref = sl__inst_ref_new(f->instance, NULL,
                                              f->ops)) == NULL) {
            sl__cfg_error(L->d, 0, "out of memory");
        }
    }
    create_service_instances(L);
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        struct sl_monitor *m = cfg->monitors[i];

        m->instance = m->ops->create_instance(m, m->params);
        if (m->instance == NULL) {
            sl__cfg_error(L->d, section_line(L, m->name), "monitor module "
                          "'%s' refused to create monitor '%s'",
                          m->module->info->name, m->name);
        }
    }
}

/* ---- entry points ---- */

static void
free_instances(struct sl_config *cfg)
{
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        struct sl_monitor *m = cfg->monitors[i];

        if (m->instance && m->ops->destroy_instance) {
            m->ops->destroy_instance(m->instance);
        }
        m->instance = NULL;
    }
    for (size_t i = 0; i < cfg->nservices; i++) {
        struct sl_service *svc = cfg->services[i];

        if (svc->protocol_data && svc->protocol->service_data_free) {
            svc->protocol->service_data_free(svc->protocol_data);
        }
        svc->protocol_data = NULL;
        sl__inst_ref_free_current(svc->router_ref);
        svc->router_ref = NULL;
        if (svc->router_instance && svc->router->destroy_instance) {
            svc->router->destroy_instance(svc->router_instance);
        }
        svc->router_instance = NULL;
    }
    for (size_t i = 0; i < cfg->nfilters; i++) {
        struct sl_filter_def *f = cfg->filters[i];

        sl__inst_ref_free_current(f->ref);
        f->ref = NULL;
        if (f->instance && f->ops->destroy_instance) {
            f->ops->destroy_instance(f->instance);
        }
        f->instance = NULL;
    }
}

void
sl__config_free(struct sl_config *cfg)
{
    if (cfg == NULL) {
        return;
    }
    free_instances(cfg);
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        sl__params_free(cfg->monitors[i]->params);
        free(cfg->monitors[i]->servers);
        free(cfg->monitors[i]);
    }
    for (size_t i = 0; i < cfg->nlisteners; i++) {
        sl__tls_free(cfg->listeners[i]->tls);
        free(cfg->listeners[i]->pp_nets);
        sl__params_free(cfg->listeners[i]->params);
        free(cfg->listeners[i]);
    }
    for (size_t i = 0; i < cfg->nservices; i++) {
        sl__params_free(cfg->services[i]->params);
        sl__stats_obj_free(cfg->services[i]->stats);
        free(cfg->services[i]->servers);
        free(cfg->services[i]->filters);
        free(cfg->services[i]);
    }
    for (size_t i = 0; i < cfg->nfilters; i++) {
        sl__params_free(cfg->filters[i]->params);
        free(cfg->filters[i]);
    }
    for (size_t i = 0; i < cfg->nservers; i++) {
        sl__tls_free(cfg->servers[i]->tls);
        sl__params_free(cfg->servers[i]->params);
        sl__stats_obj_free(cfg->servers[i]->stats);
        free(cfg->servers[i]);
    }
    free(cfg->monitors);
    free(cfg->listeners);
    free(cfg->services);
    free(cfg->filters);
    free(cfg->servers);
    sl__params_free(cfg->global.params);
    free(cfg);
}

static const struct sl_config *loading_cfg;

struct sl_config *
sl__config_load_text(const char *text, size_t len, bool create_instances_,
                     struct sl_cfg_diag *d)
{
    struct loader L = {.d = d};
    int rc;

    L.cfg = calloc(1, sizeof(*L.cfg));
    if (L.cfg == NULL) {
        sl__cfg_error(d, 0, "out of memory");
        return NULL;
    }
    rc = sl__ini_parse(text, len, &L.ini, ini_error, d);
    if (rc >= 0) {
        sl__config_expand(&L.ini, d);   /* config_files.c */
    }
    if (rc < 0 || build(&L) < 0) {
        sl__cfg_error(d, 0, "out of memory");
    }
    if (d->errors == 0 && create_instances_) {
        loading_cfg = L.cfg;
        create_instances(&L);
        loading_cfg = NULL;
    }
    for (int k = 0; k < K_N; k++) {
        free(L.by_kind[k]);
    }
    sl__ini_free(&L.ini);
    if (d->errors > 0) {
        sl__config_free(L.cfg);
        return NULL;
    }
    return L.cfg;
}

static int
text_lines(const char *t, size_t len)
{
    int n = 0;

    for (size_t i = 0; i < len; i++) {
        n += t[i] == '\n';
    }
    return n;
}

struct sl_config *
sl__config_load_diag(const char *path, bool create_instances_,
                     struct sl_cfg_diag *d)
{
    struct sl_config *cfg;
    size_t len, before;
    char *text;

    d->file = path;
    text = sl__config_read_all(path, &len, d);   /* config_files.c */
    if (text == NULL) {
        return NULL;
    }
    before = len;
    text = sl__persist_merge(text, &len);   /* runtime.c */
    if (len > before) {
        /* lines past the files come from persistdir */
        if (d->nsrcs == 0) {
            sl__cfg_add_src(d, 1, path);
        }
        sl__cfg_add_src(d, text_lines(text, before) + 1 +
                        (before > 0 && text[before - 1] != '\n'),
                        "persistdir");
    }
    cfg = sl__config_load_text(text, len, create_instances_, d);
    free(text);
    return cfg;
}

struct sl_config *
sl__config_load(const char *path, bool create_instances_)
{
    struct sl_cfg_diag d = {0};
    struct sl_config *cfg = sl__config_load_diag(path, create_instances_, &d);

    sl__cfg_diag_free(&d);
    return cfg;
}

/* ---- objects added at run time (admin API) ---- */

struct counts {
    size_t n[K_N];
};

static void
take_counts(const struct sl_config *cfg, struct counts *c)
{
    c->n[K_SERVER] = cfg->nservers;
    c->n[K_SERVICE] = cfg->nservices;
    c->n[K_LISTENER] = cfg->nlisteners;
    c->n[K_MONITOR] = cfg->nmonitors;
    c->n[K_FILTER] = cfg->nfilters;
}

/* arr + n, or NULL for an array not allocated yet (NULL + 0 is undefined
 * behaviour in C; the REST fuzz target found it on an empty config). */
#define TAIL_OF(arr, n) ((arr) != NULL ? (arr) + (n) : NULL)

/* Free the objects past the counts in c (they were never published). */
static void
drop_new(struct sl_config *cfg, const struct counts *c)
{
    struct sl_config tail = {0};

    tail.servers = TAIL_OF(cfg->servers, c->n[K_SERVER]);
    tail.nservers = cfg->nservers - c->n[K_SERVER];
    tail.services = TAIL_OF(cfg->services, c->n[K_SERVICE]);
    tail.nservices = cfg->nservices - c->n[K_SERVICE];
    tail.listeners = TAIL_OF(cfg->listeners, c->n[K_LISTENER]);
    tail.nlisteners = cfg->nlisteners - c->n[K_LISTENER];
    tail.monitors = TAIL_OF(cfg->monitors, c->n[K_MONITOR]);
    tail.nmonitors = cfg->nmonitors - c->n[K_MONITOR];
    tail.filters = TAIL_OF(cfg->filters, c->n[K_FILTER]);
    tail.nfilters = cfg->nfilters - c->n[K_FILTER];
    free_instances(&tail);
    for (size_t i = 0; i < tail.nmonitors; i++) {
        sl__params_free(tail.monitors[i]->params);
        free(tail.monitors[i]->servers);
        free(tail.monitors[i]);
    }
    for (size_t i = 0; i < tail.nlisteners; i++) {
        free(tail.listeners[i]->pp_nets);
        sl__params_free(tail.listeners[i]->params);
        free(tail.listeners[i]);
    }
    for (size_t i = 0; i < tail.nservices; i++) {
        sl__params_free(tail.services[i]->params);
        free(tail.services[i]->servers);
        free(tail.services[i]->filters);
        free(tail.services[i]);
    }
    for (size_t i = 0; i < tail.nfilters; i++) {
        sl__params_free(tail.filters[i]->params);
        free(tail.filters[i]);
    }
    for (size_t i = 0; i < tail.nservers; i++) {
        sl__params_free(tail.servers[i]->params);
        free(tail.servers[i]);
    }
    cfg->nservers = c->n[K_SERVER];
    cfg->nservices = c->n[K_SERVICE];
    cfg->nlisteners = c->n[K_LISTENER];
    cfg->nmonitors = c->n[K_MONITOR];
    cfg->nfilters = c->n[K_FILTER];
}

static bool
name_taken(const struct sl_config *cfg, const char *name)
{
    struct sl_config *c = (struct sl_config *)cfg;

    for (size_t i = 0; i < c->nlisteners; i++) {
        if (strcmp(c->listeners[i]->name, name) == 0) {
            return true;
        }
    }
    for (size_t i = 0; i < c->nmonitors; i++) {
        if (strcmp(c->monitors[i]->name, name) == 0) {
            return true;
        }
    }
    return find_server(c, name) || find_service(c, name) ||
           find_filter(c, name);
}

/* Instances for the objects past the counts in c. */
static void
create_new_instances(struct loader *L, const struct counts *c)
{
    struct sl_config *cfg = L->cfg;
    struct sl_config tail = {.global = cfg->global};

    tail.filters = TAIL_OF(cfg->filters, c->n[K_FILTER]);
    tail.nfilters = cfg->nfilters - c->n[K_FILTER];
    tail.services = TAIL_OF(cfg->services, c->n[K_SERVICE]);
    tail.nservices = cfg->nservices - c->n[K_SERVICE];
    tail.listeners = TAIL_OF(cfg->listeners, c->n[K_LISTENER]);
    tail.nlisteners = cfg->nlisteners - c->n[K_LISTENER];
    tail.monitors = TAIL_OF(cfg->monitors, c->n[K_MONITOR]);
    tail.nmonitors = cfg->nmonitors - c->n[K_MONITOR];
    L->cfg = &tail;
    create_instances(L);
    L->cfg = cfg;
}

int
sl__config_add_text(struct sl_config *cfg, const char *text, size_t len,
                    struct sl_cfg_diag *d)
{
    struct loader L = {.d = d, .cfg = cfg};
    struct counts before;
    int rc;

    take_counts(cfg, &before);
    rc = sl__ini_parse(text, len, &L.ini, ini_error, d);
    for (size_t i = 0; rc == 0 && i < L.ini.nsections; i++) {
        const struct sl_ini_section *s = &L.ini.sections[i];

        if (strcasecmp(s->name, "maxscale") == 0 || name_taken(cfg, s->name)) {
            sl__cfg_error(d, s->line, "an object named '%s' already exists",
                          s->name);
        }
    }
    if (rc < 0 || d->errors > 0 || classify(&L) < 0) {
        goto out;
    }
    for (int k = 0; k < K_N; k++) {
        static const enum obj_kind order[K_N] = {
            K_SERVER, K_FILTER, K_SERVICE, K_LISTENER, K_MONITOR,
        };
        static int (*const loaders[K_N])(struct loader *,
                                         const struct sl_ini_section *) = {
            [K_SERVER] = load_server, [K_FILTER] = load_filter,
            [K_SERVICE] = load_service, [K_LISTENER] = load_listener,
            [K_MONITOR] = load_monitor,
        };

        for (size_t i = 0; i < L.nby_kind[order[k]]; i++) {
            if (loaders[order[k]](&L, L.by_kind[order[k]][i]) < 0) {
                sl__cfg_error(d, 0, "out of memory");
            }
        }
    }
    check_monitored_once(&L);
    resolve_clusters(&L);
    if (d->errors == 0) {
        create_new_instances(&L, &before);
    }
out:
    if (d->errors > 0) {
        drop_new(cfg, &before);
    }
    for (int k = 0; k < K_N; k++) {
        free(L.by_kind[k]);
    }
    sl__ini_free(&L.ini);
    return d->errors > 0 ? -EINVAL : 0;
}

/* The configuration whose instances are being created (main thread, during
 * sl__config_load_text): modules that read global parameters in their
 * create_instance or service_data_create see it before sl__config is
 * published. */
const struct sl_params *
sl_global_params(void)
{
    const struct sl_config *cfg = sl__config_current();

    if (cfg != NULL) {
        return cfg->global.params;
    }
    return loading_cfg != NULL ? loading_cfg->global.params : NULL;
}
