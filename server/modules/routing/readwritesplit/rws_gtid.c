/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's causal_reads on the wire: the queries the router sends
 * of its own so that a read on a replica sees the writes it must see.
 *
 *   before a read   the position it needs (rws_causal_position: the
 *                   service's acknowledged writes, or the primary's
 *                   @@gtid_binlog_pos, fetched first while the read is
 *                   held), then MASTER_GTID_WAIT pipelined before it on
 *                   the replica unless that one is known to have it
 *                   (rws_causal_wait)
 *   after a write   SELECT @@last_gtid on the primary (rws_ask_last_gtid);
 *                   in the service-wide modes the end of the write's
 *                   answer is held until that GTID is published
 *                   (rws_held_release), so no other client learns of the
 *                   write before its reads would wait for it
 *   the answers     one value each, gathered and parsed here
 *                   (rws_gtid_answer, rws_primary_pos_answer,
 *                   rws_wait_answer: a wait that timed out marks the
 *                   read's answer stale, rs->causal_failed)
 *
 * The positions themselves (parsing, the service's acknowledged GTIDs,
 * what each server is known to have applied) are pure and live in
 * rws_causal.c.
 *
 * Context: worker-owned; the instance's positions are atomics.
 */
#define SL_LOG_TAG "readwritesplit"

#include <stdio.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>
#include <sluice/session.h>

#include "rws.h"

/* global, universal, consistent: make replica idx wait for rs->req
 * unless it is known to have it. */
static void
causal_wait_pos(struct rws_session *rs, int idx)
{
    struct rws_instance *inst = rs->inst;
    char pos[RWS_DOMAINS * 44 + 1], sql[sizeof(pos) + 64];
    struct sl_buf *wait;

    if (!rs->req_any || idx == rs->master) {
        return;
    }
    if (rws_known_covers(inst, (unsigned)idx, &rs->req)) {
        atomic_fetch_add_explicit(&rws_count(inst, (unsigned)idx)->causal_known, 1,
                                  memory_order_relaxed);
        return;
    }
    rws_pos_format(inst, &rs->req, pos, sizeof(pos));
    if (inst->cfg.causal == RWS_CAUSAL_CONSISTENT) {
        snprintf(sql, sizeof(sql), "SELECT MASTER_GTID_WAIT('%s', %llu.%03llu)",
                 pos, (unsigned long long)(inst->cfg.causal_wait_ms / 1000),
                 (unsigned long long)(inst->cfg.causal_wait_ms % 1000));
    } else {
        snprintf(sql, sizeof(sql), "SELECT MASTER_GTID_WAIT('%s', %llu)", pos,
                 (unsigned long long)inst->cfg.causal_timeout_s);
    }
    wait = sl_mdb_make_query(sql, strlen(sql));
    if (wait != NULL &&
        rws_write(rs, (unsigned)idx, wait, RK_GTID_WAIT, NULL) == SL_OK) {
        /* what a "0" answer proves idx has applied; a second wait sent
         * before the first is answered (a pipelining client) proves
         * nothing we could attribute */
        rs->waits_pending++;
        rs->wait_pos = rs->req;
        rs->waited_on = idx;
        atomic_fetch_add_explicit(&rws_count(inst, (unsigned)idx)->causal_waits, 1,
                                  memory_order_relaxed);
    }
}

/* causal_reads: make replica idx wait for the position the read needs
 * (the session's last write under local). */
void
rws_causal_wait(struct rws_session *rs, int idx)
{
    char sql[160];
    struct sl_buf *wait;
    enum rws_causal m = rs->inst->cfg.causal;

    if (m == RWS_CAUSAL_GLOBAL || m == RWS_CAUSAL_UNIVERSAL ||
        m == RWS_CAUSAL_CONSISTENT) {
        causal_wait_pos(rs, idx);
        return;
    }
    if (m != RWS_CAUSAL_LOCAL || rs->gtid[0] == '\0' || idx == rs->master) {
        return;
    }
    snprintf(sql, sizeof(sql), "SELECT MASTER_GTID_WAIT('%s', %llu)",
             rs->gtid, (unsigned long long)rs->inst->cfg.causal_timeout_s);
    wait = sl_mdb_make_query(sql, strlen(sql));
    if (wait != NULL) {
        rws_write(rs, (unsigned)idx, wait, RK_GTID_WAIT, NULL);
    }
}

/* The position a read must see, before its server is chosen (rs->req):
 * the service's acknowledged writes, or (universal) the primary's
 * @@gtid_binlog_pos, fetched first while the read is held (buf taken,
 * true returned). */
bool
rws_causal_position(struct rws_session *rs, struct sl_buf *buf,
                    const struct sl_hint *hint)
{
    struct rws_instance *inst = rs->inst;
    enum rws_causal m = inst->cfg.causal;
    static const char sql[] = "SELECT @@gtid_binlog_pos";
    struct sl_buf *q;
    int mi;

    if (rs->pos_ready) {   /* universal, fetched for this read: rs->req
                            * and req_primary set by the answer */
        rs->pos_ready = false;
        rs->req_any = false;
        for (int k = 0; k < RWS_DOMAINS; k++) {
            rs->req_any |= rs->req.seq[k] != 0;
        }
        return false;
    }
    rs->req_any = false;
    rs->req_primary = false;
    if (m == RWS_CAUSAL_GLOBAL || m == RWS_CAUSAL_FAST_GLOBAL ||
        m == RWS_CAUSAL_CONSISTENT) {
        rs->req_any = rws_acked(inst, &rs->req);
        rs->req_primary =
            atomic_load_explicit(&inst->gtid_overflow, memory_order_relaxed) ||
            atomic_load_explicit(&inst->unpublished, memory_order_acquire) >
                0 ||
            rws_now_us() < atomic_load_explicit(&inst->unknown_until_us,
                                                memory_order_relaxed);
        return false;
    }
    if (m != RWS_CAUSAL_UNIVERSAL && m != RWS_CAUSAL_FAST_UNIVERSAL) {
        return false;
    }
    mi = rws_master_index(rs, true);
    q = mi >= 0 ? sl_mdb_make_query(sql, sizeof(sql) - 1) : NULL;
    if (q == NULL || rws_write(rs, (unsigned)mi, q, RK_PRIMARY_POS, NULL) !=
                         SL_OK) {
        rs->req_primary = true;   /* no position: no replica qualifies */
        return false;
    }
    rs->waiting = buf;   /* routed again when the position is in */
    rs->waiting_hint = hint != NULL ? *hint : (struct sl_hint){.type = 0};
    return true;
}

/* ---- after a write, and the answers ---- */

/*
 * The last packet(s) of a write's answer, held until its GTID was
 * published (the service-wide causal_reads modes: no other client may
 * learn of the write before a read of theirs would wait for it), go to
 * the client. `known` false: the GTID was lost (an error, the primary
 * gone), so those modes read from the primary for a while.
 */
int
rws_held_release(struct rws_session *rs, bool known)
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
rws_ask_last_gtid(struct rws_session *rs, unsigned idx)
{
    static const char sql[] = "SELECT @@last_gtid";
    struct sl_buf *q = sl_mdb_make_query(sql, sizeof(sql) - 1);

    if (q != NULL && rws_write(rs, idx, q, RK_LAST_GTID, NULL) == SL_OK) {
        rs->gtid_pending = true;
    }
}

/* The single-row, single-column answer's value into out (lenenc string
 * of the row packet: the packet before the terminator). false, out
 * untouched, when there is no such value, it does not fit, or the answer
 * could not be made contiguous (no memory). */
static bool
parse_single_value(struct sl_buf *all, char *out, size_t outlen)
{
    size_t len = sl_buf_len(all);
    unsigned char *p = len > 0 ? sl_buf_pullup(all, len) : NULL;
    size_t off = 0, prev = 0, prev2 = 0;

    if (p == NULL) {
        return false;
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
            return true;
        }
    }
    return false;
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
    if (rs->gtid_buf != NULL && !reply->is_err &&
        parse_single_value(rs->gtid_buf, out, outlen)) {
        got = 1;
    }
    sl_buf_free(rs->gtid_buf);
    rs->gtid_buf = NULL;
    return got;
}

