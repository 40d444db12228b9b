/* SPDX-License-Identifier: Apache-2.0 */
/*
 * drv_c: the driver scenario (test/system/drivers/scenario.md) with
 * libmariadb, the C connector. Bound values go through the binary
 * protocol (mysql_stmt_*: COM_STMT_PREPARE / COM_STMT_EXECUTE); after the
 * common checks come three of its own: set_names, change_user
 * (COM_CHANGE_USER) and reset_connection (COM_RESET_CONNECTION).
 *
 *   drv_c HOST PORT USER PASS DB TABLE
 *
 * Prints the JSON report; exit 1 names the failed check, 2 for usage.
 */
#include <mysql.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG_LEN (4u << 20)
#define MAX_CHECKS 32

static const char TEXT1[] = "4-byte: \xF0\x9F\x98\x80\xF0\x9F\x90\xAC CJK: "
                            "\xE6\xBC\xA2\xE5\xAD\x97 \xF0\xA0\x9C\x8E "
                            "\xC3\xB1";
static const char TEXT2[] = "second \xF0\x9F\x8E\x89 \xE4\xB8\xAD\xE6\x96\x87 "
                            "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4";
static const char SQL_MODE[] = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION";
static const char TIME_ZONE[] = "+05:30";

static MYSQL *conn;
static const char *db_name;
static const char *table;
static const char *user;
static const char *pass;
static char err[512];
static unsigned char *big_data;
static unsigned char b256[256], b256r[256];

static int
failf(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, sizeof(err), fmt, ap);
    va_end(ap);
    return -1;
}

static int
fail_conn(const char *what)
{
    return failf("%s: error %u: %s", what, mysql_errno(conn),
                 mysql_error(conn));
}

static int
fail_stmt(MYSQL_STMT *stmt, const char *what)
{
    failf("%s: error %u: %s", what, mysql_stmt_errno(stmt),
          mysql_stmt_error(stmt));
    mysql_stmt_close(stmt);
    return -1;
}

static int
run(const char *sql)
{
    MYSQL_RES *res;

    if (mysql_query(conn, sql) != 0) {
        return fail_conn(sql);
    }
    res = mysql_store_result(conn);
    mysql_free_result(res);
    return 0;
}

/* The first column of the first row of SQL as a string ("NULL" for
 * NULL) into out. */
static int
one(const char *sql, char *out, size_t outlen)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (mysql_query(conn, sql) != 0 ||
        (res = mysql_store_result(conn)) == NULL) {
        return fail_conn(sql);
    }
    row = mysql_fetch_row(res);
    snprintf(out, outlen, "%s", row && row[0] ? row[0] : "NULL");
    mysql_free_result(res);
    return row ? 0 : failf("%s: no row", sql);
}

static void
fill256(unsigned char *b, bool reversed)
{
    for (int i = 0; i < 256; i++) {
        b[i] = (unsigned char)(reversed ? 255 - i : i);
    }
}

static int
insert_row(int id, const char *txt, const unsigned char *b, size_t blen)
{
    char sql[256];
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    MYSQL_BIND bind[3];
    unsigned long txt_len = strlen(txt);

    snprintf(sql, sizeof(sql),
             "INSERT INTO %s (id, txt, b) VALUES (?, ?, ?)", table);
    if (mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0) {
        return fail_stmt(stmt, "prepare INSERT");
    }
    memset(bind, 0, sizeof(bind));
    bind[0].buffer_type = MYSQL_TYPE_LONG;
    bind[0].buffer = &id;
    bind[1].buffer_type = MYSQL_TYPE_STRING;
    bind[1].buffer = (void *)txt;
    bind[1].buffer_length = txt_len;
    bind[1].length = &txt_len;
    bind[2].buffer_type = MYSQL_TYPE_BLOB;
    bind[2].buffer = (void *)b;
    bind[2].buffer_length = blen;
    if (mysql_stmt_bind_param(stmt, bind) != 0 ||
        mysql_stmt_execute(stmt) != 0) {
        return fail_stmt(stmt, "execute INSERT");
    }
    mysql_stmt_close(stmt);
    return 0;
}

/* Rows of `SELECT id, txt, b FROM table WHERE id >= ? AND id <= ?`
 * through a prepared statement; each compared with want_*[i]. */
