/* SPDX-License-Identifier: Apache-2.0 */
/*
 * c_client: a small libmariadb client the system tests drive, so that at
 * least one client speaks the protocol through the C connector (binary
 * prepared statements, COM_CHANGE_USER, COM_PING), next to the mariadb CLI
 * and PyMySQL.
 *
 *   c_client HOST PORT USER PASS MODE [ARGS...]
 *
 * HOST starting with '/' is a unix socket path (PORT is then ignored).
 * Modes:
 *   server_id                 print @@server_id
 *   query SQL                 run SQL, print each row tab-separated
 *   ps                        prepared INSERT of 100 rows with bound
 *                             parameters into a fresh table in `test`,
 *                             prepared SELECT with bound results, verify
 *                             every value, print "OK"
 *   change_user U P [DB]      set a user variable, mysql_change_user(U, P,
 *                             DB), check the variable is gone, print
 *                             "CURRENT_USER() DATABASE()"
 *   change_user_bad U P [SQL...]  mysql_change_user(U, P) must fail:
 *                             print its error number, then "SELECT 42"
 *                             and each SQL
 *   change_user_then U P SQL...  mysql_change_user(U, P), then each SQL,
 *                             its rows printed; an SQL "CHANGE:U2:P2"
 *                             changes user again, to U2 with P2
 *   ping                      mysql_ping twice, print "OK"
 *   ps_route N                (readwritesplit) a prepared "SELECT
 *                             @@server_id, ?" executed N times, printing
 *                             "read=SID" each; a prepared INSERT of
 *                             @@server_id executed N times, the rows read
 *                             back, "write=SID" each; the SELECT executed
 *                             inside a transaction, "trx=SID"; "OK"
 *   ps_mix N                  (readwritesplit) text and binary prepared
 *                             statements interleaved on one connection:
 *                             PREPARE s1 FROM 'SELECT @@server_id, ? + 1'
 *                             run by EXECUTE s1 USING @v, and "SELECT
 *                             @@server_id, ?" by mysql_stmt_execute,
 *                             each N times in turn; the values checked,
 *                             "text=SID" / "binary=SID" each, then "OK"
 *   ps_many                   eight prepared statements, some closed in
 *                             the middle, each must answer its own value
 *   ps_sescmd SERVER...       (readwritesplit) prepared "SET @psv = ?"
 *                             (42) and "SET time_zone = ?" ('+05:00')
 *                             executed and closed, then for each SERVER
 *                             (a named-server hint) print
 *                             "SERVER_ID<TAB>@psv<TAB>@@time_zone"
 *   long_data TABLE MIB       CREATE OR REPLACE TABLE test.TABLE (id INT
 *                             PRIMARY KEY, b LONGBLOB); a prepared INSERT
 *                             whose blob is sent with
 *                             mysql_stmt_send_long_data (COM_STMT_SEND_
 *                             LONG_DATA) in 1 MiB pieces, MIB of them, byte
 *                             k = (k * 7 + k / 65536) & 0xff; then print
 *                             "LENGTH(b)<TAB>MD5(b)" read back
 *   cursor TABLE              a prepared "SELECT id, v FROM test.TABLE
 *                             ORDER BY id" with CURSOR_TYPE_READ_ONLY and
 *                             7 rows per COM_STMT_FETCH; every row must
 *                             have id = 1, 2, ... and v = 3 * id; prints
 *                             "rows=N" (also inside a transaction:
 *                             "trx rows=N")
 *   ps_pause TABLE FIRST      (a primary lost while idle) a prepared
 *                             "INSERT INTO test.TABLE VALUES (?,
 *                             @@server_id)" executed with id 1, "ready"
 *                             printed, then one line read from stdin;
 *                             then, FIRST = exec: the same statement
 *                             executed with id 2, then a new prepared
 *                             INSERT with id 3; FIRST = prepare: the new
 *                             one first (id 3), then id 2; "OK"
 *
 * Exit status 0 on success; 1 with "error CODE (SQLSTATE): MESSAGE" on
 * stderr for any MySQL error; 2 for usage errors.
 */
#include <mysql.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PS_ROWS 100

static int
fail(MYSQL *conn, const char *what)
{
    fprintf(stderr, "%s: error %u (%s): %s\n", what, mysql_errno(conn),
            mysql_sqlstate(conn), mysql_error(conn));
    return 1;
}

static int
fail_stmt(MYSQL_STMT *stmt, const char *what)
{
    fprintf(stderr, "%s: error %u (%s): %s\n", what, mysql_stmt_errno(stmt),
            mysql_stmt_sqlstate(stmt), mysql_stmt_error(stmt));
    return 1;
}

