/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reply tracker (state diagram in mdb_reply.h).
 *
 * Only packet headers and the first few payload bytes are examined: the
 * first byte classifies the packet, and OK/EOF/ERR/prepare packets carry
 * their interesting fields in their first MDB_PEEK bytes. Result rows are
 * counted, never read.
 */
#include <stdlib.h>
#include <string.h>

#include <sluice/mariadb.h>

#include "mdb_reply.h"

enum phase {
    PH_START,
    PH_COLDEF,
    PH_COLDEF_EOF,
    PH_ROWS,
    PH_PREP_PARAMS,
    PH_PREP_PARAMS_EOF,
    PH_PREP_COLS,
    PH_PREP_COLS_EOF,
    PH_FIELD_LIST,
};

void
mdb_tracker_init(struct mdb_tracker *t, uint32_t caps)
{
    memset(t, 0, sizeof(*t));
    t->caps = caps;
}

void
mdb_tracker_free(struct mdb_tracker *t)
{
    free(t->q);
    t->q = NULL;
    t->qcap = t->qlen = t->qhead = 0;
}

bool
mdb_expects_reply(uint8_t cmd)
{
    return cmd != SL_COM_QUIT && cmd != SL_COM_STMT_CLOSE &&
           cmd != SL_COM_STMT_SEND_LONG_DATA;
}

int
mdb_tracker_expect(struct mdb_tracker *t, uint8_t cmd)
{
    if (!mdb_expects_reply(cmd)) {
        return 0;
    }
    if (t->qlen == t->qcap) {
        size_t cap = t->qcap ? t->qcap * 2 : 16;
        uint8_t *q = malloc(cap);

        if (q == NULL) {
            return -1;
        }
        for (size_t i = 0; i < t->qlen; i++) {
            q[i] = t->q[(t->qhead + i) % t->qcap];
        }
        free(t->q);
        t->q = q;
        t->qcap = cap;
        t->qhead = 0;
    }
    t->q[(t->qhead + t->qlen) % t->qcap] = cmd;
    t->qlen++;
    return 0;
}

size_t
mdb_tracker_pending(const struct mdb_tracker *t)
{
    return t->qlen;
}

