/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's target choice: which connection a statement goes to
 * once the router knows it needs the primary, a replica or a named
 * server.
 *
 *   rws_master_index  the session's primary connection; a server must be a
 *                     usable Master not being demoted (rws_master_usable),
 *                     master_reconnection=false keeps the first one only,
 *                     strict_tmp_tables the one that has temporary tables
 *   rws_slave_index   a replica: the candidates (status, lag, draining,
 *                     max_slave_connections, what causal_reads requires of
 *                     it, the rank rws_current_rank says) are snapshotted into struct rws_cand and the
 *                     pure rws_select() (rws_select.c) picks one under
 *                     slave_selection_criteria
 *   rws_named_index   a server named by a hint
 *
 * Connections are opened here when needed (rws_connect).
 *
 * Context: worker-owned; the servers' status and the instance's counters
 * are read with atomic loads.
 */
#define SL_LOG_TAG "readwritesplit"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sluice/log.h>
#include <sluice/server.h>
#include <sluice/worker.h>

#include "rws.h"

/*
 * A server a session may send primary work to: Master, usable, and not
 * being demoted by a switchover (SL_SRV_MOVING; then what needs the
 * primary is held, see rws_hold).
 */
bool
rws_master_usable(uint32_t st)
{
    return sl_server_is_usable(st) && (st & SL_SRV_MASTER) &&
           !(st & SL_SRV_MOVING);
}

bool
rws_primary_moving(const struct rws_instance *inst)
{
    for (size_t i = 0; i < inst->nservers; i++) {
        if (sl_server_status(inst->servers[i]) & SL_SRV_MOVING) {
            return true;
        }
    }
    return false;
}

static bool
master_status_ok(uint32_t st)
{
    return rws_master_usable(st);
}

/* May a new connection be opened to a server of this status. */
static bool
connectable(uint32_t st)
{
    return sl_server_is_usable(st) && !(st & SL_SRV_DRAINING);
}

int
rws_current_rank(const struct rws_session *rs)
{
    int best = -1;
    int best_class = 3;   /* 0 live+connectable, 1 live, 2 connectable */

    if (rs->master >= 0 && rws_be_live(&rs->be[rs->master])) {
        return sl_server_rank(rs->be[rs->master].srv);
    }
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        bool live = rws_be_live(&rs->be[i]);
        bool conn = connectable(sl_server_status(rs->be[i].srv));
        int cls = live ? (conn ? 0 : 1) : conn ? 2 : 3;
        int rank = sl_server_rank(rs->be[i].srv);

        if (best < 0 || cls < best_class ||
            (cls == best_class && rank < best)) {
            best = rank;
            best_class = cls;
        }
    }
    return best < 0 ? SL_SERVER_RANK_PRIMARY : best;
}

/*
 * The session's master connection, connecting (when `connect`) to the
 * server the monitor calls Master if there is none; -1 when there is no
 * usable master. A master connection whose server lost the role is not
 * used (and is replaced when a new master exists). A new one is chosen
 * among the usable masters of the best rank only (MaxScale: a
 * secondary-rank primary only while no primary-rank one is usable), in
 * configuration order.
 */
