/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Default-database tracking: which command's answer decides which change
 * (the FIFO and its diagram are in mdb_dbtrack.h).
 *
 * A COM_QUERY is looked at only when its text holds "use" (any case) not
 * followed by an identifier character: every USE statement does, also
 * one inside a comment the server executes ("/" "*!50000USE db*" "/"),
 * and most statements do not, so the classifier runs for few of them. It
 * then says whether the text is a single USE (its database is queued) or
 * a multi-statement that changes session state (UNKNOWN).
 *
 * Context: worker-owned (the client DCB's worker).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/mariadb.h>

#include "mdb_dbtrack.h"
#include "mdb_reply.h"

static struct mdb_db_verdict
current(const struct mdb_dbtrack *t)
{
    struct mdb_db_verdict v = {NULL, t->len > 0 || t->unknown,
                               t->sent - t->answered};

    return v;
}

/* Queue a change for the command just counted (ordinal t->sent). When
 * the ring is full the newest change absorbs this one as UNKNOWN: only
 * the last state matters and it cannot be told any more. */
static struct mdb_db_verdict
push(struct mdb_dbtrack *t, enum mdb_db_kind kind, const char *db, size_t n)
{
    struct mdb_dbchange *c;

    if (t->q == NULL &&
        (t->q = malloc(MDB_DBTRACK_MAX * sizeof(*t->q))) == NULL) {
        t->unknown = true;
        return current(t);
    }
    if (t->len == MDB_DBTRACK_MAX) {
        c = &t->q[(t->head + t->len - 1) % MDB_DBTRACK_MAX];
        kind = MDB_DB_UNKNOWN;
        n = 0;
    } else {
        c = &t->q[(t->head + t->len) % MDB_DBTRACK_MAX];
        t->len++;
    }
    if (kind != MDB_DB_UNKNOWN && n >= sizeof(c->db)) {
        kind = MDB_DB_UNKNOWN;
        n = 0;
    }
    c->cmd = t->sent;
    c->kind = (uint8_t)kind;
    memcpy(c->db, db, n);
    c->db[n] = '\0';
    return current(t);
}

static bool
ident_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '$' || c >= 0x80;
}

/* "use" (any case) at p, followed by a non-identifier byte or the end */
static bool
use_at(const unsigned char *p, const unsigned char *end)
{
    return end - p >= 3 && (p[0] | 0x20) == 'u' && (p[1] | 0x20) == 's' &&
           (p[2] | 0x20) == 'e' && (end - p == 3 || !ident_char(p[3]));
}

/* may_use over one contiguous text: eight bytes at a time, looking only
 * at words holding a 'u' or 'U' (c | 0x20 == 'u'; the zero-byte test may
 * flag a word without one, never miss one). */
static bool
may_use_flat(const unsigned char *p, const unsigned char *end)
{
    const uint64_t ones = 0x0101010101010101ull;

    for (; end - p >= 8; p += 8) {
        uint64_t w;

        memcpy(&w, p, 8);
        w = (w | 0x2020202020202020ull) ^ 0x7575757575757575ull;
        if (((w - ones) & ~w & 0x8080808080808080ull) != 0) {
            for (int i = 0; i < 8; i++) {
                if (use_at(p + i, end)) {
                    return true;
                }
            }
        }
    }
    for (; p < end; p++) {
        if (use_at(p, end)) {
            return true;
        }
    }
    return false;
}

/* Might the statement text hold a USE? A false "yes" only costs a
 * classification; a false "no" must be impossible. */
