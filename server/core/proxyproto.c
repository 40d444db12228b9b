/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PROXY protocol header: the v1 writer and the v1/v2 parser
 * (proxyproto.h). Written from HAProxy's specification
 * (proxy-protocol.txt): v1 is one text line
 *   "PROXY TCP4|TCP6 SRC DST SRCPORT DSTPORT\r\n" or "PROXY UNKNOWN...\r\n"
 * of at most 107 bytes; v2 is a 12-byte signature, a version/command
 * byte, a family/transport byte, a 16-bit big-endian length and that
 * many bytes of addresses (and TLVs, skipped).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "proxyproto.h"

static const uint8_t v2_sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                   0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

static int
fail(const char **why, const char *reason)
{
    if (why != NULL) {
        *why = reason;
    }
    return SL_PP_ERROR;
}

/* A decimal port: 0-65535, digits only, no leading zero. */
static bool
parse_port(const char *s, uint16_t *port)
{
    unsigned long v = 0;
    size_t n = strlen(s);

    if (n == 0 || n > 5 || (n > 1 && s[0] == '0')) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > 65535) {
        return false;
    }
    *port = (uint16_t)v;
    return true;
}

static bool
parse_addr(int family, const char *addr, const char *port,
           struct sockaddr_storage *ss)
{
    uint16_t p;

    memset(ss, 0, sizeof(*ss));
    if (!parse_port(port, &p)) {
        return false;
    }
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;

        in->sin_family = AF_INET;
        in->sin_port = htons(p);
        return inet_pton(AF_INET, addr, &in->sin_addr) == 1;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(p);
    return inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1;
}

static int
parse_v1(const uint8_t *buf, size_t len, struct sl_pp_header *h,
         const char **why)
{
    char line[SL_PP_V1_MAX + 1];
    char *fields[7];
    size_t n = 0;
    const uint8_t *cr;
    size_t end;
    char *save = NULL;
    char *tok;
    int family;

    /* the line ends at the first CRLF, within 107 bytes: the CR at
     * index 105 at the latest */
    cr = memchr(buf, '\r', len < SL_PP_V1_MAX - 1 ? len : SL_PP_V1_MAX - 1);
    end = cr != NULL ? (size_t)(cr - buf)
                     : (len < SL_PP_V1_MAX ? len : SL_PP_V1_MAX);
    /* a LF or NUL before the CR is refused whether or not the CR has
     * arrived yet, so every prefix of a header that parses needs more */
    for (size_t i = 0; i < end; i++) {
        if (buf[i] == '\n' || buf[i] == '\0') {
            return fail(why, "v1 header with a stray control byte");
        }
    }
    if (cr == NULL) {
        if (len >= SL_PP_V1_MAX - 1) {
            return fail(why, "v1 header without CRLF within 107 bytes");
        }
        return SL_PP_NEED_MORE;
    }
    if (end + 1 == len) {
        return SL_PP_NEED_MORE;
    }
    if (buf[end + 1] != '\n') {
        return fail(why, "v1 header: CR not followed by LF");
    }
    memcpy(line, buf, end);
    line[end] = '\0';
    if (strlen(line) != end) {
        return fail(why, "v1 header with a NUL byte");
    }
    /* single spaces between fields */
    if (strstr(line, "  ") != NULL || line[end - 1] == ' ') {
        return fail(why, "v1 header: malformed spacing");
    }
    for (tok = strtok_r(line, " ", &save); tok != NULL && n < 7;
         tok = strtok_r(NULL, " ", &save)) {
        fields[n++] = tok;
    }
    if (n < 2 || strcmp(fields[0], "PROXY") != 0) {
        return fail(why, "v1 header: no protocol");
    }
    memset(h, 0, sizeof(*h));
    h->version = 1;
    if (strcmp(fields[1], "UNKNOWN") == 0) {
        /* the rest of the line is to be ignored */
        h->family = AF_UNSPEC;
        return (int)(end + 2);
    }
    if (strcmp(fields[1], "TCP4") == 0) {
        family = AF_INET;
    } else if (strcmp(fields[1], "TCP6") == 0) {
        family = AF_INET6;
    } else {
        return fail(why, "v1 header: protocol is not TCP4, TCP6 or UNKNOWN");
    }
    if (n != 6) {
        return fail(why, "v1 header: wrong number of fields");
    }
    if (!parse_addr(family, fields[2], fields[4], &h->src) ||
        !parse_addr(family, fields[3], fields[5], &h->dst)) {
        return fail(why, "v1 header: invalid address or port");
    }
    h->family = family;
    return (int)(end + 2);
}

