/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Core-internal contract between the runtime (workers, DCBs, sessions) and
 * the configuration side (ini, params, module loader, objects, main). Not
 * installed; modules never include it.
 *
 * Ownership: the objects below are built by the main thread while loading
 * the configuration, or by the admin thread at run time (runtime.c), and
 * are shared by the configuration generations that list them (see
 * generation.c). Fields changed at run time are published with release
 * stores (router and filter instances through struct sl_inst_ref, freed
 * when their last session ends); the rest is immutable. A destroyed
 * object leaves the current generation at once and is freed, through the
 * workers' epochs, when the last holder lets go (sl__obj_ref below).
 */
#ifndef SLUICE_CORE_INTERNAL_H
#define SLUICE_CORE_INTERNAL_H

/* libsluice exports every non-static symbol (default visibility); the
 * sl__ prefix marks what modules must not use. */

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sluice/ccdefs.h>
#include <sluice/filter.h>
#include <sluice/module.h>
#include <sluice/monitor.h>
#include <sluice/params.h>
#include <sluice/protocol.h>
#include <sluice/router.h>
#include <sluice/service.h>
#include <sluice/splice.h>

#define SL_NAME_MAX 128

enum sl_event_model {
    SL_EVENT_MODEL_PINNED,
    SL_EVENT_MODEL_SHARED,
};

/* [maxscale] section, after validation. */
struct sl_global {
    int threads;                      /* resolved: never "auto" here */
    enum sl_event_model event_model;
    char module_dir[4096];
    char logdir[4096];
    char log_file[4096];              /* "" = stdout */
    char datadir[4096];
    char piddir[4096];
    char persistdir[4096];
    int log_level;                    /* enum sl_log_level */
    uint64_t writeq_high_water;       /* bytes, 0 = off */
    uint64_t writeq_low_water;
    char admin_host[256];
    int admin_port;
    bool admin_enabled;
    /* log_throttling (count 0: off) */
    unsigned log_throttle_count;
    uint64_t log_throttle_window_ms;
    uint64_t log_throttle_suppress_ms;
    /* session diagnostics (history.c) */
    uint32_t retain_last_statements;
    uint32_t session_trace;
    int dump_last_statements;         /* enum sl_dump_statements */
    struct sl_params *params;         /* the whole validated section */
};

/*
 * local_address ([maxscale]): the source address of every connection
 * Sluice opens to a server (backend connections, monitors, config sync).
 * Set once by main before any worker or monitor thread starts and never
 * changed (it cannot be altered at run time), so any thread reads it
 * without a lock. "" or NULL: the kernel chooses.
 */
int sl__local_address_set(const char *addr);
/* The address as text, or NULL when unset. Any thread. */
const char *sl__local_address(void);
/* connector_plugindir: MYSQL_PLUGIN_DIR of every libmariadb connection
 * (monitor_conn.c); set as the [maxscale] section loads, any thread reads */
void sl__connector_plugindir_set(const char *dir);
/* Bind fd (a TCP socket about to connect to family fam) to local_address
 * with the port left to connect(); 0 when unset or bound, -1 with errno.
 * Any thread. */
int sl__local_address_bind(int fd, int fam);

struct sl_loaded_module {
    const struct sl_module *info;
    void *handle;                     /* dlopen handle */
    char path[4096];
};

