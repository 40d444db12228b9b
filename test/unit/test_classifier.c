/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the query classifier (classifier.c): a table of
 * statements with their expected type bits (the exact mask, or required
 * and forbidden bits), op, hint, tables and name, covering every statement
 * family the routers depend on and the lexer's traps (keywords in strings,
 * identifiers and comments, executable comments, hints in each comment
 * style, multi-statements, unterminated input); then the buffer entry point
 * (single and multi-packet commands, chains of several segments), the type
 * string, truncation and reading strictly within the given length.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/mariadb.h>

#define RD SL_QC_READ
#define WR SL_QC_WRITE
#define DDL SL_QC_DDL
#define SW SL_QC_SESSION_WRITE
#define UW SL_QC_USERVAR_WRITE
#define UR SL_QC_USERVAR_READ
#define SR SL_QC_SYSVAR_READ
#define GW SL_QC_GSYSVAR_WRITE
#define BT SL_QC_BEGIN_TRX
#define CM SL_QC_COMMIT
#define RB SL_QC_ROLLBACK
#define EA SL_QC_ENABLE_AUTOCOMMIT
#define DA SL_QC_DISABLE_AUTOCOMMIT
#define RO SL_QC_READ_ONLY_TRX
#define RW SL_QC_READ_WRITE_TRX
#define MR SL_QC_MASTER_READ
#define TMP SL_QC_CREATE_TMP_TABLE
#define DRT SL_QC_DROP_TABLE
#define PN SL_QC_PREPARE_NAMED
#define DP SL_QC_DEALLOC_PREPARE
#define EP SL_QC_EXEC_PREPARED
#define MU SL_QC_MULTI_STMT
#define XA SL_QC_XA
#define CL SL_QC_CALL
#define LL SL_QC_LOAD_LOCAL
#define SH SL_QC_SHOW
#define UNK SL_QC_UNKNOWN

struct row {
    const char *sql;
    uint32_t exact;         /* nonzero: the whole type mask */
    uint32_t req;           /* otherwise: bits that must be set */
    uint32_t forb;          /* and bits that must not be */
    enum sl_qc_op op;
    enum sl_hint_type hint;
    const char *server;     /* the hint's server */
    const char *tables;     /* non-NULL: tables, comma-separated */
    const char *name;       /* non-NULL: out->name */
};

/* Exact mask / op; with tables; with a name; required+forbidden bits;
 * with a hint. */
