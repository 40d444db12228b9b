/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's prepared statements.
 *
 * The client gets ids of ours (a per-session counter); each connection's
 * own id for the statement is mapped in struct rws_ps (rws.h), so a
 * statement keeps its id across new and re-made connections.
 *
 *   COM_STMT_PREPARE a session command (every connection), classified to
 *                    decide where its executions go
 *   COM_STMT_EXECUTE/FETCH  one connection (a replica for a read outside
 *                    transactions), the id rewritten for it and the
 *                    parameter types added if it has not seen them; a
 *                    prepared SET runs on every connection, as a session
 *                    command kept in the history with its PREPARE
 *   COM_STMT_CLOSE, SEND_LONG_DATA, RESET  every connection that has the
 *                    statement
 *
 * The packet rewriting itself is pure and lives in rws_exec.c.
 *
 * Context: worker-owned.
 */
#define SL_LOG_TAG "readwritesplit"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>
#include <sluice/session.h>

#include "rws.h"

/* The array is sorted by id: ids grow with every PREPARE, ps_add appends
 * and ps_remove keeps the order. Every execute looks its statement up, so
 * a binary search (sysbench keeps ~20 statements per session). */
struct rws_ps *
rws_ps_find(struct rws_session *rs, uint32_t id)
{
    size_t lo = 0, hi = rs->nps;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (rs->ps[mid].id == id) {
            return &rs->ps[mid];
        }
        if (rs->ps[mid].id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

static void
ps_release(struct rws_session *rs, struct rws_ps *ps)
{
    if (ps->sc != NULL) {
        rws_history_remove(rs, ps->sc);
        rws_sescmd_unref(rs, ps->sc);
    }
    free(ps->bids);
    free(ps->bparams);
    free(ps->types);
    free(ps->sql);
    free(ps->db);
    sl_buf_free(ps->answer);
}

void
rws_ps_free_all(struct rws_session *rs)
{
    for (size_t i = 0; i < rs->nps; i++) {
        ps_release(rs, &rs->ps[i]);
    }
    rs->nps = 0;
}

static struct rws_ps *
ps_add(struct rws_session *rs)
{
    struct rws_ps *ps;

    if (rs->nps == rs->cap_ps) {
        size_t cap = rs->cap_ps ? rs->cap_ps * 2 : 8;
        struct rws_ps *n = realloc(rs->ps, cap * sizeof(*n));
        if (n == NULL) {
            return NULL;
        }
        rs->ps = n;
        rs->cap_ps = cap;
    }
    ps = &rs->ps[rs->nps];
    memset(ps, 0, sizeof(*ps));
    ps->bids = calloc(rs->inst->nservers + 1, sizeof(*ps->bids));
    ps->bparams = calloc(rs->inst->nservers + 1, sizeof(*ps->bparams));
    if (ps->bids == NULL || ps->bparams == NULL) {
        free(ps->bids);
        free(ps->bparams);
        return NULL;
    }
    ps->id = rs->next_ps++;
    ps->last = -1;
    rs->nps++;
    return ps;
}

static void
ps_remove(struct rws_session *rs, struct rws_ps *ps)
{
    size_t i = (size_t)(ps - rs->ps);

    ps_release(rs, ps);
    memmove(&rs->ps[i], &rs->ps[i + 1],
            (rs->nps - i - 1) * sizeof(*rs->ps));
    rs->nps--;
}

/* The client's statement id of a COM_STMT_* command (bytes 5..8). */
static uint32_t
cmd_stmt_id(const struct sl_buf *buf)
{
    unsigned char b[4] = {0};

    sl_buf_copy_out(buf, 5, 4, b);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

/* ---- reuse_prepared_statements ---- */

/* buf's bytes from off on are the n bytes at p. */
static bool
buf_equals(const struct sl_buf *buf, size_t off, const unsigned char *p,
           size_t n)
{
    if (sl_buf_len(buf) != off + n) {
        return false;
    }
    for (const struct sl_seg *s = buf->head; s != NULL && n > 0;
         s = s->next) {
        size_t len = (size_t)(s->end - s->start);

        if (off >= len) {
            off -= len;
            continue;
        }
        len -= off;
        len = len < n ? len : n;
        if (memcmp(s->start + off, p, len) != 0) {
            return false;
        }
        p += len;
        n -= len;
        off = 0;
    }
    return n == 0;
}

/* A live statement prepared from the same text in the same default
 * database whose answer the client has, or NULL. Not while the client
 * pipelines (the answer would overtake earlier ones) or while the
 * database is uncertain. */
static struct rws_ps *
ps_reusable(struct rws_session *rs, const struct sl_buf *buf)
{
    const char *db = sl_session_db(rs->ses);

    if (sl_session_answers_pending(rs->ses) > 1 ||
        sl_session_db_unsure(rs->ses)) {
        return NULL;
    }
    db = db != NULL ? db : "";
    for (size_t i = 0; i < rs->nps; i++) {
        struct rws_ps *ps = &rs->ps[i];

        if (ps->answer_done && ps->sql != NULL &&
            strcmp(ps->db, db) == 0 &&
            buf_equals(buf, SL_MDB_HDR_LEN + 1, ps->sql, ps->sql_len)) {
            return ps;
        }
    }
    return NULL;
}

/* Remember the text and the database a new statement was prepared
 * from; on no memory it is simply not reusable. */
static void
ps_remember_text(struct rws_session *rs, struct rws_ps *ps,
                 const struct sl_buf *buf)
{
    const char *db = sl_session_db(rs->ses);
    size_t n = sl_buf_len(buf) - SL_MDB_HDR_LEN - 1;

    ps->sql = malloc(n ? n : 1);
    ps->db = strdup(db != NULL ? db : "");
    if (ps->sql == NULL || ps->db == NULL) {
        free(ps->sql);
        free(ps->db);
        ps->sql = NULL;
        ps->db = NULL;
        return;
    }
    ps->sql_len = sl_buf_copy_out(buf, SL_MDB_HDR_LEN + 1, n, ps->sql);
}

void
rws_prepare_keep(struct rws_session *rs, struct rws_sescmd *sc,
                 const struct sl_buf *buf, const struct sl_reply *reply)
{
    struct rws_ps *ps = rws_ps_find(rs, sc->ps_id);
    struct sl_buf *copy;

    if (ps == NULL || ps->sql == NULL || ps->answer_done) {
        return;
    }
    copy = sl_buf_clone_new(buf);
    if (copy == NULL) {
        free(ps->sql);   /* incomplete: never reused */
        ps->sql = NULL;
        return;
    }
    if (ps->answer == NULL) {
        ps->answer = copy;
    } else {
        sl_buf_append(ps->answer, copy);
        sl_buf_free(copy);
    }
    if (reply->complete) {
        ps->answer_reply = *reply;
        ps->answer_done = !reply->is_err;
        if (reply->is_err) {
            sl_buf_free(ps->answer);
            ps->answer = NULL;
        }
    }
}

int
rws_route_prepare(struct rws_session *rs, struct sl_buf *buf)
{
    struct sl_qc_result qc;
    struct rws_ps *ps;

    if (rs->inst->cfg.reuse_ps && (ps = ps_reusable(rs, buf)) != NULL) {
        struct sl_buf *copy = sl_buf_clone_new(ps->answer);

        if (copy != NULL) {
            /* the earlier statement's answer, its id: no round trip */
            sl_buf_free(buf);
            atomic_fetch_add_explicit(&rs->inst->ps_reused, 1,
                                      memory_order_relaxed);
            return sl_session_reply(rs->ses, copy, &ps->answer_reply);
        }
    }
    ps = ps_add(rs);

    if (ps == NULL) {
        sl_buf_free(buf);
        rws_send_error(rs, "Out of memory");
        return SL_OK;
    }
    if (!sl_qc_classify_buf(buf, &qc)) {
        qc.type = SL_QC_UNKNOWN;
    }
    ps->type = qc.type;
    if (rs->inst->cfg.reuse_ps) {
        ps_remember_text(rs, ps, buf);
    }
    ps->sescmd = rws_sescmd_type(qc.type);
    ps->is_read = (qc.type & SL_QC_READ) &&
                  !(qc.type & (SL_QC_WRITE | SL_QC_DDL | SL_QC_MASTER_READ |
                               SL_QC_UNKNOWN | SL_QC_CALL));
    if (rws_exec_sescmd(rs, buf, ps->id) != SL_OK) {
        return SL_ERROR;
    }
    /* The history holds the PREPARE while the statement lives. */
    ps->sc = rs->hist_tail != NULL && rs->hist_tail->ps_id == ps->id
                 ? rs->hist_tail
                 : NULL;
    if (ps->sc != NULL) {
        ps->sc->refs++;
    }
    return SL_OK;
}

/* The connection's PREPARE of ps is still unanswered and was its last
 * one: the server's id "-1" (the last statement prepared) names it. */
static bool
prepare_pending(const struct rws_session *rs, int idx, const struct rws_ps *ps)
{
    return rws_be_live(&rs->be[idx]) && rs->be[idx].last_prepare == ps->id;
}

static uint32_t
backend_id(const struct rws_session *rs, int idx, const struct rws_ps *ps)
{
    if (ps->bids[idx] != 0) {
        return ps->bids[idx];
    }
    return prepare_pending(rs, idx, ps) ? 0xffffffffu : 0;
}

void
rws_ps_forget_backend(struct rws_session *rs, unsigned idx)
{
    for (size_t i = 0; i < rs->nps; i++) {
        rs->ps[i].bids[idx] = 0;   /* that connection's ids */
        if (idx < 64) {
            rs->ps[i].types_sent &= ~(1ull << idx);
        }
    }
}

/* The client's COM_STMT_EXECUTE/FETCH (not taken) for connection idx: its
 * statement id, and the parameter types if idx has not seen them. */
static struct sl_buf *
exec_for(struct rws_session *rs, struct rws_ps *ps, const struct sl_buf *buf,
         int idx)
{
    uint32_t bid = backend_id(rs, idx, ps);
    struct sl_buf *out = NULL;
    unsigned char *p;

    if (sl_mdb_command(buf) == SL_COM_STMT_EXECUTE && ps->params > 0 &&
        idx < 64 && !(ps->types_sent & (1ull << idx)) && ps->types != NULL) {
        out = rws_exec_add_types(buf, ps);
    }
    if (out == NULL) {
        out = rws_exec_with_id(buf, bid);
    } else if ((p = sl_buf_pullup(out, 9)) != NULL) {
        sl_mdb_put_le32(p + 5, bid);
    } else {
        sl_buf_free(out);   /* no memory to make the header contiguous */
        return NULL;
    }
    if (out != NULL && idx < 64 && sl_mdb_command(buf) == SL_COM_STMT_EXECUTE) {
        ps->types_sent |= 1ull << idx;   /* now it has seen them */
    }
    return out;
}

static int
route_execute(struct rws_session *rs, struct sl_buf *buf, struct rws_ps *ps,
              int cmd)
{
    bool to_master, ro_trx;
    int idx = -1, rc;
    struct sl_buf *out;

    /* A prepared BEGIN/START TRANSACTION (sysbench prepares them) opens a
     * transaction exactly as the text one does. */
    if (cmd == SL_COM_STMT_EXECUTE) {
        rws_track_trx(rs, ps->type);
        if (rws_optimistic(rs) && !ps->is_read && !ps->sescmd &&
            !(ps->type & (SL_QC_BEGIN_TRX | SL_QC_COMMIT | SL_QC_ROLLBACK))) {
            return rws_opt_to_primary(rs, buf, NULL);   /* a write */
        }
    }
    ro_trx = rs->trx_active && rs->trx_ro;
    to_master = !ro_trx && (!ps->is_read || rs->trx_active ||
                            rs->locked_to_master);
    if (to_master && cmd == SL_COM_STMT_EXECUTE) {
        rws_trx_on_moving_master(rs, &idx);
    }
    if (idx >= 0) {
        /* the transaction stays on the old primary (no replay) */
    } else if (cmd == SL_COM_STMT_FETCH && ps->last >= 0 &&
        rws_be_live(&rs->be[ps->last])) {
        idx = ps->last;
    } else if (ro_trx && rs->ro_target >= 0 &&
               rws_be_live(&rs->be[rs->ro_target])) {
        idx = rs->ro_target;   /* all of it, BEGIN to COMMIT, on one */
    } else if (!to_master && rws_causal_hold(rs, buf, NULL)) {
        return SL_OK;
    } else {
        idx = to_master ? rws_master_index(rs, true) : rws_slave_index(rs, -1);
        if (idx < 0 && !to_master) {
            idx = rws_master_index(rs, true);
        }
        if (idx < 0 && to_master && cmd == SL_COM_STMT_EXECUTE &&
            (rs->inst->cfg.delayed_retry || rws_primary_moving(rs->inst))) {
            return rws_hold(rs, buf, NULL);   /* not to a replica */
        }
    }
    if (idx < 0 || (ps->bids[idx] == 0 && !prepare_pending(rs, idx, ps))) {
        idx = -1;
        for (unsigned i = 0; i < rs->inst->nservers && idx < 0; i++) {
            if (rws_be_live(&rs->be[i]) && ps->bids[i] != 0) {
                idx = (int)i;
            }
        }
    }
    if (idx < 0) {
        sl_buf_free(buf);
        rws_send_error(rs, "Prepared statement %u is not prepared on any available server", ps->id);
        return SL_OK;
    }
    if (rws_barrier_up(rs->inst) && cmd == SL_COM_STMT_EXECUTE &&
        idx == rs->master && !rs->trx_active && rws_changes_data(ps->type) &&
        rws_barrier_hold(rs, buf, NULL)) {
        return SL_OK;
    }
    if (cmd == SL_COM_STMT_EXECUTE) {
        rws_exec_save_types(buf, ps);
        rs->wrote |= rws_changes_data(ps->type);
        if (ro_trx) {
            rs->ro_target = idx;
        }
    }
    out = exec_for(rs, ps, buf, idx);
    if (out == NULL) {
        sl_buf_free(buf);
        rws_send_error(rs, "Out of memory");
        return SL_OK;
    }
    ps->last = idx;
    if (cmd == SL_COM_STMT_EXECUTE) {
        rws_causal_wait(rs, idx);
    }
    rs->routing_read = !to_master;
    rs->log_src = buf;
    rc = rws_route_to(rs, idx, out, idx == rs->master);
    /* A retry re-routes the client's command, not this connection's. */
    if (rs->cur != NULL) {
        sl_buf_free(rs->cur);
        rs->cur = buf;
    } else {
        sl_buf_free(buf);
    }
    return rc;
}

/*
 * Send the client's current command (buf taken) again to connection idx:
 * a read whose server failed, or a causal read that timed out. Prepared
 * statement ids are rewritten for idx. SL_OK or SL_ERROR (not sent).
 */
int
rws_resend(struct rws_session *rs, int idx, struct sl_buf *buf)
{
    int cmd = sl_mdb_command(buf);

    if (cmd == SL_COM_STMT_EXECUTE || cmd == SL_COM_STMT_FETCH) {
        struct rws_ps *ps = rws_ps_find(rs, cmd_stmt_id(buf));
        struct sl_buf *out = NULL;

        if (ps != NULL && backend_id(rs, idx, ps) != 0) {
            out = exec_for(rs, ps, buf, idx);
        }
        sl_buf_free(buf);
        if (out == NULL) {
            return SL_ERROR;
        }
        ps->last = idx;
        buf = out;
    }
    return rws_write(rs, (unsigned)idx, buf, RK_CLIENT, NULL);
}

struct sl_buf *
rws_for_backend(struct rws_session *rs, int idx, const struct sl_buf *buf)
{
    int cmd = sl_mdb_command(buf);
    struct rws_ps *ps;

    if (cmd != SL_COM_STMT_EXECUTE && cmd != SL_COM_STMT_FETCH) {
        return sl_buf_clone_new(buf);
    }
    ps = rws_ps_find(rs, cmd_stmt_id(buf));
    if (ps == NULL || backend_id(rs, idx, ps) == 0) {
        return NULL;
    }
    return exec_for(rs, ps, buf, idx);
}

/* The execute of a prepared session command for the history: statement
 * id "-1" and the parameter types included, so that it can be replayed
 * right after a fresh PREPARE of the statement. */
static struct sl_buf *
exec_for_history(struct rws_ps *ps, const struct sl_buf *buf)
{
    size_t off = rws_exec_flag_off(ps->params);
    struct sl_buf *out = NULL;
    unsigned char *p;

    if (ps->params > 0 && sl_buf_len(buf) > off &&
        sl_buf_byte(buf, off) == 0) {
        out = rws_exec_add_types(buf, ps);
        if (out == NULL) {
            return NULL;
        }
        if ((p = sl_buf_pullup(out, 9)) == NULL) {
            sl_buf_free(out);
            return NULL;
        }
        memset(p + 5, 0xff, 4);
        return out;
    }
    return rws_exec_with_id(buf, 0xffffffffu);
}

static bool
has_ps(const struct rws_session *rs, int idx, const struct rws_ps *ps)
{
    return rws_be_live(&rs->be[idx]) && backend_id(rs, idx, ps) != 0;
}

/*
 * COM_STMT_EXECUTE of a prepared SET (or any session command): like its
 * text form, run on every connection that has the statement, the
 * client answered by the master's (or the first one's), and kept in the
 * history -- with the statement's PREPARE, so that a connection made
 * later gets the same session state even after the statement is closed.
 */
static int
exec_ps_sescmd(struct rws_session *rs, struct sl_buf *buf, struct rws_ps *ps)
{
    struct rws_instance *inst = rs->inst;
    struct rws_sescmd *sc = rws_sescmd_new(rs, SL_COM_STMT_EXECUTE);
    int sent = 0;

    rws_track_trx(rs, ps->type);   /* a prepared SET autocommit=0 */
    if (sc == NULL) {
        sl_buf_free(buf);
        rws_send_error(rs, "Out of memory");
        return SL_OK;
    }
    rws_exec_save_types(buf, ps);
    sc->replier = -1;
    if (rs->master >= 0 && has_ps(rs, rs->master, ps)) {
        sc->replier = rs->master;
    }
    for (unsigned i = 0; i < inst->nservers && sc->replier < 0; i++) {
        if (has_ps(rs, (int)i, ps)) {
            sc->replier = (int)i;
        }
    }
    for (unsigned i = 0; i < inst->nservers && sc->replier >= 0; i++) {
        if (has_ps(rs, (int)i, ps) &&
            rws_sescmd_send(rs, sc, i, exec_for(rs, ps, buf, (int)i))) {
            sent++;
        }
    }
    if (sent == 0) {
        rws_sescmd_unref(rs, sc);
        sl_buf_free(buf);
        rws_send_error(rs, "Prepared statement %u is not prepared on any available server", ps->id);
        return SL_OK;
    }
    atomic_fetch_add(&inst->route_all, 1);
    sc->buf = exec_for_history(ps, buf);
    sl_buf_free(buf);
    if (ps->sc != NULL && sc->buf != NULL &&
        (sc->prep = sl_buf_clone_new(ps->sc->buf)) != NULL) {
        rws_history_add(rs, sc);
    } else {
        rs->hist_overflow = true;   /* cannot be replayed */
    }
    rws_sescmd_unref(rs, sc);
    return SL_OK;
}

/* CLOSE, SEND_LONG_DATA and RESET: every connection with the statement;
 * RESET's answer comes from one of them (a session command's rule). */
static int
route_ps_all(struct rws_session *rs, struct sl_buf *buf, struct rws_ps *ps,
             int cmd)
{
    int replier = -1;

    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        struct sl_buf *copy;

        if (!rws_be_live(&rs->be[i]) || ps->bids[i] == 0) {
            continue;
        }
        copy = rws_exec_with_id(buf, ps->bids[i]);
        if (copy == NULL) {
            continue;
        }
        if (cmd == SL_COM_STMT_RESET) {
            enum rws_kind k = replier < 0 ? RK_CLIENT : RK_IGNORE;
            if (replier < 0) {
                replier = (int)i;
                rs->cur_target = (int)i;
                rs->cur_started = false;
                rs->cur_is_read = false;
            }
            rws_write(rs, i, copy, k, NULL);
        } else {
            rws_write(rs, i, copy, RK_IGNORE, NULL);
        }
    }
    if (cmd == SL_COM_STMT_CLOSE) {
        ps_remove(rs, ps);
    } else if (cmd == SL_COM_STMT_RESET && replier < 0) {
        rws_send_error(rs, "Prepared statement %u: no server", ps->id);
    }
    sl_buf_free(buf);
    return SL_OK;
}

int
rws_route_ps_cmd(struct rws_session *rs, struct sl_buf *buf, int cmd)
{
    struct rws_ps *ps = rws_ps_find(rs, cmd_stmt_id(buf));

    if (ps == NULL) {
        /* Unknown statement: answered here, as the server words it. Not
         * passed on: the id is ours, and a server may hold a different
         * statement under the same number. */
        uint32_t id = cmd_stmt_id(buf);
        char msg[96];

        sl_buf_free(buf);
        if (rws_expects_reply(cmd)) {
            snprintf(msg, sizeof(msg),
                     "Unknown prepared statement handler (%u) given to %s",
                     id, cmd == SL_COM_STMT_FETCH   ? "mysqld_stmt_fetch"
                         : cmd == SL_COM_STMT_RESET ? "mysqld_stmt_reset"
                                                    : "mysqld_stmt_execute");
            sl_session_send_error(rs->ses, 1243, "HY000", msg);
        }
        return SL_OK;
    }
    if (cmd == SL_COM_STMT_EXECUTE) {
        sl_session_count_query(rs->ses, ps->type);   /* as a text one */
    }
    if (cmd == SL_COM_STMT_EXECUTE && ps->sescmd) {
        return exec_ps_sescmd(rs, buf, ps);
    }
    if (cmd == SL_COM_STMT_EXECUTE || cmd == SL_COM_STMT_FETCH) {
        return route_execute(rs, buf, ps, cmd);
    }
    if (cmd == SL_COM_STMT_CLOSE && rs->inst->cfg.reuse_ps) {
        /* reuse_prepared_statements: left open for a later PREPARE of
         * the same text (MaxScale); a CLOSE has no answer */
        sl_buf_free(buf);
        return SL_OK;
    }
    return route_ps_all(rs, buf, ps, cmd);
}

/* ---- PREPARE answers ---- */

/* Connections that answered the PREPARE before the replier did, with
 * another parameter count than the one the client was given: closed. */
static void
drop_miscounted(struct rws_session *rs, struct rws_ps *ps, unsigned replier)
{
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        if (i != replier && ps->bids[i] != 0 &&
            ps->bparams[i] != ps->params) {
            ps->bids[i] = 0;
            rws_drop_backend(rs, &rs->be[i], "its prepared statement has another parameter count than the one the client was given");
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
        rws_drop_backend(rs, be, "its prepared statement has another parameter count than the one the client was given");
    } else {
        ps->bids[be->idx] = reply->stmt_id;
        ps->bparams[be->idx] = reply->param_count;
    }
}

/* The first packet of a prepare OK carries the statement id: map it and
 * give the client our id instead. false: the id could not be replaced
 * (no memory to make the packet's header contiguous), so buf must not
 * reach the client: its executes would name the server's id, which may
 * be one of ours for another statement. */
bool
rws_prepare_answer(struct rws_session *rs, struct rws_be *be,
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
        sl_buf_byte(buf, 4) == 0x00) {
        if ((p = sl_buf_pullup(buf, 9)) == NULL) {
            return false;
        }
        sl_mdb_put_le32(p + 5, ps->id);
    }
    return true;
}