struct sl_server {
    char name[SL_NAME_MAX];
    char address[256];
    int port;
    char socket[108];                 /* "" = TCP */
    int weight;
    /* rank (enum sl_server_rank: 0 primary, 1 secondary) and
     * max_routing_connections (0 = no limit): loaded from the
     * configuration, changed live by PATCH /v1/servers/NAME (runtime.c),
     * read by routers and sl__dcb_connect_backend with relaxed loads. */
    int rank;
    int64_t max_routing_conns;
    bool proxy_protocol;              /* send a PROXY v1 header (dcb.c) */
    struct sl_params *params;
    atomic_uint status;               /* enum sl_server_status bits */
    atomic_llong lag;                 /* seconds, SL_SERVER_LAG_UNKNOWN */
    atomic_ullong version;
    atomic_llong server_id;
    char version_string[256];         /* written by the monitor only */
    atomic_llong connections;         /* current backend connections */
    atomic_ullong total_connections;
    atomic_ullong routing_conns_refused;   /* max_routing_connections hit */
    /* Counted on every routed command by every worker: a line of their
     * own, so routers reading status, lag and connections do not miss. */
    _Alignas(64) atomic_ullong routed_reads;
    atomic_ullong routed_writes;
    _Alignas(64) struct sl_tls *tls;  /* backend TLS, NULL = plain */
    atomic_flag gtid_lock;            /* guards gtid_pos (clear = free) */
    char gtid_pos[256];               /* gtid_current_pos, monitor's view */
    struct sl_obj_slots *stats;       /* stats.c: per-worker histograms */
    atomic_long refs;                 /* sl__obj_ref (generation.c) */
    /* Backend connection pool (pool.c): the parameters as loaded, and
     * counters over every worker's pool (REST statistics, /metrics). */
    int64_t persistpoolmax;           /* 0 = no pooling */
    uint64_t persistmaxtime_ms;       /* 0 = no age limit */
    _Alignas(64) atomic_llong pool_size;    /* persistent_connections */
    atomic_llong pool_max;            /* max_pool_size: the most at once */
    atomic_ullong pool_reused;        /* reused_connections */
    atomic_ullong pool_empty;         /* connection_pool_empty */
    atomic_ullong pool_expired;       /* closed at persistmaxtime */
    atomic_ullong pool_lost;          /* closed by the server, or its
                                       * status, or a failed reset */
};

struct sl_inst_ref;   /* generation.c */

struct sl_filter_def {
    char name[SL_NAME_MAX];
    const struct sl_loaded_module *module;
    const struct sl_filter_ops *ops;
    struct sl_params *params;
    void *instance;
    struct sl_inst_ref *ref;          /* instance for new sessions */
    atomic_long refs;                 /* sl__obj_ref (generation.c) */
};

struct sl_service {
    char name[SL_NAME_MAX];
    const struct sl_loaded_module *router_module;
    const struct sl_router_ops *router;
    void *router_instance;
    struct sl_inst_ref *router_ref;   /* router_instance for new sessions */
    struct sl_params *params;         /* core service params + router's */
    struct sl_server **servers;
    size_t nservers;
    struct sl_monitor *cluster;       /* cluster=: servers follow its list
                                       * (runtime.c follow_cluster) */
    struct sl_filter_def **filters;   /* in chain order */
    size_t nfilters;
    char user[256];
    char password[256];
    int64_t max_connections;          /* 0 = unlimited */
    const struct sl_protocol_ops *protocol;   /* of its first listener */
    void *protocol_data;              /* protocol's service_data_create */
    atomic_llong sessions;
    atomic_ullong total_sessions;
    atomic_llong peak_sessions;       /* most at once (max_connections in
                                       * MaxScale's statistics) */
    time_t created_at;                /* wall clock, REST `started` */
    uint64_t connection_timeout_ms;   /* idle client sessions, 0 = never */
    uint64_t net_write_timeout_ms;    /* stalled client writes, 0 = never */
    uint64_t keepalive_ms;            /* connection_keepalive, 0 = off */
    uint64_t auth_timeout_ms;         /* accept to login, 0 = never */
    unsigned max_pending_logins_per_host;   /* 0 = no cap */
    int64_t retain_last_statements;   /* -1: the global one */
    atomic_llong pending_logins;      /* clients not logged in yet */
    struct sl_obj_slots *stats;       /* stats.c: per-worker histograms */
    /* sl_service_auth_failed, by enum sl_auth_failure (logins only). */
    atomic_ullong auth_failures[SL_AUTH_FAIL_COUNT];
    atomic_long refs;                 /* sl__obj_ref (generation.c) */
    bool links_held;                  /* holds its servers and filters */
};