static int
select_rows(int lo, int hi, const char *const *want_txt,
            const unsigned char *const *want_b, const size_t *want_len)
{
    char sql[256];
    MYSQL_STMT *stmt = mysql_stmt_init(conn);
    MYSQL_BIND par[2], res[3];
    int id = 0, n = 0, rc;
    char txt[256];
    unsigned long txt_len = 0, b_len = 0;
    unsigned char *b = malloc(BIG_LEN + 1);

    snprintf(sql, sizeof(sql), "SELECT id, txt, b FROM %s WHERE id >= ? "
             "AND id <= ? ORDER BY id", table);
    memset(par, 0, sizeof(par));
    memset(res, 0, sizeof(res));
    par[0].buffer_type = par[1].buffer_type = MYSQL_TYPE_LONG;
    par[0].buffer = &lo;
    par[1].buffer = &hi;
    res[0].buffer_type = MYSQL_TYPE_LONG;
    res[0].buffer = &id;
    res[1].buffer_type = MYSQL_TYPE_STRING;
    res[1].buffer = txt;
    res[1].buffer_length = sizeof(txt);
    res[1].length = &txt_len;
    res[2].buffer_type = MYSQL_TYPE_BLOB;
    res[2].buffer = b;
    res[2].buffer_length = BIG_LEN + 1;
    res[2].length = &b_len;
    if (mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0 ||
        mysql_stmt_bind_param(stmt, par) != 0 ||
        mysql_stmt_execute(stmt) != 0 ||
        mysql_stmt_bind_result(stmt, res) != 0) {
        free(b);
        return fail_stmt(stmt, "prepared SELECT");
    }
    rc = 0;
    while (rc == 0 && mysql_stmt_fetch(stmt) == 0) {
        if (n > hi - lo || id != lo + n || txt_len != strlen(want_txt[n]) ||
            memcmp(txt, want_txt[n], txt_len) != 0 ||
            b_len != want_len[n] || memcmp(b, want_b[n], b_len) != 0) {
            rc = failf("row %d differs (id %d, blob length %lu)", n + 1, id,
                       b_len);
        }
        n++;
    }
    mysql_stmt_close(stmt);
    free(b);
    if (rc == 0 && n != hi - lo + 1) {
        rc = failf("%d rows", n);
    }
    return rc;
}

static int
check_charset(void)
{
    char got[128];

    if (one("SELECT CONCAT_WS(',', @@character_set_client, "
            "@@character_set_connection, @@character_set_results)",
            got, sizeof(got)) != 0) {
        return -1;
    }
    return strcmp(got, "utf8mb4,utf8mb4,utf8mb4") == 0 ? 0
                                                         : failf("%s", got);
}

static int
check_default_db(void)
{
    char got[128];

    if (one("SELECT DATABASE()", got, sizeof(got)) != 0) {
        return -1;
    }
    return strcmp(got, db_name) == 0 ? 0 : failf("DATABASE() is %s", got);
}

static int
check_session_set(void)
{
    char sql[128];

    if (run("SET @v = 42") != 0) {
        return -1;
    }
    snprintf(sql, sizeof(sql), "SET SESSION sql_mode = '%s'", SQL_MODE);
    if (run(sql) != 0) {
        return -1;
    }
    snprintf(sql, sizeof(sql), "SET SESSION time_zone = '%s'", TIME_ZONE);
    return run(sql);
}

static int
check_create_table(void)
{
    char sql[256];

    snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s", table);
    if (run(sql) != 0) {
        return -1;
    }
    snprintf(sql, sizeof(sql), "CREATE TABLE %s (id INT PRIMARY KEY, "
             "txt VARCHAR(64) CHARACTER SET utf8mb4, b LONGBLOB)", table);
    return run(sql);
}

static int
check_insert(void)
{
    if (insert_row(1, TEXT1, b256, 256) != 0) {
        return -1;
    }
    return insert_row(2, TEXT2, b256r, 256);
}

static int
check_read_back(void)
{
    const char *txt[] = {TEXT1, TEXT2};
    const unsigned char *b[] = {b256, b256r};
    const size_t len[] = {256, 256};

    return select_rows(1, 2, txt, b, len);
}