/* Connect; NULL with the error printed on failure. */
static MYSQL *
connect_to(const char *host, const char *port, const char *user,
           const char *pass, const char *db)
{
    MYSQL *conn = mysql_init(NULL);
    unsigned int timeout = 10;
    unsigned int read_timeout = 60;
    const char *socket_path = NULL;
    unsigned int proto = MYSQL_PROTOCOL_TCP;

    if (conn == NULL) {
        fprintf(stderr, "mysql_init: out of memory\n");
        return NULL;
    }
    if (host[0] == '/') {
        socket_path = host;
        host = "localhost";
        proto = MYSQL_PROTOCOL_SOCKET;
    }
    mysql_options(conn, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(conn, MYSQL_OPT_READ_TIMEOUT, &read_timeout);
    mysql_options(conn, MYSQL_OPT_WRITE_TIMEOUT, &read_timeout);
    mysql_options(conn, MYSQL_OPT_PROTOCOL, &proto);
    if (mysql_real_connect(conn, host, user, pass, db,
                           (unsigned int)atoi(port), socket_path, 0) == NULL) {
        fail(conn, "connect");
        mysql_close(conn);
        return NULL;
    }
    return conn;
}

/* Run sql and print every row, columns separated by tabs. */
static int
run_query(MYSQL *conn, const char *sql)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    unsigned int i, n;

    if (mysql_query(conn, sql) != 0) {
        return fail(conn, "query");
    }
    do {
        res = mysql_store_result(conn);
        if (res == NULL) {
            if (mysql_field_count(conn) != 0) {
                return fail(conn, "store_result");
            }
            continue;
        }
        n = mysql_num_fields(res);
        while ((row = mysql_fetch_row(res)) != NULL) {
            for (i = 0; i < n; i++) {
                printf("%s%s", i ? "\t" : "", row[i] ? row[i] : "NULL");
            }
            printf("\n");
        }
        mysql_free_result(res);
    } while (mysql_next_result(conn) == 0);
    if (mysql_errno(conn) != 0) {
        return fail(conn, "next_result");
    }
    return 0;
}

/* Row i of the prepared-statement test data. */
struct ps_row {
    int id;
    char name[64];
    unsigned long name_len;
    double val;
};

static void
ps_row_make(struct ps_row *r, int i)
{
    r->id = i;
    r->name_len = (unsigned long)snprintf(r->name, sizeof(r->name),
                                          "row-%d-%s", i,
                                          i % 2 ? "odd" : "even");
    r->val = i * 1.5;
}

static void
bind_row(MYSQL_BIND *b, struct ps_row *r)
{
    memset(b, 0, 3 * sizeof(*b));
    b[0].buffer_type = MYSQL_TYPE_LONG;
    b[0].buffer = &r->id;
    b[1].buffer_type = MYSQL_TYPE_STRING;
    b[1].buffer = r->name;
    b[1].buffer_length = sizeof(r->name);
    b[1].length = &r->name_len;
    b[2].buffer_type = MYSQL_TYPE_DOUBLE;
    b[2].buffer = &r->val;
}

/* Insert PS_ROWS rows with one prepared INSERT executed PS_ROWS times. */
static int
ps_insert(MYSQL *conn, const char *table)
{
    char sql[256];
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    MYSQL_BIND b[3];
    struct ps_row r;
    int i;

    if (stmt == NULL) {
        return fail(conn, "stmt_init");
    }
    snprintf(sql, sizeof(sql), "INSERT INTO %s (id, name, val) "
             "VALUES (?, ?, ?)", table);
    if (mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0) {
        return fail_stmt(stmt, "prepare insert");
    }
    if (mysql_stmt_param_count(stmt) != 3) {
        fprintf(stderr, "insert: %lu params, expected 3\n",
                mysql_stmt_param_count(stmt));
        return 1;
    }
    bind_row(b, &r);
    if (mysql_stmt_bind_param(stmt, b) != 0) {
        return fail_stmt(stmt, "bind_param");
    }
    for (i = 0; i < PS_ROWS; i++) {
        ps_row_make(&r, i);
        if (mysql_stmt_execute(stmt) != 0) {
            return fail_stmt(stmt, "execute insert");
        }
        if (mysql_stmt_affected_rows(stmt) != 1) {
            fprintf(stderr, "insert %d: affected rows != 1\n", i);
            return 1;
        }
    }
    mysql_stmt_close(stmt);
    return 0;
}

