/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the default-database tracker (mdb_dbtrack.c): pipelined
 * changes are decided by their own answers, not the first OK; USE is
 * found behind comments and in executable comments; multi-statements with
 * USE make the database unsure; a full FIFO, COM_CHANGE_USER, and errors
 * made up in place of answers.
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
#include <sluice/mariadb.h>

#include "mdb_dbtrack.h"

/* A command packet: cmd byte then arg. */
static struct sl_buf *
command(uint8_t cmd, const char *arg)
{
    size_t n = strlen(arg);
    unsigned char *p = malloc(n + 1);
    struct sl_buf *buf;

    p[0] = cmd;
    memcpy(p + 1, arg, n);
    buf = sl_mdb_make_packet(0, p, n + 1);
    free(p);
    return buf;
}

static struct mdb_db_verdict
send_cmd(struct mdb_dbtrack *t, uint8_t cmd, const char *arg)
{
    struct sl_buf *buf = command(cmd, arg);
    struct mdb_db_verdict v = mdb_dbtrack_command(t, buf);

    sl_buf_free(buf);
    return v;
}

static void
pipelined_failed_init_db_is_not_applied(void **state)
{
    struct mdb_dbtrack t = {0};
    struct mdb_db_verdict v;

    (void)state;
    v = send_cmd(&t, SL_COM_QUERY, "DO 1");
    assert_false(v.unsure);
    assert_int_equal(v.pending, 1);
    v = send_cmd(&t, SL_COM_INIT_DB, "mysql");
    assert_true(v.unsure);                  /* in flight */
    assert_int_equal(v.pending, 2);
    v = mdb_dbtrack_answered(&t, true);     /* DO 1's OK */
    assert_null(v.db);
    assert_true(v.unsure);
    assert_int_equal(v.pending, 1);
    v = mdb_dbtrack_answered(&t, false);    /* INIT_DB's 1044 */
    assert_null(v.db);
    assert_false(v.unsure);
    assert_int_equal(v.pending, 0);
    v = send_cmd(&t, SL_COM_INIT_DB, "test2");
    v = mdb_dbtrack_answered(&t, true);
    assert_string_equal(v.db, "test2");
    assert_false(v.unsure);
    mdb_dbtrack_free(&t);
}

