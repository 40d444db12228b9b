/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's failures of connections: handle_error, and closing a
 * connection whose session state diverged.
 *
 * A replica lost with a read pending re-sends the read elsewhere
 * (retry_failed_reads) if the client has not seen a byte of the answer;
 * a session command whose replier failed gets another one
 * (rws_reassign_sescmds); a primary lost goes to rws_master_failed
 * (rws_trx.c: a replay inside a transaction, else master_failure_mode).
 * An answer the protocol lost track of ends the session (rws_lost_track).
 *
 * Context: worker-owned.
 */
#define SL_LOG_TAG "readwritesplit"

#include <string.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/server.h>
#include <sluice/session.h>

#include "rws.h"

static bool has_client_answer(const struct rws_be *be);
static bool retry_read(struct rws_session *rs, struct rws_be *failed);

/* Let go of be's connection: close it when close_it (else the core is
 * closing it), forget the commands queued for it and, if it was the
 * session's master, the master. */
void
rws_release_backend(struct rws_session *rs, struct rws_be *be, bool close_it)
{
    if (rws_be_live(be)) {
        if (close_it) {
            sl_backend_close(be->b);
        }
        be->b = NULL;
        atomic_fetch_sub(&rs->inst->stats[be->idx].conns, 1);
        rws_ps_forget_backend(rs, be->idx);
    }
    rws_queue_clear(rs, be);
    if (rs->master == (int)be->idx) {
        rs->master = -1;
    }
}

/* Close a connection whose session state diverged; the server is not used
 * again by this session. A read waiting on it is retried elsewhere. */
void
rws_drop_backend(struct rws_session *rs, struct rws_be *be, const char *why)
{
    bool pending = has_client_answer(be) && rs->cur_target == (int)be->idx;

    sl_log_ses_warn(rs->ses, "Closing connection to '%s': %s",
                    sl_server_name(be->srv), why);
    be->diverged = true;
    rws_release_backend(rs, be, true);
    if (pending && !retry_read(rs, be)) {
        rws_send_error(rs, "Lost the connection to '%s': %s",
                       sl_server_name(be->srv), why);
    }
}

static int
any_live_backend(const struct rws_session *rs)
{
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        if (rws_be_live(&rs->be[i])) {
            return (int)i;
        }
    }
    return -1;
}

/* Was the client's pending answer on this connection? */
static bool
has_client_answer(const struct rws_be *be)
{
    for (size_t k = 0; k < be->qlen; k++) {
        if (be->q[(be->qhead + k) % be->qcap].kind == RK_CLIENT) {
            return true;
        }
    }
    return false;
}

static bool
retry_read(struct rws_session *rs, struct rws_be *failed)
{
    struct sl_buf *again = rs->cur;
    int idx;

    if (!rs->inst->cfg.retry_failed_reads || again == NULL ||
        rs->cur_started || !rs->cur_is_read ||
        rs->cur_retries >= rs->inst->nservers) {
        return false;
    }
    rs->cur_retries++;
    idx = rws_slave_index(rs, (int)failed->idx);
    if (idx < 0) {
        idx = rws_master_index(rs, true);
    }
    if (idx < 0) {
        return false;
    }
    rs->cur = NULL;
    sl_log_ses_info(rs->ses, "Retrying a read from '%s' on '%s'",
                    sl_server_name(failed->srv),
                    sl_server_name(rs->be[idx].srv));
    atomic_fetch_add(&rs->inst->retried_reads, 1);
    rs->cur = sl_buf_clone_new(again);
    rs->cur_target = idx;
    rs->last_used = idx;
    sl_server_count_route(rs->be[idx].srv, idx == rs->master);
    if (sl_mdb_command(again) != SL_COM_STMT_FETCH) {
        rws_causal_wait(rs, idx);   /* the new replica proves it too */
    }
    return rws_resend(rs, idx, again) == SL_OK;
}

/*
 * The primary's connection failed before its TCP connect finished (the
 * server died and the monitor has not noticed yet): nothing sent to it
 * reached a server, so the outcome of the pending statement is known.
 */
static bool
never_connected(const struct sl_buf *errpkt, const char *reason)
{
    return errpkt == NULL && reason != NULL &&
           strncmp(reason, SL_BACKEND_CONNECT_FAILED,
                   strlen(SL_BACKEND_CONNECT_FAILED)) == 0;
}

/*
 * A statement outside a transaction that never reached the dead primary
 * goes back to the router: held (delayed_retry) until a primary is
 * usable, then routed as if it had just arrived. A text statement, or a
 * COM_STMT_EXECUTE: rs->cur holds the client's packet (with the client's
 * statement id, rewritten again for the connection it goes to then,
 * which has the session's PREPAREs from its history). false when it
 * cannot be (no hold possible, another command, a transaction to replay
 * instead). A routing hint is not kept: the statement is routed by its
 * text.
 */
