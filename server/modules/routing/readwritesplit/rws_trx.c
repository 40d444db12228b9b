/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's transaction_replay, and the session timer that routes
 * held commands.
 *
 * While a read-write transaction is open its statements are logged
 * (clones, no copies) with a SHA1 of each answer (rws_trx_log_add,
 * rws_cks_begin, rws_sha_update). What starts a replay: the primary lost
 * inside the transaction (rws_master_failed, from rws_error.c), a
 * read-only refusal of a primary a switchover is demoting
 * (rws_read_only_refusal), a deadlock (rws_deadlock_retry).
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
 * answer was lost from being replayed. The pure decisions (budget,
 * deadlock codes, checksum membership) are in rws_replay.c.
 *
 * The same 50 ms session timer (on_timer) releases a command held for a
 * primary (rws_hold: delayed_retry, a switchover) or for a causal
 * position.
 *
 * Context: worker-owned.
 */
#define SL_LOG_TAG "readwritesplit"

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

/* Longest a COMMIT or autocommit write waits at the replay barrier. */
#define RWS_BARRIER_MS 1000

/* ---- transaction log ---- */

void
rws_trx_log_clear(struct rws_session *rs)
{
    for (size_t i = 0; i < rs->ntrx; i++) {
        sl_buf_free(rs->trx_log[i].buf);
        sl_buf_free(rs->trx_log[i].answer);
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
    sl_buf_free(rs->trx_log[rs->ntrx].answer);
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
    st->answer = NULL;
    st->no_cks = rs->inst->cfg.checksum == RWS_CKS_NO_INSERT_ID &&
                 rws_uses_last_insert_id(buf);
    if (st->buf == NULL) {
        rws_trx_log_clear(rs);
        return false;
    }
    rs->ntrx++;
    return true;
}

void
rws_sha_update(struct rws_session *rs, const struct sl_buf *buf)
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
void
rws_cks_begin(struct rws_session *rs, const struct sl_buf *buf,
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

/*
 * A replay that hid a deadlock (transaction_replay_retry_on_deadlock)
 * cannot go on: the client gets the 1213 its statement met, as the
 * server answered it, and the session goes on outside any transaction
 * (the server rolled it back; the replay's partial one is rolled back
 * here). The client was told nothing else: an application that retries
 * deadlocks retries this one.
 */
static void
deadlock_after_all(struct rws_session *rs)
{
    static const unsigned char rb[] = "\x09\x00\x00\x00\x03ROLLBACK";
    int m = rs->master;

    if (m >= 0 && rws_be_live(&rs->be[m])) {
        struct sl_buf *q = sl_buf_from(rb, sizeof(rb) - 1);

        if (q != NULL) {
            rws_write(rs, (unsigned)m, q, RK_IGNORE, NULL);
        }
    }
    rs->replay_attempts = 0;
    rws_trx_log_clear(rs);
    rs->trx_active = !rs->autocommit;   /* autocommit=0: a new one */
    rs->trx_ro = false;
    rs->trx_srv = -1;
    rs->trx_log_ok = rs->trx_active;
    sl_buf_free(rs->cur);
    rs->cur = NULL;
    rs->cur_target = -1;
    sl_log_ses_warn(rs->ses, "Transaction replay after a deadlock differs: the client gets the deadlock (1213)");
    sl_session_send_error(rs->ses, 1213, "40001", "Deadlock found when trying to get lock; try restarting transaction");
    rws_release_waiting(rs);
}

/* Route the held command, if any. */
int
rws_release_waiting(struct rws_session *rs)
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
        rws_barrier_leave(rs);
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
        rs->barrier_hold = false;
        return false;
    }
    if (rs->barrier_hold) {
        if (!expired && atomic_load_explicit(&rs->inst->replays_pending,
                                             memory_order_relaxed) > 0) {
            return true;
        }
        rs->timer = 0;
        rs->barrier_hold = false;
        rs->barrier_passed = true;
        rc = rws_release_waiting(rs);
        rs->barrier_passed = false;
        if (rc == SL_ERROR) {
            sl_session_close(rs->ses, "a write held by the replay barrier failed");
        }
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
    rc = rws_release_waiting(rs);
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
        rs->timer = sl_session_add_timer(rs->ses, RWS_TIMER_MS, on_timer, rs);
    }
}