static bool
may_use(const struct sl_buf *cmd)
{
    size_t skip = SL_MDB_HDR_LEN + 1;
    unsigned m = 0;   /* letters of "use" matched */

    if (sl_buf_len(cmd) > SL_MDB_HDR_LEN + SL_MDB_MAX_PAYLOAD - 1) {
        return true;  /* several packets: their headers split the text */
    }
    if (cmd->head != NULL && cmd->head->next == NULL &&
        (size_t)(cmd->head->end - cmd->head->start) >= skip) {
        return may_use_flat(cmd->head->start + skip, cmd->head->end);
    }
    for (const struct sl_seg *s = cmd->head; s != NULL; s = s->next) {
        const unsigned char *p = s->start;
        size_t n = (size_t)(s->end - p) < skip ? (size_t)(s->end - p)
                                                : skip;

        skip -= n;
        for (p += n; p < s->end; p++) {
            unsigned char c = (unsigned char)(*p | 0x20);

            if (m == 3 && !ident_char(*p)) {
                return true;
            }
            m = c == (unsigned char)"use"[m % 3] && m < 3 ? m + 1
                                                          : (c == 'u');
        }
    }
    return m == 3;
}

static struct mdb_db_verdict
note_query(struct mdb_dbtrack *t, const struct sl_buf *cmd)
{
    struct sl_qc_result qc;

    if (!sl_qc_classify_buf(cmd, &qc) || (qc.type & SL_QC_UNKNOWN)) {
        return push(t, MDB_DB_UNKNOWN, "", 0);
    }
    if (qc.type & SL_QC_MULTI_STMT) {
        return qc.type & SL_QC_SESSION_WRITE
                   ? push(t, MDB_DB_UNKNOWN, "", 0)
                   : current(t);
    }
    if (qc.op != SL_QC_OP_USE) {
        return current(t);
    }
    if (strlen(qc.name) >= SL_QC_NAME_MAX - 1) {
        return push(t, MDB_DB_UNKNOWN, "", 0);   /* may be truncated */
    }
    return push(t, MDB_DB_SET, qc.name, strlen(qc.name));
}

static struct mdb_db_verdict
note_init_db(struct mdb_dbtrack *t, const struct sl_buf *cmd)
{
    char name[MDB_DB_MAX];
    size_t n = sl_buf_len(cmd) - SL_MDB_HDR_LEN - 1;

    if (n >= sizeof(name)) {
        return push(t, MDB_DB_UNKNOWN, "", 0);
    }
    sl_buf_copy_out(cmd, SL_MDB_HDR_LEN + 1, n, name);
    if (memchr(name, '\0', n) != NULL) {
        return push(t, MDB_DB_UNKNOWN, "", 0);
    }
    return push(t, MDB_DB_SET, name, n);
}

struct mdb_db_verdict
mdb_dbtrack_command(struct mdb_dbtrack *t, const struct sl_buf *cmd)
{
    int c = sl_mdb_command(cmd);

    if (c < 0 || !mdb_expects_reply((uint8_t)c)) {
        return current(t);
    }
    t->sent++;
    if (c == SL_COM_INIT_DB) {
        return note_init_db(t, cmd);
    }
    if (c == SL_COM_QUERY && may_use(cmd)) {
        return note_query(t, cmd);
    }
    return current(t);
}

struct mdb_db_verdict
mdb_dbtrack_change_user(struct mdb_dbtrack *t, const char *db)
{
    struct mdb_db_verdict v;

    t->sent++;
    t->len = 0;
    v = push(t, MDB_DB_RESET, db, strlen(db));
    v.db = db;
    return v;
}

struct mdb_db_verdict
mdb_dbtrack_answered(struct mdb_dbtrack *t, bool ok)
{
    struct mdb_db_verdict v = {NULL, false, 0};
    struct mdb_dbchange *c;

    if (t->answered < t->sent) {
        t->answered++;
    }
    while (t->len > 0 && (c = &t->q[t->head])->cmd <= t->answered) {
        t->head = (t->head + 1) % MDB_DBTRACK_MAX;
        t->len--;
        if (c->cmd < t->answered || c->kind == MDB_DB_UNKNOWN) {
            t->unknown = true;   /* UNKNOWN, or its answer was missed */
        } else if (ok) {
            t->unknown = false;
            v.db = c->db;
        } else if (c->kind == MDB_DB_RESET) {
            t->unknown = true;
        }
    }
    v.unsure = t->len > 0 || t->unknown;
    v.pending = t->sent - t->answered;
    return v;
}

void
mdb_dbtrack_free(struct mdb_dbtrack *t)
{
    free(t->q);
    t->q = NULL;
    t->len = 0;
}