static int
ps_check_row(const struct ps_row *got, int i)
{
    struct ps_row want;

    ps_row_make(&want, i);
    if (got->id != want.id || got->val != want.val
        || got->name_len != want.name_len
        || memcmp(got->name, want.name, want.name_len) != 0) {
        fprintf(stderr, "row %d: got (%d, %.*s, %g)\n", i, got->id,
                (int)got->name_len, got->name, got->val);
        return 1;
    }
    return 0;
}

/* Read the rows back with a prepared SELECT (bound parameter and bound
 * results) and verify each; the statement is executed twice. */
static int
ps_select(MYSQL *conn, const char *table)
{
    char sql[256];
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    MYSQL_BIND param, res[3];
    struct ps_row r;
    int from, n, pass;

    if (stmt == NULL) {
        return fail(conn, "stmt_init");
    }
    snprintf(sql, sizeof(sql), "SELECT id, name, val FROM %s "
             "WHERE id >= ? ORDER BY id", table);
    if (mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0) {
        return fail_stmt(stmt, "prepare select");
    }
    memset(&param, 0, sizeof(param));
    param.buffer_type = MYSQL_TYPE_LONG;
    param.buffer = &from;
    if (mysql_stmt_bind_param(stmt, &param) != 0) {
        return fail_stmt(stmt, "bind_param select");
    }
    bind_row(res, &r);
    for (pass = 0; pass < 2; pass++) {
        from = pass * (PS_ROWS / 2);
        if (mysql_stmt_execute(stmt) != 0) {
            return fail_stmt(stmt, "execute select");
        }
        if (mysql_stmt_bind_result(stmt, res) != 0) {
            return fail_stmt(stmt, "bind_result");
        }
        if (mysql_stmt_store_result(stmt) != 0) {
            return fail_stmt(stmt, "store_result");
        }
        for (n = from; mysql_stmt_fetch(stmt) == 0; n++) {
            if (ps_check_row(&r, n) != 0) {
                return 1;
            }
        }
        if (n != PS_ROWS) {
            fprintf(stderr, "select from %d: %d rows\n", from, n - from);
            return 1;
        }
        mysql_stmt_free_result(stmt);
    }
    mysql_stmt_close(stmt);
    return 0;
}

static int
mode_ps(MYSQL *conn)
{
    char table[64], sql[256];
    int rc;

    snprintf(table, sizeof(table), "test.c_client_ps_%ld", (long)getpid());
    snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s", table);
    if (run_query(conn, sql) != 0) {
        return 1;
    }
    snprintf(sql, sizeof(sql), "CREATE TABLE %s (id INT PRIMARY KEY, "
             "name VARCHAR(64), val DOUBLE)", table);
    if (run_query(conn, sql) != 0) {
        return 1;
    }
    rc = ps_insert(conn, table);
    if (rc == 0) {
        rc = ps_select(conn, table);
    }
    snprintf(sql, sizeof(sql), "DROP TABLE %s", table);
    if (run_query(conn, sql) != 0) {
        return 1;
    }
    if (rc == 0) {
        printf("OK\n");
    }
    return rc;
}

static int
mode_change_user(MYSQL *conn, int argc, char **argv)
{
    const char *db;
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (argc < 2) {
        fprintf(stderr, "change_user needs USER PASS [DB]\n");
        return 2;
    }
    db = argc > 2 ? argv[2] : NULL;
    if (mysql_query(conn, "SET @c_client_var = 42") != 0) {
        return fail(conn, "set");
    }
    if (mysql_change_user(conn, argv[0], argv[1], db) != 0) {
        return fail(conn, "change_user");
    }
    /* COM_CHANGE_USER resets the session: the variable must be gone. */
    if (mysql_query(conn, "SELECT @c_client_var IS NULL") != 0) {
        return fail(conn, "select after change_user");
    }
    res = mysql_store_result(conn);
    row = res ? mysql_fetch_row(res) : NULL;
    if (row == NULL || row[0] == NULL || strcmp(row[0], "1") != 0) {
        fprintf(stderr, "change_user did not reset the session\n");
        return 1;
    }
    mysql_free_result(res);
    return run_query(conn, "SELECT CURRENT_USER(), DATABASE()");
}

/* mysql_change_user to an account that does not exist must fail; print
 * its error number, then the connection must still answer a query. */
