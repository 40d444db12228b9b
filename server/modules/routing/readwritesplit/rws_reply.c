/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's answers: client_reply.
 *
 * Each connection's FIFO of struct rws_expect says what its next answer
 * is for (rws.h); client_reply hands each piece of an answer to the unit
 * that owns its kind and pops the head when the answer completes:
 *
 *   RK_CLIENT      here: to the client; the transaction state is refreshed
 *                  from the server status; a causal_reads write then asks
 *                  the primary for @@last_gtid (RK_LAST_GTID); a
 *                  transaction's answers are checksummed for a replay
 *   RK_SESCMD      rws_sescmd.c: to the client if this connection is the
 *                  command's replier; every connection's OK/ERR is
 *                  compared with the replier's and one that disagrees is
 *                  closed (a PREPARE's ids are mapped in rws_ps.c)
 *   RK_REPLAY      history replayed on a new connection: compared, dropped
 *   RK_LAST_GTID, RK_GTID_WAIT, RK_PRIMARY_POS  rws_gtid.c: causal_reads'
 *                  own queries; on a wait's timeout the read's answer is
 *                  dropped here and the read re-sent to the primary
 *   RK_TRX_REPLAY  rws_trx.c: a replayed transaction statement, its SHA1
 *                  compared with the original's
 *
 * Also here: the safety net (an answer nobody asked for, a server quiet
 * past reply_timeout: the session ends with an error naming why).
 * Failures of connections are in rws_error.c, transaction replay in
 * rws_trx.c.
 *
 * Context: worker-owned.
 */
#define SL_LOG_TAG "readwritesplit"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/server.h>
#include <sluice/session.h>
#include <sluice/worker.h>

#include "rws.h"

static struct rws_expect *
head(struct rws_be *be)
{
    return be->qlen > 0 ? &be->q[be->qhead] : NULL;
}

static void
pop(struct rws_session *rs, struct rws_be *be)
{
    struct rws_expect *e = head(be);
    struct rws_srv_stats *s = &rs->inst->stats[be->idx];

    if (e == NULL) {
        return;
    }
    /* Timings are sampled (1 answer in 8): the shared average is a
     * contended cache line on the hot path. */
    if (e->sent_us != 0 && (rs->samples++ & 7) == 0) {
        uint64_t t = rws_now_us() - e->sent_us;
        uint64_t avg = atomic_load_explicit(&s->resp_us,
                                            memory_order_relaxed);
        atomic_store_explicit(&s->resp_us, avg ? (avg * 7 + t) / 8 : t,
                              memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&rws_count(rs->inst, be->idx)->ops, 1,
                              memory_order_relaxed);
    rws_sescmd_unref(rs, e->sc);
    be->qhead = (be->qhead + 1) % be->qcap;
    be->qlen--;
}

/* Answers for the client behind the head of be's FIFO, or on another
 * connection: commands the client sent after the one being answered. */
static bool
later_answers(const struct rws_session *rs, const struct rws_be *be)
{
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        const struct rws_be *o = &rs->be[i];

        for (size_t k = o == be ? 1 : 0; k < o->qlen; k++) {
            uint8_t kind = o->q[(o->qhead + k) % o->qcap].kind;
            if (kind == RK_CLIENT || kind == RK_SESCMD) {
                return true;
            }
        }
    }
    return false;
}

void
rws_queue_clear(struct rws_session *rs, struct rws_be *be)
{
    while (be->qlen > 0) {
        struct rws_expect *e = head(be);
        e->sent_us = 0;
        if (e->kind == RK_LAST_GTID) {
            /* the write's GTID will not come: only the primary is safe */
            rs->gtid_pending = false;
            rs->gtid_unknown = true;
            sl_buf_free(rs->gtid_buf);
            rs->gtid_buf = NULL;
            rws_held_release(rs, false);
        } else if (e->kind == RK_PRIMARY_POS) {
            /* a universal read's position will not come: primary only */
            sl_buf_free(rs->gtid_buf);
            rs->gtid_buf = NULL;
            rs->pos_ready = true;
            rs->req_primary = true;
            memset(&rs->req, 0, sizeof(rs->req));
            if (rs->waiting != NULL && !rs->closing) {
                rs->wait_deadline = rws_now_us() / 1000;
                rws_start_timer(rs);   /* routes it (or fails it) */
            }
        } else if (e->kind == RK_GTID_WAIT && rs->waits_pending > 0) {
            rs->waits_pending--;
        }
        pop(rs, be);
    }
    be->qhead = 0;
}

/* ---- the client's answers ---- */

void
rws_refresh_trx(struct rws_session *rs, const struct sl_reply *reply)
{
    uint16_t st = reply->server_status;

    if ((reply->command != SL_COM_QUERY &&
         reply->command != SL_COM_STMT_EXECUTE) ||
        !(reply->is_ok || reply->state == SL_REPLY_DONE) || reply->is_err) {
        return;   /* only OK and EOF packets carry the status */
    }
    rs->autocommit = (st & SL_SERVER_STATUS_AUTOCOMMIT) != 0;
    if (rs->autocommit && !(st & SL_SERVER_STATUS_IN_TRANS)) {
        if (rs->trx_active) {
            rs->trx_active = false;
            rs->trx_ro = false;
            rs->ro_target = -1;
            rs->trx_srv = -1;
            rws_trx_log_clear(rs);
        }
    } else if (!rs->trx_active) {
        /* autocommit=0, or a transaction the classifier did not see
         * (BEGIN inside a procedure): the server says one is open. */
        rs->trx_active = true;
        rs->trx_srv = rs->cur_target;
        rws_trx_log_clear(rs);
        rs->trx_log_ok = true;
    }
}

/* No transaction open after this answer: the writes so far are committed
 * (autocommit=0 too, where the router keeps trx_active: the server's
 * status says when a COMMIT ended one). */
static bool
trx_over(const struct rws_session *rs, const struct sl_reply *reply)
{
    if (!rs->trx_active) {
        return true;
    }
    return !rs->autocommit &&
           (reply->command == SL_COM_QUERY ||
            reply->command == SL_COM_STMT_EXECUTE) &&
           (reply->is_ok || reply->state == SL_REPLY_DONE) &&
           !(reply->server_status & SL_SERVER_STATUS_IN_TRANS);
}

static int
client_answer(struct rws_session *rs, struct rws_be *be, struct rws_expect *e,
              struct sl_buf *buf, const struct sl_reply *reply)
{
    bool logging = rs->trx_log_ok && rs->ntrx > 0 &&
                   ((rs->inst->cfg.trx_replay &&
                     (int)be->idx == rs->master && rs->cur_is_write) ||
                    (rws_optimistic(rs) && (int)be->idx == rs->ro_target));
    int rc;

    if (rs->causal_failed && (int)be->idx != rs->master &&
        !e->started && reply->complete && reply->is_err &&
        rws_interrupted(reply->error_code)) {
        /* The read was stale, but it did not run to the end: the client
         * (or max_statement_time) interrupted it. Its answer is the
         * client's, not a reason to run the statement again on the
         * primary, where the KILL QUERY already passed. */
        rs->causal_failed = false;
        rs->causal_killed = false;
    }
    if (rs->causal_failed && (int)be->idx != rs->master) {
        sl_buf_free(buf);
        if (reply->complete) {
            struct sl_buf *again = rs->cur;
            int m;

            rs->causal_failed = false;
            rs->cur = NULL;
            if (rs->causal_killed) {
                /* killed while it waited: interrupted, as the server
                 * would have answered, never run again on the primary */
                rs->causal_killed = false;
                sl_buf_free(again);
                rs->cur_target = -1;
                sl_session_send_error(rs->ses, 1317, "70100",
                                      "Query execution was interrupted");
                return SL_OK;
            }
            m = rws_master_index(rs, true);
            if (again != NULL && m >= 0 && rws_optimistic(rs) &&
                rs->ntrx == 1 && (int)be->idx == rs->ro_target) {
                /* optimistic_trx: the replica has not got the writes the
                 * transaction must see. Its BEGIN there is rolled back
                 * and the transaction runs on the primary from the
                 * start (logged there for transaction_replay). */
                static const unsigned char rb[] =
                    "\x09\x00\x00\x00\x03ROLLBACK";
                struct sl_buf *q = sl_buf_from(rb, sizeof(rb) - 1);

                if (q != NULL) {   /* else the next BEGIN ends it */
                    rws_write(rs, be->idx, q, RK_IGNORE, NULL);
                }
                rs->optimistic = false;
                rs->trx_ro = false;
                rs->ro_target = -1;
                rs->trx_srv = -1;
                rws_trx_log_clear(rs);
                rs->trx_log_ok = true;
                return rws_route_to(rs, m, again, true);
            }
            if (again == NULL || m < 0 ||
                rws_resend(rs, m, again) != SL_OK) {
                rws_send_error(rs, "Causal read failed: no master");
            } else {
                rs->cur_target = m;
            }
        }
        return SL_OK;
    }
    if (reply->is_err && !e->started && rws_read_only_refusal(rs, be, reply)) {
        sl_buf_free(buf);
        return SL_OK;
    }
    if (reply->is_err && !e->started && reply->complete &&
        rws_deadlock_retry(rs, be, reply)) {
        sl_buf_free(buf);
        return SL_OK;
    }
    if (logging) {
        if (!e->started) {
            rws_cks_begin(rs, buf, reply, rs->ntrx - 1);
        }
        rws_sha_update(rs, buf);
        rws_diag_keep(&rs->trx_log[rs->ntrx - 1].answer, buf, !e->started);
        if (reply->complete) {
            unsigned mdlen;
            EVP_DigestFinal_ex(rs->sha, rs->trx_log[rs->ntrx - 1].sha1,
                               &mdlen);
            rs->cks_skip = false;
        }
    }
    rs->cur_started = true;
    if (reply->state == SL_REPLY_LOAD_DATA && !reply->complete) {
        /* The server asked for a LOCAL INFILE: the client's next packets
         * are the file, for this connection only (see route_query). */
        rs->load_target = (int)be->idx;
    }
    if (reply->complete) {
        bool wrote = (int)be->idx == rs->master && rs->cur_is_write;

        if (rs->trx_active || (int)be->idx == rs->master) {
            rws_refresh_trx(rs, reply);
        }
        sl_buf_free(rs->cur);
        rs->cur = NULL;
        rs->cur_target = -1;
        if (wrote && rs->wrote && rs->inst->cfg.causal != RWS_CAUSAL_NONE &&
            trx_over(rs, reply) && !reply->is_err && !rs->cur_pure_read) {
            rs->wrote = false;
            rws_ask_last_gtid(rs, be->idx);
            if (rs->gtid_pending &&
                rws_causal_service_wide(rs->inst->cfg.causal)) {
                if (rs->held == NULL && !later_answers(rs, be)) {
                    /* acknowledged only once its GTID is published */
                    rs->held = buf;
                    rs->held_reply = *reply;
                    return SL_OK;
                }
                /* A pipelining client's next answers are already on
                 * their way and must not overtake this one: it goes now,
                 * and until its GTID is published the service's reads go
                 * to the primary. */
                if (!rs->unpublished) {
                    rs->unpublished = true;
                    atomic_fetch_add(&rs->inst->unpublished, 1);
                }
            }
        }
    }
    rc = sl_session_reply(rs->ses, buf, reply);
    return rc;
}

/* ---- the safety net ---- */

static const char *
cmd_name(uint8_t cmd)
{
    switch (cmd) {
    case SL_COM_QUERY: return "COM_QUERY";
    case SL_COM_STMT_PREPARE: return "COM_STMT_PREPARE";
    case SL_COM_STMT_EXECUTE: return "COM_STMT_EXECUTE";
    case SL_COM_STMT_FETCH: return "COM_STMT_FETCH";
    case SL_COM_STMT_SEND_LONG_DATA: return "COM_STMT_SEND_LONG_DATA";
    case SL_COM_STMT_RESET: return "COM_STMT_RESET";
    case SL_COM_INIT_DB: return "COM_INIT_DB";
    case SL_COM_CHANGE_USER: return "COM_CHANGE_USER";
    case SL_COM_PING: return "COM_PING";
    default: return "command";
    }
}

void
rws_lost_track(struct rws_session *rs, struct rws_be *be, const char *why)
{
    char stmt[sizeof(rs->last_stmt) * 4 + 1];
    size_t n = 0;

    if (rs->closing || sl_session_state(rs->ses) == SL_SESSION_CLOSING) {
        return;
    }
    /* The statement's first bytes, printable (a binary execute, a file
     * packet): \xNN for the rest. */
    for (size_t i = 0; i < rs->last_len && i < sizeof(rs->last_stmt); i++) {
        unsigned char c = (unsigned char)rs->last_stmt[i];

        if (c >= 0x20 && c < 0x7f && c != '\\') {
            stmt[n++] = (char)c;
        } else {
            n += (size_t)snprintf(stmt + n, sizeof(stmt) - n, "\\x%02x", c);
        }
    }
    stmt[n] = '\0';
    sl_log_ses_error(rs->ses, "Server '%s': %s; the client's last %s "
                     "began '%s'; closing the session",
                     sl_server_name(be->srv), why, cmd_name(rs->last_cmd),
                     stmt);
    sl_session_send_error(rs->ses, RWS_ERR_CODE, RWS_ERR_STATE, why);
    sl_session_close(rs->ses, why);
}

/* The answer the client waits for: its own, or a session command's whose
 * replier this connection is. */
static bool
client_waits_on(const struct rws_be *be)
{
    for (size_t k = 0; k < be->qlen; k++) {
        const struct rws_expect *e = &be->q[(be->qhead + k) % be->qcap];

        if (e->kind == RK_CLIENT ||
            (e->kind == RK_SESCMD && e->sc->replier == (int)be->idx)) {
            return true;
        }
    }
    return false;
}

static bool
on_watch(void *arg)
{
    struct rws_session *rs = arg;
    uint64_t now = sl_worker_now_ms();
    uint64_t limit = rs->inst->cfg.reply_timeout_ms;
    bool pending = false;

    if (rs->closing) {
        rs->watch = 0;
        return false;
    }
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        struct rws_be *be = &rs->be[i];
        uint64_t since;
        char why[200];

        if (!rws_be_live(be) || be->qlen == 0) {
            continue;
        }
        pending = true;
        since = be->q[be->qhead].sent_us / 1000;
        if (be->last_rx_ms > since) {
            since = be->last_rx_ms;
        }
        if (now < since + limit || !client_waits_on(be)) {
            continue;
        }
        snprintf(why, sizeof(why), "Server '%s' sent nothing for %llu ms "
                 "while the client waited for its answer (reply_timeout)",
                 sl_server_name(be->srv), (unsigned long long)(now - since));
        rs->watch = 0;
        rws_lost_track(rs, be, why);
        return false;
    }
    if (!pending) {
        rs->watch = 0;   /* started again by the next command */
    }
    return pending;
}