void
rws_gtid_answer(struct rws_session *rs, struct sl_buf *buf,
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
            if (rws_causal_service_wide(rs->inst->cfg.causal)) {
                rws_publish(rs->inst, g);
            }
        }
    }
    rs->gtid_pending = false;
    if (rws_held_release(rs, !rs->gtid_unknown) != SL_OK) {
        return;
    }
    if (!rs->replaying) {
        rws_release_waiting(rs);
    }
}

/* A universal read's position: the primary's @@gtid_binlog_pos. */
void
rws_primary_pos_answer(struct rws_session *rs, struct sl_buf *buf,
                       const struct sl_reply *reply)
{
    char g[RWS_DOMAINS * 44 + 64] = "";
    int got = take_single_value(rs, buf, reply, g, sizeof(g));

    if (got < 0) {
        return;
    }
    /* an error, a malformed answer, no memory or a domain without a slot:
     * the primary reads ("" would require nothing) */
    rs->req_primary = got == 0 || !rws_pos_parse(rs->inst, g, &rs->req, true);
    rs->pos_ready = true;
    if (!rs->replaying) {
        rws_release_waiting(rs);
    }
}

void
rws_wait_answer(struct rws_session *rs, struct rws_be *be, struct sl_buf *buf,
                const struct sl_reply *reply)
{
    char v[32] = "";

    if (reply->complete && reply->is_err &&
        rws_interrupted(reply->error_code)) {
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