struct sl_listener {
    char name[SL_NAME_MAX];
    struct sl_service *service;
    const struct sl_loaded_module *protocol_module;
    const struct sl_protocol_ops *protocol;
    struct sl_params *params;
    char address[256];                /* "" with a socket */
    int port;
    char socket[108];                 /* "" = TCP */
    int fd;                           /* listening socket, -1 until started */
    atomic_ullong connections_total;
    atomic_llong connections;
    struct sl_tls *tls;               /* NULL = plain (tls.c) */
    /* proxy_protocol_networks (proxyproto.c): clients that may send a
     * PROXY header; none = no client may */
    struct sl_pp_net *pp_nets;
    size_t pp_nnets;
    /* connection_init_sql_file (init_sql.c): its statements, read when
     * the listener was loaded; sent on every backend connection of its
     * sessions after the login. */
    char **init_sql;
    size_t ninit_sql;
    atomic_long refs;                 /* sl__obj_ref (generation.c) */
    bool links_held;                  /* holds its service */
};

struct sl_monitor {
    char name[SL_NAME_MAX];
    const struct sl_loaded_module *module;
    const struct sl_monitor_ops *ops;
    struct sl_params *params;
    struct sl_server **servers;
    size_t nservers;
    char user[256];
    char password[256];
    uint64_t interval_ms;
    uint64_t connect_timeout_ms;
    uint64_t read_timeout_ms;
    void *instance;
    pthread_t thread;
    atomic_bool stop;
    atomic_ullong ticks;
    /* sl_monitor_count_op / _error (monitor thread or admin commands). */
    atomic_ullong ops_ok[SL_MONITOR_OP_COUNT];
    atomic_ullong ops_failed[SL_MONITOR_OP_COUNT];
    atomic_ullong errors;
    bool running;                     /* has a thread (monitor.c) */
    atomic_long refs;                 /* sl__obj_ref (generation.c) */
};

/* Everything loaded from the configuration. */
struct sl_config {
    struct sl_global global;
    struct sl_server **servers;
    size_t nservers;
    struct sl_service **services;
    size_t nservices;
    struct sl_listener **listeners;
    size_t nlisteners;
    struct sl_monitor **monitors;
    size_t nmonitors;
    struct sl_filter_def **filters;
    size_t nfilters;
};

/*
 * Finding an object by name in a generation: sl__find_server(cfg, name)
 * and its siblings return the object called name, or NULL (also when cfg
 * is NULL). One loop for every object array, generated per type so the
 * callers keep their types; every object struct starts with its name.
 * Any thread, on a generation it holds (sl__config_current() inside a
 * worker's turn, or the admin thread's own).
 */
#define SL__DEFINE_FIND(fn, type, arr, n)                                   \
    static inline type *fn(const struct sl_config *cfg, const char *name)   \
    {                                                                       \
        for (size_t i = 0; cfg != NULL && i < cfg->n; i++) {                \
            if (strcmp(cfg->arr[i]->name, name) == 0) {                     \
                return cfg->arr[i];                                         \
            }                                                               \
        }                                                                   \
        return NULL;                                                        \
    }
SL__DEFINE_FIND(sl__find_server, struct sl_server, servers, nservers)
SL__DEFINE_FIND(sl__find_service, struct sl_service, services, nservices)
SL__DEFINE_FIND(sl__find_listener, struct sl_listener, listeners, nlisteners)
SL__DEFINE_FIND(sl__find_monitor, struct sl_monitor, monitors, nmonitors)
SL__DEFINE_FIND(sl__find_filter, struct sl_filter_def, filters, nfilters)
#undef SL__DEFINE_FIND

/* The newest configuration generation: set by main before the workers
 * start, replaced at run time only through sl__config_publish (admin
 * thread, or the config sync thread holding sl__csync_lock), which read
 * it as it is. Inside a batch (sl__config_batch_begin) it runs ahead of
 * what the other threads see; they read sl__config_current(). */
