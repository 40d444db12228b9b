/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the reply tracker (mdb_reply.c): OK, ERR, result sets with
 * and without CLIENT_DEPRECATE_EOF (one captured from MariaDB 10.11),
 * multi-results, prepare responses, a row over 16 MiB, LOCAL INFILE,
 * COM_FIELD_LIST, COM_STATISTICS, cursors, pipelining and unexpected
 * packets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/mariadb.h>

#include "mdb_reply.h"

/* Feed one packet given its payload; returns the tracker's answer. */
static int
feed(struct mdb_tracker *t, const void *payload, uint32_t len)
{
    return mdb_tracker_packet(t, len, payload, len < MDB_PEEK ? len : MDB_PEEK);
}

/* Feed a stream of whole packets (header + payload, hex); returns the rc
 * of the last packet and counts the DONE results in *done. */
static int
feed_hex(struct mdb_tracker *t, const char *hex, int *done)
{
    size_t n = strlen(hex) / 2, off = 0;
    unsigned char *p = malloc(n);
    int rc = -1;

    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        p[i] = (unsigned char)v;
    }
    *done = 0;
    while (off + 4 <= n) {
        uint32_t len = sl_mdb_get_len(p + off);

        assert_true(off + 4 + len <= n);
        rc = feed(t, p + off + 4, len);
        *done += rc == MDB_TRK_DONE;
        off += 4 + len;
    }
    assert_int_equal(off, n);
    free(p);
    return rc;
}

static const unsigned char ok_pkt[] = {0x00, 0x01, 0x05, 0x02, 0x00, 0x00,
                                       0x00};
static const unsigned char ok_more[] = {0x00, 0x00, 0x00, 0x0a, 0x00, 0x00,
                                        0x00};
static const unsigned char eof_pkt[] = {0xfe, 0x00, 0x00, 0x02, 0x00};
static const unsigned char eof_more[] = {0xfe, 0x00, 0x00, 0x0a, 0x00};
static const unsigned char ok_fe[] = {0xfe, 0x00, 0x00, 0x02, 0x00, 0x00,
                                      0x00};
static const unsigned char coldef[] = {0x03, 'd', 'e', 'f', 0, 0, 0, 1, 'a'};
static const unsigned char row[] = {0x01, '1'};

static void
test_ok(void **state)
{
    struct mdb_tracker t;

    mdb_tracker_init(&t, 0);
    mdb_tracker_expect(&t, SL_COM_QUERY);
    assert_int_equal(mdb_tracker_pending(&t), 1);
    assert_int_equal(feed(&t, ok_pkt, sizeof(ok_pkt)), MDB_TRK_DONE);
    assert_true(t.reply.complete);
    assert_true(t.reply.is_ok);
    assert_int_equal(t.reply.affected_rows, 1);
    assert_int_equal(t.reply.last_insert_id, 5);
    assert_int_equal(t.reply.server_status, 2);
    assert_int_equal(t.reply.command, SL_COM_QUERY);
    assert_int_equal(t.reply.results, 1);
    assert_int_equal(t.reply.bytes, 4 + sizeof(ok_pkt));
    assert_int_equal(mdb_tracker_pending(&t), 0);
    mdb_tracker_free(&t);
}

static void
test_err(void **state)
{
    static const unsigned char err[] = "\xff\x7a\x04#42S02Table missing";
    struct mdb_tracker t;

    mdb_tracker_init(&t, SL_CAP_DEPRECATE_EOF);
    mdb_tracker_expect(&t, SL_COM_QUERY);
    assert_int_equal(feed(&t, err, sizeof(err) - 1), MDB_TRK_DONE);
    assert_true(t.reply.is_err);
    assert_int_equal(t.reply.error_code, 1146);
    assert_string_equal(t.reply.sqlstate, "42S02");
    mdb_tracker_free(&t);
}

/* SELECT 1 AS a, 'x' AS b from MariaDB 10.11 to a client without
 * DEPRECATE_EOF: count, 2 definitions, EOF, 1 row, EOF. */
static void
test_real_resultset(void **state)
{
    struct mdb_tracker t;
    int done;

    mdb_tracker_init(&t, 0);
    mdb_tracker_expect(&t, SL_COM_QUERY);
    assert_int_equal(
        feed_hex(&t,
                 "0200000102011800000203646566000000016100000c3f000100000003"
                 "81000000001800000303646566000000016200000c2100030000"
                 "00fd010027000005000004fe00000200040000050131017805000006fe"
                 "00000200",
                 &done),
        MDB_TRK_DONE);
    assert_int_equal(done, 1);
    assert_int_equal(t.reply.field_count, 2);
    assert_int_equal(t.reply.rows, 1);
    assert_false(t.reply.is_ok);
    assert_false(t.reply.more_results);
    mdb_tracker_free(&t);
}

