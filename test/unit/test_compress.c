/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the compressed protocol framing (mdb_compress.c): zlib
 * and zstd round trips over multi-segment chains, a 40 MiB stream split
 * into payloads of at most 16 MiB - 1, small and incompressible payloads
 * sent as they are, packets made by zlib's compress() and ZSTD_compress()
 * (what the server and MySQL clients send) decoded, incomplete packets
 * left for later, sequence numbers on both roles, and refused input: bad
 * zlib/zstd data, uncompressed lengths that disagree with the data,
 * trailing bytes, and a decompression bomb past the decoder's limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>
#include <zstd.h>

#include <sluice/buf.h>

#include "mdb_compress.h"

#define MIB (1024u * 1024u)

/* Compressible bytes with some variety. */
static unsigned char *
text(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n);

    for (size_t i = 0; i < n; i++) {
        p[i] = (unsigned char)("abcdefgh 0123\n"[(i / 7 + seed) % 14]);
    }
    return p;
}

static unsigned char *
noise(size_t n)
{
    unsigned char *p = malloc(n);
    uint32_t x = 2463534242u;

    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
    return p;
}

/* A chain holding data in segments of `seg` bytes. */
static struct sl_buf *
chain(const unsigned char *data, size_t n, size_t seg)
{
    struct sl_buf *b = sl_buf_new();

    for (size_t off = 0; off < n; off += seg) {
        struct sl_buf *part = sl_buf_from(data + off,
                                          n - off < seg ? n - off : seg);

        sl_buf_append(b, part);
        sl_buf_free(part);
    }
    return b;
}

static unsigned char *
flat(const struct sl_buf *b)
{
    unsigned char *p = malloc(sl_buf_len(b) + 1);

    assert_int_equal(sl_buf_copy_out(b, 0, sl_buf_len(b), p), sl_buf_len(b));
    return p;
}

