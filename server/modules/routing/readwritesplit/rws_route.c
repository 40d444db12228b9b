/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's route_query: the entry point for every client command,
 * and where a text statement goes.
 *
 *   COM_QUERY        classified (sl_qc_classify_buf); see decide(): a
 *                    session command (rws_sescmd.c), the primary, or a
 *                    replica (the server itself chosen in rws_target.c)
 *   COM_STMT_*       prepared statements (rws_ps.c)
 *   COM_INIT_DB, COM_SET_OPTION, COM_CHANGE_USER, COM_RESET_CONNECTION
 *                    session commands
 *   others           the primary
 *
 * This unit owns the transaction state predicted before routing, the
 * temporary tables, hints, holding a command while no primary is usable
 * (rws_hold), and the two primitives every unit sends with: rws_write (a
 * command and what its answer is for) and rws_route_to (the client's
 * command, kept for a retry or a replay). LOCAL INFILE data packets pass
 * straight to the connection that asked for them.
 *
 * Context: worker-owned.
 */
#define SL_LOG_TAG "readwritesplit"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/server.h>
#include <sluice/session.h>

#include "rws.h"

enum target {
    T_MASTER,
    T_SLAVE,
    T_ALL,
    T_NAMED,
    T_LAST,
};

void
rws_push(struct rws_be *be, const struct rws_expect *e)
{
    if (be->qlen == be->qcap) {
        size_t cap = be->qcap ? be->qcap * 2 : 8;
        struct rws_expect *q = malloc(cap * sizeof(*q));

        if (q == NULL) {
            return;   /* the answer will be dropped as unexpected */
        }
        for (size_t i = 0; i < be->qlen; i++) {
            q[i] = be->q[(be->qhead + i) % be->qcap];
        }
        free(be->q);
        be->q = q;
        be->qcap = cap;
        be->qhead = 0;
    }
    be->q[(be->qhead + be->qlen) % be->qcap] = *e;
    be->qlen++;
}

/*
 * Write buf (taken) to connection idx and remember what its answer is
 * for. SL_OK or SL_ERROR (the connection is gone; buf freed).
 */
int
rws_write(struct rws_session *rs, unsigned idx, struct sl_buf *buf,
          enum rws_kind kind, struct rws_sescmd *sc)
{
    struct rws_be *be = &rs->be[idx];
    int cmd = sl_mdb_command(buf);
    struct rws_expect e = {.kind = (uint8_t)kind, .sc = sc};

    if (!rws_be_live(be)) {
        sl_buf_free(buf);
        return SL_ERROR;
    }
    if (cmd == SL_COM_STMT_PREPARE) {
        /* Any other PREPARE makes "-1" name a different statement. */
        be->last_prepare = sc != NULL ? sc->ps_id : 0;
    }
    if (rws_expects_reply(cmd)) {
        e.sent_us = rws_now_us();
        if (sc != NULL) {
            sc->refs++;
        }
        rws_push(be, &e);
        atomic_fetch_add_explicit(&rws_count(rs->inst, idx)->ops, 1,
                                  memory_order_relaxed);
        rws_watch_start(rs);
    }
    return sl_backend_write(be->b, buf);
}

/* Send the client's command (taken) to connection idx. */
int
rws_route_to(struct rws_session *rs, int idx, struct sl_buf *buf, bool is_write)
{
    struct rws_instance *inst = rs->inst;
    int cmd = sl_mdb_command(buf);

    sl_buf_free(rs->cur);
    rs->cur = NULL;
    rs->wait_deadline = 0;   /* a hold, if any, is over */
    rs->cur_target = idx;
    rs->cur_is_read = !is_write;
    rs->cur_is_write = is_write;
    rs->cur_pure_read = rs->routing_read;
    rs->routing_read = false;
    rs->cur_started = false;
    rs->cur_retries = 0;
    rs->last_used = idx;
    if (rws_expects_reply(cmd)) {
        /* for a retry or a replay (shares buf's blocks): a write refused
         * by a primary that a switchover is demoting goes again */
        rs->cur = sl_buf_clone_new(buf);
    }
    if (is_write && rs->trx_active && !rs->trx_ro && rs->trx_srv < 0) {
        rs->trx_srv = idx;
    }
    if ((is_write && rs->inst->cfg.trx_replay && rs->trx_active &&
         !rs->trx_ro) ||
        rws_optimistic(rs)) {
        rws_trx_log_add(rs, rs->log_src != NULL ? rs->log_src : buf);
    }
    rs->log_src = NULL;
    sl_server_count_route(rs->be[idx].srv, is_write);
    atomic_fetch_add_explicit(is_write ? &rws_count(inst, idx)->writes
                                       : &rws_count(inst, idx)->reads,
                              1, memory_order_relaxed);
    if (!rws_expects_reply(cmd)) {
        rws_write(rs, (unsigned)idx, buf, RK_IGNORE, NULL);
        return SL_OK;   /* no answer: nothing to tell the client */
    }
    if (rws_write(rs, (unsigned)idx, buf, RK_CLIENT, NULL) != SL_OK) {
        rws_send_error(rs, "Lost connection to server '%s'",
                       sl_server_name(rs->be[idx].srv));
    }
    return SL_OK;
}