extern struct sl_config *sl__config;
/* The published generation, what sl__config_current() returns. */
extern struct sl_config *sl__config_live;
/* Generations published since start (the first one is 1): GET
 * /v1/maxscale config_generation. */
extern atomic_ullong sl__config_generations;

/* ---- generations and instance references (generation.c) ---- */

/* The current generation (acquire). Any thread; a worker may use it until
 * the end of its turn. */
static inline struct sl_config *
sl__config_current(void)
{
    return __atomic_load_n(&sl__config_live, __ATOMIC_ACQUIRE);
}
/* main, once, before any other thread: gen is the first generation (both
 * views), or NULL at exit. */
void sl__config_set_initial(struct sl_config *gen);
/* sl_global_params stops reading the configuration being loaded (the
 * initial one was published, or start-up failed). */
void sl__config_loading_done(void);
/*
 * A batch: the generations the writer makes between begin and end are
 * seen only by the writer (sl__config); at end the newest is published
 * once (if anything changed), and the objects destroyed in the batch
 * lose the configuration's reference only then (they stay valid while
 * the old generation is what the workers see). Used to apply a list of
 * changes received from another instance as one generation. The thread
 * that makes the changes, holding sl__csync_lock.
 */
void sl__config_batch_begin(void);
void sl__config_batch_end(void);
/* A copy of the current generation with arrays of its own, to change and
 * then publish or discard. NULL when out of memory. Admin thread. */
struct sl_config *sl__config_next(void);
/* Make gen current (one release store); the old generation's arrays are
 * freed once no worker can walk them. Admin thread. */
void sl__config_publish(struct sl_config *gen);
/* Free an unpublished generation's arrays (not its objects). */
void sl__config_discard(struct sl_config *gen);

/* A router or filter instance shared by its object and the sessions made
 * over it. New: one reference (the object's); NULL when out of memory. */
struct sl_inst_ref *sl__inst_ref_new(void *instance,
                                     const struct sl_router_ops *router,
                                     const struct sl_filter_ops *filter);
void *sl__inst_ref_instance(const struct sl_inst_ref *r);
/* Take a reference to the instance published in *slot (acquire). Worker,
 * inside its turn (that is what makes the load safe). */
struct sl_inst_ref *sl__inst_ref_get(struct sl_inst_ref *const *slot);
/* Drop a reference; the last one destroys the instance after an epoch.
 * Any thread. */
void sl__inst_ref_put(struct sl_inst_ref *r);
/* The object `owner` (its service or filter) has published a
 * replacement: r will also free params and array (the set and server
 * array it was made over, either may be NULL; narray: the array's count,
 * whose servers lose a reference then), holds owner until the instance is
 * destroyed, and loses the object's reference after an epoch. Admin
 * thread. */
void sl__inst_ref_retire(struct sl_inst_ref *r, void *owner,
                         struct sl_params *params, struct sl_server **array,
                         size_t narray);
/* At exit (no sessions): free the ref of an object's current instance;
 * the instance itself is destroyed by the caller. */
void sl__inst_ref_free_current(struct sl_inst_ref *r);
/* Instances made through a ref and not destroyed yet (tests). */
long sl__inst_live(void);

/*
 * Object references. Servers, services, listeners, filters and monitors
 * are freed when nobody holds them. `refs` counts the holders beyond the
 * configuration's own reference, so a zeroed object (as the loader makes
 * it) has exactly that one. Holders that keep a pointer beyond a worker's
 * turn take a reference where they are made inside a turn (or on the
 * admin thread, the only writer): a session its service, a filter
 * session its filter, a backend and a backend DCB their server, client
 * and listener DCBs their listener and service, a service the servers of
 * each array it publishes and its filters, a listener its service. A
 * destroyed object (admin thread) leaves the published generation, then
 * loses the configuration's reference after an epoch (a worker that
 * loaded it from the old generation has taken its own by then); whoever
 * drops the last reference frees it, again after an epoch. At exit,
 * sl__config_free frees what is still published directly.
 */
