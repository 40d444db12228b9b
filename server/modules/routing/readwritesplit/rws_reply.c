/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's answers and failures.
 *
 * Each connection's FIFO of struct rws_expect says what its next answer
 * is for (rws.h); client_reply pops the head when an answer completes:
 *
 *   RK_CLIENT      to the client; the transaction state is refreshed from
 *                  the server status; a causal_reads write then asks the
 *                  primary for @@last_gtid (RK_LAST_GTID)
 *   RK_SESCMD      to the client if this connection is the command's
 *                  replier; every connection's OK/ERR is compared with the
 *                  replier's and a connection that disagrees is closed
 *   RK_REPLAY      history replayed on a new connection: compared, dropped
 *   RK_GTID_WAIT   MASTER_GTID_WAIT before a causal read: on a timeout
 *                  the read's answer is dropped and the read re-sent to
 *                  the primary
 *   RK_TRX_REPLAY  a replayed transaction statement: SHA1 of its answer
 *                  compared with the original's
 *
 * Failures (handle_error): a replica lost with a read pending re-sends
 * the read elsewhere (retry_failed_reads) if the client has not seen a
 * byte of the answer; a primary lost inside a transaction starts a replay
 * (transaction_replay) once a primary is back; otherwise
 * master_failure_mode decides.
 *
 * Transaction replay:
 *
 *   IDLE --primary lost in trx--> WAITING (timer, delayed_retry_timeout
 *        or what is left of transaction_replay_timeout)
 *   IDLE --1213 from the primary in trx (retry_on_deadlock)--> WAITING
 *   WAITING --a primary is usable--> REPLAYING (statements re-sent one at
 *        a time: the next goes when the last one's answer matched, so a
 *        replay that differs never runs the rest outside the transaction)
 *   REPLAYING --all checksums match--> IDLE (held command routed)
 *   REPLAYING --mismatch, retry_on_mismatch, attempts/time left-->
 *        ROLLBACK sent, WAITING
 *   REPLAYING --mismatch/timeout--> error to the client, session closed
 *
 * transaction_replay_checksum decides which answers are hashed (an answer
 * left out hashes as nothing, on both sides: an OK replayed as an ERR
 * still differs); transaction_replay_safe_commit keeps a COMMIT whose
 * answer was lost from being replayed.
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

/* How often a held command looks for a primary: a switchover's pause
 * seen by clients is at most this longer than the move itself. */
#define RWS_TIMER_MS 50

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

/*
 * The last packet(s) of a write's answer, held until its GTID was
 * published (the service-wide causal_reads modes: no other client may
 * learn of the write before a read of theirs would wait for it), go to
 * the client. `known` false: the GTID was lost (an error, the primary
 * gone), so those modes read from the primary for a while.
 */
