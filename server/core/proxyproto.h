/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PROXY protocol (HAProxy's specification, versions 1 and 2): the
 * header a proxy sends before the first byte of a TCP connection to tell
 * the receiver the original client's address.
 *
 * sl__pp_write_v1 writes the v1 (text) header Sluice sends to servers
 * with proxy_protocol=true; sl__pp_parse reads a v1 or v2 header.
 * Pure functions: no I/O, no allocation (unit tests, fuzz/fuzz_proxyproto).
 */
#ifndef SL_PROXYPROTO_H
#define SL_PROXYPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* The longest v1 line, CRLF included (the specification's 107). */
#define SL_PP_V1_MAX 107
/* The longest v2 header sl__pp_parse buffers (16 bytes + addresses and
 * TLVs); a longer one is refused. */
#define SL_PP_V2_MAX 1024

struct sl_pp_header {
    int version;                    /* 1 or 2 */
    /* AF_INET or AF_INET6 with src/dst filled; AF_UNSPEC: v1 UNKNOWN, v2
     * LOCAL or an address family without IP addresses -- the receiver
     * keeps the connection's own addresses. */
    int family;
    struct sockaddr_storage src;
    struct sockaddr_storage dst;
};

enum {
    SL_PP_NEED_MORE = 0,            /* a prefix of a valid header */
    SL_PP_ERROR = -1,               /* not a valid header */
};

/*
 * Parse a header at the start of buf[0..len). Returns the header's length
 * (> 0, *h filled), SL_PP_NEED_MORE if buf is a proper prefix of a header
 * that could still be valid, SL_PP_ERROR otherwise (why: a short reason,
 * if not NULL).
 */
int sl__pp_parse(const uint8_t *buf, size_t len, struct sl_pp_header *h,
                 const char **why);

/*
 * Write the v1 header for a connection from src to dst into out (at least
 * SL_PP_V1_MAX + 1 bytes; NUL-terminated). IPv4-mapped IPv6 addresses are
 * written as IPv4; an IPv4 and an IPv6 address are both written as IPv6
 * (v1 needs one family); anything else (a unix socket, NULL) is
 * "PROXY UNKNOWN". Returns the length without the NUL.
 */
size_t sl__pp_write_v1(char *out, size_t outlen, const struct sockaddr *src,
                       const struct sockaddr *dst);

#endif

/* An address as accept() or a header gives it (sa_family AF_UNIX for a
 * unix-socket peer, with nothing else filled). */
union sl_pp_addr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/* ---- proxy_protocol_networks ---- */

/* One entry: family AF_INET/AF_INET6 with addr/prefix, AF_UNIX for
 * "localhost" (unix-socket clients), AF_UNSPEC for "*" (everyone). */
struct sl_pp_net {
    int family;
    unsigned prefix;                /* bits that must match */
    uint8_t addr[16];
};

/*
 * Parse a proxy_protocol_networks value: entries separated by commas
 * and/or spaces, each an IPv4 or IPv6 address with an optional /prefix,
 * "localhost" or "*". On success *out (malloc'ed, free()) and *n are set
 * (NULL and 0 for an empty value: no client) and 0 is returned; on error -1 with a message in err.
 */
int sl__pp_networks_parse(const char *value, struct sl_pp_net **out,
                          size_t *n, char *err, size_t errlen);

/* Whether a client at sa (as accept() gave it) is in one of the nets. */
bool sl__pp_networks_match(const struct sl_pp_net *nets, size_t n,
                           const struct sockaddr *sa);

/* What the first bytes a client sent are, as far as a header goes. */
enum sl_pp_detect {
    SL_PP_NOT_HEADER,               /* anything else (a MariaDB packet) */
    SL_PP_IS_HEADER,                /* a v1 or v2 header starts here */
    SL_PP_UNDECIDED,                /* too few bytes to tell */
};

/* Tells a header from a MariaDB packet by its first 4 bytes ("PROX" or
 * CR LF CR LF: as a packet header, a sequence number a client's first
 * packet never has). */
enum sl_pp_detect sl__pp_detect(const uint8_t *buf, size_t len);
