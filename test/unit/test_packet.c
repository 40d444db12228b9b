/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the MariaDB packet helpers (server/core/mariadb_packet.c):
 * framing of packets and 16 MiB commands on multi-segment chains,
 * length-encoded integers at every boundary, the packet builders and
 * parse_err.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>

#define BIG SL_MDB_MAX_PAYLOAD

/* Append a packet header (and optionally a payload of `fill` bytes). */
static void
put_packet(struct sl_buf *b, uint32_t len, uint8_t seq, bool payload)
{
    unsigned char hdr[4];

    sl_mdb_set_hdr(hdr, len, seq);
    assert_int_equal(sl_buf_append_data(b, hdr, 4), 0);
    if (payload && len > 0) {
        unsigned char *p = malloc(len);

        assert_non_null(p);
        memset(p, 'x', len);
        assert_int_equal(sl_buf_append_data(b, p, len), 0);
        free(p);
    }
}

static void
test_packet_len(void **state)
{
    struct sl_buf b = {0};
    static const unsigned char two[] = {3, 0, 0, 0, 'a', 'b', 'c',
                                        1, 0, 0, 1, 'z'};

    assert_int_equal(sl_mdb_packet_len(&b), 0);
    /* Header bytes arriving one by one, each in its own segment. */
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(sl_mdb_packet_len(&b), 0);
        sl_buf_append_data(&b, two + i, 1);
    }
    assert_int_equal(sl_mdb_packet_len(&b), 0);
    sl_buf_append_data(&b, two + 4, 2);
    assert_int_equal(sl_mdb_packet_len(&b), 0);
    sl_buf_append_data(&b, two + 6, sizeof(two) - 6);
    assert_int_equal(sl_mdb_packet_len(&b), 7);
    assert_int_equal(sl_mdb_command(&b), 'a');

    size_t n = 0;
    assert_int_equal(sl_mdb_complete_packets_len(&b, &n), sizeof(two));
    assert_int_equal(n, 2);
    sl_buf_consume(&b, 7);
    assert_int_equal(sl_mdb_packet_len(&b), 5);
    sl_buf_reset(&b);
}

static void
test_empty_packet(void **state)
{
    struct sl_buf b = {0};

    put_packet(&b, 0, 0, false);
    assert_int_equal(sl_mdb_packet_len(&b), 4);
    assert_int_equal(sl_mdb_command_len(&b), 4);
    assert_int_equal(sl_mdb_command(&b), -1);
    sl_buf_reset(&b);
}

static void
test_command_exact_16m(void **state)
{
    struct sl_buf b = {0};

    put_packet(&b, BIG, 0, true);
    assert_int_equal(sl_mdb_packet_len(&b), BIG + 4);
    /* A 0xFFFFFF payload continues: no complete command yet. */
    assert_int_equal(sl_mdb_command_len(&b), 0);
    put_packet(&b, 0, 1, false);
    assert_int_equal(sl_mdb_command_len(&b), BIG + 8);
    size_t n;
    assert_int_equal(sl_mdb_complete_packets_len(&b, &n), BIG + 8);
    assert_int_equal(n, 2);
    sl_buf_reset(&b);
}

static void
test_command_two_big_and_rest(void **state)
{
    struct sl_buf b = {0};
    size_t total = 2 * (BIG + 4) + 4 + 100;

    put_packet(&b, BIG, 0, true);
    put_packet(&b, BIG, 1, true);
    assert_int_equal(sl_mdb_command_len(&b), 0);
    /* Continuation header incomplete. */
    sl_buf_append_data(&b, "\x64\x00", 2);
    assert_int_equal(sl_mdb_command_len(&b), 0);
    sl_buf_append_data(&b, "\x00\x02", 2);
    assert_int_equal(sl_mdb_command_len(&b), 0);
    for (int i = 0; i < 100; i++) {
        sl_buf_append_data(&b, "q", 1);
        if (i < 99) {
            assert_int_equal(sl_mdb_command_len(&b), 0);
        }
    }
    assert_int_equal(sl_mdb_command_len(&b), total);
    /* A following command is not part of it. */
    put_packet(&b, 1, 0, true);
    assert_int_equal(sl_mdb_command_len(&b), total);
    sl_buf_consume(&b, total);
    assert_int_equal(sl_mdb_command_len(&b), 5);
    sl_buf_reset(&b);
}

static void
check_lenenc(uint64_t v, size_t want_len)
{
    unsigned char p[9];
    uint64_t out = 0;
    size_t n = sl_mdb_put_lenenc(p, v);

    assert_int_equal(n, want_len);
    assert_int_equal(sl_mdb_get_lenenc(p, n, &out), n);
    assert_true(out == v);
    /* Every truncation is refused. */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sl_mdb_get_lenenc(p, i, &out), 0);
    }
}

static void
test_lenenc(void **state)
{
    unsigned char p[9] = {0xfb};
    uint64_t out;

    check_lenenc(0, 1);
    check_lenenc(250, 1);
    check_lenenc(251, 3);
    check_lenenc(0xffff, 3);
    check_lenenc(0x10000, 4);
    check_lenenc(0xffffff, 4);
    check_lenenc(1u << 24, 9);
    check_lenenc(UINT64_MAX, 9);
    assert_int_equal(sl_mdb_get_lenenc(p, 9, &out), 0);   /* NULL */
    p[0] = 0xff;
    assert_int_equal(sl_mdb_get_lenenc(p, 9, &out), 0);   /* ERR */
}