static int
check_rollback(void)
{
    char sql[256], n3[32], n[32];

    if (mysql_autocommit(conn, 0) != 0) {
        return fail_conn("autocommit(0)");
    }
    if (insert_row(3, "rolled back", (const unsigned char *)"x", 1) != 0) {
        return -1;
    }
    if (mysql_rollback(conn) != 0 || mysql_autocommit(conn, 1) != 0) {
        return fail_conn("rollback");
    }
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s WHERE id = 3",
             table);
    if (one(sql, n3, sizeof(n3)) != 0) {
        return -1;
    }
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s", table);
    if (one(sql, n, sizeof(n)) != 0) {
        return -1;
    }
    if (strcmp(n3, "0") != 0 || strcmp(n, "2") != 0) {
        return failf("after rollback id3=%s all=%s", n3, n);
    }
    return 0;
}

static int
check_blob(void)
{
    const char *txt[] = {"big"};
    const unsigned char *b[] = {big_data};
    const size_t len[] = {BIG_LEN};

    if (insert_row(4, "big", big_data, BIG_LEN) != 0) {
        return -1;
    }
    return select_rows(4, 4, txt, b, len);
}

static int
check_big_result(void)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    long long n = 0, sum = 0;
    char want[32];
    int rc = 0;

    if (mysql_query(conn, "SELECT seq, CONCAT('row-', seq) FROM "
                          "seq_1_to_10000 ORDER BY seq") != 0 ||
        (res = mysql_use_result(conn)) == NULL) {
        return fail_conn("SELECT seq");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        snprintf(want, sizeof(want), "row-%s", row[0]);
        if (rc == 0 && strcmp(want, row[1]) != 0) {
            rc = failf("bad row %s: %s", row[0], row[1]);
        }
        n++;
        sum += atoll(row[0]);
    }
    if (mysql_errno(conn) != 0) {
        rc = fail_conn("fetch");
    }
    mysql_free_result(res);
    if (rc == 0 && (n != 10000 || sum != 50005000)) {
        rc = failf("%lld rows, sum %lld", n, sum);
    }
    return rc;
}

/* The rows of the current result as "a:b a:b ...". */
static int
result_text(char *out, size_t outlen)
{
    MYSQL_RES *res = mysql_store_result(conn);
    MYSQL_ROW row;
    size_t used = 0;

    if (res == NULL) {
        return fail_conn("no result set");
    }
    out[0] = '\0';
    while ((row = mysql_fetch_row(res)) != NULL && used < outlen) {
        used += snprintf(out + used, outlen - used, "%s%s:%s",
                         used ? " " : "", row[0], row[1]);
    }
    mysql_free_result(res);
    return 0;
}

static int
check_procedure(void)
{
    char sql[128], first[128], second[128];
    int more;

    snprintf(sql, sizeof(sql), "CALL %s.drv_two_results()", db_name);
    if (mysql_query(conn, sql) != 0 ||
        result_text(first, sizeof(first)) != 0) {
        return fail_conn(sql);
    }
    if (mysql_next_result(conn) != 0 ||
        result_text(second, sizeof(second)) != 0) {
        return failf("no second result set: %s", mysql_error(conn));
    }
    while ((more = mysql_next_result(conn)) == 0) {
        mysql_free_result(mysql_store_result(conn));
    }
    if (more > 0) {
        return fail_conn("next result");
    }
    if (strcmp(first, "1:first") != 0 ||
        strcmp(second, "1:s1 2:s2 3:s3") != 0) {
        return failf("results [%s] [%s]", first, second);
    }
    return 0;
}

static int
check_syntax_error(void)
{
    if (mysql_query(conn, "SELEC 1") == 0) {
        return failf("no error");
    }
    if (mysql_errno(conn) != 1064) {
        return fail_conn("SELEC 1");
    }
    return 0;
}

static int
check_session_kept(void)
{
    char got[256], want[256];

    if (one("SELECT CONCAT_WS('|', @v, @@session.sql_mode, "
            "@@session.time_zone)", got, sizeof(got)) != 0) {
        return -1;
    }
    snprintf(want, sizeof(want), "42|%s|%s", SQL_MODE, TIME_ZONE);
    if (strcmp(got, want) != 0) {
        return failf("session state %s", got);
    }
    return one("SELECT 1", got, sizeof(got));
}

static int
check_set_names(void)
{
    char got[64];

    if (run("SET NAMES latin1") != 0 ||
        one("SELECT @@character_set_client", got, sizeof(got)) != 0) {
        return -1;
    }
    if (strcmp(got, "latin1") != 0) {
        return failf("after SET NAMES latin1: %s", got);
    }
    if (run("SET NAMES utf8mb4") != 0 ||
        one("SELECT @@character_set_client", got, sizeof(got)) != 0) {
        return -1;
    }
    return strcmp(got, "utf8mb4") == 0 ? 0 : failf("utf8mb4: %s", got);
}

