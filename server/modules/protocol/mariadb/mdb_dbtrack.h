/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Default-database tracking for one client connection (mdb_dbtrack.c).
 *
 * COM_INIT_DB, a COM_QUERY that is a USE and COM_CHANGE_USER change the
 * session's default database, and only when their own answer is an OK.
 * A client may pipeline (send several commands before reading an
 * answer), so every command that gets an answer has an ordinal, each
 * change waits in a FIFO with its command's ordinal, and the n-th
 * complete answer the client gets decides the n-th command's change:
 *
 *   command routed --INIT_DB/USE--> queued {ordinal, db}
 *   answer n complete --queued n, OK--> database = db
 *                     --queued n, ERR--> unchanged
 *                     --queued n, UNKNOWN--> unsure until the next change
 *
 * A multi-statement that may hold a USE (its answer does not say which
 * statement failed) and a name too long to hold are UNKNOWN. While any
 * change is queued, or after an UNKNOWN one, the database is "unsure"
 * (sl_session_db_unsure): the cache filter does not key on it.
 *
 * The same ordinals give the number of commands still waiting for their
 * answers (sl_session_answers_pending): a filter answering by itself
 * must not overtake them.
 *
 * The tracker does not touch the session: its calls say what to set.
 * Context: worker-owned (the client DCB's worker).
 */
#ifndef MDB_DBTRACK_H
#define MDB_DBTRACK_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>

#include "mdb_parse.h"

/* Changes in flight at once; more pipelined changes fold into the last
 * one, which then becomes UNKNOWN. */
#define MDB_DBTRACK_MAX 8

enum mdb_db_kind {
    MDB_DB_SET,        /* COM_INIT_DB, USE: db on OK, unchanged on ERR */
    MDB_DB_UNKNOWN,    /* outcome cannot be told */
    MDB_DB_RESET,      /* COM_CHANGE_USER: db on OK, unknown on ERR */
};

struct mdb_dbchange {
    uint64_t cmd;                /* ordinal of its command */
    uint8_t kind;                /* enum mdb_db_kind */
    char db[MDB_DB_MAX];
};

struct mdb_dbtrack {
    uint64_t sent;               /* commands routed that get an answer */
    uint64_t answered;           /* complete answers the client got */
    struct mdb_dbchange *q;      /* ring of MDB_DBTRACK_MAX, allocated at
                                  * the first change */
    unsigned head, len;
    bool unknown;                /* the last change could not be told */
};

/* The verdict of a call: set the session's database to db (when not
 * NULL; valid until the next call), its unsure flag to unsure, and the
 * number of commands still waiting for their answers to pending. */
struct mdb_db_verdict {
    const char *db;
    bool unsure;
    uint64_t pending;
};

/* A complete command from the client about to be routed (cmd: its
 * packets, header included; not taken). Counts it if it gets an answer
 * and queues its change, if any. */
struct mdb_db_verdict mdb_dbtrack_command(struct mdb_dbtrack *t,
                                          const struct sl_buf *cmd);
/* A COM_CHANGE_USER to db is about to be routed; the session's database
 * is set to db now (the backends rebuild the command from it), so the
 * changes queued before it no longer matter. */
struct mdb_db_verdict mdb_dbtrack_change_user(struct mdb_dbtrack *t,
                                              const char *db);
/* The client got a complete answer (ok: it ended with an OK packet), or
 * an error made up by Sluice in place of one. */
struct mdb_db_verdict mdb_dbtrack_answered(struct mdb_dbtrack *t, bool ok);
void mdb_dbtrack_free(struct mdb_dbtrack *t);

#endif
