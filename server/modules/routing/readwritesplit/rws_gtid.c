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

#include <sluice/mariadb.h>

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
