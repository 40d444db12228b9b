/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's route_query: where each command goes.
 *
 *   COM_QUERY        classified (sl_qc_classify_buf); see decide()
 *   COM_STMT_PREPARE a session command (every connection), classified to
 *                    decide where its executions go; the client gets an id
 *                    of ours and each connection's own id is mapped
 *   COM_STMT_EXECUTE/FETCH/RESET/CLOSE/SEND_LONG_DATA  the id rewritten
 *                    for the chosen connection (CLOSE, SEND_LONG_DATA and
 *                    RESET go to every connection that has the statement)
 *   COM_INIT_DB, COM_SET_OPTION, COM_CHANGE_USER, COM_RESET_CONNECTION
 *                    session commands
 *   others           the primary
 *
 * Session commands get an id and are kept (refcounted) in the history
 * until pruned; every connection receives a copy, the client gets the
 * answer of one of them (the primary when it has one), the others'
 * answers are compared with it in rws_reply.c.
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
#include <sluice/service.h>
#include <sluice/session.h>
#include <sluice/worker.h>

#include "rws.h"

enum target {
    T_MASTER,
    T_SLAVE,
    T_ALL,
    T_NAMED,
    T_LAST,
};

static bool sescmd_type(uint32_t t);

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

static bool
expects_reply(int cmd)
{
    return cmd != SL_COM_QUIT && cmd != SL_COM_STMT_CLOSE &&
           cmd != SL_COM_STMT_SEND_LONG_DATA;
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
    if (expects_reply(cmd)) {
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

/* ---- session commands ---- */

void
rws_sescmd_unref(struct rws_session *rs, struct rws_sescmd *sc)
{
    (void)rs;
    if (sc == NULL || --sc->refs > 0) {
        return;
    }
    sl_buf_free(sc->buf);
    sl_buf_free(sc->prep);
    free(sc->results);
    free(sc);
}

void
rws_history_free(struct rws_session *rs)
{
    struct rws_sescmd *sc = rs->hist_head;

    while (sc != NULL) {
        struct rws_sescmd *next = sc->next;
        rws_sescmd_unref(rs, sc);
        sc = next;
    }
    rs->hist_head = rs->hist_tail = NULL;
    rs->hist_len = 0;
}

/* Unlink sc from the history (no-op if absent). */
static void
history_remove(struct rws_session *rs, struct rws_sescmd *sc)
{
    struct rws_sescmd **pp = &rs->hist_head;
    struct rws_sescmd *prev = NULL;

    while (*pp != NULL && *pp != sc) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL) {
        return;
    }
    *pp = sc->next;
    if (rs->hist_tail == sc) {
        rs->hist_tail = prev;
    }
    rs->hist_len--;
    rws_sescmd_unref(rs, sc);
}

static bool
same_bytes(const struct sl_buf *a, const struct sl_buf *b)
{
    size_t n = sl_buf_len(a);
    unsigned char x[256], y[256];

    if (n != sl_buf_len(b) || n > sizeof(x)) {
        return false;
    }
    sl_buf_copy_out(a, 0, n, x);
    sl_buf_copy_out(b, 0, n, y);
    return memcmp(x + 3, y + 3, n - 3) == 0;   /* seq byte and on */
}

/* sc sets state from constants only (SET autocommit=1, SET NAMES x, USE
 * db, COM_INIT_DB, COM_SET_OPTION): an older identical copy of it in the
 * history is redundant. */
static bool
idempotent(const struct rws_sescmd *sc)
{
    struct sl_qc_result qc;

    if (sc->cmd == SL_COM_INIT_DB || sc->cmd == SL_COM_SET_OPTION) {
        return true;
    }
    return sc->cmd == SL_COM_QUERY && sl_qc_classify_buf(sc->buf, &qc) &&
           !(qc.type & (SL_QC_READ | SL_QC_USERVAR_READ | SL_QC_SYSVAR_READ |
                        SL_QC_USERVAR_WRITE | SL_QC_PREPARE_NAMED |
                        SL_QC_DEALLOC_PREPARE | SL_QC_MULTI_STMT |
                        SL_QC_UNKNOWN));
}

/*
 * Make room for sc: drop an older identical constant-only command, else
 * (prune_sescmd_history) the oldest command that is not the PREPARE of a
 * live statement. False when nothing can go.
 */
static bool
history_make_room(struct rws_session *rs, const struct rws_sescmd *sc)
{
    struct rws_sescmd *h;

    if (idempotent(sc)) {
        for (h = rs->hist_head; h != NULL; h = h->next) {
            if (h->cmd == sc->cmd && same_bytes(h->buf, sc->buf)) {
                history_remove(rs, h);
                return true;
            }
        }
    }
    if (rs->hist_len < rs->inst->cfg.max_history) {
        return true;
    }
    if (!rs->inst->cfg.prune_history) {
        return false;
    }
    for (h = rs->hist_head; h != NULL; h = h->next) {
        if (h->ps_id == 0 || rws_ps_find(rs, h->ps_id) == NULL) {
            history_remove(rs, h);
            return true;
        }
    }
    return false;
}

static void
history_add(struct rws_session *rs, struct rws_sescmd *sc)
{
    const struct rws_config *c = &rs->inst->cfg;

    if (c->disable_history) {
        rs->hist_overflow = true;
        return;
    }
    if (!history_make_room(rs, sc)) {
        rs->hist_overflow = true;
        return;
    }
    sc->refs++;
    sc->next = NULL;
    if (rs->hist_tail != NULL) {
        rs->hist_tail->next = sc;
    } else {
        rs->hist_head = sc;
    }
    rs->hist_tail = sc;
    rs->hist_len++;
}

/* The execute of a prepared session command, replayed on its own: the
 * statement prepared afresh (answer dropped), executed as "-1" (the last
 * prepared statement: the execute in the history carries that id and its
 * parameter types), then closed, whatever became of the client's
 * statement since. */
static int
replay_ps_sescmd(struct rws_session *rs, unsigned idx, struct rws_sescmd *sc)
{
    static const unsigned char close_last[] = {0x05, 0x00, 0x00, 0x00,
                                               SL_COM_STMT_CLOSE, 0xff,
                                               0xff, 0xff, 0xff};
    struct sl_buf *prep = sl_buf_clone_new(sc->prep);
    struct sl_buf *exec;

    if (prep == NULL || rws_write(rs, idx, prep, RK_IGNORE, NULL) != SL_OK) {
        return SL_ERROR;
    }
    exec = sl_buf_clone_new(sc->buf);
    if (exec == NULL || rws_write(rs, idx, exec, RK_REPLAY, sc) != SL_OK) {
        return SL_ERROR;
    }
    exec = sl_buf_from(close_last, sizeof(close_last));
    return exec != NULL ? rws_write(rs, idx, exec, RK_IGNORE, NULL)
                        : SL_ERROR;
}

void
rws_replay_history(struct rws_session *rs, unsigned idx)
{
    for (struct rws_sescmd *sc = rs->hist_head; sc != NULL; sc = sc->next) {
        struct sl_buf *copy;

        if (sc->prep != NULL) {
            if (replay_ps_sescmd(rs, idx, sc) != SL_OK) {
                return;
            }
            continue;
        }
        copy = sl_buf_clone_new(sc->buf);
        if (copy == NULL ||
            rws_write(rs, idx, copy, RK_REPLAY, sc) != SL_OK) {
            return;
        }
    }
}

/* Any live connection, the master first; -1 when none. */
static int
any_live(struct rws_session *rs)
{
    if (rs->master >= 0 && rws_be_live(&rs->be[rs->master])) {
        return rs->master;
    }
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        if (rws_be_live(&rs->be[i])) {
            return (int)i;
        }
    }
    return -1;
}