static int
held_release(struct rws_session *rs, bool known)
{
    struct sl_buf *held = rs->held;
    /* the write was (or is now) acknowledged without its GTID: the
     * service-wide modes cannot know which replica has it */
    bool lost = !known && (rs->unpublished || (held != NULL && !rs->closing));

    if (rs->unpublished) {   /* an answer that went before its GTID */
        rs->unpublished = false;
        atomic_fetch_sub(&rs->inst->unpublished, 1);
    }
    if (lost) {
        atomic_store(&rs->inst->unknown_until_us,
                     rws_now_us() + RWS_UNKNOWN_GTID_US);
    }
    if (held == NULL) {
        return SL_OK;
    }
    rs->held = NULL;
    if (rs->closing) {   /* never acknowledged */
        sl_buf_free(held);
        return SL_OK;
    }
    return sl_session_reply(rs->ses, held, &rs->held_reply);
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
            held_release(rs, false);
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

static bool has_client_answer(const struct rws_be *be);
static bool retry_read(struct rws_session *rs, struct rws_be *failed);

/* Let go of be's connection: close it when close_it (else the core is
 * closing it), forget the commands queued for it and, if it was the
 * session's master, the master. */
static void
release_backend(struct rws_session *rs, struct rws_be *be, bool close_it)
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
static void
drop_backend(struct rws_session *rs, struct rws_be *be, const char *why)
{
    bool pending = has_client_answer(be) && rs->cur_target == (int)be->idx;

    sl_log_ses_warn(rs->ses, "Closing connection to '%s': %s",
                    sl_server_name(be->srv), why);
    be->diverged = true;
    release_backend(rs, be, true);
    if (pending && !retry_read(rs, be)) {
        rws_send_error(rs, "Lost the connection to '%s': %s",
                       sl_server_name(be->srv), why);
    }
}

/* ---- transaction log ---- */

void
rws_trx_log_clear(struct rws_session *rs)
{
    for (size_t i = 0; i < rs->ntrx; i++) {
        sl_buf_free(rs->trx_log[i].buf);
    }
    rs->ntrx = 0;
    rs->trx_bytes = 0;
    rs->trx_log_ok = false;
}

/* Take the last logged statement back out (it is re-sent after a replay
 * and logged again then). */
static void
trx_log_pop(struct rws_session *rs)
{
    rs->ntrx--;
    rs->trx_bytes -= sl_buf_len(rs->trx_log[rs->ntrx].buf);
    sl_buf_free(rs->trx_log[rs->ntrx].buf);
}

bool
rws_trx_log_add(struct rws_session *rs, const struct sl_buf *buf)
{
    struct rws_trx_stmt *st;

    if (!rs->trx_log_ok) {
        return false;
    }
    rs->trx_bytes += sl_buf_len(buf);
    if (rs->trx_bytes > rs->inst->cfg.trx_replay_max) {
        rws_trx_log_clear(rs);   /* too big: cannot be replayed */
        return false;
    }
    if (rs->ntrx == rs->cap_trx) {
        size_t cap = rs->cap_trx ? rs->cap_trx * 2 : 8;
        struct rws_trx_stmt *n = realloc(rs->trx_log, cap * sizeof(*n));
        if (n == NULL) {
            rws_trx_log_clear(rs);
            return false;
        }
        rs->trx_log = n;
        rs->cap_trx = cap;
    }
    st = &rs->trx_log[rs->ntrx];
    st->buf = sl_buf_clone_new(buf);
    memset(st->sha1, 0, sizeof(st->sha1));
    st->no_cks = rs->inst->cfg.checksum == RWS_CKS_NO_INSERT_ID &&
                 rws_uses_last_insert_id(buf);
    if (st->buf == NULL) {
        rws_trx_log_clear(rs);
        return false;
    }
    rs->ntrx++;
    return true;
}

static void
sha_update(struct rws_session *rs, const struct sl_buf *buf)
{
    if (rs->cks_skip) {
        return;
    }
    for (const struct sl_seg *s = buf->head; s != NULL; s = s->next) {
        EVP_DigestUpdate(rs->sha, s->start, (size_t)(s->end - s->start));
    }
}

/* The first piece of an answer that is checksummed: does it count under
 * transaction_replay_checksum (statement i of the log)? */
static void
cks_begin(struct rws_session *rs, const struct sl_buf *buf,
          const struct sl_reply *reply, size_t i)
{
    const struct sl_seg *s = buf->head;
    bool ok_only = reply->complete && reply->results <= 1 && !reply->is_err &&
                   s != NULL && s->end - s->start > 4 && s->start[4] == 0x00;
    bool lii = i < rs->ntrx && rs->trx_log[i].no_cks;

    rs->cks_skip = !rws_cks_counts(rs->inst->cfg.checksum, ok_only, lii);
    EVP_DigestInit_ex(rs->sha, EVP_sha1(), NULL);
}

/* ---- held commands and the timer ---- */

/* When the wait for a primary to replay on ends: delayed_retry_timeout
 * from now, or what is left of transaction_replay_timeout when set. */
static uint64_t
replay_deadline(const struct rws_session *rs, uint64_t now_ms)
{
    const struct rws_config *c = &rs->inst->cfg;

    if (c->trx_replay_timeout_ms > 0) {
        return rs->replay_start_ms + c->trx_replay_timeout_ms;
    }
    return now_ms + c->delayed_retry_ms;
}

/* transaction_replay_timeout (when set) has passed since the failure:
 * checked between the replayed statements too. */
static bool
replay_timed_out(const struct rws_session *rs)
{
    uint64_t t = rs->inst->cfg.trx_replay_timeout_ms;

    return t > 0 && rws_now_us() / 1000 >= rs->replay_start_ms + t;
}

/* One more replay attempt; the first starts transaction_replay_timeout's
 * clock. */
static void
count_attempt(struct rws_session *rs, uint64_t now_ms)
{
    if (rs->replay_attempts++ == 0) {
        rs->replay_start_ms = now_ms;
    }
}

static void finish_replay(struct rws_session *rs);
static bool start_replay(struct rws_session *rs);
static void replay_send(struct rws_session *rs, int m, size_t i);
static bool replay_again(struct rws_session *rs, bool rollback);

/* Route the held command, if any. */
static int
release_waiting(struct rws_session *rs)
{
    struct sl_buf *buf = rs->waiting;
    struct sl_hint hint = rs->waiting_hint;

    if (buf == NULL) {
        return SL_OK;
    }
    rs->waiting = NULL;
    return rws_route_cmd(rs, buf, &hint);
}

static bool
on_timer(void *arg)
{
    struct rws_session *rs = arg;
    bool expired = rws_now_us() / 1000 >= rs->wait_deadline;
    int rc;

    if (rs->closing) {
        rs->timer = 0;
        return false;
    }
    if (rs->replaying) {
        if (rs->replay_left == 0 && start_replay(rs)) {
            rs->timer = 0;
            return false;
        }
        if (!expired) {
            return true;
        }
        rs->timer = 0;
        rs->replaying = false;
        if (rs->inst->cfg.trx_replay_timeout_ms > 0) {
            rws_send_error(rs, "Transaction replay failed: transaction_replay_timeout exceeded");
        } else {
            rws_send_error(rs, "Transaction replay failed: no master server within delayed_retry_timeout");
        }
        sl_session_close(rs->ses, "transaction replay failed");
        return false;
    }
    if (rs->waiting == NULL) {
        rs->timer = 0;
        return false;
    }
    if (rws_master_index(rs, false) < 0 && !expired) {
        for (unsigned i = 0; i < rs->inst->nservers; i++) {
            if (rws_master_usable(sl_server_status(rs->be[i].srv))) {
                expired = true;   /* a master appeared: try now */
            }
        }
        if (!expired) {
            return true;
        }
    }
    rs->timer = 0;
    /* A master is back, or the last attempt: route without holding. */
    rs->no_hold = rws_now_us() / 1000 >= rs->wait_deadline;
    rc = release_waiting(rs);
    rs->no_hold = false;
    if (rc == SL_ERROR) {
        sl_session_close(rs->ses, "no master for a held write");
    }
    return false;
}

void
rws_start_timer(struct rws_session *rs)
{
    if (rs->timer == 0) {
        rs->timer = sl_worker_add_timer(RWS_TIMER_MS, on_timer, rs);
    }
}

/* ---- transaction replay ---- */

/* Send statement i of the log to connection m, as a replay. */
static void
replay_send(struct rws_session *rs, int m, size_t i)
{
    struct sl_buf *copy = rws_for_backend(rs, m, rs->trx_log[i].buf);
    struct rws_expect e = {.kind = RK_TRX_REPLAY, .index = i};

    if (copy == NULL) {
        rs->replay_failed = true;
        rs->replay_left = 0;
        finish_replay(rs);
        return;
    }
    e.sent_us = rws_now_us();
    rws_push(&rs->be[m], &e);
    atomic_fetch_add_explicit(&rws_count(rs->inst, m)->ops, 1,
                              memory_order_relaxed);
    sl_backend_write(rs->be[m].b, copy);
}

/* A primary is usable again: connect and re-send the transaction. true
 * when the replay started (or failed for good). */
static bool
start_replay(struct rws_session *rs)
{
    int m = rws_master_index(rs, true);

    if (m < 0) {
        return false;
    }
    if (rs->be[m].qlen > 0) {
        /* A new connection replaying the session's history (its
         * PREPAREs): the transaction's executes need their ids. */
        return false;
    }
    sl_log_ses_notice(rs->ses, "Replaying %zu statements of the open transaction on '%s'", rs->ntrx, sl_server_name(rs->be[m].srv));
    rs->trx_srv = m;
    rs->replay_left = rs->ntrx;
    rs->replay_failed = false;
    rs->replay_deadlock = false;
    if (rs->ntrx == 0) {
        finish_replay(rs);
    } else {
        replay_send(rs, m, 0);
    }
    return true;
}

static void
finish_replay(struct rws_session *rs)
{
    const struct rws_config *c = &rs->inst->cfg;

    rs->replaying = false;
    rs->replay_left = 0;
    if (rs->replay_failed) {
        bool retry = rs->replay_deadlock ? c->retry_on_deadlock
                                         : c->retry_on_mismatch;

        if (retry && replay_again(rs, true)) {
            return;
        }
        if (rs->replay_deadlock && !retry) {
            /* as the server would have answered the original */
            sl_session_send_error(rs->ses, 1213, "40001", "Deadlock found when trying to get lock; try restarting transaction");
            sl_log_ses_warn(rs->ses, "Transaction replay failed: deadlock");
        } else {
            rws_send_error(rs, "Transaction replay failed: the replayed results differ from the original ones");
        }
        sl_session_close(rs->ses, "transaction replay checksum mismatch");
        return;
    }
    rs->replay_attempts = 0;   /* as MaxScale: a success resets them */
    atomic_fetch_add(&rs->inst->replayed_trx, 1);
    sl_log_ses_notice(rs->ses, "Transaction replay succeeded");
    if (rs->cur != NULL && !rs->cur_started && rs->cur_is_write) {
        /* The statement interrupted by the failure: send it again; it is
         * already in the log (its checksum is computed now). */
        struct sl_buf *copy = rs->cur;

        rs->cur = NULL;
        rws_route_cmd(rs, copy, &(struct sl_hint){.type = SL_HINT_NONE});
        return;
    }
    release_waiting(rs);
}

static void
replay_answer(struct rws_session *rs, struct rws_expect *e,
              const struct sl_buf *buf, const struct sl_reply *reply)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;

    if (!e->started) {
        cks_begin(rs, buf, reply, e->index);
    }
    sha_update(rs, buf);
    if (!reply->complete) {
        return;
    }
    EVP_DigestFinal_ex(rs->sha, md, &mdlen);
    rs->cks_skip = false;
    if (!rs->replaying || rs->replay_left == 0) {
        return;   /* an attempt given up (its connection failed) */
    }
    if (e->index < rs->ntrx &&
        memcmp(md, rs->trx_log[e->index].sha1, 20) != 0) {
        sl_log_ses_warn(rs->ses, "Replayed statement %zu gave a different result", e->index);
        rs->replay_failed = true;
        rs->replay_deadlock = reply->is_err &&
                              rws_deadlock_error(reply->error_code);
    }
    if (--rs->replay_left == 0 || rs->replay_failed) {
        /* a mismatch: the rest is not sent (after an error the server may
         * have ended the transaction; they would run outside it) */
        rs->replay_left = 0;
        finish_replay(rs);
    } else if (replay_timed_out(rs)) {
        rs->replaying = false;
        rs->replay_left = 0;
        rws_send_error(rs, "Transaction replay failed: transaction_replay_timeout exceeded");
        sl_session_close(rs->ses, "transaction replay failed");
    } else if (rs->trx_srv >= 0) {
        replay_send(rs, rs->trx_srv, e->index + 1);
    }
}