static int
mode_change_user_bad(MYSQL *conn, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "change_user_bad needs USER PASS\n");
        return 2;
    }
    if (mysql_change_user(conn, argv[0], argv[1], NULL) == 0) {
        fprintf(stderr, "change_user to %s succeeded\n", argv[0]);
        return 1;
    }
    printf("%u\n", mysql_errno(conn));
    if (run_query(conn, "SELECT 42") != 0) {
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        char u[128];
        const char *pw;

        if (strncmp(argv[i], "CHANGE:", 7) == 0 &&
            (pw = strchr(argv[i] + 7, ':')) != NULL &&
            (size_t)(pw - argv[i] - 7) < sizeof(u)) {
            snprintf(u, sizeof(u), "%.*s", (int)(pw - argv[i] - 7),
                     argv[i] + 7);
            if (mysql_change_user(conn, u, pw + 1, NULL) != 0) {
                return fail(conn, "change_user again");
            }
        } else if (run_query(conn, argv[i]) != 0) {
            return 1;
        }
    }
    return 0;
}

/* mysql_change_user(U, P), then run each SQL. */
static int
mode_change_user_then(MYSQL *conn, int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "change_user_then needs USER PASS SQL...\n");
        return 2;
    }
    if (mysql_change_user(conn, argv[0], argv[1], NULL) != 0) {
        return fail(conn, "change_user");
    }
    for (int i = 2; i < argc; i++) {
        char u[128];
        const char *pw;

        if (strncmp(argv[i], "CHANGE:", 7) == 0 &&
            (pw = strchr(argv[i] + 7, ':')) != NULL &&
            (size_t)(pw - argv[i] - 7) < sizeof(u)) {
            snprintf(u, sizeof(u), "%.*s", (int)(pw - argv[i] - 7),
                     argv[i] + 7);
            if (mysql_change_user(conn, u, pw + 1, NULL) != 0) {
                return fail(conn, "change_user again");
            }
        } else if (run_query(conn, argv[i]) != 0) {
            return 1;
        }
    }
    return 0;
}

static int
mode_ping(MYSQL *conn)
{
    if (mysql_ping(conn) != 0 || mysql_ping(conn) != 0) {
        return fail(conn, "ping");
    }
    printf("OK\n");
    return 0;
}

/* Execute the prepared "SELECT @@server_id, ?" once with i; print
 * "<tag>=SID" after checking the parameter came back. */
static int
ps_route_select(MYSQL_STMT *stmt, int i, const char *tag)
{
    MYSQL_BIND param, res[2];
    long long sid = 0, echo = -1;
    int v = i;

    memset(&param, 0, sizeof(param));
    param.buffer_type = MYSQL_TYPE_LONG;
    param.buffer = &v;
    memset(res, 0, sizeof(res));
    res[0].buffer_type = MYSQL_TYPE_LONGLONG;
    res[0].buffer = &sid;
    res[1].buffer_type = MYSQL_TYPE_LONGLONG;
    res[1].buffer = &echo;
    if (mysql_stmt_bind_param(stmt, &param) != 0 ||
        mysql_stmt_execute(stmt) != 0 ||
        mysql_stmt_bind_result(stmt, res) != 0 ||
        mysql_stmt_store_result(stmt) != 0) {
        return fail_stmt(stmt, "execute select");
    }
    if (mysql_stmt_fetch(stmt) != 0 || echo != i) {
        fprintf(stderr, "select %d: bad row (echo %lld)\n", i, echo);
        return 1;
    }
    mysql_stmt_free_result(stmt);
    printf("%s=%lld\n", tag, sid);
    return 0;
}

static int
ps_route_insert(MYSQL *conn, const char *table, int n)
{
    char sql[256];
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    MYSQL_BIND param;
    int id;

    snprintf(sql, sizeof(sql), "INSERT INTO %s (id, sid) VALUES "
             "(?, @@server_id)", table);
    if (stmt == NULL || mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0) {
        return stmt ? fail_stmt(stmt, "prepare insert") : 1;
    }
    memset(&param, 0, sizeof(param));
    param.buffer_type = MYSQL_TYPE_LONG;
    param.buffer = &id;
    for (id = 0; id < n; id++) {
        if (mysql_stmt_bind_param(stmt, &param) != 0 ||
            mysql_stmt_execute(stmt) != 0) {
            return fail_stmt(stmt, "execute insert");
        }
    }
    mysql_stmt_close(stmt);
    snprintf(sql, sizeof(sql), "SELECT CONCAT('write=', sid) FROM %s "
             "ORDER BY id FOR UPDATE", table);
    return run_query(conn, sql);
}

/* Run a transaction opened by the prepared `begin` and closed by a
 * prepared COMMIT: five selects printed as "<tag>=SID". */