enum sl_obj_kind {
    SL_OBJ_SERVER,
    SL_OBJ_SERVICE,
    SL_OBJ_LISTENER,
    SL_OBJ_FILTER,
    SL_OBJ_MONITOR,
};
/* Take a reference (relaxed increment; obj must be held or reachable in
 * the current turn). Any thread. */
void sl__obj_ref(enum sl_obj_kind kind, void *obj);
/* Drop one; NULL is ignored. Any thread. */
void sl__obj_unref(enum sl_obj_kind kind, void *obj);
/* obj was destroyed and left the published generation: drop the
 * configuration's reference after an epoch. Admin thread. */
void sl__obj_destroyed(enum sl_obj_kind kind, void *obj);
/* Destroyed objects not freed yet (still held, or waiting for an epoch):
 * the REST API's /v1/maxscale destroyed_objects. */
long sl__obj_destroyed_live(void);
/* A service takes (true) or drops (false) its references on the servers
 * of its current array and on its filters; a listener on its service. At
 * most once each way (links_held). Main or admin thread. */
void sl__service_hold_links(struct sl_service *svc, bool hold);
void sl__listener_hold_links(struct sl_listener *l, bool hold);
/* Drop one reference on each of the first n servers of arr (the distinct
 * servers of a published array; the rest repeats them). */
void sl__servers_unref(struct sl_server *const *arr, size_t n);
/* Free an object's memory (and its module instance): at exit for what is
 * still published, or when the last reference goes. Links are dropped. */
void sl__server_free(struct sl_server *srv);
void sl__service_free(struct sl_service *svc);
void sl__listener_free(struct sl_listener *l);
void sl__filter_free(struct sl_filter_def *f);
void sl__monitor_free(struct sl_monitor *m);
/* Every object of cfg (not its arrays), in an order where nothing is
 * freed before what may still use it. */
void sl__config_free_objects(struct sl_config *cfg);

/* ---- runtime side (worker.c, dcb.c, session.c, log.c) ---- */

/* Create n workers with the model; threads are not started yet. 0/-errno */
int sl__workers_init(int n, enum sl_event_model model);
/* Start the worker threads. 0 or -errno. Main only. */
int sl__workers_start(void);
/* Ask all workers to stop (close listeners, finish, exit loops) and join
 * them. Main only. */
void sl__workers_stop(void);
void sl__workers_finish(void);
/* Open the listening socket and register it with the workers (pinned: in
 * every worker's epoll with EPOLLEXCLUSIVE; shared: once). 0 or -errno,
 * logged with the listener's name and address. Main only, after
 * sl__workers_init. */
int sl__listener_start(struct sl_listener *l);
void sl__listener_stop(struct sl_listener *l);

/* Logging: file path or NULL for stdout. 0 or -errno. */
int sl__log_init(const char *path, int level);
/* Reopen the log file (SIGHUP, log rotation). Any thread. */
void sl__log_reopen(void);
void sl__log_finish(void);
/* log_throttling: an error or warning logged `count` times within
 * window_ms by one call site is then suppressed for suppress_ms (count 0:
 * off). Main thread, before the workers start. */
void sl__log_set_throttling(unsigned count, uint64_t window_ms,
                            uint64_t suppress_ms);
/* syslog=true: lines also go to the local syslog; maxlog=false: not to
 * Sluice's own log. Main thread, before the workers start. */
void sl__log_set_destinations(bool use_syslog, bool use_maxlog);
/* The log file's path, "" for stdout. Any thread. */
const char *sl__log_path(void);

/* Clients not logged in yet (pending.c). Admit a new client of svc from
 * host: 0, -EMFILE when max_connections is reached (sessions + pending),
 * -EUSERS when capped and host has max_pending_logins_per_host pending,
 * -ENOMEM. Each admitted client is released once by sl__pending_done.
 * Any worker. */