static bool
route_unsent(struct rws_session *rs)
{
    struct sl_buf *buf = rs->cur;
    int cmd = buf != NULL ? sl_mdb_command(buf) : -1;

    /* the conditions under which rws_hold holds */
    if (buf == NULL || !rs->inst->cfg.delayed_retry || rs->no_hold ||
        rs->waiting != NULL || rs->trx_active || rs->replaying ||
        rs->cur_started ||
        (cmd != SL_COM_QUERY && cmd != SL_COM_STMT_EXECUTE)) {
        return false;
    }
    rs->cur = NULL;
    sl_log_ses_info(rs->ses, "Primary connection refused before the statement was sent: holding it for a primary");
    return rws_hold(rs, buf, NULL) == SL_OK;
}

/*
 * The answer to the client's statement died with the primary and its
 * outcome cannot be known: the client connection is closed without an
 * answer, so the client's own library reports what a server that died
 * gives, ERROR 2013 (Lost connection to server during query). An ERR
 * packet carrying 2013 would be read by libmariadb as 2027 (malformed
 * packet), and 1927 would say the statement was killed, which it may
 * not have been.
 */
void
rws_close_unanswered(struct rws_session *rs, const char *why)
{
    sl_log_ses_warn(rs->ses, "%s", why);
    sl_session_close(rs->ses, why);
}

/*
 * A statement outside a transaction whose answer the dead primary never
 * sent. A read is sent again elsewhere (retry_failed_reads): 1, the
 * session goes on. A write may have run (its OK was lost, and the GTID
 * it would have carried with it, so nothing tells), so it is never sent
 * again: with fail_on_write the session closes unanswered
 * (rws_close_unanswered): 0. -1: neither (inside a transaction, no read
 * retry possible, or error_on_write).
 */
int
rws_lost_autocommit(struct rws_session *rs)
{
    if (rs->cur == NULL || rs->trx_active || rs->cur_target < 0) {
        return -1;
    }
    if (rs->cur_is_read) {
        return retry_read(rs, &rs->be[rs->cur_target]) ? 1 : -1;
    }
    if (rs->inst->cfg.failure_mode != RWS_FAIL_ON_WRITE) {
        return -1;   /* error_on_write: ERROR 1105, the session goes on */
    }
    rws_close_unanswered(rs, "Primary lost during a write outside a transaction: its outcome is unknown, not retried");
    return 0;
}

bool
rws_handle_error(void *rsession, struct sl_backend *b,
                 const struct sl_buf *errpkt, const char *reason)
{
    struct rws_session *rs = rsession;
    struct rws_be *be = sl_backend_router_data(b);
    bool pending, was_master, ok;

    (void)errpkt;
    if (be == NULL || be->b != b) {
        return true;   /* a connection the router already dropped */
    }
    if (reason != NULL && strncmp(reason, SL_REPLY_LOST_TRACK,
                                  strlen(SL_REPLY_LOST_TRACK)) == 0) {
        /* Not a server failure to retry around: its answers can no longer
         * be told apart, so the session ends (see rws_lost_track). */
        rws_release_backend(rs, be, false);
        rws_lost_track(rs, be, reason);
        return true;
    }
    sl_log_ses_info(rs->ses, "Server '%s' failed: %s",
                    sl_server_name(be->srv), reason ? reason : "unknown");
    pending = has_client_answer(be) && rs->cur_target == (int)be->idx;
    was_master = rs->master == (int)be->idx;
    ok = rws_reassign_sescmds(rs, be);
    rws_release_backend(rs, be, false);   /* the core closes it */
    if (!ok) {
        return false;
    }
    if (sl_session_state(rs->ses) == SL_SESSION_STARTING &&
        (was_master || any_live_backend(rs) < 0) &&
        !(never_connected(errpkt, reason) &&
          rs->inst->cfg.failure_mode != RWS_FAIL_INSTANTLY &&
          any_live_backend(rs) >= 0)) {
        return false;   /* login failed (e.g. unknown database) */
    }
    if (was_master && rs->ntmp > 0 && rs->inst->cfg.strict_tmp_tables) {
        /* strict_tmp_tables: the session's temporary tables died with
         * this connection; it is closed rather than go on without them.
         * An answer the server sent before it closed has been forwarded;
         * a pending statement without one gets the core's error. */
        sl_log_ses_warn(rs->ses, "Primary connection to '%s' lost while the session has temporary tables (strict_tmp_tables): closing the session", sl_server_name(be->srv));
        return false;
    }
    if (was_master && pending && never_connected(errpkt, reason) &&
        route_unsent(rs)) {
        return true;
    }
    if (was_master) {
        return rws_master_failed(rs, pending);
    }
    if (pending && !retry_read(rs, be)) {
        rws_send_error(rs, "Lost connection to server '%s'",
                       sl_server_name(be->srv));
    }
    if (rs->ro_target == (int)be->idx) {
        rs->ro_target = -1;
    }
    return true;
}