/* A new session command of the session (one reference, no buffer yet),
 * or NULL when out of memory. */
static struct rws_sescmd *
sescmd_new(struct rws_session *rs, int cmd)
{
    struct rws_sescmd *sc = calloc(1, sizeof(*sc));

    if (sc == NULL ||
        (sc->results = calloc(rs->inst->nservers + 1, 1)) == NULL) {
        free(sc);
        return NULL;
    }
    sc->id = ++rs->next_sescmd;
    sc->refs = 1;
    sc->cmd = (uint8_t)cmd;
    return sc;
}

/* Send connection i its copy of session command sc (out taken) and count
 * it; false when it could not be sent. */
static bool
sescmd_send(struct rws_session *rs, struct rws_sescmd *sc, unsigned i,
            struct sl_buf *out)
{
    if (out == NULL || rws_write(rs, i, out, RK_SESCMD, sc) != SL_OK) {
        return false;
    }
    sl_server_count_route(rs->be[i].srv, false);
    atomic_fetch_add_explicit(&rws_count(rs->inst, i)->all, 1,
                              memory_order_relaxed);
    return true;
}

/*
 * Send a session command (buf taken) to every live connection; the
 * client gets the answer of the master's (or the first live one's).
 * ps_id: the client's id for COM_STMT_PREPARE, else 0.
 */