static int
ps_route_trx(MYSQL *conn, MYSQL_STMT *sel, const char *begin, const char *tag)
{
    MYSQL_STMT *b = mysql_stmt_init(conn);
    MYSQL_STMT *c = mysql_stmt_init(conn);
    int rc = 0;

    if (b == NULL || c == NULL ||
        mysql_stmt_prepare(b, begin, strlen(begin)) != 0 ||
        mysql_stmt_prepare(c, "COMMIT", 6) != 0) {
        rc = b ? fail_stmt(b, "prepare begin/commit") : 1;
    }
    if (rc == 0 && mysql_stmt_execute(b) != 0) {
        rc = fail_stmt(b, "execute begin");
    }
    for (int i = 0; i < 5 && rc == 0; i++) {
        rc = ps_route_select(sel, i, tag);
    }
    if (rc == 0 && mysql_stmt_execute(c) != 0) {
        rc = fail_stmt(c, "execute commit");
    }
    if (b != NULL) {
        mysql_stmt_close(b);
    }
    if (c != NULL) {
        mysql_stmt_close(c);
    }
    return rc;
}

static int
mode_ps_route(MYSQL *conn, int argc, char **argv)
{
    const char *sel = "SELECT @@server_id, ?";
    int n = argc >= 1 ? atoi(argv[0]) : 100;
    char table[64], sql[256];
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    int rc = 0;

    if (stmt == NULL || mysql_stmt_prepare(stmt, sel, strlen(sel)) != 0) {
        return stmt ? fail_stmt(stmt, "prepare select") : 1;
    }
    for (int i = 0; i < n && rc == 0; i++) {
        rc = ps_route_select(stmt, i, "read");
    }
    if (rc == 0 && run_query(conn, "START TRANSACTION") != 0) {
        rc = 1;
    }
    for (int i = 0; i < 5 && rc == 0; i++) {
        rc = ps_route_select(stmt, i, "trx");
    }
    if (rc == 0 && run_query(conn, "COMMIT") != 0) {
        rc = 1;
    }
    /* sysbench's way: BEGIN and COMMIT are prepared statements too. */
    if (rc == 0) {
        rc = ps_route_trx(conn, stmt, "BEGIN", "pstrx");
    }
    if (rc == 0) {
        rc = ps_route_trx(conn, stmt, "START TRANSACTION READ ONLY", "rotrx");
    }
    mysql_stmt_close(stmt);
    snprintf(table, sizeof(table), "test.c_client_psr_%ld", (long)getpid());
    snprintf(sql, sizeof(sql), "CREATE TABLE %s (id INT PRIMARY KEY, "
             "sid INT)", table);
    if (rc != 0 || run_query(conn, sql) != 0) {
        return 1;
    }
    rc = ps_route_insert(conn, table, n);
    snprintf(sql, sizeof(sql), "DROP TABLE %s", table);
    if (run_query(conn, sql) != 0 || rc != 0) {
        return 1;
    }
    printf("OK\n");
    return 0;
}

/* Execute a prepared "SELECT n"; its value, or -1. */
static long long
ps_many_value(MYSQL_STMT *stmt)
{
    long long v = -1;
    MYSQL_BIND res;

    memset(&res, 0, sizeof(res));
    res.buffer_type = MYSQL_TYPE_LONGLONG;
    res.buffer = &v;
    if (mysql_stmt_execute(stmt) != 0 ||
        mysql_stmt_bind_result(stmt, &res) != 0 ||
        mysql_stmt_store_result(stmt) != 0 || mysql_stmt_fetch(stmt) != 0) {
        return -1;
    }
    mysql_stmt_free_result(stmt);
    return v;
}

/*
 * Eight statements "SELECT 10*i"; the first, a middle and a late one
 * closed; every other one executed three times, then a new one prepared
 * and all executed again. Each must answer its own value: the router's
 * statement table keeps working after removals in the middle.
 */
static int
mode_ps_many(MYSQL *conn)
{
    MYSQL_STMT *st[9];
    bool closed[9] = {false};
    char sql[32];
    int bad = 0;

    for (int i = 0; i < 9; i++) {
        st[i] = mysql_stmt_init(conn);
        snprintf(sql, sizeof(sql), "SELECT %d", 10 * i);
        if (i < 8 && (st[i] == NULL ||
                      mysql_stmt_prepare(st[i], sql, strlen(sql)) != 0)) {
            return st[i] ? fail_stmt(st[i], "prepare") : 1;
        }
    }
    for (int i = 0; i < 8; i += 1) {
        if (i == 0 || i == 3 || i == 6) {
            mysql_stmt_close(st[i]);
            closed[i] = true;
        }
    }
    for (int round = 0; round < 4; round++) {
        if (round == 3) {
            snprintf(sql, sizeof(sql), "SELECT %d", 80);
            if (mysql_stmt_prepare(st[8], sql, strlen(sql)) != 0) {
                return fail_stmt(st[8], "prepare late");
            }
        }
        for (int i = 0; i < (round == 3 ? 9 : 8); i++) {
            long long v;

            if (closed[i]) {
                continue;
            }
            v = ps_many_value(st[i]);
            if (v != 10 * i) {
                fprintf(stderr, "statement %d answered %lld\n", i, v);
                bad++;
            }
        }
    }
    for (int i = 0; i < 9; i++) {
        if (!closed[i]) {
            mysql_stmt_close(st[i]);
        }
    }
    if (bad == 0) {
        printf("OK\n");
    }
    return bad != 0;
}

