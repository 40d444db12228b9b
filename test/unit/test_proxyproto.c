/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the PROXY protocol (proxyproto.c): the v1 writer (IPv4,
 * IPv6, IPv4-mapped, mixed families, UNKNOWN), the v1 and v2 parser
 * (every proper prefix of a valid header asks for more, the header's
 * length is returned so the bytes after it stay, malformed headers are
 * refused), what tells a header from a MariaDB packet, and the
 * proxy_protocol_networks lists (CIDR, IPv6, localhost, *).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proxyproto.h"

static struct sockaddr_storage
ip(const char *addr, unsigned port)
{
    struct sockaddr_storage ss;

    memset(&ss, 0, sizeof(ss));
    if (strchr(addr, ':') != NULL) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        assert_int_equal(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;

        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        assert_int_equal(inet_pton(AF_INET, addr, &in->sin_addr), 1);
    }
    return ss;
}

static const char *
write_v1(const char *src, unsigned sp, const char *dst, unsigned dp)
{
    static char out[SL_PP_V1_MAX + 1];
    struct sockaddr_storage s = ip(src, sp);
    struct sockaddr_storage d = ip(dst, dp);
    size_t n = sl__pp_write_v1(out, sizeof(out), (struct sockaddr *)&s,
                               (struct sockaddr *)&d);

    assert_int_equal(n, strlen(out));
    return out;
}

static void
test_write_v1(void **state)
{
    struct sockaddr sa = {.sa_family = AF_UNIX};
    struct sockaddr_storage d = ip("127.0.0.1", 4006);
    char out[SL_PP_V1_MAX + 1];
    char big[SL_PP_V1_MAX + 1];

    (void)state;
    assert_string_equal(write_v1("127.0.0.2", 40000, "127.0.0.1", 4006),
                        "PROXY TCP4 127.0.0.2 127.0.0.1 40000 4006\r\n");
    assert_string_equal(write_v1("2001:db8::1", 1, "::1", 65535),
                        "PROXY TCP6 2001:db8::1 ::1 1 65535\r\n");
    /* an IPv4 client on a dual-stack listener: written as IPv4 */
    assert_string_equal(write_v1("::ffff:10.9.8.7", 5, "::ffff:10.0.0.1", 6),
                        "PROXY TCP4 10.9.8.7 10.0.0.1 5 6\r\n");
    /* one family per line: the IPv4 side is mapped */
    assert_string_equal(write_v1("10.9.8.7", 5, "2001:db8::2", 6),
                        "PROXY TCP6 ::ffff:10.9.8.7 2001:db8::2 5 6\r\n");
    assert_int_equal(sl__pp_write_v1(out, sizeof(out), &sa,
                                     (struct sockaddr *)&d), 15);
    assert_string_equal(out, "PROXY UNKNOWN\r\n");
    assert_int_equal(sl__pp_write_v1(out, sizeof(out), NULL, NULL), 15);
    /* the longest line fits the specification's 107 bytes */
    snprintf(big, sizeof(big), "%s",
             write_v1("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 65535,
                      "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd", 65535));
    assert_true(strlen(big) <= SL_PP_V1_MAX);
}

/* Every proper prefix of hdr needs more; the whole (plus trailing bytes)
 * parses to its length. */
static void
check_prefixes(const uint8_t *hdr, size_t len, struct sl_pp_header *h)
{
    uint8_t buf[SL_PP_V2_MAX + 8];

    for (size_t i = 0; i < len; i++) {
        assert_int_equal(sl__pp_parse(hdr, i, h, NULL), SL_PP_NEED_MORE);
    }
    memcpy(buf, hdr, len);
    memcpy(buf + len, "\x55\x00\x00\x01", 4);   /* the login packet */
    assert_int_equal(sl__pp_parse(buf, len + 4, h, NULL), (int)len);
}