/* ---- classification ---- */

static bool
is_tmp_table(const struct rws_session *rs, const struct sl_qc_result *qc)
{
    for (unsigned t = 0; t < qc->ntables && t < SL_QC_MAX_TABLES; t++) {
        const char *name = qc->tables[t];
        const char *dot = strrchr(name, '.');

        for (size_t i = 0; i < rs->ntmp; i++) {
            if (strcasecmp(rs->tmp[i], name) == 0 ||
                (dot != NULL && strcasecmp(rs->tmp[i], dot + 1) == 0)) {
                return true;
            }
        }
    }
    return false;
}

static void
track_tmp_tables(struct rws_session *rs, const struct sl_qc_result *qc)
{
    if ((qc->type & SL_QC_CREATE_TMP_TABLE) && qc->ntables > 0) {
        char(*n)[SL_QC_NAME_MAX] =
            realloc(rs->tmp, (rs->ntmp + 1) * sizeof(*rs->tmp));
        if (n != NULL) {
            const char *dot = strrchr(qc->tables[0], '.');
            rs->tmp = n;
            snprintf(rs->tmp[rs->ntmp++], SL_QC_NAME_MAX, "%s",
                     dot != NULL ? dot + 1 : qc->tables[0]);
        }
    } else if ((qc->type & SL_QC_DROP_TABLE) && rs->ntmp > 0) {
        for (unsigned t = 0; t < qc->ntables && t < SL_QC_MAX_TABLES; t++) {
            const char *dot = strrchr(qc->tables[t], '.');
            const char *name = dot != NULL ? dot + 1 : qc->tables[t];
            for (size_t i = 0; i < rs->ntmp; i++) {
                if (strcasecmp(rs->tmp[i], name) == 0) {
                    memcpy(rs->tmp[i], rs->tmp[--rs->ntmp], SL_QC_NAME_MAX);
                    break;
                }
            }
        }
    }
}

/* Transaction state before routing (the answers refine it). */
void
rws_track_trx(struct rws_session *rs, uint32_t type)
{
    if (type & SL_QC_BEGIN_TRX) {
        rs->trx_active = true;
        rs->trx_ro = (type & SL_QC_READ_ONLY_TRX) != 0;
        /* optimistic_trx: a read-write transaction starts as a read-only
         * one on a replica (an XA one, or a session held on the primary,
         * does not) */
        rs->optimistic = !rs->trx_ro && rs->inst->cfg.optimistic &&
                         !(type & SL_QC_XA) && !rs->locked_to_master;
        rs->trx_ro = rs->trx_ro || rs->optimistic;
        rs->ro_target = -1;
        rs->trx_srv = -1;
        rws_trx_log_clear(rs);
        rs->trx_log_ok = true;
    }
    if (type & SL_QC_DISABLE_AUTOCOMMIT) {
        rs->autocommit = false;
        if (!rs->trx_active) {
            rs->trx_active = true;
            rs->trx_ro = false;
            rs->trx_srv = -1;
            rws_trx_log_clear(rs);
            rs->trx_log_ok = true;
        }
    }
    if (type & SL_QC_ENABLE_AUTOCOMMIT) {
        rs->autocommit = true;
    }
}

/* A statement outside transactions would go to the primary. */
static bool
master_stmt(const struct rws_session *rs, const struct sl_qc_result *qc)
{
    const struct rws_config *c = &rs->inst->cfg;
    uint32_t t = qc->type;

    if (!(t & SL_QC_READ) ||
        (t & (SL_QC_WRITE | SL_QC_DDL | SL_QC_MASTER_READ | SL_QC_UNKNOWN |
              SL_QC_CALL | SL_QC_MULTI_STMT | SL_QC_USERVAR_WRITE |
              SL_QC_GSYSVAR_WRITE | SL_QC_CREATE_TMP_TABLE |
              SL_QC_LOAD_LOCAL | SL_QC_EXEC_PREPARED))) {
        return true;
    }
    if (c->vars_in_master && (t & SL_QC_USERVAR_READ)) {
        return true;
    }
    return rs->ntmp > 0 && is_tmp_table(rs, qc);
}