/* ---- transaction replay ---- */

/* ---- the replay barrier ----
 *
 * After a primary failure the sessions whose transactions were open all
 * replay at once on the new primary, in no particular order. Were one
 * replay (or any client) to commit before another replay has read, that
 * one would read rows a transaction committed that was still open when
 * it read them the first time: a state that never existed, and a
 * checksum mismatch. So a replay that starts with a plain BEGIN starts
 * with START TRANSACTION WITH CONSISTENT SNAPSHOT instead (the snapshot
 * is taken at once, not at the first read), and until every session
 * replaying after the failure has its snapshot (inst->replays_pending
 * is 0), the service's COMMITs and autocommit writes wait, at most
 * RWS_BARRIER_MS. The normal path only reads the count (relaxed). */

void
rws_barrier_leave(struct rws_session *rs)
{
    if (rs->in_barrier) {
        rs->in_barrier = false;
        atomic_fetch_sub_explicit(&rs->inst->replays_pending, 1,
                                  memory_order_relaxed);
    }
}

static void
barrier_enter(struct rws_session *rs)
{
    if (!rs->in_barrier) {
        rs->in_barrier = true;
        atomic_fetch_add_explicit(&rs->inst->replays_pending, 1,
                                  memory_order_relaxed);
    }
}

bool
rws_barrier_hold(struct rws_session *rs, struct sl_buf *buf,
                 const struct sl_hint *hint)
{
    if (atomic_load_explicit(&rs->inst->replays_pending,
                             memory_order_relaxed) == 0 ||
        rs->barrier_passed || rs->in_barrier || rs->replaying ||
        rs->waiting != NULL || (rs->trx_active && !rws_is_commit(buf))) {
        return false;
    }
    sl_log_ses_info(rs->ses, "Holding a %s until the transactions being replayed have their snapshots", rs->trx_active ? "COMMIT" : "write");
    rs->waiting = buf;
    rs->waiting_hint = hint != NULL ? *hint : (struct sl_hint){.type = 0};
    rs->barrier_hold = true;
    rs->wait_deadline = rws_now_us() / 1000 + RWS_BARRIER_MS;
    rws_start_timer(rs);
    return true;
}

/* The packet START TRANSACTION WITH CONSISTENT SNAPSHOT, with the
 * characteristics of `begin` (rws_plain_begin). */
static struct sl_buf *
snapshot_begin(const struct sl_buf *begin)
{
    static const char plain[] = "START TRANSACTION WITH CONSISTENT SNAPSHOT";
    static const char rw[] =
        "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ WRITE";
    const char *q = rws_plain_begin(begin) == RWS_BEGIN_READ_WRITE ? rw
                                                                   : plain;
    unsigned char pkt[5 + sizeof(rw)];
    size_t n = strlen(q) + 1;

    pkt[0] = (unsigned char)n;
    pkt[1] = pkt[2] = pkt[3] = 0;
    pkt[4] = SL_COM_QUERY;
    memcpy(pkt + 5, q, n - 1);
    return sl_buf_from(pkt, 4 + n);
}