static void
assert_addr(const struct sockaddr_storage *ss, const char *addr,
            unsigned port)
{
    char text[INET6_ADDRSTRLEN];

    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

        inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
        assert_int_equal(ntohs(in->sin_port), port);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

        assert_int_equal(ss->ss_family, AF_INET6);
        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
        assert_int_equal(ntohs(in6->sin6_port), port);
    }
    assert_string_equal(text, addr);
}

static void
test_parse_v1(void **state)
{
    static const char tcp4[] = "PROXY TCP4 10.9.8.7 127.0.0.1 56324 4006\r\n";
    static const char tcp6[] = "PROXY TCP6 2001:db8::7 ::1 1 65535\r\n";
    static const char unknown[] = "PROXY UNKNOWN ff::1 ::2 3 4\r\n";
    struct sl_pp_header h;

    (void)state;
    check_prefixes((const uint8_t *)tcp4, strlen(tcp4), &h);
    assert_int_equal(h.version, 1);
    assert_int_equal(h.family, AF_INET);
    assert_addr(&h.src, "10.9.8.7", 56324);
    assert_addr(&h.dst, "127.0.0.1", 4006);
    check_prefixes((const uint8_t *)tcp6, strlen(tcp6), &h);
    assert_int_equal(h.family, AF_INET6);
    assert_addr(&h.src, "2001:db8::7", 1);
    assert_addr(&h.dst, "::1", 65535);
    check_prefixes((const uint8_t *)unknown, strlen(unknown), &h);
    assert_int_equal(h.family, AF_UNSPEC);
    check_prefixes((const uint8_t *)"PROXY UNKNOWN\r\n", 15, &h);
    assert_int_equal(h.family, AF_UNSPEC);
}

static void
test_parse_v1_malformed(void **state)
{
    static const char *const bad[] = {
        "PROXY TCP4 10.9.8.7 127.0.0.1 1 2 3\r\n",
        "PROXY TCP4 10.9.8.7 127.0.0.1 1\r\n",
        "PROXY TCP4 10.9.8.777 127.0.0.1 1 2\r\n",
        "PROXY TCP4 ::1 ::1 1 2\r\n",
        "PROXY TCP6 10.9.8.7 127.0.0.1 1 2\r\n",
        "PROXY TCP4 10.9.8.7 127.0.0.1 1 65536\r\n",
        "PROXY TCP4 10.9.8.7 127.0.0.1 01 2\r\n",
        "PROXY TCP4 10.9.8.7 127.0.0.1 -1 2\r\n",
        "PROXY TCP4 10.9.8.7 127.0.0.1 1 2 \r\n",
        "PROXY TCP4  10.9.8.7 127.0.0.1 1 2\r\n",
        "PROXY UDP4 10.9.8.7 127.0.0.1 1 2\r\n",
        "PROXY TCP4 10.9.8.7 127.0.0.1 1 2\r\r",
        "PROXY TCP4 10.9.8.7\n",
        "PROXY \r\n",
        "PROXYTCP4 10.9.8.7 127.0.0.1 1 2\r\n",
        /* a bare LF inside an UNKNOWN line (fuzz_proxyproto: the line
         * parsed whole while its prefix ending at the LF was refused) */
        "PROXY UNKNOWN a\nb\r\n",
    };
    struct sl_pp_header h;
    const char *why;
    char longline[200];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        if (sl__pp_parse((const uint8_t *)bad[i], strlen(bad[i]), &h, &why) !=
            SL_PP_ERROR) {
            fail_msg("accepted: %s", bad[i]);
        }
        assert_non_null(why);
    }
    /* no CRLF within 107 bytes: refused once 106 bytes are in, without
     * waiting for more */
    memset(longline, 'A', sizeof(longline));
    memcpy(longline, "PROXY ", 6);
    assert_int_equal(sl__pp_parse((const uint8_t *)longline, 105, &h, NULL),
                     SL_PP_NEED_MORE);
    assert_int_equal(sl__pp_parse((const uint8_t *)longline, 106, &h, NULL),
                     SL_PP_ERROR);
    /* a NUL inside the line */
    assert_int_equal(sl__pp_parse((const uint8_t *)"PROXY T\0P4", 10, &h,
                                  NULL), SL_PP_ERROR);
}