static int
check_change_user(void)
{
    char got[256], want[256];

    if (mysql_change_user(conn, user, pass, db_name) != 0) {
        return fail_conn("mysql_change_user");
    }
    if (one("SELECT CONCAT_WS('|', IFNULL(@v, 'gone'), DATABASE())", got,
            sizeof(got)) != 0) {
        return -1;
    }
    snprintf(want, sizeof(want), "gone|%s", db_name);
    return strcmp(got, want) == 0 ? 0 : failf("after change_user: %s", got);
}

static int
check_reset_connection(void)
{
    char got[256], want[256];

    if (run("SET @v = 43") != 0 ||
        run("SET SESSION time_zone = '+05:30'") != 0) {
        return -1;
    }
    if (mysql_reset_connection(conn) != 0) {
        return fail_conn("mysql_reset_connection");
    }
    if (one("SELECT CONCAT_WS('|', IFNULL(@v, 'gone'), "
            "@@session.time_zone = @@global.time_zone, DATABASE())", got,
            sizeof(got)) != 0) {
        return -1;
    }
    snprintf(want, sizeof(want), "gone|1|%s", db_name);
    return strcmp(got, want) == 0 ? 0 : failf("after reset: %s", got);
}

static const struct {
    const char *name;
    int (*fn)(void);
} checks[] = {
    {"charset", check_charset},
    {"default_db", check_default_db},
    {"session_set", check_session_set},
    {"create_table", check_create_table},
    {"insert_params", check_insert},
    {"read_back", check_read_back},
    {"rollback", check_rollback},
    {"blob_4mib", check_blob},
    {"big_result", check_big_result},
    {"procedure", check_procedure},
    {"syntax_error", check_syntax_error},
    {"session_kept", check_session_kept},
    {"set_names", check_set_names},
    {"change_user", check_change_user},
    {"reset_connection", check_reset_connection},
};

static void
print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

static int
report(size_t npassed, const char *failed)
{
    printf("{\"driver\": \"c\", \"passed\": [\"connect\"");
    for (size_t i = 0; i < npassed; i++) {
        printf(", \"%s\"", checks[i].name);
    }
    printf("]");
    if (failed != NULL) {
        printf(", \"failed\": \"%s\", \"error\": ", failed);
        print_json_string(err);
    }
    printf("}\n");
    return failed != NULL;
}

static int
connect_db(const char *host, const char *port)
{
    unsigned int timeout = 10, read_timeout = 60;
    unsigned int proto = MYSQL_PROTOCOL_TCP;

    conn = mysql_init(NULL);
    mysql_options(conn, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(conn, MYSQL_OPT_READ_TIMEOUT, &read_timeout);
    mysql_options(conn, MYSQL_OPT_PROTOCOL, &proto);
    mysql_options(conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (getenv("DRV_COMPRESS") != NULL && strcmp(getenv("DRV_COMPRESS"),
                                                 "1") == 0) {
        mysql_options(conn, MYSQL_OPT_COMPRESS, NULL);
    }
    if (mysql_real_connect(conn, host, user, pass, db_name, atoi(port), NULL,
                           CLIENT_MULTI_RESULTS) == NULL) {
        return fail_conn("connect");
    }
    return 0;
}

int
main(int argc, char **argv)
{
    size_t i;
    int rc;

    if (argc != 7) {
        fprintf(stderr, "usage: %s HOST PORT USER PASS DB TABLE\n", argv[0]);
        return 2;
    }
    user = argv[3];
    pass = argv[4];
    db_name = argv[5];
    table = argv[6];
    fill256(b256, false);
    fill256(b256r, true);
    big_data = malloc(BIG_LEN);
    for (i = 0; i < BIG_LEN; i++) {
        big_data[i] = (unsigned char)((i * 131 + (i >> 12)) & 0xff);
    }
    if (connect_db(argv[1], argv[2]) != 0) {
        rc = report(0, "connect");
    } else {
        for (i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
            if (checks[i].fn() != 0) {
                break;
            }
        }
        rc = report(i, i < sizeof(checks) / sizeof(checks[0])
                           ? checks[i].name : NULL);
    }
    mysql_close(conn);
    free(big_data);
    return rc;
}
