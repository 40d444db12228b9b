/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MariaDB packet helpers on buffer chains (include/sluice/mariadb.h).
 *
 * Everything here is a pure function of its arguments: framing (how long is
 * the packet or command at the head of a chain), length-encoded integers,
 * and builders for the few packets the proxy writes itself (ERR, OK,
 * COM_QUERY). Framing reads only the 4-byte headers and never copies a
 * payload, so it can run on every read of the data path.
 *
 * Context: any thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>

/*
 * Read the 4-byte header at offset off of buf into hdr. false when fewer
 * than 4 bytes are available there. The head-segment case is inlined
 * because it is almost always the one taken.
 */
static bool
header_at(const struct sl_buf *buf, size_t off, unsigned char hdr[4])
{
    size_t n;
    const unsigned char *p;

    if (off + SL_MDB_HDR_LEN > buf->len) {
        return false;
    }
    p = sl_buf_head_data(buf, &n);
    if (off + SL_MDB_HDR_LEN <= n) {
        memcpy(hdr, p + off, SL_MDB_HDR_LEN);
        return true;
    }
    return sl_buf_copy_out(buf, off, SL_MDB_HDR_LEN, hdr) == SL_MDB_HDR_LEN;
}

size_t
sl_mdb_packet_len(const struct sl_buf *buf)
{
    unsigned char hdr[4];
    size_t total;

    if (!header_at(buf, 0, hdr)) {
        return 0;
    }
    total = SL_MDB_HDR_LEN + sl_mdb_get_len(hdr);
    return total <= buf->len ? total : 0;
}

size_t
sl_mdb_command_len(const struct sl_buf *buf)
{
    unsigned char hdr[4];
    size_t off = 0;
    uint32_t len;

    do {
        if (!header_at(buf, off, hdr)) {
            return 0;
        }
        len = sl_mdb_get_len(hdr);
        off += SL_MDB_HDR_LEN + len;
        if (off > buf->len) {
            return 0;
        }
    } while (len == SL_MDB_MAX_PAYLOAD);
    return off;
}

size_t
sl_mdb_complete_packets_len(const struct sl_buf *buf, size_t *npackets)
{
    unsigned char hdr[4];
    size_t off = 0;
    size_t n = 0;
    size_t next;

    while (header_at(buf, off, hdr)) {
        next = off + SL_MDB_HDR_LEN + sl_mdb_get_len(hdr);
        if (next > buf->len) {
            break;
        }
        off = next;
        n++;
    }
    if (npackets != NULL) {
        *npackets = n;
    }
    return off;
}

int
sl_mdb_command(const struct sl_buf *buf)
{
    unsigned char hdr[4];

    if (!header_at(buf, 0, hdr) || sl_mdb_get_len(hdr) == 0 ||
        buf->len <= SL_MDB_HDR_LEN) {
        return -1;
    }
    return sl_buf_byte(buf, SL_MDB_HDR_LEN);
}

size_t
sl_mdb_get_lenenc(const unsigned char *p, size_t avail, uint64_t *out)
{
    size_t need;
    uint64_t v = 0;

    if (avail == 0) {
        return 0;
    }
    if (p[0] < 0xfb) {
        *out = p[0];
        return 1;
    }
    switch (p[0]) {
    case 0xfc:
        need = 2;
        break;
    case 0xfd:
        need = 3;
        break;
    case 0xfe:
        need = 8;
        break;
    default:
        return 0;   /* 0xfb (NULL) and 0xff (ERR) are not integers */
    }
    if (avail < need + 1) {
        return 0;
    }
    for (size_t i = need; i > 0; i--) {
        v = (v << 8) | p[i];
    }
    *out = v;
    return need + 1;
}

size_t
sl_mdb_put_lenenc(unsigned char *p, uint64_t v)
{
    size_t n;

    if (v < 0xfb) {
        p[0] = (unsigned char)v;
        return 1;
    }
    if (v <= 0xffff) {
        p[0] = 0xfc;
        n = 2;
    } else if (v <= 0xffffff) {
        p[0] = 0xfd;
        n = 3;
    } else {
        p[0] = 0xfe;
        n = 8;
    }
    for (size_t i = 1; i <= n; i++) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
    return n + 1;
}

/*
 * Append packets for payload[0..len) to out, starting at sequence *seq.
 * A payload that is an exact multiple of 0xFFFFFF (including 0) ends with
 * an empty packet, as the protocol requires.
 */