/*
 * Another attempt at replaying the open transaction, if the limits allow
 * (transaction_replay_attempts or _timeout): `rollback`, the transaction
 * may still be open on the primary connection (a replay that differed):
 * a ROLLBACK goes first. The attempt waits for the timer (the current
 * answer is still at the head of the connection's FIFO). false: no
 * attempt left.
 */
static bool
replay_again(struct rws_session *rs, bool rollback)
{
    const struct rws_config *c = &rs->inst->cfg;
    uint64_t now_ms = rws_now_us() / 1000;
    int m = rs->master;

    if (!c->trx_replay || !rs->trx_log_ok || sl_worker_shared_model() ||
        !rws_replay_allowed(c, rs->replay_attempts, rs->replay_start_ms,
                            now_ms)) {
        return false;
    }
    count_attempt(rs, now_ms);
    if (rollback && m >= 0 && rws_be_live(&rs->be[m])) {
        static const unsigned char rb[] = "\x09\x00\x00\x00\x03ROLLBACK";
        struct sl_buf *q = sl_buf_from(rb, sizeof(rb) - 1);

        if (q != NULL) {
            rws_write(rs, (unsigned)m, q, RK_IGNORE, NULL);
        }
    }
    rs->replaying = true;
    rs->replay_failed = false;
    rs->replay_deadlock = false;
    rs->replay_left = 0;
    rs->wait_deadline = replay_deadline(rs, now_ms);
    sl_log_ses_notice(rs->ses, "Replaying the transaction again (attempt %u)", rs->replay_attempts);
    rws_start_timer(rs);
    return true;
}