static void
test_resultset_deprecate_eof(void **state)
{
    struct mdb_tracker t;
    unsigned char one = 1;

    mdb_tracker_init(&t, SL_CAP_DEPRECATE_EOF);
    mdb_tracker_expect(&t, SL_COM_QUERY);
    assert_int_equal(feed(&t, &one, 1), MDB_TRK_MORE);
    assert_int_equal(t.reply.state, SL_REPLY_RSET_COLDEF);
    assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_MORE);
    assert_int_equal(t.reply.state, SL_REPLY_RSET_ROWS);
    assert_int_equal(feed(&t, row, sizeof(row)), MDB_TRK_MORE);
    assert_int_equal(feed(&t, row, sizeof(row)), MDB_TRK_MORE);
    assert_int_equal(feed(&t, ok_fe, sizeof(ok_fe)), MDB_TRK_DONE);
    assert_int_equal(t.reply.rows, 2);
    assert_int_equal(t.reply.server_status, 2);
    mdb_tracker_free(&t);
}

/* SELECT 1; SELECT 2, then a CALL's final OK. Classic: each result set
 * is count, coldef, EOF, row, EOF (more results). Under DEPRECATE_EOF:
 * count, coldef, row, and an OK with the 0xfe header (more results); no
 * EOF after the column definitions. */
static void
run_multi_results(uint32_t caps)
{
    static const unsigned char ok_fe_more[] = {0xfe, 0x00, 0x00, 0x0a, 0x00,
                                               0x00, 0x00};
    bool deprecate_eof = caps & SL_CAP_DEPRECATE_EOF;
    struct mdb_tracker t;
    unsigned char one = 1;

    mdb_tracker_init(&t, caps);
    mdb_tracker_expect(&t, SL_COM_QUERY);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(feed(&t, &one, 1), MDB_TRK_MORE);
        assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_MORE);
        if (!deprecate_eof) {
            assert_int_equal(feed(&t, eof_pkt, sizeof(eof_pkt)),
                             MDB_TRK_MORE);
        }
        assert_int_equal(t.reply.state, SL_REPLY_RSET_ROWS);
        assert_int_equal(feed(&t, row, sizeof(row)), MDB_TRK_MORE);
        if (deprecate_eof) {
            assert_int_equal(feed(&t, ok_fe_more, sizeof(ok_fe_more)),
                             MDB_TRK_MORE);
        } else {
            assert_int_equal(feed(&t, eof_more, sizeof(eof_more)),
                             MDB_TRK_MORE);
        }
        assert_true(t.reply.more_results);
        assert_int_equal(t.reply.state, SL_REPLY_START);
    }
    assert_int_equal(feed(&t, ok_more, sizeof(ok_more)), MDB_TRK_MORE);
    assert_int_equal(feed(&t, ok_pkt, sizeof(ok_pkt)), MDB_TRK_DONE);
    assert_int_equal(t.reply.results, 4);
    assert_false(t.reply.more_results);
    mdb_tracker_free(&t);
}

static void
test_multi_results_eof(void **state)
{
    run_multi_results(0);
}

static void
test_multi_results_deprecate_eof(void **state)
{
    run_multi_results(SL_CAP_DEPRECATE_EOF);
}

static void
run_prepare(uint32_t caps)
{
    static const unsigned char prep_ok[] = {0x00, 7, 0, 0, 0, 2, 0, 1, 0,
                                            0, 0, 0};
    bool eof = !(caps & SL_CAP_DEPRECATE_EOF);
    struct mdb_tracker t;

    mdb_tracker_init(&t, caps);
    mdb_tracker_expect(&t, SL_COM_STMT_PREPARE);
    assert_int_equal(feed(&t, prep_ok, sizeof(prep_ok)), MDB_TRK_MORE);
    assert_int_equal(t.reply.stmt_id, 7);
    assert_int_equal(t.reply.param_count, 1);
    assert_int_equal(t.reply.state, SL_REPLY_PREPARE);
    assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_MORE);
    if (eof) {
        assert_int_equal(feed(&t, eof_pkt, sizeof(eof_pkt)), MDB_TRK_MORE);
    }
    assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_MORE);
    if (eof) {
        assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_MORE);
        assert_int_equal(feed(&t, eof_pkt, sizeof(eof_pkt)), MDB_TRK_DONE);
    } else {
        assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_DONE);
    }
    assert_true(t.reply.complete);
    assert_int_equal(t.reply.field_count, 2);

    /* No params, no columns (e.g. PREPARE of DO 1): just the OK. */
    mdb_tracker_expect(&t, SL_COM_STMT_PREPARE);
    static const unsigned char bare[] = {0x00, 8, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0};
    assert_int_equal(feed(&t, bare, sizeof(bare)), MDB_TRK_DONE);
    assert_int_equal(t.reply.stmt_id, 8);
    mdb_tracker_free(&t);
}