/* Prepare sql, execute it once with one bound parameter, close it. */
static int
ps_set_once(MYSQL *conn, const char *sql, MYSQL_BIND *param)
{
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    int rc = 0;

    if (stmt == NULL) {
        return fail(conn, "stmt_init");
    }
    if (mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0) {
        rc = fail_stmt(stmt, "prepare");
    } else if (mysql_stmt_bind_param(stmt, param) != 0) {
        rc = fail_stmt(stmt, "bind");
    } else if (mysql_stmt_execute(stmt) != 0) {
        rc = fail_stmt(stmt, "execute");
    }
    mysql_stmt_close(stmt);
    return rc;
}

/* Session state set through prepared statements, then read on each
 * named server: every connection must have it. */
static int
mode_ps_sescmd(MYSQL *conn, int argc, char **argv)
{
    int val = 42;
    char tz[] = "+05:00";
    unsigned long tz_len = sizeof(tz) - 1;
    MYSQL_BIND b;
    char sql[192];

    memset(&b, 0, sizeof(b));
    b.buffer_type = MYSQL_TYPE_LONG;
    b.buffer = &val;
    if (ps_set_once(conn, "SET @psv = ?", &b) != 0) {
        return 1;
    }
    memset(&b, 0, sizeof(b));
    b.buffer_type = MYSQL_TYPE_STRING;
    b.buffer = tz;
    b.buffer_length = sizeof(tz);
    b.length = &tz_len;
    if (ps_set_once(conn, "SET time_zone = ?", &b) != 0) {
        return 1;
    }
    for (int i = 0; i < argc; i++) {
        snprintf(sql, sizeof(sql), "SELECT @@server_id, @psv, @@time_zone "
                 "-- maxscale route to server %s", argv[i]);
        if (run_query(conn, sql) != 0) {
            return 1;
        }
    }
    return 0;
}

/* EXECUTE the text-protocol statement s1 ('SELECT @@server_id, ? + 1')
 * with @v = i; print "text=SID" after checking the value came back. */
static int
ps_mix_text(MYSQL *conn, int i)
{
    char sql[64];
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc = 1;

    snprintf(sql, sizeof(sql), "SET @v = %d", i);
    if (mysql_query(conn, sql) != 0 ||
        mysql_query(conn, "EXECUTE s1 USING @v") != 0) {
        return fail(conn, "execute s1");
    }
    res = mysql_store_result(conn);
    if (res == NULL) {
        return fail(conn, "store_result s1");
    }
    row = mysql_fetch_row(res);
    if (row != NULL && row[0] != NULL && row[1] != NULL &&
        atoi(row[1]) == i + 1) {
        printf("text=%s\n", row[0]);
        rc = 0;
    } else {
        fprintf(stderr, "execute s1 %d: bad row\n", i);
    }
    mysql_free_result(res);
    return rc;
}

static int
mode_ps_mix(MYSQL *conn, int argc, char **argv)
{
    const char *sel = "SELECT @@server_id, ?";
    int n = argc >= 1 ? atoi(argv[0]) : 10;
    MYSQL_STMT *stmt;
    int rc = 0;

    if (mysql_query(conn, "PREPARE s1 FROM "
                    "'SELECT @@server_id, ? + 1'") != 0) {
        return fail(conn, "prepare s1");
    }
    stmt = mysql_stmt_init(conn);
    if (stmt == NULL || mysql_stmt_prepare(stmt, sel, strlen(sel)) != 0) {
        return stmt ? fail_stmt(stmt, "prepare select") : 1;
    }
    for (int i = 0; i < n && rc == 0; i++) {
        rc = ps_mix_text(conn, i);
        if (rc == 0) {
            rc = ps_route_select(stmt, i, "binary");
        }
    }
    mysql_stmt_close(stmt);
    if (rc != 0 || mysql_query(conn, "DEALLOCATE PREPARE s1") != 0) {
        return rc ? rc : fail(conn, "deallocate s1");
    }
    printf("OK\n");
    return 0;
}