static enum target
decide(struct rws_session *rs, const struct sl_qc_result *qc)
{
    uint32_t t = qc->type;

    if (rws_sescmd_type(t)) {
        return T_ALL;
    }
    if (rs->locked_to_master) {
        return T_MASTER;
    }
    if (rs->trx_active && rs->trx_ro) {
        return T_SLAVE;   /* all of it, BEGIN to COMMIT, on one replica */
    }
    if (rs->trx_active && !rs->trx_ro) {
        return T_MASTER;
    }
    return master_stmt(rs, qc) ? T_MASTER : T_SLAVE;
}

/*
 * optimistic_trx: the statement cannot run in the transaction on its
 * replica: a write (anything that would go to the primary outside a
 * transaction, a hint to the primary), or the replica was lost after
 * the transaction began there. Its own BEGIN, COMMIT and ROLLBACK stay.
 */
static bool
optimistic_moves(const struct rws_session *rs, const struct sl_qc_result *qc,
                 const struct sl_hint *hint)
{
    if (rws_sescmd_type(qc->type)) {
        return false;   /* every connection runs it */
    }
    if (rs->ntrx > 0 &&
        (rs->ro_target < 0 || !rws_be_live(&rs->be[rs->ro_target]))) {
        return true;
    }
    if (hint->type == SL_HINT_ROUTE_TO_MASTER ||
        qc->hint.type == SL_HINT_ROUTE_TO_MASTER) {
        return true;
    }
    if (qc->type & (SL_QC_BEGIN_TRX | SL_QC_COMMIT | SL_QC_ROLLBACK)) {
        return false;
    }
    return master_stmt(rs, qc);
}

static void
after_route(struct rws_session *rs, const struct sl_qc_result *qc)
{
    const struct rws_config *c = &rs->inst->cfg;

    if ((c->strict_multi_stmt && (qc->type & SL_QC_MULTI_STMT)) ||
        (c->strict_sp_calls && (qc->type & SL_QC_CALL))) {
        rs->locked_to_master = true;
    }
    if ((qc->type & SL_QC_SESSION_WRITE) && !rws_sescmd_type(qc->type) &&
        !rs->locked_to_master) {
        /* Session state changed on one server only: a compound statement
         * or EXECUTE IMMEDIATE that may SET something, a multi-statement
         * with a SET among writes. The other connections no longer have
         * the session's state, so everything stays on the primary. */
        sl_log_ses_info(rs->ses, "A statement that changes the session's "
                        "state ran on one server only: the session stays "
                        "on the primary from now on");
        rs->locked_to_master = true;
    }
    track_tmp_tables(rs, qc);
}

/* Hold buf until a server appears (delayed_retry), else answer with an
 * error. */
int
rws_hold(struct rws_session *rs, struct sl_buf *buf,
         const struct sl_hint *hint)
{
    /* A primary moving in a switchover is no failure: held whatever
     * delayed_retry says, for up to delayed_retry_timeout. */
    if ((rs->inst->cfg.delayed_retry || rws_primary_moving(rs->inst)) &&
        !rs->no_hold && rs->waiting == NULL) {
        rs->waiting = buf;
        rs->waiting_hint = hint != NULL ? *hint
                                        : (struct sl_hint){.type = 0};
        if (rs->wait_deadline == 0) {
            rs->wait_deadline = rws_now_us() / 1000 +
                                rs->inst->cfg.delayed_retry_ms;
        }
        rws_start_timer(rs);
        return SL_OK;
    }
    sl_buf_free(buf);
    if (rs->inst->cfg.failure_mode == RWS_FAIL_ON_WRITE ||
        rs->inst->cfg.failure_mode == RWS_FAIL_INSTANTLY) {
        rws_send_error(rs, "No master server available for a write: closing the session");
        return SL_ERROR;
    }
    rws_send_error(rs, "No master server available for a write");
    return SL_OK;
}