static int
append_packets(struct sl_buf *out, uint8_t *seq, const void *payload,
               size_t len)
{
    const unsigned char *p = payload;
    unsigned char hdr[4];
    uint32_t chunk;

    for (;;) {
        chunk = len > SL_MDB_MAX_PAYLOAD ? SL_MDB_MAX_PAYLOAD : (uint32_t)len;
        sl_mdb_set_hdr(hdr, chunk, (*seq)++);
        if (sl_buf_append_data(out, hdr, sizeof(hdr)) != 0 ||
            (chunk > 0 && sl_buf_append_data(out, p, chunk) != 0)) {
            return -1;
        }
        p += chunk;
        len -= chunk;
        if (chunk < SL_MDB_MAX_PAYLOAD) {
            return 0;
        }
    }
}

struct sl_buf *
sl_mdb_make_packet(uint8_t seq, const void *payload, size_t len)
{
    struct sl_buf *buf = sl_buf_new();

    if (buf == NULL) {
        return NULL;
    }
    if (append_packets(buf, &seq, payload, len) != 0) {
        sl_buf_free(buf);
        return NULL;
    }
    return buf;
}

struct sl_buf *
sl_mdb_make_err(uint8_t seq, uint16_t code, const char *sqlstate,
                const char *msg)
{
    unsigned char p[512];
    size_t mlen = msg != NULL ? strlen(msg) : 0;
    size_t max = sizeof(p) - 9;

    if (mlen > max) {
        mlen = max;
    }
    p[0] = 0xff;
    p[1] = (unsigned char)code;
    p[2] = (unsigned char)(code >> 8);
    p[3] = '#';
    memcpy(p + 4, "HY000", 5);
    if (sqlstate != NULL && strlen(sqlstate) >= 5) {
        memcpy(p + 4, sqlstate, 5);
    }
    if (mlen > 0) {
        memcpy(p + 9, msg, mlen);
    }
    return sl_mdb_make_packet(seq, p, 9 + mlen);
}

struct sl_buf *
sl_mdb_make_ok(uint8_t seq, uint64_t affected, uint64_t insert_id,
               uint16_t status, uint16_t warnings)
{
    unsigned char p[32];
    size_t n = 0;

    p[n++] = 0x00;
    n += sl_mdb_put_lenenc(p + n, affected);
    n += sl_mdb_put_lenenc(p + n, insert_id);
    p[n++] = (unsigned char)status;
    p[n++] = (unsigned char)(status >> 8);
    p[n++] = (unsigned char)warnings;
    p[n++] = (unsigned char)(warnings >> 8);
    return sl_mdb_make_packet(seq, p, n);
}

/* Append one packet (payload p[0..n)) with sequence *seq to out. */
static int
rs_packet(struct sl_buf *out, uint8_t *seq, const unsigned char *p, size_t n)
{
    struct sl_buf *pkt = sl_mdb_make_packet(*seq, p, n);

    if (pkt == NULL) {
        return -ENOMEM;
    }
    *seq = (uint8_t)(*seq + (n / SL_MDB_MAX_PAYLOAD) + 1);
    sl_buf_append(out, pkt);
    sl_buf_free(pkt);
    return 0;
}

static size_t
put_lenenc_str(unsigned char *p, const char *s, size_t len)
{
    size_t n = sl_mdb_put_lenenc(p, len);

    memcpy(p + n, s, len);
    return n + len;
}

/* A column definition (protocol 4.1) of a VARCHAR utf8 column. */
static int
rs_coldef(struct sl_buf *out, uint8_t *seq, const char *name, bool ext_meta)
{
    size_t len = strlen(name) > 250 ? 250 : strlen(name);
    unsigned char p[600];
    size_t n = 0;

    n += put_lenenc_str(p + n, "def", 3);
    n += put_lenenc_str(p + n, "", 0);              /* schema */
    n += put_lenenc_str(p + n, "", 0);              /* table */
    n += put_lenenc_str(p + n, "", 0);              /* org_table */
    n += put_lenenc_str(p + n, name, len);
    n += put_lenenc_str(p + n, name, len);          /* org_name */
    if (ext_meta) {
        p[n++] = 0;   /* MariaDB extended metadata: none */
    }
    p[n++] = 0x0c;
    p[n++] = 33;                                    /* utf8_general_ci */
    p[n++] = 0;
    memcpy(p + n, "\xff\xff\x00\x00", 4);            /* length 65535 */
    n += 4;
    p[n++] = 0xfd;                                  /* VAR_STRING */
    memset(p + n, 0, 5);                            /* flags, decimals, */
    n += 5;                                         /* filler */
    return rs_packet(out, seq, p, n);
}

