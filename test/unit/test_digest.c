/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the query digests' canonical text (sl__qc_canonical in
 * classifier.c) and the histogram percentiles (stats.c): literals of every
 * kind become ?, IN lists of literals collapse whatever their length,
 * comments and spacing do not matter, names and strings inside backticks
 * are kept, the hash depends on the whole text even when it is truncated,
 * quantiles interpolate inside a bucket within min and max, and the kind
 * the canonical pass derives (for routers that do not classify) is the
 * one readwritesplit's full classification gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/classifier.h>

#include "stats.h"

static const char *
canon(const char *sql, uint64_t *hash)
{
    static char out[1024];
    uint64_t h;

    sl__qc_canonical(sql, strlen(sql), out, sizeof(out), hash ? hash : &h,
                     NULL);
    return out;
}

static void
test_literals(void **state)
{
    static const char *const cases[][2] = {
        {"SELECT * FROM t WHERE id = 1", "SELECT * FROM t WHERE id = ?"},
        {"SELECT * FROM t WHERE id=2", "SELECT * FROM t WHERE id = ?"},
        {"select  a,b from t where s = 'x''y' and d = \"q\"",
         "select a, b from t where s = ? and d = ?"},
        {"SELECT 1.5e3, 0x1F, x'ab', b'01', _utf8mb4'z', N'n'",
         "SELECT ?, ?, ?, ?, ?, ?"},
        {"SELECT * FROM t WHERE id IN (1,2,3)",
         "SELECT * FROM t WHERE id IN (...)"},
        {"SELECT * FROM t WHERE id in ( 4 , 5 )",
         "SELECT * FROM t WHERE id in (...)"},
        {"SELECT * FROM t WHERE id IN (SELECT id FROM u)",
         "SELECT * FROM t WHERE id IN (SELECT id FROM u)"},
        {"SELECT * FROM t WHERE id IN (a, 1)",
         "SELECT * FROM t WHERE id IN (a, ?)"},
        {"SELECT /* c */ SLEEP(1) -- x\n", "SELECT SLEEP(?)"},
        {"SELECT `a b`.`c` FROM `d` # e", "SELECT `a b`.`c` FROM `d`"},
        {"SELECT @v := @@global.x;", "SELECT @v := @@global.x"},
        {"INSERT INTO t (a, b) VALUES (1, 'x')",
         "INSERT INTO t (a, b) VALUES (?, ?)"},
        {"SELECT 1; SELECT 2", "SELECT ?; SELECT ?"},
        {"SELECT -1", "SELECT - ?"},
        {"", ""},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_string_equal(canon(cases[i][0], NULL), cases[i][1]);
    }
}

static void
test_same_digest_same_hash(void **state)
{
    uint64_t a, b, c;

    (void)state;
    canon("SELECT * FROM t WHERE id IN (1,2,3)", &a);
    canon("SELECT * FROM t WHERE id IN (4,5)", &b);
    canon("SELECT * FROM t WHERE id IN (4,5) AND 1", &c);
    assert_true(a == b);
    assert_true(a != c);
}

static void
test_truncated_text_full_hash(void **state)
{
    char sql[4000];
    char out[16];
    uint64_t h1, h2;
    size_t n;

    (void)state;
    memset(sql, 0, sizeof(sql));
    strcpy(sql, "SELECT aaaaaaaaaaaaaaaaaaaaaaaa, b FROM t");
    n = sl__qc_canonical(sql, strlen(sql), out, sizeof(out), &h1, NULL);
    assert_int_equal(n, 15);
    assert_int_equal(strlen(out), 15);
    strcpy(sql, "SELECT aaaaaaaaaaaaaaaaaaaaaaaa, c FROM t");
    sl__qc_canonical(sql, strlen(sql), out, sizeof(out), &h2, NULL);
    assert_true(h1 != h2);
}

static void
test_quantiles(void **state)
{
    struct sl_hist h = {0};
    double p50;

    (void)state;
    /* 100 samples in (1 ms, 2.5 ms]: bucket index 7. */
    h.bucket[7] = 100;
    h.count = 100;
    p50 = sl__hist_quantile(&h, 0.5, 0, 0);
    assert_true(p50 > 0.0017 && p50 < 0.0018);
    /* Clamped to what was seen. */
    p50 = sl__hist_quantile(&h, 0.5, 1200000, 1400000);
    assert_true(p50 >= 0.0012 && p50 <= 0.0014);
    assert_true(sl__hist_quantile(&h, 1.0, 0, 2000000) <= 0.002);
    memset(&h, 0, sizeof(h));
    assert_true(sl__hist_quantile(&h, 0.5, 0, 0) == 0.0);
}

/* The quick kind (leading keyword, refined by a few tokens) agrees with
 * sl__stats_query_kind of the classifier's type bits, statement by
 * statement: the metric means the same through either router. */