static int
route_write(struct rws_session *rs, struct sl_buf *buf,
            const struct sl_hint *hint)
{
    int m;

    rws_trx_on_moving_master(rs, &m);
    if (m < 0) {
        m = rws_master_index(rs, true);
    }

    if (m < 0) {
        return rws_hold(rs, buf, hint);
    }
    if (rws_barrier_up(rs->inst) && rws_barrier_hold(rs, buf, hint)) {
        return SL_OK;
    }
    rs->wait_deadline = 0;
    return rws_route_to(rs, m, buf, true);
}

static int
route_read(struct rws_session *rs, struct sl_buf *buf,
           const struct sl_hint *hint);

static int
route_by_hint(struct rws_session *rs, struct sl_buf *buf,
              const struct sl_hint *h, bool *done)
{
    int idx = -1;

    *done = true;
    switch (h->type) {
    case SL_HINT_ROUTE_TO_MASTER:
        return route_write(rs, buf, h);
    case SL_HINT_ROUTE_TO_SLAVE:
        return route_read(rs, buf, h);
    case SL_HINT_ROUTE_TO_NAMED_SERVER:
        idx = rws_named_index(rs, h->server);
        break;
    case SL_HINT_ROUTE_TO_LAST_USED:
        idx = rs->last_used >= 0 && rws_be_live(&rs->be[rs->last_used])
                  ? rs->last_used
                  : -1;
        break;
    default:
        break;
    }
    if (idx < 0) {
        *done = false;   /* a hint that cannot be honoured is ignored */
        return SL_OK;
    }
    return rws_route_to(rs, idx, buf, idx == rs->master);
}

/* A read outside a read-write transaction. */
static int
route_read(struct rws_session *rs, struct sl_buf *buf,
           const struct sl_hint *hint)
{
    int idx;

    if (rs->trx_ro && rs->trx_active && rs->ro_target >= 0 &&
        rws_be_live(&rs->be[rs->ro_target])) {
        return rws_route_to(rs, rs->ro_target, buf, false);
    }
    if (rws_causal_hold(rs, buf, hint)) {
        return SL_OK;
    }
    idx = rws_slave_index(rs, -1);
    if (idx < 0) {
        idx = rws_master_index(rs, true);
    }
    if (idx < 0) {
        return rws_hold(rs, buf, hint);
    }
    rs->wait_deadline = 0;
    if (rs->trx_ro && rs->trx_active) {
        rs->ro_target = idx;
    }
    rws_causal_wait(rs, idx);
    rs->routing_read = true;
    return rws_route_to(rs, idx, buf, idx == rs->master);
}

static int
route_query_text(struct rws_session *rs, struct sl_buf *buf,
                 const struct sl_hint *hint)
{
    struct sl_qc_result qc;
    enum target t;
    bool done = false;
    int rc;

    if (!sl_qc_classify_buf(buf, &qc)) {
        memset(&qc, 0, sizeof(qc));
        qc.type = SL_QC_UNKNOWN;
    }
    sl_session_count_query(rs->ses, qc.type);
    rws_track_trx(rs, qc.type);
    if (rws_changes_data(qc.type)) {
        rs->wrote = true;
    }
    if (rws_optimistic(rs)) {
        static const struct sl_hint none = {.type = SL_HINT_NONE};

        if (optimistic_moves(rs, &qc, hint)) {
            return rws_opt_to_primary(rs, buf, hint);
        }
        /* on its replica, BEGIN to COMMIT: other hints do not apply */
        hint = &none;
        qc.hint.type = SL_HINT_NONE;
    }
    t = decide(rs, &qc);
    if (t != T_ALL) {
        static const struct sl_hint last = {.type =
                                                SL_HINT_ROUTE_TO_LAST_USED};
        const struct sl_hint *h = hint->type != SL_HINT_NONE ? hint
                                                             : &qc.hint;

        /* FOUND_ROWS() answers about the statement before it (a SELECT
         * that may have run on a replica): ask the server that ran it.
         * A transaction is on one server anyway; a hint wins. */
        if (h->type == SL_HINT_NONE && (qc.type & SL_QC_PREV_RESULT) &&
            !rs->trx_active && !(qc.type & SL_QC_WRITE)) {
            h = &last;
        }
        if (h->type != SL_HINT_NONE) {
            rc = route_by_hint(rs, buf, h, &done);
            if (done) {
                after_route(rs, &qc);
                return rc;
            }
        }
    }
    switch (t) {
    case T_ALL:
        rc = rws_exec_sescmd(rs, buf, 0);
        break;
    case T_SLAVE:
        rc = route_read(rs, buf, hint);
        break;
    default:
        rc = route_write(rs, buf, hint);
        break;
    }
    after_route(rs, &qc);
    return rc;
}