/* Send statement i of the log to connection m, as a replay. */
static void
replay_send(struct rws_session *rs, int m, size_t i)
{
    struct sl_buf *copy = i == 0 && rs->replay_snapshot
                              ? snapshot_begin(rs->trx_log[0].buf)
                              : rws_for_backend(rs, m, rs->trx_log[i].buf);
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
    rs->replay_snapshot = rs->ntrx > 0 &&
                          rws_plain_begin(rs->trx_log[0].buf) != RWS_BEGIN_OTHER;
    if (!rs->replay_snapshot) {
        rws_barrier_leave(rs);   /* no snapshot to wait for */
    }
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
    rs->replay_snapshot = false;
    rws_barrier_leave(rs);
    if (rs->replay_failed) {
        bool retry = rs->replay_deadlock ? c->retry_on_deadlock
                                         : c->retry_on_mismatch;

        if (retry && replay_again(rs, true)) {
            return;
        }
        if (rs->replay_for_deadlock) {
            rs->replay_for_deadlock = false;
            deadlock_after_all(rs);
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
    rs->replay_for_deadlock = false;
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
    rws_release_waiting(rs);
}

void
rws_replay_answer(struct rws_session *rs, struct rws_expect *e,
                  const struct sl_buf *buf, const struct sl_reply *reply)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;

    if (!e->started) {
        rws_cks_begin(rs, buf, reply, e->index);
    }
    rws_sha_update(rs, buf);
    rws_diag_keep(&rs->replay_answer, buf, !e->started);
    if (!reply->complete) {
        return;
    }
    EVP_DigestFinal_ex(rs->sha, md, &mdlen);
    rs->cks_skip = false;
    if (!rs->replaying || rs->replay_left == 0) {
        return;   /* an attempt given up (its connection failed) */
    }
    if (e->index == 0 && rs->replay_snapshot) {
        /* START TRANSACTION WITH CONSISTENT SNAPSHOT for the BEGIN: its
         * OK stands for the BEGIN's (warnings aside: one says when the
         * isolation level makes the snapshot moot) */
        rs->replay_snapshot = false;
        rws_barrier_leave(rs);
        if (reply->is_err) {
            sl_log_ses_warn(rs->ses, "Replayed statement 0 (START TRANSACTION WITH CONSISTENT SNAPSHOT) failed: error %u", reply->error_code);
            rs->replay_failed = true;
        }
    } else if (e->index < rs->ntrx &&
               memcmp(md, rs->trx_log[e->index].sha1, 20) != 0) {
        sl_log_ses_warn(rs->ses, "Replayed statement %zu gave a different result", e->index);
        rws_diag_mismatch(rs, e->index);
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
        rws_barrier_leave(rs);
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

    if (!c->trx_replay || !rs->trx_log_ok ||
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

/* ---- what starts a replay ---- */

/*
 * optimistic_trx: the transaction that ran on a replica meets its first
 * write. The replica's transaction is rolled back (its answer dropped),
 * the log (BEGIN and the reads, their answers' checksums taken from the
 * replica) replayed on the primary as after a failure, and the write
 * held until the replay matched; a mismatch ends the session as a
 * failed replay does, the write never sent.
 */
int
rws_opt_to_primary(struct rws_session *rs, struct sl_buf *buf,
                   const struct sl_hint *hint)
{
    static const unsigned char rb[] = "\x09\x00\x00\x00\x03ROLLBACK";
    uint64_t now_ms = rws_now_us() / 1000;
    int r = rs->ro_target;

    rs->optimistic = false;
    rs->trx_ro = false;
    rs->ro_target = -1;
    rs->trx_srv = -1;
    if (r >= 0 && rws_be_live(&rs->be[r])) {
        struct sl_buf *q = sl_buf_from(rb, sizeof(rb) - 1);

        if (q != NULL) {
            rws_write(rs, (unsigned)r, q, RK_IGNORE, NULL);
        } else {
            rws_release_backend(rs, &rs->be[r], true);   /* rolls back */
        }
    }
    if (!rs->trx_log_ok || rs->ntrx == 0) {
        /* larger than transaction_replay_max_size: what the client read
         * cannot be checked on the primary */
        sl_buf_free(buf);
        rws_send_error(rs, "Optimistic transaction cannot move to the primary: it exceeded transaction_replay_max_size");
        return SL_ERROR;   /* the session closes */
    }
    sl_log_ses_info(rs->ses, "A write in an optimistic transaction: moving its %zu statements to the primary", rs->ntrx);
    count_attempt(rs, now_ms);
    rs->replaying = true;
    rs->replay_failed = false;
    rs->replay_deadlock = false;
    rs->replay_left = 0;
    rs->waiting = buf;
    rs->waiting_hint = hint != NULL ? *hint : (struct sl_hint){.type = 0};
    rs->wait_deadline = replay_deadline(rs, now_ms);
    atomic_fetch_add_explicit(&rs->inst->optimistic_moves, 1,
                              memory_order_relaxed);
    if (!start_replay(rs)) {
        rws_start_timer(rs);   /* no primary yet, or its history first */
    }
    return SL_OK;
}

/* Close the session's master connection (the switchover demoted its
 * server; an open transaction there is rolled back by the server). */
static void
close_master(struct rws_session *rs, struct rws_be *be)
{
    sl_log_ses_info(rs->ses,
                    "Closing the connection to '%s': the primary moved",
                    sl_server_name(be->srv));
    rws_release_backend(rs, be, true);
}

static bool
replay_possible(const struct rws_session *rs)
{
    const struct rws_config *c = &rs->inst->cfg;

    return c->trx_replay && rs->trx_log_ok && !rs->replaying &&
           rws_replay_allowed(c, rs->replay_attempts, rs->replay_start_ms,
                              rws_now_us() / 1000);
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
bool
rws_read_only_refusal(struct rws_session *rs, struct rws_be *be,
                      const struct sl_reply *reply)
{
    uint32_t st = sl_server_status(be->srv);

    if ((reply->error_code != 1290 && reply->error_code != 1836) ||
        (int)be->idx != rs->master || rs->cur == NULL || rs->cur_started ||
        rs->waiting != NULL ||
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
        return rws_master_failed(rs, true);
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
bool
rws_deadlock_retry(struct rws_session *rs, struct rws_be *be,
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
    if (!replay_again(rs, false)) {
        return false;
    }
    rs->replay_for_deadlock = true;
    return true;
}

bool
rws_master_failed(struct rws_session *rs, bool pending)
{
    const struct rws_config *c = &rs->inst->cfg;

    if (rs->replaying) {
        /* The new primary's connection failed too (the monitor has not
         * noticed yet): the same attempt goes on waiting. */
        rs->replay_for_deadlock = false;
        rs->replay_left = 0;
        rs->replay_failed = false;
        rws_start_timer(rs);
        return true;
    }
    if (pending && rs->cur != NULL && c->trx_replay && c->safe_commit &&
        rs->trx_active && !rs->trx_ro && rws_is_commit(rs->cur)) {
        /* transaction_replay_safe_commit: the COMMIT may have committed;
         * replaying it could commit the transaction twice */
        rws_close_unanswered(rs, "Primary lost during COMMIT: the transaction's outcome is unknown, not replayed (transaction_replay_safe_commit)");
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
        barrier_enter(rs);
        sl_log_ses_notice(rs->ses, "Master lost inside a transaction: waiting to replay it");
        rws_start_timer(rs);
        return true;
    }
    if (c->failure_mode == RWS_FAIL_INSTANTLY) {
        return false;
    }
    if (rs->trx_active && !rs->trx_ro && rs->autocommit) {
        /* A read-write transaction the primary took with it, not
         * replayed (transaction_replay off, larger than
         * transaction_replay_max_size, no attempt left): its next
         * statements must not run on a new primary outside it, where
         * they would commit without its first part. The client sees
         * what a crashed server gives. */
        rws_close_unanswered(rs, "Primary lost inside a transaction that is not replayed: closing the session");
        return true;
    }
    if (pending && rws_lost_autocommit(rs) >= 0) {
        return true;   /* read re-sent, or the session closed */
    }
    if (pending) {
        rws_send_error(rs, "Lost connection to the master server");
        return c->failure_mode == RWS_ERROR_ON_WRITE;
    }
    return true;
}
