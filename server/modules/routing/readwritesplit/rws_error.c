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
        (was_master || any_live_backend(rs) < 0)) {
        return false;   /* login failed (e.g. unknown database) */
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