#define E(s, m, o) {.sql = (s), .exact = (m), .op = SL_QC_OP_##o}
#define ET(s, m, o, t) \
    {.sql = (s), .exact = (m), .op = SL_QC_OP_##o, .tables = (t)}
#define EN(s, m, o, n) \
    {.sql = (s), .exact = (m), .op = SL_QC_OP_##o, .name = (n)}
#define Q(s, r, f, o) \
    {.sql = (s), .req = (r), .forb = (f), .op = SL_QC_OP_##o}
#define H(s, m, o, h, srv)                                          \
    {.sql = (s), .exact = (m), .op = SL_QC_OP_##o,                  \
     .hint = SL_HINT_ROUTE_TO_##h, .server = (srv)}

static const struct row rows[] = {
    /* Plain reads. */
    E("SELECT 1", RD, SELECT),
    E("select 1", RD, SELECT),
    E("SeLeCt NOW()", RD, SELECT),
    E("SELECT 1 FROM DUAL", RD, SELECT),
    ET("SELECT 1 FROM dual", RD, SELECT, ""),
    E("(SELECT 1)", RD, SELECT),
    E("((SELECT 1))", RD, SELECT),
    E("(SELECT 1) UNION (SELECT 2)", RD, SELECT),
    E("((SELECT 1) UNION (SELECT 2)) ORDER BY 1", RD, SELECT),
    E("  \t\n SELECT 1", RD, SELECT),
    E("/* c */ SELECT 1", RD, SELECT),
    E("/* c */ /* d */SELECT 1", RD, SELECT),
    E("-- c\nSELECT 1", RD, SELECT),
    E("# c\nSELECT 1", RD, SELECT),
    E("/**/SELECT/**/1", RD, SELECT),
    E("SELECT 1;", RD, SELECT),
    E("SELECT 1 ;  ", RD, SELECT),
    E("SELECT 1;;", RD, SELECT),
    E(";SELECT 1", RD, SELECT),
    E("SELECT 1; -- trailing comment", RD, SELECT),
    E("SELECT 1; /* trailing */", RD, SELECT),
    E("SELECT VERSION()", RD, SELECT),
    E("SELECT CONCAT('a', 'b')", RD, SELECT),
    E("SELECT 1 + 2 * 3", RD, SELECT),
    E("SELECT 'x'", RD, SELECT),
    E("SELECT 0x1F, 1e5, 1.5, .5", RD, SELECT),
    ET("SELECT c FROM sbtest1 WHERE id=5", RD, SELECT, "sbtest1"),
    ET("SELECT c FROM sbtest3 WHERE id BETWEEN 1 AND 100", RD, SELECT,
       "sbtest3"),
    ET("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 100", RD, SELECT,
       "sbtest1"),
    ET("SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c", RD,
       SELECT, "sbtest1"),
    ET("SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 "
       "ORDER BY c", RD, SELECT, "sbtest1"),
    ET("SELECT * FROM t1, t2", RD, SELECT, "t1,t2"),
    ET("SELECT * FROM t1 a, t2 AS b, t3 c", RD, SELECT, "t1,t2,t3"),
    ET("SELECT * FROM db1.t1 JOIN db2.t2 ON t1.a = t2.a", RD, SELECT,
       "db1.t1,db2.t2"),
    ET("SELECT * FROM `db`.`t 1`", RD, SELECT, "db.t 1"),
    ET("SELECT * FROM `we``ird`", RD, SELECT, "we`ird"),
    ET("SELECT * FROM t1 LEFT JOIN t2 USING (id) RIGHT OUTER JOIN t3 ON 1",
       RD, SELECT, "t1,t2,t3"),
    ET("SELECT * FROM t1 STRAIGHT_JOIN t2", RD, SELECT, "t1,t2"),
    ET("SELECT * FROM t1 NATURAL JOIN t2 CROSS JOIN t3", RD, SELECT,
       "t1,t2,t3"),
    ET("SELECT * FROM t1 INNER JOIN t2 ON t1.id = t2.id WHERE t1.x > 1",
       RD, SELECT, "t1,t2"),
    ET("SELECT * FROM t1 USE INDEX (i1), t2 FORCE INDEX FOR JOIN (i2)", RD,
       SELECT, "t1,t2"),
    ET("SELECT * FROM t1 IGNORE INDEX (a, b) WHERE 1", RD, SELECT, "t1"),
    ET("SELECT * FROM t1 PARTITION (p0, p1) x, t2", RD, SELECT, "t1,t2"),
    ET("SELECT * FROM (SELECT * FROM t1) AS x, t2", RD, SELECT, "t1,t2"),
    ET("SELECT * FROM t0 JOIN (t1, t2) ON 1", RD, SELECT, "t0,t1,t2"),
    ET("SELECT (SELECT a FROM t2 WHERE t2.b = t1.b) FROM t1", RD, SELECT,
       "t2,t1"),
    ET("SELECT * FROM t1 WHERE a IN (SELECT a FROM t2 WHERE b IN "
       "(SELECT b FROM t3))", RD, SELECT, "t1,t2,t3"),
    ET("SELECT * FROM t1 WHERE EXISTS (SELECT 1 FROM t1)", RD, SELECT,
       "t1"),
    ET("SELECT a FROM t1 GROUP BY a HAVING COUNT(*) > 1 ORDER BY a "
       "LIMIT 10 OFFSET 5", RD, SELECT, "t1"),
    ET("SELECT * FROM t1 UNION ALL SELECT * FROM t2", RD, SELECT, "t1,t2"),
    ET("SELECT * FROM t1 EXCEPT SELECT * FROM t2", RD, SELECT, "t1,t2"),
    ET("SELECT * FROM t1 INTERSECT SELECT * FROM t2", RD, SELECT, "t1,t2"),
    ET("SELECT SQL_NO_CACHE * FROM t", RD, SELECT, "t"),
    ET("SELECT HIGH_PRIORITY * FROM t", RD, SELECT, "t"),
    ET("SELECT a, ROW_NUMBER() OVER w FROM t WINDOW w AS (ORDER BY a)", RD,
       SELECT, "t"),
    ET("SELECT * FROM t1 AS OF TIMESTAMP '2020-01-01'", RD, SELECT, "t1"),
    ET("SELECT * FROM t1 FOR SYSTEM_TIME ALL", RD, SELECT, "t1"),
    E("SELECT CASE WHEN a THEN 1 ELSE 2 END FROM t", RD, SELECT),
    E("SELECT IF(a, 1, 2) FROM t", RD, SELECT),
    E("SELECT EXTRACT(YEAR FROM NOW())", RD, SELECT),
    E("SELECT JSON_EXTRACT('{\"a\": 1}', '$.a')", RD, SELECT),
    E("VALUES (1, 2), (3, 4)", RD, SELECT),
    E("SELECT 1 FROM t1 WHERE a = -1", RD, SELECT),
    E("SELECT 1--1", RD, SELECT),
    E("SELECT 2 /*! + 1 */", RD, SELECT),
    E("SELECT 'a' 'b'", RD, SELECT),
    E("SELECT N'x', _utf8mb4'y', X'41', B'1'", RD, SELECT),
    /* Keywords hidden in strings, identifiers and comments. */
    ET("SELECT update_time FROM select_log", RD, SELECT, "select_log"),
    ET("SELECT for_update, FOR_UPDATE FROM t", RD, SELECT, "t"),
    ET("SELECT `update`, `delete`, `for update` FROM t", RD, SELECT, "t"),
    ET("SELECT t.select, t.update FROM t", RD, SELECT, "t"),
    E("SELECT 'FOR UPDATE'", RD, SELECT),
    E("SELECT \"LOCK IN SHARE MODE\"", RD, SELECT),
    E("SELECT 'LAST_INSERT_ID()'", RD, SELECT),
    E("SELECT 1 /* FOR UPDATE */", RD, SELECT),
    E("SELECT 1 -- FOR UPDATE", RD, SELECT),
    E("SELECT 1 # FOR UPDATE", RD, SELECT),
    E("SELECT 'it''s ; DELETE FROM t'", RD, SELECT),
    E("SELECT 'it\\'s ; DELETE FROM t'", RD, SELECT),
    E("SELECT \"a\"\";DROP TABLE t\"", RD, SELECT),
    E("SELECT \"a\\\";DROP TABLE t\"", RD, SELECT),
    E("SELECT 'a\\\\'; ", RD, SELECT),
    ET("SELECT `a;b` FROM `t;1`", RD, SELECT, "t;1"),
    ET("SELECT `a``;` FROM t", RD, SELECT, "t"),
    ET("SELECT row_count, found_rows, last_insert_id FROM t", RD, SELECT,
       "t"),
    ET("SELECT get_lock_count FROM locks", RD, SELECT, "locks"),
    ET("SELECT nextval FROM seqs", RD, SELECT, "seqs"),
    ET("SELECT t.row_count() FROM t", RD, SELECT, "t"),
    E("SELECT 'a:=b'", RD, SELECT),
    E("SELECT ':=', '@x', '@@y'", RD, SELECT),
    E("SELECT 1 -- maxscale route to master; with ; inside", RD | 0, SELECT),
    ET("SELECT intox, fromage FROM updates", RD, SELECT, "updates"),
    /* Reads that must go to the primary. */
    ET("SELECT * FROM t FOR UPDATE", RD | MR, SELECT, "t"),
    ET("SELECT * FROM t WHERE id = 1 FOR UPDATE NOWAIT", RD | MR, SELECT,
       "t"),
    ET("SELECT * FROM t FOR UPDATE SKIP LOCKED", RD | MR, SELECT, "t"),
    ET("select * from t for update", RD | MR, SELECT, "t"),
    ET("SELECT * FROM t LOCK IN SHARE MODE", RD | MR, SELECT, "t"),
    ET("SELECT * FROM t FOR SHARE", RD | MR, SELECT, "t"),
    ET("SELECT * FROM t1 WHERE a IN (SELECT a FROM t2 FOR UPDATE)",
       RD | MR, SELECT, "t1,t2"),
    E("(SELECT 1 FOR UPDATE)", RD | MR, SELECT),
    E("SELECT LAST_INSERT_ID()", RD | MR, SELECT),
    E("SELECT last_insert_id()", RD | MR, SELECT),
    E("SELECT LAST_INSERT_ID ()", RD | MR, SELECT),
    E("SELECT LAST_INSERT_ID() + 1 AS id", RD | MR, SELECT),
    E("SELECT GET_LOCK('l', 10)", RD | MR, SELECT),
    E("SELECT RELEASE_LOCK('l')", RD | MR, SELECT),
    E("SELECT IS_FREE_LOCK('l')", RD | MR, SELECT),
    E("SELECT IS_USED_LOCK('l')", RD | MR, SELECT),
    E("SELECT RELEASE_ALL_LOCKS()", RD | MR, SELECT),
    E("SELECT FOUND_ROWS()", RD | MR | SL_QC_PREV_RESULT, SELECT),
    E("SELECT ROW_COUNT()", RD | MR, SELECT),
    E("SELECT NEXTVAL(s1)", RD | MR, SELECT),
    E("SELECT LASTVAL(s1)", RD | MR, SELECT),
    E("SELECT SETVAL(s1, 100)", RD | MR, SELECT),
    E("SELECT NEXT VALUE FOR s1", RD | MR, SELECT),
    E("SELECT PREVIOUS VALUE FOR s1", RD | MR, SELECT),
    E("select next value for db.s1", RD | MR, SELECT),
    ET("SELECT a FROM t WHERE id = LAST_INSERT_ID()", RD | MR, SELECT, "t"),
    ET("SELECT a INTO @x FROM t LIMIT 1", RD | MR | UW, SELECT, "t"),
    ET("SELECT a, b INTO @x, @y FROM t", RD | MR | UW, SELECT, "t"),
    ET("SELECT * FROM t INTO OUTFILE '/tmp/x'", RD | MR, SELECT, "t"),
    ET("SELECT * INTO OUTFILE '/tmp/x' FROM t", RD | MR, SELECT, "t"),
    ET("SELECT * FROM t INTO DUMPFILE '/tmp/x'", RD | MR, SELECT, "t"),
    E("SELECT @a := 1", RD | MR | UW, SELECT),
    ET("SELECT @rn := @rn + 1 FROM t", RD | MR | UW | UR, SELECT, "t"),
    E("SELECT @a:=1, @b", RD | MR | UW | UR, SELECT),
    /* Variables. */
    E("SELECT @a", RD | UR, SELECT),
    E("SELECT @a = 1", RD | UR, SELECT),
    E("SELECT @`a b`, @'c', @\"d\"", RD | UR, SELECT),
    E("SELECT @@version", RD | SR, SELECT),
    E("SELECT @@session.autocommit", RD | SR, SELECT),
    E("SELECT @@GLOBAL.read_only, @@server_id", RD | SR, SELECT),
    E("SELECT @a, @@b", RD | UR | SR, SELECT),
    ET("SELECT * FROM t WHERE a = @x", RD | UR, SELECT, "t"),
    E("SELECT '@a', '@@b'", RD, SELECT),
    /* WITH. */
    ET("WITH c AS (SELECT 1) SELECT * FROM c", RD, SELECT, "c"),
    ET("WITH c AS (SELECT a FROM t1) SELECT * FROM c JOIN t2", RD, SELECT,
       "t1,c,t2"),
    ET("WITH RECURSIVE r (n) AS (SELECT 1 UNION SELECT n + 1 FROM r "
       "WHERE n < 5) SELECT * FROM r", RD, SELECT, "r"),
    ET("WITH a AS (SELECT 1), b AS (SELECT 2) SELECT * FROM a, b", RD,
       SELECT, "a,b"),
    ET("WITH c AS (SELECT id FROM t1) UPDATE t2 SET x = 1 WHERE id IN "
       "(SELECT id FROM c)", WR, UPDATE, "t1,t2,c"),
    ET("WITH c AS (SELECT id FROM t1) DELETE FROM t2 WHERE id IN "
       "(SELECT id FROM c)", WR, DELETE, "t1,t2,c"),
    ET("WITH c AS (SELECT 1) INSERT INTO t SELECT * FROM c", WR, INSERT,
       "t,c"),
    E("WITH c AS (SELECT 1)", UNK, UNDEFINED),
    ET("WITH c AS (SELECT 1) SELECT * FROM c FOR UPDATE", RD | MR, SELECT,
       "c"),
    /* DML. */
    ET("INSERT INTO t VALUES (1)", WR, INSERT, "t"),
    ET("INSERT t VALUES (1)", WR, INSERT, "t"),
    ET("INSERT INTO t (a, b) VALUES (1, 2), (3, 4)", WR, INSERT, "t"),
    ET("INSERT INTO t VALUE (1)", WR, INSERT, "t"),
    ET("INSERT LOW_PRIORITY IGNORE INTO db.t SET a = 1", WR, INSERT,
       "db.t"),
    ET("INSERT DELAYED INTO t VALUES (1)", WR, INSERT, "t"),
    ET("INSERT HIGH_PRIORITY INTO t VALUES (1)", WR, INSERT, "t"),
    ET("INSERT INTO t1 SELECT * FROM t2", WR, INSERT, "t1,t2"),
    ET("INSERT INTO t1 (a) SELECT b FROM t2 WHERE c = 1", WR, INSERT,
       "t1,t2"),
    ET("INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a = 2", WR, INSERT,
       "t"),
    ET("INSERT INTO t VALUES (1) RETURNING id", WR, INSERT, "t"),
    ET("INSERT INTO t PARTITION (p1) VALUES (1)", WR, INSERT, "t"),
    ET("INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 4, "
       "'11111111111-22222222222', '33333333333-44444444444')", WR, INSERT,
       "sbtest1"),
    ET("INSERT INTO t VALUES ('a;b', 'FOR UPDATE', \"DELETE\")", WR, INSERT,
       "t"),
    ET("INSERT INTO t VALUES (@a)", WR | UR, INSERT, "t"),
    ET("INSERT INTO t VALUES (LAST_INSERT_ID())", WR | MR, INSERT, "t"),
    ET("REPLACE INTO t VALUES (1)", WR, REPLACE, "t"),
    ET("REPLACE t SET a = 1", WR, REPLACE, "t"),
    ET("REPLACE INTO t SELECT * FROM u", WR, REPLACE, "t,u"),
    ET("UPDATE t SET a = 1", WR, UPDATE, "t"),
    ET("UPDATE sbtest1 SET k=k+1 WHERE id=5", WR, UPDATE, "sbtest1"),
    ET("UPDATE sbtest1 SET c='x-y' WHERE id=5", WR, UPDATE, "sbtest1"),
    ET("UPDATE LOW_PRIORITY IGNORE t SET a = 1", WR, UPDATE, "t"),
    ET("UPDATE t1, t2 SET t1.a = t2.a WHERE t1.id = t2.id", WR, UPDATE,
       "t1,t2"),
    ET("UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.a = 1", WR, UPDATE,
       "t1,t2"),
    ET("UPDATE t AS x SET x.a = 1", WR, UPDATE, "t"),
    ET("UPDATE `select` SET `from` = 1", WR, UPDATE, "select"),
    ET("UPDATE t SET a = (SELECT MAX(b) FROM u)", WR, UPDATE, "t,u"),
    ET("UPDATE t SET a = @x WHERE b = 1", WR | UR, UPDATE, "t"),
    ET("update t set update_time = now()", WR, UPDATE, "t"),
    ET("DELETE FROM t", WR, DELETE, "t"),
    ET("DELETE FROM sbtest1 WHERE id=5", WR, DELETE, "sbtest1"),
    ET("DELETE LOW_PRIORITY QUICK IGNORE FROM t WHERE a = 1", WR, DELETE,
       "t"),
    ET("DELETE t1 FROM t1 JOIN t2 ON t1.a = t2.a", WR, DELETE, "t1,t2"),
    ET("DELETE t1, t2 FROM t1 JOIN t2 JOIN t3", WR, DELETE, "t1,t2,t3"),
    ET("DELETE FROM t WHERE a = 1 RETURNING a", WR, DELETE, "t"),
    ET("DELETE FROM t ORDER BY a LIMIT 1", WR, DELETE, "t"),
    ET("delete from `my db`.`my table`", WR, DELETE, "my db.my table"),
    /* SET and session state. */
    E("SET autocommit=0", SW | DA | BT, SET),
    E("SET autocommit=1", SW | EA | CM, SET),
    E("SET autocommit = 0", SW | DA | BT, SET),
    E("SET AUTOCOMMIT=OFF", SW | DA | BT, SET),
    E("SET autocommit=ON", SW | EA | CM, SET),
    E("SET autocommit=TRUE", SW | EA | CM, SET),
    E("SET autocommit=false", SW | DA | BT, SET),
    E("SET autocommit='OFF'", SW | DA | BT, SET),
    E("SET autocommit='1'", SW | EA | CM, SET),
    E("SET @@autocommit=0", SW | DA | BT, SET),
    E("SET @@autocommit = 1", SW | EA | CM, SET),
    E("SET @@session.autocommit=0", SW | DA | BT, SET),
    E("SET @@SESSION.AUTOCOMMIT=ON", SW | EA | CM, SET),
    E("SET @@local.autocommit=0", SW | DA | BT, SET),
    E("SET SESSION autocommit=0", SW | DA | BT, SET),
    E("SET LOCAL autocommit=1", SW | EA | CM, SET),
    E("SET a=1, autocommit=0", SW | DA | BT, SET),
    E("SET @a=1, autocommit=0", SW | UW | DA | BT, SET),
    E("SET autocommit=0, sql_mode='ANSI'", SW | DA | BT, SET),
    E("SET names utf8, autocommit = 1", SW, SET),
    E("SET autocommit=DEFAULT", SW, SET),
    E("SET autocommit=@x", SW | UR, SET),
    E("SET GLOBAL autocommit=0", GW | WR, SET),
    E("SET @@global.autocommit=0", GW | WR, SET),
    E("/*!40101 SET autocommit=0 */", SW | DA | BT, SET),
    E("SET autocommit_x=0", SW, SET),
    E("SET `autocommit`=0", SW | DA | BT, SET),
    E("SET @a=1", SW | UW, SET),
    E("SET @a := 1", SW | UW, SET),
    E("SET @a = @b + 1", SW | UW | UR, SET),
    E("SET @a = @@version", SW | UW | SR, SET),
    E("SET @a = (SELECT 1)", SW | UW, SET),
    E("SET @a = LAST_INSERT_ID()", SW | UW | MR, SET),
    E("SET @a = 'x,y', @b = 2", SW | UW, SET),
    E("SET @`weird name` = 1", SW | UW, SET),
    E("SET NAMES utf8mb4", SW, SET),
    E("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci'", SW, SET),
    E("set names latin1", SW, SET),
    E("SET CHARACTER SET utf8", SW, SET),
    E("SET CHARSET utf8", SW, SET),
    E("SET sql_mode='ANSI'", SW, SET),
    E("SET SESSION sql_mode = 'STRICT_ALL_TABLES'", SW, SET),
    E("SET time_zone = '+00:00'", SW, SET),
    E("SET @@time_zone = 'UTC'", SW, SET),
    E("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", SW, SET),
    E("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE", SW, SET),
    E("SET TRANSACTION READ ONLY", SW, SET),
    E("SET GLOBAL TRANSACTION ISOLATION LEVEL READ COMMITTED", GW | WR, SET),
    E("SET GLOBAL max_connections = 100", GW | WR, SET),
    E("SET @@global.max_connections = 100", GW | WR, SET),
    E("SET PERSIST max_connections = 100", GW | WR, SET),
    E("SET GLOBAL a = 1, b = 2", GW | WR, SET),
    E("SET GLOBAL a = 1, SESSION b = 2", GW | WR | SW, SET),
    E("SET SESSION a = 1, @@global.b = 2", GW | WR | SW, SET),
    E("SET max_statement_time = 10", SW, SET),
    E("SET ROLE admin", SW, SET),
    E("SET PASSWORD = PASSWORD('x')", WR, SET),
    E("SET PASSWORD FOR u@localhost = 'x'", WR, SET),
    E("SET DEFAULT ROLE admin FOR u", WR, SET),
    E("SET STATEMENT max_statement_time=1 FOR SELECT 1", RD, SELECT),
    ET("SET STATEMENT a=1, b=2 FOR UPDATE t SET c = 1", WR, UPDATE, "t"),
    E("SET STATEMENT a=1", UNK, SET),
    E("SET", UNK, SET),
    E("SET 1", UNK, SET),
    E("SET a", UNK, SET),
    EN("USE db1", SW, USE, "db1"),
    EN("use `my db`", SW, USE, "my db"),
    EN("USE `a``b`", SW, USE, "a`b"),
    EN("USE db1;", SW, USE, "db1"),
    EN("/* x */ USE test", SW, USE, "test"),
    E("USE", SW, USE),
    /* Transactions. */
    E("BEGIN", BT, BEGIN),
    E("begin", BT, BEGIN),
    E("BEGIN WORK", BT, BEGIN),
    E("BEGIN;", BT, BEGIN),
    E("START TRANSACTION", BT, BEGIN),
    E("start transaction", BT, BEGIN),
    E("START TRANSACTION READ ONLY", BT | RO, BEGIN),
    E("START TRANSACTION READ WRITE", BT | RW, BEGIN),
    E("START TRANSACTION WITH CONSISTENT SNAPSHOT", BT, BEGIN),
    E("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", BT | RO,
      BEGIN),
    E("START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT", BT | RO,
      BEGIN),
    E("/*!40100 START TRANSACTION READ ONLY */", BT | RO, BEGIN),
    E("COMMIT", CM, COMMIT),
    E("commit", CM, COMMIT),
    E("COMMIT WORK", CM, COMMIT),
    E("COMMIT AND CHAIN", CM | BT, COMMIT),
    E("COMMIT WORK AND CHAIN", CM | BT, COMMIT),
    E("COMMIT AND NO CHAIN", CM, COMMIT),
    E("COMMIT RELEASE", CM, COMMIT),
    E("COMMIT AND NO CHAIN NO RELEASE", CM, COMMIT),
    E("ROLLBACK", RB, ROLLBACK),
    E("ROLLBACK WORK", RB, ROLLBACK),
    E("ROLLBACK AND CHAIN", RB | BT, ROLLBACK),
    E("ROLLBACK TO SAVEPOINT s1", WR, SAVEPOINT),
    E("ROLLBACK TO s1", WR, SAVEPOINT),
    E("ROLLBACK WORK TO SAVEPOINT s1", WR, SAVEPOINT),
    E("SAVEPOINT s1", WR, SAVEPOINT),
    E("RELEASE SAVEPOINT s1", WR, SAVEPOINT),
    E("BEGIN NOT ATOMIC SELECT 1; END", WR, OTHER),
    E("BEGIN NOT ATOMIC DECLARE x INT; SET x = 1; IF x THEN SELECT 1; "
      "END IF; SELECT CASE WHEN x THEN 1 END; END", WR, OTHER),
    /* Compound statements (issue 16): one statement through their END,
     * whatever ';' they hold; SESSION_WRITE when something inside may
     * change the session (SET of a non-local, @var, PREPARE, EXECUTE,
     * TEMPORARY); FOR/IF/REPEAT elsewhere are not blocks. */
    E("FOR rec IN (SELECT a FROM t) DO SET NAMES utf8mb4; EXECUTE "
      "IMMEDIATE CONCAT('SELECT ', rec.a); END FOR", WR | SW, OTHER),
    E("FOR i IN 1..3 DO SET i = i; SELECT i FROM t FOR UPDATE; END FOR",
      WR, OTHER),
    E("FOR i IN 1..3 DO SELECT i; END FOR; SELECT 5", WR | RD | MU, OTHER),
    E("WHILE @i < 3 DO SET @i = @i + 1; END WHILE", WR | SW, OTHER),
    E("l1: LOOP SELECT 1; IF 1 THEN LEAVE l1; END IF; END LOOP l1", WR,
      OTHER),
    E("REPEAT SELECT REPEAT('a', 2); UNTIL 1 END REPEAT", WR, OTHER),
    E("IF 1 THEN SELECT IF(1, 2, 3); ELSE SELECT 2; END IF", WR, OTHER),
    E("CASE WHEN 1 THEN SELECT 1; ELSE BEGIN END; END CASE", WR, OTHER),
    E("BEGIN NOT ATOMIC DECLARE x, y INT; SET x = 1, y = 2; END", WR,
      OTHER),
    E("BEGIN NOT ATOMIC DECLARE x INT; SET x = 1, sql_mode = ''; END",
      WR | SW, OTHER),
    E("BEGIN NOT ATOMIC DECLARE CONTINUE HANDLER FOR SQLEXCEPTION "
      "SET @e = 1; SELECT 1; END", WR | SW, OTHER),
    E("BEGIN NOT ATOMIC UPDATE t SET a = 1; SELECT CONVERT('a' USING "
      "utf8) CHARACTER SET utf8; END", WR, OTHER),
    E("BEGIN NOT ATOMIC CREATE TEMPORARY TABLE tt (a INT); END", WR | SW,
      OTHER),
    E("BEGIN NOT ATOMIC PREPARE s FROM 'SELECT 1'; EXECUTE s; END",
      WR | SW, OTHER),
    E("BEGIN NOT ATOMIC SELECT 1; END; SET autocommit=0",
      WR | SW | DA | BT | MU, OTHER),
    E("XA START 'x'", XA | WR | BT, XA),
    E("XA BEGIN 'x'", XA | WR | BT, XA),
    E("XA END 'x'", XA | WR, XA),
    E("XA PREPARE 'x'", XA | WR, XA),
    E("XA COMMIT 'x'", XA | WR | CM, XA),
    E("XA COMMIT 'x' ONE PHASE", XA | WR | CM, XA),
    E("XA ROLLBACK 'x'", XA | WR | RB, XA),
    E("XA RECOVER", XA | WR, XA),
    E("xa start 'x', 'y', 1", XA | WR | BT, XA),
    /* DDL. */
    ET("CREATE TABLE t (a INT)", DDL | WR, CREATE, "t"),
    ET("CREATE TABLE IF NOT EXISTS db.t (a INT)", DDL | WR, CREATE, "db.t"),
    ET("CREATE TEMPORARY TABLE tmp1 (a INT)", DDL | WR | TMP, CREATE,
       "tmp1"),
    ET("create temporary table tmp1 (a int)", DDL | WR | TMP, CREATE,
       "tmp1"),
    ET("CREATE TEMPORARY TABLE IF NOT EXISTS tmp1 (a INT)", DDL | WR | TMP,
       CREATE, "tmp1"),
    ET("CREATE OR REPLACE TEMPORARY TABLE tmp1 (a INT)", DDL | WR | TMP,
       CREATE, "tmp1"),
    ET("CREATE TEMPORARY TABLE `tmp 2` AS SELECT * FROM t1", DDL | WR | TMP,
       CREATE, "tmp 2,t1"),
    ET("CREATE TEMPORARY TABLE tmp3 SELECT a FROM t1 JOIN t2", DDL | WR | TMP,
       CREATE, "tmp3,t1,t2"),
    ET("CREATE TEMPORARY TABLE tmp4 LIKE t1", DDL | WR | TMP, CREATE,
       "tmp4,t1"),
    ET("CREATE TABLE t2 LIKE t1", DDL | WR, CREATE, "t2,t1"),
    ET("/*!40101 CREATE TEMPORARY TABLE tmp5 (a INT) */", DDL | WR | TMP,
       CREATE, "tmp5"),
    E("CREATE DATABASE d", DDL | WR, CREATE),
    E("CREATE INDEX i ON t (a)", DDL | WR, CREATE),
    E("CREATE VIEW v AS SELECT * FROM t FOR UPDATE", DDL | WR, CREATE),
    E("CREATE USER u IDENTIFIED BY 'p'", DDL | WR, CREATE),
    E("CREATE SEQUENCE s START WITH 1", DDL | WR, CREATE),
    E("CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END", DDL | WR,
      CREATE),
    E("CREATE DEFINER=root@localhost PROCEDURE p() BEGIN DECLARE x INT; "
      "CASE x WHEN 1 THEN SELECT 1; END CASE; WHILE x DO SET x = 0; "
      "END WHILE; END", DDL | WR, CREATE),
    E("CREATE FUNCTION f() RETURNS INT RETURN 1", DDL | WR, CREATE),
    E("CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN "
      "SET NEW.a = 1; END", DDL | WR, CREATE),
    E("CREATE VIEW v AS SELECT 1; SELECT 2", DDL | WR | RD | MU, CREATE),
    ET("DROP TABLE t", DDL | WR | DRT, DROP, "t"),
    ET("DROP TABLE IF EXISTS t1, t2", DDL | WR | DRT, DROP, "t1,t2"),
    ET("DROP TEMPORARY TABLE tmp1", DDL | WR | DRT, DROP, "tmp1"),
    ET("DROP TEMPORARY TABLE IF EXISTS tmp1, `tmp 2`", DDL | WR | DRT, DROP,
       "tmp1,tmp 2"),
    ET("DROP TABLE db.t CASCADE", DDL | WR | DRT, DROP, "db.t"),
    ET("DROP TABLES t1, t2", DDL | WR | DRT, DROP, "t1,t2"),
    E("DROP DATABASE d", DDL | WR, DROP),
    E("DROP VIEW v", DDL | WR, DROP),
    E("DROP USER u", DDL | WR, DROP),
    ET("ALTER TABLE t ADD COLUMN c INT", DDL | WR, ALTER, "t"),
    ET("ALTER TABLE db.t ENGINE = InnoDB", DDL | WR, ALTER, "db.t"),
    ET("ALTER ONLINE TABLE t ADD c INT", DDL | WR, ALTER, "t"),
    ET("ALTER IGNORE TABLE t ADD UNIQUE (a)", DDL | WR, ALTER, "t"),
    E("ALTER DATABASE d CHARACTER SET utf8", DDL | WR, ALTER),
    E("ALTER USER u IDENTIFIED BY 'x'", DDL | WR, ALTER),
    ET("TRUNCATE TABLE t", DDL | WR, TRUNCATE, "t"),
    ET("TRUNCATE t", DDL | WR, TRUNCATE, "t"),
    ET("RENAME TABLE a TO b", DDL | WR, RENAME, "a,b"),
    ET("RENAME TABLE a TO b, c TO d", DDL | WR, RENAME, "a,b,c,d"),
    E("RENAME USER u TO v", DDL | WR, RENAME),
    E("GRANT SELECT ON db.* TO u", DDL | WR, GRANT),
    E("GRANT ALL PRIVILEGES ON *.* TO 'u'@'%' WITH GRANT OPTION", DDL | WR,
      GRANT),
    E("REVOKE ALL ON *.* FROM u", DDL | WR, REVOKE),
    /* Prepared statements in SQL. */
    EN("PREPARE s FROM 'SELECT 1'", PN | SW, PREPARE, "s"),
    EN("PREPARE `my stmt` FROM @sql", PN | SW, PREPARE, "my stmt"),
    EN("prepare s1 from 'UPDATE t SET a = 1; DELETE FROM t'", PN | SW,
       PREPARE, "s1"),
    EN("EXECUTE s", EP, EXECUTE, "s"),
    EN("EXECUTE s USING @a, @b", EP | UR, EXECUTE, "s"),
    EN("DEALLOCATE PREPARE s", DP | SW, DEALLOCATE, "s"),
    EN("DROP PREPARE s", DP | SW, DEALLOCATE, "s"),
    E("EXECUTE IMMEDIATE 'SELECT 1'", WR | SW, EXECUTE),
    /* Other statements. */
    E("SHOW TABLES", RD | SH, SHOW),
    E("SHOW DATABASES", RD | SH, SHOW),
    E("show variables like 'x;y'", RD | SH, SHOW),
    E("SHOW FULL PROCESSLIST", RD | SH, SHOW),
    E("SHOW SLAVE STATUS", RD | SH, SHOW),
    E("SHOW CREATE TABLE t", RD | SH, SHOW),
    E("SHOW WARNINGS", RD | SH, SHOW),
    E("SHOW SESSION STATUS LIKE 'x'", RD | SH, SHOW),
    E("EXPLAIN SELECT * FROM t", RD, EXPLAIN),
    E("EXPLAIN UPDATE t SET a = 1", RD, EXPLAIN),
    E("EXPLAIN FORMAT=JSON SELECT 1", RD, EXPLAIN),
    E("DESCRIBE t", RD, EXPLAIN),
    E("DESC t", RD, EXPLAIN),
    E("ANALYZE SELECT * FROM t", RD, SELECT),
    E("ANALYZE FORMAT=JSON SELECT 1", RD, SELECT),
    Q("ANALYZE UPDATE t SET a = 1", WR, RD, UPDATE),
    E("ANALYZE TABLE t", WR, OTHER),
    E("ANALYZE", UNK, UNDEFINED),
    E("CALL p()", WR | CL, CALL),
    E("CALL db.p(1, 'a')", WR | CL, CALL),
    E("CALL p(@out)", WR | CL | UR, CALL),
    E("call p", WR | CL, CALL),
    E("DO 1", WR, DO),
    E("DO GET_LOCK('x', 1)", WR | MR, DO),
    E("DO @a := 1", WR | UW | MR, DO),
    ET("LOAD DATA INFILE '/tmp/x' INTO TABLE t", WR, LOAD, "t"),
    ET("LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t", WR | LL, LOAD, "t"),
    ET("load data local infile 'x' replace into table db.t FIELDS "
       "TERMINATED BY ','", WR | LL, LOAD, "db.t"),
    ET("LOAD DATA LOW_PRIORITY LOCAL INFILE 'x' INTO TABLE t", WR | LL, LOAD,
       "t"),
    ET("LOAD DATA CONCURRENT INFILE 'x' IGNORE INTO TABLE t", WR, LOAD, "t"),
    ET("LOAD XML LOCAL INFILE 'x' INTO TABLE t", WR | LL, LOAD, "t"),
    E("LOAD INDEX INTO CACHE t", WR, LOAD),
    ET("LOCK TABLES t READ", WR, LOCK, "t"),
    ET("LOCK TABLES t1 READ, t2 WRITE", WR, LOCK, "t1,t2"),
    ET("LOCK TABLE t1 AS a READ LOCAL, t2 LOW_PRIORITY WRITE", WR, LOCK,
       "t1,t2"),
    E("UNLOCK TABLES", WR, UNLOCK),
    ET("HANDLER t OPEN", WR, HANDLER, "t"),
    ET("HANDLER t READ FIRST", WR, HANDLER, "t"),
    ET("HANDLER t CLOSE", WR, HANDLER, "t"),
    E("KILL 5", WR, KILL),
    E("KILL QUERY 5", WR, KILL),
    E("KILL CONNECTION 5", WR, KILL),
    E("FLUSH TABLES", WR, FLUSH),
    E("FLUSH PRIVILEGES", WR, FLUSH),
    E("RESET MASTER", WR, OTHER),
    E("PURGE BINARY LOGS TO 'x'", WR, OTHER),
    E("CHANGE MASTER TO MASTER_HOST='x'", WR, OTHER),
    E("START SLAVE", WR, OTHER),
    E("STOP SLAVE", WR, OTHER),
    E("OPTIMIZE TABLE t", WR, OTHER),
    E("CHECK TABLE t", WR, OTHER),
    E("INSTALL SONAME 'x'", WR, OTHER),
    E("SIGNAL SQLSTATE '45000'", WR, OTHER),
    E("HELP 'select'", RD, OTHER),
    E("GET DIAGNOSTICS @n = NUMBER", RD, OTHER),
    /* Unknown or empty. */
    E("", UNK, UNDEFINED),
    E("   ", UNK, UNDEFINED),
    E(";", UNK, UNDEFINED),
    E(";;  ;", UNK, UNDEFINED),
    E("-- only a comment", UNK, UNDEFINED),
    E("/* only a comment */", UNK, UNDEFINED),
    E("# only a comment", UNK, UNDEFINED),
    E("/* unterminated comment", UNK, UNDEFINED),
    E("/*! */", UNK, UNDEFINED),
    E("FOO BAR", UNK, UNDEFINED),
    E("update_time = 1", UNK, UNDEFINED),
    E("`select` 1", UNK, UNDEFINED),
    E("'SELECT 1'", UNK, UNDEFINED),
    E("123", UNK, UNDEFINED),
    E("END", UNK, UNDEFINED),
    E("TABLE t", UNK, UNDEFINED),
    E("(", UNK, UNDEFINED),
    E(")", UNK, UNDEFINED),
    E("@a", UNK, UNDEFINED),
    E("lbl: BEGIN NOT ATOMIC END", WR, OTHER),
    E("lbl: x", UNK, UNDEFINED),
    /* Unterminated strings and identifiers. */
    E("SELECT 'unterminated", RD, SELECT),
    E("SELECT 'unterminated; DELETE FROM t", RD, SELECT),
    E("SELECT \"unterminated; DELETE FROM t", RD, SELECT),
    ET("SELECT * FROM `unterminated; DELETE", RD, SELECT,
       "unterminated; DELETE"),
    E("SELECT 'ends in backslash\\", RD, SELECT),
    E("SELECT 1 /* unterminated; DELETE FROM t", RD, SELECT),
    E("SELECT @'unterminated", RD | UR, SELECT),
    /* Multi-statements. */
    E("SELECT 1; SELECT 2", RD | MU, SELECT),
    E("SELECT 1;SELECT 2;", RD | MU, SELECT),
    E("SELECT 'a;b'; SELECT \"c;d\"", RD | MU, SELECT),
    E("SELECT 1; -- x\n SELECT 2", RD | MU, SELECT),
    E("SELECT 1 /* ; */; /* ; */ SELECT 2", RD | MU, SELECT),
    E("SELECT 1; UPDATE t SET a = 1", RD | WR | MU, SELECT),
    E("UPDATE t SET a = 1; SELECT 1", RD | WR | MU, UPDATE),
    E("BEGIN; SELECT 1; COMMIT", BT | RD | CM | MU, BEGIN),
    E("SELECT 1; SET autocommit=0", RD | SW | DA | BT | MU, SELECT),
    E("SET NAMES utf8; SET autocommit=1", SW | EA | CM | MU, SET),
    E("SELECT 1; FOO", RD | UNK | MU, SELECT),
    E("SELECT 1;;;SELECT 2", RD | MU, SELECT),
    E("/*!50100 SELECT 1 */ ; /*!50100 SELECT 2 */", RD | MU, SELECT),
    E("SELECT ';' ; ", RD, SELECT),
    E("SELECT `;`;", RD, SELECT),
    E("SELECT 1 -- ; SELECT 2", RD, SELECT),
    E("SELECT 1 # ; SELECT 2", RD, SELECT),
    E("SELECT (1; SELECT 2)", RD | MU, SELECT),
    /* Executable comments. */
    E("/*! SELECT 1 */", RD, SELECT),
    E("/*!SELECT 1*/", RD, SELECT),
    E("/*!50100 SELECT 1 */", RD, SELECT),
    E("/*!50100SELECT 1*/", RD, SELECT),
    E("/*M! SELECT 1 */", RD, SELECT),
    E("/*M!100100 SELECT 1 */", RD, SELECT),
    E("/*!40101 SET NAMES utf8 */", SW, SET),
    E("/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE */", SW | UW | SR, SET),
    ET("SELECT * FROM t /*!50100 FOR UPDATE */", RD | MR, SELECT, "t"),
    ET("SELECT * FROM t /*M!100100 LOCK IN SHARE MODE */", RD | MR, SELECT,
       "t"),
    ET("/*!50100 UPDATE t SET a = 1 */", WR, UPDATE, "t"),
    E("SELECT 1 /*!, LAST_INSERT_ID() */", RD | MR, SELECT),
    E("SELECT 1 /*!, '*/' */", RD, SELECT),
    E("SELECT 2*/3", RD, SELECT),
    E("/*!50100 SELECT 1 */; /*! SELECT 2", RD | MU, SELECT),
    E("/*+ hint */ SELECT 1", RD, SELECT),
    E("SELECT /*+ MAX_EXECUTION_TIME(1) */ 1", RD, SELECT),
    /* Routing hints. */
    H("SELECT 1 -- maxscale route to master", RD, SELECT, MASTER, ""),
    H("SELECT 1 -- maxscale route to slave", RD, SELECT, SLAVE, ""),
    H("SELECT 1 -- maxscale route to last", RD, SELECT, LAST_USED, ""),
    H("SELECT 1 -- maxscale route to all", RD, SELECT, ALL, ""),
    H("SELECT 1 -- maxscale route to server db2", RD, SELECT, NAMED_SERVER,
      "db2"),
    H("SELECT 1 -- MaxScale Route To Server Server-1", RD, SELECT,
      NAMED_SERVER, "Server-1"),
    H("SELECT 1 -- MAXSCALE ROUTE TO MASTER", RD, SELECT, MASTER, ""),
    H("SELECT 1 --\tmaxscale   route\tto  slave  ", RD, SELECT, SLAVE, ""),
    H("SELECT 1 # maxscale route to master", RD, SELECT, MASTER, ""),
    H("SELECT 1 #maxscale route to slave", RD, SELECT, SLAVE, ""),
    H("SELECT 1 /* maxscale route to master */", RD, SELECT, MASTER, ""),
    H("SELECT 1 /*maxscale route to server db3*/", RD, SELECT, NAMED_SERVER,
      "db3"),
    H("/* maxscale route to slave */ SELECT 1", RD, SELECT, SLAVE, ""),
    H("SELECT /* maxscale route to master */ 1 FROM t", RD, SELECT, MASTER,
      ""),
    H("SELECT 1; -- maxscale route to master", RD, SELECT, MASTER, ""),
    H("SELECT 1 -- maxscale route to master\n", RD, SELECT, MASTER, ""),
    H("SELECT 1 -- maxscale route to server db2\n FROM t", RD, SELECT,
      NAMED_SERVER, "db2"),
    H("UPDATE t SET a = 1 -- maxscale route to slave", WR, UPDATE, SLAVE,
      ""),
    H("SELECT 1 /* maxscale route to slave */ /* maxscale route to master */",
      RD, SELECT, SLAVE, ""),
    H("SELECT 1 /* other */ -- maxscale route to master", RD, SELECT, MASTER,
      ""),
    E("SELECT 1 --maxscale route to master", RD, SELECT),
    E("SELECT 1 -- maxscale route master", RD, SELECT),
    E("SELECT 1 -- maxscale route to nowhere", RD, SELECT),
    E("SELECT 1 -- maxscale route to server", RD, SELECT),
    E("SELECT 1 -- maxscalex route to master", RD, SELECT),
    E("SELECT 1 -- hint: maxscale route to master", RD, SELECT),
    E("SELECT '-- maxscale route to master'", RD, SELECT),
    H("SELECT 1 /*! -- maxscale route to master\n */", RD, SELECT, MASTER,
      ""),
    H("-- maxscale route to master", UNK, UNDEFINED, MASTER, ""),
};

static void
join_tables(const struct sl_qc_result *r, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < r->ntables && i < SL_QC_MAX_TABLES; i++) {
        used += (size_t)snprintf(buf + used, len - used, "%s%s",
                                 i ? "," : "", r->tables[i]);
    }
}

/* Checks one row; prints what differs and returns false on a mismatch. */
static bool
check_row(const struct row *w)
{
    struct sl_qc_result r;
    char got[512], want[512], tables[SL_QC_MAX_TABLES * SL_QC_NAME_MAX];
    bool ok;

    sl_qc_classify(w->sql, strlen(w->sql), &r);
    ok = w->exact ? r.type == w->exact
                  : (r.type & w->req) == w->req && !(r.type & w->forb);
    ok = ok && r.op == w->op && r.hint.type == w->hint;
    if (w->hint == SL_HINT_ROUTE_TO_NAMED_SERVER) {
        ok = ok && strcmp(r.hint.server, w->server) == 0;
    }
    join_tables(&r, tables, sizeof(tables));
    if (w->tables != NULL) {
        ok = ok && strcmp(tables, w->tables) == 0;
    }
    if (w->name != NULL) {
        ok = ok && strcmp(r.name, w->name) == 0;
    }
    if (!ok) {
        print_error("MISMATCH: %s\n  want %s op %d hint %d tables %s "
                    "name %s\n  got  %s op %d hint %d(%s) tables %s "
                    "name %s\n", w->sql,
                    sl_qc_type_str(w->exact ? w->exact : w->req, want,
                                   sizeof(want)),
                    w->op, w->hint, w->tables ? w->tables : "-",
                    w->name ? w->name : "-",
                    sl_qc_type_str(r.type, got, sizeof(got)), r.op,
                    r.hint.type, r.hint.server, tables, r.name);
    }
    return ok;
}

static void
test_table(void **state)
{
    unsigned bad = 0;

    (void)state;
    assert_true(SL_ARRAY_LEN(rows) >= 300);
    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        bad += !check_row(&rows[i]);
    }
    assert_int_equal(bad, 0);
}

/* Only sql[0..len) is read: a copy without a terminator, cut short. */
static void
test_length_bound(void **state)
{
    static const char text[] = "SELECT 1; DELETE FROM t";
    struct sl_qc_result r;
    char *copy = malloc(9);

    (void)state;
    assert_non_null(copy);
    memcpy(copy, text, 9);
    sl_qc_classify(copy, 9, &r);
    assert_int_equal(r.type, SL_QC_READ);
    sl_qc_classify(copy, 6, &r);
    assert_int_equal(r.type, SL_QC_READ);
    sl_qc_classify(copy, 5, &r);        /* "SELEC" */
    assert_int_equal(r.type, SL_QC_UNKNOWN);
    memcpy(copy, "SELECT '", 8);
    sl_qc_classify(copy, 8, &r);
    assert_int_equal(r.type, SL_QC_READ);
    memcpy(copy, "SELECT /", 8);
    sl_qc_classify(copy, 8, &r);
    assert_int_equal(r.type, SL_QC_READ);
    memcpy(copy, "SELECT @", 8);
    sl_qc_classify(copy, 8, &r);
    assert_int_equal(r.type, SL_QC_READ | SL_QC_USERVAR_READ);
    free(copy);
    sl_qc_classify(NULL, 0, &r);
    assert_int_equal(r.type, SL_QC_UNKNOWN);
    assert_int_equal(r.op, SL_QC_OP_UNDEFINED);
}

/* Names longer than SL_QC_NAME_MAX - 1 are truncated; more tables than
 * SL_QC_MAX_TABLES are counted, the first ones kept. */
static void
test_truncation(void **state)
{
    char sql[1024], longname[300];
    struct sl_qc_result r;

    (void)state;
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    snprintf(sql, sizeof(sql), "SELECT * FROM %s", longname);
    sl_qc_classify(sql, strlen(sql), &r);
    assert_int_equal(r.ntables, 1);
    assert_int_equal(strlen(r.tables[0]), SL_QC_NAME_MAX - 1);
    snprintf(sql, sizeof(sql), "USE %s", longname);
    sl_qc_classify(sql, strlen(sql), &r);
    assert_int_equal(strlen(r.name), SL_QC_NAME_MAX - 1);
    snprintf(sql, sizeof(sql), "SELECT 1 -- maxscale route to server %s",
             longname);
    sl_qc_classify(sql, strlen(sql), &r);
    assert_int_equal(r.hint.type, SL_HINT_ROUTE_TO_NAMED_SERVER);
    assert_int_equal(strlen(r.hint.server), SL_QC_NAME_MAX - 1);
    snprintf(sql, sizeof(sql), "SELECT * FROM `%s`.`%s`", longname,
             longname);
    sl_qc_classify(sql, strlen(sql), &r);
    assert_int_equal(strlen(r.tables[0]), SL_QC_NAME_MAX - 1);

    const char *many = "SELECT * FROM t1, t2, t3, t4, t5, t6, t7, t8, t9, "
                       "t10, t1, t2";
    sl_qc_classify(many, strlen(many), &r);
    assert_int_equal(r.ntables, 10);
    assert_string_equal(r.tables[0], "t1");
    assert_string_equal(r.tables[7], "t8");
}

/* A COM_QUERY packet for sql with sequence 0 as a heap chain whose bytes
 * are split into segments of `seg` bytes. */
static struct sl_buf *
query_chain(uint8_t cmd, const char *sql, size_t seg)
{
    size_t len = strlen(sql), total = len + 5;
    unsigned char *pkt = malloc(total);
    struct sl_buf *buf = sl_buf_new();

    assert_non_null(pkt);
    assert_non_null(buf);
    pkt[0] = (unsigned char)((len + 1) & 0xff);
    pkt[1] = (unsigned char)(((len + 1) >> 8) & 0xff);
    pkt[2] = (unsigned char)(((len + 1) >> 16) & 0xff);
    pkt[3] = 0;
    pkt[4] = cmd;
    memcpy(pkt + 5, sql, len);
    for (size_t off = 0; off < total; off += seg) {
        struct sl_buf *part = sl_buf_from(pkt + off,
                                          total - off < seg ? total - off
                                                            : seg);

        assert_non_null(part);
        sl_buf_append(buf, part);
        sl_buf_free(part);
    }
    free(pkt);
    return buf;
}

static void
test_classify_buf(void **state)
{
    static const char sql[] = "SELECT * FROM t1 FOR UPDATE";
    struct sl_qc_result r;
    struct sl_buf *buf;

    (void)state;
    for (size_t seg = 1; seg <= sizeof(sql) + 5; seg++) {
        buf = query_chain(SL_COM_QUERY, sql, seg);
        assert_true(sl_qc_classify_buf(buf, &r));
        assert_int_equal(r.type, SL_QC_READ | SL_QC_MASTER_READ);
        assert_int_equal(r.ntables, 1);
        assert_string_equal(r.tables[0], "t1");
        sl_buf_free(buf);
    }
    buf = query_chain(SL_COM_STMT_PREPARE, "UPDATE t SET a = ?", 4096);
    assert_true(sl_qc_classify_buf(buf, &r));
    assert_int_equal(r.type, SL_QC_WRITE);
    sl_buf_free(buf);
    buf = query_chain(SL_COM_PING, "", 4096);
    assert_false(sl_qc_classify_buf(buf, &r));
    sl_buf_free(buf);
    buf = query_chain(SL_COM_QUERY, "", 4096);
    assert_true(sl_qc_classify_buf(buf, &r));
    assert_int_equal(r.type, SL_QC_UNKNOWN);
    sl_buf_free(buf);
    buf = sl_buf_from("\x00\x00\x00\x00\x03", 5);    /* empty packet */
    assert_false(sl_qc_classify_buf(buf, &r));
    sl_buf_free(buf);
    buf = sl_buf_from("\x01\x00", 2);
    assert_false(sl_qc_classify_buf(buf, &r));
    sl_buf_free(buf);
}

/* A statement over 16 MiB arrives as a full packet and a continuation; the
 * second packet's header must not reach the classifier. */
static void
test_classify_buf_multipacket(void **state)
{
    const size_t first = SL_MDB_MAX_PAYLOAD, rest = 0x3b;
    static const char tail[] = "'; SELECT 2";
    size_t total = SL_MDB_HDR_LEN + first + SL_MDB_HDR_LEN + rest;
    unsigned char *p = malloc(total), *q;
    struct sl_qc_result r;
    struct sl_buf *buf;

    (void)state;
    assert_non_null(p);
    memcpy(p, "\xff\xff\xff\x00\x03SELECT '", 13);
    memset(p + 13, 'x', total - 13);
    q = p + SL_MDB_HDR_LEN + first;
    memcpy(q, "\x3b\x00\x00\x01", 4);
    memcpy(q + 4 + rest - strlen(tail), tail, strlen(tail));
    buf = sl_buf_from(p, total);
    assert_non_null(buf);
    assert_true(sl_qc_classify_buf(buf, &r));
    assert_int_equal(r.type, SL_QC_READ | SL_QC_MULTI_STMT);
    sl_buf_free(buf);
    /* A second header of length 0x3b (';') would split the statement if
     * it leaked into the text. */
    memcpy(p + 5, "SELECT 1", 8);
    memset(p + 13, ' ', total - 13);
    memcpy(q, "\x3b\x00\x00\x01", 4);
    buf = sl_buf_from(p, SL_MDB_HDR_LEN + first + SL_MDB_HDR_LEN + 0x3b);
    assert_non_null(buf);
    assert_true(sl_qc_classify_buf(buf, &r));
    assert_int_equal(r.type, SL_QC_READ);
    sl_buf_free(buf);
    free(p);
}

static void
test_type_str(void **state)
{
    char buf[512], small[8];

    (void)state;
    assert_string_equal(sl_qc_type_str(SL_QC_READ | SL_QC_MASTER_READ, buf,
                                       sizeof(buf)),
                        "READ|MASTER_READ");
    assert_string_equal(sl_qc_type_str(0, buf, sizeof(buf)), "NONE");
    assert_string_equal(sl_qc_type_str(SL_QC_UNKNOWN, buf, sizeof(buf)),
                        "UNKNOWN");
    assert_string_equal(sl_qc_type_str(SL_QC_SHOW | SL_QC_WRITE, buf,
                                       sizeof(buf)),
                        "WRITE|SHOW");
    assert_string_equal(sl_qc_type_str(SL_QC_SESSION_WRITE, small,
                                       sizeof(small)),
                        "SESSION");
    assert_string_equal(sl_qc_type_str(0xffffffffu, buf, sizeof(buf)),
                        "READ|WRITE|DDL|SESSION_WRITE|USERVAR_WRITE|"
                        "USERVAR_READ|SYSVAR_READ|GSYSVAR_WRITE|BEGIN_TRX|"
                        "COMMIT|ROLLBACK|ENABLE_AUTOCOMMIT|"
                        "DISABLE_AUTOCOMMIT|READ_ONLY_TRX|READ_WRITE_TRX|"
                        "MASTER_READ|CREATE_TMP_TABLE|DROP_TABLE|"
                        "PREPARE_NAMED|DEALLOC_PREPARE|EXEC_PREPARED|"
                        "MULTI_STMT|XA|CALL|LOAD_LOCAL|SHOW|PREV_RESULT|UNKNOWN");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_length_bound),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_classify_buf),
        cmocka_unit_test(test_classify_buf_multipacket),
        cmocka_unit_test(test_type_str),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