/* Check the packets of a built chain: lengths, sequence, content. */
static void
check_split(size_t len, size_t npackets)
{
    unsigned char *payload = malloc(len + 1);
    struct sl_buf *b;
    size_t off = 0, got = 0;
    unsigned char hdr[4];

    assert_non_null(payload);
    for (size_t i = 0; i < len; i++) {
        payload[i] = (unsigned char)(i * 7);
    }
    b = sl_mdb_make_packet(5, payload, len);
    assert_non_null(b);
    assert_int_equal(sl_mdb_command_len(b), sl_buf_len(b));
    for (size_t i = 0; i < npackets; i++) {
        sl_buf_copy_out(b, off, 4, hdr);
        uint32_t plen = sl_mdb_get_len(hdr);
        assert_int_equal(hdr[3], (uint8_t)(5 + i));
        assert_true(i + 1 == npackets ? plen < BIG : plen == BIG);
        off += 4 + plen;
        got += plen;
    }
    assert_int_equal(off, sl_buf_len(b));
    assert_int_equal(got, len);
    if (len > 0) {
        unsigned char c;
        sl_buf_copy_out(b, 4 + BIG + 4, 1, &c);
        if (len > BIG) {
            assert_int_equal(c, (unsigned char)(BIG * 7));
        }
    }
    sl_buf_free(b);
    free(payload);
}

static void
test_make_packet_split(void **state)
{
    check_split(0, 1);
    check_split(10, 1);
    check_split(BIG - 1, 1);
    check_split(BIG, 2);
    check_split(20u << 20, 2);
    check_split(2u * BIG, 3);
}

static void
test_err_round_trip(void **state)
{
    struct sl_buf *b = sl_mdb_make_err(2, 1045, "28000", "Access denied");
    unsigned char *p;
    uint16_t code;
    char st[6];
    const char *msg;
    size_t mlen;

    assert_non_null(b);
    p = sl_buf_pullup(b, sl_buf_len(b));
    assert_int_equal(p[3], 2);
    assert_true(sl_mdb_parse_err(p + 4, sl_buf_len(b) - 4, &code, st, &msg,
                                 &mlen));
    assert_int_equal(code, 1045);
    assert_string_equal(st, "28000");
    assert_int_equal(mlen, 13);
    assert_memory_equal(msg, "Access denied", 13);
    /* Pre-4.1 style without sqlstate marker. */
    static const unsigned char old[] = {0xff, 0x10, 0x04, 'o', 'o', 'p', 's'};
    assert_true(sl_mdb_parse_err(old, sizeof(old), &code, st, &msg, &mlen));
    assert_int_equal(code, 1040);
    assert_string_equal(st, "HY000");
    assert_int_equal(mlen, 4);
    assert_false(sl_mdb_parse_err(old, 2, &code, st, &msg, &mlen));
    assert_false(sl_mdb_parse_err(p + 5, 3, &code, st, &msg, &mlen));
    sl_buf_free(b);
}

static void
test_ok_and_query(void **state)
{
    struct sl_buf *b = sl_mdb_make_ok(4, 300, 7, 0x0002, 1);
    static const unsigned char want[] = {9, 0, 0, 4, 0x00, 0xfc, 0x2c, 0x01,
                                         7, 0x02, 0x00, 0x01, 0x00};
    unsigned char *p;

    assert_non_null(b);
    assert_int_equal(sl_buf_len(b), sizeof(want));
    p = sl_buf_pullup(b, sizeof(want));
    assert_memory_equal(p, want, sizeof(want));
    sl_buf_free(b);

    b = sl_mdb_make_query("SELECT 1", 8);
    assert_non_null(b);
    assert_int_equal(sl_buf_len(b), 13);
    assert_int_equal(sl_mdb_command(b), SL_COM_QUERY);
    p = sl_buf_pullup(b, 13);
    assert_int_equal(p[3], 0);
    assert_memory_equal(p + 5, "SELECT 1", 8);
    sl_buf_free(b);

    /* A 20 MiB statement spans two packets plus the command byte. */
    size_t big = 20u << 20;
    char *sql = malloc(big);
    assert_non_null(sql);
    memset(sql, 'a', big);
    b = sl_mdb_make_query(sql, big);
    assert_non_null(b);
    assert_int_equal(sl_mdb_command_len(b), big + 1 + 8);
    assert_int_equal(sl_buf_len(b), big + 1 + 8);
    sl_buf_free(b);
    free(sql);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packet_len),
        cmocka_unit_test(test_empty_packet),
        cmocka_unit_test(test_command_exact_16m),
        cmocka_unit_test(test_command_two_big_and_rest),
        cmocka_unit_test(test_lenenc),
        cmocka_unit_test(test_make_packet_split),
        cmocka_unit_test(test_err_round_trip),
        cmocka_unit_test(test_ok_and_query),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
