/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core's parameter tables: one per section type ([maxscale], server,
 * service, listener, monitor, filter), looked up by sl__config_core_specs.
 * The validator (params.c) checks every object's parameters against its
 * type's table and its module's, and the REST API lists and checks them.
 * docs/configuration.md's tables are generated from these rows by
 * scripts/config-doc-tables, and test_config_compat.py reads the IGN rows
 * from here: keep the P(...)/PE(...) row shape.
 *
 * Context: read-only data, any thread.
 */
#include <string.h>

#include "config_int.h"

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
static const char *const server_ranks[] = {"primary", "secondary", NULL};
static const char *const accounts_file_usages[] = {"add_when_load_ok",
                                                 "file_only_always", NULL};
static const char *const dump_modes[] = {"never", "on_close", "on_error",
                                         NULL};

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
    P("admin_ssl_ca", SL_PARAM_PATH, NULL, 0,
      "CA (PEM) for the REST API's HTTPS clients: a client certificate "
      "is asked for, and one not signed by this CA is refused (403); "
      "clients without one log in with their password"),
    P("admin_ssl_ca_cert", SL_PARAM_PATH, NULL, 0,
      "Old name of admin_ssl_ca"),
    P("admin_log_auth_failures", SL_PARAM_BOOL, "true", 0,
      "Log a warning for each failed REST API login"),
    P("admin_gui", SL_PARAM_BOOL, "true", 0,
      "Serve the web dashboard at / (false: 404)"),
    P("admin_secure_gui", SL_PARAM_BOOL, "false", 0,
      "Serve the dashboard only over HTTPS (admin_ssl_cert); MaxScale's "
      "default is true"),
    P("admin_pam_readwrite_service", SL_PARAM_STRING, NULL, REF,
      "PAM authentication of REST API users is not implemented"),
    P("admin_pam_readonly_service", SL_PARAM_STRING, NULL, REF,
      "PAM authentication of REST API users is not implemented"),
    P("admin_audit", SL_PARAM_BOOL, "false", 0,
      "Write a CSV row per REST API request to admin_audit_file "
      "(also at run time)"),
    P("admin_audit_file", SL_PARAM_PATH, NULL, 0,
      "The audit file (default LOGDIR/admin_audit.csv); at run time under "
      "logdir or admin_secure_paths"),
    P("admin_audit_exclude_methods", SL_PARAM_STRING, NULL, 0,
      "HTTP methods not audited (comma list, e.g. GET); failed logins are "
      "always audited"),
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
    P("admin_verify_url", SL_PARAM_STRING, NULL, REF,
      "external REST API authentication is not implemented"),
    P("admin_readwrite_hosts", SL_PARAM_STRING, "%", 0,
      "Client addresses that may use the whole REST API: addresses, "
      "address/prefix, localhost, % (any)"),
    P("admin_readonly_hosts", SL_PARAM_STRING, "%", 0,
      "Client addresses that may only read (GET) through the REST API; "
      "others are refused with 403"),
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
      "Source address (an IPv4 or IPv6 address, refused with file:line "
      "otherwise) of the TCP connections Sluice opens to servers: client "
      "sessions' backend connections, monitors, user-account loading, "
      "`config_sync`; not the short connections that carry a `KILL` to a "
      "server. Read at start only"),
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
    P("query_retries", SL_PARAM_COUNT, "1", 0,
      "Times an internal read-only query (monitor probe, user-account "
      "loading) cut by a network error is retried on a new connection"),
    P("query_retry_timeout", SL_PARAM_DURATION, "5s", SECS,
      "Time after the first failure within which such retries may start"),
    P("retain_last_statements", SL_PARAM_COUNT, "0", 0,
      "Statements each session keeps for the REST API's session resource "
      "(queries) and dump_last_statements, 0-10000 (0 = none)"),
    PE("dump_last_statements", SL_PARAM_ENUM, "never", 0, dump_modes,
       "Log a session's retained statements when it closes (on_close) or "
       "only when it closes because of an error (on_error)"),
    P("session_trace", SL_PARAM_COUNT, "0", 0,
      "Log lines (every level) each session keeps for the REST API's "
      "session resource (log), logged when it closes because of an "
      "error, 0-10000 (0 = none)"),
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
    P("connector_plugindir", SL_PARAM_PATH, NULL, 0,
      "Directory libmariadb loads client authentication plugins from "
      "(monitors, user-account loading, config_sync; default: "
      "libmariadb's own)"),
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
    P("persistpoolmax", SL_PARAM_COUNT, "0", 0,
      "Idle backend connections kept for reuse by later sessions: each "
      "worker thread keeps persistpoolmax / threads (rounded up); 0 = "
      "no pooling"),
    P("persistmaxtime", SL_PARAM_DURATION, "0s", SECS,
      "Longest time a connection stays in the pool; 0s = no limit"),
    PE("rank", SL_PARAM_ENUM, "primary", 0, server_ranks,
       "primary or secondary: readconnroute and readwritesplit use "
       "secondary servers only while no primary-rank server fits (see "
       "modules.md, Server ranks)"),
    P("priority", SL_PARAM_INT, "0", IGN,
      "used only by galeramon, which Sluice does not have"),
    P("monitoruser", SL_PARAM_STRING, NULL, 0,
      "The account the monitor uses for this server instead of its own "
      "user (with monitorpw)"),
    P("monitorpw", SL_PARAM_PASSWORD, NULL, 0,
      "The password of monitoruser (may be encrypted)"),
    P("extra_port", SL_PARAM_COUNT, "0", 0,
      "The server's extra_port: monitors and user account loading connect "
      "there first, and to port when it refuses (connection limit, not "
      "listening); 0 = not used"),
    P("proxy_protocol", SL_PARAM_BOOL, "false", 0,
      "Send a PROXY protocol (v1) header with the client's address on "
      "each client connection to this server"),
    P("compression", SL_PARAM_BOOL, "false", 0,
      "Compress the protocol (zlib) on connections to this server"),
    P("disk_space_threshold", SL_PARAM_STRING, NULL, 0,
      "path:percent,... (* = every other disk): how full each disk of "
      "this server may be; over it the server is Disk Space Exhausted. "
      "Overrides the monitor's; checked by mariadbmon every "
      "disk_space_check_interval"),
    P("max_routing_connections", SL_PARAM_COUNT, "0", 0,
      "Most connections sessions may have to this server at once, pooled "
      "ones included, across all threads; a connection beyond it is "
      "refused (the statement or session that needed it gets an error); "
      "0 = no limit"),
    P("replication_custom_options", SL_PARAM_STRING, NULL, 0,
      "More CHANGE MASTER TO options (MASTER_X=value, ...) mariadbmon "
      "uses when it makes this server a replica"),
    P("private_address", SL_PARAM_STRING, NULL, 0,
      "The address replicas use to reach this server (mariadbmon's "
      "CHANGE MASTER TO MASTER_HOST), when not address"),
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
    P("retain_last_statements", SL_PARAM_INT, "-1", 0,
      "Statements each session of the service keeps (as the global "
      "parameter, 0-10000), -1 = the global value"),
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
      "idle sessions' backend connections are not moved to the pool "
      "(session multiplexing); persistpoolmax pools closed sessions' "
      "connections"),
    P("multiplex_timeout", SL_PARAM_DURATION, NULL, REF | SECS,
      "session multiplexing (idle_session_pool_time) is not "
      "implemented"),
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
    P("user_accounts_file", SL_PARAM_PATH, NULL, 0,
      "MaxScale's JSON file of extra accounts (user, db, roles_mapping "
      "arrays; docs/authentication.md), re-read at every load of the "
      "accounts; a bad file refuses the service"),
    PE("user_accounts_file_usage", SL_PARAM_ENUM, "add_when_load_ok", 0,
       accounts_file_usages,
       "add_when_load_ok: the file's accounts are added to those loaded "
       "from the servers (a server's account wins), only when that load "
       "succeeds; file_only_always: only the file, the servers are never "
       "asked for accounts"),
    P("rank", SL_PARAM_STRING, "primary", REF,
      "a service's rank orders services used as targets of another "
      "service, which Sluice refuses (server ranks are supported)"),
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
      "MariaDBAuth/MySQLAuth (native), ed25519auth (client_ed25519) and "
      "PAMAuth (pam accounts), comma-separated (GSSAPIAuth is refused)"),
    P("authenticator_options", SL_PARAM_STRING, NULL, 0,
      "ed25519auth's ed_mode=ed25519 (client_ed25519, the default) or "
      "ed_mode=sha256 (the password over TLS or RSA-encrypted, "
      "caching_sha2_password); "
      "PAMAuth's pam_use_cleartext_plugin, pam_allow_plain_cleartext, "
      "pam_mode=password|password_2FA (password and code), "
      "pam_backend_map (or pam_backend_mapping)=none|mariadb, "
      "pam_mapped_pw_file; "
      "other options are refused"),
    P("sql_mode", SL_PARAM_STRING, "default", REF,
      "only the default SQL mode is parsed (sql_mode=oracle is not)"),
    P("connection_init_sql_file", SL_PARAM_PATH, NULL, 0,
      "Text file, one SQL statement a line (blank lines ignored), run on "
      "every backend connection of the listener's sessions after the "
      "login; a failing statement fails that connection. Read when the "
      "listener is created"),
    P("user_mapping_file", SL_PARAM_PATH, NULL, 0,
      "MaxScale's JSON mapping of client users to backend accounts "
      "(user_map, server_credentials)"),
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
      "only mariadbmon checks disk space (see its table)"),
    P("disk_space_check_interval", SL_PARAM_DURATION, "0s", REF,
      "only mariadbmon checks disk space (see its table)"),
    P("script", SL_PARAM_STRING, NULL, REF,
      "only mariadbmon runs monitor scripts (see its table)"),
    P("script_timeout", SL_PARAM_DURATION, "90s", IGN | SECS,
      "only mariadbmon runs monitor scripts (see its table)"),
    P("events", SL_PARAM_STRING, NULL, IGN,
      "only mariadbmon runs monitor scripts (see its table)"),
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