static uint16_t
u16_at(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* OK payload (p[0] is 0x00 or 0xFE): affected rows, insert id, status,
 * warnings. Fields beyond avail are left unchanged. */
static void
parse_ok(struct sl_reply *r, const unsigned char *p, size_t avail)
{
    size_t off = 1;
    size_t n;
    uint64_t v;

    r->is_ok = true;
    r->is_err = false;
    if ((n = sl_mdb_get_lenenc(p + off, avail - off, &v)) == 0) {
        return;
    }
    r->affected_rows = v;
    off += n;
    if ((n = sl_mdb_get_lenenc(p + off, avail - off, &v)) == 0) {
        return;
    }
    r->last_insert_id = v;
    off += n;
    if (off + 4 <= avail) {
        r->server_status = u16_at(p + off);
        r->warnings = u16_at(p + off + 2);
    }
}

/* A 0xFE terminator: an old EOF (5 bytes) or an OK with 0xFE header. */
static void
parse_eof(struct sl_reply *r, uint32_t len, const unsigned char *p,
          size_t avail)
{
    if (len >= 7) {
        parse_ok(r, p, avail);
        r->is_ok = false;
    } else if (avail >= 5) {
        r->warnings = u16_at(p + 1);
        r->server_status = u16_at(p + 3);
    }
}

static void
parse_err(struct sl_reply *r, const unsigned char *p, size_t avail)
{
    r->is_err = true;
    r->is_ok = false;
    r->error_code = avail >= 3 ? u16_at(p + 1) : 0;
    if (avail >= 9 && p[3] == '#') {
        memcpy(r->sqlstate, p + 4, 5);
    } else {
        memcpy(r->sqlstate, "HY000", 5);
    }
    r->sqlstate[5] = '\0';
}

static int
finish(struct mdb_tracker *t)
{
    t->reply.state = SL_REPLY_DONE;
    t->reply.complete = true;
    t->active = false;
    t->qhead = (t->qhead + 1) % t->qcap;
    t->qlen--;
    return MDB_TRK_DONE;
}

/* An OK or terminator ended one result: more results, or the end. */
static int
end_result(struct mdb_tracker *t)
{
    t->reply.results++;
    t->reply.more_results =
        (t->reply.server_status & SL_SERVER_MORE_RESULTS_EXIST) != 0;
    if (t->reply.more_results) {
        t->phase = PH_START;
        t->reply.state = SL_REPLY_START;
        return MDB_TRK_MORE;
    }
    return finish(t);
}

/* After a prepare's parameter definitions: its columns or the end. */
static int
prep_columns(struct mdb_tracker *t)
{
    if (t->prep_cols == 0) {
        return finish(t);
    }
    t->left = t->prep_cols;
    t->phase = PH_PREP_COLS;
    return MDB_TRK_MORE;
}

static int
start_prepare(struct mdb_tracker *t, const unsigned char *p, size_t avail)
{
    struct sl_reply *r = &t->reply;

    if (avail < 9) {
        return finish(t);
    }
    r->is_ok = true;
    r->stmt_id = (uint32_t)p[1] | ((uint32_t)p[2] << 8) |
                 ((uint32_t)p[3] << 16) | ((uint32_t)p[4] << 24);
    t->prep_cols = u16_at(p + 5);
    r->param_count = u16_at(p + 7);
    r->field_count = t->prep_cols;
    r->warnings = avail >= 12 ? u16_at(p + 10) : 0;
    r->state = SL_REPLY_PREPARE;
    if (r->param_count > 0) {
        t->left = r->param_count;
        t->phase = PH_PREP_PARAMS;
        return MDB_TRK_MORE;
    }
    return prep_columns(t);
}

static int on_rows(struct mdb_tracker *t, uint32_t len,
                   const unsigned char *p, size_t avail);

/* The first packet of a result (or of the answer). */
static int
on_start(struct mdb_tracker *t, uint32_t len, const unsigned char *p,
         size_t avail)
{
    struct sl_reply *r = &t->reply;
    uint64_t n;

    if (len == 0 || r->command == SL_COM_STATISTICS) {
        return finish(t);
    }
    r->rows = 0;
    if (r->command == SL_COM_STMT_FETCH) {
        /* Rows of an open cursor: no count, no definitions. */
        t->phase = PH_ROWS;
        r->state = SL_REPLY_RSET_ROWS;
        return on_rows(t, len, p, avail);
    }
    r->field_count = 0;
    switch (p[0]) {
    case 0xff:
        parse_err(r, p, avail);
        return finish(t);
    case 0x00:
        if (r->command == SL_COM_STMT_PREPARE) {
            return start_prepare(t, p, avail);
        }
        parse_ok(r, p, avail);
        return end_result(t);
    case 0xfb:
        if (r->command == SL_COM_QUERY) {
            r->state = SL_REPLY_LOAD_DATA;
            return MDB_TRK_MORE;
        }
        break;
    case 0xfe:
        if (len < SL_MDB_MAX_PAYLOAD) {
            parse_eof(r, len, p, avail);
            return end_result(t);
        }
        break;
    default:
        break;
    }
    if (r->command == SL_COM_FIELD_LIST) {
        t->phase = PH_FIELD_LIST;
        r->state = SL_REPLY_RSET_COLDEF;
        r->field_count = 1;
        return MDB_TRK_MORE;
    }
    if (sl_mdb_get_lenenc(p, avail, &n) == 0 || n == 0) {
        return finish(t);   /* not a result set: give up on this answer */
    }
    r->field_count = n;
    r->is_ok = r->is_err = false;
    t->left = n;
    t->phase = PH_COLDEF;
    r->state = SL_REPLY_RSET_COLDEF;
    return MDB_TRK_MORE;
}

static int
on_rows(struct mdb_tracker *t, uint32_t len, const unsigned char *p,
        size_t avail)
{
    struct sl_reply *r = &t->reply;

    if (len > 0 && p[0] == 0xff) {
        parse_err(r, p, avail);
        return finish(t);
    }
    if (len > 0 && p[0] == 0xfe && len < SL_MDB_MAX_PAYLOAD) {
        parse_eof(r, len, p, avail);
        return end_result(t);
    }
    r->rows++;
    return MDB_TRK_MORE;
}

static int
on_coldef_eof(struct mdb_tracker *t, uint32_t len, const unsigned char *p,
              size_t avail)
{
    struct sl_reply *r = &t->reply;

    if (len > 0 && p[0] == 0xff) {
        parse_err(r, p, avail);
        return finish(t);
    }
    parse_eof(r, len, p, avail);
    /* Only a binary-protocol execute opens a client cursor. The status
     * word is the session's, so a result sent while a stored program
     * has a cursor of its own open (OPEN c; ... SELECT x, FOR rec IN
     * (SELECT ...) DO ... END FOR) carries the flag too, and its rows
     * follow as usual. */
    if (r->command == SL_COM_STMT_EXECUTE &&
        (r->server_status & SL_SERVER_STATUS_CURSOR_EXISTS)) {
        return finish(t);   /* rows come with COM_STMT_FETCH */
    }
    t->phase = PH_ROWS;
    r->state = SL_REPLY_RSET_ROWS;
    return MDB_TRK_MORE;
}

/* Count down definitions; true when the last one has arrived. */
static bool
definition_done(struct mdb_tracker *t)
{
    return t->left == 0 || --t->left == 0;
}

static int
dispatch(struct mdb_tracker *t, uint32_t len, const unsigned char *p,
         size_t avail)
{
    bool eof = (t->caps & SL_CAP_DEPRECATE_EOF) == 0;

    switch (t->phase) {
    case PH_START:
        return on_start(t, len, p, avail);
    case PH_COLDEF:
        if (definition_done(t)) {
            t->phase = eof ? PH_COLDEF_EOF : PH_ROWS;
            t->reply.state =
                eof ? SL_REPLY_RSET_COLDEF_EOF : SL_REPLY_RSET_ROWS;
        }
        return MDB_TRK_MORE;
    case PH_COLDEF_EOF:
        return on_coldef_eof(t, len, p, avail);
    case PH_ROWS:
        return on_rows(t, len, p, avail);
    case PH_PREP_PARAMS:
        if (!definition_done(t)) {
            return MDB_TRK_MORE;
        }
        if (eof) {
            t->phase = PH_PREP_PARAMS_EOF;
            return MDB_TRK_MORE;
        }
        return prep_columns(t);
    case PH_PREP_PARAMS_EOF:
        return prep_columns(t);
    case PH_PREP_COLS:
        if (!definition_done(t)) {
            return MDB_TRK_MORE;
        }
        if (eof) {
            t->phase = PH_PREP_COLS_EOF;
            return MDB_TRK_MORE;
        }
        return finish(t);
    case PH_PREP_COLS_EOF:
        return finish(t);
    case PH_FIELD_LIST:
        if (len > 0 && p[0] == 0xff) {
            parse_err(&t->reply, p, avail);
            return finish(t);
        }
        if (len > 0 && p[0] == 0xfe && len < SL_MDB_MAX_PAYLOAD) {
            parse_eof(&t->reply, len, p, avail);
            return finish(t);
        }
        t->reply.field_count++;
        return MDB_TRK_MORE;
    default:
        return finish(t);
    }
}

/* A packet with no command waiting: describe it alone. */
static int
unexpected(struct mdb_tracker *t, uint32_t len, const unsigned char *p,
           size_t avail)
{
    memset(&t->reply, 0, sizeof(t->reply));
    t->reply.bytes = SL_MDB_HDR_LEN + (uint64_t)len;
    t->reply.complete = true;
    t->reply.state = SL_REPLY_DONE;
    if (len > 0 && p[0] == 0xff) {
        parse_err(&t->reply, p, avail);
    }
    t->cont = len == SL_MDB_MAX_PAYLOAD;
    return MDB_TRK_UNEXPECTED;
}

int
mdb_tracker_packet(struct mdb_tracker *t, uint32_t len,
                   const unsigned char *p, size_t avail)
{
    unsigned char peek[MDB_PEEK] = {0};
    size_t want = len < MDB_PEEK ? len : MDB_PEEK;
    bool was_cont = t->cont;
    int rc;

    if (avail < want) {
        /* Defensive: a short peek reads as zeros, never out of bounds. */
        if (avail > 0) {
            memcpy(peek, p, avail);
        }
        p = peek;
    }
    avail = want;
    t->cont = len == SL_MDB_MAX_PAYLOAD;
    if (was_cont) {
        /* The rest of a large row or definition: nothing to look at. */
        t->reply.bytes += SL_MDB_HDR_LEN + (uint64_t)len;
        return MDB_TRK_MORE;
    }
    if (!t->active) {
        if (t->qlen == 0) {
            return unexpected(t, len, p, avail);
        }
        memset(&t->reply, 0, sizeof(t->reply));
        t->reply.command = t->q[t->qhead];
        t->active = true;
        t->phase = PH_START;
    }
    t->reply.bytes += SL_MDB_HDR_LEN + (uint64_t)len;
    rc = dispatch(t, len, p, avail);
    if (rc == MDB_TRK_DONE && t->cont) {
        /* A packet ending the answer cannot be continued; if it claims to
         * be, its continuation is passed through as part of this answer. */
        t->cont = false;
    }
    return rc;
}
