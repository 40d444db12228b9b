/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mariadbmon instance state shared by mariadbmon.c (probing, roles,
 * module glue) and mmon_ops.c (failover, switchover, rejoin).
 *
 * Locking: inst->lock is held for a whole tick and for a whole command,
 * so the MYSQL handles and views have one user at a time (monitors are not
 * the hot path). The diagnostics snapshot has its own lock so the admin
 * API never waits for a switchover.
 */
#ifndef SLUICE_MMON_INT_H
#define SLUICE_MMON_INT_H

#include <jansson.h>
#include <mysql.h>
#include <pthread.h>
#include <time.h>

#include <sluice/monitor.h>
#include <sluice/server.h>

#include "mmon.h"
#include "mmon_conds.h"
#include "mmon_script.h"

/* cooperative_monitoring_locks: the lock on one server, seen this tick. */
enum mmon_lock {
    MMON_LOCK_DOWN,              /* not reachable: no lock either way */
    MMON_LOCK_FREE,              /* not held by us, not tried (back-off) */
    MMON_LOCK_HELD,              /* held by this monitor's connection */
    MMON_LOCK_TAKEN,             /* held by another connection */
};

enum mmon_coop {
    MMON_COOP_NONE,
    MMON_COOP_MAJORITY_OF_ALL,
    MMON_COOP_MAJORITY_OF_RUNNING,
};

#define MMON_MAX_NAMED 8

struct mmon_server {
    struct sl_server *srv;
    MYSQL *conn;
    unsigned logged_errno;       /* last connect error logged, 0 none */
    bool auth_error;
    bool diverged_logged;        /* "cannot rejoin" said once */
    bool ro_enforced_logged;
    enum mmon_lock lock;         /* cooperative lock, this tick */
    uint32_t ev_status;          /* status the script events last saw */
    int last_ev;                 /* enum mmon_event last seen, -1 none */
    time_t last_ev_at;           /* when (REST triggered_at) */
    int parent;                  /* last known master index, -1 none */
    struct mmon_slave_conn last_slave;  /* as of the last good probe */
    uint64_t io_event_ms;        /* monotonic ms its IO thread last got an
                                  * event from its master, 0 none */
    struct mmon_gtid_pos seen_binlog;   /* gtid_binlog_pos, last good probe */
    bool seen_binlog_known;      /* probed at least once */
    bool master_lock_held;       /* MMON_MASTER_LOCK on this connection */
    int nnamed;                  /* named replication connections */
    char named[MMON_MAX_NAMED][65];
    char *events_enabled;        /* handle_events: "schema.name\n"..., as
                                  * last seen while it was the primary */
    char last_error[256];
    /* disk_space_threshold, disk_space_check_interval (check_disks) */
    bool disk_low;               /* as of the last check */
    uint64_t disk_next_ms;       /* monotonic: the next check, 0 now */
    bool disk_warned;            /* "cannot check" said once */
    char disk_detail[192];       /* the disk over its limit, "" none */
};

/* A script run waiting for the end of the tick: argv substituted. */
struct mmon_script_job {
    char **argv;
    char who[160];
};

struct mmon_instance {
    struct sl_monitor *mon;
    struct mmon_server *servers; /* config order */
    struct mmon_view *views;     /* this tick's probe, same order */
    int n;
    pthread_mutex_t lock;        /* tick and commands */
    int primary;                 /* index or -1 */
    int lost;                    /* primary that went down, -1 none */
    uint64_t lost_ticks;         /* consecutive ticks it stayed down */
    bool verify_logged;
    bool no_candidate_logged;

    /* cooperative_monitoring_locks (mariadbmon.c, update_locks) */
    enum mmon_coop coop;
    bool primary_monitor;        /* may change the cluster this tick */
    int locks_held;
    int locks_needed;
    int locks_running;
    uint64_t lock_backoff;       /* ticks left without GET_LOCK */
    uint64_t locks_released_at;  /* release-locks: monotonic ms, 0 none */
    unsigned rand_state;