static int
exec_sescmd(struct rws_session *rs, struct sl_buf *buf, uint32_t ps_id)
{
    struct rws_instance *inst = rs->inst;
    struct rws_sescmd *sc;
    int sent = 0;

    if (any_live(rs) < 0) {
        rws_master_index(rs, true);
        if (any_live(rs) < 0) {
            rws_slave_index(rs, -1);
        }
    }
    if (any_live(rs) < 0 ||
        (sc = sescmd_new(rs, sl_mdb_command(buf))) == NULL) {
        sl_buf_free(buf);
        rws_send_error(rs, "No server available for a session command");
        return SL_OK;
    }
    sc->ps_id = ps_id;
    sc->buf = buf;
    sc->replier = any_live(rs);
    for (unsigned i = 0; i < inst->nservers; i++) {
        if (rws_be_live(&rs->be[i]) &&
            sescmd_send(rs, sc, i, sl_buf_clone_new(buf))) {
            sent++;
        }
    }
    atomic_fetch_add(&inst->route_all, 1);
    history_add(rs, sc);
    rws_sescmd_unref(rs, sc);
    if (sent == 0) {
        rws_send_error(rs, "Could not send a session command");
    }
    return SL_OK;
}

/* ---- prepared statements ---- */

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
        history_remove(rs, ps->sc);
        rws_sescmd_unref(rs, ps->sc);
    }
    free(ps->bids);
    free(ps->bparams);
    free(ps->types);
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