/* ---- session commands ---- */

static void refresh_trx(struct rws_session *rs, const struct sl_reply *reply);

static int8_t
result_of(const struct sl_reply *reply)
{
    return reply->is_err ? 2 : 1;
}

/* Compare a connection's answer with the replier's; close it if they
 * disagree (it no longer has the session's state). */
static void
check_sescmd(struct rws_session *rs, struct rws_be *be,
             struct rws_sescmd *sc, int8_t res)
{
    if ((int)be->idx == sc->replier) {
        sc->result = res;
        for (unsigned i = 0; i < rs->inst->nservers; i++) {
            if (sc->results[i] != 0 && sc->results[i] != res &&
                rws_be_live(&rs->be[i])) {
                drop_backend(rs, &rs->be[i], "its session command answer differs from the master's");
            }
            sc->results[i] = 0;
        }
        return;
    }
    if (sc->result == 0) {
        sc->results[be->idx] = res;   /* checked when the replier answers */
    } else if (sc->result != res) {
        drop_backend(rs, be, "its session command answer differs from the master's");
    }
}

/* Connections that answered the PREPARE before the replier did, with
 * another parameter count than the one the client was given: closed. */
static void
drop_miscounted(struct rws_session *rs, struct rws_ps *ps, unsigned replier)
{
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        if (i != replier && ps->bids[i] != 0 &&
            ps->bparams[i] != ps->params) {
            ps->bids[i] = 0;
            drop_backend(rs, &rs->be[i], "its prepared statement has another parameter count than the one the client was given");
        }
    }
}

/*
 * A connection's complete PREPARE OK: remember its statement id. The
 * replier's parameter count is the client's and lays out every execute
 * (the NULL bitmap, the saved types); a connection that counts otherwise
 * (another sql_mode, another schema) would be sent executes it cannot
 * read, so it is closed as divergent, whichever answers first.
 */
static void
prepare_ok(struct rws_session *rs, struct rws_be *be, struct rws_ps *ps,
           const struct sl_reply *reply, bool to_client)
{
    if (to_client) {
        ps->params = reply->param_count;
        ps->params_known = true;
        ps->bids[be->idx] = reply->stmt_id;
        drop_miscounted(rs, ps, be->idx);
    } else if (ps->params_known && reply->param_count != ps->params) {
        ps->bids[be->idx] = 0;
        drop_backend(rs, be, "its prepared statement has another parameter count than the one the client was given");
    } else {
        ps->bids[be->idx] = reply->stmt_id;
        ps->bparams[be->idx] = reply->param_count;
    }
}