    /* parameters */
    bool auto_failover;
    bool failover_safe;          /* auto_failover=safe */
    char failover_blocked[512];  /* why safe mode holds a failover back,
                                  * "" when it does not (REST, the log) */
    bool enforce_writable_master;
    char *promotion_sql_file;    /* NULL: none */
    char *demotion_sql_file;
    bool auto_rejoin;
    bool verify_master_failure;
    bool enforce_read_only_slaves;
    bool handle_events;
    bool enforce_simple_topology;
    uint64_t failcount;
    uint64_t master_failure_timeout_ms;
    uint64_t query_retries;      /* global, read at creation */
    uint64_t query_retry_timeout_ms;
    uint64_t switchover_timeout_ms;
    uint64_t failover_timeout_ms;
    char repl_user[256];
    char repl_password[256];

    /* disk space: disk_space_threshold (the monitor's; a server's own
     * overrides it), disk_space_check_interval (0: never checked),
     * maintenance_on_low_disk_space, switchover_on_low_disk_space */
    char *disk_threshold;        /* the monitor's, NULL none */
    uint64_t disk_interval_ms;
    bool maint_low_disk;
    bool switchover_low_disk;
    uint64_t low_disk_backoff;   /* ticks left before another try */
    bool low_disk_logged;

    /* master_conditions, slave_conditions (mmon_conds.c) */
    unsigned master_conds;
    unsigned slave_conds;
    bool master_ok;              /* the candidate may be Master this tick */
    bool coop_ok;                /* primary_monitor_master holds */
    char master_why[256];        /* why not, logged once per change */

    /* script, events, script_timeout (mmon_script.c): events found by
     * publish() wait here, under lock, and run after the tick unlocks. */
    char **script_argv;          /* NULL: no script */
    uint64_t script_events;      /* enum mask over mmon_event_names */
    uint64_t script_timeout_ms;
    struct mmon_script_job *jobs;
    size_t njobs;

    /* The latest manual command (fetch-cmd-result), and an async one
     * waiting for the monitor thread; under cmd_lock, never held long. */
    pthread_mutex_t cmd_lock;
    struct {
        int state;               /* enum mmon_cmd_state (mariadbmon.c) */
        int kind;                /* enum cmd_kind */
        int a, b;                /* server indexes or -1 */
        bool ok;
        char name[32];
        char result[1024];
    } cmd;

    pthread_mutex_t snap_lock;
    json_t *snapshot;            /* diagnostics, under snap_lock */
};

/* mariadbmon.c: probe every server into inst->views (lock held). */
void mmon_probe_all(struct mmon_instance *inst);
/* Run one statement on server i; 0, or -1 with err[] set (and logged). */
int mmon_exec(struct mmon_instance *inst, int i, const char *sql,
              char *err, size_t errlen);

/* mmon_ops.c. All with inst->lock held; 0 or -1 with err[] set. */
int mmon_failover(struct mmon_instance *inst, int old, const char *reason,
                  char *err, size_t errlen);
int mmon_switchover(struct mmon_instance *inst, int new_primary, int old,
                    char *err, size_t errlen);
int mmon_rejoin(struct mmon_instance *inst, int i, char *err,
                size_t errlen);
/*
 * promotion_sql_file / demotion_sql_file: read `path` (one statement a
 * line; empty lines and lines starting with '#' skipped) and run each on
 * server i (i < 0: only read it, the start-up check). 0, or -1 with err[]
 * naming the file and line, or the failed statement.
 */
int mmon_run_sql_file(struct mmon_instance *inst, int i, const char *param,
                      const char *path, char *err, size_t errlen);
/* mmon_events.c (handle_events; no-ops when it is off). */
void mmon_events_remember(struct mmon_instance *inst, int i);
void mmon_events_demote(struct mmon_instance *inst, int i);
void mmon_events_promote(struct mmon_instance *inst, int i, int old);

int mmon_reset_replication(struct mmon_instance *inst, int new_primary,
                           char *err, size_t errlen);
/* Can server i rejoin the current primary? why[] when not. */
bool mmon_rejoin_allowed(struct mmon_instance *inst, int i, char *why,
                         size_t whylen);

/* cooperative_monitoring_locks: the session wait_timeout (seconds) of a
 * monitor connection: the longest operation, two ticks and 5 s. */
static inline uint64_t
mmon_idle_limit_s(uint64_t longest_op_ms, uint64_t interval_ms)
{
    return (longest_op_ms + 2 * interval_ms + 999) / 1000 + 5;
}

#define SRVNAME(inst, i) sl_server_name((inst)->servers[i].srv)
#define MONNAME(inst) sl_monitor_name((inst)->mon)

#endif