static int
rs_eof(struct sl_buf *out, uint8_t *seq, bool as_ok, uint16_t status)
{
    unsigned char p[7] = {0xfe, 0, 0, 0, 0, 0, 0};

    if (as_ok) {   /* OK packet with the 0xFE header: 0, 0, status, 0 */
        p[3] = (unsigned char)status;
        p[4] = (unsigned char)(status >> 8);
        return rs_packet(out, seq, p, 7);
    }
    p[3] = (unsigned char)status;
    p[4] = (unsigned char)(status >> 8);
    return rs_packet(out, seq, p, 5);
}

static int
rs_row(struct sl_buf *out, uint8_t *seq, size_t ncols,
       const char *const *values)
{
    size_t need = 0;
    size_t n = 0;
    unsigned char *p;
    int rc;

    for (size_t c = 0; c < ncols; c++) {
        need += 9 + (values[c] != NULL ? strlen(values[c]) : 0);
    }
    p = malloc(need + 1);
    if (p == NULL) {
        return -ENOMEM;
    }
    for (size_t c = 0; c < ncols; c++) {
        if (values[c] == NULL) {
            p[n++] = 0xfb;
        } else {
            n += put_lenenc_str(p + n, values[c], strlen(values[c]));
        }
    }
    rc = rs_packet(out, seq, p, n);
    free(p);
    return rc;
}

struct sl_buf *
sl_mdb_make_resultset(uint8_t seq, bool deprecate_eof, uint16_t status,
                      size_t ncols, const char *const *names, size_t nrows,
                      const char *const *values)
{
    return sl_mdb_make_resultset_for(seq,
                                     deprecate_eof ? SL_CAP_DEPRECATE_EOF
                                                   : 0,
                                     status, ncols, names, nrows, values);
}

struct sl_buf *
sl_mdb_make_resultset_for(uint8_t seq, uint64_t client_caps, uint16_t status,
                          size_t ncols, const char *const *names,
                          size_t nrows, const char *const *values)
{
    bool deprecate_eof = (client_caps & SL_CAP_DEPRECATE_EOF) != 0;
    bool ext_meta = (client_caps & SL_CAP_MARIADB_EXTENDED_METADATA) != 0;
    struct sl_buf *out = sl_buf_new();
    unsigned char p[9];
    int rc;

    if (out == NULL || ncols == 0) {
        sl_buf_free(out);
        return NULL;
    }
    rc = rs_packet(out, &seq, p, sl_mdb_put_lenenc(p, ncols));
    for (size_t c = 0; rc == 0 && c < ncols; c++) {
        rc = rs_coldef(out, &seq, names[c], ext_meta);
    }
    if (rc == 0 && !deprecate_eof) {
        rc = rs_eof(out, &seq, false, status);
    }
    for (size_t r = 0; rc == 0 && r < nrows; r++) {
        rc = rs_row(out, &seq, ncols, values + r * ncols);
    }
    if (rc == 0) {
        rc = rs_eof(out, &seq, deprecate_eof, status);
    }
    if (rc != 0) {
        sl_buf_free(out);
        return NULL;
    }
    return out;
}

struct sl_buf *
sl_mdb_make_query(const char *sql, size_t len)
{
    struct sl_buf *buf;
    unsigned char *p = malloc(len + 1);

    if (p == NULL) {
        return NULL;
    }
    p[0] = SL_COM_QUERY;
    memcpy(p + 1, sql, len);
    buf = sl_mdb_make_packet(0, p, len + 1);
    free(p);
    return buf;
}

bool
sl_mdb_parse_err(const unsigned char *payload, size_t len, uint16_t *code,
                 char sqlstate[6], const char **msg, size_t *msg_len)
{
    size_t off = 3;

    if (len < 3 || payload[0] != 0xff) {
        return false;
    }
    *code = (uint16_t)(payload[1] | (payload[2] << 8));
    if (len >= 9 && payload[3] == '#') {
        memcpy(sqlstate, payload + 4, 5);
        off = 9;
    } else {
        memcpy(sqlstate, "HY000", 5);
    }
    sqlstate[5] = '\0';
    *msg = (const char *)payload + off;
    *msg_len = len - off;
    return true;
}