/* The first packet of a prepare OK carries the statement id: map it and
 * give the client our id instead. */
static void
prepare_answer(struct rws_session *rs, struct rws_be *be,
               struct rws_sescmd *sc, struct sl_buf *buf,
               const struct sl_reply *reply, bool to_client)
{
    struct rws_ps *ps = rws_ps_find(rs, sc->ps_id);
    unsigned char *p;

    if (reply->complete && reply->is_err && be->last_prepare == sc->ps_id) {
        be->last_prepare = 0;   /* "-1" would name an older statement */
    }
    if (ps != NULL && reply->complete && !reply->is_err) {
        prepare_ok(rs, be, ps, reply, to_client);
    }
    if (to_client && ps != NULL && buf != NULL && sl_buf_len(buf) >= 9 &&
        (p = sl_buf_pullup(buf, 9)) != NULL && p[4] == 0x00) {
        sl_mdb_put_le32(p + 5, ps->id);
    }
}

static int
sescmd_answer(struct rws_session *rs, struct rws_be *be,
              struct rws_expect *e, struct sl_buf *buf,
              const struct sl_reply *reply)
{
    struct rws_sescmd *sc = e->sc;
    bool to_client = e->kind == RK_SESCMD && (int)be->idx == sc->replier;
    bool first = !e->started;

    if (sc->cmd == SL_COM_STMT_PREPARE) {
        prepare_answer(rs, be, sc, first ? buf : NULL, reply, to_client);
    }
    if (reply->complete) {
        check_sescmd(rs, be, sc, result_of(reply));
        if (to_client && (int)be->idx == rs->master) {
            refresh_trx(rs, reply);   /* SET autocommit=... */
        }
    }
    if (to_client) {
        return sl_session_reply(rs->ses, buf, reply);
    }
    sl_buf_free(buf);
    return SL_OK;
}

/* ---- causal reads ---- */

static bool
causal_service_wide(enum rws_causal m)
{
    return m == RWS_CAUSAL_GLOBAL || m == RWS_CAUSAL_FAST_GLOBAL ||
           m == RWS_CAUSAL_CONSISTENT;
}

static void
ask_last_gtid(struct rws_session *rs, unsigned idx)
{
    static const char sql[] = "SELECT @@last_gtid";
    struct sl_buf *q = sl_mdb_make_query(sql, sizeof(sql) - 1);

    if (q != NULL && rws_write(rs, idx, q, RK_LAST_GTID, NULL) == SL_OK) {
        rs->gtid_pending = true;
    }
}

/* The single-row, single-column answer's value into out (lenenc string
 * of the row packet: the packet before the terminator). */
static void
parse_single_value(struct sl_buf *all, char *out, size_t outlen)
{
    size_t len = sl_buf_len(all);
    unsigned char *p = len > 0 ? sl_buf_pullup(all, len) : NULL;
    size_t off = 0, prev = 0, prev2 = 0;

    out[0] = '\0';
    if (p == NULL) {
        return;
    }
    while (off + 4 <= len) {
        size_t plen = sl_mdb_get_len(p + off);
        prev2 = prev;
        prev = off;
        off += 4 + plen;
    }
    if (prev2 < len && p[prev2 + 4] != 0xfe && p[prev2 + 4] != 0xff) {
        uint64_t sl = 0;
        size_t plen = sl_mdb_get_len(p + prev2);
        size_t n = sl_mdb_get_lenenc(p + prev2 + 4, plen, &sl);
        if (n > 0 && n + sl <= plen && sl < outlen) {
            memcpy(out, p + prev2 + 4 + n, sl);
            out[sl] = '\0';
        }
    }
}

/*
 * One packet of the answer to a one-value query of the router's own
 * (@@last_gtid, @@gtid_binlog_pos, MASTER_GTID_WAIT), gathered in
 * rs->gtid_buf; buf is consumed. -1 while the answer is incomplete; once
 * complete, 1 with the value in out, or 0 (an error, or no memory) with
 * out untouched.
 */
static int
take_single_value(struct rws_session *rs, struct sl_buf *buf,
                  const struct sl_reply *reply, char *out, size_t outlen)
{
    int got = 0;

    if (rs->gtid_buf == NULL) {
        rs->gtid_buf = sl_buf_new();
    }
    if (rs->gtid_buf != NULL) {
        sl_buf_append(rs->gtid_buf, buf);
    }
    sl_buf_free(buf);
    if (!reply->complete) {
        return -1;
    }
    if (rs->gtid_buf != NULL && !reply->is_err) {
        parse_single_value(rs->gtid_buf, out, outlen);
        got = 1;
    }
    sl_buf_free(rs->gtid_buf);
    rs->gtid_buf = NULL;
    return got;
}

