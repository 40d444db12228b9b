/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The query classifier: what a statement does, from its SQL text, without
 * building a syntax tree. Routers (readwritesplit), filters (cache,
 * namedserverfilter, hintfilter) and the admin API use it.
 *
 * Input is the payload of a COM_QUERY or COM_STMT_PREPARE (the SQL text,
 * without the command byte). The classifier tokenizes: quoted strings,
 * backticked identifiers, escapes, comments (--, #, C-style) are skipped
 * correctly; executable comments (/ *! ... * /, / *!50100 ... * /,
 * / *M! ... * /) are read as SQL; keywords inside identifiers or strings
 * never count.
 *
 * Context: pure functions, any thread, no allocation (results are written
 * into the caller's struct; names are truncated to SL_QC_NAME_MAX-1).
 */
#ifndef SLUICE_CLASSIFIER_H
#define SLUICE_CLASSIFIER_H

#include <sluice/ccdefs.h>

/* Type bits: a statement may set several. */
enum sl_qc_type {
    SL_QC_READ = 1u << 0,              /* reads data (SELECT, SHOW, ...) */
    SL_QC_WRITE = 1u << 1,             /* modifies data (DML) */
    SL_QC_DDL = 1u << 2,               /* CREATE/ALTER/DROP/TRUNCATE/... */
    SL_QC_SESSION_WRITE = 1u << 3,     /* changes session state: must reach
                                        * every backend (SET, USE, SET NAMES,
                                        * PREPARE/DEALLOCATE in SQL) */
    SL_QC_USERVAR_WRITE = 1u << 4,     /* assigns a user variable */
    SL_QC_USERVAR_READ = 1u << 5,      /* reads @var */
    SL_QC_SYSVAR_READ = 1u << 6,       /* reads @@var */
    SL_QC_GSYSVAR_WRITE = 1u << 7,     /* SET GLOBAL */
    SL_QC_BEGIN_TRX = 1u << 8,         /* BEGIN, START TRANSACTION, XA START */
    SL_QC_COMMIT = 1u << 9,            /* COMMIT, XA COMMIT */
    SL_QC_ROLLBACK = 1u << 10,         /* ROLLBACK (not TO SAVEPOINT) */
    SL_QC_ENABLE_AUTOCOMMIT = 1u << 11,  /* SET autocommit=1: also COMMIT */
    SL_QC_DISABLE_AUTOCOMMIT = 1u << 12, /* =0: also BEGIN_TRX */
    SL_QC_READ_ONLY_TRX = 1u << 13,    /* START TRANSACTION READ ONLY */
    SL_QC_READ_WRITE_TRX = 1u << 14,   /* START TRANSACTION READ WRITE */
    SL_QC_MASTER_READ = 1u << 15,      /* a read that must go to the primary:
                                        * FOR UPDATE, LOCK IN SHARE MODE,
                                        * FOR SHARE, LAST_INSERT_ID(),
                                        * GET_LOCK() & co, FOUND_ROWS(),
                                        * ROW_COUNT(), NEXTVAL, SELECT INTO */
    SL_QC_CREATE_TMP_TABLE = 1u << 16, /* CREATE TEMPORARY TABLE */
    SL_QC_DROP_TABLE = 1u << 17,       /* DROP [TEMPORARY] TABLE */
    SL_QC_PREPARE_NAMED = 1u << 18,    /* PREPARE stmt FROM ... */
    SL_QC_DEALLOC_PREPARE = 1u << 19,  /* DEALLOCATE/DROP PREPARE */
    SL_QC_EXEC_PREPARED = 1u << 20,    /* EXECUTE stmt */
    SL_QC_MULTI_STMT = 1u << 21,       /* more than one statement */
    SL_QC_XA = 1u << 22,               /* an XA statement */
    SL_QC_CALL = 1u << 23,             /* CALL proc (may write) */
    SL_QC_LOAD_LOCAL = 1u << 24,       /* LOAD DATA LOCAL INFILE */
    SL_QC_SHOW = 1u << 25,             /* SHOW ... */
    SL_QC_PREV_RESULT = 1u << 26,      /* reads what the connection's
                                        * previous statement left:
                                        * FOUND_ROWS() (ABI 2.4) */
    SL_QC_UNKNOWN = 1u << 31,          /* could not classify: treat as write */
};

/* The statement's leading operation. */
enum sl_qc_op {
    SL_QC_OP_UNDEFINED = 0,
    SL_QC_OP_SELECT, SL_QC_OP_INSERT, SL_QC_OP_UPDATE, SL_QC_OP_DELETE,
    SL_QC_OP_REPLACE, SL_QC_OP_CALL, SL_QC_OP_SET, SL_QC_OP_USE,
    SL_QC_OP_SHOW, SL_QC_OP_CREATE, SL_QC_OP_ALTER, SL_QC_OP_DROP,
    SL_QC_OP_TRUNCATE, SL_QC_OP_RENAME, SL_QC_OP_GRANT, SL_QC_OP_REVOKE,
    SL_QC_OP_BEGIN, SL_QC_OP_COMMIT, SL_QC_OP_ROLLBACK, SL_QC_OP_PREPARE,
    SL_QC_OP_EXECUTE, SL_QC_OP_DEALLOCATE, SL_QC_OP_LOAD, SL_QC_OP_LOCK,
    SL_QC_OP_UNLOCK, SL_QC_OP_XA, SL_QC_OP_EXPLAIN, SL_QC_OP_KILL,
    SL_QC_OP_FLUSH, SL_QC_OP_HANDLER, SL_QC_OP_DO, SL_QC_OP_SAVEPOINT,
    SL_QC_OP_OTHER,
};

/* A routing hint found in a comment (MaxScale's syntax):
 *   -- maxscale route to master|slave|last|server NAME
 *   / * maxscale route to ... * /                                        */
enum sl_hint_type {
    SL_HINT_NONE = 0,
    SL_HINT_ROUTE_TO_MASTER,
    SL_HINT_ROUTE_TO_SLAVE,
    SL_HINT_ROUTE_TO_LAST_USED,
    SL_HINT_ROUTE_TO_NAMED_SERVER,
    SL_HINT_ROUTE_TO_ALL,
};

#define SL_QC_NAME_MAX 128
#define SL_QC_MAX_TABLES 8

struct sl_hint {
    enum sl_hint_type type;
    char server[SL_QC_NAME_MAX];   /* for ROUTE_TO_NAMED_SERVER */
};

struct sl_qc_result {
    uint32_t type;                 /* enum sl_qc_type bits */
    enum sl_qc_op op;
    struct sl_hint hint;           /* SL_HINT_NONE when no hint comment */
    /* Tables the statement names (db.table kept as written), the first
     * SL_QC_MAX_TABLES of them; ntables may exceed it (then truncated). */
    unsigned ntables;
    char tables[SL_QC_MAX_TABLES][SL_QC_NAME_MAX];
    /* PREPARE/EXECUTE/DEALLOCATE in SQL: the statement name. USE: the db. */
    char name[SL_QC_NAME_MAX];
};

/* Classify sql[0..len). Always fills *out (SL_QC_UNKNOWN if unsure).
 * Several statements (';'-separated; a trailing ';' does not count): the
 * type bits of all of them OR-ed, plus SL_QC_MULTI_STMT; op and name from
 * the first. Table names have their quotes removed (`a``b` -> a`b), keep
 * their case, and are not repeated; only tables[0..min(ntables,
 * SL_QC_MAX_TABLES)) are written. The first hint comment wins.
 * Design notes: docs/design.md, "Query classifier". */
SL_EXPORT void sl_qc_classify(const char *sql, size_t len,
                              struct sl_qc_result *out);
/* Classify a COM_QUERY / COM_STMT_PREPARE command chain (header included);
 * copies the SQL only when it spans segments. false if not such a command
 * or on allocation failure. */
struct sl_buf;
SL_EXPORT bool sl_qc_classify_buf(const struct sl_buf *cmd,
                                  struct sl_qc_result *out);
/* A readable list of the type bits ("READ|MASTER_READ"), into buf[len]. */
SL_EXPORT const char *sl_qc_type_str(uint32_t type, char *buf, size_t len);

#endif