int sl__pending_admit(struct sl_service *svc, const char *host, bool capped);
void sl__pending_done(struct sl_service *svc, const char *host);

/* What a worker holds, for the REST API: taken on the worker itself (in
 * a message posted to it, sl_worker_post), under its DCB list lock. */
struct sl_worker_stats {
    int64_t listeners;
    int64_t clients;
    int64_t backends;
    int64_t other;
    uint64_t bytes_read;
    uint64_t bytes_written;
    size_t zombies;
    size_t event_queue_length;
    uint64_t total_descriptors;       /* DCBs created on the worker */
    uint64_t reads, writes, errors, hangups;   /* epoll events by bit */
    uint64_t accepts;                 /* client connections accepted */
    uint64_t events, polls, max_batch;   /* events, waits with events,
                                          * most events in one wait */
    bool has_load;                    /* load[] sampled yet */
    unsigned load[3];                 /* percent: second, minute, hour */
};

/* One client session as seen by its worker; the strings and the backends
 * array are valid only during the callback. */
struct sl_session_info {
    uint64_t id;
    const char *service;
    const char *state;                /* "Starting", "Started", "Closing" */
    const char *user;
    const char *remote;
    const char *db;
    const char *const *backends;      /* server names */
    size_t nbackends;
    uint64_t bytes_read;
    uint64_t bytes_written;
    uint64_t alive_ms;                /* since the client was accepted */
    uint64_t idle_ms;                 /* since the client's last byte */
    bool has_kfwd;                    /* kernel forwarded at some point */
    struct sl_splice_stats kfwd;      /* then its counters (splice.c) */
    /* retain_last_statements and session_trace (history.c): MaxScale's
     * `queries` and `log` arrays (json_t *, new references the callback
     * takes; NULL when the session's lock was busy) */
    struct json_t *queries;
    struct json_t *log;
};

typedef void (*sl_session_info_fn)(const struct sl_session_info *info,
                                   void *arg);

/* On a worker: its DCB counters into *st, and fn (if not NULL) for each
 * of its client sessions (session_id 0: all, else that one). */
void sl__worker_snapshot(struct sl_worker_stats *st, uint64_t session_id,
                         sl_session_info_fn fn, void *arg);

/* Live counts for leak checks and diagnostics. */
int64_t sl__dcb_count(void);
int64_t sl__session_count(void);

/* ---- configuration side (config.c, params.c, main.c) ---- */

/*
 * Load and validate a configuration file (and the persist directory if
 * given). Every error is logged as "FILE:LINE: ..." naming the parameter;
 * returns NULL when there was any error. load_modules=false skips nothing
 * but object creation (modules are still loaded, to validate their
 * parameters).
 */
struct sl_config *sl__config_load(const char *path, bool create_instances);
void sl__config_free(struct sl_config *cfg);

/* Build a params set: validate name=value pairs against spec tables.
 * Exposed so tests and the admin API can use it. */
struct sl_params *sl__params_new(void);
void sl__params_free(struct sl_params *p);
/* Set raw text; 0 or -ENOMEM. */
int sl__params_set(struct sl_params *p, const char *name, const char *value,
                   int line);

/* Monitors: start each in its own thread / stop and join. Main only. */
int sl__monitors_start(struct sl_config *cfg);
void sl__monitors_stop(struct sl_config *cfg);
/* One monitor: start its thread (0, or -errno; no-op when running) / stop
 * and join it (no-op when not running). Main, or the admin thread once
 * the daemon runs (never both at once: main starts the API after the
 * monitors and stops it before them). */
int sl__monitor_start(struct sl_monitor *mon);
void sl__monitor_stop(struct sl_monitor *mon);
/* The global passive flag (monitor.c): config load and PATCH /v1/maxscale. */
void sl__monitor_set_passive(bool on);

#endif