static void
test_prepare(void **state)
{
    run_prepare(0);
    run_prepare(SL_CAP_DEPRECATE_EOF);
}

/* A 16 MiB+ row: a 0xFFFFFF packet starting with 0xFE (lenenc 8 bytes),
 * then a short continuation that also starts with 0xFE. Neither ends the
 * result set; the real terminator does. */
static void
test_big_row(void **state)
{
    struct mdb_tracker t;
    unsigned char one = 1;
    unsigned char head[MDB_PEEK];

    memset(head, 'x', sizeof(head));
    head[0] = 0xfe;
    mdb_tracker_init(&t, SL_CAP_DEPRECATE_EOF);
    mdb_tracker_expect(&t, SL_COM_QUERY);
    feed(&t, &one, 1);
    feed(&t, coldef, sizeof(coldef));
    assert_int_equal(mdb_tracker_packet(&t, SL_MDB_MAX_PAYLOAD, head,
                                        sizeof(head)),
                     MDB_TRK_MORE);
    assert_int_equal(mdb_tracker_packet(&t, 5, ok_fe, 5), MDB_TRK_MORE);
    assert_int_equal(t.reply.rows, 1);
    /* Exactly 0xFFFFFF again, then an empty continuation. */
    assert_int_equal(mdb_tracker_packet(&t, SL_MDB_MAX_PAYLOAD, head,
                                        sizeof(head)),
                     MDB_TRK_MORE);
    assert_int_equal(mdb_tracker_packet(&t, 0, NULL, 0), MDB_TRK_MORE);
    assert_int_equal(t.reply.rows, 2);
    assert_int_equal(feed(&t, ok_fe, sizeof(ok_fe)), MDB_TRK_DONE);
    assert_int_equal(t.reply.rows, 2);
    assert_int_equal(t.reply.bytes,
                     5 + 13 + 2 * (SL_MDB_MAX_PAYLOAD + 4) + 9 + 4 + 11);
    mdb_tracker_free(&t);
}

static void
test_local_infile(void **state)
{
    static const unsigned char req[] = "\xfb/tmp/data.csv";
    struct mdb_tracker t;

    mdb_tracker_init(&t, 0);
    mdb_tracker_expect(&t, SL_COM_QUERY);
    assert_int_equal(feed(&t, req, sizeof(req) - 1), MDB_TRK_MORE);
    assert_int_equal(t.reply.state, SL_REPLY_LOAD_DATA);
    assert_false(t.reply.complete);
    assert_int_equal(mdb_tracker_pending(&t), 1);
    /* ... the client's file goes to the server; then its OK. */
    assert_int_equal(feed(&t, ok_pkt, sizeof(ok_pkt)), MDB_TRK_DONE);
    assert_true(t.reply.is_ok);
    assert_int_equal(t.reply.affected_rows, 1);
    mdb_tracker_free(&t);
}

static void
test_pipeline_and_no_reply(void **state)
{
    struct mdb_tracker t;
    unsigned char one = 1;
    static const unsigned char stats[] = "Uptime: 5  Threads: 1";

    mdb_tracker_init(&t, SL_CAP_DEPRECATE_EOF);
    mdb_tracker_expect(&t, SL_COM_STMT_CLOSE);
    mdb_tracker_expect(&t, SL_COM_STMT_SEND_LONG_DATA);
    mdb_tracker_expect(&t, SL_COM_QUIT);
    assert_int_equal(mdb_tracker_pending(&t), 0);
    for (int i = 0; i < 40; i++) {   /* grows the ring */
        mdb_tracker_expect(&t, SL_COM_PING);
        mdb_tracker_expect(&t, SL_COM_QUERY);
        mdb_tracker_expect(&t, SL_COM_STATISTICS);
    }
    assert_int_equal(mdb_tracker_pending(&t), 120);
    for (int i = 0; i < 40; i++) {
        assert_int_equal(feed(&t, ok_pkt, sizeof(ok_pkt)), MDB_TRK_DONE);
        assert_int_equal(t.reply.command, SL_COM_PING);
        assert_int_equal(feed(&t, &one, 1), MDB_TRK_MORE);
        assert_int_equal(t.reply.command, SL_COM_QUERY);
        feed(&t, coldef, sizeof(coldef));
        assert_int_equal(feed(&t, ok_fe, sizeof(ok_fe)), MDB_TRK_DONE);
        assert_int_equal(feed(&t, stats, sizeof(stats) - 1), MDB_TRK_DONE);
        assert_int_equal(t.reply.command, SL_COM_STATISTICS);
    }
    assert_int_equal(mdb_tracker_pending(&t), 0);
    /* A packet nobody asked for (e.g. a server-side kill). */
    static const unsigned char kill[] = "\xff\x87\x07#70100Killed";
    assert_int_equal(feed(&t, kill, sizeof(kill) - 1), MDB_TRK_UNEXPECTED);
    assert_true(t.reply.is_err);
    assert_int_equal(t.reply.error_code, 1927);
    mdb_tracker_free(&t);
}