static uint32_t
get24(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

/* Walk the compressed packets of enc: their count; checks lengths and
 * consecutive sequence numbers from seq0. */
static size_t
check_frames(const struct sl_buf *enc, uint8_t seq0, size_t *uncompressed)
{
    unsigned char *p = flat(enc);
    size_t off = 0, n = 0;

    *uncompressed = 0;
    while (off < sl_buf_len(enc)) {
        uint32_t clen = get24(p + off), ulen = get24(p + off + 4);

        assert_true(clen <= MDB_Z_MAX_PAYLOAD);
        assert_int_equal(p[off + 3], (uint8_t)(seq0 + n));
        if (ulen != 0) {
            assert_true(clen < ulen);   /* compressed only when smaller */
        } else {
            (*uncompressed)++;
        }
        off += MDB_Z_HDR_LEN + clen;
        n++;
    }
    assert_int_equal(off, sl_buf_len(enc));
    free(p);
    return n;
}

static void
round_trip(enum mdb_zalgo algo, size_t len, size_t seg)
{
    unsigned char *data = text(len, 3);
    struct mdb_zstate *tx = mdb_z_new(algo, algo == MDB_Z_ZSTD ? 3 : -1,
                                      false, 5, 0);
    struct mdb_zstate *rx = mdb_z_new(algo, 3, true, 0, 0);
    struct sl_buf *enc = mdb_z_encode(tx, chain(data, len, seg));
    struct sl_buf raw = {0}, out = {0};
    size_t frames, plain;
    unsigned char *back;

    assert_non_null(enc);
    frames = check_frames(enc, 5, &plain);
    assert_int_equal(frames, (len + MDB_Z_MAX_PAYLOAD - 1) /
                                 MDB_Z_MAX_PAYLOAD);
    assert_int_equal(plain, 0);
    assert_true(sl_buf_len(enc) < len / 4);
    sl_buf_append(&raw, enc);
    sl_buf_free(enc);
    assert_int_equal(mdb_z_decode(rx, &raw, &out), 0);
    assert_int_equal(sl_buf_len(&raw), 0);
    assert_int_equal(sl_buf_len(&out), len);
    back = flat(&out);
    assert_memory_equal(back, data, len);
    /* the peer answers with the number after the last one it read */
    assert_int_equal(mdb_z_next_seq(rx), (uint8_t)(5 + frames));
    free(back);
    free(data);
    sl_buf_reset(&out);
    mdb_z_free(tx);
    mdb_z_free(rx);
}

static void
zlib_40mib_over_16mib_payloads(void **state)
{
    (void)state;
    round_trip(MDB_Z_ZLIB, 40 * MIB + 123, 16384);
}

static void
zstd_20mib(void **state)
{
    (void)state;
    round_trip(MDB_Z_ZSTD, 20 * MIB, 65536);
}

static void
zlib_and_zstd_small_chains(void **state)
{
    (void)state;
    round_trip(MDB_Z_ZLIB, 1000, 7);
    round_trip(MDB_Z_ZSTD, 1000, 13);
}

static void
small_and_incompressible_go_as_they_are(void **state)
{
    struct mdb_zstate *z = mdb_z_new(MDB_Z_ZLIB, -1, false, 0, 0);
    unsigned char *rnd = noise(100000);
    struct sl_buf *enc = mdb_z_encode(z, sl_buf_from("\x01\0\0\0\x0e", 5));
    unsigned char *p = flat(enc);
    size_t plain;

    (void)state;
    assert_int_equal(sl_buf_len(enc), MDB_Z_HDR_LEN + 5);
    assert_int_equal(get24(p), 5);
    assert_int_equal(get24(p + 4), 0);
    assert_memory_equal(p + MDB_Z_HDR_LEN, "\x01\0\0\0\x0e", 5);
    free(p);
    sl_buf_free(enc);
    enc = mdb_z_encode(z, chain(rnd, 100000, 4096));
    assert_int_equal(check_frames(enc, 1, &plain), 1);
    assert_int_equal(plain, 1);
    assert_int_equal(sl_buf_len(enc), MDB_Z_HDR_LEN + 100000);
    sl_buf_free(enc);
    free(rnd);
    mdb_z_free(z);
}

/* A compressed packet as the server makes it: zlib's compress(). */
static struct sl_buf *
server_packet(const unsigned char *data, size_t n, uint8_t seq,
              uint32_t claimed)
{
    uLongf clen = compressBound(n);
    unsigned char *p = malloc(MDB_Z_HDR_LEN + clen);
    struct sl_buf *b;

    assert_int_equal(compress(p + MDB_Z_HDR_LEN, &clen, data, n), Z_OK);
    p[0] = (unsigned char)clen;
    p[1] = (unsigned char)(clen >> 8);
    p[2] = (unsigned char)(clen >> 16);
    p[3] = seq;
    p[4] = (unsigned char)claimed;
    p[5] = (unsigned char)(claimed >> 8);
    p[6] = (unsigned char)(claimed >> 16);
    b = sl_buf_from(p, MDB_Z_HDR_LEN + clen);
    free(p);
    return b;
}

static struct sl_buf *
zstd_packet_of(const unsigned char *data, size_t n, uint32_t claimed)
{
    size_t cap = ZSTD_compressBound(n);
    unsigned char *p = malloc(MDB_Z_HDR_LEN + cap);
    size_t clen = ZSTD_compress(p + MDB_Z_HDR_LEN, cap, data, n, 3);
    struct sl_buf *b;

    assert_false(ZSTD_isError(clen));
    p[0] = (unsigned char)clen;
    p[1] = (unsigned char)(clen >> 8);
    p[2] = (unsigned char)(clen >> 16);
    p[3] = 0;
    p[4] = (unsigned char)claimed;
    p[5] = (unsigned char)(claimed >> 8);
    p[6] = (unsigned char)(claimed >> 16);
    b = sl_buf_from(p, MDB_Z_HDR_LEN + clen);
    free(p);
    return b;
}

static void
foreign_packets_decode_and_incomplete_ones_wait(void **state)
{
    unsigned char *data = text(300000, 1);
    struct mdb_zstate *z = mdb_z_new(MDB_Z_ZLIB, -1, true, 0, 0);
    struct mdb_zstate *zs = mdb_z_new(MDB_Z_ZSTD, 3, true, 0, 0);
    struct sl_buf *pkt = server_packet(data, 300000, 7, 300000);
    unsigned char *whole = flat(pkt);
    size_t n = sl_buf_len(pkt);
    struct sl_buf raw = {0}, out = {0};

    (void)state;
    /* byte by byte: nothing until the last byte */
    for (size_t i = 0; i < n; i++) {
        struct sl_buf *one = sl_buf_from(whole + i, 1);

        sl_buf_append(&raw, one);
        sl_buf_free(one);
        assert_int_equal(mdb_z_decode(z, &raw, &out), 0);
        assert_int_equal(sl_buf_len(&out), i + 1 < n ? 0 : 300000);
    }
    assert_int_equal(sl_buf_len(&raw), 0);
    assert_int_equal(mdb_z_next_seq(z), 8);
    sl_buf_reset(&out);
    sl_buf_free(pkt);
    free(whole);
    pkt = zstd_packet_of(data, 300000, 300000);
    sl_buf_append(&raw, pkt);
    sl_buf_free(pkt);
    assert_int_equal(mdb_z_decode(zs, &raw, &out), 0);
    assert_int_equal(sl_buf_len(&out), 300000);
    whole = flat(&out);
    assert_memory_equal(whole, data, 300000);
    free(whole);
    sl_buf_reset(&out);
    free(data);
    mdb_z_free(z);
    mdb_z_free(zs);
}

static uint8_t
first_seq_of(struct mdb_zstate *z, const char *pkt, size_t n)
{
    struct sl_buf *enc = mdb_z_encode(z, sl_buf_from(pkt, n));
    unsigned char *p = flat(enc);
    uint8_t seq = p[3];

    free(p);
    sl_buf_free(enc);
    return seq;
}

static void
sequence_numbers_by_role(void **state)
{
    struct mdb_zstate *srv = mdb_z_new(MDB_Z_ZLIB, -1, false, 0, 0);
    struct mdb_zstate *cli = mdb_z_new(MDB_Z_ZLIB, -1, true, 0, 0);
    struct sl_buf raw = {0}, out = {0};
    struct sl_buf *enc;

    (void)state;
    /* server role: a command read with seq 0, answered with 1, 2 */
    enc = mdb_z_encode(cli, sl_buf_from("\x01\0\0\0\x0e", 5));
    sl_buf_append(&raw, enc);
    sl_buf_free(enc);
    assert_int_equal(mdb_z_decode(srv, &raw, &out), 0);
    sl_buf_reset(&out);
    assert_int_equal(
        first_seq_of(srv, "\x07\0\0\x01\0\0\0\x02\0\0\0", 11), 1);
    assert_int_equal(
        first_seq_of(srv, "\x07\0\0\x02\0\0\0\x02\0\0\0", 11), 2);
    /* client role: a continuation goes on, a new command restarts at 0 */
    assert_int_equal(first_seq_of(cli, "\x01\0\0\x03\x01", 5), 1);
    assert_int_equal(first_seq_of(cli, "\x01\0\0\0\x0e", 5), 0);
    mdb_z_free(srv);
    mdb_z_free(cli);
}

static void
pipelined_commands_answered_in_their_own_numbering(void **state)
{
    struct mdb_zstate *srv = mdb_z_new(MDB_Z_ZLIB, -1, false, 0, 0);
    struct sl_buf raw = {0}, out = {0};
    static const char ok[] = "\x07\0\0\x01\0\0\0\x02\0\0\0";
    /* a prepare and an execute sent at once (each from 0), then a
     * command in three compressed packets (0, 1, 2), then a close */
    static const unsigned char in[] = {
        5, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x16,
        5, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x17,
        2, 0, 0, 0, 0, 0, 0, 9, 0,
        2, 0, 0, 1, 0, 0, 0, 0, 0,
        5, 0, 0, 2, 0, 0, 0, 0, 0x03, 'd', 'o', ' ',
        5, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x19,
    };
    struct sl_buf *b = sl_buf_from(in, sizeof(in));

    (void)state;
    sl_buf_append(&raw, b);
    sl_buf_free(b);
    assert_int_equal(mdb_z_decode(srv, &raw, &out), 0);
    sl_buf_reset(&out);
    mdb_z_command(srv, true);    /* prepare */
    mdb_z_command(srv, true);    /* execute */
    mdb_z_command(srv, true);    /* the long one */
    mdb_z_command(srv, false);   /* close: no answer */
    mdb_z_answer_starts(srv);
    assert_int_equal(first_seq_of(srv, ok, 11), 1);
    assert_int_equal(first_seq_of(srv, ok, 11), 2);
    mdb_z_answer_starts(srv);
    assert_int_equal(first_seq_of(srv, ok, 11), 1);
    mdb_z_answer_starts(srv);
    assert_int_equal(first_seq_of(srv, ok, 11), 3);
    /* nothing pending: the numbering goes on */
    mdb_z_answer_starts(srv);
    assert_int_equal(first_seq_of(srv, ok, 11), 4);
    mdb_z_free(srv);
}

/* Decoding raw (taken) fails with err. */
static void
refused(enum mdb_zalgo algo, struct sl_buf *pkt, enum mdb_zerr err,
        size_t max_pending)
{
    struct mdb_zstate *z = mdb_z_new(algo, 3, false, 0, max_pending);
    struct sl_buf raw = {0}, out = {0};

    sl_buf_append(&raw, pkt);
    sl_buf_free(pkt);
    assert_int_equal(mdb_z_decode(z, &raw, &out), -1);
    assert_int_equal(mdb_z_error(z), err);
    /* and stays refused */
    assert_int_equal(mdb_z_decode(z, &raw, &out), -1);
    sl_buf_reset(&raw);
    sl_buf_reset(&out);
    mdb_z_free(z);
}

static void
hostile_packets_are_refused(void **state)
{
    unsigned char *data = text(5000, 2);
    unsigned char bad[MDB_Z_HDR_LEN + 20] = {20, 0, 0, 0, 100, 0, 0,
                                             0x78, 0x9c, 'n', 'o', 't'};
    unsigned char empty[MDB_Z_HDR_LEN] = {0, 0, 0, 0, 100, 0, 0};
    struct sl_buf *b;

    (void)state;
    refused(MDB_Z_ZLIB, sl_buf_from(bad, sizeof(bad)), MDB_ZERR_CORRUPT, 0);
    refused(MDB_Z_ZSTD, sl_buf_from(bad, sizeof(bad)), MDB_ZERR_CORRUPT, 0);
    refused(MDB_Z_ZLIB, sl_buf_from(empty, sizeof(empty)), MDB_ZERR_CORRUPT,
            0);
    /* announces less or more than the data holds */
    refused(MDB_Z_ZLIB, server_packet(data, 5000, 0, 4999),
            MDB_ZERR_CORRUPT, 0);
    refused(MDB_Z_ZLIB, server_packet(data, 5000, 0, 5001),
            MDB_ZERR_CORRUPT, 0);
    refused(MDB_Z_ZSTD, zstd_packet_of(data, 5000, 4999), MDB_ZERR_CORRUPT,
            0);
    refused(MDB_Z_ZSTD, zstd_packet_of(data, 5000, 5001), MDB_ZERR_CORRUPT,
            0);
    /* bytes after the zlib stream, inside the packet */
    b = server_packet(data, 5000, 0, 5000);
    {
        unsigned char *p = flat(b);
        size_t n = sl_buf_len(b);
        uint32_t clen = get24(p) + 3;

        p = realloc(p, n + 3);
        memcpy(p + n, "xyz", 3);
        p[0] = (unsigned char)clen;
        p[1] = (unsigned char)(clen >> 8);
        p[2] = (unsigned char)(clen >> 16);
        sl_buf_free(b);
        refused(MDB_Z_ZLIB, sl_buf_from(p, n + 3), MDB_ZERR_CORRUPT, 0);
        free(p);
    }
    free(data);
}

static void
decompression_bomb_is_refused(void **state)
{
    unsigned char *zeros = calloc(1, MDB_Z_MAX_PAYLOAD);
    struct sl_buf *one = server_packet(zeros, MDB_Z_MAX_PAYLOAD, 0,
                                       MDB_Z_MAX_PAYLOAD);
    struct sl_buf *bomb = sl_buf_new();
    struct mdb_zstate *z = mdb_z_new(MDB_Z_ZLIB, -1, false, 0, 40 * MIB);
    struct sl_buf raw = {0}, out = {0};

    (void)state;
    /* 16 KiB each on the wire, 16 MiB each decoded: the third would
     * leave 48 MiB unconsumed, over the 40 MiB limit */
    assert_true(sl_buf_len(one) < 64 * 1024);
    for (int i = 0; i < 100; i++) {
        struct sl_buf *c = sl_buf_clone_new(one);

        sl_buf_append(bomb, c);
        sl_buf_free(c);
    }
    sl_buf_append(&raw, bomb);
    sl_buf_free(bomb);
    assert_int_equal(mdb_z_decode(z, &raw, &out), -1);
    assert_int_equal(mdb_z_error(z), MDB_ZERR_TOO_BIG);
    assert_int_equal(sl_buf_len(&out), 2 * MDB_Z_MAX_PAYLOAD);
    sl_buf_reset(&raw);
    sl_buf_reset(&out);
    sl_buf_free(one);
    free(zeros);
    mdb_z_free(z);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zlib_40mib_over_16mib_payloads),
        cmocka_unit_test(zstd_20mib),
        cmocka_unit_test(zlib_and_zstd_small_chains),
        cmocka_unit_test(small_and_incompressible_go_as_they_are),
        cmocka_unit_test(foreign_packets_decode_and_incomplete_ones_wait),
        cmocka_unit_test(sequence_numbers_by_role),
        cmocka_unit_test(pipelined_commands_answered_in_their_own_numbering),
        cmocka_unit_test(hostile_packets_are_refused),
        cmocka_unit_test(decompression_bomb_is_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