static size_t
v2(uint8_t *out, uint8_t cmd, uint8_t fam, const uint8_t *body, size_t n)
{
    static const uint8_t sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                    0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

    memcpy(out, sig, 12);
    out[12] = cmd;
    out[13] = fam;
    out[14] = (uint8_t)(n >> 8);
    out[15] = (uint8_t)n;
    if (n > 0) {
        memcpy(out + 16, body, n);   /* body may be NULL when n is 0 */
    }
    return 16 + n;
}

static void
test_parse_v2(void **state)
{
    static const uint8_t v4[] = {10, 9, 8, 7, 127, 0, 0, 1,
                                 0xDC, 0x04, 0x0F, 0xA6,
                                 /* a TLV, skipped */
                                 0x04, 0x00, 0x01, 0x00};
    uint8_t v6[36 + 3] = {0x20, 0x01, 0x0d, 0xb8};
    uint8_t hdr[SL_PP_V2_MAX + 16];
    struct sl_pp_header h;
    size_t n;

    (void)state;
    n = v2(hdr, 0x21, 0x11, v4, sizeof(v4));
    check_prefixes(hdr, n, &h);
    assert_int_equal(h.version, 2);
    assert_int_equal(h.family, AF_INET);
    assert_addr(&h.src, "10.9.8.7", 56324);
    assert_addr(&h.dst, "127.0.0.1", 4006);

    v6[15] = 7;
    v6[31] = 1;
    v6[32] = 0;
    v6[33] = 1;
    v6[34] = 0x0F;
    v6[35] = 0xA6;
    n = v2(hdr, 0x21, 0x21, v6, sizeof(v6));
    check_prefixes(hdr, n, &h);
    assert_int_equal(h.family, AF_INET6);
    assert_addr(&h.src, "2001:db8::7", 1);
    assert_addr(&h.dst, "::1", 4006);

    /* LOCAL (a health check) and UNSPEC: no address, still consumed */
    n = v2(hdr, 0x20, 0x11, v4, sizeof(v4));
    check_prefixes(hdr, n, &h);
    assert_int_equal(h.family, AF_UNSPEC);
    n = v2(hdr, 0x21, 0x00, NULL, 0);
    check_prefixes(hdr, n, &h);
    assert_int_equal(h.family, AF_UNSPEC);

    /* malformed */
    n = v2(hdr, 0x21, 0x11, v4, 11);            /* addresses cut short */
    assert_int_equal(sl__pp_parse(hdr, n, &h, NULL), SL_PP_ERROR);
    n = v2(hdr, 0x21, 0x21, v6, 35);
    assert_int_equal(sl__pp_parse(hdr, n, &h, NULL), SL_PP_ERROR);
    n = v2(hdr, 0x11, 0x11, v4, 12);            /* version 1 */
    assert_int_equal(sl__pp_parse(hdr, n, &h, NULL), SL_PP_ERROR);
    n = v2(hdr, 0x22, 0x11, v4, 12);            /* command 2 */
    assert_int_equal(sl__pp_parse(hdr, n, &h, NULL), SL_PP_ERROR);
    n = v2(hdr, 0x21, 0x12, v4, 12);            /* UDP */
    assert_int_equal(sl__pp_parse(hdr, n, &h, NULL), SL_PP_ERROR);
    n = v2(hdr, 0x21, 0x41, v4, 12);            /* unknown family */
    assert_int_equal(sl__pp_parse(hdr, n, &h, NULL), SL_PP_ERROR);
    /* longer than Sluice buffers: refused from its first 16 bytes */
    v2(hdr, 0x21, 0x11, v4, 12);
    hdr[14] = 0x04;
    hdr[15] = 0x00;
    assert_int_equal(sl__pp_parse(hdr, 16, &h, NULL), SL_PP_ERROR);
    /* a broken signature */
    v2(hdr, 0x21, 0x11, v4, 12);
    hdr[11] = 0x0B;
    assert_int_equal(sl__pp_parse(hdr, 28, &h, NULL), SL_PP_ERROR);
}