static void
test_field_list_and_cursor(void **state)
{
    struct mdb_tracker t;
    unsigned char one = 1;
    static const unsigned char bin_row[] = {0x00, 0x00, 0x01};
    static const unsigned char eof_cursor[] = {0xfe, 0, 0, 0x42, 0x00};

    mdb_tracker_init(&t, 0);
    mdb_tracker_expect(&t, SL_COM_FIELD_LIST);
    assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_MORE);
    assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_MORE);
    assert_int_equal(feed(&t, eof_pkt, sizeof(eof_pkt)), MDB_TRK_DONE);
    assert_int_equal(t.reply.field_count, 2);

    /* COM_STMT_EXECUTE with a cursor: definitions only. */
    mdb_tracker_expect(&t, SL_COM_STMT_EXECUTE);
    feed(&t, &one, 1);
    feed(&t, coldef, sizeof(coldef));
    assert_int_equal(feed(&t, eof_cursor, sizeof(eof_cursor)), MDB_TRK_DONE);
    /* COM_STMT_FETCH: binary rows (0x00 header) then EOF. */
    mdb_tracker_expect(&t, SL_COM_STMT_FETCH);
    assert_int_equal(feed(&t, bin_row, sizeof(bin_row)), MDB_TRK_MORE);
    assert_int_equal(feed(&t, bin_row, sizeof(bin_row)), MDB_TRK_MORE);
    assert_int_equal(feed(&t, eof_pkt, sizeof(eof_pkt)), MDB_TRK_DONE);
    assert_int_equal(t.reply.rows, 2);
    /* Binary result set of a plain COM_STMT_EXECUTE. */
    mdb_tracker_expect(&t, SL_COM_STMT_EXECUTE);
    feed(&t, &one, 1);
    feed(&t, coldef, sizeof(coldef));
    feed(&t, eof_pkt, sizeof(eof_pkt));
    assert_int_equal(feed(&t, bin_row, sizeof(bin_row)), MDB_TRK_MORE);
    assert_int_equal(feed(&t, eof_pkt, sizeof(eof_pkt)), MDB_TRK_DONE);
    assert_int_equal(t.reply.rows, 1);
    mdb_tracker_free(&t);
}

/* A text-protocol result sent while a stored program's own cursor is open
 * (BEGIN NOT ATOMIC ... OPEN c; ... SELECT x; END, FOR rec IN (SELECT)):
 * the status word carries CURSOR_EXISTS and MORE_RESULTS, and the rows
 * still follow. Stopping at the definitions hung readwritesplit. */
static void
test_query_with_sp_cursor_open(void **state)
{
    struct mdb_tracker t;
    unsigned char one = 1;
    static const unsigned char eof_cur_more[] = {0xfe, 0, 0, 0x4a, 0x00};

    mdb_tracker_init(&t, 0);
    mdb_tracker_expect(&t, SL_COM_QUERY);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(feed(&t, &one, 1), MDB_TRK_MORE);
        assert_int_equal(feed(&t, coldef, sizeof(coldef)), MDB_TRK_MORE);
        assert_int_equal(feed(&t, eof_cur_more, sizeof(eof_cur_more)),
                         MDB_TRK_MORE);
        assert_int_equal(feed(&t, row, sizeof(row)), MDB_TRK_MORE);
        assert_int_equal(feed(&t, eof_cur_more, sizeof(eof_cur_more)),
                         MDB_TRK_MORE);
    }
    assert_int_equal(feed(&t, ok_pkt, sizeof(ok_pkt)), MDB_TRK_DONE);
    assert_int_equal(t.reply.results, 4);
    assert_int_equal(mdb_tracker_pending(&t), 0);
    mdb_tracker_free(&t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok),
        cmocka_unit_test(test_err),
        cmocka_unit_test(test_real_resultset),
        cmocka_unit_test(test_resultset_deprecate_eof),
        cmocka_unit_test(test_multi_results_eof),
        cmocka_unit_test(test_multi_results_deprecate_eof),
        cmocka_unit_test(test_prepare),
        cmocka_unit_test(test_big_row),
        cmocka_unit_test(test_local_infile),
        cmocka_unit_test(test_pipeline_and_no_reply),
        cmocka_unit_test(test_field_list_and_cursor),
        cmocka_unit_test(test_query_with_sp_cursor_open),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