static void
test_kind_matches_classifier(void **state)
{
    static const char *const sql[] = {
        "SELECT 1", "select * from t for update", "SELECT @a:=1",
        "SELECT 1 INTO @x", "SET @a=1", "SET autocommit=0",
        "SET GLOBAL x=1", "SET @@global.x=1", "SET SESSION x=1",
        "SET NAMES utf8", "SET PERSIST x=1", "SET TRANSACTION READ ONLY",
        "USE test", "BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK",
        "ROLLBACK TO SAVEPOINT a", "SAVEPOINT a", "RELEASE SAVEPOINT a",
        "PREPARE s FROM 'select 1'", "EXECUTE s", "DEALLOCATE PREPARE s",
        "DROP PREPARE s", "XA START 'x'", "XA COMMIT 'x'",
        "INSERT INTO t VALUES(1)", "UPDATE t SET a=1", "DELETE FROM t",
        "REPLACE INTO t VALUES (1)", "CREATE TABLE t(a int)",
        "DROP TABLE t", "ALTER TABLE t ADD b int", "TRUNCATE t",
        "CALL p()", "LOAD DATA LOCAL INFILE 'x' INTO TABLE t",
        "SHOW TABLES", "DESC t", "EXPLAIN SELECT 1",
        "WITH a AS (SELECT 1) SELECT * FROM a", "(SELECT 1)", "DO 1",
        "KILL 3", "FLUSH TABLES", "LOCK TABLES t READ", "UNLOCK TABLES",
        "HANDLER t OPEN", "CHECK TABLE t", "OPTIMIZE TABLE t",
        "GRANT ALL ON *.* TO x", "HELP 'x'", "VALUES (1)", "TABLE t",
        "SELECT 1; INSERT INTO t VALUES(1)", "SET @a=1; SELECT 1",
        "SELECT 1; SELECT 2;", "FOO", "", "/* c */ SELECT 1",
        "/*!40101 SET NAMES utf8 */", "SELECT LAST_INSERT_ID()",
        "START SLAVE", "STOP SLAVE", "BEGIN NOT ATOMIC SELECT 1; END",
        "INSERT INTO t SELECT * FROM u",
    };
    char out[1024];
    uint64_t h;
    struct sl_qc_result qc;

    (void)state;
    for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
        int kind = -1;

        sl__qc_canonical(sql[i], strlen(sql[i]), out, sizeof(out), &h,
                         &kind);
        sl_qc_classify(sql[i], strlen(sql[i]), &qc);
        if (kind != sl__stats_query_kind(qc.type)) {
            fail_msg("\"%s\": %s, the classifier says %s", sql[i],
                     kind >= 0 ? sl__stats_q_names[kind] : "none",
                     sl__stats_q_names[sl__stats_query_kind(qc.type)]);
        }
    }
}

/* sl__qc_canonical_fast agrees with the full pass (hash, whole length,
 * kind) whenever it takes a statement, and takes the common ones. */
static bool
fast_agrees(const char *sql, size_t len)
{
    char out[1024];
    uint64_t h, hf = 0;
    size_t total, tf = 0;
    int kind = -1, kf = -2;

    sl__qc_canonical_len(sql, len, out, sizeof(out), &h, &kind, &total);
    if (!sl__qc_canonical_fast(sql, len, &hf, &tf, &kf)) {
        return false;
    }
    if (hf != h || tf != total || kf != kind) {
        fail_msg("\"%.*s\": fast %016llx/%zu/%d, full \"%s\" %016llx/%zu/%d",
                 (int)len, sql, (unsigned long long)hf, tf, kf, out,
                 (unsigned long long)h, total, kind);
    }
    return true;
}

static void
test_fast_pass_agrees(void **state)
{
    static const char *const taken[] = {
        "SELECT c FROM sbtest1 WHERE id=5037",
        "SELECT c FROM sbtest1 WHERE id = ?",
        "SELECT DISTINCT c FROM sbtest3 WHERE id BETWEEN 1 AND 100 ORDER BY c",
        "UPDATE sbtest1 SET k=k+1 WHERE id=17",
        "INSERT INTO t (a, b) VALUES (1, 'x''y\\'z'), (\"q\", 2.5e3)",
        "select  a,b from t where s = 'x''y' and d = \"q\"",
        "SELECT f(x), f (x), t.a, count(*) FROM t.u WHERE a>=-1",
        "SELECT 0x1f(1), 1e5, 1.5.6, a1b FROM t", "SET autocommit=0",
        "SET GLOBAL x=1", "SET SESSION x=1", "START TRANSACTION",
        "START SLAVE", "ROLLBACK TO SAVEPOINT a", "BEGIN NOT ATOMIC",
        "DROP PREPARE s", "(SELECT 1)", "((SELECT 1) UNION (SELECT 2))",
        "SELECT 'unterminated", "SELECT \"a\\", "", "   ", "?",
        "SELECT - 1", "SELECT a.b.c, * , ( ) FROM", "\x80\xff SELECT",
        "SELECT * FROM t WHERE a = ? AND b INTO_x = ?", "a-b - -c",
    };
    static const char *const refused[] = {
        "SELECT * FROM t WHERE id IN (1,2,3)", "SELECT 1; SELECT 2",
        "/* c */ SELECT 1", "SELECT 1 -- x", "SELECT 1 # x",
        "SELECT `a`", "SELECT @a", "SELECT @a:=1", "SELECT x'ab'",
        "SELECT _utf8mb4'z'", "SELECT 1/2", "/*!40101 SET NAMES utf8 */",
        "SELECT * FROM t WHERE id in (4)",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
        if (!fast_agrees(taken[i], strlen(taken[i]))) {
            fail_msg("\"%s\": the fast pass gave up", taken[i]);
        }
    }
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        if (fast_agrees(refused[i], strlen(refused[i]))) {
            fail_msg("\"%s\": the fast pass took it", refused[i]);
        }
    }
    /* a NUL byte and a length short of the string */
    fast_agrees("SELECT 1\0 FROM t", 17);
    fast_agrees("SELECT 'abc' FROM t", 9);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literals),
        cmocka_unit_test(test_same_digest_same_hash),
        cmocka_unit_test(test_truncated_text_full_hash),
        cmocka_unit_test(test_quantiles),
        cmocka_unit_test(test_kind_matches_classifier),
        cmocka_unit_test(test_fast_pass_agrees),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