static int
route_prepare(struct rws_session *rs, struct sl_buf *buf)
{
    struct sl_qc_result qc;
    struct rws_ps *ps = ps_add(rs);

    if (ps == NULL) {
        sl_buf_free(buf);
        rws_send_error(rs, "Out of memory");
        return SL_OK;
    }
    if (!sl_qc_classify_buf(buf, &qc)) {
        qc.type = SL_QC_UNKNOWN;
    }
    ps->type = qc.type;
    ps->sescmd = sescmd_type(qc.type);
    ps->is_read = (qc.type & SL_QC_READ) &&
                  !(qc.type & (SL_QC_WRITE | SL_QC_DDL | SL_QC_MASTER_READ |
                               SL_QC_UNKNOWN | SL_QC_CALL));
    if (exec_sescmd(rs, buf, ps->id) != SL_OK) {
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

static int route_to(struct rws_session *rs, int idx, struct sl_buf *buf,
                    bool is_write);
static bool causal_hold(struct rws_session *rs, struct sl_buf *buf,
                        const struct sl_hint *hint);

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

static void track_trx(struct rws_session *rs, uint32_t type);
static bool changes_data(uint32_t type);
static void trx_on_moving_master(struct rws_session *rs, int *m);

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
        track_trx(rs, ps->type);
    }
    ro_trx = rs->trx_active && rs->trx_ro;
    to_master = !ro_trx && (!ps->is_read || rs->trx_active ||
                            rs->locked_to_master);
    if (to_master && cmd == SL_COM_STMT_EXECUTE) {
        trx_on_moving_master(rs, &idx);
    }
    if (idx >= 0) {
        /* the transaction stays on the old primary (no replay) */
    } else if (cmd == SL_COM_STMT_FETCH && ps->last >= 0 &&
        rws_be_live(&rs->be[ps->last])) {
        idx = ps->last;
    } else if (ro_trx && rs->ro_target >= 0 &&
               rws_be_live(&rs->be[rs->ro_target])) {
        idx = rs->ro_target;   /* all of it, BEGIN to COMMIT, on one */
    } else if (!to_master && causal_hold(rs, buf, NULL)) {
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
    if (cmd == SL_COM_STMT_EXECUTE) {
        rws_exec_save_types(buf, ps);
        rs->wrote |= changes_data(ps->type);
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
    rc = route_to(rs, idx, out, idx == rs->master);
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
    struct rws_sescmd *sc = sescmd_new(rs, SL_COM_STMT_EXECUTE);
    int sent = 0;

    track_trx(rs, ps->type);   /* a prepared SET autocommit=0 */
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
            sescmd_send(rs, sc, i, exec_for(rs, ps, buf, (int)i))) {
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
        history_add(rs, sc);
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

static int
route_ps_cmd(struct rws_session *rs, struct sl_buf *buf, int cmd)
{
    struct rws_ps *ps = rws_ps_find(rs, cmd_stmt_id(buf));

    if (ps == NULL) {
        /* Unknown statement: answered here, as the server words it. Not
         * passed on: the id is ours, and a server may hold a different
         * statement under the same number. */
        uint32_t id = cmd_stmt_id(buf);
        char msg[96];

        sl_buf_free(buf);
        if (expects_reply(cmd)) {
            snprintf(msg, sizeof(msg),
                     "Unknown prepared statement handler (%u) given to %s",
                     id, cmd == SL_COM_STMT_FETCH   ? "mysqld_stmt_fetch"
                         : cmd == SL_COM_STMT_RESET ? "mysqld_stmt_reset"
                                                    : "mysqld_stmt_execute");
            sl_session_send_error(rs->ses, 1243, "HY000", msg);
        }
        return SL_OK;
    }
    if (cmd == SL_COM_STMT_EXECUTE && ps->sescmd) {
        return exec_ps_sescmd(rs, buf, ps);
    }
    if (cmd == SL_COM_STMT_EXECUTE || cmd == SL_COM_STMT_FETCH) {
        return route_execute(rs, buf, ps, cmd);
    }
    return route_ps_all(rs, buf, ps, cmd);
}

/* ---- targets ---- */

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

/*
 * The session's master connection, connecting (when `connect`) to the
 * server the monitor calls Master if there is none; -1 when there is no
 * usable master. A master connection whose server lost the role is not
 * used (and is replaced when a new master exists).
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
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        uint32_t st = sl_server_status(rs->be[i].srv);

        if (!master_status_ok(st) || (st & SL_SRV_DRAINING)) {
            continue;
        }
        if (!rws_be_live(&rs->be[i]) &&
            (!connect || rws_connect(rs, i, true) != 0)) {
            continue;
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
         * causal_hold() for this read */
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
    int idx;

    for (size_t i = 0; i < n; i++) {
        struct rws_be *be = &rs->be[i];
        struct rws_srv_stats *s = &inst->stats[i];

        cand[i] = (struct rws_cand){.connected = rws_be_live(be)};
        cand[i].ok = (int)i != exclude &&
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

static int
named_index(struct rws_session *rs, const char *name)
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

/* Send the client's command (taken) to connection idx. */
static int
route_to(struct rws_session *rs, int idx, struct sl_buf *buf, bool is_write)
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
    if (expects_reply(cmd)) {
        /* for a retry or a replay (shares buf's blocks): a write refused
         * by a primary that a switchover is demoting goes again */
        rs->cur = sl_buf_clone_new(buf);
    }
    if (is_write && rs->trx_active && !rs->trx_ro && rs->trx_srv < 0) {
        rs->trx_srv = idx;
    }
    if (is_write && rs->inst->cfg.trx_replay && rs->trx_active &&
        !rs->trx_ro) {
        rws_trx_log_add(rs, rs->log_src != NULL ? rs->log_src : buf);
    }
    rs->log_src = NULL;
    sl_server_count_route(rs->be[idx].srv, is_write);
    atomic_fetch_add_explicit(is_write ? &rws_count(inst, idx)->writes
                                       : &rws_count(inst, idx)->reads,
                              1, memory_order_relaxed);
    if (!expects_reply(cmd)) {
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

/* A statement after which the session's GTID may have moved on
 * (causal_reads asks the primary for it). */
static bool
changes_data(uint32_t type)
{
    return (type & (SL_QC_WRITE | SL_QC_DDL | SL_QC_UNKNOWN | SL_QC_CALL |
                    SL_QC_LOAD_LOCAL | SL_QC_GSYSVAR_WRITE |
                    SL_QC_CREATE_TMP_TABLE | SL_QC_DROP_TABLE |
                    SL_QC_MULTI_STMT | SL_QC_EXEC_PREPARED)) != 0;
}

/* Transaction state before routing (the answers refine it). */
static void
track_trx(struct rws_session *rs, uint32_t type)
{
    if (type & SL_QC_BEGIN_TRX) {
        rs->trx_active = true;
        rs->trx_ro = (type & SL_QC_READ_ONLY_TRX) != 0;
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

/* A statement of this type sets session state only: every connection
 * runs it (SET, SET NAMES, SET autocommit, PREPARE ... FROM, ...). */
static bool
sescmd_type(uint32_t t)
{
    if (!(t & (SL_QC_SESSION_WRITE | SL_QC_ENABLE_AUTOCOMMIT |
               SL_QC_DISABLE_AUTOCOMMIT | SL_QC_PREPARE_NAMED |
               SL_QC_DEALLOC_PREPARE))) {
        return false;
    }
    if (!(t & (SL_QC_WRITE | SL_QC_DDL | SL_QC_READ | SL_QC_MULTI_STMT |
               SL_QC_GSYSVAR_WRITE | SL_QC_UNKNOWN))) {
        return true;
    }
    /* SET @a = (SELECT ...) */
    return (t & SL_QC_USERVAR_WRITE) &&
           !(t & (SL_QC_WRITE | SL_QC_DDL | SL_QC_MULTI_STMT));
}

static enum target
decide(struct rws_session *rs, const struct sl_qc_result *qc)
{
    const struct rws_config *c = &rs->inst->cfg;
    uint32_t t = qc->type;

    if (sescmd_type(t)) {
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
    if (!(t & SL_QC_READ) ||
        (t & (SL_QC_WRITE | SL_QC_DDL | SL_QC_MASTER_READ | SL_QC_UNKNOWN |
              SL_QC_CALL | SL_QC_MULTI_STMT | SL_QC_USERVAR_WRITE |
              SL_QC_GSYSVAR_WRITE | SL_QC_CREATE_TMP_TABLE |
              SL_QC_LOAD_LOCAL | SL_QC_EXEC_PREPARED))) {
        return T_MASTER;
    }
    if (c->vars_in_master && (t & SL_QC_USERVAR_READ)) {
        return T_MASTER;
    }
    if (rs->ntmp > 0 && is_tmp_table(rs, qc)) {
        return T_MASTER;
    }
    return T_SLAVE;
}

static void
after_route(struct rws_session *rs, const struct sl_qc_result *qc)
{
    const struct rws_config *c = &rs->inst->cfg;

    if ((c->strict_multi_stmt && (qc->type & SL_QC_MULTI_STMT)) ||
        (c->strict_sp_calls && (qc->type & SL_QC_CALL))) {
        rs->locked_to_master = true;
    }
    if ((qc->type & SL_QC_SESSION_WRITE) && !sescmd_type(qc->type) &&
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

/*
 * A read-write transaction open on a primary that a switchover is
 * demoting goes on there (*m set): the monitor drains the old primary's
 * transactions before it sets read_only, and one still open then gets
 * 1290 for its next write or COMMIT, which replays it on the new primary
 * (transaction_replay; see read_only_refusal). New transactions and
 * autocommit writes are held (rws_master_index skips a moving primary).
 */
static void
trx_on_moving_master(struct rws_session *rs, int *m)
{
    struct rws_be *be;

    *m = -1;
    if (!rs->trx_active || rs->trx_ro || rs->master < 0 ||
        rs->trx_srv != rs->master) {
        return;   /* none, or a new one: held */
    }
    be = &rs->be[rs->master];
    if (rws_be_live(be) && (sl_server_status(be->srv) & SL_SRV_MOVING) &&
        rws_primary_moving(rs->inst)) {
        *m = rs->master;
    }
}

static int
route_write(struct rws_session *rs, struct sl_buf *buf,
            const struct sl_hint *hint)
{
    int m;

    trx_on_moving_master(rs, &m);
    if (m < 0) {
        m = rws_master_index(rs, true);
    }

    if (m < 0) {
        return rws_hold(rs, buf, hint);
    }
    rs->wait_deadline = 0;
    return route_to(rs, m, buf, true);
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
        idx = named_index(rs, h->server);
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
    return route_to(rs, idx, buf, idx == rs->master);
}

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
static bool
causal_position(struct rws_session *rs, struct sl_buf *buf,
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

/* causal_reads: a read while the write's GTID is being fetched waits for
 * it (buf taken). */
static bool
causal_hold(struct rws_session *rs, struct sl_buf *buf,
            const struct sl_hint *hint)
{
    if (causal_position(rs, buf, hint)) {
        return true;
    }
    if (rs->inst->cfg.causal != RWS_CAUSAL_LOCAL || !rs->gtid_pending) {
        return false;
    }
    rs->waiting = buf;   /* routed when the write's GTID is known */
    rs->waiting_hint = hint != NULL ? *hint : (struct sl_hint){.type = 0};
    return true;
}

/* A read outside a read-write transaction. */
static int
route_read(struct rws_session *rs, struct sl_buf *buf,
           const struct sl_hint *hint)
{
    int idx;

    if (rs->trx_ro && rs->trx_active && rs->ro_target >= 0 &&
        rws_be_live(&rs->be[rs->ro_target])) {
        return route_to(rs, rs->ro_target, buf, false);
    }
    if (causal_hold(rs, buf, hint)) {
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
    return route_to(rs, idx, buf, idx == rs->master);
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
    track_trx(rs, qc.type);
    if (changes_data(qc.type)) {
        rs->wrote = true;
    }
    t = decide(rs, &qc);
    if (t != T_ALL) {
        const struct sl_hint *h = hint->type != SL_HINT_NONE ? hint
                                                             : &qc.hint;
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
        rc = exec_sescmd(rs, buf, 0);
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
        return route_prepare(rs, buf);
    case SL_COM_STMT_EXECUTE:
    case SL_COM_STMT_FETCH:
    case SL_COM_STMT_RESET:
    case SL_COM_STMT_CLOSE:
    case SL_COM_STMT_SEND_LONG_DATA:
        return route_ps_cmd(rs, buf, cmd);
    case SL_COM_RESET_CONNECTION:
        rws_ps_free_all(rs);
        rws_history_free(rs);
        rs->ntmp = 0;
        rs->trx_active = rs->trx_ro = false;
        rs->trx_srv = -1;
        rs->autocommit = true;
        return exec_sescmd(rs, buf, 0);
    case SL_COM_CHANGE_USER:
        rws_ps_free_all(rs);
        rws_history_free(rs);
        rs->ntmp = 0;
        return exec_sescmd(rs, buf, 0);
    case SL_COM_INIT_DB:
    case SL_COM_SET_OPTION:
        return exec_sescmd(rs, buf, 0);
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