static int
mode_long_data(MYSQL *conn, int argc, char **argv)
{
    char sql[256];
    const size_t piece = 1024 * 1024;
    unsigned char *buf;
    MYSQL_STMT *stmt;
    MYSQL_BIND b;
    long mib;
    int rc = 0;

    if (argc < 2) {
        return 2;
    }
    mib = atol(argv[1]);
    snprintf(sql, sizeof(sql), "CREATE OR REPLACE TABLE test.`%s` "
             "(id INT PRIMARY KEY, b LONGBLOB)", argv[0]);
    if (mysql_query(conn, sql) != 0) {
        return fail(conn, "create");
    }
    snprintf(sql, sizeof(sql), "INSERT INTO test.`%s` VALUES (1, ?)",
             argv[0]);
    stmt = mysql_stmt_init(conn);
    if (stmt == NULL || mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0) {
        return stmt ? fail_stmt(stmt, "prepare insert") : 1;
    }
    memset(&b, 0, sizeof(b));
    b.buffer_type = MYSQL_TYPE_LONG_BLOB;
    if (mysql_stmt_bind_param(stmt, &b) != 0) {
        return fail_stmt(stmt, "bind");
    }
    buf = malloc(piece);
    for (long m = 0; m < mib && rc == 0; m++) {
        for (size_t i = 0; i < piece; i++) {
            size_t k = (size_t)m * piece + i;
            buf[i] = (unsigned char)((k * 7 + k / 65536) & 0xff);
        }
        if (mysql_stmt_send_long_data(stmt, 0, (const char *)buf, piece)
            != 0) {
            rc = fail_stmt(stmt, "send_long_data");
        }
    }
    free(buf);
    if (rc == 0 && mysql_stmt_execute(stmt) != 0) {
        rc = fail_stmt(stmt, "execute");
    }
    mysql_stmt_close(stmt);
    if (rc == 0) {
        snprintf(sql, sizeof(sql), "SELECT LENGTH(b), MD5(b) FROM "
                 "test.`%s` WHERE id = 1", argv[0]);
        rc = run_query(conn, sql);
    }
    return rc;
}

static int
cursor_once(MYSQL *conn, const char *table, const char *label)
{
    char sql[256];
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    unsigned long type = CURSOR_TYPE_READ_ONLY, prefetch = 7;
    long long id = 0, v = 0, n = 0;
    MYSQL_BIND out[2];
    int rc = 0, f;

    snprintf(sql, sizeof(sql), "SELECT id, v FROM test.`%s` ORDER BY id",
             table);
    if (stmt == NULL || mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0) {
        return stmt ? fail_stmt(stmt, "prepare cursor") : 1;
    }
    if (mysql_stmt_attr_set(stmt, STMT_ATTR_CURSOR_TYPE, &type) != 0 ||
        mysql_stmt_attr_set(stmt, STMT_ATTR_PREFETCH_ROWS, &prefetch) != 0) {
        return fail_stmt(stmt, "cursor attributes");
    }
    if (mysql_stmt_execute(stmt) != 0) {
        return fail_stmt(stmt, "execute cursor");
    }
    memset(out, 0, sizeof(out));
    out[0].buffer_type = MYSQL_TYPE_LONGLONG;
    out[0].buffer = &id;
    out[1].buffer_type = MYSQL_TYPE_LONGLONG;
    out[1].buffer = &v;
    if (mysql_stmt_bind_result(stmt, out) != 0) {
        return fail_stmt(stmt, "bind result");
    }
    while ((f = mysql_stmt_fetch(stmt)) == 0) {
        n++;
        if (id != n || v != 3 * id) {
            fprintf(stderr, "row %lld: id %lld v %lld\n", n, id, v);
            rc = 1;
            break;
        }
    }
    if (rc == 0 && f != MYSQL_NO_DATA) {
        rc = fail_stmt(stmt, "fetch");
    }
    mysql_stmt_close(stmt);
    if (rc == 0) {
        printf("%srows=%lld\n", label, n);
    }
    return rc;
}

static int
mode_cursor(MYSQL *conn, int argc, char **argv)
{
    int rc;

    if (argc < 1) {
        return 2;
    }
    rc = cursor_once(conn, argv[0], "");
    if (rc == 0 && mysql_query(conn, "START TRANSACTION") != 0) {
        rc = fail(conn, "begin");
    }
    if (rc == 0) {
        rc = cursor_once(conn, argv[0], "trx ");
    }
    if (rc == 0 && mysql_query(conn, "COMMIT") != 0) {
        rc = fail(conn, "commit");
    }
    return rc;
}