static void
use_forms(void **state)
{
    static const struct {
        const char *sql;
        const char *db;      /* NULL: no change; "?": unknown */
    } cases[] = {
        {"USE a", "a"},
        {"use `b c`", "b c"},
        {"  /* x */ USE d -- e", "d"},
        {"/*!50000USE f*/", "f"},
        {"SELECT * FROM users WHERE used = 1", NULL},
        {"SELECT 'use it'", NULL},
        {"SELECT 1; USE g", "?"},
        {"USE h; SELECT 1", "?"},
        {"SELECT 'use'; SELECT 2", NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mdb_dbtrack t = {0};
        struct mdb_db_verdict v = send_cmd(&t, SL_COM_QUERY, cases[i].sql);

        v = mdb_dbtrack_answered(&t, true);
        if (cases[i].db == NULL) {
            assert_null(v.db);
            assert_false(v.unsure);
        } else if (strcmp(cases[i].db, "?") == 0) {
            assert_null(v.db);
            assert_true(v.unsure);
        } else {
            assert_non_null(v.db);
            assert_string_equal(v.db, cases[i].db);
            assert_false(v.unsure);
        }
        mdb_dbtrack_free(&t);
    }
}

/* The "use" scan at every alignment of its eight-byte words, in any
 * case, at the very end of the text, and with the packet split into two
 * segments at every offset (the scan's other path): never a miss. */
static void
use_at_every_offset_and_split(void **state)
{
    static const char *const uses[] = {"USE x", "uSe x", "use`x`"};
    char sql[64];

    (void)state;
    for (size_t u = 0; u < sizeof(uses) / sizeof(uses[0]); u++) {
        for (int pad = 0; pad < 17; pad++) {
            snprintf(sql, sizeof(sql), "%*s%s", pad, "", uses[u]);
            for (size_t cut = 0; cut < strlen(sql) + SL_MDB_HDR_LEN + 1;
                 cut++) {
                struct mdb_dbtrack t = {0};
                struct sl_buf *buf = command(SL_COM_QUERY, sql);
                struct sl_buf *head = sl_buf_new();
                struct mdb_db_verdict v;

                /* cut 0: one segment; else two, split at cut */
                if (cut > 0) {
                    assert_int_equal(sl_buf_split(buf, cut, head), 0);
                    sl_buf_append(head, buf);
                    assert_non_null(head->head);
                    assert_non_null(head->head->next);
                } else {
                    sl_buf_append(head, buf);
                }
                sl_buf_free(buf);   /* emptied by sl_buf_append */
                v = mdb_dbtrack_command(&t, head);
                assert_true(v.unsure);   /* the USE is queued */
                v = mdb_dbtrack_answered(&t, true);
                assert_non_null(v.db);
                assert_string_equal(v.db, "x");
                sl_buf_free(head);
                mdb_dbtrack_free(&t);
            }
        }
    }
}

static void
unknown_until_next_change(void **state)
{
    struct mdb_dbtrack t = {0};
    struct mdb_db_verdict v;

    (void)state;
    send_cmd(&t, SL_COM_QUERY, "SELECT 1; USE x");
    v = mdb_dbtrack_answered(&t, false);    /* an error: USE ran or not */
    assert_true(v.unsure);
    send_cmd(&t, SL_COM_QUERY, "SELECT 1");
    v = mdb_dbtrack_answered(&t, true);
    assert_true(v.unsure);
    send_cmd(&t, SL_COM_QUERY, "USE y");
    v = mdb_dbtrack_answered(&t, true);
    assert_string_equal(v.db, "y");
    assert_false(v.unsure);
    mdb_dbtrack_free(&t);
}

static void
full_fifo_folds_into_unknown(void **state)
{
    struct mdb_dbtrack t = {0};
    struct mdb_db_verdict v;
    char name[16];

    (void)state;
    for (int i = 0; i < MDB_DBTRACK_MAX + 3; i++) {
        snprintf(name, sizeof(name), "db%d", i);
        send_cmd(&t, SL_COM_INIT_DB, name);
    }
    for (int i = 0; i < MDB_DBTRACK_MAX - 1; i++) {
        v = mdb_dbtrack_answered(&t, true);
        snprintf(name, sizeof(name), "db%d", i);
        assert_string_equal(v.db, name);
        assert_true(v.unsure);
    }
    for (int i = 0; i < 4; i++) {   /* the folded ones */
        v = mdb_dbtrack_answered(&t, true);
        assert_null(v.db);
    }
    assert_true(v.unsure);
    mdb_dbtrack_free(&t);
}

static void
commands_without_answers_and_made_up_errors(void **state)
{
    struct mdb_dbtrack t = {0};
    struct mdb_db_verdict v;

    (void)state;
    send_cmd(&t, SL_COM_STMT_CLOSE, "\x01\x00\x00\x00");  /* no answer */
    send_cmd(&t, SL_COM_INIT_DB, "a");
    v = mdb_dbtrack_answered(&t, true);
    assert_string_equal(v.db, "a");
    /* More answers than commands (a stray error) are not counted. */
    v = mdb_dbtrack_answered(&t, false);
    send_cmd(&t, SL_COM_INIT_DB, "b");
    v = mdb_dbtrack_answered(&t, true);
    assert_string_equal(v.db, "b");
    assert_false(v.unsure);
    mdb_dbtrack_free(&t);
}

static void
change_user_supersedes_queued_changes(void **state)
{
    struct mdb_dbtrack t = {0};
    struct mdb_db_verdict v;

    (void)state;
    send_cmd(&t, SL_COM_INIT_DB, "a");
    v = mdb_dbtrack_change_user(&t, "b");
    assert_string_equal(v.db, "b");
    assert_true(v.unsure);
    v = mdb_dbtrack_answered(&t, true);     /* INIT_DB a: superseded */
    assert_null(v.db);
    assert_true(v.unsure);
    v = mdb_dbtrack_answered(&t, true);     /* COM_CHANGE_USER's OK */
    assert_string_equal(v.db, "b");
    assert_false(v.unsure);
    mdb_dbtrack_change_user(&t, "c");
    v = mdb_dbtrack_answered(&t, false);    /* refused: cannot tell */
    assert_true(v.unsure);
    mdb_dbtrack_free(&t);
}

static void
init_db_name_too_long_or_with_nul(void **state)
{
    struct mdb_dbtrack t = {0};
    char name[MDB_DB_MAX + 8];
    unsigned char p[4] = {SL_COM_INIT_DB, 'a', 0, 'b'};
    struct sl_buf *buf = sl_mdb_make_packet(0, p, sizeof(p));
    struct mdb_db_verdict v;

    (void)state;
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    send_cmd(&t, SL_COM_INIT_DB, name);
    v = mdb_dbtrack_answered(&t, true);
    assert_null(v.db);
    assert_true(v.unsure);
    mdb_dbtrack_command(&t, buf);
    v = mdb_dbtrack_answered(&t, true);
    assert_null(v.db);
    assert_true(v.unsure);
    sl_buf_free(buf);
    mdb_dbtrack_free(&t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pipelined_failed_init_db_is_not_applied),
        cmocka_unit_test(use_forms),
        cmocka_unit_test(use_at_every_offset_and_split),
        cmocka_unit_test(unknown_until_next_change),
        cmocka_unit_test(full_fifo_folds_into_unknown),
        cmocka_unit_test(commands_without_answers_and_made_up_errors),
        cmocka_unit_test(change_user_supersedes_queued_changes),
        cmocka_unit_test(init_db_name_too_long_or_with_nul),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