int
rws_master_index(struct rws_session *rs, bool connect)
{
    if (rs->master >= 0) {
        struct rws_be *be = &rs->be[rs->master];
        if (rws_be_live(be) && master_status_ok(sl_server_status(be->srv))) {
            return rs->master;
        }
    }
    if (!rs->inst->cfg.master_reconnection && rs->had_master) {
        /* master_reconnection=false: the session's first primary
         * connection, or none (lost, or its server no longer primary) */
        return -1;
    }
    if (rs->inst->cfg.strict_tmp_tables && rs->ntmp > 0 && rs->had_master) {
        /* strict_tmp_tables: the temporary tables live on the primary
         * connection the session had; no other one is opened while they
         * exist (MaxScale 24.02) */
        return -1;
    }
    int best_rank = -1;

    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        uint32_t st = sl_server_status(rs->be[i].srv);
        int rank = sl_server_rank(rs->be[i].srv);

        if (master_status_ok(st) && !(st & SL_SRV_DRAINING) &&
            (best_rank < 0 || rank < best_rank)) {
            best_rank = rank;
        }
    }
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        uint32_t st = sl_server_status(rs->be[i].srv);

        if (!master_status_ok(st) || (st & SL_SRV_DRAINING) ||
            sl_server_rank(rs->be[i].srv) != best_rank) {
            continue;
        }
        if (!rws_be_live(&rs->be[i]) &&
            (!connect || rws_connect(rs, i, true) != 0)) {
            continue;
        }
        if (rs->had_master && rs->ntmp > 0) {
            /* strict_tmp_tables=false: a new primary connection has none
             * of the temporary tables the session made */
            sl_log_ses_info(rs->ses, "New primary connection to '%s': the session's %zu temporary table(s) are gone", sl_server_name(rs->be[i].srv), rs->ntmp);
            rs->ntmp = 0;
        }
        rs->master = (int)i;
        rs->had_master = true;
        rs->first_master = i;
        return (int)i;
    }
    return -1;
}

static unsigned
live_slaves(const struct rws_session *rs)
{
    unsigned n = 0;

    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        if ((int)i != rs->master && rws_be_live(&rs->be[i])) {
            n++;
        }
    }
    return n;
}

static bool
slave_ok(const struct rws_session *rs, unsigned i, uint32_t st)
{
    const struct rws_config *c = &rs->inst->cfg;
    int64_t lag;

    if (!sl_server_is_usable(st) || (st & SL_SRV_DRAINING) ||
        rs->be[i].diverged) {
        return false;
    }
    if (st & SL_SRV_MASTER) {
        return c->master_accept_reads && (int)i == rs->master;
    }
    if (!(st & SL_SRV_SLAVE)) {
        return false;
    }
    if (c->max_lag_s > 0) {
        lag = sl_server_replication_lag(rs->be[i].srv);
        if (lag < 0 || lag > c->max_lag_s) {
            return false;
        }
    }
    return true;
}

/* "D-S-N" -> domain and sequence; false when malformed. */
static bool
gtid_split(const char *g, unsigned long *domain, unsigned long long *seq)
{
    char *end;

    *domain = strtoul(g, &end, 10);
    if (*end != '-') {
        return false;
    }
    (void)strtoul(end + 1, &end, 10);   /* server id: any */
    if (*end != '-') {
        return false;
    }
    *seq = strtoull(end + 1, &end, 10);
    return *end == '\0' || *end == ',';
}

/* The monitor's gtid_current_pos of server i has the session's GTID. */
static bool
server_has_gtid(const struct rws_session *rs, unsigned i)
{
    char pos[256];
    unsigned long dom, d;
    unsigned long long seq, s;
    const char *p;

    if (!gtid_split(rs->gtid, &dom, &seq)) {
        return false;
    }
    sl_server_gtid_pos(rs->be[i].srv, pos, sizeof(pos));
    for (p = pos; *p != '\0'; p++) {
        if (gtid_split(p, &d, &s) && d == dom) {
            return s >= seq;
        }
        p = strchr(p, ',');
        if (p == NULL) {
            break;
        }
    }
    return false;
}

/*
 * read_your_writes: may server i answer this session's read? Yes when
 * the session has written nothing (or nothing with a GTID), when i is
 * the session's primary, or when the monitor saw i apply the session's
 * last GTID. While that GTID is being fetched, or if it could not be,
 * only the primary qualifies.
 */