static int
parse_v2(const uint8_t *buf, size_t len, struct sl_pp_header *h,
         const char **why)
{
    size_t body;
    uint8_t cmd;
    uint8_t fam;

    if (len < 16) {
        return SL_PP_NEED_MORE;
    }
    if ((buf[12] >> 4) != 2) {
        return fail(why, "v2 header: version is not 2");
    }
    cmd = buf[12] & 0x0F;
    if (cmd > 1) {
        return fail(why, "v2 header: command is not LOCAL or PROXY");
    }
    fam = buf[13];
    body = ((size_t)buf[14] << 8) | buf[15];
    if (16 + body > SL_PP_V2_MAX) {
        return fail(why, "v2 header longer than 1024 bytes");
    }
    if (len < 16 + body) {
        return SL_PP_NEED_MORE;
    }
    memset(h, 0, sizeof(*h));
    h->version = 2;
    h->family = AF_UNSPEC;
    if (cmd == 0) {
        /* LOCAL: the proxy's own connection (health check); the body, if
         * any, is ignored */
        return (int)(16 + body);
    }
    switch (fam) {
    case 0x00:   /* UNSPEC */
    case 0x31:   /* UNIX stream */
        break;
    case 0x11: { /* TCP over IPv4 */
        struct sockaddr_in *s = (struct sockaddr_in *)&h->src;
        struct sockaddr_in *d = (struct sockaddr_in *)&h->dst;

        if (body < 12) {
            return fail(why, "v2 header: IPv4 addresses truncated");
        }
        s->sin_family = d->sin_family = AF_INET;
        memcpy(&s->sin_addr, buf + 16, 4);
        memcpy(&d->sin_addr, buf + 20, 4);
        memcpy(&s->sin_port, buf + 24, 2);
        memcpy(&d->sin_port, buf + 26, 2);
        h->family = AF_INET;
        break;
    }
    case 0x21: { /* TCP over IPv6 */
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&h->src;
        struct sockaddr_in6 *d = (struct sockaddr_in6 *)&h->dst;

        if (body < 36) {
            return fail(why, "v2 header: IPv6 addresses truncated");
        }
        s->sin6_family = d->sin6_family = AF_INET6;
        memcpy(&s->sin6_addr, buf + 16, 16);
        memcpy(&d->sin6_addr, buf + 32, 16);
        memcpy(&s->sin6_port, buf + 48, 2);
        memcpy(&d->sin6_port, buf + 50, 2);
        h->family = AF_INET6;
        break;
    }
    default:
        return fail(why, "v2 header: unsupported address family or "
                         "transport");
    }
    return (int)(16 + body);
}

int
sl__pp_parse(const uint8_t *buf, size_t len, struct sl_pp_header *h,
             const char **why)
{
    static const char v1_sig[] = "PROXY ";
    size_t n;

    if (len == 0) {
        return SL_PP_NEED_MORE;
    }
    if (buf[0] == 'P') {
        n = len < 6 ? len : 6;
        if (memcmp(buf, v1_sig, n) != 0) {
            return fail(why, "not a PROXY protocol header");
        }
        return len < 6 ? SL_PP_NEED_MORE : parse_v1(buf, len, h, why);
    }
    n = len < sizeof(v2_sig) ? len : sizeof(v2_sig);
    if (memcmp(buf, v2_sig, n) != 0) {
        return fail(why, "not a PROXY protocol header");
    }
    return len < sizeof(v2_sig) ? SL_PP_NEED_MORE
                                : parse_v2(buf, len, h, why);
}