/* Prepare "INSERT INTO test.TABLE VALUES (?, @@server_id)" bound to *id. */
static MYSQL_STMT *
pause_prepare(MYSQL *conn, const char *table, int *id)
{
    char sql[256];
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    MYSQL_BIND b;

    if (stmt == NULL) {
        fail(conn, "stmt_init");
        return NULL;
    }
    snprintf(sql, sizeof(sql), "INSERT INTO test.%s VALUES (?, @@server_id)",
             table);
    memset(&b, 0, sizeof(b));
    b.buffer_type = MYSQL_TYPE_LONG;
    b.buffer = id;
    if (mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0 ||
        mysql_stmt_bind_param(stmt, &b) != 0) {
        fail_stmt(stmt, "prepare insert");
        return NULL;
    }
    return stmt;
}

static int
pause_exec(MYSQL_STMT *stmt, int *id, int value)
{
    *id = value;
    if (mysql_stmt_execute(stmt) != 0) {
        return fail_stmt(stmt, "execute insert");
    }
    return 0;
}

static int
mode_ps_pause(MYSQL *conn, int argc, char **argv)
{
    static int id1, id2;
    MYSQL_STMT *s1, *s2 = NULL;
    char line[16];
    bool prepare_first = argc > 1 && strcmp(argv[1], "prepare") == 0;

    if (argc < 2 || (s1 = pause_prepare(conn, argv[0], &id1)) == NULL ||
        pause_exec(s1, &id1, 1) != 0) {
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    if (fgets(line, sizeof(line), stdin) == NULL) {
        return 2;
    }
    if (prepare_first && ((s2 = pause_prepare(conn, argv[0], &id2)) == NULL ||
                          pause_exec(s2, &id2, 3) != 0)) {
        return 1;
    }
    if (pause_exec(s1, &id1, 2) != 0) {
        return 1;
    }
    if (!prepare_first && ((s2 = pause_prepare(conn, argv[0], &id2)) == NULL ||
                           pause_exec(s2, &id2, 3) != 0)) {
        return 1;
    }
    mysql_stmt_close(s1);
    mysql_stmt_close(s2);
    printf("OK\n");
    return 0;
}

static int
run_mode(MYSQL *conn, const char *mode, int argc, char **argv)
{
    if (strcmp(mode, "server_id") == 0) {
        return run_query(conn, "SELECT @@server_id");
    }
    if (strcmp(mode, "query") == 0 && argc >= 1) {
        return run_query(conn, argv[0]);
    }
    if (strcmp(mode, "ps") == 0) {
        return mode_ps(conn);
    }
    if (strcmp(mode, "change_user") == 0) {
        return mode_change_user(conn, argc, argv);
    }
    if (strcmp(mode, "change_user_bad") == 0) {
        return mode_change_user_bad(conn, argc, argv);
    }
    if (strcmp(mode, "change_user_then") == 0) {
        return mode_change_user_then(conn, argc, argv);
    }
    if (strcmp(mode, "ping") == 0) {
        return mode_ping(conn);
    }
    if (strcmp(mode, "ps_many") == 0) {
        return mode_ps_many(conn);
    }
    if (strcmp(mode, "ps_sescmd") == 0) {
        return mode_ps_sescmd(conn, argc, argv);
    }
    if (strcmp(mode, "ps_route") == 0) {
        return mode_ps_route(conn, argc, argv);
    }
    if (strcmp(mode, "ps_mix") == 0) {
        return mode_ps_mix(conn, argc, argv);
    }
    if (strcmp(mode, "long_data") == 0) {
        return mode_long_data(conn, argc, argv);
    }
    if (strcmp(mode, "cursor") == 0) {
        return mode_cursor(conn, argc, argv);
    }
    if (strcmp(mode, "ps_pause") == 0) {
        return mode_ps_pause(conn, argc, argv);
    }
    fprintf(stderr, "unknown mode or missing argument: %s\n", mode);
    return 2;
}

int
main(int argc, char **argv)
{
    MYSQL *conn;
    int rc;

    if (argc < 6) {
        fprintf(stderr, "usage: %s HOST PORT USER PASS MODE [ARGS...]\n",
                argv[0]);
        return 2;
    }
    conn = connect_to(argv[1], argv[2], argv[3], argv[4], NULL);
    if (conn == NULL) {
        return 1;
    }
    rc = run_mode(conn, argv[5], argc - 6, argv + 6);
    mysql_close(conn);
    fflush(stdout);
    return rc;
}