static bool
ryw_ok(const struct rws_session *rs, unsigned i)
{
    enum rws_causal m = rs->inst->cfg.causal;

    if ((int)i == rs->master || m == RWS_CAUSAL_NONE ||
        m == RWS_CAUSAL_LOCAL) {
        return true;
    }
    if (m != RWS_CAUSAL_RYW) {
        /* the service-wide and universal modes: rs->req, computed by
         * rws_causal_hold() for this read */
        if (rs->req_primary) {
            return false;
        }
        if (m == RWS_CAUSAL_FAST_GLOBAL || m == RWS_CAUSAL_FAST_UNIVERSAL) {
            return !rs->req_any ||
                   rws_known_covers_fresh(rs->inst, i, &rs->req);
        }
        return true;   /* global, universal, consistent: waited for */
    }
    if (rs->gtid_pending || rs->gtid_unknown) {
        return false;
    }
    return rs->gtid[0] == '\0' || server_has_gtid(rs, i);
}

/* xorshift32: per session, so choosing takes no lock (rand() does). */
static uint32_t
next_random(struct rws_session *rs)
{
    uint32_t x = rs->rnd ? rs->rnd : 2463534242u;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    rs->rnd = x;
    return x;
}

/*
 * A connection for a read: the best replica (connecting to one if the
 * session is below max_slave_connections), or -1. `exclude` is skipped
 * (a server that just failed).
 */
int
rws_slave_index(struct rws_session *rs, int exclude)
{
    struct rws_instance *inst = rs->inst;
    struct rws_cand cand[64];
    size_t n = inst->nservers < 64 ? inst->nservers : 64;
    bool may_connect = live_slaves(rs) < inst->cfg.max_slave_conns &&
                       !rs->hist_overflow;
    int rank = rws_current_rank(rs);
    int idx;

    for (size_t i = 0; i < n; i++) {
        struct rws_be *be = &rs->be[i];
        struct rws_srv_stats *s = &inst->stats[i];

        cand[i] = (struct rws_cand){.connected = rws_be_live(be)};
        cand[i].ok = (int)i != exclude &&
                     sl_server_rank(be->srv) == rank &&
                     slave_ok(rs, (unsigned)i, sl_server_status(be->srv)) &&
                     (cand[i].connected || may_connect) &&
                     ryw_ok(rs, (unsigned)i);
        /* Only what the criterion compares: the others are written by
         * other workers, and loading them would cost a cache miss each. */
        switch (inst->cfg.criteria) {
        case RWS_LEAST_GLOBAL_CONNECTIONS:
            cand[i].global_conns = sl_server_connections(be->srv);
            break;
        case RWS_LEAST_ROUTER_CONNECTIONS:
            cand[i].router_conns = atomic_load_explicit(&s->conns,
                                                        memory_order_relaxed);
            break;
        case RWS_LEAST_BEHIND_MASTER:
            cand[i].lag = sl_server_replication_lag(be->srv);
            break;
        case RWS_ADAPTIVE_ROUTING:
            cand[i].resp_us = atomic_load_explicit(&s->resp_us,
                                                   memory_order_relaxed);
            break;
        case RWS_LEAST_CURRENT_OPERATIONS:
        default:
            cand[i].operations = (int64_t)RWS_SUM(inst, i, ops);
            break;
        }
    }
    idx = rws_select(cand, n, inst->cfg.criteria, rs->rotate,
                     next_random(rs), rs->last_used);
    if (idx >= 0 && !cand[idx].connected &&
        rws_connect(rs, (unsigned)idx, false) != 0) {
        return -1;
    }
    return idx;
}

int
rws_named_index(struct rws_session *rs, const char *name)
{
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        uint32_t st = sl_server_status(rs->be[i].srv);

        if (strcasecmp(sl_server_name(rs->be[i].srv), name) != 0 ||
            !sl_server_is_usable(st)) {
            continue;
        }
        if (!rws_be_live(&rs->be[i]) &&
            rws_connect(rs, i, (st & SL_SRV_MASTER) != 0) != 0) {
            return -1;
        }
        return (int)i;
    }
    return -1;
}