/*
 * Route one client command (buf taken), possibly again: a held command
 * comes back here when its wait ends. Worker-owned.
 */
int
rws_route_cmd(struct rws_session *rs, struct sl_buf *buf,
              const struct sl_hint *hint)
{
    int cmd = sl_mdb_command(buf);

    switch (cmd) {
    case SL_COM_QUIT:
        sl_buf_free(buf);
        return SL_OK;
    case SL_COM_QUERY:
        return route_query_text(rs, buf, hint);
    case SL_COM_STMT_PREPARE:
        return rws_route_prepare(rs, buf);
    case SL_COM_STMT_EXECUTE:
    case SL_COM_STMT_FETCH:
    case SL_COM_STMT_RESET:
    case SL_COM_STMT_CLOSE:
    case SL_COM_STMT_SEND_LONG_DATA:
        return rws_route_ps_cmd(rs, buf, cmd);
    case SL_COM_RESET_CONNECTION:
        rws_ps_free_all(rs);
        rws_history_free(rs);
        rs->ntmp = 0;
        rs->trx_active = rs->trx_ro = false;
        rs->trx_srv = -1;
        rs->autocommit = true;
        return rws_exec_sescmd(rs, buf, 0);
    case SL_COM_CHANGE_USER:
        rws_ps_free_all(rs);
        rws_history_free(rs);
        rs->ntmp = 0;
        return rws_exec_sescmd(rs, buf, 0);
    case SL_COM_INIT_DB:
    case SL_COM_SET_OPTION:
        return rws_exec_sescmd(rs, buf, 0);
    case SL_COM_FIELD_LIST:
        if (!rs->trx_active || rs->trx_ro) {
            return route_read(rs, buf, hint);
        }
        return route_write(rs, buf, hint);
    default:
        return route_write(rs, buf, hint);
    }
}

/* A packet of a LOCAL INFILE's contents (buf taken): data for the
 * connection that asked for it, with no answer of its own; the empty
 * packet ends the file and the server then answers the LOAD DATA. */
static int
route_file_packet(struct rws_session *rs, struct sl_buf *buf)
{
    struct rws_be *be = &rs->be[rs->load_target];

    if (sl_buf_len(buf) == SL_MDB_HDR_LEN) {
        rs->load_target = -1;
    }
    if (!rws_be_live(be)) {
        sl_buf_free(buf);
        if (rs->load_target >= 0) {
            return SL_OK;   /* the error goes with the end of the file */
        }
        rws_send_error(rs, "Lost connection to server '%s' during LOAD DATA LOCAL INFILE",
                       sl_server_name(be->srv));
        return SL_OK;
    }
    return sl_backend_write(be->b, buf) == 0 ? SL_OK : SL_ERROR;
}

int
rws_route_query(void *rsession, struct sl_buf *buf)
{
    struct rws_session *rs = rsession;
    struct sl_hint hint = {.type = SL_HINT_NONE};
    size_t n;

    if (rs->load_target >= 0) {
        return route_file_packet(rs, buf);
    }
    /* Kept for the safety net's log (rws_lost_track): the command and
     * the first bytes of its payload. */
    n = sl_buf_len(buf);
    n = n > SL_MDB_HDR_LEN + 1 ? n - SL_MDB_HDR_LEN - 1 : 0;
    n = n < sizeof(rs->last_stmt) ? n : sizeof(rs->last_stmt);
    rs->last_cmd = (uint8_t)sl_mdb_command(buf);
    rs->last_len = (uint8_t)sl_buf_copy_out(buf, SL_MDB_HDR_LEN + 1, n,
                                            rs->last_stmt);
    sl_session_take_hint(rs->ses, &hint);
    if (rs->waiting != NULL || rs->replaying || rs->held != NULL) {
        /* A command arrived while one is held: keep order by holding it
         * too is not possible with one slot; the client protocol is
         * request/response, so this is a pipelining client. */
        if (rs->waiting == NULL) {
            rs->waiting = buf;
            rs->waiting_hint = hint;
            return SL_OK;
        }
        sl_buf_free(buf);
        rws_send_error(rs, "Command pipelining while a command is held is not supported");
        return SL_ERROR;
    }
    return rws_route_cmd(rs, buf, &hint);
}