/* An IPv4-mapped IPv6 address as IPv4; anything else copied. */
static void
unmap(const struct sockaddr *sa, struct sockaddr_storage *out)
{
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
        struct sockaddr_in *in = (struct sockaddr_in *)out;

        in->sin_family = AF_INET;
        in->sin_port = in6->sin6_port;
        memcpy(&in->sin_addr, in6->sin6_addr.s6_addr + 12, 4);
        return;
    }
    memcpy(out, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                              : sizeof(struct sockaddr_in));
}

/* An IPv4 address as IPv4-mapped IPv6. */
static void
map6(struct sockaddr_storage *ss)
{
    struct sockaddr_in in;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

    if (ss->ss_family != AF_INET) {
        return;
    }
    memcpy(&in, ss, sizeof(in));
    memset(ss, 0, sizeof(*ss));
    in6->sin6_family = AF_INET6;
    in6->sin6_port = in.sin_port;
    in6->sin6_addr.s6_addr[10] = 0xFF;
    in6->sin6_addr.s6_addr[11] = 0xFF;
    memcpy(in6->sin6_addr.s6_addr + 12, &in.sin_addr, 4);
}

static const void *
addr_of(const struct sockaddr_storage *ss, uint16_t *port)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

        *port = ntohs(in->sin_port);
        return &in->sin_addr;
    }
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

    *port = ntohs(in6->sin6_port);
    return &in6->sin6_addr;
}

size_t
sl__pp_write_v1(char *out, size_t outlen, const struct sockaddr *src,
                const struct sockaddr *dst)
{
    struct sockaddr_storage s;
    struct sockaddr_storage d;
    char sa[INET6_ADDRSTRLEN];
    char da[INET6_ADDRSTRLEN];
    uint16_t sp;
    uint16_t dp;
    int n;

    if (src == NULL || dst == NULL ||
        (src->sa_family != AF_INET && src->sa_family != AF_INET6) ||
        (dst->sa_family != AF_INET && dst->sa_family != AF_INET6)) {
        n = snprintf(out, outlen, "PROXY UNKNOWN\r\n");
        return n < 0 ? 0 : (size_t)n;
    }
    unmap(src, &s);
    unmap(dst, &d);
    if (s.ss_family != d.ss_family) {
        map6(&s);
        map6(&d);
    }
    inet_ntop(s.ss_family, addr_of(&s, &sp), sa, sizeof(sa));
    inet_ntop(d.ss_family, addr_of(&d, &dp), da, sizeof(da));
    n = snprintf(out, outlen, "PROXY %s %s %s %u %u\r\n",
                 s.ss_family == AF_INET ? "TCP4" : "TCP6", sa, da,
                 (unsigned)sp, (unsigned)dp);
    return n < 0 ? 0 : (size_t)n;
}

/* ---- proxy_protocol_networks ---- */

static int
net_error(char *err, size_t errlen, const char *entry, const char *why)
{
    snprintf(err, errlen, "invalid network '%s' (%s; expected IPv4 or IPv6 "
             "addresses or subnets, 'localhost' or '*')", entry, why);
    return -1;
}