static void
test_detect(void **state)
{
    /* a HandshakeResponse of 0x50 bytes: 'P' as its length's low byte */
    static const uint8_t login[] = {0x50, 0x00, 0x00, 0x01, 0x85};
    static const uint8_t v2sig[] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00};

    (void)state;
    assert_int_equal(sl__pp_detect(login, 1), SL_PP_UNDECIDED);
    assert_int_equal(sl__pp_detect(login, 4), SL_PP_NOT_HEADER);
    assert_int_equal(sl__pp_detect(login, sizeof(login)), SL_PP_NOT_HEADER);
    assert_int_equal(sl__pp_detect((const uint8_t *)"PRO", 3),
                     SL_PP_UNDECIDED);
    assert_int_equal(sl__pp_detect((const uint8_t *)"PROX", 4),
                     SL_PP_IS_HEADER);
    assert_int_equal(sl__pp_detect(v2sig, 3), SL_PP_UNDECIDED);
    assert_int_equal(sl__pp_detect(v2sig, 5), SL_PP_IS_HEADER);
    assert_int_equal(sl__pp_detect(v2sig, 0), SL_PP_UNDECIDED);
    assert_int_equal(sl__pp_detect((const uint8_t *)"\x0D\x0B", 2),
                     SL_PP_NOT_HEADER);
}

static bool
match(const struct sl_pp_net *nets, size_t n, const char *addr)
{
    struct sockaddr_storage ss = ip(addr, 1);

    return sl__pp_networks_match(nets, n, (struct sockaddr *)&ss);
}

static void
test_networks(void **state)
{
    struct sl_pp_net *nets;
    struct sockaddr un = {.sa_family = AF_UNIX};
    char err[256];
    size_t n;

    (void)state;
    assert_int_equal(sl__pp_networks_parse("10.0.0.0/8, 192.168.1.7 "
                                           "2001:db8::/32,localhost",
                                           &nets, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 4);
    assert_true(match(nets, n, "10.200.3.4"));
    assert_true(match(nets, n, "::ffff:10.1.1.1"));    /* v4-mapped */
    assert_false(match(nets, n, "11.0.0.1"));
    assert_true(match(nets, n, "192.168.1.7"));
    assert_false(match(nets, n, "192.168.1.8"));
    assert_true(match(nets, n, "2001:db8:ffff::1"));
    assert_false(match(nets, n, "2001:db9::1"));
    assert_true(sl__pp_networks_match(nets, n, &un));
    free(nets);

    /* odd prefix lengths */
    assert_int_equal(sl__pp_networks_parse("127.0.0.0/25", &nets, &n, err,
                                           sizeof(err)), 0);
    assert_true(match(nets, n, "127.0.0.127"));
    assert_false(match(nets, n, "127.0.0.128"));
    assert_false(sl__pp_networks_match(nets, n, &un));
    free(nets);

    assert_int_equal(sl__pp_networks_parse("*", &nets, &n, err, sizeof(err)),
                     0);
    assert_true(match(nets, n, "203.0.113.9"));
    assert_true(sl__pp_networks_match(nets, n, &un));
    free(nets);

    /* empty: nobody */
    assert_int_equal(sl__pp_networks_parse("", &nets, &n, err, sizeof(err)),
                     0);
    assert_int_equal(n, 0);
    assert_false(match(nets, n, "127.0.0.1"));

    static const char *const bad[] = {"10.0.0.0/33", "::/129", "10.0.0/8",
                                      "host.example", "10.0.0.1/", "1.2.3.4/x",
                                      "10.0.0.1/0008"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (sl__pp_networks_parse(bad[i], &nets, &n, err, sizeof(err)) !=
            -1) {
            fail_msg("accepted: %s", bad[i]);
        }
        assert_non_null(strstr(err, "invalid network"));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_v1),
        cmocka_unit_test(test_parse_v1),
        cmocka_unit_test(test_parse_v1_malformed),
        cmocka_unit_test(test_parse_v2),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_networks),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
