/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's session commands: statements that set session state
 * (SET, USE, COM_INIT_DB, COM_CHANGE_USER, a PREPARE, ...) and so go to
 * every connection of the session.
 *
 * Each gets an id and is kept (refcounted: by the history and by each
 * connection's pending expectation) in the session's history until
 * pruned (max_sescmd_history, prune_sescmd_history); a connection opened
 * later gets the history replayed first (rws_replay_history) with the
 * answers dropped. The client gets the answer of one connection, the
 * replier (the primary when it has one); every other connection's OK/ERR
 * is compared with it when both are known, and one that disagrees is
 * closed (rws_drop_backend). A prepared session command's execute is
 * replayed self-contained (its PREPARE, the execute as "-1", a CLOSE).
 *
 * Context: worker-owned.
 */
#define SL_LOG_TAG "readwritesplit"

#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>
#include <sluice/server.h>
#include <sluice/session.h>

#include "rws.h"

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
void
rws_history_remove(struct rws_session *rs, struct rws_sescmd *sc)
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
                rws_history_remove(rs, h);
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
            rws_history_remove(rs, h);
            return true;
        }
    }
    return false;
}

void
rws_history_add(struct rws_session *rs, struct rws_sescmd *sc)
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
struct rws_sescmd *
rws_sescmd_new(struct rws_session *rs, int cmd)
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
bool
rws_sescmd_send(struct rws_session *rs, struct rws_sescmd *sc, unsigned i,
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
int
rws_exec_sescmd(struct rws_session *rs, struct sl_buf *buf, uint32_t ps_id)
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
        (sc = rws_sescmd_new(rs, sl_mdb_command(buf))) == NULL) {
        sl_buf_free(buf);
        rws_send_error(rs, "No server available for a session command");
        return SL_OK;
    }
    sc->ps_id = ps_id;
    sc->buf = buf;
    sc->replier = any_live(rs);
    for (unsigned i = 0; i < inst->nservers; i++) {
        if (rws_be_live(&rs->be[i]) &&
            rws_sescmd_send(rs, sc, i, sl_buf_clone_new(buf))) {
            sent++;
        }
    }
    atomic_fetch_add(&inst->route_all, 1);
    rws_history_add(rs, sc);
    rws_sescmd_unref(rs, sc);
    if (sent == 0) {
        rws_send_error(rs, "Could not send a session command");
    }
    return SL_OK;
}

/* ---- answers ---- */

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
                rws_drop_backend(rs, &rs->be[i], "its session command answer differs from the master's");
            }
            sc->results[i] = 0;
        }
        return;
    }
    if (sc->result == 0) {
        sc->results[be->idx] = res;   /* checked when the replier answers */
    } else if (sc->result != res) {
        rws_drop_backend(rs, be, "its session command answer differs from the master's");
    }
}

int
rws_sescmd_answer(struct rws_session *rs, struct rws_be *be,
                  struct rws_expect *e, struct sl_buf *buf,
                  const struct sl_reply *reply)
{
    struct rws_sescmd *sc = e->sc;
    bool to_client = e->kind == RK_SESCMD && (int)be->idx == sc->replier;
    bool first = !e->started;

    if (sc->cmd == SL_COM_STMT_PREPARE &&
        !rws_prepare_answer(rs, be, sc, first ? buf : NULL, reply,
                            to_client)) {
        sl_buf_free(buf);
        rws_send_error(rs, "Out of memory while answering a PREPARE");
        sl_session_close(rs->ses, "out of memory");
        return SL_OK;
    }
    if (reply->complete) {
        check_sescmd(rs, be, sc, result_of(reply));
        if (to_client && (int)be->idx == rs->master) {
            rws_refresh_trx(rs, reply);   /* SET autocommit=... */
        }
    }
    if (to_client) {
        if (sc->cmd == SL_COM_STMT_PREPARE && rs->inst->cfg.reuse_ps) {
            rws_prepare_keep(rs, sc, buf, reply);
        }
        return sl_session_reply(rs->ses, buf, reply);
    }
    sl_buf_free(buf);
    return SL_OK;
}

/* A session command whose replier failed: another connection answers. */
bool
rws_reassign_sescmds(struct rws_session *rs, struct rws_be *failed)
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