static int
parse_net(const char *entry, struct sl_pp_net *net, char *err, size_t errlen)
{
    char a[INET6_ADDRSTRLEN + 8];
    char *slash;
    unsigned max;

    memset(net, 0, sizeof(*net));
    if (strcmp(entry, "*") == 0) {
        net->family = AF_UNSPEC;
        return 0;
    }
    if (strcasecmp(entry, "localhost") == 0) {
        net->family = AF_UNIX;
        return 0;
    }
    if (strlen(entry) >= sizeof(a)) {
        return net_error(err, errlen, entry, "too long");
    }
    snprintf(a, sizeof(a), "%s", entry);
    slash = strchr(a, '/');
    if (slash != NULL) {
        *slash++ = '\0';
    }
    if (inet_pton(AF_INET, a, net->addr) == 1) {
        net->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, a, net->addr) == 1) {
        net->family = AF_INET6;
        max = 128;
    } else {
        return net_error(err, errlen, entry, "not an address");
    }
    net->prefix = max;
    if (slash != NULL) {
        unsigned long v = 0;

        if (*slash == '\0' || strlen(slash) > 3) {
            return net_error(err, errlen, entry, "bad prefix length");
        }
        for (const char *c = slash; *c != '\0'; c++) {
            if (*c < '0' || *c > '9') {
                return net_error(err, errlen, entry, "bad prefix length");
            }
            v = v * 10 + (unsigned long)(*c - '0');
        }
        if (v > max) {
            return net_error(err, errlen, entry, "prefix length too long");
        }
        net->prefix = (unsigned)v;
    }
    return 0;
}

int
sl__pp_networks_parse(const char *value, struct sl_pp_net **out, size_t *n,
                      char *err, size_t errlen)
{
    struct sl_pp_net *nets = NULL;
    size_t count = 0;
    size_t cap = 0;
    const char *p = value;

    *out = NULL;
    *n = 0;
    while (*p != '\0') {
        char entry[128];
        size_t len = strcspn(p, ", \t");

        if (len == 0) {
            p++;
            continue;
        }
        if (len >= sizeof(entry)) {
            snprintf(err, errlen, "invalid network '%.40s...' (too long)", p);
            free(nets);
            return -1;
        }
        memcpy(entry, p, len);
        entry[len] = '\0';
        p += len;
        if (count == cap) {
            struct sl_pp_net *bigger;

            cap = cap ? cap * 2 : 4;
            bigger = realloc(nets, cap * sizeof(*nets));
            if (bigger == NULL) {
                snprintf(err, errlen, "out of memory");
                free(nets);
                return -1;
            }
            nets = bigger;
        }
        if (parse_net(entry, &nets[count], err, errlen) != 0) {
            free(nets);
            return -1;
        }
        count++;
    }
    *out = nets;
    *n = count;
    return 0;
}

static bool
prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned bytes = bits / 8;
    unsigned rest = bits % 8;

    if (memcmp(a, b, bytes) != 0) {
        return false;
    }
    if (rest == 0) {
        return true;
    }
    uint8_t mask = (uint8_t)(0xFF << (8 - rest));

    return (a[bytes] & mask) == (b[bytes] & mask);
}

bool
sl__pp_networks_match(const struct sl_pp_net *nets, size_t n,
                      const struct sockaddr *sa)
{
    struct sockaddr_storage ss;
    const uint8_t *addr = NULL;
    int family = sa->sa_family;

    if (family == AF_INET || family == AF_INET6) {
        unmap(sa, &ss);
        family = ss.ss_family;
        addr = family == AF_INET
                   ? (const uint8_t *)&((struct sockaddr_in *)&ss)->sin_addr
                   : (const uint8_t *)&((struct sockaddr_in6 *)&ss)
                         ->sin6_addr;
    }
    for (size_t i = 0; i < n; i++) {
        if (nets[i].family == AF_UNSPEC) {
            return true;
        }
        if (nets[i].family != family) {
            continue;
        }
        if (family == AF_UNIX) {
            return true;
        }
        if (addr != NULL && prefix_equal(addr, nets[i].addr, nets[i].prefix)) {
            return true;
        }
    }
    return false;
}

enum sl_pp_detect
sl__pp_detect(const uint8_t *buf, size_t len)
{
    size_t n = len < 4 ? len : 4;

    if (memcmp(buf, "PROX", n) == 0 || memcmp(buf, v2_sig, n) == 0) {
        return len < 4 ? SL_PP_UNDECIDED : SL_PP_IS_HEADER;
    }
    return SL_PP_NOT_HEADER;
}
