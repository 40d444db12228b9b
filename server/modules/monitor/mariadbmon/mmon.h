/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mariadbmon internals shared by its files: the per-server view the
 * monitor builds each tick, GTID positions, and the pure decision
 * functions (mmon_decide.c) that turn views into roles and failover
 * choices. The decision functions touch no connection and no global, so
 * the unit test compiles mmon_decide.c directly and feeds it views.
 */
#ifndef SLUICE_MMON_H
#define SLUICE_MMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MMON_MAX_DOMAINS 16

/* One GTID per replication domain: domain-server-sequence. */
struct mmon_gtid {
    uint32_t domain;
    uint32_t server_id;
    uint64_t seq;
};

struct mmon_gtid_pos {
    struct mmon_gtid g[MMON_MAX_DOMAINS];
    int n;
};

/* What a slave connection (a row of SHOW ALL SLAVES STATUS) says. */
struct mmon_slave_conn {
    bool present;
    int master;              /* index of the monitored server it replicates
                              * from, -1 if none matches (external) */
    bool io_running;         /* Slave_IO_Running = Yes */
    bool io_connecting;      /* Slave_IO_Running = Connecting */
    bool sql_running;        /* Slave_SQL_Running = Yes */
    int64_t lag;             /* Seconds_Behind_Master, -1 NULL */
    struct mmon_gtid_pos io_pos;   /* Gtid_IO_Pos */
    int64_t heartbeats;      /* Slave_received_heartbeats, -1 unknown */
    int64_t heartbeat_period_ms;   /* Slave_heartbeat_period, -1 unknown */
    int64_t event_age_ms;    /* since the IO thread last received
                              * something from its master (a new
                              * Gtid_IO_Pos, a heartbeat, or connecting),
                              * as tracked across ticks; -1 unknown */
};

/* The monitor's view of one server after a probe. */
struct mmon_view {
    bool running;            /* answered this tick */
    bool maint;              /* Maintenance set by an administrator */
    bool read_only;
    bool no_promotion;       /* listed in servers_no_promotion */
    int64_t server_id;
    struct mmon_gtid_pos current_pos;   /* @@gtid_current_pos */
    struct mmon_gtid_pos binlog_pos;    /* @@gtid_binlog_pos */
    struct mmon_gtid_pos slave_pos;     /* @@gtid_slave_pos */
    struct mmon_slave_conn slave;       /* default (or first) connection */
    int64_t uptime;          /* Uptime (s), -1 unknown */
    bool disk_low;           /* a disk over disk_space_threshold, as of
                              * the last disk space check */
};

/* Parse "0-1-10,1-2-5" (empty allowed). 0 or -EINVAL. */
int mmon_gtid_parse(const char *text, struct mmon_gtid_pos *out);
/* Format into buf ("" for an empty position). */
const char *mmon_gtid_format(const struct mmon_gtid_pos *p, char *buf,
                             size_t len);
/* The entry for a domain, or NULL. */
const struct mmon_gtid *mmon_gtid_domain(const struct mmon_gtid_pos *p,
                                         uint32_t domain);
/* >0 when a is ahead of b, <0 behind, 0 equal: per domain sequence
 * numbers, a domain missing counts as 0; a position ahead in one domain
 * and behind in another compares by the sum of sequences. */
int mmon_gtid_compare(const struct mmon_gtid_pos *a,
                      const struct mmon_gtid_pos *b);

/*
 * Choose the primary among n views: running, not in maintenance, not
 * read_only, not replicating from another running monitored server. The
 * current primary `prev` keeps the role while it qualifies; otherwise the
 * one with the most replicas wins, ties to the lowest index (config
 * order). Returns the index or -1 (no usable primary: no writes routed).
 */
int mmon_pick_primary(const struct mmon_view *v, int n, int prev);

/* Number of servers whose slave connection points at index i. */
int mmon_count_replicas(const struct mmon_view *v, int n, int i);

/* A replica: running, a slave connection to a monitored server with the
 * SQL thread running and the IO thread running or connecting. */
bool mmon_is_replica(const struct mmon_view *v, int n, int i);

/*
 * verify_master_failure: index of a running replica whose IO thread is
 * still connected to `primary` (Slave_IO_Running=Yes) and received an
 * event from it at most `within_ms` ago (master_failure_timeout), so the
 * primary is alive; -1 when none. within_ms < 0: any connected replica.
 */
int mmon_primary_still_replicating(const struct mmon_view *v, int n,
                                   int primary, int64_t within_ms);

/*
 * The replica to promote when `old` failed: a running replica of old, not
 * in maintenance or servers_no_promotion, with the most advanced received
 * GTID (Gtid_IO_Pos, or gtid_current_pos when that is ahead); ties to the
 * lowest index. -1 when none qualifies; why[] then says why.
 */
int mmon_pick_promotion(const struct mmon_view *v, int n, int old,
                        char *why, size_t whylen);
/* The same among the replicas that are not low on disk space
 * (switchover_on_low_disk_space): -1 when none. */
int mmon_pick_promotion_disk_ok(const struct mmon_view *v, int n, int old,
                                char *why, size_t whylen);

/*
 * auto_failover=safe: would promoting `cand` lose nothing the failed
 * primary is known to have written? True when, in every domain of the
 * primary's last seen gtid_binlog_pos, the candidate has received
 * (Gtid_IO_Pos) or applied (gtid_current_pos) at least that sequence.
 * False with why[] naming the domain and how many are missing.
 */
bool mmon_failover_safe(const struct mmon_gtid_pos *primary_binlog,
                        const struct mmon_view *cand, char *why,
                        size_t whylen);

/*
 * Can a server with binlog position `server_binlog` replicate from a
 * primary with binlog position `primary_binlog`, slave position
 * `primary_slave` (where it stopped replicating when promoted) and server
 * id `primary_id`? True when every GTID the server wrote is one the
 * primary has: in each domain, the server's last GTID is either the
 * primary's own (the server replicated it from the primary) or at or
 * below where the primary's replication stopped. False (why[] says which
 * domain) when the server has transactions the primary never saw.
 */
bool mmon_can_rejoin(const struct mmon_gtid_pos *server_binlog,
                     const struct mmon_gtid_pos *primary_binlog,
                     const struct mmon_gtid_pos *primary_slave,
                     int64_t primary_id, char *why, size_t whylen);

/*
 * cooperative_monitoring_locks: how many locks make the primary monitor —
 * more than half of all n monitored servers (of_all), or of the `running`
 * ones reachable this tick. Never 0: holding no lock is never a majority.
 */
int mmon_locks_needed(bool of_all, int n, int running);

#endif