void
rws_watch_start(struct rws_session *rs)
{
    uint64_t ms = rs->inst->cfg.reply_timeout_ms;

    /* A session timer: under the session's lock in the shared event
     * model, and the session cannot be freed under it (a plain worker
     * timer could do both: a crash in test_kill's shared-model run). */
    if (rs->watch != 0 || ms == 0 || rs->closing) {
        return;
    }
    /* Checked four times per period, at most every 5 s, at least every
     * 100 ms: a quiet server is noticed within 1.25 periods. */
    ms /= 4;
    ms = ms < 100 ? 100 : ms > 5000 ? 5000 : ms;
    rs->watch = sl_session_add_timer(rs->ses, ms, on_watch, rs);
}

int
rws_client_reply(void *rsession, struct sl_backend *b, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    struct rws_session *rs = rsession;
    struct rws_be *be = sl_backend_router_data(b);
    struct rws_expect *e;
    int rc = SL_OK;

    if (be == NULL || be->b != b) {
        sl_buf_free(buf);   /* a connection already given up */
        return SL_OK;
    }
    be->last_rx_ms = sl_worker_now_ms();
    if ((e = head(be)) == NULL || reply->command == 0) {
        /* The protocol's tracker saw a packet no command asked for
         * (command 0), or it did and this FIFO did not: from here on
         * nobody knows which answer is which. An error packet alone is
         * the server saying goodbye (1927 on shutdown, a timeout): the
         * connection's close follows and handle_error deals with it. */
        bool goodbye = reply->command == 0 && reply->is_err;

        sl_buf_free(buf);
        if (goodbye) {
            sl_log_ses_info(rs->ses, "Server '%s' sent error %u unasked",
                            sl_server_name(be->srv), reply->error_code);
            return SL_OK;
        }
        rws_lost_track(rs, be, e == NULL
            ? SL_REPLY_LOST_TRACK ": it sent data no command asked for"
            : SL_REPLY_LOST_TRACK ": its protocol tracker saw data no "
              "command asked for");
        return SL_OK;
    }
    switch (e->kind) {
    case RK_CLIENT:
        rc = client_answer(rs, be, e, buf, reply);
        break;
    case RK_SESCMD:
    case RK_REPLAY:
        rc = rws_sescmd_answer(rs, be, e, buf, reply);
        break;
    case RK_LAST_GTID:
        rws_gtid_answer(rs, buf, reply);
        break;
    case RK_GTID_WAIT:
        rws_wait_answer(rs, be, buf, reply);
        break;
    case RK_PRIMARY_POS:
        rws_primary_pos_answer(rs, buf, reply);
        break;
    case RK_TRX_REPLAY:
        rws_replay_answer(rs, e, buf, reply);
        sl_buf_free(buf);
        break;
    default:
        sl_buf_free(buf);
        break;
    }
    /* The answer may have closed this connection (a divergent session
     * command), which already emptied its FIFO. */
    if (be->b == b && (e = head(be)) != NULL) {
        e->started = true;
        if (reply->complete) {
            pop(rs, be);
        }
    }
    return rc;
}