static void
gtid_answer(struct rws_session *rs, struct sl_buf *buf,
            const struct sl_reply *reply)
{
    char g[64] = "";
    int got = take_single_value(rs, buf, reply, g, sizeof(g));

    if (got < 0) {
        return;
    }
    rs->gtid_unknown = true;   /* read_your_writes: primary only */
    if (got > 0) {
        if (strspn(g, "0123456789-,") == strlen(g)) {
            rs->gtid_unknown = false;   /* "": the session has none */
        }
        if (g[0] != '\0' && !rs->gtid_unknown) {
            memcpy(rs->gtid, g, sizeof(g));
            if (causal_service_wide(rs->inst->cfg.causal)) {
                rws_publish(rs->inst, g);
            }
        }
    }
    rs->gtid_pending = false;
    if (held_release(rs, !rs->gtid_unknown) != SL_OK) {
        return;
    }
    if (!rs->replaying) {
        release_waiting(rs);
    }
}

/* A universal read's position: the primary's @@gtid_binlog_pos. */
static void
primary_pos_answer(struct rws_session *rs, struct sl_buf *buf,
                   const struct sl_reply *reply)
{
    char g[RWS_DOMAINS * 44 + 64] = "";

    if (take_single_value(rs, buf, reply, g, sizeof(g)) < 0) {
        return;
    }
    /* a malformed answer or a domain without a slot: the primary reads */
    rs->req_primary = reply->is_err ||
                      !rws_pos_parse(rs->inst, g, &rs->req, true);
    rs->pos_ready = true;
    if (!rs->replaying) {
        release_waiting(rs);
    }
}

/* Errors that end a statement because someone stopped it, whatever the
 * data: KILL QUERY (1317), KILL CONNECTION (1927), max_statement_time
 * (1969), MySQL's max_execution_time (3024). */
static bool
interrupted(uint16_t code)
{
    return code == 1317 || code == 1927 || code == 1969 || code == 3024;
}

static void
wait_answer(struct rws_session *rs, struct rws_be *be, struct sl_buf *buf,
            const struct sl_reply *reply)
{
    char v[32] = "";

    if (reply->complete && reply->is_err && interrupted(reply->error_code)) {
        /* a KILL QUERY for the client's read met its wait first */
        rs->causal_killed = true;
    }
    if (take_single_value(rs, buf, reply, v, sizeof(v)) < 0) {
        return;
    }
    if (strcmp(v, "0") != 0) {
        rs->causal_failed = true;   /* the read's answer is stale */
        atomic_fetch_add(&rs->inst->causal_fallbacks, 1);
    } else if (rs->waits_pending == 1 && rs->waited_on == (int)be->idx) {
        /* the replica has applied wait_pos: later reads needing no more
         * skip the wait (any session of the service) */
        rws_known_learn(rs->inst, be->idx, &rs->wait_pos);
    }
    if (rs->waits_pending > 0) {
        rs->waits_pending--;
    }
}

/* ---- the client's answers ---- */

static void
refresh_trx(struct rws_session *rs, const struct sl_reply *reply)
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

static bool master_failed(struct rws_session *rs, bool pending);

/* Close the session's master connection (the switchover demoted its
 * server; an open transaction there is rolled back by the server). */
static void
close_master(struct rws_session *rs, struct rws_be *be)
{
    sl_log_ses_info(rs->ses,
                    "Closing the connection to '%s': the primary moved",
                    sl_server_name(be->srv));
    release_backend(rs, be, true);
}

static bool
replay_possible(const struct rws_session *rs)
{
    const struct rws_config *c = &rs->inst->cfg;

    return c->trx_replay && rs->trx_log_ok && !rs->replaying &&
           rws_replay_allowed(c, rs->replay_attempts, rs->replay_start_ms,
                              rws_now_us() / 1000) &&
           !sl_worker_shared_model();
}

/*
 * An ERR 1290 (--read-only) or 1836 (read-only mode) from the session's
 * primary after a switchover began demoting it (its status is no longer
 * a usable Master): the statement did not run (read_only refuses before
 * executing; the client has seen nothing of the answer), so the client
 * never sees the error. Outside a transaction the statement is held and
 * sent to the new primary; inside one the transaction is replayed there
 * first (transaction_replay), else the error goes to the client. true:
 * the error is dropped.
 */
static bool
read_only_refusal(struct rws_session *rs, struct rws_be *be,
                  const struct sl_reply *reply)
{
    uint32_t st = sl_server_status(be->srv);

    if ((reply->error_code != 1290 && reply->error_code != 1836) ||
        (int)be->idx != rs->master || rs->cur == NULL || rs->cur_started ||
        rs->waiting != NULL || sl_worker_shared_model() ||
        !(st & SL_SRV_RUNNING) || rws_master_usable(st) ||
        (!(st & SL_SRV_MOVING) && !rws_primary_moving(rs->inst) &&
         !(st & SL_SRV_SLAVE))) {
        return false;
    }
    if (rs->trx_active && !rs->trx_ro) {
        if (!replay_possible(rs)) {
            return false;
        }
        sl_log_ses_notice(rs->ses, "The primary '%s' refused a write in a transaction while moving: replaying it on the new primary", sl_server_name(be->srv));
        close_master(rs, be);
        return master_failed(rs, true);
    }
    sl_log_ses_info(rs->ses, "The primary '%s' refused a write while moving: holding it for the new primary", sl_server_name(be->srv));
    rs->waiting = rs->cur;
    rs->waiting_hint = (struct sl_hint){.type = 0};
    rs->cur = NULL;
    rs->cur_target = -1;
    rs->wait_deadline = rws_now_us() / 1000 + rs->inst->cfg.delayed_retry_ms;
    rws_start_timer(rs);
    return true;
}

/*
 * transaction_replay_retry_on_deadlock: the primary rolled the open
 * transaction back for a deadlock (the connection is fine). The client
 * does not see the error: the transaction is replayed (on the same
 * connection, once the error's answer is popped) and the statement that
 * met the deadlock sent again after it. true: the error is dropped.
 */
static bool
deadlock_retry(struct rws_session *rs, struct rws_be *be,
               const struct sl_reply *reply)
{
    const struct rws_config *c = &rs->inst->cfg;

    if (!c->retry_on_deadlock || !rws_deadlock_error(reply->error_code) ||
        (int)be->idx != rs->master || !rs->trx_active || rs->trx_ro ||
        rs->replaying || rs->cur == NULL || !rs->cur_is_write ||
        rs->ntrx == 0 || !replay_possible(rs)) {
        return false;
    }
    sl_log_ses_notice(rs->ses, "Deadlock (1213) on '%s' inside a transaction: replaying it", sl_server_name(be->srv));
    /* The statement that met the deadlock is re-sent after the replay
     * (and logged again then), not replayed. */
    trx_log_pop(rs);
    return replay_again(rs, false);
}

static int
client_answer(struct rws_session *rs, struct rws_be *be, struct rws_expect *e,
              struct sl_buf *buf, const struct sl_reply *reply)
{
    bool logging = rs->inst->cfg.trx_replay && (int)be->idx == rs->master &&
                   rs->trx_log_ok && rs->ntrx > 0 && rs->cur_is_write;
    int rc;

    if (rs->causal_failed && (int)be->idx != rs->master &&
        !e->started && reply->complete && reply->is_err &&
        interrupted(reply->error_code)) {
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
            if (again == NULL || m < 0 ||
                rws_resend(rs, m, again) != SL_OK) {
                rws_send_error(rs, "Causal read failed: no master");
            } else {
                rs->cur_target = m;
            }
        }
        return SL_OK;
    }
    if (reply->is_err && !e->started && read_only_refusal(rs, be, reply)) {
        sl_buf_free(buf);
        return SL_OK;
    }
    if (reply->is_err && !e->started && reply->complete &&
        deadlock_retry(rs, be, reply)) {
        sl_buf_free(buf);
        return SL_OK;
    }
    if (logging) {
        if (!e->started) {
            cks_begin(rs, buf, reply, rs->ntrx - 1);
        }
        sha_update(rs, buf);
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
            refresh_trx(rs, reply);
        }
        sl_buf_free(rs->cur);
        rs->cur = NULL;
        rs->cur_target = -1;
        if (wrote && rs->wrote && rs->inst->cfg.causal != RWS_CAUSAL_NONE &&
            trx_over(rs, reply) && !reply->is_err && !rs->cur_pure_read) {
            rs->wrote = false;
            ask_last_gtid(rs, be->idx);
            if (rs->gtid_pending && causal_service_wide(rs->inst->cfg.causal)) {
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

    /* Not in the shared event model: the timer would read the session
     * unlocked from another worker, and after it was freed (found by
     * test_kill's shared-model sessions: a crash). docs/modules.md. */
    if (rs->watch != 0 || ms == 0 || rs->closing || sl_worker_shared_model()) {
        return;
    }
    /* Checked four times per period, at most every 5 s, at least every
     * 100 ms: a quiet server is noticed within 1.25 periods. */
    ms /= 4;
    ms = ms < 100 ? 100 : ms > 5000 ? 5000 : ms;
    rs->watch = sl_worker_add_timer(ms, on_watch, rs);
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
        rc = sescmd_answer(rs, be, e, buf, reply);
        break;
    case RK_LAST_GTID:
        gtid_answer(rs, buf, reply);
        break;
    case RK_GTID_WAIT:
        wait_answer(rs, be, buf, reply);
        break;
    case RK_PRIMARY_POS:
        primary_pos_answer(rs, buf, reply);
        break;
    case RK_TRX_REPLAY:
        replay_answer(rs, e, buf, reply);
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

/* ---- failures ---- */

/* A session command whose replier failed: another connection answers. */
static bool
reassign_sescmds(struct rws_session *rs, struct rws_be *failed)
{
    bool ok = true;

    for (size_t k = 0; k < failed->qlen; k++) {
        struct rws_expect *e = &failed->q[(failed->qhead + k) % failed->qcap];
        struct rws_sescmd *sc = e->sc;

        if (e->kind != RK_SESCMD || sc->replier != (int)failed->idx) {
            continue;
        }
        if (e->started) {
            return false;   /* the client has part of its answer */
        }
        sc->replier = -1;
        for (unsigned i = 0; i < rs->inst->nservers && sc->replier < 0;
             i++) {
            struct rws_be *o = &rs->be[i];
            for (size_t j = 0; o != failed && rws_be_live(o) && j < o->qlen;
                 j++) {
                if (o->q[(o->qhead + j) % o->qcap].sc == sc) {
                    sc->replier = (int)i;
                }
            }
        }
        ok = ok && sc->replier >= 0;
    }
    return ok;
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
 * A text statement outside a transaction that never reached the dead
 * primary goes back to the router: held (delayed_retry) until a primary
 * is usable, then routed as if it had just arrived. false when it cannot
 * be (no hold possible, a prepared statement's packet rewritten for that
 * connection, a transaction to replay instead). A routing hint is not
 * kept: the statement is routed by its text.
 */
static bool
route_unsent(struct rws_session *rs)
{
    struct sl_buf *buf = rs->cur;

    /* (the conditions under which rws_hold holds; and, as for the other
     * holds, not in event_model=shared: its timer is not safe there) */
    if (buf == NULL || !rs->inst->cfg.delayed_retry || rs->no_hold ||
        rs->waiting != NULL || sl_worker_shared_model() || rs->trx_active ||
        rs->replaying || rs->cur_started ||
        sl_mdb_command(buf) != SL_COM_QUERY) {
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
static void
close_unanswered(struct rws_session *rs, const char *why)
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
 * (close_unanswered): 0. -1: neither (inside a transaction, no read retry
 * possible, or error_on_write).
 */
static int
lost_autocommit(struct rws_session *rs)
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
    close_unanswered(rs, "Primary lost during a write outside a transaction: its outcome is unknown, not retried");
    return 0;
}

static bool
master_failed(struct rws_session *rs, bool pending)
{
    const struct rws_config *c = &rs->inst->cfg;

    if (rs->replaying) {
        /* The new primary's connection failed too (the monitor has not
         * noticed yet): the same attempt goes on waiting. */
        rs->replay_left = 0;
        rs->replay_failed = false;
        rws_start_timer(rs);
        return true;
    }
    if (pending && rs->cur != NULL && c->trx_replay && c->safe_commit &&
        rs->trx_active && !rs->trx_ro && rws_is_commit(rs->cur)) {
        /* transaction_replay_safe_commit: the COMMIT may have committed;
         * replaying it could commit the transaction twice */
        close_unanswered(rs, "Primary lost during COMMIT: the transaction's outcome is unknown, not replayed (transaction_replay_safe_commit)");
        return true;
    }
    if (c->trx_replay && rs->trx_active && !rs->trx_ro && rs->trx_log_ok &&
        rws_replay_allowed(c, rs->replay_attempts, rs->replay_start_ms,
                           rws_now_us() / 1000) &&
        (!pending || !rs->cur_started)) {
        count_attempt(rs, rws_now_us() / 1000);
        rs->replaying = true;
        if (pending && rs->cur != NULL && rs->ntrx > 0) {
            /* The interrupted statement is re-sent after the replay (and
             * logged again then), not replayed. */
            trx_log_pop(rs);
        }
        rs->replay_failed = false;
        rs->replay_deadlock = false;
        rs->replay_left = 0;
        rs->wait_deadline = replay_deadline(rs, rws_now_us() / 1000);
        sl_log_ses_notice(rs->ses, "Master lost inside a transaction: waiting to replay it");
        rws_start_timer(rs);
        return true;
    }
    if (c->failure_mode == RWS_FAIL_INSTANTLY) {
        return false;
    }
    if (pending && lost_autocommit(rs) >= 0) {
        return true;   /* read re-sent, or the session closed */
    }
    if (pending) {
        rws_send_error(rs, "Lost connection to the master server");
        return c->failure_mode == RWS_ERROR_ON_WRITE;
    }
    return true;
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
        release_backend(rs, be, false);
        rws_lost_track(rs, be, reason);
        return true;
    }
    sl_log_ses_info(rs->ses, "Server '%s' failed: %s",
                    sl_server_name(be->srv), reason ? reason : "unknown");
    pending = has_client_answer(be) && rs->cur_target == (int)be->idx;
    was_master = rs->master == (int)be->idx;
    ok = reassign_sescmds(rs, be);
    release_backend(rs, be, false);   /* the core closes it */
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
    if (was_master && pending && never_connected(errpkt, reason) &&
        route_unsent(rs)) {
        return true;
    }
    if (was_master) {
        return master_failed(rs, pending);
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
